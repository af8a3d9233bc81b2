//! Reductions over a 1-D array (`sum mean max min argmax argmin logsumexp`)
//! and `softmax`, per array and row-wise over many rows (`*_rows_into`, for
//! the batched engine: bit-identical to the per-array function on each row).
//!
//! Every reduction has a fixed order, so its result is fixed to the last bit
//! whatever runs it. The decisions for edge cases:
//!
//! - integer `sum` starts from zero and adds left to right (wrapping). A
//!   float `sum` uses the lane order of [`crate::gemm::sum`]: element `p` goes
//!   to partial `p mod L` (`L` = 8 for `f32`, 4 for `f64`), partials start
//!   from `+0.0`, and are then added in a fixed pairwise tree. The sum of an
//!   empty array is 0, and the sum of `[-0.0]` is `+0.0`.
//! - `mean` is `sum / len` in the element type; the mean of an empty array is
//!   NaN (0 / 0).
//! - `max`/`min` fold with `f64::max`/`f64::min` from `-inf`/`+inf`, so NaN
//!   elements are ignored; an empty or all-NaN array gives `-inf` (`max`) or
//!   `+inf` (`min`). On integers the fold starts from the type's `MIN`/`MAX`,
//!   which is also the result for an empty array.
//! - `argmax`/`argmin` give the index of the first element equal to the
//!   `max`/`min` above, skipping NaN; an empty or all-NaN array gives 0.
//! - `logsumexp` is `m + ln(sum(exp(x - m)))` with `m` the `max` (the sum in
//!   the lane order above, `exp`/`ln` from [`crate::vmath`]), stable for
//!   large elements. Any NaN element makes it NaN; if `m` is infinite
//!   (including the empty array, where it is `-inf`), the result is `m`.
//! - `softmax` is `exp(x - m) / sum(exp(x - m))`; a NaN element makes every
//!   element NaN, as does an array whose `max` is infinite (as in other libraries);
//!   the softmax of an empty array is empty.

use autobatch_ir::ReduceOp;
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use crate::buffer::{Rows, RowsMut, Values, ValuesMut};
use crate::internal_error;
use crate::scalar::{Float, Integer, MaybeNan};

/// The element type of `op` applied to elements of type `ty`.
pub fn reduce_result_type(op: ReduceOp, ty: ScalarType) -> ScalarType {
    match op {
        ReduceOp::Argmax | ReduceOp::Argmin => ScalarType::Usize,
        _ => ty,
    }
}

/// Applies a reduction to a 1-D array, giving a scalar: [`reduce_rows`] on
/// one row.
pub fn reduce(op: ReduceOp, x: &Tensor) -> Tensor {
    require_vector("reductions", x);
    let mut out = Data::filled(Scalar::zero(reduce_result_type(op, x.elem_type())), 1);
    reduce_rows(
        op,
        Rows::Shared(Values::all(&x.data)),
        RowsMut::one(ValuesMut::all(&mut out)),
    );
    Tensor::scalar(out.get(0))
}

fn require_vector(what: &str, x: &Tensor) {
    if x.shape.len() != 1 {
        internal_error(format!("{what} take a 1-D array, got shape {:?}", x.shape));
    }
}

