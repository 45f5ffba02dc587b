//! The real-data private-selection experiment (docs/protocol.md, steps 5–9, seed 001 §VIII, figure 13).
//!
//! For every test user: score all items, drop the items the user has, keep the top candidates,
//! clip their scores to the per-item percentile range, and run every mechanism × ε × trial on
//! `(q, Δ)`, each on its own random stream (user, mechanism, ε index, trial) — so results are
//! bit-identical for any number of threads. Work is done in chunks of users written atomically to
//! disk, so a long run can be interrupted and resumed without mixing configurations.
//!
//! With [`NoiseMode::Secure`] (`recsel select --secure`) every selection runs the mechanisms'
//! secure path from OS-seeded generators (one per worker) instead of the seeded streams
//! (`docs/secure.md`); the seed is then unused and the results are not reproducible.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::mechanisms::{self, MechParams, Mechanism, Problem, Registry, Selector};
use crate::model::{self, Model, ModelParams};
use crate::rng::{name_id, Draws, NoiseMode, SecureRng, Streams};
use crate::scoring::{
    top_candidates, CandidateCache, Candidates, PercentileUsers, Sensitivities, UserScorer,
};
use crate::stats::{pearson, spearman, weighted_correlation};

/// The ε grid of docs/protocol.md, step 8.
pub const PAPER_EPSILONS: [f64; 11] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// Fully resolved settings of one run; its hash keys the resumable chunks.
#[derive(Debug, Clone, Serialize)]
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
    #[serde(skip_serializing_if = "is_fast")]
    pub noise: NoiseMode,
    /// Where `mechanisms` are looked up: the built-ins by default, plus any mechanism the caller
    /// registered (docs/extending.md). Not part of the hash: the names are.
    #[serde(skip)]
    pub registry: Registry,
}

fn is_fast(mode: &NoiseMode) -> bool {
    !mode.is_secure()
}

impl SelectConfig {
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
        mechanisms::check_extra_params(&specs, &self.params)?;
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

    /// FNV-1a hash of the resolved configuration.
    pub fn hash(&self) -> u64 {
        let mut text = serde_json::to_string(self).expect("configuration serialises");
        // The chunk layout's version: chunks of another layout belong to another configuration.
        text.push_str(CHUNK_LAYOUT);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }
}

/// Validates a mechanism list and an ε grid before any data is read (`recsel run --check`).
pub fn check_grid(mechanisms: &str, epsilons: &[f64]) -> Result<()> {
    Registry::builtin().parse_list(mechanisms)?;
    for &e in epsilons {
        mechanisms::check_epsilon(e)?;
    }
    Ok(())
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
}

/// One user's selection problem (docs/protocol.md, steps 5–7): the candidate items (best first),
/// their scores (clipped when the run clips) and their sensitivities Δ_j.
#[derive(Debug, Clone, PartialEq)]
pub struct UserProblem {
    /// Candidate item indices (columns of the data set), best model score first.
    pub items: Vec<u32>,
    /// The candidates' scores q as the mechanisms see them.
    pub scores: Vec<f64>,
    /// The candidates' sensitivities Δ.
    pub sens: Vec<f64>,
}

/// The problem [`run_user`] runs the mechanisms on for `user`; `None` if the user has no
/// candidate (or no valid problem).
pub fn user_problem<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    user: usize,
    scores: &mut [f64],
    scratch: &mut S::Scratch,
) -> Option<UserProblem> {
    scorer.score(user, scores, scratch);
    let Candidates {
        items,
        scores: q,
        deltas: d,
    } = Candidates::new(scores, scorer.excluded(user), sens, cfg.top, cfg.clip);
    if items.is_empty() {
        return None;
    }
    Problem::new(&q, &d).ok()?;
    Some(UserProblem {
        items,
        scores: q,
        sens: d,
    })
}

/// Every user's problem, in user order, with the user's index (users without one are left out,
/// as in the results). `progress` receives users done.
pub fn all_problems<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<(usize, UserProblem)> {
    let n = scorer.n_users();
    let mut out = Vec::with_capacity(n);
    for start in (0..n).step_by(CHUNK_USERS) {
        let end = (start + CHUNK_USERS).min(n);
        let chunk: Vec<Option<(usize, UserProblem)>> = (start..end)
            .into_par_iter()
            .map_init(
                || (vec![0.0; scorer.n_items()], scorer.scratch()),
                |(buf, scratch), u| {
                    user_problem(scorer, sens, cfg, u, buf, scratch).map(|p| (u, p))
                },
            )
            .collect();
        out.extend(chunk.into_iter().flatten());
        progress((end - start) as u64);
    }
    out
}

/// Runs every mechanism × ε × trial for one user, drawing from `draws` (of `cfg.noise`'s mode);
/// `None` if the user has no candidate. Errors only on the secure path, for inputs beyond its
/// exact 128-bit arithmetic.
#[allow(clippy::too_many_arguments)]
pub fn run_user<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    user: usize,
    scores: &mut [f64],
    scratch: &mut S::Scratch,
    draws: &mut Draws,
) -> Result<Option<UserRow>> {
    scorer.score(user, scores, scratch);
    let items = top_candidates(scores, scorer.excluded(user), cfg.top);
    let problem = Candidates::from_items(scores, items, sens, cfg.clip);
    run_problem(scorer, cfg, mechs, user, problem, draws)
}

/// What one user adds to the candidate pass of the diagnostics ([`candidate_pass_range`]): its
/// candidates, their raw (unclipped) scores and the bound rule's bits.
#[derive(Debug, Clone, Default)]
struct UserPass {
    items: Vec<u32>,
    raw: Vec<f64>,
    mask: u64,
}

/// [`run_user`] that also returns the user's part of the candidate pass, from the same scores and
/// candidates (docs/real-data.md, "Memory and time"); the candidates come from `cache` when it
/// holds the user (kept by the sensitivity pass for the same `top`), else from scoring.
#[allow(clippy::too_many_arguments)]
fn run_user_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    user: usize,
    scores: &mut [f64],
    scratch: &mut S::Scratch,
    draws: &mut Draws,
    cache: Option<&CandidateCache>,
) -> Result<(Option<UserRow>, UserPass)> {
    let (items, raw) = match cache.and_then(|c| c.get(user)) {
        Some((items, raw)) => (items.to_vec(), raw.to_vec()),
        None => {
            scorer.score(user, scores, scratch);
            let items = top_candidates(scores, scorer.excluded(user), cfg.top);
            let raw = items.iter().map(|&j| scores[j as usize]).collect();
            (items, raw)
        }
    };
    let problem = Candidates::from_raw(items, &raw, sens, cfg.clip);
    let pass = UserPass {
        raw,
        mask: bound_mask(&problem.scores, &problem.deltas, cfg),
        items: problem.items.clone(),
    };
    Ok((run_problem(scorer, cfg, mechs, user, problem, draws)?, pass))
}

