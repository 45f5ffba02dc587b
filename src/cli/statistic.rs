//! `recsel statistic`: one private median, quantile, count or clipped mean of a numeric column,
//! by Duff, the exponential-mechanism quantile, smooth sensitivity or the Laplace mechanism
//! (docs/statistics.md); with `--compare`, the comparison of docs/results.md ("Private medians").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use recsel::column_statistic::compare::{compare_medians, CompareConfig};
use recsel::column_statistic::options::interactions_per_user;
use recsel::column_statistic::StatisticOptions;
use recsel::data::load::load_dataset_with;
use recsel::data::options::DataOptions;
use recsel::report::column_statistic::{markdown, write_compare};

use super::common::Flags;

/// Release one private statistic of a numeric column, or run the comparison of the Duff slides.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel statistic --format lightgcn --path ../shared/data/gowalla --lo 0 --hi 1000 --eps 0.5
  recsel statistic --values users.csv --column age --statistic quantile --q 0.9 --lo 0 --hi 120 \\
      --method smooth-cauchy --eps 1 --seed 7
  recsel statistic --values users.csv --column age --statistic mean --lo 0 --hi 120 --method laplace
  recsel statistic --compare --out out/medians   # docs/results.md, \"Private medians\"")]
pub struct Args {
    #[command(flatten)]
    options: Flags<StatisticOptions>,
    /// Also print the exact, non-private value of the statistic (it is NOT private: for checking
    /// only, never for release).
    #[arg(long, help_heading = "Output")]
    print_true_value_not_private: bool,
    /// Print one JSON object.
    #[arg(long, help_heading = "Output")]
    json: bool,
    /// Run the comparison of the private median (Duff, em, smooth-cauchy, smooth-laplace,
    /// laplace, smooth-cauchy-nrs07) over n and ε on the interaction counts per user of
    /// --compare-data, writing its table and plot into --out.
    #[arg(long, help_heading = "Comparison", requires = "out")]
    compare: bool,
    /// LightGCN folders whose per-user interaction counts the comparison uses.
    #[arg(
        long,
        value_name = "DIR,...",
        help_heading = "Comparison",
        default_value = "../shared/data/ml-1m-implicit,../shared/data/gowalla,../shared/data/amazon-book-kgat"
    )]
    compare_data: String,
    /// Repetitions per cell of the comparison.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 200,
        help_heading = "Comparison"
    )]
    reps: usize,
    /// Output folder of the comparison.
    #[arg(long, value_name = "DIR", help_heading = "Comparison")]
    out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.compare {
        return compare(&args);
    }
    let o = &args.options.0;
    let seed = o.seed.unwrap_or_else(rand::random);
    let r = o.release(None, seed)?;
    let g = r.guarantee;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut obj = serde_json::to_value(&r)?;
        if args.print_true_value_not_private {
            obj["true_value_not_private"] = serde_json::json!(r.true_value_not_private);
        }
        writeln!(out, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let eps = g.epsilon_for(2).unwrap_or(f64::NAN);
    let guarantee = if g.delta() > 0.0 {
        format!("({eps}, {})-DP", g.delta())
    } else {
        format!("{eps}-DP")
    };
    writeln!(
        out,
        "{} of {} ({} records, range [{}, {}]) by {}: {}",
        r.statistic, r.column, r.records, r.range[0], r.range[1], r.method, r.value
    )?;
    writeln!(
        out,
        "guarantee: {guarantee} for this one release, {} neighbours (seed {seed})",
        r.neighbours
    )?;
    if args.print_true_value_not_private {
        writeln!(
            out,
            "true value (NOT private, do not release): {}",
            r.true_value_not_private
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn compare(args: &Args) -> anyhow::Result<ExitCode> {
    let out = args.out.clone().context("--compare needs --out")?;
    let o = &args.options.0;
    let mut cfg = CompareConfig {
        reps: args.reps,
        ..CompareConfig::default()
    };
    if let Some(s) = o.seed {
        cfg.seed = s;
    }
    let mut columns = Vec::new();
    for dir in args.compare_data.split(',') {
        let data = DataOptions {
            format: Some("lightgcn".into()),
            path: Some(PathBuf::from(dir)),
            ..DataOptions::default()
        };
        let ds = load_dataset_with(&data.source()?, 42, &data.load_options()?)
            .with_context(|| format!("loading {dir}"))?;
        eprintln!("[statistic] {}: {} users", ds.name(), ds.train.rows());
        columns.push((ds.name().to_string(), interactions_per_user(&ds)));
    }
    let rows = compare_medians(&columns, &cfg)?;
    let paths = write_compare(&out, &cfg, &rows)?;
    print!("{}", markdown(&rows));
    for p in paths {
        eprintln!("[statistic] wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
