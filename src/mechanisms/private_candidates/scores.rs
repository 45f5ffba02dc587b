//! Selection from private candidates on score vectors: the registry's `rs-threshold`, `rs-hard`
//! and `rs-hard-delta` and their audit references (docs/private-candidates.md, "On score
//! vectors").
//!
//! One run Q draws a candidate a uniformly from the k candidates and scores it
//! `q_a + Lap(Δ_a/ε₀)`; the pair (a, noisy score) is ε₀-DP (the Laplace mechanism on one score of
//! sensitivity Δ_a; a is drawn independently of the data). The mechanisms differ in how they stop
//! and what they release, and spend ε₀ so that the theorem's total is the ε they are built with:
//!
//! | name | runs | releases | ε₀ for a total ε | guarantee |
//! |---|---|---|---|---|
//! | `rs-threshold` | K ~ Geometric(γ), at most T (T = 0: no cap) | the first run with noisy score ≥ τ; ⊥ if none (`Prepared::sample_outcome`; `sample` puts a uniform candidate in its place) | ε/2 (no cap), else max(ε/T, (ε − x_T)/2) | ε-DP (Theorem 3.1) |
//! | `rs-hard` | min(K, T), K ~ Geometric(γ) | the best run | max(ε/T, (ε − x'_T)/3) | ε-DP (Theorem 3.5) |
//! | `rs-hard-delta` | min(K, T) | the best run | ε/3 | (ε, (1 + e^ε)(1−γ)^T)-DP (Theorem 3.4) |
//! | `rs-threshold-eps0`, `rs-hard-eps0` (audit references) | as above | as above | ε (all of it) | claim ε; are 2ε / about 3ε |
//!
//! x_T and x'_T are the extra terms of the hard stop (accounting.rs). ⊥ is an output of
//! `rs-threshold` ([`Mechanism::may_release_bottom`]); where a candidate must be named
//! (`Prepared::sample`) a uniform one stands in for it: post-processing that does not look at the
//! data (docs/private-candidates.md, "⊥ is an output").
//!
//! Noise is Laplace only: a score with one-sided exponential noise is not ε₀-DP by itself (its
//! support moves with the score), so the theorems, which need an ε₀-DP run, do not cover it —
//! `rs-exp`'s guarantee has its own proof (docs/mechanisms.md).
//!
//! Secure path (docs/secure.md): the problem on the power-of-two grid, ε₀ from the secure ε'
//! rounded down onto the 2^−64 grid, K from the exact geometric sampler, uniform candidates as exact
//! integers, discrete Laplace noise of rate ε₀/D_a, τ rounded up onto the grid (a public value);
//! the reported ε is the theorem's total at that ε₀ (never above ε').

use rand::Rng as _;

use super::{accounting, PrivateSelection, SelectionParams, Stopping};
use crate::error::{Error, Result};
use crate::mechanisms::secure::{Grid, SecureEpsilon, SecurePrepared};
use crate::mechanisms::{
    boxed, check_epsilon, Bound, Guarantee, MechParams, Mechanism, MechanismSpec, ParamSpec,
    Prepared, Problem, GAMMA,
};
use crate::numerics::distributions::{exp1, index_and_sign};
use crate::numerics::exact::discrete_laplace;
use crate::rng::{Rng, SecureRng};

/// The known threshold τ of `rs-threshold` (a public value on the scores' scale).
pub const THRESHOLD: ParamSpec = ParamSpec::real_in(
    "threshold",
    "known threshold tau of rs-threshold: release the first run whose noisy score is >= tau",
    0.0,
    Bound::Unbounded,
    Bound::Unbounded,
);

/// The hard stop T of `rs-threshold`, `rs-hard` and `rs-hard-delta`; 0 (the default) leaves
/// each its own: no hard stop for `rs-threshold`, [`DEFAULT_HARD_STOP`] for the others.
pub const MAX_RUNS: ParamSpec = ParamSpec::integer(
    "max_runs",
    "hard stop T: at most T runs (0: the mechanism's default, none for rs-threshold and 200 for \
     rs-hard and rs-hard-delta)",
    0,
    0,
    1 << 40,
);

