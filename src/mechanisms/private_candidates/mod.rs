//! Selection from private candidates (Liu & Talwar 2019; Papernot & Steinke 2022;
//! docs/private-candidates.md): run a randomised algorithm Q — any ε₀-DP algorithm that returns a
//! candidate and a score — a random number of times and release the best run (or, with a known
//! threshold τ, the first run scoring at least τ), with the total privacy guarantee the theorems
//! give.
//!
//! ```
//! use rand::Rng as _;
//! use recsel::mechanisms::private_candidates::{SelectionParams, Stopping};
//!
//! // Q: a uniformly random hyperparameter, scored on the data with Laplace noise (ε₀ = 0.5).
//! let selection = SelectionParams::new(Stopping::Geometric { gamma: 0.1 }, 0.5).check()?;
//! assert_eq!(selection.guarantee().epsilon, 1.5); // 3ε₀ (Theorem 3.2)
//! let mut rng = recsel::rng::Streams::new(7).stream(0, 0, 0, 0);
//! let out = selection.run(
//!     |rng| {
//!         let lr = [0.01, 0.1, 1.0][rng.random_range(0..3)];
//!         let score = -(lr - 0.1f64).abs() + recsel::numerics::distributions::laplace1(rng) / 0.5;
//!         (lr, score)
//!     },
//!     &mut rng,
//! );
//! let (lr, _score) = out.best.expect("geometric stopping runs Q at least once");
//! assert!([0.01, 0.1, 1.0].contains(&lr));
//! # Ok::<(), recsel::Error>(())
//! ```
//!
//! Parameters are checked once ([`SelectionParams::check`], after linfa's `ParamGuard`); the
//! validated [`PrivateSelection`] never re-checks them. It offers the seeded float path
//! ([`PrivateSelection::run`], Q draws from the project's [`Rng`]) and a secure path
//! ([`PrivateSelection::run_secure`], the number of runs from exact samplers and Q given the OS-seeded
//! [`SecureRng`]). The registry's `rs`, `rs-tnb` and `rs-exp` run their draw-by-draw loop through
//! this module, and `rs-threshold`, `rs-hard` and `rs-hard-delta` ([`scores`]) are its
//! known-threshold and hard-stop selections on score vectors.

use std::cmp::Ordering;
use std::convert::Infallible;

use rand::Rng as _;
use rand_distr::Distribution;
use statrs::function::gamma::ln_gamma;

use crate::error::{Error, Result};
use crate::numerics::distributions::{Geometric1, TruncatedNegBinomial};
use crate::numerics::exact::{ExactStopping, FRACTION_BITS};
use crate::rng::{Rng, SecureRng};

mod accounting;
mod coupling;
pub mod margin;
pub mod scores;
pub mod sparse_vector;
pub mod svt_scores;

pub use accounting::Statement;

/// How many times Q runs (before a hard stop): the stopping rules of Liu & Talwar (§3.2) and
/// Papernot & Steinke, a Poisson number of runs, and a fixed number (the naive repetition).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stopping {
    /// K ~ Geometric(γ) on {1, 2, …}: after each run stop with probability γ, E K = 1/γ.
    Geometric {
        /// Stopping probability γ in (0, 1].
        gamma: f64,
    },
    /// K ~ D_{η,γ}, the truncated negative binomial of Papernot & Steinke (η = 0: logarithmic,
    /// η = 1: Geometric(γ)).
    TruncatedNegBinomial {
        /// Shape η > −1.
        eta: f64,
        /// γ in (0, 1].
        gamma: f64,
    },
    /// K ~ Poisson(μ) on {0, 1, …}; K = 0 releases ⊥.
    Poisson {
        /// Mean μ > 0.
        mu: f64,
    },
    /// K = R always: the best of R runs, private only by composition (R·ε₀).
    Fixed {
        /// R ≥ 1.
        runs: u64,
    },
}

