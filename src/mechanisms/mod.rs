//! Private selection mechanisms (docs/mechanisms.md).
//!
//! Every mechanism is built from [`MechParams`] by a validating constructor (docs/ARCHITECTURE.md, after linfa's
//! `ParamGuard` and OpenDP's constructors): once built, it never re-checks its parameters. A
//! selection runs on a [`Problem`] — scores and per-candidate sensitivities that were validated once
//! — with a caller-supplied generator. Adding a mechanism is one file and one line in [`REGISTRY`];
//! the CLI, the pipelines and the docs read the registry.
//!
//! Work that depends only on (scores, sensitivities, ε) — GEM's transformed scores, the exponential
//! mechanism's cumulative weights — is done once in [`Mechanism::prepare`]; repeated trials on the
//! same problem then only call [`Prepared::sample`].
//!
//! Every mechanism that claims ε-DP also has a *secure path* ([`Mechanism::prepare_secure`],
//! `--secure`, `docs/secure.md`): exact discrete noise on a power-of-two grid, drawn from an
//! OS-seeded [`crate::rng::SecureRng`]. Runners choose between the two with one value,
//! [`NoiseMode`], through [`Selector`].

use std::fmt;

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rng::{Draws, NoiseMode, Rng};
use crate::stats::Chooser;

pub mod batch;
mod cgem;
mod em;
pub mod gem;
mod krr;
mod pf;
mod random;
mod rnm;
pub mod rs;
pub mod secure;

pub use cgem::CombinedGem;
pub use em::ExponentialMechanism;
pub use gem::{Gem, GemVariant};
pub use krr::KRandomizedResponse;
pub use pf::PermuteAndFlip;
pub use random::UniformRandom;
pub use rnm::{Noise, NoisyMax};
pub use rs::{RandomStopping, StoppingRule};
pub use secure::{Grid, SecureEpsilon, SecurePrepared};

/// A selection problem: scores `q_a` and sensitivities `Δ_a > 0` of k ≥ 1 candidates, validated once.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    scores: &'a [f64],
    sens: &'a [f64],
    max_sens: f64,
    max_score: f64,
}

impl<'a> Problem<'a> {
    /// Validates the inputs: at least one candidate, equal lengths, finite scores, finite positive
    /// sensitivities. Errors name the first bad value.
    pub fn new(scores: &'a [f64], sens: &'a [f64]) -> Result<Self> {
        if scores.is_empty() {
            return Err(Error::EmptyCandidates);
        }
        if scores.len() != sens.len() {
            return Err(Error::LengthMismatch {
                scores: scores.len(),
                sensitivities: sens.len(),
            });
        }
        let mut max_sens = 0.0f64;
        let mut max_score = f64::NEG_INFINITY;
        for (index, (&q, &d)) in scores.iter().zip(sens).enumerate() {
            if !q.is_finite() {
                return Err(Error::NonFiniteScore { index, value: q });
            }
            if !(d.is_finite() && d > 0.0) {
                return Err(Error::BadSensitivity { index, value: d });
            }
            max_sens = max_sens.max(d);
            max_score = max_score.max(q);
        }
        Ok(Problem {
            scores,
            sens,
            max_sens,
            max_score,
        })
    }

    /// Number of candidates k.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Always false: a problem has at least one candidate.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The scores q.
    pub fn scores(&self) -> &'a [f64] {
        self.scores
    }

    /// The sensitivities Δ.
    pub fn sensitivities(&self) -> &'a [f64] {
        self.sens
    }

    /// Δ = max_a Δ_a.
    pub fn max_sensitivity(&self) -> f64 {
        self.max_sens
    }

    /// q_max = max_a q_a.
    pub fn max_score(&self) -> f64 {
        self.max_score
    }

    /// Indices of the candidates with the maximal score.
    pub fn argmax_set(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&a| self.scores[a] == self.max_score)
            .collect()
    }
}

