//! The step runner: one execution of a block's operations for its active
//! rows, written once for both batching executors.
//!
//! A [`Stepper`] holds what every step of a run shares (the engine, the
//! lanes, the counters, the fuser, the size classes of a ragged batch); a
//! [`Frame`] is the storage a step runs on (local-static: an activation's
//! slots and temporaries; program-counter: the run's), with the map from a
//! row to its lane and member. [`run_step`] runs a planned block
//! ([`super::plan::BlockPlan`]) as one step: the step's bookkeeping, then
//! [`run_ops`] runs each primitive through the engine (fused
//! chains, deferred indices of indexed products, operations split by size
//! class, step temporaries), and each operation of the executor's own
//! control (calls and forks, value-stack moves) through
//! [`Control::own_op`]. A primitive's faults retire their rows through
//! [`StepHooks::unwind`] (a catching call may recover them).
//!
//! Per-lane state that operations read or write (random streams, steps,
//! the log of static adjoints) is reached here by lane, through the frame's
//! row map, so an operation on such state is added once for both executors.

use autobatch_ir::Prim;
use autobatch_kernels::Fault;
use autobatch_types::{MemberError, Scalar, Tensor};

use super::chains::{FusedStep, Fuser, OpView};
use super::classes::{run_split, SizeClasses, Split, SplitScratch};
use super::engine::{Engine, LaneMode, PrimExecution, SharedEnv};
use super::indexed::{deferrable, products_of, Deferral, IndexedRole};
use super::lanes::LaneTable;
use super::plan::{BlockPlan, OpPlan};
use super::storage::Slot;
use super::temps::StepTemps;
use crate::internal::internal_error;
use crate::monitor::{OpCounter, Watch};
use crate::profile::Profiler;
use crate::{Env, ExecError, RunOptions};

/// What the steps of a batching run share.
pub struct Stepper<'a> {
    pub options: &'a RunOptions,
    pub shared: SharedEnv<'a>,
    pub lane_mode: LaneMode,
    pub engine: Engine<'a>,
    /// Per lane: its random stream, steps taken and state; the joins.
    pub lanes: LaneTable,
    pub counter: OpCounter,
    pub watch: Watch<'a>,
    /// Records the run's profile, when asked ([`RunOptions::profile`]).
    pub profiler: Option<Profiler>,
    pub fuser: Fuser,
    /// For a ragged batch, its members' size classes: the operations that
    /// mention a ragged dimension run split by them ([`super::classes`]).
    pub classes: Option<SizeClasses>,
    pub steps: u64,
    /// Bytes copied to pass arguments ([`crate::Stats::call_bytes`]).
    pub call_bytes: u64,
    /// The most bytes of per-lane state held at once
    /// ([`crate::Stats::peak_state_bytes`]).
    pub peak_state_bytes: u64,
    /// The indices deferred in the running step.
    deferral: Deferral,
    split_scratch: SplitScratch,
    /// Reused buffers: one operation's faults, and the member of each of
    /// its rows.
    faults: Vec<(u32, Fault)>,
    member_rows: Vec<u32>,
}

/// The storage one step runs on, and its rows' lanes and members.
pub struct Frame<'f> {
    /// One slot per variable, a row per row of the frame.
    pub slots: &'f mut Vec<Slot>,
    pub temps: &'f mut StepTemps,
    pub is_temp: &'f [bool],
    /// Row `r` is lane `lanes[r]`; `None`: rows are lanes.
    pub lanes: Option<&'f [u32]>,
    /// Row `r` is of member `members[r]`; `None`: its lane's member.
    pub members: Option<&'f [u32]>,
    /// The rows of the frame's columns.
    pub total: usize,
}

/// The lane of each row, as a function.
#[inline]
fn lane_fn(lanes: Option<&[u32]>) -> impl Fn(u32) -> usize + Copy + '_ {
    move |r| match lanes {
        Some(lanes) => lanes[r as usize] as usize,
        None => r as usize,
    }
}

