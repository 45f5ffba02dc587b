//! Running the learners: one (policy, run) step by step against the environment, every run in
//! parallel, and the summaries over runs (means with standard errors, t bands).

use rayon::prelude::*;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::counter::HybridCounter;
use super::duff::PrivateQuantile;
use super::env::{Environment, REWARD_HI, REWARD_LO};
use super::{
    ArmPoint, BanditConfig, BanditResults, CurvePoint, Policy, PolicyKind, PolicySummary, RunRow,
    RunTrace, SENS_FLOOR, STREAM_LABEL,
};
use crate::error::Result;
use crate::mechanisms::{argmax_random_ties, Problem};
use crate::numerics::{mean_se, percentile_linear};
use crate::rng::{name_id, Rng, Streams};

/// Total steps of `cfg` over all policies and runs, for a progress bar.
pub fn work_units(cfg: &BanditConfig) -> Result<u64> {
    Ok(cfg.policy_names()?.len() as u64 * u64::from(cfg.runs) * cfg.horizon)
}

/// Steps between progress reports.
const PROGRESS_STEP: u64 = 5_000;

/// The learner's per-arm state.
struct ArmState {
    pulls: Vec<u64>,
    exact_sum: Vec<f64>,
    counters: Vec<HybridCounter>,
    /// The sum the learner sees (private release or exact).
    seen_sum: Vec<f64>,
    windows: Vec<Vec<f64>>,
    q_lo: Vec<f64>,
    q_hi: Vec<f64>,
    sens: Vec<f64>,
}

/// Runs one (policy, run) and returns its trace.
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    cfg: &BanditConfig,
    env: &Environment,
    policy: &Policy,
    grid: &[u64],
    run: u32,
    rng: &mut Rng,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<RunTrace> {
    let k = env.arms();
    let private = policy.private_stats();
    let quantile =
        PrivateQuantile::new(cfg.quantile, cfg.eps_quantile / 2.0, REWARD_LO, REWARD_HI)?;
    let counter = HybridCounter::new(cfg.eps_mean, REWARD_HI - REWARD_LO)?;
    let mut st = ArmState {
        pulls: vec![0; k],
        exact_sum: vec![0.0; k],
        counters: vec![counter; k],
        seen_sum: vec![0.0; k],
        windows: vec![Vec::with_capacity(cfg.window); k],
        q_lo: vec![f64::NAN; k],
        q_hi: vec![f64::NAN; k],
        sens: vec![cfg.warmup_sensitivity; k],
    };
    let g = grid.len();
    let mut trace = RunTrace {
        run,
        cum_reward: Vec::with_capacity(g),
        cum_regret: Vec::with_capacity(g),
        mean_est: Vec::with_capacity(g * k),
        q_lo: Vec::with_capacity(g * k),
        q_hi: Vec::with_capacity(g * k),
        pulls: Vec::with_capacity(g * k),
        quantile_pairs: 0,
        reward_after_shift: 0.0,
    };
    let ln_horizon = (cfg.horizon as f64).ln();
    let mut scores = vec![0.0; k];
    let mut cum_reward = 0.0;
    let mut cum_regret = 0.0;
    let mut next_grid = 0usize;
    let mean_of = |st: &ArmState, a: usize| -> f64 {
        let m = st.seen_sum[a] / st.pulls[a] as f64;
        if cfg.clamp_means {
            m.clamp(REWARD_LO, REWARD_HI)
        } else {
            m
        }
    };
    let bonus = |n: u64, ln: f64| cfg.alpha * (ln / n as f64).sqrt();
    for t in 1..=cfg.horizon {
        // Warm-up (docs/bandit.md, "Warm-up"): every learner except Thompson sampling and
        // `random` pulls each arm once, in order — a data-independent schedule.
        let warm = t <= k as u64 && policy.uses_means && policy.kind != PolicyKind::Thompson;
        let a = if warm {
            (t - 1) as usize
        } else {
            match policy.kind {
                PolicyKind::Ucb | PolicyKind::Ucb1 => {
                    let ln = if policy.kind == PolicyKind::Ucb {
                        ln_horizon
                    } else {
                        ((t - 1) as f64).ln()
                    };
                    for (a, s) in scores.iter_mut().enumerate() {
                        *s = mean_of(&st, a) + bonus(st.pulls[a], ln);
                    }
                    argmax_random_ties(k, rng, |a, _| scores[a])
                }
                PolicyKind::Thompson => {
                    use rand_distr::{Distribution, StandardNormal};
                    for (a, s) in scores.iter_mut().enumerate() {
                        let n1 = st.pulls[a] as f64 + 1.0;
                        let z: f64 = StandardNormal.sample(rng);
                        *s = st.exact_sum[a] / n1 + z / n1.sqrt();
                    }
                    argmax_random_ties(k, rng, |a, _| scores[a])
                }
                PolicyKind::PrivateGreedy | PolicyKind::Mechanism => {
                    if policy.uses_means {
                        for (a, s) in scores.iter_mut().enumerate() {
                            *s = mean_of(&st, a);
                            if cfg.private_bonus {
                                *s += bonus(st.pulls[a], ln_horizon);
                            }
                        }
                    }
                    match &policy.mechanism {
                        None => argmax_random_ties(k, rng, |a, _| scores[a]),
                        Some(m) => {
                            let problem = Problem::new(&scores, &st.sens)?;
                            m.select(&problem, rng)
                        }
                    }
                }
            }
        };
        let r = env.reward(a, t, rng);
        cum_reward += r;
        if env.phase_of(t) == 1 {
            trace.reward_after_shift += r;
        }
        cum_regret += env.expected(env.best_arm(t), t) - env.expected(a, t);
        st.pulls[a] += 1;
        st.exact_sum[a] += r;
        st.seen_sum[a] = if private && policy.uses_means {
            st.counters[a].push(r, rng)
        } else {
            st.exact_sum[a]
        };
        if policy.uses_quantiles {
            st.windows[a].push(r);
            if st.windows[a].len() == cfg.window {
                let (lo, hi) = if private {
                    quantile.sample_pair(&st.windows[a], cfg.q_lo, cfg.q_hi, rng)
                } else {
                    let w = &mut st.windows[a];
                    w.sort_by(f64::total_cmp);
                    (
                        percentile_linear(w, 100.0 * cfg.q_lo),
                        percentile_linear(w, 100.0 * cfg.q_hi),
                    )
                };
                st.q_lo[a] = lo;
                st.q_hi[a] = hi;
                st.sens[a] = (hi - lo).abs().max(SENS_FLOOR);
                st.windows[a].clear();
                trace.quantile_pairs += 1;
            }
        }
        if next_grid < g && grid[next_grid] == t {
            trace.cum_reward.push(cum_reward);
            trace.cum_regret.push(cum_regret);
            for a in 0..k {
                trace.mean_est.push(if st.pulls[a] > 0 {
                    mean_of(&st, a)
                } else {
                    f64::NAN
                });
                trace.q_lo.push(st.q_lo[a]);
                trace.q_hi.push(st.q_hi[a]);
                trace.pulls.push(st.pulls[a]);
            }
            next_grid += 1;
        }
        if t % PROGRESS_STEP == 0 {
            progress(PROGRESS_STEP);
        }
    }
    progress(cfg.horizon % PROGRESS_STEP);
    Ok(trace)
}

