//! Executors: they run a verified IR [`Program`] on a batch of members.
//!
//! Every executor implements [`Executor`]: it takes the same [`Batch`],
//! [`Env`] and [`RunOptions`] and returns the same [`RunOutput`]; the
//! reference executor ([`reference`](mod@reference)) defines what every member's result
//! is, and every other strategy must give exactly the same per-member
//! results, errors included. [`EXECUTORS`] registers them; a [`Strategy`]
//! is a handle to one of them, and [`run`] runs one.
//!
//! This crate must not know about syntax, JSON or the command line: inputs
//! arrive as tensors already checked against the entry function's signature.

use autobatch_ir::{FuncId, Program, SymbolId};
use autobatch_types::{ErrorKind, Loc, MemberError, Tensor};

pub mod auto;
pub mod batched;
mod executor;
pub mod gradients;
mod internal;
pub mod local_static;
pub mod memory;
pub mod monitor;
pub mod native;
mod native_cache;
pub mod native_lockstep;
pub mod profile;
pub mod program_counter;
pub mod ragged;
pub mod reference;
mod stack_cache;

/// Default `--max-stack-depth`: the deepest chain of calls one member may
/// have (the entry function counts as depth 1).
pub const DEFAULT_MAX_STACK_DEPTH: usize = 10_000;
/// Default `--max-steps`: the most basic blocks one member may execute.
pub const DEFAULT_MAX_STEPS: u64 = 100_000_000;
/// The most steps a member not finished may take once the run is
/// interrupted ([`RunOptions::interrupt`]): as many as native code takes
/// between two looks at the flag (under `native` a running member takes
/// the rest of its slice, at most this many).
pub const INTERRUPT_GRACE_STEPS: u64 = autobatch_native::POLL_STEPS;

/// How a run behaves, whatever the strategy.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    pub max_stack_depth: usize,
    pub max_steps: u64,
    /// The seed of the run; member `i` draws from a stream that depends only on `(seed, i)`.
    pub seed: u64,
    /// The index of the batch's member 0 in a larger batch of which this one
    /// is a slice (a shard run by one of several processes): member `m`
    /// draws from the stream of member `first_member + m`, so that its
    /// results are those it has in the whole batch. 0 for a whole batch.
    pub first_member: u64,
    /// The index in the whole batch of each member of this batch, where
    /// they are not `first_member, first_member + 1, ..` (the members of one
    /// size of a ragged batch, [`ragged`]): member `m` draws from the stream
    /// of member `member_ids[m]`. `None` for a whole batch or a slice.
    pub member_ids: Option<std::sync::Arc<[u64]>>,
    /// Worker threads for large operations (1 = none).
    pub threads: usize,
    /// The most instance lanes (of `join`, `map`, `pfor`) the batching
    /// strategies keep alive at once; a fork that finds none free still
    /// starts one instance, the others as lanes free up. `None`: as many as
    /// a quarter of the available memory holds ([`default_max_instances`]).
    /// Changes no result.
    pub max_instances: Option<usize>,
    /// The most bytes one member's tape may hold (the values the forward
    /// part of a gradient saves; [`Stats::tape_bytes`]): a member whose
    /// push would hold more stops with `tape_limit`. `None`: a quarter of
    /// the available memory ([`default_max_tape_bytes`]).
    pub max_tape_bytes: Option<u64>,
    /// Called while the run goes, with the counts so far.
    pub observer: Option<Observer>,
    /// The run's interrupt flag: once it is set (from another thread: the
    /// user's Ctrl-C), the members not finished stop with an error of kind
    /// `interrupted` ([`interrupted_error`]), and the members that finished
    /// keep their results. Under the interpreters and `native-lockstep`, and
    /// native code polling it ([`Interrupt::within_members`]), a member not
    /// finished may take at most [`INTERRUPT_GRACE_STEPS`] more steps (one
    /// waiting behind others a few steps from its end still finishes);
    /// other native code finishes the members running and starts no more.
    /// An observer that panics sets it too. `None`: nothing interrupts the
    /// run.
    pub interrupt: Option<Interrupt>,
    /// Whether the batching strategies run chains of elementwise
    /// operations fused, a cache-sized group of rows at a time
    /// (`batched::chains`); default true. Changes no result.
    pub fuse: bool,
    /// Whether the batching strategies record the run's [`profile::Profile`]
    /// (into [`Stats::profile`]); default false. Changes no result.
    pub profile: bool,
    /// How the batching strategies batch ([`Strategy::reads`] says which
    /// of these an executor reads); the others ignore it. Changes no result.
    pub batching: BatchingOptions,
    /// Whether `auto` may first try a small run on `program-counter`
    /// before compiling native code ([`auto::run_choice`]); default true.
    /// The sampler's runs, long by construction, set it false. Changes no
    /// result.
    pub auto_trial: bool,
    /// Whether the run must count each operation's executions
    /// ([`Stats::op_counts`]); default true. When false, the native
    /// strategies' machine code counts nothing: their `op_counts` is empty
    /// (and `lane_utilization` 0), for the observer too; the interpreters
    /// count regardless (it costs them little). Changes no result.
    pub count_operations: bool,
}

