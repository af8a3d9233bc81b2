#!/usr/bin/env python3
"""Writes the program tests of the vector and matrix distributions and of
the linear algebra under them (tests/programs/dist_<name>.ab,
tests/programs/linalg_*.ab): values from scipy.stats, numpy or mpmath at 50
digits, gradients by central differences of the same. The LKJ constant of
Lewandowski, Kurowicka and Joe (2009) is checked here against a numerical
integral before it is used. Nothing comes from autobatch itself.

Run through tools/distributions_reference.py (which calls main()), or alone
from the workspace root: python3 tools/multivariate_reference.py
"""
import math

import mpmath as mp
import numpy as np
from scipy import integrate, linalg, special, stats

from distributions_reference import central_difference, number, write_program

mp.mp.dps = 50


def gradient(f, point):
    return [number(central_difference(f, point, k)) for k in range(len(point))]


def precise_gradient(f, point):
    """The derivative of `f` (written with mpmath) at 50 digits, for the
    nearly singular matrices whose shape changes within a double's finite
    difference step."""
    point = [mp.mpf(x) for x in point]

    def along(k):
        return lambda t: f(*[t if i == k else x for i, x in enumerate(point)])

    return [number(mp.diff(along(k), point[k])) for k in range(len(point))]


def value_runs(f, points, data=None, value_tolerance=1e-12, unnormalized=None, precise=None):
    """The runs `value_and_slope` (gradient in `p`), `value` and, if
    `unnormalized` gives the dropped constant, `unnormalized`. With
    `precise`, an mpmath form of `f`, the gradient is its derivative at 50
    digits instead of `f`'s central differences."""
    data = data or {}
    batch = {"p": [list(map(float, p)) for p in points]}
    for name, values in data.items():
        batch[name] = values
    at = lambda i, p: f(*p, **{k: v[i] for k, v in data.items()})
    results = []
    for i, p in enumerate(points):
        g = lambda *q, i=i: at(i, q)
        slope = precise_gradient(precise, p) if precise else gradient(g, p)
        results.append({"ok": [number(at(i, p)), slope]})
    runs = [
        ("value_and_slope", {"batch": batch}, results, 1e-6),
        ("value", {"batch": batch}, [{"ok": r["ok"][0]} for r in results], value_tolerance),
    ]
    if unnormalized is not None:
        lup = [{"ok": number(at(i, p) - unnormalized(len(p)))} for i, p in enumerate(points)]
        runs.append(("unnormalized", {"batch": batch}, lup, value_tolerance))
    return runs


# ---------------------------------------------------------------------------

def normal_id_glm():
    xs = [[1.0, 0.3], [0.2, -0.7], [-1.5, 2.0]]
    ys = [0.5, -1.2, 2.0]

    def lp(alpha, b0, b1, sigma, x=None, y=None):
        mu = np.array(x) @ np.array([b0, b1]) + alpha
        return float(np.sum(stats.norm.logpdf(np.array(y), mu, sigma)))

    points = [(0.3, 1.0, -0.5, 1.2), (-2.0, 0.1, 0.2, 0.05), (10.0, -3.0, 4.0, 30.0)]
    data = {"x": [xs] * len(points), "y": [ys] * len(points)}
    runs = value_runs(lp, points, data, unnormalized=lambda n: -3 * 0.5 * math.log(2 * math.pi))
    write_program(
        "dist_normal_id_glm",
        "`normal_id_glm_lpdf(y | x, alpha, beta, sigma)` against the sum of\n"
        "scipy.stats.norm.logpdf(y, alpha + x beta, sigma): value, gradient in\n"
        "(alpha, beta, sigma) by central differences, and `_lupdf`.",
        runs,
        """
fn lp(p: [f64; 4], x: [[f64; 2]; 3], y: [f64; 3]) -> f64 { normal_id_glm_lpdf(y, x, p[0], [p[1], p[2]], p[3]) }
fn value_and_slope(p: [f64; 4], x: [[f64; 2]; 3], y: [f64; 3]) -> (f64, [f64; 4]) { value_and_grad(lp, p, x, y) }
fn value(p: [f64; 4], x: [[f64; 2]; 3], y: [f64; 3]) -> f64 { lp(p, x, y) }
fn unnormalized(p: [f64; 4], x: [[f64; 2]; 3], y: [f64; 3]) -> f64 { normal_id_glm_lupdf(y, x, p[0], [p[1], p[2]], p[3]) }
""",
    )


