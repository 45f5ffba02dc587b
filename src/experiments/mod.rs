//! Experiments: the real-data runner.

pub mod real;
