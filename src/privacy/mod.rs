//! Privacy accounting, one floor below everything that releases data (docs/privacy-report.md,
//! docs/training-privacy.md): the populations a release protects ([`Population`]) and what it
//! says about each ([`PopulationPrivacy`]), the release's privacy report ([`report`]), the one
//! conversion between zCDP and (ε, δ) ([`zcdp_epsilon`], [`max_zcdp_rho`]), the Gaussian
//! mechanism's calibration ([`Gaussian`]) and noise source ([`NoiseSource`]), and the
//! contribution weight of one user ([`contribution_weight`]).
//!
//! The DP fit (`model::dp`, `model::dp_items`), the release's statistics
//! (`recommend::release_statistics`), the private tuner and the ledger's accountant
//! (`ledger::composition`) all ask here; none of them writes a population, a conversion or a
//! calibration of its own.

use std::fmt;

use serde::{Deserialize, Serialize};

mod contribution;
mod gaussian;
mod population;
pub mod report;
mod zcdp;

pub use contribution::contribution_weight;
pub use gaussian::{
    discrete_gaussian_on_grid, variance_on_grid, Gaussian, NoiseSource, SIGMA2_DEN,
};
pub use population::PopulationPrivacy;
pub use zcdp::{max_zcdp_rho, zcdp_epsilon};

/// A population a release learned from or serves. Each has its own guarantee; composition is
/// never summed across populations (docs/privacy-report.md). The order of the variants is the
/// order of the privacy report; each is written as its [`name`](Population::name) in words
/// (`training users`, …), the strings of every release file, and a name no population has is
/// refused when a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Population {
    /// The training users: the model weights and the counts released from their data.
    Training,
    /// The calibration (and tuning) users.
    Calibration,
    /// The served users: each recommendation and each ledger period.
    Served,
}

impl Population {
    /// Every population, in the report's order.
    pub const ALL: [Population; 3] = [
        Population::Training,
        Population::Calibration,
        Population::Served,
    ];

    /// The population in words, as release files write it.
    pub fn name(self) -> &'static str {
        match self {
            Population::Training => "training users",
            Population::Calibration => "calibration users",
            Population::Served => "served users",
        }
    }
}

impl Serialize for Population {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Population {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Population::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown population {s:?} (expected one of: {})",
                    Population::ALL.map(Population::name).join(", ")
                ))
            })
    }
}

impl fmt::Display for Population {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each population is written as today's string, reads back, and orders by the enum.
    #[test]
    fn populations_keep_their_strings_and_their_order() {
        for (p, s) in
            Population::ALL
                .into_iter()
                .zip(["training users", "calibration users", "served users"])
        {
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{s}\""));
            assert_eq!(
                serde_json::from_str::<Population>(&format!("\"{s}\"")).unwrap(),
                p
            );
            assert_eq!(p.to_string(), s);
        }
        // The report's columns pad it like the string it was.
        assert_eq!(format!("{:<14}|", Population::Served), "served users  |");
        assert!(Population::Training < Population::Calibration);
        assert!(Population::Calibration < Population::Served);
        // A string no population has is refused, not sorted somewhere.
        assert!(serde_json::from_str::<Population>("\"tuning users\"").is_err());
    }
}
