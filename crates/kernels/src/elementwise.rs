//! Elementwise primitives on tensors: unary and binary operations,
//! comparisons, casts and `select`.
//!
//! Broadcasting has one rule: a scalar operand (empty shape) pairs with every
//! element of the other operand; two arrays must have the same shape. The
//! meaning of each element is a function of [`crate::scalar`]; this module
//! only walks the elements, in row-major order.
//!
//! When an integer division faults, the whole operation faults with the first
//! zero divisor met in row-major order (all faults of one kind read the same,
//! so which element is first does not show in the message).

use autobatch_ir::{BinaryOp, CompareOp, UnaryOp};
use autobatch_types::{Data, ScalarType, Tensor};

use crate::scalar::{self, CastScalar, DivisionByZero, Float, Integer};
use crate::{internal_error, Fault};

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

/// `f(x)` for every element, in order.
#[inline]
pub fn map_values<T: Copy, R>(values: &[T], f: impl FnMut(T) -> R) -> Vec<R> {
    values.iter().copied().map(f).collect()
}

/// `f(a, b)` for every pair of elements, a broadcast operand repeating its
/// one value. The callers have checked that two arrays have one shape.
#[inline]
pub fn zip_values<A: Copy, B: Copy, R>(
    a: Operand<'_, A>,
    b: Operand<'_, B>,
    mut f: impl FnMut(A, B) -> R,
) -> Vec<R> {
    match try_zip_values(a, b, |x, y| Ok::<R, std::convert::Infallible>(f(x, y))) {
        Ok(values) => values,
        Err(never) => match never {},
    }
}

/// As [`zip_values`] for a function that may fault; stops at the first fault.
#[inline]
pub fn try_zip_values<A: Copy, B: Copy, R, E>(
    a: Operand<'_, A>,
    b: Operand<'_, B>,
    mut f: impl FnMut(A, B) -> Result<R, E>,
) -> Result<Vec<R>, E> {
    match (a.broadcast, b.broadcast) {
        (true, false) => {
            let x = a.values[0];
            b.values.iter().map(|&y| f(x, y)).collect()
        }
        (false, true) => {
            let y = b.values[0];
            a.values.iter().map(|&x| f(x, y)).collect()
        }
        _ => a
            .values
            .iter()
            .zip(b.values)
            .map(|(&x, &y)| f(x, y))
            .collect(),
    }
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

// ---------------------------------------------------------------------------
// Unary operations.

/// A unary elementwise operation; the result has the operand's shape.
pub fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    let data = match &x.data {
        Data::Bool(v) => match op {
            UnaryOp::Not => Data::Bool(map_values(v, scalar::bool_not)),
            _ => internal_error(format!("{op:?} is not defined on bool")),
        },
        Data::I32(v) => Data::I32(integer_unary(op, v)),
        Data::I64(v) => Data::I64(integer_unary(op, v)),
        Data::Usize(v) => Data::Usize(integer_unary(op, v)),
        Data::F32(v) => float_unary_data(op, v, Data::F32),
        Data::F64(v) => float_unary_data(op, v, Data::F64),
    };
    Tensor::new(x.shape.clone(), data)
}

fn float_unary_data<F: Float>(op: UnaryOp, v: &[F], wrap: fn(Vec<F>) -> Data) -> Data {
    match op {
        UnaryOp::IsNan => Data::Bool(map_values(v, F::is_nan)),
        UnaryOp::IsFinite => Data::Bool(map_values(v, F::is_finite)),
        _ => wrap(float_unary(op, v)),
    }
}

/// A unary operation on integers of one type (`neg`, `not`, `abs`).
pub fn integer_unary<T: Integer>(op: UnaryOp, v: &[T]) -> Vec<T> {
    match op {
        UnaryOp::Neg => map_values(v, scalar::int_neg),
        UnaryOp::Not => map_values(v, scalar::int_not),
        UnaryOp::Abs => map_values(v, scalar::int_abs),
        _ => internal_error(format!("{op:?} is not defined on integers")),
    }
}

