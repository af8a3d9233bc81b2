#!/usr/bin/env python3
"""Writes the program tests of the special functions and the distributions
(tests/programs/special_*.ab, tests/programs/dist_*.ab): each runs a program
on many points and expects the values mpmath (50 digits) or scipy.stats
gives, and gradients from mpmath's numerical differentiation at 50 digits
(or the closed form where noted). The programs' expected values never come
from autobatch itself.

Run from the workspace root with a Python that has mpmath, scipy and numpy:
    python3 tools/distributions_reference.py
"""
import json
import math

import mpmath as mp

mp.mp.dps = 50

OUT = "tests/programs"


def number(x):
    """A float as the test files write it (non-finite as strings)."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def write_program(name, comment, runs, source):
    """`runs`: (entry, inputs, expected results, tolerance) tuples."""
    lines = [f"// {line}" if line else "//" for line in comment.strip().split("\n")]
    lines.append("// Written by tools/distributions_reference.py: do not edit, run it again.")
    for entry, inputs, results, tolerance in runs:
        lines.append(f"//@ run: {entry} {json.dumps(inputs)}")
        lines.append(f"//@ tolerance: {tolerance}")
        lines.append(f"//@ expect: {json.dumps(results)}")
    lines.append(source.strip())
    with open(f"{OUT}/{name}.ab", "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# Special functions.

def inv_phi(p):
    return mp.sqrt(2) * mp.erfinv(2 * p - 1)


SPECIAL = {
    # name: (mpmath function, points, differentiable)
    "lgamma": (
        lambda x: mp.re(mp.loggamma(x)),
        [1e-300, 1e-8, 0.1, 0.5, 0.999999, 1.0, 1.000001, 1.5, 1.9999999, 2.0, 2.5, 3.7, 10.0, 13.5, 100.0,
         1e6, 1e15, 1e300, -0.5, -1.5, -3.3, -100.3],
        True,
    ),
    "digamma": (
        mp.digamma,
        [1e-300, 1e-8, 0.1, 0.5, 1.0, 1.4616321449683622, 1.5, 2.0, 9.9, 10.0, 123.4, 1e10, 1e300,
         -0.5, -1.5, -3.3, -100.3],
        True,
    ),
    "trigamma": (
        lambda x: mp.polygamma(1, x),
        [1e-150, 1e-8, 0.1, 0.5, 1.0, 2.0, 9.9, 10.0, 123.4, 1e10, 1e300, -0.5, -1.5, -3.3, -100.3],
        False,
    ),
    "erf": (mp.erf, [-6.0, -2.0, -0.5, -1e-10, 0.0, 1e-300, 0.3, 0.49, 0.5, 1.0, 2.5, 5.9, 27.0], True),
    "erfc": (mp.erfc, [-6.0, -1.0, -0.2, 0.0, 0.2, 0.5, 1.0, 3.0, 7.99, 8.0, 15.0, 26.0], True),
    "Phi": (mp.ncdf, [-37.5, -30.0, -20.0, -8.0, -1.0, -1e-8, 0.0, 0.5, 1.96, 5.0, 8.5], True),
    "inv_Phi": (
        inv_phi,
        [1e-300, 1e-100, 1e-20, 1e-5, 0.02, 0.1, 0.3, 0.5, 0.7, 0.975, 0.999, 1 - 1e-10],
        True,
    ),
}


# The closed-form derivatives of the differentiable special functions.
SLOPES = {
    "lgamma": mp.digamma,
    "digamma": lambda x: mp.polygamma(1, x),
    "erf": lambda x: 2 / mp.sqrt(mp.pi) * mp.exp(-x * x),
    "erfc": lambda x: -2 / mp.sqrt(mp.pi) * mp.exp(-x * x),
    "Phi": mp.npdf,
    "inv_Phi": lambda p: 1 / mp.npdf(inv_phi(p)),
}


def special_programs():
    for name, (f, points, differentiable) in SPECIAL.items():
        def exact(x, f=f):
            with mp.workdps(400):
                return f(mp.mpf(x))
        values = [number(exact(x)) for x in points]
        f32_points = [x for x in points if abs(x) < 1e30 and (x == 0 or abs(x) > 1e-30)]
        f32_values = [number(exact(float(mp.mpf(float(_f32(x)))))) for x in f32_points]
        f32_results = [{"ok": _f32_round(v)} for v in f32_values]
        if differentiable:
            slope = SLOPES[name]
            grads = [number(exact_dps(slope, mp.mpf(x))) for x in points]
            results = [{"ok": [v, g]} for v, g in zip(values, grads)]
            entry_source = f"fn value_and_slope(x: f64) -> (f64, f64) {{ value_and_grad(f, x) }}\n"
        else:
            results = [{"ok": v} for v in values]
            entry_source = "fn value_and_slope(x: f64) -> f64 { f(x) }\n"
        # Elementwise on an array: the same values.
        array_points = points[:4]
        array_results = [{"ok": [number(exact(x)) for x in array_points]}]
        source = (
            f"fn f(x: f64) -> f64 {{ {name}(x) }}\n"
            + entry_source
            + f"fn single(x: f32) -> f32 {{ {name}(x) }}\n"
            + f"fn elementwise(v: [f64; 4]) -> [f64; 4] {{ {name}(v) }}\n"
        )
        write_program(
            f"special_{name.lower()}",
            f"`{name}` against mpmath at 50 digits: values (tails included) and,\n"
            f"{'where differentiable, ' if differentiable else ''}the derivative by its closed form in mpmath;\n"
            f"`f32` (computed in `f64`, rounded once) and elementwise on an array.",
            [
                ("value_and_slope", {"batch": {"x": points}}, results, 1e-12),
                ("single", {"batch": {"x": [float(_f32(x)) for x in f32_points]}}, f32_results, 1e-6),
                ("elementwise", {"batch": {"v": [array_points]}}, array_results, 1e-13),
            ],
            source,
        )


def exact_dps(f, t):
    with mp.workdps(400):
        return f(t)


def _f32(x):
    import numpy as np
    return np.float32(x)


def _f32_round(v):
    import numpy as np
    if isinstance(v, str):
        return v
    return float(np.float32(v))




# ---------------------------------------------------------------------------
# Distributions: scipy.stats' logpdf / logpmf / logcdf / logsf, gradients by
# central finite differences of the same, the constants each `_lupdf` drops
# written here from the densities' formulas.

LN_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def dists():
    from scipy import special, stats

    def nb2(n, mu, phi):
        return stats.nbinom.logpmf(n, phi, phi / (mu + phi))

    # name: (scipy log density (y, *params), [lcdf, lccdf] or None,
    #        the constant `_lupdf` drops as a function of (y, *params),
    #        points (y, *params), discrete)
    return {
        "normal": (
            lambda y, m, s: stats.norm.logpdf(y, m, s),
            (lambda y, m, s: stats.norm.logcdf(y, m, s), lambda y, m, s: stats.norm.logsf(y, m, s)),
            lambda y, m, s: -LN_SQRT_2PI,
            [(0.5, 0.2, 1.5), (-3.0, 1.0, 0.01), (1e3, -2.0, 30.0), (0.0, 0.0, 1e-8 * 0 + 1e3), (-9.0, 0.0, 1.0), (7.0, 0.5, 2.0)],
            False,
        ),
        "student_t": (
            lambda y, nu, m, s: stats.t.logpdf(y, nu, m, s),
            (student_t_lcdf, lambda y, nu, m, s: student_t_lcdf(-y, nu, -m, s)),
            lambda y, nu, m, s: -0.5 * math.log(math.pi),
            [(0.5, 3.0, 0.2, 1.5), (-40.0, 1.5, 1.0, 0.5), (2.0, 1e4, 0.0, 1.0), (1.0, 0.7, -1.0, 3.0),
             (-300.0, 2.5, 0.0, 1.0), (50.0, 4.0, 1.0, 2.0), (0.01, 30.0, 0.0, 1.0)],
            False,
        ),
        "cauchy": (
            lambda y, m, s: stats.cauchy.logpdf(y, m, s),
            (cauchy_lcdf, lambda y, m, s: cauchy_lcdf(-y, -m, s)),
            lambda y, m, s: -math.log(math.pi),
            [(0.5, 0.2, 1.5), (-1e4, 1.0, 0.5), (3.0, 3.0, 1e-3)],
            False,
        ),
        "double_exponential": (
            lambda y, m, s: stats.laplace.logpdf(y, m, s),
            (lambda y, m, s: stats.laplace.logcdf(y, m, s), lambda y, m, s: stats.laplace.logsf(y, m, s)),
            lambda y, m, s: -math.log(2),
            [(0.5, 0.2, 1.5), (-3.0, 1.0, 0.5), (40.0, 0.0, 1.0), (-40.0, 0.0, 1.0)],
            False,
        ),
        "logistic": (
            lambda y, m, s: stats.logistic.logpdf(y, m, s),
            (lambda y, m, s: stats.logistic.logcdf(y, m, s), lambda y, m, s: stats.logistic.logsf(y, m, s)),
            lambda y, m, s: 0.0,
            [(0.5, 0.2, 1.5), (-30.0, 1.0, 0.5), (300.0, 0.0, 2.0)],
            False,
        ),
        "lognormal": (
            lambda y, m, s: stats.lognorm.logpdf(y, s, scale=math.exp(m)),
            (lambda y, m, s: stats.lognorm.logcdf(y, s, scale=math.exp(m)),
             lambda y, m, s: stats.lognorm.logsf(y, s, scale=math.exp(m))),
            lambda y, m, s: -LN_SQRT_2PI,
            [(0.5, 0.2, 1.5), (1e-5, 1.0, 0.5), (30.0, 0.0, 1.0)],
            False,
        ),
        "exponential": (
            lambda y, b: stats.expon.logpdf(y, scale=1 / b),
            (lambda y, b: stats.expon.logcdf(y, scale=1 / b), lambda y, b: stats.expon.logsf(y, scale=1 / b)),
            lambda y, b: 0.0,
            [(0.5, 1.5), (1e-6, 2.0), (40.0, 0.1), (3.0, 30.0)],
            False,
        ),
        "gamma": (
            lambda y, a, b: stats.gamma.logpdf(y, a, scale=1 / b),
            (lambda y, a, b: log_gamma_p(a, b * y), lambda y, a, b: log_gamma_q(a, b * y)),
            lambda y, a, b: 0.0,
            [(0.5, 2.5, 1.5), (1e-5, 0.5, 2.0), (40.0, 10.0, 0.3), (3.0, 1.0, 1.0),
             (100.0, 2.0, 1.0), (0.01, 30.0, 1.0), (230.0, 200.0, 1.0), (0.2, 0.01, 3.0)],
            False,
        ),
        "inv_gamma": (
            lambda y, a, b: stats.invgamma.logpdf(y, a, scale=b),
            (lambda y, a, b: log_gamma_q(a, b / y), lambda y, a, b: log_gamma_p(a, b / y)),
            lambda y, a, b: 0.0,
            [(0.5, 2.5, 1.5), (1e-2, 0.5, 2.0), (40.0, 10.0, 0.3), (1e-3, 3.0, 1.0), (500.0, 2.0, 1.0)],
            False,
        ),
        "weibull": (
            lambda y, a, s: stats.weibull_min.logpdf(y, a, scale=s),
            (lambda y, a, s: stats.weibull_min.logcdf(y, a, scale=s),
             lambda y, a, s: stats.weibull_min.logsf(y, a, scale=s)),
            lambda y, a, s: 0.0,
            [(0.5, 2.5, 1.5), (1e-3, 0.5, 2.0), (4.0, 1.0, 0.3)],
            False,
        ),
        "chi_square": (
            lambda y, nu: stats.chi2.logpdf(y, nu),
            (lambda y, nu: log_gamma_p(nu / 2, y / 2), lambda y, nu: log_gamma_q(nu / 2, y / 2)),
            lambda y, nu: 0.0,
            [(0.5, 2.5), (1e-3, 0.5), (40.0, 10.0), (3.0, 2.0), (200.0, 4.0), (1e-6, 40.0)],
            False,
        ),
        "beta": (
            lambda y, a, b: stats.beta.logpdf(y, a, b),
            (lambda y, a, b: log_beta_inc(a, b, 0, y), lambda y, a, b: log_beta_inc(a, b, y, 1)),
            lambda y, a, b: 0.0,
            [(0.5, 2.5, 1.5), (1e-3, 0.5, 2.0), (0.99, 10.0, 0.3), (0.3, 1.0, 1.0), (1e-8, 3.0, 2.0),
             (0.9, 2.0, 60.0), (0.45, 400.0, 500.0)],
            False,
        ),
        "uniform": (
            lambda y, a, b: stats.uniform.logpdf(y, a, b - a),
            (lambda y, a, b: stats.uniform.logcdf(y, a, b - a), lambda y, a, b: stats.uniform.logsf(y, a, b - a)),
            lambda y, a, b: 0.0,
            [(0.5, 0.2, 1.5), (-3.0, -4.0, 10.0), (0.25, 0.0, 1.0)],
            False,
        ),
        "bernoulli": (
            lambda n, t: stats.bernoulli.logpmf(n, t),
            (bernoulli_lcdf, bernoulli_lccdf),
            lambda n, t: 0.0,
            [(1, 0.3), (0, 0.3), (1, 1e-9), (0, 0.99)],
            True,
        ),
        "bernoulli_logit": (
            lambda n, a: stats.bernoulli.logpmf(n, special.expit(a)),
            None,
            lambda n, a: 0.0,
            [(1, 0.3), (0, -2.0), (1, -20.0), (0, 5.0)],
            True,
        ),
        "binomial": (
            lambda n, N, t: stats.binom.logpmf(n, N, t),
            (binomial_lcdf, binomial_lccdf),
            lambda n, N, t: special.gammaln(N + 1) - special.gammaln(n + 1) - special.gammaln(N - n + 1),
            [(3, 10, 0.3), (0, 5, 0.1), (100, 100, 0.9), (40, 1000, 0.05), (1, 400, 0.2), (95, 100, 0.3)],
            True,
        ),
        "binomial_logit": (
            lambda n, N, a: stats.binom.logpmf(n, N, special.expit(a)),
            None,
            lambda n, N, a: special.gammaln(N + 1) - special.gammaln(n + 1) - special.gammaln(N - n + 1),
            [(3, 10, -0.3), (0, 5, -2.0), (100, 100, 3.0), (40, 1000, -3.0)],
            True,
        ),
        "poisson": (
            lambda n, l: stats.poisson.logpmf(n, l),
            (lambda n, l: log_gamma_q(n + 1, l), lambda n, l: log_gamma_p(n + 1, l)),
            lambda n, l: -special.gammaln(n + 1),
            [(3, 2.5), (0, 0.1), (1000, 950.0), (7, 1e-3), (0, 30.0), (60, 10.0)],
            True,
        ),
        "poisson_log": (
            lambda n, a: stats.poisson.logpmf(n, math.exp(a)),
            None,
            lambda n, a: -special.gammaln(n + 1),
            [(3, 0.9), (0, -2.0), (1000, 6.9), (7, -3.0)],
            True,
        ),
        "neg_binomial_2": (
            nb2,
            (lambda n, mu, phi: nb2_cdf(n, mu, phi, False), lambda n, mu, phi: nb2_cdf(n, mu, phi, True)),
            lambda n, mu, phi: -special.gammaln(n + 1),
            [(3, 2.5, 1.5), (0, 0.1, 10.0), (1000, 950.0, 3.0), (7, 4.0, 1e4), (0, 200.0, 2.0), (300, 3.0, 5.0)],
            True,
        ),
        "neg_binomial_2_log": (
            lambda n, eta, phi: nb2(n, math.exp(eta), phi),
            None,
            lambda n, eta, phi: -special.gammaln(n + 1),
            [(3, 0.9, 1.5), (0, -2.0, 10.0), (1000, 6.9, 3.0), (7, 1.4, 1e4)],
            True,
        ),
        "von_mises": (
            lambda y, m, k: von_mises_logpdf(y, m, k),
            None,
            lambda y, m, k: -math.log(2 * math.pi),
            [(0.5, 0.2, 1.5), (3.0, -1.0, 0.01), (0.1, 0.0, 50.0), (2.0, 1.0, 1e4), (-2.5, 0.3, 1e-3)],
            False,
        ),
    }


def log_gamma_p(a, x):
    """ln P(a, x), the regularized lower incomplete gamma function, at 50 digits."""
    a, x = mp.mpf(a), mp.mpf(x)
    return mp.log(mp.gammainc(a, 0, x, regularized=True))


def log_gamma_q(a, x):
    """ln Q(a, x) = ln(1 - P(a, x)), at 50 digits."""
    a, x = mp.mpf(a), mp.mpf(x)
    return mp.log(mp.gammainc(a, x, mp.inf, regularized=True))


def log_beta_inc(a, b, lo, hi):
    """ln of the regularized incomplete beta integral from lo to hi, to 50
    digits (computed with 100 more, so that a tail far below 1 keeps its digits)."""
    with mp.extradps(100):
        value = mp.log(mp.betainc(mp.mpf(a), mp.mpf(b), mp.mpf(lo), mp.mpf(hi), regularized=True))
    return +value


def student_t_lcdf(y, nu, mu, sigma):
    """ln F: I_x(nu/2, 1/2) / 2 below mu, 1 - that above, x = nu / (nu + z^2)."""
    y, nu, mu, sigma = (mp.mpf(v) for v in (y, nu, mu, sigma))
    z = (y - mu) / sigma
    tail = mp.betainc(nu / 2, mp.mpf(0.5), 0, nu / (nu + z * z), regularized=True) / 2
    return mp.log(tail if z < 0 else 1 - tail)


def binomial_lcdf(n, N, t):
    return mp.mpf(0) if n >= N else log_beta_inc(n + 1, N - n, t, 1)


def binomial_lccdf(n, N, t):
    return mp.mpf("-inf") if n >= N else log_beta_inc(n + 1, N - n, 0, t)


def nb2_cdf(n, mu, phi, upper):
    """ln P(X <= n) = ln I_p(phi, n + 1), p = phi / (mu + phi) (upper: ln P(X > n))."""
    mu, phi = mp.mpf(mu), mp.mpf(phi)
    p = phi / (mu + phi)
    return log_beta_inc(phi, n + 1, p, 1) if upper else log_beta_inc(phi, n + 1, 0, p)


def bernoulli_lcdf(n, t):
    return mp.log(1 - mp.mpf(t)) if n == 0 else mp.mpf(0)


def bernoulli_lccdf(n, t):
    return mp.log(mp.mpf(t)) if n == 0 else mp.mpf("-inf")


# The families whose `_lccdf` is checked with its gradient too (the
# incomplete gamma and beta functions' derivatives in every argument).
CCDF_SLOPES = {"gamma", "inv_gamma", "chi_square", "poisson", "student_t", "beta", "binomial",
               "neg_binomial_2"}


def cauchy_lcdf(y, mu, sigma):
    """ln(1/2 + atan((y - mu) / sigma) / pi), at 50 digits."""
    z = (mp.mpf(y) - mp.mpf(mu)) / mp.mpf(sigma)
    return mp.log(mp.mpf(0.5) + mp.atan(z) / mp.pi)


def von_mises_logpdf(y, mu, kappa):
    """kappa cos(y - mu) - ln(2 pi I0(kappa)), at 50 digits."""
    y, mu, kappa = mp.mpf(y), mp.mpf(mu), mp.mpf(kappa)
    return kappa * mp.cos(y - mu) - mp.log(2 * mp.pi * mp.besseli(0, kappa))


def central_difference(f, point, k):
    """The derivative of f at point in coordinate k, by the five-point central
    difference with a step proportional to the coordinate."""
    h = 1e-4 * abs(point[k]) if point[k] != 0 else 1e-5

    def at(t):
        moved = list(point)
        moved[k] += t
        return f(*moved)

    return (at(-2 * h) - 8 * at(-h) + 8 * at(h) - at(2 * h)) / (12 * h)


def cdf_slope(lcdf, point, k):
    """The derivative of a log CDF in coordinate k: mpmath's at 50 digits
    where the CDF is written with mpmath (0 where it is a constant -inf),
    else central differences."""
    value = lcdf(*point)
    if not isinstance(value, mp.mpf):
        return central_difference(lcdf, point, k)
    if mp.isinf(value):
        return 0.0  # a constant -inf (a count beyond the support): no slope
    at = [mp.mpf(x) for x in point]
    return mp.diff(lambda t: lcdf(*(at[:k] + [t] + at[k + 1:])), at[k])


def distribution_programs():
    for name, (logpdf, cdfs, dropped, points, discrete) in dists().items():
        arity = len(points[0])
        kind = "lpmf" if discrete else "lpdf"
        kind_u = "lupmf" if discrete else "lupdf"
        # Real arguments are the point the gradient is taken at; integer
        # outcomes and counts are data.
        real = [k for k in range(arity) if not (discrete and (k == 0 or (name.startswith("binomial") and k == 1)))]
        ints = [k for k in range(arity) if k not in real]
        params = ", ".join(f"p[{real.index(k)}]" if k in real else f"n[{ints.index(k)}]" for k in range(arity))
        n_real, n_int = len(real), len(ints)
        runs = []
        lp_results, lup_results = [], []
        for point in points:
            value = logpdf(*point)
            grad = [central_difference(logpdf, point, k) for k in real]
            lp_results.append({"ok": [number(value), [number(g) for g in grad]]})
            lup_results.append({"ok": number(value - dropped(*point))})
        lup_tolerance = 1e-10 if name.startswith("neg_binomial") else 1e-12
        batch = {"p": [[float(point[k]) for k in real] for point in points]}
        if n_int:
            batch["n"] = [[int(point[k]) for k in ints] for point in points]
        runs.append(("value_and_slope", {"batch": batch}, lp_results, 1e-6))
        # The value itself to a tight tolerance.
        # lgamma(n + phi) - lgamma(phi) loses digits for a large phi.
        value_tolerance = 1e-10 if name.startswith("neg_binomial") else 1e-12
        runs.append(("value", {"batch": batch}, [{"ok": r["ok"][0]} for r in lp_results], value_tolerance))
        runs.append(("unnormalized", {"batch": batch}, lup_results, lup_tolerance))
        # Vectorized: the first point's outcome and the outcomes of the
        # others, with the first point's parameters: the sum.
        first = points[0]
        # Outcomes valid with the first point's parameters (binomial's n <= N).
        ys = [point[0] for point in points if not name.startswith("binomial") or point[0] <= first[1]]
        total = sum(logpdf(y, *first[1:]) for y in ys)
        vbatch = {"p": [[float(first[k]) for k in real]], "ys": [[(int(y) if discrete else float(y)) for y in ys]]}
        if n_int:
            vbatch["n"] = [[int(first[k]) for k in ints]]
        runs.append(("vectorized", {"batch": vbatch}, [{"ok": number(total)}], 1e-12))
        ptype = f"[f64; {n_real}]"
        ntype = f"[i64; {n_int}]"
        sig = f"p: {ptype}" + (f", n: {ntype}" if n_int else "")
        call_args = "p" + (", n" if n_int else "")
        ytype = "i64" if discrete else "f64"
        vector_params = params.replace("p[0]", "ys", 1) if not discrete else params.replace("n[0]", "ys", 1)
        source = (
            f"fn lp({sig}) -> f64 {{ {name}_{kind}({params}) }}\n"
            f"fn value_and_slope({sig}) -> (f64, {ptype}) {{ value_and_grad(lp, {call_args}) }}\n"
            f"fn value({sig}) -> f64 {{ lp({call_args}) }}\n"
            f"fn unnormalized({sig}) -> f64 {{ {name}_{kind_u}({params}) }}\n"
            f"fn vectorized({sig}, ys: [{ytype}; {len(ys)}]) -> f64 {{ {name}_{kind}({vector_params}) }}\n"
        )
        if cdfs is not None:
            lcdf, lccdf = cdfs
            cdf_results = [{"ok": [number(lcdf(*point)), number(lccdf(*point)),
                                   [number(cdf_slope(lcdf, point, k)) for k in real]]}
                           for point in points]
            runs.append(("cdfs", {"batch": batch}, cdf_results, 1e-6))
            if name in CCDF_SLOPES:
                # The values to a tight tolerance, and the gradient of `_lccdf`.
                values = [{"ok": [number(lcdf(*point)), number(lccdf(*point))]} for point in points]
                runs.append(("cdf_values", {"batch": batch}, values, 1e-10))
                slopes = [{"ok": [number(cdf_slope(lccdf, point, k)) for k in real]} for point in points]
                runs.append(("ccdf_slope", {"batch": batch}, slopes, 1e-6))
            source += (
                f"fn lcdf({sig}) -> f64 {{ {name}_lcdf({params}) }}\n"
                f"fn cdfs({sig}) -> (f64, f64, {ptype}) {{\n"
                f"    let (c, g) = value_and_grad(lcdf, {call_args});\n"
                f"    (c, {name}_lccdf({params}), g)\n"
                f"}}\n"
            )
            if name in CCDF_SLOPES:
                source += (
                    f"fn cdf_values({sig}) -> (f64, f64) {{ ({name}_lcdf({params}), {name}_lccdf({params})) }}\n"
                    f"fn lccdf({sig}) -> f64 {{ {name}_lccdf({params}) }}\n"
                    f"fn ccdf_slope({sig}) -> {ptype} {{ grad(lccdf, {call_args}) }}\n"
                )
        write_program(
            f"dist_{name}",
            f"`{name}_{kind}` against scipy.stats at points in the bulk and the tails:\n"
            f"the value, its gradient in the real arguments (central differences of\n"
            f"scipy's), `{name}_{kind_u}` (scipy's less the constant Stan drops), the\n"
            f"sum over a vector of outcomes"
            + (", and `_lcdf` / `_lccdf` (logcdf / logsf) with the gradient of `_lcdf`." if cdfs else "."),
            runs,
            source,
        )


def von_mises_centred_cdf(x, kappa):
    """Stan's centred von Mises CDF from scipy's: scipy.stats.vonmises.cdf
    below kappa 49, and Stan's blend of scipy's at 49 and 50 between 49
    and 50 (above 50 scipy's is Stan's normal approximation too)."""
    from scipy import stats

    if 49.0 <= kappa < 50.0:
        return ((50.0 - kappa) * stats.vonmises.cdf(x, 49.0)
                + (kappa - 49.0) * stats.vonmises.cdf(x, 50.0))
    return float(stats.vonmises.cdf(x, kappa))


def von_mises_cdf(y, mu, kappa):
    """Stan's von_mises_cdf(y | mu, kappa), y in [-pi, pi], from scipy's
    centred CDF: at y - mu wrapped into [-pi, pi), less its value where -pi
    maps to, plus 1 past the wrap."""
    if y == -math.pi:
        return 0.0
    if y == math.pi:
        return 1.0

    def wrap(v):
        v += math.pi
        return v - math.floor(v / (2 * math.pi)) * 2 * math.pi - math.pi

    x, m = wrap(y - mu), wrap(mu)
    cut, bound = (m + math.pi, -math.pi - m) if m < 0 else (m - math.pi, math.pi - m)
    f = von_mises_centred_cdf(x, kappa) - von_mises_centred_cdf(bound, kappa) + (1.0 if y > cut else 0.0)
    return max(f, 0.0)


def von_mises_cdf_exact(y, mu, kappa):
    """The von Mises CDF by quadrature of the density from -pi (mpmath), to
    check the scipy-based values where the series is exact to rounding."""
    y, mu, kappa = mp.mpf(y), mp.mpf(mu), mp.mpf(kappa)
    peaks = [mu + 2 * mp.pi * j for j in range(-3, 4) if -mp.pi < mu + 2 * mp.pi * j < y]
    integral = mp.quad(lambda t: mp.exp(kappa * (mp.cos(t - mu) - 1)), [-mp.pi] + peaks + [y])
    return integral / (2 * mp.pi * mp.besseli(0, kappa) * mp.exp(-kappa))


def von_mises_cdf_program():
    """tests/programs/dist_von_mises_cdf.ab: `von_mises_lcdf` and
    `von_mises_lccdf` in the bulk, the tails, with mu off [-pi, pi] and
    across the wrap, in the series, blend and normal ranges of kappa, at
    the ends of the support; their gradients; the sum over a vector; and
    the errors of an outcome off [-pi, pi] and of kappa 0."""
    points = [(0.5, 0.2, 1.5), (-1.0, 0.3, 4.0), (2.5, -2.0, 0.5), (0.0, 0.0, 10.0), (3.0, 1.0, 0.01),
              (1.0, 7.0, 2.0), (-2.0, -5.0, 3.0), (2.9, -3.0, 2.0), (-3.0, 3.0, 1.0), (-3.0, 0.0, 2.0),
              (3.0, 0.0, 2.0), (-1.0, 0.0, 20.0), (1.0, 0.0, 20.0), (-0.5, 0.0, 30.0), (-3.1, 0.5, 1e-3),
              (0.1, 0.0, 49.5), (0.05, 0.0, 100.0), (-0.05, 0.1, 1000.0), (0.02, 0.01, 1e4)]
    lcdf = lambda y, m, k: math.log(von_mises_cdf(y, m, k))
    lccdf = lambda y, m, k: math.log1p(-von_mises_cdf(y, m, k))
    for point in points:
        if point[2] < 49.0:
            exact = von_mises_cdf_exact(*point)
            assert abs(von_mises_cdf(*point) - exact) < 1e-12 * max(1.0, 1.0 / float(exact)) + 1e-13, point
    batch = {"p": [list(map(float, point)) for point in points]}
    values = [{"ok": [number(lcdf(*point)), number(lccdf(*point))]} for point in points]
    def slope(upper, point, k):
        """mpmath's derivative of the quadrature's log CDF (or CCDF) below
        kappa 49, where the series is exact to rounding; above, central
        differences of the scipy-based function (the normal approximation
        is Stan's definition there, not the exact CDF)."""
        if point[2] >= 49.0:
            return central_difference(lccdf if upper else lcdf, point, k)
        at = [mp.mpf(x) for x in point]

        def log_f(t):
            f = von_mises_cdf_exact(*(at[:k] + [t] + at[k + 1:]))
            return mp.log(1 - f) if upper else mp.log(f)

        return mp.diff(log_f, at[k])

    slopes = [{"ok": [[number(slope(upper, point, k)) for k in range(3)] for upper in (False, True)]}
              for point in points]
    ends = [(-math.pi, 0.0, 1.0), (math.pi, 0.5, 1.0)]
    end_values = [{"ok": [number(lcdf(*point) if von_mises_cdf(*point) > 0 else -math.inf),
                          number(lccdf(*point) if von_mises_cdf(*point) < 1 else -math.inf)]}
                  for point in ends]
    first = points[0]
    ys = [point[0] for point in points]
    total = sum(lcdf(y, *first[1:]) for y in ys)
    bad = [(3.5, 0.0, 1.0), (0.5, 0.0, 0.0)]
    runs = [
        # F is accurate to about 1e-15 absolutely, so ln F to about 1e-10
        # where F is 1e-5.
        ("values", {"batch": batch}, values, 1e-9),
        ("slopes", {"batch": batch}, slopes, 1e-6),
        ("values", {"batch": {"p": [list(point) for point in ends]}}, end_values, 1e-12),
        ("vectorized", {"batch": {"p": [list(first)], "ys": [ys]}}, [{"ok": number(total)}], 1e-9),
        ("values", {"batch": {"p": [list(point) for point in bad]}}, [
            {"error": {"kind": "domain_error", "line": 23, "message": "Random variable `y` must be in [-pi, pi]"}},
            {"error": {"kind": "domain_error", "line": 23, "message": "Scale parameter `kappa` must be positive"}},
        ], 1e-12),
    ]
    source = (
        "fn lcdf(p: [f64; 3]) -> f64 { von_mises_lcdf(p[0], p[1], p[2]) }\n"
        "fn lccdf(p: [f64; 3]) -> f64 { von_mises_lccdf(p[0], p[1], p[2]) }\n"
        "fn values(p: [f64; 3]) -> (f64, f64) { (lcdf(p), lccdf(p)) }\n"
        "fn slopes(p: [f64; 3]) -> ([f64; 3], [f64; 3]) { (grad(lcdf, p), grad(lccdf, p)) }\n"
        f"fn vectorized(p: [f64; 3], ys: [f64; {len(ys)}]) -> f64 {{ von_mises_lcdf(ys, p[1], p[2]) }}\n"
    )
    write_program(
        "dist_von_mises_cdf",
        "`von_mises_lcdf` and `von_mises_lccdf` (Stan's definition: the CDF from -pi of an\n"
        "outcome in [-pi, pi], mu anywhere) against scipy.stats.vonmises.cdf, wrapped as Stan\n"
        "wraps it (checked against mpmath's quadrature of the density below kappa 49): in the\n"
        "bulk and the tails, mu off [-pi, pi] and across the wrap, kappa in the series, blend\n"
        "and normal ranges; gradients against central differences; the ends of the support;\n"
        "the sum over a vector of outcomes; an outcome off [-pi, pi] and kappa 0 are errors.",
        runs,
        source,
    )


def main():
    special_programs()
    distribution_programs()
    von_mises_cdf_program()
    import multivariate_reference
    multivariate_reference.main()


if __name__ == "__main__":
    main()
