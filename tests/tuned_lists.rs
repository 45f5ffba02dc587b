//! Tuned lists (docs/utility.md, "Tuning lists"): `recsel tune --k K` writes list rows that
//! record K, `recommend --k K` serves them (and refuses a length without rows), and every
//! estimate a list row reports is made on calibration users its choice did not read.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::util::{fit_synthetic, ok, recsel};
use recsel::data::{calibration_users, DataOptions, HeldOutRows};
use recsel::evaluate::options::release_data;
use recsel::evaluate::tuning::estimate::parts;
use recsel::evaluate::tuning::tune;
use recsel::mechanisms::MechParams;
use recsel::options::OptionTable;
use recsel::recommend::tuned::{Tuning, TUNED};
use recsel::recommend::{RecommendConfig, Recommender, Standing};
use recsel::rng::NoiseMode;

/// Synthetic data fitted with validation users and tuned with lists of 5 at eps 1 and 8, once
/// per test process.
fn model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let dir = t.join("model");
        fit_synthetic(&dir, &["--validation-users", "auto"]);
        ok(&[
            "tune",
            "--model",
            dir.to_str().unwrap(),
            "--dataset",
            "synthetic",
            "--validation-users",
            "auto",
            "--mech",
            "none",
            "--eps",
            "1,8",
            "--k",
            "5",
        ]);
        dir
    })
}

fn tuned(eps: f64, k: usize) -> RecommendConfig {
    let mut c = RecommendConfig::new(
        TUNED,
        MechParams {
            epsilon: eps,
            ..Default::default()
        },
        NoiseMode::Fast,
    );
    c.list_k = k;
    c
}

/// `tune --k 5` writes one list row per tuned eps, each recording k = 5; the library and
/// `recommend --k 5` serve the row (its mechanism, pool and released length, with the Recall@5
/// worth line); a length without rows is refused with the command that makes them.
#[test]
fn tune_k_writes_list_rows_and_recommend_k_reads_them() {
    let dir = model();
    let t = Tuning::read(dir).unwrap();
    assert_eq!(t.config.lists.k, vec![5]);
    assert_eq!(t.lists.len(), 2, "{:?}", t.lists);
    for (r, eps) in t.lists.iter().zip([1.0, 8.0]) {
        assert_eq!((r.k, r.epsilon), (5, eps));
        assert!(r.serves.released >= 5);
        assert!(r.recall.mean.is_finite() && r.free_recall.mean.is_finite());
        // A private list is served only with a gain above the margin; else the free list.
        if r.serves.is_public() {
            assert_eq!(r.serves, r.free);
            assert_eq!(r.spends, 0.0);
        } else {
            assert!(recsel::recommend::tuned::beats(&r.gain, r.margin));
            assert_eq!(r.spends, eps);
        }
    }
    let rec = Recommender::load(dir, &tuned(8.0, 5)).unwrap();
    let row = rec.tuned_list().expect("a tuned list").clone();
    assert_eq!(row, t.lists[1]);
    assert_eq!(rec.released_len(5).unwrap(), row.serves.released);
    assert!(rec.released_len(3).is_err());
    let w = rec.worth_for(5);
    assert_eq!(w.standing, Standing::Tuned);
    assert_eq!(w.metric, "Recall@5");
    assert_eq!(w.hit, Some(row.recall));
    let mut draws = rec.draws_seeded(1).unwrap();
    let mut scratch = rec.scratch();
    let list = rec
        .recommend_list(&[0, 1, 2], 5, 7, &mut draws, &mut scratch)
        .unwrap();
    assert_eq!(list.len(), row.serves.released);

    // The command line: the list of 5 shown, the worth line in Recall@5.
    let ids = &rec.release().manifest.item_ids;
    let history = format!("{},{},{}", ids[0], ids[1], ids[2]);
    let run = |k: &str| {
        recsel(&[
            "recommend",
            "--model",
            dir.to_str().unwrap(),
            "--eps",
            "8",
            "--k",
            k,
            "--history",
            &history,
            "--seed",
            "3",
        ])
    };
    let o = run("5");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    let shown: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .trim()
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(shown.len(), 5, "{shown:?}");
    assert!(err.contains("calibration Recall@5"), "{err}");
    if row.serves.released > 5 {
        assert!(shown.iter().all(|s| !history.split(',').any(|h| h == s)));
    }
    // Power: a length the tuning has no rows for is refused, naming the command.
    let o = run("3");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no tuned lists of 3") && err.contains("tune --k 3"),
        "{err}"
    );
}

/// Every number a list row reports is the estimation users': replacing what they held out with
/// an item no list shows leaves every choice (served, best private and best free list) as it was
/// and sets the free list's estimate to 0; the selection and estimation users are disjoint.
#[test]
fn the_tuned_list_is_estimated_on_users_the_choice_did_not_read() {
    let dir = model();
    let tuning = Tuning::read(dir).unwrap();
    let mut data = DataOptions::default();
    data.set("dataset", "synthetic").unwrap();
    data.set("validation_users", "auto").unwrap();
    let (ds, release) = release_data(dir, &data, 42).unwrap();
    let cal = calibration_users(&ds, 42).unwrap();
    let (model, _) = recsel::model::io::load(dir).unwrap();
    let (sel, est) = parts(&cal).unwrap();
    assert!(!sel.is_empty() && !est.is_empty());
    assert!(sel.iter().all(|u| !est.contains(u)));
    let t = tune(&model, &release, &cal, &tuning.config, &|_| {}).unwrap();
    // The tuning is reproducible (its numbers up to the JSON round trip).
    assert_eq!(t.lists.len(), tuning.lists.len());
    for (a, b) in t.lists.iter().zip(&tuning.lists) {
        assert_eq!((&a.serves, &a.free, &a.best), (&b.serves, &b.free, &b.best));
        assert!((a.recall.mean - b.recall.mean).abs() < 1e-12);
    }
    let pop = release.popularity.as_deref().unwrap();
    let rare = (0..pop.len()).min_by_key(|&j| pop[j]).unwrap() as u32;
    let rows: Vec<Vec<u32>> = (0..cal.rows())
        .map(|u| {
            if est.contains(&u) {
                vec![rare]
            } else {
                recsel::data::row_items(&cal.heldout, u).to_vec()
            }
        })
        .collect();
    let changed = HeldOutRows {
        heldout: recsel::data::csr_from_rows(&rows, model.n_items()),
        ..cal.clone()
    };
    let t2 = tune(&model, &release, &changed, &tuning.config, &|_| {}).unwrap();
    for (a, b) in t.lists.iter().zip(&t2.lists) {
        assert_eq!((&a.free, &a.best), (&b.free, &b.best), "eps {}", a.epsilon);
        assert!(a.free_recall.mean > 0.0, "{a:?}");
        assert_eq!(b.free_recall.mean, 0.0, "{b:?}");
    }
}
