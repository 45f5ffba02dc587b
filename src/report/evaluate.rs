//! The utility table and frontier of `recsel evaluate` (docs/utility.md): a tidy table (CSV,
//! Parquet), the table as Markdown, the summary, the JSON, and the frontier plot — hit@1 against
//! ε (log x) for every private row, the public baselines as horizontal lines, the non-private
//! top-1, and the limit `min(1, e^ε × best fixed item)`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::evaluate::utility::{RowKind, UtilityTable};
use crate::io::write_atomic;

use super::plot::{err, mech_color, render, FONT};
use super::table::{Table, Values};

/// One line per (row, ε).
pub fn tidy(t: &UtilityTable) -> Table {
    let mut label = Vec::new();
    let mut mech = Vec::new();
    let mut kind = Vec::new();
    let mut tuned = Vec::new();
    let mut eps = Vec::new();
    let (mut hit, mut se, mut config, mut exact) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut diff, mut diff_se, mut limit) = (Vec::new(), Vec::new(), Vec::new());
    for r in &t.rows {
        for (e, c) in r.cells.iter().enumerate() {
            label.push(r.label.clone());
            mech.push(r.mechanism.clone());
            kind.push(
                match r.kind {
                    RowKind::Baseline => "baseline (0-DP)",
                    RowKind::NotPrivate => "not private",
                    RowKind::Private => "eps-DP",
                }
                .to_string(),
            );
            tuned.push(r.tuned);
            eps.push(t.epsilons[e]);
            hit.push(c.hit);
            se.push(c.se);
            config.push(c.config.clone());
            exact.push(c.exact);
            diff.push(c.vs_baseline);
            diff_se.push(c.vs_baseline_se);
            limit.push(t.limit[e]);
        }
    }
    Table::default()
        .with("row", Values::Str(label))
        .with("mechanism", Values::Str(mech))
        .with("kind", Values::Str(kind))
        .with("tuned", Values::Bool(tuned))
        .with("epsilon", Values::F64(eps))
        .with("hit1", Values::F64(hit))
        .with("hit1_se", Values::F64(se))
        .with("config", Values::Str(config))
        .with("exact", Values::Bool(exact))
        .with("vs_best_baseline", Values::F64(diff))
        .with("vs_best_baseline_se", Values::F64(diff_se))
        .with("limit", Values::F64(limit))
}

/// The table as Markdown: one row per table row, one column per ε (hit@1 ± s.e.), then the
/// limit, the summary per ε, and the configurations chosen on the calibration users.
pub fn markdown(t: &UtilityTable) -> String {
    let mut s = String::new();
    let _ = write!(s, "| |");
    for e in &t.epsilons {
        let _ = write!(s, " ε = {e} |");
    }
    s.push('\n');
    let _ = writeln!(s, "|---|{}", "---|".repeat(t.epsilons.len()));
    for r in &t.rows {
        let _ = write!(s, "| {} |", r.label);
        for c in &r.cells {
            let _ = write!(s, " {:.4} ± {:.4} |", c.hit, c.se);
        }
        s.push('\n');
    }
    let _ = write!(s, "| limit min(1, e^ε × best fixed item) |");
    for l in &t.limit {
        let _ = write!(s, " {l:.4} |");
    }
    s.push('\n');
    s
}

/// The summary: per ε the best private row, its paired difference to the best public baseline,
/// the verdict and the share of the limit; then the configurations chosen on calibration users.
pub fn summary(t: &UtilityTable) -> String {
    let mut s = String::new();
    let base = t
        .rows
        .iter()
        .find(|r| r.mechanism == t.best_baseline)
        .expect("the best baseline is a row");
    let _ = writeln!(
        s,
        "{} evaluated users, {} calibration users; best public baseline: {} ({:.4} ± {:.4}); \
         best fixed item in-sample {:.4} (the limit's base)",
        t.users,
        t.calibration_users,
        t.best_baseline,
        base.cells[0].hit,
        base.cells[0].se,
        t.best_fixed_in_sample
    );
    for v in &t.verdicts {
        let _ = writeln!(
            s,
            "eps = {}: {} {} the best public baseline: {:.4} ({:+.4} ± {:.4}; {:.0}% of the limit)",
            v.epsilon,
            v.best_private,
            v.verdict,
            v.hit,
            v.vs_baseline,
            v.vs_baseline_se,
            100.0 * v.share_of_limit
        );
    }
    s
}

