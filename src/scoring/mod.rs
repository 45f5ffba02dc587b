//! From model scores to selection problems (docs/protocol.md, steps 5–7): per-item sensitivities from exact
//! percentiles computed without the users × items score matrix, clipping, and each user's top
//! candidates.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::Csr;
use crate::error::{Error, Result};
use crate::model::{Model, Scratch};

/// Anything that scores every item for one user: a fitted model with its users' input rows.
pub trait UserScorer: Sync {
    /// Per-thread scratch space.
    type Scratch: Send;
    /// Number of users.
    fn n_users(&self) -> usize;
    /// Number of items.
    fn n_items(&self) -> usize;
    /// Fresh scratch space for one thread.
    fn scratch(&self) -> Self::Scratch;
    /// Items the user already has (excluded from scoring statistics and from candidates).
    fn excluded(&self, user: usize) -> &[u32];
    /// Scores of every item for `user` into `out` (length `n_items`).
    fn score(&self, user: usize, out: &mut [f64], scratch: &mut Self::Scratch);
    /// The user's held-out items (sorted), against which a private pick counts as a hit
    /// (hit@1, docs/protocol.md, step 9); none by default.
    fn targets(&self, user: usize) -> &[u32] {
        let _ = user;
        &[]
    }
}

/// Whose scores an item's percentiles are taken over (docs/protocol.md, step 6; `docs/real-data.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PercentileUsers {
    /// Every test user, including those who already have the item — the paper's text ("across
    /// all test users"; seed 001 §VIII). The default.
    #[default]
    All,
    /// Only the test users who do not have the item (those it can be recommended to).
    WithoutItem,
}

impl PercentileUsers {
    /// The CLI name: `all` or `without-item`.
    pub fn name(self) -> &'static str {
        match self {
            PercentileUsers::All => "all",
            PercentileUsers::WithoutItem => "without-item",
        }
    }

    /// The population called `name`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "all" => Ok(PercentileUsers::All),
            "without-item" => Ok(PercentileUsers::WithoutItem),
            _ => Err(Error::UnknownName {
                kind: "percentile population",
                name: name.to_string(),
                valid: "all, without-item".into(),
            }),
        }
    }
}

/// A fitted model scoring users from their input rows (one row per user, the items they have).
#[derive(Debug, Clone, Copy)]
pub struct ModelScorer<'a> {
    model: &'a Model,
    input: &'a Csr,
    targets: Option<&'a Csr>,
}

impl<'a> ModelScorer<'a> {
    /// Scores the users of `input` (users × items, the items each user has) with `model`.
    pub fn new(model: &'a Model, input: &'a Csr) -> Self {
        ModelScorer {
            model,
            input,
            targets: None,
        }
    }

    /// The same scorer, with each user's held-out items (`targets`, rows as in `input`) for hit@1.
    pub fn with_targets(mut self, targets: &'a Csr) -> Self {
        self.targets = Some(targets);
        self
    }
}

impl UserScorer for ModelScorer<'_> {
    type Scratch = Scratch;
    fn n_users(&self) -> usize {
        self.input.rows()
    }
    fn n_items(&self) -> usize {
        self.model.n_items()
    }
    fn scratch(&self) -> Scratch {
        Scratch::new(self.model.n_items())
    }
    fn excluded(&self, user: usize) -> &[u32] {
        let r = self.input.indptr().outer_inds_sz(user);
        &self.input.indices()[r]
    }
    fn score(&self, user: usize, out: &mut [f64], scratch: &mut Scratch) {
        self.model.score_into(self.excluded(user), out, scratch);
    }
    fn targets(&self, user: usize) -> &[u32] {
        match self.targets {
            Some(t) => &t.indices()[t.indptr().outer_inds_sz(user)],
            None => &[],
        }
    }
}

/// Settings of the sensitivity computation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SensitivityConfig {
    /// Lower percentile (docs/protocol.md, step 6: 1).
    pub lower: f64,
    /// Upper percentile (docs/protocol.md, step 6: 99).
    pub upper: f64,
    /// Floor for a zero spread (docs/protocol.md, step 6: 1e-6).
    pub floor: f64,
    /// Whose scores count.
    pub population: PercentileUsers,
}

impl Default for SensitivityConfig {
    fn default() -> Self {
        SensitivityConfig {
            lower: 1.0,
            upper: 99.0,
            floor: 1e-6,
            population: PercentileUsers::All,
        }
    }
}

