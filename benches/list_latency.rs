//! A list of 10 against a single top-1 answer, end to end on one request (docs/results.md, "Lists
//! of 10 over 17,769 candidates"): `Recommender::recommend` (one item) and
//! `Recommender::recommend_list` (k = 10) for the same history on one thread — score every
//! item, clip, select — with every item a candidate, in the forms serving uses: peeling `mgem`
//! and one-shot `gumbel` `em`. For each, on the release-grade `secure` path (what `recsel serve`
//! runs; there `gumbel` peels `em` on the grid, the same law) and the seeded `fast` path (where
//! `gumbel` is one pass of Gumbel noise), it prints the p50 and p99 of the per-call wall time of
//! both answers, measured side by side (the two calls alternate, user by user, so the machine's
//! load falls on both alike), their ratio, and whether p99(list of 10) ≤ 2 × p99(top-1).
//!
//! The ledger's commit (one row per answer, list or item) is the same for both and not timed.
//!
//! Usage: `cargo bench --bench list_latency [-- MODEL_DIR [USERS]]`. MODEL_DIR is a model
//! directory with its release written by `recsel fit --out` (the netflix shape: `recsel fit
//! --dataset synthetic --shape netflix --out DIR`, 17,769 items); without it the small example
//! release (1,500 items) is fitted into a temporary directory. Histories are 123 random items
//! each (the netflix shape's mean), 2,000 users by default, after 200 warm-up calls.

mod common;

use std::path::Path;
use std::time::Instant;

use recsel::mechanisms::{ListForm, MechParams};
use recsel::recommend::{user_key, RecommendConfig, Recommender};
use recsel::rng::NoiseMode;

const WARM_UP: usize = 200;
const K: usize = 10;

/// The p-quantile of sorted `t` (seconds), in milliseconds.
fn quantile(t: &[f64], p: f64) -> f64 {
    t[((t.len() - 1) as f64 * p).round() as usize] * 1e3
}

fn main() {
    let args = common::positional_args();
    let n_users: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = common::release_dir(args.first(), tmp.path());
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    let load = |mech: &str, mode: NoiseMode, form: ListForm| {
        let mut cfg = RecommendConfig::new(mech, params.clone(), mode);
        cfg.list_form = form;
        Recommender::load(Path::new(&dir), &cfg)
            .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
    };
    let probe = load("mgem", NoiseMode::Fast, ListForm::Peeling);
    let n = probe.n_items() as u32;
    let warm = WARM_UP.min(n_users);
    let users = common::random_histories(n, n_users + warm);
    println!(
        "one request on one thread: {n} items, all candidates, {n_users} users of ~123 random \
         items, eps = 1 per answer; top-1 and a list of {K} alternate user by user"
    );
    println!(
        "| mechanism, form | noise | top-1 p50 | top-1 p99 | list of {K} p50 | list of {K} p99 | \
         p50 ratio | p99 ratio | p99(list) <= 2 x p99(top-1) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|");
    for (mech, form) in [("mgem", ListForm::Peeling), ("em", ListForm::Gumbel)] {
        for (mode_name, mode) in [("secure", NoiseMode::Secure), ("fast", NoiseMode::Fast)] {
            let rec = load(mech, mode, form);
            rec.top_k(K).expect("the list mechanism");
            let mut draws = rec.draws_seeded(7).expect("a random source");
            let mut scratch = rec.scratch();
            let (mut one, mut list) = (Vec::new(), Vec::new());
            for (i, h) in users.iter().enumerate() {
                let key = user_key(&i.to_string());
                let t = Instant::now();
                let pick = rec
                    .recommend(h, key, &mut draws, &mut scratch)
                    .expect("a recommendation");
                let d1 = t.elapsed().as_secs_f64();
                std::hint::black_box(pick);
                let t = Instant::now();
                let l = rec
                    .recommend_list(h, K, key, &mut draws, &mut scratch)
                    .expect("a list");
                let dk = t.elapsed().as_secs_f64();
                assert_eq!(l.len(), K);
                std::hint::black_box(l);
                if i >= warm {
                    one.push(d1);
                    list.push(dk);
                }
            }
            one.sort_by(f64::total_cmp);
            list.sort_by(f64::total_cmp);
            let (o50, o99) = (quantile(&one, 0.5), quantile(&one, 0.99));
            let (l50, l99) = (quantile(&list, 0.5), quantile(&list, 0.99));
            println!(
                "| {mech}, {form} | {mode_name} | {o50:.3} ms | {o99:.3} ms | {l50:.3} ms | \
                 {l99:.3} ms | {:.2}x | {:.2}x | {} |",
                l50 / o50,
                l99 / o99,
                if l99 <= 2.0 * o99 { "met" } else { "MISSED" }
            );
        }
    }
}
