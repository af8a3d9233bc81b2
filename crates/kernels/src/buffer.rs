//! Typed buffers as the kernels see them, and the moves of whole rows.
//!
//! - [`Values`] / [`ValuesMut`]: a borrowed run of elements of one scalar
//!   type (a view of a [`Data`] buffer, or of part of it).
//! - [`Rows`] / [`RowsMut`]: the operands and the result of a *batched*
//!   operation: a column of rows (row `r` is the value of one member), or
//!   one value every row shares; the result is always a column.
//! - The moves of rows between buffers (copy, gather, scatter, broadcast)
//!   and the sizing of a buffer ([`resize`], [`append`]): the one implementation of
//!   each, for the batched engine (through [`crate::backend`]) and for the
//!   executors' column storage.
//!
//! The per-type dispatch is written once, in the macros of this module
//! (`each_values!`, `with_same_type!`); a pair of views of different types
//! is an internal error (the IR verifier rules it out).

use std::ops::Range;

use autobatch_types::{Data, Scalar, ScalarType};

use crate::internal_error;

/// Runs `$body` with `$x` bound to the typed slice inside a view (`Values`
/// or `ValuesMut`, named by `$enum`), whatever its type.
macro_rules! each_values {
    ($enum:ident, $v:expr, |$x:ident| $body:expr) => {
        match $v {
            $enum::Bool($x) => $body,
            $enum::I32($x) => $body,
            $enum::I64($x) => $body,
            $enum::Usize($x) => $body,
            $enum::F32($x) => $body,
            $enum::F64($x) => $body,
        }
    };
}

/// Runs `$body` with `$s` and `$d` bound to the typed slices of a shared
/// and a mutable view of one scalar type; two types are an internal error
/// reported as `$what`.
macro_rules! with_same_type {
    ($what:expr, $src:expr, $dst:expr, |$s:ident, $d:ident| $body:expr) => {
        match ($src, $dst) {
            ($crate::buffer::Values::Bool($s), $crate::buffer::ValuesMut::Bool($d)) => $body,
            ($crate::buffer::Values::I32($s), $crate::buffer::ValuesMut::I32($d)) => $body,
            ($crate::buffer::Values::I64($s), $crate::buffer::ValuesMut::I64($d)) => $body,
            ($crate::buffer::Values::Usize($s), $crate::buffer::ValuesMut::Usize($d)) => $body,
            ($crate::buffer::Values::F32($s), $crate::buffer::ValuesMut::F32($d)) => $body,
            ($crate::buffer::Values::F64($s), $crate::buffer::ValuesMut::F64($d)) => $body,
            (s, d) => $crate::internal_error(format!(
                "{}: {} elements into a {} buffer",
                $what,
                s.ty(),
                d.ty()
            )),
        }
    };
}

