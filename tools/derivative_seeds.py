#!/usr/bin/env python3
"""The true derivatives at the derivative oracle's settled seeds
(crates/fuzz/tests/finite.rs): each generated helper that reaches an ODE
solver, written again over mpmath numbers (30 digits), its linear system
`y' = M(a) y` solved exactly by `expm`, and its derivative along the
oracle's direction (0.5, -1.0, 1.5) taken by mpmath's numerical
differentiation at that precision. Independent of autobatch.

    python3 tools/derivative_seeds.py

Seeds 610, 3102 and 3922 start from a nonzero state; 2289, 4328 and 6273
from a state exactly zero at the point (the derivatives autobatch gives
there are printed beside, from the oracle's reports).
"""
from mpmath import mp, mpf, matrix, expm, tanh, sin, cos, ncdf, diff

mp.dps = 30
D = [mpf("0.5"), mpf("-1.0"), mpf("1.5")]


def M(a, m=1, scale=1, second=None):
    """The helpers' right-hand sides (`OdeForm::system` in
    crates/fuzz/src/differentiable.rs): y'[i] = c_i - y[i], the coupling
    c_i = scale (a[i] y[(i + m) % 3] + 0.5 second[i] y[(i + 2) % 3]);
    `dode` is a = its array, m = 1, scale 1, no second row; `dode_m` has
    the matrix's rows as a and second, `dode_t` the tuple's array as a and
    its float as scale, `dode_..i` its integer as m, `dode_..f` the f32 as
    a factor of scale, `dode_..b` -1 as one where its bool is true."""
    rows = [[mpf(-1) if j == i else mpf(0) for j in range(3)] for i in range(3)]
    for i in range(3):
        rows[i][(i + m) % 3] += scale * a[i]
        if second is not None:
            rows[i][(i + 2) % 3] += scale * mpf("0.5") * second[i]
    return matrix(rows)


def prop(a, y0, **form):
    """The state at time 1 from `y0` at time 0 (`form`: see `M`)."""
    return expm(M(a, **form)) * matrix(list(y0))


def along(x, t):
    return [x[i] + t * D[i] for i in range(3)]


def show(seed, f, x, ours):
    print(f"seed {seed}: {float(diff(lambda t: f(along(x, t)), 0))!r} (autobatch: {ours})")


# 610: dv0(x, d) = ode_rk45(dode_mi, dl(x), .., [tanh(map(ds, x, x0 - x1)), tanh(dl(x))], 1)[1],
# component 0
def dl_610(x):
    s, a = list(x), x[0]
    for k in range(12):
        s[k % 3] = tanh(s[1] + s[0])
        a = tanh(a * mpf("1.25") + mpf("0.75") * x[1])
    return [v * a for v in s]


def dv0_610(x):
    l = dl_610(x)
    return prop([tanh(v * tanh(sin(v))) for v in x], l, second=[tanh(v) for v in l])


show(610, lambda x: dv0_610(x)[0], [mpf("1.75"), mpf(-1), mpf(2)], 5.404616379605122)


# 3102: dv1(x) = dt(bdf(dode_mf, x, [tanh(x), tanh(x)], -0.25)[1]) + dv0(dt(x) + dl(x), x),
# component 1, dt(x) = x, dv0(x, d) = bdf(dode_f, pfor(dk, d), tanh(dl(x) + dt(x)), 0.5)[1],
# dk(k, x) = x[k] x[k+1]
def dl_3102(x):
    s, a = list(x), x[0]
    for k in range(17):
        s[k % 3] = tanh(x[1] * cos(mpf("-0.25")))
        a = tanh(a * mpf("-0.75") + (a - s[0]))
    return [v * a for v in s]


def dv0_3102(x, d):
    l = dl_3102(x)
    return prop([tanh(l[i] + x[i]) for i in range(3)], [d[k] * d[(k + 1) % 3] for k in range(3)],
                scale=mpf("0.5"))


def dv1_3102(x):
    l = dl_3102(x)
    t = [tanh(v) for v in x]
    return (prop(t, x, second=t, scale=mpf("-0.25"))
            + dv0_3102([x[i] + l[i] for i in range(3)], x))


show(3102, lambda x: dv1_3102(x)[1], [mpf(0), mpf("1.75"), mpf(-2)], 1.0972564025892237)

# 3922: dv0(x) = ode_bdf_tol(dode, x + x, .., tanh(x * (-0.25 + x2)))[1], component 1
show(3922, lambda x: prop([tanh(v * (mpf("-0.25") + x[2])) for v in x], [2 * v for v in x])[1],
     [mpf("1.75")] * 3, 0.6534406642786021)

# 2289: dv0(x, d) = ode_bdf_tol(dode, x * tanh(x0), .., tanh(d * Phi(x0)))[1], component 1
d_2289 = [mpf("-1.75"), mpf(-1), mpf("1.25")]
show(2289, lambda x: prop([tanh(v * ncdf(x[0])) for v in d_2289], [v * tanh(x[0]) for v in x])[1],
     [mpf(0), mpf("-0.75"), mpf(0)], -0.1408976176798154)


# 4328: dv2(x) = bdf(dode_mf, y0, .., [tanh(bdf(dode_t, x, .., (tanh(x2), tanh(x)))[1]),
# tanh(y0)], 0.25)[1], y0 = x * (x1 + x0), component 2
def dv2_4328(x):
    z = prop([tanh(v) for v in x], x, scale=tanh(x[2]))
    y0 = [v * (x[0] + x[1]) for v in x]
    return prop([tanh(z[i]) for i in range(3)], y0, second=[tanh(v) for v in y0],
                scale=mpf("0.25"))


show(4328, lambda x: dv2_4328(x)[2], [mpf("-1.5"), mpf("1.5"), mpf("-0.5")], 0.07274060700780506)


# 6273: dv2(x) = ode_bdf_tol(dode, dl(x), .., tanh(map(ds, x, x2)))[1], component 1,
# ds(a, c) = a cos(cos(c))
def dl_6273(x):
    s, a, b = list(x), x[0], x[1]
    for k in range(17):
        s[k % 3] = tanh(s[0])
        a = tanh(a * mpf("-0.5") + (mpf("1.5") + x[1]))
        a, b = b, a
    return [v * a for v in s]


def dv2_6273(x):
    return prop([tanh(v * cos(cos(x[2]))) for v in x], dl_6273(x))


show(6273, lambda x: dv2_6273(x)[1], [mpf(0), mpf(-2), mpf("0.5")], 0.0005307736301719129)
show(6273, lambda x: dv2_6273(x)[1], [mpf(0), mpf("-1.75"), mpf("1.5")], 0.012040143692114917)


# 1073: row 0 of dv1(x) = map(ds, x, x1) * ode_rk45(dode_i, x, .., tanh(x), 1)[1] with
# ds(a, c) = a c + (7 % ((2 c) as i64)) 0.125, at x = (0, 1, -0.5): along the
# direction x1 falls below 1, where the integer term drops from 1 to 0. Its
# slope on the side of the point (where the term is 1) is 0.125 y0'; on the
# other side 0 (x0 x1 y0 is of second order): a bend, the central
# differences their mean.
def y0_1073(x):
    return prop([tanh(v) for v in x], x)[0]


x_1073 = [mpf(0), mpf(1), mpf("-0.5")]
slope = float(mpf("0.125") * diff(lambda t: y0_1073(along(x_1073, t)), 0))
print(f"seed 1073: {slope!r} on the point's side, 0 on the other (autobatch: 0.04160714039409327)")
