//! Program-counter autobatching (seed 000, Algorithm 2).
//!
//! The program is the flat, explicit-stack form of `autobatch_passes::stack`.
//! Every member has a program counter and a stack of return addresses; every
//! full variable has a per-member stack whose top is the variable itself.
//! At each step the executor picks one block ([`BlockChoice`]), runs it for
//! every member waiting there, whatever its recursion depth, and moves each
//! member to its next block. There is no host recursion, so the depth of a
//! member's recursion is bounded only by `--max-stack-depth`, and each
//! member's stacks grow on demand.
//!
//! Members waiting at each block are kept in per-block lists, so choosing
//! the next block and its active set costs nothing per idle member.
//!
//! **Instances.** A row of storage is a *lane* ([`crate::batched::lanes`]):
//! rows `0..members` are the members' own lanes, and each instance of a
//! fork (`join`, `map`, `pfor`) is a lane of its own, with its own program
//! counter, return stack, catch frames and variable stacks. At a fork the
//! lane draws the fork's key and waits (in no block's queue); its instances
//! get lanes (freed lanes are reused; when none is free, the columns and
//! stacks of the functions instances may run grow, the others keep a row
//! per member), their parameters are copied from the parent's row, and
//! they start at the callee's entry, running with every other lane that
//! reaches the same block, whatever its member or depth. An instance that
//! returns copies its results into the parent's destinations (element `k`
//! of each for a `map`) and frees its lane; the join resolves in instance
//! order ([`Lanes`]) and the last instance to end moves the parent to the
//! fork's continuation (or unwinds it with the first instance's error).
//! At most `--max-instances` instance lanes are alive at once: the others
//! start as lanes free up, oldest fork first, and a fork with none running
//! gets one whatever the budget.
//!
//! [`ProgramCounter`] registers it as the `program-counter` strategy. What
//! it shares with local-static (per-member outcomes and the step limit,
//! fault retirement, argument binding, the branch split) is
//! [`crate::batched::skeleton`]; a fault inside a catching call is unwound
//! where it happens, through the `unwind` hook of fault retirement.
//!
//! A ragged batch runs as one batch: padded rows, and the operations that
//! mention a ragged dimension run split by size class
//! ([`crate::batched::classes`]).

use std::collections::BTreeSet;
use std::time::Instant;

use autobatch_ir::{EntityRef, Loc, Prim, Program};
use autobatch_kernels::buffer::Values;
use autobatch_kernels::{dim_length, Fault};
use autobatch_passes::stack::{
    lower_to_stack, verify_lowered, GlobalVar, LoweredArg, LoweredBlock, LoweredFork,
    LoweredFunction, LoweredOp, LoweredProgram, LoweredTerm, PcBlock, VarClass,
};
use autobatch_types::{MemberError, Scalar, TensorType};

use autobatch_kernels::Backend;

use crate::batched::classes::{run_split, SizeClasses, Split, SplitPlan, SplitScratch};
use crate::batched::engine::{Engine, LaneMode, PrimExecution, SharedEnv};
use crate::batched::fuse::{find_chains, ChainSite, FusedStep, Fuser, OpView};
use crate::batched::indexed::{
    deferrable, find_indexed_products, products_of, Deferral, IndexedRole,
};
use crate::batched::lanes::{ForkId, Lanes, Resolution};
use crate::batched::skeleton::{bind_arg, invariance, no_room_for_entry, BranchRows};
use crate::batched::storage::{copy_value, Column, Place, Slot, ValueStack};
use crate::batched::temps::{deaths, in_place_set, StepTemps};
use crate::batched::{
    column_slot, concrete_shape, default_max_instances, stack_overflow, step_limit, value_bytes,
    BlockChoice, OpCounter, Watch, MEMBER_OVERHEAD_BYTES,
};
use crate::internal::internal_error;
use crate::profile::Profiler;
use crate::{Batch, BatchingOptions, Env, ExecError, Executor, OptionsRead, RunOptions, RunOutput};

/// The program-counter executor in the registry ([`crate::EXECUTORS`]).
pub struct ProgramCounter;

impl Executor for ProgramCounter {
    fn name(&self) -> &'static str {
        "program-counter"
    }

    fn description(&self) -> &'static str {
        "batches the members at a block, whatever their call depth"
    }

    fn reads(&self) -> OptionsRead {
        OptionsRead {
            lanes: true,
            block_choice: true,
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

    /// Lowers `program` to the explicit-stack form, verifies it, and runs it.
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
        let lowered = lower_to_stack(program, &invariance);
        verify_lowered(&lowered).map_err(|errors| {
            let listed: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            ExecError::Internal(format!(
                "the explicit-stack form is invalid: {}",
                listed.join("; ")
            ))
        })?;
        run(backend, program, &lowered, env, batch, options, batching)
    }
}

