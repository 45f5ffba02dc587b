//! `recsel tune`: choose the serving configuration per ε on the calibration users and write it
//! into the model directory as `tuning.json` (docs/utility.md, "Tuning").

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::evaluate::options::TuneOptions;
use recsel::scoring::Prior;

use super::common::Flags;

/// Choose, per ε, krr over a public pool (and a public popularity prior for its argmax) or the
/// best free option (the most popular or the most held-out item, 0 ε), and each ε-DP registry
/// mechanism's own pool, clip range and prior, on half of the calibration users; estimate every
/// choice on the other half.
///
/// Reads the data the model was fitted on (the same options and --seed as `recsel fit`), takes
/// its validation users — held out of the fit, never served — and writes DIR/tuning.json, which
/// `recsel recommend`, `recsel serve` and the Python Recommender use when no mechanism is named.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --validation-users 0.1 --out models/synth
  recsel tune --model models/synth --dataset synthetic --validation-users 0.1
  recsel recommend --model models/synth --eps 2 --history 3,17,42 --secure   # the tuned row
  recsel fit --format lightgcn --path ../shared/data/gowalla --method icf --l2 20 --density 0.0005 --out gowalla
  recsel tune --model gowalla --format lightgcn --path ../shared/data/gowalla --eps 0.1,0.5,1,2,4,8
  recsel tune --model gowalla --format lightgcn --path ../shared/data/gowalla --eps 1,2 --private

