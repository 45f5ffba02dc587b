//! What `tuning.json` records of how it was tuned, and the small facts serving reads with it:
//! the grid [`TuneConfig`] (with the registry mechanisms' [`MechGrid`] and the private tuner's
//! [`PrivateTuneParams`]), the public rankings a pool is the top of ([`PoolSource`]), how the
//! calibration users were cut ([`EstimationSplit`]), the free option's name ([`free_name`]) and
//! when a gain beats it ([`beats`]). `recsel tune` (`crate::evaluate::tuning`) fills them in;
//! serving only reads them.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::privacy::{Population, PopulationPrivacy};
use crate::recommend::release::Release;
use crate::scoring::CandidatePolicy;

use super::Estimate;

/// A public ranking a pool is the top of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolSource {
    /// Training popularity (`popular:N`).
    Popularity,
    /// How often the users fitted on hold each item out (`heldout:N`).
    Heldout,
}

impl PoolSource {
    /// `popularity` or `heldout`.
    pub fn name(self) -> &'static str {
        match self {
            PoolSource::Popularity => "popularity",
            PoolSource::Heldout => "heldout",
        }
    }

    /// Parses a name; errors list the valid ones.
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim() {
            "popularity" | "popular" => Ok(PoolSource::Popularity),
            "heldout" => Ok(PoolSource::Heldout),
            t => Err(Error::UnknownName {
                kind: "pool source",
                name: t.into(),
                valid: "popularity, heldout".into(),
            }),
        }
    }

    /// The candidate policy of its top `n`.
    pub fn policy(self, n: usize) -> CandidatePolicy {
        match self {
            PoolSource::Popularity => CandidatePolicy::Popular(n),
            PoolSource::Heldout => CandidatePolicy::Heldout(n),
        }
    }

    /// The counts of `release` this source ranks by, if it carries them.
    pub fn counts(self, release: &Release) -> Option<&[u64]> {
        match self {
            PoolSource::Popularity => release.popularity.as_deref(),
            PoolSource::Heldout => release.heldout.as_deref(),
        }
    }
}

/// What [`tune`](crate::evaluate::tuning::tune) searches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneConfig {
    /// The ε tuned (ascending after validation).
    pub epsilons: Vec<f64>,
    /// Rankings tried; a source the release does not carry is left out.
    pub sources: Vec<PoolSource>,
    /// Pool sizes tried (1 is the fixed item); sizes above the number of items are left out.
    pub pool_sizes: Vec<usize>,
    /// A pool is chosen over the fixed item only when its mean calibration gain exceeds this
    /// many paired standard errors.
    pub margin: f64,
    /// Weights W of the public popularity prior (`popularity:W`) tried for krr's argmax; 0 (no
    /// prior) is always tried. Grids written before priors were tuned read as `[0]`.
    #[serde(default = "no_prior_weights")]
    pub prior_weights: Vec<f64>,
    /// Registry mechanisms (ε-DP) whose own configuration (pool, clip range, prior) is tuned
    /// too ([`grid`](crate::evaluate::tuning::grid)); none in a tuning written before version 3.
    #[serde(default)]
    pub mechanisms: Vec<String>,
    /// The grid they are tuned over (the one `recsel evaluate` uses by default).
    #[serde(default)]
    pub grid: MechGrid,
    /// Choose privately ([`private`](crate::evaluate::tuning::private)): each configuration's
    /// calibration score is an ε₀-DP release and the choice a selection from private candidates;
    /// no registry mechanism is tuned then. `None`: the exact (non-private) rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<PrivateTuneParams>,
    /// The lists tuned (`recsel tune --k K`; none before version 6).
    #[serde(default)]
    pub lists: super::lists::ListGrid,
}

fn no_prior_weights() -> Vec<f64> {
    vec![0.0]
}

/// Mean and standard error (sample standard deviation / √n) of `v`.
pub fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

