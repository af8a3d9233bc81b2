//! Elementwise primitives: unary and binary operations, comparisons, casts
//! and `select`.
//!
//! Broadcasting has one rule: a scalar operand (empty shape) pairs with every
//! element of the other operand; two arrays must have the same shape. The
//! meaning of each element is a function of [`crate::scalar`]; this module
//! only walks the elements, in row-major order.
//!
//! Every operation exists in three forms over one core: `*_into` writes
//! into a view of a buffer the caller owns ([`Values`] / [`ValuesMut`]); the
//! tensor form (what [`crate::eval`] calls for one member) is the `_into`
//! form on a fresh buffer; the batched form `*_rows` (what a backend runs
//! for a column of rows, [`Rows`] / [`RowsMut`]) calls the `_into` form
//! once over all rows, or once per row when an operand is broadcast within
//! each row (a per-member scalar, or a shared array, against per-member
//! arrays). So all three give the same bits.
//!
//! The float operations run compiled for the CPU's widest path
//! ([`float_binary_on`], [`float_unary_on`]: AVX-512, AVX2, portable,
//! chosen at run time), with the same bits on every path.
//!
//! When an integer division faults, the whole operation faults with the first
//! zero divisor met in row-major order (all faults of one kind read the same,
//! so which element is first does not show in the message). The `_into`
//! and `_rows` forms may then have written part of their output.

use std::convert::Infallible;

use autobatch_ir::{BinaryOp, CompareOp, TernaryOp, UnaryOp};
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use crate::buffer::{Rows, RowsMut, Values, ValuesMut};
use crate::gemm::Path;
use crate::scalar::{self, CastScalar, DivisionByZero, Float, Integer};
use crate::{internal_error, vmath, Fault};

/// The elements of one operand, and whether it is a scalar to broadcast.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a, T> {
    pub values: &'a [T],
    pub broadcast: bool,
}

impl<'a, T: Copy> Operand<'a, T> {
    /// The elements of `tensor`, whose buffer is `values`.
    pub fn of(tensor: &Tensor, values: &'a [T]) -> Operand<'a, T> {
        Operand {
            values,
            broadcast: tensor.is_scalar(),
        }
    }
}

/// `out[k] = f(values[k])`; `out` has the length of `values`.
#[inline]
pub fn map_into<T: Copy, R>(values: &[T], out: &mut [R], mut f: impl FnMut(T) -> R) {
    for (o, &x) in out.iter_mut().zip(values) {
        *o = f(x);
    }
}

/// `out[k] = f(a[k], b[k])`, a broadcast operand repeating its one value;
/// `out` has the length of the result.
#[inline]
pub fn zip_into<A: Copy, B: Copy, R>(
    a: Operand<'_, A>,
    b: Operand<'_, B>,
    out: &mut [R],
    mut f: impl FnMut(A, B) -> R,
) {
    match (a.broadcast, b.broadcast) {
        (true, false) => {
            let x = a.values[0];
            map_into(b.values, out, |y| f(x, y));
        }
        (false, true) => {
            let y = b.values[0];
            map_into(a.values, out, |x| f(x, y));
        }
        _ => {
            for ((o, &x), &y) in out.iter_mut().zip(a.values).zip(b.values) {
                *o = f(x, y);
            }
        }
    }
}

/// As [`zip_into`] for a function that may fault; stops at the first fault.
#[inline]
pub fn try_zip_into<A: Copy, B: Copy, R, E>(
    a: Operand<'_, A>,
    b: Operand<'_, B>,
    out: &mut [R],
    mut f: impl FnMut(A, B) -> Result<R, E>,
) -> Result<(), E> {
    let n = out.len();
    for (k, o) in out.iter_mut().enumerate().take(n) {
        let x = a.values[if a.broadcast { 0 } else { k }];
        let y = b.values[if b.broadcast { 0 } else { k }];
        *o = f(x, y)?;
    }
    Ok(())
}

/// The shape of the result of a broadcasting operation on `a` and `b`.
pub fn broadcast_shape(what: &str, a: &Tensor, b: &Tensor) -> Vec<usize> {
    if a.is_scalar() {
        b.shape.clone()
    } else if b.is_scalar() || a.shape == b.shape {
        a.shape.clone()
    } else {
        internal_error(format!(
            "{what}: operand shapes {:?} and {:?} differ",
            a.shape, b.shape
        ))
    }
}

/// An operand of an elementwise operation on views: elements, and whether
/// the one element pairs with every element of the other operands.
#[derive(Clone, Copy, Debug)]
pub struct DataOperand<'a> {
    pub values: Values<'a>,
    pub broadcast: bool,
}

