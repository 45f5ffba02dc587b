//! What a served configuration is worth (docs/utility.md): `recsel tune` records each registry
//! mechanism's tuned row; `recommend --mech M` serves exactly the configuration `recsel
//! evaluate` measures as M's tuned row (same calibration users, same seed); an explicit
//! configuration is served as given and called untuned; a configuration below the free
//! baseline is flagged with a better one named, and the tuned configuration is not.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::util::{fit_synthetic, ok};
use recsel::data::{calibration_users, DataOptions, HeldOutRows};
use recsel::mechanisms::MechParams;
use recsel::options::OptionTable;
use recsel::recommend::tuning::Tuning;
use recsel::recommend::utility::{measure, table, UtilityConfig};
use recsel::recommend::utility_options::release_data;
use recsel::recommend::{RecommendConfig, Recommender, Standing};
use recsel::rng::NoiseMode;
use recsel::scoring::{CandidatePolicy, Prior};

/// Mechanisms tuned here: one exact (em), one simulated (mgem).
const MECHS: &str = "em,mgem";

/// Synthetic data fitted with validation users (`auto`) and tuned, once per test process.
pub(crate) fn model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let dir = t.join("model");
        let d = dir.to_str().unwrap();
        fit_synthetic(&dir, &["--validation-users", "auto"]);
        ok(&[
            "tune",
            "--model",
            d,
            "--dataset",
            "synthetic",
            "--validation-users",
            "auto",
            "--mech",
            MECHS,
        ]);
        dir
    })
}

fn config(mech: &str, eps: f64) -> RecommendConfig {
    let params = MechParams {
        epsilon: eps,
        ..Default::default()
    };
    let mut c = RecommendConfig::new(mech, params, NoiseMode::Fast);
    c.tuned_row = true;
    c
}

/// evaluate's description of a configuration (`popular:N, clip pLO/pHI[, prior W]`).
fn evaluate_text(r: &recsel::recommend::tuning::MechRow) -> String {
    let (lo, hi) = r.clip.expect("a grid mechanism's row has a clip range");
    match &r.prior {
        Prior::None => format!("{}, clip p{lo}/p{hi}", r.candidates),
        p => format!("{}, clip p{lo}/p{hi}, prior {p}", r.candidates),
    }
}

#[test]
fn recommend_serves_the_row_evaluate_measures_as_tuned() {
    let dir = model();
    let tuning = Tuning::read(dir).unwrap();
    assert_eq!(tuning.format_version, 4);
    assert!(!tuning.privacy.is_private());
    let eps = &tuning.config.epsilons;
    for m in ["em", "mgem"] {
        for &e in eps {
            assert!(
                tuning.mechanism_row(m, e).is_some(),
                "no row for {m} at {e}"
            );
        }
    }
    // evaluate on the same calibration users with the same grid and seed.
    let mut data = DataOptions::default();
    data.set("dataset", "synthetic").unwrap();
    data.set("validation_users", "auto").unwrap();
    let (ds, release) = release_data(dir, &data, 42).unwrap();
    let cal = calibration_users(&ds, 42).unwrap();
    let eval = HeldOutRows::test_users(&ds);
    let (model, _) = recsel::model::io::load(dir).unwrap();
    let cfg = UtilityConfig {
        epsilons: eps.clone(),
        mechanisms: vec!["em".into(), "mgem".into()],
        ..Default::default()
    };
    let t = table(vec![measure(
        &model,
        &release,
        Some(&tuning),
        &cal,
        &eval,
        &cfg,
        &|_| {},
    )
    .unwrap()])
    .unwrap();
    for m in ["em", "mgem"] {
        let row = t
            .rows
            .iter()
            .find(|r| r.label == format!("{m}, tuned pool, clip range and popularity prior"))
            .unwrap();
        for (i, &e) in eps.iter().enumerate() {
            let tuned = tuning.mechanism_row(m, e).unwrap();
            assert_eq!(row.cells[i].config, evaluate_text(tuned), "{m} at eps {e}");
            // What recommend --mech m --eps e serves: that pool, prior and clip bounds.
            let rec = Recommender::load(dir, &config(m, e)).unwrap();
            assert_eq!(rec.candidate_policy(), &tuned.candidates);
            let served_prior = rec.prior().map_or(Prior::None, |p| p.prior.clone());
            assert_eq!(served_prior, tuned.prior, "{m} at eps {e}");
            let bounds = tuning.bounds(dir, tuned.clip.unwrap()).unwrap();
            assert_eq!(rec.release().sens.lower, bounds.lower);
            assert_eq!(rec.release().sens.delta, bounds.delta);
            assert_eq!(rec.worth().standing, Standing::Tuned);
            assert_eq!(rec.worth().hit, Some(tuned.hit));
            // The tuned clip range is exact percentiles of the calibration users: the statement
            // and the report say so (a statement that claimed model-derived ranges would lie).
            let (lo, hi) = tuned.clip.unwrap();
            assert!(
                rec.privacy_statement()
                    .contains(&format!("tuned clip range p{lo}/p{hi}: EXACT percentiles")),
                "{}",
                rec.privacy_statement()
            );
            let report = rec.privacy_report();
            let part = report
                .parts
                .iter()
                .find(|p| p.part == "tuned clip range")
                .expect("the report names the tuned clip range");
            assert!(!part.privacy.is_private());
        }
    }
    // Given candidates: served as given, untuned; every item is the untuned configuration.
    let mut given = config("mgem", 1.0).with_candidates(CandidatePolicy::All);
    given.tuned_row = false;
    let rec = Recommender::load(dir, &given).unwrap();
    assert_eq!(rec.candidate_policy(), &CandidatePolicy::All);
    assert!(!rec.privacy_statement().contains("EXACT"));
    assert!(rec
        .privacy_report()
        .parts
        .iter()
        .all(|p| p.part != "tuned clip range"));
    assert_eq!(rec.release().sens.lower, release.sens.lower);
    let w = rec.worth();
    assert_eq!(w.standing, Standing::Untuned);
    assert_eq!(
        w.hit,
        Some(tuning.mechanism_row("mgem", 1.0).unwrap().untuned_hit)
    );
    // A pool nobody measured: untuned, not measured.
    let mut other = config("mgem", 1.0).with_candidates(CandidatePolicy::Popular(7));
    other.tuned_row = false;
    let w = Recommender::load(dir, &other).unwrap().worth().clone();
    assert_eq!((w.standing, w.hit), (Standing::Untuned, None));
    assert!(w.text().contains("not measured"), "{}", w.text());
    // Other parameters than the rows were tuned with: served as given, untuned.
    let mut beta = config("mgem", 1.0);
    beta.params = recsel::mechanisms::Registry::builtin()
        .resolve(&recsel::mechanisms::MechValues::new().with("beta", 0.2))
        .unwrap()
        .with_epsilon(1.0);
    let rec = Recommender::load(dir, &beta).unwrap();
    assert_eq!(rec.candidate_policy(), &CandidatePolicy::All);
    assert_eq!(rec.worth().standing, Standing::Untuned);
    assert!(
        rec.worth().text().contains("default parameters"),
        "{}",
        rec.worth().text()
    );
    // No row at this eps: today's default, untuned.
    let w = Recommender::load(dir, &config("mgem", 1.5))
        .unwrap()
        .worth()
        .clone();
    assert_eq!(w.standing, Standing::Untuned);
    assert!(w.text().contains("at eps"), "{}", w.text());
}

