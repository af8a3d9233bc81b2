//! Vectorizable transcendental functions of our own, for `f32` and `f64`:
//! `exp exp_m1 ln ln_1p tanh sigmoid log_sigmoid softplus`.
//!
//! Each function is written once, branch-free (special cases are selects),
//! with range reduction and a polynomial whose every multiply-add is an
//! explicit [`f64::mul_add`] (exactly rounded, so the same bits in hardware or
//! in software). The same source is compiled three times: inside
//! `#[target_feature]` functions for AVX-512 (the slice functions) and for
//! AVX2 and FMA, chosen once at run time ([`crate::gemm::Path`]), where LLVM
//! vectorizes the slice loops, and as a portable fallback. Basic
//! IEEE operations and `mul_add` are exactly rounded and Rust never contracts
//! or reassociates floats, so both give identical bits, and the scalar
//! functions ([`exp_f64`], ...) give the same bits as the slice functions
//! ([`apply_f64`]): a member's value never depends on the path that ran it.
//!
//! The `f32` functions are native: the same algorithms in `f32` arithmetic
//! (8 lanes per AVX2 vector) with polynomials sized for a 24-bit significand
//! (Chebyshev-economized Taylor series, see the constants) and explicit
//! [`f32::mul_add`]s, so they keep the same determinism.
//!
//! Accuracy measured against the standard library over 2 million inputs per
//! function spread over every exponent, plus the extremes and small arguments
//! at every scale (`tests/vmath_accuracy.rs`, which asserts the bound after
//! each "of"): f64 `exp` 1 ulp of 2, `ln` 1 of 2, `ln_1p` 1 of 2, `exp_m1`
//! 2 of 2, `tanh` 3 of 4, and `sigmoid`, `softplus`, `log_sigmoid` 2 of 4
//! from the same formulas evaluated with `std`; f32, against the `std` `f64`
//! result rounded to `f32` (random f32 bit patterns, so every f32 exponent
//! and subnormals): `exp`, `exp_m1`, `ln`, `ln_1p` 1 ulp of 2, `tanh` 2 of 4,
//! `sigmoid` 2 of 4, `softplus` 1 of 4, `log_sigmoid` 1 of 4.
//!
//! Architecture Invariant: pure functions of their argument; no table, no
//! state beyond the cached CPU-feature test.

use autobatch_ir::UnaryOp;

use crate::gemm::Path;

// ---------------------------------------------------------------------------
// CPU dispatch.

/// Whether the AVX2+FMA versions may run: this CPU has them and
/// [`crate::gemm::SIMD_VARIABLE`] does not ask for the portable path
/// (tested once, then cached).
#[inline]
pub fn fast_path_available() -> bool {
    crate::gemm::ceiling() >= Path::Avx2 && cpu_has_avx2_fma()
}

/// Whether this CPU has AVX2 and FMA (tested once, then cached by `std`).
#[inline]
pub(crate) fn cpu_has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

// ---------------------------------------------------------------------------
// Constants.

const LOG2E: f64 = std::f64::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2^20 (the high part has 32 trailing zero bits).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// 1.5 * 2^52: adding it rounds to an integer held in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;
const SQRT2: f64 = std::f64::consts::SQRT_2;
const TWO_POW_54: f64 = 18_014_398_509_481_984.0;

/// Horner evaluation of `c[0] + c[1] x + ... ` with explicit `mul_add`s.
#[inline(always)]
fn horner<const N: usize>(x: f64, c: &[f64; N]) -> f64 {
    let mut p = c[N - 1];
    let mut k = N - 1;
    while k > 0 {
        k -= 1;
        p = p.mul_add(x, c[k]);
    }
    p
}

/// `(e^r - 1) / r` on |r| <= 0.3466 (the reduced range, with a margin): the
/// Taylor series `sum r^k / (k+1)!` economized (Chebyshev) from degree 21 to
/// degree 10; approximation error below 0.06 ulp of `e^r = 1 + r q(r)`.
const EXP_Q: [f64; 11] = [
    1.0,
    0.5000000000000006,
    0.1666666666666668,
    0.04166666666657308,
    0.00833333333331959,
    0.0013888888932511072,
    0.00019841269890071613,
    2.4801504318888373e-05,
    2.75572408926159e-06,
    2.7626368812298987e-07,
    2.5110047135431714e-08,
];

/// `(e^r - 1 - r) / r^2` on |r| <= 0.3466: `sum r^k / (k+2)!` economized from
/// degree 21 to degree 9; error below 0.33 ulp of `r` in `e^r - 1 = r + r^2 q(r)`.
const EXP_M1_Q: [f64; 10] = [
    0.5000000000000001,
    0.1666666666666667,
    0.04166666666662413,
    0.008333333333326136,
    0.001388888891721154,
    0.00019841269874817515,
    2.4801521299750923e-05,
    2.75572554044176e-06,
    2.7620086491464514e-07,
    2.5105215165649368e-08,
];

/// `(2 atanh(s) - 2s) / (s z)` as a polynomial in `z = s^2 <= 0.02944`:
/// `sum 2 z^k / (2k+3)` economized from degree 29 to degree 7; error below
/// 0.07 ulp of the logarithm.
const ATANH_COEF: [f64; 8] = [
    0.6666666666666662,
    0.39999999999999813,
    0.28571428573144503,
    0.22222222225133634,
    0.1818180828442426,
    0.15384603293955376,
    0.1335159832358582,
    0.11783298994514943,
];

