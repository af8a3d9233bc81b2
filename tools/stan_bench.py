#!/usr/bin/env python3
"""Chains per second: PyStan 3 against `autobatch sample`, same models, data,
chain count and iterations.

    tools/peers/install stan numpy          # once: the pinned PyStan, in .peers/stan
    .peers/stan/bin/python tools/stan_bench.py --repeats 3

For each model of `examples/posteriordb/` (eight schools, kidiq, arK) it
builds the Stan program (compiled once, then found in httpstan's cache; the
build time is printed, not counted), then times `sample(num_chains=C,
num_warmup=W, num_samples=S)`: PyStan runs the chains in parallel processes
on every core. Each run gets a new random seed: httpstan also keeps every
fit, and answers a request it has seen (same model, data, arguments and
seed) from disk in a second or two, which is not a measurement. Next to it, it times
`autobatch sample MODEL --data data.json --chains C --warmup W --draws S
--strategy X` for each strategy asked for (one process, `--threads` the
number of cores). It prints each run's seconds, then per model and sampler
the median chains per second and its ratio to Stan's.

arK: `examples/posteriordb/arK/data.json` lays posteriordb's series `y`
(T = 200, K = 5) out as `y_now` and `y_lags`; the Stan data `y` is rebuilt
from them. Our loop form (`model_loop.ab`, a loop over the time steps and
the lags, as the Stan program is written) and the matrix form
(`model.ab`) are both timed when asked for (`--models`).

`POSTERIORS` lists the posteriors of the effective-samples comparison
(`tools/bench/run ess`, tools/bench/compare_ess.py): each side's files and
the Stan program's parameters.
"""

import argparse
import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POSTERIORDB = os.path.join(ROOT, "examples", "posteriordb")

# name: (folder, our model file)
MODELS = {
    "eight_schools": ("eight_schools", "model.ab"),
    "kidiq": ("kidiq", "model.ab"),
    "arK_loop": ("arK", "model_loop.ab"),
    "arK": ("arK", "model.ab"),
}



@dataclasses.dataclass(frozen=True)
class Posterior:
    """A posteriordb posterior of the effective-samples comparison
    (tools/bench/compare_ess.py): our model and data (relative to
    examples/posteriordb), posteriordb's Stan program and data set, the
    reference posterior the NumPyro model is checked against, that model's
    name in tools/peers/numpyro_models.py, and the Stan program's
    `parameters` (the quantities whose bulk ESS counts, on every side)."""

    family: str
    ours: str
    ours_data: str
    stan: str
    data: str
    reference: str
    numpyro: str
    parameters: tuple
    hand_written: bool = False

    def ours_parameters(self):
        """The columns of our draws whose ESS counts: None for all of them."""
        return None if self.hand_written else self.parameters

    def path(self, relative):
        return os.path.join(POSTERIORDB, relative)


def _posteriordb(name, family, data, numpyro, parameters):
    """A posterior whose files all sit in examples/posteriordb/NAME/."""
    return Posterior(family, f"{name}/model.ab", f"data/{data}.json", f"{name}/model.stan",
                     f"data/{data}.json", f"{name}/reference_posterior.json", numpyro,
                     tuple(parameters.split(",")))


# The three models of the chains-per-second comparison (our hand-written
# log densities, checked against posteriordb's posterior of the same
# program), then ten posteriordb posteriors across the families.
POSTERIORS = {
    "eight_schools": Posterior(
        "hierarchical", "eight_schools/model.ab", "eight_schools/data.json",
        "eight_schools/model.stan", "data/eight_schools.json",
        "eight_schools-eight_schools_noncentered/reference_posterior.json", "eight_schools",
        ("mu", "tau", "theta_tilde"), hand_written=True),
    "kidiq": Posterior(
        "GLM", "kidiq/model.ab", "kidiq/data.json", "kidiq/model.stan", "data/kidiq.json",
        "kidiq-kidscore_momiq/reference_posterior.json", "kidiq", ("beta", "sigma"),
        hand_written=True),
    "arK": Posterior(
        "time series", "arK/model.ab", "arK/data.json", "arK/model.stan", "data/arK.json",
        "arK-arK/reference_posterior.json", "arK", ("alpha", "beta", "sigma"),
        hand_written=True),
    "eight_schools-eight_schools_noncentered": _posteriordb(
        "eight_schools-eight_schools_noncentered", "hierarchical", "eight_schools",
        "eight_schools_noncentered", "theta_trans,mu,tau"),
    "earnings-earn_height": _posteriordb(
        "earnings-earn_height", "GLM", "earnings", "earn_height", "beta,sigma"),
    "mesquite-mesquite": _posteriordb(
        "mesquite-mesquite", "GLM", "mesquite", "mesquite", "beta,sigma"),
    "nes1972-nes": _posteriordb("nes1972-nes", "GLM", "nes1972", "nes", "beta,sigma"),
    "sblrc-blr": _posteriordb("sblrc-blr", "GLM", "sblrc", "blr", "beta,sigma"),
    "gp_pois_regr-gp_regr": _posteriordb(
        "gp_pois_regr-gp_regr", "GP", "gp_pois_regr", "gp_regr", "rho,alpha,sigma"),
    "gp_pois_regr-gp_pois_regr": _posteriordb(
        "gp_pois_regr-gp_pois_regr", "GP", "gp_pois_regr", "gp_pois_regr",
        "rho,alpha,f_tilde"),
    "arma-arma11": _posteriordb("arma-arma11", "time series", "arma", "arma11",
                                "mu,phi,theta,sigma"),
    "garch-garch11": _posteriordb("garch-garch11", "time series", "garch", "garch11",
                                  "mu,alpha0,alpha1,beta1"),
    "low_dim_gauss_mix-low_dim_gauss_mix": _posteriordb(
        "low_dim_gauss_mix-low_dim_gauss_mix", "mixture", "low_dim_gauss_mix",
        "low_dim_gauss_mix", "mu,sigma,theta"),
}