/// Each row's reduction (the rows of `x`, 1-D) into `out`, one element per
/// row, of the type [`reduce_result_type`] gives.
pub fn reduce_rows(op: ReduceOp, x: Rows<'_>, out: RowsMut<'_>) {
    fn each<T: Copy, R>(x: &[T], row_len: usize, out: &mut [R], f: impl Fn(&[T]) -> R) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = f(&x[k * row_len..(k + 1) * row_len]);
        }
    }
    fn position<T: MaybeNan>(op: ReduceOp, x: &[T], row_len: usize, out: &mut [u64]) {
        if op == ReduceOp::Argmax {
            each(x, row_len, out, |row| argmax(row) as u64)
        } else {
            each(x, row_len, out, |row| argmin(row) as u64)
        }
    }
    fn integer<T: Integer>(op: ReduceOp, x: &[T], row_len: usize, out: &mut [T]) {
        each(x, row_len, out, |row| integer_reduce(op, row))
    }
    let row_len = x.row_len();
    let values = x.values();
    if out.row_len != 1 || out.rows.checked_mul(row_len) != Some(values.len()) {
        internal_error(format!(
            "{op:?} of {} elements in rows of {row_len} into {} rows of {}",
            values.len(),
            out.rows,
            out.row_len
        ));
    }
    if matches!(op, ReduceOp::Argmax | ReduceOp::Argmin) {
        let ValuesMut::Usize(out) = out.values else {
            internal_error(format!("{op:?} into a {} buffer", out.values.ty()))
        };
        return each_values!(Values, values, |v| position(op, v, row_len, out));
    }
    match (values, out.values) {
        (Values::F32(v), ValuesMut::F32(o)) => float_rows_into(op, v, row_len, o),
        (Values::F64(v), ValuesMut::F64(o)) => float_rows_into(op, v, row_len, o),
        (Values::I32(v), ValuesMut::I32(o)) => integer(op, v, row_len, o),
        (Values::I64(v), ValuesMut::I64(o)) => integer(op, v, row_len, o),
        (Values::Usize(v), ValuesMut::Usize(o)) => integer(op, v, row_len, o),
        (x, o) => internal_error(format!("{op:?} of {} into {}", x.ty(), o.ty())),
    }
}

/// `sum`, `mean`, `max`, `min` or `logsumexp` of each row of `x`.
fn float_rows_into<F: Float>(op: ReduceOp, x: &[F], row_len: usize, out: &mut [F]) {
    match op {
        ReduceOp::Sum => sum_rows_into(x, row_len, out),
        ReduceOp::Mean => mean_rows_into(x, row_len, out),
        ReduceOp::Max => max_rows_into(x, row_len, out),
        ReduceOp::Min => min_rows_into(x, row_len, out),
        ReduceOp::LogSumExp => logsumexp_rows_into(x, row_len, out),
        ReduceOp::Argmax | ReduceOp::Argmin => {
            internal_error(format!("{op:?} does not give a float"))
        }
    }
}

/// A float reduction of one row fed a piece at a time, in order (`sum`,
/// `mean`, `max`, `min`): [`Piecewise::finish`] gives the bits of the
/// reduction of the whole row, as long as every piece but the last has a
/// multiple of [`Piecewise::PIECE_MULTIPLE`] elements (the sums carry their
/// lane partials from piece to piece, `max` and `min` their fold).
#[derive(Clone, Copy, Debug)]
pub enum Piecewise {
    F32(Pieces<f32>),
    F64(Pieces<f64>),
}

/// [`Piecewise`] of one element type.
#[derive(Clone, Copy, Debug)]
pub struct Pieces<F> {
    op: ReduceOp,
    sum: crate::gemm::LaneSum<F>,
    /// The `max` or `min` so far.
    fold: F,
    len: usize,
}

impl<F: Float + crate::gemm::GemmFloat> Pieces<F> {
    fn new(op: ReduceOp) -> Pieces<F> {
        let fold = match op {
            ReduceOp::Min => F::INFINITY,
            _ => F::NEG_INFINITY,
        };
        Pieces {
            op,
            sum: crate::gemm::LaneSum::new(),
            fold,
            len: 0,
        }
    }

    fn add(&mut self, piece: &[F]) {
        self.len += piece.len();
        match self.op {
            ReduceOp::Sum | ReduceOp::Mean => self.sum.add(piece),
            ReduceOp::Max => self.fold = piece.iter().fold(self.fold, |acc, &x| acc.max(x)),
            ReduceOp::Min => self.fold = piece.iter().fold(self.fold, |acc, &x| acc.min(x)),
            op => internal_error(format!("{op:?} is not reduced piecewise")),
        }
    }

    fn finish(&self) -> F {
        match self.op {
            ReduceOp::Sum => self.sum.finish(),
            ReduceOp::Mean => self.sum.finish() / F::from_count(self.len),
            _ => self.fold,
        }
    }
}