/// The `popular:N` pool sizes tried by default.
pub const DEFAULT_POOLS: [usize; 6] = [3, 10, 30, 100, 300, 1000];
/// The clip ranges (percentiles of the calibration users' scores) tried by default.
pub const DEFAULT_CLIPS: [(f64, f64); 4] = [(1.0, 99.0), (5.0, 95.0), (25.0, 99.0), (50.0, 99.0)];
/// The weights W of the popularity prior tried beside no prior for the registry mechanisms by
/// default (`recsel evaluate --prior-weights`, and `recsel tune`'s grid); krr's argmax prior
/// weights are the other grid, `tuning::DEFAULT_PRIOR_WEIGHTS`.
pub const DEFAULT_MECHANISM_PRIOR_WEIGHTS: [f64; 4] = [1.0, 4.0, 16.0, 64.0];
/// Selections per calibration user for a simulated mechanism, by default.
pub const DEFAULT_TRIALS: u32 = 2;
/// Seed of the simulations, by default.
pub const DEFAULT_SEED: u64 = 1;

/// The grid a registry mechanism's configuration is chosen from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MechGrid {
    /// `popular:N` pool sizes (sizes above the number of items are left out).
    pub pools: Vec<usize>,
    /// Clip ranges, percentiles (LO, HI) of the calibration users' scores.
    pub clips: Vec<(f64, f64)>,
    /// Weights W of the public popularity prior tried beside no prior.
    pub prior_weights: Vec<f64>,
    /// Selections per calibration user for a simulated mechanism.
    pub trials: u32,
    /// Seed of the simulations.
    pub seed: u64,
}

impl Default for MechGrid {
    fn default() -> Self {
        MechGrid {
            pools: DEFAULT_POOLS.to_vec(),
            clips: DEFAULT_CLIPS.to_vec(),
            prior_weights: DEFAULT_MECHANISM_PRIOR_WEIGHTS.to_vec(),
            trials: DEFAULT_TRIALS,
            seed: DEFAULT_SEED,
        }
    }
}

/// Default ε₀ of one candidate's calibration score.
pub const DEFAULT_EPS0: f64 = 0.1;
/// Default stopping probability γ (about 1/γ runs of Q).
pub const DEFAULT_GAMMA: f64 = 0.001;
/// Default ε of the threshold search (the threshold rule only).
pub const DEFAULT_SEARCH_EPSILON: f64 = 1.0;
/// Default target percentile of the threshold search.
pub const DEFAULT_PERCENTILE: f64 = 0.05;
/// Default runs of Q the threshold search estimates percentiles from.
pub const DEFAULT_SAMPLES: u64 = 20_000;
/// Default slack η of the estimated percentiles (Δ = 2ε₀ + η).
pub const DEFAULT_SLACK: f64 = 0.1;
/// Default smoothing c of the estimated log-odds `ln((S + c)/(m − S + c))`: with c = 1 one extra
/// run above the threshold moves the estimate by ln 2 near S = 0, so the coupling fails with
/// probability about e^{ε₀} − 1 and δ exceeds 1 over a long grid; with c = 50, m = 20,000,
/// η = 0.1 and ε₀ = 0.1 the failure per query is 4.3e-10 (computed from the coupling bound).
pub const DEFAULT_SMOOTHING: f64 = 50.0;
/// Default lowest level of the threshold grid (calibration hit@1 halving from 1 down to it).
pub const DEFAULT_THRESHOLD_STEP: f64 = 0.01;

/// How the configuration is selected from the private candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrivateRule {
    /// Random stopping (Theorem 3.2): Geometric(γ) runs, the best released; 3ε₀.
    RandomStopping,
    /// The selection without a known threshold (Theorem 4.7); (ε_search + 2ε₀, δ).
    Threshold,
}

