//! Why GEM gains so much on real data when the scores are not clipped (docs/real-data.md, "Why
//! GEM gains without clipping").
//!
//! For every test user of a LightGCN data set and the model a finished `recsel select` run saved,
//! it rebuilds the user's top candidates with their raw model scores (the same sensitivity pass as
//! `select`: percentiles over all test users), marks each candidate whose raw score lies above its
//! item's p99 or below its p1, and runs GEM, mGEM, RNM and `random` (the baseline) on the
//! unclipped and on the clipped scores. Per (mechanism, scores, ε) it prints the share of picks
//! above / inside / below the range, the share that picked the user's raw top candidate or an
//! item whose Δ_j is at the floor, the MSE and the part of the MSE that comes from each kind of
//! pick (the three parts add up to the MSE).
//!
//! ```text
//! recsel select --format lightgcn --path ../shared/data/gowalla --method icf --l2 20 \
//!     --density 0.0005 --seed 1 --out out/gowalla
//! cargo run --release --example gem_clipping -- ../shared/data/gowalla out/gowalla/model
//! ```
//!
//! Optional further arguments: the ε list (default `0.01,1,16`), trials per user (default 10) and
//! the seed (default 1).

use std::path::PathBuf;

use rayon::prelude::*;
use recsel::data::{load_dataset, DataSource, Format};
use recsel::mechanisms::{self, MechParams, Problem};
use recsel::rng::{name_id, Streams};
use recsel::scoring::{
    item_sensitivities_with_candidates, ModelScorer, SensitivityConfig, UserScorer,
};

/// Where a candidate's raw score lies relative to its item's [p1, p99].
const KINDS: [&str; 3] = ["above p99", "inside", "below p1"];

/// Sums over the users of one (mechanism, scores, ε) cell.
#[derive(Debug, Clone, Default)]
struct Cell {
    picks: [u64; 3],
    sq_err: [f64; 3],
    top: u64,
    floor: u64,
    n: u64,
}

impl Cell {
    fn add(&mut self, o: &Cell) {
        for k in 0..3 {
            self.picks[k] += o.picks[k];
            self.sq_err[k] += o.sq_err[k];
        }
        self.top += o.top;
        self.floor += o.floor;
        self.n += o.n;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err("usage: gem_clipping DATA_DIR MODEL_DIR [EPS_LIST] [TRIALS] [SEED]".into());
    }
    let path = PathBuf::from(&args[0]);
    let model_dir = PathBuf::from(&args[1]);
    let eps: Vec<f64> = args
        .get(2)
        .map_or("0.01,1,16", |s| s.as_str())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let trials: u32 = args.get(3).map_or(Ok(10), |s| s.parse())?;
    let seed: u64 = args.get(4).map_or(Ok(1), |s| s.parse())?;
    let top = 500;

    let source = DataSource::Path {
        format: Format::LightGcn,
        path,
        columns: None,
    };
    let data = load_dataset(&source, 42)?;
    let (model, _) = recsel::model::io::load(&model_dir)?;
    let scorer = ModelScorer::new(&model, &data.test_input);
    let (sens, cache) =
        item_sensitivities_with_candidates(&scorer, &SensitivityConfig::default(), top, &|_| {});
    let users = scorer.n_users();

    // Where the candidates lie, and by how many of its own Δ the raw top candidate exceeds p99.
    let (mut kinds, mut excess, mut floor) = ([0u64; 3], Vec::with_capacity(users), 0u64);
    for u in 0..users {
        let (items, raw) = cache.get(u).expect("every user is in the cache");
        for (&j, &s) in items.iter().zip(raw) {
            kinds[kind(&sens, j, s)] += 1;
            floor += u64::from(at_floor(&sens, j));
        }
        if let (Some(&j), Some(&s)) = (items.first(), raw.first()) {
            let j = j as usize;
            excess.push((s - sens.upper[j]) / sens.delta[j]);
        }
    }
    let total: u64 = kinds.iter().sum();
    println!(
        "{} test users, {total} candidates: {}; sensitivity at the floor {:.1}%",
        users,
        KINDS
            .iter()
            .zip(kinds)
            .map(|(k, c)| format!("{k} {:.1}%", 100.0 * c as f64 / total as f64))
            .collect::<Vec<_>>()
            .join(", "),
        100.0 * floor as f64 / total as f64
    );
    excess.sort_by(f64::total_cmp);
    let q = |p: f64| excess[((excess.len() - 1) as f64 * p).round() as usize];
    let above = excess.iter().filter(|&&x| x > 0.0).count();
    println!(
        "raw top candidate above its p99 for {:.1}% of the users; (score - p99) / Δ of it: \
         quartiles {:.2} / {:.2} / {:.2}, 90% {:.2}",
        100.0 * above as f64 / excess.len() as f64,
        q(0.25),
        q(0.5),
        q(0.75),
        q(0.9)
    );

