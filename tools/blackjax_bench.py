#!/usr/bin/env python3
"""NUTS on Bayesian logistic regression: blackjax against autobatch, same run.

The data is the one of `autobatch-bench nuts logistic` (N = 10,000 points,
D = 100 regressors, X standard normal, coefficients normal with scale
1/sqrt(D), y Bernoulli of the logistic of X beta), regenerated here with the
same splitmix64 and Box-Muller stream (`crates/bench/src/nuts.rs`,
`logistic_data`), and the same model:
log p(theta) = y.z - sum(softplus(z)) - theta.theta / 2, z = X theta.

blackjax (jax with x64): warmup is `window_adaptation` (per chain, as Stan
and autobatch's default) run under `jit(vmap(...))` over the chains; sampling
calls `jit(vmap(nuts.step))` once per draw. Compilation is excluded (each
function is lowered and compiled before it is timed). Gradient evaluations
are the leapfrog steps the chains used (`num_integration_steps`, summed), as
autobatch counts them; vmap makes every chain wait for the longest tree of
the batch, which this count does not include.

autobatch: `autobatch-bench nuts logistic --chains C --warmup W --draws D`
(program-counter and local-static) right after, in the same run. With
`--cli target/release/autobatch`, also `autobatch sample
tools/bench/logistic.ab` on the same data (the model above, through the
command line a user runs, default settings) with each strategy of
`--strategies` (`auto`, the default), interleaved with blackjax: each
repeat runs blackjax then each strategy. Besides wall seconds, each side's
CPU seconds (the blackjax process's own, `time.process_time`, over the
timed calls; the `sample` process's, from `getrusage` of the child, its
reading and compiling included) and the useful gradients per CPU second,
which a machine shared with other work measures more fairly than wall
seconds; and min-ESS (the least bulk ESS over the coefficients, arviz for
blackjax, `--stats`' summary for autobatch) per second.

Prints one JSON document: for each number of chains, blackjax's and
autobatch's gradients per second over warmup and sampling, and the ratio.

    .peers/jax/bin/python tools/blackjax_bench.py --chains 64 1024 \
        --warmup 20 --draws 20 --bench target/release/autobatch-bench
    .peers/jax/bin/python tools/blackjax_bench.py --chains 64 --skip-autobatch \
        --cli target/release/autobatch --strategies auto program-counter --repeats 2
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

MASK = (1 << 64) - 1


class DataRng:
    """splitmix64, uniform in (0, 1) and Box-Muller, as nuts.rs's DataRng."""

    def __init__(self, seed):
        self.state = seed

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self):
        return ((self.next_u64() >> 11) + 0.5) / float(1 << 53)

    def normal(self):
        u, v = self.uniform(), self.uniform()
        return math.sqrt(-2.0 * math.log(u)) * math.cos(2.0 * math.pi * v)


def logistic_data(n, d):
    rng = DataRng(20_190_000)
    beta = [rng.normal() / math.sqrt(d) for _ in range(d)]
    xs = np.empty((n, d))
    ys = np.empty(n)
    for i in range(n):
        row = [rng.normal() for _ in range(d)]
        z = sum(a * b for a, b in zip(row, beta))
        p = 1.0 / (1.0 + math.exp(-z))
        ys[i] = 1.0 if rng.uniform() < p else 0.0
        xs[i] = row
    return xs, ys