def dirichlet():
    thetas = [[0.2, 0.3, 0.5], [0.7, 0.29, 0.01], [1e-6, 0.5, 0.499999]]
    points = [(0.5, 2.0, 3.0), (10.0, 1.0, 0.1), (0.3, 40.0, 2.5)]

    def lp(a0, a1, a2, theta=None):
        return float(stats.dirichlet.logpdf(np.array(theta), np.array([a0, a1, a2])))

    runs = value_runs(lp, points, {"theta": thetas}, value_tolerance=1e-11)
    write_program(
        "dist_dirichlet",
        "`dirichlet_lpdf(theta | alpha)` against scipy.stats.dirichlet.logpdf:\n"
        "value and gradient in alpha (central differences); `_lupdf` drops nothing.",
        runs,
        """
fn lp(p: [f64; 3], theta: [f64; 3]) -> f64 { dirichlet_lpdf(theta, p) }
fn value_and_slope(p: [f64; 3], theta: [f64; 3]) -> (f64, [f64; 3]) { value_and_grad(lp, p, theta) }
fn value(p: [f64; 3], theta: [f64; 3]) -> f64 { dirichlet_lupdf(theta, p) }
""",
    )


def symmetric(a, b, c, d, e, f):
    return np.array([[a, b, c], [b, d, e], [c, e, f]])


def mp_symmetric(a, b, c, d, e, f):
    return mp.matrix([[a, b, c], [b, d, e], [c, e, f]])


def multi_normal():
    points = [
        (0.5, -1.0, 2.0, 0.0, 0.1, 0.2, 2.0, 0.3, -0.2, 1.5, 0.4, 1.0),
        (10.0, 0.0, -3.0, 9.0, 1.0, -2.0, 1.0, 0.9, 0.0, 1.0, 0.0, 0.01),
        (1e-3, 2e-3, 0.0, 0.0, 0.0, 0.0, 1e-4, 0.0, 0.0, 1e-4, 0.0, 1e-4),
    ]

    def lp(*p):
        sigma = symmetric(*p[6:])
        return float(stats.multivariate_normal.logpdf(np.array(p[:3]), np.array(p[3:6]), sigma))

    def mp_lp(*p):
        sigma = mp_symmetric(*p[6:])
        r = mp.matrix([p[k] - p[3 + k] for k in range(3)])
        l = mp.cholesky(sigma)
        z = mp.lu_solve(l, r)
        quad = sum(z[k] ** 2 for k in range(3))
        return -1.5 * mp.log(2 * mp.pi) - sum(mp.log(l[k, k]) for k in range(3)) - quad / 2

    runs = value_runs(lp, points, unnormalized=lambda n: -1.5 * math.log(2 * math.pi), precise=mp_lp)
    write_program(
        "dist_multi_normal",
        "`multi_normal_lpdf(y | mu, Sigma)` against scipy.stats.multivariate_normal:\n"
        "value, gradient in y, mu and the six entries of the symmetric Sigma\n"
        "(central differences moving both mirrored entries), `_lupdf`.",
        runs,
        """
fn sigma(p: [f64; 12]) -> [[f64; 3]; 3] { [[p[6], p[7], p[8]], [p[7], p[9], p[10]], [p[8], p[10], p[11]]] }
fn lp(p: [f64; 12]) -> f64 { multi_normal_lpdf([p[0], p[1], p[2]], [p[3], p[4], p[5]], sigma(p)) }
fn value_and_slope(p: [f64; 12]) -> (f64, [f64; 12]) { value_and_grad(lp, p) }
fn value(p: [f64; 12]) -> f64 { lp(p) }
fn unnormalized(p: [f64; 12]) -> f64 { multi_normal_lupdf([p[0], p[1], p[2]], [p[3], p[4], p[5]], sigma(p)) }
""",
    )


