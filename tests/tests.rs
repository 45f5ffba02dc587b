//! Integration tests: one binary (docs/ARCHITECTURE.md), one module per area.

mod util;

mod architecture;
mod audit;
mod bandit;
mod bounds;
mod cli;
mod data;
mod errors;
mod figures;
mod gem_property;
mod laws;
mod mechanisms;
mod memory;
mod metrics;
mod model;
mod own_data;
mod protocol;
mod samplers;
mod secure;
mod select;
mod synth;