/// Watches a run while it goes: every executor calls `callback` between
/// steps, at most once per `interval`, with the operation counts so far (a
/// host can follow how far its members are, say to draw a progress bar,
/// from the executions of an operation it knows runs once per iteration).
/// It cannot change the run.
#[derive(Clone)]
pub struct Observer {
    pub interval: std::time::Duration,
    pub callback: std::sync::Arc<dyn Fn(&RunProgress<'_>) + Send + Sync>,
}

/// Two observers are equal when they are the same callback, called as often.
impl PartialEq for Observer {
    fn eq(&self, other: &Observer) -> bool {
        self.interval == other.interval && std::sync::Arc::ptr_eq(&self.callback, &other.callback)
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// A run's interrupt flag ([`RunOptions::interrupt`]): a host raises it
/// from another thread (a signal handler's flag, the user's Ctrl-C) to stop
/// the run with the members finished so far. Clones share one flag; two
/// are equal when they are the same flag, looked at as often.
///
/// The interpreters look at it at every step. Native code looks at it
/// between members only (a member running when it is raised finishes),
/// unless the interrupt asks for more ([`Interrupt::within_members`]):
/// the code then takes its steps a few thousand at a time and looks at
/// the flag between them, which slows code made of tiny calls (a naive
/// recursive `fib` by more than half) but stops a long member (a
/// sampler's chain) within a few thousand of its steps.
#[derive(Clone, Debug, Default)]
pub struct Interrupt {
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    within_members: bool,
}

impl Interrupt {
    /// A flag not raised (yet).
    pub fn new() -> Interrupt {
        Interrupt::default()
    }
    /// The flag an interrupt raises, shared: a signal handler may set it.
    pub fn from_flag(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Interrupt {
        Interrupt {
            flag,
            within_members: false,
        }
    }
    /// This flag, looked at by native code while a member runs too, not
    /// only between members: for runs of long members.
    pub fn within_members(self) -> Interrupt {
        Interrupt {
            within_members: true,
            ..self
        }
    }
    /// Whether native code looks at the flag while a member runs
    /// ([`Interrupt::within_members`]).
    pub fn stops_members(&self) -> bool {
        self.within_members
    }
    /// Raises the flag: the runs it was given to stop.
    pub fn request(&self) {
        self.flag.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    /// Whether the flag was raised.
    #[inline]
    pub fn is_requested(&self) -> bool {
        self.flag.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// The flag itself, for code that polls it.
    pub fn flag(&self) -> &std::sync::atomic::AtomicBool {
        &self.flag
    }
}

impl PartialEq for Interrupt {
    fn eq(&self, other: &Interrupt) -> bool {
        std::sync::Arc::ptr_eq(&self.flag, &other.flag)
            && self.within_members == other.within_members
    }
}

/// What an [`Observer`] sees: the blocks executed so far, the members
/// known to have ended, and the count of every user operation so far (in
/// no particular order).
#[derive(Clone, Copy, Debug)]
pub struct RunProgress<'a> {
    pub steps: u64,
    /// Members that have returned or stopped with an error, as far as the
    /// executor knows while it runs: `local-static` learns that members
    /// returned only when the entry's activation ends (it counts those
    /// that stopped before), `native-lockstep` counts none until the end.
    pub members_done: u64,
    pub op_counts: &'a [OpCount],
}

impl RunProgress<'_> {
    /// The active lanes of every operation at `line`, summed.
    pub fn active_lanes_at_line(&self, line: u32) -> u64 {
        self.op_counts
            .iter()
            .filter(|op| op.loc.line == line)
            .map(|op| op.active_lanes)
            .sum()
    }
}

impl RunOptions {
    /// Whether the run's interrupt flag ([`RunOptions::interrupt`]) is set.
    #[inline]
    pub fn interrupted(&self) -> bool {
        self.interrupt.as_ref().is_some_and(Interrupt::is_requested)
    }

    /// The most bytes one member's tape may hold ([`RunOptions::max_tape_bytes`]).
    pub fn tape_bound(&self) -> usize {
        let bound = self.max_tape_bytes.unwrap_or_else(default_max_tape_bytes);
        usize::try_from(bound).unwrap_or(usize::MAX)
    }

    /// The index in the whole batch of member `m` of this one: the member
    /// whose random stream it draws from.
    pub fn member_id(&self, m: usize) -> u64 {
        match &self.member_ids {
            Some(ids) => ids[m],
            None => self.first_member + m as u64,
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            max_stack_depth: DEFAULT_MAX_STACK_DEPTH,
            max_steps: DEFAULT_MAX_STEPS,
            seed: 0,
            first_member: 0,
            member_ids: None,
            threads: 1,
            max_instances: None,
            max_tape_bytes: None,
            observer: None,
            interrupt: None,
            fuse: true,
            profile: false,
            count_operations: true,
            batching: BatchingOptions::default(),
            auto_trial: true,
        }
    }
}

/// What is shared by all members: the statics (indexed by `StaticId`) and
/// the values of the symbolic dimensions (indexed by `SymbolId`); and the
/// symbolic dimensions whose length differs from member to member.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// Shared (`Arc`), so that the batches bound to one set of statics
    /// (`autobatch::BoundProgram`) hold them without copying.
    pub statics: std::sync::Arc<Vec<Tensor>>,
    /// The length of each symbolic dimension; for a ragged one, the longest
    /// member's (an upper bound for memory checks).
    pub symbols: Vec<u64>,
    /// The host functions the program's host primitives call, by name.
    pub hosts: autobatch_kernels::Hosts,
    /// The symbolic dimensions only batched arguments fix, with each
    /// member's own length, where not every member has the same
    /// ([`ragged`]); empty for a batch of one size.
    pub ragged: Vec<RaggedSymbol>,
}

/// A symbolic dimension whose length differs from member to member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaggedSymbol {
    pub symbol: SymbolId,
    /// One per member of the batch.
    pub lengths: Vec<u64>,
}

/// One flattened entry argument: one value per member, or one for all.
#[derive(Clone, Debug)]
pub enum Arg {
    Batched(Vec<Tensor>),
    Shared(Tensor),
}

impl Arg {
    /// The value member `member` sees.
    pub fn for_member(&self, member: usize) -> &Tensor {
        match self {
            Arg::Batched(values) => &values[member],
            Arg::Shared(value) => value,
        }
    }
}

/// A batch: the entry function and its flattened arguments.
#[derive(Clone, Debug)]
pub struct Batch {
    pub entry: FuncId,
    /// Number of members.
    pub size: usize,
    /// One per flattened parameter of the entry function, in order.
    pub args: Vec<Arg>,
}

/// Execution counts of one primitive operation of the source.
#[derive(Clone, Debug, PartialEq)]
pub struct OpCount {
    pub op: &'static str,
    pub loc: Loc,
    /// Batched executions of the operation.
    pub executions: u64,
    /// (member, execution) pairs in which the member was active.
    pub active_lanes: u64,
}

/// Figures of one run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Blocks executed (each a batched execution of one basic block).
    pub steps: u64,
    /// Mean fraction of the lanes active in the operations run: the active
    /// rows of every execution over the threads of control at the time
    /// (every member; one waiting at a fork counts as the instances of the
    /// fork then running, and so on down nested forks).
    pub lane_utilization: f64,
    /// Instances (of `join`, `map`, `pfor`) started, summed over members.
    pub instances: u64,
    /// The most instances alive at once.
    pub peak_instances: u64,
    /// Bytes the batching strategies copied to pass arguments to calls and
    /// instances (into the callees' parameters), and, under
    /// program-counter, to save variables on their value stacks around
    /// calls and restore them. A member-uniform parameter (data a recursion
    /// passes down unchanged) costs nothing. 0 under the reference.
    pub call_bytes: u64,
    /// The most bytes of per-lane variable storage held at once by the
    /// batching strategies: local-static, the columns of the activations
    /// alive; program-counter, the columns (a row per lane) and the value
    /// stacks. Invariant values, statics and member-uniform parameters
    /// (stored once per member) do not count. 0 under the reference.
    pub peak_state_bytes: u64,
    /// The most bytes one member's tape held at once (the values the
    /// forward part of a gradient saves for its backward part; see
    /// `autobatch_kernels::Tape::held`): the same under every strategy
    /// when every member finishes (a batching strategy may run, and count,
    /// instances of a fork after an earlier one faulted).
    pub tape_bytes: u64,
    /// One entry per user operation of the source (bookkeeping excluded),
    /// sorted by location then name.
    pub op_counts: Vec<OpCount>,
    /// Seconds spent executing the batch only.
    pub wall_seconds: f64,
    /// How many sizes the batch has: 1 when every member has the same
    /// lengths; for a ragged batch, the distinct combinations of lengths of
    /// its ragged dimensions (its size classes). The batching strategies
    /// run them as one batch (`batched::classes`), the native ones on one
    /// program that reads each member's lengths; the reference, and any strategy whose padded rows
    /// do not fit in memory, each as a batch of its own ([`ragged`]).
    pub sizes: u64,
    /// The figures the executor reports of its own (`--stats` prints them
    /// as an object under the strategy's name); none for most executors.
    pub report: Vec<ReportField>,
    /// Under the `auto` strategy: the executor it picked and why
    /// ([`auto::choose`]); `None` when the run named its strategy.
    pub choice: Option<auto::Choice>,
    /// The lanes each step used and each block's steps, when the run was
    /// asked to record them ([`RunOptions::profile`]) and the strategy
    /// records them ([`Strategy::records_profile`]).
    pub profile: Option<profile::Profile>,
}

/// The outcome of a run: per member, the flattened results or the error
/// that stopped it; and the run's figures.
#[derive(Clone, Debug)]
pub struct RunOutput {
    pub results: Vec<Result<Vec<Tensor>, MemberError>>,
    /// The contributions to static adjoints of the members that finished
    /// (a program derived by `autobatch_autodiff::derive_static_gradient`;
    /// empty for any other), `member` being the member's index in the
    /// batch, in no particular order:
    /// `autobatch_kernels::adjoints::static_gradients` sums them.
    pub adjoints: autobatch_kernels::adjoints::AdjointLog,
    pub stats: Stats,
}

/// One figure an executor reports about a run beyond the common [`Stats`]
/// (`--stats` prints an executor's figures as one object under its name).
#[derive(Clone, Debug, PartialEq)]
pub struct ReportField {
    pub name: &'static str,
    pub value: ReportValue,
}

/// The value of a [`ReportField`].
#[derive(Clone, Debug, PartialEq)]
pub enum ReportValue {
    Bool(bool),
    Count(u64),
    Seconds(f64),
    Text(String),
}

/// Runs `batch` on `program` with the reference executor ([`run`] with
/// [`Strategy::Reference`]).
pub fn run_reference(
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    run(Strategy::Reference, program, env, batch, options)
}

pub use autobatch_kernels::adjoints;
pub use autobatch_kernels::backend::{Backend, Cpu};
pub use autobatch_kernels::{BatchHostFn, HostFn, Hosts};
pub use batched::engine::LaneMode;
pub use batched::BlockChoice;
pub use executor::{Executor, OptionsRead, Strategy, EXECUTORS};
pub use memory::{available_memory_bytes, default_max_instances, default_max_tape_bytes};
pub use native_cache::share_program;

/// Options only the batching strategies read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchingOptions {
    pub lanes: LaneMode,
    pub block_choice: BlockChoice,
}

