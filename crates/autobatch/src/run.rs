//! Running a bound batch: the strategies, the run's configuration, and the
//! per-member results with the run's figures.

use std::fmt;

use autobatch_exec::{Observer, Stats};
use autobatch_types::{MemberError, Tensor, Value};

use crate::bind::BoundBatch;

/// How a batch is executed, how an operation treats inactive members, and
/// how the program-counter strategy picks its next block: the executors'
/// own types. Every strategy gives every member the same result; they differ
/// in speed.
pub use autobatch_exec::{BatchingOptions, BlockChoice, LaneMode, RunOptions, Strategy};

/// Everything that says how a batch runs (but not what it computes: the
/// results depend on the seed and the limits only): the strategy, and the
/// executors' own [`RunOptions`] (limits, seed, threads, `--max-instances`,
/// profile, counting, and the [`BatchingOptions`] only the batching
/// strategies read). The library sets the options' observer and first
/// member itself, per run.
///
/// ```
/// use autobatch::{LaneMode, RunConfig, Strategy};
/// let mut config = RunConfig { strategy: Strategy::Reference, ..RunConfig::default() };
/// config.options.batching.lanes = LaneMode::Compact;
/// config.options.seed = 7;
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    pub strategy: Strategy,
    /// The deepest chain of calls (`max_stack_depth`, at least 1), the most
    /// steps, the seed, the worker threads (from 1 to [`max_threads`]),
    /// the most instances alive at once (at least 1), whether to record a
    /// profile (only the strategies that batch steps record one,
    /// [`Strategy::records_profile`]) and to count operations
    /// ([`Stats::op_counts`]), and the batching options. None changes a
    /// member's result but the seed and the limits.
    pub options: RunOptions,
}

impl Default for RunConfig {
    /// The `auto` strategy (which picks an executor per run,
    /// `autobatch_exec::auto`), automatic lanes, the executor's default
    /// limits, seed 0, and one thread per available core.
    fn default() -> Self {
        RunConfig {
            strategy: Strategy::Auto,
            options: RunOptions {
                threads: default_threads(),
                ..RunOptions::default()
            },
        }
    }
}

/// One thread per core the process may use (1 if that cannot be known).
/// Asked once per process: the answer reads the cgroup's files, which
/// costs more than a small run (every run checks its thread count).
pub fn default_threads() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// Threads per available core a run may use at most: more only adds the
/// cost of starting and switching threads (results never depend on it).
pub const THREADS_PER_CORE: usize = 4;

/// The most worker threads a run may ask for: [`THREADS_PER_CORE`] times
/// the available cores.
pub fn max_threads() -> usize {
    THREADS_PER_CORE * default_threads()
}

/// Checks a thread count, in words a user can act on.
pub fn check_threads(threads: usize) -> Result<(), String> {
    let max = max_threads();
    if (1..=max).contains(&threads) {
        return Ok(());
    }
    Err(format!(
        "must be between 1 and {max} ({THREADS_PER_CORE} per available core, {} here)",
        default_threads()
    ))
}

impl RunConfig {
    /// Checks the settings that have no meaning (a stack depth, step limit
    /// or thread count of 0, more threads than [`max_threads`]).
    pub fn validate(&self) -> Result<(), RunError> {
        let options = &self.options;
        if options.max_stack_depth == 0 {
            return Err(RunError::InvalidConfig(
                "the maximum stack depth must be at least 1".into(),
            ));
        }
        if options.max_steps == 0 {
            return Err(RunError::InvalidConfig(
                "the maximum number of steps must be at least 1 (a member takes at least one \
                 step, its first block)"
                    .into(),
            ));
        }
        if options.max_instances == Some(0) {
            return Err(RunError::InvalidConfig(
                "the maximum number of instances must be at least 1".into(),
            ));
        }
        // `auto` runs program-counter when a profile is asked for.
        if options.profile && !self.strategy.records_profile() && self.strategy != Strategy::Auto {
            return Err(RunError::InvalidConfig(format!(
                "the {} strategy records no profile (its steps do not batch lanes); \
                 profile with {}",
                self.strategy,
                Strategy::profiling_list()
            )));
        }
        if let Err(range) = check_threads(options.threads) {
            return Err(RunError::InvalidConfig(format!(
                "the number of threads ({}) {range}",
                options.threads
            )));
        }
        Ok(())
    }
}

