//! Lanes: the threads of control of a batched run, and the forks that
//! join them (`join`, `map`, `pfor`).
//!
//! A **lane** is one thread of control: a member's root activation (lane
//! `m` is member `m`) or one **instance** of a fork. Each lane has its own
//! random stream, its count of the member's steps, and its state. A fork
//! opened by a lane (the *parent*, which then waits) gets a [`Join`]; its
//! instances run as lanes of their own, concurrently, and the join
//! reproduces the sequential meaning of the reference executor:
//!
//! - **Streams.** At the fork the parent draws the fork's key from its own
//!   stream ([`MemberRng::fork`]); instance `k` draws from the key's stream
//!   `k`.
//! - **Steps.** An instance starts counting from its parent's count at the
//!   fork plus the steps of the earlier instances already resolved (at most
//!   what the sequential evaluation would have counted), so its budget is
//!   never smaller than the sequential one: a lane that stops with
//!   `step_limit` would have stopped sequentially too.
//! - **Resolution.** Instances end in any order; the join walks them in
//!   instance order as they become known, adding each one's own steps to
//!   the count: an instance that faulted gives the parent its error; a
//!   count past `--max-steps` (or an instance stopped by the step limit)
//!   gives `step_limit`; otherwise, after the last, the parent goes on
//!   with the count the sequential evaluation reaches. As soon as an
//!   instance faults, the later instances of its fork are **cancelled**
//!   (their results cannot matter; one that loops forever stops at once),
//!   and with them the instances they forked, recursively.
//!
//! The location of a `step_limit` found at a join is not exact (the
//! instance was running with a larger budget); the executors rerun such a
//! member alone on the reference executor to get it
//! ([`LaneTable::into_output`]), which is rare: the step limit is a safety net.
//!
//! A lane's id is its row in the executor's storage (program-counter) or
//! what an activation's rows refer to (local-static). Freed instance lanes
//! are reused (a free list), so storage grows only to the most lanes alive
//! at once, which `--max-instances` bounds (the executors start the
//! instances of a fork as lanes are free, but always at least one, so that
//! nested forks cannot deadlock).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use autobatch_ir::{Loc, TapeMode};
use autobatch_kernels::adjoints::AdjointLog;
use autobatch_kernels::buffer::{Values, ValuesMut};
use autobatch_kernels::{Fault, ForkKey, MemberRng, Tape};
use autobatch_types::{ErrorKind, MemberError, Tensor};

use crate::internal::internal_error;
use crate::monitor::{step_limit, OpCounter};
use crate::{RunOptions, RunOutput, Stats};

/// How a member ended: its flattened results, or the error that stopped it.
pub type Outcome = Result<Vec<Tensor>, MemberError>;

/// A fork in progress, by its index among the open forks.
pub type ForkId = u32;

/// Where a lane is in its life.
#[derive(Clone, Debug, PartialEq)]
enum LaneState {
    Running,
    /// Stopped with an error. For an instance the error is final (told to
    /// its join); under local-static a lane inside a catching call may be
    /// revived ([`LaneTable::revive_if_catchable`]).
    Failed(MemberError),
    /// Its results cannot matter any more: an earlier instance of its fork
    /// faulted, or its parent was cancelled. It still occupies its place (a
    /// queue, an activation's rows) until the executor drops it.
    Cancelled,
    /// Returned from its function (a member's entry, or an instance).
    Returned,
    /// An instance lane that is not in use.
    Free,
}

/// How one instance ended, for its join.
#[derive(Clone, Debug)]
enum End {
    /// Returned after taking `steps` steps of its own.
    Returned(u64),
    /// Stopped with `error` after taking `steps` steps of its own.
    Faulted(u64, MemberError),
}

/// What a resolved join gives its parent.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolution {
    /// Every instance returned: the parent goes on with `steps` steps taken.
    Returned { steps: u64 },
    /// The first instance (in order) that faulted gave `error`, with the
    /// member at `steps` steps when it did.
    Failed { steps: u64, error: MemberError },
    /// The member ran out of steps inside an instance (the location is the
    /// fork's; [`LaneTable::into_output`] recomputes it).
    StepLimit,
}

/// Where a fork opens ([`LaneTable::open_fork`]).
#[derive(Clone, Copy, Debug)]
pub struct Opening {
    /// The parent's stack depth.
    pub depth: usize,
    /// The executor's own reference to the fork ([`Join::site`]).
    pub site: u32,
    pub mode: TapeMode,
}

/// A fork in progress: its parent waits while its instances run.
#[derive(Debug)]
pub struct Join {
    /// The lane that forked, waiting.
    pub parent: u32,
    /// The executor's own reference to the fork (program-counter: the
    /// block that ends with it).
    pub site: u32,
    /// Instances in all.
    pub total: u64,
    /// The parent's stack depth at the fork: an instance's activation is
    /// one deeper.
    pub depth: usize,
    key: ForkKey,
    /// A number no other join of the run has (ids are reused).
    serial: u64,
    /// Instances started so far: `0..started`.
    started: u64,
    /// The member's steps once instances `0..next` are accounted for.
    steps: u64,
    /// The first instance whose end is not yet accounted for.
    next: u64,
    /// Ended instances from `next` on, awaiting the earlier ones.
    ended: BTreeMap<u64, End>,
    /// The earliest instance known to have faulted: none after it starts.
    first_fault: Option<u64>,
    /// Instances running now, by index: their lanes.
    live: BTreeMap<u64, u32>,
    resolution: Option<Resolution>,
    /// Whether its instances start from the queue ([`LaneTable::queue_fork`]).
    queued: bool,
    /// What becomes of the instances' tapes.
    mode: TapeMode,
    /// By instance: `Save`, the tapes of the instances that returned;
    /// `Restore`, the tapes the instances get.
    tapes: Vec<Tape>,
}

