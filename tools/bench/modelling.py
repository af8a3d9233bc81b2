#!/usr/bin/env python3
"""Models written in the modelling layer's form (`fn model` with
constrained parameters and Stan's distributions) against the same models
written by hand as a `log_density` over the unconstrained vector: eight
schools, kidiq and arK. Both run with `autobatch sample` (release build,
default strategy), the same chains, iterations, seed and threads, one
after the other in each repeat (old, new, old, new, ...), so that a
machine's load falls on both alike. Prints each pair's chains per second
(sampler time: warmup and sampling, compilation left out; and wall time)
and the ratio new / old, and writes the figures as JSON to
docs/results/loaded/modelling.json (the machine this ran on was shared
with other work: the figures are those of a loaded machine, comparable
only within one run).

    cargo build --release -p autobatch-cli
    python3 tools/bench/modelling.py [--repeats 5] [--chains 256] [--warmup 300] [--draws 300] \
        [--models "eight schools" kidiq "arK (loop form)"] [--instructions]

With --instructions it measures instead, free of the machine's load, the
instructions per gradient evaluation of each model under valgrind's
callgrind: two runs of --chains chains on one thread, of --warmup and
--draws iterations and of three times as many, the difference of their
instruction counts over the difference of their gradient evaluations (so
that compilation and start-up cancel out; what each iteration does besides
the gradient, the same for both forms but for writing the draws, stays in).
It prints the ratio hand-written / new (at least 0.9 is the target) and
writes modelling_instructions.json in --out.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PDB = os.path.join(common.ROOT, "examples", "posteriordb")

# (name, hand-written model and data, the new form's model and data).
PAIRS = [
    ("eight schools",
     ("eight_schools/model.ab", "eight_schools/data.json"),
     ("eight_schools-eight_schools_noncentered/model.ab", "data/eight_schools.json")),
    ("kidiq",
     ("kidiq/model.ab", "kidiq/data.json"),
     ("kidiq-kidscore_momiq/model.ab", "data/kidiq.json")),
    # Both written with a loop over the series, as model.stan is.
    ("arK (loop form)",
     ("arK/model_loop.ab", "arK/data.json"),
     ("arK-arK/model.ab", "arK-arK/data.json")),
]


def sample(model, data, chains, warmup, draws, seed, threads, wrapper=()):
    """One `autobatch sample` run: its sampler and wall seconds, and the
    instructions callgrind counted when run under it (`wrapper`)."""
    with tempfile.TemporaryDirectory() as tmp:
        stats_json = os.path.join(tmp, "stats.json")
        command = [*wrapper, os.path.join(common.RELEASE, "autobatch"), "sample",
                   os.path.join(PDB, model), "--data", os.path.join(PDB, data),
                   "--chains", str(chains), "--warmup", str(warmup), "--draws", str(draws),
                   "--seed", str(seed), "--threads", str(threads),
                   "--output", os.path.join(tmp, "draws.csv"), "--stats", stats_json]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
        with open(stats_json) as f:
            stats = json.load(f)
    collected = re.search(r"Collected : (\d+)", done.stderr)
    return {
        "instructions": int(collected.group(1)) if collected else None,
        "sampler_seconds": stats["warmup_seconds"] + stats["sampling_seconds"],
        "wall_seconds": wall,
        "strategy": stats.get("strategy"),
        "gradient_evaluations": stats["gradient_evaluations_warmup"]
        + stats["gradient_evaluations_sampling"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=common.cores())
    parser.add_argument("--models", nargs="*", default=[name for name, _, _ in PAIRS],
                        help="the pairs to run, by name (default: all)")
    parser.add_argument("--out", default=os.path.join(common.ROOT, "docs", "results", "loaded"))
    parser.add_argument("--instructions", action="store_true",
                        help="instructions per gradient under callgrind instead of seconds")
    args = parser.parse_args()
    if args.instructions:
        instructions(args)
        return
    settings = dict(chains=args.chains, warmup=args.warmup, draws=args.draws,
                    seed=args.seed, threads=args.threads)
    rows = []
    for name, old, new in PAIRS:
        if name not in args.models:
            continue
        runs = {"old": [], "new": []}
        for repeat in range(args.repeats):
            for side, (model, data) in (("old", old), ("new", new)):
                figures = sample(model, data, **settings)
                runs[side].append(figures)
                common.log(f"{name} {side} #{repeat}: {figures['sampler_seconds']:.2f} s "
                           f"sampler, {figures['wall_seconds']:.2f} s wall "
                           f"({figures['strategy']})")
        row = {"model": name, "old": {"model": old[0], "runs": runs["old"]},
               "new": {"model": new[0], "runs": runs["new"]}}
        for key in ("sampler_seconds", "wall_seconds"):
            old_s = common.median([r[key] for r in runs["old"]])
            new_s = common.median([r[key] for r in runs["new"]])
            row[f"old_chains_per_second_{key}"] = args.chains / old_s
            row[f"new_chains_per_second_{key}"] = args.chains / new_s
            row[f"ratio_{key}"] = old_s / new_s
        rows.append(row)
    print(f"{'model':<14} {'old chains/s':>13} {'new chains/s':>13} {'new/old':>8} "
          f"{'(wall) new/old':>15}")
    for row in rows:
        print(f"{row['model']:<14} {row['old_chains_per_second_sampler_seconds']:>13.1f} "
              f"{row['new_chains_per_second_sampler_seconds']:>13.1f} "
              f"{row['ratio_sampler_seconds']:>8.3f} {row['ratio_wall_seconds']:>15.3f}")
    document = {
        "what": "the modelling layer's form against hand-written log densities, "
                "chains per second of autobatch sample (medians of interleaved repeats)",
        "loaded": "measured on a machine shared with other work: compare only within this file",
        "machine": common.machine(),
        "provenance": common.provenance(" ".join(sys.argv)),
        "settings": {**settings, "repeats": args.repeats, "strategy": "default (auto)"},
        "rows": rows,
    }
    common.write_result(args.out, "modelling", document)


def per_gradient(model, data, args):
    """Instructions per gradient evaluation: the difference of two runs
    under callgrind (see the module doc)."""
    wrapper = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")
    short, long = (sample(model, data, args.chains, args.warmup * k, args.draws * k,
                          args.seed, 1, wrapper) for k in (1, 3))
    return {
        "runs": [short, long],
        "instructions_per_gradient": (long["instructions"] - short["instructions"])
        / (long["gradient_evaluations"] - short["gradient_evaluations"]),
    }


def instructions(args):
    rows = []
    for name, old, new in PAIRS:
        if name not in args.models:
            continue
        row = {"model": name}
        for side, (model, data) in (("old", old), ("new", new)):
            row[side] = {"model": model, **per_gradient(model, data, args)}
            common.log(f"{name} {side}: {row[side]['instructions_per_gradient']:.0f} "
                       "instructions per gradient")
        row["ratio"] = (row["old"]["instructions_per_gradient"]
                        / row["new"]["instructions_per_gradient"])
        rows.append(row)
    print(f"{'model':<16} {'hand-written':>13} {'new form':>13} {'hand/new':>9}")
    for row in rows:
        print(f"{row['model']:<16} {row['old']['instructions_per_gradient']:>13.0f} "
              f"{row['new']['instructions_per_gradient']:>13.0f} {row['ratio']:>9.3f}")
    document = {
        "what": "the modelling layer's form against hand-written log densities, "
                "instructions per gradient evaluation of autobatch sample under callgrind "
                "(difference of two run lengths)",
        "machine": common.machine(),
        "provenance": common.provenance(" ".join(sys.argv)),
        "settings": {"chains": args.chains, "warmup": args.warmup, "draws": args.draws,
                     "seed": args.seed, "threads": 1},
        "rows": rows,
    }
    common.write_result(args.out, "modelling_instructions", document)


if __name__ == "__main__":
    main()
