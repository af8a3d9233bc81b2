#!/usr/bin/env python3
"""Copy posteriordb posteriors into examples/posteriordb: the Stan model, the
data set and the reference summaries of each.

For each posterior NAME (posteriordb's name, e.g. `earnings-earn_height`):

    examples/posteriordb/NAME/model.stan                 the Stan program
    examples/posteriordb/NAME/reference_posterior.json   mean, sd and
        5/25/50/75/95% quantiles of every quantity in posteriordb's reference
        draws (parameters, transformed parameters and generated quantities,
        under Stan's names, 1-based), the spread of its sd over the reference's
        chains, with the reference's own ESS and R-hat and how it was made
    examples/posteriordb/data/DATA.json                  the data set (Stan JSON),
        shared by the posteriors that use it

It reads a clone of github.com/stan-dev/posteriordb (a working tree or a bare
repository: files are read with `git show`), BSD-3-Clause licence (see
examples/posteriordb/README.md). It needs numpy.

    python3 tools/posteriordb_import.py --posteriordb PATH [NAME ...]
    python3 tools/posteriordb_import.py --posteriordb PATH --all
    python3 tools/posteriordb_import.py --posteriordb PATH --list

Without NAME (and without --all) it refreshes the posteriors already in
examples/posteriordb.
"""
import argparse
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(ROOT, "examples", "posteriordb")
DB = "posterior_database"
DRAWS = f"{DB}/reference_posteriors/draws/draws"
INFO = f"{DB}/reference_posteriors/draws/info"
STATISTICS = f"{DB}/reference_posteriors/summary_statistics"


class Repo:
    """posteriordb's files at one commit, read with `git show`."""

    def __init__(self, path):
        self.path = path
        self.commit = self.git("rev-parse", "HEAD").decode().strip()

    def git(self, *args):
        return subprocess.run(["git", "-C", self.path, *args], check=True,
                              capture_output=True).stdout

    def read(self, path):
        return self.git("show", f"{self.commit}:{path}")

    def json(self, path):
        return json.loads(self.read(path))

    def zipped_json(self, path):
        with zipfile.ZipFile(io.BytesIO(self.read(path))) as z:
            return json.loads(z.read(z.namelist()[0]))

    def has(self, path):
        """Whether the file's content is in the clone (a snapshot may list a
        large file without holding it)."""
        return subprocess.run(["git", "-C", self.path, "cat-file", "-e", f"{self.commit}:{path}"],
                              capture_output=True).returncode == 0

    def reference_posteriors(self):
        names = self.git("ls-tree", "--name-only", self.commit, f"{DRAWS}/").decode().split()
        return sorted(os.path.basename(n)[: -len(".json.zip")] for n in names)


QUANTILES = [0.05, 0.25, 0.5, 0.75, 0.95]


def summaries(chains, names):
    """Per quantity, over every chain's draws pooled: the mean, the sd
    (ddof 1) and the 5/25/50/75/95% quantiles (NumPy's linear
    interpolation); and the spread of the chains' sds (their sd over their
    mean), which tells whether the sd is a stable figure at all."""
    out = []
    for name in names:
        per_chain = [np.asarray(c[name], dtype=float) for c in chains]
        x = np.concatenate(per_chain)
        chain_sds = np.array([c.std(ddof=1) for c in per_chain])
        spread = chain_sds.std(ddof=1) / chain_sds.mean() if chain_sds.mean() > 0 else 0.0
        out.append({
            "name": name,
            "mean": float(x.mean()),
            "sd": float(x.std(ddof=1)),
            "quantiles": [float(v) for v in np.quantile(x, QUANTILES)],
            "chain_sd_spread": float(spread),
        })
    return out


