#!/usr/bin/env python3
"""Writes tests/programs/dist_rng.ab: the `_rng` draws of the distributions
against scipy.stats, a Kolmogorov-Smirnov-style check. Each run draws
N = 4000 values with a fixed seed and gives the fraction of them at or
below each of nine points; the expected fractions are scipy's CDF at those
points (its deciles for a continuous family; for a discrete one the CDF at
the integers nearest the deciles). Vector draws are checked by a margin
(and `multi_normal` also by the fraction of draws whose two coordinates
fall on the same side of their means, 1/2 + asin(rho)/pi), categorical
ones by the fraction of each category. `von_mises` draws are also checked
by the means of cos(y - m) and sin(y - m), m = mu mod 2 pi (the mean
resultant length I1(kappa)/I0(kappa) and 0), `lkj_corr_cholesky` draws by
the correlations of L L^T at two places (2 beta(eta - 1 + K/2, same) - 1).

The tolerance is 0.035 (absolute, on fractions): by the
Dvoretzky-Kiefer-Wolfowitz inequality the largest deviation of an
empirical CDF of 4000 independent draws exceeds it with probability at
most 2 exp(-2 * 4000 * 0.035^2) = 1.1e-4, and a draw from a wrong
distribution (a shape off by 10%, a scale by 5%) moves some decile by more.

Run from the workspace root with a Python that has scipy and numpy:
    python3 tools/rng_reference.py
"""
import json
import math

import numpy as np
from scipy import special, stats

N = 4000
PROBABILITIES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
TOLERANCE = 0.035
OUT = "tests/programs/dist_rng.ab"

# name: (the draws as an expression of length N, scipy's distribution,
# discrete). The expression is an `[f64; N]`.
SCALAR = [
    ("gamma", "gamma_rng([2.5; N], 1.5)", stats.gamma(2.5, scale=1 / 1.5), False),
    ("gamma_small_shape", "gamma_rng([0.3; N], 2.0)", stats.gamma(0.3, scale=0.5), False),
    ("inv_gamma", "inv_gamma_rng([3.0; N], 2.0)", stats.invgamma(3.0, scale=2.0), False),
    ("chi_square", "chi_square_rng([4.5; N])", stats.chi2(4.5), False),
    ("student_t", "student_t_rng([3.0; N], 1.0, 2.0)", stats.t(3.0, 1.0, 2.0), False),
    ("beta", "beta_rng([0.5; N], 2.0)", stats.beta(0.5, 2.0), False),
    ("beta_small_shapes", "beta_rng([0.05; N], 0.08)", stats.beta(0.05, 0.08), False),
    ("poisson", "poisson_rng([3.5; N]) as f64", stats.poisson(3.5), True),
    ("poisson_large_rate", "poisson_rng([1000.0; N]) as f64", stats.poisson(1000.0), True),
    ("poisson_log", "poisson_log_rng([1.2; N]) as f64", stats.poisson(math.exp(1.2)), True),
    ("binomial", "binomial_rng([20; N], 0.3) as f64", stats.binom(20, 0.3), True),
    ("binomial_large", "binomial_rng([5000; N], 0.45) as f64", stats.binom(5000, 0.45), True),
    ("binomial_logit", "binomial_logit_rng([30; N], -1.2) as f64",
     stats.binom(30, 1 / (1 + math.exp(1.2))), True),
    ("neg_binomial_2", "neg_binomial_2_rng([4.0; N], 2.5) as f64",
     stats.nbinom(2.5, 2.5 / (4.0 + 2.5)), True),
    ("neg_binomial_2_log", "neg_binomial_2_log_rng([0.5; N], 10.0) as f64",
     stats.nbinom(10.0, 10.0 / (math.exp(0.5) + 10.0)), True),
]

SIGMA = [[4.0, 1.2], [1.2, 1.0]]
CHOLESKY = np.linalg.cholesky(np.array(SIGMA)).tolist()
CUTPOINTS = [-1.0, 0.5, 2.0]
ETA = 0.3


def points(dist, discrete):
    """The nine points and scipy's CDF at them."""
    qs = [float(dist.ppf(p)) for p in PROBABILITIES]
    if discrete:
        qs = [float(round(q)) for q in qs]
    return qs, [float(dist.cdf(q)) for q in qs]


