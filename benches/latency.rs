//! Latency of one private recommendation (docs/deployment.md, "Latency"): `Recommender::recommend`
//! for one history on one thread — score every item, clip, select — with every item a candidate
//! (the default policy) and, for comparison, the paper's `history-top:500`. For each mechanism and
//! noise mode (seeded floating-point `fast`, release-grade `secure`) it prints the p50, p99, max
//! and mean of the per-call wall time over the users, and the scoring alone (`Model::score_into`)
//! for the same histories, so that the selection's share is visible.
//!
//! Usage: `cargo bench --bench latency [-- MODEL_DIR [USERS]]`. MODEL_DIR is a model directory
//! with its release artifact written by `recsel fit --out` (the netflix shape:
//! `recsel fit --dataset synthetic --shape netflix --out DIR`, 17,769 items); without it the small
//! example release (1,500 items) is fitted into a temporary directory. Histories are 123 random
//! items each (the netflix shape's mean), 2,000 users by default, after 200 warm-up calls.
//! Timings are wall clock on one thread: on a shared machine, compare runs made side by side.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use recsel::mechanisms::MechParams;
use recsel::recommend::{user_key, RecommendConfig, Recommender};
use recsel::rng::NoiseMode;
use recsel::scoring::CandidatePolicy;

const WARM_UP: usize = 200;

/// p50, p99, max and mean of `t` (seconds), in milliseconds.
fn summary(mut t: Vec<f64>) -> String {
    t.sort_by(f64::total_cmp);
    let q = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize] * 1e3;
    let mean = t.iter().sum::<f64>() / t.len() as f64 * 1e3;
    format!(
        "p50 {:7.3} ms  p99 {:7.3} ms  max {:7.3} ms  mean {:7.3} ms",
        q(0.5),
        q(0.99),
        q(1.0),
        mean
    )
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let n_users: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir: PathBuf = match args.first() {
        Some(d) => PathBuf::from(d),
        None => {
            let d = tmp.path().join("model");
            recsel::recommend::example_release(&d).expect("the example release");
            d
        }
    };
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    let load = |mech: &str, mode: NoiseMode, policy: CandidatePolicy| {
        let mut cfg = RecommendConfig::new(mech, params.clone(), mode).with_candidates(policy);
        cfg.allow_non_private = true; // history-top, for comparison only
        Recommender::load(Path::new(&dir), &cfg)
            .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
    };
    let probe = load("mgem", NoiseMode::Fast, CandidatePolicy::All);
    let n = probe.n_items() as u32;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let users: Vec<Vec<u32>> = (0..n_users + WARM_UP)
        .map(|_| {
            let mut v: Vec<u32> = (0..123).map(|_| rng.random_range(0..n)).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    println!(
        "one recommendation on one thread: {} items, {n_users} users of ~123 random items, eps = 1",
        n
    );
    // Scoring alone, through the same scratch the recommender uses.
    {
        let mut scratch = probe.scratch();
        let mut t = Vec::with_capacity(n_users);
        for (i, h) in users.iter().enumerate() {
            let s = Instant::now();
            let c = probe.candidates(h, &mut scratch);
            std::hint::black_box(&c);
            if i >= WARM_UP {
                t.push(s.elapsed().as_secs_f64());
            }
        }
        println!(
            "{:<34} {}",
            "score + clip (all, no selection)",
            summary(t)
        );
    }
    for policy in [CandidatePolicy::All, CandidatePolicy::HistoryTop(500)] {
        for mech in ["mgem", "rnm", "em"] {
            for (mode_name, mode) in [("fast", NoiseMode::Fast), ("secure", NoiseMode::Secure)] {
                let rec = load(mech, mode, policy.clone());
                let mut draws = rec.draws_seeded(7).expect("a random source");
                let mut scratch = rec.scratch();
                let mut t = Vec::with_capacity(n_users);
                for (i, h) in users.iter().enumerate() {
                    let key = user_key(&i.to_string());
                    let s = Instant::now();
                    let pick = rec
                        .recommend(h, key, &mut draws, &mut scratch)
                        .expect("a recommendation");
                    std::hint::black_box(pick);
                    if i >= WARM_UP {
                        t.push(s.elapsed().as_secs_f64());
                    }
                }
                let label = format!("{mech} {mode_name} {policy}");
                println!("{label:<34} {}", summary(t));
            }
        }
    }
}
