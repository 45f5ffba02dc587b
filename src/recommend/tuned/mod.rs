//! `tuning.json`: the tuned rows a model directory serves, how a requested ε picks one
//! ([`Tuning::choice`]), and how a request for the tuned configuration resolves into a
//! mechanism, ε, pool and prior ([`resolve`]). From format version 3 it also holds each
//! registry mechanism's tuned configuration per ε ([`MechRow`]: pool, clip range, prior) with
//! what it and the untuned configuration are worth on the calibration users, and the clip
//! bounds those rows name are in `tuning.npz` beside it ([`Tuning::bounds`]).
//!
//! The serving side's half of the tuning: `recsel tune` (`crate::evaluate::tuning`) writes this
//! format; serving reads it and never imports the tuner.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::mechanisms::{check_epsilon, MechParams};
use crate::model::io::{crc32, npy_bytes, parse_npy, read_npz, write_npz, FileEntry, NpyArray};
use crate::privacy::PopulationPrivacy;
use crate::rng::NoiseMode;
use crate::scoring::{CandidatePolicy, Prior, Sensitivities};

use crate::recommend::release::{check_bounds, MANIFEST};
use crate::recommend::RecommendConfig;

mod config;
pub mod lists;

pub use config::{
    beats, free_name, mean_se, public_privacy, EstimationSplit, MechGrid, PoolSource, PrivateRule,
    PrivateTuneParams, TuneConfig, DEFAULT_CLIPS, DEFAULT_EPS0, DEFAULT_GAMMA,
    DEFAULT_MECHANISM_PRIOR_WEIGHTS, DEFAULT_PERCENTILE, DEFAULT_POOLS, DEFAULT_SAMPLES,
    DEFAULT_SEARCH_EPSILON, DEFAULT_SEED, DEFAULT_SLACK, DEFAULT_SMOOTHING, DEFAULT_THRESHOLD_STEP,
    DEFAULT_TRIALS,
};

/// The mechanism name that asks for the tuned configuration.
pub const TUNED: &str = "tuned";
/// The tuning file's name, beside `release.json`.
pub const TUNING: &str = "tuning.json";
/// The tuning file's `format` field.
pub const FORMAT: &str = "recsel-tuning";
/// The file of the clip bounds the mechanism rows name, beside `tuning.json`.
pub const BOUNDS: &str = "tuning.npz";
/// Version of the tuning layout (2: a row may carry a prior; 3: each registry mechanism's tuned
/// row, the free baseline's standard error and the clip bounds in `tuning.npz`; 4: the
/// calibration users' privacy entry, and private rows without exact calibration statistics; 5:
/// the best free option, and every estimate on calibration users the choice did not read; 6: the
/// tuned lists of `recsel tune --k K`, [`lists::ListRow`]).
/// Older files are read as they are: rows without a prior, no mechanism rows, not private,
/// estimates on the users the choice was made on.
pub const TUNING_VERSION: u32 = 6;

/// A mean over calibration users and its standard error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The mean.
    pub mean: f64,
    /// Its standard error (sample standard deviation / √users).
    pub se: f64,
}

impl Estimate {
    /// The mean and standard error of `v`.
    pub fn of(v: &[f64]) -> Self {
        let (mean, se) = mean_se(v);
        Estimate { mean, se }
    }

    /// Whether a paired difference is negative by more than `margin` standard errors.
    pub fn below(&self, margin: f64) -> bool {
        self.mean < 0.0 && self.mean < -margin * self.se
    }
}

impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.4} ± {:.4}", self.mean, self.se)
    }
}

/// A registry mechanism's tuned configuration at one ε (`recommend --mech M --eps ε` serves it
/// unless told otherwise), and what it and the untuned configuration (every item, the release's
/// clip range, no prior) are worth on the calibration users.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MechRow {
    /// Registry name.
    pub mechanism: String,
    /// The ε it was tuned at.
    pub epsilon: f64,
    /// The pool (`popular:N`, or for krr its best pool).
    pub candidates: CandidatePolicy,
    /// Clip range, percentiles (LO, HI) of the calibration users' scores, whose bounds are in
    /// `tuning.npz`; `None`: the release's bounds.
    pub clip: Option<(f64, f64)>,
    /// The public prior added to the clipped scores.
    pub prior: Prior,
    /// Calibration hit@1 of the tuned configuration (from version 5 on the estimation part of
    /// the calibration users, which its choice did not read).
    pub hit: Estimate,
    /// Its paired difference to the best free option ([`Tuning::free_option`]; before version
    /// 5 the most popular item) on the same users.
    pub gain: Estimate,
    /// Calibration hit@1 of the untuned configuration (the same users).
    pub untuned_hit: Estimate,
    /// Its paired difference to the best free option.
    pub untuned_gain: Estimate,
}

