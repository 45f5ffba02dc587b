//! Integration tests: one binary (STYLE.md), one module per area.

mod util;

mod architecture;
mod audit;
mod bandit;
mod cli;
mod data;
mod errors;
mod gem_property;
mod laws;
mod mechanisms;
mod metrics;
mod model;
mod own_data;
mod samplers;
mod secure;
mod select;
mod synth;
