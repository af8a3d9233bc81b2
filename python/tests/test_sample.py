"""`autobatch.sample`: shapes, determinism, the summary, bad input, and
Ctrl-C."""

import os
import signal
import subprocess
import sys
import textwrap

import arviz
import numpy as np
import pandas
import pytest

import autobatch

NORMAL = """
extern "autobatch" {
    static mu: [f64; 2];
}

fn log_density(theta: [f64; 2]) -> f64 {
    let d0 = theta[0] - mu[0];
    let d1 = theta[1] - mu[1];
    -0.5 * (d0 * d0 + d1 * d1)
}
"""

DATA = {"mu": np.array([1.0, -2.0])}


def small_fit(seed=1, **kwargs):
    settings = dict(chains=3, warmup=150, draws=200, seed=seed, progress=False)
    settings.update(kwargs)
    return autobatch.sample(NORMAL, data=DATA, **settings)


def test_draws_shape_stats_and_summary():
    fit = small_fit()
    assert list(fit.draws) == ["theta"]
    assert fit.draws["theta"].shape == (3, 200, 2)
    assert fit.draws["theta"].dtype == np.float64
    assert np.array_equal(fit.unconstrained, fit.draws["theta"])
    assert fit.chain_ids == [0, 1, 2]
    assert fit.stats["chains"] == 3 and fit.stats["draws"] == 200
    assert fit.stats["dimension"] == 2
    # The sampler's default strategy, auto, picks native: the model
    # multiplies by no static matrix.
    assert fit.stats["strategy"] == "native"
    assert fit.stats["strategy_reason"].startswith("picked by auto: no product with a static")
    for name in ["tree_depth", "n_steps", "diverging", "acceptance_rate", "lp", "energy"]:
        assert fit.sample_stats[name].shape == (3, 200), name
    assert fit.step_size.shape == (3,)
    summary = fit.summary()
    means = np.asarray(summary["mean"])
    # The posterior is N(mu, I): 600 draws put the means well within 0.5.
    assert np.all(np.abs(means - np.array([1.0, -2.0])) < 0.5)
    assert np.allclose(means, fit.draws["theta"].mean(axis=(0, 1)))
    for column in ["sd", "5%", "50%", "95%", "R-hat", "ESS bulk", "ESS tail"]:
        assert len(np.asarray(summary[column])) == 2
    assert "theta[1]" in str(fit)


def test_same_seed_same_draws_other_seed_other_draws():
    a, b, c = small_fit(seed=7), small_fit(seed=7), small_fit(seed=8)
    assert np.array_equal(a.unconstrained, b.unconstrained)
    assert not np.array_equal(a.unconstrained, c.unconstrained)


def test_draws_do_not_depend_on_the_strategy():
    a = small_fit(strategy="program-counter")
    b = small_fit(strategy="reference")
    assert np.array_equal(a.unconstrained, b.unconstrained)


def test_progress_callback_sees_every_phase():
    seen = []
    small_fit(progress=lambda done, total, warming_up: seen.append((done, total, warming_up)))
    assert seen[0] == (0, 350, True)
    assert seen[-1] == (350, 350, False)


def test_bad_model_data_and_settings():
    with pytest.raises(autobatch.CompileError, match="model.ab:1:"):
        autobatch.sample("fn log_density(theta: [f64; 2]) -> f64 { theta }",
                         data={}, path="model.ab", progress=False)
    with pytest.raises(ValueError, match=r"the data has no `mu` \(static declared at <model>:3:12\)"):
        autobatch.sample(NORMAL, data={}, progress=False)
    with pytest.raises(ValueError, match="`chains` must be between 1"):
        small_fit(chains=0)
    with pytest.raises(ValueError, match="target acceptance statistic"):
        small_fit(target_accept=1.5)
    with pytest.raises(TypeError, match="`data` must be a dict"):
        autobatch.sample(NORMAL, data=[1.0], progress=False)


