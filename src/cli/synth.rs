//! `recsel synth`: the synthetic experiments of seed 001 §VI (docs/experiments.md and docs/mechanisms.md) — scenarios 1–8, the
//! correlation sweep and the share sweep of fig 18 — as tidy tables and PNG plots.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use recsel::experiments::synthetic::MseRow;
use recsel::experiments::{self, SynthConfig, SynthOptions, SynthResults};
use recsel::report;

use super::common::{progress, seed_or_entropy, Flags};

/// Run the synthetic scenarios: MSE ± s.e. of every mechanism over an ε grid, correlations of
/// scores and sensitivities, tables (CSV, Parquet), resolved config and PNG plots in --out.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel synth --scenario 1 --seed 1 --out out/s1\n  \
    recsel synth --scenario all --trials 10000 --seed 1 --out out/synth\n  \
    recsel synth --scenario 2 --mech rnm,gem,mgem,rs --eps 0.01,0.1,1 --trials 2000 --seed 3 --json\n  \
    recsel synth --scenario share --shares 0.05,0.25,0.5 --share-eps 2 --seed 1 --out out/fig18"
)]
pub struct Args {
    #[command(flatten)]
    options: Flags<SynthOptions>,
    /// Output folder for tables, configuration and plots.
    #[arg(long, value_name = "DIR", default_value = "out/synth")]
    out: PathBuf,
    /// Print exactly one JSON object {"config","rows","correlations","files"} on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plots: super::common::PlotArgs,
}

/// Runs `cfg`, writes every output into `out`, prints a summary (or one JSON object).
pub fn execute(cfg: &SynthConfig, out: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let cfg = &cfg.resolved().context("invalid synthetic configuration")?;
    let total = experiments::synth_work_units(cfg)?;
    let bar = progress(total, "synth");
    let started = std::time::Instant::now();
    let results = experiments::run_synth(cfg, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let files = report::write_synth(out, cfg, &results)
        .with_context(|| format!("writing results to {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    if json {
        let obj = serde_json::json!({
            "config": cfg,
            "rows": results.rows,
            "correlations": results.correlations,
            "files": files,
            "seconds": elapsed,
        });
        writeln!(stdout, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    print_summary(&mut stdout, &results)?;
    writeln!(
        stdout,
        "\n{} selections in {elapsed:.1} s; wrote {} files to {}",
        total,
        files.len(),
        out.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn print_summary(out: &mut impl Write, results: &SynthResults) -> anyhow::Result<()> {
    for data in &results.datasets {
        let label = data.scenario.label();
        writeln!(out, "\n== scenario {label}: {}", data.scenario.title())?;
        for c in results.correlations.iter().filter(|c| c.scenario == label) {
            writeln!(
                out,
                "   correlation of mean scores and sensitivities ({}): spearman {:+.3}, pearson {:+.3}, weighted {:+.3}",
                c.group, c.spearman, c.pearson, c.weighted
            )?;
        }
        let rows: Vec<&MseRow> = results
            .rows
            .iter()
            .filter(|r| r.scenario == label)
            .collect();
        let mut mechs: Vec<&str> = Vec::new();
        let mut eps: Vec<f64> = Vec::new();
        for r in &rows {
            if !mechs.contains(&r.mechanism.as_str()) {
                mechs.push(&r.mechanism);
            }
            if !eps.contains(&r.epsilon) {
                eps.push(r.epsilon);
            }
        }
        write!(out, "   {:>8}", "eps")?;
        for m in &mechs {
            let star = if rows.iter().any(|r| r.mechanism == *m && !r.private) {
                "*"
            } else {
                ""
            };
            write!(out, " {:>12}", format!("{m}{star}"))?;
        }
        writeln!(out)?;
        for e in &eps {
            write!(out, "   {:>8.4}", e)?;
            for m in &mechs {
                let r = rows
                    .iter()
                    .find(|r| r.mechanism == *m && r.epsilon == *e)
                    .expect("every cell present");
                write!(out, " {:>12.4e}", r.mse)?;
            }
            writeln!(out)?;
        }
    }
    writeln!(
        out,
        "\n(* = not eps-DP at this k (rnmh: not private; rnmh-laplace: (k-1)*eps-DP), shown for \
         reference)"
    )?;
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.plots.apply();
    let cfg = args.options.0.config(|| seed_or_entropy(None));
    execute(&cfg, &args.out, args.json)
}