impl Stopping {
    /// For the laws whose best-of guarantee is linear in ε₀, the factor ε/ε₀ (3 for the
    /// geometric law, 2 + η for D_{η,γ}, R for R fixed runs); `None` for Poisson.
    pub fn epsilon_factor(&self) -> Option<f64> {
        match *self {
            Stopping::Geometric { .. } => Some(3.0),
            Stopping::TruncatedNegBinomial { eta, .. } => Some(2.0 + eta),
            Stopping::Fixed { runs } => Some(runs as f64),
            Stopping::Poisson { .. } => None,
        }
    }

    /// The largest ε₀ a run may spend so that the best-of statement (no threshold, no hard stop,
    /// pure runs) totals at most `epsilon`: ε/3, ε/(2+η), ε/R, or the root of
    /// ε₀ + μ·tanh(ε₀/2) = ε for Poisson.
    pub fn eps0_for_total(&self, epsilon: f64) -> f64 {
        accounting::best_of_eps0(self, epsilon)
    }
}

/// A validated stopping law: its float sampler and its generating function's helpers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Law {
    Geometric(Geometric1),
    Tnb(TruncatedNegBinomial),
    Poisson {
        mu: f64,
        dist: rand_distr::Poisson<f64>,
    },
    Fixed(u64),
}

impl Law {
    /// Validates the parameters of `s`; errors name the bad value.
    pub(crate) fn new(s: &Stopping) -> Result<Self> {
        Ok(match *s {
            Stopping::Geometric { gamma } => Law::Geometric(Geometric1::new(gamma)?),
            Stopping::TruncatedNegBinomial { eta, gamma } => {
                Law::Tnb(TruncatedNegBinomial::new(eta, gamma)?)
            }
            Stopping::Poisson { mu } => {
                if !(mu.is_finite() && mu > 0.0 && mu <= 1e12) {
                    return Err(Error::InvalidParameter {
                        name: "mu",
                        requirement: "finite, > 0 and at most 1e12",
                        value: mu,
                    });
                }
                Law::Poisson {
                    mu,
                    dist: rand_distr::Poisson::new(mu)
                        .map_err(|e| Error::Invalid(format!("Poisson law for mu = {mu}: {e}")))?,
                }
            }
            Stopping::Fixed { runs } => {
                if runs == 0 {
                    return Err(Error::InvalidParameter {
                        name: "runs",
                        requirement: ">= 1",
                        value: 0.0,
                    });
                }
                Law::Fixed(runs)
            }
        })
    }

