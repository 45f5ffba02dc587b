//! `recsel audit`: empirical ε lower bounds that refute false privacy claims.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::audit::{self, AuditConfig, AuditOptions, AuditReport};
use recsel::mechanisms::{self, Registry};

use super::common::{input_seed, progress, Flags};

/// Audit mechanisms on adversarial neighbouring inputs: per pair an ε lower bound ε_LB, the
/// maximum, the claimed guarantee and a verdict. Exit code 1 when a mechanism that claims a
/// guarantee is refuted. An audit can refute a claim, never prove one.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  recsel audit --mech all --eps 1 --seed 1\n  \
    recsel audit --mech rnmh --eps 1 --samples 100000 --json\n  \
    recsel audit --mech gem --eps 0.5 --pairs my_pairs.json\n  \
    recsel audit --mech all --eps 1 --secure\n\n\
    A pairs file is a JSON array of {\"label\": \"...\", \"sens\": [...], \"q\": [...], \"q2\": [...]}\n\
    with |q[a] - q2[a]| <= sens[a] for every candidate a.\n\n\
    The whole serving path of a release (score, candidates, clip, select) is audited by\n\
    `recsel audit-e2e`."
)]
pub struct Args {
    #[command(flatten)]
    options: Flags<AuditOptions>,
    /// Print one JSON array of reports instead of tables.
    #[arg(long, help_heading = "Output")]
    json: bool,
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
    let o = &args.options.0;
    let specs = mechanisms::parse_list(&o.mechanisms())?;
    let epsilon = o.epsilon.context("--eps is required")?;
    let params = Registry::builtin()
        .resolve(&o.params)?
        .with_epsilon(epsilon);
    let mode = o.noise.mode();
    // The built-in random pairs need a seed also on the secure path, which draws no other.
    let seed = input_seed(&o.noise)?;
    let config = AuditConfig::new(o.sampling.samples(), o.sampling.alpha(), seed)?.with_noise(mode);
    let pairs = if o.pairs() == "builtin" {
        audit::builtin_pairs(&o.scores(), &o.sens(), seed).context("building the built-in pairs")?
    } else {
        audit::read_pairs(&PathBuf::from(o.pairs()))?
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
                Err(e) if o.mechanisms().trim() == "all" => {
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
