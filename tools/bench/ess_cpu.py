#!/usr/bin/env python3
"""Min bulk ESS per CPU second, ours against Stan's, decomposed: what a
load-free comparison of the samplers can say on a busy machine.

    tools/bench/ess_cpu.py [--models A,B] [--chains 4] [--warmup 1000]
        [--draws 1000] [--seed S] [--threads 2] [--sides ours,stan]
        [--reuse EARLIER.json ...] [--autobatch PATH] [--label TEXT]
        [--out FILE.json]

The posteriors are tools/stan_bench.py's `POSTERIORS`. For each, both
sides run the same chains and iterations on `--threads` cores (taskset):

- Stan: tools/peers/stan_gradients.py (PyStan 3, posteriordb's
  `model.stan` on its data set, a seed never used before: httpstan answers
  a seed it has seen from its cache), the CPU seconds of httpstan's worker
  processes during `sample` (the build apart);
- ours: `autobatch sample` of the posterior's `model.ab` with the default
  strategy, the process's CPU seconds (`os.wait4`) less those of a run of
  no warm-up and one draw (reading, compiling: the fixed cost, reported
  apart as `fixed_cpu_seconds`).

CPU seconds are user + system, which load does not change much (wall
seconds it does). Per side: CPU microseconds per gradient (warm-up and
sampling), gradients per draw (every gradient of the run over the draws
kept: warm-up's share included), leapfrog steps per draw of sampling
alone, the adapted step size and the mean tree depth (medians over
chains), min bulk ESS (ArviZ, tools/peers/ess.py, over the Stan program's
parameters) per draw and per CPU second. Ours over Stan's min ESS per CPU
second is the product of three ratios, each in the row: ESS per draw
(ours / Stan's), gradients per draw (Stan's / ours) and CPU per gradient
(Stan's / ours).

`--sides` runs one side only (`--sides ""`: neither); `--reuse` takes the
runs of the sides not run (same chains and iterations) from earlier
outputs, so that Stan's need not be run again for each build of ours.

Prints a table and writes JSON (default docs/results/loaded/ess_cpu.json).
"""
import argparse
import csv
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

import common

sys.path.insert(0, os.path.join(common.ROOT, "tools"))
import stan_bench  # noqa: E402


def ours_process(binary, posterior, chains, warmup, draws, seed, threads, tmp):
    """CPU seconds, stats and draws file of one `autobatch sample`."""
    stats, draws_csv = os.path.join(tmp, "stats.json"), os.path.join(tmp, "draws.csv")
    command, env = common.restricted(
        [binary, "sample", posterior.path(posterior.ours), "--data",
         posterior.path(posterior.ours_data), "--chains", str(chains), "--threads",
         str(threads), "--seed", str(seed), "--warmup", str(warmup), "--draws", str(draws),
         "--output", draws_csv, "--stats", stats], threads)
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {process.stderr.read().decode()[-2000:]}")
    process.stderr.close()
    with open(stats) as f:
        figures = json.load(f)
    return usage.ru_utime + usage.ru_stime, figures, draws_csv


def per_chain_means(draws_csv, column):
    """The mean of `column` over each chain's draws."""
    values = {}
    with open(draws_csv) as f:
        for row in csv.DictReader(f):
            values.setdefault(row["chain"], []).append(float(row[column]))
    return [statistics.fmean(v) for v in values.values()]


def ours(args, posterior, seed):
    with tempfile.TemporaryDirectory() as tmp:
        fixed, _, _ = ours_process(args.autobatch, posterior, args.chains, 0, 1, seed,
                                   args.threads, tmp)
        cpu, stats, draws_csv = ours_process(args.autobatch, posterior, args.chains,
                                             args.warmup, args.draws, seed, args.threads, tmp)
        names = posterior.ours_parameters()
        ess = common.run_json([common.peer_python("numpy"),
                               os.path.join(common.ROOT, "tools/peers/ess.py"), draws_csv,
                               *([",".join(names)] if names else [])])
        depth = per_chain_means(draws_csv, "treedepth__")
        leapfrog = per_chain_means(draws_csv, "n_leapfrog__")
    return {"cpu_seconds": cpu - fixed, "fixed_cpu_seconds": fixed,
            "gradients_warmup": stats["gradient_evaluations_warmup"],
            "gradients_sampling": stats["gradient_evaluations_sampling"],
            "step_size": stats["step_size"], "mean_tree_depth": depth,
            "mean_leapfrog": leapfrog, "strategy": stats.get("strategy"),
            "divergences": stats.get("divergences"),
            "min_bulk_ess": ess["min_bulk_ess"], "bulk_ess": ess["bulk_ess"], "seed": seed}


def stan(args, posterior, seed):
    command, env = common.restricted(
        [common.peer_python("stan"), os.path.join(common.ROOT, "tools/peers/stan_gradients.py"),
         posterior.path(posterior.stan), posterior.path(posterior.data), str(args.warmup),
         str(args.draws), str(seed), str(args.chains), ",".join(posterior.parameters)],
        args.threads)
    # httpstan writes its build under the working directory.
    report = common.run_json(command, env, timeout=args.timeout, cwd="/tmp")
    report["seed"] = seed
    return report


