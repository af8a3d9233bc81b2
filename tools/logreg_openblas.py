#!/usr/bin/env python3
"""The two matrix products of one logistic-regression gradient, through
numpy's BLAS (OpenBLAS in .peers/numpy, `tools/peers/install numpy`), as
the yardstick of `autobatch-bench autodiff` (AUTOBATCH_BENCH_PYTHON names
the Python; `tools/bench/run openblas` runs it).

For `batch` members with parameters theta (batch x D) and the shared data
X (N x D):  z = theta X^T  (batch x N),  g = r X  (batch x D), where r
stands for the residuals (batch x N). Prints one JSON object: the best
and the median time of the pair of products (the median is what the Rust
benchmark reports for its own runs), the gradients per second the median
allows, its GFLOP/s (4 N D batch flops per pair), and the kernel and
thread count OpenBLAS runs with (threadpoolctl). Also the median of the
calling thread's CPU time per pair (`time.thread_time`): with one BLAS
thread, the time the products ran on a machine shared with other work.

usage: logreg_openblas.py --precision f32|f64 --batch B [--threads T]
       [--n N] [--d D] [--budget SECONDS]
The BLAS thread count is set before numpy loads (OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS, MKL_NUM_THREADS). When our side is capped to the AVX2
path (AUTOBATCH_SIMD=avx2) and OPENBLAS_CORETYPE is unset, OpenBLAS is held
to its AVX2 kernel too (OPENBLAS_CORETYPE=Haswell): equal terms on an
AVX-512 CPU. The report names the kernel OpenBLAS ran.
"""

import argparse
import json
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["f32", "f64"], required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--budget", type=float, default=1.0)
    args = parser.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if os.environ.get("AUTOBATCH_SIMD", "").strip() == "avx2":
        os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
    import numpy as np  # after the thread count is set

    dtype = np.float32 if args.precision == "f32" else np.float64
    rng = np.random.default_rng(2026)
    n, d, batch = args.n, args.d, args.batch
    x = (2.0 * rng.random((n, d)) - 1.0).astype(dtype)
    theta = (0.1 * (rng.random((batch, d)) - 0.5)).astype(dtype)
    r = (rng.random((batch, n)) - 0.5).astype(dtype)
    z = np.empty((batch, n), dtype=dtype)
    g = np.empty((batch, d), dtype=dtype)
    xt = x.T

    def pair():
        np.matmul(theta, xt, out=z)
        np.matmul(r, x, out=g)

    repeats = max(1, 64 // batch)
    pair()
    times = []
    cpu_times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < args.budget and len(times) < 2000):
        t = time.perf_counter()
        c = time.thread_time()
        for _ in range(repeats):
            pair()
        cpu_times.append((time.thread_time() - c) / repeats)
        times.append((time.perf_counter() - t) / repeats)
    times.sort()
    cpu_times.sort()
    best = times[0]
    median = times[len(times) // 2]
    config = np.__config__.CONFIG if hasattr(np.__config__, "CONFIG") else {}
    blas = config.get("Build Dependencies", {}).get("blas", {})
    pool = blas_pool()
    print(
        json.dumps(
            {
                "blas": blas.get("name", "unknown"),
                "blas_version": blas.get("version", "unknown"),
                "blas_architecture": pool.get("architecture"),
                "blas_threads": pool.get("num_threads"),
                "precision": args.precision,
                "batch": batch,
                "threads": args.threads,
                "seconds_per_pair_best": best,
                "seconds_per_pair_median": median,
                "thread_cpu_seconds_per_pair_median": cpu_times[len(cpu_times) // 2],
                "gradients_per_second": batch / median,
                "gflops": 4.0 * n * d * batch / median / 1e9,
            }
        )
    )


def blas_pool():
    """The kernel OpenBLAS chose for this CPU (OPENBLAS_CORETYPE forces
    one) and its thread count, as threadpoolctl reads them ({} without it)."""
    try:
        import threadpoolctl
    except ImportError:
        return {}
    for pool in threadpoolctl.threadpool_info():
        if pool.get("user_api") == "blas":
            return pool
    return {}


if __name__ == "__main__":
    sys.exit(main())
