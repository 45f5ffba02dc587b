//! Bandit under distribution shift (seed 001 §IX and appendix H, figure 14; docs/bandit.md). The setting,
//! every learner, the privacy accounting and the choices the paper leaves open are written out in
//! `docs/bandit.md`; section names there are cited below.
//!
//! k arms with clipped normal rewards whose means and spreads change at `shift` ([`mod@env`]). Each
//! learner ([`PolicyKind`]) picks one arm per step for `horizon` steps; every (policy, run) draws
//! from its own random stream, so results do not depend on the number of threads. Private learners
//! keep per-arm private reward sums ([`counter::HybridCounter`]), private per-arm sensitivities
//! from private quantiles over disjoint windows ([`quantile::EmQuantile`], or Duff's utility,
//! [`duff::DuffQuantile`]), and select
//! with a mechanism of the registry (docs/mechanisms.md).
//!
//! This module depends only on `mechanisms`, `stats`, `rng` and `error` (the experiment layer);
//! tables and plots are assembled in `report::bandit`.

pub mod counter;
pub mod duff;
pub mod env;
pub mod quantile;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::error::{Error, Result};
use crate::mechanisms::{
    self, argmax_random_ties, Guarantee, MechParams, Mechanism, MechanismSpec, Problem,
};
use crate::rng::{name_id, Rng, Streams};
use crate::stats::percentile_linear;
use crate::stats::Chooser;
use counter::HybridCounter;
use duff::{PrivateQuantile, QuantileMethod};
use env::{Arms, Environment, REWARD_HI, REWARD_LO};

/// Label of the bandit's stream family ([`Streams::derive`]).
const STREAM_LABEL: u64 = 0x6261_6e64_6974; // "bandit"

/// Floor of a released sensitivity (as docs/experiments.md floor constant candidates).
pub const SENS_FLOOR: f64 = 1e-6;

/// The non-mechanism learners, in the order `all` lists them.
pub const BASELINES: [&str; 4] = ["ucb", "ucb1", "thompson", "private-greedy"];

/// Suffix of the `--oracle-stats` twin of a private learner.
pub const ORACLE_SUFFIX: &str = "+oracle";

/// Configuration of `recsel bandit` (and a pipeline's `[bandit]` table). `Default` is seed 001
/// appendix H; the resolved copy written beside the results has every field filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BanditConfig {
    /// Steps T.
    pub horizon: u64,
    /// Steps `t ≤ shift` use the arms' `before` phase, later steps `after`.
    pub shift: u64,
    /// Independent runs per policy.
    pub runs: u32,
    /// `all` or a comma-separated list: `ucb`, `ucb1`, `thompson`, `private-greedy` and mechanism
    /// names of the registry (`rnm`, `gem`, `mgem`, …); `NAME+oracle` runs a private learner with
    /// exact statistics.
    pub policies: String,
    /// Also run every private learner with exact (non-private) means and quantiles (`NAME+oracle`).
    pub oracle_stats: bool,
    /// Window w: a private learner re-estimates an arm's quantiles after every w new rewards of it.
    pub window: usize,
    /// ε_S of every selection mechanism except `krr`.
    pub eps_select: f64,
    /// ε_S of `krr` (the paper: 4, since it needs no sensitivities).
    pub eps_krr: f64,
    /// ε_M of each arm's private reward sum (hybrid counter).
    pub eps_mean: f64,
    /// ε_p of each released (lower, upper) quantile pair; each quantile gets ε_p / 2.
    pub eps_quantile: f64,
    /// The private quantile: the standard exponential mechanism (`em`, the default) or Duff's
    /// dataset-based utility (`duff`; docs/bandit.md, "Private sensitivities").
    pub quantile: QuantileMethod,
    /// Lower quantile level of the sensitivity (0.1: p10).
    pub q_lo: f64,
    /// Upper quantile level (0.9: p90).
    pub q_hi: f64,
    /// Optimism α of the UCB bonus `α·sqrt(ln T / N_t(a))` (appendix H: √2).
    pub alpha: f64,
    /// Add the appendix-H bonus to the private means of the private learners (the paper's
    /// appendix H2 scores are the means alone: default false).
    pub private_bonus: bool,
    /// Clamp private means to the reward range [0, 1] (post-processing; the paper does not).
    pub clamp_means: bool,
    /// Sensitivity of an arm before its first private estimate (the warm-up: the reward range).
    pub warmup_sensitivity: f64,
    /// Stopping probability γ of `rs` and `rs-tnb`.
    pub gamma: f64,
    /// Failure probability β of `gem`, `mgem` and `cgem`.
    pub beta: f64,
    /// Shape η of `rs-tnb`.
    pub eta: f64,
    /// Share c of ε that `cgem` spends on its correlation bit.
    pub c: f64,
    /// The correlation `cgem` uses.
    pub chooser: Chooser,
    /// Points of the downsampled curves (the shift is always one of them).
    pub points: usize,
    /// The arms' reward laws before and after the shift.
    pub arms: Arms,
    /// Seed of every random stream.
    pub seed: u64,
}

