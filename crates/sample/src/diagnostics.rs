//! Convergence diagnostics and summaries of draws, as Stan and ArviZ
//! compute them (Vehtari, Gelman, Simpson, Carpenter and Bürkner 2021):
//! rank-normalized split R-hat (the larger of the bulk R-hat and the R-hat
//! of the folded draws), bulk effective sample size (rank-normalized split
//! chains, Geyer's initial monotone sequence) and tail effective sample
//! size (the smaller of the ESS of the 5% and 95% quantiles). Every
//! function takes draws as `[chain][draw]`.
//!
//! When a figure is not defined it is NaN (`NA` in the table): R-hat with
//! fewer than [`MIN_DRAWS_RHAT`] draws per chain, the ESS with fewer than
//! [`MIN_DRAWS_ESS`] (Stan's rule: each split half needs 4 draws), and
//! either when a draw is not finite or every draw is the same.

/// The energy Bayesian fraction of missing information of one chain's
/// energies (Betancourt 2016), as ArviZ's `bfmi` computes it: the mean
/// squared change of energy from one draw to the next over the sample
/// variance (divisor n - 1) of the energy. Below 0.3 (Stan's threshold),
/// momentum resampling moves the energy too little for the sampler to
/// explore the posterior's tails. NaN with fewer than two draws or
/// energies that do not vary.
pub fn e_bfmi(energies: &[f64]) -> f64 {
    let n = energies.len();
    if n < 2 {
        return f64::NAN;
    }
    let variance = variance(energies);
    let steps = energies
        .windows(2)
        .map(|w| (w[1] - w[0]) * (w[1] - w[0]))
        .sum::<f64>()
        / (n - 1) as f64;
    if variance > 0.0 {
        steps / variance
    } else {
        f64::NAN
    }
}

/// Stan's threshold: an E-BFMI below it is worth a warning.
pub const E_BFMI_THRESHOLD: f64 = 0.3;

/// The quantile function of the standard normal distribution (Acklam's
/// rational approximation, relative error below 1.2e-9): enough for rank
/// normalization, which only needs the order of magnitude of the tails.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let low = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < low {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - low {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The sample variance (divisor n - 1).
fn variance(xs: &[f64]) -> f64 {
    let m = mean(xs);
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() as f64 - 1.0)
}

/// Each chain cut in two halves (the middle draw of an odd chain dropped).
pub fn split_chains(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut out = Vec::with_capacity(2 * chains.len());
    for chain in chains {
        let half = chain.len() / 2;
        out.push(chain[..half].to_vec());
        out.push(chain[chain.len() - half..].to_vec());
    }
    out
}

/// Replaces every draw by the normal quantile of its pooled rank
/// ((rank - 3/8) / (S + 1/4), ties at their average rank).
pub fn rank_normalize(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let total: usize = chains.iter().map(Vec::len).sum();
    let mut order: Vec<(f64, usize, usize)> = Vec::with_capacity(total);
    for (c, chain) in chains.iter().enumerate() {
        for (i, x) in chain.iter().enumerate() {
            order.push((*x, c, i));
        }
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Vec<f64>> = chains.iter().map(|c| vec![0.0; c.len()]).collect();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && order[end].0 == order[start].0 {
            end += 1;
        }
        // Ranks are 1-based; ties share the average of their ranks.
        let rank = (start + 1 + end) as f64 / 2.0;
        let z = normal_quantile((rank - 0.375) / (total as f64 + 0.25));
        for &(_, c, i) in &order[start..end] {
            out[c][i] = z;
        }
        start = end;
    }
    out
}

/// The classic potential scale reduction of chains of equal length.
pub fn rhat_basic(chains: &[Vec<f64>]) -> f64 {
    let m = chains.len();
    let n = chains.first().map_or(0, Vec::len);
    if m < 2 || n < 2 || chains.iter().any(|c| c.len() != n) {
        return f64::NAN;
    }
    let means: Vec<f64> = chains.iter().map(|c| mean(c)).collect();
    let b = n as f64 * variance(&means);
    let w = mean(&chains.iter().map(|c| variance(c)).collect::<Vec<_>>());
    let var_hat = (n as f64 - 1.0) / n as f64 * w + b / n as f64;
    (var_hat / w).sqrt()
}

/// The fewest draws per chain [`rhat`] is defined for.
pub const MIN_DRAWS_RHAT: usize = 4;

