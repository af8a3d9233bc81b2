//! Program-counter autobatching: batching by block, whatever the call depth.
//!
//! The program is the flat, explicit-stack form of `autobatch_passes::stack`.
//! Every member has a program counter and a stack of return addresses; every
//! full variable has a per-member stack whose top is the variable itself.
//! At each step the executor picks one block
//! ([`BlockChoice`](crate::batched::BlockChoice)), runs it for every member
//! waiting there ([`Waiting`]), whatever its recursion depth, and moves each
//! member to its next block. There is no host recursion, so the depth of a
//! member's recursion is bounded only by `--max-stack-depth`, and each
//! member's stacks grow on demand.
//!
//! **Instances.** A row of storage is a *lane* ([`crate::batched::lanes`]):
//! rows `0..members` are the members' own lanes, and each instance of a
//! fork (`join`, `map`, `pfor`) is a lane of its own, with its own program
//! counter, return stack, catch frames and variable stacks
//! ([`crate::batched::instances`]). A lane at a fork waits in no block's
//! queue; its instances start at the callee's entry as lanes free up
//! ([`forks`]) and run with every other lane at the same block, whatever
//! its member or depth. The join's resolution moves the parent on to the
//! fork's continuation, or unwinds it with the first instance's error.
//!
//! [`ProgramCounter`] registers it as the `program-counter` strategy. It
//! keeps only its control: the waiting lists, program counters, return
//! stacks, value stacks, forks ([`forks`]) and catching calls ([`catch`]).
//! The whole program is planned once ([`crate::batched::plan`]), and a
//! block's operations run through the step runner it shares with
//! local-static ([`crate::batched::step`]); a fault inside a catching call
//! is unwound where it happens, through the runner's `unwind` hook.
//!
//! A ragged batch runs as one batch: padded rows, and the operations that
//! mention a ragged dimension run split by size class
//! ([`crate::batched::classes`]).

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Instant;

use autobatch_ir::{EntityRef, Loc, Prim, Program};
use autobatch_kernels::buffer::Values;
use autobatch_kernels::Backend;
use autobatch_passes::stack::{
    reachability, GlobalVar, LoweredFork, LoweredFunction, LoweredOp, LoweredProgram, LoweredTerm,
    PcBlock, VarClass,
};
use autobatch_types::{MemberError, Scalar};

use crate::batched::classes::SizeClasses;
use crate::batched::column_slot;
use crate::batched::instances::InstanceBudget;
use crate::batched::lanes::ForkId;
use crate::batched::plan::{ArgCopy, PlanOp, StepPlan};
use crate::batched::skeleton::{bind_arg, no_room_for_entry, BranchRows, Waiting};
use crate::batched::step::{run_step, Control, Frame, StepHooks, StepParts, StepSite, Stepper};
use crate::batched::storage::{copy_value, Column, Place, Slot, ValueStack};
use crate::batched::temps::StepTemps;
use crate::internal::internal_error;
use crate::memory::{concrete_shape, instance_functions, value_bytes, MEMBER_OVERHEAD_BYTES};
use crate::monitor::{stack_overflow, OpCounter};
use crate::{Batch, Env, ExecError, Executor, OptionsRead, RunOptions, RunOutput};

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

    /// A step runs a block for every lane waiting there, whatever its
    /// depth; a ragged batch runs as one batch ([`crate::batched::classes`]).
    fn batches_steps(&self) -> bool {
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
    ) -> Result<RunOutput, ExecError> {
        if let Some(output) = no_room_for_entry(program, batch, options) {
            return Ok(output);
        }
        let lowered = crate::stack_cache::lowered(program, batch, env)?;
        run(backend, program, &lowered, env, batch, options)
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
) -> Result<RunOutput, ExecError> {
    crate::memory::check_lowered_memory(program, lowered, batch.entry, &env.symbols, batch.size)
        .map_err(ExecError::Resources)?;
    let started = Instant::now();
    let mut machine = Machine::new(backend, program, lowered, env, batch, options)?;
    let mut rows: Vec<u32> = Vec::new();
    while let Some(pc) = machine.waiting.choose(options.batching.block_choice) {
        machine.waiting.take(pc, &mut rows);
        machine.step(pc, &mut rows)?;
        machine.settle();
    }
    if machine.step.lanes.forks_open() {
        internal_error("the run ended with a fork still open");
    }
    Ok(machine.step.into_output(started, program, env, batch))
}

