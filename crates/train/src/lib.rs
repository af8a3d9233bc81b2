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
