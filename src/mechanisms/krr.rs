//! k-randomised response (docs/mechanisms.md, `krr`).
//!
//! Outputs the true argmax with probability `e^ε / (e^ε + k − 1)` and each other candidate with
//! probability `1 / (e^ε + k − 1)`; it needs no sensitivities. ε-DP. The probabilities are computed
//! as `1 / (1 + (k−1) e^{−ε})` so a huge ε does not overflow. Tied maxima: the "true argmax" is one
//! of them chosen uniformly. Cost: O(k) to find the argmax set, O(1) per selection.
//!
//! Secure path (`docs/secure.md`): the argmax set of the exact scores (no grid is needed: krr uses
//! no sensitivity), and the randomised response by rejection with exact Bernoulli(e^{−ε'}).

use rand::Rng as _;

use crate::error::Result;
use crate::mechanisms::secure::{SecureKrr, SecurePrepared};
use crate::mechanisms::{check_epsilon, Mechanism, Prepared, Problem, SecureEpsilon};
use crate::rng::Rng;

/// k-randomised response.
#[derive(Debug, Clone)]
pub struct KRandomizedResponse {
    epsilon: f64,
}

impl KRandomizedResponse {
    /// Validates ε (finite, > 0).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(KRandomizedResponse {
            epsilon: check_epsilon(epsilon)?,
        })
    }

    /// Probability of reporting the true argmax among k candidates.
    pub fn p_true(&self, k: usize) -> f64 {
        1.0 / (1.0 + (k as f64 - 1.0) * (-self.epsilon).exp())
    }
}

struct PreparedKrr {
    k: usize,
    argmax: Vec<usize>,
    p_true: f64,
}

impl Prepared for PreparedKrr {
    fn sample(&self, rng: &mut Rng) -> usize {
        let top = self.argmax[rng.random_range(0..self.argmax.len())];
        if self.k == 1 || rng.random::<f64>() < self.p_true {
            return top;
        }
        let j = rng.random_range(0..self.k - 1);
        if j >= top {
            j + 1
        } else {
            j
        }
    }
}

impl Mechanism for KRandomizedResponse {
    fn name(&self) -> &'static str {
        "krr"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn secure_epsilon(&self) -> Result<f64> {
        Ok(SecureEpsilon::new(self.epsilon)?.value())
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        Ok(Box::new(SecureKrr {
            k: problem.len(),
            argmax: problem.argmax_set(),
            eps: SecureEpsilon::new(self.epsilon)?,
        }))
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(PreparedKrr {
            k: problem.len(),
            argmax: problem.argmax_set(),
            p_true: self.p_true(problem.len()),
        })
    }
}
