#!/usr/bin/env python3
"""Inputs and numpy references for the models of examples/models/ (other than
the TreeLSTM, see treelstm_inputs.py): mvrnn, birnn, nested, drnn, berxit,
stackrnn.

Writes an autobatch inputs file (per-member data in `batch`, the weights in
`shared`) and, with --expect, the numpy float32 outputs per member (each
flattened to a list of numbers, in the order the program returns them).
Data and weights come from numpy RandomState: the data from seed + 1000, the
weights from seed, in the fixed order of each model's `weights` function.
Models with data-dependent decisions (drnn, berxit, stackrnn) check that no
decision of the numpy reference is within MARGIN of its threshold, so that
float32 rounding cannot flip it: if one is, the script stops (pick another
seed).

    tools/models_inputs.py birnn --batch 8 --hidden 4 \
        --out examples/models/birnn_small.json \
        --expect examples/models/birnn_small.expect.json

`dynet_bench.py` imports this module for the same inputs and weights.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import treelstm_inputs  # noqa: E402

F = np.float32
MARGIN = 1e-4
VOCAB = 1000  # token ids of the generated sequences: 1..VOCAB-1 (0 pads); --vocab


def sigmoid(x):
    return (F(1) / (F(1) + np.exp(-x))).astype(F)


def normal(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(F)


class Margins:
    """The smallest distance of a decision from its threshold."""

    def __init__(self):
        self.low = float("inf")

    def see(self, gap):
        self.low = min(self.low, abs(float(gap)))


# --------------------------------------------------------------- data ----

def sst_trees(path, count, skip=0):
    """SST trees as post-order arrays (left, right, word, root) and the vocabulary size."""
    with open(path) as f:
        lines = [l for l in f if l.strip()][skip:skip + count]
    vocab = {"_UNK_": 0}
    flat = [treelstm_inputs.flatten(treelstm_inputs.parse(l), vocab) for l in lines]
    return flat, len(vocab)


def tree_batch(flat):
    n = max(len(t[0]) for t in flat)
    pad = lambda xs, v: xs + [v] * (n - len(xs))
    return {
        "left": [pad(t[0], -1) for t in flat],
        "right": [pad(t[1], -1) for t in flat],
        "word": [pad(t[2], 0) for t in flat],
        "root": [t[3] for t in flat],
    }


def sequences(rng, count, low, high):
    """`count` token sequences of lengths uniform in [low, high]."""
    lens = rng.randint(low, high + 1, size=count)
    return [rng.randint(1, VOCAB, size=n).tolist() for n in lens]


def pad_rows(rows, width, value=0):
    return [r + [value] * (width - len(r)) for r in rows]


# ------------------------------------------------------------- MV-RNN ----
# Socher et al. 2012: node = (vector, matrix); leaf = (E[w], LM[w % K]);
# parent p = tanh(WL (B a) + WR (A b) + BIAS), P = ML A + MR B.

MV_K = 16  # leaf matrices: word w takes LM[w % K]


def mvrnn_weights(seed, vocab, h):
    rng = np.random.RandomState(seed)
    s = 1.0 / np.sqrt(2 * h)
    return {
        "E": normal(rng, (vocab, h), 0.5),
        "LM": (np.eye(h) + rng.standard_normal((MV_K, h, h)) * (0.1 / np.sqrt(h))).astype(F),
        "WL": normal(rng, (h, h), s), "WR": normal(rng, (h, h), s),
        "BIAS": normal(rng, (h,), 0.1),
        "ML": normal(rng, (h, h), s), "MR": normal(rng, (h, h), s),
        "WOUT": normal(rng, (5, h), 0.1), "BOUT": normal(rng, (5,), 0.1),
    }


def mvrnn_reference(w, member, _margins):
    left, right, word, root = member

    def node(n):
        if left[n] < 0:
            return w["E"][word[n]], w["LM"][word[n] % MV_K]
        a, A = node(left[n])
        b, B = node(right[n])
        p = np.tanh(w["WL"] @ (B @ a) + w["WR"] @ (A @ b) + w["BIAS"])
        P = w["ML"] @ A + w["MR"] @ B
        return p, P

    p, _ = node(root)
    return [w["WOUT"] @ p + w["BOUT"]]


# ------------------------------------------------------------- BiLSTM ----

GATES = ["I", "F", "O", "U"]


def birnn_weights(seed, h, labels=3):
    rng = np.random.RandomState(seed)
    s = 1.0 / np.sqrt(h)
    w = {"E": normal(rng, (VOCAB, h), 0.5)}
    for g in GATES:
        w["W" + g] = normal(rng, (2, h, h), s)  # [direction][out][in]
        w["U" + g] = normal(rng, (2, h, h), s)
        w["B" + g] = normal(rng, (2, h), 0.1)
    w["WOUTF"] = normal(rng, (labels, h), 0.1)
    w["WOUTB"] = normal(rng, (labels, h), 0.1)
    w["BOUT"] = normal(rng, (labels,), 0.1)
    return w


def lstm_cell(w, d, x, h, c):
    g = {k: w["W" + k][d] @ x + w["U" + k][d] @ h + w["B" + k][d] for k in GATES}
    i, f, o, u = sigmoid(g["I"]), sigmoid(g["F"]), sigmoid(g["O"]), np.tanh(g["U"])
    c = i * u + f * c
    return o * np.tanh(c), c


def birnn_reference(w, member, _margins):
    tokens = member
    h_dim = w["E"].shape[1]
    out = []
    for d, order in ((0, tokens), (1, tokens[::-1])):
        h = np.zeros(h_dim, F)
        c = np.zeros(h_dim, F)
        for t in order:
            h, c = lstm_cell(w, d, w["E"][t], h, c)
        out.append(h)
    return [w["WOUTF"] @ out[0] + w["WOUTB"] @ out[1] + w["BOUT"]]


# ---------------------------------------------------------- NestedRNN ----

def nested_weights(seed, h):
    rng = np.random.RandomState(seed)
    return {
        "E": normal(rng, (VOCAB, h), 0.5),
        "WX": normal(rng, (h, h), 1 / np.sqrt(h)), "WH": normal(rng, (h, h), 1 / np.sqrt(h)),
        "BH": normal(rng, (h,), 0.1),
        "VX": normal(rng, (h, h), 1 / np.sqrt(h)), "VH": normal(rng, (h, h), 1 / np.sqrt(h)),
        "BG": normal(rng, (h,), 0.1),
        "WOUT": normal(rng, (5, h), 0.1), "BOUT": normal(rng, (5,), 0.1),
    }


def nested_reference(w, member, _margins):
    h_dim = w["E"].shape[1]
    g = np.zeros(h_dim, F)
    for seq in member:
        h = np.zeros(h_dim, F)
        for t in seq:
            h = np.tanh(w["WX"] @ w["E"][t] + w["WH"] @ h + w["BH"])
        g = np.tanh(w["VX"] @ h + w["VH"] @ g + w["BG"])
    return [w["WOUT"] @ g + w["BOUT"]]


# --------------------------------------------------------------- DRNN ----
# A node of state h: logits WOUT h; it has children if depth < DMAX and
# WE.h + BE > 0; first child h1 = tanh(UA h + BH); a second child if
# WS.h1 + BS > 0, h2 = tanh(UA h + UF h1 + BH) (fraternal state).

def drnn_weights(seed, h):
    rng = np.random.RandomState(seed)
    return {
        "WZ": normal(rng, (h, h), 1.0 / np.sqrt(h)), "BZ": normal(rng, (h,), 0.1),
        "UA": normal(rng, (h, h), 1.5 / np.sqrt(h)), "UF": normal(rng, (h, h), 1.5 / np.sqrt(h)),
        "BH": normal(rng, (h,), 0.1),
        "WE": normal(rng, (h,), 1.0 / np.sqrt(h)), "WS": normal(rng, (h,), 1.0 / np.sqrt(h)),
        "BE": F(0.5), "BS": F(0.3), "DMAX": 10,
        "WOUT": normal(rng, (5, h), 0.1),
    }


def drnn_reference(w, z, margins):
    def node(h, depth):
        s = w["WOUT"] @ h
        n = 1
        if depth < w["DMAX"]:
            e = w["WE"] @ h + w["BE"]
            margins.see(e)
            if e > 0:
                h1 = np.tanh(w["UA"] @ h + w["BH"])
                m = w["WS"] @ h1 + w["BS"]
                margins.see(m)
                if m > 0:
                    h2 = np.tanh(w["UA"] @ h + w["UF"] @ h1 + w["BH"])
                    s1, n1 = node(h1, depth + 1)
                    s2, n2 = node(h2, depth + 1)
                    s = s + s1 + s2
                    n += n1 + n2
                else:
                    s1, n1 = node(h1, depth + 1)
                    s = s + s1
                    n += n1
        return s, n

    s, n = node(np.tanh(w["WZ"] @ z + w["BZ"]), 0)
    return [s / F(n), [n]]


# ------------------------------------------------------------- Berxit ----
# Post-LN Transformer encoder, NL layers of NH heads (no biases inside the
# layers, LayerNorm without gain and bias), ReLU feed-forward of width 2D;
# after layer l the classifier WC[l] x[0] + BC[l] exits when its softmax's
# largest probability reaches THRESH (or at the last layer).

BX_LAYERS = 6
BX_HEADS = 2


def berxit_weights(seed, d, seq, labels=3):
    rng = np.random.RandomState(seed)
    dh = d // BX_HEADS
    nl, nh = BX_LAYERS, BX_HEADS
    return {
        "E": normal(rng, (VOCAB, d), 1.0),
        "POS": normal(rng, (seq, d), 0.5),
        "WQ": normal(rng, (nl, nh, d, dh), 1.0 / np.sqrt(d)),
        "WK": normal(rng, (nl, nh, d, dh), 1.0 / np.sqrt(d)),
        "WV": normal(rng, (nl, nh, d, dh), 1.0 / np.sqrt(d)),
        "WO": normal(rng, (nl, nh, dh, d), 1.0 / np.sqrt(d)),
        "W1": normal(rng, (nl, d, 2 * d), 1.0 / np.sqrt(d)),
        "W2": normal(rng, (nl, 2 * d, d), 1.0 / np.sqrt(2 * d)),
        # later layers' classifiers are sharper, so members exit at every depth
        "WC": (rng.standard_normal((nl, labels, d))
               * ((0.5 + 0.5 * np.arange(nl)) / np.sqrt(d))[:, None, None]).astype(F),
        "BC": normal(rng, (nl, labels), 0.1),
        "THRESH": F(0.9),
    }


def layer_norm(x):
    d = x.shape[1]
    mu = (x @ np.ones(d, F)) / F(d)
    xc = x - np.outer(mu, np.ones(d, F))
    var = ((xc * xc) @ np.ones(d, F)) / F(d)
    return (xc * np.outer(F(1) / np.sqrt(var + F(1e-5)), np.ones(d, F))).astype(F)


def berxit_layer(w, l, x):
    seq = x.shape[0]
    a = np.zeros_like(x)
    for k in range(BX_HEADS):
        q = x @ w["WQ"][l][k]
        kk = x @ w["WK"][l][k]
        v = x @ w["WV"][l][k]
        dh = q.shape[1]
        e = np.exp((q @ kk.T) * F(1.0 / np.sqrt(dh)))
        r = F(1) / (e @ np.ones(seq, F))
        o = (e @ v) * np.outer(r, np.ones(dh, F))
        a = a + o @ w["WO"][l][k]
    x = layer_norm(x + a)
    f = np.maximum(x @ w["W1"][l], F(0)) @ w["W2"][l]
    return layer_norm(x + f)


def berxit_reference(w, tokens, margins):
    x = (w["E"][tokens] + w["POS"]).astype(F)
    for l in range(BX_LAYERS):
        x = berxit_layer(w, l, x)
        c = w["WC"][l] @ x[0] + w["BC"][l]
        p = np.exp(c - c.max())
        p = p / p.sum()
        if l == BX_LAYERS - 1:
            return [c, [l]]
        margins.see(p.max() - w["THRESH"])
        if p.max() >= w["THRESH"]:
            return [c, [l]]


# ----------------------------------------------------------- StackRNN ----
# h = tanh(WX E[t] + WH h + WS top + BH), top the stack's top row (zeros if
# empty); action argmax(WA h + BA): 0 push h (if not full), 1 pop (if not
# empty), 2 nothing. Output WOUT h + BOUT and the final stack depth.

STACK_CAP = 16


def stackrnn_weights(seed, h):
    rng = np.random.RandomState(seed)
    return {
        "E": normal(rng, (VOCAB, h), 0.5),
        "WX": normal(rng, (h, h), 1 / np.sqrt(h)), "WH": normal(rng, (h, h), 1 / np.sqrt(h)),
        "WS": normal(rng, (h, h), 1 / np.sqrt(h)), "BH": normal(rng, (h,), 0.1),
        "WA": normal(rng, (3, h), 1.0), "BA": np.array([0.3, 0.0, -0.2], F),
        "WOUT": normal(rng, (5, h), 0.1), "BOUT": normal(rng, (5,), 0.1),
    }


def stackrnn_reference(w, tokens, margins):
    h_dim = w["E"].shape[1]
    h = np.zeros(h_dim, F)
    stack = np.zeros((STACK_CAP, h_dim), F)
    sp = 0
    for t in tokens:
        top = stack[sp - 1] if sp > 0 else np.zeros(h_dim, F)
        h = np.tanh(w["WX"] @ w["E"][t] + w["WH"] @ h + w["WS"] @ top + w["BH"])
        a = w["WA"] @ h + w["BA"]
        best = int(np.argmax(a))
        margins.see(a[best] - np.sort(a)[-2])
        if best == 0 and sp < STACK_CAP:
            stack[sp] = h
            sp += 1
        elif best == 1 and sp > 0:
            sp -= 1
    return [w["WOUT"] @ h + w["BOUT"], [sp]]


# ----------------------------------------------------------- the CLI -----

def build(model, count, hidden, seed, trees_path, seq=128):
    """(batch, weights, members): members are what the reference takes."""
    data = np.random.RandomState(seed + 1000)
    if model == "mvrnn":
        flat, vocab = sst_trees(trees_path, count)
        return tree_batch(flat), mvrnn_weights(seed, vocab, hidden), flat
    if model in ("birnn", "stackrnn"):
        seqs = sequences(data, count, 1, 40)
        width = max(len(s) for s in seqs)
        batch = {"tokens": pad_rows(seqs, width), "len": [len(s) for s in seqs]}
        w = birnn_weights(seed, hidden) if model == "birnn" else stackrnn_weights(seed, hidden)
        return batch, w, seqs
    if model == "nested":
        members = [sequences(data, data.randint(1, 9), 1, 16) for _ in range(count)]
        outer = max(len(m) for m in members)
        inner = max(len(s) for m in members for s in m)
        batch = {
            "tokens": [pad_rows(m, inner) + [[0] * inner] * (outer - len(m))
                       for m in members],
            "lens": [[len(s) for s in m] + [0] * (outer - len(m)) for m in members],
            "count": [len(m) for m in members],
        }
        return batch, nested_weights(seed, hidden), members
    if model == "drnn":
        zs = [normal(data, (hidden,), 1.0) for _ in range(count)]
        return {"z": [z.tolist() for z in zs]}, drnn_weights(seed, hidden), zs
    if model == "berxit":
        toks = [data.randint(1, VOCAB, size=seq).tolist() for _ in range(count)]
        return {"tokens": toks}, berxit_weights(seed, hidden, seq), toks
    raise SystemExit(f"unknown model {model}")


REFERENCES = {
    "mvrnn": mvrnn_reference, "birnn": birnn_reference, "nested": nested_reference,
    "drnn": drnn_reference, "berxit": berxit_reference, "stackrnn": stackrnn_reference,
}


def flat_numbers(parts):
    return [float(x) for p in parts for x in np.asarray(p).ravel()]


def to_json(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def main():
    global VOCAB
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(REFERENCES))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seq", type=int, default=128, help="berxit: sequence length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=VOCAB,
                    help="generated token ids are 1..VOCAB-1 (small for the checked-in tests)")
    ap.add_argument("--trees", default=os.path.join(os.path.dirname(__file__),
                                                    "../examples/data/sst/test.txt"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--expect", help="write numpy's outputs here (JSON)")
    a = ap.parse_args()
    VOCAB = a.vocab

    batch, w, members = build(a.model, a.batch, a.hidden, a.seed, a.trees, a.seq)
    with open(a.out, "w") as f:
        json.dump({"batch": batch, "shared": {k: to_json(v) for k, v in w.items()}}, f)
    if a.expect:
        margins = Margins()
        out = [flat_numbers(REFERENCES[a.model](w, m, margins)) for m in members]
        if margins.low < MARGIN:
            raise SystemExit(f"a decision is {margins.low:.2e} from its threshold: use another seed")
        with open(a.expect, "w") as f:
            json.dump(out, f)
    print(f"{a.model}: {len(members)} members", file=sys.stderr)


if __name__ == "__main__":
    main()
