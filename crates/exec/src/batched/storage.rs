//! Storage of variables for the batching strategies.
//!
//! A per-member variable is a [`Column`]: one contiguous `[rows, ...shape]`
//! buffer, row `r` holding the value of the member (or lane) `r`. An invariant
//! variable is one [`Tensor`] with no batch axis. A member-uniform parameter
//! (`autobatch_passes::member`) is [`Slot::Member`]: a column with one row
//! per member, shared (not copied) by every activation and lane of the
//! member. A full variable also has a per-member [`ValueStack`] that grows
//! on demand.
//!
//! This is host memory, the layout of the CPU backend
//! ([`autobatch_kernels::Cpu`]): the engine hands views of these buffers to
//! its backend, and the executors' own moves of rows (binding arguments,
//! passing a call's arguments and results, the value stacks) use the row
//! moves of `autobatch_kernels::buffer` directly.

use autobatch_kernels::buffer::{self, Values, ValuesMut};
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use std::sync::Arc;

use crate::internal::internal_error;

/// A batched value: `rows` values of one shape, contiguous, row-major.
#[derive(Clone, Debug)]
pub struct Column {
    pub shape: Vec<usize>,
    /// Elements per row (the product of `shape`).
    pub row_len: usize,
    pub data: Data,
}

impl Column {
    /// `rows` rows of zeros (false) of the given element type and shape.
    pub fn zeros(elem: ScalarType, shape: Vec<usize>, rows: usize) -> Column {
        let row_len = shape.iter().product();
        let zero = Scalar::zero(elem);
        Column {
            shape,
            row_len,
            data: Data::filled(zero, rows * row_len),
        }
    }

    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.row_len).unwrap_or(0)
    }

    /// The bytes of its elements.
    pub fn bytes(&self) -> u64 {
        (self.data.len() * crate::memory::element_bytes(self.data.ty())) as u64
    }

    /// The value of row `r` as a tensor of its own.
    pub fn row(&self, r: usize) -> Tensor {
        let mut data = Data::with_capacity(self.data.ty(), self.row_len);
        data.extend_from(&self.data, r * self.row_len..(r + 1) * self.row_len);
        Tensor::new(self.shape.clone(), data)
    }

    /// The elements of row `r`, to write.
    pub fn row_mut(&mut self, r: usize) -> ValuesMut<'_> {
        let n = self.row_len;
        ValuesMut::of(&mut self.data, r * n..(r + 1) * n)
    }

    /// Overwrites row `r` with `value`, which must have the column's shape and type.
    pub fn set_row(&mut self, r: usize, value: &Tensor) {
        let n = self.row_len;
        buffer::copy(
            Values::all(&value.data),
            ValuesMut::of(&mut self.data, r * n..(r + 1) * n),
        );
    }

    /// Writes `value` (of the column's row shape) into each row of `rows`.
    pub fn fill_rows(&mut self, value: &Tensor, rows: &[u32]) {
        buffer::broadcast_rows(
            Values::all(&value.data),
            rows,
            ValuesMut::all(&mut self.data),
        )
    }

    /// A new column whose row `k` is row `rows[k]` of `self`.
    pub fn gather(&self, rows: &[u32]) -> Column {
        let len = rows.len() * self.row_len;
        let mut data = Data::filled(Scalar::zero(self.data.ty()), len);
        buffer::gather_rows(
            Values::all(&self.data),
            self.row_len,
            rows,
            ValuesMut::all(&mut data),
        );
        Column {
            shape: self.shape.clone(),
            row_len: self.row_len,
            data,
        }
    }

    /// Row `r` of `self` = row `r` of `from`, for each `r` in `rows`.
    pub fn copy_rows_from(&mut self, from: &Column, rows: &[u32]) {
        buffer::copy_rows(
            Values::all(&from.data),
            self.row_len,
            rows,
            ValuesMut::all(&mut self.data),
        )
    }

    /// Makes room for `rows` rows (program-counter's lanes grow); new rows
    /// are zeros. The old rows are kept if `keep` (else the whole column is
    /// zeros: a temporary's values do not outlive a step).
    pub fn grow_rows(&mut self, rows: usize, keep: bool) {
        let len = rows * self.row_len;
        let old = self.data.len();
        if old < len {
            // A new zeroed buffer (which the allocator gives as untouched
            // pages: rows no lane uses cost no memory), the old rows copied.
            let mut data = Data::filled(Scalar::zero(self.data.ty()), len);
            if keep {
                buffer::copy(Values::all(&self.data), ValuesMut::of(&mut data, 0..old));
            }
            self.data = data;
        }
    }

    /// Writes `values` into row `r` from element `offset` on (a whole row,
    /// or one item of a row that is an array).
    pub fn write(&mut self, r: usize, offset: usize, values: Values<'_>) {
        let start = r * self.row_len + offset;
        let end = start + values.len();
        buffer::copy(values, ValuesMut::of(&mut self.data, start..end));
    }

    /// Row `rows[k]` of `self` = row `k` of `dense` (a column of `rows.len()` rows).
    pub fn scatter_rows_from(&mut self, dense: &Column, rows: &[u32]) {
        buffer::scatter_rows(
            Values::all(&dense.data),
            self.row_len,
            rows,
            ValuesMut::all(&mut self.data),
        )
    }
}

