//! Private release of one statistic of a numeric column (docs/statistics.md): the Laplace
//! mechanism at a declared global sensitivity ([`laplace`]), Duff — the exponential mechanism
//! over a dataset-distance utility (Muñoz Medina & Gillenwater; [`duff`]) —, the standard
//! exponential-mechanism quantile (Smith 2011; [`em_quantile`]) and the smooth-sensitivity
//! mechanisms of Nissim, Raskhodnikova & Smith 2007 with Cauchy or Laplace noise ([`smooth`]).
//!
//! [`PrivateStatistic`] puts the five behind one value, built once from validated parameters, that
//! the command (`recsel statistic`), the Python functions and the comparison
//! ([`compare`]) all call.

pub mod compare;
pub mod duff;
pub mod em_quantile;
pub mod laplace;
pub mod options;
pub mod smooth;
pub mod smooth_select;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::mechanisms::Guarantee;
use crate::rng::Rng;

pub use duff::{Duff, DuffQuantile, Grid};
pub use em_quantile::EmQuantile;
pub use laplace::LaplaceStatistic;
pub use options::StatisticOptions;
pub use smooth::{SmoothNoise, SmoothSensitivity};
pub use smooth_select::SmoothSelection;

/// Which records count as neighbours: the unit of privacy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Neighbours {
    /// One record replaced by any other value; the number of records n is public (bounded DP).
    /// Every mechanism here supports it.
    #[default]
    Replace,
    /// One record added or removed; n is private (unbounded DP, the Duff paper's setting). Duff
    /// supports quantiles and counts under it.
    AddRemove,
}

impl Neighbours {
    /// `replace` or `add-remove`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "replace" => Ok(Neighbours::Replace),
            "add-remove" => Ok(Neighbours::AddRemove),
            other => Err(Error::UnknownName {
                kind: "neighbour relation",
                name: other.to_string(),
                valid: "replace, add-remove".into(),
            }),
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Neighbours::Replace => "replace",
            Neighbours::AddRemove => "add-remove",
        }
    }
}

/// A statistic of a column of numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    /// The order statistic `x_(m)`, m = max(1, ⌈qn⌉): the smallest value with at least a share q
    /// of the records at or below it (0 ≤ q ≤ 1). The median is q = 1/2 (the lower median).
    Quantile(f64),
    /// The number of records with value ≥ `at_least`.
    Count {
        /// The threshold.
        at_least: f64,
    },
    /// The mean of the records clipped to the range `[lo, hi]`.
    ClippedMean,
}

impl Statistic {
    /// The median (q = 1/2).
    pub const MEDIAN: Statistic = Statistic::Quantile(0.5);

    /// Checks q (in [0, 1]) and the threshold (finite).
    pub fn validate(self) -> Result<Self> {
        match self {
            Statistic::Quantile(q) if !(0.0..=1.0).contains(&q) => Err(Error::InvalidParameter {
                name: "q",
                requirement: "in [0, 1]",
                value: q,
            }),
            Statistic::Count { at_least } if !at_least.is_finite() => {
                Err(Error::InvalidParameter {
                    name: "at_least",
                    requirement: "finite",
                    value: at_least,
                })
            }
            s => Ok(s),
        }
    }

    /// A name for tables and messages (`median`, `quantile 0.9`, `count >= 5`, `clipped mean`).
    pub fn label(self) -> String {
        match self {
            Statistic::Quantile(0.5) => "median".into(),
            Statistic::Quantile(q) => format!("quantile {q}"),
            Statistic::Count { at_least } => format!("count >= {at_least}"),
            Statistic::ClippedMean => "clipped mean".into(),
        }
    }

    /// The statistic's exact, non-private value on `data` (values clipped to `[lo, hi]` for the
    /// quantile and the mean; NaN for no records).
    pub fn value(self, data: &[f64], lo: f64, hi: f64) -> f64 {
        match self {
            Statistic::Quantile(q) => {
                if data.is_empty() {
                    return f64::NAN;
                }
                let mut v: Vec<f64> = data.iter().map(|x| x.clamp(lo, hi)).collect();
                v.sort_by(f64::total_cmp);
                v[rank(q, v.len()) - 1]
            }
            Statistic::Count { at_least } => data.iter().filter(|&&x| x >= at_least).count() as f64,
            Statistic::ClippedMean => {
                data.iter().map(|x| x.clamp(lo, hi)).sum::<f64>() / data.len() as f64
            }
        }
    }