impl<'a> DataOperand<'a> {
    pub fn array(values: Values<'a>) -> DataOperand<'a> {
        DataOperand {
            values,
            broadcast: false,
        }
    }

    pub fn scalar(values: Values<'a>) -> DataOperand<'a> {
        DataOperand {
            values,
            broadcast: true,
        }
    }

    fn of(tensor: &'a Tensor) -> DataOperand<'a> {
        DataOperand {
            values: Values::all(&tensor.data),
            broadcast: tensor.is_scalar(),
        }
    }
}

// ---------------------------------------------------------------------------
// Unary operations.

/// The element type of `op` applied to elements of type `ty`.
pub fn unary_result_type(op: UnaryOp, ty: ScalarType) -> ScalarType {
    match op {
        UnaryOp::IsNan | UnaryOp::IsFinite => ScalarType::Bool,
        _ => ty,
    }
}

/// A unary elementwise operation; the result has the operand's shape.
pub fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    let mut out = Data::filled(Scalar::zero(unary_result_type(op, x.elem_type())), x.len());
    unary_into(op, Values::all(&x.data), ValuesMut::all(&mut out));
    Tensor::new(x.shape.clone(), out)
}

/// `out[k] = op(x[k])`; `out` has `x`'s length and the result type
/// ([`unary_result_type`]).
pub fn unary_into(op: UnaryOp, x: Values<'_>, out: ValuesMut<'_>) {
    match (x, out) {
        (Values::Bool(v), ValuesMut::Bool(o)) if op == UnaryOp::Not => {
            map_into(v, o, scalar::bool_not)
        }
        (Values::I32(v), ValuesMut::I32(o)) => integer_unary_into(op, v, o),
        (Values::I64(v), ValuesMut::I64(o)) => integer_unary_into(op, v, o),
        (Values::Usize(v), ValuesMut::Usize(o)) => integer_unary_into(op, v, o),
        // The transcendental functions run vectorized (`vmath` gives each
        // element the bits of its scalar function), the rest element by element.
        (Values::F32(v), ValuesMut::F32(o)) => {
            if !vmath::apply_f32(op, v, o) {
                float_unary_on(Path::detected(), op, v, o)
            }
        }
        (Values::F64(v), ValuesMut::F64(o)) => {
            if !vmath::apply_f64(op, v, o) {
                float_unary_on(Path::detected(), op, v, o)
            }
        }
        (Values::F32(v), ValuesMut::Bool(o)) => float_predicate_into(op, v, o),
        (Values::F64(v), ValuesMut::Bool(o)) => float_predicate_into(op, v, o),
        (x, _) => internal_error(format!("{op:?} is not defined on {} here", x.ty())),
    }
}

fn float_predicate_into<F: Float>(op: UnaryOp, v: &[F], out: &mut [bool]) {
    match op {
        UnaryOp::IsNan => map_into(v, out, F::is_nan),
        UnaryOp::IsFinite => map_into(v, out, F::is_finite),
        _ => internal_error(format!("{op:?} does not map floats to bool")),
    }
}

/// A unary operation on integers of one type (`neg`, `not`, `abs`), into
/// `out` (of `v`'s length).
pub fn integer_unary_into<T: Integer>(op: UnaryOp, v: &[T], out: &mut [T]) {
    match op {
        UnaryOp::Neg => map_into(v, out, scalar::int_neg),
        UnaryOp::Not => map_into(v, out, scalar::int_not),
        UnaryOp::Abs => map_into(v, out, scalar::int_abs),
        _ => internal_error(format!("{op:?} is not defined on integers")),
    }
}

/// A unary operation on floats of one type whose result is of the same
/// type, into `out` (of `v`'s length). The one place that
/// says how each float unary operation is computed. Always inlined, as
/// [`float_binary_into`].
#[inline(always)]
pub fn float_unary_into<F: Float>(op: UnaryOp, v: &[F], out: &mut [F]) {
    match op {
        UnaryOp::Neg => map_into(v, out, scalar::float_neg),
        UnaryOp::Abs => map_into(v, out, F::abs),
        UnaryOp::Exp => map_into(v, out, F::exp),
        UnaryOp::ExpM1 => map_into(v, out, F::exp_m1),
        UnaryOp::Ln => map_into(v, out, F::ln),
        UnaryOp::Ln1p => map_into(v, out, F::ln_1p),
        UnaryOp::Log10 => map_into(v, out, F::log10),
        UnaryOp::Sqrt => map_into(v, out, F::sqrt),
        UnaryOp::Sin => map_into(v, out, F::sin),
        UnaryOp::Cos => map_into(v, out, F::cos),
        UnaryOp::Tan => map_into(v, out, F::tan),
        UnaryOp::Atan => map_into(v, out, F::atan),
        UnaryOp::Tanh => map_into(v, out, F::tanh),
        UnaryOp::Floor => map_into(v, out, F::floor),
        UnaryOp::Ceil => map_into(v, out, F::ceil),
        UnaryOp::Round => map_into(v, out, F::round),
        UnaryOp::Signum => map_into(v, out, F::signum),
        UnaryOp::Recip => map_into(v, out, F::recip),
        UnaryOp::Sigmoid => map_into(v, out, scalar::sigmoid),
        UnaryOp::LogSigmoid => map_into(v, out, scalar::log_sigmoid),
        UnaryOp::Softplus => map_into(v, out, scalar::softplus),
        UnaryOp::Lgamma => map_into(v, out, scalar::lgamma),
        UnaryOp::Digamma => map_into(v, out, scalar::digamma),
        UnaryOp::Trigamma => map_into(v, out, scalar::trigamma),
        UnaryOp::Erf => map_into(v, out, scalar::erf),
        UnaryOp::Erfc => map_into(v, out, scalar::erfc),
        UnaryOp::Phi => map_into(v, out, scalar::phi),
        UnaryOp::InvPhi => map_into(v, out, scalar::inv_phi),
        UnaryOp::LogBesselI0e => map_into(v, out, scalar::log_bessel_i0e),
        UnaryOp::BesselI1OverI0 => map_into(v, out, scalar::bessel_i1_over_i0),
        UnaryOp::Not | UnaryOp::IsNan | UnaryOp::IsFinite => {
            internal_error(format!("{op:?} does not map floats to floats"))
        }
    }
}

// ---------------------------------------------------------------------------
// Binary operations.

/// A binary elementwise operation with broadcasting. Faults only for an
/// integer `/` or `%` by zero.
pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor, Fault> {
    let shape = broadcast_shape(binary_name(op), a, b);
    let len = shape.iter().product();
    let mut out = Data::filled(Scalar::zero(a.elem_type()), len);
    binary_into(
        op,
        DataOperand::of(a),
        DataOperand::of(b),
        ValuesMut::all(&mut out),
    )?;
    Ok(Tensor::new(shape, out))
}

/// `out[k] = a[k] op b[k]` with broadcasting; `out` has the result's length
/// and the left operand's type. Faults only for an integer `/` or `%` by zero.
pub fn binary_into(
    op: BinaryOp,
    a: DataOperand<'_>,
    b: DataOperand<'_>,
    out: ValuesMut<'_>,
) -> Result<(), Fault> {
    fn typed<'a, T>(o: &DataOperand<'a>, values: &'a [T]) -> Operand<'a, T> {
        Operand {
            values,
            broadcast: o.broadcast,
        }
    }
    match op {
        // The right operand of these may have another type than the left one.
        BinaryOp::Shl | BinaryOp::Shr | BinaryOp::Pow => match (a.values, out) {
            (Values::I32(x), ValuesMut::I32(o)) => integer_by_integer(op, typed(&a, x), b, o),
            (Values::I64(x), ValuesMut::I64(o)) => integer_by_integer(op, typed(&a, x), b, o),
            (Values::Usize(x), ValuesMut::Usize(o)) => integer_by_integer(op, typed(&a, x), b, o),
            (other, _) => internal_error(format!(
                "{} needs integers, got {}",
                binary_name(op),
                other.ty()
            )),
        },
        BinaryOp::Powi => {
            let Values::I32(exponents) = b.values else {
                internal_error(format!("powi needs i32 exponents, got {}", b.values.ty()))
            };
            let exponents = typed(&b, exponents);
            match (a.values, out) {
                (Values::F32(x), ValuesMut::F32(o)) => {
                    zip_into(typed(&a, x), exponents, o, scalar::float_powi)
                }
                (Values::F64(x), ValuesMut::F64(o)) => {
                    zip_into(typed(&a, x), exponents, o, scalar::float_powi)
                }
                (other, _) => internal_error(format!("powi needs floats, got {}", other.ty())),
            }
        }
        _ => match (a.values, b.values, out) {
            (Values::Bool(x), Values::Bool(y), ValuesMut::Bool(o)) => {
                bool_binary_into(op, typed(&a, x), typed(&b, y), o)
            }
            (Values::I32(x), Values::I32(y), ValuesMut::I32(o)) => {
                integer_binary_into(op, typed(&a, x), typed(&b, y), o)?
            }
            (Values::I64(x), Values::I64(y), ValuesMut::I64(o)) => {
                integer_binary_into(op, typed(&a, x), typed(&b, y), o)?
            }
            (Values::Usize(x), Values::Usize(y), ValuesMut::Usize(o)) => {
                integer_binary_into(op, typed(&a, x), typed(&b, y), o)?
            }
            (Values::F32(x), Values::F32(y), ValuesMut::F32(o)) => {
                float_binary_on(Path::detected(), op, typed(&a, x), typed(&b, y), o)
            }
            (Values::F64(x), Values::F64(y), ValuesMut::F64(o)) => {
                float_binary_on(Path::detected(), op, typed(&a, x), typed(&b, y), o)
            }
            (x, y, _) => internal_error(format!(
                "{}: operand types {} and {} differ",
                binary_name(op),
                x.ty(),
                y.ty()
            )),
        },
    }
    Ok(())
}

fn binary_name(op: BinaryOp) -> &'static str {
    autobatch_ir::Prim::Binary(op).name()
}

/// `&`, `|`, `^` on `bool`, into `out`.
pub fn bool_binary_into(
    op: BinaryOp,
    a: Operand<'_, bool>,
    b: Operand<'_, bool>,
    out: &mut [bool],
) {
    match op {
        BinaryOp::BitAnd => zip_into(a, b, out, scalar::bool_and),
        BinaryOp::BitOr => zip_into(a, b, out, scalar::bool_or),
        BinaryOp::BitXor => zip_into(a, b, out, scalar::bool_xor),
        _ => internal_error(format!("{} is not defined on bool", binary_name(op))),
    }
}

/// A binary operation on two integers of one type, into `out`.
pub fn integer_binary_into<T: Integer>(
    op: BinaryOp,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [T],
) -> Result<(), Fault> {
    match op {
        BinaryOp::Add => zip_into(a, b, out, scalar::int_add),
        BinaryOp::Sub => zip_into(a, b, out, scalar::int_sub),
        BinaryOp::Mul => zip_into(a, b, out, scalar::int_mul),
        BinaryOp::Div => try_zip_into(a, b, out, scalar::int_div)
            .map_err(|DivisionByZero| Fault::division_by_zero())?,
        BinaryOp::Rem => try_zip_into(a, b, out, scalar::int_rem)
            .map_err(|DivisionByZero| Fault::remainder_by_zero())?,
        BinaryOp::BitAnd => zip_into(a, b, out, scalar::int_bit_and),
        BinaryOp::BitOr => zip_into(a, b, out, scalar::int_bit_or),
        BinaryOp::BitXor => zip_into(a, b, out, scalar::int_bit_xor),
        BinaryOp::Max => zip_into(a, b, out, scalar::int_max),
        BinaryOp::Min => zip_into(a, b, out, scalar::int_min),
        BinaryOp::Shl | BinaryOp::Shr | BinaryOp::Pow => shift_or_pow(op, a, b, out),
        BinaryOp::Powi
        | BinaryOp::Powf
        | BinaryOp::Atan2
        | BinaryOp::LogGammaP
        | BinaryOp::LogGammaQ
        | BinaryOp::LogGammaPDa
        | BinaryOp::LogGammaQDa
        | BinaryOp::LogGammaPInv
        | BinaryOp::PoissonInv
        | BinaryOp::VonMisesDraw
        | BinaryOp::Lbeta => internal_error(format!("{} needs floats", binary_name(op))),
    }
    Ok(())
}

/// A binary operation on two floats of one type, into `out`. Always
/// inlined, so that [`float_binary_on`]'s AVX-512 and AVX2 copies compile
/// its loops for their vectors (called, it would run its own baseline code).
#[inline(always)]
pub fn float_binary_into<F: Float>(
    op: BinaryOp,
    a: Operand<'_, F>,
    b: Operand<'_, F>,
    out: &mut [F],
) {
    match op {
        BinaryOp::Add => zip_into(a, b, out, scalar::float_add),
        BinaryOp::Sub => zip_into(a, b, out, scalar::float_sub),
        BinaryOp::Mul => zip_into(a, b, out, scalar::float_mul),
        BinaryOp::Div => zip_into(a, b, out, scalar::float_div),
        BinaryOp::Rem => zip_into(a, b, out, scalar::float_rem),
        BinaryOp::Max => zip_into(a, b, out, scalar::float_max),
        BinaryOp::Min => zip_into(a, b, out, scalar::float_min),
        BinaryOp::Powf => zip_into(a, b, out, scalar::float_powf),
        BinaryOp::Atan2 => zip_into(a, b, out, scalar::float_atan2),
        BinaryOp::LogGammaP => zip_into(a, b, out, scalar::log_gamma_p),
        BinaryOp::LogGammaQ => zip_into(a, b, out, scalar::log_gamma_q),
        BinaryOp::LogGammaPDa => zip_into(a, b, out, scalar::log_gamma_p_da),
        BinaryOp::LogGammaQDa => zip_into(a, b, out, scalar::log_gamma_q_da),
        BinaryOp::LogGammaPInv => zip_into(a, b, out, scalar::log_gamma_p_inv),
        BinaryOp::PoissonInv => zip_into(a, b, out, scalar::poisson_inv),
        BinaryOp::VonMisesDraw => zip_into(a, b, out, scalar::von_mises_draw),
        BinaryOp::Lbeta => zip_into(a, b, out, scalar::lbeta),
        _ => internal_error(format!("{} is not defined on floats", binary_name(op))),
    }
}

/// Calls `$f` (always inlined) compiled for `$path`: the AVX-512 or the
/// AVX2 and FMA copy when the path is one of those and this CPU runs it,
/// else the portable code.
macro_rules! on_path {
    ($path:expr, $f:ident::<$t:ident>($($arg:ident: $ty:ty),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<$t: Float>($($arg: $ty),*) {
                $f::<$t>($($arg),*)
            }
            #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
            unsafe fn avx512<$t: Float>($($arg: $ty),*) {
                $f::<$t>($($arg),*)
            }
            match $path {
                // SAFETY: the path is available on this CPU (the caller's
                // `Path::detected`, or a test that checked `Path::available`).
                Path::Avx512 if $path.available() => return unsafe { avx512::<$t>($($arg),*) },
                Path::Avx2 if $path.available() => return unsafe { avx2::<$t>($($arg),*) },
                _ => {}
            }
        }
        let _ = $path;
        $f::<$t>($($arg),*)
    }};
}

