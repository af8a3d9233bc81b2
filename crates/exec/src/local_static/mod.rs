//! Local-static autobatching: batching by activation.
//!
//! Each function activation runs for a set of members, with its own storage
//! holding one row per member of the activation. The rows waiting at each
//! block ([`Waiting`]) drive it: the smallest waiting block runs for the
//! members waiting there, and members that reach a block another
//! group already waits at merge with it (that is where diverged members
//! re-converge). A call recurses on the host, with exactly the members that
//! reached it; so members at different recursion depths never run together.
//!
//! The host recursion runs on a thread whose stack is sized from
//! `--max-stack-depth`, so a deep recursion is a member's `stack_overflow`,
//! never a crash.
//!
//! **Instances.** The instances of a fork (`join`, `map`, `pfor`) are lanes
//! ([`crate::batched::lanes`], [`crate::batched::instances`]). The
//! instances of all the rows that reach a fork run together, one child
//! activation per callee (the two calls of `join(node(l), node(r))` in an
//! activation of R rows are one activation of 2R rows, and so on down a
//! tree), in chunks of at most `--max-instances` lanes ([`forks`]); then
//! each row goes on, or stops with its first instance's error (which a
//! catching call around may catch). A cancelled instance's row leaves its
//! activation at the next operation.
//!
//! The run keeps one copy of each static it reads (`StaticPool`) and lends
//! it to the activation that loads it; an activation gives its loans back
//! while it calls and takes them again after, so a recursion reading a large
//! static neither copies it per call nor keeps a copy per activation.
//!
//! [`LocalStatic`] registers it as the `local-static` strategy. It keeps
//! only its control: activations, their queues, calls and forks
//! ([`forks`]). Each function is planned once, at its first activation
//! ([`crate::batched::plan`]), and a block's operations run through the
//! step runner it shares with program-counter ([`crate::batched::step`]),
//! with the lending of statics ([`statics`]) as its hooks; a fault inside a
//! catching call is not unwound where it happens but revived when the call
//! returns.
//!
//! A ragged batch runs as one batch: padded rows, and the operations that
//! mention a ragged dimension run split by size class
//! ([`crate::batched::classes`]).

use std::rc::Rc;
use std::time::Instant;

use autobatch_ir::{
    fork_calls, Block, EntityRef, FuncId, Function, InstanceArg, InstanceCall, Instances, Loc, Op,
    Prim, Program, TapeMode, Terminator, Var,
};
use autobatch_kernels::buffer::Values;
use autobatch_kernels::Backend;
use autobatch_passes::uniformity::Invariance;
use autobatch_types::{Scalar, Tensor, TensorType};

use crate::batched::classes::SizeClasses;
use crate::batched::instances::InstanceBudget;
use crate::batched::lanes::ForkId;
use crate::batched::plan::{PlanOp, StepPlan};
use crate::batched::skeleton::{bind_arg, invariance, no_room_for_entry, BranchRows, Waiting};
use crate::batched::step::{run_step, Control, Frame, StepHooks, StepParts, StepSite, Stepper};
use crate::batched::storage::{Column, Slot};
use crate::batched::temps::StepTemps;
use crate::batched::{column_slot, BlockChoice};
use crate::internal::internal_error;
use crate::memory::{check_memory, concrete_shape, lane_bytes, value_bytes};
use crate::monitor::{stack_overflow, OpCounter};
use crate::{Batch, Env, ExecError, Executor, RunOptions, RunOutput};

mod forks;
mod statics;

use forks::ForkSite;
use statics::{Lending, Loan, StaticPool};

struct Run<'a> {
    program: &'a Program,
    invariance: &'a Invariance,
    /// The engine, the lanes and the rest every step shares.
    step: Stepper<'a>,
    /// The most instance lanes alive at once.
    max_instances: InstanceBudget,
    /// The entry function (for the default of that budget).
    entry: FuncId,
    /// Counter index of each op, per function and block.
    op_counters: Vec<Vec<Vec<Option<usize>>>>,
    statics: StaticPool<'a>,
    /// The bytes of the activations alive.
    state_bytes: u64,
    /// Per function, its plan ([`crate::batched::plan`]), once computed.
    plans: Vec<Option<Rc<StepPlan<'a>>>>,
}

