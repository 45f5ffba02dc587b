//! `recsel recommend --ledger FILE ...`: every recommendation charged to a per-user privacy
//! ledger before it is written out (docs/ledger.md, "The batch command").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use recsel::ledger::{self, GroupCommitter, Ledger, Period, Timestamp, Units};
use recsel::recommend::input::{read_requests, FileFormat};
use recsel::recommend::ledgered::{request_ids, run_key, BatchRequest, LedgeredRecommender};
use recsel::recommend::{RecommendConfig, Recommender};
use recsel::report::ledger::{ledger_rows_bytes, row, write_ledger_rows, LedgerRow};

use super::common::progress;

/// The ledger options of `recsel recommend`.
#[derive(Debug, Clone, clap::Args)]
pub struct LedgerArgs {
    /// Charge every recommendation to this privacy ledger (an SQLite file, created if missing)
    /// before it is written out; a user whose budget is exhausted gets a refusal row
    /// (docs/ledger.md).
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
    /// ε each user may spend per --period (decimal, rounded down to 10^-9). Needed to create a
    /// ledger; an existing ledger keeps its own, and a different value is an error.
    #[arg(long, value_name = "EPS", requires = "ledger")]
    pub budget: Option<String>,
    /// The budget's window (UTC calendar): day, week, month or none (the ledger's lifetime).
    /// Default for a new ledger: none.
    #[arg(long, value_parser = ["day", "week", "month", "none"], requires = "ledger")]
    pub period: Option<String>,
    /// What a user with an exhausted budget gets: none (a refusal row) or item:ID (that public
    /// item, 0 ε, marked fallback). `popular` needs a release with a popularity list.
    #[arg(long, default_value = "none", requires = "ledger")]
    pub fallback: String,
    /// Requests per durable commit (one fsync each).
    #[arg(long, default_value_t = 256, requires = "ledger")]
    pub group: usize,
    /// The batch's run id: request ids are <run id>/<user> (unless the users file has a
    /// request_id column). Default: a fingerprint of the users file and the serving options, so
    /// the same command never charges twice — a rerun after a crash replays what was committed.
    /// Name a new batch over the same file with a new run id (e.g. the date).
    #[arg(long, value_name = "ID", requires = "ledger")]
    pub run_id: Option<String>,
    /// With --history: the user whose budget pays.
    #[arg(long, value_name = "ID", requires = "ledger")]
    pub user: Option<String>,
    /// With --history: the request id (default: a new one per call).
    #[arg(long, value_name = "ID", requires = "ledger")]
    pub request_id: Option<String>,
}

/// What `recommend` resolved before the ledger takes over.
pub struct Inputs<'a> {
    pub cfg: &'a RecommendConfig,
    pub history: Option<&'a str>,
    pub users: Option<&'a Path>,
    pub format: Option<FileFormat>,
    pub out: Option<&'a Path>,
    pub out_format: FileFormat,
    pub seed: u64,
}

fn settings_for(args: &LedgerArgs, path: &Path) -> anyhow::Result<Arc<dyn Ledger>> {
    let period: Option<Period> = args.period.as_deref().map(str::parse).transpose()?;
    let budget = args
        .budget
        .as_deref()
        .map(Units::budget)
        .transpose()
        .context("--budget")?;
    Ok(ledger::open_or_create(path, budget, period)?)
}

fn fallback_item(args: &LedgerArgs, rec: &Recommender) -> anyhow::Result<Option<u32>> {
    match args.fallback.as_str() {
        "none" => Ok(None),
        "popular" => bail!(
            "--fallback popular needs a release with a popularity list, which this model \
             directory does not have; give a public item with --fallback item:ID"
        ),
        f => match f.strip_prefix("item:") {
            Some(id) => Ok(Some(rec.item_index(id).with_context(|| {
                format!("--fallback: item '{id}' is not one of the model's item ids")
            })?)),
            None => bail!("--fallback must be none, popular or item:ID, got '{f}'"),
        },
    }
}

