//! The loop pieces every batching executor runs alike, written once:
//! per-member bookkeeping ([`Members`]: random streams, the step limit on
//! entering a block, fault retirement, outcomes), binding the entry's
//! arguments into slots ([`bind_arg`]), splitting a branch's rows
//! ([`BranchRows`]), and what happens before a run
//! ([`invariance`], [`no_room_for_entry`]).
//!
//! A *row* is an executor's own index of an active member (local-static: a
//! row of the activation; program-counter: the member itself); the methods
//! that take rows take `member_of` to find the member of a row.

use std::time::Instant;

use autobatch_ir::{Loc, Program};
use autobatch_kernels::{Fault, MemberRng};
use autobatch_passes::uniformity::Invariance;
use autobatch_types::{Data, MemberError, Scalar, Tensor};

use super::storage::Slot;
use super::{all_members_overflow, step_limit, OpCounter};
use crate::internal::internal_error;
use crate::{Arg, Batch, ExecError, RunOptions, RunOutput, Stats};

/// How a member ended: its flattened results, or the error that stopped it.
type Outcome = Result<Vec<Tensor>, MemberError>;

/// What a batching executor keeps per member, whatever its control flow.
pub struct Members {
    /// Member `m` draws from `rngs[m]`.
    pub rngs: Vec<MemberRng>,
    /// Blocks each member has entered (counted towards `--max-steps`).
    steps_taken: Vec<u64>,
    /// `None` while the member runs.
    outcomes: Vec<Option<Outcome>>,
    /// Reused buffer: the rows one operation retired.
    retired: Vec<u32>,
}

impl Members {
    /// `size` running members, member `m` drawing from `(seed, m)`.
    pub fn new(size: usize, seed: u64) -> Members {
        Members {
            rngs: (0..size).map(|m| MemberRng::new(seed, m as u64)).collect(),
            steps_taken: vec![0; size],
            outcomes: vec![None; size],
            retired: Vec::new(),
        }
    }

    /// The step-limit check on entering a block at `loc`: counts a step for
    /// each of `rows`, and stops (and removes from `rows`) the members that
    /// have already taken `max_steps`.
    pub fn enter_block(
        &mut self,
        rows: &mut Vec<u32>,
        member_of: impl Fn(u32) -> usize,
        max_steps: u64,
        loc: Loc,
    ) {
        // This runs for every row of every block: one tight pass counts the
        // steps, and only when some member went over its limit does a second
        // pass stop it. A stopped member's count is one over, never read
        // again (it never runs again: a step limit is not catchable).
        let steps_taken = &mut self.steps_taken[..];
        let mut over = false;
        for &r in rows.iter() {
            let taken = &mut steps_taken[member_of(r)];
            // No overflow: a count passes `max_steps` at most by one.
            *taken += 1;
            over |= *taken > max_steps;
        }
        if over {
            let outcomes = &mut self.outcomes;
            rows.retain(|&r| {
                let member = member_of(r);
                let stopped = steps_taken[member] > max_steps;
                if stopped {
                    outcomes[member] = Some(Err(step_limit(max_steps, loc)));
                }
                !stopped
            });
        }
    }

    /// Fault retirement after an operation at `loc`: every row of `faults`
    /// leaves `rows` (which stays sorted). Its member's error goes to
    /// `unwind`, which either sends the member on elsewhere (`Ok`: a
    /// catching call recovers it) or gives the error back to be recorded.
    /// `faults` is left empty.
    #[inline]
    pub fn retire_faults(
        &mut self,
        rows: &mut Vec<u32>,
        faults: &mut Vec<(u32, Fault)>,
        loc: Loc,
        member_of: impl Fn(u32) -> usize,
        unwind: impl FnMut(u32, MemberError) -> Result<(), MemberError>,
    ) {
        // Almost every operation faults nowhere: that check is inlined.
        if !faults.is_empty() {
            self.retire(rows, faults, loc, member_of, unwind);
        }
    }

    fn retire(
        &mut self,
        rows: &mut Vec<u32>,
        faults: &mut Vec<(u32, Fault)>,
        loc: Loc,
        member_of: impl Fn(u32) -> usize,
        mut unwind: impl FnMut(u32, MemberError) -> Result<(), MemberError>,
    ) {
        self.retired.clear();
        for (r, fault) in faults.drain(..) {
            let error = MemberError::new(fault.kind, fault.message, loc);
            if let Err(error) = unwind(r, error) {
                self.outcomes[member_of(r)] = Some(Err(error));
            }
            self.retired.push(r);
        }
        self.retired.sort_unstable();
        let retired = &self.retired;
        rows.retain(|r| retired.binary_search(r).is_err());
    }

