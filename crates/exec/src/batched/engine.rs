//! Runs one primitive for a set of active rows: the shared core of the
//! batching strategies.
//!
//! The engine plans and dispatches; it computes nothing itself. Every value
//! is computed, and every element moved, by a [`Backend`] (the kernels of
//! `autobatch-kernels` on the CPU, [`autobatch_kernels::Cpu`]), whose
//! batched forms give each output element the bits the reference
//! executor's per-member kernels give it, so a member gets bit-identical
//! results whatever strategy, lanes mode, batch composition or thread count
//! runs it. This module only decides *which rows* are computed, *how they
//! are laid out* and *which thread* computes them:
//!
//! - an operation whose operands are all invariant (and that draws no random
//!   number) is computed once; its result goes to an invariant slot, or is
//!   broadcast to the active rows;
//! - elementwise operations, reductions, products, indexing, `fill`,
//!   `transpose`, `outer`, array literals and random draws (each row from
//!   its member's stream) run as one batched backend call over a flat buffer
//!   of rows: all rows of the columns under [`LaneMode::Mask`] (then only
//!   the active rows are kept), or the active rows gathered into a dense
//!   buffer and scattered back under [`LaneMode::Compact`]. A product of a
//!   shared (invariant) matrix with per-member vectors is ONE product over
//!   those rows (`plan` picks the batched form, `Kind::run` is the table
//!   from a form to its backend call);
//! - what remains (integer products, operands of shapes the batched forms
//!   do not take) runs row by row on the active rows only, through
//!   [`Backend::eval`], as does any operation that faulted in a batched form
//!   (to find exactly which rows fault).
//!
//! The [`Engine`] keeps its buffers from step to step: a result is computed
//! into a spare buffer that is then swapped with the destination column's
//! buffer when every row is active (the old buffer becomes spare), or copied
//! into the active rows; gathered operands use spare buffers too. In steady
//! state no operation allocates.
//!
//! Large operations are split over the batch rows between the run's worker
//! threads; each row's elements are computed by the same function whatever
//! the split, so the thread count never changes a bit.
//!
//! An inactive row never raises a fault, never draws a random number and
//! is never written.

use std::ops::Range;

use autobatch_ir::Prim;
use autobatch_kernels::adjoints::AdjointLog;
use autobatch_kernels::backend::Backend;
use autobatch_kernels::buffer::{Rows, RowsMut, Values, ValuesMut};
use autobatch_kernels::rng::{Draw, Streams};
use autobatch_kernels::{Fault, MemberRng, PrimContext};
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use super::indexed::{IndexedOperand, RowGroups};
use super::storage::{Column, Slot};
use crate::internal::internal_error;

mod kind;
use kind::product_kind;
pub(super) use kind::{plan, Kind};

/// How an elementwise operation treats inactive rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LaneMode {
    /// Compute every row of the columns, keep the active ones.
    Mask,
    /// Gather the active rows, compute only those, scatter back.
    Compact,
    /// Mask when at least half of the rows are active, else compact.
    #[default]
    Auto,
}

impl LaneMode {
    pub const ALL: [LaneMode; 3] = [LaneMode::Mask, LaneMode::Compact, LaneMode::Auto];

    pub fn name(self) -> &'static str {
        match self {
            LaneMode::Mask => "mask",
            LaneMode::Compact => "compact",
            LaneMode::Auto => "auto",
        }
    }
}

impl std::fmt::Display for LaneMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LaneMode {
    type Err = String;
    fn from_str(name: &str) -> Result<LaneMode, String> {
        LaneMode::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| format!("unknown lanes mode `{name}` (expected mask, compact or auto)"))
    }
}

impl LaneMode {
    /// Whether to run dense over all `total` rows when `active` of them are active.
    pub fn dense(self, active: usize, total: usize) -> bool {
        match self {
            LaneMode::Mask => true,
            LaneMode::Compact => active == total,
            LaneMode::Auto => active * 2 >= total,
        }
    }
}

/// What a primitive may read besides its operands.
pub struct SharedEnv<'a> {
    pub statics: &'a [Tensor],
    pub symbols: &'a [u64],
    pub hosts: &'a autobatch_kernels::Hosts,
}

/// Inputs of one primitive execution.
pub struct PrimExecution<'a> {
    pub prim: &'a Prim,
    /// Slot index of each operand.
    pub args: &'a [usize],
    /// Slot index of the result, if any.
    pub dst: Option<usize>,
    /// Active rows, in increasing order.
    pub rows: &'a [u32],
    /// The member of each active row, when an operand is a member slot
    /// ([`Slot::Member`], read at its member's row) or the primitive is a
    /// static adjoint (logged as its member's); else empty.
    pub member_rows: &'a [u32],
    /// Rows of the columns the operation runs over: every column has at
    /// least this many (program-counter: columns of the functions that
    /// instances run have a row per lane, the others a row per member).
    pub total_rows: usize,
    pub mode: LaneMode,
    /// A product with an item of a shared array as one operand
    /// ([`super::indexed`]): `args` are then `[index, other operand]`.
    pub indexed: Option<IndexedOperand>,
}

/// Elements (times a rough cost per element) below which an operation is
/// not split between threads: below it, handing the parts to threads costs
/// more than it saves.
const PARALLEL_WORK: usize = 1 << 16;

/// The most operands a batched path handles (`select` has three).
const MAX_ARGS: usize = 3;

