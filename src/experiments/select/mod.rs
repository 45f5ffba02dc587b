//! The real-data private-selection job (docs/protocol.md, steps 5–9, seed 001 §VIII, figure 13).
//!
//! For every test user: score all items, drop the items the user has, keep the top candidates
//! (or the candidates of another policy, [`SelectConfig::candidates`]),
//! clip their scores to the per-item percentile range, and run every mechanism × ε × trial on
//! `(q, Δ)`, each on its own random stream (user, mechanism, ε index, trial) — so results are
//! bit-identical for any number of threads. Work is done in chunks of users written atomically to
//! disk, so a long run can be interrupted and resumed without mixing configurations.
//!
//! With [`NoiseMode::Secure`] (`recsel select --secure`) every selection runs the mechanisms'
//! secure path from OS-seeded generators (one per worker) instead of the seeded streams
//! (`docs/secure.md`); the seed is then unused and the results are not reproducible.
//!
//! The files: `options` declares the job's options ([`SelectOptions`]) and `job` resolves them
//! into a prepared run ([`SelectJob`]); this one holds the resolved configuration
//! ([`SelectConfig`]) and the per-user rows; `runner` selects for a range of users, `chunks` stores the rows resumably and adds
//! mechanisms to a finished run, `analysis` turns the rows into the MSE table, the diagnostics
//! and the advice, and `partition` splits a run over user partitions for clusters.

mod analysis;
mod chunks;
mod job;
mod options;
pub mod partition;
mod runner;

pub use analysis::*;
pub use chunks::*;
pub use job::{Placement, SelectJob};
pub use options::SelectOptions;
pub use runner::*;

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::mechanisms::{self, MechParams, Mechanism, Registry};
use crate::model::{self, Model, ModelParams};
use crate::rng::NoiseMode;
use crate::scoring::{
    top_candidates, CandidateList, CandidatePolicy, PercentileUsers, ResolvedPolicy, ResolvedPrior,
};

/// The ε grid of docs/protocol.md, step 8.
pub const PAPER_EPSILONS: [f64; 11] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// Version of the chunk files' columns (2: `random_mse` and the hit@1 cells), part of the
/// configuration hash.
const CHUNK_LAYOUT: &str = "chunks-v2";

/// Users per resumable chunk.
pub const CHUNK_USERS: usize = 256;

/// Fully resolved settings of one run; its hash keys the resumable chunks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SelectConfig {
    /// Mechanism names, in table order.
    pub mechanisms: Vec<String>,
    /// Mechanism hyperparameters (ε is overridden by each grid point).
    pub params: MechParams,
    /// ε grid.
    pub epsilons: Vec<f64>,
    /// Trials per (user, mechanism, ε).
    pub trials: u32,
    /// Candidates per user.
    pub top: usize,
    /// Another candidate policy than the paper's (`None`: each user's top `top` by score, the
    /// user's items excluded — `history-top:top`). Recorded only when set, so the paper's runs
    /// keep their hash and outputs; `top` is then the policy's number of candidates. Its list
    /// travels with a pickled configuration through [`SelectConfig::candidates_state`].
    #[serde(skip_serializing_if = "Option::is_none", default, skip_deserializing)]
    pub candidates: Option<ResolvedPolicy>,
    /// A public per-item prior whose offsets are added to the candidates' scores before the
    /// mechanisms, per ε (docs/priors.md); `None`: none. Recorded (as the prior's text) only
    /// when set, so the paper's runs keep their hash and outputs; its counts travel with a
    /// pickled configuration through [`SelectConfig::candidates_state`].
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "prior_text",
        default,
        skip_deserializing
    )]
    pub prior: Option<ResolvedPrior>,
    /// Whether scores are clipped to the per-item percentile range (only a clipped run is a DP
    /// release: without clipping Δ_j is an estimate, not a bound).
    pub clip: bool,
    /// Whose scores the per-item percentiles are taken over.
    pub percentile_users: PercentileUsers,
    /// Seed of the random streams.
    pub seed: u64,
    /// Fingerprint (hex) of the data and model the scores come from.
    pub source_fingerprint: String,
    /// Float path with seeded streams, or the secure path (recorded only when secure, so the
    /// configuration hash of fast runs is unchanged).
    #[serde(default, skip_serializing_if = "is_fast")]
    pub noise: NoiseMode,
    /// Where `mechanisms` are looked up: the built-ins by default, plus any mechanism the caller
    /// registered (docs/extending.md). Not part of the hash: the names are.
    #[serde(skip)]
    pub registry: Registry,
}

fn prior_text<S: serde::Serializer>(
    p: &Option<ResolvedPrior>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.collect_str(&p.prior),
        None => s.serialize_none(),
    }
}

