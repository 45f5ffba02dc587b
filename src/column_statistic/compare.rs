//! The comparison of the Duff slides (docs/results.md, "Private medians"): mean absolute error of
//! the private median against the subsample's own median, for Duff, the standard
//! exponential-mechanism quantile, smooth sensitivity with Cauchy and with Laplace noise, the
//! Laplace mechanism at the global sensitivity, and smooth sensitivity with Cauchy noise at NRS07's
//! constants, by subsample size n and ε, on real columns.
//!
//! Each repetition draws a fresh subsample of n records without replacement (the whole column for
//! n = all) and releases the median once per method and ε from it, on streams derived from one
//! seed per (column, n, repetition) — independent of thread count.

use rand::seq::index::sample;
use rayon::prelude::*;
use serde::Serialize;

use super::{rank, Method, Neighbours, PrivateStatistic, Statistic, StatisticParams};
use crate::error::Result;
use crate::numerics::mean_se;
use crate::rng::Streams;

/// What the comparison runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareConfig {
    /// Subsample sizes; 0 means the whole column ("all"); sizes above a column's length are
    /// skipped for it.
    pub ns: Vec<usize>,
    /// ε values.
    pub epsilons: Vec<f64>,
    /// Repetitions per cell.
    pub reps: usize,
    /// The public range every column is clipped to.
    pub lo: f64,
    /// Its upper end.
    pub hi: f64,
    /// Duff's grid points on the range.
    pub points: usize,
    /// δ of the smooth-sensitivity Laplace mechanism.
    pub delta: f64,
    /// Seed of the streams.
    pub seed: u64,
}

impl Default for CompareConfig {
    /// The docs/results.md table: n ∈ {100, 1000, 10000, all}, ε ∈ {0.1, 0.5, 1, 2}, 200
    /// repetitions, interaction counts on [0, 1000] with Duff on the 1001 integers, δ = 1e-6.
    fn default() -> Self {
        CompareConfig {
            ns: vec![100, 1000, 10_000, 0],
            epsilons: vec![0.1, 0.5, 1.0, 2.0],
            reps: 200,
            lo: 0.0,
            hi: 1000.0,
            points: 1001,
            delta: 1e-6,
            seed: 1,
        }
    }
}

/// One cell: a column, n, ε and method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    /// The column's name.
    pub column: String,
    /// Records per subsample.
    pub n: usize,
    /// Whether n is the whole column.
    pub all: bool,
    /// ε.
    pub epsilon: f64,
    /// The method's name.
    pub method: &'static str,
    /// Mean |private − true median|.
    pub mae: f64,
    /// Its standard error.
    pub se: f64,
    /// Repetitions.
    pub reps: usize,
    /// The mean true median of the subsamples (for scale).
    pub median: f64,
}

/// Runs the comparison on named columns.
pub fn compare_medians(
    columns: &[(String, Vec<f64>)],
    cfg: &CompareConfig,
) -> Result<Vec<CompareRow>> {
    let mechs: Vec<Vec<(Method, PrivateStatistic)>> = cfg
        .epsilons
        .iter()
        .map(|&epsilon| {
            Method::ALL
                .iter()
                .map(|&method| {
                    PrivateStatistic::new(&StatisticParams {
                        method,
                        statistic: Statistic::MEDIAN,
                        epsilon,
                        delta: cfg.delta,
                        lo: cfg.lo,
                        hi: cfg.hi,
                        points: cfg.points,
                        neighbours: Neighbours::Replace,
                    })
                    .map(|m| (method, m))
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    let streams = Streams::new(cfg.seed).derive(0x57a7);
    let mut rows = Vec::new();
    for (ci, (name, column)) in columns.iter().enumerate() {
        for (ni, &n_req) in cfg.ns.iter().enumerate() {
            let all = n_req == 0 || n_req == column.len();
            if n_req > column.len() {
                continue;
            }
            let n = if all { column.len() } else { n_req };
            // errors[rep][eps][method] and the rep's true median.
            let per_rep: Vec<(f64, Vec<Vec<f64>>)> = (0..cfg.reps)
                .into_par_iter()
                .map(|r| -> Result<(f64, Vec<Vec<f64>>)> {
                    let mut rng = streams.stream(ci as u32, ni as u32, r as u64, 0);
                    let mut data: Vec<f64> = if all {
                        column.clone()
                    } else {
                        sample(&mut rng, column.len(), n)
                            .into_iter()
                            .map(|i| column[i])
                            .collect()
                    };
                    data.iter_mut().for_each(|x| *x = x.clamp(cfg.lo, cfg.hi));
                    data.sort_by(f64::total_cmp);
                    let truth = data[rank(0.5, n) - 1];
                    // The methods after the first five draw from a stream of their own, so the
                    // first five's draws do not depend on how many methods follow them.
                    let mut own = streams.stream(ci as u32, ni as u32, r as u64, 1);
                    let errs = mechs
                        .iter()
                        .map(|ms| {
                            ms.iter()
                                .enumerate()
                                .map(|(mi, (_, m))| {
                                    let rng = if mi < 5 { &mut rng } else { &mut own };
                                    m.release(&data, rng).map(|v| (v.value - truth).abs())
                                })
                                .collect::<Result<Vec<f64>>>()
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Ok((truth, errs))
                })
                .collect::<Result<_>>()?;
            let median = per_rep.iter().map(|(t, _)| t).sum::<f64>() / cfg.reps as f64;
            for (ei, &epsilon) in cfg.epsilons.iter().enumerate() {
                for (mi, (method, _)) in mechs[ei].iter().enumerate() {
                    let e: Vec<f64> = per_rep.iter().map(|(_, x)| x[ei][mi]).collect();
                    let (mae, se) = mean_se(&e);
                    rows.push(CompareRow {
                        column: name.clone(),
                        n,
                        all,
                        epsilon,
                        method: method.name(),
                        mae,
                        se,
                        reps: cfg.reps,
                        median,
                    });
                }
            }
        }
    }
    Ok(rows)
}