impl MechRow {
    /// The tuned configuration for people: `popular:N, clip pLO/pHI, prior popularity:W`.
    pub fn describe(&self) -> String {
        let clip = match self.clip {
            Some((lo, hi)) => format!("clip p{lo}/p{hi} of the calibration users"),
            None => "the release's clip range".into(),
        };
        match &self.prior {
            Prior::None => format!("{}, {clip}", self.candidates),
            p => format!("{}, {clip}, prior {p}", self.candidates),
        }
    }
}

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
    /// Mean calibration hit@1 of the best free option (before version 5 the fixed item
    /// `popular:1`, on the users it was chosen on); absent from a private tuning (an exact
    /// statistic of the calibration users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_hit: Option<f64>,
    /// The best free option this row was compared with (`popular:1` or `heldout:1`; from
    /// version 5), and served when nothing beats it by the margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_option: Option<CandidatePolicy>,
    /// Its hit@1 on the estimation part (a private tuning: its noisy held-out estimate, `se` the
    /// noise's standard deviation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_hit: Option<Estimate>,
    /// The best pool of size ≥ 2 on the calibration users, whether chosen or not.
    pub best_pool: CandidatePolicy,
    /// The prior of that best pool.
    #[serde(default)]
    pub best_prior: Prior,
    /// The best pool's calibration mean without a prior (the prior's worth is the difference
    /// to `best_pool_hit`); absent from a private tuning, as are the next three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_no_prior_hit: Option<f64>,
    /// Its mean calibration hit@1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_pool_hit: Option<f64>,
    /// Its paired gain over the best free option on the estimation part (before version 5: over
    /// the fixed item, on the users it was chosen on), and the standard error; in a private
    /// tuning the chosen configuration's noisy held-out gain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_pool_gain: Option<f64>,
    /// Standard error of `best_pool_gain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_pool_gain_se: Option<f64>,
    /// The margin (in paired standard errors) the pool had to clear.
    pub margin: f64,
    /// Why: the pool beat the fixed item by more than the margin, or not (or how the private
    /// selection chose).
    pub reason: String,
    /// What the private selection released for this row (a private tuning only; then
    /// `calibration_hit` is the served configuration's noisy held-out hit@1 and `calibration_se`
    /// its noise's standard deviation, both from released values only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<PrivateRow>,
}

/// What a private tuning released at one ε.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivateRow {
    /// The noisy calibration hit@1 of the chosen configuration, a mean over an exact number of
    /// users: read from files that carry it and shown, never written (the count is not public).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noisy_hit: Option<f64>,
    /// The released noisy calibration score of the chosen configuration: the sum of hit@1 over
    /// the selection users plus the selection's noise (`None`: ⊥, the most popular item served
    /// instead, or a file that carries `noisy_hit` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noisy_score: Option<f64>,
    /// Configurations the selection chose among.
    pub candidates: usize,
    /// The threshold the search found (threshold rule; the sparse vector's own release). The
    /// number of runs of the scoring algorithm (and, for the threshold rule, which run reached
    /// the threshold) is never written: the selection's guarantee covers its choice, not how
    /// many runs it took (docs/private-candidates.md, "Private tuning"). Files that carried a
    /// `runs` field still read, the field ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The served configuration's noisy held-out gain over the best free option on the
    /// estimation users (`se`: the noise and a bound on the sampling error; from version 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<Estimate>,
    /// ε of that held-out estimate on the estimation users (from version 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_epsilon: Option<f64>,
}

