//! `recsel tune --k K` (docs/utility.md, "Tuning lists"): per ε, the list of K a request is
//! served — a registry mechanism's list (peeling at ε/m) of m items over a `popular:N` pool, shown
//! as it is (m = K) or filtered on the device to the first K the user does not own (m > K) —
//! or, when no private list beats it, the best free list: a public ranking (training popularity
//! or the release's held-out counts) shown as it is or filtered on the device.
//!
//! The rule is the top-1 tuner's ([`super::estimate`]): everything is chosen by mean Recall@K on
//! the selection part of the calibration users (the best free list among the free lists, the
//! best private list among the private ones), and the chosen lists are estimated on the other
//! part; the private list is served only when its paired gain over the best free list there
//! clears the margin ([`beats`]), else the free list (0 ε).

use crate::data::{row_items, HeldOutRows};
use crate::error::{Error, Result};
use crate::mechanisms::{self, ListForm, MechParams, Problem, TopK};
use crate::model::Model;
use crate::recommend::release::Release;
use crate::recommend::tuned::lists::{ListGrid, ListRow, ListSpec, PUBLIC};
use crate::recommend::tuned::{beats, Estimate, PoolSource};
use crate::recommend::MAX_LIST;
use crate::rng::{name_id, Streams};
use crate::scoring::{CandidatePolicy, Sensitivities};

use super::estimate::{best_on, on, parts};
use super::grid::pool_problem;
use super::{map_scored, ranking};

