#!/usr/bin/env python3
"""Reference values for the gradient tests through recursion, loops and
instances (tests/programs/grad_recursion_*.ab, grad_while.ab,
grad_loop_break.ab, grad_join_tree.ab, grad_map_extra.ab,
grad_instances_f32.ab, grad_loop_carried.ab), for the tests of data arguments (grad_data*.ab) and
for the Jacobian tests (jacobian_*.ab).

Each program is written again here in Python over mpmath numbers (50
digits), and its derivatives are taken by mpmath's numerical
differentiation at that precision: independent of autobatch's autodiff, and
exact to far more than the 1e-12 the tests ask. Prints the `//@ expect:`
line of each file (the in-language finite-difference checks are `true`).

    python3 tools/grad_reference.py
"""
import json

from mpmath import mp, mpf

mp.dps = 50


def num(v):
    """A result as the JSON float autobatch prints (0 for a zero derivative)."""
    f = float(v)
    return 0.0 if abs(f) < 1e-300 else f


def gradient(f, point):
    """The partial derivatives of f (a function of len(point) numbers)."""
    n = len(point)
    return [
        mp.diff(f, point, tuple(1 if j == i else 0 for j in range(n)))
        for i in range(n)
    ]


def show(name, results):
    print(f"{name}: //@ expect: {json.dumps(results)}")


# ---------------------------------------------------------------- grad_recursion_power

C = [mpf(c) for c in ("1.0", "-2.0", "0.5", "3.0", "-1.5", "0.25")]


def horner(x, k, n):
    return C[k] if k == n else C[k] + x * horner(x, k + 1, n)


def power(a, n):
    if n == 0:
        return mpf(1)
    if n % 2 == 0:
        h = power(a, n // 2)
        return h * h
    return a * power(a, n - 1)


def recursion_power():
    out = []
    for x, degree in zip([0.5, -1.25, 2.0, 0.75, -0.3], [0, 2, 5, 5, 3]):
        x = mpf(x)
        poly = lambda t: horner(t, 0, degree)
        out.append({"ok": [num(poly(x)), num(mp.diff(poly, x)), True,
                           num(mp.diff(lambda t: power(t, 13), x)), True]})
    show("grad_recursion_power", out)


# ---------------------------------------------------------------- grad_recursion_tree

LEFT = [1, 3, -1, 5, -1, 7, -1, -1, -1]
RIGHT = [2, 4, -1, 6, -1, 8, -1, -1, -1]
WORD = [mpf(v) for v in ("0.1", "-0.2", "0.3", "0.8", "-1.1", "0.45", "2.0", "-0.35", "0.9")]


def node(w, i):
    if LEFT[i] < 0:
        return mp.tanh(w[0] * WORD[i] + w[3])
    l, r = node(w, LEFT[i]), node(w, RIGHT[i])
    return mp.tanh(w[1] * l + w[2] * r + w[3] * WORD[i])


def recursion_tree():
    ws = [[0.5, -0.7, 1.1, 0.3], [0.3, 0.9, -0.4, -0.8], [1.2, 0.2, 0.6, 0.1],
          [-0.6, 1.3, 0.7, 0.5], [0.5, -0.7, 1.1, 0.3]]
    roots = [0, 1, 5, 2, 3]
    out = []
    for w, root in zip(ws, roots):
        loss = lambda *v: (node(v, root) - mpf("0.3")) ** 2
        point = [mpf(v) for v in w]
        out.append({"ok": [num(loss(*point)), [num(g) for g in gradient(loss, point)], True]})
    show("grad_recursion_tree", out)


# ---------------------------------------------------------------- grad_recursion_mutual


def even(a, n):
    return a if n == 0 else odd(a * mpf("1.5"), n - 1) + mp.sin(a)


def odd(a, n):
    return -a * a if n == 0 else even(mp.tanh(mpf("0.5") * a) * 2, n - 1)


def recursion_mutual():
    out = []
    for x, depth in zip([0.7, -0.4, 1.3, 0.2], [0, 1, 4, 7]):
        f = lambda t: even(t, depth)
        x = mpf(x)
        out.append({"ok": [num(f(x)), num(mp.diff(f, x)), True]})
    show("grad_recursion_mutual", out)


# ---------------------------------------------------------------- grad_while

SEQ = [mpf(v) for v in ("0.6", "-0.3", "0.9", "0.4", "-1.2", "0.2", "0.7", "-0.5")]
STOP = [mpf(v) for v in ("0.5", "1.7", "3.3", "100.0")]


def rnn(k, w0, w1):
    h, read, i = mpf(0), mpf(0), 0
    while i < 8 and read < STOP[k]:
        h = mp.tanh(w0 * h + w1 * SEQ[i])
        read += abs(SEQ[i])
        i += 1
    return (h - mpf("0.5")) ** 2 + i * mpf("0.01")


def damped(w0, w1):
    y, r, steps = w0 * w1, mpf(1), 0
    while r > mpf("1e-3"):
        y = mpf("0.5") * y + mpf("0.25") * w0
        r = r * mpf("0.5")
        steps += 1
    return y + steps


def loops_while():
    out = []
    for w, k in zip([[0.5, 1.2], [-0.8, 0.6], [1.1, -0.9], [0.3, 0.4]], [0, 1, 2, 3]):
        f = lambda a, b: rnn(k, a, b) + damped(a, b)
        point = [mpf(v) for v in w]
        out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)], True]})
    show("grad_while", out)


