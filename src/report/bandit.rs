//! Outputs of `recsel bandit` (seed 001 figure 14; `docs/bandit.md`): tidy tables and the four
//! panels of figure 14 as PNGs.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::error::Result;
use crate::experiments::bandit::{
    ArmPoint, BanditConfig, BanditResults, CurvePoint, ORACLE_SUFFIX,
};
use crate::io::ensure_dir;
use crate::report::plot::{err, mech_color, render, Area, FONT};
use crate::report::table::{Table, Values};
use crate::report::Resolved;

/// Colour of a policy: mechanisms as in every other plot, the baselines their own.
pub fn policy_color(name: &str) -> RGBColor {
    match name.strip_suffix(ORACLE_SUFFIX).unwrap_or(name) {
        "ucb" => RGBColor(200, 0, 0),
        "ucb1" => RGBColor(250, 110, 110),
        "thompson" => RGBColor(255, 0, 255),
        "private-greedy" => RGBColor(0, 110, 110),
        m => mech_color(m),
    }
}

/// Policy names in first-seen order.
fn order<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// The summary table: one row per policy with its budget and results.
pub fn summary_table(res: &BanditResults) -> Table {
    let s = &res.summaries;
    let f = |g: &dyn Fn(&crate::experiments::bandit::PolicySummary) -> f64| {
        Values::F64(s.iter().map(g).collect())
    };
    let acc = |g: fn(&crate::experiments::bandit::Accounting) -> f64| {
        Values::F64(
            s.iter()
                .map(|r| r.accounting.as_ref().map_or(f64::NAN, g))
                .collect(),
        )
    };
    Table::default()
        .with(
            "policy",
            Values::Str(s.iter().map(|r| r.policy.clone()).collect()),
        )
        .with(
            "private",
            Values::Bool(s.iter().map(|r| r.private).collect()),
        )
        .with(
            "oracle_stats",
            Values::Bool(s.iter().map(|r| r.oracle_stats).collect()),
        )
        .with("epsilon_total", acc(|a| a.epsilon_total))
        .with("epsilon_event", acc(|a| a.epsilon_event))
        .with("eps_mean_per_arm", acc(|a| a.eps_mean_per_arm))
        .with("eps_quantile_per_pair", acc(|a| a.eps_quantile_per_pair))
        .with("eps_select_per_step", acc(|a| a.eps_select_per_step))
        .with("final_reward_mean", f(&|r| r.final_reward_mean))
        .with("final_reward_se", f(&|r| r.final_reward_se))
        .with("regret_mean", f(&|r| r.regret_mean))
        .with("regret_se", f(&|r| r.regret_se))
        .with("reward_after_shift_mean", f(&|r| r.reward_after_shift_mean))
        .with("reward_after_shift_se", f(&|r| r.reward_after_shift_se))
        .with("best_share_after_shift", f(&|r| r.best_share_after_shift))
        .with("adapt_steps_mean", f(&|r| r.adapt_steps_mean))
        .with("quantile_pairs_mean", f(&|r| r.quantile_pairs_mean))
        .with(
            "runs",
            Values::U64(s.iter().map(|r| u64::from(r.runs)).collect()),
        )
}

/// Cumulative reward and regret over time (downsampled), mean and 95% band per policy.
pub fn curves_table(rows: &[CurvePoint]) -> Table {
    let f = |g: fn(&CurvePoint) -> f64| Values::F64(rows.iter().map(g).collect());
    Table::default()
        .with(
            "policy",
            Values::Str(rows.iter().map(|r| r.policy.clone()).collect()),
        )
        .with("t", Values::U64(rows.iter().map(|r| r.t).collect()))
        .with("reward_mean", f(|r| r.reward_mean))
        .with("reward_lo", f(|r| r.reward_lo))
        .with("reward_hi", f(|r| r.reward_hi))
        .with("regret_mean", f(|r| r.regret_mean))
        .with("regret_lo", f(|r| r.regret_lo))
        .with("regret_hi", f(|r| r.regret_hi))
}

