//! Step temporaries: variables whose whole life is inside one execution of
//! a block (defined and last read in the same block, not live into any
//! block, not read by the block's terminator, not passed to a call or a
//! fork) get no column with a row per lane or member. Each has storage
//! only while a step of its block runs, taken from the engine's spare
//! buffers when the step first writes it and given back after its last
//! read, so that the storage temporaries hold at once is bounded by the
//! temporaries live at once in one block, for the rows of one step.
//!
//! The layout of a step's temporaries follows the step's lanes mode
//! ([`LaneMode::dense`], decided once when the step starts):
//!
//! - a **dense** step (every row active, or `mask`, or `auto` with at least
//!   half of the rows active) keeps them dense over all the rows of the
//!   columns (row `r` of a temporary is lane or row `r`, as in a column), so
//!   an operation over them is the masked operation it was, with no gather;
//!   only their storage is the step's instead of the run's;
//! - a **compact** step keeps them compact: row `k` of a temporary is the
//!   step's `k`-th active row. An operation that reads or writes one runs
//!   over positions `0..n` (one buffer per operand, no holes): the
//!   per-lane columns it reads are gathered, a per-lane result is scattered
//!   back, and a temporary passes from the operation that computes it to
//!   the one that reads it with no scatter and no gather. When rows leave the step (a fault, a cancellation), the live
//!   temporaries drop their rows, so positions stay those of the active
//!   rows.
//!
//! Every element is still computed by the backend's batched forms from the
//! same values, so a member's bits do not depend on the layout; a fault is
//! found exactly as before (the engine's row-by-row fallback runs over the
//! positions, and its faults are mapped back to rows).
//!
//! A temporary read by an indexed assignment into a per-lane array
//! (`a[i] = t`, which writes the item in place) stays a column: in a
//! compact step the array would be gathered and scattered whole, at every
//! item.

use autobatch_ir::Prim;
use autobatch_kernels::buffer::{Values, ValuesMut};
use autobatch_kernels::{Fault, MemberRng};
use autobatch_types::Data;

use super::engine::{Engine, LaneMode, PrimExecution, SharedEnv};
use super::storage::{Column, Slot};
use crate::internal::internal_error;

/// Where the temporaries of the running step keep their rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// A row per row of the columns (`total` of them), at the lane's row.
    Dense(usize),
    /// A row per active row of the step, in order.
    Compact,
}

/// The storage of one step's temporaries, reused from step to step. The
/// slots of temporaries hold an empty column (of their type and shape)
/// outside a step.
pub struct StepTemps {
    layout: Layout,
    /// Under [`Layout::Compact`]: the active rows the positions refer to.
    rows: Vec<u32>,
    /// The slots holding a buffer now.
    held: Vec<usize>,
    /// The bytes they hold, and the most they held in this step.
    bytes: u64,
    peak: u64,
    /// Reused: `0..n`, the positions of `n` active rows.
    positions: Vec<u32>,
    /// Reused: the positions kept when rows leave.
    kept: Vec<u32>,
    /// Reused: the per-lane slots lent out during an operation on positions.
    lent: Vec<(usize, Slot)>,
}

impl Default for StepTemps {
    fn default() -> StepTemps {
        StepTemps {
            layout: Layout::Compact,
            rows: Vec::new(),
            held: Vec::new(),
            bytes: 0,
            peak: 0,
            positions: Vec::new(),
            kept: Vec::new(),
            lent: Vec::new(),
        }
    }
}

impl StepTemps {
    /// The bytes the temporaries hold now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The most bytes the temporaries held at once since the step began.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Whether the running step keeps its temporaries dense (a row per row
    /// of the columns).
    pub fn dense(&self) -> bool {
        matches!(self.layout, Layout::Dense(_))
    }

    /// A step starts for the active `rows` (sorted) of columns of `total`
    /// rows: its layout is decided.
    pub fn begin(&mut self, rows: &[u32], total: usize, mode: LaneMode) {
        self.layout = if mode.dense(rows.len(), total) {
            Layout::Dense(total)
        } else {
            Layout::Compact
        };
        self.rows.clear();
        self.rows.extend_from_slice(rows);
        self.peak = self.bytes;
    }

    /// Before an operation writes `dst`: a temporary gets its buffer, if it
    /// has none yet in this step (contents unspecified: the operation
    /// writes every active row).
    pub fn prepare(
        &mut self,
        engine: &mut Engine<'_>,
        slots: &mut [Slot],
        is_temp: &[bool],
        dst: Option<usize>,
    ) {
        let Some(d) = dst else { return };
        if !is_temp[d] || self.held.contains(&d) {
            return;
        }
        let rows = match self.layout {
            Layout::Dense(total) => total,
            Layout::Compact => self.rows.len(),
        };
        let Slot::Column(column) = &mut slots[d] else {
            internal_error("a step temporary that is not a column");
        };
        column.data = engine.take(column.data.ty(), rows * column.row_len);
        self.bytes += column.bytes();
        self.peak = self.peak.max(self.bytes);
        self.held.push(d);
    }

