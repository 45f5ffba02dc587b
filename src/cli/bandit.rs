//! `recsel bandit`: the two-armed bandit under distribution shift of seed 001 §IX and appendix H
//! (figure 14; `docs/bandit.md`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use recsel::experiments::bandit::{self, env::Arms, BanditConfig};
use recsel::report;

use recsel::mechanisms::MechValues;

use super::common::{positive, progress, seed_or_entropy, Flags};

/// Bandit under distribution shift: non-private UCB / UCB1 / Thompson sampling against private
/// learners (hybrid-counter means, exponential-mechanism quantiles, a selection mechanism per
/// step). Tables, figure 14 a-d and the privacy budget of every learner in --out.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  recsel bandit --seed 1 --out out/fig14\n  \
    recsel bandit --policies ucb,thompson,private-greedy,rnm,gem,mgem --runs 10 --seed 2 --json\n  \
    recsel bandit --oracle-stats --policies mgem,gem,rnm --seed 1 --out out/fig14-oracle\n  \
    recsel bandit --arms arms.toml --horizon 20000 --shift 10000 --seed 3\n\n\
    An arms file has two tables with one entry per arm:\n  \
    [before]\n  means = [0.2, 0.5, 0.8]\n  sigmas = [0.1, 0.2, 0.3]\n  \
    [after]\n  means = [0.8, 0.5, 0.2]\n  sigmas = [0.3, 0.2, 0.1]")]
pub struct Args {
    /// Steps T.
    #[arg(long, default_value_t = 50_000)]
    horizon: u64,
    /// The arms change after this step.
    #[arg(long, default_value_t = 30_000)]
    shift: u64,
    /// Independent runs per policy (mean and 95% band).
    #[arg(long, default_value_t = 20)]
    runs: u32,
    /// `all` or a comma-separated list: ucb (appendix H, ln T), ucb1 (ln t), thompson,
    /// private-greedy, or mechanism names (rnm, gem, mgem, cgem, rs, rs-tnb, krr, random, ...);
    /// NAME+oracle runs a private learner on exact statistics.
    #[arg(long, default_value = "all")]
    policies: String,
    /// Also run every private learner with exact (non-private) means and quantiles.
    #[arg(long)]
    oracle_stats: bool,
    /// Quantiles of an arm are re-estimated after every W new rewards of it.
    #[arg(long, default_value_t = 200, value_name = "W")]
    window: usize,
    /// ε_S of each selection (krr uses --eps-krr).
    #[arg(long, default_value_t = 1.0, value_name = "E")]
    eps_select: f64,
    /// ε_S of krr (the paper: 4).
    #[arg(long, default_value_t = 4.0, value_name = "E")]
    eps_krr: f64,
    /// ε_M of each arm's private reward sum.
    #[arg(long, default_value_t = 1.0, value_name = "E")]
    eps_mean: f64,
    /// ε_p of each released (p10, p90) pair.
    #[arg(long, default_value_t = 1.0, value_name = "E")]
    eps_quantile: f64,
    /// The private quantile: `em` (exponential mechanism over the gaps between rewards) or `duff`
    /// (Duff's dataset-based utility on a 0.001 grid; docs/bandit.md).
    #[arg(long, default_value = "em", value_parser = ["em", "duff"])]
    quantile: String,
    /// Optimism α of the UCB bonus α·sqrt(ln T / N_t(a)).
    #[arg(long, default_value_t = std::f64::consts::SQRT_2, value_name = "A")]
    alpha: f64,
    /// Add the UCB bonus to the private means of the private learners.
    #[arg(long)]
    private_bonus: bool,
    /// Clamp private means to the reward range [0, 1].
    #[arg(long)]
    clamp_means: bool,
    /// Arms file (TOML, see below; default: the paper's two arms).
    #[arg(long, value_name = "FILE")]
    arms: Option<PathBuf>,
    /// Points of the downsampled curves.
    #[arg(long, default_value_t = 500)]
    points: usize,
    #[command(flatten)]
    params: Flags<MechValues>,
    /// Seed of every random stream (default: drawn from OS entropy and reported on stderr).
    #[arg(long)]
    seed: Option<u64>,
    /// Output folder.
    #[arg(long, value_name = "DIR", default_value = "out/bandit")]
    out: PathBuf,
    /// Print exactly one JSON object {"horizon","shift","runs","seed","policies":[...]} on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plots: super::common::PlotArgs,
}

