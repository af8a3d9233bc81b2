//! The distributions of vectors and matrices (`dirichlet`, `multi_normal`,
//! `multi_normal_cholesky`, `lkj_corr_cholesky`) and of outcomes that pick
//! an element of a vector (`categorical`, `categorical_logit`,
//! `ordered_logistic`): their checks and log densities, with the vector
//! primitives (`cholesky`, `tri_solve`, `diagonal`, products) and one-hot
//! comparisons in place of indexing, so that a vector of outcomes needs no loop.

use autobatch_ir::{BinaryOp, CompareOp, Prim, ReduceOp, UnaryOp, Var};
use autobatch_ops::library::{Family, Suffix};

use super::distributions::{positive, LN_2, LN_SQRT_2PI};
use super::{Builder, LowerResult};

use CompareOp::{Eq, Ge, Gt, Le, Lt};

/// Stan's tolerance for a simplex's sum and a unit row's length.
const TOLERANCE: f64 = 1e-8;

/// Whether `family`'s outcome is an index into a vector parameter.
pub(super) fn is_indexed(family: Family) -> bool {
    matches!(
        family,
        Family::Categorical | Family::CategoricalLogit | Family::OrderedLogistic
    )
}

pub(super) fn expand(
    b: &mut Builder,
    family: Family,
    suffix: Suffix,
    args: &[Var],
) -> LowerResult<Var> {
    let full = suffix == Suffix::Log;
    let (y, p) = (args[0], &args[1..]);
    match family {
        Family::Dirichlet => dirichlet(b, y, p[0]),
        Family::MultiNormal => {
            b.check_not_nan(y, "Random variable", "y")?;
            b.check_finite(p[0], "Location parameter", "mu")?;
            let l = b.op(Prim::Cholesky, vec![p[1]])?;
            multi_normal_cholesky(b, full, y, p[0], l)
        }
        Family::MultiNormalCholesky => {
            b.check_not_nan(y, "Random variable", "y")?;
            b.check_finite(p[0], "Location parameter", "mu")?;
            multi_normal_cholesky(b, full, y, p[0], p[1])
        }
        Family::LkjCorrCholesky => lkj_corr_cholesky(b, y, p[0]),
        Family::Categorical | Family::CategoricalLogit => categorical(b, family, y, p[0]),
        Family::OrderedLogistic => ordered_logistic(b, y, p[0], p[1]),
        _ => Err(crate::internal(
            format!("`{}` is not a multivariate family", family.name()),
            autobatch_types::Loc::default(),
        )),
    }
}

/// A draw of a multivariate or indexed family: `dirichlet` by normalized
/// gamma draws (a softmax of their logarithms, so that small shapes do not
/// underflow), `multi_normal` as `mu + L z`, `categorical` by the first
/// cumulative probability that passes a uniform draw, `ordered_logistic`
/// by the count of cumulative probabilities below one, `lkj_corr_cholesky`
/// from canonical partial correlations (`p[0]` is a vector of length `K`).
pub(super) fn draw(b: &mut Builder, family: Family, p: &[Var]) -> LowerResult<Var> {
    match family {
        Family::Dirichlet => {
            positive(b, p[0], "Prior sample sizes", "alpha")?;
            let u = b.op(Prim::UniformLike, vec![p[0]])?;
            let logs = b.binary(BinaryOp::LogGammaPInv, p[0], u)?;
            b.op(Prim::Softmax, vec![logs])
        }
        Family::MultiNormal | Family::MultiNormalCholesky => {
            b.check_finite(p[0], "Location parameter", "mu")?;
            let l = if family == Family::MultiNormal {
                b.op(Prim::Cholesky, vec![p[1]])?
            } else {
                b.check_finite(p[1], "Cholesky factor of covariance matrix", "L")?;
                p[1]
            };
            let z = b.op(Prim::NormalLike, vec![p[0]])?;
            let lz = b.op(Prim::Matvec, vec![l, z])?;
            b.add(p[0], lz)
        }
        Family::Categorical | Family::CategoricalLogit => {
            let theta = if family == Family::Categorical {
                simplex(b, p[0], "Probabilities parameter", "theta")?;
                p[0]
            } else {
                b.check_finite(p[0], "Log odds parameter", "beta")?;
                b.op(Prim::Softmax, vec![p[0]])?
            };
            categorical_draw(b, theta)
        }
        Family::OrderedLogistic => ordered_logistic_draw(b, p[0], p[1]),
        Family::LkjCorrCholesky => lkj_corr_cholesky_draw(b, p[0], p[1]),
        _ => Err(crate::internal(
            format!("`{}_rng` has no expansion", family.name()),
            autobatch_types::Loc::default(),
        )),
    }
}