/// Mean of the finite values (NaN if none).
fn finite_mean(x: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = x
        .filter(|v| v.is_finite())
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        s / n as f64
    }
}

/// Runs every policy of `cfg` for `cfg.runs` independent runs (in parallel; the result does not
/// depend on the number of threads) and summarises them. `progress` receives steps done.
pub fn run(cfg: &BanditConfig, progress: &(dyn Fn(u64) + Sync)) -> Result<BanditResults> {
    cfg.validate()?;
    let env = Environment::new(cfg.arms.clone(), cfg.shift)?;
    let names = cfg.policy_names()?;
    let policies: Vec<Policy> = names.iter().map(|n| cfg.policy(n)).collect::<Result<_>>()?;
    let grid = cfg.grid();
    let streams = Streams::new(cfg.seed).derive(STREAM_LABEL);
    let tasks: Vec<(usize, u32)> = (0..policies.len())
        .flat_map(|p| (0..cfg.runs).map(move |r| (p, r)))
        .collect();
    let traces: Vec<RunTrace> = tasks
        .par_iter()
        .map(|&(p, r)| {
            let mut rng = streams.stream(name_id(&policies[p].name), 0, u64::from(r), 0);
            run_one(cfg, &env, &policies[p], &grid, r, &mut rng, progress)
        })
        .collect::<Result<_>>()?;
    Ok(summarise(cfg, &env, &policies, &grid, &traces))
}

