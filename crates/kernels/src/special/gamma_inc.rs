//! The regularized incomplete gamma functions `P(a, x)` and
//! `Q(a, x) = 1 - P(a, x)` as logarithms (the CDFs of `gamma`, `inv_gamma`,
//! `chi_square` and `poisson`), their derivatives in the shape `a`, the
//! inverse of `P` in `x` (gamma draws) and the inverse of the Poisson CDF
//! (Poisson draws).
//!
//! Below `x = a + 1` the power series
//! `P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))`,
//! whose terms are all positive; above it the continued fraction of `Q`
//! (Legendre's), evaluated by the modified Lentz method. Each is summed
//! until a term no longer changes the result. The derivative in `a` is
//! carried through the same sums as a dual number (value and derivative),
//! so it converges with them. The prefactor `a ln x - x - lgamma(a)` is
//! taken in logarithms, so neither tail underflows: `ln Q(a, x)` stays
//! finite for any finite `x`, `ln P(a, x)` for any positive one.

use super::{digamma_f64, inv_phi_f64, lgamma_f64};
use crate::vmath::{exp_f64, ln_1p_f64, ln_f64};

/// The most terms either sum takes (reached only for shapes above 10^9).
const MAX_TERMS: usize = 1_000_000;

/// Where the continued fraction's guards take a vanishing denominator.
const TINY: f64 = 1e-300;

/// A value and its derivative in `a`.
#[derive(Clone, Copy)]
struct Dual {
    v: f64,
    d: f64,
}

/// `ln P(a, x)` and `ln Q(a, x)`, each with its derivative in `a`.
struct Logs {
    p: Dual,
    q: Dual,
}

/// `ln P(a, x)` and `ln Q(a, x)` with their derivatives in `a`, for
/// `a > 0` and `0 < x < inf`.
fn logs(a: f64, x: f64) -> Logs {
    let ln_x = ln_f64(x);
    // ln(x^a e^-x / Gamma(a)) and its derivative in a.
    let prefactor = Dual {
        v: a * ln_x - x - lgamma_f64(a),
        d: ln_x - digamma_f64(a),
    };
    if x < a + 1.0 {
        let p = lower_series(a, x, prefactor);
        let q = complement(p);
        Logs { p, q }
    } else {
        let q = upper_fraction(a, x, prefactor);
        let p = complement(q);
        Logs { p, q }
    }
}

/// `ln(1 - e^l)` and its derivative, from `l = ln F` and its derivative.
fn complement(l: Dual) -> Dual {
    let f = exp_f64(l.v);
    let v = ln_1p_f64(-f);
    // d ln(1 - F) = -F dlnF / (1 - F).
    Dual {
        v,
        d: -f * l.d / exp_f64(v),
    }
}

/// `ln P(a, x)` by the power series, for `x < a + 1`.
fn lower_series(a: f64, x: f64, prefactor: Dual) -> Dual {
    // P = e^prefactor / a * S, S = sum t_n, t_0 = 1, t_n = t_{n-1} x / (a + n).
    let mut term = Dual { v: 1.0, d: 0.0 };
    let mut sum = term;
    for n in 1..MAX_TERMS {
        let denominator = a + n as f64;
        let r = x / denominator;
        term = Dual {
            v: term.v * r,
            d: term.d * r - term.v * r / denominator,
        };
        sum.v += term.v;
        sum.d += term.d;
        if term.v <= sum.v * 1e-17 && term.d.abs() <= sum.d.abs() * 1e-17 {
            break;
        }
    }
    Dual {
        v: prefactor.v - ln_f64(a) + ln_f64(sum.v),
        d: prefactor.d - 1.0 / a + sum.d / sum.v,
    }
}

/// `ln Q(a, x)` by the continued fraction, for `x >= a + 1`.
fn upper_fraction(a: f64, x: f64, prefactor: Dual) -> Dual {
    // Q = e^prefactor h, h = 1 / (b0 + a1 / (b1 + a2 / (b2 + ...))) with
    // b_i = x + 2i + 1 - a and a_i = -i (i - a).
    let mut b = Dual {
        v: x + 1.0 - a,
        d: -1.0,
    };
    let mut c = Dual {
        v: 1.0 / TINY,
        d: 0.0,
    };
    let mut d = recip(b);
    let mut h = d;
    for i in 1..MAX_TERMS {
        let i = i as f64;
        let an = Dual {
            v: -i * (i - a),
            d: i,
        };
        b.v += 2.0;
        d = guard(add(mul(an, d), b));
        c = guard(add(b, div(an, c)));
        d = recip(d);
        let delta = mul(d, c);
        h = mul(h, delta);
        if (delta.v - 1.0).abs() <= 4e-16 && delta.d.abs() <= 4e-16 * (1.0 + h.d.abs() / h.v) {
            break;
        }
    }
    Dual {
        v: prefactor.v + ln_f64(h.v),
        d: prefactor.d + h.d / h.v,
    }
}