#[test]
fn a_configuration_below_the_free_item_is_flagged_and_the_tuned_one_is_not() {
    let dir = model();
    let d = dir.to_str().unwrap();
    let tuning = Tuning::read(dir).unwrap();
    // em over every item at eps 0.1 is (nearly) uniform over 1,500 items: far below the free item.
    let row = tuning.mechanism_row("em", 0.1).unwrap();
    assert!(row.untuned_gain.below(2.0), "{row:?}");
    let o = ok(&[
        "recommend",
        "--model",
        d,
        "--mech",
        "em",
        "--eps",
        "0.1",
        "--candidates",
        "all",
        "--history",
        "3,17,42",
        "--seed",
        "1",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("WARNING:"))
        .unwrap_or_else(|| panic!("no warning:\n{err}"));
    assert!(
        line.contains("em over every item") && line.contains("[untuned]"),
        "{line}"
    );
    assert!(line.contains("better: "), "{line}");
    // The tuned configuration never serves below the free item (the tuner's margin) and says
    // what it is worth without a warning; so does each row the tuner found not below it.
    for &e in &tuning.config.epsilons {
        let mut cfg = config("tuned", e);
        cfg.tuned_row = false;
        let rec = Recommender::load(dir, &cfg).unwrap();
        let w = rec.worth();
        assert!(!w.below_free, "{}", w.text());
        assert!(w.text().starts_with("worth: "), "{}", w.text());
        for m in ["em", "mgem"] {
            let r = tuning.mechanism_row(m, e).unwrap();
            let w = Recommender::load(dir, &config(m, e))
                .unwrap()
                .worth()
                .clone();
            assert_eq!(w.below_free, r.gain.below(2.0), "{}", w.text());
        }
    }
    // Without tuning.json: not measured, not tuned.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["model.json", "release.json", "calibration.npz"] {
        std::fs::copy(dir.join(f), tmp.path().join(f)).unwrap();
    }
    for f in std::fs::read_dir(dir).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        if !tmp.path().join(&name).exists() && !name.starts_with("tuning") {
            std::fs::copy(&f, tmp.path().join(&name)).unwrap();
        }
    }
    let w = Recommender::load(tmp.path(), &config("mgem", 1.0))
        .unwrap()
        .worth()
        .clone();
    assert_eq!((w.standing, w.hit), (Standing::NotTuned, None));
    assert!(w.text().contains("not measured"), "{}", w.text());
}

#[test]
fn a_tuning_of_version_2_still_reads_and_serves_named_mechanisms_untuned() {
    let dir = model();
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(dir).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let path = tmp.path().join("tuning.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["free", "mechanisms", "clip_ranges", "bounds_file"] {
        o.remove(k);
    }
    o.insert("format_version".into(), 2.into());
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    std::fs::remove_file(tmp.path().join("tuning.npz")).unwrap();
    let t = Tuning::read(tmp.path()).unwrap();
    assert!(t.mechanisms.is_empty() && t.free.is_none());
    let rec = Recommender::load(tmp.path(), &config("mgem", 1.0)).unwrap();
    assert_eq!(rec.candidate_policy(), &CandidatePolicy::All);
    assert_eq!(rec.worth().standing, Standing::Untuned);
    // The tuned configuration is still measured, its free baseline without a standard error.
    let w = Recommender::load(tmp.path(), &config("tuned", 1.0))
        .unwrap()
        .worth()
        .clone();
    assert!(w.hit.is_some(), "{}", w.text());
}
