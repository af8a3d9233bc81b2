"""What every comparison of tools/bench/run shares: the machine's
description, the thread restrictions of each side, the peers' Pythons and
the results file.

Equal threads: a setting gives both sides the same cores. Each process of
either side runs under `taskset -c CPUS` (the first `threads` cores), and
the peers' own thread pools are told the count: OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS (OpenBLAS, DyNet's Eigen, gcc's
OpenMP), and for JAX, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1" at one thread. Our side gets `--threads`.
"""
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS = os.path.join(ROOT, ".peers")
RELEASE = os.path.join(ROOT, "target", "release")
# Variables that choose a peer's thread count, set to the setting's count.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# Set on some machines for old OpenBLAS builds; they pin OpenBLAS's kernel
# (see `simd_environment`).
OPENBLAS_PINS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# The kernels' paths we measure, and OpenBLAS's kernel for the same width:
# on an AVX-512 CPU, "avx2" is the CPU restricted to the AVX2 path.
OPENBLAS_CORETYPE = {"avx512": None, "avx2": "Haswell"}


def cores():
    return len(os.sched_getaffinity(0))


def machine():
    """CPU model, its SIMD flags among avx2 / avx512f / fma / neon, and cores."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Hardware") and model in ("", platform.machine()):
                    model = value.strip()
                if key in ("flags", "Features"):
                    flags.update(value.split())
    except OSError:
        pass
    simd = sorted(f for f in ("avx2", "avx512f", "fma", "neon", "asimd") if f in flags)
    return {"cpu_model": model, "simd_flags": simd, "cores": cores(),
            "os": platform.platform()}


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def provenance(command):
    """Commit, whether the work tree differed from it, date and command."""
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
    }


def settings(all_cores):
    """The thread settings: one against one (the headline), then all cores
    against all cores when there is more than one."""
    out = [1]
    if all_cores > 1:
        out.append(all_cores)
    return out


def cpus(threads):
    """The first `threads` cores this process may run on, for taskset."""
    allowed = sorted(os.sched_getaffinity(0))
    return ",".join(str(c) for c in allowed[:threads])


def restricted(command, threads, jax=False, extra=None):
    """(command under taskset, environment) for a process of `threads` threads."""
    env = dict(os.environ)
    for var in THREAD_VARIABLES:
        env[var] = str(threads)
    if jax and threads == 1:
        env["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                            "intra_op_parallelism_threads=1")
    elif jax:
        env.pop("XLA_FLAGS", None)
    env.update(extra or {})
    for k, v in list(env.items()):
        if v is None:
            del env[k]
    return ["taskset", "-c", cpus(threads), *command], env


def restriction_text(threads, jax=False):
    """How a side is restricted, as the results file records it."""
    text = f"taskset -c {cpus(threads)}; " + " ".join(f"{v}={threads}" for v in THREAD_VARIABLES)
    if jax and threads == 1:
        text += ("; XLA_FLAGS=--xla_cpu_multi_thread_eigen=false "
                 "intra_op_parallelism_threads=1")
    return text


def simd_environment(path):
    """Our kernels' path and OpenBLAS's kernel of the same width: the
    variables to set (None: remove)."""
    env = {"AUTOBATCH_SIMD": path}
    for var in OPENBLAS_PINS:
        env[var] = None
    if OPENBLAS_CORETYPE.get(path):
        env["OPENBLAS_CORETYPE"] = OPENBLAS_CORETYPE[path]
    return env


def simd_paths():
    """The paths to measure on this CPU, fastest first, each labelled."""
    flags = machine()["simd_flags"]
    if "avx512f" in flags:
        return [("avx512", "AVX-512"),
                ("avx2", "AVX-512 CPU restricted to the AVX2 path")]
    if "avx2" in flags:
        return [("avx2", "AVX2")]
    return [("portable", "portable")]


def peer_python(name):
    python = os.path.join(PEERS, name, "bin", "python")
    if not os.path.exists(python):
        sys.exit(f"error: {python} is missing: run tools/peers/install {name}")
    return python


def peer_versions(name):
    out = subprocess.run([peer_python(name), os.path.join(ROOT, "tools/peers/versions.py"), name],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def run_json(command, env=None, timeout=3600, cwd=None):
    """Runs `command`; its stdout (or that output's last line) as JSON.
    Errors carry the command's stderr."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed ({done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        # A peer may print its own progress on stdout first (PyStan's
        # build does): the report is then its last line.
        lines = done.stdout.strip().splitlines()
        return json.loads(lines[-1] if lines else "")


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def log(message):
    print(message, file=sys.stderr, flush=True)


def write_result(out_dir, name, document):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(document, f, indent=1, sort_keys=False)
        f.write("\n")
    log(f"wrote {os.path.relpath(path, ROOT)}")
    return path
