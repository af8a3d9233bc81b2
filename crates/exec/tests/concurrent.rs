//! Runs at the same time in one process are independent: every test
//! program's directives (as the backend seam test takes them: every
//! strategy, the configurations in turn) run alone, one after another,
//! then all again from several threads at once, each thread in its own
//! order, and every member gets the bits (or the error) it got alone and
//! every run the same figures. A host that runs programs from several
//! threads (a Python user's thread pool, a server) shares the process's
//! caches of compiled code and lowered programs, its pools of threads,
//! machine stacks and logs; none of that may reach a result.
//!
//! `auto`'s figures are left out: whether it tries a small run on
//! `program-counter` first depends on whether the process has compiled the
//! program already (another thread may just have), and the two executors
//! count steps differently; its results are compared like the others'.

mod common;

use std::sync::Mutex;

use autobatch_exec::{run_on, Cpu, ExecError, RunOptions, RunOutput, Strategy};
use common::{config_name, configuration, directives, run_difference, Directive};

/// The threads that run at once (more than the cores of a CI machine, so
/// that runs interleave).
const THREADS: usize = 3;

/// One run: directive `n` on `strategy` in its configuration.
struct Run<'a> {
    n: usize,
    directive: &'a Directive,
    strategy: Strategy,
}

impl Run<'_> {
    fn go(&self) -> Result<RunOutput, ExecError> {
        let options = RunOptions {
            batching: configuration(self.strategy, self.n),
            ..self.directive.options.clone()
        };
        let d = self.directive;
        run_on(&Cpu, self.strategy, &d.program, &d.env, &d.batch, &options)
    }

    /// What differs between this run's output alone and at the same time
    /// as others.
    fn problem(
        &self,
        alone: &Result<RunOutput, ExecError>,
        together: &Result<RunOutput, ExecError>,
    ) -> Option<String> {
        let figures = self.strategy != Strategy::Auto;
        let problem = run_difference(alone, together, figures)?;
        let line = format!(
            "{}:{} on {} {}: {problem}",
            self.directive.path.display(),
            self.directive.line,
            self.strategy,
            config_name(&configuration(self.strategy, self.n))
        );
        Some(line.chars().take(400).collect())
    }
}

#[test]
fn runs_at_the_same_time_give_what_runs_alone_give() {
    let directives = directives();
    let runs: Vec<Run<'_>> = directives
        .iter()
        .enumerate()
        .flat_map(|(n, directive)| {
            Strategy::ALL.into_iter().map(move |strategy| Run {
                n,
                directive,
                strategy,
            })
        })
        .collect();
    let alone: Vec<_> = runs.iter().map(Run::go).collect();
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (runs, alone, failures) = (&runs, &alone, &failures);
            scope.spawn(move || {
                // Each thread takes every run, in its own order: from
                // its own start, in steps prime to their number.
                let step = (2 * t + 1..)
                    .find(|s| gcd(*s, runs.len()) == 1)
                    .expect("a step");
                for j in 0..runs.len() {
                    let k = (j * step + t * runs.len() / THREADS) % runs.len();
                    let together = runs[k].go();
                    if let Some(problem) = runs[k].problem(&alone[k], &together) {
                        eprintln!("{problem}");
                        failures.lock().expect("no thread panicked").push(problem);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("no thread panicked");
    assert!(
        failures.is_empty(),
        "{} runs differ (listed above), the first: {}",
        failures.len(),
        failures[0]
    );
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
