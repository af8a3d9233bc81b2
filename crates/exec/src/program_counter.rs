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
//! [`ProgramCounter`] registers it as the `program-counter` strategy. What
//! it shares with local-static (per-member outcomes and the step limit,
//! fault retirement, argument binding, the branch split) is
//! [`crate::batched::skeleton`]; a fault inside a catching call is unwound
//! where it happens, through the `unwind` hook of fault retirement.

use std::collections::BTreeSet;
use std::time::Instant;

use autobatch_ir::{EntityRef, Program};
use autobatch_passes::stack::{
    lower_to_stack, verify_lowered, GlobalVar, LoweredOp, LoweredProgram, LoweredTerm, PcBlock,
    VarClass,
};
use autobatch_types::MemberError;

use autobatch_kernels::Backend;

use crate::batched::engine::{Engine, PrimExecution, SharedEnv};
use crate::batched::skeleton::{bind_arg, invariance, no_room_for_entry, BranchRows, Members};
use crate::batched::storage::{Slot, ValueStack};
use crate::batched::{column_slot, stack_overflow, BlockChoice, OpCounter, Watch};
use crate::internal::internal_error;
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
        let lowered = lower_to_stack(program, &invariance(program, batch));
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
    let (lanes, choice) = (batching.lanes, batching.block_choice);
    let members = batch.size;
    crate::batched::check_lowered_memory(program, lowered, batch.entry, &env.symbols, members)
        .map_err(ExecError::Resources)?;

    let started = Instant::now();
    let mut slots: Vec<Slot> = lowered
        .vars
        .values()
        .map(|v| match v.class {
            VarClass::Invariant => Slot::Invariant(None),
            _ => column_slot(&v.ty, &env.symbols, members),
        })
        .collect();
    let mut stacks: Vec<Option<ValueStack>> = lowered
        .vars
        .values()
        .map(|v| {
            (v.class == VarClass::Full).then(|| {
                let row_len = crate::batched::concrete_shape(&v.ty, &env.symbols)
                    .iter()
                    .product();
                ValueStack::new(v.ty.elem, row_len, members)
            })
        })
        .collect();
    let entry = &lowered.functions[batch.entry];
    for (param, arg) in entry.params.iter().zip(&batch.args) {
        bind_arg(&mut slots[param.index()], arg, members)?;
    }

    let mut counter = OpCounter::default();
    let op_counters: Vec<Vec<Option<usize>>> = lowered
        .blocks
        .values()
        .map(|b| {
            b.ops
                .iter()
                .map(|op| match op {
                    LoweredOp::Prim { prim, loc, .. } => counter.register(prim, *loc),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let op_slots: Vec<Vec<(Vec<usize>, Option<usize>)>> = lowered
        .blocks
        .values()
        .map(|b| {
            b.ops
                .iter()
                .map(|op| match op {
                    LoweredOp::Prim { dst, args, .. } => (
                        args.iter().map(|a| a.index()).collect(),
                        dst.map(|d| d.index()),
                    ),
                    _ => (Vec::new(), None),
                })
                .collect()
        })
        .collect();

    let mut per_member = Members::new(members, options.seed);
    let mut return_stacks: Vec<Vec<PcBlock>> = vec![Vec::new(); members];
    let catch_plan = CatchPlan::new(lowered);
    let mut catches: Vec<Vec<CatchFrame>> = vec![Vec::new(); members];
    let mut waiting: Vec<Vec<u32>> = vec![Vec::new(); lowered.blocks.len()];
    let mut nonempty: BTreeSet<u32> = BTreeSet::new();
    waiting[entry.entry.index()] = (0..members as u32).collect();
    if members > 0 {
        nonempty.insert(entry.entry.0);
    }
    let shared = SharedEnv {
        statics: &env.statics,
        symbols: &env.symbols,
    };
    let mut engine = Engine::new(backend, options.threads);
    engine.remember_statics();
    let mut steps = 0u64;
    let mut rows: Vec<u32> = Vec::new();
    let mut faults = Vec::new();
    let mut branch = BranchRows::default();

    let enqueue =
        |waiting: &mut Vec<Vec<u32>>, nonempty: &mut BTreeSet<u32>, pc: PcBlock, list: &[u32]| {
            if !list.is_empty() {
                let queue = &mut waiting[pc.index()];
                if queue.is_empty() {
                    nonempty.insert(pc.0);
                }
                queue.extend_from_slice(list);
            }
        };

    let mut watch = Watch::new(options);
    while let Some(pc) = choose(&nonempty, &waiting, choice) {
        watch.tick(steps, &counter);
        nonempty.remove(&pc);
        rows.clear();
        std::mem::swap(&mut rows, &mut waiting[pc as usize]);
        rows.sort_unstable();
        let block = &lowered.blocks[PcBlock(pc)];
        steps += 1;
        if block.counts_step {
            per_member.enter_block(&mut rows, |r| r as usize, options.max_steps, block.loc);
        }
        for (i, op) in block.ops.iter().enumerate() {
            if rows.is_empty() {
                break;
            }
            match op {
                LoweredOp::Prim { prim, loc, .. } => {
                    let (args, dst) = &op_slots[pc as usize][i];
                    let exec = PrimExecution {
                        prim,
                        args,
                        dst: *dst,
                        rows: &rows,
                        total_rows: members,
                        mode: lanes,
                    };
                    faults.clear();
                    engine.run_prim(
                        &exec,
                        &mut slots,
                        &shared,
                        &mut per_member.rngs,
                        &|r| r as usize,
                        &mut faults,
                    );
                    counter.record(op_counters[pc as usize][i], rows.len());
                    let mut member_stacks = MemberStacks {
                        plan: &catch_plan,
                        catches: &mut catches,
                        return_stacks: &mut return_stacks,
                        stacks: &mut stacks,
                    };
                    per_member.retire_faults(
                        &mut rows,
                        &mut faults,
                        *loc,
                        |r| r as usize,
                        |r, error| {
                            let recover = unwind(r, error, &mut member_stacks)?;
                            enqueue(&mut waiting, &mut nonempty, recover, &[r]);
                            Ok(())
                        },
                    );
                }
                LoweredOp::Push(x) => with_stack(&mut slots, &mut stacks, *x, |column, stack| {
                    stack.push_rows(&rows, column)
                }),
                LoweredOp::Pop(x) => with_stack(&mut slots, &mut stacks, *x, |column, stack| {
                    stack.restore_rows(&rows, column, true)
                }),
                LoweredOp::Peek(x) => with_stack(&mut slots, &mut stacks, *x, |column, stack| {
                    stack.restore_rows(&rows, column, false)
                }),
            }
        }
        if rows.is_empty() {
            continue;
        }
        match &block.term {
            LoweredTerm::Jump(target) => enqueue(&mut waiting, &mut nonempty, *target, &rows),
            LoweredTerm::Branch {
                cond,
                then_block,
                else_block,
            } => {
                branch.partition(&slots[cond.index()], &rows)?;
                enqueue(&mut waiting, &mut nonempty, *then_block, &branch.then_rows);
                enqueue(&mut waiting, &mut nonempty, *else_block, &branch.else_rows);
            }
            LoweredTerm::PushJump {
                target,
                return_to,
                recover,
                loc,
                ..
            } => {
                // Members that enter the call, and those whose call overflows
                // but is caught.
                let (entering, overflowed) = (&mut branch.then_rows, &mut branch.else_rows);
                entering.clear();
                overflowed.clear();
                for &r in &rows {
                    // Depth is the entry activation plus one per pending return.
                    let depth = return_stacks[r as usize].len();
                    if depth + 2 > options.max_stack_depth {
                        if recover.is_some() {
                            // The call itself overflows: caught like a fault inside it.
                            overflowed.push(r);
                            continue;
                        }
                        let error = stack_overflow(options.max_stack_depth, *loc);
                        let mut member_stacks = MemberStacks {
                            plan: &catch_plan,
                            catches: &mut catches,
                            return_stacks: &mut return_stacks,
                            stacks: &mut stacks,
                        };
                        match unwind(r, error, &mut member_stacks) {
                            Ok(recover) => enqueue(&mut waiting, &mut nonempty, recover, &[r]),
                            Err(error) => per_member.stop(r as usize, error),
                        }
                        continue;
                    }
                    if let Some(recover) = recover {
                        catches[r as usize].push(CatchFrame {
                            call: PcBlock(pc),
                            return_depth: depth,
                            recover: *recover,
                            heights: catch_plan.saved_heights(PcBlock(pc), &stacks, r),
                        });
                    }
                    return_stacks[r as usize].push(*return_to);
                    entering.push(r);
                }
                enqueue(&mut waiting, &mut nonempty, *target, entering);
                if let Some(recover) = recover {
                    enqueue(&mut waiting, &mut nonempty, *recover, overflowed);
                }
            }
            LoweredTerm::Return => {
                for r in &rows {
                    match return_stacks[*r as usize].pop() {
                        Some(to) => {
                            let frames = &mut catches[*r as usize];
                            let depth = return_stacks[*r as usize].len();
                            if frames.last().is_some_and(|f| f.return_depth == depth) {
                                frames.pop();
                            }
                            enqueue(&mut waiting, &mut nonempty, to, &[*r]);
                        }
                        None => {
                            let results = entry
                                .results
                                .iter()
                                .map(|x| slots[x.index()].value(*r as usize))
                                .collect();
                            per_member.finish(*r as usize, results);
                        }
                    }
                }
            }
        }
    }
    Ok(per_member.into_output(counter, steps, started))
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

fn choose(nonempty: &BTreeSet<u32>, waiting: &[Vec<u32>], choice: BlockChoice) -> Option<u32> {
    match choice {
        BlockChoice::SmallestIndex => nonempty.first().copied(),
        BlockChoice::MostMembers => {
            let mut best: Option<(usize, u32)> = None;
            for pc in nonempty {
                let n = waiting[*pc as usize].len();
                if best.is_none_or(|(m, _)| n > m) {
                    best = Some((n, *pc));
                }
            }
            best.map(|(_, pc)| pc)
        }
    }
}

fn with_stack(
    slots: &mut [Slot],
    stacks: &mut [Option<ValueStack>],
    x: GlobalVar,
    f: impl FnOnce(&mut crate::batched::storage::Column, &mut ValueStack),
) {
    let Slot::Column(column) = &mut slots[x.index()] else {
        internal_error("stack operation on an invariant variable")
    };
    let Some(stack) = stacks[x.index()].as_mut() else {
        internal_error(format!("{x} has no stack"))
    };
    f(column, stack);
}