fn is_fast(mode: &NoiseMode) -> bool {
    !mode.is_secure()
}

impl SelectConfig {
    /// Whether one of the run's mechanisms can release ⊥ ([`Mechanism::may_release_bottom`]:
    /// `rs-threshold`, `svt`): then the per-user rows and the tables report how often it did.
    pub fn reports_bottom(&self) -> bool {
        let Some(&eps) = self.epsilons.first() else {
            return false;
        };
        self.mechanisms.iter().any(|name| {
            self.registry
                .get(name)
                .and_then(|s| s.build(&self.params.with_epsilon(eps)))
                .is_ok_and(|m| m.may_release_bottom())
        })
    }

    /// Validates the grid and builds every (mechanism, ε) once.
    pub fn build(&self) -> Result<Vec<Vec<Box<dyn Mechanism>>>> {
        if self.epsilons.is_empty() {
            return Err(Error::Invalid("the epsilon grid is empty".into()));
        }
        if self.trials == 0 {
            return Err(Error::Invalid("trials must be at least 1, got 0".into()));
        }
        if self.top == 0 {
            return Err(Error::Invalid("top must be at least 1, got 0".into()));
        }
        let specs = self
            .mechanisms
            .iter()
            .map(|name| self.registry.get(name))
            .collect::<Result<Vec<_>>>()?;
        self.registry.check_names(&self.params.values)?;
        mechanisms::private_candidates::scores::refuse_approximate(
            &specs,
            &self.params,
            "select (it compares eps-DP mechanisms at each eps)",
        )?;
        specs
            .iter()
            .map(|spec| {
                self.epsilons
                    .iter()
                    .map(|&e| {
                        let m = spec.build(&self.params.with_epsilon(e))?;
                        if self.noise.is_secure() {
                            m.secure_epsilon()?; // a secure path exists for this ε
                        }
                        Ok(m)
                    })
                    .collect()
            })
            .collect()
    }

    /// One user's candidates, best score first: the run's policy ([`SelectConfig::candidates`]) on
    /// `scores` for a user who has the items `excluded`.
    pub fn candidate_items(&self, scores: &[f64], excluded: &[u32]) -> Vec<u32> {
        match &self.candidates {
            Some(p) => p.list.items(scores, excluded),
            None => top_candidates(scores, excluded, self.top),
        }
    }

    /// The candidate policy with its resolved list as JSON (`null` for the paper's), which the
    /// configuration's own JSON leaves out: what a copy in another process needs besides it
    /// ([`SelectConfig::with_candidates_state`]).
    /// With a prior, the state is `{"candidates": ..., "prior": ...}` (the prior's counts too).
    pub fn candidates_state(&self) -> String {
        let state = self.candidates.as_ref().map(|c| (&c.policy, &c.list));
        match &self.prior {
            None => serde_json::to_string(&state),
            Some(p) => serde_json::to_string(&serde_json::json!({
                "candidates": state,
                "prior": p,
            })),
        }
        .expect("candidate lists serialise")
    }

    /// This configuration with the candidates (and the prior) of
    /// [`SelectConfig::candidates_state`].
    pub fn with_candidates_state(mut self, state: &str) -> Result<Self> {
        let corrupt =
            |e: serde_json::Error| Error::Invalid(format!("corrupt candidate state: {e}"));
        let value: serde_json::Value = serde_json::from_str(state).map_err(corrupt)?;
        let (candidates, prior) = match value {
            serde_json::Value::Object(mut o) if o.contains_key("prior") => {
                let prior: ResolvedPrior =
                    serde_json::from_value(o.remove("prior").unwrap_or_default())
                        .map_err(corrupt)?;
                (o.remove("candidates").unwrap_or_default(), Some(prior))
            }
            v => (v, None),
        };
        let parsed: Option<(CandidatePolicy, CandidateList)> =
            serde_json::from_value(candidates).map_err(corrupt)?;
        self.candidates = parsed.map(|(policy, list)| ResolvedPolicy { policy, list });
        self.prior = prior;
        Ok(self)
    }

