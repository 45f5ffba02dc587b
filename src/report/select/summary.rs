//! What a `select` run prints: the summary (the headline MSE table, the advice and where the
//! files are; with `verbose` also the diagnostics and the MSE/random and hit@1 tables) or one
//! JSON object.

use std::path::Path;

use serde::Serialize;

use super::{nearest_epsilon, scatter_points, write_select, SelectResults, SelectRun};
use crate::error::Result;
use crate::experiments::select::{self, Analysis, MseRow, SelectConfig, SelectJob, UserRow};
use crate::scoring::{PercentileUsers, Sensitivities};

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
}

/// The human-readable summary of a `select` run: what kind of run it was (DP release or not), the
/// Spearman summary, the MSE table, the advice and the timings — one screen; with `verbose` also
/// the diagnostics, the fig 13 d–f sample and the MSE/random and hit@1 tables. `scatter` is
/// [`scatter_points`] at grid point `scatter_e`; `peak_mb` is the process's peak resident memory
/// (NaN where unknown).
#[allow(clippy::too_many_arguments)]
pub fn summary_text(
    run: &SelectRun<'_>,
    res: &SelectResults<'_>,
    scatter: Option<&(Vec<(f64, f64)>, u64)>,
    scatter_e: usize,
    t: &Timings,
    peak_mb: f64,
    verbose: bool,
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
    if verbose {
        diagnostics_text(&mut out, run, res, scatter, scatter_e);
    }
    // The guarantee column: what each mechanism really is at this run's k (= top).
    type Cell = fn(&MseRow) -> String;
    let mut grids: Vec<(&str, Cell)> = vec![
        ("MSE", |r| format!("{:.3e}", r.mse)),
        ("MSE/random", |r| format!("{:.3}", r.relative_mse)),
        ("hit@1", |r| format!("{:.4}", r.hit1)),
    ];
    if let Some(c) = &cfg.candidates {
        let _ = writeln!(
            out,
            "candidates: {} ({} items, the same for every user, the user's own included: a \
             clipped run is user-level eps-DP per pick)",
            c.policy, cfg.top
        );
        grids.push(("in history", |r| {
            format!("{:.4}", r.in_history.map_or(f64::NAN, |o| o.0))
        }));
    }
    for (title, cell) in grids.iter().take(if verbose { grids.len() } else { 1 }) {
        grid_text(&mut out, cfg, res.mse, title, *cell);
    }
    // ⊥ is an output (docs/private-candidates.md, "⊥ is an output"): always shown when a
    // mechanism of the run can release it.
    if res.mse.iter().any(|r| r.bottom.is_some()) {
        grid_text(&mut out, cfg, res.mse, "⊥ share", |r| {
            format!("{:.4}", r.bottom.map_or(f64::NAN, |o| o.0))
        });
        let _ = writeln!(
            out,
            "(⊥: the selection gave up, e.g. no run reached rs-threshold's threshold; the pick \
             scored above is then a uniform candidate. A rate far from 0 says the threshold is \
             too high for these scores)"
        );
    }
    if verbose {
        let _ = writeln!(
            out,
            "(hit@1: share of private picks that are one of the user's held-out items; \
             MSE/random: 1 = no better than a uniform choice among the candidates)"
        );
        if cfg.candidates.is_some() {
            let _ = writeln!(
                out,
                "(in history: share of picks that are an item the user already has, the price \
                 of candidates that do not depend on the history)"
            );
        }
    } else if cfg.candidates.is_some() {
        let own = res.mse.iter().filter_map(|r| r.in_history.map(|o| o.0));
        let (lo, hi) = own.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        let _ = writeln!(
            out,
            "in history: {lo:.4} to {hi:.4} of the picks are an item the user already has \
             (--verbose: per mechanism and eps)"
        );
    }
    let _ = writeln!(
        out,
        "\nadvice (docs/deployment.md, \"Which mechanism for my data\"):"
    );
    for line in res.advice {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "\nsensitivities {:.1} s, selection {:.1} s, diagnostics {:.1} s, total {:.1} s, peak \
         memory {:.0} MB",
        t.sensitivity_seconds, t.selection_seconds, t.diagnostics_seconds, t.total_seconds, peak_mb
    );
    out
}

/// One table of the summary: a row per mechanism with its guarantee at the run's k and `cell`
/// at every ε.
fn grid_text(
    out: &mut String,
    cfg: &SelectConfig,
    mse: &[MseRow],
    title: &str,
    cell: fn(&MseRow) -> String,
) {
    use std::fmt::Write as _;
    let _ = write!(out, "\n{title:<13} {:>12}", format!("guar. k={}", cfg.top));
    for e in &cfg.epsilons {
        let _ = write!(out, " {:>9}", format!("eps={e}"));
    }
    let _ = writeln!(out);
    let ne = cfg.epsilons.len();
    for (m, name) in cfg.mechanisms.iter().enumerate() {
        let first = &mse[m * ne];
        let _ = write!(out, "{name:<13} {:>12}", select::guarantee_label(first));
        for e in 0..ne {
            let _ = write!(out, " {:>9}", cell(&mse[m * ne + e]));
        }
        let _ = writeln!(out);
    }
}

