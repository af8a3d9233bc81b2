//! The log CDFs and log complementary CDFs built on the regularized
//! incomplete beta function `I_x(a, b)` (`beta`, `student_t`, `binomial`,
//! `neg_binomial_2`, and `bernoulli`'s, which needs none), the binomial
//! draws, and `inc_beta`, as Stan defines them.

use autobatch_ir::{BinaryOp, CompareOp, TernaryOp, UnaryOp, Var};
use autobatch_ops::library::{Family, Suffix};

use super::distributions::{positive, probability, LN_2, LN_PI};
use super::{Builder, LowerResult};

use CompareOp::{Eq, Ge, Gt, Lt};

/// Whether `family`'s `_lcdf` and `_lccdf` are this module's.
pub(super) fn is_family(family: Family) -> bool {
    matches!(
        family,
        Family::Beta
            | Family::StudentT
            | Family::Binomial
            | Family::NegBinomial2
            | Family::Bernoulli
    )
}

/// `_lcdf` or `_lccdf` of one of the families of this module.
pub(super) fn expand(
    b: &mut Builder,
    family: Family,
    suffix: Suffix,
    y: Var,
    p: &[Var],
) -> LowerResult<Var> {
    let upper = suffix == Suffix::Lccdf;
    match family {
        Family::Beta => beta(b, upper, y, p),
        Family::StudentT => student_t(b, upper, y, p),
        Family::Binomial => binomial(b, upper, y, p),
        Family::NegBinomial2 => neg_binomial_2(b, upper, y, p),
        _ => bernoulli(b, upper, y, p[0]),
    }
}

/// `ln I_x(a, z)` (`upper`: `ln(1 - I_x(a, z))`) for `x` in `[0, 1]`: at
/// the ends their limits, `x` taken safe there, so that no term not taken
/// has an infinite or NaN derivative.
fn incomplete_beta(b: &mut Builder, upper: bool, a: Var, z: Var, x: Var) -> LowerResult<Var> {
    let above_zero = b.compare_c(Gt, x, 0.0)?;
    let below_one = b.compare_c(Lt, x, 1.0)?;
    let inside = b.binary(BinaryOp::BitAnd, above_zero, below_one)?;
    let safe = b.where_else(inside, x, 0.5)?;
    let op = if upper {
        TernaryOp::LogBetaIncC
    } else {
        TernaryOp::LogBetaInc
    };
    let value = b.ternary(op, a, z, safe)?;
    // ln I is -inf at 0 and 0 at 1; ln(1 - I) the other way round.
    let (at_zero, at_one) = if upper {
        (0.0, f64::NEG_INFINITY)
    } else {
        (f64::NEG_INFINITY, 0.0)
    };
    let at_zero = b.c(at_zero)?;
    let at_one = b.c(at_one)?;
    let limit = b.select(above_zero, at_one, at_zero)?;
    b.select(inside, value, limit)
}

/// `ln I_theta(alpha, beta)` and `ln(1 - I_theta(alpha, beta))`.
fn beta(b: &mut Builder, upper: bool, theta: Var, p: &[Var]) -> LowerResult<Var> {
    probability(b, theta, "Random variable", "theta")?;
    positive(b, p[0], "First shape parameter", "alpha")?;
    positive(b, p[1], "Second shape parameter", "beta")?;
    incomplete_beta(b, upper, p[0], p[1], theta)
}

/// With `z = (y - mu) / sigma` and `x = nu / (nu + z^2)`, the CDF is
/// `I_x(nu/2, 1/2) / 2` below `mu` and `1 - I_x(nu/2, 1/2) / 2` above;
/// the CCDF is the CDF at `-z`. At `z = 0` exactly, where `x = 1` and the
/// chain through `x` has no derivative, the term `z ln F'(0)` (0 there)
/// carries the derivative in `z`.
fn student_t(b: &mut Builder, upper: bool, y: Var, p: &[Var]) -> LowerResult<Var> {
    let nu = p[0];
    positive(b, nu, "Degrees of freedom parameter", "nu")?;
    let z = super::distributions::standardized(b, y, p[1], p[2])?;
    let w = if upper { b.neg(z)? } else { z };
    let sq = b.mul(w, w)?;
    let d = b.add(nu, sq)?;
    let x = b.div(nu, d)?;
    let half_nu = b.scale(nu, 0.5)?;
    let half = b.c(0.5)?;
    let l = incomplete_beta(b, false, half_nu, half, x)?;
    let low = b.shift(l, -LN_2)?;
    let e = b.unary(UnaryOp::Exp, l)?;
    let h = b.scale(e, -0.5)?;
    let high = b.unary(UnaryOp::Ln1p, h)?;
    let below = b.compare_c(Lt, w, 0.0)?;
    let value = b.select(below, low, high)?;
    // d ln F / dw at w = 0: 2 f(0), f(0) = Gamma((nu+1)/2) / (Gamma(nu/2) sqrt(nu pi)).
    let half_nu1 = b.shift(half_nu, 0.5)?;
    let g1 = b.unary(UnaryOp::Lgamma, half_nu1)?;
    let g2 = b.unary(UnaryOp::Lgamma, half_nu)?;
    let ln_nu = b.ln(nu)?;
    let s = b.scale(ln_nu, -0.5)?;
    let t = b.sub(g1, g2)?;
    let t = b.add(t, s)?;
    let t = b.shift(t, LN_2 - 0.5 * LN_PI)?;
    let slope = b.unary(UnaryOp::Exp, t)?;
    let at_centre = b.compare_c(Eq, w, 0.0)?;
    let w_centre = b.where_else(at_centre, w, 0.0)?;
    let centre = b.mul(w_centre, slope)?;
    b.add(value, centre)
}

