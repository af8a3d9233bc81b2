//! What `autobatch sample` writes: the summary table, the draws as CSV and
//! the run's figures as JSON.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::diagnostics::{Summary, E_BFMI_THRESHOLD, MIN_DRAWS_ESS, MIN_DRAWS_RHAT};
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

/// The table printed to stdout: one row per parameter, then the sampler's
/// figures. What deserves a warning is in [`warnings`].
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
        "{:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8} {:>8}",
        "parameter", "mean", "sd", "5%", "50%", "95%", "R-hat", "ESS bulk", "ESS tail"
    );
    for (name, s) in run.columns.iter().zip(rows) {
        let _ = writeln!(
            out,
            "{:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8} {:>8}",
            name,
            significant(s.mean),
            significant(s.sd),
            significant(s.q5),
            significant(s.q50),
            significant(s.q95),
            number(s.rhat, 3),
            number(s.ess_bulk, 0),
            number(s.ess_tail, 0)
        );
    }
    if rows
        .iter()
        .any(|s| s.rhat.is_nan() || s.ess_bulk.is_nan() || s.ess_tail.is_nan())
    {
        let _ = writeln!(
            out,
            "NA: not defined: R-hat needs {MIN_DRAWS_RHAT} draws per chain and the ESS {MIN_DRAWS_ESS} (each half of a split chain needs 4, as in Stan), and both need finite draws that are not all equal"
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
    if let Some((chain, lowest)) = lowest_e_bfmi(run) {
        let _ = writeln!(out, "E-BFMI: lowest {} (chain {chain})", number(lowest, 2));
    }
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
    out
}

/// The largest R-hat that does not call for a warning (Vehtari et al.
/// 2021; ArviZ).
pub const RHAT_THRESHOLD: f64 = 1.01;

/// The smallest bulk or tail ESS per chain that does not call for a
/// warning (Vehtari et al. 2021: 100 per chain, as Stan and ArviZ).
pub const ESS_PER_CHAIN_THRESHOLD: f64 = 100.0;

/// The parameters named in one warning before "and N more".
const NAMED_PARAMETERS: usize = 4;

/// `names`, the first few joined by commas, then "and N more".
fn some_of(names: &[String]) -> String {
    if names.len() <= NAMED_PARAMETERS {
        return names.join(", ");
    }
    format!(
        "{} and {} more",
        names[..NAMED_PARAMETERS].join(", "),
        names.len() - NAMED_PARAMETERS
    )
}

/// The parameters whose summary `flag`s, by name.
fn flagged(run: &SampleRun, flag: impl Fn(&Summary) -> bool) -> Vec<String> {
    summaries(run)
        .iter()
        .zip(&run.columns)
        .filter(|(s, _)| flag(s))
        .map(|(_, name)| name.clone())
        .collect()
}

/// What a user should know before trusting the run, each a line starting
/// `warning: ` (the command writes them to stderr): too few draws for the
/// diagnostics, R-hat above [`RHAT_THRESHOLD`], bulk or tail ESS below
/// [`ESS_PER_CHAIN_THRESHOLD`] per chain, figures that are not defined,
/// divergences, trajectories cut at the maximum tree depth, E-BFMI below
/// [`E_BFMI_THRESHOLD`] and faults of the model (Stan's warnings after
/// sampling, and `rstan`'s on R-hat and ESS).
pub fn warnings(run: &SampleRun) -> Vec<String> {
    let mut out = Vec::new();
    diagnostic_warnings(run, &mut out);
    sampler_warnings(run, &mut out);
    out
}

/// The warnings on R-hat and the ESS.
fn diagnostic_warnings(run: &SampleRun, out: &mut Vec<String>) {
    if run.draws < MIN_DRAWS_ESS {
        out.push(format!(
            "warning: {} per chain are too few for the diagnostics (R-hat needs {MIN_DRAWS_RHAT}, the ESS {MIN_DRAWS_ESS}, and neither means much below 100): run more draws",
            counted(run.draws, "draw")
        ));
    }
    let undefined = flagged(run, |s| {
        run.draws >= MIN_DRAWS_ESS
            && (s.rhat.is_nan() || s.ess_bulk.is_nan() || s.ess_tail.is_nan())
    });
    if !undefined.is_empty() {
        out.push(format!(
            "warning: R-hat and ESS are not defined (NA) for {}: their draws are not finite, or all equal",
            some_of(&undefined)
        ));
    }
    let high = flagged(run, |s| s.rhat > RHAT_THRESHOLD);
    if !high.is_empty() {
        out.push(format!(
            "warning: R-hat above {RHAT_THRESHOLD} for {}: the chains do not agree, so the estimates cannot be trusted; run longer warmup and more draws, or reparameterize the model",
            some_of(&high)
        ));
    }
    // Too few draws warned already: every ESS is then low or NA.
    if run.draws < MIN_DRAWS_ESS {
        return;
    }
    let least = ESS_PER_CHAIN_THRESHOLD * run.finished() as f64;
    let low_bulk = flagged(run, |s| s.ess_bulk < least);
    if !low_bulk.is_empty() {
        out.push(format!(
            "warning: bulk ESS below {least:.0} (100 per chain) for {}: the means and medians may be unreliable; run more draws",
            some_of(&low_bulk)
        ));
    }
    let low_tail = flagged(run, |s| s.ess_tail < least);
    if !low_tail.is_empty() {
        out.push(format!(
            "warning: tail ESS below {least:.0} (100 per chain) for {}: the 5% and 95% quantiles may be unreliable; run more draws",
            some_of(&low_tail)
        ));
    }
}

/// `part` of `whole` with its percentage: `3 of 4000 draws (0.1%)`.
fn share(part: u64, whole: usize, noun: &str) -> String {
    format!(
        "{part} of {} ({:.1}%)",
        counted(whole, noun),
        100.0 * part as f64 / whole.max(1) as f64
    )
}

/// The warnings on the sampler's transitions: divergences, the tree depth
/// limit, E-BFMI and the model's faults.
fn sampler_warnings(run: &SampleRun, out: &mut Vec<String>) {
    let draws = run.finished() * run.draws;
    let divergences = run.divergences();
    if divergences > 0 {
        out.push(format!(
            "warning: {} ended with a divergence: the sampler may have missed part of the posterior; raise --target-accept (0.9, 0.95) or reparameterize the model",
            share(divergences, draws, "draw")
        ));
    }
    let hits = run.max_depth_hits();
    if hits > 0 {
        out.push(format!(
            "warning: {} reached the maximum tree depth ({}, --max-depth): the sampler explores slowly; raise --max-depth or reparameterize the model",
            share(hits, draws, "draw"),
            run.max_depth
        ));
    }
    write_e_bfmi(out, run);
    let faults = run.model_faults();
    if faults > 0 {
        let chains_hit = (0..run.finished())
            .filter(|&k| run.warmup_faults[k] + run.sampling_faults[k] > 0)
            .count();
        out.push(format!(
            "warning: the model faulted at {} ({} in sampling) in {}; each such step was rejected as a divergence and the chain went on (run the model's log_density at those points with `autobatch run` to see the error)",
            counted(faults as usize, "leapfrog step"),
            run.sampling_faults.iter().sum::<u64>(),
            counted(chains_hit, "chain")
        ));
    }
}

/// The chain with the lowest E-BFMI, and that E-BFMI; none when no chain
/// has one.
fn lowest_e_bfmi(run: &SampleRun) -> Option<(usize, f64)> {
    run.e_bfmi()
        .into_iter()
        .enumerate()
        .filter(|(_, x)| !x.is_nan())
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, x)| (run.chain_ids[k], x))
}