/// `1 + #{k < K: F_k < u S}`, `F` the cumulative sums of `theta`, `S` its
/// sum and `u` a uniform draw; at most `K`.
fn categorical_draw(b: &mut Builder, theta: Var) -> LowerResult<Var> {
    let k = b.dim(theta);
    let ones = b.filled(1.0, k)?;
    let square = b.op(Prim::Fill(k), vec![ones])?;
    let lower = b.op(Prim::Tril, vec![square])?;
    let cumulative = b.op(Prim::Matvec, vec![lower, theta])?;
    let total = b.sum(theta)?;
    let u = b.uniform()?;
    let threshold = b.mul(u, total)?;
    let threshold = b.op(Prim::Fill(k), vec![threshold])?;
    let passed = b.compare(CompareOp::Lt, cumulative, threshold)?;
    let passed = b.indicator(passed)?;
    let count = b.op(Prim::Reduce(ReduceOp::Sum), vec![passed])?;
    let one = b.int(1)?;
    let ones = b.op(Prim::Fill(k), vec![one])?;
    let categories = b.op(Prim::Reduce(ReduceOp::Sum), vec![ones])?;
    let last = b.binary(BinaryOp::Sub, categories, one)?;
    let count = b.binary(BinaryOp::Min, count, last)?;
    b.binary(BinaryOp::Add, count, one)
}

/// `1 + #{k: inv_logit(c_k - eta) < u}` for each `eta` (a scalar or a
/// vector, each with its own uniform draw `u`).
fn ordered_logistic_draw(b: &mut Builder, eta: Var, c: Var) -> LowerResult<Var> {
    b.check_finite(eta, "Location parameter", "eta")?;
    b.check_finite(c, "Cut-points", "c")?;
    ordered(b, c)?;
    let cuts = b.dim(c);
    let u = b.uniform()?;
    let (d, u) = match b.ty_dims(eta).first().copied() {
        None => {
            let e = b.op(Prim::Fill(cuts), vec![eta])?;
            let u = b.op(Prim::Fill(cuts), vec![u])?;
            (b.sub(c, e)?, u)
        }
        Some(n) => {
            // Rows of the N draws: [c_k - eta_i]_{i, k} and [u_i]_{i, k}.
            let rows = b.op(Prim::Fill(n), vec![c])?;
            let e = b.op(Prim::Fill(cuts), vec![eta])?;
            let e = b.op(Prim::Transpose, vec![e])?;
            let u = b.op(Prim::Fill(cuts), vec![u])?;
            let u = b.op(Prim::Transpose, vec![u])?;
            (b.sub(rows, e)?, u)
        }
    };
    let cumulative = b.unary(UnaryOp::Sigmoid, d)?;
    let below = b.compare(CompareOp::Lt, cumulative, u)?;
    let below = b.indicator(below)?;
    let one = b.int(1)?;
    let count = if b.ty_dims(below).len() == 2 {
        let ones = b.op(Prim::Fill(cuts), vec![one])?;
        b.op(Prim::Matvec, vec![below, ones])?
    } else {
        b.op(Prim::Reduce(ReduceOp::Sum), vec![below])?
    };
    b.binary(BinaryOp::Add, count, one)
}

/// `[1, 2, ..., K]` as floats, `K` the length of `v`: the row sums of the
/// lower triangle of ones.
fn positions(b: &mut Builder, v: Var) -> LowerResult<Var> {
    let k = b.dim(v);
    let ones = b.filled(1.0, k)?;
    let square = b.op(Prim::Fill(k), vec![ones])?;
    let lower = b.op(Prim::Tril, vec![square])?;
    b.op(Prim::Matvec, vec![lower, ones])
}

/// Checks a simplex: nonnegative elements that sum to 1 (to 1e-8).
fn simplex(b: &mut Builder, theta: Var, what: &str, arg: &str) -> LowerResult<()> {
    b.check_not_nan(theta, what, arg)?;
    b.check_c(
        theta,
        Ge,
        0.0,
        what,
        arg,
        "a simplex (nonnegative, summing to 1)",
    )?;
    let total = b.sum(theta)?;
    let off = b.shift(total, -1.0)?;
    let off = b.unary(UnaryOp::Abs, off)?;
    b.check_c(
        off,
        Le,
        TOLERANCE,
        what,
        arg,
        "a simplex (nonnegative, summing to 1)",
    )
}