/// The state the engine keeps for a whole run: the backend, spare buffers
/// and the worker threads.
pub struct Engine<'b> {
    backend: &'b dyn Backend,
    /// Buffers not in use, of any type, with their capacities; reused by
    /// later operations.
    spare: Vec<(Data, usize)>,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    /// See [`Engine::remember_statics`].
    track_statics: bool,
    /// Per slot, the static it holds for sure (when tracked).
    static_in: Vec<Option<u32>>,
    /// The run's contributions to static adjoints, each with its row's
    /// member (from [`PrimExecution::member_rows`]).
    adjoints: AdjointLog,
}

/// How many times longer than a request a spare buffer may be and still be
/// taken for it (see [`Engine::take`]).
const OVERSIZED: usize = 8;

impl<'b> Engine<'b> {
    /// An engine computing on `backend`, splitting large operations between
    /// `threads` threads (1: everything on the calling thread).
    pub fn new(backend: &'b dyn Backend, threads: usize) -> Engine<'b> {
        let threads = threads.max(1);
        // The workers' panics are the run's internal errors.
        let run = crate::internal::current_run();
        let pool = if threads > 1 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("autobatch-worker-{i}"))
                .start_handler(move |_| crate::internal::capture_for(run))
                .build()
                .ok()
        } else {
            None
        };
        let threads = if pool.is_some() { threads } else { 1 };
        Engine {
            backend,
            spare: Vec::new(),
            pool,
            threads,
            track_statics: false,
            static_in: Vec::new(),
            adjoints: AdjointLog::spare(),
        }
    }

    /// A buffer of `len` elements of type `ty` (contents unspecified),
    /// reusing a spare one of that type when there is one: among those
    /// that hold `len`, the one that needs the fewest new elements, then the
    /// smallest (best fit: a large spare taken for a small buffer would make
    /// the next large one a new allocation, and the spares grow without
    /// bound); else the largest, grown. A spare more than [`OVERSIZED`]
    /// times longer than `len` is left for a long request: shortened, it
    /// would forget its elements past `len`, and the next long request
    /// would write zeros over them again.
    pub(super) fn take(&mut self, ty: ScalarType, len: usize) -> Data {
        let mut fitting: Option<(usize, (usize, usize))> = None;
        let mut largest: Option<(usize, usize)> = None;
        for (i, (d, cap)) in self.spare.iter().enumerate() {
            if d.ty() != ty || d.len() > len.max(1).saturating_mul(OVERSIZED) {
                continue;
            }
            if *cap >= len {
                let cost = (len.saturating_sub(d.len()), *cap);
                if fitting.is_none_or(|(_, c)| cost < c) {
                    fitting = Some((i, cost));
                }
                if cost == (0, len) {
                    break;
                }
            } else if largest.is_none_or(|(_, c)| c < *cap) {
                largest = Some((i, *cap));
            }
        }
        let best = fitting.map(|(i, _)| i).or(largest.map(|(i, _)| i));
        let mut data = match best {
            Some(i) => self.spare.swap_remove(i).0,
            // Empty: the backend allocates it.
            None => Data::with_capacity(ty, 0),
        };
        self.backend.resize(&mut data, ty, len);
        data
    }

    /// Gives a buffer back for reuse. A buffer without capacity is dropped:
    /// it has nothing to reuse, and keeping it would grow the spares that
    /// [`Engine::take`] scans (a step temporary released and adopted again
    /// gives back such a buffer at every step).
    pub(super) fn give(&mut self, data: Data) {
        let capacity = self.backend.capacity(&data);
        if capacity > 0 {
            self.spare.push((data, capacity));
        }
    }

    /// How many spare buffers the engine keeps (for tests).
    #[cfg(test)]
    pub(super) fn spares(&self) -> usize {
        self.spare.len()
    }

    /// The backend the engine computes on.
    pub(super) fn backend(&self) -> &'b dyn Backend {
        self.backend
    }

    /// Lets the engine remember which invariant slots hold which static, so
    /// that loading a static again into the same slot copies nothing. Only
    /// for a strategy with one slot array for the whole run whose invariant
    /// slots are written by [`Engine::run_prim`] alone (program-counter).
    pub fn remember_statics(&mut self) {
        self.track_statics = true;
    }

    /// Runs the primitive; a row that faults is reported in `faults` and
    /// nothing of it is written. `rngs[member_of(row)]` is each row's stream.
    pub fn run_prim(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        rngs: &mut [MemberRng],
        member_of: &dyn Fn(u32) -> usize,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let mut streams = Streams { rngs, member_of };
        let (true, Some(dst)) = (self.track_statics, exec.dst) else {
            return self.run_prim_untracked(exec, slots, env, &mut streams, faults);
        };
        if self.static_in.len() < slots.len() {
            self.static_in.resize(slots.len(), None);
        }
        let loaded = match exec.prim {
            Prim::LoadStatic(id) => Some(id.0),
            _ => None,
        };
        if loaded.is_some()
            && self.static_in[dst] == loaded
            && matches!(slots[dst], Slot::Invariant(Some(_)))
        {
            // The slot still holds that static: statics never change.
            return;
        }
        self.run_prim_untracked(exec, slots, env, &mut streams, faults);
        self.static_in[dst] = loaded.filter(|_| matches!(slots[dst], Slot::Invariant(Some(_))));
    }

    fn run_prim_untracked(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        streams: &mut Streams<'_>,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let prim = exec.prim;
        let Some(&first_row) = exec.rows.first() else {
            return;
        };
        if exec
            .args
            .iter()
            .any(|a| matches!(slots[*a], Slot::Member(_)))
        {
            return self.run_with_members(exec, slots, env, streams, faults);
        }
        if let Some(indexed) = exec.indexed {
            return self.indexed_product(exec, indexed, slots);
        }
        if prim.is_random() {
            if self.draw(exec, slots, streams) {
                return;
            }
        } else {
            // A host function is called once per member, whatever its
            // operands, and each member logs its own static adjoints.
            let all_invariant = !prim.is_per_member()
                && exec
                    .args
                    .iter()
                    .all(|a| matches!(slots[*a], Slot::Invariant(_)));
            if all_invariant {
                // Non-random primitives never read a stream; one is passed
                // only because the kernels' context holds one.
                self.run_once(exec, slots, env, streams.of(first_row), faults);
                return;
            }
            if let Prim::Copy = prim {
                self.copy_prim(exec, slots);
                return;
            }
            if let Prim::IndexSet = prim {
                if self.set_items_in_place(exec, slots) {
                    return;
                }
            }
            if exec.args.len() <= MAX_ARGS && self.run_rowwise(exec, slots, env) {
                return;
            }
        }
        self.run_row_by_row(exec, slots, env, streams, faults);
    }

    /// A primitive with member-uniform operands: `array[index]` of a member
    /// array reads the item in place; any other operation runs on the
    /// active rows of its member operands copied into columns (what it
    /// costs is what the operation reads anyway).
    fn run_with_members(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        streams: &mut Streams<'_>,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        if exec.member_rows.len() != exec.rows.len() {
            internal_error("a member-uniform operand without the members of the rows");
        }
        if exec
            .dst
            .is_some_and(|d| matches!(slots[d], Slot::Member(_)))
        {
            internal_error("writing a member-uniform variable");
        }
        if self.index_member_array(exec, slots) {
            return;
        }
        let mut lent = Vec::new();
        for (k, &a) in exec.args.iter().enumerate() {
            if exec.args[..k].contains(&a) {
                continue;
            }
            let Slot::Member(column) = &slots[a] else {
                continue;
            };
            let materialized = self.member_rows_column(column, exec);
            lent.push((
                a,
                std::mem::replace(&mut slots[a], Slot::Column(materialized)),
            ));
        }
        self.run_prim_untracked(exec, slots, env, streams, faults);
        for (a, member) in lent {
            if let Slot::Column(column) = std::mem::replace(&mut slots[a], member) {
                self.give(column.data);
            }
        }
    }

    /// A column of `exec.total_rows` rows whose active rows hold their
    /// members' rows of `member` (the others unspecified).
    fn member_rows_column(&mut self, member: &Column, exec: &PrimExecution<'_>) -> Column {
        let n = member.row_len;
        let mut data = self.take(member.data.ty(), exec.total_rows * n);
        for (&row, &m) in exec.rows.iter().zip(exec.member_rows) {
            let (r, m) = (row as usize, m as usize);
            self.backend.copy(
                Values::of(&member.data, m * n..(m + 1) * n),
                ValuesMut::of(&mut data, r * n..(r + 1) * n),
            );
        }
        Column {
            shape: member.shape.clone(),
            row_len: n,
            data,
        }
    }

    /// `dst = array[index]` with a member-uniform `array`: each active row's
    /// item copied from its member's row, in place. False, having written
    /// nothing, when the operands do not fit or an index is out of bounds
    /// (the general path then reports exactly which rows fault).
    fn index_member_array(&mut self, exec: &PrimExecution<'_>, slots: &mut [Slot]) -> bool {
        let (Prim::Index, Some(dst), [array, index]) = (exec.prim, exec.dst, exec.args) else {
            return false;
        };
        let Slot::Member(column) = &slots[*array] else {
            return false;
        };
        let Some(&length) = column.shape.first() else {
            return false;
        };
        let item = column.row_len.checked_div(length).unwrap_or(0);
        let index_of = |row: u32| -> Option<i128> {
            match &slots[*index] {
                Slot::Column(c) if c.row_len == 1 && c.data.ty().is_integer() => {
                    Some(Values::all(&c.data).integer(row as usize))
                }
                Slot::Invariant(Some(t)) if t.len() == 1 && t.elem_type().is_integer() => {
                    Some(Values::all(&t.data).integer(0))
                }
                _ => None,
            }
        };
        let in_bounds = exec
            .rows
            .iter()
            .all(|r| index_of(*r).is_some_and(|i| i >= 0 && i < length as i128));
        if item == 0
            || !in_bounds
            || *index == dst
            || !matches!(&slots[dst], Slot::Column(c) if c.row_len == item && c.data.ty() == column.data.ty())
        {
            return false;
        }
        let positions: Vec<usize> = exec
            .rows
            .iter()
            .map(|r| index_of(*r).map_or(0, |i| i as usize))
            .collect();
        let backend = self.backend;
        let (Slot::Member(column), Slot::Column(out)) = two_slots(slots, *array, dst) else {
            unreachable!("checked above")
        };
        let row_len = column.row_len;
        for ((&row, &m), position) in exec.rows.iter().zip(exec.member_rows).zip(positions) {
            let from = m as usize * row_len + position * item;
            let to = row as usize * item;
            backend.copy(
                Values::of(&column.data, from..from + item),
                ValuesMut::of(&mut out.data, to..to + item),
            );
        }
        true
    }

    /// A primitive with invariant operands: computed once.
    fn run_once(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        unused_rng: &mut MemberRng,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let scalar = match exec.prim {
            Prim::Const(value) => Some(*value),
            Prim::SymbolValue(symbol) => env
                .symbols
                .get(symbol.0 as usize)
                .map(|v| Scalar::Usize(*v)),
            _ => None,
        };
        if let (Some(value), Some(dst)) = (scalar, exec.dst) {
            self.write_scalar(&mut slots[dst], value, exec.rows);
            return;
        }
        if let (Prim::LoadStatic(id), Some(dst)) = (exec.prim, exec.dst) {
            if let Some(value) = env.statics.get(id.0 as usize) {
                assign(self.backend, &mut slots[dst], value, exec.rows);
                return;
            }
        }
        if let (Some(kind), Some(dst)) = (Kind::elementwise(exec.prim), exec.dst) {
            if exec.args.len() <= MAX_ARGS {
                self.elementwise_once(kind, exec, slots, dst, faults);
                return;
            }
        }
        let args: Vec<&Tensor> = exec.args.iter().map(|a| invariant(&slots[*a])).collect();
        let mut ctx = PrimContext {
            statics: env.statics,
            symbols: env.symbols,
            rng: unused_rng,
            hosts: env.hosts,
        };
        match self.backend.eval(exec.prim, &args, &mut ctx) {
            Err(fault) => faults.extend(exec.rows.iter().map(|r| (*r, fault.clone()))),
            Ok(None) => {}
            Ok(Some(value)) => {
                if let Some(dst) = exec.dst {
                    assign(self.backend, &mut slots[dst], &value, exec.rows);
                }
            }
        }
    }

    /// Writes the scalar `value` to an invariant slot (reusing its buffer)
    /// or to the active rows of a column.
    fn write_scalar(&mut self, slot: &mut Slot, value: Scalar, rows: &[u32]) {
        let backend = self.backend;
        match slot {
            Slot::Invariant(Some(t)) => {
                t.shape.clear();
                backend.resize(&mut t.data, value.ty(), 1);
                backend.copy(Values::scalar(&value), ValuesMut::all(&mut t.data));
            }
            Slot::Invariant(v) => *v = Some(Tensor::scalar(value)),
            Slot::Column(c) => {
                backend.broadcast_rows(Values::scalar(&value), rows, ValuesMut::all(&mut c.data))
            }
            Slot::Member(_) => internal_error("writing a member-uniform variable"),
        }
    }

    /// An elementwise operation on invariant operands, into a reused buffer:
    /// the batched form on one row of shared operands.
    fn elementwise_once(
        &mut self,
        kind: Kind,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        dst: usize,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let arg = |k: usize| invariant(&slots[exec.args[k]]);
        let ty = kind.elementwise_type(exec.prim, arg(0).elem_type(), || arg(1).elem_type());
        // Every array operand has the result's shape; scalars broadcast.
        let shape_slot = exec
            .args
            .iter()
            .copied()
            .find(|a| !invariant(&slots[*a]).is_scalar());
        let len = shape_slot.map_or(1, |a| invariant(&slots[a]).len());
        let mut out = self.take(ty, len);
        let outcome = {
            let mut operands = [Rows::NONE; MAX_ARGS];
            for (k, a) in exec.args.iter().enumerate() {
                operands[k] = Rows::Shared(Values::all(&invariant(&slots[*a]).data));
            }
            let out = RowsMut::new(ValuesMut::all(&mut out), 1, len);
            kind.run(self.backend, &operands[..exec.args.len()], out)
        };
        if let Err(fault) = outcome {
            self.give(out);
            faults.extend(exec.rows.iter().map(|r| (*r, fault.clone())));
            return;
        }
        match shape_slot {
            // The result's shape is that of the array operand `a`.
            Some(a) if a != dst => {
                let (src, dst_slot) = two_slots(slots, a, dst);
                let shape = &invariant(src).shape;
                self.store_invariant_result(dst_slot, shape, out, exec.rows);
            }
            // The destination already has the result's shape.
            Some(_) => {
                let slot = &mut slots[dst];
                let shape = invariant(slot).shape.clone();
                self.store_invariant_result(slot, &shape, out, exec.rows);
            }
            None => self.store_invariant_result(&mut slots[dst], &[], out, exec.rows),
        }
    }

    fn store_invariant_result(
        &mut self,
        slot: &mut Slot,
        shape: &[usize],
        mut out: Data,
        rows: &[u32],
    ) {
        match slot {
            Slot::Invariant(Some(t)) => {
                std::mem::swap(&mut t.data, &mut out);
                if t.shape[..] != *shape {
                    t.shape.clear();
                    t.shape.extend_from_slice(shape);
                }
                self.give(out);
            }
            Slot::Invariant(v) => *v = Some(Tensor::new(shape.to_vec(), out)),
            Slot::Column(c) => {
                self.backend
                    .broadcast_rows(Values::all(&out), rows, ValuesMut::all(&mut c.data));
                self.give(out);
            }
            Slot::Member(_) => internal_error("writing a member-uniform variable"),
        }
    }

    /// Random draws (`uniform`, `normal`, `bernoulli`, `uniform_like`,
    /// `normal_like`) straight into the active rows, each from its member's
    /// stream; false if the operands do not fit this path.
    fn draw(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        streams: &mut Streams<'_>,
    ) -> bool {
        let Some(dst) = exec.dst else { return false };
        let (draw, p_slot) = match exec.prim {
            Prim::Uniform => (Draw::Uniform, None),
            Prim::Normal => (Draw::Normal, None),
            Prim::Bernoulli => (Draw::Bernoulli, Some(exec.args[0])),
            Prim::UniformLike => (Draw::UniformLike, None),
            Prim::NormalLike => (Draw::NormalLike, None),
            _ => return false,
        };
        let (p, out) = match p_slot {
            Some(p_slot) if p_slot == dst => return false,
            Some(p_slot) => {
                let (p, out) = two_slots(slots, p_slot, dst);
                match rows_of(p) {
                    Some(p) if p.ty() == ScalarType::F64 => (Some(p), out),
                    _ => return false,
                }
            }
            None => (None, &mut slots[dst]),
        };
        let Slot::Column(column) = out else {
            return false;
        };
        let fits = match draw {
            Draw::Uniform | Draw::Normal => {
                column.data.ty() == ScalarType::F64 && column.row_len == 1
            }
            Draw::Bernoulli => column.data.ty() == ScalarType::Bool && column.row_len == 1,
            Draw::UniformLike | Draw::NormalLike => column.data.ty().is_float(),
        };
        if !fits {
            return false;
        }
        let rows = column.rows();
        let out = RowsMut::new(ValuesMut::all(&mut column.data), rows, column.row_len);
        self.backend.draw(draw, p, exec.rows, streams, out);
        true
    }

    /// The batched path of every primitive that computes each row from the
    /// same row of its operands (or from shared operands): false, having
    /// written nothing, when the operands do not fit it or a row faults.
    /// A product whose operand `indexed.operand` is `array[index]` of a
    /// shared array ([`super::indexed`]): the rows grouped by their index,
    /// each group one product with its item shared, gathered and scattered
    /// by row. The executor checked the operands' kinds and the indices'
    /// bounds when it deferred the index.
    fn indexed_product(
        &mut self,
        exec: &PrimExecution<'_>,
        indexed: IndexedOperand,
        slots: &mut [Slot],
    ) {
        let (&[index, other], Some(dst)) = (exec.args, exec.dst) else {
            internal_error("an indexed product without its index, operand and result")
        };
        let (Slot::Invariant(Some(array)), Slot::Column(indices), Slot::Column(vectors)) =
            (&slots[indexed.array], &slots[index], &slots[other])
        else {
            internal_error("an indexed product of operands it does not take")
        };
        let Slot::Column(out) = &slots[dst] else {
            internal_error("an indexed product into no column")
        };
        let (out_ty, out_len) = (out.data.ty(), out.row_len);
        let Some((&length, item_shape)) = array.shape.split_first() else {
            internal_error("an indexed product of a scalar")
        };
        let item = item_shape.iter().product::<usize>();
        let shapes = if indexed.operand == 0 {
            [item_shape, &vectors.shape[..]]
        } else {
            [&vectors.shape[..], item_shape]
        };
        let Some(kind @ Kind::Product { dims, .. }) =
            product_kind(exec.prim, shapes[0], shapes[1], out_len)
        else {
            internal_error("an indexed product of shapes it does not take")
        };
        let groups = RowGroups::by_index(Values::all(&indices.data), exec.rows, length);
        let row_len = vectors.row_len;
        let mut rows_in = self.take(vectors.data.ty(), exec.rows.len() * row_len);
        let mut rows_out = self.take(out_ty, exec.rows.len() * out_len);
        let backend = self.backend;
        backend.gather_rows(
            Values::all(&vectors.data),
            row_len,
            &groups.rows,
            ValuesMut::all(&mut rows_in),
        );
        for (value, range) in groups.groups() {
            let n = range.len();
            let shared =
                Rows::Shared(Values::all(&array.data).slice(value * item..(value + 1) * item));
            let own = Rows::Column {
                values: Values::all(&rows_in).slice(range.start * row_len..range.end * row_len),
                row_len,
            };
            let operands = if indexed.operand == 0 {
                [shared, own]
            } else {
                [own, shared]
            };
            let out = RowsMut::new(
                ValuesMut::of(&mut rows_out, range.start * out_len..range.end * out_len),
                n,
                out_len,
            );
            let ran = self.split_rows(out_len.max(1) * dims.k.max(1), out, &|range, out| {
                let sliced = operands.map(|o| o.rows(range.clone()));
                kind.run(backend, &sliced, out)
            });
            if ran.is_err() {
                internal_error("a product faulted");
            }
        }
        let Slot::Column(out) = &mut slots[dst] else {
            unreachable!("checked above")
        };
        backend.scatter_rows(
            Values::all(&rows_out),
            out_len,
            &groups.rows,
            ValuesMut::all(&mut out.data),
        );
        self.give(rows_in);
        self.give(rows_out);
    }

    fn run_rowwise(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
    ) -> bool {
        let Some(dst) = exec.dst else { return false };
        let Slot::Column(dst_column) = &slots[dst] else {
            return false;
        };
        let out_ty = dst_column.data.ty();
        let out_len = dst_column.row_len;
        let Some(kind) = plan(exec.prim, exec.args, slots, out_len, env) else {
            return false;
        };
        let active = exec.rows.len();
        let total = exec.total_rows;
        let dense = exec.mode.dense(active, total);
        let n = if dense { total } else { active };
        let gathered = if dense {
            [None, None, None]
        } else {
            self.gather_operands(exec, slots)
        };
        let mut out = self.take(out_ty, n * out_len);
        let outcome = {
            let mut operands = [Rows::NONE; MAX_ARGS];
            for (k, a) in exec.args.iter().enumerate() {
                operands[k] = match &slots[*a] {
                    // Under compaction, its active rows gathered at its first use.
                    Slot::Column(c) if !dense => {
                        let first = exec.args.iter().position(|b| b == a).unwrap_or(k);
                        let Some(g) = &gathered[first] else {
                            internal_error("a column operand was not gathered")
                        };
                        Rows::Column {
                            values: Values::all(g),
                            row_len: c.row_len,
                        }
                    }
                    slot => rows_of(slot).unwrap_or_else(|| {
                        internal_error("reading an unassigned invariant variable")
                    }),
                };
            }
            let operands = &operands[..exec.args.len()];
            let work = out_len.max(1) * kind.cost_per_element();
            let out = RowsMut::new(ValuesMut::all(&mut out), n, out_len);
            let backend = self.backend;
            self.split_rows(work, out, &|range, out| {
                if range.len() == n {
                    // Not split: the operands are cut to these rows already.
                    return kind.run(backend, operands, out);
                }
                let mut sliced = [Rows::NONE; MAX_ARGS];
                for (s, o) in sliced.iter_mut().zip(operands) {
                    *s = o.rows(range.clone());
                }
                kind.run(backend, &sliced[..operands.len()], out)
            })
        };
        if !dense {
            for buffer in gathered.into_iter().flatten() {
                self.give(buffer);
            }
        }
        if outcome.is_err() {
            self.give(out);
            return false;
        }
        let Slot::Column(dst_column) = &mut slots[dst] else {
            unreachable!("checked above")
        };
        let whole = dst_column.data.len() == out.len();
        let rows = exec.rows;
        if dense && active == total && whole {
            std::mem::swap(&mut dst_column.data, &mut out);
        } else if dense {
            let dst = ValuesMut::all(&mut dst_column.data);
            self.backend
                .copy_rows(Values::all(&out), out_len, rows, dst);
        } else {
            let dst = ValuesMut::all(&mut dst_column.data);
            self.backend
                .scatter_rows(Values::all(&out), out_len, rows, dst);
        }
        self.give(out);
        true
    }

    /// Under compaction: each column operand's active rows, gathered once
    /// (at the position of its first use).
    fn gather_operands(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &[Slot],
    ) -> [Option<Data>; MAX_ARGS] {
        let mut gathered = [None, None, None];
        for (k, a) in exec.args.iter().enumerate() {
            if exec.args[..k].contains(a) {
                continue;
            }
            if let Slot::Column(c) = &slots[*a] {
                let mut buffer = self.take(c.data.ty(), exec.rows.len() * c.row_len);
                self.backend.gather_rows(
                    Values::all(&c.data),
                    c.row_len,
                    exec.rows,
                    ValuesMut::all(&mut buffer),
                );
                gathered[k] = Some(buffer);
            }
        }
        gathered
    }

    /// Runs `f` over the rows of `out`: in one call, or split into
    /// consecutive row ranges between the worker threads when the work
    /// (`work_per_row` times the rows) is large enough.
    fn split_rows(
        &self,
        work_per_row: usize,
        out: RowsMut<'_>,
        f: &RowsFn<'_>,
    ) -> Result<(), Fault> {
        let n = out.rows;
        let pieces = match &self.pool {
            Some(_) if n >= 2 && n.saturating_mul(work_per_row) >= PARALLEL_WORK => {
                self.threads.min(n)
            }
            _ => 1,
        };
        match &self.pool {
            Some(pool) if pieces > 1 => pool.install(|| split_recursive(0..n, pieces, out, f)),
            _ => f(0..n, out),
        }
    }

    /// In how many parts to split `rows` rows of `work_per_row` each
    /// between the worker threads (1: not split), as [`Engine::split_rows`]
    /// decides.
    pub(super) fn pieces(&self, rows: usize, work_per_row: usize) -> usize {
        match &self.pool {
            Some(_) if rows >= 2 && rows.saturating_mul(work_per_row) >= PARALLEL_WORK => {
                self.threads.min(rows)
            }
            _ => 1,
        }
    }

    /// Runs `f` inside the worker pool (on the calling thread without one).
    pub(super) fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// `x = index_set(x, i, v)` on a column `x`: writes each active row's item
    /// where it belongs, leaving the rest of the row alone, so that filling an
    /// array element by element costs the elements written, not the array's
    /// length each time. False, having written nothing, when the operands do
    /// not fit this path (the destination is not the array operand, or not a
    /// column) or some row's index is out of bounds (the general paths then
    /// report exactly which rows fault).
    fn set_items_in_place(&mut self, exec: &PrimExecution<'_>, slots: &mut [Slot]) -> bool {
        let (Some(dst), [array, index, value]) = (exec.dst, exec.args) else {
            return false;
        };
        if *array != dst || *index == dst || *value == dst {
            return false;
        }
        let Slot::Column(column) = &slots[dst] else {
            return false;
        };
        let Some(&length) = column.shape.first() else {
            return false;
        };
        if length == 0 {
            return false;
        }
        let item = column.row_len / length;
        let ty = column.data.ty();
        let fits = |slot: &Slot, len: usize, ty: Option<ScalarType>| match rows_of(slot) {
            Some(rows) => rows.row_len() == len && ty.is_none_or(|ty| rows.ty() == ty),
            None => false,
        };
        if !fits(&slots[*value], item, Some(ty)) || !fits(&slots[*index], 1, None) {
            return false;
        }
        let Slot::Column(mut target) = std::mem::replace(&mut slots[dst], Slot::Invariant(None))
        else {
            unreachable!("checked above")
        };
        let written = {
            let (index, value) = (rows_of(&slots[*index]), rows_of(&slots[*value]));
            let (Some(index), Some(value)) = (index, value) else {
                unreachable!("checked above")
            };
            let (rows, row_len) = (target.rows(), target.row_len);
            let array = RowsMut::new(ValuesMut::all(&mut target.data), rows, row_len);
            self.backend
                .set_items(index, value, length, exec.rows, array)
                .is_ok()
        };
        slots[dst] = Slot::Column(target);
        written
    }

    /// `dst = copy(src)`: the active rows of a column, or a shared value.
    fn copy_prim(&mut self, exec: &PrimExecution<'_>, slots: &mut [Slot]) {
        let (src, dst) = match (exec.args, exec.dst) {
            ([src], Some(dst)) => (*src, dst),
            _ => internal_error("a copy without one operand and a result"),
        };
        if src == dst {
            return;
        }
        let backend = self.backend;
        let (src_slot, dst_slot) = two_slots(slots, src, dst);
        match (src_slot, dst_slot) {
            (Slot::Column(s), Slot::Column(d)) => {
                if exec.rows.len() == exec.total_rows {
                    let n = exec.total_rows * d.row_len;
                    backend.copy(Values::of(&s.data, 0..n), ValuesMut::of(&mut d.data, 0..n));
                } else {
                    let (from, to) = (Values::all(&s.data), ValuesMut::all(&mut d.data));
                    backend.copy_rows(from, d.row_len, exec.rows, to);
                }
            }
            (Slot::Invariant(Some(v)), d) => assign(backend, d, v, exec.rows),
            (Slot::Invariant(None), Slot::Invariant(d)) => *d = None,
            (Slot::Column(_), Slot::Invariant(_))
            | (Slot::Invariant(None), _)
            | (Slot::Member(_), _)
            | (_, Slot::Member(_)) => internal_error("copy between incompatible slots"),
        }
    }

    /// The run's contributions to static adjoints so far (every member's,
    /// failed ones included: [`super::lanes::LaneTable::into_output`] keeps
    /// those of the members that return).
    pub fn take_adjoints(&mut self) -> AdjointLog {
        std::mem::take(&mut self.adjoints)
    }

    /// The general path: each active row alone, through [`Backend::eval`]
    /// (a batched host function: every active row in one call; a static
    /// adjoint: each row's record into the engine's log).
    fn run_row_by_row(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        streams: &mut Streams<'_>,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        if let Prim::StaticAdjoint(adjoint) = exec.prim {
            if exec.member_rows.len() != exec.rows.len() {
                internal_error("a static adjoint without the members of the rows");
            }
            for (&row, &member) in exec.rows.iter().zip(exec.member_rows) {
                let owned = row_operands(self.backend, exec, slots, row);
                let operands = operand_refs(exec, slots, &owned);
                self.adjoints.push_tensors(member, adjoint, &operands);
            }
            return;
        }
        if let Prim::Host(host) = exec.prim {
            if env.hosts.is_batched(&host.name) {
                return self.run_host_batch(exec, slots, env, host, faults);
            }
        }
        let backend = self.backend;
        for &row in exec.rows {
            let outcome = {
                let owned = row_operands(backend, exec, slots, row);
                let operands = operand_refs(exec, slots, &owned);
                let mut ctx = PrimContext {
                    statics: env.statics,
                    symbols: env.symbols,
                    rng: streams.of(row),
                    hosts: env.hosts,
                };
                backend.eval(exec.prim, &operands, &mut ctx)
            };
            match outcome {
                Err(fault) => faults.push((row, fault)),
                Ok(None) => {}
                Ok(Some(value)) => store_row(backend, exec, slots, row, &value),
            }
        }
    }

    /// A batched host function: the calls of every active row at once.
    fn run_host_batch(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        host: &autobatch_ir::HostPrim,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let backend = self.backend;
        let owned: Vec<Vec<Option<Tensor>>> = exec
            .rows
            .iter()
            .map(|&row| row_operands(backend, exec, slots, row))
            .collect();
        let outcomes = {
            let calls: Vec<Vec<&Tensor>> =
                owned.iter().map(|o| operand_refs(exec, slots, o)).collect();
            env.hosts.call_batch(host, &calls, env.symbols)
        };
        for (&row, outcome) in exec.rows.iter().zip(outcomes) {
            match outcome {
                Err(fault) => faults.push((row, fault)),
                Ok(value) => store_row(backend, exec, slots, row, &value),
            }
        }
    }
}