/// The bound rule's bit at every ε of `cfg` (the first 64) for the problem `(q, d)`; 0 when empty.
fn bound_mask(q: &[f64], d: &[f64], cfg: &SelectConfig) -> u64 {
    let mut mask = 0u64;
    if !q.is_empty() {
        for (e, &eps) in cfg.epsilons.iter().enumerate().take(64) {
            if crate::stats::bounds::mgem_bound_at_least_gem(q, d, eps, cfg.params.beta) {
                mask |= 1 << e;
            }
        }
    }
    mask
}

/// Runs every mechanism × ε × trial on one user's candidates; `None` when there is no candidate
/// or no valid problem.
fn run_problem<S: UserScorer>(
    scorer: &S,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    user: usize,
    candidates: Candidates,
    draws: &mut Draws,
) -> Result<Option<UserRow>> {
    let Candidates {
        items,
        scores: q,
        deltas: d,
    } = candidates;
    if items.is_empty() {
        return Ok(None);
    }
    let Ok(problem) = Problem::new(&q, &d) else {
        return Ok(None);
    };
    let qmax = problem.max_score();
    let targets = scorer.targets(user);
    // Whether each candidate is one of the user's held-out items, looked up once per user.
    let is_target: Vec<bool> = items
        .iter()
        .map(|i| targets.binary_search(i).is_ok())
        .collect();
    let mut mean_selected = Vec::with_capacity(mechs.len() * cfg.epsilons.len());
    let mut mse = Vec::with_capacity(mean_selected.capacity());
    let mut hit = Vec::with_capacity(mean_selected.capacity());
    for per_eps in mechs {
        for (e, mech) in per_eps.iter().enumerate() {
            let selector = Selector::new(&**mech, &problem, cfg.noise)?;
            let id = name_id(mech.name());
            let (mut sum, mut sq, mut hits) = (0.0, 0.0, 0u32);
            selector.sample_trials(draws, id, e as u32, user as u64, 0..cfg.trials, |_, a| {
                let v = q[a];
                sum += v;
                sq += (v - qmax) * (v - qmax);
                hits += u32::from(is_target[a]);
            });
            mean_selected.push(sum / f64::from(cfg.trials));
            mse.push(sq / f64::from(cfg.trials));
            hit.push(f64::from(hits) / f64::from(cfg.trials));
        }
    }
    Ok(Some(UserRow {
        user: user as u64,
        candidates: q.len() as u32,
        spearman: spearman(&q, &d),
        pearson: pearson(&q, &d),
        weighted: weighted_correlation(&q, &d),
        max_score: qmax,
        mean_selected,
        mse,
        random_mse: q.iter().map(|v| (v - qmax) * (v - qmax)).sum::<f64>() / q.len() as f64,
        hit,
    }))
}

/// Column names of the per-user table.
pub fn user_header(cfg: &SelectConfig) -> String {
    let mut h = String::from("user,candidates,spearman,pearson,weighted,max_score");
    for m in &cfg.mechanisms {
        for e in &cfg.epsilons {
            let _ = write!(h, ",mean_{m}_eps{e}");
        }
    }
    for m in &cfg.mechanisms {
        for e in &cfg.epsilons {
            let _ = write!(h, ",mse_{m}_eps{e}");
        }
    }
    h.push_str(",random_mse");
    for m in &cfg.mechanisms {
        for e in &cfg.epsilons {
            let _ = write!(h, ",hit_{m}_eps{e}");
        }
    }
    h
}

/// One line of the per-user table.
pub fn user_line(r: &UserRow) -> String {
    // `{}` prints the shortest representation that parses back to the same f64: chunk files
    // round-trip exactly, so resumed and uninterrupted runs give identical tables.
    let mut s = format!(
        "{},{},{},{},{},{}",
        r.user, r.candidates, r.spearman, r.pearson, r.weighted, r.max_score
    );
    for v in r.mean_selected.iter().chain(&r.mse) {
        let _ = write!(s, ",{v}");
    }
    let _ = write!(s, ",{}", r.random_mse);
    for v in &r.hit {
        let _ = write!(s, ",{v}");
    }
    s
}

/// Parses one line of the per-user table ([`user_line`]) with `cells` (mechanism, ε) pairs;
/// errors name `path` (or what the text came from) and the line.
pub fn parse_line(path: &Path, line_no: usize, line: &str, cells: usize) -> Result<UserRow> {
    let bad = |m: String| Error::Parse {
        context: format!("{} line {}", path.display(), line_no),
        message: m,
    };
    let f: Vec<&str> = line.split(',').collect();
    if f.len() != 7 + 3 * cells {
        return Err(bad(format!(
            "expected {} fields, found {}",
            7 + 3 * cells,
            f.len()
        )));
    }
    let num = |i: usize| -> Result<f64> {
        f[i].parse::<f64>()
            .map_err(|_| bad(format!("field {} is '{}', not a number", i + 1, f[i])))
    };
    let user = f[0].parse().map_err(|_| bad(format!("user '{}'", f[0])))?;
    let candidates = f[1]
        .parse()
        .map_err(|_| bad(format!("candidates '{}'", f[1])))?;
    let vals: Result<Vec<f64>> = (6..f.len()).map(num).collect();
    let vals = vals?;
    Ok(UserRow {
        user,
        candidates,
        spearman: num(2)?,
        pearson: num(3)?,
        weighted: num(4)?,
        max_score: num(5)?,
        mean_selected: vals[..cells].to_vec(),
        mse: vals[cells..2 * cells].to_vec(),
        random_mse: vals[2 * cells],
        hit: vals[2 * cells + 1..].to_vec(),
    })
}

/// Version of the chunk files' columns (2: `random_mse` and the hit@1 cells), part of the
/// configuration hash.
const CHUNK_LAYOUT: &str = "chunks-v2";

/// Users per resumable chunk.
pub const CHUNK_USERS: usize = 256;

/// Resumable storage of per-user results under `<out>/chunks/`.
#[derive(Debug)]
pub struct ChunkStore {
    dir: PathBuf,
}