/// Where a variable's current value lives.
#[derive(Clone, Debug)]
pub enum Slot {
    /// One value for every member; `None` until first assigned.
    Invariant(Option<Tensor>),
    /// One row per member (or lane).
    Column(Column),
    /// One row per *member*, whatever the lane or activation reading it:
    /// a member-uniform parameter, shared by every slot that holds it.
    Member(Arc<Column>),
}

impl Slot {
    /// `len` elements of the value row `r` sees, from element `offset` on
    /// (a whole row, or one item of an array). For a member slot `r` is the
    /// member.
    pub fn values(&self, r: usize, offset: usize, len: usize) -> Values<'_> {
        match self {
            Slot::Invariant(Some(t)) => Values::of(&t.data, offset..offset + len),
            Slot::Invariant(None) => internal_error("reading an unassigned invariant variable"),
            Slot::Column(_) | Slot::Member(_) => {
                let c = self.rows_column();
                let start = r * c.row_len + offset;
                Values::of(&c.data, start..start + len)
            }
        }
    }

    /// The elements of one value (of one row, for a column).
    pub fn row_len(&self) -> usize {
        match self {
            Slot::Invariant(Some(t)) => t.len(),
            Slot::Invariant(None) => internal_error("reading an unassigned invariant variable"),
            Slot::Column(c) => c.row_len,
            Slot::Member(c) => c.row_len,
        }
    }

    /// The shape of one value (of one row, for a column).
    pub fn shape(&self) -> &[usize] {
        match self {
            Slot::Invariant(Some(t)) => &t.shape,
            Slot::Invariant(None) => internal_error("reading an unassigned invariant variable"),
            Slot::Column(c) => &c.shape,
            Slot::Member(c) => &c.shape,
        }
    }

    /// The value row `r` sees (for a member slot, member `r`).
    pub fn value(&self, r: usize) -> Tensor {
        match self {
            Slot::Invariant(Some(t)) => t.clone(),
            Slot::Invariant(None) => internal_error("reading an unassigned invariant variable"),
            Slot::Column(c) => c.row(r),
            Slot::Member(c) => c.row(r),
        }
    }

    /// The column of a column or member slot.
    pub fn rows_column(&self) -> &Column {
        match self {
            Slot::Column(c) => c,
            Slot::Member(c) => c,
            Slot::Invariant(_) => internal_error("an invariant slot has no rows"),
        }
    }

    /// The bytes this slot holds (a member slot's are shared: none).
    pub fn bytes(&self) -> u64 {
        match self {
            Slot::Invariant(Some(t)) => {
                (t.len() * crate::memory::element_bytes(t.elem_type())) as u64
            }
            Slot::Invariant(None) | Slot::Member(_) => 0,
            Slot::Column(c) => c.bytes(),
        }
    }
}

/// A place in a slot: element `offset` of row `row` (of the one value of
/// an invariant slot, whatever the row).
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub slot: usize,
    pub row: usize,
    pub offset: usize,
}

/// Copies `len` elements from `from` to `to` (a column; the two may be one
/// slot, at other rows), with no buffer in between. The row of a member
/// slot is the member's.
pub fn copy_value(slots: &mut [Slot], from: Place, to: Place, len: usize) {
    let start = |slot: &Slot, place: Place| match slot {
        Slot::Column(_) | Slot::Member(_) => place.row * slot.rows_column().row_len + place.offset,
        Slot::Invariant(_) => place.offset,
    };
    if from.slot == to.slot {
        let Slot::Column(column) = &mut slots[to.slot] else {
            internal_error("copying into an invariant variable");
        };
        let (src, dst) = (
            from.row * column.row_len + from.offset,
            to.row * column.row_len + to.offset,
        );
        macro_rules! within {
            ($($variant:ident),*) => {
                match &mut column.data {
                    $(Data::$variant(v) => v.copy_within(src..src + len, dst),)*
                }
            };
        }
        within!(Bool, I32, I64, Usize, F32, F64);
        return;
    }
    let (source, target) = if from.slot < to.slot {
        let (lo, hi) = slots.split_at_mut(to.slot);
        (&lo[from.slot], &mut hi[0])
    } else {
        let (lo, hi) = slots.split_at_mut(from.slot);
        (&hi[0], &mut lo[to.slot])
    };
    let src = start(source, from);
    let values = match source {
        Slot::Column(c) => Values::of(&c.data, src..src + len),
        Slot::Member(c) => Values::of(&c.data, src..src + len),
        Slot::Invariant(Some(t)) => Values::of(&t.data, src..src + len),
        Slot::Invariant(None) => internal_error("reading an unassigned invariant variable"),
    };
    let Slot::Column(column) = target else {
        internal_error("copying into an invariant variable");
    };
    column.write(to.row, to.offset, values);
}