#[inline(always)]
fn select(c: bool, a: f64, b: f64) -> f64 {
    if c {
        a
    } else {
        b
    }
}

/// `2^k` for `k` in the normal exponent range.
#[inline(always)]
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `x = n ln2 + r` with `n = round(x / ln2)` (as float and integer) and |r| <= ln2/2 (+ tiny).
#[inline(always)]
fn reduce_ln2(x: f64) -> (f64, i64, f64) {
    let t = x.mul_add(LOG2E, SHIFTER);
    let nf = t - SHIFTER;
    let n = (t.to_bits() as i64).wrapping_sub(SHIFTER.to_bits() as i64);
    let r = (-nf).mul_add(LN2_HI, x);
    let r = (-nf).mul_add(LN2_LO, r);
    (nf, n, r)
}

// ---------------------------------------------------------------------------
// The f64 kernels (inline(always): they are compiled into each caller's target features).

/// The `f64` exponential kernel, for other modules' loops that compile it
/// into their own target features (same bits as [`exp_f64`]).
#[inline(always)]
pub(crate) fn exp_kernel(x: f64) -> f64 {
    exp_core(x)
}

#[inline(always)]
#[allow(clippy::manual_clamp)] // max/min map NaN to a bound; the NaN is selected at the end
fn exp_core(x: f64) -> f64 {
    // Outside [-746, 710] the result is 0 or inf; clamping keeps n in range
    // and the scaling below then underflows or overflows by itself.
    let xc = x.max(-746.0).min(710.0);
    let (_, n, r) = reduce_ln2(xc);
    let p = horner(r, &EXP_Q).mul_add(r, 1.0);
    // 2^n as two factors so that neither overflows; the second product
    // rounds once into the subnormal range.
    let h = n >> 1;
    let y = p * pow2(h) * pow2(n - h);
    select(x.is_nan(), x, y)
}

#[inline(always)]
#[allow(clippy::manual_clamp)] // as in exp_core
fn exp_m1_core(x: f64) -> f64 {
    // Below -40, e^x < 2^-57 and the result rounds to -1.
    let xc = x.max(-40.0).min(710.0);
    let (_, n, r) = reduce_ln2(xc);
    let q = horner(r, &EXP_M1_Q);
    // p = e^r - 1 = r + r^2 q(r), with relative accuracy for tiny r.
    let p = q.mul_add(r * r, r);
    // e^x - 1 = 2^n p + (2^n - 1) = 2 (2^(n-1) p + (2^(n-1) - 1/2)), written
    // with 2^(n-1) so that n = 1024 does not overflow before the end.
    let s = pow2(n - 1);
    let scaled = 2.0 * s.mul_add(p, s - 0.5);
    let y = select(n == 0, p, scaled);
    select(x == 0.0 || x.is_nan(), x, y)
}

/// `ln(x) + c` for `x` positive finite and a tiny correction `c` (relative to `x`).
#[inline(always)]
fn ln_with_correction(x: f64, c: f64) -> f64 {
    let tiny = x < f64::MIN_POSITIVE;
    let xs = select(tiny, x * TWO_POW_54, x);
    let bits = xs.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m > SQRT2;
    let m = select(big, m * 0.5, m);
    let e = biased - 1023 - if tiny { 54 } else { 0 } + big as i64;
    // e as f64 without an int-to-float conversion (AVX2 has none for i64).
    let ef = f64::from_bits((SHIFTER.to_bits() as i64).wrapping_add(e) as u64) - SHIFTER;
    // ln(m) = ln(1 + f) = f - hfsq + s (hfsq + R), s = f / (2 + f).
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let poly = horner(z, &ATANH_COEF);
    let big_r = z * poly;
    let hfsq = 0.5 * f * f;
    let low = s.mul_add(hfsq + big_r, ef.mul_add(LN2_LO, c));
    ef.mul_add(LN2_HI, -((hfsq - low) - f))
}

#[inline(always)]
fn ln_core(x: f64) -> f64 {
    let y = ln_with_correction(x, 0.0);
    let y = select(x == f64::INFINITY, x, y);
    let y = select(x == 0.0, f64::NEG_INFINITY, y);
    let y = select(x < 0.0, f64::NAN, y);
    select(x.is_nan(), x, y)
}

#[inline(always)]
fn ln_1p_core(x: f64) -> f64 {
    let u = 1.0 + x;
    // ln(1 + x) = ln(u) + ln(1 + (1 + x - u) / u), and 1 + x - u = x - (u - 1) exactly.
    let c = (x - (u - 1.0)) / u;
    let y = ln_with_correction(u, c);
    let y = select(x == f64::INFINITY, x, y);
    let y = select(x == -1.0, f64::NEG_INFINITY, y);
    let y = select(x < -1.0, f64::NAN, y);
    select(x == 0.0 || x.is_nan(), x, y)
}

// The functions below are two stages, `then(x, first(x))`: the slice loops
// run each stage over a tile before the next (`staged`), so that the
// processor overlaps the elements' long dependency chains; one element's
// arithmetic, and so its bits, is the same either way.

#[inline(always)]
fn tanh_core(x: f64) -> f64 {
    tanh_then(x, tanh_first(x))
}

