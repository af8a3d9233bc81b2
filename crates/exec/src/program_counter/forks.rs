//! Program-counter's forks: a lane that reaches a fork waits at its join
//! (in no block's queue); its instances start in lanes of their own as the
//! budget of `--max-instances` allows (the columns and stacks of the
//! functions instances run grow to a row per lane), copy their results
//! into the parent's destinations as they return, and the last to end
//! moves the parent on.

use super::*;
use crate::batched::instances::{
    self, arg_place, instance_count, result_place, shared_arg, ForkAt, Forked,
};

impl Machine<'_> {
    /// A fork at the end of block `pc`, for `rows`: each lane draws the
    /// fork's key and waits at its join (its instances start from the
    /// queue, [`Machine::settle`]); a fork with no instance goes straight
    /// on, and one that would overflow the stack unwinds the lane.
    pub(super) fn fork(&mut self, pc: PcBlock, rows: &[u32], fork: &LoweredFork) {
        let max_depth = self.step.options.max_stack_depth;
        for &r in rows {
            if self.step.lanes.drop_if_cancelled(r) {
                continue;
            }
            let at = ForkAt {
                total: instance_count(fork.count, fork.calls.len(), self.symbols_of(r)),
                depth: self.depth(r),
                site: pc.0,
                mode: fork.tape,
                overflow_loc: fork.overflow_loc,
            };
            match instances::open(&mut self.step.lanes, r, at, max_depth) {
                Forked::Waits(join) => self.step.lanes.queue_fork(join),
                Forked::NoInstance => self.waiting.push(fork.then, &[r]),
                Forked::Overflows(error) => self.fail_or_recover(r, error),
            }
        }
    }

    /// The budget of instance lanes alive at once; an instance lane is a
    /// row of the columns of the functions instances run.
    pub(super) fn max_instances(&mut self) -> usize {
        let (lowered, grows) = (self.lowered, &self.grows);
        let symbols = self.step.shared.symbols;
        self.max_instances.max(|| {
            let row: u128 = lowered
                .vars
                .values()
                .filter(|v| {
                    // Invariant and member variables have no row per lane.
                    !matches!(v.class, VarClass::Invariant | VarClass::Member(_))
                        && grows[v.func.index()]
                })
                .map(|v| value_bytes(&v.ty, symbols))
                .fold(0, u128::saturating_add);
            row.saturating_add(MEMBER_OVERHEAD_BYTES)
        })
    }

    /// After a step: frees the lanes that ended, resolves the joins whose
    /// instances are accounted for, and starts instances while the budget
    /// allows (one for a fork that has none running, whatever the budget).
    #[inline]
    pub(super) fn settle(&mut self) {
        if !self.step.lanes.is_settled() {
            self.settle_forks();
        }
    }

    pub(super) fn settle_forks(&mut self) {
        loop {
            while let Some(lane) = self.step.lanes.take_released() {
                self.free_lane(lane);
            }
            if let Some(fork) = self.step.lanes.take_resolved() {
                self.resolve(fork);
                continue;
            }
            let max_instances = self.max_instances();
            match self.step.lanes.next_to_start(max_instances) {
                Some(fork) => self.start_instance(fork),
                None => break,
            }
        }
    }

    /// Clears what an ended instance lane leaves (its stacks, after a fault
    /// or a cancellation) and frees it.
    pub(super) fn free_lane(&mut self, lane: u32) {
        let l = lane as usize;
        if self.step.lanes.ended_abnormally(lane) {
            // Only the stacks of the functions instances run have its row.
            for (x, stack) in self.stacks.iter_mut().enumerate() {
                let func = self.lowered.vars[GlobalVar::new(x)].func;
                if let (true, Some(stack)) = (self.grows[func.index()], stack) {
                    stack.truncate(l, 0);
                }
            }
            self.return_stacks[l].clear();
            self.catches[l].clear();
        }
        self.step.lanes.free(lane);
    }

    /// A join resolved: its parent goes on after the fork with the member's
    /// steps so far, or meets the first instance's error where it forked.
    pub(super) fn resolve(&mut self, fork: ForkId) {
        let (lanes, lowered) = (&mut self.step.lanes, self.lowered);
        let max_steps = self.step.options.max_steps;
        let (join, outcome) = instances::close(lanes, fork, max_steps, |join| {
            fork_at(lowered, join.site).loc
        });
        match outcome {
            Ok(()) => {
                let then = fork_at(lowered, join.site).then;
                self.waiting.push(then, &[join.parent]);
            }
            // A step limit is not catchable: the parent stops.
            Err(error) => self.fail_or_recover(join.parent, error),
        }
    }

    /// Sends lane `r`, which met `error`, to its innermost catching call's
    /// recovery block, or stops it.
    pub(super) fn fail_or_recover(&mut self, r: u32, error: MemberError) {
        let mut member_stacks = MemberStacks {
            plan: &self.catch_plan,
            catches: &mut self.catches,
            return_stacks: &mut self.return_stacks,
            stacks: &mut self.stacks,
        };
        match unwind(r, error, &mut member_stacks) {
            Ok(recover) => {
                self.step.lanes.take_tape_back(r);
                self.waiting.push(recover, &[r]);
            }
            Err(error) => self.step.lanes.fail(r, error),
        }
    }

    /// Starts the next instance of `fork` in a lane: its parameters from
    /// the parent's row, then the callee's entry.
    pub(super) fn start_instance(&mut self, fork: ForkId) {
        let Some((lane, k)) = self.step.lanes.start_instance(fork) else {
            return;
        };
        self.ensure_capacity();
        let join = self.step.lanes.join(fork);
        let (parent, site) = (join.parent as usize, fork_at(self.lowered, join.site));
        self.depth_base[lane as usize] = join.depth;
        let call = &site.calls[if site.count.is_some() { 0 } else { k as usize }];
        let member = self.step.lanes.member_of(lane);
        for &(param, arg) in &call.params {
            match &self.slots[param.index()] {
                // Holds the member's value already.
                Slot::Member(_) => continue,
                // Set once, never per lane.
                Slot::Invariant(Some(_)) => continue,
                Slot::Invariant(None) => {
                    let value = shared_arg(&self.slots, arg);
                    self.slots[param.index()] = Slot::Invariant(Some(value));
                    continue;
                }
                Slot::Column(_) => {}
            }
            let len = self.own_len(param, lane);
            let elem = self.lowered.vars[param].ty.elem;
            self.step.call_bytes += (len * crate::memory::element_bytes(elem)) as u64;
            let to = Place {
                slot: param.index(),
                row: lane as usize,
                offset: 0,
            };
            match arg_place(&self.slots, arg, parent, member, k, len) {
                Some(from) => copy_value(&mut self.slots, from, to, len),
                None => {
                    let Slot::Column(column) = &mut self.slots[param.index()] else {
                        internal_error("an instance's parameter is invariant");
                    };
                    let index = Scalar::I64(k as i64);
                    column.write(lane as usize, 0, Values::scalar(&index));
                }
            }
        }
        self.waiting.push(call.target, &[lane]);
    }

    /// An instance lane returned: its results go to its parent's
    /// destinations (element `k` of each, for a `map`).
    pub(super) fn give_results(&mut self, lane: u32) {
        let Some((fork, k)) = self.step.lanes.instance_of(lane) else {
            internal_error("a lane that is no instance returned as one");
        };
        let join = self.step.lanes.join(fork);
        let (parent, site) = (join.parent as usize, fork_at(self.lowered, join.site));
        let map = site.count.is_some();
        let call = &site.calls[if map { 0 } else { k as usize }];
        for &(result, dst) in &call.results {
            let len = self.own_len(result, lane);
            let from = Place {
                slot: result.index(),
                row: lane as usize,
                offset: 0,
            };
            let to = result_place(dst.index(), parent, map, k, len);
            copy_value(&mut self.slots, from, to, len);
        }
    }

    /// Grows the columns and stacks of the functions instances run to a row
    /// per lane, by [`grown_rows`] (a new column is zeroed memory that costs
    /// nothing until a lane writes its row).
    pub(super) fn ensure_capacity(&mut self) {
        let needed = self.step.lanes.capacity();
        if needed <= self.capacity {
            return;
        }
        let bound = self.members.saturating_add(self.max_instances());
        let rows = grown_rows(self.capacity, needed, bound);
        let grows = |x: usize| self.grows[self.lowered.vars[GlobalVar::new(x)].func.index()];
        let lowered = self.lowered;
        for (x, slot) in self.slots.iter_mut().enumerate() {
            if self.plan.is_temp[x] {
                // Step storage only.
                continue;
            }
            if let (true, Slot::Column(column)) = (grows(x), slot) {
                // A temporary's value does not outlive its step, unless a
                // fork passes it (its instances start later, from the
                // parent's row).
                let temporary = lowered.vars[GlobalVar::new(x)].class == VarClass::Temporary;
                column.grow_rows(rows, !temporary || self.fork_reads[x]);
            }
        }
        for (x, stack) in self.stacks.iter_mut().enumerate() {
            if let (true, Some(stack)) = (grows(x), stack) {
                stack.grow(rows);
            }
        }
        self.return_stacks.resize(rows, Vec::new());
        self.catches.resize(rows, Vec::new());
        self.depth_base.resize(rows, 0);
        self.capacity = rows;
        self.column_bytes = self.slots.iter().map(Slot::bytes).sum();
        self.note_state_bytes();
    }
}

/// The rows the lanes' storage grows to when `needed` rows (lane ids)
/// exceed its `capacity`: four times as many, up to `bound` (the members
/// and `--max-instances` instances); past it (forks that found no free
/// lane each start one instance anyway) half as many again. Growth is
/// geometric either way, so each row is copied a bounded number of times
/// however many lanes a run ends up needing; growing one row at a time
/// copied every column once per extra lane.
pub(super) fn grown_rows(capacity: usize, needed: usize, bound: usize) -> usize {
    let step = if capacity < bound {
        capacity.saturating_mul(4).min(bound)
    } else {
        capacity.saturating_add(capacity / 2)
    };
    needed.max(step)
}

/// The fork that ends block `site` of `lowered`.
fn fork_at(lowered: &LoweredProgram, site: u32) -> &LoweredFork {
    match &lowered.blocks[PcBlock(site)].term {
        LoweredTerm::Fork(fork) => fork,
        _ => internal_error("a join whose site is not a fork"),
    }
}