/// A warning naming the chains whose E-BFMI is below Stan's threshold.
fn write_e_bfmi(out: &mut Vec<String>, run: &SampleRun) {
    let Some((_, lowest)) = lowest_e_bfmi(run) else {
        return;
    };
    let low: Vec<String> = run
        .e_bfmi()
        .iter()
        .enumerate()
        .filter(|(_, x)| **x < E_BFMI_THRESHOLD)
        .map(|(k, _)| run.chain_ids[k].to_string())
        .collect();
    if low.is_empty() {
        return;
    }
    let shown = if low.len() > 10 {
        format!("{}, ...", low[..10].join(", "))
    } else {
        low.join(", ")
    };
    out.push(format!(
        "warning: E-BFMI below {E_BFMI_THRESHOLD} in {} (lowest {}: chains {shown}): the momentum resampling barely moves the energy, so the chains may not explore the posterior's tails; reparameterizing the model usually helps",
        counted(low.len(), "chain"),
        number(lowest, 2),
    ));
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
/// `strategy` is the strategy asked for; under `auto`, `strategy` in the
/// JSON is the one it picked, and `strategy_reason` says why.
pub fn stats_json(run: &SampleRun, strategy: &str) -> serde_json::Value {
    let choice = run.strategy_choice.as_ref();
    let reason = autobatch::strategy_reason(strategy, choice);
    let strategy = choice.map_or(strategy, |c| c.strategy.name());
    let mut stats = figures_json(run, strategy);
    stats["strategy_reason"] = reason.into();
    if !run.executor_report.is_empty() {
        // The executor's own figures, as `autobatch run --stats` has them
        // (under `native`: whether the program was compiled, and if not why).
        stats[strategy] = autobatch::report_to_json(&run.executor_report);
    }
    stats
}

/// The run's figures, summary and settings.
fn figures_json(run: &SampleRun, strategy: &str) -> serde_json::Value {
    let mut stats = serde_json::json!({
        "chains": run.chains,
        "warmup": run.warmup,
        "draws": run.draws,
        "dimension": run.dim,
        "strategy": strategy,
        "batch_runs": run.runs,
        "finished_chains": run.chain_ids,
        "failed_chains": run.failures.iter().map(|f| serde_json::json!({
            "chain": f.chain, "kind": f.kind, "message": f.message, "location": f.location,
        })).collect::<Vec<_>>(),
        "summary": summaries(run).iter().zip(&run.columns).map(|(s, name)| serde_json::json!({
            "parameter": name,
            "mean": float(s.mean), "sd": float(s.sd), "q5": float(s.q5), "q50": float(s.q50),
            "q95": float(s.q95), "rhat": float(s.rhat), "ess_bulk": float(s.ess_bulk),
            "ess_tail": float(s.ess_tail),
        })).collect::<Vec<_>>(),
    });
    let sampler = serde_json::json!({
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
        "max_depth": run.max_depth,
        "max_depth_hits": run.max_depth_hits(),
        "e_bfmi": run.e_bfmi().into_iter().map(float).collect::<Vec<_>>(),
        "step_size": run.step_size.iter().map(|x| float(*x)).collect::<Vec<_>>(),
        "inv_metric": run.inv_metric.iter().map(|c| c.iter().map(|x| float(*x)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "mean_accept_stat": run.accept_stat.iter().map(|c| float(c.iter().sum::<f64>() / c.len() as f64)).collect::<Vec<_>>(),
    });
    let memory = serde_json::json!({
        "data_bytes": run.memory.data_bytes,
        "chain_state_bytes": run.memory.chain_state_bytes,
        "peak_batch_bytes": run.memory.peak_batch_bytes,
        "peak_resident_bytes": run.memory.peak_resident_bytes,
    });
    for part in [sampler, memory] {
        if let (Some(all), serde_json::Value::Object(fields)) = (stats.as_object_mut(), part) {
            all.extend(fields);
        }
    }
    stats
}