# ---------------------------------------------------------------- grad_loop_break

DATA = [mpf(v) for v in ("0.3", "0.5", "0.9", "-0.2", "0.4", "0.1", "-0.8", "0.6")]


def until_negative(s, x):
    h, i = x, s
    while True:
        h = mp.sin(h + DATA[i]) * mpf("1.2")
        i += 1
        if i == 8:
            last = h
            break
        if DATA[i] < 0:
            last = h * h
            break
    return last + mpf("0.5") * h


def until_drop(s, x):
    total = mpf(0)
    for i in range(s, 8):
        if DATA[i] < mpf("-0.5"):
            break
        if x * DATA[i] > mpf("0.3"):
            continue
        total += mp.exp(x * DATA[i]) * i
    return total


def loops_break():
    out = []
    for x, s in zip([0.4, -0.7, 1.1, 0.25], [0, 1, 3, 5]):
        f = lambda t: until_negative(s, t) + until_drop(s, t)
        x = mpf(x)
        out.append({"ok": [num(f(x)), num(mp.diff(f, x)), True]})
    show("grad_loop_break", out)


# ---------------------------------------------------------------- grad_join_tree
# (LEFT, RIGHT, WORD as for grad_recursion_tree)


def join_node(w, i):
    if LEFT[i] < 0:
        return mp.tanh(w[0] * WORD[i] + w[3])
    l, r = join_node(w, LEFT[i]), join_node(w, RIGHT[i])
    return mp.tanh(w[1] * l + w[2] * r + w[3] * WORD[i] + mpf("0.5") * l * r)


def map_node(i, w):
    if LEFT[i] < 0:
        return mp.cos(w[3] * WORD[i]) * w[0]
    hs = [map_node(c, w) for c in (LEFT[i], RIGHT[i])]
    return mp.sin(w[1] * hs[0] - w[2] * hs[1] + w[0] * WORD[i])


def join_tree():
    ws = [[0.5, -0.7, 1.1, 0.3], [0.3, 0.9, -0.4, -0.8], [1.2, 0.2, 0.6, 0.1],
          [-0.6, 1.3, 0.7, 0.5], [0.5, -0.7, 1.1, 0.3]]
    roots = [0, 1, 5, 2, 3]
    out = []
    for w, root in zip(ws, roots):
        def loss(*v):
            e = join_node(v, root) - mpf("0.3")
            m = map_node(root, v)
            return e * e + mpf("0.5") * m * m
        point = [mpf(v) for v in w]
        out.append({"ok": [num(loss(*point)), [num(g) for g in gradient(loss, point)], True]})
    show("grad_join_tree", out)


