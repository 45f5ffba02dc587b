//! recsel — differentially private top-1 recommendation.
//!
//! A recommender scores items for each user; a differentially private selection mechanism picks one
//! item to show. The folders follow the path a record travels (docs/ARCHITECTURE.md):
//!
//! * [`data`] — loaders, preprocessing, splits and synthetic interactions (docs/protocol.md, steps 1–3);
//! * [`privacy`] — privacy accounting: populations, the privacy report, the zCDP ↔ (ε, δ)
//!   conversion, the Gaussian calibration and the contribution weight (docs/privacy-report.md);
//! * [`model`] — EASE and SANSA (docs/sansa.md), DP training (docs/training-privacy.md), model
//!   files; [`eval`] — Recall and nDCG (docs/protocol.md, step 4);
//! * [`scoring`] — per-item sensitivities without the score matrix, candidates (docs/protocol.md, steps 5–7);
//! * [`mechanisms`] — every selection mechanism of docs/mechanisms.md behind one trait and one registry;
//! * [`experiments`] — synthetic scenarios, two-candidate grids, the real-data runner, pipelines;
//! * [`recommend`] — the release artifact and the `Recommender` that serves one private item per
//!   user (docs/deployment.md);
//! * [`evaluate`] — `recsel tune` and `recsel evaluate`: the tuned serving configuration and the
//!   utility table on users who are not served (docs/utility.md);
//! * [`report`] — tables (CSV, Parquet), resolved configurations, plots;
//! * [`serve`] — the private recommendation service over HTTP (`recsel serve`, docs/serving.md;
//!   cargo feature `serve`, on by default);
//! * [`audit`] — empirical ε lower bounds;
//! * [`numerics`] — shared numerics: samplers, percentiles, correlations, hypothesis tests;
//! * [`rng`] — reproducible random streams, one per (user, mechanism, ε index, trial);
//! * [`io`] — atomic writes and output folders, below every stage;
//! * [`options`] — option tables: a job's options declared once, for every front end;
//! * [`hugepages`] — huge pages for the few large arrays read at scattered places.
//!
//! Dependencies run one way, from `serve` down to `error` (docs/ARCHITECTURE.md; enforced by
//! `tests/architecture.rs`). The science is written out in the repository's `docs/`:
//! `docs/mechanisms.md` (every mechanism, its guarantee and cost), `docs/experiments.md` (the
//! synthetic scenarios), `docs/protocol.md` (the real-data protocol) and `docs/sansa.md` (the
//! model); comments cite their sections.

#![warn(missing_docs)]

pub mod audit;
pub mod column_statistic;
pub mod data;
pub mod error;
pub mod eval;
pub mod evaluate;
pub mod experiments;
pub mod hugepages;
pub mod io;
pub mod ledger;
pub mod mechanisms;
pub mod model;
pub mod numerics;
pub mod options;
pub mod privacy;
pub mod recommend;
pub mod report;
pub mod rng;
pub mod scoring;
#[cfg(feature = "serve")]
pub mod serve;
mod simd;

pub use error::{Error, Result};
