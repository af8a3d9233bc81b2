#!/usr/bin/env python3
"""The models of examples/models/ against DyNet, in the same run (not run by CI).

For every model, hidden size and batch size: writes one inputs file (the
batch and the weights, from tools/treelstm_inputs.py or
tools/models_inputs.py with seed 0), then
  - ours: `target/release/autobatch-bench model MODEL.ab` (what
    `autobatch run` does, in a loop: one cold run, untimed runs for
    --warmup seconds, then --runs more in the same process) under the
    program-counter (pc), local-static (ls), native (na) and
    native-batched (nb) strategies (`--strategies` to choose), and the
    same for MODEL_seq.ab (the model without instances, "seq pc", "seq
    ls") where it exists; the time is each run's `wall_seconds` (execution
    alone: no parsing, compiling or reading the inputs), and the lane
    utilization is the stats' `lane_utilization`;
  - DyNet: the same model built in DyNet from the same inputs file, with
    autobatch 0 (off), 1 and 2, each in its own process (dynet_config must
    be set before `import dynet`); the time is one renew_cg, the graph of
    the whole batch and its forward pass (graph building is part of DyNet's
    cost), after untimed runs for --warmup seconds (at least one).
Both sides warm up for the same time (0.2 s by default): with two threads
on a shared VM our first runs can be slower (the second worker wakes too
late to share a small batch; docs/benchmarks.md, "What we learned"), and DyNet's allocator warms up too.
Items per second is the batch size over the median of --runs runs. DyNet's
outputs are compared with ours (the largest difference is reported), so
both compute the same model. Prints a markdown table and writes every
figure to --json.

DyNet cannot take a data-dependent decision inside a graph: for DRNN,
Berxit and StackRNN it evaluates the batch's graph step by step (tree level,
layer, token) to read the decisions, as a DyNet user would, which still
batches each step across members.

`--train` benches a training step instead (TreeLSTM and BiRNN only, the
models with a `loss` entry): the inputs gain a batched `label`, member i's
being i % C (C = 5 for TreeLSTM, 3 for BiRNN), then
  - ours: `autobatch-bench model MODEL.ab --entry loss --grad-statics
    <every static of the inputs>` (MODEL_seq.ab is not run) under the
    strategies of --strategies; the time is `wall_seconds` of the warm
    runs, which includes the gradient of the batch's summed loss;
  - DyNet: renew_cg, every member's graph, pickneglogsoftmax(logits, label)
    (the same logsumexp(z) - z[label], checked on the values), esum,
    value() and backward(), timed as a whole after the warm-up; no
    update is applied, and the gradients are zeroed (scale_gradient(0): this
    DyNet has no ParameterCollection.reset_gradient) before every run,
    untimed, so they do not accumulate.
DyNet's gradients (read after the last run, its stacked gate matrices split
back into our statics) are compared with ours' `static_gradients`: for each
static, the largest |ours - DyNet| over its elements divided by the largest
|DyNet| of that static (so the figure is relative to the gradient's scale,
not inflated by elements that cancel to ~0); the table shows the worst static
over every pair of our strategies and DyNet settings. Members' losses are
compared too (largest |ours - DyNet| / max(1, |DyNet|)).

`--threads T` gives both sides T threads: ours `--threads T`, both under
`taskset` on T cores with OMP_NUM_THREADS etc. set (tools/bench/common.py);
without it ours use every core and DyNet (one thread on the CPU) runs as it
is. DyNet runs in DYNET_PYTHON (default `.peers/dynet/bin/python`, from
`tools/peers/install dynet`). `tools/bench/run dynet` runs this at one
thread and at all cores and writes docs/results/dynet.json.

`--python` benches our side through the Python package instead (forward
only): the model's weights bound once (`Program.bind`, an
`autobatch.BoundProgram`), then, warm and on one thread, each call is
`bound.run(entry, batch=<numpy arrays>, strategy=S, threads=1)` and
`.stacked()`; the table gives items per second of the whole call, the
median call and `stats["wall_seconds"]` (execution alone) in ms, and the
per-call overhead (call minus wall) as a share of the wall time, beside
the CLI path's items per second (`autobatch-bench model`, as above, at one
thread) and DyNet's Python API on the same inputs. The package must be
importable by AUTOBATCH_PYTHON (default: this interpreter), e.g. after
`pip install ./python` (a release build).

`--no-build` skips `cargo build` and uses the binary as it is;
`AUTOBATCH_BENCH_BIN=PATH` runs that `autobatch-bench` of ours instead
(with --no-build: an A/B of two commits).

    .peers/numpy/bin/python tools/dynet_bench.py --models treelstm birnn \
        --batches 8 64 256 --hidden 128 256 --threads 1 --json /tmp/bench.json
    .peers/numpy/bin/python tools/dynet_bench.py --train --models treelstm birnn \
        --strategies program-counter local-static --json /tmp/train.json
    AUTOBATCH_PYTHON=/tmp/pyenv/bin/python .peers/numpy/bin/python tools/dynet_bench.py \
        --python --models treelstm --batches 8 256 --hidden 128 --dynet 0 1
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# AUTOBATCH_BENCH_BIN names another build of ours (an A/B of two commits).
BENCH = os.environ.get("AUTOBATCH_BENCH_BIN", os.path.join(ROOT, "target/release/autobatch-bench"))
MODELS = ["treelstm", "mvrnn", "birnn", "nested", "drnn", "berxit", "stackrnn"]
ENTRY = {"drnn": "decode"}
STRATEGIES = ["program-counter", "local-static", "native", "native-batched"]
SHORT = {"program-counter": "pc", "local-static": "ls", "native": "na", "native-batched": "nb"}
# Models with instances also run as MODEL_seq.ab: the same model without
# `join`/`map`/`pfor` (StackRNN has no independent work).
SEQ = ["treelstm", "mvrnn", "birnn", "nested", "drnn", "berxit"]
# Models with a `loss` entry (--train), and their number of labels C.
TRAIN = {"treelstm": 5, "birnn": 3}


def ours_columns(model, train=False):
    """(column, program, strategy) of our runs of `model`."""
    if train:
        return [(SHORT[s], model, s) for s in STRATEGIES]
    programs = [("", model)] + ([("seq ", model + "_seq")] if model in SEQ else [])
    return [(f"{tag}{SHORT[s]}", program, s) for tag, program in programs for s in STRATEGIES]


def set_strategies(names):
    """Keeps only the strategies `names` (in the order of STRATEGIES)."""
    STRATEGIES[:] = [s for s in STRATEGIES if s in names]

# The Python with DyNet: the pinned one of tools/peers/install when there.
DYNET_PYTHON = os.environ.get("DYNET_PYTHON", os.path.join(ROOT, ".peers/dynet/bin/python"))
if not os.path.exists(DYNET_PYTHON):
    DYNET_PYTHON = sys.executable
# Threads of both sides (--threads): None leaves both as they are (ours on
# every core, DyNet on its own); a count runs ours with `--threads` and
# both under tools/bench/common.py's restriction (taskset, thread variables).
THREADS = None


def restrict(cmd):
    """(command, environment) of a process of either side at THREADS."""
    if THREADS is None:
        return cmd, None
    sys.path.insert(0, os.path.join(HERE, "bench"))
    import common

    return common.restricted(cmd, THREADS)


SST = os.path.join(ROOT, "examples/data/sst/test.txt")
# Seconds of untimed runs before the timed ones, on both sides (--warmup).
WARMUP = 0.2


# ------------------------------------------------------------ inputs ----

def write_inputs(model, batch, hidden, path, train=False):
    sys.path.insert(0, HERE)
    import numpy as np
    import models_inputs
    import treelstm_inputs

    if model == "treelstm":
        flat, vocab = models_inputs.sst_trees(SST, batch)
        data = models_inputs.tree_batch(flat)
        w = treelstm_inputs.weights(0, vocab, hidden, hidden)
    else:
        data, w, _ = models_inputs.build(model, batch, hidden, 0, SST)
    shared = {k: (v.tolist() if isinstance(v, np.ndarray) else models_inputs.to_json(v))
              for k, v in w.items()}
    if train:
        add_labels(model, data, shared)
    with open(path, "w") as f:
        json.dump({"batch": data, "shared": shared}, f)


def add_labels(model, data, shared):
    """Member i's label is i % C (C: the number of rows of BOUT, the model's labels)."""
    labels = TRAIN[model]
    assert len(shared["BOUT"]) == labels, (model, len(shared["BOUT"]))
    members = len(next(iter(data.values())))
    data["label"] = [i % labels for i in range(members)]


# -------------------------------------------------------------- ours ----

def flatten(v, out):
    if isinstance(v, list):
        for x in v:
            flatten(x, out)
    else:
        out.append(float(v))
    return out


def bench_model(program, entry, inputs, strategy, runs, timeout, grad_statics=None):
    """`autobatch-bench model`: one cold run, untimed runs for WARMUP
    seconds, then `runs` more in the same process; the report (median of
    the timed runs' wall seconds, the last run's output document)."""
    cmd = [BENCH, "model", os.path.join(ROOT, "examples/models", program + ".ab"),
           "--entry", entry, "--inputs", inputs, "--strategy", strategy, "--runs", str(runs),
           "--warmup", str(WARMUP)]
    if grad_statics:
        cmd += ["--grad-statics", ",".join(grad_statics)]
    if THREADS is not None:
        cmd += ["--threads", str(THREADS)]
    cmd, env = restrict(cmd)
    done = subprocess.run(cmd, check=True, timeout=timeout, stdout=subprocess.PIPE, env=env)
    return json.loads(done.stdout)


def run_ours(model, program, inputs, strategy, runs, timeout):
    report = bench_model(program, ENTRY.get(model, "classify"), inputs, strategy, runs, timeout)
    doc = report["document"]
    outputs = [flatten(r["ok"], []) for r in doc["results"]]
    return report["median_seconds"], doc["stats"]["lane_utilization"], outputs


def run_ours_train(model, inputs, strategy, runs, timeout):
    """The loss and its gradient with respect to every static of `inputs`:
    (median wall seconds, lane utilization, members' losses, gradients)."""
    with open(inputs) as f:
        statics = list(json.load(f)["shared"])
    report = bench_model(model, "loss", inputs, strategy, runs, timeout, statics)
    doc = report["document"]
    losses = [r["ok"] for r in doc["results"]]
    return (report["median_seconds"], doc["stats"]["lane_utilization"], losses,
            doc["static_gradients"])


def run_dynet(model, inputs, autobatch, runs, timeout, mode="forward"):
    """The worker's figures: forward mode gives (median seconds, outputs),
    train mode (median seconds, the worker's whole document)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd, env = restrict([DYNET_PYTHON, __file__, "--worker", model, inputs, str(autobatch),
                             str(runs), mode, str(WARMUP), out.name])
        subprocess.run(cmd, check=True, timeout=timeout, env=env)
        with open(out.name) as f:
            doc = json.load(f)
    return statistics.median(doc["seconds"]), (doc if mode == "train" else doc["outputs"])


# ------------------------------------------------------- ours, Python ---

AUTOBATCH_PYTHON = os.environ.get("AUTOBATCH_PYTHON", sys.executable)


def run_python(model, inputs, strategy, runs, timeout):
    """Our model through the Python package with its weights bound once:
    the worker's figures (call and wall seconds per run, outputs)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd, env = restrict([AUTOBATCH_PYTHON, __file__, "--python-worker", model, inputs,
                             strategy, str(runs), str(WARMUP), out.name])
        subprocess.run(cmd, check=True, timeout=timeout, env=env)
        with open(out.name) as f:
            return json.load(f)


