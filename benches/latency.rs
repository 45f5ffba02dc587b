//! Latency of one private recommendation (docs/deployment.md, "Latency"): `Recommender::recommend`
//! for one history on one thread — score every item, clip, select — with every item a candidate
//! (the default policy) and, for comparison, the paper's `history-top:500`. For each mechanism and
//! noise mode (seeded floating-point `fast`, release-grade `secure`) it prints the p50, p99, max
//! and mean of the per-call wall time over the users, and the scoring alone (`Model::score_into`)
//! for the same histories, so that the selection's share is visible.
//!
//! Usage: `cargo bench --bench latency [-- MODEL_DIR [USERS [MECH,... [POLICY,...]]]]`. MODEL_DIR is a model directory
//! with its release artifact written by `recsel fit --out` (the netflix shape:
//! `recsel fit --dataset synthetic --shape netflix --out DIR`, 17,769 items); without it the small
//! example release (1,500 items) is fitted into a temporary directory. Histories are 123 random
//! items each (the netflix shape's mean), 2,000 users by default, after 200 warm-up calls; the
//! mechanisms are mgem, rnm and em, the policies `all` and `history-top:500`, unless listed.
//! Each line gives the wall clock and the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) per call:
//! on a shared machine the wall clock includes the time the thread waited for a core, the CPU
//! time does not, so the CPU time is the cost of a call on one core of its own.

mod common;

use std::path::Path;
use std::time::Instant;

use recsel::mechanisms::MechParams;
use recsel::recommend::{user_key, RecommendConfig, Recommender};
use recsel::rng::NoiseMode;
use recsel::scoring::CandidatePolicy;

const WARM_UP: usize = 200;

/// The calling thread's CPU time, in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Wall-clock and CPU-time samples of one measured loop.
#[derive(Default)]
struct Times {
    wall: Vec<f64>,
    cpu: Vec<f64>,
}

impl Times {
    /// Times `f`.
    fn time<T>(&mut self, record: bool, f: impl FnOnce() -> T) -> T {
        let (w, c) = (Instant::now(), thread_cpu());
        let out = f();
        let (dc, dw) = (thread_cpu() - c, w.elapsed().as_secs_f64());
        if record {
            self.wall.push(dw);
            self.cpu.push(dc);
        }
        out
    }

    fn print(self, label: &str) {
        println!("{label:<34} wall {}", summary(self.wall));
        println!("{:<34} cpu  {}", "", summary(self.cpu));
    }
}

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
    let args = common::positional_args();
    let n_users: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let mechs: Vec<String> = args
        .get(2)
        .map_or("mgem,rnm,em", String::as_str)
        .split(',')
        .map(String::from)
        .collect();
    let policies: Vec<CandidatePolicy> = args
        .get(3)
        .map_or("all,history-top:500", String::as_str)
        .split(',')
        .map(|p| CandidatePolicy::parse(p).expect("a candidate policy"))
        .collect();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = common::release_dir(args.first(), tmp.path());
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
    let warm = WARM_UP.min(n_users);
    let users = common::random_histories(n, n_users + warm);
    println!(
        "one recommendation on one thread: {} items, {n_users} users of ~123 random items, eps = 1",
        n
    );
    // Scoring alone, through the same scratch the recommender uses.
    {
        let mut scratch = probe.scratch();
        let mut t = Times::default();
        for (i, h) in users.iter().enumerate() {
            let c = t.time(i >= warm, || probe.candidates(h, &mut scratch));
            std::hint::black_box(&c);
        }
        t.print("score + clip (all, no selection)");
    }
    for policy in policies {
        for mech in mechs.iter().map(String::as_str) {
            for (mode_name, mode) in [("fast", NoiseMode::Fast), ("secure", NoiseMode::Secure)] {
                let rec = load(mech, mode, policy.clone());
                let mut draws = rec.draws_seeded(7).expect("a random source");
                let mut scratch = rec.scratch();
                let mut t = Times::default();
                for (i, h) in users.iter().enumerate() {
                    let key = user_key(&i.to_string());
                    let pick = t.time(i >= warm, || {
                        rec.recommend(h, key, &mut draws, &mut scratch)
                            .expect("a recommendation")
                    });
                    std::hint::black_box(pick);
                }
                t.print(&format!("{mech} {mode_name} {policy}"));
            }
        }
    }
}
