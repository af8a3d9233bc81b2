//! A training run's picture: the loss of every step against the step and,
//! when the run evaluated on a dev set, the dev metric of every epoch
//! against the step that ended it, in a chart of its own below (its scale
//! is not the loss's).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{colour, draw_to, extent, mesh, message, ChartLayout, Laid, Layout, PlotError, FONT};

/// The height of each chart of a loss picture (and its share of the title).
const CHART_HEIGHT: u32 = 360;

/// What a loss picture draws: `(step, loss)` per step; per epoch
/// `(step, mean)` of the dev metric named `dev_name`, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LossPicture {
    pub losses: Vec<(f64, f64)>,
    pub dev: Vec<(f64, f64)>,
    pub dev_name: String,
}

/// Writes the loss curve to `path` (SVG or PNG): the loss against the
/// step; below it, when `picture.dev` has points, the dev metric against
/// the step, on the same step axis.
pub fn loss_curve(path: &Path, picture: &LossPicture) -> Result<Layout, PlotError> {
    let charts = if picture.dev.is_empty() { 1 } else { 2 };
    draw_to!(path, (1000, CHART_HEIGHT * charts), |root| draw_loss(
        root, picture
    ))
}

fn draw_loss<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, picture: &LossPicture) -> Laid {
    let root = root.titled("training loss", (FONT, 22)).map_err(message)?;
    let last = picture
        .losses
        .iter()
        .chain(&picture.dev)
        .map(|p| p.0)
        .fold(1.0, f64::max);
    let steps = (0.0, last);
    let mut layout = Layout::default();
    if picture.dev.is_empty() {
        layout
            .charts
            .push(draw_series(&root, &picture.losses, steps, "loss", 0)?);
        return Ok(layout);
    }
    let height = root.dim_in_pixel().1;
    let (top, bottom) = root.split_vertically(height / 2);
    layout
        .charts
        .push(draw_series(&top, &picture.losses, steps, "loss", 0)?);
    let dev_label = format!("dev {}", picture.dev_name);
    layout
        .charts
        .push(draw_series(&bottom, &picture.dev, steps, &dev_label, 1)?);
    Ok(layout)
}

/// One chart: `points` as a line (with a dot per point when there are few)
/// against the step, over `steps`.
fn draw_series<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    points: &[(f64, f64)],
    steps: (f64, f64),
    y_label: &str,
    series: usize,
) -> Result<ChartLayout, String> {
    let range = extent(points.iter().map(|p| p.1));
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(steps.0..steps.1, range.0..range.1)
        .map_err(message)?;
    mesh(&mut chart, 14)
        .x_desc("step")
        .y_desc(y_label)
        .draw()
        .map_err(message)?;
    let finite = || points.iter().copied().filter(|p| p.1.is_finite());
    chart
        .draw_series(LineSeries::new(finite(), colour(series).stroke_width(2)))
        .map_err(message)?;
    if points.len() <= 100 {
        chart
            .draw_series(finite().map(|p| Circle::new(p, 3, colour(series).filled())))
            .map_err(message)?;
    }
    Ok(ChartLayout::of(&chart, "step", y_label))
}
