//! Local-static autobatching (seed 000, Algorithm 1; seed 004's stackless
//! executor).
//!
//! Each function activation runs for a set of members, with its own storage
//! holding one row per member of the activation. A queue of waiting program
//! points, ordered by block index, drives it: the smallest waiting block runs
//! for the members waiting there, and members that reach a block another
//! group already waits at merge with it (that is where diverged members
//! re-converge). A call recurses on the host, with exactly the members that
//! reached it; so members at different recursion depths never run together.
//!
//! The host recursion runs on a thread whose stack is sized from
//! `--max-stack-depth`, so a deep recursion is a member's `stack_overflow`,
//! never a crash.
//!
//! **Instances.** A fork (`join`, `map`, `pfor`) reached by some rows of an
//! activation starts one lane per instance of every row
//! ([`crate::batched::lanes`]): each lane draws from its instance's stream
//! and counts the member's steps from its parent's. The lanes of all rows
//! run together, one child activation per callee (the two calls of
//! `join(node(l), node(r))` in an activation of R rows are one activation
//! of 2R rows, and so on down a tree), at most `--max-instances` lanes at a
//! time (chunks, at least one lane each); each instance that returns
//! writes its results into its parent row's destinations (element `k` for a
//! `map`). The joins then resolve in instance order: a row goes on with the
//! member's steps, or stops with its first instance's error (which a
//! catching call around may catch). An instance whose error is final (not
//! inside a catching call of its own) cancels the later instances of its
//! fork at once: their rows leave their activations at the next operation.
//!
//! The run keeps one copy of each static it reads (`StaticPool`) and lends
//! it to the activation that loads it; an activation gives its loans back
//! while it calls and takes them again after, so a recursion reading a large
//! static neither copies it per call nor keeps a copy per activation.
//!
//! [`LocalStatic`] registers it as the `local-static` strategy. What it
//! shares with program-counter (per-member outcomes and the step limit,
//! fault retirement, argument binding, the branch split) is
//! [`crate::batched::skeleton`]; a fault inside a catching call is not
//! unwound where it happens but revived when the call returns.
//!
//! A ragged batch runs as one batch: padded rows, and the operations that
//! mention a ragged dimension run split by size class
//! ([`crate::batched::classes`]).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use autobatch_ir::{
    fork_calls, Block, BlockData, EntityRef, FuncId, Function, InstanceArg, InstanceCall,
    Instances, Loc, Op, Prim, Program, Terminator, Var,
};
use autobatch_kernels::buffer::Values;
use autobatch_kernels::{dim_length, Backend};
use autobatch_passes::uniformity::Invariance;
use autobatch_types::{Scalar, Tensor, TensorType};

use crate::batched::classes::{run_split, SizeClasses, Split, SplitPlan, SplitScratch};
use crate::batched::engine::{Engine, LaneMode, PrimExecution, SharedEnv};
use crate::batched::fuse::{find_chains, ChainSite, FusedStep, Fuser, OpView};
use crate::batched::indexed::{
    deferrable, find_indexed_products, products_of, Deferral, IndexedRole,
};
use crate::batched::lanes::{ForkId, Lanes, Resolution};
use crate::batched::skeleton::{bind_arg, invariance, no_room_for_entry, BranchRows};
use crate::batched::storage::{Column, Slot};
use crate::batched::temps::{deaths, in_place_set, StepTemps};
use crate::batched::{
    check_memory, column_slot, concrete_shape, default_max_instances, lane_bytes, stack_overflow,
    step_limit, value_bytes, OpCounter, Watch,
};
use crate::internal::internal_error;
use crate::profile::Profiler;
use crate::{Batch, BatchingOptions, Env, ExecError, Executor, OptionsRead, RunOptions, RunOutput};

struct Run<'a> {
    program: &'a Program,
    invariance: &'a Invariance,
    shared: SharedEnv<'a>,
    options: &'a RunOptions,
    lane_mode: LaneMode,
    /// Per lane: its random stream, steps taken and state; the joins.
    lanes: Lanes,
    /// The most instance lanes alive at once (`--max-instances`); the
    /// default is computed at the first fork ([`Run::max_instances`]).
    max_instances: Option<usize>,
    /// The entry function (for that default).
    entry: FuncId,
    counter: OpCounter,
    watch: Watch<'a>,
    /// Counter index of each op, per function and block.
    op_counters: Vec<Vec<Vec<Option<usize>>>>,
    steps: u64,
    engine: Engine<'a>,
    /// Reused buffers for the faults and the operand slots of one operation.
    faults: Vec<(u32, autobatch_kernels::Fault)>,
    arg_slots: Vec<usize>,
    /// Reused buffer: the member of each active row of an operation that
    /// reads a member-uniform parameter.
    member_rows: Vec<u32>,
    statics: StaticPool<'a>,
    /// Bytes copied into callees' parameters ([`crate::Stats::call_bytes`]).
    call_bytes: u64,
    /// The bytes of the activations alive, and their most.
    state_bytes: u64,
    peak_state_bytes: u64,
    /// Per function, its step temporaries, once computed.
    temp_plans: Vec<Option<Rc<TempPlan>>>,
    fuser: Fuser,
    /// Records the run's profile, when asked ([`RunOptions::profile`]).
    profiler: Option<Profiler>,
    /// For a ragged batch, its members' size classes: the operations that
    /// mention a ragged dimension run split by them
    /// ([`crate::batched::classes`]).
    classes: Option<SizeClasses>,
    split_scratch: SplitScratch,
}

