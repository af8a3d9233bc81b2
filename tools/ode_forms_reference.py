#!/usr/bin/env python3
"""Writes tests/programs/ode_gradient_forms.ab: gradients of ODE solves
whose right-hand sides use the forms the sensitivity solve differentiates
by forward mode (let bindings, if/else, the float methods, arithmetic of a
vector with a float, an integer argument), against JAX: the solve by
jax.experimental.ode.odeint (Dormand-Prince at rtol and atol 1e-13) and
its gradient by JAX's own adjoint method, independently of autobatch's
solvers and derivatives. The program's text is written here too, so that
the inputs and the expectations stay together.

Run from the workspace root with the JAX peer:
    .peers/jax/bin/python tools/ode_forms_reference.py
"""
import json

import jax
import jax.numpy as jnp
from jax.experimental.ode import odeint

jax.config.update("jax_enable_x64", True)

TS = [0.0, 1.0, 2.0, 3.0]


def forms(y, t, k, c, n):
    u, v = y[0], y[1]
    s = jnp.sqrt(u * u + 1.0)
    g = jnp.where(t < 0.5, jnp.exp(-k * t) * c[0], c[0] / (1.0 + t))
    h = n * 0.25
    return jnp.array([
        g - k * u / s + h * jnp.sin(v),
        -c[1] * v**3 + jnp.log(1.0 + u * u) - jnp.tanh(jnp.cos(v)) + (1.0 + u * u) ** 0.75 / (2.0 + v * v),
    ])


def shrink(y, t, k, c):
    s = 1.0 + y[0] * y[0]
    return -k * y / s + c


def drift(y, t, k):
    return jnp.array([k * y[1], 1.0])


def lotka_volterra(z, t, theta):
    u, v = z[0], z[1]
    return jnp.array([(theta[0] - theta[1] * v) * u, (-theta[2] + theta[3] * u) * v])


def one_comp(y, t, theta, x_r):
    # posteriordb's one_comp_mm_elim_abs: the dose is 0 at t = 0.
    k_a, k_m, v_m = theta[0], theta[1], theta[2]
    elim = (v_m / x_r[1]) * y[0] / (k_m + y[0])
    dose = jnp.where(t > 0.0, jnp.exp(-k_a * t) * x_r[0] * k_a / x_r[1], 0.0)
    return jnp.array([dose - elim])


def log_total(f, y0, ts, *args):
    z = odeint(f, y0, jnp.array([0.0] + ts), *args, rtol=1e-13, atol=1e-13, mxstep=10**6)
    return jnp.sum(jnp.log(z[1:]))


def lv_grad(p):
    # p = (theta, z0)
    return [float(x) for x in jax.grad(lambda p: log_total(lotka_volterra, p[4:6], LV_TS, p[0:4]))(jnp.array(p))]


def one_comp_grad(p):
    # p = (k_a, K_m, V_m, D, V), from C(0) = 0
    def loss(p):
        return log_total(one_comp, jnp.array([0.0]), ONE_COMP_TS, p[0:3], p[3:5])

    return [float(x) for x in jax.grad(loss)(jnp.array(p))]


LV_TS = [1.0, 2.0, 5.0, 10.0, 20.0]
ONE_COMP_TS = [0.5, 1.0, 2.0, 4.0, 8.0]


def total(f, y0, *args):
    z = odeint(f, y0, jnp.array(TS), *args, rtol=1e-13, atol=1e-13, mxstep=10**6)
    return jnp.sum(z[1:])


def forms_grad(p, n):
    # p = (y0[0], y0[1], k, c[0], c[1])
    def loss(p):
        return total(forms, p[0:2], p[2], p[3:5], float(n))

    return [float(x) for x in jax.grad(loss)(jnp.array(p))]


def shrink_grad(p):
    def loss(p):
        return total(shrink, p[0:2], p[2], p[3:5])

    return [float(x) for x in jax.grad(loss)(jnp.array(p))]


def drift_grad(p):
    def loss(p):
        return total(drift, p[0:2], p[2])

    return [float(x) for x in jax.grad(loss)(jnp.array(p))]


