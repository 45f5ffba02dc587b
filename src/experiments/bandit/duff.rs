//! Private quantiles with Duff, the dataset-based utility (Muñoz Medina & Gillenwater, seed 002;
//! `docs/bandit.md`, "Private sensitivities"), beside the standard exponential-mechanism quantile
//! of [`super::quantile`].
//!
//! Duff scores an output y by how far the data set is from one whose statistic is y:
//! `u(y, D) = −min { d(D, D') : f(D') = y }`, d the number of records changed. Replacing one record
//! moves that distance by at most 1, so u has sensitivity 1 whatever f is, and the exponential
//! mechanism `P(y) ∝ exp(ε·u(y, D)/2)` over a finite, public set of outputs is ε-DP (seed 003,
//! Theorem 1.3; the slides write `exp(ε·u/Δ_u)`, which is ε-DP only for utilities that move in one
//! direction between neighbours, and Duff's need not, so recsel keeps the general factor 2).
//!
//! For the q-quantile the statistic is the order statistic `f(D) = x_(m)`, m = max(1, ⌈qn⌉) (the
//! smallest x with at least a share q of the data at or below it). The outputs are a public grid of
//! `points` values on [lo, hi]; the data are clipped to the range and snapped to the nearest grid
//! value (a per-record map, which keeps neighbours neighbours). With i(y) records strictly below y
//! and j(y) at or below it, y is the m-th order statistic exactly when i ≤ m − 1 and j ≥ m; one
//! change lowers i or raises j by at most 1, and at most one of the two conditions fails at a time
//! (i ≥ m implies j ≥ m), so
//!
//! ```text
//! u(y) = −max(0, i(y) − m + 1, m − j(y)),
//! ```
//!
//! attained by moving that many records onto y. Where the standard mechanism weights the gaps
//! between data points by their length — and so gives no mass to a value that many records share —
//! Duff puts the weight e^0 = 1 on the true quantile itself: on tied data (the clipped rewards of
//! the bandit pile up at the range's ends) it returns the exact quantile with high probability.
//! Cost: one pass over the data and one over the grid per release.

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use super::quantile::EmQuantile;
use crate::error::{Error, Result};
use crate::mechanisms::check_epsilon;
use crate::rng::{Rng, Streams};

/// Grid points of the bandit's Duff quantile on the reward range: steps of 0.001.
pub const DUFF_POINTS: usize = 1001;

/// Which private quantile a private learner releases (`recsel bandit --quantile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantileMethod {
    /// The standard exponential-mechanism quantile (Smith 2011): gaps weighted by length.
    #[default]
    Em,
    /// Duff's dataset-based utility over a grid of [`DUFF_POINTS`] values.
    Duff,
}

impl QuantileMethod {
    /// `em` or `duff`; an error naming the value otherwise.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "em" => Ok(QuantileMethod::Em),
            "duff" => Ok(QuantileMethod::Duff),
            other => Err(Error::UnknownName {
                kind: "quantile method",
                name: other.to_string(),
                valid: "em, duff".into(),
            }),
        }
    }

    /// The name (`em`, `duff`).
    pub fn name(self) -> &'static str {
        match self {
            QuantileMethod::Em => "em",
            QuantileMethod::Duff => "duff",
        }
    }
}

/// The Duff quantile with validated ε, range and grid.
#[derive(Debug, Clone, Copy)]
pub struct DuffQuantile {
    epsilon: f64,
    lo: f64,
    hi: f64,
    points: usize,
}

