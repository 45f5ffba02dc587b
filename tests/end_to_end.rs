//! The end-to-end audit (docs/deployment.md, "The end-to-end audit"): the whole serving path of a
//! release — score, candidates, clip, select — on neighbouring histories of real (here generated)
//! users.

use crate::util::{assert_audit_consistent, assert_audit_flags, recsel, test_users};
use recsel::audit::end_to_end::{audit_end_to_end, EndToEndConfig, NeighbourKind};
use recsel::mechanisms::MechParams;
use recsel::recommend::{RecommendConfig, Recommender};
use recsel::rng::NoiseMode;
use recsel::scoring::CandidatePolicy;

/// The audit with power, in seconds: on the example release (1,500 items), every item a
/// candidate (the default) and the public `popular:100` list are consistent with user-level
/// 1-DP for rnm, em, gem, mgem and rs-exp (every ε_LB ≤ 1), while the paper's candidates
/// (`history-top:50`) are flagged with ε_LB > 2 — by the same audit, seed and samples. α = 1e-6:
/// a private path is called a violation with probability below 1e-6.
#[test]
fn end_to_end_audit_passes_public_lists_and_flags_history_top() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    let data = recsel::recommend::example_release(&dir).unwrap();
    let users = test_users(&data);
    let cfg = EndToEndConfig::new(20_000, 1e-6, 11, 3).unwrap();
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    for mech in ["rnm", "em", "gem", "mgem", "rs-exp"] {
        for (policy, leaky) in [
            (CandidatePolicy::All, false),
            (CandidatePolicy::Popular(100), false),
            (CandidatePolicy::HistoryTop(50), true),
        ] {
            let mut rc =
                RecommendConfig::new(mech, params.clone(), NoiseMode::Fast).with_candidates(policy);
            rc.allow_non_private = leaky;
            let rec = Recommender::load(&dir, &rc).unwrap();
            let r = audit_end_to_end(&rec, &users, &cfg, &|_| {}).unwrap();
            let what = format!("{mech} {}", r.candidates);
            assert_eq!(r.results.len(), 3 * 3 * 2, "{what}");
            assert_eq!(
                r.histories_scored,
                3 * 4,
                "{what}: each history scored once"
            );
            if leaky {
                assert_audit_flags(&r, 2.0, &what);
                // The protected unit's relation (replace) catches it on its own.
                let replace = r.max_by_kind[2];
                assert_eq!(replace.0, NeighbourKind::Replace);
                assert!(replace.1 > 2.0, "{what}: replace {}", replace.1);
            } else {
                assert_audit_consistent(&r, Some(1.0), &what);
            }
        }
    }
}

/// `recsel audit-e2e` on a fitted synthetic release: the default policy is consistent (exit 0),
/// `history-top:50` is flagged (and needs --allow-non-private); it needs a model; the options of
/// the one audit are refused by the other, and the replaced spelling `recsel audit --end-to-end`
/// is an error that names `recsel audit-e2e`.
#[test]
fn audit_end_to_end_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    recsel::recommend::example_release(&dir).unwrap();
    let m = dir.to_str().unwrap();
    let base = [
        "audit-e2e",
        "--model",
        m,
        "--dataset",
        "synthetic",
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--samples",
        "20000",
        "--pairs",
        "2",
        "--seed",
        "3",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        recsel(&a)
    };
    let o = run(&[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("claims user-level 1-DP") && out.contains("consistent"),
        "{out}"
    );
    let o = run(&["--candidates", "history-top:50"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not protected"));
    let o = run(&[
        "--candidates",
        "history-top:50",
        "--allow-non-private",
        "--json",
    ]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["verdict"], "flagged (not private)");
    assert!(v[0]["max_eps_lb"].as_f64().unwrap() > 2.0, "{v}");
    let o = recsel(&["audit-e2e", "--eps", "1", "--mech", "mgem"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--model"));
    let o = recsel(&["audit", "--model", m, "--eps", "1", "--mech", "mgem"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--model"));
    let mut old = base.to_vec();
    old.splice(0..1, ["audit", "--end-to-end"]);
    let o = recsel(&old);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("recsel audit-e2e"), "{err}");
}