def as_numpy(np, value):
    """A JSON input as numpy: a rectangular array, else a list of arrays
    (a ragged batch's members)."""
    try:
        array = np.asarray(value)
        if array.dtype != object:
            return array
    except ValueError:
        pass
    return [np.asarray(v) for v in value]


def python_worker(model, inputs, strategy, runs, warmup, out_path):
    """Binds the weights once, then times warm calls on one thread."""
    import numpy as np
    import autobatch

    with open(inputs) as f:
        doc = json.load(f)
    path = os.path.join(ROOT, "examples/models", model + ".ab")
    with open(path) as f:
        prog = autobatch.compile(f.read(), path)
    bound = prog.bind(shared={k: as_numpy(np, v) for k, v in doc["shared"].items()})
    batch = {k: as_numpy(np, v) for k, v in doc["batch"].items()}
    entry = ENTRY.get(model, "classify")
    walls, outputs = [], None

    def step():
        nonlocal outputs
        t0 = time.perf_counter()
        res = bound.run(entry, batch=batch, strategy=strategy, threads=1)
        stacked = res.stacked()
        seconds = time.perf_counter() - t0
        walls.append(res.stats["wall_seconds"])   # read after the timing
        outputs = stacked
        return seconds

    calls = warmed(step, int(runs), float(warmup))
    walls = walls[-len(calls):]
    outputs = [flatten(np.asarray(o).tolist(), []) for o in outputs]
    with open(out_path, "w") as f:
        json.dump({"calls": calls, "walls": walls, "outputs": outputs}, f)