mod catch;
mod forks;

use catch::{unwind, CatchFrame, CatchPlan, MemberStacks, Unwinding};

/// The state of a program-counter run.
struct Machine<'a> {
    lowered: &'a LoweredProgram,
    entry: &'a LoweredFunction,
    /// The engine, the lanes and the rest every step shares.
    step: Stepper<'a>,
    /// The batch size: lanes `0..members` are the members'.
    members: usize,
    /// The rows of the columns and stacks of the functions instances may
    /// run (`grows`): at least one per lane. The others have a row per
    /// member only.
    capacity: usize,
    /// Per function, whether an instance may run it (a fork's callee
    /// reaches it).
    grows: Vec<bool>,
    /// Per block of the explicit-stack form, whether entering it counts a
    /// step: it starts an IR block (no continuation after a call) that
    /// counts one ([`autobatch_ir::Function::counts_step`]).
    counted: Vec<bool>,
    /// One slot per variable of the explicit-stack form, a row per lane.
    slots: Vec<Slot>,
    /// The per-lane stacks of the full variables.
    stacks: Vec<Option<ValueStack>>,
    /// The plan of every block ([`crate::batched::plan`]).
    plan: Rc<StepPlan<'a>>,
    /// The storage of the running step's temporaries.
    temps: StepTemps,
    /// The block running, and the rows of its function's columns.
    pc: PcBlock,
    total: usize,
    /// The most instance lanes alive at once ([`Machine::max_instances`]).
    max_instances: InstanceBudget,
    /// Per variable, whether a fork passes it to its instances.
    fork_reads: Vec<bool>,
    /// Per lane, the blocks its pending calls return to.
    return_stacks: Vec<Vec<PcBlock>>,
    /// Per lane, the stack depth below its first activation: 0 for a
    /// member, its parent's depth at the fork for an instance.
    depth_base: Vec<usize>,
    catch_plan: CatchPlan,
    /// Per lane, the catching calls it is inside, innermost last.
    catches: Vec<Vec<CatchFrame>>,
    waiting: Waiting<PcBlock>,
    /// Reused buffer: a branch's or a call's split.
    branch: BranchRows,
    /// The bytes of the columns.
    column_bytes: u64,
}

