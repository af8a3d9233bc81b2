//! The special functions of the distributions: `lgamma`, `digamma`,
//! `trigamma`, `erf`, `erfc`, `Phi` (the standard normal CDF) and `inv_Phi`
//! (its inverse), the scaled `ln I0` and `I1 / I0` (for `von_mises`, [`bessel`]),
//! the logarithms of the regularized incomplete gamma functions, their
//! inverse and the Poisson quantile ([`gamma_inc`], functions of two arguments),
//! the logarithms of the regularized incomplete beta function and of its
//! complement, their derivatives and the binomial quantile ([`beta_inc`],
//! functions of three), a von Mises draw from a uniform one ([`von_mises`]), each
//! for `f64` and for `f32` (computed in `f64`, then rounded once).
//!
//! Every function is our own: argument reduction by the function's
//! recurrence or reflection, then a series whose coefficients
//! `tools/special_coefficients.py` computes with mpmath ([`coefficients`]).
//! The exponential and logarithm inside are [`crate::vmath`]'s, so the bits
//! are the same on every CPU path. `crates/kernels/tests/special_accuracy.rs`
//! compares them with mpmath at 50 digits over their domains, tails
//! included; the accuracy each reaches is in `docs/language.md`.

mod bessel;
mod beta_inc;
mod coefficients;
mod gamma_inc;
mod von_mises;

pub use bessel::{bessel_i1_over_i0_f64, log_bessel_i0e_f64};
pub use beta_inc::{
    binomial_inv_f64, lbeta_f64, log_beta_inc_c_da_f64, log_beta_inc_c_db_f64, log_beta_inc_c_f64,
    log_beta_inc_da_f64, log_beta_inc_db_f64, log_beta_inc_f64,
};
pub use gamma_inc::{
    log_gamma_p_da_f64, log_gamma_p_f64, log_gamma_p_inv_f64, log_gamma_q_da_f64, log_gamma_q_f64,
    poisson_inv_f64, POISSON_MAX_RATE,
};
pub use von_mises::von_mises_draw_f64;

use crate::vmath::{exp_f64, ln_1p_f64, ln_f64};
use coefficients::{
    DIGAMMA_NEAR_ROOT, DIGAMMA_ROOT_HI, DIGAMMA_ROOT_LO, ERFCX_TAYLOR, LGAMMA_NEAR_2,
};
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, PI};

/// `ln(2 pi) / 2`.
const LN_SQRT_2PI: f64 = 0.9189385332046728;
/// `1 / sqrt(2 pi)`.
const FRAC_1_SQRT_2PI: f64 = 0.3989422804014327;
/// `1 / sqrt(pi)`.
const FRAC_1_SQRT_PI: f64 = 0.5641895835477563;
/// `1 / sqrt(2)` less its `f64` rounding [`FRAC_1_SQRT_2`].
const FRAC_1_SQRT_2_LO: f64 = -4.833646656726457e-17;

/// `sum(coefficients[k] * z^k)` by Horner's rule.
fn polynomial(coefficients: &[f64], z: f64) -> f64 {
    coefficients.iter().rev().fold(0.0, |acc, &c| acc * z + c)
}

/// `x - round(x)`, exact, in `[-1/2, 1/2]` (0 for `|x| >= 2^52`).
fn distance_to_integer(x: f64) -> f64 {
    x - x.round()
}

/// `sin(pi x)`, with the argument reduced exactly.
fn sin_pi(x: f64) -> f64 {
    // sin(pi x) = (-1)^n sin(pi r) for x = n + r.
    let r = distance_to_integer(x);
    let odd = (x - r) % 2.0 != 0.0;
    let s = (PI * r).sin();
    if odd {
        -s
    } else {
        s
    }
}

/// `pi / tan(pi x)`, with the argument reduced exactly (period 1).
fn pi_cot_pi(x: f64) -> f64 {
    let r = distance_to_integer(x);
    PI / (PI * r).tan()
}

/// Whether `x` is a pole of the gamma function (0 or a negative integer).
fn is_gamma_pole(x: f64) -> bool {
    x <= 0.0 && x == x.floor()
}

/// `ln |Gamma(x)|`: `+inf` at the poles (0 and the negative integers) and at
/// `±inf`, NaN for NaN.
pub fn lgamma_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() || is_gamma_pole(x) {
        return f64::INFINITY;
    }
    if x.abs() < 1e-17 {
        // lgamma(x) = -ln|x| - euler x + O(x^2), and euler x is below an ulp.
        return -ln_f64(x.abs());
    }
    if x < 0.5 {
        // Gamma(x) Gamma(1 - x) = pi / sin(pi x).
        return ln_f64(PI / sin_pi(x).abs()) - lgamma_positive(1.0 - x);
    }
    lgamma_positive(x)
}

