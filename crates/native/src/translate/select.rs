//! Branches merged into selects (if-conversion): `if c { x = a } else { x
//! = b }` whose arms are short, cannot stop and compute only scalars runs
//! both arms and picks each assigned variable with a `select`, instead of
//! a conditional jump that the machine predicts badly when `c` follows the
//! data (Collatz's `x % 2 == 0`: about half the iterations mispredicted).
//!
//! The member sees nothing of it: an arm's operations are computed whether
//! or not its path is taken, but none of them can stop the member or
//! touch memory (integer arithmetic wraps; a division's divisor is a
//! constant other than 0 and -1), so only the values of the path taken
//! are kept. What the path would have counted is counted exactly: the
//! arm's entry takes its step only on its path, and stops the member at
//! the arm's location if no step is left; each of its segments' counters
//! grows by one on its path and by zero on the other.

use std::collections::HashMap;

use autobatch_ir::liveness::{Liveness, VarSet};
use autobatch_ir::{BinaryOp, Block, EntityRef, Function, Op, Prim, Terminator, UnaryOp, Var};
use autobatch_types::ScalarType;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, Value};

use super::function::{known_constant, Translator};
use crate::{check, Stop};

/// At most this many user operations in an arm: past it, computing both
/// arms costs more than a mispredicted branch saves.
const MAX_ARM_OPS: usize = 8;

/// A branch whose arms meet again at `join`, each arm (if any: a missing
/// one goes straight to `join`) a block reached only from the branch,
/// jumping to `join`, whose operations may all run speculatively.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Merge {
    pub cond: Var,
    pub then_arm: Option<Block>,
    pub else_arm: Option<Block>,
    pub join: Block,
    /// The variables an arm assigns that are live at the branch (each arm
    /// starts from their values there).
    pub restored: Vec<Var>,
    /// The variables an arm assigns that are live at the join: each is
    /// picked from the arm taken (the others die in their arm).
    pub picked: Vec<Var>,
}

/// Per block of `function`: the merge its branch becomes, if it is one.
pub(super) fn merges(function: &Function) -> Vec<Option<Merge>> {
    let liveness = Liveness::compute(function);
    let mut predecessors = vec![0_usize; function.blocks.len()];
    for data in function.blocks.values() {
        for s in data.term.successors() {
            predecessors[s.index()] += 1;
        }
    }
    // The join an arm jumps to, if `arm` may be merged into `from`'s branch.
    let join_of = |from: Block, arm: Block| -> Option<Block> {
        let data = &function.blocks[arm];
        let Terminator::Jump(join) = data.term else {
            return None;
        };
        // An arm takes its step on its path: an uncounted one stays a block.
        let alone = predecessors[arm.index()] == 1
            && arm != from
            && arm != Function::ENTRY
            && !data.uncounted;
        (alone && join != arm && speculatable(function, &data.ops)).then_some(join)
    };
    function
        .blocks
        .iter()
        .map(|(block, data)| {
            let Terminator::Branch {
                cond,
                then_block,
                else_block,
            } = data.term
            else {
                return None;
            };
            if then_block == else_block {
                return None;
            }
            let (then_join, else_join) = (join_of(block, then_block), join_of(block, else_block));
            let merge = |then_arm: Option<Block>, else_arm: Option<Block>, join: Block| {
                let mut assigned: Vec<Var> = then_arm
                    .iter()
                    .chain(&else_arm)
                    .flat_map(|arm| function.blocks[*arm].ops.iter())
                    .flat_map(|op| op.defs().iter().copied())
                    .collect();
                assigned.sort_by_key(|v| v.index());
                assigned.dedup();
                let live = |set: &VarSet| -> Vec<Var> {
                    assigned
                        .iter()
                        .copied()
                        .filter(|v| set.contains(*v))
                        .collect()
                };
                Some(Merge {
                    cond,
                    then_arm,
                    else_arm,
                    join,
                    restored: live(&liveness.live_out[block.index()]),
                    picked: live(&liveness.live_in[join.index()]),
                })
            };
            match (then_join, else_join) {
                (Some(a), Some(b)) if a == b && a != then_block && a != else_block => {
                    merge(Some(then_block), Some(else_block), a)
                }
                (Some(a), _) if a == else_block => merge(Some(then_block), None, else_block),
                (_, Some(b)) if b == then_block => merge(None, Some(else_block), then_block),
                _ => None,
            }
        })
        .collect()
}

/// Whether every operation of `ops` may run on a path not taken: scalar
/// operations computed inline that cannot stop the member, at most
/// [`MAX_ARM_OPS`] of them.
fn speculatable(function: &Function, ops: &[Op]) -> bool {
    let mut constants = HashMap::new();
    let mut user_ops = 0;
    for op in ops {
        let Op::Prim {
            dst: Some(d),
            prim,
            args,
            ..
        } = op
        else {
            return false;
        };
        let vars = &function.vars;
        if !args.iter().chain([d]).all(|v| vars[*v].ty.is_scalar()) {
            return false;
        }
        let types: Vec<ScalarType> = args.iter().map(|v| vars[*v].ty.elem).collect();
        if !check::inline(prim, &types, true) || !cheap(prim, &types, args, &constants) {
            return false;
        }
        user_ops += usize::from(!prim.is_bookkeeping());
        match known_constant(function, &constants, op) {
            Some(value) => constants.insert(*d, value),
            None => constants.remove(d),
        };
    }
    user_ops <= MAX_ARM_OPS
}

