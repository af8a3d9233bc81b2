//! Every picture, drawn in both formats: the files are complete pictures
//! of the stated size that name what they show.

use std::path::{Path, PathBuf};

use autobatch_plots::{
    energy, loss_curve, profile, rank, trace, BlockBar, LossPicture, PlotError, ProfilePicture,
    StepSpan,
};

/// A directory of its own for each test, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("autobatch-plots-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The width and height in a PNG's header.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

fn svg_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.trim_start().starts_with("<svg"),
        "{} is not an SVG",
        path.display()
    );
    assert!(text.trim_end().ends_with("</svg>"));
    text
}

/// Four chains of a slowly mixing AR(1) series, the last constant.
fn chains() -> Vec<Vec<f64>> {
    (0..4)
        .map(|c| {
            let mut x = c as f64;
            (0..300)
                .map(|i| {
                    x = if c == 3 {
                        1.5
                    } else {
                        0.9 * x + ((i * 7919 + c * 31) % 97) as f64 / 97.0 - 0.5
                    };
                    x
                })
                .collect()
        })
        .collect()
}

#[test]
fn trace_rank_and_energy_plots_are_written_in_both_formats() {
    let scratch = Scratch::new("trace_rank");
    let chains = chains();
    for extension in ["svg", "png"] {
        let path = scratch.path(&format!("trace.{extension}"));
        trace(&path, "theta[1]", &chains).unwrap();
        let path2 = scratch.path(&format!("rank.{extension}"));
        rank(&path2, "theta[1]", &chains).unwrap();
        let path3 = scratch.path(&format!("energy.{extension}"));
        energy(&path3, &chains, "E-BFMI 0.91 (lowest chain)").unwrap();
        if extension == "png" {
            assert_eq!(png_size(&path), (1200, 400));
            assert_eq!(png_size(&path2), (900, 60 + 120 * 4));
            assert_eq!(png_size(&path3), (900, 500));
        } else {
            let text = svg_text(&path);
            assert!(text.contains("theta[1]: trace (4 chains)"), "{text}");
            assert!(text.contains("chain 3"));
            let text = svg_text(&path2);
            assert!(text.contains("theta[1]: ranks (4 chains)"));
            let text = svg_text(&path3);
            assert!(text.contains("E-BFMI 0.91 (lowest chain)"));
            assert!(text.contains("energy transition"));
        }
    }
}

#[test]
fn many_chains_draw_the_first_eight() {
    let scratch = Scratch::new("many_chains");
    let chains: Vec<Vec<f64>> = (0..20)
        .map(|c| vec![c as f64, 1.0, 2.0, 3.0, 4.0])
        .collect();
    let path = scratch.path("many.svg");
    trace(&path, "mu", &chains).unwrap();
    let text = svg_text(&path);
    assert!(text.contains("mu: trace (chains 0-7 of 20 drawn)"));
    assert!(text.contains("chain 7") && !text.contains("chain 8"));
    rank(&scratch.path("many-rank.png"), "mu", &chains).unwrap();
    assert_eq!(
        png_size(&scratch.path("many-rank.png")),
        (900, 60 + 120 * 8)
    );
}

#[test]
fn a_profile_picture_shows_the_steps_and_the_blocks() {
    let scratch = Scratch::new("a_profile");
    let picture = ProfilePicture {
        title: "fib on 4 members: 31 steps".into(),
        spans: (0..31)
            .map(|i| StepSpan {
                first_step: i,
                steps: 1,
                utilization: (i % 4 + 1) as f64 / 4.0,
            })
            .collect(),
        blocks: vec![
            BlockBar {
                label: "fib bb0 (line 7)".into(),
                executions: 12,
                utilization: 0.8,
                operations: 1,
            },
            BlockBar {
                label: "fib bb1 (line 8)".into(),
                executions: 19,
                utilization: 0.4,
                operations: 3,
            },
        ],
    };
    let svg = scratch.path("profile.svg");
    profile(&svg, &picture).unwrap();
    let text = svg_text(&svg);
    for expected in [
        "fib on 4 members: 31 steps",
        "fib bb1 (line 8)",
        "19 steps, 40% lanes, 3 ops",
        "12 steps, 80% lanes, 1 op",
    ] {
        assert!(text.contains(expected), "{expected} missing");
    }
    let png = scratch.path("profile.png");
    profile(&png, &picture).unwrap();
    assert_eq!(png_size(&png), (1200, 300 + 110 + 24 * 2));
}