/// A unary operation on floats of one type whose result is of the same type.
pub fn float_unary<F: Float>(op: UnaryOp, v: &[F]) -> Vec<F> {
    match op {
        UnaryOp::Neg => map_values(v, scalar::float_neg),
        UnaryOp::Abs => map_values(v, F::abs),
        UnaryOp::Exp => map_values(v, F::exp),
        UnaryOp::ExpM1 => map_values(v, F::exp_m1),
        UnaryOp::Ln => map_values(v, F::ln),
        UnaryOp::Ln1p => map_values(v, F::ln_1p),
        UnaryOp::Log10 => map_values(v, F::log10),
        UnaryOp::Sqrt => map_values(v, F::sqrt),
        UnaryOp::Sin => map_values(v, F::sin),
        UnaryOp::Cos => map_values(v, F::cos),
        UnaryOp::Tan => map_values(v, F::tan),
        UnaryOp::Tanh => map_values(v, F::tanh),
        UnaryOp::Floor => map_values(v, F::floor),
        UnaryOp::Ceil => map_values(v, F::ceil),
        UnaryOp::Round => map_values(v, F::round),
        UnaryOp::Signum => map_values(v, F::signum),
        UnaryOp::Recip => map_values(v, F::recip),
        UnaryOp::Sigmoid => map_values(v, scalar::sigmoid),
        UnaryOp::LogSigmoid => map_values(v, scalar::log_sigmoid),
        UnaryOp::Softplus => map_values(v, scalar::softplus),
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
    let data = match op {
        // The right operand of these may have another type than the left one.
        BinaryOp::Shl | BinaryOp::Shr | BinaryOp::Pow => match &a.data {
            Data::I32(x) => Data::I32(integer_by_integer(op, Operand::of(a, x), b)),
            Data::I64(x) => Data::I64(integer_by_integer(op, Operand::of(a, x), b)),
            Data::Usize(x) => Data::Usize(integer_by_integer(op, Operand::of(a, x), b)),
            other => internal_error(format!(
                "{} needs integers, got {}",
                binary_name(op),
                other.ty()
            )),
        },
        BinaryOp::Powi => {
            let Data::I32(exponents) = &b.data else {
                internal_error(format!("powi needs i32 exponents, got {}", b.data.ty()))
            };
            let exponents = Operand::of(b, exponents);
            match &a.data {
                Data::F32(x) => {
                    Data::F32(zip_values(Operand::of(a, x), exponents, scalar::float_powi))
                }
                Data::F64(x) => {
                    Data::F64(zip_values(Operand::of(a, x), exponents, scalar::float_powi))
                }
                other => internal_error(format!("powi needs floats, got {}", other.ty())),
            }
        }
        _ => match (&a.data, &b.data) {
            (Data::Bool(x), Data::Bool(y)) => {
                Data::Bool(bool_binary(op, Operand::of(a, x), Operand::of(b, y)))
            }
            (Data::I32(x), Data::I32(y)) => {
                Data::I32(integer_binary(op, Operand::of(a, x), Operand::of(b, y))?)
            }
            (Data::I64(x), Data::I64(y)) => {
                Data::I64(integer_binary(op, Operand::of(a, x), Operand::of(b, y))?)
            }
            (Data::Usize(x), Data::Usize(y)) => {
                Data::Usize(integer_binary(op, Operand::of(a, x), Operand::of(b, y))?)
            }
            (Data::F32(x), Data::F32(y)) => {
                Data::F32(float_binary(op, Operand::of(a, x), Operand::of(b, y)))
            }
            (Data::F64(x), Data::F64(y)) => {
                Data::F64(float_binary(op, Operand::of(a, x), Operand::of(b, y)))
            }
            (x, y) => internal_error(format!(
                "{}: operand types {} and {} differ",
                binary_name(op),
                x.ty(),
                y.ty()
            )),
        },
    };
    Ok(Tensor::new(shape, data))
}

fn binary_name(op: BinaryOp) -> &'static str {
    autobatch_ir::Prim::Binary(op).name()
}