def python_bench(a):
    """--python: ours through the Python package against DyNet's Python API."""
    columns = ["model", "hidden", "batch", "strategy", "ours Python items/s", "call ms",
               "wall ms", "overhead / wall", "ours CLI items/s"]
    columns += [f"DyNet ab={b}" for b in a.dynet]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    rows = []
    for model in a.models:
        for hidden in a.hidden:
            for batch in a.batches:
                with tempfile.TemporaryDirectory() as tmp:
                    inputs = os.path.join(tmp, "inputs.json")
                    write_inputs(model, batch, hidden, inputs)
                    dynet = {}
                    for b in a.dynet:
                        try:
                            secs, out = run_dynet(model, inputs, b, a.runs, a.timeout)
                            dynet[b] = {"items_per_second": batch / secs, "outputs": out}
                        except subprocess.SubprocessError as e:
                            dynet[b] = {"error": str(e)}
                    for s in STRATEGIES:
                        rows.append(python_row(model, hidden, batch, s, inputs, dynet, a))
                        print(format_python_row(rows[-1], a.dynet), flush=True)
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)


def python_row(model, hidden, batch, strategy, inputs, dynet, a):
    row = {"model": model, "hidden": hidden, "batch": batch, "strategy": strategy,
           "dynet": {b: {k: v for k, v in d.items() if k != "outputs"} for b, d in dynet.items()}}
    try:
        doc = run_python(model, inputs, strategy, a.runs, a.timeout)
    except subprocess.SubprocessError as e:
        row["error"] = str(e)
        return row
    call, wall = statistics.median(doc["calls"]), statistics.median(doc["walls"])
    row.update(items_per_second=batch / call, call_seconds=call, wall_seconds=wall,
               overhead_over_wall=(call - wall) / wall)
    try:
        cli_wall, _, _ = run_ours(model, model, inputs, strategy, a.runs, a.timeout)
        row["cli_items_per_second"] = batch / cli_wall
    except (subprocess.SubprocessError, OSError) as e:
        row["cli_error"] = str(e)
    for b, d in dynet.items():
        if "outputs" in d:
            row["dynet"][b]["max_difference"] = max_difference(d["outputs"], doc["outputs"])
    return row