    /// One draw of K.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut Rng) -> u64 {
        match self {
            Law::Geometric(g) => g.sample(rng),
            Law::Tnb(t) => t.sample(rng),
            Law::Poisson { dist, .. } => dist.sample(rng) as u64,
            Law::Fixed(r) => *r,
        }
    }

    /// P(K = k).
    pub(crate) fn pmf(&self, k: u64) -> f64 {
        match self {
            Law::Geometric(g) => g.pmf(k),
            Law::Tnb(t) => t.pmf(k),
            Law::Poisson { mu, .. } => {
                let kf = k as f64;
                (kf * mu.ln() - mu - ln_gamma(kf + 1.0)).exp()
            }
            Law::Fixed(r) => f64::from(u8::from(k == *r)),
        }
    }

    /// E K.
    pub(crate) fn mean(&self) -> f64 {
        match self {
            Law::Geometric(g) => 1.0 / g.gamma(),
            Law::Tnb(t) => {
                let (gamma, eta) = (t.gamma(), t.eta());
                if gamma >= 1.0 {
                    1.0
                } else if eta == 0.0 {
                    (1.0 - gamma) / (gamma * -gamma.ln())
                } else {
                    // The negative binomial's mean η(1−γ)/γ over P(K ≥ 1) = 1 − γ^η.
                    eta * (1.0 - gamma) / (gamma * -(eta * gamma.ln()).exp_m1())
                }
            }
            Law::Poisson { mu, .. } => *mu,
            Law::Fixed(r) => *r as f64,
        }
    }

    /// The level of the best of K values drawn from a continuous law: the survival probability t
    /// of one value at the maximum. With φ the generating function of K,
    /// `P(max ≤ v) = φ(1 − S(v))`, so `t = 1 − φ⁻¹(1 − u)` for a uniform u in (0, 1); each
    /// closed form avoids cancellation as t → 0 (docs/mechanisms.md, "Sampling the maximum
    /// directly"). `None` for Poisson, whose K = 0 has no maximum.
    pub(crate) fn max_level(&self, u: f64) -> Option<f64> {
        Some(match self {
            Law::Geometric(g) => {
                let gamma = g.gamma();
                gamma * u / (1.0 - (1.0 - gamma) * u)
            }
            Law::Tnb(t) => {
                let (gamma, eta) = (t.gamma(), t.eta());
                if gamma >= 1.0 {
                    u
                } else if eta == 0.0 {
                    // Logarithmic: φ(z) = ln(1 − (1−γ)z) / ln γ.
                    gamma * (-u * gamma.ln()).exp_m1() / (1.0 - gamma)
                } else {
                    // φ(z) = ((1 − (1−γ)z)^{−η} − 1) / (γ^{−η} − 1).
                    let one_minus_gamma_eta = -(eta * gamma.ln()).exp_m1();
                    gamma * (-(-u * one_minus_gamma_eta).ln_1p() / eta).exp_m1() / (1.0 - gamma)
                }
            }
            // φ(z) = z^T.
            Law::Fixed(t) => -(u.ln() / *t as f64).exp_m1(),
            Law::Poisson { .. } => return None,
        })
    }

    /// The exact sampler of the secure path, with the parameters it can represent exactly: γ as
    /// the dyadic rational it is, η rounded toward zero and μ down onto the 2^−32 grid (the
    /// accounting then uses the rounded values). Returns the sampler and the stopping rule it
    /// follows.
    pub(crate) fn exact(&self) -> Result<(ExactStopping, Stopping)> {
        let scale = 2f64.powi(FRACTION_BITS as i32);
        Ok(match self {
            Law::Geometric(g) => (
                ExactStopping::Geometric { gamma: g.gamma() },
                Stopping::Geometric { gamma: g.gamma() },
            ),
            Law::Tnb(t) => {
                let stop = ExactStopping::tnb(t.gamma(), t.eta())?;
                let ExactStopping::TruncatedNegBinomial { eta_num, .. } = stop else {
                    unreachable!("tnb() builds the truncated negative binomial")
                };
                (
                    stop,
                    Stopping::TruncatedNegBinomial {
                        eta: eta_num as f64 / scale,
                        gamma: t.gamma(),
                    },
                )
            }
            Law::Poisson { mu, .. } => {
                let mu_num = (mu * scale).floor();
                if mu_num < 1.0 {
                    return Err(Error::InvalidParameter {
                        name: "mu",
                        requirement: "at least 2^-32 in secure mode",
                        value: *mu,
                    });
                }
                (
                    ExactStopping::Poisson {
                        mu_num: mu_num as u64,
                    },
                    Stopping::Poisson { mu: mu_num / scale },
                )
            }
            Law::Fixed(r) => (
                ExactStopping::Fixed { runs: *r },
                Stopping::Fixed { runs: *r },
            ),
        })
    }
}

/// Unchecked parameters of a selection from private candidates; [`SelectionParams::check`]
/// validates them into a [`PrivateSelection`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectionParams {
    /// How many times Q runs.
    pub stopping: Stopping,
    /// Q is (ε₀, δ₀)-DP: ε₀ finite and > 0.
    pub eps0: f64,
    /// δ₀ in [0, 1) (0: Q is pure ε₀-DP).
    pub delta0: f64,
    /// Known threshold τ (Liu & Talwar §3.1): release the first run scoring at least τ, or ⊥
    /// when the budget of runs is spent. Needs the geometric rule (its γ is the chance of giving
    /// up after each run below τ).
    pub threshold: Option<f64>,
    /// Hard stop T ≥ 1 (Liu & Talwar §3.4–3.5): at most T runs.
    pub max_runs: Option<u64>,
}

