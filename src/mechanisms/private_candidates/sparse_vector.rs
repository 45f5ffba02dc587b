//! The sparse vector technique for differentially private queries (Liu & Talwar 2019, §4;
//! docs/sparse-vector.md): a stream of queries, each an ε₀-DP randomised algorithm M_i with a
//! threshold τ_i, answered "above" or "below" according to whether the percentile
//! `p_i = P(M_i(D) ≥ τ_i)` reaches a target percentile t — stopping at the first "above".
//!
//! Since M_i is ε₀-DP, `ln p_i` and `ln(1 − p_i)` move by at most ε₀ between neighbours, so the
//! log-odds `L(p) = ln(p/(1−p))` is a query of sensitivity 2ε₀ even though the scores themselves
//! may have any sensitivity: AboveThreshold on the log-odds is private.
//!
//! * [`Oracle::Exact`] (Algorithm 3, Theorem 4.1): the caller supplies p_i itself (computable
//!   when M_i's law is known, e.g. a score plus Laplace noise). ε-DP with threshold noise
//!   Lap(2Δ/ε) and query noise Lap(4Δ/ε), Δ = 2ε₀.
//! * [`Oracle::Estimated`] (Algorithm 4, Theorem 4.4): the library runs M_i m times and uses the
//!   smoothed log-odds of the count. (ε, δ)-DP with Δ = 2ε₀ + η, δ = n·β₁ from the coupling bound
//!   (`coupling.rs`), and ε·R/Δ-DP (pure) with R the range of the estimate. The smoothing c
//!   defaults to [`default_smoothing`]`(m)` = 2√m.
//! * [`SparseVector::search_threshold`] (Algorithm 5, Theorem 4.6): the estimated sparse vector on
//!   one query at a decreasing grid of thresholds, its m runs shared by every grid point.
//! * [`UnknownThreshold`] (Theorem 4.7): the threshold search followed by the known-threshold
//!   selection (Theorem 3.1) at the threshold found.

use std::borrow::Cow;

use super::coupling::{binomial_pmf, coupling_failure, smoothed_log_odds};
use super::{Outcome, PrivateSelection, SelectionParams, Statement, Stopping};
use crate::error::{Error, Result};
use crate::numerics::distributions::laplace1;
use crate::rng::Rng;

/// How the percentile of a query is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Oracle {
    /// Algorithm 3: the caller passes the exact percentile p_i(D) of each query.
    Exact,
    /// Algorithm 4: the library runs each query `samples` times and estimates the log-odds by
    /// `ln((S + c)/(m − S + c))`, S the runs at or above the query's threshold.
    Estimated {
        /// Runs per query, m ≥ 1.
        samples: u64,
        /// Smoothing c > 0 (keeps the estimate finite at S = 0 and S = m).
        smoothing: f64,
        /// Slack η ≥ 0: the estimate's sensitivity is taken as Δ = 2ε₀ + η, and δ is the chance
        /// that the coupling moves it by more.
        slack: f64,
    },
}

/// Unchecked parameters of a sparse vector over ε₀-DP queries; [`SvtParams::check`] validates
/// them into a [`SparseVector`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvtParams {
    /// Every query is (ε₀, δ₀)-DP: ε₀ finite and > 0.
    pub eps0: f64,
    /// δ₀ in [0, 1); must be 0 with the exact oracle (a percentile of an (ε₀, δ₀)-DP algorithm
    /// has no bounded log-odds sensitivity).
    pub delta0: f64,
    /// The target percentile t in (0, 1): a query is "above" when p_i ≥ t (t = 1/2: its median
    /// score reaches τ_i).
    pub percentile: f64,
    /// The sparse vector's own ε (half for the threshold noise, half for the query noise).
    pub epsilon: f64,
    /// The most queries one stream answers, n ≥ 1 (δ is a union bound over them).
    pub max_queries: u64,
    /// How each percentile is known.
    pub oracle: Oracle,
}

impl SvtParams {
    /// Algorithm 3: the exact percentile oracle.
    pub fn exact(eps0: f64, percentile: f64, epsilon: f64, max_queries: u64) -> Self {
        SvtParams {
            eps0,
            delta0: 0.0,
            percentile,
            epsilon,
            max_queries,
            oracle: Oracle::Exact,
        }
    }

