//! The synthetic experiment (docs/mechanisms.md, "Error metric", §4): every mechanism at every ε on every trial of a scenario,
//! MSE of `q_selected − max_a q_a` with its standard error.
//!
//! Work is split into (mechanism, ε, chunk of trials) items run in parallel; each item sums its
//! trials in order and items are combined in a fixed order, and trial `i` of (mechanism, ε index)
//! always draws from its own stream — so the tables are bit-identical for any number of threads.

use rayon::prelude::*;
use serde::Serialize;

use crate::error::Result;
use crate::experiments::scenarios::Dataset;
use crate::mechanisms::{self, MechParams, Mechanism, Prepared, Problem};
use crate::numerics::{pearson, spearman, weighted_correlation};
use crate::rng::{name_id, Streams};

/// Trials per parallel work item.
const CHUNK: usize = 256;

/// Running mean and sum of squared deviations (Welford), combinable in a fixed order (Chan et al.).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    /// Number of values.
    pub n: u64,
    /// Their mean.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Moments {
    /// Adds one value.
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Merges `other` (the later values) into `self`.
    pub fn merge(&mut self, other: &Moments) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        let n = self.n + other.n;
        let d = other.mean - self.mean;
        self.mean += d * other.n as f64 / n as f64;
        self.m2 += other.m2 + d * d * (self.n as f64 * other.n as f64 / n as f64);
        self.n = n;
    }

    /// Standard error of the mean (sample standard deviation / √n); 0 for fewer than 2 values.
    pub fn se(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        (self.m2 / (self.n - 1) as f64 / self.n as f64).sqrt()
    }
}

/// One row of the tidy result table (scenario, mechanism, ε, mse, se, trials).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MseRow {
    /// Scenario label (`1`..`8`, `corr(t=…)`, `share1(…)`).
    pub scenario: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Whether the mechanism is ε-DP at this ε for the scenario's k (false for `rnmh`, and for
    /// `rnmh-laplace` at k > 2: it is only (k − 1)ε-DP).
    pub private: bool,
    /// The guarantee it actually has at the scenario's k (`1-DP`, `99-DP`, `not private`).
    pub guarantee: String,
    /// Privacy parameter.
    pub epsilon: f64,
    /// Mean squared error of `q_selected − q_max` over the trials.
    pub mse: f64,
    /// Its standard error.
    pub se: f64,
    /// Number of trials.
    pub trials: u64,
}

/// Correlations of a scenario's mean scores and sensitivities (docs/mechanisms.md, "Correlations").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrRow {
    /// Scenario label.
    pub scenario: String,
    /// `all`, or the group in scenarios 7 and 8.
    pub group: String,
    /// Spearman's rank correlation.
    pub spearman: f64,
    /// Pearson's correlation.
    pub pearson: f64,
    /// The weighted correlation of docs/mechanisms.md, "Correlations".
    pub weighted: f64,
}

/// The correlations of every group of `data`.
pub fn correlations(data: &Dataset) -> Vec<CorrRow> {
    data.groups
        .iter()
        .map(|g| CorrRow {
            scenario: data.scenario.label(),
            group: g.name.clone(),
            spearman: spearman(&g.mean_scores, &data.sens),
            pearson: pearson(&g.mean_scores, &data.sens),
            weighted: weighted_correlation(&g.mean_scores, &data.sens),
        })
        .collect()
}

/// Number of work units (trials × mechanisms × ε's) of one dataset, for progress bars.
pub fn work_units(data: &Dataset, mechs: usize, eps: usize) -> u64 {
    (data.trials * mechs * eps) as u64
}