def format_python_row(row, dynet):
    ours = (f"{row['items_per_second']:.0f} | {row['call_seconds'] * 1e3:.2f} | "
            f"{row['wall_seconds'] * 1e3:.2f} | {row['overhead_over_wall']:.1%}"
            if "error" not in row else "failed | - | - | -")
    cli = f"{row['cli_items_per_second']:.0f}" if "cli_items_per_second" in row else "failed"
    theirs = [f"{row['dynet'][b]['items_per_second']:.0f}"
              if "items_per_second" in row["dynet"][b] else "failed" for b in dynet]
    cells = [str(row["model"]), str(row["hidden"]), str(row["batch"]), SHORT[row["strategy"]],
             ours, cli] + theirs
    return "| " + " | ".join(cells) + " |"


# ------------------------------------------------------------ DyNet -----

def worker(model, inputs, autobatch, runs, mode, warmup, out_path):
    import dynet_config
    dynet_config.set(mem="2048", autobatch=int(autobatch), random_seed=1)
    import dynet as dy
    import numpy as np

    with open(inputs) as f:
        doc = json.load(f)
    batch, shared = doc["batch"], doc["shared"]
    pc = dy.ParameterCollection()
    build = BUILDERS[model](dy, np, pc, shared)
    steps = train_steps if mode == "train" else forward_steps
    result = steps(dy, np, pc, build, batch, int(runs), float(warmup))
    with open(out_path, "w") as f:
        json.dump(result, f)


def warmed(step, runs, warmup):
    """`step()` (which returns its seconds) run untimed once and then until
    `warmup` seconds have passed, then `runs` times: those runs' seconds."""
    started = time.perf_counter()
    step()
    while time.perf_counter() - started < warmup:
        step()
    return [step() for _ in range(runs)]


def forward_steps(dy, np, pc, build, batch, runs, warmup):
    members = len(next(iter(batch.values())))
    outputs = None

    def step():
        nonlocal outputs
        t0 = time.perf_counter()
        dy.renew_cg()
        outs = build([{k: v[i] for k, v in batch.items()} for i in range(members)])
        dy.forward([o for out in outs for o in out])
        outputs = [[float(x) for o in out for x in np.asarray(o.value()).ravel()] for out in outs]
        return time.perf_counter() - t0

    seconds = warmed(step, runs, warmup)
    return {"seconds": seconds, "outputs": outputs}


def train_steps(dy, np, pc, build, batch, runs, warmup):
    """Timed training steps without an update; the figures of the last one."""
    members = [{k: v[i] for k, v in batch.items()} for i in range(len(batch["label"]))]
    labels = batch["label"]
    outs = losses = None

    def step():
        nonlocal outs, losses
        zero_gradients(pc)  # untimed (a trainer's update would do it)
        t0 = time.perf_counter()
        dy.renew_cg()
        outs = build(members)
        losses = [dy.pickneglogsoftmax(out[0], l) for out, l in zip(outs, labels)]
        total = dy.esum(losses)
        total.value()
        total.backward()
        return time.perf_counter() - t0

    seconds = warmed(step, runs, warmup)
    values = [float(l.value()) for l in losses]
    formula = [logsumexp_loss(np, out[0].npvalue(), l) for out, l in zip(outs, labels)]
    return {"seconds": seconds, "losses": values,
            "formula_difference": max(abs(x - y) for x, y in zip(values, formula)),
            "gradients": {k: np.asarray(g).tolist() for k, g in build.gradients().items()}}


def zero_gradients(pc):
    for p in pc.parameters_list() + pc.lookup_parameters_list():
        p.scale_gradient(0.0)


def logsumexp_loss(np, z, label):
    """logsumexp(z) - z[label] in float64 (what our `loss` computes)."""
    z = np.asarray(z, dtype=np.float64)
    m = z.max()
    return float(m + np.log(np.exp(z - m).sum()) - z[label])


def params(dy, np, pc, shared, names):
    return {k: pc.parameters_from_numpy(np.array(shared[k], dtype=np.float32)) for k in names}


def stacked(np, pc, shared, names, index=None):
    """One parameter of the named matrices stacked by rows (as DyNet's builders do)."""
    parts = [np.array(shared[k], dtype=np.float32) for k in names]
    if index is not None:
        parts = [p[index] for p in parts]
    return pc.parameters_from_numpy(np.concatenate(parts, axis=0))


def split_gradient(np, param, names):
    """The gradient of a parameter made by `stacked`, split back into its named parts."""
    return dict(zip(names, np.split(np.asarray(param.grad_as_array()), len(names), axis=0)))


