"""Inputs and numpy reference results of the ragged examples
(examples/ragged/*.ab).

    python3 tools/ragged_reference.py        # needs numpy

writes, for each example, its inputs (NAME.json, random from a fixed seed
or read from examples/data) and numpy's results for them, as the
program's `results` (NAME.expect.json):

- attention.ab: members with 1, 3, 5 and 2 keys of width 4; numpy's softmax
  attention per member.
- regressions.ab: 40 members with 1 to 200 observations each (skewed);
  numpy's gradient descent on each member's mean squared error, the same
  steps as the program.
- rnn.ab: see `rnn()` below."""

import json
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = ROOT / "examples" / "ragged"


def write(name, inputs, expected):
    (HERE / f"{name}.json").write_text(json.dumps(inputs) + "\n")
    (HERE / f"{name}.expect.json").write_text(json.dumps(expected) + "\n")


def attention():
    rng = np.random.default_rng(16)
    D = 4
    lengths = [1, 3, 5, 2]
    keys = [rng.normal(size=(n, D)).round(3) for n in lengths]
    values = [rng.normal(size=(n, D)).round(3) for n in lengths]
    query = rng.normal(size=D).round(3)

    def attend(k, v, q):
        scores = k @ q
        w = np.exp(scores - scores.max())
        w /= w.sum()
        return w @ v

    inputs = {
        "batch": {"keys": [k.tolist() for k in keys], "values": [v.tolist() for v in values]},
        "shared": {"query": query.tolist()},
    }
    expected = [{"ok": attend(k, v, query).tolist()} for k, v in zip(keys, values)]
    write("attention", inputs, expected)


def regressions():
    """Each member: a line a x + b plus noise at its own L points in
    [-1, 1]; L = 1 + floor(199 u^3) for u uniform (most members short, a
    few long). The fit: STEPS steps of theta -= RATE * gradient of
    mean((a x + b - y)^2), from theta = 0, as in regressions.ab."""
    steps, rate = 200, 0.25
    rng = np.random.default_rng(1616)
    members = 40
    lengths = 1 + np.floor(199 * rng.uniform(size=members) ** 3).astype(int)
    xss, yss, expected = [], [], []
    for n in lengths:
        a, b = rng.normal(size=2)
        xs = rng.uniform(-1, 1, size=n).round(3)
        ys = (a * xs + b + 0.1 * rng.normal(size=n)).round(3)
        theta = np.zeros(2)

        def loss(t):
            r = xs * t[0] + t[1] - ys
            return np.mean(r * r)

        first = loss(theta)
        for _ in range(steps):
            r = xs * theta[0] + theta[1] - ys
            gradient = np.array([np.mean(2 * r * xs), np.mean(2 * r)])
            theta = theta - gradient * rate
        xss.append(xs.tolist())
        yss.append(ys.tolist())
        expected.append({"ok": [theta.tolist(), loss(theta), first]})
    write("regressions", {"batch": {"xs": xss, "ys": yss}}, expected)


if __name__ == "__main__":
    attention()
    regressions()
