"""`autobatch.sample` and its result, `Fit`."""

import sys
import time
import warnings

import numpy as np

from . import _native

# The columns of the summary, as the command line's table names them, and
# the keys of `stats["summary"]` they come from.
_SUMMARY_COLUMNS = [
    ("mean", "mean"),
    ("sd", "sd"),
    ("5%", "q5"),
    ("50%", "q50"),
    ("95%", "q95"),
    ("R-hat", "rhat"),
    ("ESS bulk", "ess_bulk"),
    ("ESS tail", "ess_tail"),
]


class SamplingWarning(UserWarning):
    """A warning about a fit's draws: the diagnostics `autobatch sample`
    prints on stderr."""


class Fit:
    """The result of `sample`: the draws of every chain that finished,
    the sampler's figures and per-draw statistics."""

    def __init__(self, native):
        #: dict of numpy arrays (chains, draws, *shape): the draws of the
        #: chains that finished, by name: the parameters of `fn model` on
        #: their constrained scale (`draws["tau"]`, `draws["theta_tilde"]`),
        #: then the results of `fn transformed` and `fn generated` (an
        #: integer quantity as a float), or `theta` for a model written
        #: as `log_density`.
        self.draws = native["draws"]
        #: numpy array (chains, draws, dim): the same draws as the sampler
        #: moves them, on the unconstrained scale.
        self.unconstrained = native["unconstrained"]
        #: dict: the sampler's figures, as `autobatch sample --stats` writes them.
        self.stats = native["stats"]
        #: list: the numbers of the chains that finished (those in `draws`).
        self.chain_ids = native["chain_ids"]
        #: dict of numpy arrays (chains, draws): tree_depth, n_steps,
        #: diverging, acceptance_rate, lp (the log density).
        self.sample_stats = native["sample_stats"]
        #: numpy array (chains,): each chain's step size after warmup.
        self.step_size = native["step_size"]
        self._table = native["table"]
        #: list of str: what to know before trusting the draws (too few
        #: draws, R-hat above 1.01, low ESS, divergences, ...), as
        #: `autobatch sample` prints them on stderr; each is also issued
        #: as a `SamplingWarning` when the fit is made.
        self.warnings = list(native["warnings"])
        for message in self.warnings:
            warnings.warn(message.removeprefix("warning: "), SamplingWarning, stacklevel=3)

    def summary(self):
        """The command line's summary table: one row per parameter with
        mean, sd, 5%, 50%, 95%, R-hat, ESS bulk and ESS tail. A pandas DataFrame
        indexed by parameter when pandas is installed, else a dict of numpy
        arrays (with the names under "parameter")."""
        rows = self.stats["summary"]
        names = [row["parameter"] for row in rows]
        columns = {
            title: np.array([float(row[key]) for row in rows], dtype=np.float64)
            for title, key in _SUMMARY_COLUMNS
        }
        try:
            import pandas
        except ImportError:
            return {"parameter": np.array(names), **columns}
        return pandas.DataFrame(columns, index=pandas.Index(names, name="parameter"))

    def to_arviz(self):
        """The draws as an `arviz.InferenceData` (the posterior's variables
        are those of `draws`, parameters, transformed parameters and
        generated quantities alike, with dimensions chain, draw and
        NAME_dim_0, ...; sample_stats). Needs arviz."""
        try:
            import arviz
        except ImportError as error:
            raise ImportError("Fit.to_arviz needs arviz: pip install arviz") from error
        return arviz.from_dict(
            posterior=dict(self.draws),
            sample_stats=dict(self.sample_stats),
        )

    def __str__(self):
        return self._table

    def __repr__(self):
        chains, draws, dim = self.unconstrained.shape
        return f"<autobatch.Fit: {chains} chains of {draws} draws of {dim} parameters>"


class _ProgressBar:
    """A one-line bar on stderr, redrawn at most ten times a second."""

    def __init__(self, stream):
        self.stream = stream
        self.began = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done, total, warming_up):
        now = time.monotonic()
        if now - self.last < 0.1 and done < total:
            return
        self.last = now
        width = 40
        filled = width * done // max(total, 1)
        bar = "=" * filled + (">" if filled < width else "") + " " * (width - filled - 1)
        elapsed = now - self.began
        left = elapsed * (total - done) / done if done else float("nan")
        phase = "warmup" if warming_up else "sampling"
        eta = f"about {left:.0f}s left" if done else "starting"
        self.stream.write(f"\r{phase:9} [{bar[:width]}] {done}/{total} iterations ({elapsed:.0f}s, {eta})")
        self.stream.flush()
        self.drawn = True

    def close(self):
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


def sample(model_source, data=None, *, chains=4, warmup=1000, draws=1000, seed=0,
           strategy=None, threads=None, max_depth=10, target_accept=0.8,
           pooled_adaptation=None, progress=None, path="<model>", init=None):
    """Runs the No-U-Turn Sampler on `model_source` (which defines
    `fn model(...) -> f64` over its constrained parameters, or
    `fn log_density(theta: [f64; D]) -> f64`) with its statics in `data`,
    as `autobatch sample` does, and returns a `Fit`.

    `init`: a dict giving every parameter by name on its constrained scale
    (`{"tau": 1.5, "theta_tilde": [...]}`; `{"theta": [...]}` for a
    `log_density`), where every chain starts (None: each draws its own
    point, uniform(-2, 2) on the unconstrained scale, as Stan does).

    `strategy`: how the chains run (None: `autobatch sample`'s default,
    auto, which picks per model); every strategy gives the same draws.
    `pooled_adaptation`: pool the chains' adaptation every that many warmup
    iterations (None: each chain adapts alone). `progress`: None draws a
    progress bar on stderr when it is a terminal, False draws none, a
    callable is called with (done, total, warming_up). Ctrl-C stops the run
    and raises KeyboardInterrupt.
    """
    bar = None
    if progress is None:
        stream = sys.stderr
        if stream is not None and hasattr(stream, "isatty") and stream.isatty():
            bar = _ProgressBar(stream)
            progress = bar
    elif progress is False:
        progress = None
    try:
        native = _native.sample(
            model_source, data, chains=chains, warmup=warmup, draws=draws, seed=seed,
            strategy=strategy, threads=threads, max_depth=max_depth,
            target_accept=target_accept, pooled_adaptation=pooled_adaptation,
            progress=progress, path=path, init=init,
        )
    finally:
        if bar is not None:
            bar.close()
    return Fit(native)
