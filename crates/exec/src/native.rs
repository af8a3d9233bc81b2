//! The `native` strategy: every member alone, its control compiled to
//! machine code by `autobatch_native` (Cranelift), the members spread over
//! `--threads` worker threads (one thread and no observer: the calling
//! thread, on a machine stack as large as a worker's,
//! [`autobatch_native::run_on_stack`]), each member independent of the
//! others.
//!
//! Arrays live in each member's own frames, statics are read from the
//! environment, and each member draws from its own `MemberRng` (seeded as
//! the reference seeds it). Forks run their instances one after the
//! other, as under the reference. A program the native compiler does not
//! take yet (one that calls a host primitive) runs on the program-counter
//! strategy instead, and the report says so and why. A member whose native frames run short of
//! machine stack (the threads' stacks are sized from `--max-stack-depth`,
//! so this is rare) is rerun alone on the reference executor
//! ([`reference::run_member`]); the report counts such members, whose
//! steps and operation counts the figures then leave out.
//!
//! The run's interrupt flag ([`RunOptions::interrupt`], the user's
//! Ctrl-C) is looked at before each member starts (under `native-batched`,
//! each chunk of members): once it is set, the members not started do not
//! start, the members running finish, and the members that finished keep
//! their results. Looking at it while a member runs slows code made of
//! tiny calls much, so the code does so only when the interrupt asks
//! ([`crate::Interrupt::within_members`]: a sampler's chains, long
//! members): the code then holds its steps a slice at a time and, between
//! slices, stops the members running with the error `interrupted`
//! ([`autobatch_native::Limits::interrupt`]) within a few thousand of
//! their steps (a member started after it takes one slice).
//!
//! With an observer ([`crate::Observer`]), a watcher thread calls it every
//! interval while members run (a member may run for long: a sampler's
//! chain), besides the calls as chunks of members end. Under `native`, in
//! code that takes its steps a slice at a time, it sees a running
//! member's counts too: the code brings them up to date in memory with
//! every slice, and the watcher reads the running chunks' counters
//! (`LiveCounts`); the counts it is shown never go back. Under
//! `native-batched` a thread's members run as one chunk, watched or not
//! (each product shared by as many members as can wait at it); their
//! counts reach the chunk's counters as members end and, every few
//! milliseconds, between products (`autobatch_native`'s `published`). When the
//! observer panics (a host stopping the run), the flag is raised as by an
//! interrupt, and the panic goes on once the members have stopped.
//!
//! `--stats`: `steps` is the sum of the members' steps (as under the
//! reference), the operation counts, `instances` and `peak_instances` are
//! the reference's (each member's execution counts one), and the report
//! gives `compiled`, the `reason` when not, `compile_seconds`, `functions`
//! compiled, `merged_branches` (branches run as selects), `tail_calls`
//! (functions whose self tail call became a jump), `fast_loops`,
//! `fused_loops` (chains of float array operations run in one pass),
//! `members_rerun` and `cached_programs` (the programs of the run that
//! were not compiled again: `crate::native_cache` keeps the last 128
//! compiled programs of the process, so a program run many times, or a
//! sampler run once per pooling of its chains, compiles once). A run that
//! does not ask for the operation counts (`RunOptions::count_operations`
//! false: `autobatch run` without `--stats`) compiles code that counts
//! nothing; its observer, if any, sees the steps and the members done.
//!
//! A ragged batch ([`Env::ragged`]) runs as one batch on one program:
//! each member runs with its own lengths of the ragged dimensions, which
//! the code reads from the member's context, its arrays in frames sized
//! for the batch's *capacities* ([`lengths`]: the longest member's length
//! rounded up to a power of two, so that batches of similar lengths share
//! their code in `native_cache`). Under `native-batched` the members of
//! all lengths wait together at a product with a static matrix.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use autobatch_ir::{EntityRef, Program};
use autobatch_kernels::adjoints::AdjointLog;
use autobatch_kernels::{Backend, MemberRng};
use autobatch_native::{
    Counting, Interrupts, Lengths, Limits, MemberLog, NativeProgram, NotCompiled, Stop,
};
use autobatch_types::{Loc, MemberError, Tensor};
use rayon::prelude::*;

use crate::internal::{capture_for, current_run, outside_capture, worker_pool, working_for};
use crate::monitor::{interrupted, stack_overflow, step_limit, OpCounter};
use crate::native_cache::{self, Flavor, ProgramKey};
use crate::program_counter::ProgramCounter;
use crate::{
    reference, Batch, Env, ExecError, Executor, Interrupt, OpCount, ReportField, ReportValue,
    RunOptions, RunOutput, RunProgress, Stats,
};

/// The native executors in the registry ([`crate::EXECUTORS`]), one per
/// mode (`Mode`).
pub struct Native {
    mode: Mode,
}

/// `native`: each member alone, one after the other.
pub const NATIVE: Native = Native { mode: Mode::Alone };

