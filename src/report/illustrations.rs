//! Plots of the figures that are not MSE curves or heatmaps: seed 001 fig 4 (reordering
//! functions), fig 6 e–h (which candidates GEM and mGEM pick), figs 19/20 (per-group score box
//! plots of scenarios 7 and 8) and fig 22 (density of the maximum of Laplace variables).

use std::path::Path;

use plotters::prelude::*;

use super::plot::{err, mech_color, render, FONT};
use crate::error::Result;
use crate::experiments::illustrate::{DensityRow, ReorderRow};
use crate::experiments::picks::PickRow;
use crate::experiments::scenarios::GroupBox;

/// A line of fig 4: its label, colour and value per candidate.
type Series = (&'static str, RGBColor, fn(&ReorderRow) -> f64);

const SET_COLORS: [RGBColor; 4] = [
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
    RGBColor(230, 170, 0),
    RGBColor(214, 39, 40),
];

/// Fig 22: exact density (line) and Monte Carlo histogram density (dots) of the maximum of k
/// Laplace variables, one colour per scale set (green, blue, yellow, red as in the paper).
pub fn fig22_png(path: &Path, k: usize, samples: u64, rows: &[DensityRow]) -> Result<()> {
    let mut sets: Vec<&str> = Vec::new();
    for r in rows {
        if !sets.contains(&r.set.as_str()) {
            sets.push(&r.set);
        }
    }
    let ymax = rows
        .iter()
        .map(|r| r.exact.max(r.estimate))
        .fold(0.0, f64::max);
    let (xlo, xhi) = rows
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), r| {
            (l.min(r.x), h.max(r.x))
        });
    render(path, (900, 520), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "Density of the maximum of k = {k} independent Laplace variables \
                     (lines exact, dots {samples} draws)"
                ),
                (FONT, 15),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(xlo..xhi, 0.0..ymax * 1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("x")
            .y_desc("density of max_a z_a")
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, set) in sets.iter().enumerate() {
            let c = SET_COLORS[i % SET_COLORS.len()];
            let pts: Vec<&DensityRow> = rows.iter().filter(|r| r.set == *set).collect();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|r| (r.x, r.exact)),
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(format!("scales {set}"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], c.stroke_width(3)));
            chart
                .draw_series(
                    pts.iter()
                        .map(|r| Circle::new((r.x, r.estimate), 2, c.mix(0.6).filled())),
                )
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)?;
        Ok(())
    })
}

/// Fig 4: scores `q_a` (black), mGEM's `q_a + tΔ_a` (pink) and GEM's `q_a − tΔ_a` (purple), one
/// panel for positive and one for negative correlation.
pub fn fig4_png(path: &Path, t: f64, rows: &[ReorderRow]) -> Result<()> {
    render(path, (1000, 440), |root| {
        let panels = root.split_evenly((1, 2));
        for (area, case) in panels.iter().zip(["positive", "negative"]) {
            let pts: Vec<&ReorderRow> = rows.iter().filter(|r| r.case == case).collect();
            let (lo, hi) = pts
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), r| {
                    (l.min(r.gem).min(r.score), h.max(r.mgem).max(r.score))
                });
            let k = pts.len() as f64;
            let mut chart = ChartBuilder::on(area)
                .caption(
                    format!("{case} correlation of q and Delta (t = {t:.3})"),
                    (FONT, 15),
                )
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(50)
                .build_cartesian_2d(0.0..k, (lo - 0.1)..(hi + 0.1))
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("candidate (by score)")
                .label_style((FONT, 12))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            let series: [Series; 3] = [
                ("mGEM: q + t*Delta", RGBColor(231, 84, 128), |r| r.mgem),
                ("q", RGBColor(0, 0, 0), |r| r.score),
                ("GEM: q - t*Delta", RGBColor(118, 42, 131), |r| r.gem),
            ];
            for (name, c, f) in series {
                chart
                    .draw_series(LineSeries::new(
                        pts.iter().map(|r| (r.candidate as f64, f(r))),
                        c.stroke_width(2),
                    ))
                    .map_err(err)?
                    .label(name)
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 18, y)], c.stroke_width(3))
                    });
            }
            chart
                .configure_series_labels()
                .label_font((FONT, 12))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(err)?;
        }
        Ok(())
    })
}

