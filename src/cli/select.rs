//! `recsel select`: private top-1 selection for every test user (SPEC §5.5–5.9, seed 001 fig 13).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::data::{load_dataset, Csr, Dataset};
use recsel::experiments::real::{self, ChunkStore, SelectConfig, PAPER_EPSILONS};
use recsel::experiments::synthetic::MseRow as SynthMseRow;
use recsel::mechanisms::{self, MechParams};
use recsel::model::{self, Model, Scratch};
use recsel::report::{self, plot};
use recsel::scoring::{item_sensitivities, SensitivityConfig, UserScorer};

use super::common::{parse_f64_list, progress, DataArgs, MechOpts, ModelArgs};

/// Seed of the train/test split and of synthetic data (as `recsel fit --seed`).
const DEFAULT_DATA_SEED: u64 = 42;

/// Run private selection mechanisms for every test user and report MSE and correlations.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel select --dataset synthetic --mech all --trials 20
  recsel select --dataset ml20m --mech mgem
  recsel select --format lightgcn --path ../shared/data/amazon-book-kgat --method icf --l2 20 \\
      --density 0.0005 --out out/amazon
  recsel select --dataset netflix --mech rnm,gem,mgem --eps 0.1,1,10 --gamma 0.0008

A run is resumable: rerunning the same command continues where it stopped; --force starts over.")]
pub struct Args {
    #[command(flatten)]
    data: DataArgs,
    /// Seed of the train/test split and of synthetic data (`recsel fit --seed`).
    #[arg(long, default_value_t = DEFAULT_DATA_SEED)]
    data_seed: u64,
    #[command(flatten)]
    model: ModelArgs,
    /// Mechanisms: `all` (the 13 of SPEC §1) or a comma-separated list.
    #[arg(long, default_value = "all")]
    mech: String,
    /// ε grid, comma separated (default: 0.01,0.02,0.05,0.1,0.2,0.5,1,2,4,8,16).
    #[arg(long, value_name = "LIST")]
    eps: Option<String>,
    /// Trials per (user, mechanism, ε).
    #[arg(long, default_value_t = 50)]
    trials: u32,
    /// Candidates per user (the user's top items by model score).
    #[arg(long, default_value_t = 500)]
    top: usize,
    /// Do not clip scores to each item's [p1, p99] range.
    #[arg(long)]
    no_clip: bool,
    #[command(flatten)]
    opts: MechOpts,
    /// Seed of the selection streams (default: the seed of a run being resumed, else OS entropy).
    #[arg(long, conflicts_with = "secure")]
    seed: Option<u64>,
    /// Release-grade selection: every mechanism's secure path (exact discrete noise, OS-seeded
    /// ChaCha20, no seed; docs/secure.md). Mechanisms without one are left out of `--mech all`.
    #[arg(long)]
    secure: bool,
    /// Output directory (default out/select-<dataset>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Directory of the saved model to use or create (default <out>/model).
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Discard results of an earlier run in --out and start over.
    #[arg(long)]
    force: bool,
    /// ε of the per-user mGEM/GEM scatter plot (fig 13 d–f).
    #[arg(long, default_value_t = 1.0)]
    scatter_eps: f64,
    /// Print one JSON object (MSE table and Spearman summary) instead of a table.
    #[arg(long)]
    json: bool,
}

/// Parses `recsel select` arguments (without program name and subcommand), as `recsel run` does
/// for a pipeline's [select] table.
pub fn parse(argv: &[String]) -> Result<Args, clap::Error> {
    #[derive(clap::Parser)]
    struct Select {
        #[command(flatten)]
        args: Args,
    }
    let full = std::iter::once("select".to_string()).chain(argv.iter().cloned());
    <Select as clap::Parser>::try_parse_from(full).map(|s| s.args)
}

/// The model scoring the test users from their input rows.
struct TestScorer<'a> {
    model: &'a Model,
    input: &'a Csr,
}

impl UserScorer for TestScorer<'_> {
    type Scratch = Scratch;
    fn n_users(&self) -> usize {
        self.input.rows()
    }
    fn n_items(&self) -> usize {
        self.model.n_items()
    }
    fn scratch(&self) -> Scratch {
        Scratch::new(self.model.n_items())
    }
    fn excluded(&self, user: usize) -> &[u32] {
        let ip = self.input.indptr();
        let r = ip.outer_inds_sz(user);
        &self.input.indices()[r]
    }
    fn score(&self, user: usize, out: &mut [f64], scratch: &mut Scratch) {
        self.model.score_into(self.excluded(user), out, scratch);
    }
}

