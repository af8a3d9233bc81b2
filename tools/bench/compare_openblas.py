"""Logistic-regression gradients (N = 10,000, D = 100) against OpenBLAS
doing only the gradient's two matrix products, on each SIMD path.

`autobatch-bench autodiff --threads ALL` (crates/bench/src/autodiff.rs):
our `value_and_grad` step through the `autobatch` library (compile, bind,
run, program-counter) at batch 1 to 1024, f32 and f64, on one thread and on
all cores, and right after each of ours the same two products through
numpy's OpenBLAS (tools/logreg_openblas.py in .peers/numpy) on as many
threads (OPENBLAS_NUM_THREADS). Run once per SIMD path: on an AVX-512 CPU,
AVX-512 against OpenBLAS's own choice (SkylakeX), then AUTOBATCH_SIMD=avx2
against OPENBLAS_CORETYPE=Haswell (AVX2): an AVX-512 CPU restricted to
the AVX2 path on both sides.
"""
import os

import common

PROGRAMS = ("value_and_grad", "hand_written_gradient")


def run(args):
    paths = []
    for path, label in common.simd_paths():
        command = [os.path.join(common.RELEASE, "autobatch-bench"), "autodiff",
                   "--threads", str(args.threads)]
        if args.quick:
            command += ["--quick", "--batch", "256"]
        env = dict(os.environ, AUTOBATCH_BENCH_PYTHON=common.peer_python("numpy"))
        for var, value in common.simd_environment(path).items():
            if value is None:
                env.pop(var, None)
            else:
                env[var] = value
        common.log(f"openblas: {label}: {' '.join(command)}")
        report = common.run_json(command, env)
        paths.append({"simd_path": path, "label": label, "report_simd_path": report["simd_path"],
                      "cells": cells(report, path, label, args.threads)})
    return {"what": "gradients per second; OpenBLAS: its two products alone", "paths": paths}


def cells(report, path, label, threads):
    """One cell per precision, batch and thread setting."""
    out = []
    for precision in report["logistic_regression"]:
        for row in precision["rows"]:
            for t in common.settings(threads):
                suffix = "1_thread" if t == 1 else f"{t}_threads"
                theirs = row.get(f"openblas_products_{suffix}")
                cell = {"simd_path": path, "label": label, "precision": precision["precision"],
                        "batch": row["batch_size"], "threads": t}
                if isinstance(theirs, dict):
                    cell["openblas_gradients_per_second"] = theirs["gradients_per_second"]
                    cell["openblas_architecture"] = theirs.get("blas_architecture")
                    cell["openblas_threads"] = theirs.get("blas_threads")
                else:
                    cell["openblas_error"] = theirs
                if t == 1:
                    cell["products_alone_gradients_per_second"] = row[
                        "products_alone_gradients_per_second"]
                for program in PROGRAMS:
                    entry = row[program]
                    cell[f"{program}_whole"] = entry.get(f"gradients_per_second_{suffix}")
                    cell[f"{program}_steady"] = entry.get(
                        f"steady_state_gradients_per_second_{suffix}")
                out.append(cell)
    return out
