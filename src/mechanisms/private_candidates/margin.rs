//! The margin mechanism of Liu & Talwar's Theorem 5.2 (third part), derived from random stopping:
//! the registry's `rs-margin` (docs/private-candidates.md, "Theorem 5.2's family").
//!
//! One run draws a candidate a uniformly and scores it `q_a + Z_a`, Z_a Laplace of scale
//! `b_a = Δ_a/ε₀` **conditioned on |Z_a| ≤ A_a**, with `A_a = b_a·w` and
//! `w = ln(1 + (e^{ε₀} − 1)/(2δ₀))`. The run is (ε₀, δ₀)-DP: both neighbours' noisy scores have the
//! same normaliser `2b_a(1 − e^{−w})`, so on the overlap of their supports the densities are within
//! e^{ε₀} (a shift of at most Δ_a = ε₀·b_a); outside the overlap lies at most an end interval of
//! width Δ_a, of mass `e^{−w}(e^{ε₀} − 1)/(2(1 − e^{−w}))`, which is δ₀ exactly for this w (the
//! truncated Laplace of Geng, Ding, Guo & Kumar; the paper's constant was lost in the seed's text,
//! this one is derived here). The best of `min(K, T)` runs, K ~ Geometric(γ), is then
//! (3ε₀, δ)-DP with δ from Theorem 3.4 and the approximate-DP runs
//! ([`super::PrivateSelection::statements`]); recsel spends ε₀ = ε/3.
//!
//! Why a margin mechanism: the noise is bounded, so if the best candidate a* leads every other b
//! by more than `A_{a*} + A_b`, any run that draws a* beats every other run — the release is a*
//! unless a* is never drawn, which has probability `E[(1 − 1/k)^{min(K,T)}]`
//! ([`MarginSelection::miss_probability`]), whatever the size of the lead beyond the margin. The
//! margin `2w·Δ/ε₀ ≈ (6Δ/ε)·ln(1 + ε/(6δ₀))` (small ε) does not grow with k (Smith & Thakurta
//! 2013 and Beimel, Nissim & Stemmer 2013 reach this kind of bound by propose-test-release).
//!
//! No secure path: the truncation needs an exact sampler of a truncated discrete Laplace, which
//! recsel does not have.

use rand::Rng as _;

use super::scores::{DEFAULT_HARD_STOP, MAX_RUNS};
use super::{PrivateSelection, SelectionParams, Stopping};
use crate::error::{Error, Result};
use crate::mechanisms::{
    boxed, check_epsilon, Bound, Guarantee, MechParams, Mechanism, MechanismSpec, ParamSpec,
    Prepared, Problem, GAMMA,
};
use crate::numerics::distributions::index_and_sign;
use crate::rng::Rng;

/// The δ₀ of one run of `rs-margin` (its truncated Laplace noise is (ε₀, δ₀)-DP).
pub const DELTA0: ParamSpec = ParamSpec::real_in(
    "delta0",
    "delta0 of one run of rs-margin: its Laplace noise is truncated to +-(Delta_a/eps0)*ln(1 + \
     (e^eps0 - 1)/(2*delta0)), which is (eps0, delta0)-DP",
    1e-6,
    Bound::Open(0.0),
    Bound::Open(1.0),
);

/// The registry entry of `rs-margin`.
pub const RS_MARGIN: MechanismSpec = MechanismSpec {
    name: "rs-margin",
    guarantee: "(eps, delta)-DP",
    private: true,
    params: &[GAMMA, MAX_RUNS, DELTA0],
    summary: "margin mechanism by random stopping (Liu-Talwar 5.2): min(Geometric(gamma), \
              max_runs) uniform draws with truncated Lap(Delta_a/eps0) noise, eps0 = eps/3, best \
              released; the argmax wins whenever drawn if it leads by the two half-widths",
    use_when: "a clear leader; (eps, delta) (named only)",
    audit_reference: false,
    build: |p| boxed(MarginSelection::from_params(p)),
};

/// `rs-margin` with validated parameters.
#[derive(Debug, Clone)]
pub struct MarginSelection {
    epsilon: f64,
    delta0: f64,
    /// `w`: the noise's half-width in units of its scale.
    width: f64,
    selection: PrivateSelection,
    guarantee: Guarantee,
}

