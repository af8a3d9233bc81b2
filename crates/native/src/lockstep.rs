//! Lock-step native code (the `native-lockstep`
//! strategy): the members advance together, and each piece of the program
//! (a block, or the rest of a block after a call) is a native loop over
//! the members that are at it, so that no operation pays an interpreter's
//! dispatch and the members that agree on control run one piece's code
//! one after the other.
//!
//! The host keeps one queue of members per piece, and runs the waiting
//! piece with the smallest number (the batching strategies' default
//! `smallest-index` block choice), for all the members queued at it; the
//! piece's code appends each member to the queue of the piece it goes to
//! next: program counters bucketed as they are written, never sorted, and
//! no work per member on the host. Members run in groups of at most
//! [`GROUP`] (one after the other on a thread), so that
//! a group's columns and queues stay in cache and the queues' room (every
//! piece's queue can hold the whole group) stays small. The members' scalar
//! variables live in flat typed columns (one 8-byte slot per member), the
//! values a call must keep on each member's own save stack (see
//! `translate::pieces`).
//!
//! Every primitive is the per-member translator's own code, so a member's
//! results, faults, steps and operation counts are the reference's, bit
//! for bit. What it takes: functions whose variables are all scalars,
//! without forks or catching calls ([`compile_lockstep`] says what and
//! where it does not take); the executor runs other programs on an
//! interpreter.

use std::sync::atomic::{AtomicBool, Ordering};

use autobatch_ir::{EntityRef, FuncId, Program};
use autobatch_types::{Loc, ScalarType, Tensor};

use crate::translate::pieces::{self as code, RETURNED};
use crate::{
    check, scalar_bits, scalar_of_bits, CodeMemory, Counting, Limits, MemberRun, NotCompiled,
    Segment, Stop, POLL_STEPS,
};

/// What the code reads (see `translate::pieces::offsets`).
#[repr(C)]
struct LockContext {
    members: u64,
    columns: *mut u64,
    steps_left: *mut u64,
    depth_left: *mut u64,
    status: *mut u32,
    saved: *mut u64,
    stacks: *mut *mut u64,
    room: *mut u64,
    grow: u64,
    counters: *mut u64,
    results: *mut u64,
    queues: *mut u32,
    lengths: *mut u64,
}

/// `piece(context, rows, n)`.
type PieceFn = unsafe extern "C" fn(*mut LockContext, *const u32, u64);

/// The most members that run together: a larger batch runs in groups of
/// this many, one after the other.
pub const GROUP: usize = 4096;

/// A program compiled to lock-step pieces for one entry function.
pub struct LockStepProgram {
    /// Kept to free the code when the program is dropped.
    _module: CodeMemory,
    pieces: Vec<PieceFn>,
    /// Per piece: the save-stack words its call needs (0 without one).
    needs: Vec<u64>,
    entry_piece: u32,
    /// The column of each entry parameter, and its type.
    params: Vec<(usize, ScalarType)>,
    results: Vec<ScalarType>,
    columns: usize,
    result_columns: usize,
    stops: Vec<Stop>,
    segments: Vec<Segment>,
    functions: usize,
    entry_loc: Loc,
}

// SAFETY: the module is only touched under its mutex (to free it); the
// pieces are immutable after compiling and reentrant (their state is the
// `LockContext` each run passes).
unsafe impl Sync for LockStepProgram {}
unsafe impl Send for LockStepProgram {}