/// The hard stop T of `rs-hard` and `rs-hard-delta` when [`MAX_RUNS`] is 0.
pub const DEFAULT_HARD_STOP: u64 = 200;

/// Built-ins that run only when named, never as part of `all`: the selections from private
/// candidates are not mechanisms of seed 001, whose figures `all` reproduces.
pub const NAMED_ONLY: [&str; 5] = [
    "rs-threshold",
    "rs-hard",
    "rs-hard-delta",
    "svt",
    "rs-margin",
];

/// The registry entry of `rs-threshold`: the known threshold (Theorem 3.1) on score vectors.
pub const RS_THRESHOLD: MechanismSpec = MechanismSpec {
    name: "rs-threshold",
    guarantee: "eps-DP",
    private: true,
    params: &[GAMMA, THRESHOLD, MAX_RUNS],
    summary: "known threshold (Liu-Talwar 3.1): uniform draws with Lap(Delta_a/eps0), the \
              first noisy score >= threshold released (else a uniform candidate); stop with \
              prob. gamma after each miss, at most max_runs; eps0 ~ eps/2",
    use_when: "a known score level suffices (named only)",
    audit_reference: false,
    build: |p| {
        boxed(CandidateSelection::from_params(
            Variant::Threshold,
            p,
            false,
        ))
    },
};

/// The registry entry of `rs-hard`: the hard stop with the pure statement (Theorem 3.5).
pub const RS_HARD: MechanismSpec = MechanismSpec {
    name: "rs-hard",
    guarantee: "eps-DP",
    private: true,
    params: &[GAMMA, MAX_RUNS],
    summary: "random stopping with a hard stop (Liu-Talwar 3.5): min(Geometric(gamma), \
              max_runs) uniform draws with Lap(Delta_a/eps0), best released; eps0 ~ eps/3",
    use_when: "as rs, at most T draws (named only)",
    audit_reference: false,
    build: |p| boxed(CandidateSelection::from_params(Variant::HardStop, p, false)),
};

/// The registry entry of `rs-hard-delta`: the hard stop with the (ε, δ) statement (Theorem 3.4).
pub const RS_HARD_DELTA: MechanismSpec = MechanismSpec {
    name: "rs-hard-delta",
    guarantee: "(eps, delta)-DP",
    private: true,
    params: &[GAMMA, MAX_RUNS],
    summary: "rs-hard with the approximate statement (Liu-Talwar 3.4): eps0 = eps/3, \
              delta = (1 + e^eps)(1-gamma)^max_runs",
    use_when: "comparison only; (eps, delta) (named only)",
    audit_reference: false,
    build: |p| {
        boxed(CandidateSelection::from_params(
            Variant::HardStopDelta,
            p,
            false,
        ))
    },
};

/// The registry entry of `rs-threshold-eps0`: audit reference that reports ε₀ instead of Theorem 3.1's total.
pub const RS_THRESHOLD_EPS0: MechanismSpec = MechanismSpec {
    name: "rs-threshold-eps0",
    guarantee: "claims eps-DP; is 2*eps-DP",
    private: false,
    params: &[GAMMA, THRESHOLD, MAX_RUNS],
    summary: "rs-threshold spending all of eps on every run (Lap(Delta_a/eps)) while \
              claiming eps: the total of Theorem 3.1 is 2*eps; the audit must report it",
    use_when: "audits only",
    audit_reference: true,
    build: |p| boxed(CandidateSelection::from_params(Variant::Threshold, p, true)),
};

/// The registry entry of `rs-hard-eps0`: audit reference that reports ε₀ instead of Theorem 3.5's total.
pub const RS_HARD_EPS0: MechanismSpec = MechanismSpec {
    name: "rs-hard-eps0",
    guarantee: "claims eps-DP; is about 3*eps-DP",
    private: false,
    params: &[GAMMA, MAX_RUNS],
    summary: "rs-hard spending all of eps on every run while claiming eps: the total of \
              Theorem 3.5 is about 3*eps; the audit must report it",
    use_when: "audits only",
    audit_reference: true,
    build: |p| boxed(CandidateSelection::from_params(Variant::HardStop, p, true)),
};

