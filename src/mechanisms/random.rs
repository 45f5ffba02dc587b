//! Uniformly random choice (docs/mechanisms.md, `random`): the baseline every private mechanism should beat.
//! It ignores the scores, so it is 0-DP. Cost: O(1) per selection. Secure path: an exact uniform
//! integer from the secure generator.

use rand::Rng as _;

use crate::error::Result;
use crate::mechanisms::secure::{SecurePrepared, SecureUniform};
use crate::mechanisms::{check_epsilon, Guarantee, Mechanism, Prepared, Problem};
use crate::rng::Rng;

/// Uniform choice among the k candidates.
#[derive(Debug, Clone)]
pub struct UniformRandom {
    epsilon: f64,
}

impl UniformRandom {
    /// ε is validated like every mechanism's (it is carried along in result tables) but unused.
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(UniformRandom {
            epsilon: check_epsilon(epsilon)?,
        })
    }
}

struct PreparedRandom {
    k: usize,
}

impl Prepared for PreparedRandom {
    fn sample(&self, rng: &mut Rng) -> usize {
        rng.random_range(0..self.k)
    }
}

impl Mechanism for UniformRandom {
    fn name(&self) -> &'static str {
        "random"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure { epsilon: 0.0 }
    }

    fn secure_epsilon(&self) -> Result<f64> {
        Ok(0.0)
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        Ok(Box::new(SecureUniform(problem.len())))
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(PreparedRandom { k: problem.len() })
    }
}
