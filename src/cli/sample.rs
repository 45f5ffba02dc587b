//! `recsel sample`: run one mechanism many times on one score vector and count the outputs — the
//! sampling interface external DP auditors call.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use recsel::mechanisms::{self, Problem, Registry, SampleOptions};
use recsel::rng::Streams;

use super::common::{positive, progress, seed_or_entropy, Flags};

/// Run a mechanism N times on one selection problem and print how often each candidate was chosen.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel sample --mech gem --eps 1 --scores 1,0.5,0 --sens 1,2,0.5 --n 100000 --seed 7\n  \
    recsel sample --mech rs --gamma 0.05 --eps 0.5 --scores 3,1 --sens 1,1 --n 1000 --json\n  \
    recsel sample --mech gem --secure --eps 1 --scores 1,0.5,0 --sens 1,2,0.5 --n 100000"
)]
pub struct Args {
    #[command(flatten)]
    options: Flags<SampleOptions>,
    /// Print exactly one JSON object {"mechanism","epsilon","n","counts","private"}, with
    /// "bottom" (the selections that released ⊥) for a mechanism that can release it.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let o = &args.options.0;
    // Required options: clap has refused a command line without them.
    let scores = o.scores.clone().context("--scores is required")?;
    let sens = o.sens.clone().context("--sens is required")?;
    let eps = o.epsilon.context("--eps is required")?;
    let problem = Problem::new(&scores, &sens).context("invalid selection problem")?;
    let params = Registry::builtin().resolve(&o.params)?.with_epsilon(eps);
    let spec = mechanisms::spec(o.mechanism.as_deref().context("--mech is required")?)?;
    let mech = spec
        .build(&params)
        .with_context(|| format!("invalid parameters for {}", spec.name))?;
    let n = positive("--n", o.n.context("--n is required")?)?;
    let mode = o.noise.mode();
    let effective = if mode.is_secure() {
        let e = mech
            .secure_epsilon()
            .with_context(|| format!("--secure with {}", spec.name))?;
        super::common::announce_secure(e);
        Some(e)
    } else {
        None
    };
    let streams = Streams::new(o.noise.seed_or(|| seed_or_entropy(None))?);
    let bar = progress(n, "sampling");
    // A mechanism that can give up (rs-threshold) has ⊥ counted apart, not as its uniform
    // stand-in; every other mechanism's counts are those of `sample_counts`.
    let bottom_possible = mech.may_release_bottom();
    let outcome =
        mechanisms::batch::sample_outcome_counts(&*mech, &problem, mode, streams, n, &|d| {
            bar.inc(d)
        })?;
    let counts = outcome.candidates;
    bar.finish_and_clear();
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut obj = serde_json::json!({
            "mechanism": spec.name,
            "epsilon": eps,
            "n": n,
            "counts": counts,
            "private": mech.guarantee().is_private(),
        });
        if bottom_possible {
            obj["bottom"] = outcome.bottom.into();
        }
        if let Some(e) = effective {
            obj["secure"] = true.into();
            obj["effective_epsilon"] = e.into();
        }
        writeln!(out, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{} at eps = {} ({}), {} selections{}",
        spec.name,
        eps,
        mech.guarantee(),
        n,
        effective.map_or(String::new(), |e| format!(
            ", secure mode (effective eps = {e})"
        ))
    )?;
    writeln!(
        out,
        "{:>9} {:>12} {:>12} {:>12} {:>9}",
        "candidate", "score", "sensitivity", "count", "share"
    )?;
    for (a, c) in counts.iter().enumerate() {
        writeln!(
            out,
            "{:>9} {:>12} {:>12} {:>12} {:>9.5}",
            a,
            scores[a],
            sens[a],
            c,
            *c as f64 / n as f64
        )?;
    }
    if bottom_possible {
        writeln!(
            out,
            "{:>9} {:>12} {:>12} {:>12} {:>9.5}",
            "⊥",
            "-",
            "-",
            outcome.bottom,
            outcome.bottom as f64 / n as f64
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
