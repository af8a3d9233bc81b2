//! Runs one primitive for a set of active rows: the shared core of the
//! batching strategies.
//!
//! Every value computed here is computed by the `kernels` crate, the same
//! functions the reference executor calls (for floats those functions give
//! each output element the same bits whatever else is computed with it), so
//! a member gets bit-identical results whatever strategy, lanes mode, batch
//! composition or thread count runs it. This module only decides *which
//! rows* are computed, *how they are laid out* and *which thread* computes
//! them:
//!
//! - an operation whose operands are all invariant (and that draws no random
//!   number) is computed once; its result goes to an invariant slot, or is
//!   broadcast to the active rows;
//! - elementwise operations, reductions, products, indexing, `fill`,
//!   `transpose`, `outer`, array literals and random draws (each row from
//!   its member's stream) run as typed loops or batched kernel calls over a
//!   flat buffer of rows: all rows of the columns under [`LaneMode::Mask`]
//!   (then only the active rows are kept), or the active rows gathered into
//!   a dense buffer and scattered back under [`LaneMode::Compact`]. A product
//!   of a shared (invariant) matrix with per-member vectors is ONE call of
//!   the kernels' batched product over those rows;
//! - what remains (integer products, operands of shapes the batched forms
//!   do not take) runs row by row on the active rows only, as does any
//!   operation that faulted in a batched form (to find exactly which rows fault).
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

use autobatch_ir::{Prim, ReduceOp};
use autobatch_kernels::elementwise::{
    self as ew, ensure_len, DataOperand, Operand, Values, ValuesMut,
};
use autobatch_kernels::scalar::{Float, Integer, MaybeNan};
use autobatch_kernels::{self as kernels, gemm, reduce, Fault, MemberRng, PrimContext};
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use super::storage::{self, copy_into, Slot};

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
    /// Number of rows of every column.
    pub total_rows: usize,
    pub mode: LaneMode,
}

/// Elements (times a rough cost per element) below which an operation is
/// not split between threads: splitting costs a few microseconds.
const PARALLEL_WORK: usize = 1 << 16;

/// The most operands a batched path handles (`select` has three).
const MAX_ARGS: usize = 3;

/// The state the engine keeps for a whole run: spare buffers and the
/// worker threads.
pub struct Engine {
    /// Buffers not in use, of any type and capacity; reused by later operations.
    spare: Vec<Data>,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    /// See [`Engine::remember_statics`].
    track_statics: bool,
    /// Per slot, the static it holds for sure (when tracked).
    static_in: Vec<Option<u32>>,
}

