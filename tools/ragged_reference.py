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
- rnn.ab: the first 120 sentences of examples/data/sst/dev.txt as word
  ids (a vocabulary built from them), random weights; numpy's Elman RNN
  and softmax per sentence."""

import json
import pathlib
import re

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


def sst_leaves(line):
    """The words of one tree of the Stanford Sentiment Treebank: the
    leaves, `(label word)`, left to right (tokens as in its README)."""
    tokens = [t for t in re.findall(r" +|[()]|[^ ()]+", line) if not t.isspace()]
    return [
        tokens[i + 2]
        for i in range(len(tokens) - 3)
        if tokens[i] == "(" and tokens[i + 2] not in "()" and tokens[i + 3] == ")"
    ]


def rnn():
    """Members: the first 120 sentences of dev.txt (2 to 50-odd words),
    each word an id into a vocabulary of the words of those sentences, in
    order of first appearance. Weights: normal draws from a fixed seed,
    rounded to 3 decimals, hidden width 8, 5 labels."""
    lines = (ROOT / "examples" / "data" / "sst" / "dev.txt").read_text().splitlines()[:120]
    vocabulary = {}
    sentences = []
    for line in lines:
        words = sst_leaves(line)
        sentences.append([vocabulary.setdefault(w, len(vocabulary)) for w in words])
    rng = np.random.default_rng(1617)
    h, k, v = 8, 5, len(vocabulary)
    e = rng.normal(size=(v, h)).round(3)
    w = (rng.normal(size=(h, h)) / np.sqrt(h)).round(3)
    u = (rng.normal(size=(h, h)) / np.sqrt(h)).round(3)
    b = (0.1 * rng.normal(size=h)).round(3)
    o = rng.normal(size=(k, h)).round(3)
    c = (0.1 * rng.normal(size=k)).round(3)
    expected = []
    for words in sentences:
        state = np.zeros(h)
        for word in words:
            state = np.tanh(w @ e[word] + u @ state + b)
        logits = o @ state + c
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = np.sort(p)
        # The label compared exactly: no near tie that rounding could flip.
        assert top[-1] - top[-2] > 1e-9
        expected.append({"ok": [p.tolist(), int(np.argmax(p))]})
    inputs = {
        "batch": {"words": sentences},
        "shared": {
            "E": e.tolist(),
            "W": w.tolist(),
            "U": u.tolist(),
            "B": b.tolist(),
            "O": o.tolist(),
            "C": c.tolist(),
        },
    }
    write("rnn", inputs, expected)


if __name__ == "__main__":
    attention()
    regressions()
    rnn()
