//! The two-candidate head-to-head heatmaps (seed 001 figs 3, 15, 16, 17).

use std::path::Path;

use plotters::prelude::*;

use super::{err, render, FONT};
use crate::error::Result;
use crate::experiments::twocand::{HgRow, Panel};

/// Diverging colour: blue (negative) through white to red (positive), `v` in [−1, 1].
fn diverging(v: f64) -> RGBColor {
    let v = v.clamp(-1.0, 1.0);
    let lerp = |a: f64, b: f64, t: f64| (a + (b - a) * t).round() as u8;
    if v >= 0.0 {
        RGBColor(
            lerp(255.0, 180.0, v),
            lerp(255.0, 20.0, v),
            lerp(255.0, 40.0, v),
        )
    } else {
        let t = -v;
        RGBColor(
            lerp(255.0, 30.0, t),
            lerp(255.0, 80.0, t),
            lerp(255.0, 170.0, t),
        )
    }
}

/// Heatmaps of HG(RNM, M) over (Δ_1, Δ_2), one per panel, with a shared colour bar.
pub fn heatmaps_png(path: &Path, figure: u8, panels: &[Panel], rows: &[HgRow]) -> Result<()> {
    let nrows = panels.iter().map(|p| p.row).max().unwrap_or(0) + 1;
    let ncols = panels.iter().map(|p| p.col).max().unwrap_or(0) + 1;
    let scale = rows
        .iter()
        .map(|r| r.hg.abs())
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let (w, h) = (360u32, 340u32);
    render(
        path,
        (w * ncols as u32 + 130, h * nrows as u32 + 40),
        |root| {
            let (title, rest) = root.split_vertically(40);
            title
            .draw(&Text::new(
                format!("Seed 001 figure {figure}: HG(RNM, M) = P[RNM wrong] - P[M wrong]; red: M better"),
                (10, 12),
                (FONT, 17).into_font(),
            ))
            .map_err(err)?;
            let (main, bar) = rest.split_horizontally(w * ncols as u32);
            let areas = main.split_evenly((nrows, ncols));
            for p in panels {
                let cells: Vec<&HgRow> = rows.iter().filter(|r| p.contains(r)).collect();
                let mut deltas: Vec<f64> = cells.iter().map(|r| r.delta1).collect();
                deltas.sort_by(f64::total_cmp);
                deltas.dedup();
                let step = if deltas.len() > 1 {
                    deltas[1] - deltas[0]
                } else {
                    1.0
                };
                let (lo, hi) = (
                    deltas.first().copied().unwrap_or(0.0) - step / 2.0,
                    deltas.last().copied().unwrap_or(1.0) + step / 2.0,
                );
                let area = &areas[p.row * ncols + p.col];
                let mut chart = ChartBuilder::on(area)
                    .caption(p.title(), (FONT, 14))
                    .margin(6)
                    .x_label_area_size(34)
                    .y_label_area_size(40)
                    .build_cartesian_2d(lo..hi, lo..hi)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .disable_mesh()
                    .x_desc("Δ1 (candidate 1, score 0)")
                    .y_desc("Δ2 (candidate 2, score = gap)")
                    .label_style((FONT, 12))
                    .draw()
                    .map_err(err)?;
                chart
                    .draw_series(cells.iter().map(|r| {
                        Rectangle::new(
                            [
                                (r.delta1 - step / 2.0, r.delta2 - step / 2.0),
                                (r.delta1 + step / 2.0, r.delta2 + step / 2.0),
                            ],
                            diverging(r.hg / scale).filled(),
                        )
                    }))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        [(lo, lo), (hi, hi)],
                        BLACK.mix(0.4).stroke_width(1),
                    )))
                    .map_err(err)?;
            }
            // Colour bar.
            let steps = 100;
            let (bx, by, bh) = (20, 30, (h * nrows as u32).saturating_sub(90) as i32);
            for s in 0..steps {
                let v = 1.0 - 2.0 * s as f64 / (steps - 1) as f64;
                let y0 = by + bh * s / steps;
                let y1 = by + bh * (s + 1) / steps;
                bar.draw(&Rectangle::new(
                    [(bx, y0), (bx + 25, y1)],
                    diverging(v).filled(),
                ))
                .map_err(err)?;
            }
            let style = (FONT, 13).into_font();
            for (v, y) in [(scale, by), (0.0, by + bh / 2), (-scale, by + bh)] {
                bar.draw(&Text::new(
                    format!("{v:+.3}"),
                    (bx + 30, y - 6),
                    style.clone(),
                ))
                .map_err(err)?;
            }
            bar.draw(&Text::new("HG", (bx, by - 22), style.clone()))
                .map_err(err)?;
            Ok(())
        },
    )
}
