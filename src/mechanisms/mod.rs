//! Private selection mechanisms (docs/mechanisms.md).
//!
//! Every mechanism is built from [`MechParams`] by a validating constructor (docs/ARCHITECTURE.md, after linfa's
//! `ParamGuard` and OpenDP's constructors): once built, it never re-checks its parameters. A
//! selection runs on a [`Problem`] — scores and per-candidate sensitivities that were validated once
//! — with a caller-supplied generator. Adding a built-in mechanism is one file and one entry in
//! [`REGISTRY`]; the CLI, the pipelines and the docs read the registry. Code outside the crate adds
//! a mechanism to a [`Registry`] value (built-ins plus its own [`MechanismSpec`], with typed
//! parameters declared as [`ParamSpec`]s) and hands that registry to the runners
//! (docs/extending.md).
//!
//! Work that depends only on (scores, sensitivities, ε) — GEM's transformed scores, the exponential
//! mechanism's cumulative weights — is done once in [`Mechanism::prepare`]; repeated trials on the
//! same problem then only call [`Prepared::sample`].
//!
//! Every mechanism that claims ε-DP also has a *secure path* ([`Mechanism::prepare_secure`],
//! `--secure`, `docs/secure.md`): exact discrete noise on a power-of-two grid, drawn from an
//! OS-seeded [`crate::rng::SecureRng`]. Runners choose between the two with one value,
//! [`NoiseMode`], through [`Selector`].

use std::collections::BTreeMap;
use std::fmt;

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rng::{Draws, NoiseMode, Rng, UserStreams};
use crate::stats::Chooser;

pub mod batch;
mod cgem;
mod em;
pub mod gem;
mod krr;
mod maxdraw;
mod pf;
pub mod private_candidates;
mod random;
mod rnm;
pub mod rs;
pub mod secure;

pub use cgem::CombinedGem;
pub use em::ExponentialMechanism;
pub use gem::{Gem, GemVariant};
pub use krr::KRandomizedResponse;
pub use pf::PermuteAndFlip;
pub use private_candidates::scores::{CandidateSelection, Variant};
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
    /// (ε, δ)-DP: `P[M(q) ∈ S] ≤ e^ε P[M(q') ∈ S] + δ` (`rs-hard-delta`). Runs and serving paths
    /// that need pure ε-DP refuse it.
    Approx {
        /// The ε.
        epsilon: f64,
        /// The δ.
        delta: f64,
    },
}

impl Guarantee {
    /// The ε this guarantee amounts to for k candidates, or `None` if not private.
    pub fn epsilon_for(&self, k: usize) -> Option<f64> {
        match *self {
            Guarantee::Pure { epsilon } => Some(epsilon),
            Guarantee::PerCandidate { epsilon } => Some(epsilon * k.saturating_sub(1) as f64),
            Guarantee::Approx { epsilon, .. } => Some(epsilon),
            Guarantee::NotPrivate => None,
        }
    }

    /// The δ of the guarantee: 0 except for [`Guarantee::Approx`].
    pub fn delta(&self) -> f64 {
        match *self {
            Guarantee::Approx { delta, .. } => delta,
            _ => 0.0,
        }
    }