/// Per-arm estimates (means, quantiles) and pulls over time against the truth.
pub fn arms_table(rows: &[ArmPoint]) -> Table {
    let f = |g: fn(&ArmPoint) -> f64| Values::F64(rows.iter().map(g).collect());
    Table::default()
        .with(
            "policy",
            Values::Str(rows.iter().map(|r| r.policy.clone()).collect()),
        )
        .with("t", Values::U64(rows.iter().map(|r| r.t).collect()))
        .with(
            "arm",
            Values::U64(rows.iter().map(|r| r.arm as u64).collect()),
        )
        .with("mean_est", f(|r| r.mean_est))
        .with("mean_est_run0", f(|r| r.mean_est_run0))
        .with("q_lo", f(|r| r.q_lo))
        .with("q_hi", f(|r| r.q_hi))
        .with("q_lo_run0", f(|r| r.q_lo_run0))
        .with("q_hi_run0", f(|r| r.q_hi_run0))
        .with("pulls_mean", f(|r| r.pulls_mean))
        .with("true_mean", f(|r| r.true_mean))
        .with("true_q_lo", f(|r| r.true_q_lo))
        .with("true_q_hi", f(|r| r.true_q_hi))
}

/// One row per (policy, run).
pub fn runs_table(res: &BanditResults) -> Table {
    let r = &res.runs;
    Table::default()
        .with(
            "policy",
            Values::Str(r.iter().map(|x| x.policy.clone()).collect()),
        )
        .with(
            "run",
            Values::U64(r.iter().map(|x| u64::from(x.run)).collect()),
        )
        .with(
            "final_reward",
            Values::F64(r.iter().map(|x| x.final_reward).collect()),
        )
        .with("regret", Values::F64(r.iter().map(|x| x.regret).collect()))
        .with(
            "reward_after_shift",
            Values::F64(r.iter().map(|x| x.reward_after_shift).collect()),
        )
        .with(
            "quantile_pairs",
            Values::U64(r.iter().map(|x| x.quantile_pairs).collect()),
        )
}

/// Writes every output of a bandit run into `dir`: `config.{json,toml}`,
/// `bandit_summary`, `bandit_curves`, `bandit_arms`, `bandit_runs` (CSV and Parquet) and
/// `fig14a.png` … `fig14d.png` (with more than two arms, `fig14-arm<a>.png` for the others).
pub fn write_bandit(dir: &Path, cfg: &BanditConfig, res: &BanditResults) -> Result<Vec<PathBuf>> {
    ensure_dir(dir)?;
    let mut resolved = cfg.clone();
    resolved.policies = cfg.policy_names()?.join(",");
    let mut written = Resolved::new("bandit", &resolved).write(dir)?;
    written.extend(summary_table(res).write(dir, "bandit_summary")?);
    written.extend(curves_table(&res.curves).write(dir, "bandit_curves")?);
    written.extend(arms_table(&res.arm_points).write(dir, "bandit_arms")?);
    written.extend(runs_table(res).write(dir, "bandit_runs")?);
    let p = dir.join("fig14a.png");
    cumulative_png(&p, cfg, res)?;
    written.push(p);
    let p = dir.join("fig14b.png");
    means_png(&p, cfg, res)?;
    written.push(p);
    let k = cfg.arms.len();
    for a in 0..k {
        let p = match a {
            0 => dir.join("fig14c.png"),
            1 => dir.join("fig14d.png"),
            _ => dir.join(format!("fig14-arm{a}.png")),
        };
        if quantiles_png(&p, cfg, res, a)? {
            written.push(p);
        }
    }
    Ok(written)
}