    /// A dense step's temporary `d` takes `data` (every row of it computed)
    /// as its storage; a buffer it held goes back to the engine.
    pub fn adopt(&mut self, engine: &mut Engine<'_>, slots: &mut [Slot], d: usize, data: Data) {
        let Slot::Column(column) = &mut slots[d] else {
            internal_error("a step temporary that is not a column");
        };
        let old = std::mem::replace(&mut column.data, data);
        if self.held.contains(&d) {
            self.bytes -= (old.len() * crate::memory::element_bytes(old.ty())) as u64;
        } else {
            self.held.push(d);
        }
        self.bytes += column.bytes();
        self.peak = self.peak.max(self.bytes);
        engine.give(old);
    }

    /// Runs a primitive for `exec.rows`: on positions if the step is
    /// compact and the operation reads or writes a temporary, else as
    /// usual. Faults are reported by row, as [`Engine::run_prim`] does.
    #[allow(clippy::too_many_arguments)]
    pub fn run_prim(
        &mut self,
        engine: &mut Engine<'_>,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        is_temp: &[bool],
        env: &SharedEnv<'_>,
        rngs: &mut [MemberRng],
        member_of: &dyn Fn(u32) -> usize,
        faults: &mut Vec<(u32, Fault)>,
    ) {
        let touches = exec.dst.is_some_and(|d| is_temp[d]) || exec.args.iter().any(|a| is_temp[*a]);
        if self.layout != Layout::Compact || !touches || exec.rows.is_empty() {
            return engine.run_prim(exec, slots, env, rngs, member_of, faults);
        }
        if exec.rows.len() != self.rows.len() {
            internal_error("a compact step's rows changed without its temporaries");
        }
        if self.copy(engine, exec, slots, is_temp) {
            return;
        }
        let n = exec.rows.len();
        while self.positions.len() < n {
            self.positions.push(self.positions.len() as u32);
        }
        let mut lent = std::mem::take(&mut self.lent);
        lend_gathered(engine, exec, slots, is_temp, &mut lent);
        let inner = PrimExecution {
            rows: &self.positions[..n],
            total_rows: n,
            ..*exec
        };
        let rows = exec.rows;
        let by_position = |p: u32| member_of(rows[p as usize]);
        let first_fault = faults.len();
        engine.run_prim(&inner, slots, env, rngs, &by_position, faults);
        for (r, _) in &mut faults[first_fault..] {
            *r = rows[*r as usize];
        }
        scatter_result(engine, exec, slots, &mut lent, &faults[first_fault..]);
        for (a, original) in lent.drain(..) {
            if let Slot::Column(mut gathered) = std::mem::replace(&mut slots[a], original) {
                if let Slot::Column(original) = &mut slots[a] {
                    original.shape = std::mem::take(&mut gathered.shape);
                }
                engine.give(gathered.data);
            }
        }
        self.lent = lent;
    }

    /// `dst = copy src` on positions, between a temporary and a column or
    /// two temporaries: one move. False if it is not such a copy.
    fn copy(
        &self,
        engine: &Engine<'_>,
        exec: &PrimExecution<'_>,
        slots: &mut [Slot],
        is_temp: &[bool],
    ) -> bool {
        let (Prim::Copy, Some(dst), &[src]) = (exec.prim, exec.dst, exec.args) else {
            return false;
        };
        if src == dst {
            return false;
        }
        let (from, to) = if src < dst {
            let (lo, hi) = slots.split_at_mut(dst);
            (&lo[src], &mut hi[0])
        } else {
            let (lo, hi) = slots.split_at_mut(src);
            (&hi[0], &mut lo[dst])
        };
        let (Slot::Column(from), Slot::Column(to)) = (from, to) else {
            return false;
        };
        let backend = engine.backend();
        let (values, out) = (Values::all(&from.data), ValuesMut::all(&mut to.data));
        match (is_temp[src], is_temp[dst]) {
            (true, true) => backend.copy(values, out),
            (true, false) => backend.scatter_rows(values, to.row_len, exec.rows, out),
            (false, true) => backend.gather_rows(values, from.row_len, exec.rows, out),
            (false, false) => return false,
        }
        true
    }

    /// After an operation: if rows left a compact step, the live
    /// temporaries drop theirs; then the temporaries `dying` (last read by
    /// the operation) give their buffers back.
    pub fn after_op(
        &mut self,
        engine: &mut Engine<'_>,
        slots: &mut [Slot],
        rows: &[u32],
        dying: &[usize],
    ) {
        if self.layout == Layout::Compact && rows.len() != self.rows.len() {
            self.compact(engine, slots, rows);
        }
        for &d in dying {
            if let Some(k) = self.held.iter().position(|h| *h == d) {
                self.held.swap_remove(k);
                self.release(engine, slots, d);
            }
        }
    }

    /// The step ends: every temporary still holding a buffer gives it back.
    pub fn end(&mut self, engine: &mut Engine<'_>, slots: &mut [Slot]) {
        while let Some(d) = self.held.pop() {
            self.release(engine, slots, d);
        }
    }

