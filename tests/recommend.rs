//! `recsel recommend` end to end (docs/deployment.md, "Serving"): fit on synthetic data, write the
//! release artifact, recommend for a users file.

use std::path::Path;

use crate::util::{fit_synthetic, recsel, succeeded, SYNTHETIC_MODEL};
use recsel::mechanisms::MechParams;
use recsel::recommend::{RecommendConfig, Recommender};
use recsel::rng::NoiseMode;
use recsel::scoring::CandidatePolicy;

/// (user, item) rows of a recommendations CSV, header checked.
fn read_recs(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("user,item"));
    lines
        .map(|l| {
            let (u, i) = l.split_once(',').unwrap();
            (u.to_string(), i.to_string())
        })
        .collect()
}

const TOP: usize = 50;

/// The recommend path with the paper's candidates (`history-top:50`, a reference run): one item
/// per user, never in the user's history, always among the user's top-50 candidates (recomputed
/// through the library), identical for the same seed and different across seeds; the same users in
/// jsonl and parquet give the same items as in csv (draws are keyed by user id, not file
/// position); the secure path also picks from the candidates; every run says that candidate
/// membership is not protected; a mechanism that is not ε-DP is refused; the default policy
/// (every item) is user-level; the replaced `--top` and `--include-history` are errors that point
/// to `--candidates`.
#[test]
fn recommend_serves_one_private_item_per_user_from_its_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    let m = model.to_str().unwrap();
    fit_synthetic(&model, SYNTHETIC_MODEL);
    for f in ["model.json", "release.json", "calibration.npz"] {
        assert!(model.join(f).exists(), "fit --out wrote no {f}");
    }
    // The served users: 60 test users of the same split (the release was calibrated on others).
    let data = recsel::recommend::example_data().unwrap();
    let mut csv = String::from("user,item\n");
    let mut jsonl = String::new();
    let mut histories: Vec<(String, Vec<u32>)> = Vec::new();
    for u in 0..60 {
        let items: Vec<u32> = data.test_input.outer_view(u).unwrap().indices().to_vec();
        let id = format!("u{u}");
        let ids: Vec<&str> = items
            .iter()
            .map(|&j| data.item_ids[j as usize].as_str())
            .collect();
        for i in &ids {
            csv.push_str(&format!("{id},{i}\n"));
        }
        jsonl.push_str(&serde_json::json!({ "user": id, "items": ids }).to_string());
        jsonl.push('\n');
        histories.push((id, items));
    }
    let users_csv = tmp.path().join("users.csv");
    std::fs::write(&users_csv, csv).unwrap();
    let users_jsonl = tmp.path().join("users.jsonl");
    std::fs::write(&users_jsonl, jsonl).unwrap();
    let top = format!("history-top:{TOP}");
    let run = |users: &Path, seed: &str, out: &str| -> std::path::PathBuf {
        let out = tmp.path().join(out);
        let o = succeeded(recsel(&[
            "recommend",
            "--model",
            m,
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--candidates",
            &top,
            "--allow-non-private",
            "--users",
            users.to_str().unwrap(),
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
        ]));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("NOT user-level private: candidate membership is not protected")
                && err.contains("only the choice among the candidates is 1-DP (mgem)")
                && err.contains("0 of 60 recommended items (0.0%) were already in the user's"),
            "{err}"
        );
        out
    };
    let a = read_recs(&run(&users_csv, "7", "a.csv"));
    let b = read_recs(&run(&users_csv, "7", "b.csv"));
    let c = read_recs(&run(&users_csv, "8", "c.csv"));
    let j = read_recs(&run(&users_jsonl, "7", "j.csv"));
    assert_eq!(a.len(), histories.len(), "one row per user");
    let mut cfg = RecommendConfig::new(
        "mgem",
        MechParams::default().with_epsilon(1.0),
        NoiseMode::Fast,
    )
    .with_candidates(CandidatePolicy::HistoryTop(TOP));
    // The leaky policy is refused without the explicit permission.
    let e = Recommender::load(&model, &cfg).unwrap_err().to_string();
    assert!(
        e.contains("not protected") && e.contains("history-top:50"),
        "{e}"
    );
    cfg.allow_non_private = true;
    let rec = Recommender::load(&model, &cfg).unwrap();
    let mut scratch = rec.scratch();
    let check =
        |recs: &[(String, String)], what: &str, scratch: &mut recsel::recommend::RecScratch| {
            for ((user, item), (id, history)) in recs.iter().zip(&histories) {
                assert_eq!(user, id, "{what}: users in input order");
                let j = rec
                    .item_index(item)
                    .unwrap_or_else(|| panic!("{what}: unknown item {item}"));
                assert!(
                    !history.contains(&j),
                    "{what}: {user} got {item}, which is in the history"
                );
                let cand = rec.candidates(history, scratch);
                assert_eq!(cand.items.len(), TOP);
                assert!(
                    cand.items.contains(&j),
                    "{what}: {user} got {item}, not among the top {TOP} candidates"
                );
            }
        };
    check(&a, "seed 7", &mut scratch);
    check(&c, "seed 8", &mut scratch);
    assert_eq!(a, b, "same seed, same recommendations");
    assert_eq!(
        a, j,
        "jsonl and csv users files give the same recommendations"
    );
    let differ = a.iter().zip(&c).filter(|(x, y)| x.1 != y.1).count();
    assert!(differ > 0, "seeds 7 and 8 gave identical recommendations");
    // Power of the candidate check: the top-50 lists leave out most of the 1,500 items.
    assert!(rec.n_items() > 10 * TOP);
    // Parquet output of the secure path: items still from the candidates.
    let out = tmp.path().join("s.parquet");
    succeeded(recsel(&[
        "recommend",
        "--model",
        m,
        "--mech",
        "cgem",
        "--eps",
        "0.5",
        "--candidates",
        &top,
        "--allow-non-private",
        "--users",
        users_jsonl.to_str().unwrap(),
        "--secure",
        "--out",
        out.to_str().unwrap(),
    ]));
    let back = tmp.path().join("s.csv");
    {
        use polars::prelude::{CsvWriter, ParquetReader, SerReader, SerWriter};
        let mut df = ParquetReader::new(std::fs::File::open(&out).unwrap())
            .finish()
            .unwrap();
        let mut buf = Vec::new();
        CsvWriter::new(&mut buf).finish(&mut df).unwrap();
        std::fs::write(&back, buf).unwrap();
    }
    check(&read_recs(&back), "secure cgem", &mut scratch);
    // One history, mechanism `mech` at eps 1 with `extra` arguments.
    let one = |mech: &str, extra: &[&str]| {
        let mut args = vec![
            "recommend",
            "--model",
            m,
            "--mech",
            mech,
            "--eps",
            "1",
            "--history",
            "1,2,3",
            "--seed",
            "1",
        ];
        args.extend_from_slice(extra);
        recsel(&args)
    };
    // Not ε-DP at k = 50: refused without --allow-non-private.
    let o = one("rnmh-laplace", &["--candidates", "popular:50"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("only 49-DP at 50 candidates"), "{err}");
    let o = succeeded(one(
        "rnmh-laplace",
        &["--candidates", "popular:50", "--allow-non-private"],
    ));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("NOT user-level private: rnmh-laplace is only 49-DP"),
        "{err}"
    );
    // history-top without the permission: refused, naming the leak.
    let o = one("mgem", &["--candidates", &top]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not protected"), "{err}");
    // The default, every item a candidate (and the public lists): user-level.
    for extra in [&[][..], &["--candidates", "popular:100"][..]] {
        let o = succeeded(one("mgem", extra));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("user-level 1-DP per recommendation (mgem)")
                && err.contains("with respect to the user's whole history"),
            "{extra:?}: {err}"
        );
    }
    // The replaced options say what replaces them.
    for (old, want) in [
        (
            &["--top", "50"][..],
            "--candidates history-top:50 --allow-non-private",
        ),
        (&["--include-history"][..], "replaced by --candidates"),
    ] {
        let o = one("mgem", old);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{old:?}: {err}");
    }
}

