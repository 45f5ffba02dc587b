//! Theorem 5.2's utility statements (Liu & Talwar §5.3; docs/private-candidates.md, "Theorem 5.2's
//! family"): "except with probability β, the release scores at least OPT − …" for the exponential
//! mechanism by random stopping (`rs`), the generalised exponential mechanism by random stopping
//! (`rs-gem`) and the smooth-sensitivity selection (`column_statistic::SmoothSelection` with its shift).
//!
//! Each bound is checked on the library's samplers: the number of releases that fall short of
//! the bound is at most the upper 1e-6 quantile of Binomial(N, failure) — the failure probability
//! the statement gives. Power: the same count with the bound's error term divided by a factor
//! (a constant understated by that factor) exceeds that quantile. `cargo test --release --locked
//! --test tests -- theorem52_utility --nocapture` prints the failure frequencies.

use rayon::prelude::*;
use recsel::column_statistic::{SmoothNoise, SmoothSelection};
use recsel::mechanisms::private_candidates::gem_stopping::{gamma_for, UtilityStatement};
use recsel::mechanisms::private_candidates::Stopping;
use recsel::mechanisms::{self, MechParams};
use recsel::rng::Streams;
use statrs::distribution::{Binomial, DiscreteCDF};

use crate::util::counts;

/// The largest failure count compatible with Binomial(n, p) at level 1e-6: the smallest x with
/// P(X > x) ≤ 1e-6.
fn binomial_limit(n: u64, p: f64) -> u64 {
    let b = Binomial::new(p.min(1.0), n).unwrap();
    let mut x = (n as f64 * p) as u64;
    while b.sf(x) > 1e-6 {
        x += 1;
    }
    x
}

/// How many of the `counts` releases score below `bound`.
fn short_of(counts: &[u64], q: &[f64], bound: f64) -> u64 {
    counts
        .iter()
        .zip(q)
        .filter(|(_, &q)| q < bound)
        .map(|(c, _)| c)
        .sum()
}

/// Checks one statement: at the bound, at most the binomial limit of the failure probability;
/// with the error term divided by `power` (the bound `bound_at(power)`), more than it.
fn check(
    what: &str,
    c: &[u64],
    q: &[f64],
    failure: f64,
    bound_at: &dyn Fn(f64) -> f64,
    power: f64,
) {
    let n: u64 = c.iter().sum();
    let limit = binomial_limit(n, failure);
    let table: Vec<String> = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0]
        .iter()
        .map(|&f| format!("/{f}: {:.4}", short_of(c, q, bound_at(f)) as f64 / n as f64))
        .collect();
    let at = short_of(c, q, bound_at(1.0));
    let tight = short_of(c, q, bound_at(power));
    eprintln!(
        "{what}: failure probability {failure:.4}, limit {limit} of {n}; short of the bound {at} \
         (error term divided by {power}: {tight}); frequencies {}",
        table.join(", ")
    );
    assert!(
        at <= limit,
        "{what}: {at} releases short of the bound > {limit}"
    );
    if power > 1.0 {
        assert!(
            tight > limit,
            "{what}: the bound with its error term / {power} still holds ({tight} <= {limit})"
        );
    }
}