    fn release(&mut self, engine: &mut Engine<'_>, slots: &mut [Slot], d: usize) {
        let Slot::Column(column) = &mut slots[d] else {
            internal_error("a step temporary that is not a column");
        };
        self.bytes -= column.bytes();
        let ty = column.data.ty();
        engine.give(std::mem::replace(
            &mut column.data,
            Data::with_capacity(ty, 0),
        ));
    }

    /// The active rows are now `rows` (a subsequence of the step's): each
    /// live temporary keeps the rows of those only.
    fn compact(&mut self, engine: &mut Engine<'_>, slots: &mut [Slot], rows: &[u32]) {
        self.kept.clear();
        let mut next = 0;
        for (k, r) in self.rows.iter().enumerate() {
            if rows.get(next) == Some(r) {
                self.kept.push(k as u32);
                next += 1;
            }
        }
        if next != rows.len() {
            internal_error("rows joined a compact step");
        }
        for &d in &self.held {
            let Slot::Column(column) = &mut slots[d] else {
                internal_error("a step temporary that is not a column");
            };
            let before = column.bytes();
            let mut data = engine.take(column.data.ty(), self.kept.len() * column.row_len);
            engine.backend().gather_rows(
                Values::all(&column.data),
                column.row_len,
                &self.kept,
                ValuesMut::all(&mut data),
            );
            engine.give(std::mem::replace(&mut column.data, data));
            self.bytes = self.bytes - before + column.bytes();
        }
        self.rows.clear();
        self.rows.extend_from_slice(rows);
    }
}

/// Replaces each per-lane column that the operation reads or writes (not a
/// temporary) by a column of its active rows on positions (gathered if
/// read), keeping the original in `lent`.
fn lend_gathered(
    engine: &mut Engine<'_>,
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    is_temp: &[bool],
    lent: &mut Vec<(usize, Slot)>,
) {
    let n = exec.rows.len();
    for a in exec.args.iter().copied().chain(exec.dst) {
        if is_temp[a] || lent.iter().any(|(l, _)| *l == a) {
            continue;
        }
        let Slot::Column(column) = &mut slots[a] else {
            continue;
        };
        let (ty, row_len) = (column.data.ty(), column.row_len);
        let mut data = engine.take(ty, n * row_len);
        if exec.args.contains(&a) {
            engine.backend().gather_rows(
                Values::all(&column.data),
                row_len,
                exec.rows,
                ValuesMut::all(&mut data),
            );
        }
        let shape = std::mem::take(&mut column.shape);
        let gathered = Column {
            shape,
            row_len,
            data,
        };
        let original = std::mem::replace(&mut slots[a], Slot::Column(gathered));
        lent.push((a, original));
    }
}

/// A per-lane result computed on positions goes to its column's active
/// rows, but those that faulted (which are never written).
fn scatter_result(
    engine: &Engine<'_>,
    exec: &PrimExecution<'_>,
    slots: &[Slot],
    lent: &mut [(usize, Slot)],
    faults: &[(u32, Fault)],
) {
    let Some(d) = exec.dst else { return };
    let Some(k) = lent.iter().position(|(a, _)| *a == d) else {
        return;
    };
    let (Slot::Column(computed), (_, Slot::Column(original))) = (&slots[d], &mut lent[k]) else {
        internal_error("a lent destination that is not a column");
    };
    let backend = engine.backend();
    let n = computed.row_len;
    let values = Values::all(&computed.data);
    if faults.is_empty() {
        backend.scatter_rows(values, n, exec.rows, ValuesMut::all(&mut original.data));
        return;
    }
    for (p, &r) in exec.rows.iter().enumerate() {
        if faults.iter().any(|(f, _)| *f == r) {
            continue;
        }
        let r = r as usize;
        backend.copy(
            values.slice(p * n..(p + 1) * n),
            ValuesMut::of(&mut original.data, r * n..(r + 1) * n),
        );
    }
}

/// Per operation of a block, given the slots each one reads or writes: the
/// temporaries it mentions last (their buffers go back after it).
pub fn deaths(mentions: &[Vec<usize>], is_temp: &[bool]) -> Vec<Vec<usize>> {
    let mut dying = vec![Vec::new(); mentions.len()];
    let mut seen = std::collections::HashSet::new();
    for (i, slots) in mentions.iter().enumerate().rev() {
        for &s in slots {
            if is_temp[s] && seen.insert(s) {
                dying[i].push(s);
            }
        }
    }
    dying
}

/// Whether `args` of an operation writing `dst` are read by an indexed
/// assignment in place into a per-lane array (`dst = index_set(dst, i, v)`
/// with `dst` no temporary): its index and value then stay columns.
pub fn in_place_set(prim: &Prim, dst: Option<usize>, args: &[usize]) -> bool {
    matches!((prim, dst, args), (Prim::IndexSet, Some(d), [a, ..]) if d == *a)
}
