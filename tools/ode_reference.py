#!/usr/bin/env python3
"""Writes the expected results of tests/programs/ode_lotka_volterra.ab and
tests/programs/ode_stiff.ab: the systems solved by scipy.integrate.solve_ivp
at tight tolerance (DOP853 for Lotka-Volterra, Radau for the stiff
Robertson system), independently of autobatch's solvers; and of
tests/programs/ode_containers.ab: gradients of solves whose parameters are
held in a matrix and in a tuple, from closed forms (the matrix exponential
and its Frechet derivative for y' = A y; the solution of y' = -k y + m s c
written out and differentiated by hand). The programs' text is written here
too, so that the inputs and the expectations stay together.

Run from the workspace root with a Python that has scipy:
    python3 tools/ode_reference.py
"""
import json
import math

import numpy as np
from scipy.integrate import solve_ivp
from scipy.linalg import expm, expm_frechet


def lotka_volterra(theta):
    alpha, beta, gamma, delta = theta

    def f(t, z):
        u, v = z
        return [(alpha - beta * v) * u, (-gamma + delta * u) * v]

    return f


def robertson(k1, k2, k3):
    def f(t, y):
        return [
            -k1 * y[0] + k3 * y[1] * y[2],
            k1 * y[0] - k3 * y[1] * y[2] - k2 * y[1] ** 2,
            k2 * y[1] ** 2,
        ]

    def jac(t, y):
        return [
            [-k1, k3 * y[2], k3 * y[1]],
            [k1, -k3 * y[2] - 2 * k2 * y[1], -k3 * y[1]],
            [0.0, 2 * k2 * y[1], 0.0],
        ]

    return f, jac


def solve(f, y0, ts, method, jac=None):
    # Each output time is an end point (no interpolation).
    kwargs = {"jac": jac} if jac is not None else {}
    out, t, y = [], 0.0, y0
    for target in ts:
        r = solve_ivp(f, (t, target), y, method=method, rtol=1e-13, atol=1e-16, **kwargs)
        assert r.success, r.message
        t, y = target, r.y[:, -1]
        out.append([float(x) for x in y])
    return out


def lv_file():
    ts = [1.0, 2.0, 5.0, 10.0, 20.0]
    members = [
        ([0.55, 0.028, 0.80, 0.024], [33.0, 6.2]),
        ([1.0, 0.05, 1.0, 0.05], [10.0, 10.0]),
        ([0.4, 0.02, 0.9, 0.03], [30.0, 4.0]),
    ]
    expect = [{"ok": solve(lotka_volterra(th), z0, ts, "DOP853")} for th, z0 in members]
    inputs = {"batch": {"theta": [m[0] for m in members], "z0": [m[1] for m in members]}}
    return f"""// Lotka-Volterra (posteriordb's hudson_lynx_hare) with ode_rk45_tol, against
// scipy's DOP853 at rtol 1e-13 (tools/ode_reference.py writes this file).
//@ run: solve {json.dumps(inputs)}
//@ tolerance: 1e-8
//@ expect: {json.dumps(expect)}
fn dz_dt(t: f64, z: [f64; 2], theta: [f64; 4]) -> [f64; 2] {{
    let u = z[0];
    let v = z[1];
    [(theta[0] - theta[1] * v) * u, (-theta[2] + theta[3] * u) * v]
}}

fn solve(theta: [f64; 4], z0: [f64; 2]) -> [[f64; 2]; 5] {{
    ode_rk45_tol(dz_dt, z0, 0.0, {ts}, 1e-11, 1e-11, 100000, theta)
}}
"""


