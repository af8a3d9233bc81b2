//! Lowering to the explicit-stack form run by the program-counter strategy
//! (TFP's autobatching paper, its Figure 4 and §3.2).
//!
//! All functions are merged into one flat list of blocks. A call ends a
//! block: the caller pushes the variables that the callee may overwrite and
//! that are needed afterwards, copies the arguments into the callee's
//! parameters and ends with `push_jump callee, return_to`; the continuation
//! block pops them back and copies the callee's result registers into the
//! call's destinations. A `return` copies the returned values into the
//! function's result registers and pops the program counter.
//!
//! The optimizations of that paper's §3.2, plus tail calls:
//! 1. every variable has its own stack, and only variables that need one get it;
//! 2. *temporaries* (live inside one block only) need no storage across steps;
//! 3. *registers* (live across blocks, but not across a call that may
//!    overwrite them) need no stack: only their current value;
//! 4. a *full* variable (live across a call whose callee can reach the
//!    caller again, so that a nested activation would overwrite it) has a
//!    per-member stack whose top is kept in the variable itself (the cached
//!    top), so reading it never touches the stack;
//! 5. a `pop v` followed, in the same block, by a `push v` with no write of
//!    `v` in between becomes `peek v` (reload the saved value in place,
//!    leaving the stack as it is), or disappears entirely when nothing
//!    reads `v` before the block overwrites it (see [`fuse_pop_push`]);
//! 6. self tail calls were already turned into jumps (see `tail_calls`).
//!
//! Besides, *invariant* variables (see `uniformity`) are stored once for all
//! members and never saved, and *member* variables (member-uniform
//! parameters, see `member`) are stored once per member, never saved and
//! never copied into at a call (the caller's variable holds the same value).
//!
//! [`verify_lowered`] checks the result: balanced stacks and no read of a
//! value that a nested activation may have overwritten.
//!
//! Steps: only the first block made from an IR block counts as a step (the
//! continuation blocks after calls do not), so that every strategy counts
//! the steps of the IR, as the reference executor does.

use std::collections::HashSet;
use std::fmt::Write;

use autobatch_ir::{
    entity, Block, EntityRef, EntityVec, FuncId, Loc, Op, Prim, Program, TensorType, Terminator,
    Var,
};
use autobatch_types::Scalar;

use crate::uniformity::Invariance;
use autobatch_ir::liveness::Liveness;

pub mod verify;
pub use verify::{verify_lowered, StackVerifyError};

entity!(
    /// A variable of the flat, lowered program.
    GlobalVar,
    "x"
);
entity!(
    /// A block of the flat, lowered program: a value of the program counter.
    PcBlock,
    "pc"
);

/// How a variable is stored by the program-counter strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VarClass {
    /// Same value for every member: one copy, no batch axis, no stack.
    Invariant,
    /// A parameter holding the same value in every activation of a member
    /// (`crate::member`): one row per member (not per lane), never saved,
    /// never copied into by a call or a fork. The number is the position of
    /// the entry's parameter whose value it holds: every variable with the
    /// same number shares one storage.
    Member(u32),
    /// Lives inside one block: no storage across steps.
    Temporary,
    /// Lives across blocks but no call may overwrite it: one value per member, no stack.
    Register,
    /// Lives across a call that may overwrite it: a per-member stack with a cached top.
    Full,
}

impl VarClass {
    pub fn name(self) -> &'static str {
        match self {
            VarClass::Invariant => "invariant",
            VarClass::Member(_) => "member",
            VarClass::Temporary => "temporary",
            VarClass::Register => "register",
            VarClass::Full => "full",
        }
    }
}

