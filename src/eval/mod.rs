//! Evaluation (docs/protocol.md, steps 4–5): every test user with at least one target is scored from their input
//! items, the input items are excluded, and the top of the ranking is compared with the targets.
//!
//! * SANSA convention: Recall@k = hits / min(k, |T|), nDCG@100 with IDCG over min(|T|, 100);
//! * LightGCN convention: Recall@20 = hits / |T|, nDCG@20 with IDCG over min(|T|, 20).
//!
//! Each metric is the mean over users with its standard error (sample sd / √users). Users are
//! scored in parallel; the result does not depend on the number of threads.

use rayon::prelude::*;

use crate::data::{row_items, Dataset};
use crate::model::{Model, Scratch, SCORE_LANES};

/// Mean and standard error of a per-user metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// Mean over users.
    pub mean: f64,
    /// Standard error of the mean.
    pub se: f64,
}

impl Estimate {
    fn of(values: &[f64]) -> Self {
        if values.is_empty() {
            return Estimate::default();
        }
        let (mean, se) = crate::numerics::mean_se(values);
        Estimate { mean, se }
    }
}

/// All metrics of one evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Metrics {
    /// Users evaluated (those with at least one target).
    pub users: usize,
    /// Recall@20, LightGCN convention (hits / |T|).
    pub recall20_lightgcn: Estimate,
    /// nDCG@20, LightGCN convention.
    pub ndcg20: Estimate,
    /// Recall@20, SANSA convention (hits / min(20, |T|)).
    pub recall20: Estimate,
    /// Recall@50, SANSA convention.
    pub recall50: Estimate,
    /// nDCG@100, SANSA convention.
    pub ndcg100: Estimate,
    /// hit@1: whether the top item (the non-private top-1 recommendation) is a target.
    pub hit1: Estimate,
}

/// Per-user metric values: [recall20_lightgcn, ndcg20, recall20, recall50, ndcg100, hit1].
fn user_metrics(ranked: &[u32], targets: &[u32]) -> [f64; 6] {
    let t = targets.len();
    let hit: Vec<bool> = ranked
        .iter()
        .map(|i| targets.binary_search(i).is_ok())
        .collect();
    let hits_at = |k: usize| hit.iter().take(k).filter(|&&h| h).count() as f64;
    let dcg_at = |k: usize| -> f64 {
        hit.iter()
            .take(k)
            .enumerate()
            .filter(|(_, &h)| h)
            .map(|(r, _)| 1.0 / ((r + 2) as f64).log2())
            .sum()
    };
    let idcg_at = |k: usize| -> f64 { (0..t.min(k)).map(|r| 1.0 / ((r + 2) as f64).log2()).sum() };
    [
        hits_at(20) / t as f64,
        dcg_at(20) / idcg_at(20),
        hits_at(20) / t.min(20) as f64,
        hits_at(50) / t.min(50) as f64,
        dcg_at(100) / idcg_at(100),
        hits_at(1),
    ]
}

/// The `k` best-scored items of `scores`, best first, excluding `seen` (sorted ascending); ties by
/// item index ([`crate::numerics::best_k`]).
pub fn top_k(scores: &[f64], seen: &[u32], k: usize) -> Vec<u32> {
    crate::numerics::best_k(scores, seen, k)
}

/// Each row's Recall@20 in the SANSA convention (hits in the top 20 / min(20, |T|)), in [0, 1]:
/// `model` scores the row of `input` (its items excluded from the ranking) and `target` holds
/// the items counted as hits. A row without targets scores 0.
pub fn recall20_per_row(
    model: &Model,
    input: &crate::data::Csr,
    target: &crate::data::Csr,
) -> Vec<f64> {
    let rows: Vec<usize> = (0..input.rows()).collect();
    ranked_rows(model, input, &rows, 20, |u, ranked| {
        let t = row_items(target, u);
        if t.is_empty() {
            return 0.0;
        }
        let hits = ranked.iter().filter(|i| t.binary_search(i).is_ok()).count();
        hits as f64 / t.len().min(20) as f64
    })
}

/// `per(row, ranked)` for each of `rows` (rows of `input`), `ranked` the model's `k` best items
/// for that row with its own items excluded ([`top_k`]), in the order of `rows`. Rows are scored
/// [`SCORE_LANES`] at a time: the model's weights are read once per group.
fn ranked_rows<R: Send>(
    model: &Model,
    input: &crate::data::Csr,
    rows: &[usize],
    k: usize,
    per: impl Fn(usize, &[u32]) -> R + Sync,
) -> Vec<R> {
    let n = model.n_items();
    rows.par_chunks(SCORE_LANES)
        .map_init(
            || (Vec::new(), Scratch::new(n)),
            |(scores, scratch), group| {
                let inputs: Vec<&[u32]> = group.iter().map(|&u| row_items(input, u)).collect();
                scores.resize(group.len() * n, 0.0);
                model.score_block(&inputs, scores, scratch);
                group
                    .iter()
                    .zip(scores.chunks_mut(n.max(1)))
                    .zip(&inputs)
                    .map(|((&u, s), input)| per(u, &top_k(s, input, k)))
                    .collect::<Vec<_>>()
            },
        )
        .flatten_iter()
        .collect()
}

/// Evaluates a model on the test users of a dataset.
pub fn evaluate(model: &Model, data: &Dataset) -> Metrics {
    let users: Vec<usize> = (0..data.test_target.rows())
        .filter(|&u| data.test_target.outer_view(u).is_some_and(|r| r.nnz() > 0))
        .collect();
    let per_user: Vec<[f64; 6]> = ranked_rows(model, &data.test_input, &users, 100, |u, ranked| {
        user_metrics(ranked, row_items(&data.test_target, u))
    });
    let column =
        |c: usize| -> Estimate { Estimate::of(&per_user.iter().map(|m| m[c]).collect::<Vec<_>>()) };
    Metrics {
        users: users.len(),
        recall20_lightgcn: column(0),
        ndcg20: column(1),
        recall20: column(2),
        recall50: column(3),
        ndcg100: column(4),
        hit1: column(5),
    }
}