/// The configurations each tuned row chose per ε, one line per row.
pub fn choices(t: &UtilityTable) -> String {
    let mut s = String::new();
    for r in t
        .rows
        .iter()
        .filter(|r| r.tuned && r.kind == RowKind::Private)
    {
        let cells: Vec<String> = r
            .cells
            .iter()
            .zip(&t.epsilons)
            .map(|(c, e)| format!("eps {e}: {}", c.config))
            .collect();
        let _ = writeln!(s, "{}: {}", r.label, cells.join("; "));
    }
    s
}

/// Per served row and ε, its calibration estimate (on calibration users its choice did not
/// read) beside its hit@1 on the evaluated users, and a flag where that hit@1 is below the best
/// free option's by more than 2 paired s.e.
pub fn served(t: &UtilityTable) -> String {
    let mut s = String::new();
    let free = t
        .rows
        .iter()
        .find(|r| r.mechanism == t.best_free)
        .expect("the best free option is a row");
    let _ = writeln!(
        s,
        "served rows: calibration estimate (users the choice did not read) beside test hit@1; \
         best free option on the test users: {} ({:.4} ± {:.4})",
        t.best_free, free.cells[0].hit, free.cells[0].se
    );
    for r in &t.rows {
        for (c, e) in r.cells.iter().zip(&t.epsilons) {
            let Some(cal) = c.calibration else { continue };
            let _ = writeln!(
                s,
                "{} at eps {e}: calibration {cal} | test {:.4} ± {:.4}{}",
                r.label,
                c.hit,
                c.se,
                if c.below_free {
                    format!(
                        "  BELOW the best free option ({}) by more than 2 s.e.",
                        t.best_free
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    s
}

/// The frontier: hit@1 against ε (log x).
pub fn frontier_png(path: &Path, title: &str, t: &UtilityTable) -> Result<()> {
    let (xlo, xhi) = t
        .epsilons
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &e| {
            (a.min(e), b.max(e))
        });
    let (xlo, xhi) = if xlo < xhi {
        (xlo, xhi)
    } else {
        (xlo / 2.0, xlo * 2.0)
    };
    let (xlo, xhi) = (xlo / 1.25, xhi * 1.25);
    // Up to a little above the best row (the non-private top-1, usually): the limit, which
    // reaches 1, leaves the frame where it is far above every recommender.
    let ymax = (t
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| c.hit + c.se))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        * 1.35)
        .clamp(1e-3, 1.0);
    render(path, (1100, 620), |root| {
        let (main, legend) = root.split_horizontally(760);
        let mut chart = ChartBuilder::on(&main)
            .caption(title, (FONT, 16))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d((xlo..xhi).log_scale(), 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("epsilon")
            .y_desc("hit@1 (evaluated users)")
            .x_label_formatter(&|v| format!("{v}"))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let mut entries: Vec<(String, RGBColor, bool)> = Vec::new();
        // The limit as a smooth curve, up to the top of the frame.
        let limit: Vec<(f64, f64)> = (0..=80)
            .map(|i| {
                let e = xlo * (xhi / xlo).powf(f64::from(i) / 80.0);
                (e, (e.exp() * t.best_fixed_in_sample).min(1.0))
            })
            .take_while(|p| p.1 <= ymax)
            .collect();
        let grey = RGBColor(120, 120, 120);
        chart
            .draw_series(DashedLineSeries::new(limit, 3, 4, grey.stroke_width(2)))
            .map_err(err)?;
        entries.push(("limit min(1, e^eps x best fixed)".into(), grey, false));
        // One colour per baseline, the non-private row navy: none of them the colour of a
        // mechanism these plots draw (rnm is black, em brown, krr olive).
        let palette = [
            RGBColor(31, 119, 180),
            RGBColor(23, 190, 207),
            RGBColor(214, 39, 40),
            RGBColor(200, 0, 200),
            RGBColor(0, 128, 128),
            RGBColor(128, 0, 0),
        ];
        let mut b = 0;
        for r in &t.rows {
            let pts: Vec<(f64, f64)> = t
                .epsilons
                .iter()
                .copied()
                .zip(r.cells.iter().map(|c| c.hit))
                .filter(|p| p.1.is_finite())
                .collect();
            match r.kind {
                RowKind::Baseline | RowKind::NotPrivate => {
                    let c = if r.kind == RowKind::NotPrivate {
                        RGBColor(0, 0, 128)
                    } else {
                        b += 1;
                        palette[(b - 1) % palette.len()]
                    };
                    chart
                        .draw_series(DashedLineSeries::new(pts, 8, 5, c.stroke_width(2)))
                        .map_err(err)?;
                    entries.push((short_label(r), c, false));
                }
                RowKind::Private => {
                    let c = mech_color(&r.mechanism);
                    let style = if r.tuned {
                        c.stroke_width(3)
                    } else {
                        c.mix(0.55).stroke_width(1)
                    };
                    if r.prior {
                        // Tuned with the prior: dashed, beside the solid row without it.
                        chart
                            .draw_series(DashedLineSeries::new(
                                pts.clone(),
                                6,
                                4,
                                c.stroke_width(2),
                            ))
                            .map_err(err)?;
                    } else {
                        chart
                            .draw_series(LineSeries::new(pts.clone(), style))
                            .map_err(err)?;
                    }
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                        .map_err(err)?;
                    // ± one standard error.
                    chart
                        .draw_series(
                            t.epsilons
                                .iter()
                                .zip(&r.cells)
                                .filter(|(_, c)| c.hit.is_finite() && c.se.is_finite())
                                .map(|(&e, cell)| {
                                    PathElement::new(
                                        [
                                            (e, (cell.hit - cell.se).max(0.0)),
                                            (e, cell.hit + cell.se),
                                        ],
                                        c.stroke_width(1),
                                    )
                                }),
                        )
                        .map_err(err)?;
                    entries.push((short_label(r), c, r.tuned && !r.prior));
                }
            }
        }
        let text_style = (FONT, 13).into_font().color(&BLACK);
        for (i, (label, c, solid)) in entries.iter().enumerate() {
            let y = 30 + 20 * i as i32;
            let dashed = !*solid && !label.contains(", every item");
            let seg = if dashed {
                vec![(6, y + 7), (16, y + 7)]
            } else {
                vec![(6, y + 7), (34, y + 7)]
            };
            let style = if *solid {
                c.stroke_width(3)
            } else if dashed {
                c.stroke_width(2)
            } else {
                c.mix(0.55).stroke_width(1)
            };
            legend.draw(&PathElement::new(seg, style)).map_err(err)?;
            if dashed {
                legend
                    .draw(&PathElement::new([(24, y + 7), (34, y + 7)], style))
                    .map_err(err)?;
            }
            let text: String = label.chars().take(52).collect();
            legend
                .draw(&Text::new(text, (40, y), text_style.clone()))
                .map_err(err)?;
        }
        Ok(())
    })
}

/// A legend label: what the row is, in a few words.
fn short_label(r: &crate::evaluate::utility::UtilityRow) -> String {
    match (r.kind, r.mechanism.as_str(), r.tuned) {
        (RowKind::Baseline, "best-fixed", _) => "best fixed item (calibration users), 0-DP".into(),
        (RowKind::Baseline, m, _) => format!("{m}, 0-DP"),
        (RowKind::NotPrivate, _, _) => "non-private top-1 (NOT private)".into(),
        (_, "krr", true) => "krr, tuned pool or fixed item".into(),
        (_, m, true) if r.prior => format!("{m}, tuned pool, clip and prior"),
        (_, m, true) => format!("{m}, tuned pool and clip"),
        (_, m, false) => format!("{m}, every item"),
    }
}

/// Writes `utility.csv`, `utility.parquet`, `utility.json`, `utility.md` and `frontier.png` into
/// `dir`; returns the paths.
pub fn write_utility(dir: &Path, title: &str, t: &UtilityTable) -> Result<Vec<PathBuf>> {
    crate::io::ensure_dir(dir)?;
    let mut files = tidy(t).write(dir, "utility")?;
    let json = serde_json::to_vec_pretty(t)
        .map_err(|e| Error::Invalid(format!("serialising the utility table: {e}")))?;
    let p = dir.join("utility.json");
    write_atomic(&p, &json)?;
    files.push(p);
    let p = dir.join("utility.md");
    let text = format!("{}\n{}\n{}", markdown(t), summary(t), choices(t));
    write_atomic(&p, text.as_bytes())?;
    files.push(p);
    let p = dir.join("frontier.png");
    frontier_png(&p, title, t)?;
    files.push(p);
    Ok(files)
}