/// The plan of function `fid`'s blocks, whose operations count with
/// `counters` (per block and operation).
fn plan_function<'p>(
    fid: FuncId,
    function: &'p Function,
    invariance: &Invariance,
    counters: &[Vec<Option<usize>>],
    classes: Option<&SizeClasses>,
    fuse: bool,
) -> StepPlan<'p> {
    let blocks = function
        .blocks
        .values()
        .zip(counters)
        .map(|(block, counters)| {
            block
                .ops
                .iter()
                .zip(counters)
                .map(|(op, counter)| plan_op(function, op, *counter, classes.is_some()))
                .collect()
        })
        .collect();
    let candidates = step_temporaries(fid, function, invariance);
    StepPlan::new(blocks, candidates, classes, fuse)
}

/// An operation of the IR as the planner sees it.
/// The operands' types are needed in a ragged batch only.
fn plan_op<'p>(
    function: &'p Function,
    op: &'p Op,
    counter: Option<usize>,
    ragged: bool,
) -> PlanOp<'p> {
    match op {
        Op::Prim {
            dst,
            prim,
            args,
            loc,
        } => PlanOp {
            counter,
            ..PlanOp::prim(prim, *loc, args, *dst, ragged, |v| &function.vars[v].ty)
        },
        Op::Call { .. } | Op::Fork { .. } => {
            let mentions = op.uses().iter().chain(op.defs());
            PlanOp::own(mentions.map(|v| v.index()).collect())
        }
    }
}

/// The variables of `function` that may be step temporaries
/// ([`crate::batched::temps`]): stored per row, living inside one block (no
/// parameter, live into no block, read by no terminator, neither passed to
/// nor live across a call or a fork).
fn step_temporaries(fid: FuncId, function: &Function, invariance: &Invariance) -> Vec<bool> {
    let live = autobatch_ir::liveness::Liveness::compute(function);
    let mut is_temp: Vec<bool> = function
        .vars
        .keys()
        .map(|v| !invariance.is_invariant(fid, v) && invariance.member_root(fid, v).is_none())
        .collect();
    for p in &function.params {
        is_temp[p.index()] = false;
    }
    for (b, block) in function.blocks.iter() {
        let mut not = |v: Var| is_temp[v.index()] = false;
        live.live_in[b.index()].iter().for_each(&mut not);
        block.term.uses().iter().copied().for_each(&mut not);
        let after = live.live_after_ops(function, b);
        for (op, live_after) in block.ops.iter().zip(&after) {
            if let Op::Call { .. } | Op::Fork { .. } = op {
                op.uses()
                    .iter()
                    .chain(op.defs())
                    .copied()
                    .for_each(&mut not);
                live_after.iter().for_each(&mut not);
            }
        }
    }
    is_temp
}

/// The local-static executor in the registry ([`crate::EXECUTORS`]).
pub struct LocalStatic;

impl Executor for LocalStatic {
    fn name(&self) -> &'static str {
        "local-static"
    }

    fn description(&self) -> &'static str {
        "batches the members of each call; calls recurse on the host"
    }

    /// A step runs a block for the rows of an activation; a ragged batch
    /// runs as one batch ([`crate::batched::classes`]).
    fn batches_steps(&self) -> bool {
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
        if let Some(output) = no_room_for_entry(program, batch, options) {
            return Ok(output);
        }
        let invariance = invariance(program, batch, env);
        run(backend, program, &invariance, env, batch, options)
    }
}