def side_figures(run, chains, draws):
    """The decomposition's figures of one side's run."""
    gradients = run["gradients_warmup"] + run["gradients_sampling"]
    kept = chains * draws
    return {"cpu_seconds": run["cpu_seconds"],
            "us_per_gradient": 1e6 * run["cpu_seconds"] / gradients,
            "gradients_per_draw": gradients / kept,
            "warmup_share": run["gradients_warmup"] / gradients,
            "leapfrog_per_draw": statistics.median(run["mean_leapfrog"]),
            "step_size": statistics.median(run["step_size"]),
            "tree_depth": statistics.median(run["mean_tree_depth"]),
            "ess_per_draw": run["min_bulk_ess"] / kept,
            "ess_per_cpu_second": run["min_bulk_ess"] / run["cpu_seconds"]}


def row_of(name, runs, args):
    row = {"model": name}
    for side, run in runs.items():
        if "error" in run:
            row[side] = {"error": run["error"]}
        else:
            row[side] = side_figures(run, args.chains, args.draws)
    o, s = row.get("ours", {}), row.get("stan", {})
    if "ess_per_cpu_second" in o and "ess_per_cpu_second" in s:
        row["ratios"] = {"ess_per_cpu_second": o["ess_per_cpu_second"] / s["ess_per_cpu_second"],
                         "ess_per_draw": o["ess_per_draw"] / s["ess_per_draw"],
                         "gradients_per_draw": s["gradients_per_draw"] / o["gradients_per_draw"],
                         "cpu_per_gradient": s["us_per_gradient"] / o["us_per_gradient"]}
    return row


def measure(args):
    rows, runs = [], []
    earlier = {}
    for path in args.reuse:
        with open(path) as f:
            document = json.load(f)
        if (document["chains"], document["warmup"], document["draws"]) != (
                args.chains, args.warmup, args.draws):
            sys.exit(f"{path} has other chains or iterations")
        earlier.update({(run["model"], run["side"]): run for run in document["runs"]})
    for name in args.models:
        posterior = stan_bench.POSTERIORS[name]
        sides = {side: {"ours": ours, "stan": stan}[side] for side in args.sides}
        results = {side: earlier[name, side] for side in ("ours", "stan")
                   if side not in sides and (name, side) in earlier}
        for side, run in sides.items():
            seed = args.seed if side == "ours" else random.SystemRandom().randrange(1, 2**31)
            try:
                results[side] = run(args, posterior, seed)
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                results[side] = {"error": str(e)[-2000:]}
            common.log(f"{name} {side}: " + json.dumps(
                {k: v for k, v in results[side].items() if k != "bulk_ess"}))
        for side in results:
            runs.append({"model": name, "side": side, **results[side]})
        rows.append(row_of(name, results, args))
        print_row(rows[-1])
        write(args, rows, runs)


def write(args, rows, runs):
    """The JSON so far (after every posterior: a long run stopped keeps its rows)."""
    document = {"label": args.label, **common.provenance(" ".join(sys.argv)),
                "machine": common.machine(), "chains": args.chains, "warmup": args.warmup,
                "draws": args.draws, "threads": args.threads, "rows": rows, "runs": runs}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


HEADER = ("| posterior | side | CPU s | us/gradient | gradients/draw | warm-up share | "
          "leapfrog/draw | step size | tree depth | min ESS/draw | min ESS/CPU s |")


def print_row(row):
    def cell(x):
        return "–" if x is None else f"{x:.3g}"
    for side in ("ours", "stan"):
        f = row.get(side)
        if f is None:
            continue
        if "error" in f:
            print(f"| {row['model']} | {side} | failed |", flush=True)
            continue
        print(f"| {row['model']} | {side} | " + " | ".join(cell(f[k]) for k in (
            "cpu_seconds", "us_per_gradient", "gradients_per_draw", "warmup_share",
            "leapfrog_per_draw", "step_size", "tree_depth", "ess_per_draw",
            "ess_per_cpu_second")) + " |", flush=True)
    if "ratios" in row:
        r = row["ratios"]
        print(f"| {row['model']} | ours / Stan {r['ess_per_cpu_second']:.3g}x = ESS/draw "
              f"{r['ess_per_draw']:.3g} x gradients/draw {r['gradients_per_draw']:.3g} x "
              f"CPU/gradient {r['cpu_per_gradient']:.3g} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(stan_bench.POSTERIORS))
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=common.cores())
    parser.add_argument("--seed", type=int, default=1, help="ours (Stan's is new every run)")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--autobatch", default=os.path.join(common.RELEASE, "autobatch"))
    parser.add_argument("--sides", default="ours,stan")
    parser.add_argument("--reuse", action="append", default=[],
                        help="an earlier output: the runs of the sides not run (repeatable)")
    parser.add_argument("--label", default="", help="a note kept in the JSON")
    parser.add_argument("--out", default=os.path.join(common.ROOT, "docs", "results",
                                                      "loaded", "ess_cpu.json"))
    args = parser.parse_args()
    args.models = args.models.split(",")
    args.sides = [side for side in args.sides.split(",") if side]
    if not set(args.sides) <= {"ours", "stan"}:
        sys.exit("--sides: ours, stan or both")
    unknown = [m for m in args.models if m not in stan_bench.POSTERIORS]
    if unknown:
        sys.exit(f"unknown posterior(s) {', '.join(unknown)}; known: "
                 f"{', '.join(stan_bench.POSTERIORS)}")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    measure(args)


if __name__ == "__main__":
    main()