/// `t` of [`tanh_then`].
#[inline(always)]
fn tanh_first(x: f64) -> f64 {
    let ax = x.abs();
    exp_m1_core(select(ax < 0.55, -2.0 * ax, 2.0 * ax))
}

#[inline(always)]
fn tanh_then(x: f64, t: f64) -> f64 {
    // |x| < 0.55: t = e^(-2|x|) - 1, tanh|x| = -t / (t + 2);
    // otherwise   t = e^(2|x|) - 1,  tanh|x| = 1 - 2 / (t + 2).
    let small = x.abs() < 0.55;
    let q = select(small, -t, 2.0) / (t + 2.0);
    let y = select(small, q, 1.0 - q).copysign(x);
    select(x.is_nan(), x, y)
}

/// `e^-|x|` (at most 1: never overflows), the first stage of `sigmoid`,
/// `softplus` and `log_sigmoid`.
#[inline(always)]
fn exp_neg_abs(x: f64) -> f64 {
    exp_core(-x.abs())
}

#[inline(always)]
fn sigmoid_core(x: f64) -> f64 {
    sigmoid_then(x, exp_neg_abs(x))
}

#[inline(always)]
fn sigmoid_then(x: f64, e: f64) -> f64 {
    // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) otherwise.
    select(x >= 0.0, 1.0, e) / (1.0 + e)
}

#[inline(always)]
fn softplus_core(x: f64) -> f64 {
    softplus_then(x, exp_neg_abs(x))
}

#[inline(always)]
fn softplus_then(x: f64, e: f64) -> f64 {
    // max(x, 0) + ln(1 + e^-|x|): no overflow, and the small term is kept.
    let y = x.max(0.0) + ln_1p_unit(e);
    select(x.is_nan(), x, y)
}

/// [`ATANH_COEF`] for `z <= 0.04` (|s| <= 0.2): economized to degree 8,
/// error below 0.02 ulp.
const ATANH_UNIT_COEF: [f64; 9] = [
    0.6666666666666666,
    0.399999999999978,
    0.28571428571422985,
    0.22222222240564377,
    0.1818181820973835,
    0.15384574128890613,
    0.13333284491350125,
    0.11799062123085263,
    0.10561176770955023,
];

/// `ln(1 + e)` for `e` in [0, 1] (or NaN), without splitting `1 + e` into
/// exponent and mantissa: `1 + e = 2^k (1 + f)` with `f = e` (k = 0) below
/// 1/2 and `f = (e - 1) / 2` (k = 1, exact) from 1/2 on, so |f| <= 1/2 and
/// `ln(1 + f) = f - hfsq + s (hfsq + R)` with `s = f / (2 + f)`, |s| <= 0.2.
#[inline(always)]
fn ln_1p_unit(e: f64) -> f64 {
    let hi = e >= 0.5;
    let f = select(hi, (e - 1.0) * 0.5, e);
    let k = select(hi, 1.0, 0.0);
    let s = f / (2.0 + f);
    let z = s * s;
    let big_r = z * horner(z, &ATANH_UNIT_COEF);
    let hfsq = 0.5 * f * f;
    let low = s.mul_add(hfsq + big_r, k * LN2_LO);
    k.mul_add(LN2_HI, -((hfsq - low) - f))
}

#[inline(always)]
fn log_sigmoid_core(x: f64) -> f64 {
    -softplus_core(-x)
}

/// [`log_sigmoid_core`] from `e^-|x|` (which is `e^-|-x|`).
#[inline(always)]
fn log_sigmoid_then(x: f64, e: f64) -> f64 {
    -softplus_then(-x, e)
}

// ---------------------------------------------------------------------------
// The native f32 kernels: the same algorithms in f32 arithmetic (8 lanes per
// AVX2 vector), with polynomials sized for a 24-bit significand.

const LOG2E_F32: f32 = std::f32::consts::LOG2_E;
/// ln 2 rounded to f32, and the rest; `x - n LN2_HI_F32` is exact for the
/// reduced `x` (|n| <= 150), so the reduction loses nothing.
const LN2_HI_F32: f32 = f32::from_bits(0x3f31_7218);
const LN2_LO_F32: f32 = -1.904_654_3e-9;
/// 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
const SHIFTER_F32: f32 = 12_582_912.0;
const SQRT2_F32: f32 = std::f32::consts::SQRT_2;
const TWO_POW_23_F32: f32 = 8_388_608.0;

/// [`horner`] in f32.
#[inline(always)]
fn horner32<const N: usize>(x: f32, c: &[f32; N]) -> f32 {
    let mut p = c[N - 1];
    let mut k = N - 1;
    while k > 0 {
        k -= 1;
        p = p.mul_add(x, c[k]);
    }
    p
}

/// [`EXP_Q`] for f32: economized to degree 5, error below 0.07 ulp (before
/// rounding the coefficients to f32; the tests measure the result).
const EXP_Q_F32: [f32; 6] = [
    1.0,
    0.5,
    0.166_665_05,
    0.041_666_35,
    0.008_369_156,
    0.001_394_111_9,
];

/// [`EXP_M1_Q`] for f32: economized to degree 5, error below 0.01 ulp.
const EXP_M1_Q_F32: [f32; 6] = [
    0.5,
    0.166_666_67,
    0.041_666_467,
    0.008_333_298,
    0.001_393_365_1,
    0.000_198_992_86,
];