impl SelectionParams {
    /// Random stopping with `stopping` on pure ε₀-DP runs; no threshold, no hard stop.
    pub fn new(stopping: Stopping, eps0: f64) -> Self {
        SelectionParams {
            stopping,
            eps0,
            delta0: 0.0,
            threshold: None,
            max_runs: None,
        }
    }

    /// These parameters with a known threshold τ.
    pub fn with_threshold(mut self, tau: f64) -> Self {
        self.threshold = Some(tau);
        self
    }

    /// These parameters with a hard stop after T runs.
    pub fn with_max_runs(mut self, t: u64) -> Self {
        self.max_runs = Some(t);
        self
    }

    /// These parameters for (ε₀, δ₀)-DP runs.
    pub fn with_delta0(mut self, delta0: f64) -> Self {
        self.delta0 = delta0;
        self
    }

    /// Validates every parameter once; errors name the bad value.
    pub fn check(&self) -> Result<PrivateSelection> {
        // The stopping law first (a bad η reads as η, not as the ε₀ a caller derived from it).
        let law = Law::new(&self.stopping)?;
        if !(self.eps0.is_finite() && self.eps0 > 0.0) {
            return Err(Error::InvalidParameter {
                name: "eps0",
                requirement: "finite and > 0",
                value: self.eps0,
            });
        }
        if !(self.delta0 >= 0.0 && self.delta0 < 1.0) {
            return Err(Error::InvalidParameter {
                name: "delta0",
                requirement: "in [0, 1)",
                value: self.delta0,
            });
        }
        if let Some(tau) = self.threshold {
            if !tau.is_finite() {
                return Err(Error::InvalidParameter {
                    name: "threshold",
                    requirement: "finite",
                    value: tau,
                });
            }
            if !matches!(self.stopping, Stopping::Geometric { .. }) {
                return Err(Error::Invalid(format!(
                    "a known threshold needs the geometric stopping rule (Liu & Talwar §3.1: stop \
                     with probability gamma after each run below the threshold), got {:?}",
                    self.stopping
                )));
            }
        }
        if self.max_runs == Some(0) {
            return Err(Error::InvalidParameter {
                name: "max_runs",
                requirement: ">= 1",
                value: 0.0,
            });
        }
        let statements = accounting::statements(
            &self.stopping,
            self.eps0,
            self.delta0,
            self.threshold.is_some(),
            self.max_runs,
        );
        Ok(PrivateSelection {
            params: *self,
            law,
            statements,
        })
    }
}

/// What one selection released.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<C> {
    /// The released run's candidate and score; `None` is ⊥ (a known threshold never reached, or
    /// no run at all).
    pub best: Option<(C, f64)>,
    /// How many times Q ran.
    pub runs: u64,
    /// The guarantee of the release ([`PrivateSelection::guarantee`]).
    pub guarantee: Statement,
}

/// A validated selection from private candidates ([`SelectionParams::check`]).
#[derive(Debug, Clone)]
pub struct PrivateSelection {
    params: SelectionParams,
    law: Law,
    statements: Vec<Statement>,
}

/// A score ranked with NaN below every number (and NaNs tied): a fixed total order, so a run
/// that scores NaN is never preferred and reveals nothing through an error.
#[derive(Debug, Clone, Copy)]
struct Ranked(f64);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        (self.0.is_nan() && other.0.is_nan()) || self.0 == other.0
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(match (self.0.is_nan(), other.0.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self.0.partial_cmp(&other.0)?,
        })
    }
}

