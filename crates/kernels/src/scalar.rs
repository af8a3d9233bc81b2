//! The meaning of every elementwise operation on one scalar, per scalar type.
//!
//! Each operation is a small pure function, generic over the traits below
//! ([`Integer`], [`Float`], [`Ring`], [`CastScalar`]) where the meaning is the
//! same for every type of a family. The tensor kernels of this crate map these
//! functions over arrays, and the batched kernels of the executors are meant to
//! reuse them unchanged, so that every strategy computes bit-identical values.
//!
//! The rules, in one place:
//!
//! - Integer arithmetic wraps on overflow (`MIN / -1` wraps to `MIN`,
//!   `MIN % -1` is `0`, `abs(MIN)` wraps to `MIN`, `-MIN` wraps to `MIN`).
//! - Integer division and remainder by zero are faults ([`DivisionByZero`]).
//! - Shifts take their amount `as u32` and then modulo the bit width
//!   (`wrapping_shl` / `wrapping_shr`); `>>` is arithmetic on signed types.
//! - Integer `pow` takes its exponent `as u32` and wraps (`wrapping_pow`).
//! - Float operations are Rust's `std` methods of the same name, in the
//!   operand's own precision (`f32` stays `f32`), except `exp exp_m1 ln ln_1p
//!   tanh sigmoid log_sigmoid softplus`, which are [`crate::vmath`]'s (a few
//!   ulp from `std`, identical on every CPU path), and the special functions
//!   `lgamma digamma trigamma erf erfc Phi inv_Phi`, which are
//!   [`crate::special`]'s (in `f64`, rounded once for `f32`); `%` on floats is Rust's `%`;
//!   `max`/`min` ignore a NaN operand like `f64::max`/`f64::min`.
//! - Casts are Rust's `as`: float to integer saturates and NaN becomes 0,
//!   `bool` to a number is 0 or 1. Rust has no `as` into `bool`; the IR allows
//!   it, and here it means "is not zero" (so NaN becomes `true`).

use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use autobatch_ir::TernaryOp;

/// The fault of an integer division or remainder whose divisor is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DivisionByZero;

/// The integer types of the language: `i32`, `i64` and `usize` (held as `u64`).
pub trait Integer: Copy + Ord + Eq + Debug + Default + Send + Sync + 'static {
    const ZERO: Self;
    const MIN: Self;
    const MAX: Self;
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_sub(self, other: Self) -> Self;
    fn wrapping_mul(self, other: Self) -> Self;
    /// Only called with a non-zero divisor.
    fn wrapping_div(self, other: Self) -> Self;
    /// Only called with a non-zero divisor.
    fn wrapping_rem(self, other: Self) -> Self;
    fn wrapping_neg(self) -> Self;
    /// `abs`, wrapping (`abs(MIN) == MIN`); the identity on unsigned types.
    fn wrapping_abs(self) -> Self;
    fn wrapping_shl(self, amount: u32) -> Self;
    fn wrapping_shr(self, amount: u32) -> Self;
    fn wrapping_pow(self, exponent: u32) -> Self;
    fn bit_not(self) -> Self;
    fn bit_and(self, other: Self) -> Self;
    fn bit_or(self, other: Self) -> Self;
    fn bit_xor(self, other: Self) -> Self;
    /// `self as u32`: how a shift amount or a `pow` exponent is read.
    fn as_u32(self) -> u32;
    /// The exact value, wide enough for every integer type; used for bounds checks.
    fn as_i128(self) -> i128;
}

macro_rules! impl_integer {
    ($t:ty, abs: |$x:ident| $abs:expr) => {
        impl Integer for $t {
            const ZERO: Self = 0;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            #[inline]
            fn wrapping_add(self, other: Self) -> Self {
                <$t>::wrapping_add(self, other)
            }
            #[inline]
            fn wrapping_sub(self, other: Self) -> Self {
                <$t>::wrapping_sub(self, other)
            }
            #[inline]
            fn wrapping_mul(self, other: Self) -> Self {
                <$t>::wrapping_mul(self, other)
            }
            #[inline]
            fn wrapping_div(self, other: Self) -> Self {
                <$t>::wrapping_div(self, other)
            }
            #[inline]
            fn wrapping_rem(self, other: Self) -> Self {
                <$t>::wrapping_rem(self, other)
            }
            #[inline]
            fn wrapping_neg(self) -> Self {
                <$t>::wrapping_neg(self)
            }
            #[inline]
            fn wrapping_abs(self) -> Self {
                let $x = self;
                $abs
            }
            #[inline]
            fn wrapping_shl(self, amount: u32) -> Self {
                <$t>::wrapping_shl(self, amount)
            }
            #[inline]
            fn wrapping_shr(self, amount: u32) -> Self {
                <$t>::wrapping_shr(self, amount)
            }
            #[inline]
            fn wrapping_pow(self, exponent: u32) -> Self {
                <$t>::wrapping_pow(self, exponent)
            }
            #[inline]
            fn bit_not(self) -> Self {
                !self
            }
            #[inline]
            fn bit_and(self, other: Self) -> Self {
                self & other
            }
            #[inline]
            fn bit_or(self, other: Self) -> Self {
                self | other
            }
            #[inline]
            fn bit_xor(self, other: Self) -> Self {
                self ^ other
            }
            #[inline]
            fn as_u32(self) -> u32 {
                self as u32
            }
            #[inline]
            fn as_i128(self) -> i128 {
                self as i128
            }
        }
    };
}