def blackjax_run(xs, ys, chains, warmup, draws, seed):
    import jax
    import jax.numpy as jnp
    import blackjax

    jax.config.update("jax_enable_x64", True)
    X = jnp.asarray(xs)
    y = jnp.asarray(ys)

    def logdensity(theta):
        z = X @ theta
        return y @ z - jnp.sum(jax.nn.softplus(z)) - 0.5 * theta @ theta

    key = jax.random.PRNGKey(seed)
    init_key, warm_key, sample_key = jax.random.split(key, 3)
    positions = 0.1 * jax.random.normal(init_key, (chains, xs.shape[1]), dtype=jnp.float64)
    adaptation = blackjax.window_adaptation(blackjax.nuts, logdensity)

    def warm_one(k, position):
        (state, parameters), info = adaptation.run(k, position, num_steps=warmup)
        return state, parameters, jnp.sum(info.info.num_integration_steps)

    warm = jax.jit(jax.vmap(warm_one))
    warm_keys = jax.random.split(warm_key, chains)
    warm_compiled = warm.lower(warm_keys, positions).compile()
    began, cpu_began = time.perf_counter(), time.process_time()
    states, parameters, warm_steps = warm_compiled(warm_keys, positions)
    jax.block_until_ready(states)
    warm_seconds = time.perf_counter() - began
    warm_cpu = time.process_time() - cpu_began

    def step_one(k, state, params):
        return blackjax.nuts(logdensity, **params).step(k, state)

    step = jax.jit(jax.vmap(step_one))
    keys = jax.random.split(sample_key, draws * chains).reshape(draws, chains, 2)
    step_compiled = step.lower(keys[0], states, parameters).compile()
    sample_steps = 0
    positions = []
    began, cpu_began = time.perf_counter(), time.process_time()
    for t in range(draws):
        states, info = step_compiled(keys[t], states, parameters)
        sample_steps = sample_steps + jnp.sum(info.num_integration_steps)
        positions.append(states.position)
    jax.block_until_ready(states)
    sample_seconds = time.perf_counter() - began
    cpu_seconds = warm_cpu + time.process_time() - cpu_began
    gradients = int(jnp.sum(warm_steps)) + int(sample_steps)
    seconds = warm_seconds + sample_seconds
    return {
        "warmup_seconds": warm_seconds,
        "sampling_seconds": sample_seconds,
        "cpu_seconds": cpu_seconds,
        "gradient_evaluations": gradients,
        "gradients_per_second": gradients / seconds,
        "gradients_per_cpu_second": gradients / cpu_seconds,
        "min_ess_bulk": min_ess(np.asarray(jnp.stack(positions, axis=1))),
    }


def min_ess(draws):
    """The least bulk ESS over the coefficients of draws (chain, draw, d)."""
    import arviz

    ess = arviz.ess(arviz.convert_to_dataset({"theta": draws}), method="bulk")
    return float(ess["theta"].min())


def cli_run(cli, data_path, chains, warmup, draws, strategy, seed, precision):
    """`autobatch sample tools/bench/logistic.ab` (logistic_f32.ab for
    `precision` f32) with `strategy`: its gradients per wall and per CPU
    second, and min-ESS."""
    name = "logistic.ab" if precision == "f64" else "logistic_f32.ab"
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench", name)
    with tempfile.TemporaryDirectory() as tmp:
        stats_path = os.path.join(tmp, "stats.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run(
            [cli, "sample", program, "--data", data_path, "--chains", str(chains),
             "--warmup", str(warmup), "--draws", str(draws), "--seed", str(seed),
             "--strategy", strategy, "--output", os.path.join(tmp, "draws.csv"),
             "--stats", stats_path],
            check=True, capture_output=True, text=True,
        )
        process_seconds = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(stats_path) as f:
            stats = json.load(f)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    gradients = stats["gradient_evaluations_warmup"] + stats["gradient_evaluations_sampling"]
    seconds = stats["warmup_seconds"] + stats["sampling_seconds"]
    ran = stats.get(stats["strategy"], {})
    return {
        "ran": stats["strategy"],
        "reason": stats.get("strategy_reason"),
        "seconds": seconds,
        "process_seconds": process_seconds,
        "cpu_seconds": cpu,
        "gradient_evaluations": gradients,
        "gradients_per_second": gradients / seconds,
        "gradients_per_cpu_second": gradients / cpu,
        "min_ess_bulk": min_finite(p["ess_bulk"] for p in stats["summary"]),
        "batched_products": ran.get("batched_products"),
        "batched_waits": ran.get("batched_waits"),
    }


def min_finite(values):
    """The least finite value (`--stats` writes an undefined ESS, of too few
    draws, as NaN), or NaN when none is."""
    finite = [float(v) for v in values if math.isfinite(float(v))]
    return min(finite) if finite else float("nan")


