"""The posteriordb models of the effective-samples comparison
(tools/bench/compare_ess.py) written in NumPyro, for
tools/peers/numpyro_peer.py.

Each function takes posteriordb's data set (Stan's JSON form, as
`examples/posteriordb/data/NAME.json` holds it) and returns a NumPyro model
of no arguments with the posterior of posteriordb's `model.stan`: the same
parameters under Stan's names, the same constraints (NumPyro's transforms
to the unconstrained space are Stan's: exp for a lower bound, the logistic
for an interval, exp of the differences for `ordered`, with their
Jacobians), the same priors (Stan's `x ~ cauchy(0, s)` on `x > 0` is
NumPyro's half-Cauchy up to a constant; an absent prior is
`ImproperUniform`, Stan's flat density on the constrained space). Stan's
transformed parameters are `numpyro.deterministic` sites, so that the check
against the reference posterior compares them too.
"""
import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints


def flat(name, shape=(), support=constraints.real):
    """A parameter without a prior: Stan's flat density on `support`."""
    return numpyro.sample(name, dist.ImproperUniform(support, (), shape))


def positive_flat(name, shape=()):
    return flat(name, shape, constraints.positive)


def eight_schools(data, standard="theta_tilde"):
    """Eight schools, non-centred: `standard` names the standard-normal
    effects (examples/posteriordb/eight_schools's theta_tilde, posteriordb's
    eight_schools_noncentered's theta_trans)."""
    y, sigma = jnp.asarray(data["y"]), jnp.asarray(data["sigma"])

    def model():
        effects = numpyro.sample(standard, dist.Normal(0.0, 1.0).expand([y.size]))
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        theta = numpyro.deterministic("theta", effects * tau + mu)
        numpyro.sample("y", dist.Normal(theta, sigma), obs=y)

    return model


def kidiq(data):
    """kidiq-kidscore_momiq: kid_score against mom_iq, flat beta."""
    score, iq = jnp.asarray(data["kid_score"]), jnp.asarray(data["mom_iq"])

    def model():
        beta = flat("beta", (2,))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
        numpyro.sample("kid_score", dist.Normal(beta[0] + beta[1] * iq, sigma), obs=score)

    return model


def lags(y, k):
    """Stan's y[t - j] for t in K + 1..T, j in 1..K: (T - K, K)."""
    t = y.size
    return jnp.stack([y[k - j:t - j] for j in range(1, k + 1)], axis=1)


def ark(data):
    """arK-arK: an autoregression of order K."""
    y, k = jnp.asarray(data["y"]), int(data["K"])
    past = lags(y, k)

    def model():
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([k]))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
        numpyro.sample("y", dist.Normal(alpha + past @ beta, sigma), obs=y[k:])

    return model


def regression(response, predictors, size):
    """A linear regression with flat beta (intercept first) and flat sigma > 0."""

    def model():
        beta = flat("beta", (size,))
        sigma = positive_flat("sigma")
        mean = beta[0] + sum(beta[i + 1] * x for i, x in enumerate(predictors))
        numpyro.sample("obs", dist.Normal(mean, sigma), obs=response)

    return model


def earn_height(data):
    return regression(jnp.asarray(data["earn"]), [jnp.asarray(data["height"])], 2)


def mesquite(data):
    names = ["diam1", "diam2", "canopy_height", "total_height", "density", "group"]
    return regression(jnp.asarray(data["weight"]), [jnp.asarray(data[n]) for n in names], 7)


def nes(data):
    age = jnp.asarray(data["age_discrete"])
    # Stan's transformed data: the age groups as indicators.
    predictors = [jnp.asarray(data["real_ideo"]), jnp.asarray(data["race_adj"]),
                  (age == 2) * 1.0, (age == 3) * 1.0, (age == 4) * 1.0,
                  jnp.asarray(data["educ1"]), jnp.asarray(data["gender"]),
                  jnp.asarray(data["income"])]
    return regression(jnp.asarray(data["partyid7"]), predictors, 9)


def blr(data):
    """sblrc-blr: beta ~ normal(0, 10), sigma ~ normal(0, 10) on sigma > 0."""
    x, y = jnp.asarray(data["X"]), jnp.asarray(data["y"])

    def model():
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([x.shape[1]]))
        sigma = numpyro.sample("sigma", dist.HalfNormal(10.0))
        numpyro.sample("y", dist.Normal(x @ beta, sigma), obs=y)

    return model


