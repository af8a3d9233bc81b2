#!/usr/bin/env python3
"""Reference posteriors from Stan for the posteriordb examples of autobatch.

For each model in examples/posteriordb/<name>/ (eight_schools, kidiq, arK) this
script reads the Stan program `model.stan` there and the posteriordb data set
from the shared data directory, and writes into the same folder:

  data.json                the data as `autobatch sample --data` reads it: every
                           `extern "autobatch"` static of model.ab by name (floats
                           as JSON floats) plus the integer counts that name a
                           symbolic dimension of model.ab (J, N); for arK the
                           series is laid out as y_now = y[K..T] and its K lags;
  reference.json           posterior summaries of Stan's UNCONSTRAINED parameters,
                           in the order of model.ab's theta: mean, sd, 5%/50%/95%
                           quantiles, Monte Carlo standard errors of mean and sd,
                           bulk/tail ESS and R-hat (ArviZ), and the provenance
                           (pystan/httpstan/arviz versions, seed, chains, draws, date);
  log_density_checks.json  five points of the unconstrained space (posterior draws)
                           with Stan's log_prob(theta, adjust_transform=True) and
                           grad_log_prob(theta) at each.

Nothing in the project's build or CI runs this script: its outputs are checked in.

How to run (PyStan 3 compiles each model with g++ on first use, then runs offline):

    tools/peers/install stan            # the pinned PyStan and ArviZ, in .peers/stan
    .peers/stan/bin/python tools/posteriordb_reference.py \
        --data-dir ../shared/data/posteriordb [--chains 4 --warmup 2000 --draws 20000]
        [--seed 20261122] [--adapt-delta 0.95] [--only eight_schools]

Run it from the repository root (or pass --out-dir examples/posteriordb).

To check model.ab against the checked-in Stan values (no Stan needed; exit 1 if
a log-density difference or gradient is off by more than 1e-8 relative):

    python3 tools/posteriordb_reference.py --check-with target/debug/autobatch [--gradients]
"""

import argparse
import datetime
import json
import os
import sys


def floats(values):
    return [float(v) for v in values]


# Each model: the data keys that Stan reads, the content of data.json, and the
# unconstrained parameters in theta order as (name, constrained column in the
# PyStan frame, transform to the unconstrained space).
def eight_schools_spec(raw):
    j = int(raw["J"])
    params = [("mu", "mu", "identity"), ("log_tau", "tau", "log")]
    params += [(f"theta_tilde[{i}]", f"theta_tilde.{i + 1}", "identity") for i in range(j)]
    return {
        "source": "eight_schools.json",
        "posteriordb": "eight_schools-eight_schools_noncentered",
        "stan_data": {"J": j, "y": floats(raw["y"]), "sigma": floats(raw["sigma"])},
        "autobatch_data": {"J": j, "y": floats(raw["y"]), "sigma": floats(raw["sigma"])},
        "params": params,
    }


def kidiq_spec(raw):
    n = int(raw["N"])
    return {
        "source": "kidiq.json",
        "posteriordb": "kidiq-kidscore_momiq",
        "stan_data": {"N": n, "kid_score": floats(raw["kid_score"]), "mom_iq": floats(raw["mom_iq"])},
        "autobatch_data": {"N": n, "kid_score": floats(raw["kid_score"]), "mom_iq": floats(raw["mom_iq"])},
        "params": [
            ("beta[0]", "beta.1", "identity"),
            ("beta[1]", "beta.2", "identity"),
            ("log_sigma", "sigma", "log"),
        ],
    }


def ark_spec(raw):
    k = int(raw["K"])
    t = int(raw["T"])
    if k != 5:
        raise SystemExit(f"arK.json has K = {k}; model.ab fixes K = 5")
    params = [("alpha", "alpha", "identity")]
    params += [(f"beta[{i}]", f"beta.{i + 1}", "identity") for i in range(k)]
    params += [("log_sigma", "sigma", "log")]
    return {
        "source": "arK.json",
        "posteriordb": "arK-arK",
        "stan_data": {"K": k, "T": t, "y": floats(raw["y"])},
        # K is a constant of model.ab (D = K + 2). model.ab reads the series laid
        # out for a loop-free density: the modelled observations y[K..T] and
        # their K lags, y_lags[i][k] = y[K + i - 1 - k] (0-based).
        "autobatch_data": {
            "N": t - k,
            "y_now": floats(raw["y"][k:]),
            "y_lags": [floats(raw["y"][i - 1 - j] for j in range(k)) for i in range(k, t)],
        },
        "params": params,
    }


SPECS = {"eight_schools": eight_schools_spec, "kidiq": kidiq_spec, "arK": ark_spec}
SOURCES = {"eight_schools": "eight_schools.json", "kidiq": "kidiq.json", "arK": "arK.json"}


def to_unconstrained(values, transform):
    import numpy as np

    if transform == "identity":
        return values
    if transform == "log":
        return np.log(values)
    raise ValueError(transform)


