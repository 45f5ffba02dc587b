//! PNG plots shaped like seed 001's figures: per scenario a top panel with every candidate's mean
//! score (dot) and sensitivity (vertical bar of length Δ_a centred on the mean) and a bottom panel
//! with MSE against ε on log–log axes, one line per mechanism; non-private mechanisms are dashed
//! and labelled so. Heatmaps for the two-candidate grids. Pure Rust (plotters' bitmap backend with
//! an embedded DejaVu font): no system libraries. With [`set_svg`] (`recsel --svg`) every plot is
//! also drawn, by the same code, as an SVG file beside its PNG (vector output for papers).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters_backend::{BackendColor, BackendCoord, DrawingErrorKind};

use crate::error::{Error, Result};
use crate::experiments::scenarios::{Dataset, Scenario};
use crate::experiments::synthetic::{CorrRow, MseRow};
use crate::experiments::twocand::{HgRow, Panel};
use crate::io::write_atomic;
use crate::mechanisms;

pub(crate) type Area<'a> = DrawingArea<AnyBackend<'a>, Shift>;

static ALSO_SVG: AtomicBool = AtomicBool::new(false);

/// Whether every plot is also written as SVG beside its PNG (`<name>.svg`); off by default.
/// Process-wide, set once by the front end (`recsel --svg`).
pub fn set_svg(on: bool) {
    ALSO_SVG.store(on, Ordering::Relaxed);
}

/// The two drawing targets: every plot is drawn through the same code into either.
pub(crate) enum AnyBackend<'a> {
    /// RGB pixels, encoded as PNG.
    Bitmap(BitMapBackend<'a>),
    /// SVG text.
    Svg(SVGBackend<'a>),
}

/// A drawing error of either backend, as text.
#[derive(Debug)]
pub(crate) struct BackendError(String);

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackendError {}

type Drawn = std::result::Result<(), DrawingErrorKind<BackendError>>;

fn conv<E: std::error::Error + Send + Sync>(
    e: DrawingErrorKind<E>,
) -> DrawingErrorKind<BackendError> {
    match e {
        DrawingErrorKind::DrawingError(e) => {
            DrawingErrorKind::DrawingError(BackendError(e.to_string()))
        }
        DrawingErrorKind::FontError(f) => DrawingErrorKind::FontError(f),
    }
}

macro_rules! each {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            AnyBackend::Bitmap($b) => $call.map_err(conv),
            AnyBackend::Svg($b) => $call.map_err(conv),
        }
    };
}

impl DrawingBackend for AnyBackend<'_> {
    type ErrorType = BackendError;

    fn get_size(&self) -> (u32, u32) {
        match self {
            AnyBackend::Bitmap(b) => b.get_size(),
            AnyBackend::Svg(b) => b.get_size(),
        }
    }

    fn ensure_prepared(&mut self) -> Drawn {
        each!(self, b => b.ensure_prepared())
    }

    fn present(&mut self) -> Drawn {
        each!(self, b => b.present())
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Drawn {
        each!(self, b => b.draw_pixel(point, color))
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Drawn {
        each!(self, b => b.draw_line(from, to, style))
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Drawn {
        each!(self, b => b.draw_rect(upper_left, bottom_right, style, fill))
    }

    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Drawn {
        each!(self, b => b.draw_path(path, style))
    }

    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Drawn {
        each!(self, b => b.draw_circle(center, radius, style, fill))
    }

    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Drawn {
        each!(self, b => b.fill_polygon(vert, style))
    }

    fn draw_text<T: plotters_backend::BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Drawn {
        each!(self, b => b.draw_text(text, style, pos))
    }

    fn estimate_text_size<T: plotters_backend::BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> std::result::Result<(u32, u32), DrawingErrorKind<BackendError>> {
        each!(self, b => b.estimate_text_size(text, style))
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Drawn {
        each!(self, b => b.blit_bitmap(pos, size, src))
    }
}

pub(crate) const FONT: &str = "sans-serif";

fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid TrueType; failure would be a build defect.
        register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
            .unwrap_or_else(|_| panic!("embedded DejaVu Sans is not a valid font"));
        register_font(FONT, FontStyle::Bold, dejavu::sans::bold())
            .unwrap_or_else(|_| panic!("embedded DejaVu Sans Bold is not a valid font"));
    });
}

pub(crate) fn err(e: impl std::fmt::Debug) -> Error {
    Error::Invalid(format!("drawing a plot: {e:?}"))
}

/// A fixed colour per mechanism, the same in every plot.
pub fn mech_color(name: &str) -> RGBColor {
    match name {
        "rnm" => RGBColor(0, 0, 0),
        "pf" => RGBColor(140, 140, 140),
        "em" => RGBColor(140, 86, 75),
        "rnm-laplace" => RGBColor(128, 128, 0),
        "rnmh" => RGBColor(214, 39, 40),
        "rnmh-laplace" => RGBColor(227, 119, 194),
        "rs" => RGBColor(31, 119, 180),
        "rs-tnb" => RGBColor(23, 190, 207),
        "rs-exp" => RGBColor(120, 170, 230),
        "gem" => RGBColor(255, 127, 14),
        "mgem" => RGBColor(44, 160, 44),
        "cgem" => RGBColor(148, 103, 189),
        "krr" => RGBColor(188, 160, 34),
        "random" => RGBColor(90, 90, 90),
        _ => RGBColor(60, 60, 60),
    }
}

