//! The tuned serving configuration (docs/utility.md, "Tuning"): per ε, k-randomised response over
//! a small public pool — the N most popular items, or the N items most often held out by the
//! users fitted on — or the single most popular item (0-DP) when no pool beats it on the
//! calibration users by a margin. `recsel tune` writes it as `tuning.json` beside the release;
//! `recommend`, `serve` and the Python `Recommender` use it when no mechanism is named
//! (mechanism [`TUNED`]).
//!
//! The tuner reads only the calibration users ([`HeldOutRows`]: users held out of the fit and
//! never served): [`tune`] has no argument through which a served user could enter. Its
//! computation is exact: for krr over the first N items P[..N] of a public ranking, a user with
//! held-out items T gets
//!
//! `hit(N, ε) = (|T ∩ P[..N]| + (e^ε − 1)·a) / (e^ε + N − 1)`,
//!
//! where `a` is the share of held-out items among the argmax set of the user's clipped scores
//! over P[..N] — the law `recsel recommend` serves (the release's clip bounds, ties uniform).
//! One pass over each user's first `max(N)` ranked items gives every N and every ε at once.

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::{row_items, HeldOutRows};
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::mechanisms::{check_epsilon, MechParams};
use crate::model::io::{crc32, FileEntry};
use crate::model::Model;
use crate::rng::NoiseMode;
use crate::scoring::{CandidatePolicy, ModelScorer, UserScorer};

use super::release::{Release, MANIFEST};
use super::RecommendConfig;

/// The mechanism name that asks for the tuned configuration.
pub const TUNED: &str = "tuned";
/// The tuning file's name, beside `release.json`.
pub const TUNING: &str = "tuning.json";
/// The tuning file's `format` field.
pub const FORMAT: &str = "recsel-tuning";
/// Version of the tuning layout.
pub const TUNING_VERSION: u32 = 1;
/// The ε grid tuned by default.
pub const DEFAULT_EPSILONS: [f64; 6] = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0];
/// The pool sizes tried by default (1 is the fixed item).
pub const DEFAULT_POOL_SIZES: [usize; 15] =
    [1, 2, 3, 5, 8, 12, 20, 30, 50, 80, 120, 200, 300, 500, 1000];
/// Standard errors of calibration gain a pool must show over the fixed item (default).
pub const DEFAULT_MARGIN: f64 = 2.0;

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

/// What [`tune`] searches.
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
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            epsilons: DEFAULT_EPSILONS.to_vec(),
            sources: vec![PoolSource::Popularity, PoolSource::Heldout],
            pool_sizes: DEFAULT_POOL_SIZES.to_vec(),
            margin: DEFAULT_MARGIN,
        }
    }
}

impl TuneConfig {
    /// Checks the grid: ε valid, sizes ≥ 1, margin ≥ 0 and finite, something to try.
    pub fn validate(&self) -> Result<()> {
        if self.epsilons.is_empty() || self.sources.is_empty() || self.pool_sizes.is_empty() {
            return Err(Error::Invalid(
                "tuning needs at least one eps, one pool source and one pool size".into(),
            ));
        }
        for &e in &self.epsilons {
            check_epsilon(e)?;
        }
        if self.pool_sizes.contains(&0) {
            return Err(Error::Invalid(
                "pool sizes must be at least 1, got 0".into(),
            ));
        }
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            return Err(Error::Invalid(format!(
                "the margin must be a finite number >= 0, got {}",
                self.margin
            )));
        }
        Ok(())
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
}