fn add(a: Dual, b: Dual) -> Dual {
    Dual {
        v: a.v + b.v,
        d: a.d + b.d,
    }
}

fn mul(a: Dual, b: Dual) -> Dual {
    Dual {
        v: a.v * b.v,
        d: a.d * b.v + a.v * b.d,
    }
}

fn recip(a: Dual) -> Dual {
    let r = 1.0 / a.v;
    Dual {
        v: r,
        d: -a.d * r * r,
    }
}

fn div(a: Dual, b: Dual) -> Dual {
    mul(a, recip(b))
}

/// A denominator kept away from 0 (the Lentz method's guard).
fn guard(a: Dual) -> Dual {
    if a.v.abs() < TINY {
        Dual { v: TINY, d: 0.0 }
    } else {
        a
    }
}

/// Which function of [`incomplete`] to give.
#[derive(Clone, Copy)]
enum Part {
    LogP,
    LogQ,
    LogPDa,
    LogQDa,
}

/// One of `ln P`, `ln Q` or their derivatives in `a`, with the limits at
/// `x = 0` and `x = inf`; NaN outside `a > 0`, `x >= 0`.
fn incomplete(part: Part, a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() || a <= 0.0 || x < 0.0 || a == f64::INFINITY {
        return f64::NAN;
    }
    if x == 0.0 || x == f64::INFINITY {
        let at_zero = x == 0.0;
        return match part {
            Part::LogP if at_zero => f64::NEG_INFINITY,
            Part::LogQ if !at_zero => f64::NEG_INFINITY,
            Part::LogP | Part::LogQ => 0.0,
            // ln P(a, x) ~ a ln x near 0: its derivative in a is ln x.
            Part::LogPDa if at_zero => f64::NEG_INFINITY,
            Part::LogQDa | Part::LogPDa => 0.0,
        };
    }
    let logs = logs(a, x);
    match part {
        Part::LogP => logs.p.v,
        Part::LogQ => logs.q.v,
        Part::LogPDa => logs.p.d,
        Part::LogQDa => logs.q.d,
    }
}

/// `ln P(a, x)`, `P` the regularized lower incomplete gamma function
/// (`gamma_lcdf(x | a, 1)`): `-inf` at `x = 0`, 0 at infinity.
pub fn log_gamma_p_f64(a: f64, x: f64) -> f64 {
    incomplete(Part::LogP, a, x)
}

/// `ln Q(a, x) = ln(1 - P(a, x))`: 0 at `x = 0`, `-inf` at infinity.
pub fn log_gamma_q_f64(a: f64, x: f64) -> f64 {
    incomplete(Part::LogQ, a, x)
}

/// The derivative of [`log_gamma_p_f64`] in `a`.
pub fn log_gamma_p_da_f64(a: f64, x: f64) -> f64 {
    incomplete(Part::LogPDa, a, x)
}

/// The derivative of [`log_gamma_q_f64`] in `a`.
pub fn log_gamma_q_da_f64(a: f64, x: f64) -> f64 {
    incomplete(Part::LogQDa, a, x)
}

/// `ln x` for the `x` with `P(a, x) = u`: the logarithm of a draw of
/// `gamma(a, 1)` from a uniform `u` in `(0, 1)` (`-inf` for `u = 0`,
/// `inf` for `u = 1`, NaN outside or for `a` not positive and finite).
///
/// Newton's method on `t = ln x`: `ln P(a, e^t)` (or, above the median,
/// `ln Q(a, e^t)`) is concave in `t`, so from the Wilson-Hilferty start
/// the iterates approach the root from one side after the first step.
pub fn log_gamma_p_inv_f64(a: f64, u: f64) -> f64 {
    let shape_ok = a > 0.0 && a.is_finite();
    if !shape_ok || !(0.0..=1.0).contains(&u) {
        return f64::NAN;
    }
    if u == 0.0 {
        return f64::NEG_INFINITY;
    }
    if u == 1.0 {
        return f64::INFINITY;
    }
    let upper = u > 0.5;
    // The target: ln u, or ln(1 - u) above the median (1 - u exact there).
    let target = if upper { ln_1p_f64(-u) } else { ln_f64(u) };
    let mut t = start(a, u);
    for _ in 0..200 {
        let x = exp_f64(t);
        if x == 0.0 || x == f64::INFINITY {
            break;
        }
        let logs = logs(a, x);
        let (value, sign) = if upper {
            (logs.q.v, -1.0)
        } else {
            (logs.p.v, 1.0)
        };
        // d ln P / dt = x p(x) / P: e^(prefactor - ln P); the same over Q.
        let prefactor = a * t - x - lgamma_f64(a);
        let slope = sign * exp_f64(prefactor - value);
        let step = (value - target) / slope;
        if !step.is_finite() {
            break;
        }
        t -= step;
        if step.abs() <= 1e-15 * (1.0 + t.abs()) {
            break;
        }
    }
    t
}