impl Join {
    /// Whether instances remain to be started (none after a fault).
    fn has_unstarted(&self) -> bool {
        self.resolution.is_none()
            && self.started < self.total
            && self.first_fault.is_none_or(|k| self.started < k)
    }
}

/// A lane's deadline before it has one ([`LaneTable::enter_block`]).
const NO_DEADLINE: u64 = u64::MAX;

/// Everything a batching executor keeps per lane, per member and per fork.
pub struct LaneTable {
    /// Lane `l` draws from `rngs[l]`.
    pub rngs: Vec<MemberRng>,
    /// Per lane, the member's steps as the lane counts them.
    steps: Vec<u64>,
    /// Per lane, its count when it started (0 for a member's lane).
    start: Vec<u64>,
    state: Vec<LaneState>,
    member: Vec<u32>,
    /// Per instance lane, its join and index.
    link: Vec<Option<(ForkId, u64)>>,
    /// Per lane, the join it waits at.
    waits: Vec<Option<ForkId>>,
    /// Per lane, its tape: the values a derived function's forward part
    /// saved for its backward part, the last pushed on top
    /// ([`autobatch_ir::Prim::TapePush`]). An instance lane starts with an
    /// empty one.
    tapes: Vec<Tape>,
    /// Per lane, the catching calls it is inside (local-static only:
    /// program-counter unwinds at the fault, so every error it reports is
    /// final).
    catching: Vec<u32>,
    /// Per lane, the tapes it set aside on entering the catching calls it
    /// is inside, innermost last ([`LaneTable::set_tape_aside`]).
    aside: Vec<Vec<Tape>>,
    members: usize,
    max_steps: u64,
    /// Members that have returned or stopped for good.
    ended: u64,
    /// Once the run is interrupted, per lane, the steps it may reach
    /// ([`LaneTable::enter_block`]); [`NO_DEADLINE`] until it enters a block.
    deadlines: Vec<u64>,
    /// Per member, its results once it returned.
    results: Vec<Option<Vec<Tensor>>>,
    /// Per member, whether it ever forked.
    forked: Vec<bool>,
    free: Vec<u32>,
    forks: Vec<Option<Join>>,
    free_forks: Vec<ForkId>,
    serials: u64,
    /// Joins resolved since the executor last looked (with serials: a join
    /// may be dropped, its id reused, before the executor looks).
    resolved: Vec<(ForkId, u64)>,
    /// Instance lanes that ended or were dropped, and are in no queue or
    /// row set any more, since the executor last looked.
    released: Vec<u32>,
    /// Joins with instances not yet started, oldest first (with serials).
    pending: VecDeque<(ForkId, u64)>,
    /// Joins with instances to start and none running: each gets one lane
    /// whatever the budget.
    starving: Vec<(ForkId, u64)>,
    /// Lanes in the `Cancelled` state.
    cancelled: usize,
    /// Joins open (each has its parent waiting).
    open_forks: usize,
    live_instances: usize,
    instances: u64,
    peak_instances: u64,
    /// The most bytes a member's tape held ([`Tape::held`]).
    tape_bytes: usize,
    /// The most it may hold ([`RunOptions::tape_bound`]).
    tape_bound: usize,
    /// Reused buffer: the rows one operation retired.
    retired: Vec<u32>,
}

impl LaneTable {
    /// `size` members, each running in its lane, member `m` drawing from
    /// `(seed, m)`; no member may take more than `max_steps` steps.
    pub fn new(size: usize, seed: u64, max_steps: u64) -> LaneTable {
        LaneTable::numbered(size, |m| MemberRng::new(seed, m as u64), max_steps)
    }

    /// The lanes of a run with `options`: member `m` draws from the stream
    /// of its index in the whole batch ([`RunOptions::member_id`]).
    pub fn for_run(size: usize, options: &RunOptions) -> LaneTable {
        LaneTable {
            tape_bound: options.tape_bound(),
            ..LaneTable::numbered(
                size,
                |m| MemberRng::new(options.seed, options.member_id(m)),
                options.max_steps,
            )
        }
    }

    fn numbered(size: usize, rng: impl Fn(usize) -> MemberRng, max_steps: u64) -> LaneTable {
        LaneTable {
            rngs: (0..size).map(rng).collect(),
            steps: vec![0; size],
            start: vec![0; size],
            state: vec![LaneState::Running; size],
            member: (0..size as u32).collect(),
            link: vec![None; size],
            waits: vec![None; size],
            catching: vec![0; size],
            aside: vec![Vec::new(); size],
            tapes: vec![Tape::default(); size],
            members: size,
            max_steps,
            ended: 0,
            deadlines: Vec::new(),
            results: vec![None; size],
            forked: vec![false; size],
            free: Vec::new(),
            forks: Vec::new(),
            free_forks: Vec::new(),
            serials: 0,
            resolved: Vec::new(),
            released: Vec::new(),
            pending: VecDeque::new(),
            starving: Vec::new(),
            cancelled: 0,
            open_forks: 0,
            live_instances: 0,
            instances: 0,
            peak_instances: 0,
            tape_bytes: 0,
            tape_bound: usize::MAX,
            retired: Vec::new(),
        }
    }