def write_json(path, obj, one_line_values=False):
    with open(path, "w") as f:
        if one_line_values:
            # One key per line, each value on that line (data arrays are long).
            f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()) + "\n}\n")
        else:
            json.dump(obj, f, indent=1)
            f.write("\n")
    print(f"  wrote {path}", file=sys.stderr)


def no_http_timeout():
    """PyStan talks to its in-process httpstan server through aiohttp, whose
    default 5-minute request timeout can cut off a slow C++ compilation on a
    busy machine; lift it."""
    import functools

    import aiohttp

    aiohttp.ClientSession = functools.partial(aiohttp.ClientSession, timeout=aiohttp.ClientTimeout(total=None))


def run_model(name, args, versions):
    import arviz
    import numpy as np
    import stan

    folder = os.path.join(args.out_dir, name)
    with open(os.path.join(args.data_dir, SOURCES[name])) as f:
        raw = json.load(f)
    spec = SPECS[name](raw)
    with open(os.path.join(folder, "model.stan")) as f:
        program = f.read()

    print(f"{name}: writing data.json", file=sys.stderr)
    write_json(os.path.join(folder, "data.json"), spec["autobatch_data"], one_line_values=True)

    print(f"{name}: compiling and sampling", file=sys.stderr)
    posterior = stan.build(program, data=spec["stan_data"], random_seed=args.seed)
    fit = posterior.sample(
        num_chains=args.chains, num_warmup=args.warmup, num_samples=args.draws, delta=args.adapt_delta
    )
    frame = fit.to_frame()
    # Rows are ordered draw-major: row = draw * chains + chain.
    def per_chain(column):
        return frame[column].to_numpy().reshape(args.draws, args.chains).T

    draws = np.stack(
        [to_unconstrained(per_chain(col), tr) for (_, col, tr) in spec["params"]], axis=-1
    )  # (chains, draws, D)
    divergent = int(per_chain("divergent__").sum())
    step_sizes = [float(per_chain("stepsize__")[c, 0]) for c in range(args.chains)]

    names = [p[0] for p in spec["params"]]
    idata = arviz.from_dict(posterior={n: draws[:, :, i] for i, n in enumerate(names)})
    mcse_mean = arviz.mcse(idata, method="mean")
    mcse_sd = arviz.mcse(idata, method="sd")
    ess_bulk = arviz.ess(idata, method="bulk")
    ess_tail = arviz.ess(idata, method="tail")
    rhat = arviz.rhat(idata)

    pooled = draws.reshape(-1, draws.shape[-1])
    parameters = []
    for i, (pname, col, tr) in enumerate(spec["params"]):
        x = pooled[:, i]
        q05, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95])
        parameters.append(
            {
                "index": i,
                "name": pname,
                "stan_parameter": col.replace(".", "[", 1) + "]" if "." in col else col,
                "transform": tr,
                "mean": float(x.mean()),
                "sd": float(x.std(ddof=1)),
                "q05": float(q05),
                "q50": float(q50),
                "q95": float(q95),
                "mcse_mean": float(mcse_mean[pname]),
                "mcse_sd": float(mcse_sd[pname]),
                "ess_bulk": float(ess_bulk[pname]),
                "ess_tail": float(ess_tail[pname]),
                "rhat": float(rhat[pname]),
            }
        )

    # Check the hand-written transform against Stan's own on a few draws.
    rng = np.random.default_rng(args.seed)
    picks = rng.choice(pooled.shape[0], size=5, replace=False)
    points = []
    for row in picks:
        chain, draw = int(row // args.draws), int(row % args.draws)
        theta = [float(v) for v in draws[chain, draw, :]]
        checks_constrained = posterior.constrain_pars(theta, include_tparams=False, include_gqs=False)
        expected = []
        for (_, col, tr) in spec["params"]:
            expected.append(float(per_chain(col)[chain, draw]))
        # constrain_pars returns Stan's flat order, which is the theta order here.
        if not np.allclose(checks_constrained, expected, rtol=1e-12, atol=0):
            raise SystemExit(f"{name}: theta order/transform disagrees with Stan: {checks_constrained} vs {expected}")
        lp = posterior.log_prob(theta, adjust_transform=True)
        grad = posterior.grad_log_prob(theta)
        points.append({"chain": chain, "draw": draw, "theta": theta, "log_prob": float(lp), "grad_log_prob": floats(grad)})

    provenance = {
        "producer": "tools/posteriordb_reference.py",
        "sampler": "Stan NUTS (diag_e, adapted) through PyStan 3",
        "versions": versions,
        "seed": args.seed,
        "chains": args.chains,
        "warmup": args.warmup,
        "draws_per_chain": args.draws,
        "adapt_delta": args.adapt_delta,
        "divergences": divergent,
        "step_sizes": step_sizes,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": f"posteriordb data set {spec['source']} (shared/data/posteriordb)",
        "posteriordb_posterior": spec["posteriordb"],
        "stan_program": f"examples/posteriordb/{name}/model.stan",
    }
    write_json(
        os.path.join(folder, "reference.json"),
        {
            "model": name,
            "space": "unconstrained (theta of model.ab: positive parameters as log)",
            "quantiles": "np.quantile, linear interpolation, of all chains pooled",
            "mcse": "ArviZ mcse(method='mean') and mcse(method='sd'); ess bulk/tail and rank-normalised split R-hat from ArviZ",
            "parameters": parameters,
            "provenance": provenance,
        },
    )
    write_json(
        os.path.join(folder, "log_density_checks.json"),
        {
            "model": name,
            "note": (
                "Stan's log_prob(theta, adjust_transform=True) (constants of `~` dropped, "
                "log-Jacobian included) and grad_log_prob at five posterior draws in the "
                "unconstrained space. Compare log_prob(p_i) - log_prob(p_0) and the gradients."
            ),
            "points": points,
            "provenance": {k: provenance[k] for k in ("producer", "versions", "seed", "date")},
        },
    )
    return parameters, divergent


def check_with_autobatch(name, args):
    """Evaluate model.ab's log_density (and, with --gradients, its
    value_and_grad) at the points of log_density_checks.json with
    `autobatch run`, and compare with Stan's numbers. Needs no Stan."""
    import subprocess
    import tempfile

    folder = os.path.join(args.out_dir, name)
    with open(os.path.join(folder, "log_density_checks.json")) as f:
        checks = json.load(f)
    with open(os.path.join(folder, "data.json")) as f:
        data = json.load(f)
    with open(os.path.join(folder, "model.ab")) as f:
        program = f.read()
    shared = {k: v for k, v in data.items() if isinstance(v, list)}
    thetas = [p["theta"] for p in checks["points"]]
    entry = "log_density"
    if args.gradients:
        program += "\nfn reference_value_and_grad(theta: [f64; D]) -> (f64, [f64; D]) {\n    value_and_grad(log_density, theta)\n}\n"
        entry = "reference_value_and_grad"
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        prog_path = os.path.join(tmp, "model.ab")
        inputs_path = os.path.join(tmp, "inputs.json")
        with open(prog_path, "w") as f:
            f.write(program)
        with open(inputs_path, "w") as f:
            json.dump({"batch": {"theta": thetas}, "shared": shared}, f)
        out = subprocess.run(
            [args.check_with, "run", prog_path, "--entry", entry, "--inputs", inputs_path],
            check=True, capture_output=True, text=True,
        )
    results = [r["ok"] for r in json.loads(out.stdout)["results"]]
    values = [r[0] if args.gradients else r for r in results]
    stan0 = checks["points"][0]["log_prob"]
    print(f"{name}: log_density(p_i) - log_density(p_0) against Stan, and the values", file=sys.stderr)
    for i, (point, value) in enumerate(zip(checks["points"], values)):
        ours, theirs = value - values[0], point["log_prob"] - stan0
        rel = abs(ours - theirs) / max(1.0, abs(theirs))
        worst = max(worst, rel)
        line = f"  p{i}: diff {ours:.12g} vs Stan {theirs:.12g} (rel err {rel:.2e}); value {value:.12g} vs Stan {point['log_prob']:.12g}"
        if args.gradients:
            grel = max(
                abs(a - b) / max(1.0, abs(b)) for a, b in zip(results[i][1], point["grad_log_prob"])
            )
            worst = max(worst, grel)
            line += f"; gradient max rel err {grel:.2e}"
        print(line, file=sys.stderr)
    return worst


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(repo), "shared", "data", "posteriordb"))
    parser.add_argument("--out-dir", default=os.path.join(repo, "examples", "posteriordb"))
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--adapt-delta", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--only", choices=sorted(SPECS), action="append")
    parser.add_argument(
        "--check-with", metavar="AUTOBATCH",
        help="do not run Stan: check model.ab against the checked-in log_density_checks.json with this autobatch binary",
    )
    parser.add_argument("--gradients", action="store_true", help="with --check-with: also compare value_and_grad")
    args = parser.parse_args()

    if args.check_with:
        worst = max(check_with_autobatch(name, args) for name in args.only or ["eight_schools", "kidiq", "arK"])
        print(f"largest relative error: {worst:.2e}", file=sys.stderr)
        sys.exit(0 if worst < 1e-8 else 1)

    from importlib.metadata import version

    no_http_timeout()
    versions = {p: version(p) for p in ("pystan", "httpstan", "arviz", "numpy")}
    for name in args.only or ["eight_schools", "kidiq", "arK"]:
        parameters, divergent = run_model(name, args, versions)
        print(f"{name}: {divergent} divergences", file=sys.stderr)
        for p in parameters:
            print(
                f"  {p['name']:>16} mean {p['mean']: .5f} (mcse {p['mcse_mean']:.5f}) "
                f"sd {p['sd']:.5f} (mcse {p['mcse_sd']:.5f}) q05 {p['q05']: .4f} "
                f"q50 {p['q50']: .4f} q95 {p['q95']: .4f} ess {p['ess_bulk']:.0f} rhat {p['rhat']:.4f}",
                file=sys.stderr,
            )


if __name__ == "__main__":
    main()
