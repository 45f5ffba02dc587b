//! Each registry mechanism's serving configuration — a public pool (`popular:N`), a clip range
//! (percentiles of the calibration users' scores) and a public popularity prior — chosen on the
//! calibration users by mean hit@1 (docs/utility.md, "Tuning"). One computation serves both
//! `recsel tune`, which records the choice per ε in `tuning.json` for `recommend --mech M`, and
//! `recsel evaluate`, which measures the same choice on users neither saw.
//!
//! hit@1 is exact where the law is closed form (`random`, `krr`, `em`) and otherwise the share
//! of hits among seeded selections, one stream per (configuration, ε, user, trial).

use crate::data::{row_items, HeldOutRows};
use crate::error::Result;
use crate::mechanisms::{Mechanism, Problem};
use crate::model::Model;
use crate::rng::{name_id, Streams};
use crate::scoring::policy::most_popular;
use crate::scoring::{
    item_sensitivities, ModelScorer, Prior, ResolvedPrior, Sensitivities, SensitivityConfig,
};

use super::estimate::selection_mask;
use super::{krr_hit, map_scored, popularity_log_mass, prior_weight_grid};
use crate::recommend::tuned::MechGrid;

/// Hit@1 of one problem: exact where the law is closed form, else `None`.
pub fn exact_hit(mech: &dyn Mechanism, problem: &Problem<'_>, is_target: &[bool]) -> Option<f64> {
    let k = problem.len();
    let c = is_target.iter().filter(|&&t| t).count() as f64;
    match mech.name() {
        "random" => Some(c / k as f64),
        "krr" => {
            let set = problem.argmax_set();
            let a = set.iter().filter(|&&i| is_target[i]).count() as f64 / set.len() as f64;
            Some(krr_hit(c, a, k, mech.epsilon()))
        }
        "em" => {
            let w = mech.epsilon() / (2.0 * problem.max_sensitivity());
            let m = problem.max_score();
            let (mut hit, mut total) = (0.0, 0.0);
            for (i, &q) in problem.scores().iter().enumerate() {
                let x = (w * (q - m)).exp();
                total += x;
                if is_target[i] {
                    hit += x;
                }
            }
            Some(hit / total)
        }
        _ => None,
    }
}

/// Hit@1 of one problem, exact or by `trials` seeded selections keyed by (`id`, `e`, `user`).
#[allow(clippy::too_many_arguments)]
pub fn hit_of(
    mech: &dyn Mechanism,
    problem: &Problem<'_>,
    is_target: &[bool],
    streams: &Streams,
    id: u32,
    e: u32,
    user: u64,
    trials: u32,
) -> f64 {
    if let Some(h) = exact_hit(mech, problem, is_target) {
        return h;
    }
    let prepared = mech.prepare_many(problem);
    let hits = (0..trials)
        .filter(|&t| is_target[prepared.sample(&mut streams.stream(id, e, user, t))])
        .count();
    hits as f64 / f64::from(trials)
}

/// The stream id of configuration `c` (of `nw` prior weights) for mechanism `name`: the same for
/// a configuration without a prior whatever the number of weights; `k` 1 for the evaluated
/// users, 0 for the calibration users.
pub fn config_id(name: &str, c: usize, nw: usize, k: u32) -> u32 {
    let (pool_clip, wi) = ((c / nw) as u32, (c % nw) as u32);
    name_id(name)
        .wrapping_add(pool_clip * 7_919 + k)
        .wrapping_add(wi * 104_729)
}

/// A problem over `items` with `sens`'s clip bounds and Δ: clipped scores into `q`, Δ into `d`.
pub fn pool_problem(
    items: &[u32],
    s: &[f64],
    sens: &Sensitivities,
    q: &mut Vec<f64>,
    d: &mut Vec<f64>,
) {
    q.clear();
    d.clear();
    q.extend(items.iter().map(|&j| sens.clip(j as usize, s[j as usize])));
    d.extend(items.iter().map(|&j| sens.delta[j as usize]));
}

/// What [`tune_grid`] found: the grid resolved (pools as item lists, clip ranges as bounds
/// computed on the calibration users, prior weights) and per mechanism and ε the configuration
/// with the best calibration mean. A configuration `c` is `((pool · clips) + clip) · weights +
/// weight`.
#[derive(Debug, Clone)]
pub struct GridTuning {
    /// `(N, the N most popular items)` per pool size.
    pub pools: Vec<(usize, Vec<u32>)>,
    /// `((LO, HI), bounds)` per clip range.
    pub clips: Vec<((f64, f64), Sensitivities)>,
    /// Prior weights: 0 (no prior) first.
    pub weights: Vec<f64>,
    priors: Vec<Option<ResolvedPrior>>,
    /// Per mechanism and ε: the best configuration without a prior.
    pub chosen: Vec<Vec<usize>>,
    /// Per mechanism and ε: the best configuration, a prior allowed (ties: no prior, the
    /// smaller weight).
    pub chosen_prior: Vec<Vec<usize>>,
    /// Per calibration user: hit@1 per (mechanism, ε, configuration).
    hits: Vec<Vec<f64>>,
    n_eps: usize,
}