/// Refuses a run that needs pure ε-DP (`run` names it in the message) if one of `specs` built
/// with `params` claims only (ε, δ)-DP (`rs-hard-delta`): [`Guarantee::refuse_approximate`].
pub fn refuse_approximate(specs: &[&MechanismSpec], params: &MechParams, run: &str) -> Result<()> {
    for spec in specs {
        if let Ok(m) = spec.build(params) {
            m.guarantee().refuse_approximate(spec.name, run)?;
        }
    }
    Ok(())
}

/// Which selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `rs-threshold`: known threshold (§3.1).
    Threshold,
    /// `rs-hard`: hard stop with the pure statement (§3.5).
    HardStop,
    /// `rs-hard-delta`: hard stop with the (ε, δ) statement (§3.4).
    HardStopDelta,
}

/// A selection from private candidates on score vectors with validated parameters.
#[derive(Debug, Clone)]
pub struct CandidateSelection {
    name: &'static str,
    variant: Variant,
    epsilon: f64,
    gamma: f64,
    threshold: Option<f64>,
    max_runs: Option<u64>,
    /// What one run spends: the calibrated ε₀ (or all of ε for the audit references).
    selection: PrivateSelection,
    guarantee: Guarantee,
    /// Whether ε₀ is the whole ε (the audit references that understate their total).
    spends_all: bool,
}

/// The ε₀ of one run for a total ε (module docs' table).
fn calibrate(variant: Variant, epsilon: f64, gamma: f64, max_runs: Option<u64>) -> f64 {
    match (variant, max_runs) {
        (Variant::Threshold, None) => epsilon / 2.0,
        (Variant::Threshold, Some(t)) => {
            (epsilon / t as f64).max((epsilon - accounting::threshold_extra(gamma, t)) / 2.0)
        }
        (Variant::HardStop, Some(t)) => {
            (epsilon / t as f64).max((epsilon - accounting::hard_stop_extra(gamma, t)) / 3.0)
        }
        (Variant::HardStopDelta, _) | (Variant::HardStop, None) => epsilon / 3.0,
    }
}

impl CandidateSelection {
    /// Validates ε (finite, > 0), γ (in (0, 1]), τ (finite, `Threshold` only) and T (≥ 1; `None`
    /// only for `Threshold`), and calibrates ε₀ so that the theorem's total is ε. `spends_all`
    /// builds the audit reference that spends ε on every run and still claims ε.
    pub fn new(
        variant: Variant,
        epsilon: f64,
        gamma: f64,
        threshold: Option<f64>,
        max_runs: Option<u64>,
        spends_all: bool,
    ) -> Result<Self> {
        check_epsilon(epsilon)?;
        if (variant == Variant::Threshold) != threshold.is_some() {
            return Err(Error::Invalid(
                "a threshold is given exactly for rs-threshold".into(),
            ));
        }
        if variant != Variant::Threshold && max_runs.is_none() {
            return Err(Error::InvalidParameter {
                name: "max_runs",
                requirement: ">= 1 for a hard stop",
                value: 0.0,
            });
        }
        let eps0 = if spends_all {
            epsilon
        } else {
            calibrate(variant, epsilon, gamma, max_runs)
        };
        let mut params = SelectionParams::new(Stopping::Geometric { gamma }, eps0);
        params.threshold = threshold;
        params.max_runs = max_runs;
        let selection = params.check()?;
        let guarantee = match variant {
            Variant::HardStopDelta => {
                let s = selection
                    .statements()
                    .iter()
                    .filter(|s| s.epsilon <= epsilon * (1.0 + 1e-12))
                    .min_by(|a, b| a.delta.total_cmp(&b.delta))
                    .copied()
                    .ok_or_else(|| {
                        Error::Invalid(format!("no (eps, delta) statement at eps = {epsilon}"))
                    })?;
                if s.delta > 0.0 {
                    Guarantee::Approx {
                        epsilon,
                        delta: s.delta,
                    }
                } else {
                    Guarantee::Pure { epsilon }
                }
            }
            _ => Guarantee::Pure { epsilon },
        };
        if !spends_all {
            let g = selection.guarantee();
            debug_assert!(
                variant == Variant::HardStopDelta
                    || (g.delta == 0.0 && g.epsilon <= epsilon * (1.0 + 1e-12)),
                "{variant:?}: calibrated to {g:?} for eps = {epsilon}"
            );
        }
        let name = match (variant, spends_all) {
            (Variant::Threshold, false) => "rs-threshold",
            (Variant::Threshold, true) => "rs-threshold-eps0",
            (Variant::HardStop, false) => "rs-hard",
            (Variant::HardStop, true) => "rs-hard-eps0",
            (Variant::HardStopDelta, false) => "rs-hard-delta",
            (Variant::HardStopDelta, true) => "rs-hard-delta-eps0",
        };
        Ok(CandidateSelection {
            name,
            variant,
            epsilon,
            gamma,
            threshold,
            max_runs,
            selection,
            guarantee,
            spends_all,
        })
    }

