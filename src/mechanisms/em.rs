//! Exponential mechanism (McSherry & Talwar 2007; docs/mechanisms.md, `em`).
//!
//! `P(a) ∝ exp(ε q_a / (2Δ))` — equivalently RNM with Gumbel noise. Weights are computed in log
//! space shifted by the maximum, so no weight overflows and the maximiser always has weight 1 (the
//! failure mode of diffprivlib's issue #107). ε-DP. Cost: O(k) to prepare, then
//! O(log k) per selection by inverting the cumulative weights.
//!
//! Secure path (`docs/secure.md`): rejection sampling on the grid scores — a uniform proposal
//! accepted with exact probability exp(−ε'(Q_max − Q_a)/(2D)) — whose accepted candidate has
//! exactly the softmax law; expected k/Σw ≤ k proposals.

use rand::Rng as _;

use crate::error::Result;
use crate::mechanisms::secure::{ExpWeights, SecureExponential, SecurePrepared};
use crate::mechanisms::{check_epsilon, Grid, Mechanism, Prepared, Problem, SecureEpsilon};
use crate::rng::Rng;

/// The exponential mechanism.
#[derive(Debug, Clone)]
pub struct ExponentialMechanism {
    epsilon: f64,
}

impl ExponentialMechanism {
    /// Validates ε (finite, > 0).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(ExponentialMechanism {
            epsilon: check_epsilon(epsilon)?,
        })
    }

    /// The exact output distribution on `problem` (the softmax).
    pub fn probabilities(&self, problem: &Problem<'_>) -> Vec<f64> {
        let w = self.weights(problem);
        let total: f64 = w.iter().sum();
        w.iter().map(|x| x / total).collect()
    }

    fn weights(&self, problem: &Problem<'_>) -> Vec<f64> {
        let c = self.epsilon / (2.0 * problem.max_sensitivity());
        let qmax = problem.max_score();
        problem
            .scores()
            .iter()
            .map(|&q| (c * (q - qmax)).exp())
            .collect()
    }
}

struct PreparedEm {
    cumulative: Vec<f64>,
}

impl Prepared for PreparedEm {
    fn sample(&self, rng: &mut Rng) -> usize {
        let total = *self.cumulative.last().expect("at least one candidate");
        let u = rng.random::<f64>() * total;
        // The first index whose cumulative weight exceeds u; zero-weight candidates are skipped.
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.cumulative.len() - 1)
    }
}

impl Mechanism for ExponentialMechanism {
    fn name(&self) -> &'static str {
        "em"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn secure_epsilon(&self) -> Result<f64> {
        Ok(SecureEpsilon::new(self.epsilon)?.value())
    }

    /// `log P(a|D)/P(a|D') = ε(q_a − q'_a)/(2Δ) + log(Z'/Z)`: the first term lies in
    /// `[−ε/2, ε/2]` for every a, so the log-ratios span at most ε (docs/ledger.md, "Composition").
    /// The secure path samples the same softmax on the grid with ε' ≤ ε and D ≥ Δ.
    fn bounded_range(&self) -> bool {
        true
    }

    /// Peeling, and one-shot Gumbel top-k (the same law; docs/lists.md).
    fn list_forms(&self) -> &'static [&'static str] {
        &["peeling", "gumbel"]
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        let eps = SecureEpsilon::new(self.epsilon)?;
        let grid = Grid::new(problem);
        Ok(Box::new(SecureExponential(ExpWeights::new(
            &grid.q, grid.d_max, eps,
        ))))
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let mut cumulative = self.weights(problem);
        let mut acc = 0.0;
        for w in cumulative.iter_mut() {
            acc += *w;
            *w = acc;
        }
        Box::new(PreparedEm { cumulative })
    }
}