fn dirichlet(b: &mut Builder, theta: Var, alpha: Var) -> LowerResult<Var> {
    simplex(b, theta, "Random variable", "theta")?;
    positive(b, alpha, "Prior sample sizes", "alpha")?;
    // lgamma(sum alpha) - sum lgamma(alpha) + sum (alpha - 1) ln(theta)
    let total = b.sum(alpha)?;
    let g = b.unary(UnaryOp::Lgamma, total)?;
    let each = b.unary(UnaryOp::Lgamma, alpha)?;
    let gs = b.sum(each)?;
    let am1 = b.shift(alpha, -1.0)?;
    let l = b.multiply_log(am1, theta)?;
    let ls = b.sum(l)?;
    let a = b.sub(g, gs)?;
    b.add(a, ls)
}

/// `-K ln(2 pi) / 2 - sum ln(diag L) - |L⁻¹ (y - mu)|^2 / 2` (the first
/// term only with the constants).
fn multi_normal_cholesky(b: &mut Builder, full: bool, y: Var, mu: Var, l: Var) -> LowerResult<Var> {
    let d = b.sub(y, mu)?;
    let z = b.op(Prim::TriSolve, vec![l, d])?;
    let q = b.op(Prim::Dot, vec![z, z])?;
    let half = b.scale(q, -0.5)?;
    let diagonal = b.op(Prim::Diagonal, vec![l])?;
    let logs = b.ln(diagonal)?;
    let det = b.sum(logs)?;
    let lp = b.sub(half, det)?;
    if !full {
        return Ok(lp);
    }
    let ones = b.filled(1.0, b.dim(y))?;
    let k = b.sum(ones)?;
    let c = b.scale(k, -LN_SQRT_2PI)?;
    b.add(lp, c)
}

/// `ln c_K(eta) + sum_{i >= 2} (K - i + 2 eta - 2) ln L_ii` (1-based `i`),
/// with the normalizing constant of Lewandowski, Kurowicka and Joe (2009):
/// `-ln c_K = sum_{j=1}^{K-1} [(2 eta - 2 + j) j ln 2 + j lbeta(b_j, b_j)]`,
/// `b_j = eta + (j - 1) / 2`.
fn lkj_corr_cholesky(b: &mut Builder, l: Var, eta: Var) -> LowerResult<Var> {
    positive(b, eta, "Shape parameter", "eta")?;
    cholesky_factor_of_correlation(b, l)?;
    let diagonal = b.op(Prim::Diagonal, vec![l])?;
    let at = positions(b, diagonal)?;
    let ones = b.filled(1.0, b.dim(diagonal))?;
    let k = b.sum(ones)?;
    // The density's terms: (K - i - 2 + 2 eta) ln L_ii, 0 for i = 1.
    let two_eta = b.scale(eta, 2.0)?;
    let base = b.add(k, two_eta)?;
    let base = b.shift(base, -2.0)?;
    let coefficient = b.sub(base, at)?;
    let first = b.compare_c(Eq, at, 1.0)?;
    let zero = b.c(0.0)?;
    let coefficient = b.select(first, zero, coefficient)?;
    let logs = b.ln(diagonal)?;
    let terms = b.mul(coefficient, logs)?;
    let density = b.sum(terms)?;
    // The constant, over j = 1..K-1 (the position K is left out).
    let em2 = b.shift(two_eta, -2.0)?;
    let e = b.add(em2, at)?;
    let e = b.mul(e, at)?;
    let powers = b.scale(e, LN_2)?;
    let jm1 = b.shift(at, -1.0)?;
    let half = b.scale(jm1, 0.5)?;
    let bj = b.add(eta, half)?;
    let lb = lbeta_same(b, bj)?;
    let betas = b.mul(at, lb)?;
    let each = b.add(powers, betas)?;
    let last = b.compare(Eq, at, k)?;
    let each = b.select(last, zero, each)?;
    let constant = b.sum(each)?;
    b.sub(density, constant)
}