def multi_normal_cholesky():
    points = [
        (0.5, -1.0, 2.0, 0.0, 0.1, 0.2, 1.5, 0.3, 1.2, -0.2, 0.4, 0.8),
        (10.0, 0.0, -3.0, 9.0, 1.0, -2.0, 1.0, 0.9, 0.4, 0.0, 0.1, 0.1),
    ]

    def lower(l00, l10, l11, l20, l21, l22):
        return np.array([[l00, 0, 0], [l10, l11, 0], [l20, l21, l22]])

    def lp(*p):
        l = lower(*p[6:])
        return float(stats.multivariate_normal.logpdf(np.array(p[:3]), np.array(p[3:6]), l @ l.T))

    runs = value_runs(lp, points, unnormalized=lambda n: -1.5 * math.log(2 * math.pi))
    write_program(
        "dist_multi_normal_cholesky",
        "`multi_normal_cholesky_lpdf(y | mu, L)` against\n"
        "scipy.stats.multivariate_normal.logpdf(y, mu, L Lᵀ): value, gradient in\n"
        "y, mu and the lower triangle of L (central differences), `_lupdf`.",
        runs,
        """
fn factor(p: [f64; 12]) -> [[f64; 3]; 3] { [[p[6], 0.0, 0.0], [p[7], p[8], 0.0], [p[9], p[10], p[11]]] }
fn lp(p: [f64; 12]) -> f64 { multi_normal_cholesky_lpdf([p[0], p[1], p[2]], [p[3], p[4], p[5]], factor(p)) }
fn value_and_slope(p: [f64; 12]) -> (f64, [f64; 12]) { value_and_grad(lp, p) }
fn value(p: [f64; 12]) -> f64 { lp(p) }
fn unnormalized(p: [f64; 12]) -> f64 { multi_normal_cholesky_lupdf([p[0], p[1], p[2]], [p[3], p[4], p[5]], factor(p)) }
""",
    )


def lkj_log_constant(eta, k):
    """ln c_K(eta) of Lewandowski, Kurowicka and Joe (2009), at 50 digits."""
    eta = mp.mpf(eta)
    total = mp.mpf(0)
    for j in range(1, k):
        bj = eta + mp.mpf(j - 1) / 2
        total += (2 * eta - 2 + j) * j * mp.log(2) + j * (2 * mp.loggamma(bj) - mp.loggamma(2 * bj))
    return -total


def check_lkj_constant():
    """The constant against numerical integrals of det(R)^(eta - 1) over
    the 2x2 and 3x3 correlation matrices."""
    for eta in [0.7, 1.0, 2.5]:
        area = mp.quad(lambda r: (1 - r * r) ** (eta - 1), [-1, 1])
        assert abs(-mp.log(area) - lkj_log_constant(eta, 2)) < 1e-20, eta
    for eta in [1.5, 3.0]:
        def det(r23, r13, r12):
            d = 1 - r12 * r12 - r13 * r13 - r23 * r23 + 2 * r12 * r13 * r23
            return max(d, 0.0) ** (eta - 1)
        width = lambda r12, r13: math.sqrt(max((1 - r12 * r12) * (1 - r13 * r13), 0.0))
        volume, _ = integrate.tplquad(
            det, -1, 1, -1, 1,
            lambda r12, r13: r12 * r13 - width(r12, r13),
            lambda r12, r13: r12 * r13 + width(r12, r13),
            epsabs=1e-11, epsrel=1e-11,
        )
        got = float(lkj_log_constant(eta, 3))
        assert abs(-math.log(volume) - got) < 1e-6, (eta, -math.log(volume), got)


def lkj_corr_cholesky():
    check_lkj_constant()
    correlations = [
        np.array([[1.0, 0.3, -0.2], [0.3, 1.0, 0.5], [-0.2, 0.5, 1.0]]),
        np.array([[1.0, 0.9, 0.8], [0.9, 1.0, 0.75], [0.8, 0.75, 1.0]]),
        np.eye(3),
    ]
    factors = [np.linalg.cholesky(r) for r in correlations]
    etas = [(2.0,), (0.5,), (1.0,)]

    def lp(eta, l=None):
        l = np.array(l)
        k = len(l)
        density = sum((k - i + 2 * eta - 2) * mp.log(l[i - 1][i - 1]) for i in range(2, k + 1))
        return lkj_log_constant(eta, k) + density

    data = {"l": [f.tolist() for f in factors]}
    runs = value_runs(lp, etas, data)
    write_program(
        "dist_lkj_corr_cholesky",
        "`lkj_corr_cholesky_lpdf(L | eta)`: the normalizing constant of\n"
        "Lewandowski, Kurowicka and Joe (2009) in mpmath (checked there against\n"
        "numerical integrals for K = 2 and 3) plus sum_k (K - k + 2 eta - 2) ln L_kk;\n"
        "the gradient in eta by central differences. Factors from numpy.",
        runs,
        """
fn lp(p: [f64; 1], l: [[f64; 3]; 3]) -> f64 { lkj_corr_cholesky_lpdf(l, p[0]) }
fn value_and_slope(p: [f64; 1], l: [[f64; 3]; 3]) -> (f64, [f64; 1]) { value_and_grad(lp, p, l) }
fn value(p: [f64; 1], l: [[f64; 3]; 3]) -> f64 { lkj_corr_cholesky_lupdf(l, p[0]) }
""",
    )


