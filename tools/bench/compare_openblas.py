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

Run alone, it measures chosen cells A/B: each repeat runs ours then
OpenBLAS for every cell, and the report gives, per cell, the ratio of our
steady `value_and_grad` rate to OpenBLAS's products in every repeat, with
their median and minimum (on a shared machine the ratio of neighbouring
runs is steadier than either rate):

    python3 tools/bench/compare_openblas.py --paths avx2 --threads 2 --repeats 9

(the cells: 256 and 1,024 members, f32 and f64, one thread and `--threads`;
target/release/autobatch-bench built first).
"""
import argparse
import json
import os
import statistics
import sys

import common

PROGRAMS = ("value_and_grad", "hand_written_gradient")


def run(args):
    paths = []
    for path, label in common.simd_paths():
        command = [os.path.join(common.RELEASE, "autobatch-bench"), "autodiff",
                   "--threads", str(args.threads)]
        if args.quick:
            command += ["--quick", "--batch", "256"]
        env = environment(path)
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


def environment(path):
    """Our side's path and OpenBLAS's kernel of the same width, and the peer."""
    env = dict(os.environ, AUTOBATCH_BENCH_PYTHON=common.peer_python("numpy"))
    for var, value in common.simd_environment(path).items():
        if value is None:
            env.pop(var, None)
        else:
            env[var] = value
    return env


def ab(args):
    """Every cell `repeats` times, ours then OpenBLAS; the ratios per cell."""
    ratios = {}
    for _ in range(args.repeats):
        for path in args.paths.split(","):
            for precision in args.precisions.split(","):
                for batch in args.batches.split(","):
                    command = [os.path.join(common.RELEASE, "autobatch-bench"), "autodiff",
                               "--threads", str(args.threads), "--batch", batch,
                               "--precision", precision]
                    report = common.run_json(command, environment(path))
                    for cell in cells(report, path, path, args.threads):
                        ours = cell["value_and_grad_steady"]
                        theirs = cell.get("openblas_gradients_per_second")
                        key = (path, cell["precision"], cell["batch"], cell["threads"],
                               cell.get("openblas_architecture"))
                        if ours and theirs:
                            ratios.setdefault(key, []).append(ours / theirs)
                            common.log(f"{key}: {ours:.0f} / {theirs:.0f} = {ours / theirs:.3f}")
    out = []
    for (path, precision, batch, threads, kernel), values in ratios.items():
        out.append({"simd_path": path, "precision": precision, "batch": batch,
                    "threads": threads, "openblas_kernel": kernel,
                    "ratio_median": statistics.median(values), "ratio_min": min(values),
                    "ratios": values})
    return {"what": "value_and_grad steady rate / OpenBLAS's two products, A/B per repeat",
            "machine": common.machine(), "cells": out}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default="avx2", help="comma-separated SIMD paths")
    parser.add_argument("--threads", type=int, default=common.cores(),
                        help="cells at one thread and (if more) at this many")
    parser.add_argument("--batches", default="256,1024")
    parser.add_argument("--precisions", default="f32,f64")
    parser.add_argument("--repeats", type=int, default=9)
    json.dump(ab(parser.parse_args()), sys.stdout, indent=1)
    print()
