//! Report Noisy Max and its variants (SPEC §1: `rnm`, `rnm-laplace`, `rnmh`, `rnmh-laplace`).
//!
//! `argmax_a q_a + Z_a` with independent noise:
//!
//! | name | noise `Z_a` | guarantee |
//! |---|---|---|
//! | `rnm` | Exp(mean 2Δ/ε), Δ = max_a Δ_a | ε-DP (Ding et al. 2021) |
//! | `rnm-laplace` | Lap(2Δ/ε) | ε-DP |
//! | `rnmh` | Exp(mean 2Δ_a/ε) | not DP for any ε (seed 001 §IV-A) |
//! | `rnmh-laplace` | Lap(Δ_a/ε) | (k−1)ε-DP only |
//!
//! Cost per selection: k noise draws and one pass, ties broken uniformly at random — except `rnm`,
//! which [`Mechanism::prepare_many`] samples exactly by thinning in descending score order
//! ([`SortedNoisyMax`]): O(k log k) once per problem, then typically far fewer than k random draws
//! per selection.

use crate::error::Result;
use crate::mechanisms::{
    argmax_random_ties, check_epsilon, Guarantee, Mechanism, Prepared, Problem,
};
use crate::rng::Rng;
use crate::stats::distributions::{exp1, laplace1};

/// The noise family of a noisy-max mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// One-sided exponential noise.
    Exponential,
    /// Two-sided Laplace noise.
    Laplace,
}

/// Report Noisy Max with homogeneous (max-sensitivity) or heterogeneous (per-candidate) noise.
#[derive(Debug, Clone)]
pub struct NoisyMax {
    noise: Noise,
    heterogeneous: bool,
    epsilon: f64,
    /// ε used to scale the noise; equals `epsilon` except in deliberately mis-calibrated variants
    /// built for audits.
    noise_epsilon: f64,
}

impl NoisyMax {
    /// Validates ε (finite, > 0).
    pub fn new(noise: Noise, heterogeneous: bool, epsilon: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        Ok(NoisyMax {
            noise,
            heterogeneous,
            epsilon,
            noise_epsilon: epsilon,
        })
    }

    /// A deliberately broken variant for testing auditors: it *claims* `epsilon` but scales its
    /// noise for `noise_epsilon`. Never use it for anything else.
    pub fn miscalibrated(noise: Noise, epsilon: f64, noise_epsilon: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        check_epsilon(noise_epsilon)?;
        Ok(NoisyMax {
            noise,
            heterogeneous: false,
            epsilon,
            noise_epsilon,
        })
    }

    /// Noise scale multiplier c in `Z_a ~ Noise(c·Δ/ε)`.
    fn multiplier(&self) -> f64 {
        match (self.noise, self.heterogeneous) {
            (Noise::Laplace, true) => 1.0,
            _ => 2.0,
        }
    }
}

struct PreparedNoisyMax<'a> {
    scores: &'a [f64],
    noise: Noise,
    /// One scale for all candidates (homogeneous) …
    scale: f64,
    /// … or one per candidate (heterogeneous).
    scales: Vec<f64>,
}

impl Prepared for PreparedNoisyMax<'_> {
    fn sample(&self, rng: &mut Rng) -> usize {
        let q = self.scores;
        match (self.noise, self.scales.is_empty()) {
            (Noise::Exponential, true) => {
                argmax_random_ties(q.len(), rng, |a, r| q[a] + self.scale * exp1(r))
            }
            (Noise::Laplace, true) => {
                argmax_random_ties(q.len(), rng, |a, r| q[a] + self.scale * laplace1(r))
            }
            (Noise::Exponential, false) => {
                argmax_random_ties(q.len(), rng, |a, r| q[a] + self.scales[a] * exp1(r))
            }
            (Noise::Laplace, false) => {
                argmax_random_ties(q.len(), rng, |a, r| q[a] + self.scales[a] * laplace1(r))
            }
        }
    }
}

impl Mechanism for NoisyMax {
    fn name(&self) -> &'static str {
        match (self.noise, self.heterogeneous) {
            (Noise::Exponential, false) => "rnm",
            (Noise::Laplace, false) => "rnm-laplace",
            (Noise::Exponential, true) => "rnmh",
            (Noise::Laplace, true) => "rnmh-laplace",
        }
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        match (self.noise, self.heterogeneous) {
            (_, false) => Guarantee::Pure {
                epsilon: self.epsilon,
            },
            (Noise::Exponential, true) => Guarantee::NotPrivate,
            (Noise::Laplace, true) => Guarantee::PerCandidate {
                epsilon: self.epsilon,
            },
        }
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let c = self.multiplier() / self.noise_epsilon;
        let (scale, scales) = if self.heterogeneous {
            (0.0, problem.sensitivities().iter().map(|d| c * d).collect())
        } else {
            (c * problem.max_sensitivity(), Vec::new())
        };
        Box::new(PreparedNoisyMax {
            scores: problem.scores(),
            noise: self.noise,
            scale,
            scales,
        })
    }

    fn prepare_many<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        if self.noise == Noise::Exponential && !self.heterogeneous {
            let scale = self.multiplier() / self.noise_epsilon * problem.max_sensitivity();
            Box::new(SortedNoisyMax::new(problem.scores(), scale))
        } else {
            self.prepare(problem)
        }
    }
}