#[derive(Clone, Debug)]
pub struct LoweredVar {
    pub func: FuncId,
    /// The IR variable, or `None` for a result register or a compiler temporary.
    pub var: Option<Var>,
    pub ty: TensorType,
    pub name: Option<String>,
    pub class: VarClass,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LoweredOp {
    Prim {
        dst: Option<GlobalVar>,
        prim: Prim,
        args: Vec<GlobalVar>,
        loc: Loc,
    },
    /// Save the variable's current value on the member's stack of that variable.
    Push(GlobalVar),
    /// Restore the variable from the top of its stack, removing the saved value.
    Pop(GlobalVar),
    /// Restore the variable from the top of its stack, keeping the saved value
    /// (a fused `pop` and later `push`).
    Peek(GlobalVar),
}

#[derive(Clone, Debug, PartialEq)]
pub enum LoweredTerm {
    Jump(PcBlock),
    Branch {
        cond: GlobalVar,
        then_block: PcBlock,
        else_block: PcBlock,
    },
    /// Push `return_to` on the member's program-counter stack and go to `target`
    /// (the entry of `callee`). `loc` is the call's, for `stack_overflow`.
    ///
    /// With `recover` (a `catch`), a member that meets a catchable error
    /// inside the call (its own `stack_overflow` at this call included)
    /// goes on at `recover` instead, with its program-counter stack and its
    /// variable stacks as they were before the call.
    PushJump {
        callee: FuncId,
        target: PcBlock,
        return_to: PcBlock,
        recover: Option<PcBlock>,
        loc: Loc,
    },
    /// Pop the program-counter stack; an empty stack means the member is done.
    Return,
    /// Start the instances of a `join`, `map` or `pfor` as new lanes and
    /// wait; when the last instance has returned, go on at `then` with the
    /// results in the fork's destinations. The instances run in rows of
    /// their own, so nothing of the forking lane needs saving.
    Fork(Box<LoweredFork>),
}

/// The instances of a fork in explicit-stack form.
#[derive(Clone, Debug, PartialEq)]
pub struct LoweredFork {
    /// A `join`'s calls in order, or a `map`'s one call.
    pub calls: Vec<LoweredInstance>,
    /// A `map`'s number of instances (every one runs `calls[0]`); `None`
    /// for a `join`.
    pub count: Option<autobatch_ir::Dim>,
    /// Where the forking lane goes on once every instance has returned.
    pub then: PcBlock,
    pub loc: Loc,
    /// Where a fork whose instances would exceed the stack depth stops the
    /// member ([`autobatch_ir::Instances::overflow_loc`]).
    pub overflow_loc: Loc,
    /// What becomes of the instances' tapes.
    pub tape: autobatch_ir::TapeMode,
}

impl LoweredFork {
    /// The variables the fork's instances read when they start.
    pub fn reads(&self) -> impl Iterator<Item = GlobalVar> + '_ {
        self.calls
            .iter()
            .flat_map(|call| &call.params)
            .filter_map(|(_, arg)| arg.var().copied())
    }
}

/// One call of a fork: where an instance starts, what it receives and
/// where its results go.
#[derive(Clone, Debug, PartialEq)]
pub struct LoweredInstance {
    pub callee: FuncId,
    /// The callee's entry block.
    pub target: PcBlock,
    /// Each parameter of the callee and what the forking lane passes to it.
    pub params: Vec<(GlobalVar, LoweredArg)>,
    /// Each result register of the callee and the forking lane's
    /// destination it goes to (for a `map`, element `k` of it).
    pub results: Vec<(GlobalVar, GlobalVar)>,
}

/// What a forking lane passes to one parameter of an instance.
pub type LoweredArg = autobatch_ir::InstanceArg<GlobalVar>;

#[derive(Clone, Debug)]
pub struct LoweredBlock {
    pub func: FuncId,
    /// The IR block this block was cut from.
    pub origin: Block,
    /// True for the first block cut from an IR block: running it is a step.
    pub counts_step: bool,
    pub loc: Loc,
    pub ops: Vec<LoweredOp>,
    pub term: LoweredTerm,
}

#[derive(Clone, Debug)]
pub struct LoweredFunction {
    pub name: String,
    pub entry: PcBlock,
    pub params: Vec<GlobalVar>,
    /// Where `return` leaves the results for the caller.
    pub results: Vec<GlobalVar>,
}

/// The whole program in explicit-stack form.
#[derive(Clone, Debug)]
pub struct LoweredProgram {
    pub vars: EntityVec<GlobalVar, LoweredVar>,
    pub blocks: EntityVec<PcBlock, LoweredBlock>,
    pub functions: EntityVec<FuncId, LoweredFunction>,
}

impl LoweredProgram {
    /// Number of `push` operations in the program text.
    pub fn push_count(&self) -> usize {
        self.blocks
            .values()
            .flat_map(|b| &b.ops)
            .filter(|op| matches!(op, LoweredOp::Push(_)))
            .count()
    }
}

/// Functions reachable from each function through calls (each reaches itself).
pub fn reachability(program: &Program) -> Vec<Vec<bool>> {
    let n = program.functions.len();
    let callees: Vec<HashSet<FuncId>> = program
        .functions
        .values()
        .map(|f| {
            f.blocks
                .values()
                .flat_map(|b| &b.ops)
                .filter_map(|op| match op {
                    Op::Call { callee, .. } => Some(*callee),
                    _ => None,
                })
                .collect()
        })
        .collect();
    (0..n)
        .map(|start| {
            let mut seen = vec![false; n];
            let mut todo = vec![FuncId::new(start)];
            seen[start] = true;
            while let Some(f) = todo.pop() {
                for g in &callees[f.index()] {
                    if !seen[g.index()] {
                        seen[g.index()] = true;
                        todo.push(*g);
                    }
                }
            }
            seen
        })
        .collect()
}

