#!/usr/bin/env python3
"""Local modes of posteriordb's hudson_lynx_hare-lotka_volterra, without the
sampler: Nelder-Mead on the log density (on the unconstrained scale, as the
sampler sees it) from 12 starting points drawn as Stan and the sampler draw
them, uniform in (-2, 2) in every coordinate; the ODE by scipy's RK45 at
the model's tolerances (rtol 1e-5, atol 1e-3). Prints where each search
ends and its log density; -1e300 is a point where the solve failed or a
population went negative.

Run from the workspace root with scipy (a few minutes):
    python3 tools/lotka_volterra_modes.py
"""
import json, numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import minimize
from scipy.stats import norm
d = json.load(open('examples/posteriordb/data/hudson_lynx_hare.json'))
ts = np.array(d['ts'], float); y = np.array(d['y'], float); y0 = np.array(d['y_init'], float)
def lp(u):
    x = np.exp(u); th, zi, sg = x[:4], x[4:6], x[6:8]
    f = lambda t, z: [(th[0]-th[1]*z[1])*z[0], (-th[2]+th[3]*z[0])*z[1]]
    r = solve_ivp(f, (0, ts[-1]), zi, t_eval=ts, rtol=1e-5, atol=1e-3, method='RK45')
    if not r.success or (r.y <= 0).any(): return -1e300
    z = r.y.T
    v = norm.logpdf(th[[0,2]], 1, .5).sum() + norm.logpdf(th[[1,3]], .05, .05).sum()
    v += norm.logpdf(np.log(sg), -1, 1).sum() - np.log(sg).sum()
    v += norm.logpdf(np.log(zi), np.log(10), 1).sum() - np.log(zi).sum()
    for k in range(2):
        v += norm.logpdf(np.log(y0[k]), np.log(zi[k]), sg[k]) - np.log(y0[k])
        v += (norm.logpdf(np.log(y[:, k]), np.log(z[:, k]), sg[k]) - np.log(y[:, k])).sum()
    return v + u.sum()
ref = np.log([0.5469, 0.0277, 0.8001, 0.0241, 34.04, 5.94, 0.248, 0.251])
print('at reference means', lp(ref))
rng = np.random.default_rng(0)
for i in range(12):
    u0 = rng.uniform(-2, 2, 8)
    r = minimize(lambda u: -lp(u), u0, method='Nelder-Mead', options={'maxiter': 4000, 'xatol': 1e-4, 'fatol': 1e-6})
    print(i, 'init lp %.4g' % lp(u0), '-> %.5g' % -r.fun, ' '.join('%.3g' % v for v in np.exp(r.x)))
