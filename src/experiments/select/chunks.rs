//! Resumable storage of the per-user rows (`<out>/chunks/`), the run over every user that fills
//! it chunk by chunk, and adding mechanisms to a finished run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{
    candidate_pass_range, random_sample, run_range_pass, CandidateSample, ItemCounts, SelectConfig,
    UserRow, CHUNK_USERS, SCATTER_USERS,
};
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::rng::SecureRng;
use crate::scoring::{CandidateCache, Sensitivities, UserScorer};

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
    if cfg.candidates.is_some() {
        for m in &cfg.mechanisms {
            for e in &cfg.epsilons {
                let _ = write!(h, ",own_{m}_eps{e}");
            }
        }
    }
    if cfg.reports_bottom() {
        for m in &cfg.mechanisms {
            for e in &cfg.epsilons {
                let _ = write!(h, ",bottom_{m}_eps{e}");
            }
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
    for v in r.hit.iter().chain(&r.in_history).chain(&r.bottom) {
        let _ = write!(s, ",{v}");
    }
    s
}

/// Parses one line of the per-user table ([`user_line`]) with `cells` (mechanism, ε) pairs, the
/// ⊥ cells when `bottom` ([`SelectConfig::reports_bottom`]) and the in-history cells when the
/// line has them; errors name `path` (or what the text came from) and the line.
pub fn parse_line(
    path: &Path,
    line_no: usize,
    line: &str,
    cells: usize,
    bottom: bool,
) -> Result<UserRow> {
    let bad = |m: String| Error::Parse {
        context: format!("{} line {}", path.display(), line_no),
        message: m,
    };
    let f: Vec<&str> = line.split(',').collect();
    let base = 7 + 3 * cells + if bottom { cells } else { 0 };
    let own = f.len() == base + cells && cells > 0;
    if f.len() != base && !own {
        return Err(bad(format!("expected {base} fields, found {}", f.len())));
    }
    let own_end = 3 * cells + 1 + if own { cells } else { 0 };
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
        hit: vals[2 * cells + 1..3 * cells + 1].to_vec(),
        in_history: vals[3 * cells + 1..own_end].to_vec(),
        bottom: vals[own_end..].to_vec(),
    })
}

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
    pub fn read(&self, chunk: usize, cells: usize, bottom: bool) -> Result<Vec<UserRow>> {
        let path = self.path(chunk);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        text.lines()
            .enumerate()
            .skip(1)
            .map(|(i, l)| parse_line(&path, i + 1, l, cells, bottom))
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
/// candidates, and the candidate pass of the diagnostics over every user ([`super::candidate_pass`] with
/// the scatter sample of [`super::analyse`]), ready for [`super::analysis_from`].
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
    let bottom = cfg.reports_bottom();
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
            store.read(c, cells, bottom)?
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
    let added_cells = added.len() * old.epsilons.len();
    let (old_bottom, added_bottom) = (old.reports_bottom(), only.reports_bottom());
    let header = user_header(&new);
    let mut extra = extra.into_iter();
    let (mut rows, mut skipped) = (Vec::new(), 0u64);
    for c in 0..chunks {
        let mut chunk = store.read(c, old_cells, old_bottom)?;
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
            r.in_history.extend(e.in_history);
            // The ⊥ cells of the merged run: zeros for the side whose mechanisms never give up.
            if old_bottom || added_bottom {
                if !old_bottom {
                    r.bottom = vec![0.0; old_cells];
                }
                if added_bottom {
                    r.bottom.extend(e.bottom);
                } else {
                    r.bottom.extend(std::iter::repeat_n(0.0, added_cells));
                }
            }
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