/// The step temporaries of a function ([`crate::batched::temps`]): per
/// variable whether it is one, and per block and operation those it
/// mentions last.
struct TempPlan {
    is_temp: Vec<bool>,
    /// Per block and operation, whether it runs split by size class in a
    /// ragged batch ([`SizeClasses::plan`]).
    split: Vec<Vec<SplitPlan>>,
    dying: Vec<Vec<Vec<usize>>>,
    /// Per block, the fused chains starting at each operation.
    chains: Vec<Vec<Option<ChainSite>>>,
    /// Per block, the indexed products ([`crate::batched::indexed`]).
    indexed: Vec<Vec<Option<IndexedRole>>>,
}

impl TempPlan {
    /// A variable is a step temporary if it is stored per row and lives
    /// inside one block: no parameter, live into no block, read by no
    /// terminator, neither passed to nor live across a call or a fork, and
    /// read by no indexed assignment in place.
    fn new(
        fid: FuncId,
        function: &Function,
        invariance: &Invariance,
        classes: Option<&SizeClasses>,
    ) -> TempPlan {
        let live = autobatch_passes::liveness::Liveness::compute(function);
        let split: Vec<Vec<SplitPlan>> = function
            .blocks
            .values()
            .map(|block| {
                block
                    .ops
                    .iter()
                    .map(|op| match (op, classes) {
                        (Op::Prim { prim, .. }, Some(classes)) => {
                            classes.plan(prim, &operand_types(function, op))
                        }
                        _ => SplitPlan::default(),
                    })
                    .collect()
            })
            .collect();
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
                match op {
                    Op::Call { .. } | Op::Fork { .. } => {
                        op.uses()
                            .iter()
                            .chain(op.defs())
                            .copied()
                            .for_each(&mut not);
                        live_after.iter().for_each(&mut not);
                    }
                    Op::Prim {
                        dst, prim, args, ..
                    } => {
                        let slots: Vec<usize> = args.iter().map(|a| a.index()).collect();
                        if in_place_set(prim, dst.map(|d| d.index()), &slots) {
                            args.iter().copied().for_each(&mut not);
                        }
                    }
                }
            }
            // An operation split by size class reads and writes its
            // operands by row, where a compact step's temporaries are laid
            // out by position.
            for (op, plan) in block.ops.iter().zip(&split[b.index()]) {
                if plan.split {
                    op.uses()
                        .iter()
                        .chain(op.defs())
                        .copied()
                        .for_each(&mut not);
                }
            }
        }
        let mut dying: Vec<Vec<Vec<usize>>> = function
            .blocks
            .values()
            .map(|block| {
                let mentions: Vec<Vec<usize>> = block
                    .ops
                    .iter()
                    .map(|op| {
                        op.uses()
                            .iter()
                            .chain(op.defs())
                            .map(|v| v.index())
                            .collect()
                    })
                    .collect();
                deaths(&mentions, &is_temp)
            })
            .collect();
        let mut chains = Vec::new();
        let mut indexed = Vec::new();
        for ((block, dying), split) in function.blocks.values().zip(&mut dying).zip(&split) {
            let args: Vec<Vec<usize>> = block
                .ops
                .iter()
                .map(|op| op.uses().iter().map(|v| v.index()).collect())
                .collect();
            let views: Vec<Option<OpView<'_>>> = block
                .ops
                .iter()
                .zip(&args)
                .zip(split)
                .map(|((op, args), plan)| match op {
                    // No link of a chain, which runs over whole
                    // padded rows.
                    Op::Prim { .. } if plan.split => None,
                    Op::Prim { dst, prim, .. } => Some(OpView {
                        prim,
                        args,
                        dst: dst.map(|d| d.index()),
                    }),
                    Op::Call { .. } | Op::Fork { .. } => None,
                })
                .collect();
            // (An index that is a step temporary then lives until its product.)
            indexed.push(find_indexed_products(&views, &is_temp, dying));
            chains.push(find_chains(&views, &is_temp, dying));
        }
        TempPlan {
            is_temp,
            split,
            dying,
            chains,
            indexed,
        }
    }
}

/// The run's copies of the statics, each lent to at most one slot at a
/// time. A copy is made only when every copy of the static is lent, so
/// there are never more copies of a static than one activation holds at once.
struct StaticPool<'a> {
    statics: &'a [Tensor],
    /// Per static, its copies that no slot holds.
    idle: Vec<Vec<Tensor>>,
}

/// A slot of an activation holding a static lent by the [`StaticPool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Loan {
    slot: usize,
    id: usize,
}

