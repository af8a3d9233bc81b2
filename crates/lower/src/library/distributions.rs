//! The distributions: each family's argument checks, its log density
//! (`Suffix::Log`, or without the terms constant in every argument:
//! `Suffix::Unnormalized`), its log CDF and log complementary CDF, and its
//! draw, as Stan defines them (docs/language.md, "Distributions and special
//! functions", lists what each `_lupdf` drops).

use autobatch_ir::{BinaryOp, CompareOp, UnaryOp, Var};
use autobatch_ops::library::{Family, Function, Suffix};

use super::{Builder, LowerResult};

use CompareOp::{Ge, Gt, Le, Lt};

/// `ln(2 pi) / 2`.
pub(super) const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;
pub(super) const LN_PI: f64 = 1.144_729_885_849_400_2;
pub(super) const LN_2: f64 = std::f64::consts::LN_2;

pub(super) fn expand(
    b: &mut Builder,
    family: Family,
    suffix: Suffix,
    args: &[Var],
) -> LowerResult<Var> {
    if suffix == Suffix::Rng {
        return draw(b, family, args);
    }
    if family.is_multivariate() || super::multivariate::is_indexed(family) {
        return super::multivariate::expand(b, family, suffix, args);
    }
    let y = args[0];
    let params = &args[1..];
    let full = suffix == Suffix::Log;
    if super::beta_cdf::is_family(family) && matches!(suffix, Suffix::Lcdf | Suffix::Lccdf) {
        let term = super::beta_cdf::expand(b, family, suffix, y, params)?;
        return b.total(term);
    }
    if let (Family::VonMises, Suffix::Lcdf | Suffix::Lccdf) = (family, suffix) {
        let term = super::von_mises_cdf::expand(b, suffix, y, params)?;
        return b.total(term);
    }
    if let (Family::Normal, Suffix::Log | Suffix::Unnormalized) = (family, suffix) {
        if b.is_constant(params[0], 0.0) && b.is_constant(params[1], 1.0) && b.ty_dims(y).len() == 1
        {
            // `y` is its own standardized value: the density's `y . y`,
            // taken first, is also the probe of `y`'s check.
            b.square(y)?;
        }
        let z = standardized(b, y, params[0], params[1])?;
        return normal_sum(b, suffix, z, params[1]);
    }
    let term = match family {
        Family::Normal => normal(b, suffix, y, params)?,
        Family::StudentT => student_t(b, full, y, params)?,
        Family::Cauchy => cauchy(b, suffix, y, params)?,
        Family::DoubleExponential => double_exponential(b, suffix, y, params)?,
        Family::Logistic => logistic(b, suffix, y, params)?,
        Family::Lognormal => lognormal(b, suffix, y, params)?,
        Family::Exponential => exponential(b, suffix, y, params)?,
        Family::Gamma => gamma(b, suffix, y, params)?,
        Family::InvGamma => inv_gamma(b, suffix, y, params)?,
        Family::Weibull => weibull(b, suffix, y, params)?,
        Family::ChiSquare => chi_square(b, suffix, y, params)?,
        Family::Beta => beta(b, y, params)?,
        Family::Uniform => uniform(b, suffix, y, params)?,
        Family::Bernoulli => bernoulli(b, y, params)?,
        Family::BernoulliLogit => bernoulli_logit(b, y, params)?,
        Family::Binomial | Family::BinomialLogit => binomial(b, family, full, y, params)?,
        Family::Poisson if matches!(suffix, Suffix::Lcdf | Suffix::Lccdf) => {
            poisson_cdf(b, suffix, y, params[0])?
        }
        Family::Poisson | Family::PoissonLog => poisson(b, family, full, y, params)?,
        Family::NegBinomial2 | Family::NegBinomial2Log => {
            neg_binomial_2(b, family, full, y, params)?
        }
        Family::NormalIdGlm => normal_id_glm(b, suffix, y, params)?,
        Family::VonMises => von_mises(b, full, y, params)?,
        _ => {
            return Err(crate::internal(
                format!("`{}` has no elementwise expansion", family.name()),
                autobatch_types::Loc::default(),
            ))
        }
    };
    b.total(term)
}

/// Whether every failing check of `function` makes the density it computes
/// infinite or NaN, when some argument has an element: `normal`'s and
/// `normal_id_glm`'s log densities (a NaN `y`, an infinite or NaN location,
/// weight or predictor makes a `z` infinite or NaN; a scale that is zero,
/// negative, infinite or NaN makes `z` or `-ln(sigma)` so, and the sum
/// takes every term). Their checks then run only when the density is not
/// finite ([`Builder::finish_checks`]).
pub(super) fn fails_only_when_not_finite(function: Function) -> bool {
    matches!(
        function,
        Function::Distribution(
            Family::Normal | Family::NormalIdGlm,
            Suffix::Log | Suffix::Unnormalized
        )
    )
}

/// Checks a scale (or rate, or shape) parameter: finite, then positive.
pub(super) fn positive(b: &mut Builder, v: Var, what: &str, arg: &str) -> LowerResult<()> {
    b.check_finite(v, what, arg)?;
    if b.ty_dims(v).len() == 1 {
        return b.check_positive(v, what, arg);
    }
    b.check_c(v, Gt, 0.0, what, arg, "positive")
}

/// `(y - mu) / sigma`, after the checks of a location-scale family (a
/// scalar `sigma` divides once: `(y - mu) * (1 / sigma)`). A literal
/// `mu = 0` or `sigma = 1` emits nothing: `y - 0` and `y * 1` are `y`,
/// every bit (signed zeros and NaN included), and so are their derivatives.
pub(super) fn standardized(b: &mut Builder, y: Var, mu: Var, sigma: Var) -> LowerResult<Var> {
    b.check_not_nan(y, "Random variable", "y")?;
    b.check_finite(mu, "Location parameter", "mu")?;
    positive(b, sigma, "Scale parameter", "sigma")?;
    let d = if b.is_constant(mu, 0.0) {
        y
    } else {
        b.sub(y, mu)?
    };
    if b.is_constant(sigma, 1.0) {
        return Ok(d);
    }
    if b.ty_dims(sigma).is_empty() && !b.ty_dims(d).is_empty() {
        let inverse = b.unary(UnaryOp::Recip, sigma)?;
        return b.mul(d, inverse);
    }
    b.div(d, sigma)
}

