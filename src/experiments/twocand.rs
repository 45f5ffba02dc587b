//! Two-candidate head-to-head grids (seed 001 §V-A, figures 3, 15, 16, 17; docs/experiments.md).
//!
//! `q_1 = 0`, `q_2 = gap`, sensitivities `(Δ_1, Δ_2)` on a grid in `[0.1, 5]²`; in every cell we
//! estimate `HG(RNM, M) = P[RNM ≠ a*] − P[M ≠ a*]` (positive when M is better) by Monte Carlo, and for
//! `M = RNMH` also compute it exactly from the closed forms of docs/mechanisms.md:
//! `P_RNM(1) = ½ exp(−ε·gap/(2Δ))`, `P_RNMH(1) = exp(−ε·gap/(2Δ_1)) / (1 + Δ_2/Δ_1)`.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::mechanisms::{self, MechParams, Problem};
use crate::options::option_table;
use crate::rng::{name_id, Streams};

/// One heatmap: HG(RNM, mechanism) at (ε, gap), RS with stopping probability γ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Panel {
    /// `rnmh` or `rs`.
    pub mechanism: &'static str,
    /// γ of `rs` (ignored by `rnmh`).
    pub gamma: f64,
    /// Privacy parameter.
    pub epsilon: f64,
    /// Score gap `q_2 − q_1`.
    pub gap: f64,
    /// Row and column in the figure.
    pub row: usize,
    /// Column in the figure.
    pub col: usize,
}

impl Panel {
    /// Whether a result row is a cell of this panel.
    pub fn contains(&self, r: &HgRow) -> bool {
        r.mechanism == self.mechanism
            && r.epsilon == self.epsilon
            && r.gap == self.gap
            && (self.mechanism != "rs" || r.gamma == self.gamma)
    }

    /// Title shown above the heatmap.
    pub fn title(&self) -> String {
        let m = if self.mechanism == "rs" {
            format!("RS(gamma={})", self.gamma)
        } else {
            "RNMH (not private)".to_string()
        };
        format!("HG(RNM, {m}), eps={}, gap={}", self.epsilon, self.gap)
    }
}

/// The panels of seed 001's figure `figure` (3, 15, 16 or 17).
pub fn panels(figure: u8) -> Result<Vec<Panel>> {
    let p = |mechanism, gamma, epsilon, gap, row, col| Panel {
        mechanism,
        gamma,
        epsilon,
        gap,
        row,
        col,
    };
    let grid = |mechanism: &'static str, gamma: f64| {
        let mut v = Vec::new();
        for (r, eps) in [0.1, 1.0, 3.0].into_iter().enumerate() {
            for (c, gap) in [0.1, 1.0, 2.0, 5.0].into_iter().enumerate() {
                v.push(p(mechanism, gamma, eps, gap, r, c));
            }
        }
        v
    };
    match figure {
        3 => Ok(vec![
            p("rnmh", 0.01, 0.1, 1.0, 0, 0),
            p("rs", 0.01, 0.1, 1.0, 0, 1),
        ]),
        15 => Ok([0.5, 0.1, 0.01]
            .into_iter()
            .enumerate()
            .map(|(c, g)| p("rs", g, 0.1, 1.0, 0, c))
            .collect()),
        16 => Ok(grid("rnmh", 0.01)),
        17 => Ok(grid("rs", 0.01)),
        f => Err(Error::Invalid(format!(
            "two-candidate figures are 3, 15, 16 and 17, got {f}"
        ))),
    }
}

option_table! {
    /// The options of a two-candidate run (`recsel twocand`, a pipeline's `[twocand]` table),
    /// declared once: the flags, the table's keys and their defaults.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct TwocandOptions {
        /// Seed 001 figure: 3 (RNMH and RS_0.01), 15 (RS with γ = 0.5, 0.1, 0.01), 16 (RNMH over
        /// gap × ε), 17 (RS_0.01 over gap × ε).
        #[option(value_name = "N", choices = &["3", "15", "16", "17"], required = true,
            group = "Two candidates")]
        pub figure: u8,
        /// Grid points per sensitivity axis (linear in [delta_min, delta_max]).
        #[option(group = "Two candidates")]
        pub grid: usize = 20,
        /// Smallest sensitivity of the grid.
        #[option(value_name = "D", group = "Two candidates")]
        pub delta_min: f64 = 0.1,
        /// Largest sensitivity of the grid.
        #[option(value_name = "D", group = "Two candidates")]
        pub delta_max: f64 = 5.0,
        /// Monte Carlo trials per cell and mechanism.
        #[option(group = "Two candidates")]
        pub trials: u64 = 10_000,
        /// Seed of the random streams (default: drawn from OS entropy and reported, so the run
        /// can be repeated).
        #[option(group = "Randomness")]
        pub seed: u64,
    }
}

