//! Everything a real-data selection run writes (docs/protocol.md, "Outputs"): the MSE table, the
//! per-user table, the resolved configuration and the figure-13/21 plots. The command line, the
//! Python package and distributed runners call [`finish`] on the results of
//! [`crate::experiments::select::run_all`] (or of the partitions), so every front end produces the
//! same files and prints the same summary.
//!
//! The files: this one writes the tables, the configuration and the plots of one run;
//! `summary` prints what the terminal shows; `problems` writes every user's selection problem;
//! `fig13` puts the three runs of seed 001's figure 13 side by side.

mod fig13;
mod problems;
mod summary;

pub use fig13::{fig13_column, write_fig13_combined, FIG13_RUNS};
pub use problems::{dump_problems, write_problems};
pub use summary::{finish, finish_select, summary_json, summary_text, Print, Timings};

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::plot;
use super::table::{Table, Values};
use super::Resolved;
use crate::error::Result;
pub use crate::experiments::select::SCATTER_USERS;
use crate::experiments::select::{
    random_sample, Diagnostics, ItemCounts, MseRow, RuleRow, SelectConfig, SelectOptions,
    SpearmanSummary, UserRow,
};
use crate::experiments::synthetic::MseRow as PlotRow;
use crate::model::ModelParams;
use crate::scoring::Sensitivities;

/// Everything a `select` run depends on, recorded beside its results as `config.{json,toml}`.
#[derive(Debug, Clone, Serialize)]
pub struct SelectRun<'a> {
    /// Data set name.
    pub dataset: &'a str,
    /// Seed of the split and of synthetic data.
    pub split_seed: u64,
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
    /// The options that rerun this run ([`crate::experiments::select::SelectJob::rerun_options`]): when given,
    /// `config.{json,toml}` also records them as `pipeline`, the `[select]` table that reruns
    /// this run (`recsel run DIR/config.toml`, docs/protocol.md, "Rerunning a run").
    #[serde(skip)]
    pub pipeline: Option<&'a SelectOptions>,
}

/// The resolved configuration with the rerunnable `[select]` table.
#[derive(Serialize)]
struct WithPipeline<'a> {
    #[serde(flatten)]
    run: &'a SelectRun<'a>,
    pipeline: &'a SelectOptions,
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
    /// The per-item percentiles and sensitivities of the run.
    pub sens: &'a Sensitivities,
    /// The data set's identifier of each item column.
    pub item_ids: &'a [String],
    /// Per-item candidate counts (and the bound rule's bits per user).
    pub counts: &'a ItemCounts,
    /// The run's diagnostics (`docs/real-data.md`).
    pub diagnostics: &'a Diagnostics,
    /// The Spearman and bound rules against the per-user winner of GEM and mGEM, per ε.
    pub rules: &'a [RuleRow],
    /// Which mechanism for this data ([`crate::experiments::select::advice`]).
    pub advice: &'a [String],
}

/// The users of the fig 13 d–f scatter plot at grid point `e`: [`SCATTER_USERS`] rows drawn at
/// random with the run's seed (all rows when there are fewer), as (Spearman, log(mean mGEM / mean
/// GEM)) points, and the number of drawn users left out because a mean was not positive. `None`
/// when the run lacks gem or mgem.
pub fn scatter_points(
    cfg: &SelectConfig,
    rows: &[UserRow],
    e: usize,
) -> Option<(Vec<(f64, f64)>, u64)> {
    let pos = |name: &str| cfg.mechanisms.iter().position(|m| m == name);
    let (g, mg) = (pos("gem")?, pos("mgem")?);
    let ne = cfg.epsilons.len();
    let (mut points, mut left_out) = (Vec::new(), 0u64);
    for i in random_sample(rows.len(), SCATTER_USERS, cfg.seed) {
        let r = &rows[i];
        let (a, b) = (r.mean_selected[mg * ne + e], r.mean_selected[g * ne + e]);
        if a > 0.0 && b > 0.0 {
            points.push((r.spearman, (a / b).ln()));
        } else {
            left_out += 1;
        }
    }
    Some((points, left_out))
}

/// The grid point nearest to `eps` (log scale).
pub fn nearest_epsilon(cfg: &SelectConfig, eps: f64) -> usize {
    (0..cfg.epsilons.len())
        .min_by(|&a, &b| {
            let d = |i: usize| (cfg.epsilons[i] / eps).ln().abs();
            d(a).total_cmp(&d(b))
        })
        .unwrap_or(0)
}

/// The per-item table (`docs/real-data.md`): the data set's item id, `p1`, `p99`, `sensitivity`,
/// `users` the percentiles ran over, `candidates` (appearances among users' top candidates) and
/// `clipped_share` (of those candidate scores, the share outside `[p1, p99]`).
fn item_table(res: &SelectResults<'_>) -> Table {
    let s = res.sens;
    let n = s.delta.len();
    let c = res.counts;
    let id = |j: usize| {
        res.item_ids
            .get(j)
            .cloned()
            .unwrap_or_else(|| j.to_string())
    };
    Table::default()
        .with("item", Values::Str((0..n).map(id).collect()))
        .with("p1", Values::F64(s.lower.clone()))
        .with("p99", Values::F64(s.upper.clone()))
        .with("sensitivity", Values::F64(s.delta.clone()))
        .with("users", Values::U64(s.counts.clone()))
        .with("candidates", Values::U64(c.appearances.clone()))
        .with(
            "clipped_share",
            Values::F64(
                (0..n)
                    .map(|j| {
                        if c.appearances[j] == 0 {
                            0.0
                        } else {
                            c.outside[j] as f64 / c.appearances[j] as f64
                        }
                    })
                    .collect(),
            ),
        )
}

