//! What a private list is worth (docs/utility.md, "Lists"): Recall@k, nDCG@k and hit@k on
//! held-out users of private lists of k (each one release at ε), beside the free lists — the k
//! most popular training items, the k items most often held out, the same public rankings
//! filtered on the device (the first k items the user does not own: post-processing, no
//! history sent) and the best fixed list of the calibration users —, the non-private top-k, and
//! the limit: no user-level ε-DP list does better than e^ε times the best fixed list (for any
//! metric in [0, 1]: E f(M(h)) ≤ e^ε E f(M(h₀)) for a fixed history h₀, whose output is a
//! distribution over fixed lists). For Recall@k and nDCG@k the best fixed list is exact (the
//! metrics add up over the list's positions); for hit@k an upper bound of it is used (the
//! smaller of the sum of the k best items' hit rates and the greedy cover over 1 − 1/e).
//!
//! The calibration users choose everything tuned (the best fixed list and each mechanism's
//! `popular:N` pool, by mean Recall@k); the evaluated users give every number.

use serde::Serialize;

use super::tuning::grid::pool_problem;
use super::tuning::lists::{filtered, metrics, ListDraw};
use super::tuning::{map_scored, popularity_log_mass, ranking};
use crate::data::{row_items, HeldOutRows};
use crate::error::{Error, Result};
use crate::mechanisms::{self, ListForm, MechParams, Problem, TopK};
use crate::model::Model;
use crate::recommend::release::Release;
use crate::recommend::tuned::{mean_se, Estimate, TunedChoice, Tuning};
use crate::rng::{name_id, Streams};
use crate::scoring::prior::offset_scale;
use crate::scoring::{CandidatePolicy, Prior};

/// What [`measure_lists`] measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListConfig {
    /// List length k.
    pub k: usize,
    /// ε of each list.
    pub epsilons: Vec<f64>,
    /// Registry mechanisms, peeled at ε/k per round.
    pub mechanisms: Vec<String>,
    /// Their other parameters.
    pub params: MechParams,
    /// `popular:N` pool sizes tried on the calibration users beside every item.
    pub pools: Vec<usize>,
    /// Seed of the simulations.
    pub seed: u64,
}

/// One (row, ε): the means over the evaluated users with Recall@k's standard error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListCell {
    /// Mean Recall@k (hits over min(k, held-out items)).
    pub recall: f64,
    /// Its standard error.
    pub recall_se: f64,
    /// Mean nDCG@k.
    pub ndcg: f64,
    /// Mean hit@k (at least one held-out item in the list).
    pub hit: f64,
    /// Its standard error.
    pub hit_se: f64,
    /// The configuration (a tuned pool), empty for the others.
    pub config: String,
}

/// One row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListRow {
    /// What it is.
    pub label: String,
    /// `free` (0-DP), `not private`, `private` or `tuned` (the tuned list: private or free).
    pub kind: &'static str,
    /// One cell per ε (the same at every ε for a free row).
    pub cells: Vec<ListCell>,
}

/// The table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListTable {
    /// k.
    pub k: usize,
    /// ε grid.
    pub epsilons: Vec<f64>,
    /// Evaluated users.
    pub users: usize,
    /// Calibration users.
    pub calibration_users: usize,
    /// The rows.
    pub rows: Vec<ListRow>,
    /// The best fixed list's Recall@k, nDCG@k and hit@k (an upper bound for hit) in-sample on
    /// the evaluated users: the limit's base.
    pub best_fixed: [f64; 3],
    /// min(1, e^ε × best_fixed) per ε, for Recall@k, nDCG@k and hit@k.
    pub limit: Vec<[f64; 3]>,
    /// Per ε, hit@k of the tuned list over hit@k of k top-1 calls at ε/k each, on the same
    /// users (ratio of means, delta-method s.e.; `None` without both rows).
    pub shelf_ratio: Vec<Option<Estimate>>,
}

