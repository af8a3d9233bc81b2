//! The comparison of the draws with the reference posterior, parameter by
//! parameter.

use serde::Serialize;

use autobatch_sample::diagnostics::mcse_mean;
use autobatch_sample::SampleRun;

use crate::posterior::Reference;

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
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance {
            mean_sds: 0.1,
            mean_mcses: 3.0,
            sd_relative: 0.1,
            max_rhat: 1.01,
        }
    }
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
    pub ours: ColumnStats,
    pub reference_mean: f64,
    pub reference_sd: f64,
    /// |mean - reference mean| over its bound: at most 1 passes.
    pub mean_error: f64,
    /// sd / reference sd.
    pub sd_ratio: f64,
    pub mean_ok: bool,
    pub sd_ok: bool,
    pub rhat_ok: bool,
}

impl ParameterCheck {
    pub fn passed(&self) -> bool {
        self.mean_ok && self.sd_ok && self.rhat_ok
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
    compare_stats(&column_stats(run), reference, tolerance)
}

/// Compares our figures of each column with `reference`.
pub fn compare_stats(
    ours: &[ColumnStats],
    reference: &[Reference],
    tolerance: &Tolerance,
) -> Comparison {
    let mut comparison = Comparison {
        parameters: Vec::new(),
        not_compared: Vec::new(),
    };
    for r in reference {
        let found = column_name(&r.name).and_then(|c| ours.iter().find(|s| s.column == c));
        match found {
            Some(stats) => comparison
                .parameters
                .push(check_parameter(stats, r, tolerance)),
            None => comparison.not_compared.push(r.name.clone()),
        }
    }
    comparison
}

/// One parameter against the tolerance (a NaN figure fails).
fn check_parameter(ours: &ColumnStats, r: &Reference, tolerance: &Tolerance) -> ParameterCheck {
    let bound = tolerance.mean_sds * r.sd + tolerance.mean_mcses * ours.mcse_mean;
    let mean_error = (ours.mean - r.mean).abs() / bound;
    let sd_ratio = ours.sd / r.sd;
    ParameterCheck {
        name: r.name.clone(),
        ours: ours.clone(),
        reference_mean: r.mean,
        reference_sd: r.sd,
        mean_error,
        sd_ratio,
        mean_ok: mean_error <= 1.0,
        sd_ok: (sd_ratio - 1.0).abs() <= tolerance.sd_relative,
        rhat_ok: ours.rhat < tolerance.max_rhat,
    }
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
        Reference {
            name: name.to_string(),
            mean,
            sd,
        }
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
            &[
                reference("sigma", 1.0, 0.1),
                reference("theta[1]", 0.0, 1.0),
            ],
            &tolerance,
        );
        assert!(c.passed());
        assert_eq!(c.not_compared, ["theta[1]"]);
        let none = compare_stats(&ours, &[reference("tau", 1.0, 0.1)], &tolerance);
        assert!(!none.passed(), "no parameter in common");
    }
}
