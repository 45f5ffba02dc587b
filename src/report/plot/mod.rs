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

mod select;
mod synth;
mod twocand;

pub use select::{
    fig13_combined_png, logratio_png, mse_vs_eps_png, spearman_hist_png, Fig13Column,
};
pub use synth::{corr_sweep_png, scenario_png, share_png};
pub use twocand::heatmaps_png;

use crate::error::{Error, Result};
use crate::experiments::synthetic::MseRow;
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