impl ChunkStore {
    /// Opens (or starts) the store for `cfg`. An existing store of a different configuration is
    /// an error unless `force`, which deletes it.
    pub fn open(out: &Path, cfg: &SelectConfig, force: bool) -> Result<Self> {
        let dir = out.join("chunks");
        let manifest = dir.join("manifest.json");
        let hash = format!("{:016x}", cfg.hash());
        if force && dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        if manifest.exists() {
            let text = std::fs::read_to_string(&manifest).map_err(|e| Error::io(&manifest, e))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Parse {
                context: manifest.display().to_string(),
                message: e.to_string(),
            })?;
            if v["config_hash"] != hash.as_str() {
                return Err(Error::Invalid(format!(
                    "{} holds results of a different configuration (hash {} vs {hash}); \
                     rerun with --force to start over, or choose another --out",
                    dir.display(),
                    v["config_hash"]
                )));
            }
        } else {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let body = serde_json::json!({ "config_hash": hash, "config": cfg });
            write_atomic(
                &manifest,
                serde_json::to_string_pretty(&body).unwrap().as_bytes(),
            )?;
        }
        Ok(ChunkStore { dir })
    }

    fn path(&self, chunk: usize) -> PathBuf {
        self.dir.join(format!("users-{chunk:07}.csv"))
    }

    /// Whether chunk `chunk` is done.
    pub fn done(&self, chunk: usize) -> bool {
        self.path(chunk).exists()
    }

    /// Stores a finished chunk atomically.
    pub fn write(&self, chunk: usize, header: &str, rows: &[UserRow]) -> Result<()> {
        let mut text = String::with_capacity(rows.len() * 256);
        text.push_str(header);
        text.push('\n');
        for r in rows {
            text.push_str(&user_line(r));
            text.push('\n');
        }
        write_atomic(&self.path(chunk), text.as_bytes())
    }

    /// The seed recorded by an earlier run in `out`, if any (so a rerun without `--seed` resumes).
    pub fn stored_seed(out: &Path) -> Option<u64> {
        let text = std::fs::read_to_string(out.join("chunks").join("manifest.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["config"]["seed"].as_u64()
    }

    /// Reads a finished chunk.
    pub fn read(&self, chunk: usize, cells: usize) -> Result<Vec<UserRow>> {
        let path = self.path(chunk);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        text.lines()
            .enumerate()
            .skip(1)
            .map(|(i, l)| parse_line(&path, i + 1, l, cells))
            .collect()
    }
}

/// Runs (or resumes) the experiment over all users; `progress` receives users done (including
/// those found on disk). Returns every user's row in user order and the number of users without
/// candidates.
pub fn run_all<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    store: &ChunkStore,
    progress: &(dyn Fn(u64) + Sync),
    stop_after_chunks: Option<usize>,
) -> Result<(Vec<UserRow>, u64)> {
    let done = run_all_pass(scorer, sens, cfg, store, progress, stop_after_chunks, None)?;
    Ok((done.rows, done.skipped))
}

/// A finished run: its configuration, every user's row in user order, the users without
/// candidates, and the candidate pass of the diagnostics over every user ([`candidate_pass`] with
/// the scatter sample of [`analyse`]), ready for [`analysis_from`].
#[derive(Debug, Clone)]
pub struct Finished {
    /// The configuration the rows belong to.
    pub cfg: SelectConfig,
    /// Every user's row, in user order.
    pub rows: Vec<UserRow>,
    /// Users without candidates.
    pub skipped: u64,
    /// Per-item candidate counts and every user's bound-rule bits.
    pub counts: ItemCounts,
    /// The candidates of the scatter sample ([`random_sample`] of [`SCATTER_USERS`]).
    pub sample: CandidateSample,
}

/// [`run_all`] that also returns the candidate pass over every user: taken from the selection's
/// own candidates for the chunks it computes ([`run_range_pass`], with `cache` if given), from a
/// scoring pass ([`candidate_pass_range`]) for the chunks found on disk.
pub fn run_all_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    store: &ChunkStore,
    progress: &(dyn Fn(u64) + Sync),
    mut stop_after_chunks: Option<usize>,
    cache: Option<&CandidateCache>,
) -> Result<Finished> {
    let mechs = cfg.build()?;
    if cfg.noise.is_secure() {
        SecureRng::from_os()?; // fail now, not inside a worker, if the OS has no entropy
    }
    let cells = cfg.mechanisms.len() * cfg.epsilons.len();
    let header = user_header(cfg);
    let n = scorer.n_users();
    let chunks = n.div_ceil(CHUNK_USERS);
    let sample = random_sample(n, SCATTER_USERS, cfg.seed);
    let mut rows = Vec::with_capacity(n);
    let mut skipped = 0u64;
    let mut pass = (ItemCounts::default(), CandidateSample::default());
    for c in 0..chunks {
        let (start, end) = (c * CHUNK_USERS, ((c + 1) * CHUNK_USERS).min(n));
        let (a, b) = (
            sample.partition_point(|&u| u < start),
            sample.partition_point(|&u| u < end),
        );
        let in_chunk = &sample[a..b];
        let chunk_rows = if store.done(c) {
            absorb(
                &mut pass,
                candidate_pass_range(scorer, sens, cfg, start..end, in_chunk),
            );
            store.read(c, cells)?
        } else {
            if let Some(left) = stop_after_chunks.as_mut() {
                if *left == 0 {
                    return Err(Error::Invalid(
                        "stopped before finishing (test hook)".into(),
                    ));
                }
                *left -= 1;
            }
            let (computed, counts, picked) =
                run_range_pass(scorer, sens, cfg, &mechs, start..end, in_chunk, cache)?;
            absorb(&mut pass, (counts, picked));
            let done: Vec<UserRow> = computed.into_iter().flatten().collect();
            store.write(c, &header, &done)?;
            done
        };
        skipped += (end - start - chunk_rows.len()) as u64;
        rows.extend(chunk_rows);
        progress((end - start) as u64);
    }
    let (mut counts, sample) = pass;
    if counts.appearances.is_empty() {
        counts.appearances = vec![0; scorer.n_items()];
        counts.outside = vec![0; scorer.n_items()];
    }
    Ok(Finished {
        cfg: cfg.clone(),
        rows,
        skipped,
        counts,
        sample,
    })
}

