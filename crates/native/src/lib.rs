//! Native code for autobatch: the IR functions an entry reaches, compiled to
//! machine code with Cranelift and run **member by member**.
//!
//! [`compile`] translates each reachable IR function into one native
//! function; a member's control (branches, loops, calls, recursion) then
//! runs natively, its scalars in registers and its arrays in its own
//! frames (each activation's array area; see `translate::function`).
//! Every result is the reference executor's, bit for bit:
//!
//! - integer arithmetic wraps as in `kernels::scalar` (`MIN / -1` is `MIN`,
//!   `MIN % -1` is 0); an integer `/` or `%` by zero and a failed `assert`
//!   stop the member with the kernels' own [`Fault`] at the operation;
//! - float `+ - * /`, `sqrt`, `abs`, negation, `recip`, comparisons and
//!   casts are computed natively (IEEE 754 and Rust's `as` fix their
//!   bits); every other float function (and integer `pow`) calls the
//!   kernels' own scalar function through an `extern "C"` shim (`shims`);
//! - **steps**: each entry into an IR block takes one step; a member about
//!   to exceed `max_steps` stops with [`Stop::StepLimit`] at that block.
//!   Code compiled with [`Interrupts::Polled`] holds its steps
//!   [`POLL_STEPS`] at a time and, on a cold path, takes the next slice
//!   from the context's reserve, which is where a run's
//!   [`Limits::interrupt`] is seen: the member then stops with
//!   [`Stop::Interrupted`], which is not a result;
//! - **stack depth**: the entry is depth 1; a call that would exceed
//!   `max_stack_depth` stops the member with [`Stop::StackOverflow`] at the
//!   call (checked before the callee's entry step), or, for a catching
//!   call, gives `(false, zeros)`; faults inside a catching call are
//!   caught likewise (every stop but the step limit);
//! - **native stack**: every function checks on entry that the machine
//!   stack has room left (`Limits::stack_room`); if not, the member stops
//!   with [`Stop::NativeStack`], which is not a result: the caller reruns
//!   that member on an interpreter. [`NativeProgram::stack_bytes`] sizes a
//!   thread's stack so that this does not happen within the depth limit.
//!
//! A branch whose two arms are short, scalar and cannot stop the member
//! runs as selects (`translate::select`): both arms are computed and the
//! member keeps the values, the step and the counts of the arm its
//! condition takes, so that a branch that follows the data is not a
//! mispredicted jump.
//!
//! A function's one self call whose result is returned `+` or `*` an
//! integer of the caller restarts the activation instead of calling
//! (`translate::tail`): its frames cost no machine call, and the member's
//! depth, steps, limits and counts stay the reference's.
//!
//! Operation counts are kept per *segment* (unless compiled with
//! [`Counting::Skipped`], for a run whose counts nobody reads) (the ops of a block from one
//! operation that may stop the member to the next, [`Segment`]): one
//! counter increment per segment entered, which gives every operation the
//! executions the reference counts. A segment inside a loop counts in a
//! register, added to the context's counter on every exit of its function
//! (a return or a stop), so that a loop's iterations do not wait on one
//! another through memory; code compiled with [`Interrupts::Polled`] also
//! adds it at every slice of steps, so that a host reading the counters
//! while the member runs ([`Runner::run_into`]) sees its progress.
//!
//! Array primitives, statics and random draws are computed by the host
//! (`arrays`: the kernels' own per-member functions on slices of the
//! member's frames, its `MemberRng` in the reference's order), indexing,
//! small copies and small elementwise float `+ - * /` inline
//! (`translate::inline`); an index out of bounds or an integer division by
//! zero inside an array operation stops the member with the kernels'
//! fault at the operation.
//!
//! A ragged batch runs on one program ([`compile_for`]): each member reads
//! its own lengths of the per-member dimensions from its context, its
//! arrays in frames sized for the batch's capacities (`lengths`).
//!
//! Forks (`join`, `map`, `pfor`) run their instances one after the other,
//! as the reference executor does: each instance a native call one level
//! deeper, with the instance's own random stream and the figures kept by
//! the host (`forks`); a `map`'s instances are a native loop writing
//! element `k` of each result array.
//!
//! Members may also run together ([`NativeProgram::run_batched`], the
//! `native-batched` strategy): each on a stack of its own, waiting at the
//! products with a static matrix, which run once for all the members
//! waiting at them (`waits`).
//!
//! Or in lock-step ([`compile_lockstep`], the `native-lockstep` strategy;
//! `lockstep`): the members advance together and each piece of the
//! program is a native loop over the members at it, their scalars in
//! columns (`docs/benchmarks.md` compares the two shapes).
//!
//! What is not compiled yet ([`compile`] says what and where): calls of
//! host primitives. The executor (`autobatch_exec::native`) runs such
//! programs on an interpreter.
//!
//! The functions of one [`NativeProgram`] are immutable after [`compile`]
//! and may run on many threads at once, one member per thread at a time.
// The shims walk the table of operations (`shims`), one level per row.
#![recursion_limit = "256"]