# ---------------------------------------------------------------- grad_map_extra


def layer(x, m, b, s):
    pre = [m[0][0] * x[0] + m[0][1] * x[1] + b[0], m[1][0] * x[0] + m[1][1] * x[1] + b[1]]
    return (mp.tanh(pre[0]) + mp.tanh(pre[1])) * s


def pair(k, m, v):
    a = v[k] * v[k] * m[0][1]
    c = m[1][0] * v[0] + m[1][1]
    return a * c


def inner(k, v, m):
    return sum(mp.sin(x * m[k][0]) for x in v)


def map_extra_f(xs, p):
    m = [[p[0], p[1]], [p[2], p[3]]]
    b = [p[4], p[5]]
    s = p[6]
    v = [p[7], p[8], p[9]]
    shared = sum(layer(x, m, b, s) for x in xs)
    own = [layer(x, m, b, mpf(1)) for x in ([v[0], v[1]], [v[2], p[0]])]
    pf = [pair(k, m, v) for k in range(3)]
    nest = [inner(k, v, m) for k in range(2)]
    return shared + own[0] * own[1] + sum(pf) + nest[0] - nest[1]


def map_extra():
    runs = [
        ([[0.4, -1.0], [1.5, 0.25], [-0.3, 0.7]],
         [[0.5, -0.7, 1.1, 0.3, 0.2, -0.4, 1.5, 0.8, -0.6, 0.9],
          [-0.2, 0.4, 0.9, -1.3, 0.6, 0.1, -0.7, 0.3, 1.2, -0.5]]),
        ([], [[0.5, -0.7, 1.1, 0.3, 0.2, -0.4, 1.5, 0.8, -0.6, 0.9]]),
    ]
    for xs, ps in runs:
        xs = [[mpf(str(a)) for a in x] for x in xs]
        out = []
        for p in ps:
            f = lambda *q: map_extra_f(xs, q)
            point = [mpf(str(a)) for a in p]
            out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)], True]})
        show("grad_map_extra", out)


# ---------------------------------------------------------------- jacobian_rows


def jacobian_numeric(h, point):
    """The Jacobian of h (a list of functions of len(point) numbers), by rows."""
    return [gradient(hm, point) for hm in h]


def h_closed_form(x):
    """The Jacobian of h(x) = [x0 x1, sin x2 + x0, exp(x0 x2), x1 / (1 + x2^2)],
    derived by hand."""
    x0, x1, x2 = x
    e = mp.exp(x0 * x2)
    d = 1 + x2 * x2
    return [
        [x1, x0, 0],
        [1, 0, mp.cos(x2)],
        [x2 * e, 0, x0 * e],
        [0, 1 / d, -2 * x1 * x2 / (d * d)],
    ]


def jacobian_rows():
    rows = lambda j: [[num(v) for v in row] for row in j]
    xs = [[0.5, -1.25, 0.75], [2.0, 0.3, -0.4], [-0.6, 1.1, 0.0]]
    show("jacobian_rows", [{"ok": [rows(h_closed_form([mpf(str(v)) for v in x])), True]} for x in xs])

    def forks(i, v):
        p, q = v[0] * v[1], v[-1] ** 3
        return mp.tanh(v[i] * p) * q

    out = []
    for x in [[0.5, -1.25, 0.75, 2.0], [0.1, 0.2, -0.3, 1.4]]:
        point = [mpf(str(v)) for v in x]
        h = [lambda *v, i=i: forks(i, v) for i in range(4)]
        out.append({"ok": rows(jacobian_numeric(h, point))})
    show("jacobian_rows", out)

    w = [mpf(v) for v in ("0.5", "-2.0", "1.5")]
    out = []
    for x in [[0.5, -1.25], [1.5, 0.2]]:
        point = [mpf(str(v)) for v in x]
        h = [lambda a, b, wk=wk: wk * a * a + b for wk in w]
        out.append({"ok": rows(jacobian_numeric(h, point))})
    show("jacobian_rows", out)