    /// Its global sensitivity on `[lo, hi]` for n records under `neighbours`: hi − lo for a
    /// quantile (one replaced record can move an order statistic from one end to the other), 1 for
    /// a count, (hi − lo)/n for the clipped mean under replacement. The clipped mean under
    /// add/remove has none that does not depend on the private n: an error.
    pub fn global_sensitivity(
        self,
        lo: f64,
        hi: f64,
        n: usize,
        neighbours: Neighbours,
    ) -> Result<f64> {
        match (self, neighbours) {
            (Statistic::Quantile(_), _) => Ok(hi - lo),
            (Statistic::Count { .. }, _) => Ok(1.0),
            (Statistic::ClippedMean, Neighbours::Replace) if n > 0 => Ok((hi - lo) / n as f64),
            (Statistic::ClippedMean, Neighbours::Replace) => {
                Err(Error::Invalid("the clipped mean of no records".into()))
            }
            (Statistic::ClippedMean, Neighbours::AddRemove) => Err(Error::Invalid(
                "the clipped mean has no global sensitivity under add/remove neighbours \
                 (it depends on the private n); use --neighbours replace"
                    .into(),
            )),
        }
    }
}

/// The rank m = max(1, ⌈qn⌉) of the q-quantile of n records (1-based; 1 for n = 0).
pub fn rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// Checks an output range: finite, lo < hi.
pub fn check_range(lo: f64, hi: f64) -> Result<()> {
    if lo.is_finite() && hi.is_finite() && lo < hi {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "the range must be finite with lo < hi, got [{lo}, {hi}]"
        )))
    }
}

/// A release method (`recsel statistic --method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// [`Duff`]: the exponential mechanism over the dataset distance, ε-DP.
    Duff,
    /// [`EmQuantile`]: the standard exponential-mechanism quantile, ε-DP.
    Em,
    /// [`SmoothSensitivity`] with Cauchy noise, ε-DP.
    SmoothCauchy,
    /// [`SmoothSensitivity`] with Cauchy noise and NRS07's constants (α = β = ε/6), ε-DP.
    SmoothCauchyNrs07,
    /// [`SmoothSensitivity`] with Laplace noise, (ε, δ)-DP.
    SmoothLaplace,
    /// [`LaplaceStatistic`] at the global sensitivity, ε-DP.
    Laplace,
}

impl Method {
    /// Every method, in the order of the comparison table.
    pub const ALL: [Method; 6] = [
        Method::Duff,
        Method::Em,
        Method::SmoothCauchy,
        Method::SmoothLaplace,
        Method::Laplace,
        Method::SmoothCauchyNrs07,
    ];

    /// Names accepted by [`Method::from_name`].
    pub const NAMES: &'static [&'static str] = &[
        "duff",
        "em",
        "smooth-cauchy",
        "smooth-laplace",
        "laplace",
        "smooth-cauchy-nrs07",
    ];

    /// The method called `name`.
    pub fn from_name(name: &str) -> Result<Self> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error::UnknownName {
                kind: "statistic method",
                name: name.to_string(),
                valid: Method::NAMES.join(", "),
            })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Duff => "duff",
            Method::Em => "em",
            Method::SmoothCauchy => "smooth-cauchy",
            Method::SmoothCauchyNrs07 => "smooth-cauchy-nrs07",
            Method::SmoothLaplace => "smooth-laplace",
            Method::Laplace => "laplace",
        }
    }
}

/// What a private statistic is asked for, before validation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatisticParams {
    /// The method.
    pub method: Method,
    /// The statistic.
    pub statistic: Statistic,
    /// ε of the release.
    pub epsilon: f64,
    /// δ of the smooth-sensitivity Laplace mechanism (ignored by the others).
    pub delta: f64,
    /// The public range: data are clipped to it and outputs lie in it.
    pub lo: f64,
    /// Its upper end.
    pub hi: f64,
    /// Duff's output grid: this many evenly spaced values of the range (counts: the integers of
    /// the range, whatever this says).
    pub points: usize,
    /// The neighbour relation.
    pub neighbours: Neighbours,
}

/// One private release: the value and the guarantee it was made under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Release {
    /// The private value.
    pub value: f64,
    /// Its guarantee.
    pub guarantee: Guarantee,
}