def stan_data(folder):
    """The Stan program's data, from our `data.json`."""
    with open(os.path.join(POSTERIORDB, folder, "data.json")) as f:
        data = json.load(f)
    if folder == "arK":
        lags = data["y_lags"]
        k = len(lags[0])
        # y_lags[0][j] = y[K - 1 - j]; y_now[i] = y[K + i].
        head = list(reversed(lags[0]))
        y = head + data["y_now"]
        return {"K": k, "T": len(y), "y": y}
    return data


def time_stan(folder, args):
    import stan  # PyStan 3

    with open(os.path.join(POSTERIORDB, folder, "model.stan")) as f:
        code = f.read()
    seconds = []
    for _ in range(args.repeats):
        # httpstan keeps every fit on disk, keyed by the model, the data,
        # the arguments and the seed, and answers the same request again
        # from there in a second or two: each run takes a seed never used.
        seed = random.SystemRandom().randrange(1, 2**31)
        started = time.perf_counter()
        posterior = stan.build(code, data=stan_data(folder), random_seed=seed)
        print(
            f"  stan compile {time.perf_counter() - started:.1f} s (seed {seed})",
            flush=True,
        )
        started = time.perf_counter()
        posterior.sample(
            num_chains=args.chains,
            num_warmup=args.warmup,
            num_samples=args.draws,
        )
        seconds.append(time.perf_counter() - started)
        print(f"  stan {seconds[-1]:.2f} s", flush=True)
    return seconds


def time_autobatch(folder, model, strategy, args):
    command = [
        args.autobatch,
        "sample",
        os.path.join(POSTERIORDB, folder, model),
        "--data",
        os.path.join(POSTERIORDB, folder, "data.json"),
        "--chains",
        str(args.chains),
        "--warmup",
        str(args.warmup),
        "--draws",
        str(args.draws),
        "--strategy",
        strategy,
        "--stats",
        os.devnull,
    ]
    seconds = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        seconds.append(time.perf_counter() - started)
        print(f"  autobatch {strategy} {seconds[-1]:.2f} s", flush=True)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="eight_schools,kidiq,arK_loop")
    parser.add_argument("--strategies", default="program-counter,native")
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-stan", action="store_true")
    parser.add_argument(
        "--autobatch", default=os.path.join(ROOT, "target", "release", "autobatch")
    )
    args = parser.parse_args()
    print(
        f"{args.chains} chains, {args.warmup} + {args.draws} iterations, "
        f"{os.cpu_count()} cores, {args.repeats} repeats",
        flush=True,
    )
    rows = []
    for name in args.models.split(","):
        folder, model = MODELS[name]
        print(name, flush=True)
        medians = {}
        if not args.skip_stan:
            medians["stan"] = statistics.median(time_stan(folder, args))
        for strategy in filter(None, args.strategies.split(",")):
            medians[strategy] = statistics.median(
                time_autobatch(folder, model, strategy, args)
            )
        rows.append((name, medians))
    print()
    print("| model | sampler | median s | chains/s | x Stan |")
    print("|---|---|---|---|---|")
    for name, medians in rows:
        stan_rate = args.chains / medians["stan"] if "stan" in medians else None
        for sampler, seconds in medians.items():
            rate = args.chains / seconds
            ratio = f"{rate / stan_rate:.2f}" if stan_rate else "-"
            print(f"| {name} | {sampler} | {seconds:.2f} | {rate:.1f} | {ratio} |")
    check_dev_null()
    return 0


def check_dev_null():
    """Warns when /dev/null is no longer the null device. On the shared
    development machine, runs of PyStan (httpstan's build) left a regular
    file there; cargo then fed its contents to rustc as a program
    (trybuild's tests failed). Restore it as root with
    `rm /dev/null && mknod -m 666 /dev/null c 1 3`."""
    import stat

    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        print(
            "warning: /dev/null is not a character device any more; restore it "
            "with `rm /dev/null && mknod -m 666 /dev/null c 1 3`",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