/// The fewest draws per chain [`ess_bulk`] and [`ess_tail`] are defined
/// for: Stan estimates no ESS from fewer than 4 draws, and they split
/// every chain in two.
pub const MIN_DRAWS_ESS: usize = 8;

/// Whether every chain has at least `min` draws, and every draw is finite.
fn enough_finite_draws(chains: &[Vec<f64>], min: usize) -> bool {
    !chains.is_empty() && chains.iter().all(|c| c.len() >= min) && all_finite(chains)
}

/// Rank-normalized split R-hat: the larger of the bulk R-hat (of the
/// rank-normalized split chains) and the tail R-hat (of the rank-normalized
/// distances to the median). NaN with fewer than [`MIN_DRAWS_RHAT`] draws
/// per chain, or if every draw is the same.
pub fn rhat(chains: &[Vec<f64>]) -> f64 {
    if !enough_finite_draws(chains, MIN_DRAWS_RHAT) {
        return f64::NAN;
    }
    let split = split_chains(chains);
    rhat_of_split(&split, &rank_normalize(&split))
}

/// R-hat from the split chains and their rank normalization.
fn rhat_of_split(split: &[Vec<f64>], normalized: &[Vec<f64>]) -> f64 {
    let bulk = rhat_basic(normalized);
    let median = quantile(&split.concat(), 0.5);
    let folded: Vec<Vec<f64>> = split
        .iter()
        .map(|c| c.iter().map(|x| (x - median).abs()).collect())
        .collect();
    let tail = rhat_basic(&rank_normalize(&folded));
    if bulk.is_nan() || tail.is_nan() {
        f64::NAN
    } else {
        bulk.max(tail)
    }
}

fn all_finite(chains: &[Vec<f64>]) -> bool {
    chains.iter().flatten().all(|x| x.is_finite())
}

/// The effective sample size of chains of equal length, with Geyer's
/// initial monotone sequence estimator of the autocorrelation time.
pub fn ess_basic(chains: &[Vec<f64>]) -> f64 {
    let m = chains.len();
    let n = chains.first().map_or(0, Vec::len);
    if m == 0 || n < 4 || chains.iter().any(|c| c.len() != n) {
        return f64::NAN;
    }
    let means: Vec<f64> = chains.iter().map(|c| mean(c)).collect();
    // Mean over chains of the biased autocovariance at `lag`.
    let acov = |lag: usize| {
        let mut total = 0.0;
        for (chain, mu) in chains.iter().zip(&means) {
            let mut s = 0.0;
            for i in 0..n - lag {
                s += (chain[i] - mu) * (chain[i + lag] - mu);
            }
            total += s / n as f64;
        }
        total / m as f64
    };
    let nf = n as f64;
    let mean_var = acov(0) * nf / (nf - 1.0);
    if mean_var.is_nan() || mean_var <= 0.0 {
        return f64::NAN;
    }
    let mut var_plus = mean_var * (nf - 1.0) / nf;
    if m > 1 {
        var_plus += variance(&means);
    }
    let rho = |lag: usize| 1.0 - (mean_var - acov(lag)) / var_plus;
    let mut rho_hat = vec![0.0; n];
    rho_hat[0] = 1.0;
    let mut rho_even = 1.0;
    let mut rho_odd = rho(1);
    rho_hat[1] = rho_odd;
    let mut t = 1;
    while t < n - 3 && rho_even + rho_odd > 0.0 {
        rho_even = rho(t + 1);
        rho_odd = rho(t + 2);
        if rho_even + rho_odd >= 0.0 {
            rho_hat[t + 1] = rho_even;
            rho_hat[t + 2] = rho_odd;
        }
        t += 2;
    }
    // The autocorrelations summed are those before `end`; the one at `end`
    // is the last pair's even term, which reduces the variance of the
    // estimate for antithetic chains. (`end` is 0 when the series is too
    // short for a single pair: 4 draws.)
    let end = t - 1;
    if rho_even > 0.0 {
        rho_hat[end] = rho_even;
    }
    // Geyer's initial monotone sequence: pair sums never increase.
    let mut t = 1;
    while t + 3 <= end {
        if rho_hat[t + 1] + rho_hat[t + 2] > rho_hat[t - 1] + rho_hat[t] {
            rho_hat[t + 1] = (rho_hat[t - 1] + rho_hat[t]) / 2.0;
            rho_hat[t + 2] = rho_hat[t + 1];
        }
        t += 2;
    }
    let ess = (m * n) as f64;
    let tau =
        (-1.0 + 2.0 * rho_hat[..end].iter().sum::<f64>() + rho_hat[end]).max(1.0 / ess.log10());
    ess / tau
}

