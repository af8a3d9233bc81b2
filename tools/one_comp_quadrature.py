#!/usr/bin/env python3
"""The posterior of posteriordb's one_comp_mm_elim_abs by quadrature,
independently of the sampler: a grid over log k_a, log K_m, log V_m, the
ODE solved at every grid point at once by classical RK4 (step 0.01 day),
sigma integrated out on a grid of its own. Prints the posterior means and
sds, the tail of K_m and V_m (the sd of K_m below a cutoff X grows with X:
P(K_m > X) falls as X^-2, so K_m has no finite variance), and the spread
of the sd of n independent draws, the figure the check compares.

Run from the workspace root with numpy (a few minutes):
    python3 tools/one_comp_quadrature.py
"""
import json

import numpy as np

DATA = "examples/posteriordb/data/one_comp_mm_elim_abs.json"
REFERENCE = "examples/posteriordb/one_comp_mm_elim_abs-one_comp_mm_elim_abs/reference_posterior.json"


def grid():
    log_ka = np.linspace(np.log(0.45), np.log(1.25), 16)
    log_km = np.linspace(-9.0, 10.0, 96)
    log_vm = np.linspace(-7.0, 11.0, 96)
    a, b, c = np.meshgrid(log_ka, log_km, log_vm, indexing="ij")
    return np.exp(a).ravel(), np.exp(b).ravel(), np.exp(c).ravel(), log_km[1] - log_km[0]


def concentrations(d, ka, km, vm, h=0.01):
    """C at d's times, C(0) = 0, for every grid point (RK4; the dose term
    taken for t > 0 at t = 0 too, which changes no solution)."""
    dose, volume = d["D"], d["V"]

    def f(t, c):
        return np.exp(-ka * t) * dose * ka / volume - (vm / volume) * c / (km + c)

    c, t, out = np.zeros_like(ka), 0.0, []
    for target in d["times"]:
        while t < target - h / 2:
            k1 = f(t, c)
            k2 = f(t + h / 2, c + h / 2 * k1)
            k3 = f(t + h / 2, c + h / 2 * k2)
            k4 = f(t + h, c + h * k3)
            c, t = c + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), t + h
        out.append(c.copy())
    return np.array(out)


def log_posterior(d, ka, km, vm, c):
    """Up to a constant, per grid cell of the log grid (so with the
    Jacobian ka km vm): half-Cauchy priors, lognormal likelihood, sigma
    integrated out."""
    with np.errstate(all="ignore"):
        ssr = ((np.log(d["C_hat"])[:, None] - np.log(c)) ** 2).sum(0)
    bad = ~np.isfinite(ssr) | (c <= 0).any(0)
    ssr[bad] = np.inf
    n = len(d["times"])
    sigma = np.exp(np.linspace(np.log(0.02), np.log(3.0), 400))
    with np.errstate(all="ignore"):
        terms = (-(n - 1) * np.log(sigma) - ssr[:, None] / (2 * sigma**2)
                 - np.log1p(sigma**2))
    top = np.where(bad, 0.0, terms.max(1))
    lp = np.log(np.exp(terms - top[:, None]).sum(1)) + top
    lp += sum(np.log(x) - np.log1p(x**2) for x in (ka, km, vm))
    lp[bad] = -np.inf
    return lp


def main():
    d = json.load(open(DATA))
    ref = {p["name"]: p for p in json.load(open(REFERENCE))["parameters"]}
    ka, km, vm, step = grid()
    lp = log_posterior(d, ka, km, vm, concentrations(d, ka, km, vm))
    w = np.exp(lp - lp.max())
    w /= w.sum()
    for name, x in (("k_a", ka), ("K_m", km), ("V_m", vm)):
        mean = (w * x).sum()
        sd = np.sqrt((w * (x - mean) ** 2).sum())
        print(f"{name}: mean {mean:.4f} (reference {ref[name]['mean']:.4f}), "
              f"sd {sd:.4f} (reference {ref[name]['sd']:.4f})")
    for cutoff in (10, 30, 100, 300, 1000, 3000):
        inside = km < cutoff
        wi = w[inside] / w[inside].sum()
        mean = (wi * km[inside]).sum()
        sd = np.sqrt((wi * (km[inside] - mean) ** 2).sum())
        tail = w[~inside].sum()
        print(f"K_m < {cutoff}: sd {sd:.3f}; P(K_m > {cutoff}) = {tail:.2e}, "
              f"times {cutoff}^2: {tail * cutoff**2:.2f}")
    rng = np.random.default_rng(1)
    for n in (1000, 4000, 10000):
        sds = []
        for _ in range(400):
            i = rng.choice(len(w), size=n, p=w)
            sds.append((km[i] * np.exp(step * (rng.random(n) - 0.5))).std(ddof=1))
        q = np.quantile(sds, [0.01, 0.05, 0.5, 0.95])
        print(f"sd of K_m over {n} independent draws, 1/5/50/95%: "
              + " ".join(f"{x:.2f}" for x in q))


if __name__ == "__main__":
    main()
