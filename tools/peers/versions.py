#!/usr/bin/env python3
"""Imports a peer's packages and prints their versions as one JSON object.

    .peers/NAME/bin/python tools/peers/versions.py NAME

NAME is numpy, dynet, stan or jax (the requirements files beside this
script). Exits non-zero, with the import's error, when a package does not
import: `tools/peers/install` runs it to check each environment, and
`tools/bench/run` records its output in every results file. For numpy it
also gives the BLAS that numpy loaded and the kernel OpenBLAS chose for
this CPU (threadpoolctl's `architecture`), which OPENBLAS_CORETYPE changes.
"""
import importlib.metadata
import json
import sys

# The distributions whose versions a results file records, by peer.
PACKAGES = {
    "numpy": ["numpy", "scipy", "arviz", "threadpoolctl"],
    "dynet": ["dyNET38", "numpy"],
    "stan": ["pystan", "httpstan", "arviz", "numpy"],
    "jax": ["jax", "jaxlib", "numpyro", "blackjax", "arviz", "numpy"],
}

# What each peer must import (DyNet only after dynet_config).
IMPORTS = {
    "numpy": ["numpy", "scipy", "arviz", "threadpoolctl"],
    "dynet": ["dynet_config", "dynet"],
    "stan": ["stan", "httpstan", "arviz"],
    "jax": ["jax", "numpyro", "blackjax", "arviz"],
}


def blas():
    """The BLAS numpy runs on, as threadpoolctl reads it."""
    import numpy
    import threadpoolctl

    numpy.ones((2, 2)) @ numpy.ones((2, 2))
    for pool in threadpoolctl.threadpool_info():
        if pool.get("user_api") == "blas":
            return {k: pool.get(k) for k in ("internal_api", "version", "architecture")}
    return None


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in PACKAGES:
        sys.exit(f"usage: versions.py {'|'.join(PACKAGES)}")
    name = sys.argv[1]
    if name == "dynet":
        import dynet_config

        dynet_config.set(mem="64", random_seed=1)
    for module in IMPORTS[name]:
        importlib.import_module(module)
    out = {"python": sys.version.split()[0]}
    for dist in PACKAGES[name]:
        out[dist] = importlib.metadata.version(dist)
    if name == "numpy":
        out["blas"] = blas()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
