// kidiq with mom_iq as the only predictor (posteriordb: kidiq-kidscore_momiq).
// As in posteriordb: flat (improper) prior on beta, sigma ~ cauchy(0, 2.5) with
// sigma > 0. Unconstrained vector: (beta[1], beta[2], log(sigma)).
data {
  int<lower=0> N;
  vector[N] kid_score;
  vector[N] mom_iq;
}
parameters {
  vector[2] beta;
  real<lower=0> sigma;
}
model {
  sigma ~ cauchy(0, 2.5);
  kid_score ~ normal(beta[1] + beta[2] * mom_iq, sigma);
}
