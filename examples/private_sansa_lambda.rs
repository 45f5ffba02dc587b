//! Private tuning of a model's own hyperparameter (Liu & Talwar 2019, §5.1;
//! docs/private-candidates.md, "Private tuning"): choose SANSA's L2 regularisation λ with the
//! calibration users protected.
//!
//! Data: ml-1m-implicit under the held-out-users protocol (docs/utility.md, "Protocols"): each
//! user with a train and a test item is a calibration (validation) user with probability 0.1 and
//! a test user with probability 0.1, by a keyed hash of their id (`--validation-users auto`), and
//! SANSA is fitted on everyone else. For each λ of a public grid the
//! model is fitted on the training users only, and scored on the n calibration users by
//!
//! `S_λ = Σ_u Recall@20_u(λ)`,
//!
//! the sum of each user's Recall@20 (LightGCN convention, hits in the top 20 over the user's
//! held-out items, excluding the history) of the model fitted at λ. Each user's term lies in
//! [0, 1] and the fit does not read the calibration users, so replacing one calibration user
//! (their whole history and held-out items; n is public) moves every `S_λ` by at most 1. Each
//! candidate's release `(S_λ + Lap(1/ε₀)) / n` is then ε₀-DP for that unit, and λ is chosen by
//! the selection `recsel tune --private` uses ([`PrivateTuner::select`], random stopping over
//! uniformly drawn λ); the guarantee is the library's statement of it. Only the chosen λ and its
//! noisy score are released. The test users, seen by neither the fit nor the choice, measure
//! what the choice is worth against the non-private choice (the λ with the best exact
//! calibration score).
//!
//! Run with `cargo run --release --example private_sansa_lambda [DATA_DIR] [SEED]` (default
//! `../shared/data/ml-1m-implicit`, seed 0).

use std::path::Path;

use recsel::data::heldout::{LightGcnHeldOut, ValidationUsers};
use recsel::data::load::load_lightgcn_with;
use recsel::data::Dataset;
use recsel::eval::{evaluate, Estimate};
use recsel::evaluate::tuning::private::PrivateTuner;
use recsel::model::{fit, Method, ModelParams};
use recsel::recommend::tuned::PrivateTuneParams;
use recsel::rng::Streams;

/// The public grid of λ.
pub const GRID: [f64; 8] = [10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0];
/// SANSA's factorisation and target density (docs/results.md's ml-1m-implicit runs).
pub const METHOD: Method = Method::Exact;
/// Target density of the SANSA factors.
pub const DENSITY: f64 = 0.05;
/// ε₀ of one candidate's calibration score.
pub const EPS0: f64 = 0.5;
/// Stopping probability of random stopping.
pub const GAMMA: f64 = 0.02;
/// Seed of the held-out users' draw.
pub const SPLIT_SEED: u64 = 0;

/// What the example computes.
#[derive(Debug, Clone)]
pub struct SansaLambda {
    /// Calibration users (public).
    pub calibration_users: usize,
    /// Test users.
    pub test_users: usize,
    /// Exact calibration sums `S_λ`, grid order (never printed by the example: not released).
    pub sums: Vec<f64>,
    /// Test Recall@20 (mean ± s.e.) per λ, grid order.
    pub test: Vec<Estimate>,
    /// The non-private choice: index of the largest exact calibration sum.
    pub exact_best: usize,
    /// One private choice per repetition (seeds 0, 1, …): grid index and noisy calibration
    /// Recall@20 released with it.
    pub chosen: Vec<(usize, f64)>,
    /// ε of one private choice for the calibration users (from the library).
    pub epsilon: f64,
}

/// `data` with its calibration users in the place of its test users, so the library's
/// evaluation scores them.
fn calibration_view(data: &Dataset) -> Dataset {
    let mut v = data.clone();
    v.test_input = data.validation.clone();
    v.test_target = data.validation_target.clone();
    v
}

/// Fits SANSA at every λ of [`GRID`] on ml-1m-implicit in `dir`, and makes `repetitions`
/// private choices (seeds `seed`, `seed + 1`, …) on the exact calibration sums.
pub fn run(
    dir: &Path,
    seed: u64,
    repetitions: u64,
) -> Result<SansaLambda, Box<dyn std::error::Error>> {
    let data = load_lightgcn_with(
        dir,
        "ml-1m-implicit",
        Some(LightGcnHeldOut {
            validation: ValidationUsers::Auto,
            test_users: None,
            seed: SPLIT_SEED,
            fold: None,
        }),
    )?;
    let calibration = calibration_view(&data);
    let (mut sums, mut test) = (Vec::new(), Vec::new());
    let (mut n_cal, mut n_test) = (0, 0);
    for &l2 in &GRID {
        let params = ModelParams::new(METHOD, l2, DENSITY)?;
        let (model, _) = fit(&data.train, &params, &|_| {})?;
        let c = evaluate(&model, &calibration);
        let t = evaluate(&model, &data);
        n_cal = c.users;
        n_test = t.users;
        sums.push(c.recall20_lightgcn.mean * c.users as f64);
        test.push(t.recall20_lightgcn);
    }
    let exact_best = (0..GRID.len())
        .max_by(|&a, &b| sums[a].total_cmp(&sums[b]))
        .expect("a non-empty grid");
    let tuner: PrivateTuner = PrivateTuneParams {
        eps0: EPS0,
        gamma: GAMMA,
        ..Default::default()
    }
    .check()?;
    let mut chosen = Vec::new();
    for s in seed..seed + repetitions {
        let mut rng = Streams::new(s).stream(0, 0, 0, 0);
        let c = tuner.select(&sums, n_cal, &mut rng)?;
        chosen.push((
            c.index.expect("random stopping runs at least once"),
            c.noisy_hit,
        ));
    }
    Ok(SansaLambda {
        calibration_users: n_cal,
        test_users: n_test,
        sums,
        test,
        exact_best,
        chosen,
        epsilon: tuner.statement().epsilon,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "../shared/data/ml-1m-implicit".into());
    let seed: u64 = args.next().map_or(Ok(0), |s| s.parse())?;
    let r = run(Path::new(&dir), seed, 1)?;
    let (c, noisy) = r.chosen[0];
    let grid: Vec<String> = GRID.iter().map(|l| l.to_string()).collect();
    println!(
        "SANSA {} (density {DENSITY}) on ml-1m-implicit, lambda in {{{}}}: fitted on the training \
         users, scored on {} calibration users (protected) by their summed Recall@20",
        METHOD.name(),
        grid.join(", "),
        r.calibration_users
    );
    println!(
        "private choice (seed {seed}): lambda = {}, released noisy calibration Recall@20 {noisy:.4}",
        GRID[c]
    );
    println!(
        "calibration users: ({}, 0)-DP, one user replaced (unit: a user's history and held-out \
         items, each user's Recall@20 in [0, 1]); eps0 = {EPS0} per candidate, random stopping \
         with gamma = {GAMMA}",
        r.epsilon
    );
    let line = |what: &str, i: usize| {
        println!(
            "{what}: lambda = {:>5}, test Recall@20 {:.4} ± {:.4}",
            GRID[i], r.test[i].mean, r.test[i].se
        )
    };
    println!(
        "on {} test users (seen by neither the fit nor the choice):",
        r.test_users
    );
    line("  private choice    ", c);
    line("  non-private choice", r.exact_best);
    Ok(())
}