    /// Algorithm 4: percentiles estimated from `samples` runs, slack η and the default smoothing
    /// c = [`default_smoothing`]`(samples)` (set another with [`SvtParams::with_smoothing`]).
    pub fn estimated(
        eps0: f64,
        percentile: f64,
        epsilon: f64,
        max_queries: u64,
        samples: u64,
        slack: f64,
    ) -> Self {
        SvtParams {
            eps0,
            delta0: 0.0,
            percentile,
            epsilon,
            max_queries,
            oracle: Oracle::Estimated {
                samples,
                smoothing: default_smoothing(samples),
                slack,
            },
        }
    }

    /// These parameters for (ε₀, δ₀)-DP queries.
    pub fn with_delta0(mut self, delta0: f64) -> Self {
        self.delta0 = delta0;
        self
    }

    /// These parameters with smoothing c (estimated oracle only).
    pub fn with_smoothing(mut self, c: f64) -> Self {
        if let Oracle::Estimated { smoothing, .. } = &mut self.oracle {
            *smoothing = c;
        }
        self
    }

    /// Validates every parameter once and computes the guarantee; errors name the bad value.
    pub fn check(&self) -> Result<SparseVector> {
        positive("eps0", self.eps0)?;
        positive("epsilon", self.epsilon)?;
        if !(self.delta0 >= 0.0 && self.delta0 < 1.0) {
            return Err(Error::InvalidParameter {
                name: "delta0",
                requirement: "in [0, 1)",
                value: self.delta0,
            });
        }
        if !(self.percentile > 0.0 && self.percentile < 1.0) {
            return Err(Error::InvalidParameter {
                name: "percentile",
                requirement: "in (0, 1)",
                value: self.percentile,
            });
        }
        if self.max_queries == 0 {
            return Err(Error::InvalidParameter {
                name: "max_queries",
                requirement: ">= 1",
                value: 0.0,
            });
        }
        let (sensitivity, statements) = match self.oracle {
            Oracle::Exact => {
                if self.delta0 > 0.0 {
                    return Err(Error::InvalidParameter {
                        name: "delta0",
                        requirement: "0 with the exact percentile oracle",
                        value: self.delta0,
                    });
                }
                (
                    2.0 * self.eps0,
                    vec![Statement {
                        epsilon: self.epsilon,
                        delta: 0.0,
                        source: "Liu & Talwar 2019, Theorem 4.1 (AboveThreshold on the log-odds, \
                                 docs/sparse-vector.md)",
                    }],
                )
            }
            Oracle::Estimated {
                samples,
                smoothing,
                slack,
            } => {
                if samples == 0 || samples > 1 << 24 {
                    return Err(Error::InvalidParameter {
                        name: "samples",
                        requirement: "in [1, 2^24]",
                        value: samples as f64,
                    });
                }
                positive("smoothing", smoothing)?;
                if !(slack.is_finite() && slack >= 0.0) {
                    return Err(Error::InvalidParameter {
                        name: "slack",
                        requirement: "finite and >= 0",
                        value: slack,
                    });
                }
                let sensitivity = 2.0 * self.eps0 + slack;
                let beta = coupling_failure(samples, smoothing, self.eps0, sensitivity);
                // Every run of every query from the pure part of its (ε₀, δ₀) decomposition.
                let runs = (self.max_queries as f64) * samples as f64;
                let d_runs = -(runs * (-self.delta0).ln_1p()).exp_m1();
                let range = smoothed_log_odds(samples, samples, smoothing)
                    - smoothed_log_odds(0, samples, smoothing);
                let coupled = Statement {
                    epsilon: self.epsilon,
                    delta: ((self.max_queries as f64) * beta + d_runs).min(1.0),
                    source: "Liu & Talwar 2019, Theorem 4.4 with recsel's coupling bound \
                             (docs/sparse-vector.md)",
                };
                let pure = Statement {
                    epsilon: self.epsilon * range.max(sensitivity) / sensitivity,
                    delta: d_runs,
                    source: "AboveThreshold on the estimate's whole range (docs/sparse-vector.md)",
                };
                (sensitivity, vec![coupled, pure])
            }
        };
        Ok(SparseVector {
            params: *self,
            sensitivity,
            threshold_scale: 2.0 * sensitivity / self.epsilon,
            query_scale: 4.0 * sensitivity / self.epsilon,
            level: logit(self.percentile),
            statements,
        })
    }
}

