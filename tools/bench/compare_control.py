"""The control workloads (fib, Collatz step counts, a nested loop) in C,
member by member, compiled with gcc -O1 and -O2, against our strategies.

C: tools/peers/control.c, each member's function in turn (OpenMP splits the
members over the setting's threads). Ours: `autobatch-bench model
crates/bench/programs/W.ab` (compile and bind once, a cold run, untimed runs
for the warm-up, then the timed runs: what a program calling the
`autobatch` library does batch after batch), `--threads` the setting's.
OpenMP's threads wait passively (OMP_WAIT_POLICY=passive, as our idle
workers sleep): spinning threads that lose their core to another process
made a run of the team wait for a time slice. Both sides: the same
members' inputs, the same warm-up seconds, the median
of the same number of runs, under the same `taskset`; the execution alone
(our `wall_seconds`; C's clock around its loop). Each side's wrapping sum
of the members' results is recorded: they must agree.
"""
import json
import os
import subprocess
import tempfile

import common

WORKLOADS = {"fib": "fib", "collatz": "collatz", "nested": "nested", "nested-same": "nested"}
INPUTS = {
    "fib": lambda i: 15 + i % 6,
    "collatz": lambda i: 1 + (i * 7919) % 100000,
    "nested": lambda i: 20 + i % 21,
    "nested-same": lambda i: 30,
}
STRATEGIES = ["program-counter", "local-static", "native", "native-batched", "native-lockstep"]


def compile_c(tmp):
    """gcc -O1 and -O2 builds of control.c: {flag: binary}."""
    source = os.path.join(common.ROOT, "tools/peers/control.c")
    out = {}
    for flag in ("-O1", "-O2"):
        binary = os.path.join(tmp, f"control{flag}")
        subprocess.run(["gcc", flag, "-fopenmp", "-o", binary, source], check=True)
        out[flag] = binary
    return out


def wrapping_sum(values):
    total = sum(values) % (1 << 64)
    return total - (1 << 64) if total >= 1 << 63 else total


def run(args):
    members = 256 if args.quick else 1024
    runs, warmup = (3, 0.1) if args.quick else (11, 1.0)
    workloads = ["fib", "collatz"] if args.quick else list(WORKLOADS)
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        binaries = compile_c(tmp)
        for workload in workloads:
            inputs = os.path.join(tmp, f"{workload}.json")
            with open(inputs, "w") as f:
                json.dump({"batch": {"n": [INPUTS[workload](i) for i in range(members)]},
                           "shared": {}}, f)
            for threads in common.settings(args.threads):
                for flag, binary in binaries.items():
                    command, env = common.restricted(
                        [binary, workload, str(members), str(runs), str(warmup)], threads,
                        extra={"OMP_WAIT_POLICY": "passive"})
                    doc = common.run_json(command, env)
                    cells.append({"workload": workload, "members": members, "threads": threads,
                                  "side": f"gcc {flag}", "seconds": doc["seconds"],
                                  "members_per_second": members / doc["median_seconds"],
                                  "result_sum": doc["result_sum"]})
                    common.log(f"control {workload} {threads} thread(s) gcc {flag}: "
                               f"{cells[-1]['members_per_second']:.0f} members/s")
                for strategy in STRATEGIES:
                    cells.append(ours(workload, inputs, strategy, threads, runs, warmup, members))
    return {
        "what": "members per second, execution alone, median of the timed runs",
        "members": members, "runs": runs, "warmup_seconds": warmup,
        "gcc": subprocess.run(["gcc", "--version"], capture_output=True,
                              text=True).stdout.splitlines()[0],
        "cells": cells,
    }


def ours(workload, inputs, strategy, threads, runs, warmup, members):
    program = os.path.join(common.ROOT, "crates/bench/programs", WORKLOADS[workload] + ".ab")
    command, env = common.restricted(
        [os.path.join(common.RELEASE, "autobatch-bench"), "model", program,
         "--entry", WORKLOADS[workload], "--inputs", inputs, "--strategy", strategy,
         "--threads", str(threads), "--runs", str(runs), "--warmup", str(warmup)], threads)
    try:
        report = common.run_json(command, env)
    except RuntimeError as e:
        return {"workload": workload, "members": members, "threads": threads, "side": "ours",
                "strategy": strategy, "error": str(e)}
    results = [r["ok"] for r in report["document"]["results"]]
    cell = {"workload": workload, "members": members, "threads": threads, "side": "ours",
            "strategy": strategy, "seconds": report["seconds"],
            "members_per_second": members / report["median_seconds"],
            "cold_seconds": report["cold_seconds"],
            "lane_utilization": report["document"]["stats"].get("lane_utilization"),
            "result_sum": wrapping_sum(results)}
    common.log(f"control {workload} {threads} thread(s) {strategy}: "
               f"{cell['members_per_second']:.0f} members/s")
    return cell
