#!/usr/bin/env python3
"""Instructions per gradient of `autobatch sample` on regressions, each
chain alone (`native`) against the chains of a thread sharing the
products with the data matrix (`native-batched`), at several chain
counts: free of the machine's load (valgrind's callgrind).

    cargo build --release -p autobatch-cli
    .peers/numpy/bin/python tools/bench/share_chains.py [--chains 4,64,256]
        [--strategies native,native-batched] [--models A,B] [--max-depth 5]
        [--out DIR]

The models:
- the posteriordb GLMs as examples/posteriordb has them (`kidiq`,
  `earnings-earn_height`, `mesquite-mesquite`, `nes1972-nes`: the linear
  predictor a sum of a coefficient times a column of the data, elementwise),
- the same posteriors with the linear predictor a product with a static
  design matrix (`kidiq-matrix`, ...: tools/bench/glm/*.ab, the matrix's
  rows (1, the predictors) written from the same data by this tool),
- `logistic`: tools/bench/logistic.ab on tools/blackjax_bench.py's data
  (X 10,000 x 100; needs numpy, hence the numpy peer's Python).

Each figure is the difference of two runs on one thread under callgrind,
of W + W iterations and of 3W + 3W (W smaller for more chains, so that a
run stays short), their instructions over their gradient evaluations: the
reading and compiling cancel out; the tree building per gradient stays
in. Both strategies run the same trajectories (the same draws, bit for
bit), so at one chain count their figures differ only by how the
gradients are computed. `--max-depth` bounds the trees of the first,
unadapted iterations. Prints a table and writes share_chains.json in
--out (default docs/results/loaded).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PDB = os.path.join(common.ROOT, "examples", "posteriordb")
GLM = os.path.join(common.ROOT, "tools", "bench", "glm")

# The posteriordb GLMs: model folder, data set, and the design matrix's
# columns after the intercept's (with the outcome) for the matrix form.
GLMS = {
    "kidiq": ("kidiq", "kidiq/data.json", "kidiq.ab", "kid_score", ["mom_iq"]),
    "earnings-earn_height": ("earnings-earn_height", "data/earnings.json", "earn_height.ab",
                             "earn", ["height"]),
    "mesquite-mesquite": ("mesquite-mesquite", "data/mesquite.json", "mesquite.ab", "weight",
                          ["diam1", "diam2", "canopy_height", "total_height", "density",
                           "group"]),
    "nes1972-nes": ("nes1972-nes", "data/nes1972.json", "nes.ab", "partyid7",
                    ["real_ideo", "race_adj", "age30_44", "age45_64", "age65up", "educ1",
                     "gender", "income"]),
}
# The nes models' age indicators (Stan's transformed data).
AGE_LEVELS = {"age30_44": 2, "age45_64": 3, "age65up": 4}


def design_data(data_path, outcome, columns):
    """The data of a matrix form: the outcome and X, rows (1, columns)."""
    with open(data_path) as f:
        data = json.load(f)
    for name, level in AGE_LEVELS.items():
        if name in columns:
            data[name] = [1.0 if a == level else 0.0 for a in data["age_discrete"]]
    rows = zip(*(data[c] for c in columns))
    return {outcome: data[outcome], "X": [[1.0, *row] for row in rows]}


def models(tmp):
    """Every model by name: its program and its data file."""
    found = {}
    for name, (folder, data, matrix_form, outcome, columns) in GLMS.items():
        data_path = os.path.join(PDB, data)
        found[name] = (os.path.join(PDB, folder, "model.ab"), data_path)
        matrix_data = os.path.join(tmp, f"{name}-matrix.json")
        with open(matrix_data, "w") as f:
            json.dump(design_data(data_path, outcome, columns), f)
        found[f"{name}-matrix"] = (os.path.join(GLM, matrix_form), matrix_data)
    return found


def logistic(tmp):
    """tools/bench/logistic.ab and its data, written by blackjax_bench's generator."""
    sys.path.insert(0, os.path.join(common.ROOT, "tools"))
    import blackjax_bench  # noqa: E402 (needs numpy)

    path = os.path.join(tmp, "logistic.json")
    xs, ys = blackjax_bench.logistic_data(10_000, 100)
    blackjax_bench.write_data(xs, ys, path)
    return os.path.join(common.ROOT, "tools", "bench", "logistic.ab"), path


def sample(model, data, chains, iterations, strategy, max_depth, tmp):
    """One `autobatch sample` under callgrind: its instructions, gradient
    evaluations and the strategy that ran."""
    stats_json = os.path.join(tmp, "stats.json")
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
               os.path.join(common.RELEASE, "autobatch"), "sample", model, "--data", data,
               "--chains", str(chains), "--warmup", str(iterations), "--draws",
               str(iterations), "--seed", "1", "--threads", "1", "--max-depth",
               str(max_depth), "--strategy", strategy, "--output",
               os.path.join(tmp, "draws.csv"), "--stats", stats_json]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
    with open(stats_json) as f:
        stats = json.load(f)
    return {
        "instructions": int(re.search(r"Collected : (\d+)", done.stderr).group(1)),
        "gradient_evaluations": stats["gradient_evaluations_warmup"]
        + stats["gradient_evaluations_sampling"],
        "strategy": stats["strategy"],
    }


def per_gradient(model, data, chains, strategy, max_depth, tmp):
    """Instructions per gradient: the difference of two run lengths."""
    iterations = max(2, 40 // chains)
    short, long = (sample(model, data, chains, iterations * k, strategy, max_depth, tmp)
                   for k in (1, 3))
    return {
        "iterations": [iterations, 3 * iterations],
        "runs": [short, long],
        "instructions_per_gradient": (long["instructions"] - short["instructions"])
        / (long["gradient_evaluations"] - short["gradient_evaluations"]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", default="4,64,256")
    parser.add_argument("--strategies", default="native,native-batched")
    parser.add_argument("--models", default=None,
                        help="comma-separated names (default: every GLM, both forms, "
                             "and logistic)")
    parser.add_argument("--max-depth", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(common.ROOT, "docs", "results",
                                                      "loaded"))
    args = parser.parse_args()
    chain_counts = [int(c) for c in args.chains.split(",")]
    strategies = args.strategies.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        found = models(tmp)
        names = args.models.split(",") if args.models else [*found, "logistic"]
        for name in names:
            model, data = logistic(tmp) if name == "logistic" else found[name]
            for chains in chain_counts:
                row = {"model": name, "chains": chains}
                for strategy in strategies:
                    row[strategy] = per_gradient(model, data, chains, strategy,
                                                 args.max_depth, tmp)
                    common.log(f"{name} {chains} chains {strategy}: "
                               f"{row[strategy]['instructions_per_gradient']:.0f} "
                               "instructions per gradient")
                rows.append(row)
    header = "".join(f"{s:>16}" for s in strategies)
    print(f"{'model':<30}{'chains':>7}{header}")
    for row in rows:
        cells = "".join(f"{row[s]['instructions_per_gradient']:>16.0f}" for s in strategies)
        print(f"{row['model']:<30}{row['chains']:>7}{cells}")
    document = {
        "what": "instructions per gradient evaluation of autobatch sample under callgrind, "
                "one thread (difference of two run lengths), per strategy and chain count",
        "machine": common.machine(),
        "provenance": common.provenance(" ".join(sys.argv)),
        "settings": {"max_depth": args.max_depth, "threads": 1, "seed": 1},
        "rows": rows,
    }
    common.write_result(args.out, "share_chains", document)


if __name__ == "__main__":
    main()