fn private(name: &str) -> bool {
    mechanisms::spec(name).map(|s| s.private).unwrap_or(true)
}

/// Legend label: the name, marked when the mechanism is not private.
pub fn mech_label(name: &str) -> String {
    match name {
        "rnmh-laplace" => "rnmh-laplace ((k-1)ε-DP)".to_string(),
        n if !private(n) => format!("{n} (NOT private)"),
        n => n.to_string(),
    }
}

/// Mechanism names in first-seen order.
fn mech_order(rows: &[&MseRow]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.mechanism) {
            out.push(r.mechanism.clone());
        }
    }
    out
}

fn draw_legend(area: &Area<'_>, mechs: &[String]) -> Result<()> {
    let style = (FONT, 15).into_font().color(&BLACK);
    area.draw(&Text::new(
        "mechanism",
        (10, 40),
        (FONT, 16).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    for (i, m) in mechs.iter().enumerate() {
        let y = 65 + 22 * i as i32;
        let c = mech_color(m);
        let seg = [(10, y + 7), (40, y + 7)];
        if private(m) {
            area.draw(&PathElement::new(seg, c.stroke_width(2)))
                .map_err(err)?;
        } else {
            area.draw(&PathElement::new(
                [(10, y + 7), (20, y + 7)],
                c.stroke_width(2),
            ))
            .map_err(err)?;
            area.draw(&PathElement::new(
                [(28, y + 7), (40, y + 7)],
                c.stroke_width(2),
            ))
            .map_err(err)?;
        }
        area.draw(&Text::new(mech_label(m), (46, y), style.clone()))
            .map_err(err)?;
    }
    Ok(())
}

fn positive_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if lo.is_finite() {
        (lo / 1.6, hi * 1.6)
    } else {
        (1e-6, 1.0)
    }
}

/// MSE against `x` (ε, log, or share, linear) per mechanism, MSE on a log axis; zero MSEs are not
/// drawn (they have no place on a log axis).
fn mse_panel(
    area: &Area<'_>,
    caption: &str,
    rows: &[&MseRow],
    xs: &dyn Fn(&MseRow) -> f64,
    x_desc: &str,
    log_x: bool,
) -> Result<()> {
    let mechs = mech_order(rows);
    let (ylo, yhi) = positive_range(rows.iter().map(|r| r.mse));
    let (xlo, xhi) = rows
        .iter()
        .map(|r| xs(r))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    let (xlo, xhi) = if xlo < xhi {
        (xlo, xhi)
    } else {
        (xlo * 0.5, xlo * 2.0)
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, (FONT, 16))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(62);
    let series = |m: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.mechanism == m && r.mse > 0.0)
            .map(|r| (xs(r), r.mse))
            .collect()
    };
    macro_rules! draw_lines {
        ($chart:expr) => {{
            for m in &mechs {
                let pts = series(m);
                let c = mech_color(m);
                if private(m) {
                    $chart
                        .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                        .map_err(err)?;
                } else {
                    $chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 7, 5, c.stroke_width(2)))
                        .map_err(err)?;
                }
                $chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 2, c.filled())))
                    .map_err(err)?;
            }
        }};
    }
    if log_x {
        let mut chart = builder
            .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("MSE")
            .x_label_formatter(&|v| fmt_tick(*v))
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        draw_lines!(chart);
    } else {
        let mut chart = builder
            .build_cartesian_2d(xlo..xhi, (ylo..yhi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("MSE")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        draw_lines!(chart);
    }
    Ok(())
}

fn fmt_tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

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

/// Draws into an RGB buffer, encodes it as PNG (best compression, adaptive filters) and writes it
/// atomically to `path`; with [`set_svg`] also draws the same plot as SVG into `path` with the
/// extension `svg`.
pub(crate) fn render(
    path: &Path,
    size: (u32, u32),
    draw: impl Fn(&Area<'_>) -> Result<()>,
) -> Result<()> {
    fonts();
    if ALSO_SVG.load(Ordering::Relaxed) {
        let mut svg = String::new();
        {
            let root = AnyBackend::Svg(SVGBackend::with_string(&mut svg, size)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            draw(&root)?;
            root.present().map_err(err)?;
        }
        write_atomic(&path.with_extension("svg"), svg.as_bytes())?;
    }
    let mut buf = vec![255u8; size.0 as usize * size.1 as usize * 3];
    {
        let root =
            AnyBackend::Bitmap(BitMapBackend::with_buffer(&mut buf, size)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, size.0, size.1);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        enc.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut w = enc.write_header().map_err(err)?;
        w.write_image_data(&buf).map_err(err)?;
    }
    write_atomic(path, &bytes)
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
