//! `recsel run`: regenerate a figure from its pipeline file (`pipelines/<fig>.toml`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use recsel::experiments::pipeline::Pipeline;
use recsel::experiments::select;

use super::common::parse_f64_list;

/// Run a pipeline file: one TOML file per figure with an output folder and a [synth],
/// [twocand], [select], [bandit] or [illustrate] table (unknown keys are errors).
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  recsel run pipelines/fig2.toml\n  \
    recsel run pipelines/fig3.toml --out /tmp/fig3 --check\n  \
    recsel run pipelines/fig13_ml20m.toml --data-dir /data/copies\n  \
    recsel run out/select-ml20m/config.toml --out /tmp/again   # rerun a finished run\n  \
    recsel run out/select-ml20m/config.toml --add-mech krr     # add a mechanism to it")]
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
    /// For [select] pipelines (and a select run's config.toml): add these mechanisms to the
    /// finished run (`recsel select --add-mech`).
    #[arg(long, value_name = "LIST")]
    add_mech: Option<String>,
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
            if let Some(m) = &args.add_mech {
                argv.extend(["--add-mech".into(), m.clone()]);
            }
            eprintln!("recsel: running `recsel select {}`", argv.join(" "));
            Some(parse_select(&argv).map_err(|e| {
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
            check_select(sel).map_err(|e| {
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
    match (&p.synth, &p.twocand, select, &p.bandit, &p.illustrate) {
        (Some(s), _, _, _, _) => super::synth::execute(s, &out, args.json),
        (_, Some(t), _, _, _) => super::twocand::execute(t, &out, args.json),
        (_, _, Some(a), _, _) => {
            let code = super::select::run(a)?;
            // Seed 001's fig 13 as one image once its three runs exist beside this one.
            let parent = out.parent().unwrap_or(std::path::Path::new("."));
            if p.figure.starts_with("fig13_") {
                if let Some(f) = recsel::report::select::write_fig13_combined(parent)? {
                    eprintln!("recsel: the three fig 13 runs exist; wrote {}", f.display());
                }
            }
            Ok(code)
        }
        (_, _, _, Some(b), _) => super::bandit::execute(b, &out, args.json),
        (_, _, _, _, Some(i)) => {
            let written = recsel::report::write_illustrate(&out, i)?;
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({ "figure": i.figure, "written": written })
                );
            } else {
                for w in written {
                    println!("wrote {}", w.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        _ => unreachable!("validated: exactly one table"),
    }
}

/// Parses `recsel select` arguments (without program name and subcommand), as `recsel run` does
/// for a pipeline's [select] table.
pub fn parse_select(argv: &[String]) -> Result<super::select::Args, clap::Error> {
    #[derive(clap::Parser)]
    struct Select {
        #[command(flatten)]
        args: super::select::Args,
    }
    let full = std::iter::once("select".to_string()).chain(argv.iter().cloned());
    <Select as clap::Parser>::try_parse_from(full).map(|s| s.args)
}

/// Validates the arguments without running: the data can be read (files and columns exist), the
/// mechanisms and ε grid are valid (`recsel run --check`).
pub fn check_select(args: &super::select::Args) -> anyhow::Result<()> {
    recsel::data::load::check_source(&args.data.source()?, &args.data.load_options()?)?;
    let eps = parse_f64_list("--eps", args.eps.as_deref().unwrap_or("1"))?;
    select::check_grid(&args.mech, &eps).context("--mech or --eps")?;
    Ok(())
}