impl Engine {
    /// An engine splitting large operations between `threads` threads
    /// (1: everything on the calling thread).
    pub fn new(threads: usize) -> Engine {
        let threads = threads.max(1);
        let pool = if threads > 1 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("autobatch-worker-{i}"))
                .build()
                .ok()
        } else {
            None
        };
        let threads = if pool.is_some() { threads } else { 1 };
        Engine {
            spare: Vec::new(),
            pool,
            threads,
            track_statics: false,
            static_in: Vec::new(),
        }
    }

    /// A buffer of `len` elements of type `ty` (contents unspecified),
    /// reusing a spare one when there is one of that type.
    fn take(&mut self, ty: ScalarType, len: usize) -> Data {
        let mut best: Option<usize> = None;
        for (i, d) in self.spare.iter().enumerate() {
            if d.ty() == ty {
                let cap = capacity(d);
                if cap >= len {
                    best = Some(i);
                    break;
                }
                if best.is_none_or(|b| capacity(&self.spare[b]) < cap) {
                    best = Some(i);
                }
            }
        }
        let mut data = match best {
            Some(i) => self.spare.swap_remove(i),
            None => Data::with_capacity(ty, len),
        };
        ensure_len(&mut data, ty, len);
        data
    }

    /// Gives a buffer back for reuse.
    fn give(&mut self, data: Data) {
        self.spare.push(data);
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
        if !self.track_statics {
            return self.run_prim_untracked(exec, slots, env, rngs, member_of, faults);
        }
        let Some(dst) = exec.dst else {
            return self.run_prim_untracked(exec, slots, env, rngs, member_of, faults);
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
        self.run_prim_untracked(exec, slots, env, rngs, member_of, faults);
        self.static_in[dst] = loaded.filter(|_| matches!(slots[dst], Slot::Invariant(Some(_))));
    }

    fn run_prim_untracked(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        env: &SharedEnv<'_>,
        rngs: &mut [MemberRng],
        member_of: &dyn Fn(u32) -> usize,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let prim = exec.prim;
        let Some(first_row) = exec.rows.first() else {
            return;
        };
        if prim.is_random() {
            if self.random_scalars(exec, slots, rngs, member_of) {
                return;
            }
        } else {
            let all_invariant = exec
                .args
                .iter()
                .all(|a| matches!(slots[*a], Slot::Invariant(_)));
            if all_invariant {
                // Non-random primitives never read a stream; one is passed
                // only because the kernels' context holds one.
                let unused_rng = &mut rngs[member_of(*first_row)];
                self.run_once(exec, slots, env, unused_rng, faults);
                return;
            }
            if let Prim::Copy = prim {
                copy_rows(exec, slots);
                return;
            }
            if let Prim::IndexSet = prim {
                if index_set_in_place(exec, slots) {
                    return;
                }
            }
            if exec.args.len() <= MAX_ARGS && self.run_rowwise(exec, slots, env) {
                return;
            }
        }
        run_row_by_row(exec, slots, env, rngs, member_of, faults);
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
            match &mut slots[dst] {
                Slot::Invariant(Some(t)) => {
                    t.shape.clear();
                    ensure_len(&mut t.data, value.ty(), 1);
                    set_scalar(&mut t.data, 0, value);
                }
                Slot::Invariant(v) => *v = Some(Tensor::scalar(value)),
                Slot::Column(c) => fill_scalar_rows(&mut c.data, value, exec.rows),
            }
            return;
        }
        if let (Prim::LoadStatic(id), Some(dst)) = (exec.prim, exec.dst) {
            if let Some(value) = env.statics.get(id.0 as usize) {
                assign(&mut slots[dst], value, exec.rows);
                return;
            }
        }
        if is_elementwise(exec.prim) && exec.args.len() <= MAX_ARGS {
            if let Some(dst) = exec.dst {
                self.elementwise_once(exec, slots, dst, faults);
                return;
            }
        }
        let args: Vec<&Tensor> = exec.args.iter().map(|a| invariant(&slots[*a])).collect();
        let mut ctx = PrimContext {
            statics: env.statics,
            symbols: env.symbols,
            rng: unused_rng,
        };
        match kernels::eval(exec.prim, &args, &mut ctx) {
            Err(fault) => faults.extend(exec.rows.iter().map(|r| (*r, fault.clone()))),
            Ok(None) => {}
            Ok(Some(value)) => {
                if let Some(dst) = exec.dst {
                    assign(&mut slots[dst], &value, exec.rows);
                }
            }
        }
    }

    /// An elementwise operation on invariant operands, into a reused buffer.
    fn elementwise_once(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        dst: usize,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let arg = |k: usize| invariant(&slots[exec.args[k]]);
        let ty = elementwise_result_type(exec.prim, arg(0).elem_type(), || arg(1).elem_type());
        // Every array operand has the result's shape; scalars broadcast.
        let shape_source = exec
            .args
            .iter()
            .map(|a| invariant(&slots[*a]))
            .find(|t| !t.is_scalar());
        let len = shape_source.map_or(1, |t| t.len());
        let mut out = self.take(ty, len);
        let outcome = {
            let mut operands = [None; MAX_ARGS];
            for (k, a) in exec.args.iter().enumerate() {
                let t = invariant(&slots[*a]);
                operands[k] = Some(DataOperand {
                    values: Values::all(&t.data),
                    broadcast: t.is_scalar(),
                });
            }
            apply_elementwise(exec.prim, &operands, ValuesMut::all(&mut out))
        };
        if let Err(fault) = outcome {
            self.give(out);
            faults.extend(exec.rows.iter().map(|r| (*r, fault.clone())));
            return;
        }
        let shape_slot = exec
            .args
            .iter()
            .copied()
            .find(|a| !invariant(&slots[*a]).is_scalar());
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
                fill_rows_from(&mut c.data, &out, rows);
                self.give(out);
            }
        }
    }

    /// Random draws (`uniform`, `normal`, `bernoulli`, `uniform_like`,
    /// `normal_like`) straight into the active rows, each from its member's
    /// stream, in the order the kernels draw them; false if the operands do
    /// not fit this path.
    fn random_scalars(
        &mut self,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        rngs: &mut [MemberRng],
        member_of: &dyn Fn(u32) -> usize,
    ) -> bool {
        let Some(dst) = exec.dst else { return false };
        match exec.prim {
            Prim::Uniform | Prim::Normal => {
                let Slot::Column(c) = &mut slots[dst] else {
                    return false;
                };
                let Data::F64(out) = &mut c.data else {
                    return false;
                };
                if c.row_len != 1 {
                    return false;
                }
                let normal = matches!(exec.prim, Prim::Normal);
                for &r in exec.rows {
                    let rng = &mut rngs[member_of(r)];
                    out[r as usize] = if normal { rng.normal() } else { rng.uniform() };
                }
                true
            }
            Prim::UniformLike | Prim::NormalLike => {
                let Slot::Column(c) = &mut slots[dst] else {
                    return false;
                };
                let n = c.row_len;
                let normal = matches!(exec.prim, Prim::NormalLike);
                macro_rules! draw {
                    ($out:expr) => {
                        for &r in exec.rows {
                            let row = &mut $out[r as usize * n..(r as usize + 1) * n];
                            let rng = &mut rngs[member_of(r)];
                            if normal {
                                rng.normal_into(row);
                            } else {
                                rng.uniform_into(row);
                            }
                        }
                    };
                }
                match &mut c.data {
                    Data::F32(out) => draw!(out),
                    Data::F64(out) => draw!(out),
                    _ => return false,
                }
                true
            }
            Prim::Bernoulli => {
                let p_slot = exec.args[0];
                if p_slot == dst {
                    return false;
                }
                let (p, out) = two_slots(slots, p_slot, dst);
                let Slot::Column(c) = out else { return false };
                let Data::Bool(out) = &mut c.data else {
                    return false;
                };
                match p {
                    Slot::Column(pc) => {
                        let Data::F64(ps) = &pc.data else {
                            return false;
                        };
                        for &r in exec.rows {
                            out[r as usize] = rngs[member_of(r)].bernoulli(ps[r as usize]);
                        }
                    }
                    Slot::Invariant(Some(t)) => {
                        let Data::F64(ps) = &t.data else { return false };
                        for &r in exec.rows {
                            out[r as usize] = rngs[member_of(r)].bernoulli(ps[0]);
                        }
                    }
                    Slot::Invariant(None) => return false,
                }
                true
            }
            _ => false,
        }
    }

    /// The batched path of every primitive that computes each row from the
    /// same row of its operands (or from shared operands): false, having
    /// written nothing, when the operands do not fit it or a row faults.
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
        // Under compaction, each column operand's active rows, gathered once.
        let mut gathered: [Option<Data>; MAX_ARGS] = [None, None, None];
        if !dense {
            for (k, a) in exec.args.iter().enumerate() {
                if exec.args[..k].contains(a) {
                    continue;
                }
                if let Slot::Column(c) = &slots[*a] {
                    let mut buffer = self.take(c.data.ty(), 0);
                    storage::gather_rows(&mut buffer, &c.data, exec.rows, c.row_len);
                    gathered[k] = Some(buffer);
                }
            }
        }
        let mut out = self.take(out_ty, n * out_len);
        let outcome = {
            let mut srcs: [Option<Src<'_>>; MAX_ARGS] = [None; MAX_ARGS];
            for (k, a) in exec.args.iter().enumerate() {
                srcs[k] = Some(match &slots[*a] {
                    Slot::Column(c) => {
                        let first = exec.args.iter().position(|b| b == a).unwrap_or(k);
                        let data = match &gathered[first] {
                            Some(g) => g,
                            None => &c.data,
                        };
                        Src::Col {
                            data,
                            row_len: c.row_len,
                        }
                    }
                    Slot::Invariant(Some(t)) => Src::Inv(t),
                    Slot::Invariant(None) => {
                        panic!("internal error: reading an unassigned invariant variable")
                    }
                });
            }
            let srcs = &srcs[..exec.args.len()];
            let work = out_len.max(1) * kind.cost_per_element();
            self.split_rows(n, out_len, work, ValuesMut::all(&mut out), &|range, out| {
                kind.run(srcs, range, out_len, out)
            })
        };
        for buffer in gathered.iter_mut().filter_map(Option::take) {
            self.give(buffer);
        }
        if outcome.is_err() {
            self.give(out);
            return false;
        }
        let Slot::Column(dst_column) = &mut slots[dst] else {
            unreachable!("checked above")
        };
        if dense && active == total {
            std::mem::swap(&mut dst_column.data, &mut out);
        } else if dense {
            storage::copy_rows(&mut dst_column.data, &out, exec.rows, out_len);
        } else {
            storage::scatter_rows(&mut dst_column.data, &out, exec.rows, out_len);
        }
        self.give(out);
        true
    }

    /// Runs `f` over rows `0..n` whose results (`row_len` elements each)
    /// are `out`: in one call, or split into consecutive row ranges between
    /// the worker threads when the work is large enough.
    fn split_rows(
        &self,
        n: usize,
        row_len: usize,
        work_per_row: usize,
        out: ValuesMut<'_>,
        f: &RowsFn<'_>,
    ) -> Result<(), Fault> {
        let pieces = match &self.pool {
            Some(_) if n >= 2 && n.saturating_mul(work_per_row) >= PARALLEL_WORK => {
                self.threads.min(n)
            }
            _ => 1,
        };
        match &self.pool {
            Some(pool) if pieces > 1 => {
                pool.install(|| split_recursive(0..n, pieces, row_len, out, f))
            }
            _ => f(0..n, out),
        }
    }
}

