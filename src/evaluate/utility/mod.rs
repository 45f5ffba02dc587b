//! What a private recommendation is worth (docs/utility.md): hit@1 on held-out users of the free
//! public baselines, of the non-private top-1, and of every ε-DP mechanism with and without a
//! public pool tuned on calibration users, beside the limit `min(1, e^ε × best fixed item)` that
//! no user-level ε-DP recommender can exceed. `recsel evaluate` prints and draws it.
//!
//! Two disjoint populations: the *calibration* users choose everything that is tuned (the best
//! fixed item, each registry mechanism's pool and clip range, and — through [`tune`] or a
//! `tuning.json` made on them — krr's pool), and the *evaluated* users (the split's test users)
//! give every number of the table. hit@1 is exact where the law is closed form (the fixed items,
//! `popular-sampled`, krr, `em`, `random`) and simulated with seeded streams otherwise, with its
//! standard error over users.

use serde::Serialize;

use crate::data::{row_items, HeldOutRows};
use crate::error::{Error, Result};
use crate::mechanisms::{self, Guarantee, MechParams, Mechanism, Problem};
use crate::model::Model;
use crate::rng::{name_id, Streams};

use super::tuning::estimate::{on, parts};
use super::tuning::grid::{config_id, hit_of, pool_problem, tune_grid};
use super::tuning::{krr_hit, map_scored, tune};
use crate::recommend::release::Release;
use crate::recommend::tuned::{self, Estimate, MechGrid, TuneConfig, Tuning};

mod table;
pub use table::{evaluate, table};

/// What [`evaluate`] measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilityConfig {
    /// ε grid.
    pub epsilons: Vec<f64>,
    /// Registry mechanisms (ε-DP), each measured over every item with the release's clip range
    /// and over a pool and clip range tuned on the calibration users. `krr` is measured over
    /// every item and with the tuned serving configuration.
    pub mechanisms: Vec<String>,
    /// The mechanisms' other parameters.
    pub params: MechParams,
    /// `popular:N` pool sizes tried for the registry mechanisms.
    pub pools: Vec<usize>,
    /// Clip ranges (percentiles of the calibration users' scores) tried for them.
    pub clips: Vec<(f64, f64)>,
    /// Weights W of the public popularity prior (`popularity:W`) tried for them beside no
    /// prior: each registry mechanism gets a row tuned with the prior as well (none when empty).
    pub prior_weights: Vec<f64>,
    /// Selections per evaluated user for a simulated mechanism.
    pub trials: u32,
    /// Selections per calibration user when tuning a simulated mechanism.
    pub tune_trials: u32,
    /// Seed of the simulations.
    pub seed: u64,
}

impl Default for UtilityConfig {
    fn default() -> Self {
        UtilityConfig {
            epsilons: super::tuning::DEFAULT_EPSILONS.to_vec(),
            mechanisms: ["em", "rnm", "gem", "mgem"].map(String::from).to_vec(),
            params: MechParams::default(),
            pools: tuned::DEFAULT_POOLS.to_vec(),
            clips: tuned::DEFAULT_CLIPS.to_vec(),
            prior_weights: tuned::DEFAULT_MECHANISM_PRIOR_WEIGHTS.to_vec(),
            trials: 10,
            tune_trials: tuned::DEFAULT_TRIALS,
            seed: tuned::DEFAULT_SEED,
        }
    }
}

impl UtilityConfig {
    /// The grid the registry mechanisms are tuned over on the calibration users (the one
    /// `recsel tune` records for `recommend --mech M`).
    pub fn grid(&self) -> MechGrid {
        MechGrid {
            pools: self.pools.clone(),
            clips: self.clips.clone(),
            prior_weights: self.prior_weights.clone(),
            trials: self.tune_trials,
            seed: self.seed,
        }
    }
}

/// What a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowKind {
    /// Uses nothing of the user's history: 0-DP, free.
    Baseline,
    /// The model's own top item: ε = ∞, not private.
    NotPrivate,
    /// An ε-DP mechanism (the serving path: public candidates, clipped scores).
    Private,
}