/// The trace plot's legend sits beside the draws, right of the chart,
/// where it hides none of them; it names every chain drawn.
#[test]
fn the_trace_legend_is_outside_the_data() {
    let scratch = Scratch::new("trace_legend");
    for (name, chains) in [("four", chains()), ("many", vec![vec![1.0, 2.0, 3.0]; 12])] {
        let layout = trace(&scratch.path(&format!("{name}.png")), "theta[0]", &chains).unwrap();
        let legend = layout.legend.expect("a legend");
        let [histogram, draws] = &layout.charts[..] else {
            panic!("{name}: two charts, not {}", layout.charts.len())
        };
        for chart in [histogram, draws] {
            assert!(
                !legend.intersects(&chart.area),
                "{name}: {legend:?} over {chart:?}"
            );
        }
        assert!(
            legend.left >= draws.area.right,
            "{name}: {legend:?} {draws:?}"
        );
        assert!(
            legend.right <= 1200 && legend.bottom <= 400,
            "{name}: {legend:?}"
        );
        // A line per chain drawn (at most 8), each about 20 pixels high.
        let lines = chains.len().min(8) as i32;
        assert_eq!(legend.bottom - legend.top, 20 * lines, "{name}");
        assert_eq!(
            (draws.x_label.as_str(), draws.y_label.as_str()),
            ("draw", "theta[0]")
        );
    }
}

/// Every chain's rank histogram is drawn on one scale, tall enough for the
/// fullest bin of any chain; the axes are named.
#[test]
fn rank_panels_share_one_scale_and_name_their_axes() {
    let scratch = Scratch::new("rank_scale");
    // Chain 0 holds the lowest ranks only: its bins are three times as
    // full as a uniform chain's, or empty.
    let mut chains: Vec<Vec<f64>> = (0..3)
        .map(|c| (0..100).map(|i| (i * 3 + c) as f64).collect())
        .collect();
    chains[0] = (0..100).map(|i| -1000.0 + i as f64).collect();
    let layout = rank(&scratch.path("rank.svg"), "mu", &chains).unwrap();
    assert_eq!(layout.charts.len(), 3);
    let first = &layout.charts[0];
    for chart in &layout.charts {
        assert_eq!(chart.y_range, first.y_range);
        assert_eq!(chart.x_range, (0.0, 300.0));
        assert_eq!(chart.y_label, "draws");
    }
    // 20 bins of 15 ranks: chain 0's first six bins hold 15 draws each,
    // the other chains' about 5: their panels reach 15 too.
    assert!(first.y_range.1 >= 15.0, "{:?}", first.y_range);
    let bottom = layout.charts.last().unwrap();
    assert_eq!(bottom.x_label, "rank among every chain's draws");
    // The panels are stacked without overlapping.
    for pair in layout.charts.windows(2) {
        assert!(pair[0].area.bottom <= pair[1].area.top);
    }
}

