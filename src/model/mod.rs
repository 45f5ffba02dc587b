//! Item-item models (docs/sansa.md): dense EASE, SANSA (`exact` and `icf`), and the most-popular baseline.
//! All are fitted on the training rows of a [`Dataset`](crate::data::Dataset) and score a user from
//! the items they have.

pub mod dp;
pub mod dp_items;
pub mod ease;
pub mod factor;
pub mod gram;
pub mod io;
pub mod options;
pub mod ordering;
pub mod sansa;
pub mod sparse;
pub mod umr;
pub mod universe;

use std::time::Instant;

pub use ease::Ease;
pub use options::ModelOptions;
pub use sansa::{Sansa, SCORE_LANES};
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

/// Floating-point precision of SANSA's dense factorisation (`--precision`), used when the Gram
/// matrix is nearly dense and `exact` factorises it as one dense matrix (docs/sansa.md,
/// "Precision"). The Gram matrix of binary data holds integer counts, exact in either; `f32`
/// halves the matrix's memory and the factorisation's time, and rounds the factor to about seven
/// digits before it is pruned. Everything after the factorisation (the pruned factor, UMR, the
/// weights) is `f64` either way. The paper does not say; both are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Single precision.
    F32,
    /// Double precision.
    F64,
}

impl Precision {
    /// The default of `--precision` (docs/sansa.md, "Precision").
    pub const DEFAULT: Precision = Precision::F32;

    /// Parses `f32` or `f64`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "f32" => Ok(Precision::F32),
            "f64" => Ok(Precision::F64),
            _ => Err(Error::UnknownName {
                kind: "precision",
                name: name.into(),
                valid: "f32, f64".into(),
            }),
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The precision of models saved before the option existed (always `f64`).
    fn before_the_option() -> Self {
        Precision::F64
    }

    /// Bytes per entry of the dense matrix.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

/// The entries of a column of a dense column-major matrix as a slice (every dense matrix of the
/// fit is column-major with unit row stride; anything else is a bug).
pub(crate) fn col_slice<T>(col: faer::ColRef<'_, T>) -> &[T] {
    col.try_as_col_major()
        .expect("contiguous column")
        .as_slice()
}

/// [`col_slice`] for a mutable column.
pub(crate) fn col_slice_mut<T>(col: faer::ColMut<'_, T>) -> &mut [T] {
    col.try_as_col_major_mut()
        .expect("contiguous column")
        .as_slice_mut()
}

/// A scalar of the dense factorisation: `f32` or `f64` ([`Precision`]).
pub trait DenseScalar: faer::traits::RealField + Copy + Send + Sync {
    /// Integers up to this are exact (2²⁴ or 2⁵³).
    const EXACT_INTEGERS: f64;
    /// Rounds an `f64`.
    fn from_f64(v: f64) -> Self;
    /// Widens to `f64`.
    fn to_f64(self) -> f64;
}

impl DenseScalar for f32 {
    const EXACT_INTEGERS: f64 = 16_777_216.0;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl DenseScalar for f64 {
    const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
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
    /// Precision of the dense factorisation (SANSA `exact` on a nearly dense Gram matrix).
    #[serde(default = "Precision::before_the_option")]
    pub precision: Precision,
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
            precision: Precision::DEFAULT,
        })
    }

    /// The same parameters with another precision of the dense factorisation.
    pub fn with_precision(self, precision: Precision) -> Self {
        ModelParams { precision, ..self }
    }
}

/// What fitting cost: seconds per stage, factor size and the final UMR residual.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FitReport {
    /// (stage, seconds) in order.
    pub stages: Vec<(String, f64)>,
    /// (stage, CPU seconds of the whole process: user + system, every thread) in order, when the
    /// kernel reports them (Linux) and [`FitReport::start_cpu_clock`] was called. On a shared
    /// machine they move less than the wall seconds.
    pub cpu_stages: Vec<(String, f64)>,
    #[serde(skip)]
    cpu_mark: Option<f64>,
    /// Entries of the Cholesky factor before pruning (SANSA).
    pub factor_nnz: usize,
    /// Mean squared residual column norm of UMR (SANSA).
    pub umr_residual: f64,
}

impl FitReport {
    /// Starts counting CPU seconds: the next stage's are those since this call.
    pub fn start_cpu_clock(&mut self) {
        self.cpu_mark = process_cpu_seconds();
    }

    /// Records a finished stage that started at `start` (and its CPU seconds since the previous
    /// stage, once the CPU clock was started).
    pub fn stage(&mut self, name: &str, start: Instant) {
        self.stages
            .push((name.to_string(), start.elapsed().as_secs_f64()));
        if let (Some(before), Some(now)) = (self.cpu_mark, process_cpu_seconds()) {
            self.cpu_stages.push((name.to_string(), now - before));
            self.cpu_mark = Some(now);
        }
    }
    /// Total seconds.
    pub fn total_seconds(&self) -> f64 {
        self.stages.iter().map(|s| s.1).sum()
    }
}

/// CPU seconds (user + system, all threads) this process has used, from `/proc/self/stat`
/// (fields 14 and 15, in the kernel's fixed 100 ticks per second); `None` off Linux.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    Some((utime + stime) / 100.0)
}

/// A fitted model.
// A run holds one model: the size of the enum does not matter, and boxing SANSA (its two factors
// kept both ways are ~300 bytes of headers) would only add an indirection to every score.
#[allow(clippy::large_enum_variant)]
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
            Model::Sansa(m) => m.score_into(items, out, &mut scratch.h),
            Model::Popular(p) => out.copy_from_slice(p),
        }
    }

    /// Scores a block of users (`out` holds one row of `n_items` per user), each row exactly what
    /// [`Model::score_into`] gives that user; SANSA reads its weights once per few users.
    pub fn score_block(&self, users: &[&[u32]], out: &mut [f64], scratch: &mut Scratch) {
        let n = self.n_items();
        assert_eq!(out.len(), users.len() * n, "one row of scores per user");
        match self {
            Model::Sansa(m) => m.score_block(users, out, &mut scratch.h),
            _ => {
                for (items, row) in users.iter().zip(out.chunks_mut(n.max(1))) {
                    self.score_into(items, row, scratch);
                }
            }
        }
    }
}

/// Per-thread scratch space for scoring.
#[derive(Debug, Clone)]
pub struct Scratch {
    h: Vec<f64>,
}

impl Scratch {
    /// Scratch for a model with `n` items (block scoring grows it to what it needs).
    pub fn new(n: usize) -> Self {
        Scratch { h: vec![0.0; n] }
    }
}

/// Fits a model on the training rows `train`. `progress` is told the name of each stage.
pub fn fit(
    train: &Csr,
    params: &ModelParams,
    progress: &dyn Fn(&str),
) -> Result<(Model, FitReport)> {
    let mut report = FitReport::default();
    report.start_cpu_clock();
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
                params.precision,
                &mut report,
                progress,
            )?)
        }
    };
    Ok((model, report))
}