def treelstm_builder(dy, np, pc, w):
    E = pc.lookup_parameters_from_numpy(np.array(w["E"], dtype=np.float32))
    h = len(w["BI"])
    WIOU = stacked(np, pc, w, ["WI", "WO", "WU"])
    UL = stacked(np, pc, w, ["UIL", "UOL", "UUL"])
    UR = stacked(np, pc, w, ["UIR", "UOR", "UUR"])
    BIOU = stacked(np, pc, w, ["BI", "BO", "BU"])
    p = params(dy, np, pc, w, ["UF1", "UF2", "BF", "WOUT", "BOUT"])

    def gates(iou):
        return (dy.logistic(dy.pick_range(iou, 0, h)), dy.logistic(dy.pick_range(iou, h, 2 * h)),
                dy.tanh(dy.pick_range(iou, 2 * h, 3 * h)))

    def node(m, n):
        if m["left"][n] < 0:
            i, o, u = gates(dy.affine_transform([BIOU, WIOU, E[m["word"][n]]]))
            c = dy.cmult(i, u)
            return dy.cmult(o, dy.tanh(c)), c
        h1, c1 = node(m, m["left"][n])
        h2, c2 = node(m, m["right"][n])
        i, o, u = gates(dy.affine_transform([BIOU, UL, h1, UR, h2]))
        f1 = dy.logistic(dy.affine_transform([p["BF"], p["UF1"], h1]))
        f2 = dy.logistic(dy.affine_transform([p["BF"], p["UF2"], h2]))
        c = dy.cmult(i, u) + dy.cmult(f1, c1) + dy.cmult(f2, c2)
        return dy.cmult(o, dy.tanh(c)), c

    def gradients():
        g = {"E": E.grad_as_array(), **{k: v.grad_as_array() for k, v in p.items()}}
        for param, names in [(WIOU, ["WI", "WO", "WU"]), (UL, ["UIL", "UOL", "UUL"]),
                             (UR, ["UIR", "UOR", "UUR"]), (BIOU, ["BI", "BO", "BU"])]:
            g.update(split_gradient(np, param, names))
        return g

    def build(ms):
        return [[dy.affine_transform([p["BOUT"], p["WOUT"], node(m, m["root"])[0]])] for m in ms]

    build.gradients = gradients
    return build


def mvrnn_builder(dy, np, pc, w):
    E = pc.lookup_parameters_from_numpy(np.array(w["E"], dtype=np.float32))
    lm = np.array(w["LM"], dtype=np.float32)
    LM = [pc.parameters_from_numpy(m) for m in lm]
    p = params(dy, np, pc, w, ["WL", "WR", "BIAS", "ML", "MR", "WOUT", "BOUT"])

    def node(m, n):
        if m["left"][n] < 0:
            word = m["word"][n]
            return E[word], LM[word % len(LM)].expr()
        a, A = node(m, m["left"][n])
        b, B = node(m, m["right"][n])
        v = dy.tanh(dy.affine_transform([p["BIAS"], p["WL"], B * a, p["WR"], A * b]))
        return v, p["ML"] * A + p["MR"] * B

    return lambda ms: [[dy.affine_transform([p["BOUT"], p["WOUT"], node(m, m["root"])[0]])]
                       for m in ms]


def birnn_builder(dy, np, pc, w):
    E = pc.lookup_parameters_from_numpy(np.array(w["E"], dtype=np.float32))
    h = len(w["BI"][0])
    dirs = [(stacked(np, pc, w, ["WI", "WF", "WO", "WU"], d),
             stacked(np, pc, w, ["UI", "UF", "UO", "UU"], d),
             stacked(np, pc, w, ["BI", "BF", "BO", "BU"], d)) for d in (0, 1)]
    p = params(dy, np, pc, w, ["WOUTF", "WOUTB", "BOUT"])

    def lstm(d, tokens):
        W, U, B = dirs[d]
        hh = dy.zeros(h)
        c = dy.zeros(h)
        for t in tokens:
            g = dy.affine_transform([B, W, E[t], U, hh])
            i = dy.logistic(dy.pick_range(g, 0, h))
            f = dy.logistic(dy.pick_range(g, h, 2 * h))
            o = dy.logistic(dy.pick_range(g, 2 * h, 3 * h))
            u = dy.tanh(dy.pick_range(g, 3 * h, 4 * h))
            c = dy.cmult(i, u) + dy.cmult(f, c)
            hh = dy.cmult(o, dy.tanh(c))
        return hh

    def one(m):
        toks = m["tokens"][:m["len"]]
        return [dy.affine_transform([p["BOUT"], p["WOUTF"], lstm(0, toks),
                                     p["WOUTB"], lstm(1, toks[::-1])])]

    def gradients():
        g = {"E": E.grad_as_array(), **{k: v.grad_as_array() for k, v in p.items()}}
        for i, names in enumerate([["WI", "WF", "WO", "WU"], ["UI", "UF", "UO", "UU"],
                                   ["BI", "BF", "BO", "BU"]]):
            parts = [split_gradient(np, dirs[d][i], names) for d in (0, 1)]
            g.update({k: np.stack([parts[0][k], parts[1][k]]) for k in names})
        return g

    def build(ms):
        return [one(m) for m in ms]

    build.gradients = gradients
    return build


