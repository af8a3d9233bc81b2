//! `sample` over the ranks of a job (ranks as threads, `InProcess`): the
//! draws, the statistics and the summary of one process, whatever the
//! number of ranks, with and without pooled adaptation; a rank that cannot
//! build the model is named.

use autobatch::shard::{Communicator, InProcess};
use autobatch_sample::{
    report, sample_sharded, Adaptation, Model, SampleConfig, ShardedError, Stop,
};

const MODEL: &str = "\
extern \"autobatch\" {
    static y: [f64; N];
}
fn log_density(theta: [f64; 2]) -> f64 {
    let r = (y - theta[0]) / theta[1].exp();
    -0.5 * dot(r, r) - N as f64 * theta[1]
}
";

const DATA: &str = r#"{"y": [1.2, 0.4, 2.2, 1.7, 0.9, 1.4], "N": 6}"#;

fn config(adaptation: Adaptation) -> SampleConfig {
    let mut config = SampleConfig {
        chains: 5,
        warmup: 120,
        draws: 60,
        adaptation,
        ..SampleConfig::default()
    };
    config.run.options.seed = 9;
    config.run.options.threads = 1;
    config
}

/// The CSV, and the stats JSON without its timing and utilization figures.
fn outputs(run: &autobatch_sample::SampleRun) -> (Vec<u8>, serde_json::Value) {
    let mut csv = Vec::new();
    report::write_csv(run, &mut csv).expect("write the CSV");
    let mut stats = report::stats_json(run, autobatch_sample::DEFAULT_STRATEGY.name());
    // The executor's own figures describe rank 0's runs (none when it has
    // no chain) and include the compile time; so do the strategy `auto`
    // picked for them and why (it picks by the chains per thread).
    let ran = stats["strategy"].as_str().expect("a name").to_owned();
    stats.as_object_mut().expect("an object").remove(&ran);
    for key in [
        "strategy",
        "strategy_reason",
        "warmup_seconds",
        "sampling_seconds",
        "gradient_evaluations_per_second",
        "gradient_utilization",
        "gradient_utilization_warmup",
        "gradient_utilization_sampling",
        // Memory: each rank's own batch and process.
        "peak_batch_bytes",
        "peak_resident_bytes",
    ] {
        stats.as_object_mut().expect("an object").remove(key);
    }
    (csv, stats)
}

#[test]
fn ranks_sample_what_one_process_samples() {
    for adaptation in [Adaptation::PerChain, Adaptation::Pooled { every: 7 }] {
        let config = config(adaptation);
        let model = Model::new(MODEL, "model.ab", DATA).expect("a model");
        let one = outputs(&model.sample(&config, &mut |_| {}).expect("samples"));
        for ranks in [2, 3, 6] {
            let runs = InProcess::run(ranks, |comm| {
                let model = Model::new(MODEL, "model.ab", DATA).expect("a model");
                sample_sharded(comm, Ok(&model), &config, &mut |_| {}, &Stop::new())
                    .expect("samples")
            });
            let (root, others) = runs.split_first().expect("rank 0");
            assert!(others.iter().all(Option::is_none));
            let many = outputs(root.as_ref().expect("rank 0 has the run"));
            assert_eq!(many.0, one.0, "draws on {ranks} ranks, {adaptation:?}");
            assert_eq!(many.1, one.1, "stats on {ranks} ranks, {adaptation:?}");
        }
    }
}

#[test]
fn a_rank_without_a_model_is_named() {
    for adaptation in [Adaptation::PerChain, Adaptation::Pooled { every: 5 }] {
        let config = config(adaptation);
        let results = InProcess::run(3, |comm| {
            let model = Model::new(MODEL, "model.ab", DATA).expect("a model");
            let mine = if comm.rank() == 2 {
                Err("cannot read the model here".to_string())
            } else {
                Ok(&model)
            };
            sample_sharded(comm, mine, &config, &mut |_| {}, &Stop::new())
        });
        match &results[0] {
            Err(ShardedError::Rank(failure)) => {
                assert_eq!(failure.rank, 2);
                assert_eq!(failure.to_string(), "rank 2: cannot read the model here");
            }
            other => panic!("rank 0 should name rank 2, not {other:?}"),
        }
    }
}