/// Bulk effective sample size: [`ess_basic`] of the rank-normalized split
/// chains. NaN with fewer than [`MIN_DRAWS_ESS`] draws per chain.
pub fn ess_bulk(chains: &[Vec<f64>]) -> f64 {
    if !enough_finite_draws(chains, MIN_DRAWS_ESS) {
        return f64::NAN;
    }
    ess_basic(&rank_normalize(&split_chains(chains)))
}

/// The Monte Carlo standard error of the mean: the sd of every chain's
/// draws pooled over the square root of [`ess_basic`] of the split chains
/// (not rank-normalized: the ESS of the mean itself), as Stan's
/// `stansummary`, ArviZ's `mcse(method="mean")` and the R package
/// posterior compute it. NaN with fewer than [`MIN_DRAWS_ESS`] draws per
/// chain.
pub fn mcse_mean(chains: &[Vec<f64>]) -> f64 {
    if !enough_finite_draws(chains, MIN_DRAWS_ESS) {
        return f64::NAN;
    }
    variance(&chains.concat()).sqrt() / ess_basic(&split_chains(chains)).sqrt()
}

/// Tail effective sample size: the smaller of the effective sample sizes
/// of the 5% and the 95% quantile, each [`ess_basic`] of the split chains
/// of the indicator `draw <= quantile` (pooled quantiles, as
/// [`quantile`]). NaN with fewer than [`MIN_DRAWS_ESS`] draws per chain.
pub fn ess_tail(chains: &[Vec<f64>]) -> f64 {
    if !enough_finite_draws(chains, MIN_DRAWS_ESS) {
        return f64::NAN;
    }
    let mut sorted = chains.concat();
    sorted.sort_by(f64::total_cmp);
    ess_tail_of(&split_chains(chains), &sorted)
}

/// [`ess_tail`] of chains already split, their draws given sorted.
fn ess_tail_of(split: &[Vec<f64>], sorted: &[f64]) -> f64 {
    let quantile_ess = |p: f64| {
        let q = quantile_of_sorted(sorted, p);
        let below: Vec<Vec<f64>> = split
            .iter()
            .map(|c| c.iter().map(|x| f64::from(u8::from(*x <= q))).collect())
            .collect();
        ess_basic(&below)
    };
    let (low, high) = (quantile_ess(0.05), quantile_ess(0.95));
    if low.is_nan() || high.is_nan() {
        f64::NAN
    } else {
        low.min(high)
    }
}

/// The `p` quantile of `xs`, interpolating linearly between order
/// statistics (R's and NumPy's default).
pub fn quantile(xs: &[f64], p: f64) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile_of_sorted(&sorted, p)
}

/// [`quantile`] of values already sorted.
fn quantile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// One parameter's summary over all chains.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub mean: f64,
    pub sd: f64,
    pub q5: f64,
    pub q50: f64,
    pub q95: f64,
    pub rhat: f64,
    pub ess_bulk: f64,
    pub ess_tail: f64,
}

/// The summary of one parameter's draws, `[chain][draw]`: the same numbers
/// as [`quantile`], [`rhat`], [`ess_bulk`] and [`ess_tail`], sorting once
/// and rank-normalizing the split chains once.
pub fn summarize(chains: &[Vec<f64>]) -> Summary {
    let mut all = chains.concat();
    let sd = if all.len() > 1 {
        variance(&all).sqrt()
    } else {
        f64::NAN
    };
    let mean = if all.is_empty() { f64::NAN } else { mean(&all) };
    all.sort_by(f64::total_cmp);
    let (mut rhat, mut ess_bulk, mut ess_tail) = (f64::NAN, f64::NAN, f64::NAN);
    if enough_finite_draws(chains, MIN_DRAWS_RHAT) {
        let split = split_chains(chains);
        let normalized = rank_normalize(&split);
        rhat = rhat_of_split(&split, &normalized);
        if enough_finite_draws(chains, MIN_DRAWS_ESS) {
            ess_bulk = ess_basic(&normalized);
            ess_tail = ess_tail_of(&split, &all);
        }
    }
    Summary {
        mean,
        sd,
        q5: quantile_of_sorted(&all, 0.05),
        q50: quantile_of_sorted(&all, 0.5),
        q95: quantile_of_sorted(&all, 0.95),
        rhat,
        ess_bulk,
        ess_tail,
    }
}