/// Runs `batch` on `lowered` (the explicit-stack form of `program`),
/// computing on `backend`. Fails before running only when the members'
/// state cannot fit in memory.
pub fn run(
    backend: &dyn Backend,
    program: &Program,
    lowered: &LoweredProgram,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
    batching: &BatchingOptions,
) -> Result<RunOutput, ExecError> {
    crate::batched::check_lowered_memory(program, lowered, batch.entry, &env.symbols, batch.size)
        .map_err(ExecError::Resources)?;
    let started = Instant::now();
    let mut machine = Machine::new(backend, lowered, env, batch, options, batching.lanes)?;
    machine.max_instances = options.max_instances;
    machine.profiler = options.profile.then(|| Profiler::for_program(program));
    let mut watch = Watch::new(options);
    let mut rows: Vec<u32> = Vec::new();
    while let Some(pc) = machine.waiting.choose(batching.block_choice) {
        watch.tick(machine.steps, &machine.counter);
        machine.waiting.take(pc, &mut rows);
        machine.step(pc, &mut rows)?;
        machine.settle();
    }
    if machine.lanes.forks_open() {
        internal_error("the run ended with a fork still open");
    }
    let Machine {
        lanes,
        counter,
        steps,
        call_bytes,
        peak_state_bytes,
        profiler,
        mut engine,
        fuser,
        ..
    } = machine;
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

/// The state of a program-counter run.
struct Machine<'a> {
    lowered: &'a LoweredProgram,
    entry: &'a LoweredFunction,
    options: &'a RunOptions,
    lane_mode: LaneMode,
    /// The batch size: lanes `0..members` are the members'.
    members: usize,
    /// The rows of the columns and stacks of the functions instances may
    /// run (`grows`): at least one per lane. The others have a row per
    /// member only.
    capacity: usize,
    /// Per function, whether an instance may run it (a fork's callee
    /// reaches it).
    grows: Vec<bool>,
    shared: SharedEnv<'a>,
    engine: Engine<'a>,
    /// One slot per variable of the explicit-stack form, a row per lane.
    slots: Vec<Slot>,
    /// The per-lane stacks of the full variables.
    stacks: Vec<Option<ValueStack>>,
    /// Per block, per operation: what the engine needs of a primitive.
    ops: Vec<Vec<PrimSlots>>,
    /// Per variable, whether it is a step temporary ([`crate::batched::temps`]).
    is_temp: Vec<bool>,
    /// The storage of the running step's temporaries.
    temps: StepTemps,
    /// Per block, the fused chains starting at each operation (none when
    /// the run does not fuse).
    chains: Vec<Vec<Option<ChainSite>>>,
    fuser: Fuser,
    /// Per block, the indexed products (`matvec(W[l], h)`, none when the
    /// run does not fuse) and the indices deferred in the running step
    /// ([`crate::batched::indexed`]).
    indexed: Vec<Vec<Option<IndexedRole>>>,
    deferral: Deferral,
    lanes: Lanes,
    /// The most instance lanes alive at once (`--max-instances`); the
    /// default is computed at the first fork ([`Machine::max_instances`]).
    max_instances: Option<usize>,
    /// Per lane, the blocks its pending calls return to.
    return_stacks: Vec<Vec<PcBlock>>,
    /// Per lane, the stack depth below its first activation: 0 for a
    /// member, its parent's depth at the fork for an instance.
    depth_base: Vec<usize>,
    catch_plan: CatchPlan,
    /// Per lane, the catching calls it is inside, innermost last.
    catches: Vec<Vec<CatchFrame>>,
    waiting: Waiting,
    counter: OpCounter,
    steps: u64,
    /// Reused buffers: the faults of one operation, a branch's or a call's
    /// split.
    faults: Vec<(u32, Fault)>,
    branch: BranchRows,
    /// Reused buffer: the member of each active lane of an operation that
    /// reads a member-uniform parameter.
    member_rows: Vec<u32>,
    /// Bytes copied to make calls and forks ([`crate::Stats::call_bytes`]).
    call_bytes: u64,
    /// The bytes of the columns, and the most of those and the value
    /// stacks together.
    column_bytes: u64,
    peak_state_bytes: u64,
    /// Records the run's profile, when asked ([`RunOptions::profile`]).
    profiler: Option<Profiler>,
    /// For a ragged batch, its members' size classes; the operations that
    /// mention a ragged dimension run split by them
    /// ([`crate::batched::classes`]).
    classes: Option<SizeClasses>,
    split_scratch: SplitScratch,
}

/// A primitive operation as the engine runs it: its operand and result
/// slots, and its counter.
struct PrimSlots {
    args: Vec<usize>,
    dst: Option<usize>,
    counter: Option<usize>,
    /// Whether an operand is a member-uniform parameter.
    reads_member: bool,
    /// For an argument copy into a callee's parameter, the bytes of one value.
    arg_bytes: Option<u64>,
    /// Whether that parameter is invariant (copied once, not per row).
    shared_arg: bool,
    /// The step temporaries this operation mentions last.
    dying: Vec<usize>,
    /// In a ragged batch, whether it runs split by size class
    /// ([`SizeClasses::plan`]).
    split: SplitPlan,
}

/// The members waiting at each block, and the blocks some member waits at.
struct Waiting {
    at: Vec<Vec<u32>>,
    nonempty: BTreeSet<u32>,
}

impl Waiting {
    /// Sends the members `rows` (as rows: program-counter's rows are its
    /// members) to block `pc`.
    fn push(&mut self, pc: PcBlock, rows: &[u32]) {
        if !rows.is_empty() {
            let queue = &mut self.at[pc.index()];
            if queue.is_empty() {
                self.nonempty.insert(pc.0);
            }
            queue.extend_from_slice(rows);
        }
    }

    /// The block to run next.
    fn choose(&self, choice: BlockChoice) -> Option<PcBlock> {
        let pc = match choice {
            BlockChoice::SmallestIndex => self.nonempty.first().copied(),
            BlockChoice::MostMembers => {
                let mut best: Option<(usize, u32)> = None;
                for pc in &self.nonempty {
                    let n = self.at[*pc as usize].len();
                    if best.is_none_or(|(m, _)| n > m) {
                        best = Some((n, *pc));
                    }
                }
                best.map(|(_, pc)| pc)
            }
        };
        pc.map(PcBlock)
    }

    /// Moves the members waiting at `pc` into `rows`, sorted.
    fn take(&mut self, pc: PcBlock, rows: &mut Vec<u32>) {
        self.nonempty.remove(&pc.0);
        rows.clear();
        std::mem::swap(rows, &mut self.at[pc.index()]);
        rows.sort_unstable();
    }
}