/// [`ATANH_COEF`] for f32: economized to degree 3, error below 0.005 ulp.
const ATANH_COEF_F32: [f32; 4] = [0.666_666_6, 0.399_999_98, 0.285_871_95, 0.222_389_01];

#[inline(always)]
fn select32(c: bool, a: f32, b: f32) -> f32 {
    if c {
        a
    } else {
        b
    }
}

/// `2^k` for `k` in the normal f32 exponent range.
#[inline(always)]
fn pow2_f32(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `x = n ln2 + r` with `n = round(x / ln2)` and |r| <= ln2/2 (+ tiny), for |x| < 2^8.
#[inline(always)]
fn reduce_ln2_f32(x: f32) -> (i32, f32) {
    let t = x.mul_add(LOG2E_F32, SHIFTER_F32);
    let nf = t - SHIFTER_F32;
    let n = (t.to_bits() as i32).wrapping_sub(SHIFTER_F32.to_bits() as i32);
    let r = (-nf).mul_add(LN2_HI_F32, x);
    let r = (-nf).mul_add(LN2_LO_F32, r);
    (n, r)
}

/// The `f32` exponential kernel (same bits as [`exp_f32`]).
#[inline(always)]
#[allow(clippy::manual_clamp)] // max/min map NaN to a bound; the NaN is selected at the end
fn exp_core_f32(x: f32) -> f32 {
    // Outside [-104, 89] the result is 0 or inf; clamping keeps n in range
    // and the scaling below then underflows or overflows by itself.
    let xc = x.max(-104.0).min(89.0);
    let (n, r) = reduce_ln2_f32(xc);
    let p = horner32(r, &EXP_Q_F32).mul_add(r, 1.0);
    // 2^n as two factors so that neither overflows; the second product
    // rounds once into the subnormal range.
    let h = n >> 1;
    let y = p * pow2_f32(h) * pow2_f32(n - h);
    select32(x.is_nan(), x, y)
}

#[inline(always)]
#[allow(clippy::manual_clamp)] // as in exp_core_f32
fn exp_m1_core_f32(x: f32) -> f32 {
    // Below -20, e^x < 2^-28 and the result rounds to -1.
    let xc = x.max(-20.0).min(89.0);
    let (n, r) = reduce_ln2_f32(xc);
    let q = horner32(r, &EXP_M1_Q_F32);
    // p = e^r - 1 = r + r^2 q(r), with relative accuracy for tiny r.
    let p = q.mul_add(r * r, r);
    // e^x - 1 = 2 (2^(n-1) p + (2^(n-1) - 1/2)); 2^(n-1) keeps n = 128 finite.
    let s = pow2_f32(n - 1);
    let scaled = 2.0 * s.mul_add(p, s - 0.5);
    let y = select32(n == 0, p, scaled);
    select32(x == 0.0 || x.is_nan(), x, y)
}

/// `ln(x) + c` for `x` positive finite and a tiny correction `c` (relative to `x`), in f32.
#[inline(always)]
fn ln_with_correction_f32(x: f32, c: f32) -> f32 {
    let tiny = x < f32::MIN_POSITIVE;
    let xs = select32(tiny, x * TWO_POW_23_F32, x);
    let bits = xs.to_bits();
    let biased = ((bits >> 23) & 0xff) as i32;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let big = m > SQRT2_F32;
    let m = select32(big, m * 0.5, m);
    let e = biased - 127 - if tiny { 23 } else { 0 } + big as i32;
    let ef = e as f32;
    // ln(m) = ln(1 + f) = f - hfsq + s (hfsq + R), s = f / (2 + f).
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let poly = horner32(z, &ATANH_COEF_F32);
    let big_r = z * poly;
    let hfsq = 0.5 * f * f;
    let low = s.mul_add(hfsq + big_r, ef.mul_add(LN2_LO_F32, c));
    ef.mul_add(LN2_HI_F32, -((hfsq - low) - f))
}

#[inline(always)]
fn ln_core_f32(x: f32) -> f32 {
    let y = ln_with_correction_f32(x, 0.0);
    let y = select32(x == f32::INFINITY, x, y);
    let y = select32(x == 0.0, f32::NEG_INFINITY, y);
    let y = select32(x < 0.0, f32::NAN, y);
    select32(x.is_nan(), x, y)
}

#[inline(always)]
fn ln_1p_core_f32(x: f32) -> f32 {
    let u = 1.0 + x;
    // ln(1 + x) = ln(u) + ln(1 + (1 + x - u) / u), and 1 + x - u = x - (u - 1).
    let c = (x - (u - 1.0)) / u;
    let y = ln_with_correction_f32(u, c);
    let y = select32(x == f32::INFINITY, x, y);
    let y = select32(x == -1.0, f32::NEG_INFINITY, y);
    let y = select32(x < -1.0, f32::NAN, y);
    select32(x == 0.0 || x.is_nan(), x, y)
}

#[inline(always)]
fn tanh_core_f32(x: f32) -> f32 {
    tanh_then_f32(x, tanh_first_f32(x))
}

#[inline(always)]
fn tanh_first_f32(x: f32) -> f32 {
    // As tanh_core: |x| < 0.55 uses e^(-2|x|) - 1, otherwise e^(2|x|) - 1.
    let ax = x.abs();
    exp_m1_core_f32(select32(ax < 0.55, -2.0 * ax, 2.0 * ax))
}

#[inline(always)]
fn tanh_then_f32(x: f32, t: f32) -> f32 {
    let small = x.abs() < 0.55;
    let q = select32(small, -t, 2.0) / (t + 2.0);
    let y = select32(small, q, 1.0 - q).copysign(x);
    select32(x.is_nan(), x, y)
}

#[inline(always)]
fn exp_neg_abs_f32(x: f32) -> f32 {
    exp_core_f32(-x.abs())
}

#[inline(always)]
fn sigmoid_core_f32(x: f32) -> f32 {
    sigmoid_then_f32(x, exp_neg_abs_f32(x))
}

#[inline(always)]
fn sigmoid_then_f32(x: f32, e: f32) -> f32 {
    select32(x >= 0.0, 1.0, e) / (1.0 + e)
}

#[inline(always)]
fn softplus_core_f32(x: f32) -> f32 {
    softplus_then_f32(x, exp_neg_abs_f32(x))
}

#[inline(always)]
fn softplus_then_f32(x: f32, e: f32) -> f32 {
    // As softplus_core, with ln(1 + e) for e in [0, 1] computed directly.
    let y = x.max(0.0) + ln_1p_unit_f32(e);
    select32(x.is_nan(), x, y)
}

/// [`ATANH_COEF_F32`] for `z <= 0.04` (|s| <= 0.2): economized to degree 3,
/// error below 0.02 ulp (before rounding the coefficients to f32).
const ATANH_UNIT_COEF_F32: [f32; 4] = [0.666_666_6, 0.399_999_9, 0.286_005_53, 0.222_530_3];

/// [`ln_1p_unit`] in f32.
#[inline(always)]
fn ln_1p_unit_f32(e: f32) -> f32 {
    let hi = e >= 0.5;
    let f = select32(hi, (e - 1.0) * 0.5, e);
    let k = select32(hi, 1.0, 0.0);
    let s = f / (2.0 + f);
    let z = s * s;
    let big_r = z * horner32(z, &ATANH_UNIT_COEF_F32);
    let hfsq = 0.5 * f * f;
    let low = s.mul_add(hfsq + big_r, k * LN2_LO_F32);
    k.mul_add(LN2_HI_F32, -((hfsq - low) - f))
}

#[inline(always)]
fn log_sigmoid_core_f32(x: f32) -> f32 {
    -softplus_core_f32(-x)
}

#[inline(always)]
fn log_sigmoid_then_f32(x: f32, e: f32) -> f32 {
    -softplus_then_f32(-x, e)
}

// ---------------------------------------------------------------------------
// Public scalar and slice functions.

/// How many elements a stage of a two-stage function runs over before the
/// next stage (a stack buffer: 2 KiB of `f64`).
const STAGE_TILE: usize = 256;

/// `out[i] = then(x[i], first(x[i]))`, each stage over a tile of
/// [`STAGE_TILE`] elements before the next: the first stage's chains of
/// neighbouring elements overlap, and so do the second's (run as one loop,
/// an element's whole chain is longer than the processor looks ahead).
#[inline(always)]
fn staged<T: Copy + Default>(
    x: &[T],
    out: &mut [T],
    first: impl Fn(T) -> T,
    then: impl Fn(T, T) -> T,
) {
    let mut tile = [T::default(); STAGE_TILE];
    for (x, out) in x.chunks(STAGE_TILE).zip(out.chunks_mut(STAGE_TILE)) {
        let t = &mut tile[..x.len()];
        for (t, &v) in t.iter_mut().zip(x) {
            *t = first(v);
        }
        for ((o, &v), &t) in out.iter_mut().zip(x).zip(t.iter()) {
            *o = then(v, t);
        }
    }
}

/// [`staged`] in place.
#[inline(always)]
fn staged_in_place<T: Copy + Default>(
    x: &mut [T],
    first: impl Fn(T) -> T,
    then: impl Fn(T, T) -> T,
) {
    let mut tile = [T::default(); STAGE_TILE];
    for x in x.chunks_mut(STAGE_TILE) {
        let t = &mut tile[..x.len()];
        for (t, &v) in t.iter_mut().zip(x.iter()) {
            *t = first(v);
        }
        for (v, &t) in x.iter_mut().zip(t.iter()) {
            *v = then(*v, t);
        }
    }
}

/// A slice loop of one function: one element at a time, or its two
/// stages a tile at a time ([`staged`]).
macro_rules! map_loop {
    ($x:expr, $out:expr, $core:ident) => {
        for (o, &v) in $out.iter_mut().zip($x) {
            *o = $core(v);
        }
    };
    ($x:expr, $out:expr, $core:ident, $first:ident, $then:ident) => {
        staged($x, $out, $first, $then)
    };
}

/// [`map_loop`] in place.
macro_rules! map_in_place_loop {
    ($x:expr, $core:ident) => {
        for v in $x.iter_mut() {
            *v = $core(*v);
        }
    };
    ($x:expr, $core:ident, $first:ident, $then:ident) => {
        staged_in_place($x, $first, $then)
    };
}

macro_rules! public_functions {
    ($( $op:ident, $core:ident, $core32:ident, $f64name:ident, $f32name:ident, $doc:literal
        $(, staged($first:ident, $then:ident, $first32:ident, $then32:ident))?; )*) => {
        $(
            #[doc = $doc]
            #[doc = " (`f64`; bit-identical to [`apply_f64`] on a slice)."]
            #[inline]
            pub fn $f64name(x: f64) -> f64 {
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn fast(x: f64) -> f64 {
                        $core(x)
                    }
                    if fast_path_available() {
                        // SAFETY: the CPU has AVX2 and FMA (tested just above).
                        return unsafe { fast(x) };
                    }
                }
                $core(x)
            }

            #[doc = $doc]
            #[doc = " (`f32`, computed in `f32`; bit-identical to [`apply_f32`])."]
            #[inline]
            pub fn $f32name(x: f32) -> f32 {
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn fast(x: f32) -> f32 {
                        $core32(x)
                    }
                    if fast_path_available() {
                        // SAFETY: the CPU has AVX2 and FMA (tested just above).
                        return unsafe { fast(x) };
                    }
                }
                $core32(x)
            }
        )*

        /// The slice loops, one per operation, compiled into the caller's target features.
        #[inline(always)]
        fn map_f64(op: UnaryOp, x: &[f64], out: &mut [f64]) -> bool {
            match op {
                $(UnaryOp::$op => {
                    map_loop!(x, out, $core $(, $first, $then)?);
                })*
                _ => return false,
            }
            true
        }

        #[inline(always)]
        fn map_f32(op: UnaryOp, x: &[f32], out: &mut [f32]) -> bool {
            match op {
                $(UnaryOp::$op => {
                    map_loop!(x, out, $core32 $(, $first32, $then32)?);
                })*
                _ => return false,
            }
            true
        }

        #[inline(always)]
        fn map_in_place_f64(op: UnaryOp, x: &mut [f64]) -> bool {
            match op {
                $(UnaryOp::$op => {
                    map_in_place_loop!(x, $core $(, $first, $then)?);
                })*
                _ => return false,
            }
            true
        }

        #[inline(always)]
        fn map_in_place_f32(op: UnaryOp, x: &mut [f32]) -> bool {
            match op {
                $(UnaryOp::$op => {
                    map_in_place_loop!(x, $core32 $(, $first32, $then32)?);
                })*
                _ => return false,
            }
            true
        }

        /// Whether `op` is one of the functions of this module.
        pub fn is_vmath_op(op: UnaryOp) -> bool {
            matches!(op, $(UnaryOp::$op)|*)
        }
    };
}

