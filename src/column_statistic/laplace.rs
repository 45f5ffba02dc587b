//! The Laplace mechanism for a statistic with a declared global sensitivity (Dwork, McSherry,
//! Nissim & Smith 2006; docs/statistics.md, "The Laplace mechanism"): `f(D) + (GS/ε)·Z`, Z standard
//! Laplace. The output densities on neighbours are `exp(−ε|y − f(D)|/GS)` shifted by at most GS,
//! so their ratio is at most e^ε everywhere: ε-DP. Clamping the output to a public range
//! afterwards is post-processing.

use crate::error::{Error, Result};
use crate::mechanisms::check_epsilon;
use crate::numerics::distributions::laplace1;
use crate::rng::Rng;

/// The Laplace mechanism with validated ε and sensitivity.
#[derive(Debug, Clone, Copy)]
pub struct LaplaceStatistic {
    epsilon: f64,
    sensitivity: f64,
}

impl LaplaceStatistic {
    /// ε > 0 and a global sensitivity > 0 (finite).
    pub fn new(epsilon: f64, sensitivity: f64) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        if !(sensitivity.is_finite() && sensitivity > 0.0) {
            return Err(Error::InvalidParameter {
                name: "sensitivity",
                requirement: "finite and > 0",
                value: sensitivity,
            });
        }
        Ok(LaplaceStatistic {
            epsilon,
            sensitivity,
        })
    }

    /// ε of one release.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The noise scale GS/ε.
    pub fn scale(&self) -> f64 {
        self.sensitivity / self.epsilon
    }

    /// `value` + Lap(GS/ε).
    pub fn release(&self, value: f64, rng: &mut Rng) -> f64 {
        value + self.scale() * laplace1(rng)
    }
}
