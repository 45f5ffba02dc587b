//! Synthetic interactions with the structure that makes a recommender learn something: power-law
//! item popularity, heavy-tailed (log-normal) user activity, and latent taste clusters — each user
//! draws most items from one cluster of items, by popularity, and the rest from the whole catalogue.
//! An item-item model such as SANSA learns the clusters; the most-popular baseline cannot.
//!
//! `small` (5,000 users, 1,500 items, ≈ 200k interactions) fits in seconds; `ml20m` and `netflix`
//! match the user, item and interaction counts of the preprocessed datasets for scale benchmarks
//! (docs/results.md, "Scale and memory"). Every user has an independent random stream of the seed, so the data does not depend
//! on the number of threads.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};
use rayon::prelude::*;

use super::RawInteractions;
use crate::{Error, Result};

/// Size of the generated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntheticShape {
    /// 5,000 users, 1,500 items, ≈ 200,000 interactions.
    Small,
    /// MovieLens 20M after preprocessing: 136,677 users, 20,720 items, 9,990,682 interactions.
    Ml20m,
    /// Netflix after preprocessing: 463,435 users, 17,769 items, 56,880,037 interactions.
    Netflix,
}

impl SyntheticShape {
    /// Parses `small`, `ml20m` or `netflix`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "small" => Ok(SyntheticShape::Small),
            "ml20m" => Ok(SyntheticShape::Ml20m),
            "netflix" => Ok(SyntheticShape::Netflix),
            _ => Err(Error::UnknownName {
                kind: "synthetic shape",
                name: name.into(),
                valid: "small, ml20m, netflix".into(),
            }),
        }
    }
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SyntheticShape::Small => "small",
            SyntheticShape::Ml20m => "ml20m",
            SyntheticShape::Netflix => "netflix",
        }
    }
    /// (users, items, interactions, taste clusters).
    pub fn dims(self) -> (usize, usize, usize, usize) {
        match self {
            SyntheticShape::Small => (5_000, 1_500, 200_000, 12),
            SyntheticShape::Ml20m => (136_677, 20_720, 9_990_682, 40),
            SyntheticShape::Netflix => (463_435, 17_769, 56_880_037, 40),
        }
    }
}

/// Probability that a draw comes from the user's own taste cluster.
const IN_CLUSTER: f64 = 0.75;
/// Exponent of the item popularity power law (weight of the item of popularity rank r is r^-a).
const POPULARITY_EXPONENT: f64 = 0.9;
/// Log-normal σ of user activity.
const ACTIVITY_SIGMA: f64 = 1.0;
/// Users generated in one parallel block.
const GENERATE_BLOCK: usize = 16_384;

/// Cumulative weights for sampling by inverse transform: a uniform `x` in `[0, total)` picks the
/// first item whose cumulative weight exceeds it.
struct Sampler {
    items: Vec<u32>,
    cumulative: Vec<f64>,
    /// A guide table (Chen and Asau): `guide[b]` is the first item whose cumulative weight
    /// exceeds `b / scale`, so a draw in bucket `b` = ⌊x · scale⌋ searches only
    /// `guide[b]..guide[b + 1]` instead of the whole array. One bucket per item.
    guide: Vec<usize>,
    scale: f64,
}

impl Sampler {
    fn new(items: Vec<u32>, weights: &[f64]) -> Self {
        let mut acc = 0.0;
        let cumulative: Vec<f64> = items
            .iter()
            .map(|&i| {
                acc += weights[i as usize];
                acc
            })
            .collect();
        let buckets = cumulative.len();
        let scale = buckets as f64 / acc;
        let mut guide: Vec<usize> = (0..buckets)
            .map(|b| cumulative.partition_point(|&c| c <= b as f64 / scale))
            .collect();
        guide.push(cumulative.len());
        Sampler {
            items,
            cumulative,
            guide,
            scale,
        }
    }

    /// The item `x` picks: the first whose cumulative weight exceeds `x` (the last item when
    /// none does), exactly what a binary search over the whole array gives. The guide only
    /// narrows the search; the bracket is checked, and a bracket that rounding put off by one
    /// falls back to the whole array.
    fn pick(&self, x: f64) -> u32 {
        let c = &self.cumulative;
        let b = ((x * self.scale) as usize).min(self.guide.len() - 2);
        let (lo, hi) = (self.guide[b], self.guide[b + 1]);
        let k = lo + c[lo..hi].partition_point(|&v| v <= x);
        let k = if (lo == 0 || c[lo - 1] <= x) && (k < hi || hi == c.len() || c[hi] > x) {
            k
        } else {
            c.partition_point(|&v| v <= x)
        };
        self.items[k.min(self.items.len() - 1)]
    }