/// Runs `cfg` with [`run_all_pass`] in `out` (resuming its chunks), or with `add` names: adds
/// those mechanisms to the finished run of `cfg` in `out` ([`add_mechanisms`]).
#[allow(clippy::too_many_arguments)]
pub fn run_or_add<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    out: &Path,
    force: bool,
    add: Option<&str>,
    progress: &(dyn Fn(u64) + Sync),
    cache: Option<&CandidateCache>,
) -> Result<Finished> {
    match add {
        None => {
            let store = ChunkStore::open(out, cfg, force)?;
            run_all_pass(scorer, sens, cfg, &store, progress, None, cache)
        }
        Some(list) => {
            let names = cfg.registry.run_names(list, cfg.noise.is_secure())?;
            add_mechanisms(scorer, sens, cfg, &names, out, progress, cache)
        }
    }
}

/// Adds the mechanisms `added` to the finished run of `old` stored in `out` (`recsel select
/// --add-mech`, docs/protocol.md, "Adding a mechanism to a finished run"): reads the stored
/// per-user results, runs only the added mechanisms on the same problems, and stores the merged
/// results as the run of `old` with `added` appended to its mechanisms. Each mechanism draws from
/// its own random streams, so the result is identical to a run of all the mechanisms from the
/// start. Errors if `out` holds no finished run of `old`, or a name is already in it.
pub fn add_mechanisms<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    old: &SelectConfig,
    added: &[String],
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
    cache: Option<&CandidateCache>,
) -> Result<Finished> {
    if let Some(dup) = added.iter().find(|m| old.mechanisms.contains(m)) {
        return Err(Error::Invalid(format!(
            "--add-mech: {dup} is already in the run in {} ({})",
            out.display(),
            old.mechanisms.join(", ")
        )));
    }
    if !out.join("chunks").join("manifest.json").exists() {
        return Err(Error::Invalid(format!(
            "--add-mech: {} holds no select run to add to",
            out.display()
        )));
    }
    let store = ChunkStore::open(out, old, false)?;
    let chunks = scorer.n_users().div_ceil(CHUNK_USERS);
    if let Some(c) = (0..chunks).find(|&c| !store.done(c)) {
        return Err(Error::Invalid(format!(
            "--add-mech: the run in {} is not finished (chunk {c} of {chunks} missing); \
             finish it first by rerunning it without --add-mech",
            out.display()
        )));
    }
    let mut new = old.clone();
    new.mechanisms.extend(added.iter().cloned());
    let mut only = old.clone();
    only.mechanisms = added.to_vec();
    // The added mechanisms' results in a scratch store, then merged chunk by chunk into a fresh
    // store that replaces the old one only once complete.
    let scratch = out.join("chunks-adding");
    for d in [&scratch, &out.join("chunks-merged")] {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
    }
    // The candidate pass depends on the candidates, not on the mechanisms: the added
    // mechanisms' run gives the merged run's.
    let Finished {
        rows: extra,
        counts,
        sample,
        ..
    } = run_all_pass(
        scorer,
        sens,
        &only,
        &ChunkStore::open(&scratch, &only, true)?,
        progress,
        None,
        cache,
    )?;
    let merged_dir = out.join("chunks-merged");
    let merged = ChunkStore::open(&merged_dir, &new, true)?;
    let old_cells = old.mechanisms.len() * old.epsilons.len();
    let header = user_header(&new);
    let mut extra = extra.into_iter();
    let (mut rows, mut skipped) = (Vec::new(), 0u64);
    for c in 0..chunks {
        let mut chunk = store.read(c, old_cells)?;
        for r in &mut chunk {
            let e = extra
                .next()
                .filter(|e| e.user == r.user && e.candidates == r.candidates);
            let Some(e) = e else {
                return Err(Error::Invalid(format!(
                    "--add-mech: user {} of the stored run has other candidates now; the data \
                     or model changed, rerun from the start",
                    r.user
                )));
            };
            r.mean_selected.extend(e.mean_selected);
            r.mse.extend(e.mse);
            r.hit.extend(e.hit);
        }
        merged.write(c, &header, &chunk)?;
        let (start, end) = (
            c * CHUNK_USERS,
            ((c + 1) * CHUNK_USERS).min(scorer.n_users()),
        );
        skipped += (end - start - chunk.len()) as u64;
        rows.extend(chunk);
    }
    let dir = out.join("chunks");
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let from = merged_dir.join("chunks");
    std::fs::rename(&from, &dir).map_err(|e| Error::io(&from, e))?;
    for d in [&scratch, &merged_dir] {
        std::fs::remove_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    Ok(Finished {
        cfg: new,
        rows,
        skipped,
        counts,
        sample,
    })
}

/// Paired per-user difference of one added mechanism against one existing mechanism at one ε.
#[derive(Debug, Clone, Serialize)]
pub struct PairedRow {
    /// The added mechanism.
    pub mechanism: String,
    /// The mechanism it is compared with.
    pub reference: String,
    /// ε.
    pub epsilon: f64,
    /// Mean over users of (MSE of `mechanism` − MSE of `reference`); negative: `mechanism` is
    /// better.
    pub mean_difference: f64,
    /// Standard error of that mean (users independent; the pairing removes the between-user
    /// spread of the problems).
    pub se: f64,
    /// Users.
    pub users: u64,
}

/// Per-user MSE differences of every mechanism in `added` against every other mechanism of
/// `cfg`, per ε.
pub fn paired_differences(
    cfg: &SelectConfig,
    rows: &[UserRow],
    added: &[String],
) -> Vec<PairedRow> {
    let ne = cfg.epsilons.len();
    let index = |m: &String| cfg.mechanisms.iter().position(|x| x == m);
    let mut out = Vec::new();
    for a in added {
        let Some(ia) = index(a) else { continue };
        for (ib, b) in cfg.mechanisms.iter().enumerate() {
            if added.contains(b) {
                continue;
            }
            for (e, &eps) in cfg.epsilons.iter().enumerate() {
                let d: Vec<f64> = rows
                    .iter()
                    .map(|r| r.mse[ia * ne + e] - r.mse[ib * ne + e])
                    .collect();
                let n = d.len() as f64;
                let mean = d.iter().sum::<f64>() / n;
                let var =
                    d.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0).max(1.0);
                out.push(PairedRow {
                    mechanism: a.clone(),
                    reference: b.clone(),
                    epsilon: eps,
                    mean_difference: mean,
                    se: (var / n).sqrt(),
                    users: d.len() as u64,
                });
            }
        }
    }
    out
}

/// Runs [`run_user`] for every user in `users` (indices into the scorer's users), in parallel;
/// one entry per user, `None` for a user without candidates. Every user draws from its own
/// streams, so any split of the users into ranges (chunks, partitions on a cluster) gives the
/// same rows. `mechs` is `cfg.build()`.
pub fn run_range<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    users: std::ops::Range<usize>,
) -> Result<Vec<Option<UserRow>>> {
    Ok(run_range_pass(scorer, sens, cfg, mechs, users, &[], None)?.0)
}