impl StaticPool<'_> {
    /// A copy of static `id` (made when every copy is lent), or `None` if
    /// there is no such static.
    fn lend(&mut self, id: usize) -> Option<Tensor> {
        let idle = self.idle.get_mut(id)?.pop();
        idle.or_else(|| self.statics.get(id).cloned())
    }

    /// Takes the loans of `loans` back from `slots`, which become unassigned.
    fn take_back(&mut self, slots: &mut [Slot], loans: &[Loan]) {
        for loan in loans {
            if let Slot::Invariant(value @ Some(_)) = &mut slots[loan.slot] {
                self.idle[loan.id].extend(value.take());
            }
        }
    }

    /// Lends the statics of `loans` to their slots again.
    fn lend_again(&mut self, slots: &mut [Slot], loans: &[Loan]) {
        for loan in loans {
            slots[loan.slot] = Slot::Invariant(self.lend(loan.id));
        }
    }

    /// Before `slot` is written: if it holds a loan, takes it back.
    fn before_write(&mut self, slots: &mut [Slot], loans: &mut Vec<Loan>, slot: usize) {
        if let Some(k) = loans.iter().position(|l| l.slot == slot) {
            let loan = loans.swap_remove(k);
            self.take_back(slots, &[loan]);
        }
    }
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

    fn reads(&self) -> OptionsRead {
        OptionsRead {
            lanes: true,
            block_choice: false,
        }
    }

    fn records_profile(&self) -> bool {
        true
    }

    fn advances_members_together(&self) -> bool {
        true
    }

    /// A ragged batch runs as one batch, split by size class only where
    /// an operation mentions a ragged dimension
    /// ([`crate::batched::classes`]).
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
        batching: &BatchingOptions,
    ) -> Result<RunOutput, ExecError> {
        if let Some(output) = no_room_for_entry(program, batch, options) {
            return Ok(output);
        }
        let invariance = invariance(program, batch, env);
        run(
            backend,
            program,
            &invariance,
            env,
            batch,
            options,
            batching.lanes,
        )
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
    lanes: LaneMode,
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
                run_on_this_thread(backend, program, invariance, env, batch, options, lanes)
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
    lanes: LaneMode,
) -> Result<RunOutput, ExecError> {
    let members = batch.size;
    let started = Instant::now();
    let (mut counter, op_counters) = OpCounter::for_program(program);
    counter.lanes = members as u64;
    let mut run = Run {
        program,
        invariance,
        shared: SharedEnv {
            statics: &env.statics,
            symbols: &env.symbols,
            hosts: &env.hosts,
        },
        options,
        lane_mode: lanes,
        lanes: Lanes::for_run(members, options),
        max_instances: options.max_instances,
        entry: batch.entry,
        counter,
        watch: Watch::new(options),
        op_counters,
        steps: 0,
        engine: Engine::new(backend, options.threads),
        faults: Vec::new(),
        arg_slots: Vec::new(),
        member_rows: Vec::new(),
        statics: StaticPool {
            statics: &env.statics,
            idle: vec![Vec::new(); env.statics.len()],
        },
        call_bytes: 0,
        state_bytes: 0,
        peak_state_bytes: 0,
        temp_plans: vec![None; program.functions.len()],
        fuser: Fuser::default(),
        profiler: options.profile.then(|| Profiler::for_program(program)),
        classes: SizeClasses::of(env, members)?,
        split_scratch: SplitScratch::default(),
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
    let Run {
        mut lanes,
        counter,
        steps,
        call_bytes,
        peak_state_bytes,
        profiler,
        mut engine,
        classes,
        fuser,
        ..
    } = run;
    for (m, finished) in returned.finished.iter().enumerate() {
        if *finished && !lanes.has_failed(m as u32) {
            let value = |(c, ty): (&Column, &TensorType)| match &classes {
                Some(classes) if classes.mentions(ty) => classes.value(
                    Values::of(&c.data, m * c.row_len..(m + 1) * c.row_len),
                    ty,
                    m,
                ),
                _ => c.row(m),
            };
            lanes.finish(
                m,
                returned
                    .values
                    .iter()
                    .zip(&entry.results)
                    .map(value)
                    .collect(),
            );
        }
    }
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
    Ok(output)
}

/// What an activation gives back: per row, whether it returned, and one
/// column per (flattened) result, with a row per row of the activation.
struct Returned {
    finished: Vec<bool>,
    values: Vec<Column>,
}

/// A primitive operation of the IR.
#[derive(Clone, Copy)]
struct PrimSite<'p> {
    dst: Option<Var>,
    prim: &'p Prim,
    args: &'p [Var],
    loc: Loc,
    /// In a ragged batch, whether it runs split by size class
    /// ([`TempPlan::split`]).
    split: SplitPlan,
}

/// Whether the index `role` (operation `i` of `block`) is deferred to its
/// products for `rows` ([`crate::batched::indexed`]).
fn defers(
    frame: &Activation<'_>,
    (block, block_id, i): (&BlockData, Block, usize),
    role: IndexedRole,
    rows: &[u32],
) -> bool {
    let IndexedRole::Index { array, index, .. } = role else {
        return false;
    };
    let roles = &frame.plan.indexed[block_id.index()];
    let operands: Vec<(&Prim, Vec<usize>, Option<usize>)> = products_of(roles, i)
        .filter_map(|j| match &block.ops[j] {
            Op::Prim {
                dst, prim, args, ..
            } => Some((
                prim,
                args.iter().map(|a| a.index()).collect(),
                dst.map(|d| d.index()),
            )),
            _ => None,
        })
        .collect();
    let products: Vec<OpView<'_>> = operands
        .iter()
        .map(|(prim, args, dst)| OpView {
            prim,
            args,
            dst: *dst,
        })
        .collect();
    let member = matches!(frame.slots[index], Slot::Member(_));
    let position = frame.plan.is_temp[index] && !frame.temps.dense();
    let row_of = |k: usize, r: u32| match (member, position) {
        (true, _) => frame.members[r as usize] as usize,
        (false, true) => k,
        (false, false) => r as usize,
    };
    deferrable(&frame.slots, (array, index), &products, rows, &row_of)
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

/// A fork operation of the IR.
struct ForkSite<'p> {
    dsts: &'p [Var],
    args: &'p [Var],
    instances: &'p Instances,
    loc: Loc,
}