/// hit@k, Recall@k and nDCG@k of `list` against the sorted `targets` (Recall@k: hits over
/// min(k, held-out items)); zeros for a user without held-out items.
pub fn metrics(list: &[u32], targets: &[u32], k: usize) -> [f64; 3] {
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
pub fn filtered(ranked: &[u32], owned: &[u32], k: usize) -> Vec<u32> {
    ranked
        .iter()
        .copied()
        .filter(|j| owned.binary_search(j).is_err())
        .take(k)
        .collect()
}

/// A list configuration resolved against a release: what a user is shown.
pub struct ListDraw {
    /// The configuration.
    pub spec: ListSpec,
    /// The pool (a private list) or the released ranking prefix (a public one), ranking order.
    items: Vec<u32>,
    topk: Option<TopK>,
    id: u32,
}

impl ListDraw {
    /// `spec` at `epsilon` over `release`'s public rankings (the pool or ranking of a `popular:N`
    /// or `heldout:N` policy); an error for another policy or a ranking the release lacks.
    pub fn new(spec: ListSpec, release: &Release, epsilon: f64) -> Result<Self> {
        let (source, n) = match spec.candidates {
            CandidatePolicy::Popular(n) => (PoolSource::Popularity, n),
            CandidatePolicy::Heldout(n) => (PoolSource::Heldout, n),
            ref c => {
                return Err(Error::Invalid(format!(
                    "a tuned list is over popular:N or heldout:N, got '{c}'"
                )))
            }
        };
        let counts = source.counts(release).ok_or_else(|| {
            Error::Invalid(format!(
                "the release carries no {} counts for '{}'",
                source.name(),
                spec.candidates
            ))
        })?;
        let items = ranking(counts, n.min(counts.len()));
        let topk = if spec.is_public() {
            None
        } else {
            let p = MechParams::default().with_epsilon(epsilon);
            Some(TopK::new(
                mechanisms::spec(&spec.mechanism)?,
                &p,
                spec.released,
                ListForm::Peeling,
            )?)
        };
        let id = name_id(&format!(
            "{}/{}/{}",
            spec.mechanism, spec.candidates, spec.released
        ));
        Ok(ListDraw {
            spec,
            items,
            topk,
            id,
        })
    }

    /// The list shown to a user with model scores `s` and history `owned` (sorted): the released
    /// list (drawn from stream (`e`, `user`) of `streams`), filtered on the device to `k` when
    /// more than `k` are released.
    #[allow(clippy::too_many_arguments)]
    pub fn shown(
        &self,
        s: &[f64],
        sens: &Sensitivities,
        owned: &[u32],
        k: usize,
        streams: &Streams,
        e: u32,
        user: u64,
    ) -> Vec<u32> {
        let released: Vec<u32> = match &self.topk {
            None => self.items[..self.spec.released.min(self.items.len())].to_vec(),
            Some(t) => {
                let (mut q, mut d) = (Vec::new(), Vec::new());
                pool_problem(&self.items, s, sens, &mut q, &mut d);
                match Problem::new(&q, &d) {
                    Ok(p) => t
                        .select(&p, &mut streams.stream(self.id, e, user, 0))
                        .into_iter()
                        .map(|a| self.items[a])
                        .collect(),
                    Err(_) => Vec::new(),
                }
            }
        };
        if self.spec.released > k {
            filtered(&released, owned, k)
        } else {
            released
        }
    }
}

/// The free lists of length `k` a release offers: each public ranking it carries, released at
/// `multiples` × k (device-filtered beyond k) and at its longest (up to [`MAX_LIST`] items).
pub fn free_specs(
    release: &Release,
    k: usize,
    multiples: &[usize],
    n_items: usize,
) -> Vec<ListSpec> {
    let mut lengths: Vec<usize> = multiples.iter().map(|&m| m * k).collect();
    lengths.push(MAX_LIST);
    let mut out = Vec::new();
    for source in [PoolSource::Popularity, PoolSource::Heldout] {
        if source.counts(release).is_none() {
            continue;
        }
        let mut seen = Vec::new();
        for &m in &lengths {
            let m = m.min(n_items);
            if m < k || seen.contains(&m) {
                continue;
            }
            seen.push(m);
            out.push(ListSpec {
                mechanism: PUBLIC.into(),
                candidates: source.policy(m),
                released: m,
            });
        }
    }
    out
}

/// The private lists of length `k` of `grid`: each mechanism, released length and `popular:N`
/// pool of at least that many items (and at most `n_items`).
pub fn private_specs(grid: &ListGrid, k: usize, n_items: usize) -> Vec<ListSpec> {
    let mut out = Vec::new();
    for name in &grid.mechanisms {
        for &mult in &grid.multiples {
            let m = mult * k;
            for &n in grid.pools.iter().filter(|&&n| n >= m && n <= n_items) {
                out.push(ListSpec {
                    mechanism: name.clone(),
                    candidates: CandidatePolicy::Popular(n),
                    released: m,
                });
            }
        }
    }
    out
}

/// The row at (k, ε) from per-user Recall@k of the free lists `free` and the private lists
/// `private` (one value per calibration user each): the best of each chosen on the `sel` rows,
/// both estimated on the `est` rows, the private one served only when its paired gain over the
/// free one there beats `margin` standard errors. Nothing reported is measured on `sel`.
#[allow(clippy::too_many_arguments)]
pub fn choose(
    k: usize,
    epsilon: f64,
    free: &[ListSpec],
    free_recall: &[Vec<f64>],
    private: &[ListSpec],
    private_recall: &[Vec<f64>],
    sel: &[usize],
    est: &[usize],
    margin: f64,
) -> ListRow {
    let bf = best_on(sel, free_recall);
    let fr = Estimate::of(&on(est, &free_recall[bf]));
    let (best, br, gain) = if private.is_empty() {
        (free[bf].clone(), fr, Estimate { mean: 0.0, se: 0.0 })
    } else {
        let bp = best_on(sel, private_recall);
        let diff: Vec<f64> = private_recall[bp]
            .iter()
            .zip(&free_recall[bf])
            .map(|(p, f)| p - f)
            .collect();
        (
            private[bp].clone(),
            Estimate::of(&on(est, &private_recall[bp])),
            Estimate::of(&on(est, &diff)),
        )
    };
    let wins = !private.is_empty() && beats(&gain, margin);
    ListRow {
        k,
        epsilon,
        serves: if wins { best.clone() } else { free[bf].clone() },
        spends: if wins { epsilon } else { 0.0 },
        recall: if wins { br } else { fr },
        free: free[bf].clone(),
        free_recall: fr,
        reason: format!(
            "chosen on {} calibration users; on {} others the best private list's ({}) \
             Recall@{k} gain over the best free list ({}) is {:+.4} ± {:.4}, {} {margin} s.e. \
             and positive",
            sel.len(),
            est.len(),
            best.describe(k),
            free[bf].describe(k),
            gain.mean,
            gain.se,
            if wins { "above" } else { "not above" },
        ),
        best,
        best_recall: br,
        gain,
        margin,
    }
}

/// The list rows of `grid` at `epsilons` for `model` with its `release`, chosen and estimated
/// on the calibration users `cal` ([`choose`]; one simulated list per user and configuration,
/// seeded by `seed`).
#[allow(clippy::too_many_arguments)]
pub fn tune_lists(
    model: &Model,
    release: &Release,
    cal: &HeldOutRows,
    grid: &ListGrid,
    epsilons: &[f64],
    margin: f64,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<ListRow>> {
    grid.validate()?;
    let (sel, est) = parts(cal)?;
    let n = model.n_items();
    let streams = Streams::new(seed);
    let mut rows = Vec::new();
    for &k in &grid.k {
        let free: Vec<ListDraw> = free_specs(release, k, &grid.multiples, n)
            .into_iter()
            .map(|s| ListDraw::new(s, release, 1.0))
            .collect::<Result<_>>()?;
        if free.is_empty() {
            return Err(Error::Invalid(
                "tuning lists needs the release's training popularity".into(),
            ));
        }
        let specs = private_specs(grid, k, n);
        let private: Vec<Vec<ListDraw>> = epsilons
            .iter()
            .map(|&e| {
                specs
                    .iter()
                    .map(|s| ListDraw::new(s.clone(), release, e))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<_>>()?;
        let vals: Vec<Vec<f64>> = map_scored(
            model,
            &cal.history,
            &|u, s| {
                let t = row_items(&cal.heldout, u);
                let owned = row_items(&cal.history, u);
                let user = u as u64 | 2 << 40;
                let recall = |d: &ListDraw, e: usize| {
                    metrics(
                        &d.shown(s, &release.sens, owned, k, &streams, e as u32, user),
                        t,
                        k,
                    )[1]
                };
                let mut out: Vec<f64> = free.iter().map(|d| recall(d, 0)).collect();
                for (e, per) in private.iter().enumerate() {
                    out.extend(per.iter().map(|d| recall(d, e)));
                }
                out
            },
            progress,
        );
        let col = |c: usize| vals.iter().map(|v| v[c]).collect::<Vec<f64>>();
        let free_lists: Vec<ListSpec> = free.iter().map(|d| d.spec.clone()).collect();
        let free_recall: Vec<Vec<f64>> = (0..free.len()).map(col).collect();
        for (e, &eps) in epsilons.iter().enumerate() {
            let base = free.len() + e * specs.len();
            let private_recall: Vec<Vec<f64>> = (0..specs.len()).map(|i| col(base + i)).collect();
            rows.push(choose(
                k,
                eps,
                &free_lists,
                &free_recall,
                &specs,
                &private_recall,
                &sel,
                &est,
                margin,
            ));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, n: usize) -> ListSpec {
        ListSpec {
            mechanism: name.into(),
            candidates: CandidatePolicy::Popular(n),
            released: 10,
        }
    }

    /// A planted private list that wins on the selection users by noise only (Recall 1 there,
    /// 0 on the estimation users) is chosen — the choice reads the selection users — but is
    /// reported with its estimation-part Recall (0), not its selection score, and loses to the
    /// free list there; an honest list that beats the free list everywhere is served with its
    /// estimation-part numbers.
    #[test]
    fn a_list_chosen_by_selection_noise_is_reported_with_its_estimate_not_its_score() {
        let users = 400;
        let (sel, est): (Vec<usize>, Vec<usize>) = (0..users).partition(|u| u % 3 != 0);
        let free = [spec(PUBLIC, 1000)];
        let free_recall = vec![vec![0.2; users]];
        let planted: Vec<f64> = (0..users)
            .map(|u| if sel.contains(&u) { 1.0 } else { 0.0 })
            .collect();
        let honest: Vec<f64> = (0..users).map(|u| 0.3 + 0.1 * (u % 2) as f64).collect();
        let private = [spec("em", 30), spec("mgem", 100)];
        let r = choose(
            10,
            1.0,
            &free,
            &free_recall,
            &private,
            &[planted.clone(), honest.clone()],
            &sel,
            &est,
            2.0,
        );
        assert_eq!(
            r.best, private[0],
            "the selection users choose the planted list"
        );
        assert_eq!(r.best_recall.mean, 0.0, "reported with its estimate");
        let selection_score = Estimate::of(&on(&sel, &planted)).mean;
        assert_eq!(selection_score, 1.0);
        assert!(r.gain.mean < 0.0);
        assert_eq!(
            r.serves, free[0],
            "it does not beat the free list: the free list is served"
        );
        assert_eq!((r.spends, r.recall), (0.0, r.free_recall));
        assert!(r.reason.contains("not above"), "{}", r.reason);
        // Without the planted list the honest one is chosen, served and estimated on `est`.
        let r = choose(
            10,
            1.0,
            &free,
            &free_recall,
            &private[1..],
            std::slice::from_ref(&honest),
            &sel,
            &est,
            2.0,
        );
        assert_eq!(r.serves, private[1]);
        assert_eq!(r.spends, 1.0);
        assert_eq!(r.recall, Estimate::of(&on(&est, &honest)));
        assert!((r.gain.mean - (r.recall.mean - 0.2)).abs() < 1e-12);
    }

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