/// A borrowed run of elements of one scalar type.
#[derive(Clone, Copy, Debug)]
pub enum Values<'a> {
    Bool(&'a [bool]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    Usize(&'a [u64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// A mutably borrowed run of elements of one scalar type.
#[derive(Debug)]
pub enum ValuesMut<'a> {
    Bool(&'a mut [bool]),
    I32(&'a mut [i32]),
    I64(&'a mut [i64]),
    Usize(&'a mut [u64]),
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
}

impl<'a> Values<'a> {
    /// The elements `range` of `data`.
    #[inline]
    pub fn of(data: &'a Data, range: Range<usize>) -> Values<'a> {
        match data {
            Data::Bool(v) => Values::Bool(&v[range]),
            Data::I32(v) => Values::I32(&v[range]),
            Data::I64(v) => Values::I64(&v[range]),
            Data::Usize(v) => Values::Usize(&v[range]),
            Data::F32(v) => Values::F32(&v[range]),
            Data::F64(v) => Values::F64(&v[range]),
        }
    }

    /// Every element of `data`.
    #[inline]
    pub fn all(data: &'a Data) -> Values<'a> {
        match data {
            Data::Bool(v) => Values::Bool(v),
            Data::I32(v) => Values::I32(v),
            Data::I64(v) => Values::I64(v),
            Data::Usize(v) => Values::Usize(v),
            Data::F32(v) => Values::F32(v),
            Data::F64(v) => Values::F64(v),
        }
    }

    /// The one element of `value`.
    #[inline]
    pub fn scalar(value: &'a Scalar) -> Values<'a> {
        match value {
            Scalar::Bool(x) => Values::Bool(std::slice::from_ref(x)),
            Scalar::I32(x) => Values::I32(std::slice::from_ref(x)),
            Scalar::I64(x) => Values::I64(std::slice::from_ref(x)),
            Scalar::Usize(x) => Values::Usize(std::slice::from_ref(x)),
            Scalar::F32(x) => Values::F32(std::slice::from_ref(x)),
            Scalar::F64(x) => Values::F64(std::slice::from_ref(x)),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        each_values!(Values, self, |x| x.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ty(&self) -> ScalarType {
        match self {
            Values::Bool(_) => ScalarType::Bool,
            Values::I32(_) => ScalarType::I32,
            Values::I64(_) => ScalarType::I64,
            Values::Usize(_) => ScalarType::Usize,
            Values::F32(_) => ScalarType::F32,
            Values::F64(_) => ScalarType::F64,
        }
    }

    /// The elements `range` of this view.
    #[inline]
    pub fn slice(self, range: Range<usize>) -> Values<'a> {
        match self {
            Values::Bool(v) => Values::Bool(&v[range]),
            Values::I32(v) => Values::I32(&v[range]),
            Values::I64(v) => Values::I64(&v[range]),
            Values::Usize(v) => Values::Usize(&v[range]),
            Values::F32(v) => Values::F32(&v[range]),
            Values::F64(v) => Values::F64(&v[range]),
        }
    }

    /// Element `i` of an integer view, exactly (an index may be negative).
    pub fn integer(self, i: usize) -> i128 {
        match self {
            Values::I32(v) => v[i] as i128,
            Values::I64(v) => v[i] as i128,
            Values::Usize(v) => v[i] as i128,
            other => internal_error(format!("an index of type {}", other.ty())),
        }
    }
}

impl<'a> ValuesMut<'a> {
    /// The elements `range` of `data`.
    #[inline]
    pub fn of(data: &'a mut Data, range: Range<usize>) -> ValuesMut<'a> {
        match data {
            Data::Bool(v) => ValuesMut::Bool(&mut v[range]),
            Data::I32(v) => ValuesMut::I32(&mut v[range]),
            Data::I64(v) => ValuesMut::I64(&mut v[range]),
            Data::Usize(v) => ValuesMut::Usize(&mut v[range]),
            Data::F32(v) => ValuesMut::F32(&mut v[range]),
            Data::F64(v) => ValuesMut::F64(&mut v[range]),
        }
    }

    /// Every element of `data`.
    #[inline]
    pub fn all(data: &'a mut Data) -> ValuesMut<'a> {
        match data {
            Data::Bool(v) => ValuesMut::Bool(v),
            Data::I32(v) => ValuesMut::I32(v),
            Data::I64(v) => ValuesMut::I64(v),
            Data::Usize(v) => ValuesMut::Usize(v),
            Data::F32(v) => ValuesMut::F32(v),
            Data::F64(v) => ValuesMut::F64(v),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        each_values!(ValuesMut, self, |x| x.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ty(&self) -> ScalarType {
        match self {
            ValuesMut::Bool(_) => ScalarType::Bool,
            ValuesMut::I32(_) => ScalarType::I32,
            ValuesMut::I64(_) => ScalarType::I64,
            ValuesMut::Usize(_) => ScalarType::Usize,
            ValuesMut::F32(_) => ScalarType::F32,
            ValuesMut::F64(_) => ScalarType::F64,
        }
    }

    /// Splits into the first `mid` elements and the rest.
    #[inline]
    pub fn split_at(self, mid: usize) -> (ValuesMut<'a>, ValuesMut<'a>) {
        macro_rules! split {
            ($($variant:ident),*) => {
                match self {
                    $(ValuesMut::$variant(v) => {
                        let (a, b) = v.split_at_mut(mid);
                        (ValuesMut::$variant(a), ValuesMut::$variant(b))
                    })*
                }
            };
        }
        split!(Bool, I32, I64, Usize, F32, F64)
    }

    /// A shorter reborrow of the elements `range`.
    #[inline]
    pub fn slice(&mut self, range: Range<usize>) -> ValuesMut<'_> {
        match self {
            ValuesMut::Bool(v) => ValuesMut::Bool(&mut v[range]),
            ValuesMut::I32(v) => ValuesMut::I32(&mut v[range]),
            ValuesMut::I64(v) => ValuesMut::I64(&mut v[range]),
            ValuesMut::Usize(v) => ValuesMut::Usize(&mut v[range]),
            ValuesMut::F32(v) => ValuesMut::F32(&mut v[range]),
            ValuesMut::F64(v) => ValuesMut::F64(&mut v[range]),
        }
    }
}

// ---------------------------------------------------------------------------
// Operands and results of batched operations.

/// An operand of a batched operation.
#[derive(Clone, Copy, Debug)]
pub enum Rows<'a> {
    /// One value per row: row `r` is `values[r * row_len..(r + 1) * row_len]`.
    Column { values: Values<'a>, row_len: usize },
    /// One value that every row reads.
    Shared(Values<'a>),
}

impl<'a> Rows<'a> {
    /// A filler for operand lists, never read.
    pub const NONE: Rows<'static> = Rows::Shared(Values::Bool(&[]));

    /// The elements row `r` reads.
    #[inline]
    pub fn row(self, r: usize) -> Values<'a> {
        match self {
            Rows::Column { values, row_len } => values.slice(r * row_len..(r + 1) * row_len),
            Rows::Shared(values) => values,
        }
    }

    /// The rows `range` of this operand (a shared value stays whole).
    #[inline]
    pub fn rows(self, range: Range<usize>) -> Rows<'a> {
        match self {
            Rows::Column { values, row_len } => Rows::Column {
                values: values.slice(range.start * row_len..range.end * row_len),
                row_len,
            },
            shared @ Rows::Shared(_) => shared,
        }
    }

    /// The elements of one row.
    #[inline]
    pub fn row_len(self) -> usize {
        match self {
            Rows::Column { row_len, .. } => row_len,
            Rows::Shared(values) => values.len(),
        }
    }

    /// Every element the operand holds (all its rows, for a column).
    #[inline]
    pub fn values(self) -> Values<'a> {
        match self {
            Rows::Column { values, .. } | Rows::Shared(values) => values,
        }
    }

    pub fn ty(self) -> ScalarType {
        self.values().ty()
    }

    #[inline]
    pub fn is_shared(self) -> bool {
        matches!(self, Rows::Shared(_))
    }
}

/// The result of a batched operation: `rows` rows of `row_len` elements,
/// contiguous.
#[derive(Debug)]
pub struct RowsMut<'a> {
    pub values: ValuesMut<'a>,
    pub rows: usize,
    pub row_len: usize,
}

impl<'a> RowsMut<'a> {
    /// `values` as `rows` rows of `row_len`; their lengths must agree.
    #[inline]
    pub fn new(values: ValuesMut<'a>, rows: usize, row_len: usize) -> RowsMut<'a> {
        if rows.checked_mul(row_len) != Some(values.len()) {
            internal_error(format!(
                "{} elements are not {rows} rows of {row_len}",
                values.len()
            ));
        }
        RowsMut {
            values,
            rows,
            row_len,
        }
    }

    /// One row: `len` elements of `ty` (for the result of one member).
    pub fn one(values: ValuesMut<'a>) -> RowsMut<'a> {
        let row_len = values.len();
        RowsMut::new(values, 1, row_len)
    }

    /// Row `k`.
    #[inline]
    pub fn row(&mut self, k: usize) -> ValuesMut<'_> {
        let n = self.row_len;
        self.values.slice(k * n..(k + 1) * n)
    }

    /// Splits into the first `mid` rows and the rest.
    #[inline]
    pub fn split_at(self, mid: usize) -> (RowsMut<'a>, RowsMut<'a>) {
        let (a, b) = self.values.split_at(mid * self.row_len);
        (
            RowsMut {
                values: a,
                rows: mid,
                row_len: self.row_len,
            },
            RowsMut {
                values: b,
                rows: self.rows - mid,
                row_len: self.row_len,
            },
        )
    }

    pub fn ty(&self) -> ScalarType {
        self.values.ty()
    }
}

/// The typed elements of a [`Rows`] operand, once its type is matched.
#[derive(Clone, Copy)]
pub(crate) struct Typed<'a, T> {
    pub values: &'a [T],
    pub row_len: usize,
    pub shared: bool,
}

impl<'a, T> Typed<'a, T> {
    /// `values` are the elements of `rows`.
    pub fn of(rows: Rows<'_>, values: &'a [T]) -> Typed<'a, T> {
        Typed {
            values,
            row_len: rows.row_len(),
            shared: rows.is_shared(),
        }
    }

    /// The elements row `r` reads.
    #[inline]
    pub fn row(self, r: usize) -> &'a [T] {
        if self.shared {
            self.values
        } else {
            &self.values[r * self.row_len..(r + 1) * self.row_len]
        }
    }
}

// ---------------------------------------------------------------------------
// Sizing and moving.

/// Makes `data` a buffer of `len` elements of type `ty`, keeping its
/// allocation when the type already matches (the elements are unspecified;
/// new ones are zero). Allocates only when the type changes or the
/// capacity is short.
#[inline]
pub fn resize(data: &mut Data, ty: ScalarType, len: usize) {
    match (data, ty) {
        (Data::Bool(v), ScalarType::Bool) => v.resize(len, false),
        (Data::I32(v), ScalarType::I32) => v.resize(len, 0),
        (Data::I64(v), ScalarType::I64) => v.resize(len, 0),
        (Data::Usize(v), ScalarType::Usize) => v.resize(len, 0),
        (Data::F32(v), ScalarType::F32) => v.resize(len, 0.0),
        (Data::F64(v), ScalarType::F64) => v.resize(len, 0.0),
        (data, ty) => *data = Data::filled(Scalar::zero(ty), len),
    }
}

/// The elements `data` can hold without allocating.
#[inline]
pub fn capacity(data: &Data) -> usize {
    match data {
        Data::Bool(v) => v.capacity(),
        Data::I32(v) => v.capacity(),
        Data::I64(v) => v.capacity(),
        Data::Usize(v) => v.capacity(),
        Data::F32(v) => v.capacity(),
        Data::F64(v) => v.capacity(),
    }
}

/// Appends `values` to `data` (of their type), growing its allocation only
/// when the capacity is short.
pub fn append(data: &mut Data, values: Values<'_>) {
    match (data, values) {
        (Data::Bool(v), Values::Bool(x)) => v.extend_from_slice(x),
        (Data::I32(v), Values::I32(x)) => v.extend_from_slice(x),
        (Data::I64(v), Values::I64(x)) => v.extend_from_slice(x),
        (Data::Usize(v), Values::Usize(x)) => v.extend_from_slice(x),
        (Data::F32(v), Values::F32(x)) => v.extend_from_slice(x),
        (Data::F64(v), Values::F64(x)) => v.extend_from_slice(x),
        (d, x) => internal_error(format!(
            "append: {} elements onto a {} buffer",
            x.ty(),
            d.ty()
        )),
    }
}

/// `dst = src` (one type, one length).
pub fn copy(src: Values<'_>, dst: ValuesMut<'_>) {
    #[inline]
    fn copy_slice<T: Copy>(src: &[T], dst: &mut [T]) {
        // One element (a scalar, the most frequent case) without a call to
        // `memcpy`.
        match (src, dst) {
            ([s], [d]) => *d = *s,
            (src, dst) => dst.copy_from_slice(src),
        }
    }
    with_same_type!("copy", src, dst, |s, d| copy_slice(s, d))
}

/// Row `k` of `out` = row `rows[k]` of `src` (rows of `row_len`).
pub fn gather_rows(src: Values<'_>, row_len: usize, rows: &[u32], out: ValuesMut<'_>) {
    fn gather<T: Copy>(src: &[T], row_len: usize, rows: &[u32], out: &mut [T]) {
        if row_len == 1 {
            for (o, r) in out.iter_mut().zip(rows) {
                *o = src[*r as usize];
            }
        } else {
            for (k, r) in rows.iter().enumerate() {
                let r = *r as usize;
                out[k * row_len..(k + 1) * row_len]
                    .copy_from_slice(&src[r * row_len..(r + 1) * row_len]);
            }
        }
    }
    with_same_type!("gather_rows", src, out, |s, o| gather(s, row_len, rows, o))
}

/// Row `rows[k]` of `dst` = row `k` of `src` (a dense run of `rows.len()`
/// rows of `row_len`); the other rows of `dst` are left alone.
pub fn scatter_rows(src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
    fn scatter<T: Copy>(src: &[T], row_len: usize, rows: &[u32], dst: &mut [T]) {
        if row_len == 1 {
            for (k, r) in rows.iter().enumerate() {
                dst[*r as usize] = src[k];
            }
        } else {
            for (k, r) in rows.iter().enumerate() {
                let r = *r as usize;
                dst[r * row_len..(r + 1) * row_len]
                    .copy_from_slice(&src[k * row_len..(k + 1) * row_len]);
            }
        }
    }
    with_same_type!("scatter_rows", src, dst, |s, d| scatter(
        s, row_len, rows, d
    ))
}

/// Row `k` of `out` (a dense run of rows of `len`) = the first `len`
/// elements of row `rows[k]` of `src` (rows of `src_row_len >= len`): the
/// members' own elements of a padded ragged column.
pub fn gather_prefixes(
    src: Values<'_>,
    src_row_len: usize,
    len: usize,
    rows: &[u32],
    out: ValuesMut<'_>,
) {
    fn gather<T: Copy>(src: &[T], src_row_len: usize, len: usize, rows: &[u32], out: &mut [T]) {
        if len == 0 {
            return;
        }
        if len == 1 {
            for (o, r) in out.iter_mut().zip(rows) {
                *o = src[*r as usize * src_row_len];
            }
        } else {
            for (o, r) in out.chunks_exact_mut(len).zip(rows) {
                let start = *r as usize * src_row_len;
                o.copy_from_slice(&src[start..start + len]);
            }
        }
    }
    with_same_type!("gather_prefixes", src, out, |s, o| gather(
        s,
        src_row_len,
        len,
        rows,
        o
    ))
}

/// The first `len` elements of row `rows[k]` of `dst` (rows of
/// `dst_row_len >= len`) = row `k` of `src` (a dense run of rows of
/// `len`); the rest of each row is left alone.
pub fn scatter_prefixes(
    src: Values<'_>,
    len: usize,
    rows: &[u32],
    dst_row_len: usize,
    dst: ValuesMut<'_>,
) {
    fn scatter<T: Copy>(src: &[T], len: usize, rows: &[u32], dst_row_len: usize, dst: &mut [T]) {
        if len == 0 {
            return;
        }
        if len == 1 {
            for (s, r) in src.iter().zip(rows) {
                dst[*r as usize * dst_row_len] = *s;
            }
        } else {
            for (s, r) in src.chunks_exact(len).zip(rows) {
                let start = *r as usize * dst_row_len;
                dst[start..start + len].copy_from_slice(s);
            }
        }
    }
    with_same_type!("scatter_prefixes", src, dst, |s, d| scatter(
        s,
        len,
        rows,
        dst_row_len,
        d
    ))
}

/// Row `r` of `dst` = row `r` of `src`, for each `r` in `rows`.
pub fn copy_rows(src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
    fn copy_same<T: Copy>(src: &[T], row_len: usize, rows: &[u32], dst: &mut [T]) {
        if row_len == 1 {
            for r in rows {
                dst[*r as usize] = src[*r as usize];
            }
        } else {
            for r in rows {
                let r = *r as usize;
                dst[r * row_len..(r + 1) * row_len]
                    .copy_from_slice(&src[r * row_len..(r + 1) * row_len]);
            }
        }
    }
    with_same_type!("copy_rows", src, dst, |s, d| copy_same(s, row_len, rows, d))
}

/// Row `r` of `dst` = `value` (one row), for each `r` in `rows`.
pub fn broadcast_rows(value: Values<'_>, rows: &[u32], dst: ValuesMut<'_>) {
    fn broadcast<T: Copy>(value: &[T], rows: &[u32], dst: &mut [T]) {
        let n = value.len();
        if n == 1 {
            for r in rows {
                dst[*r as usize] = value[0];
            }
        } else {
            for r in rows {
                let r = *r as usize;
                dst[r * n..(r + 1) * n].copy_from_slice(value);
            }
        }
    }
    with_same_type!("broadcast_rows", value, dst, |v, d| broadcast(v, rows, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_moves() {
        let src = Data::I64(vec![1, 2, 3, 4, 5, 6]);
        let mut out = Data::I64(vec![0; 4]);
        gather_rows(Values::all(&src), 2, &[2, 0], ValuesMut::all(&mut out));
        assert_eq!(out, Data::I64(vec![5, 6, 1, 2]));
        let mut dst = Data::I64(vec![0; 6]);
        scatter_rows(Values::all(&out), 2, &[1, 2], ValuesMut::all(&mut dst));
        assert_eq!(dst, Data::I64(vec![0, 0, 5, 6, 1, 2]));
        copy_rows(Values::all(&src), 2, &[0], ValuesMut::all(&mut dst));
        assert_eq!(dst, Data::I64(vec![1, 2, 5, 6, 1, 2]));
        let seven = Scalar::I64(7);
        broadcast_rows(Values::scalar(&seven), &[1], ValuesMut::of(&mut dst, 0..3));
        assert_eq!(dst, Data::I64(vec![1, 7, 5, 6, 1, 2]));
        let mut scalars = Data::F32(vec![0.0; 3]);
        let src = Data::F32(vec![1.0, 2.0, 3.0]);
        gather_rows(
            Values::all(&src),
            1,
            &[2, 2, 0],
            ValuesMut::all(&mut scalars),
        );
        assert_eq!(scalars, Data::F32(vec![3.0, 3.0, 1.0]));
    }

    #[test]
    fn prefixes_of_padded_rows() {
        // Rows of 3, padded: the members' own values are 2 long.
        let padded = Data::F64(vec![1.0, 2.0, 9.0, 3.0, 4.0, 9.0, 5.0, 6.0, 9.0]);
        let mut dense = Data::F64(vec![0.0; 4]);
        gather_prefixes(
            Values::all(&padded),
            3,
            2,
            &[2, 0],
            ValuesMut::all(&mut dense),
        );
        assert_eq!(dense, Data::F64(vec![5.0, 6.0, 1.0, 2.0]));
        let mut dst = Data::F64(vec![0.0; 9]);
        scatter_prefixes(Values::all(&dense), 2, &[1, 2], 3, ValuesMut::all(&mut dst));
        assert_eq!(
            dst,
            Data::F64(vec![0.0, 0.0, 0.0, 5.0, 6.0, 0.0, 1.0, 2.0, 0.0])
        );
        // One element each; none (members of length 0).
        let mut one = Data::F64(vec![0.0; 2]);
        gather_prefixes(
            Values::all(&padded),
            3,
            1,
            &[1, 2],
            ValuesMut::all(&mut one),
        );
        assert_eq!(one, Data::F64(vec![3.0, 5.0]));
        scatter_prefixes(Values::all(&one), 1, &[0, 1], 3, ValuesMut::all(&mut dst));
        assert_eq!(
            dst,
            Data::F64(vec![3.0, 0.0, 0.0, 5.0, 6.0, 0.0, 1.0, 2.0, 0.0])
        );
        let mut empty = Data::F64(Vec::new());
        gather_prefixes(
            Values::all(&padded),
            3,
            0,
            &[0, 1],
            ValuesMut::all(&mut empty),
        );
        scatter_prefixes(Values::all(&empty), 0, &[0, 1], 3, ValuesMut::all(&mut dst));
        assert_eq!(
            dst,
            Data::F64(vec![3.0, 0.0, 0.0, 5.0, 6.0, 0.0, 1.0, 2.0, 0.0])
        );
    }

    #[test]
    fn resize_keeps_the_allocation_of_the_same_type() {
        let mut data = Data::F64(Vec::with_capacity(10));
        resize(&mut data, ScalarType::F64, 4);
        assert_eq!(data, Data::F64(vec![0.0; 4]));
        assert!(capacity(&data) >= 10);
        resize(&mut data, ScalarType::Bool, 2);
        assert_eq!(data, Data::Bool(vec![false; 2]));
    }

    #[test]
    #[should_panic(expected = "internal error")]
    fn moves_across_types_are_internal_errors() {
        let src = Data::I64(vec![1]);
        let mut dst = Data::F64(vec![0.0]);
        copy(Values::all(&src), ValuesMut::all(&mut dst));
    }

    #[test]
    fn rows_of_an_operand() {
        let data = Data::I32(vec![1, 2, 3, 4, 5, 6]);
        let column = Rows::Column {
            values: Values::all(&data),
            row_len: 3,
        };
        assert!(matches!(column.row(1), Values::I32(&[4, 5, 6])));
        assert!(matches!(column.rows(1..2).row(0), Values::I32(&[4, 5, 6])));
        let shared = Rows::Shared(Values::all(&data));
        assert_eq!(shared.rows(3..5).row(7).len(), 6);
        let mut out = Data::I32(vec![0; 6]);
        let mut rows = RowsMut::new(ValuesMut::all(&mut out), 3, 2);
        copy(column.row(0).slice(0..2), rows.row(2));
        let (first, rest) = rows.split_at(1);
        assert_eq!((first.rows, rest.rows), (1, 2));
        assert_eq!(out, Data::I32(vec![0, 0, 0, 0, 1, 2]));
    }
}
