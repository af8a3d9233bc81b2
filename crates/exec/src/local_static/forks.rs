//! Local-static's forks: every row of an activation that reaches a fork
//! opens a join, and the instances of all its rows run as one child
//! activation per callee, in chunks of at most `--max-instances` lanes;
//! each instance that returns writes its results into its parent row's
//! destinations, and the joins resolve in instance order.

use super::*;
use crate::batched::instances::{
    self, arg_place, instance_count, result_place, shared_arg, ForkAt, Forked,
};
use autobatch_types::MemberError;

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
        let (max_depth, max_steps) = (
            self.step.options.max_stack_depth,
            self.step.options.max_steps,
        );
        let (count, calls) = match site.instances {
            Instances::Join(calls) => (None, calls.len()),
            Instances::Map { count, .. } => (Some(*count), 1),
        };
        let mut joins: Vec<(u32, ForkId)> = Vec::new();
        let mut stopped: Vec<u32> = Vec::new();
        for &r in rows.iter() {
            let lane = frame.lane_of(r);
            if self.step.lanes.is_cancelled(lane) {
                // Cancelled by an overflow just above; it leaves after the operation.
                continue;
            }
            let symbols = self.step.symbols_of(frame.members[r as usize] as usize);
            let at = ForkAt {
                total: instance_count(count, calls, symbols),
                depth,
                site: 0,
                mode: site.tape,
                overflow_loc: site.instances.overflow_loc(site.loc),
            };
            match instances::open(&mut self.step.lanes, lane, at, max_depth) {
                Forked::Waits(fork) => joins.push((r, fork)),
                Forked::NoInstance => {}
                Forked::Overflows(error) => {
                    self.step.lanes.fail(lane, error);
                    stopped.push(r);
                }
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
            let closed: Vec<(u32, u32, Result<(), MemberError>)> = joins
                .iter()
                .map(|&(r, fork)| {
                    let lanes = &mut self.step.lanes;
                    let (join, outcome) = instances::close(lanes, fork, max_steps, |_| site.loc);
                    (r, join.parent, outcome)
                })
                .collect();
            for (r, parent, outcome) in closed {
                if let Err(error) = outcome {
                    self.step.lanes.fail(parent, error);
                    stopped.push(r);
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
        let (program, invariance, entry) = (self.program, self.invariance, self.entry);
        let symbols = self.step.shared.symbols;
        let budget = self
            .max_instances
            .max(|| lane_bytes(program, invariance, entry, symbols))
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
                let first = group
                    .first()
                    .unwrap_or_else(|| internal_error("an activation of no instances"));
                let value = shared_arg(&frame.slots, call_of(first.k).args[position]);
                params.push(Slot::Invariant(Some(value)));
                continue;
            }
            let ty = &function.vars[*p].ty;
            let shape = concrete_shape(ty, self.step.shared.symbols);
            let mut column = Column::zeros(ty.elem, shape, group.len());
            for (i, &Instance { row, k, .. }) in group.iter().enumerate() {
                let member = frame.members[row as usize] as usize;
                let len = self.step.own_len(ty, member);
                let arg = call_of(k).args[position];
                let index = Scalar::I64(k as i64);
                let values = match arg_place(&frame.slots, arg, row as usize, member, k, len) {
                    Some(from) => frame.slots[from.slot].values(from.row, from.offset, len),
                    None => Values::scalar(&index),
                };
                column.write(i, 0, values);
            }
            params.push(Slot::Column(column));
        }
        params
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
                let to = result_place(dst.index(), instance.row as usize, map, instance.k, len);
                let Slot::Column(column) = &mut frame.slots[to.slot] else {
                    internal_error("a fork's destination is invariant");
                };
                let start = i * value.row_len;
                column.write(
                    to.row,
                    to.offset,
                    Values::of(&value.data, start..start + len),
                );
            }
            self.step.lanes.instance_returned(instance.lane);
        }
    }
}
