//! The loop pieces every batching executor runs alike, written once:
//! per-lane bookkeeping ([`LaneTable`](super::lanes::LaneTable): random streams,
//! the step limit on entering a block, fault retirement, outcomes, the
//! joins of forks), binding the entry's
//! arguments into slots ([`bind_arg`]), the rows waiting at each block
//! ([`Waiting`]), splitting a branch's rows ([`BranchRows`]), and what
//! happens before a run
//! ([`invariance`], [`no_room_for_entry`]).
//!
//! A *row* is an executor's own index of an active lane (local-static: a
//! row of the activation; program-counter: the lane itself); the methods
//! that take rows take `lane_of` to find the lane of a row.

use std::collections::BTreeSet;
use std::marker::PhantomData;

use autobatch_ir::{EntityRef, Program};
use autobatch_kernels::buffer::Values;
use autobatch_passes::uniformity::Invariance;
use autobatch_types::{Data, Scalar};

use super::storage::Slot;
use super::BlockChoice;
use crate::monitor::all_members_overflow;
use crate::{Arg, Batch, Env, ExecError, RunOptions, RunOutput};

/// Binds one entry argument into its slot, made for `rows` members: an
/// invariant slot takes a shared value once, a column (or a member slot, not
/// yet shared) takes a row per member (a ragged member's shorter value at
/// the start of its row).
pub fn bind_arg(slot: &mut Slot, arg: &Arg, rows: usize) -> Result<(), ExecError> {
    let column = match slot {
        Slot::Invariant(v) => {
            let Arg::Shared(value) = arg else {
                return Err(ExecError::Internal(
                    "a batched argument bound to an invariant parameter".into(),
                ));
            };
            *v = Some(value.clone());
            return Ok(());
        }
        Slot::Column(c) => c,
        Slot::Member(c) => std::sync::Arc::get_mut(c).ok_or_else(|| {
            ExecError::Internal("binding an argument into a member slot already shared".into())
        })?,
    };
    match arg {
        Arg::Shared(value) => (0..rows).for_each(|r| column.set_row(r, value)),
        Arg::Batched(values) => {
            for (r, value) in values.iter().enumerate() {
                if value.len() == column.row_len {
                    column.set_row(r, value);
                } else if value.len() < column.row_len {
                    // A ragged member's value, at the start of its padded
                    // row (`crate::batched::classes`).
                    column.write(r, 0, Values::all(&value.data));
                } else {
                    return Err(ExecError::Internal(format!(
                        "member {r}'s argument has {} elements, its row room for {}",
                        value.len(),
                        column.row_len
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The rows waiting at each block `B` (local-static: of an activation;
/// program-counter: of the explicit-stack form), and the blocks some row
/// waits at: choosing the next block costs nothing per idle row.
pub struct Waiting<B> {
    at: Vec<Vec<u32>>,
    nonempty: BTreeSet<usize>,
    block: PhantomData<B>,
}

impl<B: EntityRef> Waiting<B> {
    /// No row waiting at any of `blocks` blocks.
    pub fn new(blocks: usize) -> Waiting<B> {
        Waiting {
            at: vec![Vec::new(); blocks],
            nonempty: BTreeSet::new(),
            block: PhantomData,
        }
    }

    /// Sends `rows` to `block`.
    pub fn push(&mut self, block: B, rows: &[u32]) {
        if !rows.is_empty() {
            let queue = &mut self.at[block.index()];
            if queue.is_empty() {
                self.nonempty.insert(block.index());
            }
            queue.extend_from_slice(rows);
        }
    }

    /// The block to run next.
    pub fn choose(&self, choice: BlockChoice) -> Option<B> {
        let block = match choice {
            BlockChoice::SmallestIndex => self.nonempty.first().copied(),
            BlockChoice::MostMembers => {
                let mut best: Option<(usize, usize)> = None;
                for &b in &self.nonempty {
                    let n = self.at[b].len();
                    if best.is_none_or(|(m, _)| n > m) {
                        best = Some((n, b));
                    }
                }
                best.map(|(_, b)| b)
            }
        };
        block.map(B::new)
    }

    /// Moves the rows waiting at `block` into `rows`, sorted.
    pub fn take(&mut self, block: B, rows: &mut Vec<u32>) {
        self.nonempty.remove(&block.index());
        rows.clear();
        std::mem::swap(rows, &mut self.at[block.index()]);
        rows.sort_unstable();
    }
}

/// The rows of a two-way branch, split by its condition (reusable buffers).
#[derive(Default)]
pub struct BranchRows {
    pub then_rows: Vec<u32>,
    pub else_rows: Vec<u32>,
}

impl BranchRows {
    /// Splits `rows` (kept in order) by the bool `condition`.
    pub fn partition(&mut self, condition: &Slot, rows: &[u32]) -> Result<(), ExecError> {
        self.then_rows.clear();
        self.else_rows.clear();
        match condition {
            Slot::Invariant(Some(value)) => {
                let target = if value.as_scalar() == Scalar::Bool(true) {
                    &mut self.then_rows
                } else {
                    &mut self.else_rows
                };
                target.extend_from_slice(rows);
            }
            Slot::Column(column) => {
                let Data::Bool(values) = &column.data else {
                    return Err(ExecError::Internal(
                        "a branch on a non-bool variable".into(),
                    ));
                };
                for &r in rows {
                    if values[r as usize] {
                        self.then_rows.push(r);
                    } else {
                        self.else_rows.push(r);
                    }
                }
            }
            Slot::Invariant(None) | Slot::Member(_) => {
                return Err(ExecError::Internal(
                    "a branch on an unassigned or member-uniform variable".into(),
                ))
            }
        }
        Ok(())
    }
}

/// Which variables of `program` hold one value for the whole batch, given
/// which of the entry's arguments are shared and which symbolic dimensions
/// have each member's own length (`env.ragged`: what mentions them is
/// per-member).
pub fn invariance(program: &Program, batch: &Batch, env: &Env) -> Invariance {
    InvarianceInputs::of(batch, env).invariance(program)
}

/// What a batch's [`invariance`] depends on besides the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvarianceInputs {
    pub entry: autobatch_ir::FuncId,
    /// Per argument of the entry: whether it is shared.
    pub shared: Vec<bool>,
    /// The symbolic dimensions with each member's own length.
    pub varying: Vec<autobatch_ir::SymbolId>,
}

impl InvarianceInputs {
    pub fn of(batch: &Batch, env: &Env) -> InvarianceInputs {
        InvarianceInputs {
            entry: batch.entry,
            shared: batch
                .args
                .iter()
                .map(|a| matches!(a, Arg::Shared(_)))
                .collect(),
            varying: env.ragged.iter().map(|r| r.symbol).collect(),
        }
    }

    pub fn invariance(&self, program: &Program) -> Invariance {
        Invariance::compute_varying(program, self.entry, &self.shared, &self.varying)
    }
}

/// With a stack limit of 0 not even the entry function can be entered: the
/// outcome of the run, in which every member overflows, else `None`.
pub fn no_room_for_entry(
    program: &Program,
    batch: &Batch,
    options: &RunOptions,
) -> Option<RunOutput> {
    (options.max_stack_depth == 0).then(|| all_members_overflow(program, batch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batched::storage::Column;
    use autobatch_types::{ScalarType, Tensor};

    #[test]
    fn a_branch_splits_rows_by_a_column_or_sends_all_one_way() {
        let mut column = Column::zeros(ScalarType::Bool, Vec::new(), 4);
        column.set_row(2, &Tensor::scalar(Scalar::Bool(true)));
        let mut branch = BranchRows::default();
        branch.partition(&Slot::Column(column), &[0, 2, 3]).unwrap();
        assert_eq!(
            (&branch.then_rows[..], &branch.else_rows[..]),
            (&[2][..], &[0, 3][..])
        );
        let shared = Slot::Invariant(Some(Tensor::scalar(Scalar::Bool(true))));
        branch.partition(&shared, &[1, 3]).unwrap();
        assert_eq!(
            (&branch.then_rows[..], &branch.else_rows[..]),
            (&[1, 3][..], &[][..])
        );
        assert!(branch.partition(&Slot::Invariant(None), &[0]).is_err());
    }
}
