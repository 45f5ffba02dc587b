//! The release artifact (docs/deployment.md, "The release artifact"): what a service needs beside
//! the model to make private recommendations — per-item clip bounds `p1_j`, `p99_j` and
//! sensitivities `Δ_j` (derived from the model, or — leaky — calibrated on users who are never
//! served), with the item id map, the model's
//! hyperparameters and the provenance in one versioned manifest.
//!
//! A model directory that holds a release has two more files:
//!
//! * `release.json` — the manifest ([`ReleaseManifest`]);
//! * `calibration.npz` — five 1-D arrays over the item columns: `p1` and `p99` (`<f8`), `delta`
//!   (`<f8`), `count` (`<i8`, how many calibration scores each percentile was taken over) and
//!   `popularity` (`<i8`, each item's interactions in the training data: the public ranking of the
//!   `popular:N` candidate policy), and from format version 3, when the data gives it, `heldout`
//!   (`<i8`, how many users fitted on hold each item out in the data's own split: the ranking of
//!   `heldout:N`). Format version 1 had no `popularity`, version 2 no `heldout`; both are still
//!   read, and only a policy that needs the missing ranking refuses them.
//! * `privacy.json` (from format version 4) — the release's privacy report
//!   ([`PrivacyReport`], docs/privacy-report.md).
//!
//! From version 4 the manifest records how the statistics were made ([`Statistics`]): by default
//! no exact user statistic is in the release (clip ranges derived from the model alone, counts
//! with discrete Laplace noise; [`super::release_statistics`]); exact percentiles and counts only with
//! `--release-statistics exact-leaky`, which every report and statement calls leaky. A release
//! without the field (versions 1–3) holds exact statistics and is reported so.
//!
//! Both are written atomically, the arrays first and the manifest last, so a crash never leaves a
//! directory that looks complete; the manifest records the CRC-32 of `model.json` and of the
//! arrays, so a release cannot be served with a model it was not calibrated for. A CRC detects
//! accidents, not edits: with a release key the release is also signed and checked
//! ([`super::signature`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::data::{select_rows, Csr, Dataset};
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::model::io::{crc32, npy_bytes, parse_npy, read_npz, write_npz, FileEntry, NpyArray};
use crate::model::{Model, ModelParams};
use crate::scoring::{item_sensitivities, ModelScorer, Sensitivities, SensitivityConfig};

pub use super::release_statistics::Statistics;
use super::release_statistics::{capped_counts, model_bounds, private_counts};
use crate::privacy::report::{training_public, Part, PrivacyReport, PRIVACY};

/// Version of the release layout (2: `popularity` in the arrays; 3: `heldout` may be; 4:
/// `statistics` in the manifest and `privacy.json`).
pub const RELEASE_VERSION: u32 = 4;
/// The oldest layout version this recsel reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// The manifest's file name.
pub const MANIFEST: &str = "release.json";
/// The arrays' file name.
pub const ARRAYS: &str = "calibration.npz";
/// The manifest's `format` field.
pub const FORMAT: &str = "recsel-release";
/// Calibration users at most (docs/deployment.md, "Calibration").
pub const DEFAULT_CALIBRATION_USERS: usize = 10_000;

/// Who the per-item percentiles were computed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// `validation` (held-out users the model was not fitted on) or `train` (the training users,
    /// when the split has no validation users). Never the served (test) users.
    pub population: String,
    /// Calibration users scored: written with exact statistics only (they are scored then, and
    /// the release says it is leaky). With private statistics no calibration user is read, and
    /// their number — which the keyed split makes depend on the data — is not published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
    /// Lower percentile (1).
    pub lower_percentile: f64,
    /// Upper percentile (99).
    pub upper_percentile: f64,
    /// Sensitivity floor for a zero spread.
    pub floor: f64,
}

