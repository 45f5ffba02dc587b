//! Integration tests: one binary (STYLE.md), one module per area.

mod util;

mod cli;
mod errors;
mod gem_property;
mod mechanisms;
mod samplers;
mod synth;
