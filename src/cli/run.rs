//! `recsel run`: regenerate a figure from its pipeline file (`pipelines/<fig>.toml`).

use std::path::PathBuf;
use std::process::ExitCode;

use recsel::experiments::pipeline::Pipeline;

/// Run a pipeline file: one TOML file per figure with an output folder and a [synth] or
/// [twocand] table (unknown keys are errors).
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  recsel run pipelines/fig2.toml\n  \
    recsel run pipelines/fig3.toml --out /tmp/fig3 --check")]
pub struct Args {
    /// The pipeline file.
    file: PathBuf,
    /// Write into this folder instead of the file's `out`.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Only parse and validate the file.
    #[arg(long)]
    check: bool,
    /// Print exactly one JSON object on stdout (as the subcommand's --json).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let p = Pipeline::load(&args.file)?;
    if args.check {
        println!(
            "{}: {} ({}) is valid",
            args.file.display(),
            p.figure,
            p.description
        );
        return Ok(ExitCode::SUCCESS);
    }
    let out = args.out.unwrap_or_else(|| p.out.clone());
    eprintln!("recsel: {} — {}", p.figure, p.description);
    match (&p.synth, &p.twocand) {
        (Some(s), _) => super::synth::execute(s, &out, args.json),
        (_, Some(t)) => super::twocand::execute(t, &out, args.json),
        _ => unreachable!("validated: exactly one table"),
    }
}
