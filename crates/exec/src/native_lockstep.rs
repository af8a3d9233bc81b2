//! The `native-lockstep` strategy: the members advance together through
//! lock-step native code (`autobatch_native::compile_lockstep`): each
//! piece of the program (a block, or the rest of one after a call) is a
//! native loop over the members waiting at it, their scalars in flat
//! columns, their program counters bucketed as the pieces write them
//! (the other shape of native code beside `native`'s member by member;
//! `docs/benchmarks.md` compares them).
//!
//! With `--threads N` the batch is cut into N contiguous groups of
//! members, each run by its own host loop on its own thread (a member's
//! results never depend on its group). A program the lock-step compiler
//! does not take (arrays, forks, catching calls, host primitives) runs on
//! the program-counter strategy instead, and the report says so and why.
//!
//! `--stats`: `steps`, the operation counts and the errors are the
//! reference's; `lane_utilization` is the members a piece ran for over the
//! members of its group, averaged over the piece runs; the report gives
//! `compiled`, the `reason` when not, `compile_seconds`, `functions`,
//! `pieces`, `piece_runs` and `cached_programs` (1 when the run's code was
//! compiled by an earlier run: `crate::native_cache` keeps lock-step code
//! as it keeps `native`'s). With an observer, each group shows its
//! counts every few pieces (they never go back); when the observer
//! panics, every group stops after its current piece and the panic goes
//! on. When the run's interrupt flag is set (`RunOptions::interrupt`),
//! every group stops likewise and its members not done stop with
//! `interrupted`.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Instant;

use autobatch_ir::Program;
use autobatch_kernels::Backend;
use autobatch_native::{Counting, Limits, LockProgress, LockStepProgram, Stop};
use autobatch_types::{Loc, MemberError, Tensor};

use crate::internal::{current_run, outside_capture, working_for};
use crate::monitor::{interrupted, OpCounter};
use crate::native::{counting, member_error, run_instead, segment_counts, Slots};
use crate::native_cache::{self, LockCode, ProgramKey};
use crate::{
    Batch, Env, ExecError, Executor, Interrupt, ReportField, ReportValue, RunOptions, RunOutput,
    RunProgress, Stats,
};

/// The lock-step executor in the registry ([`crate::EXECUTORS`]).
pub struct NativeLockstep;

impl Executor for NativeLockstep {
    fn name(&self) -> &'static str {
        "native-lockstep"
    }

    fn description(&self) -> &'static str {
        "members in lock-step, each block machine code looping over the members at it; \
         others on program-counter"
    }

    /// Lock-step code computes with the kernels' own scalar functions;
    /// only a program it does not compile runs (on program-counter) on the
    /// backend.
    fn uses_backend(&self) -> bool {
        false
    }

    fn run(
        &self,
        backend: &dyn Backend,
        program: &Program,
        env: &Env,
        batch: &Batch,
        options: &RunOptions,
    ) -> Result<RunOutput, ExecError> {
        let started = Instant::now();
        let compiled = native_cache::compile_lockstep(
            &ProgramKey::of(program),
            batch.entry,
            &env.symbols,
            counting(options),
        );
        let compile_seconds = field(
            "compile_seconds",
            ReportValue::Seconds(started.elapsed().as_secs_f64()),
        );
        match compiled {
            Ok(LockCode {
                program: code,
                cached,
            }) => {
                let (mut output, figures) = run_compiled(&code, program, batch, options)?;
                output.stats.report = vec![
                    field("compiled", ReportValue::Bool(true)),
                    compile_seconds,
                    field("functions", ReportValue::Count(code.functions() as u64)),
                    field("pieces", ReportValue::Count(code.pieces() as u64)),
                    field("piece_runs", ReportValue::Count(figures.piece_runs)),
                    field("cached_programs", ReportValue::Count(u64::from(cached))),
                ];
                Ok(output)
            }
            Err(not) => run_instead(backend, program, env, batch, options, not, compile_seconds),
        }
    }
}

fn field(name: &'static str, value: ReportValue) -> ReportField {
    ReportField { name, value }
}

/// The figures of a run's groups, summed.
#[derive(Default)]
struct Figures {
    piece_runs: u64,
    /// Per piece run, the members of its group: the lanes it could serve.
    lane_slots: u64,
    rows: u64,
}

/// What the groups share while they run, for the observer.
struct Shared<'a> {
    observer: Option<&'a crate::Observer>,
    counter: &'a OpCounter,
    slots: &'a Slots,
    segments: &'a [autobatch_native::Segment],
    /// Per group, its counts and steps when it last showed them.
    shown: Mutex<Shown>,
    /// The run's interrupt flag, raised too when the observer panics:
    /// every group stops.
    interrupt: &'a AtomicBool,
}

struct Shown {
    counters: Vec<Vec<u64>>,
    steps: Vec<u64>,
    last_call: Instant,
    panic: Option<Box<dyn std::any::Any + Send>>,
}