impl GridTuning {
    /// Number of configurations.
    pub fn n_configs(&self) -> usize {
        self.pools.len() * self.clips.len() * self.weights.len()
    }

    /// The pool of configuration `c`.
    pub fn pool(&self, c: usize) -> &(usize, Vec<u32>) {
        &self.pools[c / self.weights.len() / self.clips.len()]
    }

    /// The clip range and bounds of configuration `c`.
    pub fn clip(&self, c: usize) -> &((f64, f64), Sensitivities) {
        &self.clips[c / self.weights.len() % self.clips.len()]
    }

    /// The public prior of configuration `c`.
    pub fn prior(&self, c: usize) -> Prior {
        match c % self.weights.len() {
            0 => Prior::None,
            wi => Prior::Popularity(self.weights[wi]),
        }
    }

    /// Configuration `c` for people: `popular:N, clip pLO/pHI[, prior popularity:W]`.
    pub fn describe(&self, c: usize) -> String {
        let (p, _) = self.pool(c);
        let ((lo, hi), _) = self.clip(c);
        match self.prior(c) {
            Prior::None => format!("popular:{p}, clip p{lo}/p{hi}"),
            prior => format!("popular:{p}, clip p{lo}/p{hi}, prior {prior}"),
        }
    }

    /// The scores of a problem of configuration `c` over `items` at ε `eps` with its prior's
    /// offsets added, as `recommend` adds them, into `out`.
    pub fn with_prior(
        &self,
        q: &[f64],
        d: &[f64],
        items: &[u32],
        c: usize,
        eps: f64,
        out: &mut Vec<f64>,
    ) {
        out.clear();
        out.extend_from_slice(q);
        if let Some(p) = &self.priors[c % self.weights.len()] {
            p.add_offsets(out, d, |a| items[a], eps, &[]);
        }
    }

    /// Per calibration user, the hit@1 of mechanism `m` at ε index `e` with configuration `c`.
    pub fn calibration_hits(&self, m: usize, e: usize, c: usize) -> Vec<f64> {
        let slot = (m * self.n_eps + e) * self.n_configs() + c;
        self.hits.iter().map(|h| h[slot]).collect()
    }
}