/// The default smoothing c of Algorithm 4's estimate `ln((S + c)/(m − S + c))` for m runs:
/// c = 2√m, four standard deviations of the count at p = 1/2 (docs/sparse-vector.md, "The
/// default smoothing"). Small counts are where the estimate jumps (with c = 1, from S = 0 to
/// S = 2 it moves by ln 3), and the coupling bound's δ is set there: for ten queries at ε₀ = 0.5,
/// c = 1 gives δ = 0.10, 0.26 and 0.32 at (m, η) = (200, 0.5), (2000, 0.3) and (5000, 0.15),
/// c = 2√m gives at most 1e-6 at each (the integration test
/// `algorithm_4s_default_smoothing_keeps_delta_below_1e_6_for_ten_queries`). The price is a bias
/// towards the middle: the estimate at percentile p is about `ln((p + κ)/(1 − p + κ))`,
/// κ = c/m = 2/√m, so a target percentile t needs κ ≪ t (m ≫ 4/t²) or an explicit c.
pub fn default_smoothing(samples: u64) -> f64 {
    2.0 * (samples as f64).sqrt()
}

fn positive(name: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::InvalidParameter {
            name,
            requirement: "finite and > 0",
            value: v,
        })
    }
}

/// `ln(p/(1 − p))`, ±∞ at 0 and 1.
pub(crate) fn logit(p: f64) -> f64 {
    p.ln() - (-p).ln_1p()
}

/// `P(ν − ρ ≥ x)` for independent ν ~ Lap(a), ρ ~ Lap(b), a ≠ b: the difference has density
/// `(a e^{−|z|/a} − b e^{−|z|/b}) / (2(a² − b²))` (partial fractions of the characteristic
/// functions), so for x ≥ 0 the tail is `(a² e^{−x/a} − b² e^{−x/b}) / (2(a² − b²))`.
pub(crate) fn laplace_difference_sf(x: f64, a: f64, b: f64) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    let tail = |x: f64| {
        if x.is_infinite() {
            return 0.0;
        }
        (a * a * (-x / a).exp() - b * b * (-x / b).exp()) / (2.0 * (a * a - b * b))
    };
    if x >= 0.0 {
        tail(x)
    } else {
        1.0 - tail(-x)
    }
}

/// A validated sparse vector ([`SvtParams::check`]).
#[derive(Debug, Clone)]
pub struct SparseVector {
    params: SvtParams,
    sensitivity: f64,
    threshold_scale: f64,
    query_scale: f64,
    level: f64,
    statements: Vec<Statement>,
}

/// One answer of the sparse vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The query's percentile reached the target (noisily); the stream has stopped.
    Above,
    /// It did not; the stream goes on.
    Below,
}

impl SparseVector {
    /// The validated parameters.
    pub fn params(&self) -> &SvtParams {
        &self.params
    }

    /// The guarantee of one stream at the ε it was built with: pure ε for the exact oracle,
    /// (ε, δ) for the estimated one.
    pub fn guarantee(&self) -> Statement {
        self.statements[0]
    }

    /// Every statement that holds (the estimated oracle adds a pure one with a larger ε).
    pub fn statements(&self) -> &[Statement] {
        &self.statements
    }

    /// Δ: the sensitivity of the (estimated) log-odds the noise is calibrated to.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// The scales of the threshold noise and of each query's noise: 2Δ/ε and 4Δ/ε.
    pub fn noise_scales(&self) -> (f64, f64) {
        (self.threshold_scale, self.query_scale)
    }

    /// The runs of each query (0 with the exact oracle, which runs none).
    pub fn samples(&self) -> u64 {
        match self.params.oracle {
            Oracle::Exact => 0,
            Oracle::Estimated { samples, .. } => samples,
        }
    }

    /// π(p): the probability that the test of a query whose percentile is p answers "above",
    /// over the query's runs and both noises (not conditioned on reaching the query). By
    /// docs/sparse-vector.md, "Accuracy": the stream stops at query i with probability at most
    /// π(p_i), and goes past query i with probability at most 1 − π(p_i).
    pub fn pass_probability(&self, p: f64) -> f64 {
        let (a, b) = (self.query_scale, self.threshold_scale);
        match self.params.oracle {
            Oracle::Exact => laplace_difference_sf(self.level - logit(p), a, b),
            Oracle::Estimated {
                samples, smoothing, ..
            } => {
                let m = samples;
                (0..=m)
                    .map(|s| {
                        binomial_pmf(m, p, s)
                            * laplace_difference_sf(
                                self.level - smoothed_log_odds(s, m, smoothing),
                                a,
                                b,
                            )
                    })
                    .sum()
            }
        }
    }

