"""Effective samples per second: `autobatch sample` against PyStan 3 and
NumPyro on posteriordb posteriors across the families (GLMs, hierarchical,
GP, time series, mixture), every side on all cores.

The posteriors are tools/stan_bench.py's `POSTERIORS`. For each:

- Stan: tools/peers/stan_peer.py, posteriordb's `model.stan` on its data
  set, PyStan's chains in parallel processes on the cores; the build
  (compile, cached by httpstan after the first) apart, `sample`'s wall
  seconds, and each chain's own seconds as Stan reports them.
- NumPyro: tools/peers/numpyro_peer.py, the model of
  tools/peers/numpyro_models.py, `chain_method="vectorized"`, the same
  chains and iterations; checked against the reference posterior's means
  on its first run (which compiles, `first_seconds`), timed on a second.
- ours: `autobatch sample` of the posterior's `model.ab` with the default
  strategy (compare_stan.py's `ours_cell`), at the peers' chains and at
  `many` chains (256), the same warm-up and draws.

Every side's draws go through one estimator, ArviZ's bulk ESS
(tools/peers/ess.py), over the Stan program's parameters as each side
reports them; the table divides the smallest by the seconds.
"""
import json
import os
import sys

import common
import compare_numpyro
import compare_stan

sys.path.insert(0, os.path.join(common.ROOT, "tools"))
import stan_bench  # noqa: E402

# The peers' chain count (PyStan's default) and ours batched.
CHAINS, MANY = 4, 256


def plan(quick):
    if quick:
        # The slowest of ours (the mixture's loop over 1000 points) takes
        # minutes at 256 chains even at these iterations.
        return {"chains": CHAINS, "many": 64, "warmup": 100, "draws": 100, "repeats": 1,
                "timeout": 600, "fixed": False}
    # Ours at 256 chains runs once: on the models that loop over their data
    # (garch11, arma11, low_dim_gauss_mix) it takes tens of minutes.
    return {"chains": CHAINS, "many": MANY, "warmup": 1000, "draws": 1000, "repeats": 2,
            "timeout": 2400, "fixed": True}


def run(args):
    p = plan(args.quick)
    names = args.models.split(",") if getattr(args, "models", None) else list(
        stan_bench.POSTERIORS)
    # Both cores on every side: the all-cores setting only.
    threads = args.threads
    cells = []
    for name in names:
        posterior = stan_bench.POSTERIORS[name]
        for repeat in range(p["repeats"]):
            cells.append(stan_cell(name, posterior, threads, p))
            cells.append(numpyro_cell(name, posterior, threads, p))
            for chains in (p["chains"], p["many"]) if repeat == 0 else (p["chains"],):
                cell = compare_stan.ours_cell(
                    name, posterior.path(posterior.ours), posterior.path(posterior.ours_data),
                    None, threads, (chains, p["warmup"], p["draws"]),
                    parameters=posterior.ours_parameters(), timeout=p["timeout"])
                cell["family"] = posterior.family
                cells.append(cell)
    return {"what": "min bulk ESS per second; seconds", "chains": p["chains"],
            "many": p["many"], "warmup": p["warmup"], "draws": p["draws"],
            "repeats": p["repeats"], "threads": threads, "cells": cells}


def stan_cell(name, posterior, threads, p):
    cell = {"model": name, "family": posterior.family, "threads": threads, "side": "stan",
            "chains": p["chains"], "warmup": p["warmup"], "draws": p["draws"]}
    command, env = common.restricted(
        [common.peer_python("stan"), os.path.join(common.ROOT, "tools/peers/stan_peer.py"),
         posterior.path(posterior.stan), posterior.path(posterior.data), str(p["chains"]),
         str(p["warmup"]), str(p["draws"]), ",".join(posterior.parameters)], threads)
    try:
        # httpstan writes its build under the working directory.
        report = common.run_json(command, env, timeout=p["timeout"], cwd="/tmp")
    except (RuntimeError, OSError, ValueError) as e:
        cell["error"] = str(e)[-2000:]
        common.log(f"stan {name}: failed")
        return cell
    per_chain = [c["warmup"] + c["sampling"] for c in report["chain_seconds"]
                 if c["warmup"] is not None and c["sampling"] is not None]
    cell.update({"build_seconds": report["build_seconds"], "wall_seconds": report["wall_seconds"],
                 "chain_seconds_sum": sum(per_chain) if per_chain else None,
                 "chain_seconds_max": max(per_chain) if per_chain else None,
                 "chains_timed": len(per_chain), "min_bulk_ess": report["min_bulk_ess"]})
    common.log(f"stan {name}: {cell['wall_seconds']:.2f} s wall, "
               f"min bulk ESS {cell['min_bulk_ess']:.0f}")
    return cell


def numpyro_cell(name, posterior, threads, p):
    cell = {"model": name, "family": posterior.family, "threads": threads, "side": "numpyro",
            "chains": p["chains"], "warmup": p["warmup"], "draws": p["draws"]}
    command, env = common.restricted(
        [common.peer_python("jax"), os.path.join(common.ROOT, "tools/peers/numpyro_peer.py"),
         posterior.numpyro, posterior.path(posterior.data), posterior.path(posterior.reference),
         str(p["chains"]), str(p["warmup"]), str(p["draws"]), ",".join(posterior.parameters)]
        + (["--fixed"] if p["fixed"] else []), threads, jax=True)
    try:
        report = common.run_json(command, env, timeout=p["timeout"])
    except (RuntimeError, OSError, ValueError) as e:
        cell["error"] = str(e)[-2000:]
        common.log(f"numpyro {name}: failed")
        return cell
    cell.update({k: report[k] for k in ("first_seconds", "seconds", "min_bulk_ess",
                                        "gradient_evaluations_sampling",
                                        "reference_check_worst", "reference_checked")})
    cell.update(compare_numpyro.sampling_seconds(report))
    common.log(f"numpyro {name}: {cell['seconds']:.2f} s, min bulk ESS "
               f"{cell['min_bulk_ess']:.0f}, reference check {cell['reference_check_worst']:.2f}")
    return cell