def test_to_arviz():
    fit = small_fit()
    data = fit.to_arviz()
    assert isinstance(data, arviz.InferenceData)
    assert data.posterior["theta"].shape == (3, 200, 2)
    assert np.array_equal(data.posterior["theta"].values, fit.draws["theta"])
    assert data.sample_stats["diverging"].shape == (3, 200)
    # ArviZ's own R-hat and bulk ESS of the same draws are the summary's.
    summary = fit.summary()
    rhat = arviz.rhat(data, method="rank")["theta"].values
    ess = arviz.ess(data, method="bulk")["theta"].values
    assert np.allclose(summary["R-hat"].to_numpy(), rhat, rtol=1e-6)
    assert np.allclose(summary["ESS bulk"].to_numpy(), ess, rtol=1e-6)


def test_summary_is_a_data_frame_with_pandas():
    summary = small_fit().summary()
    assert isinstance(summary, pandas.DataFrame)
    assert list(summary.index) == ["theta[0]", "theta[1]"]
    assert summary.index.name == "parameter"
    assert list(summary.columns) == [
        "mean", "sd", "5%", "50%", "95%", "R-hat", "ESS bulk", "ESS tail"]


def test_too_few_draws_warn():
    with pytest.warns(autobatch.SamplingWarning, match="too few for the diagnostics"):
        fit = small_fit(warmup=10, draws=5)
    assert any("too few" in w for w in fit.warnings)
    assert np.isnan(fit.summary()["ESS bulk"].to_numpy()).all()