    /// Starts a stream: draws the noisy threshold.
    pub fn start(&self, rng: &mut Rng) -> SvtStream<'_> {
        SvtStream {
            threshold: self.level + self.threshold_scale * laplace1(rng),
            svt: Cow::Borrowed(self),
            asked: 0,
            stopped: false,
        }
    }

    /// [`SparseVector::start`] for a stream that owns its sparse vector (a front end that keeps
    /// a stream between calls, as the Python `recsel.SparseVector` does). The same draw.
    pub fn into_stream(self, rng: &mut Rng) -> SvtStream<'static> {
        SvtStream {
            threshold: self.level + self.threshold_scale * laplace1(rng),
            svt: Cow::Owned(self),
            asked: 0,
            stopped: false,
        }
    }

    /// Algorithm 5 (Theorem 4.6): the first threshold of the strictly decreasing `grid` whose
    /// percentile `P(Q ≥ τ)` reaches the target, tested by the estimated sparse vector on m runs
    /// of `q` shared by every grid point; `None` (⊥) when no grid point passes. At most
    /// `max_queries` grid points.
    pub fn search_threshold(
        &self,
        mut q: impl FnMut(&mut Rng) -> f64,
        grid: &[f64],
        rng: &mut Rng,
    ) -> Result<Search> {
        let Oracle::Estimated { samples, .. } = self.params.oracle else {
            return Err(Error::Invalid(
                "the threshold search estimates percentiles: build the sparse vector with \
                 Oracle::Estimated"
                    .into(),
            ));
        };
        check_grid(grid, self.params.max_queries)?;
        let mut stream = self.start(rng);
        let mut scores: Vec<f64> = (0..samples).map(|_| q(rng)).collect();
        // NaN ranks below every threshold.
        scores.sort_by(|x, y| y.total_cmp(x));
        for (j, &tau) in grid.iter().enumerate() {
            let count = scores.iter().take_while(|&&y| y >= tau).count() as u64;
            if stream.test_count(count, rng)? == Answer::Above {
                return Ok(Search {
                    threshold: Some(tau),
                    index: Some(j),
                    runs: samples,
                });
            }
        }
        Ok(Search {
            threshold: None,
            index: None,
            runs: samples,
        })
    }
}

/// A strictly decreasing grid of finite thresholds, at most `n` long.
pub(crate) fn check_grid(grid: &[f64], n: u64) -> Result<()> {
    if grid.is_empty() || grid.len() as u64 > n {
        return Err(Error::Invalid(format!(
            "the threshold grid needs 1 to max_queries = {n} points, got {}",
            grid.len()
        )));
    }
    for (j, w) in grid.iter().enumerate() {
        if !w.is_finite() {
            return Err(Error::Invalid(format!(
                "threshold grid point {j} must be finite, got {w}"
            )));
        }
    }
    if let Some(j) = grid.windows(2).position(|w| w[1] >= w[0]) {
        return Err(Error::Invalid(format!(
            "the threshold grid must be strictly decreasing: point {} ({}) is not below point {j} ({})",
            j + 1,
            grid[j + 1],
            grid[j]
        )));
    }
    Ok(())
}

/// What a threshold search released.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// The threshold found, or `None` (⊥: no grid point passed).
    pub threshold: Option<f64>,
    /// Its index in the grid.
    pub index: Option<usize>,
    /// How many times Q ran.
    pub runs: u64,
}

/// One stream of a [`SparseVector`]: answers queries until the first "above".
#[derive(Debug)]
pub struct SvtStream<'a> {
    svt: Cow<'a, SparseVector>,
    threshold: f64,
    asked: u64,
    stopped: bool,
}