/// Runs the members in `--threads` groups; gives the output and figures.
fn run_compiled(
    code: &LockStepProgram,
    program: &Program,
    batch: &Batch,
    options: &RunOptions,
) -> Result<(RunOutput, Figures), ExecError> {
    let started = Instant::now();
    let (counter, slots) = OpCounter::for_program(program);
    let groups = options.threads.max(1).min(batch.size.max(1));
    let per_group = batch.size.div_ceil(groups).max(1);
    let own = AtomicBool::new(false);
    let shared = Shared {
        observer: options.observer.as_ref(),
        counter: &counter,
        slots: &slots,
        segments: code.segments(),
        shown: Mutex::new(Shown {
            counters: vec![vec![0; code.segments().len()]; groups],
            steps: vec![0; groups],
            last_call: Instant::now(),
            panic: None,
        }),
        interrupt: options.interrupt.as_ref().map_or(&own, Interrupt::flag),
    };
    let run = current_run();
    let outcomes: Vec<GroupOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..groups)
            .map(|g| {
                let members = g * per_group..((g + 1) * per_group).min(batch.size);
                let shared = &shared;
                scope.spawn(move || {
                    let _capture = working_for(run);
                    run_group(code, batch, options, members, g, shared)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let shown = shared.shown.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(panic) = shown.panic {
        // The observer stopped the run: its panic goes on.
        std::panic::resume_unwind(panic);
    }
    let mut figures = Figures::default();
    let mut steps = 0;
    let mut results = Vec::with_capacity(batch.size);
    let mut totals = vec![0; code.segments().len()];
    for outcome in outcomes {
        figures.piece_runs += outcome.piece_runs;
        figures.lane_slots += outcome.lane_slots;
        figures.rows += outcome.rows;
        steps += outcome.steps;
        for (total, count) in totals.iter_mut().zip(&outcome.counters) {
            *total += count;
        }
        results.extend(outcome.results);
    }
    let op_counts = match counting(options) {
        Counting::Kept => segment_counts(&counter, &slots, [(code.segments(), totals.as_slice())]),
        Counting::Skipped => Vec::new(),
    };
    let lane_utilization = if figures.lane_slots == 0 {
        0.0
    } else {
        figures.rows as f64 / figures.lane_slots as f64
    };
    let stats = Stats {
        steps,
        lane_utilization,
        instances: 0,
        peak_instances: 0,
        op_counts,
        wall_seconds: started.elapsed().as_secs_f64(),
        call_bytes: 0,
        peak_state_bytes: 0,
        // Lock-step code takes no tape operations.
        tape_bytes: 0,
        sizes: 1,
        report: Vec::new(),
        profile: None,
        choice: None,
    };
    let output = RunOutput {
        results,
        adjoints: Default::default(),
        stats,
    };
    Ok((output, figures))
}

/// What one group gives back.
struct GroupOutcome {
    results: Vec<Result<Vec<Tensor>, MemberError>>,
    counters: Vec<u64>,
    steps: u64,
    piece_runs: u64,
    rows: u64,
    lane_slots: u64,
}

/// Runs the members `members` together on this thread: group number `g`.
fn run_group(
    code: &LockStepProgram,
    batch: &Batch,
    options: &RunOptions,
    members: std::ops::Range<usize>,
    g: usize,
    shared: &Shared<'_>,
) -> GroupOutcome {
    let args: Vec<Vec<&Tensor>> = members
        .clone()
        .map(|m| batch.args.iter().map(|a| a.for_member(m)).collect())
        .collect();
    let limits = Limits {
        max_steps: options.max_steps,
        max_stack_depth: options.max_stack_depth,
        stack_room: 0,
        // Lock-step code takes no tape operations.
        max_tape_bytes: usize::MAX,
        interrupt: Some(shared.interrupt),
    };
    let mut counters = vec![0; code.segments().len()];
    // Pieces until the clock is read again.
    let mut countdown = 0_u32;
    let watch = |progress: &LockProgress<'_>| -> bool {
        if shared.observer.is_none() {
            return true;
        }
        if countdown > 0 {
            countdown -= 1;
            return true;
        }
        countdown = 16;
        show(shared, g, progress)
    };
    let run = code.run(&args, &limits, &mut counters, watch);
    let steps = run.runs.iter().map(|member| member.steps).sum();
    let results = run
        .runs
        .into_iter()
        .map(|member| match member.outcome {
            Ok(values) => Ok(values),
            // Not finished when the run was interrupted (if the observer
            // panicked, the run is abandoned and the place never read).
            Err(Stop::Interrupted) => Err(interrupted(Loc::default())),
            Err(stop) => Err(member_error(stop, options)),
        })
        .collect();
    GroupOutcome {
        results,
        counters,
        steps,
        piece_runs: run.piece_runs,
        rows: run.rows,
        lane_slots: run.lane_slots,
    }
}

/// Shows the observer the run's progress (group `g`'s as of now, the
/// others' as they last showed it) if its interval has passed. False when
/// the observer has panicked: the run stops.
fn show(shared: &Shared<'_>, g: usize, progress: &LockProgress<'_>) -> bool {
    let Some(observer) = shared.observer else {
        return true;
    };
    let mut shown = shared.shown.lock().unwrap_or_else(|p| p.into_inner());
    if shown.panic.is_some() {
        return false;
    }
    shown.counters[g].clear();
    shown.counters[g].extend_from_slice(progress.counters);
    shown.steps[g] = progress.steps();
    let now = Instant::now();
    if now.duration_since(shown.last_call) < observer.interval {
        return true;
    }
    shown.last_call = now;
    let mut totals = vec![0; shared.segments.len()];
    for counters in &shown.counters {
        for (total, count) in totals.iter_mut().zip(counters) {
            *total += count;
        }
    }
    let op_counts = segment_counts(
        shared.counter,
        shared.slots,
        [(shared.segments, totals.as_slice())],
    );
    let steps = shown.steps.iter().sum();
    // The caller's code: a panic there stops the run and goes on.
    let call = || {
        outside_capture(|| {
            (observer.callback)(&RunProgress {
                steps,
                // A group's members end together, with it.
                members_done: 0,
                op_counts: &op_counts,
            })
        })
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(()) => true,
        Err(panic) => {
            shown.panic = Some(panic);
            shared
                .interrupt
                .store(true, std::sync::atomic::Ordering::Relaxed);
            false
        }
    }
}