impl<'a> Machine<'a> {
    /// Every member at the entry block, its arguments bound.
    fn new(
        backend: &'a dyn Backend,
        lowered: &'a LoweredProgram,
        env: &'a Env,
        batch: &Batch,
        options: &'a RunOptions,
        lane_mode: LaneMode,
    ) -> Result<Machine<'a>, ExecError> {
        let members = batch.size;
        let classes = SizeClasses::of(env, members)?;
        let plans = split_plans(lowered, classes.as_ref());
        let mut is_temp = step_temporaries(lowered);
        keep_split_operands(lowered, &plans, &mut is_temp);
        let (slots, stacks) = storage(lowered, &env.symbols, members, &is_temp);
        let mut counter = OpCounter::default();
        let mut ops = prim_slots(lowered, &env.symbols, &mut counter, &is_temp, &plans);
        let indexed = if options.fuse {
            block_indexed_products(lowered, &mut ops, &is_temp)
        } else {
            Vec::new()
        };
        let entry = &lowered.functions[batch.entry];
        let mut waiting = Waiting {
            at: vec![Vec::new(); lowered.blocks.len()],
            nonempty: BTreeSet::new(),
        };
        waiting.push(entry.entry, &(0..members as u32).collect::<Vec<_>>());
        let mut engine = Engine::new(backend, options.threads);
        engine.remember_statics();
        counter.lanes = members as u64;
        let mut machine = Machine {
            lowered,
            entry,
            options,
            lanes: Lanes::for_run(members, options),
            lane_mode,
            members,
            capacity: members,
            grows: instance_functions(lowered),
            shared: SharedEnv {
                statics: &env.statics,
                symbols: &env.symbols,
                hosts: &env.hosts,
            },
            engine,
            slots,
            stacks,
            chains: if options.fuse {
                block_chains(lowered, &ops, &is_temp)
            } else {
                Vec::new()
            },
            indexed,
            deferral: Deferral::default(),
            ops,
            is_temp,
            temps: StepTemps::default(),
            fuser: Fuser::default(),
            max_instances: None,
            return_stacks: vec![Vec::new(); members],
            depth_base: vec![0; members],
            catch_plan: CatchPlan::new(lowered),
            catches: vec![Vec::new(); members],
            waiting,
            counter,
            steps: 0,
            faults: Vec::new(),
            branch: BranchRows::default(),
            member_rows: Vec::new(),
            call_bytes: 0,
            column_bytes: 0,
            peak_state_bytes: 0,
            profiler: None,
            classes,
            split_scratch: SplitScratch::default(),
        };
        for (param, arg) in entry.params.iter().zip(&batch.args) {
            bind_arg(&mut machine.slots[param.index()], arg, members)?;
        }
        share_member_slots(lowered, entry, &mut machine.slots);
        machine.column_bytes = machine.slots.iter().map(Slot::bytes).sum();
        machine.peak_state_bytes = machine.column_bytes;
        Ok(machine)
    }

    /// Runs block `pc` for the members `rows`: the step check, its
    /// operations, then its terminator sends them on.
    fn step(&mut self, pc: PcBlock, rows: &mut Vec<u32>) -> Result<(), ExecError> {
        let lowered = self.lowered;
        let block = &lowered.blocks[pc];
        self.steps += 1;
        self.counter.lanes = self.lanes.threads() as u64;
        if block.counts_step {
            self.lanes.enter_block(rows, |r| r as usize, block.loc);
        } else {
            self.lanes.drop_cancelled(rows, |r| r as usize);
        }
        if let Some(profiler) = &mut self.profiler {
            let threads = self.lanes.threads();
            profiler.step(
                block.func.index(),
                block.origin.index(),
                rows.len(),
                threads,
            );
        }
        let total = self.total_rows(pc);
        self.temps.begin(rows, total, self.lane_mode);
        self.deferral.begin();
        let mut fused_until = 0;
        for (i, op) in block.ops.iter().enumerate() {
            if rows.is_empty() {
                break;
            }
            if i < fused_until {
                continue;
            }
            if let Some(end) = self.run_chain(pc, i, rows) {
                fused_until = end;
                continue;
            }
            match op {
                LoweredOp::Prim { prim, loc, .. } => {
                    match self.indexed_role(pc, i) {
                        Some(role) if self.defers(pc, i, role, rows) => {
                            self.deferral.defer(i);
                            self.counter
                                .record(self.ops[pc.index()][i].counter, rows.len());
                        }
                        Some(role @ IndexedRole::Product { index_op, .. })
                            if self.deferral.deferred(index_op) =>
                        {
                            self.run_prim(pc, i, prim, *loc, rows, Some(role))
                        }
                        _ => self.run_prim(pc, i, prim, *loc, rows, None),
                    }
                    let dying = &self.ops[pc.index()][i].dying;
                    self.temps
                        .after_op(&mut self.engine, &mut self.slots, rows, dying);
                }
                LoweredOp::Push(x) => {
                    self.with_stack(*x, rows.len(), |column, stack| {
                        stack.push_rows(rows, column)
                    });
                    self.note_state_bytes();
                }
                LoweredOp::Pop(x) => self.with_stack(*x, rows.len(), |column, stack| {
                    stack.restore_rows(rows, column, true)
                }),
                LoweredOp::Peek(x) => self.with_stack(*x, rows.len(), |column, stack| {
                    stack.restore_rows(rows, column, false)
                }),
            }
        }
        if self.temps.peak() > 0 {
            self.note_state_bytes();
        }
        self.temps.end(&mut self.engine, &mut self.slots);
        if rows.is_empty() {
            return Ok(());
        }
        match &block.term {
            LoweredTerm::Fork(fork) => self.fork(pc, rows, fork),
            LoweredTerm::Jump(target) => self.waiting.push(*target, rows),
            LoweredTerm::Branch {
                cond,
                then_block,
                else_block,
            } => {
                self.branch.partition(&self.slots[cond.index()], rows)?;
                self.waiting.push(*then_block, &self.branch.then_rows);
                self.waiting.push(*else_block, &self.branch.else_rows);
            }
            LoweredTerm::PushJump {
                target,
                return_to,
                recover,
                loc,
                ..
            } => self.call(pc, rows, *target, *return_to, *recover, *loc),
            LoweredTerm::Return => self.ret(rows),
        }
        Ok(())
    }

    /// The fused chain starting at operation `start` of block `pc`, if
    /// there is one, for `rows` (see [`crate::batched::fuse`]): the index
    /// of the operation after it, or `None` having written nothing when it
    /// does not run fused.
    fn run_chain(&mut self, pc: PcBlock, start: usize, rows: &mut Vec<u32>) -> Option<usize> {
        let chains = std::mem::take(&mut self.chains);
        let end = self.run_chain_of(&chains, pc, start, rows);
        self.chains = chains;
        end
    }

    fn run_chain_of(
        &mut self,
        chains: &[Vec<Option<ChainSite>>],
        pc: PcBlock,
        start: usize,
        rows: &mut Vec<u32>,
    ) -> Option<usize> {
        let site = chains.get(pc.index())?.get(start)?.as_ref()?;
        let lowered = self.lowered;
        for &h in &site.hoisted {
            let LoweredOp::Prim { prim, loc, .. } = &lowered.blocks[pc].ops[h] else {
                internal_error("a hoisted operation of a chain that is no primitive");
            };
            self.run_prim(pc, h, prim, *loc, rows, None);
            let dying = &self.ops[pc.index()][h].dying;
            self.temps
                .after_op(&mut self.engine, &mut self.slots, rows, dying);
            if rows.is_empty() {
                return None;
            }
        }
        let lanes = &self.lanes;
        let step = FusedStep {
            is_temp: &self.is_temp,
            env: &self.shared,
            rows,
            total: self.total_rows(pc),
            member_of: &|r| lanes.member_of(r),
        };
        let ran = self.fuser.run(
            &mut self.engine,
            &mut self.temps,
            site,
            &mut self.slots,
            &step,
        );
        if !ran {
            return None;
        }
        for i in (start..site.end).filter(|i| !site.hoisted.contains(i)) {
            let op = &self.ops[pc.index()][i];
            self.counter.record(op.counter, rows.len());
            self.temps
                .after_op(&mut self.engine, &mut self.slots, rows, &op.dying);
        }
        Some(site.end)
    }

    /// The role of operation `i` of block `pc` in an indexed product.
    fn indexed_role(&self, pc: PcBlock, i: usize) -> Option<IndexedRole> {
        *self.indexed.get(pc.index())?.get(i)?
    }

    /// Whether the index `role` (operation `i` of block `pc`) is deferred
    /// to its products for `rows`.
    fn defers(&self, pc: PcBlock, i: usize, role: IndexedRole, rows: &[u32]) -> bool {
        let IndexedRole::Index { array, index, .. } = role else {
            return false;
        };
        let block = &self.lowered.blocks[pc];
        let products: Vec<OpView<'_>> = products_of(&self.indexed[pc.index()], i)
            .filter_map(|j| {
                let LoweredOp::Prim { prim, .. } = &block.ops[j] else {
                    return None;
                };
                let slots = &self.ops[pc.index()][j];
                Some(OpView {
                    prim,
                    args: &slots.args,
                    dst: slots.dst,
                })
            })
            .collect();
        let lanes = &self.lanes;
        let member = matches!(self.slots[index], Slot::Member(_));
        let position = self.is_temp[index] && !self.temps.dense();
        let row_of = |k: usize, r: u32| match (member, position) {
            (true, _) => lanes.member_of(r),
            (false, true) => k,
            (false, false) => r as usize,
        };
        deferrable(&self.slots, (array, index), &products, rows, &row_of)
    }

    /// Operation `i` of block `pc`, a primitive, for `rows` (with the item
    /// of its deferred index, for an indexed product); the rows that fault
    /// leave `rows` (to a catching call's recovery block, or stopped).
    fn run_prim(
        &mut self,
        pc: PcBlock,
        i: usize,
        prim: &Prim,
        loc: Loc,
        rows: &mut Vec<u32>,
        indexed: Option<IndexedRole>,
    ) {
        let op = &self.ops[pc.index()][i];
        let indexed = indexed.and_then(|role| role.product_operands(&op.args));
        let slots = &self.slots;
        let reads_member = match &indexed {
            Some((args, _)) => args.iter().any(|a| matches!(slots[*a], Slot::Member(_))),
            None => op.reads_member,
        };
        self.member_rows.clear();
        if reads_member {
            let lanes = &self.lanes;
            self.member_rows
                .extend(rows.iter().map(|r| lanes.member_of(*r) as u32));
        }
        if let Some(bytes) = op.arg_bytes {
            // An invariant parameter is one value for all rows.
            let copies = if op.shared_arg { 1 } else { rows.len() as u64 };
            self.call_bytes += bytes * copies;
        }
        let exec = PrimExecution {
            prim,
            args: indexed.as_ref().map_or(&op.args[..], |(args, _)| &args[..]),
            dst: op.dst,
            rows,
            member_rows: &self.member_rows,
            total_rows: self.total_rows(pc),
            mode: self.lane_mode,
            indexed: indexed.map(|(_, operand)| operand),
        };
        self.faults.clear();
        match &self.classes {
            Some(classes) if op.split.split => {
                let types = operand_types(self.lowered, &self.lowered.blocks[pc].ops[i]);
                let (member, rngs) = self.lanes.members_and_rngs();
                let split = Split {
                    classes,
                    exec: &exec,
                    types: &types,
                    statics: self.shared.statics,
                    hosts: self.shared.hosts,
                    member_of: &|r| member[r as usize] as usize,
                    rng_of: &|r| r as usize,
                    plan: op.split,
                };
                run_split(
                    &mut self.engine,
                    &split,
                    &mut self.slots,
                    rngs,
                    &mut self.split_scratch,
                    &mut self.faults,
                );
            }
            _ => {
                self.temps
                    .prepare(&mut self.engine, &mut self.slots, &self.is_temp, op.dst);
                self.temps.run_prim(
                    &mut self.engine,
                    &exec,
                    &mut self.slots,
                    &self.is_temp,
                    &self.shared,
                    &mut self.lanes.rngs,
                    &|r| r as usize,
                    &mut self.faults,
                );
            }
        }
        self.counter.record(op.counter, rows.len());
        let mut member_stacks = MemberStacks {
            plan: &self.catch_plan,
            catches: &mut self.catches,
            return_stacks: &mut self.return_stacks,
            stacks: &mut self.stacks,
        };
        let waiting = &mut self.waiting;
        self.lanes.retire_faults(
            rows,
            &mut self.faults,
            loc,
            |r| r as usize,
            |r, error| {
                let recover = unwind(r, error, &mut member_stacks)?;
                waiting.push(recover, &[r]);
                Ok(())
            },
        );
    }

    /// The rows of the columns of block `pc`'s function: a row per lane if
    /// instances may run it, else a row per member.
    fn total_rows(&self, pc: PcBlock) -> usize {
        if self.grows[self.lowered.blocks[pc].func.index()] {
            self.capacity
        } else {
            self.members
        }
    }

    /// A call from block `pc`: each member pushes `return_to` and enters
    /// `target`, unless the call would overflow its stack (caught at
    /// `recover` for a catching call, else the member stops).
    fn call(
        &mut self,
        pc: PcBlock,
        rows: &[u32],
        target: PcBlock,
        return_to: PcBlock,
        recover: Option<PcBlock>,
        loc: Loc,
    ) {
        // Members that enter the call, and those whose call overflows but
        // is caught.
        let (entering, overflowed) = (&mut self.branch.then_rows, &mut self.branch.else_rows);
        entering.clear();
        overflowed.clear();
        let max_depth = self.options.max_stack_depth;
        // A lane an overflow below cancels goes on (it is dropped when it
        // next runs a block).
        for &r in rows {
            // The caller's depth is its lane's base, plus its first
            // activation, plus one per pending return.
            let depth = self.return_stacks[r as usize].len();
            if self.depth_base[r as usize] + depth + 2 > max_depth {
                if recover.is_some() {
                    // The call itself overflows: caught like a fault inside it.
                    overflowed.push(r);
                    continue;
                }
                let mut member_stacks = MemberStacks {
                    plan: &self.catch_plan,
                    catches: &mut self.catches,
                    return_stacks: &mut self.return_stacks,
                    stacks: &mut self.stacks,
                };
                match unwind(r, stack_overflow(max_depth, loc), &mut member_stacks) {
                    Ok(recover) => self.waiting.push(recover, &[r]),
                    Err(error) => self.lanes.fail(r, error),
                }
                continue;
            }
            if let Some(recover) = recover {
                self.catches[r as usize].push(CatchFrame {
                    call: pc,
                    return_depth: depth,
                    recover,
                    heights: self.catch_plan.saved_heights(pc, &self.stacks, r),
                });
            }
            self.return_stacks[r as usize].push(return_to);
            entering.push(r);
        }
        self.waiting.push(target, &self.branch.then_rows);
        if let Some(recover) = recover {
            self.waiting.push(recover, &self.branch.else_rows);
        }
    }

    /// A return: each lane goes back to where its innermost call returns
    /// (leaving the catching call it ends, if any); from the entry function
    /// a member finishes with its results, from its function an instance
    /// gives its results to its parent and ends.
    fn ret(&mut self, rows: &[u32]) {
        // An instance's return may cancel lanes of `rows`: one that returns
        // to a caller goes on (it is dropped when it next runs a block), one
        // that ends is dropped here (its join may be gone).
        for &r in rows {
            let m = r as usize;
            match self.return_stacks[m].pop() {
                Some(to) => {
                    let depth = self.return_stacks[m].len();
                    let frames = &mut self.catches[m];
                    if frames.last().is_some_and(|f| f.return_depth == depth) {
                        frames.pop();
                    }
                    self.waiting.push(to, &[r]);
                }
                None if self.lanes.is_instance(r) => {
                    if !self.lanes.drop_if_cancelled(r) {
                        self.give_results(r);
                        self.lanes.instance_returned(r);
                    }
                }
                None => {
                    let results = self
                        .entry
                        .results
                        .iter()
                        .map(|x| {
                            let slot = &self.slots[x.index()];
                            let ty = &self.lowered.vars[*x].ty;
                            match &self.classes {
                                Some(classes) if classes.mentions(ty) => {
                                    classes.value(slot.values(m, 0, slot.row_len()), ty, m)
                                }
                                _ => slot.value(m),
                            }
                        })
                        .collect();
                    self.lanes.finish(m, results);
                }
            }
        }
    }

    /// A fork at the end of block `pc`, for `rows`: each lane draws the
    /// fork's key and waits at its join (its instances start from the
    /// queue, [`Machine::settle`]); a fork with no instance goes straight
    /// on, and one that would overflow the stack unwinds the lane.
    fn fork(&mut self, pc: PcBlock, rows: &[u32], fork: &LoweredFork) {
        let max_depth = self.options.max_stack_depth;
        for &r in rows {
            if self.lanes.drop_if_cancelled(r) {
                continue;
            }
            let total = match fork.count {
                Some(count) => dim_length(self.symbols_of(r), count) as u64,
                None => fork.calls.len() as u64,
            };
            let key = self.lanes.fork_key(r);
            let depth = self.depth(r);
            if total > 0 && depth >= max_depth {
                self.fail_or_recover(r, stack_overflow(max_depth, fork.overflow_loc));
            } else if total == 0 {
                self.waiting.push(fork.then, &[r]);
            } else {
                let join = self.lanes.open_fork(r, key, total, depth, pc.0);
                self.lanes.queue_fork(join);
            }
        }
    }

    /// `--max-instances`, or by default as many instances as a quarter of
    /// the available memory holds, each a row of the columns of the
    /// functions instances run (computed once, at the first fork: reading
    /// the available memory costs more than a small run).
    fn max_instances(&mut self) -> usize {
        if let Some(max) = self.max_instances {
            return max;
        }
        let row: u128 = self
            .lowered
            .vars
            .values()
            .filter(|v| {
                // Invariant and member variables have no row per lane.
                !matches!(v.class, VarClass::Invariant | VarClass::Member(_))
                    && self.grows[v.func.index()]
            })
            .map(|v| value_bytes(&v.ty, self.shared.symbols))
            .fold(0, u128::saturating_add);
        let max = default_max_instances(row.saturating_add(MEMBER_OVERHEAD_BYTES));
        self.max_instances = Some(max);
        max
    }

    /// The lengths of the symbolic dimensions lane `r` sees (its member's
    /// own, in a ragged batch).
    fn symbols_of(&self, r: u32) -> &[u64] {
        match &self.classes {
            Some(classes) => classes.symbols_of(self.lanes.member_of(r)),
            None => self.shared.symbols,
        }
    }

    /// The elements of lane `r`'s value of variable `x` (fewer than its
    /// slot's row holds for a ragged value of a shorter member).
    fn own_len(&self, x: GlobalVar, r: u32) -> usize {
        let ty = &self.lowered.vars[x].ty;
        match &self.classes {
            Some(classes) if classes.mentions(ty) => classes.row_len(ty, self.lanes.member_of(r)),
            _ => self.slots[x.index()].row_len(),
        }
    }

    /// The stack depth of lane `r`'s current activation.
    fn depth(&self, r: u32) -> usize {
        self.depth_base[r as usize] + self.return_stacks[r as usize].len() + 1
    }

    /// After a step: frees the lanes that ended, resolves the joins whose
    /// instances are accounted for, and starts instances while the budget
    /// allows (one for a fork that has none running, whatever the budget).
    #[inline]
    fn settle(&mut self) {
        if !self.lanes.is_settled() {
            self.settle_forks();
        }
    }

    fn settle_forks(&mut self) {
        loop {
            while let Some(lane) = self.lanes.take_released() {
                self.free_lane(lane);
            }
            if let Some(fork) = self.lanes.take_resolved() {
                self.resolve(fork);
                continue;
            }
            let max_instances = self.max_instances();
            match self.lanes.next_to_start(max_instances) {
                Some(fork) => self.start_instance(fork),
                None => break,
            }
        }
    }

    /// Clears what an ended instance lane leaves (its stacks, after a fault
    /// or a cancellation) and frees it.
    fn free_lane(&mut self, lane: u32) {
        let l = lane as usize;
        if self.lanes.ended_abnormally(lane) {
            // Only the stacks of the functions instances run have its row.
            for (x, stack) in self.stacks.iter_mut().enumerate() {
                let func = self.lowered.vars[GlobalVar::new(x)].func;
                if let (true, Some(stack)) = (self.grows[func.index()], stack) {
                    stack.truncate(l, 0);
                }
            }
            self.return_stacks[l].clear();
            self.catches[l].clear();
        }
        self.lanes.free(lane);
    }

    /// A join resolved: its parent goes on after the fork with the member's
    /// steps so far, or meets the first instance's error where it forked.
    fn resolve(&mut self, fork: ForkId) {
        let (join, resolution) = self.lanes.close_fork(fork);
        let LoweredTerm::Fork(site) = &self.lowered.blocks[PcBlock(join.site)].term else {
            internal_error("a join whose site is not a fork");
        };
        let parent = join.parent;
        match resolution {
            Resolution::Returned { steps } => {
                self.lanes.set_steps(parent, steps);
                self.waiting.push(site.then, &[parent]);
            }
            Resolution::Failed { steps, error } => {
                self.lanes.set_steps(parent, steps);
                self.fail_or_recover(parent, error);
            }
            Resolution::StepLimit => self
                .lanes
                .fail(parent, step_limit(self.options.max_steps, site.loc)),
        }
    }

    /// Sends lane `r`, which met `error`, to its innermost catching call's
    /// recovery block, or stops it.
    fn fail_or_recover(&mut self, r: u32, error: MemberError) {
        let mut member_stacks = MemberStacks {
            plan: &self.catch_plan,
            catches: &mut self.catches,
            return_stacks: &mut self.return_stacks,
            stacks: &mut self.stacks,
        };
        match unwind(r, error, &mut member_stacks) {
            Ok(recover) => self.waiting.push(recover, &[r]),
            Err(error) => self.lanes.fail(r, error),
        }
    }

    /// Starts the next instance of `fork` in a lane: its parameters from
    /// the parent's row, then the callee's entry.
    fn start_instance(&mut self, fork: ForkId) {
        let Some((lane, k)) = self.lanes.start_instance(fork) else {
            return;
        };
        self.ensure_capacity();
        let join = self.lanes.join(fork);
        let (parent, site) = (join.parent as usize, PcBlock(join.site));
        self.depth_base[lane as usize] = join.depth;
        let LoweredTerm::Fork(site) = &self.lowered.blocks[site].term else {
            internal_error("a join whose site is not a fork");
        };
        let call = &site.calls[if site.count.is_some() { 0 } else { k as usize }];
        let member = self.lanes.member_of(lane);
        for (param, arg) in &call.params {
            if let Slot::Member(_) = self.slots[param.index()] {
                // Holds the member's value already.
                continue;
            }
            if let Slot::Invariant(assigned) = &self.slots[param.index()] {
                // Every call site passes the same shared value
                // (`autobatch_passes::views`): set once, never per lane.
                if assigned.is_none() {
                    let value = match (arg, &self.slots) {
                        (LoweredArg::Whole(v), slots) => match &slots[v.index()] {
                            Slot::Invariant(Some(value)) => value.clone(),
                            _ => internal_error("a per-member argument of an invariant parameter"),
                        },
                        _ => internal_error("an element or index for an invariant parameter"),
                    };
                    self.slots[param.index()] = Slot::Invariant(Some(value));
                }
                continue;
            }
            let len = self.own_len(*param, lane);
            let elem = self.lowered.vars[*param].ty.elem;
            self.call_bytes += (len * crate::batched::element_bytes(elem)) as u64;
            let to = Place {
                slot: param.index(),
                row: lane as usize,
                offset: 0,
            };
            // A member slot's row is the member's.
            let from = |slots: &[Slot], v: GlobalVar, offset| Place {
                slot: v.index(),
                row: match slots[v.index()] {
                    Slot::Member(_) => member,
                    _ => parent,
                },
                offset,
            };
            match arg {
                LoweredArg::Whole(v) => {
                    let from = from(&self.slots, *v, 0);
                    copy_value(&mut self.slots, from, to, len)
                }
                LoweredArg::Element(v) => {
                    let from = from(&self.slots, *v, k as usize * len);
                    copy_value(&mut self.slots, from, to, len)
                }
                LoweredArg::Index => {
                    let Slot::Column(column) = &mut self.slots[param.index()] else {
                        internal_error("an instance's parameter is invariant");
                    };
                    let index = Scalar::I64(k as i64);
                    column.write(lane as usize, 0, Values::scalar(&index));
                }
            }
        }
        self.waiting.push(call.target, &[lane]);
    }

    /// An instance lane returned: its results go to its parent's
    /// destinations (element `k` of each, for a `map`).
    fn give_results(&mut self, lane: u32) {
        let Some((fork, k)) = self.lanes.instance_of(lane) else {
            internal_error("a lane that is no instance returned as one");
        };
        let join = self.lanes.join(fork);
        let (parent, site) = (join.parent as usize, PcBlock(join.site));
        let LoweredTerm::Fork(site) = &self.lowered.blocks[site].term else {
            internal_error("a join whose site is not a fork");
        };
        let map = site.count.is_some();
        let call = &site.calls[if map { 0 } else { k as usize }];
        for (result, dst) in &call.results {
            let len = self.own_len(*result, lane);
            let from = Place {
                slot: result.index(),
                row: lane as usize,
                offset: 0,
            };
            let to = Place {
                slot: dst.index(),
                row: parent,
                offset: if map { k as usize * len } else { 0 },
            };
            copy_value(&mut self.slots, from, to, len);
        }
    }

    /// Grows the columns and stacks of the functions instances run to a row
    /// per lane, by [`grown_rows`] (a new column is zeroed memory that costs
    /// nothing until a lane writes its row).
    fn ensure_capacity(&mut self) {
        let needed = self.lanes.capacity();
        if needed <= self.capacity {
            return;
        }
        let bound = self.members.saturating_add(self.max_instances());
        let rows = grown_rows(self.capacity, needed, bound);
        let grows = |x: usize| self.grows[self.lowered.vars[GlobalVar::new(x)].func.index()];
        let lowered = self.lowered;
        // A temporary's value does not outlive its step, unless a fork
        // passes it (its instances start later, from the parent's row).
        let fork_args: std::collections::HashSet<GlobalVar> = lowered
            .blocks
            .values()
            .filter_map(|b| match &b.term {
                LoweredTerm::Fork(fork) => Some(fork),
                _ => None,
            })
            .flat_map(|fork| fork.calls.iter().flat_map(|c| &c.params))
            .filter_map(|(_, arg)| match arg {
                LoweredArg::Whole(v) | LoweredArg::Element(v) => Some(*v),
                LoweredArg::Index => None,
            })
            .collect();
        for (x, slot) in self.slots.iter_mut().enumerate() {
            if self.is_temp[x] {
                // Step storage only.
                continue;
            }
            if let (true, Slot::Column(column)) = (grows(x), slot) {
                let x = GlobalVar::new(x);
                let keep = lowered.vars[x].class != VarClass::Temporary || fork_args.contains(&x);
                column.grow_rows(rows, keep);
            }
        }
        for (x, stack) in self.stacks.iter_mut().enumerate() {
            if let (true, Some(stack)) = (grows(x), stack) {
                stack.grow(rows);
            }
        }
        self.return_stacks.resize(rows, Vec::new());
        self.catches.resize(rows, Vec::new());
        self.depth_base.resize(rows, 0);
        self.capacity = rows;
        self.column_bytes = self.slots.iter().map(Slot::bytes).sum();
        self.note_state_bytes();
    }

    /// Takes the bytes held now into the peak: the columns, the value
    /// stacks and the most the running step's temporaries held.
    fn note_state_bytes(&mut self) {
        let stacks: u64 = self.stacks.iter().flatten().map(ValueStack::bytes).sum();
        let held = self.column_bytes + stacks + self.temps.peak();
        self.peak_state_bytes = self.peak_state_bytes.max(held);
    }

    /// Runs `f` on the column of the full variable `x` and its stack, moving
    /// a value of each of `lanes` lanes.
    fn with_stack(
        &mut self,
        x: GlobalVar,
        lanes: usize,
        f: impl FnOnce(&mut Column, &mut ValueStack),
    ) {
        let Slot::Column(column) = &mut self.slots[x.index()] else {
            internal_error("stack operation on an invariant variable")
        };
        let Some(stack) = self.stacks[x.index()].as_mut() else {
            internal_error(format!("{x} has no stack"))
        };
        self.call_bytes += stack.value_bytes() * lanes as u64;
        f(column, stack);
    }
}