/// The diagnostics lines of the verbose summary: clipping and the sensitivity floor, the
/// quantiles of scores and sensitivities, the fig 13 d–f sample.
fn diagnostics_text(
    out: &mut String,
    run: &SelectRun<'_>,
    res: &SelectResults<'_>,
    scatter: Option<&(Vec<(f64, f64)>, u64)>,
    scatter_e: usize,
) {
    use std::fmt::Write as _;
    let (cfg, d) = (run.select, res.diagnostics);
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
    peak_mb: f64,
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
        "advice": res.advice,
        "sensitivity_seconds": t.sensitivity_seconds,
        "selection_seconds": t.selection_seconds,
        "diagnostics_seconds": t.diagnostics_seconds,
        "total_seconds": t.total_seconds,
        "peak_rss_mb": peak_mb,
        "out": out,
    })
}

/// How a `select` run prints its summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Print {
    /// One JSON object ([`summary_json`]) instead of text.
    pub json: bool,
    /// The whole text: diagnostics, every table, one line per file written.
    pub verbose: bool,
}

/// The last step of every front end's `select` run: analyses nothing more, writes every output
/// of the run of `cfg` (the job's configuration, or the one a run with added mechanisms ends
/// with) into the job's folder with its rerunnable `[select]` table, and returns the summary to
/// print. `rows` are every user's rows in user order; `skipped` the users without candidates.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    job: &SelectJob,
    cfg: &SelectConfig,
    rows: &[UserRow],
    skipped: u64,
    analysis: &Analysis,
    sens: &Sensitivities,
    timings: &Timings,
    print: Print,
) -> Result<String> {
    let pipeline = job.rerun_options(cfg);
    let run = SelectRun {
        dataset: job.data.name(),
        split_seed: job.split_seed,
        model: job.model_params,
        select: cfg,
        scatter_eps: job.scatter_eps,
        users: rows.len(),
        users_without_candidates: skipped,
        pipeline: Some(&pipeline),
    };
    let (users, items) = (&job.data.test_user_ids, &job.data.item_ids);
    // The public baselines beside the mechanisms (docs/utility.md, "The baselines").
    let scorer = crate::scoring::ModelScorer::new(&job.model, &job.data.test_input)
        .with_targets(&job.data.test_target);
    let (baselines, path) = crate::experiments::baselines::write_baselines(
        &scorer,
        cfg,
        &job.popularity,
        job.calibration_heldout.as_deref(),
        &job.out,
    )?;
    let text = finish_select(
        &job.out,
        &run,
        rows,
        analysis,
        sens,
        users,
        items,
        timings,
        print,
        &[path],
    )?;
    Ok(crate::experiments::baselines::add_to_summary(
        &baselines, cfg, rows, text, print.json,
    ))
}

/// [`finish`] for a run described by `run` alone: [`write_select`] into `out`, then the summary
/// — [`summary_json`] when `print.json`, else [`summary_text`] followed by where the files are
/// (one `wrote <file>` line per file when `print.verbose`; `also_written`, files the caller
/// wrote into `out` besides, are listed last). Returns the printed text.
#[allow(clippy::too_many_arguments)]
pub fn finish_select(
    out: &Path,
    run: &SelectRun<'_>,
    rows: &[UserRow],
    analysis: &Analysis,
    sens: &Sensitivities,
    user_ids: &[String],
    item_ids: &[String],
    timings: &Timings,
    print: Print,
    also_written: &[std::path::PathBuf],
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
        advice: &analysis.advice,
    };
    let mut files = write_select(out, run, &results)?;
    files.extend(also_written.iter().cloned());
    // Read after the outputs are written: building the per-user table is the run's peak (this
    // process's: under the Ray runner, the driver's).
    let peak = crate::io::peak_rss_mb().unwrap_or(f64::NAN);
    if print.json {
        let obj = summary_json(
            run,
            &results,
            scatter.as_ref(),
            scatter_e,
            timings,
            peak,
            out,
        );
        return Ok(format!("{obj}\n"));
    }
    let (s, e) = (scatter.as_ref(), scatter_e);
    let mut text = summary_text(run, &results, s, e, timings, peak, print.verbose);
    if print.verbose {
        for f in files {
            text.push_str(&format!("wrote {}\n", f.display()));
        }
    } else {
        let names: Vec<String> = files
            .iter()
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        text.push_str(&format!(
            "wrote {} files to {}: {}\n(--verbose: diagnostics, MSE/random and hit@1 tables)\n",
            files.len(),
            out.display(),
            names.join(" ")
        ));
    }
    Ok(text)
}
