//! Command-line interface: one file per subcommand (STYLE.md, xsv layout). Only the binary sees clap
//! and anyhow.

mod fit;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit;
mod common;
mod mechanisms;
mod sample;
mod select;

/// Differentially private top-1 recommendation: SANSA scores, private selection mechanisms with
/// heterogeneous sensitivities, and the experiments of the paper.
#[derive(Debug, Parser)]
#[command(name = "recsel", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Worker threads for parallel work (default: one per core). Results never depend on it.
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the selection mechanisms, their guarantees and parameters.
    Mechanisms(mechanisms::Args),
    /// Run one mechanism many times on one score vector and count the outputs.
    Sample(sample::Args),
    /// Audit mechanisms: empirical ε lower bounds on adversarial neighbouring inputs.
    Audit(audit::Args),
    /// Fit SANSA, EASE or the most-popular baseline and report Recall/nDCG.
    Fit(fit::Args),
    /// Private selection for every test user: MSE per mechanism and ε, per-user correlations.
    Select(select::Args),
}

/// Parses the command line and runs the chosen subcommand.
pub fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        anyhow::ensure!(n >= 1, "--threads must be at least 1, got {n}");
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()?;
    }
    match cli.command {
        Command::Mechanisms(a) => mechanisms::run(a),
        Command::Sample(a) => sample::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Fit(args) => fit::run(args),
        Command::Select(a) => select::run(a),
    }
}
