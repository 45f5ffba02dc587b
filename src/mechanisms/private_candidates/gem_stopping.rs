//! The generalised exponential mechanism of Liu & Talwar's Theorem 5.2 (second part), derived from
//! random stopping: the registry's `rs-gem` (docs/private-candidates.md, "Theorem 5.2's family"),
//! and the utility statement of the theorem's first two parts ([`UtilityStatement`]).
//!
//! One run draws a candidate a uniformly and scores it `q_a − Δ_a·c/ε₀ + Lap(Δ_a/ε₀)`. The shift
//! `Δ_a·c/ε₀` is public (it depends on the declared sensitivities only), so the run is ε₀-DP and
//! the best of K ~ Geometric(γ) runs is 3ε₀-DP (Theorem 3.2); recsel spends ε₀ = ε/3.
//!
//! The shift c is chosen so that, except with a small probability, no run's noise exceeds it: every
//! released noisy score is then at most the candidate's true score, and the release's true score
//! is at least the noisy score of any candidate j's first draw, `q_j − Δ_j(c + L)/ε₀`. The error is
//! set by the sensitivity of the candidate one competes with, not by the largest one (the
//! exponential mechanism by random stopping, `rs`, pays `Δ_max(c + L)/ε₀`).
//!
//! The seed lost the theorem's constants; the statement here and its proof are recsel's, with the
//! failure probability β split in four: (1) more than n runs, `n = ⌈ln(β/4)/ln(1 − γ)⌉`, has
//! probability `(1 − γ)^n ≤ β/4`; (2) one of the first n runs' noise above `c·Δ_a/ε₀`, with
//! `c = ln(2n/β)`, has probability at most `n·½e^{−c} = β/4`; (3) candidate j never drawn has
//! probability `E[(1 − 1/k)^K]` ([`miss_probability`]), at most β/4 when
//! γ ≤ [`gamma_for`]`(k, β)`; (4) j's first draw's noise below `−L·Δ_j/ε₀`, `L = ln(2/β)`, has
//! probability β/4. Outside these events, for every j (tested in tests/theorem52.rs):
//!
//! * `rs-gem`: `q_out ≥ q_j − Δ_j·(c + L)/ε₀`;
//! * `rs` (no shift, noise above c possible only in event 2): `q_out ≥ q_j − Δ_max·(c + L)/ε₀`.

use rand::Rng as _;

use super::{PrivateSelection, SelectionParams, Stopping};
use crate::error::{Error, Result};
use crate::mechanisms::{
    boxed, check_epsilon, Guarantee, MechParams, Mechanism, MechanismSpec, Prepared, Problem, BETA,
    GAMMA,
};
use crate::numerics::distributions::laplace1;
use crate::rng::Rng;

/// The registry entry of `rs-gem`.
pub const RS_GEM: MechanismSpec = MechanismSpec {
    name: "rs-gem",
    guarantee: "eps-DP",
    private: true,
    params: &[GAMMA, BETA],
    summary: "generalised exponential mechanism by random stopping (Liu-Talwar 5.2): \
              Geometric(gamma) uniform draws scored q_a - Delta_a*c/eps0 + Lap(Delta_a/eps0), \
              eps0 = eps/3, c = ln(2n/beta) with n = ln(beta/4)/ln(1-gamma); best released",
    use_when: "unequal sensitivities, a high-probability guarantee (named only)",
    audit_reference: false,
    build: |p| boxed(GemSelection::from_params(p)),
};

/// The probability that a given candidate is never drawn among K ~ Geometric(γ) uniform draws
/// from k: `E[(1 − 1/k)^K] = γz/(1 − (1 − γ)z)`, z = 1 − 1/k.
pub fn miss_probability(k: usize, gamma: f64) -> f64 {
    let z = 1.0 - 1.0 / k as f64;
    gamma * z / (1.0 - (1.0 - gamma) * z)
}

/// The largest γ whose [`miss_probability`] over k candidates is at most β/4:
/// `b/((k − 1)(1 − b))`, b = β/4 (1 when k = 1).
pub fn gamma_for(k: usize, beta: f64) -> f64 {
    let b = beta / 4.0;
    if k <= 1 {
        return 1.0;
    }
    (b / ((k - 1) as f64 * (1.0 - b))).min(1.0)
}

/// Theorem 5.2's utility statement for random stopping with K ~ Geometric(γ) runs of
/// `Lap(Δ_a/ε₀)` noise over k uniform candidates: except with probability [`Self::failure`],
/// the release's true score is at least `q_j − coefficient·Δ_j` for every j (`rs-gem`), or
/// `q_j − coefficient·Δ_max` (`rs`, the exponential mechanism by random stopping).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UtilityStatement {
    /// The failure probability: `3β/4 + E[(1 − 1/k)^K]` (at most β when γ ≤ [`gamma_for`]).
    pub failure: f64,
    /// `(c + L)/ε₀` with `c = ln(2n/β)`, `L = ln(2/β)`.
    pub coefficient: f64,
    /// The shift c of `rs-gem`, in units of `Δ_a/ε₀`.
    pub shift: f64,
}