mod arrays;
mod check;
mod forks;
mod lengths;
mod lockstep;
mod published;
mod shims;
mod stacks;
mod tape;
mod translate;
mod waits;

pub use arrays::{popped_bytes, PoppedBytes};
pub use lengths::Lengths;
pub use lockstep::{compile_lockstep, LockProgress, LockStepProgram, LockStepRun};
pub use published::Watch;
pub use stacks::run_on_stack;
pub use waits::{BatchedRun, MemberInput};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use autobatch_ir::{Block, FuncId, Program};
use autobatch_kernels::adjoints::AdjointLog;
use autobatch_kernels::{Fault, MemberRng};
use autobatch_types::{Data, Loc, Scalar, Tensor, TensorType};
use cranelift_jit::JITModule;

use arrays::{ArrayOp, Operand};

/// Why a program is not compiled: the first construct the compiler does
/// not take, with its place (`"matvec at 12:5 is not compiled yet"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotCompiled {
    pub reason: String,
}

/// Why a member stopped before returning.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// A primitive faulted (division by zero, assertion) at `loc`.
    Fault { fault: Fault, loc: Loc },
    /// The member was about to take a step past `max_steps`, entering the
    /// block opened at `loc`.
    StepLimit(Loc),
    /// A call at `loc` would have exceeded `max_stack_depth`.
    StackOverflow(Loc),
    /// The machine stack ran short: no result; rerun the member elsewhere.
    NativeStack,
    /// The run was interrupted ([`Limits::interrupt`]): no result.
    Interrupted,
}

impl Stop {
    /// Whether a catching call recovers from it (every stop of the
    /// program's meaning but the step limit).
    fn catchable(&self) -> bool {
        matches!(self, Stop::Fault { .. } | Stop::StackOverflow(_))
    }
}

/// The user operations (by position in their block) that one counter
/// counts: each is reached exactly when the segment is entered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub function: FuncId,
    pub block: Block,
    pub ops: Vec<usize>,
}

/// The limits of one member's run.
#[derive(Clone, Copy, Debug)]
pub struct Limits<'a> {
    pub max_steps: u64,
    pub max_stack_depth: usize,
    /// Bytes of machine stack below the caller's frame that the member's
    /// native frames may use.
    pub stack_room: usize,
    /// The most bytes the member's tape may hold: a push past it faults
    /// with `tape_limit`.
    pub max_tape_bytes: usize,
    /// Set from another thread, it stops every member of a program
    /// compiled with [`Interrupts::Polled`] within [`POLL_STEPS`] of its
    /// steps, with [`Stop::Interrupted`] (a host abandoning the run: a
    /// user's Ctrl-C); a member that finishes within them keeps its
    /// outcome, and one started after it was set may take [`POLL_STEPS`].
    /// `None`: nothing interrupts.
    pub interrupt: Option<&'a AtomicBool>,
}

/// How many steps a member takes between two looks at
/// [`Limits::interrupt`] under [`Interrupts::Polled`]: native code counts
/// its steps down from a slice of this many and then takes the next one,
/// so that the look costs nothing on the way (a member of scalar code sees
/// an interrupt within a slice of short steps; one whose blocks do array
/// work, within this many of them).
pub const POLL_STEPS: u64 = 1 << 12;

/// One member's run: its results or why it stopped, its steps, and the
/// instances of `join`, `map` and `pfor` it started (and the most that
/// were live at once).
///
/// `T` is what a member that finished gives: its results, or nothing when
/// they were written in place ([`Runner::run_into`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MemberRun<T = Vec<Tensor>> {
    pub outcome: Result<T, Stop>,
    pub steps: u64,
    pub instances: u64,
    pub peak_instances: u64,
    /// The most bytes the member's tape held (`autobatch_kernels::Tape::held`).
    pub tape_bytes: u64,
}

/// Where a member's contributions to static adjoints (`static_adjoint`
/// operations) go: into `log`, in the order made, each record naming
/// `member`. A member that does not finish leaves nothing there.
pub struct MemberLog<'a> {
    pub log: &'a mut AdjointLog,
    pub member: u32,
}

impl<T> MemberRun<T> {
    /// The same run with `f` applied to what a finished member gives.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> MemberRun<U> {
        MemberRun {
            outcome: self.outcome.map(f),
            steps: self.steps,
            instances: self.instances,
            peak_instances: self.peak_instances,
            tape_bytes: self.tape_bytes,
        }
    }
}

