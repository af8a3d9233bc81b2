#!/usr/bin/env python3
"""One PyStan 3 run of a posteriordb model, for `tools/bench/run stan`.

    .peers/stan/bin/python tools/peers/stan_peer.py MODEL.stan DATA.json \
        CHAINS WARMUP DRAWS PARAMETERS

Builds the program (httpstan compiles it once and caches it; the build's
seconds are reported apart), then times `sample(num_chains, num_warmup,
num_samples)` with a seed never used before (httpstan answers a request
it has seen from its cache). PyStan runs the chains in parallel processes
(on the cores taskset leaves it). Prints one JSON object:
`build_seconds`; `wall_seconds`, the `sample` call as a user waits for it
(the chains, then the draws sent from httpstan to Python and parsed);
`chain_seconds`, what Stan reports for each chain (warm-up plus sampling,
its "Elapsed Time"), so that the transfer's share is visible; and the bulk
ESS of each of PARAMETERS (comma-separated names of the program's
`parameters` block; tools/peers/ess.py).
"""
import json
import os
import random
import re
import subprocess
import sys
import time

import stan
import stan.fit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ess  # noqa: E402

ELAPSED = re.compile(r"([0-9.eE+-]+) seconds \((Warm-up|Sampling|Total)\)")


def capture_outputs():
    """Keeps the chains' raw outputs, which PyStan parses and drops: their
    logger messages carry Stan's own "Elapsed Time" of each chain."""
    captured = []
    original = stan.fit.Fit.__init__

    def init(self, stan_outputs, *args, **kwargs):
        captured[:] = list(stan_outputs)
        original(self, stan_outputs, *args, **kwargs)

    stan.fit.Fit.__init__ = init
    return captured


def patient_httpstan(seconds=3600):
    """Lifts two limits a loaded machine runs into: httpstan (run inside
    PyStan's process) gives stanc, the Stan to C++ translator it runs on
    every build, cached or not, one second; and PyStan's client session
    to httpstan has aiohttp's default of five minutes for a request, a
    build's or a `sample`'s. Both become `seconds`."""
    import functools
    import types

    import aiohttp
    import httpstan.compile
    import stan.common

    run = subprocess.run

    def patient(*args, **kwargs):
        kwargs["timeout"] = max(kwargs.get("timeout") or 0, seconds)
        return run(*args, **kwargs)

    httpstan.compile.subprocess = types.SimpleNamespace(run=patient)

    class Aiohttp:
        ClientSession = functools.partial(aiohttp.ClientSession,
                                          timeout=aiohttp.ClientTimeout(total=seconds))

        def __getattr__(self, name):
            return getattr(aiohttp, name)

    stan.common.aiohttp = Aiohttp()


def chain_seconds(outputs):
    """Per chain: {warmup, sampling} seconds from its logger messages."""
    out = []
    for output in outputs:
        times = {}
        for line in output.splitlines():
            if b'"logger"' not in line:
                continue
            for value in json.loads(line)["values"]:
                m = ELAPSED.search(str(value))
                if m:
                    times[m.group(2)] = float(m.group(1))
        out.append({"warmup": times.get("Warm-up"), "sampling": times.get("Sampling")})
    return out


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: stan_peer.py MODEL.stan DATA.json CHAINS WARMUP DRAWS PARAMETERS")
    program, data_path = sys.argv[1], sys.argv[2]
    chains, warmup, draws = (int(x) for x in sys.argv[3:6])
    parameters = sys.argv[6].split(",")
    captured = capture_outputs()
    patient_httpstan()
    with open(program) as f:
        code = f.read()
    with open(data_path) as f:
        data = json.load(f)
    seed = random.SystemRandom().randrange(1, 2**31)
    started = time.perf_counter()
    posterior = stan.build(code, data=data, random_seed=seed)
    build = time.perf_counter() - started
    started = time.perf_counter()
    fit = posterior.sample(num_chains=chains, num_warmup=warmup, num_samples=draws)
    wall = time.perf_counter() - started
    # fit[name] is (size..., draws * chains), draw d of chain c at d * chains + c.
    columns = []
    for name in parameters:
        columns.extend(fit[name].reshape(-1, draws, chains))
    per_chain = [[[column[d][c] for column in columns] for d in range(draws)]
                 for c in range(chains)]
    bulk = ess.bulk_ess(per_chain)
    print(json.dumps({"build_seconds": build, "wall_seconds": wall,
                      "chain_seconds": chain_seconds(captured), "seed": seed,
                      "min_bulk_ess": min(bulk), "bulk_ess": bulk}))


if __name__ == "__main__":
    main()
