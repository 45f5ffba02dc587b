//! The privacy audit passes every private mechanism and catches the non-private ones
//! (docs/usage.md, "recsel audit").

use recsel::audit::{self, builtin_pairs, AuditConfig, NeighbourPair};
use recsel::mechanisms::{self, MechParams, Noise, NoisyMax, REGISTRY};

const BASE_Q: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
const BASE_D: [f64; 5] = [0.2, 1.0, 0.5, 2.0, 1.0];

fn config(samples: u64, seed: u64) -> AuditConfig {
    AuditConfig::new(samples, 1e-4, seed).unwrap()
}

fn pairs() -> Vec<NeighbourPair> {
    builtin_pairs(&BASE_Q, &BASE_D, 5).unwrap()
}

fn pair(label: &str) -> Vec<NeighbourPair> {
    pairs().into_iter().filter(|p| p.label == label).collect()
}

#[test]
fn private_mechanisms_are_consistent_on_all_builtin_pairs() {
    let pairs = pairs();
    for eps in [0.5, 1.0, 2.0] {
        for spec in REGISTRY.iter().filter(|s| s.private) {
            let m = spec
                .build(&MechParams::default().with_epsilon(eps))
                .unwrap();
            let r = audit::audit(&*m, &pairs, &config(30_000, 11), &|_| {}).unwrap();
            assert!(
                !r.violation,
                "{} at eps={eps}: false violation {:?}",
                spec.name, r.max_eps_lb
            );
            if spec.name != "rnmh-laplace" {
                assert!(
                    r.max_eps_lb <= eps,
                    "{} at eps={eps}: {}",
                    spec.name,
                    r.max_eps_lb
                );
            }
        }
    }
}

#[test]
fn rnmh_is_flagged_on_the_two_candidate_counterexample() {
    for eps in [0.5, 1.0, 2.0] {
        let m = mechanisms::build("rnmh", &MechParams::default().with_epsilon(eps)).unwrap();
        let r = audit::audit(&*m, &pair("rnmh-2cand"), &config(50_000, 12), &|_| {}).unwrap();
        assert!(
            r.exceeds_nominal && r.max_eps_lb > eps,
            "eps={eps}: {}",
            r.max_eps_lb
        );
        assert_eq!(r.verdict(), "flagged (not private)");
        assert!(!r.violation, "rnmh claims nothing, so nothing is violated");
    }
}

/// docs/mechanisms.md: `rnmh-laplace` reaches ratio e^{(k−1)ε}; with k = 5 it spends far more than its
/// nominal ε but not more than its (k−1)ε guarantee.
#[test]
fn rnmh_laplace_is_flagged_at_nominal_epsilon() {
    let eps = 1.0;
    let m = mechanisms::build("rnmh-laplace", &MechParams::default().with_epsilon(eps)).unwrap();
    let r = audit::audit(&*m, &pair("rnmh-laplace-k5"), &config(200_000, 13), &|_| {}).unwrap();
    assert!(r.max_eps_lb > 2.0 * eps, "{}", r.max_eps_lb);
    assert!(r.exceeds_nominal);
    assert!(
        r.max_eps_lb <= 4.0 * eps && !r.violation,
        "{}",
        r.max_eps_lb
    );
}

/// The audit's power check: `rnm` with noise scaled for 2ε while claiming ε is refuted.
#[test]
fn miscalibrated_rnm_is_caught() {
    for eps in [0.5, 1.0, 2.0] {
        let m = NoisyMax::miscalibrated(Noise::Exponential, eps, 2.0 * eps).unwrap();
        let r = audit::audit(&m, &pairs(), &config(100_000, 14), &|_| {}).unwrap();
        assert!(
            r.violation,
            "eps={eps}: max eps_LB {} not above the claim",
            r.max_eps_lb
        );
        assert_eq!(r.verdict(), "VIOLATION");
    }
}

/// The exact privacy loss of random stopping with `Exp(mean mΔ_a/ε)` noise on the appendix-B pair
/// of seed 001 (Δ_0 tiny, Δ_i = 1; q = 1 everywhere vs q' = (1, 0, …, 0)), for output 0
/// (docs/mechanisms.md, "Random stopping"): with c = (1−γ)/k and B = (1−γ)(k−1)(1 − e^{−ε/m})/k,
/// P_q(0) = (γ/k)/(1 − c) and the loss is ln[(1 − c)/((1 − B)(1 − B − c))].
fn appendix_b_loss(eps: f64, gamma: f64, k: f64, multiplier: f64) -> (f64, f64) {
    let c = (1.0 - gamma) / k;
    let b = (1.0 - gamma) * (k - 1.0) * (1.0 - (-eps / multiplier).exp()) / k;
    let p_q = (gamma / k) / (1.0 - c);
    (((1.0 - c) / ((1.0 - b) * (1.0 - b - c))).ln(), p_q)
}

/// Audits `mech` on one built-in pair and checks its ε_LB against the exact loss: never above it
/// (validity), and within the Clopper–Pearson width of it (power). The bounds at level α/(2m)
/// (z ≈ 4.9) cost about z/√count in log space on each side; allow 1.5 times that.
fn audit_against_exact(mech: &str, params: MechParams, label: &str, exact: f64, p_q: f64) -> f64 {
    let m = mechanisms::build(mech, &params).unwrap();
    let n = 1_000_000u64;
    let r = audit::audit(&*m, &pair(label), &config(n, 15), &|_| {}).unwrap();
    assert!(
        r.max_eps_lb <= exact + 1e-3,
        "{mech}: ε_LB {} above the exact loss {exact}",
        r.max_eps_lb
    );
    let p_q2 = p_q * exact.exp();
    let slack = 1.5 * 4.9 * (1.0 / (n as f64 * p_q).sqrt() + 1.0 / (n as f64 * p_q2).sqrt());
    assert!(
        r.max_eps_lb >= exact - slack,
        "{mech}: ε_LB {} far below the exact loss {exact} (slack {slack})",
        r.max_eps_lb
    );
    r.max_eps_lb
}

