//! A sampler's pictures, as Stan and ArviZ users know them: the trace of a
//! parameter (its chains' draws in order, and their histogram), its rank
//! plot (the ranks of each chain's draws among all chains' draws: flat
//! histograms when the chains mix), and the energy plot (the marginal
//! energy against the energy transitions, whose widths E-BFMI compares).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::{
    colour, draw_to, extent, histogram, legend, mesh, message, ChartLayout, Laid, Layout,
    PixelRect, PlotError, FONT,
};

/// The most chains a trace or a rank plot draws (the first ones): more
/// lines than this hide one another. The histogram of a trace plot and the
/// ranks count every chain.
pub const MAX_CHAINS_DRAWN: usize = 8;

const HISTOGRAM_BINS: usize = 40;

/// The width, in pixels, of the column right of a trace plot's chart that
/// holds its legend (the chains' colours), outside the draws.
const LEGEND_WIDTH: u32 = 110;

/// The height of a rank plot's panel, one per chain, and of its title.
const RANK_PANEL_HEIGHT: u32 = 120;
const RANK_TITLE_HEIGHT: u32 = 60;

/// Writes the trace plot of `parameter` to `path` (SVG or PNG): left, the
/// histogram of every chain's draws; right, the draws of the first
/// [`MAX_CHAINS_DRAWN`] chains in order, and right of them the legend.
/// `chains[c]` holds chain `c`'s draws.
pub fn trace(path: &Path, parameter: &str, chains: &[Vec<f64>]) -> Result<Layout, PlotError> {
    draw_to!(path, (1200, 400), |root| draw_trace(
        root, parameter, chains
    ))
}

/// Writes the rank plot of `parameter` to `path`: the ranks of every draw
/// among all chains' draws, and for each of the first [`MAX_CHAINS_DRAWN`]
/// chains the histogram of its draws' ranks, every panel on one scale, with
/// the count a uniform histogram would have dashed.
pub fn rank(path: &Path, parameter: &str, chains: &[Vec<f64>]) -> Result<Layout, PlotError> {
    let shown = chains.len().clamp(1, MAX_CHAINS_DRAWN) as u32;
    let height = RANK_TITLE_HEIGHT + RANK_PANEL_HEIGHT * shown;
    draw_to!(path, (900, height), |root| draw_rank(
        root, parameter, chains
    ))
}

/// Writes the energy plot to `path`: the histogram of each chain's energy
/// minus its mean (the marginal energy), and of the changes of energy from
/// one draw to the next (the transitions), every chain pooled. `note` is
/// printed under the title (the caller's E-BFMI figures).
pub fn energy(path: &Path, chains: &[Vec<f64>], note: &str) -> Result<Layout, PlotError> {
    draw_to!(path, (900, 500), |root| draw_energy(root, chains, note))
}

/// "chains 0-7 of 256 drawn", or "4 chains".
fn chains_note(chains: usize) -> String {
    if chains > MAX_CHAINS_DRAWN {
        format!("chains 0-{} of {chains} drawn", MAX_CHAINS_DRAWN - 1)
    } else if chains == 1 {
        "1 chain".into()
    } else {
        format!("{chains} chains")
    }
}

fn draw_trace<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    parameter: &str,
    chains: &[Vec<f64>],
) -> Laid {
    let title = format!("{parameter}: trace ({})", chains_note(chains.len()));
    let root = root.titled(&title, (FONT, 22)).map_err(message)?;
    let (left, right) = root.split_horizontally(360);
    let range = extent(chains.iter().flatten().copied());
    let mut layout = Layout::default();
    layout.charts.push(draw_histogram(&left, chains, range)?);
    let (plot, key) = right.split_horizontally(right.dim_in_pixel().0.saturating_sub(LEGEND_WIDTH));
    let longest = chains.iter().map(Vec::len).max().unwrap_or(0).max(2);
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..(longest - 1) as f64, range.0..range.1)
        .map_err(message)?;
    mesh(&mut chart, 14)
        .x_desc("draw")
        .y_desc(parameter)
        .draw()
        .map_err(message)?;
    let shown = chains.len().min(MAX_CHAINS_DRAWN);
    for (c, draws) in chains.iter().take(shown).enumerate() {
        let points = draws
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| (i as f64, *v));
        chart
            .draw_series(LineSeries::new(points, colour(c).mix(0.8).stroke_width(1)))
            .map_err(message)?;
    }
    layout
        .charts
        .push(ChartLayout::of(&chart, "draw", parameter));
    let top = chart.plotting_area().get_pixel_range().1.start;
    layout.legend = Some(draw_key(&key, shown, top)?);
    Ok(layout)
}

