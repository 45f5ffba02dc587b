//! Criterion benchmark of `recsel recommend`'s library path (docs/deployment.md;
//! docs/results.md, "Serving throughput"): `Recommender::recommend_all` on 100,000 users × 500 candidates.
//!
//! `cargo bench --bench recommend` fits SANSA on the generated `synthetic` data (1,500 items; exact,
//! λ = 200, density 0.01), writes the release artifact into a temporary directory, and serves
//! 100,000 users whose histories are the 4,000 training users' rows, cycled (each with its own user
//! id, so each draws from its own stream). Every user is scored (1,500 items), gets its top 500
//! candidates, clipped, and one `mgem` selection at ε = 1 — seeded (`fast`) and secure (`secure`,
//! OS-seeded ChaCha20 and the exact sampler). Criterion reports users per second as throughput.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use recsel::mechanisms::MechParams;
use recsel::recommend::{RecommendConfig, Recommender};
use recsel::rng::NoiseMode;
use recsel::scoring::CandidatePolicy;
use std::hint::black_box;
use std::time::Duration;

const USERS: usize = 100_000;
const TOP: usize = 500;

fn recommend_throughput(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    let data = recsel::recommend::example_release(&dir).unwrap();
    let rows = data.train.rows();
    let users: Vec<(String, Vec<u32>)> = (0..USERS)
        .map(|u| {
            let r = data.train.outer_view(u % rows).unwrap();
            (format!("user-{u}"), r.indices().to_vec())
        })
        .collect();
    let mut g = c.benchmark_group("recommend_100k_users_top500");
    g.measurement_time(Duration::from_secs(20)).sample_size(10);
    g.throughput(Throughput::Elements(USERS as u64));
    for (name, mode) in [("fast", NoiseMode::Fast), ("secure", NoiseMode::Secure)] {
        let mut cfg = RecommendConfig::new("mgem", MechParams::default().with_epsilon(1.0), mode)
            .with_candidates(CandidatePolicy::HistoryTop(TOP));
        cfg.allow_non_private = true; // the paper's candidates, for throughput comparisons
        let rec = Recommender::load(&dir, &cfg).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| black_box(rec.recommend_all(&users, 7, &|_| {}).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, recommend_throughput);
criterion_main!(benches);
