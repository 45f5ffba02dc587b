//! `recsel recommend`: one private item per user from a model directory with a release artifact
//! (docs/deployment.md, "Serving").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::mechanisms::MechParams;
use recsel::recommend::input::{read_users, FileFormat};
use recsel::recommend::{RecommendConfig, Recommender};
use recsel::report::recommend::{recommendations_bytes, write_recommendations};
use recsel::rng::NoiseMode;

use super::common::{progress, MechOpts};

/// Recommend one item per user with a private selection mechanism.
///
/// The privacy statement goes to stderr; the recommendations (and nothing else that depends on
/// the noise) to --out or stdout.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --out models/synth        # model + release artifact
  recsel recommend --model models/synth --mech mgem --eps 1 --history 3,17,42 --seed 1
  recsel recommend --model models/synth --mech cgem --eps 0.5 --users users.csv --out recs.parquet --secure

A users file has the columns user,item (csv or parquet; one row per interaction) or one
{\"user\": ..., \"items\": [...]} object per line (jsonl).")]
pub struct Args {
    /// Model directory written by `recsel fit --out DIR` (model.json, release.json, …).
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// Mechanism (`recsel mechanisms`); one that is not ε-DP needs --allow-non-private.
    #[arg(long)]
    mech: String,
    /// ε of each recommendation.
    #[arg(long)]
    eps: f64,
    /// Candidates per user (the user's top items by model score).
    #[arg(long, default_value_t = 500)]
    top: usize,
    /// One user's history: comma-separated item ids.
    #[arg(
        long,
        value_name = "ITEM,ITEM,...",
        conflicts_with = "users",
        required_unless_present = "users"
    )]
    history: Option<String>,
    /// Users file (csv, parquet or jsonl; see below).
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    /// Format of --users (default: from its extension).
    #[arg(long, value_parser = ["csv", "parquet", "jsonl"])]
    format: Option<String>,
    /// Write the recommendations here (csv, parquet or jsonl, by extension or --out-format)
    /// instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Format of the output (default: from --out's extension, else csv).
    #[arg(long, value_parser = ["csv", "parquet", "jsonl"])]
    out_format: Option<String>,
    #[command(flatten)]
    opts: MechOpts,
    /// Seed of the selection streams (default: OS entropy, printed). Experiments only.
    #[arg(long, conflicts_with = "secure")]
    seed: Option<u64>,
    /// Release-grade selection: the mechanism's secure path (exact discrete noise, OS-seeded
    /// ChaCha20, no seed; docs/secure.md). Use it for anything shown to users.
    #[arg(long)]
    secure: bool,
    /// Accept a mechanism that is not ε-DP at this --top (rnmh, rnmh-laplace): reference runs only.
    #[arg(long)]
    allow_non_private: bool,
    /// Let the user's own items be recommended too. With --top at least the number of items the
    /// candidate list then no longer depends on the history and the guarantee is user-level
    /// (docs/deployment.md, "What is protected, and what is not").
    #[arg(long)]
    include_history: bool,
    #[command(flatten)]
    ledger: super::recommend_ledger::LedgerArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let params = args.opts.apply(MechParams {
        epsilon: args.eps,
        ..MechParams::default()
    })?;
    let mut cfg = RecommendConfig::new(
        &args.mech,
        params,
        args.top,
        NoiseMode::from_flag(args.secure),
    );
    cfg.allow_non_private = args.allow_non_private;
    cfg.exclude_history = !args.include_history;
    let rec = Recommender::load(&args.model, &cfg)
        .with_context(|| format!("loading the model in {}", args.model.display()))?;
    let seed = if args.secure {
        super::common::announce_secure_mode();
        0 // unused: the secure path has no seed
    } else {
        super::common::seed_or_entropy(args.seed)
    };
    eprintln!("{}", rec.privacy_statement());
    if args.ledger.ledger.is_some() {
        let input = super::recommend_ledger::Inputs {
            cfg: &cfg,
            history: args.history.as_deref(),
            users: args.users.as_deref(),
            format: args
                .format
                .as_deref()
                .map(FileFormat::from_name)
                .transpose()?,
            out: args.out.as_deref(),
            out_format: match (&args.out_format, &args.out) {
                (Some(f), _) => FileFormat::from_name(f)?,
                (None, Some(p)) => FileFormat::from_path(p).unwrap_or(FileFormat::Csv),
                (None, None) => FileFormat::Csv,
            },
            seed,
        };
        super::recommend_ledger::run(rec, &args.ledger, input)?;
        return Ok(ExitCode::SUCCESS);
    }
    let users: Vec<(String, Vec<u32>)> = match (&args.history, &args.users) {
        (Some(h), _) => {
            let ids = h.split(',').map(str::trim).filter(|s| !s.is_empty());
            vec![("history".into(), rec.history(ids).context("--history")?)]
        }
        (None, Some(path)) => {
            let format = match &args.format {
                Some(f) => FileFormat::from_name(f)?,
                None => FileFormat::from_path(path).with_context(|| {
                    format!(
                        "cannot tell the format of {} from its extension; pass --format",
                        path.display()
                    )
                })?,
            };
            read_users(path, format, &|id| rec.item_index(id))?
        }
        (None, None) => anyhow::bail!("give --history or --users"),
    };
    let t = Instant::now();
    let bar = progress(users.len() as u64, "recommending");
    let picks = rec.recommend_all(&users, seed, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "[recommend] {} users in {secs:.2} s ({:.0} users/s)",
        users.len(),
        users.len() as f64 / secs.max(1e-9)
    );
    let rows: Vec<(&str, Option<&str>)> = users
        .iter()
        .zip(&picks)
        .map(|((u, _), p)| (u.as_str(), p.map(|j| rec.item_id(j))))
        .collect();
    let out_format = match (&args.out_format, &args.out) {
        (Some(f), _) => FileFormat::from_name(f)?,
        (None, Some(p)) => FileFormat::from_path(p).unwrap_or(FileFormat::Csv),
        (None, None) => FileFormat::Csv,
    };
    match &args.out {
        Some(path) => {
            write_recommendations(path, &rows, out_format)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("[recommend] wrote {}", path.display());
        }
        None if args.history.is_some() => {
            writeln!(std::io::stdout(), "{}", rows[0].1.unwrap_or(""))?;
        }
        None => {
            anyhow::ensure!(
                out_format != FileFormat::Parquet,
                "Parquet output needs --out FILE"
            );
            std::io::stdout().write_all(&recommendations_bytes(&rows, out_format)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
