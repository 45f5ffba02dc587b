//! `recsel evaluate`: what a private recommendation is worth on held-out users — hit@1 of the
//! public baselines, the non-private top-1 and every ε-DP mechanism with and without a tuned
//! public pool, the limit, and the frontier plot (docs/utility.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::data::{calibration_users, load_dataset_with, HeldOutRows, ValidationUsers};
use recsel::recommend::calibrate;
use recsel::recommend::tuning::{Tuning, TUNING};
use recsel::recommend::utility::{measure, table, UtilityConfig};
use recsel::report::utility::{choices, markdown, summary, write_utility};
use recsel::scoring::SensitivityConfig;

use super::common::{parse_f64_list, progress, DataArgs, MechOpts, ModelArgs};
use super::tune::release_data;

/// hit@1 of public baselines and private mechanisms on the test users, tuned on calibration users.
///
/// Reads the data the model was fitted on (the same options and --seed as `recsel fit`); its
/// validation users choose every tuned configuration, its test users give every number.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --validation-users 500 --out models/synth
  recsel evaluate --model models/synth --dataset synthetic --validation-users 500 --out out/utility
  recsel evaluate --model gowalla --format lightgcn --path ../shared/data/gowalla --mech em,rnm,gem,mgem

The tuned krr row comes from DIR/tuning.json when it exists (`recsel tune`), else it is tuned
here on the same calibration users with the defaults.")]
pub struct Args {
    /// Model directory written by `recsel fit --out DIR`.
    #[arg(long, value_name = "DIR", required_unless_present = "folds")]
    model: Option<PathBuf>,
    /// Cross-fitting on LightGCN files instead of a model directory: K folds of the users with a
    /// train and a test item; fold f is evaluated with fold f + 1 as calibration users and a
    /// model fitted on the others (with --method, --l2, --density), so every such user is
    /// evaluated once.
    #[arg(long, value_name = "K", conflicts_with = "model")]
    folds: Option<usize>,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    model_args: ModelArgs,
    /// Seed of the split (as `recsel fit --seed`).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// ε grid, comma separated.
    #[arg(long, value_name = "LIST", default_value = "0.1,0.5,1,2,4,8")]
    eps: String,
    /// ε-DP registry mechanisms measured over every item and over a tuned pool and clip range
    /// (krr is always measured).
    #[arg(long, value_name = "LIST", default_value = "em,rnm,gem,mgem")]
    mech: String,
    /// `popular:N` pool sizes tried for the registry mechanisms.
    #[arg(long, value_name = "LIST", default_value = "3,10,30,100,300,1000")]
    pools: String,
    /// Clip ranges tried for them: LO/HI percentile pairs, comma separated.
    #[arg(long, value_name = "LIST", default_value = "1/99,5/95,25/99,50/99")]
    clips: String,
    /// Selections per evaluated user for a simulated mechanism.
    #[arg(long, default_value_t = 10)]
    trials: u32,
    /// Selections per calibration user when tuning a simulated mechanism.
    #[arg(long, default_value_t = 2)]
    tune_trials: u32,
    /// Seed of the simulations.
    #[arg(long, default_value_t = 1)]
    sim_seed: u64,
    #[command(flatten)]
    opts: MechOpts,
    /// Output directory (utility.csv/.parquet/.json/.md, frontier.png); default
    /// out/utility-<dataset>.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let t = Instant::now();
    let mut cfg = UtilityConfig {
        epsilons: parse_f64_list("--eps", &args.eps)?,
        mechanisms: args
            .mech
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        params: args.opts.apply(Default::default())?,
        pools: args
            .pools
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .with_context(|| format!("--pools: '{s}' is not a number"))
            })
            .collect::<anyhow::Result<_>>()?,
        clips: Vec::new(),
        trials: args.trials,
        tune_trials: args.tune_trials,
        seed: args.sim_seed,
    };
    for c in args.clips.split(',') {
        let (lo, hi) = c
            .split_once('/')
            .with_context(|| format!("--clips: '{c}' is not LO/HI"))?;
        let p = |v: &str| {
            v.trim()
                .parse::<f64>()
                .with_context(|| format!("--clips: '{v}' is not a number"))
        };
        cfg.clips.push((p(lo)?, p(hi)?));
    }
    let (name, parts) = match (&args.model, args.folds) {
        (Some(dir), _) => {
            let (data, release) = release_data(dir, &args.data, args.seed, "evaluate")?;
            let name = data.name().to_string();
            let cal = calibration_users(&data, args.seed).with_context(|| {
                format!(
                    "data set '{name}' has no validation users (held out of the fit, never \
                     served) to tune on: fit again with --validation-users N (or auto)"
                )
            })?;
            let eval = HeldOutRows::test_users(&data);
            drop(data);
            let tuning = if dir.join(TUNING).exists() {
                Some(Tuning::read(dir)?)
            } else {
                eprintln!(
                    "[evaluate] no {TUNING} in {}: tuning krr's pool here on the calibration users",
                    dir.display()
                );
                None
            };
            let (model, _) = recsel::model::io::load(dir, None)?;
            let bar = progress((cal.rows() + eval.rows()) as u64, "evaluating");
            let m = measure(&model, &release, tuning.as_ref(), &cal, &eval, &cfg, &|n| {
                bar.inc(n)
            })?;
            bar.finish_and_clear();
            (name, vec![m])
        }
        (None, Some(k)) => {
            let src = args.data.source()?;
            anyhow::ensure!(
                src.is_lightgcn(),
                "--folds cross-fits LightGCN files (--format lightgcn or --dataset amazon-book)"
            );
            let mut parts = Vec::new();
            let mut name = String::new();
            for f in 0..k {
                let mut opts = args.data.load_options()?;
                opts.validation_users = Some(ValidationUsers::Fold { folds: k, index: f });
                let data = load_dataset_with(&src, args.seed, &opts).context("loading the data")?;
                name = data.name().to_string();
                let params = args.model_args.params(&data.descriptor)?;
                let (model, _) = recsel::model::fit(&data.train, &params, &|_| {})?;
                let release = calibrate(
                    &model,
                    &params,
                    &data,
                    recsel::recommend::release::DEFAULT_CALIBRATION_USERS,
                    &SensitivityConfig::default(),
                    &|_| {},
                )?;
                let cal = calibration_users(&data, args.seed).context("calibration users")?;
                let eval = HeldOutRows::test_users(&data);
                eprintln!(
                    "[evaluate] fold {f} of {k}: {} fitted, {} calibration, {} evaluated users",
                    data.train.rows(),
                    cal.rows(),
                    eval.rows()
                );
                let bar = progress((cal.rows() + eval.rows()) as u64, "evaluating");
                parts.push(measure(&model, &release, None, &cal, &eval, &cfg, &|n| {
                    bar.inc(n)
                })?);
                bar.finish_and_clear();
            }
            (name, parts)
        }
        (None, None) => anyhow::bail!("give --model DIR or --folds K"),
    };
    let table = table(parts)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/utility-{name}")));
    let title = format!("{name}: hit@1 of private recommendations against eps");
    let files = write_utility(&out, &title, &table)?;
    let mut so = std::io::stdout().lock();
    if args.json {
        writeln!(so, "{}", serde_json::to_string_pretty(&table)?)?;
    } else {
        write!(
            so,
            "{}\n{}\n{}",
            markdown(&table),
            summary(&table),
            choices(&table)
        )?;
        writeln!(
            so,
            "{:.1} s; wrote {}",
            t.elapsed().as_secs_f64(),
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
