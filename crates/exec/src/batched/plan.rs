//! The block planner: what the step runner ([`super::step`]) needs of each
//! block, computed once before any block runs, the same way for the IR
//! form (local-static, per function) and the explicit-stack form
//! (program-counter, for the whole program).
//!
//! An executor describes each block as a list of [`PlanOp`]s (slots by
//! index, a primitive or an operation of its own control: a call, a fork, a
//! value-stack move) and which variables could be step temporaries by its
//! form. The planner then decides, per operation:
//!
//! - whether it runs split by size class in a ragged batch
//!   ([`SizeClasses::plan`]); the operands of such an operation, and those
//!   an indexed assignment writes in place, are no step temporaries
//!   ([`super::temps`]);
//! - the step temporaries it mentions last (their buffers go back after it);
//! - with fusion on, the fused chains starting at it ([`super::chains`]) and
//!   its role in an indexed product ([`super::indexed`]); an index that is
//!   a step temporary then lives until its last product.
//!
//! Invariant: a plan depends on the program, the run's size classes and
//! whether it fuses only, never on the members' values.

use autobatch_ir::{EntityRef, Loc, Prim};
use autobatch_types::TensorType;

use super::chains::{find_chains, ChainSite, OpView};
use super::classes::{SizeClasses, SplitPlan};
use super::indexed::{find_indexed_products, IndexedRole};
use super::temps::{deaths, in_place_set};

/// One operation of a block as the executor describes it to the planner.
pub struct PlanOp<'p> {
    /// The primitive and where it is in the source; `None` for an operation
    /// the executor runs itself (a call, a fork, a value-stack move).
    pub prim: Option<(&'p Prim, Loc)>,
    /// The slots of the operands and of the result.
    pub args: Vec<usize>,
    pub dst: Option<usize>,
    /// Every slot the operation reads or writes (for the temporaries' deaths).
    pub mentions: Vec<usize>,
    /// The types of the operands, then of the result (primitives only;
    /// needed in a ragged batch only, [`StepPlan::new`]'s `classes`).
    pub types: Vec<&'p TensorType>,
    /// The operation's counter in the run's [`crate::monitor::OpCounter`].
    pub counter: Option<usize>,
    /// For a copy of an argument into a callee's parameter: what it costs.
    pub arg_copy: Option<ArgCopy>,
}

impl<'p> PlanOp<'p> {
    /// A primitive at `loc` reading `args` and writing `dst` (variables,
    /// whose slots are their indices); in a ragged batch (`ragged`) with
    /// their types, by `ty`.
    pub fn prim<V: EntityRef>(
        prim: &'p Prim,
        loc: Loc,
        args: &[V],
        dst: Option<V>,
        ragged: bool,
        ty: impl Fn(V) -> &'p TensorType,
    ) -> PlanOp<'p> {
        let operands = args.iter().copied().chain(dst);
        PlanOp {
            prim: Some((prim, loc)),
            types: match ragged {
                true => operands.clone().map(ty).collect(),
                false => Vec::new(),
            },
            args: args.iter().map(|a| a.index()).collect(),
            dst: dst.map(|d| d.index()),
            mentions: operands.map(|v| v.index()).collect(),
            counter: None,
            arg_copy: None,
        }
    }

    /// An operation the executor runs itself, mentioning the slots
    /// `mentions`.
    pub fn own(mentions: Vec<usize>) -> PlanOp<'p> {
        PlanOp {
            prim: None,
            args: Vec::new(),
            dst: None,
            mentions,
            types: Vec::new(),
            counter: None,
            arg_copy: None,
        }
    }
}

/// The bytes a copy into a callee's parameter moves
/// ([`crate::Stats::call_bytes`]).
#[derive(Clone, Copy, Debug)]
pub struct ArgCopy {
    /// Bytes of one value.
    pub bytes: u64,
    /// The parameter is invariant: one value for every row.
    pub shared: bool,
}

/// One operation of a block as the step runner runs it.
pub struct OpPlan<'p> {
    /// `None`: the executor's own operation.
    pub prim: Option<&'p Prim>,
    pub loc: Loc,
    pub args: Vec<usize>,
    pub dst: Option<usize>,
    pub counter: Option<usize>,
    pub arg_copy: Option<ArgCopy>,
    /// The step temporaries it mentions last.
    pub dying: Vec<usize>,
    /// In a ragged batch, whether (and how) it runs split by size class.
    pub split: SplitPlan,
    /// For an operation split by size class, the types of its operands,
    /// then of its result; else empty.
    pub types: Vec<&'p TensorType>,
}

/// The plan of one block.
pub struct BlockPlan<'p> {
    pub ops: Vec<OpPlan<'p>>,
    /// Per operation, the fused chain starting at it (empty without fusion).
    pub chains: Vec<Option<ChainSite>>,
    /// Per operation, its role in an indexed product (empty without fusion).
    pub indexed: Vec<Option<IndexedRole>>,
}