public_functions! {
    Exp, exp_core, exp_core_f32, exp_f64, exp_f32, "`e^x`";
    ExpM1, exp_m1_core, exp_m1_core_f32, exp_m1_f64, exp_m1_f32, "`e^x - 1`, accurate near 0";
    Ln, ln_core, ln_core_f32, ln_f64, ln_f32, "The natural logarithm (NaN below 0, `-inf` at ±0)";
    Ln1p, ln_1p_core, ln_1p_core_f32, ln_1p_f64, ln_1p_f32, "`ln(1 + x)`, accurate near 0";
    Tanh, tanh_core, tanh_core_f32, tanh_f64, tanh_f32, "The hyperbolic tangent",
        staged(tanh_first, tanh_then, tanh_first_f32, tanh_then_f32);
    Sigmoid, sigmoid_core, sigmoid_core_f32, sigmoid_f64, sigmoid_f32, "The logistic function `1 / (1 + e^-x)`, stable for both signs";
    LogSigmoid, log_sigmoid_core, log_sigmoid_core_f32, log_sigmoid_f64, log_sigmoid_f32, "`ln(sigmoid(x)) = -softplus(-x)`",
        staged(exp_neg_abs, log_sigmoid_then, exp_neg_abs_f32, log_sigmoid_then_f32);
    Softplus, softplus_core, softplus_core_f32, softplus_f64, softplus_f32, "`ln(1 + e^x) = max(x, 0) + ln_1p(e^-|x|)`",
        staged(exp_neg_abs, softplus_then, exp_neg_abs_f32, softplus_then_f32);
}

