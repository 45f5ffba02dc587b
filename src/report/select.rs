//! Everything a real-data selection run writes (docs/protocol.md, "Outputs"): the MSE table, the
//! per-user table, the resolved configuration and the figure-13/21 plots. The command line, the
//! Python package and distributed runners call [`write_select`] on the results of
//! [`crate::experiments::real::run_all`], so every front end produces the same files.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::plot;
use super::table::{Table, Values};
use super::Resolved;
use crate::error::Result;
use crate::experiments::real::{MseRow, SelectConfig, SpearmanSummary, UserRow};
use crate::experiments::synthetic::MseRow as PlotRow;
use crate::model::ModelParams;

/// Users shown in the per-user scatter plot (seed 001 fig 13 shows 10,000 random test users).
pub const SCATTER_USERS: usize = 10_000;

/// Everything a `select` run depends on, recorded beside its results as `config.{json,toml}`.
#[derive(Debug, Clone, Serialize)]
pub struct SelectRun<'a> {
    /// Data set name.
    pub dataset: &'a str,
    /// Seed of the split and of synthetic data.
    pub data_seed: u64,
    /// Model hyperparameters.
    pub model: ModelParams,
    /// The selection configuration (mechanisms, ε grid, trials, seed, …).
    pub select: &'a SelectConfig,
    /// ε of the per-user mGEM/GEM scatter plot.
    pub scatter_eps: f64,
    /// Users with at least one candidate.
    pub users: usize,
    /// Users left out because they had no candidate.
    pub users_without_candidates: u64,
}

/// The results of a `select` run, as the runner returns them.
#[derive(Debug, Clone, Copy)]
pub struct SelectResults<'a> {
    /// One row per user with candidates.
    pub rows: &'a [UserRow],
    /// MSE ± s.e. per mechanism and ε.
    pub mse: &'a [MseRow],
    /// Distribution of the per-user Spearman correlations.
    pub spearman: &'a SpearmanSummary,
    /// The data set's identifier of each test user row (`rows[i].user` indexes it).
    pub user_ids: &'a [String],
}

/// Writes `mse.{csv,parquet}`, `users.{csv,parquet}`, `config.{json,toml}` and the plots
/// `fig13_spearman.png`, `fig13_mse.png`, `fig13_logratio.png` and `fig21_cgem.png` (the last two
/// when gem and mgem, and cgem, were run) into `out`; returns the paths written.
pub fn write_select(
    out: &Path,
    run: &SelectRun<'_>,
    res: &SelectResults<'_>,
) -> Result<Vec<PathBuf>> {
    crate::io::ensure_dir(out)?;
    let mut files = Vec::new();
    files.extend(mse_table(run.dataset, res.mse).write(out, "mse")?);
    files.extend(user_table(run.select, res).write(out, "users")?);
    files.extend(Resolved::new("select", run).write(out)?);
    files.extend(plots(out, run, res)?);
    Ok(files)
}

/// The MSE table: one row per (mechanism, ε).
fn mse_table(dataset: &str, mse: &[MseRow]) -> Table {
    Table::default()
        .with("dataset", Values::Str(vec![dataset.to_string(); mse.len()]))
        .with(
            "mechanism",
            Values::Str(mse.iter().map(|r| r.mechanism.clone()).collect()),
        )
        .with(
            "private",
            Values::Bool(mse.iter().map(|r| r.private).collect()),
        )
        .with(
            "epsilon",
            Values::F64(mse.iter().map(|r| r.epsilon).collect()),
        )
        .with("mse", Values::F64(mse.iter().map(|r| r.mse).collect()))
        .with("se", Values::F64(mse.iter().map(|r| r.se).collect()))
        .with("users", Values::U64(mse.iter().map(|r| r.users).collect()))
        .with(
            "trials",
            Values::U64(mse.iter().map(|r| u64::from(r.trials)).collect()),
        )
}