/// The exponential mechanism (`rs`: `q_a + Lap(3Δ_a/ε)`, K ~ Geometric(γ)) and the generalised
/// one (`rs-gem`), at γ = `gamma_for(k, β)` so the failure probability is β:
/// `q_out ≥ OPT − C·Δ_max` and `q_out ≥ max_j (q_j − C·Δ_j)`, C = (c + L)/ε₀.
/// The exponential mechanism (`rs`: `q_a + Lap(3Δ_a/ε)`, K ~ Geometric(γ)) and the generalised
/// one (`rs-gem`), at γ = `gamma_for(k, β)` so the failure probability is β = 0.1, k = 30:
/// `q_out ≥ OPT − C·Δ_max` and `q_out ≥ max_j (q_j − C·Δ_j)`, C = (c + L)/ε₀.
///
/// * Scores spread from OPT to OPT − 1.01·C (equal Δ): both bounds hold.
/// * A leader and 29 candidates just below OPT − C/3 (the near-worst case for the bound): both
///   hold, and with C/3 in place of C both fail (the binomial limit is exceeded).
/// * A leader with a small Δ and followers with Δ = 1 just below GEM's bound: `rs-gem` holds,
///   `rs` (no shift) does not meet GEM's bound — the shift is what makes the winner's Δ count.
#[test]
fn theorem_5_2_bounds_of_the_exponential_mechanisms_by_random_stopping_hold() {
    let (eps, beta, k, n) = (3.0, 0.1, 30usize, 20_000);
    let eps0 = eps / 3.0;
    let gamma = gamma_for(k, beta);
    let u = UtilityStatement::new(k, eps0, gamma, beta);
    assert!((u.failure - beta).abs() < 1e-12);
    let params = MechParams::default()
        .with_epsilon(eps)
        .with_param("gamma", gamma)
        .with_param("beta", beta);
    let rs = mechanisms::build("rs", &params).unwrap();
    let gem = mechanisms::build("rs-gem", &params).unwrap();
    let cc = u.coefficient;
    eprintln!(
        "theorem 5.2, k {k}, beta {beta}, gamma {gamma:.6}, eps0 {eps0}: shift c {:.4}, C {cc:.4}",
        u.shift
    );
    let d = vec![1.0; k];
    let spread: Vec<f64> = (0..k)
        .map(|i| -1.01 * cc * i as f64 / (k - 1) as f64)
        .collect();
    let mut two_level = vec![-cc / 3.0 * 1.001; k];
    two_level[0] = 0.0;
    for (m, name, seed) in [(&rs, "rs", 5201), (&gem, "rs-gem", 5203)] {
        let c = counts(&**m, &spread, &d, n, seed);
        check(
            &format!("{name}, scores spread to OPT - 1.01 C"),
            &c,
            &spread,
            u.failure,
            &|f| -cc / f,
            1.0,
        );
        let c = counts(&**m, &two_level, &d, n, seed + 1);
        check(
            &format!("{name}, 29 candidates at OPT - C/3"),
            &c,
            &two_level,
            u.failure,
            &|f| -cc / f,
            3.0,
        );
    }
    // Unequal sensitivities: GEM's bound is set by the leader's Δ = 0.3; the exponential
    // mechanism's, OPT − C·Δ_max, is C·0.7 lower.
    let mut q = vec![-0.3 * cc * 1.001; k];
    q[0] = 0.0;
    let mut d = vec![1.0; k];
    d[0] = 0.3;
    let gem_bound = |f: f64| {
        q.iter()
            .zip(&d)
            .map(|(q, d)| q - cc * d / f)
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let c = counts(&*gem, &q, &d, n, 5205);
    check(
        "rs-gem, unequal sensitivities",
        &c,
        &q,
        u.failure,
        &gem_bound,
        1.0,
    );
    let c = counts(&*rs, &q, &d, n, 5206);
    check(
        "rs, its own bound, unequal sensitivities",
        &c,
        &q,
        u.failure,
        &|f| -cc / f,
        1.0,
    );
    let short = short_of(&c, &q, gem_bound(1.0));
    let limit = binomial_limit(n, u.failure);
    eprintln!("rs against GEM's bound: {short} of {n} short (limit {limit})");
    assert!(short > limit, "rs meets GEM's bound: the test has no power");
}

/// Theorem 5.2's fourth part on `SmoothSelection` with Laplace noise and the shift
/// c = `gem_stopping::shift(γ, β)`: except with probability β the chosen column's median is at
/// least `x_j − (c + ln(2/β))·σ_j` for every column j (σ_j its run's noise scale). The table: one
/// column of 2001 rows packed around 0.7 (a small smooth sensitivity) and nine "traps" of 5 rows
/// with median 0.5 and a large one. The shifted selection meets the bound; the unshifted one
/// (the traps' large noise wins) falls short far beyond the binomial limit.
#[test]
fn theorem_5_2_bound_of_the_smooth_sensitivity_selection_holds_with_its_shift() {
    use recsel::mechanisms::private_candidates::gem_stopping::shift;
    let (eps, beta, k, n) = (3.0, 0.1, 10usize, 20_000u64);
    let gamma = gamma_for(k, beta);
    let c = shift(gamma, beta);
    let failure = UtilityStatement::new(k, eps / 3.0, gamma, beta).failure;
    let plain = SmoothSelection::new(
        eps,
        Stopping::Geometric { gamma },
        SmoothNoise::Laplace { delta: 1e-6 },
        0.5,
        0.0,
        1.0,
    )
    .unwrap();
    let shifted = plain.clone().with_shift(c).unwrap();
    let mut cols: Vec<Vec<f64>> =
        vec![(0..2001).map(|i| 0.69 + 0.02 * i as f64 / 2000.0).collect()];
    for j in 0..k - 1 {
        cols.push(vec![0.0, 0.1 + 0.02 * j as f64, 0.5, 0.9, 1.0]);
    }
    let refs: Vec<&[f64]> = cols.iter().map(|c| c.as_slice()).collect();
    let medians: Vec<f64> = plain
        .centers_and_scales(&refs)
        .unwrap()
        .iter()
        .map(|p| p.0)
        .collect();
    let sigma: Vec<f64> = shifted
        .centers_and_scales(&refs)
        .unwrap()
        .iter()
        .map(|p| p.1)
        .collect();
    let l = (2.0 / beta).ln();
    let bound = |f: f64| {
        medians
            .iter()
            .zip(&sigma)
            .map(|(x, s)| x - (c + l) * s / f)
            .fold(f64::NEG_INFINITY, f64::max)
    };
    eprintln!(
        "smooth selection, k {k}, beta {beta}, gamma {gamma:.6}: shift c {c:.4}, (beta', kappa) \
         {:?}; medians {:?}; sigma {:?}; bound {:.4}",
        shifted.smoothing_and_inflation(),
        &medians[..2],
        &sigma[..2],
        bound(1.0)
    );
    assert!(bound(1.0) > 0.5, "the traps must fall short of the bound");
    let streams = Streams::new(77);
    let tally = |sel: &SmoothSelection| -> Vec<u64> {
        let cs = sel.centers_and_scales(&refs).unwrap();
        (0..n)
            .into_par_iter()
            .fold(
                || vec![0u64; k],
                |mut acc, i| {
                    let mut rng = streams.stream(0, 0, 0, i as u32);
                    acc[sel.run_at(&cs, &mut rng).best.unwrap().0] += 1;
                    acc
                },
            )
            .reduce(
                || vec![0u64; k],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            )
    };
    let with = tally(&shifted);
    check(
        "smooth selection, shifted",
        &with,
        &medians,
        failure,
        &bound,
        1.0,
    );
    let without = tally(&plain);
    let short = short_of(&without, &medians, bound(1.0));
    let limit = binomial_limit(n, failure);
    eprintln!(
        "smooth selection without the shift: {short} of {n} short of the bound (limit {limit})"
    );
    assert!(
        short > limit,
        "the unshifted selection meets the bound: no power"
    );
}
