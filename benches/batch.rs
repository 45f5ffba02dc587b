//! `cargo bench --bench batch`: one selection per user for 10,000 users × 500 candidates through
//! the library's `mechanisms::batch::select_batch` — the Rust side of `benches/python_batch.sh`,
//! which times the same call from Python (`recsel.select_batch`) on the same data.
//!
//! Prints, per mechanism, the median wall time of 7 calls and a checksum of the picks (the Python
//! side prints the same checksum for the same seed: the same work, the same selections).

use std::time::Instant;

use recsel::mechanisms::batch::{select_batch, BatchStreams};
use recsel::mechanisms::{self, MechParams};
use recsel::rng::{NoiseMode, Streams};

/// The benchmark's scores: a fixed integer hash of (user, candidate), so that Python builds the
/// same matrix with numpy (`benches/python_batch.py`).
fn data(users: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut q = Vec::with_capacity(users * k);
    for i in 0..users as u64 {
        for j in 0..k as u64 {
            q.push(((i * 7919 + j * 104_729) % 1_000_003) as f64 / 1_000_003.0);
        }
    }
    let d = (0..k).map(|j| 0.5 + (j % 7) as f64 * 0.25).collect();
    (q, d)
}

fn main() {
    let (users, k) = (10_000, 500);
    let (q, d) = data(users, k);
    println!("select_batch, {users} users x {k} candidates, eps = 1, seed 3 (median of 7 calls)");
    for name in ["rnm", "gem", "mgem"] {
        let mech = mechanisms::build(name, &MechParams::default().with_epsilon(1.0))
            .expect("valid parameters");
        let at = BatchStreams {
            streams: Streams::new(3),
            users: None,
            eps_index: 0,
            trial: 0,
        };
        let mut times = Vec::new();
        let mut sum = 0usize;
        for _ in 0..7 {
            let t = Instant::now();
            let picks = select_batch(&*mech, &q, k, &d, NoiseMode::Fast, &at).expect("valid");
            times.push(t.elapsed().as_secs_f64());
            sum = picks.iter().sum();
        }
        times.sort_by(f64::total_cmp);
        println!(
            "rust   {name:<5} {:>8.1} ms  checksum {sum}",
            times[times.len() / 2] * 1e3
        );
    }
}
