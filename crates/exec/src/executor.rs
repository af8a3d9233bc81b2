//! The [`Executor`] trait and the registry of executors ([`EXECUTORS`]).
//!
//! A strategy is one module that implements [`Executor`] plus one line in
//! [`EXECUTORS`]. Everything that lists strategies reads the registry:
//! [`Strategy::ALL`], names and their parsing, the help texts, and the
//! configurations the tests and the fuzzer run ([`Strategy::configurations`]).

use autobatch_ir::Program;
use autobatch_kernels::backend::Backend;

use crate::{
    auto, local_static, native, native_lockstep, program_counter, reference, Batch,
    BatchingOptions, BlockChoice, Env, ExecError, LaneMode, RunOptions, RunOutput,
};

/// Every executor, in the order of [`Strategy::ALL`] (and of help texts).
/// Adding an executor is adding it here.
pub const EXECUTORS: &[&dyn Executor] = &[
    &reference::Reference,
    &local_static::LocalStatic,
    &program_counter::ProgramCounter,
    &native::NATIVE,
    &native::NATIVE_BATCHED,
    &native_lockstep::NativeLockstep,
    &auto::Auto,
];

/// One way of executing a batch. Every executor must give every member
/// exactly the result the reference executor gives, errors included.
pub trait Executor: Send + Sync {
    /// The name on the command line and in reports, unique: `program-counter`.
    fn name(&self) -> &'static str;

    /// What it does, in a few words for help texts.
    fn description(&self) -> &'static str;

    /// Which of the [`BatchingOptions`] it reads (by default the lanes
    /// mode if it batches steps, [`Executor::batches_steps`], else none).
    fn reads(&self) -> OptionsRead {
        OptionsRead {
            lanes: self.batches_steps(),
            block_choice: false,
        }
    }

    /// Whether it computes on the backend it is given (by default yes; the
    /// reference and native code compute with the kernels themselves).
    fn uses_backend(&self) -> bool {
        true
    }

    /// Whether it batches steps: each step runs one block for many lanes
    /// at once (local-static, program-counter; by default no). Such an
    /// executor records profiles, advances its members together and runs a
    /// ragged batch as one batch.
    fn batches_steps(&self) -> bool {
        false
    }

    /// Whether it records a run's [`crate::profile::Profile`] when asked
    /// ([`RunOptions::profile`]): the executors that batch steps do.
    fn records_profile(&self) -> bool {
        self.batches_steps()
    }

    /// Whether the members of a batch advance together, a step of each at
    /// a time, so that at any moment they have all come about as far (the
    /// batching strategies); if not (by default), members run one after
    /// another on each thread, or in turns, and the last one begins its
    /// work near the end of the run. A caller that reads the progress of
    /// the whole batch as a moment in every member's run asks this.
    fn advances_members_together(&self) -> bool {
        self.batches_steps()
    }

    /// Whether it runs a ragged batch ([`crate::Env::ragged`]) as one batch
    /// itself (`crate::batched::classes`, the executors that batch steps);
    /// if not, a ragged batch runs as one batch per size
    /// ([`crate::ragged`]), each with its lengths fixed.
    fn runs_ragged(&self) -> bool {
        self.batches_steps()
    }

    /// Runs `batch` on `program` (which has been through
    /// `autobatch_passes::optimize`, and whose values all fit in memory), a
    /// batching executor computing on `backend`.
    fn run(
        &self,
        backend: &dyn Backend,
        program: &Program,
        env: &Env,
        batch: &Batch,
        options: &RunOptions,
    ) -> Result<RunOutput, ExecError>;
}

/// Which [`BatchingOptions`] change how an executor runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptionsRead {
    pub lanes: bool,
    pub block_choice: bool,
}