/// Figs 19/20: per group, a box per candidate (whiskers 5th–95th, box 25th–75th, median tick) of
/// the unclipped scores; red lines: the 5th/95th percentiles over all users (the clipping range).
pub fn group_boxes_png(path: &Path, title: &str, boxes: &[GroupBox]) -> Result<()> {
    let (lo, hi) = boxes
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), b| {
            (l.min(b.p5).min(b.all_p5), h.max(b.p95).max(b.all_p95))
        });
    let k = boxes.iter().map(|b| b.candidate + 1).max().unwrap_or(1) as f64;
    render(path, (1000, 760), |root| {
        let panels = root.split_evenly((2, 1));
        for (area, group) in panels.iter().zip([0u8, 1]) {
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{title}: group {group}"), (FONT, 15))
                .margin(8)
                .x_label_area_size(35)
                .y_label_area_size(50)
                .build_cartesian_2d(-1.0..k, (lo - 0.5)..(hi + 0.5))
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("candidate")
                .y_desc("score")
                .label_style((FONT, 12))
                .light_line_style(RGBColor(240, 240, 240))
                .draw()
                .map_err(err)?;
            let fill = if group == 0 {
                RGBColor(31, 119, 180)
            } else {
                RGBColor(255, 127, 14)
            };
            for b in boxes.iter().filter(|b| b.group == group) {
                let x = b.candidate as f64;
                chart
                    .draw_series([
                        PathElement::new([(x, b.p5), (x, b.p95)], fill.stroke_width(1)),
                        PathElement::new(
                            [(x - 0.3, b.p50), (x + 0.3, b.p50)],
                            BLACK.stroke_width(1),
                        ),
                    ])
                    .map_err(err)?;
                chart
                    .draw_series([Rectangle::new(
                        [(x - 0.35, b.p25), (x + 0.35, b.p75)],
                        fill.mix(0.6).filled(),
                    )])
                    .map_err(err)?;
                let red = RGBColor(220, 0, 0);
                chart
                    .draw_series([
                        PathElement::new(
                            [(x - 0.45, b.all_p5), (x + 0.45, b.all_p5)],
                            red.stroke_width(2),
                        ),
                        PathElement::new(
                            [(x - 0.45, b.all_p95), (x + 0.45, b.all_p95)],
                            red.stroke_width(2),
                        ),
                    ])
                    .map_err(err)?;
            }
        }
        Ok(())
    })
}

/// The mechanisms of fig 6 e–h, in the paper's row order.
pub const FIG6_PICK_MECHANISMS: [&str; 2] = ["gem", "mgem"];

/// Fig 6 e–h: one panel per (mechanism, scenario) — GEM on scenarios 1 and 2 (e, f), mGEM (g, h)
/// — with every candidate at (score, sensitivity) as a black dot and a disc whose area is the share
/// of the trials that picked it (candidates at the same point add up: scenario 1 has 18 at
/// (1, 0.1)). One area scale for all panels. The caption gives the share of picks of the best
/// score and the mean of `q_selected − q_max`.
pub fn fig6_picks_png(path: &Path, rows: &[PickRow]) -> Result<()> {
    let mechs: Vec<&str> = FIG6_PICK_MECHANISMS
        .into_iter()
        .filter(|m| rows.iter().any(|r| r.mechanism == *m))
        .collect();
    let mut scenarios: Vec<&str> = Vec::new();
    for r in rows {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    let (nr, nc) = (mechs.len().max(1), scenarios.len().max(1));
    let letters = mechs == FIG6_PICK_MECHANISMS && scenarios == ["fig6-1", "fig6-2"];
    render(path, (560 * nc as u32, 430 * nr as u32), |root| {
        let panels = root.split_evenly((nr, nc));
        for (mi, mech) in mechs.iter().enumerate() {
            for (si, scenario) in scenarios.iter().enumerate() {
                let pts: Vec<&PickRow> = rows
                    .iter()
                    .filter(|r| r.mechanism == *mech && r.scenario == *scenario)
                    .collect();
                // Candidates at the same (score, sensitivity) are one disc.
                let mut points: Vec<(f64, f64, f64)> = Vec::new();
                for r in &pts {
                    match points
                        .iter_mut()
                        .find(|p| p.0 == r.score && p.1 == r.sensitivity)
                    {
                        Some(p) => p.2 += r.share,
                        None => points.push((r.score, r.sensitivity, r.share)),
                    }
                }
                let qmax = pts.iter().map(|r| r.score).fold(f64::MIN, f64::max);
                let best: f64 = pts
                    .iter()
                    .filter(|r| r.score == qmax)
                    .map(|r| r.share)
                    .sum();
                let mean_err: f64 = pts.iter().map(|r| r.share * (r.score - qmax)).sum();
                let (eps, trials) = pts.first().map_or((0.0, 0), |r| (r.epsilon, r.trials));
                let (xlo, xhi) = points
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
                        (l.min(p.0), h.max(p.0))
                    });
                let dhi = points.iter().map(|p| p.1).fold(0.0, f64::max);
                let letter = if letters {
                    format!("({}) ", (b'e' + (2 * mi + si) as u8) as char)
                } else {
                    String::new()
                };
                let mut chart = ChartBuilder::on(&panels[mi * nc + si])
                    .caption(
                        format!(
                            "{letter}{} on scenario {}, eps = {eps}: best score {:.1}% of picks, \
                             mean error {mean_err:.3}",
                            mech.to_uppercase().replace("MGEM", "mGEM"),
                            scenario.trim_start_matches("fig6-"),
                            100.0 * best
                        ),
                        (FONT, 14),
                    )
                    .margin(10)
                    .x_label_area_size(35)
                    .y_label_area_size(50)
                    .build_cartesian_2d((xlo - 0.08)..(xhi + 0.08), (-0.08 * dhi)..(1.12 * dhi))
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc(format!("score (disc area: share of {trials} picks)"))
                    .y_desc("sensitivity")
                    .label_style((FONT, 12))
                    .light_line_style(RGBColor(240, 240, 240))
                    .draw()
                    .map_err(err)?;
                let c = mech_color(mech);
                // A share of 1 would be a disc of radius 60 px.
                chart
                    .draw_series(points.iter().filter(|p| p.2 > 0.0).map(|p| {
                        Circle::new(
                            (p.0, p.1),
                            (60.0 * p.2.sqrt()).max(1.0),
                            c.mix(0.45).filled(),
                        )
                    }))
                    .map_err(err)?;
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|p| Circle::new((p.0, p.1), 2, BLACK.filled())),
                    )
                    .map_err(err)?;
            }
        }
        Ok(())
    })
}
