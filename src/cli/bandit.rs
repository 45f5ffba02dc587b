//! `recsel bandit`: the two-armed bandit under distribution shift of seed 001 §IX and appendix H
//! (figure 14; `docs/bandit.md`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use recsel::experiments::bandit::{self, env::Arms, BanditConfig, BanditOptions};
use recsel::report;

use super::common::{progress, seed_or_entropy, Flags};

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
    #[command(flatten)]
    options: Flags<BanditOptions>,
    /// Arms file (TOML, see below; default: the paper's two arms).
    #[arg(long, value_name = "FILE", help_heading = "Bandit")]
    arms: Option<PathBuf>,
    /// Output folder.
    #[arg(long, value_name = "DIR", default_value = "out/bandit")]
    out: PathBuf,
    /// Print exactly one JSON object {"horizon","shift","runs","seed","policies":[...]} on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plots: super::common::PlotArgs,
}

/// The options of the command line, with the arms of `--arms` if given.
fn options(args: &Args) -> anyhow::Result<BanditOptions> {
    let mut options = args.options.0.clone();
    if let Some(p) = &args.arms {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("reading the arms file {}", p.display()))?;
        options.arms = Arms::parse(&text, &p.display().to_string())?;
    }
    Ok(options)
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
    let cfg = options(&args)?.config(|| seed_or_entropy(None));
    execute(&cfg, &args.out, args.json)
}