/// A registered executor, by handle: compared, hashed and printed by name.
#[derive(Clone, Copy)]
pub struct Strategy(&'static dyn Executor);

/// The executors of this crate, by name.
#[allow(non_upper_case_globals)]
impl Strategy {
    pub const Reference: Strategy = Strategy(&reference::Reference);
    pub const LocalStatic: Strategy = Strategy(&local_static::LocalStatic);
    pub const ProgramCounter: Strategy = Strategy(&program_counter::ProgramCounter);
    pub const Native: Strategy = Strategy(&native::NATIVE);
    pub const NativeBatched: Strategy = Strategy(&native::NATIVE_BATCHED);
    pub const NativeLockstep: Strategy = Strategy(&native_lockstep::NativeLockstep);
    /// Picks one of the others per run ([`crate::auto`]).
    pub const Auto: Strategy = Strategy(&auto::Auto);
}

impl Strategy {
    /// Every registered executor, in the order of [`EXECUTORS`].
    pub const ALL: [Strategy; EXECUTORS.len()] = {
        let mut all = [Strategy(EXECUTORS[0]); EXECUTORS.len()];
        let mut i = 1;
        while i < EXECUTORS.len() {
            all[i] = Strategy(EXECUTORS[i]);
            i += 1;
        }
        all
    };

    pub fn executor(self) -> &'static dyn Executor {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    pub fn description(self) -> &'static str {
        self.0.description()
    }

    pub fn reads(self) -> OptionsRead {
        self.0.reads()
    }

    pub fn uses_backend(self) -> bool {
        self.0.uses_backend()
    }

    pub fn records_profile(self) -> bool {
        self.0.records_profile()
    }

    pub fn advances_members_together(self) -> bool {
        self.0.advances_members_together()
    }

    /// The strategies that record a profile, for a message: `a or b`.
    pub fn profiling_list() -> String {
        let names: Vec<String> = Strategy::ALL
            .iter()
            .filter(|s| s.records_profile())
            .map(|s| s.name().to_string())
            .collect();
        joined(&names, "or")
    }

    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Every [`BatchingOptions`] that may change this strategy's run: each
    /// lanes mode if it reads them, each block choice (inner) if it reads
    /// them; the defaults for the options it does not read.
    pub fn configurations(self) -> Vec<BatchingOptions> {
        let reads = self.reads();
        let default = BatchingOptions::default();
        let lanes: &[LaneMode] = if reads.lanes {
            &LaneMode::ALL
        } else {
            &[default.lanes]
        };
        let choices: &[BlockChoice] = if reads.block_choice {
            &BlockChoice::ALL
        } else {
            &[default.block_choice]
        };
        lanes
            .iter()
            .flat_map(|&lanes| {
                choices.iter().map(move |&block_choice| BatchingOptions {
                    lanes,
                    block_choice,
                })
            })
            .collect()
    }

    /// The strategies for a help text: `a (what a does), b (...) or c (...)`.
    pub fn help_list() -> String {
        let described: Vec<String> = Strategy::ALL
            .iter()
            .map(|s| format!("{} ({})", s.name(), s.description()))
            .collect();
        joined(&described, "or")
    }

    /// The names of the strategies that read an option, for a help text:
    /// `a`, `a and b`.
    pub fn reading(option: impl Fn(OptionsRead) -> bool) -> String {
        let names: Vec<String> = Strategy::ALL
            .iter()
            .filter(|s| option(s.reads()))
            .map(|s| s.name().to_string())
            .collect();
        joined(&names, "and")
    }
}

/// `a`, `a or b`, `a, b or c`, with `word` in place of "or".
fn joined(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} {word} {last}", rest.join(", ")),
    }
}

impl PartialEq for Strategy {
    fn eq(&self, other: &Strategy) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Strategy {}

impl std::hash::Hash for Strategy {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state)
    }
}

impl std::fmt::Debug for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Strategy").field(&self.name()).finish()
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(name: &str) -> Result<Strategy, String> {
        Strategy::from_name(name).ok_or_else(|| {
            let names: Vec<String> = Strategy::ALL.iter().map(|s| s.name().into()).collect();
            format!(
                "unknown strategy `{name}` (expected {})",
                joined(&names, "or")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_named_handles_registered() {
        for (i, a) in Strategy::ALL.iter().enumerate() {
            assert!(Strategy::ALL[i + 1..].iter().all(|b| b.name() != a.name()));
        }
        for named in [
            Strategy::Reference,
            Strategy::LocalStatic,
            Strategy::ProgramCounter,
        ] {
            assert_eq!(Strategy::from_name(named.name()), Some(named));
        }
    }

    #[test]
    fn configurations_vary_only_the_options_read() {
        assert_eq!(
            Strategy::Reference.configurations(),
            [BatchingOptions::default()]
        );
        assert_eq!(Strategy::LocalStatic.configurations().len(), 3);
        assert_eq!(Strategy::ProgramCounter.configurations().len(), 6);
        assert_eq!(
            "x".parse::<Strategy>(),
            Err(
                "unknown strategy `x` (expected reference, local-static, program-counter, native, native-batched, native-lockstep or auto)"
                    .into()
            )
        );
    }
}