/// Lowers `program` (already optimized) to the explicit-stack form.
pub fn lower_to_stack(program: &Program, invariance: &Invariance) -> LoweredProgram {
    let reach = reachability(program);
    let liveness: Vec<Liveness> = program.functions.values().map(Liveness::compute).collect();
    let mut vars: EntityVec<GlobalVar, LoweredVar> = EntityVec::new();
    let global_of = classify_variables(program, invariance, &reach, &liveness, &mut vars);
    let result_registers = add_result_registers(program, invariance, &mut vars);
    let first_block = number_blocks(program);
    let mut functions: EntityVec<FuncId, LoweredFunction> = EntityVec::new();
    for (fid, f) in program.functions.iter() {
        functions.push(LoweredFunction {
            name: f.name.clone(),
            entry: first_block[fid.index()][autobatch_ir::Function::ENTRY.index()],
            params: f
                .params
                .iter()
                .map(|p| global_of[fid.index()][p.index()])
                .collect(),
            results: result_registers[fid.index()].clone(),
        });
    }
    let mut lowering = BlockLowering {
        program,
        reach: &reach,
        global_of: &global_of,
        result_registers: &result_registers,
        first_block: &first_block,
        functions: &functions,
        vars,
        blocks: EntityVec::new(),
    };
    for (fid, f) in program.functions.iter() {
        for b in f.blocks.keys() {
            lowering.lower_block(fid, f, b, &liveness[fid.index()]);
        }
    }
    let mut lowered = LoweredProgram {
        vars: lowering.vars,
        blocks: lowering.blocks,
        functions,
    };
    fuse_pop_push(&mut lowered);
    coalesce_copies(&mut lowered);
    continuations_last(&mut lowered);
    lowered
}

/// Classifies every variable of every function (see [`VarClass`]) and
/// numbers them as global variables; returns each function's numbering.
fn classify_variables(
    program: &Program,
    invariance: &Invariance,
    reach: &[Vec<bool>],
    liveness: &[Liveness],
    vars: &mut EntityVec<GlobalVar, LoweredVar>,
) -> Vec<Vec<GlobalVar>> {
    let mut global_of = Vec::new();
    for (fid, f) in program.functions.iter() {
        let class = storage_classes(fid, f, reach, &liveness[fid.index()]);
        let mut globals = Vec::with_capacity(f.vars.len());
        for (v, data) in f.vars.iter() {
            let class = if invariance.is_invariant(fid, v) {
                VarClass::Invariant
            } else if let Some(root) = invariance.member_root(fid, v) {
                VarClass::Member(root as u32)
            } else {
                class[v.index()]
            };
            globals.push(vars.push(LoweredVar {
                func: fid,
                var: Some(v),
                ty: data.ty.clone(),
                name: data.name.clone(),
                class,
            }));
        }
        global_of.push(globals);
    }
    global_of
}

/// The class each variable of `f` needs, invariance aside: parameters and
/// values live across blocks are registers, values live across a call whose
/// callee can reach `f` again are full.
fn storage_classes(
    fid: FuncId,
    f: &autobatch_ir::Function,
    reach: &[Vec<bool>],
    live: &Liveness,
) -> Vec<VarClass> {
    let mut class = vec![VarClass::Temporary; f.vars.len()];
    let mut at_least = |v: Var, needed: VarClass| {
        class[v.index()] = class[v.index()].max(needed);
    };
    for p in &f.params {
        at_least(*p, VarClass::Register);
    }
    for (b, block) in f.blocks.iter() {
        for v in live.live_in[b.index()].iter() {
            at_least(v, VarClass::Register);
        }
        let after = live.live_after_ops(f, b);
        for (i, op) in block.ops.iter().enumerate() {
            if let Op::Fork { dsts, .. } = op {
                // The fork ends the block; its instances run in rows of
                // their own and overwrite nothing of this activation.
                for v in after[i].iter().chain(dsts.iter().copied()) {
                    at_least(v, VarClass::Register);
                }
                continue;
            }
            let Op::Call {
                dsts,
                callee,
                catch,
                ..
            } = op
            else {
                continue;
            };
            if *catch {
                // Written in the continuation or the recovery block, read
                // in the block both go on in.
                for d in dsts.iter().filter(|d| after[i].contains(**d)) {
                    at_least(*d, VarClass::Register);
                }
            }
            let needed = if reach[callee.index()][fid.index()] {
                VarClass::Full
            } else {
                VarClass::Register
            };
            for v in after[i].iter().filter(|v| !dsts.contains(v)) {
                at_least(v, needed);
            }
        }
    }
    class
}

/// Adds the result registers of every function (where `return` leaves the
/// results for the caller); returns them per function.
fn add_result_registers(
    program: &Program,
    invariance: &Invariance,
    vars: &mut EntityVec<GlobalVar, LoweredVar>,
) -> Vec<Vec<GlobalVar>> {
    program
        .functions
        .iter()
        .map(|(fid, f)| {
            f.results
                .iter()
                .enumerate()
                .map(|(k, ty)| {
                    let class = if invariance.result_invariant(program, fid, k) {
                        VarClass::Invariant
                    } else {
                        VarClass::Register
                    };
                    vars.push(LoweredVar {
                        func: fid,
                        var: None,
                        ty: ty.clone(),
                        name: Some(format!("result{k}")),
                        class,
                    })
                })
                .collect()
        })
        .collect()
}

