//! Report Noisy Max and its variants (docs/mechanisms.md: `rnm`, `rnm-laplace`, `rnmh`, `rnmh-laplace`).
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
//! Cost per selection: k noise draws and one pass, ties broken uniformly at random; after
//! [`Mechanism::prepare_many`], an exact thinning sampler in descending score order
//! ([`SortedNoisyMax`]): O(k log k) once per problem, then typically far fewer than k random draws
//! per selection.
//!
//! Secure path (`docs/secure.md`), for the two ε-DP variants only: `rnm` samples exactly the law
//! of report-noisy-max with exponential noise on the grid scores, through permute-and-flip with
//! exact acceptances (the two laws are identical); `rnm-laplace` adds exact discrete Laplace noise
//! of rate ε'/(2D) in grid units and breaks ties uniformly at random.

use crate::error::Result;
use crate::mechanisms::secure::{
    noise_scales, ExactNoise, ExpWeights, SecureNoisyMax, SecurePermuteFlip, SecurePrepared,
};
use crate::mechanisms::{
    argmax_random_ties, check_epsilon, no_secure_path, Grid, Guarantee, Mechanism, Prepared,
    Problem, SecureEpsilon,
};
use crate::numerics::distributions::{exp1, laplace1};
use crate::numerics::exact::FRACTION_BITS;
use crate::rng::Rng;

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

    fn secure_epsilon(&self) -> Result<f64> {
        if self.heterogeneous {
            return Err(no_secure_path(self.name()));
        }
        Ok(SecureEpsilon::new(self.epsilon)?.value())
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        if self.heterogeneous {
            return Err(no_secure_path(self.name()));
        }
        // A mis-calibrated audit variant scales its secure noise for `noise_epsilon` too.
        let eps = SecureEpsilon::new(self.noise_epsilon)?;
        let grid = Grid::new(problem);
        Ok(match self.noise {
            Noise::Exponential => {
                Box::new(SecurePermuteFlip(ExpWeights::new(&grid.q, grid.d_max, eps)))
            }
            Noise::Laplace => {
                // Rate ε'/(2D): s = E, t = 2·2^32·D.
                let t = noise_scales(&vec![grid.d_max; grid.q.len()], 2u128 << FRACTION_BITS);
                Box::new(SecureNoisyMax {
                    q: grid.q,
                    s: u128::from(eps.num),
                    t,
                    noise: ExactNoise::Laplace,
                })
            }
        })
    }

    fn prepare_many<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        let c = self.multiplier() / self.noise_epsilon;
        let scales: Vec<f64> = if self.heterogeneous {
            problem.sensitivities().iter().map(|d| c * d).collect()
        } else {
            vec![c * problem.max_sensitivity()]
        };
        if scales.iter().all(|s| s.is_finite()) {
            Box::new(SortedNoisyMax::new(problem.scores(), &scales, self.noise))
        } else {
            // ε so small that a scale overflowed: the literal loop handles infinities.
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
        if many && scale.is_finite() {
            ExpNoisyMax::Sorted(SortedNoisyMax::new(&scores, &[scale], Noise::Exponential))
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

/// Noisy max `argmax_a q_a + s_a·Z_a` with exponential or Laplace noise, sampled exactly without
/// drawing k noise variables.
///
/// Candidates are visited in descending score order, keeping the running maximum B of the noisy
/// values seen so far. Once B ≥ q_j (always, for exponential noise; after a short literal phase,
/// for Laplace noise), candidate j beats B with probability `p_j = c·exp(−(B − q_j)/s_j)` (c = 1
/// for exponential, ½ for Laplace noise), independently of the others, and when it does its noisy
/// value is `B + s_j·E` with a fresh `E ~ Exp(1)` (both tails are memoryless). The Bernoulli(p_j)
/// events are generated by thinning: with `S_i = max_{l ≥ i} s_l`, `p̄ = c·exp(−(B − q_i)/S_i)`
/// bounds every later p, so skip a Geometric(p̄) number of candidates and accept the one reached
/// with probability p_j/p̄. The output has exactly the distribution of the literal argmax, at an
/// expected cost of O(running-maximum changes + skips) per selection instead of k noise draws.
pub(crate) struct SortedNoisyMax {
    order: Vec<u32>,
    sorted: Vec<f64>,
    /// Scales in sorted order (one entry when homogeneous).
    scales: Vec<f64>,
    /// Suffix maxima of `scales` (empty when homogeneous).
    suffix: Vec<f64>,
    laplace: bool,
}

impl SortedNoisyMax {
    /// Precomputes the descending order of `scores`; `scales` has one entry (homogeneous noise)
    /// or one per candidate. All scales must be finite and > 0.
    pub(crate) fn new(scores: &[f64], scales: &[f64], noise: Noise) -> Self {
        // Descending by score, sorted on integer keys that order like `f64::total_cmp`.
        let key = |x: f64| {
            let b = x.to_bits();
            std::cmp::Reverse(b ^ ((((b as i64) >> 63) as u64) | (1 << 63)))
        };
        let mut order: Vec<u32> = (0..scores.len() as u32).collect();
        order.sort_unstable_by_key(|&a| key(scores[a as usize]));
        let sorted = order.iter().map(|&a| scores[a as usize]).collect();
        let (scales, suffix) = if scales.len() == 1 {
            (scales.to_vec(), Vec::new())
        } else {
            let sc: Vec<f64> = order.iter().map(|&a| scales[a as usize]).collect();
            let mut suffix = sc.clone();
            for i in (0..suffix.len().saturating_sub(1)).rev() {
                suffix[i] = suffix[i].max(suffix[i + 1]);
            }
            (sc, suffix)
        };
        SortedNoisyMax {
            order,
            sorted,
            scales,
            suffix,
            laplace: noise == Noise::Laplace,
        }
    }

    #[inline]
    fn scale(&self, i: usize) -> f64 {
        if self.suffix.is_empty() {
            self.scales[0]
        } else {
            self.scales[i]
        }
    }

    #[inline]
    fn bound_scale(&self, i: usize) -> f64 {
        if self.suffix.is_empty() {
            self.scales[0]
        } else {
            self.suffix[i]
        }
    }
}

impl Prepared for SortedNoisyMax {
    fn sample(&self, rng: &mut Rng) -> usize {
        use rand::Rng as _;
        let q = &self.sorted;
        let k = q.len();
        let noise = |r: &mut Rng| if self.laplace { laplace1(r) } else { exp1(r) };
        let tail = if self.laplace { 0.5 } else { 1.0 };
        let mut best = 0usize;
        let mut b = q[0] + self.scale(0) * noise(rng);
        let mut i = 1usize;
        // Laplace noise can leave the running maximum below later scores: compare literally until
        // it is not (scores only decrease, the maximum only grows).
        while i < k && q[i] > b {
            let v = q[i] + self.scale(i) * noise(rng);
            if v > b {
                b = v;
                best = i;
            }
            i += 1;
        }
        while i < k {
            let bound = tail * (-(b - q[i]) / self.bound_scale(i)).exp();
            if bound <= 0.0 {
                break; // no later candidate can reach the maximum (probability below 1e-308)
            }
            if bound < 1.0 {
                // Skip a Geometric(bound) number of failures.
                let u = crate::numerics::distributions::uniform_open0(rng);
                // The ratio is ≥ 0 (or −0): `as usize` truncates it to its floor, and it reaches
                // the integer k − i exactly when its floor does (no call to `floor`).
                let skip = u.ln() / (-bound).ln_1p();
                if skip >= (k - i) as f64 {
                    break;
                }
                i += skip as usize;
            }
            let s = self.scale(i);
            let p = tail * (-(b - q[i]) / s).exp();
            if p >= bound || rng.random::<f64>() * bound < p {
                best = i;
                b += s * exp1(rng);
            }
            i += 1;
        }
        self.order[best] as usize
    }
}
