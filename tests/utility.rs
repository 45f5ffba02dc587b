//! What a private recommendation is worth (docs/utility.md): the held-out-users protocol of
//! LightGCN files, the tuner reading only calibration users, the tuned serving law, and the
//! baselines of `recsel evaluate` and `recsel select`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util::{assert_audit_consistent, assert_audit_flags, ok, recsel, stdout};
use recsel::data::heldout::held_out_groups;
use recsel::data::{
    calibration_users, load_dataset_with, DataSource, Format, LoadOptions, ValidationUsers,
};
use recsel::evaluate::tuning::krr_hit;
use recsel::recommend::tuned::{tuned_config, Tuning};
use recsel::recommend::Recommender;
use recsel::rng::NoiseMode;

type Rows = BTreeMap<u32, Vec<u32>>;

fn read_rows(path: &Path) -> Rows {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut t = l.split_whitespace().map(|v| v.parse::<u32>().unwrap());
            t.next().map(|u| (u, t.collect()))
        })
        .collect()
}

fn write_rows(path: &Path, rows: &Rows) {
    let text: String = rows
        .iter()
        .map(|(u, items)| {
            let items: Vec<String> = items.iter().map(u32::to_string).collect();
            format!("{u} {}\n", items.join(" "))
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

/// The synthetic data written as LightGCN files (2,535 users with test items), in
/// `root/name/data` (the folder's name is the data set's name, the same for every variant).
fn lightgcn_dir(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name).join("data");
    ok(&[
        "export",
        "--dataset",
        "synthetic",
        "--test-users",
        "0.5",
        "--out",
        dir.to_str().unwrap(),
    ]);
    dir
}

/// The held-out groups `recsel fit --out` draws on these files (auto, split seed 42).
fn groups(dir: &Path) -> recsel::data::heldout::HeldOutGroups {
    let (train, test) = (
        read_rows(&dir.join("train.txt")),
        read_rows(&dir.join("test.txt")),
    );
    let n_users = *train.keys().chain(test.keys()).max().unwrap() as usize + 1;
    let eligible: Vec<usize> = (0..n_users as u32)
        .filter(|u| train.get(u).is_some_and(|r| !r.is_empty()))
        .filter(|u| test.get(u).is_some_and(|r| !r.is_empty()))
        .map(|u| u as usize)
        .collect();
    held_out_groups(n_users, &eligible, ValidationUsers::Auto, None, 42, None).unwrap()
}

/// Fits with a release, tunes (krr, and em and mgem's own rows), and returns (release.json,
/// tuning.json with the bytes of tuning.npz appended as text).
fn fit_and_tune(data: &Path, model: &Path) -> (String, String) {
    let (d, m) = (data.to_str().unwrap(), model.to_str().unwrap());
    // Exact statistics: the comparison is byte for byte, which the count noise would break; the
    // audit seed makes the release identifier (otherwise fresh OS randomness) the same in both.
    let fit = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args([
            "fit",
            "--format",
            "lightgcn",
            "--path",
            d,
            "--out",
            m,
            "--release-statistics",
            "exact-leaky",
        ])
        .env(recsel::rng::AUDIT_NOISE_SEED, "7")
        .output()
        .unwrap();
    assert!(
        fit.status.success(),
        "{}",
        String::from_utf8_lossy(&fit.stderr)
    );
    ok(&[
        "tune", "--model", m, "--format", "lightgcn", "--path", d, "--mech", "em,mgem",
    ]);
    let npz = std::fs::read(model.join("tuning.npz")).unwrap();
    (
        std::fs::read_to_string(model.join("release.json")).unwrap(),
        std::fs::read_to_string(model.join("tuning.json")).unwrap() + &format!("{npz:?}"),
    )
}

fn choices(tuning: &str) -> Vec<(String, String)> {
    let json = &tuning[..tuning.rfind("\n}").unwrap() + 2];
    let t: Tuning = serde_json::from_str(json).unwrap();
    t.rows
        .iter()
        .map(|r| (r.mechanism.clone(), r.candidates.to_string()))
        .collect()
}

fn source(dir: &Path) -> DataSource {
    DataSource::Path {
        format: Format::LightGcn,
        path: dir.to_path_buf(),
        columns: None,
    }
}

fn held_out_options() -> LoadOptions {
    LoadOptions {
        validation_users: Some(ValidationUsers::Auto),
        ..Default::default()
    }
}

/// The tuner reads only calibration users: rewriting every served (test) user's history and
/// held-out items leaves `release.json` and `tuning.json` byte-identical; rewriting the
/// calibration users' held-out items changes the choice (power: the check can fail).
#[test]
fn the_tuner_reads_only_calibration_users() {
    let tmp = tempfile::tempdir().unwrap();
    let base = lightgcn_dir(tmp.path(), "base");
    let g = groups(&base);
    // Shares 0.1 of the 2,535 users with a train and a test item, drawn user by user.
    assert_eq!((g.test.len(), g.validation.len()), (266, 252));
    let (release, tuning) = fit_and_tune(&base, &tmp.path().join("m-base"));
    let served = choices(&tuning);
    assert!(
        served.iter().any(|c| c.0 == "krr") && served.iter().any(|c| c.0 == "random"),
        "the tuning should choose a pool at some eps and the fixed item at others: {served:?}"
    );

    // The served users: every test user's train row and test row replaced by other test
    // users' rows (the same items overall, so the item columns stay).
    let (train0, test0) = (
        read_rows(&base.join("train.txt")),
        read_rows(&base.join("test.txt")),
    );
    let (mut train, mut test) = (train0.clone(), test0.clone());
    let k = g.test.len();
    for (i, &u) in g.test.iter().enumerate() {
        let (a, b) = (g.test[(i + 1) % k] as u32, g.test[(i + 2) % k] as u32);
        train.insert(u as u32, train0[&a].clone());
        test.insert(u as u32, test0[&b].clone());
    }
    let changed = tmp.path().join("served-changed").join("data");
    std::fs::create_dir_all(&changed).unwrap();
    write_rows(&changed.join("train.txt"), &train);
    write_rows(&changed.join("test.txt"), &test);
    assert_ne!(
        std::fs::read(changed.join("test.txt")).unwrap(),
        std::fs::read(base.join("test.txt")).unwrap()
    );
    let (release2, tuning2) = fit_and_tune(&changed, &tmp.path().join("m-served"));
    assert!(release == release2, "the release read a served user");
    assert!(
        tuning == tuning2,
        "the tuning read a served user:\n{tuning}\n{tuning2}"
    );

    // Power: the calibration users' held-out items all become the most popular item.
    let mut test = read_rows(&base.join("test.txt"));
    let mut counts = BTreeMap::new();
    for items in read_rows(&base.join("train.txt")).values() {
        for &j in items {
            *counts.entry(j).or_insert(0u64) += 1;
        }
    }
    let top = *counts
        .iter()
        .max_by_key(|(j, c)| (**c, std::cmp::Reverse(**j)))
        .unwrap()
        .0;
    for &u in &g.validation {
        test.insert(u as u32, vec![top]);
    }
    let cal = tmp.path().join("calibration-changed").join("data");
    std::fs::create_dir_all(&cal).unwrap();
    std::fs::copy(base.join("train.txt"), cal.join("train.txt")).unwrap();
    write_rows(&cal.join("test.txt"), &test);
    let (_, tuning3) = fit_and_tune(&cal, &tmp.path().join("m-cal"));
    assert_ne!(
        choices(&tuning3),
        served,
        "no power: the calibration users changed nothing"
    );
    assert!(choices(&tuning3).iter().all(|c| c.0 == "random"));
}

/// Held-out users on LightGCN files: test and validation users are disjoint and out of the fit,
/// keep their train row as history and their test row as held-out items; the fitted users' test
/// rows give the `heldout` counts; a release is calibrated on the validation users; a release
/// that would calibrate on served users is refused.
#[test]
fn held_out_users_are_neither_fitted_nor_served() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = lightgcn_dir(tmp.path(), "data");
    let g = groups(&dir);
    let data = load_dataset_with(&source(&dir), 42, &held_out_options()).unwrap();
    let (train, test) = (
        read_rows(&dir.join("train.txt")),
        read_rows(&dir.join("test.txt")),
    );
    assert_eq!(data.train.rows(), g.fit.len());
    assert_eq!(data.train.rows() + g.test.len() + g.validation.len(), 5_000);
    let ids: Vec<u32> = data
        .test_user_ids
        .iter()
        .map(|u| u.parse().unwrap())
        .collect();
    assert_eq!(ids, g.test.iter().map(|&u| u as u32).collect::<Vec<_>>());
    assert!(g
        .test
        .iter()
        .all(|u| !g.validation.contains(u) && !g.fit.contains(u)));
    for (row, &u) in g.test.iter().enumerate().take(20) {
        let input = data.test_input.outer_view(row).unwrap().indices().to_vec();
        let target = data.test_target.outer_view(row).unwrap().indices().to_vec();
        assert_eq!(input, train[&(u as u32)]);
        assert_eq!(target, test[&(u as u32)]);
    }
    let cal = calibration_users(&data, 42).unwrap();
    assert_eq!(cal.rows(), 252);
    assert_eq!(
        cal.heldout.outer_view(0).unwrap().indices(),
        &test[&(g.validation[0] as u32)][..]
    );
    let mut heldout = vec![0u64; data.n_items()];
    for &u in &g.fit {
        for &j in test.get(&(u as u32)).map(|v| &v[..]).unwrap_or(&[]) {
            heldout[j as usize] += 1;
        }
    }
    assert_eq!(data.heldout_popularity.as_deref(), Some(&heldout[..]));
    // The paper's protocol is unchanged without the option.
    let paper = load_dataset_with(&source(&dir), 42, &LoadOptions::default()).unwrap();
    assert_eq!(
        (paper.train.rows(), paper.test_input.rows()),
        (5_000, 2_535)
    );
    assert!(calibration_users(&paper, 42).is_none());

    let m = tmp.path().join("model");
    let d = dir.to_str().unwrap();
    ok(&[
        "fit",
        "--format",
        "lightgcn",
        "--path",
        d,
        "--out",
        m.to_str().unwrap(),
        "--release-statistics",
        "exact-leaky",
    ]);
    let release = recsel::recommend::Release::read(&m).unwrap();
    let c = &release.manifest.calibration;
    assert_eq!((c.population.as_str(), c.users), ("validation", 252));
    assert_eq!(release.heldout.as_deref(), Some(&heldout[..]));
    let o = recsel(&[
        "fit",
        "--format",
        "lightgcn",
        "--path",
        d,
        "--validation-users",
        "0",
        "--out",
        tmp.path().join("bad").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("calibrate the release on users it serves"));
}

/// `Recommender` with the tuned configuration serves the law the tuner computed: over the
/// calibration users, the exact per-user hit probabilities of krr over the tuned pool (from the
/// candidates the recommender builds) average to the tuning's calibration hit@1, and seeded
/// recommendations hit at that rate (|z| < 4.9, false failure ≈ 1e-6); the same counts reject the
/// law at 1.3 ε (power).
#[test]
fn tuned_recommendations_follow_the_tuned_law() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = lightgcn_dir(tmp.path(), "data");
    let model = tmp.path().join("model");
    fit_and_tune(&dir, &model);
    let tuning = Tuning::read(&model).unwrap();
    let row = tuning
        .rows
        .iter()
        .find(|r| r.epsilon == 2.0)
        .unwrap()
        .clone();
    assert_eq!(row.mechanism, "krr", "{row:?}");
    // The law below adds whatever public prior the row chose to krr's argmax, as the tuner and
    // `recommend` compute it (with the estimation part cut by each user's own history, this
    // fixture's row at ε = 2 has none).
    let rec = Recommender::load(&model, &tuned_config(2.5, NoiseMode::Fast)).unwrap();
    // A tuning file of the layout before priors (version 1: no prior fields) still reads, as
    // rows without a prior.
    let v1_dir = tmp.path().join("v1");
    std::fs::create_dir_all(&v1_dir).unwrap();
    std::fs::copy(model.join("release.json"), v1_dir.join("release.json")).unwrap();
    let mut v1: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("tuning.json")).unwrap()).unwrap();
    v1["format_version"] = 1.into();
    v1["config"]
        .as_object_mut()
        .unwrap()
        .remove("prior_weights");
    for r in v1["rows"].as_array_mut().unwrap() {
        for k in ["prior", "best_prior", "best_no_prior_hit"] {
            r.as_object_mut().unwrap().remove(k);
        }
    }
    std::fs::write(v1_dir.join("tuning.json"), v1.to_string()).unwrap();
    let old = Tuning::read(&v1_dir).unwrap();
    assert!(old
        .rows
        .iter()
        .all(|r| r.prior == recsel::scoring::Prior::None));
    assert_eq!(old.config.prior_weights, vec![0.0]);
    assert_eq!(rec.epsilon(), Some(2.0));
    assert!(rec.user_level());
    assert!(rec.privacy_statement().contains("tuned (tuning.json)"));
    let data = load_dataset_with(&source(&dir), 42, &held_out_options()).unwrap();
    let cal = calibration_users(&data, 42).unwrap();
    let law = |eps: f64, u: usize, scratch: &mut recsel::recommend::RecScratch| -> f64 {
        let h = cal.history.outer_view(u).unwrap().indices().to_vec();
        let t = cal.heldout.outer_view(u).unwrap().indices().to_vec();
        let c = rec.candidates(&h, scratch);
        let max = c.scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let set: Vec<u32> = (0..c.items.len())
            .filter(|&a| c.scores[a] == max)
            .map(|a| c.items[a])
            .collect();
        let hits = c.items.iter().filter(|j| t.contains(j)).count() as f64;
        let a = set.iter().filter(|j| t.contains(j)).count() as f64 / set.len() as f64;
        krr_hit(hits, a, c.items.len(), eps)
    };
    let mut scratch = rec.scratch();
    // The row's calibration hit@1 is its estimate on the estimation part of the calibration
    // users (the part its choice did not read).
    let (_, est) = recsel::evaluate::tuning::estimate::parts(&cal);
    let n = est.len();
    let p: Vec<f64> = est.iter().map(|&u| law(2.0, u, &mut scratch)).collect();
    let mean = p.iter().sum::<f64>() / n as f64;
    assert!(
        (mean - row.calibration_hit).abs() < 1e-12,
        "{mean} vs {row:?}"
    );
    let reps = 500u64;
    let mut draws = rec.draws_seeded(17).unwrap();
    let mut hits = 0u64;
    for &u in &est {
        let h = cal.history.outer_view(u).unwrap().indices().to_vec();
        let t = cal.heldout.outer_view(u).unwrap().indices().to_vec();
        for r in 0..reps {
            let j = rec
                .recommend(&h, u as u64 * 1_000 + r, &mut draws, &mut scratch)
                .unwrap()
                .unwrap();
            hits += u64::from(t.contains(&j));
        }
    }
    let z = |p: &[f64]| {
        let e: f64 = p.iter().map(|x| x * reps as f64).sum();
        let v: f64 = p.iter().map(|x| x * (1.0 - x) * reps as f64).sum();
        (hits as f64 - e) / v.sqrt()
    };
    assert!(z(&p).abs() < 4.9, "z = {} against the tuned law", z(&p));
    let wrong: Vec<f64> = est.iter().map(|&u| law(2.6, u, &mut scratch)).collect();
    assert!(
        z(&wrong).abs() > 4.9,
        "no power: z = {} at 1.3 eps",
        z(&wrong)
    );
}