/// Computes a range of rows into their part of the output.
type RowsFn<'a> = dyn Fn(Range<usize>, ValuesMut<'_>) -> Result<(), Fault> + Sync + 'a;

fn split_recursive(
    range: Range<usize>,
    pieces: usize,
    row_len: usize,
    out: ValuesMut<'_>,
    f: &RowsFn<'_>,
) -> Result<(), Fault> {
    if pieces <= 1 || range.len() <= 1 {
        return f(range, out);
    }
    let left_pieces = pieces / 2;
    let mid = range.start + range.len() * left_pieces / pieces;
    let (left, right) = out.split_at((mid - range.start) * row_len);
    let (a, b) = rayon::join(
        || split_recursive(range.start..mid, left_pieces, row_len, left, f),
        || split_recursive(mid..range.end, pieces - left_pieces, row_len, right, f),
    );
    a.and(b)
}

/// An operand of a batched primitive: a column of rows (the column's own
/// buffer, or its active rows gathered), or a shared value.
#[derive(Clone, Copy)]
enum Src<'a> {
    Col { data: &'a Data, row_len: usize },
    Inv(&'a Tensor),
}

impl<'a> Src<'a> {
    /// The elements of rows `range` (the whole value for a shared one).
    fn rows(&self, range: Range<usize>) -> Values<'a> {
        match *self {
            Src::Col { data, row_len } => {
                Values::of(data, range.start * row_len..range.end * row_len)
            }
            Src::Inv(t) => Values::all(&t.data),
        }
    }
}

/// How a batched primitive computes its rows.
enum Kind<'p> {
    /// An elementwise operation; `per_row` when an operand must be
    /// broadcast row by row (a per-member scalar against per-member
    /// arrays, or a shared array).
    Elementwise { prim: &'p Prim, per_row: bool },
    /// A reduction of each row (1-D) to a scalar.
    Reduce { op: ReduceOp },
    /// The softmax of each (1-D, float) row.
    Softmax,
    /// `array[index]`: items of `item` elements, `length` of them.
    Index { length: usize, item: usize },
    /// `array[index] = value`, into a copy: items of `item` elements,
    /// `length` of them.
    IndexSet { length: usize, item: usize },
    /// `[x; count]`.
    Fill { count: usize },
    /// `transpose(m)` of an `m x k` matrix.
    Transpose { m: usize, k: usize },
    /// `outer(a, b)` of float vectors of `m` and `k` elements.
    Outer { m: usize, k: usize },
    /// `[x0, ..., xn-1]` of items of `item` elements each.
    Stack { item: usize },
    /// A float product (`dot`, `matvec`, `vecmat`, `matmul`) of operands of
    /// dimensions `m x k` and `k x p` (a vector is `1 x k` or `k x 1`), each
    /// shared or per member, through the kernels' batched products.
    Product {
        prim: &'p Prim,
        m: usize,
        k: usize,
        p: usize,
        shared: [bool; 2],
    },
}