    /// Lanes ever allocated: the rows lane storage must have.
    pub fn capacity(&self) -> usize {
        self.state.len()
    }

    /// The threads of control the batch has now, over which lane
    /// utilization counts: every member (running or not, as without
    /// forks), a member or instance that waits at a fork counting as the
    /// instances of the fork that run.
    pub fn threads(&self) -> usize {
        self.members + self.live_instances - self.open_forks
    }

    /// Instance lanes alive.
    pub fn live_instances(&self) -> usize {
        self.live_instances
    }

    pub fn member_of(&self, lane: u32) -> usize {
        self.member[lane as usize] as usize
    }

    /// Each lane's member, and the lanes' random streams (to write).
    pub fn members_and_rngs(&mut self) -> (&[u32], &mut [MemberRng]) {
        (&self.member, &mut self.rngs)
    }

    pub fn steps(&self, lane: u32) -> u64 {
        self.steps[lane as usize]
    }

    /// Appends the value of shape `shape` whose elements are `values` to
    /// `lane`'s tape; a `tape_limit` fault when the tape then holds more
    /// than the run's bound.
    pub fn tape_push(
        &mut self,
        lane: usize,
        shape: &[usize],
        values: Values<'_>,
    ) -> Result<(), Fault> {
        self.tapes[lane].push_values(shape, values);
        self.note_tape(lane);
        self.tapes[lane].check(self.tape_bound)
    }

    /// Whether `lane`'s member holds more than its share of the run's
    /// tape bound along the lane's path ([`autobatch_ir::prim::tape_over`]).
    pub fn tape_over(&self, lane: usize) -> bool {
        autobatch_ir::prim::tape_over(self.tapes[lane].held(), self.tape_bound)
    }

    /// Marks `lane`'s tape (`tape_mark`); the bytes it holds.
    pub fn tape_mark(&mut self, lane: usize) -> usize {
        self.tapes[lane].mark();
        self.tapes[lane].held()
    }

    /// Settles `lane`'s latest mark (`tape_settle`): drops what was pushed
    /// since when the member holds more than its share of the bound; whether
    /// it did.
    pub fn tape_settle(&mut self, lane: usize) -> bool {
        let over = self.tape_over(lane);
        self.tapes[lane].settle(over);
        over
    }

    /// Counts what `lane`'s tape holds now in the run's most
    /// ([`Stats::tape_bytes`]).
    fn note_tape(&mut self, lane: usize) {
        self.tape_bytes = self.tape_bytes.max(self.tapes[lane].held());
    }

    /// `lane` enters a catching call: its tape is set aside and the callee
    /// starts with an empty one, until [`LaneTable::take_tape_back`] at the
    /// end of the call, completed or caught (a caught failure leaves
    /// nothing of what it pushed; a completed call pushed and popped alike:
    /// a catching call never calls a derived function's forward part).
    pub fn set_tape_aside(&mut self, lane: u32) {
        let l = lane as usize;
        let held = self.tapes[l].held();
        let tape = std::mem::replace(&mut self.tapes[l], Tape::above(held));
        self.aside[l].push(tape);
    }

    /// `lane` leaves the catching call it entered last: its tape is the
    /// one it had at the call again.
    pub fn take_tape_back(&mut self, lane: u32) {
        let l = lane as usize;
        match self.aside[l].pop() {
            Some(tape) => self.tapes[l] = tape,
            None => internal_error("a lane left a catching call it had not entered"),
        }
    }

    /// Takes the value pushed last off `lane`'s tape into `dst`.
    pub fn tape_pop(&mut self, lane: usize, dst: ValuesMut<'_>) {
        if !self.tapes[lane].pop_into(dst) {
            internal_error("a tape popped past its start, or into a value of another type");
        }
    }

    /// Whether `lane` is an instance (not a member's own lane).
    pub fn is_instance(&self, lane: u32) -> bool {
        (lane as usize) >= self.members
    }

    /// The join and index of an instance lane.
    pub fn instance_of(&self, lane: u32) -> Option<(ForkId, u64)> {
        self.link[lane as usize]
    }

    pub fn join(&self, fork: ForkId) -> &Join {
        match self.forks.get(fork as usize) {
            Some(Some(join)) => join,
            _ => internal_error(format!("fork {fork} is not open")),
        }
    }

    fn join_mut(&mut self, fork: ForkId) -> &mut Join {
        match self.forks.get_mut(fork as usize) {
            Some(Some(join)) => join,
            _ => internal_error(format!("fork {fork} is not open")),
        }
    }

    /// Whether `lane` was cancelled (it must not run on).
    #[inline]
    pub fn is_cancelled(&self, lane: u32) -> bool {
        self.cancelled > 0 && self.state[lane as usize] == LaneState::Cancelled
    }

    /// If `lane` was cancelled, releases it and returns true: the caller
    /// drops it from the rows it is moving on.
    #[inline]
    pub fn drop_if_cancelled(&mut self, lane: u32) -> bool {
        let cancelled = self.is_cancelled(lane);
        if cancelled {
            self.release(lane);
        }
        cancelled
    }

    /// Whether `lane` runs (neither ended nor cancelled).
    pub fn is_running(&self, lane: u32) -> bool {
        self.state[lane as usize] == LaneState::Running
    }

