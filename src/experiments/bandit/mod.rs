//! Bandit under distribution shift (seed 001 §IX and appendix H, figure 14; docs/bandit.md). The setting,
//! every learner, the privacy accounting and the choices the paper leaves open are written out in
//! `docs/bandit.md`; section names there are cited below.
//!
//! k arms with clipped normal rewards whose means and spreads change at `shift` ([`mod@env`]). Each
//! learner ([`PolicyKind`]) picks one arm per step for `horizon` steps; every (policy, run) draws
//! from its own random stream, so results do not depend on the number of threads. Private learners
//! keep per-arm private reward sums ([`counter::HybridCounter`]), private per-arm sensitivities
//! from private quantiles over disjoint windows ([`crate::column_statistic::EmQuantile`], or Duff's utility,
//! [`crate::column_statistic::DuffQuantile`]), and select
//! with a mechanism of the registry (docs/mechanisms.md).
//!
//! This module depends only on `mechanisms`, `numerics`, `rng` and `error` (the experiment layer);
//! tables and plots are assembled in `report::bandit`.

pub mod counter;
pub mod duff;
pub mod env;
mod run;

pub use run::{run, work_units};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::mechanisms::{
    self, Guarantee, MechParams, MechValues, Mechanism, MechanismSpec, Registry,
};
use crate::options::option_table;
use duff::QuantileMethod;
use env::{Arms, REWARD_HI, REWARD_LO};

/// Label of the bandit's stream family ([`Streams::derive`]).
const STREAM_LABEL: u64 = 0x6261_6e64_6974; // "bandit"

/// Floor of a released sensitivity (as docs/experiments.md floor constant candidates).
pub const SENS_FLOOR: f64 = 1e-6;

/// The non-mechanism learners, in the order `all` lists them.
pub const BASELINES: [&str; 4] = ["ucb", "ucb1", "thompson", "private-greedy"];

/// Suffix of the `--oracle-stats` twin of a private learner.
pub const ORACLE_SUFFIX: &str = "+oracle";

option_table! {
    /// The options of `recsel bandit` and a pipeline's `[bandit]` table, declared once with
    /// their defaults (seed 001 appendix H). Mechanism parameters sit beside the other keys; a
    /// key that is neither is an error naming it ([`BanditConfig::validate`]).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct BanditOptions {
        /// Steps T.
        #[option(group = "Bandit")]
        pub horizon: u64 = 50_000,
        /// The arms change after this step (steps t <= shift use the arms' `before` phase).
        #[option(group = "Bandit")]
        pub shift: u64 = 30_000,
        /// Independent runs per policy (mean and 95% band).
        #[option(group = "Bandit")]
        pub runs: u32 = 20,
        /// `all` or a comma-separated list: ucb (appendix H, ln T), ucb1 (ln t), thompson,
        /// private-greedy, or mechanism names (rnm, gem, mgem, cgem, rs, rs-tnb, krr, random,
        /// ...); NAME+oracle runs a private learner on exact statistics.
        #[option(value_name = "LIST", group = "Bandit")]
        pub policies: String = "all".to_string(),
        /// Also run every private learner with exact (non-private) means and quantiles.
        #[option(group = "Bandit")]
        pub oracle_stats: bool = false,
        /// Quantiles of an arm are re-estimated after every W new rewards of it.
        #[option(value_name = "W", group = "Bandit")]
        pub window: usize = 200,
        /// ε_S of each selection (krr uses eps_krr).
        #[option(value_name = "E", group = "Privacy")]
        pub eps_select: f64 = 1.0,
        /// ε_S of krr (the paper: 4, since it needs no sensitivities).
        #[option(value_name = "E", group = "Privacy")]
        pub eps_krr: f64 = 4.0,
        /// ε_M of each arm's private reward sum (hybrid counter).
        #[option(value_name = "E", group = "Privacy")]
        pub eps_mean: f64 = 1.0,
        /// ε_p of each released (lower, upper) quantile pair; each quantile gets ε_p / 2.
        #[option(value_name = "E", group = "Privacy")]
        pub eps_quantile: f64 = 1.0,
        /// The private quantile: `em` (exponential mechanism over the gaps between rewards) or
        /// `duff` (Duff's dataset-based utility on a 0.001 grid; docs/bandit.md).
        #[option(choices = &["em", "duff"], group = "Privacy")]
        pub quantile: QuantileMethod = QuantileMethod::Em,
        /// Lower quantile level of the sensitivity (0.1: p10).
        #[option(value_name = "Q", group = "Privacy")]
        pub q_lo: f64 = 0.1,
        /// Upper quantile level of the sensitivity (0.9: p90).
        #[option(value_name = "Q", group = "Privacy")]
        pub q_hi: f64 = 0.9,
        /// Optimism α of the UCB bonus α·sqrt(ln T / N_t(a)) (appendix H: √2).
        #[option(value_name = "A", group = "Bandit")]
        pub alpha: f64 = std::f64::consts::SQRT_2,
        /// Add the UCB bonus to the private means of the private learners (the paper's appendix
        /// H2 scores are the means alone).
        #[option(group = "Bandit")]
        pub private_bonus: bool = false,
        /// Clamp private means to the reward range [0, 1] (post-processing; the paper does not).
        #[option(group = "Bandit")]
        pub clamp_means: bool = false,
        /// Sensitivity of an arm before its first private estimate (the warm-up: the reward
        /// range).
        #[option(value_name = "D", group = "Privacy")]
        pub warmup_sensitivity: f64 = REWARD_HI - REWARD_LO,
        /// Points of the downsampled curves (the shift is always one of them).
        #[option(group = "Output")]
        pub points: usize = 500,
        /// The arms' reward laws before and after the shift (default: the paper's two arms); on
        /// the command line, `--arms FILE`.
        #[table_only]
        pub arms: Arms,
        /// Seed of every random stream (default: drawn from OS entropy and reported, so the run
        /// can be repeated).
        #[option(group = "Randomness")]
        pub seed: u64,
        /// Mechanism parameters by name (γ, β, η, c, chooser, …; `recsel mechanisms`).
        #[flatten]
        pub params: MechValues,
    }
}

