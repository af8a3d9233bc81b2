#!/usr/bin/env python3
"""Writes crates/kernels/tests/data/special.json: the special functions at
many points (tails and the neighbourhoods of roots included), computed with
mpmath at 50 digits and rounded to f64; and crates/kernels/tests/data/beta_inc.json:
`ln B(a, b)`, and `ln I_x(a, b)` (the regularized incomplete beta function)
with its derivatives in `a` and `b`, over shapes from 0.05 to 1500 and `x`
from 1e-300 to 1 - 1e-12. `crates/kernels/tests/special_accuracy.rs`
compares the kernels with them.

Run from the workspace root with a Python that has mpmath:
    python3 tools/special_reference.py
"""
import json

import mpmath as mp

mp.mp.dps = 50

OUT = "crates/kernels/tests/data/special.json"
BETA_INC_OUT = "crates/kernels/tests/data/beta_inc.json"


def logspace(lo, hi, n):
    return [float(mp.mpf(10) ** (lo + (hi - lo) * mp.mpf(i) / (n - 1))) for i in range(n)]


def linspace(lo, hi, n):
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def near(c, signs=(1, -1)):
    return [c + s * 10.0 ** -k for k in range(1, 16) for s in signs]


def phi(x):
    return mp.ncdf(x)


def inv_phi(p):
    # 2p - 1 keeps p's digits only with as many digits as p's exponent.
    with mp.workdps(400):
        return mp.sqrt(2) * mp.erfinv(2 * p - 1)


def table(f, points):
    rows = []
    for x in sorted(set(points)):
        y = float(f(mp.mpf(x)))
        if y != 0.0 and abs(y) < 2.3e-308 or abs(y) == float("inf"):
            continue  # subnormal or out of range: no relative accuracy to check
        rows.append([repr(x), repr(y)])  # strings: Rust parses them exactly
    return rows


def main():
    negatives = [-0.5, -1.5, -2.5, -0.1, -0.9, -3.3, -10.7, -100.3, -1000.25, -1e-5, -1e-10]
    digamma_root = float(mp.findroot(mp.digamma, 1.46))
    data = {
        "lgamma": table(
            lambda x: mp.re(mp.loggamma(x)),
            logspace(-300, 300, 121)
            + linspace(0.5, 20, 79)
            + near(1.0)
            + near(2.0)
            + [x for x in negatives if x > -1e-3 or abs(x) > 0.2],
        ),
        "digamma": table(
            mp.digamma,
            logspace(-300, 300, 121)
            + linspace(0.5, 20, 79)
            + [digamma_root + s * 10.0 ** -k for k in range(2, 13) for s in (1, -1)]
            + negatives,
        ),
        "trigamma": table(
            lambda x: mp.polygamma(1, x),
            logspace(-150, 300, 91) + linspace(0.5, 20, 79) + negatives,
        ),
        "erf": table(mp.erf, linspace(-6, 6, 121) + logspace(-300, 0, 31) + [-x for x in logspace(-300, 0, 31)]),
        "erfc": table(mp.erfc, linspace(-6, 26.5, 131) + logspace(-300, 0, 31) + [-x for x in logspace(-300, 0, 16)]),
        "Phi": table(phi, linspace(-37.5, 8.5, 185) + logspace(-300, 0, 16) + [-x for x in logspace(-300, 0, 16)]),
        "inv_Phi": table(
            inv_phi,
            logspace(-300, mp.log10(0.5), 121)
            + linspace(0.01, 0.99, 99)
            + [1.0 - x for x in logspace(-16, -1, 31)],
        ),
    }
    with open(OUT, "w") as f:
        json.dump(data, f, indent=None, separators=(',', ':'))
        f.write("\n")


def beta_inc_series(a, b, x):
    """I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) 2F1(a + b, 1; a + 1; x)."""
    front = mp.exp(a * mp.log(x) + b * mp.log1p(-x) - mp.log(mp.beta(a, b))) / a
    return front * mp.hyp2f1(a + b, 1, a + 1, x, maxterms=10**7)


def log_beta_inc(a, b, x):
    """ln I_x(a, b), by the series below the mean and as ln(1 - I_(1-x)(b, a))
    above it (where the series of the other converges fast)."""
    if x < (a + 1) / (a + b + 2):
        return mp.log(beta_inc_series(a, b, x))
    return mp.log1p(-beta_inc_series(b, a, 1 - x))


def beta_inc_rows():
    """[a, b, x, ln I, d/da, d/db, ln(1 - I), d/da, d/db] as strings, each
    point where ln I is a normal f64."""
    shapes = [0.05, 0.5, 1.0, 2.5, 7.0, 30.0, 200.0, 1500.0]
    xs = [1e-300, 1e-30, 1e-8, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-6, 1 - 1e-12]
    rows = []
    for a in shapes:
        for b in shapes:
            # x near the mean a / (a + b), where the fraction is slowest.
            mean = a / (a + b)
            for x in xs + [mean, mean * (1 - 1e-3)]:
                a_, b_, x_ = mp.mpf(a), mp.mpf(b), mp.mpf(x)
                try:
                    value = log_beta_inc(a_, b_, x_)
                    if not (2.3e-308 < abs(float(value)) < 1e300):
                        continue
                    da = mp.diff(lambda t: log_beta_inc(t, b_, x_), a_)
                    db = mp.diff(lambda t: log_beta_inc(a_, t, x_), b_)
                except (ValueError, mp.libmp.NoConvergence):
                    print(f"beta_inc: mpmath does not converge at a {a}, b {b}, x {x}: left out")
                    continue
                # ln(1 - I): below the mean from I itself (1 - x would round
                # for a tiny x), above it from the other tail.
                if x_ < (a_ + 1) / (a_ + b_ + 2):
                    complement = mp.log1p(-beta_inc_series(a_, b_, x_))
                else:
                    complement = mp.log(beta_inc_series(b_, a_, 1 - x_))
                odds = mp.exp(value - complement)
                cvalues = [complement, -odds * da, -odds * db]
                rows.append([repr(float(v)) for v in (a, b, x, value, da, db, *cvalues)])
    return rows


def lbeta_rows():
    shapes = [1e-300, 1e-10, 0.05, 0.5, 1.0, 2.5, 7.0, 12.9, 13.0, 30.0, 200.0, 5000.0, 1e6, 1e10]
    rows = []
    for a in shapes:
        for b in shapes:
            a_, b_ = mp.mpf(a), mp.mpf(b)
            value = mp.loggamma(a_) + mp.loggamma(b_) - mp.loggamma(a_ + b_)
            if abs(float(value)) < 2.3e-308 or abs(float(value)) == float("inf"):
                continue
            rows.append([repr(a), repr(b), repr(float(value))])
    return rows


def write_beta_inc():
    with mp.workdps(40):
        data = {"log_beta_inc": beta_inc_rows(), "lbeta": lbeta_rows()}
    with open(BETA_INC_OUT, "w") as f:
        json.dump(data, f, indent=None, separators=(',', ':'))
        f.write("\n")


if __name__ == "__main__":
    import sys
    if sys.argv[1:] != ["--beta-inc-only"]:
        main()
    write_beta_inc()