impl Default for BanditConfig {
    fn default() -> Self {
        let p = MechParams::default();
        BanditConfig {
            horizon: 50_000,
            shift: 30_000,
            runs: 20,
            policies: "all".into(),
            oracle_stats: false,
            window: 200,
            eps_select: 1.0,
            eps_krr: 4.0,
            eps_mean: 1.0,
            eps_quantile: 1.0,
            quantile: QuantileMethod::Em,
            q_lo: 0.1,
            q_hi: 0.9,
            alpha: std::f64::consts::SQRT_2,
            private_bonus: false,
            clamp_means: false,
            warmup_sensitivity: REWARD_HI - REWARD_LO,
            gamma: p.gamma,
            beta: p.beta,
            eta: p.eta,
            c: p.c,
            chooser: p.chooser,
            points: 500,
            arms: Arms::default(),
            seed: 1,
        }
    }
}

/// What a learner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// UCB of appendix H: `mean + α·sqrt(ln T / N_t(a))`.
    Ucb,
    /// UCB1 (Auer et al. 2002): `mean + α·sqrt(ln(t − 1) / N_t(a))` over the t − 1 steps so far.
    Ucb1,
    /// Gaussian Thompson sampling (Agrawal–Goyal 2013): prior N(0, 1) per arm, unit-variance
    /// likelihood, `θ_a ~ N(S_a/(N_a + 1), 1/(N_a + 1))`.
    Thompson,
    /// argmax of the private means (plus the bonus with `private_bonus`): ε-DP by post-processing.
    PrivateGreedy,
    /// A selection mechanism of the registry on (private means, private sensitivities).
    Mechanism,
}

/// One learner of a run: its name, kind, mechanism and which statistics it consumes.
#[derive(Debug)]
pub struct Policy {
    /// Name as given (`mgem`, `mgem+oracle`, `ucb`, …).
    pub name: String,
    /// The kind of learner.
    pub kind: PolicyKind,
    /// Uses exact statistics instead of private ones (`+oracle`).
    pub oracle: bool,
    /// The selection mechanism of a [`PolicyKind::Mechanism`] learner.
    pub mechanism: Option<Box<dyn Mechanism>>,
    /// Its registry entry.
    pub spec: Option<&'static MechanismSpec>,
    /// Whether it reads the arms' means.
    pub uses_means: bool,
    /// Whether it reads the arms' sensitivities (and so releases quantiles).
    pub uses_quantiles: bool,
}

/// The privacy budget of one learner (`docs/bandit.md`, "Privacy accounting").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accounting {
    /// Arms k.
    pub arms: usize,
    /// ε_M of each arm's released sequence of private sums (0 if the learner reads no means).
    pub eps_mean_per_arm: f64,
    /// ε_p of each released quantile pair (0 if it reads no sensitivities); every reward enters
    /// one pair of its arm (disjoint windows).
    pub eps_quantile_per_pair: f64,
    /// ε of each quantile of a pair (ε_p / 2).
    pub eps_per_quantile: f64,
    /// ε_S of each released action (with respect to the scores it was chosen from).
    pub eps_select_per_step: f64,
    /// Steps T (one action released per step).
    pub steps: u64,
    /// The paper's sum `k·ε_M + k·ε_p + ε_S` (appendix H2: per-arm means, "2ε_p for 2 actions",
    /// each action ε_S-DP).
    pub epsilon_total: f64,
    /// Event-level ε of the whole transcript when one reward is replaced: the reward enters one
    /// arm's counter and one window, `ε_M + ε_p`; actions are post-processing of the private
    /// statistics.
    pub epsilon_event: f64,
}