/// The rows the lanes' storage grows to when `needed` rows (lane ids)
/// exceed its `capacity`: four times as many, up to `bound` (the members
/// and `--max-instances` instances); past it (forks that found no free
/// lane each start one instance anyway) half as many again. Growth is
/// geometric either way, so each row is copied a bounded number of times
/// however many lanes a run ends up needing; growing one row at a time
/// copied every column once per extra lane.
fn grown_rows(capacity: usize, needed: usize, bound: usize) -> usize {
    let step = if capacity < bound {
        capacity.saturating_mul(4).min(bound)
    } else {
        capacity.saturating_add(capacity / 2)
    };
    needed.max(step)
}

/// Per function of `lowered`, whether an instance may run it: whether some
/// fork's callee reaches it through calls and forks.
fn instance_functions(lowered: &LoweredProgram) -> Vec<bool> {
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); lowered.functions.len()];
    let mut todo = Vec::new();
    for block in lowered.blocks.values() {
        let from = &mut callees[block.func.index()];
        match &block.term {
            LoweredTerm::PushJump { callee, .. } => from.push(callee.index()),
            LoweredTerm::Fork(fork) => {
                from.extend(fork.calls.iter().map(|c| c.callee.index()));
                todo.extend(fork.calls.iter().map(|c| c.callee.index()));
            }
            _ => {}
        }
    }
    let mut grows = vec![false; lowered.functions.len()];
    while let Some(f) = todo.pop() {
        if !std::mem::replace(&mut grows[f], true) {
            todo.extend(callees[f].iter().copied());
        }
    }
    grows
}