    let streams = Streams::new(seed);
    println!();
    println!(
        "| mechanism | scores | ε | picks above / inside / below | picks of the raw top | \
         picks at the Δ floor | MSE | MSE from picks above / inside / below |"
    );
    println!("|---|---|---:|---|---:|---:|---:|---|");
    for name in ["gem", "mgem", "rnm", "random"] {
        for clip in [false, true] {
            for (e, &epsilon) in eps.iter().enumerate() {
                let mech = mechanisms::build(name, &MechParams::default().with_epsilon(epsilon))?;
                let id = name_id(name);
                let cell = (0..users)
                    .into_par_iter()
                    .map(|u| {
                        let (items, raw) = cache.get(u).expect("every user is in the cache");
                        let q: Vec<f64> = items
                            .iter()
                            .zip(raw)
                            .map(|(&j, &s)| if clip { sens.clip(j as usize, s) } else { s })
                            .collect();
                        let d: Vec<f64> = items.iter().map(|&j| sens.delta[j as usize]).collect();
                        let mut c = Cell::default();
                        if q.is_empty() {
                            return c;
                        }
                        let problem = Problem::new(&q, &d).expect("finite scores");
                        let best = problem.max_score();
                        let prepared = mech.prepare(&problem);
                        for t in 0..trials {
                            // The same stream for both score versions: the difference is the
                            // clipping, not the draws.
                            let mut rng = streams.stream(id, e as u32, u as u64, t);
                            let a = prepared.sample(&mut rng);
                            let k = kind(&sens, items[a], raw[a]);
                            let err = q[a] - best;
                            c.picks[k] += 1;
                            c.sq_err[k] += err * err;
                            c.top += u64::from(a == 0);
                            c.floor += u64::from(at_floor(&sens, items[a]));
                            c.n += 1;
                        }
                        c
                    })
                    .reduce(Cell::default, |mut a, b| {
                        a.add(&b);
                        a
                    });
                let n = cell.n as f64;
                let mse: f64 = cell.sq_err.iter().sum::<f64>() / n;
                println!(
                    "| {name} | {} | {epsilon} | {} | {:.1}% | {:.1}% | {mse:.3e} | {} |",
                    if clip { "clipped" } else { "raw" },
                    cell.picks
                        .iter()
                        .map(|&p| format!("{:.1}%", 100.0 * p as f64 / n))
                        .collect::<Vec<_>>()
                        .join(" / "),
                    100.0 * cell.top as f64 / n,
                    100.0 * cell.floor as f64 / n,
                    cell.sq_err
                        .iter()
                        .map(|&s| format!("{:.2e}", s / n))
                        .collect::<Vec<_>>()
                        .join(" / "),
                );
            }
        }
    }
    Ok(())
}

/// 0 above p99, 1 inside [p1, p99], 2 below p1 (by the raw score).
fn kind(sens: &recsel::scoring::Sensitivities, j: u32, raw: f64) -> usize {
    let j = j as usize;
    if raw > sens.upper[j] {
        0
    } else if raw < sens.lower[j] {
        2
    } else {
        1
    }
}

/// Whether item j's spread is 0, so that its Δ_j is the floor 1e-6 (docs/real-data.md).
fn at_floor(sens: &recsel::scoring::Sensitivities, j: u32) -> bool {
    let j = j as usize;
    sens.upper[j] - sens.lower[j] <= 0.0
}