/// The best fixed list for Recall@k (and for nDCG@k, whose weights differ) on `rows`, and the
/// weights: item i's weight is Σ_u 1[i ∈ T_u] / norm(T_u).
fn best_fixed(rows: &HeldOutRows, n: usize, k: usize, ndcg: bool) -> (Vec<u32>, f64) {
    let mut w = vec![0.0f64; n];
    for u in 0..rows.rows() {
        let t = row_items(&rows.heldout, u);
        let m = k.min(t.len());
        if m == 0 {
            continue;
        }
        let norm = if ndcg {
            (0..m).map(|p| 1.0 / ((p + 2) as f64).log2()).sum()
        } else {
            m as f64
        };
        for &j in t {
            w[j as usize] += 1.0 / norm;
        }
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| w[b as usize].total_cmp(&w[a as usize]).then(a.cmp(&b)));
    order.truncate(k);
    let value = order
        .iter()
        .enumerate()
        .map(|(p, &j)| {
            let disc = if ndcg {
                1.0 / ((p + 2) as f64).log2()
            } else {
                1.0
            };
            disc * w[j as usize]
        })
        .sum::<f64>()
        / rows.rows().max(1) as f64;
    (order, value)
}

/// An upper bound of the best fixed list's hit@k on `rows`: the smaller of the k best items'
/// hit rates summed and the greedy cover divided by 1 − 1/e (greedy covers at least that share
/// of the best).
fn best_fixed_hit_bound(rows: &HeldOutRows, n: usize, k: usize) -> f64 {
    let users = rows.rows().max(1) as f64;
    let mut counts = vec![0u64; n];
    for &j in rows.heldout.indices() {
        counts[j as usize] += 1;
    }
    let sum: f64 = ranking(&counts, k)
        .iter()
        .map(|&j| counts[j as usize] as f64)
        .sum::<f64>()
        / users;
    let mut covered = vec![false; rows.rows()];
    let mut holders: Vec<Vec<u32>> = vec![Vec::new(); n];
    for u in 0..rows.rows() {
        for &j in row_items(&rows.heldout, u) {
            holders[j as usize].push(u as u32);
        }
    }
    let mut got = 0usize;
    for _ in 0..k {
        let gain = |j: usize| holders[j].iter().filter(|&&u| !covered[u as usize]).count();
        let Some(best) = (0..n).max_by_key(|&j| (gain(j), std::cmp::Reverse(j))) else {
            break;
        };
        for &u in &holders[best] {
            if !covered[u as usize] {
                covered[u as usize] = true;
                got += 1;
            }
        }
    }
    let greedy = got as f64 / users / (1.0 - (-1.0f64).exp());
    sum.min(greedy).min(1.0)
}

/// krr's law at `epsilon` over items with values `v` (clipped scores plus a prior's offsets):
/// each item of the argmax set (ties uniform) with `(e^ε − 1)/|A|` extra weight over the others,
/// `P(j) = (1 + (e^ε − 1)·1[j ∈ A]/|A|) / (e^ε + n − 1)`; ε = 0 is the uniform law (`random`).
pub fn krr_law(v: &[f64], epsilon: f64) -> Vec<f64> {
    let n = v.len();
    let best = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tied = v.iter().filter(|&&x| x == best).count().max(1) as f64;
    let z = (-epsilon).exp();
    let denom = 1.0 + (n as f64 - 1.0) * z;
    v.iter()
        .map(|&x| {
            if x == best {
                (z + (1.0 - z) / tied) / denom
            } else {
                z / denom
            }
        })
        .collect()
}

/// Exact hit@K and Recall@K of what a user sees after `calls` independent top-1 releases with
/// the law `p` on the user's held-out items (`target_p`: P(one call shows held-out item j), one
/// per held-out item in the pool) for a user with `n_targets` held-out items: the distinct items
/// shown, `hit = 1 − (1 − Σ_j p_j)^K`, `Recall = Σ_j (1 − (1 − p_j)^K) / min(K, n_targets)`.
pub fn calls_exact(target_p: &[f64], n_targets: usize, calls: usize) -> [f64; 2] {
    let m = calls.min(n_targets);
    if m == 0 {
        return [0.0; 2];
    }
    let k = calls as i32;
    let one: f64 = target_p.iter().sum();
    let seen: f64 = target_p.iter().map(|p| 1.0 - (1.0 - p).powi(k)).sum();
    [1.0 - (1.0 - one.min(1.0)).powi(k), seen / m as f64]
}

