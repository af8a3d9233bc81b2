#!/usr/bin/env python3
"""`--strategy auto` against every strategy, on the workloads of
`autobatch-bench` (crates/bench/programs: fib, Collatz, the nested loop,
the logistic-regression gradient steps) and the programs of examples/ (the
scalar examples and the models of examples/models on their small inputs).

Each cell is `autobatch-bench model PROGRAM --strategy S` (compile and bind
once, a cold run, untimed runs for the warm-up, then the timed runs;
members per second of the median run's execution alone), under the
restriction of tools/bench/common.py at each thread count. The table gives
every strategy's members per second, the strategy auto picked (from its
`--stats`), and auto's rate over the best strategy's. Every strategy's
results are compared with the reference's: a cell that differs is marked.
Not run by CI or tools/bench/run.

    tools/bench/auto.py --quick                 # small sizes, few runs: a smoke run
    tools/bench/auto.py --threads 1 2 --json /tmp/auto.json
    AUTOBATCH_BENCH_BIN=target/debug/autobatch-bench tools/bench/auto.py --quick

Figures from `--quick`, from a debug build, or from a loaded machine prove
that the script runs; they are not measurements.
"""
import argparse
import json
import os
import sys
import tempfile

import common

BENCH = os.environ.get("AUTOBATCH_BENCH_BIN", os.path.join(common.RELEASE, "autobatch-bench"))
STRATEGIES = ["auto", "program-counter", "local-static", "native", "native-batched",
              "native-lockstep"]
SHORT = {"auto": "auto", "program-counter": "pc", "local-static": "ls", "native": "na",
         "native-batched": "nb", "native-lockstep": "nl", "reference": "ref"}
PROGRAMS = os.path.join(common.ROOT, "crates/bench/programs")
EXAMPLES = os.path.join(common.ROOT, "examples")


class Workload:
    """A program, its entry, and a function that writes its inputs for a
    batch of `members` (None: a checked-in inputs file of its own size)."""

    def __init__(self, name, program, entry, inputs):
        self.name, self.program, self.entry, self.inputs = name, program, entry, inputs


def scalar_batch(name, values):
    return lambda members, path: dump(path, {"batch": {name: [values(i) for i in range(members)]}})


def logreg_inputs(quick):
    n, d = (200, 10) if quick else (10000, 100)

    def write(members, path):
        x = [[((r * 31 + c * 17) % 23) / 23.0 - 0.5 for c in range(d)] for r in range(n)]
        y = [float((r * 7) % 3 == 0) for r in range(n)]
        theta = [[((m + c) % 5) / 50.0 for c in range(d)] for m in range(members)]
        dump(path, {"batch": {"theta": theta, "count": [2] * members},
                    "shared": {"X": x, "Y": y}})
    return write