/// Runs `batch` with local-static batching, computing on `backend`. Fails
/// before running only when the members' state cannot fit in memory.
pub fn run(
    backend: &dyn Backend,
    program: &Program,
    invariance: &Invariance,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    let members = batch.size;
    let per_member: u128 = program.functions[batch.entry]
        .vars
        .values()
        .map(|v| value_bytes(&v.ty, &env.symbols))
        .sum();
    check_memory(per_member, members, 0).map_err(ExecError::Resources)?;
    let stack_bytes = (64usize << 20)
        + options
            .max_stack_depth
            .saturating_mul(16 << 10)
            .min(1 << 34);
    let thread = std::thread::Builder::new()
        .name("local-static".into())
        .stack_size(stack_bytes);
    // Its panics are the run's internal errors.
    let run = crate::internal::current_run();
    std::thread::scope(|scope| {
        let handle = thread
            .spawn_scoped(scope, || {
                crate::internal::capture_for(run);
                run_on_this_thread(backend, program, invariance, env, batch, options)
            })
            .map_err(|e| ExecError::Resources(format!("cannot start the executor thread: {e}")))?;
        match handle.join() {
            Ok(output) => output,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

fn run_on_this_thread(
    backend: &dyn Backend,
    program: &Program,
    invariance: &Invariance,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    let members = batch.size;
    let started = Instant::now();
    let (counter, op_counters) = OpCounter::for_program(program);
    let mut run = Run {
        program,
        invariance,
        step: Stepper::new(backend, program, env, options, members, counter)?,
        max_instances: InstanceBudget::new(options.max_instances),
        entry: batch.entry,
        op_counters,
        statics: StaticPool {
            statics: &env.statics,
            idle: vec![Vec::new(); env.statics.len()],
        },
        state_bytes: 0,
        plans: vec![None; program.functions.len()],
    };
    let entry = &program.functions[batch.entry];
    let mut params = Vec::with_capacity(entry.params.len());
    for (p, arg) in entry.params.iter().zip(&batch.args) {
        let mut slot = run.new_slot(batch.entry, *p, members);
        if invariance.member_root(batch.entry, *p).is_some() {
            // Stored once per member, shared by every activation below.
            let ty = &entry.vars[*p].ty;
            let column = Column::zeros(ty.elem, concrete_shape(ty, &env.symbols), members);
            slot = Slot::Member(std::sync::Arc::new(column));
        }
        bind_arg(&mut slot, arg, members)?;
        params.push(slot);
    }
    let member_ids: Vec<u32> = (0..members as u32).collect();
    let returned = run.activation(batch.entry, &member_ids, params, 1)?;
    let mut step = run.step;
    let values: Vec<Slot> = returned.values.into_iter().map(Slot::Column).collect();
    for (m, finished) in returned.finished.iter().enumerate() {
        if *finished && !step.lanes.has_failed(m as u32) {
            let results = values.iter().zip(&entry.results);
            let results = results.map(|(slot, ty)| step.member_result(slot, ty, m));
            step.lanes.finish(m, results.collect());
        }
    }
    Ok(step.into_output(started, program, env, batch))
}

/// What an activation gives back: per row, whether it returned, and one
/// column per (flattened) result, with a row per row of the activation.
struct Returned {
    finished: Vec<bool>,
    values: Vec<Column>,
}

/// A call operation of the IR.
struct CallSite<'p> {
    dsts: &'p [Var],
    callee: FuncId,
    args: &'p [Var],
    loc: Loc,
    catch: bool,
}

/// Writes what a child activation `returned` into the caller's `dsts`, for
/// the caller's `rows` (child row `k` is caller row `rows[k]`) that
/// returned; gives those rows, which go on.
fn take_results(slots: &mut [Slot], dsts: &[Var], returned: Returned, rows: &[u32]) -> Vec<u32> {
    let returned_rows: Vec<u32> = (0..rows.len() as u32)
        .filter(|k| returned.finished[*k as usize])
        .collect();
    let still_running: Vec<u32> = returned_rows.iter().map(|k| rows[*k as usize]).collect();
    for (d, value) in dsts.iter().zip(returned.values) {
        match &mut slots[d.index()] {
            Slot::Column(c) => {
                let gathered;
                let dense = if returned_rows.len() == rows.len() {
                    &value
                } else {
                    gathered = value.gather(&returned_rows);
                    &gathered
                };
                c.scatter_rows_from(dense, &still_running);
            }
            Slot::Invariant(v) => {
                if let Some(k) = returned_rows.first() {
                    *v = Some(value.row(*k as usize));
                }
            }
            Slot::Member(_) => internal_error("a call's result into a member-uniform variable"),
        }
    }
    still_running
}

/// The state of one activation: a function running for some lanes.
struct Activation<'m> {
    fid: FuncId,
    /// Row `r` of the activation is lane `lanes[r]`, of member `members[r]`.
    lanes: &'m [u32],
    members: Vec<u32>,
    /// One slot per variable of the function, a row per row.
    slots: Vec<Slot>,
    /// Per row, whether it returned.
    finished: Vec<bool>,
    /// One column per (flattened) result, a row per row.
    values: Vec<Column>,
    /// The statics its slots hold, lent by the run's pool.
    loans: Vec<Loan>,
    /// The rows waiting at each block; the smallest block runs next.
    waiting: Waiting<Block>,
    /// Its function's plan, and the storage of the running step's
    /// temporaries.
    plan: Rc<StepPlan<'m>>,
    temps: StepTemps,
    /// The block running, and the activation's call depth.
    block: Block,
    depth: usize,
}

impl Activation<'_> {
    fn lane_of(&self, r: u32) -> u32 {
        self.lanes[r as usize]
    }

    /// A block's terminator for the rows still running: they wait at the
    /// next block, or return (their results are kept in the activation's
    /// result columns).
    fn terminate(&mut self, term: &Terminator, rows: &[u32]) -> Result<(), ExecError> {
        match term {
            Terminator::Jump(target) => self.waiting.push(*target, rows),
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            } => {
                let mut branch = BranchRows::default();
                branch.partition(&self.slots[cond.index()], rows)?;
                self.waiting.push(*then_block, &branch.then_rows);
                self.waiting.push(*else_block, &branch.else_rows);
            }
            Terminator::Return(vars) => {
                for r in rows.iter() {
                    self.finished[*r as usize] = true;
                }
                for (value, v) in self.values.iter_mut().zip(vars) {
                    match &self.slots[v.index()] {
                        Slot::Column(c) => value.copy_rows_from(c, rows),
                        Slot::Member(c) => {
                            let n = c.row_len;
                            for r in rows.iter() {
                                let m = self.members[*r as usize] as usize;
                                value.write(
                                    *r as usize,
                                    0,
                                    Values::of(&c.data, m * n..(m + 1) * n),
                                );
                            }
                        }
                        Slot::Invariant(Some(t)) => value.fill_rows(t, rows),
                        Slot::Invariant(None) => internal_error("returning an unassigned variable"),
                    }
                }
            }
        }
        Ok(())
    }
}

