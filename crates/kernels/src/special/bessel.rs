//! The modified Bessel functions of the first kind of orders 0 and 1, as
//! `von_mises` needs them: `ln(I0(x) e^-|x|)` (the logarithm of the
//! exponentially scaled function, which stays small where `I0` overflows)
//! and the ratio `I1(x) / I0(x)` (from which the derivative of the first
//! follows); a negative `x` is taken by symmetry (`I0` is even, `I1` odd).
//!
//! Below [`ASYMPTOTIC_FROM`] the power series, whose terms are all positive
//! (no cancellation); above it the asymptotic series
//! `I_v(x) ~ e^x / sqrt(2 pi x) (1 - (mu - 1) / (8x) + (mu - 1)(mu - 9) / (2! (8x)^2) - ...)`,
//! `mu = 4 v^2`, summed until its terms stop shrinking or fall below the
//! rounding of the sum.

use crate::vmath::ln_f64;

/// Where the asymptotic series takes over: its smallest term there is far
/// below `f64`'s rounding.
const ASYMPTOTIC_FROM: f64 = 30.0;

/// `ln(2 pi) / 2`.
const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// `sum_k (x^2 / 4)^k / (k! (k + order)!)`: `I0(x)` for order 0, `I1(x) / (x / 2)` for order 1.
fn power_series(x: f64, order: u32) -> f64 {
    let q = 0.25 * x * x;
    let mut term = 1.0;
    let mut sum = term;
    for k in 1..500u32 {
        term *= q / (f64::from(k) * f64::from(k + order));
        sum += term;
        if term <= sum * 1e-17 {
            break;
        }
    }
    sum
}

/// The asymptotic series of `I_v(x) sqrt(2 pi x) / e^x` for `v` 0 or 1.
fn asymptotic_series(x: f64, order: u32) -> f64 {
    let mu = 4.0 * f64::from(order * order);
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..60u32 {
        let odd = f64::from(2 * k - 1);
        let next = -term * (mu - odd * odd) / (f64::from(k) * 8.0 * x);
        if next.abs() >= term.abs() {
            break;
        }
        term = next;
        sum += term;
        if term.abs() <= sum.abs() * 1e-17 {
            break;
        }
    }
    sum
}

/// `ln(I0(x) e^-|x|)`, `I0` the modified Bessel function of the first
/// kind of order 0 (even in `x`; `-inf` at infinity, NaN for NaN).
pub fn log_bessel_i0e_f64(x: f64) -> f64 {
    let x = x.abs();
    if x.is_nan() {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return f64::NEG_INFINITY;
    }
    if x < ASYMPTOTIC_FROM {
        return ln_f64(power_series(x, 0)) - x;
    }
    -0.5 * ln_f64(x) - LN_SQRT_2PI + ln_f64(asymptotic_series(x, 0))
}

/// `I1(x) / I0(x)` (odd in `x`; 1 at `+inf`): the derivative of
/// [`log_bessel_i0e_f64`] is this less the sign of `x`.
pub fn bessel_i1_over_i0_f64(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let a = x.abs();
    let r = if a == f64::INFINITY {
        1.0
    } else if a < ASYMPTOTIC_FROM {
        0.5 * a * power_series(a, 1) / power_series(a, 0)
    } else {
        asymptotic_series(a, 1) / asymptotic_series(a, 0)
    };
    r.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_values_and_symmetry() {
        assert_eq!(log_bessel_i0e_f64(0.0), 0.0);
        assert_eq!(bessel_i1_over_i0_f64(0.0), 0.0);
        assert_eq!(log_bessel_i0e_f64(-2.5), log_bessel_i0e_f64(2.5));
        assert_eq!(bessel_i1_over_i0_f64(-2.5), -bessel_i1_over_i0_f64(2.5));
        // The two series agree where they meet.
        let below = ln_f64(power_series(30.0, 0)) - 30.0;
        let above = -0.5 * ln_f64(30.0) - LN_SQRT_2PI + ln_f64(asymptotic_series(30.0, 0));
        assert!(
            (below - above).abs() < 1e-14 * above.abs(),
            "{below} {above}"
        );
        let below = 15.0 * power_series(30.0, 1) / power_series(30.0, 0);
        let above = asymptotic_series(30.0, 1) / asymptotic_series(30.0, 0);
        assert!((below - above).abs() < 1e-15, "{below} {above}");
    }
}
