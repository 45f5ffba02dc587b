//! Which candidates a mechanism picks on a fixed selection problem: seed 001 fig 6 e–h, "candidates
//! weighted by how likely the specified mechanism is to choose that candidate (with ε = 0.05)",
//! for GEM and mGEM on the two exceptional scenarios (docs/experiments.md, "Exceptional scenarios").
//!
//! Each candidate's share of picks is estimated from the mechanism's own sampler over the
//! scenario's trials, so the figure shows what the code does; `tests/figures.rs` checks the counts
//! against the exact output law of the transformed scores.

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::experiments::scenarios::Dataset;
use crate::mechanisms::{MechParams, MechanismSpec, Problem};
use crate::rng::{name_id, Streams};

/// ε of seed 001 fig 6 e–h.
pub const FIG6_PICKS_EPSILON: f64 = 0.05;

/// Label of the stream family of the pick counts, apart from the MSE runs' streams (so adding the
/// counts changes no MSE) and from the data streams.
const PICKS_STREAMS: u64 = 0xf16_6e40;

/// Trials per parallel work item.
const CHUNK: u64 = 1024;

/// How often one mechanism picked one candidate of a fixed scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PickRow {
    /// Scenario label (`fig6-1`, `fig6-2`).
    pub scenario: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Privacy parameter.
    pub epsilon: f64,
    /// Candidate index (0-based, in the scenario's order).
    pub candidate: usize,
    /// Its score.
    pub score: f64,
    /// Its sensitivity Δ_a.
    pub sensitivity: f64,
    /// Number of trials that picked it.
    pub picks: u64,
    /// Number of trials.
    pub trials: u64,
    /// `picks / trials`.
    pub share: f64,
}

/// Counts how often `spec` at `epsilon` picks each candidate of `(q, d)` in `trials` draws; draw
/// `i` uses `streams.stream(name_id(spec.name), 0, salt, i)`, so the counts do not depend on the
/// number of threads.
pub fn pick_counts(
    q: &[f64],
    d: &[f64],
    spec: &MechanismSpec,
    params: &MechParams,
    trials: u64,
    streams: &Streams,
    salt: u64,
) -> Result<Vec<u64>> {
    if trials > u64::from(u32::MAX) {
        return Err(Error::Invalid(format!(
            "at most 2^32 - 1 trials, got {trials}"
        )));
    }
    let mech = spec.build(params)?;
    let problem = Problem::new(q, d)?;
    let prepared = mech.prepare(&problem);
    let id = name_id(spec.name);
    let k = q.len();
    let chunks: Vec<u64> = (0..trials.div_ceil(CHUNK)).collect();
    let partial: Vec<Vec<u64>> = chunks
        .par_iter()
        .map(|&j| {
            let mut counts = vec![0u64; k];
            for i in j * CHUNK..((j + 1) * CHUNK).min(trials) {
                let mut rng = streams.stream(id, 0, salt, i as u32);
                counts[prepared.sample(&mut rng)] += 1;
            }
            counts
        })
        .collect();
    let mut counts = vec![0u64; k];
    for p in partial {
        for (c, x) in counts.iter_mut().zip(p) {
            *c += x;
        }
    }
    Ok(counts)
}

/// The pick shares of every mechanism of `specs` at `epsilon` on the fixed scenario `data`, over
/// `data.trials` draws from the streams derived from `streams` for this purpose.
pub fn picks(
    data: &Dataset,
    specs: &[&'static MechanismSpec],
    params: &MechParams,
    epsilon: f64,
    streams: &Streams,
) -> Result<Vec<PickRow>> {
    if !data.is_fixed() {
        return Err(Error::Invalid(format!(
            "pick shares need a fixed scenario, {} draws its scores per trial",
            data.scenario.label()
        )));
    }
    let q = data.row(0);
    let family = streams.derive(PICKS_STREAMS);
    let salt = u64::from(name_id(&data.scenario.label()));
    let trials = data.trials as u64;
    let mut rows = Vec::with_capacity(specs.len() * q.len());
    for spec in specs {
        let counts = pick_counts(
            q,
            &data.sens,
            spec,
            &params.with_epsilon(epsilon),
            trials,
            &family,
            salt,
        )?;
        rows.extend(counts.iter().enumerate().map(|(a, &c)| PickRow {
            scenario: data.scenario.label(),
            mechanism: spec.name.to_string(),
            epsilon,
            candidate: a,
            score: q[a],
            sensitivity: data.sens[a],
            picks: c,
            trials,
            share: c as f64 / trials as f64,
        }));
    }
    Ok(rows)
}