/// Where a step runs, for its bookkeeping.
#[derive(Clone, Copy, Debug)]
pub struct StepSite {
    /// The IR function and block (for the profile).
    pub function: usize,
    pub block: usize,
    pub loc: autobatch_ir::Loc,
    /// Whether entering the block counts a step of each lane (a block of
    /// the explicit-stack form that continues an IR block after a call
    /// does not).
    pub counts_step: bool,
}

/// What an executor does inside a primitive's run besides the engine.
pub trait StepHooks {
    /// Before an operation writes `slot`.
    fn before_write(&mut self, _slots: &mut [Slot], _slot: usize) {}

    /// Runs `prim` itself, instead of the engine: true if it did.
    fn run_instead(&mut self, _prim: &Prim, _dst: Option<usize>, _slots: &mut [Slot]) -> bool {
        false
    }

    /// Row `row` met `error`: `Ok` if the executor sends its lane on
    /// elsewhere (a catching call recovers it), else the error, and the
    /// lane fails.
    fn unwind(&mut self, _row: u32, error: MemberError) -> Result<(), MemberError> {
        Err(error)
    }
}

/// No hooks.
pub struct NoHooks;

impl StepHooks for NoHooks {}

/// A batching executor as the step runner drives it, with frames of type `F`.
pub trait Control<'a, F> {
    type Hooks<'s>: StepHooks
    where
        Self: 's,
        F: 's,
        'a: 's;

    /// The run's step state, the frame's storage and the hooks, borrowed
    /// apart.
    fn parts<'s>(&'s mut self, frame: &'s mut F) -> StepParts<'s, 'a, Self::Hooks<'s>>
    where
        'a: 's;

    /// Operation `i` of the running block, one of the executor's own (a
    /// call, a fork, a value-stack move), for `rows`.
    fn own_op(&mut self, frame: &mut F, i: usize, rows: &mut Vec<u32>) -> Result<(), ExecError>;

    /// The bytes of per-lane state the executor holds now, but for the
    /// running step's temporaries (asked only of a step that has some).
    fn held_bytes(&self) -> u64;
}

/// A step's state borrowed apart: see [`Control::parts`].
pub struct StepParts<'s, 'a, H> {
    pub stepper: &'s mut Stepper<'a>,
    pub frame: Frame<'s>,
    pub hooks: H,
}

/// Runs `block` at `site` for `rows` (sorted) as one step: the step's
/// bookkeeping ([`Stepper::begin_step`]), its operations ([`run_ops`]) and
/// its end ([`Stepper::end_step`]). `rows` lose the rows that stop.
pub fn run_step<'a, F, C: Control<'a, F>>(
    control: &mut C,
    frame: &mut F,
    site: StepSite,
    block: &BlockPlan<'_>,
    rows: &mut Vec<u32>,
) -> Result<(), ExecError> {
    {
        let mut parts = control.parts(frame);
        parts.stepper.begin_step(&mut parts.frame, rows, site);
    }
    run_ops(control, frame, block, rows)?;
    let temps = control.parts(frame).frame.temps.peak();
    let held = if temps > 0 { control.held_bytes() } else { 0 };
    let mut parts = control.parts(frame);
    parts.stepper.end_step(&mut parts.frame, held);
    Ok(())
}

/// Runs the operations of `block` for `rows` (sorted), which lose the rows
/// that fault or are cancelled.
pub fn run_ops<'a, F, C: Control<'a, F>>(
    control: &mut C,
    frame: &mut F,
    block: &BlockPlan<'_>,
    rows: &mut Vec<u32>,
) -> Result<(), ExecError> {
    let mut i = 0;
    while i < block.ops.len() && !rows.is_empty() {
        let op = &block.ops[i];
        if op.prim.is_some() {
            let mut parts = control.parts(frame);
            if let Some(end) = parts.run_chain(block, i, rows) {
                i = end;
                continue;
            }
            parts.run_op(block, i, rows);
            parts.after_op(&op.dying, rows);
        } else {
            control.own_op(frame, i, rows)?;
            control.parts(frame).after_op(&op.dying, rows);
        }
        i += 1;
    }
    Ok(())
}

