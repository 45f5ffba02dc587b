//! The synthetic scenarios' figures (seed 001 figs 2, 8, 10, 12, 18): per scenario a panel of
//! every candidate's mean score and sensitivity above the MSE-vs-ε panel; the correlation and
//! share sweeps.

use std::path::Path;

use plotters::prelude::*;

use super::{draw_legend, err, mech_order, mse_panel, render, Area, FONT};
use crate::error::Result;
use crate::experiments::scenarios::{Dataset, Scenario};
use crate::experiments::synthetic::{CorrRow, MseRow};

/// Dark dot, light bar (seed 001 fig 2); a second colour pair for the two groups of scenarios 7/8.
fn group_colors(groups: usize, g: usize) -> (RGBColor, RGBColor) {
    if groups == 1 {
        (RGBColor(68, 1, 84), RGBColor(186, 160, 220))
    } else {
        [
            (RGBColor(200, 40, 30), RGBColor(240, 160, 150)),
            (RGBColor(31, 90, 180), RGBColor(140, 180, 235)),
        ][g % 2]
    }
}

/// The key of the scores panel, drawn in the legend strip below the mechanisms, from `y` down.
fn draw_score_key(area: &Area<'_>, data: &Dataset, mut y: i32) -> Result<()> {
    let bold = (FONT, 16).into_font().style(FontStyle::Bold);
    area.draw(&Text::new("top panel", (10, y), bold))
        .map_err(err)?;
    y += 25;
    let style = (FONT, 15).into_font().color(&BLACK);
    for (gi, g) in data.groups.iter().enumerate() {
        let (dot, bar) = group_colors(data.groups.len(), gi);
        let prefix = if data.groups.len() == 1 {
            String::new()
        } else {
            format!("{}: ", g.name)
        };
        area.draw(&Circle::new((25, y + 7), 4, dot.filled()))
            .map_err(err)?;
        area.draw(&Text::new(
            format!("{prefix}mean score"),
            (46, y),
            style.clone(),
        ))
        .map_err(err)?;
        y += 22;
        area.draw(&PathElement::new(
            [(25, y), (25, y + 16)],
            bar.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            format!("{prefix}sensitivity Δ"),
            (46, y),
            style.clone(),
        ))
        .map_err(err)?;
        y += 22;
    }
    area.draw(&Text::new("(bar of length Δ", (46, y), style.clone()))
        .map_err(err)?;
    area.draw(&Text::new(" centred on the mean)", (46, y + 18), style))
        .map_err(err)?;
    Ok(())
}

/// Top panel: mean score (dot) and sensitivity (bar centred on it) per candidate and group.
/// Candidates keep their index where the scenario orders them (scenarios 1–5, 7, 8); scenario 6
/// and the correlation sweep draw their means at random, so there candidates are sorted by mean
/// score to make the trend of the sensitivities visible.
fn scores_panel(area: &Area<'_>, caption: &str, data: &Dataset) -> Result<()> {
    let k = data.k;
    let first = &data.groups[0].mean_scores;
    let monotone = !matches!(
        data.scenario,
        Scenario::Numbered(6) | Scenario::Corr(_) | Scenario::Exceptional(_)
    );
    let mut order: Vec<usize> = (0..k).collect();
    if !monotone {
        order.sort_by(|&a, &b| first[a].total_cmp(&first[b]));
    }
    let x_desc = if monotone {
        "candidate"
    } else {
        "candidate (sorted by mean score)"
    };
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for g in &data.groups {
        for (m, d) in g.mean_scores.iter().zip(&data.sens) {
            lo = lo.min(m - d / 2.0);
            hi = hi.max(m + d / 2.0);
        }
    }
    let pad = 0.05 * (hi - lo).max(1e-9);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin(8)
        .x_label_area_size(35)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..(k as f64 + 1.0), (lo - pad)..(hi + pad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("score")
        .x_labels(6)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 13))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(err)?;
    for (gi, g) in data.groups.iter().enumerate() {
        let (dot, bar) = group_colors(data.groups.len(), gi);
        chart
            .draw_series(
                g.mean_scores
                    .iter()
                    .zip(&data.sens)
                    .enumerate()
                    .map(|(a, (m, d))| {
                        let x = (a + 1) as f64;
                        PathElement::new([(x, m - d / 2.0), (x, m + d / 2.0)], bar.stroke_width(2))
                    }),
            )
            .map_err(err)?;
        chart
            .draw_series(
                order.iter().enumerate().map(|(x, &a)| {
                    Circle::new(((x + 1) as f64, g.mean_scores[a]), 3, dot.filled())
                }),
            )
            .map_err(err)?;
    }
    Ok(())
}

