//! Combined GEM (seed 001 Algorithm 2; docs/mechanisms.md, `cgem`).
//!
//! Spend `ε_c = c·ε` on one bit `b = [corr(q, Δ) ≥ 0]`, released by 2-randomised response (the true
//! bit with probability `e^{ε_c}/(e^{ε_c} + 1)`); then run `mgem` with `ε_g = ε − ε_c` if the
//! released bit is 1, `gem` with `ε_g` otherwise. ε-DP by basic composition. The correlation is
//! Spearman's by default; Pearson and the weighted correlation of docs/mechanisms.md, "Correlations" are options.
//! Cost: that of the correlation (O(k log k)) plus both GEM transforms to prepare, O(k) per
//! selection.
//!
//! The `bound` chooser is an extension: the bit is [mGEM's utility bound ≥ GEM's] at `ε_g`
//! (`crate::numerics::bounds`); it reads the data just like a correlation, so it pays the same
//! randomised-response share `c·ε`.
//!
//! Secure path (`docs/secure.md`): the budget is split in integers on the 2^−32 grid, `E = ⌊ε·2^32⌋`,
//! `E_c = ⌊cε·2^32⌋`, `E_g = E − E_c`, so the two parts add up to exactly ε' = E/2^32 ≤ ε. The
//! correlation bit is a deterministic function of the input (computed as in the float path); it is
//! released by exact randomised response with ε_c' and then the secure `mgem` or `gem` runs with
//! ε_g'.

use rand::Rng as _;

use crate::error::{Error, Result};
use crate::mechanisms::gem::{prepare_gem, prepare_gem_secure, GemVariant, PreparedGem, SecureGem};
use crate::mechanisms::secure::{randomized_response, SecurePrepared};
use crate::mechanisms::{
    check_epsilon, check_open_unit, Bound, Mechanism, ParamSpec, Prepared, Problem, SecureEpsilon,
};
use crate::numerics::Chooser;
use crate::rng::{Rng, SecureRng};

/// Share c of ε that `cgem` spends on the bit that chooses between gem and mgem.
pub const C: ParamSpec = ParamSpec::real_in(
    "c",
    "Share of eps spent on the bit that chooses gem or mgem",
    0.6,
    Bound::Open(0.0),
    Bound::Open(1.0),
);

/// What `cgem`'s bit reads: a correlation of scores and sensitivities, or `bound` (mgem when its
/// utility bound is at least gem's; `recsel bounds`).
pub const CHOOSER: ParamSpec = ParamSpec::choice(
    "chooser",
    "What the bit reads: a correlation, or bound (mgem when its utility bound is at least \
     gem's; see recsel bounds)",
    "spearman",
    &["spearman", "pearson", "weighted", "bound"],
);

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

    fn secure_epsilon(&self) -> Result<f64> {
        let (c, g) = self.secure_split()?;
        Ok(SecureEpsilon { num: c.num + g.num }.value())
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        let (eps_c, eps_g) = self.secure_split()?;
        // The public shift uses the float ε_g of the fast path; the guarantee uses ε_g'.
        let eps_g_float = self.epsilon * (1.0 - self.c);
        // The bit is a deterministic function of the input (a correlation, or the bound rule),
        // computed as on the float path; exact randomised response protects it.
        let true_bit = self.chooser.mgem_bit(
            problem.scores(),
            problem.sensitivities(),
            eps_g_float,
            self.beta,
        );
        Ok(Box::new(SecureCgem {
            true_bit,
            eps_c,
            gem: prepare_gem_secure(GemVariant::Gem, eps_g_float, eps_g, self.beta, problem)?,
            mgem: prepare_gem_secure(GemVariant::Modified, eps_g_float, eps_g, self.beta, problem)?,
        }))
    }
}

struct SecureCgem {
    true_bit: bool,
    eps_c: SecureEpsilon,
    gem: SecureGem,
    mgem: SecureGem,
}

impl SecurePrepared for SecureCgem {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        if randomized_response(rng, self.true_bit, self.eps_c) {
            self.mgem.sample(rng)
        } else {
            self.gem.sample(rng)
        }
    }
}

impl CombinedGem {
    /// The secure split of ε: (ε_c', ε_g') on the 2^−32 grid, summing to ⌊ε·2^32⌋/2^32.
    fn secure_split(&self) -> Result<(SecureEpsilon, SecureEpsilon)> {
        let total = SecureEpsilon::new(self.epsilon)?;
        let c = SecureEpsilon::new(self.c * self.epsilon)?;
        if c.num >= total.num {
            return Err(Error::InvalidParameter {
                name: "c",
                requirement: "to leave part of epsilon for GEM on the secure 2^-32 grid",
                value: self.c,
            });
        }
        Ok((
            c,
            SecureEpsilon {
                num: total.num - c.num,
            },
        ))
    }

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
