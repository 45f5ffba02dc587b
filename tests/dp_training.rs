//! Differentially private training end to end (docs/training-privacy.md): `recsel fit
//! --dp-epsilon` writes a release whose training users' entry names the guarantee, its
//! contribution bound and, on a privately chosen item set, both stages as one ε; the options that
//! need `--dp-epsilon` are refused without it. The unit tests of the mechanisms are in
//! `model::dp`, `model::dp_items` and `privacy`; the audit of a training release is
//! `audit::training`.

use serde_json::Value;

use crate::privacy_report::{fit, part, report_json, total};
use crate::util::{ok, recsel};

/// A DP fit on an item set (`--dp-items`) end to end: `fit --out` writes a model of the whole
/// catalogue whose weights touch at most K items, its training entry is one ε for both stages
/// (the item counts and the Gram matrix: their ρ summed, converted once), the report lists it
/// beside the popularity counts and sums the training users' parts, and the release serves a
/// recommendation. The item options without `--dp-epsilon` are refused.
#[test]
fn a_dp_fit_on_an_item_set_reports_both_stages_as_one_guarantee() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    fit(
        &dir,
        &[
            "--dp-epsilon",
            "4",
            "--dp-items",
            "150",
            "--dp-items-share",
            "0.2",
            "--count-epsilon",
            "0.5",
        ],
    );
    let r = report_json(&dir);
    let w = part(&r, "model weights");
    assert_eq!(w["population"], "training users");
    let eps = w["epsilon"].as_f64().unwrap();
    assert!((eps - 4.0).abs() < 1e-3, "{w}");
    let mech = w["mechanism"].as_str().unwrap();
    assert!(
        mech.contains("two stages") && mech.contains("item universe by DP partition selection"),
        "{w}"
    );
    assert!(w["note"].as_str().unwrap().contains("20% of ρ"), "{w}");
    let training: f64 = r["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["population"] == "training users")
        .map(|p| p["epsilon"].as_f64().unwrap())
        .sum();
    let t = total(&r, "training users")["epsilon"].as_f64().unwrap();
    assert!((t - training).abs() < 1e-9, "{r:#}");
    // The popularity counts are the fit's stage-1 counts: no ε of their own; the held-out counts
    // keep theirs.
    let p = part(&r, "popularity counts");
    assert_eq!(p["epsilon"].as_f64(), Some(0.0), "{p}");
    assert!(
        p["mechanism"]
            .as_str()
            .unwrap()
            .contains("derived from the DP fit, no extra ε"),
        "{p}"
    );
    let heldout = r["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "held-out counts")
        .map_or(0.0, |p| p["epsilon"].as_f64().unwrap());
    assert!(heldout == 0.0 || heldout == 0.5, "{r:#}");
    assert!((t - (eps + heldout)).abs() < 1e-9, "{r:#}");

    // The weights: a model of every item, whose nonzero columns are at most the 150 chosen.
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("model.json")).unwrap()).unwrap();
    let n = meta["n_items"].as_u64().unwrap() as usize;
    assert!(n > 150, "{n}");
    assert!(
        mech.contains(&format!("the top 150 of its {n} items")),
        "{w}"
    );
    let (model, _) = recsel::model::io::load(&dir).unwrap();
    assert_eq!(model.n_items(), n);
    let mut scratch = recsel::model::Scratch::new(n);
    let mut touched = vec![false; n];
    let mut out = vec![0.0; n];
    for j in 0..n as u32 {
        model.score_into(&[j], &mut out, &mut scratch);
        for (k, &v) in out.iter().enumerate() {
            if v != 0.0 {
                touched[k] = true;
                touched[j as usize] = true;
            }
        }
    }
    let used = touched.iter().filter(|&&t| t).count();
    assert!(used <= 150 && used > 100, "{used} items have weights");

    let ids = recsel::recommend::release::Release::read(&dir)
        .unwrap()
        .manifest
        .item_ids;
    let history = format!("{},{}", ids[3], ids[17]);
    ok(&[
        "recommend",
        "--model",
        dir.to_str().unwrap(),
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--history",
        &history,
    ]);

    let o = recsel(&[
        "fit",
        "--dataset",
        "synthetic",
        "--method",
        "exact",
        "--dp-items",
        "10",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give dp-epsilon too"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A DP fit's report names its contribution bound: the default `weight` (every interaction,
/// weighted) and `sample` (at most C interactions kept), with the ε asked for, in the report
/// and in `model.json`; `--dp-bound` without `--dp-epsilon` is refused.
#[test]
fn a_dp_fit_reports_its_contribution_bound() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, extra, unit, gram) in [
        (
            "weight",
            &[][..],
            "user (all interactions, weighted to the contribution of 20)",
            "on the user-weighted Gram matrix",
        ),
        (
            "sample",
            &["--dp-bound", "sample"][..],
            "user (at most 20 interactions kept)",
            "on the Gram matrix",
        ),
    ] {
        let dir = tmp.path().join(name);
        let mut a = vec!["--dp-epsilon", "4"];
        a.extend_from_slice(extra);
        fit(&dir, &a);
        let r = report_json(&dir);
        let w = part(&r, "model weights");
        assert_eq!(w["population"], "training users");
        assert_eq!(w["unit"], unit, "{w}");
        assert!((w["epsilon"].as_f64().unwrap() - 4.0).abs() < 1e-6, "{w}");
        assert!(w["mechanism"].as_str().unwrap().contains(gram), "{w}");
        let m: Value =
            serde_json::from_slice(&std::fs::read(dir.join("model.json")).unwrap()).unwrap();
        assert_eq!(m["training_privacy"]["unit"], unit);
        assert!(m["training_privacy"]["note"]
            .as_str()
            .unwrap()
            .starts_with(&format!("contribution bound `{name}`")));
    }
    let o = recsel(&[
        "fit",
        "--dataset",
        "synthetic",
        "--dp-bound",
        "sample",
        "--out",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("dp-epsilon"));
}