fn config(args: &Args) -> anyhow::Result<BanditConfig> {
    let arms = match &args.arms {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading the arms file {}", p.display()))?;
            Arms::parse(&text, &p.display().to_string())?
        }
        None => Arms::default(),
    };
    let mut cfg = BanditConfig {
        horizon: positive("--horizon", args.horizon)?,
        shift: args.shift,
        runs: args.runs,
        policies: args.policies.clone(),
        oracle_stats: args.oracle_stats,
        window: args.window,
        eps_select: args.eps_select,
        eps_krr: args.eps_krr,
        eps_mean: args.eps_mean,
        eps_quantile: args.eps_quantile,
        quantile: bandit::duff::QuantileMethod::from_name(&args.quantile)?,
        alpha: args.alpha,
        private_bonus: args.private_bonus,
        clamp_means: args.clamp_means,
        points: args.points,
        arms,
        seed: seed_or_entropy(args.seed),
        ..BanditConfig::default()
    };
    cfg.params = cfg.params.merged(&args.params.0);
    Ok(cfg)
}

/// Runs `cfg` and writes its outputs into `out`.
pub fn execute(cfg: &BanditConfig, out: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let cfg = &cfg.resolved().context("invalid bandit configuration")?;
    let bar = progress(bandit::work_units(cfg)?, "bandit");
    let res = bandit::run(cfg, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let files = report::bandit::write_bandit(out, cfg, &res)
        .with_context(|| format!("writing results to {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    if json {
        let policies: Vec<_> = res
            .summaries
            .iter()
            .map(|s| {
                serde_json::json!({
                    "policy": s.policy,
                    "private": s.private,
                    "epsilon_total": s.epsilon_total,
                    "final_reward_mean": s.final_reward_mean,
                    "final_reward_se": s.final_reward_se,
                    "regret_mean": s.regret_mean,
                    "accounting": s.accounting,
                })
            })
            .collect();
        let obj = serde_json::json!({
            "horizon": cfg.horizon,
            "shift": cfg.shift,
            "runs": cfg.runs,
            "seed": cfg.seed,
            "policies": policies,
        });
        writeln!(stdout, "{obj}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        stdout,
        "bandit: {} arms, T = {}, shift after t = {}, {} runs per policy, seed {}",
        cfg.arms.len(),
        cfg.horizon,
        cfg.shift,
        cfg.runs,
        cfg.seed
    )?;
    writeln!(
        stdout,
        "{:<20} {:>7} {:>9} {:>20} {:>16} {:>16} {:>10} {:>8}",
        "policy",
        "eps",
        "eps_event",
        "final reward ± s.e.",
        "regret ± s.e.",
        "after shift",
        "best share",
        "adapt"
    )?;
    for s in &res.summaries {
        let (eps, ev) = match &s.accounting {
            Some(a) => (
                format!("{:.3}", a.epsilon_total),
                format!("{:.3}", a.epsilon_event),
            ),
            None => ("-".into(), "-".into()),
        };
        writeln!(
            stdout,
            "{:<20} {:>7} {:>9} {:>11.1} ± {:>6.1} {:>8.1} ± {:>5.1} {:>8.1} ± {:>5.1} {:>10.3} {:>8.0}",
            s.policy,
            eps,
            ev,
            s.final_reward_mean,
            s.final_reward_se,
            s.regret_mean,
            s.regret_se,
            s.reward_after_shift_mean,
            s.reward_after_shift_se,
            s.best_share_after_shift,
            s.adapt_steps_mean
        )?;
    }
    writeln!(
        stdout,
        "privacy (docs/bandit.md): eps = k*eps_M + k*eps_p + eps_S (the paper's sum; eps_M = {} per \
         arm, eps_p = {} per (p{:.0}, p{:.0}) pair per window of {}, eps_S = {} per step, krr {}); \
         eps_event = one reward replaced, whole transcript",
        cfg.eps_mean,
        cfg.eps_quantile,
        100.0 * cfg.q_lo,
        100.0 * cfg.q_hi,
        cfg.window,
        cfg.eps_select,
        cfg.eps_krr
    )?;
    writeln!(stdout, "wrote {} files to {}", files.len(), out.display())?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.plots.apply();
    let cfg = config(&args)?;
    execute(&cfg, &args.out, args.json)
}
