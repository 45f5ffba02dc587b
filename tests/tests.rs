//! Integration tests: one binary (docs/ARCHITECTURE.md), one module per area.

mod util;

/// The example of a mechanism defined outside the crate, run by `plugins`.
#[path = "../examples/custom_mechanism.rs"]
mod custom_mechanism;

mod add_mech;
mod architecture;
mod audit;
mod bandit;
mod bounds;
mod cli;
mod data;
mod docs;
mod duff;
mod em_bound;
mod end_to_end;
mod errors;
mod figures;
mod gem_property;
mod laws;
mod ledger;
mod ledger_cli;
mod ledger_fail_closed;
mod mechanisms;
mod memory;
mod metrics;
mod model;
mod options;
mod own_data;
mod partition;
mod plugins;
mod policies;
mod priors;
mod private_candidates;
mod problems;
mod protocol;
mod recommend;
mod samplers;
mod secure;
mod select;
mod serve;
mod serve_faults;
mod serve_options;
mod serve_postgres;
mod synth;
mod utility;