def categorical():
    thetas = [[0.2, 0.3, 0.5], [1e-10, 0.5, 0.4999999999]]
    ys = [[1, 3, 3, 2], [2, 2, 3, 3]]
    values = [{"ok": number(sum(math.log(t[y - 1]) for y in ys_))} for t, ys_ in zip(thetas, ys)]
    singles = [{"ok": number(math.log(t[ys_[0] - 1]))} for t, ys_ in zip(thetas, ys)]
    betas = [(0.5, -1.0, 2.0), (30.0, -30.0, 0.0)]

    def logit_lp(b0, b1, b2, y=None):
        ls = special.log_softmax(np.array([b0, b1, b2]))
        return float(sum(ls[k - 1] for k in y))

    runs = [
        ("vectorized", {"batch": {"theta": thetas, "y": ys}}, values, 1e-13),
        ("single", {"batch": {"theta": thetas, "y": [y[0] for y in ys]}}, singles, 1e-13),
    ]
    runs += [(("logit_" + e), i, r, t) for e, i, r, t in value_runs(logit_lp, betas, {"y": ys})]
    write_program(
        "dist_categorical",
        "`categorical_lpmf(y | theta)` (one outcome and a vector of them) against\n"
        "the logs of the chosen probabilities; `categorical_logit_lpmf(y | beta)`\n"
        "against scipy.special.log_softmax, with its gradient by central differences.",
        runs,
        """
fn vectorized(theta: [f64; 3], y: [i64; 4]) -> f64 { categorical_lpmf(y, theta) }
fn single(theta: [f64; 3], y: i64) -> f64 { categorical_lupmf(y, theta) }
fn lp(p: [f64; 3], y: [i64; 4]) -> f64 { categorical_logit_lpmf(y, p) }
fn logit_value_and_slope(p: [f64; 3], y: [i64; 4]) -> (f64, [f64; 3]) { value_and_grad(lp, p, y) }
fn logit_value(p: [f64; 3], y: [i64; 4]) -> f64 { categorical_logit_lupmf(y, p) }
""",
    )


def ordered_logistic_lp(k, eta, cuts):
    """ln(inv_logit(eta - c_{k-1}) - inv_logit(eta - c_k)) at 50 digits."""
    s = lambda t: 1 / (1 + mp.exp(-t))
    c = [-mp.inf] + [mp.mpf(x) for x in cuts] + [mp.inf]
    eta = mp.mpf(eta)
    upper = mp.mpf(1) if c[k - 1] == -mp.inf else s(eta - c[k - 1])
    lower = mp.mpf(0) if c[k] == mp.inf else s(eta - c[k])
    return mp.log(upper - lower)


def ordered_logistic():
    cuts = (-1.0, 0.5, 2.0)
    cases = [(1, 0.3), (2, 0.3), (3, -0.4), (4, 1.0), (1, 30.0), (2, 40.0), (4, -35.0), (3, 0.0)]
    points = [(eta,) + cuts for _, eta in cases]
    ks = [k for k, _ in cases]

    def lp(eta, c0, c1, c2, k=None):
        return ordered_logistic_lp(k, eta, (c0, c1, c2))

    runs = value_runs(lp, points, {"k": ks})
    etas = [0.3, -2.0, 5.0, 0.0]
    vk = [1, 2, 4, 3]
    total = sum(ordered_logistic_lp(k, e, cuts) for k, e in zip(vk, etas))
    runs.append(("vectorized", {"batch": {"eta": [etas], "k": [vk]}}, [{"ok": number(total)}], 1e-12))
    write_program(
        "dist_ordered_logistic",
        "`ordered_logistic_lpmf(k | eta, c)` against the log of\n"
        "inv_logit(eta - c_{k-1}) - inv_logit(eta - c_k) at 50 digits (mpmath),\n"
        "every category and the tails; the gradient in eta and c by central\n"
        "differences; a vector of outcomes with a vector of eta.",
        runs,
        """
fn lp(p: [f64; 4], k: i64) -> f64 { ordered_logistic_lpmf(k, p[0], [p[1], p[2], p[3]]) }
fn value_and_slope(p: [f64; 4], k: i64) -> (f64, [f64; 4]) { value_and_grad(lp, p, k) }
fn value(p: [f64; 4], k: i64) -> f64 { ordered_logistic_lupmf(k, p[0], [p[1], p[2], p[3]]) }
fn vectorized(eta: [f64; 4], k: [i64; 4]) -> f64 { ordered_logistic_lpmf(k, eta, [-1.0, 0.5, 2.0]) }
""",
    )


