//! Exact samplers for the noise and stopping-time distributions of docs/mechanisms.md.
//!
//! Every sampler takes the generator by `&mut` (the caller owns the stream) and validates its
//! parameters once, in `new`.

use rand::Rng as _;
use rand_distr::{Distribution, Exp1, Gamma, Poisson};
use statrs::function::gamma::ln_gamma;

use crate::error::{Error, Result};
use crate::rng::Rng;

/// One draw of Exp(mean 1) (ziggurat, exact up to floating point).
#[inline]
pub fn exp1(rng: &mut Rng) -> f64 {
    Exp1.sample(rng)
}

/// One draw of the standard Laplace distribution (density ½·e^{−|x|}): an Exp(1) magnitude with a
/// fair random sign.
#[inline]
pub fn laplace1(rng: &mut Rng) -> f64 {
    let e: f64 = Exp1.sample(rng);
    if rng.random::<bool>() {
        e
    } else {
        -e
    }
}

/// One draw of the standard Cauchy distribution (density 1/(π(1 + x²))): tan(π(U − ½)) for U
/// uniform on (0, 1].
#[inline]
pub fn cauchy1(rng: &mut Rng) -> f64 {
    (std::f64::consts::PI * (uniform_open0(rng) - 0.5)).tan()
}

/// A uniform index in `0..k` and an independent fair sign (`true`: +) from **one** uniform draw
/// `r` in `0..2k`: the index is `r / 2`, the sign `r % 2` — every (index, sign) pair has
/// probability 1/(2k), the law of two separate draws at half the generator words (the random
/// stopping family draws one per noisy value; docs/mechanisms.md, "Random stopping").
#[inline]
pub fn index_and_sign(rng: &mut Rng, k: usize) -> (usize, bool) {
    let r = rng.random_range(0..2 * k);
    (r >> 1, r & 1 == 0)
}

/// A uniform draw from (0, 1]: never 0, so its logarithm is finite.
#[inline]
pub fn uniform_open0(rng: &mut Rng) -> f64 {
    1.0 - rng.random::<f64>()
}

fn check_gamma(gamma: f64) -> Result<()> {
    if gamma.is_finite() && gamma > 0.0 && gamma <= 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name: "gamma",
            requirement: "in (0, 1]",
            value: gamma,
        })
    }
}

/// Geometric distribution on {1, 2, …}: the number of Bernoulli(γ) trials up to and including the
/// first success, `P(K = k) = (1 − γ)^{k−1} γ`. The stopping time of RS_γ (docs/mechanisms.md, `rs`).
#[derive(Debug, Clone, Copy)]
pub struct Geometric1 {
    gamma: f64,
    /// ln(1 − γ), or −∞ when γ = 1.
    log_q: f64,
}

impl Geometric1 {
    /// γ in (0, 1].
    pub fn new(gamma: f64) -> Result<Self> {
        check_gamma(gamma)?;
        Ok(Geometric1 {
            gamma,
            log_q: (-gamma).ln_1p(),
        })
    }

    /// The success probability γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Probability mass at `k ≥ 1`.
    pub fn pmf(&self, k: u64) -> f64 {
        if k == 0 {
            return 0.0;
        }
        ((k - 1) as f64 * self.log_q).exp() * self.gamma
    }

    /// One draw by inversion: `K = 1 + ⌊ln U / ln(1 − γ)⌋`, U uniform on (0, 1].
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.gamma >= 1.0 {
            return 1;
        }
        let u = uniform_open0(rng);
        let k = (u.ln() / self.log_q).floor();
        // The float → int cast saturates; a K beyond 2^63 has probability < (1−γ)^(2^63).
        1 + k as u64
    }
}

/// Logarithmic (log-series) distribution with parameter p = 1 − γ on {1, 2, …}:
/// `P(K = k) = (1 − γ)^k / (k ln(1/γ))`. The stopping time of improved RS with η = 0 (docs/mechanisms.md,
/// `rs-tnb`). Sampled with Kemp's accelerated algorithm "LK" (Kemp 1981; Devroye 1986 §X.5), which
/// is exact and O(1) expected time for every γ.
#[derive(Debug, Clone, Copy)]
pub struct Logarithmic {
    gamma: f64,
    /// ln(1 − p) = ln γ.
    log_gamma: f64,
}

impl Logarithmic {
    /// γ in (0, 1]; γ = 1 is the point mass at 1 (the limit γ → 1).
    pub fn new(gamma: f64) -> Result<Self> {
        check_gamma(gamma)?;
        Ok(Logarithmic {
            gamma,
            log_gamma: gamma.ln(),
        })
    }

    /// Probability mass at `k ≥ 1`.
    pub fn pmf(&self, k: u64) -> f64 {
        if k == 0 {
            return 0.0;
        }
        if self.gamma >= 1.0 {
            return if k == 1 { 1.0 } else { 0.0 };
        }
        (k as f64 * (-self.gamma).ln_1p()).exp() / (k as f64 * -self.log_gamma)
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let p = 1.0 - self.gamma;
        if p <= 0.0 {
            return 1;
        }
        loop {
            let v: f64 = rng.random();
            if v >= p {
                return 1;
            }
            let u: f64 = rng.random();
            // q = 1 − (1 − p)^u = 1 − γ^u, computed without cancellation.
            let q = -(self.log_gamma * u).exp_m1();
            if v <= q * q {
                if v == 0.0 || q <= 0.0 {
                    continue;
                }
                let k = (1.0 + v.ln() / q.ln()).floor();
                if k < 1.0 {
                    continue;
                }
                return k as u64;
            }
            return if v >= q { 1 } else { 2 };
        }
    }
}

