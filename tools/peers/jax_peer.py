#!/usr/bin/env python3
"""NUTS in NumPyro or blackjax on one of our sampler models, for
`tools/bench/run numpyro`.

    .peers/jax/bin/python tools/peers/jax_peer.py numpyro|blackjax MODEL DATA.json \
        CHAINS WARMUP DRAWS

MODEL is eight_schools, kidiq or arK (examples/posteriordb, matrix form)
or logistic (tools/bench/logistic.ab); DATA.json is the data file our
`autobatch sample` reads. The log density is the one of our `.ab` file,
written in jax.numpy over the same unconstrained vector (constants dropped
as ours and Stan's do), in float64; the chains start uniform in (-2, 2) as
Stan's do.

- numpyro: `MCMC(NUTS(potential_fn=...), chain_method="vectorized")` (all
  chains as one batch, numpyro's counterpart of ours), Stan's windowed
  adaptation with a diagonal metric.
- blackjax: `window_adaptation` of each chain under `jit(vmap(...))`, then
  `jit(vmap(nuts.step))` once per draw.

Each runs twice with new keys and the same objects: the first run compiles
(`first_seconds`), the second is the measurement (`seconds`: warm-up and
sampling). NumPyro's `run` traces and lowers its sampler again on every
call (a fixed cost, whatever the iterations): `fixed_seconds` is the
second of two runs of one warm-up iteration and one draw, so `seconds -
fixed_seconds` is the sampling alone. blackjax's jitted functions are
made once and reused.
Prints one JSON object with the gradient evaluations (leapfrog steps,
summed over chains, where the library reports them) and the bulk ESS
of each coordinate (tools/peers/ess.py).
"""
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ess  # noqa: E402


def log1p_square(x):
    return jnp.log1p(x * x)


def eight_schools(data):
    y, sigma = jnp.asarray(data["y"]), jnp.asarray(data["sigma"])

    def log_density(theta):
        mu, log_tau, tt = theta[0], theta[1], theta[2:]
        tau = jnp.exp(log_tau)
        z = (y - (mu + tau * tt)) / sigma
        return (-0.5 * (mu / 5.0) ** 2 - log1p_square(tau / 5.0) + log_tau
                - 0.5 * jnp.sum(tt * tt) - 0.5 * jnp.sum(z * z))

    return log_density, 2 + len(data["y"])


def kidiq(data):
    score, iq = jnp.asarray(data["kid_score"]), jnp.asarray(data["mom_iq"])

    def log_density(theta):
        b0, b1, log_sigma = theta[0], theta[1], theta[2]
        sigma = jnp.exp(log_sigma)
        r = (score - iq * b1 - b0) / sigma
        return -log1p_square(sigma / 2.5) + log_sigma - 0.5 * r @ r - score.size * log_sigma

    return log_density, 3


def ark(data):
    y_now, y_lags = jnp.asarray(data["y_now"]), jnp.asarray(data["y_lags"])
    k = y_lags.shape[1]

    def log_density(theta):
        alpha, beta, log_sigma = theta[0], theta[1:k + 1], theta[k + 1]
        sigma = jnp.exp(log_sigma)
        r = y_now - y_lags @ beta - alpha
        return (-0.5 * (alpha / 10.0) ** 2 - 0.5 * beta @ beta / 100.0
                - log1p_square(sigma / 2.5) + log_sigma
                - 0.5 * r @ r / (sigma * sigma) - y_now.size * log_sigma)

    return log_density, k + 2


def logistic(data):
    x, y = jnp.asarray(data["X"]), jnp.asarray(data["y"])

    def log_density(theta):
        z = x @ theta
        return y @ z - jnp.sum(jax.nn.softplus(z)) - 0.5 * theta @ theta

    return log_density, x.shape[1]


MODELS = {"eight_schools": eight_schools, "kidiq": kidiq, "arK": ark, "logistic": logistic}


def numpyro_sampler(log_density, dim, chains, warmup, draws):
    """A function of a seed that runs NumPyro's NUTS once: (seconds,
    draws (chains, draws, dim), gradient counts). One MCMC object, so a
    second call reuses what the first compiled."""
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(potential_fn=lambda theta: -log_density(theta)), num_warmup=warmup,
                num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)

    def sample(seed):
        key, init_key = jax.random.split(jax.random.PRNGKey(seed))
        init = jax.random.uniform(init_key, (chains, dim), minval=-2.0, maxval=2.0,
                                  dtype=jnp.float64)
        started = time.perf_counter()
        mcmc.run(key, init_params=init, extra_fields=("num_steps",))
        jax.block_until_ready(mcmc.get_samples())
        seconds = time.perf_counter() - started
        samples = np.asarray(mcmc.get_samples(group_by_chain=True))
        steps = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
        return seconds, samples, {"gradient_evaluations_sampling": steps}

    return sample


def blackjax_sampler(log_density, dim, chains, warmup, draws):
    """As `numpyro_sampler`, with blackjax: the jitted warm-up and step
    functions are made once."""
    import blackjax

    adaptation = blackjax.window_adaptation(blackjax.nuts, log_density)

    def warm_one(k, position):
        (state, parameters), info = adaptation.run(k, position, num_steps=warmup)
        return state, parameters, jnp.sum(info.info.num_integration_steps)

    def step_one(k, state, params):
        return blackjax.nuts(log_density, **params).step(k, state)

    warm = jax.jit(jax.vmap(warm_one))
    step = jax.jit(jax.vmap(step_one))

    def sample(seed):
        init_key, warm_key, sample_key = jax.random.split(jax.random.PRNGKey(seed), 3)
        positions = jax.random.uniform(init_key, (chains, dim), minval=-2.0, maxval=2.0,
                                       dtype=jnp.float64)
        keys = jax.random.split(sample_key, draws * chains).reshape(draws, chains, 2)
        started = time.perf_counter()
        states, parameters, warm_steps = warm(jax.random.split(warm_key, chains), positions)
        out, sample_steps = [], 0
        for t in range(draws):
            states, info = step(keys[t], states, parameters)
            out.append(states.position)
            sample_steps = sample_steps + jnp.sum(info.num_integration_steps)
        jax.block_until_ready(states)
        seconds = time.perf_counter() - started
        samples = np.asarray(jnp.stack(out, axis=1))  # chains, draws, dim
        return seconds, samples, {"gradient_evaluations_warmup": int(jnp.sum(warm_steps)),
                                  "gradient_evaluations_sampling": int(sample_steps)}

    return sample


def main():
    if len(sys.argv) != 7 or sys.argv[1] not in ("numpyro", "blackjax"):
        sys.exit("usage: jax_peer.py numpyro|blackjax MODEL DATA.json CHAINS WARMUP DRAWS")
    library, model, data_path = sys.argv[1:4]
    chains, warmup, draws = (int(x) for x in sys.argv[4:7])
    with open(data_path) as f:
        log_density, dim = MODELS[model](json.load(f))
    make = numpyro_sampler if library == "numpyro" else blackjax_sampler
    sample = make(log_density, dim, chains, warmup, draws)
    first, _, _ = sample(1)
    seconds, samples, counts = sample(2)
    bulk = ess.bulk_ess(samples)
    report = {"library": library, "model": model, "first_seconds": first, "seconds": seconds,
              **counts, "min_bulk_ess": min(bulk), "bulk_ess": bulk}
    if library == "numpyro":
        # Each `run` traces and lowers the sampler again before running it.
        short = make(log_density, dim, chains, 1, 1)
        short(3)
        report["fixed_seconds"] = short(4)[0]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