/// K top-1 calls of a tuned top-1 row: its pool (ranking order) and law.
struct Calls {
    items: Vec<u32>,
    epsilon: f64,
    scale: f64,
}

impl Calls {
    /// The tuned choice `c`: krr over its pool with its prior, or the free item (`random` over
    /// one item).
    fn new(c: &TunedChoice, release: &Release) -> Result<Self> {
        let (counts, n) = match c.candidates {
            CandidatePolicy::Popular(n) => (release.popularity.as_deref(), n),
            CandidatePolicy::Heldout(n) => (release.heldout.as_deref(), n),
            ref p => {
                return Err(Error::Invalid(format!(
                    "a tuned top-1 row over '{p}' (popular:N or heldout:N expected)"
                )))
            }
        };
        let counts = counts.ok_or_else(|| {
            Error::Invalid(format!("the release has no counts for '{}'", c.candidates))
        })?;
        let items = ranking(counts, n.min(counts.len()));
        let krr = c.mechanism == "krr";
        let epsilon = if krr { c.epsilon } else { 0.0 };
        let scale = match (&c.prior, krr) {
            (Prior::Popularity(w), true) => {
                let dmax = items
                    .iter()
                    .map(|&j| release.sens.delta[j as usize])
                    .fold(0.0, f64::max);
                offset_scale(*w, dmax, epsilon)
            }
            _ => 0.0,
        };
        Ok(Calls {
            items,
            epsilon,
            scale,
        })
    }

    /// hit@K, Recall@K (exact) and nDCG@K (one simulated sequence of `calls` picks, the
    /// distinct items in the order they first appear) for a user with scores `s`.
    fn metrics(
        &self,
        s: &[f64],
        release: &Release,
        log_mass: &[f64],
        targets: &[u32],
        calls: usize,
        rng: &mut crate::rng::Rng,
    ) -> [f64; 3] {
        use rand::Rng as _;
        let v: Vec<f64> = self
            .items
            .iter()
            .map(|&j| {
                release.sens.clip(j as usize, s[j as usize])
                    + self.scale * log_mass.get(j as usize).copied().unwrap_or(0.0)
            })
            .collect();
        let p = krr_law(&v, self.epsilon);
        let target_p: Vec<f64> = self
            .items
            .iter()
            .zip(&p)
            .filter(|(j, _)| targets.binary_search(j).is_ok())
            .map(|(_, &q)| q)
            .collect();
        let [hit, recall] = calls_exact(&target_p, targets.len(), calls);
        let mut seen: Vec<u32> = Vec::with_capacity(calls);
        for _ in 0..calls {
            let mut u = rng.random::<f64>();
            let mut pick = self.items.len() - 1;
            for (i, &q) in p.iter().enumerate() {
                if u < q {
                    pick = i;
                    break;
                }
                u -= q;
            }
            let j = self.items[pick];
            if !seen.contains(&j) {
                seen.push(j);
            }
        }
        [hit, recall, metrics(&seen, targets, calls)[2]]
    }
}