/// Bad users files are errors naming the file, the line and the value; a changed model file is
/// caught by the release's checksum.
#[test]
fn recommend_names_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    recsel::recommend::example_release(&dir).unwrap();
    let m = dir.to_str().unwrap();
    // `recsel recommend` with gem at eps 1, seed 1 and `input` (`--users FILE` or `--history`).
    let run = |input: &[&str]| {
        let mut args = vec![
            "recommend",
            "--model",
            m,
            "--mech",
            "gem",
            "--eps",
            "1",
            "--seed",
            "1",
        ];
        args.extend_from_slice(input);
        recsel(&args)
    };
    let fails = |input: &[&str], want: &[&str]| {
        let o = run(input);
        assert!(!o.status.success(), "{input:?} should fail");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        for w in want {
            assert!(err.contains(w), "{input:?}: no {w:?} in {err}");
        }
    };
    let users = tmp.path().join("u.csv");
    std::fs::write(&users, "user,item\na,1\na,2\nb,no-such-item\n").unwrap();
    let users = users.to_str().unwrap();
    fails(&["--users", users], &["u.csv line 4", "'no-such-item'"]);
    let jl = tmp.path().join("u.jsonl");
    std::fs::write(
        &jl,
        "{\"user\": \"a\", \"items\": [1, 2]}\n{\"user\": \"b\"}\n",
    )
    .unwrap();
    let jls = jl.to_str().unwrap();
    fails(&["--users", jls], &["u.jsonl line 2", "no \"items\""]);
    // The good line alone works, on stdout as CSV.
    std::fs::write(&jl, "{\"user\": \"a\", \"items\": [1, 2]}\n").unwrap();
    let o = succeeded(run(&["--users", jls]));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("user,item\na,"), "{out}");
    // A model file changed after the release was written.
    let meta = dir.join("model.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(&meta, text.replacen("\"dataset\"", "\"dataset\" ", 1)).unwrap();
    fails(&["--history", "1"], &["model.json", "CRC-32"]);
}

