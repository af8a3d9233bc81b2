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

use autobatch_ir::{BinaryOp, UnaryOp};
use autobatch_kernels::scalar::{self, Float};
use autobatch_types::ScalarType;

/// A shim: its symbol name and address.
#[derive(Clone, Copy)]
pub(crate) struct Shim {
    pub name: &'static str,
    pub address: *const u8,
}

macro_rules! float_unary {
    ($($name:ident: $f:expr;)*) => {
        // The variants of `UnaryOp` name the modules.
        #[allow(non_snake_case)]
        mod unary_shims {
            use super::*;
            $(
                pub mod $name {
                    use super::*;
                    pub extern "C" fn f32(x: f32) -> f32 {
                        $f(x)
                    }
                    pub extern "C" fn f64(x: f64) -> f64 {
                        $f(x)
                    }
                }
            )*

            pub(crate) fn find(op: UnaryOp, ty: ScalarType) -> Option<Shim> {
                let (f32_name, f64_name, f32_address, f64_address): (_, _, *const u8, *const u8) = match op {
                    $(UnaryOp::$name => (
                        concat!("autobatch_", stringify!($name), "_f32"),
                        concat!("autobatch_", stringify!($name), "_f64"),
                        $name::f32 as *const u8,
                        $name::f64 as *const u8,
                    ),)*
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
                    all.extend(find(UnaryOp::$name, ScalarType::F32));
                    all.extend(find(UnaryOp::$name, ScalarType::F64));
                )*
                all
            }
        }
    };
}

float_unary! {
    Exp: Float::exp;
    ExpM1: Float::exp_m1;
    Ln: Float::ln;
    Ln1p: Float::ln_1p;
    Log10: Float::log10;
    Sin: Float::sin;
    Cos: Float::cos;
    Tan: Float::tan;
    Tanh: Float::tanh;
    Floor: Float::floor;
    Ceil: Float::ceil;
    Round: Float::round;
    Signum: Float::signum;
    Sigmoid: scalar::sigmoid;
    LogSigmoid: scalar::log_sigmoid;
    Softplus: scalar::softplus;
}

macro_rules! float_binary {
    ($($name:ident: $f:expr;)*) => {
        // The variants of `BinaryOp` name the modules.
        #[allow(non_snake_case)]
        mod binary_shims {
            use super::*;
            $(
                pub mod $name {
                    use super::*;
                    pub extern "C" fn f32(a: f32, b: f32) -> f32 {
                        $f(a, b)
                    }
                    pub extern "C" fn f64(a: f64, b: f64) -> f64 {
                        $f(a, b)
                    }
                }
            )*

            pub(crate) fn find(op: BinaryOp, ty: ScalarType) -> Option<Shim> {
                let (f32_name, f64_name, f32_address, f64_address): (_, _, *const u8, *const u8) = match op {
                    $(BinaryOp::$name => (
                        concat!("autobatch_", stringify!($name), "_f32"),
                        concat!("autobatch_", stringify!($name), "_f64"),
                        $name::f32 as *const u8,
                        $name::f64 as *const u8,
                    ),)*
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
                    all.extend(find(BinaryOp::$name, ScalarType::F32));
                    all.extend(find(BinaryOp::$name, ScalarType::F64));
                )*
                all
            }
        }
    };
}

float_binary! {
    Rem: scalar::float_rem;
    Powf: scalar::float_powf;
    Max: scalar::float_max;
    Min: scalar::float_min;
}

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
