"""`autobatch sample` against PyStan 3 on examples/posteriordb (eight
schools, kidiq, arK), the same chains, warm-up and draws, at equal threads.

Stan: tools/peers/stan_peer.py in .peers/stan; `wall_seconds` is PyStan's
`sample` call (its chains in parallel processes, then the draws sent to
Python), `chain_seconds` Stan's own time of each chain. Ours: `autobatch
sample MODEL --data DATA --chains C --warmup W --draws S --threads T
--strategy X --output draws.csv --stats stats.json`; `wall_seconds` is the
process (reading, compiling, sampling, writing), `sampler_seconds` the
sampler's own warm-up plus sampling (stats). Compile time is apart on both
sides: Stan's build (cached by httpstan after the first) and our
`compile_seconds` (native). Min bulk ESS over the parameters, one
estimator for both (tools/peers/ess.py), per second of each time.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import common

sys.path.insert(0, os.path.join(common.ROOT, "tools"))
import stan_bench  # noqa: E402

# The Stan programs' parameters (not transformed parameters): our theta's
# coordinates are these, unconstrained.
PARAMETERS = {"eight_schools": "mu,tau,theta_tilde", "kidiq": "beta,sigma",
              "arK": "alpha,beta,sigma"}


def run(args):
    if args.quick:
        models, chains, warmup, draws, repeats = ["eight_schools"], 16, 200, 200, 1
    else:
        models, chains, warmup, draws, repeats = ["eight_schools", "kidiq", "arK_loop", "arK"], \
            256, 1000, 1000, 2
    cells = []
    for name in models:
        folder, model = stan_bench.MODELS[name]
        # arK's loop form on program-counter takes hours (a scalar loop
        # interpreted step by step); native is the strategy it is for.
        strategies = ["native"] if name == "arK_loop" else ["native", "program-counter"]
        for threads in common.settings(args.threads):
            for repeat in range(repeats):
                cells.append(stan_cell(name, folder, threads, chains, warmup, draws))
                for strategy in strategies:
                    cells.append(ours_cell(
                        name, os.path.join(stan_bench.POSTERIORDB, folder, model),
                        os.path.join(stan_bench.POSTERIORDB, folder, "data.json"),
                        strategy, threads, (chains, warmup, draws)))
    return {"what": "min bulk ESS per second; seconds", "chains": chains, "warmup": warmup,
            "draws": draws, "repeats": repeats, "cells": cells}


def stan_cell(name, folder, threads, chains, warmup, draws):
    cell = {"model": name, "threads": threads, "side": "stan", "chains": chains,
            "warmup": warmup, "draws": draws}
    if name == "arK_loop":  # the same Stan program as arK
        cell["same_as"] = "arK"
        return cell
    with tempfile.NamedTemporaryFile("w", suffix=".json") as data:
        json.dump(stan_bench.stan_data(folder), data)
        data.flush()
        command, env = common.restricted(
            [common.peer_python("stan"), os.path.join(common.ROOT, "tools/peers/stan_peer.py"),
             os.path.join(stan_bench.POSTERIORDB, folder, "model.stan"), data.name,
             str(chains), str(warmup), str(draws), PARAMETERS[folder]], threads)
        # httpstan writes its build under the working directory.
        report = common.run_json(command, env, cwd=tempfile.gettempdir())
    per_chain = [c["warmup"] + c["sampling"] for c in report["chain_seconds"]
                 if c["warmup"] is not None and c["sampling"] is not None]
    cell.update({"build_seconds": report["build_seconds"], "wall_seconds": report["wall_seconds"],
                 "chain_seconds_sum": sum(per_chain), "chain_seconds_max": max(per_chain),
                 "chains_timed": len(per_chain), "min_bulk_ess": report["min_bulk_ess"]})
    common.log(f"stan {name} {threads} thread(s): {cell['wall_seconds']:.2f} s wall, "
               f"chains {cell['chain_seconds_sum']:.2f} s summed, "
               f"min bulk ESS {cell['min_bulk_ess']:.0f}")
    return cell


def ours_cell(name, model, data, strategy, threads, iterations, parameters=None,
              timeout=None):
    """`autobatch sample` of `model` on `data` at (chains, warmup, draws),
    with `strategy` (None: the default). The bulk ESS is over the draws'
    columns of `parameters` (None: every column)."""
    chains, warmup, draws = iterations
    cell = {"model": name, "threads": threads, "side": "ours", "strategy": strategy or "default",
            "chains": chains, "warmup": warmup, "draws": draws}
    with tempfile.TemporaryDirectory() as tmp:
        draws_csv, stats_json = os.path.join(tmp, "draws.csv"), os.path.join(tmp, "stats.json")
        command, env = common.restricted(
            [os.path.join(common.RELEASE, "autobatch"), "sample", model, "--data", data,
             "--chains", str(chains), "--warmup", str(warmup), "--draws", str(draws),
             *(["--strategy", strategy] if strategy else []), "--threads", str(threads),
             "--seed", str(int(time.time() * 1000) % 2**31), "--output", draws_csv,
             "--stats", stats_json], threads)
        started = time.perf_counter()
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            cell["error"] = f"not finished in {timeout} s"
            common.log(f"ours {name} {chains} chains: {cell['error']}")
            return cell
        wall = time.perf_counter() - started
        if done.returncode != 0:
            cell["error"] = done.stderr.strip()[-2000:]
            return cell
        with open(stats_json) as f:
            stats = json.load(f)
        ess = common.run_json([common.peer_python("numpy"),
                               os.path.join(common.ROOT, "tools/peers/ess.py"), draws_csv,
                               *([",".join(parameters)] if parameters else [])])
    figures = next((v for v in stats.values() if isinstance(v, dict)
                    and "compile_seconds" in v), {})
    cell.update({"wall_seconds": wall, "strategy_ran": stats.get("strategy"),
                 "sampler_seconds": stats["warmup_seconds"] + stats["sampling_seconds"],
                 "compile_seconds": figures.get("compile_seconds"),
                 "compiled": figures.get("compiled"),
                 "gradient_evaluations": stats["gradient_evaluations_warmup"]
                 + stats["gradient_evaluations_sampling"],
                 "min_bulk_ess": ess["min_bulk_ess"]})
    common.log(f"ours {cell['strategy']} {name} {chains} chains {threads} thread(s): "
               f"{wall:.2f} s wall, "
               f"min bulk ESS {cell['min_bulk_ess']:.0f}")
    return cell
