//! What `run` and `sample` show while they work, and Ctrl-C.
//!
//! **Progress.** On a terminal (stderr is one; never when it is not, so
//! never in a test's captured output), a run that takes more than
//! [`QUIET_SECONDS`] shows one line, redrawn in place and cleared at the
//! end: for `run`, the members done out of the batch and the steps so far
//! (from the executor's [`Observer`]; the native strategies count a
//! member's steps when it ends, and the line leaves them out); for
//! `sample`, the iterations per chain and the phase.
//!
//! **Ctrl-C.** The first SIGINT raises the run's [`Interrupt`]: every
//! strategy stops the members (chains) that have not finished, which end
//! with the error `interrupted`, while the finished ones keep their
//! results; the command then writes its outputs as usual and exits with
//! [`INTERRUPTED_EXIT`]. A second SIGINT ends the process at once, with
//! the same code and nothing more written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use autobatch::{Interrupt, Observer, RunProgress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The exit code of a command stopped by Ctrl-C: 128 + SIGINT, as shells
/// report a process that SIGINT ended.
pub const INTERRUPTED_EXIT: u8 = 130;

/// A run shorter than this shows no progress.
pub const QUIET_SECONDS: f64 = 1.5;

/// How often the executor shows the run's progress.
const INTERVAL: Duration = Duration::from_millis(100);

/// Makes Ctrl-C (SIGINT) raise the returned flag, and a second Ctrl-C end
/// the process with [`INTERRUPTED_EXIT`]. Where the handlers cannot be
/// installed, Ctrl-C keeps its default (it ends the process) and the flag
/// is never raised.
pub fn interrupt_on_ctrl_c() -> Interrupt {
    let flag = Arc::new(AtomicBool::new(false));
    // The shutdown is registered first: it sees the flag as the earlier
    // signal left it, before this one raises it.
    let installed = signal_hook::flag::register_conditional_shutdown(
        signal_hook::consts::SIGINT,
        i32::from(INTERRUPTED_EXIT),
        Arc::clone(&flag),
    )
    .and_then(|_| signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&flag)));
    if installed.is_err() {
        return Interrupt::new();
    }
    Interrupt::from_flag(flag)
}

/// The line a run shows while it goes, hidden until it has gone on for
/// [`QUIET_SECONDS`], and for good where stderr is not a terminal or this
/// process does not print (ranks of a job other than rank 0).
#[derive(Clone)]
pub struct Display {
    bar: ProgressBar,
    began: Instant,
    terminal: bool,
    shown: Arc<AtomicBool>,
}

impl Display {
    /// A display with the `template` of indicatif (`{msg}`, `{bar}`,
    /// `{pos}`, `{len}`, `{elapsed}`) over `total` units of work.
    pub fn new(template: &str, total: u64, prints: bool) -> Display {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Display {
            bar,
            began: Instant::now(),
            terminal: prints && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            shown: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Shows `position` and `message`, drawing the line once the run has
    /// gone on long enough.
    pub fn update(&self, position: u64, message: String) {
        self.bar.set_position(position);
        self.bar.set_message(message);
        if self.terminal
            && !self.shown.load(Ordering::Relaxed)
            && self.began.elapsed().as_secs_f64() >= QUIET_SECONDS
        {
            self.shown.store(true, Ordering::Relaxed);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Clears the line; `interrupted`: Ctrl-C was pressed.
    pub fn finish(&self, interrupted: bool) {
        self.bar.finish_and_clear();
        if interrupted && self.shown.load(Ordering::Relaxed) && echoes_ctrl_c() {
            // The terminal echoed `^C` after the line, which fills its
            // width: the echo wrapped onto a row of its own, which the
            // bar's clearing took for its own, leaving its first row.
            eprint!("\x1b[1A\r\x1b[2K");
        }
    }

    /// The observer that shows a `run`'s members done out of the batch and
    /// its steps so far (`live_steps`: whether the strategy counts them as
    /// they are taken; the native ones count a member's when it ends),
    /// and, once Ctrl-C is pressed, that the run is stopping; none where
    /// nothing will be shown (a run without an observer is the same run).
    pub fn observer(&self, interrupt: &Interrupt, live_steps: bool) -> Option<Observer> {
        if !self.terminal {
            return None;
        }
        let (display, interrupt) = (self.clone(), interrupt.clone());
        Some(Observer {
            interval: INTERVAL,
            callback: Arc::new(move |progress: &RunProgress<'_>| {
                let message = match (interrupt.is_requested(), live_steps) {
                    (true, _) => {
                        "Ctrl-C: stopping the members not finished (Ctrl-C again ends at once)"
                            .to_string()
                    }
                    (false, true) => format!(
                        "{} steps (Ctrl-C stops, keeping the finished members)",
                        count(progress.steps)
                    ),
                    (false, false) => "(Ctrl-C stops, keeping the finished members)".to_string(),
                };
                display.update(progress.members_done, message);
            }),
        })
    }
}

/// Whether the terminal on stderr echoes Ctrl-C as `^C` (`stty echo
/// echoctl`, the default).
#[cfg(unix)]
fn echoes_ctrl_c() -> bool {
    // SAFETY: `tcgetattr` only writes the `termios` it is given.
    unsafe {
        let mut termios: libc::termios = std::mem::zeroed();
        libc::tcgetattr(libc::STDERR_FILENO, &mut termios) == 0
            && termios.c_lflag & libc::ECHO != 0
            && termios.c_lflag & libc::ECHOCTL != 0
    }
}

#[cfg(not(unix))]
fn echoes_ctrl_c() -> bool {
    false
}

/// The template of `run`'s line.
pub const RUN_TEMPLATE: &str = "running [{bar:30}] {pos}/{len} members done, {msg} ({elapsed})";

/// The template of `sample`'s line.
pub const SAMPLE_TEMPLATE: &str =
    "{msg:9} [{bar:40}] {pos}/{len} iterations ({elapsed}, about {eta} left)";

/// `n` with a unit prefix: `812`, `35.2 thousand`, `1.23 million`.
fn count(n: u64) -> String {
    let x = n as f64;
    if x >= 1e9 {
        format!("{:.2} billion", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2} million", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1} thousand", x / 1e3)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_short() {
        assert_eq!(count(812), "812");
        assert_eq!(count(35_210), "35.2 thousand");
        assert_eq!(count(1_234_567), "1.23 million");
        assert_eq!(count(4_000_000_000), "4.00 billion");
    }

    #[test]
    fn a_short_run_shows_nothing_and_a_quiet_rank_never() {
        let display = Display::new(RUN_TEMPLATE, 10, true);
        display.update(3, "x".into());
        assert!(display.bar.is_hidden());
        let quiet = Display::new(RUN_TEMPLATE, 10, false);
        assert!(quiet.observer(&Interrupt::new(), true).is_none());
    }
}
