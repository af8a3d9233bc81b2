//! Program-counter's forks: a lane that reaches a fork waits at its join
//! (in no block's queue); its instances start in lanes of their own as the
//! budget of `--max-instances` allows (the columns and stacks of the
//! functions instances run grow to a row per lane), copy their results
//! into the parent's destinations as they return, and the last to end
//! moves the parent on.

use super::*;

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
            let total = match fork.count {
                Some(count) => dim_length(self.symbols_of(r), count) as u64,
                None => fork.calls.len() as u64,
            };
            let key = self.step.lanes.fork_key(r, fork.tape);
            let depth = self.depth(r);
            if total > 0 && depth >= max_depth {
                self.fail_or_recover(r, stack_overflow(max_depth, fork.overflow_loc));
            } else if total == 0 {
                self.step.lanes.empty_fork(r, fork.tape);
                self.waiting.push(fork.then, &[r]);
            } else {
                let opening = Opening {
                    depth,
                    site: pc.0,
                    mode: fork.tape,
                };
                let join = self.step.lanes.open_fork(r, key, total, opening);
                self.step.lanes.queue_fork(join);
            }
        }
    }

    /// `--max-instances`, or by default as many instances as a quarter of
    /// the available memory holds, each a row of the columns of the
    /// functions instances run (computed once, at the first fork: reading
    /// the available memory costs more than a small run).
    pub(super) fn max_instances(&mut self) -> usize {
        if let Some(max) = self.max_instances {
            return max;
        }
        let row: u128 = self
            .lowered
            .vars
            .values()
            .filter(|v| {
                // Invariant and member variables have no row per lane.
                !matches!(v.class, VarClass::Invariant | VarClass::Member(_))
                    && self.grows[v.func.index()]
            })
            .map(|v| value_bytes(&v.ty, self.step.shared.symbols))
            .fold(0, u128::saturating_add);
        let max = default_max_instances(row.saturating_add(MEMBER_OVERHEAD_BYTES));
        self.max_instances = Some(max);
        max
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
        let (join, resolution) = self.step.lanes.close_fork(fork);
        let LoweredTerm::Fork(site) = &self.lowered.blocks[PcBlock(join.site)].term else {
            internal_error("a join whose site is not a fork");
        };
        let parent = join.parent;
        match resolution {
            Resolution::Returned { steps } => {
                self.step.lanes.set_steps(parent, steps);
                self.waiting.push(site.then, &[parent]);
            }
            Resolution::Failed { steps, error } => {
                self.step.lanes.set_steps(parent, steps);
                self.fail_or_recover(parent, error);
            }
            Resolution::StepLimit => self
                .step
                .lanes
                .fail(parent, step_limit(self.step.options.max_steps, site.loc)),
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
            Ok(recover) => self.waiting.push(recover, &[r]),
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
        let (parent, site) = (join.parent as usize, PcBlock(join.site));
        self.depth_base[lane as usize] = join.depth;
        let LoweredTerm::Fork(site) = &self.lowered.blocks[site].term else {
            internal_error("a join whose site is not a fork");
        };
        let call = &site.calls[if site.count.is_some() { 0 } else { k as usize }];
        let member = self.step.lanes.member_of(lane);
        for (param, arg) in &call.params {
            if let Slot::Member(_) = self.slots[param.index()] {
                // Holds the member's value already.
                continue;
            }
            if let Slot::Invariant(assigned) = &self.slots[param.index()] {
                // Every call site passes the same shared value
                // (`autobatch_passes::views`): set once, never per lane.
                if assigned.is_none() {
                    let value = match (arg, &self.slots) {
                        (LoweredArg::Whole(v), slots) => match &slots[v.index()] {
                            Slot::Invariant(Some(value)) => value.clone(),
                            _ => internal_error("a per-member argument of an invariant parameter"),
                        },
                        _ => internal_error("an element or index for an invariant parameter"),
                    };
                    self.slots[param.index()] = Slot::Invariant(Some(value));
                }
                continue;
            }
            let len = self.own_len(*param, lane);
            let elem = self.lowered.vars[*param].ty.elem;
            self.step.call_bytes += (len * crate::memory::element_bytes(elem)) as u64;
            let to = Place {
                slot: param.index(),
                row: lane as usize,
                offset: 0,
            };
            // A member slot's row is the member's.
            let from = |slots: &[Slot], v: GlobalVar, offset| Place {
                slot: v.index(),
                row: match slots[v.index()] {
                    Slot::Member(_) => member,
                    _ => parent,
                },
                offset,
            };
            match arg {
                LoweredArg::Whole(v) => {
                    let from = from(&self.slots, *v, 0);
                    copy_value(&mut self.slots, from, to, len)
                }
                LoweredArg::Element(v) => {
                    let from = from(&self.slots, *v, k as usize * len);
                    copy_value(&mut self.slots, from, to, len)
                }
                LoweredArg::Index => {
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
        let (parent, site) = (join.parent as usize, PcBlock(join.site));
        let LoweredTerm::Fork(site) = &self.lowered.blocks[site].term else {
            internal_error("a join whose site is not a fork");
        };
        let map = site.count.is_some();
        let call = &site.calls[if map { 0 } else { k as usize }];
        for (result, dst) in &call.results {
            let len = self.own_len(*result, lane);
            let from = Place {
                slot: result.index(),
                row: lane as usize,
                offset: 0,
            };
            let to = Place {
                slot: dst.index(),
                row: parent,
                offset: if map { k as usize * len } else { 0 },
            };
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
        // A temporary's value does not outlive its step, unless a fork
        // passes it (its instances start later, from the parent's row).
        let fork_args: std::collections::HashSet<GlobalVar> = lowered
            .blocks
            .values()
            .filter_map(|b| match &b.term {
                LoweredTerm::Fork(fork) => Some(fork),
                _ => None,
            })
            .flat_map(|fork| fork.calls.iter().flat_map(|c| &c.params))
            .filter_map(|(_, arg)| match arg {
                LoweredArg::Whole(v) | LoweredArg::Element(v) => Some(*v),
                LoweredArg::Index => None,
            })
            .collect();
        for (x, slot) in self.slots.iter_mut().enumerate() {
            if self.plan.is_temp[x] {
                // Step storage only.
                continue;
            }
            if let (true, Slot::Column(column)) = (grows(x), slot) {
                let x = GlobalVar::new(x);
                let keep = lowered.vars[x].class != VarClass::Temporary || fork_args.contains(&x);
                column.grow_rows(rows, keep);
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

/// Per function of `lowered`, whether an instance may run it: whether some
/// fork's callee reaches it through calls and forks.
pub(super) fn instance_functions(lowered: &LoweredProgram) -> Vec<bool> {
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); lowered.functions.len()];
    let mut todo = Vec::new();
    for block in lowered.blocks.values() {
        let from = &mut callees[block.func.index()];
        match &block.term {
            LoweredTerm::PushJump { callee, .. } => from.push(callee.index()),
            LoweredTerm::Fork(fork) => {
                from.extend(fork.calls.iter().map(|c| c.callee.index()));
                todo.extend(fork.calls.iter().map(|c| c.callee.index()));
            }
            _ => {}
        }
    }
    let mut grows = vec![false; lowered.functions.len()];
    while let Some(f) = todo.pop() {
        if !std::mem::replace(&mut grows[f], true) {
            todo.extend(callees[f].iter().copied());
        }
    }
    grows
}
