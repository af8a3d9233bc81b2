//! Storage of variables for the batching strategies.
//!
//! A per-member variable is a [`Column`]: one contiguous `[rows, ...shape]`
//! buffer, row `r` holding the value of the member (or lane) `r`. An invariant
//! variable is one [`Tensor`] with no batch axis. A full variable also has a
//! per-member [`ValueStack`] that grows on demand.

use autobatch_types::{Data, Scalar, ScalarType, Tensor};

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
        let zero = match elem {
            ScalarType::Bool => Scalar::Bool(false),
            ScalarType::I32 => Scalar::I32(0),
            ScalarType::I64 => Scalar::I64(0),
            ScalarType::Usize => Scalar::Usize(0),
            ScalarType::F32 => Scalar::F32(0.0),
            ScalarType::F64 => Scalar::F64(0.0),
        };
        Column {
            shape,
            row_len,
            data: Data::filled(zero, rows * row_len),
        }
    }

    pub fn rows(&self) -> usize {
        if self.row_len == 0 {
            0
        } else {
            self.data.len() / self.row_len
        }
    }

    /// The value of row `r` as a tensor of its own.
    pub fn row(&self, r: usize) -> Tensor {
        let mut data = Data::with_capacity(self.data.ty(), self.row_len);
        data.extend_from(&self.data, r * self.row_len..(r + 1) * self.row_len);
        Tensor::new(self.shape.clone(), data)
    }

    /// Overwrites row `r` with `value`, which must have the column's shape and type.
    pub fn set_row(&mut self, r: usize, value: &Tensor) {
        let range = r * self.row_len..(r + 1) * self.row_len;
        copy_into(&mut self.data, range.start, &value.data, 0..self.row_len);
    }

    /// Copies row `from_row` of `from` into row `r` of `self`.
    pub fn copy_row_from(&mut self, r: usize, from: &Column, from_row: usize) {
        let n = self.row_len;
        copy_into(
            &mut self.data,
            r * n,
            &from.data,
            from_row * n..(from_row + 1) * n,
        );
    }

    /// Overwrites row `r` with the elements of `value` (same length).
    pub fn set_row_from_tensor_data(&mut self, r: usize, value: &Data) {
        let n = self.row_len;
        copy_into(&mut self.data, r * n, value, 0..n);
    }
}

/// `dst[at..at + range.len()] = src[range]`; both of one scalar type.
pub fn copy_into(dst: &mut Data, at: usize, src: &Data, range: std::ops::Range<usize>) {
    let len = range.len();
    match (dst, src) {
        (Data::Bool(d), Data::Bool(s)) => d[at..at + len].copy_from_slice(&s[range]),
        (Data::I32(d), Data::I32(s)) => d[at..at + len].copy_from_slice(&s[range]),
        (Data::I64(d), Data::I64(s)) => d[at..at + len].copy_from_slice(&s[range]),
        (Data::Usize(d), Data::Usize(s)) => d[at..at + len].copy_from_slice(&s[range]),
        (Data::F32(d), Data::F32(s)) => d[at..at + len].copy_from_slice(&s[range]),
        (Data::F64(d), Data::F64(s)) => d[at..at + len].copy_from_slice(&s[range]),
        (d, s) => panic!(
            "internal error: copying {} elements into a {} buffer",
            s.ty(),
            d.ty()
        ),
    }
}

/// Where a variable's current value lives.
#[derive(Clone, Debug)]
pub enum Slot {
    /// One value for every member; `None` until first assigned.
    Invariant(Option<Tensor>),
    /// One row per member (or lane).
    Column(Column),
}

impl Slot {
    /// The value row `r` sees.
    pub fn value(&self, r: usize) -> Tensor {
        match self {
            Slot::Invariant(Some(t)) => t.clone(),
            Slot::Invariant(None) => {
                panic!("internal error: reading an unassigned invariant variable")
            }
            Slot::Column(c) => c.row(r),
        }
    }
}

/// The saved values of one full variable: one stack per member, each a flat
/// buffer of rows, growing on demand.
#[derive(Clone, Debug)]
pub struct ValueStack {
    row_len: usize,
    /// Per member: saved rows, one after another.
    stacks: Vec<Data>,
}

impl ValueStack {
    pub fn new(elem: ScalarType, row_len: usize, members: usize) -> ValueStack {
        ValueStack {
            row_len,
            stacks: (0..members).map(|_| Data::with_capacity(elem, 0)).collect(),
        }
    }

    pub fn push(&mut self, member: usize, from: &Column) {
        let n = self.row_len;
        self.stacks[member].extend_from(&from.data, member * n..(member + 1) * n);
    }

    /// Copies the top saved row of `member` into its row of `into`; pops it if `remove`.
    pub fn restore(&mut self, member: usize, into: &mut Column, remove: bool) {
        let n = self.row_len;
        let stack = &mut self.stacks[member];
        let len = stack.len();
        assert!(len >= n, "internal error: popping an empty variable stack");
        copy_into(&mut into.data, member * n, stack, len - n..len);
        if remove {
            truncate(stack, len - n);
        }
    }
}

fn truncate(data: &mut Data, len: usize) {
    match data {
        Data::Bool(v) => v.truncate(len),
        Data::I32(v) => v.truncate(len),
        Data::I64(v) => v.truncate(len),
        Data::Usize(v) => v.truncate(len),
        Data::F32(v) => v.truncate(len),
        Data::F64(v) => v.truncate(len),
    }
}