impl SvtStream<'_> {
    /// The sparse vector this stream runs (its parameters and guarantee).
    pub fn sparse_vector(&self) -> &SparseVector {
        &self.svt
    }

    /// Queries answered so far.
    pub fn asked(&self) -> u64 {
        self.asked
    }

    /// Whether the stream has answered "above" (and answers nothing more).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    fn next(&mut self) -> Result<()> {
        if self.stopped {
            return Err(Error::Invalid(
                "the sparse vector has answered above and stopped: start a new stream (and pay \
                 for it)"
                    .into(),
            ));
        }
        if self.asked >= self.svt.params.max_queries {
            return Err(Error::Invalid(format!(
                "the sparse vector answers at most max_queries = {} queries",
                self.svt.params.max_queries
            )));
        }
        self.asked += 1;
        Ok(())
    }

    fn answer(&mut self, value: f64, rng: &mut Rng) -> Answer {
        if value + self.svt.query_scale * laplace1(rng) >= self.threshold {
            self.stopped = true;
            Answer::Above
        } else {
            Answer::Below
        }
    }

    /// Algorithm 3: answers a query whose exact percentile `P(M_i(D) ≥ τ_i)` is `p` (in [0, 1]).
    pub fn test_percentile(&mut self, p: f64, rng: &mut Rng) -> Result<Answer> {
        if self.svt.params.oracle != Oracle::Exact {
            return Err(Error::Invalid(
                "test_percentile needs the exact oracle; this sparse vector estimates \
                 percentiles (use test)"
                    .into(),
            ));
        }
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidParameter {
                name: "percentile of the query",
                requirement: "in [0, 1]",
                value: p,
            });
        }
        self.next()?;
        Ok(self.answer(logit(p), rng))
    }

    /// Algorithm 4: runs `query` (an ε₀-DP algorithm on the data, drawing its randomness from
    /// `rng`) m times and answers whether its percentile at `tau` reaches the target. A NaN score
    /// counts as below τ.
    pub fn test(
        &mut self,
        mut query: impl FnMut(&mut Rng) -> f64,
        tau: f64,
        rng: &mut Rng,
    ) -> Result<Answer> {
        let Oracle::Estimated { samples, .. } = self.svt.params.oracle else {
            return Err(Error::Invalid(
                "test runs the query: this sparse vector has the exact oracle (use \
                 test_percentile)"
                    .into(),
            ));
        };
        if self.stopped || self.asked >= self.svt.params.max_queries {
            // The error comes before any run of the query.
            self.next()?;
        }
        let count = (0..samples).filter(|_| query(rng) >= tau).count() as u64;
        self.test_count(count, rng)
    }

    /// Algorithm 4 on a count the caller has drawn: `count` of the m runs scored at least τ_i.
    pub fn test_count(&mut self, count: u64, rng: &mut Rng) -> Result<Answer> {
        let Oracle::Estimated {
            samples, smoothing, ..
        } = self.svt.params.oracle
        else {
            return Err(Error::Invalid(
                "test_count needs the estimated oracle".into(),
            ));
        };
        if count > samples {
            return Err(Error::InvalidParameter {
                name: "count",
                requirement: "at most the runs per query",
                value: count as f64,
            });
        }
        self.next()?;
        Ok(self.answer(smoothed_log_odds(count, samples, smoothing), rng))
    }
}

/// Theorem 4.7: selection from private candidates without a known threshold — the threshold
/// search of Algorithm 5 on Q's scores, then the known-threshold selection of Theorem 3.1 at the
/// threshold found (⊥ if the search found none). Basic composition of the two.
#[derive(Debug, Clone)]
pub struct UnknownThreshold {
    search: SparseVector,
    selection: PrivateSelection,
    statements: Vec<Statement>,
}

/// What an [`UnknownThreshold`] selection released.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownOutcome<C> {
    /// The threshold search's result.
    pub search: Search,
    /// The selection at that threshold: `best` is `None` (⊥) when the search found no threshold
    /// or the selection gave up.
    pub outcome: Outcome<C>,
}

impl UnknownThreshold {
    /// The search `search` (estimated oracle, its ε₀ that of Q) followed by the known-threshold
    /// selection with stopping probability γ and optional hard stop T.
    pub fn new(search: SparseVector, gamma: f64, max_runs: Option<u64>) -> Result<Self> {
        if !matches!(search.params.oracle, Oracle::Estimated { .. }) {
            return Err(Error::Invalid(
                "the threshold search needs the estimated oracle".into(),
            ));
        }
        let mut params = SelectionParams::new(Stopping::Geometric { gamma }, search.params.eps0)
            .with_threshold(0.0)
            .with_delta0(search.params.delta0);
        params.max_runs = max_runs;
        let selection = params.check()?;
        let mut statements = Vec::new();
        for s in search.statements() {
            for t in selection.statements() {
                statements.push(Statement {
                    epsilon: s.epsilon + t.epsilon,
                    delta: (s.delta + t.delta).min(1.0),
                    source: "Liu & Talwar 2019, Theorem 4.7: the search (Theorem 4.6) then the \
                             known threshold (Theorem 3.1), basic composition",
                });
            }
        }
        // The first statement composes the search's guarantee with the selection's.
        Ok(UnknownThreshold {
            search,
            selection,
            statements,
        })
    }

