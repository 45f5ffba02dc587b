//! `recsel audit --end-to-end`: the whole serving path of a release (score → candidates → clip →
//! select) audited on neighbouring histories built from real users (docs/deployment.md, "The
//! end-to-end audit").

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::audit::end_to_end::{audit_end_to_end, EndToEndConfig, EndToEndReport};
use recsel::data::{load_dataset_with, DataOptions};
use recsel::experiments::select::DEFAULT_DATA_SEED;
use recsel::mechanisms::{self, MechValues, Registry};
use recsel::recommend::input::{read_users, FileFormat};
use recsel::recommend::options::ServingOptions;
use recsel::recommend::{RecommendOptions, Recommender};
use recsel::scoring::{CandidatePolicy, Prior};

use super::common::{progress, Flags};

/// Base users when `--pairs` is not a number.
const DEFAULT_PAIRS: usize = 4;

/// The options only the end-to-end audit reads.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "End-to-end audit (--end-to-end)")]
pub struct Args {
    /// Model directory with its release artifact (`recsel fit ... --out DIR`).
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Candidate policy of the audited path: all, popular:N, pool:FILE or history-top:N.
    #[arg(long, value_name = "POLICY", default_value = "all")]
    candidates: String,
    /// Public per-item prior of the audited path (docs/priors.md): none, popularity:W,
    /// heldout:W, file:PATH:W, or own-history:W (a known leak, with --allow-non-private).
    #[arg(long, value_name = "PRIOR", default_value = "none")]
    prior: String,
    /// Accept what is not user-level ε-DP (history-top:N, own-history:W, or a mechanism that is
    /// not ε-DP), to
    /// show that the audit flags it.
    #[arg(long)]
    allow_non_private: bool,
    /// The users whose histories are audited: a users file as `recsel recommend` reads it (csv,
    /// parquet or jsonl, by extension) instead of the test users of the data options.
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    #[command(flatten)]
    data: Flags<DataOptions>,
    /// Seed of the train/test split and of synthetic data (`recsel fit --seed`).
    #[arg(long, default_value_t = DEFAULT_DATA_SEED)]
    data_seed: u64,
}

impl Args {
    /// Whether any end-to-end option was given (they need `--end-to-end`).
    pub fn given(&self) -> bool {
        self.model.is_some()
            || self.users.is_some()
            || self.candidates != "all"
            || self.prior != "none"
    }
}

