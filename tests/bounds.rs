//! Utility bounds of seed 001 §IV-D / appendix J (`recsel::numerics::bounds`): a hand-computed
//! example, Monte Carlo checks that each bound holds with probability ≥ 1 − β (with power: a bound
//! claimed for 1.3ε is refuted), and `cgem`'s bound chooser against its exact mixture.

use recsel::mechanisms::{self, MechParams};
use recsel::numerics::bounds::{utility_bounds, GemBoundReading};
use recsel::numerics::hypothesis::clopper_pearson_lower;

use crate::util::*;

const BETA: f64 = 0.05;

/// q = (1, 0.5, 0), Δ = (1, 2, 0.5), ε = 1, β = 0.05, so k = 3 and L = ln 60, worked by hand:
/// RNM q* − 2·2·L = 1 − 4L; GEM max(1 − 4L, 0.5 − 8L, 0 − 2L) = −2L; j = * term 1 − 4L;
/// mGEM: every a has q_a + 4LΔ_a ≥ 1, so the lowest score 0. Paper flags: Δ* = 1 is not > Δ/2 = 1
/// (eqn 18 false); 1 − 4L < 0 = q_- (eqn 19 true). Full flags: −2L > 1 − 4L (not worse than RNM),
/// −2L < 0 (worse than random).
#[test]
fn hand_computed_example() {
    let l = 60f64.ln();
    let q = [1.0, 0.5, 0.0];
    let d = [1.0, 2.0, 0.5];
    let b = utility_bounds(&q, &d, 1.0, BETA, GemBoundReading::Paper).unwrap();
    let close = |a: f64, e: f64, what: &str| assert!((a - e).abs() < 1e-12, "{what}: {a} vs {e}");
    close(b.log_term, l, "L");
    close(b.rnm, 1.0 - 4.0 * l, "rnm");
    close(b.gem, -2.0 * l, "gem");
    close(b.gem_at_best, 1.0 - 4.0 * l, "gem at best");
    close(b.mgem, 0.0, "mgem");
    close(b.random, 0.0, "random");
    assert!(!b.gem_worse_than_rnm && b.gem_worse_than_random);
    assert_eq!(b.best_mechanism(), "mgem");
    let f = utility_bounds(&q, &d, 1.0, BETA, GemBoundReading::Full).unwrap();
    assert!(!f.gem_worse_than_rnm && f.gem_worse_than_random);

    // Eqn 18 true: Δ* = 2 > max Δ / 2 = 1.5. At ε = 100, 4L/ε = 0.1638 and q_a + 0.1638 Δ_a ≥ 1
    // only for the best itself (candidate 1: 0.5 + 0.491 < 1), so mGEM's bound is q* = 1.
    let q = [1.0, 0.5, 0.0];
    let d = [2.0, 3.0, 0.5];
    let b = utility_bounds(&q, &d, 100.0, BETA, GemBoundReading::Paper).unwrap();
    let c = 4.0 * l / 100.0;
    close(b.gem_at_best, 1.0 - 2.0 * c, "gem at best, eps 100");
    close(b.rnm, 1.0 - 2.0 * 3.0 * l / 100.0, "rnm, eps 100");
    assert!(b.gem_worse_than_rnm, "2 > 3/2: eqn 18 holds");
    close(b.mgem, 1.0, "mgem, eps 100");
    assert!(!b.gem_worse_than_random);
}

/// Selections of `name` at ε on (q, Δ), n of them: how many land below `bound`.
fn violations(name: &str, eps: f64, q: &[f64], d: &[f64], bound: f64, n: u64, seed: u64) -> u64 {
    let m = mechanisms::build(
        name,
        &MechParams::default()
            .with_epsilon(eps)
            .with_param("beta", BETA),
    )
    .unwrap();
    let c = counts(&*m, q, d, n, seed);
    c.iter()
        .zip(q)
        .filter(|(_, &s)| s < bound)
        .map(|(c, _)| c)
        .sum()
}