/// The normal log density summed over the call's elements, from the
/// standardized `z`: `-z.z / 2` (one product) plus the scale's term
/// counted once per element.
fn normal_sum(b: &mut Builder, suffix: Suffix, z: Var, sigma: Var) -> LowerResult<Var> {
    let sq = if b.ty_dims(z).is_empty() {
        b.mul(z, z)?
    } else {
        b.square(z)?
    };
    let q = b.scale(sq, -0.5)?;
    let s = minus_log_scale(b, sigma, suffix == Suffix::Log, LN_SQRT_2PI)?;
    let s = b.total(s)?;
    b.add(q, s)
}

/// `-ln(sigma)`, less `constant` when the constants are kept.
fn minus_log_scale(b: &mut Builder, sigma: Var, full: bool, constant: f64) -> LowerResult<Var> {
    let l = b.ln(sigma)?;
    let m = b.neg(l)?;
    if full {
        b.shift(m, -constant)
    } else {
        Ok(m)
    }
}

fn normal(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let z = standardized(b, y, p[0], p[1])?;
    match suffix {
        Suffix::Lcdf | Suffix::Lccdf => {
            let z = if suffix == Suffix::Lccdf {
                b.neg(z)?
            } else {
                z
            };
            log_phi(b, z)
        }
        _ => {
            let sq = b.mul(z, z)?;
            let q = b.scale(sq, -0.5)?;
            let s = minus_log_scale(b, p[1], suffix == Suffix::Log, LN_SQRT_2PI)?;
            b.add(q, s)
        }
    }
}

/// Where `Phi` is exact, down to `LOG_PHI_ASYMPTOTIC`.
const LOG_PHI_ASYMPTOTIC: f64 = -37.5;

/// `ln(Phi(z))`: the logarithm of `Phi` above -37.5, and below it (where
/// `Phi` underflows) the asymptotic series
/// `-z^2/2 - ln(-z) - ln(2 pi)/2 + ln(1 - 1/z^2 + 3/z^4 - 15/z^6 + ...)`.
fn log_phi(b: &mut Builder, z: Var) -> LowerResult<Var> {
    let cut = b.c(LOG_PHI_ASYMPTOTIC)?;
    let high = b.binary(BinaryOp::Max, z, cut)?;
    let phi = b.unary(UnaryOp::Phi, high)?;
    let direct = b.ln(phi)?;
    let low = b.binary(BinaryOp::Min, z, cut)?;
    let sq = b.mul(low, low)?;
    let r = b.unary(UnaryOp::Recip, sq)?;
    // 1 - r + 3 r^2 - 15 r^3 + 105 r^4 - 945 r^5 + 10395 r^6, by Horner.
    let mut series = b.c(10395.0)?;
    for k in [-945.0, 105.0, -15.0, 3.0, -1.0] {
        let m = b.mul(series, r)?;
        series = b.shift(m, k)?;
    }
    let rs = b.mul(series, r)?;
    let l1 = b.unary(UnaryOp::Ln1p, rs)?;
    let half = b.scale(sq, -0.5)?;
    let nl = b.neg(low)?;
    let lnl = b.ln(nl)?;
    let a = b.sub(half, lnl)?;
    let a = b.shift(a, -LN_SQRT_2PI)?;
    let asymptotic = b.add(a, l1)?;
    let below = b.compare_c(Lt, z, LOG_PHI_ASYMPTOTIC)?;
    b.select(below, asymptotic, direct)
}

/// `normal(y | alpha + x beta, sigma)`, after the checks of `x`, `alpha` and `beta`.
fn normal_id_glm(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (x, alpha, beta, sigma) = (p[0], p[1], p[2], p[3]);
    b.check_finite(x, "Matrix of independent variables", "x")?;
    b.check_finite(alpha, "Intercept", "alpha")?;
    b.check_finite(beta, "Weight vector", "beta")?;
    let xb = b.op(autobatch_ir::Prim::Matvec, vec![x, beta])?;
    let mu = b.add(alpha, xb)?;
    normal(b, suffix, y, &[mu, sigma])
}

/// `kappa cos(y - mu) - ln(2 pi) - ln I0(kappa)`, written as
/// `-2 kappa sin^2((y - mu) / 2) - ln(I0(kappa) e^-kappa) [- ln(2 pi)]`,
/// which keeps its digits for a large `kappa`.
fn von_mises(b: &mut Builder, full: bool, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (mu, kappa) = (p[0], p[1]);
    b.check_finite(y, "Random variable", "y")?;
    b.check_finite(mu, "Location parameter", "mu")?;
    b.check_finite(kappa, "Scale parameter", "kappa")?;
    b.check_c(kappa, Ge, 0.0, "Scale parameter", "kappa", "nonnegative")?;
    let d = b.sub(y, mu)?;
    let h = b.scale(d, 0.5)?;
    let s = b.unary(UnaryOp::Sin, h)?;
    let sq = b.mul(s, s)?;
    let ks = b.mul(kappa, sq)?;
    let a = b.scale(ks, -2.0)?;
    let l = b.unary(UnaryOp::LogBesselI0e, kappa)?;
    let lp = b.sub(a, l)?;
    if full {
        b.shift(lp, -2.0 * LN_SQRT_2PI)
    } else {
        Ok(lp)
    }
}