/// Row `row`'s operands that live in columns (invariant ones are `None`:
/// read in place, [`operand_refs`]).
fn row_operands(
    backend: &dyn Backend,
    exec: &PrimExecution<'_>,
    slots: &[Slot],
    row: u32,
) -> Vec<Option<Tensor>> {
    exec.args
        .iter()
        .map(|a| match &slots[*a] {
            Slot::Column(c) => Some(row_value(backend, c, row as usize)),
            Slot::Invariant(_) => None,
            Slot::Member(_) => internal_error("a member-uniform operand row by row"),
        })
        .collect()
}

/// A row's operands: its own (`owned`) and the invariant ones.
fn operand_refs<'s>(
    exec: &PrimExecution<'_>,
    slots: &'s [Slot],
    owned: &'s [Option<Tensor>],
) -> Vec<&'s Tensor> {
    exec.args
        .iter()
        .zip(owned)
        .map(|(a, o)| match o {
            Some(t) => t,
            None => invariant(&slots[*a]),
        })
        .collect()
}

/// Writes one row's value into the destination column.
fn store_row(
    backend: &dyn Backend,
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    row: u32,
    value: &Tensor,
) {
    let Some(dst) = exec.dst else { return };
    match &mut slots[dst] {
        Slot::Column(c) => {
            let n = c.row_len;
            let r = row as usize;
            backend.copy(
                Values::all(&value.data),
                ValuesMut::of(&mut c.data, r * n..(r + 1) * n),
            );
        }
        // Only a random primitive or a host call with invariant operands
        // can get here with an invariant result, and the uniformity
        // analysis never makes their results invariant.
        Slot::Invariant(_) | Slot::Member(_) => {
            internal_error("a per-member value into an invariant variable")
        }
    }
}

