//! Combined GEM (seed 001 Algorithm 2; SPEC §1, `cgem`).
//!
//! Spend `ε_c = c·ε` on one bit `b = [corr(q, Δ) ≥ 0]`, released by 2-randomised response (the true
//! bit with probability `e^{ε_c}/(e^{ε_c} + 1)`); then run `mgem` with `ε_g = ε − ε_c` if the
//! released bit is 1, `gem` with `ε_g` otherwise. ε-DP by basic composition. The correlation is
//! Spearman's by default; Pearson and the weighted correlation of SPEC §3 are options.
//! Cost: that of the correlation (O(k log k)) plus both GEM transforms to prepare, O(k) per
//! selection.
//!
//! The `bound` chooser is an extension: the bit is [mGEM's utility bound ≥ GEM's] at `ε_g`
//! (`crate::stats::bounds`); it reads the data just like a correlation, so it pays the same
//! randomised-response share `c·ε`.

use rand::Rng as _;

use crate::error::Result;
use crate::mechanisms::gem::{prepare_gem, GemVariant, PreparedGem};
use crate::mechanisms::{check_epsilon, check_open_unit, Mechanism, Prepared, Problem};
use crate::rng::Rng;
use crate::stats::Chooser;

/// Combined GEM.
#[derive(Debug, Clone)]
pub struct CombinedGem {
    epsilon: f64,
    beta: f64,
    c: f64,
    chooser: Chooser,
}

impl CombinedGem {
    /// Validates ε (finite, > 0), β (in (0, 1)) and c (in (0, 1)).
    pub fn new(epsilon: f64, beta: f64, c: f64, chooser: Chooser) -> Result<Self> {
        Ok(CombinedGem {
            epsilon: check_epsilon(epsilon)?,
            beta: check_open_unit("beta", beta)?,
            c: check_open_unit("c", c)?,
            chooser,
        })
    }

    /// Probability that randomised response reports the true bit: `1/(1 + e^{−cε})`.
    pub fn p_truth(&self) -> f64 {
        1.0 / (1.0 + (-self.c * self.epsilon).exp())
    }
}

struct PreparedCgem {
    true_bit: bool,
    p_truth: f64,
    gem: PreparedGem,
    mgem: PreparedGem,
}

impl Prepared for PreparedCgem {
    fn sample(&self, rng: &mut Rng) -> usize {
        let truthful = rng.random::<f64>() < self.p_truth;
        let released = self.true_bit == truthful;
        if released {
            self.mgem.sample(rng)
        } else {
            self.gem.sample(rng)
        }
    }
}

impl Mechanism for CombinedGem {
    fn name(&self) -> &'static str {
        "cgem"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(self.prepare_cgem(problem, false))
    }

    fn prepare_many<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(self.prepare_cgem(problem, true))
    }
}

impl CombinedGem {
    fn prepare_cgem(&self, problem: &Problem<'_>, many: bool) -> PreparedCgem {
        let eps_g = self.epsilon * (1.0 - self.c);
        let true_bit =
            self.chooser
                .mgem_bit(problem.scores(), problem.sensitivities(), eps_g, self.beta);
        PreparedCgem {
            true_bit,
            p_truth: self.p_truth(),
            gem: prepare_gem(GemVariant::Gem, eps_g, self.beta, problem, many),
            mgem: prepare_gem(GemVariant::Modified, eps_g, self.beta, problem, many),
        }
    }
}