def nested_builder(dy, np, pc, w):
    E = pc.lookup_parameters_from_numpy(np.array(w["E"], dtype=np.float32))
    h = len(w["BH"])
    p = params(dy, np, pc, w, ["WX", "WH", "BH", "VX", "VH", "BG", "WOUT", "BOUT"])

    def one(m):
        g = dy.zeros(h)
        for k in range(m["count"]):
            x = dy.zeros(h)
            for t in m["tokens"][k][:m["lens"][k]]:
                x = dy.tanh(dy.affine_transform([p["BH"], p["WX"], E[t], p["WH"], x]))
            g = dy.tanh(dy.affine_transform([p["BG"], p["VX"], x, p["VH"], g]))
        return [dy.affine_transform([p["BOUT"], p["WOUT"], g])]

    return lambda ms: [one(m) for m in ms]


def drnn_builder(dy, np, pc, w):
    p = params(dy, np, pc, w, ["WZ", "BZ", "UA", "UF", "BH", "WOUT"])
    WE = pc.parameters_from_numpy(np.array([w["WE"]], dtype=np.float32))
    WS = pc.parameters_from_numpy(np.array([w["WS"]], dtype=np.float32))
    be, bs, dmax = w["BE"], w["BS"], w["DMAX"]

    def run(ms):
        # level by level over the whole batch: the decisions need values
        scores = [[] for _ in ms]
        frontier = [(i, dy.tanh(dy.affine_transform([p["BZ"], p["WZ"], dy.inputVector(m["z"])])), 0)
                    for i, m in enumerate(ms)]
        while frontier:
            for i, hh, _ in frontier:
                scores[i].append(p["WOUT"] * hh)
            open_ = [(i, hh, d) for i, hh, d in frontier if d < dmax]
            es = [WE * hh for _, hh, _ in open_]
            if es:
                dy.forward(es)
            grow = [(i, hh, d) for (i, hh, d), e in zip(open_, es) if e.scalar_value() + be > 0]
            kids = []
            for i, hh, d in grow:
                ah = p["UA"] * hh
                kids.append((i, hh, d, ah, dy.tanh(ah + p["BH"])))
            ss = [WS * h1 for *_, h1 in kids]
            if ss:
                dy.forward(ss)
            frontier = []
            for (i, hh, d, ah, h1), s in zip(kids, ss):
                frontier.append((i, h1, d + 1))
                if s.scalar_value() + bs > 0:
                    frontier.append((i, dy.tanh(ah + p["UF"] * h1 + p["BH"]), d + 1))
        return [[dy.esum(s) * (1.0 / len(s)), dy.scalarInput(len(s))] for s in scores]

    return run


def berxit_builder(dy, np, pc, w):
    E = pc.lookup_parameters_from_numpy(np.array(w["E"], dtype=np.float32))
    pos = np.array(w["POS"], dtype=np.float32)
    seq, d = pos.shape
    POS = pc.parameters_from_numpy(pos.T)  # D x S: a column per position
    T = lambda a: pc.parameters_from_numpy(np.ascontiguousarray(np.array(a, dtype=np.float32).T))
    nl = len(w["W1"])
    heads = [[(T(w["WQ"][l][k]), T(w["WK"][l][k]), T(w["WV"][l][k]), T(w["WO"][l][k]))
              for k in range(len(w["WQ"][l]))] for l in range(nl)]
    W1 = [T(x) for x in w["W1"]]
    W2 = [T(x) for x in w["W2"]]
    WC = [pc.parameters_from_numpy(np.array(x, dtype=np.float32)) for x in w["WC"]]
    BC = [pc.parameters_from_numpy(np.array(x, dtype=np.float32)) for x in w["BC"]]
    thresh = w["THRESH"]
    dh = len(w["WQ"][0][0][0])
    ones_d = pc.parameters_from_numpy(np.ones((1, d), np.float32) / d)
    col_d = pc.parameters_from_numpy(np.ones((d, 1), np.float32))

    def norm(x):  # LayerNorm of every column (position) of a D x S matrix
        xc = x - col_d * (ones_d * x)
        var = ones_d * dy.cmult(xc, xc)
        return dy.cmult(xc, col_d * dy.cdiv(dy.ones((1, seq)), dy.sqrt(var + 1e-5)))

    def layer(l, x):
        a = None
        for wq, wk, wv, wo in heads[l]:
            q, k, v = wq * x, wk * x, wv * x
            att = dy.softmax(dy.transpose(k) * q * (1.0 / np.sqrt(dh)), d=0)  # keys x queries
            o = wo * (v * att)
            a = o if a is None else a + o
        x = norm(x + a)
        return norm(x + W2[l] * dy.rectify(W1[l] * x))

    def run(ms):
        xs = [dy.concatenate_cols([E[t] for t in m["tokens"]]) + POS for m in ms]
        result = [None] * len(ms)
        active = list(range(len(ms)))
        for l in range(nl):
            for i in active:
                xs[i] = layer(l, xs[i])
            cs = [dy.affine_transform([BC[l], WC[l], dy.select_cols(xs[i], [0])]) for i in active]
            probs = [dy.softmax(c) for c in cs]
            dy.forward(probs)
            still = []
            for i, c, pr in zip(active, cs, probs):
                if l == nl - 1 or max(pr.vec_value()) >= thresh:
                    result[i] = [c, dy.scalarInput(l)]
                else:
                    still.append(i)
            active = still
        return result

    return run