/// `lgamma` for `x >= 1/2`.
fn lgamma_positive(x: f64) -> f64 {
    if x < 1.5 {
        // lgamma(x) = lgamma(x + 1) - ln(x), x + 1 = 2 + (x - 1).
        let z = x - 1.0;
        return lgamma_near_2(z) - ln_1p_f64(z);
    }
    if x < 13.0 {
        // lgamma(x) = lgamma(x - n) + ln((x - 1) ... (x - n)), each step exact.
        let mut y = x;
        let mut product = 1.0;
        while y >= 2.5 {
            y -= 1.0;
            product *= y;
        }
        return lgamma_near_2(y - 2.0) + ln_f64(product);
    }
    (x - 0.5) * ln_f64(x) - x + LN_SQRT_2PI + stirling_correction(x)
}

/// `lgamma(x) - ((x - 1/2) ln x - x + ln(2 pi) / 2)` for `x >= 13`: Stirling's
/// series with its first eight terms.
fn stirling_correction(x: f64) -> f64 {
    let r = 1.0 / x;
    let r2 = r * r;
    r * polynomial(
        &[
            1.0 / 12.0,
            -1.0 / 360.0,
            1.0 / 1260.0,
            -1.0 / 1680.0,
            1.0 / 1188.0,
            -691.0 / 360360.0,
            1.0 / 156.0,
            -3617.0 / 122400.0,
        ],
        r2,
    )
}

/// `lgamma(2 + z)` for `|z| <= 1/2`: its Taylor series.
fn lgamma_near_2(z: f64) -> f64 {
    z * polynomial(&LGAMMA_NEAR_2, z)
}

/// The digamma function `Gamma'(x) / Gamma(x)`: NaN at the poles (0 and the
/// negative integers), at `-inf` and for NaN; `+inf` at `+inf`.
pub fn digamma_f64(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || is_gamma_pole(x) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        // digamma(1 - x) - digamma(x) = pi cot(pi x).
        return digamma_positive(1.0 - x) - pi_cot_pi(x);
    }
    digamma_positive(x)
}

/// `digamma` for `x > 0`.
fn digamma_positive(x: f64) -> f64 {
    let z = (x - DIGAMMA_ROOT_HI) - DIGAMMA_ROOT_LO;
    if z.abs() <= 0.25 {
        // Near the root, where the value is small: its Taylor series.
        return z * polynomial(&DIGAMMA_NEAR_ROOT, z);
    }
    // digamma(x) = digamma(x + n) - sum(1 / (x + k)), then the asymptotic series.
    let mut y = x;
    let mut shift = 0.0;
    while y < 10.0 {
        shift -= 1.0 / y;
        y += 1.0;
    }
    let r2 = 1.0 / (y * y);
    let series = r2
        * polynomial(
            &[
                -1.0 / 12.0,
                1.0 / 120.0,
                -1.0 / 252.0,
                1.0 / 240.0,
                -1.0 / 132.0,
                691.0 / 32760.0,
                -1.0 / 12.0,
                3617.0 / 8160.0,
            ],
            r2,
        );
    shift + (ln_f64(y) - 0.5 / y + series)
}

/// The trigamma function, the derivative of digamma: `+inf` at the poles
/// (0 and the negative integers), 0 at `+inf`, NaN at `-inf` and for NaN.
pub fn trigamma_f64(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if is_gamma_pole(x) {
        return f64::INFINITY;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x < 0.0 {
        // trigamma(x) + trigamma(1 - x) = pi^2 / sin^2(pi x).
        let s = PI / sin_pi(x);
        return s * s - trigamma_positive(1.0 - x);
    }
    trigamma_positive(x)
}

/// `trigamma` for `x > 0`.
fn trigamma_positive(x: f64) -> f64 {
    let mut y = x;
    let mut shift = 0.0;
    while y < 10.0 {
        shift += 1.0 / (y * y);
        y += 1.0;
    }
    let r = 1.0 / y;
    let r2 = r * r;
    let series = r2
        * r
        * polynomial(
            &[
                1.0 / 6.0,
                -1.0 / 30.0,
                1.0 / 42.0,
                -1.0 / 30.0,
                5.0 / 66.0,
                -691.0 / 2730.0,
                7.0 / 6.0,
                -3617.0 / 510.0,
            ],
            r2,
        );
    shift + (r + 0.5 * r2 + series)
}

/// `erf(x)` for `|x| < 1/2`: its Taylor series, summed until the terms
/// no longer change the sum.
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    for n in 1..40 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        let next = sum + add;
        if next == sum {
            break;
        }
        sum = next;
    }
    FRAC_2_SQRT_PI * sum
}

