//! Training autobatch programs as a DyNet or PyTorch user trains a model:
//! the model's weights are statics of a program, the loss an entry
//! function of one example, and [`Trainer`] runs epochs of shuffled
//! mini-batches over a data set, each step the batched gradient of the
//! mini-batch's loss with respect to the trained statics
//! ([`autobatch::BoundProgram::bind_static_gradient`]) and an optimizer's
//! update of those statics in place, where the next batch reads them (no
//! statics are converted or bound again).
//!
//! ```
//! use autobatch::{compile, Inputs, RunConfig};
//! use autobatch_train::{OptimizerConfig, OptimizerKind, TrainConfig, Trainer};
//!
//! // y = w * x, fitted to y = 3x.
//! let source = "extern \"autobatch\" { static w: f64; }
//!               fn loss(x: f64, y: f64) -> f64 { let e = w * x - y; e * e }";
//! let program = compile(source, "fit.ab").unwrap();
//! let bound = program.with_statics(&Inputs::new().shared("w", 0.0)).unwrap();
//! let data = Inputs::new().batched("x", [1.0, 2.0, -1.0]).batched("y", [3.0, 6.0, -3.0]);
//! let mut config = TrainConfig::new("loss");
//! config.optimizer = OptimizerConfig { lr: 0.1, ..OptimizerConfig::new(OptimizerKind::Sgd) };
//! config.batch_size = 3;
//! config.epochs = 50;
//! config.run.options.threads = 1;
//! let mut trainer = Trainer::new(bound, config, data).unwrap();
//! let history = trainer.fit(None, &mut |_, _| {}).unwrap();
//! assert_eq!(history.steps.len(), 50);
//! let w = autobatch_train::trainer::values_f64(trainer.bound().static_value("w").unwrap());
//! assert!((w[0] - 3.0).abs() < 1e-9);
//! ```
//!
//! Decisions, as PyTorch makes them where it makes them:
//!
//! - The objective of a step is the MEAN of the members' losses (PyTorch's
//!   `reduction="mean"`): the gradient is the batch's summed gradient
//!   divided by the number of members whose loss was computed.
//! - A member whose loss faults (an index out of bounds, a step limit)
//!   contributes nothing to the step and is counted in
//!   [`StepRecord::faulted`]; the others' update is the one they would
//!   give without it. A step whose members all fault updates nothing.
//! - The results depend on the seed, the data and the options only: not
//!   on the threads or the strategy (the gradients' sums are fixed-order,
//!   the updates serial).
//!
//! Modules: [`optim`] (SGD, Adam, AdamW), [`schedule`] (learning rates),
//! [`clip`] (global-norm clipping), [`batches`] (the shuffled order of each
//! epoch), [`trainer`] (the loop, its records and its checkpoint state).
//!
//! Architecture Invariant: like `autobatch`, this crate knows nothing of
//! the command line or of file formats: its checkpoint is a list of named
//! tensors, which the caller writes as it likes.

/// A choice among named kinds (`enum`s without fields, read from and
/// printed as their names): declares the enum with `ALL`, `name`,
/// `Display` and `FromStr`, whose error names the kind of choice
/// (`what`) and every name it accepts.
macro_rules! named_kinds {
    (
        $(#[$meta:meta])*
        pub enum $kind:ident, $what:literal {
            $($variant:ident = $name:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $kind {
            $($variant),+
        }

        impl $kind {
            pub const ALL: [$kind; [$($name),+].len()] = [$($kind::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($kind::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $kind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $kind {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                $kind::ALL
                    .into_iter()
                    .find(|k| k.name() == text)
                    .ok_or_else(|| {
                        format!(
                            "unknown {} `{text}` (expected {})",
                            $what,
                            crate::one_of(&[$($name),+])
                        )
                    })
            }
        }
    };
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

pub mod batches;
pub mod clip;
pub mod optim;
pub mod schedule;
pub mod trainer;

pub use optim::{Optimizer, OptimizerConfig, OptimizerKind};
pub use schedule::{Schedule, ScheduleKind};
pub use trainer::{
    EpochRecord, EvalRecord, Event, History, StepRecord, TrainConfig, TrainError, Trainer,
};