impl<'a> Machine<'a> {
    /// Every member at the entry block, its arguments bound.
    fn new(
        backend: &'a dyn Backend,
        program: &Program,
        lowered: &'a LoweredProgram,
        env: &'a Env,
        batch: &Batch,
        options: &'a RunOptions,
    ) -> Result<Machine<'a>, ExecError> {
        let members = batch.size;
        let mut step = Stepper::new(
            backend,
            program,
            env,
            options,
            members,
            OpCounter::default(),
        )?;
        step.engine.remember_statics();
        let mut fork_reads = vec![false; lowered.vars.len()];
        for block in lowered.blocks.values() {
            if let LoweredTerm::Fork(fork) = &block.term {
                fork.reads().for_each(|x| fork_reads[x.index()] = true);
            }
        }
        let plan = plan_program(
            lowered,
            &env.symbols,
            &mut step.counter,
            step.classes.as_ref(),
            options.fuse,
            &fork_reads,
        );
        let (slots, stacks) = storage(lowered, &env.symbols, members, &plan.is_temp);
        let entry = &lowered.functions[batch.entry];
        let mut waiting = Waiting::new(lowered.blocks.len());
        waiting.push(entry.entry, &(0..members as u32).collect::<Vec<_>>());
        let mut machine = Machine {
            lowered,
            entry,
            step,
            members,
            capacity: members,
            grows: instance_functions(program, batch.entry),
            counted: lowered
                .blocks
                .values()
                .map(|b| b.counts_step && program.functions[b.func].counts_step(b.origin))
                .collect(),
            slots,
            stacks,
            plan: Rc::new(plan),
            temps: StepTemps::default(),
            pc: entry.entry,
            total: members,
            max_instances: InstanceBudget::new(options.max_instances),
            fork_reads,
            return_stacks: vec![Vec::new(); members],
            depth_base: vec![0; members],
            catch_plan: CatchPlan::new(lowered, &reachability(program)),
            catches: vec![Vec::new(); members],
            waiting,
            branch: BranchRows::default(),
            column_bytes: 0,
        };
        for (param, arg) in entry.params.iter().zip(&batch.args) {
            bind_arg(&mut machine.slots[param.index()], arg, members)?;
        }
        share_member_slots(lowered, entry, &mut machine.slots);
        machine.column_bytes = machine.slots.iter().map(Slot::bytes).sum();
        machine.step.peak_state_bytes = machine.column_bytes;
        Ok(machine)
    }

    /// Runs block `pc` for the members `rows`: the step check, its
    /// operations, then its terminator sends them on.
    fn step(&mut self, pc: PcBlock, rows: &mut Vec<u32>) -> Result<(), ExecError> {
        let lowered = self.lowered;
        let block = &lowered.blocks[pc];
        self.pc = pc;
        self.total = self.total_rows(pc);
        let site = StepSite {
            function: block.func.index(),
            block: block.origin.index(),
            loc: block.loc,
            counts_step: self.counted[pc.index()],
        };
        let plan = self.plan.clone();
        run_step(self, &mut (), site, &plan.blocks[pc.index()], rows)?;
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
        let mut split = std::mem::take(&mut self.branch);
        let (entering, overflowed) = (&mut split.then_rows, &mut split.else_rows);
        entering.clear();
        overflowed.clear();
        let max_depth = self.step.options.max_stack_depth;
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
                self.fail_or_recover(r, stack_overflow(max_depth, loc));
                continue;
            }
            if let Some(recover) = recover {
                self.catches[r as usize].push(CatchFrame {
                    call: pc,
                    return_depth: depth,
                    recover,
                    heights: self.catch_plan.saved_heights(pc, &self.stacks, r),
                });
                self.step.lanes.set_tape_aside(r);
            }
            self.return_stacks[r as usize].push(return_to);
            entering.push(r);
        }
        self.waiting.push(target, &split.then_rows);
        if let Some(recover) = recover {
            self.waiting.push(recover, &split.else_rows);
        }
        self.branch = split;
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
                        self.step.lanes.take_tape_back(r);
                    }
                    self.waiting.push(to, &[r]);
                }
                None if self.step.lanes.is_instance(r) => {
                    if !self.step.lanes.drop_if_cancelled(r) {
                        self.give_results(r);
                        self.step.lanes.instance_returned(r);
                    }
                }
                None => {
                    let results = self.entry.results.iter().map(|x| {
                        let ty = &self.lowered.vars[*x].ty;
                        self.step.member_result(&self.slots[x.index()], ty, m)
                    });
                    self.step.lanes.finish(m, results.collect());
                }
            }
        }
    }

    /// The lengths of the symbolic dimensions lane `r` sees (its member's
    /// own, in a ragged batch).
    fn symbols_of(&self, r: u32) -> &[u64] {
        self.step.symbols_of(self.step.lanes.member_of(r))
    }

    /// The elements of lane `r`'s value of variable `x` (fewer than its
    /// slot's row holds for a ragged value of a shorter member).
    fn own_len(&self, x: GlobalVar, r: u32) -> usize {
        let member = self.step.lanes.member_of(r);
        self.step.own_len(&self.lowered.vars[x].ty, member)
    }

    /// The stack depth of lane `r`'s current activation.
    fn depth(&self, r: u32) -> usize {
        self.depth_base[r as usize] + self.return_stacks[r as usize].len() + 1
    }

    /// Takes the bytes held now into the peak: the columns, the value
    /// stacks and the most the running step's temporaries held.
    fn note_state_bytes(&mut self) {
        let held = self.column_bytes + stack_bytes(&self.stacks) + self.temps.peak();
        self.step.peak_state_bytes = self.step.peak_state_bytes.max(held);
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
        self.step.call_bytes += stack.value_bytes() * lanes as u64;
        f(column, stack);
    }
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

