//! The options of the select job, declared once ([`SelectOptions`]). The command line
//! (`recsel select`), a pipeline's `[select]` table, the Python package (`recsel._native.SelectJob`)
//! and the Ray runner fill this one struct in; [`super::SelectJob::prepare`] resolves it. Its
//! resolved copy, with every value written out, is the `pipeline` table of the `config.toml`
//! beside a run's results, which `recsel run DIR/config.toml` reruns.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::PAPER_EPSILONS;
use crate::data::DataOptions;
use crate::error::{Error, Result};
use crate::mechanisms::{self, MechValues, Registry};
use crate::model::ModelOptions;
use crate::options::option_table;
use crate::scoring::{CandidatePolicy, Prior};

/// Seed of the train/test split and of synthetic data (as `recsel fit --seed`).
pub const DEFAULT_DATA_SEED: u64 = 42;

option_table! {
    /// Every option of the select job with its default (docs/protocol.md, steps 5–9). Unset
    /// options without a default here take the data set's (its descriptor: the model settings
    /// and γ of the paper), the seed of a run being resumed, or a seed drawn from OS entropy.
    /// In a table, mechanism parameters (`gamma`, `beta`, …) sit beside the other keys; a key
    /// that is neither is an error naming it ([`SelectOptions::check`]).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct SelectOptions {
        /// Where the interactions come from.
        #[flatten]
        pub data: DataOptions,
        /// Directory of the saved model to use or create (default `<out>/model`).
        #[option(value_name = "DIR", group = "Model")]
        pub model_dir: PathBuf,
        /// Seed of the train/test split and of synthetic data (`recsel fit --seed`).
        #[option(group = "Data")]
        pub data_seed: u64 = DEFAULT_DATA_SEED,
        /// The model's hyperparameters.
        #[flatten]
        pub model: ModelOptions,
        /// Mechanisms: `all` (the 14 of docs/mechanisms.md) or a comma-separated list.
        #[option(flag = "mech", value_name = "LIST", group = "Selection")]
        pub mechanisms: String = "all".to_string(),
        /// ε grid, comma separated.
        #[option(flag = "eps", value_name = "LIST", group = "Selection")]
        pub epsilons: Vec<f64> = PAPER_EPSILONS.to_vec(),
        /// Trials per (user, mechanism, ε).
        #[option(group = "Selection")]
        pub trials: u32 = 50,
        /// Candidates per user (the user's top items by model score, own items excluded: the
        /// paper's protocol, `--candidates history-top:N`).
        #[option(group = "Selection")]
        pub top: usize = 500,
        /// Candidate policy instead of --top: history-top:N (the paper's, the default with N =
        /// --top), all (every item, the user's own included), popular:N (the N most popular
        /// training items), heldout:N (the N items the users fitted on hold out most often)
        /// or pool:FILE (item ids, one per line); docs/deployment.md. With a policy that keeps
        /// the history the tables also report how often the pick was already the user's.
        #[option(value_name = "POLICY", conflicts = &["top"], group = "Selection")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub candidates: CandidatePolicy,
        /// A public per-item prior added to the candidates' scores before the mechanisms
        /// (docs/priors.md): none (the paper's), popularity:W (training popularity), heldout:W
        /// (how often the users fitted on hold each item out, when the data gives it)
        /// or file:PATH:W (public counts, ITEM COUNT per line). The tables still measure the
        /// scores without it.
        #[option(value_name = "PRIOR", group = "Selection")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub prior: Prior,
        /// Clip every candidate score to its item's [p1, p99] range, so that Δ_j bounds how far
        /// one user can move it: only a clipped run is a DP release. Off by default, as in the
        /// paper's text (seed 001 clips only its synthetic scores).
        #[option(negatable = true, group = "Selection")]
        pub clip: bool = false,
        /// Whose scores the per-item percentiles are taken over: `all` test users (the paper's
        /// text) or only those `without-item`, to whom it can be recommended.
        #[option(value_name = "WHO", choices = &["all", "without-item"], group = "Selection")]
        pub percentile_users: String = "all".to_string(),
        /// Mechanism parameters (γ defaults to the data set's: 0.008, or 0.0008 for Netflix).
        #[flatten]
        pub params: MechValues,
        /// Seed of the selection streams (default: the seed of a run being resumed, else OS
        /// entropy).
        #[option(group = "Selection")]
        pub seed: u64,
        /// ε of the per-user mGEM/GEM scatter plot (fig 13 d–f).
        #[option(value_name = "E", group = "Output")]
        pub scatter_eps: f64 = 1.0,
        /// Release-grade selection: every mechanism's secure path (exact discrete noise,
        /// OS-seeded ChaCha20, no seed; docs/secure.md). Mechanisms without one are left out of
        /// `all`.
        #[option(group = "Selection")]
        pub secure: bool = false,
    }
}

impl SelectOptions {
    /// What can be checked without the data, against the built-in mechanisms
    /// ([`SelectOptions::check_with`]).
    pub fn check(&self) -> Result<()> {
        self.check_with(&Registry::builtin())
    }

    /// What can be checked without the data: a data source is named, every other key is a
    /// parameter of a mechanism of `registry`, a seed is not given with `secure`, and the
    /// mechanisms and the ε grid are valid. Errors name the option.
    pub fn check_with(&self, registry: &Registry) -> Result<()> {
        self.data.check()?;
        registry.check_table_keys(&self.params, "[select]")?;
        if self.seed.is_some() && self.secure == Some(true) {
            return Err(Error::Invalid(
                "seed and secure exclude each other: a secure run draws from the OS, not from a \
                 seed"
                    .into(),
            ));
        }
        if self.top.is_some() && self.candidates.is_some() {
            return Err(Error::Invalid(
                "top and candidates exclude each other: top N is candidates history-top:N".into(),
            ));
        }
        registry.parse_list(&self.mechanism_list())?;
        for &e in &self.epsilon_grid() {
            mechanisms::check_epsilon(e)?;
        }
        Ok(())
    }

    /// The mechanism list (`all` unless given).
    pub fn mechanism_list(&self) -> String {
        self.mechanisms.clone().unwrap_or_else(|| "all".into())
    }

    /// The ε grid (the paper's unless given).
    pub fn epsilon_grid(&self) -> Vec<f64> {
        self.epsilons
            .clone()
            .unwrap_or_else(|| PAPER_EPSILONS.to_vec())
    }

    /// Whether the run is secure.
    pub fn is_secure(&self) -> bool {
        self.secure == Some(true)
    }

    /// The names of the mechanisms the run uses, looked up in `registry`
    /// ([`Registry::run_names`]).
    pub fn mechanism_names(&self, registry: &mechanisms::Registry) -> Result<Vec<String>> {
        registry.run_names(&self.mechanism_list(), self.is_secure())
    }
}