/// `native-batched`: members run together, each on its own stack, waiting
/// at the products with a static matrix so that each runs once for all the
/// members waiting at it (`autobatch_native::waits`).
pub const NATIVE_BATCHED: Native = Native {
    mode: Mode::Together,
};

/// How a worker runs its members' machine code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// One member after the other.
    Alone,
    /// All of a worker's members together.
    Together,
}

/// The most machine stack a worker thread gets (members that need more
/// are rerun on the reference executor).
const MAX_STACK_BYTES: usize = 1 << 30;
/// Machine stack kept free above a member's frames (the worker's own
/// frames) and below them (the shims' frames).
const STACK_MARGIN: usize = 1 << 20;

impl Executor for Native {
    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Alone => "native",
            Mode::Together => "native-batched",
        }
    }

    fn description(&self) -> &'static str {
        match self.mode {
            Mode::Alone => "each member alone in machine code; others on program-counter",
            Mode::Together => {
                "each member in machine code on its own stack, products with a static \
                 matrix run once for all members waiting at them; others on program-counter"
            }
        }
    }

    /// Native code computes with the kernels' own scalar functions; only
    /// a program it does not compile runs (on program-counter) on the backend.
    fn uses_backend(&self) -> bool {
        false
    }

    /// One program for all the members' lengths (module docs).
    fn runs_ragged(&self) -> bool {
        true
    }

    fn run(
        &self,
        backend: &dyn Backend,
        program: &Program,
        env: &Env,
        batch: &Batch,
        options: &RunOptions,
    ) -> Result<RunOutput, ExecError> {
        run_native(self.mode, backend, program, env, batch, options)
    }
}

/// Compiles the program and runs its members in `mode`, or runs it on
/// program-counter if it is not compiled.
fn run_native(
    mode: Mode,
    backend: &dyn Backend,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    check_memory(program, env, batch, options).map_err(ExecError::Resources)?;
    let started = Instant::now();
    let compiled = match unbound_static(program, env) {
        Some(not) => Err(not),
        None => Compiled::new(program, env, batch, options),
    };
    let compile_seconds = ReportField {
        name: "compile_seconds",
        value: ReportValue::Seconds(started.elapsed().as_secs_f64()),
    };
    match compiled {
        Ok(compiled) => {
            let (mut output, figures) =
                run_compiled(mode, &compiled, program, env, batch, options)?;
            let first = &compiled.program;
            output.stats.report = vec![
                field("compiled", ReportValue::Bool(true)),
                compile_seconds,
                field("functions", ReportValue::Count(first.functions() as u64)),
                field(
                    "merged_branches",
                    ReportValue::Count(first.merged_branches() as u64),
                ),
                field("tail_calls", ReportValue::Count(first.tail_calls() as u64)),
                field("fast_loops", ReportValue::Count(first.fast_loops() as u64)),
                field(
                    "fused_loops",
                    ReportValue::Count(first.fused_loops() as u64),
                ),
                field("members_rerun", ReportValue::Count(figures.rerun)),
                field(
                    "cached_programs",
                    ReportValue::Count(u64::from(compiled.cached)),
                ),
            ];
            if mode == Mode::Together {
                output.stats.report.extend([
                    field("batched_products", ReportValue::Count(figures.products)),
                    field("batched_waits", ReportValue::Count(figures.waits)),
                ]);
            }
            Ok(output)
        }
        Err(not) => run_instead(backend, program, env, batch, options, not, compile_seconds),
    }
}