impl PrivateRule {
    /// Parses `random-stopping` or `threshold`; errors list the valid names.
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim() {
            "random-stopping" | "rs" => Ok(PrivateRule::RandomStopping),
            "threshold" => Ok(PrivateRule::Threshold),
            t => Err(Error::UnknownName {
                kind: "private selection",
                name: t.into(),
                valid: "random-stopping, threshold".into(),
            }),
        }
    }

    /// `random-stopping` or `threshold`.
    pub fn name(self) -> &'static str {
        match self {
            PrivateRule::RandomStopping => "random-stopping",
            PrivateRule::Threshold => "threshold",
        }
    }
}

/// Unchecked parameters of the private tuner; [`PrivateTuneParams::check`] validates them.
/// Recorded in `tuning.json` (all but the seed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivateTuneParams {
    /// The selection rule.
    pub rule: PrivateRule,
    /// ε₀ of one candidate's calibration score (one run of Q).
    pub eps0: f64,
    /// Stopping probability γ of both rules.
    pub gamma: f64,
    /// ε of the threshold search (threshold rule).
    pub search_epsilon: f64,
    /// Target percentile t of the threshold search.
    pub percentile: f64,
    /// Runs of Q the search estimates percentiles from (m).
    pub samples: u64,
    /// Slack η of the estimated percentiles.
    pub slack: f64,
    /// Smoothing c of the estimated log-odds.
    #[serde(default = "default_smoothing")]
    pub smoothing: f64,
    /// Lowest level of the threshold grid 1, 1/2, 1/4, … (calibration hit@1), in (0, 0.5].
    pub threshold_step: f64,
    /// Seed of the selection's noise; `None`: from the operating system. Never written to
    /// `tuning.json` (a published seed makes the noise reproducible).
    #[serde(skip)]
    pub seed: Option<u64>,
    /// The secure path (module docs): exact noise from an OS-seeded generator, no seed.
    #[serde(default)]
    pub secure: bool,
}

impl Default for PrivateTuneParams {
    fn default() -> Self {
        PrivateTuneParams {
            rule: PrivateRule::RandomStopping,
            eps0: DEFAULT_EPS0,
            gamma: DEFAULT_GAMMA,
            search_epsilon: DEFAULT_SEARCH_EPSILON,
            percentile: DEFAULT_PERCENTILE,
            samples: DEFAULT_SAMPLES,
            slack: DEFAULT_SLACK,
            smoothing: DEFAULT_SMOOTHING,
            threshold_step: DEFAULT_THRESHOLD_STEP,
            seed: None,
            secure: false,
        }
    }
}

fn default_smoothing() -> f64 {
    DEFAULT_SMOOTHING
}

/// The calibration users' entry of a tuning chosen without privacy.
pub fn public_privacy() -> PopulationPrivacy {
    PopulationPrivacy::public(
        Population::Calibration,
        "the serving configuration was chosen non-privately on their scores",
    )
}

/// How the calibration users were cut, recorded in `tuning.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimationSplit {
    /// Calibration users the choices were made on (a non-private tuning only: a private one
    /// publishes no exact count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_users: Option<u64>,
    /// Calibration users every reported estimate was measured on (disjoint from those; a
    /// non-private tuning only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimation_users: Option<u64>,
    /// The rule, for people.
    pub rule: String,
}

/// A free option for people.
pub fn free_name(policy: &CandidatePolicy) -> String {
    match policy {
        CandidatePolicy::Popular(1) => {
            "showing everyone the most popular training item (popular:1, 0 eps)".into()
        }
        CandidatePolicy::Heldout(1) => {
            "showing everyone the item the fitted users held out most (heldout:1, public counts, \
             0 eps)"
                .into()
        }
        p => format!("showing everyone {p} (0 eps)"),
    }
}

/// Whether a paired gain beats the free option by the margin: positive and above `margin`
/// standard errors.
pub fn beats(gain: &Estimate, margin: f64) -> bool {
    gain.mean > 0.0 && gain.mean > margin * gain.se
}
