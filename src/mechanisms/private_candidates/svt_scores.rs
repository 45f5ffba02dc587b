//! The sparse vector for DP queries on score vectors: the registry's `svt` (docs/sparse-vector.md,
//! "On score vectors").
//!
//! Query a (in candidate order) is the ε₀-DP run "candidate a scored `q_a + Lap(Δ_a/ε₀)`", whose
//! percentile at the threshold τ is known exactly — `p_a = P(q_a + Lap(Δ_a/ε₀) ≥ τ)` — so this is
//! Algorithm 3 (the exact oracle, Theorem 4.1): the first candidate whose noisy log-odds
//! `L(p_a) + Lap(4Δ/ε)` reach `L(t) + Lap(2Δ/ε)` (Δ = 2ε₀) is released, and ⊥ when none does.
//! ε-DP whatever ε₀: the queries' ε₀ only shapes the log-odds near τ; recsel takes ε₀ = ε.
//!
//! No secure path: the log-odds of a Laplace tail are transcendental, and exact sampling on the
//! grid of docs/secure.md would need them as exact rationals.

use super::scores::THRESHOLD;
use super::sparse_vector::{logit, SparseVector, SvtParams};
use crate::error::Result;
use crate::mechanisms::{
    boxed, check_epsilon, Bound, Guarantee, Mechanism, MechanismSpec, ParamSpec, Prepared, Problem,
};
use crate::numerics::distributions::laplace1;
use crate::rng::Rng;
use rand::Rng as _;

/// The target percentile t of `svt`.
pub const PERCENTILE: ParamSpec = ParamSpec::real_in(
    "percentile",
    "target percentile t of svt: a candidate is above when P(q_a + Lap(Delta_a/eps0) >= \
     threshold) reaches t",
    0.5,
    Bound::Open(0.0),
    Bound::Open(1.0),
);

/// The registry entry of `svt`.
pub const SVT: MechanismSpec = MechanismSpec {
    name: "svt",
    guarantee: "eps-DP",
    private: true,
    params: &[THRESHOLD, PERCENTILE],
    summary: "sparse vector on DP queries (Liu-Talwar 4.1): candidates in order, the first whose \
              percentile P(q_a + Lap(Delta_a/eps) >= threshold) noisily reaches `percentile` \
              (log-odds noise Lap(4) on the target, Lap(8) per candidate), else bottom",
    use_when: "the first good-enough candidate in a fixed order (named only)",
    audit_reference: false,
    build: |p| {
        boxed(SvtSelection::new(
            p.epsilon,
            p.get(&THRESHOLD)?,
            p.get(&PERCENTILE)?,
        ))
    },
};

/// `svt` with validated parameters.
#[derive(Debug, Clone)]
pub struct SvtSelection {
    epsilon: f64,
    threshold: f64,
    svt: SparseVector,
}

impl SvtSelection {
    /// Validates ε (finite, > 0), τ (finite) and t (in (0, 1)); the queries' ε₀ is ε.
    pub fn new(epsilon: f64, threshold: f64, percentile: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        if !threshold.is_finite() {
            return Err(crate::error::Error::InvalidParameter {
                name: "threshold",
                requirement: "finite",
                value: threshold,
            });
        }
        // One stream answers every candidate: the query count only bounds the stream.
        let svt = SvtParams::exact(epsilon, percentile, epsilon, u64::MAX).check()?;
        Ok(SvtSelection {
            epsilon,
            threshold,
            svt,
        })
    }
}

struct PreparedSvt {
    /// L(p_a) of each candidate.
    log_odds: Vec<f64>,
    level: f64,
    scales: (f64, f64),
}

impl Prepared for PreparedSvt {
    fn sample(&self, rng: &mut Rng) -> usize {
        self.sample_marked(rng).0
    }

    fn sample_marked(&self, rng: &mut Rng) -> (usize, bool) {
        match self.sample_outcome(rng) {
            Some(a) => (a, false),
            None => (rng.random_range(0..self.log_odds.len()), true),
        }
    }

    fn sample_outcome(&self, rng: &mut Rng) -> Option<usize> {
        let (bt, bq) = self.scales;
        let theta = self.level + bt * laplace1(rng);
        self.log_odds
            .iter()
            .position(|&l| l + bq * laplace1(rng) >= theta)
    }
}

/// `P(q + Lap(b) ≥ τ)`'s log-odds, computed without cancellation on either side.
fn laplace_log_odds(q: f64, b: f64, tau: f64) -> f64 {
    let x = (q - tau) / b;
    // p = 1 − e^{−x}/2 for x ≥ 0: L = ln(2e^{x} − 1); symmetric below.
    if x >= 0.0 {
        x + (2.0 - (-x).exp()).ln()
    } else {
        -(-x + (2.0 - x.exp()).ln())
    }
}

impl Mechanism for SvtSelection {
    fn name(&self) -> &'static str {
        "svt"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.svt.guarantee().epsilon,
        }
    }

    fn may_release_bottom(&self) -> bool {
        true
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let eps0 = self.svt.params().eps0;
        Box::new(PreparedSvt {
            log_odds: problem
                .scores()
                .iter()
                .zip(problem.sensitivities())
                .map(|(&q, &d)| laplace_log_odds(q, d / eps0, self.threshold))
                .collect(),
            level: logit(self.svt.params().percentile),
            scales: self.svt.noise_scales(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laplace_log_odds_match_the_tail() {
        for (q, b, tau) in [
            (0.0f64, 1.0f64, 0.0f64),
            (2.0, 0.5, 1.0),
            (-3.0, 2.0, 1.0),
            (1.0, 0.1, 0.5),
        ] {
            let x: f64 = (q - tau) / b;
            let p: f64 = if x >= 0.0 {
                1.0 - 0.5 * (-x).exp()
            } else {
                0.5 * x.exp()
            };
            let want = (p / (1.0 - p)).ln();
            assert!(
                (laplace_log_odds(q, b, tau) - want).abs() < 1e-9,
                "{q} {b} {tau}"
            );
        }
    }
}
