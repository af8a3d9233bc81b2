#!/usr/bin/env python3
"""Writes the array files the command's tests read (crates/cli/tests/arrays/),
with numpy and the safetensors package, so that the readers are tested
against files those libraries write. Every value is a small formula the
tests compute again on their side.

    python3 tools/array_fixtures.py crates/cli/tests/arrays
"""
import os
import sys

import numpy as np
from safetensors.numpy import save_file


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # W[i][j] = i + j / 4 (f64, 2 x 3); B[i] = -i (f32); X rows: member m is [m, m + 0.5, m + 1].
    W = np.array([[i + j / 4 for j in range(3)] for i in range(2)], dtype=np.float64)
    B = np.array([-float(i) for i in range(2)], dtype=np.float32)
    X = np.array([[m, m + 0.5, m + 1] for m in range(4)], dtype=np.float64)
    # Weights of another dtype and order: W as float32 in Fortran order.
    np.savez(os.path.join(out, "weights.npz"), W=W, B=B)
    np.savez_compressed(os.path.join(out, "weights_f32_fortran.npz"),
                        W=np.asfortranarray(W.astype(np.float32)), B=B.astype(np.float64))
    np.savez(os.path.join(out, "inputs.npz"), **{"batch/x": X, "shared/W": W, "shared/B": B})
    np.save(os.path.join(out, "W_big_endian.npy"), W.astype(">f8"))
    save_file({"W": W, "B": B}, os.path.join(out, "weights.safetensors"))
    # Integer types the language lacks: int16 and uint8 for an i64 argument.
    np.savez(os.path.join(out, "counts.npz"),
             **{"batch/ks": np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int16),
                "shared/offset": np.array(7, dtype=np.uint8)})
    # Mistakes: a float array for an integer argument, a wrong shape, a name without a section.
    np.savez(os.path.join(out, "float_counts.npz"), **{"batch/ks": np.ones((2, 3))})
    np.savez(os.path.join(out, "wrong_shape.npz"), W=np.zeros((2, 3, 1)), B=B)
    np.savez(os.path.join(out, "no_section.npz"), x=X)


if __name__ == "__main__":
    main()
