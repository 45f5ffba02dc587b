//! Outputs of `recsel statistic --compare` (docs/results.md, "Private medians"): the tidy table
//! `medians.{csv,parquet}`, a markdown table `medians.md`, the plot `medians.png` (one panel per
//! column and n: mean absolute error against ε on log–log axes, one line per method, ± s.e.
//! bars) and the resolved configuration.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::column_statistic::compare::{CompareConfig, CompareRow};
use crate::column_statistic::Method;
use crate::error::Result;
use crate::io::{ensure_dir, write_atomic};
use crate::report::plot::{err, render, Area, FONT};
use crate::report::table::{Table, Values};
use crate::report::Resolved;

/// A fixed colour per method.
fn color(method: &str) -> RGBColor {
    match method {
        "duff" => RGBColor(214, 39, 40),
        "em" => RGBColor(31, 119, 180),
        "smooth-cauchy" => RGBColor(44, 160, 44),
        "smooth-laplace" => RGBColor(148, 103, 189),
        "smooth-cauchy-nrs07" => RGBColor(140, 86, 75),
        _ => RGBColor(127, 127, 127),
    }
}

/// "all (6040)" or "1000".
fn n_label(r: &CompareRow) -> String {
    if r.all {
        format!("all ({})", r.n)
    } else {
        r.n.to_string()
    }
}

/// Three significant digits.
fn num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The markdown table: one row per (column, n, ε), one "MAE ± s.e." cell per method.
pub fn markdown(rows: &[CompareRow]) -> String {
    let mut s = String::from("| column | n | true median | ε |");
    for m in Method::ALL {
        let _ = write!(s, " {} |", m.name());
    }
    s.push_str("\n|---|---:|---:|---:|");
    s.push_str(&"---:|".repeat(Method::ALL.len()));
    s.push('\n');
    let mut i = 0;
    while i < rows.len() {
        let r = &rows[i];
        let cell: Vec<&CompareRow> = rows[i..]
            .iter()
            .take_while(|x| x.column == r.column && x.n == r.n && x.epsilon == r.epsilon)
            .collect();
        let _ = write!(
            s,
            "| {} | {} | {} | {} |",
            r.column,
            n_label(r),
            num(r.median),
            r.epsilon
        );
        for m in Method::ALL {
            match cell.iter().find(|x| x.method == m.name()) {
                Some(x) => {
                    let _ = write!(s, " {} ± {} |", num(x.mae), num(x.se));
                }
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
        i += cell.len().max(1);
    }
    s
}

/// Writes every output into `dir`; returns the paths written.
pub fn write_compare(dir: &Path, cfg: &CompareConfig, rows: &[CompareRow]) -> Result<Vec<PathBuf>> {
    ensure_dir(dir)?;
    let f = |g: fn(&CompareRow) -> f64| Values::F64(rows.iter().map(g).collect());
    let table = Table::default()
        .with(
            "column",
            Values::Str(rows.iter().map(|r| r.column.clone()).collect()),
        )
        .with("n", Values::U64(rows.iter().map(|r| r.n as u64).collect()))
        .with("all", Values::Bool(rows.iter().map(|r| r.all).collect()))
        .with("epsilon", f(|r| r.epsilon))
        .with(
            "method",
            Values::Str(rows.iter().map(|r| r.method.to_string()).collect()),
        )
        .with("mae", f(|r| r.mae))
        .with("se", f(|r| r.se))
        .with("median", f(|r| r.median))
        .with(
            "reps",
            Values::U64(rows.iter().map(|r| r.reps as u64).collect()),
        );
    let mut paths = table.write(dir, "medians")?;
    let md = dir.join("medians.md");
    write_atomic(&md, markdown(rows).as_bytes())?;
    paths.push(md);
    let png = dir.join("medians.png");
    medians_png(&png, rows)?;
    paths.push(png);
    paths.extend(Resolved::new("statistic --compare", cfg).write(dir)?);
    Ok(paths)
}

/// Distinct values in first-seen order.
fn distinct<T: PartialEq + Clone>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in it {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn medians_png(path: &Path, rows: &[CompareRow]) -> Result<()> {
    let columns = distinct(rows.iter().map(|r| r.column.clone()));
    // Subsample sizes ascending, the whole column last.
    let mut n_slots = distinct(rows.iter().map(|r| if r.all { usize::MAX } else { r.n }));
    n_slots.sort_unstable();
    let (w, h) = (
        330 * n_slots.len() as u32 + 190,
        300 * columns.len() as u32 + 10,
    );
    let eps = distinct(rows.iter().map(|r| r.epsilon));
    // ε on a log10 axis drawn as linear coordinates (labels written back as ε).
    let (xlo, xhi) = (
        (eps.iter().cloned().fold(f64::INFINITY, f64::min) * 0.8).log10(),
        (eps.iter().cloned().fold(0.0, f64::max) * 1.25).log10(),
    );
    render(path, (w, h), |root| {
        let (main, legend) = root.split_horizontally(w - 190);
        let panels = main.split_evenly((columns.len(), n_slots.len()));
        for (ci, col) in columns.iter().enumerate() {
            for (ni, &slot) in n_slots.iter().enumerate() {
                let area = &panels[ci * n_slots.len() + ni];
                let sel: Vec<&CompareRow> = rows
                    .iter()
                    .filter(|r| &r.column == col && (if r.all { usize::MAX } else { r.n }) == slot)
                    .collect();
                if sel.is_empty() {
                    continue;
                }
                panel(area, col, &sel, (xlo, xhi))?;
            }
        }
        draw_methods(&legend)
    })
}

fn panel(area: &Area<'_>, column: &str, sel: &[&CompareRow], x: (f64, f64)) -> Result<()> {
    let pos = sel.iter().map(|r| r.mae).filter(|v| *v > 0.0);
    let ylo = pos.clone().fold(f64::INFINITY, f64::min).max(1e-3) * 0.6;
    let yhi = pos.fold(0.0, f64::max).max(ylo * 10.0) * 1.6;
    let short = column.split(':').next().unwrap_or(column);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{short}, n = {}", n_label(sel[0])), (FONT, 14))
        .margin(6)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(x.0..x.1, (ylo..yhi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(4)
        .x_label_formatter(&|v| format!("{:.2}", 10f64.powf(*v)))
        .x_desc("epsilon (log scale; a zero error is drawn at the bottom)")
        .y_desc("MAE of the median")
        .label_style((FONT, 11))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for m in Method::ALL {
        let c = color(m.name());
        let pts: Vec<(f64, f64, f64)> = sel
            .iter()
            .filter(|r| r.method == m.name())
            .map(|r| (r.epsilon.log10(), r.mae.max(ylo), r.se))
            .collect();
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                c.stroke_width(2),
            ))
            .map_err(err)?;
        chart
            .draw_series(pts.iter().map(|p| {
                PathElement::new(
                    [(p.0, (p.1 - p.2).max(ylo)), (p.0, (p.1 + p.2).min(yhi))],
                    c.stroke_width(1),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 3, c.filled())))
            .map_err(err)?;
    }
    Ok(())
}

fn draw_methods(area: &Area<'_>) -> Result<()> {
    area.draw(&Text::new(
        "method",
        (10, 30),
        (FONT, 15).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    for (i, m) in Method::ALL.iter().enumerate() {
        let y = 55 + 22 * i as i32;
        area.draw(&PathElement::new(
            [(10, y + 7), (40, y + 7)],
            color(m.name()).stroke_width(2),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            m.name(),
            (46, y),
            (FONT, 14).into_font().color(&BLACK),
        ))
        .map_err(err)?;
    }
    Ok(())
}
