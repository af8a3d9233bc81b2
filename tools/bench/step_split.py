#!/usr/bin/env python3
"""Where a warm native-batched step of a model spends its instructions,
counted by valgrind's callgrind (a figure the load of a shared machine
does not change).

Writes `tools/dynet_bench.py`'s inputs for MODEL (hidden, batch; with
labels for --train), runs `autobatch-bench model` under callgrind with
`--runs 2`, dumping a profile at the start of every run
(`--dump-before` of `BoundBatch::run_observed`), and splits the profile
of the second warm run (the step after one warm step) by function into
the parts of the table printed (a `memcpy` or a sort goes to its
caller's part):

    .peers/numpy/bin/python tools/bench/step_split.py --model treelstm \\
        --batch 64 --hidden 128 --train

(target/release/autobatch-bench built first; callgrind runs the AVX2 path
at most.) `--profile FILE` splits a profile already written instead.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUN = "autobatch::run::<impl autobatch::bind::BoundBatch>::run_observed"

# The parts, in the order printed: (name, test of a function's name).
PARTS = [
    ("products (matvec, vecmat kernels)", lambda f: "gemm::" in f),
    ("static gradients: outer-product sums",
     lambda f: "adjoints::tiles" in f or "adjoints::outer" in f),
    ("static gradients: records (log, sort, sum)",
     lambda f: "adjoints::" in f),
    ("elementwise: vmath (sigmoid, tanh, exp)", lambda f: "vmath::" in f),
    ("elementwise: dispatch and the other ops",
     lambda f: any(s in f for s in ("elementwise::", "arrays::apply", "arrays::array_op",
                                     "reduce::", "layout::", "scalar::"))),
    ("tape push/pop", lambda f: "native::tape" in f or "move_tape" in f or "tape_pop" in f),
    ("scheduler, gathering/scattering rows, switching",
     lambda f: "waits::" in f or "corosensei" in f),
    ("allocation (malloc, free, realloc)",
     lambda f: re.search(r"malloc|free|realloc|calloc|_int_|__rust_(de|re)?alloc|finish_grow", f)),
    ("member native code (JIT)", lambda f: f.startswith("0x")),
    ("other", lambda f: True),
]
# Functions whose cost goes to their callers' parts.
GLUE = re.compile(r"memcpy|memmove|memset|core::iter::adapters|extend_desugared|spec_from_iter"
                  r"|core::slice::sort")


def parse(path):
    """Each function's own instructions, and each call's (caller, callee)
    inclusive instructions, from a callgrind profile."""
    names, own, calls = {}, collections.Counter(), collections.Counter()
    fn = cfn = None
    in_call = False

    def name(token):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", token)
        if not m:
            return token
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names[m.group(1)]

    with open(path, errors="replace") as f:
        for line in f:
            if line[:1].isdigit() or line[:1] in "+-*":
                fields = line.split()
                cost = int(fields[1]) if len(fields) > 1 else 0
                if in_call:
                    calls[(fn, cfn)] += cost
                    in_call = False
                else:
                    own[fn] += cost
            elif line.startswith("fn="):
                fn = name(line[3:].strip())
            elif line.startswith("cfn="):
                cfn = name(line[4:].strip())
            elif line.startswith("calls="):
                in_call = True
    return own, calls


def part_of(function):
    return next(p for p, test in PARTS if test(function or ""))


def split(path):
    own, calls = parse(path)
    callers = collections.defaultdict(collections.Counter)
    for (caller, callee), cost in calls.items():
        callers[callee][caller] += cost

    def owner(function, seen=()):
        """The caller shares of a glue function's cost: {function: share}
        (through glue callers, recursive calls left out)."""
        seen = seen + (function,)
        up = {c: cost for c, cost in callers[function].items() if cost > 0 and c not in seen}
        if not GLUE.search(function or "") or not up:
            return {function: 1.0}
        total = sum(up.values())
        shares = collections.Counter()
        for caller, cost in up.items():
            for f, s in owner(caller, seen).items():
                shares[f] += s * cost / total
        return shares

    parts = collections.Counter()
    for function, cost in own.items():
        for f, share in owner(function).items():
            parts[part_of(f)] += cost * share
    return sum(own.values()), parts


def profile(a):
    sys.path.insert(0, os.path.dirname(HERE))
    import dynet_bench

    tag = f"{a.model}_h{a.hidden}_b{a.batch}{'_train' if a.train else ''}"
    inputs = os.path.join(a.work, tag + ".json")
    dynet_bench.write_inputs(a.model, a.batch, a.hidden, inputs, train=a.train)
    if a.train:
        import json
        with open(inputs) as f:
            statics = list(json.load(f)["shared"])
        entry = ["--entry", "loss", "--grad-statics", ",".join(statics)]
    else:
        entry = ["--entry", dynet_bench.ENTRY.get(a.model, "classify")]
    out = os.path.join(a.work, "callgrind." + tag)
    subprocess.run(["valgrind", "--tool=callgrind", f"--dump-before={RUN}",
                    f"--callgrind-out-file={out}", a.bench, "model",
                    os.path.join(ROOT, "examples/models", a.model + ".ab"), *entry,
                    "--inputs", inputs, "--strategy", "native-batched", "--threads", "1",
                    "--runs", "2", "--warmup", "0"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Dumps: 1 before the first run, 2 the cold run, 3 and 4 the warm ones.
    return out + ".4"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="treelstm")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--train", action="store_true", help="the loss and every static's gradient")
    p.add_argument("--bench", default=os.path.join(ROOT, "target/release/autobatch-bench"))
    p.add_argument("--work", default="/tmp/step_split")
    p.add_argument("--profile", help="split this callgrind profile instead of running one")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    path = a.profile or profile(a)
    total, parts = split(path)
    print(f"{path}: {total / 1e6:.1f} million instructions")
    for name, _ in PARTS:
        print(f"{parts[name] / 1e6:10.1f} M {100 * parts[name] / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