/// One slot per variable of `lowered` for `members` members (invariant
/// variables unassigned, the others columns of zeros), and the per-member
/// stacks of the full variables.
fn storage(
    lowered: &LoweredProgram,
    symbols: &[u64],
    members: usize,
    is_temp: &[bool],
) -> (Vec<Slot>, Vec<Option<ValueStack>>) {
    let slots = lowered
        .vars
        .iter()
        .map(|(x, v)| match v.class {
            // Stored only while a step runs ([`crate::batched::temps`]).
            _ if is_temp[x.index()] => column_slot(&v.ty, symbols, 0),
            VarClass::Invariant => Slot::Invariant(None),
            // The entry's parameter is bound here; the others share it
            // ([`share_member_slots`]).
            VarClass::Member(_) => Slot::Member(std::sync::Arc::new(Column::zeros(
                v.ty.elem,
                concrete_shape(&v.ty, symbols),
                if v.var.is_some() { members } else { 0 },
            ))),
            _ => column_slot(&v.ty, symbols, members),
        })
        .collect();
    let stacks = lowered
        .vars
        .values()
        .map(|v| {
            (v.class == VarClass::Full).then(|| {
                let row_len = concrete_shape(&v.ty, symbols).iter().product();
                ValueStack::new(v.ty.elem, row_len, members)
            })
        })
        .collect();
    (slots, stacks)
}