def linalg_programs():
    points = [(4.0, 2.0, 0.4, 5.0, 1.0, 3.0), (1.0, 0.999, 0.0, 1.0, 0.0, 1e-6), (1e6, 3.0, -2.0, 1.0, 0.5, 2.0)]
    weights = np.array([[0.3, 0.0, 0.0], [-1.2, 0.7, 0.0], [2.0, 0.5, -0.4]])
    rhs = np.array([1.0, -2.0, 0.5])

    def chol_sum(*p):
        return float(np.sum(weights * np.linalg.cholesky(symmetric(*p))))

    def solve_sum(*p):
        l = np.linalg.cholesky(symmetric(*p))
        return float(np.sum(rhs * linalg.solve_triangular(l, rhs * np.array(p[:3]), lower=True)))

    def mp_chol_sum(*p):
        l = mp.cholesky(mp_symmetric(*p))
        return sum(weights[i][j] * l[i, j] for i in range(3) for j in range(3))

    def mp_solve_sum(*p):
        l = mp.cholesky(mp_symmetric(*p))
        z = mp.lu_solve(l, mp.matrix([rhs[k] * p[k] for k in range(3)]))
        return sum(rhs[k] * z[k] for k in range(3))

    factors = [{"ok": np.linalg.cholesky(symmetric(*p)).tolist()} for p in points]
    runs = [("factor", {"batch": {"p": [list(p) for p in points]}}, factors, 1e-12)]
    runs += [(("cholesky_" + e), i, r, t) for e, i, r, t in value_runs(chol_sum, points, precise=mp_chol_sum)]
    runs += [(("solve_" + e), i, r, t) for e, i, r, t in value_runs(solve_sum, points, precise=mp_solve_sum)]
    a = [[1.0, 2.0], [3.0, 4.0]]
    runs.append(("diagonals", {"batch": {"a": [a]}}, [{"ok": [[1.0, 4.0], [[1.0, 0.0], [0.0, 4.0]]]}], 0.0))
    bad = [[[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.5], [0.4, 1.0]], [[-1.0, 0.0], [0.0, 1.0]]]
    runs.append(("refused", {"batch": {"a": bad}}, [
        {"error": {"kind": "domain_error", "line": 0, "message": "positive definite"}},
        {"error": {"kind": "domain_error", "line": 0, "message": "symmetric"}},
        {"error": {"kind": "domain_error", "line": 0, "message": "positive definite"}},
    ], 0.0))
    matrix_rhs = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]])
    l0 = np.linalg.cholesky(symmetric(*points[0]))
    runs.append(("solve_matrix", {"batch": {"p": [list(points[0])], "b": [matrix_rhs.tolist()]}},
                 [{"ok": linalg.solve_triangular(l0, matrix_rhs, lower=True).tolist()}], 1e-13))
    source = """
fn sigma(p: [f64; 6]) -> [[f64; 3]; 3] { [[p[0], p[1], p[2]], [p[1], p[3], p[4]], [p[2], p[4], p[5]]] }
fn factor(p: [f64; 6]) -> [[f64; 3]; 3] { cholesky_decompose(sigma(p)) }
fn weighted(m: [[f64; 3]; 3]) -> f64 {
    let w = [[0.3, 0.0, 0.0], [-1.2, 0.7, 0.0], [2.0, 0.5, -0.4]];
    let mut s = 0.0;
    for i in 0..3 { for j in 0..3 { s = s + w[i][j] * m[i][j]; } }
    s
}
fn chol(p: [f64; 6]) -> f64 { weighted(factor(p)) }
fn cholesky_value_and_slope(p: [f64; 6]) -> (f64, [f64; 6]) { value_and_grad(chol, p) }
fn cholesky_value(p: [f64; 6]) -> f64 { chol(p) }
fn solved(p: [f64; 6]) -> f64 {
    let r = [1.0, -2.0, 0.5];
    dot(r, mdivide_left_tri_low(factor(p), [r[0] * p[0], r[1] * p[1], r[2] * p[2]]))
}
fn solve_value_and_slope(p: [f64; 6]) -> (f64, [f64; 6]) { value_and_grad(solved, p) }
fn solve_value(p: [f64; 6]) -> f64 { solved(p) }
fn solve_matrix(p: [f64; 6], b: [[f64; 2]; 3]) -> [[f64; 2]; 3] { mdivide_left_tri_low(factor(p), b) }
fn diagonals(a: [[f64; 2]; 2]) -> ([f64; 2], [[f64; 2]; 2]) { (diagonal(a), diag_matrix(diagonal(a))) }
fn refused(a: [[f64; 2]; 2]) -> [[f64; 2]; 2] { cholesky_decompose(a) }
"""
    write_program(
        "linalg_cholesky",
        "`cholesky_decompose` against numpy.linalg.cholesky, and the gradient of a\n"
        "weighted sum of its entries in the six entries of a symmetric matrix\n"
        "(central differences); `mdivide_left_tri_low` against\n"
        "scipy.linalg.solve_triangular (a vector and a matrix right-hand side,\n"
        "and the gradient); `diagonal`, `diag_matrix`; the domain errors.",
        runs,
        source,
    )
    # The errors are at the call in `refused`: its line, once written.
    path = "tests/programs/linalg_cholesky.ab"
    text = open(path).read()
    line = text[: text.index("fn refused")].count("\n") + 1
    open(path, "w").write(text.replace('"line": 0', f'"line": {line}'))