/// What native code and the host share during one member's run. The
/// offsets are fixed: the generated code reads and writes these fields.
#[repr(C)]
pub(crate) struct Context {
    /// 0 while the member runs; else a stop code ([`translate::stop_code`]).
    status: u32,
    _pad: u32,
    steps_left: u64,
    depth_left: u64,
    stack_limit: u64,
    counters: *mut u64,
    /// The member's length of every symbol (`lengths`): native code reads
    /// the per-member ones here (the others are its constants), the host
    /// all of them.
    symbols: *const u64,
    /// Per static, the address of its elements.
    static_data: *const *const u8,
    /// The steps not yet handed to the code, which holds at most
    /// [`POLL_STEPS`] of them at a time (`translate::function`'s
    /// `take_step` takes the next slice when it has none left).
    steps_reserve: u64,
    /// The run's interrupt flag ([`Limits::interrupt`]; else [`NEVER`]),
    /// read by the code as it takes a slice: when set, it takes none.
    interrupt: *const AtomicBool,
    // The rest is the host's (`arrays::array_op`); native code does not
    // read it.
    symbol_count: usize,
    arrays: *const Vec<ArrayOp>,
    statics: *const [Tensor],
    rng: *mut MemberRng,
    /// The fault of the last array operation that faulted.
    fault: Option<Fault>,
    /// Memory for an array operation whose destination is an operand.
    scratch: Vec<u64>,
    /// The operation being run with the running member's shapes, when it
    /// has operands of per-member lengths (`arrays::array_op`): kept to
    /// reuse its memory.
    member_op: Option<Box<arrays::ArrayOp>>,
    /// The forks the member is inside (`forks`).
    forks: Vec<forks::OpenFork>,
    /// Instances started, instances live now, and the most live at once.
    instances: u64,
    live_instances: u64,
    peak_instances: u64,
    /// The log the running member's contributions to static adjoints go
    /// to (`arrays::apply`; [`MemberLog`]), and the member they name.
    adjoints: *mut AdjointLog,
    member: u32,
    /// The tape of what runs (`tape_push`, `tape_pop`): the member's, shared
    /// by the instances of an untaped fork (which run one after the other
    /// and each leave it as they found it); an instance of a taped fork has
    /// its own (`forks`).
    tape: tape::Tape,
    /// The tapes set aside by the catching calls the member is inside,
    /// innermost last (`forks::catch_begin`).
    caught_tapes: Vec<tape::Tape>,
    /// The most bytes the member's tape held ([`tape::Tape::held`]).
    tape_bytes: u64,
    /// The most it may hold ([`Limits::max_tape_bytes`]).
    tape_bound: usize,
    /// The bytes of arrays popped by this runner's members, added to the
    /// process's counts ([`popped_bytes`]) when it is dropped.
    popped: PoppedBytes,
    /// Where a member run among others suspends at a product with a
    /// static matrix ([`waits`]); null for a member run alone.
    yielder: *const waits::MemberYielder,
}

/// What a member's run sets in its runner's [`Context`].
struct MemberStart<'l> {
    interrupts: Interrupts,
    limits: &'l Limits<'l>,
    stack_limit: u64,
    counters: *mut u64,
    rng: *mut MemberRng,
    yielder: *const waits::MemberYielder,
    /// The log the member's contributions go to, and the member they name.
    adjoints: *mut AdjointLog,
    member: u32,
}

impl Context {
    /// Makes the context a fresh member's: its limits, counters, stream
    /// place to suspend and log; nothing left of the member before (a run
    /// that panicked may have left a fork open or a fault).
    fn start_member(&mut self, start: MemberStart<'_>) {
        let limits = start.limits;
        self.status = 0;
        // Code that polls takes its first slice at the entry block; a
        // member started after the run was interrupted gets one slice, all
        // it may take then (the interrupt keeps it from the reserve).
        let interrupted = limits
            .interrupt
            .is_some_and(|flag| flag.load(Ordering::Relaxed));
        (self.steps_left, self.steps_reserve) = match start.interrupts {
            Interrupts::Ignored => (limits.max_steps, 0),
            Interrupts::Polled if interrupted => {
                let slice = limits.max_steps.min(POLL_STEPS);
                (slice, limits.max_steps - slice)
            }
            Interrupts::Polled => (0, limits.max_steps),
        };
        self.depth_left = limits.max_stack_depth as u64 - 1;
        self.stack_limit = start.stack_limit;
        self.counters = start.counters;
        self.interrupt = limits.interrupt.unwrap_or(&NEVER);
        self.rng = start.rng;
        self.fault = None;
        self.forks.clear();
        self.adjoints = start.adjoints;
        self.member = start.member;
        self.tape.clear();
        self.caught_tapes.clear();
        self.tape_bytes = 0;
        self.tape_bound = limits.max_tape_bytes;
        self.instances = 0;
        self.live_instances = 0;
        self.peak_instances = 0;
        self.yielder = start.yielder;
    }
}