/// `recsel evaluate` writes the table with the baselines, the non-private top-1, the tuned and
/// untuned private rows and the limit; `recsel select --dataset synthetic` prints the baselines
/// beside the mechanisms; a tuning made for another release, or a missing one, is an error.
#[test]
fn evaluate_and_select_show_the_baselines() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("model");
    let ms = m.to_str().unwrap();
    let data = ["--dataset", "synthetic", "--validation-users", "0.1"];
    let mut fit = vec!["fit"];
    fit.extend(data);
    fit.extend(["--out", ms]);
    ok(&fit);
    // No tuning yet: recommend without --mech says what to do.
    let o = recsel(&[
        "recommend",
        "--model",
        ms,
        "--eps",
        "1",
        "--history",
        "3,17",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("recsel tune"));
    let out = tmp.path().join("utility");
    let mut eval = vec!["evaluate", "--model", ms];
    eval.extend(data);
    eval.extend(["--mech", "em,mgem", "--eps", "0.5,2", "--trials", "2"]);
    eval.extend(["--out", out.to_str().unwrap()]);
    let text = stdout(&ok(&eval));
    for want in [
        "popular: the most popular training item",
        "popular-sampled",
        "best fixed item of the calibration users",
        "non-private top-1 of the model (eps = inf, NOT private)",
        "krr, tuned",
        "em, tuned pool and clip range",
        "em, tuned pool, clip range and popularity prior",
        "mgem, tuned pool, clip range and popularity prior",
        "mgem, every item",
        "limit min(1, e^ε × best fixed item)",
        "the best public baseline",
    ] {
        assert!(text.contains(want), "missing '{want}' in:\n{text}");
    }
    assert!(out.join("frontier.png").is_file());
    let t: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("utility.json")).unwrap()).unwrap();
    // Test users drawn with a share of 0.1 among the 5,000 (513 with seed 42).
    assert_eq!(t["users"], 513);
    // Baselines and top-1, tuned krr, per mechanism every item / tuned / tuned with a prior, krr
    // over every item.
    // The most held-out item is a baseline when the release carries held-out counts.
    let heldout = |t: &serde_json::Value| {
        usize::from(
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["mechanism"] == "heldout"),
        )
    };
    assert_eq!(
        t["rows"].as_array().unwrap().len(),
        4 + heldout(&t) + 1 + 3 * 2 + 1
    );
    // Every served row carries its calibration estimate beside its test hit@1.
    for r in t["rows"].as_array().unwrap() {
        let served = r["tuned"] == true && r["kind"] == "private";
        for c in r["cells"].as_array().unwrap() {
            assert_eq!(c["calibration"].is_object(), served, "{r}");
        }
    }
    // A model directory has its model: the per-fold model options are an error, not ignored.
    let mut bad = vec!["evaluate", "--model", ms, "--l2", "50"];
    bad.extend(data);
    let o = recsel(&bad);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--l2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Without prior weights, no prior rows.
    let mut eval = vec!["evaluate", "--model", ms];
    eval.extend(data);
    eval.extend([
        "--mech",
        "em",
        "--eps",
        "2",
        "--prior-weights",
        "0",
        "--json",
    ]);
    let plain = tmp.path().join("utility-no-prior");
    eval.extend(["--out", plain.to_str().unwrap()]);
    let t: serde_json::Value = serde_json::from_str(&stdout(&ok(&eval))).unwrap();
    assert_eq!(
        t["rows"].as_array().unwrap().len(),
        4 + heldout(&t) + 1 + 2 + 1,
        "{t}"
    );

    let mut tune = vec!["tune", "--model", ms, "--mech", "em"];
    tune.extend(data);
    ok(&tune);
    let rec = ok(&[
        "recommend",
        "--model",
        ms,
        "--eps",
        "2",
        "--history",
        "3,17",
        "--seed",
        "1",
    ]);
    assert!(!stdout(&rec).trim().is_empty());
    // A release written again after tuning: the tuning no longer belongs to it.
    let manifest = m.join("release.json");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push('\n');
    std::fs::write(&manifest, text).unwrap();
    let o = recsel(&[
        "recommend",
        "--model",
        ms,
        "--eps",
        "2",
        "--history",
        "3,17",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("made for another release"));

    let sel = stdout(&ok(&[
        "select",
        "--dataset",
        "synthetic",
        "--mech",
        "mgem,krr",
        "--eps",
        "1,8",
        "--trials",
        "2",
        "--seed",
        "1",
        "--out",
        tmp.path().join("select").to_str().unwrap(),
    ]));
    for want in [
        "hit@1, free ",
        "\npopular                  0 ",
        "\npop-sampled              0 ",
        "\nbest fixed               0 ",
        "\ntop-1 (NP)     NOT private ",
        "\nlimit          e^eps*fixed ",
        "(s.e.: popular ",
        "best eps-DP mechanism",
    ] {
        assert!(sel.contains(want), "select output lacks '{want}':\n{sel}");
    }
    assert!(tmp.path().join("select/baselines.json").is_file());
}

