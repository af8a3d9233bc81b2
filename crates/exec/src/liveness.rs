//! Which reads of a variable are its last: after them the value is never
//! read again before the variable is written, so an executor may move the
//! value out instead of cloning it (into a callee's frame, out of a
//! returning frame, or into an `index_set` that then updates it in place).
//!
//! This is ordinary backward liveness over one function's blocks. A read is
//! a last read when the variable is not live after the operation, or the
//! operation itself writes the variable (then what is live after it is the
//! new value), and the same operation does not read the variable again at a
//! later operand position.

use autobatch_ir::{EntityRef, Function, Terminator, Var};

/// For every operation of a function: per operand position, whether that
/// read is the last read of its value; and the same for the operands of
/// each block's `return`.
#[derive(Clone, Debug)]
pub(crate) struct LastReads {
    /// Indexed by block, then operation, then operand position.
    pub ops: Vec<Vec<Vec<bool>>>,
    /// Indexed by block: per returned variable (empty for other terminators).
    pub returns: Vec<Vec<bool>>,
}

/// A set of variables of one function.
#[derive(Clone, PartialEq, Eq)]
struct VarSet {
    words: Vec<u64>,
}

impl VarSet {
    fn new(var_count: usize) -> VarSet {
        VarSet {
            words: vec![0; var_count.div_ceil(64)],
        }
    }
    fn insert(&mut self, v: Var) {
        self.words[v.index() / 64] |= 1 << (v.index() % 64);
    }
    fn remove(&mut self, v: Var) {
        self.words[v.index() / 64] &= !(1 << (v.index() % 64));
    }
    fn contains(&self, v: Var) -> bool {
        self.words[v.index() / 64] & (1 << (v.index() % 64)) != 0
    }
    fn union_with(&mut self, other: &VarSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }
}

/// Whether the read at `position` of `reads` is the last read of its value.
fn is_last_read(reads: &[Var], position: usize, live_after: &VarSet, written: &[Var]) -> bool {
    let v = reads[position];
    let needed_later = live_after.contains(v) && !written.contains(&v);
    let read_again_here = reads[position + 1..].contains(&v);
    !needed_later && !read_again_here
}

pub(crate) fn last_reads(function: &Function) -> LastReads {
    let var_count = function.vars.len();
    let block_count = function.blocks.len();

    // Variables live on entry to each block, to a fixed point. Blocks are
    // visited last to first because most edges go forward.
    let mut live_in: Vec<VarSet> = vec![VarSet::new(var_count); block_count];
    let live_out_of = |live_in: &[VarSet], term: &Terminator| {
        let mut out = VarSet::new(var_count);
        for s in term.successors() {
            out.union_with(&live_in[s.index()]);
        }
        out
    };
    let mut changed = true;
    while changed {
        changed = false;
        for (b, block) in function.blocks.iter().rev() {
            let mut live = live_out_of(&live_in, &block.term);
            for v in block.term.uses() {
                live.insert(*v);
            }
            for op in block.ops.iter().rev() {
                for d in op.defs() {
                    live.remove(*d);
                }
                for u in op.uses() {
                    live.insert(*u);
                }
            }
            if live != live_in[b.index()] {
                live_in[b.index()] = live;
                changed = true;
            }
        }
    }

    let mut ops = Vec::with_capacity(block_count);
    let mut returns = Vec::with_capacity(block_count);
    for (_, block) in function.blocks.iter() {
        let mut live = live_out_of(&live_in, &block.term);
        let returned: Vec<bool> = match &block.term {
            // The frame ends with the return, so only a repeated variable must be cloned.
            Terminator::Return(vars) => (0..vars.len())
                .map(|k| !vars[k + 1..].contains(&vars[k]))
                .collect(),
            _ => Vec::new(),
        };
        returns.push(returned);
        for v in block.term.uses() {
            live.insert(*v);
        }
        let mut per_op = vec![Vec::new(); block.ops.len()];
        for (k, op) in block.ops.iter().enumerate().rev() {
            per_op[k] = (0..op.uses().len())
                .map(|position| is_last_read(op.uses(), position, &live, op.defs()))
                .collect();
            for d in op.defs() {
                live.remove(*d);
            }
            for u in op.uses() {
                live.insert(*u);
            }
        }
        ops.push(per_op);
    }
    LastReads { ops, returns }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_ir::{
        Block, BlockData, EntityVec, Loc, Op, Prim, ScalarType, TensorType, Type, VarData,
    };
    use autobatch_types::Scalar;

    fn i64_type() -> TensorType {
        TensorType::scalar(ScalarType::I64)
    }

    /// `fn f(v0) { b0: v1 = copy v0; v2 = add v1, v1; jump b1  b1: v3 = add v0, v2; return v3, v3 }`
    #[test]
    fn last_reads_across_blocks() {
        let mut vars = EntityVec::new();
        for _ in 0..4 {
            vars.push(VarData {
                ty: i64_type(),
                name: None,
            });
        }
        let prim = |dst: u32, prim: Prim, args: &[u32]| Op::Prim {
            dst: Some(Var(dst)),
            prim,
            args: args.iter().map(|a| Var(*a)).collect(),
            loc: Loc::default(),
        };
        let add = Prim::Binary(autobatch_ir::BinaryOp::Add);
        let mut blocks = EntityVec::new();
        blocks.push(BlockData {
            ops: vec![prim(1, Prim::Copy, &[0]), prim(2, add.clone(), &[1, 1])],
            term: Terminator::Jump(Block(1)),
            loc: Loc::default(),
        });
        blocks.push(BlockData {
            ops: vec![
                prim(3, add, &[0, 2]),
                prim(0, Prim::Const(Scalar::I64(1)), &[]),
            ],
            term: Terminator::Return(vec![Var(3), Var(3)]),
            loc: Loc::default(),
        });
        let function = Function {
            name: "f".into(),
            signature: vec![autobatch_ir::Param {
                name: "x".into(),
                ty: Type::Tensor(i64_type()),
            }],
            ret_type: Type::Tuple(vec![Type::Tensor(i64_type()), Type::Tensor(i64_type())]),
            params: vec![Var(0)],
            results: vec![i64_type(), i64_type()],
            vars,
            blocks,
            loc: Loc::default(),
        };
        let reads = last_reads(&function);
        // v0 is read again in b1, so the copy must not move it.
        assert_eq!(reads.ops[0][0], vec![false]);
        // v1 read twice by the same op: only the second read is the last.
        assert_eq!(reads.ops[0][1], vec![false, true]);
        // In b1, v0 and v2 are dead after the add (v0 is rewritten next).
        assert_eq!(reads.ops[1][0], vec![true, true]);
        assert_eq!(reads.returns[1], vec![false, true]);
        assert!(reads.returns[0].is_empty());
    }
}
