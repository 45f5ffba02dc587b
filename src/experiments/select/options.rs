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
use crate::mechanisms::{self, MechValues, NoiseOptions, Registry};
use crate::model::ModelOptions;
use crate::options::option_table;
use crate::scoring::{CandidatePolicy, Prior};

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
        /// The former name of split_seed, read as split_seed (older pipeline files and
        /// config.toml files use it).
        #[option(hidden = true, group = "Data")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub data_seed: u64,
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
        /// The random source: a seed (default: the seed of a run being resumed, else OS
        /// entropy), or the secure path. Before the mechanism parameters: a table's
        /// keys that no option before them takes are parameters.
        #[flatten]
        pub noise: NoiseOptions,
        /// Mechanism parameters (γ defaults to the data set's: 0.008, or 0.0008 for Netflix).
        #[flatten]
        pub params: MechValues,
        /// ε of the per-user mGEM/GEM scatter plot (fig 13 d–f).
        #[option(value_name = "E", group = "Output")]
        pub scatter_eps: f64 = 1.0,
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
        self.noise.check()?;
        if self.top.is_some() && self.candidates.is_some() {
            return Err(Error::Invalid(
                "top and candidates exclude each other: top N is candidates history-top:N".into(),
            ));
        }
        self.split_seed()?;
        registry.parse_list(&self.mechanisms())?;
        for &e in &self.epsilons() {
            mechanisms::check_epsilon(e)?;
        }
        Ok(())
    }

    /// The seed of the split: `split_seed`, or its former name `data_seed`, else the data
    /// options' default; an error when both names are given.
    pub fn split_seed(&self) -> Result<u64> {
        match (self.data.split_seed, self.data_seed) {
            (Some(_), Some(_)) => Err(Error::Invalid(
                "data_seed is the former name of split_seed: give split_seed only".into(),
            )),
            (None, Some(s)) => Ok(s),
            _ => Ok(self.data.split_seed()),
        }
    }

    /// The names of the mechanisms the run uses, looked up in `registry`
    /// ([`Registry::run_names`]).
    pub fn mechanism_names(&self, registry: &mechanisms::Registry) -> Result<Vec<String>> {
        registry.run_names(&self.mechanisms(), self.noise.secure())
    }
}
