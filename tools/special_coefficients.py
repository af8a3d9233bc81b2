#!/usr/bin/env python3
"""Writes crates/kernels/src/special/coefficients.rs: the series and
polynomial coefficients of the special functions, computed with mpmath at
50 digits and rounded to f64 once.

Run from the workspace root with a Python that has mpmath:
    python3 tools/special_coefficients.py
"""
import mpmath as mp

mp.mp.dps = 50

OUT = "crates/kernels/src/special/coefficients.rs"


def f64(x):
    return repr(float(x))


def hi_lo(x):
    hi = float(x)
    lo = float(x - mp.mpf(hi))
    return hi, lo


def array(name, doc, values):
    body = ",\n".join(f"    {f64(v)}" for v in values)
    return f"/// {doc}\npub(crate) const {name}: [f64; {len(values)}] = [\n{body},\n];\n"


def main():
    parts = [
        "//! Coefficients of the special functions, written by\n"
        "//! `tools/special_coefficients.py` (mpmath at 50 digits, each rounded to\n"
        "//! `f64` once). Do not edit by hand: change the script and run it again.\n"
    ]
    # lgamma(2 + z) = sum_{k>=1} c_k z^k, c_1 = 1 - euler, c_k = (-1)^k (zeta(k) - 1) / k.
    lg = [1 - mp.euler] + [(-1) ** k * (mp.zeta(k) - 1) / k for k in range(2, 31)]
    parts.append(array(
        "LGAMMA_NEAR_2",
        "`lgamma(2 + z) = sum(LGAMMA_NEAR_2[k - 1] * z^k)`, `k` from 1, for `|z| <= 1/2`.",
        lg,
    ))
    # digamma around its positive root.
    root = mp.findroot(mp.digamma, 1.46)
    hi, lo = hi_lo(root)
    parts.append(
        f"/// The positive root of digamma, `DIGAMMA_ROOT_HI + DIGAMMA_ROOT_LO`.\n"
        f"pub(crate) const DIGAMMA_ROOT_HI: f64 = {hi!r};\n"
        f"/// See [`DIGAMMA_ROOT_HI`].\n"
        f"pub(crate) const DIGAMMA_ROOT_LO: f64 = {lo!r};\n"
    )
    dg = [mp.polygamma(k, root) / mp.factorial(k) for k in range(1, 25)]
    parts.append(array(
        "DIGAMMA_NEAR_ROOT",
        "`digamma(root + z) = sum(DIGAMMA_NEAR_ROOT[k - 1] * z^k)`, `k` from 1, for `|z| <= 1/4`.",
        dg,
    ))
    # erfcx(c + t) = exp((c+t)^2) erfc(c + t): Taylor coefficients around the
    # centers 0.75, 1.25, ..., 7.75 (intervals [c - 1/4, c + 1/4] covering [0.5, 8]).
    def erfcx(x):
        return mp.exp(x * x) * mp.erfc(x)
    rows = []
    for i in range(15):
        c = mp.mpf(0.75) + mp.mpf(i) / 2
        rows.append(mp.taylor(erfcx, c, 21))
    body = ",\n".join(
        "    [\n" + "".join(f"        {f64(v)},\n" for v in row) + "    ]" for row in rows
    )
    parts.append(
        "/// `erfcx(c + t) = sum(ERFCX_TAYLOR[i][k] * t^k)` for the center\n"
        "/// `c = 0.75 + i / 2` and `|t| <= 1/4`: the intervals cover `[0.5, 8]`.\n"
        f"pub(crate) const ERFCX_TAYLOR: [[f64; 22]; 15] = [\n{body},\n];\n"
    )
    with open(OUT, "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