/// Per variable of `lowered`, whether it is a step temporary
/// ([`crate::batched::temps`]): a temporary of the explicit-stack form
/// (live inside one block) that no terminator reads (a branch's condition,
/// a fork's arguments, read when its instances start) and no indexed
/// assignment in place reads.
fn step_temporaries(lowered: &LoweredProgram) -> Vec<bool> {
    let mut is_temp: Vec<bool> = lowered
        .vars
        .values()
        .map(|v| v.class == VarClass::Temporary)
        .collect();
    for block in lowered.blocks.values() {
        match &block.term {
            LoweredTerm::Branch { cond, .. } => is_temp[cond.index()] = false,
            LoweredTerm::Fork(fork) => {
                for (_, arg) in fork.calls.iter().flat_map(|c| &c.params) {
                    if let LoweredArg::Whole(v) | LoweredArg::Element(v) = arg {
                        is_temp[v.index()] = false;
                    }
                }
            }
            _ => {}
        }
        for op in &block.ops {
            if let LoweredOp::Prim {
                dst, prim, args, ..
            } = op
            {
                let args: Vec<usize> = args.iter().map(|a| a.index()).collect();
                if in_place_set(prim, dst.map(|d| d.index()), &args) {
                    args.iter().for_each(|a| is_temp[*a] = false);
                }
            }
        }
    }
    is_temp
}

