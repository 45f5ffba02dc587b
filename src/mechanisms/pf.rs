//! Permute-and-flip (McKenna & Sheldon 2020; docs/mechanisms.md, `pf`).
//!
//! Visit the candidates in a uniformly random order and accept candidate a with probability
//! `exp(ε (q_a − q_max) / (2Δ))`; a maximiser is always accepted, so it stops after at most k visits.
//! ε-DP, and identical in distribution to `rnm` with exponential noise (Ding et al. 2021).
//! Cost per selection: O(k) worst case, fewer visits when ε is small.
//!
//! Secure path (`docs/secure.md`): the same visits on the grid scores, each acceptance an exact
//! Bernoulli(exp(−ε'(Q_max − Q_a)/(2D))).

use rand::Rng as _;

use crate::error::Result;
use crate::mechanisms::secure::{ExpWeights, SecurePermuteFlip, SecurePrepared};
use crate::mechanisms::{check_epsilon, Grid, Mechanism, Prepared, Problem, SecureEpsilon};
use crate::rng::Rng;

/// Permute-and-flip.
#[derive(Debug, Clone)]
pub struct PermuteAndFlip {
    epsilon: f64,
}

impl PermuteAndFlip {
    /// Validates ε (finite, > 0).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(PermuteAndFlip {
            epsilon: check_epsilon(epsilon)?,
        })
    }
}

struct PreparedPf {
    accept: Vec<f64>,
}

impl Prepared for PreparedPf {
    fn sample(&self, rng: &mut Rng) -> usize {
        let k = self.accept.len();
        // A lazily drawn uniform permutation (Fisher–Yates, one step per visit).
        let mut order: Vec<u32> = (0..k as u32).collect();
        for i in 0..k {
            let j = rng.random_range(i..k);
            order.swap(i, j);
            let a = order[i] as usize;
            let p = self.accept[a];
            // A maximiser has p = 1 and `random` is < 1, so it is always accepted.
            if p >= 1.0 || rng.random::<f64>() < p {
                return a;
            }
        }
        unreachable!("permute-and-flip always accepts a maximiser")
    }
}

impl Mechanism for PermuteAndFlip {
    fn name(&self) -> &'static str {
        "pf"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn secure_epsilon(&self) -> Result<f64> {
        Ok(SecureEpsilon::new(self.epsilon)?.value())
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        let eps = SecureEpsilon::new(self.epsilon)?;
        let grid = Grid::new(problem);
        Ok(Box::new(SecurePermuteFlip(ExpWeights::new(
            &grid.q, grid.d_max, eps,
        ))))
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let c = self.epsilon / (2.0 * problem.max_sensitivity());
        let qmax = problem.max_score();
        let accept = problem
            .scores()
            .iter()
            .map(|&q| {
                if q == qmax {
                    1.0
                } else {
                    (c * (q - qmax)).exp()
                }
            })
            .collect();
        Box::new(PreparedPf { accept })
    }
}