/// The selection loop shared by every path: `budget` runs of `q`, the best released (ties
/// uniformly at random: the j-th tied run replaces the incumbent with probability 1/j, drawn by
/// `below`), or with a threshold the first run at or above it (⊥ = `None` when none is). Returns
/// the release and the number of runs made.
#[inline]
pub(crate) fn select_loop<R, C, S: PartialOrd + Copy, E>(
    budget: u64,
    threshold: Option<S>,
    rng: &mut R,
    mut q: impl FnMut(&mut R) -> std::result::Result<(C, S), E>,
    mut below: impl FnMut(&mut R, u64) -> u64,
) -> std::result::Result<(Option<(C, S)>, u64), E> {
    let mut best: Option<(C, S)> = None;
    let mut ties = 0u64;
    for run in 1..=budget {
        let (c, s) = q(rng)?;
        if let Some(tau) = threshold {
            if s >= tau {
                return Ok((Some((c, s)), run));
            }
            continue;
        }
        match &mut best {
            Some((bc, bs)) => {
                if s > *bs {
                    *bc = c;
                    *bs = s;
                    ties = 1;
                } else if s == *bs {
                    ties += 1;
                    if below(rng, ties) == 0 {
                        *bc = c;
                    }
                }
            }
            None => {
                best = Some((c, s));
                ties = 1;
            }
        }
    }
    Ok((best, budget))
}

impl PrivateSelection {
    /// The validated parameters.
    pub fn params(&self) -> &SelectionParams {
        &self.params
    }

    /// The guarantee of one release: the statement with the smallest δ (pure when one exists),
    /// then the smallest ε, of [`PrivateSelection::statements`].
    pub fn guarantee(&self) -> Statement {
        self.statements[0]
    }

    /// Every (ε, δ) statement the theorems give for these parameters, strongest δ first
    /// (docs/private-candidates.md, "Which statement applies").
    pub fn statements(&self) -> &[Statement] {
        &self.statements
    }

    pub(crate) fn law(&self) -> &Law {
        &self.law
    }

    /// One draw of the budget of runs: K from the stopping law, capped at the hard stop.
    #[inline]
    pub fn draw_budget(&self, rng: &mut Rng) -> u64 {
        let k = self.law.sample(rng);
        self.params.max_runs.map_or(k, |t| k.min(t))
    }

    /// E of the budget without the hard stop (E K).
    pub fn mean_runs(&self) -> f64 {
        self.law.mean()
    }