    /// Whether the guarantee is pure ε-DP for every k ([`Guarantee::Pure`]).
    pub fn is_pure(&self) -> bool {
        matches!(self, Guarantee::Pure { .. })
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
            Guarantee::Approx { epsilon, delta } => write!(f, "({epsilon}, {delta})-DP"),
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

    /// Whether the mechanism is ε-bounded-range at its ε (Durfee & Rogers 2019), hence
    /// ε²/8-zCDP (Cesar & Rogers 2021). Only a mechanism with a written proof says yes
    /// (docs/ledger.md, "Composition"); the ledger's tighter accountant refuses the others.
    fn bounded_range(&self) -> bool {
        false
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

    /// Prepares `mech` on `problem` for one selection in `mode` ([`Mechanism::prepare`] rather than
    /// `prepare_many` in fast mode: cheaper when only one item is drawn, as when serving).
    pub fn single(mech: &'a dyn Mechanism, problem: &Problem<'a>, mode: NoiseMode) -> Result<Self> {
        Ok(match mode {
            NoiseMode::Fast => Selector::Fast(mech.prepare(problem)),
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

    /// [`Selector::sample`] for each of `trials` in order, passing `(trial, selection)` to `each`:
    /// the same selections, with the stream key of (`mech_id`, `eps_index`, `user`) set up once
    /// rather than once per trial in fast mode.
    pub fn sample_trials(
        &self,
        draws: &mut Draws,
        mech_id: u32,
        eps_index: u32,
        user: u64,
        trials: std::ops::Range<u32>,
        mut each: impl FnMut(u32, usize),
    ) {
        match (self, draws) {
            (Selector::Fast(p), Draws::Seeded(streams)) => {
                let users = UserStreams::new(streams, mech_id, eps_index, user);
                for t in trials {
                    each(t, p.sample(&mut users.trial(t)));
                }
            }
            (Selector::Secure(p), Draws::Secure(rng)) => {
                for t in trials {
                    each(t, p.sample(rng));
                }
            }
            _ => panic!("Selector and Draws of different noise modes"),
        }
    }
}

/// Unchecked mechanism parameters; [`build`] validates them for the mechanism that uses them.
/// The named fields are the built-in mechanisms' parameters; `extra` holds the parameters that
/// other mechanisms declare ([`MechanismSpec::extra_params`]), read through [`MechParams::get`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Values of declared extra parameters by name ([`ParamSpec`]); missing ones take their
    /// default. Written as `params = { name = value }` in pipelines and resolved configurations.
    #[serde(rename = "params", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
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
            extra: BTreeMap::new(),
        }
    }
}

impl MechParams {
    /// These parameters with another ε.
    pub fn with_epsilon(&self, epsilon: f64) -> Self {
        let mut p = self.clone();
        p.epsilon = epsilon;
        p
    }

    /// These parameters with the extra parameter `name` set to `value` (checked when a
    /// mechanism that declares it is built).
    pub fn with_param(mut self, name: &str, value: f64) -> Self {
        self.extra.insert(name.to_string(), value);
        self
    }

    /// The value of the declared parameter `spec`: the one given in `extra`, else its default;
    /// an error naming the parameter and the value if it breaks `spec`'s requirement.
    pub fn get(&self, spec: &ParamSpec) -> Result<f64> {
        let value = self.extra.get(spec.name).copied().unwrap_or(spec.default);
        spec.check(value)
    }
}

/// The type of a declared parameter: a real or an integer in a closed range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A finite real in `[min, max]`.
    Real {
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
    /// An integer in `[min, max]`.
    Integer {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
}

/// A parameter a mechanism declares besides ε (docs/extending.md): its name (the key in
/// [`MechParams::extra`] and in a pipeline's `params` table), meaning, default and type. The
/// runners, the resolved configurations and the `mechanisms` listing read these declarations,
/// so a new parameter needs no edit outside the mechanism's own file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    /// Key, e.g. `"alpha"`.
    pub name: &'static str,
    /// Meaning, one line.
    pub doc: &'static str,
    /// Value when none is given.
    pub default: f64,
    /// Type and range.
    pub kind: ParamKind,
}

impl ParamSpec {
    /// A real parameter in `[min, max]`.
    pub const fn real(
        name: &'static str,
        doc: &'static str,
        default: f64,
        min: f64,
        max: f64,
    ) -> Self {
        ParamSpec {
            name,
            doc,
            default,
            kind: ParamKind::Real { min, max },
        }
    }

    /// An integer parameter in `[min, max]`.
    pub const fn integer(
        name: &'static str,
        doc: &'static str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Self {
        ParamSpec {
            name,
            doc,
            default: default as f64,
            kind: ParamKind::Integer { min, max },
        }
    }

    /// `value` if it meets the requirement, else an error naming the parameter and the value.
    pub fn check(&self, value: f64) -> Result<f64> {
        let ok = match self.kind {
            ParamKind::Real { min, max } => value.is_finite() && value >= min && value <= max,
            ParamKind::Integer { min, max } => {
                value.fract() == 0.0 && value >= min as f64 && value <= max as f64
            }
        };
        if ok {
            Ok(value)
        } else {
            Err(Error::Invalid(format!(
                "parameter {} must be {}, got {value}",
                self.name,
                self.requirement()
            )))
        }
    }

    /// The requirement in words, e.g. `a real in [0, 1]`.
    pub fn requirement(&self) -> String {
        match self.kind {
            ParamKind::Real { min, max } => format!("a real in [{min}, {max}]"),
            ParamKind::Integer { min, max } => format!("an integer in [{min}, {max}]"),
        }
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

/// A running maximum over offered `(value, index)` records, ties broken uniformly at random by
/// the same reservoir rule as [`argmax_random_ties`] (the j-th tied record replaces the
/// incumbent with probability 1/j), for loops whose records are not the candidates 0..k in
/// order (random stopping draws candidates at random) or whose values are not `f64` (the secure
/// path's exact integers). `below(n)` is a uniform draw from `0..n`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunningMax<T> {
    best: T,
    index: usize,
    ties: u64,
}

impl<T: PartialOrd + Copy> RunningMax<T> {
    /// No record yet; `lowest` is never compared (the first record always wins).
    pub(crate) fn new(lowest: T) -> Self {
        RunningMax {
            best: lowest,
            index: 0,
            ties: 0,
        }
    }

    /// Offers record `index` with `value`; draws from `below` only on a tie.
    #[inline]
    pub(crate) fn offer(&mut self, value: T, index: usize, below: impl FnOnce(u64) -> u64) {
        if value > self.best || self.ties == 0 {
            self.best = value;
            self.index = index;
            self.ties = 1;
        } else if value == self.best {
            self.ties += 1;
            if below(self.ties) == 0 {
                self.index = index;
            }
        }
    }

    /// The index of the winning record (0 when none was offered).
    pub(crate) fn index(&self) -> usize {
        self.index
    }
}

/// One registry entry: how to list, document and build a mechanism. Code outside the crate
/// writes one as a struct literal (a `static` or a value) and adds it to a [`Registry`].
pub struct MechanismSpec {
    /// CLI name.
    pub name: &'static str,
    /// The guarantee in words.
    pub guarantee: &'static str,
    /// Whether it claims any differential privacy.
    pub private: bool,
    /// Built-in parameters ([`MechParams`] fields) it reads besides ε.
    pub params: &'static [&'static str],
    /// Parameters it declares itself, read with [`MechParams::get`] (empty for the built-ins).
    pub extra_params: &'static [ParamSpec],
    /// One-line description.
    pub summary: &'static str,
    /// When to choose it (docs/deployment.md, "Which mechanism for my data").
    pub use_when: &'static str,
    /// An audit reference: a mechanism that is deliberately not ε-DP, kept to show that
    /// `recsel audit` catches a real violation. Not part of `all`.
    pub audit_reference: bool,
    /// Validates the parameters and builds the mechanism (a function or a closure that captures
    /// nothing).
    pub build: fn(&MechParams) -> Result<Box<dyn Mechanism>>,
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

    /// Whether `all` includes it: every entry but the audit references and the built-ins that
    /// run only when named ([`private_candidates::scores::NAMED_ONLY`]).
    pub fn in_all(&self) -> bool {
        !self.audit_reference && !private_candidates::scores::NAMED_ONLY.contains(&self.name)
    }
}

/// `m` boxed as a trait object: the usual last step of a [`MechanismSpec::build`] function.
pub fn boxed<M: Mechanism + 'static>(m: Result<M>) -> Result<Box<dyn Mechanism>> {
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
        extra_params: &[],
        summary: "Report Noisy Max: argmax q_a + Exp(mean 2*Delta/eps), Delta = max sensitivity",
        use_when: "a safe default; equal sensitivities",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Exponential, false, p.epsilon)),
    },
    MechanismSpec {
        name: "pf",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        extra_params: &[],
        summary: "permute-and-flip (McKenna-Sheldon 2020); same distribution as rnm",
        use_when: "as rnm (the same distribution)",
        audit_reference: false,
        build: |p| boxed(PermuteAndFlip::new(p.epsilon)),
    },
    MechanismSpec {
        name: "em",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        extra_params: &[],
        summary: "exponential mechanism: P(a) proportional to exp(eps*q_a/(2*Delta))",
        use_when: "as rnm (the same choice, in log space)",
        audit_reference: false,
        build: |p| boxed(ExponentialMechanism::new(p.epsilon)),
    },
    MechanismSpec {
        name: "rnm-laplace",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        extra_params: &[],
        summary: "argmax q_a + Lap(2*Delta/eps)",
        use_when: "comparison only (rnm does better)",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Laplace, false, p.epsilon)),
    },
    MechanismSpec {
        name: "rnmh",
        guarantee: "not private (reference only)",
        private: false,
        params: &[],
        extra_params: &[],
        summary: "heterogeneous RNM: argmax q_a + Exp(mean 2*Delta_a/eps); NOT DP for any eps",
        use_when: "never: not private",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Exponential, true, p.epsilon)),
    },
    MechanismSpec {
        name: "rnmh-laplace",
        guarantee: "(k-1)*eps-DP only (reference only)",
        private: true,
        params: &[],
        extra_params: &[],
        summary: "heterogeneous Laplace noisy max: argmax q_a + Lap(Delta_a/eps)",
        use_when: "never: only (k-1)*eps-DP",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Laplace, true, p.epsilon)),
    },
    MechanismSpec {
        name: "rs",
        guarantee: "eps-DP",
        private: true,
        params: &["gamma"],
        extra_params: &[],
        summary: "random stopping RS_gamma (Liu-Talwar): K ~ Geometric(gamma) uniform draws, \
                  each q_a + Lap(3*Delta_a/eps), best recorded",
        use_when: "comparison (gem/mgem usually do better)",
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
        extra_params: &[],
        summary: "improved random stopping (Papernot-Steinke): K ~ truncated negative binomial, \
                  noise Lap((2+eta)*Delta_a/eps)",
        use_when: "as rs, with less noise per draw",
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
        extra_params: &[],
        summary: "RS_gamma with one-sided Exp(mean 3*Delta_a/eps) noise; eps-DP (seed 001 \
                  appendix B's proof of the contrary is wrong, docs/mechanisms.md)",
        use_when: "as rs, with one-sided noise",
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
    private_candidates::scores::RS_THRESHOLD,
    private_candidates::scores::RS_HARD,
    private_candidates::scores::RS_HARD_DELTA,
    MechanismSpec {
        name: "gem",
        guarantee: "eps-DP",
        private: true,
        params: &["beta"],
        extra_params: &[],
        summary: "generalised exponential mechanism (Raskhodnikova-Smith), t = 2 ln(k/beta)/eps",
        use_when: "Spearman(q, Delta) mostly negative",
        audit_reference: false,
        build: |p| boxed(Gem::new(GemVariant::Gem, p.epsilon, p.beta)),
    },
    MechanismSpec {
        name: "mgem",
        guarantee: "eps-DP",
        private: true,
        params: &["beta"],
        extra_params: &[],
        summary: "modified GEM, t = -2 ln(k/beta)/eps",
        use_when: "Spearman(q, Delta) mostly positive",
        audit_reference: false,
        build: |p| boxed(Gem::new(GemVariant::Modified, p.epsilon, p.beta)),
    },
    MechanismSpec {
        name: "cgem",
        guarantee: "eps-DP",
        private: true,
        params: &["beta", "c", "chooser"],
        extra_params: &[],
        summary: "combined GEM: randomised-response bit [corr(q, Delta) >= 0] with c*eps, \
                  then mgem (bit 1) or gem (bit 0) with (1-c)*eps",
        use_when: "Spearman mixed or polarised across users",
        audit_reference: false,
        build: |p| boxed(CombinedGem::new(p.epsilon, p.beta, p.c, p.chooser)),
    },
    MechanismSpec {
        name: "krr",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        extra_params: &[],
        summary: "k-randomised response: the argmax with probability e^eps/(e^eps+k-1)",
        use_when: "e^eps >> k (large eps, few candidates)",
        audit_reference: false,
        build: |p| boxed(KRandomizedResponse::new(p.epsilon)),
    },
    MechanismSpec {
        name: "random",
        guarantee: "0-DP",
        private: true,
        params: &[],
        extra_params: &[],
        summary: "uniform over the k candidates (ignores scores)",
        use_when: "the floor every mechanism must beat",
        audit_reference: false,
        build: |p| boxed(UniformRandom::new(p.epsilon)),
    },
    MechanismSpec {
        name: "bot-exp",
        guarantee: "not private (audit reference)",
        private: false,
        params: &["draws"],
        extra_params: &[],
        summary: "best of T uniform draws with Exp(mean 3*Delta_a/eps) noise and no random \
                  stopping; NOT DP: loss ln[(1+p)^T - p^T], p = 1 - e^(-eps/3)",
        use_when: "audits only",
        audit_reference: true,
        build: |p| boxed(RandomStopping::best_of(p.epsilon, p.draws)),
    },
    MechanismSpec {
        name: "rs-exp-m1",
        guarantee: "claims eps-DP; is 3*eps-DP",
        private: false,
        params: &["gamma"],
        extra_params: &[],
        summary: "rs-exp with noise multiplier 1 instead of 3 while claiming eps: the audit \
                  must report a violation",
        use_when: "audits only",
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
    private_candidates::scores::RS_THRESHOLD_EPS0,
    private_candidates::scores::RS_HARD_EPS0,
];

/// A set of mechanisms the runners can choose from by name: the built-ins ([`REGISTRY`]) plus any
/// registered by the caller (docs/extending.md). Cheap to clone; runners take one in their
/// configuration ([`crate::experiments::real::SelectConfig::registry`],
/// [`crate::experiments::SynthConfig::registry`]), and default to the built-ins.
#[derive(Clone)]
pub struct Registry {
    entries: Vec<&'static MechanismSpec>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|s| s.name))
            .finish()
    }
}