/// Per block, per operation, how it runs in a ragged batch (for another
/// batch, never split).
fn split_plans(lowered: &LoweredProgram, classes: Option<&SizeClasses>) -> Vec<Vec<SplitPlan>> {
    lowered
        .blocks
        .values()
        .map(|b| {
            b.ops
                .iter()
                .map(|op| match (op, classes) {
                    (LoweredOp::Prim { prim, .. }, Some(classes)) => {
                        classes.plan(prim, &operand_types(lowered, op))
                    }
                    _ => SplitPlan::default(),
                })
                .collect()
        })
        .collect()
}

/// In a ragged batch, the operands and results of the operations split by
/// size class (`plans`) are no step temporaries: [`run_split`] reads and
/// writes them by lane, where a compact step's temporaries are laid out by
/// position.
fn keep_split_operands(lowered: &LoweredProgram, plans: &[Vec<SplitPlan>], is_temp: &mut [bool]) {
    for (block, plans) in lowered.blocks.values().zip(plans) {
        for (op, plan) in block.ops.iter().zip(plans) {
            if let (LoweredOp::Prim { args, dst, .. }, true) = (op, plan.split) {
                for x in args.iter().chain(dst) {
                    is_temp[x.index()] = false;
                }
            }
        }
    }
}

/// Gives every member variable the slot of the entry's parameter whose value
/// it holds (bound already), so that none is ever copied.
fn share_member_slots(lowered: &LoweredProgram, entry: &LoweredFunction, slots: &mut [Slot]) {
    for (x, v) in lowered.vars.iter() {
        let VarClass::Member(root) = v.class else {
            continue;
        };
        let Some(param) = entry.params.get(root as usize) else {
            internal_error("a member variable whose root is no parameter of the entry");
        };
        if *param != x {
            slots[x.index()] = slots[param.index()].clone();
        }
    }
}

/// Per block, the fused chains starting at each operation
/// ([`crate::batched::fuse`]).
fn block_chains(
    lowered: &LoweredProgram,
    ops: &[Vec<PrimSlots>],
    is_temp: &[bool],
) -> Vec<Vec<Option<ChainSite>>> {
    lowered
        .blocks
        .values()
        .zip(ops)
        .map(|(block, slots)| {
            let dying: Vec<Vec<usize>> = slots.iter().map(|s| s.dying.clone()).collect();
            find_chains(&block_views(block, slots), is_temp, &dying)
        })
        .collect()
}

/// Per block, the indexed products ([`crate::batched::indexed`]); an index
/// that is a step temporary lives until its product.
fn block_indexed_products(
    lowered: &LoweredProgram,
    ops: &mut [Vec<PrimSlots>],
    is_temp: &[bool],
) -> Vec<Vec<Option<IndexedRole>>> {
    lowered
        .blocks
        .values()
        .zip(ops)
        .map(|(block, slots)| {
            let mut dying: Vec<Vec<usize>> = slots.iter().map(|s| s.dying.clone()).collect();
            let roles = find_indexed_products(&block_views(block, slots), is_temp, &mut dying);
            for (slot, dying) in slots.iter_mut().zip(dying) {
                slot.dying = dying;
            }
            roles
        })
        .collect()
}

