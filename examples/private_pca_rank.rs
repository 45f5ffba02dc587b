//! Adaptive data analysis with selection from private candidates (Liu & Talwar 2019, §5.2;
//! docs/private-candidates.md, "Private tuning"): choose the rank of a PCA privately.
//!
//! Data: ml-1m-implicit's training interactions restricted to its `D` most popular items, one
//! unit vector per user (the user's indicator over those items, normalised). Users with an even
//! id are the public side: their second-moment matrix gives the principal directions v_1, v_2, …
//! (as a released model is fitted on training users). Users with an odd id are protected: each
//! candidate rank r is scored on them by the energy its subspace captures,
//!
//! `S_r = Σ_u Σ_{i ≤ r} (v_i · x_u)² − n·λ·r`,
//!
//! where each user's term lies in [0, 1] (x_u is a unit vector and the v_i orthonormal) and the
//! penalty λ per dimension is public (n, the number of protected users, is public). Replacing one
//! protected user moves every S_r by at most 1, so `(S_r + Lap(1/ε₀)) / n` is ε₀-DP, and the
//! rank is chosen by the same selection `recsel tune --private` uses: random stopping over
//! uniformly drawn ranks, 3ε₀ for the protected users whatever the number of ranks tried
//! (Theorem 3.2), stated by the library.
//!
//! Run with `cargo run --release --example private_pca_rank [DATA_DIR]` (default
//! `../shared/data/ml-1m-implicit`).

use std::path::Path;

use recsel::evaluate::tuning::private::PrivateTuner;
use recsel::recommend::tuned::PrivateTuneParams;
use recsel::rng::Streams;

/// Items kept (the most popular on the public side).
pub const D: usize = 40;
/// Ranks tried: 1..=MAX_RANK.
pub const MAX_RANK: usize = 20;
/// Public penalty per dimension.
pub const LAMBDA: f64 = 0.02;
/// ε₀ of one rank's score.
pub const EPS0: f64 = 0.1;
/// Stopping probability of random stopping.
pub const GAMMA: f64 = 0.02;

/// What the example computes.
#[derive(Debug, Clone)]
pub struct PcaRank {
    /// Protected users scored.
    pub users: usize,
    /// Exact penalised score per rank (mean over protected users), rank 1 first.
    pub scores: Vec<f64>,
    /// The non-private choice: the rank of the largest exact score.
    pub exact_best: usize,
    /// How often each rank was chosen privately over the repetitions, rank 1 first.
    pub chosen: Vec<u64>,
    /// ε of one private choice for the protected users (from the library).
    pub epsilon: f64,
}

/// Eigen-decomposition of a symmetric matrix by cyclic Jacobi rotations: eigenvalues and
/// eigenvectors (columns of the returned row-major matrix), unsorted.
fn jacobi(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        if off < 1e-22 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

/// Reads `dir/train.txt` (LightGCN: `user item item …` per line): (user, items) rows.
fn read_rows(dir: &Path) -> std::io::Result<Vec<(u64, Vec<usize>)>> {
    let text = std::fs::read_to_string(dir.join("train.txt"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace().filter_map(|t| t.parse::<u64>().ok());
            let u = it.next()?;
            Some((u, it.map(|i| i as usize).collect()))
        })
        .collect())
}

/// Runs the example on the ml-1m-implicit folder `dir` with `repetitions` private choices
/// (seeds 0, 1, …).
pub fn run(dir: &Path, repetitions: u64) -> Result<PcaRank, Box<dyn std::error::Error>> {
    let rows = read_rows(dir)?;
    let (public, protected): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(u, _)| u % 2 == 0);
    // The D most popular items on the public side (ties by item id).
    let n_items = public
        .iter()
        .flat_map(|r| r.1.iter())
        .max()
        .map_or(0, |m| m + 1);
    let mut pop = vec![0u64; n_items];
    for (_, items) in &public {
        for &i in items {
            pop[i] += 1;
        }
    }
    let mut order: Vec<usize> = (0..n_items).collect();
    order.sort_by(|&a, &b| pop[b].cmp(&pop[a]).then(a.cmp(&b)));
    let mut col = vec![usize::MAX; n_items.max(1)];
    for (c, &i) in order.iter().take(D).enumerate() {
        col[i] = c;
    }
    // Unit vectors over the D items (users with none of them are left out).
    let unit = |items: &[usize]| -> Option<Vec<f64>> {
        let mut x = vec![0.0; D];
        for &i in items {
            if let Some(&c) = col.get(i) {
                if c != usize::MAX {
                    x[c] = 1.0;
                }
            }
        }
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        (norm > 0.0).then(|| x.iter().map(|v| v / norm).collect())
    };
    let mut m = vec![0.0; D * D];
    for (_, items) in &public {
        if let Some(x) = unit(items) {
            for i in 0..D {
                for j in 0..D {
                    m[i * D + j] += x[i] * x[j];
                }
            }
        }
    }
    let (values, vectors) = jacobi(m, D);
    let mut by_value: Vec<usize> = (0..D).collect();
    by_value.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    // Each protected user's captured energy per rank, summed.
    let mut sums = vec![0.0; MAX_RANK];
    let mut users = 0usize;
    for (_, items) in &protected {
        let Some(x) = unit(items) else { continue };
        users += 1;
        let mut captured = 0.0;
        for (r, &k) in by_value.iter().take(MAX_RANK).enumerate() {
            let proj: f64 = (0..D).map(|i| vectors[i * D + k] * x[i]).sum();
            captured += proj * proj;
            sums[r] += captured.min(1.0);
        }
    }
    let n = users as f64;
    for (r, s) in sums.iter_mut().enumerate() {
        *s -= n * LAMBDA * (r + 1) as f64;
    }
    let scores: Vec<f64> = sums.iter().map(|s| s / n).collect();
    let exact_best = 1
        + (0..MAX_RANK)
            .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
            .expect("ranks");
    let tuner: PrivateTuner = PrivateTuneParams {
        eps0: EPS0,
        gamma: GAMMA,
        ..Default::default()
    }
    .check()?;
    let mut chosen = vec![0u64; MAX_RANK];
    for seed in 0..repetitions {
        let mut rng = Streams::new(seed).stream(0, 0, 0, 0);
        let c = tuner.select(&sums, users, &mut rng)?;
        chosen[c.index.expect("random stopping runs at least once")] += 1;
    }
    Ok(PcaRank {
        users,
        scores,
        exact_best,
        chosen,
        epsilon: tuner.statement().epsilon,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/data/ml-1m-implicit".into());
    let reps = 1000;
    let r = run(Path::new(&dir), reps)?;
    println!(
        "PCA rank of ml-1m-implicit's {D} most popular items: subspaces from the even user ids, \
         scored on {} odd-id users (protected), penalty {LAMBDA} per dimension",
        r.users
    );
    println!("rank  exact score  chosen privately (of {reps})");
    for (i, s) in r.scores.iter().enumerate() {
        println!("{:>4}  {:>11.4}  {:>6}", i + 1, s, r.chosen[i]);
    }
    println!(
        "non-private choice: rank {}; each private choice is ({}, 0)-DP for the protected users \
         (eps0 = {EPS0}, random stopping with gamma = {GAMMA})",
        r.exact_best, r.epsilon
    );
    Ok(())
}