/// The saved model in `dir` if it matches the data and hyperparameters, else a fresh fit saved
/// there.
fn model_for(dir: &Path, data: &Dataset, params: &model::ModelParams) -> anyhow::Result<Model> {
    if dir.join("model.json").exists() {
        match model::io::load(dir, Some(data.fingerprint())) {
            Ok((m, meta)) if meta.params == *params => {
                eprintln!("[select] using the saved model in {}", dir.display());
                return Ok(m);
            }
            Ok(_) => eprintln!(
                "[select] the model in {} has other hyperparameters; fitting a new one",
                dir.display()
            ),
            Err(e) => eprintln!(
                "[select] not using the model in {}: {e}; fitting a new one",
                dir.display()
            ),
        }
    } else {
        eprintln!("[select] no saved model in {}; fitting one", dir.display());
    }
    let (m, report) = model::fit(&data.train, params, &|s| eprintln!("[fit] {s} …"))
        .context("fitting the model")?;
    eprintln!("[select] fitted in {:.1} s", report.total_seconds());
    model::io::save(
        dir,
        &m,
        params,
        &data.name,
        data.fingerprint(),
        &data.item_ids,
    )
    .with_context(|| format!("saving the model to {}", dir.display()))?;
    Ok(m)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let src = args.data.source()?;
    let params = args.model.params()?;
    let specs = mechanisms::parse_list(&args.mech)?;
    let names: Vec<String> = specs
        .iter()
        .filter(|s| args.mech != "all" || s.name != "rs-exp")
        .filter(|s| !(args.secure && args.mech == "all" && matches!(s.name, "rnmh" | "rnmh-laplace")))
        .map(|s| s.name.to_string())
        .collect();
    let epsilons = match &args.eps {
        Some(e) => parse_f64_list("--eps", e)?,
        None => PAPER_EPSILONS.to_vec(),
    };
    eprintln!("[select] loading data");
    let data = load_dataset(&src, args.data_seed).context("loading the data")?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/select-{}", data.name)));
    report::ensure_dir(&out)?;
    let model_dir = args.model_dir.clone().unwrap_or_else(|| out.join("model"));
    let model = model_for(&model_dir, &data, &params)?;
    // The paper's γ per dataset (SPEC §1): 0.0008 for Netflix, 0.008 otherwise.
    let gamma = if data.name.contains("netflix") {
        0.0008
    } else {
        0.008
    };
    let mech_params = args.opts.apply(MechParams {
        gamma,
        ..MechParams::default()
    })?;
    let seed = match args.seed {
        Some(s) => s,
        None if args.secure => 0, // unused: the secure path has no seed
        None => match ChunkStore::stored_seed(&out) {
            Some(s) if !args.force => {
                eprintln!("[select] resuming with seed {s} from {}", out.display());
                s
            }
            _ => super::common::seed_or_entropy(None),
        },
    };
    let cfg = SelectConfig {
        mechanisms: names,
        params: mech_params,
        epsilons,
        trials: args.trials,
        top: args.top,
        clip: !args.no_clip,
        seed,
        source_fingerprint: source_fingerprint(&data, &params),
        noise: recsel::rng::NoiseMode::from_flag(args.secure),
    };
    if args.secure {
        super::common::announce_secure_mode();
    }
    cfg.build()?; // validate before the long work
    let scorer = TestScorer {
        model: &model,
        input: &data.test_input,
    };
    eprintln!(
        "[select] {}: {} test users, {} items; {} mechanisms × {} ε × {} trials",
        data.name,
        scorer.n_users(),
        scorer.n_items(),
        cfg.mechanisms.len(),
        cfg.epsilons.len(),
        cfg.trials
    );
    let bar = progress(scorer.n_users() as u64, "percentiles");
    let t = Instant::now();
    let sens = item_sensitivities(&scorer, &SensitivityConfig::default(), &|n| bar.inc(n));
    bar.finish_and_clear();
    let sens_s = t.elapsed().as_secs_f64();
    eprintln!("[select] item sensitivities in {sens_s:.1} s");
    let store = ChunkStore::open(&out, &cfg, args.force)?;
    let bar = progress(scorer.n_users() as u64, "selecting");
    let t = Instant::now();
    let (rows, skipped) = real::run_all(&scorer, &sens, &cfg, &store, &|n| bar.inc(n), None)?;
    bar.finish_and_clear();
    let select_s = t.elapsed().as_secs_f64();
    let spearman = real::spearman_summary(&rows);
    let mse = real::mse_table(&cfg, &rows);
    let run = SelectRun {
        dataset: &data.name,
        data_seed: args.data_seed,
        model: params,
        select: &cfg,
        scatter_eps: args.scatter_eps,
        users: rows.len(),
        users_without_candidates: skipped,
    };
    let files = write_outputs(&out, &data, &run, &rows, &mse, &spearman)?;
    let total_s = start.elapsed().as_secs_f64();
    let peak = super::fit::peak_rss_mb().unwrap_or(f64::NAN);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let obj = serde_json::json!({
            "dataset": data.name,
            "users": rows.len(),
            "users_without_candidates": skipped,
            "mse": mse,
            "spearman": spearman,
            "seed": cfg.seed,
            "sensitivity_seconds": sens_s,
            "selection_seconds": select_s,
            "total_seconds": total_s,
            "peak_rss_mb": peak,
            "out": out,
        });
        writeln!(stdout, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        stdout,
        "{}: {} users ({} without candidates), {} trials, seed {}",
        data.name,
        rows.len(),
        skipped,
        cfg.trials,
        cfg.seed
    )?;
    writeln!(
        stdout,
        "Spearman(scores, sensitivities) per user: mean {:.3}, median {:.3}, {:.1}% positive",
        spearman.mean,
        spearman.median,
        100.0 * spearman.share_positive
    )?;
    write!(stdout, "\n{:<13}", "MSE")?;
    for e in &cfg.epsilons {
        write!(stdout, " {:>9}", format!("eps={e}"))?;
    }
    writeln!(stdout)?;
    for (m, name) in cfg.mechanisms.iter().enumerate() {
        write!(stdout, "{name:<13}")?;
        for e in 0..cfg.epsilons.len() {
            write!(stdout, " {:>9.3e}", mse[m * cfg.epsilons.len() + e].mse)?;
        }
        writeln!(stdout)?;
    }
    writeln!(
        stdout,
        "\nsensitivities {sens_s:.1} s, selection {select_s:.1} s, total {total_s:.1} s, peak memory {peak:.0} MB"
    )?;
    for f in files {
        writeln!(stdout, "wrote {}", f.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Fingerprint of what the scores depend on: the data and the model hyperparameters.
fn source_fingerprint(data: &Dataset, params: &model::ModelParams) -> String {
    let text = serde_json::to_string(params).expect("parameters serialise");
    let mut h = data.fingerprint();
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Everything a `select` run depends on, recorded beside its results.
#[derive(Debug, serde::Serialize)]
struct SelectRun<'a> {
    dataset: &'a str,
    data_seed: u64,
    model: model::ModelParams,
    select: &'a SelectConfig,
    scatter_eps: f64,
    users: usize,
    users_without_candidates: u64,
}

/// Users shown in the per-user scatter plot (seed 001 fig 13 shows 10,000 random test users).
const SCATTER_USERS: usize = 10_000;

/// Writes the MSE table, the per-user table, the resolved configuration and the plots.
fn write_outputs(
    out: &Path,
    data: &Dataset,
    run: &SelectRun<'_>,
    rows: &[real::UserRow],
    mse: &[real::MseRow],
    summary: &real::SpearmanSummary,
) -> anyhow::Result<Vec<PathBuf>> {
    use recsel::report::table::{Table, Values};
    let cfg = run.select;
    let mut files = Vec::new();
    let t = Table::default()
        .with("dataset", Values::Str(vec![data.name.clone(); mse.len()]))
        .with(
            "mechanism",
            Values::Str(mse.iter().map(|r| r.mechanism.clone()).collect()),
        )
        .with(
            "private",
            Values::Bool(mse.iter().map(|r| r.private).collect()),
        )
        .with(
            "epsilon",
            Values::F64(mse.iter().map(|r| r.epsilon).collect()),
        )
        .with("mse", Values::F64(mse.iter().map(|r| r.mse).collect()))
        .with("se", Values::F64(mse.iter().map(|r| r.se).collect()))
        .with("users", Values::U64(mse.iter().map(|r| r.users).collect()))
        .with(
            "trials",
            Values::U64(mse.iter().map(|r| u64::from(r.trials)).collect()),
        );
    files.extend(t.write(out, "mse")?);
    let f = |g: fn(&real::UserRow) -> f64| Values::F64(rows.iter().map(g).collect());
    let mut t = Table::default()
        .with(
            "user",
            Values::Str(
                rows.iter()
                    .map(|r| {
                        data.test_user_ids
                            .get(r.user as usize)
                            .cloned()
                            .unwrap_or_else(|| r.user.to_string())
                    })
                    .collect(),
            ),
        )
        .with(
            "candidates",
            Values::U64(rows.iter().map(|r| u64::from(r.candidates)).collect()),
        )
        .with("spearman", f(|r| r.spearman))
        .with("pearson", f(|r| r.pearson))
        .with("weighted", f(|r| r.weighted))
        .with("max_score", f(|r| r.max_score));
    let ne = cfg.epsilons.len();
    for (what, pick) in [("mean", true), ("mse", false)] {
        for (m, name) in cfg.mechanisms.iter().enumerate() {
            for (e, eps) in cfg.epsilons.iter().enumerate() {
                let i = m * ne + e;
                let v = rows
                    .iter()
                    .map(|r| if pick { r.mean_selected[i] } else { r.mse[i] })
                    .collect();
                t = t.with(format!("{what}_{name}_eps{eps}"), Values::F64(v));
            }
        }
    }
    files.extend(t.write(out, "users")?);
    files.extend(report::Resolved::new("select", run).write(out)?);
    // Plots (seed 001 fig 13 a–i and fig 21).
    let title = &data.name;
    let spearman: Vec<f64> = rows.iter().map(|r| r.spearman).collect();
    let p = out.join("fig13_spearman.png");
    plot::spearman_hist_png(&p, title, &spearman, summary)?;
    files.push(p);
    let as_plot_rows = |keep: &dyn Fn(&str) -> bool| -> Vec<SynthMseRow> {
        mse.iter()
            .filter(|r| keep(&r.mechanism))
            .map(|r| SynthMseRow {
                scenario: data.name.clone(),
                mechanism: r.mechanism.clone(),
                private: r.private,
                epsilon: r.epsilon,
                mse: r.mse,
                se: r.se,
                trials: r.users * u64::from(r.trials),
            })
            .collect()
    };
    let p = out.join("fig13_mse.png");
    plot::mse_vs_eps_png(
        &p,
        &format!(
            "{title}: MSE of the selected score vs the best, {} users x {} trials",
            rows.len(),
            cfg.trials
        ),
        &as_plot_rows(&|_| true),
    )?;
    files.push(p);
    let pos = |name: &str| cfg.mechanisms.iter().position(|m| m == name);
    if let (Some(g), Some(mg)) = (pos("gem"), pos("mgem")) {
        // The grid point nearest to the requested ε (log scale).
        let e = (0..ne)
            .min_by(|&a, &b| {
                let d = |i: usize| (cfg.epsilons[i] / run.scatter_eps).ln().abs();
                d(a).total_cmp(&d(b))
            })
            .expect("non-empty grid");
        let step = rows.len().div_ceil(SCATTER_USERS).max(1);
        let (mut points, mut left_out) = (Vec::new(), 0u64);
        for r in rows.iter().step_by(step) {
            let (a, b) = (r.mean_selected[mg * ne + e], r.mean_selected[g * ne + e]);
            if a > 0.0 && b > 0.0 {
                points.push((r.spearman, (a / b).ln()));
            } else {
                left_out += 1;
            }
        }
        let p = out.join("fig13_logratio.png");
        plot::logratio_png(&p, title, &points, left_out, cfg.epsilons[e])?;
        files.push(p);
        if pos("cgem").is_some() {
            let p = out.join("fig21_cgem.png");
            plot::mse_vs_eps_png(
                &p,
                &format!("{title}: combined GEM vs GEM and mGEM"),
                &as_plot_rows(&|m| matches!(m, "cgem" | "gem" | "mgem")),
            )?;
            files.push(p);
        }
    }
    Ok(files)
}