/// A draw of `lkj_corr_cholesky(eta)` of size `K` (the length of `size`),
/// as Stan draws it: the canonical partial correlation `w_ji` (row `j`
/// below the diagonal, 0-based column `i`) is `2 beta(a_i, a_i) - 1`,
/// `a_i = eta + (K - 2 - i) / 2`, drawn as `tanh((ln g1 - ln g2) / 2)` of
/// two `gamma(a_i, 1)` draws; then `L_ji = w_ji sqrt(prod_{m<i} (1 - w_jm^2))`
/// below the diagonal and `L_jj = sqrt(prod_{m<j} (1 - w_jm^2))`. The
/// products are sums of `ln(1 - w^2) = -2 ln cosh(x)` (no cancellation
/// near `|w| = 1`), each row's running sum a product with the strictly
/// upper triangle of ones. Every element is drawn (those on and above the
/// diagonal are not used), so a draw takes `2 K^2` uniform draws.
fn lkj_corr_cholesky_draw(b: &mut Builder, size: Var, eta: Var) -> LowerResult<Var> {
    positive(b, eta, "Shape parameter", "eta")?;
    let at = positions(b, size)?;
    let k = b.dim(size);
    let ones = b.filled(1.0, k)?;
    let kf = b.sum(ones)?;
    b.check_c(kf, Ge, 1.0, "Dimension parameter", "K", "at least 1")?;
    // a_i for the 1-based column i + 1 = at: eta + max(K - 1 - at, 0) / 2
    // (the last column has no element below the diagonal).
    let km1 = b.shift(kf, -1.0)?;
    let left = b.sub(km1, at)?;
    let zero = b.c(0.0)?;
    let left = b.binary(BinaryOp::Max, left, zero)?;
    let half = b.scale(left, 0.5)?;
    let shape = b.add(eta, half)?;
    let shapes = b.op(Prim::Fill(k), vec![shape])?;
    let u1 = b.op(Prim::UniformLike, vec![shapes])?;
    let u2 = b.op(Prim::UniformLike, vec![shapes])?;
    let l1 = b.binary(BinaryOp::LogGammaPInv, shapes, u1)?;
    let l2 = b.binary(BinaryOp::LogGammaPInv, shapes, u2)?;
    let d = b.sub(l1, l2)?;
    let x = b.scale(d, 0.5)?;
    let w = b.unary(UnaryOp::Tanh, x)?;
    // Where each element is: below, on or above the diagonal.
    let columns = b.op(Prim::Fill(k), vec![at])?;
    let rows = b.op(Prim::Transpose, vec![columns])?;
    let below = b.compare(Lt, columns, rows)?;
    let above = b.compare(Lt, rows, columns)?;
    let on = b.compare(Eq, columns, rows)?;
    // ln(1 - w^2) = -2 (|x| + ln(1 + e^(-2|x|)) - ln 2), below the diagonal.
    let a = b.unary(UnaryOp::Abs, x)?;
    let m2a = b.scale(a, -2.0)?;
    let e = b.unary(UnaryOp::Exp, m2a)?;
    let l = b.unary(UnaryOp::Ln1p, e)?;
    let cosh = b.add(a, l)?;
    let cosh = b.shift(cosh, -LN_2)?;
    let logs = b.scale(cosh, -2.0)?;
    let logs = b.select(below, logs, zero)?;
    // The sum over m < i of each row's logarithms, halved: the log of the
    // square root of the product.
    let upper = b.float_of_bool(above)?;
    let running = b.op(Prim::Matmul, vec![logs, upper])?;
    let running = b.scale(running, 0.5)?;
    let scale = b.unary(UnaryOp::Exp, running)?;
    let diagonal = b.float_of_bool(on)?;
    let factor = b.select(below, w, diagonal)?;
    b.mul(factor, scale)
}

/// `lbeta(a, a) = 2 lgamma(a) - lgamma(2a)`.
fn lbeta_same(b: &mut Builder, a: Var) -> LowerResult<Var> {
    let g = b.unary(UnaryOp::Lgamma, a)?;
    let two = b.scale(a, 2.0)?;
    let g2 = b.unary(UnaryOp::Lgamma, two)?;
    let gg = b.scale(g, 2.0)?;
    b.sub(gg, g2)
}

/// Checks a Cholesky factor of a correlation matrix: lower triangular, a
/// positive diagonal, rows of unit length (to 1e-8).
fn cholesky_factor_of_correlation(b: &mut Builder, l: Var) -> LowerResult<()> {
    const WHAT: &str = "Random variable";
    const MUST: &str = "the Cholesky factor of a correlation matrix";
    b.check_finite(l, WHAT, "L")?;
    let lower = b.op(Prim::Tril, vec![l])?;
    let same = b.compare(Eq, lower, l)?;
    b.check(same, WHAT, "L", MUST)?;
    let diagonal = b.op(Prim::Diagonal, vec![l])?;
    b.check_c(diagonal, Gt, 0.0, WHAT, "L", MUST)?;
    let sq = b.mul(l, l)?;
    let ones = b.filled(1.0, b.dim(l))?;
    let lengths = b.op(Prim::Matvec, vec![sq, ones])?;
    let off = b.shift(lengths, -1.0)?;
    let off = b.unary(UnaryOp::Abs, off)?;
    b.check_c(off, Le, TOLERANCE, WHAT, "L", MUST)
}

