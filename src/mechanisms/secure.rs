//! The secure path's discretisation and its exact selection samplers (`docs/secure.md`).
//!
//! A problem is mapped onto a power-of-two grid before any randomness is drawn:
//!
//! * **unit** `u = 2^e`, chosen from the sensitivities only (never from the scores, which are the
//!   private data): `e = max(⌊log2 Δ_min⌋ − 20, ⌈log2 Δ_max⌉ − 40)`, so the smallest sensitivity
//!   spans at least 2^20 units unless the largest would then exceed 2^40 units;
//! * **scores** `Q_a = ⌊q_a / u⌋` (exact: dividing by a power of two), clamped to ±2^62;
//! * **sensitivities** `D_a = ⌈Δ_a / u⌉`. This is where the rounding is charged: if
//!   `|q_a − q'_a| ≤ Δ_a` then `|Q_a − Q'_a| ≤ D_a` (the floors of two reals that differ by at most
//!   δ differ by an integer below δ + 1), and clamping only shrinks differences, so integer
//!   neighbours stay neighbours with sensitivity `D_a`. The noise is calibrated to `D_a·u ≥ Δ_a`;
//! * **ε** is rounded *down* onto the 2^−32 grid, `ε' = ⌊ε·2^32⌋/2^32 ≤ ε` (and capped at 2^12),
//!   and ε' is the guarantee: the effective ε is stated exactly and never exceeds the requested ε.
//!
//! Every acceptance probability is then `exp(−x)` with rational x, sampled exactly
//! ([`crate::numerics::exact`]).

use crate::error::{Error, Result};
use crate::mechanisms::{Problem, RunningMax};
use crate::numerics::exact::{
    bernoulli_exp_neg, discrete_geometric, discrete_laplace, ExactStopping, FRACTION_BITS,
};
use crate::rng::SecureRng;

/// Binary digits of resolution below the smallest sensitivity.
pub const GRID_BITS: i32 = 20;
/// The largest sensitivity spans at most 2^40 grid units.
pub const MAX_SENS_BITS: i32 = 40;
/// Grid scores are clamped to ±2^62.
const SCORE_CLAMP: f64 = 4_611_686_018_427_387_904.0; // 2^62
/// ε' is capped at 2^12 (a smaller ε is always allowed; beyond it selection is already the argmax
/// with probability 1 − e^−4096 per unit gap).
const MAX_EPS_NUM: u64 = 1 << (FRACTION_BITS + 12);

/// ε rounded down onto the 2^−32 grid: `num / 2^32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecureEpsilon {
    /// ε' · 2^32.
    pub num: u64,
}

impl SecureEpsilon {
    /// `⌊ε·2^32⌋/2^32`, capped at 2^12. Errors when ε < 2^−32 (nothing of it is left on the grid).
    pub fn new(epsilon: f64) -> Result<Self> {
        let scaled = (epsilon * 2f64.powi(FRACTION_BITS as i32)).floor();
        if scaled.is_nan() || scaled < 1.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                requirement: "at least 2^-32 in secure mode",
                value: epsilon,
            });
        }
        Ok(SecureEpsilon {
            num: if scaled >= MAX_EPS_NUM as f64 {
                MAX_EPS_NUM
            } else {
                scaled as u64
            },
        })
    }

    /// ε' as a float (exact: a multiple of 2^−32 below 2^12).
    pub fn value(&self) -> f64 {
        self.num as f64 / 2f64.powi(FRACTION_BITS as i32)
    }
}

/// A problem on the power-of-two grid (module docs).
#[derive(Debug, Clone)]
pub struct Grid {
    /// log2 of the unit u.
    pub unit_log2: i32,
    /// `Q_a = ⌊q_a/u⌋`, clamped to ±2^62.
    pub q: Vec<i64>,
    /// `D_a = ⌈Δ_a/u⌉ ≥ 1`.
    pub d: Vec<u64>,
    /// `max_a D_a`.
    pub d_max: u64,
}