/// Result of one (policy, run).
#[derive(Debug, Clone)]
pub struct RunTrace {
    /// Run index.
    pub run: u32,
    /// Cumulative reward at each grid point.
    pub cum_reward: Vec<f64>,
    /// Cumulative (pseudo-)regret against the oracle arm at each grid point.
    pub cum_regret: Vec<f64>,
    /// Per grid point and arm (`g * k + a`): the learner's mean estimate (NaN before the arm's
    /// first pull).
    pub mean_est: Vec<f64>,
    /// Per grid point and arm: the latest released lower quantile (NaN before the first).
    pub q_lo: Vec<f64>,
    /// Per grid point and arm: the latest released upper quantile (NaN before the first).
    pub q_hi: Vec<f64>,
    /// Per grid point and arm: pulls so far.
    pub pulls: Vec<u64>,
    /// Quantile pairs released over all arms.
    pub quantile_pairs: u64,
    /// Reward collected after the shift.
    pub reward_after_shift: f64,
}

/// Summary of one policy over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct PolicySummary {
    /// Policy name.
    pub policy: String,
    /// Whether the learner's released outputs are differentially private.
    pub private: bool,
    /// Whether it used exact statistics (`+oracle`).
    pub oracle_stats: bool,
    /// [`Accounting::epsilon_total`]; `None` when not private.
    pub epsilon_total: Option<f64>,
    /// The budget (`None` when not private).
    pub accounting: Option<Accounting>,
    /// Mean cumulative reward at the horizon over runs.
    pub final_reward_mean: f64,
    /// Its standard error.
    pub final_reward_se: f64,
    /// Mean cumulative regret at the horizon.
    pub regret_mean: f64,
    /// Its standard error.
    pub regret_se: f64,
    /// Mean reward collected after the shift.
    pub reward_after_shift_mean: f64,
    /// Its standard error.
    pub reward_after_shift_se: f64,
    /// Share of post-shift pulls on the post-shift best arm (mean over runs).
    pub best_share_after_shift: f64,
    /// Steps after the shift until the first grid interval in which the new best arm gets at
    /// least half the pulls (mean over runs; a run that never gets there counts `T − shift`).
    pub adapt_steps_mean: f64,
    /// Mean quantile pairs released per run (all arms).
    pub quantile_pairs_mean: f64,
    /// Runs.
    pub runs: u32,
}

/// Cumulative reward and regret of one policy at one grid point: mean and 95% band over runs.
#[derive(Debug, Clone, Serialize)]
pub struct CurvePoint {
    /// Policy name.
    pub policy: String,
    /// Step.
    pub t: u64,
    /// Mean cumulative reward.
    pub reward_mean: f64,
    /// Lower end of the 95% confidence interval of the mean (Student t).
    pub reward_lo: f64,
    /// Upper end.
    pub reward_hi: f64,
    /// Mean cumulative regret.
    pub regret_mean: f64,
    /// Lower end of its 95% interval.
    pub regret_lo: f64,
    /// Upper end.
    pub regret_hi: f64,
}

/// Per-arm statistics of one policy at one grid point.
#[derive(Debug, Clone, Serialize)]
pub struct ArmPoint {
    /// Policy name.
    pub policy: String,
    /// Step.
    pub t: u64,
    /// Arm.
    pub arm: usize,
    /// The learner's mean estimate, averaged over the runs where it exists.
    pub mean_est: f64,
    /// Run 0's mean estimate (the "private score" of fig 14b).
    pub mean_est_run0: f64,
    /// Released lower quantile, averaged over runs with an estimate (NaN if none).
    pub q_lo: f64,
    /// Released upper quantile, averaged likewise.
    pub q_hi: f64,
    /// Run 0's lower quantile.
    pub q_lo_run0: f64,
    /// Run 0's upper quantile.
    pub q_hi_run0: f64,
    /// Mean pulls of the arm so far.
    pub pulls_mean: f64,
    /// Expected clipped reward of the arm at t.
    pub true_mean: f64,
    /// True lower quantile of the clipped reward at t.
    pub true_q_lo: f64,
    /// True upper quantile at t.
    pub true_q_hi: f64,
}

/// One row per (policy, run).
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// Policy name.
    pub policy: String,
    /// Run index.
    pub run: u32,
    /// Cumulative reward at the horizon.
    pub final_reward: f64,
    /// Cumulative regret at the horizon.
    pub regret: f64,
    /// Reward after the shift.
    pub reward_after_shift: f64,
    /// Quantile pairs released.
    pub quantile_pairs: u64,
}

