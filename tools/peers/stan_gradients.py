#!/usr/bin/env python3
"""CPU seconds, gradient evaluations and the sampler's figures of PyStan 3
chains, for `tools/bench/grad_cost.py` and `tools/bench/ess_cpu.py`.

    .peers/stan/bin/python tools/peers/stan_gradients.py MODEL.stan DATA.json \
        WARMUP DRAWS SEED [CHAINS [PARAMETERS]]

Builds the program (httpstan's cache makes a later build cheap), then runs
CHAINS chains (default 1) of `sample(num_warmup=WARMUP, num_samples=DRAWS,
save_warmup=True)` with the given seed. httpstan runs the chains in worker
processes of its own (a process pool forked from this one); the CPU seconds
(user + system) of this process's children are read from /proc before and
after `sample`, so the figure is the chains' own CPU time however loaded
the machine is, plus the workers' share of sending the draws. Prints one
JSON object:

- `cpu_seconds`: the workers' CPU seconds; `client_cpu_seconds`: this
  process's own during `sample` (receiving and parsing the draws);
- `gradients`: the sum of `n_leapfrog__` over warm-up and draws (one
  gradient per leapfrog step), and apart `gradients_warmup` and
  `gradients_sampling`;
- per chain, `step_size` (the adapted `stepsize__` of the draws) and
  `mean_tree_depth` and `mean_leapfrog` over the draws;
- with PARAMETERS (comma-separated names of the program's `parameters`),
  `bulk_ess` of each of their scalars over the draws (tools/peers/ess.py)
  and `min_bulk_ess`.
"""
import json
import os
import sys

import stan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ess  # noqa: E402
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


def own_cpu_seconds():
    times = os.times()
    return times.user + times.system


def per_chain(fit, name, warmup, draws, chains):
    """`name`'s values as (iterations, chains), warm-up first."""
    return fit[name].reshape(warmup + draws, chains)


def main():
    if len(sys.argv) not in (6, 7, 8):
        sys.exit("usage: stan_gradients.py MODEL.stan DATA.json WARMUP DRAWS SEED "
                 "[CHAINS [PARAMETERS]]")
    program, data_path = sys.argv[1], sys.argv[2]
    warmup, draws, seed = (int(x) for x in sys.argv[3:6])
    chains = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    parameters = sys.argv[7].split(",") if len(sys.argv) > 7 else []
    patient_httpstan()
    with open(program) as f:
        code = f.read()
    with open(data_path) as f:
        data = json.load(f)
    posterior = stan.build(code, data=data, random_seed=seed)
    before, own_before = children_cpu_seconds(), own_cpu_seconds()
    fit = posterior.sample(num_chains=chains, num_warmup=warmup, num_samples=draws,
                           save_warmup=True)
    after, own_after = children_cpu_seconds(), own_cpu_seconds()
    leapfrog = per_chain(fit, "n_leapfrog__", warmup, draws, chains)
    depth = per_chain(fit, "treedepth__", warmup, draws, chains)
    step = per_chain(fit, "stepsize__", warmup, draws, chains)
    report = {"cpu_seconds": after - before, "client_cpu_seconds": own_after - own_before,
              "gradients": int(leapfrog.sum()),
              "gradients_warmup": int(leapfrog[:warmup].sum()),
              "gradients_sampling": int(leapfrog[warmup:].sum()),
              "step_size": [float(s) for s in step[-1]],
              "mean_tree_depth": [float(d) for d in depth[warmup:].mean(axis=0)],
              "mean_leapfrog": [float(n) for n in leapfrog[warmup:].mean(axis=0)]}
    if parameters:
        columns = []
        for name in parameters:
            # fit[name] is (size..., iterations * chains), iteration i of
            # chain c at i * chains + c; the draws follow the warm-up.
            values = fit[name].reshape(-1, warmup + draws, chains)
            columns.extend(values[:, warmup:, :])
        bulk = ess.bulk_ess([[[column[d][c] for column in columns] for d in range(draws)]
                             for c in range(chains)])
        report.update({"bulk_ess": bulk, "min_bulk_ess": min(bulk)})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