impl PartialEq for Registry {
    fn eq(&self, other: &Self) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|(a, b)| std::ptr::eq(*a, *b))
    }
}

impl Registry {
    /// The built-in mechanisms, in the order of docs/mechanisms.md.
    pub fn builtin() -> Self {
        Registry {
            entries: REGISTRY.iter().collect(),
        }
    }

    /// Adds `spec` after the existing entries. Errors if the name is taken, empty, `all`, or
    /// contains a comma or whitespace (names are list items on the command line and in
    /// pipelines), or if an extra parameter is declared twice, shadows a built-in parameter or
    /// has an invalid default. A spec given by value is kept for the rest of the program
    /// (registrations are program-wide, like the built-ins).
    pub fn register(&mut self, spec: impl Into<SpecRef>) -> Result<&mut Self> {
        let spec = spec.into().0;
        let name = spec.name;
        if name.is_empty()
            || name == "all"
            || name.contains(|c: char| c == ',' || c.is_whitespace())
        {
            return Err(Error::Invalid(format!(
                "mechanism name '{name}' is not usable: non-empty, not 'all', no comma or space"
            )));
        }
        if self.entries.iter().any(|s| s.name == name) {
            return Err(Error::Invalid(format!(
                "a mechanism named '{name}' is already registered"
            )));
        }
        const BUILTIN_PARAMS: [&str; 7] =
            ["epsilon", "gamma", "beta", "eta", "c", "chooser", "draws"];
        for (i, p) in spec.extra_params.iter().enumerate() {
            if BUILTIN_PARAMS.contains(&p.name)
                || spec.extra_params[..i].iter().any(|q| q.name == p.name)
            {
                return Err(Error::Invalid(format!(
                    "mechanism '{name}': parameter '{}' is declared twice or shadows a built-in parameter",
                    p.name
                )));
            }
            p.check(p.default).map_err(|e| {
                Error::Invalid(format!("mechanism '{name}': default of {}: {e}", p.name))
            })?;
        }
        self.entries.push(spec);
        Ok(self)
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'static MechanismSpec> + '_ {
        self.entries.iter().copied()
    }

    /// The comma-separated list of valid names, for error messages.
    pub fn valid_names(&self) -> String {
        self.entries
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Result<&'static MechanismSpec> {
        self.entries
            .iter()
            .copied()
            .find(|s| s.name == name)
            .ok_or_else(|| Error::UnknownName {
                kind: "mechanism",
                name: name.to_string(),
                valid: self.valid_names(),
            })
    }

    /// Validates `params` and builds the mechanism called `name`.
    pub fn build(&self, name: &str, params: &MechParams) -> Result<Box<dyn Mechanism>> {
        self.get(name)?.build(params)
    }

    /// Parses `all` (every entry but the audit references and the named-only built-ins,
    /// [`MechanismSpec::in_all`]) or a comma-separated list of names into entries, in the given
    /// order.
    pub fn parse_list(&self, list: &str) -> Result<Vec<&'static MechanismSpec>> {
        if list.trim() == "all" {
            return Ok(self.iter().filter(|s| s.in_all()).collect());
        }
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let s = self.get(name)?;
            if !out.iter().any(|o: &&MechanismSpec| o.name == s.name) {
                out.push(s);
            }
        }
        if out.is_empty() {
            return Err(Error::Invalid(format!(
                "no mechanism named in '{list}'; valid names: all, {}",
                self.valid_names()
            )));
        }
        Ok(out)
    }
}

