//! The logarithm of the regularized incomplete beta function
//! `I_x(a, b) = B(x; a, b) / B(a, b)` (the CDF of `beta(a, b)` at `x`, and
//! through it those of `student_t`, `binomial` and `neg_binomial_2`), with
//! its derivatives in `a` and `b`, and `ln B(a, b)` itself.
//!
//! Below `x = (a + 1) / (a + b + 2)` the continued fraction
//! `I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) / (1 + d1 / (1 + d2 / (1 + ...)))`
//! with `d(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))` and
//! `d(2m) = m (b - m) x / ((a + 2m - 1)(a + 2m))`, evaluated by the modified
//! Lentz method, converges fast; above it the same fraction gives
//! `1 - I_x(a, b) = I_(1-x)(b, a)`, and `ln I` is `ln(1 - that)`. The
//! derivatives in `a` and `b` are carried through the fraction as dual
//! numbers, so they converge with it. The prefactor is taken in
//! logarithms, so neither tail underflows.
//!
//! `1 - x` is formed from `x`, so close to `x = 1` it carries the rounding
//! of `x`: a caller that knows `1 - x` exactly asks for the complement as
//! `I_(1-x)(b, a)` instead.

use super::{digamma_f64, lgamma_f64, stirling_correction};
use crate::vmath::{exp_f64, ln_1p_f64, ln_f64};

/// The most terms the fraction takes (reached only for shapes near 10^12).
const MAX_TERMS: usize = 1_000_000;

/// Where the fraction's guards take a vanishing denominator.
const TINY: f64 = 1e-300;

/// A value and its derivatives in `a` and `b`.
#[derive(Clone, Copy)]
struct Dual {
    v: f64,
    da: f64,
    db: f64,
}

impl Dual {
    fn constant(v: f64) -> Dual {
        Dual { v, da: 0.0, db: 0.0 }
    }

    fn add(self, o: Dual) -> Dual {
        Dual {
            v: self.v + o.v,
            da: self.da + o.da,
            db: self.db + o.db,
        }
    }

    fn mul(self, o: Dual) -> Dual {
        Dual {
            v: self.v * o.v,
            da: self.da * o.v + self.v * o.da,
            db: self.db * o.v + self.v * o.db,
        }
    }

    fn recip(self) -> Dual {
        let r = 1.0 / self.v;
        Dual {
            v: r,
            da: -self.da * r * r,
            db: -self.db * r * r,
        }
    }

    /// The same with `a` and `b` exchanged.
    fn swap(self) -> Dual {
        Dual {
            v: self.v,
            da: self.db,
            db: self.da,
        }
    }

    /// A denominator kept away from 0 (the Lentz method's guard).
    fn guard(self) -> Dual {
        if self.v.abs() < TINY {
            Dual::constant(TINY)
        } else {
            self
        }
    }
}

/// `ln B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)` for `a, b > 0`,
/// without the cancellation of the three terms when the larger argument
/// is large: then `lgamma(a) - lgamma(a + b)` is taken from Stirling's
/// series of both, `-(a - 1/2) ln(1 + b/a) - b ln(a + b) + b` plus the
/// difference of the two series' corrections.
pub fn lbeta_f64(a: f64, b: f64) -> f64 {
    let (large, small) = if a >= b { (a, b) } else { (b, a) };
    if large.is_nan() || small.is_nan() {
        return f64::NAN;
    }
    if large < 13.0 {
        return lgamma_f64(large) + lgamma_f64(small) - lgamma_f64(large + small);
    }
    let sum = large + small;
    let difference = -(large - 0.5) * ln_1p_f64(small / large) - small * ln_f64(sum)
        + small
        + (stirling_correction(large) - stirling_correction(sum));
    lgamma_f64(small) + difference
}

/// `ln I_x(a, b)` with its derivatives in `a` and `b`, for `a, b > 0` and
/// `0 < x < 1`.
fn log_beta_inc(a: f64, b: f64, x: f64) -> Dual {
    if x < (a + 1.0) / (a + b + 2.0) {
        lower_fraction(a, b, x)
    } else {
        complement(lower_fraction(b, a, 1.0 - x).swap())
    }
}

/// `ln(1 - e^l)` and its derivatives, from `l = ln F` and its derivatives.
fn complement(l: Dual) -> Dual {
    let f = exp_f64(l.v);
    let v = ln_1p_f64(-f);
    // d ln(1 - F) = -F d ln F / (1 - F).
    let scale = -f / exp_f64(v);
    Dual {
        v,
        da: scale * l.da,
        db: scale * l.db,
    }
}

/// `ln I_x(a, b)` by the continued fraction, for `x < (a + 1) / (a + b + 2)`.
fn lower_fraction(a: f64, b: f64, x: f64) -> Dual {
    let ln_x = ln_f64(x);
    let ln_1mx = ln_1p_f64(-x);
    let psi_ab = digamma_f64(a + b);
    // ln(x^a (1 - x)^b / (a B(a, b))) and its derivatives.
    let prefactor = Dual {
        v: a * ln_x + b * ln_1mx - lbeta_f64(a, b) - ln_f64(a),
        da: ln_x - digamma_f64(a) + psi_ab - 1.0 / a,
        db: ln_1mx - digamma_f64(b) + psi_ab,
    };
    let h = fraction(a, b, x);
    Dual {
        v: prefactor.v + ln_f64(h.v),
        da: prefactor.da + h.da / h.v,
        db: prefactor.db + h.db / h.v,
    }
}