/// `&`, `|`, `^` on `bool`.
pub fn bool_binary(op: BinaryOp, a: Operand<'_, bool>, b: Operand<'_, bool>) -> Vec<bool> {
    match op {
        BinaryOp::BitAnd => zip_values(a, b, scalar::bool_and),
        BinaryOp::BitOr => zip_values(a, b, scalar::bool_or),
        BinaryOp::BitXor => zip_values(a, b, scalar::bool_xor),
        _ => internal_error(format!("{} is not defined on bool", binary_name(op))),
    }
}

/// A binary operation on two integers of one type.
pub fn integer_binary<T: Integer>(
    op: BinaryOp,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
) -> Result<Vec<T>, Fault> {
    Ok(match op {
        BinaryOp::Add => zip_values(a, b, scalar::int_add),
        BinaryOp::Sub => zip_values(a, b, scalar::int_sub),
        BinaryOp::Mul => zip_values(a, b, scalar::int_mul),
        BinaryOp::Div => try_zip_values(a, b, scalar::int_div)
            .map_err(|DivisionByZero| Fault::division_by_zero())?,
        BinaryOp::Rem => try_zip_values(a, b, scalar::int_rem)
            .map_err(|DivisionByZero| Fault::remainder_by_zero())?,
        BinaryOp::BitAnd => zip_values(a, b, scalar::int_bit_and),
        BinaryOp::BitOr => zip_values(a, b, scalar::int_bit_or),
        BinaryOp::BitXor => zip_values(a, b, scalar::int_bit_xor),
        BinaryOp::Max => zip_values(a, b, scalar::int_max),
        BinaryOp::Min => zip_values(a, b, scalar::int_min),
        BinaryOp::Shl | BinaryOp::Shr | BinaryOp::Pow => shift_or_pow(op, a, b),
        BinaryOp::Powi | BinaryOp::Powf => {
            internal_error(format!("{} needs floats", binary_name(op)))
        }
    })
}

/// A binary operation on two floats of one type.
pub fn float_binary<F: Float>(op: BinaryOp, a: Operand<'_, F>, b: Operand<'_, F>) -> Vec<F> {
    match op {
        BinaryOp::Add => zip_values(a, b, scalar::float_add),
        BinaryOp::Sub => zip_values(a, b, scalar::float_sub),
        BinaryOp::Mul => zip_values(a, b, scalar::float_mul),
        BinaryOp::Div => zip_values(a, b, scalar::float_div),
        BinaryOp::Rem => zip_values(a, b, scalar::float_rem),
        BinaryOp::Max => zip_values(a, b, scalar::float_max),
        BinaryOp::Min => zip_values(a, b, scalar::float_min),
        BinaryOp::Powf => zip_values(a, b, scalar::float_powf),
        _ => internal_error(format!("{} is not defined on floats", binary_name(op))),
    }
}