/// `P(X <= n) = 1 - I_theta(n + 1, N - n)` for `0 <= n < N` (1 from `N`
/// on, 0 below 0); the CCDF `I_theta(n + 1, N - n)`.
fn binomial(b: &mut Builder, upper: bool, n: Var, p: &[Var]) -> LowerResult<Var> {
    let (trials, theta) = (p[0], p[1]);
    let ok = b.compare_int(Ge, trials, 0)?;
    b.check(ok, "Population size parameter", "N", "nonnegative")?;
    probability(b, theta, "Probability parameter", "theta")?;
    let nf = b.float(n)?;
    let tf = b.float(trials)?;
    let zero = b.c(0.0)?;
    let one = b.c(1.0)?;
    // Shapes kept positive where the count is outside 0..N.
    let counted = b.binary(BinaryOp::Max, nf, zero)?;
    let a = b.shift(counted, 1.0)?;
    let rest = b.sub(tf, nf)?;
    let rest = b.binary(BinaryOp::Max, rest, one)?;
    let value = incomplete_beta(b, !upper, a, rest, theta)?;
    let below = b.compare_c(Lt, nf, 0.0)?;
    let above = b.compare(Ge, nf, tf)?;
    count_limits(b, upper, below, Some(above), value)
}

/// The value of a discrete CDF (or CCDF) `value` where the count is
/// neither `below` its support nor at or `above` its top (if it has one).
fn count_limits(
    b: &mut Builder,
    upper: bool,
    below: Var,
    above: Option<Var>,
    value: Var,
) -> LowerResult<Var> {
    let (low, high) = if upper {
        (0.0, f64::NEG_INFINITY)
    } else {
        (f64::NEG_INFINITY, 0.0)
    };
    let low = b.c(low)?;
    let high = b.c(high)?;
    let v = match above {
        Some(above) => b.select(above, high, value)?,
        None => value,
    };
    b.select(below, low, v)
}

/// `P(X <= n) = I_p(phi, n + 1)` with `p = phi / (mu + phi)` (0 below 0).
fn neg_binomial_2(b: &mut Builder, upper: bool, n: Var, p: &[Var]) -> LowerResult<Var> {
    let (mu, phi) = (p[0], p[1]);
    positive(b, mu, "Location parameter", "mu")?;
    positive(b, phi, "Precision parameter", "phi")?;
    let nf = b.float(n)?;
    let zero = b.c(0.0)?;
    let counted = b.binary(BinaryOp::Max, nf, zero)?;
    let shape = b.shift(counted, 1.0)?;
    let s = b.add(mu, phi)?;
    let x = b.div(phi, s)?;
    let value = incomplete_beta(b, upper, phi, shape, x)?;
    let below = b.compare_c(Lt, nf, 0.0)?;
    count_limits(b, upper, below, None, value)
}

/// `ln(1 - theta)` at `n = 0` (`ln theta` for the CCDF), 0 and `-inf`
/// above and below.
fn bernoulli(b: &mut Builder, upper: bool, n: Var, theta: Var) -> LowerResult<Var> {
    probability(b, theta, "Probability parameter", "theta")?;
    let value = if upper {
        b.ln(theta)?
    } else {
        let m = b.neg(theta)?;
        b.unary(UnaryOp::Ln1p, m)?
    };
    let below = b.compare_int(Lt, n, 0)?;
    let above = b.compare_int(Ge, n, 1)?;
    count_limits(b, upper, below, Some(above), value)
}

/// `inc_beta(a, b, x) = I_x(a, b)`, after Stan's checks.
pub(super) fn inc_beta(b: &mut Builder, a: Var, z: Var, x: Var) -> LowerResult<Var> {
    positive(b, a, "First shape parameter", "a")?;
    positive(b, z, "Second shape parameter", "b")?;
    probability(b, x, "Random variable", "x")?;
    let l = incomplete_beta(b, false, a, z, x)?;
    b.unary(UnaryOp::Exp, l)
}

/// A draw of `binomial(N, theta)` (`binomial_logit(N, alpha)`: `theta` the
/// logistic of `alpha`) as an `i64`: the inverse of its CDF at a uniform draw.
pub(super) fn binomial_draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    let ok = b.compare_int(Ge, p[0], 0)?;
    b.check(ok, "Population size parameter", "N", "nonnegative")?;
    let theta = if family == Family::Binomial {
        probability(b, p[1], "Probability parameter", "theta")?;
        p[1]
    } else {
        b.check_finite(p[1], "Logit transformed probability parameter", "alpha")?;
        b.unary(UnaryOp::Sigmoid, p[1])?
    };
    let trials = b.float(p[0])?;
    let u = b.uniform()?;
    let k = b.ternary(TernaryOp::BinomialInv, trials, theta, u)?;
    b.op(
        autobatch_ir::Prim::Cast(autobatch_types::ScalarType::I64),
        vec![k],
    )
}