def stiff_file():
    ts = [0.4, 4.0, 40.0, 400.0]
    members = [[0.04, 3e7, 1e4], [0.08, 3e7, 1e4], [0.04, 1e7, 2e4]]
    expect = []
    for k in members:
        f, jac = robertson(*k)
        expect.append({"ok": solve(f, [1.0, 0.0, 0.0], ts, "Radau", jac)})
    inputs = {"batch": {"k": members}}
    return f"""// The stiff Robertson system with ode_bdf_tol, against scipy's Radau at rtol
// 1e-13 (tools/ode_reference.py writes this file). An explicit solver
// needs millions of steps here: ode_rk45_tol with 2000 steps per output
// time fails on every member.
//@ run: solve {json.dumps(inputs)}
//@ tolerance: 1e-8
//@ expect: {json.dumps(expect)}
//@ run: explicit {json.dumps({"batch": {"k": members[:1]}})}
//@ expect: [{{"error": {{"kind": "assertion_failed", "line": 23, "message": "the `ode_rk45_tol` call at 23:5: max_num_steps steps taken"}}}}]
fn robertson(t: f64, y: [f64; 3], k: [f64; 3]) -> [f64; 3] {{
    [
        -k[0] * y[0] + k[2] * y[1] * y[2],
        k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] * y[1],
        k[1] * y[1] * y[1],
    ]
}}

fn solve(k: [f64; 3]) -> [[f64; 3]; 4] {{
    ode_bdf_tol(robertson, [1.0, 0.0, 0.0], 0.0, {ts}, 1e-8, 1e-12, 100000, k)
}}

fn explicit(k: [f64; 3]) -> [[f64; 3]; 4] {{
    ode_rk45_tol(robertson, [1.0, 0.0, 0.0], 0.0, {ts}, 1e-6, 1e-10, 2000, k)
}}
"""


def linear_gradient(a, y0, ts):
    """The gradient of sum_t 1 . expm(A t) y0 in (A row by row, y0)."""
    a, y0 = np.array(a), np.array(y0)
    ones = np.ones(len(y0))
    grad_a = np.zeros(a.shape)
    grad_y0 = np.zeros(len(y0))
    for t in ts:
        grad_y0 += expm(a * t).T @ ones
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                e = np.zeros(a.shape)
                e[i, j] = t
                grad_a[i, j] += ones @ expm_frechet(a * t, e, compute_expm=False) @ y0
    return [float(x) for x in list(grad_a.flatten()) + list(grad_y0)]


def forced_gradient(k, c, s, y0, m, ts):
    """The gradient of sum_t sum_i y_i(t) in (k, c, y0, s) for
    y' = -k y + m s c: y = u + (y0 - u) e^(-k t), u = m s c / k."""
    dk, dc, dy0, ds = 0.0, [0.0] * len(c), [0.0] * len(c), 0.0
    for t in ts:
        decay = math.exp(-k * t)
        for i, ci in enumerate(c):
            u = m * s * ci / k
            dk += -u / k * (1.0 - decay) - t * (y0[i] - u) * decay
            dc[i] += m * s / k * (1.0 - decay)
            dy0[i] += decay
            ds += m * ci / k * (1.0 - decay)
    return [dk] + dc + dy0 + [ds]