impl Context {
    /// Counts what the tape holds now in the member's most.
    fn note_tape(&mut self) {
        self.tape_bytes = self.tape_bytes.max(self.tape.held() as u64);
        let most = (self.tape_bytes as usize).min(self.tape_bound);
        self.tape.fit_limit(most);
    }
}

impl Drop for Context {
    /// The tape's memory goes to the thread's spares, for the next runner;
    /// the bytes popped to the process's counts.
    fn drop(&mut self) {
        tape::Tape::give_back(std::mem::take(&mut self.tape));
        arrays::add_popped_bytes(self.popped);
    }
}

/// The interrupt flag of a run that nothing interrupts.
static NEVER: AtomicBool = AtomicBool::new(false);

pub(crate) mod offsets {
    pub const STATUS: i32 = 0;
    pub const STEPS_LEFT: i32 = 8;
    pub const DEPTH_LEFT: i32 = 16;
    pub const STACK_LIMIT: i32 = 24;
    pub const COUNTERS: i32 = 32;
    pub const SYMBOLS: i32 = 40;
    pub const STATIC_DATA: i32 = 48;
    pub const STEPS_RESERVE: i32 = 56;
    pub const INTERRUPT: i32 = 64;
    /// The member's tape's fields native code pushes and pops scalars
    /// with (`crate::tape::Tape`).
    pub const TAPE_TOP: i32 = tape(crate::tape::TOP);
    pub const TAPE_LIMIT: i32 = tape(crate::tape::LIMIT);
    pub const TAPE_PADDING: i32 = tape(crate::tape::PADDING);
    pub const TAPE_START: i32 = tape(crate::tape::START);

    const fn tape(field: usize) -> i32 {
        (std::mem::offset_of!(super::Context, tape) + field) as i32
    }
}

/// `fn(context, arguments, results)`: the entry, called from the host.
type Trampoline = unsafe extern "C" fn(*mut Context, *const u64, *mut u64);

/// A program compiled for one entry function.
pub struct NativeProgram {
    /// Kept to free the code when the program is dropped.
    _module: CodeMemory,
    trampoline: Trampoline,
    /// The entry's parameters and results, with the dimensions' lengths
    /// (a per-member one: its capacity) and as types (for a member's own
    /// shapes, [`Lengths::per_member`]).
    params: Vec<Operand>,
    results: Vec<Operand>,
    param_types: Vec<TensorType>,
    result_types: Vec<TensorType>,
    /// Indexed by stop code: what each code means.
    stops: Vec<Stop>,
    /// Indexed by stop code: whether the fault is the context's (an array
    /// operation's, whose message depends on its operands).
    dynamic: Vec<bool>,
    /// The array operations native code calls the host for.
    arrays: Vec<ArrayOp>,
    lengths: Lengths,
    segments: Vec<Segment>,
    /// A bound on the machine stack one activation takes.
    frame_bytes: usize,
    entry_loc: Loc,
    functions: usize,
    merged_branches: usize,
    tail_calls: usize,
    fast_loops: usize,
    fused_loops: usize,
    /// Whether an array operation draws from the member's stream.
    draws: bool,
    interrupts: Interrupts,
}

// SAFETY: the module is only touched under its mutex (to free it); the
// generated code is immutable after `compile` and reentrant (its state is
// the `Context` each run passes).
unsafe impl Sync for NativeProgram {}
unsafe impl Send for NativeProgram {}

/// Whether compiled code counts the executions of its operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counting {
    /// Each segment's counter grows as it runs (what `Runner::run` adds
    /// to its `counters`).
    Kept,
    /// Nothing is counted (the counters stay zero): for a run whose
    /// operation counts nobody reads, which then runs faster.
    Skipped,
}

/// Whether compiled code can be interrupted while a member runs
/// ([`Limits::interrupt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupts {
    /// The member holds all its steps at once: only its step limit stops
    /// it (the fastest code: a function's step test has one exit).
    Ignored,
    /// The member holds its steps [`POLL_STEPS`] at a time and, between
    /// two slices, stops if the run's interrupt flag is set (for a run a
    /// host watches and may stop: slower on code made of tiny calls, such
    /// as a naive recursive Fibonacci; see `docs/benchmarks.md`).
    Polled,
}

/// Compiles the functions `entry` reaches in `program` (which has been
/// through `autobatch_passes::optimize` and verifies), for the values
/// `symbols` of its symbolic dimensions: arrays get their byte sizes here.
pub fn compile(
    program: &Program,
    entry: FuncId,
    symbols: &[u64],
    counting: Counting,
    interrupts: Interrupts,
) -> Result<NativeProgram, NotCompiled> {
    compile_for(
        program,
        entry,
        &Lengths::fixed(symbols),
        counting,
        interrupts,
    )
}

