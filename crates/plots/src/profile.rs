//! The picture of a run's profile: above, the lane utilization of each
//! step in order (the fraction of the threads of control alive that the
//! step ran); below, each block's steps, the part of them its lanes used
//! dark, the idle part light (the utilization figure of TFP's
//! autobatching paper, for any program).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::{
    colour, draw_to, mesh, message, ChartLayout, Laid, Layout, PixelRect, PlotError, FONT,
};

/// Consecutive steps and the lanes they used.
#[derive(Clone, Debug, PartialEq)]
pub struct StepSpan {
    /// The first step of the span (0 for the run's first).
    pub first_step: u64,
    pub steps: u64,
    /// Rows run over threads of control alive, over the span's steps.
    pub utilization: f64,
}

/// One block of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockBar {
    /// How the picture names it: `fib bb1 (line 8)`.
    pub label: String,
    /// Times it ran.
    pub executions: u64,
    /// Its lane utilization over those executions.
    pub utilization: f64,
    /// The user operations it holds.
    pub operations: u64,
}

/// What a profile picture shows.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfilePicture {
    pub title: String,
    /// The run's steps in order.
    pub spans: Vec<StepSpan>,
    /// The blocks that ran, in program order.
    pub blocks: Vec<BlockBar>,
}

/// The most blocks the picture lists (the most executed, in program
/// order); the caption says how many are left out.
pub const MAX_BLOCKS_DRAWN: usize = 60;

const TIMELINE_HEIGHT: u32 = 300;
const BLOCK_ROW_HEIGHT: u32 = 24;

/// Writes the profile picture to `path` (SVG or PNG).
pub fn profile(path: &Path, picture: &ProfilePicture) -> Result<Layout, PlotError> {
    let shown = shown_blocks(&picture.blocks);
    let height = TIMELINE_HEIGHT + 110 + BLOCK_ROW_HEIGHT * shown.len().max(1) as u32;
    draw_to!(path, (1200, height), |root| draw_profile(
        root, picture, &shown
    ))
}

/// The blocks drawn: every block, or the most executed ones, in program
/// order.
fn shown_blocks(blocks: &[BlockBar]) -> Vec<&BlockBar> {
    let mut shown: Vec<(usize, &BlockBar)> = blocks.iter().enumerate().collect();
    if shown.len() > MAX_BLOCKS_DRAWN {
        shown.sort_by(|a, b| b.1.executions.cmp(&a.1.executions).then(a.0.cmp(&b.0)));
        shown.truncate(MAX_BLOCKS_DRAWN);
        shown.sort_by_key(|(i, _)| *i);
    }
    shown.into_iter().map(|(_, b)| b).collect()
}

fn draw_profile<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    picture: &ProfilePicture,
    shown: &[&BlockBar],
) -> Laid {
    let root = root.titled(&picture.title, (FONT, 22)).map_err(message)?;
    let (timeline, blocks) = root.split_vertically(TIMELINE_HEIGHT);
    let mut layout = Layout::default();
    layout
        .charts
        .push(draw_timeline(&timeline, &picture.spans)?);
    let left_out = picture.blocks.len() - shown.len();
    let (chart, labels) = draw_blocks(&blocks, shown, left_out)?;
    layout.charts.push(chart);
    layout.labels = labels;
    Ok(layout)
}

fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spans: &[StepSpan],
) -> Result<ChartLayout, String> {
    let steps = spans.last().map_or(1, |s| s.first_step + s.steps).max(1);
    let mut chart = ChartBuilder::on(area)
        .caption("lane utilization per step", (FONT, 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..steps as f64, 0f64..100.0)
        .map_err(message)?;
    let (x_label, y_label) = ("step", "lanes used (%)");
    mesh(&mut chart, 13)
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(message)?;
    chart
        .draw_series(spans.iter().map(|span| {
            let x0 = span.first_step as f64;
            Rectangle::new(
                [
                    (x0, 0.0),
                    (x0 + span.steps as f64, span.utilization * 100.0),
                ],
                colour(0).mix(0.75).filled(),
            )
        }))
        .map_err(message)?;
    Ok(ChartLayout::of(&chart, x_label, y_label))
}

/// The font size of the blocks' names.
const BLOCK_NAME_SIZE: u32 = 13;

/// Each block's steps as a bar, lanes used dark and idle light, its
/// figures right of the bar and its name left of the chart, in a column
/// of its own as wide as the longest name (the chart's steps start at 0:
/// no axis runs under the names). Gives the chart and the names' boxes.
fn draw_blocks<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    blocks: &[&BlockBar],
    left_out: usize,
) -> Result<(ChartLayout, Vec<PixelRect>), String> {
    let most = blocks
        .iter()
        .map(|b| b.executions)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let caption = if left_out > 0 {
        format!(
            "steps per block: lanes used dark, idle light ({} most executed; {left_out} others not shown)",
            blocks.len()
        )
    } else {
        "steps per block: lanes used dark, idle light".to_string()
    };
    let rows = blocks.len().max(1);
    let name_style =
        TextStyle::from((FONT, BLOCK_NAME_SIZE)).pos(Pos::new(HPos::Right, VPos::Center));
    let mut widest = 0;
    for block in blocks {
        let (width, _) = area
            .estimate_text_size(&block.label, &name_style)
            .map_err(message)?;
        widest = widest.max(width);
    }
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(widest + 16)
        .build_cartesian_2d(0f64..most * 1.45, 0f64..rows as f64)
        .map_err(message)?;
    let x_label = "steps";
    mesh(&mut chart, 13)
        .x_desc(x_label)
        .disable_x_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .draw()
        .map_err(message)?;
    let mut names = Vec::with_capacity(blocks.len());
    let name_right = chart.plotting_area().get_pixel_range().0.start - 8;
    let (base_x, base_y) = area.get_base_pixel();
    for (i, block) in blocks.iter().enumerate() {
        // The first block at the top.
        let y = (rows - 1 - i) as f64;
        let used = block.executions as f64 * block.utilization;
        let full = block.executions as f64;
        let bars = [
            Rectangle::new([(0.0, y + 0.15), (used, y + 0.85)], colour(0).filled()),
            Rectangle::new(
                [(used, y + 0.15), (full, y + 0.85)],
                colour(0).mix(0.3).filled(),
            ),
        ];
        chart.draw_series(bars).map_err(message)?;
        let figures = format!(
            "{} steps, {:.0}% lanes, {} op{}",
            block.executions,
            block.utilization * 100.0,
            block.operations,
            if block.operations == 1 { "" } else { "s" }
        );
        chart
            .draw_series([Text::new(
                figures,
                (full + most * 0.01, y + 0.7),
                (FONT, 12),
            )])
            .map_err(message)?;
        let (_, centre) = chart.backend_coord(&(0.0, y + 0.5));
        area.draw(&Text::new(
            block.label.clone(),
            (name_right - base_x, centre - base_y),
            name_style.clone(),
        ))
        .map_err(message)?;
        let (width, height) = area
            .estimate_text_size(&block.label, &name_style)
            .map_err(message)?;
        names.push(PixelRect {
            left: name_right - width as i32,
            top: centre - height as i32 / 2,
            right: name_right,
            bottom: centre + height as i32 / 2,
        });
    }
    Ok((ChartLayout::of(&chart, x_label, ""), names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(executions: u64) -> BlockBar {
        BlockBar {
            label: format!("b{executions}"),
            executions,
            utilization: 0.5,
            operations: 1,
        }
    }

    #[test]
    fn many_blocks_show_the_most_executed_in_program_order() {
        let blocks: Vec<BlockBar> = (0..MAX_BLOCKS_DRAWN as u64 + 3).map(bar).collect();
        let shown = shown_blocks(&blocks);
        assert_eq!(shown.len(), MAX_BLOCKS_DRAWN);
        assert_eq!(shown[0].label, "b3");
        assert!(shown.windows(2).all(|w| w[0].executions < w[1].executions));
    }
}