    /// Stops `member` with `error`.
    pub fn stop(&mut self, member: usize, error: MemberError) {
        self.outcomes[member] = Some(Err(error));
    }

    /// Records that `member` returned `results` from the entry function.
    pub fn finish(&mut self, member: usize, results: Vec<Tensor>) {
        self.outcomes[member] = Some(Ok(results));
    }

    /// Whether `member` has stopped with an error.
    pub fn has_failed(&self, member: usize) -> bool {
        matches!(self.outcomes[member], Some(Err(_)))
    }

    /// If `member` stopped with a catchable error, makes it run again and
    /// returns true (a catching call caught the error).
    pub fn revive_if_catchable(&mut self, member: usize) -> bool {
        let outcome = &mut self.outcomes[member];
        let caught = matches!(outcome, Some(Err(e)) if e.kind.is_catchable());
        if caught {
            *outcome = None;
        }
        caught
    }

    /// The run's output: every member's outcome, with the run's figures.
    /// Panics if a member neither finished nor failed (an executor bug).
    pub fn into_output(self, counter: OpCounter, steps: u64, started: Instant) -> RunOutput {
        let wall_seconds = started.elapsed().as_secs_f64();
        let size = self.outcomes.len();
        let (op_counts, lane_utilization) = counter.finish(size);
        let results = self
            .outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| internal_error("a member neither finished nor failed")))
            .collect();
        RunOutput {
            results,
            stats: Stats {
                steps,
                lane_utilization,
                op_counts,
                wall_seconds,
            },
        }
    }
}

/// Binds one entry argument into its slot, made for `rows` members: an
/// invariant slot takes a shared value once, a column takes a row per member.
pub fn bind_arg(slot: &mut Slot, arg: &Arg, rows: usize) -> Result<(), ExecError> {
    match (slot, arg) {
        (Slot::Invariant(v), Arg::Shared(value)) => *v = Some(value.clone()),
        (Slot::Column(c), Arg::Shared(value)) => (0..rows).for_each(|r| c.set_row(r, value)),
        (Slot::Column(c), Arg::Batched(values)) => values
            .iter()
            .enumerate()
            .for_each(|(r, value)| c.set_row(r, value)),
        (Slot::Invariant(_), Arg::Batched(_)) => {
            return Err(ExecError::Internal(
                "a batched argument bound to an invariant parameter".into(),
            ))
        }
    }
    Ok(())
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
            Slot::Invariant(None) => {
                return Err(ExecError::Internal(
                    "a branch on an unassigned variable".into(),
                ))
            }
        }
        Ok(())
    }
}

/// Which variables of `program` hold one value for the whole batch, given
/// which of the entry's arguments are shared.
pub fn invariance(program: &Program, batch: &Batch) -> Invariance {
    let shared_params: Vec<bool> = batch
        .args
        .iter()
        .map(|a| matches!(a, Arg::Shared(_)))
        .collect();
    Invariance::compute(program, batch.entry, &shared_params)
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
    use autobatch_types::{ErrorKind, ScalarType};

    fn fault() -> Fault {
        Fault::new(ErrorKind::DivisionByZero, "division by zero")
    }

    #[test]
    fn retired_rows_leave_and_only_uncaught_errors_stop_their_member() {
        let mut members = Members::new(4, 0);
        let mut rows = vec![0, 1, 2, 3];
        let mut faults = vec![(3, fault()), (1, fault())];
        // Row 3's error is caught (the member goes on elsewhere), row 1's is not.
        members.retire_faults(
            &mut rows,
            &mut faults,
            Loc::new(2, 5),
            |r| r as usize,
            |r, e| {
                if r == 3 {
                    Ok(())
                } else {
                    Err(e)
                }
            },
        );
        assert_eq!(rows, [0, 2]);
        assert!(faults.is_empty());
        assert!(members.has_failed(1) && !members.has_failed(3));
        assert!(members.revive_if_catchable(1));
        assert!(!members.has_failed(1));
    }

    #[test]
    fn the_step_limit_stops_a_member_on_entering_a_block() {
        let mut members = Members::new(2, 0);
        let mut rows = vec![0, 1];
        members.enter_block(&mut rows, |r| r as usize, 1, Loc::new(1, 1));
        assert_eq!(rows, [0, 1]);
        let mut rows = vec![1];
        members.enter_block(&mut rows, |r| r as usize, 1, Loc::new(3, 1));
        assert!(rows.is_empty() && members.has_failed(1) && !members.has_failed(0));
        assert!(
            !members.revive_if_catchable(1),
            "a step limit is not catchable"
        );
    }

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