impl Piecewise {
    /// Every piece but the last is a multiple of this many elements.
    pub const PIECE_MULTIPLE: usize = crate::gemm::LaneSum::<f64>::PIECE_MULTIPLE;

    /// The start of `op` over a row of `ty`, if it reduces piecewise.
    pub fn new(op: ReduceOp, ty: ScalarType) -> Option<Piecewise> {
        let piecewise = matches!(
            op,
            ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min
        );
        match ty {
            ScalarType::F32 if piecewise => Some(Piecewise::F32(Pieces::new(op))),
            ScalarType::F64 if piecewise => Some(Piecewise::F64(Pieces::new(op))),
            _ => None,
        }
    }

    /// Adds the next piece of the row.
    pub fn add(&mut self, piece: Values<'_>) {
        match (self, piece) {
            (Piecewise::F32(p), Values::F32(v)) => p.add(v),
            (Piecewise::F64(p), Values::F64(v)) => p.add(v),
            (_, v) => internal_error(format!("a piecewise reduction fed {}", v.ty())),
        }
    }

    /// The reduction of the row, into `out` (one element).
    pub fn finish(&self, out: ValuesMut<'_>) {
        match (self, out) {
            (Piecewise::F32(p), ValuesMut::F32([o])) => *o = p.finish(),
            (Piecewise::F64(p), ValuesMut::F64([o])) => *o = p.finish(),
            (_, o) => internal_error(format!(
                "a piecewise reduction into {} elements of {}",
                o.len(),
                o.ty()
            )),
        }
    }
}

/// `sum`, `max` or `min` of integers.
pub fn integer_reduce<T: Integer>(op: ReduceOp, v: &[T]) -> T {
    match op {
        ReduceOp::Sum => integer_sum(v),
        ReduceOp::Max => v.iter().copied().fold(T::MIN, Ord::max),
        ReduceOp::Min => v.iter().copied().fold(T::MAX, Ord::min),
        _ => internal_error(format!("{op:?} is not defined on integers")),
    }
}

/// The wrapping sum, left to right.
#[inline]
pub fn integer_sum<T: Integer>(v: &[T]) -> T {
    v.iter().fold(T::ZERO, |acc, &x| acc.wrapping_add(x))
}

/// The sum in the lane order of [`crate::gemm::sum`].
#[inline]
pub fn float_sum<F: Float>(v: &[F]) -> F {
    F::lane_sum(v)
}

/// `sum / len`; NaN for an empty array.
#[inline]
pub fn float_mean<F: Float>(v: &[F]) -> F {
    float_sum(v) / F::from_count(v.len())
}

/// The largest element ignoring NaN; `-inf` if there is none.
#[inline]
pub fn float_max<F: Float>(v: &[F]) -> F {
    v.iter().fold(F::NEG_INFINITY, |acc, &x| acc.max(x))
}

/// The smallest element ignoring NaN; `+inf` if there is none.
#[inline]
pub fn float_min<F: Float>(v: &[F]) -> F {
    v.iter().fold(F::INFINITY, |acc, &x| acc.min(x))
}

/// The index of the first largest element, skipping NaN; 0 if there is none.
pub fn argmax<T: MaybeNan>(v: &[T]) -> usize {
    first_extreme(v, |candidate, best| candidate > best)
}

/// The index of the first smallest element, skipping NaN; 0 if there is none.
pub fn argmin<T: MaybeNan>(v: &[T]) -> usize {
    first_extreme(v, |candidate, best| candidate < best)
}

fn first_extreme<T: MaybeNan>(v: &[T], better: impl Fn(T, T) -> bool) -> usize {
    let mut best: Option<(usize, T)> = None;
    for (index, &x) in v.iter().enumerate() {
        if x.is_unordered() {
            continue;
        }
        match best {
            Some((_, value)) if !better(x, value) => {}
            _ => best = Some((index, x)),
        }
    }
    best.map_or(0, |(index, _)| index)
}