/// Refuses, before compiling, a batch whose members' results and records
/// cannot fit in memory: each member keeps its results (and
/// [`crate::memory::MEMBER_OVERHEAD_BYTES`]) until the run ends, while
/// the entry's variables live once per thread, for the member running there.
fn check_memory(
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<(), String> {
    let entry = &program.functions[batch.entry];
    let results: u128 = entry
        .results
        .iter()
        .map(|ty| crate::memory::value_bytes(ty, &env.symbols))
        .sum();
    let one_member: u128 = entry
        .vars
        .values()
        .map(|v| crate::memory::value_bytes(&v.ty, &env.symbols))
        .sum();
    let running = one_member.saturating_mul(options.threads.max(1) as u128);
    crate::memory::check_memory(results, batch.size, running)
}

/// Native code reads the statics in place: all must be bound (the
/// interpreters report a missing one as an internal error).
fn unbound_static(program: &Program, env: &Env) -> Option<NotCompiled> {
    (env.statics.len() < program.statics.len()).then(|| NotCompiled {
        reason: "a static of the program is not in the environment".into(),
    })
}

/// Why the native executors would run `program` on program-counter
/// instead of compiling it for this batch (the first construct the
/// compiler does not take), or `None` if they compile it.
pub(crate) fn refusal(program: &Program, env: &Env, batch: &Batch) -> Option<String> {
    if let Some(not) = unbound_static(program, env) {
        return Some(not.reason);
    }
    match lengths(env, batch.size) {
        Ok(lengths) => autobatch_native::refusal(program, batch.entry, &lengths.values),
        Err(error) => Some(error.to_string()),
    }
}

/// Whether the native executors' code for this run is compiled already,
/// kept from an earlier run of the process (`native_cache`): running it
/// now compiles nothing.
pub(crate) fn compiled_already(
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> bool {
    lengths(env, batch.size).is_ok_and(|lengths| {
        native_cache::is_kept(
            &ProgramKey::of(program),
            batch.entry,
            &lengths,
            flavor(options),
        )
    })
}

/// Runs a program the native compiler did not take on program-counter;
/// the report says so, why, and how long the attempt took.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_instead(
    backend: &dyn Backend,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
    not: NotCompiled,
    compile_seconds: ReportField,
) -> Result<RunOutput, ExecError> {
    let mut output = ProgramCounter.run(backend, program, env, batch, options)?;
    output.stats.report = vec![
        field("compiled", ReportValue::Bool(false)),
        field("reason", ReportValue::Text(not.reason)),
        field("ran_on", ReportValue::Text(ProgramCounter.name().into())),
        compile_seconds,
    ];
    Ok(output)
}

/// The native code of a run, compiled now or kept from an earlier run of
/// the same program (`native_cache`): for a ragged batch, one program for
/// every member's lengths.
struct Compiled {
    program: Arc<NativeProgram>,
    /// Whether it came from the cache.
    cached: bool,
}

impl Compiled {
    fn new(
        program: &Program,
        env: &Env,
        batch: &Batch,
        options: &RunOptions,
    ) -> Result<Compiled, NotCompiled> {
        let lengths = lengths(env, batch.size).map_err(|e| NotCompiled {
            reason: e.to_string(),
        })?;
        let key = ProgramKey::of(program);
        let code = native_cache::compile(&key, batch.entry, &lengths, flavor(options))?;
        Ok(Compiled {
            program: code.program,
            cached: code.cached,
        })
    }

    /// A zero per segment.
    fn zero_counters(&self) -> Vec<u64> {
        vec![0; self.program.segments().len()]
    }
}

/// The lengths native code is compiled for: the environment's, and for
/// each ragged dimension a capacity, the batch's longest member's length
/// rounded up to a power of two (each member runs with its own; the
/// rounding lets a batch whose longest member is a little longer or
/// shorter run the code kept from an earlier one).
fn lengths(env: &Env, members: usize) -> Result<Lengths, ExecError> {
    if env.ragged.is_empty() {
        return Ok(Lengths::fixed(&env.symbols));
    }
    let mut values = env.symbols.clone();
    let mut per_member = vec![false; values.len()];
    for ragged in &env.ragged {
        if ragged.lengths.len() != members {
            return Err(ExecError::Internal(format!(
                "ragged dimension {} has {} lengths for {members} members",
                ragged.symbol.0,
                ragged.lengths.len()
            )));
        }
        let s = ragged.symbol.0 as usize;
        if s < values.len() {
            let longest = ragged.lengths.iter().copied().max().unwrap_or(0);
            values[s] = longest.next_power_of_two();
            per_member[s] = true;
        }
    }
    Ok(Lengths { values, per_member })
}

/// How the run's machine code is made: it counts operations when the run
/// asks for the counts, and it looks at the interrupt flag while a member
/// runs when the run's interrupt asks ([`Interrupt::within_members`]).
fn flavor(options: &RunOptions) -> Flavor {
    Flavor {
        counting: counting(options),
        interrupts: match &options.interrupt {
            Some(interrupt) if interrupt.stops_members() => Interrupts::Polled,
            _ => Interrupts::Ignored,
        },
    }
}

/// Whether the run's machine code counts operations: when the run asks
/// for the counts (an observer of a run that does not sees none).
pub(crate) fn counting(options: &RunOptions) -> Counting {
    if options.count_operations {
        Counting::Kept
    } else {
        Counting::Skipped
    }
}

fn field(name: &'static str, value: ReportValue) -> ReportField {
    ReportField { name, value }
}

/// The figures gathered from the workers as members finish.
struct Progress<'a> {
    /// Per segment, its executions.
    counters: Vec<u64>,
    /// The counters of the chunks running now, which their members update
    /// as they run (`run_chunk`, with an observer).
    live: Vec<Arc<LiveCounts>>,
    /// The counts the observer was last shown (what it sees never goes
    /// back, even when a member is rerun elsewhere and its counts are
    /// taken back).
    shown: Vec<u64>,
    steps: u64,
    /// Members of the chunks ended so far that returned or stopped.
    members_done: u64,
    instances: u64,
    peak_instances: u64,
    tape_bytes: u64,
    rerun: u64,
    products: u64,
    waits: u64,
    last_call: Instant,
    observer: Option<&'a crate::Observer>,
}

/// Per segment: the executions of a running chunk's members, which native
/// code updates (`Runner::run_into`) and the watcher reads.
type LiveCounts = Vec<AtomicU64>;