/// Everything a bandit run produced.
#[derive(Debug, Clone)]
pub struct BanditResults {
    /// The grid of recorded steps.
    pub grid: Vec<u64>,
    /// One per policy, in run order.
    pub summaries: Vec<PolicySummary>,
    /// Curves per policy and grid point.
    pub curves: Vec<CurvePoint>,
    /// Per-arm statistics per policy, grid point and arm.
    pub arm_points: Vec<ArmPoint>,
    /// One row per (policy, run).
    pub runs: Vec<RunRow>,
}

impl BanditConfig {
    /// The mechanism parameters with ε set for `name` (`krr`: `eps_krr`, others `eps_select`).
    pub fn mech_params(&self, name: &str) -> MechParams {
        MechParams {
            epsilon: if name == "krr" {
                self.eps_krr
            } else {
                self.eps_select
            },
            gamma: self.gamma,
            beta: self.beta,
            eta: self.eta,
            c: self.c,
            chooser: self.chooser,
            ..MechParams::default()
        }
    }

    /// The policy names this configuration runs, in order (`all` expanded, oracle twins added).
    pub fn policy_names(&self) -> Result<Vec<String>> {
        let mut base: Vec<String> = Vec::new();
        if self.policies.trim() == "all" {
            base.extend(BASELINES.iter().map(|s| s.to_string()));
            // Every registry mechanism with a pure-DP guarantee (the references that are not
            // private or only (k−1)ε-DP are left to an explicit list).
            for s in mechanisms::REGISTRY {
                let m = s.build(&self.mech_params(s.name))?;
                if matches!(m.guarantee(), Guarantee::Pure { .. }) && s.private && s.in_all() {
                    base.push(s.name.to_string());
                }
            }
        } else {
            for n in self
                .policies
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                if !base.iter().any(|b| b == n) {
                    base.push(n.to_string());
                }
            }
        }
        if base.is_empty() {
            return Err(Error::Invalid(format!(
                "no policy named in '{}'; valid: all, {}, or a mechanism ({})",
                self.policies,
                BASELINES.join(", "),
                mechanisms::valid_names()
            )));
        }
        let mut out = Vec::new();
        for n in base {
            let twin = self.oracle_stats && !n.ends_with(ORACLE_SUFFIX);
            out.push(n.clone());
            if twin {
                let p = self.policy(&n)?;
                if p.private_stats() && p.uses_means {
                    out.push(format!("{n}{ORACLE_SUFFIX}"));
                }
            }
        }
        let mut seen = Vec::new();
        out.retain(|n| {
            let new = !seen.contains(n);
            seen.push(n.clone());
            new
        });
        Ok(out)
    }

    /// Builds the learner called `name` (validating its mechanism's parameters).
    pub fn policy(&self, name: &str) -> Result<Policy> {
        let (base, oracle) = match name.strip_suffix(ORACLE_SUFFIX) {
            Some(b) => (b, true),
            None => (name, false),
        };
        let simple = |kind, private_stats: bool| {
            Policy {
                name: name.to_string(),
                kind,
                oracle,
                mechanism: None,
                spec: None,
                uses_means: true,
                uses_quantiles: false,
            }
            .only_if(private_stats || !oracle, name)
        };
        match base {
            "ucb" => simple(PolicyKind::Ucb, false),
            "ucb1" => simple(PolicyKind::Ucb1, false),
            "thompson" => simple(PolicyKind::Thompson, false),
            "private-greedy" => simple(PolicyKind::PrivateGreedy, true),
            m => {
                let spec = mechanisms::spec(m).map_err(|_| Error::UnknownName {
                    kind: "bandit policy",
                    name: name.to_string(),
                    valid: format!(
                        "all, {}, any mechanism ({}), NAME{ORACLE_SUFFIX}",
                        BASELINES.join(", "),
                        mechanisms::valid_names()
                    ),
                })?;
                mechanisms::private_candidates::scores::refuse_approximate(
                    &[spec],
                    &self.mech_params(m),
                    "the bandit (it composes pure eps over the rounds)",
                )?;
                let mech = spec.build(&self.mech_params(m))?;
                // `krr` reads only the argmax of the scores; `random` reads nothing.
                let (uses_means, uses_quantiles) = match m {
                    "random" => (false, false),
                    "krr" => (true, false),
                    _ => (true, true),
                };
                if oracle && !uses_means {
                    return Err(Error::Invalid(format!(
                        "policy '{name}': {m} reads no statistics, so it has no oracle twin"
                    )));
                }
                Ok(Policy {
                    name: name.to_string(),
                    kind: PolicyKind::Mechanism,
                    oracle,
                    mechanism: Some(mech),
                    spec: Some(spec),
                    uses_means,
                    uses_quantiles,
                })
            }
        }
    }

    /// Checks every field once, naming the bad value.
    pub fn validate(&self) -> Result<()> {
        if self.horizon == 0 {
            return Err(Error::Invalid("horizon must be at least 1, got 0".into()));
        }
        if self.shift > self.horizon {
            return Err(Error::Invalid(format!(
                "shift must be at most the horizon {}, got {}",
                self.horizon, self.shift
            )));
        }
        if self.runs < 2 {
            return Err(Error::Invalid(format!(
                "runs must be at least 2 (for a standard error), got {}",
                self.runs
            )));
        }
        if self.window < 2 {
            return Err(Error::Invalid(format!(
                "window must be at least 2, got {}",
                self.window
            )));
        }
        for (name, v) in [
            ("eps_mean", self.eps_mean),
            ("eps_quantile", self.eps_quantile),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::InvalidParameter {
                    name,
                    requirement: "finite and > 0",
                    value: v,
                });
            }
        }
        if !(self.q_lo > 0.0 && self.q_lo < self.q_hi && self.q_hi < 1.0) {
            return Err(Error::Invalid(format!(
                "quantile levels need 0 < q_lo < q_hi < 1, got {} and {}",
                self.q_lo, self.q_hi
            )));
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(Error::InvalidParameter {
                name: "alpha",
                requirement: "finite and >= 0",
                value: self.alpha,
            });
        }
        if !(self.warmup_sensitivity.is_finite() && self.warmup_sensitivity > 0.0) {
            return Err(Error::InvalidParameter {
                name: "warmup_sensitivity",
                requirement: "finite and > 0",
                value: self.warmup_sensitivity,
            });
        }
        if self.points == 0 {
            return Err(Error::Invalid("points must be at least 1, got 0".into()));
        }
        self.arms.validate()?;
        crate::experiments::check_seed(self.seed)?;
        for n in self.policy_names()? {
            self.policy(&n)?;
        }
        Ok(())
    }

    /// The recorded steps: `points` evenly spaced steps up to the horizon, plus the shift.
    pub fn grid(&self) -> Vec<u64> {
        let p = (self.points as u64).min(self.horizon);
        let mut g: Vec<u64> = (1..=p).map(|j| (j * self.horizon).div_ceil(p)).collect();
        if self.shift >= 1 && self.shift < self.horizon {
            g.push(self.shift);
        }
        g.sort_unstable();
        g.dedup();
        g
    }

    /// The budget of `policy` (`None` when its outputs are not differentially private).
    pub fn accounting(&self, policy: &Policy) -> Option<Accounting> {
        if policy.oracle {
            return None;
        }
        let k = self.arms.len();
        let eps_select = match policy.kind {
            PolicyKind::Ucb | PolicyKind::Ucb1 | PolicyKind::Thompson => return None,
            PolicyKind::PrivateGreedy => 0.0,
            PolicyKind::Mechanism => {
                let m = policy.mechanism.as_ref().expect("mechanism learner");
                // The registry's word decides: an audit reference may claim a guarantee it
                // does not have.
                let spec = policy.spec?;
                if !spec.private || spec.audit_reference {
                    return None;
                }
                m.guarantee().epsilon_for(k)?
            }
        };
        let em = if policy.uses_means {
            self.eps_mean
        } else {
            0.0
        };
        let ep = if policy.uses_quantiles {
            self.eps_quantile
        } else {
            0.0
        };
        Some(Accounting {
            arms: k,
            eps_mean_per_arm: em,
            eps_quantile_per_pair: ep,
            eps_per_quantile: ep / 2.0,
            eps_select_per_step: eps_select,
            steps: self.horizon,
            epsilon_total: k as f64 * em + k as f64 * ep + eps_select,
            epsilon_event: em + ep,
        })
    }
}

impl Policy {
    fn only_if(self, ok: bool, name: &str) -> Result<Policy> {
        if ok {
            Ok(self)
        } else {
            Err(Error::Invalid(format!(
                "policy '{name}': only private learners have an oracle twin"
            )))
        }
    }

    /// Whether the learner reads private (not exact) statistics.
    pub fn private_stats(&self) -> bool {
        !self.oracle && matches!(self.kind, PolicyKind::PrivateGreedy | PolicyKind::Mechanism)
    }
}

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

/// Mean and standard error of `x` (n ≥ 2).
fn mean_se(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    if x.len() < 2 {
        return (m, f64::NAN);
    }
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
    (m, (v / n).sqrt())
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