/// [`float_binary_into`] compiled for a CPU path (AVX-512, AVX2 and FMA, or
/// portable), which must be available on this CPU (see [`Path::available`]).
/// The operations are IEEE's, exactly rounded, and Rust neither contracts
/// nor reassociates them, so every path gives each element the same bits;
/// only the width of the vectors LLVM uses differs.
#[inline]
pub fn float_binary_on<F: Float>(
    path: Path,
    op: BinaryOp,
    a: Operand<'_, F>,
    b: Operand<'_, F>,
    out: &mut [F],
) {
    on_path!(path, float_binary_into::<F>(op: BinaryOp, a: Operand<'_, F>, b: Operand<'_, F>, out: &mut [F]))
}

/// An operand of [`float_binary_rows_on`]: its own row for each row of
/// the result (`Rows`: the rows one after the other), or one row that
/// every row reads (`Shared`).
#[derive(Clone, Copy, Debug)]
enum RowOperand<'a, F> {
    Rows(&'a [F]),
    Shared(&'a [F]),
}

impl<'a, F> RowOperand<'a, F> {
    #[inline(always)]
    fn row(self, r: usize, n: usize) -> Operand<'a, F> {
        let values = match self {
            RowOperand::Rows(v) => &v[r * n..(r + 1) * n],
            RowOperand::Shared(v) => v,
        };
        Operand {
            values,
            broadcast: false,
        }
    }
}

/// [`float_binary_into`] on each row of `out` (rows of `row_len`, at
/// least one element; the operands' rows as long), as one call of
/// [`float_binary_on`] per row gives it, without the per-row dispatch (a
/// shared row against a column runs a call per row: the `Y * z` of a
/// gradient over its members).
#[inline]
fn float_binary_rows_on<F: Float>(
    path: Path,
    op: BinaryOp,
    a: RowOperand<'_, F>,
    b: RowOperand<'_, F>,
    out: &mut [F],
    row_len: usize,
) {
    #[inline(always)]
    fn rows<F: Float>(
        op: BinaryOp,
        a: RowOperand<'_, F>,
        b: RowOperand<'_, F>,
        out: &mut [F],
        n: usize,
    ) {
        for (r, o) in out.chunks_exact_mut(n).enumerate() {
            float_binary_into(op, a.row(r, n), b.row(r, n), o);
        }
    }
    on_path!(path, rows::<F>(op: BinaryOp, a: RowOperand<'_, F>, b: RowOperand<'_, F>, out: &mut [F], row_len: usize))
}

/// [`float_unary_into`] compiled for a CPU path, as [`float_binary_on`].
#[inline]
pub fn float_unary_on<F: Float>(path: Path, op: UnaryOp, v: &[F], out: &mut [F]) {
    on_path!(path, float_unary_into::<F>(op: UnaryOp, v: &[F], out: &mut [F]))
}