/// What one chunk of members gives (their results are written into the
/// run's own vector, in place).
struct Chunk {
    /// The counters its members ran with, if the observer follows them.
    live: Option<Arc<LiveCounts>>,
    /// The contributions to static adjoints of the members that finished,
    /// which they log straight into it.
    adjoints: AdjointLog,
    /// Per segment, its executions.
    counters: Vec<u64>,
    steps: u64,
    instances: u64,
    peak_instances: u64,
    tape_bytes: u64,
    rerun: u64,
    /// Products computed for members run together, and the member-products
    /// they served.
    products: u64,
    waits: u64,
    /// Members stopped or not started because the run was interrupted
    /// (their places hold the error `interrupted`).
    interrupted: u64,
    /// Members that returned or stopped with an error of their own.
    ended: u64,
}

/// A compiled run's own figures, for the report.
struct Figures {
    rerun: u64,
    products: u64,
    waits: u64,
}

/// Runs every member natively; gives the output and the report's
/// figures (how many members were rerun on the reference executor, how
/// the products were batched).
fn run_compiled(
    mode: Mode,
    compiled: &Compiled,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<(RunOutput, Figures), ExecError> {
    // Only counts and an observer read the operations' counters.
    let (counter, slots) = if counting(options) == Counting::Kept || options.observer.is_some() {
        OpCounter::for_program(program)
    } else {
        (OpCounter::default(), Slots::new())
    };
    let stack = compiled
        .program
        .stack_bytes(options.max_stack_depth)
        .clamp(8 * STACK_MARGIN, MAX_STACK_BYTES)
        .next_power_of_two();
    // The run's interrupt flag, raised too when the observer stops the
    // run (`watch`): no member starts after it, and code that polls it
    // stops every member within `autobatch_native::POLL_STEPS` of its
    // steps.
    let own = AtomicBool::new(false);
    let interrupt: &AtomicBool = options.interrupt.as_ref().map_or(&own, Interrupt::flag);
    let limits = Limits {
        max_steps: options.max_steps,
        max_stack_depth: options.max_stack_depth,
        stack_room: stack - 2 * STACK_MARGIN,
        max_tape_bytes: options.tape_bound(),
        interrupt: (flavor(options).interrupts == Interrupts::Polled).then_some(interrupt),
    };
    let threads = options.threads.max(1);
    let chunk = chunk_size(mode, threads, options.observer.is_some(), batch.size);
    let progress = Mutex::new(Progress::new(compiled, options.observer.as_ref()));
    let started = Instant::now();
    let mut results = places(mode, compiled, batch);
    let inputs = RunInputs {
        compiled,
        program,
        env,
        batch,
        options,
        limits: &limits,
    };
    let watched = Watched {
        progress: &progress,
        compiled,
        counter: &counter,
        slots: &slots,
        interrupt,
    };
    let chunks = match run_here(mode, &inputs, &watched, &mut results, threads, stack) {
        Some(done) => vec![done],
        None => {
            let pool = worker_pool(threads, stack, "autobatch-native")?;
            run_chunks(mode, &inputs, &watched, &mut results, chunk, &pool)
        }
    };
    if chunks.iter().any(|c| c.interrupted > 0) && !options.interrupted() {
        return Err(ExecError::Internal(
            "a member was interrupted, but the run was not".into(),
        ));
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let progress = progress.into_inner().unwrap_or_else(|p| p.into_inner());
    let op_counts = match counting(options) {
        Counting::Kept => sorted_counts(&counter, &slots, compiled, &progress.counters),
        Counting::Skipped => Vec::new(),
    };
    let adjoints = AdjointLog::joined(chunks.into_iter().map(|c| c.adjoints));
    let stats = run_stats(&progress, op_counts, batch.size, wall_seconds);
    Ok((
        RunOutput {
            results,
            adjoints,
            stats,
        },
        Figures {
            rerun: progress.rerun,
            products: progress.products,
            waits: progress.waits,
        },
    ))
}

/// A finished run's stats, from its progress and `op_counts`.
fn run_stats(
    progress: &Progress,
    op_counts: Vec<OpCount>,
    members: usize,
    wall_seconds: f64,
) -> Stats {
    let executions: u64 = op_counts.iter().map(|c| c.executions).sum();
    let lane_utilization = if executions == 0 {
        0.0
    } else {
        1.0 / members as f64
    };
    Stats {
        steps: progress.steps,
        lane_utilization,
        instances: progress.instances,
        peak_instances: progress.peak_instances,
        tape_bytes: progress.tape_bytes,
        op_counts,
        wall_seconds,
        // Values live in registers and on the member's own machine stack.
        call_bytes: 0,
        peak_state_bytes: 0,
        sizes: 1,
        report: Vec::new(),
        profile: None,
        choice: None,
    }
}

/// The members of one chunk of a run of `members` on `threads` threads.
fn chunk_size(mode: Mode, threads: usize, observed: bool, members: usize) -> usize {
    match (mode, observed) {
        // Members run together are batched within a chunk: one per thread
        // (an observer sees their counts as they go: `run_chunk_together`).
        (Mode::Together, _) => members.div_ceil(threads).max(1),
        (Mode::Alone, true) => 1,
        // One worker has nothing to balance: the whole batch is one chunk.
        (Mode::Alone, false) if threads == 1 => members.max(1),
        (_, _) => (members / (threads * 16)).max(1),
    }
}

impl<'o> Progress<'o> {
    /// Nothing counted yet.
    fn new(compiled: &Compiled, observer: Option<&'o crate::Observer>) -> Progress<'o> {
        Progress {
            counters: compiled.zero_counters(),
            live: Vec::new(),
            shown: compiled.zero_counters(),
            steps: 0,
            members_done: 0,
            instances: 0,
            peak_instances: 0,
            tape_bytes: 0,
            rerun: 0,
            products: 0,
            waits: 0,
            last_call: Instant::now(),
            observer,
        }
    }
}

/// Every member's place, written by its chunk. Members run one after the
/// other write their results into blank tensors made here, on the thread
/// that gives them to the caller ([`NativeProgram::blank_results`]);
/// members run together get theirs from the scheduler (an empty `Ok`
/// takes no allocation).
fn places(mode: Mode, compiled: &Compiled, batch: &Batch) -> Vec<Result<Vec<Tensor>, MemberError>> {
    (0..batch.size)
        .map(|member| match mode {
            Mode::Alone => Ok(blank_results(compiled, batch, member)),
            Mode::Together => Ok(Vec::new()),
        })
        .collect()
}

/// Zeros of member `member`'s results' types and shapes.
fn blank_results(compiled: &Compiled, batch: &Batch, member: usize) -> Vec<Tensor> {
    let args: Vec<&Tensor> = batch.args.iter().map(|a| a.for_member(member)).collect();
    compiled.program.blank_results(&args)
}

/// Runs a one-thread run that nobody watches on the calling thread, on a
/// machine stack of `stack` bytes (a worker's), its members one after the
/// other or together as `mode` says (one chunk either way): waking a
/// worker can cost more than a small run's members take. `None` when the
/// run is not such a run, or no stack could be mapped (the caller then
/// runs it on the pool).
fn run_here(
    mode: Mode,
    inputs: &RunInputs<'_>,
    watched: &Watched<'_, '_>,
    results: &mut [Result<Vec<Tensor>, MemberError>],
    threads: usize,
    stack: usize,
) -> Option<Chunk> {
    if threads != 1 || inputs.options.observer.is_some() {
        return None;
    }
    let members = 0..results.len();
    let done = autobatch_native::run_on_stack(stack, || match mode {
        Mode::Alone => run_chunk(inputs, members, &mut *results, watched),
        Mode::Together => run_chunk_together(inputs, members, &mut *results, watched),
    })
    .ok()?;
    report_progress(watched, &done);
    Some(done)
}

/// Runs the members in chunks of `chunk` on `pool`'s workers, each chunk
/// writing its members' places in `results`. While they run, a watcher
/// thread calls the observer (a member may run for long: a chain of a
/// sampler); the workers call it too as chunks end. An observer's panic
/// (a host stopping the run) goes on once the members have stopped.
fn run_chunks(
    mode: Mode,
    inputs: &RunInputs<'_>,
    watched: &Watched<'_, '_>,
    results: &mut [Result<Vec<Tensor>, MemberError>],
    chunk: usize,
    pool: &rayon::ThreadPool,
) -> Vec<Chunk> {
    let run = current_run();
    let (chunks, stopped) = std::thread::scope(|scope| {
        let watcher = inputs.options.observer.as_ref().map(|observer| {
            let (done, ended) = std::sync::mpsc::channel::<()>();
            let handle = scope.spawn(move || {
                // Its own panics are the run's (internal errors), the
                // observer's the caller's.
                capture_for(run);
                watch(observer, watched, ended)
            });
            (done, handle)
        });
        let chunks: Vec<Chunk> = pool.install(|| {
            results
                .par_chunks_mut(chunk)
                .enumerate()
                .map(|(c, places)| {
                    let _capture = working_for(run);
                    let members = c * chunk..c * chunk + places.len();
                    let done = match mode {
                        Mode::Alone => run_chunk(inputs, members, places, watched),
                        Mode::Together => run_chunk_together(inputs, members, places, watched),
                    };
                    report_progress(watched, &done);
                    done
                })
                .collect()
        });
        let stopped = watcher.and_then(|(done, handle)| {
            drop(done);
            handle.join().unwrap_or_else(Some)
        });
        (chunks, stopped)
    });
    if let Some(panic) = stopped {
        // The observer stopped the run: its panic goes on, as from a worker.
        std::panic::resume_unwind(panic);
    }
    chunks
}

/// What every chunk of a run reads.
struct RunInputs<'a> {
    compiled: &'a Compiled,
    program: &'a Program,
    env: &'a Env,
    batch: &'a Batch,
    options: &'a RunOptions,
    limits: &'a Limits<'a>,
}

/// Runs `members` one after the other on this worker thread, writing
/// each one's result into its place in `places`. Their counts go to
/// counters the watcher reads while they run (with an observer that
/// follows counts), so that it sees a long member's progress.
fn run_chunk(
    inputs: &RunInputs<'_>,
    members: std::ops::Range<usize>,
    places: &mut [Result<Vec<Tensor>, MemberError>],
    watched: &Watched<'_, '_>,
) -> Chunk {
    let RunInputs {
        compiled,
        env,
        batch,
        options,
        limits,
        ..
    } = *inputs;
    let mut chunk = Chunk::new(compiled);
    let counting = counting(options) == Counting::Kept;
    let live = chunk.watch_live(compiled, counting && options.observer.is_some(), watched);
    // A member's counts before it ran, restored if it is rerun elsewhere.
    let mut before: Vec<u64> = Vec::new();
    let mut args = Vec::with_capacity(batch.args.len());
    let native = &compiled.program;
    let mut runner = native.runner(&env.statics);
    let counters = &live[..];
    for (member, place) in members.zip(places) {
        if must_not_start(limits, watched) {
            chunk.interrupt(place);
            continue;
        }
        args.clear();
        args.extend(batch.args.iter().map(|a| a.for_member(member)));
        if counting {
            before.clear();
            before.extend(counters.iter().map(|c| c.load(Ordering::Relaxed)));
        }
        // Seeding a stream costs more than many a member's whole run.
        let mut rng = native
            .draws()
            .then(|| MemberRng::new(options.seed, options.member_id(member)));
        let Ok(values) = place else {
            crate::internal::internal_error("a member's place holds no blank results")
        };
        let log = MemberLog {
            log: &mut chunk.adjoints,
            member: member as u32,
        };
        let run = runner.run_into(&args, limits, rng.as_mut(), counters, values, log);
        if counting && run.outcome == Err(Stop::NativeStack) {
            for (counter, count) in counters.iter().zip(&before) {
                counter.store(*count, Ordering::Relaxed);
            }
        }
        chunk.record(inputs, member, place, run, None);
    }
    chunk.counters = load_counts(&live);
    chunk
}

/// Adds `counts` to `totals` (per segment).
fn add_counts(totals: &mut [u64], counts: &[u64]) {
    for (total, count) in totals.iter_mut().zip(counts) {
        *total += count;
    }
}

/// The counts of `live` now.
fn load_counts(live: &LiveCounts) -> Vec<u64> {
    live.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}

/// Runs `members` together on this worker thread
/// ([`NativeProgram::run_batched`]), writing each one's result into its
/// place in `places`.
fn run_chunk_together(
    inputs: &RunInputs<'_>,
    members: std::ops::Range<usize>,
    places: &mut [Result<Vec<Tensor>, MemberError>],
    watched: &Watched<'_, '_>,
) -> Chunk {
    let RunInputs {
        compiled,
        env,
        batch,
        options,
        limits,
        ..
    } = *inputs;
    let mut chunk = Chunk::new(compiled);
    if must_not_start(limits, watched) {
        places.iter_mut().for_each(|place| chunk.interrupt(place));
        return chunk;
    }
    let watching = counting(options) == Counting::Kept && options.observer.is_some();
    let live = watching.then(|| chunk.watch_live(compiled, true, watched));
    let native = &compiled.program;
    let inputs_of = members
        .clone()
        .map(|member| autobatch_native::MemberInput {
            args: batch.args.iter().map(|a| a.for_member(member)).collect(),
            rng: native
                .draws()
                .then(|| MemberRng::new(options.seed, options.member_id(member))),
            member: member as u32,
        })
        .collect();
    match run_together(
        native,
        &env.statics,
        inputs_of,
        limits,
        live.as_deref(),
        watched,
        &mut chunk.adjoints,
    ) {
        Ok(together) => {
            chunk.products = together.products;
            chunk.waits = together.waits;
            let runs = together.runs.into_iter().zip(&together.counters);
            for ((member, place), (run, counters)) in members.zip(places).zip(runs) {
                let run = run.map(|values| *place = Ok(values));
                chunk.record(inputs, member, place, run, Some(counters));
            }
        }
        // No stack could be mapped for a member (the system's limit on
        // mappings or memory): the members one after the other instead,
        // into blank results as `places` makes them for that mode (and a
        // chunk of their own).
        Err(_no_stacks) => {
            std::mem::take(&mut chunk.adjoints).give_back();
            for (place, member) in places.iter_mut().zip(members.clone()) {
                *place = Ok(blank_results(compiled, batch, member));
            }
            return run_chunk(inputs, members, places, watched);
        }
    }
    chunk
}

/// [`autobatch_native::NativeProgram::run_batched`], the members' counts
/// published to `live` as they run and the observer called after each
/// publication (its interval permitting). An observer's panic (a host
/// stopping the run) raises the interrupt, which stops the members, and
/// goes on once they have ended: none unwinds through a suspended member.
fn run_together<'p>(
    native: &'p NativeProgram,
    statics: &'p [Tensor],
    members: Vec<autobatch_native::MemberInput<'p>>,
    limits: &Limits<'_>,
    live: Option<&LiveCounts>,
    watched: &Watched<'_, '_>,
    log: &mut AdjointLog,
) -> Result<autobatch_native::BatchedRun, String> {
    let mut stopped = None;
    let mut published = || {
        if stopped.is_none() {
            let call = || {
                let progress = watched.progress.lock().unwrap_or_else(|p| p.into_inner());
                call_observer(watched, progress);
            };
            stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).err();
        }
    };
    let watch = live.map(|counts| autobatch_native::Watch {
        counts,
        published: &mut published,
    });
    let together = native.run_batched(statics, members, limits, watch, log);
    if let Some(panic) = stopped {
        std::panic::resume_unwind(panic);
    }
    together
}