impl TwocandOptions {
    /// The run these options describe, every option resolved; the seed is the one given, else
    /// `entropy()` (a front end draws one and reports it). Not yet validated
    /// ([`TwocandConfig::validate`]).
    pub fn config(&self, entropy: impl FnOnce() -> u64) -> Result<TwocandConfig> {
        let figure = self.figure.ok_or_else(|| {
            Error::Invalid("a two-candidate run needs its figure: 3, 15, 16 or 17".into())
        })?;
        Ok(TwocandConfig {
            figure,
            grid: self.grid(),
            delta_min: self.delta_min(),
            delta_max: self.delta_max(),
            trials: self.trials(),
            seed: self.seed.unwrap_or_else(entropy),
        })
    }

    /// Checks the options without running them (the seed, if not given, is not drawn).
    pub fn check(&self) -> Result<()> {
        self.config(|| 0)?.validate()
    }
}

/// A two-candidate run with every option resolved ([`TwocandOptions::config`]): what the runner
/// reads and what is recorded beside the results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwocandConfig {
    /// Seed 001 figure: 3, 15, 16 or 17.
    pub figure: u8,
    /// Grid points per axis.
    pub grid: usize,
    /// Smallest sensitivity of the grid.
    pub delta_min: f64,
    /// Largest sensitivity of the grid.
    pub delta_max: f64,
    /// Monte Carlo trials per cell and mechanism.
    pub trials: u64,
    /// Seed of the random streams.
    pub seed: u64,
}

impl TwocandConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        panels(self.figure)?;
        if self.grid < 2 {
            return Err(Error::Invalid(format!(
                "grid must have at least 2 points per axis, got {}",
                self.grid
            )));
        }
        if !(self.delta_min > 0.0 && self.delta_max > self.delta_min && self.delta_max.is_finite())
        {
            return Err(Error::Invalid(format!(
                "need 0 < delta_min < delta_max, got {} and {}",
                self.delta_min, self.delta_max
            )));
        }
        crate::experiments::check_seed(self.seed)?;
        if self.trials < 2 {
            return Err(Error::Invalid(format!(
                "trials must be at least 2, got {}",
                self.trials
            )));
        }
        Ok(())
    }

    /// The sensitivity grid (linear, both ends included).
    pub fn deltas(&self) -> Vec<f64> {
        let n = self.grid;
        (0..n)
            .map(|i| self.delta_min + (self.delta_max - self.delta_min) * i as f64 / (n - 1) as f64)
            .collect()
    }
}

/// One cell of one panel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HgRow {
    /// Seed 001 figure.
    pub figure: u8,
    /// Compared mechanism (`rnmh` or `rs`).
    pub mechanism: String,
    /// γ of `rs`; NaN for `rnmh`.
    pub gamma: f64,
    /// Privacy parameter.
    pub epsilon: f64,
    /// Score gap `q_2 − q_1`.
    pub gap: f64,
    /// Sensitivity of the worse candidate (score 0).
    pub delta1: f64,
    /// Sensitivity of the better candidate (score `gap`).
    pub delta2: f64,
    /// Monte Carlo estimate of HG(RNM, M).
    pub hg: f64,
    /// Its standard error ([`se_difference`]: never 0, also when neither mechanism erred).
    pub se: f64,
    /// The exact HG(RNM, RNMH) of docs/mechanisms.md; NaN for other mechanisms.
    pub hg_exact: f64,
    /// Trials per mechanism.
    pub trials: u64,
}

/// The exact `P_RNM(output 1) − P_RNMH(output 1)` on `q = (0, gap)` (docs/mechanisms.md).
pub fn hg_rnmh_exact(epsilon: f64, gap: f64, d1: f64, d2: f64) -> f64 {
    let p_rnm = 0.5 * (-epsilon * gap / (2.0 * d1.max(d2))).exp();
    let p_rnmh = (-epsilon * gap / (2.0 * d1)).exp() / (1.0 + d2 / d1);
    p_rnm - p_rnmh
}

/// Number of work units (cells × trials × 2) for a progress bar.
pub fn work_units(cfg: &TwocandConfig) -> Result<u64> {
    Ok(panels(cfg.figure)?.len() as u64 * (cfg.grid * cfg.grid) as u64 * cfg.trials * 2)
}

