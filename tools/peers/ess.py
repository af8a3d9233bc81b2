#!/usr/bin/env python3
"""Bulk ESS of a sampler's draws, the one estimator for every side of the
sampler comparisons: ArviZ's `ess(method="bulk")` (rank-normalized split
chains, Vehtari et al. 2021, as Stan reports it), at the version pinned in
tools/peers/*.txt. Rank-based, so the same for a parameter and its
monotone transform (Stan's sigma and our log(sigma)).

    .peers/numpy/bin/python tools/peers/ess.py DRAWS.csv [NAMES]

reads `autobatch sample --output`'s CSV (chain, draw, parameters, then
Stan's `*__` columns) and prints {"min_bulk_ess": ..., "bulk_ess": [...]},
over every parameter column, or with NAMES (comma-separated) over the
columns of those quantities only (`theta_tilde` is `theta_tilde.0`,
`theta_tilde.1`, ...: a model's transformed parameters, which the CSV
also holds, are left out).
The peers' scripts import `bulk_ess` for their own draws.
"""
import csv
import json
import sys


def bulk_ess(draws):
    """Per-parameter bulk ESS of `draws`, an array (chains, draws, parameters)."""
    import arviz
    import numpy as np

    draws = np.asarray(draws, dtype=np.float64)
    return [float(arviz.ess(np.ascontiguousarray(draws[:, :, k]), method="bulk"))
            for k in range(draws.shape[2])]


def columns(header, names=None):
    """The indices of `header`'s parameter columns, of the quantities
    `names` (None: all): not `chain`, `draw` or the sampler's `*__`."""
    return [i for i, h in enumerate(header) if h not in ("chain", "draw")
            and not h.endswith("__") and (names is None or h.split(".")[0] in names)]


def read_csv(path, names=None):
    """Our draws CSV as (chains, draws, parameters), the columns of `names`."""
    import numpy as np

    with open(path) as f:
        rows = csv.reader(f)
        params = columns(next(rows), names)
        if not params:
            sys.exit(f"{path}: no column of {', '.join(names)}")
        chains = {}
        for row in rows:
            chains.setdefault(int(row[0]), []).append([float(row[i]) for i in params])
    return np.array([chains[c] for c in sorted(chains)])


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: ess.py DRAWS.csv [NAMES]")
    names = set(sys.argv[2].split(",")) if len(sys.argv) == 3 else None
    ess = bulk_ess(read_csv(sys.argv[1], names))
    print(json.dumps({"min_bulk_ess": min(ess), "bulk_ess": ess}))


if __name__ == "__main__":
    main()