impl<'a> Stepper<'a> {
    /// The step state of a run of `members` members of `program`, its
    /// operations counted by `counter`.
    pub fn new(
        backend: &'a dyn autobatch_kernels::Backend,
        program: &autobatch_ir::Program,
        env: &'a Env,
        options: &'a RunOptions,
        members: usize,
        mut counter: OpCounter,
    ) -> Result<Stepper<'a>, ExecError> {
        counter.lanes = members as u64;
        Ok(Stepper {
            options,
            shared: SharedEnv {
                statics: &env.statics,
                symbols: &env.symbols,
                hosts: &env.hosts,
            },
            lane_mode: options.batching.lanes,
            engine: Engine::new(backend, options.threads),
            lanes: LaneTable::for_run(members, options),
            counter,
            watch: Watch::new(options),
            profiler: options.profile.then(|| Profiler::for_program(program)),
            fuser: Fuser::default(),
            classes: SizeClasses::of(env, members)?,
            steps: 0,
            call_bytes: 0,
            peak_state_bytes: 0,
            deferral: Deferral::default(),
            split_scratch: SplitScratch::default(),
            faults: Vec::new(),
            member_rows: Vec::new(),
        })
    }

    /// A step of `site` begins for `rows`: the observer's watch, the step
    /// count and limit (lanes past it, or past their grace once the run is
    /// interrupted, stop; cancelled lanes leave), the
    /// profile, the layout of the step's temporaries.
    pub fn begin_step(&mut self, frame: &mut Frame<'_>, rows: &mut Vec<u32>, site: StepSite) {
        self.watch
            .tick(self.steps, self.lanes.members_ended(), &self.counter);
        self.steps += 1;
        self.counter.lanes = self.lanes.threads() as u64;
        let lane_of = lane_fn(frame.lanes);
        if site.counts_step {
            let interrupted = self.watch.interrupted();
            self.lanes.enter_block(rows, lane_of, site.loc, interrupted);
        } else {
            self.lanes.drop_cancelled(rows, lane_of);
        }
        if let Some(profiler) = &mut self.profiler {
            let threads = self.lanes.threads();
            profiler.step(site.function, site.block, rows.len(), threads);
        }
        frame.temps.begin(rows, frame.total, self.lane_mode);
        self.deferral.begin();
    }

    /// The step ends: its temporaries give their buffers back, and if they
    /// held any, the most they held plus `held` (the executor's other state
    /// now, whose own peaks the executor notes) is taken into the peak.
    pub fn end_step(&mut self, frame: &mut Frame<'_>, held: u64) {
        let temps = frame.temps.peak();
        if temps > 0 {
            self.peak_state_bytes = self.peak_state_bytes.max(held + temps);
        }
        frame.temps.end(&mut self.engine, frame.slots);
    }

    /// The lengths of the symbolic dimensions member `member` sees (its
    /// own, in a ragged batch).
    pub fn symbols_of(&self, member: usize) -> &[u64] {
        match &self.classes {
            Some(classes) => classes.symbols_of(member),
            None => self.shared.symbols,
        }
    }

    /// The elements of member `member`'s value of type `ty` (fewer than a
    /// padded row of the longest member holds, for a ragged value).
    pub fn own_len(&self, ty: &autobatch_types::TensorType, member: usize) -> usize {
        let symbols = self.symbols_of(member);
        ty.dims
            .iter()
            .map(|d| autobatch_kernels::dim_length(symbols, *d))
            .product()
    }

    /// Member `m`'s value of a result of type `ty`, held in `slot` (at row
    /// `m`): in a ragged batch, cut to the member's own length.
    pub fn member_result(&self, slot: &Slot, ty: &autobatch_types::TensorType, m: usize) -> Tensor {
        match &self.classes {
            Some(classes) if classes.mentions(ty) => {
                classes.value(slot.values(m, 0, slot.row_len()), ty, m)
            }
            _ => slot.value(m),
        }
    }

    /// The run's output: every member's outcome (a member that forked and
    /// stopped at the step limit rerun alone on the reference executor),
    /// the figures, the fuser's report when the run fuses.
    pub fn into_output(
        self,
        started: std::time::Instant,
        program: &autobatch_ir::Program,
        env: &Env,
        batch: &crate::Batch,
    ) -> crate::RunOutput {
        let Stepper {
            options,
            mut engine,
            lanes,
            counter,
            profiler,
            fuser,
            steps,
            call_bytes,
            peak_state_bytes,
            ..
        } = self;
        let adjoints = engine.take_adjoints();
        let mut output = lanes.into_output(counter, steps, started, adjoints, |member| {
            let env = crate::ragged::member_env(env, member);
            crate::reference::run_member(program, &env, batch, options, member)
        });
        output.stats.call_bytes = call_bytes;
        output.stats.peak_state_bytes = peak_state_bytes;
        output.stats.profile = profiler.map(Profiler::finish);
        if options.fuse {
            output.stats.report = fuser.report();
        }
        output
    }
}