/// Why a batch could not be run at all (member errors are results, not this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// The run needs more than the machine has (reported before allocating).
    Resources(String),
    /// A configuration value without meaning.
    InvalidConfig(String),
    /// An executor broke its contract (a bug in autobatch).
    Internal(String),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Resources(message) => f.write_str(message),
            RunError::InvalidConfig(message) => f.write_str(message),
            RunError::Internal(message) => {
                write!(f, "internal error: {message} (this is a bug in autobatch)")
            }
        }
    }
}

impl std::error::Error for RunError {}

/// The outcome of a run: each member's structured result or error, in
/// member order, and the run's figures.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The strategy that ran: the one asked for, or the one `auto` picked
    /// (then [`Stats::choice`] says why).
    pub strategy: Strategy,
    pub lanes: LaneMode,
    pub threads: usize,
    pub batch_size: usize,
    /// One per member, in input order.
    pub members: Vec<Result<Value, MemberError>>,
    /// For a batch bound by [`crate::Compiled::bind_static_gradient`]: each
    /// static's name and the gradient of the sum of the members' results
    /// with respect to it (the members that finished); else empty.
    pub static_gradients: Vec<(String, autobatch_types::Tensor)>,
    /// For a batch bound with [`BoundBatch::with_row_gradients`]: the
    /// gradients of the statics read only by rows, kept to the rows
    /// touched (those statics are then not in `static_gradients`).
    pub row_gradients: Vec<(String, RowGradient)>,
    pub stats: Stats,
    /// How long the batch took to read and bind before it ran.
    pub preparation: crate::Preparation,
}

/// A static's gradient, whole or kept to the rows the members touched (see
/// [`BoundBatch::with_row_gradients`]).
pub use autobatch_exec::adjoints::{Gradient, RowGradient};

impl BoundBatch {
    /// Runs the batch. Errors of single members are in the result; an `Err`
    /// means nothing ran (an unimplemented strategy or a meaningless config).
    pub fn run(&self, config: &RunConfig) -> Result<RunResult, RunError> {
        self.run_observed(config, None)
    }

    /// The strategy a run of this batch with `config` runs: the one asked
    /// for, or the one `auto`'s rule picks (which runs it, unless `auto`
    /// tries a small run on program-counter first and it ends there:
    /// [`RunResult::strategy`] says which ran).
    pub fn strategy_for(&self, config: &RunConfig) -> Strategy {
        if config.strategy != Strategy::Auto {
            return config.strategy;
        }
        autobatch_exec::auto::choose(self.program(), self.env(), self.batch(), &config.options)
            .strategy
    }

    /// [`BoundBatch::run`], calling `observer` while the run goes (at most
    /// once per its interval) with the operation counts so far. Observing
    /// changes no result.
    pub fn run_observed(
        &self,
        config: &RunConfig,
        observer: Option<Observer>,
    ) -> Result<RunResult, RunError> {
        config.validate()?;
        let options = RunOptions {
            observer,
            first_member: self.first_member(),
            ..config.options.clone()
        };
        // The batch holds its program in an `Arc` for its runs: the
        // executors' caches find what they made of it by its address.
        autobatch_exec::share_program(&self.program);
        let output = autobatch_exec::run(
            config.strategy,
            self.program(),
            self.env(),
            self.batch(),
            &options,
        )
        .map_err(|error| match error {
            autobatch_exec::ExecError::Resources(message) => RunError::Resources(message),
            autobatch_exec::ExecError::Internal(message) => RunError::Internal(message),
        })?;
        if output.results.len() != self.batch_size() {
            return Err(RunError::Internal(format!(
                "the executor returned {} results for a batch of {}",
                output.results.len(),
                self.batch_size()
            )));
        }
        // Summing the gradients is part of the run (and of its seconds).
        let summing = std::time::Instant::now();
        let Summed {
            whole: static_gradients,
            rows: row_gradients,
        } = self.sum_static_gradients(output.adjoints, options.threads);
        let mut stats = output.stats;
        if !self.gradients.is_empty() {
            stats.wall_seconds += summing.elapsed().as_secs_f64();
        }
        let ret_type = &self.entry_function().ret_type;
        let mut members = Vec::with_capacity(output.results.len());
        for (member, result) in output.results.into_iter().enumerate() {
            let structured = match result {
                Ok(flat) => {
                    let count = flat.len();
                    let mut flat = flat.into_iter();
                    match Value::unflatten(ret_type, &mut flat) {
                        Some(value) if flat.next().is_none() => Ok(value),
                        _ => {
                            return Err(RunError::Internal(format!(
                                "member {member} returned {count} values, but the entry function returns {}",
                                ret_type.flat_len()
                            )))
                        }
                    }
                }
                Err(error) => Err(error),
            };
            members.push(structured);
        }
        Ok(RunResult {
            strategy: stats
                .choice
                .as_ref()
                .map_or(config.strategy, |c| c.strategy),
            lanes: options.batching.lanes,
            threads: options.threads,
            batch_size: self.batch_size(),
            members,
            static_gradients,
            row_gradients,
            stats,
            preparation: self.preparation(),
        })
    }