/// The per-user table: correlations, the best score, and per (mechanism, ε) the mean selected
/// score and the MSE.
fn user_table(cfg: &SelectConfig, res: &SelectResults<'_>) -> Table {
    let rows = res.rows;
    let f = |g: fn(&UserRow) -> f64| Values::F64(rows.iter().map(g).collect());
    let ids = rows
        .iter()
        .map(|r| {
            res.user_ids
                .get(r.user as usize)
                .cloned()
                .unwrap_or_else(|| r.user.to_string())
        })
        .collect();
    let mut t = Table::default()
        .with("user", Values::Str(ids))
        .with(
            "candidates",
            Values::U64(rows.iter().map(|r| u64::from(r.candidates)).collect()),
        )
        .with("spearman", f(|r| r.spearman))
        .with("pearson", f(|r| r.pearson))
        .with("weighted", f(|r| r.weighted))
        .with("max_score", f(|r| r.max_score));
    let ne = cfg.epsilons.len();
    for (what, pick) in [("mean", true), ("mse", false)] {
        for (m, name) in cfg.mechanisms.iter().enumerate() {
            for (e, eps) in cfg.epsilons.iter().enumerate() {
                let i = m * ne + e;
                let v = rows
                    .iter()
                    .map(|r| if pick { r.mean_selected[i] } else { r.mse[i] })
                    .collect();
                t = t.with(format!("{what}_{name}_eps{eps}"), Values::F64(v));
            }
        }
    }
    t
}

/// Seed 001 fig 13 a–i and fig 21.
fn plots(out: &Path, run: &SelectRun<'_>, res: &SelectResults<'_>) -> Result<Vec<PathBuf>> {
    let (cfg, rows, title) = (run.select, res.rows, run.dataset);
    let mut files = Vec::new();
    let spearman: Vec<f64> = rows.iter().map(|r| r.spearman).collect();
    let p = out.join("fig13_spearman.png");
    plot::spearman_hist_png(&p, title, &spearman, res.spearman)?;
    files.push(p);
    let as_plot_rows = |keep: &dyn Fn(&str) -> bool| -> Vec<PlotRow> {
        res.mse
            .iter()
            .filter(|r| keep(&r.mechanism))
            .map(|r| PlotRow {
                scenario: title.to_string(),
                mechanism: r.mechanism.clone(),
                private: r.private,
                epsilon: r.epsilon,
                mse: r.mse,
                se: r.se,
                trials: r.users * u64::from(r.trials),
            })
            .collect()
    };
    let p = out.join("fig13_mse.png");
    plot::mse_vs_eps_png(
        &p,
        &format!(
            "{title}: MSE of the selected score vs the best, {} users x {} trials",
            rows.len(),
            cfg.trials
        ),
        &as_plot_rows(&|_| true),
    )?;
    files.push(p);
    let ne = cfg.epsilons.len();
    let pos = |name: &str| cfg.mechanisms.iter().position(|m| m == name);
    if let (Some(g), Some(mg)) = (pos("gem"), pos("mgem")) {
        // The grid point nearest to the requested ε (log scale).
        let e = (0..ne)
            .min_by(|&a, &b| {
                let d = |i: usize| (cfg.epsilons[i] / run.scatter_eps).ln().abs();
                d(a).total_cmp(&d(b))
            })
            .expect("non-empty grid");
        let step = rows.len().div_ceil(SCATTER_USERS).max(1);
        let (mut points, mut left_out) = (Vec::new(), 0u64);
        for r in rows.iter().step_by(step) {
            let (a, b) = (r.mean_selected[mg * ne + e], r.mean_selected[g * ne + e]);
            if a > 0.0 && b > 0.0 {
                points.push((r.spearman, (a / b).ln()));
            } else {
                left_out += 1;
            }
        }
        let p = out.join("fig13_logratio.png");
        plot::logratio_png(&p, title, &points, left_out, cfg.epsilons[e])?;
        files.push(p);
        if pos("cgem").is_some() {
            let p = out.join("fig21_cgem.png");
            plot::mse_vs_eps_png(
                &p,
                &format!("{title}: combined GEM vs GEM and mGEM"),
                &as_plot_rows(&|m| matches!(m, "cgem" | "gem" | "mgem")),
            )?;
            files.push(p);
        }
    }
    Ok(files)
}