/// Compiles the functions `entry` reaches in `program` (optimized and
/// verified) into lock-step pieces, for the values `symbols` of its
/// symbolic dimensions; or says what it does not take.
pub fn compile_lockstep(
    program: &Program,
    entry: FuncId,
    symbols: &[u64],
    counting: Counting,
) -> Result<LockStepProgram, NotCompiled> {
    let not = |reason| NotCompiled { reason };
    let functions = check::reachable(program, entry, symbols).map_err(not)?;
    code::scope(program, &functions).map_err(not)?;
    let compiled = code::compile(program, entry, &functions, symbols, counting).map_err(not)?;
    let function = &program.functions[entry];
    Ok(LockStepProgram {
        pieces: compiled
            .pieces
            .iter()
            // SAFETY: every piece was defined with the signature of
            // `PieceFn` in the platform's C calling convention.
            .map(|p| unsafe { std::mem::transmute::<*const u8, PieceFn>(*p) })
            .collect(),
        _module: CodeMemory::new(compiled.jit),
        needs: compiled.needs,
        entry_piece: compiled.entry_piece,
        params: function
            .params
            .iter()
            .map(|p| (compiled.entry_column + p.index(), function.vars[*p].ty.elem))
            .collect(),
        results: function.results.iter().map(|r| r.elem).collect(),
        columns: compiled.columns,
        result_columns: compiled.result_columns,
        stops: compiled.stops,
        segments: compiled.segments,
        functions: functions.len(),
        entry_loc: function.loc,
    })
}

/// One run's members and figures.
pub struct LockStepRun {
    /// Per member, in order (no instances, no adjoints).
    pub runs: Vec<MemberRun>,
    /// How many times a piece ran, and the members it ran for in all:
    /// `rows / piece_runs` members per piece run on average.
    pub piece_runs: u64,
    pub rows: u64,
    /// Per piece run, the members of its group, summed: `rows /
    /// lane_slots` is the lane utilization.
    pub lane_slots: u64,
}

/// What the host is shown between two pieces.
pub struct LockProgress<'a> {
    /// Per segment, its executions so far.
    pub counters: &'a [u64],
    /// The running group's steps left, per member, and the steps an
    /// interrupt withheld from it.
    steps_left: &'a [u64],
    withheld: &'a [u64],
    max_steps: u64,
    /// The steps of the groups that ran before.
    steps_before: u64,
}

impl LockProgress<'_> {
    /// The steps the members have taken so far.
    pub fn steps(&self) -> u64 {
        let running: u64 = self
            .steps_left
            .iter()
            .zip(self.withheld)
            .map(|(left, withheld)| self.max_steps - left - withheld)
            .sum();
        self.steps_before + running
    }
}

/// Words each member's save stack starts with.
const FIRST_ROOM: usize = 32;

/// A group's state: every column, each member's save stack, the queues.
struct State {
    members: usize,
    columns: Vec<u64>,
    steps_left: Vec<u64>,
    /// Per member, the steps left that an interrupt took away (all but
    /// [`POLL_STEPS`]).
    withheld: Vec<u64>,
    depth_left: Vec<u64>,
    status: Vec<u32>,
    saved: Vec<u64>,
    stacks: Vec<Vec<u64>>,
    stack_ptrs: Vec<*mut u64>,
    room: Vec<u64>,
    results: Vec<u64>,
    /// Per piece, room for every member (piece `p`'s from `p * members`).
    queues: Vec<u32>,
    lengths: Vec<u64>,
}

impl State {
    fn context(&mut self, counters: &mut [u64]) -> LockContext {
        LockContext {
            members: self.members as u64,
            columns: self.columns.as_mut_ptr(),
            steps_left: self.steps_left.as_mut_ptr(),
            depth_left: self.depth_left.as_mut_ptr(),
            status: self.status.as_mut_ptr(),
            saved: self.saved.as_mut_ptr(),
            stacks: self.stack_ptrs.as_mut_ptr(),
            room: self.room.as_mut_ptr(),
            grow: 0,
            counters: counters.as_mut_ptr(),
            results: self.results.as_mut_ptr(),
            queues: self.queues.as_mut_ptr(),
            lengths: self.lengths.as_mut_ptr(),
        }
    }

