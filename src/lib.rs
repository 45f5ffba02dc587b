//! recsel — differentially private top-1 recommendation.
//!
//! A recommender scores items for each user; a differentially private selection mechanism picks one
//! item to show. The folders follow the path a record travels (STYLE.md):
//!
//! * [`stats`] — shared numerics: samplers, percentiles, correlations, goodness-of-fit tests;
//! * [`rng`] — reproducible random streams, one per (user, mechanism, ε index, trial);
//! * [`mechanisms`] — every selection mechanism of SPEC §1 behind one trait and one registry;
//! * [`data`] — loaders, preprocessing, splits and synthetic interactions (SPEC §5.1–5.3);
//! * [`model`] — EASE and SANSA (SPEC §6), model files;
//! * [`eval`] — Recall and nDCG with standard errors (SPEC §5.4).
//! * [`experiments`] — synthetic scenarios, two-candidate grids and pipeline files (SPEC §2–4);
//! * [`report`] — tidy tables (CSV, Parquet), resolved configurations and PNG plots.
//!
//! The science is specified in `SPEC.md` (shared with the project); section numbers in comments refer
//! to it.

pub mod audit;
pub mod data;
pub mod error;
pub mod eval;
pub mod experiments;
pub mod mechanisms;
pub mod model;
pub mod report;
pub mod rng;
pub mod scoring;
pub mod stats;

pub use error::{Error, Result};