    /// The gradients this batch asked for, from the members' contributions
    /// (on the run's threads; the same bits on any number): the whole
    /// ones, and those kept to their rows.
    fn sum_static_gradients(
        &self,
        adjoints: autobatch_exec::adjoints::AdjointLog,
        threads: usize,
    ) -> Summed {
        let mut summed = Summed {
            whole: Vec::new(),
            rows: Vec::new(),
        };
        if self.gradients.is_empty() {
            adjoints.give_back();
            return summed;
        }
        let ids: Vec<autobatch_ir::StaticId> = self.gradients.iter().map(|(_, id)| *id).collect();
        let by_rows: Vec<bool> = self
            .by_rows
            .iter()
            .map(|&b| b && self.row_gradients)
            .collect();
        let sums = autobatch_exec::gradients::static_gradients(
            &self.env().statics,
            &ids,
            &by_rows,
            &adjoints,
            threads,
        );
        // The next runs log into its memory.
        adjoints.give_back();
        for ((name, _), sum) in self.gradients.iter().zip(sums) {
            match sum {
                Gradient::Dense(t) => summed.whole.push((name.clone(), t)),
                Gradient::Rows(g) => summed.rows.push((name.clone(), g)),
            }
        }
        summed
    }
}

/// A run's gradients: whole, and kept to their rows.
struct Summed {
    whole: Vec<(String, Tensor)>,
    rows: Vec<(String, RowGradient)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_and_lanes_names_round_trip() {
        for strategy in Strategy::ALL {
            assert_eq!(strategy.name().parse::<Strategy>(), Ok(strategy));
        }
        for lanes in LaneMode::ALL {
            assert_eq!(lanes.name().parse::<LaneMode>(), Ok(lanes));
        }
        for choice in BlockChoice::ALL {
            assert_eq!(choice.name().parse::<BlockChoice>(), Ok(choice));
        }
        assert!("fast"
            .parse::<Strategy>()
            .unwrap_err()
            .contains("unknown strategy `fast`"));
        assert!("some"
            .parse::<LaneMode>()
            .unwrap_err()
            .contains("unknown lanes mode `some`"));
    }

    #[test]
    fn auto_is_the_default() {
        assert_eq!(RunConfig::default().strategy, Strategy::Auto);
        assert!(RunConfig::default().options.threads >= 1);
    }

    #[test]
    fn meaningless_configs_are_refused() {
        let zero_depth = RunConfig {
            options: crate::RunOptions {
                max_stack_depth: 0,
                ..RunConfig::default().options
            },
            ..RunConfig::default()
        };
        assert!(
            matches!(zero_depth.validate(), Err(RunError::InvalidConfig(m)) if m.contains("stack depth"))
        );
        let zero_threads = RunConfig {
            options: crate::RunOptions {
                threads: 0,
                ..RunConfig::default().options
            },
            ..RunConfig::default()
        };
        assert!(
            matches!(zero_threads.validate(), Err(RunError::InvalidConfig(m)) if m.contains("threads"))
        );
        let zero_instances = RunConfig {
            options: crate::RunOptions {
                max_instances: Some(0),
                ..RunConfig::default().options
            },
            ..RunConfig::default()
        };
        assert!(
            matches!(zero_instances.validate(), Err(RunError::InvalidConfig(m)) if m.contains("instances"))
        );
        assert_eq!(RunConfig::default().validate(), Ok(()));
    }
}
