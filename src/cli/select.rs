//! `recsel select`: private top-1 selection for every test user (docs/protocol.md, steps 5–9, seed 001 fig 13).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use recsel::experiments::select::{self, Placement, SelectJob, SelectOptions};
use recsel::mechanisms::Registry;
use recsel::report::select::{dump_problems, finish, write_paired, Print, Timings};
use recsel::scoring::{
    item_sensitivities, item_sensitivities_with_candidates, ModelScorer, SensitivityConfig,
    UserScorer,
};

use super::common::{progress, Flags};

/// Run private selection mechanisms for every test user and report MSE and correlations.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  recsel select --dataset synthetic --mech all --trials 20
  recsel select --dataset ml20m --mech mgem
  recsel select --format lightgcn --path ../shared/data/amazon-book-kgat --method icf --l2 20 \\
      --density 0.0005 --out out/amazon
  recsel select --dataset netflix --mech rnm,gem,mgem --eps 0.1,1,10 --gamma 0.0008

A run is resumable: rerunning the same command continues where it stopped; --force starts over.
The options are the keys of a pipeline's [select] table (with _ for -, `mechanisms` for --mech and
`epsilons` for --eps); the run's config.toml records them all and reruns it with `recsel run`.")]
pub struct Args {
    #[command(flatten)]
    options: Flags<SelectOptions>,
    #[command(flatten)]
    controls: Controls,
}

/// What a run does with its results, beside the job's options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Controls {
    /// Output directory (default out/select-<dataset>).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// Also write every user's problem (candidate ids, scores, Δ) to FILE.parquet and .csv.
    #[arg(long, value_name = "FILE.parquet", help_heading = "Output")]
    pub dump_problems: Option<PathBuf>,
    /// Add these mechanisms to the finished run in --out (same options otherwise): runs only
    /// them and reports their per-user MSE differences against the run's mechanisms.
    #[arg(
        long,
        value_name = "LIST",
        conflicts_with = "force",
        help_heading = "Output"
    )]
    pub add_mech: Option<String>,
    /// Discard results of an earlier run in --out and start over.
    #[arg(long, help_heading = "Output")]
    pub force: bool,
    /// Print one JSON object (MSE table, Spearman summary, clipping, "diagnostics", scatter
    /// counts, rules) instead of a table.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Print everything: the diagnostics, the MSE/random and hit@1 tables and every file.
    #[arg(long, help_heading = "Output")]
    pub verbose: bool,
    #[command(flatten)]
    pub plots: super::common::PlotArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    execute(&args.options.0, &args.controls)
}

/// Runs the select job of `options` (from the command line, or a pipeline's `[select]` table).
pub fn execute(options: &SelectOptions, c: &Controls) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    c.plots.apply();
    let placement = Placement {
        out: c.out.clone(),
        resume: !c.force,
    };
    let registry = Registry::builtin();
    let job = SelectJob::prepare(options, &placement, &registry, &|s| {
        eprintln!("[select] {s}")
    })?;
    let (cfg, data) = (&job.config, &job.data);
    if cfg.noise.is_secure() {
        super::common::announce_secure_mode();
    }
    let scorer = ModelScorer::new(&job.model, &data.test_input).with_targets(&data.test_target);
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
    if let Some(p) = &c.dump_problems {
        let files = dump_problems(p, &scorer, &sens, cfg, data)?;
        eprintln!(
            "[select] wrote {} and {}",
            files[1].display(),
            files[0].display()
        );
    }
    let bar = progress(scorer.n_users() as u64, "selecting");
    let (t, n_old, out) = (Instant::now(), cfg.mechanisms.len(), job.out());
    let add = c.add_mech.as_deref();
    let inc = |n| bar.inc(n);
    let done = select::run_or_add(&scorer, &sens, cfg, out, c.force, add, &inc, Some(&cache))?;
    drop(cache);
    bar.finish_and_clear();
    let select_s = t.elapsed().as_secs_f64();
    // Analysis (docs/real-data.md): from the candidate pass the selection made as it went.
    let t = Instant::now();
    let (counts, sample) = (done.counts, done.sample);
    let analysis =
        select::analysis_from(&done.cfg, &sens, sens_cfg.floor, counts, sample, &done.rows);
    let timings = Timings {
        sensitivity_seconds: sens_s,
        selection_seconds: select_s,
        diagnostics_seconds: t.elapsed().as_secs_f64(),
        total_seconds: start.elapsed().as_secs_f64(),
    };
    let print = Print {
        json: c.json,
        verbose: c.verbose,
    };
    let text = finish(
        &job,
        &done.cfg,
        &done.rows,
        done.skipped,
        &analysis,
        &sens,
        &timings,
        print,
    )
    .with_context(|| format!("writing the results into {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{text}")?;
    if c.add_mech.is_some() && !c.json {
        write!(
            stdout,
            "{}",
            write_paired(out, &done.cfg, &done.rows, n_old)?
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
