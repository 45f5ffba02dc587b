//! `recsel recommend --ledger FILE|URL ...`: every recommendation charged to a per-user privacy
//! ledger before it is written out (docs/ledger.md, "The batch command").

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use recsel::ledger::{self, GroupCommitter, Ledger, Timestamp};
use recsel::recommend::input::{read_requests, FileFormat};
use recsel::recommend::ledgered::{
    key_params, request_ids, run_key, BatchRequest, LedgeredRecommender,
};
use recsel::recommend::options::LedgerOptions;
use recsel::recommend::{RecommendConfig, RecommendOptions, Recommender};
use recsel::report::ledger::{ledger_rows_bytes, row, write_ledger_rows, LedgerRow};

use super::common::{progress, show_report};

/// What `recommend` resolved before the ledger takes over.
pub struct Inputs<'a> {
    pub cfg: &'a RecommendConfig,
    pub user: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub history: Option<&'a str>,
    pub users: Option<&'a Path>,
    /// `--format` of the users file, if given.
    pub format: Option<&'a str>,
    pub out: Option<&'a Path>,
    pub out_format: FileFormat,
    pub seed: u64,
    /// Where to write the privacy report as JSON.
    pub privacy_json: Option<&'a std::path::Path>,
}

/// The ledger of `o` (a file or a `postgres://` URL): an existing ledger, whose settings must
/// agree with any given and which is checked before use, or — with --create-ledger only — a new
/// one with the given budget and period.
fn open(o: &LedgerOptions) -> anyhow::Result<Arc<dyn Ledger>> {
    let spec = o.ledger.as_deref().expect("--ledger given");
    Ok(ledger::open_for_charging(
        spec,
        o.budget()?,
        o.period()?,
        o.create_ledger(),
    )?)
}

pub fn run(rec: Recommender, options: &RecommendOptions, input: Inputs<'_>) -> anyhow::Result<()> {
    let args = &options.ledger;
    let ledger = open(args)?;
    let settings = ledger.settings();
    let k = options.serving.list_len()?;
    show_report(
        &rec.with_list_privacy(rec.privacy_report_with_ledger(&settings), k)?,
        input.privacy_json,
    )?;
    let fallback = args.fallback().column(&rec)?;
    let group = options.group_size()?;
    let rec = Arc::new(rec);
    let committer = Arc::new(GroupCommitter::new(Arc::clone(&ledger), group));
    let spec = args.ledger.as_deref().expect("--ledger given");
    let (key, key_source) =
        ledger::history_key::resolve(&*ledger, spec, args.history_key_file.as_deref())?;
    let lr = LedgeredRecommender::new(Arc::clone(&rec), committer, fallback, &key)?
        .with_charge_repeats(args.charge_repeats());
    eprintln!(
        "[ledger] request hashes: HMAC-SHA256 under history key {} from {key_source}",
        key.id()
    );
    let what = match k {
        1 => "each recommendation".to_string(),
        _ => format!("each list of {k} (one release)"),
    };
    eprintln!(
        "[ledger] {}: {settings}; {what} charges {} eps (basic composition); fallback: {}",
        ledger::Location::parse(args.ledger.as_deref().expect("--ledger given")).display(),
        lr.charge_for(k)?,
        lr.fallback().unwrap_or("none (refusal rows)")
    );
    if k > 1 {
        eprintln!(
            "[ledger] {}",
            if lr.charges_repeats() {
                "--charge-repeats: a list for a history already answered in this period is \
                 charged again"
                    .to_string()
            } else {
                format!(
                    "one release per history: the same user with the same history (and these \
                     options) gets the same list again in this {} at no charge; the ledger \
                     keeps a keyed hash (HMAC-SHA256) of the history and configuration, never \
                     the history",
                    settings.period
                )
            }
        );
    }
    let cfg = input.cfg;
    let mut key_config = vec![
        rec.release().manifest.release_id.clone(),
        format!("{:?}", rec.release().manifest.model_file),
        cfg.mechanism.clone(),
        key_params(&cfg.params),
        cfg.candidates.to_string(),
        format!("{:?}", cfg.noise),
        lr.fallback().unwrap_or("").to_string(),
    ];
    // A prior makes another batch; without one the key is the one batches have always had.
    if cfg.prior != recsel::scoring::Prior::None {
        key_config.push(format!("prior {}", cfg.prior));
    }
    if k > 1 {
        key_config.push(format!("list {k} {}", cfg.list_form));
    }
    let now = Timestamp::now();
    let (requests, users_bytes) = match (input.history, input.users) {
        (Some(h), _) => {
            let user = input
                .user
                .map(str::to_string)
                .context("--history with --ledger needs --user ID (whose budget pays)")?;
            let ids = h.split(',').map(str::trim).filter(|s| !s.is_empty());
            let history = rec.history(ids).context("--history")?;
            let request_id = input
                .request_id
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}/{}", Timestamp::now().0, rand_suffix()));
            let one = BatchRequest {
                user,
                request_id,
                history,
                k,
            };
            let outcome = lr.recommend_request(
                &one,
                now,
                &mut rec.draws_seeded(input.seed)?,
                &mut rec.scratch(),
            )?;
            let r = row(&one, &outcome);
            eprintln!(
                "[ledger] request {}: {}{}{}",
                r.request_id,
                r.status,
                match (&outcome, &r.epsilon) {
                    _ if k == 1 => String::new(),
                    (recsel::ledger::Outcome::Replayed { event }, _) => format!(
                        " (replayed: the release of request {} at {}; charged 0 eps now)",
                        event.request_id, event.time
                    ),
                    (_, Some(e)) => format!(", charged {e} eps"),
                    _ => String::new(),
                },
                match (&r.remaining, &r.retry_after) {
                    (_, Some(t)) => format!(", retry after {t}"),
                    (Some(rem), None) => format!(", {rem} eps left in the window"),
                    _ => String::new(),
                }
            );
            return emit(&[r], &input, true);
        }
        (None, Some(p)) => {
            let format = FileFormat::for_input(input.format, p)?;
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            (read_requests(p, format, &|id| rec.item_index(id))?, bytes)
        }
        (None, None) => bail!("give --history or --users"),
    };
    let key = {
        let refs: Vec<&str> = key_config.iter().map(|s| s.as_str()).collect();
        run_key(&users_bytes, &refs)
    };
    let id = options
        .run_id
        .clone()
        .unwrap_or_else(|| key[..16].to_string());
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
    let batch = request_ids(requests, &run, k);
    let bar = progress(batch.len() as u64, "charging");
    let t = std::time::Instant::now();
    let outcomes = lr.recommend_batch(&batch, now, input.seed, group, &mut |b, _| {
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