/// Whether native code computes `prim` with a few instructions, without a
/// call and without a check that could stop the member.
fn cheap(prim: &Prim, types: &[ScalarType], args: &[Var], constants: &HashMap<Var, i128>) -> bool {
    let float = types.first().is_some_and(|t| t.is_float());
    match prim {
        Prim::Const(_) | Prim::Copy | Prim::Compare(_) | Prim::Cast(_) | Prim::Select => true,
        Prim::Unary(UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs) => true,
        Prim::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) => true,
        Prim::Binary(BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor) => true,
        Prim::Binary(BinaryOp::Max | BinaryOp::Min) => !float,
        Prim::Binary(BinaryOp::Div) if float => true,
        Prim::Binary(BinaryOp::Div | BinaryOp::Rem) => {
            // A known divisor other than 0 and -1 (the two that stop or wrap).
            constants.get(&args[1]).is_some_and(|c| *c != 0 && *c != -1)
        }
        _ => false,
    }
}

impl Translator<'_, '_, '_> {
    /// In place of a branch's terminator: both arms of `merge`, each
    /// assigned variable picked by the condition, then the join.
    pub(super) fn merged_branch(&mut self, merge: &Merge) -> Result<(), String> {
        let c = self.b.use_var(self.vars[merge.cond.index()]);
        self.merged_step(merge, c);
        let value = |t: &mut Self, v: &Var| t.b.use_var(t.vars[v.index()]);
        let restored: Vec<Value> = merge.restored.iter().map(|v| value(self, v)).collect();
        // A picked variable that an arm leaves alone keeps its value at the
        // branch (where it is live: the join reads it on that arm's path).
        let before: Vec<Value> = merge.picked.iter().map(|v| value(self, v)).collect();
        let (constants, remainders) = (self.constants.clone(), self.remainders.clone());
        let then_taken = self.b.ins().uextend(types::I64, c);
        let else_taken = self.b.ins().bxor_imm_u(then_taken, 1);
        let mut values = Vec::new();
        for (arm, taken) in [(merge.then_arm, then_taken), (merge.else_arm, else_taken)] {
            let Some(arm) = arm else {
                values.push(before.clone());
                continue;
            };
            for (v, value) in merge.restored.iter().zip(&restored) {
                self.b.def_var(self.vars[v.index()], *value);
            }
            self.constants = constants.clone();
            self.remainders = remainders.clone();
            // The arm whose values are picked where a low-bits test holds
            // (the then arm of `x % 2 == 0`) divides `x` exactly.
            let picked_when_zero = Some(arm) == merge.then_arm;
            self.divisible = self
                .low_tests
                .get(&merge.cond)
                .filter(|test| test.zero == picked_when_zero)
                .and_then(|test| Some((test.remainder.var?, test.remainder.mask)));
            self.operations(arm, &self.function.blocks[arm], Some(taken))?;
            self.divisible = None;
            values.push(merge.picked.iter().map(|v| value(self, v)).collect());
        }
        let picks = merge.picked.iter().zip(&values[0]).zip(&values[1]);
        for ((v, then_value), else_value) in picks {
            let picked = self.b.ins().select(c, *then_value, *else_value);
            self.b.def_var(self.vars[v.index()], picked);
        }
        self.constants.clear();
        self.remainders.clear();
        let join = self.target(merge.join);
        self.b.ins().jump(join, &[]);
        Ok(())
    }

    /// Whether the member's path enters an arm of `merge` (as a `bool`):
    /// always when both arms exist, else where `c` picks the one there is.
    fn arm_on_path(&mut self, merge: &Merge, c: Value) -> Value {
        match (merge.then_arm, merge.else_arm) {
            (Some(_), Some(_)) => self.b.ins().iconst(types::I8, 1),
            (Some(_), None) => c,
            (None, _) => self.b.ins().bxor_imm_u(c, 1),
        }
    }

    /// The step the arm taken takes at its entry (none on a missing arm's
    /// path), or the step limit at that arm.
    fn merged_step(&mut self, merge: &Merge, c: Value) {
        let entered = self.arm_on_path(merge, c);
        let taken = self.b.ins().uextend(types::I64, entered);
        if self.in_fast.is_some() {
            // The loop's dispatch saw steps for the whole pass.
            let left = self.b.use_var(self.steps);
            let left = self.b.ins().isub(left, taken);
            self.b.def_var(self.steps, left);
            return;
        }
        self.refuel_if_empty();
        let left = self.b.use_var(self.steps);
        let out = self.b.ins().icmp_imm_s(IntCC::Equal, left, 0);
        let stops = self.b.ins().band(out, entered);
        let code = |t: &mut Self, arm: Option<Block>| {
            arm.map(|arm| {
                let loc = t.function.blocks[arm].loc;
                t.unit.stop(Stop::StepLimit(loc))
            })
        };
        let (then_code, else_code) = (code(self, merge.then_arm), code(self, merge.else_arm));
        // The stop code (the arm's location) is picked off the hot path.
        let stop = self.b.create_block();
        self.b.set_cold_block(stop);
        let go_on = self.b.create_block();
        self.b.ins().brif(stops, stop, &[], go_on, &[]);
        self.b.switch_to_block(stop);
        let mut code_of = |code: Option<u32>| {
            let code = code
                .or(then_code)
                .or(else_code)
                .expect("a merge has an arm");
            self.b.ins().iconst(types::I32, i64::from(code))
        };
        let (a, b) = (code_of(then_code), code_of(else_code));
        let code = self.b.ins().select(c, a, b);
        self.b.ins().jump(self.stop_block, &[BlockArg::Value(code)]);
        self.b.switch_to_block(go_on);
        let left = self.b.ins().isub(left, taken);
        self.b.def_var(self.steps, left);
    }
}
