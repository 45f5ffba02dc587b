//! `recsel bounds`: the high-probability utility bounds of RNM, GEM and mGEM on one selection
//! problem (seed 001 §IV-D and appendix J; `docs/bounds.md`), and appendix J's two comparisons.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use recsel::numerics::bounds::{utility_bounds, BoundsOptions, GemBoundReading};

use super::common::Flags;

/// Lower bounds on the selected score that hold with probability at least 1 − β, and whether GEM's
/// bound is worse than RNM's or than uniform random choice (seed 001 appendix J).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel bounds --scores 1,0.5,0 --sens 1,2,0.5 --eps 1\n  \
    recsel bounds --scores 3,2,1,0 --sens 2,1.5,1,0.5 --eps 0.5 --beta 0.1 --json\n  \
    recsel bounds --scores 3,2,1,0 --sens 2,1.5,1,0.5 --eps 0.5 --flags full"
)]
pub struct Args {
    #[command(flatten)]
    options: Flags<BoundsOptions>,
    /// Print exactly one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let o = &args.options.0;
    // Required options: clap has refused a command line without them.
    let scores = o.scores.clone().context("--scores is required")?;
    let sens = o.sens.clone().context("--sens is required")?;
    let eps = o.epsilon.context("--eps is required")?;
    let beta = o.beta();
    let reading = GemBoundReading::from_name(&o.flags())?;
    let b =
        utility_bounds(&scores, &sens, eps, beta, reading).context("invalid selection problem")?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let obj = serde_json::json!({
            "k": scores.len(),
            "epsilon": eps,
            "beta": beta,
            "log_term": b.log_term,
            "best": b.best,
            "random": b.random,
            "rnm": b.rnm,
            "gem": b.gem,
            "gem_at_best": b.gem_at_best,
            "mgem": b.mgem,
            "flags": reading.name(),
            "gem_worse_than_rnm": b.gem_worse_than_rnm,
            "gem_worse_than_random": b.gem_worse_than_random,
            "best_bound": b.best_mechanism(),
        });
        writeln!(out, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "k = {}, eps = {}, beta = {}, L = ln(k/beta) = {:.6}; each bound holds with probability >= {}",
        scores.len(),
        eps,
        beta,
        b.log_term,
        1.0 - beta
    )?;
    writeln!(out, "{:<40} {:>14}", "selected score >=", "bound")?;
    writeln!(out, "{:<40} {:>14.6}", "rnm   q* - 2*Delta*L/eps", b.rnm)?;
    writeln!(
        out,
        "{:<40} {:>14.6}",
        "gem   max_j q_j - 4L*D_j/eps", b.gem
    )?;
    writeln!(
        out,
        "{:<40} {:>14.6}",
        "gem   (j = best) q* - 4L*D*/eps", b.gem_at_best
    )?;
    writeln!(
        out,
        "{:<40} {:>14.6}",
        "mgem  min{q_a: q_a+4L*D_a/eps >= q*}", b.mgem
    )?;
    writeln!(out, "{:<40} {:>14.6}", "random (lowest score)", b.random)?;
    writeln!(
        out,
        "GEM ({} bound) worse than RNM: {}; worse than random choice: {}; best bound: {}",
        reading.name(),
        b.gem_worse_than_rnm,
        b.gem_worse_than_random,
        b.best_mechanism()
    )?;
    Ok(ExitCode::SUCCESS)
}
