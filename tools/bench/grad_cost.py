#!/usr/bin/env python3
"""CPU microseconds per gradient evaluation of one NUTS chain, ours on
`native` against Stan's, on the posteriordb models that loop over their
data with scalars or small arrays.

    tools/bench/grad_cost.py [--models A,B] [--warmup W] [--draws D]
        [--stan-draws D] [--repeats N] [--autobatch PATH] [--no-stan]
        [--label TEXT] [--out FILE.json]

Each side runs one chain twice with one seed: warm-up W and 1 draw, then
warm-up W and D draws (Stan: `--stan-draws`, ten times as many by default,
as the kernel counts a process's CPU time in ticks of 10 ms and Stan's
gradients are cheap). The same seed gives both runs the same warm-up, so
the difference of the two runs is D - 1 draws of sampling alone (no
compile, no build, no start-up): its CPU seconds (user + system) over its
gradient evaluations. CPU time, not wall time, so that the figure holds
on a loaded machine; the two sides alternate, run by run.

- Ours: `autobatch sample MODEL --data DATA --chains 1 --threads 1
  --strategy native --seed S --warmup W --draws D`, the process's CPU
  seconds (`os.wait4`), the gradient evaluations of `--stats`.
- Stan: tools/peers/stan_gradients.py in .peers/stan (PyStan 3; one chain
  in httpstan's worker process, its CPU seconds read from /proc), the
  gradient evaluations the sum of `n_leapfrog__` over warm-up and draws.

Prints a table and writes JSON (default docs/results/loaded/grad_cost.json;
the per-model medians over the repeats of each side, and every run).
The sampler's own work per gradient (NUTS's tree, adaptation) is in both
sides' figures, as it is in a chain's time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import common

POSTERIORDB = os.path.join(common.ROOT, "examples", "posteriordb")
# Model folder -> its data set in examples/posteriordb/data.
MODELS = {
    "garch-garch11": "garch",
    "arma-arma11": "arma",
    "low_dim_gauss_mix-low_dim_gauss_mix": "low_dim_gauss_mix",
    "hmm_example-hmm_example": "hmm_example",
    "bball_drive_event_0-hmm_drive_0": "bball_drive_event_0",
}


def ours(binary, model, data, warmup, draws, seed):
    """CPU seconds and gradient evaluations of one chain of ours."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        command = [binary, "sample", os.path.join(POSTERIORDB, model, "model.ab"),
                   "--data", data, "--chains", "1", "--threads", "1",
                   "--strategy", "native", "--seed", str(seed), "--warmup", str(warmup),
                   "--draws", str(draws), "--output", os.path.join(tmp, "draws.csv"),
                   "--stats", stats]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
        if status != 0:
            sys.exit(f"{' '.join(command)} failed: {process.stderr.read().decode()}")
        with open(stats) as f:
            figures = json.load(f)
    gradients = figures["gradient_evaluations_warmup"] + \
        figures["gradient_evaluations_sampling"]
    return {"cpu_seconds": usage.ru_utime + usage.ru_stime, "gradients": gradients}


def stan(model, data, warmup, draws, seed):
    """CPU seconds and gradient evaluations of one chain of Stan's."""
    python = os.path.join(common.PEERS, "stan", "bin", "python")
    peer = os.path.join(common.ROOT, "tools", "peers", "stan_gradients.py")
    out = subprocess.run([python, peer, os.path.join(POSTERIORDB, model, "model.stan"),
                          data, str(warmup), str(draws), str(seed)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"stan_gradients.py failed on {model}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_gradient(short, long):
    """Microseconds per gradient of the draws the long run has beyond the short."""
    gradients = long["gradients"] - short["gradients"]
    if gradients <= 0:
        return None
    return 1e6 * (long["cpu_seconds"] - short["cpu_seconds"]) / gradients


def measure(args):
    rows, runs = [], []
    for model in args.models:
        data = os.path.join(POSTERIORDB, "data", MODELS[model] + ".json")
        sides = {"ours": lambda w, d, s, m=model, x=data: ours(args.autobatch, m, x, w, d, s)}
        if not args.no_stan:
            sides["stan"] = lambda w, d, s, m=model, x=data: stan(m, x, w, d, s)
        figures = {side: [] for side in sides}
        draws = {"ours": args.draws, "stan": args.stan_draws or 10 * args.draws}
        for repeat in range(args.repeats):
            seed = args.seed + repeat
            for side, run in sides.items():
                short = run(args.warmup, 1, seed)
                long = run(args.warmup, draws[side], seed)
                us = per_gradient(short, long)
                runs.append({"model": model, "side": side, "seed": seed, "short": short,
                             "long": long, "us_per_gradient": us})
                if us is not None:
                    figures[side].append(us)
                print(f"{model} {side} seed {seed}: {us} us per gradient", file=sys.stderr)
        row = {"model": model}
        for side, values in figures.items():
            row[f"{side}_us_per_gradient"] = statistics.median(values) if values else None
        if row.get("stan_us_per_gradient") and row.get("ours_us_per_gradient"):
            row["ours_over_stan"] = row["ours_us_per_gradient"] / row["stan_us_per_gradient"]
        rows.append(row)
    return rows, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--warmup", type=int, default=150)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--stan-draws", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--autobatch", default=os.path.join(common.RELEASE, "autobatch"))
    parser.add_argument("--no-stan", action="store_true")
    parser.add_argument("--seed", type=int, default=11,
                        help="the first repeat's seed (httpstan answers a seed it has seen from its "
                             "cache, in no CPU time: take a new one for each Stan run)")
    parser.add_argument("--label", default="", help="a note kept in the JSON")
    parser.add_argument("--out", default=os.path.join(common.ROOT, "docs", "results",
                                                      "loaded", "grad_cost.json"))
    args = parser.parse_args()
    args.models = args.models.split(",")
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    rows, runs = measure(args)
    print("| model | ours us/gradient | Stan us/gradient | ours / Stan |")
    print("|---|---:|---:|---:|")
    for row in rows:
        cells = [row.get("ours_us_per_gradient"), row.get("stan_us_per_gradient"),
                 row.get("ours_over_stan")]
        print(f"| {row['model']} | " + " | ".join(
            "–" if c is None else f"{c:.3g}" for c in cells) + " |")
    document = {"label": args.label, "commit": common.git("rev-parse", "--short=10", "HEAD"),
                "machine": common.machine(), "warmup": args.warmup, "draws": args.draws,
                "stan_draws": args.stan_draws or 10 * args.draws,
                "repeats": args.repeats, "rows": rows, "runs": runs}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
