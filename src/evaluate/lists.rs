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
use super::tuning::{map_scored, ranking};
use crate::data::{row_items, HeldOutRows};
use crate::error::{Error, Result};
use crate::mechanisms::{self, ListForm, MechParams, Problem, TopK};
use crate::model::Model;
use crate::recommend::release::Release;
use crate::recommend::tuned::mean_se;
use crate::rng::{name_id, Streams};

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
    /// The configuration (a tuned pool), empty for the others.
    pub config: String,
}

/// One row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListRow {
    /// What it is.
    pub label: String,
    /// `free` (0-DP), `not private` or `private`.
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
}

/// hit@k, Recall@k and nDCG@k of `list` against the sorted `targets`.
fn metrics(list: &[u32], targets: &[u32], k: usize) -> [f64; 3] {
    let m = k.min(targets.len());
    if m == 0 {
        return [0.0; 3];
    }
    let (mut hits, mut dcg) = (0usize, 0.0);
    for (p, j) in list.iter().take(k).enumerate() {
        if targets.binary_search(j).is_ok() {
            hits += 1;
            dcg += 1.0 / ((p + 2) as f64).log2();
        }
    }
    let idcg: f64 = (0..m).map(|p| 1.0 / ((p + 2) as f64).log2()).sum();
    [
        f64::from(u8::from(hits > 0)),
        hits as f64 / m as f64,
        dcg / idcg,
    ]
}

/// The first `k` of `ranked` that are not in the sorted `owned`: device-side filtering.
fn filtered(ranked: &[u32], owned: &[u32], k: usize) -> Vec<u32> {
    ranked
        .iter()
        .copied()
        .filter(|j| owned.binary_search(j).is_err())
        .take(k)
        .collect()
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

/// Measures lists of `cfg.k` for `model` with its `release` on the evaluated users `eval`,
/// everything tuned on the calibration users `cal` (disjoint from `eval`).
pub fn measure_lists(
    model: &Model,
    release: &Release,
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
    })
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
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_count_recall_ndcg_and_hit() {
        // Targets {2, 5}; the list hits 5 at position 1 (0-based).
        let m = metrics(&[1, 5, 7], &[2, 5], 3);
        assert_eq!(m[0], 1.0);
        assert_eq!(m[1], 0.5);
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((m[2] - (1.0 / 3f64.log2()) / idcg).abs() < 1e-12);
        assert_eq!(metrics(&[1, 7], &[2, 5], 2), [0.0; 3]);
        assert_eq!(filtered(&[4, 1, 3, 2], &[1, 2], 2), vec![4, 3]);
    }
}