/// [`run_range`] together with the candidate pass of the same users
/// ([`candidate_pass_range`] with `sample`, ascending, within `users`): the counts, bits and
/// samples are taken from the scores and candidates the selection builds anyway, so no user is
/// scored a second time (docs/real-data.md, "Memory and time"). Equal to the two calls. With a
/// `cache` of the sensitivity pass (made for `cfg.top`), its users are not scored at all.
pub fn run_range_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    users: std::ops::Range<usize>,
    sample: &[usize],
    cache: Option<&CandidateCache>,
) -> Result<(Vec<Option<UserRow>>, ItemCounts, CandidateSample)> {
    if cfg.noise.is_secure() {
        SecureRng::from_os()?; // fail now, not inside a worker, if the OS has no entropy
    }
    let draws = || {
        Draws::new(cfg.noise, Streams::new(cfg.seed))
            .expect("OS entropy was available when the run started")
    };
    let computed = users
        .clone()
        .into_par_iter()
        .map_init(
            || (vec![0.0; scorer.n_items()], scorer.scratch(), draws()),
            |(buf, scratch, dr), u| {
                run_user_pass(scorer, sens, cfg, mechs, u, buf, scratch, dr, cache)
            },
        )
        .collect::<Result<Vec<_>>>()?;
    let n_items = scorer.n_items();
    let mut counts = ItemCounts {
        appearances: vec![0; n_items],
        outside: vec![0; n_items],
        bound_mgem: Vec::with_capacity(users.len()),
    };
    let mut picked = CandidateSample {
        users: sample.len() as u64,
        ..CandidateSample::default()
    };
    let mut rows = Vec::with_capacity(users.len());
    for (u, (row, pass)) in users.zip(computed) {
        for (&j, &v) in pass.items.iter().zip(&pass.raw) {
            let j = j as usize;
            counts.appearances[j] += 1;
            if v < sens.lower[j] || v > sens.upper[j] {
                counts.outside[j] += 1;
            }
        }
        counts.bound_mgem.push(pass.mask);
        if sample.binary_search(&u).is_ok() {
            picked.scores.extend_from_slice(&pass.raw);
            picked
                .deltas
                .extend(pass.items.iter().map(|&j| sens.delta[j as usize]));
        }
        rows.push(row);
    }
    Ok((rows, counts, picked))
}

/// Adds the candidate pass of the next users (`part`, of a range that follows those in
/// `total`) to `total`.
fn absorb(total: &mut (ItemCounts, CandidateSample), part: (ItemCounts, CandidateSample)) {
    let (c, s) = total;
    let (pc, ps) = part;
    if c.appearances.is_empty() {
        c.appearances = vec![0; pc.appearances.len()];
        c.outside = vec![0; pc.outside.len()];
    }
    for (a, b) in c.appearances.iter_mut().zip(&pc.appearances) {
        *a += b;
    }
    for (a, b) in c.outside.iter_mut().zip(&pc.outside) {
        *a += b;
    }
    c.bound_mgem.extend(pc.bound_mgem);
    s.users += ps.users;
    s.scores.extend(ps.scores);
    s.deltas.extend(ps.deltas);
}

/// MSE ± standard error of one (mechanism, ε) over users.
#[derive(Debug, Clone, Serialize)]
pub struct MseRow {
    /// Mechanism name.
    pub mechanism: String,
    /// Whether it is ε-DP at this row's ε for the run's k (= `top`): false for `rnmh` and for
    /// `rnmh-laplace` at k > 2, which is only (k − 1)ε-DP.
    pub private: bool,
    /// The guarantee it actually has at the run's k, in words (`1-DP`, `499-DP`, `not private`).
    pub guarantee: String,
    /// The ε of that guarantee (NaN, `null` in JSON, when not private).
    pub guarantee_epsilon: f64,
    /// ε.
    pub epsilon: f64,
    /// Mean over users of each user's mean squared error.
    pub mse: f64,
    /// Standard error of that mean (users are independent; trials within a user are not
    /// separated).
    pub se: f64,
    /// Users.
    pub users: u64,
    /// Trials per user.
    pub trials: u32,
    /// Hit@1: mean over users of the share of trials whose pick is a held-out item of the user.
    pub hit1: f64,
    /// Standard error of hit@1 over users.
    pub hit1_se: f64,
    /// MSE relative to a uniformly random choice among the same candidates: `mse` over the mean of
    /// the users' expected random-choice MSE (1 = no better than random, 0 = always the best).
    pub relative_mse: f64,
}

/// The guarantee `spec` has at `epsilon` for k candidates: (ε of the guarantee or NaN, words).
pub fn actual_guarantee(
    spec: &mechanisms::MechanismSpec,
    params: &MechParams,
    k: usize,
) -> (f64, String) {
    match spec.build(params).map(|m| m.guarantee().epsilon_for(k)) {
        Ok(Some(e)) => (e, format!("{}-DP", (e * 1e9).round() / 1e9)),
        Ok(None) => (f64::NAN, "not private".into()),
        Err(e) => (f64::NAN, format!("invalid: {e}")),
    }
}

/// Mean and standard error of `vals`.
fn mean_se(vals: &[f64]) -> (f64, f64) {
    let n = vals.len() as f64;
    let mean = vals.iter().sum::<f64>() / n;
    let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, (var / n).sqrt())
}

/// The MSE table of docs/protocol.md, step 9 (fig 13 g–i).
pub fn mse_table(cfg: &SelectConfig, rows: &[UserRow]) -> Vec<MseRow> {
    let mut out = Vec::new();
    let ne = cfg.epsilons.len();
    let random: f64 = rows.iter().map(|r| r.random_mse).sum::<f64>() / rows.len().max(1) as f64;
    for (m, name) in cfg.mechanisms.iter().enumerate() {
        let spec = cfg.registry.get(name);
        for (e, &eps) in cfg.epsilons.iter().enumerate() {
            let vals: Vec<f64> = rows.iter().map(|r| r.mse[m * ne + e]).collect();
            let (mean, se) = mean_se(&vals);
            let hits: Vec<f64> = rows.iter().map(|r| r.hit[m * ne + e]).collect();
            let (hit1, hit1_se) = mean_se(&hits);
            let (g_eps, guarantee) = match spec {
                Ok(s) => actual_guarantee(s, &cfg.params.with_epsilon(eps), cfg.top),
                Err(_) => (f64::NAN, "unknown".into()),
            };
            out.push(MseRow {
                mechanism: name.clone(),
                private: g_eps <= eps * (1.0 + 1e-12),
                guarantee,
                guarantee_epsilon: g_eps,
                epsilon: eps,
                mse: mean,
                se,
                users: vals.len() as u64,
                trials: cfg.trials,
                hit1,
                hit1_se,
                relative_mse: mean / random,
            });
        }
    }
    out
}