/// `ln(sum(exp(x)))`, computed as `m + ln(sum(exp(x - m)))` with `m` the
/// largest element so that no `exp` overflows.
pub fn logsumexp<F: Float>(v: &[F]) -> F {
    if v.iter().any(|x| x.is_nan()) {
        return F::NAN;
    }
    let m = float_max(v);
    if !m.is_finite() {
        return m;
    }
    m + F::lane_sum_exp(v, m).ln()
}

/// The softmax of a 1-D float array: [`softmax_rows`] on one row.
pub fn softmax(x: &Tensor) -> Tensor {
    require_vector("softmax", x);
    let mut out = Data::filled(Scalar::zero(x.elem_type()), x.len());
    softmax_rows(
        Rows::Shared(Values::all(&x.data)),
        RowsMut::one(ValuesMut::all(&mut out)),
    );
    Tensor::new(x.shape.clone(), out)
}

/// The softmax of each (1-D, float) row of `x` into `out`.
pub fn softmax_rows(x: Rows<'_>, out: RowsMut<'_>) {
    let row_len = x.row_len();
    match (x.values(), out.values) {
        (Values::F32(x), ValuesMut::F32(out)) => softmax_rows_into(x, row_len, out),
        (Values::F64(x), ValuesMut::F64(out)) => softmax_rows_into(x, row_len, out),
        (x, _) => internal_error(format!("softmax needs floats, got {}", x.ty())),
    }
}

/// `exp(x - m) / sum(exp(x - m))` with `m` the largest element.
pub fn softmax_values<F: Float>(v: &[F]) -> Vec<F> {
    let mut out = vec![F::ZERO; v.len()];
    softmax_into(v, &mut out);
    out
}

/// [`softmax_values`] written into `out` (`out.len() == v.len()`), without allocating.
pub fn softmax_into<F: Float>(v: &[F], out: &mut [F]) {
    if v.len() != out.len() {
        internal_error(format!(
            "softmax_into: input length {} and output length {} differ",
            v.len(),
            out.len()
        ));
    }
    let m = float_max(v);
    for (o, &x) in out.iter_mut().zip(v) {
        *o = (x - m).exp();
    }
    let total = F::lane_sum(out);
    for o in out.iter_mut() {
        *o = *o / total;
    }
}

/// The rows of `x` (`out.len()` rows of `row_len`), for the row-wise functions.
fn rows<'a, F>(
    what: &str,
    x: &'a [F],
    row_len: usize,
    rows: usize,
) -> impl Iterator<Item = &'a [F]> {
    match rows.checked_mul(row_len) {
        Some(len) if len == x.len() => {}
        _ => internal_error(format!(
            "{what}: {} elements are not {rows} rows of {row_len}",
            x.len()
        )),
    }
    (0..rows).map(move |r| &x[r * row_len..(r + 1) * row_len])
}

macro_rules! row_wise {
    ($($(#[$doc:meta])* $name:ident => $per_row:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name<F: Float>(x: &[F], row_len: usize, out: &mut [F]) {
                let n = out.len();
                for (o, row) in out.iter_mut().zip(rows(stringify!($name), x, row_len, n)) {
                    *o = $per_row(row);
                }
            }
        )*
    };
}

row_wise! {
    /// `out[r] = float_sum(row r)` for the `out.len()` rows of `row_len` in `x`.
    sum_rows_into => float_sum;
    /// `out[r] = float_mean(row r)`.
    mean_rows_into => float_mean;
    /// `out[r] = float_max(row r)`.
    max_rows_into => float_max;
    /// `out[r] = float_min(row r)`.
    min_rows_into => float_min;
    /// `out[r] = logsumexp(row r)`.
    logsumexp_rows_into => logsumexp;
}