/// The first lowered block of every IR block: each IR block becomes one
/// block plus those its calls add ([`blocks_after`]), in order.
fn number_blocks(program: &Program) -> Vec<Vec<PcBlock>> {
    let mut next = 0usize;
    program
        .functions
        .values()
        .map(|f| {
            f.blocks
                .values()
                .map(|block| {
                    let first = PcBlock::new(next);
                    next += 1 + block.ops.iter().map(blocks_after).sum::<usize>();
                    first
                })
                .collect()
        })
        .collect()
}

/// Cuts IR blocks into lowered blocks, in the order [`number_blocks`] gave.
struct BlockLowering<'a> {
    program: &'a Program,
    reach: &'a [Vec<bool>],
    global_of: &'a [Vec<GlobalVar>],
    result_registers: &'a [Vec<GlobalVar>],
    first_block: &'a [Vec<PcBlock>],
    functions: &'a EntityVec<FuncId, LoweredFunction>,
    vars: EntityVec<GlobalVar, LoweredVar>,
    blocks: EntityVec<PcBlock, LoweredBlock>,
}

impl BlockLowering<'_> {
    fn global(&self, fid: FuncId, v: Var) -> GlobalVar {
        self.global_of[fid.index()][v.index()]
    }

    /// Lowers IR block `b` of `f`: its operations, a block boundary at each
    /// call, and its terminator.
    fn lower_block(&mut self, fid: FuncId, f: &autobatch_ir::Function, b: Block, live: &Liveness) {
        let block = &f.blocks[b];
        let after = live.live_after_ops(f, b);
        let mut current = LoweredBlock {
            counts_step: true,
            ..continuation_template(fid, b, block.loc)
        };
        for (i, op) in block.ops.iter().enumerate() {
            match op {
                Op::Prim {
                    dst,
                    prim,
                    args,
                    loc,
                } => current.ops.push(LoweredOp::Prim {
                    dst: dst.map(|d| self.global(fid, d)),
                    prim: prim.clone(),
                    args: args.iter().map(|a| self.global(fid, *a)).collect(),
                    loc: *loc,
                }),
                Op::Call { .. } => {
                    current = self.lower_call(fid, b, op, &after[i], current);
                }
                Op::Fork { .. } => {
                    current = self.lower_fork(fid, b, op, current);
                }
            }
        }
        let target = |t: Block| self.first_block[fid.index()][t.index()];
        current.term = match &block.term {
            Terminator::Jump(t) => LoweredTerm::Jump(target(*t)),
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            } => LoweredTerm::Branch {
                cond: self.global(fid, *cond),
                then_block: target(*then_block),
                else_block: target(*else_block),
            },
            Terminator::Return(returned) => {
                for (r, v) in self.result_registers[fid.index()].iter().zip(returned) {
                    current.ops.push(copy(*r, self.global(fid, *v), block.loc));
                }
                LoweredTerm::Return
            }
        };
        self.blocks.push(current);
    }

    /// Ends `current` with the call `op` (saves, argument copies,
    /// `push_jump`) and gives the block that goes on after it, which
    /// restores the saves and takes the results.
    fn lower_call(
        &mut self,
        fid: FuncId,
        b: Block,
        op: &Op,
        live_after: &autobatch_ir::liveness::VarSet,
        mut current: LoweredBlock,
    ) -> LoweredBlock {
        let Op::Call {
            dsts,
            callee,
            args,
            loc,
            catch,
        } = op
        else {
            unreachable!("lower_call is given calls")
        };
        let saves: Vec<GlobalVar> = if self.reach[callee.index()][fid.index()] {
            live_after
                .iter()
                .filter(|v| !dsts.contains(v))
                .map(|v| self.global(fid, v))
                .filter(|x| self.vars[*x].class == VarClass::Full)
                .collect()
        } else {
            Vec::new()
        };
        current
            .ops
            .extend(saves.iter().map(|s| LoweredOp::Push(*s)));
        let args: Vec<GlobalVar> = args.iter().map(|a| self.global(fid, *a)).collect();
        self.pass_arguments(fid, *callee, &args, *loc, &mut current.ops);
        let call_block = self.blocks.len();
        current.term = LoweredTerm::PushJump {
            callee: *callee,
            target: self.functions[*callee].entry,
            return_to: PcBlock::new(call_block + 1),
            recover: catch.then(|| PcBlock::new(call_block + 2)),
            loc: *loc,
        };
        self.blocks.push(current);
        let mut continuation = continuation_template(fid, b, *loc);
        continuation
            .ops
            .extend(saves.iter().rev().map(|s| LoweredOp::Pop(*s)));
        let dsts: Vec<GlobalVar> = dsts.iter().map(|d| self.global(fid, *d)).collect();
        let results = &self.result_registers[callee.index()];
        if !*catch {
            for (d, r) in dsts.iter().zip(results) {
                continuation.ops.push(copy(*d, *r, *loc));
            }
            return continuation;
        }
        // `catch`: the continuation sets the flag and copies the results; the
        // recovery block (where a member that faulted inside the call goes)
        // restores the same saves and gives zeros; both go on in one block.
        let rest = PcBlock::new(call_block + 3);
        let mut recovery = continuation.clone();
        continuation
            .ops
            .push(constant(dsts[0], Scalar::Bool(true), *loc));
        for (d, r) in dsts[1..].iter().zip(results) {
            continuation.ops.push(copy(*d, *r, *loc));
        }
        continuation.term = LoweredTerm::Jump(rest);
        recovery
            .ops
            .push(constant(dsts[0], Scalar::Bool(false), *loc));
        for d in &dsts[1..] {
            zero_into(&mut self.vars, &mut recovery.ops, fid, *d, *loc);
        }
        recovery.term = LoweredTerm::Jump(rest);
        self.blocks.push(continuation);
        self.blocks.push(recovery);
        continuation_template(fid, b, *loc)
    }

    /// Ends `current` with the fork `op` and gives the block where the
    /// forking lane goes on once its instances have returned.
    fn lower_fork(
        &mut self,
        fid: FuncId,
        b: Block,
        op: &Op,
        mut current: LoweredBlock,
    ) -> LoweredBlock {
        let Op::Fork {
            dsts,
            args,
            instances,
            loc,
            tape,
        } = op
        else {
            unreachable!("lower_fork is given forks")
        };
        let count = match instances {
            autobatch_ir::Instances::Map { count, .. } => Some(*count),
            autobatch_ir::Instances::Join(_) => None,
        };
        let calls = autobatch_ir::fork_calls(self.program, dsts, args, instances)
            .into_iter()
            .map(|call| {
                let callee = &self.functions[call.callee];
                let params = callee
                    .params
                    .iter()
                    .zip(&call.args)
                    .map(|(p, a)| (*p, a.map(|v| self.global(fid, v))))
                    .collect();
                let results = self.result_registers[call.callee.index()]
                    .iter()
                    .zip(call.dsts)
                    .map(|(r, d)| (*r, self.global(fid, *d)))
                    .collect();
                LoweredInstance {
                    callee: call.callee,
                    target: callee.entry,
                    params,
                    results,
                }
            })
            .collect();
        current.term = LoweredTerm::Fork(Box::new(LoweredFork {
            calls,
            count,
            then: PcBlock::new(self.blocks.len() + 1),
            loc: *loc,
            overflow_loc: instances.overflow_loc(*loc),
            tape: *tape,
        }));
        self.blocks.push(current);
        continuation_template(fid, b, *loc)
    }

    /// Copies the arguments into the callee's parameters. In a self call an
    /// argument may read a parameter that an earlier copy overwrites
    /// (`f(b, a)`): then the copies go through temporaries.
    fn pass_arguments(
        &mut self,
        fid: FuncId,
        callee: FuncId,
        args: &[GlobalVar],
        loc: Loc,
        ops: &mut Vec<LoweredOp>,
    ) {
        let assigned: Vec<(GlobalVar, GlobalVar)> = self.functions[callee]
            .params
            .iter()
            .zip(args)
            // A member-uniform parameter already holds what is passed.
            .filter(|(p, a)| p != a && !matches!(self.vars[**p].class, VarClass::Member(_)))
            .map(|(p, a)| (*p, *a))
            .collect();
        let hazard = assigned
            .iter()
            .enumerate()
            .any(|(k, (p, _))| assigned[k + 1..].iter().any(|(_, a)| a == p));
        if !hazard {
            ops.extend(assigned.into_iter().map(|(p, a)| copy(p, a, loc)));
            return;
        }
        let mut staged = Vec::new();
        for (p, a) in &assigned {
            let class = if self.vars[*a].class == VarClass::Invariant {
                VarClass::Invariant
            } else {
                VarClass::Temporary
            };
            let t = self.vars.push(LoweredVar {
                func: fid,
                var: None,
                ty: self.vars[*a].ty.clone(),
                name: None,
                class,
            });
            ops.push(copy(t, *a, loc));
            staged.push((*p, t));
        }
        ops.extend(staged.into_iter().map(|(p, t)| copy(p, t, loc)));
    }
}