/// Whether members about to start must not: the run was interrupted, and
/// the code does not look at the flag itself (it would run them to their
/// end; code that does gives each a slice of steps).
fn must_not_start(limits: &Limits<'_>, watched: &Watched<'_, '_>) -> bool {
    limits.interrupt.is_none() && watched.interrupt.load(Ordering::Relaxed)
}

impl Chunk {
    /// Counters for the chunk's members to count into as they run; with
    /// `watched_live`, the watcher reads them (the chunk's `live`) until
    /// the chunk ends.
    fn watch_live(
        &mut self,
        compiled: &Compiled,
        watched_live: bool,
        watched: &Watched<'_, '_>,
    ) -> Arc<LiveCounts> {
        let live: Arc<LiveCounts> = Arc::new(
            compiled
                .program
                .segments()
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect(),
        );
        if watched_live {
            let mut progress = watched.progress.lock().unwrap_or_else(|p| p.into_inner());
            progress.live.push(live.clone());
            self.live = Some(live.clone());
        }
        live
    }

    /// A member stopped, or not started, because the run was interrupted.
    fn interrupt(&mut self, place: &mut Result<Vec<Tensor>, MemberError>) {
        self.interrupted += 1;
        *place = Err(interrupted(Loc::default()));
    }

    fn new(compiled: &Compiled) -> Chunk {
        Chunk {
            live: None,
            adjoints: AdjointLog::spare(),
            counters: compiled.zero_counters(),
            steps: 0,
            instances: 0,
            peak_instances: 0,
            tape_bytes: 0,
            rerun: 0,
            products: 0,
            waits: 0,
            interrupted: 0,
            ended: 0,
        }
    }