/// `<<`, `>>` or `pow` of integers by an amount of any integer type.
fn integer_by_integer<T: Integer>(op: BinaryOp, a: Operand<'_, T>, amount: &Tensor) -> Vec<T> {
    match &amount.data {
        Data::I32(y) => shift_or_pow(op, a, Operand::of(amount, y)),
        Data::I64(y) => shift_or_pow(op, a, Operand::of(amount, y)),
        Data::Usize(y) => shift_or_pow(op, a, Operand::of(amount, y)),
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
) -> Vec<T> {
    match op {
        BinaryOp::Shl => zip_values(a, amount, scalar::int_shl),
        BinaryOp::Shr => zip_values(a, amount, scalar::int_shr),
        BinaryOp::Pow => zip_values(a, amount, scalar::int_pow),
        _ => internal_error(format!("{} is not a shift", binary_name(op))),
    }
}

// ---------------------------------------------------------------------------
// Comparisons.

/// A comparison of two operands of one type, giving `bool`s. The IR only
/// compares scalars; arrays are compared elementwise with broadcasting.
pub fn compare(op: CompareOp, a: &Tensor, b: &Tensor) -> Tensor {
    let shape = broadcast_shape("comparison", a, b);
    let result = match (&a.data, &b.data) {
        (Data::Bool(x), Data::Bool(y)) => compare_values(op, Operand::of(a, x), Operand::of(b, y)),
        (Data::I32(x), Data::I32(y)) => compare_values(op, Operand::of(a, x), Operand::of(b, y)),
        (Data::I64(x), Data::I64(y)) => compare_values(op, Operand::of(a, x), Operand::of(b, y)),
        (Data::Usize(x), Data::Usize(y)) => {
            compare_values(op, Operand::of(a, x), Operand::of(b, y))
        }
        (Data::F32(x), Data::F32(y)) => compare_values(op, Operand::of(a, x), Operand::of(b, y)),
        (Data::F64(x), Data::F64(y)) => compare_values(op, Operand::of(a, x), Operand::of(b, y)),
        (x, y) => internal_error(format!("comparison of {} with {}", x.ty(), y.ty())),
    };
    Tensor::new(shape, Data::Bool(result))
}

/// A comparison of two operands of one type, elementwise.
pub fn compare_values<T: PartialOrd + Copy>(
    op: CompareOp,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
) -> Vec<bool> {
    match op {
        CompareOp::Eq => zip_values(a, b, scalar::compare_eq),
        CompareOp::Ne => zip_values(a, b, scalar::compare_ne),
        CompareOp::Lt => zip_values(a, b, scalar::compare_lt),
        CompareOp::Le => zip_values(a, b, scalar::compare_le),
        CompareOp::Gt => zip_values(a, b, scalar::compare_gt),
        CompareOp::Ge => zip_values(a, b, scalar::compare_ge),
    }
}

// ---------------------------------------------------------------------------
// Casts and select.

/// Elementwise conversion to `to`, as Rust's `as` (see [`crate::scalar`]).
pub fn cast(to: ScalarType, x: &Tensor) -> Tensor {
    let data = match &x.data {
        Data::Bool(v) => cast_values(to, v),
        Data::I32(v) => cast_values(to, v),
        Data::I64(v) => cast_values(to, v),
        Data::Usize(v) => cast_values(to, v),
        Data::F32(v) => cast_values(to, v),
        Data::F64(v) => cast_values(to, v),
    };
    Tensor::new(x.shape.clone(), data)
}

/// The elements `v` converted to `to`.
pub fn cast_values<T: CastScalar>(to: ScalarType, v: &[T]) -> Data {
    match to {
        ScalarType::Bool => Data::Bool(map_values(v, T::cast_bool)),
        ScalarType::I32 => Data::I32(map_values(v, T::cast_i32)),
        ScalarType::I64 => Data::I64(map_values(v, T::cast_i64)),
        ScalarType::Usize => Data::Usize(map_values(v, T::cast_usize)),
        ScalarType::F32 => Data::F32(map_values(v, T::cast_f32)),
        ScalarType::F64 => Data::F64(map_values(v, T::cast_f64)),
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
    if cond.is_scalar() {
        return if conditions[0] { a.clone() } else { b.clone() };
    }
    if cond.shape != a.shape {
        internal_error(format!(
            "select: condition of shape {:?} for operands of shape {:?}",
            cond.shape, a.shape
        ));
    }
    let data = map_same_type_pair!("select", &a.data, &b.data, |x, y| select_values(
        conditions, x, y
    ));
    Tensor::new(a.shape.clone(), data)
}

/// Elementwise choice: `if_true[k]` where `conditions[k]`, else `if_false[k]`.
pub fn select_values<T: Copy>(conditions: &[bool], if_true: &[T], if_false: &[T]) -> Vec<T> {
    conditions
        .iter()
        .zip(if_true.iter().zip(if_false))
        .map(|(&c, (&t, &f))| if c { t } else { f })
        .collect()
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
    fn every_float_unary_is_the_std_method() {
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
            (UnaryOp::Exp, f64::exp),
            (UnaryOp::ExpM1, f64::exp_m1),
            (UnaryOp::Ln, f64::ln),
            (UnaryOp::Ln1p, f64::ln_1p),
            (UnaryOp::Log10, f64::log10),
            (UnaryOp::Sqrt, f64::sqrt),
            (UnaryOp::Sin, f64::sin),
            (UnaryOp::Cos, f64::cos),
            (UnaryOp::Tan, f64::tan),
            (UnaryOp::Tanh, f64::tanh),
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
}