# The draws' subject is not batching: each run takes one configuration of
# each strategy (tests/programs/README.md).
CONFIGURATIONS = "//@ configurations: one per run"


def main():
    header = __doc__.strip().split("\n")[:19]
    header[0] = "The `_rng` draws of the distributions"
    lines = [f"// {line}" if line else "//" for line in header]
    lines.append("// Written by tools/rng_reference.py: do not edit, run it again.")
    source = [
        f"const N: usize = {N};",
        "",
        "// The fraction of x at or below each point of q.",
        "fn fractions(x: [f64; N], q: [f64; 9]) -> [f64; 9] {",
        "    let mut f = [0.0; 9];",
        "    for i in 0..N {",
        "        for j in 0..9 {",
        "            if x[i] <= q[j] {",
        "                f[j] += 1.0;",
        "            }",
        "        }",
        "    }",
        "    f / (N as f64)",
        "}",
        "",
        "// The fraction of each category 1..=K among y.",
        "fn shares(y: [i64; N], k: i64) -> [f64; 4] {",
        "    let mut f = [0.0; 4];",
        "    for i in 0..N {",
        "        assert!(y[i] >= 1 && y[i] <= k, \"a category outside 1..=K\");",
        "        f[y[i] - 1] += 1.0;",
        "    }",
        "    f / (N as f64)",
        "}",
    ]

    def run(entry, inputs, expected):
        lines.append(f"//@ run(seed=11): {entry} {json.dumps(inputs)}")
        lines.append(f"//@ tolerance: {TOLERANCE}")
        lines.append(f"//@ expect: {json.dumps([{'ok': expected}])}")

    for name, draws, dist, discrete in SCALAR:
        qs, cdf = points(dist, discrete)
        run(name, {"batch": {"q": [qs]}}, cdf)
        source.append(f"fn {name}(q: [f64; 9]) -> [f64; 9] {{ fractions({draws}, q) }}")

    # dirichlet: the first coordinate is beta(alpha_0, sum - alpha_0).
    alpha = [0.5, 1.5, 3.0]
    qs, cdf = points(stats.beta(alpha[0], sum(alpha) - alpha[0]), False)
    run("dirichlet", {"batch": {"q": [qs]}}, cdf)
    source += [
        "fn dirichlet(q: [f64; 9]) -> [f64; 9] {",
        "    let mut x = [0.0; N];",
        "    for i in 0..N {",
        f"        let theta = dirichlet_rng({alpha});",
        "        assert!((sum(theta) - 1.0).abs() < 1e-12, \"not a simplex\");",
        "        x[i] = theta[0];",
        "    }",
        "    fractions(x, q)",
        "}",
    ]

    # multi_normal: the second coordinate is normal(-1, 1); the fraction of
    # draws whose coordinates fall on the same side of their means.
    mu = [1.0, -1.0]
    rho = SIGMA[0][1] / math.sqrt(SIGMA[0][0] * SIGMA[1][1])
    qs, cdf = points(stats.norm(mu[1], math.sqrt(SIGMA[1][1])), False)
    same_side = 0.5 + math.asin(rho) / math.pi
    for entry, call in [("multi_normal", f"multi_normal_rng({mu}, {SIGMA})"),
                        ("multi_normal_cholesky", f"multi_normal_cholesky_rng({mu}, {CHOLESKY})")]:
        run(entry, {"batch": {"q": [qs]}}, cdf + [same_side])
        source += [
            f"fn {entry}(q: [f64; 9]) -> [f64; 10] {{",
            "    let mut x = [0.0; N];",
            "    let mut same = 0.0;",
            "    for i in 0..N {",
            f"        let v = {call};",
            "        x[i] = v[1];",
            f"        if (v[0] - {mu[0]}) * (v[1] - ({mu[1]})) > 0.0 {{",
            "            same += 1.0;",
            "        }",
            "    }",
            "    let f = fractions(x, q);",
            "    [f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], same / (N as f64)]",
            "}",
        ]

    # The categorical families: the share of each category.
    theta = [0.2, 0.5, 0.3]
    beta = [0.1, -0.4, 1.0]
    cut = [ETA - c for c in CUTPOINTS]
    ordered = [1 - special.expit(cut[0])] + [
        special.expit(cut[k - 1]) - special.expit(cut[k]) for k in range(1, len(cut))
    ] + [special.expit(cut[-1])]
    cases = [
        ("categorical", f"categorical_rng({theta})", theta + [0.0], 3),
        ("categorical_logit", f"categorical_logit_rng({beta})",
         [float(x) for x in special.softmax(beta)] + [0.0], 3),
        ("ordered_logistic", f"ordered_logistic_rng({ETA}, {CUTPOINTS})",
         [float(x) for x in ordered], 4),
    ]
    for entry, call, expected, k in cases:
        run(entry, {"batch": {"k": [k]}}, expected)
        source += [
            f"fn {entry}(k: i64) -> [f64; 4] {{",
            "    let mut y = [0; N];",
            "    for i in 0..N {",
            f"        y[i] = {call};",
            "    }",
            "    shares(y, k)",
            "}",
        ]
    von_mises(run, source)
    lkj_corr_cholesky(run, source)
    with open(OUT, "w") as f:
        f.write("\n".join(lines + source + [CONFIGURATIONS]) + "\n")


