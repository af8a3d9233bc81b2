//! Pictures: a sampler's trace, rank and energy plots, a run's lane
//! utilization profile and a training run's loss curve, drawn in Rust with
//! `plotters` as SVG or PNG (by the file's extension), text set in the
//! bundled DejaVu Sans so that no system font library is needed.
//!
//! This crate draws numbers it is given. It must not know the IR, the
//! executors or the sampler: the command line turns a run's profile or a
//! sampler's draws into the plain figures below.

use std::path::{Path, PathBuf};

use plotters::chart::MeshStyle;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;

mod profile;
mod sampler;
mod training;

pub use profile::{profile, BlockBar, ProfilePicture, StepSpan};
pub use sampler::{energy, rank, trace};
pub use training::{loss_curve, LossPicture};

/// A rectangle of a picture, in pixels from its top left corner (`right`
/// and `bottom` excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelRect {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl PixelRect {
    /// Whether the two rectangles share a pixel.
    pub fn intersects(&self, other: &PixelRect) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    /// The rectangle of a drawing area (a chart's plotting area: where its
    /// data is drawn).
    fn of<DB: DrawingBackend, CT: CoordTranslate>(area: &DrawingArea<DB, CT>) -> PixelRect {
        let (x, y) = area.get_pixel_range();
        PixelRect {
            left: x.start,
            top: y.start,
            right: x.end,
            bottom: y.end,
        }
    }
}

/// One chart of a picture as it was drawn: where its data is, the ranges
/// of its axes and their labels.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartLayout {
    /// The plotting area (inside the axes).
    pub area: PixelRect,
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub x_label: String,
    pub y_label: String,
}

impl ChartLayout {
    fn of<DB: DrawingBackend>(chart: &Chart<'_, DB>, x_label: &str, y_label: &str) -> ChartLayout {
        let (x, y) = (chart.x_range(), chart.y_range());
        ChartLayout {
            area: PixelRect::of(chart.plotting_area()),
            x_range: (x.start, x.end),
            y_range: (y.start, y.end),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
        }
    }
}

/// Where a picture put what it drew: its charts in drawing order, its
/// legend, and text it set beside a chart (a profile's block names). What
/// a test checks a picture by, rather than its pixels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    pub charts: Vec<ChartLayout>,
    pub legend: Option<PixelRect>,
    pub labels: Vec<PixelRect>,
}

/// Why a picture could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The path names no picture format this crate writes.
    #[error("{path}: a picture is written as .svg or .png, not `{extension}`")]
    Format { path: PathBuf, extension: String },
    /// Drawing or writing the file failed.
    #[error("{path}: cannot draw the picture: {message}")]
    Draw { path: PathBuf, message: String },
}

/// The formats a picture is written in, by the path's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format of `path` (`.svg` or `.png`, in any case).
    pub fn of(path: &Path) -> Result<Format, PlotError> {
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        match extension.as_str() {
            "svg" => Ok(Format::Svg),
            "png" => Ok(Format::Png),
            _ => Err(PlotError::Format {
                path: path.to_owned(),
                extension: if extension.is_empty() {
                    "no extension".into()
                } else {
                    format!(".{extension}")
                },
            }),
        }
    }
}

/// The font every picture's text is set in.
const FONT: &str = "sans-serif";

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bundled file is a valid font; were it not, text would fail
        // to draw and every picture would report it.
        let _ = plotters::style::register_font(
            FONT,
            FontStyle::Normal,
            include_bytes!("../fonts/DejaVuSans.ttf"),
        );
    });
}

/// The result of drawing on an area, whatever the backend's error type.
type Drawn = Result<(), String>;

/// What drawing a picture gives: its layout, or why it failed.
type Laid = Result<Layout, String>;

/// Formats a drawing error (whatever its backend) as a message.
fn message<E: std::fmt::Debug>(error: E) -> String {
    format!("{error:?}")
}

/// Fills `root` by `draw`, then writes it.
fn finish<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    draw: impl FnOnce(&DrawingArea<DB, Shift>) -> Laid,
) -> Laid {
    root.fill(&WHITE).map_err(message)?;
    let layout = draw(&root)?;
    root.present().map_err(message)?;
    Ok(layout)
}