/// Truncated negative binomial `D_{η,γ}` of Papernot & Steinke (2022) on {1, 2, …} (docs/mechanisms.md,
/// `rs-tnb`): `P(K = k) = (1 − γ)^k / (γ^{−η} − 1) · Π_{l=0}^{k−1} (l + η)/(l + 1)` for η ≠ 0 and the
/// logarithmic distribution for η = 0. Any η > −1 and γ in (0, 1].
///
/// Exact sampling:
/// * η = 0: [`Logarithmic`].
/// * η > 0: the negative binomial NB(η, γ) is the Poisson–Gamma mixture `Poisson(Λ)`,
///   `Λ ~ Gamma(shape η, scale (1−γ)/γ)`; truncating at 0 is rejection of K = 0, which happens with
///   probability γ^η per attempt.
/// * −1 < η < 0: rejection from the logarithmic proposal. With `c_k = Π_{l=0}^{k−1}(l+η)/(l+1)`,
///   `|c_k| · k / |η| = Π_{l=1}^{k−1} (1 + η/l) ≤ 1`, so the target is at most
///   `M = |η| ln(1/γ) / (1 − γ^{−η})` times the proposal, and a proposed k is accepted with
///   probability `Π_{l=1}^{k−1}(1 + η/l)`; the expected acceptance rate is 1/M (≈ 0.2 at η = −0.5,
///   γ = 1e-4). The product decreases in k, so a rejection is decided as soon as it falls below U.
#[derive(Debug, Clone, Copy)]
pub struct TruncatedNegBinomial {
    eta: f64,
    gamma: f64,
    log: Logarithmic,
    gamma_dist: Option<Gamma<f64>>,
}

impl TruncatedNegBinomial {
    /// η > −1 (finite) and γ in (0, 1].
    pub fn new(eta: f64, gamma: f64) -> Result<Self> {
        if !(eta.is_finite() && eta > -1.0) {
            return Err(Error::InvalidParameter {
                name: "eta",
                requirement: "finite and > -1",
                value: eta,
            });
        }
        let log = Logarithmic::new(gamma)?;
        let gamma_dist =
            if eta > 0.0 && gamma < 1.0 {
                Some(Gamma::new(eta, (1.0 - gamma) / gamma).map_err(|e| {
                    Error::Invalid(format!("gamma distribution for eta = {eta}: {e}"))
                })?)
            } else {
                None
            };
        Ok(TruncatedNegBinomial {
            eta,
            gamma,
            log,
            gamma_dist,
        })
    }

    /// η.
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Probability mass at `k ≥ 1`, computed in log space.
    pub fn pmf(&self, k: u64) -> f64 {
        if self.eta == 0.0 {
            return self.log.pmf(k);
        }
        if k == 0 {
            return 0.0;
        }
        if self.gamma >= 1.0 {
            return if k == 1 { 1.0 } else { 0.0 };
        }
        // c_k = Π (l+η)/(l+1); for η < 0 every factor but the first is positive and the first (η)
        // is negative, as is the normaliser γ^{−η} − 1, so the ratio is positive.
        // |c_k| = |η| Γ(k+η) / (Γ(1+η) Γ(k+1)), all Γ arguments positive.
        let kf = k as f64;
        let log_c = self.eta.abs().ln() + ln_gamma(kf + self.eta)
            - ln_gamma(1.0 + self.eta)
            - ln_gamma(kf + 1.0);
        let norm = (-self.eta * self.gamma.ln()).exp_m1().abs();
        (k as f64 * (-self.gamma).ln_1p() + log_c).exp() / norm
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.gamma >= 1.0 {
            return 1;
        }
        if self.eta == 0.0 {
            return self.log.sample(rng);
        }
        if let Some(g) = &self.gamma_dist {
            loop {
                let lambda = g.sample(rng);
                if lambda.is_nan() || lambda <= 0.0 {
                    continue;
                }
                let k = match Poisson::new(lambda) {
                    Ok(p) => p.sample(rng),
                    // Λ beyond Poisson's range cannot occur for γ ≥ 1e-12; treat as a retry.
                    Err(_) => continue,
                };
                if k >= 1.0 {
                    return k as u64;
                }
            }
        }
        loop {
            let k = self.log.sample(rng);
            let u: f64 = rng.random();
            let mut accept = 1.0;
            let mut l = 1u64;
            while l < k && accept > u {
                accept *= 1.0 + self.eta / l as f64;
                l += 1;
            }
            if u < accept {
                return k;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmfs_sum_to_one() {
        for &gamma in &[0.5, 0.05, 0.008] {
            let g = Geometric1::new(gamma).unwrap();
            let s: f64 = (1..200_000).map(|k| g.pmf(k)).sum();
            assert!((s - 1.0).abs() < 1e-9, "geometric {gamma}: {s}");
            for &eta in &[-0.9, -0.5, 0.0, 0.5, 1.0, 2.5] {
                let t = TruncatedNegBinomial::new(eta, gamma).unwrap();
                let s: f64 = (1..20_000).map(|k| t.pmf(k)).sum();
                assert!((s - 1.0).abs() < 1e-6, "tnb {eta} {gamma}: {s}");
            }
        }
    }

    #[test]
    fn parameters_are_validated() {
        assert!(Geometric1::new(0.0).is_err());
        assert!(Geometric1::new(1.5).is_err());
        assert!(Geometric1::new(f64::NAN).is_err());
        assert!(TruncatedNegBinomial::new(-1.0, 0.1).is_err());
        assert!(TruncatedNegBinomial::new(f64::INFINITY, 0.1).is_err());
        assert!(TruncatedNegBinomial::new(0.5, 0.0).is_err());
    }
}
