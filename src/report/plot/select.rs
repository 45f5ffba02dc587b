//! The real-data figures (seed 001 figs 13 and 21): the per-user Spearman histogram, the
//! per-user log-ratio of mGEM to GEM, MSE against ε, and the three data sets side by side.

use std::path::Path;

use plotters::prelude::*;

use super::{draw_legend, err, mech_order, mse_panel, render, Area, FONT};
use crate::error::Result;
use crate::experiments::synthetic::MseRow;

/// Histogram of per-user Spearman correlations of candidate scores and sensitivities
/// (seed 001 fig 13 a–c), with mean, median and share positive in the caption.
pub fn spearman_hist_png(
    path: &Path,
    title: &str,
    values: &[f64],
    summary: &crate::experiments::select::SpearmanSummary,
) -> Result<()> {
    render(path, (760, 480), |root| {
        spearman_panel(root, title, values, summary)
    })
}

fn spearman_panel(
    root: &Area<'_>,
    title: &str,
    values: &[f64],
    summary: &crate::experiments::select::SpearmanSummary,
) -> Result<()> {
    const BINS: usize = 40;
    let mut counts = [0u64; BINS];
    for &v in values.iter().filter(|v| v.is_finite()) {
        let b = (((v + 1.0) / 2.0 * BINS as f64).floor() as usize).min(BINS - 1);
        counts[b] += 1;
    }
    let (mean, median, positive) = (summary.mean, summary.median, summary.share_positive);
    let ymax = counts.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
    {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "{title}: Spearman(scores, sensitivities) per user — mean {mean:.2}, median {median:.2}, {:.0}% positive",
                    100.0 * positive
                ),
                (FONT, 15),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-1.0f64..1.0, 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("Spearman correlation")
            .y_desc("users")
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let bar = RGBColor(68, 1, 84);
        chart
            .draw_series(counts.iter().enumerate().map(|(b, &c)| {
                let x0 = -1.0 + 2.0 * b as f64 / BINS as f64;
                let x1 = x0 + 2.0 / BINS as f64;
                Rectangle::new([(x0, 0.0), (x1, c as f64)], bar.mix(0.75).filled())
            }))
            .map_err(err)?;
        Ok(())
    }
}

/// Per user, log(mean selected score under mGEM / under GEM) against the user's Spearman
/// correlation (seed 001 fig 13 d–f). `left_out` users (a mean not positive) are reported in the
/// caption, not silently dropped.
pub fn logratio_png(
    path: &Path,
    title: &str,
    points: &[(f64, f64)],
    left_out: u64,
    eps: f64,
) -> Result<()> {
    render(path, (760, 520), |root| {
        logratio_panel(root, title, points, left_out, eps)
    })
}

fn logratio_panel(
    root: &Area<'_>,
    title: &str,
    points: &[(f64, f64)],
    left_out: u64,
    eps: f64,
) -> Result<()> {
    let (ylo, yhi) = points
        .iter()
        .fold((0.0f64, 0.0f64), |(l, h), p| (l.min(p.1), h.max(p.1)));
    let pad = 0.05 * (yhi - ylo).max(1e-6);
    {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "{title}, eps = {eps}: log(mean mGEM / mean GEM) per user ({} users; {left_out} left out: a mean not positive)",
                    points.len()
                ),
                (FONT, 14),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-1.0f64..1.0, (ylo - pad)..(yhi + pad))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("Spearman correlation")
            .y_desc("log(mean mGEM / mean GEM)")
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(-1.0, 0.0), (1.0, 0.0)],
                RGBColor(150, 150, 150),
            ))
            .map_err(err)?;
        let dot = RGBColor(31, 119, 180);
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, 2, dot.mix(0.5).filled())),
            )
            .map_err(err)?;
        Ok(())
    }
}

/// The mGEM/GEM scatter of fig 13 d–f: (Spearman, log ratio) points, users left out, ε.
pub type Scatter = (Vec<(f64, f64)>, u64, f64);

/// One data set's column of the combined figure 13 ([`fig13_combined_png`]).
#[derive(Debug, Clone)]
pub struct Fig13Column {
    /// Data set name.
    pub title: String,
    /// Spearman correlation per user (fig 13 a–c).
    pub spearman: Vec<f64>,
    /// Their summary.
    pub summary: crate::experiments::select::SpearmanSummary,
    /// The mGEM/GEM scatter (fig 13 d–f): points, users left out, ε; `None` without gem/mgem.
    pub scatter: Option<Scatter>,
    /// MSE per mechanism and ε (fig 13 g–i).
    pub mse: Vec<MseRow>,
}

/// Seed 001 figure 13 as one image: a column per data set, rows Spearman histogram, mGEM/GEM
/// scatter and MSE against ε, with one mechanism legend at the right.
pub fn fig13_combined_png(path: &Path, columns: &[Fig13Column]) -> Result<()> {
    let n = columns.len().max(1) as u32;
    render(path, (760 * n + 240, 480 + 520 + 560), |root| {
        let (grid, legend) = root.split_horizontally(760 * n);
        let (top, rest) = grid.split_vertically(480);
        let (middle, bottom) = rest.split_vertically(520);
        let (top, middle, bottom) = (
            top.split_evenly((1, n as usize)),
            middle.split_evenly((1, n as usize)),
            bottom.split_evenly((1, n as usize)),
        );
        let mut all: Vec<&MseRow> = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            spearman_panel(&top[i], &c.title, &c.spearman, &c.summary)?;
            if let Some((points, left_out, eps)) = &c.scatter {
                logratio_panel(&middle[i], &c.title, points, *left_out, *eps)?;
            }
            let refs: Vec<&MseRow> = c.mse.iter().collect();
            let caption = format!("{}: MSE vs eps", c.title);
            mse_panel(&bottom[i], &caption, &refs, &|r| r.epsilon, "epsilon", true)?;
            all.extend(refs);
        }
        draw_legend(&legend, &mech_order(&all))
    })
}

/// MSE against ε (log–log) per mechanism, one panel, legend at the right (fig 13 g–i, fig 21).
pub fn mse_vs_eps_png(path: &Path, title: &str, rows: &[MseRow]) -> Result<()> {
    let refs: Vec<&MseRow> = rows.iter().collect();
    render(path, (1000, 560), |root| {
        let (main, legend) = root.split_horizontally(760);
        mse_panel(&main, title, &refs, &|r| r.epsilon, "epsilon", true)?;
        draw_legend(&legend, &mech_order(&refs))
    })
}