/// Which batched form runs `prim` on these operands, if any.
fn plan<'p>(
    prim: &'p Prim,
    args: &[usize],
    slots: &[Slot],
    out_len: usize,
    env: &SharedEnv<'_>,
) -> Option<Kind<'p>> {
    let column_len = |k: usize| match &slots[args[k]] {
        Slot::Column(c) => Some(c.row_len),
        Slot::Invariant(_) => None,
    };
    match prim {
        Prim::Unary(_) | Prim::Binary(_) | Prim::Compare(_) | Prim::Cast(_) | Prim::Select => {
            let mut per_row = false;
            for (k, a) in args.iter().enumerate() {
                let alternative = matches!(prim, Prim::Select) && k > 0;
                match &slots[*a] {
                    Slot::Column(c) if c.row_len == out_len => {}
                    Slot::Column(c) if c.row_len == 1 && !alternative => per_row = true,
                    Slot::Invariant(Some(t)) if t.is_scalar() && !alternative => {}
                    Slot::Invariant(Some(t)) if t.len() == out_len => per_row = true,
                    _ => return None,
                }
            }
            Some(Kind::Elementwise { prim, per_row })
        }
        Prim::Reduce(op) => {
            let row_len = column_len(0)?;
            let Slot::Column(c) = &slots[args[0]] else {
                return None;
            };
            (c.shape.len() == 1 && out_len == 1 && row_len == c.shape[0])
                .then_some(Kind::Reduce { op: *op })
        }
        Prim::Softmax => match &slots[args[0]] {
            Slot::Column(c) => {
                (c.shape.len() == 1 && c.row_len == out_len && c.data.ty().is_float())
                    .then_some(Kind::Softmax)
            }
            Slot::Invariant(_) => None,
        },
        Prim::Index | Prim::IndexSet => {
            let shape = match &slots[args[0]] {
                Slot::Column(c) => &c.shape,
                Slot::Invariant(Some(t)) => &t.shape,
                Slot::Invariant(None) => return None,
            };
            let (&length, item_shape) = shape.split_first()?;
            let item: usize = item_shape.iter().product();
            let index_ok = match &slots[args[1]] {
                Slot::Column(c) => c.row_len == 1,
                Slot::Invariant(Some(t)) => t.is_scalar(),
                Slot::Invariant(None) => false,
            };
            let integer = match &slots[args[1]] {
                Slot::Column(c) => c.data.ty().is_integer(),
                Slot::Invariant(Some(t)) => t.elem_type().is_integer(),
                Slot::Invariant(None) => false,
            };
            match prim {
                Prim::Index => {
                    (index_ok && integer && item == out_len).then_some(Kind::Index { length, item })
                }
                _ => {
                    let value_ok = match &slots[args[2]] {
                        Slot::Column(c) => c.row_len == item,
                        Slot::Invariant(Some(t)) => t.len() == item,
                        Slot::Invariant(None) => false,
                    };
                    (index_ok && integer && value_ok && length * item == out_len)
                        .then_some(Kind::IndexSet { length, item })
                }
            }
        }
        Prim::Fill(dim) => {
            let item = column_len(0)?;
            let count = kernels::dim_length(env.symbols, *dim);
            (item.checked_mul(count) == Some(out_len)).then_some(Kind::Fill { count })
        }
        Prim::Transpose => match slot_shape(&slots[args[0]])? {
            [m, k] if m * k == out_len && matches!(slots[args[0]], Slot::Column(_)) => {
                Some(Kind::Transpose { m: *m, k: *k })
            }
            _ => None,
        },
        Prim::Outer => {
            let (a, b) = (&slots[args[0]], &slots[args[1]]);
            let float = |slot: &Slot| match slot {
                Slot::Column(c) => c.data.ty().is_float(),
                Slot::Invariant(Some(t)) => t.elem_type().is_float(),
                Slot::Invariant(None) => false,
            };
            match (slot_shape(a)?, slot_shape(b)?) {
                ([m], [k]) if float(a) && float(b) && m * k == out_len => {
                    Some(Kind::Outer { m: *m, k: *k })
                }
                _ => None,
            }
        }
        Prim::Stack => {
            let item = out_len.checked_div(args.len())?;
            let fits = args.iter().all(|a| match &slots[*a] {
                Slot::Column(c) => c.row_len == item,
                Slot::Invariant(Some(t)) => t.len() == item,
                Slot::Invariant(None) => false,
            });
            (fits && item * args.len() == out_len).then_some(Kind::Stack { item })
        }
        Prim::Dot | Prim::Matvec | Prim::Vecmat | Prim::Matmul => {
            let (a, b) = (&slots[args[0]], &slots[args[1]]);
            let float = |slot: &Slot| match slot {
                Slot::Column(c) => c.data.ty().is_float(),
                Slot::Invariant(Some(t)) => t.elem_type().is_float(),
                Slot::Invariant(None) => false,
            };
            if !float(a) || !float(b) {
                return None;
            }
            let (sa, sb) = (slot_shape(a)?, slot_shape(b)?);
            let (m, k, p) = match (prim, sa, sb) {
                (Prim::Dot, [k], [k2]) if k == k2 => (1, *k, 1),
                (Prim::Matvec, [m, k], [k2]) if k == k2 => (*m, *k, 1),
                (Prim::Vecmat, [k], [k2, p]) if k == k2 => (1, *k, *p),
                (Prim::Matmul, [m, k], [k2, p]) if k == k2 => (*m, *k, *p),
                _ => return None,
            };
            let shared = [
                matches!(a, Slot::Invariant(_)),
                matches!(b, Slot::Invariant(_)),
            ];
            (m * p == out_len).then_some(Kind::Product {
                prim,
                m,
                k,
                p,
                shared,
            })
        }
        _ => None,
    }
}

/// The shape of a slot's value (of one row, for a column).
fn slot_shape(slot: &Slot) -> Option<&[usize]> {
    match slot {
        Slot::Column(c) => Some(&c.shape),
        Slot::Invariant(Some(t)) => Some(&t.shape),
        Slot::Invariant(None) => None,
    }
}