/// `<<`, `>>` or `pow` of integers by an amount of any integer type.
fn integer_by_integer<T: Integer>(
    op: BinaryOp,
    a: Operand<'_, T>,
    amount: DataOperand<'_>,
    out: &mut [T],
) {
    let broadcast = amount.broadcast;
    match amount.values {
        Values::I32(values) => shift_or_pow(op, a, Operand { values, broadcast }, out),
        Values::I64(values) => shift_or_pow(op, a, Operand { values, broadcast }, out),
        Values::Usize(values) => shift_or_pow(op, a, Operand { values, broadcast }, out),
        other => internal_error(format!(
            "{} needs an integer right operand, got {}",
            binary_name(op),
            other.ty()
        )),
    }
}

fn shift_or_pow<T: Integer, A: Integer>(
    op: BinaryOp,
    a: Operand<'_, T>,
    amount: Operand<'_, A>,
    out: &mut [T],
) {
    match op {
        BinaryOp::Shl => zip_into(a, amount, out, scalar::int_shl),
        BinaryOp::Shr => zip_into(a, amount, out, scalar::int_shr),
        BinaryOp::Pow => zip_into(a, amount, out, scalar::int_pow),
        _ => internal_error(format!("{} is not a shift", binary_name(op))),
    }
}

// ---------------------------------------------------------------------------
// Comparisons.

/// A comparison of two operands of one type, giving `bool`s. The IR only
/// compares scalars; arrays are compared elementwise with broadcasting.
pub fn compare(op: CompareOp, a: &Tensor, b: &Tensor) -> Tensor {
    let shape = broadcast_shape("comparison", a, b);
    let mut out = vec![false; shape.iter().product()];
    compare_into(op, DataOperand::of(a), DataOperand::of(b), &mut out);
    Tensor::new(shape, Data::Bool(out))
}

/// As [`compare`], into `out` (of the result's length).
pub fn compare_into(op: CompareOp, a: DataOperand<'_>, b: DataOperand<'_>, out: &mut [bool]) {
    fn typed<'a, T>(o: &DataOperand<'a>, values: &'a [T]) -> Operand<'a, T> {
        Operand {
            values,
            broadcast: o.broadcast,
        }
    }
    match (a.values, b.values) {
        (Values::Bool(x), Values::Bool(y)) => {
            compare_into_typed(op, typed(&a, x), typed(&b, y), out)
        }
        (Values::I32(x), Values::I32(y)) => compare_into_typed(op, typed(&a, x), typed(&b, y), out),
        (Values::I64(x), Values::I64(y)) => compare_into_typed(op, typed(&a, x), typed(&b, y), out),
        (Values::Usize(x), Values::Usize(y)) => {
            compare_into_typed(op, typed(&a, x), typed(&b, y), out)
        }
        (Values::F32(x), Values::F32(y)) => compare_into_typed(op, typed(&a, x), typed(&b, y), out),
        (Values::F64(x), Values::F64(y)) => compare_into_typed(op, typed(&a, x), typed(&b, y), out),
        (x, y) => internal_error(format!("comparison of {} with {}", x.ty(), y.ty())),
    }
}

/// A comparison of two operands of one type, elementwise, into `out`.
pub fn compare_into_typed<T: PartialOrd + Copy>(
    op: CompareOp,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [bool],
) {
    match op {
        CompareOp::Eq => zip_into(a, b, out, scalar::compare_eq),
        CompareOp::Ne => zip_into(a, b, out, scalar::compare_ne),
        CompareOp::Lt => zip_into(a, b, out, scalar::compare_lt),
        CompareOp::Le => zip_into(a, b, out, scalar::compare_le),
        CompareOp::Gt => zip_into(a, b, out, scalar::compare_gt),
        CompareOp::Ge => zip_into(a, b, out, scalar::compare_ge),
    }
}

// ---------------------------------------------------------------------------
// Casts and select.

/// Elementwise conversion to `to`, as Rust's `as` (see [`crate::scalar`]).
pub fn cast(to: ScalarType, x: &Tensor) -> Tensor {
    let mut out = Data::filled(Scalar::zero(to), x.len());
    cast_into(Values::all(&x.data), ValuesMut::all(&mut out));
    Tensor::new(x.shape.clone(), out)
}

/// `out[k] = x[k] as (out's type)`.
pub fn cast_into(x: Values<'_>, out: ValuesMut<'_>) {
    each_values!(Values, x, |v| cast_values_into(v, out))
}

/// The elements `v` converted to `out`'s type, into `out`.
pub fn cast_values_into<T: CastScalar>(v: &[T], out: ValuesMut<'_>) {
    match out {
        ValuesMut::Bool(o) => map_into(v, o, T::cast_bool),
        ValuesMut::I32(o) => map_into(v, o, T::cast_i32),
        ValuesMut::I64(o) => map_into(v, o, T::cast_i64),
        ValuesMut::Usize(o) => map_into(v, o, T::cast_usize),
        ValuesMut::F32(o) => map_into(v, o, T::cast_f32),
        ValuesMut::F64(o) => map_into(v, o, T::cast_f64),
    }
}

/// `(cond, a, b)`: `a` where `cond` is true, else `b`. A scalar `cond`
/// chooses a whole operand; an array `cond` chooses element by element.
pub fn select(cond: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let Data::Bool(conditions) = &cond.data else {
        internal_error(format!(
            "select needs a bool condition, got {}",
            cond.data.ty()
        ))
    };
    if a.shape != b.shape {
        internal_error(format!(
            "select: alternatives of shapes {:?} and {:?}",
            a.shape, b.shape
        ));
    }
    if !cond.is_scalar() && cond.shape != a.shape {
        internal_error(format!(
            "select: condition of shape {:?} for operands of shape {:?}",
            cond.shape, a.shape
        ));
    }
    let mut out = Data::filled(Scalar::zero(a.elem_type()), a.len());
    select_into(
        Operand::of(cond, conditions),
        Values::all(&a.data),
        Values::all(&b.data),
        ValuesMut::all(&mut out),
    );
    Tensor::new(a.shape.clone(), out)
}

/// An elementwise operation of three floats of one type and shape.
pub fn ternary(op: TernaryOp, a: &Tensor, b: &Tensor, c: &Tensor) -> Tensor {
    fn each<F: Float>(op: TernaryOp, a: &[F], b: &[F], c: &[F]) -> Vec<F> {
        (0..a.len())
            .map(|k| scalar::ternary(op, a[k], b[k], c[k]))
            .collect()
    }
    if a.shape != b.shape || a.shape != c.shape {
        let shapes = [&a.shape, &b.shape, &c.shape];
        internal_error(format!("{}: operands of shapes {shapes:?}", op.name()));
    }
    let data = match (&a.data, &b.data, &c.data) {
        (Data::F64(x), Data::F64(y), Data::F64(z)) => Data::F64(each(op, x, y, z)),
        (Data::F32(x), Data::F32(y), Data::F32(z)) => Data::F32(each(op, x, y, z)),
        _ => internal_error(format!("{} needs floats of one type", op.name())),
    };
    Tensor::new(a.shape.clone(), data)
}

/// As [`select`], into `out`: a broadcast condition chooses a whole operand.
pub fn select_into(
    cond: Operand<'_, bool>,
    if_true: Values<'_>,
    if_false: Values<'_>,
    out: ValuesMut<'_>,
) {
    macro_rules! typed {
        ($($variant:ident),*) => {
            match (if_true, if_false, out) {
                $((Values::$variant(t), Values::$variant(f), ValuesMut::$variant(o)) => {
                    if cond.broadcast {
                        o.copy_from_slice(if cond.values[0] { t } else { f });
                    } else {
                        select_values_into(cond.values, t, f, o);
                    }
                })*
                (t, f, _) => internal_error(format!(
                    "select: alternatives of types {} and {}",
                    t.ty(),
                    f.ty()
                )),
            }
        };
    }
    typed!(Bool, I32, I64, Usize, F32, F64)
}

