"""autobatch: run a program written for one example on a whole batch at once.

    import numpy as np, autobatch
    prog = autobatch.compile(source)
    res = prog.run("fib", batch={"n": np.array([3, 7, 4, 5])}, shared={},
                   strategy="auto", seed=0)
    res.values, res.errors, res.stats

    fit = autobatch.sample(model_source, data={"y": y}, chains=4, warmup=1000, draws=1000, seed=1)
    fit.draws, fit.stats, fit.summary(), fit.to_arviz()

See docs/python.md in the repository for the whole API.
"""

from ._native import CompileError, Program, RunResult, compile
from ._fit import Fit, SamplingWarning, sample

__all__ = [
    "CompileError", "Fit", "Program", "RunResult", "SamplingWarning", "compile", "sample",
]