impl<'a> Run<'a> {
    /// Runs one activation of `fid` for `lanes` (row r is lane
    /// `lanes[r]`); returns what each row returned, if it did not stop.
    fn activation(
        &mut self,
        fid: FuncId,
        lanes: &[u32],
        params: Vec<Slot>,
        depth: usize,
    ) -> Result<Returned, ExecError> {
        let function: &Function = &self.program.functions[fid];
        let n = lanes.len();
        let plan = self.plan(fid);
        let mut slots: Vec<Slot> = function
            .vars
            .iter()
            .map(|(v, data)| match plan.is_temp[v.index()] {
                // Stored only while a step runs.
                true => column_slot(&data.ty, self.step.shared.symbols, 0),
                false => self.new_slot(fid, v, n),
            })
            .collect();
        for (p, slot) in function.params.iter().zip(params) {
            slots[p.index()] = slot;
        }
        let bytes: u64 = slots.iter().map(Slot::bytes).sum();
        self.state_bytes += bytes;
        self.step.peak_state_bytes = self.step.peak_state_bytes.max(self.state_bytes);
        let mut frame = Activation {
            fid,
            lanes,
            members: lanes
                .iter()
                .map(|l| self.step.lanes.member_of(*l) as u32)
                .collect(),
            slots,
            finished: vec![false; n],
            values: function
                .results
                .iter()
                .map(|ty| Column::zeros(ty.elem, concrete_shape(ty, self.step.shared.symbols), n))
                .collect(),
            loans: Vec::new(),
            waiting: Waiting::new(function.blocks.len()),
            plan,
            temps: StepTemps::default(),
            block: Function::ENTRY,
            depth,
        };
        let mut rows: Vec<u32> = (0..n as u32).collect();
        frame.waiting.push(Function::ENTRY, &rows);
        while let Some(block) = frame.waiting.choose(BlockChoice::SmallestIndex) {
            frame.waiting.take(block, &mut rows);
            self.run_block(&mut frame, block, &mut rows)?;
        }
        self.state_bytes -= bytes;
        self.statics.take_back(&mut frame.slots, &frame.loans);
        Ok(Returned {
            finished: frame.finished,
            values: frame.values,
        })
    }

