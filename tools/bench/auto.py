#!/usr/bin/env python3
"""`--strategy auto` against every strategy, through the command line as a
user runs it, on the workloads of `autobatch-bench` (fib, Collatz, the
nested loop and its same-length variant, the logistic-regression
gradients, the NUTS logistic regression through `autobatch sample`), the
scalar programs of examples/ and every model of examples/models (plain
and `_seq`; generated batches of 256 members through
tools/dynet_bench.py's generator, or their small inputs with `--quick`
and for the models that generator does not make).

Each cell is one process of `autobatch run PROGRAM --entry E --inputs
FILE --strategy S --stats` (or `autobatch sample ... --stats FILE`): the
process's wall seconds (reading, compiling, binding, running, writing:
what the user waits for) and the run's own seconds from `--stats`
(`wall_seconds`; the sampler's warm-up and sampling seconds). The
strategies are interleaved: each repeat runs every strategy once, in an
order rotated by one per repeat, so that load that comes and goes falls
on all of them; the cell is the fastest of the repeats (the least
disturbed; the JSON has the medians and every repeat too). Every strategy's
results are compared with the reference's (one untimed run): a cell that
differs is marked and the script fails. The table gives auto's seconds
over the best strategy's, for the process and for the run alone.

    tools/bench/auto.py --quick                      # small inputs, 1 repeat: a smoke run
    tools/bench/auto.py --only models/drnn models/treelstm --hidden 128 --threads 1 \
        --strategies native native-batched --median   # two strategies, one thread
    tools/bench/auto.py --only NUTS --nuts 200x10x16 400x10x256 --threads 1
    tools/bench/auto.py --repeats 5 --json docs/results/loaded/auto.json --loaded
    AUTOBATCH_CLI=target/debug/autobatch tools/bench/auto.py --quick

`--loaded` records that the machine was shared while measuring (the
figures then compare the strategies with one another, interleaved, and
say nothing absolute). Not run by CI or tools/bench/run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import common

CLI = os.environ.get("AUTOBATCH_CLI", os.path.join(common.RELEASE, "autobatch"))
STRATEGIES = ["auto", "program-counter", "local-static", "native", "native-batched",
              "native-lockstep"]
SHORT = {"auto": "auto", "program-counter": "pc", "local-static": "ls", "native": "na",
         "native-batched": "nb", "native-lockstep": "nl", "reference": "ref"}
PROGRAMS = os.path.join(common.ROOT, "crates/bench/programs")
EXAMPLES = os.path.join(common.ROOT, "examples")
MODELS = os.path.join(EXAMPLES, "models")
TOOLS = os.path.join(common.ROOT, "tools")
# The models tools/dynet_bench.py's generator makes batches of, with entries.
GENERATED = {"treelstm": "classify", "mvrnn": "classify", "birnn": "classify",
             "nested": "classify", "drnn": "decode", "berxit": "classify",
             "stackrnn": "classify"}
SEQ = ["treelstm", "mvrnn", "birnn", "nested", "drnn", "berxit"]
# Seconds one process may take before its cell counts as failed.
TIMEOUT = 300


class Workload:
    """A program, its entry (None: `autobatch sample` of its
    `log_density`), and its inputs: a path, or a function that writes them
    to the path it is given."""

    def __init__(self, name, program, entry, inputs, members=None):
        self.name, self.program, self.entry, self.inputs = name, program, entry, inputs
        self.members = members


def dump(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def scalar_batch(name, members, values):
    return lambda path: dump(path, {"batch": {name: [values(i) for i in range(members)]}})


def logreg_gradient_inputs(members, n, d):
    def write(path):
        x = [[((r * 31 + c * 17) % 23) / 23.0 - 0.5 for c in range(d)] for r in range(n)]
        y = [float((r * 7) % 3 == 0) for r in range(n)]
        theta = [[((m + c) % 5) / 50.0 for c in range(d)] for m in range(members)]
        dump(path, {"batch": {"theta": theta, "count": [2] * members},
                    "shared": {"X": x, "Y": y}})
    return write


def logistic_data(n, d):
    """Data of tools/bench/logistic.ab: rows of X in [-0.5, 0.5), y a
    deterministic pattern of 0 and 1."""
    def write(path):
        x = [[((r * 31 + c * 17) % 23) / 23.0 - 0.5 for c in range(d)] for r in range(n)]
        y = [float((r * 7) % 3 == 0) for r in range(n)]
        dump(path, {"X": x, "y": y})
    return write


def generated_model(model, members, hidden):
    def write(path):
        sys.path.insert(0, TOOLS)
        import dynet_bench

        dynet_bench.write_inputs(model, members, hidden, path)
    return write


def nuts_workloads(sizes):
    """NUTS on tools/bench/logistic.ab for each ROWSxCOLUMNSxCHAINS."""
    rows = []
    for size in sizes:
        n, d, chains = (int(v) for v in size.split("x"))
        rows.append(Workload(f"NUTS logistic {n}x{d}, {chains} chains (sample)",
                             os.path.join(TOOLS, "bench", "logistic.ab"), None,
                             logistic_data(n, d), chains))
    return rows


def bench_workloads(quick, nuts):
    members = 64 if quick else 1024
    n, d = (200, 10) if quick else (1000, 20)
    if nuts:
        return nuts_workloads(nuts)
    return [
        Workload("fib", os.path.join(PROGRAMS, "fib.ab"), "fib",
                 scalar_batch("n", members, lambda i: 15 + i % 6), members),
        Workload("collatz", os.path.join(PROGRAMS, "collatz.ab"), "collatz",
                 scalar_batch("n", members, lambda i: 1 + (i * 7919) % 100000), members),
        Workload("nested", os.path.join(PROGRAMS, "nested.ab"), "nested",
                 scalar_batch("n", members, lambda i: 20 + i % 21), members),
        Workload("nested-same", os.path.join(PROGRAMS, "nested.ab"), "nested",
                 scalar_batch("n", members, lambda i: 30), members),
        Workload("logreg gradients", os.path.join(PROGRAMS, "logreg_value_and_grad.ab"),
                 "gradients", logreg_gradient_inputs(members // 4, n, d), members // 4),
        Workload("logreg grad", os.path.join(PROGRAMS, "logreg_grad.ab"),
                 "gradients", logreg_gradient_inputs(members // 4, n, d), members // 4),
        Workload("NUTS logistic (sample)", os.path.join(TOOLS, "bench", "logistic.ab"), None,
                 logistic_data(n, d), 16),
    ]


def example_workloads():
    return [Workload(f"examples/{name}", os.path.join(EXAMPLES, name + ".ab"), entry,
                     os.path.join(EXAMPLES, name + ".json"))
            for name, entry in [("fib", "fib"), ("collatz", "collatz"),
                                ("newton_sqrt", "newton_sqrt"),
                                ("logistic", "log_likelihood")]] + [
        Workload("examples/normal (sample)", os.path.join(EXAMPLES, "normal.ab"), None,
                 os.path.join(EXAMPLES, "normal.json"), 16)]


def model_workloads(quick, members, hidden):
    rows = []
    for model in sorted(set(GENERATED) | {"treelstm_sst"}):
        entry = GENERATED.get(model, "loss")
        small = os.path.join(MODELS, model + "_small.json")
        inputs = (small if quick or model not in GENERATED
                  else generated_model(model, members, hidden))
        size = None if inputs is small else members
        for program in [model] + ([model + "_seq"] if model in SEQ else []):
            rows.append(Workload(f"models/{program}", os.path.join(MODELS, program + ".ab"),
                                 entry, inputs, size))
    return rows


def command(workload, inputs, strategy, threads, tmp):
    """The process of one cell and the files it writes (results, stats)."""
    out = os.path.join(tmp, "out")
    pin = ["--threads", str(threads)] if threads else []
    if workload.entry is None:
        stats = os.path.join(tmp, "stats.json")
        return ([CLI, "sample", workload.program, "--data", inputs, "--chains",
                 str(workload.members), "--warmup", "100", "--draws", "100", "--seed", "1",
                 "--strategy", strategy, "--output", out + ".csv", "--stats", stats] + pin,
                out + ".csv", stats)
    return ([CLI, "run", workload.program, "--entry", workload.entry, "--inputs", inputs,
             "--strategy", strategy, "--stats", "--output", out + ".json"] + pin,
            out + ".json", None)


def run_cell(workload, inputs, strategy, threads, tmp):
    """One process: its wall seconds, the run's own, what ran, the results."""
    cmd, out, stats_path = command(workload, inputs, strategy, threads, tmp)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-500:]}
    with open(out) as f:
        results = f.read()
    if stats_path is None:
        doc = json.loads(results)
        stats, results = doc["stats"], doc["results"]
        run_seconds = stats["wall_seconds"]
    else:
        with open(stats_path) as f:
            stats = json.load(f)
        run_seconds = stats["warmup_seconds"] + stats["sampling_seconds"]
    return {"process_seconds": seconds, "run_seconds": run_seconds,
            "ran": stats["strategy"], "reason": stats.get("strategy_reason"),
            "results": results}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def measure(workload, strategies, repeats, threads, statistic, tmp):
    inputs = workload.inputs
    if callable(inputs):
        path = os.path.join(tmp, "inputs.json")
        inputs(path)
        inputs = path
    reference = run_cell(workload, inputs, "reference", threads, tmp)
    runs = {s: [] for s in strategies}
    for r in range(repeats):
        order = strategies[r % len(strategies):] + strategies[:r % len(strategies)]
        for strategy in order:
            runs[strategy].append(run_cell(workload, inputs, strategy, threads, tmp))
    row = {"workload": workload.name, "program": os.path.relpath(workload.program, common.ROOT),
           "entry": workload.entry or "sample", "members": workload.members, "cells": {}}
    for strategy, cells in runs.items():
        failed = [c for c in cells if "error" in c]
        if failed:
            row["cells"][strategy] = {"error": failed[0]["error"]}
            continue
        row["cells"][strategy] = {
            "process_seconds": min(c["process_seconds"] for c in cells),
            "run_seconds": min(c["run_seconds"] for c in cells),
            "process_seconds_median": median([c["process_seconds"] for c in cells]),
            "run_seconds_median": median([c["run_seconds"] for c in cells]),
            "process_seconds_all": [c["process_seconds"] for c in cells],
            "run_seconds_all": [c["run_seconds"] for c in cells],
            "ran": cells[0]["ran"], "reason": cells[0]["reason"],
            "equals_reference": all(c["results"] == reference.get("results") for c in cells),
        }
    for key in ("process_seconds", "run_seconds"):
        field = key + statistic
        times = {s: c[field] for s, c in row["cells"].items() if field in c and s != "auto"}
        auto = row["cells"]["auto"].get(field)
        if times and auto:
            best = min(times, key=times.get)
            row[key.replace("seconds", "best")] = best
            row[key.replace("seconds", "auto_over_best")] = auto / times[best]
    return row


