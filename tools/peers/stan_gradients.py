#!/usr/bin/env python3
"""CPU seconds and gradient evaluations of one PyStan 3 chain, for
`tools/bench/grad_cost.py`.

    .peers/stan/bin/python tools/peers/stan_gradients.py MODEL.stan DATA.json \
        WARMUP DRAWS SEED

Builds the program (httpstan's cache makes a later build cheap), then runs
one chain of `sample(num_warmup=WARMUP, num_samples=DRAWS, save_warmup=True)`
with the given seed. httpstan runs a chain in a worker process of its own
(a process pool forked from this one); the CPU seconds (user + system) of
this process's children are read from /proc before and after `sample`, so
the figure is the chain's own CPU time however loaded the machine is, plus
the worker's share of sending the draws. Prints one JSON object:
`cpu_seconds` and `gradients` (the sum of `n_leapfrog__` over warm-up and
draws: one gradient per leapfrog step).
"""
import json
import os
import sys

import stan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stan_peer import patient_httpstan  # noqa: E402


def children_cpu_seconds():
    """User + system CPU seconds of every live child of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, ... utime (14th field), stime (15th).
        if int(fields[1]) == me:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: stan_gradients.py MODEL.stan DATA.json WARMUP DRAWS SEED")
    program, data_path = sys.argv[1], sys.argv[2]
    warmup, draws, seed = (int(x) for x in sys.argv[3:6])
    patient_httpstan()
    with open(program) as f:
        code = f.read()
    with open(data_path) as f:
        data = json.load(f)
    posterior = stan.build(code, data=data, random_seed=seed)
    before = children_cpu_seconds()
    fit = posterior.sample(num_chains=1, num_warmup=warmup, num_samples=draws,
                           save_warmup=True)
    after = children_cpu_seconds()
    gradients = int(fit["n_leapfrog__"].sum())
    print(json.dumps({"cpu_seconds": after - before, "gradients": gradients}))


if __name__ == "__main__":
    main()