fn check_lengths(what: &str, x: usize, out: usize) {
    if x != out {
        crate::internal_error(format!(
            "vmath::{what}: input length {x} and output length {out} differ"
        ));
    }
}

/// The slice functions on a given CPU path: the same loop compiled for
/// AVX-512, for AVX2 and FMA, or portable (LLVM vectorizes the first two
/// with 512- and 256-bit registers; every operation is exactly rounded, so
/// the bits are the same).
macro_rules! path_dispatched {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) = $map:ident;)*) => {
        $(
            #[inline]
            fn $name(path: Path, $($arg: $ty),*) -> bool {
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn avx2($($arg: $ty),*) -> bool {
                        $map($($arg),*)
                    }
                    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
                    unsafe fn avx512($($arg: $ty),*) -> bool {
                        $map($($arg),*)
                    }
                    match path {
                        // SAFETY: the caller checked that the CPU runs `path`.
                        Path::Avx512 => return unsafe { avx512($($arg),*) },
                        Path::Avx2 => return unsafe { avx2($($arg),*) },
                        Path::Portable | Path::Neon => {}
                    }
                }
                let _ = path;
                $map($($arg),*)
            }
        )*
    };
}

/// The pass of [`softplus_sigmoid_f64`]: one `e^-|x|` per element, both
/// functions' second stages from it, a tile at a time as [`staged`] (always
/// `true`: the form `path_dispatched!` compiles per path).
#[inline(always)]
fn pair_f64(x: &[f64], softplus: &mut [f64], sigmoid: &mut [f64]) -> bool {
    pair(
        x,
        softplus,
        sigmoid,
        exp_neg_abs,
        softplus_then,
        sigmoid_then,
    );
    true
}

