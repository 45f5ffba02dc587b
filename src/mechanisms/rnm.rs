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
//! Cost per selection: k noise draws and one pass; ties broken uniformly at random.

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
}