/// One (row, ε) of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// Mean hit@1 over the evaluated users.
    pub hit: f64,
    /// Its standard error.
    pub se: f64,
    /// The configuration measured (pool, clip range), as chosen on the calibration users.
    pub config: String,
    /// Exact (from the selection probabilities) or simulated.
    pub exact: bool,
    /// Paired difference to the best public baseline, and its standard error.
    pub vs_baseline: f64,
    /// Standard error of `vs_baseline`.
    pub vs_baseline_se: f64,
    /// A served row's estimate on the calibration users its choice did not read (`tuning.json`'s
    /// for the tuned row), to set beside `hit`; `None` for the other rows.
    pub calibration: Option<Estimate>,
    /// A served row whose hit@1 is below the best free option's by more than 2 paired s.e. on
    /// the evaluated users.
    pub below_free: bool,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilityRow {
    /// What the row is, for people.
    pub label: String,
    /// Baseline, not private, or private.
    pub kind: RowKind,
    /// Mechanism name (`popular`, `popular-sampled`, `best-fixed`, `top-1` for the others).
    pub mechanism: String,
    /// Whether its configuration was tuned on the calibration users.
    pub tuned: bool,
    /// Whether the tuning could add a public popularity prior (the rows beside the tuned
    /// pool and clip range).
    pub prior: bool,
    /// One cell per ε of the table (the same value at every ε for a baseline).
    pub cells: Vec<Cell>,
}

/// The summary at one ε.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// ε.
    pub epsilon: f64,
    /// The best private row (highest mean hit@1).
    pub best_private: String,
    /// Its hit@1.
    pub hit: f64,
    /// Its paired difference to the best public baseline, with the standard error.
    pub vs_baseline: f64,
    /// Standard error of `vs_baseline`.
    pub vs_baseline_se: f64,
    /// `beats` (more than 2 s.e. above), `within noise`, or `below` the best public baseline.
    pub verdict: String,
    /// Its hit@1 over the limit `min(1, e^ε × best fixed item)`.
    pub share_of_limit: f64,
}

/// The table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilityTable {
    /// ε grid.
    pub epsilons: Vec<f64>,
    /// Evaluated users.
    pub users: usize,
    /// Calibration users.
    pub calibration_users: usize,
    /// The best public baseline (by mean hit@1 on the evaluated users).
    pub best_baseline: String,
    /// The best free option a release offers (`popular` or `heldout`, by mean hit@1 on the
    /// evaluated users): what a served row is flagged against.
    pub best_free: String,
    /// The hit rate of the best fixed item in-sample on the evaluated users (the limit's base; a
    /// bound, not a baseline).
    pub best_fixed_in_sample: f64,
    /// `min(1, e^ε × best_fixed_in_sample)` per ε: no user-level ε-DP recommender does better.
    pub limit: Vec<f64>,
    /// The rows.
    pub rows: Vec<UtilityRow>,
    /// The summary per ε.
    pub verdicts: Vec<Verdict>,
    /// The tuned serving configuration evaluated, per split (from `tuning.json`, or tuned on
    /// the split's calibration users).
    pub tunings: Vec<Tuning>,
}

/// Whether `name` is measured through the simulation/closed-form grid (krr and random have
/// their own rows).
fn grid_mechanism(name: &str) -> bool {
    !matches!(name, "krr" | "random")
}