/// A validated private statistic of one of the five methods.
#[derive(Debug, Clone)]
pub enum PrivateStatistic {
    /// Duff.
    Duff(Duff),
    /// The exponential-mechanism quantile, with its level q.
    Em(EmQuantile, f64),
    /// The smooth-sensitivity quantile, with its level q.
    Smooth(SmoothSensitivity, f64),
    /// Laplace at the global sensitivity (computed from n at release).
    Laplace {
        /// ε.
        epsilon: f64,
        /// The statistic.
        statistic: Statistic,
        /// The range.
        lo: f64,
        /// Its upper end.
        hi: f64,
        /// The neighbour relation.
        neighbours: Neighbours,
    },
}

impl PrivateStatistic {
    /// Validates `p` once; combinations a method does not cover are errors that say so.
    pub fn new(p: &StatisticParams) -> Result<Self> {
        let statistic = p.statistic.validate()?;
        check_range(p.lo, p.hi)?;
        let quantile = |what: &str| match statistic {
            Statistic::Quantile(q) => Ok(q),
            other => Err(Error::Invalid(format!(
                "{what} releases quantiles and the median only, not the {}",
                other.label()
            ))),
        };
        let replace_only = |what: &str| {
            if p.neighbours == Neighbours::Replace {
                Ok(())
            } else {
                Err(Error::Invalid(format!(
                    "{what} is stated for replace neighbours (n public); use --neighbours replace"
                )))
            }
        };
        Ok(match p.method {
            Method::Duff => PrivateStatistic::Duff(Duff::new(
                p.epsilon,
                statistic,
                p.lo,
                p.hi,
                p.points,
                p.neighbours,
            )?),
            Method::Em => {
                // −|i(y) − qn| moves by at most 1 under either neighbour relation.
                let q = quantile("the exponential-mechanism quantile")?;
                PrivateStatistic::Em(EmQuantile::new(p.epsilon, p.lo, p.hi)?, q)
            }
            Method::SmoothCauchy | Method::SmoothCauchyNrs07 | Method::SmoothLaplace => {
                let q = quantile("the smooth-sensitivity mechanism")?;
                replace_only("smooth sensitivity")?;
                let noise = match p.method {
                    Method::SmoothCauchy => SmoothNoise::Cauchy,
                    Method::SmoothCauchyNrs07 => SmoothNoise::CauchyNrs07,
                    _ => SmoothNoise::Laplace { delta: p.delta },
                };
                PrivateStatistic::Smooth(SmoothSensitivity::new(p.epsilon, noise, p.lo, p.hi)?, q)
            }
            Method::Laplace => {
                // Checked here so the error comes before any data are read.
                statistic.global_sensitivity(p.lo, p.hi, 1, p.neighbours)?;
                PrivateStatistic::Laplace {
                    epsilon: crate::mechanisms::check_epsilon(p.epsilon)?,
                    statistic,
                    lo: p.lo,
                    hi: p.hi,
                    neighbours: p.neighbours,
                }
            }
        })
    }

    /// The guarantee of one release.
    pub fn guarantee(&self) -> Guarantee {
        match self {
            PrivateStatistic::Duff(m) => Guarantee::Pure {
                epsilon: m.epsilon(),
            },
            PrivateStatistic::Em(m, _) => Guarantee::Pure {
                epsilon: m.epsilon(),
            },
            PrivateStatistic::Smooth(m, _) => m.guarantee(),
            PrivateStatistic::Laplace { epsilon, .. } => Guarantee::Pure { epsilon: *epsilon },
        }
    }

    /// One private release on `data` (at least one record). Laplace outputs are clamped to the
    /// range (post-processing); the smooth-sensitivity outputs too.
    pub fn release(&self, data: &[f64], rng: &mut Rng) -> Result<Release> {
        if data.is_empty() {
            return Err(Error::Invalid("a statistic of no records".into()));
        }
        let value = match self {
            PrivateStatistic::Duff(m) => m.sample(data, rng),
            PrivateStatistic::Em(m, q) => m.sample(data, *q, rng),
            PrivateStatistic::Smooth(m, q) => m.sample(data, *q, rng),
            PrivateStatistic::Laplace {
                epsilon,
                statistic,
                lo,
                hi,
                neighbours,
            } => {
                let gs = statistic.global_sensitivity(*lo, *hi, data.len(), *neighbours)?;
                let m = LaplaceStatistic::new(*epsilon, gs)?;
                let (out_lo, out_hi) = match statistic {
                    Statistic::Count { .. } => (0.0, f64::INFINITY),
                    _ => (*lo, *hi),
                };
                m.release(statistic.value(data, *lo, *hi), rng)
                    .clamp(out_lo, out_hi)
            }
        };
        Ok(Release {
            value,
            guarantee: self.guarantee(),
        })
    }
}