    /// Whether `lane` has stopped with an error.
    pub fn has_failed(&self, lane: u32) -> bool {
        matches!(self.state[lane as usize], LaneState::Failed(_))
    }

    /// Members that have returned or stopped with an error for good.
    pub fn members_ended(&self) -> u64 {
        self.ended
    }

    /// After an interrupt: gives each lane of `rows` that has none its
    /// deadline, its steps now and the grace.
    fn set_deadlines(&mut self, rows: &[u32], lane_of: &impl Fn(u32) -> usize) {
        self.deadlines.resize(self.state.len(), NO_DEADLINE);
        for &r in rows {
            let lane = lane_of(r);
            if self.deadlines[lane] == NO_DEADLINE {
                self.deadlines[lane] =
                    self.steps[lane].saturating_add(crate::INTERRUPT_GRACE_STEPS);
            }
        }
    }

    /// The step-limit check on entering a block at `loc`: counts a step for
    /// each of `rows`, and stops (and removes from `rows`) the lanes that
    /// have already taken `max_steps`; cancelled lanes leave too. Once the
    /// run is `interrupted` ([`RunOptions::interrupt`], as the run's
    /// [`crate::monitor::Watch`] sees it), a lane may take
    /// [`crate::INTERRUPT_GRACE_STEPS`] more steps from the first block it
    /// enters after, then stops here with `interrupted`.
    pub fn enter_block(
        &mut self,
        rows: &mut Vec<u32>,
        lane_of: impl Fn(u32) -> usize,
        loc: Loc,
        interrupted: bool,
    ) {
        if interrupted {
            self.set_deadlines(rows, &lane_of);
        }
        // A plain loop over locals rather than `retain` with a closure: this
        // runs for every row of every block, and the closure's captures were
        // reloaded on each row when it was not inlined.
        let max_steps = self.max_steps;
        let steps = &mut self.steps[..];
        let deadlines = &self.deadlines[..];
        let limited = &mut self.retired;
        limited.clear();
        let mut kept = 0;
        for i in 0..rows.len() {
            let r = rows[i];
            let lane = lane_of(r);
            let limit = match interrupted {
                true => deadlines[lane].min(max_steps),
                false => max_steps,
            };
            let taken = &mut steps[lane];
            if *taken >= limit {
                limited.push(lane as u32);
            } else {
                *taken += 1;
                rows[kept] = r;
                kept += 1;
            }
        }
        rows.truncate(kept);
        if !self.retired.is_empty() {
            let limited = std::mem::take(&mut self.retired);
            for &lane in &limited {
                let error = match self.steps[lane as usize] < max_steps {
                    true => crate::monitor::interrupted(loc),
                    false => step_limit(max_steps, loc),
                };
                self.fail(lane, error);
            }
            self.retired = limited;
        }
        self.drop_cancelled(rows, lane_of);
    }

    /// Fault retirement after an operation at `loc`: every row of `faults`
    /// leaves `rows` (which stays sorted). Its lane's error goes to
    /// `unwind`, which either sends the lane on elsewhere (`Ok`: a catching
    /// call recovers it) or gives the error back: the lane then fails
    /// ([`LaneTable::fail`]). Lanes cancelled by the failures leave `rows` too.
    /// `faults` is left empty.
    pub fn retire_faults(
        &mut self,
        rows: &mut Vec<u32>,
        faults: &mut Vec<(u32, Fault)>,
        loc: Loc,
        lane_of: impl Fn(u32) -> usize,
        mut unwind: impl FnMut(u32, MemberError) -> Result<(), MemberError>,
    ) {
        if faults.is_empty() {
            return;
        }
        let mut retired = std::mem::take(&mut self.retired);
        retired.clear();
        for (r, fault) in faults.drain(..) {
            let error = MemberError::new(fault.kind, fault.message, loc);
            if self.is_cancelled(lane_of(r) as u32) {
                self.release(lane_of(r) as u32);
            } else if let Err(error) = unwind(r, error) {
                self.fail(lane_of(r) as u32, error);
            } else {
                // A catching call recovered it.
                self.take_tape_back(lane_of(r) as u32);
            }
            retired.push(r);
        }
        retired.sort_unstable();
        rows.retain(|r| retired.binary_search(r).is_err());
        self.retired = retired;
        self.drop_cancelled(rows, lane_of);
    }

    /// Removes the cancelled lanes from `rows` (releasing them).
    #[inline]
    pub fn drop_cancelled(&mut self, rows: &mut Vec<u32>, lane_of: impl Fn(u32) -> usize) {
        if self.cancelled == 0 {
            return;
        }
        let mut dropped = std::mem::take(&mut self.retired);
        dropped.clear();
        rows.retain(|&r| {
            let lane = lane_of(r);
            let cancelled = self.state[lane] == LaneState::Cancelled;
            if cancelled {
                dropped.push(lane as u32);
            }
            !cancelled
        });
        for &lane in &dropped {
            self.release(lane);
        }
        self.retired = dropped;
    }

    /// Stops `lane` with `error`. For an instance whose error is final (not
    /// inside a catching call of its own, or not catchable), its join learns
    /// of it: the later instances are cancelled, and the join may resolve.
    /// A cancelled lane stays cancelled (and is released).
    pub fn fail(&mut self, lane: u32, error: MemberError) {
        let l = lane as usize;
        match self.state[l] {
            LaneState::Cancelled => return self.release(lane),
            LaneState::Running => {}
            _ => internal_error(format!("lane {lane} fails twice")),
        }
        let last = !error.kind.is_catchable() || self.catching[l] == 0;
        if last && l < self.members {
            self.ended += 1;
        }
        if last && self.link[l].is_some() {
            let own = self.steps[l] - self.start[l];
            self.state[l] = LaneState::Failed(error.clone());
            self.end_instance(lane, End::Faulted(own, error));
            self.release(lane);
        } else {
            self.state[l] = LaneState::Failed(error);
        }
    }

