//! A fork (`join`, `map`, `pfor`) as native code: its instances one after
//! the other, as the reference executor runs them.
//!
//! Each instance is a call of its callee one level deeper (the depth check
//! of a call, located where the reference locates a fork's overflow), with
//! the host keeping the random streams and the figures around it
//! (`crate::forks`). A `join` is its calls in order: each call's results
//! are written before the next call reads its arguments, as in the
//! reference. A `map` (and `pfor`) is a loop over `k`: instance `k` reads
//! element `k` of its mapped arguments and writes element `k` of each
//! result array. The reference gathers a `map`'s results and writes them
//! when the last instance returns, so an argument that is also a result
//! is read from a copy taken before the loop. A stop inside an instance
//! leaves the fork through `fork_end` (the forking stream comes back), then
//! returns like any stop.

use autobatch_ir::{
    fork_calls, EntityRef, InstanceArg, InstanceCall, Instances, Loc, TapeMode, Var,
};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, Value};

use super::function::{explicit_slot, Translator, FLAGS};
use super::{machine_type, FORK_BEGIN, FORK_END, INSTANCE_BEGIN, INSTANCE_END};
use crate::forks::tape_mode_code;
use crate::{offsets, Stop};

/// A fork operation of the IR.
pub(super) struct ForkSite<'a> {
    pub(super) dsts: &'a [Var],
    pub(super) args: &'a [Var],
    pub(super) instances: &'a Instances,
    pub(super) loc: Loc,
    pub(super) tape: TapeMode,
}

/// Where instance `k` finds one argument.
#[derive(Clone, Copy)]
enum Source {
    /// The value (a scalar) or the address (an array) to pass.
    Ready(Value),
    /// Element `k` of the array at this address, of `bytes` bytes each; a
    /// scalar of type `scalar` is loaded, an array is passed by address.
    Element {
        base: Value,
        bytes: Value,
        scalar: Option<types::Type>,
    },
    Index,
}