impl UtilityStatement {
    /// The statement for k candidates, runs of ε₀, stopping probability γ in (0, 1] and β in
    /// (0, 1).
    pub fn new(k: usize, eps0: f64, gamma: f64, beta: f64) -> Self {
        let shift = shift(gamma, beta);
        UtilityStatement {
            failure: 0.75 * beta + miss_probability(k, gamma),
            coefficient: (shift + (2.0 / beta).ln()) / eps0,
            shift,
        }
    }
}

/// The shift c = ln(2n/β), n = ⌈ln(β/4)/ln(1 − γ)⌉ (the number of runs exceeded with probability
/// at most β/4; n = 1 at γ = 1).
pub fn shift(gamma: f64, beta: f64) -> f64 {
    let n = if gamma >= 1.0 {
        1.0
    } else {
        ((beta / 4.0).ln() / (-gamma).ln_1p()).ceil().max(1.0)
    };
    (2.0 * n / beta).ln()
}

/// `rs-gem` with validated parameters.
#[derive(Debug, Clone)]
pub struct GemSelection {
    epsilon: f64,
    beta: f64,
    /// c, in units of `Δ_a/ε₀`.
    shift: f64,
    selection: PrivateSelection,
}

impl GemSelection {
    /// Validates ε (finite, > 0), γ (in (0, 1]) and β (in (0, 1)); one run spends ε₀ = ε/3.
    pub fn new(epsilon: f64, gamma: f64, beta: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        if !(beta > 0.0 && beta < 1.0) {
            return Err(Error::InvalidParameter {
                name: "beta",
                requirement: "in (0, 1)",
                value: beta,
            });
        }
        let selection =
            SelectionParams::new(Stopping::Geometric { gamma }, epsilon / 3.0).check()?;
        Ok(GemSelection {
            epsilon,
            beta,
            shift: shift(gamma, beta),
            selection,
        })
    }

    /// Builds it from registry parameters: γ ([`GAMMA`]) and β ([`BETA`]).
    pub fn from_params(p: &MechParams) -> Result<Self> {
        Self::new(p.epsilon, p.get(&GAMMA)?, p.get(&BETA)?)
    }

    /// The selection this mechanism runs (ε₀ = ε/3, γ and its statements).
    pub fn selection(&self) -> &PrivateSelection {
        &self.selection
    }

    /// The shift c, in units of `Δ_a/ε₀`.
    pub fn shift(&self) -> f64 {
        self.shift
    }

    /// The utility statement for k candidates (its failure probability is at most β when
    /// γ ≤ [`gamma_for`]`(k, β)`).
    pub fn utility(&self, k: usize) -> UtilityStatement {
        let p = self.selection.params();
        let Stopping::Geometric { gamma } = p.stopping else {
            unreachable!("rs-gem is geometric")
        };
        UtilityStatement::new(k, p.eps0, gamma, self.beta)
    }
}

struct PreparedGem<'a> {
    mech: &'a GemSelection,
    /// `q_a − Δ_a·c/ε₀`.
    shifted: Vec<f64>,
    /// `Δ_a/ε₀`.
    scales: Vec<f64>,
}

impl Prepared for PreparedGem<'_> {
    fn sample(&self, rng: &mut Rng) -> usize {
        self.sample_outcome(rng)
            .expect("the geometric rule makes at least one run")
    }

    fn sample_outcome(&self, rng: &mut Rng) -> Option<usize> {
        let k = self.shifted.len();
        let (best, _) = self.mech.selection.run_scores(None, rng, |rng| {
            let a = rng.random_range(0..k);
            (a, self.shifted[a] + self.scales[a] * laplace1(rng))
        });
        best.map(|(a, _)| a)
    }
}

impl Mechanism for GemSelection {
    fn name(&self) -> &'static str {
        "rs-gem"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.epsilon,
        }
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let eps0 = self.selection.params().eps0;
        let scales: Vec<f64> = problem.sensitivities().iter().map(|d| d / eps0).collect();
        Box::new(PreparedGem {
            mech: self,
            shifted: problem
                .scores()
                .iter()
                .zip(&scales)
                .map(|(q, s)| q - self.shift * s)
                .collect(),
            scales,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shift_bounds_the_runs_and_their_noise_by_beta_over_4_each() {
        let (gamma, beta) = (0.01, 0.1);
        let c = shift(gamma, beta);
        // c = ln(2n/β): n runs are exceeded with probability at most β/4, and not n − 1.
        let n = (beta * c.exp() / 2.0).round();
        assert!((1.0 - gamma).powf(n) <= beta / 4.0);
        assert!((1.0 - gamma).powf(n - 1.0) > beta / 4.0);
        assert!((n * 0.5 * (-c).exp() - beta / 4.0).abs() < 1e-12);
        // γ = gamma_for(k, β) leaves a miss probability of exactly β/4.
        for k in [2, 10, 100] {
            let g = gamma_for(k, beta);
            assert!((miss_probability(k, g) - beta / 4.0).abs() < 1e-12);
            let u = UtilityStatement::new(k, 0.5, g, beta);
            assert!((u.failure - beta).abs() < 1e-12);
        }
        assert!(GemSelection::new(1.0, 0.1, 0.0).is_err());
        assert!(GemSelection::new(1.0, 0.0, 0.1).is_err());
        assert_eq!(
            GemSelection::new(3.0, 0.1, 0.1)
                .unwrap()
                .selection()
                .params()
                .eps0,
            1.0
        );
    }
}
