//! Private amplification with dummy classes (Liu & Talwar §5.4 and Appendix C, improving Gupta et
//! al.'s amplification): one run of each of n independent ε-DP candidates, each with a score; d
//! dummy classes of score τ are added, every score above τ is brought back to τ, and the
//! exponential mechanism with parameter ε′ picks a class. A dummy means "no candidate".
//!
//! Class i has weight `w_i = exp(ε′·(min(s_i, τ) − τ))` ∈ (0, 1] (at ε′ = ∞: 1 if `s_i ≥ τ`, else
//! 0), each dummy weight 1, so `P(i) = w_i/(d + Σw)` and `P(dummy) = E[1/(1 + Σ X_i)]` with
//! `X_i = w_i/d` ∈ [0, 1]. At ε′ = ∞ and d = 1 this is the uniform choice among the candidates
//! above τ and one dummy, the case the paper singles out: the candidates' privacy for the
//! training set does not depend on ε′.
//!
//! Lemma C.2 bounds that negative moment for independent X_i in [0, 1] with means m_i, μ = Σm_i
//! ([`negative_moment_bounds`]): `1/(1 + μ) ≤ E[1/(1 + ΣX_i)] ≤ ∫₀¹ Π(1 − (1 − t)m_i) dt ≤
//! (1 − e^{−μ})/μ` — Jensen below; above, `1/(1 + x) = ∫₀¹ t^x dt` and `t^x ≤ 1 − (1 − t)x` on
//! [0, 1] (the chord of a convex function). The upper bound is attained when every X_i is 0 or 1.
//! The theorem's utility half follows: `P(dummy) ≤ ∫₀¹ Π(1 − (1 − t)E[w_i]/d) dt ≤ d/Σ E[w_i]`.
//! The seed lost the theorem's privacy constant; recsel measures the release's privacy loss on
//! exact laws (tests/amplification.rs) and claims none of its own.

use rand::Rng as _;

use crate::error::{Error, Result};
use crate::rng::Rng;

/// The amplifier: ε′ (∞ allowed), τ and d ≥ 1 dummies, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DummyAmplification {
    eps_em: f64,
    threshold: f64,
    dummies: u64,
}

impl DummyAmplification {
    /// ε′ > 0 (`f64::INFINITY`: uniform among the scores at or above τ), τ finite, d ≥ 1.
    pub fn new(eps_em: f64, threshold: f64, dummies: u64) -> Result<Self> {
        if eps_em.is_nan() || eps_em <= 0.0 {
            return Err(Error::InvalidParameter {
                name: "eps_em",
                requirement: "> 0 (infinity allowed)",
                value: eps_em,
            });
        }
        if !threshold.is_finite() {
            return Err(Error::InvalidParameter {
                name: "threshold",
                requirement: "finite",
                value: threshold,
            });
        }
        if dummies == 0 {
            return Err(Error::InvalidParameter {
                name: "dummies",
                requirement: ">= 1",
                value: 0.0,
            });
        }
        Ok(DummyAmplification {
            eps_em,
            threshold,
            dummies,
        })
    }

    /// The weight of a class of score `s`: `exp(ε′·(min(s, τ) − τ))` (NaN scores weigh 0).
    pub fn weight(&self, s: f64) -> f64 {
        if s.is_nan() {
            return 0.0;
        }
        if s >= self.threshold {
            return 1.0;
        }
        if self.eps_em.is_infinite() {
            0.0
        } else {
            (self.eps_em * (s - self.threshold)).exp()
        }
    }

    /// The law of the choice given the scores: `P(i) = w_i/(d + Σw)` for each candidate, then
    /// `P(dummy) = d/(d + Σw)` last.
    pub fn law(&self, scores: &[f64]) -> Vec<f64> {
        let w: Vec<f64> = scores.iter().map(|&s| self.weight(s)).collect();
        let d = self.dummies as f64;
        let z = d + w.iter().sum::<f64>();
        let mut p: Vec<f64> = w.iter().map(|w| w / z).collect();
        p.push(d / z);
        p
    }

