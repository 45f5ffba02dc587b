//! The stopping-time distributions of random stopping against their exact pmfs (docs/mechanisms.md), read off
//! the mechanisms themselves, with power checks on γ.

use rayon::prelude::*;
use recsel::mechanisms::{Problem, RandomStopping, StoppingRule};
use recsel::numerics::distributions::{Geometric1, Logarithmic, TruncatedNegBinomial};
use recsel::rng::Streams;

use crate::util::{assert_fits, assert_rejects};

const N: u64 = 200_000;

/// Histogram of K over n selections of `mech`, with cells 1..=cut and one tail cell (> cut).
fn k_histogram(mech: &RandomStopping, n: u64, cut: u64, seed: u64) -> Vec<u64> {
    let q = [0.0, 1.0, 0.5];
    let d = [1.0, 0.5, 2.0];
    let problem = Problem::new(&q, &d).unwrap();
    let streams = Streams::new(seed);
    let ks: Vec<u64> = (0..n)
        .into_par_iter()
        .map(|i| {
            mech.select_counting(&problem, &mut streams.stream(9, 0, 0, i as u32))
                .1
        })
        .collect();
    let mut h = vec![0u64; cut as usize + 1];
    for k in ks {
        assert!(k >= 1, "K must be at least 1");
        h[(k.min(cut + 1) - 1) as usize] += 1;
    }
    h
}

/// pmf cells 1..=cut and the tail mass.
fn cells(pmf: impl Fn(u64) -> f64, cut: u64) -> Vec<f64> {
    let mut p: Vec<f64> = (1..=cut).map(&pmf).collect();
    let head: f64 = p.iter().sum();
    p.push((1.0 - head).max(0.0));
    p
}

#[test]
fn rs_stops_after_a_geometric_number_of_draws() {
    for (i, gamma) in [0.5, 0.05].into_iter().enumerate() {
        let m = RandomStopping::new(StoppingRule::Geometric, 1.0, gamma, 0.0).unwrap();
        let cut = (8.0 / gamma) as u64;
        let h = k_histogram(&m, N, cut, 100 + i as u64);
        let pmf = |g: f64| {
            let geo = Geometric1::new(g).unwrap();
            cells(move |k| geo.pmf(k), cut)
        };
        assert_fits(&h, &pmf(gamma), &format!("rs K, gamma={gamma}"));
        assert_rejects(&h, &pmf((1.3 * gamma).min(1.0)), "rs K vs 1.3 gamma");
        assert_rejects(&h, &pmf(0.7 * gamma), "rs K vs 0.7 gamma");
    }
}

#[test]
fn rs_tnb_stops_after_a_truncated_negative_binomial_number_of_draws() {
    let cases = [
        (0.0, 0.05),
        (0.5, 0.05),
        (1.0, 0.05),
        (-0.5, 0.05),
        (0.5, 0.3),
    ];
    for (i, (eta, gamma)) in cases.into_iter().enumerate() {
        let m = RandomStopping::new(StoppingRule::TruncatedNegBinomial, 1.0, gamma, eta).unwrap();
        let cut = (10.0 / gamma) as u64;
        let h = k_histogram(&m, N, cut, 200 + i as u64);
        // The reference is the documented formula (docs/mechanisms.md, "Random stopping") computed here, not the library's pmf.
        let pmf = |g: f64| {
            let p = tnb_pmf_spec(eta, g, cut as usize);
            cells(move |k| p[k as usize - 1], cut)
        };
        assert_fits(
            &h,
            &pmf(gamma),
            &format!("rs-tnb K, eta={eta} gamma={gamma}"),
        );
        assert_rejects(
            &h,
            &pmf(1.3 * gamma),
            &format!("rs-tnb eta={eta} vs 1.3 gamma"),
        );
        assert_rejects(
            &h,
            &pmf(0.7 * gamma),
            &format!("rs-tnb eta={eta} vs 0.7 gamma"),
        );
    }
}