impl<H: StepHooks> StepParts<'_, '_, H> {
    /// After an operation: cancelled lanes leave `rows`, and the
    /// temporaries `dying` give their buffers back.
    #[inline]
    pub fn after_op(&mut self, dying: &[usize], rows: &mut Vec<u32>) {
        let stepper = &mut *self.stepper;
        stepper
            .lanes
            .drop_cancelled(rows, lane_fn(self.frame.lanes));
        self.frame
            .temps
            .after_op(&mut stepper.engine, self.frame.slots, rows, dying);
    }

    /// Operation `i` of `block`, a primitive, for `rows`: an index deferred
    /// to its products, a product of a deferred index, or any other.
    #[inline]
    fn run_op(&mut self, block: &BlockPlan<'_>, i: usize, rows: &mut Vec<u32>) {
        let op = &block.ops[i];
        match block.indexed_role(i) {
            Some(role) if self.defers(block, i, role, rows) => {
                self.stepper.deferral.defer(i);
                self.stepper.counter.record(op.counter, rows.len());
            }
            Some(role @ IndexedRole::Product { index_op, .. })
                if self.stepper.deferral.deferred(index_op) =>
            {
                self.run_prim(op, rows, Some(role))
            }
            _ => self.run_prim(op, rows, None),
        }
    }

    /// Whether the index `role` (operation `i` of `block`) is deferred to
    /// its products for `rows` ([`super::indexed`]).
    fn defers(&self, block: &BlockPlan<'_>, i: usize, role: IndexedRole, rows: &[u32]) -> bool {
        let IndexedRole::Index { array, index, .. } = role else {
            return false;
        };
        let products: Vec<OpView<'_>> = products_of(&block.indexed, i)
            .filter_map(|j| {
                let op = &block.ops[j];
                Some(OpView {
                    prim: op.prim?,
                    args: &op.args,
                    dst: op.dst,
                })
            })
            .collect();
        let slots = &self.frame.slots;
        let members = self.frame.members;
        let lanes = &self.stepper.lanes;
        let lane_of = lane_fn(self.frame.lanes);
        let member = matches!(slots[index], Slot::Member(_));
        let position = self.frame.is_temp[index] && !self.frame.temps.dense();
        let row_of = |k: usize, r: u32| match (member, position) {
            (true, _) => match members {
                Some(members) => members[r as usize] as usize,
                None => lanes.member_of(lane_of(r) as u32),
            },
            (false, true) => k,
            (false, false) => r as usize,
        };
        deferrable(slots, (array, index), &products, rows, &row_of)
    }

