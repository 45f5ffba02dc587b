//! EASE, SANSA (exact, icf), evaluation and model files (issue 4).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recsel::data::load::load_lightgcn;
use recsel::data::synthetic::SyntheticShape;
use recsel::data::{csr_from_pairs, load_dataset, Csr, DataSource, NamedDataset};
use recsel::eval::evaluate;
use recsel::model::factor::{amd_ordering, exact_cholesky, incomplete_cholesky};
use recsel::model::gram::gram_lower;
use recsel::model::sansa::{add_diagonal_in_place, fit_sansa, scale_symmetric_in_place};
use recsel::model::{self, FitReport, Method, Model, ModelParams, Scratch, UmrConfig};

fn random_data(users: usize, items: usize, p: f64, seed: u64) -> Csr {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut pairs = Vec::new();
    for u in 0..users {
        for i in 0..items {
            // Item-dependent popularity so the Gram matrix is not uniform.
            if rng.random::<f64>() < p * (1.0 + (i % 5) as f64) / 3.0 {
                pairs.push((u as u32, i as u32));
            }
        }
    }
    csr_from_pairs(users, items, &mut pairs)
}

fn scores(m: &Model, items: &[u32]) -> Vec<f64> {
    let n = m.n_items();
    let mut out = vec![0.0; n];
    m.score_into(items, &mut out, &mut Scratch::new(n));
    out
}

#[test]
fn sansa_at_density_one_equals_dense_ease() {
    let x = random_data(300, 40, 0.12, 1);
    let g = gram_lower(&x);
    let l2 = 5.0;
    let ease = Model::Ease(model::ease::fit_ease(&g, l2).unwrap());
    let umr = UmrConfig {
        scans: 200,
        finetune_steps: 0,
        target_residual: 1e-26,
    };
    let sansa = Model::Sansa(
        fit_sansa(
            g.clone(),
            Method::Exact,
            l2,
            1.0,
            umr,
            &mut FitReport::default(),
            &|_| {},
        )
        .unwrap(),
    );
    let mut worst: f64 = 0.0;
    for u in 0..x.rows() {
        let items = x.outer_view(u).unwrap().indices().to_vec();
        let (a, b) = (scores(&ease, &items), scores(&sansa, &items));
        // SANSA scores x·B − x: equal to EASE on every item the user does not have.
        for k in 0..40u32 {
            if !items.contains(&k) {
                worst = worst.max((a[k as usize] - b[k as usize]).abs());
            }
        }
    }
    assert!(worst < 1e-6, "largest score difference {worst:e}");
}

#[test]
fn icf_without_dropping_equals_exact_cholesky() {
    let x = random_data(200, 60, 0.08, 2);
    let mut a = gram_lower(&x);
    add_diagonal_in_place(&mut a, 3.0);
    scale_symmetric_in_place(&mut a);
    let (_, inv) = amd_ordering(&a).unwrap();
    let ap = a.permute_lower(&inv);
    let (exact, _) = exact_cholesky(&ap, None).unwrap();
    let icf = incomplete_cholesky(&ap, 60 * 60).unwrap();
    assert_eq!(icf.col_ptr.len(), exact.col_ptr.len());
    let dense = |m: &recsel::model::sparse::SparseCols| {
        let mut d = vec![0.0; 60 * 60];
        for j in 0..60 {
            let (r, v) = m.col(j);
            for (&i, &x) in r.iter().zip(v) {
                d[i as usize * 60 + j] = x;
            }
        }
        d
    };
    let (de, di) = (dense(&exact), dense(&icf));
    let worst = de
        .iter()
        .zip(&di)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-10, "largest factor difference {worst:e}");
    // With a budget, ICF keeps at most the target number of entries.
    let small = incomplete_cholesky(&ap, 60 * 60 / 10).unwrap();
    assert!(small.nnz() <= 60 * 60 / 10 + 60, "{}", small.nnz());
}

