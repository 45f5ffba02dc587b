//! `recsel serve`: the private recommendation service (docs/serving.md). Fills in the library's
//! `ServeOptions` and runs it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use recsel::serve::{self, ServeOptions};

use super::common::Flags;

/// Serve private recommendations over HTTP/JSON, each charged to the user's privacy budget.
///
/// The operator fixes the mechanism, ε, the candidates and the budget; requests cannot choose
/// them. Stops on SIGTERM or SIGINT after finishing the requests in flight (at most
/// --shutdown-timeout).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --out models/synth
  recsel serve --model models/synth --ledger ledger.db --budget 10 --period month --mech mgem --eps 1
  curl -s localhost:8080/v1/recommend -H 'Content-Type: application/json' -d '{\"user\": \"u1\", \"history\": [\"3\", \"17\"], \"request_id\": \"r1\"}'

Endpoints: POST /v1/recommend, POST /v1/recommend/batch, GET /v1/users/{user}/budget,
GET /v1/model, GET /metrics, GET /healthz, GET /readyz (docs/serving.md).

--budget and --period create a ledger (--create-ledger); an existing ledger keeps its own.
With RECSEL_RELEASE_KEY_FILE naming a key file, only a release signed with that key is served
(docs/deployment.md, \"Signed releases\").")]
pub struct Args {
    /// Options as a TOML file (the keys of the options below, with _ for -, `mechanism` for
    /// --mech and `epsilon` for --eps; docs/serving.md); flags given as well override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    options: Flags<ServeOptions>,
}

/// The `serve` subcommand with the options a TOML file can give required only without one.
pub fn with_config_file(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.is_required_set() {
            a.required(false).required_unless_present("config")
        } else {
            a
        }
    })
}

/// `ServeOptions` from the TOML file (if any) and the flags.
fn options(args: Args, threads: Option<usize>) -> anyhow::Result<ServeOptions> {
    let mut o = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let file =
                ServeOptions::from_toml(&text).with_context(|| format!("{}", path.display()))?;
            file.overlaid(&args.options.0)?
        }
        None => args.options.0,
    };
    if threads.is_some() {
        o.threads = threads;
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