/// Renumbers the blocks so that every continuation (the block a call returns
/// to) comes after every other block, keeping the order within each group.
///
/// The smallest-index choice then finishes the calls that members are still
/// descending into before it resumes callers, which keeps members that took
/// the same path through a recursion in step: on fib with `[3, 7, 4, 5]` the
/// addition runs 20 times, what `fib(7)` alone needs, where the source order
/// would run it 23 times.
///
/// Among the other blocks, those of the functions that fork come first: the
/// smallest-index choice then lets every lane descend a recursion of forks
/// (a tree's nodes, level by level) before any runs the work the forks'
/// instances call at their leaves, so that the leaves of all depths and
/// all members run together, then each level of the joins on the way back
/// (a schedule by depth: a `join` over a TreeLSTM's children runs its
/// leaf computation once for the whole batch).
fn continuations_last(program: &mut LoweredProgram) {
    let mut forks = vec![false; program.functions.len()];
    for block in program.blocks.values() {
        if matches!(block.term, LoweredTerm::Fork(_)) {
            forks[block.func.index()] = true;
        }
    }
    let rank = |b: &LoweredBlock| match (b.counts_step, forks[b.func.index()]) {
        (true, true) => 0,
        (true, false) => 1,
        (false, _) => 2,
    };
    let mut order: Vec<PcBlock> = program.blocks.keys().collect();
    // Stable: the source order within each group.
    order.sort_by_key(|pc| rank(&program.blocks[*pc]));
    let mut new_index = vec![PcBlock(0); order.len()];
    for (new, old) in order.iter().enumerate() {
        new_index[old.index()] = PcBlock::new(new);
    }
    let renumber = |pc: &mut PcBlock| *pc = new_index[pc.index()];
    let mut blocks: Vec<Option<LoweredBlock>> = std::mem::take(&mut program.blocks)
        .values()
        .cloned()
        .map(Some)
        .collect();
    for old in order {
        let mut block = blocks[old.index()]
            .take()
            .expect("each block is moved once");
        match &mut block.term {
            LoweredTerm::Jump(t) => renumber(t),
            LoweredTerm::Branch {
                then_block,
                else_block,
                ..
            } => {
                renumber(then_block);
                renumber(else_block);
            }
            LoweredTerm::PushJump {
                target,
                return_to,
                recover,
                ..
            } => {
                renumber(target);
                renumber(return_to);
                if let Some(r) = recover {
                    renumber(r);
                }
            }
            LoweredTerm::Return => {}
            LoweredTerm::Fork(fork) => {
                renumber(&mut fork.then);
                for call in &mut fork.calls {
                    renumber(&mut call.target);
                }
            }
        }
        program.blocks.push(block);
    }
    for f in program.functions.values_mut() {
        renumber(&mut f.entry);
    }
}

