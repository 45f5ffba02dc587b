//! The tuned serving configuration (docs/utility.md, "Tuning"): per ε, k-randomised response over
//! a small public pool — the N most popular items, or the N items most often held out by the
//! users fitted on — or the single most popular item (0-DP) when no pool beats it on the
//! calibration users by a margin. `recsel tune` writes it as `tuning.json` beside the release;
//! `recommend`, `serve` and the Python `Recommender` use it when no mechanism is named
//! (mechanism [`TUNED`](crate::recommend::tuned::TUNED)).
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
//!
//! With a public popularity prior of weight W > 0 (`popularity:W`, docs/priors.md) krr tilts
//! toward the argmax of the clipped scores plus the prior's offsets `W·(2Δ_max/ε)·ℓ_j` (Δ_max the
//! largest Δ over the pool), the same law `recommend` serves with that prior; `a` is then taken
//! over that argmax set, one walk per (N, W, ε). W = 0 (no prior) is always tried, and wins ties.

use crate::data::{row_items, HeldOutRows};
use crate::error::{Error, Result};
use crate::mechanisms::check_epsilon;
use crate::model::io::FileEntry;
use crate::model::Model;
use crate::scoring::prior::offset_scale;
use crate::scoring::{CandidatePolicy, ModelScorer, Prior, UserScorer};
use rayon::prelude::*;

use crate::recommend::release::{Release, MANIFEST};

pub mod estimate;
pub mod grid;
pub mod krr;
pub mod lists;
pub mod private;

use crate::recommend::tuned::{
    beats, public_privacy, Estimate, MechGrid, MechRow, PoolSource, TuneConfig, TunedRow, Tuning,
    TuningPopulation, FORMAT, TUNING_VERSION,
};
use krr::{argmax_share, prefix_stats};

/// The ε grid of `recsel tune` and `recsel evaluate` by default.
pub const DEFAULT_EPSILONS: [f64; 6] = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0];
/// The pool sizes tried by default (1 is the fixed item).
pub const DEFAULT_POOL_SIZES: [usize; 15] =
    [1, 2, 3, 5, 8, 12, 20, 30, 50, 80, 120, 200, 300, 500, 1000];
/// Standard errors of calibration gain a pool must show over the fixed item (default).
pub const DEFAULT_MARGIN: f64 = 2.0;
/// The weights W of the popularity prior tried for krr's argmax by default (0: no prior).
pub const DEFAULT_PRIOR_WEIGHTS: [f64; 7] = [0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0];

/// Every registry mechanism that is ε-DP with its default parameters, in registry order: what
/// `recsel tune` tunes unless told otherwise.
pub fn pure_mechanisms(registry: &crate::mechanisms::Registry) -> Vec<String> {
    registry
        .iter()
        .filter(|s| {
            s.build(&crate::mechanisms::MechParams::default())
                .is_ok_and(|m| matches!(m.guarantee(), crate::mechanisms::Guarantee::Pure { .. }))
        })
        .map(|s| s.name.to_string())
        .collect()
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            epsilons: DEFAULT_EPSILONS.to_vec(),
            sources: vec![PoolSource::Popularity, PoolSource::Heldout],
            pool_sizes: DEFAULT_POOL_SIZES.to_vec(),
            margin: DEFAULT_MARGIN,
            prior_weights: DEFAULT_PRIOR_WEIGHTS.to_vec(),
            mechanisms: Vec::new(),
            grid: MechGrid::default(),
            private: None,
            lists: Default::default(),
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
        prior_weight_grid(&self.prior_weights)?;
        prior_weight_grid(&self.grid.prior_weights)?;
        if self.grid.trials == 0 {
            return Err(Error::Invalid(
                "the mechanisms' tuning needs at least 1 selection per user, got 0".into(),
            ));
        }
        self.lists.validate()?;
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            return Err(Error::Invalid(format!(
                "the margin must be a finite number >= 0, got {}",
                self.margin
            )));
        }
        Ok(())
    }
}