/// Content of `release.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseManifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Layout version ([`RELEASE_VERSION`]).
    pub format_version: u32,
    /// recsel version that wrote it.
    pub recsel_version: String,
    /// Data set the model was fitted on.
    pub dataset: String,
    /// The random identifier of the model this release was written for (as in `model.json`:
    /// [`crate::model::io::new_release_id`]), never a hash of the data. Empty in releases
    /// written before it existed; their `data_fingerprint` field is ignored on reading.
    #[serde(default)]
    pub release_id: String,
    /// The model's hyperparameters.
    pub model_params: ModelParams,
    /// `model.json` with its size and CRC-32: the model this release was calibrated for.
    pub model_file: FileEntry,
    /// Number of item columns.
    pub n_items: usize,
    /// Original id of each item column.
    pub item_ids: Vec<String>,
    /// Who the percentiles were computed on, and how.
    pub calibration: Calibration,
    /// The arrays file and the privacy report with their sizes and CRC-32s.
    pub files: Vec<FileEntry>,
    /// How the clip ranges and counts were made; absent before version 4 (exact statistics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<Statistics>,
    /// How the users were put in training, calibration and test (the split's public inputs and
    /// rule); absent in releases written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<crate::data::SplitRule>,
}

impl ReleaseManifest {
    /// How the statistics were made: as recorded, or exact for a release written before they
    /// were recorded.
    pub fn statistics(&self) -> Statistics {
        self.statistics.clone().unwrap_or(Statistics::ExactLeaky)
    }
}

/// A loaded (or freshly calibrated) release: the manifest and the per-item bounds.
#[derive(Debug, Clone)]
pub struct Release {
    /// The manifest.
    pub manifest: ReleaseManifest,
    /// `p1_j`, `p99_j`, `Δ_j` and the score counts.
    pub sens: Sensitivities,
    /// Interactions per item column in the training data; `None` in a version-1 release.
    pub popularity: Option<Vec<u64>>,
    /// Per item column, how many users fitted on hold the item out in the data's own split
    /// ([`Dataset::heldout_popularity`]); `None` when the data has none, or before version 3.
    pub heldout: Option<Vec<u64>>,
    /// The release-time privacy report (`privacy.json`); `None` before version 4.
    pub privacy: Option<PrivacyReport>,
    /// Whether the release was checked against the release key ([`super::signature`]).
    pub signature: super::signature::Status,
}

/// The calibration users of `data`: its validation users if it has any, else its training users;
/// at most `max_users` of them, taken at an even stride (no randomness: the choice is a pure
/// function of the split). Returns the rows and the population's name.
pub fn calibration_rows(data: &Dataset, max_users: usize) -> (Csr, &'static str) {
    let (m, name) = if data.validation.rows() > 0 {
        (&data.validation, "validation")
    } else {
        (&data.train, "train")
    };
    let n = m.rows();
    let k = max_users.max(1).min(n);
    let rows: Vec<usize> = (0..k).map(|i| i * n / k).collect();
    (select_rows(m, &rows), name)
}