    /// The fused chain starting at operation `start` of `block`, if there is
    /// one, for `rows` ([`super::chains`]): the index of the operation after
    /// it, or `None` having written nothing when it does not run fused
    /// (its hoisted operations may have run).
    fn run_chain(
        &mut self,
        block: &BlockPlan<'_>,
        start: usize,
        rows: &mut Vec<u32>,
    ) -> Option<usize> {
        let site = block.chains.get(start)?.as_ref()?;
        for &h in &site.hoisted {
            let op = &block.ops[h];
            if op.prim.is_none() {
                internal_error("a hoisted operation of a chain that is no primitive");
            }
            self.run_prim(op, rows, None);
            self.after_op(&op.dying, rows);
            if rows.is_empty() {
                return None;
            }
        }
        for op in &site.ops {
            self.hooks.before_write(self.frame.slots, op.dst);
        }
        let stepper = &mut *self.stepper;
        let members = self.frame.members;
        let lanes = &stepper.lanes;
        let lane_of = lane_fn(self.frame.lanes);
        let member_of = |r: u32| match members {
            Some(members) => members[r as usize] as usize,
            None => lanes.member_of(lane_of(r) as u32),
        };
        let step = FusedStep {
            is_temp: self.frame.is_temp,
            env: &stepper.shared,
            rows,
            total: self.frame.total,
            member_of: &member_of,
        };
        let ran = stepper.fuser.run(
            &mut stepper.engine,
            self.frame.temps,
            site,
            self.frame.slots,
            &step,
        );
        if !ran {
            return None;
        }
        for i in (start..site.end).filter(|i| !site.hoisted.contains(i)) {
            let op = &block.ops[i];
            self.stepper.counter.record(op.counter, rows.len());
            self.after_op(&op.dying, rows);
        }
        Some(site.end)
    }

    /// A primitive for `rows` (with the item of its deferred index, for an
    /// indexed product); the rows that fault leave `rows` (their lanes
    /// recovered by a catching call, or stopped).
    #[inline]
    fn run_prim(&mut self, op: &OpPlan<'_>, rows: &mut Vec<u32>, indexed: Option<IndexedRole>) {
        let prim = op
            .prim
            .unwrap_or_else(|| internal_error("an executor's operation as a primitive"));
        let slots = &mut *self.frame.slots;
        if let Some(d) = op.dst {
            self.hooks.before_write(slots, d);
        }
        if prim.is_tape() {
            return self.run_tape(op, prim, rows);
        }
        let stepper = &mut *self.stepper;
        if self.hooks.run_instead(prim, op.dst, slots) {
            stepper.counter.record(op.counter, rows.len());
            return;
        }
        let mut member_rows = std::mem::take(&mut stepper.member_rows);
        let indexed = indexed.and_then(|role| role.product_operands(&op.args));
        let arg_slots: &[usize] = match &indexed {
            Some((pair, _)) => pair,
            None => &op.args,
        };
        let lane_of = lane_fn(self.frame.lanes);
        let (lane_members, rngs) = stepper.lanes.members_and_rngs();
        let members = self.frame.members;
        let member_of = |r: u32| match members {
            Some(members) => members[r as usize] as usize,
            None => lane_members[lane_of(r)] as usize,
        };
        // The member of each row, for an operand stored once per member,
        // and for a static adjoint (logged as its member's).
        member_rows.clear();
        if matches!(prim, Prim::StaticAdjoint(_))
            || arg_slots
                .iter()
                .any(|a| matches!(slots[*a], Slot::Member(_)))
        {
            member_rows.extend(rows.iter().map(|r| member_of(*r) as u32));
        }
        if let Some(copy) = op.arg_copy {
            // An invariant parameter is one value for all rows.
            let copies = if copy.shared { 1 } else { rows.len() as u64 };
            stepper.call_bytes += copy.bytes * copies;
        }
        let exec = PrimExecution {
            prim,
            args: arg_slots,
            dst: op.dst,
            rows,
            member_rows: &member_rows,
            total_rows: self.frame.total,
            mode: stepper.lane_mode,
            indexed: indexed.map(|(_, operand)| operand),
        };
        let mut faults = std::mem::take(&mut stepper.faults);
        faults.clear();
        match &stepper.classes {
            Some(classes) if op.split.split => {
                let split = Split {
                    classes,
                    exec: &exec,
                    types: &op.types,
                    statics: stepper.shared.statics,
                    hosts: stepper.shared.hosts,
                    member_of: &member_of,
                    rng_of: &lane_of,
                    plan: op.split,
                };
                run_split(
                    &mut stepper.engine,
                    &split,
                    slots,
                    rngs,
                    &mut stepper.split_scratch,
                    &mut faults,
                );
            }
            _ => {
                let temps = &mut *self.frame.temps;
                let is_temp = self.frame.is_temp;
                temps.prepare(&mut stepper.engine, slots, is_temp, exec.dst);
                temps.run_prim(
                    &mut stepper.engine,
                    &exec,
                    slots,
                    is_temp,
                    &stepper.shared,
                    rngs,
                    &lane_of,
                    &mut faults,
                );
            }
        }
        stepper.counter.record(op.counter, rows.len());
        let unwind = |r, error| self.hooks.unwind(r, error);
        let lanes = &mut stepper.lanes;
        lanes.retire_faults(rows, &mut faults, op.loc, lane_of, unwind);
        stepper.faults = faults;
        stepper.member_rows = member_rows;
    }

