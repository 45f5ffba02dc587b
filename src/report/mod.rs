//! Outputs of the experiments: tidy tables (CSV and Parquet), resolved configurations (JSON and
//! TOML) and PNG plots. Every file is written atomically — to a temporary file in the same folder,
//! then renamed — so an interrupted run never leaves a half-written table behind.

pub mod bandit;
pub mod column_statistic;
pub mod evaluate;
pub mod illustrations;
pub mod ledger;
pub mod plot;
pub mod recommend;
pub mod select;
pub mod table;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::io::{ensure_dir, write_atomic};
use crate::mechanisms::BETA;

/// The resolved configuration of a run: the command, every parameter with defaults filled in, the
/// seed (inside `config`) and the crate version.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved<'a, C: Serialize> {
    /// Always `recsel`.
    pub tool: &'static str,
    /// Crate version that produced the results.
    pub version: &'static str,
    /// Subcommand (`synth`, `twocand`).
    pub command: &'a str,
    /// Every parameter.
    pub config: &'a C,
}

impl<'a, C: Serialize> Resolved<'a, C> {
    /// The resolved configuration of `command` with `config`.
    pub fn new(command: &'a str, config: &'a C) -> Self {
        Resolved {
            tool: "recsel",
            version: env!("CARGO_PKG_VERSION"),
            command,
            config,
        }
    }

    /// Writes `<dir>/config.json` and `<dir>/config.toml`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::Parse {
            context: "resolved configuration".into(),
            message: e.to_string(),
        })?;
        let toml = toml::to_string(self).map_err(|e| Error::Parse {
            context: "resolved configuration".into(),
            message: e.to_string(),
        })?;
        let (pj, pt) = (dir.join("config.json"), dir.join("config.toml"));
        write_atomic(&pj, format!("{json}\n").as_bytes())?;
        write_atomic(&pt, toml.as_bytes())?;
        Ok(vec![pj, pt])
    }
}

/// Writes every output of a synthetic run into `dir`: `synth.{csv,parquet}` (scenarios 1–8 and the
/// correlation sweep), `fig18.{csv,parquet,png}` (share sweep), `correlations.{csv,parquet}`,
/// `config.{json,toml}`, `scenario-<n>.png`, `fig6-<n>.png`, `fig6-picks.{csv,parquet,png}` (fig 6
/// e–h: pick shares at ε = 0.05), `corr.png`, `fig19`/`fig20` `.{csv,parquet,png}` (scenarios 7 and 8) and `winners.{csv,parquet}` (the Spearman and bound
/// rules against the MSE winner, when GEM and mGEM ran). Returns the paths written.
pub fn write_synth(
    dir: &Path,
    cfg: &crate::experiments::SynthConfig,
    results: &crate::experiments::SynthResults,
) -> Result<Vec<PathBuf>> {
    use crate::experiments::scenarios::Scenario;
    ensure_dir(dir)?;
    let mut written = Vec::new();
    let mut resolved = cfg.clone();
    // Record the mechanisms actually run, not the shorthand `all`.
    resolved.mechanisms = cfg
        .mechanism_specs()?
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(",");
    written.extend(Resolved::new("synth", &resolved).write(dir)?);
    let is_share = |label: &str| label.starts_with("share");
    let main: Vec<_> = results
        .rows
        .iter()
        .filter(|r| !is_share(&r.scenario))
        .cloned()
        .collect();
    if !main.is_empty() {
        written.extend(table::mse_table(&main).write(dir, "synth")?);
    }
    written.extend(table::corr_table(&results.correlations).write(dir, "correlations")?);
    let mut shares = Vec::new();
    for d in &results.datasets {
        if let Scenario::Share { base, share } = d.scenario {
            let label = d.scenario.label();
            shares.extend(
                results
                    .rows
                    .iter()
                    .filter(|r| r.scenario == label)
                    .map(|r| (base, share, r)),
            );
        }
    }
    if !shares.is_empty() {
        written.extend(table::share_table(&shares).write(dir, "fig18")?);
        let p = dir.join("fig18.png");
        plot::share_png(&p, &shares)?;
        written.push(p);
    }
    let mut corr_sets = Vec::new();
    for d in &results.datasets {
        match d.scenario {
            Scenario::Numbered(_) | Scenario::Exceptional(_) => {
                let p = dir.join(format!("{}.png", d.scenario.file_stem()));
                plot::scenario_png(&p, d, &results.rows, &results.correlations)?;
                written.push(p);
            }
            Scenario::Corr(_) => corr_sets.push(d),
            Scenario::Share { .. } => {}
        }
    }
    if !corr_sets.is_empty() {
        let p = dir.join("corr.png");
        plot::corr_sweep_png(&p, &corr_sets, &results.rows, &results.correlations)?;
        written.push(p);
    }
    // Fig 6 e–h: which candidates each mechanism picks on the two fig 6 scenarios at ε = 0.05.
    if !results.picks.is_empty() {
        written.extend(table::to_table(&results.picks)?.write(dir, "fig6-picks")?);
        if results
            .picks
            .iter()
            .any(|r| illustrations::FIG6_PICK_MECHANISMS.contains(&r.mechanism.as_str()))
        {
            let p = dir.join("fig6-picks.png");
            illustrations::fig6_picks_png(&p, &results.picks)?;
            written.push(p);
        }
    }
    // Bounds as a chooser (extension): Spearman rule vs bound rule against the MSE winner.
    let winners = crate::experiments::winners::evaluate(
        &results.datasets,
        &results.rows,
        cfg.params.number(&BETA),
    );
    if !winners.is_empty() {
        written.extend(table::to_table(&winners)?.write(dir, "winners")?);
    }
    // Figs 19/20: the per-group score distributions of scenarios 7 and 8, redrawn from the same
    // data streams before clipping.
    let data_streams =
        crate::experiments::scenarios::data_streams(&crate::rng::Streams::new(cfg.seed));
    for d in results
        .datasets
        .iter()
        .filter(|d| d.scenario.is_polarised())
    {
        let boxes =
            crate::experiments::scenarios::group_boxes(d.scenario, d.k, d.trials, &data_streams)?;
        let fig = if d.scenario == Scenario::Numbered(7) {
            19
        } else {
            20
        };
        let stem = format!("fig{fig}");
        written.extend(table::to_table(&boxes)?.write(dir, &stem)?);
        let p = dir.join(format!("{stem}.png"));
        illustrations::group_boxes_png(&p, &d.scenario.title(), &boxes)?;
        written.push(p);
    }
    Ok(written)
}

