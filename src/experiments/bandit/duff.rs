//! The bandit's private quantiles (docs/bandit.md, "Private sensitivities"): which method a
//! private learner releases its window quantiles with — the standard exponential-mechanism
//! quantile or Duff over a grid of the reward range (both in [`crate::column_statistic`],
//! docs/statistics.md) — and the table comparing the two on the bandit's reward laws.

use serde::{Deserialize, Serialize};

pub use crate::column_statistic::{DuffQuantile, EmQuantile};
use crate::error::{Error, Result};
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

/// `--quantile` / `quantile`: `em` or `duff`.
impl crate::options::OptionValue for QuantileMethod {
    const KIND: crate::options::Kind = crate::options::Kind::Text;
    const VALUE_NAME: &'static str = "METHOD";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        QuantileMethod::from_name(text.trim()).map_err(|e| e.to_string())
    }
    fn show(&self) -> String {
        self.name().to_string()
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
    fn quantile_method_names() {
        assert!(QuantileMethod::from_name("median").is_err());
        assert_eq!(QuantileMethod::from_name("duff").unwrap().name(), "duff");
    }
}