def format_row(row, strategies, statistic):
    cells = []
    for strategy in strategies:
        cell = row["cells"][strategy]
        if "error" in cell:
            cells.append("failed")
        else:
            mark = "" if cell["equals_reference"] else " (differs!)"
            cells.append(f"{cell['process_seconds' + statistic] * 1e3:,.0f} / "
                         f"{cell['run_seconds' + statistic] * 1e3:,.1f}{mark}")
    auto = row["cells"]["auto"]
    picked = SHORT.get(auto.get("ran"), auto.get("ran", "-"))
    ratios = []
    for key in ("process", "run"):
        ratio = row.get(f"{key}_auto_over_best")
        ratios.append(f"{ratio:.2f} ({SHORT[row[key + '_best']]})" if ratio else "-")
    return f"| {row['workload']} | " + " | ".join(cells) + f" | {picked} | " + " | ".join(ratios) + " |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small inputs, one repeat (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    ap.add_argument("--members", type=int, default=256, help="generated models' batch size")
    ap.add_argument("--hidden", type=int, default=64, help="generated models' hidden width")
    ap.add_argument("--only", nargs="+", help="only the workloads whose names contain one of these")
    ap.add_argument("--threads", type=int,
                    help="pass --threads N to every process (default: none, the CLI's default)")
    ap.add_argument("--strategies", nargs="+", choices=STRATEGIES[1:],
                    help="the strategies to compare auto with (default: all)")
    ap.add_argument("--median", action="store_true",
                    help="the table's cells are the medians of the repeats (default: the fastest)")
    ap.add_argument("--nuts", nargs="+", metavar="ROWSxCOLUMNSxCHAINS",
                    help="NUTS on tools/bench/logistic.ab at these sizes instead of "
                         "autobatch-bench's workloads")
    ap.add_argument("--loaded", action="store_true",
                    help="record that the machine was shared while measuring")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    repeats = 1 if a.quick else a.repeats
    m = common.machine()
    strategies = ["auto"] + (a.strategies or STRATEGIES[1:])
    statistic = "_median" if a.median else ""
    workloads = (bench_workloads(a.quick, a.nuts) + example_workloads()
                 + model_workloads(a.quick, a.members, a.hidden))
    if a.only:
        workloads = [w for w in workloads if any(o in w.name for o in a.only)]
    print(f"CPU: {m['cpu_model']} ({', '.join(m['simd_flags'])}), {m['cores']} cores; "
          f"{f'--threads {a.threads}' if a.threads else 'default threads (no --threads)'}; "
          f"{'median' if a.median else 'fastest'} of {repeats} interleaved repeat(s); {CLI}.")
    if a.quick:
        print("**Smoke run (--quick): these cells prove the script; they are not figures.**")
    if a.loaded:
        print("**Loaded machine: other processes shared the cores; compare the strategies "
              "with one another only.**")
    print()
    print("Milliseconds, process / run alone (`--stats`). auto picked: the strategy auto ran; "
          "auto / best: of the process, of the run.\n")
    print("| workload | " + " | ".join(SHORT[s] for s in strategies)
          + " | auto picked | auto / best, process | auto / best, run |")
    print("|" + "---|" * (len(strategies) + 4))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in workloads:
            rows.append(measure(workload, strategies, repeats, a.threads, statistic, tmp))
            print(format_row(rows[-1], strategies, statistic), flush=True)
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"machine": m, **common.provenance("tools/bench/auto.py " + " ".join(sys.argv[1:])),
                       "loaded": a.loaded, "smoke_run": a.quick, "repeats": repeats,
                       "threads": a.threads, "strategies": strategies,
                       "table_statistic": "median" if a.median else "fastest",
                       "cli": CLI, "rows": rows}, f, indent=1)
    differs = [r["workload"] for r in rows
               for c in r["cells"].values() if c.get("equals_reference") is False]
    if differs:
        sys.exit(f"error: results differ from the reference's on {', '.join(differs)}")


if __name__ == "__main__":
    main()