/// Writes fig 4 or fig 22 of an `[illustrate]` pipeline into `dir`: `fig<N>.{csv,parquet,png}` and
/// `config.{json,toml}`.
pub fn write_illustrate(
    dir: &Path,
    cfg: &crate::experiments::illustrate::IllustrateConfig,
) -> Result<Vec<PathBuf>> {
    use crate::experiments::illustrate;
    cfg.validate()?;
    ensure_dir(dir)?;
    let mut written = Resolved::new("illustrate", cfg).write(dir)?;
    let stem = format!("fig{}", cfg.figure);
    let p = dir.join(format!("{stem}.png"));
    if cfg.figure == 22 {
        let rows = illustrate::fig22(cfg);
        written.extend(table::to_table(&rows)?.write(dir, &stem)?);
        illustrations::fig22_png(&p, cfg.k, cfg.samples, &rows)?;
    } else {
        let rows = illustrate::fig4(cfg);
        written.extend(table::to_table(&rows)?.write(dir, &stem)?);
        let t = 2.0 * (cfg.k as f64 / cfg.beta).ln() / cfg.epsilon;
        illustrations::fig4_png(&p, t, &rows)?;
    }
    written.push(p);
    Ok(written)
}

/// Writes every output of a two-candidate run into `dir`: `fig<N>.{csv,parquet,png}` and
/// `config.{json,toml}`.
pub fn write_twocand(
    dir: &Path,
    cfg: &crate::experiments::twocand::TwocandConfig,
    rows: &[crate::experiments::twocand::HgRow],
) -> Result<Vec<PathBuf>> {
    ensure_dir(dir)?;
    let mut written = Resolved::new("twocand", cfg).write(dir)?;
    let stem = format!("fig{}", cfg.figure);
    written.extend(table::hg_table(rows).write(dir, &stem)?);
    let p = dir.join(format!("{stem}.png"));
    plot::heatmaps_png(
        &p,
        cfg.figure,
        &crate::experiments::twocand::panels(cfg.figure)?,
        rows,
    )?;
    written.push(p);
    Ok(written)
}