fn student_t(b: &mut Builder, full: bool, y: Var, p: &[Var]) -> LowerResult<Var> {
    let nu = p[0];
    positive(b, nu, "Degrees of freedom parameter", "nu")?;
    let z = standardized(b, y, p[1], p[2])?;
    // lgamma((nu + 1) / 2) - lgamma(nu / 2) - ln(nu) / 2 - ln(sigma)
    //   - (nu + 1) / 2 * ln(1 + z^2 / nu)   [- ln(pi) / 2]
    let half_nu = b.scale(nu, 0.5)?;
    let half_nu1 = b.shift(half_nu, 0.5)?;
    let g1 = b.unary(UnaryOp::Lgamma, half_nu1)?;
    let g2 = b.unary(UnaryOp::Lgamma, half_nu)?;
    let ln_nu = b.ln(nu)?;
    let half_ln_nu = b.scale(ln_nu, 0.5)?;
    let sq = b.mul(z, z)?;
    let r = b.div(sq, nu)?;
    let l = b.unary(UnaryOp::Ln1p, r)?;
    let tail = b.mul(half_nu1, l)?;
    let a = b.sub(g1, g2)?;
    let a = b.sub(a, half_ln_nu)?;
    let a = b.sub(a, tail)?;
    let s = minus_log_scale(b, p[2], full, 0.5 * LN_PI)?;
    b.add(a, s)
}

/// The density, or `ln(atan2(1, -z) / pi)` for the CDF `1/2 + atan(z)/pi`
/// (the angle keeps its digits in the lower tail; the CCDF is the CDF at `-z`).
fn cauchy(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let z = standardized(b, y, p[0], p[1])?;
    if let Suffix::Lcdf | Suffix::Lccdf = suffix {
        let w = if suffix == Suffix::Lcdf { b.neg(z)? } else { z };
        let one = b.c(1.0)?;
        let angle = b.binary(BinaryOp::Atan2, one, w)?;
        let l = b.ln(angle)?;
        return b.shift(l, -LN_PI);
    }
    let sq = b.mul(z, z)?;
    let l = b.unary(UnaryOp::Ln1p, sq)?;
    let s = minus_log_scale(b, p[1], suffix == Suffix::Log, LN_PI)?;
    b.sub(s, l)
}

fn double_exponential(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let z = standardized(b, y, p[0], p[1])?;
    match suffix {
        Suffix::Lcdf | Suffix::Lccdf => {
            // Below mu: ln(e^z / 2); above: ln(1 - e^-z / 2); lccdf mirrors it.
            let w = if suffix == Suffix::Lccdf {
                b.neg(z)?
            } else {
                z
            };
            let zero = b.c(0.0)?;
            let below = b.binary(BinaryOp::Min, w, zero)?;
            let above = b.binary(BinaryOp::Max, w, zero)?;
            let low = b.shift(below, -LN_2)?;
            let na = b.neg(above)?;
            let e = b.unary(UnaryOp::Exp, na)?;
            let h = b.scale(e, -0.5)?;
            let high = b.unary(UnaryOp::Ln1p, h)?;
            let is_low = b.compare_c(Lt, w, 0.0)?;
            b.select(is_low, low, high)
        }
        _ => {
            let a = b.unary(UnaryOp::Abs, z)?;
            let s = minus_log_scale(b, p[1], suffix == Suffix::Log, LN_2)?;
            b.sub(s, a)
        }
    }
}

fn logistic(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let z = standardized(b, y, p[0], p[1])?;
    match suffix {
        Suffix::Lcdf => b.unary(UnaryOp::LogSigmoid, z),
        Suffix::Lccdf => {
            let n = b.neg(z)?;
            b.unary(UnaryOp::LogSigmoid, n)
        }
        _ => {
            // -z - ln(sigma) - 2 ln(1 + e^-z)
            let n = b.neg(z)?;
            let sp = b.unary(UnaryOp::Softplus, n)?;
            let two = b.scale(sp, 2.0)?;
            let a = b.sub(n, two)?;
            let s = minus_log_scale(b, p[1], false, 0.0)?;
            b.add(a, s)
        }
    }
}

/// Checks a nonnegative random variable.
fn nonnegative(b: &mut Builder, y: Var) -> LowerResult<()> {
    b.check_not_nan(y, "Random variable", "y")?;
    b.check_c(y, Ge, 0.0, "Random variable", "y", "nonnegative")
}

/// `-inf` where `y` is 0, `term` elsewhere.
fn zero_at_zero(b: &mut Builder, y: Var, term: Var) -> LowerResult<Var> {
    let at_zero = b.compare_c(CompareOp::Eq, y, 0.0)?;
    let inf = b.c(f64::NEG_INFINITY)?;
    b.select(at_zero, inf, term)
}

fn lognormal(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    nonnegative(b, y)?;
    let positive_y = b.compare_c(Gt, y, 0.0)?;
    let safe = b.where_else(positive_y, y, 1.0)?;
    let ln_y = b.ln(safe)?;
    let z = standardized(b, ln_y, p[0], p[1])?;
    match suffix {
        Suffix::Lcdf | Suffix::Lccdf => {
            let w = if suffix == Suffix::Lccdf {
                b.neg(z)?
            } else {
                z
            };
            let l = log_phi(b, w)?;
            // At y = 0 the CDF is 0 and the complementary CDF 1.
            let at_zero = b.c(if suffix == Suffix::Lcdf {
                f64::NEG_INFINITY
            } else {
                0.0
            })?;
            b.select(positive_y, l, at_zero)
        }
        _ => {
            let sq = b.mul(z, z)?;
            let q = b.scale(sq, -0.5)?;
            let s = minus_log_scale(b, p[1], suffix == Suffix::Log, LN_SQRT_2PI)?;
            let a = b.add(q, s)?;
            let lp = b.sub(a, ln_y)?;
            zero_at_zero(b, y, lp)
        }
    }
}

/// `ln(1 - e^x)` for `x <= 0`, through `expm1` (exact near 0).
fn log1m_exp(b: &mut Builder, x: Var) -> LowerResult<Var> {
    let e = b.unary(UnaryOp::ExpM1, x)?;
    let ne = b.neg(e)?;
    b.ln(ne)
}