/// Measures `model` with its `release` on the evaluated users `eval`, everything tuned on the
/// calibration users `cal` (disjoint from `eval`; the caller's split guarantees it). `tuning` is
/// the serving configuration to evaluate; `None` tunes it here on `cal` with the defaults (and
/// `cfg`'s ε grid). `progress` receives users done (calibration, then evaluated).
pub fn measure(
    model: &Model,
    release: &Release,
    tuning: Option<&Tuning>,
    cal: &HeldOutRows,
    eval: &HeldOutRows,
    cfg: &UtilityConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Measured> {
    let n = model.n_items();
    if eval.rows() < 2 || cal.rows() < 2 {
        return Err(Error::Invalid(format!(
            "the utility table needs at least 2 evaluated and 2 calibration users, got {} and {}",
            eval.rows(),
            cal.rows()
        )));
    }
    for &e in &cfg.epsilons {
        mechanisms::check_epsilon(e)?;
    }
    super::tuning::prior_weight_grid(&cfg.prior_weights)?;
    if cfg.trials == 0 || cfg.tune_trials == 0 {
        return Err(Error::Invalid("trials must be at least 1".into()));
    }
    let pop = release.popularity.as_deref().ok_or_else(|| {
        Error::Invalid("the utility table needs the release's training popularity".into())
    })?;
    let tuned_here;
    let tuning = match tuning {
        Some(t) => t,
        None => {
            let tc = TuneConfig {
                epsilons: cfg.epsilons.clone(),
                ..TuneConfig::default()
            };
            tuned_here = tune(model, release, cal, &tc, &|_| {})?;
            &tuned_here
        }
    };
    // Every mechanism at every ε, validated once; only pure ε-DP mechanisms are rows.
    let mut mechs: Vec<Vec<Box<dyn Mechanism>>> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for name in &cfg.mechanisms {
        let per: Vec<Box<dyn Mechanism>> = cfg
            .epsilons
            .iter()
            .map(|&e| mechanisms::build(name, &cfg.params.with_epsilon(e)))
            .collect::<Result<_>>()?;
        if !matches!(per[0].guarantee(), Guarantee::Pure { .. }) {
            return Err(Error::Invalid(format!(
                "mechanism '{name}' is {}, not eps-DP: the utility table compares eps-DP \
                 mechanisms",
                per[0].guarantee()
            )));
        }
        if !names.contains(name) {
            names.push(name.clone());
            mechs.push(per);
        }
    }
    let grid: Vec<usize> = (0..names.len())
        .filter(|&m| grid_mechanism(&names[m]))
        .collect();
    let ne = cfg.epsilons.len();
    let streams = Streams::new(cfg.seed);

    // Calibration users: the best fixed item, and each registry mechanism's pool and clip range.
    let mut cal_counts = vec![0u64; n];
    for &j in cal.heldout.indices() {
        cal_counts[j as usize] += 1;
    }
    let best_fixed = super::tuning::ranking(&cal_counts, 1)[0];
    let grid_mechs: Vec<&[Box<dyn Mechanism>]> = grid.iter().map(|&m| &mechs[m][..]).collect();
    let g = tune_grid(
        model,
        pop,
        cal,
        &grid_mechs,
        &cfg.epsilons,
        &cfg.grid(),
        progress,
    )?;
    let (chosen, chosen_prior) = (&g.chosen, &g.chosen_prior);
    let nw = g.weights.len();

    // The tuned serving configuration per ε: krr over its pool, or the fixed item.
    let fixed_item = super::tuning::ranking(pop, 1)[0];
    let heldout_item = release
        .heldout
        .as_deref()
        .map(|h| super::tuning::ranking(h, 1)[0]);
    // Per ε: what it serves, the pool (None: the fixed item), the ε it spends, and the public
    // prior's offsets over the pool (empty: no prior) — as `recommend` adds them.
    #[allow(clippy::type_complexity)]
    let tuned: Vec<(String, Option<Vec<u32>>, f64, Vec<f64>)> = cfg
        .epsilons
        .iter()
        .map(|&e| {
            let ch = tuning.choice(e)?;
            Ok(if ch.mechanism == "krr" {
                let list = ch.candidates.resolve_with(
                    n,
                    release.popularity.as_deref(),
                    release.heldout.as_deref(),
                    &|_| None,
                )?;
                let items = match list {
                    crate::scoring::CandidateList::Fixed(v) => v,
                    _ => return Err(Error::Invalid("a tuned pool is a fixed list".into())),
                };
                let offsets = match ch.prior.resolve(n, Some(pop), None, &|_| None)? {
                    Some(p) => {
                        let deltas: Vec<f64> = items
                            .iter()
                            .map(|&j| release.sens.delta[j as usize])
                            .collect();
                        let mut b = vec![0.0; items.len()];
                        p.add_offsets(&mut b, &deltas, |a| items[a], ch.epsilon, &[]);
                        b
                    }
                    None => Vec::new(),
                };
                let prior = match &ch.prior {
                    crate::scoring::Prior::None => String::new(),
                    p => format!(" with prior {p}"),
                };
                (
                    format!("krr over {}{prior} at eps {}", ch.candidates, ch.epsilon),
                    Some(items),
                    ch.epsilon,
                    offsets,
                )
            } else {
                ("popular:1 (0-DP)".to_string(), None, 0.0, Vec::new())
            })
        })
        .collect::<Result<_>>()?;
    let sens_order: Vec<u32> = {
        let d = &release.sens.delta;
        let mut o: Vec<u32> = (0..n as u32).collect();
        o.sort_by(|&a, &b| d[a as usize].total_cmp(&d[b as usize]));
        o
    };
    let pop_total: f64 = pop.iter().map(|&c| c as f64).sum::<f64>().max(1.0);

    // Evaluated users. Layout: 4 baselines, then per ε: tuned krr, krr over every item, and per
    // grid mechanism (every item, tuned).
    let with_priors = nw > 1;
    let per_grid = if with_priors { 3 } else { 2 };
    let per_eps = 2 + per_grid * grid.len();
    let eval_hits: Vec<Vec<f64>> = map_scored(
        model,
        &eval.history,
        &|u, s| {
            let targets = row_items(&eval.heldout, u);
            let has = |j: u32| targets.binary_search(&j).is_ok();
            let hit = |j: u32| f64::from(u8::from(has(j)));
            let mut out = Vec::with_capacity(4 + ne * per_eps);
            out.push(hit(fixed_item));
            out.push(targets.iter().map(|&j| pop[j as usize] as f64).sum::<f64>() / pop_total);
            out.push(hit(best_fixed));
            let top = (0..n).fold(0usize, |b, j| if s[j] > s[b] { j } else { b });
            out.push(hit(top as u32));
            let all: Vec<u32> = (0..n as u32).collect();
            let is_all: Vec<bool> = all.iter().map(|&j| has(j)).collect();
            let (mut q, mut d) = (Vec::new(), Vec::new());
            pool_problem(&all, s, &release.sens, &mut q, &mut d);
            let all_problem = Problem::new(&q, &d).map(|p| p.with_sens_order(&sens_order));
            let (mut tq, mut td) = (Vec::new(), Vec::new());
            for (e, &eps) in cfg.epsilons.iter().enumerate() {
                match &tuned[e].1 {
                    Some(items) => {
                        pool_problem(items, s, &release.sens, &mut tq, &mut td);
                        for (v, b) in tq.iter_mut().zip(&tuned[e].3) {
                            *v += b;
                        }
                        let set = Problem::new(&tq, &td).map(|p| p.argmax_set());
                        let c = items.iter().filter(|&&j| has(j)).count() as f64;
                        let a = match set {
                            Ok(set) => {
                                set.iter().filter(|&&i| has(items[i])).count() as f64
                                    / set.len() as f64
                            }
                            Err(_) => 0.0,
                        };
                        out.push(krr_hit(c, a, items.len(), tuned[e].2));
                    }
                    None => out.push(hit(fixed_item)),
                }
                out.push(match &all_problem {
                    Ok(p) => {
                        let set = p.argmax_set();
                        let a =
                            set.iter().filter(|&&i| is_all[i]).count() as f64 / set.len() as f64;
                        krr_hit(targets.len() as f64, a, n, eps)
                    }
                    Err(_) => f64::NAN,
                });
                for (gi, &m) in grid.iter().enumerate() {
                    let mech = &*mechs[m][e];
                    let user = u as u64 | 1 << 40;
                    let id = name_id(mech.name());
                    out.push(match &all_problem {
                        Ok(p) => hit_of(mech, p, &is_all, &streams, id, e as u32, user, cfg.trials),
                        Err(_) => f64::NAN,
                    });
                    let tuned_rows = if with_priors {
                        [chosen[gi][e], chosen_prior[gi][e]].to_vec()
                    } else {
                        vec![chosen[gi][e]]
                    };
                    for c in tuned_rows {
                        let (_, items) = g.pool(c);
                        let (_, sens) = g.clip(c);
                        pool_problem(items, s, sens, &mut tq, &mut td);
                        let mut qp = Vec::new();
                        g.with_prior(&tq, &td, items, c, eps, &mut qp);
                        let is_t: Vec<bool> = items.iter().map(|&j| has(j)).collect();
                        out.push(match Problem::new(&qp, &td) {
                            Ok(p) => {
                                let id = config_id(mech.name(), c, nw, 1);
                                hit_of(mech, &p, &is_t, &streams, id, e as u32, user, cfg.trials)
                            }
                            Err(_) => f64::NAN,
                        });
                    }
                }
            }
            if let Some(j) = heldout_item {
                out.push(hit(j));
            }
            out
        },
        progress,
    );

    // The rows: which column of each user's hits holds each (row, ε), and what was measured.
    let baselines = [
        (
            "popular",
            "popular: the most popular training item to everyone (0-DP)",
        ),
        (
            "popular-sampled",
            "popular-sampled: items drawn by training popularity (0-DP)",
        ),
        (
            "best-fixed",
            "best fixed item of the calibration users' held-out items (0-DP)",
        ),
    ];
    let mut rows = Vec::new();
    for (i, (mech, label)) in baselines.iter().enumerate() {
        rows.push(RowSpec {
            label: (*label).into(),
            kind: RowKind::Baseline,
            mechanism: (*mech).into(),
            tuned: i == 2,
            prior: false,
            exact: true,
            cols: vec![i; ne],
            configs: vec![String::new(); ne],
            calibration: vec![None; ne],
        });
    }
    if heldout_item.is_some() {
        rows.push(RowSpec {
            label: "heldout: the item the fitted users held out most, to everyone (the release's \
                    public counts, 0-DP)"
                .into(),
            kind: RowKind::Baseline,
            mechanism: "heldout".into(),
            tuned: false,
            prior: false,
            exact: true,
            cols: vec![4 + ne * per_eps; ne],
            configs: vec![String::new(); ne],
            calibration: vec![None; ne],
        });
    }
    // A served row's estimate on the calibration users its choice did not read: the tuned row's
    // from the tuning, each grid mechanism's on the estimation part.
    let (_, est) = parts(cal);
    let tuned_cal: Vec<Option<Estimate>> = cfg
        .epsilons
        .iter()
        .map(|&e| {
            let ch = tuning.choice(e).ok()?;
            let r = ch.row?;
            Some(Estimate {
                mean: r.calibration_hit,
                se: r.calibration_se,
            })
        })
        .collect();
    let grid_cal = |gi: usize, e: usize, c: usize| {
        Some(Estimate::of(&on(&est, &g.calibration_hits(gi, e, c))))
    };
    rows.push(RowSpec {
        label: "non-private top-1 of the model (eps = inf, NOT private)".into(),
        kind: RowKind::NotPrivate,
        mechanism: "top-1".into(),
        tuned: false,
        prior: false,
        exact: true,
        cols: vec![3; ne],
        configs: vec![String::new(); ne],
        calibration: vec![None; ne],
    });
    let at = |e: usize, k: usize| 4 + e * per_eps + k;
    rows.push(RowSpec {
        label: "krr, tuned on calibration users: public pool or the fixed item (recsel tune)"
            .into(),
        kind: RowKind::Private,
        mechanism: "krr".into(),
        tuned: true,
        prior: false,
        exact: true,
        cols: (0..ne).map(|e| at(e, 0)).collect(),
        configs: tuned.iter().map(|t| t.0.clone()).collect(),
        calibration: tuned_cal,
    });
    for (gi, &m) in grid.iter().enumerate() {
        let name = &names[m];
        rows.push(RowSpec {
            label: format!("{name}, tuned pool and clip range"),
            kind: RowKind::Private,
            mechanism: name.clone(),
            tuned: true,
            prior: false,
            exact: name == "em",
            cols: (0..ne).map(|e| at(e, 3 + per_grid * gi)).collect(),
            configs: (0..ne).map(|e| g.describe(chosen[gi][e])).collect(),
            calibration: (0..ne).map(|e| grid_cal(gi, e, chosen[gi][e])).collect(),
        });
        if with_priors {
            rows.push(RowSpec {
                label: format!("{name}, tuned pool, clip range and popularity prior"),
                kind: RowKind::Private,
                mechanism: name.clone(),
                tuned: true,
                prior: true,
                exact: name == "em",
                cols: (0..ne).map(|e| at(e, 4 + per_grid * gi)).collect(),
                configs: (0..ne).map(|e| g.describe(chosen_prior[gi][e])).collect(),
                calibration: (0..ne)
                    .map(|e| grid_cal(gi, e, chosen_prior[gi][e]))
                    .collect(),
            });
        }
        rows.push(RowSpec {
            label: format!("{name}, every item, the release's clip range"),
            kind: RowKind::Private,
            mechanism: name.clone(),
            tuned: false,
            prior: false,
            exact: name == "em",
            cols: (0..ne).map(|e| at(e, 2 + per_grid * gi)).collect(),
            configs: vec!["all".into(); ne],
            calibration: vec![None; ne],
        });
    }
    rows.push(RowSpec {
        label: "krr, every item".into(),
        kind: RowKind::Private,
        mechanism: "krr".into(),
        tuned: false,
        prior: false,
        exact: true,
        cols: (0..ne).map(|e| at(e, 1)).collect(),
        configs: vec!["all".into(); ne],
        calibration: vec![None; ne],
    });
    let mut counts = vec![0u64; n];
    for &j in eval.heldout.indices() {
        counts[j as usize] += 1;
    }
    Ok(Measured {
        epsilons: cfg.epsilons.clone(),
        rows,
        hits: eval_hits,
        heldout_counts: counts,
        calibration_users: cal.rows(),
        tuning: tuning.clone(),
    })
}

/// What one row measures: its column in each user's hits per ε, and the configuration.
#[derive(Debug, Clone, PartialEq)]
struct RowSpec {
    label: String,
    kind: RowKind,
    mechanism: String,
    tuned: bool,
    prior: bool,
    exact: bool,
    cols: Vec<usize>,
    configs: Vec<String>,
    /// A served row's calibration estimate per ε.
    calibration: Vec<Option<Estimate>>,
}

/// One split's measurements ([`measure`]): per evaluated user, the hit@1 of every row at every
/// ε. Splits over disjoint users merge into one table ([`table`]).
#[derive(Debug, Clone)]
pub struct Measured {
    epsilons: Vec<f64>,
    rows: Vec<RowSpec>,
    hits: Vec<Vec<f64>>,
    heldout_counts: Vec<u64>,
    calibration_users: usize,
    tuning: Tuning,
}