/// `1 / (1 + d1 / (1 + d2 / (1 + ...)))` by the modified Lentz method, with
/// its derivatives in `a` and `b`.
fn fraction(a: f64, b: f64, x: f64) -> Dual {
    let one = Dual::constant(1.0);
    let mut c = one;
    let mut d = one.add(coefficient_odd(a, b, x, 0.0)).guard().recip();
    let mut h = d;
    for m in 1..MAX_TERMS {
        let m = m as f64;
        for coefficient in [coefficient_even(a, b, x, m), coefficient_odd(a, b, x, m)] {
            d = one.add(coefficient.mul(d)).guard().recip();
            c = one.add(coefficient.mul(c.recip())).guard();
            h = h.mul(d.mul(c));
        }
        let delta = d.mul(c);
        let settled = |dv: f64, hv: f64| dv.abs() <= 4e-16 * (1.0 + (hv / h.v).abs());
        if (delta.v - 1.0).abs() <= 4e-16 && settled(delta.da, h.da) && settled(delta.db, h.db) {
            break;
        }
    }
    h
}

/// `d(2m) = m (b - m) x / ((a + 2m - 1)(a + 2m))` and its derivatives.
fn coefficient_even(a: f64, b: f64, x: f64, m: f64) -> Dual {
    let p = a + 2.0 * m - 1.0;
    let q = a + 2.0 * m;
    let v = m * (b - m) * x / (p * q);
    Dual {
        v,
        da: -v * (1.0 / p + 1.0 / q),
        db: m * x / (p * q),
    }
}

/// `d(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))` and its derivatives.
fn coefficient_odd(a: f64, b: f64, x: f64, m: f64) -> Dual {
    let p = a + 2.0 * m;
    let q = a + 2.0 * m + 1.0;
    let u = a + m;
    let w = a + b + m;
    let v = -u * w * x / (p * q);
    Dual {
        v,
        da: v * (1.0 / u + 1.0 / w - 1.0 / p - 1.0 / q),
        db: -u * x / (p * q),
    }
}

/// Which function of [`incomplete`] to give.
#[derive(Clone, Copy)]
enum Part {
    Log,
    LogDa,
    LogDb,
}

/// `ln I_x(a, b)` or one of its derivatives, with the limits at `x = 0`
/// and `x = 1`; NaN outside `a > 0`, `b > 0` (finite) and `0 <= x <= 1`.
fn incomplete(part: Part, a: f64, b: f64, x: f64) -> f64 {
    let shapes_ok = a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite();
    if !shapes_ok || !(0.0..=1.0).contains(&x) {
        return f64::NAN;
    }
    if x == 0.0 {
        // ln I ~ a ln x + ...: -inf, and so is its derivative in a.
        return match part {
            Part::Log | Part::LogDa => f64::NEG_INFINITY,
            Part::LogDb => 0.0,
        };
    }
    if x == 1.0 {
        return 0.0;
    }
    let l = log_beta_inc(a, b, x);
    match part {
        Part::Log => l.v,
        Part::LogDa => l.da,
        Part::LogDb => l.db,
    }
}

/// `ln I_x(a, b)`, `I` the regularized incomplete beta function
/// (`beta_lcdf(x | a, b)`): `-inf` at `x = 0`, 0 at `x = 1`.
pub fn log_beta_inc_f64(a: f64, b: f64, x: f64) -> f64 {
    incomplete(Part::Log, a, b, x)
}

/// The derivative of [`log_beta_inc_f64`] in `a`.
pub fn log_beta_inc_da_f64(a: f64, b: f64, x: f64) -> f64 {
    incomplete(Part::LogDa, a, b, x)
}

/// The derivative of [`log_beta_inc_f64`] in `b`.
pub fn log_beta_inc_db_f64(a: f64, b: f64, x: f64) -> f64 {
    incomplete(Part::LogDb, a, b, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_domain() {
        assert_eq!(log_beta_inc_f64(2.0, 3.0, 0.0), f64::NEG_INFINITY);
        assert_eq!(log_beta_inc_f64(2.0, 3.0, 1.0), 0.0);
        assert!(log_beta_inc_f64(0.0, 3.0, 0.5).is_nan());
        assert!(log_beta_inc_f64(2.0, -1.0, 0.5).is_nan());
        assert!(log_beta_inc_f64(2.0, 3.0, 1.5).is_nan());
        assert!(log_beta_inc_f64(2.0, 3.0, f64::NAN).is_nan());
    }

    #[test]
    fn closed_forms() {
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
        for x in [1e-300, 1e-10, 0.1, 0.5, 0.9, 1.0 - 1e-9] {
            let close = |got: f64, want: f64| (got - want).abs() <= 1e-14 * (1.0 + want.abs());
            assert!(close(log_beta_inc_f64(1.0, 1.0, x), x.ln()), "x = {x}");
            assert!(close(log_beta_inc_f64(3.5, 1.0, x), 3.5 * x.ln()), "x = {x}");
            let want = (-(2.5 * (-x).ln_1p()).exp_m1()).ln();
            assert!(close(log_beta_inc_f64(1.0, 2.5, x), want), "x = {x}");
        }
    }
}