/// Computes the release statistics of `model`. With [`Statistics::Private`] (the
/// [`super::release_statistics`] module): clip ranges from the model alone and DP counts, noise from the
/// operating system's entropy; the recorded ε is the one the sampler used. With
/// [`Statistics::ExactLeaky`]: the per-item percentiles of the calibration users of `data` (never
/// its test users, who stand for the served ones) and exact counts. `progress` receives users
/// done.
pub fn calibrate(
    model: &Model,
    params: &ModelParams,
    data: &Dataset,
    max_users: usize,
    cfg: &SensitivityConfig,
    statistics: &Statistics,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Release> {
    let (rows, population) = calibration_rows(data, max_users);
    if rows.rows() == 0 {
        return Err(Error::Invalid(format!(
            "data set '{}' has no validation or training users to calibrate on",
            data.name()
        )));
    }
    let exact = matches!(statistics, Statistics::ExactLeaky);
    let (sens, popularity, heldout, statistics) = match statistics {
        Statistics::ExactLeaky => {
            let scorer = ModelScorer::new(model, &rows);
            (
                item_sensitivities(&scorer, cfg, progress),
                crate::scoring::policy::popularity(&data.train),
                data.heldout_popularity.clone(),
                Statistics::ExactLeaky,
            )
        }
        Statistics::Private {
            history_cap,
            count_cap,
            count_epsilon,
            ..
        } => {
            let sens = model_bounds(model, *history_cap, cfg.floor)?;
            // OS noise, unless the whole-release audit seeded every release's noise.
            let mut rng = match crate::rng::audit_noise_seed() {
                Some(s) => crate::rng::SecureRng::from_seed_insecure(s ^ 0x636f_756e_7473),
                None => crate::rng::SecureRng::from_os()?,
            };
            // Which of a long row's items are counted: a public seed and the row's own items.
            let key = super::release_statistics::COUNT_CAP_SEED;
            let (popularity, used) = private_counts(
                &capped_counts(&data.train, *count_cap, key),
                *count_cap,
                *count_epsilon,
                &mut rng,
            )?;
            let heldout = match &data.heldout_rows {
                Some(h) => Some(
                    private_counts(
                        &capped_counts(h, *count_cap, key ^ 1),
                        *count_cap,
                        *count_epsilon,
                        &mut rng,
                    )?
                    .0,
                ),
                None => None,
            };
            (
                sens,
                popularity,
                heldout,
                Statistics::Private {
                    history_cap: *history_cap,
                    count_cap: *count_cap,
                    count_epsilon: used,
                    popularity_from_fit: false,
                },
            )
        }
    };
    let manifest = ReleaseManifest {
        format: FORMAT.into(),
        format_version: RELEASE_VERSION,
        recsel_version: env!("CARGO_PKG_VERSION").into(),
        dataset: data.name().into(),
        release_id: String::new(),
        model_params: *params,
        model_file: FileEntry {
            name: "model.json".into(),
            bytes: 0,
            crc32: 0,
        },
        n_items: model.n_items(),
        item_ids: data.item_ids.clone(),
        calibration: Calibration {
            population: population.into(),
            users: exact.then_some(rows.rows() as u64),
            lower_percentile: cfg.lower,
            upper_percentile: cfg.upper,
            floor: cfg.floor,
        },
        files: Vec::new(),
        statistics: Some(statistics),
        split: Some(data.split_rule.clone()),
    };
    Ok(Release {
        manifest,
        sens,
        popularity: Some(popularity),
        heldout,
        privacy: None,
        signature: super::signature::Status::Unsigned,
    })
}

/// Relative slack of the check `Δ_j ≥ p99_j − p1_j`: a writer that computes the spread in
/// another order may round it one or two ulps differently. It lets the true ε exceed the stated
/// one by a factor of at most 1 + 1e-12.
pub const SPREAD_TOLERANCE: f64 = 1e-12;

/// Whether one item's clip range `[lo, hi]` and sensitivity `d` can be served: all finite,
/// `lo ≤ hi`, a finite spread `hi − lo`, `d ≥ hi − lo` (within [`SPREAD_TOLERANCE`]) — every
/// two clipped scores of the item then differ by at most `d`, which is what the mechanisms'
/// ε assumes — and `d ≥ floor` when the spread is 0 (as `recsel fit` writes it: `Δ_j` is the
/// spread, or the floor for a spread of 0). The error gives the numbers.
pub fn check_bounds(lo: f64, hi: f64, d: f64, floor: f64) -> std::result::Result<(), String> {
    let numbers = || format!("p1 = {lo:e}, p99 = {hi:e}, delta = {d:e}");
    if !(lo.is_finite() && hi.is_finite() && d.is_finite()) {
        return Err(format!("{}: need finite values", numbers()));
    }
    if lo > hi {
        return Err(format!("{}: need p1 <= p99", numbers()));
    }
    let spread = hi - lo;
    if !spread.is_finite() {
        return Err(format!(
            "{}: the clip range p99 - p1 is not a finite number, so no sensitivity bounds it",
            numbers()
        ));
    }
    if d < spread * (1.0 - SPREAD_TOLERANCE) {
        return Err(format!(
            "{}: delta is smaller than the clip range p99 - p1 = {spread:e}, so two users' \
             clipped scores can differ by more than delta and the stated eps does not hold \
             (refit, or rewrite the release)",
            numbers()
        ));
    }
    if d <= 0.0 || (spread == 0.0 && d < floor) {
        return Err(format!(
            "{}: delta is below the release's sensitivity floor {floor:e}",
            numbers()
        ));
    }
    Ok(())
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("release file {}: {what}", path.display()))
}

