//! The plot of `recsel evaluate --k K` (docs/utility.md, "Lists"): Recall@K against ε (log x) for
//! every private list, the free lists and the non-private top-K as horizontal dashed lines, and
//! the limit `min(1, e^ε × the best fixed list)`.

use std::path::Path;

use plotters::prelude::*;

use crate::error::Result;
use crate::evaluate::lists::ListTable;

use super::plot::{err, render, FONT};

/// Recall@K against ε, written to `path` (PNG, or SVG when the plots are set to SVG).
pub fn lists_png(path: &Path, title: &str, t: &ListTable) -> Result<()> {
    let lo = t.epsilons.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = t.epsilons.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo < hi {
        (lo, hi)
    } else {
        (lo / 2.0, lo * 2.0)
    };
    let (lo, hi) = (lo / 1.25, hi * 1.25);
    let ymax = (t
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| c.recall + c.recall_se))
        .fold(0.0f64, f64::max)
        * 1.3)
        .clamp(1e-3, 1.0);
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(23, 190, 207),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(0, 0, 0),
        RGBColor(214, 39, 40),
        RGBColor(255, 127, 14),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(127, 127, 127),
        RGBColor(23, 100, 60),
    ];
    render(path, (1200, 620), |root| {
        let (main, legend) = root.split_horizontally(700);
        let mut chart = ChartBuilder::on(&main)
            .caption(title, (FONT, 16))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("epsilon per list")
            .y_desc(format!("Recall@{} (evaluated users)", t.k))
            .x_label_formatter(&|v| format!("{v}"))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let mut entries: Vec<(String, RGBColor)> = Vec::new();
        let grey = RGBColor(120, 120, 120);
        let limit: Vec<(f64, f64)> = (0..=80)
            .map(|i| {
                let e = lo * (hi / lo).powf(f64::from(i) / 80.0);
                (e, (e.exp() * t.best_fixed[0]).min(1.0))
            })
            .take_while(|p| p.1 <= ymax)
            .collect();
        chart
            .draw_series(DashedLineSeries::new(limit, 3, 4, grey.stroke_width(2)))
            .map_err(err)?;
        entries.push(("limit: e^eps x best fixed list".into(), grey));
        for (i, r) in t.rows.iter().enumerate() {
            let c = palette[i % palette.len()];
            let pts: Vec<(f64, f64)> = t
                .epsilons
                .iter()
                .copied()
                .zip(r.cells.iter().map(|c| c.recall))
                .collect();
            if r.kind == "private" || r.kind == "tuned" {
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(err)?;
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(err)?;
            } else {
                let flat = vec![(lo, pts[0].1), (hi, pts[0].1)];
                chart
                    .draw_series(DashedLineSeries::new(flat, 8, 5, c.stroke_width(2)))
                    .map_err(err)?;
            }
            entries.push((r.label.chars().take(70).collect(), c));
        }
        let style = (FONT, 12).into_font().color(&BLACK);
        for (i, (label, c)) in entries.iter().enumerate() {
            let y = 30 + 20 * i as i32;
            legend
                .draw(&PathElement::new(
                    [(6, y + 7), (30, y + 7)],
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            legend
                .draw(&Text::new(label.clone(), (36, y), style.clone()))
                .map_err(err)?;
        }
        Ok(())
    })
}