def gp_exp_quad_cov():
    xs1 = [[0.0, 0.5, 2.0], [-1.0, -1.0, 30.0]]
    xs2 = [[[0.0, 1.0], [0.5, -0.5], [2.0, 2.0]], [[1e3, 1.0], [1e3, 1.5], [-3.0, 0.25]]]
    w = np.array([[1.0, 0.5, -0.3], [0.2, 2.0, 0.1], [-1.0, 0.7, 0.4]])

    def cov(x, alpha, rho):
        x = np.array(x, dtype=float)
        if x.ndim == 1:
            x = x[:, None]
        d = np.array([[np.sum((a - b) ** 2) for b in x] for a in x])
        return alpha ** 2 * np.exp(-d / (2 * rho ** 2))

    params = [(1.5, 0.7), (0.3, 20.0)]
    runs = [
        ("points", {"batch": {"x": xs1, "p": [list(p) for p in params]}},
         [{"ok": cov(x, *p).tolist()} for x, p in zip(xs1, params)], 1e-13),
        ("points_2d", {"batch": {"x": xs2, "p": [list(p) for p in params]}},
         [{"ok": cov(x, *p).tolist()} for x, p in zip(xs2, params)], 1e-11),
    ]

    def weighted(alpha, rho, x=None):
        return float(np.sum(w * cov(x, alpha, rho)))

    runs += [(("weighted_" + e), i, r, t) for e, i, r, t in value_runs(weighted, params, {"x": xs2})]
    write_program(
        "gp_exp_quad_cov",
        "`gp_exp_quad_cov(x, alpha, rho)` against alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2))\n"
        "in numpy, for points on a line and in the plane (the Gram form loses\n"
        "digits for far points that are close: 1e-11), and the gradient of a\n"
        "weighted sum in alpha and rho (central differences).",
        runs,
        """
fn points(x: [f64; 3], p: [f64; 2]) -> [[f64; 3]; 3] { gp_exp_quad_cov(x, p[0], p[1]) }
fn points_2d(x: [[f64; 2]; 3], p: [f64; 2]) -> [[f64; 3]; 3] { gp_exp_quad_cov(x, p[0], p[1]) }
fn weighted(p: [f64; 2], x: [[f64; 2]; 3]) -> f64 {
    let w = [[1.0, 0.5, -0.3], [0.2, 2.0, 0.1], [-1.0, 0.7, 0.4]];
    let k = gp_exp_quad_cov(x, p[0], p[1]);
    let mut s = 0.0;
    for i in 0..3 { for j in 0..3 { s = s + w[i][j] * k[i][j]; } }
    s
}
fn weighted_value_and_slope(p: [f64; 2], x: [[f64; 2]; 3]) -> (f64, [f64; 2]) { value_and_grad(weighted, p, x) }
fn weighted_value(p: [f64; 2], x: [[f64; 2]; 3]) -> f64 { weighted(p, x) }
""",
    )


def main():
    normal_id_glm()
    dirichlet()
    multi_normal()
    multi_normal_cholesky()
    lkj_corr_cholesky()
    categorical()
    ordered_logistic()
    linalg_programs()
    gp_exp_quad_cov()


if __name__ == "__main__":
    main()