/// A guarantee relative to the nominal ε, for tables: `eps`, `499*eps`, `0`, `not DP`.
pub fn guarantee_label(row: &MseRow) -> String {
    let g = row.guarantee_epsilon;
    if g.is_nan() {
        "not DP".into()
    } else if g == 0.0 {
        "0".into()
    } else {
        let r = g / row.epsilon;
        if (r - 1.0).abs() < 1e-9 {
            "eps".into()
        } else {
            format!("{}*eps", (r * 1e6).round() / 1e6)
        }
    }
}

/// Which mechanism to use on this data (docs/deployment.md, "Which mechanism for my data"): the
/// Spearman rule applied to the per-user Spearman distribution, then what the run measured — per
/// ε the ε-DP mechanism with the lowest MSE and its MSE relative to random choice — whether the
/// rule's pick is within two standard errors of it, where randomised response applies
/// (`e^ε ≥ 10k`), and any mechanism that measured better without being ε-DP. One line each.
pub fn advice(cfg: &SelectConfig, spearman: &SpearmanSummary, mse: &[MseRow]) -> Vec<String> {
    let mut out = Vec::new();
    let share = spearman.share_positive;
    let (pick, why) = if share >= 0.8 {
        (
            "mgem",
            "mostly positive: high scores come with high sensitivities",
        )
    } else if share <= 0.2 {
        (
            "gem",
            "mostly negative: high scores come with low sensitivities",
        )
    } else {
        (
            "cgem",
            "mixed across users: a private bit picks gem or mgem per user",
        )
    };
    out.push(format!(
        "Spearman(scores, sensitivities) is positive for {:.0}% of users ({why}) -> {pick}",
        100.0 * share
    ));
    let mut best_line = Vec::new();
    let (mut near, mut compared) = (0, 0);
    let mut unsafe_wins = Vec::new();
    for &eps in &cfg.epsilons {
        let at: Vec<&MseRow> = mse.iter().filter(|r| r.epsilon == eps).collect();
        let Some(best) = at
            .iter()
            .filter(|r| r.private)
            .min_by(|a, b| a.mse.total_cmp(&b.mse))
        else {
            continue;
        };
        best_line.push(format!(
            "eps={eps} {} ({:.2} of random)",
            best.mechanism, best.relative_mse
        ));
        if let Some(r) = at.iter().find(|r| r.mechanism == pick) {
            compared += 1;
            if r.mse <= best.mse + 2.0 * (r.se.hypot(best.se)) {
                near += 1;
            }
        }
        for r in at.iter().filter(|r| !r.private && r.mse < best.mse) {
            unsafe_wins.push(format!("{} at eps={eps} ({})", r.mechanism, r.guarantee));
        }
    }
    if !best_line.is_empty() {
        out.push(format!(
            "measured, lowest MSE among the eps-DP mechanisms: {}",
            best_line.join(", ")
        ));
    }
    if compared > 0 {
        out.push(format!(
            "{pick} is within 2 s.e. of that best at {near} of {compared} eps"
        ));
    }
    let k = cfg.top as f64;
    let krr_from = (10.0 * k).ln();
    let krr_eps: Vec<String> = cfg
        .epsilons
        .iter()
        .filter(|&&e| e >= krr_from)
        .map(|e| e.to_string())
        .collect();
    out.push(if krr_eps.is_empty() {
        format!(
            "krr needs e^eps >> k: eps >= ln(10k) = {krr_from:.1} at k = {}; no eps of this run \
             (fewer candidates, --top, lower that threshold)",
            cfg.top
        )
    } else {
        format!(
            "e^eps >> k = {} at eps = {}: krr (the argmax with probability e^eps/(e^eps+k-1)) \
             is worth comparing there",
            cfg.top,
            krr_eps.join(", ")
        )
    });
    if !unsafe_wins.is_empty() {
        out.push(format!(
            "lower MSE but NOT eps-DP at k = {} (never deploy): {}",
            cfg.top,
            unsafe_wins.join(", ")
        ));
    }
    out
}

/// Summary of the per-user Spearman correlations (fig 13 a–c).
#[derive(Debug, Clone, Serialize)]
pub struct SpearmanSummary {
    /// Users.
    pub users: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Share of users with a positive correlation.
    pub share_positive: f64,
}

/// Mean, median and share positive of the users' Spearman correlations.
pub fn spearman_summary(rows: &[UserRow]) -> SpearmanSummary {
    let mut v: Vec<f64> = rows.iter().map(|r| r.spearman).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    SpearmanSummary {
        users: n as u64,
        mean: v.iter().sum::<f64>() / n.max(1) as f64,
        median: if n == 0 {
            f64::NAN
        } else {
            crate::stats::percentile_linear(&v, 50.0)
        },
        share_positive: v.iter().filter(|&&x| x > 0.0).count() as f64 / n.max(1) as f64,
    }
}

/// Quantile levels of the diagnostics: minimum, 1%, 25%, median, 75%, 99%, maximum.
pub const DIAGNOSTIC_LEVELS: [f64; 7] = [0.0, 1.0, 25.0, 50.0, 75.0, 99.0, 100.0];

/// Per-run diagnostics of the real-data protocol (`docs/real-data.md`): how much clipping and the
/// sensitivity floor shape the selection problems.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnostics {
    /// Whether scores were clipped to `[p1_j, p99_j]` (only a clipped run is a DP release).
    pub clip: bool,
    /// `all` or `without-item`: whose scores the percentiles were taken over.
    pub percentile_users: String,
    /// Candidate scores over all users (each user's top candidates).
    pub candidate_scores: u64,
    /// Share of them outside their item's `[p1, p99]` (clipped in a clipped run; would have been
    /// otherwise).
    pub share_clipped: f64,
    /// Share of the items with any score whose sensitivity is at the floor (zero spread).
    pub share_items_at_floor: f64,
    /// Share of the candidate appearances whose item is at the floor.
    pub share_candidates_at_floor: f64,
    /// Users whose Spearman correlation of candidate scores and sensitivities is negative.
    pub users_negative_spearman: u64,
    /// Users with any candidate.
    pub users: u64,
    /// The quantile levels (percent) of the three lists below.
    pub levels: Vec<f64>,
    /// Quantiles of the candidate scores before clipping, over the users of the scatter sample.
    pub score_quantiles: Vec<f64>,
    /// Quantiles of the candidates' sensitivities, over the users of the scatter sample.
    pub candidate_sensitivity_quantiles: Vec<f64>,
    /// Quantiles of the items' sensitivities (items with any score).
    pub item_sensitivity_quantiles: Vec<f64>,
    /// Users the score and candidate-sensitivity quantiles were taken over.
    pub quantile_users: u64,
}