/// Measures lists of `cfg.k` for `model` with its `release` on the evaluated users `eval`,
/// everything tuned on the calibration users `cal` (disjoint from `eval`); with a `tuning`
/// (`tuning.json`), also its tuned list of `cfg.k` (when it has one) and `cfg.k` calls of its
/// tuned top-1 row at ε/k each.
#[allow(clippy::too_many_arguments)]
pub fn measure_lists(
    model: &Model,
    release: &Release,
    tuning: Option<&Tuning>,
    cal: &HeldOutRows,
    eval: &HeldOutRows,
    cfg: &ListConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ListTable> {
    let (n, k) = (model.n_items(), cfg.k);
    if k < 2 || eval.rows() < 2 || cal.rows() < 2 {
        return Err(Error::Invalid(format!(
            "the list table needs k >= 2 and at least 2 evaluated and 2 calibration users, got \
             k = {k}, {} and {}",
            eval.rows(),
            cal.rows()
        )));
    }
    let pop = release.popularity.as_deref().ok_or_else(|| {
        Error::Invalid("the list table needs the release's training popularity".into())
    })?;
    // Every (mechanism, ε) list of k and of 2k (the device-filtered private list), built once.
    let mut lists: Vec<Vec<(TopK, TopK)>> = Vec::new();
    for name in &cfg.mechanisms {
        let spec = mechanisms::spec(name)?;
        lists.push(
            cfg.epsilons
                .iter()
                .map(|&e| {
                    let p = cfg.params.with_epsilon(e);
                    Ok((
                        TopK::new(spec, &p, k, ListForm::Peeling)?,
                        TopK::new(spec, &p, 2 * k, ListForm::Peeling)?,
                    ))
                })
                .collect::<Result<_>>()?,
        );
    }
    let all: Vec<u32> = (0..n as u32).collect();
    let mut pools: Vec<(String, Vec<u32>)> = vec![("all".into(), all.clone())];
    for &p in cfg.pools.iter().filter(|&&p| p >= 2 * k && p < n) {
        pools.push((format!("popular:{p}"), ranking(pop, p)));
    }
    let streams = Streams::new(cfg.seed);
    let draw = |t: &TopK, items: &[u32], s: &[f64], id: u32, e: usize, u: u64| -> Vec<u32> {
        let (mut q, mut d) = (Vec::new(), Vec::new());
        pool_problem(items, s, &release.sens, &mut q, &mut d);
        match Problem::new(&q, &d) {
            Ok(p) => {
                let mut rng = streams.stream(id, e as u32, u, 0);
                t.select(&p, &mut rng)
                    .into_iter()
                    .map(|a| items[a])
                    .collect()
            }
            Err(_) => Vec::new(),
        }
    };
    let (nm, ne, np) = (cfg.mechanisms.len(), cfg.epsilons.len(), pools.len());

    // Calibration users: each (mechanism, ε)'s pool, by mean Recall@k of one list per user.
    let cal_recall: Vec<Vec<f64>> = map_scored(
        model,
        &cal.history,
        &|u, s| {
            let t = row_items(&cal.heldout, u);
            let mut out = Vec::with_capacity(nm * ne * np);
            for (m, per) in lists.iter().enumerate() {
                let id = name_id(&cfg.mechanisms[m]) ^ 0x5eed;
                for (e, (topk, _)) in per.iter().enumerate() {
                    for (_, items) in &pools {
                        out.push(metrics(&draw(topk, items, s, id, e, u as u64), t, k)[1]);
                    }
                }
            }
            out
        },
        progress,
    );
    let chosen: Vec<usize> = (0..nm * ne)
        .map(|me| {
            (0..np)
                .max_by(|&a, &b| {
                    let mean = |p: usize| cal_recall.iter().map(|r| r[me * np + p]).sum::<f64>();
                    mean(a).total_cmp(&mean(b)).then(b.cmp(&a))
                })
                .expect("at least the pool of every item")
        })
        .collect();
    let (cal_best, _) = best_fixed(cal, n, k, false);

    // Evaluated users.
    let pop_rank = ranking(pop, n);
    let held_rank = release.heldout.as_deref().map(|h| ranking(h, n));
    let free: Vec<(String, Option<&[u32]>, bool)> = {
        let mut f: Vec<(String, Option<&[u32]>, bool)> = vec![(
            format!("top-{k} popular (the release's training popularity, 0-DP)"),
            Some(&pop_rank[..]),
            false,
        )];
        if let Some(h) = &held_rank {
            f.push((
                format!("top-{k} held-out (the release's public counts, 0-DP)"),
                Some(&h[..]),
                false,
            ));
        }
        f.push((format!("popular, device-filtered: the first {k} of the public ranking the user does not own (0-DP, no history sent)"), Some(&pop_rank[..]), true));
        if let Some(h) = &held_rank {
            f.push((format!("held-out, device-filtered: the first {k} the user does not own (0-DP, no history sent)"), Some(&h[..]), true));
        }
        f.push((
            format!("best fixed list of {k} of the calibration users (0-DP)"),
            Some(&cal_best[..]),
            false,
        ));
        f
    };
    let nf = free.len();
    let per_me = 3;
    // The tuned list of k per ε, and k calls of the tuned top-1 row for ε/k.
    let tuned_lists: Vec<(ListDraw, String)> = match tuning {
        Some(t) if t.lists.iter().any(|r| r.k == k) => cfg
            .epsilons
            .iter()
            .map(|&e| {
                let r = t.list_choice(k, e)?;
                let what = if r.serves.is_public() {
                    format!("free: {} of {}", r.serves.candidates, r.serves.released)
                } else {
                    format!(
                        "{} {} of {}",
                        r.serves.mechanism, r.serves.candidates, r.serves.released
                    )
                };
                Ok((ListDraw::new(r.serves, release, r.epsilon)?, what))
            })
            .collect::<Result<_>>()?,
        _ => Vec::new(),
    };
    let calls: Vec<(Calls, String)> = match tuning {
        Some(t) => cfg
            .epsilons
            .iter()
            .map(|&e| {
                let c = t.choice(e / k as f64)?;
                let what = match c.mechanism.as_str() {
                    "krr" => format!("krr {} at {}, prior {}", c.candidates, c.epsilon, c.prior),
                    _ => format!("free: {}", c.candidates),
                };
                Ok((Calls::new(&c, release)?, what))
            })
            .collect::<Result<_>>()?,
        None => Vec::new(),
    };
    let log_mass = popularity_log_mass(n, pop)?;
    let hits: Vec<Vec<[f64; 3]>> = map_scored(
        model,
        &eval.history,
        &|u, s| {
            let t = row_items(&eval.heldout, u);
            let owned = row_items(&eval.history, u);
            let mut out = Vec::with_capacity(nf + 1 + nm * ne * per_me);
            for (_, ranked, device) in &free {
                let ranked = ranked.expect("a free list");
                let l = if *device {
                    filtered(ranked, owned, k)
                } else {
                    ranked[..k.min(ranked.len())].to_vec()
                };
                out.push(metrics(&l, t, k));
            }
            let top = crate::eval::top_k(s, owned, k);
            out.push(metrics(&top, t, k));
            for (m, per) in lists.iter().enumerate() {
                let id = name_id(&cfg.mechanisms[m]);
                for (e, (topk, top2k)) in per.iter().enumerate() {
                    let u64_ = u as u64 | 1 << 40;
                    out.push(metrics(&draw(topk, &all, s, id, e, u64_), t, k));
                    let items = &pools[chosen[m * ne + e]].1;
                    out.push(metrics(&draw(topk, items, s, id ^ 1, e, u64_), t, k));
                    let l2 = draw(top2k, items, s, id ^ 2, e, u64_);
                    out.push(metrics(&filtered(&l2, owned, k), t, k));
                }
            }
            let user = u as u64 | 3 << 40;
            for (e, (d, _)) in tuned_lists.iter().enumerate() {
                let l = d.shown(s, &release.sens, owned, k, &streams, e as u32, user);
                out.push(metrics(&l, t, k));
            }
            for (e, (c, _)) in calls.iter().enumerate() {
                let mut rng = streams.stream(0xca11, e as u32, user, 0);
                out.push(c.metrics(s, release, &log_mass, t, k, &mut rng));
            }
            out
        },
        progress,
    );
    let cell = |c: usize, config: String| {
        let col = |x: usize| hits.iter().map(|h| h[c][x]).collect::<Vec<f64>>();
        let (recall, recall_se) = mean_se(&col(1));
        ListCell {
            recall,
            recall_se,
            ndcg: mean_se(&col(2)).0,
            hit: mean_se(&col(0)).0,
            hit_se: mean_se(&col(0)).1,
            config,
        }
    };
    let mut rows = Vec::new();
    for (i, (label, _, _)) in free.iter().enumerate() {
        rows.push(ListRow {
            label: label.clone(),
            kind: "free",
            cells: vec![cell(i, String::new()); ne],
        });
    }
    rows.push(ListRow {
        label: format!(
            "non-private top-{k} of the model, own items excluded (eps = inf, NOT private)"
        ),
        kind: "not private",
        cells: vec![cell(nf, String::new()); ne],
    });
    for (m, name) in cfg.mechanisms.iter().enumerate() {
        let at = |e: usize, x: usize| nf + 1 + (m * ne + e) * per_me + x;
        let pool = |e: usize| pools[chosen[m * ne + e]].0.clone();
        rows.push(ListRow {
            label: format!("{name} list (peeling at eps/{k}), pool tuned on calibration users"),
            kind: "private",
            cells: (0..ne).map(|e| cell(at(e, 1), pool(e))).collect(),
        });
        rows.push(ListRow {
            label: format!(
                "{name} list of {} over the tuned pool, device-filtered to {k}",
                2 * k
            ),
            kind: "private",
            cells: (0..ne).map(|e| cell(at(e, 2), pool(e))).collect(),
        });
        rows.push(ListRow {
            label: format!("{name} list (peeling at eps/{k}), every item"),
            kind: "private",
            cells: (0..ne).map(|e| cell(at(e, 0), "all".into())).collect(),
        });
    }
    let at = nf + 1 + nm * ne * per_me;
    if !tuned_lists.is_empty() {
        rows.push(ListRow {
            label: format!(
                "tuned list of {k} (tuning.json, `recsel tune --k {k}`: the best private list if \
                 it beat the best free list on the calibration users, else that free list)"
            ),
            kind: "tuned",
            cells: (0..ne)
                .map(|e| cell(at + e, tuned_lists[e].1.clone()))
                .collect(),
        });
    }
    let at_calls = at + tuned_lists.len();
    if !calls.is_empty() {
        rows.push(ListRow {
            label: format!(
                "{k} top-1 calls at eps/{k} each (the tuned top-1 row for eps/{k}; the user sees \
                 the distinct items; hit and Recall exact, nDCG one simulated sequence)"
            ),
            kind: "private",
            cells: (0..ne)
                .map(|e| cell(at_calls + e, calls[e].1.clone()))
                .collect(),
        });
    }
    // hit@k of the tuned list over the k calls', paired on the evaluated users.
    let shelf_ratio = (0..ne)
        .map(|e| {
            if tuned_lists.is_empty() || calls.is_empty() {
                return None;
            }
            let a: Vec<f64> = hits.iter().map(|h| h[at + e][0]).collect();
            let b: Vec<f64> = hits.iter().map(|h| h[at_calls + e][0]).collect();
            Some(ratio_of_means(&a, &b))
        })
        .collect();
    let best = [
        best_fixed(eval, n, k, false).1,
        best_fixed(eval, n, k, true).1,
        best_fixed_hit_bound(eval, n, k),
    ];
    let limit = cfg
        .epsilons
        .iter()
        .map(|&e| best.map(|b| (e.exp() * b).min(1.0)))
        .collect();
    Ok(ListTable {
        k,
        epsilons: cfg.epsilons.clone(),
        users: eval.rows(),
        calibration_users: cal.rows(),
        rows,
        best_fixed: best,
        limit,
        shelf_ratio,
    })
}

/// mean(a)/mean(b) over the same users with its delta-method standard error,
/// sd(a − r·b)/(√n · mean(b)).
pub fn ratio_of_means(a: &[f64], b: &[f64]) -> Estimate {
    let (ma, mb) = (mean_se(a).0, mean_se(b).0);
    let r = ma / mb;
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - r * y).collect();
    Estimate {
        mean: r,
        se: mean_se(&d).1 / mb,
    }
}