/// Who the tuning was computed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningPopulation {
    /// `validation`: users held out of the fit and never served.
    pub population: String,
    /// Calibration users: written by a non-private tuning only. A private tuning does not
    /// publish the count — the keyed split makes it depend on the data, and it is not noised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
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
    /// The free baseline on the calibration users: hit@1 of the best free option (from version
    /// 5 on the estimation part; versions 3 and 4: the most popular training item on every
    /// calibration user).
    #[serde(default)]
    pub free: Option<Estimate>,
    /// The best free option the release offers, chosen on the selection part (from version 5;
    /// before it, `popular:1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_option: Option<CandidatePolicy>,
    /// How the calibration users were cut into a part that chooses and a part that estimates
    /// (from version 5; before it every estimate is on the users the choice was made on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimation: Option<EstimationSplit>,
    /// Each registry mechanism's tuned configuration per ε (from version 3).
    #[serde(default)]
    pub mechanisms: Vec<MechRow>,
    /// The clip ranges whose bounds `tuning.npz` holds, in its order (from version 3).
    #[serde(default)]
    pub clip_ranges: Vec<(f64, f64)>,
    /// `tuning.npz` with its size and CRC-32, when there are clip ranges.
    #[serde(default)]
    pub bounds_file: Option<FileEntry>,
    /// What the tuning protects of the calibration users: their ε (and δ) when the tuning was
    /// private, else an entry saying it was not (files written before version 4 read as not
    /// private, which they were not).
    #[serde(default = "public_privacy")]
    pub privacy: PopulationPrivacy,
    /// The tuned lists per list length k and ε (from version 6; `recsel tune --k K`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lists: Vec<lists::ListRow>,
    /// The bounds of `clip_ranges` (in memory; written to and read from `tuning.npz`).
    #[serde(skip)]
    pub bounds: Vec<Sensitivities>,
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
        let num = |v: Option<f64>| v.map_or_else(|| "?".to_string(), |v| format!("{v:.4}"));
        match &self.row {
            Some(r) if r.private.is_some() => format!(
                "tuned privately ({TUNING}): {} at eps {} (the largest tuned eps <= {}); {}",
                if r.mechanism == "krr" {
                    format!(
                        "krr over '{}'{}",
                        r.candidates,
                        match r.prior {
                            Prior::None => String::new(),
                            ref p => format!(" with the public prior '{p}'"),
                        }
                    )
                } else {
                    free_text(&r.candidates)
                },
                r.epsilon,
                self.requested,
                r.reason
            ),
            Some(r) if r.mechanism == "krr" => format!(
                "tuned ({TUNING}): krr over '{}'{} at eps {} (the largest tuned eps <= {}); \
                 calibration hit@1 {:.4} ± {:.4} against {} for {}",
                r.candidates,
                match r.prior {
                    Prior::None => String::new(),
                    ref p => format!(" with the public prior '{p}'"),
                },
                r.epsilon,
                self.requested,
                r.calibration_hit,
                r.calibration_se,
                num(r.fixed_hit),
                free_text(
                    r.free_option
                        .as_ref()
                        .unwrap_or(&CandidatePolicy::Popular(1))
                )
            ),
            Some(r) => format!(
                "tuned ({TUNING}): {} at eps {} (the largest tuned eps <= {}): no pool beat it \
                 by {} s.e. on the calibration users (best '{}': gain {} ± {})",
                free_text(&r.candidates),
                r.epsilon,
                self.requested,
                r.margin,
                r.best_pool,
                num(r.best_pool_gain),
                num(r.best_pool_gain_se)
            ),
            None => format!(
                "tuned ({TUNING}): {}: eps {} is below the smallest tuned eps",
                free_text(&self.candidates),
                self.requested
            ),
        }
    }
}

/// A free option served by a tuned row, for people.
fn free_text(policy: &CandidatePolicy) -> String {
    free_name(policy)
}

