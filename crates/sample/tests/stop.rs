//! A requested [`Stop`] ends sampling early with `SampleError::Stopped`:
//! before the first run, and in the middle of a run far too long to finish.

use std::time::{Duration, Instant};

use autobatch_sample::{Model, SampleConfig, SampleError, Stop};

const MODEL: &str = "fn log_density(theta: [f64; 2]) -> f64 { -0.5 * dot(theta, theta) }";

fn long_config() -> SampleConfig {
    SampleConfig {
        chains: 2,
        warmup: 100_000_000,
        draws: 10,
        ..SampleConfig::default()
    }
}

#[test]
fn a_stop_requested_before_sampling_stops_it_at_once() {
    let model = Model::new(MODEL, "m.ab", "{}").expect("a model");
    let stop = Stop::new();
    stop.request();
    let result = model.sample_stoppable(&long_config(), &mut |_| {}, &stop);
    assert!(matches!(result, Err(SampleError::Stopped)));
}

#[test]
fn a_stop_requested_while_a_run_goes_ends_the_run() {
    let model = Model::new(MODEL, "m.ab", "{}").expect("a model");
    let stop = Stop::new();
    let began = Instant::now();
    let mut requested_at = None;
    let result = model.sample_stoppable(
        &long_config(),
        &mut |progress| {
            if progress.done > 0 && requested_at.is_none() {
                requested_at = Some(Instant::now());
                stop.request();
            }
        },
        &stop,
    );
    assert!(matches!(result, Err(SampleError::Stopped)), "{result:?}");
    let requested_at = requested_at.expect("progress was reported during the run");
    assert!(requested_at.elapsed() < Duration::from_secs(10));
    assert!(began.elapsed() < Duration::from_secs(120));
}
