//! The comparison of the draws with the reference posterior, parameter by
//! parameter: by mean and sd, or, for a parameter whose sd is not a stable
//! figure (a tail too heavy for a finite variance), by quantiles.

use serde::Serialize;

use autobatch_sample::diagnostics::{ess_basic, mcse_mean, quantile, split_chains};
use autobatch_sample::SampleRun;

use crate::posterior::{Quantile, Reference};

/// The bounds a parameter must meet.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    /// |mean - reference mean| <= `mean_sds` reference sd + `mean_mcses` MCSE.
    pub mean_sds: f64,
    pub mean_mcses: f64,
    /// |sd / reference sd - 1| <= `sd_relative`.
    pub sd_relative: f64,
    /// R-hat < `max_rhat`.
    pub max_rhat: f64,
    /// A parameter whose reference chains' sds spread more than this (their
    /// sd over their mean) is compared by quantiles instead of mean and sd.
    pub max_chain_sd_spread: f64,
    /// At each reference quantile q_p, the fraction of our draws at or
    /// below q_p is within `quantile_mcses` MCSE of p.
    pub quantile_mcses: f64,
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance {
            mean_sds: 0.1,
            mean_mcses: 3.0,
            sd_relative: 0.1,
            max_rhat: 1.01,
            max_chain_sd_spread: 0.1,
            quantile_mcses: 3.0,
        }
    }
}

/// How a parameter is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Mean, sd and R-hat.
    MeanSd,
    /// The reference's quantiles and R-hat (the sd is not a stable figure).
    Quantiles,
}

/// Our draws at one reference quantile q_p.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuantileCheck {
    pub p: f64,
    /// q_p, the reference draws' p quantile.
    pub reference: f64,
    /// Our draws' p quantile, for the reader.
    pub ours: f64,
    /// The fraction of our draws at or below q_p.
    pub fraction_below: f64,
    /// The effective sample size of the indicator `draw <= q_p`.
    pub ess: f64,
    /// |fraction_below - p| over its bound: at most 1 passes.
    pub error: f64,
}

/// Our figures of one reported column.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColumnStats {
    /// The column's name (`beta.1`).
    pub column: String,
    pub mean: f64,
    pub sd: f64,
    pub mcse_mean: f64,
    pub rhat: f64,
    pub ess_bulk: f64,
}

/// One parameter compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParameterCheck {
    /// Stan's name (`beta[2]`).
    pub name: String,
    pub criterion: Criterion,
    pub ours: ColumnStats,
    pub reference_mean: f64,
    pub reference_sd: f64,
    /// The reference chains' sds' spread that chose the criterion.
    pub reference_chain_sd_spread: Option<f64>,
    /// |mean - reference mean| over its bound: at most 1 passes.
    pub mean_error: f64,
    /// sd / reference sd.
    pub sd_ratio: f64,
    pub mean_ok: bool,
    pub sd_ok: bool,
    pub rhat_ok: bool,
    /// With [`Criterion::Quantiles`]: each reference quantile.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quantiles: Vec<QuantileCheck>,
}

impl ParameterCheck {
    /// The largest error of the quantiles (0 without them).
    pub fn quantile_error(&self) -> f64 {
        self.quantiles
            .iter()
            .map(|q| q.error)
            .fold(0.0, |a: f64, b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            })
    }

    pub fn quantiles_ok(&self) -> bool {
        self.quantile_error() <= 1.0
    }

    pub fn passed(&self) -> bool {
        let moments = match self.criterion {
            Criterion::MeanSd => self.mean_ok && self.sd_ok,
            Criterion::Quantiles => !self.quantiles.is_empty() && self.quantiles_ok(),
        };
        moments && self.rhat_ok
    }
}

/// Every parameter compared, and the reference's quantities that the draws
/// do not have (transformed parameters, generated quantities).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub parameters: Vec<ParameterCheck>,
    pub not_compared: Vec<String>,
}

