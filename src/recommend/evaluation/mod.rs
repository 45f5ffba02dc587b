//! The evaluation wing of `recommend`: what measures a release on users who are not served and
//! chooses its serving configuration — `recsel tune` ([`tuning`], `tuning.json`, the private
//! tuner), `recsel evaluate` ([`utility`], the table of free baselines, the non-private model and
//! the mechanisms on held-out users) and their options ([`utility_options`]). The serving half
//! (the `Recommender`, the release, its privacy report, the ledgered form) reads `tuning.json`
//! through [`tuning`]'s file types and never the other way round: nothing here is needed to
//! answer a request except the tuned row it names.

pub mod tuning;
pub mod utility;
pub mod utility_options;
