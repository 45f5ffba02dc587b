//! The options of `recsel recommend` and of the Python package's `Recommender`, declared once
//! ([`RecommendOptions`]): the command line and the binding fill them in, [`RecommendOptions::config`]
//! resolves them into the [`RecommendConfig`] a [`super::Recommender`] is built with.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::RecommendConfig;
use crate::error::{Error, Result};
use crate::mechanisms::{MechValues, Registry};
use crate::options::option_table;
use crate::rng::NoiseMode;

option_table! {
    /// Every option of serving with its default (docs/deployment.md, "Serving").
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct RecommendOptions {
        /// Model directory written by `recsel fit --out DIR` (model.json, release.json, …).
        #[option(value_name = "DIR", required = true, group = "Model")]
        pub model: PathBuf,
        /// Mechanism (`recsel mechanisms`); one that is not ε-DP needs --allow-non-private.
        #[option(flag = "mech", value_name = "MECH", required = true, group = "Selection")]
        pub mechanism: String,
        /// ε of each recommendation.
        #[option(flag = "eps", value_name = "EPS", required = true, group = "Selection")]
        pub epsilon: f64,
        /// Candidates per user (the user's top items by model score).
        #[option(group = "Selection")]
        pub top: usize = 500,
        /// Parameters of the mechanism.
        #[flatten]
        pub params: MechValues,
        /// Release-grade selection: the mechanism's secure path (exact discrete noise,
        /// OS-seeded ChaCha20, no seed; docs/secure.md). Use it for anything shown to users.
        #[option(group = "Selection")]
        pub secure: bool = false,
        /// Accept a mechanism that is not ε-DP at this --top (rnmh, rnmh-laplace): reference
        /// runs only.
        #[option(group = "Selection")]
        pub allow_non_private: bool = false,
        /// Let the user's own items be recommended too. With --top at least the number of items
        /// the candidate list then no longer depends on the history and the guarantee is
        /// user-level (docs/deployment.md, "What is protected, and what is not").
        #[option(group = "Selection")]
        pub include_history: bool = false,
    }
}

impl RecommendOptions {
    /// The configuration these options give: the mechanism with its parameters resolved
    /// against `registry`, ε, the candidates and the noise mode. Errors name a missing or bad
    /// option.
    pub fn config(&self, registry: &Registry) -> Result<RecommendConfig> {
        let missing = |what: &str| Error::Invalid(format!("{what} is required"));
        let mechanism = self
            .mechanism
            .as_deref()
            .ok_or_else(|| missing("mechanism (--mech)"))?;
        let epsilon = self.epsilon.ok_or_else(|| missing("epsilon (--eps)"))?;
        registry.get(mechanism)?;
        let params = registry.resolve(&self.params)?.with_epsilon(epsilon);
        let mut cfg = RecommendConfig::new(
            mechanism,
            params,
            self.top.unwrap_or(500),
            NoiseMode::from_flag(self.is_secure()),
        );
        cfg.allow_non_private = self.allow_non_private == Some(true);
        cfg.exclude_history = self.include_history != Some(true);
        Ok(cfg)
    }

    /// The model folder; an error when it is not given.
    pub fn model_dir(&self) -> Result<&std::path::Path> {
        self.model
            .as_deref()
            .ok_or_else(|| Error::Invalid("model (--model) is required".into()))
    }

    /// Whether the secure path is asked for.
    pub fn is_secure(&self) -> bool {
        self.secure == Some(true)
    }
}