impl DuffQuantile {
    /// ε > 0 for one quantile; outputs on `points` ≥ 2 evenly spaced values of `[lo, hi]` (finite,
    /// lo < hi).
    pub fn new(epsilon: f64, lo: f64, hi: f64, points: usize) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Err(Error::Invalid(format!(
                "quantile range must be finite with lo < hi, got [{lo}, {hi}]"
            )));
        }
        if points < 2 {
            return Err(Error::InvalidParameter {
                name: "points",
                requirement: ">= 2",
                value: points as f64,
            });
        }
        Ok(DuffQuantile {
            epsilon,
            lo,
            hi,
            points,
        })
    }

    /// ε of one release.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Grid value number `g` (0 ≤ g < points).
    pub fn value(&self, g: usize) -> f64 {
        if g + 1 == self.points {
            return self.hi;
        }
        self.lo + (self.hi - self.lo) * g as f64 / (self.points - 1) as f64
    }

    /// The grid index nearest to `x` clipped to the range (NaN maps to the lower end).
    pub fn snap(&self, x: f64) -> usize {
        let t = if x.is_nan() {
            0.0
        } else {
            ((x.clamp(self.lo, self.hi) - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
        };
        ((t * (self.points - 1) as f64).round() as usize).min(self.points - 1)
    }

    /// The target rank m = max(1, ⌈qn⌉) of the q-quantile of n records.
    pub fn rank(q: f64, n: usize) -> usize {
        ((q * n as f64).ceil() as usize).clamp(1, n.max(1))
    }

    /// Duff's utility of every grid value for the `q`-quantile of `data` (module docs).
    pub fn utilities(&self, data: &[f64], q: f64) -> Vec<f64> {
        let mut counts = vec![0usize; self.points];
        for &x in data {
            counts[self.snap(x)] += 1;
        }
        let m = Self::rank(q, data.len()) as i64;
        let mut below = 0i64;
        counts
            .iter()
            .map(|&c| {
                let (i, j) = (below, below + c as i64);
                below = j;
                -((i - m + 1).max(m - j).max(0) as f64)
            })
            .collect()
    }

    /// The exact output law over the grid: `exp(ε u/2)` normalised.
    pub fn law(&self, data: &[f64], q: f64) -> Vec<f64> {
        let w: Vec<f64> = self
            .utilities(data, q)
            .iter()
            .map(|u| (0.5 * self.epsilon * u).exp())
            .collect();
        let total: f64 = w.iter().sum();
        w.iter().map(|x| x / total).collect()
    }

    /// One private `q`-quantile of `data` (0 ≤ q ≤ 1; at least one record).
    pub fn sample(&self, data: &[f64], q: f64, rng: &mut Rng) -> f64 {
        // Utilities are ≤ 0 with a 0 at the true quantile: the weights need no shift.
        let u = self.utilities(data, q);
        let mut cum = Vec::with_capacity(u.len());
        let mut total = 0.0;
        for x in &u {
            total += (0.5 * self.epsilon * x).exp();
            cum.push(total);
        }
        let r = rng.random::<f64>() * total;
        let g = cum.partition_point(|&c| c <= r).min(self.points - 1);
        self.value(g)
    }

    /// The `q_lo`- and `q_hi`-quantiles of `data`, each with this mechanism's ε (2ε together).
    pub fn sample_pair(&self, data: &[f64], q_lo: f64, q_hi: f64, rng: &mut Rng) -> (f64, f64) {
        (self.sample(data, q_lo, rng), self.sample(data, q_hi, rng))
    }
}

/// A private quantile of either method, with the ε of one release.
#[derive(Debug, Clone, Copy)]
pub enum PrivateQuantile {
    /// [`EmQuantile`].
    Em(EmQuantile),
    /// [`DuffQuantile`].
    Duff(DuffQuantile),
}

impl PrivateQuantile {
    /// `method` with ε per quantile on `[lo, hi]` (Duff on [`DUFF_POINTS`] values).
    pub fn new(method: QuantileMethod, epsilon: f64, lo: f64, hi: f64) -> Result<Self> {
        Ok(match method {
            QuantileMethod::Em => PrivateQuantile::Em(EmQuantile::new(epsilon, lo, hi)?),
            QuantileMethod::Duff => {
                PrivateQuantile::Duff(DuffQuantile::new(epsilon, lo, hi, DUFF_POINTS)?)
            }
        })
    }

    /// One private `q`-quantile of `data`.
    pub fn sample(&self, data: &[f64], q: f64, rng: &mut Rng) -> f64 {
        match self {
            PrivateQuantile::Em(m) => m.sample(data, q, rng),
            PrivateQuantile::Duff(m) => m.sample(data, q, rng),
        }
    }

    /// The pair of quantiles (2ε together).
    pub fn sample_pair(&self, data: &[f64], q_lo: f64, q_hi: f64, rng: &mut Rng) -> (f64, f64) {
        match self {
            PrivateQuantile::Em(m) => m.sample_pair(data, q_lo, q_hi, rng),
            PrivateQuantile::Duff(m) => m.sample_pair(data, q_lo, q_hi, rng),
        }
    }
}

/// A data law of the comparison table: rewards `N(mean, sd²)` clipped to [0, 1], and the
/// quantile level asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileCase {
    /// Name for the table.
    pub label: &'static str,
    /// Mean of the unclipped normal.
    pub mean: f64,
    /// Its standard deviation.
    pub sd: f64,
    /// Quantile level q.
    pub q: f64,
}

