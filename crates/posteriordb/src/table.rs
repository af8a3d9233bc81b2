//! The check's report: a table with a line per posterior (and one per
//! parameter that failed), the JSON form, and the summary line.

use std::fmt::Write as _;

use autobatch_sample::report::significant;

use crate::compare::{Comparison, Criterion, ParameterCheck, Tolerance};
use crate::Outcome;

/// The worst figures of a comparison: the largest mean error (in units of
/// its bound) and the sd ratio farthest from 1 of the parameters compared
/// by mean and sd, the largest R-hat and the smallest bulk ESS of all.
struct Worst {
    mean_error: f64,
    sd_ratio: f64,
    rhat: f64,
    ess_bulk: f64,
}

/// The larger of two figures, a NaN the largest (it fails).
fn larger(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn worst(comparison: &Comparison) -> Worst {
    let mut w = Worst {
        mean_error: 0.0,
        sd_ratio: 1.0,
        rhat: 0.0,
        ess_bulk: f64::INFINITY,
    };
    for p in &comparison.parameters {
        if p.criterion == Criterion::MeanSd {
            w.mean_error = larger(w.mean_error, p.mean_error);
            if p.sd_ratio.is_nan() || (p.sd_ratio - 1.0).abs() > (w.sd_ratio - 1.0).abs() {
                w.sd_ratio = p.sd_ratio;
            }
        }
        w.rhat = larger(w.rhat, p.ours.rhat);
        w.ess_bulk = -larger(-w.ess_bulk, -p.ours.ess_bulk);
    }
    w
}

fn status(outcome: &Outcome) -> &'static str {
    if outcome.passed {
        "pass"
    } else if outcome.comparison.is_none() {
        "error"
    } else {
        "FAIL"
    }
}

/// What a failed parameter missed.
fn failure(p: &ParameterCheck) -> String {
    let against = |what: &str, ours: f64, reference: f64, why: String| {
        format!(
            "{what} {} against {} ({why})",
            significant(ours),
            significant(reference)
        )
    };
    let mut reasons = Vec::new();
    if p.criterion == Criterion::Quantiles {
        reasons.extend(
            p.quantiles
                .iter()
                .filter(|q| q.error.is_nan() || q.error > 1.0)
                .map(|q| {
                    format!(
                "{} of the draws at or below the reference's {}% quantile {} ({} times its bound)",
                significant(q.fraction_below),
                significant(100.0 * q.p),
                significant(q.reference),
                significant(q.error)
            )
                }),
        );
    } else if !p.mean_ok {
        let why = format!("{} times its bound", significant(p.mean_error));
        reasons.push(against("mean", p.ours.mean, p.reference_mean, why));
    }
    if p.criterion == Criterion::MeanSd && !p.sd_ok {
        let why = format!("ratio {}", significant(p.sd_ratio));
        reasons.push(against("sd", p.ours.sd, p.reference_sd, why));
    }
    if !p.rhat_ok {
        reasons.push(format!("R-hat {}", significant(p.ours.rhat)));
    }
    format!("    {}: {}", p.name, reasons.join("; "))
}

/// The table: per posterior, the parameters compared, the worst mean error
/// (in units of its bound: at most 1 passes), the worst sd ratio, the
/// largest R-hat, the smallest bulk ESS, divergences, seconds and the
/// result; under it, each parameter compared by quantiles and, when the
/// posterior failed, what failed.
pub fn table(outcomes: &[Outcome]) -> String {
    let width = name_width(outcomes.iter().map(|o| o.name.as_str()));
    let mut out = header(width);
    for o in outcomes {
        out.push_str(&rows(o, width));
    }
    out
}

/// The width of the table's first column for these posteriors.
pub fn name_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names
        .map(str::len)
        .max()
        .unwrap_or(0)
        .max("posterior".len())
}

/// The table's first line.
pub fn header(width: usize) -> String {
    format!(
        "{:<width$} {:>6} {:>8} {:>8} {:>7} {:>7} {:>5} {:>7}  result\n",
        "posterior", "params", "mean/tol", "sd ratio", "R-hat", "ESS", "div", "seconds"
    )
}

/// The table's lines of one posterior.
pub fn rows(o: &Outcome, width: usize) -> String {
    let mut out = String::new();
    let Some(comparison) = &o.comparison else {
        let error = o.error.as_deref().unwrap_or("");
        let _ = writeln!(out, "{:<width$} {:>6}  error: {error}", o.name, "-");
        return out;
    };
    let w = worst(comparison);
    let _ = writeln!(
        out,
        "{:<width$} {:>6} {:>8.2} {:>8.3} {:>7.4} {:>7.0} {:>5} {:>7.1}  {}",
        o.name,
        comparison.parameters.len(),
        w.mean_error,
        w.sd_ratio,
        w.rhat,
        w.ess_bulk,
        o.divergences,
        o.seconds,
        status(o)
    );
    if let Some(error) = &o.error {
        let _ = writeln!(out, "    {error}");
    }
    if comparison.parameters.is_empty() {
        let _ = writeln!(out, "    no parameter of the reference is in the draws");
    }
    for p in &comparison.parameters {
        if p.criterion == Criterion::Quantiles {
            let _ = writeln!(out, "{}", by_quantiles(p));
        }
    }
    for p in comparison.parameters.iter().filter(|p| !p.passed()) {
        let _ = writeln!(out, "{}", failure(p));
    }
    out
}

/// The line of a parameter compared by quantiles: why, and its worst
/// quantile.
fn by_quantiles(p: &ParameterCheck) -> String {
    format!(
        "    {}: compared by quantiles (the reference chains' sds spread {}), worst {} of its bound",
        p.name,
        significant(p.reference_chain_sd_spread.unwrap_or(f64::NAN)),
        significant(p.quantile_error())
    )
}

/// `N of M posteriors passed`.
pub fn summary_line(outcomes: &[Outcome]) -> String {
    let passed = outcomes.iter().filter(|o| o.passed).count();
    format!("{passed} of {} posteriors passed", outcomes.len())
}

/// The whole check as JSON: the tolerance, every posterior's outcome with
/// every parameter's figures, and the counts.
pub fn to_json(outcomes: &[Outcome], tolerance: &Tolerance) -> serde_json::Value {
    serde_json::json!({
        "tolerance": tolerance,
        "posteriors": outcomes,
        "passed": outcomes.iter().filter(|o| o.passed).count(),
        "total": outcomes.len(),
    })
}
