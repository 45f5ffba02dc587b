//! Criterion benchmarks of the secure path (`docs/secure.md`) against the float path.
//!
//! `cargo bench --bench secure` measures, at k = 500 with N(0, 1) scores and sensitivities in
//! [0.5, 2] (fixed seed), for `rnm`, `gem` and `mgem`:
//! * `float_select` / `secure_select`: one selection on a fresh problem (prepare + sample) — what
//!   OpenDP's `make_noisy_max` does per call, compared side by side in `benches/opendp_compare.sh`;
//! * `float_sample` / `secure_sample`: one more selection after one preparation (the real-data
//!   workload: 50 trials per user and ε).
//!
//! The secure generator is keyed from a fixed seed here so runs are comparable; releases key it
//! from the OS.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::Rng as _;
use recsel::mechanisms::{self, MechParams, Problem};
use recsel::rng::{SecureRng, Streams};
use std::hint::black_box;
use std::time::Duration;

/// k standard normal scores (Box–Muller) and sensitivities uniform on [0.5, 2].
fn normal_problem(k: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Streams::new(seed).stream(0, 0, 0, 0);
    let q = (0..k)
        .map(|_| {
            let (u, v): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        })
        .collect();
    let d = (0..k).map(|_| 0.5 + 1.5 * rng.random::<f64>()).collect();
    (q, d)
}

fn secure_vs_float(c: &mut Criterion) {
    let k = 500;
    let (q, d) = normal_problem(k, 1);
    let p = Problem::new(&q, &d).unwrap();
    let streams = Streams::new(2);
    let mut g = c.benchmark_group("secure_k500");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.throughput(Throughput::Elements(1));
    for name in ["rnm", "gem", "mgem"] {
        let m = mechanisms::build(name, &MechParams::default()).unwrap();
        let mut trial = 0u32;
        g.bench_function(BenchmarkId::new("float_select", name), |b| {
            b.iter(|| {
                trial = trial.wrapping_add(1);
                m.select(black_box(&p), &mut streams.stream(1, 0, 0, trial))
            })
        });
        let mut srng = SecureRng::from_seed_insecure(3);
        g.bench_function(BenchmarkId::new("secure_select", name), |b| {
            b.iter(|| m.prepare_secure(black_box(&p)).unwrap().sample(&mut srng))
        });
        let prepared = m.prepare_many(&p);
        let mut rng = streams.stream(2, 0, 0, 0);
        g.bench_function(BenchmarkId::new("float_sample", name), |b| {
            b.iter(|| prepared.sample(&mut rng))
        });
        let secure = m.prepare_secure(&p).unwrap();
        g.bench_function(BenchmarkId::new("secure_sample", name), |b| {
            b.iter(|| secure.sample(&mut srng))
        });
    }
    g.finish();
}

criterion_group!(benches, secure_vs_float);
criterion_main!(benches);
