//! `tuning.json`: the tuned rows a model directory serves, how a requested ε picks one
//! ([`Tuning::choice`]), and how a request for the tuned configuration resolves into a
//! mechanism, ε, pool and prior ([`resolve`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::mechanisms::{check_epsilon, MechParams};
use crate::model::io::{crc32, FileEntry};
use crate::rng::NoiseMode;
use crate::scoring::{CandidatePolicy, Prior};

use super::super::release::MANIFEST;
use super::super::RecommendConfig;
use super::{TuneConfig, FORMAT, TUNED, TUNING, TUNING_VERSION};

/// The choice at one ε.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedRow {
    /// The ε this row serves (requests for ε ≥ it use it, up to the next row).
    pub epsilon: f64,
    /// `krr` over the pool, or `random` over the one fixed item (0-DP).
    pub mechanism: String,
    /// The pool: `popular:N` or `heldout:N`.
    pub candidates: CandidatePolicy,
    /// The public prior krr's argmax adds (`none`, or `popularity:W`).
    #[serde(default)]
    pub prior: Prior,
    /// The ε a recommendation spends: `epsilon` for krr, 0 for the fixed item.
    pub spends: f64,
    /// Mean calibration hit@1 of the choice, and its standard error over calibration users.
    pub calibration_hit: f64,
    /// Standard error of `calibration_hit`.
    pub calibration_se: f64,
    /// Mean calibration hit@1 of the fixed item (`popular:1`).
    pub fixed_hit: f64,
    /// The best pool of size ≥ 2 on the calibration users, whether chosen or not.
    pub best_pool: CandidatePolicy,
    /// The prior of that best pool.
    #[serde(default)]
    pub best_prior: Prior,
    /// The best pool's calibration mean without a prior (the prior's worth is the difference
    /// to `best_pool_hit`).
    #[serde(default)]
    pub best_no_prior_hit: f64,
    /// Its mean calibration hit@1.
    pub best_pool_hit: f64,
    /// Its paired gain over the fixed item (mean over calibration users), and the standard error.
    pub best_pool_gain: f64,
    /// Standard error of `best_pool_gain`.
    pub best_pool_gain_se: f64,
    /// The margin (in paired standard errors) the pool had to clear.
    pub margin: f64,
    /// Why: the pool beat the fixed item by more than the margin, or not.
    pub reason: String,
}

/// Who the tuning was computed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningPopulation {
    /// `validation`: users held out of the fit and never served.
    pub population: String,
    /// Calibration users.
    pub users: u64,
    /// How their held-out items were obtained.
    pub split: String,
}

/// Content of `tuning.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// Always [`FORMAT`].
    pub format: String,
    /// Layout version ([`TUNING_VERSION`]).
    pub format_version: u32,
    /// recsel version that wrote it.
    pub recsel_version: String,
    /// `release.json` with its size and CRC-32: the release this tuning was made for.
    pub release_file: FileEntry,
    /// The calibration users.
    pub calibration: TuningPopulation,
    /// The grid searched.
    pub config: TuneConfig,
    /// One row per ε, ascending.
    pub rows: Vec<TunedRow>,
}

/// The choice [`Tuning::choice`] makes for a requested ε.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedChoice {
    /// The ε asked for.
    pub requested: f64,
    /// The tuned row used (`None`: below the smallest tuned ε, the fixed item).
    pub row: Option<TunedRow>,
    /// Mechanism to serve with.
    pub mechanism: String,
    /// Its ε (for `random`, the requested ε, which it does not spend).
    pub epsilon: f64,
    /// The pool.
    pub candidates: CandidatePolicy,
    /// The public prior added to the scores (`none` but for a tuned prior).
    pub prior: Prior,
}

impl TunedChoice {
    /// One clause for the privacy statement.
    pub fn describe(&self) -> String {
        match &self.row {
            Some(r) if r.mechanism == "krr" => format!(
                "tuned ({TUNING}): krr over '{}'{} at eps {} (the largest tuned eps <= {}); \
                 calibration hit@1 {:.4} ± {:.4} against {:.4} for the most popular item",
                r.candidates,
                match r.prior {
                    Prior::None => String::new(),
                    ref p => format!(" with the public prior '{p}'"),
                },
                r.epsilon,
                self.requested,
                r.calibration_hit,
                r.calibration_se,
                r.fixed_hit
            ),
            Some(r) => format!(
                "tuned ({TUNING}): the most popular item to everyone (0-DP) at eps {} (the \
                 largest tuned eps <= {}): no pool beat it by {} s.e. on the calibration users \
                 (best '{}': gain {:+.4} ± {:.4})",
                r.epsilon,
                self.requested,
                r.margin,
                r.best_pool,
                r.best_pool_gain,
                r.best_pool_gain_se
            ),
            None => format!(
                "tuned ({TUNING}): the most popular item to everyone (0-DP): eps {} is below \
                 the smallest tuned eps",
                self.requested
            ),
        }
    }
}

