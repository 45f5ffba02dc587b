//! The two illustrations of seed 001 that are not experiments: fig 4 (the score functions GEM and
//! mGEM reorder candidates by, `q ∓ tΔ`) and fig 22 (the density of the maximum of independent
//! Laplace variables with different scales, appendix I eqn 16). Both are computed exactly; fig 22
//! is also estimated by Monte Carlo, as the paper does, and the two are drawn together.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::numerics::distributions::laplace1;
use crate::rng::{name_id, Streams};

/// Configuration of an `[illustrate]` pipeline table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IllustrateConfig {
    /// 4 or 22.
    pub figure: u8,
    /// Number of candidates (random variables).
    pub k: usize,
    /// Monte Carlo draws of the maximum per scale set (fig 22).
    pub samples: u64,
    /// ε of fig 4's shift `t = 2 ln(k/β)/ε`.
    pub epsilon: f64,
    /// β of fig 4's shift.
    pub beta: f64,
    /// Seed of the Monte Carlo streams.
    pub seed: u64,
}

impl Default for IllustrateConfig {
    fn default() -> Self {
        IllustrateConfig {
            figure: 22,
            k: 10,
            samples: 200_000,
            epsilon: 16.0,
            beta: 0.05,
            seed: 22,
        }
    }
}

impl IllustrateConfig {
    /// Checks every field, naming the bad value.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.figure, 4 | 22) {
            return Err(Error::Invalid(format!(
                "[illustrate] draws figure 4 or 22, got {}",
                self.figure
            )));
        }
        if self.k < 2 {
            return Err(Error::Invalid(format!(
                "[illustrate] needs k >= 2, got {}",
                self.k
            )));
        }
        if self.samples == 0 {
            return Err(Error::Invalid("[illustrate] samples must be >= 1".into()));
        }
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                requirement: "finite and > 0",
                value: self.epsilon,
            });
        }
        if !(self.beta > 0.0 && self.beta < 1.0) {
            return Err(Error::InvalidParameter {
                name: "beta",
                requirement: "in (0, 1)",
                value: self.beta,
            });
        }
        Ok(())
    }
}

/// One scale set of fig 22: its name and the Laplace scales `b_a`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleSet {
    /// `all 0.5`, `one 10`, `0.5 to 10`, `all 10`.
    pub name: String,
    /// The scales.
    pub scales: Vec<f64>,
}

/// The four scale sets of fig 22's caption for `k` variables.
pub fn fig22_scale_sets(k: usize) -> Vec<ScaleSet> {
    let ramp = (0..k)
        .map(|a| 0.5 + 9.5 * a as f64 / (k - 1) as f64)
        .collect();
    let mut one = vec![0.5; k];
    one[k - 1] = 10.0;
    vec![
        ScaleSet {
            name: "all 0.5".into(),
            scales: vec![0.5; k],
        },
        ScaleSet {
            name: "all 0.5, one 10".into(),
            scales: one,
        },
        ScaleSet {
            name: "0.5 rising to 10".into(),
            scales: ramp,
        },
        ScaleSet {
            name: "all 10".into(),
            scales: vec![10.0; k],
        },
    ]
}

/// CDF of Lap(b) at x.
fn laplace_cdf(x: f64, b: f64) -> f64 {
    if x < 0.0 {
        0.5 * (x / b).exp()
    } else {
        1.0 - 0.5 * (-x / b).exp()
    }
}

/// CDF of the maximum of independent Lap(b_a): `Π_a F_a(x)` (seed 001 eqn 16 for x > 0).
pub fn max_laplace_cdf(x: f64, scales: &[f64]) -> f64 {
    scales.iter().map(|&b| laplace_cdf(x, b)).product()
}