/// Row `r` of a column as a tensor of its own, moved by the backend.
fn row_value(backend: &dyn Backend, column: &Column, r: usize) -> Tensor {
    let n = column.row_len;
    let ty = column.data.ty();
    let mut data = Data::with_capacity(ty, 0);
    backend.resize(&mut data, ty, n);
    backend.copy(
        Values::of(&column.data, r * n..(r + 1) * n),
        ValuesMut::all(&mut data),
    );
    Tensor::new(column.shape.clone(), data)
}

/// Computes a range of rows into their part of the output.
type RowsFn<'a> = dyn Fn(Range<usize>, RowsMut<'_>) -> Result<(), Fault> + Sync + 'a;

fn split_recursive(
    range: Range<usize>,
    pieces: usize,
    out: RowsMut<'_>,
    f: &RowsFn<'_>,
) -> Result<(), Fault> {
    if pieces <= 1 || range.len() <= 1 {
        return f(range, out);
    }
    let left_pieces = pieces / 2;
    let mid = range.start + range.len() * left_pieces / pieces;
    let (left, right) = out.split_at(mid - range.start);
    let (a, b) = rayon::join(
        || split_recursive(range.start..mid, left_pieces, left, f),
        || split_recursive(mid..range.end, pieces - left_pieces, right, f),
    );
    a.and(b)
}