    /// Adds `member`'s figures (the `counters` of the segments, unless
    /// they are the chunk's already) and,
    /// if it stopped, writes its error into `place` (which holds its
    /// results if it finished), or reruns it on the reference executor if
    /// its native frames ran short of stack.
    fn record(
        &mut self,
        inputs: &RunInputs<'_>,
        member: usize,
        place: &mut Result<Vec<Tensor>, MemberError>,
        run: autobatch_native::MemberRun<()>,
        counters: Option<&[u64]>,
    ) {
        let options = inputs.options;
        match run.outcome {
            // (Its contributions are in the chunk's log already.)
            Ok(()) => {}
            Err(Stop::NativeStack) => {
                self.rerun += 1;
                let alone = reference::run_member_logged(
                    inputs.program,
                    &crate::ragged::member_env(inputs.env, member),
                    inputs.batch,
                    options,
                    member,
                );
                *place = alone.result;
                self.adjoints.append(&alone.adjoints, |m| m);
                self.ended += 1;
                return;
            }
            Err(Stop::Interrupted) => return self.interrupt(place),
            Err(stop) => *place = Err(member_error(stop, options)),
        }
        self.ended += 1;
        self.steps += run.steps;
        self.instances += run.instances;
        self.peak_instances = self.peak_instances.max(run.peak_instances);
        self.tape_bytes = self.tape_bytes.max(run.tape_bytes);
        add_counts(&mut self.counters, counters.unwrap_or(&[]));
    }
}

