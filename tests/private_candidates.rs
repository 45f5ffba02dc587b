//! Selection from private candidates (docs/private-candidates.md): every stopping rule's output
//! law against its exact law, the known threshold's ⊥ probability against the theorem's bound, the
//! reported guarantees against the worst case found on ε₀-close run laws, the score-vector
//! mechanisms (`rs-threshold`, `rs-hard`, `rs-hard-delta`) against their exact laws on both paths,
//! and the audit at the guarantee the API reports.
//!
//! Statistical checks follow `util.rs`: fixed seeds, rejection at p < 1e-6, and a power check —
//! the same test applied to a stopping rule mis-parameterised by 30% (γ, η's γ, μ or T × 1.3, or
//! ε × 1.3) must reject. Every reference is computed here from the definitions (the stopping
//! laws' probability mass functions, the Laplace tails), never from the library's helpers.

use rand::Rng as _;
use rayon::prelude::*;
use recsel::audit::{self, builtin_pairs, AuditConfig};
use recsel::mechanisms::private_candidates::{PrivateSelection, SelectionParams, Stopping};
use recsel::mechanisms::{self, Guarantee, MechParams, Problem};
use recsel::numerics::exact::ExactStopping;
use recsel::numerics::hypothesis::{clopper_pearson_lower, clopper_pearson_upper};
use recsel::rng::{SecureRng, Streams};
use statrs::function::gamma::ln_gamma;

use crate::util::{assert_fits, assert_rejects, ALPHA};

/// The run Q of the law tests: outcome i with probability `PI[i]`, scored i (so outcome 5 is the
/// best and the rarest: how often it wins depends strongly on how many runs are made).
const PI: [f64; 6] = [0.4, 0.25, 0.15, 0.1, 0.06, 0.04];

fn draw_outcome(u: f64) -> usize {
    let mut acc = 0.0;
    for (i, p) in PI.iter().enumerate() {
        acc += p;
        if u < acc {
            return i;
        }
    }
    PI.len() - 1
}

/// P(K = k) of each stopping law, from its definition.
fn pmf(s: Stopping, k: u64) -> f64 {
    let kf = k as f64;
    match s {
        Stopping::Geometric { gamma } => {
            if k == 0 {
                0.0
            } else {
                gamma * (1.0 - gamma).powf(kf - 1.0)
            }
        }
        Stopping::TruncatedNegBinomial { eta, gamma } => {
            if k == 0 {
                0.0
            } else if eta == 0.0 {
                (1.0 - gamma).powf(kf) / (kf * (1.0 / gamma).ln())
            } else {
                // (1−γ)^k / (γ^{−η} − 1) · Π_{l=0}^{k−1} (l+η)/(l+1)
                let mut c = 1.0;
                for l in 0..k {
                    c *= (l as f64 + eta) / (l as f64 + 1.0);
                }
                (1.0 - gamma).powf(kf) * c / (gamma.powf(-eta) - 1.0)
            }
        }
        Stopping::Poisson { mu } => (kf * mu.ln() - mu - ln_gamma(kf + 1.0)).exp(),
        Stopping::Fixed { runs } => f64::from(u8::from(k == runs)),
    }
}

/// φ(z) = E z^{min(K, T)}, summed over the support until the remaining mass is below 1e-13.
fn pgf(s: Stopping, t: Option<u64>, z: f64) -> f64 {
    let (mut phi, mut mass) = (0.0, 0.0);
    let mut k = 0u64;
    while mass < 1.0 - 1e-13 && k < 2_000_000 {
        let p = pmf(s, k);
        mass += p;
        phi += p * z.powf(t.map_or(k, |t| k.min(t)) as f64);
        k += 1;
    }
    phi
}

/// Exact output law of the best of min(K, T) runs of Q: outcome i with probability
/// φ(G_i) − φ(G_{i−1}), G_i = P(one run ≤ i); last cell ⊥ = φ(0) = P(K = 0).
fn best_of_law(s: Stopping, t: Option<u64>) -> Vec<f64> {
    let mut out = Vec::new();
    let mut g = 0.0;
    let mut prev = pgf(s, t, 0.0);
    for p in PI {
        g += p;
        let cur = pgf(s, t, g);
        out.push(cur - prev);
        prev = cur;
    }
    out.push(pgf(s, t, 0.0));
    out
}

/// Exact output law of the known-threshold selection: runs at or above `first` succeed
/// (p = Σ PI[i ≥ first]); each run happens with probability r^{j−1}, r = (1−p)(1−γ), j ≤ T, so
/// outcome i ≥ first has probability PI[i]·Σ_{j<T} r^j and ⊥ the rest.
fn threshold_law(gamma: f64, first: usize, t: Option<u64>) -> Vec<f64> {
    let p: f64 = PI[first..].iter().sum();
    let r = (1.0 - p) * (1.0 - gamma);
    let s = match t {
        None => 1.0 / (1.0 - r),
        Some(t) => (1.0 - r.powf(t as f64)) / (1.0 - r),
    };
    let mut out: Vec<f64> = (0..PI.len())
        .map(|i| if i >= first { PI[i] * s } else { 0.0 })
        .collect();
    out.push(1.0 - p * s);
    out
}