fn summarise(
    cfg: &BanditConfig,
    env: &Environment,
    policies: &[Policy],
    grid: &[u64],
    traces: &[RunTrace],
) -> BanditResults {
    let k = env.arms();
    let runs = cfg.runs as usize;
    let tq = StudentsT::new(0.0, 1.0, (runs - 1) as f64)
        .map(|d| d.inverse_cdf(0.975))
        .unwrap_or(f64::NAN);
    let last = grid.len() - 1;
    let after = cfg.horizon - cfg.shift;
    let mut out = BanditResults {
        grid: grid.to_vec(),
        summaries: Vec::new(),
        curves: Vec::new(),
        arm_points: Vec::new(),
        runs: Vec::new(),
    };
    for (p, policy) in policies.iter().enumerate() {
        let tr = &traces[p * runs..(p + 1) * runs];
        let finals: Vec<f64> = tr.iter().map(|t| t.cum_reward[last]).collect();
        let regrets: Vec<f64> = tr.iter().map(|t| t.cum_regret[last]).collect();
        let afters: Vec<f64> = tr.iter().map(|t| t.reward_after_shift).collect();
        let (fm, fse) = mean_se(&finals);
        let (rm, rse) = mean_se(&regrets);
        let (am, ase) = mean_se(&afters);
        // Post-shift behaviour from the pulls recorded at the grid points.
        let shift_g = grid.iter().position(|&t| t == cfg.shift);
        let (mut share, mut adapt) = (Vec::new(), Vec::new());
        if let Some(sg) = shift_g.filter(|_| after > 0) {
            let best = env.best_arm(cfg.horizon);
            for t in tr {
                let pulls = |g: usize, a: usize| t.pulls[g * k + a] as f64;
                share.push((pulls(last, best) - pulls(sg, best)) / after as f64);
                let mut steps = after as f64;
                for g in sg + 1..grid.len() {
                    let dt = (grid[g] - grid[g - 1]) as f64;
                    if (pulls(g, best) - pulls(g - 1, best)) / dt >= 0.5 {
                        steps = (grid[g] - cfg.shift) as f64;
                        break;
                    }
                }
                adapt.push(steps);
            }
        }
        let accounting = cfg.accounting(policy);
        out.summaries.push(PolicySummary {
            policy: policy.name.clone(),
            private: accounting.is_some(),
            oracle_stats: policy.oracle,
            epsilon_total: accounting.as_ref().map(|a| a.epsilon_total),
            accounting,
            final_reward_mean: fm,
            final_reward_se: fse,
            regret_mean: rm,
            regret_se: rse,
            reward_after_shift_mean: am,
            reward_after_shift_se: ase,
            best_share_after_shift: finite_mean(share.into_iter()),
            adapt_steps_mean: finite_mean(adapt.into_iter()),
            quantile_pairs_mean: tr.iter().map(|t| t.quantile_pairs as f64).sum::<f64>()
                / runs as f64,
            runs: cfg.runs,
        });
        for t in tr {
            out.runs.push(RunRow {
                policy: policy.name.clone(),
                run: t.run,
                final_reward: t.cum_reward[last],
                regret: t.cum_regret[last],
                reward_after_shift: t.reward_after_shift,
                quantile_pairs: t.quantile_pairs,
            });
        }
        for (g, &step) in grid.iter().enumerate() {
            let rw: Vec<f64> = tr.iter().map(|t| t.cum_reward[g]).collect();
            let rg: Vec<f64> = tr.iter().map(|t| t.cum_regret[g]).collect();
            let (m1, s1) = mean_se(&rw);
            let (m2, s2) = mean_se(&rg);
            out.curves.push(CurvePoint {
                policy: policy.name.clone(),
                t: step,
                reward_mean: m1,
                reward_lo: m1 - tq * s1,
                reward_hi: m1 + tq * s1,
                regret_mean: m2,
                regret_lo: m2 - tq * s2,
                regret_hi: m2 + tq * s2,
            });
            for a in 0..k {
                let i = g * k + a;
                out.arm_points.push(ArmPoint {
                    policy: policy.name.clone(),
                    t: step,
                    arm: a,
                    mean_est: finite_mean(tr.iter().map(|t| t.mean_est[i])),
                    mean_est_run0: tr[0].mean_est[i],
                    q_lo: finite_mean(tr.iter().map(|t| t.q_lo[i])),
                    q_hi: finite_mean(tr.iter().map(|t| t.q_hi[i])),
                    q_lo_run0: tr[0].q_lo[i],
                    q_hi_run0: tr[0].q_hi[i],
                    pulls_mean: tr.iter().map(|t| t.pulls[i] as f64).sum::<f64>() / runs as f64,
                    true_mean: env.expected(a, step),
                    true_q_lo: env.true_quantile(a, step, cfg.q_lo),
                    true_q_hi: env.true_quantile(a, step, cfg.q_hi),
                });
            }
        }
    }
    out
}