    /// Builds `variant` from registry parameters: γ ([`GAMMA`]), τ ([`THRESHOLD`]) and T
    /// ([`MAX_RUNS`]; 0 is none for `Threshold`, [`DEFAULT_HARD_STOP`] for the hard stops).
    pub fn from_params(variant: Variant, p: &MechParams, spends_all: bool) -> Result<Self> {
        let t = p.get(&MAX_RUNS)? as u64;
        let (threshold, max_runs) = match variant {
            Variant::Threshold => (Some(p.get(&THRESHOLD)?), (t > 0).then_some(t)),
            _ => (None, Some(if t == 0 { DEFAULT_HARD_STOP } else { t })),
        };
        Self::new(
            variant,
            p.epsilon,
            p.get(&GAMMA)?,
            threshold,
            max_runs,
            spends_all,
        )
    }

    /// The selection from private candidates this mechanism runs (ε₀, stopping, its statements).
    pub fn selection(&self) -> &PrivateSelection {
        &self.selection
    }

    /// The ε₀ and the selection of the secure path: the calibration at the secure ε', ε₀ rounded
    /// down onto the 2^−64 grid (fine enough that the rounding costs nothing visible even when a
    /// run's share is ε'/T), returned as ε₀·2^64.
    fn secure_selection(&self) -> Result<(u128, PrivateSelection)> {
        let eps = SecureEpsilon::new(self.epsilon)?.value();
        let mut params = *self.selection.params();
        let mut eps0 = if self.spends_all {
            eps
        } else {
            calibrate(self.variant, eps, self.gamma, self.max_runs)
        };
        // The calibration's floating point may land an ulp above ε'; step down until the
        // theorem's total is at most ε'.
        if !self.spends_all {
            for _ in 0..64 {
                params.eps0 = eps0;
                let g = params.check()?.guarantee();
                if g.delta > 0.0 || g.epsilon <= eps {
                    break;
                }
                eps0 *= 1.0 - 1e-15;
            }
        }
        let num = (eps0 * 2f64.powi(SECURE_EPS0_BITS)).floor();
        if num < 1.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                requirement: "large enough that one run's share is at least 2^-64 (secure mode)",
                value: self.epsilon,
            });
        }
        // `num` is an integer-valued float, so num / 2^64 is exactly the ε₀ the noise uses.
        params.eps0 = num / 2f64.powi(SECURE_EPS0_BITS);
        Ok((num as u128, params.check()?))
    }
}

/// Bits of the grid of ε₀ on the secure path: ε₀ = s/2^64, noise rate s/(D_a·2^64) per grid unit
/// (D_a ≤ 2^40, so every number fits in 128 bits).
const SECURE_EPS0_BITS: i32 = 64;

struct PreparedSelection<'a> {
    mech: &'a CandidateSelection,
    scores: &'a [f64],
    /// Δ_a / ε₀.
    scales: Vec<f64>,
}

