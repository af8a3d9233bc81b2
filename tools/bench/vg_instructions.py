#!/usr/bin/env python3
"""Instructions per logistic-regression `value_and_grad` (N = 10,000,
D = 100, X and Y shared, one theta per member), counted by valgrind's
callgrind: a figure the load of a shared machine does not change.

Runs `autobatch-bench model` on crates/bench/programs/logreg_value_and_grad.ab
(f64, or its f32 form) with program-counter on one thread, twice: every
member taking 1 gradient step, then 3. The difference of the two counts
over 2 x batch is the count of one gradient (setup, parsing and binding
cancel). Inputs are generated once (seeded) into --work.

    python3 tools/bench/vg_instructions.py --precision f32 --batch 256 --path avx2

(target/release/autobatch-bench built first; callgrind runs the AVX2 path
at most: it does not emulate AVX-512.)
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, D = 10_000, 100


def inputs(work, batch, steps):
    """The inputs file of `batch` members taking `steps` steps (written once)."""
    path = os.path.join(work, f"logreg_b{batch}_s{steps}.json")
    if not os.path.exists(path):
        rng = random.Random(2026)
        x = [[rng.uniform(-1.0, 1.0) for _ in range(D)] for _ in range(N)]
        y = [float(rng.random() < 0.5) for _ in range(N)]
        theta = [[0.1 * (rng.random() - 0.5) for _ in range(D)] for _ in range(batch)]
        with open(path, "w") as f:
            json.dump({"batch": {"theta": theta, "count": [steps] * batch},
                       "shared": {"X": x, "Y": y}}, f)
    return path


def program(work, precision):
    source = open(os.path.join(ROOT, "crates/bench/programs/logreg_value_and_grad.ab")).read()
    path = os.path.join(work, f"logreg_value_and_grad_{precision}.ab")
    with open(path, "w") as f:
        f.write(source.replace("f64", precision))
    return path


def count(args, steps):
    """Instructions of one run of the benchmark process (callgrind's total)."""
    out = os.path.join(args.work, f"callgrind.{args.precision}.{args.batch}.{steps}")
    env = dict(os.environ, AUTOBATCH_SIMD=args.path)
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", args.bench,
               "model", program(args.work, args.precision), "--entry", "gradients",
               "--inputs", inputs(args.work, args.batch, steps),
               "--strategy", "program-counter", "--runs", "1", "--threads", "1"]
    run = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, check=True)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if not found:
        sys.exit(f"vg_instructions: no callgrind total in:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", choices=["f32", "f64"], default="f32")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--path", default="avx2", help="AUTOBATCH_SIMD (avx2 or portable)")
    parser.add_argument("--bench", default=os.path.join(ROOT, "target/release/autobatch-bench"))
    parser.add_argument("--work", default="/tmp/vg_instructions")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    one, three = count(args, 1), count(args, 3)
    # Each run runs the batch three times (a cold run, a timed one, a counted one).
    gradients = 3 * 2 * args.batch
    print(json.dumps({
        "precision": args.precision, "batch": args.batch, "simd_path": args.path,
        "bench": args.bench, "instructions_1_step": one, "instructions_3_steps": three,
        "instructions_per_gradient": (three - one) / gradients,
    }))


if __name__ == "__main__":
    main()