/// Elementwise choice: `if_true[k]` where `conditions[k]`, else
/// `if_false[k]`, into `out`.
pub fn select_values_into<T: Copy>(
    conditions: &[bool],
    if_true: &[T],
    if_false: &[T],
    out: &mut [T],
) {
    for (o, (&c, (&t, &f))) in out
        .iter_mut()
        .zip(conditions.iter().zip(if_true.iter().zip(if_false)))
    {
        *o = if c { t } else { f };
    }
}

// ---------------------------------------------------------------------------
// Batched forms: one operation on a column of rows.

/// Runs an elementwise operation on the rows of `out`: in one call over all
/// rows when every operand pairs element by element with the flat result
/// (a column of the result's row length) or is one shared scalar; else row
/// by row, an operand whose row is shorter than the result's (a per-member
/// scalar, a shared scalar) broadcast within the row. Operands from
/// `arrays_from` on (the alternatives of `select`) are never broadcast.
fn on_rows<'a, const N: usize, E>(
    operands: [Rows<'a>; N],
    arrays_from: usize,
    out: RowsMut<'_>,
    mut f: impl FnMut([DataOperand<'a>; N], ValuesMut<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let RowsMut {
        mut values,
        rows,
        row_len,
    } = out;
    // Every operand as it pairs with the flat result, if each does.
    let mut flat = [DataOperand::scalar(Values::Bool(&[])); N];
    let (mut fits, mut any_column) = (true, false);
    for (k, operand) in operands.iter().enumerate() {
        match *operand {
            Rows::Column { values, row_len: n } => {
                any_column = true;
                fits &= n == row_len;
                flat[k] = DataOperand::array(values);
            }
            Rows::Shared(values) => {
                fits &= k < arrays_from && values.len() == 1;
                flat[k] = DataOperand::scalar(values);
            }
        }
    }
    if fits && (any_column || rows * row_len <= 1) {
        return f(flat, values);
    }
    for r in 0..rows {
        let operands = operands.map(|o| {
            let values = o.row(r);
            DataOperand {
                values,
                broadcast: values.len() != row_len,
            }
        });
        f(operands, values.slice(r * row_len..(r + 1) * row_len))?;
    }
    Ok(())
}

fn infallible(done: Result<(), Infallible>) {
    match done {
        Ok(()) => {}
        Err(never) => match never {},
    }
}

/// [`unary_into`] on every row of `x`.
pub fn unary_rows(op: UnaryOp, x: Rows<'_>, out: RowsMut<'_>) {
    infallible(on_rows([x], 1, out, |[x], o| {
        unary_into(op, x.values, o);
        Ok(())
    }))
}

/// `softplus` and `sigmoid` of every row of float `x`, as two
/// [`unary_rows`] calls give them; a column of whole rows runs the vmath
/// pass that shares each element's exponential.
pub fn softplus_sigmoid_rows(x: Rows<'_>, mut softplus: RowsMut<'_>, mut sigmoid: RowsMut<'_>) {
    let whole_rows = softplus.rows == sigmoid.rows
        && softplus.row_len == sigmoid.row_len
        && matches!(x, Rows::Column { row_len, .. } if row_len == softplus.row_len);
    if let (true, Rows::Column { values, .. }) = (whole_rows, x) {
        match (values, &mut softplus.values, &mut sigmoid.values) {
            (Values::F64(v), ValuesMut::F64(p), ValuesMut::F64(s)) if v.len() == p.len() => {
                return vmath::softplus_sigmoid_f64(v, p, s);
            }
            (Values::F32(v), ValuesMut::F32(p), ValuesMut::F32(s)) if v.len() == p.len() => {
                return vmath::softplus_sigmoid_f32(v, p, s);
            }
            _ => {}
        }
    }
    unary_rows(UnaryOp::Softplus, x, softplus);
    unary_rows(UnaryOp::Sigmoid, x, sigmoid);
}

/// [`binary_into`] on every row; faults as it does.
pub fn binary_rows(op: BinaryOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) -> Result<(), Fault> {
    let out = match float_rows(op, a, b, out) {
        Ok(()) => return Ok(()),
        Err(out) => out,
    };
    on_rows([a, b], 2, out, |[a, b], o| binary_into(op, a, b, o))
}

/// A float operation of a shared row and a column, or of two columns, whose
/// rows are all as long as the result's: [`float_binary_rows_on`] (the
/// bits of [`binary_into`] row by row, which on three float operands also
/// takes every operation to [`float_binary_into`]). Else `out` back.
fn float_rows<'o>(
    op: BinaryOp,
    a: Rows<'_>,
    b: Rows<'_>,
    out: RowsMut<'o>,
) -> Result<(), RowsMut<'o>> {
    let n = out.row_len;
    let whole = |x: Rows<'_>| match x {
        Rows::Column { row_len, .. } => row_len == n,
        Rows::Shared(v) => v.len() == n,
    };
    if n <= 1 || out.rows <= 1 || !whole(a) || !whole(b) || a.is_shared() && b.is_shared() {
        return Err(out);
    }
    fn operand<'v, F>(x: Rows<'_>, values: &'v [F]) -> RowOperand<'v, F> {
        match x {
            Rows::Column { .. } => RowOperand::Rows(values),
            Rows::Shared(_) => RowOperand::Shared(values),
        }
    }
    let path = Path::detected();
    match (a.values(), b.values(), out.values) {
        (Values::F32(x), Values::F32(y), ValuesMut::F32(o)) => {
            float_binary_rows_on(path, op, operand(a, x), operand(b, y), o, n)
        }
        (Values::F64(x), Values::F64(y), ValuesMut::F64(o)) => {
            float_binary_rows_on(path, op, operand(a, x), operand(b, y), o, n)
        }
        (_, _, values) => {
            return Err(RowsMut {
                values,
                rows: out.rows,
                row_len: n,
            })
        }
    }
    Ok(())
}

/// [`compare_into`] on every row, into a `bool` result.
pub fn compare_rows(op: CompareOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
    infallible(on_rows([a, b], 2, out, |[a, b], o| {
        let ValuesMut::Bool(o) = o else {
            internal_error(format!("a comparison into a {} buffer", o.ty()))
        };
        compare_into(op, a, b, o);
        Ok(())
    }))
}

/// [`cast_into`] on every row, into `out`'s type.
pub fn cast_rows(x: Rows<'_>, out: RowsMut<'_>) {
    infallible(on_rows([x], 1, out, |[x], o| {
        cast_into(x.values, o);
        Ok(())
    }))
}