impl Default for BatchingOptions {
    fn default() -> Self {
        BatchingOptions {
            lanes: LaneMode::Auto,
            block_choice: BlockChoice::SmallestIndex,
        }
    }
}

/// Why a whole run could not go (a member's own fault is in its result
/// instead). A broken invariant anywhere under [`run`] is `Internal`, never
/// a panic (see the module `internal`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecError {
    /// A value, or the members' state, cannot fit in memory: found before running.
    Resources(String),
    /// A broken invariant of the compiler or an executor: a bug in autobatch,
    /// never the user's fault.
    Internal(String),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::Resources(message) => f.write_str(message),
            ExecError::Internal(message) => {
                write!(f, "internal error: {message} (this is a bug in autobatch)")
            }
        }
    }
}

impl std::error::Error for ExecError {}

/// Runs `batch` with `strategy`. `program` must have been through
/// `autobatch_passes::optimize`. Fails before running when a value, or the
/// members' state, cannot fit in memory, and on a bug in autobatch (a
/// verifier catches a compiler bug, or an invariant of an executor, the
/// engine or the kernels breaks): `ExecError::Internal`, never a panic.
pub fn run(
    strategy: Strategy,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    run_on(&Cpu, strategy, program, env, batch, options)
}

/// [`run`], the batching strategies computing on `backend` (the reference
/// executor defines the results: it computes with the kernels directly).
pub fn run_on(
    backend: &dyn Backend,
    strategy: Strategy,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    internal::guard(|| {
        memory::check_value_sizes(program, batch.entry, &env.symbols)
            .map_err(ExecError::Resources)?;
        // `auto` picks here, so that the ragged batch below is run as the
        // executor it picks runs one.
        let mut output = if strategy == Strategy::Auto {
            let choice = auto::choose(program, env, batch, options);
            auto::run_choice(choice, program, env, batch, options, |strategy, options| {
                run_sized(backend, strategy, program, env, batch, options)
            })?
        } else {
            run_sized(backend, strategy, program, env, batch, options)?
        };
        if options.interrupt.is_some() {
            let interrupted = interrupted_error(program, batch);
            for result in &mut output.results {
                if matches!(result, Err(e) if e.kind == ErrorKind::Interrupted) {
                    *result = Err(interrupted.clone());
                }
            }
        }
        Ok(output)
    })
}

