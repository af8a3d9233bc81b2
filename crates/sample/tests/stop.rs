//! A requested [`Stop`] ends sampling early with `SampleError::Stopped`:
//! before the first run, and in the middle of a run far too long to finish.
//! A raised interrupt (`RunOptions::interrupt`, the command line's Ctrl-C)
//! ends it with the chains that had finished.

use std::time::{Duration, Instant};

use autobatch::Strategy;
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
    // The default strategy (native: each chain's run is one long member,
    // interrupted inside) and program-counter (the batch stops between
    // two steps); the stop comes from another thread, as Ctrl-C's does.
    for strategy in [autobatch_sample::DEFAULT_STRATEGY, Strategy::ProgramCounter] {
        let model = Model::new(MODEL, "m.ab", "{}").expect("a model");
        let stop = Stop::new();
        let mut config = long_config();
        config.run.strategy = strategy;
        let began = Instant::now();
        let mut progressed = false;
        let (result, requested_at) = std::thread::scope(|scope| {
            let requester = scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                stop.request();
                Instant::now()
            });
            let result = model.sample_stoppable(
                &config,
                &mut |progress| progressed |= progress.done > 0,
                &stop,
            );
            (result, requester.join().expect("the requester"))
        });
        let name = strategy.name();
        assert!(
            matches!(result, Err(SampleError::Stopped)),
            "{name}: {result:?}"
        );
        assert!(
            requested_at.elapsed() < Duration::from_secs(10),
            "{name}: stopped {:?} after the request",
            requested_at.elapsed()
        );
        assert!(began.elapsed() < Duration::from_secs(120), "{name}");
        if strategy == Strategy::ProgramCounter {
            // The batch reports its chains' iterations as they go (under
            // native, a chain's count comes when it ends).
            assert!(progressed, "{name}: progress was reported during the run");
        }
    }
}

/// Under `native` on one thread the chains run one after the other: once
/// the iterations done per chain pass half the total, chain 0 has
/// finished. An interrupt then keeps its draws; chain 1 is named as
/// interrupted, and its draws, partial, are not kept.
#[test]
fn an_interrupt_keeps_the_chains_that_finished() {
    let model = Model::new(MODEL, "m.ab", "{}").expect("a model");
    let interrupt = autobatch::Interrupt::new();
    let mut config = SampleConfig {
        chains: 2,
        warmup: 20_000,
        draws: 100,
        ..SampleConfig::default()
    };
    config.run.strategy = Strategy::Native;
    config.run.options.threads = 1;
    config.run.options.interrupt = Some(interrupt.clone());
    let total = config.warmup + config.draws;
    let run = model
        .sample(&config, &mut |progress| {
            if progress.done > total / 2 + 100 {
                interrupt.request();
            }
        })
        .expect("chain 0 finished");
    assert_eq!(run.chain_ids, [0]);
    assert_eq!(run.samples[0].len(), run.draws * run.dim);
    assert_eq!(run.failures.len(), 1);
    let failure = &run.failures[0];
    assert_eq!((failure.chain, failure.kind.as_str()), (1, "interrupted"));
    assert!(failure.message.contains("interrupted"), "{failure}");
}