/// A public ranking: the columns by descending count, ties by column (the order `popular:N`
/// takes its top N in), the first `n` of them.
pub fn ranking(counts: &[u64], n: usize) -> Vec<u32> {
    crate::scoring::policy::public_ranking(counts, n)
}

/// The weights of a popularity prior to try: no prior (0) first — it wins ties — then the
/// positive weights of `weights` ascending, without repeats. An error names a weight that is not
/// a finite number ≥ 0.
pub fn prior_weight_grid(weights: &[f64]) -> Result<Vec<f64>> {
    if let Some(w) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
        return Err(Error::Invalid(format!(
            "prior weights must be finite numbers >= 0, got {w}"
        )));
    }
    let mut grid: Vec<f64> = weights.iter().copied().filter(|&w| w > 0.0).collect();
    grid.sort_by(f64::total_cmp);
    grid.dedup();
    grid.insert(0, 0.0);
    Ok(grid)
}

/// `ℓ_j` of the popularity prior (docs/priors.md) for every item column, from the training
/// popularity: what `popularity:W` scales by `W·(2Δ_max/ε)`.
pub fn popularity_log_mass(n_items: usize, popularity: &[u64]) -> Result<Vec<f64>> {
    Ok(Prior::Popularity(1.0)
        .resolve(n_items, Some(popularity), None, &|_| None)?
        .map(|p| p.log_mass)
        .unwrap_or_default())
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
    let private = cfg.private.as_ref().map(|p| p.check()).transpose()?;
    if private.is_some() && !cfg.mechanisms.is_empty() {
        return Err(Error::Invalid(format!(
            "private tuning chooses the served (tuned) rows only; the registry mechanisms' rows \
             ({}) are tuned without privacy: tune none of them (--mech none)",
            cfg.mechanisms.join(",")
        )));
    }
    if private.is_some() && !cfg.lists.k.is_empty() {
        return Err(Error::Invalid(
            "private tuning chooses the top-1 rows only; lists (k > 1) are tuned without \
             privacy: tune them without --private"
                .into(),
        ));
    }
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
    let free_opts = estimate::free_options(release);
    let (sel, est) = estimate::parts(cal)?;
    let sens = &release.sens;
    let mut epsilons = cfg.epsilons.clone();
    epsilons.sort_by(f64::total_cmp);
    epsilons.dedup();
    let weights = prior_weight_grid(&cfg.prior_weights)?;
    let log_mass = popularity_log_mass(n_items, popularity)?;
    // Δ_max over each ranking's first N items: the prior's offset scale for that pool.
    let max_delta: Vec<Vec<f64>> = ranks
        .iter()
        .map(|r| {
            let mut m = 0.0f64;
            let prefix: Vec<f64> = r
                .iter()
                .map(|&j| {
                    m = m.max(sens.delta[j as usize]);
                    m
                })
                .collect();
            sizes.iter().map(|&n| prefix[n - 1]).collect()
        })
        .collect();
    let (nw, ne, nn) = (weights.len(), epsilons.len(), sizes.len());
    let slot = |si: usize, wi: usize, ei: usize, ni: usize| ((si * nw + wi) * ne + ei) * nn + ni;
    // Per user: (c, a) per (source, weight, ε, size), and whether each free option is held out.
    #[allow(clippy::type_complexity)]
    let stats: Vec<(Vec<(f64, f64)>, Vec<f64>)> = map_scored(
        model,
        &cal.history,
        &|u, s| {
            let targets = row_items(&cal.heldout, u);
            let q = |j: u32| sens.clip(j as usize, s[j as usize]);
            let mut out = vec![(0.0, 0.0); sources.len() * nw * ne * nn];
            let mut walk = Vec::with_capacity(nn);
            for (si, r) in ranks.iter().enumerate() {
                let pool: Vec<(f64, f64, bool)> = r
                    .iter()
                    .map(|&j| {
                        let hit = targets.binary_search(&j).is_ok();
                        (q(j), log_mass[j as usize], hit)
                    })
                    .collect();
                walk.clear();
                prefix_stats(&pool, &sizes, &mut walk);
                for ei in 0..ne {
                    for ni in 0..nn {
                        out[slot(si, 0, ei, ni)] = walk[ni];
                    }
                }
                if nw == 1 {
                    continue;
                }
                for (wi, &w) in weights.iter().enumerate().skip(1) {
                    for (ei, &eps) in epsilons.iter().enumerate() {
                        for (ni, &n) in sizes.iter().enumerate() {
                            let scale = offset_scale(w, max_delta[si][ni], eps);
                            let a = argmax_share(&pool[..n], scale);
                            out[slot(si, wi, ei, ni)] = (walk[ni].0, a);
                        }
                    }
                }
            }
            let free: Vec<f64> = free_opts
                .iter()
                .map(|(_, j)| f64::from(u8::from(targets.binary_search(j).is_ok())))
                .collect();
            (out, free)
        },
        progress,
    );
    // Per free option, its per-user hits; the best of them chosen on the selection part.
    let free_hits: Vec<Vec<f64>> = (0..free_opts.len())
        .map(|o| stats.iter().map(|s| s.1[o]).collect())
        .collect();
    let best_free = estimate::best_on(&sel, &free_hits);
    let free_policy = free_opts[best_free].0.clone();
    let free = &free_hits[best_free];
    let free_est = Estimate::of(&estimate::on(&est, free));
    let prior_of = |wi: usize| {
        if wi == 0 {
            Prior::None
        } else {
            Prior::Popularity(weights[wi])
        }
    };
    let mut rows = Vec::new();
    // Per ε: krr's best pool and prior (chosen on the selection part), with its per-user
    // calibration hits.
    let mut krr_best: Vec<Option<(CandidatePolicy, Prior, Vec<f64>)>> = Vec::new();
    let mut rng = private.as_ref().map(|p| p.rng()).transpose()?;
    let sum_on =
        |rows: &[usize], v: &dyn Fn(usize) -> f64| -> f64 { rows.iter().map(|&u| v(u)).sum() };
    for (ei, &eps) in epsilons.iter().enumerate() {
        if let (Some(pt), Some(rng)) = (&private, rng.as_mut()) {
            // Every configuration at this ε with its exact sums on the selection and the
            // estimation part: the free options (served 0-DP), then krr over each pool of two
            // or more items with each prior.
            let mut cands: Vec<(CandidatePolicy, Prior, f64)> = Vec::new();
            let mut est_sums: Vec<f64> = Vec::new();
            for (o, (policy, _)) in free_opts.iter().enumerate() {
                let v = |u: usize| free_hits[o][u];
                cands.push((policy.clone(), Prior::None, sum_on(&sel, &v)));
                est_sums.push(sum_on(&est, &v));
            }
            for (si, source) in sources.iter().enumerate() {
                for wi in 0..nw {
                    for (ni, &n) in sizes.iter().enumerate().filter(|p| *p.1 >= 2) {
                        let idx = slot(si, wi, ei, ni);
                        let v = |u: usize| krr_hit(stats[u].0[idx].0, stats[u].0[idx].1, n, eps);
                        cands.push((source.policy(n), prior_of(wi), sum_on(&sel, &v)));
                        est_sums.push(sum_on(&est, &v));
                    }
                }
            }
            let row = private::row(pt, eps, &cands, sel.len(), cfg.margin, rng)?;
            rows.push(estimate::private_margin(
                row,
                &cands,
                &est_sums,
                free_opts.len(),
                est.len(),
                pt.statement().epsilon,
                cfg.margin,
                rng,
            )?);
            continue;
        }
        // The best (pool of size >= 2, prior) by mean on the selection part (ties: the first
        // source, no prior or the smaller weight, the smaller pool), with its per-user hits; and
        // the best without a prior.
        let mut best: Option<(usize, usize, usize, f64, Vec<f64>)> = None;
        let mut best_no_prior: Option<(f64, Vec<f64>)> = None;
        for si in 0..sources.len() {
            for wi in 0..nw {
                for (ni, &n) in sizes.iter().enumerate() {
                    if n < 2 {
                        continue;
                    }
                    let idx = slot(si, wi, ei, ni);
                    let hits: Vec<f64> = stats
                        .iter()
                        .map(|(v, _)| krr_hit(v[idx].0, v[idx].1, n, eps))
                        .collect();
                    let m = Estimate::of(&estimate::on(&sel, &hits)).mean;
                    if wi == 0 && best_no_prior.as_ref().is_none_or(|b| m > b.0) {
                        best_no_prior = Some((m, hits.clone()));
                    }
                    if best.as_ref().is_none_or(|b| m > b.3) {
                        best = Some((si, wi, n, m, hits));
                    }
                }
            }
        }
        let (fm, fse) = (free_est.mean, free_est.se);
        let row = match best {
            Some((si, wi, n, _, hits)) => {
                // Everything reported is measured on the estimation part.
                let diff: Vec<f64> = hits.iter().zip(free).map(|(h, f)| h - f).collect();
                let g = Estimate::of(&estimate::on(&est, &diff));
                let pool = sources[si].policy(n);
                let prior = prior_of(wi);
                let h = Estimate::of(&estimate::on(&est, &hits));
                let wins = beats(&g, cfg.margin);
                krr_best.push(Some((pool.clone(), prior.clone(), hits.clone())));
                TunedRow {
                    epsilon: eps,
                    mechanism: if wins { "krr" } else { "random" }.into(),
                    candidates: if wins {
                        pool.clone()
                    } else {
                        free_policy.clone()
                    },
                    prior: if wins { prior.clone() } else { Prior::None },
                    spends: if wins { eps } else { 0.0 },
                    calibration_hit: if wins { h.mean } else { fm },
                    calibration_se: if wins { h.se } else { fse },
                    fixed_hit: Some(fm),
                    free_option: Some(free_policy.clone()),
                    free_hit: Some(free_est),
                    best_pool: pool,
                    best_prior: prior,
                    best_no_prior_hit: best_no_prior
                        .map(|b| Estimate::of(&estimate::on(&est, &b.1)).mean),
                    best_pool_hit: Some(h.mean),
                    best_pool_gain: Some(g.mean),
                    best_pool_gain_se: Some(g.se),
                    margin: cfg.margin,
                    reason: format!(
                        "chosen on {} calibration users; on {} others the best pool's gain over \
                         {free_policy} is {:+.4} ± {:.4}, {} {} s.e. and positive",
                        sel.len(),
                        est.len(),
                        g.mean,
                        g.se,
                        if wins { "above" } else { "not above" },
                        cfg.margin
                    ),
                    private: None,
                }
            }
            None => {
                krr_best.push(None);
                TunedRow {
                    epsilon: eps,
                    mechanism: "random".into(),
                    candidates: free_policy.clone(),
                    prior: Prior::None,
                    spends: 0.0,
                    calibration_hit: fm,
                    calibration_se: fse,
                    fixed_hit: Some(fm),
                    free_option: Some(free_policy.clone()),
                    free_hit: Some(free_est),
                    best_pool: free_policy.clone(),
                    best_prior: Prior::None,
                    best_no_prior_hit: Some(fm),
                    best_pool_hit: Some(fm),
                    best_pool_gain: Some(0.0),
                    best_pool_gain_se: Some(0.0),
                    margin: cfg.margin,
                    reason: "no pool of two or more items to try (one item)".into(),
                    private: None,
                }
            }
        };
        rows.push(row);
    }
    let mech_rows = tune_mechanisms(
        model, release, cal, cfg, &epsilons, free, &est, &krr_best, progress,
    )?;
    let list_rows = lists::tune_lists(
        model,
        release,
        cal,
        &cfg.lists,
        &epsilons,
        cfg.margin,
        cfg.grid.seed,
        progress,
    )?;
    let split = estimate::split(cal, private.is_none())?;
    let privacy = private.as_ref().map_or_else(public_privacy, |p| {
        estimate::private_privacy(p, epsilons.len())
    });
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
            users: private.is_none().then_some(cal.rows() as u64),
            split: cal.split.clone(),
        },
        config: TuneConfig {
            epsilons,
            sources,
            pool_sizes: sizes,
            margin: cfg.margin,
            prior_weights: weights,
            mechanisms: cfg.mechanisms.clone(),
            grid: cfg.grid.clone(),
            private: cfg.private.clone(),
            lists: cfg.lists.clone(),
        },
        rows,
        free: private.is_none().then_some(free_est),
        free_option: private.is_none().then_some(free_policy),
        estimation: Some(split),
        mechanisms: mech_rows.rows,
        clip_ranges: mech_rows.clip_ranges,
        bounds_file: None,
        bounds: mech_rows.bounds,
        privacy,
        lists: list_rows,
    })
}

