//! The Gaussian mechanism's calibration (docs/training-privacy.md, "Accounting"), shared by
//! every Gaussian release of the crate (the DP fit's Gram matrix, the item-set fit's counts):
//! σ from the L2 sensitivity Δ and the zCDP ρ, the secure path's rounding of the variance onto a
//! rational grid, and where the noise's randomness comes from.
//!
//! i.i.d. N(0, σ²) on every coordinate of a value of L2 sensitivity Δ is ρ-zCDP with
//! ρ = Δ²/(2σ²) (Bun–Steinke 2016); the discrete Gaussian of variance parameter σ² on integer
//! values is ρ-zCDP with the same ρ (Canonne–Kamath–Steinke 2020, Thm 14). The secure path's
//! variance parameter is a rational `num / 2^10`, rounded up (more noise, never less), and ρ is
//! recomputed from the rounded value.

use crate::error::Result;
use crate::numerics::exact::discrete_gaussian;
use crate::rng::SecureRng;

/// The secure path's variance parameter σ² is a rational `num / SIGMA2_DEN`, rounded up.
pub const SIGMA2_DEN: u128 = 1 << 10;

/// `variance` on the secure path's grid: the numerator over [`SIGMA2_DEN`], rounded up.
pub fn variance_on_grid(variance: f64) -> u128 {
    (variance * SIGMA2_DEN as f64).ceil() as u128
}

/// One draw of the discrete Gaussian of variance parameter `num / SIGMA2_DEN`.
pub fn discrete_gaussian_on_grid(rng: &mut SecureRng, num: u128) -> i128 {
    discrete_gaussian(rng, num, SIGMA2_DEN)
}

/// The calibration of one Gaussian release: the noise's σ and the ρ it gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gaussian {
    /// Standard deviation of each coordinate's noise, in the released value's units (the secure
    /// path: √ of its rounded variance).
    pub sigma: f64,
    /// ρ of the zCDP guarantee, with the noise actually drawn.
    pub rho: f64,
    /// The secure path's variance parameter of the integer values (the released value times
    /// `scale`), times [`SIGMA2_DEN`], rounded up; 0 on the floating-point path.
    pub sigma2_num: u128,
}

impl Gaussian {
    /// The release of a value of L2 sensitivity `sensitivity` spending `rho`: σ = Δ/√(2ρ). With
    /// `secure`, the noise is drawn on the integers `scale` × the value, so their variance
    /// `scale²σ²` is rounded up onto the grid and σ and ρ recomputed from it (ρ never above the
    /// requested one); `scale` is 1 when the value is already an integer one.
    pub fn calibrate(sensitivity: f64, rho: f64, secure: bool, scale: f64) -> Gaussian {
        let sigma = sensitivity / (2.0 * rho).sqrt();
        if !secure {
            return Gaussian {
                sigma,
                rho,
                sigma2_num: 0,
            };
        }
        let num = variance_on_grid(scale * scale * sigma * sigma);
        let s2 = num as f64 / SIGMA2_DEN as f64 / (scale * scale);
        Gaussian {
            sigma: s2.sqrt(),
            rho: sensitivity * sensitivity / (2.0 * s2),
            sigma2_num: num,
        }
    }
}

/// Where a release's noise comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseSource {
    /// The operating system's entropy (a release; nothing recorded can reproduce the noise).
    Os,
    /// A seed — **predictable, never for a release**: tests and audits.
    InsecureSeed(u64),
}

impl NoiseSource {
    /// The seed of the floating-point path's streams: drawn from the OS, or the test seed.
    pub fn fast_seed(self) -> u64 {
        match self {
            NoiseSource::Os => rand::random::<u64>(),
            NoiseSource::InsecureSeed(s) => s,
        }
    }

    /// The secure path's generator: the OS's, or one seeded by `stream` of the test seed (each
    /// independent part of a release derives its own).
    pub fn secure_rng(self, stream: impl FnOnce(u64) -> u64) -> Result<SecureRng> {
        match self {
            NoiseSource::Os => SecureRng::from_os(),
            NoiseSource::InsecureSeed(s) => Ok(SecureRng::from_seed_insecure(stream(s))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floating-point calibration is σ = Δ/√(2ρ); the secure one rounds the variance up, so
    /// its ρ is never above the requested one, and on a scaled integer value the grid is the
    /// integers' (σ² of the value is num/2^10/scale²).
    #[test]
    fn the_secure_grid_never_spends_more_than_requested() {
        let g = Gaussian::calibrate(3.0, 0.5, false, 1.0);
        assert_eq!((g.sigma, g.rho, g.sigma2_num), (3.0, 0.5, 0));
        for (sens, rho, scale) in [(3.0, 0.5, 1.0), (2.2, 0.013, 256.0), (10.0, 4.0, 1.0)] {
            let f = Gaussian::calibrate(sens, rho, false, scale);
            let s = Gaussian::calibrate(sens, rho, true, scale);
            assert!(s.rho <= rho && s.rho > 0.999 * rho, "{s:?}");
            assert!(s.sigma >= f.sigma);
            let v = s.sigma2_num as f64 / SIGMA2_DEN as f64;
            assert!((v - (scale * s.sigma).powi(2)).abs() < 1e-9 * v);
            assert!(v >= (scale * f.sigma).powi(2));
        }
        assert_eq!(variance_on_grid(1.0), 1024);
        assert_eq!(variance_on_grid(1.0 + 1e-9), 1025);
    }
}