def stackrnn_builder(dy, np, pc, w):
    E = pc.lookup_parameters_from_numpy(np.array(w["E"], dtype=np.float32))
    h = len(w["BH"])
    p = params(dy, np, pc, w, ["WX", "WH", "WS", "BH", "WA", "BA", "WOUT", "BOUT"])
    cap = 16

    def run(ms):
        state = [{"h": dy.zeros(h), "stack": []} for _ in ms]
        for t in range(max(m["len"] for m in ms)):
            live = [i for i, m in enumerate(ms) if t < m["len"]]
            acts = []
            for i in live:
                s = state[i]
                top = s["stack"][-1] if s["stack"] else dy.zeros(h)
                s["h"] = dy.tanh(dy.affine_transform([p["BH"], p["WX"], E[ms[i]["tokens"][t]],
                                                      p["WH"], s["h"], p["WS"], top]))
                acts.append(dy.affine_transform([p["BA"], p["WA"], s["h"]]))
            dy.forward(acts)
            for i, a in zip(live, acts):
                best = int(np.argmax(a.npvalue()))
                st = state[i]["stack"]
                if best == 0 and len(st) < cap:
                    st.append(state[i]["h"])
                elif best == 1 and st:
                    st.pop()
        return [[dy.affine_transform([p["BOUT"], p["WOUT"], s["h"]]), dy.scalarInput(len(s["stack"]))]
                for s in state]

    return run


BUILDERS = {"treelstm": treelstm_builder, "mvrnn": mvrnn_builder, "birnn": birnn_builder,
            "nested": nested_builder, "drnn": drnn_builder, "berxit": berxit_builder,
            "stackrnn": stackrnn_builder}


# ------------------------------------------------------------- main -----

def max_difference(a, b):
    return max(abs(x - y) / max(1.0, abs(y)) for u, v in zip(a, b) for x, y in zip(u, v))


def gradient_differences(ours, theirs):
    """Per static: max |ours - theirs| / max |theirs| (1 where theirs is all zero)."""
    out = {}
    for name, g in theirs.items():
        a, b = flatten(ours[name], []), flatten(g, [])
        assert len(a) == len(b), (name, len(a), len(b))
        scale = max(abs(y) for y in b) or 1.0
        out[name] = max(abs(x - y) for x, y in zip(a, b)) / scale
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    ap.add_argument("--batches", nargs="+", type=int, default=[8, 64, 256])
    ap.add_argument("--hidden", nargs="+", type=int, default=[128, 256])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per process")
    ap.add_argument("--dynet", nargs="*", type=int, default=[0, 1, 2], help="autobatch settings")
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES),
                    help="our strategies to run")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--train", action="store_true",
                    help="bench a training step (loss and gradients; treelstm and birnn)")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo build")
    ap.add_argument("--warmup", type=float, default=0.2,
                    help="seconds of untimed runs before the timed ones, on both sides")
    ap.add_argument("--threads", type=int,
                    help="threads of both sides (ours --threads, DyNet's pools; both under taskset)")
    ap.add_argument("--python", action="store_true",
                    help="bench ours through the Python package (BoundProgram, one thread)")
    ap.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    ap.add_argument("--python-worker", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(*a.worker)
    if a.python_worker:
        return python_worker(*a.python_worker)
    set_strategies(a.strategies)
    global WARMUP, THREADS
    WARMUP = a.warmup
    THREADS = a.threads

    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "autobatch-bench"], cwd=ROOT,
                       check=True)
    if a.python:
        THREADS = 1
        return python_bench(a)
    if a.train:
        return train_bench(a)
    rows = []
    ours = [c for c, _, _ in ours_columns("treelstm")]
    print("| model | hidden | batch | " + " | ".join(f"ours {c} (util)" for c in ours)
          + " | " + " | ".join(f"DyNet ab={b}" for b in a.dynet) + " | ours best / DyNet best |")
    print("|" + "---|" * (4 + len(ours) + len(a.dynet)))
    for model in a.models:
        for hidden in a.hidden:
            for batch in a.batches:
                row = {"model": model, "hidden": hidden, "batch": batch}
                with tempfile.TemporaryDirectory() as tmp:
                    inputs = os.path.join(tmp, "inputs.json")
                    write_inputs(model, batch, hidden, inputs)
                    ours_out = None
                    for column, program, s in ours_columns(model):
                        try:
                            wall, util, ours_out = run_ours(model, program, inputs, s, a.runs,
                                                            a.timeout)
                            row[column] = {"items_per_second": batch / wall,
                                           "lane_utilization": util}
                        except subprocess.SubprocessError as e:
                            row[column] = {"error": str(e)}
                    for b in a.dynet:
                        try:
                            secs, out = run_dynet(model, inputs, b, a.runs, a.timeout)
                            row[f"dynet{b}"] = {"items_per_second": batch / secs}
                            if ours_out is not None:
                                row[f"dynet{b}"]["max_difference"] = max_difference(out, ours_out)
                        except subprocess.SubprocessError as e:
                            row[f"dynet{b}"] = {"error": str(e)}
                rows.append(row)
                print(format_row(row, a.dynet), flush=True)
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)