impl Tuning {
    /// How its estimates were made, for people.
    pub fn estimated(&self) -> String {
        match &self.estimation {
            Some(e) => match (e.selection_users, e.estimation_users) {
                (Some(s), Some(n)) => {
                    format!(
                        "chosen on {s} calibration users, estimated on {n} others ({})",
                        e.rule
                    )
                }
                _ => format!(
                    "chosen on one part of the calibration users, estimated on the others ({})",
                    e.rule
                ),
            },
            None => format!(
                "measured on the {} calibration users it was chosen on (optimistic: the best of \
                 many; tuned before the estimation split, run `recsel tune` again)",
                self.calibration
                    .users
                    .map_or_else(|| "(count not published)".into(), |n| n.to_string())
            ),
        }
    }

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
                candidates: self
                    .free_option
                    .clone()
                    .unwrap_or(CandidatePolicy::Popular(1)),
                prior: Prior::None,
            },
        })
    }

    /// The tuned row of registry mechanism `name` at exactly `epsilon`, if there is one.
    pub fn mechanism_row(&self, name: &str, epsilon: f64) -> Option<&MechRow> {
        self.mechanisms
            .iter()
            .find(|r| r.mechanism == name && same_epsilon(r.epsilon, epsilon))
    }

    /// The bounds of clip range `clip` from `dir/tuning.npz` (checked against the recorded
    /// CRC-32), or from memory when the tuning was just made; an error names the stored ranges.
    pub fn bounds(&self, dir: &Path, clip: (f64, f64)) -> Result<Sensitivities> {
        let i = self
            .clip_ranges
            .iter()
            .position(|&c| c == clip)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "clip range {},{}: {TUNING} stores the bounds of {} only (and the release \
                     has its own)",
                    clip.0,
                    clip.1,
                    if self.clip_ranges.is_empty() {
                        "no clip range".to_string()
                    } else {
                        self.clip_ranges
                            .iter()
                            .map(|(lo, hi)| format!("{lo},{hi}"))
                            .collect::<Vec<_>>()
                            .join("; ")
                    }
                ))
            })?;
        if let Some(b) = self.bounds.get(i) {
            return Ok(b.clone());
        }
        let entry = self
            .bounds_file
            .as_ref()
            .ok_or_else(|| Error::Invalid(format!("{TUNING} names clip ranges but no {BOUNDS}")))?;
        let path = dir.join(&entry.name);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        if crc32(&bytes) != entry.crc32 || bytes.len() as u64 != entry.bytes {
            return Err(Error::Invalid(format!(
                "{}: not the file {TUNING} records (size or CRC-32 differ): run `recsel tune` \
                 again",
                path.display()
            )));
        }
        let mut arrays = read_npz(&path, &bytes)?;
        let mut take = |name: String| -> Result<Vec<f64>> {
            let k = arrays
                .iter()
                .position(|(n, _)| n.strip_suffix(".npy").unwrap_or(n) == name)
                .ok_or_else(|| Error::Invalid(format!("{}: no array {name}", path.display())))?;
            let (_, b) = arrays.swap_remove(k);
            match parse_npy(&path, &b)? {
                NpyArray::F64(v) => Ok(v),
                _ => Err(Error::Invalid(format!(
                    "{}: array {name} is not floats",
                    path.display()
                ))),
            }
        };
        let lower = take(format!("lower-{i}"))?;
        let upper = take(format!("upper-{i}"))?;
        let delta = take(format!("delta-{i}"))?;
        let range = format!("clip range {},{}", clip.0, clip.1);
        if lower.len() != upper.len() || lower.len() != delta.len() {
            return Err(Error::Invalid(format!(
                "tuning file {}: {range}: lower-{i}, upper-{i} and delta-{i} have {}, {} and {} \
                 values (need one per item)",
                path.display(),
                lower.len(),
                upper.len(),
                delta.len()
            )));
        }
        // The release's one check of a clip range and its sensitivity: a tuned bound is served
        // exactly like the release's, so it must pass the same test. `recsel tune` writes the
        // spread, or the default floor for a spread of 0.
        let floor = crate::scoring::SensitivityConfig::default().floor;
        for j in 0..lower.len() {
            check_bounds(lower[j], upper[j], delta[j], floor).map_err(|why| {
                Error::Invalid(format!(
                    "tuning file {}: {range}, arrays lower-{i}/upper-{i}/delta-{i}, item {j}: \
                     {why}",
                    path.display()
                ))
            })?;
        }
        let counts = vec![0; lower.len()];
        Ok(Sensitivities {
            lower,
            upper,
            delta,
            counts,
        })
    }

    /// Writes `tuning.json` into the model directory `dir` atomically, after recording the
    /// checksum of the release it was made for; the clip bounds first, into `tuning.npz`.
    pub fn write(&mut self, dir: &Path) -> Result<()> {
        self.release_file = release_entry(dir)?;
        if !self.bounds.is_empty() {
            let mut names = Vec::new();
            let mut arrays = Vec::new();
            for (i, b) in self.bounds.iter().enumerate() {
                for (name, v) in [
                    ("lower", &b.lower),
                    ("upper", &b.upper),
                    ("delta", &b.delta),
                ] {
                    names.push(format!("{name}-{i}.npy"));
                    arrays.push(npy_bytes(&NpyArray::F64(v.clone())));
                }
            }
            let entries: Vec<(&str, Vec<u8>)> =
                names.iter().map(String::as_str).zip(arrays).collect();
            let bytes = write_npz(&entries)?;
            write_atomic(&dir.join(BOUNDS), &bytes)?;
            self.bounds_file = Some(FileEntry {
                name: BOUNDS.into(),
                bytes: bytes.len() as u64,
                crc32: crc32(&bytes),
            });
        }
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Invalid(format!("serialising {TUNING}: {e}")))?;
        write_atomic(&dir.join(TUNING), &json)?;
        // With the release key, the signature now covers the tuning files too.
        let mut names = crate::recommend::Release::signed_files(dir)?;
        names.extend(Self::signed_files(dir));
        crate::recommend::signature::sign_if_keyed(dir, &names)?;
        Ok(())
    }

    /// The tuning's files in `dir` that the release's signature covers: [`TUNING`], and
    /// [`BOUNDS`] when present.
    pub fn signed_files(dir: &Path) -> Vec<String> {
        let mut names = vec![TUNING.to_string()];
        if dir.join(BOUNDS).exists() {
            names.push(BOUNDS.to_string());
        }
        names
    }

    /// The error for a tuned configuration asked of `dir`, which has no `tuning.json`.
    pub fn not_found(dir: &Path) -> Error {
        Error::Invalid(format!(
            "{} not found: choose the serving configuration with `recsel tune --model {} ...`, \
             or name a mechanism (--mech) and candidates",
            dir.join(TUNING).display(),
            dir.display()
        ))
    }

    /// `dir`'s `tuning.json`, read and checked ([`Tuning::read`]), or `None` when there is none:
    /// what a recommender reads once when it is loaded.
    pub fn read_if_any(dir: &Path) -> Result<Option<Self>> {
        if dir.join(TUNING).exists() {
            Self::read(dir).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Reads `tuning.json` from `dir` and checks it belongs to the release there. Errors name
    /// the file and say what to do.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(TUNING);
        let bytes = std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Self::not_found(dir)
            } else {
                Error::io(&path, e)
            }
        })?;
        // With the release key, the tuning files are checked against the release's signature
        // before they are trusted (docs/deployment.md, "Signed releases").
        crate::recommend::signature::check(dir, &Self::signed_files(dir))?;
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
        // The clip ranges are percentile pairs: the check `recsel tune` made when it took them.
        for (k, &(lo, hi)) in t.clip_ranges.iter().enumerate() {
            crate::scoring::SensitivityConfig::new(lo, hi, 1.0).map_err(|_| {
                bad(format!(
                    "clip_ranges[{k}] = [{lo:?}, {hi:?}]: need percentiles 0 <= lo < hi <= 100"
                ))
            })?;
        }
        for m in &t.mechanisms {
            if m.clip.is_some_and(|c| !t.clip_ranges.contains(&c)) {
                return Err(bad(format!(
                    "mechanism row {} at eps {}: clip range {:?} has no stored bounds",
                    m.mechanism, m.epsilon, m.clip
                )));
            }
        }
        if !t.clip_ranges.is_empty() && t.bounds_file.is_none() {
            return Err(bad(format!("clip ranges without {BOUNDS}")));
        }
        for r in &t.lists {
            let m = &r.serves.mechanism;
            if r.k < 2 || r.serves.released < r.k {
                return Err(bad(format!(
                    "list row k {} eps {}: released {} items (need k >= 2 and at least k)",
                    r.k, r.epsilon, r.serves.released
                )));
            }
            if m != lists::PUBLIC && crate::mechanisms::spec(m).is_err() {
                return Err(bad(format!(
                    "list row k {} eps {}: mechanism '{m}' ({} or a registry mechanism)",
                    r.k,
                    r.epsilon,
                    lists::PUBLIC
                )));
            }
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

/// Whether two ε are the same tuned value (a relative tolerance for text round trips).
pub fn same_epsilon(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
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
/// of `tuning`'s row for `cfg`'s ε. An error when `cfg` also names candidates (the tuning
/// chooses them) or `tuning` has no row for it.
pub fn resolve(tuning: &Tuning, cfg: &RecommendConfig) -> Result<(RecommendConfig, TunedChoice)> {
    refuse_given(cfg)?;
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

/// The error for what the tuned configuration chooses itself but `cfg` gives: candidates or a
/// prior.
fn refuse_given(cfg: &RecommendConfig) -> Result<()> {
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
    Ok(())
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