def containers_file():
    ts = [1.0, 2.0]
    # The second member starts at rest: a gradient through the steps taken
    # gets its derivatives in y0 wrong there.
    linear = [
        ([[-0.5, 1.0], [-1.0, -0.5]], [1.0, 0.5]),
        ([[-0.3, 2.0], [-2.0, -0.3]], [0.0, 0.0]),
    ]
    linear_p = [[x for row in a for x in row] + y0 for a, y0 in linear]
    linear_expect = [{"ok": linear_gradient(a, y0, ts)} for a, y0 in linear]
    forced = [(0.5, [1.0, -2.0], [0.0, 0.0], 1.5, 3), (1.25, [0.5, 0.25], [2.0, -1.0], 0.5, -1)]
    forced_p = [[k] + c + y0 + [s] for k, c, y0, s, _ in forced]
    forced_m = [m for *_, m in forced]
    forced_expect = [{"ok": forced_gradient(k, c, s, y0, m, ts)} for k, c, y0, s, m in forced]
    linear_inputs = json.dumps({"batch": {"p": linear_p}})
    forced_inputs = json.dumps({"batch": {"p": forced_p, "m": forced_m}})
    return f"""// Gradients of ODE solves whose parameters are held in a matrix and in a
// tuple (with an integer and an f32 beside the floats), against closed
// forms (tools/ode_reference.py writes this file): y' = A y, whose states
// at t = 1, 2 sum to 1 . (expm(A) + expm(2 A)) y0, differentiated in A (by
// the Frechet derivative of expm) and in y0; and y' = -k y + m s c, whose
// solution y = u + (y0 - u) e^(-k t), u = m s c / k, is differentiated by
// hand. ode_rk45 at its default tolerances, ode_bdf_tol at 1e-9.
//@ run: linear_grad {linear_inputs}
//@ tolerance: 1e-5
//@ expect: {json.dumps(linear_expect)}
//@ run: linear_grad_bdf {linear_inputs}
//@ tolerance: 1e-5
//@ expect: {json.dumps(linear_expect)}
//@ run: forced_grad {forced_inputs}
//@ tolerance: 1e-5
//@ expect: {json.dumps(forced_expect)}
//@ run: forced_grad_bdf {forced_inputs}
//@ tolerance: 1e-5
//@ expect: {json.dumps(forced_expect)}
const D: usize = 1;

fn linear(t: f64, y: [f64; 2], a: [[f64; 2]; 2]) -> [f64; 2] {{
    [a[0][0] * y[0] + a[0][1] * y[1], a[1][0] * y[0] + a[1][1] * y[1]]
}}

fn forced(t: f64, y: [f64; 2], q: (f64, (i64, [f64; 2 * D])), s: f32) -> [f64; 2] {{
    let (k, (m, c)) = q;
    -k * y + ((m as f64) * (s as f64)) * c
}}

fn total(z: [[f64; 2]; 2]) -> f64 {{
    z[0][0] + z[0][1] + z[1][0] + z[1][1]
}}

fn linear_sum(p: [f64; 6]) -> f64 {{
    total(ode_rk45(linear, [p[4], p[5]], 0.0, {ts}, [[p[0], p[1]], [p[2], p[3]]]))
}}

fn linear_sum_bdf(p: [f64; 6]) -> f64 {{
    let a = [[p[0], p[1]], [p[2], p[3]]];
    total(ode_bdf_tol(linear, [p[4], p[5]], 0.0, {ts}, 1e-9, 1e-9, 100000, a))
}}

fn forced_sum(p: [f64; 6], m: i64) -> f64 {{
    total(ode_rk45(forced, [p[3], p[4]], 0.0, {ts}, (p[0], (m, [p[1], p[2]])), p[5] as f32))
}}

fn forced_sum_bdf(p: [f64; 6], m: i64) -> f64 {{
    let q = (p[0], (m, [p[1], p[2]]));
    total(ode_bdf_tol(forced, [p[3], p[4]], 0.0, {ts}, 1e-9, 1e-9, 100000, q, p[5] as f32))
}}

fn linear_grad(p: [f64; 6]) -> [f64; 6] {{ grad(linear_sum, p) }}

fn linear_grad_bdf(p: [f64; 6]) -> [f64; 6] {{ grad(linear_sum_bdf, p) }}

fn forced_grad(p: [f64; 6], m: i64) -> [f64; 6] {{ grad(forced_sum, p, m) }}

fn forced_grad_bdf(p: [f64; 6], m: i64) -> [f64; 6] {{ grad(forced_sum_bdf, p, m) }}
"""


def main():
    for path, text in [
        ("tests/programs/ode_lotka_volterra.ab", lv_file()),
        ("tests/programs/ode_stiff.ab", stiff_file()),
        ("tests/programs/ode_containers.ab", containers_file()),
    ]:
        with open(path, "w") as out:
            # The solvers' runs are long and their subject is not batching:
            # one configuration of each strategy a run (tests/programs/README.md).
            out.write(text + "//@ configurations: one per run\n")


if __name__ == "__main__":
    main()