/// The README's library example is the doc test of `recsel::recommend` (which compiles and runs
/// it), line for line without the doc test's hidden setup lines.
#[test]
fn readme_library_example_is_the_recommend_doc_test() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let after = readme
        .split("## Library")
        .nth(1)
        .expect("README has a Library section");
    let block = after
        .split("```rust\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a rust block in README's Library section");
    let src = std::fs::read_to_string(format!("{root}/src/recommend/mod.rs")).unwrap();
    let doc: Vec<&str> = src
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.strip_prefix("//!").unwrap())
        })
        .collect();
    let start = doc.iter().position(|l| *l == "```").unwrap() + 1;
    let end = start + doc[start..].iter().position(|l| *l == "```").unwrap();
    let visible: Vec<&str> = doc[start..end]
        .iter()
        .copied()
        .filter(|l| !(l.starts_with("# ") || *l == "#"))
        .collect();
    let readme_lines: Vec<&str> = block.lines().collect();
    assert_eq!(
        readme_lines, visible,
        "README's library example differs from the doc test in src/recommend/mod.rs"
    );
}

/// Each candidate policy picks from its own list: `popular:N` from the N most popular training
/// items (counted here from the data, against the release's stored counts), `pool:FILE` from the
/// file's items, `all` from every item with the history included (its candidates hold the
/// history's items); a pool file with an unknown id is an error naming the file and the line; a
/// version-1 release (no popularity) still serves `all` and refuses `popular:N` with a message that
/// says how to rewrite it.
#[test]
fn candidate_policies_pick_from_their_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    let data = recsel::recommend::example_release(&dir).unwrap();
    let n = data.n_items();
    let mut counts = vec![0u64; n];
    for &j in data.train.indices() {
        counts[j as usize] += 1;
    }
    let release = recsel::recommend::Release::read(&dir).unwrap();
    assert_eq!(release.popularity.as_deref(), Some(&counts[..]));
    assert_eq!(
        release.manifest.format_version,
        recsel::recommend::release::RELEASE_VERSION
    );
    // Synthetic data has no held-out part in its training rows: no `heldout` counts.
    assert_eq!(release.heldout, None);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let popular: Vec<u32> = order[..20].iter().map(|&j| j as u32).collect();
    let pool_ids: Vec<&str> = (0..10)
        .map(|i| data.item_ids[7 + 31 * i].as_str())
        .collect();
    let pool_file = tmp.path().join("pool.txt");
    std::fs::write(
        &pool_file,
        format!("# a public pool\n{}\n", pool_ids.join("\n")),
    )
    .unwrap();
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    let histories: Vec<Vec<u32>> = (0..200)
        .map(|u| data.test_input.outer_view(u).unwrap().indices().to_vec())
        .collect();
    let picks = |policy: CandidatePolicy| -> (Recommender, Vec<u32>) {
        let cfg =
            RecommendConfig::new("mgem", params.clone(), NoiseMode::Fast).with_candidates(policy);
        let rec = Recommender::load(&dir, &cfg).unwrap();
        assert!(rec.user_level());
        let mut draws = rec.draws_seeded(5).unwrap();
        let mut scratch = rec.scratch();
        let p = histories
            .iter()
            .enumerate()
            .map(|(u, h)| {
                rec.recommend(h, u as u64, &mut draws, &mut scratch)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        (rec, p)
    };
    let (rec, p) = picks(CandidatePolicy::Popular(20));
    assert!(p.iter().all(|j| popular.contains(j)), "popular:20 picks");
    let mut scratch = rec.scratch();
    let mut c = rec.candidates(&histories[0], &mut scratch).items;
    c.sort_unstable();
    let mut want = popular.clone();
    want.sort_unstable();
    assert_eq!(c, want);
    let (rec, p) = picks(CandidatePolicy::Pool(pool_file.clone()));
    let pool_cols: Vec<u32> = pool_ids
        .iter()
        .map(|i| rec.item_index(i).unwrap())
        .collect();
    assert!(p.iter().all(|j| pool_cols.contains(j)), "pool picks");
    let (rec, p) = picks(CandidatePolicy::All);
    let mut scratch = rec.scratch();
    let c = rec.candidates(&histories[0], &mut scratch);
    assert_eq!(c.items.len(), n);
    assert!(histories[0].iter().all(|j| c.items.contains(j)));
    // Power of the pool and popular checks: `all` picks outside both lists.
    assert!(p
        .iter()
        .any(|j| !pool_cols.contains(j) && !popular.contains(j)));
    // A pool naming an unknown item: file and line.
    std::fs::write(&pool_file, "# pool\n3\nnot-an-item\n").unwrap();
    let cfg = RecommendConfig::new("mgem", params.clone(), NoiseMode::Fast)
        .with_candidates(CandidatePolicy::Pool(pool_file.clone()));
    let e = Recommender::load(&dir, &cfg).unwrap_err().to_string();
    assert!(
        e.contains("pool.txt line 3") && e.contains("'not-an-item'"),
        "{e}"
    );
    // `heldout:N` needs the held-out counts, which this release does not carry.
    let cfg = RecommendConfig::new("mgem", params.clone(), NoiseMode::Fast)
        .with_candidates(CandidatePolicy::Heldout(5));
    let e = Recommender::load(&dir, &cfg).unwrap_err().to_string();
    assert!(
        e.contains("heldout:5") && e.contains("--validation-users"),
        "{e}"
    );
    // A version-2 release (written before `heldout`) is still read.
    let manifest = dir.join("release.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("\"format_version\": 4", "\"format_version\": 2"),
    )
    .unwrap();
    let v2 = recsel::recommend::Release::read(&dir).unwrap();
    assert_eq!(v2.manifest.format_version, 2);
    assert!(v2.popularity.is_some());
    // A version-1 release: no popularity.
    let mut old = recsel::recommend::Release::read(&dir).unwrap();
    old.popularity = None;
    old.write(&dir).unwrap();
    let back = recsel::recommend::Release::read(&dir).unwrap();
    assert_eq!((back.manifest.format_version, back.popularity), (1, None));
    let all = RecommendConfig::new("mgem", params.clone(), NoiseMode::Fast);
    Recommender::load(&dir, &all).unwrap();
    let e = Recommender::load(&dir, &all.with_candidates(CandidatePolicy::Popular(5)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("popularity") && e.contains("format version 1") && e.contains("recsel fit"),
        "{e}"
    );
}

/// Histories scored together (`Recommender::score_block`, in blocks of every size up to 40: one
/// user at a time, lanes of 8, lanes of 32 and mixtures) give each user the raw scores and, for
/// the same draws, the pick that `Recommender::recommend` gives that user alone — unsorted
/// histories with duplicates included, under every candidate policy.
#[test]
fn histories_scored_together_get_the_scores_and_picks_of_each_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    let data = recsel::recommend::example_release(&dir).unwrap();
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    let histories: Vec<Vec<u32>> = (0..60)
        .map(|u| {
            let mut h = data.test_input.outer_view(u).unwrap().indices().to_vec();
            h.reverse();
            h.extend(h.clone().iter().take(2));
            h
        })
        .collect();
    for policy in ["all", "history-top:50"] {
        let mut cfg = RecommendConfig::new("mgem", params.clone(), NoiseMode::Fast)
            .with_candidates(CandidatePolicy::parse(policy).unwrap());
        cfg.allow_non_private = true;
        let rec = Recommender::load(&dir, &cfg).unwrap();
        let mut scratch = rec.scratch();
        let alone: Vec<(Vec<f64>, Option<u32>)> = histories
            .iter()
            .enumerate()
            .map(|(u, h)| {
                let mut draws = rec.draws_seeded(u as u64).unwrap();
                let pick = rec.recommend(h, 3, &mut draws, &mut scratch).unwrap();
                (scratch.scores().to_vec(), pick)
            })
            .collect();
        // Power: the users' scores differ, so a block that mixed up its rows would be caught.
        assert_ne!(alone[0].0, alone[1].0);
        let mut block = recsel::recommend::ScoredBlock::default();
        for size in [1, 2, 5, 6, 8, 13, 16, 17, 31, 32, 40] {
            let users: Vec<&[u32]> = histories[..size].iter().map(Vec::as_slice).collect();
            rec.score_block(&users, &mut block);
            assert_eq!(block.len(), size);
            for (u, (scores, pick)) in alone[..size].iter().enumerate() {
                let mut draws = rec.draws_seeded(u as u64).unwrap();
                let got = rec
                    .recommend_scored(&block, u, 3, &mut draws, &mut scratch)
                    .unwrap();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(scratch.scores()),
                    bits(scores),
                    "{policy} block {size} user {u}"
                );
                assert_eq!(got, *pick, "{policy} block {size} user {u}");
            }
        }
    }
}