impl SensitivityConfig {
    /// Validates 0 ≤ lower < upper ≤ 100 and floor > 0.
    pub fn new(lower: f64, upper: f64, floor: f64) -> Result<Self> {
        if !((0.0..100.0).contains(&lower) && lower < upper && upper <= 100.0) {
            return Err(Error::Invalid(format!(
                "percentiles must satisfy 0 <= lower < upper <= 100, got {lower} and {upper}"
            )));
        }
        if !(floor.is_finite() && floor > 0.0) {
            return Err(Error::InvalidParameter {
                name: "sensitivity floor",
                requirement: "finite and > 0",
                value: floor,
            });
        }
        Ok(SensitivityConfig {
            lower,
            upper,
            floor,
            population: PercentileUsers::default(),
        })
    }

    /// These settings with another percentile population.
    pub fn with_population(mut self, population: PercentileUsers) -> Self {
        self.population = population;
        self
    }
}

/// Per-item clipping bounds and sensitivities.
#[derive(Debug, Clone, Serialize)]
pub struct Sensitivities {
    /// Lower percentile of each item's scores over the population of [`PercentileUsers`].
    pub lower: Vec<f64>,
    /// Upper percentile.
    pub upper: Vec<f64>,
    /// `max(upper − lower, floor)`; `floor` for an item no user can be recommended.
    pub delta: Vec<f64>,
    /// Number of scores each percentile was taken over.
    pub counts: Vec<u64>,
}

impl Sensitivities {
    /// `score` clipped to item j's [lower, upper].
    #[inline]
    pub fn clip(&self, j: usize, score: f64) -> f64 {
        score.clamp(self.lower[j], self.upper[j])
    }
}

/// Position `h = (n − 1)·p/100` of numpy's linear percentile.
fn position(n: u64, p: f64) -> f64 {
    (n - 1) as f64 * p / 100.0
}

/// How many of the smallest values the lower percentile needs: indices ⌊h⌋ and ⌊h⌋ + 1.
fn keep_low(n: u64, p: f64) -> usize {
    ((position(n, p).floor() as u64 + 2).min(n)) as usize
}

/// How many of the largest values the upper percentile needs.
fn keep_high(n: u64, p: f64) -> usize {
    ((n - position(n, p).floor() as u64).min(n)) as usize
}