def program():
    forms_p = [[1.0, 0.5, 0.8, 1.2, 0.3], [0.2, -0.4, 1.5, 0.5, 0.7]]
    forms_n = [2, -1]
    forms_expect = [{"ok": forms_grad(p, n)} for p, n in zip(forms_p, forms_n)]
    shrink_p = [[1.0, -2.0, 0.7, 0.3, 0.1], [0.0, 0.0, 1.3, -0.2, 0.4]]
    shrink_expect = [{"ok": shrink_grad(p)} for p in shrink_p]
    drift_p = [[1.0, 2.0, 0.5], [0.0, -1.0, 2.0]]
    drift_expect = [{"ok": drift_grad(p)} for p in drift_p]
    forms_inputs = json.dumps({"batch": {"p": forms_p, "n": forms_n}})
    shrink_inputs = json.dumps({"batch": {"p": shrink_p}})
    drift_inputs = json.dumps({"batch": {"p": drift_p}})
    lv_p = [[0.55, 0.028, 0.8, 0.024, 33.0, 6.2], [1.0, 0.05, 1.0, 0.05, 10.0, 10.0]]
    lv_expect = [{"ok": lv_grad(p)} for p in lv_p]
    lv_inputs = json.dumps({"batch": {"p": lv_p}})
    oc_p = [[0.76, 2.5, 0.98, 30.0, 2.0], [1.2, 1.0, 2.0, 20.0, 1.5]]
    oc_expect = [{"ok": one_comp_grad(p)} for p in oc_p]
    oc_inputs = json.dumps({"batch": {"p": oc_p}})
    ts = json.dumps(TS[1:])
    return f"""// Gradients of ODE solves whose right-hand sides use the forms the
// sensitivity solve differentiates by forward mode: let bindings, an
// if/else on the time, the float methods, a vector times and over a float,
// an integer argument, an output that depends on no parameter. Against JAX
// (jax.experimental.ode.odeint at rtol 1e-13 and its adjoint gradient;
// tools/ode_forms_reference.py writes this file). The sum of the states at
// t = 1, 2, 3, differentiated in y0 and the further arguments; ode_rk45_tol
// at 1e-10, ode_bdf_tol at 1e-7. And the right-hand sides of posteriordb's
// two ODE posteriors, hudson_lynx_hare-lotka_volterra (ode_rk45_tol) and
// one_comp_mm_elim_abs (ode_bdf_tol, from a zero state, the dose switched
// on after t = 0), the sum of the logarithms of the states (as their
// likelihoods take them) differentiated in every parameter.
//@ run: forms_grad {forms_inputs}
//@ tolerance: 1e-6
//@ expect: {json.dumps(forms_expect)}
//@ run: forms_grad_bdf {forms_inputs}
//@ tolerance: 1e-4
//@ expect: {json.dumps(forms_expect)}
//@ run: shrink_grad {shrink_inputs}
//@ tolerance: 1e-6
//@ expect: {json.dumps(shrink_expect)}
//@ run: shrink_grad_bdf {shrink_inputs}
//@ tolerance: 1e-4
//@ expect: {json.dumps(shrink_expect)}
//@ run: drift_grad {drift_inputs}
//@ tolerance: 1e-8
//@ expect: {json.dumps(drift_expect)}
//@ run: lotka_volterra_grad {lv_inputs}
//@ tolerance: 1e-6
//@ expect: {json.dumps(lv_expect)}
//@ run: one_comp_grad {oc_inputs}
//@ tolerance: 1e-4
//@ expect: {json.dumps(oc_expect)}
fn forms(t: f64, y: [f64; 2], k: f64, c: [f64; 2], n: i64) -> [f64; 2] {{
    let u = y[0];
    let v = y[1];
    let s = (u * u + 1.0).sqrt();
    let g = if t < 0.5 {{ (-k * t).exp() * c[0] }} else {{ c[0] / (1.0 + t) }};
    let h = (n as f64) * 0.25;
    [
        g - k * u / s + h * v.sin(),
        -c[1] * v.powi(3) + (1.0 + u * u).ln() - v.cos().tanh() + (1.0 + u * u).powf(0.75) / (2.0 + v * v),
    ]
}}

fn shrink(t: f64, y: [f64; 2], k: f64, c: [f64; 2]) -> [f64; 2] {{
    let s = 1.0 + y[0] * y[0];
    -k * y / s + c
}}

fn drift(t: f64, y: [f64; 2], k: f64) -> [f64; 2] {{
    [k * y[1], 1.0]
}}

fn dz_dt(t: f64, z: [f64; 2], theta: [f64; 4]) -> [f64; 2] {{
    let u = z[0];
    let v = z[1];
    [(theta[0] - theta[1] * v) * u, (-theta[2] + theta[3] * u) * v]
}}

fn one_comp(t: f64, y: [f64; 1], theta: [f64; 3], x_r: [f64; 2]) -> [f64; 1] {{
    let k_a = theta[0];
    let k_m = theta[1];
    let v_m = theta[2];
    let elim = (v_m / x_r[1]) * y[0] / (k_m + y[0]);
    let dose = if t > 0.0 {{ (-k_a * t).exp() * x_r[0] * k_a / x_r[1] }} else {{ 0.0 }};
    [dose - elim]
}}

fn total(z: [[f64; 2]; 3]) -> f64 {{
    z[0][0] + z[0][1] + z[1][0] + z[1][1] + z[2][0] + z[2][1]
}}

fn forms_sum(p: [f64; 5], n: i64) -> f64 {{
    total(ode_rk45_tol(forms, [p[0], p[1]], 0.0, {ts}, 1e-10, 1e-10, 100000, p[2], [p[3], p[4]], n))
}}

fn forms_sum_bdf(p: [f64; 5], n: i64) -> f64 {{
    total(ode_bdf_tol(forms, [p[0], p[1]], 0.0, {ts}, 1e-7, 1e-7, 100000, p[2], [p[3], p[4]], n))
}}

fn shrink_sum(p: [f64; 5]) -> f64 {{
    total(ode_rk45_tol(shrink, [p[0], p[1]], 0.0, {ts}, 1e-10, 1e-10, 100000, p[2], [p[3], p[4]]))
}}

fn shrink_sum_bdf(p: [f64; 5]) -> f64 {{
    total(ode_bdf_tol(shrink, [p[0], p[1]], 0.0, {ts}, 1e-7, 1e-7, 100000, p[2], [p[3], p[4]]))
}}

fn drift_sum(p: [f64; 3]) -> f64 {{
    total(ode_rk45(drift, [p[0], p[1]], 0.0, {ts}, p[2]))
}}

fn lotka_volterra_sum(p: [f64; 6]) -> f64 {{
    let z = ode_rk45_tol(dz_dt, [p[4], p[5]], 0.0, {json.dumps(LV_TS)}, 1e-10, 1e-10, 100000, [p[0], p[1], p[2], p[3]]);
    let mut s = 0.0;
    for n in 0..5 {{
        s += z[n][0].ln() + z[n][1].ln();
    }}
    s
}}

fn one_comp_sum(p: [f64; 5]) -> f64 {{
    let c = ode_bdf_tol(one_comp, [0.0], 0.0, {json.dumps(ONE_COMP_TS)}, 1e-7, 1e-7, 100000, [p[0], p[1], p[2]], [p[3], p[4]]);
    let mut s = 0.0;
    for n in 0..5 {{
        s += c[n][0].ln();
    }}
    s
}}

fn forms_grad(p: [f64; 5], n: i64) -> [f64; 5] {{ grad(forms_sum, p, n) }}

fn forms_grad_bdf(p: [f64; 5], n: i64) -> [f64; 5] {{ grad(forms_sum_bdf, p, n) }}

fn shrink_grad(p: [f64; 5]) -> [f64; 5] {{ grad(shrink_sum, p) }}

fn shrink_grad_bdf(p: [f64; 5]) -> [f64; 5] {{ grad(shrink_sum_bdf, p) }}

fn drift_grad(p: [f64; 3]) -> [f64; 3] {{ grad(drift_sum, p) }}

fn lotka_volterra_grad(p: [f64; 6]) -> [f64; 6] {{ grad(lotka_volterra_sum, p) }}

fn one_comp_grad(p: [f64; 5]) -> [f64; 5] {{ grad(one_comp_sum, p) }}
"""


def main():
    with open("tests/programs/ode_gradient_forms.ab", "w") as out:
        # The solves are long and their subject is not batching: one
        # configuration of each strategy a run (tests/programs/README.md).
        out.write(program() + "//@ configurations: one per run\n")


if __name__ == "__main__":
    main()
