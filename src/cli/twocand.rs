//! `recsel twocand`: the two-candidate head-to-head heatmaps of seed 001 (figures 3, 15, 16, 17).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use recsel::experiments::twocand::{self, TwocandConfig, TwocandOptions};
use recsel::report;

use super::common::{progress, seed_or_entropy, Flags};

/// Monte Carlo HG(RNM, M) = P[RNM wrong] - P[M wrong] on two candidates (q1 = 0, q2 = gap) over a
/// grid of sensitivities (Δ1, Δ2); for M = RNMH the exact value is written beside the estimate.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel twocand --figure 3 --seed 1 --out out/fig3\n  \
    recsel twocand --figure 16 --grid 12 --trials 4000 --seed 1 --out out/fig16 --json"
)]
pub struct Args {
    #[command(flatten)]
    options: Flags<TwocandOptions>,
    /// Output folder.
    #[arg(long, value_name = "DIR", default_value = "out/twocand")]
    out: PathBuf,
    /// Print exactly one JSON object {"config","rows","files","max_abs_z_rnmh"} on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plots: super::common::PlotArgs,
}

/// Runs `cfg` and writes its outputs into `out`.
pub fn execute(cfg: &TwocandConfig, out: &Path, json: bool) -> anyhow::Result<ExitCode> {
    cfg.validate()
        .context("invalid two-candidate configuration")?;
    let bar = progress(twocand::work_units(cfg)?, "twocand");
    let rows = twocand::run(cfg, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let files = report::write_twocand(out, cfg, &rows)
        .with_context(|| format!("writing results to {}", out.display()))?;
    // Agreement of the RNMH estimates with the closed form, in standard errors.
    let max_z = rows
        .iter()
        .filter(|r| r.hg_exact.is_finite() && r.se > 0.0)
        .map(|r| ((r.hg - r.hg_exact) / r.se).abs())
        .fold(None, |m: Option<f64>, z| Some(m.map_or(z, |m| m.max(z))));
    let mut stdout = std::io::stdout().lock();
    if json {
        let obj = serde_json::json!({
            "config": cfg,
            "rows": rows,
            "files": files,
            "max_abs_z_rnmh": max_z,
        });
        writeln!(stdout, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        stdout,
        "figure {}: {} cells, {} trials per cell and mechanism",
        cfg.figure,
        rows.len(),
        cfg.trials
    )?;
    for p in twocand::panels(cfg.figure)? {
        let cells: Vec<_> = rows.iter().filter(|r| p.contains(r)).collect();
        let above = cells.iter().filter(|r| r.delta2 > r.delta1);
        let below = cells.iter().filter(|r| r.delta2 < r.delta1);
        let mean = |it: &mut dyn Iterator<Item = &&recsel::experiments::twocand::HgRow>| {
            let (s, n) = it.fold((0.0, 0usize), |(s, n), r| (s + r.hg, n + 1));
            s / n.max(1) as f64
        };
        writeln!(
            stdout,
            "  {}: mean HG where Δ2 > Δ1 {:+.4}, where Δ2 < Δ1 {:+.4}",
            p.title(),
            mean(&mut above.into_iter()),
            mean(&mut below.into_iter())
        )?;
    }
    if let Some(z) = max_z {
        writeln!(
            stdout,
            "  RNMH: largest |estimate - closed form| = {z:.2} standard errors"
        )?;
    }
    writeln!(stdout, "wrote {} files to {}", files.len(), out.display())?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.plots.apply();
    let cfg = args.options.0.config(|| seed_or_entropy(None))?;
    execute(&cfg, &args.out, args.json)
}