    /// The seeded loop with a score type of the caller's (the score-vector mechanisms rank plain
    /// finite floats, or exact integers on the secure grid).
    #[inline]
    pub(crate) fn run_scores<C, S: PartialOrd + Copy>(
        &self,
        threshold: Option<S>,
        rng: &mut Rng,
        q: impl FnMut(&mut Rng) -> (C, S),
    ) -> (Option<(C, S)>, u64) {
        let budget = self.draw_budget(rng);
        let mut q = q;
        let out = select_loop(
            budget,
            threshold,
            rng,
            |r| Ok::<_, Infallible>(q(r)),
            |r, n| r.random_range(0..n),
        );
        match out {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// One selection: Q runs a random number of times on `rng` (each run draws from the same
    /// generator, after the budget), and the best run — or the first at or above the threshold —
    /// is released with the guarantee.
    pub fn run<C>(&self, q: impl FnMut(&mut Rng) -> (C, f64), rng: &mut Rng) -> Outcome<C> {
        let mut q = q;
        match self.try_run(|r| Ok::<_, Infallible>(q(r)), rng) {
            Ok(o) => o,
            Err(never) => match never {},
        }
    }

    /// [`PrivateSelection::run`] for a Q that can fail: the first error stops the selection and
    /// is returned (the runs made so far are discarded; an error is an output too, so a Q whose
    /// failures depend on the data is not private).
    pub fn try_run<C, E>(
        &self,
        mut q: impl FnMut(&mut Rng) -> std::result::Result<(C, f64), E>,
        rng: &mut Rng,
    ) -> std::result::Result<Outcome<C>, E> {
        let budget = self.draw_budget(rng);
        let (best, runs) = select_loop(
            budget,
            self.params.threshold.map(Ranked),
            rng,
            |r| q(r).map(|(c, s)| (c, Ranked(s))),
            |r, n| r.random_range(0..n),
        )?;
        Ok(Outcome {
            best: best.map(|(c, s)| (c, s.0)),
            runs,
            guarantee: self.guarantee(),
        })
    }

    /// [`PrivateSelection::try_run`] for a Q that brings its own generator: each run gets a
    /// fresh 63-bit seed drawn from the selection's generator (how a front end hands randomness
    /// to code it does not control, such as a Python function that seeds numpy).
    pub fn try_run_seeded<C, E>(
        &self,
        mut q: impl FnMut(u64) -> std::result::Result<(C, f64), E>,
        rng: &mut Rng,
    ) -> std::result::Result<Outcome<C>, E> {
        self.try_run(|r| q(crate::rng::child_seed(r)), rng)
    }

    /// The secure path's stopping law and guarantee (docs/private-candidates.md, "Secure runs"):
    /// an exact sampler of the budget and the statements for the parameters it represents
    /// exactly (η and μ rounded onto the 2^−32 grid). An error if a parameter has no exact form.
    pub fn secure(&self) -> Result<SecureSelection> {
        let (exact, stopping) = self.law.exact()?;
        let params = SelectionParams {
            stopping,
            ..self.params
        };
        let checked = params.check()?;
        Ok(SecureSelection {
            exact,
            max_runs: self.params.max_runs,
            threshold: self.params.threshold,
            statements: checked.statements,
        })
    }

    /// One selection on the secure path: the budget from exact samplers of the OS-seeded
    /// generator, Q given the same generator (so its own noise can be exact too), ties broken by
    /// exact uniform draws. The guarantee is [`SecureSelection::guarantee`].
    pub fn run_secure<C>(
        &self,
        q: impl FnMut(&mut SecureRng) -> (C, f64),
        rng: &mut SecureRng,
    ) -> Result<Outcome<C>> {
        let mut q = q;
        match self.secure()?.try_run(|r| Ok::<_, Infallible>(q(r)), rng) {
            Ok(o) => Ok(o),
            Err(never) => match never {},
        }
    }
}

/// The secure twin of a [`PrivateSelection`] ([`PrivateSelection::secure`]).
#[derive(Debug, Clone)]
pub struct SecureSelection {
    exact: ExactStopping,
    max_runs: Option<u64>,
    threshold: Option<f64>,
    statements: Vec<Statement>,
}

impl SecureSelection {
    /// The guarantee of a secure release (with the rounded parameters).
    pub fn guarantee(&self) -> Statement {
        self.statements[0]
    }

    /// Every statement for the rounded parameters, strongest δ first.
    pub fn statements(&self) -> &[Statement] {
        &self.statements
    }

    /// One exact draw of the budget: K, capped at the hard stop.
    #[inline]
    pub fn draw_budget(&self, rng: &mut SecureRng) -> u64 {
        let k = self.exact.sample(rng);
        self.max_runs.map_or(k, |t| k.min(t))
    }

    /// The secure loop with a score type of the caller's (exact grid integers).
    pub(crate) fn run_scores<C, S: PartialOrd + Copy>(
        &self,
        threshold: Option<S>,
        rng: &mut SecureRng,
        q: impl FnMut(&mut SecureRng) -> (C, S),
    ) -> (Option<(C, S)>, u64) {
        let budget = self.draw_budget(rng);
        let mut q = q;
        match select_loop(
            budget,
            threshold,
            rng,
            |r| Ok::<_, Infallible>(q(r)),
            |r, n| r.below(n),
        ) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// [`SecureSelection::try_run`] for a Q that brings its own generator: each run gets a fresh
    /// 63-bit seed from the secure generator (the numbers are unpredictable; what Q does with them
    /// is Q's business).
    pub fn try_run_seeded<C, E>(
        &self,
        mut q: impl FnMut(u64) -> std::result::Result<(C, f64), E>,
        rng: &mut SecureRng,
    ) -> std::result::Result<Outcome<C>, E> {
        self.try_run(|r| q(r.next_u64() >> 1), rng)
    }

    /// One secure selection with a Q that can fail (see [`PrivateSelection::try_run`]).
    pub fn try_run<C, E>(
        &self,
        mut q: impl FnMut(&mut SecureRng) -> std::result::Result<(C, f64), E>,
        rng: &mut SecureRng,
    ) -> std::result::Result<Outcome<C>, E> {
        let budget = self.draw_budget(rng);
        let (best, runs) = select_loop(
            budget,
            self.threshold.map(Ranked),
            rng,
            |r| q(r).map(|(c, s)| (c, Ranked(s))),
            |r, n| r.below(n),
        )?;
        Ok(Outcome {
            best: best.map(|(c, s)| (c, s.0)),
            runs,
            guarantee: self.guarantee(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_validated_with_the_bad_value_named() {
        let g = Stopping::Geometric { gamma: 0.1 };
        for (p, needle) in [
            (SelectionParams::new(g, 0.0), "eps0"),
            (SelectionParams::new(g, f64::NAN), "eps0"),
            (SelectionParams::new(g, 1.0).with_delta0(1.0), "delta0"),
            (SelectionParams::new(g, 1.0).with_max_runs(0), "max_runs"),
            (
                SelectionParams::new(g, 1.0).with_threshold(f64::INFINITY),
                "threshold",
            ),
            (
                SelectionParams::new(Stopping::Poisson { mu: 2.0 }, 1.0).with_threshold(0.0),
                "geometric",
            ),
            (
                SelectionParams::new(Stopping::Geometric { gamma: 1.5 }, 1.0),
                "gamma",
            ),
            (
                SelectionParams::new(Stopping::Poisson { mu: -1.0 }, 1.0),
                "mu",
            ),
            (
                SelectionParams::new(
                    Stopping::TruncatedNegBinomial {
                        eta: -1.0,
                        gamma: 0.1,
                    },
                    1.0,
                ),
                "eta",
            ),
            (
                SelectionParams::new(Stopping::Fixed { runs: 0 }, 1.0),
                "runs",
            ),
        ] {
            let e = p.check().unwrap_err().to_string();
            assert!(e.contains(needle), "{p:?}: {e}");
        }
    }

    #[test]
    fn the_loop_releases_the_best_and_breaks_ties_uniformly() {
        // Three runs score 1, 3, 3: the release is one of the two 3s, each half the time.
        let mut rng = crate::rng::Streams::new(1).stream(0, 0, 0, 0);
        let mut second = 0;
        for _ in 0..20_000 {
            let mut i = 0;
            let (best, runs) = select_loop(
                3,
                None,
                &mut rng,
                |_| {
                    i += 1;
                    Ok::<_, Infallible>((i, [1.0, 3.0, 3.0][i - 1]))
                },
                |r, n| r.random_range(0..n),
            )
            .unwrap();
            assert_eq!(runs, 3);
            let (c, s) = best.unwrap();
            assert_eq!(s, 3.0);
            second += usize::from(c == 2);
        }
        assert!((second as f64 / 20_000.0 - 0.5).abs() < 0.02, "{second}");
    }

    #[test]
    fn nan_scores_rank_below_every_number() {
        let sel = SelectionParams::new(Stopping::Fixed { runs: 3 }, 1.0)
            .check()
            .unwrap();
        let mut rng = crate::rng::Streams::new(2).stream(0, 0, 0, 0);
        let mut i = 0;
        let out = sel.run(
            |_| {
                i += 1;
                (i, [f64::NAN, -1e300, f64::NAN][i - 1])
            },
            &mut rng,
        );
        assert_eq!(out.best, Some((2, -1e300)));
        assert_eq!(out.runs, 3);
    }
}