impl Kind<'_> {
    /// A rough cost of one result element, in elements of memory traffic.
    fn cost_per_element(&self) -> usize {
        match self {
            Kind::Elementwise { .. }
            | Kind::Index { .. }
            | Kind::IndexSet { .. }
            | Kind::Fill { .. }
            | Kind::Transpose { .. }
            | Kind::Outer { .. }
            | Kind::Stack { .. } => 1,
            Kind::Reduce { .. } | Kind::Softmax => 64,
            Kind::Product { k, .. } => (*k).max(1),
        }
    }

    /// Computes rows `range` into `out` (`out_len` elements per row).
    fn run(
        &self,
        srcs: &[Option<Src<'_>>],
        range: Range<usize>,
        out_len: usize,
        mut out: ValuesMut<'_>,
    ) -> Result<(), Fault> {
        let src = |k: usize| srcs[k].expect("every operand has a source");
        match self {
            Kind::Elementwise { prim, per_row } => {
                if !per_row {
                    let mut operands = [None; MAX_ARGS];
                    for (k, s) in srcs.iter().enumerate() {
                        let s = s.expect("every operand has a source");
                        operands[k] = Some(match s {
                            Src::Col { .. } => DataOperand::array(s.rows(range.clone())),
                            Src::Inv(t) => DataOperand::scalar(Values::all(&t.data)),
                        });
                    }
                    return apply_elementwise(prim, &operands, out);
                }
                for (k, r) in range.clone().enumerate() {
                    let mut operands = [None; MAX_ARGS];
                    for (j, s) in srcs.iter().enumerate() {
                        let s = s.expect("every operand has a source");
                        operands[j] = Some(match s {
                            Src::Col { row_len, .. } => DataOperand {
                                values: s.rows(r..r + 1),
                                broadcast: row_len != out_len,
                            },
                            Src::Inv(t) => DataOperand {
                                values: Values::all(&t.data),
                                broadcast: t.is_scalar()
                                    && !(matches!(prim, Prim::Select) && j > 0),
                            },
                        });
                    }
                    apply_elementwise(prim, &operands, out.slice(k * out_len..(k + 1) * out_len))?;
                }
                Ok(())
            }
            Kind::Reduce { op } => {
                let x = src(0);
                let Src::Col { row_len, .. } = x else {
                    unreachable!("planned with a column")
                };
                reduce_rows(*op, x.rows(range), row_len, out);
                Ok(())
            }
            Kind::Softmax => {
                match (src(0).rows(range), out) {
                    (Values::F32(x), ValuesMut::F32(out)) => {
                        reduce::softmax_rows_into(x, out_len, out)
                    }
                    (Values::F64(x), ValuesMut::F64(out)) => {
                        reduce::softmax_rows_into(x, out_len, out)
                    }
                    _ => panic!("internal error: softmax of non-floats"),
                }
                Ok(())
            }
            Kind::Index { length, item } => {
                let (array, index) = (src(0), src(1));
                for (k, r) in range.enumerate() {
                    let position = match index {
                        Src::Col { data, .. } => integer_at(data, r),
                        Src::Inv(t) => integer_at(&t.data, 0),
                    };
                    if position < 0 || position >= *length as i128 {
                        return Err(Fault::index_out_of_bounds(position, *length));
                    }
                    let p = position as usize;
                    let values = match array {
                        Src::Col { .. } => array.rows(r..r + 1),
                        Src::Inv(t) => Values::all(&t.data),
                    };
                    copy_values(
                        values.slice(p * item..(p + 1) * item),
                        out.slice(k * out_len..(k + 1) * out_len),
                    );
                }
                Ok(())
            }
            Kind::Product {
                prim,
                m,
                k,
                p,
                shared,
            } => {
                let (a, b) = (src(0).rows(range.clone()), src(1).rows(range.clone()));
                let n = range.len();
                match (a, b, out) {
                    (Values::F32(a), Values::F32(b), ValuesMut::F32(out)) => {
                        product(prim, (*m, *k, *p), *shared, a, b, n, out)
                    }
                    (Values::F64(a), Values::F64(b), ValuesMut::F64(out)) => {
                        product(prim, (*m, *k, *p), *shared, a, b, n, out)
                    }
                    _ => panic!("internal error: a product of operands of different types"),
                }
                Ok(())
            }
            Kind::IndexSet { length, item } => {
                let (array, index, value) = (src(0), src(1), src(2));
                for (k, r) in range.enumerate() {
                    let position = match index {
                        Src::Col { data, .. } => integer_at(data, r),
                        Src::Inv(t) => integer_at(&t.data, 0),
                    };
                    if position < 0 || position >= *length as i128 {
                        return Err(Fault::index_out_of_bounds(position, *length));
                    }
                    let p = position as usize;
                    let base = k * out_len;
                    let whole = match array {
                        Src::Col { .. } => array.rows(r..r + 1),
                        Src::Inv(t) => Values::all(&t.data),
                    };
                    copy_values(whole, out.slice(base..base + out_len));
                    let item_values = match value {
                        Src::Col { .. } => value.rows(r..r + 1),
                        Src::Inv(t) => Values::all(&t.data),
                    };
                    copy_values(
                        item_values,
                        out.slice(base + p * item..base + (p + 1) * item),
                    );
                }
                Ok(())
            }
            Kind::Transpose { m, k } => {
                fn each<T: Copy>(x: &[T], m: usize, k: usize, out: &mut [T]) {
                    for (x, out) in x.chunks_exact(m * k).zip(out.chunks_exact_mut(m * k)) {
                        for i in 0..m {
                            for j in 0..k {
                                out[j * m + i] = x[i * k + j];
                            }
                        }
                    }
                }
                let (m, k) = (*m, *k);
                if m * k == 0 {
                    return Ok(());
                }
                match (src(0).rows(range), out) {
                    (Values::Bool(x), ValuesMut::Bool(o)) => each(x, m, k, o),
                    (Values::I32(x), ValuesMut::I32(o)) => each(x, m, k, o),
                    (Values::I64(x), ValuesMut::I64(o)) => each(x, m, k, o),
                    (Values::Usize(x), ValuesMut::Usize(o)) => each(x, m, k, o),
                    (Values::F32(x), ValuesMut::F32(o)) => each(x, m, k, o),
                    (Values::F64(x), ValuesMut::F64(o)) => each(x, m, k, o),
                    (x, _) => panic!("internal error: transposing {} across types", x.ty()),
                }
                Ok(())
            }
            Kind::Outer { m, k } => {
                let (a, b) = (src(0), src(1));
                for (row, r) in range.enumerate() {
                    let x = match a {
                        Src::Col { .. } => a.rows(r..r + 1),
                        Src::Inv(t) => Values::all(&t.data),
                    };
                    let y = match b {
                        Src::Col { .. } => b.rows(r..r + 1),
                        Src::Inv(t) => Values::all(&t.data),
                    };
                    let o = out.slice(row * m * k..(row + 1) * m * k);
                    match (x, y, o) {
                        (Values::F32(x), Values::F32(y), ValuesMut::F32(o)) => {
                            gemm::outer_into(x, y, o)
                        }
                        (Values::F64(x), Values::F64(y), ValuesMut::F64(o)) => {
                            gemm::outer_into(x, y, o)
                        }
                        _ => panic!("internal error: an outer product across types"),
                    }
                }
                Ok(())
            }
            Kind::Stack { item } => {
                let item = *item;
                for (row, r) in range.enumerate() {
                    for (j, s) in srcs.iter().enumerate() {
                        let s = s.expect("every operand has a source");
                        let values = match s {
                            Src::Col { .. } => s.rows(r..r + 1),
                            Src::Inv(t) => Values::all(&t.data),
                        };
                        let at = row * out_len + j * item;
                        copy_values(values, out.slice(at..at + item));
                    }
                }
                Ok(())
            }
            Kind::Fill { count } => {
                let x = src(0);
                let Src::Col { row_len: item, .. } = x else {
                    unreachable!("planned with a column")
                };
                if item == 1 {
                    fill_scalars(x.rows(range), *count, out);
                    return Ok(());
                }
                for (k, r) in range.enumerate() {
                    let values = x.rows(r..r + 1);
                    for c in 0..*count {
                        let at = k * out_len + c * item;
                        copy_values(values, out.slice(at..at + item));
                    }
                }
                Ok(())
            }
        }
    }
}

