//! The audit of a DP training release (docs/training-privacy.md, "Audit"): two neighbouring
//! training sets — a base and the base with one more user — through the DP fit's release (the
//! capped or user-weighted Gram matrix with its noise, floating-point or exact discrete Gaussian,
//! [`crate::model::dp`]), a scalar statistic of each release, and two checks of the claimed
//! guarantee:
//!
//! 1. **An (ε, δ) lower bound** by the recipe of `recsel audit`: on a first batch of releases of
//!    each side choose the event `s > t` or `s < t` (t on a grid) with the largest empirical
//!    `ln((P' − δ)/P)`; on fresh releases bound `P' ≥ p'_lo` and `P ≤ p_hi` with one-sided
//!    Clopper–Pearson bounds at α/2 each and report `ε_LB = ln((p'_lo − δ)/p_hi)`. With
//!    probability at least 1 − α, ε_LB is below the ε the release really spends, so
//!    `ε_LB > claimed ε` refutes the claim.
//! 2. **The statistic's law**: on each side the fresh statistics are tested (chi-square, 40 cells
//!    of equal probability) against the law the claim implies, N(its noise-free value, σ²) with
//!    the claimed σ. Less noise than claimed, or noise of another shape, fails at p < 10⁻⁶.
//!
//! The statistic is the release projected onto the added user's entries: with k the number of
//! upper-triangle entries (diagonal included) the user's kept items touch, `s = Σ (G̃_ij − G_ij) /
//! √k` over those entries, `G` the base's noise-free release. It is N(0, σ²) on the base and
//! N(q√k, σ²) with the user (q their weight, 1 when sampled), the most informative linear
//! statistic of the release (its privacy loss is the whole Gaussian mechanism's).

use rayon::prelude::*;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

use crate::data::Csr;
use crate::error::{Error, Result};
use crate::model::dp::{clean_gram, GramMechanism, GramNoise};
use crate::numerics::hypothesis::{chi_square_gof, clopper_pearson_lower, clopper_pearson_upper};
use crate::privacy::NoiseSource;
use crate::rng::mix64;

/// p-value below which the statistic's law is declared different from the claimed one.
pub const LAW_P_MIN: f64 = 1e-6;

/// What the audit of a training release found.
#[derive(Debug, Clone, Serialize)]
pub struct TrainingAudit {
    /// ε claimed at δ.
    pub claimed_epsilon: f64,
    /// δ of the claim.
    pub delta: f64,
    /// σ claimed.
    pub claimed_sigma: f64,
    /// Fresh releases per side.
    pub samples: u64,
    /// Releases per side of the selection batch.
    pub select_samples: u64,
    /// Failure probability of the two Clopper–Pearson bounds together.
    pub alpha: f64,
    /// The event chosen: `s > t` (`true`) or `s < t`, and t.
    pub upper_tail: bool,
    /// The threshold t.
    pub threshold: f64,
    /// Lower bound of the event's probability with the user.
    pub p_with_lo: f64,
    /// Upper bound of the event's probability without the user.
    pub p_without_hi: f64,
    /// The (ε, δ) lower bound.
    pub epsilon_lower: f64,
    /// Chi-square p-values of the statistic against the claimed law: without, with the user.
    pub law_p: [f64; 2],
}

impl TrainingAudit {
    /// Whether the claim survived both checks.
    pub fn consistent(&self) -> bool {
        self.epsilon_lower <= self.claimed_epsilon && self.law_p.iter().all(|&p| p >= LAW_P_MIN)
    }
}