/// The error of a member that stopped with `stop` (a stop of the
/// program's meaning: a fault, the step limit, the depth limit).
pub(crate) fn member_error(stop: Stop, options: &RunOptions) -> MemberError {
    match stop {
        Stop::Fault { fault, loc } => MemberError::new(fault.kind, fault.message, loc),
        Stop::StepLimit(loc) => step_limit(options.max_steps, loc),
        Stop::StackOverflow(loc) => stack_overflow(options.max_stack_depth, loc),
        Stop::NativeStack | Stop::Interrupted => {
            crate::internal::internal_error(format!("{stop:?} is not a member's error"))
        }
    }
}

/// What the observer is shown: the figures of the chunks ended so far.
struct Watched<'w, 'p> {
    progress: &'w Mutex<Progress<'p>>,
    compiled: &'w Compiled,
    counter: &'w OpCounter,
    slots: &'w Slots,
    /// The run's interrupt flag, raised too when the observer panics (a
    /// host stopping the run).
    interrupt: &'w AtomicBool,
}

/// Adds a finished chunk's figures to the run's, and calls the observer
/// if its interval has passed.
fn report_progress(watched: &Watched<'_, '_>, done: &Chunk) {
    let mut progress = watched.progress.lock().unwrap_or_else(|p| p.into_inner());
    // Its counts move from the live ones to the totals at once.
    if let Some(live) = &done.live {
        progress.live.retain(|l| !Arc::ptr_eq(l, live));
    }
    add_counts(&mut progress.counters, &done.counters);
    progress.steps += done.steps;
    progress.instances += done.instances;
    progress.peak_instances = progress.peak_instances.max(done.peak_instances);
    progress.tape_bytes = progress.tape_bytes.max(done.tape_bytes);
    progress.rerun += done.rerun;
    progress.products += done.products;
    progress.waits += done.waits;
    progress.members_done += done.ended;
    call_observer(watched, progress);
}