/// How many lowered blocks an operation adds after the one it is in: a
/// call one (its continuation), a catching call three (the continuation,
/// the recovery block, and the block both go on in).
fn blocks_after(op: &Op) -> usize {
    match op {
        Op::Prim { .. } => 0,
        Op::Call { catch: false, .. } => 1,
        Op::Call { catch: true, .. } => 3,
        Op::Fork { .. } => 1,
    }
}

/// An empty continuation block of IR block `origin` of `func`.
fn continuation_template(func: FuncId, origin: Block, loc: Loc) -> LoweredBlock {
    LoweredBlock {
        func,
        origin,
        counts_step: false,
        loc,
        ops: Vec::new(),
        term: LoweredTerm::Return,
    }
}

fn constant(dst: GlobalVar, value: Scalar, loc: Loc) -> LoweredOp {
    LoweredOp::Prim {
        dst: Some(dst),
        prim: Prim::Const(value),
        args: Vec::new(),
        loc,
    }
}

/// Appends to `ops` the operations that set `dst` to zeros of its type (a
/// constant, then one `fill` per dimension, innermost first, through
/// temporaries of `func`).
fn zero_into(
    vars: &mut EntityVec<GlobalVar, LoweredVar>,
    ops: &mut Vec<LoweredOp>,
    func: FuncId,
    dst: GlobalVar,
    loc: Loc,
) {
    let ty = vars[dst].ty.clone();
    let zero = Scalar::zero(ty.elem);
    let mut value_ty = TensorType {
        elem: ty.elem,
        dims: Vec::new(),
    };
    let temporary = |vars: &mut EntityVec<GlobalVar, LoweredVar>, ty: &TensorType| {
        vars.push(LoweredVar {
            func,
            var: None,
            ty: ty.clone(),
            name: None,
            class: VarClass::Temporary,
        })
    };
    let mut value = if ty.dims.is_empty() {
        dst
    } else {
        temporary(vars, &value_ty)
    };
    ops.push(constant(value, zero, loc));
    for (k, dim) in ty.dims.iter().enumerate().rev() {
        value_ty.dims.insert(0, *dim);
        let filled = if k == 0 {
            dst
        } else {
            temporary(vars, &value_ty)
        };
        ops.push(LoweredOp::Prim {
            dst: Some(filled),
            prim: Prim::Fill(*dim),
            args: vec![value],
            loc,
        });
        value = filled;
    }
}

fn copy(dst: GlobalVar, src: GlobalVar, loc: Loc) -> LoweredOp {
    LoweredOp::Prim {
        dst: Some(dst),
        prim: Prim::Copy,
        args: vec![src],
        loc,
    }
}

