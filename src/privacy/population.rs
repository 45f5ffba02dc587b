//! What a release says about one population it learned from or serves: the unit of privacy, the
//! guarantee (or that there is none) and the mechanism that gives it. The training entry lives in
//! `model.json` (`ModelMeta::training_privacy`); the calibration, tuning and serving entries are
//! added by the layers that own them, and the release's privacy report lists them all.

use serde::{Deserialize, Serialize};

use super::Population;

/// One population's privacy, as recorded in a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PopulationPrivacy {
    /// Who.
    pub population: Population,
    /// The unit a neighbouring data set differs by, e.g. `user (at most 20 interactions kept)`
    /// or `request`.
    pub unit: String,
    /// ε of the guarantee; `None` when this population is not protected (its data are treated as
    /// public, and the report says so).
    pub epsilon: Option<f64>,
    /// δ of the guarantee (0 for pure ε-DP).
    pub delta: f64,
    /// The mechanism that gives it (or what makes it non-private).
    pub mechanism: String,
    /// Anything else a reader needs (the zCDP ρ, a noise scale, a cap).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl PopulationPrivacy {
    /// A population whose data were used without any differential privacy.
    pub fn public(population: Population, what: &str) -> Self {
        PopulationPrivacy {
            population,
            unit: "none".to_string(),
            epsilon: None,
            delta: 0.0,
            mechanism: format!("not differentially private: {what}"),
            note: String::new(),
        }
    }

    /// Whether this population has a DP guarantee.
    pub fn is_private(&self) -> bool {
        self.epsilon.is_some()
    }
}