impl Tuning {
    /// The row of the largest tuned ε not above `epsilon` (never spends more than asked), or
    /// the fixed item below the smallest.
    pub fn choice(&self, epsilon: f64) -> Result<TunedChoice> {
        check_epsilon(epsilon)?;
        let row = self
            .rows
            .iter()
            .filter(|r| r.epsilon <= epsilon)
            .max_by(|a, b| a.epsilon.total_cmp(&b.epsilon))
            .cloned();
        Ok(match row {
            Some(r) => TunedChoice {
                requested: epsilon,
                mechanism: r.mechanism.clone(),
                epsilon: if r.mechanism == "krr" {
                    r.epsilon
                } else {
                    epsilon
                },
                candidates: r.candidates.clone(),
                prior: if r.mechanism == "krr" {
                    r.prior.clone()
                } else {
                    Prior::None
                },
                row: Some(r),
            },
            None => TunedChoice {
                requested: epsilon,
                row: None,
                mechanism: "random".into(),
                epsilon,
                candidates: CandidatePolicy::Popular(1),
                prior: Prior::None,
            },
        })
    }

    /// Writes `tuning.json` into the model directory `dir` atomically, after recording the
    /// checksum of the release it was made for.
    pub fn write(&mut self, dir: &Path) -> Result<()> {
        self.release_file = release_entry(dir)?;
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Invalid(format!("serialising {TUNING}: {e}")))?;
        write_atomic(&dir.join(TUNING), &json)
    }

    /// Reads `tuning.json` from `dir` and checks it belongs to the release there. Errors name
    /// the file and say what to do.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(TUNING);
        let bytes = std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Invalid(format!(
                    "{} not found: choose the serving configuration with `recsel tune --model \
                     {} ...`, or name a mechanism (--mech) and candidates",
                    path.display(),
                    dir.display()
                ))
            } else {
                Error::io(&path, e)
            }
        })?;
        let bad = |m: String| Error::Invalid(format!("tuning file {}: {m}", path.display()));
        let t: Tuning = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if t.format != FORMAT || !(1..=TUNING_VERSION).contains(&t.format_version) {
            return Err(bad(format!(
                "format '{}' version {} (this recsel reads '{FORMAT}' versions 1 to \
                 {TUNING_VERSION})",
                t.format, t.format_version
            )));
        }
        let now = release_entry(dir)?;
        if now != t.release_file {
            return Err(bad(format!(
                "made for another release ({} bytes, CRC-32 {:08x}; {MANIFEST} now has {} bytes, \
                 {:08x}): run `recsel tune` again",
                t.release_file.bytes, t.release_file.crc32, now.bytes, now.crc32
            )));
        }
        if t.rows.is_empty() || t.rows.windows(2).any(|w| w[0].epsilon >= w[1].epsilon) {
            return Err(bad("rows must be non-empty with ascending eps".into()));
        }
        for r in &t.rows {
            if !matches!(r.mechanism.as_str(), "krr" | "random") {
                return Err(bad(format!(
                    "row eps {}: mechanism '{}' (krr or random)",
                    r.epsilon, r.mechanism
                )));
            }
            if !matches!(r.prior, Prior::None | Prior::Popularity(_)) {
                return Err(bad(format!(
                    "row eps {}: prior '{}' (none or popularity:W)",
                    r.epsilon, r.prior
                )));
            }
        }
        Ok(t)
    }
}

fn release_entry(dir: &Path) -> Result<FileEntry> {
    let p = dir.join(MANIFEST);
    let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
    Ok(FileEntry {
        name: MANIFEST.into(),
        bytes: bytes.len() as u64,
        crc32: crc32(&bytes),
    })
}

/// The configuration a [`TUNED`] request stands for: `cfg` with the mechanism, ε and candidates
/// of the tuned row for `cfg`'s ε. An error when `cfg` also names candidates (the tuning chooses
/// them) or the directory has no valid `tuning.json`.
pub fn resolve(dir: &Path, cfg: &RecommendConfig) -> Result<(RecommendConfig, TunedChoice)> {
    if cfg.candidates != CandidatePolicy::All {
        return Err(Error::Invalid(format!(
            "candidates '{}' with the tuned configuration: the tuning chooses the candidates; \
             name a mechanism to choose them yourself",
            cfg.candidates
        )));
    }
    if cfg.prior.weight() > 0.0 {
        return Err(Error::Invalid(format!(
            "prior '{}' with the tuned configuration: the tuning chooses the prior; name a \
             mechanism to choose it yourself",
            cfg.prior
        )));
    }
    let tuning = Tuning::read(dir)?;
    let choice = tuning.choice(cfg.params.epsilon)?;
    let mut out = cfg.clone();
    out.mechanism = choice.mechanism.clone();
    out.params = MechParams {
        epsilon: choice.epsilon,
        ..cfg.params.clone()
    };
    out.candidates = choice.candidates.clone();
    out.prior = choice.prior.clone();
    Ok((out, choice))
}

/// A recommendation configuration that asks for the tuned choice at `epsilon`.
pub fn tuned_config(epsilon: f64, noise: NoiseMode) -> RecommendConfig {
    RecommendConfig::new(
        TUNED,
        MechParams {
            epsilon,
            ..Default::default()
        },
        noise,
    )
}