/// The softmax of every row of `row_len` in `x`, into `out` (same length as `x`).
pub fn softmax_rows_into<F: Float>(x: &[F], row_len: usize, out: &mut [F]) {
    if x.len() != out.len() {
        internal_error(format!(
            "softmax_rows_into: input length {} and output length {} differ",
            x.len(),
            out.len()
        ));
    }
    if row_len == 0 {
        return;
    }
    for (row, o) in x.chunks(row_len).zip(out.chunks_mut(row_len)) {
        if row.len() != row_len {
            internal_error(format!(
                "softmax_rows_into: {} elements are not rows of {row_len}",
                x.len()
            ));
        }
        softmax_into(row, o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce_one<F: Float>(op: ReduceOp, v: &[F]) -> F {
        match op {
            ReduceOp::Sum => float_sum(v),
            ReduceOp::Mean => float_mean(v),
            ReduceOp::Max => float_max(v),
            _ => float_min(v),
        }
    }

    /// A row fed in pieces (multiples of 8, the last any length) gives the
    /// bits of the row reduced whole, NaN, infinities and signed zeros
    /// included.
    #[test]
    fn piecewise_reductions_give_the_bits_of_the_whole_row() {
        let row: Vec<f64> = (0..203)
            .map(|i| match i {
                17 => f64::NAN,
                40 => f64::INFINITY,
                41 => -0.0,
                _ => ((i * 7919 % 1001) as f64 - 500.0) * 1e-3,
            })
            .collect();
        let rows32: Vec<f32> = row.iter().map(|&x| x as f32).collect();
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            for len in [0, 1, 7, 8, 9, 64, 100, 203] {
                for piece in [8, 16, 24, 96] {
                    let whole = [reduce_one(op, &row[..len])];
                    let mut p = Piecewise::new(op, ScalarType::F64).unwrap();
                    for chunk in row[..len].chunks(piece) {
                        p.add(Values::F64(chunk));
                    }
                    let mut got = [0.0f64];
                    p.finish(ValuesMut::F64(&mut got));
                    assert_eq!(
                        got[0].to_bits(),
                        whole[0].to_bits(),
                        "{op:?} {len} by {piece}"
                    );
                    let whole32 = [reduce_one(op, &rows32[..len])];
                    let mut p = Piecewise::new(op, ScalarType::F32).unwrap();
                    for chunk in rows32[..len].chunks(piece) {
                        p.add(Values::F32(chunk));
                    }
                    let mut got32 = [0.0f32];
                    p.finish(ValuesMut::F32(&mut got32));
                    assert_eq!(
                        got32[0].to_bits(),
                        whole32[0].to_bits(),
                        "f32 {op:?} {len} by {piece}"
                    );
                }
            }
        }
        assert!(Piecewise::new(ReduceOp::LogSumExp, ScalarType::F64).is_none());
        assert!(Piecewise::new(ReduceOp::Sum, ScalarType::I64).is_none());
    }

    fn vector(data: Data) -> Tensor {
        Tensor::new(vec![data.len()], data)
    }
    fn r(op: ReduceOp, data: Data) -> Scalar {
        reduce(op, &vector(data)).as_scalar()
    }

    #[test]
    fn sums_on_every_numeric_type() {
        assert_eq!(
            r(ReduceOp::Sum, Data::I32(vec![i32::MAX, 1, 5])),
            Scalar::I32(i32::MIN + 5)
        );
        assert_eq!(r(ReduceOp::Sum, Data::I64(vec![1, -2, 3])), Scalar::I64(2));
        assert_eq!(
            r(ReduceOp::Sum, Data::Usize(vec![u64::MAX, 2])),
            Scalar::Usize(1)
        );
        assert_eq!(
            r(ReduceOp::Sum, Data::F32(vec![0.5, 0.25])),
            Scalar::F32(0.75)
        );
        assert_eq!(
            r(ReduceOp::Sum, Data::F64(vec![0.1, 0.2, 0.3])),
            Scalar::F64(0.1 + 0.2 + 0.3)
        );
        // Lane order (f64 has 4 lanes): (1e308 + -1e308) + (1e308 + 0), no overflow.
        assert_eq!(
            r(ReduceOp::Sum, Data::F64(vec![1e308, 1e308, -1e308])),
            Scalar::F64(1e308)
        );
        assert_eq!(
            r(ReduceOp::Sum, Data::F64(vec![1e308, 0.0, 0.0, 0.0, 1e308])),
            Scalar::F64(f64::INFINITY)
        );
    }

    #[test]
    fn empty_reductions() {
        assert_eq!(r(ReduceOp::Sum, Data::I64(vec![])), Scalar::I64(0));
        assert_eq!(r(ReduceOp::Sum, Data::F64(vec![])), Scalar::F64(0.0));
        let Scalar::F64(sum) = r(ReduceOp::Sum, Data::F64(vec![-0.0])) else {
            panic!()
        };
        assert!(sum.is_sign_positive());
        let Scalar::F64(mean) = r(ReduceOp::Mean, Data::F64(vec![])) else {
            panic!()
        };
        assert!(mean.is_nan());
        assert_eq!(
            r(ReduceOp::Max, Data::F64(vec![])),
            Scalar::F64(f64::NEG_INFINITY)
        );
        assert_eq!(
            r(ReduceOp::Min, Data::F32(vec![])),
            Scalar::F32(f32::INFINITY)
        );
        assert_eq!(r(ReduceOp::Max, Data::I32(vec![])), Scalar::I32(i32::MIN));
        assert_eq!(r(ReduceOp::Min, Data::I64(vec![])), Scalar::I64(i64::MAX));
        assert_eq!(r(ReduceOp::Max, Data::Usize(vec![])), Scalar::Usize(0));
        assert_eq!(
            r(ReduceOp::Min, Data::Usize(vec![])),
            Scalar::Usize(u64::MAX)
        );
        assert_eq!(r(ReduceOp::Argmax, Data::F64(vec![])), Scalar::Usize(0));
        assert_eq!(r(ReduceOp::Argmin, Data::I64(vec![])), Scalar::Usize(0));
        assert_eq!(
            r(ReduceOp::LogSumExp, Data::F64(vec![])),
            Scalar::F64(f64::NEG_INFINITY)
        );
        assert_eq!(
            softmax(&vector(Data::F64(vec![]))),
            vector(Data::F64(vec![]))
        );
    }

    #[test]
    fn mean_in_the_element_type() {
        assert_eq!(
            r(ReduceOp::Mean, Data::F64(vec![1.0, 2.0, 4.0])),
            Scalar::F64(7.0 / 3.0)
        );
        assert_eq!(
            r(ReduceOp::Mean, Data::F32(vec![1.0, 2.0, 4.0])),
            Scalar::F32(7.0f32 / 3.0)
        );
    }

    #[test]
    fn max_and_min_ignore_nan() {
        let v = Data::F64(vec![f64::NAN, 3.0, f64::NAN, -1.0, 3.0]);
        assert_eq!(r(ReduceOp::Max, v.clone()), Scalar::F64(3.0));
        assert_eq!(r(ReduceOp::Min, v.clone()), Scalar::F64(-1.0));
        assert_eq!(r(ReduceOp::Argmax, v.clone()), Scalar::Usize(1));
        assert_eq!(r(ReduceOp::Argmin, v), Scalar::Usize(3));
        let all_nan = Data::F32(vec![f32::NAN, f32::NAN]);
        assert_eq!(
            r(ReduceOp::Max, all_nan.clone()),
            Scalar::F32(f32::NEG_INFINITY)
        );
        assert_eq!(r(ReduceOp::Argmax, all_nan.clone()), Scalar::Usize(0));
        assert_eq!(r(ReduceOp::Argmin, all_nan), Scalar::Usize(0));
        let with_infinities = Data::F64(vec![f64::NAN, f64::NEG_INFINITY, f64::NEG_INFINITY]);
        assert_eq!(
            r(ReduceOp::Argmax, with_infinities.clone()),
            Scalar::Usize(1)
        );
        assert_eq!(r(ReduceOp::Argmin, with_infinities), Scalar::Usize(1));
    }

    #[test]
    fn integer_max_min_and_first_occurrence() {
        let v = Data::I64(vec![2, 7, -3, 7, -3]);
        assert_eq!(r(ReduceOp::Max, v.clone()), Scalar::I64(7));
        assert_eq!(r(ReduceOp::Min, v.clone()), Scalar::I64(-3));
        assert_eq!(r(ReduceOp::Argmax, v.clone()), Scalar::Usize(1));
        assert_eq!(r(ReduceOp::Argmin, v), Scalar::Usize(2));
        assert_eq!(
            r(ReduceOp::Argmax, Data::I32(vec![i32::MIN, i32::MIN])),
            Scalar::Usize(0)
        );
        assert_eq!(
            r(ReduceOp::Max, Data::I32(vec![i32::MIN, -4])),
            Scalar::I32(-4)
        );
        assert_eq!(
            r(ReduceOp::Argmin, Data::Usize(vec![5, 0, 0])),
            Scalar::Usize(1)
        );
        assert_eq!(
            r(ReduceOp::Max, Data::Usize(vec![5, 9, 0])),
            Scalar::Usize(9)
        );
        assert_eq!(
            r(ReduceOp::Argmax, Data::Bool(vec![false, true, true])),
            Scalar::Usize(1)
        );
        assert_eq!(
            r(ReduceOp::Argmin, Data::Bool(vec![true, false, false])),
            Scalar::Usize(1)
        );
        assert_eq!(
            r(ReduceOp::Argmax, Data::F32(vec![1.0, 2.0, 2.0])),
            Scalar::Usize(1)
        );
    }

    #[test]
    fn logsumexp_is_stable() {
        let Scalar::F64(got) = r(ReduceOp::LogSumExp, Data::F64(vec![1000.0, 1000.0])) else {
            panic!()
        };
        assert!((got - (1000.0 + 2f64.ln())).abs() < 1e-12);
        let Scalar::F64(got) = r(ReduceOp::LogSumExp, Data::F64(vec![-1000.0, -1000.0])) else {
            panic!()
        };
        assert!((got - (-1000.0 + 2f64.ln())).abs() < 1e-12);
        let Scalar::F64(got) = r(ReduceOp::LogSumExp, Data::F64(vec![1.0, 2.0, 3.0])) else {
            panic!()
        };
        assert!((got - (1f64.exp() + 2f64.exp() + 3f64.exp()).ln()).abs() < 1e-12);
        let Scalar::F32(got) = r(ReduceOp::LogSumExp, Data::F32(vec![0.0, 0.0])) else {
            panic!()
        };
        assert!((got - 2f32.ln()).abs() < 1e-6);
        assert_eq!(
            r(ReduceOp::LogSumExp, Data::F64(vec![f64::NEG_INFINITY; 2])),
            Scalar::F64(f64::NEG_INFINITY)
        );
        assert_eq!(
            r(ReduceOp::LogSumExp, Data::F64(vec![1.0, f64::INFINITY])),
            Scalar::F64(f64::INFINITY)
        );
        assert_eq!(
            r(ReduceOp::LogSumExp, Data::F64(vec![f64::NEG_INFINITY, 0.0])),
            Scalar::F64(0.0)
        );
        let Scalar::F64(got) = r(ReduceOp::LogSumExp, Data::F64(vec![1.0, f64::NAN])) else {
            panic!()
        };
        assert!(got.is_nan());
    }

    #[test]
    fn softmax_is_stable_and_sums_to_one() {
        let s = softmax(&vector(Data::F64(vec![1000.0, 1000.0, f64::NEG_INFINITY])));
        assert_eq!(s, vector(Data::F64(vec![0.5, 0.5, 0.0])));
        let Data::F64(p) = softmax(&vector(Data::F64(vec![1.0, 2.0, 3.0]))).data else {
            panic!()
        };
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert!((p[2] / p[1] - 1f64.exp()).abs() < 1e-12);
        let Data::F32(p) = softmax(&vector(Data::F32(vec![-1e4, 0.0]))).data else {
            panic!()
        };
        assert_eq!(p, vec![0.0, 1.0]);
        let Data::F64(p) = softmax(&vector(Data::F64(vec![1.0, f64::NAN]))).data else {
            panic!()
        };
        assert!(p.iter().all(|x| x.is_nan()));
    }
}
