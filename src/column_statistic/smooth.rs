//! Local and β-smooth sensitivity of an order statistic, and the smooth-sensitivity mechanisms
//! (Nissim, Raskhodnikova & Smith 2007, "Smooth sensitivity and sampling in private data
//! analysis", §3.1 for the median; docs/statistics.md, "Smooth sensitivity").
//!
//! Data clipped to `[lo, hi]` and sorted, padded with `x_0 = lo` and `x_{n+1} = hi`; the statistic
//! is the m-th order statistic (m = max(1, ⌈qn⌉)). Replacing one record moves it at most to a
//! neighbouring order statistic, so the local sensitivity is
//! `LS(x) = max(x_m − x_{m−1}, x_{m+1} − x_m)`. Replacing k records lets the m-th move anywhere in
//! `[x_{m−k}, x_{m+k}]`, and the largest local sensitivity within distance k is
//! `A_k(x) = max_{0 ≤ t ≤ k+1} (x_{m+t} − x_{m+t−k−1})` (indices clamped to the padding). The
//! β-smooth sensitivity is `S_β(x) = max_k e^{−kβ} A_k(x)`, i.e. the maximum over pairs
//! l ≤ m ≤ u, l < u, of `e^{−β(u−l−1)} (x_u − x_l)` (the pair (l, u) is A_k's term with
//! k = u − l − 1 and t = u − m).
//!
//! For l₁ < l₂ and u₁ < u₂, `(x_{u₁} − x_{l₁})(x_{u₂} − x_{l₂}) ≥ (x_{u₁} − x_{l₂})(x_{u₂} − x_{l₁})`
//! (the difference is `(x_{l₂} − x_{l₁})(x_{u₂} − x_{u₁}) ≥ 0`), so the rightmost maximising u of
//! row l does not decrease with l and divide and conquer finds every row's maximum in
//! O(n log n) (NRS07 §3.1 uses the same monotonicity).
//!
//! The mechanism releases `f(x) + (S_β(x)/α)·Z`. Between neighbours x, y: |f(x) − f(y)| ≤ S(x)
//! and |ln S(y)/S(x)| ≤ β, so the output density of y is that of x slid by at most α noise units
//! and dilated by at most e^β. For the standard Cauchy density h: sliding by Δ changes ln h by at
//! most 2·asinh(|Δ|/2) ≤ |Δ|, dilating by e^λ (density e^{−λ} h(e^{−λ} z)) by at most |λ|; so
//! α + β ≤ ε gives ε-DP, and recsel takes α = β = ε/2 (a direct bound for γ = 2; NRS07 Lemma 2.7's
//! general constants for densities ∝ 1/(1 + |z|^γ) are smaller). For the Laplace density, sliding
//! costs at most α = ε/2 and dilating by at most β = ε/(2 ln(2/δ)) costs ε/2 except on an event of
//! probability δ (NRS07 Lemma 2.9): (ε, δ)-DP.
//!
//! [`SmoothNoise::CauchyNrs07`] keeps the same standard Cauchy noise with the constants NRS07 state
//! for densities ∝ 1/(1 + |z|^γ) (their admissibility lemma, as it is usually applied: α = β =
//! ε/(2(γ + 1)), so ε/6 at γ = 2): the noise is three times larger than with α = β = ε/2, for the
//! same ε. It is offered for comparison (docs/results.md, "Private medians").

use super::{check_range, rank};
use crate::error::{Error, Result};
use crate::mechanisms::{check_epsilon, Guarantee};
use crate::numerics::distributions::{cauchy1, laplace1};
use crate::rng::Rng;

/// The sorted data padded with `lo` (index 0) and `hi` (index n + 1).
fn padded(sorted: &[f64], lo: f64, hi: f64) -> impl Fn(usize) -> f64 + '_ {
    let n = sorted.len();
    move |i: usize| {
        if i == 0 {
            lo
        } else if i > n {
            hi
        } else {
            sorted[i - 1]
        }
    }
}

/// The local sensitivity of the m-th order statistic (1 ≤ m ≤ n) of `sorted` (clipped to
/// `[lo, hi]`, ascending) under replacement.
pub fn local_sensitivity(sorted: &[f64], m: usize, lo: f64, hi: f64) -> f64 {
    let x = padded(sorted, lo, hi);
    (x(m) - x(m - 1)).max(x(m + 1) - x(m))
}

