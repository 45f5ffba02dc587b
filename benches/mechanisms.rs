//! Criterion benchmarks of the selection mechanisms.
//!
//! `cargo bench --bench mechanisms` measures
//! * the GEM transform, exact O(k log k) hull versus the O(k²) definition, at k ∈ {100, 500, 5000};
//! * whole selections (prepare + sample) of `rnm` and `gem` at k = 500, and repeated samples after
//!   one preparation, against a bare loop that draws k exponentials and takes the argmax.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::Rng as _;
use recsel::mechanisms::gem::{transformed_scores, transformed_scores_naive};
use recsel::mechanisms::{self, MechParams, Problem};
use recsel::numerics::distributions::exp1;
use recsel::rng::Streams;
use std::hint::black_box;
use std::time::Duration;

fn problem(k: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Streams::new(seed).stream(0, 0, 0, 0);
    let q = (0..k).map(|_| rng.random::<f64>() * 10.0).collect();
    let d = (0..k).map(|_| 0.1 + rng.random::<f64>() * 2.0).collect();
    (q, d)
}

fn gem_transform(c: &mut Criterion) {
    let mut g = c.benchmark_group("gem_transform");
    g.measurement_time(Duration::from_secs(3)).sample_size(20);
    for k in [100usize, 500, 5000] {
        let (q, d) = problem(k, k as u64);
        let t = 2.0 * (k as f64 / 0.05).ln();
        g.bench_with_input(BenchmarkId::new("hull", k), &k, |b, _| {
            b.iter(|| transformed_scores(black_box(&q), black_box(&d), t))
        });
        g.bench_with_input(BenchmarkId::new("naive", k), &k, |b, _| {
            b.iter(|| transformed_scores_naive(black_box(&q), black_box(&d), t))
        });
    }
    g.finish();
}

fn selections(c: &mut Criterion) {
    let k = 500;
    let (q, d) = problem(k, 1);
    let p = Problem::new(&q, &d).unwrap();
    let streams = Streams::new(2);
    let mut g = c.benchmark_group("select_k500");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.throughput(Throughput::Elements(1));
    for name in ["rnm", "gem", "mgem", "em", "pf", "rs"] {
        let m = mechanisms::build(name, &MechParams::default()).unwrap();
        let mut trial = 0u32;
        g.bench_function(BenchmarkId::new("prepare+sample", name), |b| {
            b.iter(|| {
                trial = trial.wrapping_add(1);
                m.select(&p, &mut streams.stream(1, 0, 0, trial))
            })
        });
        let prepared = m.prepare_many(&p);
        let mut rng = streams.stream(2, 0, 0, 0);
        g.bench_function(BenchmarkId::new("sample", name), |b| {
            b.iter(|| prepared.sample(&mut rng))
        });
    }
    let mut rng = streams.stream(3, 0, 0, 0);
    g.bench_function("bare_exponential_argmax", |b| {
        b.iter(|| {
            let (mut best, mut arg) = (f64::NEG_INFINITY, 0);
            for (a, &x) in q.iter().enumerate() {
                let v = x + 2.0 * exp1(&mut rng);
                if v > best {
                    best = v;
                    arg = a;
                }
            }
            arg
        })
    });
    g.finish();
}

criterion_group!(benches, gem_transform, selections);
criterion_main!(benches);
