#!/usr/bin/env python3
"""Writes tests/programs/dist_rng.ab: the `_rng` draws of the distributions
against scipy.stats, a Kolmogorov-Smirnov-style check. Each run draws
N = 4000 values with a fixed seed and gives the fraction of them at or
below each of nine points; the expected fractions are scipy's CDF at those
points (its deciles for a continuous family; for a discrete one the CDF at
the integers nearest the deciles). Vector draws are checked by a margin
(and `multi_normal` also by the fraction of draws whose two coordinates
fall on the same side of their means, 1/2 + asin(rho)/pi), categorical
ones by the fraction of each category.

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


def main():
    header = __doc__.strip().split("\n")[:16]
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
    with open(OUT, "w") as f:
        f.write("\n".join(lines + source) + "\n")


if __name__ == "__main__":
    main()
