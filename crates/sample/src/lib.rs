//! The No-U-Turn Sampler as an autobatch program, and the host side of
//! `autobatch sample`.
//!
//! The sampler itself is `nuts.ab`, written in the autobatch language for a
//! single chain: recursive tree building with multinomial sampling, the
//! generalized U-turn criterion, a maximum tree depth, divergence checks,
//! and Stan's warmup (dual averaging of the step size, windowed estimation of
//! a diagonal metric), all per chain. [`Model`] checks a user's model
//! (`fn log_density(theta: [f64; D]) -> f64` reading `extern "autobatch"`
//! statics), compiles it together with the library and binds its data;
//! [`Model::sample`] runs every chain as one batch through the `autobatch`
//! library API, warmup and sampling in one run, so that no chain waits for
//! another (unless pooled adaptation is asked for); [`diagnostics`] computes R-hat and
//! effective sample sizes; [`report`] writes the table, the warnings on
//! it, the CSV and the JSON;
//! [`sample_sharded`] runs the chains over the ranks of a job (a slice of
//! chains per rank, pooled adaptation pooled across ranks in chain order),
//! with the result of one process.
//!
//! ```no_run
//! use autobatch_sample::{Model, SampleConfig};
//! let source = "fn log_density(theta: [f64; 2]) -> f64 { -0.5 * dot(theta, theta) }";
//! let model = Model::new(source, "normal.ab", "{}").expect("a model");
//! let run = model.sample(&SampleConfig::default(), &mut |_| {}).expect("it runs");
//! print!("{}", autobatch_sample::report::table(&run));
//! for warning in autobatch_sample::report::warnings(&run) {
//!     eprintln!("{warning}");
//! }
//! ```
//!
//! Architecture Invariant: knows nothing of the command line (flags, exit
//! codes as numbers are only suggested by [`SampleError::exit_code`],
//! terminals, progress bars): it runs programs only through the `autobatch`
//! library API, and its result for a chain depends on the seed, the
//! settings and the chain's index only, never on the strategy or the other
//! chains (except under pooled adaptation, which a user asks for by name).

mod chains;
mod constrained;
mod data;
pub mod diagnostics;
pub mod driver;
pub mod model;
pub mod report;
mod shard;

pub use driver::{
    Adaptation, ChainFailure, MemoryFigures, PhaseFigures, Progress, SampleConfig, SampleRun, Stop,
    Variable, DEFAULT_STRATEGY, MAX_ITERATIONS,
};
pub use model::{Model, Parameters, SampleError, LIBRARY};
pub use shard::{sample_sharded, ShardedError};