fn exponential(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let beta = p[0];
    nonnegative(b, y)?;
    positive(b, beta, "Inverse scale parameter", "beta")?;
    let by = b.mul(beta, y)?;
    let nby = b.neg(by)?;
    match suffix {
        Suffix::Lcdf => log1m_exp(b, nby),
        Suffix::Lccdf => Ok(nby),
        _ => {
            let l = b.ln(beta)?;
            b.add(l, nby)
        }
    }
}

fn gamma(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (alpha, beta) = (p[0], p[1]);
    nonnegative(b, y)?;
    positive(b, alpha, "Shape parameter", "alpha")?;
    positive(b, beta, "Inverse scale parameter", "beta")?;
    if let Suffix::Lcdf | Suffix::Lccdf = suffix {
        // P(alpha, beta y), Q(alpha, beta y).
        let tail = Tail::of(suffix, false);
        return incomplete_gamma(b, tail, false, alpha, y, &|b, y| b.mul(beta, y));
    }
    // -lgamma(alpha) + alpha ln(beta) + (alpha - 1) ln(y) - beta y
    let g = b.unary(UnaryOp::Lgamma, alpha)?;
    let l = b.ln(beta)?;
    let al = b.mul(alpha, l)?;
    let am1 = b.shift(alpha, -1.0)?;
    let ly = b.multiply_log(am1, y)?;
    let by = b.mul(beta, y)?;
    let a = b.sub(al, g)?;
    let a = b.add(a, ly)?;
    b.sub(a, by)
}

fn inv_gamma(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (alpha, beta) = (p[0], p[1]);
    nonnegative(b, y)?;
    positive(b, alpha, "Shape parameter", "alpha")?;
    positive(b, beta, "Scale parameter", "beta")?;
    if let Suffix::Lcdf | Suffix::Lccdf = suffix {
        // Q(alpha, beta / y), P(alpha, beta / y).
        let tail = Tail::of(suffix, true);
        return incomplete_gamma(b, tail, true, alpha, y, &|b, y| b.div(beta, y));
    }
    // -lgamma(alpha) + alpha ln(beta) - (alpha + 1) ln(y) - beta / y; -inf at y = 0.
    let positive_y = b.compare_c(Gt, y, 0.0)?;
    let safe = b.where_else(positive_y, y, 1.0)?;
    let g = b.unary(UnaryOp::Lgamma, alpha)?;
    let l = b.ln(beta)?;
    let al = b.mul(alpha, l)?;
    let ap1 = b.shift(alpha, 1.0)?;
    let ln_y = b.ln(safe)?;
    let ly = b.mul(ap1, ln_y)?;
    let r = b.div(beta, safe)?;
    let a = b.sub(al, g)?;
    let a = b.sub(a, ly)?;
    let lp = b.sub(a, r)?;
    zero_at_zero(b, y, lp)
}

/// Which regularized incomplete gamma function a CDF is.
#[derive(Clone, Copy, PartialEq)]
enum Tail {
    /// `ln P(a, x)`: the lower tail.
    Lower,
    /// `ln Q(a, x)`: the upper tail.
    Upper,
}

impl Tail {
    /// The tail of `_lcdf` or `_lccdf`: the lower for `_lcdf`, unless the
    /// argument of `P` falls as the outcome grows (`inv_gamma`: `beta / y`).
    fn of(suffix: Suffix, falling: bool) -> Tail {
        if (suffix == Suffix::Lcdf) != falling {
            Tail::Lower
        } else {
            Tail::Upper
        }
    }

    /// The value at `x = 0` (`ln P = -inf`, `ln Q = 0`) or at `x = inf`.
    fn limit(self, at_zero: bool) -> f64 {
        if (self == Tail::Lower) == at_zero {
            f64::NEG_INFINITY
        } else {
            0.0
        }
    }
}

/// `ln P(a, x(y))` or `ln Q(a, x(y))` of an outcome `y >= 0`, `x` rising
/// with `y` from 0 to infinity (or, `falling`, from infinity to 0). At
/// `y = 0` and `y = inf` the limits, `x` taken of a safe `y` there, so that
/// no term not taken has an infinite or NaN derivative.
fn incomplete_gamma(
    b: &mut Builder,
    tail: Tail,
    falling: bool,
    a: Var,
    y: Var,
    x_of: &dyn Fn(&mut Builder, Var) -> LowerResult<Var>,
) -> LowerResult<Var> {
    let finite = b.unary(UnaryOp::IsFinite, y)?;
    let positive_y = b.compare_c(Gt, y, 0.0)?;
    let inside = b.binary(BinaryOp::BitAnd, finite, positive_y)?;
    let safe = b.where_else(inside, y, 1.0)?;
    let x = x_of(b, safe)?;
    let op = match tail {
        Tail::Lower => BinaryOp::LogGammaP,
        Tail::Upper => BinaryOp::LogGammaQ,
    };
    let value = b.binary(op, a, x)?;
    let at_y_zero = b.c(tail.limit(!falling))?;
    let at_y_inf = b.c(tail.limit(falling))?;
    let zero = b.compare_c(CompareOp::Eq, y, 0.0)?;
    let limit = b.select(zero, at_y_zero, at_y_inf)?;
    b.select(inside, value, limit)
}

fn weibull(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (alpha, sigma) = (p[0], p[1]);
    nonnegative(b, y)?;
    positive(b, alpha, "Shape parameter", "alpha")?;
    positive(b, sigma, "Scale parameter", "sigma")?;
    let r = b.div(y, sigma)?;
    let pw = b.binary(BinaryOp::Powf, r, alpha)?;
    let npw = b.neg(pw)?;
    match suffix {
        Suffix::Lcdf => log1m_exp(b, npw),
        Suffix::Lccdf => Ok(npw),
        _ => {
            // ln(alpha) - ln(sigma) + (alpha - 1) ln(y / sigma) - (y / sigma)^alpha
            let la = b.ln(alpha)?;
            let ls = b.ln(sigma)?;
            let am1 = b.shift(alpha, -1.0)?;
            let lr = b.multiply_log(am1, r)?;
            let a = b.sub(la, ls)?;
            let a = b.add(a, lr)?;
            b.add(a, npw)
        }
    }
}