    /// Gives member `r`'s save stack room for `need` more words.
    fn grow(&mut self, r: usize, need: u64) {
        let stack = &mut self.stacks[r];
        let wanted = (self.saved[r] + need) as usize;
        let room = wanted.max(2 * stack.len());
        stack.resize(room, 0);
        self.stack_ptrs[r] = stack.as_mut_ptr();
        self.room[r] = room as u64;
    }

    /// After an interrupt: leaves each member at most [`POLL_STEPS`] of its
    /// steps, withholding the others (once: later calls find none to take).
    fn withhold_all_but_grace(&mut self) {
        for (left, withheld) in self.steps_left.iter_mut().zip(&mut self.withheld) {
            let kept = (*left).min(POLL_STEPS);
            *withheld += *left - kept;
            *left = kept;
        }
    }

    /// Moves piece `p`'s queue into `rows`, leaving it empty.
    fn take_queue(&mut self, p: usize, rows: &mut Vec<u32>) {
        let start = p * self.members;
        let length = self.lengths[p] as usize;
        rows.clear();
        rows.extend_from_slice(&self.queues[start..start + length]);
        self.lengths[p] = 0;
    }
}

impl LockStepProgram {
    /// The counters' segments, in counter order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// How many IR functions were compiled.
    pub fn functions(&self) -> usize {
        self.functions
    }

