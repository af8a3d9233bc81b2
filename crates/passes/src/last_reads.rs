//! Last reads ([`last_reads`]), over the IR's liveness
//! (`autobatch_ir::liveness`): a read is the last of its value when the
//! variable is not live after the operation, or the operation itself writes
//! the variable (then what is live after it is the new value), and the same
//! operation does not read the variable again at a later operand position.
//! After a last read an executor may move the value instead of cloning it
//! (into a callee's frame, out of a returning frame, into an `index_set`
//! that then updates it in place).

use autobatch_ir::liveness::{Liveness, VarSet};
use autobatch_ir::{Function, Terminator, Var};

/// For every operation of a function: per operand position, whether that
/// read is the last read of its value; and the same for the operands of
/// each block's `return`.
#[derive(Clone, Debug)]
pub struct LastReads {
    /// Indexed by block, then operation, then operand position.
    pub ops: Vec<Vec<Vec<bool>>>,
    /// Indexed by block: per returned variable (empty for other terminators).
    pub returns: Vec<Vec<bool>>,
}

/// Whether the read at `position` of `reads` is the last read of its value.
fn is_last_read(reads: &[Var], position: usize, live_after: &VarSet, written: &[Var]) -> bool {
    let v = reads[position];
    let needed_later = live_after.contains(v) && !written.contains(&v);
    let read_again_here = reads[position + 1..].contains(&v);
    !needed_later && !read_again_here
}

/// Which reads of each operation and `return` of `function` are last reads
/// ([`LastReads`]).
pub fn last_reads(function: &Function) -> LastReads {
    let liveness = Liveness::compute(function);
    let mut ops = Vec::with_capacity(function.blocks.len());
    let mut returns = Vec::with_capacity(function.blocks.len());
    for (b, block) in function.blocks.iter() {
        let returned: Vec<bool> = match &block.term {
            // The frame ends with the return, so only a repeated variable must be cloned.
            Terminator::Return(vars) => (0..vars.len())
                .map(|k| !vars[k + 1..].contains(&vars[k]))
                .collect(),
            _ => Vec::new(),
        };
        returns.push(returned);
        let live_after = liveness.live_after_ops(function, b);
        let per_op = block
            .ops
            .iter()
            .zip(&live_after)
            .map(|(op, live)| {
                (0..op.uses().len())
                    .map(|position| is_last_read(op.uses(), position, live, op.defs()))
                    .collect()
            })
            .collect();
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
        blocks.push(BlockData::new(
            vec![prim(1, Prim::Copy, &[0]), prim(2, add.clone(), &[1, 1])],
            Terminator::Jump(Block(1)),
            Loc::default(),
        ));
        blocks.push(BlockData::new(
            vec![
                prim(3, add, &[0, 2]),
                prim(0, Prim::Const(Scalar::I64(1)), &[]),
            ],
            Terminator::Return(vec![Var(3), Var(3)]),
            Loc::default(),
        ));
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
            uncounted: false,
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