    /// The guarantee: the search's guarantee plus the known threshold's.
    pub fn guarantee(&self) -> Statement {
        self.statements[0]
    }

    /// Every composed statement.
    pub fn statements(&self) -> &[Statement] {
        &self.statements
    }

    /// The search's sparse vector.
    pub fn search(&self) -> &SparseVector {
        &self.search
    }

    /// One selection: the search on the scores of m runs of `q`, then runs of `q` until one
    /// scores at least the threshold found (stopping with probability γ after each miss).
    pub fn run<C>(
        &self,
        mut q: impl FnMut(&mut Rng) -> (C, f64),
        grid: &[f64],
        rng: &mut Rng,
    ) -> Result<UnknownOutcome<C>> {
        let search = self.search.search_threshold(|r| q(r).1, grid, rng)?;
        let outcome = match search.threshold {
            None => Outcome {
                best: None,
                runs: 0,
                guarantee: self.guarantee(),
            },
            Some(tau) => {
                let (best, runs) = self
                    .selection
                    .run_scores(Some(super::Ranked(tau)), rng, |r| {
                        let (c, s) = q(r);
                        (c, super::Ranked(s))
                    });
                Outcome {
                    best: best.map(|(c, s)| (c, s.0)),
                    runs,
                    guarantee: self.guarantee(),
                }
            }
        };
        Ok(UnknownOutcome { search, outcome })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_validated_with_the_bad_value_named() {
        for (p, needle) in [
            (SvtParams::exact(0.0, 0.5, 1.0, 3), "eps0"),
            (SvtParams::exact(1.0, 1.0, 1.0, 3), "percentile"),
            (SvtParams::exact(1.0, 0.5, -1.0, 3), "epsilon"),
            (SvtParams::exact(1.0, 0.5, 1.0, 0), "max_queries"),
            (
                SvtParams::exact(1.0, 0.5, 1.0, 3).with_delta0(0.1),
                "delta0",
            ),
            (SvtParams::estimated(1.0, 0.5, 1.0, 3, 0, 0.5), "samples"),
            (SvtParams::estimated(1.0, 0.5, 1.0, 3, 10, -0.5), "slack"),
            (
                SvtParams::estimated(1.0, 0.5, 1.0, 3, 10, 0.5).with_smoothing(0.0),
                "smoothing",
            ),
        ] {
            let e = p.check().unwrap_err().to_string();
            assert!(e.contains(needle), "{p:?}: {e}");
        }
    }

    #[test]
    fn the_difference_of_laplaces_has_the_right_tail() {
        let (a, b) = (2.0, 1.0);
        let mut rng = crate::rng::Streams::new(3).stream(0, 0, 0, 0);
        let n = 200_000;
        for x in [-3.0, -0.5, 0.0, 1.0, 4.0] {
            let hits = (0..n)
                .filter(|_| a * laplace1(&mut rng) - b * laplace1(&mut rng) >= x)
                .count();
            let p = laplace_difference_sf(x, a, b);
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                ((hits as f64 / n as f64) - p).abs() < 6.0 * se,
                "x {x}: {hits} vs {p}"
            );
        }
    }

    #[test]
    fn streams_stop_at_the_first_above_and_refuse_more() {
        let svt = SvtParams::exact(0.5, 0.5, 1.0, 3).check().unwrap();
        let mut rng = crate::rng::Streams::new(4).stream(0, 0, 0, 0);
        let mut s = svt.start(&mut rng);
        assert_eq!(s.test_percentile(1.0, &mut rng).unwrap(), Answer::Above);
        assert!(s.test_percentile(0.0, &mut rng).is_err());
        let mut s = svt.start(&mut rng);
        for _ in 0..3 {
            assert_eq!(s.test_percentile(0.0, &mut rng).unwrap(), Answer::Below);
        }
        assert!(s
            .test_percentile(0.0, &mut rng)
            .unwrap_err()
            .to_string()
            .contains("max_queries"));
        assert!(s.test(|_| 1.0, 0.0, &mut rng).is_err());
    }

    #[test]
    fn grids_are_checked() {
        assert!(check_grid(&[1.0, 0.5, 0.0], 3).is_ok());
        assert!(check_grid(&[1.0, 1.0], 3)
            .unwrap_err()
            .to_string()
            .contains("decreasing"));
        assert!(check_grid(&[1.0, 0.5, 0.0, -1.0], 3).is_err());
        assert!(check_grid(&[f64::NAN], 3).is_err());
    }
}