fn corr_caption(corr: &[CorrRow], scenario: &str) -> String {
    let rows: Vec<&CorrRow> = corr.iter().filter(|c| c.scenario == scenario).collect();
    match rows.as_slice() {
        [c] => format!(
            "Spearman {:.2}, Pearson {:.2}, weighted {:.2}",
            c.spearman, c.pearson, c.weighted
        ),
        // Two groups (scenarios 7, 8): Spearman only, to fit one line.
        many => format!(
            "Spearman {}",
            many.iter()
                .map(|c| format!("{} {:.2}", c.group, c.spearman))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One scenario: scores and sensitivities on top, MSE vs ε (log–log) below, legend at the right.
pub fn scenario_png(path: &Path, data: &Dataset, rows: &[MseRow], corr: &[CorrRow]) -> Result<()> {
    let label = data.scenario.label();
    let rows: Vec<&MseRow> = rows.iter().filter(|r| r.scenario == label).collect();
    render(path, (1000, 780), |root| {
        let (main, legend) = root.split_horizontally(770);
        let (top, bottom) = main.split_vertically(300);
        let cap = corr_caption(corr, &label);
        scores_panel(&top, &format!("{} — {cap}", data.scenario.title()), data)?;
        let trials = rows.first().map_or(0, |r| r.trials);
        mse_panel(
            &bottom,
            &format!(
                "MSE of q_selected - q_max over {trials} trials, k = {}",
                data.k
            ),
            &rows,
            &|r| r.epsilon,
            "epsilon",
            true,
        )?;
        let mechs = mech_order(&rows);
        draw_legend(&legend, &mechs)?;
        draw_score_key(&legend, data, 65 + 22 * mechs.len() as i32 + 30)
    })
}

/// The correlation sweep (seed 001 fig 10): one column per t, scores on top, MSE below.
pub fn corr_sweep_png(
    path: &Path,
    datasets: &[&Dataset],
    rows: &[MseRow],
    corr: &[CorrRow],
) -> Result<()> {
    let n = datasets.len().max(1);
    let col_w = 280u32;
    render(path, (col_w * n as u32 + 230, 700), |root| {
        let (main, legend) = root.split_horizontally(col_w * n as u32);
        let (top, bottom) = main.split_vertically(290);
        let tops = top.split_evenly((1, n));
        let bottoms = bottom.split_evenly((1, n));
        let mut mechs = Vec::new();
        for (i, data) in datasets.iter().enumerate() {
            let label = data.scenario.label();
            let c = corr
                .iter()
                .find(|c| c.scenario == label)
                .map_or(0.0, |c| c.spearman);
            scores_panel(
                &tops[i],
                &format!("{}, Spearman {c:.2}", data.scenario.title()),
                data,
            )?;
            let rs: Vec<&MseRow> = rows.iter().filter(|r| r.scenario == label).collect();
            mse_panel(&bottoms[i], "", &rs, &|r| r.epsilon, "epsilon", true)?;
            if mechs.is_empty() {
                mechs = mech_order(&rs);
            }
        }
        draw_legend(&legend, &mechs)?;
        match datasets.first() {
            Some(d) => draw_score_key(&legend, d, 65 + 22 * mechs.len() as i32 + 30),
            None => Ok(()),
        }
    })
}

/// The share sweep (seed 001 fig 18): MSE against the share of high scores, one panel per base
/// scenario. `rows` are (base scenario, share, row).
pub fn share_png(path: &Path, rows: &[(u8, f64, &MseRow)]) -> Result<()> {
    let mut bases: Vec<u8> = rows.iter().map(|r| r.0).collect();
    bases.dedup();
    let n = bases.len().max(1);
    render(path, (430 * n as u32 + 240, 520), |root| {
        let (main, legend) = root.split_horizontally(430 * n as u32);
        let panels = main.split_evenly((1, n));
        let mut mechs = Vec::new();
        for (i, b) in bases.iter().enumerate() {
            // Carry the share in `epsilon`'s place for the x axis.
            let shifted: Vec<MseRow> = rows
                .iter()
                .filter(|r| r.0 == *b)
                .map(|r| MseRow {
                    epsilon: r.1,
                    ..r.2.clone()
                })
                .collect();
            let refs: Vec<&MseRow> = shifted.iter().collect();
            let eps = rows.first().map_or(0.0, |r| r.2.epsilon);
            mse_panel(
                &panels[i],
                &format!("Scenario {b}, eps = {eps}"),
                &refs,
                &|r| r.epsilon,
                "share of high scores",
                false,
            )?;
            if mechs.is_empty() {
                mechs = mech_order(&refs);
            }
        }
        draw_legend(&legend, &mechs)
    })
}