/// P(K = k), k = 1..=n, of the truncated negative binomial D_{η,γ} by the formula of docs/mechanisms.md, "Random stopping", written
/// out independently of the library: for η ≠ 0 `(1−γ)^k / (γ^{−η} − 1) · Π_{l=0}^{k−1} (l+η)/(l+1)`
/// with the product accumulated factor by factor; for η = 0 the logarithmic law
/// `(1−γ)^k / (k ln(1/γ))`.
fn tnb_pmf_spec(eta: f64, gamma: f64, n: usize) -> Vec<f64> {
    let mut product = 1.0;
    (1..=n)
        .map(|k| {
            let kf = k as f64;
            let geometric = (kf * (-gamma).ln_1p()).exp();
            if eta == 0.0 {
                geometric / (kf * (1.0 / gamma).ln())
            } else {
                product *= (kf - 1.0 + eta) / kf;
                geometric * product / (gamma.powf(-eta) - 1.0)
            }
        })
        .collect()
}

/// The η ≠ 0 pmf of `TruncatedNegBinomial` (computed in log space with ln Γ) against the documented
/// product formula computed above, over η < 0 and η > 0 and γ down to the paper's Netflix 0.0008,
/// relative 1e-9 over every k with mass above 1e-300 (k ≤ 20,000). Measured: at most 8.7e-11
/// (η = 2.5, γ = 0.008), consistent with the library's ln Γ(k+η) − ln Γ(k+1), which for large k
/// cancels numbers of order 1e5 (absolute rounding ~1e-11); the product accumulated here is good to
/// about k · 1e-16. Power: the same comparison rejects the library pmf of a neighbouring η
/// (η + 0.01) or γ (γ × 1.01).
#[test]
fn tnb_pmf_is_the_spec_product_formula() {
    let cases = [
        (0.5, 0.05),
        (-0.5, 0.05),
        (1.0, 0.3),
        (-0.9, 0.2),
        (2.5, 0.008),
        (0.3, 0.0008),
        (-0.3, 0.0008),
    ];
    for (eta, gamma) in cases {
        let n = 20_000;
        let want = tnb_pmf_spec(eta, gamma, n);
        let mass: f64 = want.iter().sum();
        let lib = TruncatedNegBinomial::new(eta, gamma).unwrap();
        let wrong_eta = TruncatedNegBinomial::new(eta + 0.01, gamma).unwrap();
        let wrong_gamma = TruncatedNegBinomial::new(eta, gamma * 1.01).unwrap();
        let mut worst: f64 = 0.0;
        let (mut worst_eta, mut worst_gamma): (f64, f64) = (0.0, 0.0);
        for (i, &w) in want.iter().enumerate() {
            if w < 1e-300 {
                break;
            }
            let k = i as u64 + 1;
            let rel = |p: f64| (p - w).abs() / w;
            worst = worst.max(rel(lib.pmf(k)));
            worst_eta = worst_eta.max(rel(wrong_eta.pmf(k)));
            worst_gamma = worst_gamma.max(rel(wrong_gamma.pmf(k)));
        }
        eprintln!(
            "tnb eta={eta} gamma={gamma}: largest relative difference {worst:.2e}; \
             neighbouring eta {worst_eta:.2e}, gamma {worst_gamma:.2e}"
        );
        assert!(
            worst <= 1e-9,
            "tnb eta={eta} gamma={gamma}: pmf differs from the documented product by {worst:e} (relative)"
        );
        assert!(
            worst_eta > 1e-3 && worst_gamma > 1e-3,
            "tnb eta={eta} gamma={gamma}: no power ({worst_eta:e}, {worst_gamma:e})"
        );
        // For γ ≥ 0.008 the first 20,000 terms hold all but < 1e-12 of the mass.
        if gamma >= 0.008 {
            assert!(
                (mass - 1.0).abs() < 1e-12,
                "eta={eta} gamma={gamma}: {mass}"
            );
        }
    }
}

/// The logarithmic case of the formula in docs/mechanisms.md: `(1−γ)^k / (k ln(1/γ))`.
#[test]
fn logarithmic_pmf_is_the_spec_formula() {
    let gamma: f64 = 0.0008;
    let l = Logarithmic::new(gamma).unwrap();
    for k in [1u64, 2, 10, 1000] {
        let want = (1.0 - gamma).powi(k as i32) / (k as f64 * (1.0 / gamma).ln());
        assert!((l.pmf(k) - want).abs() <= 1e-12 * want, "k={k}");
    }
}