/// The privacy guarantee a mechanism claims.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Guarantee {
    /// ε-DP (pure) with this ε; 0 for a mechanism that ignores its input.
    Pure {
        /// The ε.
        epsilon: f64,
    },
    /// (k − 1)·ε-DP for k candidates, with this per-candidate ε (`rnmh-laplace`).
    PerCandidate {
        /// The per-candidate ε.
        epsilon: f64,
    },
    /// No differential privacy guarantee for any ε (`rnmh`).
    NotPrivate,
}

impl Guarantee {
    /// The ε this guarantee amounts to for k candidates, or `None` if not private.
    pub fn epsilon_for(&self, k: usize) -> Option<f64> {
        match *self {
            Guarantee::Pure { epsilon } => Some(epsilon),
            Guarantee::PerCandidate { epsilon } => Some(epsilon * k.saturating_sub(1) as f64),
            Guarantee::NotPrivate => None,
        }
    }

    /// Whether the mechanism claims any differential privacy.
    pub fn is_private(&self) -> bool {
        !matches!(self, Guarantee::NotPrivate)
    }
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Guarantee::Pure { epsilon } => write!(f, "{epsilon}-DP"),
            Guarantee::PerCandidate { epsilon } => write!(f, "(k-1)*{epsilon}-DP"),
            Guarantee::NotPrivate => write!(f, "not private"),
        }
    }
}

/// A mechanism's precomputation for one problem; sampling from it is one selection.
pub trait Prepared: Send + Sync {
    /// One selection: the index of the chosen candidate.
    fn sample(&self, rng: &mut Rng) -> usize;
}

/// A private selection mechanism with validated parameters.
pub trait Mechanism: Send + Sync + fmt::Debug {
    /// The registry name (docs/mechanisms.md).
    fn name(&self) -> &'static str;

    /// The total privacy parameter ε it was built with.
    fn epsilon(&self) -> f64;

    /// The guarantee it claims; by default ε-DP with [`Mechanism::epsilon`].
    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.epsilon(),
        }
    }

    /// Precomputes what depends only on the problem and the parameters.
    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a>;

    /// Like [`Mechanism::prepare`], for a caller that will draw many selections from the same
    /// problem: it may spend more up front to make each selection cheaper (`rnm` and the GEM
    /// family sort the scores once and then sample by thinning). Same output distribution.
    fn prepare_many<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        self.prepare(problem)
    }

    /// One selection on `problem`.
    fn select(&self, problem: &Problem<'_>, rng: &mut Rng) -> usize {
        self.prepare(problem).sample(rng)
    }

    /// The ε the secure path guarantees: ε rounded down onto the 2^−32 grid (0 for `random`),
    /// never above [`Mechanism::epsilon`]. An error for a mechanism without a secure path (those
    /// that claim no ε-DP: `rnmh`, `rnmh-laplace`) or an ε below 2^−32; runners call it when they
    /// validate a secure run, before any work.
    fn secure_epsilon(&self) -> Result<f64> {
        Err(no_secure_path(self.name()))
    }

    /// The secure path's precomputation (`docs/secure.md`): the problem on the power-of-two grid
    /// and exact samplers that draw only integers and bits from a [`crate::rng::SecureRng`].
    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        let _ = problem;
        Err(no_secure_path(self.name()))
    }
}

/// The error of a mechanism without a secure path.
pub(crate) fn no_secure_path(name: &str) -> Error {
    Error::Invalid(format!(
        "mechanism '{name}' has no secure path (--secure): it does not claim epsilon-DP"
    ))
}