/// The β-smooth sensitivity (β > 0) of the m-th order statistic of `sorted` (clipped, ascending,
/// 1 ≤ m ≤ n): `max e^{−β(u−l−1)} (x_u − x_l)` over `0 ≤ l ≤ m ≤ u ≤ n+1`, l < u, by divide and
/// conquer over the rows l (module docs), in log space so no term underflows.
pub fn smooth_sensitivity(sorted: &[f64], m: usize, lo: f64, hi: f64, beta: f64) -> f64 {
    let n = sorted.len();
    let x = padded(sorted, lo, hi);
    let log_v = |l: usize, u: usize| -> f64 {
        let gap = x(u) - x(l);
        if u > l && gap > 0.0 {
            gap.ln() - beta * (u - l - 1) as f64
        } else {
            f64::NEG_INFINITY
        }
    };
    let mut best = f64::NEG_INFINITY;
    // (rows l_lo..=l_hi, columns u_lo..=u_hi) still to search.
    let mut stack = vec![(0usize, m, m, n + 1)];
    while let Some((l_lo, l_hi, u_lo, u_hi)) = stack.pop() {
        let l = l_lo + (l_hi - l_lo) / 2;
        let (mut arg, mut val) = (u_lo, f64::NEG_INFINITY);
        for u in u_lo..=u_hi {
            let v = log_v(l, u);
            if v >= val {
                arg = u;
                val = v;
            }
        }
        best = best.max(val);
        if l > l_lo {
            stack.push((l_lo, l - 1, u_lo, arg));
        }
        if l < l_hi {
            stack.push((l + 1, l_hi, arg, u_hi));
        }
    }
    best.exp()
}

/// The noise of a smooth-sensitivity mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SmoothNoise {
    /// Standard Cauchy noise, α = β = ε/2: ε-DP.
    Cauchy,
    /// Standard Cauchy noise with NRS07's constants α = β = ε/6: ε-DP, three times the noise.
    CauchyNrs07,
    /// Standard Laplace noise, α = ε/2, β = ε/(2 ln(2/δ)): (ε, δ)-DP.
    Laplace {
        /// δ in (0, 1).
        delta: f64,
    },
}

/// The smooth-sensitivity mechanism for a quantile on `[lo, hi]`, with validated parameters.
#[derive(Debug, Clone, Copy)]
pub struct SmoothSensitivity {
    epsilon: f64,
    noise: SmoothNoise,
    lo: f64,
    hi: f64,
    alpha: f64,
    beta: f64,
}

impl SmoothSensitivity {
    /// ε > 0, the noise (δ in (0, 1) for Laplace) and the range (finite, lo < hi).
    pub fn new(epsilon: f64, noise: SmoothNoise, lo: f64, hi: f64) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        check_range(lo, hi)?;
        let (alpha, beta) = match noise {
            SmoothNoise::Cauchy => (epsilon / 2.0, epsilon / 2.0),
            SmoothNoise::CauchyNrs07 => (epsilon / 6.0, epsilon / 6.0),
            SmoothNoise::Laplace { delta } => {
                if !(delta > 0.0 && delta < 1.0) {
                    return Err(Error::InvalidParameter {
                        name: "delta",
                        requirement: "in (0, 1)",
                        value: delta,
                    });
                }
                (epsilon / 2.0, epsilon / (2.0 * (2.0 / delta).ln()))
            }
        };
        Ok(SmoothSensitivity {
            epsilon,
            noise,
            lo,
            hi,
            alpha,
            beta,
        })
    }

    /// The noise.
    pub fn noise(&self) -> SmoothNoise {
        self.noise
    }

    /// α: the noise is S_β/α times a standard draw.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// β of the smooth sensitivity.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// ε-DP (Cauchy) or (ε, δ)-DP (Laplace).
    pub fn guarantee(&self) -> Guarantee {
        match self.noise {
            SmoothNoise::Cauchy | SmoothNoise::CauchyNrs07 => Guarantee::Pure {
                epsilon: self.epsilon,
            },
            SmoothNoise::Laplace { delta } => Guarantee::Approx {
                epsilon: self.epsilon,
                delta,
            },
        }
    }

    /// The data clipped to the range and sorted, and the rank of the q-quantile.
    fn prepare(&self, data: &[f64], q: f64) -> (Vec<f64>, usize) {
        let mut v: Vec<f64> = data.iter().map(|x| x.clamp(self.lo, self.hi)).collect();
        v.sort_by(f64::total_cmp);
        let m = rank(q, v.len());
        (v, m)
    }

    /// The true q-quantile of `data` and the noise scale `S_β/α` (at least one record).
    pub fn center_and_scale(&self, data: &[f64], q: f64) -> (f64, f64) {
        let (v, m) = self.prepare(data, q);
        let s = smooth_sensitivity(&v, m, self.lo, self.hi, self.beta);
        (v[m - 1], s / self.alpha)
    }

    /// One private q-quantile, clamped to the range (post-processing).
    pub fn sample(&self, data: &[f64], q: f64, rng: &mut Rng) -> f64 {
        let (center, scale) = self.center_and_scale(data, q);
        self.sample_at(center, scale, rng)
    }

    /// `center + scale·Z` clamped to the range, for a (center, scale) from
    /// [`SmoothSensitivity::center_and_scale`] (computed once for many releases on the same data).
    pub fn sample_at(&self, center: f64, scale: f64, rng: &mut Rng) -> f64 {
        let z = match self.noise {
            SmoothNoise::Cauchy | SmoothNoise::CauchyNrs07 => cauchy1(rng),
            SmoothNoise::Laplace { .. } => laplace1(rng),
        };
        (center + scale * z).clamp(self.lo, self.hi)
    }
}
