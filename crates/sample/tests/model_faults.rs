//! A model that faults somewhere in the far tails loses no chain: the step
//! that reached the faulting point is rejected as a divergence (the
//! library's `catch` around the model's gradient), counted per chain, and
//! reported in one warning; every strategy gives the same draws. A
//! distribution's argument check (`domain_error`) is such a fault: the
//! region where it fails is rejected, as Stan rejects a proposal whose
//! density throws.

mod common;
use autobatch::Strategy;
use autobatch_sample::{report, Model, SampleRun};
use common::config;

/// N(0, 1), with an assertion that fails below -20 (and an index out of
/// bounds above 25): both far out in the tails, reached only by the large
/// steps of early warmup.
const FAULTY_TAILS: &str = "
fn log_density(theta: [f64; 1]) -> f64 {
    assert!(theta[0] > -20.0, \"far tail\");
    let guard = [0.0, 0.0];
    let k = if theta[0] > 25.0 { 5 } else { 0 };
    -0.5 * theta[0] * theta[0] + guard[k]
}
";

fn sample(strategy: Strategy) -> SampleRun {
    let mut config = config(8, 300, 200, 3);
    config.run.strategy = strategy;
    Model::new(FAULTY_TAILS, "m.ab", "{}")
        .unwrap_or_else(|e| panic!("{e}"))
        .sample(&config, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_fault_in_the_tails_rejects_the_step_and_keeps_every_chain() {
    let run = sample(Strategy::ProgramCounter);
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    assert_eq!(run.chain_ids, (0..8).collect::<Vec<_>>());
    assert!(run.model_faults() > 0, "the test must reach the faults");
    assert_eq!(run.warmup_faults.len(), 8);
    // Each fault ended its trajectory as a divergence.
    let faults: u64 = run.warmup_faults.iter().sum();
    assert!(run.warmup_divergences.iter().sum::<u64>() >= faults);
    let stats = report::stats_json(&run, "program-counter");
    assert_eq!(stats["model_faults"], run.model_faults());
    assert_eq!(stats["model_faults_warmup"].as_array().unwrap().len(), 8);
    let warnings = report::warnings(&run);
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("warning: the model faulted at")
                && w.contains("rejected as a divergence")),
        "{warnings:?}"
    );
    // The draws still describe N(0, 1).
    let draws = run.coordinate(0).concat();
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    let var = draws.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / draws.len() as f64;
    assert!(
        mean.abs() < 0.2 && (var - 1.0).abs() < 0.25,
        "mean {mean}, variance {var}"
    );
}

#[test]
fn recovered_faults_give_the_same_draws_on_every_strategy() {
    let runs: Vec<SampleRun> = [
        Strategy::Reference,
        Strategy::LocalStatic,
        Strategy::ProgramCounter,
        Strategy::from_name("native").expect("registered"),
    ]
    .into_iter()
    .map(sample)
    .collect();
    for run in &runs[1..] {
        assert_eq!(run.samples, runs[0].samples);
        assert_eq!(run.warmup_faults, runs[0].warmup_faults);
    }
}

/// `exponential(theta | 1)` on an unconstrained `theta`: below 0 the
/// density's check of its outcome fails with `domain_error`, in the bulk
/// of the space the sampler explores (half its initial points, and every
/// step across 0).
const DOMAIN_ERRORS: &str = "
fn log_density(theta: [f64; 1]) -> f64 {
    exponential_lpdf(theta[0], 1.0)
}
";

#[test]
fn a_domain_error_rejects_the_step_and_the_draws_keep_to_the_domain() {
    let config = config(8, 400, 500, 11);
    let run = Model::new(DOMAIN_ERRORS, "m.ab", "{}")
        .unwrap_or_else(|e| panic!("{e}"))
        .sample(&config, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    assert_eq!(run.chain_ids, (0..8).collect::<Vec<_>>());
    assert!(
        run.sampling_faults.iter().sum::<u64>() > 0,
        "the draws must reach 0"
    );
    let faults: u64 = run.warmup_faults.iter().chain(&run.sampling_faults).sum();
    assert_eq!(faults, run.model_faults());
    assert!(run.divergences() >= run.sampling_faults.iter().sum::<u64>());
    let warnings = report::warnings(&run).join("\n");
    assert!(
        warnings.contains("warning: the model faulted at"),
        "{warnings}"
    );
    // Exponential(1): every draw positive, mean 1, variance 1.
    let draws = run.coordinate(0).concat();
    assert!(draws.iter().all(|&x| x >= 0.0));
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    let var = draws.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / draws.len() as f64;
    assert!(
        (mean - 1.0).abs() < 0.15 && (var - 1.0).abs() < 0.35,
        "mean {mean}, variance {var}"
    );
}