/// A prepared mechanism in one of the two modes: what runners hold while they draw many
/// selections from one problem.
pub enum Selector<'a> {
    /// The float path ([`Mechanism::prepare_many`]).
    Fast(Box<dyn Prepared + 'a>),
    /// The secure path ([`Mechanism::prepare_secure`]).
    Secure(Box<dyn SecurePrepared + 'a>),
}

impl<'a> Selector<'a> {
    /// Prepares `mech` on `problem` for many selections in `mode`.
    pub fn new(mech: &'a dyn Mechanism, problem: &Problem<'a>, mode: NoiseMode) -> Result<Self> {
        Ok(match mode {
            NoiseMode::Fast => Selector::Fast(mech.prepare_many(problem)),
            NoiseMode::Secure => Selector::Secure(mech.prepare_secure(problem)?),
        })
    }

    /// One selection. In fast mode it draws from the stream of (`mech_id`, `eps_index`, `user`,
    /// `trial`) of the seeded `draws`; in secure mode from the worker's secure generator (the
    /// stream coordinates are unused). Panics if `draws` is of the other mode (a runner bug).
    pub fn sample(
        &self,
        draws: &mut Draws,
        mech_id: u32,
        eps_index: u32,
        user: u64,
        trial: u32,
    ) -> usize {
        match (self, draws) {
            (Selector::Fast(p), Draws::Seeded(streams)) => {
                p.sample(&mut streams.stream(mech_id, eps_index, user, trial))
            }
            (Selector::Secure(p), Draws::Secure(rng)) => p.sample(rng),
            _ => panic!("Selector and Draws of different noise modes"),
        }
    }
}

/// Unchecked mechanism parameters; [`build`] validates them for the mechanism that uses them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MechParams {
    /// Privacy parameter ε (finite, > 0).
    pub epsilon: f64,
    /// Stopping probability γ of `rs` and `rs-tnb`, in (0, 1].
    pub gamma: f64,
    /// Failure probability β of `gem`, `mgem` and `cgem`, in (0, 1).
    pub beta: f64,
    /// Shape η of `rs-tnb`'s stopping distribution, > −1.
    pub eta: f64,
    /// Share c of ε that `cgem` spends on the correlation bit, in (0, 1).
    pub c: f64,
    /// Correlation `cgem` uses.
    pub chooser: Chooser,
    /// Number of draws T of the audit reference `bot-exp`, ≥ 1.
    pub draws: u64,
}

impl Default for MechParams {
    fn default() -> Self {
        MechParams {
            epsilon: 1.0,
            gamma: 0.05,
            beta: 0.05,
            eta: 0.0,
            c: 0.6,
            chooser: Chooser::Spearman,
            draws: 10,
        }
    }
}

impl MechParams {
    /// These parameters with another ε.
    pub fn with_epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = epsilon;
        self
    }
}

/// ε finite and > 0.
pub(crate) fn check_epsilon(epsilon: f64) -> Result<f64> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(epsilon)
    } else {
        Err(Error::InvalidParameter {
            name: "epsilon",
            requirement: "finite and > 0",
            value: epsilon,
        })
    }
}

/// A value strictly inside (0, 1).
pub(crate) fn check_open_unit(name: &'static str, value: f64) -> Result<f64> {
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            requirement: "in (0, 1)",
            value,
        })
    }
}

/// The index of the largest `value(a)`, a = 0..k, ties broken uniformly at random (reservoir
/// sampling over the tied set: the j-th tie replaces the incumbent with probability 1/j).
#[inline]
pub(crate) fn argmax_random_ties(
    k: usize,
    rng: &mut Rng,
    mut value: impl FnMut(usize, &mut Rng) -> f64,
) -> usize {
    let mut best = value(0, rng);
    let mut best_index = 0;
    let mut ties = 1u32;
    for a in 1..k {
        let v = value(a, rng);
        if v > best {
            best = v;
            best_index = a;
            ties = 1;
        } else if v == best {
            ties += 1;
            if rng.random_range(0..ties) == 0 {
                best_index = a;
            }
        }
    }
    best_index
}

/// One registry entry: how to list, document and build a mechanism.
pub struct MechanismSpec {
    /// CLI name.
    pub name: &'static str,
    /// The guarantee in words.
    pub guarantee: &'static str,
    /// Whether it claims any differential privacy.
    pub private: bool,
    /// Parameters it reads besides ε, with their meaning.
    pub params: &'static [&'static str],
    /// One-line description.
    pub summary: &'static str,
    /// An audit reference: a mechanism that is deliberately not ε-DP, kept to show that
    /// `recsel audit` catches a real violation. Not part of `all`.
    pub audit_reference: bool,
    build: fn(&MechParams) -> Result<Box<dyn Mechanism>>,
}