/// Draws into `path` (SVG or PNG by its extension) a picture of `size`
/// pixels; `draw` is called with the backend's drawing area and gives the
/// picture's [`Layout`].
macro_rules! draw_to {
    ($path:expr, $size:expr, $draw:expr) => {{
        let path: &std::path::Path = $path;
        crate::register_font();
        let format = crate::Format::of(path)?;
        let drawn = match format {
            crate::Format::Svg => crate::finish(
                plotters::prelude::SVGBackend::new(path, $size).into_drawing_area(),
                |root| $draw(root),
            ),
            crate::Format::Png => crate::finish(
                plotters::prelude::BitMapBackend::new(path, $size).into_drawing_area(),
                |root| $draw(root),
            ),
        };
        drawn.map_err(|message| crate::PlotError::Draw {
            path: path.to_owned(),
            message,
        })
    }};
}
pub(crate) use draw_to;

/// An axis label: `300` rather than `300.0`, `0.25`, `-1.5e6`.
fn tick(v: &f64) -> String {
    let v = *v;
    if v != 0.0 && (v.abs() >= 1e6 || v.abs() < 1e-3) {
        return format!("{v:.2e}");
    }
    if v == v.round() {
        return format!("{}", v as i64);
    }
    let text = format!("{v:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A chart over two `f64` axes.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Every chart's mesh: short tick labels, the axes described, text of
/// `size` pixels in the picture's font, no minor lines; the caller adds
/// what its chart needs and draws it.
fn mesh<'a, 'b, DB: DrawingBackend>(
    chart: &'b mut Chart<'a, DB>,
    size: u32,
) -> MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    let mut style = chart.configure_mesh();
    style
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style((FONT, size))
        .axis_desc_style((FONT, size + 1))
        .light_line_style(WHITE);
    style
}

/// Draws the legend of `chart`'s labelled series, upper right, inside the
/// plotting area (for pictures whose data leaves that corner free).
fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>, size: u32) -> Drawn {
    chart
        .configure_series_labels()
        .label_font((FONT, size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(message)
}

/// The colour of series `i` (chains, blocks).
fn colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLOURS[i % COLOURS.len()]
}

/// The smallest and largest finite values of `values`, widened a little
/// (and made a range when they are equal); `(0, 1)` when there are none.
fn extent(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        low = low.min(v);
        high = high.max(v);
    }
    if low > high {
        return (0.0, 1.0);
    }
    if low == high {
        let pad = if low == 0.0 { 1.0 } else { low.abs() * 0.05 };
        return (low - pad, high + pad);
    }
    let pad = (high - low) * 0.04;
    (low - pad, high + pad)
}

/// Counts of `values` (the finite ones) in `bins` equal bins over
/// `(low, high)`.
fn histogram(
    values: impl IntoIterator<Item = f64>,
    (low, high): (f64, f64),
    bins: usize,
) -> Vec<u64> {
    let mut counts = vec![0u64; bins];
    let width = (high - low) / bins as f64;
    for v in values.into_iter().filter(|v| v.is_finite()) {
        let bin = (((v - low) / width) as usize).min(bins - 1);
        counts[bin] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(Format::of(Path::new("a/b.svg")).unwrap(), Format::Svg);
        assert_eq!(Format::of(Path::new("b.PNG")).unwrap(), Format::Png);
        let error = Format::of(Path::new("b.jpg")).unwrap_err().to_string();
        assert_eq!(
            error,
            "b.jpg: a picture is written as .svg or .png, not `.jpg`"
        );
        let error = Format::of(Path::new("plot")).unwrap_err().to_string();
        assert!(error.contains("not `no extension`"), "{error}");
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(&300.0), "300");
        assert_eq!(tick(&-0.25), "-0.25");
        assert_eq!(tick(&0.0), "0");
        assert_eq!(tick(&2.5e7), "2.50e7");
        assert_eq!(tick(&0.33333333), "0.3333");
    }

    #[test]
    fn extents_and_histograms_ignore_what_is_not_finite() {
        assert_eq!(extent([f64::NAN, f64::INFINITY]), (0.0, 1.0));
        assert_eq!(extent([2.0, 2.0]), (1.9, 2.1));
        let counts = histogram([0.0, 0.5, 1.0, f64::NAN, 0.99], (0.0, 1.0), 2);
        assert_eq!(counts, [1, 3]);
    }
}