/// The histories to audit: the users file, or the split's test users (their input rows).
fn histories(args: &Args, rec: &Recommender) -> anyhow::Result<Vec<(String, Vec<u32>)>> {
    if let Some(path) = &args.users {
        let format = FileFormat::from_path(path).with_context(|| {
            format!(
                "cannot tell the format of {} from its extension (csv, parquet, jsonl)",
                path.display()
            )
        })?;
        return Ok(read_users(path, format, &|id| rec.item_index(id))?);
    }
    let data = &args.data.0;
    anyhow::ensure!(
        data.dataset.is_some() || data.path.is_some(),
        "--end-to-end needs the users to audit: --users FILE, or the data the model was fitted \
         on (--dataset NAME, or --format FORMAT --path PATH)"
    );
    eprintln!("[audit] loading data");
    let ds = load_dataset_with(&data.source()?, args.data_seed, &data.load_options()?)
        .context("loading the data")?;
    let cols: Vec<Option<u32>> = ds.item_ids.iter().map(|id| rec.item_index(id)).collect();
    let m = &ds.test_input;
    (0..m.rows())
        .map(|u| {
            let mut h = m
                .outer_view(u)
                .expect("row in range")
                .indices()
                .iter()
                .map(|&j| {
                    cols[j as usize].with_context(|| {
                        format!(
                            "item '{}' of the data is not one of the model's items: audit the \
                             data the model was fitted on",
                            ds.item_ids[j as usize]
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<u32>>>()?;
            h.sort_unstable();
            Ok((ds.test_user_ids[u].clone(), h))
        })
        .collect()
}

fn print_report(out: &mut impl Write, r: &EndToEndReport, secs: f64) -> std::io::Result<()> {
    writeln!(
        out,
        "== {} at eps = {}, candidates {}, prior {} ({} items; {})",
        r.mechanism, r.epsilon, r.candidates, r.prior, r.n_items, r.guarantee
    )?;
    writeln!(
        out,
        "{:<10} {:<14} {:<22} {:<6} {:>11} {:<12} {:>8} {:>8} {:>8}",
        "kind", "user", "change", "dir", "k", "output", "count", "count'", "eps_LB"
    )?;
    for d in &r.results {
        writeln!(
            out,
            "{:<10} {:<14} {:<22} {:<6} {:>11} {:<12} {:>8} {:>8} {:>8.3}",
            d.kind.name(),
            d.user,
            d.change,
            d.direction,
            format!("{}/{}", d.k.0, d.k.1),
            d.output,
            d.count_first,
            d.count_second,
            d.eps_lb
        )?;
    }
    let kinds: Vec<String> = r
        .max_by_kind
        .iter()
        .map(|(k, e)| format!("{} {e:.3}", k.name()))
        .collect();
    writeln!(
        out,
        "max eps_LB by kind: {}; max {:.3}; verdict: {}; {} selections from {} scored \
         histories in {secs:.1} s\n",
        kinds.join(", "),
        r.max_eps_lb,
        r.verdict(),
        r.samples_drawn,
        r.histories_scored
    )
}

/// Runs the end-to-end audit for each mechanism of `mech` (see `recsel audit --help`).
#[allow(clippy::too_many_arguments)]
pub fn run(
    args: &Args,
    mech: &str,
    epsilon: f64,
    params: &MechValues,
    samples: u64,
    alpha: f64,
    pairs: &str,
    seed: u64,
    secure: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let model = args
        .model
        .as_ref()
        .context("--end-to-end needs --model DIR (a model with its release artifact)")?;
    let pairs = if pairs == "builtin" {
        DEFAULT_PAIRS
    } else {
        pairs.parse::<usize>().with_context(|| {
            format!("with --end-to-end, --pairs is the number of base users, got '{pairs}'")
        })?
    };
    let config = EndToEndConfig::new(samples, alpha, seed, pairs)?;
    let registry = Registry::builtin();
    // `tuned`: the row of the model's tuning.json for ε, with the candidates it chose.
    let tuned = mech.trim() == recsel::recommend::tuning::TUNED;
    anyhow::ensure!(
        !(tuned && args.candidates != "all"),
        "--mech tuned audits the candidates the tuning chose: leave out --candidates"
    );
    let names: Vec<&str> = match tuned {
        true => vec![recsel::recommend::tuning::TUNED],
        false => mechanisms::parse_list(mech)?
            .iter()
            .map(|s| s.name)
            .collect(),
    };
    let mut recs = Vec::new();
    for name in names {
        let candidates = CandidatePolicy::parse(&args.candidates).context("--candidates")?;
        let options = RecommendOptions {
            serving: ServingOptions {
                model: Some(model.clone()),
                mechanism: Some(name.into()),
                epsilon: Some(epsilon),
                candidates: (!tuned).then_some(candidates),
                prior: Some(Prior::parse(&args.prior).context("--prior")?),
                clip_range: None,
                allow_non_private: Some(args.allow_non_private),
            },
            secure: Some(secure),
            params: params.clone(),
            ..RecommendOptions::default()
        };
        let cfg = options
            .config(&registry)
            .context("--candidates, --prior, --mech or a parameter")?;
        match Recommender::load(model, &cfg) {
            Ok(r) => recs.push(r),
            Err(e) if mech.trim() == "all" => {
                eprintln!("recsel audit: leaving out {name}: {e}");
            }
            Err(e) => {
                return Err(e).with_context(|| format!("loading {} for {name}", model.display()))
            }
        }
    }
    anyhow::ensure!(!recs.is_empty(), "no mechanism left to audit");
    if secure {
        super::common::announce_secure_mode();
    }
    let users = histories(args, &recs[0])?;
    eprintln!("{}", recs[0].privacy_statement());
    let mut reports = Vec::new();
    for rec in &recs {
        let per = pairs as u64 * 4 * (config.samples + config.select_samples);
        let bar = progress(per, rec.mechanism().name());
        let t = Instant::now();
        let r = audit_end_to_end(rec, &users, &config, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "recsel audit --end-to-end: {} ({}): {} selections in {secs:.1} s",
            r.mechanism, r.candidates, r.samples_drawn
        );
        reports.push((r, secs));
    }
    let mut out = std::io::stdout().lock();
    if json {
        let v: Vec<_> = reports
            .iter()
            .map(|(r, secs)| {
                let mut v = serde_json::to_value(r).expect("reports serialise");
                v["verdict"] = r.verdict().into();
                v["seconds"] = (*secs).into();
                v
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        for (r, secs) in &reports {
            print_report(&mut out, r, *secs)?;
        }
        writeln!(
            out,
            "{:<8} {:<16} {:>10} {:>10} {:>10} {:>10}  {:<22} {:>9} {:>7}",
            "mech",
            "candidates",
            "add-one",
            "remove-one",
            "replace",
            "max",
            "verdict",
            "samples",
            "seconds"
        )?;
        for (r, secs) in &reports {
            let k = |i: usize| r.max_by_kind[i].1;
            writeln!(
                out,
                "{:<8} {:<16} {:>10.3} {:>10.3} {:>10.3} {:>10.3}  {:<22} {:>9} {:>7.1}",
                r.mechanism,
                r.candidates,
                k(0),
                k(1),
                k(2),
                r.max_eps_lb,
                r.verdict(),
                r.config.samples,
                secs
            )?;
        }
    }
    let violated = reports.iter().any(|(r, _)| r.violation);
    if violated {
        eprintln!(
            "recsel audit: VIOLATION — a recommender spends more privacy than its user-level claim"
        );
    }
    Ok(if violated {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