def exp_quad_cov(x, alpha, rho):
    """Stan's gp_exp_quad_cov: alpha^2 exp(-(x_i - x_j)^2 / (2 rho^2))."""
    d = x[:, None] - x[None, :]
    return alpha * alpha * jnp.exp(-0.5 * d * d / (rho * rho))


def gp_regr(data):
    x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"])

    def model():
        rho = numpyro.sample("rho", dist.Gamma(25.0, 4.0))
        alpha = numpyro.sample("alpha", dist.HalfNormal(2.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        # As posteriordb's program: sigma (not its square) on the diagonal.
        cov = exp_quad_cov(x, alpha, rho) + sigma * jnp.eye(x.size)
        numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(x.size),
                                                    scale_tril=jnp.linalg.cholesky(cov)), obs=y)

    return model


def gp_pois_regr(data):
    x, k = jnp.asarray(data["x"]), jnp.asarray(data["k"])

    def model():
        rho = numpyro.sample("rho", dist.Gamma(25.0, 4.0))
        alpha = numpyro.sample("alpha", dist.HalfNormal(2.0))
        f_tilde = numpyro.sample("f_tilde", dist.Normal(0.0, 1.0).expand([x.size]))
        cov = exp_quad_cov(x, alpha, rho) + 1e-10 * jnp.eye(x.size)
        f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ f_tilde)
        numpyro.sample("k", dist.Poisson(jnp.exp(f)), obs=k)

    return model


def arma11(data):
    y = jnp.asarray(data["y"])

    def model():
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        phi = numpyro.sample("phi", dist.Normal(0.0, 2.0))
        theta = numpyro.sample("theta", dist.Normal(0.0, 2.0))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
        first = y[0] - (mu + phi * mu)

        def step(err, pair):
            previous_y, now = pair
            err = now - (mu + phi * previous_y + theta * err)
            return err, err

        _, rest = jax.lax.scan(step, first, (y[:-1], y[1:]))
        err = jnp.concatenate([first[None], rest])
        numpyro.factor("err", jnp.sum(dist.Normal(0.0, sigma).log_prob(err)))

    return model


def garch11(data):
    y, sigma1 = jnp.asarray(data["y"]), float(data["sigma1"])

    def model():
        mu = flat("mu")
        alpha0 = positive_flat("alpha0")
        alpha1 = flat("alpha1", (), constraints.unit_interval)
        # Stan's beta1 in (0, 1 - alpha1) is (1 - alpha1) times a number in
        # (0, 1), and the same logistic of the same unconstrained value;
        # its flat density is (1 - alpha1) on that number. (NumPyro's own
        # interval with a bound on another parameter gave beta1 a wrong
        # posterior: the check against the reference failed.)
        fraction = flat("beta1_fraction", (), constraints.unit_interval)
        numpyro.factor("beta1_jacobian", jnp.log1p(-alpha1))
        beta1 = numpyro.deterministic("beta1", (1.0 - alpha1) * fraction)

        def step(sigma, previous_y):
            d = previous_y - mu
            sigma = jnp.sqrt(alpha0 + alpha1 * d * d + beta1 * sigma * sigma)
            return sigma, sigma

        _, rest = jax.lax.scan(step, jnp.asarray(sigma1), y[:-1])
        sigma = jnp.concatenate([jnp.asarray([sigma1]), rest])
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)

    return model


def low_dim_gauss_mix(data):
    y = jnp.asarray(data["y"])

    def model():
        mu = flat("mu", (2,), constraints.ordered_vector)
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0).expand([2]))
        theta = numpyro.sample("theta", dist.Beta(5.0, 5.0))
        numpyro.factor("mu_prior", jnp.sum(dist.Normal(0.0, 2.0).log_prob(mu)))
        first = jnp.log(theta) + dist.Normal(mu[0], sigma[0]).log_prob(y)
        second = jnp.log1p(-theta) + dist.Normal(mu[1], sigma[1]).log_prob(y)
        numpyro.factor("mix", jnp.sum(jnp.logaddexp(first, second)))

    return model


MODELS = {
    "eight_schools": eight_schools,
    "kidiq": kidiq,
    "arK": ark,
    "eight_schools_noncentered": lambda data: eight_schools(data, "theta_trans"),
    "earn_height": earn_height,
    "mesquite": mesquite,
    "nes": nes,
    "blr": blr,
    "gp_regr": gp_regr,
    "gp_pois_regr": gp_pois_regr,
    "arma11": arma11,
    "garch11": garch11,
    "low_dim_gauss_mix": low_dim_gauss_mix,
}
