"""The models of examples/models/ against DyNet (tools/dynet_bench.py), at
equal threads: one against one, then all cores against all cores.

For each model, hidden size and batch: one inputs file (seed 0), then our
strategies through `autobatch-bench model` (the library's compile, bind and
run, batch after batch) and DyNet with autobatch 0, 1 and 2 (its graph
built and run, a user's loop), both warm (the same warm-up seconds), the
median of the same number of runs, under the same restriction
(tools/bench/common.py). DyNet computes on one thread whatever it is
given: its all-cores figure is the same program with nothing restricted.
DyNet's outputs are compared with ours (`max_difference`). The training
step (`--train` of dynet_bench.py: loss and gradients of TreeLSTM and
BiRNN) runs in the full run.
"""
import os
import sys
import tempfile

import common

sys.path.insert(0, os.path.join(common.ROOT, "tools"))
import dynet_bench  # noqa: E402


def configure(args):
    dynet_bench.DYNET_PYTHON = common.peer_python("dynet")
    if args.quick:
        dynet_bench.set_strategies(["program-counter", "native", "native-batched"])
        dynet_bench.WARMUP = 0.1
        return {"models": ["treelstm", "birnn"], "hidden": [64], "batches": [8, 64],
                "runs": 3, "dynet": [0, 1], "train": []}
    dynet_bench.set_strategies(["program-counter", "native", "native-batched"])
    dynet_bench.WARMUP = 0.5
    return {"models": list(dynet_bench.MODELS), "hidden": [128, 256], "batches": [8, 64, 256],
            "runs": 5, "dynet": [0, 1, 2], "train": list(dynet_bench.TRAIN)}


def run(args):
    plan = configure(args)
    forward, train = [], []
    for threads in common.settings(args.threads):
        dynet_bench.THREADS = threads
        options = Options(plan, threads)
        for model in plan["models"]:
            for hidden in plan["hidden"]:
                for batch in plan["batches"]:
                    forward.append(forward_row(model, hidden, batch, options))
                    common.log(dynet_bench.format_row(forward[-1], plan["dynet"]) +
                               f" ({threads} thread(s))")
        for model in plan["train"]:
            for hidden in plan["hidden"]:
                for batch in plan["batches"]:
                    row = dynet_bench.train_row(model, hidden, batch, options)
                    row["threads"] = threads
                    train.append(row)
    return {"what": "items (trees, sentences) per second, warm, median of the runs",
            "strategies": [dynet_bench.SHORT[s] for s in dynet_bench.STRATEGIES],
            "strategy_names": dynet_bench.SHORT, "dynet_settings": plan["dynet"],
            "warmup_seconds": dynet_bench.WARMUP, "runs": plan["runs"],
            "forward": forward, "train": train}


class Options:
    """What dynet_bench.train_row reads of its command line."""

    def __init__(self, plan, threads):
        self.runs = plan["runs"]
        self.timeout = 300
        self.dynet = plan["dynet"]
        self.threads = threads


def forward_row(model, hidden, batch, a):
    row = {"model": model, "hidden": hidden, "batch": batch, "threads": a.threads}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "inputs.json")
        dynet_bench.write_inputs(model, batch, hidden, inputs)
        ours_out = None
        for column, program, strategy in dynet_bench.ours_columns(model):
            try:
                wall, util, ours_out = dynet_bench.run_ours(model, program, inputs, strategy,
                                                            a.runs, a.timeout)
                row[column] = {"items_per_second": batch / wall, "lane_utilization": util}
            except Exception as e:  # noqa: BLE001 - a failed cell is recorded, not fatal
                row[column] = {"error": str(e)}
        for setting in a.dynet:
            try:
                secs, out = dynet_bench.run_dynet(model, inputs, setting, a.runs, a.timeout)
                row[f"dynet{setting}"] = {"items_per_second": batch / secs}
                if ours_out is not None:
                    row[f"dynet{setting}"]["max_difference"] = dynet_bench.max_difference(
                        out, ours_out)
            except Exception as e:  # noqa: BLE001
                row[f"dynet{setting}"] = {"error": str(e)}
    return row