/// Why [`compile_for`] would not take `entry` of `program` with the
/// lengths `symbols`: the first construct it does not compile, with where
/// it is; `None` if it takes it.
pub fn refusal(program: &Program, entry: FuncId, symbols: &[u64]) -> Option<String> {
    check::reachable(program, entry, symbols).err()
}

/// [`compile`] for `lengths`, whose per-member dimensions each member
/// runs with its own length (read from its arguments' shapes, at most the
/// dimension's capacity): one program for a ragged batch
/// ([`lengths`](crate::lengths)).
pub fn compile_for(
    program: &Program,
    entry: FuncId,
    lengths: &Lengths,
    counting: Counting,
    interrupts: Interrupts,
) -> Result<NativeProgram, NotCompiled> {
    let functions = check::reachable(program, entry, &lengths.values)
        .map_err(|reason| NotCompiled { reason })?;
    translate::compile(program, entry, &functions, lengths, counting, interrupts)
        .map_err(|reason| NotCompiled { reason })
}

/// The shape of a variable of type `ty` when the symbols are `symbols`
/// (checked bound by `check`).
pub(crate) fn operand(ty: &TensorType, symbols: &[u64]) -> Operand {
    let mut operand = Operand {
        ty: ty.elem,
        shape: Vec::with_capacity(ty.dims.len()),
    };
    operand_into(ty, symbols, &mut operand);
    operand
}

/// [`operand`] into `into`, whose shape's memory is reused.
pub(crate) fn operand_into(ty: &TensorType, symbols: &[u64], into: &mut Operand) {
    into.ty = ty.elem;
    into.shape.clear();
    into.shape.extend(ty.dims.iter().map(|d| match d {
        autobatch_types::Dim::Fixed(n) => *n as usize,
        autobatch_types::Dim::Symbolic(s) => symbols[s.0 as usize] as usize,
    }));
}

impl NativeProgram {
    /// The counters' segments, in counter order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// How many IR functions were compiled.
    pub fn functions(&self) -> usize {
        self.functions
    }

    /// How many branches run as selects (both arms computed, the taken
    /// one's values kept; see `translate::select`).
    pub fn merged_branches(&self) -> usize {
        self.merged_branches
    }

    /// How many functions' self tail call became a jump (the function
    /// restarts its activation instead of calling itself).
    pub fn tail_calls(&self) -> usize {
        self.tail_calls
    }

    /// How many loops test the member's steps once per pass instead of
    /// once per block (see `translate::budget`).
    pub fn fast_loops(&self) -> usize {
        self.fast_loops
    }

    /// How many loops run a block's chain of float array operations (and
    /// the sums it feeds) element by element in one pass
    /// (see `translate::loops`). A loop's block compiled twice (its fast
    /// and tested copies) counts twice.
    pub fn fused_loops(&self) -> usize {
        self.fused_loops
    }

    /// A machine stack on which a member may reach `max_stack_depth`
    /// activations without running short.
    pub fn stack_bytes(&self, max_stack_depth: usize) -> usize {
        const MARGIN: usize = 4 << 20;
        max_stack_depth
            .saturating_mul(self.frame_bytes)
            .saturating_add(MARGIN)
    }

    /// Whether the program draws random numbers (then each member's run
    /// needs its stream).
    pub fn draws(&self) -> bool {
        self.draws
    }

    /// Zeros of the entry's results' types and shapes for a member whose
    /// arguments are `args`: where [`Runner::run_into`] writes its results.
    /// Made by the thread that will drop them, a run's worker threads
    /// allocate nothing per member (memory allocated on one thread and
    /// freed on another is what the allocator serves slowest).
    pub fn blank_results(&self, args: &[&Tensor]) -> Vec<Tensor> {
        let blank =
            |r: &Operand| Tensor::new(r.shape.clone(), Data::filled(Scalar::zero(r.ty), r.len()));
        if !self.lengths.any_per_member() {
            return self.results.iter().map(blank).collect();
        }
        let mut symbols = Vec::new();
        self.member_symbols(args, &mut symbols);
        self.result_types
            .iter()
            .map(|ty| blank(&operand(ty, &symbols)))
            .collect()
    }

    /// The lengths of every symbol for a member whose arguments are
    /// `args`, into `into`.
    fn member_symbols(&self, args: &[&Tensor], into: &mut Vec<u64>) {
        if let Err(e) = lengths::member_symbols(&self.lengths, &self.param_types, args, into) {
            panic!("a member's arguments do not fit the program's lengths: {e}");
        }
    }

