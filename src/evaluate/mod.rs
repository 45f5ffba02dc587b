//! The evaluation wing, above serving (docs/ARCHITECTURE.md): what measures a release on users
//! who are not served and chooses its serving configuration — `recsel tune` ([`tuning`], the
//! exact and the private tuner), `recsel evaluate` ([`utility`], the table of free baselines, the
//! non-private model and the mechanisms on held-out users) and their options
//! ([`options`]). The serving half (the `Recommender`, the release, its privacy report,
//! the ledgered form) reads `tuning.json` through `recommend::tuned`, whose format the tuner
//! writes, and never imports this module: nothing here is needed to answer a request.

pub mod lists;
pub mod options;
pub mod shift;
pub mod tuning;
pub mod utility;
