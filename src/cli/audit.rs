//! `recsel audit`: empirical ε lower bounds that refute false privacy claims.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::audit::{self, AuditConfig, AuditReport};
use recsel::mechanisms::{self, MechValues, Registry};
use recsel::rng::NoiseMode;

use super::common::{parse_f64_list, progress, streams, Flags};

/// Audit mechanisms on adversarial neighbouring inputs: per pair an ε lower bound ε_LB, the
/// maximum, the claimed guarantee and a verdict. Exit code 1 when a mechanism that claims a
/// guarantee is refuted. An audit can refute a claim, never prove one.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel audit --mech all --eps 1 --seed 1\n  \
    recsel audit --mech rnmh --eps 1 --samples 100000 --json\n  \
    recsel audit --mech gem --eps 0.5 --pairs my_pairs.json\n  \
    recsel audit --mech all --eps 1 --secure\n  \
    recsel audit --end-to-end --model models/synth --dataset synthetic --mech mgem,rnm --eps 1 \\\n      \
    --samples 20000 --pairs 4 --seed 1\n\n\
    A pairs file is a JSON array of {\"label\": \"...\", \"sens\": [...], \"q\": [...], \"q2\": [...]}\n\
    with |q[a] - q2[a]| <= sens[a] for every candidate a.\n\n\
    --end-to-end audits the whole serving path of a release (score, candidates, clip, select) on\n\
    neighbouring histories of real users: one item added, one removed, the whole history replaced\n\
    by another user's (--pairs base users, default 4), over every item, Bonferroni-corrected."
)]
pub struct Args {
    /// Mechanism name, comma-separated names, or `all`; with --end-to-end also `tuned` (the row
    /// of the model folder's tuning.json for --eps, with the candidates it chose).
    #[arg(long, default_value = "all")]
    mech: String,
    /// Privacy parameter ε the mechanisms are built with.
    #[arg(long, value_name = "E", allow_hyphen_values = true)]
    eps: f64,
    /// Fresh samples per input for the final bounds.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    samples: u64,
    /// Total failure probability of all bounds of one mechanism (Bonferroni-corrected).
    #[arg(long, value_name = "A", default_value_t = 0.01)]
    alpha: f64,
    /// `builtin` (adversarial families around the base problem plus the docs/mechanisms.md counterexamples)
    /// or a JSON file of pairs.
    #[arg(long, default_value = "builtin")]
    pairs: String,
    /// Base scores of the built-in families.
    #[arg(
        long,
        value_name = "Q1,Q2,...",
        default_value = "0,0.25,0.5,0.75,1",
        allow_hyphen_values = true
    )]
    scores: String,
    /// Base sensitivities of the built-in families.
    #[arg(long, value_name = "D1,D2,...", default_value = "0.2,1,0.5,2,1")]
    sens: String,
    #[command(flatten)]
    params: Flags<MechValues>,
    /// Seed of the random streams (default: OS entropy, reported on stderr).
    #[arg(long, conflicts_with = "secure")]
    seed: Option<u64>,
    /// Audit the secure path (exact discrete noise, OS-seeded ChaCha20, no seed) against its
    /// effective ε; with `--mech all`, mechanisms without a secure path are left out.
    #[arg(long)]
    secure: bool,
    /// Print one JSON array of reports instead of tables.
    #[arg(long)]
    json: bool,
    /// Audit the whole serving path of a release on neighbouring histories (see below).
    #[arg(long)]
    end_to_end: bool,
    #[command(flatten)]
    e2e: super::audit_e2e::Args,
}