impl Translator<'_, '_, '_> {
    pub(super) fn fork(&mut self, site: ForkSite<'_>) {
        let ForkSite {
            dsts,
            args,
            instances,
            loc,
            tape,
        } = site;
        let calls = fork_calls(self.unit.program, dsts, args, instances);
        let overflow = Stop::StackOverflow(instances.overflow_loc(loc));
        let mode = self.b.ins().iconst(types::I64, tape_mode_code(tape));
        let total = match instances {
            Instances::Join(calls) => self.b.ins().iconst(types::I64, calls.len() as i64),
            Instances::Map { count, .. } => self.dim_value(*count),
        };
        self.call_import(FORK_BEGIN, &[self.ctx, mode, total], None);
        match instances {
            Instances::Join(_) => {
                for (k, call) in calls.iter().enumerate() {
                    let k = self.b.ins().iconst(types::I64, k as i64);
                    let sources = self.sources(call, &[]);
                    self.instance(call, k, &sources, overflow.clone(), false);
                }
            }
            Instances::Map { .. } => {
                let call = &calls[0];
                // A constant, or the member's own length.
                let count = total;
                let sources = self.sources(call, dsts);
                self.map_loop(call, count, &sources, overflow);
            }
        }
        self.call_import(FORK_END, &[self.ctx], None);
    }

    /// How each argument of `call` is passed; an array that is also one of
    /// `written` (the fork's results, for a `map`) is copied first.
    fn sources(&mut self, call: &InstanceCall<'_>, written: &[Var]) -> Vec<Source> {
        call.args
            .iter()
            .map(|arg| match *arg {
                InstanceArg::Index => Source::Index,
                InstanceArg::Whole(v) => {
                    let value = self.get(v);
                    if self.is_array(v) && written.contains(&v) {
                        Source::Ready(self.copy_of(v, value))
                    } else {
                        Source::Ready(value)
                    }
                }
                InstanceArg::Element(v) => {
                    let mut base = self.addr(v);
                    if written.contains(&v) {
                        base = self.copy_of(v, base);
                    }
                    let ty = &self.function.vars[v].ty;
                    Source::Element {
                        base,
                        bytes: self.element_bytes(v),
                        scalar: (ty.dims.len() == 1).then(|| machine_type(ty.elem)),
                    }
                }
            })
            .collect()
    }

    /// If `cond`: leaves the fork (the forking stream comes back) in a cold
    /// block, then stops the member with `code`, or, without one, returns
    /// with the status an instance set.
    fn leave_fork_if(&mut self, cond: Value, code: Option<u32>) {
        let leave = self.b.create_block();
        self.b.set_cold_block(leave);
        let go_on = self.b.create_block();
        self.b.ins().brif(cond, leave, &[], go_on, &[]);
        self.b.switch_to_block(leave);
        self.call_import(FORK_END, &[self.ctx], None);
        match code {
            Some(code) => {
                let code = self.b.ins().iconst(types::I32, i64::from(code));
                self.b.ins().jump(self.stop_block, &[BlockArg::Value(code)]);
            }
            None => {
                self.b.ins().jump(self.propagate, &[]);
            }
        }
        self.b.switch_to_block(go_on);
    }

    /// The bytes of one element (the item along the first axis) of array
    /// `v` (the member's own).
    fn element_bytes(&mut self, v: Var) -> Value {
        let function = self.function;
        self.bytes_of(&function.vars[v].ty, 1)
    }

    /// The address of element `k` of the array at `base`.
    fn element_at(&mut self, base: Value, k: Value, bytes: Value) -> Value {
        let offset = self.b.ins().imul(k, bytes);
        self.b.ins().iadd(base, offset)
    }

    /// A copy of array `v` (at `from`) in a slot of this frame.
    fn copy_of(&mut self, v: Var, from: Value) -> Value {
        let bytes = self.var_bytes(v);
        let slot = explicit_slot(&mut self.b, bytes.max(8));
        let copy = self.b.ins().stack_addr(types::I64, slot, 0);
        self.copy_var(copy, from, v);
        copy
    }

    /// `for k in 0..count { instance k }`.
    fn map_loop(
        &mut self,
        call: &InstanceCall<'_>,
        count: Value,
        sources: &[Source],
        overflow: Stop,
    ) {
        let header = self.b.create_block();
        let body = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(header, types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().jump(header, &[BlockArg::Value(zero)]);
        self.b.switch_to_block(header);
        let k = self.b.block_params(header)[0];
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, k, count);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        self.instance(call, k, sources, overflow, true);
        let next = self.b.ins().iadd_imm_s(k, 1);
        self.b.ins().jump(header, &[BlockArg::Value(next)]);
        self.b.switch_to_block(exit);
    }

    /// Instance `k`: the depth check, the call, and its results (element
    /// `k` of each result array when `mapped`).
    fn instance(
        &mut self,
        call: &InstanceCall<'_>,
        k: Value,
        sources: &[Source],
        overflow: Stop,
        mapped: bool,
    ) {
        // The depth check of a call; on overflow, leave the fork first.
        let depth_left = self.b.use_var(self.depth);
        let no_room = self.b.ins().icmp_imm_s(IntCC::Equal, depth_left, 0);
        let code = self.unit.stop(overflow);
        self.leave_fork_if(no_room, Some(code));

        self.call_import(INSTANCE_BEGIN, &[self.ctx, k], None);
        let depth = self.b.ins().iadd_imm_s(depth_left, -1);
        let steps = self.b.use_var(self.steps);
        let mut values = vec![self.ctx, depth, steps];
        for (source, arg) in sources.iter().zip(&call.args) {
            let value = match *source {
                Source::Ready(value) => {
                    // A join's call whose array argument is also its own
                    // result gets a copy (the callee may read it in place
                    // while it writes the result); a map's such arguments
                    // are copies already (`sources`).
                    match arg {
                        InstanceArg::Whole(v)
                            if !mapped && self.is_array(*v) && call.dsts.contains(v) =>
                        {
                            self.copy_of(*v, value)
                        }
                        _ => value,
                    }
                }
                Source::Index => k,
                Source::Element {
                    base,
                    bytes,
                    scalar,
                } => {
                    let at = self.element_at(base, k, bytes);
                    match scalar {
                        Some(ty) => self.b.ins().load(ty, FLAGS, at, 0),
                        None => at,
                    }
                }
            };
            values.push(value);
        }
        let callee = &self.unit.program.functions[call.callee];
        let results: Vec<(Var, bool)> = call
            .dsts
            .iter()
            .zip(&callee.results)
            .map(|(d, r)| (*d, r.is_scalar()))
            .collect();
        // Where each result goes: a join's destinations, or element `k`.
        let mut element_addrs = Vec::with_capacity(results.len());
        for &(d, scalar) in &results {
            let at = if mapped {
                let base = self.addr(d);
                let bytes = self.element_bytes(d);
                Some(self.element_at(base, k, bytes))
            } else {
                None
            };
            if !scalar {
                let to = match at {
                    Some(at) => at,
                    None => self.addr(d),
                };
                values.push(to);
            }
            element_addrs.push(at);
        }
        let callee_ref = self.callee_ref(call.callee);
        let inst = self.b.ins().call(callee_ref, &values);
        let returned = self.b.inst_results(inst).to_vec();
        self.b.def_var(self.steps, returned[0]);
        self.call_import(INSTANCE_END, &[self.ctx], None);
        let status = self
            .b
            .ins()
            .load(types::I32, FLAGS, self.ctx, offsets::STATUS);
        self.leave_fork_if(status, None);
        let mut scalars = returned[1..].iter();
        for (&(d, scalar), at) in results.iter().zip(element_addrs) {
            if !scalar {
                continue;
            }
            let value = *scalars.next().expect("a returned value per scalar result");
            match at {
                Some(at) => {
                    self.b.ins().store(FLAGS, value, at, 0);
                }
                None => self.b.def_var(self.vars[d.index()], value),
            }
        }
    }
}