fn legend(area: &Area<'_>, names: &[String], title: &str) -> Result<()> {
    area.draw(&Text::new(
        title.to_string(),
        (10, 40),
        (FONT, 16).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    for (i, m) in names.iter().enumerate() {
        let y = 65 + 21 * i as i32;
        let c = policy_color(m);
        if m.ends_with(ORACLE_SUFFIX) {
            for (x0, x1) in [(10, 20), (28, 40)] {
                area.draw(&PathElement::new(
                    [(x0, y + 7), (x1, y + 7)],
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            }
        } else {
            area.draw(&PathElement::new(
                [(10, y + 7), (40, y + 7)],
                c.stroke_width(3),
            ))
            .map_err(err)?;
        }
        area.draw(&Text::new(m.clone(), (46, y), (FONT, 14).into_font()))
            .map_err(err)?;
    }
    Ok(())
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(1e-9);
    (lo - pad, hi + pad)
}

/// Fig 14a: cumulative reward (left) and cumulative regret against the oracle arm (right) per
/// policy, mean over runs with the 95% band, the shift marked.
fn cumulative_png(path: &Path, cfg: &BanditConfig, res: &BanditResults) -> Result<()> {
    let names = order(res.curves.iter().map(|c| c.policy.as_str()));
    let t_max = cfg.horizon as f64;
    render(path, (1500, 620), |root| {
        let (main, leg) = root.split_horizontally(1270);
        let (left, right) = main.split_horizontally(635);
        for (area, what) in [(&left, 0), (&right, 1)] {
            let val = |c: &CurvePoint| match what {
                0 => (c.reward_mean, c.reward_lo, c.reward_hi),
                _ => (c.regret_mean, c.regret_lo, c.regret_hi),
            };
            let (ylo, yhi) = range(res.curves.iter().flat_map(|c| {
                let (m, l, h) = val(c);
                [m, l, h]
            }));
            let caption = if what == 0 {
                format!(
                    "(a) cumulative reward, {} runs (95% band), shift at t = {}",
                    cfg.runs, cfg.shift
                )
            } else {
                "cumulative regret against the oracle arm".to_string()
            };
            let mut chart = ChartBuilder::on(area)
                .caption(caption, (FONT, 16))
                .margin(8)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..t_max, ylo..yhi)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("step t")
                .y_desc(if what == 0 {
                    "cumulative reward"
                } else {
                    "cumulative regret"
                })
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.0}"))
                .label_style((FONT, 13))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            let s = cfg.shift as f64;
            chart
                .draw_series(DashedLineSeries::new(
                    [(s, ylo), (s, yhi)],
                    6,
                    4,
                    RGBColor(120, 120, 120).stroke_width(1),
                ))
                .map_err(err)?;
            for n in &names {
                let pts: Vec<&CurvePoint> = res.curves.iter().filter(|c| &c.policy == n).collect();
                let c = policy_color(n);
                let mut band: Vec<(f64, f64)> =
                    pts.iter().map(|p| (p.t as f64, val(p).2)).collect();
                band.extend(pts.iter().rev().map(|p| (p.t as f64, val(p).1)));
                chart
                    .draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))
                    .map_err(err)?;
                let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.t as f64, val(p).0)).collect();
                if n.ends_with(ORACLE_SUFFIX) {
                    chart
                        .draw_series(DashedLineSeries::new(line, 7, 5, c.stroke_width(2)))
                        .map_err(err)?;
                } else {
                    chart
                        .draw_series(LineSeries::new(line, c.stroke_width(2)))
                        .map_err(err)?;
                }
            }
        }
        legend(&leg, &names, "policy")
    })
}

/// Policies that release private means, for fig 14b (oracle twins and exact learners left out).
fn private_mean_policies(res: &BanditResults) -> Vec<String> {
    res.summaries
        .iter()
        .filter(|s| {
            s.accounting
                .as_ref()
                .is_some_and(|a| a.eps_mean_per_arm > 0.0)
        })
        .map(|s| s.policy.clone())
        .collect()
}

/// Fig 14b: per arm, each private learner's mean estimate averaged over runs (lines), run 0's
/// private scores of one learner (points), the true expected clipped reward (dashed).
fn means_png(path: &Path, cfg: &BanditConfig, res: &BanditResults) -> Result<()> {
    let names = private_mean_policies(res);
    let k = cfg.arms.len();
    let dots = ["mgem", "rs", "gem", "rnm"]
        .iter()
        .map(|s| s.to_string())
        .find(|n| names.contains(n))
        .or_else(|| names.first().cloned());
    let t_max = cfg.horizon as f64;
    let height = 330 * k as u32;
    render(path, (1500, height.max(400)), |root| {
        let (main, leg) = root.split_horizontally(1270);
        let rows = main.split_evenly((k, 1));
        for (a, area) in rows.iter().enumerate() {
            let sel: Vec<&ArmPoint> = res
                .arm_points
                .iter()
                .filter(|p| p.arm == a && names.contains(&p.policy))
                .collect();
            // The y range follows the averaged estimates and the truth; early single-run scores
            // can be far outside (a few pulls and large counter noise) and are cut off.
            let (ylo, yhi) = range(sel.iter().flat_map(|p| [p.mean_est, p.true_mean]));
            let (ylo, yhi) = (ylo.min(-0.05), yhi.max(1.05));
            let mut chart = ChartBuilder::on(area)
                .caption(
                    format!(
                        "(b) arm {a}: private mean (lines: mean of {} runs; dots: run 0 of {}), \
                         true mean dashed",
                        cfg.runs,
                        dots.as_deref().unwrap_or("-")
                    ),
                    (FONT, 15),
                )
                .margin(8)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..t_max, ylo..yhi)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("step t")
                .y_desc("mean reward")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .label_style((FONT, 13))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            let truth: Vec<(f64, f64)> = res
                .arm_points
                .iter()
                .filter(|p| p.arm == a && Some(&p.policy) == names.first())
                .map(|p| (p.t as f64, p.true_mean))
                .collect();
            chart
                .draw_series(DashedLineSeries::new(truth, 6, 4, BLACK.stroke_width(2)))
                .map_err(err)?;
            if let Some(d) = &dots {
                let c = policy_color(d);
                chart
                    .draw_series(
                        sel.iter()
                            .filter(|p| &p.policy == d && p.mean_est_run0.is_finite())
                            .filter(|p| (ylo..yhi).contains(&p.mean_est_run0))
                            .map(|p| {
                                Circle::new((p.t as f64, p.mean_est_run0), 2, c.mix(0.5).filled())
                            }),
                    )
                    .map_err(err)?;
            }
            for n in &names {
                let line: Vec<(f64, f64)> = sel
                    .iter()
                    .filter(|p| &p.policy == n && p.mean_est.is_finite())
                    .map(|p| (p.t as f64, p.mean_est.clamp(ylo, yhi)))
                    .collect();
                chart
                    .draw_series(LineSeries::new(line, policy_color(n).stroke_width(2)))
                    .map_err(err)?;
            }
        }
        legend(&leg, &names, "policy")
    })
}