fn print_report(out: &mut impl Write, r: &AuditReport) -> std::io::Result<()> {
    writeln!(
        out,
        "== {} at eps = {} (claims {})",
        r.mechanism, r.epsilon, r.guarantee
    )?;
    writeln!(
        out,
        "{:<18} {:<6} {:>3} {:>6} {:>10} {:>10} {:>9} {:>9}",
        "pair", "dir", "k", "output", "count", "count'", "eps_LB", "claimed"
    )?;
    for d in &r.results {
        let claimed = d.claimed.map_or("-".to_string(), |c| format!("{c:.4}"));
        let b = &d.bound;
        // Output k of a pair with k candidates is ⊥ (mechanisms that can release it).
        let output = if r.bottom.is_some() && b.output == d.k {
            "⊥".to_string()
        } else {
            b.output.to_string()
        };
        writeln!(
            out,
            "{:<18} {:<6} {:>3} {:>6} {:>10} {:>10} {:>9.4} {:>9}",
            d.pair, d.direction, d.k, output, b.count_first, b.count_second, b.eps_lb, claimed
        )?;
    }
    if let Some(bottom) = r.bottom {
        writeln!(
            out,
            "⊥ released in {bottom} of {} fresh samples (its own output)",
            r.results.len() as u64 * r.config.samples
        )?;
    }
    writeln!(
        out,
        "max eps_LB = {:.4}; exceeds nominal eps: {}; verdict: {}\n",
        r.max_eps_lb,
        if r.exceeds_nominal { "yes" } else { "no" },
        r.verdict()
    )
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.end_to_end {
        let seed = if args.secure {
            recsel::rng::Streams::from_entropy().seed() // only draws the base users
        } else {
            super::common::seed_or_entropy(args.seed)
        };
        return super::audit_e2e::run(
            &args.e2e,
            &args.mech,
            args.eps,
            &args.params.0,
            args.samples,
            args.alpha,
            &args.pairs,
            seed,
            args.secure,
            args.json,
        );
    }
    anyhow::ensure!(
        !args.e2e.given(),
        "--model, --candidates and --users belong to the end-to-end audit: add --end-to-end"
    );
    let specs = mechanisms::parse_list(&args.mech)?;
    let params = Registry::builtin()
        .resolve(&args.params.0)?
        .with_epsilon(args.eps);
    let mode = NoiseMode::from_flag(args.secure);
    let streams = if mode.is_secure() {
        // The secure path draws no seed; the built-in random pairs still need one.
        recsel::rng::Streams::from_entropy()
    } else {
        streams(args.seed)
    };
    let config = AuditConfig::new(args.samples, args.alpha, streams.seed())?.with_noise(mode);
    let pairs = if args.pairs == "builtin" {
        let q = parse_f64_list("--scores", &args.scores)?;
        let d = parse_f64_list("--sens", &args.sens)?;
        audit::builtin_pairs(&q, &d, streams.seed()).context("building the built-in pairs")?
    } else {
        audit::read_pairs(&PathBuf::from(&args.pairs))?
    };
    let per_mech = pairs.len() as u64 * 2 * (config.samples + config.select_samples);
    let bar = progress(per_mech * specs.len() as u64, "auditing");
    let start = Instant::now();
    let mut mechs = Vec::new();
    for spec in &specs {
        let mech = spec
            .build(&params)
            .with_context(|| format!("invalid parameters for {}", spec.name))?;
        if mode.is_secure() {
            match mech.secure_epsilon() {
                Ok(e) => super::common::announce_secure_for(spec.name, e),
                Err(e) if args.mech.trim() == "all" => {
                    eprintln!("recsel audit: leaving out {}: {e}", spec.name);
                    bar.inc(per_mech);
                    continue;
                }
                Err(e) => return Err(e).context(format!("--secure with {}", spec.name)),
            }
        }
        mechs.push(mech);
    }
    let mut reports = Vec::new();
    for mech in &mechs {
        reports.push(audit::audit(&**mech, &pairs, &config, &|n| bar.inc(n))?);
    }
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let drawn: u64 = reports.iter().map(|r| r.samples_drawn).sum();
    eprintln!(
        "recsel audit: {} mechanism(s), {} pairs, {drawn} samples in {secs:.1} s ({:.0} samples/s)",
        reports.len(),
        pairs.len(),
        drawn as f64 / secs.max(1e-9)
    );
    let mut out = std::io::stdout().lock();
    if args.json {
        let v: Vec<_> = reports
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).expect("reports serialise");
                v["verdict"] = r.verdict().into();
                v
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        for r in &reports {
            print_report(&mut out, r)?;
        }
        writeln!(
            out,
            "{:<13} {:>9} {:>10}  verdict",
            "mechanism", "claims", "max eps_LB"
        )?;
        for r in &reports {
            writeln!(
                out,
                "{:<13} {:>9} {:>10.4}  {}",
                r.mechanism,
                r.guarantee,
                r.max_eps_lb,
                r.verdict()
            )?;
        }
    }
    let violated = reports.iter().any(|r| r.violation);
    if violated {
        eprintln!("recsel audit: VIOLATION — a mechanism spends more privacy than it claims");
    }
    Ok(if violated {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