impl Comparison {
    /// At least one parameter compared, and every one passed.
    pub fn passed(&self) -> bool {
        !self.parameters.is_empty() && self.parameters.iter().all(ParameterCheck::passed)
    }
}

/// Our column name of Stan's `name`: `beta[2]` is `beta.1`, `L[2,1]` is
/// `L.1.0`; `None` for an index that is not a positive integer.
pub fn column_name(name: &str) -> Option<String> {
    let Some((base, rest)) = name.split_once('[') else {
        return Some(name.to_string());
    };
    let mut column = base.to_string();
    for index in rest.strip_suffix(']')?.split(',') {
        let i: usize = index.trim().parse().ok()?;
        column.push_str(&format!(".{}", i.checked_sub(1)?));
    }
    Some(column)
}

/// The figures of every reported column of `run`, from the sampler's
/// summary.
pub fn column_stats(run: &SampleRun) -> Vec<ColumnStats> {
    run.summaries()
        .iter()
        .enumerate()
        .map(|(i, summary)| ColumnStats {
            column: run.columns[i].clone(),
            mean: summary.mean,
            sd: summary.sd,
            mcse_mean: mcse_mean(&run.column(i)),
            rhat: summary.rhat,
            ess_bulk: summary.ess_bulk,
        })
        .collect()
}

/// Compares the draws of `run` with `reference`.
pub fn compare(run: &SampleRun, reference: &[Reference], tolerance: &Tolerance) -> Comparison {
    let stats = column_stats(run);
    compare_stats(&stats, &|i: usize| run.column(i), reference, tolerance)
}

/// Compares our figures of each column with `reference`; `draws(i)` gives
/// column i's draws, chain by chain (read only for the parameters
/// compared by quantiles).
pub fn compare_stats(
    ours: &[ColumnStats],
    draws: &dyn Fn(usize) -> Vec<Vec<f64>>,
    reference: &[Reference],
    tolerance: &Tolerance,
) -> Comparison {
    let mut comparison = Comparison {
        parameters: Vec::new(),
        not_compared: Vec::new(),
    };
    for r in reference {
        let found = column_name(&r.name).and_then(|c| ours.iter().position(|s| s.column == c));
        match found {
            Some(i) => {
                let mut check = check_parameter(&ours[i], r, tolerance);
                if check.criterion == Criterion::Quantiles {
                    check.quantiles = check_quantiles(&draws(i), r, tolerance);
                }
                comparison.parameters.push(check);
            }
            None => comparison.not_compared.push(r.name.clone()),
        }
    }
    comparison
}

/// The criterion for `r`: quantiles when the reference has them and its
/// chains' sds spread more than the tolerance allows.
fn criterion(r: &Reference, tolerance: &Tolerance) -> Criterion {
    match r.chain_sd_spread {
        Some(spread) if !r.quantiles.is_empty() && spread > tolerance.max_chain_sd_spread => {
            Criterion::Quantiles
        }
        _ => Criterion::MeanSd,
    }
}

/// One parameter against the tolerance (a NaN figure fails).
fn check_parameter(ours: &ColumnStats, r: &Reference, tolerance: &Tolerance) -> ParameterCheck {
    let bound = tolerance.mean_sds * r.sd + tolerance.mean_mcses * ours.mcse_mean;
    let mean_error = (ours.mean - r.mean).abs() / bound;
    let sd_ratio = ours.sd / r.sd;
    ParameterCheck {
        name: r.name.clone(),
        criterion: criterion(r, tolerance),
        ours: ours.clone(),
        reference_mean: r.mean,
        reference_sd: r.sd,
        reference_chain_sd_spread: r.chain_sd_spread,
        mean_error,
        sd_ratio,
        mean_ok: mean_error <= 1.0,
        sd_ok: (sd_ratio - 1.0).abs() <= tolerance.sd_relative,
        rhat_ok: ours.rhat < tolerance.max_rhat,
        quantiles: Vec::new(),
    }
}

