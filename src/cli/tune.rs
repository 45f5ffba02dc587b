//! `recsel tune`: choose the serving configuration per ε on the calibration users and write it
//! into the model directory as `tuning.json` (docs/utility.md, "Tuning").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::data::{calibration_users, load_dataset_with, DataSource, Dataset, LoadOptions};
use recsel::recommend::release::Release;
use recsel::recommend::tuning::{tune, PoolSource, TuneConfig};
use recsel::scoring::SensitivityConfig;

use super::common::{parse_f64_list, progress, DataArgs};

/// Choose, per ε, krr over a public pool or the most popular item, on calibration users only.
///
/// Reads the data the model was fitted on (the same options and --seed as `recsel fit`), takes
/// its validation users — held out of the fit, never served — and writes DIR/tuning.json, which
/// `recsel recommend`, `recsel serve` and the Python Recommender use when no mechanism is named.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel fit --dataset synthetic --validation-users 500 --out models/synth
  recsel tune --model models/synth --dataset synthetic --validation-users 500
  recsel recommend --model models/synth --eps 2 --history 3,17,42 --secure   # the tuned row
  recsel fit --format lightgcn --path ../shared/data/gowalla --method icf --l2 20 --density 0.0005 --out gowalla
  recsel tune --model gowalla --format lightgcn --path ../shared/data/gowalla --eps 0.1,0.5,1,2,4,8

On LightGCN files both `fit --out` and `tune` hold users out of the fit (--validation-users auto)
unless told otherwise; give both the same data options.")]
pub struct Args {
    /// Model directory written by `recsel fit --out DIR` (model.json, release.json, …).
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Seed of the split (as `recsel fit --seed`), also of the calibration users' 80/20 split
    /// when their rows are full.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// ε values to tune, comma separated.
    #[arg(long, value_name = "LIST", default_value = "0.1,0.5,1,2,4,8")]
    eps: String,
    /// Public rankings a pool is the top of: popularity, heldout (those the release carries).
    #[arg(long, value_name = "LIST", default_value = "popularity,heldout")]
    sources: String,
    /// Pool sizes tried (1 is the most popular item).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "1,2,3,5,8,12,20,30,50,80,120,200,300,500,1000"
    )]
    pool_sizes: String,
    /// Paired standard errors of calibration gain a pool needs over the most popular item.
    #[arg(long, default_value_t = recsel::recommend::tuning::DEFAULT_MARGIN)]
    margin: f64,
    /// Print the tuning as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Parses `--clip-range LO,HI` into a sensitivity configuration (percentiles).
pub fn clip_range(text: &str) -> anyhow::Result<SensitivityConfig> {
    let v = parse_f64_list("--clip-range", text)?;
    anyhow::ensure!(
        v.len() == 2,
        "--clip-range takes two percentiles LO,HI, got '{text}'"
    );
    SensitivityConfig::new(v[0], v[1], SensitivityConfig::default().floor).context("--clip-range")
}

/// The load options of a release's data: on LightGCN files users are held out of the fit
/// (`--validation-users auto`) unless the options say otherwise.
pub fn release_load_options(src: &DataSource, mut opts: LoadOptions) -> LoadOptions {
    if src.is_lightgcn() && opts.validation_users.is_none() {
        opts.validation_users = Some(recsel::data::ValidationUsers::Auto);
    }
    opts
}

/// Loads the data of the release in `model` and checks the model was fitted on it.
pub fn release_data(
    model: &Path,
    data: &DataArgs,
    seed: u64,
    what: &str,
) -> anyhow::Result<(Dataset, Release)> {
    let src = data.source()?;
    let opts = release_load_options(&src, data.load_options()?);
    eprintln!("[{what}] loading data");
    let ds = load_dataset_with(&src, seed, &opts).context("loading the data")?;
    let release = Release::read(model)
        .with_context(|| format!("reading the release in {}", model.display()))?;
    let fp = format!("{:016x}", ds.fingerprint());
    anyhow::ensure!(
        fp == release.manifest.data_fingerprint,
        "the model in {} was fitted on other data (fingerprint {}, this data {fp}): give the data \
         options and --seed that `recsel fit` was given (on LightGCN files also the same \
         --validation-users)",
        model.display(),
        release.manifest.data_fingerprint
    );
    Ok((ds, release))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let t = Instant::now();
    let cfg = TuneConfig {
        epsilons: parse_f64_list("--eps", &args.eps)?,
        sources: args
            .sources
            .split(',')
            .map(PoolSource::parse)
            .collect::<recsel::Result<_>>()
            .context("--sources")?,
        pool_sizes: args
            .pool_sizes
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .with_context(|| format!("--pool-sizes: '{s}' is not a number"))
            })
            .collect::<anyhow::Result<_>>()?,
        margin: args.margin,
    };
    cfg.validate()?;
    let (data, release) = release_data(&args.model, &args.data, args.seed, "tune")?;
    let cal = calibration_users(&data, args.seed).with_context(|| {
        format!(
            "data set '{}' has no validation users (held out of the fit, never served) to tune \
             on: fit again with --validation-users N (or auto)",
            data.name()
        )
    })?;
    drop(data);
    let (model, _) = recsel::model::io::load(&args.model, None)?;
    let bar = progress(cal.rows() as u64, "tuning");
    let mut tuning = tune(&model, &release, &cal, &cfg, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    tuning
        .write(&args.model)
        .with_context(|| format!("writing the tuning into {}", args.model.display()))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&tuning)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = &tuning.calibration;
    writeln!(
        out,
        "tuned on {} {} users ({}); pools from {}; margin {} paired s.e.",
        c.users,
        c.population,
        c.split,
        tuning
            .config
            .sources
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(" and "),
        tuning.config.margin
    )?;
    writeln!(
        out,
        "{:>6}  {:<26} {:>17}  {:>7}  {:<14} {:>17}",
        "eps", "serves", "cal. hit@1", "fixed", "best pool", "gain over fixed"
    )?;
    for r in &tuning.rows {
        let serves = if r.mechanism == "krr" {
            format!("krr over {}", r.candidates)
        } else {
            "popular:1 (0-DP)".into()
        };
        writeln!(
            out,
            "{:>6}  {:<26} {:>8.4} ± {:.4}  {:>7.4}  {:<14} {:>+8.4} ± {:.4}",
            r.epsilon,
            serves,
            r.calibration_hit,
            r.calibration_se,
            r.fixed_hit,
            r.best_pool.to_string(),
            r.best_pool_gain,
            r.best_pool_gain_se
        )?;
    }
    writeln!(
        out,
        "wrote {} ({:.1} s); `recsel recommend --model {} --eps E` serves the row of the largest \
         tuned eps <= E",
        args.model.join(recsel::recommend::tuning::TUNING).display(),
        t.elapsed().as_secs_f64(),
        args.model.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