/// Tunes each mechanism of `mechs` (per mechanism, one instance per ε of `epsilons`) over `grid`
/// on the calibration users `cal` only: every configuration's hit@1 per user, and per mechanism
/// and ε the best mean on the selection part of them ([`selection_mask`]; the other part
/// estimates the choice) (ties: the first, i.e. the smaller pool, the wider clip range, no prior
/// or the smaller weight). `popularity` ranks the pools. `progress` receives
/// users done.
pub fn tune_grid(
    model: &Model,
    popularity: &[u64],
    cal: &HeldOutRows,
    mechs: &[&[Box<dyn Mechanism>]],
    epsilons: &[f64],
    grid: &MechGrid,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GridTuning> {
    let n = model.n_items();
    let weights = prior_weight_grid(&grid.prior_weights)?;
    let nw = weights.len();
    let ne = epsilons.len();
    let in_selection = selection_mask(cal);
    let pools: Vec<(usize, Vec<u32>)> = grid
        .pools
        .iter()
        .filter(|&&p| p >= 1 && p <= n)
        .map(|&p| Ok((p, most_popular(popularity, p, n)?)))
        .collect::<Result<_>>()?;
    let cal_scorer = ModelScorer::new(model, &cal.history);
    let clips: Vec<((f64, f64), Sensitivities)> = if mechs.is_empty() {
        Vec::new()
    } else {
        grid.clips
            .iter()
            .map(|&(lo, hi)| {
                let sc = SensitivityConfig::new(lo, hi, SensitivityConfig::default().floor)?;
                Ok(((lo, hi), item_sensitivities(&cal_scorer, &sc, &|_| {})))
            })
            .collect::<Result<_>>()?
    };
    let log_mass = popularity_log_mass(n, popularity)?;
    let priors: Vec<Option<ResolvedPrior>> = weights
        .iter()
        .map(|&w| {
            (w > 0.0).then(|| ResolvedPrior {
                prior: Prior::Popularity(w),
                log_mass: log_mass.clone(),
            })
        })
        .collect();
    let mut out = GridTuning {
        pools,
        clips,
        weights,
        priors,
        chosen: Vec::new(),
        chosen_prior: Vec::new(),
        hits: Vec::new(),
        n_eps: ne,
    };
    let n_cfg = out.n_configs();
    let slot = |m: usize, e: usize, c: usize| (m * ne + e) * n_cfg + c;
    let streams = Streams::new(grid.seed);
    let hits = if n_cfg > 0 && !mechs.is_empty() {
        let g = &out;
        map_scored(
            model,
            &cal.history,
            &|u, s| {
                let targets = row_items(&cal.heldout, u);
                let mut hits = vec![0.0; mechs.len() * ne * n_cfg];
                let (mut q, mut d, mut qp) = (Vec::new(), Vec::new(), Vec::new());
                for (pi, (_, items)) in g.pools.iter().enumerate() {
                    let is_t: Vec<bool> = items
                        .iter()
                        .map(|j| targets.binary_search(j).is_ok())
                        .collect();
                    for (ci, (_, sens)) in g.clips.iter().enumerate() {
                        pool_problem(items, s, sens, &mut q, &mut d);
                        for wi in 0..nw {
                            let c = (pi * g.clips.len() + ci) * nw + wi;
                            for (e, &eps) in epsilons.iter().enumerate() {
                                g.with_prior(&q, &d, items, c, eps, &mut qp);
                                let Ok(problem) = Problem::new(&qp, &d) else {
                                    continue;
                                };
                                for (m, per) in mechs.iter().enumerate() {
                                    let mech = &*per[e];
                                    let id = config_id(mech.name(), c, nw, 0);
                                    hits[slot(m, e, c)] = hit_of(
                                        mech,
                                        &problem,
                                        &is_t,
                                        &streams,
                                        id,
                                        e as u32,
                                        u as u64,
                                        grid.trials,
                                    );
                                }
                            }
                        }
                    }
                }
                hits
            },
            progress,
        )
    } else {
        Vec::new()
    };
    out.hits = hits;
    let choose = |with: bool| -> Vec<Vec<usize>> {
        (0..mechs.len())
            .map(|m| {
                (0..ne)
                    .map(|e| {
                        let mut best = (0, f64::NEG_INFINITY);
                        for c in (0..n_cfg).filter(|c| with || c % nw == 0) {
                            let v = out
                                .hits
                                .iter()
                                .enumerate()
                                .filter(|(u, _)| in_selection[*u])
                                .map(|(_, h)| h[slot(m, e, c)])
                                .sum::<f64>();
                            if v > best.1 {
                                best = (c, v);
                            }
                        }
                        best.0
                    })
                    .collect()
            })
            .collect()
    };
    out.chosen = choose(false);
    out.chosen_prior = choose(true);
    Ok(out)
}

/// Per calibration user, the hit@1 of each mechanism of `mechs` at each ε in the configuration
/// served without tuning: every item a candidate, the release's clip bounds `sens`, no prior.
/// Laid out `[user][mechanism · ε count + ε index]`.
pub fn untuned_hits(
    model: &Model,
    sens: &Sensitivities,
    cal: &HeldOutRows,
    mechs: &[&[Box<dyn Mechanism>]],
    grid: &MechGrid,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Vec<f64>> {
    let n = model.n_items();
    let sens_order: Vec<u32> = {
        let mut o: Vec<u32> = (0..n as u32).collect();
        o.sort_by(|&a, &b| sens.delta[a as usize].total_cmp(&sens.delta[b as usize]));
        o
    };
    let streams = Streams::new(grid.seed);
    let all: Vec<u32> = (0..n as u32).collect();
    map_scored(
        model,
        &cal.history,
        &|u, s| {
            let targets = row_items(&cal.heldout, u);
            let is_all: Vec<bool> = all
                .iter()
                .map(|j| targets.binary_search(j).is_ok())
                .collect();
            let (mut q, mut d) = (Vec::new(), Vec::new());
            pool_problem(&all, s, sens, &mut q, &mut d);
            let problem = Problem::new(&q, &d).map(|p| p.with_sens_order(&sens_order));
            let mut out = Vec::new();
            for per in mechs {
                for (e, mech) in per.iter().enumerate() {
                    out.push(match &problem {
                        Ok(p) => {
                            // Streams of their own: 2 marks the untuned configuration.
                            let id = name_id(mech.name()).wrapping_add(2);
                            hit_of(
                                &**mech,
                                p,
                                &is_all,
                                &streams,
                                id,
                                e as u32,
                                u as u64,
                                grid.trials,
                            )
                        }
                        Err(_) => f64::NAN,
                    });
                }
            }
            out
        },
        progress,
    )
}
