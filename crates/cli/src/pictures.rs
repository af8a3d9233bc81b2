//! The command's pictures: `run --profile FILE.svg` and `sample --plots
//! DIR`. The figures come from the run (its profile) or the sampler (its
//! draws and energies); `autobatch-plots` draws them, and `output::draw`
//! writes each picture by the rule of every output of the command.

use std::path::Path;

use autobatch::profile::Profile;
use autobatch_plots::{BlockBar, Format, PlotError, ProfilePicture, StepSpan};

use crate::Failure;

/// Checks, before the run, that `path` names a picture that can be
/// written (its format, its directory).
pub fn check_picture_path(path: &Path) -> Result<(), Failure> {
    if crate::output::is_standard(path) {
        return Err(Failure::Usage(
            "--profile `-`: a picture's format is read from its file name, which must end in \
             .svg or .png, so it cannot go to standard output"
                .into(),
        ));
    }
    Format::of(path).map_err(|e| Failure::Usage(e.to_string()))?;
    crate::output::check(path)
}

/// Creates `dir` (and its parents) if needed and checks that pictures can
/// be written into it, before sampling starts.
pub fn prepare_plot_dir(dir: &Path) -> Result<(), Failure> {
    let cannot = |reason: String| {
        Failure::Usage(format!(
            "--plots `{}`: cannot write pictures there: {reason}",
            dir.display()
        ))
    };
    if dir.exists() && !dir.is_dir() {
        return Err(cannot("it is not a directory".into()));
    }
    std::fs::create_dir_all(dir).map_err(|e| cannot(e.to_string()))?;
    crate::output::check(&dir.join("energy.svg"))
}

/// Draws a picture into `path` ([`crate::output::draw`]).
fn draw_picture(
    path: &Path,
    draw: impl FnOnce(&Path) -> Result<(), PlotError>,
) -> Result<(), Failure> {
    crate::output::draw(path, |to| draw(to).map_err(|e| e.to_string()))
}

/// The picture of a run's profile, titled `title`.
pub fn profile_picture(profile: &Profile, title: String) -> ProfilePicture {
    let mut first_step = 0;
    let spans = profile
        .bins
        .iter()
        .map(|bin| {
            let span = StepSpan {
                first_step,
                steps: bin.steps,
                utilization: ratio(bin.active, bin.threads),
            };
            first_step += bin.steps;
            span
        })
        .collect();
    let blocks = profile
        .blocks
        .iter()
        .map(|b| BlockBar {
            label: format!("{} bb{} (line {})", b.function, b.block, b.loc.line),
            executions: b.executions,
            utilization: ratio(b.active, b.threads),
            operations: b.operations,
        })
        .collect();
    ProfilePicture {
        title,
        spans,
        blocks,
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Writes the profile picture of a run of `entry` on `members` members.
pub fn write_profile(
    path: &Path,
    profile: &Profile,
    entry: &str,
    members: usize,
    strategy: &str,
) -> Result<(), Failure> {
    let active: u64 = profile.bins.iter().map(|b| b.active).sum();
    let threads: u64 = profile.bins.iter().map(|b| b.threads).sum();
    let title = format!(
        "{entry} on {members} members, {strategy}: {} steps, {:.0}% of the lanes used",
        profile.steps(),
        100.0 * ratio(active, threads)
    );
    let picture = profile_picture(profile, title);
    draw_picture(path, |to| autobatch_plots::profile(to, &picture).map(drop))
}

/// Writes the trace and rank plots of every parameter and the energy plot
/// of `run` into `dir`.
pub fn write_sample_plots(dir: &Path, run: &autobatch_sample::SampleRun) -> Result<(), Failure> {
    for (i, name) in run.columns.iter().enumerate() {
        let chains = run.column(i);
        // `theta[3]` as `theta-3`, `theta_tilde.3` as `theta_tilde-3`.
        let file = name.replace(['[', '.'], "-").replace(']', "");
        for extension in ["png", "svg"] {
            let trace = dir.join(format!("trace-{file}.{extension}"));
            draw_picture(&trace, |to| {
                autobatch_plots::trace(to, name, &chains).map(drop)
            })?;
            let rank = dir.join(format!("rank-{file}.{extension}"));
            draw_picture(&rank, |to| {
                autobatch_plots::rank(to, name, &chains).map(drop)
            })?;
        }
    }
    let note = energy_note(run);
    for extension in ["png", "svg"] {
        let path = dir.join(format!("energy.{extension}"));
        draw_picture(&path, |to| {
            autobatch_plots::energy(to, &run.energy, &note).map(drop)
        })?;
    }
    Ok(())
}

/// The energy plot's subtitle: the chains' lowest E-BFMI.
fn energy_note(run: &autobatch_sample::SampleRun) -> String {
    let lowest = run
        .e_bfmi()
        .into_iter()
        .enumerate()
        .filter(|(_, x)| !x.is_nan())
        .min_by(|a, b| a.1.total_cmp(&b.1));
    match lowest {
        Some((k, x)) => format!(
            "E-BFMI: lowest {x:.2} (chain {}); below {} the tails may not be explored",
            run.chain_ids[k],
            autobatch_sample::diagnostics::E_BFMI_THRESHOLD
        ),
        None => "E-BFMI: not defined (fewer than two draws, or constant energy)".into(),
    }
}