/// Audits `claim` on the neighbours `base` and `base` + one user who has `extra`, releases drawn
/// with `drawn` (the claim itself, or a deliberately mis-calibrated copy). `seed` keys the noise
/// streams (a test seed: the audit must be reproducible).
#[allow(clippy::too_many_arguments)]
pub fn audit_training_release(
    base: &Csr,
    extra: &[u32],
    claim: &GramMechanism,
    drawn: &GramMechanism,
    samples: u64,
    alpha: f64,
    seed: u64,
    cap_seed: u64,
) -> Result<TrainingAudit> {
    if samples < 1000 || !(alpha > 0.0 && alpha < 1.0) {
        return Err(Error::Invalid(format!(
            "training audit needs at least 1000 samples and α in (0, 1), got {samples} and {alpha}"
        )));
    }
    let n = base.cols();
    let mut rows: Vec<Vec<u32>> = (0..base.rows())
        .map(|u| crate::data::row_items(base, u).to_vec())
        .collect();
    let mut e = extra.to_vec();
    e.sort_unstable();
    e.dedup();
    rows.push(e);
    let with = crate::data::csr_from_rows(&rows, n);
    let g0 = clean_gram(base, drawn, cap_seed);
    let g1 = clean_gram(&with, drawn, cap_seed);
    // The entries the added user touches: where the two noise-free releases differ.
    let mut touched = Vec::new();
    for j in 0..n {
        for i in j..n {
            if g1[(i, j)] != g0[(i, j)] {
                touched.push((i, j));
            }
        }
    }
    let k = touched.len().max(1) as f64;
    let stat = |g: &faer::Mat<f64>| -> f64 {
        touched
            .iter()
            .map(|&(i, j)| g[(i, j)] - g0[(i, j)])
            .sum::<f64>()
            / k.sqrt()
    };
    // One release of a side: its noise-free matrix plus one draw of the mechanism's noise.
    let release = |side: u64, batch: u64, r: u64| -> f64 {
        let mut g = if side == 0 { g0.clone() } else { g1.clone() };
        let key = mix64(seed ^ mix64((side << 62) ^ (batch << 60) ^ r));
        let mech = drawn.with_source(NoiseSource::InsecureSeed(key));
        GramNoise::new(mech).add_to_release(g.as_mut());
        stat(&g)
    };
    let draw = |side: u64, batch: u64, count: u64| -> Vec<f64> {
        (0..count)
            .into_par_iter()
            .map(|r| release(side, batch, r))
            .collect()
    };
    let select = (samples / 4).max(1000);
    let (sel0, sel1) = (draw(0, 0, select), draw(1, 0, select));
    // Thresholds on a grid of the claimed σ around the two means.
    let sigma = claim.sigma;
    let grid: Vec<f64> = (-160..=160).map(|q| q as f64 * 0.05 * sigma).collect();
    let delta = claim.delta;
    let frac = |v: &[f64], t: f64, upper: bool| {
        v.iter()
            .filter(|&&s| if upper { s > t } else { s < t })
            .count() as f64
            / v.len() as f64
    };
    let mut best = (f64::NEG_INFINITY, true, 0.0);
    for &t in &grid {
        for upper in [true, false] {
            // s > t favours the user's side; s < t the base's.
            let (p_hi_side, p_lo_side) = if upper {
                (&sel1, &sel0)
            } else {
                (&sel0, &sel1)
            };
            let (a, b) = (frac(p_hi_side, t, upper), frac(p_lo_side, t, upper));
            let b = b.max(1.0 / select as f64);
            let est = ((a - delta) / b).ln();
            if est > best.0 {
                best = (est, upper, t);
            }
        }
    }
    let (_, upper, t) = best;
    let (f0, f1) = (draw(0, 1, samples), draw(1, 1, samples));
    let count = |v: &[f64]| {
        v.iter()
            .filter(|&&s| if upper { s > t } else { s < t })
            .count() as u64
    };
    let (num, den) = if upper { (&f1, &f0) } else { (&f0, &f1) };
    let p_with_lo = clopper_pearson_lower(count(num), samples, alpha / 2.0);
    let p_without_hi = clopper_pearson_upper(count(den), samples, alpha / 2.0);
    let epsilon_lower = if p_with_lo > delta {
        ((p_with_lo - delta) / p_without_hi).ln()
    } else {
        f64::NEG_INFINITY
    };
    let law = |v: &[f64], mean: f64| -> f64 {
        let normal = Normal::new(mean, sigma).expect("σ > 0");
        let cells = 40usize;
        let mut counts = vec![0u64; cells];
        for &s in v {
            let c = ((normal.cdf(s) * cells as f64) as usize).min(cells - 1);
            counts[c] += 1;
        }
        chi_square_gof(&counts, &vec![1.0 / cells as f64; cells]).p_value
    };
    let law_p = [law(&f0, 0.0), law(&f1, stat(&g1))];
    Ok(TrainingAudit {
        claimed_epsilon: claim.epsilon(),
        delta,
        claimed_sigma: sigma,
        samples,
        select_samples: select,
        alpha,
        upper_tail: upper,
        threshold: t,
        p_with_lo,
        p_without_hi,
        epsilon_lower,
        law_p,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dp::ContributionBound;

    fn base() -> Csr {
        crate::data::csr_from_rows(
            &[
                vec![0, 1],
                vec![1, 2, 3],
                vec![0, 4],
                vec![2, 3, 4],
                vec![0, 1, 2, 3, 4],
            ],
            5,
        )
    }

    /// The claim survives its audit; the release made with half the noise is flagged by the
    /// (ε, δ) bound itself, and one made with 30% less noise by the law of its statistic.
    /// `samples` fresh releases per side, α = 1e-6: the honest run fails with probability at
    /// most 1e-6 (the bound) + 2e-6 (the law, per side).
    fn has_power(base: &Csr, extra: &[u32], claim: &GramMechanism, samples: u64) {
        let run = |drawn: &GramMechanism, seed| {
            audit_training_release(base, extra, claim, drawn, samples, 1e-6, seed, 7).unwrap()
        };
        let honest = run(claim, 1);
        eprintln!("claimed noise: {honest:?}");
        assert!(honest.consistent(), "{honest:?}");
        let half = run(&claim.with_sigma_scaled(0.5), 2);
        eprintln!("half the noise: {half:?}");
        assert!(
            half.epsilon_lower > half.claimed_epsilon,
            "half the noise not flagged by the (ε, δ) bound: {half:?}"
        );
        let less = run(&claim.with_sigma_scaled(1.0 / 1.3), 3);
        eprintln!("noise / 1.3: {less:?}");
        assert!(!less.consistent(), "30% less noise not flagged: {less:?}");
    }

    /// The `sample` bound (ε = 4, δ = 1e-5, C = 3; the added user has 5 items, 3 kept),
    /// floating-point noise, 500,000 fresh releases per side.
    #[test]
    fn training_release_audit_has_power() {
        let claim = GramMechanism::new(4.0, 1e-5, 3, false, NoiseSource::InsecureSeed(0))
            .unwrap()
            .with_bound(ContributionBound::Sample);
        has_power(&base(), &[0, 1, 2, 3, 4], &claim, 500_000);
    }

    /// Neighbours for the `weight` bound at C = 3: a base with a heavy user of its own, and one
    /// more heavy user with 8 items, whose row is weighted (weight √12/√72 ≈ 0.41 < 1), so the
    /// audit sees the weighting, not a user within the cap.
    fn heavy() -> (Csr, Vec<u32>) {
        let base = crate::data::csr_from_rows(
            &[
                vec![0, 1],
                vec![1, 2, 3],
                vec![0, 4, 7],
                vec![2, 3, 4, 5],
                vec![0, 1, 2, 3, 4, 5, 6, 7],
                vec![6, 7],
            ],
            8,
        );
        (base, (0..8).collect())
    }

    /// The added heavy user moves the noise-free release by their weight on each of their 36
    /// entries: below 1, and exactly the sensitivity in L2 up to the 2^-14 grid.
    #[test]
    fn the_heavy_neighbour_is_weighted() {
        let (base, extra) = heavy();
        let mech = GramMechanism::new(4.0, 1e-5, 3, false, NoiseSource::InsecureSeed(0)).unwrap();
        let mut rows: Vec<Vec<u32>> = (0..base.rows())
            .map(|u| crate::data::row_items(&base, u).to_vec())
            .collect();
        rows.push(extra);
        let (g0, g1) = (
            clean_gram(&base, &mech, 7),
            clean_gram(&crate::data::csr_from_rows(&rows, 8), &mech, 7),
        );
        let d: Vec<f64> = (0..8)
            .flat_map(|j| (j..8).map(move |i| (i, j)))
            .map(|(i, j)| g1[(i, j)] - g0[(i, j)])
            .collect();
        assert_eq!(d.len(), 36);
        assert!(d.iter().all(|&v| v == d[0] && v > 0.4 && v < 1.0), "{d:?}");
        let l2 = d.iter().map(|v| v * v).sum::<f64>().sqrt();
        let sens = crate::model::dp::gram_sensitivity(3);
        assert!(
            l2 <= sens && l2 > sens * (1.0 - 1e-3),
            "{l2} against {sens}"
        );
    }

    /// The `weight` bound (the default), floating-point noise, a heavy added user: 500,000 fresh
    /// releases per side.
    #[test]
    fn weighted_training_release_audit_has_power() {
        let (base, extra) = heavy();
        let claim = GramMechanism::new(4.0, 1e-5, 3, false, NoiseSource::InsecureSeed(0)).unwrap();
        assert_eq!(claim.bound, ContributionBound::Weight);
        has_power(&base, &extra, &claim, 500_000);
    }

    /// The secure path with the `weight` bound: the exact discrete Gaussian of variance (Sσ)²
    /// on the integer sums S·G, divided by S (the statistic's lattice, spacing 1/(S√k), is far
    /// below the 40 cells' width). 200,000 fresh releases per side (the exact sampler is slower),
    /// still enough for the (ε, δ) bound to refute the half-noise release.
    #[test]
    fn secure_weighted_training_release_audit_has_power() {
        let (base, extra) = heavy();
        let claim = GramMechanism::new(4.0, 1e-5, 3, true, NoiseSource::InsecureSeed(0)).unwrap();
        has_power(&base, &extra, &claim, 200_000);
    }
}