/// Per variable of `lowered`, whether it may be a step temporary
/// ([`crate::batched::temps`]): a temporary of the explicit-stack form
/// (live inside one block) that no terminator reads (a branch's condition,
/// or `fork_reads`: a fork's arguments, read when its instances start).
fn step_temporaries(lowered: &LoweredProgram, fork_reads: &[bool]) -> Vec<bool> {
    let mut is_temp: Vec<bool> = lowered
        .vars
        .iter()
        .map(|(x, v)| v.class == VarClass::Temporary && !fork_reads[x.index()])
        .collect();
    for block in lowered.blocks.values() {
        if let LoweredTerm::Branch { cond, .. } = &block.term {
            is_temp[cond.index()] = false;
        }
    }
    is_temp
}

/// The plan of every block of `lowered` (its primitives registered in
/// `counter`).
fn plan_program<'p>(
    lowered: &'p LoweredProgram,
    symbols: &[u64],
    counter: &mut OpCounter,
    classes: Option<&SizeClasses>,
    fuse: bool,
    fork_reads: &[bool],
) -> StepPlan<'p> {
    let ragged = classes.is_some();
    let blocks = lowered
        .blocks
        .values()
        .map(|block| {
            // The parameters the block's call copies its arguments into.
            let params: &[GlobalVar] = match &block.term {
                LoweredTerm::PushJump { callee, .. } => &lowered.functions[*callee].params,
                _ => &[],
            };
            block
                .ops
                .iter()
                .map(|op| plan_op(lowered, symbols, counter, params, op, ragged))
                .collect()
        })
        .collect();
    StepPlan::new(blocks, step_temporaries(lowered, fork_reads), classes, fuse)
}

/// An operation of the explicit-stack form as the planner sees it: a value
/// stack's move mentions no slot a step temporary may be.
fn plan_op<'p>(
    lowered: &'p LoweredProgram,
    symbols: &[u64],
    counter: &mut OpCounter,
    params: &[GlobalVar],
    op: &'p LoweredOp,
    ragged: bool,
) -> PlanOp<'p> {
    let LoweredOp::Prim {
        dst,
        prim,
        args,
        loc,
    } = op
    else {
        return PlanOp::own(Vec::new());
    };
    let arg_copy = match (prim, dst) {
        (Prim::Copy, Some(d)) if params.contains(d) => Some(ArgCopy {
            bytes: value_bytes(&lowered.vars[*d].ty, symbols) as u64,
            shared: lowered.vars[*d].class == VarClass::Invariant,
        }),
        _ => None,
    };
    PlanOp {
        counter: counter.register(prim, *loc),
        arg_copy,
        ..PlanOp::prim(prim, *loc, args, *dst, ragged, |x| &lowered.vars[x].ty)
    }
}

/// The bytes the value stacks hold.
fn stack_bytes(stacks: &[Option<ValueStack>]) -> u64 {
    stacks.iter().flatten().map(ValueStack::bytes).sum()
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

impl<'a> Control<'a, ()> for Machine<'a> {
    type Hooks<'s>
        = Unwinding<'s>
    where
        Self: 's,
        'a: 's;

    fn parts<'s>(&'s mut self, _: &'s mut ()) -> StepParts<'s, 'a, Unwinding<'s>>
    where
        'a: 's,
    {
        let total = self.total;
        StepParts {
            stepper: &mut self.step,
            frame: Frame {
                slots: &mut self.slots,
                temps: &mut self.temps,
                is_temp: &self.plan.is_temp,
                lanes: None,
                members: None,
                total,
            },
            hooks: Unwinding {
                stacks: MemberStacks {
                    plan: &self.catch_plan,
                    catches: &mut self.catches,
                    return_stacks: &mut self.return_stacks,
                    stacks: &mut self.stacks,
                },
                waiting: &mut self.waiting,
            },
        }
    }

    /// A value stack's move.
    fn own_op(&mut self, _: &mut (), i: usize, rows: &mut Vec<u32>) -> Result<(), ExecError> {
        match &self.lowered.blocks[self.pc].ops[i] {
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
            LoweredOp::Prim { .. } => internal_error("a primitive run as a stack move"),
        }
        Ok(())
    }

    /// The columns and the value stacks.
    fn held_bytes(&self) -> u64 {
        self.column_bytes + stack_bytes(&self.stacks)
    }
}