    /// A runner of members over `statics`, which keeps its buffers from
    /// one member to the next (one per thread).
    pub fn runner<'p>(&'p self, statics: &'p [Tensor]) -> Runner<'p> {
        let static_data: Vec<*const u8> = statics
            .iter()
            .map(|s| arrays::data_bytes(&s.data).0)
            .collect();
        let context = Box::new(Context {
            status: 0,
            _pad: 0,
            steps_left: 0,
            depth_left: 0,
            stack_limit: 0,
            counters: std::ptr::null_mut(),
            symbols: std::ptr::null(),
            // The vector's elements stay where they are when the runner moves.
            static_data: static_data.as_ptr(),
            steps_reserve: 0,
            interrupt: &NEVER,
            symbol_count: self.lengths.values.len(),
            arrays: &self.arrays,
            statics,
            rng: std::ptr::null_mut(),
            fault: None,
            scratch: Vec::new(),
            member_op: None,
            forks: Vec::new(),
            instances: 0,
            live_instances: 0,
            peak_instances: 0,
            tape_bytes: 0,
            tape_bound: usize::MAX,
            popped: PoppedBytes::default(),
            adjoints: std::ptr::null_mut(),
            member: 0,
            tape: tape::Tape::spare(),
            caught_tapes: Vec::new(),
            yielder: std::ptr::null(),
        });
        let symbols = self.lengths.values.clone();
        let mut runner = Runner {
            program: self,
            _static_data: static_data,
            symbols,
            bits: Vec::with_capacity(self.params.len()),
            slots: Vec::with_capacity(self.results.len() + 1),
            context,
        };
        runner.context.symbols = runner.symbols.as_ptr();
        runner
    }
}

/// Runs the members of one thread, one after the other, reusing the
/// buffers that pass arguments and results.
pub struct Runner<'p> {
    program: &'p NativeProgram,
    /// Per static, the address of its elements (which `context` points to).
    _static_data: Vec<*const u8>,
    /// The running member's length of every symbol (which `context`
    /// points to): the program's, each per-member one the member's own.
    symbols: Vec<u64>,
    /// One 8-byte slot per parameter.
    bits: Vec<u64>,
    /// One 8-byte slot per result, and one more.
    slots: Vec<u64>,
    /// The context the code runs with, kept from one member to the next:
    /// what the program and the statics fix is set once, a member's own
    /// fields at each run ([`Context::start_member`]), and the host's
    /// buffers (`scratch`, `forks`) keep their memory.
    context: Box<Context>,
}

