#!/usr/bin/env python3
"""Inputs of examples/weights/rnn_*.ab: BATCH token sequences (lengths 1-40,
ids 1-99) and the weights E, W, U at hidden size HIDDEN, from
numpy's RandomState(0).

    python3 tools/weights_inputs.py BATCH HIDDEN OUT.json
"""
import json
import sys

import numpy as np


def main():
    batch, hidden, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    r = np.random.RandomState(0)
    length, vocab = 40, 100
    lens = r.randint(1, length + 1, size=batch)
    tokens = r.randint(1, vocab, size=(batch, length))
    scale = 1 / np.sqrt(hidden)
    shared = {
        "E": (r.randn(vocab, hidden) * 0.1).tolist(),
        "W": (r.randn(4, hidden, hidden) * scale).tolist(),
        "U": (r.randn(4, hidden, hidden) * scale).tolist(),
    }
    with open(out, "w") as f:
        json.dump({"batch": {"tokens": tokens.tolist(), "len": lens.tolist()}, "shared": shared}, f)


if __name__ == "__main__":
    main()
