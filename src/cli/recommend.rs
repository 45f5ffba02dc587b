//! `recsel recommend`: one private item per user from a model directory with a release artifact
//! (docs/deployment.md, "Serving").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::mechanisms::MechParams;
use recsel::recommend::input::{read_users, FileFormat};
use recsel::recommend::{picks_in_history, RecommendConfig, Recommender};
use recsel::report::recommend::{recommendations_bytes, write_recommendations};
use recsel::rng::NoiseMode;
use recsel::scoring::CandidatePolicy;

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
  recsel recommend --model models/synth --mech mgem --eps 1 --candidates popular:200 --users users.csv --secure
  recsel recommend --model models/synth --eps 2 --users users.csv --secure   # tuned (recsel tune)

Without --mech, the row of DIR/tuning.json (`recsel tune`) for the largest tuned eps <= --eps is
served: krr over its public pool, or the most popular item (0-DP).

Candidate policies (--candidates): all (default: every item, the user's own included),
popular:N (the N most popular training items, stored in the release), heldout:N (the N items
most often held out by the users fitted on, stored in the release), pool:FILE (a public list
of item ids, one per line) — each user-level eps-DP per recommendation — and history-top:N (the
user's top N by the user's own scores, own items excluded; candidate membership is NOT protected,
needs --allow-non-private).

A users file has the columns user,item (csv or parquet; one row per interaction) or one
{\"user\": ..., \"items\": [...]} object per line (jsonl).")]
pub struct Args {
    /// Model directory written by `recsel fit --out DIR` (model.json, release.json, …).
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// Mechanism (`recsel mechanisms`); one that is not ε-DP needs --allow-non-private. Default:
    /// the tuned configuration of DIR/tuning.json (`recsel tune`) for --eps.
    #[arg(long, default_value = recsel::recommend::tuning::TUNED)]
    mech: String,
    /// ε of each recommendation.
    #[arg(long)]
    eps: f64,
    /// Which items are candidates: all, popular:N, heldout:N, pool:FILE or history-top:N (see
    /// below) [default: all, or the tuned pool when no --mech is given].
    #[arg(long, value_name = "POLICY")]
    candidates: Option<String>,
    /// Replaced by --candidates (`history-top:N` is the old `--top N`); an error that says so.
    #[arg(long, hide = true)]
    top: Option<String>,
    /// Replaced by --candidates (`all` includes the history); an error that says so.
    #[arg(long, hide = true)]
    include_history: bool,
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
    /// Accept what is not user-level ε-DP: a mechanism that is not ε-DP for this many candidates
    /// (rnmh, rnmh-laplace) or --candidates history-top:N. Reference runs only.
    #[arg(long)]
    allow_non_private: bool,
    #[command(flatten)]
    ledger: super::recommend_ledger::LedgerArgs,
}

/// The error of the options `--candidates` replaced.
fn replaced_options(args: &Args) -> anyhow::Result<()> {
    if let Some(top) = &args.top {
        anyhow::bail!(
            "--top was replaced by --candidates: the default is now every item ('--candidates \
             all', user-level eps-DP); the old '--top {top}' (the user's top {top} by score, own \
             items excluded; candidate membership not protected) is '--candidates \
             history-top:{top} --allow-non-private' (docs/deployment.md, \"Candidate policies\")"
        );
    }
    if args.include_history {
        anyhow::bail!(
            "--include-history was replaced by --candidates: every history-independent policy \
             ('all', the default, 'popular:N', 'pool:FILE') includes the user's own items \
             (docs/deployment.md, \"Candidate policies\")"
        );
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    replaced_options(&args)?;
    let params = args.opts.apply(MechParams {
        epsilon: args.eps,
        ..MechParams::default()
    })?;
    let candidates = match &args.candidates {
        Some(c) => CandidatePolicy::parse(c).context("--candidates")?,
        None => CandidatePolicy::All,
    };
    anyhow::ensure!(
        !(args.mech == recsel::recommend::tuning::TUNED && args.candidates.is_some()),
        "--candidates needs --mech: without it the tuned configuration (tuning.json) chooses the \
         candidates"
    );
    let mut cfg = RecommendConfig::new(&args.mech, params, NoiseMode::from_flag(args.secure))
        .with_candidates(candidates);
    cfg.allow_non_private = args.allow_non_private;
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
    let own = picks_in_history(&users, &picks);
    eprintln!(
        "[recommend] {} users in {secs:.2} s ({:.0} users/s); {own} of {} recommended items \
         ({:.1}%) were already in the user's history ({})",
        users.len(),
        users.len() as f64 / secs.max(1e-9),
        picks.iter().filter(|p| p.is_some()).count(),
        100.0 * own as f64 / picks.iter().filter(|p| p.is_some()).count().max(1) as f64,
        rec.candidate_policy()
    );
    if !rec.user_level() {
        eprintln!("[recommend] {}", rec.privacy_statement());
    }
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