/// Counts of `n` selections (⊥ in the last cell), selection i on its own stream of `seed`.
fn counts(sel: &PrivateSelection, n: u64, seed: u64) -> Vec<u64> {
    let streams = Streams::new(seed);
    (0..n)
        .into_par_iter()
        .fold(
            || vec![0u64; PI.len() + 1],
            |mut c, i| {
                let mut rng = streams.stream(2, 0, 0, i as u32);
                let out = sel.run(
                    |rng| {
                        let o = draw_outcome(rng.random::<f64>());
                        (o, o as f64)
                    },
                    &mut rng,
                );
                c[out.best.map_or(PI.len(), |(o, _)| o)] += 1;
                c
            },
        )
        .reduce(
            || vec![0u64; PI.len() + 1],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// As [`counts`], on the secure path (exact stopping samplers; Q's uniform from 53 bits of the
/// secure generator).
fn secure_counts(sel: &PrivateSelection, n: u64, seed: u64) -> Vec<u64> {
    let chunks = n.div_ceil(4096);
    (0..chunks)
        .into_par_iter()
        .map(|c| {
            let mut rng = SecureRng::from_seed_insecure(seed.wrapping_mul(1 << 32) + c);
            let mut out = vec![0u64; PI.len() + 1];
            for _ in c * 4096..((c + 1) * 4096).min(n) {
                let o = sel
                    .run_secure(
                        |rng| {
                            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                            let o = draw_outcome(u);
                            (o, o as f64)
                        },
                        &mut rng,
                    )
                    .unwrap();
                out[o.best.map_or(PI.len(), |(o, _)| o)] += 1;
            }
            out
        })
        .reduce(
            || vec![0u64; PI.len() + 1],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// A stopping rule with its parameter scaled by `f` (γ, μ, or R for the fixed rule).
fn scaled(s: Stopping, f: f64) -> Stopping {
    match s {
        Stopping::Geometric { gamma } => Stopping::Geometric { gamma: gamma * f },
        Stopping::TruncatedNegBinomial { eta, gamma } => Stopping::TruncatedNegBinomial {
            eta,
            gamma: gamma * f,
        },
        Stopping::Poisson { mu } => Stopping::Poisson { mu: mu * f },
        Stopping::Fixed { runs } => Stopping::Fixed {
            runs: (runs as f64 * f).round() as u64,
        },
    }
}

const N: u64 = 200_000;

/// Each stopping rule — geometric, truncated negative binomial (η > 0, η = 0, η < 0), Poisson,
/// fixed, and the geometric rule with a hard stop — releases the best run with the law
/// φ(G_i) − φ(G_{i−1}), on the seeded path and on the secure path; the law of the same rule with
/// its parameter (or T) × 1.3 is rejected.
#[test]
fn every_stopping_rule_follows_its_exact_law() {
    let cases: [(Stopping, Option<u64>); 8] = [
        (Stopping::Geometric { gamma: 0.2 }, None),
        (
            Stopping::TruncatedNegBinomial {
                eta: 0.5,
                gamma: 0.1,
            },
            None,
        ),
        (
            Stopping::TruncatedNegBinomial {
                eta: 0.0,
                gamma: 0.05,
            },
            None,
        ),
        (
            Stopping::TruncatedNegBinomial {
                eta: -0.5,
                gamma: 0.05,
            },
            None,
        ),
        (Stopping::Poisson { mu: 3.0 }, None),
        (Stopping::Poisson { mu: 0.7 }, None),
        (Stopping::Fixed { runs: 3 }, None),
        (Stopping::Geometric { gamma: 0.05 }, Some(10)),
    ];
    for (i, (s, t)) in cases.into_iter().enumerate() {
        let mut params = SelectionParams::new(s, 1.0);
        params.max_runs = t;
        let sel = params.check().unwrap();
        let law = best_of_law(s, t);
        let total: f64 = law.iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{s:?}: law sums to {total}");
        let what = format!("{s:?} T={t:?}");
        let c = counts(&sel, N, 300 + i as u64);
        assert_fits(&c, &law, &format!("{what}: exact law"));
        // The rule mis-parameterised by 30%: its law is rejected...
        assert_rejects(&c, &best_of_law(scaled(s, 1.3), t), &format!("{what} x1.3"));
        if let Some(t) = t {
            let t13 = (t as f64 * 1.3).round() as u64;
            assert_rejects(&c, &best_of_law(s, Some(t13)), &format!("{what}: T x1.3"));
        }
        // ... and so is a sampler built with it, against the right law.
        let mut wrong = params;
        wrong.stopping = scaled(s, 1.3);
        let cw = counts(&wrong.check().unwrap(), N, 400 + i as u64);
        assert_rejects(&cw, &law, &format!("{what}: sampler x1.3"));
        // The secure path: exact samplers of the same law (η and μ on the 2^−32 grid, which
        // these values are on).
        let cs = secure_counts(&sel, N, 500 + i as u64);
        assert_fits(&cs, &law, &format!("{what}: secure exact law"));
        assert_rejects(
            &cs,
            &best_of_law(scaled(s, 1.3), t),
            &format!("{what}: secure x1.3"),
        );
    }
}

/// The known threshold (Liu & Talwar §3.1): the first run at or above τ, else ⊥ — without and
/// with a hard stop, on both paths; γ × 1.3 and T × 1.3 rejected.
#[test]
fn the_known_threshold_follows_its_exact_law() {
    // τ = 3.5: outcomes 4 and 5 succeed, p = 0.1.
    for (i, (gamma, t)) in [(0.05, None), (0.05, Some(8)), (0.3, Some(3))]
        .into_iter()
        .enumerate()
    {
        let params = SelectionParams {
            threshold: Some(3.5),
            max_runs: t,
            ..SelectionParams::new(Stopping::Geometric { gamma }, 1.0)
        };
        let sel = params.check().unwrap();
        let law = threshold_law(gamma, 4, t);
        let what = format!("threshold gamma={gamma} T={t:?}");
        let c = counts(&sel, N, 600 + i as u64);
        assert_fits(&c, &law, &what);
        assert_rejects(
            &c,
            &threshold_law(1.3 * gamma, 4, t),
            &format!("{what}: gamma x1.3"),
        );
        if let Some(t) = t {
            let t13 = ((t as f64) * 1.3).round() as u64;
            assert_rejects(
                &c,
                &threshold_law(gamma, 4, Some(t13)),
                &format!("{what}: T x1.3"),
            );
        }
        let cs = secure_counts(&sel, N, 700 + i as u64);
        assert_fits(&cs, &law, &format!("{what}: secure"));
    }
}

/// The ⊥ probability of the known threshold against the bound recsel states for Theorem
/// 3.1(a): if one run reaches τ with probability p, ⊥ has probability at most
/// `γ/p + (1−p)^T (1−γ)^{T−1}` (docs/private-candidates.md). The bound is nearly tight when γ ≪ p
/// ≪ 1 (here 0.915 of it): the observed ⊥ rate is consistent with the exact value, and its lower
/// confidence bound stays below the theorem's bound; a sampler whose γ is 30% too large breaks the
/// bound, and the same test catches it.
#[test]
fn the_threshold_bottom_probability_is_within_the_theorem_bound() {
    // τ = 4.5: only outcome 5 reaches it, p = 0.04.
    let (first, p) = (5usize, 0.04f64);
    let gamma = 0.002f64;
    let bound = |t: Option<u64>| {
        gamma / p
            + t.map_or(0.0, |t| {
                (1.0 - p).powf(t as f64) * (1.0 - gamma).powf(t as f64 - 1.0)
            })
    };
    let n = 400_000u64;
    let level = ALPHA / 2.0;
    for (i, t) in [None, Some(150)].into_iter().enumerate() {
        let exact = threshold_law(gamma, first, t)[PI.len()];
        assert!(
            exact <= bound(t),
            "exact {exact} above the bound {}",
            bound(t)
        );
        assert!(exact >= 0.85 * bound(t), "the bound is loose here: {exact}");
        let sel = SelectionParams {
            threshold: Some(4.5),
            max_runs: t,
            ..SelectionParams::new(Stopping::Geometric { gamma }, 1.0)
        }
        .check()
        .unwrap();
        let bottom = counts(&sel, n, 800 + i as u64)[PI.len()];
        // Consistent with the exact value (two-sided at 1e-6)...
        let (lo, hi) = (
            clopper_pearson_lower(bottom, n, level),
            clopper_pearson_upper(bottom, n, level),
        );
        assert!(
            lo <= exact && exact <= hi,
            "T={t:?}: [{lo}, {hi}] vs {exact}"
        );
        // ... and the bound holds: the lower confidence bound is below it.
        assert!(lo <= bound(t), "T={t:?}: ⊥ rate {lo} above the bound");
        // Power: with γ × 1.3 the ⊥ rate exceeds the bound computed at γ, and the test says so.
        let wrong = SelectionParams {
            threshold: Some(4.5),
            max_runs: t,
            ..SelectionParams::new(Stopping::Geometric { gamma: 1.3 * gamma }, 1.0)
        }
        .check()
        .unwrap();
        let bottom_w = counts(&wrong, n, 900 + i as u64)[PI.len()];
        let lo_w = clopper_pearson_lower(bottom_w, n, level);
        assert!(
            lo_w > bound(t),
            "T={t:?}: no power: ⊥ rate of gamma x1.3 {lo_w} not above the bound {}",
            bound(t)
        );
    }
}

/// The exact law of a three-outcome run (below, y, above, probabilities `l`, `m`, `1 − l − m`)
/// under selection with pgf φ: P(below) = φ(l) − φ(0), P(y) = φ(l+m) − φ(l), P(above) = 1 −
/// φ(l+m), P(⊥) = φ(0).
fn three_outcome_best(phi: &dyn Fn(f64) -> f64, l: f64, m: f64) -> [f64; 4] {
    [
        phi(l) - phi(0.0),
        phi(l + m) - phi(l),
        1.0 - phi(l + m),
        phi(0.0),
    ]
}

/// The same for the known threshold with τ between "below" and y: P(y) = m·S, P(above) =
/// (1−l−m)·S, P(⊥) = 1 − (1−l)·S, S = Σ_{j<T} r^j with r = l(1−γ).
fn three_outcome_threshold(gamma: f64, t: Option<u64>, l: f64, m: f64) -> [f64; 4] {
    let r = l * (1.0 - gamma);
    let s = match t {
        None => 1.0 / (1.0 - r),
        Some(t) => (1.0 - r.powf(t as f64)) / (1.0 - r),
    };
    [0.0, m * s, (1.0 - l - m) * s, 1.0 - (1.0 - l) * s]
}

/// φ in closed form (the search below evaluates it millions of times): γz/(1 − (1−γ)z), with a
/// hard stop T `γz(1 − r^{T−1})/(1 − r) + (1−γ)^{T−1} z^T` (r = (1−γ)z); D_{η,γ}:
/// `((1 − (1−γ)z)^{−η} − 1)/(γ^{−η} − 1)`; Poisson: `e^{μ(z−1)}`. Checked against the series.
fn pgf_closed(s: Stopping, t: Option<u64>, z: f64) -> f64 {
    match (s, t) {
        (Stopping::Geometric { gamma }, None) => gamma * z / (1.0 - (1.0 - gamma) * z),
        (Stopping::Geometric { gamma }, Some(t)) => {
            let r = (1.0 - gamma) * z;
            gamma * z * (1.0 - r.powf(t as f64 - 1.0)) / (1.0 - r)
                + (1.0 - gamma).powf(t as f64 - 1.0) * z.powf(t as f64)
        }
        (Stopping::TruncatedNegBinomial { eta, gamma }, None) => {
            ((1.0 - (1.0 - gamma) * z).powf(-eta) - 1.0) / (gamma.powf(-eta) - 1.0)
        }
        (Stopping::Poisson { mu }, None) => (mu * (z - 1.0)).exp(),
        _ => unreachable!("no closed form needed"),
    }
}

#[test]
fn closed_form_pgfs_agree_with_the_series() {
    for (s, t) in [
        (Stopping::Geometric { gamma: 0.01 }, None),
        (Stopping::Geometric { gamma: 0.05 }, Some(50)),
        (
            Stopping::TruncatedNegBinomial {
                eta: 0.5,
                gamma: 0.01,
            },
            None,
        ),
        (Stopping::Poisson { mu: 8.0 }, None),
    ] {
        for z in [0.0, 0.1, 0.5, 0.9, 0.999] {
            let (a, b) = (pgf_closed(s, t, z), pgf(s, t, z));
            assert!((a - b).abs() < 1e-10, "{s:?} {t:?} z={z}: {a} vs {b}");
        }
    }
}

/// The largest log-ratio of the two laws over outcomes with positive probability.
fn max_log_ratio(a: &[f64; 4], b: &[f64; 4]) -> f64 {
    a.iter()
        .zip(b)
        .filter(|(x, y)| **x > 1e-300 && **y > 1e-300)
        .map(|(x, y)| (x / y).ln().abs())
        .fold(0.0, f64::max)
}

/// The worst log-ratio between the releases on two ε₀-close run laws (three outcomes, every
/// probability within a factor e^{ε₀} both ways), over a random search biased to the extremes.
fn worst_case(eps0: f64, release: &dyn Fn(f64, f64) -> [f64; 4]) -> f64 {
    let mut rng = Streams::new(99).stream(0, 0, 0, 0);
    let mut worst = 0.0f64;
    for _ in 0..100_000 {
        // Log-uniform probabilities so tiny and large masses both occur.
        let l = 10f64.powf(-6.0 * rng.random::<f64>()).min(0.999_999);
        let m = (1.0 - l) * 10f64.powf(-6.0 * rng.random::<f64>());
        let h = 1.0 - l - m;
        // The neighbour: l and m moved by e^{±ε₀} (extremes half the time), h takes the rest.
        let pick = |rng: &mut recsel::rng::Rng| {
            if rng.random::<bool>() {
                if rng.random::<bool>() {
                    eps0
                } else {
                    -eps0
                }
            } else {
                eps0 * (2.0 * rng.random::<f64>() - 1.0)
            }
        };
        let l2 = l * pick(&mut rng).exp();
        let m2 = m * pick(&mut rng).exp();
        let h2 = 1.0 - l2 - m2;
        if !(h2 > 0.0 && (h2 / h).ln().abs() <= eps0 * (1.0 + 1e-12)) {
            continue;
        }
        worst = worst.max(max_log_ratio(&release(l, m), &release(l2, m2)));
    }
    worst
}

/// The guarantees the API reports are never below the worst case found on ε₀-close run laws,
/// and the search comes close to them (so a weaker claim — e.g. ε₀ or 2ε₀ for random stopping —
/// would be refuted by the same search): Theorem 3.2's 3ε₀, Papernot–Steinke's (2+η)ε₀,
/// recsel's ε₀ + μ·tanh(ε₀/2) for Poisson (whose growth with μ is real), the hard stop's pure
/// bound and the known threshold's 2ε₀ (+ the hard stop's term).
#[test]
fn reported_guarantees_bound_the_worst_case_and_are_nearly_attained() {
    let eps0 = 0.5;
    type Release = Box<dyn Fn(f64, f64) -> [f64; 4]>;
    let best = |s: Stopping, t: Option<u64>| -> Release {
        Box::new(move |l, m| three_outcome_best(&|z| pgf_closed(s, t, z), l, m))
    };
    let cases: Vec<(&str, SelectionParams, Release, f64)> = vec![
        (
            "geometric",
            SelectionParams::new(Stopping::Geometric { gamma: 0.01 }, eps0),
            best(Stopping::Geometric { gamma: 0.01 }, None),
            2.8,
        ),
        (
            "tnb eta=0.5",
            SelectionParams::new(
                Stopping::TruncatedNegBinomial {
                    eta: 0.5,
                    gamma: 0.01,
                },
                eps0,
            ),
            best(
                Stopping::TruncatedNegBinomial {
                    eta: 0.5,
                    gamma: 0.01,
                },
                None,
            ),
            2.3,
        ),
        (
            "poisson mu=8",
            SelectionParams::new(Stopping::Poisson { mu: 8.0 }, eps0),
            best(Stopping::Poisson { mu: 8.0 }, None),
            // ε₀ + μ tanh(ε₀/2) = 2.46 ε₀ here.
            2.0,
        ),
        (
            "hard stop T=50",
            SelectionParams::new(Stopping::Geometric { gamma: 0.05 }, eps0).with_max_runs(50),
            best(Stopping::Geometric { gamma: 0.05 }, Some(50)),
            2.5,
        ),
        (
            "threshold",
            SelectionParams::new(Stopping::Geometric { gamma: 0.01 }, eps0).with_threshold(0.0),
            Box::new(|l, m| three_outcome_threshold(0.01, None, l, m)),
            1.8,
        ),
        (
            "threshold T=100",
            SelectionParams::new(Stopping::Geometric { gamma: 0.05 }, eps0)
                .with_threshold(0.0)
                .with_max_runs(100),
            Box::new(|l, m| three_outcome_threshold(0.05, Some(100), l, m)),
            1.8,
        ),
    ];
    for (what, params, release, attained) in cases {
        let g = params.check().unwrap().guarantee();
        assert_eq!(g.delta, 0.0, "{what}: {g:?}");
        let worst = worst_case(eps0, &*release);
        eprintln!(
            "{what}: reported {:.4} = {:.3} eps0, worst found {worst:.4} = {:.3} eps0 ({})",
            g.epsilon,
            g.epsilon / eps0,
            worst / eps0,
            g.source
        );
        assert!(
            worst <= g.epsilon * (1.0 + 1e-9),
            "{what}: worst case {worst} above the reported {}",
            g.epsilon
        );
        assert!(
            worst >= attained * eps0,
            "{what}: the search found only {worst} (expected at least {attained} eps0)"
        );
    }
}

/// The accounting's statements, by hand, for the documented cases (docs/private-candidates.md).
#[test]
fn statements_match_the_documented_formulas() {
    let g = |p: SelectionParams| p.check().unwrap();
    let e0 = 0.4;
    assert_eq!(
        g(SelectionParams::new(Stopping::Geometric { gamma: 0.1 }, e0))
            .guarantee()
            .epsilon,
        3.0 * e0
    );
    let tnb = Stopping::TruncatedNegBinomial {
        eta: -0.5,
        gamma: 0.1,
    };
    assert!((g(SelectionParams::new(tnb, e0)).guarantee().epsilon - 1.5 * e0).abs() < 1e-15);
    let mu = 5.0;
    let p = g(SelectionParams::new(Stopping::Poisson { mu }, e0)).guarantee();
    assert!((p.epsilon - (e0 + mu * (e0 / 2.0).tanh())).abs() < 1e-15);
    // Threshold without a hard stop: 2ε₀, pure.
    let t = g(SelectionParams::new(Stopping::Geometric { gamma: 0.1 }, e0).with_threshold(1.0));
    assert_eq!(t.guarantee().epsilon, 2.0 * e0);
    // (ε₀, δ₀) runs: δ = 1 − E(1−δ₀)^K = δ₀/(γ + (1−γ)δ₀) for the geometric law.
    let (gamma, d0) = (0.1, 1e-6);
    let a = g(SelectionParams::new(Stopping::Geometric { gamma }, e0).with_delta0(d0)).guarantee();
    let expected = d0 / (gamma + (1.0 - gamma) * d0);
    assert!((a.delta - expected).abs() < 1e-9 * expected, "{a:?}");
    // Hard stop, Theorem 3.4 form: (3ε₀, (1 + e^{3ε₀})(1−γ)^T) among the statements.
    let h = g(SelectionParams::new(Stopping::Geometric { gamma }, e0).with_max_runs(100));
    let tail = h
        .statements()
        .iter()
        .find(|s| s.source.contains("3.4"))
        .unwrap();
    assert_eq!(tail.epsilon, 3.0 * e0);
    let want = (1.0 + (3.0 * e0).exp()) * (1.0 - gamma).powi(100);
    assert!((tail.delta - want).abs() < 1e-12 * want);
    // The pure statement first, and just above 3ε₀.
    assert_eq!(h.guarantee().delta, 0.0);
    assert!(h.guarantee().epsilon > 3.0 * e0 && h.guarantee().epsilon < 3.0 * e0 + 1e-3);
}

/// The exact Poisson sampler of the secure path against the Poisson pmf, and against μ × 1.3.
#[test]
fn exact_poisson_matches_its_pmf() {
    for (i, mu) in [0.3, 2.5, 17.0].into_iter().enumerate() {
        let mu_num = (mu * 2f64.powi(32)) as u64;
        let stop = ExactStopping::Poisson { mu_num };
        let cut = (mu * 3.0 + 10.0) as u64;
        let n = 200_000u64;
        let mut rng = SecureRng::from_seed_insecure(1000 + i as u64);
        let mut h = vec![0u64; cut as usize + 1];
        for _ in 0..n {
            h[stop.sample(&mut rng).min(cut) as usize] += 1;
        }
        let cells = |m: f64| {
            let s = Stopping::Poisson { mu: m };
            let mut c: Vec<f64> = (0..cut).map(|k| pmf(s, k)).collect();
            c.push(1.0 - c.iter().sum::<f64>());
            c
        };
        assert_fits(&h, &cells(mu), &format!("exact Poisson mu={mu}"));
        assert_rejects(&h, &cells(1.3 * mu), &format!("exact Poisson mu={mu} x1.3"));
    }
}

// ---------------------------------------------------------------------------------------------
// The registry mechanisms on score vectors
// ---------------------------------------------------------------------------------------------

const Q: [f64; 5] = [0.0, 0.5, 1.0, 1.25, 2.0];
const D: [f64; 5] = [1.0, 2.0, 0.5, 1.0, 1.5];

fn lap_tail(x: f64, b: f64) -> f64 {
    // P(Lap(b) ≥ x)
    if x >= 0.0 {
        0.5 * (-x / b).exp()
    } else {
        1.0 - 0.5 * (x / b).exp()
    }
}

/// `rs-threshold`'s law: a run is candidate a (prob. 1/k) with `q_a + Lap(Δ_a/ε₀) ≥ τ`; the first
/// success is released, ⊥ as a uniform candidate.
fn rs_threshold_law(eps0: f64, gamma: f64, tau: f64, t: Option<u64>) -> Vec<f64> {
    let k = Q.len() as f64;
    let succ: Vec<f64> = Q
        .iter()
        .zip(D)
        .map(|(q, d)| lap_tail(tau - q, d / eps0) / k)
        .collect();
    let p: f64 = succ.iter().sum();
    let r = (1.0 - p) * (1.0 - gamma);
    let s = match t {
        None => 1.0 / (1.0 - r),
        Some(t) => (1.0 - r.powf(t as f64)) / (1.0 - r),
    };
    let bottom = 1.0 - p * s;
    succ.iter().map(|x| x * s + bottom / k).collect()
}

/// The hard-stopped best-of's law: `P(o) = (1/k) ∫ f_o(x − q_o) φ_T'(G(x)) dx` with φ_T' the
/// derivative of the pgf of min(Geometric(γ), T) and G the mean cdf of one run's noisy value
/// (Simpson's rule on pieces between the scores).
fn rs_hard_law(eps0: f64, gamma: f64, t: u64) -> Vec<f64> {
    let k = Q.len();
    let scales: Vec<f64> = D.iter().map(|d| d / eps0).collect();
    let dphi = |z: f64| {
        // Σ_{j=1}^{T} j P(min(K,T) = j) z^{j−1}
        let mut s = 0.0;
        for j in 1..=t {
            let pj = if j < t {
                gamma * (1.0 - gamma).powf(j as f64 - 1.0)
            } else {
                (1.0 - gamma).powf(t as f64 - 1.0)
            };
            s += j as f64 * pj * z.powf(j as f64 - 1.0);
        }
        s
    };
    let bmax = scales.iter().cloned().fold(0.0, f64::max);
    let mut knots = Q.to_vec();
    knots.extend([Q[0] - 60.0 * bmax, Q[k - 1] + 60.0 * bmax]);
    knots.sort_by(f64::total_cmp);
    let cdf = |x: f64, b: f64| 1.0 - lap_tail(x, b);
    let g = |x: f64| (0..k).map(|a| cdf(x - Q[a], scales[a])).sum::<f64>() / k as f64;
    (0..k)
        .map(|o| {
            let f = |x: f64| {
                let z = x - Q[o];
                (-z.abs() / scales[o]).exp() / (2.0 * scales[o]) * dphi(g(x)) / k as f64
            };
            let mut total = 0.0;
            for w in knots.windows(2) {
                let m = 4_000;
                let h = (w[1] - w[0]) / m as f64;
                let mut s = f(w[0]) + f(w[1]);
                for i in 1..m {
                    s += if i % 2 == 1 { 4.0 } else { 2.0 } * f(w[0] + i as f64 * h);
                }
                total += s * h / 3.0;
            }
            total
        })
        .collect()
}

fn mech_counts(name: &str, params: &MechParams, n: u64, seed: u64, secure: bool) -> Vec<u64> {
    let m = mechanisms::build(name, params).unwrap();
    let problem = Problem::new(&Q, &D).unwrap();
    if secure {
        let prepared = m.prepare_secure(&problem).unwrap();
        (0..n.div_ceil(4096))
            .into_par_iter()
            .map(|c| {
                let mut rng = SecureRng::from_seed_insecure(seed.wrapping_mul(1 << 32) + c);
                let mut out = vec![0u64; Q.len()];
                for _ in c * 4096..((c + 1) * 4096).min(n) {
                    out[prepared.sample(&mut rng)] += 1;
                }
                out
            })
            .reduce(
                || vec![0u64; Q.len()],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            )
    } else {
        crate::util::counts(&*m, &Q, &D, n, seed)
    }
}

/// `rs-threshold` and `rs-hard` against their exact laws with the ε₀ the calibration gives, on
/// the seeded and the secure path; ε × 1.3 and γ × 1.3 rejected.
#[test]
fn score_vector_selections_follow_their_exact_laws() {
    // ε = 4 and τ = 2.5: one run reaches τ with probability about 0.07, comparable to γ, so
    // the law moves with γ as well as with ε.
    let (eps, gamma, tau) = (4.0, 0.1, 2.5);
    for (i, t) in [None, Some(12u64)].into_iter().enumerate() {
        let mut params = MechParams::default()
            .with_epsilon(eps)
            .with_param("gamma", gamma)
            .with_param("threshold", tau);
        if let Some(t) = t {
            params = params.with_param("max_runs", t as f64);
        }
        let m = mechanisms::build("rs-threshold", &params).unwrap();
        assert_eq!(m.guarantee(), Guarantee::Pure { epsilon: eps });
        // ε₀ from the theorem: ε/2, or max(ε/T, (ε − x_T)/2) with x_T the hard stop's term.
        let eps0_of = |e: f64, g: f64| {
            let sel = SelectionParams::new(Stopping::Geometric { gamma: g }, e / 2.0);
            match t {
                None => e / 2.0,
                Some(t) => {
                    let extra = sel.with_max_runs(t).with_threshold(tau).check().unwrap();
                    // extra ε of the hard stop at ε₀ = e/2 (independent of ε₀)
                    let x = extra.guarantee().epsilon - e;
                    (e / t as f64).max((e - x) / 2.0)
                }
            }
        };
        let e0 = eps0_of(eps, gamma);
        for secure in [false, true] {
            let what = format!("rs-threshold T={t:?} secure={secure}");
            let c = mech_counts("rs-threshold", &params, N, 1100 + i as u64, secure);
            assert_fits(&c, &rs_threshold_law(e0, gamma, tau, t), &what);
            assert_rejects(
                &c,
                &rs_threshold_law(eps0_of(1.3 * eps, gamma), gamma, tau, t),
                &format!("{what}: eps x1.3"),
            );
            assert_rejects(
                &c,
                &rs_threshold_law(e0, 1.3 * gamma, tau, t),
                &format!("{what}: gamma x1.3"),
            );
        }
    }
    // The hard stops at ε = 1, T = 40 ((1 − γ)^T = 0.015).
    let (eps, t) = (1.0f64, 40u64);
    let params = MechParams::default()
        .with_epsilon(eps)
        .with_param("gamma", gamma)
        .with_param("max_runs", t as f64);
    for name in ["rs-hard", "rs-hard-delta"] {
        let m = mechanisms::build(name, &params).unwrap();
        let e0 = match name {
            "rs-hard-delta" => eps / 3.0,
            _ => {
                let sel = SelectionParams::new(Stopping::Geometric { gamma }, 1.0)
                    .with_max_runs(t)
                    .check()
                    .unwrap();
                // pure statement: 3ε₀ + x'_T, so ε₀ = (ε − x'_T)/3 (x'_T < ε here)
                let x = sel.guarantee().epsilon - 3.0;
                (eps - x) / 3.0
            }
        };
        let law = rs_hard_law(e0, gamma, t);
        assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        for secure in [false, true] {
            let what = format!("{name} secure={secure}");
            let c = mech_counts(name, &params, N, 1200 + u64::from(secure), secure);
            assert_fits(&c, &law, &what);
            assert_rejects(
                &c,
                &rs_hard_law(1.3 * e0, gamma, t),
                &format!("{what}: eps x1.3"),
            );
        }
        if name == "rs-hard-delta" {
            let want = (1.0 + eps.exp()) * (1.0 - gamma).powi(t as i32);
            match m.guarantee() {
                Guarantee::Approx { epsilon, delta } => {
                    assert_eq!(epsilon, eps);
                    assert!((delta - want).abs() < 1e-12 * want, "{delta} vs {want}");
                }
                g => panic!("rs-hard-delta claims {g}"),
            }
        }
    }
}

/// The audit at the guarantee the API reports: consistent for `rs-threshold`, `rs-hard` and
/// `rs-hard-delta` (whose δ it takes into account), and a violation for the references that
/// report ε₀ instead of the theorem's total (`rs-threshold-eps0`: 2ε; `rs-hard-eps0`: about 3ε).
#[test]
fn the_audit_is_consistent_at_the_reported_guarantee_and_flags_the_understated_total() {
    let base_q = [0.0, 0.25, 0.5, 0.75, 1.0];
    let base_d = [0.2, 1.0, 0.5, 2.0, 1.0];
    let pairs = builtin_pairs(&base_q, &base_d, 5).unwrap();
    let config = AuditConfig::new(100_000, 1e-4, 21).unwrap();
    let params = MechParams::default()
        .with_epsilon(1.0)
        .with_param("threshold", 1.0)
        .with_param("max_runs", 100.0);
    for (name, violation) in [
        ("rs-threshold", false),
        ("rs-hard", false),
        ("rs-hard-delta", false),
        ("rs-threshold-eps0", true),
        ("rs-hard-eps0", true),
    ] {
        let m = mechanisms::build(name, &params).unwrap();
        let r = audit::audit(&*m, &pairs, &config, &|_| {}).unwrap();
        eprintln!(
            "audit {name}: claims {}, max eps_LB {:.4}, verdict {}",
            r.guarantee,
            r.max_eps_lb,
            r.verdict()
        );
        assert_eq!(r.violation, violation, "{name}: eps_LB {}", r.max_eps_lb);
        if violation {
            assert_eq!(r.verdict(), "VIOLATION");
        }
    }
    // A pure reference claim of ε₀ for rs-hard's selection would be refuted too: its ε_LB is
    // above ε₀ = ε/3 — the total is what must be reported.
    let m = mechanisms::build("rs-hard", &params).unwrap();
    let r = audit::audit(&*m, &pairs, &config, &|_| {}).unwrap();
    assert!(r.max_eps_lb > 1.0 / 3.0, "{}", r.max_eps_lb);
}

/// `select`, `synth`, the bandit and `recommend` need pure ε-DP and refuse `rs-hard-delta` with
/// a message that names it; `all` does not include the named-only selections.
#[test]
fn approximate_dp_is_refused_where_pure_eps_is_needed() {
    let spec = mechanisms::spec("rs-hard-delta").unwrap();
    let e = mechanisms::private_candidates::scores::refuse_approximate(
        &[spec],
        &MechParams::default(),
        "select",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("rs-hard-delta") && e.contains("select"), "{e}");
    let all: Vec<&str> = mechanisms::parse_list("all")
        .unwrap()
        .iter()
        .map(|s| s.name)
        .collect();
    for n in ["rs-threshold", "rs-hard", "rs-hard-delta"] {
        assert!(!all.contains(&n), "{n} in all");
        assert!(mechanisms::parse_list(n).is_ok());
    }
    let cfg = recsel::experiments::bandit::BanditConfig {
        policies: "rs-hard-delta".into(),
        ..recsel::experiments::bandit::BanditOptions::default().config(|| 0)
    };
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("rs-hard-delta"), "{e}");
}

/// `rs`, `rs-tnb` and `rs-exp` run through the selection loop of this module; their seeded
/// outputs are pinned: the counts of `recsel sample --mech M --eps 1 --scores 0,0.5,1,1.2,2,0.3,0.9
/// --sens 1,2,0.5,1,1.5,0.7,1 --n 100000 --seed 7 --json` for the draw-by-draw loop (γ = 0.5,
/// 0.05) and the direct maximum draw (γ = 0.001, 0.01, 0.002), every stopping law and both noises.
#[test]
fn rs_family_outputs_for_a_seed_are_pinned() {
    let q = [0.0, 0.5, 1.0, 1.2, 2.0, 0.3, 0.9];
    let d = [1.0, 2.0, 0.5, 1.0, 1.5, 0.7, 1.0];
    let problem = Problem::new(&q, &d).unwrap();
    let cases: [(&str, f64, f64, [u64; 7]); 9] = [
        (
            "rs",
            0.5,
            0.0,
            [13035, 14704, 13987, 14625, 16382, 12846, 14421],
        ),
        (
            "rs",
            0.05,
            0.0,
            [9114, 28163, 5477, 13054, 26178, 6035, 11979],
        ),
        ("rs", 0.001, 0.0, [2095, 65333, 194, 3095, 26092, 399, 2792]),
        (
            "rs-tnb",
            0.3,
            0.5,
            [12390, 15440, 13332, 14892, 17336, 12344, 14266],
        ),
        (
            "rs-tnb",
            0.05,
            -0.5,
            [12075, 15312, 13299, 15047, 17859, 12141, 14267],
        ),
        (
            "rs-tnb",
            0.002,
            1.5,
            [2065, 65868, 77, 2976, 25965, 310, 2739],
        ),
        (
            "rs-tnb",
            0.2,
            0.0,
            [12228, 15217, 13528, 15137, 17726, 12092, 14072],
        ),
        (
            "rs-exp",
            0.5,
            0.0,
            [12425, 17199, 11497, 14983, 18388, 11394, 14114],
        ),
        (
            "rs-exp",
            0.01,
            0.0,
            [4602, 50705, 805, 6660, 29831, 1362, 6035],
        ),
    ];
    for (name, gamma, eta, want) in cases {
        let params = MechParams::default()
            .with_param("gamma", gamma)
            .with_param("eta", eta);
        let m = mechanisms::build(name, &params).unwrap();
        let got = mechanisms::batch::sample_counts(
            &*m,
            &problem,
            recsel::rng::NoiseMode::Fast,
            Streams::new(7),
            100_000,
            &|_| {},
        )
        .unwrap();
        assert_eq!(got, want, "{name} gamma={gamma} eta={eta}");
    }
}

/// ⊥ is an output: `rs-threshold`'s selections through `Prepared::sample_outcome` (the counts of
/// `recsel sample`) release ⊥ with the probability of Theorem 3.1 and each candidate with its
/// share of the successes — the exact law with ⊥ as its own outcome, on the seeded and the secure
/// path; γ × 1.3 is rejected. Mechanisms that cannot release ⊥ say so and count none, with the
/// same counts as before.
#[test]
fn rs_threshold_releases_bottom_as_its_own_outcome() {
    use recsel::mechanisms::batch::{sample_counts, sample_outcome_counts};
    use recsel::rng::NoiseMode;
    let (eps, gamma, tau) = (4.0, 0.1, 2.5);
    let params = MechParams::default()
        .with_epsilon(eps)
        .with_param("gamma", gamma)
        .with_param("threshold", tau);
    let m = mechanisms::build("rs-threshold", &params).unwrap();
    assert!(m.may_release_bottom());
    let eps0 = eps / 2.0;
    let law = |gamma: f64| {
        let k = Q.len() as f64;
        let succ: Vec<f64> = Q
            .iter()
            .zip(D)
            .map(|(q, d)| lap_tail(tau - q, d / eps0) / k)
            .collect();
        let p: f64 = succ.iter().sum();
        let s = 1.0 / (1.0 - (1.0 - p) * (1.0 - gamma));
        let mut out: Vec<f64> = succ.iter().map(|x| x * s).collect();
        out.push(1.0 - p * s);
        out
    };
    let problem = Problem::new(&Q, &D).unwrap();
    for mode in [NoiseMode::Fast, NoiseMode::Secure] {
        let c = sample_outcome_counts(&*m, &problem, mode, Streams::new(17), N, &|_| {}).unwrap();
        let mut cells = c.candidates.clone();
        cells.push(c.bottom);
        assert!(c.bottom > 0);
        if mode.is_secure() {
            // The secure path rounds τ up onto the grid of the scores; with these scores (exact
            // on the grid) it is τ itself.
            assert_fits(&cells, &law(gamma), "rs-threshold with bottom, secure");
        } else {
            assert_fits(&cells, &law(gamma), "rs-threshold with bottom");
            assert_rejects(
                &cells,
                &law(gamma * 1.3),
                "rs-threshold with bottom, 1.3 gamma",
            );
        }
    }
    // A mechanism without ⊥: none counted, the same counts as `sample_counts`.
    let rs = mechanisms::build("rs-hard", &params).unwrap();
    assert!(!rs.may_release_bottom());
    let a = sample_outcome_counts(
        &*rs,
        &problem,
        NoiseMode::Fast,
        Streams::new(18),
        50_000,
        &|_| {},
    )
    .unwrap();
    let b = sample_counts(
        &*rs,
        &problem,
        NoiseMode::Fast,
        Streams::new(18),
        50_000,
        &|_| {},
    )
    .unwrap();
    assert_eq!(a.bottom, 0);
    assert_eq!(a.candidates, b);
}

/// `recsel sample` reports ⊥ for `rs-threshold` (a `⊥` line, `"bottom"` in the JSON, the counts
/// summing to n with it) and nothing new for a mechanism that cannot release it; the audit counts
/// ⊥ as an output of its own.
#[test]
fn sample_and_audit_report_bottom() {
    let run = |mech: &str, json: bool| {
        let mut args = vec![
            "sample",
            "--mech",
            mech,
            "--eps",
            "1",
            "--scores",
            "0,0.5,1",
            "--sens",
            "1,1,1",
            "--n",
            "20000",
            "--seed",
            "5",
            "--threshold",
            "2",
            "--gamma",
            "0.2",
        ];
        if json {
            args.push("--json");
        }
        let o = crate::util::recsel(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let text = run("rs-threshold", false);
    let bottom_line = text
        .lines()
        .find(|l| l.trim_start().starts_with('⊥'))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&run("rs-threshold", true)).unwrap();
    let counts: Vec<u64> = serde_json::from_value(v["counts"].clone()).unwrap();
    let bottom = v["bottom"].as_u64().unwrap();
    assert!(
        bottom > 2_000,
        "a threshold above every score gives up often: {bottom}"
    );
    assert_eq!(counts.iter().sum::<u64>() + bottom, 20_000);
    assert!(bottom_line.contains(&bottom.to_string()), "{bottom_line}");
    let v: serde_json::Value = serde_json::from_str(&run("rs-hard", true)).unwrap();
    assert!(v.get("bottom").is_none(), "{v}");
    assert!(!run("rs-hard", false).contains('⊥'));

    let pairs = builtin_pairs(&[0.0, 0.25, 0.5, 0.75, 1.0], &[0.2, 1.0, 0.5, 2.0, 1.0], 5).unwrap();
    let config = AuditConfig::new(20_000, 1e-4, 21).unwrap();
    let params = MechParams::default()
        .with_epsilon(1.0)
        .with_param("threshold", 1.0);
    let r = audit::audit(
        &*mechanisms::build("rs-threshold", &params).unwrap(),
        &pairs,
        &config,
        &|_| {},
    )
    .unwrap();
    let b = r.bottom.expect("rs-threshold can release bottom");
    assert!(b > 0 && b < r.results.len() as u64 * 20_000, "{b}");
    let r = audit::audit(
        &*mechanisms::build("rs-hard", &params).unwrap(),
        &pairs,
        &config,
        &|_| {},
    )
    .unwrap();
    assert_eq!(r.bottom, None);
}

/// Theorem 3.3 (random stopping's utility): with K ~ Geometric(γ) and p = P(one run scores ≥ τ),
/// the best run scores below τ with probability exactly φ(1 − p) = γ(1−p)/(γ + p(1−γ)) ≤ γ/p:
/// measured at three thresholds against the exact value (a two-sided Clopper–Pearson interval at
/// 1e-6 contains it), and a selection at γ × 1.3 breaks the bound where it is nearly attained.
#[test]
fn random_stopping_reaches_a_threshold_as_theorem_3_3_says() {
    let n = 400_000;
    for (gamma, first) in [(0.05, 4usize), (0.2, 3), (0.01, 5)] {
        let p: f64 = PI[first..].iter().sum();
        let exact = gamma * (1.0 - p) / (gamma + p * (1.0 - gamma));
        assert!(exact <= gamma / p);
        let below = |gamma: f64, seed: u64| -> u64 {
            let sel = SelectionParams::new(Stopping::Geometric { gamma }, 0.5)
                .check()
                .unwrap();
            let c = counts(&sel, n, seed);
            c[..first].iter().sum()
        };
        let k = below(gamma, 60 + first as u64);
        let (lo, hi) = (
            clopper_pearson_lower(k, n, ALPHA / 2.0),
            clopper_pearson_upper(k, n, ALPHA / 2.0),
        );
        eprintln!(
            "theorem 3.3, gamma {gamma}, p {p:.2}: below tau {:.5}, exact {exact:.5}, bound gamma/p {:.5}",
            k as f64 / n as f64,
            gamma / p
        );
        assert!(lo <= exact && exact <= hi, "{lo} {exact} {hi}");
        let k_wrong = below(gamma * 1.3, 70 + first as u64);
        assert!(
            clopper_pearson_lower(k_wrong, n, ALPHA) > exact,
            "gamma x 1.3 must break the bound"
        );
    }
}

/// Theorem 3.1 (d)/(e): the number of runs N of the known threshold with hard stop T has
/// P(N > j) = ((1−p)(1−γ))^j for j < T, so E N = (1 − r^T)/(1 − r) ≤ min(T, 1/(γ + p(1−γ))),
/// r = (1−p)(1−γ). The runs the API reports follow that law (chi-square), γ × 1.3 is rejected,
/// and their mean is within the bound.
#[test]
fn the_known_threshold_makes_the_number_of_runs_theorem_3_1_says() {
    let (gamma, first, t) = (0.15, 4usize, 8u64);
    let p: f64 = PI[first..].iter().sum();
    let law = |gamma: f64| -> Vec<f64> {
        let r = (1.0 - p) * (1.0 - gamma);
        (1..=t)
            .map(|j| {
                if j < t {
                    r.powf(j as f64 - 1.0) * (1.0 - r)
                } else {
                    r.powf(t as f64 - 1.0)
                }
            })
            .collect()
    };
    let runs = |gamma: f64, seed: u64| -> Vec<u64> {
        let sel = SelectionParams::new(Stopping::Geometric { gamma }, 0.5)
            .with_threshold(first as f64)
            .with_max_runs(t)
            .check()
            .unwrap();
        let streams = Streams::new(seed);
        (0..N)
            .into_par_iter()
            .fold(
                || vec![0u64; t as usize],
                |mut c, i| {
                    let mut rng = streams.stream(2, 0, 0, i as u32);
                    let out = sel.run(
                        |rng| {
                            let o = draw_outcome(rng.random::<f64>());
                            (o, o as f64)
                        },
                        &mut rng,
                    );
                    c[out.runs as usize - 1] += 1;
                    c
                },
            )
            .reduce(
                || vec![0u64; t as usize],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            )
    };
    let c = runs(gamma, 80);
    assert_fits(&c, &law(gamma), "number of runs");
    assert_rejects(&c, &law(gamma * 1.3), "number of runs against gamma x 1.3");
    let mean = c
        .iter()
        .enumerate()
        .map(|(j, &x)| (j + 1) as f64 * x as f64)
        .sum::<f64>()
        / N as f64;
    let r = (1.0 - p) * (1.0 - gamma);
    let exact = (1.0 - r.powf(t as f64)) / (1.0 - r);
    let bound = (t as f64).min(1.0 / (gamma + p * (1.0 - gamma)));
    eprintln!("theorem 3.1 (d)/(e): mean runs {mean:.4}, exact {exact:.4}, bound {bound:.4}");
    assert!(exact <= bound);
    assert!((mean - exact).abs() < 0.02, "{mean} vs {exact}");
}