/// Fig 14c/d: arm `a`'s released lower and upper quantiles (mean over runs: lines; run 0: dots)
/// of the first learner that estimates them (mgem when it ran), against the true quantiles of the
/// clipped rewards (dashed), which change at the shift. Returns false when no learner released
/// quantiles.
fn quantiles_png(path: &Path, cfg: &BanditConfig, res: &BanditResults, a: usize) -> Result<bool> {
    let with_q: Vec<&str> = res
        .summaries
        .iter()
        .filter(|s| !s.oracle_stats && s.quantile_pairs_mean > 0.0 && s.private)
        .map(|s| s.policy.as_str())
        .collect();
    let Some(policy) = with_q
        .iter()
        .find(|&&n| n == "mgem")
        .or_else(|| with_q.first())
        .map(|s| s.to_string())
    else {
        return Ok(false);
    };
    let pts: Vec<&ArmPoint> = res
        .arm_points
        .iter()
        .filter(|p| p.arm == a && p.policy == policy)
        .collect();
    let t_max = cfg.horizon as f64;
    let panel = if a == 0 {
        "(c)"
    } else if a == 1 {
        "(d)"
    } else {
        ""
    };
    render(path, (1200, 520), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "{panel} arm {a}: private p{:.0} / p{:.0} of the last {} rewards ({policy}; \
                     lines: mean of {} runs, dots: run 0), true quantiles dashed",
                    100.0 * cfg.q_lo,
                    100.0 * cfg.q_hi,
                    cfg.window,
                    cfg.runs
                ),
                (FONT, 15),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, -0.02..1.02)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("step t")
            .y_desc("reward quantile")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let lo_c = RGBColor(31, 119, 180);
        let hi_c = RGBColor(214, 39, 40);
        for (c, truth, est, run0) in [
            (
                lo_c,
                (|p: &ArmPoint| p.true_q_lo) as fn(&ArmPoint) -> f64,
                (|p: &ArmPoint| p.q_lo) as fn(&ArmPoint) -> f64,
                (|p: &ArmPoint| p.q_lo_run0) as fn(&ArmPoint) -> f64,
            ),
            (hi_c, |p| p.true_q_hi, |p| p.q_hi, |p| p.q_hi_run0),
        ] {
            chart
                .draw_series(DashedLineSeries::new(
                    pts.iter().map(|p| (p.t as f64, truth(p))),
                    6,
                    4,
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            chart
                .draw_series(
                    pts.iter()
                        .filter(|p| run0(p).is_finite())
                        .map(|p| Circle::new((p.t as f64, run0(p)), 2, c.mix(0.45).filled())),
                )
                .map_err(err)?;
            chart
                .draw_series(LineSeries::new(
                    pts.iter()
                        .filter(|p| est(p).is_finite())
                        .map(|p| (p.t as f64, est(p))),
                    c.stroke_width(2),
                ))
                .map_err(err)?;
        }
        Ok(())
    })?;
    Ok(true)
}
