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
(program-counter and local-static) right after, in the same run.

Prints one JSON document: for each number of chains, blackjax's and
autobatch's gradients per second over warmup and sampling, and the ratio.

    .peers/jax/bin/python tools/blackjax_bench.py --chains 64 1024 \
        --warmup 20 --draws 20 --bench target/release/autobatch-bench
"""

import argparse
import json
import math
import os
import subprocess
import sys
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
    began = time.perf_counter()
    states, parameters, warm_steps = warm_compiled(warm_keys, positions)
    jax.block_until_ready(states)
    warm_seconds = time.perf_counter() - began

    def step_one(k, state, params):
        return blackjax.nuts(logdensity, **params).step(k, state)

    step = jax.jit(jax.vmap(step_one))
    keys = jax.random.split(sample_key, draws * chains).reshape(draws, chains, 2)
    step_compiled = step.lower(keys[0], states, parameters).compile()
    sample_steps = 0
    began = time.perf_counter()
    for t in range(draws):
        states, info = step_compiled(keys[t], states, parameters)
        sample_steps = sample_steps + jnp.sum(info.num_integration_steps)
    jax.block_until_ready(states)
    sample_seconds = time.perf_counter() - began
    gradients = int(jnp.sum(warm_steps)) + int(sample_steps)
    seconds = warm_seconds + sample_seconds
    return {
        "warmup_seconds": warm_seconds,
        "sampling_seconds": sample_seconds,
        "gradient_evaluations": gradients,
        "gradients_per_second": gradients / seconds,
    }


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
    args = parser.parse_args()
    if not args.skip_autobatch and not os.path.exists(args.bench):
        sys.exit(f"error: {args.bench} not found (cargo build --release -p autobatch-bench)")
    xs, ys = logistic_data(args.n, args.d)
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


if __name__ == "__main__":
    main()
