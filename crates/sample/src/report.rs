//! What `autobatch sample` writes: the summary table, the draws as CSV and
//! the run's figures as JSON.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::diagnostics::{Summary, E_BFMI_THRESHOLD};
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

/// Significant digits of the table's estimates (Stan's `print` and ArviZ
/// show estimates to a few significant digits, whatever their scale).
const SIGNIFICANT_DIGITS: i32 = 4;

/// `x` to [`SIGNIFICANT_DIGITS`] significant digits: in fixed notation from
/// 0.001 up to 100000, else in scientific notation (`1.235e-30`), so that a
/// parameter of any scale shows its digits, never `0.000`.
pub fn significant(x: f64) -> String {
    if x.is_nan() {
        return "NA".to_string();
    }
    if x == 0.0 || x.is_infinite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    if !(-3..5).contains(&magnitude) {
        return format!("{x:.prec$e}", prec = (SIGNIFICANT_DIGITS - 1) as usize);
    }
    let decimals = (SIGNIFICANT_DIGITS - 1 - magnitude).max(0) as usize;
    format!("{x:.decimals$}")
}

/// `count` and `noun`, the noun in the plural unless the count is 1.
fn counted(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("{count} {noun}")
    } else {
        format!("{count} {noun}s")
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
    let width = run
        .columns
        .iter()
        .map(|c| c.len())
        .max()
        .unwrap_or(0)
        .max(12);
    let _ = writeln!(
        out,
        "{:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8}",
        "parameter", "mean", "sd", "5%", "50%", "95%", "R-hat", "ESS bulk"
    );
    for (name, s) in run.columns.iter().zip(rows) {
        let _ = writeln!(
            out,
            "{:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8}",
            name,
            significant(s.mean),
            significant(s.sd),
            significant(s.q5),
            significant(s.q50),
            significant(s.q95),
            number(s.rhat, 3),
            number(s.ess_bulk, 0)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{}, {} and {} each",
        counted(run.chains, "chain"),
        counted(run.warmup, "warmup iteration"),
        counted(run.draws, "draw")
    );
    if !run.failures.is_empty() {
        let _ = writeln!(
            out,
            "{} of {} stopped with an error and {} left out of this summary and the draws:",
            run.failures.len(),
            counted(run.chains, "chain"),
            if run.failures.len() == 1 { "is" } else { "are" }
        );
        for failure in &run.failures {
            let _ = writeln!(out, "  {failure}");
        }
    }
    let faults = run.model_faults();
    if faults > 0 {
        let chains_hit = (0..run.finished())
            .filter(|&k| run.warmup_faults[k] + run.sampling_faults[k] > 0)
            .count();
        let _ = writeln!(
            out,
            "warning: the model faulted at {} ({} in sampling) in {}; each such step was rejected as a divergence and the chain went on (run the model's log_density at those points with `autobatch run` to see the error)",
            counted(faults as usize, "leapfrog step"),
            run.sampling_faults.iter().sum::<u64>(),
            counted(chains_hit, "chain")
        );
    }
    write_e_bfmi(&mut out, run);
    let _ = writeln!(
        out,
        "divergences: {} of {}; mean tree depth: {}",
        run.divergences(),
        counted(run.finished() * run.draws, "draw"),
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
    let _ = writeln!(out, "{}", memory_line(&run.memory));
    out
}

/// Bytes as megabytes, one decimal (kilobytes below one megabyte).
fn megabytes(bytes: u64) -> String {
    if bytes < 1_000_000 {
        format!("{:.1} kB", bytes as f64 / 1e3)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// The memory the run held against what it had to: the peak resident set
/// over the data plus the chains' state, and the batch's own storage.
pub fn memory_line(memory: &crate::MemoryFigures) -> String {
    let needed = memory.data_bytes + memory.chain_state_bytes;
    let against = format!(
        "data {} + chains' state {} (draws included)",
        megabytes(memory.data_bytes),
        megabytes(memory.chain_state_bytes)
    );
    // Only the interpreters keep batch columns (native code keeps each
    // member's values in its own frames).
    let batch = match memory.peak_batch_bytes {
        0 => String::new(),
        bytes => format!(
            "; the batch's columns and stacks at most {}",
            megabytes(bytes)
        ),
    };
    match memory.peak_resident_bytes {
        Some(resident) => format!(
            "memory: peak resident {}, {:.1} times {against}{batch}",
            megabytes(resident),
            resident as f64 / needed.max(1) as f64
        ),
        None => format!("memory: {against}{batch}"),
    }
}

/// The lowest E-BFMI over the chains, and a warning naming the chains
/// below Stan's threshold.
fn write_e_bfmi(out: &mut String, run: &SampleRun) {
    let e_bfmi = run.e_bfmi();
    let Some((lowest_at, lowest)) = e_bfmi
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, x)| !x.is_nan())
        .min_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return;
    };
    let low: Vec<String> = e_bfmi
        .iter()
        .enumerate()
        .filter(|(_, x)| **x < E_BFMI_THRESHOLD)
        .map(|(k, _)| run.chain_ids[k].to_string())
        .collect();
    if low.is_empty() {
        let _ = writeln!(
            out,
            "E-BFMI: lowest {} (chain {})",
            number(lowest, 2),
            run.chain_ids[lowest_at]
        );
        return;
    }
    let shown = if low.len() > 10 {
        format!("{}, ...", low[..10].join(", "))
    } else {
        low.join(", ")
    };
    let _ = writeln!(
        out,
        "warning: E-BFMI below {E_BFMI_THRESHOLD} in {} (lowest {}: chains {shown}): the momentum resampling barely moves the energy, so the chains may not explore the posterior's tails; reparameterizing the model usually helps",
        counted(low.len(), "chain"),
        number(lowest, 2),
    );
}

/// The sampler's figures per draw, after the parameters in the CSV, by
/// Stan's names.
pub const DRAW_COLUMNS: [&str; 6] = [
    "lp__",
    "accept_stat__",
    "treedepth__",
    "n_leapfrog__",
    "divergent__",
    "energy__",
];

/// Writes the draws: a header `chain,draw,theta[0],...,lp__,...` (the
/// reported columns: `theta[i]`, or the constrained parameters' `tau`,
/// `theta_tilde.0`, ...), then one
/// row per chain and draw (both counted from 0): the parameters, then the
/// sampler's figures of the draw ([`DRAW_COLUMNS`]: log density,
/// acceptance statistic, tree depth, leapfrog steps, divergence as 0 or 1,
/// energy); floats in their shortest exact form.
pub fn write_csv(run: &SampleRun, out: &mut dyn Write) -> io::Result<()> {
    let mut line = String::from("chain,draw");
    for name in &run.columns {
        let _ = write!(line, ",{name}");
    }
    for column in DRAW_COLUMNS {
        let _ = write!(line, ",{column}");
    }
    writeln!(out, "{line}")?;
    for (k, chain) in run.chain_ids.iter().enumerate() {
        for draw in 0..run.draws {
            line.clear();
            let _ = write!(line, "{chain},{draw}");
            for x in run.reported(k, draw) {
                let _ = write!(line, ",{x:?}");
            }
            let _ = write!(
                line,
                ",{:?},{:?},{},{},{},{:?}",
                run.log_density[k][draw],
                run.accept_stat[k][draw],
                run.tree_depth[k][draw],
                run.n_leapfrog[k][draw],
                u8::from(run.divergent[k][draw]),
                run.energy[k][draw]
            );
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn float(x: f64) -> serde_json::Value {
    autobatch::float_to_json(x)
}

/// The run's figures as JSON (`--stats`). Per-chain lists (`step_size`,
/// `inv_metric`, `mean_accept_stat`, `e_bfmi`) follow `finished_chains`.
pub fn stats_json(run: &SampleRun, strategy: &str) -> serde_json::Value {
    let mut stats = figures_json(run, strategy);
    if !run.executor_report.is_empty() {
        // The executor's own figures, as `autobatch run --stats` has them
        // (under `native`: whether the program was compiled, and if not why).
        stats[strategy] = autobatch::report_to_json(&run.executor_report);
    }
    stats
}

/// The run's figures, summary and settings.
fn figures_json(run: &SampleRun, strategy: &str) -> serde_json::Value {
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
        "model_faults": run.model_faults(),
        "model_faults_warmup": run.warmup_faults,
        "model_faults_sampling": run.sampling_faults,
        "mean_tree_depth": float(run.mean_tree_depth()),
        "data_bytes": run.memory.data_bytes,
        "chain_state_bytes": run.memory.chain_state_bytes,
        "peak_batch_bytes": run.memory.peak_batch_bytes,
        "peak_resident_bytes": run.memory.peak_resident_bytes,
        "e_bfmi": run.e_bfmi().into_iter().map(float).collect::<Vec<_>>(),
        "finished_chains": run.chain_ids,
        "failed_chains": run.failures.iter().map(|f| serde_json::json!({
            "chain": f.chain, "kind": f.kind, "message": f.message, "location": f.location,
        })).collect::<Vec<_>>(),
        "batch_runs": run.runs,
        "step_size": run.step_size.iter().map(|x| float(*x)).collect::<Vec<_>>(),
        "inv_metric": run.inv_metric.iter().map(|c| c.iter().map(|x| float(*x)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "mean_accept_stat": run.accept_stat.iter().map(|c| float(c.iter().sum::<f64>() / c.len() as f64)).collect::<Vec<_>>(),
        "summary": rows.iter().zip(&run.columns).map(|(s, name)| serde_json::json!({
            "parameter": name,
            "mean": float(s.mean), "sd": float(s.sd), "q5": float(s.q5), "q50": float(s.q50),
            "q95": float(s.q95), "rhat": float(s.rhat), "ess_bulk": float(s.ess_bulk),
        })).collect::<Vec<_>>(),
    })
}
