//! What both batching executors do at a fork, written once; each keeps
//! only when its instances run (local-static: in chunks of child
//! activations; program-counter: as lanes free up).
//!
//! - **Opening** ([`open`]): the lane draws the fork's key, then a fork of
//!   no instance goes straight on, one whose instances would exceed
//!   `--max-stack-depth` is the lane's `stack_overflow`, and any other
//!   opens a join ([`super::lanes`]) at which the lane waits.
//! - **Budget** ([`InstanceBudget`]): at most `--max-instances` instance
//!   lanes are alive at once; by default as many as a quarter of the
//!   available memory holds.
//! - **Arguments** ([`arg_place`], [`shared_arg`]): instance `k` reads its
//!   parameter from its parent's row (a member slot from the member's
//!   row): the whole value, its element `k` (a `map`), or `k` itself; an
//!   invariant parameter gets the one value every call site passes.
//! - **Results** ([`result_place`]): an instance that returns writes each
//!   result into its parent's destination (element `k` of it for a `map`).
//! - **Closing** ([`close`]): a resolved join gives its parent the member's
//!   steps and either lets it go on or gives it the error it meets at the
//!   fork.

use autobatch_ir::{Dim, EntityRef, InstanceArg, Loc, TapeMode};
use autobatch_kernels::dim_length;
use autobatch_types::{MemberError, Tensor};

use super::lanes::{ForkId, Join, LaneTable, Opening, Resolution};
use super::storage::{Place, Slot};
use crate::internal::internal_error;
use crate::memory::default_max_instances;
use crate::monitor::{stack_overflow, step_limit};

/// A fork as a lane reaches it.
#[derive(Clone, Copy, Debug)]
pub struct ForkAt {
    /// How many instances it has.
    pub total: u64,
    /// The lane's stack depth, and the executor's own reference to the
    /// fork ([`Join::site`]).
    pub depth: usize,
    pub site: u32,
    pub mode: TapeMode,
    /// Where a fork that would exceed the stack depth stops the lane
    /// ([`autobatch_ir::Instances::overflow_loc`]).
    pub overflow_loc: Loc,
}

/// What a fork did to the lane that reached it.
#[derive(Debug)]
pub enum Forked {
    /// The lane waits at the join of its instances.
    Waits(ForkId),
    /// A fork of no instance: the lane goes on at once.
    NoInstance,
    /// Its instances would exceed the stack depth.
    Overflows(MemberError),
}

/// The instances of a fork: a `map`'s `count` (its length for a lane
/// seeing the symbolic dimensions `symbols`), else a `join`'s `calls`.
pub fn instance_count(count: Option<Dim>, calls: usize, symbols: &[u64]) -> u64 {
    match count {
        Some(count) => dim_length(symbols, count) as u64,
        None => calls as u64,
    }
}

/// `lane` reaches the fork `at` under a stack limit of `max_depth`.
pub fn open(lanes: &mut LaneTable, lane: u32, at: ForkAt, max_depth: usize) -> Forked {
    let key = lanes.fork_key(lane, at.mode);
    if at.total == 0 {
        lanes.empty_fork(lane, at.mode);
        return Forked::NoInstance;
    }
    if at.depth >= max_depth {
        return Forked::Overflows(stack_overflow(max_depth, at.overflow_loc));
    }
    let opening = Opening {
        depth: at.depth,
        site: at.site,
        mode: at.mode,
    };
    Forked::Waits(lanes.open_fork(lane, key, at.total, opening))
}

/// Closes the resolved join `fork`: gives the join and whether its parent
/// (whose steps are now the member's) goes on, or the error it meets at
/// the fork: its first faulting instance's, or `step_limit` at `loc(join)`.
pub fn close(
    lanes: &mut LaneTable,
    fork: ForkId,
    max_steps: u64,
    loc: impl FnOnce(&Join) -> Loc,
) -> (Join, Result<(), MemberError>) {
    let (join, resolution) = lanes.close_fork(fork);
    let outcome = match resolution {
        Resolution::Returned { steps } => {
            lanes.set_steps(join.parent, steps);
            Ok(())
        }
        Resolution::Failed { steps, error } => {
            lanes.set_steps(join.parent, steps);
            Err(error)
        }
        Resolution::StepLimit => Err(step_limit(max_steps, loc(&join))),
    };
    (join, outcome)
}

/// The most instance lanes alive at once.
#[derive(Clone, Copy, Debug)]
pub struct InstanceBudget {
    max: Option<usize>,
}

impl InstanceBudget {
    /// `--max-instances`, if given.
    pub fn new(max: Option<usize>) -> InstanceBudget {
        InstanceBudget { max }
    }

    /// `--max-instances`, or by default as many lanes of `lane_bytes()`
    /// each as a quarter of the available memory holds (computed once, at
    /// the first fork: reading the available memory costs more than a
    /// small run).
    pub fn max(&mut self, lane_bytes: impl FnOnce() -> u128) -> usize {
        *self
            .max
            .get_or_insert_with(|| default_max_instances(lane_bytes()))
    }
}

/// Where instance `k` reads `arg`, a value of `len` elements, from its
/// parent at row `parent` of member `member` (the row of a member slot is
/// the member's); `None` for the index `k` itself.
pub fn arg_place<V: EntityRef>(
    slots: &[Slot],
    arg: InstanceArg<V>,
    parent: usize,
    member: usize,
    k: u64,
    len: usize,
) -> Option<Place> {
    let (v, offset) = match arg {
        InstanceArg::Whole(v) => (v, 0),
        InstanceArg::Element(v) => (v, k as usize * len),
        InstanceArg::Index => return None,
    };
    let row = match slots[v.index()] {
        Slot::Member(_) => member,
        _ => parent,
    };
    Some(Place {
        slot: v.index(),
        row,
        offset,
    })
}

/// The value of an invariant parameter: the shared value every call site
/// passes (`autobatch_passes::views`).
pub fn shared_arg<V: EntityRef>(slots: &[Slot], arg: InstanceArg<V>) -> Tensor {
    match arg {
        InstanceArg::Whole(v) => match &slots[v.index()] {
            Slot::Invariant(Some(value)) => value.clone(),
            _ => internal_error("a per-member argument of an invariant parameter"),
        },
        _ => internal_error("an element or index for an invariant parameter"),
    }
}

/// Where instance `k`'s result of `len` elements goes: its parent's row
/// `parent` of the destination `dst`, at element `k` for a `map`.
pub fn result_place(dst: usize, parent: usize, map: bool, k: u64, len: usize) -> Place {
    Place {
        slot: dst,
        row: parent,
        offset: if map { k as usize * len } else { 0 },
    }
}
