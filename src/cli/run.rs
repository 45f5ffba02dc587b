//! `recsel run`: regenerate a figure from its pipeline file (`pipelines/<fig>.toml`).

use std::path::PathBuf;
use std::process::ExitCode;

use recsel::experiments::pipeline::Pipeline;

/// Run a pipeline file: one TOML file per figure with an output folder and a [synth],
/// [twocand], [select] or [bandit] table (unknown keys are errors).
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  recsel run pipelines/fig2.toml\n  \
    recsel run pipelines/fig3.toml --out /tmp/fig3 --check\n  \
    recsel run pipelines/fig13_ml20m.toml --data-dir /data/copies")]
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
    /// For [select] pipelines: read the named datasets from this directory instead.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let p = Pipeline::load(&args.file)?;
    let out = args.out.clone().unwrap_or_else(|| p.out.clone());
    // A [select] table becomes the equivalent `recsel select` command line, checked by clap.
    let select = match &p.select {
        Some(s) => {
            let mut argv = s.to_args(&out, args.data_dir.as_deref());
            if args.json {
                argv.push("--json".into());
            }
            eprintln!("recsel: running `recsel select {}`", argv.join(" "));
            Some(super::select::parse(&argv).map_err(|e| {
                anyhow::anyhow!(
                    "{}: the [select] table is not valid: {e}",
                    args.file.display()
                )
            })?)
        }
        None => None,
    };
    if args.check {
        if let Some(sel) = &select {
            super::select::check(sel).map_err(|e| {
                anyhow::anyhow!(
                    "{}: the [select] table cannot run: {e:#}",
                    args.file.display()
                )
            })?;
        }
        println!(
            "{}: {} ({}) is valid",
            args.file.display(),
            p.figure,
            p.description
        );
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("recsel: {} — {}", p.figure, p.description);
    match (&p.synth, &p.twocand, select, &p.bandit) {
        (Some(s), _, _, _) => super::synth::execute(s, &out, args.json),
        (_, Some(t), _, _) => super::twocand::execute(t, &out, args.json),
        (_, _, Some(a), _) => super::select::run(a),
        (_, _, _, Some(b)) => super::bandit::execute(b, &out, args.json),
        _ => unreachable!("validated: exactly one table"),
    }
}