impl Release {
    /// The popularity counts of a release with private statistics replaced by the item counts a
    /// DP fit on an item set already released (`noisy`, one per item, in interactions: stage 1
    /// of [`fit_private_with_items`](crate::model::dp_items::fit_private_with_items)), rounded
    /// and floored at 0 — post-processing, so the report lists them at no extra ε. A release
    /// with the exact statistics is left as it is (it says it is leaky).
    pub fn use_fit_popularity(&mut self, noisy: &[f64]) -> Result<()> {
        if noisy.len() != self.manifest.n_items {
            return Err(Error::Invalid(format!(
                "{} item counts for a release of {} items",
                noisy.len(),
                self.manifest.n_items
            )));
        }
        if let Some(Statistics::Private {
            popularity_from_fit,
            ..
        }) = &mut self.manifest.statistics
        {
            *popularity_from_fit = true;
            self.popularity = Some(noisy.iter().map(|&c| c.round().max(0.0) as u64).collect());
        }
        Ok(())
    }

    /// The inputs this release declares public: what it was built from that no guarantee
    /// covers because it is not anyone's data (docs/privacy-report.md, "Public inputs").
    pub fn public_inputs(&self) -> Vec<String> {
        let m = &self.manifest;
        let mut out = Vec::new();
        match &m.split {
            Some(s) => {
                out.push(format!(
                "the split: seed {}, test share {}, validation share {} (each user's group by a \
                 keyed hash of their own id)",
                s.seed.map_or_else(|| "none (the files' own split)".into(), |x| x.to_string()),
                s.test_share.map_or_else(|| "-".into(), |x| x.to_string()),
                s.validation_share.map_or_else(|| "-".into(), |x| x.to_string()),
            ))
            }
            None => out.push("the split: not recorded in this release".into()),
        }
        if let Some(n) = m.calibration.users {
            out.push(format!(
                "the number of {} users the clip ranges were calibrated on, {n}: released \
                 exactly with the exact (leaky) statistics, so declared public",
                m.calibration.population
            ));
        }
        out.push(format!(
            "the model's hyperparameters ({:?}, l2 {}, density {}) and the statistics' settings",
            m.model_params.method, m.model_params.l2, m.model_params.density
        ));
        out.push(
            "the release identifier: random (the operating system's), not derived from the data"
                .into(),
        );
        out
    }

    /// The release-time privacy report: the training users' entry of `model.json` (`training`;
    /// `None`: treated as public) and the entries of the statistics.
    pub fn report_of(&self, training: Option<&crate::privacy::PopulationPrivacy>) -> PrivacyReport {
        let mut parts = vec![Part {
            part: crate::privacy::report::MODEL_WEIGHTS.into(),
            privacy: training.cloned().unwrap_or_else(training_public),
        }];
        let legacy = self.manifest.statistics.is_none();
        for (part, p) in self
            .manifest
            .statistics()
            .parts(legacy, self.heldout.is_some())
        {
            parts.push(Part { part, privacy: p });
        }
        let mut r = PrivacyReport::new(Vec::new());
        for p in parts {
            r = r.with(&p.part, p.privacy);
        }
        r.public_inputs = self.public_inputs();
        r.populations = crate::privacy::report::population_rules(
            self.manifest.split.as_ref().map(|s| s.rule.as_str()),
            &self.manifest.calibration.population,
        );
        r
    }

    /// [`Release::report_of`] the model's `model.json`: its training entry and, when it has
    /// one, its item universe entry (a public catalogue, a DP output, or data-derived).
    pub fn report_of_meta(&self, meta: &crate::model::io::ModelMeta) -> PrivacyReport {
        let mut r = self.report_of(meta.training_privacy.as_ref());
        if let Some(c) = &meta.shift_choice {
            r = r.with(crate::privacy::report::SHIFT_CHOICE, c.privacy.clone());
            r.public_inputs.push(format!(
                "the grid of the DP fit's shifts K ({}), fitted from one noisy Gram matrix; which \
                 one the model is, is a DP output of the calibration users (part `{}`)",
                c.grid
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::privacy::report::SHIFT_CHOICE
            ));
        }
        match &meta.item_universe {
            Some(u) => {
                let mut r = r.with(crate::model::options::ITEM_UNIVERSE, u.clone());
                if u.unit == crate::model::options::PUBLIC_INPUT_UNIT {
                    r.public_inputs.insert(
                        1,
                        format!(
                            "the item universe: the declared catalogue of {} items (--catalogue)",
                            self.manifest.n_items
                        ),
                    );
                }
                r
            }
            None => r,
        }
    }