/// [`select_into`] on every row: a per-row (or shared) scalar condition
/// chooses a whole alternative, an array condition element by element.
pub fn select_rows(cond: Rows<'_>, if_true: Rows<'_>, if_false: Rows<'_>, out: RowsMut<'_>) {
    infallible(on_rows(
        [cond, if_true, if_false],
        1,
        out,
        |[c, t, f], o| {
            let Values::Bool(values) = c.values else {
                internal_error(format!("select on a {} condition", c.values.ty()))
            };
            let cond = Operand {
                values,
                broadcast: c.broadcast,
            };
            select_into(cond, t.values, f.values, o);
            Ok(())
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_types::Scalar;

    fn t(shape: &[usize], data: Data) -> Tensor {
        Tensor::new(shape.to_vec(), data)
    }
    fn s(x: Scalar) -> Tensor {
        Tensor::scalar(x)
    }
    fn bin(op: BinaryOp, a: &Tensor, b: &Tensor) -> Tensor {
        binary(op, a, b).unwrap()
    }

    #[test]
    fn unary_on_every_type() {
        assert_eq!(
            unary(UnaryOp::Not, &s(Scalar::Bool(true))),
            s(Scalar::Bool(false))
        );
        assert_eq!(unary(UnaryOp::Not, &s(Scalar::I32(0))), s(Scalar::I32(-1)));
        assert_eq!(
            unary(UnaryOp::Neg, &s(Scalar::I64(i64::MIN))),
            s(Scalar::I64(i64::MIN))
        );
        assert_eq!(
            unary(UnaryOp::Neg, &s(Scalar::Usize(1))),
            s(Scalar::Usize(u64::MAX))
        );
        assert_eq!(
            unary(UnaryOp::Abs, &s(Scalar::I32(i32::MIN))),
            s(Scalar::I32(i32::MIN))
        );
        assert_eq!(unary(UnaryOp::Abs, &s(Scalar::I64(-3))), s(Scalar::I64(3)));
        assert_eq!(
            unary(UnaryOp::Abs, &s(Scalar::F32(-1.5))),
            s(Scalar::F32(1.5))
        );
        let x = t(&[4], Data::F64(vec![1.0, f64::NAN, f64::INFINITY, -2.0]));
        assert_eq!(
            unary(UnaryOp::IsNan, &x),
            t(&[4], Data::Bool(vec![false, true, false, false]))
        );
        assert_eq!(
            unary(UnaryOp::IsFinite, &x),
            t(&[4], Data::Bool(vec![true, false, false, true]))
        );
        let y = t(&[2], Data::F32(vec![f32::NAN, 1.0]));
        assert_eq!(
            unary(UnaryOp::IsNan, &y),
            t(&[2], Data::Bool(vec![true, false]))
        );
    }

    #[test]
    fn every_float_unary_is_its_scalar_function() {
        // The transcendental functions are `vmath`'s, the rest `std`'s.
        let inputs = [
            0.3f64,
            -1.7,
            2.5,
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -2.5,
        ];
        let x = t(&[inputs.len()], Data::F64(inputs.to_vec()));
        type StdMethod = fn(f64) -> f64;
        let cases: [(UnaryOp, StdMethod); 17] = [
            (UnaryOp::Neg, |v| -v),
            (UnaryOp::Abs, f64::abs),
            (UnaryOp::Exp, vmath::exp_f64),
            (UnaryOp::ExpM1, vmath::exp_m1_f64),
            (UnaryOp::Ln, vmath::ln_f64),
            (UnaryOp::Ln1p, vmath::ln_1p_f64),
            (UnaryOp::Log10, f64::log10),
            (UnaryOp::Sqrt, f64::sqrt),
            (UnaryOp::Sin, f64::sin),
            (UnaryOp::Cos, f64::cos),
            (UnaryOp::Tan, f64::tan),
            (UnaryOp::Tanh, vmath::tanh_f64),
            (UnaryOp::Floor, f64::floor),
            (UnaryOp::Ceil, f64::ceil),
            (UnaryOp::Round, f64::round),
            (UnaryOp::Signum, f64::signum),
            (UnaryOp::Recip, f64::recip),
        ];
        for (op, reference) in cases {
            let Data::F64(got) = unary(op, &x).data else {
                panic!("{op:?} changed the type")
            };
            for (g, v) in got.iter().zip(inputs) {
                assert_eq!(g.to_bits(), reference(v).to_bits(), "{op:?}({v})");
            }
        }
        let y = t(&[3], Data::F32(vec![0.25, -4.0, 1e3]));
        let Data::F32(roots) = unary(UnaryOp::Sqrt, &y).data else {
            panic!("sqrt changed the type")
        };
        assert_eq!(roots[0], 0.5);
        assert!(roots[1].is_nan());
        assert_eq!(roots[2], 1e3f32.sqrt());
        for op in [UnaryOp::Sigmoid, UnaryOp::LogSigmoid, UnaryOp::Softplus] {
            let Data::F64(got) = unary(op, &x).data else {
                panic!()
            };
            let f = match op {
                UnaryOp::Sigmoid => scalar::sigmoid::<f64>,
                UnaryOp::LogSigmoid => scalar::log_sigmoid::<f64>,
                _ => scalar::softplus::<f64>,
            };
            for (g, v) in got.iter().zip(inputs) {
                assert_eq!(g.to_bits(), f(v).to_bits());
            }
        }
    }

    #[test]
    fn integer_binary_wraps_on_every_integer_type() {
        assert_eq!(
            bin(BinaryOp::Add, &s(Scalar::I32(i32::MAX)), &s(Scalar::I32(1))),
            s(Scalar::I32(i32::MIN))
        );
        assert_eq!(
            bin(BinaryOp::Sub, &s(Scalar::I64(i64::MIN)), &s(Scalar::I64(1))),
            s(Scalar::I64(i64::MAX))
        );
        assert_eq!(
            bin(BinaryOp::Sub, &s(Scalar::Usize(0)), &s(Scalar::Usize(1))),
            s(Scalar::Usize(u64::MAX))
        );
        assert_eq!(
            bin(
                BinaryOp::Mul,
                &s(Scalar::I32(65536)),
                &s(Scalar::I32(65536))
            ),
            s(Scalar::I32(0))
        );
        assert_eq!(
            bin(
                BinaryOp::Div,
                &s(Scalar::I32(i32::MIN)),
                &s(Scalar::I32(-1))
            ),
            s(Scalar::I32(i32::MIN))
        );
        assert_eq!(
            bin(
                BinaryOp::Rem,
                &s(Scalar::I64(i64::MIN)),
                &s(Scalar::I64(-1))
            ),
            s(Scalar::I64(0))
        );
        assert_eq!(
            bin(BinaryOp::Div, &s(Scalar::Usize(7)), &s(Scalar::Usize(2))),
            s(Scalar::Usize(3))
        );
        assert_eq!(
            bin(BinaryOp::Rem, &s(Scalar::I32(-7)), &s(Scalar::I32(3))),
            s(Scalar::I32(-1))
        );
        assert_eq!(
            bin(BinaryOp::BitAnd, &s(Scalar::I64(12)), &s(Scalar::I64(10))),
            s(Scalar::I64(8))
        );
        assert_eq!(
            bin(
                BinaryOp::BitOr,
                &s(Scalar::Usize(12)),
                &s(Scalar::Usize(10))
            ),
            s(Scalar::Usize(14))
        );
        assert_eq!(
            bin(BinaryOp::BitXor, &s(Scalar::I32(12)), &s(Scalar::I32(10))),
            s(Scalar::I32(6))
        );
        assert_eq!(
            bin(BinaryOp::Max, &s(Scalar::I32(-3)), &s(Scalar::I32(2))),
            s(Scalar::I32(2))
        );
        assert_eq!(
            bin(BinaryOp::Min, &s(Scalar::Usize(3)), &s(Scalar::Usize(2))),
            s(Scalar::Usize(2))
        );
    }

    #[test]
    fn shifts_and_pow_take_any_integer_amount() {
        assert_eq!(
            bin(BinaryOp::Shl, &s(Scalar::I32(1)), &s(Scalar::Usize(33))),
            s(Scalar::I32(2))
        );
        assert_eq!(
            bin(BinaryOp::Shr, &s(Scalar::I64(-16)), &s(Scalar::I32(2))),
            s(Scalar::I64(-4))
        );
        assert_eq!(
            bin(BinaryOp::Shr, &s(Scalar::Usize(16)), &s(Scalar::I64(68))),
            s(Scalar::Usize(1))
        );
        assert_eq!(
            bin(BinaryOp::Pow, &s(Scalar::I64(3)), &s(Scalar::Usize(3))),
            s(Scalar::I64(27))
        );
        assert_eq!(
            bin(BinaryOp::Pow, &s(Scalar::I32(2)), &s(Scalar::I64(31))),
            s(Scalar::I32(i32::MIN))
        );
        let bases = t(&[3], Data::I64(vec![1, 2, 3]));
        let amounts = t(&[3], Data::I32(vec![0, 1, 2]));
        assert_eq!(
            bin(BinaryOp::Shl, &bases, &amounts),
            t(&[3], Data::I64(vec![1, 4, 12]))
        );
        assert_eq!(
            bin(BinaryOp::Pow, &bases, &s(Scalar::I32(2))),
            t(&[3], Data::I64(vec![1, 4, 9]))
        );
        assert_eq!(
            bin(BinaryOp::Pow, &s(Scalar::Usize(2)), &amounts),
            t(&[3], Data::Usize(vec![1, 2, 4]))
        );
    }

    #[test]
    fn division_by_zero_faults_for_integers_only() {
        for (a, zero) in [
            (s(Scalar::I32(1)), s(Scalar::I32(0))),
            (s(Scalar::I64(1)), s(Scalar::I64(0))),
            (s(Scalar::Usize(1)), s(Scalar::Usize(0))),
        ] {
            assert_eq!(
                binary(BinaryOp::Div, &a, &zero),
                Err(Fault::division_by_zero())
            );
            assert_eq!(
                binary(BinaryOp::Rem, &a, &zero),
                Err(Fault::remainder_by_zero())
            );
        }
        let v = t(&[3], Data::I64(vec![4, 0, 2]));
        assert_eq!(
            binary(BinaryOp::Div, &s(Scalar::I64(8)), &v),
            Err(Fault::division_by_zero())
        );
        assert_eq!(
            bin(BinaryOp::Div, &v, &s(Scalar::I64(2))),
            t(&[3], Data::I64(vec![2, 0, 1]))
        );
        assert_eq!(
            Fault::division_by_zero().kind,
            autobatch_types::ErrorKind::DivisionByZero
        );
        assert_eq!(
            Fault::remainder_by_zero().kind,
            autobatch_types::ErrorKind::DivisionByZero
        );
        let Data::F64(q) = bin(BinaryOp::Div, &s(Scalar::F64(1.0)), &s(Scalar::F64(0.0))).data
        else {
            panic!()
        };
        assert_eq!(q, vec![f64::INFINITY]);
        let Data::F32(r) = bin(BinaryOp::Rem, &s(Scalar::F32(1.0)), &s(Scalar::F32(0.0))).data
        else {
            panic!()
        };
        assert!(r[0].is_nan());
    }

    #[test]
    fn float_binary_follows_std() {
        assert_eq!(
            bin(BinaryOp::Rem, &s(Scalar::F64(-7.5)), &s(Scalar::F64(2.0))),
            s(Scalar::F64(-1.5))
        );
        assert_eq!(
            bin(
                BinaryOp::Max,
                &s(Scalar::F64(f64::NAN)),
                &s(Scalar::F64(2.0))
            ),
            s(Scalar::F64(2.0))
        );
        assert_eq!(
            bin(
                BinaryOp::Min,
                &s(Scalar::F32(1.0)),
                &s(Scalar::F32(f32::NAN))
            ),
            s(Scalar::F32(1.0))
        );
        assert_eq!(
            bin(BinaryOp::Powi, &s(Scalar::F64(2.0)), &s(Scalar::I32(-1))),
            s(Scalar::F64(0.5))
        );
        assert_eq!(
            bin(BinaryOp::Powf, &s(Scalar::F32(9.0)), &s(Scalar::F32(0.5))),
            s(Scalar::F32(3.0))
        );
        assert_eq!(
            bin(BinaryOp::Sub, &s(Scalar::F64(0.1)), &s(Scalar::F64(0.3))),
            s(Scalar::F64(0.1 - 0.3))
        );
        let v = t(&[2], Data::F32(vec![1.0, 3.0]));
        assert_eq!(
            bin(BinaryOp::Powi, &v, &s(Scalar::I32(2))),
            t(&[2], Data::F32(vec![1.0, 9.0]))
        );
        assert_eq!(
            bin(BinaryOp::Div, &v, &s(Scalar::F32(2.0))),
            t(&[2], Data::F32(vec![0.5, 1.5]))
        );
    }

    #[test]
    fn bool_binary_is_logical() {
        let a = t(&[4], Data::Bool(vec![false, false, true, true]));
        let b = t(&[4], Data::Bool(vec![false, true, false, true]));
        assert_eq!(
            bin(BinaryOp::BitAnd, &a, &b),
            t(&[4], Data::Bool(vec![false, false, false, true]))
        );
        assert_eq!(
            bin(BinaryOp::BitOr, &a, &b),
            t(&[4], Data::Bool(vec![false, true, true, true]))
        );
        assert_eq!(
            bin(BinaryOp::BitXor, &a, &b),
            t(&[4], Data::Bool(vec![false, true, true, false]))
        );
        assert_eq!(bin(BinaryOp::BitAnd, &s(Scalar::Bool(true)), &a), a);
    }

    #[test]
    fn broadcasting_pairs_a_scalar_with_every_element() {
        let m = t(&[2, 2], Data::F64(vec![1.0, 2.0, 3.0, 4.0]));
        let ten = s(Scalar::F64(10.0));
        assert_eq!(
            bin(BinaryOp::Sub, &m, &ten),
            t(&[2, 2], Data::F64(vec![-9.0, -8.0, -7.0, -6.0]))
        );
        assert_eq!(
            bin(BinaryOp::Sub, &ten, &m),
            t(&[2, 2], Data::F64(vec![9.0, 8.0, 7.0, 6.0]))
        );
        assert_eq!(
            bin(BinaryOp::Mul, &m, &m),
            t(&[2, 2], Data::F64(vec![1.0, 4.0, 9.0, 16.0]))
        );
        let empty = t(&[0], Data::I64(vec![]));
        assert_eq!(bin(BinaryOp::Add, &empty, &s(Scalar::I64(1))), empty);
        assert_eq!(
            bin(BinaryOp::Div, &s(Scalar::I64(1)), &empty),
            empty,
            "no divisor, no fault"
        );
        let c = compare(CompareOp::Lt, &m, &s(Scalar::F64(2.5)));
        assert_eq!(c, t(&[2, 2], Data::Bool(vec![true, true, false, false])));
    }

    #[test]
    #[should_panic(expected = "internal error")]
    fn mismatched_array_shapes_are_an_internal_error() {
        let a = t(&[2], Data::F64(vec![1.0, 2.0]));
        let b = t(&[3], Data::F64(vec![1.0, 2.0, 3.0]));
        let _ = binary(BinaryOp::Add, &a, &b);
    }

    #[test]
    fn comparisons_on_every_type() {
        let cases = [
            (Scalar::Bool(false), Scalar::Bool(true)),
            (Scalar::I32(-1), Scalar::I32(0)),
            (Scalar::I64(i64::MIN), Scalar::I64(i64::MAX)),
            (Scalar::Usize(3), Scalar::Usize(u64::MAX)),
            (Scalar::F32(-0.5), Scalar::F32(0.5)),
            (Scalar::F64(f64::NEG_INFINITY), Scalar::F64(-1e300)),
        ];
        for (lo, hi) in cases {
            let (lo, hi) = (s(lo), s(hi));
            let check = |op, a: &Tensor, b: &Tensor, want| {
                assert_eq!(compare(op, a, b), s(Scalar::Bool(want)))
            };
            check(CompareOp::Lt, &lo, &hi, true);
            check(CompareOp::Le, &lo, &hi, true);
            check(CompareOp::Gt, &lo, &hi, false);
            check(CompareOp::Ge, &hi, &lo, true);
            check(CompareOp::Eq, &lo, &lo, true);
            check(CompareOp::Ne, &lo, &hi, true);
            check(CompareOp::Eq, &lo, &hi, false);
        }
        let nan = s(Scalar::F64(f64::NAN));
        for op in [
            CompareOp::Eq,
            CompareOp::Lt,
            CompareOp::Le,
            CompareOp::Gt,
            CompareOp::Ge,
        ] {
            assert_eq!(compare(op, &nan, &nan), s(Scalar::Bool(false)), "{op:?}");
        }
        assert_eq!(compare(CompareOp::Ne, &nan, &nan), s(Scalar::Bool(true)));
    }

    #[test]
    fn casts_between_every_pair_of_types() {
        let all = [
            Scalar::Bool(true),
            Scalar::I32(-3),
            Scalar::I64(-3),
            Scalar::Usize(3),
            Scalar::F32(-3.7),
            Scalar::F64(-3.7),
        ];
        let expected = |from: Scalar, to: ScalarType| -> Scalar {
            match (from, to) {
                (Scalar::Bool(_), ScalarType::Bool) => Scalar::Bool(true),
                (Scalar::Bool(_), ScalarType::I32) => Scalar::I32(1),
                (Scalar::Bool(_), ScalarType::I64) => Scalar::I64(1),
                (Scalar::Bool(_), ScalarType::Usize) => Scalar::Usize(1),
                (Scalar::Bool(_), ScalarType::F32) => Scalar::F32(1.0),
                (Scalar::Bool(_), ScalarType::F64) => Scalar::F64(1.0),
                (Scalar::Usize(_), ScalarType::Bool) => Scalar::Bool(true),
                (Scalar::Usize(_), ScalarType::I32) => Scalar::I32(3),
                (Scalar::Usize(_), ScalarType::I64) => Scalar::I64(3),
                (Scalar::Usize(_), ScalarType::Usize) => Scalar::Usize(3),
                (Scalar::Usize(_), ScalarType::F32) => Scalar::F32(3.0),
                (Scalar::Usize(_), ScalarType::F64) => Scalar::F64(3.0),
                (_, ScalarType::Bool) => Scalar::Bool(true),
                (Scalar::I32(_) | Scalar::I64(_), ScalarType::I32) => Scalar::I32(-3),
                (Scalar::I32(_) | Scalar::I64(_), ScalarType::I64) => Scalar::I64(-3),
                (Scalar::I32(_) | Scalar::I64(_), ScalarType::Usize) => {
                    Scalar::Usize((-3i64) as u64)
                }
                (Scalar::I32(_) | Scalar::I64(_), ScalarType::F32) => Scalar::F32(-3.0),
                (Scalar::I32(_) | Scalar::I64(_), ScalarType::F64) => Scalar::F64(-3.0),
                (_, ScalarType::I32) => Scalar::I32(-3),
                (_, ScalarType::I64) => Scalar::I64(-3),
                (_, ScalarType::Usize) => Scalar::Usize(0),
                (Scalar::F32(_), ScalarType::F32) => Scalar::F32(-3.7),
                (Scalar::F32(_), ScalarType::F64) => Scalar::F64(-3.7f32 as f64),
                (_, ScalarType::F32) => Scalar::F32(-3.7f64 as f32),
                (_, ScalarType::F64) => Scalar::F64(-3.7),
            }
        };
        for from in all {
            for to in ScalarType::ALL {
                assert_eq!(
                    cast(to, &s(from)),
                    s(expected(from, to)),
                    "{from:?} as {to}"
                );
            }
        }
        let v = t(&[3], Data::F64(vec![f64::NAN, 1e20, -1e20]));
        assert_eq!(
            cast(ScalarType::I32, &v),
            t(&[3], Data::I32(vec![0, i32::MAX, i32::MIN]))
        );
        assert_eq!(
            cast(ScalarType::Usize, &v),
            t(&[3], Data::Usize(vec![0, u64::MAX, 0]))
        );
    }

    #[test]
    fn select_by_scalar_or_elementwise() {
        let a = t(&[3], Data::I64(vec![1, 2, 3]));
        let b = t(&[3], Data::I64(vec![-1, -2, -3]));
        assert_eq!(select(&s(Scalar::Bool(true)), &a, &b), a);
        assert_eq!(select(&s(Scalar::Bool(false)), &a, &b), b);
        let c = t(&[3], Data::Bool(vec![true, false, true]));
        assert_eq!(select(&c, &a, &b), t(&[3], Data::I64(vec![1, -2, 3])));
        let x = s(Scalar::F32(1.0));
        let y = s(Scalar::F32(2.0));
        assert_eq!(select(&s(Scalar::Bool(false)), &x, &y), y);
        let p = t(&[2], Data::Bool(vec![true, false]));
        let q = t(&[2], Data::Bool(vec![false, false]));
        assert_eq!(
            select(&t(&[2], Data::Bool(vec![false, true])), &p, &q),
            t(&[2], Data::Bool(vec![false, false]))
        );
    }

    /// A float operation of a shared row and a column (or two columns)
    /// runs its rows in one call: the bits of `binary_into` row by row,
    /// NaN, infinities and signed zeros included, f32 and f64.
    #[test]
    fn float_rows_give_the_bits_of_each_row_alone() {
        let special = [f64::NAN, f64::INFINITY, -0.0, 0.0, -3.5, 1e-310, 7.25];
        let (rows, n) = (5, 37);
        let value =
            |i: usize| special[i % special.len()] * if i.is_multiple_of(3) { -1.0 } else { 1.5 };
        let column: Vec<f64> = (0..rows * n).map(|i| value(i * 7 + 1)).collect();
        let shared: Vec<f64> = (0..n).map(|i| value(i * 5 + 2)).collect();
        let other: Vec<f64> = (0..rows * n).map(|i| value(i * 3 + 4)).collect();
        let ops = [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Rem,
            BinaryOp::Max,
            BinaryOp::Min,
            BinaryOp::Powf,
        ];
        for f32 in [false, true] {
            let data = |v: &[f64]| {
                if f32 {
                    Data::F32(v.iter().map(|&x| x as f32).collect())
                } else {
                    Data::F64(v.to_vec())
                }
            };
            let (col, sh, oth) = (data(&column), data(&shared), data(&other));
            fn as_column(d: &Data, n: usize) -> Rows<'_> {
                Rows::Column {
                    values: Values::all(d),
                    row_len: n,
                }
            }
            let pairs = [
                (Rows::Shared(Values::all(&sh)), as_column(&col, n)),
                (as_column(&col, n), Rows::Shared(Values::all(&sh))),
                (as_column(&col, n), as_column(&oth, n)),
            ];
            for op in ops {
                for (a, b) in pairs {
                    let mut got = data(&vec![9.0; rows * n]);
                    let out = RowsMut::new(ValuesMut::all(&mut got), rows, n);
                    binary_rows(op, a, b, out).unwrap();
                    let mut want = data(&vec![-9.0; rows * n]);
                    for r in 0..rows {
                        let (x, y) = (a.row(r), b.row(r));
                        let o = ValuesMut::of(&mut want, r * n..(r + 1) * n);
                        let operand = |values| DataOperand {
                            values,
                            broadcast: false,
                        };
                        binary_into(op, operand(x), operand(y), o).unwrap();
                    }
                    let bits = |d: &Data| match d {
                        Data::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect::<Vec<_>>(),
                        Data::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
                        _ => unreachable!(),
                    };
                    assert_eq!(bits(&got), bits(&want), "{op:?} f32={f32}");
                }
            }
        }
    }
}