impl Runner<'_> {
    /// Runs one member on `args` (one tensor per entry parameter, of its
    /// type and shape), drawing from `rng` (the member's stream; `None`
    /// only when the program does not [`draw`](NativeProgram::draws)),
    /// adding the counts of its segments to `counters` (one per segment),
    /// and its contributions to static adjoints to `log`.
    pub fn run(
        &mut self,
        args: &[&Tensor],
        limits: &Limits,
        rng: Option<&mut MemberRng>,
        counters: &mut [u64],
        log: MemberLog<'_>,
    ) -> MemberRun {
        let (at, len) = (counters.as_mut_ptr(), counters.len());
        let mut results = self.program.blank_results(args);
        self.run_logged(args, limits, rng, (at, len), log, &mut results)
            .map(|()| results)
    }

    /// [`Runner::run`] adding the counts to counters that another thread
    /// may read while the member runs (a host following a long member's
    /// progress: code compiled with [`Interrupts::Polled`] brings its
    /// counts up to date at least every [`POLL_STEPS`] steps), and writing
    /// the member's results into `results`
    /// ([`NativeProgram::blank_results`]: tensors of the results' types
    /// and shapes), which the caller keeps: the run itself allocates
    /// nothing for them. Their values are the member's results
    /// when it finished (`Ok(())`), and unspecified when it stopped.
    pub fn run_into(
        &mut self,
        args: &[&Tensor],
        limits: &Limits,
        rng: Option<&mut MemberRng>,
        counters: &[std::sync::atomic::AtomicU64],
        results: &mut [Tensor],
        log: MemberLog<'_>,
    ) -> MemberRun<()> {
        // An `AtomicU64` is a `u64` in an `UnsafeCell`: the code's plain
        // updates and the other thread's atomic loads see the same words.
        let at = counters.as_ptr().cast::<u64>().cast_mut();
        let counters = (at, counters.len());
        self.run_logged(args, limits, rng, counters, log, results)
    }

    /// Runs one member alone into `results`, logging into `log`: what a
    /// member that does not finish logged is taken out again.
    fn run_logged(
        &mut self,
        args: &[&Tensor],
        limits: &Limits,
        rng: Option<&mut MemberRng>,
        counters: (*mut u64, usize),
        log: MemberLog<'_>,
        results: &mut [Tensor],
    ) -> MemberRun<()> {
        let mark = log.log.mark();
        let logging = (log.log as *mut AdjointLog, log.member);
        let run = self.run_in_place(
            args,
            limits,
            rng,
            counters,
            std::ptr::null(),
            logging,
            results,
        );
        if run.outcome.is_err() {
            log.log.truncate(mark);
        }
        run
    }

    /// [`Runner::run`] on a member's own stack: at each product with a
    /// static matrix the member suspends through `yielder` (non-null) and
    /// resumes when the scheduler has written the product ([`waits`]).
    /// Its contributions go to `log` (shared with the members run
    /// together with it, each naming its own), even if it does not finish:
    /// the caller takes them out then.
    pub(crate) fn run_waiting(
        &mut self,
        args: &[&Tensor],
        limits: &Limits,
        rng: Option<&mut MemberRng>,
        counters: (*mut u64, usize),
        yielder: *const waits::MemberYielder,
        log: (*mut AdjointLog, u32),
    ) -> MemberRun {
        let mut results = self.program.blank_results(args);
        self.run_in_place(args, limits, rng, counters, yielder, log, &mut results)
            .map(|()| results)
    }

    /// Runs one member, its results written into `results` (one tensor
    /// per result, of its type and shape), its contributions to static
    /// adjoints into the log `log.0` (valid, and touched by nothing else
    /// while the member runs), naming member `log.1`.
    #[allow(clippy::too_many_arguments)]
    fn run_in_place(
        &mut self,
        args: &[&Tensor],
        limits: &Limits,
        rng: Option<&mut MemberRng>,
        (counters, count): (*mut u64, usize),
        yielder: *const waits::MemberYielder,
        (adjoints, member): (*mut AdjointLog, u32),
        results: &mut [Tensor],
    ) -> MemberRun<()> {
        let program = self.program;
        assert_eq!(count, program.segments.len(), "one counter per segment");
        assert_eq!(
            args.len(),
            program.params.len(),
            "one argument per parameter"
        );
        assert!(
            rng.is_some() || !program.draws,
            "a program that draws runs with the member's stream"
        );
        if limits.max_stack_depth == 0 {
            return MemberRun {
                outcome: Err(Stop::StackOverflow(program.entry_loc)),
                steps: 0,
                instances: 0,
                peak_instances: 0,
                tape_bytes: 0,
            };
        }
        self.bind_arguments(args);
        self.bind_results(results);
        // An address in this frame: where the member's frames start (the
        // runner itself may live anywhere).
        let marker = 0_u8;
        let here = std::hint::black_box(&marker) as *const u8 as usize;
        let rng: *mut MemberRng = rng.map_or(std::ptr::null_mut(), |rng| rng);
        let context = &mut *self.context;
        context.start_member(MemberStart {
            interrupts: program.interrupts,
            limits,
            stack_limit: here.saturating_sub(limits.stack_room) as u64,
            counters,
            rng,
            yielder,
            adjoints,
            member,
        });
        // SAFETY: the trampoline reads one argument per parameter (a
        // scalar's bits, or a pointer to an array of the parameter's shape,
        // checked above) and writes one result per slot (a scalar, or the
        // elements of an array through the pointer in its slot, sized from
        // the result's shape); the code touches only `context`'s fields,
        // `counters` (one per segment), the member's lengths
        // (`self.symbols`, each per-member one within its capacity: the
        // arguments were checked against them), and its own frames. `rng` is null only for a
        // program that draws nothing (no array operation reads it).
        unsafe { (program.trampoline)(context, self.bits.as_ptr(), self.slots.as_mut_ptr()) };
        let context = &mut *self.context;
        context.rng = std::ptr::null_mut();
        context.yielder = std::ptr::null();
        context.adjoints = std::ptr::null_mut();
        let steps = limits.max_steps - context.steps_left - context.steps_reserve;
        let interrupted = limits
            .interrupt
            .is_some_and(|flag| flag.load(Ordering::Relaxed));
        let (status, fault) = (context.status, context.fault.take());
        let (instances, peak_instances) = (context.instances, context.peak_instances);
        let tape_bytes = context.tape_bytes;
        assert!(
            status != 0 || context.tape.is_empty(),
            "a member finished with values left on its tape"
        );
        let outcome = match self.outcome(status, fault, results) {
            // A member stopped by the interrupt stopped as at its step
            // limit (one that finished or faulted in its last slice did
            // not).
            Err(Stop::StepLimit(_)) if interrupted && steps < limits.max_steps => {
                Err(Stop::Interrupted)
            }
            outcome => outcome,
        };
        MemberRun {
            outcome,
            steps,
            instances,
            peak_instances,
            tape_bytes,
        }
    }

    /// One 8-byte slot per parameter: a scalar's bits, or the address of
    /// an array's elements; and the member's lengths, from the arguments'
    /// shapes, when it has its own.
    fn bind_arguments(&mut self, args: &[&Tensor]) {
        self.bits.clear();
        if self.program.lengths.any_per_member() {
            self.program.member_symbols(args, &mut self.symbols);
            self.context.symbols = self.symbols.as_ptr();
            for arg in args {
                self.bits.push(if arg.shape.is_empty() {
                    scalar_bits(arg.data.get(0))
                } else {
                    arrays::data_bytes(&arg.data).0 as u64
                });
            }
            return;
        }
        for (arg, param) in args.iter().zip(&self.program.params) {
            let bits = if param.shape.is_empty() {
                assert!(
                    arg.shape.is_empty(),
                    "a scalar argument for a scalar parameter"
                );
                scalar_bits(arg.data.get(0))
            } else {
                assert_eq!(
                    arg.shape, param.shape,
                    "an argument of the parameter's shape"
                );
                arrays::data_bytes(&arg.data).0 as u64
            };
            self.bits.push(bits);
        }
    }

    /// One 8-byte slot per result, and one more: the code writes a
    /// scalar's bits into its slot, and an array's elements straight into
    /// its tensor (whose address the slot holds).
    fn bind_results(&mut self, results: &mut [Tensor]) {
        assert_eq!(
            results.len(),
            self.program.results.len(),
            "one tensor per result"
        );
        self.slots.clear();
        let program = self.program;
        for (k, (tensor, r)) in results.iter_mut().zip(&program.results).enumerate() {
            let fits = if program.lengths.any_per_member() {
                tensor.shape == operand(&program.result_types[k], &self.symbols).shape
            } else {
                same_shape(&tensor.shape, &r.shape)
            };
            assert!(
                fits && tensor.data.ty() == r.ty,
                "a result tensor of the result's type and shape"
            );
            self.slots.push(if r.shape.is_empty() {
                0
            } else {
                arrays::data_bytes_mut(&mut tensor.data) as u64
            });
        }
        self.slots.push(0);
    }

    /// `Ok` with the scalar results moved from their slots into `results`
    /// if the member ended with status 0, else why it stopped (with the
    /// fault the host left in the context for an array operation's stop).
    fn outcome(
        &self,
        status: u32,
        fault: Option<Fault>,
        results: &mut [Tensor],
    ) -> Result<(), Stop> {
        let program = self.program;
        if status != 0 {
            let index = translate::stop_index(status);
            return match (&program.stops[index], fault) {
                (Stop::Fault { loc, .. }, Some(fault)) if program.dynamic[index] => {
                    Err(Stop::Fault { fault, loc: *loc })
                }
                (stop, _) => Err(stop.clone()),
            };
        }
        for ((tensor, r), bits) in results.iter_mut().zip(&program.results).zip(&self.slots) {
            if r.shape.is_empty() {
                set_scalar_bits(&mut tensor.data, *bits);
            }
        }
        Ok(())
    }
}

