//! Criterion benchmark of the privacy ledger's commits (docs/ledger.md, "Cost"): the time of one
//! durable commit (`Ledger::charge`, SQLite in WAL mode with synchronous=FULL: one fsync of the log
//! per commit) for groups of 1, 16, 128 and 1,024 requests, each request a new request id of one
//! of 100,000 users with room in their budget. Criterion reports requests per second as
//! throughput; the time per iteration is the commit time of one group.
//!
//! Users per second of the whole `recsel recommend` with and without `--ledger`:
//! `benches/ledger_recommend.sh` (farm-bench, the two commands side by side).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use recsel::ledger::{
    Answer, ChargeRequest, Ledger, Period, RequestHash, Settings, SqliteLedger, Timestamp, Units,
};

fn commits(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = SqliteLedger::open(
        &tmp.path().join("bench.db"),
        Settings {
            budget: Units::budget("1000000").unwrap(),
            period: Period::None,
        },
    )
    .unwrap();
    let next = AtomicU64::new(0);
    let time = Timestamp::now();
    let mut g = c.benchmark_group("ledger_commit");
    g.measurement_time(Duration::from_secs(10)).sample_size(20);
    for size in [1usize, 16, 128, 1024] {
        g.throughput(Throughput::Elements(size as u64));
        g.bench_function(format!("group_{size}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let group: Vec<ChargeRequest> = (0..size)
                        .map(|_| {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            ChargeRequest {
                                user: format!("user-{}", n % 100_000),
                                request_id: format!("r{n}"),
                                request_hash: RequestHash::of(&[&n.to_le_bytes()]),
                                mechanism: "mgem".into(),
                                epsilon: Units::charge("0.1").unwrap(),
                                time,
                                answer: Answer::Item(format!("{}", n % 1500)),
                                fallback: None,
                                once_per_history: false,
                            }
                        })
                        .collect();
                    let t = Instant::now();
                    black_box(ledger.charge(&group).unwrap());
                    total += t.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group!(benches, commits);
criterion_main!(benches);
