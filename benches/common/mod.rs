//! What the latency benches share: their positional arguments, the release they time and the
//! random histories they send. Each bench includes it with `mod common;` (it is not a bench
//! target of its own), and uses what it needs of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};

/// The bench's positional arguments (after `--`, without cargo's `--bench`-style flags).
pub fn positional_args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect()
}

/// The model directory given (`arg`), else the small example release fitted into `tmp`.
pub fn release_dir(arg: Option<&String>, tmp: &Path) -> PathBuf {
    match arg {
        Some(d) => PathBuf::from(d),
        None => {
            let d = tmp.join("model");
            recsel::recommend::example_release(&d).expect("the example release");
            d
        }
    }
}

/// `count` histories of about 123 random item columns below `n_items` each (the netflix shape's
/// mean), sorted and without repeats, from a fixed seed: the same histories in every bench.
pub fn random_histories(n_items: u32, count: usize) -> Vec<Vec<u32>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    (0..count)
        .map(|_| {
            let mut v: Vec<u32> = (0..123).map(|_| rng.random_range(0..n_items)).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect()
}
