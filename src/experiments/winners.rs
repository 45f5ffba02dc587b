//! Bounds as a chooser (an extension; seed 001 appendix J proposes utility bounds as heuristics
//! but gives no numbers): for every (scenario, ε) with GEM and mGEM results, which of the two the
//! Spearman rule and the bound rule pick, against the empirically better one.
//!
//! * Spearman rule (the paper's, and `cgem`'s default bit): mGEM when `spearman(q, Δ) ≥ 0`.
//! * Bound rule (`cgem --chooser bound`): mGEM when its utility bound at ε is at least GEM's
//!   (`crate::numerics::bounds`).
//!
//! Scores vary between trials in most scenarios, so each rule decides per trial and the cell's pick
//! is the majority; the shares are reported too. Also the three-way pick of the bound rule
//! (the best of the RNM, GEM and mGEM bounds) against the best of the three MSEs.

use rayon::prelude::*;
use serde::Serialize;

use crate::experiments::scenarios::Dataset;
use crate::experiments::synthetic::MseRow;
use crate::numerics::bounds::{utility_bounds_unchecked, GemBoundReading};
use crate::numerics::spearman;

/// One (scenario, ε) cell of the evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WinnerRow {
    /// Scenario label.
    pub scenario: String,
    /// Privacy parameter.
    pub epsilon: f64,
    /// MSE of GEM.
    pub mse_gem: f64,
    /// MSE of mGEM.
    pub mse_mgem: f64,
    /// Standard error of the difference (independent streams: the root sum of squares).
    pub se_diff: f64,
    /// `gem` or `mgem`: the lower MSE.
    pub empirical: String,
    /// Whether the MSEs differ by more than 2 standard errors of the difference.
    pub separated: bool,
    /// Share of trials where Spearman ≥ 0 (the Spearman rule picks mGEM).
    pub spearman_share_mgem: f64,
    /// The Spearman rule's majority pick.
    pub spearman_pick: String,
    /// Share of trials where mGEM's bound ≥ GEM's.
    pub bound_share_mgem: f64,
    /// The bound rule's majority pick.
    pub bound_pick: String,
    /// `rnm`, `gem` or `mgem`: the lowest MSE of the three (empty without an RNM row).
    pub empirical3: String,
    /// The bound rule's majority three-way pick (highest bound).
    pub bound_pick3: String,
}

fn mse_of<'a>(rows: &'a [MseRow], scenario: &str, mech: &str, eps: f64) -> Option<&'a MseRow> {
    rows.iter()
        .find(|r| r.scenario == scenario && r.mechanism == mech && r.epsilon == eps)
}

/// The evaluation for every dataset and ε that has both `gem` and `mgem` rows; `beta` as the run's.
pub fn evaluate(datasets: &[Dataset], rows: &[MseRow], beta: f64) -> Vec<WinnerRow> {
    let mut out = Vec::new();
    for d in datasets {
        let label = d.scenario.label();
        let n_rows = if d.is_fixed() { 1 } else { d.trials };
        let sp_mgem: Vec<bool> = (0..n_rows)
            .into_par_iter()
            .map(|i| spearman(d.row(i), &d.sens) >= 0.0)
            .collect();
        let sp_share = sp_mgem.iter().filter(|&&b| b).count() as f64 / n_rows as f64;
        let mut eps: Vec<f64> = rows
            .iter()
            .filter(|r| r.scenario == label && r.mechanism == "gem")
            .map(|r| r.epsilon)
            .collect();
        eps.dedup();
        for e in eps {
            let (Some(g), Some(m)) = (
                mse_of(rows, &label, "gem", e),
                mse_of(rows, &label, "mgem", e),
            ) else {
                continue;
            };
            let picks: Vec<(bool, &'static str)> = (0..n_rows)
                .into_par_iter()
                .map(|i| {
                    let b =
                        utility_bounds_unchecked(d.row(i), &d.sens, e, beta, GemBoundReading::Full);
                    (b.mgem >= b.gem, b.best_mechanism())
                })
                .collect();
            let bound_share = picks.iter().filter(|p| p.0).count() as f64 / n_rows as f64;
            let mut votes = [("rnm", 0usize), ("gem", 0), ("mgem", 0)];
            for (_, name) in &picks {
                if let Some(v) = votes.iter_mut().find(|v| v.0 == *name) {
                    v.1 += 1;
                }
            }
            let bound_pick3 = votes
                .iter()
                .fold(votes[0], |best, v| if v.1 > best.1 { *v } else { best })
                .0;
            let empirical3 = match mse_of(rows, &label, "rnm", e) {
                Some(r) => [("rnm", r.mse), ("gem", g.mse), ("mgem", m.mse)]
                    .iter()
                    .fold(
                        ("rnm", f64::INFINITY),
                        |best, v| {
                            if v.1 < best.1 {
                                *v
                            } else {
                                best
                            }
                        },
                    )
                    .0
                    .to_string(),
                None => String::new(),
            };
            let se_diff = (g.se * g.se + m.se * m.se).sqrt();
            let pick = |share: f64| if share >= 0.5 { "mgem" } else { "gem" }.to_string();
            out.push(WinnerRow {
                scenario: label.clone(),
                epsilon: e,
                mse_gem: g.mse,
                mse_mgem: m.mse,
                se_diff,
                empirical: if m.mse <= g.mse { "mgem" } else { "gem" }.into(),
                separated: (g.mse - m.mse).abs() > 2.0 * se_diff,
                spearman_share_mgem: sp_share,
                spearman_pick: pick(sp_share),
                bound_share_mgem: bound_share,
                bound_pick: pick(bound_share),
                empirical3,
                bound_pick3: bound_pick3.to_string(),
            });
        }
    }
    out
}