/// [`pair_f64`] for `f32`.
#[inline(always)]
fn pair_f32(x: &[f32], softplus: &mut [f32], sigmoid: &mut [f32]) -> bool {
    pair(
        x,
        softplus,
        sigmoid,
        exp_neg_abs_f32,
        softplus_then_f32,
        sigmoid_then_f32,
    );
    true
}

/// `softplus` and `sigmoid` of each element from one `first` (`e^-|x|`),
/// as [`staged`]: the first stage over a tile, then both second stages.
#[inline(always)]
fn pair<T: Copy + Default>(
    x: &[T],
    softplus: &mut [T],
    sigmoid: &mut [T],
    first: impl Fn(T) -> T,
    then_softplus: impl Fn(T, T) -> T,
    then_sigmoid: impl Fn(T, T) -> T,
) {
    let mut tile = [T::default(); STAGE_TILE];
    let outs = softplus
        .chunks_mut(STAGE_TILE)
        .zip(sigmoid.chunks_mut(STAGE_TILE));
    for (x, (p, s)) in x.chunks(STAGE_TILE).zip(outs) {
        let e = &mut tile[..x.len()];
        for (e, &v) in e.iter_mut().zip(x) {
            *e = first(v);
        }
        for (((&v, &e), p), s) in x.iter().zip(e.iter()).zip(p.iter_mut()).zip(s.iter_mut()) {
            *p = then_softplus(v, e);
            *s = then_sigmoid(v, e);
        }
    }
}

path_dispatched! {
    fn map_f64_on(op: UnaryOp, x: &[f64], out: &mut [f64]) = map_f64;
    fn map_f32_on(op: UnaryOp, x: &[f32], out: &mut [f32]) = map_f32;
    fn map_in_place_f64_on(op: UnaryOp, x: &mut [f64]) = map_in_place_f64;
    fn map_in_place_f32_on(op: UnaryOp, x: &mut [f32]) = map_in_place_f32;
    fn pair_f64_on(x: &[f64], softplus: &mut [f64], sigmoid: &mut [f64]) = pair_f64;
    fn pair_f32_on(x: &[f32], softplus: &mut [f32], sigmoid: &mut [f32]) = pair_f32;
}

/// `softplus(x[i])` into `softplus` and `sigmoid(x[i])` into `sigmoid` in
/// one pass that computes each `e^-|x[i]|` once (the gradient of a
/// `softplus` needs both): the bits [`apply_f64`] gives each. The three
/// slices have one length. Never allocates.
pub fn softplus_sigmoid_f64(x: &[f64], softplus: &mut [f64], sigmoid: &mut [f64]) {
    softplus_sigmoid_f64_on(Path::detected(), x, softplus, sigmoid)
}

/// [`softplus_sigmoid_f64`] for `f32`.
pub fn softplus_sigmoid_f32(x: &[f32], softplus: &mut [f32], sigmoid: &mut [f32]) {
    softplus_sigmoid_f32_on(Path::detected(), x, softplus, sigmoid)
}

/// [`softplus_sigmoid_f64`] on a given CPU path (panics, an internal error,
/// if this CPU cannot run it).
pub fn softplus_sigmoid_f64_on(path: Path, x: &[f64], softplus: &mut [f64], sigmoid: &mut [f64]) {
    check_path(path);
    check_lengths("softplus_sigmoid_f64", x.len(), softplus.len());
    check_lengths("softplus_sigmoid_f64", x.len(), sigmoid.len());
    pair_f64_on(path, x, softplus, sigmoid);
}

/// [`softplus_sigmoid_f64_on`] for `f32`.
pub fn softplus_sigmoid_f32_on(path: Path, x: &[f32], softplus: &mut [f32], sigmoid: &mut [f32]) {
    check_path(path);
    check_lengths("softplus_sigmoid_f32", x.len(), softplus.len());
    check_lengths("softplus_sigmoid_f32", x.len(), sigmoid.len());
    pair_f32_on(path, x, softplus, sigmoid);
}

/// `out[i] = op(x[i])` for a vmath operation (see [`is_vmath_op`]); returns
/// `false` and writes nothing for any other operation. `out.len()` must be
/// `x.len()`. Never allocates; bit-identical to the scalar functions.
pub fn apply_f64(op: UnaryOp, x: &[f64], out: &mut [f64]) -> bool {
    check_lengths("apply_f64", x.len(), out.len());
    map_f64_on(Path::detected(), op, x, out)
}

/// [`apply_f64`] for `f32`.
pub fn apply_f32(op: UnaryOp, x: &[f32], out: &mut [f32]) -> bool {
    check_lengths("apply_f32", x.len(), out.len());
    map_f32_on(Path::detected(), op, x, out)
}

/// `x[i] = op(x[i])` in place; `false` (nothing written) if `op` is not a vmath operation.
pub fn apply_in_place_f64(op: UnaryOp, x: &mut [f64]) -> bool {
    map_in_place_f64_on(Path::detected(), op, x)
}

