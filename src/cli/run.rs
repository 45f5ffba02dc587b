//! `recsel run`: regenerate a figure from its pipeline file (`pipelines/<fig>.toml`).

use std::path::PathBuf;
use std::process::ExitCode;

use recsel::experiments::pipeline::Pipeline;
use recsel::experiments::select::SelectOptions;

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
    #[command(flatten)]
    plots: super::common::PlotArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.plots.apply();
    let p = Pipeline::load(&args.file)?;
    let out = args.out.clone().unwrap_or_else(|| p.out.clone());
    // A [select] table is the select job's options; --data-dir replaces its data directory.
    let select = p.select.clone().map(|mut s| {
        if let Some(d) = &args.data_dir {
            s.data.data_dir = Some(d.clone());
        }
        s
    });
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
    // A table without a seed runs with one drawn from OS entropy, reported.
    let entropy = || super::common::seed_or_entropy(None);
    match (&p.synth, &p.twocand, select, &p.bandit, &p.illustrate) {
        (Some(s), _, _, _, _) => super::synth::execute(&s.config(entropy), &out, args.json),
        (_, Some(t), _, _, _) => super::twocand::execute(&t.config(entropy)?, &out, args.json),
        (_, _, Some(options), _, _) => {
            let controls = super::select::Controls {
                out: Some(out.clone()),
                add_mech: args.add_mech.clone(),
                json: args.json,
                plots: args.plots.clone(),
                ..Default::default()
            };
            let code = super::select::execute(&options, &controls)?;
            // Seed 001's fig 13 as one image once its three runs exist beside this one.
            let parent = out.parent().unwrap_or(std::path::Path::new("."));
            if p.figure.starts_with("fig13_") {
                if let Some(f) = recsel::report::select::write_fig13_combined(parent)? {
                    eprintln!("recsel: the three fig 13 runs exist; wrote {}", f.display());
                }
            }
            Ok(code)
        }
        (_, _, _, Some(b), _) => super::bandit::execute(&b.config(entropy), &out, args.json),
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

/// Validates a `[select]` table without running it: the options, and that the data can be read
/// (files and columns exist) (`recsel run --check`).
pub fn check_select(options: &SelectOptions) -> anyhow::Result<()> {
    options.check()?;
    recsel::data::load::check_source(&options.data.source()?, &options.data.load_options()?)?;
    Ok(())
}