/// The memory of a compiled module's code, freed when it is dropped: the
/// program holding it runs no code then (a run borrows the program).
pub(crate) struct CodeMemory(Mutex<Option<JITModule>>);

impl CodeMemory {
    pub(crate) fn new(module: JITModule) -> CodeMemory {
        CodeMemory(Mutex::new(Some(module)))
    }
}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        let module = match self.0.get_mut() {
            Ok(module) => module.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: no function of the module runs: the program that
            // holds this memory is being dropped, and every run borrows it.
            unsafe { module.free_memory() };
        }
    }
}

/// Whether two shapes are equal, element by element (a slice comparison
/// calls `memcmp`, which costs a scalar member's run more than the test).
fn same_shape(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A scalar as the 64 bits the trampoline reads (the low bytes of the type's width).
fn scalar_bits(value: Scalar) -> u64 {
    match value {
        Scalar::Bool(b) => b as u64,
        Scalar::I32(x) => x as u32 as u64,
        Scalar::I64(x) => x as u64,
        Scalar::Usize(x) => x,
        Scalar::F32(x) => x.to_bits() as u64,
        Scalar::F64(x) => x.to_bits(),
    }
}

/// Writes the scalar whose trampoline bits are `bits` as the only
/// element of `data` (of the result's type).
fn set_scalar_bits(data: &mut Data, bits: u64) {
    match data {
        Data::Bool(v) => v[0] = bits as u8 != 0,
        Data::I32(v) => v[0] = bits as u32 as i32,
        Data::I64(v) => v[0] = bits as i64,
        Data::Usize(v) => v[0] = bits,
        Data::F32(v) => v[0] = f32::from_bits(bits as u32),
        Data::F64(v) => v[0] = f64::from_bits(bits),
    }
}

fn scalar_of_bits(ty: autobatch_types::ScalarType, bits: u64) -> Scalar {
    match ty {
        autobatch_types::ScalarType::Bool => Scalar::Bool(bits as u8 != 0),
        autobatch_types::ScalarType::I32 => Scalar::I32(bits as u32 as i32),
        autobatch_types::ScalarType::I64 => Scalar::I64(bits as i64),
        autobatch_types::ScalarType::Usize => Scalar::Usize(bits),
        autobatch_types::ScalarType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
        autobatch_types::ScalarType::F64 => Scalar::F64(f64::from_bits(bits)),
    }
}