def dump(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def workloads(quick):
    ours = [
        Workload("fib", os.path.join(PROGRAMS, "fib.ab"), "fib",
                 scalar_batch("n", lambda i: 15 + i % 6)),
        Workload("collatz", os.path.join(PROGRAMS, "collatz.ab"), "collatz",
                 scalar_batch("n", lambda i: 1 + (i * 7919) % 100000)),
        Workload("nested", os.path.join(PROGRAMS, "nested.ab"), "nested",
                 scalar_batch("n", lambda i: 20 + i % 21)),
        Workload("logreg gradients", os.path.join(PROGRAMS, "logreg_value_and_grad.ab"),
                 "gradients", logreg_inputs(quick)),
    ]
    examples = [Workload(f"examples/{name}", os.path.join(EXAMPLES, name + ".ab"), entry,
                         os.path.join(EXAMPLES, name + ".json"))
                for name, entry in [("fib", "fib"), ("collatz", "collatz"),
                                    ("newton_sqrt", "newton_sqrt"),
                                    ("logistic", "log_likelihood")]]
    models = [Workload(f"models/{name}", os.path.join(EXAMPLES, "models", name + ".ab"),
                       "decode" if name == "drnn" else "classify",
                       os.path.join(EXAMPLES, "models", name + "_small.json"))
              for name in ["treelstm", "mvrnn", "birnn", "nested", "drnn", "berxit",
                           "stackrnn"]]
    return ours + examples + models


def run_cell(workload, inputs, strategy, threads, runs, warmup):
    command, env = common.restricted(
        [BENCH, "model", workload.program, "--entry", workload.entry, "--inputs", inputs,
         "--strategy", strategy, "--threads", str(threads), "--runs", str(runs),
         "--warmup", str(warmup)], threads)
    try:
        report = common.run_json(command, env)
    except RuntimeError as e:
        return {"error": str(e)}
    doc = report["document"]
    return {"seconds": report["median_seconds"],
            "members": len(doc["results"]),
            "ran": doc["stats"]["strategy"],
            "reason": doc["stats"].get("strategy_reason"),
            "results": doc["results"]}


def measure(workload, members, threads, runs, warmup, tmp):
    inputs = workload.inputs
    if callable(inputs):
        path = os.path.join(tmp, "inputs.json")
        inputs(members, path)
        inputs = path
    row = {"workload": workload.name, "threads": threads, "cells": {}}
    reference = run_cell(workload, inputs, "reference", threads, 1, 0.0)
    for strategy in STRATEGIES:
        cell = run_cell(workload, inputs, strategy, threads, runs, warmup)
        if "error" not in cell:
            cell["members_per_second"] = cell["members"] / cell["seconds"]
            cell["equals_reference"] = cell.pop("results") == reference.get("results")
        row["cells"][strategy] = cell
        common.log(f"auto {workload.name} {threads} thread(s) {strategy}: "
                   f"{cell.get('members_per_second', 0):.0f} members/s")
    rates = {s: c["members_per_second"] for s, c in row["cells"].items()
             if "members_per_second" in c and s != "auto"}
    auto = row["cells"]["auto"]
    if rates and "members_per_second" in auto:
        best = max(rates, key=rates.get)
        row.update(best=best, auto_over_best=auto["members_per_second"] / rates[best])
    return row


def format_row(row):
    cells = []
    for strategy in STRATEGIES:
        cell = row["cells"][strategy]
        if "error" in cell:
            cells.append("failed")
        else:
            mark = "" if cell["equals_reference"] else " (differs!)"
            cells.append(f"{cell['members_per_second']:,.0f}{mark}")
    auto = row["cells"]["auto"]
    picked = SHORT.get(auto.get("ran"), auto.get("ran", "-"))
    ratio = (f"{row['auto_over_best']:.2f} (best {SHORT[row['best']]})"
             if "auto_over_best" in row else "-")
    return (f"| {row['workload']} | {row['threads']} | " + " | ".join(cells)
            + f" | {picked} | {ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and few runs (a smoke run)")
    ap.add_argument("--threads", nargs="+", type=int, help="thread counts (default: 1 and all)")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    members = 64 if a.quick else 1024
    runs, warmup = (1, 0.0) if a.quick else (7, 0.5)
    threads = a.threads or sorted({1, common.cores()})
    m = common.machine()
    print(f"CPU: {m['cpu_model']} ({', '.join(m['simd_flags'])}), {m['cores']} cores; "
          f"threads: {', '.join(map(str, threads))}; {members} members for the generated "
          f"inputs; median of {runs} run(s) after {warmup} s of warm-up; {BENCH}.")
    if a.quick:
        print("**Smoke run (--quick): these cells prove the script; they are not figures.**")
    print()
    print("Members per second, execution alone. auto picked: the strategy auto ran.\n")
    print("| workload | threads | " + " | ".join(SHORT[s] for s in STRATEGIES)
          + " | auto picked | auto / best |")
    print("|" + "---|" * (len(STRATEGIES) + 4))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in workloads(a.quick):
            for t in threads:
                rows.append(measure(workload, members, t, runs, warmup, tmp))
                print(format_row(rows[-1]), flush=True)
    if a.json:
        dump(a.json, {"machine": m, "quick": a.quick, "bench": BENCH, "rows": rows})
    differs = [r["workload"] for r in rows
               for c in r["cells"].values() if c.get("equals_reference") is False]
    if differs:
        sys.exit(f"error: results differ from the reference's on {', '.join(differs)}")


if __name__ == "__main__":
    main()