/// An edit of a release's `p1`, `p99` and `delta` arrays.
type Edit = dyn Fn(&mut [f64], &mut [f64], &mut [f64]);

/// Rewrites `dir`'s `calibration.npz` with `edit` applied to its `p1`, `p99` and `delta`, and
/// records the new file's size and CRC-32 in `release.json`, as the manifest requires: a release
/// that passes every checksum.
fn rewrite_calibration(dir: &Path, edit: &Edit) {
    use recsel::model::io::{crc32, npy_bytes, write_npz, NpyArray};
    let path = dir.join("calibration.npz");
    let mut entries = crate::util::npz_arrays(&path);
    let get = |entries: &[(String, NpyArray)], name: &str| match &entries
        .iter()
        .find(|(n, _)| n == name)
        .unwrap()
        .1
    {
        NpyArray::F64(v) => v.clone(),
        _ => panic!("{name} is not float64"),
    };
    let (mut p1, mut p99, mut delta) = (
        get(&entries, "p1.npy"),
        get(&entries, "p99.npy"),
        get(&entries, "delta.npy"),
    );
    edit(&mut p1, &mut p99, &mut delta);
    for (n, a) in entries.iter_mut() {
        match n.as_str() {
            "p1.npy" => *a = NpyArray::F64(p1.clone()),
            "p99.npy" => *a = NpyArray::F64(p99.clone()),
            "delta.npy" => *a = NpyArray::F64(delta.clone()),
            _ => {}
        }
    }
    let npy: Vec<(&str, Vec<u8>)> = entries
        .iter()
        .map(|(n, a)| (n.as_str(), npy_bytes(a)))
        .collect();
    let out = write_npz(&npy).unwrap();
    std::fs::write(&path, &out).unwrap();
    let mpath = dir.join("release.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    for f in m["files"].as_array_mut().unwrap() {
        if f["name"] == "calibration.npz" {
            f["bytes"] = serde_json::json!(out.len());
            f["crc32"] = serde_json::json!(crc32(&out));
        }
    }
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

/// A release whose sensitivities do not bound its clip range (every Δ_j = 1e-12; or p1/p99 =
/// ∓1e308 with Δ_j = 1e-6), its checksums updated, is refused by every reader — the library's
/// `Release::read` (under `recsel recommend`, Python and the audit), `recsel recommend` and
/// `recsel serve` — naming the item and its numbers. The untouched release is served.
#[test]
fn a_release_whose_sensitivities_do_not_bound_its_clip_range_is_refused_naming_the_item() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny: &Edit = &|_, _, d| d.fill(1e-12);
    let huge: &Edit = &|lo, hi, d| {
        lo.fill(-1e308);
        hi.fill(1e308);
        d.fill(1e-6);
    };
    let none: &Edit = &|_, _, _| {};
    for (case, edit) in [
        ("untouched", none),
        ("delta 1e-12", tiny),
        ("range 2e308", huge),
    ] {
        let dir = tmp.path().join(case.replace(' ', "-"));
        recsel::recommend::example_release(&dir).unwrap();
        rewrite_calibration(&dir, edit);
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("release.json")).unwrap()).unwrap();
        let id0 = manifest["item_ids"][0].as_str().unwrap().to_string();
        let history = format!(
            "{},{}",
            manifest["item_ids"][3].as_str().unwrap(),
            manifest["item_ids"][17].as_str().unwrap()
        );
        let m = dir.to_str().unwrap();
        let lib = recsel::recommend::release::Release::read(&dir);
        let cli = recsel(&[
            "recommend",
            "--model",
            m,
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--secure",
            "--history",
            &history,
        ]);
        #[cfg(feature = "serve")]
        let ledger = dir.join("ledger.db");
        #[cfg(feature = "serve")]
        let serve_args: Vec<String> = [
            "--model",
            m,
            "--ledger",
            ledger.to_str().unwrap(),
            "--budget",
            "10",
            "--mech",
            "mgem",
            "--eps",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if case == "untouched" {
            assert!(lib.is_ok(), "{:?}", lib.err());
            succeeded(cli);
            continue;
        }
        let want = ["item 0", &format!("'{id0}'"), "delta"];
        let err = lib
            .err()
            .unwrap_or_else(|| panic!("{case}: read"))
            .to_string();
        eprintln!("{case}: {err}");
        for w in want {
            assert!(err.contains(w), "{case}: no {w:?} in {err}");
        }
        assert!(!cli.status.success(), "{case}: recommend served it");
        let err = String::from_utf8_lossy(&cli.stderr);
        for w in want {
            assert!(err.contains(w), "{case}: recommend: no {w:?} in {err}");
        }
        #[cfg(feature = "serve")]
        {
            let out =
                crate::serve_guards::serve_for(&serve_args, std::time::Duration::from_secs(60))
                    .unwrap_or_else(|| panic!("{case}: serve still serving after 60 s"));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{case}: serve: {err}");
            for w in want {
                assert!(err.contains(w), "{case}: serve: no {w:?} in {err}");
            }
        }
    }
}

/// `recsel recommend --ledger` refuses `--seed`: a charged answer is drawn with fresh noise
/// (basic composition adds the eps of independent draws). Without the seed the same command
/// charges.
#[test]
fn recommend_with_a_ledger_refuses_a_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    recsel::recommend::example_release(&dir).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("release.json")).unwrap()).unwrap();
    let item = manifest["item_ids"][3].as_str().unwrap().to_string();
    let ledger = tmp.path().join("l.db");
    let base = [
        "recommend",
        "--model",
        dir.to_str().unwrap(),
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--history",
        &item,
        "--ledger",
        ledger.to_str().unwrap(),
        "--budget",
        "10",
        "--user",
        "u1",
        "--create-ledger",
    ];
    let mut with_seed = base.to_vec();
    with_seed.extend(["--seed", "3"]);
    let o = recsel(&with_seed);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("--seed") && err.contains("--secure"), "{err}");
    assert!(!ledger.exists(), "the ledger was created by a refused run");
    let o = succeeded(recsel(&base));
    assert!(!String::from_utf8_lossy(&o.stdout).trim().is_empty());
}