/// Every configuration the tuner can choose is user-level ε-DP end to end (`recsel audit
/// --end-to-end`'s audit, docs/utility.md "Why each keeps the guarantee"): krr over `popular:N`
/// and `heldout:N` for sizes across the tuner's grid, the fixed item (`random` over
/// `popular:1`, 0-DP), and the `tuned` mechanism itself at several ε — every ε_LB at most the
/// claim. Power: the same audit, seed and samples flag krr over a pool chosen from the user's
/// own scores (`history-top:5`) with ε_LB > 2.
#[test]
fn every_configuration_the_tuner_can_choose_passes_the_end_to_end_audit() {
    use recsel::audit::end_to_end::{audit_end_to_end, EndToEndConfig};
    use recsel::mechanisms::MechParams;
    use recsel::recommend::RecommendConfig;
    use recsel::scoring::CandidatePolicy;

    let tmp = tempfile::tempdir().unwrap();
    let dir = lightgcn_dir(tmp.path(), "data");
    let model = tmp.path().join("model");
    fit_and_tune(&dir, &model);
    let data = load_dataset_with(&source(&dir), 42, &held_out_options()).unwrap();
    let users: Vec<(String, Vec<u32>)> = (0..data.test_input.rows())
        .map(|u| {
            let h = data.test_input.outer_view(u).unwrap().indices().to_vec();
            (data.test_user_ids[u].clone(), h)
        })
        .collect();
    let cfg = EndToEndConfig::new(20_000, 1e-6, 11, 3).unwrap();
    let fixed = |mech: &str, eps: f64, policy: CandidatePolicy| {
        let params = MechParams {
            epsilon: eps,
            ..Default::default()
        };
        RecommendConfig::new(mech, params, NoiseMode::Fast).with_candidates(policy)
    };
    let mut configs = vec![fixed("random", 1.0, CandidatePolicy::Popular(1))];
    for n in [2, 5, 30, 200, 1000] {
        configs.push(fixed("krr", 1.0, CandidatePolicy::Popular(n)));
        configs.push(fixed("krr", 1.0, CandidatePolicy::Heldout(n)));
    }
    // The public popularity prior the tuner may add to krr's argmax, at its smallest and
    // largest default weight.
    for w in [
        recsel::evaluate::tuning::DEFAULT_PRIOR_WEIGHTS[1],
        *recsel::evaluate::tuning::DEFAULT_PRIOR_WEIGHTS
            .last()
            .unwrap(),
    ] {
        for n in [2, 30] {
            configs.push(
                fixed("krr", 1.0, CandidatePolicy::Popular(n))
                    .with_prior(recsel::scoring::Prior::Popularity(w)),
            );
        }
    }
    for eps in [0.5, 2.0, 8.0] {
        configs.push(tuned_config(eps, NoiseMode::Fast));
    }
    for rc in &configs {
        let rec = Recommender::load(&model, rc).unwrap();
        let r = audit_end_to_end(&rec, &users, &cfg, &|_| {}).unwrap();
        let what = format!(
            "{} {} prior {} ({:?})",
            rc.mechanism,
            r.candidates,
            rc.prior,
            rec.tuned()
        );
        assert_audit_consistent(&r, r.claimed, &what);
    }
    // Power: a pool chosen from the user's own scores.
    let mut leak = fixed("krr", 1.0, CandidatePolicy::HistoryTop(5));
    leak.allow_non_private = true;
    let rec = Recommender::load(&model, &leak).unwrap();
    let r = audit_end_to_end(&rec, &users, &cfg, &|_| {}).unwrap();
    assert_audit_flags(&r, 2.0, "krr over history-top:5");
}