/// `t = op(..); ...; p = copy t` where `t` is a temporary read only by that
/// copy, and `p` is not touched in between, becomes `p = op(..)`: one
/// operation and one buffer less (argument passing makes many of these).
fn coalesce_copies(program: &mut LoweredProgram) {
    let mentions = |op: &LoweredOp, v: GlobalVar| match op {
        LoweredOp::Prim { dst, args, .. } => *dst == Some(v) || args.contains(&v),
        LoweredOp::Push(x) | LoweredOp::Pop(x) | LoweredOp::Peek(x) => *x == v,
    };
    for block in program.blocks.values_mut() {
        let mut i = 0;
        while i < block.ops.len() {
            let LoweredOp::Prim { dst: Some(t), .. } = block.ops[i] else {
                i += 1;
                continue;
            };
            if program.vars[t].class != VarClass::Temporary {
                i += 1;
                continue;
            }
            let Some(j) = (i + 1..block.ops.len()).find(|j| mentions(&block.ops[*j], t)) else {
                i += 1;
                continue;
            };
            let target = match &block.ops[j] {
                LoweredOp::Prim {
                    dst: Some(p),
                    prim: Prim::Copy,
                    args,
                    ..
                } if args[0] == t && *p != t => Some(*p),
                _ => None,
            };
            let read_later =
                block.ops[j + 1..].iter().any(|op| mentions(op, t)) || term_reads(&block.term, t);
            match target {
                Some(p)
                    if !read_later
                        && !matches!(
                            program.vars[p].class,
                            VarClass::Invariant | VarClass::Member(_)
                        )
                        && !block.ops[i + 1..j].iter().any(|op| mentions(op, p)) =>
                {
                    if let LoweredOp::Prim { dst, .. } = &mut block.ops[i] {
                        *dst = Some(p);
                    }
                    block.ops.remove(j);
                }
                _ => i += 1,
            }
        }
    }
}

/// Whether the terminator `term` reads `v`: a branch's condition, or what a
/// fork passes to its instances (a temporary a fork's arguments read after
/// it was copied must keep its own value).
fn term_reads(term: &LoweredTerm, v: GlobalVar) -> bool {
    match term {
        LoweredTerm::Branch { cond, .. } => *cond == v,
        LoweredTerm::Fork(fork) => fork.reads().any(|x| x == v),
        LoweredTerm::Jump(_) | LoweredTerm::PushJump { .. } | LoweredTerm::Return => false,
    }
}

/// Optimization 5: `pop v; ...; push v` with no write of `v` in between.
///
/// The pair becomes `peek v` (restore `v` from the top of its stack and
/// leave the saved value there). It disappears entirely only when `v` is
/// read neither between the two nor after the `push` before the block
/// writes `v` again: the value in `v` at the `pop` is the one a nested
/// activation left there, so skipping the restore is sound only when
/// nothing reads `v` before it is overwritten. A read may come after the
/// `push` (the argument copies of the next call), or outside the block (a
/// callee reading its parameter in place, the next block), so reaching the
/// end of the block counts as a read.
fn fuse_pop_push(program: &mut LoweredProgram) {
    for block in program.blocks.values_mut() {
        let mut i = 0;
        while i < block.ops.len() {
            let LoweredOp::Pop(v) = block.ops[i] else {
                i += 1;
                continue;
            };
            let Some(push) = matching_push(&block.ops, i, v) else {
                i += 1;
                continue;
            };
            let read_between = block.ops[i + 1..push].iter().any(|op| op_reads(op, v));
            block.ops.remove(push);
            if read_between || read_before_overwritten(block, push, v) {
                block.ops[i] = LoweredOp::Peek(v);
                i += 1;
            } else {
                block.ops.remove(i);
            }
        }
    }
}

/// The index of the `push v` that a `pop v` at `pop` can fuse with: the
/// first later `push v` of the block with no write, `pop` or `peek` of `v`
/// in between.
fn matching_push(ops: &[LoweredOp], pop: usize, v: GlobalVar) -> Option<usize> {
    for (j, op) in ops.iter().enumerate().skip(pop + 1) {
        match op {
            LoweredOp::Push(w) if *w == v => return Some(j),
            LoweredOp::Prim { dst: Some(d), .. } if *d == v => return None,
            LoweredOp::Pop(w) | LoweredOp::Peek(w) if *w == v => return None,
            _ => {}
        }
    }
    None
}

fn op_reads(op: &LoweredOp, v: GlobalVar) -> bool {
    match op {
        LoweredOp::Prim { args, .. } => args.contains(&v),
        LoweredOp::Push(w) => *w == v,
        LoweredOp::Pop(_) | LoweredOp::Peek(_) => false,
    }
}

/// Whether `v` may be read, from operation `from` on, before this block
/// overwrites it: by a later operation, the terminator, or anything after
/// the block.
fn read_before_overwritten(block: &LoweredBlock, from: usize, v: GlobalVar) -> bool {
    for op in &block.ops[from..] {
        if op_reads(op, v) {
            return true;
        }
        match op {
            LoweredOp::Prim { dst: Some(d), .. } if *d == v => return false,
            LoweredOp::Pop(w) | LoweredOp::Peek(w) if *w == v => return false,
            _ => {}
        }
    }
    true
}

