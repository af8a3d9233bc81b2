#!/usr/bin/env python3
"""Writes the expected results of tests/programs/ode_lotka_volterra.ab and
tests/programs/ode_stiff.ab: the systems solved by scipy.integrate.solve_ivp
at tight tolerance (DOP853 for Lotka-Volterra, Radau for the stiff
Robertson system), independently of autobatch's solvers. The programs'
text is written here too, so that the inputs and the expectations stay
together.

Run from the workspace root with a Python that has scipy:
    python3 tools/ode_reference.py
"""
import json

from scipy.integrate import solve_ivp


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
//@ expect: [{{"error": {{"kind": "assertion_failed", "line": 23, "message": "ode_rk45: max_num_steps"}}}}]
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


def main():
    for path, text in [
        ("tests/programs/ode_lotka_volterra.ab", lv_file()),
        ("tests/programs/ode_stiff.ab", stiff_file()),
    ]:
        with open(path, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