/// `rs-exp` is ε-DP (docs/mechanisms.md): on seed 001's appendix-B pair its exact loss is 0.608 at
/// ε = 1, k = 20, γ = 0.05, and the audit measures it — valid and with power — so the verdict is
/// "consistent".
#[test]
fn rs_exp_appendix_b_loss_is_measured_and_below_epsilon() {
    let (eps, gamma) = (1.0, 0.05);
    let (exact, p_q) = appendix_b_loss(eps, gamma, 20.0, 3.0);
    assert!((exact - 0.608).abs() < 5e-4, "{exact}");
    let params = MechParams::default().with_epsilon(eps);
    let lb = audit_against_exact("rs-exp", params.clone(), "rs-exp-appB", exact, p_q);
    let m = mechanisms::build("rs-exp", &params).unwrap();
    let r = audit::audit(&*m, &pair("rs-exp-appB"), &config(200_000, 16), &|_| {}).unwrap();
    assert_eq!(r.verdict(), "consistent", "ε_LB {lb}");
}

/// `rs-exp-m1` (noise multiplier 1, still claiming ε) loses 1.76 on the same pair: the audit
/// reports a violation.
#[test]
fn rs_exp_with_multiplier_one_is_a_violation() {
    let (eps, gamma) = (1.0, 0.05);
    let (exact, p_q) = appendix_b_loss(eps, gamma, 20.0, 1.0);
    assert!((exact - 1.759).abs() < 1e-3, "{exact}");
    let params = MechParams::default().with_epsilon(eps);
    let lb = audit_against_exact("rs-exp-m1", params.clone(), "rs-exp-appB", exact, p_q);
    assert!(lb > eps, "ε_LB {lb}");
    let m = mechanisms::build("rs-exp-m1", &params).unwrap();
    let r = audit::audit(&*m, &pair("rs-exp-appB"), &config(300_000, 17), &|_| {}).unwrap();
    assert!(r.violation, "ε_LB {}", r.max_eps_lb);
    assert_eq!(r.verdict(), "VIOLATION");
}

/// `bot-exp` (best of T draws, no random stopping) on Δ = (1e-6, 1), q = (0, 0.001) vs
/// (0, −0.999): candidate 0 wins on q only if all T draws are candidate 0 (2^−T), and on q' when it
/// is drawn and candidate 1's noisy value stays below 0 each time, so the loss is
/// ln[(1 + p)^T − p^T] with p = 1 − e^{−0.999ε/3}: 1.25 at T = 5 and 2.49 at T = 10 (ε = 1). The
/// audit flags it.
#[test]
fn best_of_t_without_random_stopping_is_flagged() {
    let eps = 1.0f64;
    for (t, expected) in [(5u64, 1.25), (10, 2.49)] {
        let p = 1.0 - (-0.999 * eps / 3.0).exp();
        let exact = ((1.0 + p).powi(t as i32) - p.powi(t as i32)).ln();
        assert!((exact - expected).abs() < 0.01, "T={t}: {exact}");
        let params = MechParams::default()
            .with_epsilon(eps)
            .with_param("draws", t);
        let p_q = 0.5f64.powi(t as i32);
        let lb = audit_against_exact("bot-exp", params.clone(), "bot-exp-2cand", exact, p_q);
        assert!(lb > eps, "T={t}: ε_LB {lb}");
        let m = mechanisms::build("bot-exp", &params).unwrap();
        let r = audit::audit(&*m, &pair("bot-exp-2cand"), &config(200_000, 18), &|_| {}).unwrap();
        assert_eq!(
            r.verdict(),
            "flagged (not private)",
            "T={t}: {}",
            r.max_eps_lb
        );
    }
}

#[test]
fn pairs_are_validated() {
    let e = NeighbourPair::new("x", vec![1.0, 1.0], vec![0.0, 0.0], vec![0.0, 1.5]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pair 'x': not neighbours: candidate 1 moves by 1.5 > its sensitivity 1"
    );
    assert!(NeighbourPair::new("y", vec![1.0], vec![0.0, 1.0], vec![0.0, 1.0]).is_err());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pairs.json");
    std::fs::write(
        &path,
        r#"[{"label":"ok","sens":[1,2],"q":[0,0],"q2":[1,-2]},
            {"label":"bad","sens":[1,2],"q":[0,0],"q2":[1,-3]}]"#,
    )
    .unwrap();
    let e = audit::read_pairs(&path).unwrap_err().to_string();
    assert!(
        e.contains("pairs.json pair 2") && e.contains("moves by 3"),
        "{e}"
    );
    std::fs::write(
        &path,
        r#"[{"label":"ok","sens":[1],"q":[0],"q2":[0],"extra":1}]"#,
    )
    .unwrap();
    let e = audit::read_pairs(&path).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("extra"), "{e}");
    assert!(AuditConfig::new(10, 0.1, 1).is_err());
    assert!(AuditConfig::new(1000, 0.0, 1).is_err());
}