    /// Runs block `block_id` of the activation for `rows` (sorted): the
    /// step, then its terminator sends the rows on.
    fn run_block(
        &mut self,
        frame: &mut Activation<'_>,
        block_id: Block,
        rows: &mut Vec<u32>,
    ) -> Result<(), ExecError> {
        let program = self.program;
        let block = &program.functions[frame.fid].blocks[block_id];
        frame.block = block_id;
        let site = StepSite {
            function: frame.fid.index(),
            block: block_id.index(),
            loc: block.loc,
            counts_step: program.functions[frame.fid].counts_step(block_id),
        };
        let plan = frame.plan.clone();
        run_step(self, frame, site, &plan.blocks[block_id.index()], rows)?;
        if rows.is_empty() {
            return Ok(());
        }
        frame.terminate(&block.term, rows)
    }

    /// A call for `rows`: a child activation with exactly those members,
    /// whose results go to the rows that return (for a catching call, the
    /// flag is set and the rows that faulted catchably go on too). A call
    /// that would overflow the stack stops its members, or is caught.
    fn call(
        &mut self,
        frame: &mut Activation<'_>,
        call: &CallSite<'_>,
        rows: &mut Vec<u32>,
        depth: usize,
    ) -> Result<(), ExecError> {
        if depth + 1 > self.step.options.max_stack_depth {
            if call.catch {
                // The call itself overflows: caught like a fault inside it.
                set_flags(&mut frame.slots[call.dsts[0].index()], rows, &[]);
                for d in &call.dsts[1..] {
                    zero_rows(&mut frame.slots[d.index()], rows);
                }
                return Ok(());
            }
            for r in rows.iter() {
                let error = stack_overflow(self.step.options.max_stack_depth, call.loc);
                self.step.lanes.fail(frame.lane_of(*r), error);
            }
            rows.clear();
            return Ok(());
        }
        let child_lanes: Vec<u32> = rows.iter().map(|r| frame.lanes[*r as usize]).collect();
        let child_params = self.pass_args(frame, call, rows);
        self.step.call_bytes += child_params.iter().map(Slot::bytes).sum::<u64>();
        if call.catch {
            for lane in &child_lanes {
                self.step.lanes.enter_catch(*lane);
            }
        }
        self.statics.take_back(&mut frame.slots, &frame.loans);
        let mut returned = self.activation(call.callee, &child_lanes, child_params, depth + 1)?;
        self.statics.lend_again(&mut frame.slots, &frame.loans);
        for d in call.dsts {
            self.statics
                .before_write(&mut frame.slots, &mut frame.loans, d.index());
        }
        let result_dsts = if call.catch {
            let completed: Vec<u32> = (0..rows.len())
                .filter(|k| returned.finished[*k])
                .map(|k| rows[k])
                .collect();
            set_flags(&mut frame.slots[call.dsts[0].index()], rows, &completed);
            // A lane that faulted inside goes on with the zeros
            // its rows of the results still hold.
            for (k, &lane) in child_lanes.iter().enumerate() {
                if self.step.lanes.leave_catch(lane) {
                    returned.finished[k] = true;
                }
            }
            &call.dsts[1..]
        } else {
            call.dsts
        };
        *rows = take_results(&mut frame.slots, result_dsts, returned, rows);
        Ok(())
    }

