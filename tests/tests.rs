//! Integration tests: one binary (docs/ARCHITECTURE.md), one module per area.

mod util;

/// The example of a mechanism defined outside the crate, run by `plugins`.
#[path = "../examples/custom_mechanism.rs"]
mod custom_mechanism;

/// Seed 003's worked examples, run by `worked_examples`.
#[path = "../examples/heavy_hitters.rs"]
mod heavy_hitters;
#[path = "../examples/pricing.rs"]
mod pricing;
/// Seed 004 §5.2's example (a PCA rank chosen privately), run by `private_tuning`.
#[path = "../examples/private_pca_rank.rs"]
mod private_pca_rank;
/// Seed 004 §5.1 on a model hyperparameter (SANSA's λ chosen privately), run by `private_tuning`.
#[path = "../examples/private_sansa_lambda.rs"]
mod private_sansa_lambda;

mod add_mech;
mod amplification;
mod architecture;
mod audit;
mod bandit;
mod bounds;
mod cli;
mod data;
mod docs;
mod dp_shift;
mod dp_training;
mod duff;
mod em_bound;
mod end_to_end;
mod errors;
mod exact_statements;
mod fail_closed;
mod figures;
mod gem_property;
mod history_key;
mod laws;
mod ledger;
mod ledger_cli;
#[cfg(feature = "serve")]
mod ledger_fail_closed;
mod ledger_replay;
mod list_serving;
mod lists;
mod mechanisms;
mod memory;
mod metrics;
mod model;
mod naive_selection;
mod options;
mod own_data;
mod partition;
mod plugins;
mod policies;
mod priors;
mod privacy_report;
mod private_candidates;
mod private_tuning;
mod problems;
mod protocol;
#[cfg(feature = "serve")]
mod public_list;
#[cfg(feature = "serve")]
mod readme_serving;
mod recommend;
mod release_audit;
mod samplers;
mod secure;
mod select;
#[cfg(feature = "serve")]
mod serve;
#[cfg(feature = "serve")]
mod serve_faults;
#[cfg(feature = "serve")]
mod serve_guards;
#[cfg(feature = "serve")]
mod serve_options;
#[cfg(all(feature = "serve", feature = "postgres"))]
mod serve_postgres;
mod sparse_vector;
mod statistic;
mod statistic_cli;
mod synth;
mod theorem52;
mod theorem52_utility;
mod tuned_lists;
mod utility;
mod worked_examples;
mod worth;