impl Registry {
    /// The names a run of `list` uses, in order: [`Registry::parse_list`], except that `all` in
    /// secure mode leaves out the mechanisms without a secure path (`rnmh`, `rnmh-laplace`: they
    /// claim no ε-DP; docs/secure.md) instead of failing on them.
    pub fn run_names(&self, list: &str, secure: bool) -> Result<Vec<String>> {
        let has_secure_path = |s: &MechanismSpec| {
            s.build(&MechParams::default())
                .and_then(|m| m.secure_epsilon())
                .is_ok()
        };
        Ok(self
            .parse_list(list)?
            .into_iter()
            .filter(|s| !(secure && list.trim() == "all") || has_secure_path(s))
            .map(|s| s.name.to_string())
            .collect())
    }
}

/// Checks that every extra parameter in `params` is declared by one of `specs` (a misspelt key
/// would otherwise silently leave the default in place).
pub fn check_extra_params(specs: &[&MechanismSpec], params: &MechParams) -> Result<()> {
    for key in params.extra.keys() {
        if !specs
            .iter()
            .any(|s| s.extra_params.iter().any(|p| p.name == key))
        {
            let declared: Vec<&str> = specs
                .iter()
                .flat_map(|s| s.extra_params.iter().map(|p| p.name))
                .collect();
            return Err(Error::Invalid(format!(
                "parameter '{key}' is not declared by any mechanism of this run (declared: {})",
                if declared.is_empty() {
                    "none".to_string()
                } else {
                    declared.join(", ")
                }
            )));
        }
    }
    Ok(())
}

/// A registry entry that lives for the whole program: a `&'static MechanismSpec`, or a spec
/// given by value (then leaked, once per registration).
pub struct SpecRef(&'static MechanismSpec);

impl From<&'static MechanismSpec> for SpecRef {
    fn from(s: &'static MechanismSpec) -> Self {
        SpecRef(s)
    }
}

impl From<MechanismSpec> for SpecRef {
    fn from(s: MechanismSpec) -> Self {
        SpecRef(Box::leak(Box::new(s)))
    }
}

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
        return Ok(REGISTRY.iter().filter(|s| s.in_all()).collect());
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
