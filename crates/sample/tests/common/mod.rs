//! Helpers shared by the sampler's test files.

use autobatch::RunConfig;
use autobatch_sample::SampleConfig;

/// The default settings with these lengths and this seed.
pub fn config(chains: usize, warmup: usize, draws: usize, seed: u64) -> SampleConfig {
    SampleConfig {
        chains,
        warmup,
        draws,
        run: RunConfig {
            options: autobatch::RunOptions {
                seed,
                ..RunConfig::default().options
            },
            ..RunConfig::default()
        },
        ..SampleConfig::default()
    }
}
