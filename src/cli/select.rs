//! `recsel select`: private top-1 selection for every test user (docs/protocol.md, steps 5–9, seed 001 fig 13).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::data::load_dataset_with;
use recsel::experiments::real::{self, ChunkStore, SelectConfig, PAPER_EPSILONS};
use recsel::mechanisms::{self, MechParams};
use recsel::report::select::{dump_problems, finish_select, write_paired, SelectRun, Timings};
use recsel::scoring::{
    item_sensitivities, item_sensitivities_with_candidates, CandidatePolicy, ModelScorer,
    PercentileUsers, ResolvedPolicy, SensitivityConfig, UserScorer,
};

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
    pub(super) data: DataArgs,
    /// Seed of the train/test split and of synthetic data (`recsel fit --seed`).
    #[arg(long, default_value_t = DEFAULT_DATA_SEED)]
    data_seed: u64,
    #[command(flatten)]
    model: ModelArgs,
    /// Mechanisms: `all` (the 14 of docs/mechanisms.md) or a comma-separated list.
    #[arg(long, default_value = "all")]
    pub(super) mech: String,
    /// ε grid, comma separated (default: 0.01,0.02,0.05,0.1,0.2,0.5,1,2,4,8,16).
    #[arg(long, value_name = "LIST")]
    pub(super) eps: Option<String>,
    /// Trials per (user, mechanism, ε).
    #[arg(long, default_value_t = 50)]
    trials: u32,
    /// Candidates per user (the user's top items by model score, own items excluded: the paper's
    /// protocol, `--candidates history-top:N`).
    #[arg(long, default_value_t = 500)]
    top: usize,
    /// Candidate policy: history-top:N (the paper's, the default with N = --top), all (every
    /// item, the user's own included), popular:N (the N most popular training items) or
    /// pool:FILE (item ids, one per line). With a policy that keeps the history the tables also
    /// report how often the pick was already the user's.
    #[arg(long, value_name = "POLICY", conflicts_with = "top")]
    candidates: Option<String>,
    /// Clip every candidate score to its item's [p1, p99] range, so that Δ_j bounds how far one
    /// user can move it: only a clipped run is a DP release. Off by default, as in the paper's
    /// text (seed 001 clips only its synthetic scores).
    #[arg(long, overrides_with = "no_clip")]
    clip: bool,
    /// Do not clip (the default): Δ_j is then an estimate of the spread, not a bound.
    #[arg(long, overrides_with = "clip")]
    no_clip: bool,
    /// Whose scores the per-item percentiles are taken over: `all` test users (the paper's text,
    /// default) or only those `without-item`, to whom it can be recommended.
    #[arg(long, default_value = "all", value_parser = ["all", "without-item"])]
    percentile_users: String,
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
    /// Also write every user's problem (candidate ids, scores, Δ) to FILE.parquet and .csv.
    #[arg(long, value_name = "FILE.parquet")]
    dump_problems: Option<PathBuf>,
    /// Add these mechanisms to the finished run in --out (same options otherwise): runs only
    /// them and reports their per-user MSE differences against the run's mechanisms.
    #[arg(long, value_name = "LIST", conflicts_with = "force")]
    add_mech: Option<String>,
    /// Discard results of an earlier run in --out and start over.
    #[arg(long)]
    force: bool,
    /// ε of the per-user mGEM/GEM scatter plot (fig 13 d–f).
    #[arg(long, default_value_t = 1.0)]
    scatter_eps: f64,
    /// Print one JSON object (MSE table, Spearman summary, clipping, "diagnostics", scatter counts,
    /// rules) instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let src = args.data.source()?;
    let load_opts = args.data.load_options()?;
    let names = mechanisms::Registry::builtin().run_names(&args.mech, args.secure)?;
    let eps = args.eps.as_deref().map(|e| parse_f64_list("--eps", e));
    let epsilons = eps.unwrap_or_else(|| Ok(PAPER_EPSILONS.to_vec()))?;
    eprintln!("[select] loading data");
    let mut data =
        load_dataset_with(&src, args.data_seed, &load_opts).context("loading the data")?;
    let params = args.model.params(&data.descriptor)?;
    let default_out = PathBuf::from(format!("out/select-{}", data.name()));
    let out = args.out.clone().unwrap_or(default_out);
    recsel::io::ensure_dir(&out)?;
    let model_dir = args.model_dir.clone().unwrap_or_else(|| out.join("model"));
    let model = real::model_for(&model_dir, &data, &params, &|s| eprintln!("[select] {s}"))
        .with_context(|| format!("preparing the model in {}", model_dir.display()))?;
    // The paper's γ for this data set (its descriptor; docs/protocol.md, "Data sets").
    let mech_params = args.opts.apply(MechParams {
        gamma: data.descriptor.gamma(),
        ..MechParams::default()
    })?;
    let origin = ["the paper's for this data set", "given"][args.opts.gamma.is_some() as usize];
    let (g, b) = (mech_params.gamma, mech_params.beta);
    eprintln!("[select] random stopping γ = {g} ({origin}), GEM β = {b}");
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
    // The paper's candidates are `top` alone (so its runs keep their configuration and outputs);
    // another policy is resolved against the data's items and training popularity.
    let (top, candidates) = match args.candidates.as_deref().map(CandidatePolicy::parse) {
        None => (args.top, None),
        Some(p) => match p.context("--candidates")? {
            CandidatePolicy::HistoryTop(n) => (n, None),
            policy => {
                let index: std::collections::HashMap<&str, u32> = data
                    .item_ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| (id.as_str(), j as u32))
                    .collect();
                let pop = recsel::scoring::policy::popularity(&data.train);
                let list = policy
                    .resolve_with(
                        data.n_items(),
                        Some(&pop),
                        data.heldout_popularity.as_deref(),
                        &|id| index.get(id).copied(),
                    )
                    .context("--candidates")?;
                eprintln!(
                    "[select] candidates: {policy} ({} items, the same for every user, the \
                     user's own included)",
                    list.k(data.n_items())
                );
                (
                    list.k(data.n_items()),
                    Some(ResolvedPolicy { policy, list }),
                )
            }
        },
    };
    let cfg = SelectConfig {
        mechanisms: names,
        params: mech_params,
        epsilons,
        trials: args.trials,
        top,
        candidates,
        clip: args.clip && !args.no_clip,
        percentile_users: PercentileUsers::from_name(&args.percentile_users)?,
        seed,
        source_fingerprint: real::source_fingerprint(&data, &params),
        noise: recsel::rng::NoiseMode::from_flag(args.secure),
        registry: Default::default(),
    };
    // The public baselines' inputs (docs/utility.md): training popularity, and the calibration
    // users' held-out items when the split has calibration users.
    let popularity = recsel::scoring::policy::popularity(&data.train);
    let calibration = recsel::data::calibration_users(&data, args.data_seed)
        .map(|c| recsel::scoring::policy::popularity(&c.heldout));
    data.release_training_rows(); // the model and the fingerprints are made
    if args.secure {
        super::common::announce_secure_mode();
    }
    cfg.build()?; // validate before the long work
    let scorer = ModelScorer::new(&model, &data.test_input).with_targets(&data.test_target);
    eprintln!(
        "[select] {}: {} test users, {} items; {} mechanisms × {} ε × {} trials",
        data.name(),
        scorer.n_users(),
        scorer.n_items(),
        cfg.mechanisms.len(),
        cfg.epsilons.len(),
        cfg.trials
    );
    let bar = progress(scorer.n_users() as u64, "percentiles");
    let t = Instant::now();
    let sens_cfg = SensitivityConfig::default().with_population(cfg.percentile_users);
    // The pass keeps the paper's candidates for the selection; another policy's are rebuilt.
    let (sens, cache) = match cfg.candidates {
        None => item_sensitivities_with_candidates(&scorer, &sens_cfg, cfg.top, &|n| bar.inc(n)),
        Some(_) => (
            item_sensitivities(&scorer, &sens_cfg, &|n| bar.inc(n)),
            Default::default(),
        ),
    };
    bar.finish_and_clear();
    let sens_s = t.elapsed().as_secs_f64();
    eprintln!("[select] item sensitivities in {sens_s:.1} s");
    if let Some(p) = &args.dump_problems {
        let files = dump_problems(p, &scorer, &sens, &cfg, &data)?;
        eprintln!(
            "[select] wrote {} and {}",
            files[1].display(),
            files[0].display()
        );
    }
    let bar = progress(scorer.n_users() as u64, "selecting");
    let (t, n_old, add) = (
        Instant::now(),
        cfg.mechanisms.len(),
        args.add_mech.as_deref(),
    );
    let inc = |n| bar.inc(n);
    let real::Finished {
        cfg,
        rows,
        skipped,
        counts,
        sample,
    } = real::run_or_add(
        &scorer,
        &sens,
        &cfg,
        &out,
        args.force,
        add,
        &inc,
        Some(&cache),
    )?;
    drop(cache);
    bar.finish_and_clear();
    let select_s = t.elapsed().as_secs_f64();
    // Analysis (docs/real-data.md): from the candidate pass the selection made as it went.
    let t = Instant::now();
    let analysis = real::analysis_from(&cfg, &sens, sens_cfg.floor, counts, sample, &rows);
    let diag_s = t.elapsed().as_secs_f64();
    let run = SelectRun {
        dataset: data.name(),
        data_seed: args.data_seed,
        model: params,
        select: &cfg,
        scatter_eps: args.scatter_eps,
        users: rows.len(),
        users_without_candidates: skipped,
        source: Some((&src, &load_opts, &model_dir)),
    };
    let timings = Timings {
        sensitivity_seconds: sens_s,
        selection_seconds: select_s,
        diagnostics_seconds: diag_s,
        total_seconds: start.elapsed().as_secs_f64(),
    };
    let (ids, items) = (&data.test_user_ids, &data.item_ids);
    let text = finish_select(
        &out, &run, &rows, &analysis, &sens, ids, items, &timings, args.json,
    )
    .with_context(|| format!("writing the results into {}", out.display()))?;
    let text = recsel::experiments::baselines::add_to_summary(
        &scorer,
        &cfg,
        &rows,
        &popularity,
        calibration.as_deref(),
        &out,
        text,
        args.json,
    )?;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{text}")?;
    if args.add_mech.is_some() && !args.json {
        write!(stdout, "{}", write_paired(&out, &cfg, &rows, n_old)?)?;
    }
    Ok(ExitCode::SUCCESS)
}