/// The shape of a slot's value (of one row, for a column).
fn slot_shape(slot: &Slot) -> Option<&[usize]> {
    match slot {
        Slot::Column(c) => Some(&c.shape),
        Slot::Invariant(Some(t)) => Some(&t.shape),
        Slot::Invariant(None) | Slot::Member(_) => None,
    }
}

/// A slot as an operand of a batched operation (its whole column), or
/// `None` for an unassigned invariant.
fn rows_of(slot: &Slot) -> Option<Rows<'_>> {
    match slot {
        Slot::Column(c) => Some(Rows::Column {
            values: Values::all(&c.data),
            row_len: c.row_len,
        }),
        Slot::Invariant(Some(t)) => Some(Rows::Shared(Values::all(&t.data))),
        Slot::Invariant(None) | Slot::Member(_) => None,
    }
}

/// The value of an invariant slot.
fn invariant(slot: &Slot) -> &Tensor {
    match slot {
        Slot::Invariant(Some(t)) => t,
        Slot::Invariant(None) => internal_error("reading an unassigned invariant variable"),
        Slot::Column(_) | Slot::Member(_) => {
            internal_error("a per-member operand of an invariant operation")
        }
    }
}

/// Writes `value` to an invariant slot (reusing its buffer) or to the
/// active rows of a column.
fn assign(backend: &dyn Backend, slot: &mut Slot, value: &Tensor, rows: &[u32]) {
    match slot {
        Slot::Invariant(Some(t)) => {
            if t.shape != value.shape {
                t.shape.clear();
                t.shape.extend_from_slice(&value.shape);
            }
            backend.resize(&mut t.data, value.elem_type(), value.len());
            backend.copy(Values::all(&value.data), ValuesMut::all(&mut t.data));
        }
        Slot::Invariant(v) => *v = Some(value.clone()),
        Slot::Column(c) => {
            backend.broadcast_rows(Values::all(&value.data), rows, ValuesMut::all(&mut c.data))
        }
        Slot::Member(_) => internal_error("writing a member-uniform variable"),
    }
}