/// The legend of a trace plot in `area` (beside its chart), from the
/// height `top` (in the picture's pixels) down: each chain's colour and
/// name. Gives the legend's rectangle.
fn draw_key<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chains: usize,
    top: i32,
) -> Result<PixelRect, String> {
    const ROW: i32 = 20;
    const LINE: i32 = 18;
    let style = TextStyle::from((FONT, 13)).pos(Pos::new(HPos::Left, VPos::Center));
    let (x0, y0) = area.get_base_pixel();
    let (left, first) = (12, top - y0);
    let mut widest = 0;
    for c in 0..chains {
        let y = first + ROW * c as i32 + ROW / 2;
        let name = format!("chain {c}");
        widest = widest.max(area.estimate_text_size(&name, &style).map_err(message)?.0);
        area.draw(&PathElement::new(
            [(left, y), (left + LINE, y)],
            colour(c).stroke_width(2),
        ))
        .map_err(message)?;
        area.draw(&Text::new(name, (left + LINE + 6, y), style.clone()))
            .map_err(message)?;
    }
    Ok(PixelRect {
        left: x0 + left,
        top: y0 + first,
        right: x0 + left + LINE + 6 + widest as i32,
        bottom: y0 + first + ROW * chains as i32,
    })
}

/// The histogram of every chain's draws over `range`.
fn draw_histogram<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chains: &[Vec<f64>],
    range: (f64, f64),
) -> Result<ChartLayout, String> {
    let counts = histogram(chains.iter().flatten().copied(), range, HISTOGRAM_BINS);
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64 * 1.05;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(range.0..range.1, 0f64..top)
        .map_err(message)?;
    let (x_label, y_label) = ("value (every chain)", "draws");
    mesh(&mut chart, 14)
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(5)
        .draw()
        .map_err(message)?;
    let heights = counts.iter().map(|&n| n as f64);
    chart
        .draw_series(bars(range, heights, 0.0, colour(0).mix(0.6).filled()))
        .map_err(message)?;
    Ok(ChartLayout::of(&chart, x_label, y_label))
}

/// A histogram's bars: `heights` over equal bins spanning `range`, each
/// narrowed by `gap` (a fraction of its width) on both sides.
fn bars(
    range: (f64, f64),
    heights: impl ExactSizeIterator<Item = f64>,
    gap: f64,
    style: ShapeStyle,
) -> impl Iterator<Item = Rectangle<(f64, f64)>> {
    let width = (range.1 - range.0) / heights.len().max(1) as f64;
    heights.enumerate().map(move |(i, h)| {
        let x0 = range.0 + i as f64 * width;
        Rectangle::new(
            [(x0 + width * gap, 0.0), (x0 + width * (1.0 - gap), h)],
            style,
        )
    })
}

/// Each draw's rank (0 for the smallest) among every chain's draws, by
/// chain; ties (and NaNs, which sort last) ranked in chain then draw order.
pub fn ranks(chains: &[Vec<f64>]) -> Vec<Vec<usize>> {
    let mut order: Vec<(f64, usize, usize)> = chains
        .iter()
        .enumerate()
        .flat_map(|(c, draws)| draws.iter().enumerate().map(move |(i, &v)| (v, c, i)))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut ranks: Vec<Vec<usize>> = chains.iter().map(|d| vec![0; d.len()]).collect();
    for (rank, &(_, c, i)) in order.iter().enumerate() {
        ranks[c][i] = rank;
    }
    ranks
}

/// Bins of a rank histogram: 20, fewer when a chain has few draws.
fn rank_bins(draws: usize) -> usize {
    (draws / 5).clamp(1, 20)
}

fn draw_rank<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    parameter: &str,
    chains: &[Vec<f64>],
) -> Laid {
    let title = format!("{parameter}: ranks ({})", chains_note(chains.len()));
    let root = root.titled(&title, (FONT, 22)).map_err(message)?;
    let ranks = ranks(chains);
    let total = chains.iter().map(Vec::len).sum::<usize>().max(1);
    let shown = chains.len().clamp(1, MAX_CHAINS_DRAWN);
    let bins = rank_bins(chains.iter().map(Vec::len).min().unwrap_or(0));
    let range = (0.0, total as f64);
    let counts: Vec<Vec<u64>> = ranks
        .iter()
        .take(shown)
        .map(|r| histogram(r.iter().map(|&r| r as f64), range, bins))
        .collect();
    // One scale for every panel, so that their bars compare.
    let most_expected =
        ranks.iter().take(shown).map(Vec::len).max().unwrap_or(0) as f64 / bins as f64;
    let most = counts.iter().flatten().copied().max().unwrap_or(0) as f64;
    let top = most.max(most_expected) * 1.15 + 1.0;
    let rows = root.split_evenly((shown, 1));
    let mut layout = Layout::default();
    for (c, (row, counts)) in rows.iter().zip(&counts).enumerate() {
        let panel = RankPanel {
            chain: c,
            counts,
            expected: ranks[c].len() as f64 / bins as f64,
            range,
            top,
            last: c + 1 == shown,
        };
        layout.charts.push(draw_rank_row(row, &panel)?);
    }
    Ok(layout)
}

