// simple hmm example (1 output; 2 states)
data {
  int<lower=0> N;
  int<lower=0> K;
  array[N] real y;
}
parameters {
  simplex[K] theta1;
  simplex[K] theta2;
  // real mu[K];
  positive_ordered[K] mu;
}
transformed parameters {
  array[K] simplex[K] theta;
  theta[1] = theta1;
  theta[2] = theta2;
}
model {
  // priors
  target += normal_lpdf(mu[1] | 3, 1);
  target += normal_lpdf(mu[2] | 10, 1);
  // forward algorithm
  {
    array[K] real acc;
    array[N, K] real gamma;
    for (k in 1 : K) {
      gamma[1, k] = normal_lpdf(y[1] | mu[k], 1);
    }
    for (t in 2 : N) {
      for (k in 1 : K) {
        for (j in 1 : K) {
          acc[j] = gamma[t - 1, j] + log(theta[j, k])
                   + normal_lpdf(y[t] | mu[k], 1);
        }
        gamma[t, k] = log_sum_exp(acc);
      }
    }
    target += log_sum_exp(gamma[N]);
  }
}
generated quantities {
  array[N] int<lower=1, upper=K> z_star;
  real log_p_z_star;
  {
    array[N, K] int back_ptr;
    array[N, K] real best_logp;
    for (k in 1 : K) {
      best_logp[1, k] = normal_lpdf(y[1] | mu[k], 1);
    }
    for (t in 2 : N) {
      for (k in 1 : K) {
        best_logp[t, k] = negative_infinity();
        for (j in 1 : K) {
          real logp;
          logp = best_logp[t - 1, j] + log(theta[j, k])
                 + normal_lpdf(y[t] | mu[k], 1);
          if (logp > best_logp[t, k]) {
            back_ptr[t, k] = j;
            best_logp[t, k] = logp;
          }
        }
      }
    }
    log_p_z_star = max(best_logp[N]);
    for (k in 1 : K) {
      if (best_logp[N, k] == log_p_z_star) {
        z_star[N] = k;
      }
    }
    for (t in 1 : (N - 1)) {
      z_star[N - t] = back_ptr[N - t + 1, z_star[N - t + 1]];
    }
  }
}