/// Density of that maximum: `Σ_a f_a(x) Π_{b≠a} F_b(x)`.
pub fn max_laplace_pdf(x: f64, scales: &[f64]) -> f64 {
    let cdfs: Vec<f64> = scales.iter().map(|&b| laplace_cdf(x, b)).collect();
    scales
        .iter()
        .enumerate()
        .map(|(a, &b)| {
            let f = (-x.abs() / b).exp() / (2.0 * b);
            cdfs.iter()
                .enumerate()
                .filter(|&(c, _)| c != a)
                .fold(f, |acc, (_, &v)| acc * v)
        })
        .sum()
}

/// `n` Monte Carlo draws of the maximum, draw i from its own stream of `streams`.
pub fn sample_max_laplace(scales: &[f64], n: u64, streams: &Streams, set: u32) -> Vec<f64> {
    let id = name_id("fig22");
    (0..n)
        .into_par_iter()
        .map(|i| {
            let mut rng = streams.stream(id, set, i >> 32, i as u32);
            scales
                .iter()
                .map(|&b| b * laplace1(&mut rng))
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect()
}

/// One curve point of fig 22: the exact density and the Monte Carlo histogram density at `x`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DensityRow {
    /// Scale set name.
    pub set: String,
    /// Bin centre.
    pub x: f64,
    /// Exact density at the bin centre.
    pub exact: f64,
    /// Histogram density of the Monte Carlo draws in the bin.
    pub estimate: f64,
}

/// Fig 22: for each scale set, the exact density and a 120-bin histogram of `samples` draws on
/// [−5, 45]; also the mean and P(M ≤ 0) = 2^−k of every set.
pub fn fig22(cfg: &IllustrateConfig) -> Vec<DensityRow> {
    let streams = Streams::new(cfg.seed);
    let (lo, hi, bins) = (-5.0, 45.0, 120usize);
    let w = (hi - lo) / bins as f64;
    let mut rows = Vec::new();
    for (s, set) in fig22_scale_sets(cfg.k).iter().enumerate() {
        let draws = sample_max_laplace(&set.scales, cfg.samples, &streams, s as u32);
        let mut counts = vec![0u64; bins];
        for &x in &draws {
            if (lo..hi).contains(&x) {
                counts[((x - lo) / w) as usize] += 1;
            }
        }
        for (b, &c) in counts.iter().enumerate() {
            let x = lo + (b as f64 + 0.5) * w;
            rows.push(DensityRow {
                set: set.name.clone(),
                x,
                exact: max_laplace_pdf(x, &set.scales),
                estimate: c as f64 / (cfg.samples as f64 * w),
            });
        }
    }
    rows
}

/// One candidate of fig 4: its score and the two reordering functions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReorderRow {
    /// `positive` or `negative` correlation.
    pub case: String,
    /// Candidate index (ordered by score).
    pub candidate: usize,
    /// Score q_a.
    pub score: f64,
    /// Sensitivity Δ_a.
    pub sensitivity: f64,
    /// mGEM's `q_a + tΔ_a`.
    pub mgem: f64,
    /// GEM's `q_a − tΔ_a`.
    pub gem: f64,
}

/// Fig 4: k candidates with scores `a/k`; sensitivities `0.1 + 2q` (positive correlation) or
/// `2.1 − 2q` (negative); `t = 2 ln(k/β)/ε`.
pub fn fig4(cfg: &IllustrateConfig) -> Vec<ReorderRow> {
    let t = 2.0 * (cfg.k as f64 / cfg.beta).ln() / cfg.epsilon;
    let mut rows = Vec::new();
    for case in ["positive", "negative"] {
        for a in 0..cfg.k {
            let q = a as f64 / cfg.k as f64;
            let d = if case == "positive" {
                0.1 + 2.0 * q
            } else {
                2.1 - 2.0 * q
            };
            rows.push(ReorderRow {
                case: case.into(),
                candidate: a,
                score: q,
                sensitivity: d,
                mgem: q + t * d,
                gem: q - t * d,
            });
        }
    }
    rows
}
