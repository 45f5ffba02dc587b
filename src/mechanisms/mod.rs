//! Private selection mechanisms (docs/mechanisms.md).
//!
//! Every mechanism is built from [`MechParams`] by a validating constructor (docs/ARCHITECTURE.md,
//! after linfa's `ParamGuard` and OpenDP's constructors): once built, it never re-checks its
//! parameters. A selection runs on a [`Problem`] — scores and per-candidate sensitivities that
//! were validated once — with a caller-supplied generator.
//!
//! A mechanism is one file: the type implementing [`Mechanism`] and the [`ParamSpec`]s of the
//! parameters it reads besides ε; and one entry in [`REGISTRY`] (`registry.rs`). The command
//! line, the Python package, the pipelines and the docs read the registry: names, guarantees
//! and parameters (`params.rs`: declared once, from which the flags, keyword arguments and table
//! keys derive). Code outside the crate adds a mechanism to a [`Registry`] value (built-ins plus
//! its own [`MechanismSpec`]) and hands that registry to the runners (docs/extending.md).
//!
//! Work that depends only on (scores, sensitivities, ε) — GEM's transformed scores, the
//! exponential mechanism's cumulative weights — is done once in [`Mechanism::prepare`]; repeated
//! trials on the same problem then only call [`Prepared::sample`].
//!
//! Every mechanism that claims ε-DP also has a *secure path* ([`Mechanism::prepare_secure`],
//! `--secure`, `docs/secure.md`): exact discrete noise on a power-of-two grid, drawn from an
//! OS-seeded [`crate::rng::SecureRng`]. Runners choose between the two with one value,
//! [`NoiseMode`], through [`Selector`].

use std::fmt;

use rand::Rng as _;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::rng::{Draws, NoiseMode, Rng, SecureRng, UserStreams};

pub mod batch;
mod cgem;
mod em;
pub mod gem;
mod krr;
pub mod list;
mod maxdraw;
mod options;
mod params;
mod peel;
mod pf;
pub mod private_candidates;
mod random;
mod registry;
mod rnm;
pub mod rs;
pub mod secure;

pub use cgem::{CombinedGem, C, CHOOSER};
pub use em::ExponentialMechanism;
pub use gem::{Gem, GemVariant, BETA};
pub use krr::KRandomizedResponse;
pub use list::{ListForm, ListGuarantee, TopK};
pub use options::{NoiseOptions, SampleOptions};
pub use params::{Bound, MechParams, MechValues, ParamKind, ParamSpec, ParamValue};
pub use pf::PermuteAndFlip;
pub use private_candidates::scores::{CandidateSelection, Variant};
pub use random::UniformRandom;
pub use registry::{
    boxed, build, parse_list, spec, valid_names, MechanismSpec, Registry, SpecRef, REGISTRY,
};
pub use rnm::{Noise, NoisyMax};
pub use rs::{RandomStopping, StoppingRule, DRAWS, ETA, GAMMA};
pub use secure::{Grid, SecureEpsilon, SecurePrepared};

/// A selection problem: scores `q_a` and sensitivities `Δ_a > 0` of k ≥ 1 candidates, validated once.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    scores: &'a [f64],
    sens: &'a [f64],
    max_sens: f64,
    max_score: f64,
    /// The candidates ordered by ascending sensitivity, when the caller knows it (serving with
    /// fixed sensitivities computes it once): GEM's hull then needs no sort.
    sens_order: Option<&'a [u32]>,
}

impl<'a> Problem<'a> {
    /// Validates the inputs: at least one candidate, equal lengths, finite scores, finite positive
    /// sensitivities. Errors name the first bad value.
    pub fn new(scores: &'a [f64], sens: &'a [f64]) -> Result<Self> {
        let (max_sens, max_score) = crate::numerics::check_problem(scores, sens)?;
        Ok(Problem {
            scores,
            sens,
            max_sens,
            max_score,
            sens_order: None,
        })
    }

    /// This problem with `order`, a permutation of the candidates by ascending sensitivity (ties
    /// in any order), known to the caller: the GEM family builds its hull from it without
    /// sorting. Same selections in distribution and, for a seed, the same selections.
    pub(crate) fn with_sens_order(mut self, order: &'a [u32]) -> Self {
        debug_assert_eq!(order.len(), self.sens.len());
        debug_assert!(order
            .windows(2)
            .all(|w| self.sens[w[0] as usize] <= self.sens[w[1] as usize]));
        self.sens_order = Some(order);
        self
    }

    /// The order given by [`Problem::with_sens_order`], if any.
    pub(crate) fn sens_order(&self) -> Option<&'a [u32]> {
        self.sens_order
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

