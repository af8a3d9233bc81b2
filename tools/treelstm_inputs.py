#!/usr/bin/env python3
"""Inputs and a numpy reference for examples/models/treelstm*.ab.

Reads SST trees (Penn-treebank S-expressions, one per line), tokenized as
dynet-benchmark's treenn does (` +|[()]|[^ ()]+`), and writes an autobatch
inputs file: per member the tree as arrays over its nodes in post-order
(`left`, `right`: children or -1 for a leaf; `word`: the leaf's word id;
`root`), padded to the batch's largest tree; shared, the weights, drawn from
N(0, 1) * 0.1 with numpy's RandomState(seed) in a fixed order. The
vocabulary is the words of the chosen trees in order of first appearance
(id 0 is an unused `_UNK_`, as in dynet-benchmark).

With --expect FILE, also writes the root's 5 logits per member computed by
numpy in float32 (same gates, same order of terms as the program).

    tools/treelstm_inputs.py examples/data/sst/test.txt --trees 8 \
        --hidden 8 --embed 8 --out examples/models/treelstm_small.json
"""
import argparse
import json
import re
import sys

import numpy as np

TOKEN = re.compile(r" +|[()]|[^ ()]+")


def parse(line):
    toks = [t for t in TOKEN.findall(line.strip()) if t[0] != " "]
    pos = 0

    def tree():
        nonlocal pos
        assert toks[pos] == "("
        pos += 1
        label = toks[pos]
        pos += 1
        kids = []
        while toks[pos] != ")":
            if toks[pos] == "(":
                kids.append(tree())
            else:
                kids.append(toks[pos])
                pos += 1
        pos += 1
        return (label, kids)

    return tree()


def flatten(t, vocab):
    """Post-order arrays; a preterminal (label word) is one leaf node."""
    left, right, word = [], [], []

    def visit(node):
        _, kids = node
        if len(kids) == 1 and isinstance(kids[0], str):
            w = vocab.setdefault(kids[0], len(vocab))
            left.append(-1)
            right.append(-1)
            word.append(w)
            return len(left) - 1
        if len(kids) == 1:
            return visit(kids[0])
        assert len(kids) == 2, "SST trees are binary"
        a = visit(kids[0])
        b = visit(kids[1])
        left.append(a)
        right.append(b)
        word.append(0)
        return len(left) - 1

    root = visit(t)
    return left, right, word, root


WEIGHTS = [
    ("WI", "hw"), ("WO", "hw"), ("WU", "hw"),
    ("UIL", "hh"), ("UIR", "hh"), ("UOL", "hh"), ("UOR", "hh"),
    ("UUL", "hh"), ("UUR", "hh"), ("UF1", "hh"), ("UF2", "hh"),
    ("BI", "h"), ("BO", "h"), ("BU", "h"), ("BF", "h"),
    ("WOUT", "5h"), ("BOUT", "5"),
]


def weights(seed, vocab_size, hidden, embed):
    rng = np.random.RandomState(seed)
    shapes = {"hw": (hidden, embed), "hh": (hidden, hidden), "h": (hidden,),
              "5h": (5, hidden), "5": (5,)}
    w = {"E": (rng.standard_normal((vocab_size, embed)) * 0.1).astype(np.float32)}
    for name, kind in WEIGHTS:
        w[name] = (rng.standard_normal(shapes[kind]) * 0.1).astype(np.float32)
    return w


def sigmoid(x):
    # as the kernels compute it: 1 / (1 + exp(-x)), in float32
    return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)


def leaf_state(w, word):
    """A leaf's (h, c), in float32, with the program's gates and order of terms."""
    x = w["E"][word]
    i = sigmoid(w["WI"] @ x + w["BI"])
    o = sigmoid(w["WO"] @ x + w["BO"])
    u = np.tanh(w["WU"] @ x + w["BU"])
    c = i * u
    return o * np.tanh(c), c


def combined_state(w, h1, c1, h2, c2):
    """An inner node's (h, c) from its children's."""
    i = sigmoid(w["UIL"] @ h1 + w["UIR"] @ h2 + w["BI"])
    o = sigmoid(w["UOL"] @ h1 + w["UOR"] @ h2 + w["BO"])
    u = np.tanh(w["UUL"] @ h1 + w["UUR"] @ h2 + w["BU"])
    f1 = sigmoid(w["UF1"] @ h1 + w["BF"])
    f2 = sigmoid(w["UF2"] @ h2 + w["BF"])
    c = i * u + f1 * c1 + f2 * c2
    return o * np.tanh(c), c


def reference(w, left, right, word, root):
    def node(n):
        if left[n] < 0:
            return leaf_state(w, word[n])
        return combined_state(w, *node(left[n]), *node(right[n]))

    h, _ = node(root)
    return w["WOUT"] @ h + w["BOUT"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trees", help="an SST file, one tree per line")
    ap.add_argument("--trees", dest="count", type=int, default=8)
    ap.add_argument("--skip", type=int, default=0, help="trees to skip first")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--embed", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--expect", help="write the numpy logits here (JSON)")
    a = ap.parse_args()

    with open(a.trees) as f:
        lines = [l for l in f if l.strip()][a.skip:a.skip + a.count]
    vocab = {"_UNK_": 0}
    flat = [flatten(parse(l), vocab) for l in lines]
    n = max(len(t[0]) for t in flat)
    pad = lambda xs, v: xs + [v] * (n - len(xs))
    batch = {
        "left": [pad(t[0], -1) for t in flat],
        "right": [pad(t[1], -1) for t in flat],
        "word": [pad(t[2], 0) for t in flat],
        "root": [t[3] for t in flat],
    }
    w = weights(a.seed, len(vocab), a.hidden, a.embed)
    shared = {k: v.tolist() for k, v in w.items()}
    with open(a.out, "w") as f:
        json.dump({"batch": batch, "shared": shared}, f)
    if a.expect:
        out = [reference(w, *t).astype(float).tolist() for t in flat]
        with open(a.expect, "w") as f:
            json.dump(out, f)
    print(f"{len(flat)} trees, {n} nodes at most, vocabulary {len(vocab)}", file=sys.stderr)


if __name__ == "__main__":
    main()
