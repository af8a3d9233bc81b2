#!/usr/bin/env python3
"""What the command line spends reading and binding the TreeLSTM's inputs
against the run itself: `autobatch run examples/models/treelstm.ab --entry
classify --shared W.npz --inputs BATCH --stats`, the weights (hidden 128,
float32) in a `.npz` as numpy's `savez` writes it, the batch of trees in
JSON or in a `.npz`; `read_seconds`, `bind_seconds` and `wall_seconds`
from `--stats`, at one thread and at the default threads, and the whole
process's page faults (the kernel's first touches of fresh memory: a
count the machine's load does not change). The cells are
interleaved (each repeat runs every cell once) and each figure is the
fastest repeat's (the least disturbed), with the median beside it.

    tools/bench/read_bind.py --trees 256 --repeats 9 --json docs/results/loaded/read_bind.json --loaded

Runs under a Python with numpy (the inputs come from
tools/dynet_bench.py's generator and SST's test trees).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

import common

CLI = os.environ.get("AUTOBATCH_CLI", os.path.join(common.RELEASE, "autobatch"))
PROGRAM = os.path.join(common.ROOT, "examples", "models", "treelstm.ab")


def write_inputs(trees, hidden, tmp):
    """The weights' .npz, and the batch as JSON and as .npz."""
    import numpy as np

    sys.path.insert(0, os.path.join(common.ROOT, "tools"))
    import dynet_bench

    whole = os.path.join(tmp, "whole.json")
    dynet_bench.write_inputs("treelstm", trees, hidden, whole)
    with open(whole) as f:
        doc = json.load(f)
    weights = os.path.join(tmp, "weights.npz")
    np.savez(weights, **{k: np.asarray(v, dtype=np.float32) for k, v in doc["shared"].items()})
    batch_json = os.path.join(tmp, "batch.json")
    with open(batch_json, "w") as f:
        json.dump({"batch": doc["batch"]}, f)
    batch_npz = os.path.join(tmp, "batch.npz")
    np.savez(batch_npz, **{"batch/" + k: np.asarray(v) for k, v in doc["batch"].items()})
    shapes = {k: list(np.asarray(v).shape) for k, v in doc["shared"].items()}
    return weights, {"json": batch_json, "npz": batch_npz}, shapes


def run_once(weights, batch, threads, tmp):
    out = os.path.join(tmp, "out.json")
    cmd = [CLI, "run", PROGRAM, "--entry", "classify", "--shared", weights, "--inputs", batch,
           "--stats", "--output", out]
    if threads:
        cmd += ["--threads", str(threads)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    subprocess.run(cmd, check=True)
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    with open(out) as f:
        stats = json.load(f)["stats"]
    figures = {k: stats[k] for k in ("read_seconds", "bind_seconds", "wall_seconds", "strategy")}
    return {**figures, "page_faults": faults}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--loaded", action="store_true",
                    help="record that the machine was shared while measuring")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    cells = [(fmt, threads) for fmt in ("npz", "json") for threads in (1, None)]
    with tempfile.TemporaryDirectory() as tmp:
        weights, batches, shapes = write_inputs(a.trees, a.hidden, tmp)
        weight_bytes = os.path.getsize(weights)
        runs = {cell: [] for cell in cells}
        for _ in range(a.repeats):
            for fmt, threads in cells:
                runs[(fmt, threads)].append(run_once(weights, batches[fmt], threads, tmp))
    m = common.machine()
    print(f"CPU: {m['cpu_model']} ({', '.join(m['simd_flags'])}), {m['cores']} cores; "
          f"{a.trees} trees, hidden {a.hidden}; weights .npz {weight_bytes / 1e6:.1f} MB; "
          f"fastest (median) of {a.repeats} interleaved repeats; {CLI}.")
    if a.loaded:
        print("**Loaded machine: other processes shared the cores.**")
    print("\n| batch | threads | strategy | read ms | bind ms | run ms | (read + bind) / run "
          "| page faults |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for (fmt, threads), cell in runs.items():
        row = {"batch": fmt, "threads": threads or "default", "strategy": cell[0]["strategy"],
               "runs": cell}
        for key in ("read_seconds", "bind_seconds", "wall_seconds"):
            xs = sorted(r[key] for r in cell)
            row[key] = xs[0]
            row[key + "_median"] = xs[len(xs) // 2]
        row["ratio"] = (row["read_seconds"] + row["bind_seconds"]) / row["wall_seconds"]
        row["ratio_median"] = sorted((r["read_seconds"] + r["bind_seconds"]) / r["wall_seconds"]
                                     for r in cell)[len(cell) // 2]
        rows.append(row)

        def ms(key):
            return f"{row[key] * 1e3:.2f} ({row[key + '_median'] * 1e3:.2f})"
        print(f"| {fmt} | {row['threads']} | {row['strategy']} | {ms('read_seconds')} | "
              f"{ms('bind_seconds')} | {ms('wall_seconds')} | "
              f"{row['ratio']:.1%} ({row['ratio_median']:.1%}) | "
              f"{min(r['page_faults'] for r in cell):,} |")
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"machine": m, **common.provenance("tools/bench/read_bind.py "
                                                         + " ".join(sys.argv[1:])),
                       "loaded": a.loaded, "trees": a.trees, "hidden": a.hidden,
                       "weights_bytes": weight_bytes, "weight_shapes": shapes, "cli": CLI,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