/// Calls the observer with the figures so far if its interval has passed
/// since the last call.
fn call_observer(watched: &Watched<'_, '_>, mut progress: std::sync::MutexGuard<'_, Progress<'_>>) {
    let Some(observer) = progress.observer else {
        return;
    };
    let now = Instant::now();
    if now.duration_since(progress.last_call) < observer.interval {
        return;
    }
    progress.last_call = now;
    let mut counts = progress.counters.clone();
    for live in &progress.live {
        add_counts(&mut counts, &load_counts(live));
    }
    for (total, shown) in counts.iter_mut().zip(&progress.shown) {
        *total = (*total).max(*shown);
    }
    let op_counts = sorted_counts(watched.counter, watched.slots, watched.compiled, &counts);
    progress.shown = counts;
    let (steps, members_done) = (progress.steps, progress.members_done);
    // The caller's code (called with the lock held: the workers and the
    // watcher call it one at a time, with counts that never go back): a
    // panic there is not autobatch's. It stops the run: the members still
    // running are interrupted, then it goes on.
    let call = || {
        outside_capture(|| {
            (observer.callback)(&RunProgress {
                steps,
                members_done,
                op_counts: &op_counts,
            })
        })
    };
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        watched.interrupt.store(true, Ordering::Relaxed);
        drop(progress);
        std::panic::resume_unwind(panic);
    }
}

/// The watcher of a run with an observer: calls it every interval (at
/// least every millisecond) until `ended` says the run is over. If the
/// observer panics (a host stopping the run, `Stop` of the sampler), the
/// members are interrupted (`call_observer`) and the panic is given back,
/// for the run to go on unwinding with once they have stopped.
fn watch(
    observer: &crate::Observer,
    watched: &Watched<'_, '_>,
    ended: std::sync::mpsc::Receiver<()>,
) -> Option<Box<dyn std::any::Any + Send>> {
    let every = observer.interval.max(std::time::Duration::from_millis(1));
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = ended.recv_timeout(every) {
        let call = || {
            let progress = watched.progress.lock().unwrap_or_else(|p| p.into_inner());
            call_observer(watched, progress);
        };
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
            return Some(panic);
        }
    }
    None
}

/// Per function, per block, per op: the counter of a user primitive.
pub(crate) type Slots = Vec<Vec<Vec<Option<usize>>>>;

/// The operation counts of the program's segments' `counters`, as the
/// reference gives them (each member's execution one, with one active
/// lane), sorted by location then name.
fn sorted_counts(
    counter: &OpCounter,
    slots: &Slots,
    compiled: &Compiled,
    counters: &[u64],
) -> Vec<OpCount> {
    segment_counts(counter, slots, [(compiled.program.segments(), counters)])
}

/// The operation counts of native code's segments (per program: its
/// segments and their executions), as the reference gives them (each
/// member's execution one, with one active lane), sorted by location then
/// name.
pub(crate) fn segment_counts<'a>(
    counter: &OpCounter,
    slots: &Slots,
    programs: impl IntoIterator<Item = (&'a [autobatch_native::Segment], &'a [u64])>,
) -> Vec<OpCount> {
    let mut counts = counter.counts().to_vec();
    for (segments, counters) in programs {
        for (segment, &executions) in segments.iter().zip(counters) {
            let block_slots = &slots[segment.function.index()][segment.block.index()];
            for &op in &segment.ops {
                if let Some(slot) = block_slots[op] {
                    counts[slot].executions += executions;
                    counts[slot].active_lanes += executions;
                }
            }
        }
    }
    counts.sort_by(|a, b| (a.loc, a.op).cmp(&(b.loc, b.op)));
    counts
}