/// `n` rows of a product: `a` and `b` hold `n` rows each, or one shared
/// value; `out` has `n` rows of `m * p` elements. Every kernel called gives
/// each output element the bits `linalg` (the reference) gives it.
fn product<T: gemm::GemmFloat>(
    prim: &Prim,
    (m, k, p): (usize, usize, usize),
    shared: [bool; 2],
    a: &[T],
    b: &[T],
    n: usize,
    out: &mut [T],
) {
    match (prim, shared) {
        // dot(a, b) == dot(b, a) bit for bit: the products commute.
        (Prim::Dot, [false, false]) => gemm::dot_rows_into(a, b, k, n, out),
        (Prim::Dot, [true, false]) => gemm::matvec_into(a, 1, k, b, n, out),
        (Prim::Dot, [false, true]) => gemm::matvec_into(b, 1, k, a, n, out),
        (Prim::Matvec, [true, false]) => gemm::matvec_into(a, m, k, b, n, out),
        (Prim::Matvec, [false, false]) => gemm::matvec_batched_into(a, m, k, b, n, out),
        (Prim::Matvec, [false, true]) => {
            for r in 0..n {
                gemm::matvec_into(
                    &a[r * m * k..(r + 1) * m * k],
                    m,
                    k,
                    b,
                    1,
                    &mut out[r * m..(r + 1) * m],
                );
            }
        }
        (Prim::Vecmat, [false, true]) => gemm::vecmat_into(a, b, n, k, p, out),
        (Prim::Vecmat, [false, false]) => gemm::vecmat_batched_into(a, b, n, k, p, out),
        (Prim::Vecmat, [true, false]) => {
            for r in 0..n {
                gemm::vecmat_into(
                    a,
                    &b[r * k * p..(r + 1) * k * p],
                    1,
                    k,
                    p,
                    &mut out[r * p..(r + 1) * p],
                );
            }
        }
        (Prim::Matmul, [true, false]) => gemm::matmul_shared_a_into(a, b, n, m, k, p, out),
        (Prim::Matmul, [false, true]) => gemm::matmul_shared_b_into(a, b, n, m, k, p, out),
        (Prim::Matmul, [false, false]) => gemm::matmul_batched_into(a, b, n, m, k, p, out),
        _ => panic!(
            "internal error: {} with operands shared {shared:?}",
            prim.name()
        ),
    }
}

/// Applies an elementwise primitive to operands already cut to one run of
/// results.
fn apply_elementwise(
    prim: &Prim,
    operands: &[Option<DataOperand<'_>>; MAX_ARGS],
    out: ValuesMut<'_>,
) -> Result<(), Fault> {
    let operand = |k: usize| operands[k].expect("elementwise operand");
    match prim {
        Prim::Unary(op) => ew::unary_into(*op, operand(0).values, out),
        Prim::Binary(op) => return ew::binary_into(*op, operand(0), operand(1), out),
        Prim::Compare(op) => {
            let ValuesMut::Bool(out) = out else {
                panic!("internal error: a comparison into a non-bool buffer")
            };
            ew::compare_into(*op, operand(0), operand(1), out);
        }
        Prim::Cast(_) => ew::cast_into(operand(0).values, out),
        Prim::Select => {
            let cond = operand(0);
            let Values::Bool(values) = cond.values else {
                panic!("internal error: select on a non-bool condition")
            };
            ew::select_into(
                Operand {
                    values,
                    broadcast: cond.broadcast,
                },
                operand(1).values,
                operand(2).values,
                out,
            );
        }
        other => panic!("internal error: {} is not elementwise", other.name()),
    }
    Ok(())
}

/// The element type of an elementwise primitive's result.
fn elementwise_result_type(
    prim: &Prim,
    first: ScalarType,
    second: impl FnOnce() -> ScalarType,
) -> ScalarType {
    match prim {
        Prim::Unary(op) => ew::unary_result_type(*op, first),
        Prim::Binary(_) => first,
        Prim::Compare(_) => ScalarType::Bool,
        Prim::Cast(to) => *to,
        Prim::Select => second(),
        other => panic!("internal error: {} is not elementwise", other.name()),
    }
}

/// Each row's reduction (`row_len` elements) into `out`, one per row.
fn reduce_rows(op: ReduceOp, x: Values<'_>, row_len: usize, out: ValuesMut<'_>) {
    fn each<T: Copy, R>(x: &[T], row_len: usize, out: &mut [R], f: impl Fn(&[T]) -> R) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = f(&x[k * row_len..(k + 1) * row_len]);
        }
    }
    fn position<T: MaybeNan>(op: ReduceOp, x: &[T], row_len: usize, out: &mut [u64]) {
        if op == ReduceOp::Argmax {
            each(x, row_len, out, |row| reduce::argmax(row) as u64)
        } else {
            each(x, row_len, out, |row| reduce::argmin(row) as u64)
        }
    }
    fn float<F: Float>(op: ReduceOp, x: &[F], row_len: usize, out: &mut [F]) {
        each(x, row_len, out, |row| reduce::float_reduce(op, row))
    }
    fn integer<T: Integer>(op: ReduceOp, x: &[T], row_len: usize, out: &mut [T]) {
        each(x, row_len, out, |row| reduce::integer_reduce(op, row))
    }
    if matches!(op, ReduceOp::Argmax | ReduceOp::Argmin) {
        let ValuesMut::Usize(out) = out else {
            panic!("internal error: an arg-reduction into a non-usize buffer")
        };
        match x {
            Values::Bool(v) => position(op, v, row_len, out),
            Values::I32(v) => position(op, v, row_len, out),
            Values::I64(v) => position(op, v, row_len, out),
            Values::Usize(v) => position(op, v, row_len, out),
            Values::F32(v) => position(op, v, row_len, out),
            Values::F64(v) => position(op, v, row_len, out),
        }
        return;
    }
    match (x, out) {
        (Values::F32(v), ValuesMut::F32(o)) => float(op, v, row_len, o),
        (Values::F64(v), ValuesMut::F64(o)) => float(op, v, row_len, o),
        (Values::I32(v), ValuesMut::I32(o)) => integer(op, v, row_len, o),
        (Values::I64(v), ValuesMut::I64(o)) => integer(op, v, row_len, o),
        (Values::Usize(v), ValuesMut::Usize(o)) => integer(op, v, row_len, o),
        (x, _) => panic!("internal error: {op:?} of {}", x.ty()),
    }
}