impl MarginSelection {
    /// Validates ε (finite, > 0), γ (in (0, 1]), T (≥ 1) and δ₀ (in (0, 1)); one run spends
    /// ε₀ = ε/3 and the guarantee is the statement with ε at most the given ε and the smallest δ.
    pub fn new(epsilon: f64, gamma: f64, max_runs: u64, delta0: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        if !(delta0 > 0.0 && delta0 < 1.0) {
            return Err(Error::InvalidParameter {
                name: "delta0",
                requirement: "in (0, 1)",
                value: delta0,
            });
        }
        let eps0 = epsilon / 3.0;
        let selection = SelectionParams::new(Stopping::Geometric { gamma }, eps0)
            .with_delta0(delta0)
            .with_max_runs(max_runs)
            .check()?;
        let statement = selection
            .statements()
            .iter()
            .filter(|s| s.epsilon <= epsilon * (1.0 + 1e-12))
            .min_by(|a, b| a.delta.total_cmp(&b.delta))
            .copied()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "rs-margin: no (eps, delta) statement at eps = {epsilon}"
                ))
            })?;
        Ok(MarginSelection {
            epsilon,
            delta0,
            width: (eps0.exp_m1() / (2.0 * delta0)).ln_1p(),
            selection,
            guarantee: Guarantee::Approx {
                epsilon,
                delta: statement.delta,
            },
        })
    }

    /// Builds it from registry parameters: γ ([`GAMMA`]), T ([`MAX_RUNS`]; 0 is
    /// [`DEFAULT_HARD_STOP`]) and δ₀ ([`DELTA0`]).
    pub fn from_params(p: &MechParams) -> Result<Self> {
        let t = p.get(&MAX_RUNS)? as u64;
        Self::new(
            p.epsilon,
            p.get(&GAMMA)?,
            if t == 0 { DEFAULT_HARD_STOP } else { t },
            p.get(&DELTA0)?,
        )
    }

    /// The selection this mechanism runs (ε₀ = ε/3, δ₀, γ, T and its statements).
    pub fn selection(&self) -> &PrivateSelection {
        &self.selection
    }

    /// δ₀ of one run.
    pub fn delta0(&self) -> f64 {
        self.delta0
    }

    /// The half-width A_a of candidate a's noise for sensitivity `delta_a`: `(Δ_a/ε₀)·w`.
    pub fn half_width(&self, delta_a: f64) -> f64 {
        delta_a / self.selection.params().eps0 * self.width
    }

    /// The probability that a candidate is never drawn among `min(K, T)` uniform draws from k:
    /// `E[(1 − 1/k)^{min(K,T)}]`. When the best candidate leads every other b by more than
    /// `A_best + A_b`, this is exactly the probability that the release is not the best.
    pub fn miss_probability(&self, k: usize) -> f64 {
        let p = self.selection.params();
        let (Stopping::Geometric { gamma }, Some(t)) = (p.stopping, p.max_runs) else {
            unreachable!("rs-margin is geometric with a hard stop")
        };
        let z = 1.0 - 1.0 / k as f64;
        let r = (1.0 - gamma) * z;
        let tf = t as f64;
        // Σ_{j<T} γ(1−γ)^{j−1} z^j + (1−γ)^{T−1} z^T (r < 1 since z < 1).
        gamma * z * (1.0 - r.powf(tf - 1.0)) / (1.0 - r) + (1.0 - gamma).powf(tf - 1.0) * z.powf(tf)
    }
}

struct PreparedMargin<'a> {
    mech: &'a MarginSelection,
    scores: &'a [f64],
    /// `b_a = Δ_a/ε₀`.
    scales: Vec<f64>,
    /// `e^{−w} − 1`: a magnitude is `−b·ln(1 + u·(e^{−w} − 1))` for u uniform in [0, 1).
    tail: f64,
}

impl Prepared for PreparedMargin<'_> {
    fn sample(&self, rng: &mut Rng) -> usize {
        self.sample_outcome(rng)
            .expect("a hard stop makes at least one run")
    }

    fn sample_outcome(&self, rng: &mut Rng) -> Option<usize> {
        let k = self.scores.len();
        let (best, _) = self.mech.selection.run_scores(None, rng, |rng| {
            let (a, plus) = index_and_sign(rng, k);
            // Exp(1) truncated to [0, w] by inversion: F(m) = (1 − e^{−m})/(1 − e^{−w}).
            let u: f64 = rng.random();
            let m = -(u * self.tail).ln_1p();
            let z = self.scales[a] * if plus { m } else { -m };
            (a, self.scores[a] + z)
        });
        best.map(|(a, _)| a)
    }
}

impl Mechanism for MarginSelection {
    fn name(&self) -> &'static str {
        "rs-margin"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        self.guarantee
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let eps0 = self.selection.params().eps0;
        Box::new(PreparedMargin {
            mech: self,
            scores: problem.scores(),
            scales: problem.sensitivities().iter().map(|d| d / eps0).collect(),
            tail: (-self.width).exp_m1(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_half_width_makes_one_run_eps0_delta0() {
        // The mass of the end interval [A − Δ, A] of the truncated law is δ₀.
        let m = MarginSelection::new(1.5, 0.1, 50, 1e-4).unwrap();
        let (eps0, w) = (0.5, m.width);
        let end = ((eps0 - w).exp() - (-w).exp()) / (2.0 * (1.0 - (-w).exp()));
        assert!((end - 1e-4).abs() < 1e-12, "{end}");
        assert_eq!(m.half_width(2.0), 4.0 * w);
        assert!(MarginSelection::new(1.0, 0.1, 50, 0.0).is_err());
        assert!(MarginSelection::new(1.0, 0.1, 0, 1e-6).is_err());
    }

    #[test]
    fn the_miss_probability_is_the_sum_over_the_cut_law() {
        let m = MarginSelection::new(1.0, 0.2, 7, 1e-6).unwrap();
        let (g, z) = (0.2f64, 0.75f64);
        let direct: f64 = (1..7)
            .map(|j| g * (1.0 - g).powi(j - 1) * z.powi(j))
            .sum::<f64>()
            + (1.0 - g).powi(6) * z.powi(7);
        assert!((m.miss_probability(4) - direct).abs() < 1e-15);
    }
}