    /// FNV-1a hash of the resolved configuration.
    pub fn hash(&self) -> u64 {
        let mut text = serde_json::to_string(self).expect("configuration serialises");
        // The chunk layout's version: chunks of another layout belong to another configuration.
        text.push_str(CHUNK_LAYOUT);
        // A pool file's items, not only its name: an edited pool is another configuration.
        if let Some(c) = &self.candidates {
            let _ = write!(text, "{:?}", c.list);
        }
        // A prior file's counts, not only its name.
        if let Some(p) = &self.prior {
            let _ = write!(text, "{:?}", p.log_mass);
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }
}

/// One user's results.
#[derive(Debug, Clone, PartialEq)]
pub struct UserRow {
    /// User index among the scorer's users.
    pub user: u64,
    /// Number of candidates.
    pub candidates: u32,
    /// Correlations of the candidates' scores and sensitivities (docs/mechanisms.md, "Correlations").
    pub spearman: f64,
    /// Pearson correlation.
    pub pearson: f64,
    /// Weighted correlation.
    pub weighted: f64,
    /// Best candidate score (after clipping).
    pub max_score: f64,
    /// Mean selected score per (mechanism, ε), mechanism-major.
    pub mean_selected: Vec<f64>,
    /// Mean squared error `(q_selected − q_max)²` per (mechanism, ε), mechanism-major.
    pub mse: Vec<f64>,
    /// The MSE a uniformly random choice has in expectation: the mean of `(q_a − q_max)²` over the
    /// candidates (the denominator of the relative MSE).
    pub random_mse: f64,
    /// Share of the trials whose pick is one of the user's held-out items (hit@1), per
    /// (mechanism, ε), mechanism-major; 0 for a scorer without targets.
    pub hit: Vec<f64>,
    /// Share of the trials whose pick is an item the user already has, per (mechanism, ε) — the
    /// price of a policy that keeps the history among the candidates; empty when the run's
    /// candidates exclude the history (the paper's).
    pub in_history: Vec<f64>,
    /// Share of the trials whose selection was ⊥ — the pick is then the mechanism's uniform
    /// stand-in — per (mechanism, ε), mechanism-major; empty when no mechanism of the run can
    /// release ⊥ ([`SelectConfig::reports_bottom`]).
    pub bottom: Vec<f64>,
}

/// One user's selection problem (docs/protocol.md, steps 5–7): the candidate items (best first),
/// their scores (clipped when the run clips) and their sensitivities Δ_j.
#[derive(Debug, Clone, PartialEq)]
pub struct UserProblem {
    /// Candidate item indices (columns of the data set), best model score first.
    pub items: Vec<u32>,
    /// The candidates' scores q as the mechanisms see them (before a prior's offsets, which
    /// depend on ε).
    pub scores: Vec<f64>,
    /// The candidates' sensitivities Δ.
    pub sens: Vec<f64>,
}

/// Fingerprint of what the scores of a run depend on: the data and the model hyperparameters. A
/// resumed run must match it (see [`ChunkStore::open`]).
pub fn source_fingerprint(data: &Dataset, params: &ModelParams) -> String {
    let text = serde_json::to_string(params).expect("parameters serialise");
    let mut h = data.fingerprint();
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Name of the cache key the runner keeps beside its model: a fingerprint of the data it was
/// fitted on. It is the runner's own working file, checked and rewritten here only; a model
/// directory written by `recsel fit --out` (a release) has none (docs/privacy-report.md).
pub const CACHE_KEY: &str = "data.fingerprint";

/// The model saved in `dir` if it was fitted on `data` (its [`CACHE_KEY`] says so) with
/// `params`, else a fresh fit, saved there. `log` receives one line per decision and fitting
/// stage.
pub fn model_for(
    dir: &Path,
    data: &Dataset,
    params: &ModelParams,
    log: &dyn Fn(&str),
) -> Result<Model> {
    let want = format!("{:016x}", data.fingerprint());
    let key = dir.join(CACHE_KEY);
    if dir.join("model.json").exists() {
        let same_data = std::fs::read_to_string(&key).is_ok_and(|k| k.trim() == want);
        match model::io::load(dir) {
            Ok(_) if !same_data => log(&format!(
                "the model in {} was fitted on other data (or has no {CACHE_KEY}); fitting a \
                 new one",
                dir.display()
            )),
            Ok((m, meta)) if meta.params == *params => {
                log(&format!("using the saved model in {}", dir.display()));
                return Ok(m);
            }
            Ok(_) => log(&format!(
                "the model in {} has other hyperparameters; fitting a new one",
                dir.display()
            )),
            Err(e) => log(&format!(
                "not using the model in {}: {e}; fitting a new one",
                dir.display()
            )),
        }
    } else {
        log(&format!("no saved model in {}; fitting one", dir.display()));
    }
    let (m, report) = model::fit(&data.train, params, &|s| log(&format!("fit: {s} …")))?;
    log(&format!("fitted in {:.1} s", report.total_seconds()));
    model::io::save(dir, &m, params, data.name(), &data.item_ids)?;
    crate::io::write_atomic(&key, want.as_bytes())?;
    Ok(m)
}
