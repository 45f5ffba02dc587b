//! Synthetic interactions with the structure that makes a recommender learn something: power-law
//! item popularity, heavy-tailed (log-normal) user activity, and latent taste clusters — each user
//! draws most items from one cluster of items, by popularity, and the rest from the whole catalogue.
//! An item-item model such as SANSA learns the clusters; the most-popular baseline cannot.
//!
//! `small` (5,000 users, 1,500 items, ≈ 200k interactions) fits in seconds; `ml20m` and `netflix`
//! match the user, item and interaction counts of the preprocessed datasets (README, "SANSA versus the Python reference") for scale
//! benchmarks. Every user has an independent random stream of the seed, so the data does not depend
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

/// Cumulative weights for sampling by binary search.
struct Sampler {
    items: Vec<u32>,
    cumulative: Vec<f64>,
}

impl Sampler {
    fn new(items: Vec<u32>, weights: &[f64]) -> Self {
        let mut acc = 0.0;
        let cumulative = items
            .iter()
            .map(|&i| {
                acc += weights[i as usize];
                acc
            })
            .collect();
        Sampler { items, cumulative }
    }
    fn draw<R: Rng>(&self, rng: &mut R) -> u32 {
        let total = *self.cumulative.last().expect("non-empty sampler");
        let x = rng.random::<f64>() * total;
        let k = self
            .cumulative
            .partition_point(|&c| c <= x)
            .min(self.items.len() - 1);
        self.items[k]
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