/// The mechanism rows of a tuning and the clip bounds they name.
struct MechRows {
    rows: Vec<MechRow>,
    clip_ranges: Vec<(f64, f64)>,
    bounds: Vec<crate::scoring::Sensitivities>,
}

/// Each mechanism of `cfg.mechanisms` tuned over `cfg.grid` on the calibration users at each of
/// `epsilons` ([`grid::tune_grid`], chosen on the selection part; krr takes its best pool and
/// prior from `krr_best`), with what the tuned and the untuned configuration are worth against
/// the best free option, whose per-user calibration hits are `free`, on the estimation part
/// `est`.
#[allow(clippy::too_many_arguments)]
fn tune_mechanisms(
    model: &Model,
    release: &Release,
    cal: &HeldOutRows,
    cfg: &TuneConfig,
    epsilons: &[f64],
    free: &[f64],
    est: &[usize],
    krr_best: &[Option<(CandidatePolicy, Prior, Vec<f64>)>],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<MechRows> {
    let mut out = MechRows {
        rows: Vec::new(),
        clip_ranges: Vec::new(),
        bounds: Vec::new(),
    };
    if cfg.mechanisms.is_empty() {
        return Ok(out);
    }
    let popularity = release.popularity.as_deref().expect("checked by tune");
    let mut names: Vec<String> = Vec::new();
    let mut mechs: Vec<Vec<Box<dyn crate::mechanisms::Mechanism>>> = Vec::new();
    for name in &cfg.mechanisms {
        if names.contains(name) {
            continue;
        }
        let per: Vec<Box<dyn crate::mechanisms::Mechanism>> = epsilons
            .iter()
            .map(|&e| {
                crate::mechanisms::build(
                    name,
                    &crate::mechanisms::MechParams::default().with_epsilon(e),
                )
            })
            .collect::<Result<_>>()?;
        if !matches!(
            per[0].guarantee(),
            crate::mechanisms::Guarantee::Pure { .. }
        ) {
            return Err(Error::Invalid(format!(
                "mechanism '{name}' is {}, not eps-DP: only eps-DP mechanisms are served and tuned",
                per[0].guarantee()
            )));
        }
        names.push(name.clone());
        mechs.push(per);
    }
    let on_grid: Vec<usize> = (0..names.len()).filter(|&m| names[m] != "krr").collect();
    let grid_mechs: Vec<&[Box<dyn crate::mechanisms::Mechanism>]> =
        on_grid.iter().map(|&m| &mechs[m][..]).collect();
    let g = grid::tune_grid(
        model,
        popularity,
        cal,
        &grid_mechs,
        epsilons,
        &cfg.grid,
        progress,
    )?;
    let all: Vec<&[Box<dyn crate::mechanisms::Mechanism>]> = mechs.iter().map(|m| &m[..]).collect();
    let untuned = grid::untuned_hits(model, &release.sens, cal, &all, &cfg.grid, progress);
    let ne = epsilons.len();
    // Every estimate on the estimation part, which no choice read.
    let paired = |hits: &[f64]| {
        let d: Vec<f64> = hits.iter().zip(free).map(|(h, f)| h - f).collect();
        Estimate::of(&estimate::on(est, &d))
    };
    let mean = |hits: &[f64]| Estimate::of(&estimate::on(est, hits));
    for (m, name) in names.iter().enumerate() {
        for (e, &eps) in epsilons.iter().enumerate() {
            let u: Vec<f64> = untuned.iter().map(|h| h[m * ne + e]).collect();
            let (candidates, clip, prior, hits) = if name == "krr" {
                match &krr_best[e] {
                    Some((pool, prior, hits)) => (pool.clone(), None, prior.clone(), hits.clone()),
                    None => continue,
                }
            } else {
                let gi = on_grid.iter().position(|&x| x == m).expect("on the grid");
                if g.n_configs() == 0 {
                    continue;
                }
                let c = g.chosen_prior[gi][e];
                let ((lo, hi), sens) = g.clip(c);
                if !out.clip_ranges.contains(&(*lo, *hi)) {
                    out.clip_ranges.push((*lo, *hi));
                    out.bounds.push(sens.clone());
                }
                (
                    CandidatePolicy::Popular(g.pool(c).0),
                    Some((*lo, *hi)),
                    g.prior(c),
                    g.calibration_hits(gi, e, c),
                )
            };
            out.rows.push(MechRow {
                mechanism: name.clone(),
                epsilon: eps,
                candidates,
                clip,
                prior,
                hit: mean(&hits),
                gain: paired(&hits),
                untuned_hit: mean(&u),
                untuned_gain: paired(&u),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_stats_track_ties_and_counts() {
        let rank = [5u32, 2, 9, 0];
        let scores = [0.3, 0.0, 0.9, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.9];
        let pool: Vec<(f64, f64, bool)> = rank
            .iter()
            .map(|&j| (scores[j as usize], 0.0, [0, 9].contains(&j)))
            .collect();
        let mut out = Vec::new();
        prefix_stats(&pool, &[1, 2, 3, 4], &mut out);
        // N=1: {5} argmax 5, no hit; N=2: argmax 2; N=3: 2 and 9 tie (one of two a hit).
        assert_eq!(out, vec![(0.0, 0.0), (0.0, 0.0), (1.0, 0.5), (2.0, 0.5)]);
        assert_eq!(krr_hit(1.0, 0.5, 1, 1.0), 1.0);
        let e = 2f64.exp();
        assert!((krr_hit(2.0, 0.5, 4, 2.0) - (2.0 + (e - 1.0) * 0.5) / (e + 3.0)).abs() < 1e-12);
        assert!(krr_hit(1.0, 1.0, 10, 1e6).is_finite());
    }

    #[test]
    fn argmax_share_adds_the_offsets_and_splits_ties() {
        // (clipped score, ℓ, held out): without offsets item 0 leads; ℓ = 0 for item 1 (the
        // most popular) and −1 for the others.
        let pool = [(0.5, -1.0, false), (0.4, 0.0, true), (0.4, -1.0, true)];
        assert_eq!(argmax_share(&pool, 0.0), 0.0);
        // scale 0.05: 0.45, 0.4, 0.35 — item 0 still; 0.2: 0.3, 0.4, 0.2 — item 1, a hit.
        assert_eq!(argmax_share(&pool, 0.05), 0.0);
        assert_eq!(argmax_share(&pool, 0.2), 1.0);
        // scale 0.1: 0.4, 0.4, 0.3 — a tie of a miss and a hit.
        assert_eq!(
            argmax_share(&[(0.5, -1.0, false), (0.4, 0.0, true)], 0.1),
            0.5
        );
        assert_eq!(argmax_share(&[], 1.0), 0.0);
    }
}