    /// The plan of function `fid` (made at its first activation).
    fn plan(&mut self, fid: FuncId) -> Rc<StepPlan<'a>> {
        let program = self.program;
        let plan = &mut self.plans[fid.index()];
        plan.get_or_insert_with(|| {
            Rc::new(plan_function(
                fid,
                &program.functions[fid],
                self.invariance,
                &self.op_counters[fid.index()],
                self.step.classes.as_ref(),
                self.step.options.fuse,
            ))
        })
        .clone()
    }

    /// The callee's parameter slots for a call from `rows`: a shared
    /// argument stays shared where the callee's parameter is invariant, a
    /// column's rows are gathered, and a shared value for a per-member
    /// parameter is repeated on every row.
    fn pass_args(&self, frame: &Activation<'_>, call: &CallSite<'_>, rows: &[u32]) -> Vec<Slot> {
        let callee = &self.program.functions[call.callee];
        callee
            .params
            .iter()
            .zip(call.args)
            .map(|(p, a)| match &frame.slots[a.index()] {
                Slot::Invariant(value) if self.invariance.is_invariant(call.callee, *p) => {
                    Slot::Invariant(value.clone())
                }
                Slot::Member(column) if self.invariance.member_root(call.callee, *p).is_some() => {
                    Slot::Member(column.clone())
                }
                Slot::Member(column) => {
                    let members: Vec<u32> =
                        rows.iter().map(|r| frame.members[*r as usize]).collect();
                    Slot::Column(column.gather(&members))
                }
                Slot::Column(source) => Slot::Column(source.gather(rows)),
                Slot::Invariant(value) => {
                    let ty = &callee.vars[*p].ty;
                    let mut column = Column::zeros(
                        ty.elem,
                        concrete_shape(ty, self.step.shared.symbols),
                        rows.len(),
                    );
                    let value = value.as_ref().unwrap_or_else(|| {
                        internal_error("an invariant argument is unassigned at the call")
                    });
                    column.fill_rows(value, &(0..rows.len() as u32).collect::<Vec<_>>());
                    Slot::Column(column)
                }
            })
            .collect()
    }

    /// A fresh slot for variable `v` of `fid` in an activation of `rows`
    /// rows: unassigned if invariant, else a column of zeros.
    fn new_slot(&self, fid: FuncId, v: autobatch_ir::Var, rows: usize) -> Slot {
        if self.invariance.is_invariant(fid, v) || self.invariance.member_root(fid, v).is_some() {
            Slot::Invariant(None)
        } else {
            column_slot(
                &self.program.functions[fid].vars[v].ty,
                self.step.shared.symbols,
                rows,
            )
        }
    }
}

/// Sets the `bool` column `flag` to true on `completed` and false on the
/// other `rows` (the flag of a catching call).
fn set_flags(flag: &mut Slot, rows: &[u32], completed: &[u32]) {
    let Slot::Column(Column {
        data: autobatch_types::Data::Bool(values),
        ..
    }) = flag
    else {
        internal_error("the flag of a catching call is not a per-member bool")
    };
    for r in rows {
        values[*r as usize] = completed.binary_search(r).is_ok();
    }
}

/// Writes zeros into `rows` of a catching call's result.
fn zero_rows(slot: &mut Slot, rows: &[u32]) {
    let Slot::Column(column) = slot else {
        internal_error("the result of a catching call is not per-member")
    };
    column.fill_rows(&Tensor::zeros(column.data.ty(), column.shape.clone()), rows);
}

impl<'a, 'm> Control<'a, Activation<'m>> for Run<'a> {
    type Hooks<'s>
        = Lending<'s, 'a>
    where
        Self: 's,
        'm: 's,
        'a: 's;

    fn parts<'s>(&'s mut self, frame: &'s mut Activation<'m>) -> StepParts<'s, 'a, Lending<'s, 'a>>
    where
        'a: 's,
    {
        StepParts {
            stepper: &mut self.step,
            frame: Frame {
                slots: &mut frame.slots,
                temps: &mut frame.temps,
                is_temp: &frame.plan.is_temp,
                lanes: Some(frame.lanes),
                members: Some(&frame.members),
                total: frame.lanes.len(),
            },
            hooks: Lending {
                statics: &mut self.statics,
                loans: &mut frame.loans,
            },
        }
    }

    /// A call or a fork.
    fn own_op(
        &mut self,
        frame: &mut Activation<'m>,
        i: usize,
        rows: &mut Vec<u32>,
    ) -> Result<(), ExecError> {
        let program = self.program;
        let depth = frame.depth;
        match &program.functions[frame.fid].blocks[frame.block].ops[i] {
            Op::Call {
                dsts,
                callee,
                args,
                loc,
                catch,
            } => {
                let call = CallSite {
                    dsts,
                    callee: *callee,
                    args,
                    loc: *loc,
                    catch: *catch,
                };
                self.call(frame, &call, rows, depth)
            }
            Op::Fork {
                dsts,
                args,
                instances,
                loc,
                tape,
            } => {
                let site = ForkSite {
                    dsts,
                    args,
                    instances,
                    loc: *loc,
                    tape: *tape,
                };
                self.fork(frame, &site, rows, depth)
            }
            Op::Prim { .. } => internal_error("a primitive run as a call or fork"),
        }
    }

    /// The activations alive.
    fn held_bytes(&self) -> u64 {
        self.state_bytes
    }
}