impl Prepared for PreparedSelection<'_> {
    fn sample(&self, rng: &mut Rng) -> usize {
        self.sample_marked(rng).0
    }

    fn sample_marked(&self, rng: &mut Rng) -> (usize, bool) {
        // ⊥: a uniform candidate, chosen without looking at the data.
        match self.sample_outcome(rng) {
            Some(a) => (a, false),
            None => (rng.random_range(0..self.scores.len()), true),
        }
    }

    fn sample_outcome(&self, rng: &mut Rng) -> Option<usize> {
        let k = self.scores.len();
        let (best, _) = self
            .mech
            .selection
            .run_scores(self.mech.threshold, rng, |rng| {
                // Candidate and Laplace sign from one uniform draw, then the Exp(1) magnitude
                // (the law of a uniform candidate plus Lap(1) noise; docs/mechanisms.md).
                let (a, plus) = index_and_sign(rng, k);
                let e = exp1(rng);
                (
                    a,
                    self.scores[a] + self.scales[a] * if plus { e } else { -e },
                )
            });
        best.map(|(a, _)| a)
    }
}

struct SecureSelectionPrepared {
    selection: super::SecureSelection,
    q: Vec<i64>,
    /// Noise rate ε₀/D_a per grid unit as s / t_a with s = ε₀·2^64 and t_a = D_a·2^64.
    s: u128,
    t: Vec<u128>,
    threshold: Option<i128>,
}

impl SecurePrepared for SecureSelectionPrepared {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        self.sample_marked(rng).0
    }

    fn sample_marked(&self, rng: &mut SecureRng) -> (usize, bool) {
        match self.sample_outcome(rng) {
            Some(a) => (a, false),
            None => (rng.below(self.q.len() as u64) as usize, true),
        }
    }

    fn sample_outcome(&self, rng: &mut SecureRng) -> Option<usize> {
        let k = self.q.len() as u64;
        let (best, _) = self.selection.run_scores(self.threshold, rng, |rng| {
            let a = rng.below(k) as usize;
            (
                a,
                i128::from(self.q[a]) + discrete_laplace(rng, self.s, self.t[a]),
            )
        });
        best.map(|(a, _)| a)
    }
}

impl Mechanism for CandidateSelection {
    fn name(&self) -> &'static str {
        self.name
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        self.guarantee
    }

    fn may_release_bottom(&self) -> bool {
        self.variant == Variant::Threshold
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let eps0 = self.selection.params().eps0;
        Box::new(PreparedSelection {
            mech: self,
            scores: problem.scores(),
            scales: problem.sensitivities().iter().map(|d| d / eps0).collect(),
        })
    }

    fn secure_epsilon(&self) -> Result<f64> {
        let (_, sel) = self.secure_selection()?;
        if self.spends_all {
            // The audit reference claims the whole (rounded) ε, as on the float path.
            return Ok(SecureEpsilon::new(self.epsilon)?.value());
        }
        let statement = match self.guarantee {
            Guarantee::Approx { .. } => sel
                .statements()
                .iter()
                .filter(|s| s.delta > 0.0)
                .min_by(|a, b| a.epsilon.total_cmp(&b.epsilon))
                .copied()
                .unwrap_or(sel.guarantee()),
            _ => sel.guarantee(),
        };
        Ok(statement.epsilon)
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        let (num, sel) = self.secure_selection()?;
        let grid = Grid::new(problem);
        let one = 1u128 << SECURE_EPS0_BITS;
        let threshold = self.threshold.map(|tau| {
            // τ in grid units, rounded up: "Q ≥ τ" on the grid (a public value, no data).
            let x = grid.to_units(tau).ceil().clamp(-1e30, 1e30);
            x as i128
        });
        Ok(Box::new(SecureSelectionPrepared {
            selection: sel.secure()?,
            t: grid.d.iter().map(|&d| u128::from(d) * one).collect(),
            q: grid.q,
            s: num,
            threshold,
        }))
    }
}