On LightGCN files both `fit --out` and `tune` hold users out of the fit (--validation-users auto)
unless told otherwise; give both the same data options.")]
pub struct Args {
    /// Options as a TOML file (the keys of the options below with _ for -, `epsilons` for
    /// --eps); flags given as well override it.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    options: Flags<TuneOptions>,
    /// Print the tuning as JSON instead of a table.
    #[arg(long, help_heading = "Output")]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let t = Instant::now();
    let o = &super::common::table_with_file(args.config.as_deref(), &args.options.0)?;
    let model_dir = o.model.clone().context("--model is required")?;
    let bar = super::common::counter("tune", "calibration users scored");
    let log = |s: &str| bar.suspend(|| eprintln!("[tune] {s}"));
    let tuning = o.run(&log, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&tuning)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = &tuning.calibration;
    writeln!(
        out,
        "tuned on {} {} users ({}); pools from {}; popularity prior weights {:?}; margin {} \
         paired s.e.; 'no prior': the best pool's calibration hit@1 without a prior",
        c.users.map_or_else(|| "the".into(), |n| n.to_string()),
        c.population,
        c.split,
        tuning
            .config
            .sources
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(" and "),
        tuning.config.prior_weights,
        tuning.config.margin
    )?;
    let with_prior = |pool: String, prior: &Prior| match prior {
        Prior::None => pool,
        p => format!("{pool} + {p}"),
    };
    let num = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
    let serves = |r: &recsel::recommend::tuned::TunedRow| {
        if r.mechanism == "krr" {
            format!(
                "krr over {}",
                with_prior(r.candidates.to_string(), &r.prior)
            )
        } else {
            format!("{} (free, 0 eps)", r.candidates)
        }
    };
    writeln!(out, "estimates: {}", tuning.estimated())?;
    if tuning.privacy.is_private() {
        writeln!(
            out,
            "{:>6}  {:<36} {:>17}  {:>7}  {:>17}  {:<10} {:>17}",
            "eps", "serves", "noisy sel. score", "configs", "held-out hit@1", "free", "free hit@1"
        )?;
        for r in &tuning.rows {
            let p = r.private.as_ref();
            writeln!(
                out,
                "{:>6}  {:<36} {:>17}  {:>7}  {:>8.4} ± {:.4}  {:<10} {:>17}",
                r.epsilon,
                serves(r),
                p.and_then(|p| p
                    .noisy_score
                    .map(|s| format!("{s:.2}"))
                    .or(p.noisy_hit.map(|h| format!("{h:.4} (mean)"))))
                    .unwrap_or_else(|| "⊥".to_string()),
                p.map_or(0, |p| p.candidates),
                r.calibration_hit,
                r.calibration_se,
                r.free_option
                    .as_ref()
                    .map_or_else(|| "-".to_string(), |f| f.to_string()),
                r.free_hit
                    .map_or_else(|| "-".to_string(), |f| f.to_string())
            )?;
        }
        writeln!(
            out,
            "noisy sel. score: the selection's released score, the sum of hit@1 over the selection \
             users plus its noise (the best of many noisy runs: optimistic); held-out hit@1: the \
             served configuration's noisy estimate on the estimation users ± the noise's s.d.; \
             free: popular:1, or heldout:1 when its noisy gain over popular:1 there clears the \
             margin"
        )?;
        for r in &tuning.rows {
            writeln!(out, "eps {}: {}", r.epsilon, r.reason)?;
        }
    } else {
        writeln!(
            out,
            "{:>6}  {:<36} {:>17}  {:>7}  {:<26} {:>17}  {:>7}",
            "eps", "serves", "cal. hit@1", "free", "best pool", "gain over free", "no prior"
        )?;
        for r in &tuning.rows {
            writeln!(
                out,
                "{:>6}  {:<36} {:>8.4} ± {:.4}  {:>7}  {:<26} {:>8} ± {:<6}  {:>7}",
                r.epsilon,
                serves(r),
                r.calibration_hit,
                r.calibration_se,
                num(r.fixed_hit),
                with_prior(r.best_pool.to_string(), &r.best_prior),
                num(r.best_pool_gain),
                num(r.best_pool_gain_se),
                num(r.best_no_prior_hit)
            )?;
        }
    }
    if !tuning.mechanisms.is_empty() {
        writeln!(
            out,
            "each mechanism's tuned row (served by `recommend --mech M --eps E` for a tuned E) \
             and its untuned configuration (every item, the release's clip range), calibration \
             hit@1 on the estimation users; free: {}, {}",
            tuning
                .free_option
                .as_ref()
                .map_or_else(|| "popular:1".to_string(), |f| f.to_string()),
            tuning
                .free
                .map_or_else(|| "?".to_string(), |f| f.to_string())
        )?;
        writeln!(
            out,
            "{:<12} {:>6}  {:<56} {:>17} {:>17}",
            "mechanism", "eps", "tuned configuration", "tuned", "untuned"
        )?;
        for m in &tuning.mechanisms {
            let flag = |g: &recsel::recommend::tuned::Estimate| {
                if g.below(recsel::recommend::worth::WORTH_MARGIN) {
                    " <free"
                } else if !recsel::recommend::tuned::beats(g, tuning.config.margin) {
                    " ~free"
                } else {
                    ""
                }
            };
            writeln!(
                out,
                "{:<12} {:>6}  {:<56} {:>17}{:<6} {:>17}{}",
                m.mechanism,
                m.epsilon,
                m.describe(),
                m.hit.to_string(),
                flag(&m.gain),
                m.untuned_hit.to_string(),
                flag(&m.untuned_gain)
            )?;
        }
        writeln!(
            out,
            "<free: below the free option by more than 2 paired s.e.; ~free: not above it by the \
             margin ({} s.e.): `recommend --mech M` serves it with a WARNING",
            tuning.config.margin
        )?;
    }
    if !tuning.lists.is_empty() {
        writeln!(
            out,
            "lists: per eps the best private list and the best free list chosen on the selection \
             users by Recall@k, estimated on the others; the private list is served only when its \
             gain clears the margin ({} s.e.)",
            tuning.config.margin
        )?;
        writeln!(
            out,
            "{:>4} {:>6}  {:<17} {:<17} {:<17} {:<17}  serves",
            "k", "eps", "served Recall@k", "free Recall@k", "best private", "gain over free"
        )?;
        for r in &tuning.lists {
            writeln!(
                out,
                "{:>4} {:>6}  {:<17} {:<17} {:<17} {:<17}  {}",
                r.k,
                r.epsilon,
                r.recall.to_string(),
                r.free_recall.to_string(),
                r.best_recall.to_string(),
                r.gain.to_string(),
                r.serves.describe(r.k)
            )?;
        }
        for r in &tuning.lists {
            writeln!(out, "k {} eps {}: {}", r.k, r.epsilon, r.reason)?;
        }
    }
    let p = &tuning.privacy;
    match p.epsilon {
        Some(e) => writeln!(
            out,
            "privacy of the {}: {} for {}; {} ({})",
            p.population,
            recsel::privacy::report::guarantee(Some(e), p.delta),
            p.unit,
            p.mechanism,
            p.note
        )?,
        None => writeln!(
            out,
            "privacy of the {}: none ({}); `recsel tune --private` protects them",
            p.population, p.mechanism
        )?,
    }
    writeln!(
        out,
        "wrote {} ({:.1} s); `recsel recommend --model {} --eps E` serves the row of the largest \
         tuned eps <= E",
        model_dir.join(recsel::recommend::tuned::TUNING).display(),
        t.elapsed().as_secs_f64(),
        model_dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
