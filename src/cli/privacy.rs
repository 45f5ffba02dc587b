//! `recsel privacy`: print a release's privacy report (docs/privacy-report.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Print the privacy report of a release: per population (training users, calibration users)
/// each part's unit, ε, δ and mechanism, what is not differentially private, and the totals.
///
/// The served users' entries depend on how the release is served: `recsel recommend` and
/// `recsel serve` print the report with them.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel privacy --model models/ml1m
  recsel privacy --model models/ml1m --json")]
pub struct Args {
    /// Model directory written by `recsel fit ... --out DIR`.
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `recsel privacy`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = recsel::recommend::release_privacy_report(&args.model)
        .with_context(|| format!("reading the release in {}", args.model.display()))?;
    let signature = recsel::recommend::Release::read(&args.model)
        .with_context(|| format!("reading the release in {}", args.model.display()))?
        .signature;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", report.to_json())?;
        eprintln!("{signature}");
    } else {
        writeln!(out, "{report}")?;
        writeln!(out, "{signature}")?;
    }
    Ok(ExitCode::SUCCESS)
}