    /// Writes `calibration.npz`, `privacy.json` and then `release.json` into the model directory
    /// `dir`, which must already hold the model's `model.json` (its checksum is recorded, and its
    /// training entry goes into the privacy report).
    pub fn write(&mut self, dir: &Path) -> Result<()> {
        let model_json = dir.join("model.json");
        let bytes = std::fs::read(&model_json).map_err(|e| Error::io(&model_json, e))?;
        let meta: crate::model::io::ModelMeta =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(&model_json, e))?;
        self.manifest.release_id = meta.release_id.clone();
        self.manifest.model_file = FileEntry {
            name: "model.json".into(),
            bytes: bytes.len() as u64,
            crc32: crc32(&bytes),
        };
        let s = &self.sens;
        let counts: Vec<i64> = s.counts.iter().map(|&c| c as i64).collect();
        let mut entries = vec![
            ("p1.npy", npy_bytes(&NpyArray::F64(s.lower.clone()))),
            ("p99.npy", npy_bytes(&NpyArray::F64(s.upper.clone()))),
            ("delta.npy", npy_bytes(&NpyArray::F64(s.delta.clone()))),
            ("count.npy", npy_bytes(&NpyArray::I64(counts))),
        ];
        // A release without popularity (read from version 1) is written as version 1.
        let ints = |c: &[u64]| NpyArray::I64(c.iter().map(|&c| c as i64).collect());
        self.manifest.format_version = match &self.popularity {
            Some(p) => {
                entries.push(("popularity.npy", npy_bytes(&ints(p))));
                RELEASE_VERSION
            }
            None => 1,
        };
        if let (Some(h), Some(_)) = (&self.heldout, &self.popularity) {
            entries.push(("heldout.npy", npy_bytes(&ints(h))));
        }
        let arrays = write_npz(&entries)?;
        write_atomic(&dir.join(ARRAYS), &arrays)?;
        let report = self.report_of_meta(&meta);
        let report_bytes = report.to_json().into_bytes();
        write_atomic(&dir.join(PRIVACY), &report_bytes)?;
        self.privacy = Some(report);
        self.manifest.files = vec![
            FileEntry {
                name: ARRAYS.into(),
                bytes: arrays.len() as u64,
                crc32: crc32(&arrays),
            },
            FileEntry {
                name: PRIVACY.into(),
                bytes: report_bytes.len() as u64,
                crc32: crc32(&report_bytes),
            },
        ];
        let json = serde_json::to_vec_pretty(&self.manifest)
            .map_err(|e| Error::Invalid(format!("serialising {MANIFEST}: {e}")))?;
        write_atomic(&dir.join(MANIFEST), &json)?;
        self.signature = super::signature::sign_if_keyed(dir, &Self::signed_files(dir)?)?;
        Ok(())
    }

    /// The files of the release in `dir` that its signature covers ([`super::signature`]):
    /// `model.json` and the weight files it lists, and [`MANIFEST`] and the files it lists.
    pub fn signed_files(dir: &Path) -> Result<Vec<String>> {
        let mut names = vec!["model.json".to_string(), MANIFEST.to_string()];
        names.extend(super::signature::listed_files(&dir.join("model.json"))?);
        names.extend(super::signature::listed_files(&dir.join(MANIFEST))?);
        Ok(names)
    }

    /// Reads and checks the release in the model directory `dir`: format and version, the
    /// checksums of `model.json` and of the arrays, array lengths and values (finite bounds,
    /// `p1 ≤ p99`, and a `Δ` that bounds the clip range: [`check_bounds`]). Errors name the
    /// file, the item and the bad values. Every reader of a release (serve, recommend, Python,
    /// the audit) goes through here.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Invalid(format!(
                    "{} not found: write a release with `recsel fit ... --out {}`",
                    path.display(),
                    dir.display()
                ))
            } else {
                Error::io(&path, e)
            }
        })?;
        // With the release key, every file is checked against its signature before any is
        // trusted (docs/deployment.md, "Signed releases").
        let signature = super::signature::check(dir, &Self::signed_files(dir)?)?;
        let manifest: ReleaseManifest =
            serde_json::from_slice(&text).map_err(|e| corrupt(&path, e))?;
        if manifest.format != FORMAT
            || !(OLDEST_READABLE_VERSION..=RELEASE_VERSION).contains(&manifest.format_version)
        {
            return Err(corrupt(
                &path,
                format!(
                    "format '{}' version {} (this recsel reads '{FORMAT}' versions \
                     {OLDEST_READABLE_VERSION} to {RELEASE_VERSION})",
                    manifest.format, manifest.format_version
                ),
            ));
        }
        let check = |entry: &FileEntry| -> Result<Vec<u8>> {
            let p = dir.join(&entry.name);
            let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
            let crc = crc32(&bytes);
            if crc != entry.crc32 || bytes.len() as u64 != entry.bytes {
                return Err(corrupt(
                    &p,
                    format!(
                        "{} bytes with CRC-32 {crc:08x}, but {MANIFEST} records {} bytes with \
                         {:08x}: the file changed after the release was written (refit, or \
                         rewrite the release)",
                        bytes.len(),
                        entry.bytes,
                        entry.crc32
                    ),
                ));
            }
            Ok(bytes)
        };
        check(&manifest.model_file)?;
        let entry = manifest
            .files
            .iter()
            .find(|f| f.name == ARRAYS)
            .ok_or_else(|| corrupt(&path, format!("no entry for {ARRAYS}")))?;
        let bytes = check(entry)?;
        let privacy = match manifest.files.iter().find(|f| f.name == PRIVACY) {
            Some(e) => {
                check(e)?;
                Some(PrivacyReport::read(dir)?)
            }
            None if manifest.format_version >= 4 => {
                return Err(corrupt(&path, format!("no entry for {PRIVACY}")))
            }
            None => None,
        };
        let apath = dir.join(ARRAYS);
        let n = manifest.n_items;
        if manifest.item_ids.len() != n {
            return Err(corrupt(
                &path,
                format!("{} item ids for {n} items", manifest.item_ids.len()),
            ));
        }
        let mut f64s = std::collections::HashMap::new();
        let mut counts = None;
        let mut popularity = None;
        let mut heldout = None;
        let counts_of = |name: &str, v: Vec<i64>| -> Result<Vec<u64>> {
            if v.len() != n || v.iter().any(|&c| c < 0) {
                return Err(corrupt(
                    &apath,
                    format!(
                        "{name} has {} values for {n} items, or a negative count",
                        v.len()
                    ),
                ));
            }
            Ok(v.into_iter().map(|c| c as u64).collect())
        };
        for (name, data) in read_npz(&apath, &bytes)? {
            match parse_npy(&apath, &data)? {
                NpyArray::F64(v) => {
                    f64s.insert(name, v);
                }
                NpyArray::I64(v) if name == "count.npy" => {
                    counts = Some(v.into_iter().map(|c| c.max(0) as u64).collect::<Vec<_>>())
                }
                NpyArray::I64(v) if name == "popularity.npy" => {
                    popularity = Some(counts_of("popularity", v)?)
                }
                NpyArray::I64(v) if name == "heldout.npy" && manifest.format_version >= 3 => {
                    heldout = Some(counts_of("heldout", v)?)
                }
                _ => {
                    return Err(corrupt(
                        &apath,
                        format!("entry {name} has an unexpected type"),
                    ))
                }
            }
        }
        let mut take = |name: &str| -> Result<Vec<f64>> {
            let v = f64s
                .remove(name)
                .ok_or_else(|| corrupt(&apath, format!("no array {name}")))?;
            if v.len() != n {
                return Err(corrupt(
                    &apath,
                    format!("{name} has {} values for {n} items", v.len()),
                ));
            }
            Ok(v)
        };
        let (lower, upper, delta) = (take("p1.npy")?, take("p99.npy")?, take("delta.npy")?);
        let floor = manifest.calibration.floor;
        if !(floor.is_finite() && floor > 0.0) {
            return Err(corrupt(
                &path,
                format!("calibration.floor = {floor} (need a finite floor > 0)"),
            ));
        }
        for j in 0..n {
            check_bounds(lower[j], upper[j], delta[j], floor).map_err(|why| {
                corrupt(
                    &apath,
                    format!("item {j} ('{}'): {why}", manifest.item_ids[j]),
                )
            })?;
        }
        let counts = counts.unwrap_or_else(|| vec![0; n]);
        if manifest.format_version >= 2 && popularity.is_none() {
            return Err(corrupt(&apath, "no array popularity.npy"));
        }
        Ok(Release {
            manifest,
            sens: Sensitivities {
                lower,
                upper,
                delta,
                counts,
            },
            popularity,
            heldout,
            privacy,
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DP fit's item counts replace the popularity of a release with private statistics
    /// (rounded, floored at 0) and its report part then costs no ε; the held-out counts keep
    /// theirs; a leaky release keeps its exact counts; a wrong length is refused.
    #[test]
    fn the_fit_popularity_replaces_the_private_counts() {
        let data = crate::recommend::example_data().unwrap();
        let params = ModelParams::new(crate::model::Method::Exact, 50.0, 0.1).unwrap();
        let (model, _) = crate::model::fit(&data.train, &params, &|_| {}).unwrap();
        let n = model.n_items();
        let noisy: Vec<f64> = (0..n).map(|j| j as f64 * 0.7 - 2.4).collect();
        let want: Vec<u64> = noisy.iter().map(|&c| c.round().max(0.0) as u64).collect();
        let cfg = SensitivityConfig::default();
        let private = Statistics::Private {
            history_cap: 5,
            count_cap: 5,
            count_epsilon: 1.0,
            popularity_from_fit: false,
        };
        let mut r = calibrate(&model, &params, &data, 50, &cfg, &private, &|_| {}).unwrap();
        let part = |r: &Release, name: &str| {
            r.manifest
                .statistics()
                .parts(false, true)
                .into_iter()
                .find(|(p, _)| p == name)
                .unwrap()
                .1
        };
        assert_eq!(part(&r, "popularity counts").epsilon, Some(1.0));
        assert!(r.use_fit_popularity(&noisy[1..]).is_err());
        r.use_fit_popularity(&noisy).unwrap();
        assert_eq!(r.popularity.as_deref(), Some(&want[..]));
        let p = part(&r, "popularity counts");
        assert_eq!(p.epsilon, Some(0.0));
        assert!(p.mechanism.contains("derived from the DP fit, no extra ε"));
        assert_eq!(part(&r, "held-out counts").epsilon, Some(1.0));

        let mut leaky = calibrate(
            &model,
            &params,
            &data,
            50,
            &cfg,
            &Statistics::ExactLeaky,
            &|_| {},
        )
        .unwrap();
        let exact = leaky.popularity.clone();
        leaky.use_fit_popularity(&noisy).unwrap();
        assert_eq!(leaky.popularity, exact);
        assert!(part(&leaky, "popularity counts").epsilon.is_none());
    }

    #[test]
    fn a_sensitivity_must_bound_the_clip_range_within_the_rounding_slack() {
        let floor = 1e-6;
        // As fit writes them: the spread, or the floor for a spread of 0 (also a spread below
        // the floor, which is its own bound).
        assert!(check_bounds(0.1, 0.4, 0.4 - 0.1, floor).is_ok());
        assert!(check_bounds(2.0, 2.0, floor, floor).is_ok());
        assert!(check_bounds(0.0, 1e-9, 1e-9, floor).is_ok());
        assert!(check_bounds(0.0, 1.0, 1.0 - 1e-14, floor).is_ok());
        // Beyond the slack, below the floor for a zero range, or no finite range: refused,
        // with the numbers.
        for (lo, hi, d) in [
            (0.0, 1.0, 1.0 - 1e-9),
            (0.0, 1.0, 1e-12),
            (2.0, 2.0, 1e-12),
            (-1e308, 1e308, 1e-6),
            (0.0, 1.0, f64::NAN),
            (1.0, 0.0, 2.0),
            (0.0, 0.0, 0.0),
        ] {
            let e = check_bounds(lo, hi, d, floor).unwrap_err();
            assert!(e.contains("delta = ") && e.contains("p99 = "), "{e}");
        }
    }
}
