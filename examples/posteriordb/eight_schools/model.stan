// Eight schools, non-centred (posteriordb: eight_schools-eight_schools_noncentered).
// Same posterior as posteriordb's program; the parameters are declared in the
// order mu, tau, theta_tilde so that Stan's unconstrained vector is
// (mu, log(tau), theta_tilde[1], ..., theta_tilde[J]), matching model.ab.
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] theta_tilde;
}
transformed parameters {
  vector[J] theta = mu + tau * theta_tilde;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta_tilde ~ normal(0, 1);
  y ~ normal(theta, sigma);
}