/// For outcomes `y` (an `i64` or `[i64; N]`, 1-based) and a vector of
/// length `K`: how often each position occurs, `[F; K]`.
fn counts(b: &mut Builder, y: Var, at: Var) -> LowerResult<Var> {
    let yf = b.float(y)?;
    if b.ty_dims(yf).is_empty() {
        let hit = b.compare(Eq, at, yf)?;
        return b.float_of_bool(hit);
    }
    let hits = one_hot(b, yf, at)?;
    let ones = b.filled(1.0, b.dim(yf))?;
    b.op(Prim::Vecmat, vec![ones, hits])
}

/// `[[F; K]; N]`: row `n` is 1 where `at` equals `y[n]`, else 0.
fn one_hot(b: &mut Builder, yf: Var, at: Var) -> LowerResult<Var> {
    let (n, k) = (b.dim(yf), b.dim(at));
    let across = b.op(Prim::Fill(k), vec![yf])?;
    let rows = b.op(Prim::Transpose, vec![across])?;
    let grid = b.op(Prim::Fill(n), vec![at])?;
    let hit = b.compare(Eq, rows, grid)?;
    b.float_of_bool(hit)
}

/// Checks outcomes in `1..=k` (`k` a float).
fn in_range(b: &mut Builder, y: Var, k: Var, arg: &str) -> LowerResult<()> {
    let yf = b.float(y)?;
    let low = b.compare_c(Ge, yf, 1.0)?;
    let must = "in 1..=K (K the number of categories)";
    b.check(low, "Random variable", arg, must)?;
    let high = b.compare(Le, yf, k)?;
    b.check(high, "Random variable", arg, must)
}

fn categorical(b: &mut Builder, family: Family, y: Var, v: Var) -> LowerResult<Var> {
    let at = positions(b, v)?;
    let ones = b.filled(1.0, b.dim(v))?;
    let k = b.sum(ones)?;
    in_range(b, y, k, "y")?;
    let c = counts(b, y, at)?;
    if family == Family::Categorical {
        simplex(b, v, "Probabilities parameter", "theta")?;
        // sum_k c_k ln(theta_k), 0 where c_k is 0
        let l = b.multiply_log(c, v)?;
        return b.sum(l);
    }
    b.check_finite(v, "Log odds parameter", "beta")?;
    // sum_k c_k beta_k - (sum_k c_k) log_sum_exp(beta)
    let dot = b.op(Prim::Dot, vec![c, v])?;
    let lse = b.op(Prim::Reduce(ReduceOp::LogSumExp), vec![v])?;
    let total = b.sum(c)?;
    let m = b.mul(total, lse)?;
    b.sub(dot, m)
}

/// `ordered_logistic(k | eta, c)`: with `a = eta - c_{k-1}` and
/// `b = eta - c_k` (`c_0 = -inf`, `c_K = +inf`), the log of
/// `inv_logit(a) - inv_logit(b) = inv_logit(a) inv_logit(-b) (1 - e^(b - a))`,
/// each factor left out where its cutpoint is infinite.
fn ordered_logistic(b: &mut Builder, k: Var, eta: Var, c: Var) -> LowerResult<Var> {
    b.check_finite(eta, "Location parameter", "eta")?;
    b.check_finite(c, "Cut-points", "c")?;
    ordered(b, c)?;
    let at = positions(b, c)?;
    let ones = b.filled(1.0, b.dim(c))?;
    let cuts = b.sum(ones)?;
    let categories = b.shift(cuts, 1.0)?;
    in_range(b, k, categories, "k")?;
    let kf = b.float(k)?;
    let below = b.shift(kf, -1.0)?;
    let c_lo = pick(b, below, at, c)?;
    let c_hi = pick(b, kf, at, c)?;
    let first = b.compare_c(Eq, kf, 1.0)?;
    let last = b.compare(Eq, kf, categories)?;
    let zero = b.c(0.0)?;
    let a = b.sub(eta, c_lo)?;
    let upper = b.unary(UnaryOp::LogSigmoid, a)?;
    let upper = b.select(first, zero, upper)?;
    let nb = b.sub(c_hi, eta)?;
    let lower = b.unary(UnaryOp::LogSigmoid, nb)?;
    let lower = b.select(last, zero, lower)?;
    // ln(1 - e^(c_lo - c_hi)) = ln(-expm1(c_lo - c_hi)), between two cutpoints.
    let end = b.binary(BinaryOp::BitOr, first, last)?;
    let middle = b.unary(UnaryOp::Not, end)?;
    let gap = b.sub(c_lo, c_hi)?;
    let gap = b.where_else(middle, gap, -1.0)?;
    let e = b.unary(UnaryOp::ExpM1, gap)?;
    let ne = b.neg(e)?;
    let width = b.ln(ne)?;
    let width = b.select(middle, width, zero)?;
    let lp = b.add(upper, lower)?;
    let lp = b.add(lp, width)?;
    b.total(lp)
}

