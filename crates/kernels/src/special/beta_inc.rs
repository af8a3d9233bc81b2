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
        Dual {
            v,
            da: 0.0,
            db: 0.0,
        }
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

/// `ln I_x(a, b)` (or, `complement`, `ln(1 - I_x(a, b))`) with its
/// derivatives in `a` and `b`, for `a, b > 0` and `0 < x < 1`: the
/// fraction of the tail below the mean directly, the other tail as its
/// complement.
fn log_beta_inc(a: f64, b: f64, x: f64, complement_wanted: bool) -> Dual {
    let lower = x < (a + 1.0) / (a + b + 2.0);
    let tail = if lower {
        lower_fraction(a, b, x)
    } else {
        lower_fraction(b, a, 1.0 - x).swap()
    };
    if lower != complement_wanted {
        tail
    } else {
        complement(tail)
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

/// Which function of [`incomplete`] to give: `ln I` or `ln(1 - I)`
/// (`complement`), the value or its derivative in `a` or `b`.
#[derive(Clone, Copy)]
struct Part {
    complement: bool,
    derivative: Derivative,
}

#[derive(Clone, Copy, PartialEq)]
enum Derivative {
    Value,
    Da,
    Db,
}

/// `ln I_x(a, b)` or `ln(1 - I_x(a, b))` or one of their derivatives,
/// with the limits at `x = 0` and `x = 1`; NaN outside `a > 0`, `b > 0`
/// (finite) and `0 <= x <= 1`.
fn incomplete(part: Part, a: f64, b: f64, x: f64) -> f64 {
    let shapes_ok = a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite();
    if !shapes_ok || !(0.0..=1.0).contains(&x) {
        return f64::NAN;
    }
    if x == 0.0 || x == 1.0 {
        // The function whose argument vanishes there (ln I at 0, ln(1 - I)
        // at 1) is -inf, like its derivative in the exponent of that end
        // (a at 0, b at 1); the other function and derivatives are 0.
        let vanishing = (x == 0.0) != part.complement;
        let exponent = if x == 0.0 {
            Derivative::Da
        } else {
            Derivative::Db
        };
        return match part.derivative {
            Derivative::Value if vanishing => f64::NEG_INFINITY,
            d if vanishing && d == exponent => f64::NEG_INFINITY,
            _ => 0.0,
        };
    }
    let l = log_beta_inc(a, b, x, part.complement);
    match part.derivative {
        Derivative::Value => l.v,
        Derivative::Da => l.da,
        Derivative::Db => l.db,
    }
}

/// Defines the public function `$name(a, b, x)` of [`incomplete`]'s `$part`.
macro_rules! incomplete_fn {
    ($(#[$doc:meta])* $name:ident, $complement:expr, $derivative:ident) => {
        $(#[$doc])*
        pub fn $name(a: f64, b: f64, x: f64) -> f64 {
            let part = Part {
                complement: $complement,
                derivative: Derivative::$derivative,
            };
            incomplete(part, a, b, x)
        }
    };
}

incomplete_fn!(
    /// `ln I_x(a, b)`, `I` the regularized incomplete beta function
    /// (`beta_lcdf(x | a, b)`): `-inf` at `x = 0`, 0 at `x = 1`.
    log_beta_inc_f64, false, Value
);
incomplete_fn!(
    /// The derivative of [`log_beta_inc_f64`] in `a`.
    log_beta_inc_da_f64, false, Da
);
incomplete_fn!(
    /// The derivative of [`log_beta_inc_f64`] in `b`.
    log_beta_inc_db_f64, false, Db
);
incomplete_fn!(
    /// `ln(1 - I_x(a, b)) = ln I_(1-x)(b, a)` (`beta_lccdf(x | a, b)`),
    /// accurate where `I` is close to 1: 0 at `x = 0`, `-inf` at `x = 1`.
    log_beta_inc_c_f64, true, Value
);
incomplete_fn!(
    /// The derivative of [`log_beta_inc_c_f64`] in `a`.
    log_beta_inc_c_da_f64, true, Da
);
incomplete_fn!(
    /// The derivative of [`log_beta_inc_c_f64`] in `b`.
    log_beta_inc_c_db_f64, true, Db
);

/// The smallest `k` in `0..=n` whose binomial CDF with `n` trials of
/// probability `p` reaches `u` in `[0, 1)` (a binomial draw from a uniform
/// one), as a float; NaN for an `n` that is not a nonnegative integer
/// below 2^53, a `p` outside `[0, 1]` or a `u` outside `[0, 1)`.
///
/// Starts at the normal approximation's quantile, takes the CDF there
/// (`1 - I_p(k + 1, n - k)`); steps up by the masses' recurrence
/// `m(k + 1) = m(k) (n - k) p / ((k + 1) (1 - p))`, down by the CDF.
pub fn binomial_inv_f64(n: f64, p: f64, u: f64) -> f64 {
    let n_ok = (0.0..9.007_199_254_740_992e15).contains(&n) && n.fract() == 0.0;
    if !n_ok || !(0.0..=1.0).contains(&p) || !(0.0..1.0).contains(&u) {
        return f64::NAN;
    }
    if p == 0.0 || n == 0.0 {
        return 0.0;
    }
    if p == 1.0 {
        return n;
    }
    let q = 1.0 - p;
    let mean = n * p;
    let guess = mean + (mean * q).sqrt() * super::inv_phi_f64(u.max(1e-300));
    let mut k = guess.round().clamp(0.0, n);
    let (ln_p, ln_q) = (ln_f64(p), ln_1p_f64(-p));
    let mass = |k: f64| {
        let ln_choose = -ln_f64(n + 1.0) - lbeta_f64(n - k + 1.0, k + 1.0);
        exp_f64(ln_choose + k * ln_p + (n - k) * ln_q)
    };
    let cdf_at = |k: f64| {
        if k >= n {
            1.0
        } else {
            exp_f64(log_beta_inc_c_f64(k + 1.0, n - k, p))
        }
    };
    let mut cdf = cdf_at(k);
    if cdf < u {
        // Up by the recurrence: the first k whose CDF reaches u.
        let odds = p / q;
        let mut m = mass(k);
        while cdf < u && m > 0.0 && k < n {
            m *= (n - k) * odds / (k + 1.0);
            k += 1.0;
            cdf += m;
        }
    } else {
        // Down while the CDF below k still reaches u (each CDF from the
        // fraction: a difference of neighbours would lose the lower tail).
        while k > 0.0 && cdf_at(k - 1.0) >= u {
            k -= 1.0;
        }
    }
    k
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
        assert_eq!(log_beta_inc_c_f64(2.0, 3.0, 0.0), 0.0);
        assert_eq!(log_beta_inc_c_f64(2.0, 3.0, 1.0), f64::NEG_INFINITY);
        assert_eq!(log_beta_inc_da_f64(2.0, 3.0, 0.0), f64::NEG_INFINITY);
        assert_eq!(log_beta_inc_c_db_f64(2.0, 3.0, 1.0), f64::NEG_INFINITY);
        assert_eq!(log_beta_inc_c_da_f64(2.0, 3.0, 1.0), 0.0);
    }

    #[test]
    fn binomial_quantile_inverts_the_cdf() {
        // The CDF by summing the masses from 0, for small n.
        for (n, p) in [(1.0, 0.3f64), (10.0, 0.5), (37.0, 0.02), (60.0, 0.97)] {
            let mut cdf = Vec::new();
            let mut total = 0.0;
            for k in 0..=(n as u64) {
                let k = k as f64;
                let ln_mass = -(n + 1.0f64).ln() - lbeta_f64(n - k + 1.0, k + 1.0)
                    + k * p.ln()
                    + (n - k) * (-p).ln_1p();
                total += ln_mass.exp();
                cdf.push(total);
            }
            for u in [0.0, 1e-9, 0.05, 0.3, 0.5, 0.77, 0.999_999] {
                let want = cdf
                    .iter()
                    .position(|c| *c >= u - 1e-12)
                    .unwrap_or(n as usize);
                assert_eq!(binomial_inv_f64(n, p, u), want as f64, "n {n} p {p} u {u}");
            }
        }
        assert_eq!(binomial_inv_f64(5.0, 0.0, 0.5), 0.0);
        assert_eq!(binomial_inv_f64(5.0, 1.0, 0.5), 5.0);
        assert!(binomial_inv_f64(2.5, 0.5, 0.5).is_nan());
        assert!(binomial_inv_f64(3.0, 1.5, 0.5).is_nan());
    }

    #[test]
    fn closed_forms() {
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
        for x in [1e-300, 1e-10, 0.1, 0.5, 0.9, 1.0 - 1e-9] {
            let close = |got: f64, want: f64| (got - want).abs() <= 1e-14 * (1.0 + want.abs());
            assert!(close(log_beta_inc_f64(1.0, 1.0, x), x.ln()), "x = {x}");
            assert!(
                close(log_beta_inc_f64(3.5, 1.0, x), 3.5 * x.ln()),
                "x = {x}"
            );
            let want = (-(2.5 * (-x).ln_1p()).exp_m1()).ln();
            assert!(close(log_beta_inc_f64(1.0, 2.5, x), want), "x = {x}");
        }
    }
}