fn chi_square(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let nu = p[0];
    nonnegative(b, y)?;
    positive(b, nu, "Degrees of freedom parameter", "nu")?;
    if let Suffix::Lcdf | Suffix::Lccdf = suffix {
        // P(nu / 2, y / 2), Q(nu / 2, y / 2).
        let half_nu = b.scale(nu, 0.5)?;
        let tail = Tail::of(suffix, false);
        return incomplete_gamma(b, tail, false, half_nu, y, &|b, y| b.scale(y, 0.5));
    }
    // -(nu / 2) ln 2 - lgamma(nu / 2) + (nu / 2 - 1) ln(y) - y / 2
    let half = b.scale(nu, 0.5)?;
    let a = b.scale(half, -LN_2)?;
    let g = b.unary(UnaryOp::Lgamma, half)?;
    let hm1 = b.shift(half, -1.0)?;
    let ly = b.multiply_log(hm1, y)?;
    let hy = b.scale(y, -0.5)?;
    let a = b.sub(a, g)?;
    let a = b.add(a, ly)?;
    b.add(a, hy)
}

fn beta(b: &mut Builder, theta: Var, p: &[Var]) -> LowerResult<Var> {
    let (alpha, beta) = (p[0], p[1]);
    b.check_c(theta, Ge, 0.0, "Random variable", "theta", "in [0, 1]")?;
    b.check_c(theta, Le, 1.0, "Random variable", "theta", "in [0, 1]")?;
    positive(b, alpha, "First shape parameter", "alpha")?;
    positive(b, beta, "Second shape parameter", "beta")?;
    // lgamma(alpha + beta) - lgamma(alpha) - lgamma(beta)
    //   + (alpha - 1) ln(theta) + (beta - 1) ln(1 - theta)
    let s = b.add(alpha, beta)?;
    let gs = b.unary(UnaryOp::Lgamma, s)?;
    let ga = b.unary(UnaryOp::Lgamma, alpha)?;
    let gb = b.unary(UnaryOp::Lgamma, beta)?;
    let am1 = b.shift(alpha, -1.0)?;
    let bm1 = b.shift(beta, -1.0)?;
    let lt = b.multiply_log(am1, theta)?;
    let l1t = b.multiply_log1m(bm1, theta)?;
    let a = b.sub(gs, ga)?;
    let a = b.sub(a, gb)?;
    let a = b.add(a, lt)?;
    b.add(a, l1t)
}

/// Checks `uniform`'s bounds: finite, `beta` above `alpha`.
fn uniform_bounds(b: &mut Builder, lo: Var, hi: Var) -> LowerResult<()> {
    b.check_finite(lo, "Lower bound parameter", "alpha")?;
    b.check_finite(hi, "Upper bound parameter", "beta")?;
    let ordered = b.compare(Gt, hi, lo)?;
    b.check(
        ordered,
        "Upper bound parameter",
        "beta",
        "greater than `alpha`",
    )
}

fn uniform(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (lo, hi) = (p[0], p[1]);
    b.check_not_nan(y, "Random variable", "y")?;
    uniform_bounds(b, lo, hi)?;
    let width = b.sub(hi, lo)?;
    let below = b.compare(Lt, y, lo)?;
    let above = b.compare(Gt, y, hi)?;
    let ninf = b.c(f64::NEG_INFINITY)?;
    let zero = b.c(0.0)?;
    match suffix {
        Suffix::Lcdf | Suffix::Lccdf => {
            // ln((y - alpha) / (beta - alpha)), or of (beta - y); clamped to the interval.
            let clamped = b.binary(BinaryOp::Max, y, lo)?;
            let clamped = b.binary(BinaryOp::Min, clamped, hi)?;
            let (d, outside_low, outside_high) = if suffix == Suffix::Lcdf {
                (b.sub(clamped, lo)?, ninf, zero)
            } else {
                (b.sub(hi, clamped)?, zero, ninf)
            };
            let r = b.div(d, width)?;
            let l = b.ln(r)?;
            let l = b.select(below, outside_low, l)?;
            b.select(above, outside_high, l)
        }
        _ => {
            let l = b.ln(width)?;
            let m = b.neg(l)?;
            let outside = b.binary(BinaryOp::BitOr, below, above)?;
            b.select(outside, ninf, m)
        }
    }
}

/// Checks a probability argument: in [0, 1].
pub(super) fn probability(b: &mut Builder, theta: Var, what: &str, arg: &str) -> LowerResult<()> {
    b.check_c(theta, Ge, 0.0, what, arg, "in [0, 1]")?;
    b.check_c(theta, Le, 1.0, what, arg, "in [0, 1]")
}

/// Checks an outcome of 0 or 1.
fn binary_outcome(b: &mut Builder, n: Var) -> LowerResult<()> {
    let low = b.compare_int(Ge, n, 0)?;
    b.check(low, "Random variable", "n", "0 or 1")?;
    let high = b.compare_int(Le, n, 1)?;
    b.check(high, "Random variable", "n", "0 or 1")
}

fn bernoulli(b: &mut Builder, n: Var, p: &[Var]) -> LowerResult<Var> {
    let theta = p[0];
    binary_outcome(b, n)?;
    probability(b, theta, "Probability parameter", "theta")?;
    // ln(theta) where n is 1, ln(1 - theta) where it is 0.
    let one = b.compare_int(CompareOp::Eq, n, 1)?;
    let t1 = b.where_else(one, theta, 1.0)?;
    let zero = b.unary(UnaryOp::Not, one)?;
    let t0 = b.where_else(zero, theta, 0.0)?;
    let l1 = b.ln(t1)?;
    let m = b.neg(t0)?;
    let l0 = b.unary(UnaryOp::Ln1p, m)?;
    b.select(one, l1, l0)
}