    /// `tape_push`, `tape_pop`, `tape_over`, `tape_mark` or `tape_settle` for `rows`: each row's lane's own tape
    /// ([`LaneTable::tape_push`]), the elements copied from the operand's
    /// row onto the tape and from the tape into the result's row (no
    /// tensor of their own). Their operands and results are never step
    /// temporaries ([`super::plan`]), so a row is its row of every column.
    /// The rows whose tape then holds more than the run's bound fault, and
    /// leave `rows`.
    fn run_tape(&mut self, op: &OpPlan<'_>, prim: &Prim, rows: &mut Vec<u32>) {
        let slots = &mut *self.frame.slots;
        let lane_of = lane_fn(self.frame.lanes);
        let members = self.frame.members;
        let lanes = &mut self.stepper.lanes;
        let mut faults = std::mem::take(&mut self.stepper.faults);
        faults.clear();
        for &r in rows.iter() {
            let lane = lane_of(r);
            match (prim, op.dst) {
                (Prim::TapePush, None) => {
                    let mut fault = None;
                    for &a in &op.args {
                        let at = match (&slots[a], members) {
                            (Slot::Member(_), Some(members)) => members[r as usize] as usize,
                            (Slot::Member(_), None) => lanes.member_of(lane as u32),
                            _ => r as usize,
                        };
                        let slot = &slots[a];
                        let values = slot.values(at, 0, slot.row_len());
                        if let Err(f) = lanes.tape_push(lane, slot.shape(), values) {
                            fault = Some(f);
                        }
                    }
                    faults.extend(fault.map(|f| (r, f)));
                }
                (Prim::TapePop(_), Some(d)) => match &mut slots[d] {
                    Slot::Column(column) => lanes.tape_pop(lane, column.row_mut(r as usize)),
                    _ => internal_error("a value popped off a tape into a shared variable"),
                },
                (Prim::TapeOver, Some(d)) => match &mut slots[d] {
                    Slot::Column(column) => {
                        let over = Tensor::scalar(Scalar::Bool(lanes.tape_over(lane)));
                        column.set_row(r as usize, &over);
                    }
                    _ => internal_error("a tape's size in a shared variable"),
                },
                (Prim::TapeMark, Some(d)) => match &mut slots[d] {
                    Slot::Column(column) => {
                        let held = Scalar::I64(lanes.tape_mark(lane) as i64);
                        column.set_row(r as usize, &Tensor::scalar(held));
                    }
                    _ => internal_error("a tape's mark in a shared variable"),
                },
                (Prim::TapeSettle, Some(d)) => match &mut slots[d] {
                    Slot::Column(column) => {
                        let dropped = Tensor::scalar(Scalar::Bool(lanes.tape_settle(lane)));
                        column.set_row(r as usize, &dropped);
                    }
                    _ => internal_error("a tape's settling in a shared variable"),
                },
                _ => internal_error(format!("`{prim}` with a wrong destination")),
            }
        }
        self.stepper.counter.record(op.counter, rows.len());
        let unwind = |r, error| self.hooks.unwind(r, error);
        let lanes = &mut self.stepper.lanes;
        lanes.retire_faults(rows, &mut faults, op.loc, lane_of, unwind);
        self.stepper.faults = faults;
    }
}
