//! `recsel recommend`: one private item per user from a model directory with a release artifact
//! (docs/deployment.md, "Serving").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::mechanisms::Registry;
use recsel::recommend::input::{read_users, FileFormat};
use recsel::recommend::{picks_in_history, RecommendOptions, Recommender};
use recsel::report::recommend::{recommendations_bytes, write_recommendations};

use super::common::{progress, show_report, Flags};

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
  recsel recommend --model models/synth --mech mgem --eps 1 --users users.csv --secure \\
      --ledger ledger.db --budget 10 --period month
  recsel recommend --model models/synth --eps 2 --users users.csv --secure   # tuned (recsel tune)

Without --mech, the row of DIR/tuning.json (`recsel tune`) for the largest tuned eps <= --eps is
served: krr over its public pool (with its public prior, if it has one), or the best free option
(the most popular or the most held-out item, 0-DP). A named mechanism serves its own tuned row
of tuning.json for --eps (pool, clip range, prior) unless --candidates, --clip-range or --prior
is given. The line after the privacy
statement says what the served configuration is worth on the calibration users beside the best
free option, both estimated on calibration users the tuning did not choose on, and warns, naming
that option, when it does not beat it by the tuning's margin.

A users file has the columns user,item (csv or parquet; one row per interaction) or one
{\"user\": ..., \"items\": [...]} object per line (jsonl).")]
pub struct Args {
    #[command(flatten)]
    options: Flags<RecommendOptions>,
    /// One user's history: comma-separated item ids.
    #[arg(
        long,
        value_name = "ITEM,ITEM,...",
        conflicts_with = "users",
        required_unless_present = "users",
        help_heading = "Input and output"
    )]
    history: Option<String>,
    /// Users file (csv, parquet or jsonl; see below).
    #[arg(long, value_name = "FILE", help_heading = "Input and output")]
    users: Option<PathBuf>,
    /// Format of --users (default: from its extension).
    #[arg(long, value_parser = ["csv", "parquet", "jsonl"], help_heading = "Input and output")]
    format: Option<String>,
    /// Write the recommendations here (csv, parquet or jsonl, by extension or --out-format)
    /// instead of stdout.
    #[arg(long, value_name = "FILE", help_heading = "Input and output")]
    out: Option<PathBuf>,
    /// Format of the output (default: from --out's extension, else csv).
    #[arg(long, value_parser = ["csv", "parquet", "jsonl"], help_heading = "Input and output")]
    out_format: Option<String>,
    /// Also write the privacy report (the one printed on stderr) as JSON to this file.
    #[arg(long, value_name = "FILE", help_heading = "Input and output")]
    privacy_json: Option<PathBuf>,
    /// With --history and --ledger: the user whose budget pays.
    #[arg(long, value_name = "ID", requires = "ledger", help_heading = "Ledger")]
    user: Option<String>,
    /// With --history and --ledger: the request id (default: a new one per call).
    #[arg(long, value_name = "ID", requires = "ledger", help_heading = "Ledger")]
    request_id: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = &args.options.0;
    let cfg = options.config(&Registry::builtin())?;
    let model = options.model_dir()?;
    let rec = Recommender::load(model, &cfg)
        .with_context(|| format!("loading the model in {}", model.display()))?;
    if options.noise.secure() {
        super::common::announce_secure_mode();
    }
    let seed = options
        .noise
        .seed_or(|| super::common::seed_or_entropy(None))?;
    let k = options.serving.list_len()?;
    eprintln!("{}", rec.list_statement(k)?);
    eprintln!("{}", rec.release().signature);
    eprintln!("{}", rec.worth_for(k).text());
    if !options.charges_a_ledger() {
        let report = rec.with_list_privacy(rec.privacy_report(), k)?;
        show_report(&report, args.privacy_json.as_deref())?;
    }
    let out_format = FileFormat::for_output(args.out_format.as_deref(), args.out.as_deref())?;
    if options.charges_a_ledger() {
        let input = super::recommend_ledger::Inputs {
            cfg: &cfg,
            user: args.user.as_deref(),
            request_id: args.request_id.as_deref(),
            history: args.history.as_deref(),
            users: args.users.as_deref(),
            format: args.format.as_deref(),
            out: args.out.as_deref(),
            out_format,
            seed,
            privacy_json: args.privacy_json.as_deref(),
        };
        super::recommend_ledger::run(rec, options, input)?;
        return Ok(ExitCode::SUCCESS);
    }
    let users: Vec<(String, Vec<u32>)> = match (&args.history, &args.users) {
        (Some(h), _) => {
            let ids = h.split(',').map(str::trim).filter(|s| !s.is_empty());
            vec![("history".into(), rec.history(ids).context("--history")?)]
        }
        (None, Some(path)) => {
            let format = FileFormat::for_input(args.format.as_deref(), path)?;
            read_users(path, format, &|id| rec.item_index(id))?
        }
        (None, None) => anyhow::bail!("give --history or --users"),
    };
    if k > 1 {
        return write_lists(&rec, &users, k, seed, &args, out_format);
    }
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

/// `recommend --k K` without a ledger: a list of K distinct items per user, each list one
/// release. One row per (user, item) in the list's order (the rank is the row's order within
/// the user); with --history, the items on one line, separated by commas.
fn write_lists(
    rec: &Recommender,
    users: &[(String, Vec<u32>)],
    k: usize,
    seed: u64,
    args: &Args,
    out_format: FileFormat,
) -> anyhow::Result<ExitCode> {
    let bar = progress(users.len() as u64, "recommending");
    let mut draws = rec.draws_seeded(seed)?;
    let mut scratch = rec.scratch();
    let mut lists = Vec::with_capacity(users.len());
    for (user, history) in users {
        lists.push(rec.recommend_list(
            history,
            k,
            recsel::recommend::user_key(user),
            &mut draws,
            &mut scratch,
        )?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let released = rec.released_len(k)?;
    if released > k {
        // The tuned list releases more than k: what the device does with it, here where the
        // history is (post-processing of the released list, no eps).
        for (list, (_, history)) in lists.iter_mut().zip(users) {
            list.retain(|j| !history.contains(j));
            list.truncate(k);
        }
        eprintln!(
            "[recommend] each list released {released} items (one release); shown: the first \
             {k} not in the history (device-side filtering, post-processing)"
        );
    }
    if args.history.is_some() && args.out.is_none() {
        let ids: Vec<&str> = lists[0].iter().map(|&j| rec.item_id(j)).collect();
        writeln!(std::io::stdout(), "{}", ids.join(","))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<(&str, Option<&str>)> = users
        .iter()
        .zip(&lists)
        .flat_map(|((u, _), l)| l.iter().map(move |&j| (u.as_str(), Some(rec.item_id(j)))))
        .collect();
    match &args.out {
        Some(path) => {
            write_recommendations(path, &rows, out_format)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("[recommend] wrote {}", path.display());
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
