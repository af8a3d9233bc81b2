#!/usr/bin/env python3
"""Writes crates/kernels/tests/data/special.json: the special functions at
many points (tails and the neighbourhoods of roots included), computed with
mpmath at 50 digits and rounded to f64. `crates/kernels/tests/special_accuracy.rs`
compares the kernels with it.

Run from the workspace root with a Python that has mpmath:
    python3 tools/special_reference.py
"""
import json

import mpmath as mp

mp.mp.dps = 50

OUT = "crates/kernels/tests/data/special.json"


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


if __name__ == "__main__":
    main()