#[test]
fn pruned_sansa_respects_density_and_stays_close_to_ease() {
    let x = random_data(400, 80, 0.1, 3);
    let g = gram_lower(&x);
    let density = 0.2;
    let m = fit_sansa(
        g.clone(),
        Method::Exact,
        10.0,
        density,
        UmrConfig::default(),
        &mut FitReport::default(),
        &|_| {},
    )
    .unwrap();
    let cap = (density * 80.0 * 80.0) as usize;
    assert!(
        m.w.nnz() <= cap + 1 && m.w_r.nnz() <= cap + 1,
        "{} {}",
        m.w.nnz(),
        m.w_r.nnz()
    );
    let icf = fit_sansa(
        g.clone(),
        Method::Icf,
        10.0,
        density,
        UmrConfig::default(),
        &mut FitReport::default(),
        &|_| {},
    )
    .unwrap();
    assert!(icf.w.nnz() <= cap + 1);
}

#[test]
fn parameters_are_validated() {
    for (l2, d) in [
        (-1.0, 0.1),
        (f64::NAN, 0.1),
        (f64::INFINITY, 0.1),
        (1.0, 0.0),
        (1.0, 1.5),
        (1.0, f64::NAN),
    ] {
        assert!(ModelParams::new(Method::Exact, l2, d).is_err(), "{l2} {d}");
    }
    assert!(ModelParams::new(Method::Icf, 0.0, 1.0).is_ok());
    let err = ModelParams::new(Method::Exact, -2.0, 0.1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("l2") && err.contains("-2"), "{err}");
}

#[test]
fn metrics_on_a_hand_made_ranking() {
    use recsel::eval::top_k;
    let mut s = vec![0.9, 0.8, 0.7, 0.1, 0.5];
    // Item 0 is seen and excluded.
    assert_eq!(top_k(&mut s, &[0], 3), vec![1, 2, 4]);
}

#[test]
fn sansa_beats_most_popular_on_synthetic_small() {
    let src = DataSource::Named {
        dataset: NamedDataset::Synthetic(SyntheticShape::Small),
        data_dir: "data".into(),
    };
    let ds = load_dataset(&src, 42).unwrap();
    let pop = model::fit(
        &ds.train,
        &ModelParams::new(Method::Popular, 0.0, 1.0).unwrap(),
        &|_| {},
    )
    .unwrap()
    .0;
    let sansa = model::fit(
        &ds.train,
        &ModelParams::new(Method::Exact, 50.0, 0.05).unwrap(),
        &|_| {},
    )
    .unwrap()
    .0;
    let (mp, ms) = (evaluate(&pop, &ds), evaluate(&sansa, &ds));
    eprintln!(
        "synthetic small: popular R@20 {:.4}, SANSA R@20 {:.4}",
        mp.recall20.mean, ms.recall20.mean
    );
    assert!(
        ms.recall20.mean > 1.3 * mp.recall20.mean,
        "{ms:?} vs {mp:?}"
    );
    assert!(ms.recall20.mean - mp.recall20.mean > 5.0 * (ms.recall20.se + mp.recall20.se));
}