/// A block's operations as fused chains and indexed products see them.
fn block_views<'b>(block: &'b LoweredBlock, slots: &'b [PrimSlots]) -> Vec<Option<OpView<'b>>> {
    block
        .ops
        .iter()
        .zip(slots)
        .map(|(op, slots)| match op {
            // An operation split by size class is no link of a
            // chain, which runs over whole padded rows.
            LoweredOp::Prim { .. } if slots.split.split => None,
            LoweredOp::Prim { prim, .. } => Some(OpView {
                prim,
                args: &slots.args,
                dst: slots.dst,
            }),
            _ => None,
        })
        .collect()
}

/// Per block, per operation, the slots and counter of a primitive (every
/// user operation registered in `counter`).
fn prim_slots(
    lowered: &LoweredProgram,
    symbols: &[u64],
    counter: &mut OpCounter,
    is_temp: &[bool],
    plans: &[Vec<SplitPlan>],
) -> Vec<Vec<PrimSlots>> {
    let member = |x: &GlobalVar| matches!(lowered.vars[*x].class, VarClass::Member(_));
    lowered
        .blocks
        .values()
        .zip(plans)
        .map(|(b, plans)| {
            let mentions: Vec<Vec<usize>> = b
                .ops
                .iter()
                .map(|op| match op {
                    LoweredOp::Prim { dst, args, .. } => {
                        args.iter().chain(dst).map(|x| x.index()).collect()
                    }
                    _ => Vec::new(),
                })
                .collect();
            let mut dying = deaths(&mentions, is_temp).into_iter();
            // The parameters the block's call copies its arguments into.
            let params: &[GlobalVar] = match &b.term {
                LoweredTerm::PushJump { callee, .. } => &lowered.functions[*callee].params,
                _ => &[],
            };
            b.ops
                .iter()
                .zip(plans)
                .map(|(op, plan)| match op {
                    LoweredOp::Prim {
                        dst,
                        prim,
                        args,
                        loc,
                    } => PrimSlots {
                        args: args.iter().map(|a| a.index()).collect(),
                        dst: dst.map(|d| d.index()),
                        counter: counter.register(prim, *loc),
                        // A static adjoint is logged as its member's.
                        reads_member: args.iter().any(member)
                            || matches!(prim, Prim::StaticAdjoint(_)),
                        arg_bytes: match (prim, dst) {
                            (Prim::Copy, Some(d)) if params.contains(d) => {
                                Some(value_bytes(&lowered.vars[*d].ty, symbols) as u64)
                            }
                            _ => None,
                        },
                        shared_arg: dst
                            .is_some_and(|d| lowered.vars[d].class == VarClass::Invariant),
                        dying: dying.next().unwrap_or_default(),
                        split: *plan,
                    },
                    _ => PrimSlots {
                        args: Vec::new(),
                        dst: None,
                        counter: None,
                        reads_member: false,
                        arg_bytes: None,
                        shared_arg: false,
                        dying: dying.next().unwrap_or_default(),
                        split: *plan,
                    },
                })
                .collect()
        })
        .collect()
}

/// The types of a primitive's operands, then of its result (if any).
fn operand_types<'l>(lowered: &'l LoweredProgram, op: &LoweredOp) -> Vec<&'l TensorType> {
    match op {
        LoweredOp::Prim { args, dst, .. } => args
            .iter()
            .chain(dst)
            .map(|x| &lowered.vars[*x].ty)
            .collect(),
        _ => Vec::new(),
    }
}

/// A catching call a member is inside: where it goes on if it faults, and
/// the state to cut its stacks back to.
#[derive(Clone, Debug)]
struct CatchFrame {
    /// The block that made the call.
    call: PcBlock,
    /// The length of the member's return stack before the call.
    return_depth: usize,
    recover: PcBlock,
    /// The heights of the variable stacks the callee may push, in the order
    /// of [`CatchPlan::saved`] for the call's block.
    heights: Vec<usize>,
}

/// Which variable stacks each catching call must restore on a fault: the
/// full variables pushed anywhere the callee may reach.
struct CatchPlan {
    /// Per block ending in a catching call, the variables to restore.
    saved: Vec<Vec<GlobalVar>>,
}

impl CatchPlan {
    fn new(lowered: &LoweredProgram) -> CatchPlan {
        let functions = lowered.functions.len();
        let mut callees: Vec<Vec<usize>> = vec![Vec::new(); functions];
        let mut pushed: Vec<BTreeSet<GlobalVar>> = vec![BTreeSet::new(); functions];
        for block in lowered.blocks.values() {
            let f = block.func.index();
            if let LoweredTerm::PushJump { callee, .. } = block.term {
                callees[f].push(callee.index());
            }
            for op in &block.ops {
                if let LoweredOp::Push(x) = op {
                    pushed[f].insert(*x);
                }
            }
        }
        let reached_pushes = |start: usize| -> Vec<GlobalVar> {
            let mut seen = vec![false; functions];
            let mut todo = vec![start];
            let mut vars = BTreeSet::new();
            seen[start] = true;
            while let Some(f) = todo.pop() {
                vars.extend(pushed[f].iter().copied());
                for &g in &callees[f] {
                    if !seen[g] {
                        seen[g] = true;
                        todo.push(g);
                    }
                }
            }
            vars.into_iter().collect()
        };
        let saved = lowered
            .blocks
            .values()
            .map(|block| match block.term {
                LoweredTerm::PushJump {
                    callee,
                    recover: Some(_),
                    ..
                } => reached_pushes(callee.index()),
                _ => Vec::new(),
            })
            .collect();
        CatchPlan { saved }
    }

    fn saved_heights(&self, pc: PcBlock, stacks: &[Option<ValueStack>], r: u32) -> Vec<usize> {
        self.saved[pc.index()]
            .iter()
            .map(|x| {
                stacks[x.index()]
                    .as_ref()
                    .map_or(0, |s| s.height(r as usize))
            })
            .collect()
    }
}

/// After `error`, sends member `r` to its innermost catching call's
/// recovery block, its return stack and variable stacks cut back to where
/// they were at the call; gives the error back if it is not catchable or
/// the member is in no catching call.
fn unwind(
    r: u32,
    error: MemberError,
    state: &mut MemberStacks<'_>,
) -> Result<PcBlock, MemberError> {
    if !error.kind.is_catchable() {
        return Err(error);
    }
    let m = r as usize;
    let Some(frame) = state.catches[m].pop() else {
        return Err(error);
    };
    state.return_stacks[m].truncate(frame.return_depth);
    for (x, height) in state.plan.saved[frame.call.index()]
        .iter()
        .zip(&frame.heights)
    {
        if let Some(stack) = state.stacks[x.index()].as_mut() {
            stack.truncate(m, *height);
        }
    }
    Ok(frame.recover)
}

/// The per-member stacks a fault unwinds.
struct MemberStacks<'a> {
    plan: &'a CatchPlan,
    catches: &'a mut [Vec<CatchFrame>],
    return_stacks: &'a mut [Vec<PcBlock>],
    stacks: &'a mut [Option<ValueStack>],
}