def train_bench(a):
    others = [m for m in a.models if m not in TRAIN]
    if others:
        sys.exit(f"--train: no `loss` entry in {', '.join(others)} (only {', '.join(TRAIN)})")
    ours = [SHORT[s] for s in STRATEGIES]
    print("| model | hidden | batch | " + " | ".join(f"ours {c} (util)" for c in ours)
          + " | " + " | ".join(f"DyNet ab={b}" for b in a.dynet)
          + " | ours best / DyNet best | max gradient difference (static) | max loss difference |")
    print("|" + "---|" * (6 + len(ours) + len(a.dynet)))
    rows = []
    for model in a.models:
        for hidden in a.hidden:
            for batch in a.batches:
                rows.append(train_row(model, hidden, batch, a))
                print(format_train_row(rows[-1], a.dynet), flush=True)
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)


def train_row(model, hidden, batch, a):
    """Runs ours and DyNet on one training batch; compares losses and gradients."""
    row = {"model": model, "hidden": hidden, "batch": batch, "gradient_difference": {},
           "loss_difference": {}}
    ours, theirs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "inputs.json")
        write_inputs(model, batch, hidden, inputs, train=True)
        for column, _, s in ours_columns(model, train=True):
            try:
                wall, util, losses, grads = run_ours_train(model, inputs, s, a.runs, a.timeout)
                row[column] = {"items_per_second": batch / wall, "seconds": wall,
                               "lane_utilization": util}
                ours[column] = (losses, grads)
            except subprocess.SubprocessError as e:
                row[column] = {"error": str(e)}
        for b in a.dynet:
            try:
                secs, doc = run_dynet(model, inputs, b, a.runs, a.timeout, mode="train")
                row[f"dynet{b}"] = {"items_per_second": batch / secs, "seconds": secs,
                                    "pickneglogsoftmax_vs_formula": doc["formula_difference"]}
                theirs[f"dynet{b}"] = (doc["losses"], doc["gradients"])
            except subprocess.SubprocessError as e:
                row[f"dynet{b}"] = {"error": str(e)}
    for c, (losses, grads) in ours.items():
        for d, (their_losses, their_grads) in theirs.items():
            row["loss_difference"][f"{c} vs {d}"] = max_difference([losses], [their_losses])
            row["gradient_difference"][f"{c} vs {d}"] = gradient_differences(grads, their_grads)
    ours_best = max((row[c].get("items_per_second", 0) for c in ours), default=0)
    theirs_best = max((row[d].get("items_per_second", 0) for d in theirs), default=0)
    if ours_best and theirs_best:
        row["ours_best_over_dynet_best"] = ours_best / theirs_best
    return row


def format_train_row(row, dynet):
    def ips(cell):
        return f"{cell['items_per_second']:.0f}" if "items_per_second" in cell else "failed"

    columns = [SHORT[s] for s in STRATEGIES]
    cells = [f"{ips(row[c])} ({row[c].get('lane_utilization', 0):.3f})" for c in columns]
    cells += [ips(row[f"dynet{b}"]) for b in dynet]
    ours = max((row[c].get("items_per_second", 0) for c in columns), default=0)
    theirs = max((row[f"dynet{b}"].get("items_per_second", 0) for b in dynet), default=0)
    cells.append(f"{ours / theirs:.2f}" if ours and theirs else "-")
    worst = max(((d, name) for pair in row["gradient_difference"].values()
                 for name, d in pair.items()), default=None)
    cells.append(f"{worst[0]:.1e} ({worst[1]})" if worst else "-")
    loss = max(row["loss_difference"].values(), default=None)
    cells.append(f"{loss:.1e}" if loss is not None else "-")
    return f"| {row['model']} | {row['hidden']} | {row['batch']} | " + " | ".join(cells) + " |"


def format_row(row, dynet):
    def ips(cell):
        return f"{cell['items_per_second']:.0f}" if "items_per_second" in cell else "failed"

    columns = [c for c, _, _ in ours_columns("treelstm")]
    cells = [f"{ips(row[c])} ({row[c].get('lane_utilization', 0):.3f})" if c in row else "-"
             for c in columns]
    cells += [ips(row[f"dynet{b}"]) for b in dynet]
    ours = max((row[c].get("items_per_second", 0) for c in columns if c in row), default=0)
    theirs = max((row[f"dynet{b}"].get("items_per_second", 0) for b in dynet), default=0)
    ratio = f"{ours / theirs:.2f}" if ours and theirs else "-"
    return f"| {row['model']} | {row['hidden']} | {row['batch']} | " + " | ".join(cells) + f" | {ratio} |"


if __name__ == "__main__":
    main()
