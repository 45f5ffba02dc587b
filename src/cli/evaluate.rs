//! `recsel evaluate`: what a private recommendation is worth on held-out users — hit@1 of the
//! public baselines, the non-private top-1 and every ε-DP mechanism with and without a tuned
//! public pool, the limit, and the frontier plot (docs/utility.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use recsel::evaluate::options::EvaluateOptions;
use recsel::mechanisms::Registry;
use recsel::report::evaluate::{choices, markdown, served, summary, write_utility};

use super::common::Flags;

/// hit@1 of public baselines and private mechanisms on the test users, tuned on calibration users.
///
/// Reads the data the model was fitted on (the same options and --seed as `recsel fit`); its
/// validation users choose every tuned configuration, its test users give every number.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --validation-users 0.1 --out models/synth
  recsel evaluate --model models/synth --dataset synthetic --validation-users 0.1 --out out/utility
  recsel evaluate --model gowalla --format lightgcn --path ../shared/data/gowalla --mech em,rnm,gem,mgem

The tuned krr row comes from DIR/tuning.json when it exists (`recsel tune`), else it is tuned
here on the same calibration users with the defaults.")]
pub struct Args {
    /// Options as a TOML file (the keys of the options below with _ for -, `mechanisms` for
    /// --mech and `epsilons` for --eps; a run's config.toml); flags given as well override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    options: Flags<EvaluateOptions>,
    /// Output directory (utility.csv/.parquet/.json/.md, frontier.png); default
    /// out/utility-<dataset>.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    out: Option<PathBuf>,
    /// Print the table as JSON.
    #[arg(long, help_heading = "Output")]
    json: bool,
    #[command(flatten)]
    plots: super::common::PlotArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let t = Instant::now();
    args.plots.apply();
    let o = &super::common::table_with_file(args.config.as_deref(), &args.options.0)?;
    let bar = super::common::counter("evaluate", "users scored");
    let log = |s: &str| bar.suspend(|| eprintln!("[evaluate] {s}"));
    let (name, table) = o.run(&Registry::builtin(), &log, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/utility-{name}")));
    let title = format!("{name}: hit@1 of private recommendations against eps");
    let mut files = write_utility(&out, &title, &table)?;
    // The options of this run, as a table `--config` reads back.
    let config = out.join("config.toml");
    recsel::io::write_atomic(&config, toml::to_string(o)?.as_bytes())?;
    files.push(config);
    let mut so = std::io::stdout().lock();
    if args.json {
        writeln!(so, "{}", serde_json::to_string_pretty(&table)?)?;
    } else {
        write!(
            so,
            "{}\n{}\n{}\n{}",
            markdown(&table),
            summary(&table),
            choices(&table),
            served(&table)
        )?;
        writeln!(
            so,
            "{:.1} s; wrote {}",
            t.elapsed().as_secs_f64(),
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