/// Runs every panel of `cfg.figure`; rows ordered by panel, then Δ_2, then Δ_1.
pub fn run(cfg: &TwocandConfig, progress: &(dyn Fn(u64) + Sync)) -> Result<Vec<HgRow>> {
    cfg.validate()?;
    let panels = panels(cfg.figure)?;
    let deltas = cfg.deltas();
    let streams = Streams::new(cfg.seed);
    let mut cells = Vec::new();
    for (pi, panel) in panels.iter().enumerate() {
        for d2 in &deltas {
            for d1 in &deltas {
                cells.push((pi, panel, *d1, *d2));
            }
        }
    }
    cells
        .par_iter()
        .enumerate()
        .map(|(ci, &(pi, panel, d1, d2))| {
            hg_cell(
                cfg.figure, panel, d1, d2, cfg.trials, &streams, ci as u32, pi as u64,
            )
            .inspect(|_| progress(2 * cfg.trials))
        })
        .collect()
}

/// Standard error of the difference of two proportions `x_0/n − x_1/n` after adding one success
/// and one failure to each sample (Agresti and Caffo, "Simple and effective confidence intervals
/// for proportions and differences of proportions result from adding two successes and two
/// failures", The American Statistician 54(4), 2000). The plug-in (Wald) standard error is 0 when
/// neither sample has an event, which claims an exact estimate: at ε = 3 and gap 5 of fig 16 the
/// worse candidate wins with probability below 1e-4, 10,000 trials often see none, and a closed
/// form of 1e-5 would then lie infinitely many standard errors away. This one is never 0 and
/// agrees with the Wald value to within O(1/n) once both counts are large.
pub fn se_difference(x0: u64, x1: u64, n: u64) -> f64 {
    let m = n as f64 + 2.0;
    let v = |x: u64| {
        let p = (x as f64 + 1.0) / m;
        p * (1.0 - p) / m
    };
    (v(x0) + v(x1)).sqrt()
}

/// One cell of `panel`: `trials` selections of RNM and of the panel's mechanism on `q = (0, gap)`,
/// `Δ = (d1, d2)`. Trial `t` of mechanism `m` draws from `streams.stream(name_id(m), cell,
/// panel_index, t)`, so a cell's estimate does not depend on which other cells run.
#[allow(clippy::too_many_arguments)]
pub fn hg_cell(
    figure: u8,
    panel: &Panel,
    d1: f64,
    d2: f64,
    trials: u64,
    streams: &Streams,
    cell: u32,
    panel_index: u64,
) -> Result<HgRow> {
    let params = MechParams::default()
        .with_param("gamma", panel.gamma)
        .with_epsilon(panel.epsilon);
    let rnm = mechanisms::build("rnm", &params)?;
    let other = mechanisms::build(panel.mechanism, &params)?;
    let q = [0.0, panel.gap];
    let d = [d1, d2];
    let problem = Problem::new(&q, &d)?;
    let mut fails = [0u64; 2];
    for (m, mech) in [&rnm, &other].into_iter().enumerate() {
        let prepared = mech.prepare(&problem);
        let id = name_id(if m == 0 { "rnm" } else { panel.mechanism });
        for t in 0..trials {
            let mut rng = streams.stream(id, cell, panel_index, t as u32);
            if prepared.sample(&mut rng) != 1 {
                fails[m] += 1;
            }
        }
    }
    let n = trials as f64;
    let rnmh = panel.mechanism == "rnmh";
    Ok(HgRow {
        figure,
        mechanism: panel.mechanism.to_string(),
        gamma: if rnmh { f64::NAN } else { panel.gamma },
        epsilon: panel.epsilon,
        gap: panel.gap,
        delta1: d1,
        delta2: d2,
        hg: fails[0] as f64 / n - fails[1] as f64 / n,
        se: se_difference(fails[0], fails[1], trials),
        hg_exact: if rnmh {
            hg_rnmh_exact(panel.epsilon, panel.gap, d1, d2)
        } else {
            f64::NAN
        },
        trials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn se_of_the_difference_is_positive_without_events_and_wald_like_with_many() {
        // No event in either sample: one pseudo-event in n + 2 draws each.
        let m = 10_002.0_f64;
        let p = 1.0 / m;
        let want = (2.0 * p * (1.0 - p) / m).sqrt();
        assert!((se_difference(0, 0, 10_000) - want).abs() < 1e-18);
        // Many events: within 0.1% of the plug-in value.
        let wald = (2.0 * 0.3 * 0.7 / 1e6f64).sqrt();
        let ac = se_difference(300_000, 300_000, 1_000_000);
        assert!((ac / wald - 1.0).abs() < 1e-3, "{ac} vs {wald}");
    }

    #[test]
    fn exact_hg_sign_follows_the_larger_sensitivity() {
        // Seed 001 §V-A: RNMH beats RNM iff the better candidate has the larger sensitivity.
        assert!(hg_rnmh_exact(0.1, 1.0, 1.0, 3.0) > 0.0);
        assert!(hg_rnmh_exact(0.1, 1.0, 3.0, 1.0) < 0.0);
        assert!(hg_rnmh_exact(0.1, 1.0, 2.0, 2.0).abs() < 1e-15);
    }
}
