#!/usr/bin/env python3
"""Reference values for the gradient tests through recursion, loops and
instances (tests/programs/grad_recursion_*.ab, grad_while.ab,
grad_loop_break.ab, grad_join_tree.ab, grad_map_extra.ab,
grad_instances_f32.ab) and for the Jacobian tests (jacobian_*.ab).

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


if __name__ == "__main__":
    recursion_power()
    recursion_tree()
    recursion_mutual()
    loops_while()
    loops_break()
    join_tree()