/// [`run_on`] of a batch of one size or, for a ragged batch, of all its
/// sizes together where the strategy can, else one size at a time;
/// `strategy` is an executor of its own (not `auto`).
fn run_sized(
    backend: &dyn Backend,
    strategy: Strategy,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    let executor = strategy.executor();
    if !env.ragged.is_empty() {
        if executor.runs_ragged() {
            match executor.run(backend, program, env, batch, options) {
                // The batch's rows, padded to its longest member, do
                // not fit in memory (found before anything ran): its
                // sizes, each with its own lengths, may.
                Err(ExecError::Resources(_)) => {}
                Err(other) => return Err(other),
                Ok(mut output) => {
                    output.stats.sizes = ragged::sizes(env, batch.size)?;
                    return Ok(output);
                }
            }
        }
        return ragged::run_by_size(backend, strategy, program, env, batch, options);
    }
    let mut output = executor.run(backend, program, env, batch, options)?;
    output.stats.sizes = 1;
    Ok(output)
}

/// The error of a member the run was interrupted before it finished
/// ([`RunOptions::interrupt`]), the same under every strategy: each
/// stops such a member wherever it is (or before it starts), and
/// [`run_on`] gives every one this error, located at the entry function.
pub fn interrupted_error(program: &Program, batch: &Batch) -> MemberError {
    let loc = program
        .functions
        .get(batch.entry)
        .map_or(Loc::default(), |f| f.loc);
    monitor::interrupted(loc)
}
