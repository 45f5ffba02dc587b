//! `recsel sample`: run one mechanism many times on one score vector and count the outputs — the
//! sampling interface external DP auditors call.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use recsel::mechanisms::{self, MechValues, Problem, Registry};
use recsel::rng::NoiseMode;

use super::common::{parse_f64_list, positive, progress, streams, Flags};

/// Run a mechanism N times on one selection problem and print how often each candidate was chosen.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel sample --mech gem --eps 1 --scores 1,0.5,0 --sens 1,2,0.5 --n 100000 --seed 7\n  \
    recsel sample --mech rs --gamma 0.05 --eps 0.5 --scores 3,1 --sens 1,1 --n 1000 --json\n  \
    recsel sample --mech gem --secure --eps 1 --scores 1,0.5,0 --sens 1,2,0.5 --n 100000"
)]
pub struct Args {
    /// Mechanism name (see `recsel mechanisms`).
    #[arg(long)]
    mech: String,
    /// Privacy parameter ε (finite, > 0).
    #[arg(long, value_name = "E", allow_hyphen_values = true)]
    eps: f64,
    /// Candidate scores, comma separated.
    #[arg(long, value_name = "Q1,Q2,...", allow_hyphen_values = true)]
    scores: String,
    /// Candidate sensitivities (finite, > 0), comma separated, one per score.
    #[arg(long, value_name = "D1,D2,...", allow_hyphen_values = true)]
    sens: String,
    #[command(flatten)]
    params: Flags<MechValues>,
    /// Number of selections.
    #[arg(long, value_name = "N")]
    n: u64,
    /// Seed of the random streams (default: OS entropy, reported on stderr).
    #[arg(long, conflicts_with = "secure")]
    seed: Option<u64>,
    /// Release-grade sampling: exact discrete noise on a power-of-two grid from an OS-seeded
    /// ChaCha20 generator, no seed (docs/secure.md).
    #[arg(long)]
    secure: bool,
    /// Print exactly one JSON object {"mechanism","epsilon","n","counts","private"}, with
    /// "bottom" (the selections that released ⊥) for a mechanism that can release it.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scores = parse_f64_list("--scores", &args.scores)?;
    let sens = parse_f64_list("--sens", &args.sens)?;
    let problem = Problem::new(&scores, &sens).context("invalid selection problem")?;
    let params = Registry::builtin()
        .resolve(&args.params.0)?
        .with_epsilon(args.eps);
    let spec = mechanisms::spec(&args.mech)?;
    let mech = spec
        .build(&params)
        .with_context(|| format!("invalid parameters for {}", spec.name))?;
    let n = positive("--n", args.n)?;
    let mode = NoiseMode::from_flag(args.secure);
    let effective = if mode.is_secure() {
        let e = mech
            .secure_epsilon()
            .with_context(|| format!("--secure with {}", spec.name))?;
        super::common::announce_secure(e);
        Some(e)
    } else {
        None
    };
    let streams = if mode.is_secure() {
        recsel::rng::Streams::new(0) // unused: the secure path has no seed
    } else {
        streams(args.seed)
    };
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
            "epsilon": args.eps,
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
        args.eps,
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