/// The cases of docs/bandit.md's comparison: the paper's two arms at the levels the bandit
/// releases (p10, p90). Arm 1's p90 lies in the 25% of rewards clipped to exactly 1.
pub const QUANTILE_CASES: [QuantileCase; 3] = [
    QuantileCase {
        label: "N(0.8, 0.3^2) clipped, p90",
        mean: 0.8,
        sd: 0.3,
        q: 0.9,
    },
    QuantileCase {
        label: "N(0.8, 0.3^2) clipped, p10",
        mean: 0.8,
        sd: 0.3,
        q: 0.1,
    },
    QuantileCase {
        label: "N(0.2, 0.1^2) clipped, p10",
        mean: 0.2,
        sd: 0.1,
        q: 0.1,
    },
];

/// One cell of the comparison: mean absolute error of the private quantile against the data's
/// own (non-private) quantile x_(m), over repetitions that each draw a fresh sample.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantileErrorRow {
    /// The case's label.
    pub case: &'static str,
    /// Records per sample.
    pub n: usize,
    /// ε of the one quantile.
    pub epsilon: f64,
    /// `em` or `duff`.
    pub method: &'static str,
    /// Mean |private − x_(m)|.
    pub mean_abs_error: f64,
    /// Its standard error.
    pub se: f64,
    /// Repetitions.
    pub reps: usize,
}

/// The comparison table of docs/bandit.md: for every case, n and ε, the mean absolute error of
/// both methods over `reps` samples (each method on the same samples; streams from `seed`).
pub fn quantile_error_table(
    ns: &[usize],
    epsilons: &[f64],
    reps: usize,
    seed: u64,
) -> Result<Vec<QuantileErrorRow>> {
    use rand_distr::{Distribution, StandardNormal};
    let streams = Streams::new(seed).derive(0xd0ff);
    let mut rows = Vec::new();
    for (ci, case) in QUANTILE_CASES.iter().enumerate() {
        for (ni, &n) in ns.iter().enumerate() {
            for (ei, &eps) in epsilons.iter().enumerate() {
                let methods = [
                    (
                        "em",
                        PrivateQuantile::new(QuantileMethod::Em, eps, 0.0, 1.0)?,
                    ),
                    (
                        "duff",
                        PrivateQuantile::new(QuantileMethod::Duff, eps, 0.0, 1.0)?,
                    ),
                ];
                let mut errors = vec![Vec::with_capacity(reps); methods.len()];
                for r in 0..reps {
                    let mut rng = streams.stream(ci as u32, (ni * 64 + ei) as u32, r as u64, 0);
                    let mut data: Vec<f64> = (0..n)
                        .map(|_| {
                            let z: f64 = StandardNormal.sample(&mut rng);
                            (case.mean + case.sd * z).clamp(0.0, 1.0)
                        })
                        .collect();
                    data.sort_by(f64::total_cmp);
                    let truth = data[DuffQuantile::rank(case.q, n) - 1];
                    for (mi, (_, m)) in methods.iter().enumerate() {
                        errors[mi].push((m.sample(&data, case.q, &mut rng) - truth).abs());
                    }
                }
                for (mi, (name, _)) in methods.iter().enumerate() {
                    let e = &errors[mi];
                    let mean = e.iter().sum::<f64>() / reps as f64;
                    let var = e.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>()
                        / (reps as f64 - 1.0).max(1.0);
                    rows.push(QuantileErrorRow {
                        case: case.label,
                        n,
                        epsilon: eps,
                        method: name,
                        mean_abs_error: mean,
                        se: (var / reps as f64).sqrt(),
                        reps,
                    });
                }
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_values_and_snapping() {
        let d = DuffQuantile::new(1.0, 0.0, 1.0, 11).unwrap();
        assert_eq!(d.value(0), 0.0);
        assert_eq!(d.value(10), 1.0);
        assert_eq!(d.snap(0.34), 3);
        assert_eq!(d.snap(2.0), 10);
        assert_eq!(d.snap(-1.0), 0);
        assert!(DuffQuantile::new(1.0, 0.0, 1.0, 1).is_err());
        assert!(DuffQuantile::new(0.0, 0.0, 1.0, 11).is_err());
        assert!(QuantileMethod::from_name("median").is_err());
    }

    #[test]
    fn the_true_quantile_has_utility_zero() {
        let d = DuffQuantile::new(1.0, 0.0, 1.0, 11).unwrap();
        let data = [0.1, 0.1, 0.5, 1.0, 1.0, 1.0];
        // p90 of 6 records: m = 6, x_(6) = 1.0.
        let u = d.utilities(&data, 0.9);
        assert_eq!(u[10], 0.0);
        // 0.5: one record below... i = 2, j = 3, m = 6: 3 changes.
        assert_eq!(u[5], -3.0);
    }
}
