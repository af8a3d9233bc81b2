//! The operations native code does not compute itself: `extern "C"` shims
//! that call the very functions of `autobatch_kernels` the reference
//! executor uses (the same `Float` methods and `scalar` functions the
//! elementwise kernels map), registered as symbols of the JIT module. So a
//! float function's bits are the kernels' by construction.
//!
//! Native code computes itself only what IEEE 754 or two's complement fixes
//! to the bit: `+ - * /`, `sqrt`, `abs`, negation, `recip` (`1 / x`, as
//! `std` defines it), comparisons, casts, integer arithmetic. Everything
//! else is a call of a shim: `exp ln tanh sin pow ...`, `floor ceil round
//! signum` (whose `std` forms are library calls), float `%` (`fmod`) and
//! float `max`/`min` (whose treatment of NaN and of `-0.0` against `0.0`
//! is `std`'s, not one instruction's).
//!
//! The shims are generated from the table of operations
//! (`autobatch_ops::for_each_op!`): every float map of one operand and every
//! float operation of two that native code does not compute itself
//! ([`NATIVE_UNARY`], [`NATIVE_BINARY`]) gets one, calling the kernels' own
//! `float_unary_into` / `float_binary_into` on one element; `powi` and
//! integer `pow` call the kernels' scalar functions. A new operation of the
//! table gets its shim with no line here.

use autobatch_ir::{BinaryOp, UnaryOp};
use autobatch_kernels::elementwise::{float_binary_into, float_unary_into, Operand};
use autobatch_kernels::scalar::{self, Float};
use autobatch_types::ScalarType;

/// A shim: its symbol name and address.
#[derive(Clone, Copy)]
pub(crate) struct Shim {
    pub name: &'static str,
    pub address: *const u8,
}

/// The float maps of one operand native code computes itself.
pub(crate) const NATIVE_UNARY: [UnaryOp; 2] = [UnaryOp::Sqrt, UnaryOp::Recip];