/// Runs `mechs` at every ε of `eps` on every trial of `data` and returns one row per (mechanism,
/// ε), mechanisms outermost. `streams` are the selection streams; `progress` is called with the
/// number of trials done by each work item.
pub fn run_mse(
    data: &Dataset,
    mechs: &[&'static mechanisms::MechanismSpec],
    eps: &[f64],
    params: &MechParams,
    streams: &Streams,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<MseRow>> {
    // Validate and build every mechanism once (the hot path never re-checks).
    let mut built: Vec<(usize, usize, Box<dyn Mechanism>)> = Vec::new();
    for (m, spec) in mechs.iter().enumerate() {
        for (e, &epsilon) in eps.iter().enumerate() {
            built.push((m, e, spec.build(&params.with_epsilon(epsilon))?));
        }
    }
    // Surface bad data as an error before the parallel part.
    Problem::new(data.row(0), &data.sens)?;
    let scenario_salt = u64::from(name_id(&data.scenario.label()));
    let chunks = data.trials.div_ceil(CHUNK);
    let items: Vec<(usize, usize)> = (0..built.len())
        .flat_map(|c| (0..chunks).map(move |j| (c, j)))
        .collect();
    let partial: Vec<Moments> = items
        .par_iter()
        .map(|&(c, j)| {
            let (m, e, ref mech) = built[c];
            let mech_id = name_id(mechs[m].name);
            let (start, end) = (j * CHUNK, ((j + 1) * CHUNK).min(data.trials));
            let mut moments = Moments::default();
            // Fixed scenarios: one problem for every trial, prepared once per item.
            let fixed = if data.is_fixed() {
                let p = Problem::new(data.row(0), &data.sens).expect("validated above");
                Some((mech.prepare(&p), p.max_score()))
            } else {
                None
            };
            for i in start..end {
                let mut rng = streams.stream(mech_id, e as u32, scenario_salt, i as u32);
                let q = data.row(i);
                let err = match &fixed {
                    Some((prepared, max)) => q[prepared.sample(&mut rng)] - max,
                    None => {
                        let p = Problem::new(q, &data.sens).expect("finite synthetic scores");
                        let prepared: Box<dyn Prepared + '_> = mech.prepare(&p);
                        q[prepared.sample(&mut rng)] - p.max_score()
                    }
                };
                debug_assert!(err <= 0.0);
                moments.push(err * err);
            }
            progress((end - start) as u64);
            moments
        })
        .collect();
    let rows = partial
        .chunks(chunks)
        .zip(&built)
        .map(|(parts, (m, e, _))| {
            let mut total = Moments::default();
            for p in parts {
                total.merge(p);
            }
            let g = built_guarantee(&built, *m, *e, data.sens.len());
            MseRow {
                scenario: data.scenario.label(),
                mechanism: mechs[*m].name.to_string(),
                private: g.is_some_and(|g| g <= eps[*e] * (1.0 + 1e-12)),
                guarantee: match g {
                    Some(g) => format!("{}-DP", (g * 1e9).round() / 1e9),
                    None => "not private".into(),
                },
                epsilon: eps[*e],
                mse: total.mean,
                se: total.se(),
                trials: total.n,
            }
        })
        .collect();
    Ok(rows)
}

/// The ε of the guarantee of mechanism `m` at grid point `e` for k candidates (`None`: not
/// private).
fn built_guarantee(
    built: &[(usize, usize, Box<dyn Mechanism>)],
    m: usize,
    e: usize,
    k: usize,
) -> Option<f64> {
    built
        .iter()
        .find(|b| b.0 == m && b.1 == e)
        .and_then(|b| b.2.guarantee().epsilon_for(k))
}

/// `n` log-spaced values from `lo` to `hi` inclusive.
pub fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![lo];
    }
    let (a, b) = (lo.ln(), hi.ln());
    (0..n)
        .map(|i| {
            if i == 0 {
                lo
            } else if i == n - 1 {
                hi
            } else {
                (a + (b - a) * i as f64 / (n - 1) as f64).exp()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_merge_matches_sequential() {
        let xs: Vec<f64> = (0..1000).map(|i| ((i * 37) % 101) as f64 / 7.0).collect();
        let mut all = Moments::default();
        xs.iter().for_each(|&x| all.push(x));
        let mut merged = Moments::default();
        for c in xs.chunks(77) {
            let mut m = Moments::default();
            c.iter().for_each(|&x| m.push(x));
            merged.merge(&m);
        }
        assert!((all.mean - merged.mean).abs() < 1e-12);
        assert!((all.m2 - merged.m2).abs() < 1e-8 * all.m2);
    }

    #[test]
    fn log_grid_ends() {
        let g = log_grid(0.01, 16.0, 17);
        assert_eq!(g.len(), 17);
        assert_eq!(g[0], 0.01);
        assert_eq!(g[16], 16.0);
        assert!(g.windows(2).all(|w| w[0] < w[1]));
    }
}
