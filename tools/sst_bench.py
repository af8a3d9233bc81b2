#!/usr/bin/env python3
"""One epoch of TreeLSTM training on the Stanford Sentiment Treebank, ours
against DyNet, from the same initial weights (not run by CI).

The model is dynet-benchmark's `treenn` (dynet-py/treenn.py): embedding and
hidden size 128, the loss of a tree summed over every node's label, Adam
(lr 0.001, beta 0.9/0.999, eps 1e-8; the embedding's rows updated lazily,
only those a mini-batch read, as DyNet's default sparse updates and ours
by default; `--dense-updates` updates every row on both sides), accuracy of the
root's label on the dev set. Ours is examples/models/treelstm_sst.ab
trained by `autobatch train` (release build); DyNet's is the same network
built per tree as treenn does, with DyNet's autobatching on (each
mini-batch's trees in one graph). Both read the weights this script draws
(tools/treelstm_inputs.py's `weights`, seed 0) and see mini-batches of the
same size; each shuffles the training set with its own generator, so the
orders differ. The vocabulary is the training set's words (id 0 `_UNK_`
for the others), as treenn's.

Our objective is the mini-batch's mean loss, DyNet's their sum: Adam's
update does not depend on the loss's scale (but for eps), so the two train
alike.

`--repeats N` runs each batch size N times, the sides alternating (ours,
DyNet, ours, ...), for a machine other work shares.

Per side: the process's CPU time (user and system), the epoch's training time (ours: the sum of the steps' times of
`--log`, i.e. what the steps took without reading, compiling or the dev
evaluation; DyNet: its loop over the mini-batches), the whole process's
wall time, and the dev accuracy after the epoch. Both sides at `--threads`
(default 1) under tools/bench/common.py's restriction.

    tools/sst_bench.py --sst ../shared/data/sst --batch-sizes 16 64 --json /tmp/sst.json
    tools/sst_bench.py --sst ../shared/data/sst --trees 256 --batch-sizes 16   # a smoke run

`--small` writes instead the test input of examples/models (the first
trees of examples/data/sst/test.txt, hidden and embedding 8) and, with
numpy in float32, each tree's loss as the expected output:

    tools/sst_bench.py --small examples/models/treelstm_sst_small.json \
        examples/models/treelstm_sst_small.expect.json
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "bench"))
import common  # noqa: E402
from treelstm_inputs import combined_state, leaf_state, parse, weights  # noqa: E402

PROGRAM = os.path.join(common.ROOT, "examples/models/treelstm_sst.ab")
AUTOBATCH = os.path.join(common.RELEASE, "autobatch")
DYNET_PYTHON = os.environ.get("DYNET_PYTHON", os.path.join(common.PEERS, "dynet/bin/python"))


def flatten(tree, vocab, grow):
    """Post-order arrays of a tree: a preterminal (label word) is a leaf."""
    left, right, word, label = [], [], [], []

    def visit(node):
        tag, kids = node
        if len(kids) == 1 and isinstance(kids[0], str):
            w = vocab.setdefault(kids[0], len(vocab)) if grow else vocab.get(kids[0], 0)
            left.append(-1)
            right.append(-1)
            word.append(w)
        else:
            assert len(kids) == 2, "SST trees are binary"
            a, b = visit(kids[0]), visit(kids[1])
            left.append(a)
            right.append(b)
            word.append(0)
        label.append(int(tag))
        return len(left) - 1

    root = visit(tree)
    return {"left": left, "right": right, "word": word, "label": label, "root": root}


def read_trees(path, vocab, grow, count=None):
    with open(path) as f:
        lines = [l for l in f if l.strip()][:count]
    return [flatten(parse(l), vocab, grow) for l in lines]


def write_batch(trees, path):
    batch = {k: [t[k] for t in trees] for k in ("left", "right", "word", "label", "root")}
    with open(path, "w") as f:
        json.dump({"batch": batch}, f)


def initial_weights(np, vocab_size, hidden, embed):
    w = weights(0, vocab_size, hidden, embed)
    w["W"] = w.pop("WOUT")
    del w["BOUT"]
    return w


def ours(a, batch_size, files, out_dir):
    log = os.path.join(out_dir, f"ours_{batch_size}.json")
    cmd = [AUTOBATCH, "train", PROGRAM, "--entry", "loss", "--data", files["train"],
           "--statics", files["init"], "--optimizer", "adam", "--lr", "0.001",
           "--batch-size", str(batch_size), "--epochs", "1", "--eval", "correct",
           "--dev", files["dev"], "--log", log, "--threads", str(a.threads), "--seed", "0"]
    if a.dense_updates:
        cmd.append("--dense-updates")
    if a.strategy:
        cmd += ["--strategy", a.strategy]
    cmd, env = common.restricted(cmd, a.threads)
    t0, cpu0 = time.perf_counter(), children_cpu()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    with open(log) as f:
        history = json.load(f)
    train = sum(s["members"] / s["items_per_second"] for s in history["steps"])
    dev = history["epochs"][-1]["dev"]
    return {"train_seconds": train, "process_seconds": wall, "process_cpu_seconds": cpu,
            "dev_accuracy": dev["mean"],
            "steps": len(history["steps"]), "final_loss": history["epochs"][-1]["loss"]}


def dynet(a, batch_size, files, out_dir):
    out = os.path.join(out_dir, f"dynet_{batch_size}.json")
    cmd = [DYNET_PYTHON, os.path.abspath(__file__), "--worker", files["train"], files["dev"],
           files["init"], str(batch_size), out, "dense" if a.dense_updates else "sparse"]
    cmd, env = common.restricted(cmd, a.threads)
    t0, cpu0 = time.perf_counter(), children_cpu()
    subprocess.run(cmd, env=env, check=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    with open(out) as f:
        result = json.load(f)
    result["process_seconds"] = wall
    result["process_cpu_seconds"] = cpu
    return result


def children_cpu():
    """The CPU seconds (user and system) of the finished child processes:
    on a machine other work shares, a side's CPU time is steadier than its
    wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def worker(train_path, dev_path, init_path, batch_size, out_path, updates):
    """DyNet's side, in DyNet's Python: treenn's network and loop."""
    import random

    import dynet_config

    dynet_config.set(autobatch=1, random_seed=1)
    import dynet as dy
    import numpy as np

    w = dict(np.load(init_path))
    with open(train_path) as f:
        train = json.load(f)["batch"]
    with open(dev_path) as f:
        dev = json.load(f)["batch"]
    pc = dy.ParameterCollection()
    E = pc.lookup_parameters_from_numpy(w["E"])
    h = w["BI"].shape[0]
    stack = lambda *names: pc.parameters_from_numpy(np.concatenate([w[n] for n in names], 0))
    WIOU, UL, UR, BIOU = (stack("WI", "WO", "WU"), stack("UIL", "UOL", "UUL"),
                          stack("UIR", "UOR", "UUR"), stack("BI", "BO", "BU"))
    UF1, UF2, BF, Wout = (pc.parameters_from_numpy(w[n]) for n in ("UF1", "UF2", "BF", "W"))
    trainer = dy.AdamTrainer(pc, alpha=0.001, beta_1=0.9, beta_2=0.999, eps=1e-8)
    trainer.set_clip_threshold(-1.0)
    trainer.set_sparse_updates(updates == "sparse")

    def gates(iou):
        return (dy.logistic(dy.pick_range(iou, 0, h)), dy.logistic(dy.pick_range(iou, h, 2 * h)),
                dy.tanh(dy.pick_range(iou, 2 * h, 3 * h)))

    def node(t, n, losses):
        if t["left"][n] < 0:
            i, o, u = gates(dy.affine_transform([BIOU, WIOU, E[t["word"][n]]]))
            c = dy.cmult(i, u)
        else:
            h1, c1 = node(t, t["left"][n], losses)
            h2, c2 = node(t, t["right"][n], losses)
            i, o, u = gates(dy.affine_transform([BIOU, UL, h1, UR, h2]))
            f1 = dy.logistic(dy.affine_transform([BF, UF1, h1]))
            f2 = dy.logistic(dy.affine_transform([BF, UF2, h2]))
            c = dy.cmult(i, u) + dy.cmult(f1, c1) + dy.cmult(f2, c2)
        hn = dy.cmult(o, dy.tanh(c))
        if losses is not None:
            losses.append(dy.pickneglogsoftmax(Wout * hn, t["label"][n]))
        return hn, c

    def tree(batch, k):
        return {key: batch[key][k] for key in ("left", "right", "word", "label", "root")}

    order = list(range(len(train["root"])))
    random.Random(0).shuffle(order)
    t0 = time.perf_counter()
    total = 0.0
    for start in range(0, len(order), batch_size):
        dy.renew_cg()
        losses = []
        for k in order[start:start + batch_size]:
            t = tree(train, k)
            node(t, t["root"], losses)
        loss = dy.esum(losses)
        total += loss.value()
        loss.backward()
        trainer.update()
    train_seconds = time.perf_counter() - t0
    good = 0
    for k in range(len(dev["root"])):
        dy.renew_cg()
        t = tree(dev, k)
        hn, _ = node(t, t["root"], None)
        good += int(np.argmax((Wout * hn).npvalue()) == t["label"][t["root"]])
    with open(out_path, "w") as f:
        json.dump({"train_seconds": train_seconds, "dev_accuracy": good / len(dev["root"]),
                   "mean_tree_loss": total / len(order)}, f)


