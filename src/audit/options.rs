//! The options of the two audits, declared once: [`AuditOptions`] (`recsel audit`: mechanisms
//! on adversarial neighbouring problems) and [`EndToEndOptions`] (`recsel audit-e2e`: a
//! release's whole serving path on neighbouring histories). Both take the sampling settings
//! ([`AuditSampling`]), the random source ([`NoiseOptions`]) and the mechanisms' parameters
//! whole; the end-to-end audit also takes the data options (the users it audits).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::data::DataOptions;
use crate::mechanisms::{MechValues, NoiseOptions};
use crate::options::option_table;
use crate::scoring::{CandidatePolicy, Prior};

option_table! {
    /// How many samples an audit draws and the failure probability of its bounds.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct AuditSampling {
        /// Fresh samples per input for the final bounds.
        #[option(group = "Audit")]
        pub samples: u64 = 200_000,
        /// Total failure probability of all bounds of one mechanism (Bonferroni-corrected).
        #[option(value_name = "A", group = "Audit")]
        pub alpha: f64 = 0.01,
    }
}

option_table! {
    /// The options of `recsel audit`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct AuditOptions {
        /// Mechanism name, comma-separated names, or `all`.
        #[option(flag = "mech", value_name = "LIST", group = "Audit")]
        pub mechanisms: String = "all".to_string(),
        /// Privacy parameter ε the mechanisms are built with.
        #[option(flag = "eps", value_name = "E", required = true, group = "Audit")]
        pub epsilon: f64,
        /// Samples and failure probability.
        #[flatten]
        pub sampling: AuditSampling,
        /// `builtin` (adversarial families around the base problem plus the docs/mechanisms.md
        /// counterexamples) or a JSON file of pairs.
        #[option(value_name = "builtin|FILE", group = "Audit")]
        pub pairs: String = "builtin".to_string(),
        /// Base scores of the built-in families.
        #[option(value_name = "Q1,Q2,...", group = "Audit")]
        pub scores: Vec<f64> = vec![0.0, 0.25, 0.5, 0.75, 1.0],
        /// Base sensitivities of the built-in families.
        #[option(value_name = "D1,D2,...", group = "Audit")]
        pub sens: Vec<f64> = vec![0.2, 1.0, 0.5, 2.0, 1.0],
        /// The random source (with `secure`, the secure path is audited against its effective
        /// ε).
        #[flatten]
        pub noise: NoiseOptions,
        /// Parameters of the mechanisms.
        #[flatten]
        pub params: MechValues,
    }
}

option_table! {
    /// The options of `recsel audit-e2e` (docs/deployment.md, "The end-to-end audit").
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct EndToEndOptions {
        /// Model directory with its release artifact (`recsel fit ... --out DIR`).
        #[option(value_name = "DIR", required = true, group = "Audit")]
        pub model: PathBuf,
        /// Mechanism name, comma-separated names, `all`, or `tuned` (the row of the model
        /// folder's tuning.json for --eps, with the candidates it chose).
        #[option(flag = "mech", value_name = "LIST", group = "Audit")]
        pub mechanisms: String = "all".to_string(),
        /// ε of each recommendation of the audited path.
        #[option(flag = "eps", value_name = "E", required = true, group = "Audit")]
        pub epsilon: f64,
        /// Candidate policy of the audited path (docs/deployment.md): all, popular:N, heldout:N,
        /// pool:FILE or history-top:N.
        #[option(value_name = "POLICY", group = "Audit")]
        pub candidates: CandidatePolicy = CandidatePolicy::All,
        /// Public per-item prior of the audited path (docs/priors.md): none, popularity:W,
        /// heldout:W, file:PATH:W, or own-history:W (a known leak, with --allow-non-private).
        #[option(value_name = "PRIOR", group = "Audit")]
        pub prior: Prior = Prior::None,
        /// Accept what is not user-level ε-DP (history-top:N, own-history:W, or a mechanism
        /// that is not ε-DP), to show that the audit flags it.
        #[option(group = "Audit")]
        pub allow_non_private: bool = false,
        /// Samples and failure probability.
        #[flatten]
        pub sampling: AuditSampling,
        /// Base users, each audited against three neighbouring histories (one item added, one
        /// removed, the whole history replaced by another user's).
        #[option(group = "Audit")]
        pub pairs: usize = 4,
        /// The users whose histories are audited: a users file as `recsel recommend` reads it
        /// (csv, parquet or jsonl, by extension) instead of the test users of the data options.
        #[option(value_name = "FILE", group = "Audit")]
        pub users: PathBuf,
        /// The data the model was fitted on, whose test users are audited.
        #[flatten]
        pub data: DataOptions,
        /// The random source (with `secure`, the secure path is audited; the base users are
        /// then drawn from OS entropy).
        #[flatten]
        pub noise: NoiseOptions,
        /// Parameters of the mechanisms.
        #[flatten]
        pub params: MechValues,
    }
}