    fn draw<R: Rng>(&self, rng: &mut R) -> u32 {
        let total = *self.cumulative.last().expect("non-empty sampler");
        self.pick(rng.random::<f64>() * total)
    }
}

/// Generates interactions of the given shape from `seed`.
pub fn generate(shape: SyntheticShape, seed: u64) -> RawInteractions {
    let (n_users, n_items, n_inter, n_clusters) = shape.dims();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::MAX);
    // Popularity: a random permutation of ranks, weight rank^-a.
    let mut ranks: Vec<usize> = (1..=n_items).collect();
    for i in (1..n_items).rev() {
        let j = rng.random_range(0..=i);
        ranks.swap(i, j);
    }
    let weights: Vec<f64> = ranks
        .iter()
        .map(|&r| (r as f64).powf(-POPULARITY_EXPONENT))
        .collect();
    let cluster_of: Vec<usize> = (0..n_items)
        .map(|_| rng.random_range(0..n_clusters))
        .collect();
    let global = Sampler::new((0..n_items as u32).collect(), &weights);
    let clusters: Vec<Sampler> = (0..n_clusters)
        .map(|c| {
            let mut members: Vec<u32> = (0..n_items as u32)
                .filter(|&i| cluster_of[i as usize] == c)
                .collect();
            if members.is_empty() {
                members.push(rng.random_range(0..n_items as u32));
            }
            Sampler::new(members, &weights)
        })
        .collect();
    // Activity: log-normal with mean n_inter / n_users (E = exp(μ + σ²/2)), at least 5 items.
    let mean = n_inter as f64 / n_users as f64;
    let mu = mean.ln() - ACTIVITY_SIGMA * ACTIVITY_SIGMA / 2.0;
    let activity = LogNormal::new(mu, ACTIVITY_SIGMA).expect("valid log-normal");
    let cap = (n_items / 3).max(5);
    // Users are generated in parallel blocks appended in user order, so that only one block's rows
    // are held beside the records (their small allocations would otherwise stay resident).
    // `seen` is one bit per item, cleared after each row (a hash set cost more than the draws).
    let user_row = |seen: &mut Vec<u64>, u: usize| -> Vec<u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(u as u64);
        let n = (activity.sample(&mut rng).round() as usize).clamp(5, cap);
        let taste = rng.random_range(0..n_clusters);
        seen.resize(n_items.div_ceil(64), 0);
        let mut row = Vec::with_capacity(n);
        let mut attempts = 0;
        while row.len() < n && attempts < 50 * n {
            attempts += 1;
            let item = if rng.random::<f64>() < IN_CLUSTER {
                clusters[taste].draw(&mut rng)
            } else {
                global.draw(&mut rng)
            };
            let (w, bit) = (item as usize / 64, 1u64 << (item % 64));
            if seen[w] & bit == 0 {
                seen[w] |= bit;
                row.push(item);
            }
        }
        for &item in &row {
            seen[item as usize / 64] = 0;
        }
        row
    };
    let mut users = Vec::with_capacity(n_inter);
    let mut items = Vec::with_capacity(n_inter);
    for start in (0..n_users).step_by(GENERATE_BLOCK) {
        let end = (start + GENERATE_BLOCK).min(n_users);
        let rows: Vec<Vec<u32>> = (start..end)
            .into_par_iter()
            .map_init(Vec::new, user_row)
            .collect();
        for (u, row) in (start..).zip(&rows) {
            users.extend(std::iter::repeat_n(u as u32, row.len()));
            items.extend_from_slice(row);
        }
    }
    RawInteractions {
        users,
        items,
        ratings: None,
        user_ids: (0..n_users).map(|u| u.to_string()).collect(),
        item_ids: (0..n_items).map(|i| i.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide table only narrows the search: every pick is the whole-array binary search's,
    /// at the cumulative weights themselves, just beside them, at 0 and at the total, for
    /// weights spanning eight orders of magnitude.
    #[test]
    fn the_guided_pick_is_the_binary_search() {
        let weights: Vec<f64> = (1..=3000).map(|r| (r as f64).powf(-2.3)).collect();
        let items: Vec<u32> = (0..3000).rev().collect();
        let s = Sampler::new(items.clone(), &weights);
        let whole = |x: f64| {
            let k = s.cumulative.partition_point(|&c| c <= x);
            items[k.min(items.len() - 1)]
        };
        let total = *s.cumulative.last().unwrap();
        let mut xs = vec![0.0, total, total * (1.0 - f64::EPSILON)];
        for &c in &s.cumulative {
            xs.extend([c, c.next_down(), c.next_up()]);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        xs.extend((0..200_000).map(|_| rng.random::<f64>() * total));
        for x in xs {
            assert_eq!(s.pick(x), whole(x), "x = {x:e}");
        }
    }
}
