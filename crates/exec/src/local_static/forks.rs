//! Local-static's forks: every row of an activation that reaches a fork
//! opens a join, and the instances of all its rows run as one child
//! activation per callee, in chunks of at most `--max-instances` lanes;
//! each instance that returns writes its results into its parent row's
//! destinations, and the joins resolve in instance order.

use super::*;

/// A fork operation of the IR.
pub(super) struct ForkSite<'p> {
    pub(super) dsts: &'p [Var],
    pub(super) args: &'p [Var],
    pub(super) instances: &'p Instances,
    pub(super) loc: Loc,
    pub(super) tape: TapeMode,
}

/// One instance started by a fork: the activation row of its parent, its
/// lane, and its index.
#[derive(Clone, Copy, Debug)]
pub(super) struct Instance {
    pub(super) row: u32,
    pub(super) lane: u32,
    pub(super) k: u64,
}

impl Run<'_> {
    /// A fork for `rows`: every row draws its fork's key and opens a join
    /// (or overflows the stack); the instances of all rows run in chunks
    /// ([`Run::run_chunk`]); then each row goes on with its member's steps,
    /// or stops with its first instance's error.
    pub(super) fn fork(
        &mut self,
        frame: &mut Activation<'_>,
        site: &ForkSite<'_>,
        rows: &mut Vec<u32>,
        depth: usize,
    ) -> Result<(), ExecError> {
        let max_depth = self.step.options.max_stack_depth;
        let mut joins: Vec<(u32, ForkId)> = Vec::new();
        let mut stopped: Vec<u32> = Vec::new();
        for &r in rows.iter() {
            let lane = frame.lane_of(r);
            if self.step.lanes.is_cancelled(lane) {
                // Cancelled by an overflow just above; it leaves after the operation.
                continue;
            }
            let total = match site.instances {
                Instances::Join(calls) => calls.len(),
                Instances::Map { count, .. } => dim_length(
                    self.step.symbols_of(frame.members[r as usize] as usize),
                    *count,
                ),
            } as u64;
            let key = self.step.lanes.fork_key(lane, site.tape);
            if total > 0 && depth >= max_depth {
                self.step.lanes.fail(
                    lane,
                    stack_overflow(max_depth, site.instances.overflow_loc(site.loc)),
                );
                stopped.push(r);
            } else if total > 0 {
                let opening = Opening {
                    depth,
                    site: 0,
                    mode: site.tape,
                };
                joins.push((r, self.step.lanes.open_fork(lane, key, total, opening)));
            } else {
                self.step.lanes.empty_fork(lane, site.tape);
            }
        }
        if !joins.is_empty() {
            for d in site.dsts {
                self.statics
                    .before_write(&mut frame.slots, &mut frame.loans, d.index());
            }
            let calls = fork_calls(self.program, site.dsts, site.args, site.instances);
            let map = matches!(site.instances, Instances::Map { .. });
            while self.run_chunk(frame, &calls, map, &joins, depth)? {}
            // Every join is closed before any parent fails: a failure
            // cancels the parent's later siblings, which may be rows here.
            let resolved: Vec<(u32, u32, Resolution)> = joins
                .iter()
                .map(|&(r, fork)| {
                    let (join, resolution) = self.step.lanes.close_fork(fork);
                    (r, join.parent, resolution)
                })
                .collect();
            for (r, parent, resolution) in resolved {
                match resolution {
                    Resolution::Returned { steps } => self.step.lanes.set_steps(parent, steps),
                    Resolution::Failed { steps, error } => {
                        self.step.lanes.set_steps(parent, steps);
                        self.step.lanes.fail(parent, error);
                        stopped.push(r);
                    }
                    Resolution::StepLimit => {
                        let error = step_limit(self.step.options.max_steps, site.loc);
                        self.step.lanes.fail(parent, error);
                        stopped.push(r);
                    }
                }
            }
            self.step.lanes.clear_resolved();
        }
        stopped.sort_unstable();
        rows.retain(|r| stopped.binary_search(r).is_err());
        Ok(())
    }

    /// Starts the next chunk of the joins' instances (as many as the budget
    /// of `--max-instances` allows, at least one) and runs them: one child
    /// activation per callee, whose returned rows write their results into
    /// their parents' destinations. False when no instance was left to
    /// start.
    pub(super) fn run_chunk(
        &mut self,
        frame: &mut Activation<'_>,
        calls: &[InstanceCall<'_>],
        map: bool,
        joins: &[(u32, ForkId)],
        depth: usize,
    ) -> Result<bool, ExecError> {
        let budget = self
            .max_instances()
            .saturating_sub(self.step.lanes.live_instances())
            .max(1);
        let mut chunk: Vec<Instance> = Vec::new();
        for &(row, fork) in joins {
            while chunk.len() < budget {
                let Some((lane, k)) = self.step.lanes.start_instance(fork) else {
                    break;
                };
                chunk.push(Instance { row, lane, k });
            }
        }
        if chunk.is_empty() {
            return Ok(false);
        }
        let call_of = |k: u64| &calls[if map { 0 } else { k as usize }];
        let mut callees: Vec<FuncId> = Vec::new();
        for call in calls {
            if !callees.contains(&call.callee) {
                callees.push(call.callee);
            }
        }
        for callee in callees {
            // An instance cancelled by an earlier group's fault does not start.
            let group: Vec<Instance> = chunk
                .iter()
                .filter(|i| call_of(i.k).callee == callee && !self.step.lanes.is_cancelled(i.lane))
                .copied()
                .collect();
            if group.is_empty() {
                continue;
            }
            let params = self.instance_params(frame, callee, &group, &call_of);
            self.step.call_bytes += params.iter().map(Slot::bytes).sum::<u64>();
            let lanes: Vec<u32> = group.iter().map(|i| i.lane).collect();
            self.statics.take_back(&mut frame.slots, &frame.loans);
            let returned = self.activation(callee, &lanes, params, depth + 1)?;
            self.statics.lend_again(&mut frame.slots, &frame.loans);
            self.instance_results(frame, &group, returned, map, &call_of);
        }
        for instance in &chunk {
            self.step.lanes.free(instance.lane);
        }
        self.step.lanes.clear_released();
        Ok(true)
    }

    /// `--max-instances`, or by default as many instances as a quarter of
    /// the available memory holds (computed once, at the first fork:
    /// reading the available memory costs more than a small run).
    pub(super) fn max_instances(&mut self) -> usize {
        if let Some(max) = self.max_instances {
            return max;
        }
        let bytes = lane_bytes(
            self.program,
            self.invariance,
            self.entry,
            self.step.shared.symbols,
        );
        let max = default_max_instances(bytes);
        self.max_instances = Some(max);
        max
    }

    /// The parameter slots of `callee`'s activation for `group`: row `i`
    /// gets what instance `group[i]` passes (from its parent's row).
    pub(super) fn instance_params<'c>(
        &self,
        frame: &Activation<'_>,
        callee: FuncId,
        group: &[Instance],
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) -> Vec<Slot> {
        let function = &self.program.functions[callee];
        let mut params = Vec::with_capacity(function.params.len());
        for (position, p) in function.params.iter().enumerate() {
            if let Some(member) =
                self.shared_member_arg(frame, callee, *p, position, group, call_of)
            {
                params.push(member);
                continue;
            }
            if self.invariance.is_invariant(callee, *p) {
                params.push(self.shared_invariant_arg(frame, position, group, call_of));
                continue;
            }
            let ty = &function.vars[*p].ty;
            let shape = concrete_shape(ty, self.step.shared.symbols);
            let mut column = Column::zeros(ty.elem, shape, group.len());
            for (i, instance) in group.iter().enumerate() {
                let parent = instance.row as usize;
                let len = self.step.own_len(ty, frame.members[parent] as usize);
                let index = Scalar::I64(instance.k as i64);
                // A member slot's row is the parent's member.
                let row = |v: Var| match frame.slots[v.index()] {
                    Slot::Member(_) => frame.members[parent] as usize,
                    _ => parent,
                };
                let values = match call_of(instance.k).args[position] {
                    InstanceArg::Whole(v) => frame.slots[v.index()].values(row(v), 0, len),
                    InstanceArg::Element(v) => {
                        frame.slots[v.index()].values(row(v), instance.k as usize * len, len)
                    }
                    InstanceArg::Index => Values::scalar(&index),
                };
                column.write(i, 0, values);
            }
            params.push(Slot::Column(column));
        }
        params
    }

    /// For an invariant parameter (at `position`): the value every instance
    /// passes (the same shared value at every site, by
    /// `autobatch_passes::views`), shared.
    pub(super) fn shared_invariant_arg<'c>(
        &self,
        frame: &Activation<'_>,
        position: usize,
        group: &[Instance],
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) -> Slot {
        let first = group
            .first()
            .unwrap_or_else(|| internal_error("an activation of no instances"));
        match call_of(first.k).args[position] {
            InstanceArg::Whole(v) => match &frame.slots[v.index()] {
                Slot::Invariant(Some(value)) => Slot::Invariant(Some(value.clone())),
                _ => internal_error("a per-member argument of an invariant parameter"),
            },
            _ => internal_error("an element or index for an invariant parameter"),
        }
    }

    /// For a member-uniform parameter `p` (at `position`) of `callee` to
    /// which every instance of `group` passes, whole, one and the same
    /// member slot: that slot, shared.
    pub(super) fn shared_member_arg<'c>(
        &self,
        frame: &Activation<'_>,
        callee: FuncId,
        p: Var,
        position: usize,
        group: &[Instance],
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) -> Option<Slot> {
        self.invariance.member_root(callee, p)?;
        let member_of = |instance: &Instance| match call_of(instance.k).args[position] {
            InstanceArg::Whole(v) => match &frame.slots[v.index()] {
                Slot::Member(c) => Some(c),
                _ => None,
            },
            _ => None,
        };
        let first = member_of(group.first()?)?;
        group
            .iter()
            .all(|i| member_of(i).is_some_and(|c| std::sync::Arc::ptr_eq(c, first)))
            .then(|| Slot::Member(first.clone()))
    }

    /// The instances of `group` that returned give their results to their
    /// parents' destinations (element `k` of each for a `map`), and their
    /// joins learn of it.
    pub(super) fn instance_results<'c>(
        &mut self,
        frame: &mut Activation<'_>,
        group: &[Instance],
        returned: Returned,
        map: bool,
        call_of: &dyn Fn(u64) -> &'c InstanceCall<'c>,
    ) {
        for (i, instance) in group.iter().enumerate() {
            if !returned.finished[i] || !self.step.lanes.is_running(instance.lane) {
                continue;
            }
            let member = frame.members[instance.row as usize] as usize;
            let function = &self.program.functions[frame.fid];
            for (dst, value) in call_of(instance.k).dsts.iter().zip(&returned.values) {
                // A `map`'s destination holds one result per instance.
                let item = TensorType {
                    elem: value.data.ty(),
                    dims: function.vars[*dst].ty.dims[usize::from(map)..].to_vec(),
                };
                let len = self.step.own_len(&item, member);
                let Slot::Column(column) = &mut frame.slots[dst.index()] else {
                    internal_error("a fork's destination is invariant");
                };
                let offset = if map { instance.k as usize * len } else { 0 };
                let start = i * value.row_len;
                let values = Values::of(&value.data, start..start + len);
                column.write(instance.row as usize, offset, values);
            }
            self.step.lanes.instance_returned(instance.lane);
        }
    }
}
