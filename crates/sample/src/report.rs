//! What `autobatch sample` writes: the summary table, the draws as CSV and
//! the run's figures as JSON.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::diagnostics::Summary;
use crate::driver::SampleRun;

/// The summary of every parameter, in order.
pub fn summaries(run: &SampleRun) -> &[Summary] {
    run.summaries()
}

fn number(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        "NA".to_string()
    } else {
        format!("{x:.decimals$}")
    }
}

/// Gradient evaluations per second over warmup and sampling.
pub fn gradients_per_second(run: &SampleRun) -> f64 {
    let grads = run.warmup_figures.gradient_evaluations + run.sampling_figures.gradient_evaluations;
    let seconds = run.warmup_figures.seconds + run.sampling_figures.seconds;
    grads as f64 / seconds
}

/// The table printed to stdout: one row per parameter, then the sampler's figures.
pub fn table(run: &SampleRun) -> String {
    let mut out = String::new();
    let rows = summaries(run);
    let _ = writeln!(
        out,
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8}",
        "parameter", "mean", "sd", "5%", "50%", "95%", "R-hat", "ESS bulk"
    );
    for (i, s) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8}",
            format!("theta[{i}]"),
            number(s.mean, 3),
            number(s.sd, 3),
            number(s.q5, 3),
            number(s.q50, 3),
            number(s.q95, 3),
            number(s.rhat, 3),
            number(s.ess_bulk, 0)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{} chains, {} warmup iterations and {} draws each",
        run.chains, run.warmup, run.draws
    );
    if !run.failures.is_empty() {
        let _ = writeln!(
            out,
            "{} of {} chains stopped with an error and are left out of this summary and the draws:",
            run.failures.len(),
            run.chains
        );
        for failure in &run.failures {
            let _ = writeln!(out, "  {failure}");
        }
    }
    let _ = writeln!(
        out,
        "divergences: {} of {} draws; mean tree depth: {}",
        run.divergences(),
        run.finished() * run.draws,
        number(run.mean_tree_depth(), 2)
    );
    let _ = writeln!(
        out,
        "gradient evaluations: {} in warmup ({:.2} s), {} in sampling ({:.2} s): {:.0} per second",
        run.warmup_figures.gradient_evaluations,
        run.warmup_figures.seconds,
        run.sampling_figures.gradient_evaluations,
        run.sampling_figures.seconds,
        gradients_per_second(run)
    );
    out
}

/// Writes the draws: a header `chain,draw,theta[0],...`, then one row per
/// chain and draw (both counted from 0), floats in their shortest exact form.
pub fn write_csv(run: &SampleRun, out: &mut dyn Write) -> io::Result<()> {
    let mut line = String::from("chain,draw");
    for i in 0..run.dim {
        let _ = write!(line, ",theta[{i}]");
    }
    writeln!(out, "{line}")?;
    for (k, chain) in run.chain_ids.iter().enumerate() {
        for draw in 0..run.draws {
            line.clear();
            let _ = write!(line, "{chain},{draw}");
            for x in run.draw(k, draw) {
                let _ = write!(line, ",{x:?}");
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn float(x: f64) -> serde_json::Value {
    autobatch::float_to_json(x)
}

/// The run's figures as JSON (`--stats`). Per-chain lists (`step_size`,
/// `inv_metric`, `mean_accept_stat`) follow `finished_chains`.
pub fn stats_json(run: &SampleRun, strategy: &str) -> serde_json::Value {
    let rows = summaries(run);
    serde_json::json!({
        "chains": run.chains,
        "warmup": run.warmup,
        "draws": run.draws,
        "dimension": run.dim,
        "strategy": strategy,
        "warmup_seconds": run.warmup_figures.seconds,
        "sampling_seconds": run.sampling_figures.seconds,
        "gradient_evaluations_warmup": run.warmup_figures.gradient_evaluations,
        "gradient_evaluations_sampling": run.sampling_figures.gradient_evaluations,
        "gradient_evaluations_per_second": float(gradients_per_second(run)),
        "gradient_utilization": float(run.gradient_utilization()),
        "gradient_utilization_warmup": float(run.warmup_figures.utilization(run.chains)),
        "gradient_utilization_sampling": float(run.sampling_figures.utilization(run.chains)),
        "divergences": run.divergences(),
        "warmup_divergences": run.warmup_divergences.iter().sum::<u64>(),
        "mean_tree_depth": float(run.mean_tree_depth()),
        "finished_chains": run.chain_ids,
        "failed_chains": run.failures.iter().map(|f| serde_json::json!({
            "chain": f.chain, "kind": f.kind, "message": f.message, "location": f.location,
        })).collect::<Vec<_>>(),
        "batch_runs": run.runs,
        "step_size": run.step_size.iter().map(|x| float(*x)).collect::<Vec<_>>(),
        "inv_metric": run.inv_metric.iter().map(|c| c.iter().map(|x| float(*x)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "mean_accept_stat": run.accept_stat.iter().map(|c| float(c.iter().sum::<f64>() / c.len() as f64)).collect::<Vec<_>>(),
        "summary": rows.iter().enumerate().map(|(i, s)| serde_json::json!({
            "parameter": format!("theta[{i}]"),
            "mean": float(s.mean), "sd": float(s.sd), "q5": float(s.q5), "q50": float(s.q50),
            "q95": float(s.q95), "rhat": float(s.rhat), "ess_bulk": float(s.ess_bulk),
        })).collect::<Vec<_>>(),
    })
}