fn bernoulli_logit(b: &mut Builder, n: Var, p: &[Var]) -> LowerResult<Var> {
    let alpha = p[0];
    binary_outcome(b, n)?;
    b.check_not_nan(alpha, "Logit transformed probability parameter", "alpha")?;
    // ln(inv_logit((2n - 1) alpha))
    let f = b.float(n)?;
    let two = b.scale(f, 2.0)?;
    let sign = b.shift(two, -1.0)?;
    let s = b.mul(sign, alpha)?;
    b.unary(UnaryOp::LogSigmoid, s)
}

/// `lchoose(n, k)` of floats: `lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)`.
pub(super) fn lchoose(b: &mut Builder, n: Var, k: Var) -> LowerResult<Var> {
    let n1 = b.shift(n, 1.0)?;
    let k1 = b.shift(k, 1.0)?;
    let d = b.sub(n, k)?;
    let d1 = b.shift(d, 1.0)?;
    let gn = b.unary(UnaryOp::Lgamma, n1)?;
    let gk = b.unary(UnaryOp::Lgamma, k1)?;
    let gd = b.unary(UnaryOp::Lgamma, d1)?;
    let a = b.sub(gn, gk)?;
    b.sub(a, gd)
}

/// Checks a count: nonnegative.
fn count(b: &mut Builder, n: Var, arg: &str) -> LowerResult<()> {
    let ok = b.compare_int(Ge, n, 0)?;
    b.check(ok, "Random variable", arg, "nonnegative")
}

fn binomial(b: &mut Builder, family: Family, full: bool, n: Var, p: &[Var]) -> LowerResult<Var> {
    let (trials, theta) = (p[0], p[1]);
    count(b, n, "n")?;
    let ok = b.compare_int(Ge, trials, 0)?;
    b.check(ok, "Population size parameter", "N", "nonnegative")?;
    let ok = b.compare(Le, n, trials)?;
    b.check(ok, "Successes variable", "n", "at most `N`")?;
    let nf = b.float(n)?;
    let tf = b.float(trials)?;
    let failures = b.sub(tf, nf)?;
    let body = if family == Family::Binomial {
        probability(b, theta, "Probability parameter", "theta")?;
        // n ln(theta) + (N - n) ln(1 - theta)
        let a = b.multiply_log(nf, theta)?;
        let c = b.multiply_log1m(failures, theta)?;
        b.add(a, c)?
    } else {
        b.check_not_nan(theta, "Probability parameter", "alpha")?;
        let ls = b.unary(UnaryOp::LogSigmoid, theta)?;
        let na = b.neg(theta)?;
        let lf = b.unary(UnaryOp::LogSigmoid, na)?;
        let a = b.mul(nf, ls)?;
        let c = b.mul(failures, lf)?;
        b.add(a, c)?
    };
    if !full {
        return Ok(body);
    }
    let choose = lchoose(b, tf, nf)?;
    b.add(choose, body)
}

fn poisson(b: &mut Builder, family: Family, full: bool, n: Var, p: &[Var]) -> LowerResult<Var> {
    let rate = p[0];
    count(b, n, "n")?;
    let nf = b.float(n)?;
    let body = if family == Family::Poisson {
        b.check_not_nan(rate, "Rate parameter", "lambda")?;
        b.check_c(rate, Ge, 0.0, "Rate parameter", "lambda", "nonnegative")?;
        // n ln(lambda) - lambda
        let a = b.multiply_log(nf, rate)?;
        b.sub(a, rate)?
    } else {
        b.check_not_nan(rate, "Log rate parameter", "alpha")?;
        // n alpha - e^alpha
        let a = b.mul(nf, rate)?;
        let e = b.unary(UnaryOp::Exp, rate)?;
        b.sub(a, e)?
    };
    if !full {
        return Ok(body);
    }
    let n1 = b.shift(nf, 1.0)?;
    let g = b.unary(UnaryOp::Lgamma, n1)?;
    b.sub(body, g)
}

/// `poisson_lcdf(n | lambda) = ln Q(n + 1, lambda)` and `poisson_lccdf =
/// ln P(n + 1, lambda)`: a negative `n` has CDF 0; at `lambda = 0` the
/// CDF is 1, and `lambda` is taken safe there.
fn poisson_cdf(b: &mut Builder, suffix: Suffix, n: Var, rate: Var) -> LowerResult<Var> {
    b.check_not_nan(rate, "Rate parameter", "lambda")?;
    b.check_c(rate, Ge, 0.0, "Rate parameter", "lambda", "nonnegative")?;
    let nf = b.float(n)?;
    let below = b.compare_c(Lt, nf, 0.0)?;
    let zero = b.c(0.0)?;
    let counted = b.binary(BinaryOp::Max, nf, zero)?;
    let a = b.shift(counted, 1.0)?;
    let tail = if suffix == Suffix::Lcdf {
        Tail::Upper
    } else {
        Tail::Lower
    };
    // The argument of Q is lambda, rising: Q(a, 0) = 1 and Q(a, inf) = 0.
    let value = incomplete_gamma(b, tail, false, a, rate, &|_, x| Ok(x))?;
    let none = b.c(if suffix == Suffix::Lcdf {
        f64::NEG_INFINITY
    } else {
        0.0
    })?;
    b.select(below, none, value)
}

fn neg_binomial_2(
    b: &mut Builder,
    family: Family,
    full: bool,
    n: Var,
    p: &[Var],
) -> LowerResult<Var> {
    let (location, phi) = (p[0], p[1]);
    count(b, n, "n")?;
    positive(b, phi, "Precision parameter", "phi")?;
    let nf = b.float(n)?;
    let ln_phi = b.ln(phi)?;
    // ln_mu = ln(mu) or eta; s = ln(1 + mu / phi).
    let ln_mu = if family == Family::NegBinomial2 {
        positive(b, location, "Location parameter", "mu")?;
        b.ln(location)?
    } else {
        b.check_finite(location, "Log location parameter", "eta")?;
        location
    };
    let d = b.sub(ln_mu, ln_phi)?;
    let s = b.unary(UnaryOp::Softplus, d)?;
    // lgamma(n + phi) - lgamma(phi) + n (ln_mu - ln_phi - s) - phi s  [- lgamma(n + 1)]
    let np = b.add(nf, phi)?;
    let g1 = b.unary(UnaryOp::Lgamma, np)?;
    let g2 = b.unary(UnaryOp::Lgamma, phi)?;
    let ds = b.sub(d, s)?;
    let nds = b.mul(nf, ds)?;
    let ps = b.mul(phi, s)?;
    let a = b.sub(g1, g2)?;
    let a = b.add(a, nds)?;
    let body = b.sub(a, ps)?;
    if !full {
        return Ok(body);
    }
    let n1 = b.shift(nf, 1.0)?;
    let g = b.unary(UnaryOp::Lgamma, n1)?;
    b.sub(body, g)
}