#[test]
fn save_and_load_round_trip_and_detect_corruption() {
    let src = DataSource::Named {
        dataset: NamedDataset::Synthetic(SyntheticShape::Small),
        data_dir: "data".into(),
    };
    let ds = load_dataset(&src, 42).unwrap();
    let params = ModelParams::new(Method::Icf, 20.0, 0.02).unwrap();
    let (m, _) = model::fit(&ds.train, &params, &|_| {}).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model");
    model::io::save(&out, &m, &params, ds.name(), ds.fingerprint(), &ds.item_ids).unwrap();
    let (loaded, meta) = model::io::load(&out, Some(ds.fingerprint())).unwrap();
    assert_eq!(meta.params, params);
    assert_eq!(meta.item_ids, ds.item_ids);
    let items: Vec<u32> = ds.test_input.outer_view(0).unwrap().indices().to_vec();
    assert_eq!(scores(&m, &items), scores(&loaded, &items));
    // Another dataset's fingerprint.
    let err = model::io::load(&out, Some(ds.fingerprint() ^ 1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("different data"), "{err}");
    // A flipped byte in a weight file.
    let w = out.join("w.npz");
    let mut bytes = std::fs::read(&w).unwrap();
    let k = bytes.len() / 2;
    bytes[k] ^= 0x55;
    std::fs::write(&w, &bytes).unwrap();
    let err = model::io::load(&out, None).unwrap_err().to_string();
    assert!(err.contains("corrupt") && err.contains("w.npz"), "{err}");
    // A truncated model.json.
    std::fs::write(out.join("model.json"), b"{\"format_version\": 1").unwrap();
    let err = model::io::load(&out, None).unwrap_err().to_string();
    assert!(
        err.contains("corrupt") && err.contains("model.json"),
        "{err}"
    );
}

#[test]
fn npz_factors_load_in_scipy() {
    let Some(python) = crate::util::python_with("npz_factors_load_in_scipy", &["numpy", "scipy"])
    else {
        return;
    };
    let x = random_data(100, 30, 0.15, 4);
    let g = gram_lower(&x);
    let params = ModelParams::new(Method::Exact, 5.0, 0.3).unwrap();
    let m = Model::Sansa(
        fit_sansa(
            g.clone(),
            Method::Exact,
            5.0,
            0.3,
            UmrConfig::default(),
            &mut FitReport::default(),
            &|_| {},
        )
        .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..30).map(|i| i.to_string()).collect();
    model::io::save(dir.path(), &m, &params, "random", 0, &ids).unwrap();
    let items = x.outer_view(0).unwrap().indices().to_vec();
    let expected = scores(&m, &items);
    let script = format!(
        "import numpy as np, scipy.sparse as sp\nW = sp.load_npz('{d}/w.npz'); Wr = sp.load_npz('{d}/w_r.npz')\nx = np.zeros((1, 30)); x[0, {items:?}] = 1\nprint(' '.join(repr(float(v)) for v in ((sp.csr_matrix(x) @ W.T) @ Wr).toarray().ravel()))",
        d = dir.path().display(),
        items = items
    );
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<f64> = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(got.len(), 30);
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }
}

#[test]
fn ease_recall_on_ml_1m_implicit() {
    let Some(dir) = crate::util::shared_data("ease_recall_on_ml_1m_implicit", "ml-1m-implicit")
    else {
        return;
    };
    let ds = load_lightgcn(&dir.join("ml-1m-implicit"), "ml-1m-implicit").unwrap();
    let (m, _) = model::fit(
        &ds.train,
        &ModelParams::new(Method::Ease, 200.0, 1.0).unwrap(),
        &|_| {},
    )
    .unwrap();
    let r = evaluate(&m, &ds);
    eprintln!(
        "ml-1m-implicit EASE λ=200: R@20 {:.4} nDCG@20 {:.4}",
        r.recall20_lightgcn.mean, r.ndcg20.mean
    );
    assert!(r.recall20_lightgcn.mean >= 0.27, "{r:?}");
}

#[test]
fn cli_fit_prints_one_json_object() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args([
            "fit",
            "--dataset",
            "synthetic",
            "--method",
            "icf",
            "--l2",
            "20",
            "--density",
            "0.02",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "recall20_lightgcn",
        "ndcg20",
        "recall20",
        "recall50",
        "ndcg100",
        "fit_seconds",
        "peak_rss_mb",
        "weights_nnz",
    ] {
        assert!(
            v.get(key).is_some_and(|x| x.is_number()),
            "{key} missing in {v}"
        );
    }
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(["fit", "--dataset", "synthetic", "--density", "2"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("density"));
}
