//! Per-mechanism cost of the fig-13 select grid (docs/results.md, "Where the time goes"): for every mechanism
//! of `--mech all`, one user's cells as `recsel select` runs them — each of the 11 ε prepared once
//! on a top-500 problem, then 50 trials, each from its own seeded stream, γ = 0.0008 — timed over
//! a number of synthetic users on one thread. Prints the milliseconds per user, the share of the
//! grid, and the projection to 40,000 users on all threads (selection stage only; the
//! sensitivities are a separate stage of `recsel select`).
//!
//! Usage: `cargo bench --bench grid_mechanisms [-- USERS [MECHANISMS]]` (default 40 users and
//! `all`; MECHANISMS is a comma-separated list such as `rs,rs-exp`).

use std::time::Instant;

use rand::Rng as _;
use recsel::experiments::select::PAPER_EPSILONS;
use recsel::mechanisms::{self, MechParams, Problem, Selector};
use recsel::rng::{Draws, NoiseMode, Streams};

fn main() {
    let users: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(40);
    let (k, trials) = (500usize, 50u32);
    let params = MechParams::default().with_param("gamma", 0.0008);
    let list = std::env::args()
        .skip(1)
        .rfind(|a| a.parse::<u64>().is_err() && !a.starts_with('-'))
        .unwrap_or_else(|| "all".into());
    let specs = mechanisms::parse_list(&list).unwrap_or_else(|e| panic!("{e}"));
    let mut draws = Draws::Seeded(Streams::new(1));
    let mut rows = Vec::new();
    for (id, spec) in specs.iter().enumerate() {
        let mechs: Vec<_> = PAPER_EPSILONS
            .iter()
            .map(|&e| {
                spec.build(&params.with_epsilon(e))
                    .expect("valid parameters")
            })
            .collect();
        let t = Instant::now();
        let mut sink = 0usize;
        for user in 0..users {
            // Scores decreasing like a recommender's top 500, sensitivities spread over 10×.
            let mut rng = Streams::new(7).stream(0, 0, user, 0);
            let mut q: Vec<f64> = (0..k)
                .map(|r| 1.0 / (1.0 + r as f64).sqrt() + 0.01 * rng.random::<f64>())
                .collect();
            q.sort_by(|a, b| b.total_cmp(a));
            let d: Vec<f64> = (0..k).map(|_| 0.05 + 0.45 * rng.random::<f64>()).collect();
            let problem = Problem::new(&q, &d).expect("valid problem");
            for (e, m) in mechs.iter().enumerate() {
                let sel = Selector::new(&**m, &problem, NoiseMode::Fast).expect("fast path");
                sel.sample_trials(&mut draws, id as u32, e as u32, user, 0..trials, |_, a| {
                    sink += a
                });
            }
        }
        std::hint::black_box(sink);
        rows.push((spec.name, t.elapsed().as_secs_f64() * 1e3 / users as f64));
    }
    let total: f64 = rows.iter().map(|r| r.1).sum();
    let threads = rayon::current_num_threads() as f64;
    println!(
        "{users} users × 11 ε × {trials} trials, top {k}, γ = 0.0008; one thread; projection: 40,000 users on {threads} threads"
    );
    println!(
        "{:<14} {:>10} {:>8} {:>14}",
        "mechanism", "ms/user", "share", "40k users s"
    );
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (name, ms) in &rows {
        println!(
            "{name:<14} {ms:10.3} {:>7.1}% {:>14.1}",
            100.0 * ms / total,
            ms * 40_000.0 / 1e3 / threads
        );
    }
    println!(
        "{:<14} {total:10.3} {:>7.1}% {:>14.1}",
        "all",
        100.0,
        total * 40_000.0 / 1e3 / threads
    );
}