/// Per item: how often it was a candidate and how often its candidate score lay outside its
/// `[p1, p99]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemCounts {
    /// Candidate appearances per item.
    pub appearances: Vec<u64>,
    /// Of those, scores outside the item's percentile range.
    pub outside: Vec<u64>,
    /// Per user, bit e set when mGEM's utility bound at ε_e is at least GEM's (the bound rule).
    pub bound_mgem: Vec<u64>,
}

/// `k` distinct indices out of `0..n` drawn uniformly with the run's seed (all of them when
/// `n ≤ k`), in increasing order: the users of the fig 13 d–f scatter plot and of the quantiles.
pub fn random_sample(n: usize, k: usize, seed: u64) -> Vec<usize> {
    use rand::Rng as _;
    if n <= k {
        return (0..n).collect();
    }
    let mut rng = Streams::new(seed).stream(name_id("scatter-sample"), 0, 0, 0);
    let mut idx: Vec<usize> = (0..n).collect();
    // Partial Fisher–Yates: the first k positions become a uniform k-subset.
    for i in 0..k {
        let j = rng.random_range(i..n);
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

/// The candidates of a sample of users: raw scores and sensitivities, all users' concatenated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateSample {
    /// Users in the sample.
    pub users: u64,
    /// Candidate scores before clipping.
    pub scores: Vec<f64>,
    /// Candidate sensitivities.
    pub deltas: Vec<f64>,
}

/// One pass over every user (scores and candidates as in [`run_user`]): per-item candidate counts,
/// each user's bound-rule bits at every ε of `cfg`, and, for the users in `sample` (indices into the
/// scorer's users), their candidates' raw scores and sensitivities.
pub fn candidate_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    sample: &[usize],
) -> (ItemCounts, CandidateSample) {
    candidate_pass_range(scorer, sens, cfg, 0..scorer.n_users(), sample)
}

/// [`candidate_pass`] over the users in `users` only (one partition): `bound_mgem` has one entry
/// per user of the range, and `sample` must lie in the range. Concatenating the ranges' bits and
/// candidate samples in user order and adding their counts gives the whole pass
/// (`partition::merge`).
pub fn candidate_pass_range<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    users: std::ops::Range<usize>,
    sample: &[usize],
) -> (ItemCounts, CandidateSample) {
    let (n_items, top) = (scorer.n_items(), cfg.top);
    let fresh = || ItemCounts {
        appearances: vec![0; n_items],
        outside: vec![0; n_items],
        bound_mgem: Vec::new(),
    };
    // Per thread: item counts and (user, bound bits); merged in user order below, so the result
    // does not depend on the number of threads.
    let (mut counts, masks) = users
        .clone()
        .into_par_iter()
        .fold(
            || (fresh(), Vec::new(), vec![0.0; n_items], scorer.scratch()),
            |(mut c, mut masks, mut buf, mut scratch), u| {
                scorer.score(u, &mut buf, &mut scratch);
                let items = top_candidates(&buf, scorer.excluded(u), top);
                let mut q = Vec::with_capacity(items.len());
                let mut d = Vec::with_capacity(items.len());
                for &j in &items {
                    let (j, v) = (j as usize, buf[j as usize]);
                    c.appearances[j] += 1;
                    if v < sens.lower[j] || v > sens.upper[j] {
                        c.outside[j] += 1;
                    }
                    // The scores the mechanisms see.
                    q.push(if cfg.clip { sens.clip(j, v) } else { v });
                    d.push(sens.delta[j]);
                }
                masks.push((u, bound_mask(&q, &d, cfg)));
                (c, masks, buf, scratch)
            },
        )
        .map(|(c, masks, _, _)| (c, masks))
        .reduce(
            || (fresh(), Vec::new()),
            |(mut a, mut ma), (b, mb)| {
                for j in 0..n_items {
                    a.appearances[j] += b.appearances[j];
                    a.outside[j] += b.outside[j];
                }
                ma.extend(mb);
                (a, ma)
            },
        );
    counts.bound_mgem = vec![0; users.len()];
    for (u, mask) in masks {
        counts.bound_mgem[u - users.start] = mask;
    }
    let per_user: Vec<(Vec<f64>, Vec<f64>)> = sample
        .par_iter()
        .map_init(
            || (vec![0.0; n_items], scorer.scratch()),
            |(buf, scratch), &u| {
                scorer.score(u, buf, scratch);
                let items = top_candidates(buf, scorer.excluded(u), top);
                (
                    items.iter().map(|&j| buf[j as usize]).collect(),
                    items.iter().map(|&j| sens.delta[j as usize]).collect(),
                )
            },
        )
        .collect();
    let mut out = CandidateSample {
        users: sample.len() as u64,
        ..CandidateSample::default()
    };
    for (q, d) in per_user {
        out.scores.extend(q);
        out.deltas.extend(d);
    }
    (counts, out)
}

fn quantiles(mut v: Vec<f64>) -> Vec<f64> {
    if v.is_empty() {
        return vec![f64::NAN; DIAGNOSTIC_LEVELS.len()];
    }
    v.sort_by(f64::total_cmp);
    DIAGNOSTIC_LEVELS
        .iter()
        .map(|&p| crate::stats::percentile_linear(&v, p))
        .collect()
}