    /// Records that the lane of `member` returned `results` from the entry function.
    pub fn finish(&mut self, member: usize, results: Vec<Tensor>) {
        if !self.tapes[member].is_empty() {
            internal_error("a member finished with values left on its tape");
        }
        self.ended += 1;
        self.state[member] = LaneState::Returned;
        self.results[member] = Some(results);
    }

    /// Records that instance lane `lane` returned (its results already
    /// given to its parent): its join learns of it.
    pub fn instance_returned(&mut self, lane: u32) {
        let l = lane as usize;
        if self.state[l] == LaneState::Cancelled {
            return self.release(lane);
        }
        self.state[l] = LaneState::Returned;
        if let Some((fork, k)) = self.link[l] {
            let tape = std::mem::take(&mut self.tapes[l]);
            let join = self.join_mut(fork);
            if join.mode.saves() {
                join.tapes[k as usize] = tape;
            }
        }
        let own = self.steps[l] - self.start[l];
        self.end_instance(lane, End::Returned(own));
        self.release(lane);
    }

    /// `lane` enters a catching call (local-static).
    pub fn enter_catch(&mut self, lane: u32) {
        self.catching[lane as usize] += 1;
        self.set_tape_aside(lane);
    }

    /// `lane` leaves a catching call (local-static): if it stopped inside
    /// with a catchable error, it runs again and this returns true (the
    /// call caught the error).
    pub fn leave_catch(&mut self, lane: u32) -> bool {
        let l = lane as usize;
        self.catching[l] -= 1;
        self.take_tape_back(lane);
        let caught = matches!(&self.state[l], LaneState::Failed(e) if e.kind.is_catchable());
        if caught {
            self.state[l] = LaneState::Running;
        }
        caught
    }

    /// At a fork of `lane`: the fork's key, drawn from the lane's stream
    /// (which advances whether or not an instance runs), but for a
    /// `Restore` fork or one run again ([`TapeMode::draws_key`]), whose
    /// instances draw nothing.
    pub fn fork_key(&mut self, lane: u32, mode: TapeMode) -> ForkKey {
        let member = self.member_of(lane);
        self.forked[member] = true;
        if mode.draws_key() {
            self.rngs[lane as usize].fork()
        } else {
            self.rngs[lane as usize].clone().fork()
        }
    }

    /// A taped fork of `lane` with no instance: `Save` keeps an entry of
    /// no tapes, `Restore` takes it.
    pub fn empty_fork(&mut self, lane: u32, mode: TapeMode) {
        match mode {
            TapeMode::None | TapeMode::Again => {}
            TapeMode::Save | TapeMode::SaveAgain => {
                self.tapes[lane as usize].push_instances(Vec::new())
            }
            TapeMode::Restore => {
                if self.tapes[lane as usize].pop_instances(0).is_none() {
                    internal_error("a restoring fork found no fork's tapes");
                }
            }
        }
    }

    /// Opens the join of a fork of `parent` with `total` (at least one)
    /// instances, whose tapes `mode` says what becomes of; the parent waits
    /// at it.
    pub fn open_fork(&mut self, parent: u32, key: ForkKey, total: u64, opening: Opening) -> ForkId {
        let Opening { depth, site, mode } = opening;
        let tapes = match mode {
            TapeMode::None | TapeMode::Again => Vec::new(),
            TapeMode::Save | TapeMode::SaveAgain => vec![Tape::default(); total as usize],
            TapeMode::Restore => self.tapes[parent as usize]
                .pop_instances(total as usize)
                .unwrap_or_else(|| internal_error("a restoring fork found no fork's tapes")),
        };
        self.serials += 1;
        let join = Join {
            parent,
            site,
            total,
            depth,
            key,
            serial: self.serials,
            started: 0,
            steps: self.steps[parent as usize],
            next: 0,
            ended: BTreeMap::new(),
            first_fault: None,
            live: BTreeMap::new(),
            resolution: None,
            queued: false,
            mode,
            tapes,
        };
        let fork = match self.free_forks.pop() {
            Some(f) => {
                self.forks[f as usize] = Some(join);
                f
            }
            None => {
                self.forks.push(Some(join));
                (self.forks.len() - 1) as ForkId
            }
        };
        self.waits[parent as usize] = Some(fork);
        self.open_forks += 1;
        fork
    }

    /// Puts `fork` in the queue of joins whose instances start as lanes
    /// free up ([`LaneTable::next_to_start`]); its first instance starts
    /// whatever the budget.
    pub fn queue_fork(&mut self, fork: ForkId) {
        let join = self.join_mut(fork);
        join.queued = true;
        let serial = join.serial;
        self.starving.push((fork, serial));
        self.pending.push_back((fork, serial));
    }