impl fmt::Debug for MechanismSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MechanismSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl MechanismSpec {
    /// Validates `params` and builds the mechanism.
    pub fn build(&self, params: &MechParams) -> Result<Box<dyn Mechanism>> {
        (self.build)(params)
    }
}

fn boxed<M: Mechanism + 'static>(m: Result<M>) -> Result<Box<dyn Mechanism>> {
    m.map(|m| Box::new(m) as Box<dyn Mechanism>)
}

/// Every mechanism, in the order of docs/mechanisms.md, then the audit references. The single
/// source of names for the CLI and the docs.
pub static REGISTRY: &[MechanismSpec] = &[
    MechanismSpec {
        name: "rnm",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "Report Noisy Max: argmax q_a + Exp(mean 2*Delta/eps), Delta = max sensitivity",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Exponential, false, p.epsilon)),
    },
    MechanismSpec {
        name: "pf",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "permute-and-flip (McKenna-Sheldon 2020); same distribution as rnm",
        audit_reference: false,
        build: |p| boxed(PermuteAndFlip::new(p.epsilon)),
    },
    MechanismSpec {
        name: "em",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "exponential mechanism: P(a) proportional to exp(eps*q_a/(2*Delta))",
        audit_reference: false,
        build: |p| boxed(ExponentialMechanism::new(p.epsilon)),
    },
    MechanismSpec {
        name: "rnm-laplace",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "argmax q_a + Lap(2*Delta/eps)",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Laplace, false, p.epsilon)),
    },
    MechanismSpec {
        name: "rnmh",
        guarantee: "not private (reference only)",
        private: false,
        params: &[],
        summary: "heterogeneous RNM: argmax q_a + Exp(mean 2*Delta_a/eps); NOT DP for any eps",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Exponential, true, p.epsilon)),
    },
    MechanismSpec {
        name: "rnmh-laplace",
        guarantee: "(k-1)*eps-DP only (reference only)",
        private: true,
        params: &[],
        summary: "heterogeneous Laplace noisy max: argmax q_a + Lap(Delta_a/eps)",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Laplace, true, p.epsilon)),
    },
    MechanismSpec {
        name: "rs",
        guarantee: "eps-DP",
        private: true,
        params: &["gamma"],
        summary: "random stopping RS_gamma (Liu-Talwar): K ~ Geometric(gamma) uniform draws, \
                  each q_a + Lap(3*Delta_a/eps), best recorded",
        audit_reference: false,
        build: |p| {
            boxed(RandomStopping::new(
                StoppingRule::Geometric,
                p.epsilon,
                p.gamma,
                0.0,
            ))
        },
    },
    MechanismSpec {
        name: "rs-tnb",
        guarantee: "eps-DP",
        private: true,
        params: &["gamma", "eta"],
        summary: "improved random stopping (Papernot-Steinke): K ~ truncated negative binomial, \
                  noise Lap((2+eta)*Delta_a/eps)",
        audit_reference: false,
        build: |p| {
            boxed(RandomStopping::new(
                StoppingRule::TruncatedNegBinomial,
                p.epsilon,
                p.gamma,
                p.eta,
            ))
        },
    },
    MechanismSpec {
        name: "rs-exp",
        guarantee: "eps-DP",
        private: true,
        params: &["gamma"],
        summary: "RS_gamma with one-sided Exp(mean 3*Delta_a/eps) noise; eps-DP (seed 001 \
                  appendix B's proof of the contrary is wrong, docs/mechanisms.md)",
        audit_reference: false,
        build: |p| {
            boxed(RandomStopping::new(
                StoppingRule::GeometricExponentialNoise,
                p.epsilon,
                p.gamma,
                0.0,
            ))
        },
    },
    MechanismSpec {
        name: "gem",
        guarantee: "eps-DP",
        private: true,
        params: &["beta"],
        summary: "generalised exponential mechanism (Raskhodnikova-Smith), t = 2 ln(k/beta)/eps",
        audit_reference: false,
        build: |p| boxed(Gem::new(GemVariant::Gem, p.epsilon, p.beta)),
    },
    MechanismSpec {
        name: "mgem",
        guarantee: "eps-DP",
        private: true,
        params: &["beta"],
        summary: "modified GEM, t = -2 ln(k/beta)/eps",
        audit_reference: false,
        build: |p| boxed(Gem::new(GemVariant::Modified, p.epsilon, p.beta)),
    },
    MechanismSpec {
        name: "cgem",
        guarantee: "eps-DP",
        private: true,
        params: &["beta", "c", "chooser"],
        summary: "combined GEM: randomised-response bit [corr(q, Delta) >= 0] with c*eps, \
                  then mgem (bit 1) or gem (bit 0) with (1-c)*eps",
        audit_reference: false,
        build: |p| boxed(CombinedGem::new(p.epsilon, p.beta, p.c, p.chooser)),
    },
    MechanismSpec {
        name: "krr",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "k-randomised response: the argmax with probability e^eps/(e^eps+k-1)",
        audit_reference: false,
        build: |p| boxed(KRandomizedResponse::new(p.epsilon)),
    },
    MechanismSpec {
        name: "random",
        guarantee: "0-DP",
        private: true,
        params: &[],
        summary: "uniform over the k candidates (ignores scores)",
        audit_reference: false,
        build: |p| boxed(UniformRandom::new(p.epsilon)),
    },
    MechanismSpec {
        name: "bot-exp",
        guarantee: "not private (audit reference)",
        private: false,
        params: &["draws"],
        summary: "best of T uniform draws with Exp(mean 3*Delta_a/eps) noise and no random \
                  stopping; NOT DP: loss ln[(1+p)^T - p^T], p = 1 - e^(-eps/3)",
        audit_reference: true,
        build: |p| boxed(RandomStopping::best_of(p.epsilon, p.draws)),
    },
    MechanismSpec {
        name: "rs-exp-m1",
        guarantee: "claims eps-DP; is 3*eps-DP",
        private: false,
        params: &["gamma"],
        summary: "rs-exp with noise multiplier 1 instead of 3 while claiming eps: the audit \
                  must report a violation",
        audit_reference: true,
        build: |p| {
            boxed(RandomStopping::miscalibrated(
                StoppingRule::GeometricExponentialNoise,
                p.epsilon,
                p.gamma,
                0.0,
                1.0,
            ))
        },
    },
];

/// The comma-separated list of valid names, for error messages.
pub fn valid_names() -> String {
    REGISTRY
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The registry entry called `name`.
pub fn spec(name: &str) -> Result<&'static MechanismSpec> {
    REGISTRY
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::UnknownName {
            kind: "mechanism",
            name: name.to_string(),
            valid: valid_names(),
        })
}

/// Validates `params` and builds the mechanism called `name`.
pub fn build(name: &str, params: &MechParams) -> Result<Box<dyn Mechanism>> {
    spec(name)?.build(params)
}

/// Parses `all` (every mechanism but the audit references) or a comma-separated list of names
/// into registry entries, in the given order.
pub fn parse_list(list: &str) -> Result<Vec<&'static MechanismSpec>> {
    if list.trim() == "all" {
        return Ok(REGISTRY.iter().filter(|s| !s.audit_reference).collect());
    }
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s = spec(name)?;
        if !out.iter().any(|o: &&MechanismSpec| o.name == s.name) {
            out.push(s);
        }
    }
    if out.is_empty() {
        return Err(Error::Invalid(format!(
            "no mechanism named in '{list}'; valid names: all, {}",
            valid_names()
        )));
    }
    Ok(out)
}
