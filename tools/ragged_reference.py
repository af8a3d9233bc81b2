"""Inputs and numpy reference results of examples/ragged/attention.ab.

    /work/venv/bin/python tools/ragged_reference.py

writes examples/ragged/attention.json (members with 1, 3, 5 and 2 keys of
width 4, random from a fixed seed) and attention.expect.json (numpy's
softmax attention per member, as the program's `results`)."""

import json
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "ragged"
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
(HERE / "attention.json").write_text(json.dumps(inputs) + "\n")
(HERE / "attention.expect.json").write_text(json.dumps(expected) + "\n")