impl_integer!(i32, abs: |x| x.wrapping_abs());
impl_integer!(i64, abs: |x| x.wrapping_abs());
impl_integer!(u64, abs: |x| x);

/// The float types of the language: `f32` and `f64`. Every method is the
/// `std` method of the same name, except `exp exp_m1 ln ln_1p tanh` (and the
/// `vm_` methods), which are this crate's own [`crate::vmath`] functions:
/// vectorizable, within 1-3 ulp of `std`, and the same bits on every CPU path,
/// so that the reference executor and the batched kernels agree.
pub trait Float:
    Copy
    + PartialOrd
    + Debug
    + Default
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const INFINITY: Self;
    const NEG_INFINITY: Self;
    const NAN: Self;
    /// The largest value below 1 (`1 - EPSILON / 2`).
    const LARGEST_BELOW_ONE: Self;
    fn abs(self) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn log10(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn atan(self) -> Self;
    fn atan2(self, x: Self) -> Self;
    fn tanh(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
    fn signum(self) -> Self;
    fn recip(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_finite(self) -> bool;
    fn powi(self, exponent: i32) -> Self;
    fn powf(self, exponent: Self) -> Self;
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
    /// `count as Self`: the divisor of a mean.
    fn from_count(count: usize) -> Self;
    /// `value as Self`: random draws are made in `f64` and then narrowed.
    fn from_f64(value: f64) -> Self;
    /// `self as f64` (exact).
    fn to_f64(self) -> f64;
    /// [`sigmoid`] (the [`crate::vmath`] function of this type).
    fn vm_sigmoid(self) -> Self;
    /// [`softplus`] (the [`crate::vmath`] function of this type).
    fn vm_softplus(self) -> Self;
    /// [`log_sigmoid`] (the [`crate::vmath`] function of this type).
    fn vm_log_sigmoid(self) -> Self;
    /// The sum of `values` in the fixed lane order of [`crate::gemm::sum`].
    fn lane_sum(values: &[Self]) -> Self;
    /// `sum(exp(values - shift))` in the same order, see [`crate::gemm::sum_exp_shifted`].
    fn lane_sum_exp(values: &[Self], shift: Self) -> Self;
}

macro_rules! impl_float {
    ($t:ident, $exp:ident, $exp_m1:ident, $ln:ident, $ln_1p:ident, $tanh:ident, $sigmoid:ident, $softplus:ident, $log_sigmoid:ident) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const INFINITY: Self = $t::INFINITY;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            const NAN: Self = $t::NAN;
            const LARGEST_BELOW_ONE: Self = 1.0 - $t::EPSILON / 2.0;
            #[inline]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline]
            fn exp(self) -> Self {
                crate::vmath::$exp(self)
            }
            #[inline]
            fn exp_m1(self) -> Self {
                crate::vmath::$exp_m1(self)
            }
            #[inline]
            fn ln(self) -> Self {
                crate::vmath::$ln(self)
            }
            #[inline]
            fn ln_1p(self) -> Self {
                crate::vmath::$ln_1p(self)
            }
            #[inline]
            fn log10(self) -> Self {
                $t::log10(self)
            }
            #[inline]
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            #[inline]
            fn sin(self) -> Self {
                $t::sin(self)
            }
            #[inline]
            fn cos(self) -> Self {
                $t::cos(self)
            }
            #[inline]
            fn tan(self) -> Self {
                $t::tan(self)
            }
            #[inline]
            fn atan(self) -> Self {
                $t::atan(self)
            }
            #[inline]
            fn atan2(self, x: Self) -> Self {
                $t::atan2(self, x)
            }
            #[inline]
            fn tanh(self) -> Self {
                crate::vmath::$tanh(self)
            }
            // A NaN comes out quiet on every path: the vector rounding
            // instructions quiet a signaling NaN, the portable code does not.
            #[inline]
            fn floor(self) -> Self {
                if self.is_nan() {
                    self + self
                } else {
                    $t::floor(self)
                }
            }
            #[inline]
            fn ceil(self) -> Self {
                if self.is_nan() {
                    self + self
                } else {
                    $t::ceil(self)
                }
            }
            #[inline]
            fn round(self) -> Self {
                $t::round(self)
            }
            #[inline]
            fn signum(self) -> Self {
                $t::signum(self)
            }
            #[inline]
            fn recip(self) -> Self {
                $t::recip(self)
            }
            #[inline]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            #[inline]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            #[inline]
            fn powi(self, exponent: i32) -> Self {
                $t::powi(self, exponent)
            }
            #[inline]
            fn powf(self, exponent: Self) -> Self {
                $t::powf(self, exponent)
            }
            #[inline]
            fn max(self, other: Self) -> Self {
                $t::max(self, other)
            }
            #[inline]
            fn min(self, other: Self) -> Self {
                $t::min(self, other)
            }
            #[inline]
            fn from_count(count: usize) -> Self {
                count as $t
            }
            #[inline]
            fn from_f64(value: f64) -> Self {
                value as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn vm_sigmoid(self) -> Self {
                crate::vmath::$sigmoid(self)
            }
            #[inline]
            fn vm_softplus(self) -> Self {
                crate::vmath::$softplus(self)
            }
            #[inline]
            fn vm_log_sigmoid(self) -> Self {
                crate::vmath::$log_sigmoid(self)
            }
            #[inline]
            fn lane_sum(values: &[Self]) -> Self {
                crate::gemm::sum(values)
            }
            #[inline]
            fn lane_sum_exp(values: &[Self], shift: Self) -> Self {
                crate::gemm::sum_exp_shifted(values, shift)
            }
        }
    };
}

impl_float!(
    f32,
    exp_f32,
    exp_m1_f32,
    ln_f32,
    ln_1p_f32,
    tanh_f32,
    sigmoid_f32,
    softplus_f32,
    log_sigmoid_f32
);
impl_float!(
    f64,
    exp_f64,
    exp_m1_f64,
    ln_f64,
    ln_1p_f64,
    tanh_f64,
    sigmoid_f64,
    softplus_f64,
    log_sigmoid_f64
);

// ---------------------------------------------------------------------------
// Integer operations.

#[inline]
pub fn int_add<T: Integer>(a: T, b: T) -> T {
    a.wrapping_add(b)
}

#[inline]
pub fn int_sub<T: Integer>(a: T, b: T) -> T {
    a.wrapping_sub(b)
}

#[inline]
pub fn int_mul<T: Integer>(a: T, b: T) -> T {
    a.wrapping_mul(b)
}

/// `a / b`, rounding toward zero; `MIN / -1` wraps to `MIN`.
#[inline]
pub fn int_div<T: Integer>(a: T, b: T) -> Result<T, DivisionByZero> {
    if b == T::ZERO {
        Err(DivisionByZero)
    } else {
        Ok(a.wrapping_div(b))
    }
}

/// `a % b`, with the sign of `a`; `MIN % -1` is 0.
#[inline]
pub fn int_rem<T: Integer>(a: T, b: T) -> Result<T, DivisionByZero> {
    if b == T::ZERO {
        Err(DivisionByZero)
    } else {
        Ok(a.wrapping_rem(b))
    }
}

#[inline]
pub fn int_neg<T: Integer>(a: T) -> T {
    a.wrapping_neg()
}

#[inline]
pub fn int_abs<T: Integer>(a: T) -> T {
    a.wrapping_abs()
}

#[inline]
pub fn int_not<T: Integer>(a: T) -> T {
    a.bit_not()
}

#[inline]
pub fn int_bit_and<T: Integer>(a: T, b: T) -> T {
    a.bit_and(b)
}

#[inline]
pub fn int_bit_or<T: Integer>(a: T, b: T) -> T {
    a.bit_or(b)
}

#[inline]
pub fn int_bit_xor<T: Integer>(a: T, b: T) -> T {
    a.bit_xor(b)
}

/// `a << amount`; the amount may be of any integer type, is read `as u32`
/// and then taken modulo the bit width of `a`, so no shift ever faults.
#[inline]
pub fn int_shl<T: Integer, A: Integer>(a: T, amount: A) -> T {
    a.wrapping_shl(amount.as_u32())
}

/// `a >> amount` (arithmetic on signed types); the amount as for [`int_shl`].
#[inline]
pub fn int_shr<T: Integer, A: Integer>(a: T, amount: A) -> T {
    a.wrapping_shr(amount.as_u32())
}

/// `a.pow(exponent)`, wrapping; the exponent may be of any integer type and is
/// read `as u32` (so a negative exponent becomes a large one).
#[inline]
pub fn int_pow<T: Integer, E: Integer>(a: T, exponent: E) -> T {
    a.wrapping_pow(exponent.as_u32())
}

#[inline]
pub fn int_max<T: Integer>(a: T, b: T) -> T {
    Ord::max(a, b)
}

#[inline]
pub fn int_min<T: Integer>(a: T, b: T) -> T {
    Ord::min(a, b)
}

// ---------------------------------------------------------------------------
// Float operations.

#[inline]
pub fn float_add<F: Float>(a: F, b: F) -> F {
    a + b
}

#[inline]
pub fn float_sub<F: Float>(a: F, b: F) -> F {
    a - b
}

#[inline]
pub fn float_mul<F: Float>(a: F, b: F) -> F {
    a * b
}

/// IEEE division: a zero divisor gives an infinity or NaN, never a fault.
#[inline]
pub fn float_div<F: Float>(a: F, b: F) -> F {
    a / b
}

/// Rust's `%` on floats (the result has the sign of `a`).
#[inline]
pub fn float_rem<F: Float>(a: F, b: F) -> F {
    a % b
}

#[inline]
pub fn float_neg<F: Float>(a: F) -> F {
    -a
}

/// `a.max(b)`: a NaN operand is ignored (the other one is the result).
#[inline]
pub fn float_max<F: Float>(a: F, b: F) -> F {
    a.max(b)
}

/// `a.min(b)`: a NaN operand is ignored (the other one is the result).
#[inline]
pub fn float_min<F: Float>(a: F, b: F) -> F {
    a.min(b)
}

#[inline]
pub fn float_powi<F: Float>(a: F, exponent: i32) -> F {
    a.powi(exponent)
}

#[inline]
pub fn float_powf<F: Float>(a: F, exponent: F) -> F {
    a.powf(exponent)
}

/// `y.atan2(x)`, Rust's.
#[inline]
pub fn float_atan2<F: Float>(y: F, x: F) -> F {
    y.atan2(x)
}

/// The logistic function `1 / (1 + e^-x)`, computed so that neither sign
/// overflows (`e^-|x| <= 1`); see [`crate::vmath::sigmoid_f64`].
#[inline]
pub fn sigmoid<F: Float>(x: F) -> F {
    x.vm_sigmoid()
}

/// `ln(1 + e^x)`, as `max(x, 0) + ln_1p(e^-|x|)` so that large `|x|` neither
/// overflows nor loses the small term; see [`crate::vmath::softplus_f64`].
#[inline]
pub fn softplus<F: Float>(x: F) -> F {
    x.vm_softplus()
}

/// `ln(sigmoid(x))`, as `-softplus(-x)`, which stays finite for very negative `x`.
#[inline]
pub fn log_sigmoid<F: Float>(x: F) -> F {
    x.vm_log_sigmoid()
}

/// A special function of [`crate::special`] on either float type: computed
/// in `f64`, then rounded to `F` once.
#[inline]
fn through_f64<F: Float>(x: F, f: fn(f64) -> f64) -> F {
    F::from_f64(f(x.to_f64()))
}

/// `ln |Gamma(x)|`; see [`crate::special::lgamma_f64`].
pub fn lgamma<F: Float>(x: F) -> F {
    through_f64(x, crate::special::lgamma_f64)
}

/// The digamma function; see [`crate::special::digamma_f64`].
pub fn digamma<F: Float>(x: F) -> F {
    through_f64(x, crate::special::digamma_f64)
}

/// The trigamma function; see [`crate::special::trigamma_f64`].
pub fn trigamma<F: Float>(x: F) -> F {
    through_f64(x, crate::special::trigamma_f64)
}

/// The error function; see [`crate::special::erf_f64`].
pub fn erf<F: Float>(x: F) -> F {
    through_f64(x, crate::special::erf_f64)
}

/// The complementary error function; see [`crate::special::erfc_f64`].
pub fn erfc<F: Float>(x: F) -> F {
    through_f64(x, crate::special::erfc_f64)
}

/// The standard normal CDF; see [`crate::special::phi_f64`].
pub fn phi<F: Float>(x: F) -> F {
    through_f64(x, crate::special::phi_f64)
}

/// `ln(I0(x) e^-|x|)`; see [`crate::special::log_bessel_i0e_f64`].
pub fn log_bessel_i0e<F: Float>(x: F) -> F {
    through_f64(x, crate::special::log_bessel_i0e_f64)
}

/// `I1(x) / I0(x)`; see [`crate::special::bessel_i1_over_i0_f64`].
pub fn bessel_i1_over_i0<F: Float>(x: F) -> F {
    through_f64(x, crate::special::bessel_i1_over_i0_f64)
}

/// A function of two floats computed in `f64`, then rounded once.
fn through_f64_2<F: Float>(a: F, b: F, f: fn(f64, f64) -> f64) -> F {
    F::from_f64(f(a.to_f64(), b.to_f64()))
}

/// A von Mises angle about 0; see [`crate::special::von_mises_draw_f64`].
pub fn von_mises_draw<F: Float>(kappa: F, u: F) -> F {
    through_f64_2(kappa, u, crate::special::von_mises_draw_f64)
}

/// `ln B(a, b)`; see [`crate::special::lbeta_f64`].
pub fn lbeta<F: Float>(a: F, b: F) -> F {
    through_f64_2(a, b, crate::special::lbeta_f64)
}

/// A function of three floats computed in `f64`, then rounded once.
fn through_f64_3<F: Float>(a: F, b: F, c: F, f: fn(f64, f64, f64) -> f64) -> F {
    F::from_f64(f(a.to_f64(), b.to_f64(), c.to_f64()))
}

/// An elementwise operation of three floats (see [`TernaryOp`]).
pub fn ternary<F: Float>(op: TernaryOp, a: F, b: F, c: F) -> F {
    use crate::special as s;
    let f = match op {
        TernaryOp::LogBetaInc => s::log_beta_inc_f64,
        TernaryOp::LogBetaIncC => s::log_beta_inc_c_f64,
        TernaryOp::LogBetaIncDa => s::log_beta_inc_da_f64,
        TernaryOp::LogBetaIncDb => s::log_beta_inc_db_f64,
        TernaryOp::LogBetaIncCDa => s::log_beta_inc_c_da_f64,
        TernaryOp::LogBetaIncCDb => s::log_beta_inc_c_db_f64,
        TernaryOp::BinomialInv => s::binomial_inv_f64,
    };
    through_f64_3(a, b, c, f)
}

/// `ln P(a, x)`; see [`crate::special::log_gamma_p_f64`].
pub fn log_gamma_p<F: Float>(a: F, x: F) -> F {
    through_f64_2(a, x, crate::special::log_gamma_p_f64)
}

/// `ln Q(a, x)`; see [`crate::special::log_gamma_q_f64`].
pub fn log_gamma_q<F: Float>(a: F, x: F) -> F {
    through_f64_2(a, x, crate::special::log_gamma_q_f64)
}

/// The derivative of `ln P(a, x)` in `a`.
pub fn log_gamma_p_da<F: Float>(a: F, x: F) -> F {
    through_f64_2(a, x, crate::special::log_gamma_p_da_f64)
}

/// The derivative of `ln Q(a, x)` in `a`.
pub fn log_gamma_q_da<F: Float>(a: F, x: F) -> F {
    through_f64_2(a, x, crate::special::log_gamma_q_da_f64)
}

/// `ln x` with `P(a, x) = u`; see [`crate::special::log_gamma_p_inv_f64`].
pub fn log_gamma_p_inv<F: Float>(a: F, u: F) -> F {
    through_f64_2(a, u, crate::special::log_gamma_p_inv_f64)
}

/// The Poisson quantile; see [`crate::special::poisson_inv_f64`].
pub fn poisson_inv<F: Float>(lambda: F, u: F) -> F {
    through_f64_2(lambda, u, crate::special::poisson_inv_f64)
}

/// The inverse of the standard normal CDF; see [`crate::special::inv_phi_f64`].
pub fn inv_phi<F: Float>(x: F) -> F {
    through_f64(x, crate::special::inv_phi_f64)
}

// ---------------------------------------------------------------------------
// Boolean operations.

#[inline]
pub fn bool_not(a: bool) -> bool {
    !a
}

#[inline]
pub fn bool_and(a: bool, b: bool) -> bool {
    a & b
}

#[inline]
pub fn bool_or(a: bool, b: bool) -> bool {
    a | b
}

#[inline]
pub fn bool_xor(a: bool, b: bool) -> bool {
    a ^ b
}

// ---------------------------------------------------------------------------
// Comparisons: Rust's `PartialOrd` for every type (`false < true`; any
// comparison with NaN is false except `!=`).

#[inline]
pub fn compare_eq<T: PartialOrd>(a: T, b: T) -> bool {
    a == b
}

#[inline]
pub fn compare_ne<T: PartialOrd>(a: T, b: T) -> bool {
    a != b
}

#[inline]
pub fn compare_lt<T: PartialOrd>(a: T, b: T) -> bool {
    a < b
}

#[inline]
pub fn compare_le<T: PartialOrd>(a: T, b: T) -> bool {
    a <= b
}

#[inline]
pub fn compare_gt<T: PartialOrd>(a: T, b: T) -> bool {
    a > b
}

#[inline]
pub fn compare_ge<T: PartialOrd>(a: T, b: T) -> bool {
    a >= b
}

// ---------------------------------------------------------------------------
// Casts.

/// Conversion of a scalar into every scalar type, with the meaning of Rust's `as`.
pub trait CastScalar: Copy {
    fn cast_bool(self) -> bool;
    fn cast_i32(self) -> i32;
    fn cast_i64(self) -> i64;
    /// `as usize`, held as `u64` (the language's `usize` is 64 bits everywhere).
    fn cast_usize(self) -> u64;
    fn cast_f32(self) -> f32;
    fn cast_f64(self) -> f64;
}

macro_rules! impl_cast_number {
    ($t:ty, zero: $zero:expr) => {
        impl CastScalar for $t {
            #[inline]
            fn cast_bool(self) -> bool {
                // Not a Rust `as`; see the module doc. `!=` is true for NaN.
                self != $zero
            }
            #[inline]
            fn cast_i32(self) -> i32 {
                self as i32
            }
            #[inline]
            fn cast_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn cast_usize(self) -> u64 {
                self as u64
            }
            #[inline]
            fn cast_f32(self) -> f32 {
                self as f32
            }
            #[inline]
            fn cast_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

impl_cast_number!(i32, zero: 0);
impl_cast_number!(i64, zero: 0);
impl_cast_number!(u64, zero: 0);
impl_cast_number!(f32, zero: 0.0);
impl_cast_number!(f64, zero: 0.0);

impl CastScalar for bool {
    #[inline]
    fn cast_bool(self) -> bool {
        self
    }
    #[inline]
    fn cast_i32(self) -> i32 {
        self as i32
    }
    #[inline]
    fn cast_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn cast_usize(self) -> u64 {
        self as u64
    }
    #[inline]
    fn cast_f32(self) -> f32 {
        // Rust has no `bool as f32`; going through `u8` gives 0.0 or 1.0.
        self as u8 as f32
    }
    #[inline]
    fn cast_f64(self) -> f64 {
        self as u8 as f64
    }
}

// ---------------------------------------------------------------------------
// The semiring of the matrix products and sums.

/// Zero, addition and multiplication as the products (`dot`, `matvec`,
/// `vecmat`, `matmul`, `outer`) use them: wrapping on integers, IEEE on
/// floats, and `or`/`and` on `bool` (the IR's typing lets `bool` arrays
/// through, so they get the boolean semiring rather than a panic).
pub trait Ring: Copy + Debug + Send + Sync + 'static {
    const ZERO: Self;
    fn ring_add(self, other: Self) -> Self;
    fn ring_mul(self, other: Self) -> Self;
}

macro_rules! impl_ring_integer {
    ($t:ty) => {
        impl Ring for $t {
            const ZERO: Self = 0;
            #[inline]
            fn ring_add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline]
            fn ring_mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
        }
    };
}

macro_rules! impl_ring_float {
    ($t:ty) => {
        impl Ring for $t {
            const ZERO: Self = 0.0;
            #[inline]
            fn ring_add(self, other: Self) -> Self {
                self + other
            }
            #[inline]
            fn ring_mul(self, other: Self) -> Self {
                self * other
            }
        }
    };
}

impl_ring_integer!(i32);
impl_ring_integer!(i64);
impl_ring_integer!(u64);
impl_ring_float!(f32);
impl_ring_float!(f64);

impl Ring for bool {
    const ZERO: Self = false;
    #[inline]
    fn ring_add(self, other: Self) -> Self {
        self | other
    }
    #[inline]
    fn ring_mul(self, other: Self) -> Self {
        self & other
    }
}

/// Whether a value is unordered (a float NaN). Reductions that look for a
/// maximum or minimum skip such values, as `f64::max` does.
pub trait MaybeNan: Copy + PartialOrd {
    fn is_unordered(self) -> bool;
}

macro_rules! impl_maybe_nan_never {
    ($($t:ty),*) => {
        $(impl MaybeNan for $t {
            #[inline]
            fn is_unordered(self) -> bool {
                false
            }
        })*
    };
}

impl_maybe_nan_never!(bool, i32, i64, u64);

impl MaybeNan for f32 {
    #[inline]
    fn is_unordered(self) -> bool {
        self.is_nan()
    }
}

impl MaybeNan for f64 {
    #[inline]
    fn is_unordered(self) -> bool {
        self.is_nan()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_arithmetic_wraps() {
        assert_eq!(int_add(i32::MAX, 1), i32::MIN);
        assert_eq!(int_add(i64::MAX, 1), i64::MIN);
        assert_eq!(int_add(u64::MAX, 1), 0);
        assert_eq!(int_sub(i32::MIN, 1), i32::MAX);
        assert_eq!(int_sub(0u64, 1), u64::MAX);
        assert_eq!(int_mul(i64::MAX, 2), -2);
        assert_eq!(int_mul(1u64 << 63, 2), 0);
        assert_eq!(int_neg(i32::MIN), i32::MIN);
        assert_eq!(int_neg(i64::MIN), i64::MIN);
        assert_eq!(int_neg(1u64), u64::MAX);
        assert_eq!(int_abs(i32::MIN), i32::MIN);
        assert_eq!(int_abs(i64::MIN), i64::MIN);
        assert_eq!(int_abs(-5i64), 5);
        assert_eq!(int_abs(7u64), 7);
    }

    #[test]
    fn integer_division_rounds_toward_zero_and_wraps() {
        assert_eq!(int_div(7i64, 2), Ok(3));
        assert_eq!(int_div(-7i64, 2), Ok(-3));
        assert_eq!(int_rem(-7i64, 2), Ok(-1));
        assert_eq!(int_rem(7i32, -2), Ok(1));
        assert_eq!(int_div(i32::MIN, -1), Ok(i32::MIN));
        assert_eq!(int_div(i64::MIN, -1), Ok(i64::MIN));
        assert_eq!(int_rem(i64::MIN, -1), Ok(0));
        assert_eq!(int_div(u64::MAX, 2), Ok(u64::MAX / 2));
    }

    #[test]
    fn integer_division_by_zero_faults() {
        assert_eq!(int_div(1i32, 0), Err(DivisionByZero));
        assert_eq!(int_div(1i64, 0), Err(DivisionByZero));
        assert_eq!(int_div(1u64, 0), Err(DivisionByZero));
        assert_eq!(int_rem(1i32, 0), Err(DivisionByZero));
        assert_eq!(int_rem(0i64, 0), Err(DivisionByZero));
        assert_eq!(int_rem(1u64, 0), Err(DivisionByZero));
    }

    #[test]
    fn shifts_take_the_amount_modulo_the_bit_width() {
        assert_eq!(int_shl(1i32, 33i64), 2);
        assert_eq!(int_shl(1i64, 65i32), 2);
        assert_eq!(int_shl(1u64, 64u64), 1);
        assert_eq!(int_shr(-8i32, 1i32), -4, "signed shifts are arithmetic");
        assert_eq!(int_shr(-8i64, 64i64), -8);
        assert_eq!(int_shr(u64::MAX, 63i32), 1);
        // -1 as u32 is u32::MAX, which is 31 modulo 32.
        assert_eq!(int_shl(1i32, -1i64), i32::MIN);
        assert_eq!(int_shl(1i32, 31u64), i32::MIN);
    }

    #[test]
    fn integer_pow_wraps_and_reads_the_exponent_as_u32() {
        assert_eq!(int_pow(3i64, 4i64), 81);
        assert_eq!(int_pow(2i32, 31u64), i32::MIN);
        assert_eq!(int_pow(2i32, 32i32), 0);
        assert_eq!(int_pow(3u64, 0i32), 1);
        assert_eq!(int_pow(-1i64, -1i64), -1, "-1 as u32 is odd");
        assert_eq!(
            int_pow(2i64, (1i64 << 32) + 3),
            8,
            "the exponent wraps into u32"
        );
    }

    #[test]
    fn integer_bitwise_max_min() {
        assert_eq!(int_not(0i32), -1);
        assert_eq!(int_not(0u64), u64::MAX);
        assert_eq!(int_bit_and(6i64, 3), 2);
        assert_eq!(int_bit_or(6i64, 3), 7);
        assert_eq!(int_bit_xor(6u64, 3), 5);
        assert_eq!(int_max(-1i32, 2), 2);
        assert_eq!(int_min(-1i64, 2), -1);
        assert_eq!(int_max(3u64, 2), 3);
    }

    #[test]
    fn float_operations_follow_std() {
        assert_eq!(float_rem(-7.5f64, 2.0), -1.5);
        assert_eq!(float_rem(7.5f32, -2.0), 1.5);
        assert!(float_rem(1.0f64, 0.0).is_nan());
        assert_eq!(float_div(1.0f64, 0.0), f64::INFINITY);
        assert_eq!(float_div(-1.0f32, 0.0), f32::NEG_INFINITY);
        assert!(float_div(0.0f64, 0.0).is_nan());
        assert_eq!(float_max(f64::NAN, 1.0), 1.0);
        assert_eq!(float_min(1.0f32, f32::NAN), 1.0);
        assert!(float_max(f64::NAN, f64::NAN).is_nan());
        assert_eq!(float_powi(2.0f64, -2), 0.25);
        assert_eq!(float_powf(4.0f32, 0.5), 2.0);
        assert_eq!(Float::round(2.5f64), 3.0);
        assert_eq!(Float::round(-2.5f64), -3.0);
        assert_eq!(Float::round(0.5f32), 1.0);
        assert_eq!(Float::signum(0.0f64), 1.0);
        assert_eq!(Float::signum(-0.0f64), -1.0);
        assert!(Float::signum(f64::NAN).is_nan());
        assert_eq!(float_neg(0.0f64).to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn sigmoid_is_stable_at_both_ends() {
        assert_eq!(sigmoid(0.0f64), 0.5);
        assert_eq!(sigmoid(1000.0f64), 1.0);
        assert_eq!(sigmoid(-1000.0f64), 0.0);
        assert!(sigmoid(-700.0f64) > 0.0);
        assert!((sigmoid(2.0f64) - 1.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
        assert!((sigmoid(-2.0f32) - 1.0 / (1.0 + 2.0f32.exp())).abs() < 1e-7);
        assert!(sigmoid(f64::NAN).is_nan());
        assert_eq!(sigmoid(f64::INFINITY), 1.0);
        assert_eq!(sigmoid(f64::NEG_INFINITY), 0.0);
    }

    #[test]
    fn softplus_and_log_sigmoid_are_stable() {
        assert!((softplus(0.0f64) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(softplus(1000.0f64), 1000.0);
        assert_eq!(softplus(-1000.0f64), 0.0);
        assert_eq!(softplus(f64::INFINITY), f64::INFINITY);
        assert_eq!(softplus(f64::NEG_INFINITY), 0.0);
        assert!(softplus(f64::NAN).is_nan());
        assert!((log_sigmoid(0.0f64) + 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_sigmoid(-1000.0f64), -1000.0);
        assert_eq!(log_sigmoid(1000.0f64), 0.0);
        assert!((log_sigmoid(-3.0f32) - sigmoid(-3.0f32).ln()).abs() < 1e-6);
        assert!(log_sigmoid(f32::NAN).is_nan());
    }

    #[test]
    fn comparisons_follow_partial_ord() {
        assert!(compare_lt(false, true));
        assert!(compare_ge(u64::MAX, 0));
        assert!(compare_le(-1i32, -1));
        assert!(!compare_eq(f64::NAN, f64::NAN));
        assert!(compare_ne(f64::NAN, f64::NAN));
        assert!(!compare_lt(f32::NAN, 1.0));
        assert!(!compare_ge(f64::NAN, 1.0));
        assert!(compare_gt(1.0f64, f64::NEG_INFINITY));
        assert!(compare_eq(0.0f64, -0.0));
    }

    #[test]
    fn casts_are_rust_as() {
        assert_eq!(f64::NAN.cast_i32(), 0);
        assert_eq!(f64::INFINITY.cast_i64(), i64::MAX);
        assert_eq!(f64::NEG_INFINITY.cast_i32(), i32::MIN);
        assert_eq!((-1.5f64).cast_usize(), 0);
        assert_eq!(1e30f32.cast_usize(), u64::MAX);
        assert_eq!((-2.9f64).cast_i64(), -2);
        assert_eq!((-1i32).cast_usize(), u64::MAX);
        assert_eq!((-1i64).cast_i32(), -1);
        assert_eq!(((1i64 << 32) + 5).cast_i32(), 5);
        assert_eq!(u64::MAX.cast_i64(), -1);
        assert_eq!(u64::MAX.cast_f64(), 18446744073709551615.0);
        assert_eq!(1e300f64.cast_f32(), f32::INFINITY);
        assert_eq!(true.cast_i32(), 1);
        assert_eq!(false.cast_i64(), 0);
        assert_eq!(true.cast_usize(), 1);
        assert_eq!(true.cast_f64(), 1.0);
        assert_eq!(false.cast_f32(), 0.0);
        assert!(true.cast_bool());
        assert!(!0i32.cast_bool());
        assert!(7u64.cast_bool());
        assert!(!(-0.0f64).cast_bool());
        assert!(f64::NAN.cast_bool());
        assert_eq!(0.1f32.cast_f64(), 0.1f32 as f64);
    }

    #[test]
    fn ring_operations() {
        assert_eq!(i32::MAX.ring_add(1), i32::MIN);
        assert_eq!(u64::MAX.ring_mul(2), u64::MAX - 1);
        assert_eq!(1.5f64.ring_mul(2.0), 3.0);
        assert!(true.ring_add(false));
        assert!(!true.ring_mul(false));
        assert_eq!(<i64 as Ring>::ZERO, 0);
    }
}