    /// One choice given the scores: `Some(i)`, or `None` for a dummy.
    pub fn sample(&self, scores: &[f64], rng: &mut Rng) -> Option<usize> {
        let law = self.law(scores);
        let u: f64 = rng.random();
        let mut acc = 0.0;
        for (i, p) in law[..scores.len()].iter().enumerate() {
            acc += p;
            if u < acc {
                return Some(i);
            }
        }
        None
    }

    /// Lemma C.2's bounds on `P(dummy)` for candidates whose weights have means `mean_weights`
    /// (each in [0, 1]).
    pub fn dummy_probability_bounds(&self, mean_weights: &[f64]) -> Result<(f64, f64)> {
        let d = self.dummies as f64;
        let m: Vec<f64> = mean_weights.iter().map(|w| w / d).collect();
        negative_moment_bounds(&m)
    }
}

/// Lemma C.2: for independent X_i in [0, 1] with means `means`, the lower and upper bounds
/// `(1/(1 + μ), ∫₀¹ Π(1 − (1 − t)m_i) dt)` on `E[1/(1 + ΣX_i)]` (module docs). The integral is of
/// a polynomial of degree n, computed by composite 5-point Gauss–Legendre quadrature on n + 1
/// panels (exact up to degree 9; beyond, each panel is a smooth positive product of n linear
/// factors, integrated to rounding error — checked against enumeration in the tests).
pub fn negative_moment_bounds(means: &[f64]) -> Result<(f64, f64)> {
    if let Some(&m) = means.iter().find(|m| !(0.0..=1.0).contains(*m)) {
        return Err(Error::InvalidParameter {
            name: "mean",
            requirement: "in [0, 1]",
            value: m,
        });
    }
    let mu: f64 = means.iter().sum();
    // ∫₀¹ Π(1 − u·m_i) du (u = 1 − t).
    let panels = means.len() + 1;
    let (x, w) = (
        [
            0.0,
            -0.538_469_310_105_683,
            0.538_469_310_105_683,
            -0.906_179_845_938_664,
            0.906_179_845_938_664,
        ],
        [
            0.568_888_888_888_889,
            0.478_628_670_499_366,
            0.478_628_670_499_366,
            0.236_926_885_056_189,
            0.236_926_885_056_189,
        ],
    );
    let h = 1.0 / panels as f64;
    let mut upper = 0.0;
    for p in 0..panels {
        let mid = (p as f64 + 0.5) * h;
        for (xi, wi) in x.iter().zip(w) {
            let u = mid + 0.5 * h * xi;
            upper += 0.5 * h * wi * means.iter().map(|m| 1.0 - u * m).product::<f64>();
        }
    }
    Ok((1.0 / (1.0 + mu), upper))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_laws_and_bounds() {
        let a = DummyAmplification::new(f64::INFINITY, 0.5, 1).unwrap();
        assert_eq!(
            a.law(&[0.2, 0.7, 0.9]),
            vec![0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]
        );
        let b = DummyAmplification::new(2.0, 1.0, 2).unwrap();
        assert!((b.weight(0.0) - (-2.0f64).exp()).abs() < 1e-15 && b.weight(3.0) == 1.0);
        assert!(DummyAmplification::new(0.0, 1.0, 1).is_err());
        assert!(DummyAmplification::new(1.0, 1.0, 0).is_err());
        // One Bernoulli(m): E[1/(1 + X)] = 1 − m/2 = ∫₀¹ (1 − u m) du.
        let (lo, hi) = negative_moment_bounds(&[0.3]).unwrap();
        assert!((hi - 0.85).abs() < 1e-12 && (lo - 1.0 / 1.3).abs() < 1e-12);
        assert!(negative_moment_bounds(&[1.5]).is_err());
        // The polynomial integral is below (1 − e^{−μ})/μ.
        let m = vec![0.4; 50];
        let (_, hi) = negative_moment_bounds(&m).unwrap();
        assert!(hi <= (1.0 - (-20.0f64).exp()) / 20.0);
    }
}