impl BlockPlan<'_> {
    /// The role of operation `i` in an indexed product.
    pub fn indexed_role(&self, i: usize) -> Option<IndexedRole> {
        self.indexed.get(i).copied().flatten()
    }

    /// The block's primitives as chains and indexed products see them.
    pub fn views(&self) -> Vec<Option<OpView<'_>>> {
        views(&self.ops)
    }
}

/// The plans of the blocks of a function (local-static) or of a program
/// (program-counter), and which slots are step temporaries.
pub struct StepPlan<'p> {
    pub is_temp: Vec<bool>,
    pub blocks: Vec<BlockPlan<'p>>,
}

impl<'p> StepPlan<'p> {
    /// Plans `blocks`, whose slots `candidates` could be step temporaries
    /// by the executor's form: in a ragged batch (`classes`) split by size
    /// class where an operation mentions a ragged dimension; with `fuse`,
    /// with fused chains and indexed products.
    pub fn new(
        blocks: Vec<Vec<PlanOp<'p>>>,
        candidates: Vec<bool>,
        classes: Option<&SizeClasses>,
        fuse: bool,
    ) -> StepPlan<'p> {
        let splits: Vec<Vec<SplitPlan>> = blocks
            .iter()
            .map(|ops| ops.iter().map(|op| split_plan(op, classes)).collect())
            .collect();
        let mut is_temp = candidates;
        for (ops, splits) in blocks.iter().zip(&splits) {
            keep_columns(ops, splits, &mut is_temp);
        }
        let blocks = blocks
            .into_iter()
            .zip(splits)
            .map(|(ops, splits)| plan_block(ops, splits, &is_temp, fuse))
            .collect();
        StepPlan { is_temp, blocks }
    }
}

/// How `op` runs in a ragged batch (for another batch, never split).
fn split_plan(op: &PlanOp<'_>, classes: Option<&SizeClasses>) -> SplitPlan {
    match (op.prim, classes) {
        (Some((prim, _)), Some(classes)) => classes.plan(prim, &op.types),
        _ => SplitPlan::default(),
    }
}

/// The operands an indexed assignment in place reads, and the operands and
/// result of an operation split by size class (which reads and writes them
/// by row, where a compact step's temporaries are laid out by position),
/// are no step temporaries; nor are the operands and results of the tape's
/// operations (moved row by row to and from each row's lane).
fn keep_columns(ops: &[PlanOp<'_>], splits: &[SplitPlan], is_temp: &mut [bool]) {
    for (op, split) in ops.iter().zip(splits) {
        let Some((prim, _)) = op.prim else {
            continue;
        };
        if in_place_set(prim, op.dst, &op.args) {
            op.args.iter().for_each(|a| is_temp[*a] = false);
        }
        if split.split || prim.is_tape() {
            op.args
                .iter()
                .chain(&op.dst)
                .for_each(|x| is_temp[*x] = false);
        }
    }
}

fn plan_block<'p>(
    ops: Vec<PlanOp<'p>>,
    splits: Vec<SplitPlan>,
    is_temp: &[bool],
    fuse: bool,
) -> BlockPlan<'p> {
    let mut ops = ops;
    let mentions: Vec<Vec<usize>> = ops
        .iter_mut()
        .map(|op| std::mem::take(&mut op.mentions))
        .collect();
    let dying = deaths(&mentions, is_temp);
    let mut block = BlockPlan {
        ops: ops
            .into_iter()
            .zip(splits)
            .zip(dying)
            .map(|((op, split), dying)| OpPlan {
                prim: op.prim.map(|(prim, _)| prim),
                loc: op.prim.map_or(Loc::default(), |(_, loc)| loc),
                args: op.args,
                dst: op.dst,
                counter: op.counter,
                arg_copy: op.arg_copy,
                dying,
                split,
                types: if split.split { op.types } else { Vec::new() },
            })
            .collect(),
        chains: Vec::new(),
        indexed: Vec::new(),
    };
    if fuse {
        let mut dying: Vec<Vec<usize>> = block.ops.iter().map(|op| op.dying.clone()).collect();
        let views = block.views();
        let indexed = find_indexed_products(&views, is_temp, &mut dying);
        let chains = find_chains(&views, is_temp, &dying);
        drop(views);
        for (op, dying) in block.ops.iter_mut().zip(dying) {
            op.dying = dying;
        }
        block.indexed = indexed;
        block.chains = chains;
    }
    block
}

/// Operations as fused chains and indexed products see them: no operation
/// of the executor's own, and none split by size class (both run over
/// whole padded rows or lay rows out by position).
fn views<'b>(ops: &'b [OpPlan<'_>]) -> Vec<Option<OpView<'b>>> {
    ops.iter()
        .map(|op| match op.prim {
            Some(prim) if !op.split.split && !prim.is_tape() => Some(OpView {
                prim,
                args: &op.args,
                dst: op.dst,
            }),
            _ => None,
        })
        .collect()
}