def reference_loss(np, w, t):
    """A tree's summed loss, as the program computes it, in float32."""
    total = 0.0

    def node(n):
        nonlocal total
        if t["left"][n] < 0:
            h, c = leaf_state(w, t["word"][n])
        else:
            h, c = combined_state(w, *node(t["left"][n]), *node(t["right"][n]))
        z = (w["W"] @ h).astype(np.float64)
        total += z.max() + np.log(np.exp(z - z.max()).sum()) - z[t["label"][n]]
        return h, c

    node(t["root"])
    return total


def small(inputs_path, expect_path):
    import numpy as np

    vocab = {"_UNK_": 0}
    trees = read_trees(os.path.join(common.ROOT, "examples/data/sst/test.txt"), vocab, True, 6)
    w = initial_weights(np, len(vocab), 8, 8)
    batch = {k: [t[k] for t in trees] for k in ("left", "right", "word", "label", "root")}
    with open(inputs_path, "w") as f:
        json.dump({"batch": batch, "shared": {k: v.tolist() for k, v in w.items()}}, f)
    with open(expect_path, "w") as f:
        json.dump([[reference_loss(np, w, t)] for t in trees], f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sst", default=os.path.join(common.ROOT, "../shared/data/sst"),
                    help="the directory of the treebank's train.txt and dev.txt")
    ap.add_argument("--trees", type=int, help="train on the first N trees only (a smoke run)")
    ap.add_argument("--batch-sizes", nargs="+", type=int, default=[16, 64])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--embed", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sides", nargs="+", default=["ours", "dynet"], choices=["ours", "dynet"])
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each batch size, the sides alternating")
    ap.add_argument("--dense-updates", action="store_true",
                    help="update every row of the embedding at every step, on both sides")
    ap.add_argument("--strategy", help="our strategy (default: none given, so auto picks)")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--small", nargs=2, metavar=("INPUTS", "EXPECT"),
                    help="write the small test input and its numpy losses")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.small:
        small(*a.small)
        return 0
    if a.worker:
        worker(*a.worker[:3], int(a.worker[3]), *a.worker[4:])
        return 0
    import numpy as np

    vocab = {"_UNK_": 0}
    train = read_trees(os.path.join(a.sst, "train.txt"), vocab, True, a.trees)
    dev = read_trees(os.path.join(a.sst, "dev.txt"), vocab, False)
    out_dir = tempfile.mkdtemp(prefix="sst_bench_")
    files = {k: os.path.join(out_dir, f"{k}.json") for k in ("train", "dev")}
    files["init"] = os.path.join(out_dir, "init.npz")
    write_batch(train, files["train"])
    write_batch(dev, files["dev"])
    np.savez(files["init"], **initial_weights(np, len(vocab), a.hidden, a.embed))
    common.log(f"{len(train)} training trees, {len(dev)} dev trees, vocabulary {len(vocab)}")
    rows = []
    for batch_size in a.batch_sizes:
        row = {"batch_size": batch_size, "runs": []}
        for repeat in range(a.repeats):
            run = {}
            for side in a.sides:
                common.log(f"batch {batch_size}, run {repeat + 1}: {side}")
                run[side] = (ours if side == "ours" else dynet)(a, batch_size, files, out_dir)
            row["runs"].append(run)
        rows.append(row)
    print(f"SST TreeLSTM, one epoch ({len(train)} trees), hidden {a.hidden}, "
          f"{a.threads} thread(s) each; {common.machine()['cpu_model']}")
    print("| batch | run | side | train s | process s | process CPU s | trees/s | dev accuracy |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        for k, run in enumerate(row["runs"]):
            for side in a.sides:
                r = run[side]
                print(f"| {row['batch_size']} | {k + 1} | {side} | {r['train_seconds']:.1f} | "
                      f"{r['process_seconds']:.1f} | {r['process_cpu_seconds']:.1f} | "
                      f"{len(train) / r['train_seconds']:.0f} | "
                      f"{r['dev_accuracy']:.4f} |")
    if a.json:
        document = {"provenance": common.provenance(sys.argv), "machine": common.machine(),
                    "threads": a.threads, "trees": len(train), "hidden": a.hidden,
                    "embed": a.embed, "dense_updates": a.dense_updates,
                    "repeats": a.repeats, "rows": rows}
        with open(a.json, "w") as f:
            json.dump(document, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