def summaries_from_statistics(repo, name, names, draws):
    """Mean and sd (ddof 1) per quantity from posteriordb's own summary
    statistics of the reference draws (their mean and mean of squares), for
    a posterior whose draws file is not in the clone."""
    mean = repo.json(f"{STATISTICS}/mean_value/mean_value/{name}.json")
    square = repo.json(f"{STATISTICS}/mean_squared_value/mean_squared_value/{name}.json")
    means = dict(zip(mean["names"], mean["mean_value"]))
    squares = dict(zip(square["names"], square["mean_squared_value"]))
    missing = [n for n in names if n not in means or n not in squares]
    if missing:
        raise ValueError(f"{name}: the summary statistics lack {', '.join(missing)}")
    out = []
    for n in names:
        m = means[n]
        variance = (squares[n] - m * m) * draws / (draws - 1)
        out.append({"name": n, "mean": float(m), "sd": float(np.sqrt(max(variance, 0.0)))})
    return out


def import_posterior(repo, name):
    posterior = repo.json(f"{DB}/posteriors/{name}.json")
    model, data = posterior["model_name"], posterior["data_name"]
    info = repo.json(f"{INFO}/{name}.info.json")
    diag = info["diagnostics"]
    names = diag["diagnostic_information"]["names"]
    draws_file = f"{DRAWS}/{name}.json.zip"
    if repo.has(draws_file):
        chains = repo.zipped_json(draws_file)
        params = summaries(chains, names)
        draws = sum(len(c[names[0]]) for c in chains)
        source = draws_file
        how = ("mean, sd (ddof 1) and quantiles (linear interpolation) of every chain's "
               "draws pooled; chain_sd_spread: the sd of the chains' sds over their mean")
    else:
        draws = diag["ndraws"]
        params = summaries_from_statistics(repo, name, names, draws)
        source = f"{STATISTICS}/mean_value and mean_squared_value ({draws_file} is not in the clone)"
        how = ("mean, and sd (ddof 1) from the mean of squares, as posteriordb's summary "
               "statistics of the reference draws give them (about 9 significant digits)")
    for p, ess, rhat in zip(params, diag["effective_sample_size_bulk"], diag["r_hat"]):
        p["reference_ess_bulk"] = ess
        p["reference_r_hat"] = rhat
    reference = {
        "posterior": name,
        "model": model,
        "data": f"../data/{data}.json",
        "dimensions": posterior.get("dimensions", {}),
        "source": f"github.com/stan-dev/posteriordb at {repo.commit}, {source} (BSD-3-Clause)",
        "reference_method": info["inference"],
        "draws": draws,
        "summaries": f"{how}; reference_ess_bulk and reference_r_hat from posteriordb's info",
        **({"quantile_probabilities": QUANTILES} if "quantiles" in params[0] else {}),
        "parameters": params,
    }
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "model.stan"), "wb") as f:
        f.write(repo.read(f"{DB}/models/stan/{model}.stan"))
    with open(os.path.join(directory, "reference_posterior.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    os.makedirs(os.path.join(OUT, "data"), exist_ok=True)
    with open(os.path.join(OUT, "data", f"{data}.json"), "w") as f:
        json.dump(repo.zipped_json(f"{DB}/data/data/{data}.json.zip"), f)
        f.write("\n")
    print(f"{name}: {len(params)} quantities, data {data}")


def imported():
    if not os.path.isdir(OUT):
        return []
    return sorted(n for n in os.listdir(OUT)
                  if os.path.isfile(os.path.join(OUT, n, "reference_posterior.json")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posteriordb", required=True,
                        help="a clone of github.com/stan-dev/posteriordb")
    parser.add_argument("--all", action="store_true", help="every reference posterior")
    parser.add_argument("--list", action="store_true", help="list the reference posteriors")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    repo = Repo(args.posteriordb)
    available = repo.reference_posteriors()
    if args.list:
        print("\n".join(available))
        return 0
    names = available if args.all else (args.names or imported())
    unknown = [n for n in names if n not in available]
    if unknown:
        sys.exit(f"error: not a posteriordb reference posterior: {', '.join(unknown)} "
                 f"(--list shows the {len(available)})")
    missing = []
    for name in names:
        try:
            import_posterior(repo, name)
        except subprocess.CalledProcessError as e:
            missing.append(name)
            print(f"{name}: skipped, a file is missing from this clone "
                  f"({e.stderr.decode().strip()})", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
