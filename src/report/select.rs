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
pub use crate::experiments::real::SCATTER_USERS;
use crate::experiments::real::{
    random_sample, Diagnostics, ItemCounts, MseRow, RuleRow, SelectConfig, SpearmanSummary, UserRow,
};
use crate::experiments::synthetic::MseRow as PlotRow;
use crate::model::ModelParams;
use crate::scoring::PercentileUsers;
use crate::scoring::Sensitivities;

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

/// Wall-clock seconds of a run's stages, for the summary.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Timings {
    /// Per-item sensitivities.
    pub sensitivity_seconds: f64,
    /// Selection for every user.
    pub selection_seconds: f64,
    /// The analysis pass (diagnostics, rules).
    pub diagnostics_seconds: f64,
    /// The whole run.
    pub total_seconds: f64,
    /// Peak resident memory in MB (NaN where unknown).
    pub peak_rss_mb: f64,
}

/// The human-readable summary of a `select` run: what kind of run it was (DP release or not), the
/// Spearman summary and diagnostics, the fig 13 d–f sample, the MSE table and the timings.
/// `scatter` is [`scatter_points`] at grid point `scatter_e`.
pub fn summary_text(
    run: &SelectRun<'_>,
    res: &SelectResults<'_>,
    scatter: Option<&(Vec<(f64, f64)>, u64)>,
    scatter_e: usize,
    t: &Timings,
) -> String {
    use std::fmt::Write as _;
    let (cfg, d) = (run.select, res.diagnostics);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} users ({} without candidates), {} trials, {}",
        run.dataset,
        run.users,
        run.users_without_candidates,
        cfg.trials,
        if cfg.noise.is_secure() {
            "secure mode (no seed)".to_string()
        } else {
            format!("seed {}", cfg.seed)
        }
    );
    let kind = if cfg.clip {
        "scores clipped to each item's [p1, p99]: a DP release"
    } else {
        "scores NOT clipped (the paper's text): Delta_j estimates the spread, it is no bound; \
         not a DP release (--clip makes one)"
    };
    let _ = writeln!(
        out,
        "{kind}; percentiles over {} test users",
        if cfg.percentile_users == PercentileUsers::All {
            "all"
        } else {
            "the item's non-owners among the"
        }
    );
    let _ = writeln!(
        out,
        "Spearman(scores, sensitivities) per user: mean {:.3}, median {:.3}, {:.1}% positive, \
         {} users negative",
        res.spearman.mean,
        res.spearman.median,
        100.0 * res.spearman.share_positive,
        d.users_negative_spearman
    );
    let _ = writeln!(
        out,
        "diagnostics: {:.2}% of {} candidate scores outside [p1, p99]; {:.2}% of items ({:.2}% of \
         candidates) at the sensitivity floor",
        100.0 * d.share_clipped,
        d.candidate_scores,
        100.0 * d.share_items_at_floor,
        100.0 * d.share_candidates_at_floor
    );
    let q = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3e}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        out,
        "quantiles (min 1% 25% 50% 75% 99% max) of candidate scores: {}; of candidate \
         sensitivities: {}; of item sensitivities: {}",
        q(&d.score_quantiles),
        q(&d.candidate_sensitivity_quantiles),
        q(&d.item_sensitivity_quantiles)
    );
    if let Some((p, left_out)) = scatter {
        let _ = writeln!(
            out,
            "fig 13 d-f at eps = {}: {} random users drawn, {} shown, {left_out} left out (a mean \
             selected score not positive)",
            cfg.epsilons[scatter_e],
            p.len() as u64 + left_out,
            p.len()
        );
    }
    let _ = write!(out, "\n{:<13}", "MSE");
    for e in &cfg.epsilons {
        let _ = write!(out, " {:>9}", format!("eps={e}"));
    }
    let _ = writeln!(out);
    for (m, name) in cfg.mechanisms.iter().enumerate() {
        let _ = write!(out, "{name:<13}");
        for e in 0..cfg.epsilons.len() {
            let _ = write!(out, " {:>9.3e}", res.mse[m * cfg.epsilons.len() + e].mse);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "\nsensitivities {:.1} s, selection {:.1} s, diagnostics {:.1} s, total {:.1} s, peak \
         memory {:.0} MB",
        t.sensitivity_seconds,
        t.selection_seconds,
        t.diagnostics_seconds,
        t.total_seconds,
        t.peak_rss_mb
    );
    out
}

/// The one JSON object `select --json` prints: the MSE table, the Spearman summary, the kind of
/// run (`clip`, `percentile_users`, `dp_release`, `secure`), the diagnostics, the fig 13 d–f
/// sample, the rule table, the timings and the output folder.
pub fn summary_json(
    run: &SelectRun<'_>,
    res: &SelectResults<'_>,
    scatter: Option<&(Vec<(f64, f64)>, u64)>,
    scatter_e: usize,
    t: &Timings,
    out: &Path,
) -> serde_json::Value {
    let cfg = run.select;
    serde_json::json!({
        "dataset": run.dataset,
        "users": run.users,
        "users_without_candidates": run.users_without_candidates,
        "mse": res.mse,
        "spearman": res.spearman,
        "seed": cfg.seed,
        "secure": cfg.noise.is_secure(),
        "clip": cfg.clip,
        "percentile_users": cfg.percentile_users.name(),
        "dp_release": cfg.clip,
        "diagnostics": res.diagnostics,
        "scatter": scatter.map(|(p, left_out)| serde_json::json!({
            "epsilon": cfg.epsilons[scatter_e],
            "users_drawn": p.len() as u64 + left_out,
            "users_shown": p.len(),
            "users_left_out": left_out,
        })),
        "rules": res.rules,
        "sensitivity_seconds": t.sensitivity_seconds,
        "selection_seconds": t.selection_seconds,
        "diagnostics_seconds": t.diagnostics_seconds,
        "total_seconds": t.total_seconds,
        "peak_rss_mb": t.peak_rss_mb,
        "out": out,
    })
}

/// The outputs and the printed summary of a `select` run whose phases a front end ran itself
/// (the Python package's Ray runner, docs/python.md): [`write_select`] into `out`, then the
/// summary `recsel select` prints — [`summary_json`] when `json`, else [`summary_text`] followed by
/// one `wrote <file>` line per file. Returns the printed text.
#[allow(clippy::too_many_arguments)]
pub fn finish_select(
    out: &Path,
    run: &SelectRun<'_>,
    rows: &[UserRow],
    analysis: &crate::experiments::real::Analysis,
    sens: &Sensitivities,
    user_ids: &[String],
    item_ids: &[String],
    timings: &Timings,
    json: bool,
) -> Result<String> {
    let scatter_e = nearest_epsilon(run.select, run.scatter_eps);
    let scatter = scatter_points(run.select, rows, scatter_e);
    let results = SelectResults {
        rows,
        mse: &analysis.mse,
        spearman: &analysis.spearman,
        user_ids,
        sens,
        item_ids,
        counts: &analysis.counts,
        diagnostics: &analysis.diagnostics,
        rules: &analysis.rules,
    };
    let files = write_select(out, run, &results)?;
    if json {
        let obj = summary_json(run, &results, scatter.as_ref(), scatter_e, timings, out);
        return Ok(format!("{obj}\n"));
    }
    let mut text = summary_text(run, &results, scatter.as_ref(), scatter_e, timings);
    for f in files {
        text.push_str(&format!("wrote {}\n", f.display()));
    }
    Ok(text)
}
