//! Integration tests: one binary (STYLE.md).

mod data;
mod model;