/// The run's [`Diagnostics`] from the candidate pass, the sensitivities and the user rows.
pub fn diagnostics(
    cfg: &SelectConfig,
    sens: &Sensitivities,
    floor: f64,
    counts: &ItemCounts,
    sample: CandidateSample,
    rows: &[UserRow],
) -> Diagnostics {
    let total: u64 = counts.appearances.iter().sum();
    let outside: u64 = counts.outside.iter().sum();
    let scored: Vec<usize> = (0..sens.delta.len())
        .filter(|&j| sens.counts[j] > 0)
        .collect();
    let at_floor = |j: usize| sens.delta[j] <= floor;
    let floor_items = scored.iter().filter(|&&j| at_floor(j)).count();
    let floor_cands: u64 = (0..sens.delta.len())
        .filter(|&j| at_floor(j))
        .map(|j| counts.appearances[j])
        .sum();
    Diagnostics {
        clip: cfg.clip,
        percentile_users: cfg.percentile_users.name().into(),
        candidate_scores: total,
        share_clipped: outside as f64 / total.max(1) as f64,
        share_items_at_floor: floor_items as f64 / scored.len().max(1) as f64,
        share_candidates_at_floor: floor_cands as f64 / total.max(1) as f64,
        users_negative_spearman: rows.iter().filter(|r| r.spearman < 0.0).count() as u64,
        users: rows.len() as u64,
        levels: DIAGNOSTIC_LEVELS.to_vec(),
        score_quantiles: quantiles(sample.scores),
        candidate_sensitivity_quantiles: quantiles(sample.deltas),
        item_sensitivity_quantiles: quantiles(scored.iter().map(|&j| sens.delta[j]).collect()),
        quantile_users: sample.users,
    }
}

/// The Spearman rule and the bound rule against the per-user MSE winner of GEM and mGEM, at one ε
/// (an extension; see `crate::experiments::winners` for the synthetic version).
#[derive(Debug, Clone, Serialize)]
pub struct RuleRow {
    /// ε.
    pub epsilon: f64,
    /// Users whose GEM and mGEM MSEs differ.
    pub users: u64,
    /// Share of them where mGEM has the lower MSE.
    pub share_mgem_better: f64,
    /// Share where the Spearman rule (`spearman ≥ 0` → mGEM) picks the lower MSE.
    pub spearman_right: f64,
    /// Share where the bound rule picks the lower MSE.
    pub bound_right: f64,
    /// Share of users for whom the bound rule picks mGEM.
    pub bound_share_mgem: f64,
}

/// Per ε, how often each rule picks the per-user better of GEM and mGEM (each user's MSE over the
/// run's trials); empty when the run lacks `gem` or `mgem`.
pub fn rule_table(cfg: &SelectConfig, rows: &[UserRow], counts: &ItemCounts) -> Vec<RuleRow> {
    let pos = |n: &str| cfg.mechanisms.iter().position(|m| m == n);
    let (Some(g), Some(m)) = (pos("gem"), pos("mgem")) else {
        return Vec::new();
    };
    let ne = cfg.epsilons.len();
    cfg.epsilons
        .iter()
        .enumerate()
        .take(64)
        .map(|(e, &eps)| {
            let (mut n, mut mg, mut sp, mut bd, mut bm) = (0u64, 0u64, 0u64, 0u64, 0u64);
            for r in rows {
                let (eg, em) = (r.mse[g * ne + e], r.mse[m * ne + e]);
                let bound_m = counts
                    .bound_mgem
                    .get(r.user as usize)
                    .is_some_and(|mask| mask & (1 << e) != 0);
                bm += u64::from(bound_m);
                if eg == em {
                    continue;
                }
                n += 1;
                let mgem_better = em < eg;
                mg += u64::from(mgem_better);
                sp += u64::from((r.spearman >= 0.0) == mgem_better);
                bd += u64::from(bound_m == mgem_better);
            }
            let share = |x: u64| x as f64 / n.max(1) as f64;
            RuleRow {
                epsilon: eps,
                users: n,
                share_mgem_better: share(mg),
                spearman_right: share(sp),
                bound_right: share(bd),
                bound_share_mgem: bm as f64 / rows.len().max(1) as f64,
            }
        })
        .collect()
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

/// The model saved in `dir` if it was fitted on `data` with `params`, else a fresh fit, saved
/// there. `log` receives one line per decision and fitting stage.
pub fn model_for(
    dir: &Path,
    data: &Dataset,
    params: &ModelParams,
    log: &dyn Fn(&str),
) -> Result<Model> {
    if dir.join("model.json").exists() {
        match model::io::load(dir, Some(data.fingerprint())) {
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
    model::io::save(
        dir,
        &m,
        params,
        data.name(),
        data.fingerprint(),
        &data.item_ids,
    )?;
    Ok(m)
}

/// Users of the fig 13 d–f scatter sample and of the diagnostics' quantiles (seed 001 fig 13
/// shows 10,000 random test users).
pub const SCATTER_USERS: usize = 10_000;

/// Everything a `select` run reports beyond its per-user rows (docs/protocol.md, step 9;
/// docs/real-data.md): the MSE table, the Spearman summary, per-item candidate counts, the
/// diagnostics and the rule table.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// MSE ± s.e. per mechanism and ε.
    pub mse: Vec<MseRow>,
    /// Distribution of the per-user Spearman correlations.
    pub spearman: SpearmanSummary,
    /// Per-item candidate counts (and the bound rule's bits per user).
    pub counts: ItemCounts,
    /// The run's diagnostics.
    pub diagnostics: Diagnostics,
    /// The Spearman and bound rules against the per-user winner of GEM and mGEM, per ε.
    pub rules: Vec<RuleRow>,
    /// Which mechanism for this data, one line each ([`advice`]).
    pub advice: Vec<String>,
}

/// Analyses the rows of a finished run: one more scoring pass over every user for the per-item
/// candidate counts and the diagnostics (quantiles over [`SCATTER_USERS`] users drawn with the
/// run's seed), then the MSE table, the Spearman summary and the rule table. `floor` is the
/// sensitivity floor the run used. Every front end (CLI, Python, distributed runners) calls this.
pub fn analyse<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    floor: f64,
    cfg: &SelectConfig,
    rows: &[UserRow],
) -> Analysis {
    let sample = random_sample(scorer.n_users(), SCATTER_USERS, cfg.seed);
    let (counts, candidates) = candidate_pass(scorer, sens, cfg, &sample);
    analysis_from(cfg, sens, floor, counts, candidates, rows)
}

/// The [`Analysis`] from a finished candidate pass (whole, or merged from partitions) and the
/// rows of every user in user order: the last step of [`analyse`], shared with the distributed
/// runners.
pub fn analysis_from(
    cfg: &SelectConfig,
    sens: &Sensitivities,
    floor: f64,
    counts: ItemCounts,
    candidates: CandidateSample,
    rows: &[UserRow],
) -> Analysis {
    let diagnostics = diagnostics(cfg, sens, floor, &counts, candidates, rows);
    let rules = rule_table(cfg, rows, &counts);
    let mse = mse_table(cfg, rows);
    let spearman = spearman_summary(rows);
    let advice = advice(cfg, &spearman, &mse);
    Analysis {
        mse,
        spearman,
        counts,
        diagnostics,
        rules,
        advice,
    }
}