/// Linear interpolation at global ascending position h, given the values at global positions
/// `offset..offset + sorted.len()`.
fn interpolate(sorted: &[f64], offset: u64, h: f64) -> f64 {
    let lo = h.floor() as u64;
    let frac = h - lo as f64;
    let at = |i: u64| sorted[(i - offset) as usize];
    let a = at(lo);
    if frac == 0.0 {
        a
    } else {
        a + (at(lo + 1) - a) * frac
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Ord64(f64);
impl Eq for Ord64 {}
impl PartialOrd for Ord64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ord64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The running tails of one item: its `cap_low` smallest and `cap_high` largest scores so far.
struct Tails {
    low: BinaryHeap<Ord64>,
    high: BinaryHeap<Reverse<Ord64>>,
    cap_low: usize,
    cap_high: usize,
}

impl Tails {
    /// Adds `v`; returns the new thresholds (largest kept low value, smallest kept high value),
    /// ±∞ while a tail is not full, so that the caller can skip values that change nothing.
    #[inline]
    fn push(&mut self, v: f64) -> (f64, f64) {
        if self.low.len() < self.cap_low {
            self.low.push(Ord64(v));
        } else if let Some(mut top) = self.low.peek_mut() {
            if v < top.0 {
                *top = Ord64(v);
            }
        }
        if self.high.len() < self.cap_high {
            self.high.push(Reverse(Ord64(v)));
        } else if let Some(mut top) = self.high.peek_mut() {
            if v > top.0 .0 {
                *top = Reverse(Ord64(v));
            }
        }
        let low = if self.low.len() < self.cap_low {
            f64::INFINITY
        } else {
            self.low.peek().map_or(f64::NEG_INFINITY, |t| t.0)
        };
        let high = if self.high.len() < self.cap_high {
            f64::NEG_INFINITY
        } else {
            self.high.peek().map_or(f64::INFINITY, |t| t.0 .0)
        };
        (low, high)
    }
}

/// Items whose tails are updated together (their heaps should fit in a core's cache).
const ITEM_TILE: usize = 32;

/// Users scored together before their scores are folded into the per-item tails.
const USER_BLOCK: usize = 256;

/// Exact per-item percentiles of the scores over the test users of `cfg.population` — all of
/// them, or those who do not already have the item (docs/protocol.md, step 6) —, in memory proportional to items × (1% of users) rather than users × items: only
/// the bottom and top tails of each item's scores are kept. Users are scored in parallel blocks;
/// the tails are updated in parallel over item ranges, so the result does not depend on the
/// number of threads. `progress` receives the number of users folded in after each block.
pub fn item_sensitivities<S: UserScorer>(
    scorer: &S,
    cfg: &SensitivityConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Sensitivities {
    let (n_users, n_items) = (scorer.n_users(), scorer.n_items());
    // Pass 0: how many scores each item's percentiles run over.
    let without_item = cfg.population == PercentileUsers::WithoutItem;
    let mut counts = vec![n_users as u64; n_items];
    if without_item {
        for u in 0..n_users {
            for &j in scorer.excluded(u) {
                counts[j as usize] -= 1;
            }
        }
    }
    let mut tails: Vec<Tails> = counts
        .iter()
        .map(|&n| {
            let (cl, ch) = if n == 0 {
                (0, 0)
            } else {
                (keep_low(n, cfg.lower), keep_high(n, cfg.upper))
            };
            Tails {
                low: BinaryHeap::with_capacity(cl),
                high: BinaryHeap::with_capacity(ch),
                cap_low: cl,
                cap_high: ch,
            }
        })
        .collect();
    // Per item, the values a new score must beat to enter a tail: a compact array the fold streams
    // through, so the heaps (far larger than the caches) are touched only by the ~2% of scores that
    // enter them.
    let mut thresholds: Vec<(f64, f64)> = tails
        .iter()
        .map(|t| {
            if t.cap_low == 0 {
                (f64::NEG_INFINITY, f64::INFINITY)
            } else {
                (f64::INFINITY, f64::NEG_INFINITY)
            }
        })
        .collect();
    let mut block = vec![0.0f64; USER_BLOCK * n_items];
    let item_chunk = n_items.div_ceil(4 * rayon::current_num_threads()).max(64);
    for start in (0..n_users).step_by(USER_BLOCK) {
        let end = (start + USER_BLOCK).min(n_users);
        block[..(end - start) * n_items]
            .par_chunks_mut(n_items)
            .enumerate()
            .for_each_init(
                || scorer.scratch(),
                |scratch, (i, row)| {
                    let u = start + i;
                    scorer.score(u, row, scratch);
                    // NaN marks "not a score of this user" for the fold below.
                    if without_item {
                        for &j in scorer.excluded(u) {
                            row[j as usize] = f64::NAN;
                        }
                    }
                },
            );
        let rows = &block[..(end - start) * n_items];
        tails
            .par_chunks_mut(item_chunk)
            .zip(thresholds.par_chunks_mut(item_chunk))
            .enumerate()
            .for_each(|(c, (chunk, thr))| {
                // Tiles of items small enough that their heaps stay in cache while every user of
                // the block is folded in (a push into a cold heap costs a cache miss per level).
                for t0 in (0..chunk.len()).step_by(ITEM_TILE) {
                    let t1 = (t0 + ITEM_TILE).min(chunk.len());
                    let j0 = c * item_chunk + t0;
                    for row in rows.chunks_exact(n_items) {
                        let vals = &row[j0..j0 + (t1 - t0)];
                        for ((t, th), &v) in
                            chunk[t0..t1].iter_mut().zip(&mut thr[t0..t1]).zip(vals)
                        {
                            // NaN (an excluded item) fails both comparisons.
                            if v < th.0 || v > th.1 {
                                *th = t.push(v);
                            }
                        }
                    }
                }
            });
        progress((end - start) as u64);
    }
    let mut out = Sensitivities {
        lower: vec![0.0; n_items],
        upper: vec![0.0; n_items],
        delta: vec![cfg.floor; n_items],
        counts: counts.clone(),
    };
    for (j, t) in tails.into_iter().enumerate() {
        let n = counts[j];
        if n == 0 {
            continue;
        }
        let low = t.low.into_sorted_vec();
        let low: Vec<f64> = low.into_iter().map(|o| o.0).collect();
        let mut high: Vec<f64> = t.high.into_iter().map(|r| r.0 .0).collect();
        high.sort_by(f64::total_cmp);
        let lo = interpolate(&low, 0, position(n, cfg.lower));
        let hi = interpolate(&high, n - high.len() as u64, position(n, cfg.upper));
        out.lower[j] = lo;
        out.upper[j] = hi;
        let spread = hi - lo;
        out.delta[j] = if spread > 0.0 { spread } else { cfg.floor };
    }
    out
}

/// One user's selection problem (docs/protocol.md, steps 5–7): the top candidates, best first,
/// their scores — clipped to each item's `[lower, upper]` when `clip` (only then is Δ_j a bound;
/// docs/deployment.md) — and their sensitivities. The real-data runner and the
/// `crate::recommend::Recommender` both build their problems here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    /// Item indices, best (unclipped) score first.
    pub items: Vec<u32>,
    /// The scores the mechanism sees.
    pub scores: Vec<f64>,
    /// The sensitivities Δ_j.
    pub deltas: Vec<f64>,
}

impl Candidates {
    /// The `top` candidates of one user scored `scores` who has the items `excluded` (sorted).
    pub fn new(
        scores: &[f64],
        excluded: &[u32],
        sens: &Sensitivities,
        top: usize,
        clip: bool,
    ) -> Self {
        let items = top_candidates(scores, excluded, top);
        let q = items
            .iter()
            .map(|&j| {
                let s = scores[j as usize];
                if clip {
                    sens.clip(j as usize, s)
                } else {
                    s
                }
            })
            .collect();
        let d = items.iter().map(|&j| sens.delta[j as usize]).collect();
        Candidates {
            items,
            scores: q,
            deltas: d,
        }
    }
}

/// The `top` highest-scoring items not in `excluded` (sorted ascending), best first; ties by
/// item index. Fewer when fewer items are left.
pub fn top_candidates(scores: &[f64], excluded: &[u32], top: usize) -> Vec<u32> {
    let mut items: Vec<u32> = Vec::with_capacity(scores.len());
    let mut ex = excluded.iter().peekable();
    for j in 0..scores.len() as u32 {
        while ex.peek().is_some_and(|&&e| e < j) {
            ex.next();
        }
        if ex.peek() == Some(&&j) {
            continue;
        }
        items.push(j);
    }
    let cmp = |a: &u32, b: &u32| {
        scores[*b as usize]
            .total_cmp(&scores[*a as usize])
            .then(a.cmp(b))
    };
    if items.len() > top && top > 0 {
        items.select_nth_unstable_by(top - 1, cmp);
        items.truncate(top);
    }
    items.sort_unstable_by(cmp);
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::percentile_linear;

    struct Table {
        scores: Vec<Vec<f64>>,
        excluded: Vec<Vec<u32>>,
    }

    impl UserScorer for Table {
        type Scratch = ();
        fn n_users(&self) -> usize {
            self.scores.len()
        }
        fn n_items(&self) -> usize {
            self.scores[0].len()
        }
        fn scratch(&self) {}
        fn excluded(&self, user: usize) -> &[u32] {
            &self.excluded[user]
        }
        fn score(&self, user: usize, out: &mut [f64], _: &mut ()) {
            out.copy_from_slice(&self.scores[user]);
        }
    }

    #[test]
    fn percentiles_equal_brute_force() {
        let (n_users, n_items) = (1103, 7);
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 10_000) as f64 / 97.0
        };
        let scores: Vec<Vec<f64>> = (0..n_users)
            .map(|_| (0..n_items).map(|_| next()).collect())
            .collect();
        let excluded: Vec<Vec<u32>> = (0..n_users)
            .map(|u| {
                if u % 3 == 0 {
                    vec![1, 4]
                } else if u % 5 == 0 {
                    vec![4]
                } else {
                    vec![]
                }
            })
            .collect();
        let mut table = Table { scores, excluded };
        // Item 6 is the same for everyone: spread 0 → floor.
        for row in table.scores.iter_mut() {
            row[6] = 2.5;
        }
        let cfg = SensitivityConfig::default().with_population(PercentileUsers::WithoutItem);
        let s = item_sensitivities(&table, &cfg, &|_| {});
        let all = item_sensitivities(&table, &SensitivityConfig::default(), &|_| {});
        for j in 0..n_items {
            let mut every: Vec<f64> = (0..n_users).map(|u| table.scores[u][j]).collect();
            every.sort_by(f64::total_cmp);
            assert_eq!(all.counts[j], n_users as u64);
            assert_eq!(
                all.lower[j],
                percentile_linear(&every, 1.0),
                "item {j}, all"
            );
            assert_eq!(
                all.upper[j],
                percentile_linear(&every, 99.0),
                "item {j}, all"
            );
            let mut col: Vec<f64> = (0..n_users)
                .filter(|&u| !table.excluded[u].contains(&(j as u32)))
                .map(|u| table.scores[u][j])
                .collect();
            col.sort_by(f64::total_cmp);
            assert_eq!(s.counts[j], col.len() as u64);
            assert_eq!(s.lower[j], percentile_linear(&col, 1.0), "item {j}");
            assert_eq!(s.upper[j], percentile_linear(&col, 99.0), "item {j}");
        }
        assert_eq!(s.delta[6], 1e-6);
        assert_eq!(s.clip(0, -1e9), s.lower[0]);
        assert_eq!(s.clip(0, 1e9), s.upper[0]);
    }

    #[test]
    fn top_candidates_skip_excluded_and_order_by_score() {
        let scores = [0.5, 3.0, 1.0, 3.0, -2.0, 7.0];
        assert_eq!(top_candidates(&scores, &[5], 3), vec![1, 3, 2]);
        assert_eq!(top_candidates(&scores, &[0, 1, 2, 3, 4], 3), vec![5]);
        assert_eq!(top_candidates(&scores, &[], 10).len(), 6);
    }
}