/// [`apply_in_place_f64`] for `f32`.
pub fn apply_in_place_f32(op: UnaryOp, x: &mut [f32]) -> bool {
    map_in_place_f32_on(Path::detected(), op, x)
}

/// [`apply_f64`] on a given CPU path; panics (an internal error) if this
/// CPU cannot run it. For the tests and benchmarks that compare the paths.
pub fn apply_f64_on(path: Path, op: UnaryOp, x: &[f64], out: &mut [f64]) -> bool {
    check_path(path);
    check_lengths("apply_f64_on", x.len(), out.len());
    map_f64_on(path, op, x, out)
}

/// [`apply_f32`] on a given CPU path.
pub fn apply_f32_on(path: Path, op: UnaryOp, x: &[f32], out: &mut [f32]) -> bool {
    check_path(path);
    check_lengths("apply_f32_on", x.len(), out.len());
    map_f32_on(path, op, x, out)
}

/// [`apply_in_place_f64`] on a given CPU path.
pub fn apply_in_place_f64_on(path: Path, op: UnaryOp, x: &mut [f64]) -> bool {
    check_path(path);
    map_in_place_f64_on(path, op, x)
}

/// [`apply_in_place_f32`] on a given CPU path.
pub fn apply_in_place_f32_on(path: Path, op: UnaryOp, x: &mut [f32]) -> bool {
    check_path(path);
    map_in_place_f32_on(path, op, x)
}

fn check_path(path: Path) {
    if !path.available() {
        crate::internal_error(format!("vmath: this CPU cannot run the {path:?} path"));
    }
}

/// The portable path only (no CPU dispatch), for the tests that check both
/// paths give the same bits.
#[doc(hidden)]
pub fn apply_portable_f64(op: UnaryOp, x: &[f64], out: &mut [f64]) -> bool {
    check_lengths("apply_portable_f64", x.len(), out.len());
    map_f64(op, x, out)
}

/// [`apply_portable_f64`] for `f32`.
#[doc(hidden)]
pub fn apply_portable_f32(op: UnaryOp, x: &[f32], out: &mut [f32]) -> bool {
    check_lengths("apply_portable_f32", x.len(), out.len());
    map_f32(op, x, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values() {
        assert_eq!(exp_f64(0.0), 1.0);
        assert_eq!(exp_f64(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp_f64(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp_f64(710.0), f64::INFINITY);
        assert_eq!(exp_f64(-746.0), 0.0);
        assert!(exp_f64(f64::NAN).is_nan());
        assert_eq!(exp_m1_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(exp_m1_f64(-100.0), -1.0);
        assert_eq!(exp_m1_f64(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp_m1_f64(1e-300), 1e-300);
        assert_eq!(ln_f64(1.0), 0.0);
        assert_eq!(ln_f64(0.0), f64::NEG_INFINITY);
        assert_eq!(ln_f64(-0.0), f64::NEG_INFINITY);
        assert!(ln_f64(-1.0).is_nan());
        assert_eq!(ln_f64(f64::INFINITY), f64::INFINITY);
        assert_eq!(ln_1p_f64(-1.0), f64::NEG_INFINITY);
        assert_eq!(ln_1p_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(ln_1p_f64(1e-300), 1e-300);
        assert!(ln_1p_f64(-2.0).is_nan());
        assert_eq!(tanh_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(tanh_f64(1e3), 1.0);
        assert_eq!(tanh_f64(f64::NEG_INFINITY), -1.0);
        assert_eq!(tanh_f64(5e-324), 5e-324);
        assert_eq!(sigmoid_f64(0.0), 0.5);
        assert_eq!(sigmoid_f64(f64::INFINITY), 1.0);
        assert_eq!(sigmoid_f64(f64::NEG_INFINITY), 0.0);
        assert_eq!(softplus_f64(1000.0), 1000.0);
        assert_eq!(softplus_f64(-1000.0), 0.0);
        assert_eq!(log_sigmoid_f64(-1000.0), -1000.0);
        assert_eq!(log_sigmoid_f64(1000.0), -0.0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(-100.0) > 0.0 && exp_f32(-100.0) < f32::MIN_POSITIVE);
        assert_eq!(exp_m1_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(exp_m1_f32(-30.0), -1.0);
        assert_eq!(exp_m1_f32(1e-30), 1e-30);
        assert_eq!(exp_m1_f32(89.0), f32::INFINITY);
        assert_eq!(ln_f32(1.0), 0.0);
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert!(ln_f32(-1.0).is_nan());
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(ln_f32(f32::from_bits(1)), -103.27893);
        assert_eq!(ln_1p_f32(-1.0), f32::NEG_INFINITY);
        assert_eq!(ln_1p_f32(1e-30), 1e-30);
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh_f32(20.0), 1.0);
        assert_eq!(sigmoid_f32(0.0), 0.5);
        assert_eq!(sigmoid_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(softplus_f32(100.0), 100.0);
        assert_eq!(softplus_f32(-200.0), 0.0);
        assert_eq!(log_sigmoid_f32(-100.0), -100.0);
        assert!(!apply_f64(UnaryOp::Sqrt, &[1.0], &mut [0.0]));
        assert!(is_vmath_op(UnaryOp::Softplus) && !is_vmath_op(UnaryOp::Log10));
    }
}