/// The starting point of [`log_gamma_p_inv_f64`]: `ln x` of the
/// Wilson-Hilferty approximation, or of the lower tail's
/// `x = (u Gamma(a + 1))^(1 / a)` where that is smaller or the first fails.
fn start(a: f64, u: f64) -> f64 {
    let tail = (ln_f64(u) + lgamma_f64(a + 1.0)) / a;
    let z = inv_phi_f64(u);
    let c = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * a.sqrt());
    if c > 0.0 {
        let wilson = ln_f64(a) + 3.0 * ln_f64(c);
        if wilson.is_finite() && (u > 0.5 || wilson > tail) {
            return wilson;
        }
    }
    tail
}

/// The largest rate a Poisson draw takes (Stan's bound, `2^30`).
pub const POISSON_MAX_RATE: f64 = 1_073_741_824.0;

/// The smallest `k` with `F(k) >= u`, `F` the CDF of `poisson(lambda)`: a
/// draw from a uniform `u` in `[0, 1)` (NaN for a rate that is negative,
/// NaN or above [`POISSON_MAX_RATE`]).
///
/// Starts at the normal approximation's quantile, takes the CDF there
/// (`Q(k + 1, lambda)`) and the mass, and steps by the masses' recurrence
/// `p(k + 1) = p(k) lambda / (k + 1)` until the CDF crosses `u`.
pub fn poisson_inv_f64(lambda: f64, u: f64) -> f64 {
    if !(0.0..=POISSON_MAX_RATE).contains(&lambda) || !(0.0..1.0).contains(&u) {
        return f64::NAN;
    }
    if lambda == 0.0 {
        return 0.0;
    }
    let guess = lambda + lambda.sqrt() * inv_phi_f64(u.max(1e-300));
    let mut k = guess.round().max(0.0);
    let mass = |k: f64| exp_f64(k * ln_f64(lambda) - lambda - lgamma_f64(k + 1.0));
    let mut cdf = exp_f64(log_gamma_q_f64(k + 1.0, lambda));
    let mut p = mass(k);
    if cdf < u {
        // Up: the first k whose CDF reaches u.
        while cdf < u && p > 0.0 {
            k += 1.0;
            p *= lambda / k;
            cdf += p;
        }
    } else {
        // Down while the CDF below k still reaches u.
        while k > 0.0 && cdf - p >= u {
            cdf -= p;
            p *= k / lambda;
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
        assert_eq!(log_gamma_p_f64(2.0, 0.0), f64::NEG_INFINITY);
        assert_eq!(log_gamma_q_f64(2.0, 0.0), 0.0);
        assert_eq!(log_gamma_q_f64(2.0, f64::INFINITY), f64::NEG_INFINITY);
        assert!(log_gamma_p_f64(0.0, 1.0).is_nan());
        assert!(log_gamma_p_f64(1.0, -1.0).is_nan());
        // P(1, x) = 1 - e^-x.
        let x: f64 = 0.7;
        assert!((log_gamma_p_f64(1.0, x) - (1.0 - (-x).exp()).ln()).abs() < 1e-15);
        assert!((log_gamma_q_f64(1.0, 5.0) + 5.0).abs() < 1e-14);
    }

    #[test]
    fn inverses_invert() {
        for a in [0.05, 0.5, 1.0, 3.7, 120.0] {
            for u in [1e-12, 0.01, 0.3, 0.5, 0.77, 0.999_999] {
                let t = log_gamma_p_inv_f64(a, u);
                let back = log_gamma_p_f64(a, t.exp()).exp();
                assert!(
                    (back - u).abs() <= 1e-12 * u.max(1e-3),
                    "a {a} u {u}: {back}"
                );
            }
        }
        for lambda in [0.3, 4.0, 75.5, 1e6] {
            for u in [0.0, 0.1, 0.5, 0.93] {
                let k = poisson_inv_f64(lambda, u);
                let at = log_gamma_q_f64(k + 1.0, lambda).exp();
                let below = if k > 0.0 {
                    log_gamma_q_f64(k, lambda).exp()
                } else {
                    0.0
                };
                assert!(at >= u - 1e-12 && below < u + 1e-12, "{lambda} {u}: {k}");
            }
        }
    }
}
