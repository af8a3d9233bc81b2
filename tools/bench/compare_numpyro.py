"""`autobatch sample` against NumPyro and blackjax (JAX, XLA on the CPU),
at equal threads, warm on both sides.

Models: eight schools, kidiq and arK of examples/posteriordb (their
matrix-form `.ab`), and a Bayesian logistic regression (tools/bench/logistic.ab,
N x D synthetic data from tools/blackjax_bench.py's generator). The peers
run tools/peers/jax_peer.py in .peers/jax: the same log density in
jax.numpy, NumPyro's NUTS with all chains vectorized, blackjax's NUTS
under `vmap` (logistic regression only). Their time is a second run, after
one that compiled (`first_seconds` keeps it); NumPyro's `run` also traces
its sampler anew each time, a fixed cost measured apart (`fixed_seconds`,
a run of one iteration) and taken out of `sampling_seconds`. Ours: `autobatch sample`
(compare_stan.py's `ours_cell`); our `sampler_seconds` leaves out
reading and compiling likewise. At one thread JAX runs with XLA_FLAGS
"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" and
under taskset. Min bulk ESS per second by one estimator (tools/peers/ess.py).
"""
import json
import os
import sys
import tempfile

import common
import compare_stan

sys.path.insert(0, os.path.join(common.ROOT, "tools"))
import blackjax_bench  # noqa: E402

POSTERIORDB = os.path.join(common.ROOT, "examples/posteriordb")


def plan(quick):
    """Per model: (chains, warm-up, draws), and the logistic data's size."""
    if quick:
        return {"models": {"eight_schools": (16, 100, 100), "logistic": (8, 50, 50)},
                "n": 500, "d": 10, "repeats": 1}
    # The logistic regression's gradient is 100 times eight schools' work
    # per chain: fewer chains and iterations keep its cells to minutes.
    return {"models": {"eight_schools": (256, 1000, 1000), "kidiq": (256, 1000, 1000),
                       "arK": (256, 1000, 1000), "logistic": (64, 200, 200)},
            "n": 10_000, "d": 100, "repeats": 2}


def run(args):
    p = plan(args.quick)
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        logistic_data = os.path.join(tmp, "logistic.json")
        xs, ys = blackjax_bench.logistic_data(p["n"], p["d"])
        with open(logistic_data, "w") as f:
            json.dump({"X": xs.tolist(), "y": ys.tolist()}, f)
        for model, iterations in p["models"].items():
            if model == "logistic":
                program, data = os.path.join(common.ROOT, "tools/bench/logistic.ab"), logistic_data
                libraries = ["numpyro", "blackjax"]
            else:
                program = os.path.join(POSTERIORDB, model, "model.ab")
                data = os.path.join(POSTERIORDB, model, "data.json")
                libraries = ["numpyro"]
            for threads in common.settings(args.threads):
                for _ in range(p["repeats"]):
                    for library in libraries:
                        cells.append(peer_cell(library, model, data, threads, iterations))
                    for strategy in ("native", "program-counter"):
                        cells.append(compare_stan.ours_cell(model, program, data, strategy,
                                                            threads, iterations))
    return {"what": "min bulk ESS per second; seconds", "n": p["n"], "d": p["d"],
            "repeats": p["repeats"], "cells": cells}


def sampling_seconds(report):
    """NumPyro's fixed cost and its sampling alone from a peer's report run
    with `--fixed`: the second run less the fixed cost of tracing and
    lowering its sampler again (each `run` does). Measured apart, the fixed
    cost can come out near the whole run's time when the iterations are few
    or the machine noisy: then no sampling time is claimed."""
    if "fixed_seconds" not in report:
        return {}
    sampling = report["seconds"] - report["fixed_seconds"]
    return {"fixed_seconds": report["fixed_seconds"],
            "sampling_seconds": sampling if sampling > 0.1 * report["seconds"] else None}


def peer_cell(library, model, data, threads, iterations):
    chains, warmup, draws = iterations
    cell = {"model": model, "threads": threads, "side": library, "chains": chains,
            "warmup": warmup, "draws": draws}
    command, env = common.restricted(
        [common.peer_python("jax"), os.path.join(common.ROOT, "tools/peers/jax_peer.py"),
         library, model, data, str(chains), str(warmup), str(draws)], threads, jax=True)
    try:
        report = common.run_json(command, env)
    except RuntimeError as e:
        cell["error"] = str(e)
        return cell
    cell.update({k: report[k] for k in ("first_seconds", "seconds", "min_bulk_ess")})
    cell.update(sampling_seconds(report))
    cell.update({k: v for k, v in report.items() if k.startswith("gradient_evaluations")})
    common.log(f"{library} {model} {threads} thread(s): {cell['seconds']:.2f} s, "
               f"min bulk ESS {cell['min_bulk_ess']:.0f}")
    return cell