/// A draw of `family` with parameters `p`, from the member's stream: a
/// transformation of uniform or normal draws, one per element.
fn draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    match family {
        Family::Normal | Family::Lognormal => normal_draw(b, family, p),
        Family::Cauchy | Family::Logistic | Family::DoubleExponential => {
            b.check_finite(p[0], "Location parameter", "mu")?;
            positive(b, p[1], "Scale parameter", "sigma")?;
            let u = b.uniform()?;
            let z = standard_draw(b, family, u)?;
            let s = b.mul(p[1], z)?;
            b.add(p[0], s)
        }
        Family::Exponential | Family::Weibull => waiting_time_draw(b, family, p),
        Family::Uniform => uniform_draw(b, p),
        Family::Bernoulli | Family::BernoulliLogit => bernoulli_draw(b, family, p),
        Family::Gamma | Family::InvGamma | Family::ChiSquare | Family::StudentT | Family::Beta => {
            continuous_draw(b, family, p)
        }
        Family::Binomial | Family::BinomialLogit => super::beta_cdf::binomial_draw(b, family, p),
        Family::Poisson | Family::PoissonLog | Family::NegBinomial2 | Family::NegBinomial2Log => {
            count_draw(b, family, p)
        }
        Family::VonMises => von_mises_draw(b, p),
        _ if family.is_multivariate() || super::multivariate::is_indexed(family) => {
            super::multivariate::draw(b, family, p)
        }
        _ => Err(crate::internal(
            format!("`{}_rng` has no expansion", family.name()),
            autobatch_types::Loc::default(),
        )),
    }
}

/// `mu + sigma z` for a normal draw `z`; its exponential for `lognormal`.
fn normal_draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    b.check_finite(p[0], "Location parameter", "mu")?;
    positive(b, p[1], "Scale parameter", "sigma")?;
    let n = b.normal()?;
    let s = b.mul(p[1], n)?;
    let x = b.add(p[0], s)?;
    if family == Family::Lognormal {
        b.unary(UnaryOp::Exp, x)
    } else {
        Ok(x)
    }
}

/// `exponential(beta)` as `-ln(1 - u) / beta`, `weibull(alpha, sigma)` as
/// `sigma (-ln(1 - u))^(1 / alpha)`, `u` a uniform draw.
fn waiting_time_draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    if family == Family::Exponential {
        positive(b, p[0], "Inverse scale parameter", "beta")?;
    } else {
        positive(b, p[0], "Shape parameter", "alpha")?;
        positive(b, p[1], "Scale parameter", "sigma")?;
    }
    let u = b.uniform()?;
    let m = b.neg(u)?;
    let l = b.unary(UnaryOp::Ln1p, m)?;
    let e = b.neg(l)?;
    if family == Family::Exponential {
        return b.div(e, p[0]);
    }
    let inv = b.unary(UnaryOp::Recip, p[0])?;
    let pw = b.binary(BinaryOp::Powf, e, inv)?;
    b.mul(p[1], pw)
}

/// `alpha + (beta - alpha) u`, `u` a uniform draw.
fn uniform_draw(b: &mut Builder, p: &[Var]) -> LowerResult<Var> {
    uniform_bounds(b, p[0], p[1])?;
    let u = b.uniform()?;
    let w = b.sub(p[1], p[0])?;
    let s = b.mul(w, u)?;
    b.add(p[0], s)
}

/// 1 if a uniform draw falls below the probability, else 0.
fn bernoulli_draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    let theta = if family == Family::Bernoulli {
        probability(b, p[0], "Probability parameter", "theta")?;
        p[0]
    } else {
        b.check_not_nan(p[0], "Logit transformed probability parameter", "alpha")?;
        b.unary(UnaryOp::Sigmoid, p[0])?
    };
    let u = b.uniform()?;
    let hit = b.compare(Lt, u, theta)?;
    b.indicator(hit)
}

/// The Poisson draws: of the rate (`poisson`, `poisson_log`), or of a
/// gamma draw of mean `mu` and shape `phi` (`neg_binomial_2`, `_log`).
fn count_draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    match family {
        Family::Poisson => {
            b.check_not_nan(p[0], "Rate parameter", "lambda")?;
            b.check_c(p[0], Ge, 0.0, "Rate parameter", "lambda", "nonnegative")?;
            poisson_draw(b, p[0])
        }
        Family::PoissonLog => {
            b.check_not_nan(p[0], "Log rate parameter", "alpha")?;
            let rate = b.unary(UnaryOp::Exp, p[0])?;
            poisson_draw(b, rate)
        }
        _ => {
            let mu = if family == Family::NegBinomial2 {
                positive(b, p[0], "Location parameter", "mu")?;
                p[0]
            } else {
                b.check_finite(p[0], "Log location parameter", "eta")?;
                b.unary(UnaryOp::Exp, p[0])?
            };
            positive(b, p[1], "Precision parameter", "phi")?;
            // A Poisson draw of a gamma(phi, phi / mu) draw.
            let g = gamma_draw(b, p[1])?;
            let m = b.mul(g, mu)?;
            let rate = b.div(m, p[1])?;
            poisson_draw(b, rate)
        }
    }
}