/// The table as markdown: Recall@k per row and ε (nDCG@k and hit@k beside it), the limit last.
pub fn list_markdown(t: &ListTable) -> String {
    let k = t.k;
    let mut s = format!(
        "Recall@{k} / nDCG@{k} / hit@{k} on {} evaluated users ({} calibration users tune)\n\n| |",
        t.users, t.calibration_users
    );
    for e in &t.epsilons {
        s.push_str(&format!(" eps = {e} |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(t.epsilons.len()));
    s.push('\n');
    for r in &t.rows {
        s.push_str(&format!("| {} |", r.label));
        for c in &r.cells {
            let cfg = if c.config.is_empty() || c.config == "all" {
                String::new()
            } else {
                format!(" ({})", c.config)
            };
            s.push_str(&format!(
                " {:.4} ± {:.4} / {:.4} / {:.3}{cfg} |",
                c.recall, c.recall_se, c.ndcg, c.hit
            ));
        }
        s.push('\n');
    }
    s.push_str(&format!(
        "| limit: e^eps x the best fixed list ({:.4} / {:.4} / <= {:.3}) |",
        t.best_fixed[0], t.best_fixed[1], t.best_fixed[2]
    ));
    for l in &t.limit {
        s.push_str(&format!(" {:.4} / {:.4} / {:.3} |", l[0], l[1], l[2]));
    }
    s.push('\n');
    if t.shelf_ratio.iter().any(Option::is_some) {
        s.push_str(&format!(
            "| hit@{k} of the tuned list / hit@{k} of {k} top-1 calls at eps/{k} (same users, \
             ± delta-method s.e.) |"
        ));
        for r in &t.shelf_ratio {
            match r {
                Some(r) => s.push_str(&format!(" {:.2} ± {:.2} |", r.mean, r.se)),
                None => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The k-calls row on a problem whose answer is known exactly: krr's law at ε = ln 3 over
    /// three items (the argmax held out, one other held out), against every sequence of K calls
    /// enumerated; the free item (ε = 0 over one item) is seen with certainty.
    #[test]
    fn k_calls_are_exact_on_a_tiny_problem() {
        let eps = 3f64.ln();
        // Values: item 0 is the argmax; items 0 and 2 held out.
        let p = krr_law(&[0.9, 0.1, 0.5], eps);
        // (1 + 2·1[argmax]) / (3 + 2): 3/5, 1/5, 1/5.
        for (a, b) in p.iter().zip([0.6, 0.2, 0.2]) {
            assert!((a - b).abs() < 1e-12, "{p:?}");
        }
        let targets = [0usize, 2];
        for calls in 1..=4usize {
            // Every sequence of `calls` picks, with its probability.
            let (mut hit, mut recall) = (0.0, 0.0);
            for code in 0..3usize.pow(calls as u32) {
                let (mut c, mut prob, mut seen) = (code, 1.0, [false; 3]);
                for _ in 0..calls {
                    prob *= p[c % 3];
                    seen[c % 3] = true;
                    c /= 3;
                }
                let h = targets.iter().filter(|&&t| seen[t]).count();
                hit += prob * f64::from(u8::from(h > 0));
                recall += prob * h as f64 / calls.min(2) as f64;
            }
            let got = calls_exact(&[p[0], p[2]], 2, calls);
            assert!((got[0] - hit).abs() < 1e-12, "{calls}: {got:?} vs {hit}");
            assert!(
                (got[1] - recall).abs() < 1e-12,
                "{calls}: {got:?} vs {recall}"
            );
        }
        // By hand, K = 2: hit = 1 − (1 − 0.8)² = 0.96; Recall = (0.84 + 0.36) / 2 = 0.6.
        let got = calls_exact(&[0.6, 0.2], 2, 2);
        assert!((got[0] - 0.96).abs() < 1e-12 && (got[1] - 0.6).abs() < 1e-12);
        // Power: the same calls counted as a list of K independent items would give more.
        assert!(got[1] < (0.6 + 0.2) * 2.0 / 2.0);
        // The free item: ε = 0 over one item is that item with certainty, whatever K.
        assert_eq!(krr_law(&[0.3], 0.0), vec![1.0]);
        assert_eq!(calls_exact(&[1.0], 3, 10), [1.0, 1.0 / 3.0]);
        assert_eq!(calls_exact(&[], 3, 10), [0.0, 0.0]);
    }

    #[test]
    fn the_ratio_of_means_has_the_delta_method_error() {
        let a = [1.0, 0.0, 1.0, 1.0];
        let b = [1.0, 0.0, 0.0, 1.0];
        let r = ratio_of_means(&a, &b);
        assert!((r.mean - 1.5).abs() < 1e-12);
        // a − 1.5 b = (−0.5, 0, 1, −0.5): s.d. √0.5, s.e. √0.5/2 over mean(b) 0.5.
        assert!((r.se - 0.5f64.sqrt() / 2.0 / 0.5).abs() < 1e-12, "{r:?}");
    }
}