# ---------------------------------------------------------------- grad_instances_f32
# (computed exactly; the test compares at f32's tolerance)


def f32_sq(x, c):
    return mp.tanh(x * c)


def f32_loss(p):
    a, b = f32_sq(p[0], p[1]), f32_sq(p[2], mpf("0.5"))
    ys = [f32_sq(x, p[3]) for x in p]
    pairs = [p[k] * p[(k + 1) % 4] for k in range(4)]
    return a * b + sum(ys) + sum(pairs)


def f32_spread(i, p):
    return f32_sq(p[i], p[3]) * p[0]


def instances_f32():
    out = []
    for x in [[0.5, -0.75, 1.25, 0.375], [-1.5, 0.25, 0.625, -0.875]]:
        point = [mpf(str(v)) for v in x]
        f = lambda *v: f32_loss(v)
        h = [lambda *v, i=i: f32_spread(i, v) for i in range(3)]
        jac = [[num(v) for v in row] for row in jacobian_numeric(h, point)]
        out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)], jac]})
    show("grad_instances_f32", out)


# ---------------------------------------------------------------- grad_data


def data_loss(theta, xs, ys, w, skip):
    scale, power = w
    s = mpf(0)
    for i, (x, y) in enumerate(zip(xs, ys)):
        if skip and i == 0:
            continue
        s += scale * (theta[0] * x + theta[1] - y) ** power
    return s + theta[0] * theta[0] * mpf("0.125")


def data():
    thetas = [[0.5, -0.25], [1.5, 0.75], [-0.2, 0.1], [0.3, 0.3]]
    xss = [[1.0, 2.0, -0.5], [0.25], [], [2.0, -1.0, 0.5, 1.5, 3.0]]
    yss = [[0.5, 1.25, -1.0], [2.0], [], [1.0, -0.5, 0.0, 0.75, 2.5]]
    skips = [False, True, False, False]
    out = []
    for theta, xs, ys, skip in zip(thetas, xss, yss, skips):
        xs, ys = [mpf(v) for v in xs], [mpf(v) for v in ys]
        f = lambda *t: data_loss(t, xs, ys, (mpf("0.75"), 3), skip)
        point = [mpf(v) for v in theta]
        g = [num(v) for v in gradient(f, point)]
        out.append({"ok": [num(f(*point)), g, g, True]})
    show("grad_data", out)


# ---------------------------------------------------------------- grad_data_tree


def data_node(w, i, left, right, word):
    if left[i] < 0:
        return mp.tanh(w[0] * word[i] + w[3])
    l = data_node(w, left[i], left, right, word)
    r = data_node(w, right[i], left, right, word)
    return mp.tanh(w[1] * l + w[2] * r + w[3] * word[i])


def data_tree():
    ws = [[0.5, -0.7, 1.1, 0.3], [0.3, 0.9, -0.4, -0.8], [1.2, 0.2, 0.6, 0.1],
          [-0.6, 1.3, 0.7, 0.5]]
    lefts = [[1, 3, -1, -1, -1], [-1], [1, 3, 5, -1, -1, -1, -1], [1, -1, -1]]
    rights = [[2, 4, -1, -1, -1], [-1], [2, 4, 6, -1, -1, -1, -1], [2, -1, -1]]
    words = [["0.1", "-0.2", "0.3", "0.8", "-1.1"], ["0.45"],
             ["2.0", "-0.35", "0.9", "0.1", "-0.2", "0.3", "0.8"], ["-1.1", "0.45", "2.0"]]
    out = []
    for w, left, right, word in zip(ws, lefts, rights, words):
        word = [mpf(v) for v in word]
        loss = lambda *v: (data_node(v, 0, left, right, word) - mpf("0.3")) ** 2
        point = [mpf(v) for v in w]
        out.append({"ok": [num(loss(*point)), [num(g) for g in gradient(loss, point)], True]})
    show("grad_data_tree", out)


# ---------------------------------------------------------------- grad_data_forks