/// `x · 2^p`, exact for the ranges used here (p in [−1100, 1100], applied in steps that never
/// overflow the exponent of the scale factor itself).
fn scale_pow2(x: f64, p: i32) -> f64 {
    let mut y = x;
    let mut p = p;
    while p > 1000 {
        y *= 2f64.powi(1000);
        p -= 1000;
    }
    while p < -1000 {
        y *= 2f64.powi(-1000);
        p += 1000;
    }
    y * 2f64.powi(p)
}

/// [`scale_pow2`] by a fixed `p`, its factors computed once: the same multiplications in the
/// same order, hence the same values.
struct Pow2Scale {
    /// Multiplications by `big` before the last one.
    steps: u32,
    big: f64,
    last: f64,
}

impl Pow2Scale {
    fn new(p: i32) -> Self {
        let (mut steps, mut big, mut p) = (0, 1.0, p);
        while p > 1000 {
            (steps, big, p) = (steps + 1, 2f64.powi(1000), p - 1000);
        }
        while p < -1000 {
            (steps, big, p) = (steps + 1, 2f64.powi(-1000), p + 1000);
        }
        Pow2Scale {
            steps,
            big,
            last: 2f64.powi(p),
        }
    }

    #[inline]
    fn apply(&self, x: f64) -> f64 {
        let mut y = x;
        for _ in 0..self.steps {
            y *= self.big;
        }
        y * self.last
    }
}

/// Below 2^52 in magnitude a float converts to `i64` exactly after truncation, and
/// `x.floor()`/`x.ceil()` are the truncation corrected by one: no call to the C library.
const EXACT_TRUNC: f64 = 4_503_599_627_370_496.0; // 2^52

/// `x.floor().clamp(-2^62, 2^62) as i64`.
#[inline]
fn floor_clamped(x: f64) -> i64 {
    if x.abs() < EXACT_TRUNC {
        let t = x as i64;
        t - i64::from((t as f64) > x)
    } else {
        x.floor().clamp(-SCORE_CLAMP, SCORE_CLAMP) as i64
    }
}

/// `(x.ceil() as u64).max(1)`.
#[inline]
fn ceil_at_least_one(x: f64) -> u64 {
    if x.abs() < EXACT_TRUNC {
        let t = x as i64;
        let c = t + i64::from((t as f64) < x);
        (c.max(0) as u64).max(1)
    } else {
        (x.ceil() as u64).max(1)
    }
}

impl Grid {
    /// The unit exponent for these sensitivities (module docs): a function of Δ alone.
    pub fn unit_log2_for(sens: &[f64]) -> i32 {
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for &d in sens {
            lo = lo.min(d);
            hi = hi.max(d);
        }
        Self::unit_log2_of_range(lo, hi)
    }

    /// The unit exponent for sensitivities whose smallest is `lo` and largest `hi`.
    pub(crate) fn unit_log2_of_range(lo: f64, hi: f64) -> i32 {
        let e_min = lo.log2().floor() as i32 - GRID_BITS;
        let e_max = hi.log2().ceil() as i32 - MAX_SENS_BITS;
        e_min.max(e_max).clamp(-1100, 1100)
    }

    /// Maps a validated problem onto the grid.
    pub fn new(problem: &Problem<'_>) -> Self {
        Self::with_unit(problem, Self::unit_log2_for(problem.sensitivities()))
    }

    /// Maps a validated problem onto the grid of unit 2^`e`: for the `e` of a subset of its
    /// candidates, each candidate's values are those of the subset's own grid.
    pub(crate) fn with_unit(problem: &Problem<'_>, e: i32) -> Self {
        let scale = Pow2Scale::new(-e);
        let q = problem
            .scores()
            .iter()
            .map(|&x| floor_clamped(scale.apply(x)))
            .collect();
        let d: Vec<u64> = problem
            .sensitivities()
            .iter()
            .map(|&x| ceil_at_least_one(scale.apply(x)))
            .collect();
        let d_max = d.iter().copied().max().unwrap_or(1);
        Grid {
            unit_log2: e,
            q,
            d,
            d_max,
        }
    }