/// `argmax_a q_a + s·E_a` over owned scores (the GEM family's transformed scores): the literal
/// loop for a few selections, the thinning sampler for many.
pub(crate) enum ExpNoisyMax {
    /// k exponential draws per selection.
    Literal { scores: Vec<f64>, scale: f64 },
    /// Sorted once, then thinning.
    Sorted(SortedNoisyMax),
}

impl ExpNoisyMax {
    pub(crate) fn new(scores: Vec<f64>, scale: f64, many: bool) -> Self {
        if many {
            ExpNoisyMax::Sorted(SortedNoisyMax::new(&scores, scale))
        } else {
            ExpNoisyMax::Literal { scores, scale }
        }
    }
}

impl Prepared for ExpNoisyMax {
    fn sample(&self, rng: &mut Rng) -> usize {
        match self {
            ExpNoisyMax::Literal { scores, scale } => {
                argmax_random_ties(scores.len(), rng, |a, r| scores[a] + scale * exp1(r))
            }
            ExpNoisyMax::Sorted(s) => s.sample(rng),
        }
    }
}

/// Report Noisy Max with homogeneous exponential noise, sampled exactly without drawing k
/// exponentials.
///
/// Candidates are visited in descending score order. The first gets `v = q + s·E`; every later
/// candidate j beats the running maximum B with probability `p_j = exp(−(B − q_j)/s)`, independently,
/// and when it does, its noisy value is `B + s·E'` with a fresh `E' ~ Exp(1)` (memorylessness). The
/// Bernoulli(p_j) events are generated by thinning: skip a Geometric(p̄) number of candidates, where
/// p̄ = p at the current position bounds every later p (scores only decrease), then accept with
/// probability p_j/p̄. The output has exactly the distribution of `argmax_a q_a + s·E_a`, at an
/// expected cost of O(number of running-maximum changes + skips) per selection instead of k
/// exponential draws. Ties in q are broken by the noise, uniformly by symmetry.
pub(crate) struct SortedNoisyMax {
    order: Vec<u32>,
    sorted: Vec<f64>,
    scale: f64,
}

impl SortedNoisyMax {
    /// Precomputes the descending order of `scores`; `scale` is the mean of the exponential noise.
    pub(crate) fn new(scores: &[f64], scale: f64) -> Self {
        // Descending by score, sorted on integer keys that order like `f64::total_cmp`.
        let key = |x: f64| {
            let b = x.to_bits();
            std::cmp::Reverse(b ^ ((((b as i64) >> 63) as u64) | (1 << 63)))
        };
        let mut order: Vec<u32> = (0..scores.len() as u32).collect();
        order.sort_unstable_by_key(|&a| key(scores[a as usize]));
        let sorted = order.iter().map(|&a| scores[a as usize]).collect();
        SortedNoisyMax {
            order,
            sorted,
            scale,
        }
    }
}

impl Prepared for SortedNoisyMax {
    fn sample(&self, rng: &mut Rng) -> usize {
        use rand::Rng as _;
        let (q, s) = (&self.sorted, self.scale);
        let k = q.len();
        if !s.is_finite() {
            // Infinite noise (ε underflowed to 0 in 2Δ/ε): every candidate is equally likely.
            return self.order[rng.random_range(0..k)] as usize;
        }
        let mut best = 0usize;
        let mut b = q[0] + s * exp1(rng);
        let mut i = 1usize;
        while i < k {
            let bound = (-(b - q[i]) / s).exp();
            if bound <= 0.0 {
                break; // no later candidate can reach the maximum (probability below 1e-308)
            }
            // Skip a Geometric(bound) number of failures.
            if bound < 1.0 {
                let u = crate::stats::distributions::uniform_open0(rng);
                let skip = (u.ln() / (-bound).ln_1p()).floor();
                if skip >= (k - i) as f64 {
                    break;
                }
                i += skip as usize;
            }
            let p = (-(b - q[i]) / s).exp();
            if p >= bound || rng.random::<f64>() * bound < p {
                best = i;
                b += s * exp1(rng);
            }
            i += 1;
        }
        self.order[best] as usize
    }
}