    /// Refuses this guarantee of `mechanism` in a run that needs pure ε-DP (`run` names the run
    /// and why) if it is only (ε, δ)-DP ([`Guarantee::Approx`]): its rows or answers would read
    /// as ε-DP beside the others, and a budget of pure ε cannot pay for its δ.
    pub fn refuse_approximate(&self, mechanism: &str, run: &str) -> Result<()> {
        match self {
            Guarantee::Approx { .. } => Err(Error::Invalid(format!(
                "mechanism '{mechanism}' is {self}, not eps-DP: {run} needs pure eps-DP \
                 mechanisms (e.g. mgem, gem, cgem, rnm, or rs-hard for a hard stop with a pure \
                 guarantee)"
            ))),
            _ => Ok(()),
        }
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

    /// One selection that may release ⊥ (`None`): a mechanism that can give up (`rs-threshold`
    /// when no run reaches its threshold; [`Mechanism::may_release_bottom`]) says so here, and
    /// its [`Prepared::sample`] releases a uniformly random candidate in ⊥'s place (a choice that
    /// does not look at the data). Every other mechanism always names a candidate: by default
    /// this is [`Prepared::sample`], the same draws.
    fn sample_outcome(&self, rng: &mut Rng) -> Option<usize> {
        Some(self.sample(rng))
    }

    /// [`Prepared::sample`] with whether the selection was ⊥ (the candidate then is the uniform
    /// stand-in): the same draws as `sample`, so a runner can count ⊥ without changing what it
    /// measures.
    fn sample_marked(&self, rng: &mut Rng) -> (usize, bool) {
        (self.sample(rng), false)
    }
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

    /// Whether a selection can release ⊥ — nothing — ([`Prepared::sample_outcome`]): `true` for
    /// the known-threshold selections (`rs-threshold`), which give up when no run reaches the
    /// threshold (docs/private-candidates.md, "⊥ is an output").
    fn may_release_bottom(&self) -> bool {
        false
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

    /// The list forms it supports ([`ListForm::name`], docs/lists.md): `peeling` for every
    /// mechanism; a one-shot form only where a theorem covers this mechanism (`gumbel` for `em`,
    /// `laplace` for `rnm-laplace`).
    fn list_forms(&self) -> &'static [&'static str] {
        &["peeling"]
    }

    /// An ordered list of `min(k, n)` distinct candidates by **peeling**: k rounds of this
    /// mechanism as built (at its own ε per round), each over the candidates not chosen yet.
    /// Its guarantee is [`Mechanism::list_guarantee`]; a list at a total ε is a [`TopK`], whose
    /// rounds are built at ε/k.
    fn select_list(&self, problem: &Problem<'_>, k: usize, rng: &mut Rng) -> Vec<usize> {
        list::peel_fast(self, problem, k, rng)
    }

    /// [`Mechanism::select_list`] on the secure path: each round is
    /// [`Mechanism::prepare_secure`] on the candidates left. An error for a mechanism without a
    /// secure path.
    fn select_list_secure(
        &self,
        problem: &Problem<'_>,
        k: usize,
        rng: &mut SecureRng,
    ) -> Result<Vec<usize>> {
        list::peel_secure(self, problem, k, rng)
    }

    /// The guarantee of [`Mechanism::select_list`] on `n` candidates: basic composition of
    /// `min(k, n)` rounds of [`Mechanism::guarantee`], and for a bounded-range mechanism the
    /// zCDP of the rounds, `min(k, n)·ε²/8` (Cesar & Rogers 2021).
    fn list_guarantee(&self, k: usize, n: usize) -> ListGuarantee {
        let rounds = k.min(n);
        ListGuarantee {
            charged: list::compose_rounds(self.guarantee(), rounds, n),
            zcdp_rho: self
                .bounded_range()
                .then(|| rounds as f64 * self.epsilon() * self.epsilon() / 8.0),
        }
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

    /// [`Selector::sample`] that may release ⊥ (`None`; [`Prepared::sample_outcome`]), from the
    /// same stream.
    pub fn sample_outcome(
        &self,
        draws: &mut Draws,
        mech_id: u32,
        eps_index: u32,
        user: u64,
        trial: u32,
    ) -> Option<usize> {
        match (self, draws) {
            (Selector::Fast(p), Draws::Seeded(streams)) => {
                p.sample_outcome(&mut streams.stream(mech_id, eps_index, user, trial))
            }
            (Selector::Secure(p), Draws::Secure(rng)) => p.sample_outcome(rng),
            _ => panic!("Selector and Draws of different noise modes"),
        }
    }

    /// [`Selector::sample_trials`] passing `(trial, selection, was ⊥)` to `each`: the same
    /// selections (⊥'s place taken by the mechanism's uniform stand-in), marked.
    #[allow(clippy::too_many_arguments)]
    pub fn sample_trials_marked(
        &self,
        draws: &mut Draws,
        mech_id: u32,
        eps_index: u32,
        user: u64,
        trials: std::ops::Range<u32>,
        mut each: impl FnMut(u32, usize, bool),
    ) {
        match (self, draws) {
            (Selector::Fast(p), Draws::Seeded(streams)) => {
                let users = UserStreams::new(streams, mech_id, eps_index, user);
                for t in trials {
                    let (a, bottom) = p.sample_marked(&mut users.trial(t));
                    each(t, a, bottom);
                }
            }
            (Selector::Secure(p), Draws::Secure(rng)) => {
                for t in trials {
                    let (a, bottom) = p.sample_marked(rng);
                    each(t, a, bottom);
                }
            }
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

/// ε finite and > 0; the error names the value.
pub fn check_epsilon(epsilon: f64) -> Result<f64> {
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
    argmax_random_ties_seeing_best(k, rng, |a, r, _| value(a, r))
}

/// [`argmax_random_ties`] where `value(a, rng, best)` also sees the best value so far (−∞ for
/// the first): a candidate that cannot reach `best` may return any value below it instead of
/// its own — no comparison, tie draw or pick changes — so a caller can skip the work of one
/// that cannot win (peeling GEM's lazy scores, `peel.rs`).
#[inline]
pub(crate) fn argmax_random_ties_seeing_best(
    k: usize,
    rng: &mut Rng,
    mut value: impl FnMut(usize, &mut Rng, f64) -> f64,
) -> usize {
    let mut best = value(0, rng, f64::NEG_INFINITY);
    let mut best_index = 0;
    let mut ties = 1u32;
    for a in 1..k {
        let v = value(a, rng, best);
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
