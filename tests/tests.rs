//! Integration tests: one binary (STYLE.md), one module per area.

mod util;

mod architecture;
mod audit;
mod bounds;
mod cli;
mod data;
mod errors;
mod figures;
mod gem_property;
mod mechanisms;
mod model;
mod protocol;
mod samplers;
mod select;
mod synth;
