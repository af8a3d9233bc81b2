//! How the chains run: all iterations in one run of the batch (no chain
//! waits for another), pooled adaptation when asked for, a failing chain
//! that leaves the others' draws intact, and progress while the run goes.

mod common;
use autobatch_sample::{Adaptation, Model, Progress, SampleConfig, SampleError, SampleRun};
use common::config;

fn model(source: &str) -> Model {
    Model::new(source, "m.ab", "{}").unwrap_or_else(|e| panic!("{e}"))
}

fn sample(source: &str, config: &SampleConfig) -> SampleRun {
    model(source)
        .sample(config, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Independent Gaussians with standard deviations 1, 3 and 0.3.
const SCALED: &str = "
fn log_density(theta: [f64; 3]) -> f64 {
    let z = theta / [1.0, 3.0, 0.3];
    -0.5 * dot(z, z)
}
";
const VARIANCES: [f64; 3] = [1.0, 9.0, 0.09];

fn bits(run: &SampleRun, k: usize) -> Vec<u64> {
    run.samples[k].iter().map(|x| x.to_bits()).collect()
}

#[test]
fn per_chain_adaptation_runs_everything_in_one_run() {
    let run = sample(SCALED, &config(6, 150, 100, 3));
    assert_eq!(run.runs, 1, "warmup and sampling are one run of the batch");
    assert!(run.failures.is_empty());
    assert_eq!(run.chain_ids, (0..6).collect::<Vec<_>>());
    // Each chain adapted alone: their step sizes differ.
    assert!(run.step_size.windows(2).any(|w| w[0] != w[1]));
    // Warmup and sampling were both measured, and their gradients counted.
    for figures in [run.warmup_figures, run.sampling_figures] {
        assert!(figures.seconds > 0.0);
        assert!(figures.gradient_evaluations > 0);
        assert!(figures.gradient_executions > 0);
        let u = figures.utilization(6);
        assert!(u > 0.0 && u <= 1.0, "utilization {u}");
    }
    let whole = run.gradient_utilization();
    assert!(whole > 0.0 && whole <= 1.0, "utilization {whole}");
    let draws_leapfrogs: i64 = run.n_leapfrog.iter().flatten().sum();
    assert_eq!(
        run.sampling_figures.gradient_evaluations,
        draws_leapfrogs as u64
    );
}

#[test]
fn segments_split_the_run_and_change_the_streams() {
    let whole = sample(SCALED, &config(2, 40, 30, 3));
    let mut segmented = config(2, 40, 30, 3);
    segmented.segment = Some(7);
    let split = sample(SCALED, &segmented);
    // ceil(40 / 7) runs of warmup, ceil(30 / 7) of sampling.
    assert_eq!(split.runs, 6 + 5);
    assert_eq!(split.samples[0].len(), 30 * 3);
    assert_ne!(bits(&whole, 0), bits(&split, 0));
}

#[test]
fn pooled_adaptation_shares_step_size_and_metric() {
    let mut pooled = config(16, 300, 200, 11);
    pooled.adaptation = Adaptation::Pooled { every: 1 };
    let run = sample(SCALED, &pooled);
    assert!(run.runs > 300, "pooling every iteration: {} runs", run.runs);
    for k in 1..16 {
        assert_eq!(run.step_size[k].to_bits(), run.step_size[0].to_bits());
        assert_eq!(run.inv_metric[k], run.inv_metric[0]);
    }
    // The metric comes from every chain's window: close to the variances.
    for (i, truth) in VARIANCES.iter().enumerate() {
        let ratio = run.inv_metric[0][i] / truth;
        assert!(
            (0.75..1.33).contains(&ratio),
            "theta[{i}]: pooled metric {} for variance {truth}",
            run.inv_metric[0][i]
        );
    }
    // Dual averaging on the chains' mean acceptance statistic hits the target.
    let accept: f64 = run.accept_stat.iter().flatten().sum::<f64>() / (16.0 * 200.0);
    assert!((0.7..0.92).contains(&accept), "mean acceptance {accept}");
    // And the draws are right.
    for (i, truth) in VARIANCES.iter().enumerate() {
        let all: Vec<f64> = run.coordinate(i).concat();
        let n = all.len() as f64;
        let mean = all.iter().sum::<f64>() / n;
        let var = all.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
        assert!(mean.abs() < 0.15 * truth.sqrt(), "theta[{i}]: mean {mean}");
        assert!(
            (var / truth - 1.0).abs() < 0.15,
            "theta[{i}]: variance {var}"
        );
    }
}

#[test]
fn pooling_every_few_iterations_meets_at_window_ends_too() {
    let mut pooled = config(4, 200, 20, 2);
    pooled.adaptation = Adaptation::Pooled { every: 7 };
    let run = sample(SCALED, &pooled);
    // Stan's windows for 200 iterations end after iterations 99 and 149:
    // runs end at 7, 14, ..., 98, then 100 (a window's end); 107, ..., 149,
    // then 150; 157, ..., 199, then 200; and sampling is one more run.
    assert_eq!(run.runs, 15 + 8 + 8 + 1);
    assert_eq!(run.step_size[1].to_bits(), run.step_size[0].to_bits());
    let mut bad = config(2, 10, 10, 0);
    bad.adaptation = Adaptation::Pooled { every: 0 };
    let error = model(SCALED).sample(&bad, &mut |_| {}).unwrap_err();
    assert!(matches!(error, SampleError::Config(_)), "{error}");
}

/// A standard normal defined only for theta[0] > 1.98: elsewhere the model
/// faults (an index out of bounds) when `fault`, or is minus infinity. A
/// chain draws its initial point from (-2, 2) up to 100 times, so some
/// chains find one and others do not; a fault met after that only rejects
/// a step (see `model_faults.rs`).
fn narrow(fault: bool) -> String {
    let outside = if fault {
        "table[5]"
    } else {
        "f64::NEG_INFINITY"
    };
    format!(
        "
fn log_density(theta: [f64; 2]) -> f64 {{
    let table = [1.0, 1.0];
    if theta[0] > 1.98 {{ -0.5 * dot(theta, theta) * table[0] }} else {{ {outside} }}
}}
"
    )
}

#[test]
fn a_failing_chain_leaves_the_others_intact() {
    let chains = 8;
    let settings = config(chains, 150, 150, 4);
    let failing = sample(&narrow(true), &settings);
    let twin = sample(&narrow(false), &settings);
    assert!(
        !failing.failures.is_empty() && failing.failures.len() < chains,
        "this seed should make some chains fail, not all: {:?}",
        failing.failures
    );
    // A chain that never found an initial point stops with the model's own
    // error, where it arose (its last try runs the model without `catch`).
    for failure in &failing.failures {
        assert_eq!(failure.kind, "index_out_of_bounds");
        assert!(
            failure.location.starts_with("m.ab:4:"),
            "located in the model: {}",
            failure.location
        );
        assert!(!failing.chain_ids.contains(&failure.chain));
    }
    assert_eq!(failing.chain_ids.len() + failing.failures.len(), chains);
    // Every chain that finished drew exactly what it draws where the model
    // is minus infinity instead of faulting.
    assert_eq!(twin.chain_ids, failing.chain_ids);
    for k in 0..failing.chain_ids.len() {
        assert_eq!(bits(&failing, k), bits(&twin, k));
        assert_eq!(failing.step_size[k].to_bits(), twin.step_size[k].to_bits());
    }
    assert_eq!(twin.model_faults(), 0);
    // The CSV names the chains that finished, by their numbers.
    let mut csv = Vec::new();
    autobatch_sample::report::write_csv(&failing, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let named: std::collections::BTreeSet<usize> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(named.into_iter().collect::<Vec<_>>(), failing.chain_ids);
    let table = autobatch_sample::report::table(&failing);
    assert!(table.contains("stopped with an error"), "{table}");
}

#[test]
fn when_every_chain_fails_the_error_says_where() {
    let source = "
fn log_density(theta: [f64; 2]) -> f64 {
    let table = [1.0, 1.0];
    let i = if theta[0] > -100.0 { 7 } else { 0 };
    -0.5 * dot(theta, theta) * table[i]
}
";
    let error = model(source)
        .sample(&config(3, 10, 10, 0), &mut |_| {})
        .unwrap_err();
    let SampleError::Chain(message) = &error else {
        panic!("not a chain error: {error}")
    };
    assert!(message.contains("every chain stopped"), "{message}");
    assert!(
        message.contains("index_out_of_bounds at m.ab:5:"),
        "{message}"
    );
}

#[test]
fn progress_is_reported_while_the_run_goes() {
    // Long enough that the executor's periodic reports reach the callback
    // part way, however the machine's load delays them.
    let mut seen: Vec<Progress> = Vec::new();
    model(SCALED)
        .sample(&config(4, 25000, 25000, 1), &mut |p| seen.push(p))
        .unwrap();
    let first = seen.first().unwrap();
    let last = seen.last().unwrap();
    assert_eq!((first.done, first.warming_up), (0, true));
    assert_eq!(
        (last.done, last.total, last.warming_up),
        (50000, 50000, false)
    );
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done));
    assert!(
        seen.iter().any(|p| p.done > 0 && p.done < 50000),
        "nothing seen part way: {seen:?}"
    );
}

/// Counts that do not fit together are refused, never wrapped: a pooling
/// interval of `usize::MAX` pools at the windows' ends only, and warmup plus
/// draws past `MAX_ITERATIONS` is a settings error.
#[test]
fn huge_counts_are_refused_or_saturate() {
    let mut pooled = config(2, 200, 20, 1);
    pooled.adaptation = Adaptation::Pooled { every: usize::MAX };
    let run = sample(SCALED, &pooled);
    assert_eq!(run.finished(), 2);
    let mut huge = config(1, usize::MAX, 1, 1);
    for (warmup, draws) in [(usize::MAX, 1), (autobatch_sample::MAX_ITERATIONS, 1)] {
        huge.warmup = warmup;
        huge.draws = draws;
        let error = model(SCALED)
            .sample(&huge, &mut |_| {})
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(error, SampleError::Config(_)), "{error}");
    }
}