def test_ctrl_c_raises_keyboard_interrupt_and_frees_the_run():
    # A run far too long to finish, interrupted by SIGINT after it started.
    script = textwrap.dedent(f"""
        import signal, time, autobatch, numpy as np
        # Python leaves SIGINT ignored when it starts ignored (a test run
        # launched in the background): this one takes Ctrl-C as a terminal does.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        model = {NORMAL!r}
        began = time.monotonic()
        try:
            autobatch.sample(model, data={{"mu": np.zeros(2)}}, chains=2,
                             warmup=10_000_000, draws=10, progress=lambda *a: print("go", flush=True))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        # Nothing runs any more: no CPU time is spent while this sleeps.
        cpu = time.process_time()
        time.sleep(0.5)
        print("cpu", time.process_time() - cpu, flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "go"
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    lines = out.split()
    assert "interrupted" in lines
    assert float(lines[lines.index("cpu") + 1]) < 0.1
    assert child.returncode == 0


CONSTRAINED = """
extern "autobatch" {
    static mu: [f64; 2];
}

fn model(#[lower = 0.0] sigma: f64, x: [f64; 2]) -> f64 {
    let d = x - mu;
    -0.5 * dot(d, d) - sigma
}
"""


def test_constrained_parameters_are_named_and_shaped():
    fit = autobatch.sample(CONSTRAINED, data=DATA, chains=3, warmup=150, draws=200,
                           seed=2, progress=False)
    assert list(fit.draws) == ["sigma", "x"]
    assert fit.draws["sigma"].shape == (3, 200)
    assert fit.draws["x"].shape == (3, 200, 2)
    assert fit.unconstrained.shape == (3, 200, 3)
    # sigma is sampled as log(sigma): the draws are its exponential.
    assert np.allclose(fit.draws["sigma"], np.exp(fit.unconstrained[..., 0]), rtol=1e-14)
    assert np.array_equal(fit.draws["x"], fit.unconstrained[..., 1:])
    assert np.all(fit.draws["sigma"] > 0)
    summary = fit.summary()
    names = list(summary.index) if hasattr(summary, "index") else list(summary["parameter"])
    assert names == ["sigma", "x.0", "x.1"]


QUANTITIES = """
extern "autobatch" {
    static y: [f64; J];
    static sigma: [f64; J];
}

fn model(mu: f64, #[lower = 0.0] tau: f64, theta_tilde: [f64; J]) -> f64 {
    let theta = transformed(mu, tau, theta_tilde);
    normal_lupdf(theta_tilde, 0.0, 1.0) + normal_lupdf(y, theta, sigma)
        + normal_lupdf(mu, 0.0, 5.0) + cauchy_lupdf(tau, 0.0, 5.0)
}

fn transformed(mu: f64, tau: f64, theta_tilde: [f64; J]) -> [f64; J] {
    let theta = mu + tau * theta_tilde;
    theta
}

fn generated(theta: [f64; J], tau: f64) -> ([f64; J], i64, [[f64; 2]; 2]) {
    let y_rep = normal_rng(theta, sigma);
    let above = (y_rep[0] > y[0]) as i64;
    let m = [[tau, 2.0 * tau], [3.0 * tau, 4.0 * tau]];
    (y_rep, above, m)
}
"""

SCHOOLS = {
    "y": np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
    "sigma": np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]),
}


def quantities_fit():
    return autobatch.sample(QUANTITIES, data=SCHOOLS, chains=2, warmup=200, draws=250,
                            seed=3, progress=False)


def test_draws_hold_transformed_parameters_and_generated_quantities():
    fit = quantities_fit()
    assert list(fit.draws) == ["mu", "tau", "theta_tilde", "theta", "y_rep", "above", "m"]
    shapes = {name: value.shape for name, value in fit.draws.items()}
    assert shapes == {
        "mu": (2, 250), "tau": (2, 250), "theta_tilde": (2, 250, 8), "theta": (2, 250, 8),
        "y_rep": (2, 250, 8), "above": (2, 250), "m": (2, 250, 2, 2)}
    d = fit.draws
    # The transformed parameter is its definition at each draw.
    want = d["mu"][..., None] + d["tau"][..., None] * d["theta_tilde"]
    assert np.allclose(d["theta"], want, rtol=1e-12, atol=1e-12)
    # A matrix quantity keeps its row-major layout.
    assert np.array_equal(d["m"][..., 1, 0], 3.0 * d["tau"])
    assert np.array_equal(d["m"][..., 0, 1], 2.0 * d["tau"])
    # The integer quantity is 0 or 1, and is y_rep[0] > y[0].
    assert set(np.unique(d["above"])) <= {0.0, 1.0}
    assert np.array_equal(d["above"], (d["y_rep"][..., 0] > SCHOOLS["y"][0]).astype(float))
    # y_rep - theta is N(0, sigma^2) per school: 500 draws put the
    # standardized mean within 4 / sqrt(500) of 0 and the variance within 0.3 of 1.
    z = (d["y_rep"] - d["theta"]) / SCHOOLS["sigma"]
    assert np.all(np.abs(z.mean(axis=(0, 1))) < 4 / np.sqrt(500))
    assert np.all(np.abs(z.var(axis=(0, 1)) - 1) < 0.3)
    # The unconstrained draws are the parameters only: mu, log tau, theta_tilde.
    assert fit.unconstrained.shape == (2, 250, 10)
    assert np.allclose(d["tau"], np.exp(fit.unconstrained[..., 1]), rtol=1e-14)
    summary = fit.summary()
    assert list(summary.index)[:3] == ["mu", "tau", "theta_tilde.0"]
    assert "theta.7" in summary.index and "y_rep.0" in summary.index
    assert "above" in summary.index and "m.1.0" in summary.index


def test_to_arviz_names_every_variable_with_its_dims():
    fit = quantities_fit()
    data = fit.to_arviz()
    posterior = data.posterior
    assert sorted(posterior.data_vars) == sorted(fit.draws)
    for name, value in fit.draws.items():
        assert posterior[name].shape == value.shape, name
        assert np.array_equal(posterior[name].values, value), name
        assert posterior[name].dims[:2] == ("chain", "draw"), name
    assert posterior["theta"].dims == ("chain", "draw", "theta_dim_0")
    assert posterior["m"].dims == ("chain", "draw", "m_dim_0", "m_dim_1")
    # ArviZ's summary reads the transformed parameter like the others.
    table = arviz.summary(data, var_names=["theta", "tau"], kind="stats")
    assert "theta[7]" in table.index and "tau" in table.index
    assert np.allclose(table.loc["tau", "mean"], fit.draws["tau"].mean(), rtol=1e-3)