/// One chain's panel of a rank plot.
struct RankPanel<'a> {
    chain: usize,
    /// The chain's draws per bin of ranks.
    counts: &'a [u64],
    /// The count of a bin were the chain's ranks uniform.
    expected: f64,
    /// The ranks (every chain's draws), and the count at the top of the scale.
    range: (f64, f64),
    top: f64,
    /// Whether it is the bottom panel, which names the rank axis.
    last: bool,
}

/// One chain's rank histogram, titled with the chain, on the scale shared
/// by every panel.
fn draw_rank_row<DB: DrawingBackend>(
    row: &DrawingArea<DB, Shift>,
    panel: &RankPanel<'_>,
) -> Result<ChartLayout, String> {
    let (range, chain) = (panel.range, panel.chain);
    let x_label = if panel.last {
        "rank among every chain's draws"
    } else {
        ""
    };
    let y_label = "draws";
    let mut chart = ChartBuilder::on(row)
        .caption(format!("chain {chain}"), (FONT, 13))
        .margin_left(12)
        .margin_right(24)
        .margin_top(2)
        .x_label_area_size(if panel.last { 40 } else { 22 })
        .y_label_area_size(70)
        .build_cartesian_2d(range.0..range.1, 0f64..panel.top)
        .map_err(message)?;
    mesh(&mut chart, 12)
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(6)
        .y_labels(3)
        .draw()
        .map_err(message)?;
    let heights = panel.counts.iter().map(|&n| n as f64);
    chart
        .draw_series(bars(range, heights, 0.05, colour(chain).mix(0.7).filled()))
        .map_err(message)?;
    chart
        .draw_series(DashedLineSeries::new(
            [(range.0, panel.expected), (range.1, panel.expected)],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(message)?;
    Ok(ChartLayout::of(&chart, x_label, y_label))
}

/// Each chain's energies minus their mean, and the changes from each draw
/// to the next, every chain pooled.
pub fn energy_samples(chains: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let mut marginal = Vec::new();
    let mut transitions = Vec::new();
    for energies in chains {
        let finite: Vec<f64> = energies.iter().copied().filter(|e| e.is_finite()).collect();
        if finite.is_empty() {
            continue;
        }
        let mean = finite.iter().sum::<f64>() / finite.len() as f64;
        marginal.extend(finite.iter().map(|e| e - mean));
        transitions.extend(finite.windows(2).map(|w| w[1] - w[0]));
    }
    (marginal, transitions)
}

fn draw_energy<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chains: &[Vec<f64>],
    note: &str,
) -> Laid {
    let title = format!(
        "energy ({})",
        chains_note(chains.len()).replace(" drawn", "")
    );
    let root = root.titled(&title, (FONT, 22)).map_err(message)?;
    let (marginal, transitions) = energy_samples(chains);
    let range = extent(marginal.iter().chain(&transitions).copied());
    let bins = HISTOGRAM_BINS;
    let density = |values: &[f64]| -> Vec<f64> {
        let n = values.len().max(1) as f64;
        let width = (range.1 - range.0) / bins as f64;
        histogram(values.iter().copied(), range, bins)
            .into_iter()
            .map(|c| c as f64 / (n * width))
            .collect()
    };
    let series = [
        ("marginal energy (E - mean E)", density(&marginal), 0),
        (
            "energy transition (E[n] - E[n-1])",
            density(&transitions),
            1,
        ),
    ];
    let top = series
        .iter()
        .flat_map(|(_, d, _)| d.iter().copied())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(note, (FONT, 15))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(range.0..range.1, 0f64..top)
        .map_err(message)?;
    let (x_label, y_label) = ("energy", "density");
    mesh(&mut chart, 14)
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(message)?;
    for (label, heights, c) in series {
        let fill = colour(c).mix(0.45).filled();
        chart
            .draw_series(bars(range, heights.into_iter(), 0.0, fill))
            .map_err(message)?
            .label(label)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 16, y + 6)], colour(c).mix(0.45).filled())
            });
    }
    legend(&mut chart, 14)?;
    Ok(Layout {
        charts: vec![ChartLayout::of(&chart, x_label, y_label)],
        ..Layout::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_count_every_chain_and_break_ties_in_order() {
        let chains = vec![vec![3.0, 1.0], vec![2.0, 1.0, f64::NAN]];
        assert_eq!(ranks(&chains), vec![vec![3, 0], vec![2, 1, 4]]);
    }

    #[test]
    fn energy_samples_centre_each_chain() {
        let (marginal, transitions) = energy_samples(&[vec![1.0, 3.0], vec![10.0, 10.0, 13.0]]);
        assert_eq!(marginal, [-1.0, 1.0, -1.0, -1.0, 2.0]);
        assert_eq!(transitions, [2.0, 0.0, 3.0]);
    }
}