/// `exp(x^2) erfc(x)` for `x >= 1/2`: Taylor series around the centers of
/// the intervals of width 1/2 up to 8, the asymptotic series beyond.
fn erfcx_from_half(x: f64) -> f64 {
    if x < 8.0 {
        let i = (((x - 0.5) * 2.0) as usize).min(ERFCX_TAYLOR.len() - 1);
        let center = 0.75 + 0.5 * i as f64;
        return polynomial(&ERFCX_TAYLOR[i], x - center);
    }
    // erfcx(x) = 1 / (x sqrt(pi)) sum((-1)^n (2n - 1)!! / (2 x^2)^n).
    let inv = 1.0 / (2.0 * x * x);
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..30 {
        term *= -((2 * n - 1) as f64) * inv;
        sum += term;
    }
    FRAC_1_SQRT_PI / x * sum
}

/// `exp(-x^2)` with the rounding error of `x^2` taken into account.
fn exp_minus_square(x: f64) -> f64 {
    let s = x * x;
    let e = x.mul_add(x, -s);
    exp_f64(-s) * (1.0 - e)
}

/// The complementary error function `1 - erf(x)`, accurate relative to its
/// value also where it is tiny (large `x`).
pub fn erfc_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.abs() < 0.5 {
        return 1.0 - erf_series(x);
    }
    if x < 0.0 {
        return 2.0 - erfc_f64(-x);
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    exp_minus_square(x) * erfcx_from_half(x)
}

/// The error function.
pub fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.abs() < 0.5 {
        return erf_series(x);
    }
    let e = 1.0 - erfc_f64(x.abs());
    if x < 0.0 {
        -e
    } else {
        e
    }
}

/// The standard normal CDF `Phi(x) = erfc(-x / sqrt(2)) / 2`, accurate
/// relative to its value in the lower tail: `-x / sqrt(2)` is carried as a
/// sum of two floats, and the small one enters through erfc's derivative.
pub fn phi_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return if x > 0.0 { 1.0 } else { 0.0 };
    }
    let hi = -x * FRAC_1_SQRT_2;
    let lo = (-x).mul_add(FRAC_1_SQRT_2, -hi) + (-x) * FRAC_1_SQRT_2_LO;
    0.5 * (erfc_f64(hi) - lo * FRAC_2_SQRT_PI * exp_minus_square(hi))
}

/// The inverse of the standard normal CDF: `-inf` at 0, `+inf` at 1, NaN
/// outside `[0, 1]` and for NaN. Acklam's rational approximation (relative
/// error below 1.2e-9), then Halley's method on [`phi_f64`] until it
/// no longer moves.
pub fn inv_phi_f64(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p > 0.5 {
        // 1 - p is exact here.
        return -inv_phi_lower(1.0 - p);
    }
    inv_phi_lower(p)
}

/// `inv_Phi(p)` for `0 < p <= 1/2`.
fn inv_phi_lower(p: f64) -> f64 {
    let mut x = acklam(p);
    // Halley's steps on Phi(x) - p = 0, whose residual is computed as
    // erf(x / sqrt 2) / 2 - (p - 1/2) near the center (to keep its
    // relative accuracy where x is small) and as Phi(x) - p in the tail.
    let central = p > 0.25;
    for _ in 0..4 {
        let density = exp_f64(-0.5 * x * x) * FRAC_1_SQRT_2PI;
        if density == 0.0 {
            break;
        }
        let residual = if central {
            0.5 * erf_f64(x * FRAC_1_SQRT_2) - (p - 0.5)
        } else {
            phi_f64(x) - p
        };
        let u = residual / density;
        let step = u / (1.0 + 0.5 * x * u);
        x -= step;
        if step.abs() <= 1e-17 * x.abs() {
            break;
        }
    }
    x
}

/// Acklam's approximation of `inv_Phi(p)` for `0 < p <= 1/2`.
fn acklam(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.383_577_518_672_69e2,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    // Horner with the coefficients from the highest power down.
    let horner = |c: &[f64], z: f64| c.iter().fold(0.0, |acc, &k| acc * z + k);
    if p < 0.02425 {
        let q = (-2.0 * ln_f64(p)).sqrt();
        horner(&C, q) / (horner(&D, q) * q + 1.0)
    } else {
        let q = p - 0.5;
        let r = q * q;
        horner(&A, r) * q / (horner(&B, r) * r + 1.0)
    }
}

macro_rules! in_f64 {
    ($($f32name:ident = $f64name:ident;)*) => {
        $(
            #[doc = concat!("[`", stringify!($f64name), "`] of the `f32` argument, rounded to `f32`.")]
            pub fn $f32name(x: f32) -> f32 {
                $f64name(x as f64) as f32
            }
        )*
    };
}

in_f64! {
    lgamma_f32 = lgamma_f64;
    digamma_f32 = digamma_f64;
    trigamma_f32 = trigamma_f64;
    erf_f32 = erf_f64;
    erfc_f32 = erfc_f64;
    phi_f32 = phi_f64;
    inv_phi_f32 = inv_phi_f64;
}