/// Borrows two distinct slots, the first shared and the second mutable.
fn two_slots(slots: &mut [Slot], a: usize, b: usize) -> (&Slot, &mut Slot) {
    if a == b {
        internal_error("an operation reads and writes one slot through two borrows");
    }
    if a < b {
        let (lo, hi) = slots.split_at_mut(b);
        (&lo[a], &mut hi[0])
    } else {
        let (lo, hi) = slots.split_at_mut(a);
        (&hi[0], &mut lo[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer without capacity is not kept: a step temporary released and
    /// adopted again gives one back at every step, and keeping them made
    /// `take` scan hundreds of thousands of spares (the sampler's runs slowed
    /// down without bound).
    #[test]
    fn empty_buffers_are_not_kept_as_spares() {
        let cpu = autobatch_kernels::Cpu;
        let mut engine = Engine::new(&cpu, 1);
        for _ in 0..1000 {
            engine.give(Data::with_capacity(ScalarType::F64, 0));
        }
        assert_eq!(engine.spares(), 0);
        let data = engine.take(ScalarType::F64, 16);
        engine.give(data);
        assert_eq!(engine.spares(), 1);
        let again = engine.take(ScalarType::F64, 8);
        assert_eq!(engine.spares(), 0, "the spare is reused");
        engine.give(again);
    }

    fn address(data: &Data) -> *const f64 {
        match data {
            Data::F64(v) => v.as_ptr(),
            _ => panic!("not f64"),
        }
    }

    /// A long spare is not shortened for a short buffer: the next long
    /// request gets it whole, and no zeros are written over it again.
    #[test]
    fn long_spares_are_kept_for_long_requests() {
        let cpu = autobatch_kernels::Cpu;
        let mut engine = Engine::new(&cpu, 1);
        let long = engine.take(ScalarType::F64, 4096);
        let first = address(&long);
        engine.give(long);
        let short = engine.take(ScalarType::F64, 16);
        assert_ne!(address(&short), first, "a new short buffer");
        assert_eq!(engine.spares(), 1, "the long one stays spare");
        let again = engine.take(ScalarType::F64, 4096);
        assert_eq!(address(&again), first, "the long spare, whole");
        // Within the bound, a longer spare is taken (shortened).
        engine.give(again);
        engine.give(short);
        let middle = engine.take(ScalarType::F64, 1024);
        assert_eq!(address(&middle), first);
    }
}
