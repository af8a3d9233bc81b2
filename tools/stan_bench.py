#!/usr/bin/env python3
"""Chains per second: PyStan 3 against `autobatch sample`, same models, data,
chain count and iterations.

    tools/peers/install stan numpy          # once: the pinned PyStan, in .peers/stan
    .peers/stan/bin/python tools/stan_bench.py --repeats 3

For each model of `examples/posteriordb/` (eight schools, kidiq, arK) it
builds the Stan program (compiled once, then found in httpstan's cache; the
build time is printed, not counted), then times `sample(num_chains=C,
num_warmup=W, num_samples=S)`: PyStan runs the chains in parallel processes
on every core. Each run gets a new random seed: httpstan also keeps every
fit, and answers a request it has seen (same model, data, arguments and
seed) from disk in a second or two, which is not a measurement. Next to it, it times
`autobatch sample MODEL --data data.json --chains C --warmup W --draws S
--strategy X` for each strategy asked for (one process, `--threads` the
number of cores). It prints each run's seconds, then per model and sampler
the median chains per second and its ratio to Stan's.

arK: `examples/posteriordb/arK/data.json` lays posteriordb's series `y`
(T = 200, K = 5) out as `y_now` and `y_lags`; the Stan data `y` is rebuilt
from them. Our loop form (`model_loop.ab`, a loop over the time steps and
the lags, as the Stan program is written) and the matrix form
(`model.ab`) are both timed when asked for (`--models`).
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSTERIORDB = os.path.join(ROOT, "examples", "posteriordb")

# name: (folder, our model file)
MODELS = {
    "eight_schools": ("eight_schools", "model.ab"),
    "kidiq": ("kidiq", "model.ab"),
    "arK_loop": ("arK", "model_loop.ab"),
    "arK": ("arK", "model.ab"),
}


def stan_data(folder):
    """The Stan program's data, from our `data.json`."""
    with open(os.path.join(POSTERIORDB, folder, "data.json")) as f:
        data = json.load(f)
    if folder == "arK":
        lags = data["y_lags"]
        k = len(lags[0])
        # y_lags[0][j] = y[K - 1 - j]; y_now[i] = y[K + i].
        head = list(reversed(lags[0]))
        y = head + data["y_now"]
        return {"K": k, "T": len(y), "y": y}
    return data


def time_stan(folder, args):
    import stan  # PyStan 3

    with open(os.path.join(POSTERIORDB, folder, "model.stan")) as f:
        code = f.read()
    seconds = []
    for _ in range(args.repeats):
        # httpstan keeps every fit on disk, keyed by the model, the data,
        # the arguments and the seed, and answers the same request again
        # from there in a second or two: each run takes a seed never used.
        seed = random.SystemRandom().randrange(1, 2**31)
        started = time.perf_counter()
        posterior = stan.build(code, data=stan_data(folder), random_seed=seed)
        print(
            f"  stan compile {time.perf_counter() - started:.1f} s (seed {seed})",
            flush=True,
        )
        started = time.perf_counter()
        posterior.sample(
            num_chains=args.chains,
            num_warmup=args.warmup,
            num_samples=args.draws,
        )
        seconds.append(time.perf_counter() - started)
        print(f"  stan {seconds[-1]:.2f} s", flush=True)
    return seconds


def time_autobatch(folder, model, strategy, args):
    command = [
        args.autobatch,
        "sample",
        os.path.join(POSTERIORDB, folder, model),
        "--data",
        os.path.join(POSTERIORDB, folder, "data.json"),
        "--chains",
        str(args.chains),
        "--warmup",
        str(args.warmup),
        "--draws",
        str(args.draws),
        "--strategy",
        strategy,
        "--stats",
        os.devnull,
    ]
    seconds = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        seconds.append(time.perf_counter() - started)
        print(f"  autobatch {strategy} {seconds[-1]:.2f} s", flush=True)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="eight_schools,kidiq,arK_loop")
    parser.add_argument("--strategies", default="program-counter,native")
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-stan", action="store_true")
    parser.add_argument(
        "--autobatch", default=os.path.join(ROOT, "target", "release", "autobatch")
    )
    args = parser.parse_args()
    print(
        f"{args.chains} chains, {args.warmup} + {args.draws} iterations, "
        f"{os.cpu_count()} cores, {args.repeats} repeats",
        flush=True,
    )
    rows = []
    for name in args.models.split(","):
        folder, model = MODELS[name]
        print(name, flush=True)
        medians = {}
        if not args.skip_stan:
            medians["stan"] = statistics.median(time_stan(folder, args))
        for strategy in filter(None, args.strategies.split(",")):
            medians[strategy] = statistics.median(
                time_autobatch(folder, model, strategy, args)
            )
        rows.append((name, medians))
    print()
    print("| model | sampler | median s | chains/s | x Stan |")
    print("|---|---|---|---|---|")
    for name, medians in rows:
        stan_rate = args.chains / medians["stan"] if "stan" in medians else None
        for sampler, seconds in medians.items():
            rate = args.chains / seconds
            ratio = f"{rate / stan_rate:.2f}" if stan_rate else "-"
            print(f"| {name} | {sampler} | {seconds:.2f} | {rate:.1f} | {ratio} |")
    check_dev_null()
    return 0


def check_dev_null():
    """Warns when /dev/null is no longer the null device. On the shared
    development machine, runs of PyStan (httpstan's build) left a regular
    file there; cargo then fed its contents to rustc as a program
    (trybuild's tests failed). Restore it as root with
    `rm /dev/null && mknod -m 666 /dev/null c 1 3`."""
    import stat

    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        print(
            "warning: /dev/null is not a character device any more; restore it "
            "with `rm /dev/null && mknod -m 666 /dev/null c 1 3`",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
