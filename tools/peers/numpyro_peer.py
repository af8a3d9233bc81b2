#!/usr/bin/env python3
"""One NumPyro NUTS run of a posteriordb model, for `tools/bench/run ess`.

    .peers/jax/bin/python tools/peers/numpyro_peer.py MODEL DATA.json REFERENCE.json \
        CHAINS WARMUP DRAWS PARAMETERS [--fixed]

MODEL names a model of tools/peers/numpyro_models.py, DATA.json is
posteriordb's data set, REFERENCE.json a `reference_posterior.json` of
examples/posteriordb. `MCMC(NUTS(model), chain_method="vectorized")`,
float64, the chains starting uniform in (-2, 2) on the unconstrained space
as Stan's do, Stan's windowed adaptation with a diagonal metric.

It runs twice with new keys and one MCMC object. The first run compiles
(`first_seconds`); its draws are checked against the reference posterior
before anything is timed: every parameter (and transformed parameter)
that both name, its mean within 0.1 reference sd + 3 MCSE of the
reference mean (the check of tools/posteriordb_check). A model that fails
prints the failures and exits 1. The second run is the measurement
(`seconds`). NumPyro's `run` traces and lowers its sampler again on every
call; with `--fixed`, `fixed_seconds` is the second of two runs of one
warm-up iteration and one draw, that cost alone. Prints one JSON object
with the leapfrog steps of the sampling phase summed over chains, and the
bulk ESS of each coordinate of PARAMETERS (comma-separated sample sites,
Stan's `parameters` block; tools/peers/ess.py), constrained as Stan
reports them.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ess  # noqa: E402


def stan_columns(name, values):
    """{Stan name: (chains, draws)} of a site's draws (chains, draws,
    *shape): `beta[2]` is beta's second element, indices in row-major
    order as Stan's arrays."""
    import numpy as np

    values = np.asarray(values)
    shape = values.shape[2:]
    if not shape:
        return {name: values}
    out = {}
    for index in np.ndindex(*shape):
        label = ",".join(str(i + 1) for i in index)
        out[f"{name}[{label}]"] = values[(slice(None), slice(None), *index)]
    return out


def check_means(columns, reference):
    """Each quantity both `columns` ({Stan name: (chains, draws)}) and
    `reference` (reference_posterior.json's `parameters`) name: its mean's
    distance from the reference mean over 0.1 reference sd + 3 MCSE (at
    most 1 passes; the MCSE from ArviZ's ESS of the mean)."""
    import arviz
    import numpy as np

    out = []
    for entry in reference:
        if entry["name"] not in columns:
            continue
        draws = np.asarray(columns[entry["name"]], dtype=np.float64)
        mcse = draws.std(ddof=1) / np.sqrt(float(arviz.ess(draws, method="mean")))
        bound = 0.1 * entry["sd"] + 3.0 * mcse
        out.append({"name": entry["name"], "mean": float(draws.mean()),
                    "reference_mean": entry["mean"],
                    "error": float(abs(draws.mean() - entry["mean"]) / bound)})
    return out


def sampler(model, chains, warmup, draws):
    """A function of a seed that runs NumPyro's NUTS once: (seconds,
    {site: draws (chains, draws, ...)}, leapfrog steps). One MCMC object,
    so a second call reuses what the first compiled."""
    import jax
    import numpy as np
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(model), num_warmup=warmup, num_samples=draws, num_chains=chains,
                chain_method="vectorized", progress_bar=False)

    def sample(seed):
        started = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(seed), extra_fields=("num_steps",))
        jax.block_until_ready(mcmc.get_samples())
        seconds = time.perf_counter() - started
        samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
        steps = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
        return seconds, samples, steps

    return sample


def main():
    args = [a for a in sys.argv[1:] if a != "--fixed"]
    if len(args) != 7:
        sys.exit("usage: numpyro_peer.py MODEL DATA.json REFERENCE.json CHAINS WARMUP DRAWS "
                 "PARAMETERS [--fixed]")
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import numpyro_models

    name, data_path, reference_path = args[:3]
    chains, warmup, draws = (int(x) for x in args[3:6])
    parameters = args[6].split(",")
    with open(data_path) as f:
        model = numpyro_models.MODELS[name](json.load(f))
    with open(reference_path) as f:
        reference = json.load(f)["parameters"]
    sample = sampler(model, chains, warmup, draws)
    first, samples, _ = sample(1)
    columns = {}
    for site, values in samples.items():
        columns.update(stan_columns(site, values))
    check = check_means(columns, reference)
    failed = [c for c in check if not c["error"] <= 1.0]
    if not check or failed:
        sys.exit(f"{name}: the NumPyro model does not match the reference posterior: "
                 + json.dumps(failed or "no quantity in common"))
    seconds, samples, steps = sample(2)
    coordinates = np.concatenate([samples[p].reshape(chains, draws, -1) for p in parameters],
                                 axis=2)
    bulk = ess.bulk_ess(coordinates)
    report = {"model": name, "first_seconds": first, "seconds": seconds,
              "gradient_evaluations_sampling": steps, "reference_check_worst":
              max(c["error"] for c in check), "reference_checked": len(check),
              "min_bulk_ess": min(bulk), "bulk_ess": bulk}
    if "--fixed" in sys.argv[1:]:
        short = sampler(model, chains, 1, 1)
        short(3)
        report["fixed_seconds"] = short(4)[0]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