    /// `x` in grid units, `x / u` (exact: dividing by a power of two), for public values such as
    /// a threshold.
    pub fn to_units(&self, x: f64) -> f64 {
        scale_pow2(x, -self.unit_log2)
    }

    /// The grid sensitivities as real numbers, `D_a·u ≥ Δ_a`: the sensitivities the noise is
    /// calibrated to.
    pub fn charged_sensitivities(&self) -> Vec<f64> {
        self.d
            .iter()
            .map(|&d| scale_pow2(d as f64, self.unit_log2))
            .collect()
    }

    /// The grid scores as real numbers, `Q_a·u ≤ q_a`.
    pub fn rounded_scores(&self) -> Vec<f64> {
        self.q
            .iter()
            .map(|&q| scale_pow2(q as f64, self.unit_log2))
            .collect()
    }
}

/// One selection of the secure path. Its only source of randomness is a [`SecureRng`], which
/// offers exact integer and bit draws and nothing else.
pub trait SecurePrepared: Send + Sync {
    /// One selection: the index of the chosen candidate.
    fn sample(&self, rng: &mut SecureRng) -> usize;

    /// One selection that may release ⊥ (`None`), as [`crate::mechanisms::Prepared::sample_outcome`].
    fn sample_outcome(&self, rng: &mut SecureRng) -> Option<usize> {
        Some(self.sample(rng))
    }

    /// One selection and whether it was ⊥, as [`crate::mechanisms::Prepared::sample_marked`].
    fn sample_marked(&self, rng: &mut SecureRng) -> (usize, bool) {
        (self.sample(rng), false)
    }
}

/// Acceptance weights `w_a = exp(−num_a / den)` with `min_a num_a = 0`.
#[derive(Debug, Clone)]
pub(crate) struct ExpWeights {
    num: Vec<u128>,
    den: u128,
}

impl ExpWeights {
    /// `w_a = exp(−ε'(Q_max − Q_a)/(2D))`: the weights of the exponential mechanism and
    /// permute-and-flip on integer scores with integer sensitivity `d` (`x = E(Q_max − Q_a) /
    /// (2^33·D)` with ε' = E/2^32).
    pub(crate) fn new(q: &[i64], d: u64, eps: SecureEpsilon) -> Self {
        let qmax = q.iter().copied().max().expect("at least one candidate");
        let e = u128::from(eps.num);
        let num = q
            .iter()
            .map(|&x| e * (i128::from(qmax) - i128::from(x)) as u128)
            .collect();
        ExpWeights {
            num,
            den: Self::den(d),
        }
    }

    /// The common denominator `2^33·D` of the weights for sensitivity `d`.
    pub(crate) fn den(d: u64) -> u128 {
        u128::from(d) << (FRACTION_BITS + 1)
    }

    #[inline]
    fn accept(&self, a: usize, rng: &mut SecureRng) -> bool {
        bernoulli_exp_neg(rng, self.num[a], self.den)
    }
}

/// Permute-and-flip with exact Bernoulli(exp(−x)) acceptances (McKenna & Sheldon 2020). Its law is
/// exactly that of report-noisy-max with Exp(mean 2D/ε') noise on the grid scores (Ding et al.
/// 2021), so the secure `rnm` and `pf` share it — and neither draws a single noise variable.
pub(crate) struct SecurePermuteFlip(pub(crate) ExpWeights);

impl SecurePrepared for SecurePermuteFlip {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        permute_and_flip(self.0.num.len(), rng, |a, rng| self.0.accept(a, rng))
    }
}

