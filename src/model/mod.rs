//! Item-item models (docs/sansa.md): dense EASE, SANSA (`exact` and `icf`), and the most-popular baseline.
//! All are fitted on the training rows of a [`Dataset`](crate::data::Dataset) and score a user from
//! the items they have.

pub mod ease;
pub mod factor;
pub mod gram;
pub mod io;
pub mod sansa;
pub mod sparse;
pub mod umr;

use std::time::Instant;

pub use ease::Ease;
pub use sansa::Sansa;
pub use umr::UmrConfig;

use crate::data::Csr;
use crate::{Error, Result};

/// How to fit (`--method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// SANSA with a full sparse Cholesky, pruned to the target density.
    Exact,
    /// SANSA with Lin–Moré incomplete Cholesky.
    Icf,
    /// Dense EASE.
    Ease,
    /// Most-popular baseline (scores = item counts).
    Popular,
}

impl Method {
    /// Parses `exact`, `icf`, `ease` or `popular`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "exact" => Ok(Method::Exact),
            "icf" => Ok(Method::Icf),
            "ease" => Ok(Method::Ease),
            "popular" => Ok(Method::Popular),
            _ => Err(Error::UnknownName {
                kind: "method",
                name: name.into(),
                valid: "exact, icf, ease, popular".into(),
            }),
        }
    }
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::Icf => "icf",
            Method::Ease => "ease",
            Method::Popular => "popular",
        }
    }
}

/// Validated model hyperparameters (checked once, at construction).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelParams {
    /// Method.
    pub method: Method,
    /// L2 regularisation λ ≥ 0.
    pub l2: f64,
    /// Target density of each SANSA factor, in (0, 1].
    pub density: f64,
    /// UMR scans.
    pub umr_scans: usize,
    /// UMR finetune steps.
    pub umr_finetune_steps: usize,
}

impl ModelParams {
    /// Checks λ (finite, ≥ 0; > 0 for EASE and exact SANSA, whose Gram matrix is singular
    /// otherwise) and the density (in (0, 1]).
    pub fn new(method: Method, l2: f64, density: f64) -> Result<Self> {
        if !(l2.is_finite() && l2 >= 0.0) {
            return Err(Error::InvalidParameter {
                name: "l2",
                requirement: "finite and >= 0",
                value: l2,
            });
        }
        if !(density > 0.0 && density <= 1.0) {
            return Err(Error::InvalidParameter {
                name: "density",
                requirement: "in (0, 1]",
                value: density,
            });
        }
        let umr = UmrConfig::default();
        Ok(ModelParams {
            method,
            l2,
            density,
            umr_scans: umr.scans,
            umr_finetune_steps: umr.finetune_steps,
        })
    }
}

/// What fitting cost: seconds per stage, factor size and the final UMR residual.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FitReport {
    /// (stage, seconds) in order.
    pub stages: Vec<(String, f64)>,
    /// Entries of the Cholesky factor before pruning (SANSA).
    pub factor_nnz: usize,
    /// Mean squared residual column norm of UMR (SANSA).
    pub umr_residual: f64,
}

impl FitReport {
    /// Records a finished stage that started at `start`.
    pub fn stage(&mut self, name: &str, start: Instant) {
        self.stages
            .push((name.to_string(), start.elapsed().as_secs_f64()));
    }
    /// Total seconds.
    pub fn total_seconds(&self) -> f64 {
        self.stages.iter().map(|s| s.1).sum()
    }
}

/// A fitted model.
#[derive(Debug, Clone)]
pub enum Model {
    /// Dense EASE.
    Ease(Ease),
    /// SANSA.
    Sansa(Sansa),
    /// Most-popular baseline: training count of each item.
    Popular(Vec<f64>),
}

impl Model {
    /// Number of items.
    pub fn n_items(&self) -> usize {
        match self {
            Model::Ease(m) => m.n,
            Model::Sansa(m) => m.n,
            Model::Popular(p) => p.len(),
        }
    }

    /// Number of stored weights.
    pub fn weights_nnz(&self) -> usize {
        match self {
            Model::Ease(m) => m.n * m.n,
            Model::Sansa(m) => m.nnz(),
            Model::Popular(p) => p.len(),
        }
    }

    /// Density of the weights: stored entries over n² per factor.
    pub fn weights_density(&self) -> f64 {
        let n = self.n_items() as f64;
        match self {
            Model::Sansa(m) => m.nnz() as f64 / (2.0 * n * n),
            Model::Ease(_) => 1.0,
            Model::Popular(_) => 1.0 / n,
        }
    }

    /// Scores all items for a user who has `items` (seen items are not masked here).
    pub fn score_into(&self, items: &[u32], out: &mut [f64], scratch: &mut Scratch) {
        match self {
            Model::Ease(m) => m.score_into(items, out),
            Model::Sansa(m) => m.score_into(items, out, &mut scratch.h, &mut scratch.touched),
            Model::Popular(p) => out.copy_from_slice(p),
        }
    }
}

/// Per-thread scratch space for scoring.
#[derive(Debug, Clone)]
pub struct Scratch {
    h: Vec<f64>,
    touched: Vec<u32>,
}

impl Scratch {
    /// Scratch for a model with `n` items.
    pub fn new(n: usize) -> Self {
        Scratch {
            h: vec![0.0; n],
            touched: Vec::new(),
        }
    }
}

/// Fits a model on the training rows `train`. `progress` is told the name of each stage.
pub fn fit(
    train: &Csr,
    params: &ModelParams,
    progress: &dyn Fn(&str),
) -> Result<(Model, FitReport)> {
    let mut report = FitReport::default();
    if params.method == Method::Popular {
        let t = Instant::now();
        let mut counts = vec![0.0f64; train.cols()];
        for &i in train.indices() {
            counts[i as usize] += 1.0;
        }
        report.stage("counting", t);
        return Ok((Model::Popular(counts), report));
    }
    if params.method == Method::Ease {
        ease::check_fits(train.cols())?;
    }
    let model = match params.method {
        Method::Ease => {
            progress("Gram matrix XᵀX");
            let t = Instant::now();
            let g = gram::gram_lower(train);
            report.stage("gram", t);
            progress("dense EASE inverse");
            let t = Instant::now();
            let m = ease::fit_ease(&g, params.l2)?;
            report.stage("inverse", t);
            Model::Ease(m)
        }
        method => {
            let umr = UmrConfig {
                scans: params.umr_scans,
                finetune_steps: params.umr_finetune_steps,
                ..UmrConfig::default()
            };
            Model::Sansa(sansa::fit_sansa_rows(
                train,
                method,
                params.l2,
                params.density,
                umr,
                &mut report,
                progress,
            )?)
        }
    };
    Ok((model, report))
}