/// One instance started by a fork: the activation row of its parent, its
/// lane, and its index.
#[derive(Clone, Copy, Debug)]
struct Instance {
    row: u32,
    lane: u32,
    k: u64,
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
    queue: BTreeMap<Block, Vec<u32>>,
    /// Its step temporaries, and their storage in the running step.
    plan: Rc<TempPlan>,
    temps: StepTemps,
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
            Terminator::Jump(target) => self
                .queue
                .entry(*target)
                .or_default()
                .extend_from_slice(rows),
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            } => {
                let mut branch = BranchRows::default();
                branch.partition(&self.slots[cond.index()], rows)?;
                if !branch.then_rows.is_empty() {
                    self.queue
                        .entry(*then_block)
                        .or_default()
                        .extend(branch.then_rows);
                }
                if !branch.else_rows.is_empty() {
                    self.queue
                        .entry(*else_block)
                        .or_default()
                        .extend(branch.else_rows);
                }
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

impl Run<'_> {
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
        let plan = self.temp_plan(fid);
        let mut slots: Vec<Slot> = function
            .vars
            .iter()
            .map(|(v, data)| match plan.is_temp[v.index()] {
                // Stored only while a step runs.
                true => column_slot(&data.ty, self.shared.symbols, 0),
                false => self.new_slot(fid, v, n),
            })
            .collect();
        for (p, slot) in function.params.iter().zip(params) {
            slots[p.index()] = slot;
        }
        let bytes: u64 = slots.iter().map(Slot::bytes).sum();
        self.state_bytes += bytes;
        self.peak_state_bytes = self.peak_state_bytes.max(self.state_bytes);
        let mut frame = Activation {
            fid,
            lanes,
            members: lanes
                .iter()
                .map(|l| self.lanes.member_of(*l) as u32)
                .collect(),
            slots,
            finished: vec![false; n],
            values: function
                .results
                .iter()
                .map(|ty| Column::zeros(ty.elem, concrete_shape(ty, self.shared.symbols), n))
                .collect(),
            loans: Vec::new(),
            queue: BTreeMap::from([(Function::ENTRY, (0..n as u32).collect())]),
            plan,
            temps: StepTemps::default(),
        };
        while let Some((block_id, mut rows)) = frame.queue.pop_first() {
            self.run_block(&mut frame, block_id, &mut rows, depth)?;
        }
        self.state_bytes -= bytes;
        self.statics.take_back(&mut frame.slots, &frame.loans);
        Ok(Returned {
            finished: frame.finished,
            values: frame.values,
        })
    }

    /// Runs block `block_id` of the activation for `rows`: the step check,
    /// its operations, then its terminator sends the rows on.
    fn run_block(
        &mut self,
        frame: &mut Activation<'_>,
        block_id: Block,
        rows: &mut Vec<u32>,
        depth: usize,
    ) -> Result<(), ExecError> {
        let program = self.program;
        let block = &program.functions[frame.fid].blocks[block_id];
        rows.sort_unstable();
        self.watch.tick(self.steps, &self.counter);
        self.steps += 1;
        self.counter.lanes = self.lanes.threads() as u64;
        let lanes = frame.lanes;
        let lane_of = |r: u32| lanes[r as usize] as usize;
        self.lanes.enter_block(rows, lane_of, block.loc);
        if let Some(profiler) = &mut self.profiler {
            let threads = self.lanes.threads();
            profiler.step(frame.fid.index(), block_id.index(), rows.len(), threads);
        }
        frame.temps.begin(rows, frame.lanes.len(), self.lane_mode);
        let plan = frame.plan.clone();
        let mut deferral = Deferral::default();
        let mut fused_until = 0;
        for (i, op) in block.ops.iter().enumerate() {
            if rows.is_empty() {
                break;
            }
            if i < fused_until {
                continue;
            }
            if let Some(site) = &plan.chains[block_id.index()][i] {
                if self.run_chain(frame, block_id, i, site, rows) {
                    fused_until = site.end;
                    continue;
                }
            }
            let counter = self.op_counters[frame.fid.index()][block_id.index()][i];
            match op {
                Op::Prim {
                    dst,
                    prim,
                    args,
                    loc,
                } => {
                    let op = PrimSite {
                        dst: *dst,
                        prim,
                        args,
                        loc: *loc,
                        split: plan.split[block_id.index()][i],
                    };
                    let role = plan.indexed[block_id.index()][i].filter(|_| self.options.fuse);
                    match role {
                        Some(role) if defers(frame, (block, block_id, i), role, rows) => {
                            deferral.defer(i);
                            self.counter.record(counter, rows.len());
                        }
                        Some(role @ IndexedRole::Product { index_op, .. })
                            if deferral.deferred(index_op) =>
                        {
                            self.run_prim(frame, counter, &op, rows, Some(role))
                        }
                        _ => self.run_prim(frame, counter, &op, rows, None),
                    }
                }
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
                    self.call(frame, &call, rows, depth)?
                }
                Op::Fork {
                    dsts,
                    args,
                    instances,
                    loc,
                } => {
                    let site = ForkSite {
                        dsts,
                        args,
                        instances,
                        loc: *loc,
                    };
                    self.fork(frame, &site, rows, depth)?
                }
            }
            // A lane cancelled by an operation's failures leaves at once.
            self.lanes.drop_cancelled(rows, lane_of);
            let dying = &plan.dying[block_id.index()][i];
            frame
                .temps
                .after_op(&mut self.engine, &mut frame.slots, rows, dying);
        }
        let held = self.state_bytes + frame.temps.peak();
        self.peak_state_bytes = self.peak_state_bytes.max(held);
        frame.temps.end(&mut self.engine, &mut frame.slots);
        if rows.is_empty() {
            return Ok(());
        }
        frame.terminate(&block.term, rows)
    }

    /// The fused chain `site`, starting at operation `start` of the block,
    /// for `rows` (see [`crate::batched::fuse`]): false, having written
    /// nothing, when it does not run fused.
    fn run_chain(
        &mut self,
        frame: &mut Activation<'_>,
        block_id: Block,
        start: usize,
        site: &ChainSite,
        rows: &mut Vec<u32>,
    ) -> bool {
        if !self.options.fuse {
            return false;
        }
        let program = self.program;
        let block = &program.functions[frame.fid].blocks[block_id];
        let lanes = frame.lanes;
        let lane_of = |r: u32| lanes[r as usize] as usize;
        for &h in &site.hoisted {
            let Op::Prim {
                dst,
                prim,
                args,
                loc,
            } = &block.ops[h]
            else {
                internal_error("a hoisted operation of a chain that is no primitive");
            };
            // A constant or a static: never split.
            let op = PrimSite {
                dst: *dst,
                prim,
                args,
                loc: *loc,
                split: SplitPlan::default(),
            };
            let counter = self.op_counters[frame.fid.index()][block_id.index()][h];
            self.run_prim(frame, counter, &op, rows, None);
            self.lanes.drop_cancelled(rows, lane_of);
            let dying = &frame.plan.dying[block_id.index()][h];
            frame
                .temps
                .after_op(&mut self.engine, &mut frame.slots, rows, dying);
            if rows.is_empty() {
                return false;
            }
        }
        for op in &site.ops {
            self.statics
                .before_write(&mut frame.slots, &mut frame.loans, op.dst);
        }
        let plan = frame.plan.clone();
        let members = &frame.members;
        let step = FusedStep {
            is_temp: &plan.is_temp,
            env: &self.shared,
            rows,
            total: frame.lanes.len(),
            member_of: &|r| members[r as usize] as usize,
        };
        let ran = self.fuser.run(
            &mut self.engine,
            &mut frame.temps,
            site,
            &mut frame.slots,
            &step,
        );
        if !ran {
            return false;
        }
        for i in (start..site.end).filter(|i| !site.hoisted.contains(i)) {
            let counter = self.op_counters[frame.fid.index()][block_id.index()][i];
            self.counter.record(counter, rows.len());
            self.lanes.drop_cancelled(rows, lane_of);
            let dying = &plan.dying[block_id.index()][i];
            frame
                .temps
                .after_op(&mut self.engine, &mut frame.slots, rows, dying);
        }
        true
    }

    /// A primitive for `rows` (with the item of its deferred index, for an
    /// indexed product); the rows that fault stop (a catching call around
    /// the activation revives them when it returns).
    fn run_prim(
        &mut self,
        frame: &mut Activation<'_>,
        counter: Option<usize>,
        op: &PrimSite<'_>,
        rows: &mut Vec<u32>,
        indexed: Option<IndexedRole>,
    ) {
        let PrimSite {
            dst,
            prim,
            args,
            loc,
            split,
        } = *op;
        if let Some(d) = dst {
            self.statics
                .before_write(&mut frame.slots, &mut frame.loans, d.index());
        }
        if self.load_static(prim, dst, &mut frame.slots, &mut frame.loans) {
            self.counter.record(counter, rows.len());
            return;
        }
        let mut arg_slots = std::mem::take(&mut self.arg_slots);
        arg_slots.clear();
        arg_slots.extend(args.iter().map(|a| a.index()));
        let indexed = indexed.and_then(|role| role.product_operands(&arg_slots));
        if let Some((pair, _)) = &indexed {
            arg_slots.clear();
            arg_slots.extend_from_slice(pair);
        }
        let mut member_rows = std::mem::take(&mut self.member_rows);
        member_rows.clear();
        // A static adjoint is logged as its member's.
        let members_read = arg_slots
            .iter()
            .any(|a| matches!(frame.slots[*a], Slot::Member(_)));
        if members_read || matches!(prim, Prim::StaticAdjoint(_)) {
            member_rows.extend(rows.iter().map(|r| frame.members[*r as usize]));
        }
        let exec = PrimExecution {
            prim,
            args: &arg_slots,
            dst: dst.map(|d| d.index()),
            rows,
            member_rows: &member_rows,
            total_rows: frame.lanes.len(),
            mode: self.lane_mode,
            indexed: indexed.map(|(_, operand)| operand),
        };
        let mut faults = std::mem::take(&mut self.faults);
        faults.clear();
        let lanes = frame.lanes;
        let lane_of = |r: u32| lanes[r as usize] as usize;
        let is_temp = &frame.plan.is_temp;
        match &self.classes {
            Some(classes) if split.split => {
                let function = &self.program.functions[frame.fid];
                let types = var_types(function, args, dst);
                let members = &frame.members;
                let split = Split {
                    classes,
                    exec: &exec,
                    types: &types,
                    statics: self.shared.statics,
                    hosts: self.shared.hosts,
                    member_of: &|r| members[r as usize] as usize,
                    rng_of: &lane_of,
                    plan: split,
                };
                run_split(
                    &mut self.engine,
                    &split,
                    &mut frame.slots,
                    &mut self.lanes.rngs,
                    &mut self.split_scratch,
                    &mut faults,
                );
            }
            _ => {
                frame
                    .temps
                    .prepare(&mut self.engine, &mut frame.slots, is_temp, exec.dst);
                frame.temps.run_prim(
                    &mut self.engine,
                    &exec,
                    &mut frame.slots,
                    is_temp,
                    &self.shared,
                    &mut self.lanes.rngs,
                    &lane_of,
                    &mut faults,
                );
            }
        }
        self.counter.record(counter, rows.len());
        // A fault inside a catching call is caught when the call returns,
        // not here.
        self.lanes
            .retire_faults(rows, &mut faults, loc, lane_of, |_, error| Err(error));
        self.faults = faults;
        self.arg_slots = arg_slots;
        self.member_rows = member_rows;
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
        if depth + 1 > self.options.max_stack_depth {
            if call.catch {
                // The call itself overflows: caught like a fault inside it.
                set_flags(&mut frame.slots[call.dsts[0].index()], rows, &[]);
                for d in &call.dsts[1..] {
                    zero_rows(&mut frame.slots[d.index()], rows);
                }
                return Ok(());
            }
            for r in rows.iter() {
                let error = stack_overflow(self.options.max_stack_depth, call.loc);
                self.lanes.fail(frame.lane_of(*r), error);
            }
            rows.clear();
            return Ok(());
        }
        let child_lanes: Vec<u32> = rows.iter().map(|r| frame.lanes[*r as usize]).collect();
        let child_params = self.pass_args(frame, call, rows);
        self.call_bytes += child_params.iter().map(Slot::bytes).sum::<u64>();
        if call.catch {
            for lane in &child_lanes {
                self.lanes.enter_catch(*lane);
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
                if self.lanes.leave_catch(lane) {
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

    /// A fork for `rows`: every row draws its fork's key and opens a join
    /// (or overflows the stack); the instances of all rows run in chunks
    /// ([`Run::run_chunk`]); then each row goes on with its member's steps,
    /// or stops with its first instance's error.
    fn fork(
        &mut self,
        frame: &mut Activation<'_>,
        site: &ForkSite<'_>,
        rows: &mut Vec<u32>,
        depth: usize,
    ) -> Result<(), ExecError> {
        let max_depth = self.options.max_stack_depth;
        let mut joins: Vec<(u32, ForkId)> = Vec::new();
        let mut stopped: Vec<u32> = Vec::new();
        for &r in rows.iter() {
            let lane = frame.lane_of(r);
            if self.lanes.is_cancelled(lane) {
                // Cancelled by an overflow just above; it leaves after the operation.
                continue;
            }
            let total = match site.instances {
                Instances::Join(calls) => calls.len(),
                Instances::Map { count, .. } => {
                    dim_length(self.symbols_of(frame.members[r as usize]), *count)
                }
            } as u64;
            let key = self.lanes.fork_key(lane);
            if total > 0 && depth >= max_depth {
                self.lanes.fail(
                    lane,
                    stack_overflow(max_depth, site.instances.overflow_loc(site.loc)),
                );
                stopped.push(r);
            } else if total > 0 {
                joins.push((r, self.lanes.open_fork(lane, key, total, depth, 0)));
            }
        }
        if !joins.is_empty() {
            for d in site.dsts {
                self.statics
                    .before_write(&mut frame.slots, &mut frame.loans, d.index());
            }
            let calls = fork_calls(self.program, site.dsts, site.args, site.instances);
            let map = matches!(site.instances, Instances::Map { .. });
            while self.run_chunk(frame, &calls, map, &joins, depth)? {}
            // Every join is closed before any parent fails: a failure
            // cancels the parent's later siblings, which may be rows here.
            let resolved: Vec<(u32, u32, Resolution)> = joins
                .iter()
                .map(|&(r, fork)| {
                    let (join, resolution) = self.lanes.close_fork(fork);
                    (r, join.parent, resolution)
                })
                .collect();
            for (r, parent, resolution) in resolved {
                match resolution {
                    Resolution::Returned { steps } => self.lanes.set_steps(parent, steps),
                    Resolution::Failed { steps, error } => {
                        self.lanes.set_steps(parent, steps);
                        self.lanes.fail(parent, error);
                        stopped.push(r);
                    }
                    Resolution::StepLimit => {
                        let error = step_limit(self.options.max_steps, site.loc);
                        self.lanes.fail(parent, error);
                        stopped.push(r);
                    }
                }
            }
            self.lanes.clear_resolved();
        }
        stopped.sort_unstable();
        rows.retain(|r| stopped.binary_search(r).is_err());
        Ok(())
    }

    /// Starts the next chunk of the joins' instances (as many as the budget
    /// of `--max-instances` allows, at least one) and runs them: one child
    /// activation per callee, whose returned rows write their results into
    /// their parents' destinations. False when no instance was left to
    /// start.
    fn run_chunk(
        &mut self,
        frame: &mut Activation<'_>,
        calls: &[InstanceCall<'_>],
        map: bool,
        joins: &[(u32, ForkId)],
        depth: usize,
    ) -> Result<bool, ExecError> {
        let budget = self
            .max_instances()
            .saturating_sub(self.lanes.live_instances())
            .max(1);
        let mut chunk: Vec<Instance> = Vec::new();
        for &(row, fork) in joins {
            while chunk.len() < budget {
                let Some((lane, k)) = self.lanes.start_instance(fork) else {
                    break;
                };
                chunk.push(Instance { row, lane, k });
            }
        }
        if chunk.is_empty() {
            return Ok(false);
        }
        let call_of = |k: u64| &calls[if map { 0 } else { k as usize }];
        let mut callees: Vec<FuncId> = Vec::new();
        for call in calls {
            if !callees.contains(&call.callee) {
                callees.push(call.callee);
            }
        }
        for callee in callees {
            // An instance cancelled by an earlier group's fault does not start.
            let group: Vec<Instance> = chunk
                .iter()
                .filter(|i| call_of(i.k).callee == callee && !self.lanes.is_cancelled(i.lane))
                .copied()
                .collect();
            if group.is_empty() {
                continue;
            }
            let params = self.instance_params(frame, callee, &group, &call_of);
            self.call_bytes += params.iter().map(Slot::bytes).sum::<u64>();
            let lanes: Vec<u32> = group.iter().map(|i| i.lane).collect();
            self.statics.take_back(&mut frame.slots, &frame.loans);
            let returned = self.activation(callee, &lanes, params, depth + 1)?;
            self.statics.lend_again(&mut frame.slots, &frame.loans);
            self.instance_results(frame, &group, returned, map, &call_of);
        }
        for instance in &chunk {
            self.lanes.free(instance.lane);
        }
        self.lanes.clear_released();
        Ok(true)
    }

    /// The lengths of the symbolic dimensions member `member` sees (its
    /// own, in a ragged batch).
    fn symbols_of(&self, member: u32) -> &[u64] {
        match &self.classes {
            Some(classes) => classes.symbols_of(member as usize),
            None => self.shared.symbols,
        }
    }

    /// The elements of member `member`'s value of type `ty` (fewer than a
    /// padded row of the longest member holds, for a ragged value).
    fn own_len(&self, ty: &TensorType, member: u32) -> usize {
        ty.dims
            .iter()
            .map(|d| dim_length(self.symbols_of(member), *d))
            .product()
    }

    /// The step temporaries of function `fid` (computed at its first
    /// activation).
    fn temp_plan(&mut self, fid: FuncId) -> Rc<TempPlan> {
        let plan = &mut self.temp_plans[fid.index()];
        plan.get_or_insert_with(|| {
            Rc::new(TempPlan::new(
                fid,
                &self.program.functions[fid],
                self.invariance,
                self.classes.as_ref(),
            ))
        })
        .clone()
    }

    /// `--max-instances`, or by default as many instances as a quarter of
    /// the available memory holds (computed once, at the first fork:
    /// reading the available memory costs more than a small run).
    fn max_instances(&mut self) -> usize {
        if let Some(max) = self.max_instances {
            return max;
        }
        let bytes = lane_bytes(
            self.program,
            self.invariance,
            self.entry,
            self.shared.symbols,
        );
        let max = default_max_instances(bytes);
        self.max_instances = Some(max);
        max
    }

    /// The parameter slots of `callee`'s activation for `group`: row `i`
    /// gets what instance `group[i]` passes (from its parent's row).
    fn instance_params<'c>(
        &self,
        frame: &Activation<'_>,
        callee: FuncId,
        group: &[Instance],
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) -> Vec<Slot> {
        let function = &self.program.functions[callee];
        let mut params = Vec::with_capacity(function.params.len());
        for (position, p) in function.params.iter().enumerate() {
            if let Some(member) =
                self.shared_member_arg(frame, callee, *p, position, group, call_of)
            {
                params.push(member);
                continue;
            }
            if self.invariance.is_invariant(callee, *p) {
                params.push(self.shared_invariant_arg(frame, position, group, call_of));
                continue;
            }
            let ty = &function.vars[*p].ty;
            let shape = concrete_shape(ty, self.shared.symbols);
            let mut column = Column::zeros(ty.elem, shape, group.len());
            for (i, instance) in group.iter().enumerate() {
                let parent = instance.row as usize;
                let len = self.own_len(ty, frame.members[parent]);
                let index = Scalar::I64(instance.k as i64);
                // A member slot's row is the parent's member.
                let row = |v: Var| match frame.slots[v.index()] {
                    Slot::Member(_) => frame.members[parent] as usize,
                    _ => parent,
                };
                let values = match call_of(instance.k).args[position] {
                    InstanceArg::Whole(v) => frame.slots[v.index()].values(row(v), 0, len),
                    InstanceArg::Element(v) => {
                        frame.slots[v.index()].values(row(v), instance.k as usize * len, len)
                    }
                    InstanceArg::Index => Values::scalar(&index),
                };
                column.write(i, 0, values);
            }
            params.push(Slot::Column(column));
        }
        params
    }

    /// For an invariant parameter (at `position`): the value every instance
    /// passes (the same shared value at every site, by
    /// `autobatch_passes::views`), shared.
    fn shared_invariant_arg<'c>(
        &self,
        frame: &Activation<'_>,
        position: usize,
        group: &[Instance],
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) -> Slot {
        let first = group
            .first()
            .unwrap_or_else(|| internal_error("an activation of no instances"));
        match call_of(first.k).args[position] {
            InstanceArg::Whole(v) => match &frame.slots[v.index()] {
                Slot::Invariant(Some(value)) => Slot::Invariant(Some(value.clone())),
                _ => internal_error("a per-member argument of an invariant parameter"),
            },
            _ => internal_error("an element or index for an invariant parameter"),
        }
    }

    /// For a member-uniform parameter `p` (at `position`) of `callee` to
    /// which every instance of `group` passes, whole, one and the same
    /// member slot: that slot, shared.
    fn shared_member_arg<'c>(
        &self,
        frame: &Activation<'_>,
        callee: FuncId,
        p: Var,
        position: usize,
        group: &[Instance],
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) -> Option<Slot> {
        self.invariance.member_root(callee, p)?;
        let member_of = |instance: &Instance| match call_of(instance.k).args[position] {
            InstanceArg::Whole(v) => match &frame.slots[v.index()] {
                Slot::Member(c) => Some(c),
                _ => None,
            },
            _ => None,
        };
        let first = member_of(group.first()?)?;
        group
            .iter()
            .all(|i| member_of(i).is_some_and(|c| std::sync::Arc::ptr_eq(c, first)))
            .then(|| Slot::Member(first.clone()))
    }

    /// The instances of `group` that returned give their results to their
    /// parents' destinations (element `k` of each for a `map`), and their
    /// joins learn of it.
    fn instance_results<'c>(
        &mut self,
        frame: &mut Activation<'_>,
        group: &[Instance],
        returned: Returned,
        map: bool,
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) {
        for (i, instance) in group.iter().enumerate() {
            if !returned.finished[i] || !self.lanes.is_running(instance.lane) {
                continue;
            }
            let member = frame.members[instance.row as usize];
            let function = &self.program.functions[frame.fid];
            for (dst, value) in call_of(instance.k).dsts.iter().zip(&returned.values) {
                // A `map`'s destination holds one result per instance.
                let item = TensorType {
                    elem: value.data.ty(),
                    dims: function.vars[*dst].ty.dims[usize::from(map)..].to_vec(),
                };
                let len = self.own_len(&item, member);
                let Slot::Column(column) = &mut frame.slots[dst.index()] else {
                    internal_error("a fork's destination is invariant");
                };
                let offset = if map { instance.k as usize * len } else { 0 };
                let start = i * value.row_len;
                let values = Values::of(&value.data, start..start + len);
                column.write(instance.row as usize, offset, values);
            }
            self.lanes.instance_returned(instance.lane);
        }
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
                    let mut column =
                        Column::zeros(ty.elem, concrete_shape(ty, self.shared.symbols), rows.len());
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
                self.shared.symbols,
                rows,
            )
        }
    }

    /// Runs `dst = load_static` by lending the static to the invariant slot
    /// `dst`; false (nothing done) for any other operation.
    fn load_static(
        &mut self,
        prim: &Prim,
        dst: Option<autobatch_ir::Var>,
        slots: &mut [Slot],
        loans: &mut Vec<Loan>,
    ) -> bool {
        let (Prim::LoadStatic(id), Some(dst)) = (prim, dst) else {
            return false;
        };
        let slot = dst.index();
        if !matches!(slots[slot], Slot::Invariant(_)) {
            return false;
        }
        let id = id.0 as usize;
        let Some(copy) = self.statics.lend(id) else {
            return false;
        };
        slots[slot] = Slot::Invariant(Some(copy));
        loans.push(Loan { slot, id });
        true
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

/// The types of a primitive's operands, then of its result (if any).
fn operand_types<'f>(function: &'f Function, op: &Op) -> Vec<&'f TensorType> {
    match op {
        Op::Prim { args, dst, .. } => var_types(function, args, *dst),
        _ => Vec::new(),
    }
}

/// The types of `args`, then of `dst` (if any).
fn var_types<'f>(function: &'f Function, args: &[Var], dst: Option<Var>) -> Vec<&'f TensorType> {
    args.iter()
        .chain(&dst)
        .map(|v| &function.vars[*v].ty)
        .collect()
}