/// The claim "P[q_selected < bound] ≤ β" is refuted when the one-sided Clopper–Pearson lower bound
/// on the violation rate (α = 1e-6) exceeds β.
fn refuted(v: u64, n: u64) -> bool {
    clopper_pearson_lower(v, n, ALPHA) > BETA
}

const N_MC: u64 = 200_000;

/// The bounds computed independently of the library, as in `docs/bounds.md`.
fn rnm_bound(q: &[f64], d: &[f64], eps: f64) -> f64 {
    let l = (q.len() as f64 / BETA).ln();
    let qs = q.iter().cloned().fold(f64::MIN, f64::max);
    qs - 2.0 * d.iter().cloned().fold(0.0, f64::max) * l / eps
}
fn gem_bound(q: &[f64], d: &[f64], eps: f64) -> f64 {
    let l = (q.len() as f64 / BETA).ln();
    (0..q.len())
        .map(|j| q[j] - 4.0 * l * d[j] / eps)
        .fold(f64::MIN, f64::max)
}
fn mgem_bound(q: &[f64], d: &[f64], eps: f64) -> f64 {
    let l = (q.len() as f64 / BETA).ln();
    let qs = q.iter().cloned().fold(f64::MIN, f64::max);
    (0..q.len())
        .filter(|&a| q[a] + 4.0 * l * d[a] / eps >= qs)
        .map(|a| q[a])
        .fold(f64::MAX, f64::min)
}

/// An instance on which a bound is nearly tight: the best candidate at 0 and nine others just
/// below `gap` under it.
fn tight(gap: f64, d_best: f64, d_rest: f64) -> (Vec<f64>, Vec<f64>) {
    let mut q = vec![-gap * (1.0 + 1e-9); 10];
    q[0] = 0.0;
    let mut d = vec![d_rest; 10];
    d[0] = d_best;
    (q, d)
}

#[test]
fn rnm_gem_and_mgem_bounds_hold_with_probability_one_minus_beta() {
    let l = (10.0 / BETA).ln();
    let eps = 1.0;
    // (mechanism, bound function, tight gap for the correct bound, Δ_best, Δ_rest)
    type Bound = fn(&[f64], &[f64], f64) -> f64;
    let cases: [(&str, Bound, f64, f64, f64); 5] = [
        ("rnm", rnm_bound, 2.0 * l / eps, 1.0, 1.0),
        ("gem", gem_bound, 4.0 * l / eps, 1.0, 1.0),
        // GEM, heterogeneous: the best (Δ 1) fixes the bound at −4L/ε; others Δ 0.5 sit at q' ≈ −2L.
        ("gem", gem_bound, 4.0 * l / eps, 1.0, 0.5),
        ("mgem", mgem_bound, 4.0 * l / eps, 1.0, 1.0),
        // mGEM, heterogeneous: best Δ 0.5, others Δ 1 just outside S = {q_a + 4LΔ_a/ε ≥ q*}.
        ("mgem", mgem_bound, 4.0 * l / eps, 0.5, 1.0),
    ];
    for (i, &(name, bound, gap, d_best, d_rest)) in cases.iter().enumerate() {
        let (q, d) = tight(gap, d_best, d_rest);
        let b = bound(&q, &d, eps);
        assert!(q[1] < b, "{name}: the others must sit just below the bound");
        let lib = utility_bounds(&q, &d, eps, BETA, GemBoundReading::Full).unwrap();
        let lib_b = match name {
            "rnm" => lib.rnm,
            "gem" => lib.gem,
            _ => lib.mgem,
        };
        assert!((lib_b - b).abs() < 1e-12, "{name}: library {lib_b} vs {b}");
        let v = violations(name, eps, &q, &d, b, N_MC, 300 + i as u64);
        assert!(
            !refuted(v, N_MC),
            "{name} case {i}: {v} of {N_MC} selections below the bound {b} (β = {BETA})"
        );
        // Power: the same test refutes a bound claimed for 1.3ε, on the instance where that wrong
        // bound is nearly tight.
        let (q2, d2) = tight(gap / 1.3, d_best, d_rest);
        let wrong = bound(&q2, &d2, 1.3 * eps);
        let v = violations(name, eps, &q2, &d2, wrong, N_MC, 400 + i as u64);
        assert!(
            refuted(v, N_MC),
            "{name} case {i}: no power: {v} of {N_MC} below the 1.3ε bound {wrong}"
        );
    }
}

