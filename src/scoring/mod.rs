//! From model scores to selection problems (docs/protocol.md, steps 5–7): per-item sensitivities from exact
//! percentiles computed without the users × items score matrix, clipping, and each user's top
//! candidates.

mod sketch;

use sketch::sketch_inner;
pub use sketch::{sketch_users, ByteReader, PercentileSketch};

pub mod policy;
pub mod prior;

use serde::{Deserialize, Serialize};

use crate::data::{row_items, Csr};
use crate::error::{Error, Result};
use crate::model::{Model, Scratch};

pub use policy::{CandidateList, CandidatePolicy, ResolvedPolicy};
pub use prior::{Prior, ResolvedPrior};

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
    /// Scores of the consecutive `users` into `out`, one row of `n_items` per user, each row
    /// exactly what [`UserScorer::score`] gives; a scorer may read its model once per block.
    fn score_block(
        &self,
        users: std::ops::Range<usize>,
        out: &mut [f64],
        scratch: &mut Self::Scratch,
    ) {
        let n = self.n_items();
        for (u, row) in users.zip(out.chunks_mut(n.max(1))) {
            self.score(u, row, scratch);
        }
    }
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
        row_items(self.input, user)
    }
    fn score(&self, user: usize, out: &mut [f64], scratch: &mut Scratch) {
        self.model.score_into(self.excluded(user), out, scratch);
    }
    fn score_block(&self, users: std::ops::Range<usize>, out: &mut [f64], scratch: &mut Scratch) {
        let items: Vec<&[u32]> = users.map(|u| self.excluded(u)).collect();
        self.model.score_block(&items, out, scratch);
    }
    fn targets(&self, user: usize) -> &[u32] {
        match self.targets {
            Some(t) => row_items(t, user),
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// The running tails of one item: a superset of its `cap_low` smallest and of its `cap_high`
/// largest scores so far. A value that may belong to a tail is appended to it; when a tail holds
/// twice its size, a selection cuts it back to the size and the threshold rises to the kept
/// extreme. Amortised O(1) per value, against O(log size) for a heap; the kept values (as a
/// multiset) are those of the exact tails, so the percentiles are unchanged.
struct Tails {
    low: Vec<f64>,
    high: Vec<f64>,
    cap_low: usize,
    cap_high: usize,
    /// A value enters `low` if below this (+∞ until `low` has been cut once).
    low_th: f64,
    /// A value enters `high` if above this.
    high_th: f64,
}

impl Tails {
    fn new(cap_low: usize, cap_high: usize) -> Tails {
        Tails {
            low: Vec::new(),
            high: Vec::new(),
            cap_low,
            cap_high,
            low_th: if cap_low == 0 {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            },
            high_th: if cap_high == 0 {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            },
        }
    }

    /// Adds `v`; returns the thresholds (a value at or beyond both changes nothing), so that
    /// the caller can skip such values.
    #[inline]
    fn push(&mut self, v: f64) -> (f64, f64) {
        if v < self.low_th {
            self.low.push(v);
            if self.low.len() >= 2 * self.cap_low {
                self.low_th = cut(&mut self.low, self.cap_low, |a, b| a.total_cmp(b));
            }
        }
        if v > self.high_th {
            self.high.push(v);
            if self.high.len() >= 2 * self.cap_high {
                self.high_th = cut(&mut self.high, self.cap_high, |a, b| b.total_cmp(a));
            }
        }
        (self.low_th, self.high_th)
    }

    /// The exact tails, each sorted ascending.
    fn finish(mut self) -> (Vec<f64>, Vec<f64>) {
        if self.low.len() > self.cap_low {
            cut(&mut self.low, self.cap_low, |a, b| a.total_cmp(b));
        }
        if self.high.len() > self.cap_high {
            cut(&mut self.high, self.cap_high, |a, b| b.total_cmp(a));
        }
        self.low.sort_by(f64::total_cmp);
        self.high.sort_by(f64::total_cmp);
        // The tails may have grown to twice their size: give the room back.
        self.low.shrink_to_fit();
        self.high.shrink_to_fit();
        (self.low, self.high)
    }
}

/// Keeps the `keep` (≥ 1) first values of `v` in the order `cmp` and returns the last kept one.
fn cut(v: &mut Vec<f64>, keep: usize, cmp: impl FnMut(&f64, &f64) -> std::cmp::Ordering) -> f64 {
    let (_, &mut last, _) = v.select_nth_unstable_by(keep - 1, cmp);
    v.truncate(keep);
    last
}

/// Items whose tails are updated together (their tails should fit in a core's cache).
const ITEM_TILE: usize = 32;

/// Users scored together before their scores are folded into the per-item tails.
const USER_BLOCK: usize = 256;

/// Exact per-item percentiles of the scores over the test users of `cfg.population` — all of
/// them, or those who do not already have the item (docs/protocol.md, step 6) —, in memory proportional to items × (1% of users) rather than users × items: only
/// the bottom and top tails of each item's scores are kept. Users are scored in parallel blocks;
/// the tails are updated in parallel over item ranges, so the result does not depend on the
/// number of threads. `progress` receives the number of users folded in after each block.
///
/// This is the one-partition case of the distributed computation (docs/python.md, "Ray"):
/// [`percentile_counts`], one [`sketch_users`] over every user, [`PercentileSketch::sensitivities`].
pub fn item_sensitivities<S: UserScorer>(
    scorer: &S,
    cfg: &SensitivityConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Sensitivities {
    let counts = percentile_counts(scorer, cfg.population);
    sketch_users(scorer, cfg, &counts, 0..scorer.n_users(), progress).sensitivities(cfg)
}

/// [`item_sensitivities`] that also keeps every user's `top` candidates and their raw scores
/// ([`top_candidates`] on the scores the pass computes anyway), so that the selection need not
/// score the users again (docs/real-data.md, "Memory and time"). The cache takes 12 B per
/// candidate.
pub fn item_sensitivities_with_candidates<S: UserScorer>(
    scorer: &S,
    cfg: &SensitivityConfig,
    top: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> (Sensitivities, CandidateCache) {
    let counts = percentile_counts(scorer, cfg.population);
    let users = 0..scorer.n_users();
    let (sketch, cache) = sketch_inner(scorer, cfg, &counts, users, Some(top), progress);
    (sketch.sensitivities(cfg), cache)
}

/// Every user's top candidates (best first) and their raw model scores, from one scoring pass
/// ([`item_sensitivities_with_candidates`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateCache {
    first: usize,
    start: Vec<usize>,
    items: Vec<u32>,
    raw: Vec<f64>,
}

impl CandidateCache {
    /// The candidates of `user` and their raw scores; `None` for a user outside the cache.
    pub fn get(&self, user: usize) -> Option<(&[u32], &[f64])> {
        let i = user.checked_sub(self.first)?;
        let (a, b) = (*self.start.get(i)?, *self.start.get(i + 1)?);
        Some((&self.items[a..b], &self.raw[a..b]))
    }
}

/// How many scores each item's percentiles run over: every user for [`PercentileUsers::All`],
/// else the users who do not have the item. Cheap (one pass over the input rows, no scoring); a
/// distributed run computes it once for all partitions.
pub fn percentile_counts<S: UserScorer>(scorer: &S, population: PercentileUsers) -> Vec<u64> {
    let mut counts = vec![scorer.n_users() as u64; scorer.n_items()];
    if population == PercentileUsers::WithoutItem {
        for u in 0..scorer.n_users() {
            for &j in scorer.excluded(u) {
                counts[j as usize] -= 1;
            }
        }
    }
    counts
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
        Self::from_items(scores, top_candidates(scores, excluded, top), sens, clip)
    }

    /// The problem of the candidates `items` (from [`top_candidates`] on `scores`, best first).
    pub fn from_items(scores: &[f64], items: Vec<u32>, sens: &Sensitivities, clip: bool) -> Self {
        let raw: Vec<f64> = items.iter().map(|&j| scores[j as usize]).collect();
        Self::from_raw(items, &raw, sens, clip)
    }

    /// The problem of the candidates `items` whose raw model scores are `raw` (same order).
    pub fn from_raw(items: Vec<u32>, raw: &[f64], sens: &Sensitivities, clip: bool) -> Self {
        let q = items
            .iter()
            .zip(raw)
            .map(|(&j, &s)| if clip { sens.clip(j as usize, s) } else { s })
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
    let top = if top == 0 { scores.len() } else { top };
    crate::numerics::best_k(scores, excluded, top)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::percentile_linear;

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
        // Against a plain sort by (score descending, index ascending): negative scores, both
        // zeros, many ties, every size of the cut.
        let scores: Vec<f64> = (0..300)
            .map(|i| match i % 7 {
                0 => 0.0,
                1 => -0.0,
                _ => ((i * 37 % 23) as f64 - 11.0) / 4.0,
            })
            .collect();
        let excluded: Vec<u32> = (0..300).filter(|j| j % 11 == 3).collect();
        let mut naive: Vec<u32> = (0..300).filter(|j| j % 11 != 3).collect();
        naive.sort_by(|&a, &b| {
            scores[b as usize]
                .total_cmp(&scores[a as usize])
                .then(a.cmp(&b))
        });
        for top in [1, 2, 17, 100, 272, 273, 500] {
            let want = &naive[..top.min(naive.len())];
            assert_eq!(top_candidates(&scores, &excluded, top), want, "top {top}");
        }
    }
}
