//! Integration tests: one binary (STYLE.md), one module per area.

mod util;

mod architecture;
mod audit;
mod cli;
mod data;
mod errors;
mod gem_property;
mod mechanisms;
mod model;
mod samplers;
mod secure;
mod select;
mod synth;
