//! `recsel serve`: the private recommendation service (docs/serving.md). Fills in the library's
//! `ServeOptions` and runs it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use recsel::mechanisms::MechParams;
use recsel::serve::{self, ServeOptions};

use super::common::MechOpts;

/// Serve private recommendations over HTTP/JSON, each charged to the user's privacy budget.
///
/// The operator fixes the mechanism, ε, the candidates and the budget; requests cannot choose
/// them. Stops on SIGTERM or SIGINT after finishing the requests in flight.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --out models/synth
  recsel serve --model models/synth --ledger ledger.db --budget 10 --period month --mech mgem --eps 1
  curl -s localhost:8080/v1/recommend -d '{\"user\": \"u1\", \"history\": [\"3\", \"17\"], \"request_id\": \"r1\"}'

Endpoints: POST /v1/recommend, POST /v1/recommend/batch, GET /v1/users/{user}/budget,
GET /v1/model, GET /metrics, GET /healthz, GET /readyz (docs/serving.md).")]
pub struct Args {
    /// Options as a TOML file (the keys of ServeOptions, docs/serving.md); flags given as well
    /// override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Model directory written by `recsel fit --out DIR` (model + release artifact).
    #[arg(long, value_name = "DIR", required_unless_present = "config")]
    model: Option<PathBuf>,
    /// Privacy ledger: an SQLite file (created if missing) or a postgres:// URL shared by
    /// several replicas.
    #[arg(long, value_name = "FILE|URL", required_unless_present = "config")]
    ledger: Option<String>,
    /// ε each user may spend per --period (decimal, rounded down to 10^-9).
    #[arg(long, value_name = "EPS", required_unless_present = "config")]
    budget: Option<String>,
    /// The budget's window (UTC calendar): day, week, month or none (default: none).
    #[arg(long, value_parser = ["day", "week", "month", "none"])]
    period: Option<String>,
    /// Mechanism (`recsel mechanisms`), or `tuned`: the row of DIR/tuning.json for --eps.
    #[arg(long, required_unless_present = "config")]
    mech: Option<String>,
    /// ε of each recommendation.
    #[arg(long, required_unless_present = "config")]
    eps: Option<f64>,
    #[command(flatten)]
    opts: MechOpts,
    /// Candidate policy: all (every item, user-level ε-DP; the default) or history-top:N (needs
    /// --allow-non-private).
    #[arg(long, value_name = "POLICY")]
    candidates: Option<String>,
    /// Accept what is not user-level ε-DP; every response then says so.
    #[arg(long)]
    allow_non_private: bool,
    /// Address to listen on (port 0: a free port, printed).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// File holding the API key that guards every endpoint but /healthz and /readyz.
    #[arg(long, value_name = "FILE")]
    api_key_file: Option<PathBuf>,
    /// What an exhausted user gets: none (429), popular, or item:ID (a public item, 0 ε).
    #[arg(long, value_name = "none|popular|item:ID")]
    fallback: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<usize>,
    /// Most items in one history.
    #[arg(long, value_name = "N")]
    max_history: Option<usize>,
    /// Tests only: predictable noise from this seed and each request id (announced loudly).
    #[arg(long, value_name = "SEED", hide = true)]
    insecure_test_seed: Option<u64>,
}

/// `ServeOptions` from the TOML file (if any) and the flags.
fn options(args: Args, threads: Option<usize>) -> anyhow::Result<ServeOptions> {
    let mut o = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            ServeOptions::from_toml(&text).with_context(|| format!("{}", path.display()))?
        }
        None => ServeOptions::new(
            args.model.clone().expect("required by clap"),
            args.ledger.as_deref().expect("required by clap"),
            args.budget.as_deref().expect("required by clap"),
            args.mech.as_deref().expect("required by clap"),
            args.eps.expect("required by clap"),
        ),
    };
    if let Some(m) = args.model {
        o.model = m;
    }
    if let Some(l) = args.ledger {
        o.ledger = l;
    }
    if let Some(b) = args.budget {
        o.budget = b;
    }
    if let Some(p) = args.period {
        o.period = p.parse()?;
    }
    if let Some(m) = args.mech {
        o.mechanism = m;
    }
    let eps = args.eps.unwrap_or(o.params.epsilon);
    o.params = args.opts.apply(MechParams {
        epsilon: eps,
        ..o.params
    })?;
    if let Some(c) = args.candidates {
        o.candidates = c;
    }
    o.allow_non_private |= args.allow_non_private;
    if let Some(l) = args.listen {
        o.listen = l;
    }
    if threads.is_some() {
        o.threads = threads;
    }
    if let Some(f) = args.api_key_file {
        o.api_key_file = Some(f);
    }
    if let Some(f) = args.fallback {
        o.fallback = f.parse()?;
    }
    if let Some(n) = args.max_body_bytes {
        o.limits.max_body_bytes = n;
    }
    if let Some(n) = args.max_history {
        o.limits.max_history = n;
    }
    if args.insecure_test_seed.is_some() {
        o.insecure_test_seed = args.insecure_test_seed;
    }
    Ok(o)
}

pub fn run(args: Args, threads: Option<usize>) -> anyhow::Result<ExitCode> {
    let opts = options(args, threads)?;
    let served = serve::run(opts)?;
    let c = served.commits;
    eprintln!(
        "recsel serve: stopped: {} charged, {} replayed, {} refused, {} fallback; {} ledger \
         commits (mean {:.2} ms, largest group {})",
        served.charged,
        served.replayed,
        served.refused,
        served.fallback,
        c.groups,
        1e3 * c.commit_seconds / (c.groups.max(1) as f64),
        c.largest_group
    );
    Ok(ExitCode::SUCCESS)
}