/// The profile's block chart starts at 0 steps (so no tick or axis runs
/// left of 0), and the blocks' names sit left of it, each at its bar.
#[test]
fn profile_blocks_start_at_zero_with_their_names_beside() {
    let scratch = Scratch::new("profile_layout");
    let blocks = vec![
        BlockBar {
            label: "a_function_with_a_long_name bb12 (line 130)".into(),
            executions: 500,
            utilization: 0.25,
            operations: 4,
        },
        BlockBar {
            label: "f bb0 (line 2)".into(),
            executions: 9,
            utilization: 1.0,
            operations: 0,
        },
    ];
    let picture = ProfilePicture {
        title: "layout".into(),
        spans: vec![StepSpan {
            first_step: 0,
            steps: 509,
            utilization: 0.5,
        }],
        blocks,
    };
    let layout = profile(&scratch.path("profile.png"), &picture).unwrap();
    let [timeline, chart] = &layout.charts[..] else {
        panic!("two charts")
    };
    assert_eq!(timeline.x_range.0, 0.0);
    assert_eq!(chart.x_range.0, 0.0, "the block chart starts at 0 steps");
    assert_eq!(chart.x_label, "steps");
    assert_eq!(layout.labels.len(), 2);
    for name in &layout.labels {
        assert!(name.right <= chart.area.left, "{name:?} {chart:?}");
        assert!(name.left >= 0, "{name:?} cut at the left edge");
        assert!(name.top >= chart.area.top && name.bottom <= chart.area.bottom);
    }
    // The first block's name is above the second's.
    assert!(layout.labels[0].bottom <= layout.labels[1].top);
}

#[test]
fn bad_paths_are_errors_that_name_them() {
    let scratch = Scratch::new("bad_paths");
    let error = trace(Path::new("trace.jpeg"), "x", &chains()).unwrap_err();
    assert!(matches!(error, PlotError::Format { .. }));
    let missing = scratch.path("no/such/dir/trace.svg");
    let error = trace(&missing, "x", &chains()).unwrap_err().to_string();
    assert!(error.starts_with(&missing.display().to_string()), "{error}");
}

#[test]
fn empty_and_non_finite_draws_still_draw() {
    let scratch = Scratch::new("empty_and");
    let chains = vec![vec![f64::NAN, f64::INFINITY], vec![]];
    trace(&scratch.path("nan.svg"), "x", &chains).unwrap();
    rank(&scratch.path("nan-rank.svg"), "x", &chains).unwrap();
    energy(&scratch.path("nan-energy.svg"), &chains, "").unwrap();
    energy(&scratch.path("none-energy.png"), &[], "").unwrap();
}

/// The loss curve's step axis runs from 0 to the last step and its loss
/// axis spans the losses; the dev metric, when there is one, gets a chart
/// of its own below, on the same step axis.
#[test]
fn the_loss_curve_has_step_and_loss_axes_and_the_dev_metric_below() {
    let scratch = Scratch::new("loss_curve");
    let losses: Vec<(f64, f64)> = (1..=40).map(|s| (s as f64, 10.0 / s as f64)).collect();
    let alone = LossPicture {
        losses: losses.clone(),
        ..LossPicture::default()
    };
    let path = scratch.path("alone.png");
    let layout = loss_curve(&path, &alone).unwrap();
    let [chart] = &layout.charts[..] else {
        panic!("one chart, not {}", layout.charts.len())
    };
    assert_eq!(
        (chart.x_label.as_str(), chart.y_label.as_str()),
        ("step", "loss")
    );
    assert_eq!(chart.x_range, (0.0, 40.0));
    assert!(
        chart.y_range.0 < 0.25 && chart.y_range.1 > 10.0,
        "{chart:?}"
    );
    assert_eq!(png_size(&path), (1000, 360));

    let with_dev = LossPicture {
        losses,
        dev: vec![(10.0, 0.5), (20.0, 0.75), (30.0, 0.8), (40.0, 0.9)],
        dev_name: "accuracy".into(),
    };
    let path = scratch.path("dev.svg");
    let layout = loss_curve(&path, &with_dev).unwrap();
    let [loss, dev] = &layout.charts[..] else {
        panic!("two charts, not {}", layout.charts.len())
    };
    assert_eq!(dev.y_label, "dev accuracy");
    assert_eq!(loss.x_range, dev.x_range);
    assert!(dev.y_range.0 < 0.5 && dev.y_range.1 > 0.9, "{dev:?}");
    assert!(dev.area.top >= loss.area.bottom, "{loss:?} {dev:?}");
    assert_eq!(
        (loss.area.left, loss.area.right),
        (dev.area.left, dev.area.right)
    );
    let text = svg_text(&path);
    assert!(
        text.contains("training loss") && text.contains("dev accuracy"),
        "{text}"
    );
}