/// The float operations of two operands native code computes itself.
pub(crate) const NATIVE_BINARY: [BinaryOp; 4] =
    [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

/// `op` on one float, as the kernels compute it.
#[inline(always)]
fn unary_one<F: Float>(op: UnaryOp, x: F) -> F {
    let mut out = [x];
    float_unary_into(op, &[x], &mut out);
    out[0]
}

/// `op` on two floats, as the kernels compute it.
#[inline(always)]
fn binary_one<F: Float>(op: BinaryOp, a: F, b: F) -> F {
    let operand = |values| Operand {
        values,
        broadcast: false,
    };
    let mut out = [a];
    float_binary_into(op, operand(&[a]), operand(&[b]), &mut out);
    out[0]
}

/// The float maps of one operand among the table's unary rows: calls
/// `float_unary! { Op ... }` with their IR operations.
macro_rules! unary_rows {
    (@keep [$($kept:ident)*]) => {
        float_unary! { $($kept)* }
    };
    (@keep [$($kept:ident)*] $(#[$a:meta])* [$n:ident: Unary $o:ident, $ir:literal, FloatMap, $($row:tt)*]
        $($rest:tt)*) => {
        unary_rows! { @keep [$($kept)* $o] $($rest)* }
    };
    (@keep [$($kept:ident)*] $(#[$a:meta])* [$($row:tt)*] $($rest:tt)*) => {
        unary_rows! { @keep [$($kept)*] $($rest)* }
    };
    ($($rows:tt)*) => {
        unary_rows! { @keep [] $($rows)* }
    };
}

/// The float operations of two operands (arithmetic and `powf`) among the
/// table's binary rows: calls `float_binary! { Op ... }`.
macro_rules! binary_rows {
    (@keep [$($kept:ident)*]) => {
        float_binary! { $($kept)* }
    };
    (@keep [$($kept:ident)*] $(#[$a:meta])* [$n:ident: Binary $o:ident, $ir:literal, Arithmetic, $($row:tt)*]
        $($rest:tt)*) => {
        binary_rows! { @keep [$($kept)* $o] $($rest)* }
    };
    (@keep [$($kept:ident)*] $(#[$a:meta])* [$n:ident: Binary $o:ident, $ir:literal, FloatBinary, $($row:tt)*]
        $($rest:tt)*) => {
        binary_rows! { @keep [$($kept)* $o] $($rest)* }
    };
    (@keep [$($kept:ident)*] $(#[$a:meta])* [$($row:tt)*] $($rest:tt)*) => {
        binary_rows! { @keep [$($kept)*] $($rest)* }
    };
    ($($rows:tt)*) => {
        binary_rows! { @keep [] $($rows)* }
    };
}

/// One module of `f32` and `f64` shims per operation, named by its
/// variant, and the lookup of a shim by operation and type.
macro_rules! float_shims {
    ($module:ident, $Op:ident, $native:ident, $functions:ident, $($name:ident)*) => {
        #[allow(non_snake_case)]
        mod $module {
            use super::*;
            $(
                pub mod $name {
                    use super::*;
                    $functions!($name);
                }
            )*

            pub(crate) fn find(op: $Op, ty: ScalarType) -> Option<Shim> {
                if $native.contains(&op) {
                    return None;
                }
                let (f32_name, f64_name, f32_address, f64_address): (_, _, *const u8, *const u8) = match op {
                    $($Op::$name => (
                        concat!("autobatch_", stringify!($name), "_f32"),
                        concat!("autobatch_", stringify!($name), "_f64"),
                        $name::f32 as *const u8,
                        $name::f64 as *const u8,
                    ),)*
                    #[allow(unreachable_patterns)]
                    _ => return None,
                };
                match ty {
                    ScalarType::F32 => Some(Shim { name: f32_name, address: f32_address }),
                    ScalarType::F64 => Some(Shim { name: f64_name, address: f64_address }),
                    _ => None,
                }
            }

            pub(crate) fn all() -> Vec<Shim> {
                let mut all = Vec::new();
                $(
                    all.extend(find($Op::$name, ScalarType::F32));
                    all.extend(find($Op::$name, ScalarType::F64));
                )*
                all
            }
        }
    };
}

/// The `f32` and `f64` shims of the unary operation `$name`.
macro_rules! unary_functions {
    ($name:ident) => {
        pub extern "C" fn f32(x: f32) -> f32 {
            unary_one(UnaryOp::$name, x)
        }
        pub extern "C" fn f64(x: f64) -> f64 {
            unary_one(UnaryOp::$name, x)
        }
    };
}

/// The `f32` and `f64` shims of the binary operation `$name`.
macro_rules! binary_functions {
    ($name:ident) => {
        pub extern "C" fn f32(a: f32, b: f32) -> f32 {
            binary_one(BinaryOp::$name, a, b)
        }
        pub extern "C" fn f64(a: f64, b: f64) -> f64 {
            binary_one(BinaryOp::$name, a, b)
        }
    };
}

macro_rules! float_unary {
    ($($name:ident)*) => {
        float_shims!(unary_shims, UnaryOp, NATIVE_UNARY, unary_functions, $($name)*);
    };
}

macro_rules! float_binary {
    ($($name:ident)*) => {
        float_shims!(binary_shims, BinaryOp, NATIVE_BINARY, binary_functions, $($name)*);
    };
}

autobatch_ops::for_each_op!(@select unary unary_rows ());
autobatch_ops::for_each_op!(@select binary binary_rows ());

extern "C" fn powi_f32(a: f32, exponent: i32) -> f32 {
    scalar::float_powi(a, exponent)
}

extern "C" fn powi_f64(a: f64, exponent: i32) -> f64 {
    scalar::float_powi(a, exponent)
}

// The exponent of an integer `pow` arrives as the low 32 bits of the
// original exponent, which is what `Integer::as_u32` reads of any integer.
extern "C" fn pow_i32(a: i32, exponent: i32) -> i32 {
    scalar::int_pow(a, exponent)
}

extern "C" fn pow_i64(a: i64, exponent: i32) -> i64 {
    scalar::int_pow(a, exponent)
}

extern "C" fn pow_usize(a: u64, exponent: i32) -> u64 {
    scalar::int_pow(a, exponent)
}

/// The shim of a float unary operation on `ty`, if it has one.
pub(crate) fn unary(op: UnaryOp, ty: ScalarType) -> Option<Shim> {
    unary_shims::find(op, ty)
}

/// The shim of a binary operation whose left operand is of type `ty`:
/// the float ones above, `powi`, and integer `pow` (exponent as `i32`).
pub(crate) fn binary(op: BinaryOp, ty: ScalarType) -> Option<Shim> {
    let shim = |name, address: *const u8| Some(Shim { name, address });
    match (op, ty) {
        (BinaryOp::Powi, ScalarType::F32) => shim("autobatch_powi_f32", powi_f32 as *const u8),
        (BinaryOp::Powi, ScalarType::F64) => shim("autobatch_powi_f64", powi_f64 as *const u8),
        (BinaryOp::Pow, ScalarType::I32) => shim("autobatch_pow_i32", pow_i32 as *const u8),
        (BinaryOp::Pow, ScalarType::I64) => shim("autobatch_pow_i64", pow_i64 as *const u8),
        (BinaryOp::Pow, ScalarType::Usize) => shim("autobatch_pow_usize", pow_usize as *const u8),
        _ => binary_shims::find(op, ty),
    }
}

/// Every shim, to register with the JIT module.
pub(crate) fn all() -> Vec<Shim> {
    let mut all = unary_shims::all();
    all.extend(binary_shims::all());
    for (op, ty) in [
        (BinaryOp::Powi, ScalarType::F32),
        (BinaryOp::Powi, ScalarType::F64),
        (BinaryOp::Pow, ScalarType::I32),
        (BinaryOp::Pow, ScalarType::I64),
        (BinaryOp::Pow, ScalarType::Usize),
    ] {
        all.extend(binary(op, ty));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shim_has_a_unique_name() {
        let all = all();
        for (i, a) in all.iter().enumerate() {
            assert!(all[i + 1..].iter().all(|b| b.name != a.name), "{}", a.name);
        }
        assert!(unary(UnaryOp::Exp, ScalarType::F64).is_some());
        assert!(
            unary(UnaryOp::Sqrt, ScalarType::F64).is_none(),
            "sqrt is native"
        );
        assert!(
            binary(BinaryOp::Add, ScalarType::F64).is_none(),
            "add is native"
        );
    }
}