pub fn run(rec: Recommender, args: &LedgerArgs, input: Inputs<'_>) -> anyhow::Result<()> {
    let path = args.ledger.as_deref().expect("--ledger given");
    let ledger = settings_for(args, path)?;
    let settings = ledger.settings();
    let fallback = fallback_item(args, &rec)?;
    let rec = Arc::new(rec);
    let committer = Arc::new(GroupCommitter::new(Arc::clone(&ledger), args.group));
    let lr = LedgeredRecommender::new(Arc::clone(&rec), committer, fallback)?;
    eprintln!(
        "[ledger] {}: {settings}; each recommendation charges {} eps (basic composition); \
         fallback: {}",
        path.display(),
        lr.charge(),
        lr.fallback().unwrap_or("none (refusal rows)")
    );
    let cfg = input.cfg;
    let key_config = [
        rec.release().manifest.data_fingerprint.clone(),
        format!("{:?}", rec.release().manifest.model_file),
        cfg.mechanism.clone(),
        format!("{:?}", cfg.params),
        cfg.top.to_string(),
        cfg.exclude_history.to_string(),
        format!("{:?}", cfg.noise),
        lr.fallback().unwrap_or("").to_string(),
    ];
    let now = Timestamp::now();
    let (requests, users_bytes) = match (input.history, input.users) {
        (Some(h), _) => {
            let user = args
                .user
                .clone()
                .context("--history with --ledger needs --user ID (whose budget pays)")?;
            let ids = h.split(',').map(str::trim).filter(|s| !s.is_empty());
            let history = rec.history(ids).context("--history")?;
            let request_id = args
                .request_id
                .clone()
                .unwrap_or_else(|| format!("{}/{}", Timestamp::now().0, rand_suffix()));
            let one = BatchRequest {
                user,
                request_id,
                history,
            };
            let outcome = lr.recommend(
                &one.user,
                &one.request_id,
                &one.history,
                now,
                &mut rec.draws_seeded(input.seed)?,
                &mut rec.scratch(),
            )?;
            let r = row(&one, &outcome);
            eprintln!(
                "[ledger] request {}: {}{}",
                r.request_id,
                r.status,
                match (&r.remaining, &r.retry_after) {
                    (_, Some(t)) => format!(", retry after {t}"),
                    (Some(rem), None) => format!(", {rem} eps left in the window"),
                    _ => String::new(),
                }
            );
            return emit(&[r], &input, true);
        }
        (None, Some(p)) => {
            let format = match input.format {
                Some(f) => f,
                None => FileFormat::from_path(p).with_context(|| {
                    format!(
                        "cannot tell the format of {} from its extension; pass --format",
                        p.display()
                    )
                })?,
            };
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            (read_requests(p, format, &|id| rec.item_index(id))?, bytes)
        }
        (None, None) => bail!("give --history or --users"),
    };
    let key = {
        let refs: Vec<&str> = key_config.iter().map(|s| s.as_str()).collect();
        run_key(&users_bytes, &refs)
    };
    let id = args.run_id.clone().unwrap_or_else(|| key[..16].to_string());
    let run = ledger.open_run(&id, &key, now)?;
    eprintln!(
        "[ledger] run {} (attempt {}{}); request ids are the file's request_id, else {}/<user>",
        run.id,
        run.attempts,
        if run.attempts > 1 {
            ": answers committed by earlier attempts are replayed, not charged again; a new \
             batch over this file needs --run-id NAME"
        } else {
            ""
        },
        run.id
    );
    let batch = request_ids(requests, &run);
    let bar = progress(batch.len() as u64, "charging");
    let t = std::time::Instant::now();
    let outcomes = lr.recommend_batch(&batch, now, input.seed, args.group, &mut |b, _| {
        bar.inc(b.len() as u64)
    })?;
    bar.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    let rows: Vec<LedgerRow> = batch
        .iter()
        .zip(&outcomes)
        .map(|(b, o)| row(b, o))
        .collect();
    emit(&rows, &input, false)?;
    let stats = lr.stats();
    let count = |s: &str| rows.iter().filter(|r| r.status == s).count();
    eprintln!(
        "[ledger] {} requests in {secs:.2} s ({:.0}/s): {} recommended, {} no candidate, {} \
         fallback, {} refused, {} rejected; {} replayed; {} commits (mean {:.2} ms, largest {} \
         requests)",
        rows.len(),
        rows.len() as f64 / secs.max(1e-9),
        count("recommended"),
        count("no_candidate"),
        count("fallback"),
        count("refused"),
        count("rejected"),
        rows.iter().filter(|r| r.replayed).count(),
        stats.groups,
        1e3 * stats.commit_seconds / (stats.groups.max(1) as f64),
        stats.largest_group
    );
    Ok(())
}

fn rand_suffix() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Writes the rows: to --out atomically (every row's charge is already durable), or stdout.
fn emit(rows: &[LedgerRow], input: &Inputs<'_>, single: bool) -> anyhow::Result<()> {
    match input.out {
        Some(path) => {
            write_ledger_rows(path, rows, input.out_format)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("[recommend] wrote {}", path.display());
        }
        None if single => {
            writeln!(
                std::io::stdout(),
                "{}",
                rows[0].item.as_deref().unwrap_or("")
            )?;
        }
        None => {
            anyhow::ensure!(
                input.out_format != FileFormat::Parquet,
                "Parquet output needs --out FILE"
            );
            std::io::stdout().write_all(&ledger_rows_bytes(rows, input.out_format)?)?;
        }
    }
    Ok(())
}