/// `x = index_set(x, i, v)` on a column `x`: writes each active row's item
/// where it belongs, leaving the rest of the row alone, so that filling an
/// array element by element costs the elements written, not the array's
/// length each time. False, having written nothing, when the operands do
/// not fit this path (the destination is not the array operand, or not a
/// column) or some row's index is out of bounds (the general paths then
/// report exactly which rows fault).
fn index_set_in_place(exec: &PrimExecution<'_>, slots: &mut [Slot]) -> bool {
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
    let row_len = column.row_len;
    let ty = column.data.ty();
    let value_fits = match &slots[*value] {
        Slot::Column(c) => c.row_len == item && c.data.ty() == ty,
        Slot::Invariant(Some(t)) => t.data.len() == item && t.data.ty() == ty,
        Slot::Invariant(None) => false,
    };
    let position = |r: u32| -> Option<usize> {
        let p = match &slots[*index] {
            Slot::Column(c) => integer_at(&c.data, r as usize),
            Slot::Invariant(Some(t)) => integer_at(&t.data, 0),
            Slot::Invariant(None) => return None,
        };
        (p >= 0 && p < length as i128).then_some(p as usize)
    };
    if !value_fits || exec.rows.iter().any(|&r| position(r).is_none()) {
        return false;
    }
    let Slot::Column(mut target) = std::mem::replace(&mut slots[dst], Slot::Invariant(None)) else {
        unreachable!("checked above")
    };
    {
        let mut out = ValuesMut::all(&mut target.data);
        for &r in exec.rows {
            let p = match &slots[*index] {
                Slot::Column(c) => integer_at(&c.data, r as usize),
                Slot::Invariant(t) => integer_at(&t.as_ref().expect("checked above").data, 0),
            } as usize;
            let r = r as usize;
            let values = match &slots[*value] {
                Slot::Column(c) => Values::all(&c.data).slice(r * item..(r + 1) * item),
                Slot::Invariant(t) => Values::all(&t.as_ref().expect("checked above").data),
            };
            let start = r * row_len + p * item;
            copy_values(values, out.slice(start..start + item));
        }
    }
    slots[dst] = Slot::Column(target);
    true
}

/// Element `i` of an integer buffer, exactly.
fn integer_at(data: &Data, i: usize) -> i128 {
    match data {
        Data::I32(v) => v[i] as i128,
        Data::I64(v) => v[i] as i128,
        Data::Usize(v) => v[i] as i128,
        other => panic!("internal error: an index of type {}", other.ty()),
    }
}

/// Row `k` of `out` (`count` elements) = `count` copies of `values[k]`.
fn fill_scalars(values: Values<'_>, count: usize, out: ValuesMut<'_>) {
    fn fill<T: Copy>(values: &[T], count: usize, out: &mut [T]) {
        for (row, &v) in out.chunks_exact_mut(count.max(1)).zip(values) {
            row.fill(v);
        }
    }
    if count == 0 {
        return;
    }
    match (values, out) {
        (Values::Bool(v), ValuesMut::Bool(o)) => fill(v, count, o),
        (Values::I32(v), ValuesMut::I32(o)) => fill(v, count, o),
        (Values::I64(v), ValuesMut::I64(o)) => fill(v, count, o),
        (Values::Usize(v), ValuesMut::Usize(o)) => fill(v, count, o),
        (Values::F32(v), ValuesMut::F32(o)) => fill(v, count, o),
        (Values::F64(v), ValuesMut::F64(o)) => fill(v, count, o),
        (v, _) => panic!(
            "internal error: filling with {} elements across types",
            v.ty()
        ),
    }
}

/// `out = values` (same type and length).
fn copy_values(values: Values<'_>, out: ValuesMut<'_>) {
    match (values, out) {
        (Values::Bool(v), ValuesMut::Bool(o)) => o.copy_from_slice(v),
        (Values::I32(v), ValuesMut::I32(o)) => o.copy_from_slice(v),
        (Values::I64(v), ValuesMut::I64(o)) => o.copy_from_slice(v),
        (Values::Usize(v), ValuesMut::Usize(o)) => o.copy_from_slice(v),
        (Values::F32(v), ValuesMut::F32(o)) => o.copy_from_slice(v),
        (Values::F64(v), ValuesMut::F64(o)) => o.copy_from_slice(v),
        (v, _) => panic!("internal error: copying {} elements across types", v.ty()),
    }
}

fn capacity(data: &Data) -> usize {
    match data {
        Data::Bool(v) => v.capacity(),
        Data::I32(v) => v.capacity(),
        Data::I64(v) => v.capacity(),
        Data::Usize(v) => v.capacity(),
        Data::F32(v) => v.capacity(),
        Data::F64(v) => v.capacity(),
    }
}