def write_data(xs, ys, path):
    with open(path, "w") as f:
        json.dump({"X": xs.tolist(), "y": ys.tolist()}, f)


def autobatch_run(bench, chains, warmup, draws):
    out = subprocess.run(
        [bench, "nuts", "logistic", "--chains", str(chains), "--warmup", str(warmup),
         "--draws", str(draws)],
        check=True, capture_output=True, text=True,
    )
    rows = json.loads(out.stdout)["logistic"]["results"]
    return {
        r["strategy"]: {
            "gradient_evaluations": r["gradient_evaluations"],
            "seconds": r["seconds"],
            "gradients_per_second": r["nuts_gradients_per_second"],
        }
        for r in rows
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--bench", default="target/release/autobatch-bench")
    parser.add_argument("--skip-autobatch", action="store_true")
    parser.add_argument("--cli", help="the autobatch binary: also run `autobatch sample`")
    parser.add_argument("--strategies", nargs="+", default=["auto"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--precisions", nargs="+", default=["f64"], choices=["f64", "f32"],
                        help="the model's precision under --cli (blackjax: f64)")
    args = parser.parse_args()
    if not args.skip_autobatch and not os.path.exists(args.bench):
        sys.exit(f"error: {args.bench} not found (cargo build --release -p autobatch-bench)")
    xs, ys = logistic_data(args.n, args.d)
    if args.cli:
        return compare_cli(args, xs, ys)
    results = []
    for chains in args.chains:
        row = {"chains": chains, "warmup": args.warmup, "draws": args.draws}
        row["blackjax"] = blackjax_run(xs, ys, chains, args.warmup, args.draws, args.seed)
        if not args.skip_autobatch:
            ours = autobatch_run(args.bench, chains, args.warmup, args.draws)
            row["autobatch"] = ours
            theirs = row["blackjax"]["gradients_per_second"]
            row["autobatch_over_blackjax"] = {
                s: v["gradients_per_second"] / theirs for s, v in ours.items()
            }
        print(json.dumps(row), file=sys.stderr)
        results.append(row)
    import jax
    print(json.dumps({
        "n": args.n, "d": args.d, "jax": jax.__version__,
        "threads": os.cpu_count(), "results": results,
    }, indent=2))


def compare_cli(args, xs, ys):
    """blackjax and `autobatch sample` interleaved, `--repeats` times."""
    import jax

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data_path = os.path.join(tmp, "logistic.json")
        write_data(xs, ys, data_path)
        for chains in args.chains:
            for repeat in range(args.repeats):
                row = {"chains": chains, "warmup": args.warmup, "draws": args.draws,
                       "repeat": repeat}
                row["blackjax"] = blackjax_run(xs, ys, chains, args.warmup, args.draws,
                                               args.seed + repeat)
                theirs = row["blackjax"]
                row["autobatch"] = {}
                for strategy, precision in [(s, p) for p in args.precisions
                                            for s in args.strategies]:
                    ours = cli_run(args.cli, data_path, chains, args.warmup, args.draws,
                                   strategy, args.seed + repeat, precision)
                    for key in ("gradients_per_second", "gradients_per_cpu_second"):
                        ours[key.replace("gradients", "over_blackjax")] = ours[key] / theirs[key]
                    ours["min_ess_per_cpu_second"] = ours["min_ess_bulk"] / ours["cpu_seconds"]
                    label = strategy if precision == "f64" else f"{strategy} {precision}"
                    row["autobatch"][label] = ours
                theirs["min_ess_per_cpu_second"] = theirs["min_ess_bulk"] / theirs["cpu_seconds"]
                print(json.dumps(row), file=sys.stderr)
                rows.append(row)
    print(json.dumps({
        "n": args.n, "d": args.d, "jax": jax.__version__, "cpu": cpu_model(),
        "threads": os.cpu_count(), "loaded": os.getloadavg(), "results": rows,
    }, indent=2))


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


if __name__ == "__main__":
    main()