/// The element of `v` at the 1-based float position `index` (a scalar or
/// a vector of positions), 0 where `index` is outside `1..=K`.
fn pick(b: &mut Builder, index: Var, at: Var, v: Var) -> LowerResult<Var> {
    if b.ty_dims(index).is_empty() {
        let hit = b.compare(Eq, at, index)?;
        let h = b.float_of_bool(hit)?;
        return b.op(Prim::Dot, vec![h, v]);
    }
    let hits = one_hot(b, index, at)?;
    b.op(Prim::Matvec, vec![hits, v])
}

/// Checks cutpoints in increasing order: `c_j - c_i > 0` for every `i < j`.
fn ordered(b: &mut Builder, c: Var) -> LowerResult<()> {
    let n = b.dim(c);
    let rows = b.op(Prim::Fill(n), vec![c])?;
    let columns = b.op(Prim::Transpose, vec![rows])?;
    // later[i][j] = c_j - c_i; the pairs i < j are the strict upper triangle.
    let later = b.sub(rows, columns)?;
    let lower = b.op(Prim::Tril, vec![later])?;
    let upper = b.sub(later, lower)?;
    let ok = b.compare_c(Gt, upper, 0.0)?;
    let ones = b.filled(1.0, n)?;
    let square = b.op(Prim::Fill(n), vec![ones])?;
    let tril = b.op(Prim::Tril, vec![square])?;
    let on_or_below = b.compare_c(Gt, tril, 0.5)?;
    let fine = b.binary(BinaryOp::BitOr, ok, on_or_below)?;
    b.check(fine, "Cut-points", "c", "in increasing order")
}

/// The squared-exponential covariance `alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2))`
/// of the points `x` (`[F; N]`, or `[[F; D]; N]` by the Gram matrix:
/// `|x_i|^2 + |x_j|^2 - 2 x_i . x_j`, at least 0, exactly 0 on the diagonal).
pub(super) fn gp_exp_quad_cov(b: &mut Builder, x: Var, alpha: Var, rho: Var) -> LowerResult<Var> {
    b.check_not_nan(x, "Coordinates", "x")?;
    positive(b, alpha, "Magnitude", "alpha")?;
    positive(b, rho, "Length scale", "rho")?;
    let n = b.dim(x);
    let sq = if b.ty_dims(x).len() == 1 {
        let rows = b.op(Prim::Fill(n), vec![x])?;
        let columns = b.op(Prim::Transpose, vec![rows])?;
        let d = b.sub(columns, rows)?;
        b.mul(d, d)?
    } else {
        let xt = b.op(Prim::Transpose, vec![x])?;
        let gram = b.op(Prim::Matmul, vec![x, xt])?;
        let norms = b.op(Prim::Diagonal, vec![gram])?;
        let rows = b.op(Prim::Fill(n), vec![norms])?;
        let columns = b.op(Prim::Transpose, vec![rows])?;
        let s = b.add(rows, columns)?;
        let g2 = b.scale(gram, 2.0)?;
        let d = b.sub(s, g2)?;
        let zero = b.c(0.0)?;
        b.binary(BinaryOp::Max, d, zero)?
    };
    let r2 = b.mul(rho, rho)?;
    let r2 = b.scale(r2, -2.0)?;
    let e = b.div(sq, r2)?;
    let k = b.unary(UnaryOp::Exp, e)?;
    let a2 = b.mul(alpha, alpha)?;
    b.mul(a2, k)
}