/// The value of an invariant slot.
fn invariant(slot: &Slot) -> &Tensor {
    match slot {
        Slot::Invariant(Some(t)) => t,
        Slot::Invariant(None) => panic!("internal error: reading an unassigned invariant variable"),
        Slot::Column(_) => panic!("internal error: a per-member operand of an invariant operation"),
    }
}

/// Writes `value` to an invariant slot (reusing its buffer) or to the
/// active rows of a column.
fn assign(slot: &mut Slot, value: &Tensor, rows: &[u32]) {
    match slot {
        Slot::Invariant(Some(t)) => {
            if t.shape != value.shape {
                t.shape.clear();
                t.shape.extend_from_slice(&value.shape);
            }
            ensure_len(&mut t.data, value.elem_type(), value.len());
            copy_into(&mut t.data, 0, &value.data, 0..value.len());
        }
        Slot::Invariant(v) => *v = Some(value.clone()),
        Slot::Column(c) => fill_rows_from(&mut c.data, &value.data, rows),
    }
}

/// Writes the row `value` into each row of `rows` of `column`.
fn fill_rows_from(column: &mut Data, value: &Data, rows: &[u32]) {
    fn fill<T: Copy>(column: &mut [T], value: &[T], rows: &[u32]) {
        let n = value.len();
        if n == 1 {
            for r in rows {
                column[*r as usize] = value[0];
            }
        } else {
            for r in rows {
                let r = *r as usize;
                column[r * n..(r + 1) * n].copy_from_slice(value);
            }
        }
    }
    match (column, value) {
        (Data::Bool(c), Data::Bool(v)) => fill(c, v, rows),
        (Data::I32(c), Data::I32(v)) => fill(c, v, rows),
        (Data::I64(c), Data::I64(v)) => fill(c, v, rows),
        (Data::Usize(c), Data::Usize(v)) => fill(c, v, rows),
        (Data::F32(c), Data::F32(v)) => fill(c, v, rows),
        (Data::F64(c), Data::F64(v)) => fill(c, v, rows),
        (c, v) => panic!(
            "internal error: writing {} values into a {} column",
            v.ty(),
            c.ty()
        ),
    }
}

/// Writes the scalar `value` into each row of `rows` of a one-element-per-row column.
fn fill_scalar_rows(column: &mut Data, value: Scalar, rows: &[u32]) {
    for r in rows {
        set_scalar(column, *r as usize, value);
    }
}

fn set_scalar(data: &mut Data, i: usize, value: Scalar) {
    match (data, value) {
        (Data::Bool(d), Scalar::Bool(x)) => d[i] = x,
        (Data::I32(d), Scalar::I32(x)) => d[i] = x,
        (Data::I64(d), Scalar::I64(x)) => d[i] = x,
        (Data::Usize(d), Scalar::Usize(x)) => d[i] = x,
        (Data::F32(d), Scalar::F32(x)) => d[i] = x,
        (Data::F64(d), Scalar::F64(x)) => d[i] = x,
        (d, s) => panic!("internal error: writing {s:?} into a {} buffer", d.ty()),
    }
}

fn copy_rows(exec: &PrimExecution<'_>, slots: &mut [Slot]) {
    let (src, dst) = (exec.args[0], exec.dst.expect("copy has a result"));
    if src == dst {
        return;
    }
    let (src_slot, dst_slot) = two_slots(slots, src, dst);
    match (src_slot, dst_slot) {
        (Slot::Column(s), Slot::Column(d)) => {
            if exec.rows.len() == exec.total_rows {
                copy_into(&mut d.data, 0, &s.data, 0..s.data.len());
            } else {
                storage::copy_rows(&mut d.data, &s.data, exec.rows, d.row_len);
            }
        }
        (Slot::Invariant(Some(v)), d) => assign(d, v, exec.rows),
        (Slot::Invariant(None), Slot::Invariant(d)) => *d = None,
        (Slot::Column(_), Slot::Invariant(_)) | (Slot::Invariant(None), _) => {
            panic!("internal error: copy between incompatible slots")
        }
    }
}

/// Borrows two distinct slots, the first shared and the second mutable.
fn two_slots(slots: &mut [Slot], a: usize, b: usize) -> (&Slot, &mut Slot) {
    assert_ne!(a, b);
    if a < b {
        let (lo, hi) = slots.split_at_mut(b);
        (&lo[a], &mut hi[0])
    } else {
        let (lo, hi) = slots.split_at_mut(a);
        (&hi[0], &mut lo[b])
    }
}

fn is_elementwise(prim: &Prim) -> bool {
    matches!(
        prim,
        Prim::Unary(_) | Prim::Binary(_) | Prim::Compare(_) | Prim::Cast(_) | Prim::Select
    )
}

/// The general path: each active row alone, through the reference kernels.
fn run_row_by_row(
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    env: &SharedEnv<'_>,
    rngs: &mut [MemberRng],
    member_of: &dyn Fn(u32) -> usize,
    faults: &mut Vec<(u32, Fault)>,
) {
    for &row in exec.rows {
        let outcome = {
            let owned: Vec<Option<Tensor>> = exec
                .args
                .iter()
                .map(|a| match &slots[*a] {
                    Slot::Column(c) => Some(c.row(row as usize)),
                    Slot::Invariant(_) => None,
                })
                .collect();
            let refs: Vec<&Tensor> = exec
                .args
                .iter()
                .zip(&owned)
                .map(|(a, o)| match o {
                    Some(t) => t,
                    None => invariant(&slots[*a]),
                })
                .collect();
            let mut ctx = PrimContext {
                statics: env.statics,
                symbols: env.symbols,
                rng: &mut rngs[member_of(row)],
            };
            kernels::eval(exec.prim, &refs, &mut ctx)
        };
        match outcome {
            Err(fault) => faults.push((row, fault)),
            Ok(None) => {}
            Ok(Some(value)) => {
                let Some(dst) = exec.dst else { continue };
                match &mut slots[dst] {
                    Slot::Column(c) => c.set_row(row as usize, &value),
                    // Only a random primitive with invariant operands can get
                    // here with an invariant result, and the uniformity
                    // analysis never makes a random result invariant.
                    Slot::Invariant(_) => {
                        panic!("internal error: per-member value into an invariant variable")
                    }
                }
            }
        }
    }
}
