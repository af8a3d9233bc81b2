//! The posteriordb check: samples each posterior of `examples/posteriordb`
//! with its model in this language and compares the draws with
//! posteriordb's reference posterior.
//!
//! A posterior `NAME` is checked when `examples/posteriordb/NAME/` holds
//! - `model.ab`: the model (a `fn model` with its parameters as Stan
//!   declares them, or a `log_density`);
//! - `reference_posterior.json`: the reference's mean, sd and quantiles of every
//!   quantity under Stan's names (`beta[2]`, `L[2,1]`), and in `data` the
//!   path of the data set (relative to the posterior's directory);
//! - optionally `check.json`: the run's settings ([`Settings`]: chains,
//!   warmup, draws, seed, target acceptance, tree depth) and whether the posterior is
//!   in the fast subset (`"fast": true`).
//!
//! Every parameter that both the draws and the reference name (`beta.1`
//! is `beta[2]`) must have its mean within 0.1 reference sd plus 3 Monte
//! Carlo standard errors (ours) of the reference mean, its sd within 10% of
//! the reference sd, and its R-hat below 1.01 ([`Tolerance`]). A parameter
//! whose sd is not a stable figure (the reference chains' sds spread by
//! more than 10%: a tail too heavy for a finite variance) is compared by
//! the reference's 5/25/50/75/95% quantiles instead of mean and sd
//! ([`Criterion`]). The statistics are the sampler's own
//! ([`autobatch_sample::diagnostics`]).
//! `tools/posteriordb_check` (this crate's binary) and this crate's test
//! run the same [`check`].

mod compare;
mod posterior;
mod table;

pub use compare::{
    column_name, column_stats, compare, compare_stats, ColumnStats, Comparison, Criterion,
    ParameterCheck, QuantileCheck, Tolerance,
};
pub use posterior::{examples_dir, list, Posterior, Quantile, Reference, Settings};
pub use table::{header, name_width, rows, summary_line, table, to_json};

use std::time::Instant;

use autobatch_sample::{Model, SampleConfig};

/// What checking one posterior found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Outcome {
    pub name: String,
    pub settings: Settings,
    /// Sampling and comparing succeeded and every parameter passed.
    pub passed: bool,
    /// Why the posterior could not be sampled or compared at all.
    pub error: Option<String>,
    pub seconds: f64,
    pub divergences: u64,
    /// Chains that stopped with an error (left out of the statistics).
    pub failed_chains: usize,
    pub comparison: Option<Comparison>,
}

impl Outcome {
    fn failed(name: &str, settings: Settings, error: String, seconds: f64) -> Outcome {
        Outcome {
            name: name.to_string(),
            settings,
            passed: false,
            error: Some(error),
            seconds,
            divergences: 0,
            failed_chains: 0,
            comparison: None,
        }
    }
}

/// Settings that replace every posterior's own (a quick look at the
/// models with fewer iterations).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub warmup: Option<usize>,
    pub draws: Option<usize>,
}

/// Loads, samples and compares the posterior `name` of `root` (the
/// directory of the posteriors, [`examples_dir`]).
pub fn check(root: &std::path::Path, name: &str, tolerance: &Tolerance) -> Outcome {
    check_with(root, name, tolerance, &Overrides::default())
}

/// [`check`] with the settings `overrides` gives in place of the
/// posterior's.
pub fn check_with(
    root: &std::path::Path,
    name: &str,
    tolerance: &Tolerance,
    overrides: &Overrides,
) -> Outcome {
    let start = Instant::now();
    let posterior = match Posterior::load(root, name) {
        Ok(posterior) => posterior,
        Err(e) => return Outcome::failed(name, Settings::default(), e, 0.0),
    };
    let mut settings = posterior.settings.clone();
    settings.warmup = overrides.warmup.unwrap_or(settings.warmup);
    settings.draws = overrides.draws.unwrap_or(settings.draws);
    let run = Model::new(&posterior.source, &posterior.model_path, &posterior.data)
        .map_err(|e| e.to_string())
        .and_then(|model| {
            model
                .sample(&sample_config(&settings), &mut |_| {})
                .map_err(|e| e.to_string())
        });
    let seconds = start.elapsed().as_secs_f64();
    let run = match run {
        Ok(run) => run,
        Err(e) => return Outcome::failed(name, settings, e, seconds),
    };
    let comparison = compare(&run, &posterior.reference, tolerance);
    Outcome {
        name: name.to_string(),
        passed: comparison.passed() && run.failures.is_empty(),
        error: (!run.failures.is_empty())
            .then(|| format!("{} chains stopped with an error", run.failures.len())),
        settings,
        seconds,
        divergences: run.divergences(),
        failed_chains: run.failures.len(),
        comparison: Some(comparison),
    }
}

fn sample_config(settings: &Settings) -> SampleConfig {
    let defaults = SampleConfig::default();
    SampleConfig {
        chains: settings.chains,
        warmup: settings.warmup,
        draws: settings.draws,
        target_accept: settings.target_accept,
        max_depth: settings.max_depth,
        run: autobatch::RunConfig {
            options: autobatch::RunOptions {
                seed: settings.seed,
                ..defaults.run.options.clone()
            },
            ..defaults.run.clone()
        },
        ..defaults
    }
}