/// Permute-and-flip over `k` candidates: candidates in a uniformly random order (Fisher–Yates,
/// one draw per step), the first that `accept` accepts. `accept` must accept a maximiser.
pub(crate) fn permute_and_flip(
    k: usize,
    rng: &mut SecureRng,
    mut accept: impl FnMut(usize, &mut SecureRng) -> bool,
) -> usize {
    let mut order: Vec<u32> = (0..k as u32).collect();
    for i in 0..k {
        let j = i + rng.below((k - i) as u64) as usize;
        order.swap(i, j);
        let a = order[i] as usize;
        if accept(a, rng) {
            return a;
        }
    }
    unreachable!("a maximiser has weight exp(0) = 1 and is always accepted")
}

/// The exponential mechanism by rejection: propose a uniform candidate, accept it with
/// probability `w_a`; the accepted candidate has probability exactly `w_a / Σ_b w_b`. Expected
/// `k / Σ_b w_b ≤ k` proposals.
pub(crate) struct SecureExponential(pub(crate) ExpWeights);

impl SecurePrepared for SecureExponential {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        let k = self.0.num.len() as u64;
        loop {
            let a = rng.below(k) as usize;
            if self.0.accept(a, rng) {
                return a;
            }
        }
    }
}

/// Noise of a secure noisy max or random stopping: rate `s / t_a` per grid unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExactNoise {
    /// Discrete Laplace, `P(z) ∝ exp(−|z| s/t)`.
    Laplace,
    /// One-sided geometric, `P(g) ∝ exp(−g s/t)`, g ≥ 0.
    Geometric,
}

/// Per-candidate noise scales `t_a = m·D_a` with rate `s/t_a = ε'/(m'·D_a)` where the multiplier
/// m' = `mult_num`/2^32 and ε' = s/2^32.
pub(crate) fn noise_scales(d: &[u64], mult_num: u128) -> Vec<u128> {
    d.iter().map(|&x| mult_num * u128::from(x)).collect()
}

#[inline]
fn draw_noise(noise: ExactNoise, rng: &mut SecureRng, s: u128, t: u128) -> i128 {
    match noise {
        ExactNoise::Laplace => discrete_laplace(rng, s, t),
        ExactNoise::Geometric => discrete_geometric(rng, s, t) as i128,
    }
}

/// Argmax of `Q_a + Z_a` with discrete noise, ties broken uniformly at random (reservoir
/// sampling). With discrete Laplace noise of rate ε'/(2D) it is ε'-DP: for fixed noise of the
/// others and a fixed random priority order (which uniform tie-breaking is), candidate a wins
/// exactly when `Z_a` reaches a threshold, and between neighbours that threshold moves by at most
/// 2D, which changes the tail probability by at most a factor exp(ε') (`docs/secure.md`).
pub(crate) struct SecureNoisyMax {
    pub(crate) q: Vec<i64>,
    pub(crate) s: u128,
    pub(crate) t: Vec<u128>,
    pub(crate) noise: ExactNoise,
}

impl SecurePrepared for SecureNoisyMax {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        let mut max = RunningMax::new(i128::MIN);
        for (a, (&q, &t)) in self.q.iter().zip(&self.t).enumerate() {
            let v = i128::from(q) + draw_noise(self.noise, rng, self.s, t);
            max.offer(v, a, |n| rng.below(n));
        }
        max.index()
    }
}

/// Random stopping on the grid: K exact stopping draws, each a uniform candidate with discrete
/// noise of rate ε'/(m·D_a); the best record wins, ties uniformly at random.
pub(crate) struct SecureRandomStopping {
    pub(crate) q: Vec<i64>,
    pub(crate) s: u128,
    pub(crate) t: Vec<u128>,
    pub(crate) noise: ExactNoise,
    pub(crate) stopping: ExactStopping,
}

impl SecureRandomStopping {
    /// One selection and the number of draws K it made.
    pub(crate) fn sample_counting(&self, rng: &mut SecureRng) -> (usize, u64) {
        let k = self.q.len() as u64;
        let draws = self.stopping.sample(rng);
        let mut max = RunningMax::new(i128::MIN);
        for _ in 0..draws {
            let a = rng.below(k) as usize;
            let v = i128::from(self.q[a]) + draw_noise(self.noise, rng, self.s, self.t[a]);
            max.offer(v, a, |n| rng.below(n));
        }
        (max.index(), draws)
    }
}