/// Writes `mse.{csv,parquet}`, `users.{csv,parquet}`, `items.{csv,parquet}`,
/// `rules.{csv,parquet}` (when gem and mgem ran), `diagnostics.json`, `config.{json,toml}` and the
/// plots
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
    files.extend(item_table(res).write(out, "items")?);
    if !res.rules.is_empty() {
        files.extend(super::table::to_table(res.rules)?.write(out, "rules")?);
    }
    let p = out.join("diagnostics.json");
    let text =
        serde_json::to_string_pretty(res.diagnostics).map_err(|e| crate::error::Error::Parse {
            context: "diagnostics".into(),
            message: e.to_string(),
        })?;
    crate::io::write_atomic(&p, format!("{text}\n").as_bytes())?;
    files.push(p);
    match run.pipeline {
        Some(pipeline) => {
            let with = WithPipeline { run, pipeline };
            files.extend(Resolved::new("select", &with).write(out)?);
        }
        None => files.extend(Resolved::new("select", run).write(out)?),
    }
    files.extend(plots(out, run, res)?);
    Ok(files)
}

/// After `recsel select --add-mech`: the per-user MSE differences of the added mechanisms (those
/// after the first `n_old` of `cfg`) against each earlier one
/// ([`crate::experiments::select::paired_differences`]), written as `paired.{csv,parquet}` in
/// `out`; returns the table as text for the terminal.
pub fn write_paired(
    out: &Path,
    cfg: &SelectConfig,
    rows: &[UserRow],
    n_old: usize,
) -> Result<String> {
    use std::fmt::Write as _;
    let added = &cfg.mechanisms[n_old.min(cfg.mechanisms.len())..];
    let paired = crate::experiments::select::paired_differences(cfg, rows, added);
    let col = |f: fn(&crate::experiments::select::PairedRow) -> f64| {
        Values::F64(paired.iter().map(f).collect())
    };
    Table::default()
        .with(
            "mechanism",
            Values::Str(paired.iter().map(|p| p.mechanism.clone()).collect()),
        )
        .with(
            "reference",
            Values::Str(paired.iter().map(|p| p.reference.clone()).collect()),
        )
        .with("epsilon", col(|p| p.epsilon))
        .with("mean_difference", col(|p| p.mean_difference))
        .with("se", col(|p| p.se))
        .with(
            "users",
            Values::U64(paired.iter().map(|p| p.users).collect()),
        )
        .write(out, "paired")?;
    let mut t = String::from(
        "\npaired per-user MSE differences (added - reference; negative: added is better)\n",
    );
    let _ = writeln!(
        t,
        "{:<13} {:<13} {:>8} {:>13} {:>11} {:>7}",
        "added", "reference", "eps", "mean diff", "s.e.", "users"
    );
    for p in &paired {
        let _ = writeln!(
            t,
            "{:<13} {:<13} {:>8} {:>13.6} {:>11.6} {:>7}",
            p.mechanism, p.reference, p.epsilon, p.mean_difference, p.se, p.users
        );
    }
    let _ = writeln!(t, "wrote {}", out.join("paired.csv").display());
    Ok(t)
}

/// The MSE table: one row per (mechanism, ε); with a candidate policy that keeps the history,
/// also the share of picks already in the user's history (`in_history`, `in_history_se`); with
/// a mechanism that can release ⊥, the share of selections that did (`bottom`, `bottom_se`).
fn mse_table(dataset: &str, mse: &[MseRow]) -> Table {
    let mut t = mse_table_base(dataset, mse);
    if mse.iter().any(|r| r.in_history.is_some()) {
        let own = |i: usize| move |r: &MseRow| r.in_history.map_or(f64::NAN, |o| [o.0, o.1][i]);
        t = t
            .with("in_history", Values::F64(mse.iter().map(own(0)).collect()))
            .with(
                "in_history_se",
                Values::F64(mse.iter().map(own(1)).collect()),
            );
    }
    if mse.iter().any(|r| r.bottom.is_some()) {
        let bot = |i: usize| move |r: &MseRow| r.bottom.map_or(f64::NAN, |o| [o.0, o.1][i]);
        t = t
            .with("bottom", Values::F64(mse.iter().map(bot(0)).collect()))
            .with("bottom_se", Values::F64(mse.iter().map(bot(1)).collect()));
    }
    t
}

fn mse_table_base(dataset: &str, mse: &[MseRow]) -> Table {
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
            "guarantee",
            Values::Str(mse.iter().map(|r| r.guarantee.clone()).collect()),
        )
        .with(
            "guarantee_epsilon",
            Values::F64(mse.iter().map(|r| r.guarantee_epsilon).collect()),
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
        .with("hit1", Values::F64(mse.iter().map(|r| r.hit1).collect()))
        .with(
            "hit1_se",
            Values::F64(mse.iter().map(|r| r.hit1_se).collect()),
        )
        .with(
            "relative_mse",
            Values::F64(mse.iter().map(|r| r.relative_mse).collect()),
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
                guarantee: r.guarantee.clone(),
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
    let pos = |name: &str| cfg.mechanisms.iter().position(|m| m == name);
    if let Some((points, left_out)) =
        scatter_points(cfg, rows, nearest_epsilon(cfg, run.scatter_eps))
    {
        let e = nearest_epsilon(cfg, run.scatter_eps);
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