    /// How many pieces the functions were cut into.
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// Runs the members whose arguments are `args` (per member, one scalar
    /// tensor per entry parameter), adding the segments' executions to
    /// `counters` (one per segment). `between` is called after every piece
    /// with the progress so far; when it says `false`, the run stops and
    /// the members not done stop with [`Stop::Interrupted`]. Once
    /// `limits.interrupt` is set, each member not done may take
    /// [`POLL_STEPS`] more steps (so that one waiting behind others a few
    /// steps from its end finishes), then stops with [`Stop::Interrupted`].
    pub fn run(
        &self,
        args: &[Vec<&Tensor>],
        limits: &Limits,
        counters: &mut [u64],
        mut between: impl FnMut(&LockProgress<'_>) -> bool,
    ) -> LockStepRun {
        assert_eq!(
            counters.len(),
            self.segments.len(),
            "one counter per segment"
        );
        let mut out = LockStepRun {
            runs: Vec::with_capacity(args.len()),
            piece_runs: 0,
            rows: 0,
            lane_slots: 0,
        };
        if limits.max_stack_depth == 0 {
            out.runs = args
                .iter()
                .map(|_| stopped(Stop::StackOverflow(self.entry_loc), 0))
                .collect();
            return out;
        }
        // The steps of the groups already run, for the progress.
        let mut steps_before = 0;
        let mut interrupted = false;
        for group in args.chunks(GROUP) {
            let mut state = self.state(group, limits);
            if !interrupted {
                interrupted = self.run_group(
                    &mut state,
                    limits,
                    counters,
                    steps_before,
                    &mut out,
                    &mut between,
                );
            }
            let runs = (0..group.len()).map(|r| self.member_run(&state, r, limits));
            out.runs.extend(runs);
            steps_before += out
                .runs
                .iter()
                .rev()
                .take(group.len())
                .map(|m| m.steps)
                .sum::<u64>();
        }
        out
    }

    /// Runs one group until no member is queued, always the waiting
    /// piece with the smallest number (a piece may queue members at pieces
    /// below it: a loop's header, a callee's entry, a caller's
    /// resumption); true if it was interrupted. `steps_before`: the steps
    /// of the groups run before, for the progress.
    fn run_group(
        &self,
        state: &mut State,
        limits: &Limits,
        counters: &mut [u64],
        steps_before: u64,
        out: &mut LockStepRun,
        between: &mut impl FnMut(&LockProgress<'_>) -> bool,
    ) -> bool {
        let interrupt = limits.interrupt.unwrap_or(&NEVER);
        let entry = self.entry_piece as usize;
        for r in 0..state.members {
            state.queues[entry * state.members + r] = r as u32;
        }
        state.lengths[entry] = state.members as u64;
        let mut rows: Vec<u32> = Vec::with_capacity(state.members);
        while let Some(p) = state.lengths.iter().position(|&length| length > 0) {
            state.take_queue(p, &mut rows);
            let mut context = state.context(counters);
            // SAFETY: every row is a member of the group; every column
            // holds `members` slots, every queue room for `members` rows
            // (a member is in one queue at a time); each member's save
            // stack has `room` words at its pointer; `counters` has one
            // slot per segment.
            unsafe { (self.pieces[p])(&mut context, rows.as_ptr(), rows.len() as u64) };
            out.piece_runs += 1;
            out.rows += rows.len() as u64;
            out.lane_slots += state.members as u64;
            if context.grow != 0 {
                for &r in &rows {
                    let r = r as usize;
                    if state.saved[r] + self.needs[p] > state.room[r] {
                        state.grow(r, self.needs[p]);
                    }
                }
            }
            let progress = LockProgress {
                counters,
                steps_left: &state.steps_left,
                withheld: &state.withheld,
                max_steps: limits.max_steps,
                steps_before,
            };
            if !between(&progress) {
                return true;
            }
            if interrupt.load(Ordering::Relaxed) {
                state.withhold_all_but_grace();
            }
        }
        false
    }

    /// The members' state at the start: the entry's parameters in their
    /// columns, every member's steps and depth.
    fn state(&self, args: &[Vec<&Tensor>], limits: &Limits) -> State {
        let n = args.len();
        let mut columns = vec![0; self.columns * n];
        for (r, member) in args.iter().enumerate() {
            assert_eq!(
                member.len(),
                self.params.len(),
                "one argument per parameter"
            );
            for (arg, (column, _)) in member.iter().zip(&self.params) {
                assert!(arg.shape.is_empty(), "a scalar argument");
                columns[column * n + r] = scalar_bits(arg.data.get(0));
            }
        }
        let mut stacks: Vec<Vec<u64>> = (0..n).map(|_| vec![0; FIRST_ROOM]).collect();
        State {
            members: n,
            columns,
            steps_left: vec![limits.max_steps; n],
            withheld: vec![0; n],
            depth_left: vec![limits.max_stack_depth as u64 - 1; n],
            status: vec![0; n],
            saved: vec![0; n],
            stack_ptrs: stacks.iter_mut().map(|s| s.as_mut_ptr()).collect(),
            stacks,
            room: vec![FIRST_ROOM as u64; n],
            results: vec![0; self.result_columns * n],
            queues: vec![0; self.pieces.len() * n],
            lengths: vec![0; self.pieces.len()],
        }
    }

    fn member_run(&self, state: &State, r: usize, limits: &Limits) -> MemberRun {
        let steps = limits.max_steps - state.steps_left[r] - state.withheld[r];
        match state.status[r] {
            // Still queued when the run was interrupted.
            0 => stopped(Stop::Interrupted, steps),
            RETURNED => {
                let n = state.members;
                let values = self
                    .results
                    .iter()
                    .enumerate()
                    .map(|(k, ty)| Tensor::scalar(scalar_of_bits(*ty, state.results[k * n + r])))
                    .collect();
                MemberRun {
                    outcome: Ok(values),
                    steps,
                    instances: 0,
                    peak_instances: 0,
                    tape_bytes: 0,
                }
            }
            code => match self.stops[crate::translate::stop_index(code)].clone() {
                // Out of the steps an interrupt left it.
                Stop::StepLimit(_) if state.withheld[r] > 0 => stopped(Stop::Interrupted, steps),
                stop => stopped(stop, steps),
            },
        }
    }
}

static NEVER: AtomicBool = AtomicBool::new(false);

fn stopped(stop: Stop, steps: u64) -> MemberRun {
    MemberRun {
        outcome: Err(stop),
        steps,
        instances: 0,
        peak_instances: 0,
        tape_bytes: 0,
    }
}