# entry: (mu, kappa), each as the program spells it.
VON_MISES = [
    ("von_mises", "1.0", "2.0"),
    ("von_mises_wrapped", "-5.0", "0.6"),
    ("von_mises_concentrated", "2.5", "80.0"),
    ("von_mises_flat", "0.0", "1.0e-9"),
]


def von_mises(run, source):
    """Fractions below scipy's deciles about m = mu mod 2 pi (every draw
    within pi of m), then the means of cos(y - m) and sin(y - m)."""
    for entry, mu, kappa in VON_MISES:
        m = float(mu) % (2 * math.pi)
        qs, cdf = points(stats.vonmises(float(kappa), loc=m), False)
        resultant = float(special.i1e(float(kappa)) / special.i0e(float(kappa)))
        run(entry, {"batch": {"q": [qs]}}, cdf + [resultant, 0.0])
        source += [
            f"fn {entry}(q: [f64; 9]) -> [f64; 11] {{",
            f"    let y = von_mises_rng([{mu}; N], {kappa});",
            f"    let d = y - {m!r};",
            "    let mut c = 0.0;",
            "    let mut s = 0.0;",
            "    for i in 0..N {",
            "        assert!(d[i].abs() <= std::f64::consts::PI + 1e-12, \"farther than pi from mu\");",
            "        c += d[i].cos();",
            "        s += d[i].sin();",
            "    }",
            "    let f = fractions(y, q);",
            "    [f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], c / (N as f64), s / (N as f64)]",
            "}",
        ]


# entry: (K, eta).
LKJ = [("lkj_corr_cholesky", 4, "1.5"), ("lkj_corr_cholesky_two", 2, "0.3")]


def lkj_corr_cholesky(run, source):
    """Each draw L lower triangular, with a positive diagonal and rows of
    unit length; fractions of the correlations of L L^T at (1, 0) and at
    (K - 1, K - 2) below the deciles of 2 beta(eta - 1 + K/2, same) - 1."""
    for entry, k, eta in LKJ:
        a = float(eta) - 1 + k / 2
        qs, cdf = points(stats.beta(a, a, loc=-1, scale=2), False)
        run(entry, {"batch": {"q": [qs]}}, cdf + cdf)
        source += [
            f"fn {entry}(q: [f64; 9]) -> [f64; 18] {{",
            "    let mut x = [0.0; N];",
            "    let mut z = [0.0; N];",
            "    for i in 0..N {",
            f"        let l = lkj_corr_cholesky_rng({k}, {eta});",
            f"        for r in 0..{k} {{",
            "            let mut length = 0.0;",
            f"            for c in 0..{k} {{",
            "                assert!(c <= r || l[r][c] == 0.0, \"not lower triangular\");",
            "                length += l[r][c] * l[r][c];",
            "            }",
            "            assert!((length - 1.0).abs() < 1e-12, \"a row not of unit length\");",
            "            assert!(l[r][r] > 0.0, \"a diagonal element not positive\");",
            "        }",
            "        x[i] = dot(l[1], l[0]);",
            f"        z[i] = dot(l[{k - 1}], l[{k - 2}]);",
            "    }",
            "    let f = fractions(x, q);",
            "    let g = fractions(z, q);",
            "    [f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8],",
            "     g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8]]",
            "}",
        ]


if __name__ == "__main__":
    main()