/// Small γ stays exact: the sample mean of K matches E[K] within 6 standard errors, at the
/// paper's Netflix γ = 0.0008 (E[K] = 1250 for the geometric rule) and γ = 1e-4.
#[test]
fn small_gamma_means() {
    let streams = Streams::new(300);
    let n = 100_000u64;
    let check =
        |name: &str, draw: &(dyn Fn(&mut recsel::rng::Rng) -> u64 + Sync), mean: f64, var: f64| {
            let s: f64 = (0..n)
                .into_par_iter()
                .map(|i| draw(&mut streams.stream(1, 0, 0, i as u32)) as f64)
                .sum();
            let m = s / n as f64;
            let se = (var / n as f64).sqrt();
            assert!(
                (m - mean).abs() < 6.0 * se,
                "{name}: mean {m}, expected {mean} ± {se}"
            );
        };
    for gamma in [0.0008, 1e-4] {
        let g = Geometric1::new(gamma).unwrap();
        check(
            "geometric",
            &|r| g.sample(r),
            1.0 / gamma,
            (1.0 - gamma) / (gamma * gamma),
        );
        // Logarithmic with p = 1 − γ: mean p/((1−p)·L), variance p(1 − p/L)/((1−p)²·L), L = ln(1/γ).
        let l = Logarithmic::new(gamma).unwrap();
        let (p, ll) = (1.0 - gamma, (1.0 / gamma).ln());
        let mean = p / (gamma * ll);
        let var = p * (1.0 - p / ll) / (gamma * gamma * ll);
        check("logarithmic", &|r| l.sample(r), mean, var);
        // η = 1: the zero-truncated geometric on {0,1,…}; η = 0.5 and −0.5 by the pmf.
        for eta in [1.0, 0.5, -0.5] {
            let t = TruncatedNegBinomial::new(eta, gamma).unwrap();
            let (mut m1, mut m2) = (0.0, 0.0);
            let mut k = 1u64;
            loop {
                let p = t.pmf(k);
                m1 += k as f64 * p;
                m2 += (k * k) as f64 * p;
                if k > 200 && p * (k as f64) * (k as f64) < 1e-12 {
                    break;
                }
                k += 1;
            }
            check(
                &format!("tnb eta={eta} gamma={gamma}"),
                &|r| t.sample(r),
                m1,
                m2 - m1 * m1,
            );
        }
    }
}

/// `index_and_sign` (the candidate and Laplace sign of `rs` and `rs-tnb` from one draw,
/// docs/mechanisms.md, "Random stopping"): every (index, sign) pair has probability 1/(2k), jointly
/// — so the index is uniform and the sign fair and independent of it. Power: the joint counts
/// reject a sign tied to the index's parity (uniform margins, dependent), and an index drawn
/// from `0..k−1` only.
#[test]
fn index_and_sign_is_uniform_on_pairs() {
    use rand::Rng as _;
    use recsel::numerics::distributions::index_and_sign;
    let k = 7usize;
    let mut rng = Streams::new(11).stream(0, 0, 0, 0);
    let n = 140_000;
    let (mut joint, mut tied, mut short) =
        (vec![0u64; 2 * k], vec![0u64; 2 * k], vec![0u64; 2 * k]);
    for _ in 0..n {
        let (a, plus) = index_and_sign(&mut rng, k);
        joint[2 * a + usize::from(plus)] += 1;
        // Wrong variants drawn from the same generator.
        let b = rng.random_range(0..k);
        tied[2 * b + (b & 1)] += 1;
        let c = rng.random_range(0..k - 1);
        short[2 * c + usize::from(rng.random::<bool>())] += 1;
    }
    let uniform = vec![1.0 / (2 * k) as f64; 2 * k];
    assert_fits(&joint, &uniform, "index_and_sign joint law");
    assert_rejects(&tied, &uniform, "power: sign = index parity");
    assert_rejects(&short, &uniform, "power: index from 0..k-1");
}
