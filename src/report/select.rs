//! Everything a real-data selection run writes (docs/protocol.md, "Outputs"): the MSE table, the
//! per-user table, the resolved configuration and the figure-13/21 plots. The command line, the
//! Python package and distributed runners call [`write_select`] on the results of
//! [`crate::experiments::real::run_all`], so every front end produces the same files.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::plot;
use super::table::{Table, Values};
use super::Resolved;
use crate::data::{DataSource, Format, LoadOptions, NamedDataset};
use crate::error::Result;
use crate::experiments::real::UserProblem;
pub use crate::experiments::real::SCATTER_USERS;
use crate::experiments::real::{
    self, random_sample, Diagnostics, ItemCounts, MseRow, RuleRow, SelectConfig, SpearmanSummary,
    UserRow,
};
use crate::experiments::select_pipeline::{RatingCut, SelectPipeline};
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
    /// Where the data came from, how it was loaded, and the model folder used: when given,
    /// `config.{json,toml}` also records `pipeline`, the `[select]` table that reruns this run
    /// (`recsel run DIR/config.toml`, docs/protocol.md, "Rerunning a run").
    #[serde(skip)]
    pub source: Option<(&'a DataSource, &'a LoadOptions, &'a Path)>,
}

/// The resolved configuration with the rerunnable `[select]` table.
#[derive(Serialize)]
struct WithPipeline<'a> {
    #[serde(flatten)]
    run: &'a SelectRun<'a>,
    pipeline: SelectPipeline,
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The `[select]` pipeline table that reruns `run` (every value resolved: nothing is left to a
/// default that could change), reading the data from `source` as loaded with `load` and the model
/// from `model_dir` (absolute paths, so the table runs from any working directory). A secure run's
/// table runs the float path (a secure run has no seed to reproduce).
pub fn rerun_table(
    run: &SelectRun<'_>,
    source: &DataSource,
    load: &LoadOptions,
    model_dir: &Path,
) -> SelectPipeline {
    let cfg = run.select;
    let mut t = SelectPipeline::default();
    match source {
        DataSource::Named { dataset, data_dir } => {
            t.dataset = Some(
                match dataset {
                    NamedDataset::Ml20m => "ml20m",
                    NamedDataset::Netflix => "netflix",
                    NamedDataset::AmazonBook => "amazon-book",
                    NamedDataset::Synthetic(shape) => {
                        t.shape = Some(shape.name().to_string());
                        "synthetic"
                    }
                }
                .to_string(),
            );
            if !matches!(dataset, NamedDataset::Synthetic(_)) {
                t.data_dir = Some(absolute(data_dir));
            }
        }
        DataSource::Path {
            format,
            path,
            columns,
        } => {
            let f = match format {
                Format::MovieLens => "movielens",
                Format::Netflix => "netflix",
                Format::LightGcn => "lightgcn",
                Format::Csv => "csv",
                Format::Parquet => "parquet",
            };
            t.format = Some(f.to_string());
            t.path = Some(absolute(path));
            if let Some(c) = columns {
                t.user_col = Some(c.user.clone());
                t.item_col = Some(c.item.clone());
                t.rating_col = c.rating.clone();
            }
            if *format == Format::Csv {
                t.delimiter = Some((load.delimiter as char).to_string());
            }
        }
    }
    t.min_rating = load.min_rating.map(|r| match r {
        Some(v) => RatingCut::Value(f64::from(v)),
        None => RatingCut::Word("none".into()),
    });
    t.min_user_items = load.min_user_items;
    t.test_users = load.test_users;
    t.model_dir = Some(absolute(model_dir));
    t.data_seed = Some(run.data_seed);
    t.method = Some(run.model.method.name().to_string());
    t.l2 = Some(run.model.l2);
    t.density = Some(run.model.density);
    t.mechanisms = Some(cfg.mechanisms.join(","));
    t.epsilons = Some(cfg.epsilons.clone());
    t.trials = Some(cfg.trials);
    t.top = Some(cfg.top);
    t.candidates = cfg.candidates.as_ref().map(|c| c.policy.to_string());
    t.clip = Some(cfg.clip);
    t.percentile_users = Some(cfg.percentile_users.name().to_string());
    let p = &cfg.params;
    (t.gamma, t.beta, t.eta, t.c) = (Some(p.gamma), Some(p.beta), Some(p.eta), Some(p.c));
    t.chooser = Some(p.chooser.name().to_string());
    t.seed = Some(cfg.seed);
    t.scatter_eps = Some(run.scatter_eps);
    t
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
    /// Which mechanism for this data ([`crate::experiments::real::advice`]).
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
    match run.source {
        Some((source, load, model_dir)) => {
            let pipeline = rerun_table(run, source, load, model_dir);
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
/// ([`crate::experiments::real::paired_differences`]), written as `paired.{csv,parquet}` in
/// `out`; returns the table as text for the terminal.
pub fn write_paired(
    out: &Path,
    cfg: &SelectConfig,
    rows: &[UserRow],
    n_old: usize,
) -> Result<String> {
    use std::fmt::Write as _;
    let added = &cfg.mechanisms[n_old.min(cfg.mechanisms.len())..];
    let paired = crate::experiments::real::paired_differences(cfg, rows, added);
    let col = |f: fn(&crate::experiments::real::PairedRow) -> f64| {
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

/// The folders of seed 001's three fig 13 runs (`pipelines/fig13_*.toml`), in column order.
pub const FIG13_RUNS: [&str; 3] = ["fig13_ml20m", "fig13_netflix", "fig13_amazon_book"];

fn read_text(p: &Path) -> Result<String> {
    std::fs::read_to_string(p).map_err(|e| crate::error::Error::io(p, e))
}

fn bad(p: &Path, what: String) -> crate::error::Error {
    crate::error::Error::Parse {
        context: p.display().to_string(),
        message: what,
    }
}

/// One finished `select` run's fig 13 panels, read back from its folder (`config.json`,
/// `users.csv`, `mse.csv`): the same values its own fig 13 plots were drawn from.
pub fn fig13_column(dir: &Path) -> Result<plot::Fig13Column> {
    let cp = dir.join("config.json");
    let config: serde_json::Value =
        serde_json::from_str(&read_text(&cp)?).map_err(|e| bad(&cp, e.to_string()))?;
    let c = &config["config"];
    let title = c["dataset"].as_str().unwrap_or("?").to_string();
    let seed = c["select"]["seed"].as_u64().unwrap_or(0);
    let epsilons: Vec<f64> = c["select"]["epsilons"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default();
    let scatter_eps = c["scatter_eps"].as_f64().unwrap_or(1.0);
    // users.csv: the first column is the user id (possibly quoted), the rest are numbers.
    let up = dir.join("users.csv");
    let text = read_text(&up)?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let numbers: Vec<Vec<f64>> = lines
        .enumerate()
        .map(|(i, l)| {
            let mut f: Vec<&str> = l.rsplitn(header.len().max(1), ',').collect();
            f.reverse();
            f.iter()
                .skip(1)
                .map(|x| x.parse::<f64>())
                .collect::<std::result::Result<Vec<f64>, _>>()
                .map_err(|_| {
                    bad(
                        &up,
                        format!("line {}: not numbers after the user id", i + 2),
                    )
                })
        })
        .collect::<Result<_>>()?;
    let at = |row: &Vec<f64>, c: usize| row[c - 1];
    let sp = col("spearman").ok_or_else(|| bad(&up, "no spearman column".into()))?;
    let spearman: Vec<f64> = numbers.iter().map(|r| at(r, sp)).collect();
    let rows: Vec<UserRow> = spearman
        .iter()
        .map(|&v| UserRow {
            user: 0,
            candidates: 0,
            spearman: v,
            pearson: 0.0,
            weighted: 0.0,
            max_score: 0.0,
            mean_selected: Vec::new(),
            mse: Vec::new(),
            random_mse: 0.0,
            hit: Vec::new(),
            in_history: Vec::new(),
        })
        .collect();
    let summary = crate::experiments::real::spearman_summary(&rows);
    let e = (0..epsilons.len()).min_by(|&a, &b| {
        let d = |i: usize| (epsilons[i] / scatter_eps).ln().abs();
        d(a).total_cmp(&d(b))
    });
    let scatter = e.and_then(|e| {
        let eps = epsilons[e];
        let (mg, g) = (
            col(&format!("mean_mgem_eps{eps}"))?,
            col(&format!("mean_gem_eps{eps}"))?,
        );
        let (mut points, mut left_out) = (Vec::new(), 0u64);
        for i in random_sample(numbers.len(), SCATTER_USERS, seed) {
            let (a, b) = (at(&numbers[i], mg), at(&numbers[i], g));
            if a > 0.0 && b > 0.0 {
                points.push((spearman[i], (a / b).ln()));
            } else {
                left_out += 1;
            }
        }
        Some((points, left_out, eps))
    });
    let mp = dir.join("mse.csv");
    let text = read_text(&mp)?;
    let mut lines = text.lines();
    // Columns by name: the table gains columns over time (guarantee, hit@1, ...).
    let mheader: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let mcol = |name: &str| {
        mheader
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| bad(&mp, format!("no `{name}` column")))
    };
    let (c_mech, c_private, c_eps, c_mse, c_se, c_users, c_trials) = (
        mcol("mechanism")?,
        mcol("private")?,
        mcol("epsilon")?,
        mcol("mse")?,
        mcol("se")?,
        mcol("users")?,
        mcol("trials")?,
    );
    let c_guarantee = mcol("guarantee").ok();
    let mse = lines
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |k: usize| f.get(k).and_then(|x| x.parse::<f64>().ok());
            match (
                f.get(c_mech),
                num(c_eps),
                num(c_mse),
                num(c_se),
                num(c_users),
                num(c_trials),
            ) {
                (Some(mech), Some(epsilon), Some(mse), Some(se), Some(users), Some(trials)) => {
                    Ok(PlotRow {
                        scenario: title.clone(),
                        mechanism: mech.to_string(),
                        private: f.get(c_private) == Some(&"true"),
                        guarantee: c_guarantee
                            .and_then(|c| f.get(c))
                            .map_or(String::new(), |g| g.to_string()),
                        epsilon,
                        mse,
                        se,
                        trials: (users * trials) as u64,
                    })
                }
                _ => Err(bad(
                    &mp,
                    format!("line {}: not a row of an MSE table", i + 2),
                )),
            }
        })
        .collect::<Result<_>>()?;
    Ok(plot::Fig13Column {
        title,
        spearman,
        summary,
        scatter,
        mse,
    })
}

/// Writes `fig13.png` (and `.svg` with `--svg`) into `parent` when the three fig 13 runs
/// [`FIG13_RUNS`] exist under it (each with its `mse.csv`); returns the path written, or `None`
/// when a run is missing.
pub fn write_fig13_combined(parent: &Path) -> Result<Option<PathBuf>> {
    let dirs: Vec<PathBuf> = FIG13_RUNS.iter().map(|r| parent.join(r)).collect();
    if !dirs.iter().all(|d| d.join("mse.csv").exists()) {
        return Ok(None);
    }
    let columns = dirs
        .iter()
        .map(|d| fig13_column(d))
        .collect::<Result<Vec<_>>>()?;
    let path = parent.join("fig13.png");
    plot::fig13_combined_png(&path, &columns)?;
    Ok(Some(path))
}

/// Computes every user's problem of `cfg` ([`crate::experiments::real::all_problems`]) and writes
/// them with [`write_problems`]; returns the paths written.
pub fn dump_problems<S: crate::scoring::UserScorer>(
    path: &Path,
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    data: &crate::data::Dataset,
) -> Result<Vec<PathBuf>> {
    let problems = crate::experiments::real::all_problems(scorer, sens, cfg, &|_| {});
    write_problems(path, &problems, &data.test_user_ids, &data.item_ids)
}

/// Writes every user's selection problem (`recsel select --dump-problems FILE.parquet`,
/// docs/protocol.md, "Exported problems") in long format, one row per (user, candidate): `user`
/// (test user id), `user_index`, `rank` (0 = best model score), `item` (item id), `item_index`,
/// `score` (as the mechanisms see it: clipped when the run clips) and `sensitivity` (Δ_j). `path`
/// must end in `.parquet`; the same table is written beside it as `.csv`. Returns the paths.
pub fn write_problems(
    path: &Path,
    problems: &[(usize, UserProblem)],
    user_ids: &[String],
    item_ids: &[String],
) -> Result<Vec<PathBuf>> {
    let stem = match (path.extension(), path.file_stem()) {
        (Some(e), Some(s)) if e == "parquet" => s.to_string_lossy().into_owned(),
        _ => {
            return Err(crate::error::Error::Invalid(format!(
                "--dump-problems: {} must end in .parquet",
                path.display()
            )))
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    crate::io::ensure_dir(dir)?;
    let rows = || {
        problems
            .iter()
            .flat_map(|(u, p)| (0..p.items.len()).map(move |r| (*u, p, r)))
    };
    Table::default()
        .with(
            "user",
            Values::Str(rows().map(|(u, _, _)| user_ids[u].clone()).collect()),
        )
        .with(
            "user_index",
            Values::U64(rows().map(|(u, _, _)| u as u64).collect()),
        )
        .with(
            "rank",
            Values::U64(rows().map(|(_, _, r)| r as u64).collect()),
        )
        .with(
            "item",
            Values::Str(
                rows()
                    .map(|(_, p, r)| item_ids[p.items[r] as usize].clone())
                    .collect(),
            ),
        )
        .with(
            "item_index",
            Values::U64(rows().map(|(_, p, r)| u64::from(p.items[r])).collect()),
        )
        .with(
            "score",
            Values::F64(rows().map(|(_, p, r)| p.scores[r]).collect()),
        )
        .with(
            "sensitivity",
            Values::F64(rows().map(|(_, p, r)| p.sens[r]).collect()),
        )
        .write(dir, &stem)
}

/// The MSE table: one row per (mechanism, ε); with a candidate policy that keeps the history,
/// also the share of picks already in the user's history (`in_history`, `in_history_se`).
fn mse_table(dataset: &str, mse: &[MseRow]) -> Table {
    let t = mse_table_base(dataset, mse);
    if mse.iter().all(|r| r.in_history.is_none()) {
        return t;
    }
    let own = |i: usize| move |r: &MseRow| r.in_history.map_or(f64::NAN, |o| [o.0, o.1][i]);
    t.with("in_history", Values::F64(mse.iter().map(own(0)).collect()))
        .with(
            "in_history_se",
            Values::F64(mse.iter().map(own(1)).collect()),
        )
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
/// Spearman summary and diagnostics, the fig 13 d–f sample, the MSE table and the timings.
/// `scatter` is [`scatter_points`] at grid point `scatter_e`; `peak_mb` is the process's peak
/// resident memory (NaN where unknown).
pub fn summary_text(
    run: &SelectRun<'_>,
    res: &SelectResults<'_>,
    scatter: Option<&(Vec<(f64, f64)>, u64)>,
    scatter_e: usize,
    t: &Timings,
    peak_mb: f64,
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
    for (title, cell) in grids {
        let _ = write!(out, "\n{title:<13} {:>12}", format!("guar. k={}", cfg.top));
        for e in &cfg.epsilons {
            let _ = write!(out, " {:>9}", format!("eps={e}"));
        }
        let _ = writeln!(out);
        let ne = cfg.epsilons.len();
        for (m, name) in cfg.mechanisms.iter().enumerate() {
            let first = &res.mse[m * ne];
            let _ = write!(out, "{name:<13} {:>12}", real::guarantee_label(first));
            for e in 0..ne {
                let _ = write!(out, " {:>9}", cell(&res.mse[m * ne + e]));
            }
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(
        out,
        "(hit@1: share of private picks that are one of the user's held-out items; MSE/random: \
         1 = no better than a uniform choice among the candidates)"
    );
    if cfg.candidates.is_some() {
        let _ = writeln!(
            out,
            "(in history: share of picks that are an item the user already has, the price of \
             candidates that do not depend on the history)"
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
        advice: &analysis.advice,
    };
    let files = write_select(out, run, &results)?;
    // Read after the outputs are written: building the per-user table is the run's peak (this
    // process's: under the Ray runner, the driver's).
    let peak = crate::io::peak_rss_mb().unwrap_or(f64::NAN);
    if json {
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
    let mut text = summary_text(run, &results, scatter.as_ref(), scatter_e, timings, peak);
    for f in files {
        text.push_str(&format!("wrote {}\n", f.display()));
    }
    Ok(text)
}