/// The saved values of one full variable: one stack per member, each a flat
/// buffer of rows of the variable's element type, growing on demand.
#[derive(Clone, Debug)]
pub struct ValueStack {
    row_len: usize,
    stacks: TypedStacks,
    /// Elements saved, over every member, and the bytes of one.
    held: usize,
    elem_bytes: usize,
}

/// Per member, the saved rows, by element type (one match per operation,
/// not one per member).
#[derive(Clone, Debug)]
enum TypedStacks {
    Bool(Vec<Vec<bool>>),
    I32(Vec<Vec<i32>>),
    I64(Vec<Vec<i64>>),
    Usize(Vec<Vec<u64>>),
    F32(Vec<Vec<f32>>),
    F64(Vec<Vec<f64>>),
}

/// Runs `$body` with `$s` bound to the per-member stacks, whatever their type.
macro_rules! each_stack {
    ($stacks:expr, |$s:ident| $body:expr) => {
        match $stacks {
            TypedStacks::Bool($s) => $body,
            TypedStacks::I32($s) => $body,
            TypedStacks::I64($s) => $body,
            TypedStacks::Usize($s) => $body,
            TypedStacks::F32($s) => $body,
            TypedStacks::F64($s) => $body,
        }
    };
}

/// Runs `$body` with `$st` bound to the per-member stacks and `$col` to the
/// elements of a column of the same type; two types are an internal error.
macro_rules! with_stacks_and_column {
    ($stacks:expr, $column:expr, |$st:ident, $col:ident| $body:expr) => {
        match ($stacks, $column) {
            (TypedStacks::Bool($st), Data::Bool($col)) => $body,
            (TypedStacks::I32($st), Data::I32($col)) => $body,
            (TypedStacks::I64($st), Data::I64($col)) => $body,
            (TypedStacks::Usize($st), Data::Usize($col)) => $body,
            (TypedStacks::F32($st), Data::F32($col)) => $body,
            (TypedStacks::F64($st), Data::F64($col)) => $body,
            (_, c) => internal_error(format!(
                "a stack of another type than its {} variable",
                c.ty()
            )),
        }
    };
}

impl ValueStack {
    pub fn new(elem: ScalarType, row_len: usize, members: usize) -> ValueStack {
        let stacks = match elem {
            ScalarType::Bool => TypedStacks::Bool(vec![Vec::new(); members]),
            ScalarType::I32 => TypedStacks::I32(vec![Vec::new(); members]),
            ScalarType::I64 => TypedStacks::I64(vec![Vec::new(); members]),
            ScalarType::Usize => TypedStacks::Usize(vec![Vec::new(); members]),
            ScalarType::F32 => TypedStacks::F32(vec![Vec::new(); members]),
            ScalarType::F64 => TypedStacks::F64(vec![Vec::new(); members]),
        };
        ValueStack {
            row_len,
            stacks,
            held: 0,
            elem_bytes: crate::memory::element_bytes(elem),
        }
    }

    /// The bytes saved, over every member.
    pub fn bytes(&self) -> u64 {
        (self.held * self.elem_bytes) as u64
    }

    /// The bytes of one saved value.
    pub fn value_bytes(&self) -> u64 {
        (self.row_len * self.elem_bytes) as u64
    }

    /// Saves row `m` of `from` on member `m`'s stack, for each `m` in `members`.
    pub fn push_rows(&mut self, members: &[u32], from: &Column) {
        let n = self.row_len;
        with_stacks_and_column!(&mut self.stacks, &from.data, |stacks, column| {
            for m in members {
                let m = *m as usize;
                stacks[m].extend_from_slice(&column[m * n..(m + 1) * n]);
            }
        });
        self.held += members.len() * n;
    }

    /// Makes room for the stacks of `lanes` lanes (new ones empty).
    pub fn grow(&mut self, lanes: usize) {
        each_stack!(&mut self.stacks, |s| if s.len() < lanes {
            s.resize_with(lanes, Vec::new)
        })
    }

    /// How many values member `m` has saved.
    pub fn height(&self, m: usize) -> usize {
        let len = each_stack!(&self.stacks, |s| s[m].len());
        len / self.row_len.max(1)
    }

    /// Drops member `m`'s values saved above `height` (a fault unwound them).
    pub fn truncate(&mut self, m: usize, height: usize) {
        let len = height * self.row_len.max(1);
        let before = each_stack!(&self.stacks, |s| s[m].len());
        each_stack!(&mut self.stacks, |s| s[m].truncate(len));
        self.held -= before.saturating_sub(len);
    }

    /// Copies each member's top saved row into its row of `into`; pops it if `remove`.
    pub fn restore_rows(&mut self, members: &[u32], into: &mut Column, remove: bool) {
        let n = self.row_len;
        with_stacks_and_column!(&mut self.stacks, &mut into.data, |stacks, column| {
            for m in members {
                let m = *m as usize;
                let stack = &mut stacks[m];
                let len = stack.len();
                if len < n {
                    internal_error("popping an empty variable stack");
                }
                column[m * n..(m + 1) * n].copy_from_slice(&stack[len - n..]);
                if remove {
                    stack.truncate(len - n);
                }
            }
        });
        if remove {
            self.held -= members.len() * n;
        }
    }
}