    /// A queued join that may start an instance now: one with none running
    /// (whatever the budget), else the oldest with instances to start if
    /// fewer than `max_instances` instances are alive.
    pub fn next_to_start(&mut self, max_instances: usize) -> Option<ForkId> {
        while let Some((fork, serial)) = self.starving.pop() {
            if let Some(Some(join)) = self.forks.get(fork as usize) {
                if join.serial == serial && join.has_unstarted() && join.live.is_empty() {
                    return Some(fork);
                }
            }
        }
        while let Some(&(fork, serial)) = self.pending.front() {
            let current = match self.forks.get(fork as usize) {
                Some(Some(join)) => join.serial == serial && join.has_unstarted(),
                _ => false,
            };
            if !current {
                self.pending.pop_front();
                continue;
            }
            return (self.live_instances < max_instances).then_some(fork);
        }
        None
    }

    /// Whether `fork` has instances left to start.
    pub fn has_unstarted(&self, fork: ForkId) -> bool {
        self.join(fork).has_unstarted()
    }

    /// Starts the next instance of `fork`, if any remains: a lane (a free
    /// one, or a new one past [`LaneTable::capacity`]) with the instance's
    /// stream, the member's steps as far as they are known, and its link.
    /// Gives the lane and the instance's index.
    pub fn start_instance(&mut self, fork: ForkId) -> Option<(u32, u64)> {
        let join = self.join_mut(fork);
        if !join.has_unstarted() {
            return None;
        }
        let k = join.started;
        join.started += 1;
        let (rng, steps, parent) = (join.key.instance(k), join.steps, join.parent);
        let mut join_tape = match join.mode {
            TapeMode::Restore => std::mem::take(&mut join.tapes[k as usize]),
            _ => Tape::above(self.tapes[parent as usize].held()),
        };
        let member = self.member[parent as usize];
        let lane = match self.free.pop() {
            Some(lane) => lane,
            None => {
                self.rngs.push(rng.clone());
                self.steps.push(0);
                self.start.push(0);
                self.state.push(LaneState::Free);
                self.member.push(member);
                self.link.push(None);
                self.waits.push(None);
                self.catching.push(0);
                self.aside.push(Vec::new());
                self.tapes.push(Tape::default());
                (self.state.len() - 1) as u32
            }
        };
        let l = lane as usize;
        self.rngs[l] = rng;
        self.steps[l] = steps;
        self.start[l] = steps;
        if let Some(deadline) = self.deadlines.get_mut(l) {
            *deadline = NO_DEADLINE;
        }
        self.state[l] = LaneState::Running;
        self.member[l] = member;
        self.link[l] = Some((fork, k));
        self.waits[l] = None;
        self.catching[l] = 0;
        self.aside[l].clear();
        self.tapes[l] = std::mem::take(&mut join_tape);
        let join = self.join_mut(fork);
        join.live.insert(k, lane);
        // A fork run again by a recomputation counts no instances.
        let again = matches!(join.mode, TapeMode::Again | TapeMode::SaveAgain);
        self.live_instances += 1;
        self.instances += u64::from(!again);
        self.peak_instances = self.peak_instances.max(self.live_instances as u64);
        Some((lane, k))
    }

    /// An instance ended: its join accounts for it (in order), cancels the
    /// later instances if it faulted, and may resolve.
    fn end_instance(&mut self, lane: u32, end: End) {
        let Some((fork, k)) = self.link[lane as usize] else {
            internal_error("a lane that is no instance ended as one");
        };
        let max_steps = self.max_steps;
        let join = self.join_mut(fork);
        join.live.remove(&k);
        let mut cancel = Vec::new();
        if let End::Faulted(..) = end {
            if join.first_fault.is_none_or(|f| k < f) {
                join.first_fault = Some(k);
                cancel.extend(join.live.range(k + 1..).map(|(_, lane)| *lane));
            }
        }
        join.ended.insert(k, end);
        while join.resolution.is_none() {
            let Some(end) = join.ended.remove(&join.next) else {
                break;
            };
            join.next += 1;
            let (own, error) = match end {
                End::Returned(own) => (own, None),
                End::Faulted(own, error) => (own, Some(error)),
            };
            join.steps += own;
            join.resolution = if join.steps > max_steps
                || error
                    .as_ref()
                    .is_some_and(|e| e.kind == ErrorKind::StepLimit)
            {
                Some(Resolution::StepLimit)
            } else if let Some(error) = error {
                Some(Resolution::Failed {
                    steps: join.steps,
                    error,
                })
            } else if join.next == join.total {
                Some(Resolution::Returned { steps: join.steps })
            } else {
                None
            };
        }
        let resolved = join.resolution.is_some();
        if resolved {
            // Whatever still runs cannot matter.
            cancel.extend(join.live.values().copied());
        }
        let starving = join.queued && !resolved && join.live.is_empty() && join.has_unstarted();
        let serial = join.serial;
        if resolved {
            self.resolved.push((fork, serial));
        } else if starving {
            self.starving.push((fork, serial));
        }
        for lane in cancel {
            self.cancel(lane);
        }
    }

    /// Cancels `lane` and everything it forked, recursively. A lane waiting
    /// at a join is in no queue: it is released at once; a running one is
    /// released when the executor drops it.
    fn cancel(&mut self, lane: u32) {
        let mut todo = vec![lane];
        while let Some(lane) = todo.pop() {
            let l = lane as usize;
            if self.state[l] != LaneState::Running {
                continue;
            }
            self.state[l] = LaneState::Cancelled;
            self.cancelled += 1;
            if let Some((fork, k)) = self.link[l] {
                if let Some(Some(join)) = self.forks.get_mut(fork as usize) {
                    join.live.remove(&k);
                }
            }
            if let Some(fork) = self.waits[l].take() {
                if let Some(join) = self.forks[fork as usize].take() {
                    todo.extend(join.live.values().copied());
                    self.free_forks.push(fork);
                    self.open_forks -= 1;
                }
                self.release(lane);
            }
        }
    }

