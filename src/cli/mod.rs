//! Command-line interface: one file per subcommand (docs/ARCHITECTURE.md, xsv layout). Only the binary sees clap
//! and anyhow.

mod fit;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod audit;
mod audit_e2e;
mod audit_release;
mod bandit;
mod bounds;
mod common;
mod evaluate;
mod export;
mod help_markdown;
mod ledger;
mod mechanisms;
mod privacy;
mod recommend;
mod recommend_ledger;
mod run;
mod sample;
mod select;
#[cfg(feature = "serve")]
mod serve;
mod statistic;
mod synth;
mod tune;
mod twocand;

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
    Audit(Box<audit::Args>),
    /// Audit a release's whole serving path on neighbouring histories of real users.
    AuditE2e(Box<audit_e2e::Args>),
    /// Compare two releases made on neighbouring data sets, field by field.
    AuditRelease(Box<audit_release::Args>),
    /// Utility bounds of RNM, GEM and mGEM on one problem (seed 001 appendix J).
    Bounds(bounds::Args),
    /// Fit SANSA, EASE or the most-popular baseline and report Recall/nDCG.
    Fit(Box<fit::Args>),
    /// Write a data set's train/test split as LightGCN text (train.txt, test.txt).
    Export(Box<export::Args>),
    /// Private selection for every test user: MSE per mechanism and ε, per-user correlations.
    Select(Box<select::Args>),
    /// One private recommendation per user from a model directory with a release artifact.
    Recommend(Box<recommend::Args>),
    /// Print a release's privacy report: every population, its unit, eps, delta and mechanism.
    Privacy(privacy::Args),
    /// Choose the serving configuration per eps on calibration users (tuning.json).
    Tune(Box<tune::Args>),
    /// hit@1 of public baselines and private mechanisms on held-out users (the frontier).
    Evaluate(Box<evaluate::Args>),
    /// Create, inspect, export and import a privacy ledger (docs/ledger.md).
    Ledger(ledger::Args),
    /// Serve private recommendations over HTTP, each charged to the user's budget.
    #[cfg(feature = "serve")]
    Serve(Box<serve::Args>),
    /// A private median, quantile, count or clipped mean of a column (docs/statistics.md).
    Statistic(Box<statistic::Args>),
    /// Synthetic experiments of seed 001 (scenarios 1-8, correlation and share sweeps).
    Synth(Box<synth::Args>),
    /// Two-candidate head-to-head heatmaps of seed 001 (figures 3, 15, 16, 17).
    Twocand(Box<twocand::Args>),
    /// Regenerate a figure from its pipeline file (pipelines/<fig>.toml).
    Run(run::Args),
    /// Bandit under distribution shift: private learners against UCB and Thompson (figure 14).
    Bandit(Box<bandit::Args>),
    /// Print the command-line reference as Markdown (docs/cli.md).
    #[command(hide = true)]
    HelpMarkdown(help_markdown::Args),
}

/// The command tree: every subcommand's arguments, with every value-taking argument accepting
/// negative numbers (`--eta -0.5`, not only `--eta=-0.5`).
pub fn command() -> clap::Command {
    let cmd = negative_numbers(Cli::command());
    #[cfg(feature = "serve")]
    let cmd = cmd.mut_subcommand("serve", serve::with_config_file);
    cmd
}

fn negative_numbers(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let takes_values = a.get_action().takes_values();
        a.allow_negative_numbers(takes_values)
    })
    .mut_subcommands(negative_numbers)
}

/// Parses the command line and runs the chosen subcommand.
pub fn main() -> anyhow::Result<ExitCode> {
    refuse_replaced_spellings(std::env::args())?;
    let cli = Cli::from_arg_matches(&command().get_matches())?;
    if let Some(n) = cli.threads {
        anyhow::ensure!(n >= 1, "--threads must be at least 1, got {n}");
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()?;
    }
    match cli.command {
        Command::Mechanisms(a) => mechanisms::run(a),
        Command::Sample(a) => sample::run(a),
        Command::Audit(a) => audit::run(*a),
        Command::AuditE2e(a) => audit_e2e::run(*a),
        Command::AuditRelease(a) => audit_release::run(*a),
        Command::Bounds(a) => bounds::run(a),
        Command::Fit(a) => fit::run(*a),
        Command::Export(a) => export::run(*a),
        Command::Select(a) => select::run(*a),
        Command::Recommend(a) => recommend::run(*a),
        Command::Privacy(a) => privacy::run(a),
        Command::Tune(a) => tune::run(*a),
        Command::Evaluate(a) => evaluate::run(*a),
        Command::Ledger(a) => ledger::run(a),
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::run(*a, cli.threads),
        Command::Statistic(a) => statistic::run(*a),
        Command::Synth(a) => synth::run(*a),
        Command::Twocand(a) => twocand::run(*a),
        Command::Run(a) => run::run(a),
        Command::Bandit(a) => bandit::run(*a),
        Command::HelpMarkdown(a) => help_markdown::run(a),
    }
}

/// Command lines whose spelling was replaced: an error that names the new one.
fn refuse_replaced_spellings(args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let args: Vec<String> = args.collect();
    let has = |a: &str| args.iter().any(|x| x == a);
    anyhow::ensure!(
        !(has("audit") && has("--end-to-end")),
        "`recsel audit --end-to-end` is now its own subcommand, `recsel audit-e2e` (the same \
         options without --end-to-end; `recsel audit-e2e --help`)"
    );
    Ok(())
}