def forks_fit(theta, xs):
    def term(x):
        p = mpf(0)
        for t in theta:
            p = p * x + t
        return mp.tanh(p - x)

    moments = [theta[k] * sum(x ** (k + 1) for x in xs) for k in range(3)]
    a = theta[0] * sum(xs)
    b = theta[0] * theta[0] * sum(xs)
    return sum(term(x) ** 2 for x in xs) + mp.sin(sum(moments)) + a * b


def forks_h(x, xs):
    return [x[m] * sum(v ** (m + 1) for v in xs) * x[m] for m in range(3)]


def data_forks():
    thetas = [[0.5, -0.25, 0.75], [1.5, 0.5, -1.0], [-0.2, 0.1, 0.3]]
    xss = [[1.0, 2.0, -0.5], [0.25], [0.5, -1.5, 2.0, 1.0, -0.75, 0.125]]
    out = []
    for theta, xs in zip(thetas, xss):
        xs = [mpf(v) for v in xs]
        f = lambda *t: forks_fit(t, xs)
        point = [mpf(v) for v in theta]
        rows = [lambda *v, m=m: forks_h(v, xs)[m] for m in range(3)]
        jac = [[num(v) for v in row] for row in jacobian_numeric(rows, point)]
        out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)], jac, True]})
    show("grad_data_forks", out)


# ---------------------------------------------------------------- grad_loop_carried


def swap(x, y, n):
    for _ in range(n):
        x, y = y, x * 3
    return x + 10 * y


def decay(a, n):
    gamma = [mpf(0), mpf(0)]
    for _ in range(n):
        gamma = [gamma[k] * mpf("0.5") + a[k] for k in range(2)]
    return sum(gamma)


def hmm_forward(t1, t2, mu, ys):
    log_theta = [[mp.log(t1[0]), mp.log(t1[1])], [mp.log(t2[0]), mp.log(t2[1])]]

    def lpdf(y, m):
        return -(y - m) ** 2 / 2 - mp.log(2 * mp.pi) / 2

    def lse(xs):
        top = max(xs)
        return top + mp.log(sum(mp.exp(x - top) for x in xs))

    gamma = [lpdf(ys[0], mu[k]) for k in range(2)]
    for y in ys[1:]:
        gamma = [lse([gamma[j] + log_theta[j][k] for j in range(2)]) + lpdf(y, mu[k]) for k in range(2)]
    return lse(gamma)


def loop_carried():
    out = []
    for p, n in zip([[1.0, 2.0], [1.0, 2.0], [0.5, -1.5], [1.0, 2.0]], [3, 2, 5, 0]):
        f = lambda x, y: swap(x, y, n)
        point = [mpf(v) for v in p]
        out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)]]})
    show("grad_loop_carried swap", out)
    out = []
    for a, n in zip([[1.0, 2.0], [1.0, 2.0], [-0.5, 0.25]], [3, 1, 6]):
        f = lambda x, y: decay([x, y], n)
        point = [mpf(v) for v in a]
        out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)]]})
    show("grad_loop_carried decay", out)
    ys = [mpf(v) for v in ("2.5", "3.1", "9.8", "10.4", "2.9", "11.0", "3.3")]
    out = []
    for t1, t2, mu in [([0.7, 0.3], [0.2, 0.8], [3.0, 10.0]), ([0.5, 0.5], [0.9, 0.1], [2.0, 9.0])]:
        t2m = [mpf(v) for v in t2]
        mum = [mpf(v) for v in mu]
        f = lambda x, y: hmm_forward([x, y], t2m, mum, ys)
        point = [mpf(v) for v in t1]
        out.append({"ok": [num(f(*point)), [num(g) for g in gradient(f, point)]]})
    show("grad_loop_carried hmm", out)


if __name__ == "__main__":
    recursion_power()
    recursion_tree()
    recursion_mutual()
    loops_while()
    loops_break()
    join_tree()
    map_extra()
    jacobian_rows()
    instances_f32()
    data()
    data_tree()
    data_forks()
    loop_carried()