impl TunedChoice {
    /// One clause for the privacy statement.
    pub fn describe(&self) -> String {
        match &self.row {
            Some(r) if r.mechanism == "krr" => format!(
                "tuned ({TUNING}): krr over '{}' at eps {} (the largest tuned eps <= {}); \
                 calibration hit@1 {:.4} ± {:.4} against {:.4} for the most popular item",
                r.candidates,
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
                row: Some(r),
            },
            None => TunedChoice {
                requested: epsilon,
                row: None,
                mechanism: "random".into(),
                epsilon,
                candidates: CandidatePolicy::Popular(1),
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
        if t.format != FORMAT || t.format_version != TUNING_VERSION {
            return Err(bad(format!(
                "format '{}' version {} (this recsel reads '{FORMAT}' version {TUNING_VERSION})",
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
    let tuning = Tuning::read(dir)?;
    let choice = tuning.choice(cfg.params.epsilon)?;
    let mut out = cfg.clone();
    out.mechanism = choice.mechanism.clone();
    out.params = MechParams {
        epsilon: choice.epsilon,
        ..cfg.params.clone()
    };
    out.candidates = choice.candidates.clone();
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

/// A public ranking: the columns by descending count, ties by column (the order `popular:N`
/// takes its top N in), the first `n` of them.
pub fn ranking(counts: &[u64], n: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..counts.len() as u32).collect();
    order.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]).then(a.cmp(&b)));
    order.truncate(n);
    order
}

/// For one user and one ranking: at each pool size of `sizes` (ascending), `(c, a)` with `c` the
/// held-out items among the first N ranked items and `a` the share of held-out items in the
/// argmax set of the clipped scores `q(j)` over them.
pub fn prefix_stats(
    rank: &[u32],
    sizes: &[usize],
    q: &dyn Fn(u32) -> f64,
    targets: &[u32],
    out: &mut Vec<(f64, f64)>,
) {
    let (mut best, mut tied, mut tied_hits, mut c) = (f64::NEG_INFINITY, 0u32, 0u32, 0u32);
    let mut next = 0;
    for (i, &j) in rank.iter().enumerate() {
        let v = q(j);
        let hit = targets.binary_search(&j).is_ok();
        c += u32::from(hit);
        if v > best {
            (best, tied, tied_hits) = (v, 1, u32::from(hit));
        } else if v == best {
            tied += 1;
            tied_hits += u32::from(hit);
        }
        while next < sizes.len() && sizes[next] == i + 1 {
            out.push((f64::from(c), f64::from(tied_hits) / f64::from(tied)));
            next += 1;
        }
    }
}

/// Exact hit@1 of krr at `epsilon` over a pool of `n` items, from [`prefix_stats`]'s `(c, a)`:
/// `(c + (e^ε − 1) a) / (e^ε + n − 1)`, computed without overflow.
pub fn krr_hit(c: f64, a: f64, n: usize, epsilon: f64) -> f64 {
    if n == 1 {
        return c;
    }
    let z = (-epsilon).exp();
    (c * z + (1.0 - z) * a) / (1.0 + (n as f64 - 1.0) * z)
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

/// Users scored together.
const BLOCK: usize = 64;

/// `f(user, scores)` for every user of `history` scored by `model`, in parallel, in user order.
pub fn map_scored<T: Send>(
    model: &Model,
    history: &crate::data::Csr,
    f: &(dyn Fn(usize, &[f64]) -> T + Sync),
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<T> {
    let scorer = ModelScorer::new(model, history);
    let n = scorer.n_users();
    let m = scorer.n_items();
    let blocks: Vec<std::ops::Range<usize>> = (0..n)
        .step_by(BLOCK)
        .map(|a| a..(a + BLOCK).min(n))
        .collect();
    blocks
        .into_par_iter()
        .map_init(
            || (scorer.scratch(), Vec::new()),
            |(scratch, buf), r| {
                buf.resize(r.len() * m, 0.0);
                scorer.score_block(r.clone(), buf, scratch);
                let out: Vec<T> = r
                    .clone()
                    .zip(buf.chunks(m.max(1)))
                    .map(|(u, s)| f(u, s))
                    .collect();
                progress(r.len() as u64);
                out
            },
        )
        .flatten()
        .collect()
}

/// Chooses the serving configuration per ε on the calibration users `cal` (never on a served
/// user: nothing else about users enters). See the module documentation for the computation and
/// docs/utility.md for the rule. The result's `release_file` is filled in by [`Tuning::write`].
pub fn tune(
    model: &Model,
    release: &Release,
    cal: &HeldOutRows,
    cfg: &TuneConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Tuning> {
    cfg.validate()?;
    if cal.rows() < 2 {
        return Err(Error::Invalid(format!(
            "tuning needs at least 2 calibration users, got {}",
            cal.rows()
        )));
    }
    let n_items = model.n_items();
    let popularity = release.popularity.as_deref().ok_or_else(|| {
        Error::Invalid(
            "tuning needs the release's training popularity (format version 2 or later): write \
             the release again with `recsel fit ... --out DIR`"
                .into(),
        )
    })?;
    let mut sources: Vec<PoolSource> = Vec::new();
    for &s in &cfg.sources {
        if s.counts(release).is_some() && !sources.contains(&s) {
            sources.push(s);
        }
    }
    let mut sizes: Vec<usize> = cfg
        .pool_sizes
        .iter()
        .copied()
        .filter(|&n| n <= n_items)
        .collect();
    sizes.push(1);
    sizes.sort_unstable();
    sizes.dedup();
    let max = *sizes.last().expect("at least size 1");
    let ranks: Vec<Vec<u32>> = sources
        .iter()
        .map(|s| ranking(s.counts(release).expect("kept above"), max))
        .collect();
    let fixed_item = ranking(popularity, 1)[0];
    let sens = &release.sens;
    // Per user: (c, a) per (source, size), and whether the fixed item is held out.
    let stats: Vec<(Vec<(f64, f64)>, f64)> = map_scored(
        model,
        &cal.history,
        &|u, s| {
            let targets = row_items(&cal.heldout, u);
            let q = |j: u32| sens.clip(j as usize, s[j as usize]);
            let mut out = Vec::with_capacity(ranks.len() * sizes.len());
            for r in &ranks {
                prefix_stats(r, &sizes, &q, targets, &mut out);
            }
            let fixed = f64::from(u8::from(targets.binary_search(&fixed_item).is_ok()));
            (out, fixed)
        },
        progress,
    );
    let fixed: Vec<f64> = stats.iter().map(|s| s.1).collect();
    let (fixed_hit, _) = mean_se(&fixed);
    let mut epsilons = cfg.epsilons.clone();
    epsilons.sort_by(f64::total_cmp);
    epsilons.dedup();
    let mut rows = Vec::new();
    for &eps in &epsilons {
        // The best pool of size >= 2 by calibration mean (ties: the first source, the smaller
        // pool), with its per-user hits.
        let mut best: Option<(usize, usize, f64, Vec<f64>)> = None;
        for (si, _) in sources.iter().enumerate() {
            for (ni, &n) in sizes.iter().enumerate() {
                if n < 2 {
                    continue;
                }
                let idx = si * sizes.len() + ni;
                let hits: Vec<f64> = stats
                    .iter()
                    .map(|(v, _)| krr_hit(v[idx].0, v[idx].1, n, eps))
                    .collect();
                let (m, _) = mean_se(&hits);
                if best.as_ref().is_none_or(|b| m > b.2) {
                    best = Some((si, n, m, hits));
                }
            }
        }
        let fixed_policy = CandidatePolicy::Popular(1);
        let row = match best {
            Some((si, n, m, hits)) => {
                let diff: Vec<f64> = hits.iter().zip(&fixed).map(|(h, f)| h - f).collect();
                let (gain, gain_se) = mean_se(&diff);
                let pool = sources[si].policy(n);
                let (hm, hse) = mean_se(&hits);
                let (fm, fse) = mean_se(&fixed);
                let wins = gain > cfg.margin * gain_se && gain > 0.0;
                TunedRow {
                    epsilon: eps,
                    mechanism: if wins { "krr" } else { "random" }.into(),
                    candidates: if wins { pool.clone() } else { fixed_policy },
                    spends: if wins { eps } else { 0.0 },
                    calibration_hit: if wins { hm } else { fm },
                    calibration_se: if wins { hse } else { fse },
                    fixed_hit,
                    best_pool: pool,
                    best_pool_hit: m,
                    best_pool_gain: gain,
                    best_pool_gain_se: gain_se,
                    margin: cfg.margin,
                    reason: format!(
                        "the best pool's calibration gain {gain:+.4} ± {gain_se:.4} is {} {} \
                         s.e. and positive",
                        if wins { "above" } else { "not above" },
                        cfg.margin
                    ),
                }
            }
            None => {
                let (fm, fse) = mean_se(&fixed);
                TunedRow {
                    epsilon: eps,
                    mechanism: "random".into(),
                    candidates: fixed_policy.clone(),
                    spends: 0.0,
                    calibration_hit: fm,
                    calibration_se: fse,
                    fixed_hit,
                    best_pool: fixed_policy,
                    best_pool_hit: fm,
                    best_pool_gain: 0.0,
                    best_pool_gain_se: 0.0,
                    margin: cfg.margin,
                    reason: "no pool of two or more items to try (one item)".into(),
                }
            }
        };
        rows.push(row);
    }
    Ok(Tuning {
        format: FORMAT.into(),
        format_version: TUNING_VERSION,
        recsel_version: env!("CARGO_PKG_VERSION").into(),
        release_file: FileEntry {
            name: MANIFEST.into(),
            bytes: 0,
            crc32: 0,
        },
        calibration: TuningPopulation {
            population: cal.population.into(),
            users: cal.rows() as u64,
            split: cal.split.clone(),
        },
        config: TuneConfig {
            epsilons,
            sources,
            pool_sizes: sizes,
            margin: cfg.margin,
        },
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_stats_track_ties_and_counts() {
        let rank = [5u32, 2, 9, 0];
        let scores = [0.3, 0.0, 0.9, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.9];
        let q = |j: u32| scores[j as usize];
        let mut out = Vec::new();
        prefix_stats(&rank, &[1, 2, 3, 4], &q, &[0, 9], &mut out);
        // N=1: {5} argmax 5, no hit; N=2: argmax 2; N=3: 2 and 9 tie (one of two a hit).
        assert_eq!(out, vec![(0.0, 0.0), (0.0, 0.0), (1.0, 0.5), (2.0, 0.5)]);
        assert_eq!(krr_hit(1.0, 0.5, 1, 1.0), 1.0);
        let e = 2f64.exp();
        assert!((krr_hit(2.0, 0.5, 4, 2.0) - (2.0 + (e - 1.0) * 0.5) / (e + 3.0)).abs() < 1e-12);
        assert!(krr_hit(1.0, 1.0, 10, 1e6).is_finite());
    }
}