/// The text form of the lowered program (`autobatch ir --lowered`): a
/// summary line, each function with its variables, then each block.
pub fn lowered_to_string(program: &Program, lowered: &LoweredProgram) -> String {
    let mut out = lowered_summary(lowered);
    for (fid, f) in lowered.functions.iter() {
        let params: Vec<String> = f.params.iter().map(|p| var_name(lowered, *p)).collect();
        let results: Vec<String> = f.results.iter().map(|p| p.to_string()).collect();
        let _ = writeln!(
            out,
            "fn {fid} {}({}) -> ({})  entry {}",
            f.name,
            params.join(", "),
            results.join(", "),
            f.entry
        );
        let by_class: Vec<String> = lowered
            .vars
            .iter()
            .filter(|(_, v)| v.func == fid)
            .map(|(x, v)| {
                format!(
                    "{}: {} {}",
                    var_name(lowered, x),
                    program.type_name(&v.ty),
                    v.class.name()
                )
            })
            .collect();
        let _ = writeln!(out, "  vars: {}", by_class.join(", "));
    }
    for (pc, block) in lowered.blocks.iter() {
        write_lowered_block(&mut out, pc, block);
    }
    out
}

/// `x3 name`, or `x3` for a variable without a name.
fn var_name(lowered: &LoweredProgram, x: GlobalVar) -> String {
    match &lowered.vars[x].name {
        Some(n) => format!("{x} {n}"),
        None => format!("{x}"),
    }
}

/// The first line of the lowered text: the stack pushes and how many
/// variables each class has.
fn lowered_summary(lowered: &LoweredProgram) -> String {
    let mut class_counts = [0usize; 5];
    for v in lowered.vars.values() {
        let k = match v.class {
            VarClass::Invariant => 0,
            VarClass::Temporary => 1,
            VarClass::Register => 2,
            VarClass::Full => 3,
            VarClass::Member(_) => 4,
        };
        class_counts[k] += 1;
    }
    let members = match class_counts[4] {
        0 => String::new(),
        n => format!(", {n} member"),
    };
    format!(
        "; stack pushes: {}; variables: {} invariant, {} temporary, {} register, {} full{members}\n",
        lowered.push_count(),
        class_counts[0],
        class_counts[1],
        class_counts[2],
        class_counts[3]
    )
}

/// Block `pc`'s heading, its operations and its terminator, a line each.
fn write_lowered_block(out: &mut String, pc: impl std::fmt::Display, block: &LoweredBlock) {
    let list = |xs: &[GlobalVar]| {
        xs.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "{pc} ({} {}{}):  @{}",
        block.func,
        block.origin,
        if block.counts_step {
            ""
        } else {
            ", continuation"
        },
        block.loc
    );
    for op in &block.ops {
        let _ = match op {
            LoweredOp::Prim {
                dst,
                prim,
                args,
                loc,
            } => {
                let lhs = dst.map(|d| format!("{d} = ")).unwrap_or_default();
                let rhs = if args.is_empty() {
                    String::new()
                } else {
                    format!(" {}", list(args))
                };
                writeln!(out, "  {lhs}{prim}{rhs}  @{loc}")
            }
            LoweredOp::Push(x) => writeln!(out, "  push {x}"),
            LoweredOp::Pop(x) => writeln!(out, "  pop {x}"),
            LoweredOp::Peek(x) => writeln!(out, "  peek {x}"),
        };
    }
    let _ = match &block.term {
        LoweredTerm::Jump(t) => writeln!(out, "  jump {t}"),
        LoweredTerm::Branch {
            cond,
            then_block,
            else_block,
        } => {
            writeln!(out, "  branch {cond}, {then_block}, {else_block}")
        }
        LoweredTerm::PushJump {
            callee,
            target,
            return_to,
            recover,
            loc,
        } => {
            let recover = recover
                .map(|r| format!(", recover at {r}"))
                .unwrap_or_default();
            writeln!(
                out,
                "  push_jump {callee} {target}, return to {return_to}{recover}  @{loc}"
            )
        }
        LoweredTerm::Return => writeln!(out, "  return"),
        LoweredTerm::Fork(fork) => writeln!(out, "  {}", fork_text(fork)),
    };
}

/// `fork.4 f1 pc3(x2 <- each x0, x3 <- index) -> (x7 <- x4), then pc9  @l:c`.
fn fork_text(fork: &LoweredFork) -> String {
    let count = match fork.count {
        None => String::new(),
        Some(autobatch_ir::Dim::Fixed(n)) => format!(".{n}"),
        Some(autobatch_ir::Dim::Symbolic(s)) => format!(".sym{}", s.0),
    };
    let calls: Vec<String> = fork
        .calls
        .iter()
        .map(|c| {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|(p, a)| match a {
                    LoweredArg::Whole(v) => format!("{p} <- {v}"),
                    LoweredArg::Element(v) => format!("{p} <- each {v}"),
                    LoweredArg::Index => format!("{p} <- index"),
                })
                .collect();
            let results: Vec<String> = c
                .results
                .iter()
                .map(|(r, d)| format!("{d} <- {r}"))
                .collect();
            format!(
                "{} {}({}) -> ({})",
                c.callee,
                c.target,
                params.join(", "),
                results.join(", ")
            )
        })
        .collect();
    format!(
        "fork{count} {}, then {}  @{}",
        calls.join(", "),
        fork.then,
        fork.loc
    )
}
