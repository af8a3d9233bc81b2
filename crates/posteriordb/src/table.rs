//! The check's report: a table with a line per posterior (and one per
//! parameter that failed), the JSON form, and the summary line.

use std::fmt::Write as _;

use autobatch_sample::report::significant;

use crate::compare::{Comparison, ParameterCheck, Tolerance};
use crate::Outcome;

/// The worst figures of a comparison: the largest mean error (in units of
/// its bound), the sd ratio farthest from 1, the largest R-hat and the
/// smallest bulk ESS.
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
        w.mean_error = larger(w.mean_error, p.mean_error);
        if p.sd_ratio.is_nan() || (p.sd_ratio - 1.0).abs() > (w.sd_ratio - 1.0).abs() {
            w.sd_ratio = p.sd_ratio;
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
    let mut reasons = Vec::new();
    if !p.mean_ok {
        reasons.push(format!(
            "mean {} against {} ({} times its bound)",
            significant(p.ours.mean),
            significant(p.reference_mean),
            significant(p.mean_error)
        ));
    }
    if !p.sd_ok {
        reasons.push(format!(
            "sd {} against {} (ratio {})",
            significant(p.ours.sd),
            significant(p.reference_sd),
            significant(p.sd_ratio)
        ));
    }
    if !p.rhat_ok {
        reasons.push(format!("R-hat {}", significant(p.ours.rhat)));
    }
    format!("    {}: {}", p.name, reasons.join("; "))
}

/// The table: per posterior, the parameters compared, the worst mean error
/// (in units of its bound: at most 1 passes), the worst sd ratio, the
/// largest R-hat, the smallest bulk ESS, divergences, seconds and the
/// result; under a posterior that failed, what failed.
pub fn table(outcomes: &[Outcome]) -> String {
    let width = outcomes
        .iter()
        .map(|o| o.name.len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$} {:>6} {:>8} {:>8} {:>7} {:>7} {:>5} {:>7}  result",
        "posterior", "params", "mean/tol", "sd ratio", "R-hat", "ESS", "div", "seconds"
    );
    for o in outcomes {
        let Some(comparison) = &o.comparison else {
            let error = o.error.as_deref().unwrap_or("");
            let _ = writeln!(out, "{:<width$} {:>6}  error: {error}", o.name, "-");
            continue;
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
        for p in comparison.parameters.iter().filter(|p| !p.passed()) {
            let _ = writeln!(out, "{}", failure(p));
        }
    }
    out
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
