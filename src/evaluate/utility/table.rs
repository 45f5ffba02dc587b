//! The utility table of one or more splits: per row and ε, the mean hit@1 over the evaluated
//! users with its standard error, the paired difference to the best public baseline, the limit
//! and the verdicts.

use crate::error::{Error, Result};
use crate::model::Model;

use super::{measure, Cell, Measured, RowKind, UtilityConfig, UtilityRow, UtilityTable, Verdict};
use crate::data::HeldOutRows;
use crate::recommend::release::Release;
use crate::recommend::tuned::{mean_se, Estimate, Tuning};

/// The utility table of one split ([`measure`] then [`table`]).
pub fn evaluate(
    model: &Model,
    release: &Release,
    tuning: Option<&Tuning>,
    cal: &HeldOutRows,
    eval: &HeldOutRows,
    cfg: &UtilityConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<UtilityTable> {
    table(vec![measure(
        model, release, tuning, cal, eval, cfg, progress,
    )?])
}

/// The table of the measurements of one or more splits whose evaluated users are disjoint (the
/// folds of a cross-fitting): every mean and standard error is over all their users together;
/// a tuned row's configuration lists each split's choice.
pub fn table(parts: Vec<Measured>) -> Result<UtilityTable> {
    let first = parts
        .first()
        .ok_or_else(|| Error::Invalid("no measurements to tabulate".into()))?;
    let labels = |m: &Measured| m.rows.iter().map(|r| r.label.clone()).collect::<Vec<_>>();
    if parts
        .iter()
        .any(|p| p.epsilons != first.epsilons || labels(p) != labels(first))
    {
        return Err(Error::Invalid(
            "the splits were measured with different grids or mechanisms".into(),
        ));
    }
    let ne = first.epsilons.len();
    let users: usize = parts.iter().map(|p| p.hits.len()).sum();
    let column = |r: usize, e: usize| -> Vec<f64> {
        parts
            .iter()
            .flat_map(|p| {
                let c = p.rows[r].cols[e];
                p.hits.iter().map(move |h| h[c])
            })
            .collect()
    };
    let base: Vec<usize> = (0..first.rows.len())
        .filter(|&r| first.rows[r].kind == RowKind::Baseline)
        .collect();
    let best_of = |rows: &[usize]| -> usize {
        let mut best = (rows[0], f64::NEG_INFINITY);
        for &r in rows {
            let m = mean_se(&column(r, 0)).0;
            if m > best.1 {
                best = (r, m);
            }
        }
        best.0
    };
    let best_b = best_of(&base);
    // The free options a release offers: what a served row must not fall below.
    let free: Vec<usize> = base
        .iter()
        .copied()
        .filter(|&r| matches!(first.rows[r].mechanism.as_str(), "popular" | "heldout"))
        .collect();
    let best_f = best_of(&free);
    let base_col = column(best_b, 0);
    let free_col = column(best_f, 0);
    let mut rows = Vec::new();
    for (r, spec) in first.rows.iter().enumerate() {
        let cells = (0..ne)
            .map(|e| {
                let v = column(r, e);
                let (hit, se) = mean_se(&v);
                let diff: Vec<f64> = v.iter().zip(&base_col).map(|(a, b)| a - b).collect();
                let (dm, dse) = mean_se(&diff);
                let to_free: Vec<f64> = v.iter().zip(&free_col).map(|(a, b)| a - b).collect();
                let (fm, fse) = mean_se(&to_free);
                // Each split's estimate on its own calibration users, pooled as independent
                // means of equal weight.
                let cal: Vec<Estimate> = parts
                    .iter()
                    .filter_map(|p| p.rows[r].calibration[e])
                    .collect();
                let calibration = (!cal.is_empty()).then(|| {
                    let k = cal.len() as f64;
                    Estimate {
                        mean: cal.iter().map(|c| c.mean).sum::<f64>() / k,
                        se: cal.iter().map(|c| c.se * c.se).sum::<f64>().sqrt() / k,
                    }
                });
                let mut configs: Vec<&str> = Vec::new();
                for p in &parts {
                    let c = p.rows[r].configs[e].as_str();
                    if !configs.contains(&c) {
                        configs.push(c);
                    }
                }
                Cell {
                    hit,
                    se,
                    config: configs.join(" | "),
                    exact: spec.exact,
                    vs_baseline: dm,
                    vs_baseline_se: dse,
                    below_free: calibration.is_some() && fm < 0.0 && fm < -2.0 * fse,
                    calibration,
                }
            })
            .collect();
        rows.push(UtilityRow {
            label: spec.label.clone(),
            kind: spec.kind,
            mechanism: spec.mechanism.clone(),
            tuned: spec.tuned,
            prior: spec.prior,
            cells,
        });
    }
    // The limit, in-sample on the evaluated users.
    let n = first.heldout_counts.len();
    let counts: Vec<u64> = (0..n)
        .map(|j| parts.iter().map(|p| p.heldout_counts[j]).sum())
        .collect();
    let bf = counts.iter().copied().max().unwrap_or(0) as f64 / users.max(1) as f64;
    let limit: Vec<f64> = first
        .epsilons
        .iter()
        .map(|e| (e.exp() * bf).min(1.0))
        .collect();
    let verdicts = (0..ne)
        .map(|e| {
            let best = rows
                .iter()
                .filter(|r| r.kind == RowKind::Private)
                .max_by(|a, b| a.cells[e].hit.total_cmp(&b.cells[e].hit))
                .expect("a private row");
            let c = &best.cells[e];
            let verdict = if c.vs_baseline > 2.0 * c.vs_baseline_se && c.vs_baseline > 0.0 {
                "beats"
            } else if c.vs_baseline < -2.0 * c.vs_baseline_se && c.vs_baseline < 0.0 {
                "is below"
            } else {
                "is within noise of"
            };
            Verdict {
                epsilon: first.epsilons[e],
                best_private: format!("{} [{}]", best.label, c.config),
                hit: c.hit,
                vs_baseline: c.vs_baseline,
                vs_baseline_se: c.vs_baseline_se,
                verdict: verdict.into(),
                share_of_limit: c.hit / limit[e],
            }
        })
        .collect();
    Ok(UtilityTable {
        epsilons: first.epsilons.clone(),
        users,
        calibration_users: parts.iter().map(|p| p.calibration_users).sum(),
        best_baseline: first.rows[best_b].mechanism.clone(),
        best_free: first.rows[best_f].mechanism.clone(),
        best_fixed_in_sample: bf,
        limit,
        rows,
        verdicts,
        tunings: parts.into_iter().map(|p| p.tuning).collect(),
    })
}