impl SecurePrepared for SecureRandomStopping {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        self.sample_counting(rng).0
    }
}

/// Randomised response on one bit with ε' = `eps.num`/2^32: reports the true bit with probability
/// exactly `1/(1 + e^{−ε'})`, by rejection — propose "truth" or "lie" with a fair bit and accept a
/// lie with probability e^{−ε'}.
pub(crate) fn randomized_response(rng: &mut SecureRng, bit: bool, eps: SecureEpsilon) -> bool {
    loop {
        if rng.bit() {
            return bit;
        }
        if bernoulli_exp_neg(rng, u128::from(eps.num), 1u128 << FRACTION_BITS) {
            return !bit;
        }
    }
}

/// `k`-randomised response with ε' (docs/mechanisms.md, `krr`): the true argmax (uniform among tied maxima)
/// with probability `1/(1 + (k−1)e^{−ε'})`, every other candidate with the rest, uniformly — by
/// rejection: propose the truth with weight 1 and each other candidate with weight e^{−ε'}.
pub(crate) struct SecureKrr {
    pub(crate) k: usize,
    pub(crate) argmax: Vec<usize>,
    pub(crate) eps: SecureEpsilon,
}

impl SecurePrepared for SecureKrr {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        let top = self.argmax[rng.below(self.argmax.len() as u64) as usize];
        if self.k == 1 {
            return top;
        }
        loop {
            let j = rng.below(self.k as u64) as usize;
            if j == 0 {
                return top;
            }
            if bernoulli_exp_neg(rng, u128::from(self.eps.num), 1u128 << FRACTION_BITS) {
                // The (j−1)-th of the other candidates.
                let o = j - 1;
                return if o >= top { o + 1 } else { o };
            }
        }
    }
}

/// Uniform choice (`random`).
pub(crate) struct SecureUniform(pub(crate) usize);

impl SecurePrepared for SecureUniform {
    fn sample(&self, rng: &mut SecureRng) -> usize {
        rng.below(self.0 as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid's floor, ceiling and power-of-two scaling equal the C library's expressions they
    /// replace, at integers, halves, the 2^52 boundary, the clamp, infinities and NaN.
    #[test]
    fn fast_rounding_equals_the_library_expressions() {
        let mut xs = vec![
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
        ];
        for b in [
            0.0,
            1.0,
            2.0,
            1e6,
            2f64.powi(52),
            2f64.powi(53),
            2f64.powi(62),
            2f64.powi(70),
        ] {
            for off in [-1.0, -0.5, -1e-9, 0.0, 1e-9, 0.5, 1.0] {
                for s in [1.0, -1.0] {
                    xs.push(s * (b + off));
                    xs.push(s * f64::from_bits((b + off).to_bits().wrapping_add(1)));
                    xs.push(s * f64::from_bits((b + off).to_bits().wrapping_sub(1)));
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            xs.push(f64::from_bits(x));
            xs.push((x >> 11) as f64 / 1024.0 - 4e12);
        }
        for &v in &xs {
            let floor = v.floor().clamp(-SCORE_CLAMP, SCORE_CLAMP) as i64;
            assert_eq!(floor_clamped(v), floor, "floor of {v:e}");
            assert_eq!(
                ceil_at_least_one(v),
                (v.ceil() as u64).max(1),
                "ceil of {v:e}"
            );
        }
        for p in [
            -2200, -1100, -1001, -1000, -999, -60, -1, 0, 1, 40, 1000, 1001, 2200,
        ] {
            let s = Pow2Scale::new(p);
            for &v in xs.iter().take(2000) {
                assert_eq!(
                    s.apply(v).to_bits(),
                    scale_pow2(v, p).to_bits(),
                    "{v:e} * 2^{p}"
                );
            }
        }
        // Power: truncation alone is not the floor of a negative non-integer.
        assert_ne!((-0.5f64) as i64, floor_clamped(-0.5));
    }
}