    /// `lane` is in no queue or row set any more: the executor may free it
    /// ([`LaneTable::take_released`]). A member's lane is never freed.
    fn release(&mut self, lane: u32) {
        if self.is_instance(lane) {
            self.released.push(lane);
        }
    }

    /// The next instance lane that ended or was dropped since the last
    /// call: the executor clears its state of the lane, then calls
    /// [`LaneTable::free`].
    pub fn take_released(&mut self) -> Option<u32> {
        self.released.pop()
    }

    /// Forgets the released lanes (local-static frees its instance lanes
    /// when their fork is done).
    pub fn clear_released(&mut self) {
        self.released.clear();
    }

    /// Whether `lane` ended abnormally (its stacks may hold values).
    pub fn ended_abnormally(&self, lane: u32) -> bool {
        matches!(
            self.state[lane as usize],
            LaneState::Failed(_) | LaneState::Cancelled
        )
    }

    /// Frees an instance lane for reuse.
    pub fn free(&mut self, lane: u32) {
        let l = lane as usize;
        match self.state[l] {
            LaneState::Free => internal_error(format!("lane {lane} is freed twice")),
            LaneState::Cancelled => self.cancelled -= 1,
            _ => {}
        }
        self.state[l] = LaneState::Free;
        self.link[l] = None;
        self.waits[l] = None;
        self.live_instances -= 1;
        self.free.push(lane);
    }

    /// Whether nothing waits for the executor: no lane released, no join
    /// resolved, no instance to start.
    #[inline]
    pub fn is_settled(&self) -> bool {
        self.released.is_empty()
            && self.resolved.is_empty()
            && self.starving.is_empty()
            && self.pending.is_empty()
    }

    /// The next join resolved since the last call (program-counter).
    pub fn take_resolved(&mut self) -> Option<ForkId> {
        while let Some((fork, serial)) = self.resolved.pop() {
            if let Some(Some(join)) = self.forks.get(fork as usize) {
                if join.serial == serial {
                    return Some(fork);
                }
            }
        }
        None
    }

    /// Forgets which joins resolved (local-static closes its joins itself).
    pub fn clear_resolved(&mut self) {
        self.resolved.clear();
    }

    /// Closes a resolved join: its parent waits no more. Gives the join and
    /// what it resolved to.
    pub fn close_fork(&mut self, fork: ForkId) -> (Join, Resolution) {
        let Some(mut join) = self.forks.get_mut(fork as usize).and_then(Option::take) else {
            internal_error(format!("fork {fork} is not open"));
        };
        let Some(resolution) = join.resolution.take() else {
            internal_error(format!("fork {fork} is closed before it resolved"));
        };
        self.free_forks.push(fork);
        self.open_forks -= 1;
        self.waits[join.parent as usize] = None;
        if join.mode.saves() && matches!(resolution, Resolution::Returned { .. }) {
            let tapes = std::mem::take(&mut join.tapes);
            self.tapes[join.parent as usize].push_instances(tapes);
            self.note_tape(join.parent as usize);
        }
        (join, resolution)
    }

    /// Sets the member's steps as `lane` counts them (after a join).
    pub fn set_steps(&mut self, lane: u32, steps: u64) {
        self.steps[lane as usize] = steps;
    }

    /// Whether any join is open (none may be at the end of a run).
    pub fn forks_open(&self) -> bool {
        self.forks.iter().any(Option::is_some)
    }

