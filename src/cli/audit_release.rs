//! `recsel audit-release`: compare two release directories made from neighbouring data sets,
//! field by field (docs/privacy-report.md, "The whole-release audit").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Compare two releases fitted (and tuned) the same way on neighbouring data sets: print every
/// field of every file that differs, and fail when one is not a declared noisy output.
///
/// Make both releases with the same seeds and the same noise streams: set
/// RECSEL_AUDIT_NOISE_SEED for both `recsel fit` runs (predictable noise — an audit, never a
/// release) and give `recsel tune --private` the same --private-seed. A declared noisy output
/// (the weights of a DP fit, DP counts, the private tuner's choice) may differ where the data
/// moved it; every other field must be byte-identical.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  RECSEL_AUDIT_NOISE_SEED=7 recsel fit --format csv --path d.csv --user-col u --item-col i --dp-epsilon 1 --out rel-d
  RECSEL_AUDIT_NOISE_SEED=7 recsel fit --format csv --path d1.csv --user-col u --item-col i --dp-epsilon 1 --out rel-d1
  recsel audit-release rel-d rel-d1")]
pub struct Args {
    /// The release on the data set D.
    #[arg(value_name = "DIR")]
    a: PathBuf,
    /// The release on a neighbour D′ of D.
    #[arg(value_name = "DIR")]
    b: PathBuf,
    /// Also print the differing declared noisy outputs.
    #[arg(long)]
    all: bool,
}

/// Runs `recsel audit-release`: exit status 1 when an undeclared field differs.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let diffs = recsel::audit::release::compare_releases(&args.a, &args.b)?;
    let flagged = recsel::audit::release::undeclared(&diffs);
    let mut out = std::io::stdout().lock();
    for d in &diffs {
        if args.all || d.declared.is_none() {
            writeln!(out, "{d}")?;
        }
    }
    writeln!(
        out,
        "{} differing fields: {} declared noisy outputs, {} undeclared",
        diffs.len(),
        diffs.len() - flagged.len(),
        flagged.len()
    )?;
    Ok(if flagged.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