impl BanditOptions {
    /// The run these options describe, every option resolved; the seed is the one given, else
    /// `entropy()` (a front end draws one and reports it). Not yet validated
    /// ([`BanditConfig::validate`]).
    pub fn config(&self, entropy: impl FnOnce() -> u64) -> BanditConfig {
        BanditConfig {
            horizon: self.horizon(),
            shift: self.shift(),
            runs: self.runs(),
            policies: self.policies(),
            oracle_stats: self.oracle_stats(),
            window: self.window(),
            eps_select: self.eps_select(),
            eps_krr: self.eps_krr(),
            eps_mean: self.eps_mean(),
            eps_quantile: self.eps_quantile(),
            quantile: self.quantile(),
            q_lo: self.q_lo(),
            q_hi: self.q_hi(),
            alpha: self.alpha(),
            private_bonus: self.private_bonus(),
            clamp_means: self.clamp_means(),
            warmup_sensitivity: self.warmup_sensitivity(),
            params: self.params.clone(),
            points: self.points(),
            arms: self.arms.clone(),
            seed: self.seed.unwrap_or_else(entropy),
        }
    }

    /// Checks the options without running them (the seed, if not given, is not drawn).
    pub fn check(&self) -> Result<()> {
        self.config(|| 0).validate()
    }
}

/// A bandit run with every option resolved ([`BanditOptions::config`]): what the runner reads
/// and, with the mechanism parameters filled in ([`BanditConfig::resolved`]), what is recorded
/// beside the results.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// ε_S of `krr`.
    pub eps_krr: f64,
    /// ε_M of each arm's private reward sum (hybrid counter).
    pub eps_mean: f64,
    /// ε_p of each released (lower, upper) quantile pair; each quantile gets ε_p / 2.
    pub eps_quantile: f64,
    /// The private quantile: the standard exponential mechanism (`em`) or Duff's dataset-based
    /// utility (`duff`; docs/bandit.md, "Private sensitivities").
    pub quantile: QuantileMethod,
    /// Lower quantile level of the sensitivity.
    pub q_lo: f64,
    /// Upper quantile level.
    pub q_hi: f64,
    /// Optimism α of the UCB bonus `α·sqrt(ln T / N_t(a))`.
    pub alpha: f64,
    /// Add the appendix-H bonus to the private means of the private learners.
    pub private_bonus: bool,
    /// Clamp private means to the reward range [0, 1] (post-processing).
    pub clamp_means: bool,
    /// Sensitivity of an arm before its first private estimate.
    pub warmup_sensitivity: f64,
    /// Mechanism parameters by name: every key that is not a field is one, checked against the
    /// registry by [`BanditConfig::validate`].
    #[serde(flatten)]
    pub params: MechValues,
    /// Points of the downsampled curves (the shift is always one of them).
    pub points: usize,
    /// The arms' reward laws before and after the shift.
    pub arms: Arms,
    /// Seed of every random stream.
    pub seed: u64,
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
    pub fn mech_params(&self, name: &str) -> Result<MechParams> {
        let eps = if name == "krr" {
            self.eps_krr
        } else {
            self.eps_select
        };
        Ok(Registry::builtin().resolve(&self.params)?.with_epsilon(eps))
    }

    /// The configuration as it is recorded beside the results: validated, with the values of
    /// the parameters of the built-in mechanisms filled in.
    pub fn resolved(&self) -> Result<BanditConfig> {
        self.validate()?;
        let registry = Registry::builtin();
        let mut cfg = self.clone();
        cfg.params = registry.table_values(&[], &registry.resolve(&self.params)?);
        Ok(cfg)
    }

    /// The policy names this configuration runs, in order (`all` expanded, oracle twins added).
    pub fn policy_names(&self) -> Result<Vec<String>> {
        let mut base: Vec<String> = Vec::new();
        if self.policies.trim() == "all" {
            base.extend(BASELINES.iter().map(|s| s.to_string()));
            // Every registry mechanism with a pure-DP guarantee (the references that are not
            // private or only (k−1)ε-DP are left to an explicit list).
            for s in mechanisms::REGISTRY {
                let m = s.build(&self.mech_params(s.name)?)?;
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
                let params = self.mech_params(m)?;
                mechanisms::private_candidates::scores::refuse_approximate(
                    &[spec],
                    &params,
                    "the bandit (it composes pure eps over the rounds)",
                )?;
                let mech = spec.build(&params)?;
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
        mechanisms::Registry::builtin().check_table_keys(&self.params, "[bandit]")?;
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