    /// The run's output: every member's outcome, with the run's figures,
    /// and the contributions to static adjoints (`adjoints`, the engine's
    /// log) of the members that return. A member that forked and stopped with `step_limit` gets the outcome
    /// `rerun` gives it (the reference executor, running it alone: see the
    /// module doc). Panics if a member neither finished nor failed (an
    /// executor bug).
    pub fn into_output(
        self,
        counter: OpCounter,
        steps: u64,
        started: Instant,
        mut adjoints: AdjointLog,
        mut rerun: impl FnMut(usize) -> Outcome,
    ) -> RunOutput {
        let wall_seconds = started.elapsed().as_secs_f64();
        let (op_counts, lane_utilization) = counter.finish();
        let mut results = Vec::with_capacity(self.members);
        for (m, own) in self.results.into_iter().enumerate() {
            let outcome = match &self.state[m] {
                LaneState::Returned => match own {
                    Some(values) => Ok(values),
                    None => internal_error("a member returned without results"),
                },
                LaneState::Failed(error)
                    if error.kind == ErrorKind::StepLimit && self.forked[m] =>
                {
                    rerun(m)
                }
                LaneState::Failed(error) => Err(error.clone()),
                _ => internal_error("a member neither finished nor failed"),
            };
            results.push(outcome);
        }
        // A member that fails contributes nothing.
        adjoints.retain(|r| results[r.member as usize].is_ok());
        RunOutput {
            results,
            adjoints,
            stats: Stats {
                steps,
                lane_utilization,
                instances: self.instances,
                peak_instances: self.peak_instances,
                tape_bytes: self.tape_bytes as u64,
                op_counts,
                wall_seconds,
                ..Stats::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opening() -> Opening {
        Opening {
            depth: 1,
            site: 0,
            mode: TapeMode::None,
        }
    }

    fn fault() -> Fault {
        Fault::new(ErrorKind::DivisionByZero, "division by zero")
    }

    fn error() -> MemberError {
        MemberError::new(
            ErrorKind::DivisionByZero,
            "division by zero",
            Loc::new(1, 1),
        )
    }

    #[test]
    fn retired_rows_leave_and_only_uncaught_errors_stop_their_lane() {
        let mut lanes = LaneTable::new(4, 0, 100);
        let mut rows = vec![0, 1, 2, 3];
        let mut faults = vec![(3, fault()), (1, fault())];
        // Row 3's error is caught (the lane goes on elsewhere, with the
        // tape it had at its catching call), row 1's is not.
        lanes
            .tape_push(3, &[], Values::scalar(&autobatch_types::Scalar::I64(7)))
            .expect("no bound");
        lanes.set_tape_aside(3);
        lanes
            .tape_push(3, &[], Values::scalar(&autobatch_types::Scalar::I64(8)))
            .expect("no bound");
        lanes.retire_faults(
            &mut rows,
            &mut faults,
            Loc::new(2, 5),
            |r| r as usize,
            |r, e| if r == 3 { Ok(()) } else { Err(e) },
        );
        assert_eq!(rows, [0, 2]);
        assert!(faults.is_empty());
        assert!(lanes.has_failed(1) && !lanes.has_failed(3));
        let mut kept = autobatch_types::Data::I64(vec![0]);
        lanes.tape_pop(3, ValuesMut::all(&mut kept));
        assert_eq!(kept.get(0), autobatch_types::Scalar::I64(7));
        assert!(lanes.tapes[3].is_empty());
    }

    #[test]
    fn a_catching_call_revives_only_catchable_errors() {
        let mut lanes = LaneTable::new(2, 0, 1);
        lanes.enter_catch(0);
        lanes.fail(0, error());
        assert!(lanes.leave_catch(0) && !lanes.has_failed(0));
        let mut rows = vec![1];
        lanes.enter_block(&mut rows, |r| r as usize, Loc::new(1, 1), false);
        lanes.enter_catch(1);
        lanes.enter_block(&mut rows, |r| r as usize, Loc::new(3, 1), false);
        assert!(rows.is_empty() && lanes.has_failed(1));
        assert!(!lanes.leave_catch(1), "a step limit is not catchable");
    }

    /// A fork of lane 0 with `total` instances, all started.
    fn forked(total: u64) -> (LaneTable, ForkId, Vec<u32>) {
        let mut lanes = LaneTable::new(1, 0, 100);
        let key = lanes.fork_key(0, TapeMode::None);
        let fork = lanes.open_fork(0, key, total, opening());
        let started = (0..total)
            .map(|_| lanes.start_instance(fork).unwrap().0)
            .collect();
        (lanes, fork, started)
    }

    #[test]
    fn a_join_resolves_in_instance_order() {
        let (mut lanes, fork, started) = forked(3);
        assert_eq!(started, [1, 2, 3]);
        let mut rows = started.clone();
        lanes.enter_block(&mut rows, |r| r as usize, Loc::new(1, 1), false);
        lanes.enter_block(&mut rows, |r| r as usize, Loc::new(1, 1), false);
        // The last instance faults first; the first two return after.
        lanes.fail(3, error());
        assert!(lanes.take_resolved().is_none());
        lanes.instance_returned(2);
        lanes.instance_returned(1);
        assert_eq!(lanes.take_resolved(), Some(fork));
        let (join, resolution) = lanes.close_fork(fork);
        assert_eq!(join.parent, 0);
        assert_eq!(
            resolution,
            Resolution::Failed {
                steps: 6,
                error: error()
            }
        );
    }

    #[test]
    fn an_earlier_fault_cancels_the_later_instances() {
        let (mut lanes, fork, started) = forked(3);
        lanes.fail(started[1], error());
        assert!(lanes.is_cancelled(started[2]) && !lanes.is_cancelled(started[0]));
        let mut rows = vec![started[0], started[2]];
        lanes.drop_cancelled(&mut rows, |r| r as usize);
        assert_eq!(rows, [started[0]]);
        lanes.instance_returned(started[0]);
        assert_eq!(lanes.take_resolved(), Some(fork));
        assert!(matches!(
            lanes.close_fork(fork).1,
            Resolution::Failed { steps: 0, .. }
        ));
        let mut released = Vec::new();
        while let Some(lane) = lanes.take_released() {
            released.push(lane);
            lanes.free(lane);
        }
        released.sort_unstable();
        assert_eq!(released, started);
        assert_eq!(lanes.live_instances(), 0);
    }

    #[test]
    fn steps_past_the_limit_at_the_join_are_a_step_limit() {
        let mut lanes = LaneTable::new(1, 0, 3);
        let key = lanes.fork_key(0, TapeMode::None);
        let fork = lanes.open_fork(0, key, 2, opening());
        let (a, _) = lanes.start_instance(fork).unwrap();
        let (b, _) = lanes.start_instance(fork).unwrap();
        let mut rows = vec![a, b];
        lanes.enter_block(&mut rows, |r| r as usize, Loc::new(1, 1), false);
        lanes.enter_block(&mut rows, |r| r as usize, Loc::new(1, 1), false);
        lanes.instance_returned(a);
        lanes.instance_returned(b);
        assert_eq!(lanes.close_fork(fork).1, Resolution::StepLimit);
    }
}