/// Random problems: every bound holds (nothing to refute), at several ε.
#[test]
fn bounds_hold_on_random_problems() {
    use rand::{Rng as _, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for trial in 0..6 {
        let k = 20;
        let q: Vec<f64> = (0..k).map(|_| rng.random_range(-1.0..1.0)).collect();
        let d: Vec<f64> = (0..k).map(|_| rng.random_range(0.01..0.5)).collect();
        for (e, eps) in [0.5, 5.0, 50.0].into_iter().enumerate() {
            for (name, b) in [
                ("rnm", rnm_bound(&q, &d, eps)),
                ("gem", gem_bound(&q, &d, eps)),
                ("mgem", mgem_bound(&q, &d, eps)),
            ] {
                let v = violations(name, eps, &q, &d, b, 50_000, 500 + 10 * trial + e as u64);
                assert!(!refuted(v, 50_000), "{name} trial {trial} eps {eps}: {v}");
            }
        }
    }
}

/// `cgem --chooser bound`: the released bit is randomised response on [mGEM bound ≥ GEM bound] at
/// ε_g = (1 − c)ε. On this problem Spearman is 0 (so the Spearman chooser's bit is 1) while GEM's
/// bound is the better one (bit 0): the output is the mixture with GEM weighted by p_truth.
#[test]
fn cgem_bound_chooser_is_the_randomised_response_mixture() {
    let q = [0.0, 0.5, 1.0, 1.2, 2.0];
    let d = [0.05, 0.1, 0.15, 0.2, 0.01];
    let (eps, c) = (2.0, 0.6);
    let eps_g = (1.0 - c) * eps;
    assert_eq!(recsel::numerics::spearman(&q, &d), 0.0);
    assert!(mgem_bound(&q, &d, eps_g) < gem_bound(&q, &d, eps_g));
    let mix = |eps: f64| {
        let eps_g = (1.0 - c) * eps;
        let p_truth = 1.0 / (1.0 + (-c * eps).exp());
        let t = 2.0 * (q.len() as f64 / BETA).ln() / eps_g;
        let ones = [1.0; 5];
        let g = recsel::mechanisms::gem::transformed_scores(&q, &d, t);
        let m = recsel::mechanisms::gem::transformed_scores(&q, &d, -t);
        let pg = rnm_exact(&g, &ones, eps_g);
        let pm = rnm_exact(&m, &ones, eps_g);
        pg.iter()
            .zip(&pm)
            .map(|(a, b)| p_truth * a + (1.0 - p_truth) * b)
            .collect::<Vec<_>>()
    };
    let params = MechParams::default()
        .with_epsilon(eps)
        .with_param("chooser", "bound");
    let m = mechanisms::build("cgem", &params).unwrap();
    let n = 200_000;
    let counts = counts(&*m, &q, &d, n, 77);
    assert_fits(&counts, &mix(eps), "cgem bound chooser");
    assert_rejects(&counts, &mix(1.3 * eps), "cgem bound chooser at 1.3 eps");
    assert_rejects(&counts, &mix(0.7 * eps), "cgem bound chooser at 0.7 eps");
    // The Spearman chooser picks the other mixture on the same problem.
    let s = mechanisms::build("cgem", &MechParams::default().with_epsilon(eps)).unwrap();
    let cs = crate::util::counts(&*s, &q, &d, n, 78);
    assert_same(&counts, &cs, false, "bound vs spearman chooser");
}
