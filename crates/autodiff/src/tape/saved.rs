//! What the forward part saves for each block: the values the adjoint
//! rules of its operations read ([`rules::adjoint_reads`]), each pushed
//! before the definition that ends it or at the block's end.

use super::*;

/// What the tape holds for one block of `g`.
#[derive(Default)]
pub(super) struct BlockTape {
    /// Per operation, the variables whose value is pushed just before it.
    pub before: Vec<Vec<Var>>,
    /// Pushed at the end of the block.
    pub end: Vec<Var>,
}

/// Whether `op` has adjoint code: its result is active and reaches a
/// float result ([`analysis::useful`]), and some operand is active.
pub(super) fn has_adjoint(op: &Op, act: &[bool], useful: &[bool]) -> bool {
    match op {
        Op::Prim {
            dst: Some(y),
            prim,
            args,
            ..
        } => {
            analysis::propagates(prim)
                && act[y.index()]
                && useful[y.index()]
                && args.iter().any(|a| act[a.index()])
        }
        _ => false,
    }
}

/// What the adjoint of `op` reads ([`rules::adjoint_reads`]), when it has one.
fn adjoint_reads(op: &Op, act: &[bool], useful: &[bool]) -> Option<rules::AdjointReads> {
    match op {
        Op::Prim { prim, args, .. } if has_adjoint(op, act, useful) => {
            Some(rules::adjoint_reads(prim, args, &|v| act[v.index()]))
        }
        _ => None,
    }
}

/// The tape of one block: which values are pushed where. A value is a
/// variable between two definitions; one that an adjoint reads is pushed
/// before the definition that ends it, or at the block's end. An
/// [`Invariant`] is never pushed, but the index of a row the block uses is.
pub(super) fn block_tape(
    data: &BlockData,
    act: &[bool],
    useful: &[bool],
    inv: &[Option<Invariant>],
) -> BlockTape {
    let ops = &data.ops;
    let mut needed: BTreeSet<Var> = BTreeSet::new();
    let mentioned = ops
        .iter()
        .flat_map(|op| op.uses().iter().chain(op.defs()))
        .chain(data.term.uses().iter());
    // The indices of the rows the block uses are held all through it: the
    // backward part finds each row again by its index.
    let mut indices: BTreeSet<Var> = BTreeSet::new();
    for v in mentioned {
        if let Some(Invariant::Row { index: i, .. }) = inv[v.index()] {
            if inv[i.index()].is_none() {
                indices.insert(i);
            }
        }
    }
    needed.extend(indices.iter().copied());
    let taped = |v: &&Var| inv[v.index()].is_none();
    let mut tape = BlockTape::default();
    for op in ops {
        let reads = adjoint_reads(op, act, useful);
        if let Some(reads) = &reads {
            needed.extend(reads.operands.iter().filter(taped).copied());
        }
        // A shadow index's first value (a constant at the entry) ends no
        // value of its: nothing is saved before it.
        let starts_index = matches!(
            op,
            Op::Prim {
                prim: Prim::Const(_),
                ..
            }
        ) && op.defs().iter().any(|d| indices.contains(d));
        let mut before: Vec<Var> = Vec::new();
        for d in op.defs() {
            if needed.remove(d) && !before.contains(d) && !starts_index {
                before.push(*d);
            }
        }
        tape.before.push(before);
        if reads.is_some_and(|r| r.result) {
            needed.extend(op.defs().iter().filter(taped).copied());
        }
        needed.extend(op.defs().iter().filter(|d| indices.contains(d)));
    }
    tape.end = needed.into_iter().collect();
    tape
}