/// A draw of `von_mises(mu, kappa)` as Stan gives it: an angle about 0
/// made from one uniform draw (`von_mises_draw`), plus `mu` reduced to
/// `[0, 2 pi)`; so in `[(mu mod 2 pi) - pi, (mu mod 2 pi) + pi]`.
fn von_mises_draw(b: &mut Builder, p: &[Var]) -> LowerResult<Var> {
    let (mu, kappa) = (p[0], p[1]);
    b.check_finite(mu, "Location parameter", "mu")?;
    b.check_finite(kappa, "Scale parameter", "kappa")?;
    b.check_c(kappa, Ge, 0.0, "Scale parameter", "kappa", "nonnegative")?;
    let u = b.uniform()?;
    let angle = b.binary(BinaryOp::VonMisesDraw, kappa, u)?;
    let tau = b.c(std::f64::consts::TAU)?;
    let r = b.binary(BinaryOp::Rem, mu, tau)?;
    let shifted = b.add(r, tau)?;
    let centre = b.binary(BinaryOp::Rem, shifted, tau)?;
    b.add(angle, centre)
}

/// `ln g` for a draw `g` of `gamma(alpha, 1)`: the inverse of the
/// regularized incomplete gamma function at a uniform draw.
pub(super) fn log_gamma_draw(b: &mut Builder, alpha: Var) -> LowerResult<Var> {
    let u = b.uniform()?;
    b.binary(BinaryOp::LogGammaPInv, alpha, u)
}

/// A draw of `gamma(alpha, 1)`.
fn gamma_draw(b: &mut Builder, alpha: Var) -> LowerResult<Var> {
    let l = log_gamma_draw(b, alpha)?;
    b.unary(UnaryOp::Exp, l)
}

/// The draws built on gamma draws: `gamma(alpha, beta)` is `g / beta`,
/// `inv_gamma(alpha, beta)` `beta / g`, `chi_square(nu)` `2 g` with shape
/// `nu / 2`, `student_t(nu, mu, sigma)` `mu + sigma z / sqrt(g / (nu / 2))`
/// with `z` normal, `beta(a, b)` `g1 / (g1 + g2)` (from the logarithms, so
/// that small shapes do not underflow).
fn continuous_draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    match family {
        Family::Gamma | Family::InvGamma => {
            positive(b, p[0], "Shape parameter", "alpha")?;
            let scale = if family == Family::Gamma {
                "Inverse scale parameter"
            } else {
                "Scale parameter"
            };
            positive(b, p[1], scale, "beta")?;
            let l = log_gamma_draw(b, p[0])?;
            if family == Family::Gamma {
                let g = b.unary(UnaryOp::Exp, l)?;
                b.div(g, p[1])
            } else {
                let n = b.neg(l)?;
                let r = b.unary(UnaryOp::Exp, n)?;
                b.mul(p[1], r)
            }
        }
        Family::ChiSquare => {
            positive(b, p[0], "Degrees of freedom parameter", "nu")?;
            let half = b.scale(p[0], 0.5)?;
            let g = gamma_draw(b, half)?;
            b.scale(g, 2.0)
        }
        Family::StudentT => {
            positive(b, p[0], "Degrees of freedom parameter", "nu")?;
            b.check_finite(p[1], "Location parameter", "mu")?;
            positive(b, p[2], "Scale parameter", "sigma")?;
            let half = b.scale(p[0], 0.5)?;
            let g = gamma_draw(b, half)?;
            let w = b.div(g, half)?;
            let root = b.unary(UnaryOp::Sqrt, w)?;
            let z = b.normal()?;
            let t = b.div(z, root)?;
            let s = b.mul(p[2], t)?;
            b.add(p[1], s)
        }
        _ => {
            positive(b, p[0], "First shape parameter", "alpha")?;
            positive(b, p[1], "Second shape parameter", "beta")?;
            let l1 = log_gamma_draw(b, p[0])?;
            let l2 = log_gamma_draw(b, p[1])?;
            let d = b.sub(l1, l2)?;
            b.unary(UnaryOp::Sigmoid, d)
        }
    }
}

/// The largest rate of a Poisson draw, `2^30`: Stan's bound (and the
/// kernels' `POISSON_MAX_RATE`).
const POISSON_MAX_RATE: f64 = 1_073_741_824.0;

/// A draw of `poisson(rate)` as an `i64`: the inverse of its CDF at a
/// uniform draw. A rate above `2^30` (Stan's bound) is an error.
fn poisson_draw(b: &mut Builder, rate: Var) -> LowerResult<Var> {
    b.check_c(
        rate,
        Le,
        POISSON_MAX_RATE,
        "Rate parameter",
        "lambda",
        "at most 2^30",
    )?;
    let u = b.uniform()?;
    let k = b.binary(BinaryOp::PoissonInv, rate, u)?;
    b.op(
        autobatch_ir::Prim::Cast(autobatch_types::ScalarType::I64),
        vec![k],
    )
}

/// A standard draw (location 0, scale 1) of a location-scale family by the
/// inverse of its CDF at a uniform draw `u`.
fn standard_draw(b: &mut Builder, family: Family, u: Var) -> LowerResult<Var> {
    match family {
        // tan(pi (u - 1/2))
        Family::Cauchy => {
            let c = b.shift(u, -0.5)?;
            let a = b.scale(c, std::f64::consts::PI)?;
            b.unary(UnaryOp::Tan, a)
        }
        // ln(u / (1 - u))
        _ if family == Family::Logistic => {
            let m = b.neg(u)?;
            let l1 = b.unary(UnaryOp::Ln1p, m)?;
            let l = b.ln(u)?;
            b.sub(l, l1)
        }
        // -sign(c) ln(1 - 2|c|), c = u - 1/2
        _ => {
            let c = b.shift(u, -0.5)?;
            let a = b.unary(UnaryOp::Abs, c)?;
            let t = b.scale(a, -2.0)?;
            let l = b.unary(UnaryOp::Ln1p, t)?;
            let s = b.unary(UnaryOp::Signum, c)?;
            let m = b.mul(s, l)?;
            b.neg(m)
        }
    }
}