/// Our draws (chain by chain) at each quantile of `r`: the fraction at or
/// below the reference's q_p must be within `quantile_mcses` standard
/// errors of p. The standard error is that of the fraction,
/// sqrt(p (1 - p) / ESS) with the ESS of the indicator `draw <= q_p` in our
/// split chains ([`ess_basic`], as the tail ESS), combined with that of the
/// reference's own quantile (with the reference's bulk ESS; NaN, which
/// fails, without it).
fn check_quantiles(
    chains: &[Vec<f64>],
    r: &Reference,
    tolerance: &Tolerance,
) -> Vec<QuantileCheck> {
    let split = split_chains(chains);
    let pooled = chains.concat();
    let n = pooled.len() as f64;
    let reference_ess = r.ess_bulk.unwrap_or(f64::NAN);
    r.quantiles
        .iter()
        .map(|&Quantile { p, value }| {
            let below: Vec<Vec<f64>> = split
                .iter()
                .map(|c| c.iter().map(|x| f64::from(u8::from(*x <= value))).collect())
                .collect();
            let fraction_below = below.iter().flatten().sum::<f64>() / n;
            let ess = ess_basic(&below);
            let se = (p * (1.0 - p) * (1.0 / ess + 1.0 / reference_ess)).sqrt();
            QuantileCheck {
                p,
                reference: value,
                ours: quantile(&pooled, p),
                fraction_below,
                ess,
                error: (fraction_below - p).abs() / (tolerance.quantile_mcses * se),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(column: &str, mean: f64, sd: f64, mcse_mean: f64, rhat: f64) -> ColumnStats {
        ColumnStats {
            column: column.to_string(),
            mean,
            sd,
            mcse_mean,
            rhat,
            ess_bulk: 1000.0,
        }
    }

    fn reference(name: &str, mean: f64, sd: f64) -> Reference {
        Reference::new(name, mean, sd)
    }

    fn no_draws(_: usize) -> Vec<Vec<f64>> {
        panic!("a parameter compared by mean and sd reads no draws")
    }

    #[test]
    fn stan_names_map_to_columns() {
        assert_eq!(column_name("sigma").as_deref(), Some("sigma"));
        assert_eq!(column_name("beta[2]").as_deref(), Some("beta.1"));
        assert_eq!(column_name("L[2,1]").as_deref(), Some("L.1.0"));
        assert_eq!(column_name("L[12, 3]").as_deref(), Some("L.11.2"));
        assert_eq!(column_name("beta[0]"), None);
        assert_eq!(column_name("beta[x]"), None);
        assert_eq!(column_name("beta[2"), None);
    }

    /// Each bound at its edge: the mean may be off by 0.1 sd + 3 MCSE, the
    /// sd by 10%, and R-hat must be below 1.01.
    #[test]
    fn bounds_pass_and_fail_where_they_should() {
        let tolerance = Tolerance::default();
        let reference = [reference("beta[1]", 10.0, 2.0)];
        // Bound on the mean: 0.1 * 2 + 3 * 0.05 = 0.35.
        let case = |mean, sd, rhat| {
            let c = compare_stats(
                &[stats("beta.0", mean, sd, 0.05, rhat)],
                &no_draws,
                &reference,
                &tolerance,
            );
            assert_eq!(c.parameters.len(), 1);
            let p = &c.parameters[0];
            (p.mean_ok, p.sd_ok, p.rhat_ok, c.passed())
        };
        assert_eq!(case(10.34, 2.0, 1.0), (true, true, true, true));
        assert_eq!(case(9.66, 2.0, 1.0), (true, true, true, true));
        assert_eq!(case(10.36, 2.0, 1.0), (false, true, true, false));
        assert_eq!(case(10.0, 2.19, 1.0), (true, true, true, true));
        assert_eq!(case(10.0, 2.21, 1.0), (true, false, true, false));
        assert_eq!(case(10.0, 1.79, 1.0), (true, false, true, false));
        assert_eq!(case(10.0, 2.0, 1.0099), (true, true, true, true));
        assert_eq!(case(10.0, 2.0, 1.0101), (true, true, false, false));
        assert_eq!(case(f64::NAN, 2.0, 1.0), (false, true, true, false));
        assert_eq!(case(10.0, 2.0, f64::NAN), (true, true, false, false));
    }

    #[test]
    fn quantities_without_draws_are_listed_and_nothing_compared_fails() {
        let tolerance = Tolerance::default();
        let ours = [stats("sigma", 1.0, 0.1, 0.01, 1.0)];
        let c = compare_stats(
            &ours,
            &no_draws,
            &[
                reference("sigma", 1.0, 0.1),
                reference("theta[1]", 0.0, 1.0),
            ],
            &tolerance,
        );
        assert!(c.passed());
        assert_eq!(c.not_compared, ["theta[1]"]);
        let none = compare_stats(&ours, &no_draws, &[reference("tau", 1.0, 0.1)], &tolerance);
        assert!(!none.passed(), "no parameter in common");
    }

    /// Four chains of 1000 draws of `scale` times a standard Cauchy variate:
    /// the inverse distribution function at a stratified grid of
    /// probabilities, in an order that mixes them over the chains.
    fn cauchy_draws(scale: f64) -> Vec<Vec<f64>> {
        let n = 4000;
        let draws: Vec<f64> = (0..n)
            .map(|k| {
                let u = ((k * 1237) % n) as f64 / n as f64 + 0.5 / n as f64;
                scale * (std::f64::consts::PI * (u - 0.5)).tan()
            })
            .collect();
        draws.chunks(1000).map(<[f64]>::to_vec).collect()
    }

    /// The standard Cauchy's quantiles, as a reference with the given
    /// spread of its chains' sds.
    fn cauchy_reference(spread: f64) -> Reference {
        let mut r = reference("K_m", 0.0, 7.0);
        r.quantiles = [0.05, 0.25, 0.5, 0.75, 0.95]
            .iter()
            .map(|&p| Quantile {
                p,
                value: (std::f64::consts::PI * (p - 0.5)).tan(),
            })
            .collect();
        r.chain_sd_spread = Some(spread);
        r.ess_bulk = Some(10000.0);
        r
    }

    /// A reference whose chains' sds spread more than 0.1 is compared by
    /// quantiles, whatever the sd: the same distribution passes, one 30%
    /// wider fails (at its 25% and 75% quantiles, 0.04 off in
    /// probability).
    #[test]
    fn heavy_tails_are_compared_by_quantiles() {
        let tolerance = Tolerance::default();
        let run = |scale: f64, spread: f64| {
            let ours = [stats("K_m", 0.0, 30.0, 1.0, 1.0)];
            let draws = |_: usize| cauchy_draws(scale);
            compare_stats(&ours, &draws, &[cauchy_reference(spread)], &tolerance)
        };
        let same = run(1.0, 0.36);
        let p = &same.parameters[0];
        assert_eq!(p.criterion, Criterion::Quantiles);
        assert!(!p.sd_ok, "the sd is off, and not judged");
        assert_eq!(p.quantiles.len(), 5);
        assert!(p.quantile_error() < 0.1, "{:?}", p.quantiles);
        assert!(same.passed());
        let wider = run(1.3, 0.36);
        let p = &wider.parameters[0];
        assert!(!wider.passed());
        let quartile = &p.quantiles[1];
        // P(1.3 X <= tan(-pi / 4) = -1) for a standard Cauchy X.
        let below = 0.5 + (-1.0f64 / 1.3).atan() / std::f64::consts::PI;
        assert!(
            (quartile.fraction_below - below).abs() < 0.001,
            "{quartile:?}"
        );
        assert!(quartile.error > 1.0, "{quartile:?}");
        assert!(p.quantiles[2].error < 1e-9, "the median is the same");
        let stable = run(1.0, 0.05);
        assert_eq!(stable.parameters[0].criterion, Criterion::MeanSd);
        assert!(stable.parameters[0].quantiles.is_empty());
        assert!(!stable.passed(), "judged by its sd, which is off");
    }
}
