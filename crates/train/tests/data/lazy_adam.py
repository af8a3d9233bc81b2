#!/usr/bin/env python3
"""The reference of crates/train/tests/train.rs's lazy-update test, in
numpy (float64), independent of autobatch: Adam (PyTorch's definition, lr
0.01) on `loss(w, y) = sum((W @ E[w] - y)^2)`, the mean loss of each
mini-batch of 2 examples in the epochs' orders below, for 2 epochs. Lazy:
the rows of the embedding `E` that a mini-batch did not read keep their
values and moments (DyNet's sparse updates, PyTorch's SparseAdam); dense:
every element is updated at every step. Writes lazy_adam.json.

    .peers/dynet/bin/python crates/train/tests/data/lazy_adam.py
"""
import json
import os

import numpy as np

E0 = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6], [-0.4, 0.2, 0.9],
               [0.7, -0.5, 0.3], [0.1, 0.6, -0.8]])
W0 = np.array([[0.2, -0.3, 0.5], [-0.6, 0.4, 0.1]])
WORDS = [0, 2, 2, 4, 0, 1]
TARGETS = [[1.0, 0.0], [0.0, 1.0], [0.5, -0.5], [-1.0, 0.3], [0.2, 0.2], [0.8, -0.1]]
# The orders autobatch_train::batches::epoch_order(6, seed 0, epoch) gives
# (the test checks them).
ORDERS = [[0, 1, 3, 5, 2, 4], [3, 1, 0, 5, 2, 4]]
BATCH, LR, B1, B2, EPS = 2, 0.01, 0.9, 0.999, 1e-8


def gradients(E, W, batch):
    gE, gW = np.zeros_like(E), np.zeros_like(W)
    for k in batch:
        e, y = E[WORDS[k]], np.array(TARGETS[k])
        d = W @ e - y
        gE[WORDS[k]] += 2 * W.T @ d
        gW += 2 * np.outer(d, e)
    return gE / len(batch), gW / len(batch)


def adam(p, g, m, v, t, mask):
    m2 = B1 * m + (1 - B1) * g
    v2 = B2 * v + (1 - B2) * g * g
    p2 = p - LR / (1 - B1**t) * m2 / (np.sqrt(v2) / np.sqrt(1 - B2**t) + EPS)
    return (np.where(mask, p2, p), np.where(mask, m2, m), np.where(mask, v2, v))


def train(lazy):
    E, W = E0.copy(), W0.copy()
    mE, vE, mW, vW = (np.zeros_like(E), np.zeros_like(E), np.zeros_like(W), np.zeros_like(W))
    t = 0
    for order in ORDERS:
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            t += 1
            gE, gW = gradients(E, W, batch)
            read = np.zeros(E.shape, bool)
            read[[WORDS[k] for k in batch]] = True
            E, mE, vE = adam(E, gE, mE, vE, t, read if lazy else np.ones(E.shape, bool))
            W, mW, vW = adam(W, gW, mW, vW, t, np.ones(W.shape, bool))
    return {"E": E.tolist(), "W": W.tolist()}


out = {"E0": E0.tolist(), "W0": W0.tolist(), "words": WORDS, "targets": TARGETS,
       "orders": ORDERS, "lazy": train(True), "dense": train(False)}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lazy_adam.json"), "w") as f:
    json.dump(out, f)
    f.write("\n")
