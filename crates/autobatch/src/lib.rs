//! The library API of autobatch: compile a program written in autobatch's
//! small Rust-syntax language, bind a batch of inputs to one of its
//! functions, run the batch, and read each member's result.
//!
//! ```
//! use autobatch::{compile, Inputs, RunConfig, Strategy};
//!
//! let source = "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }";
//! let compiled = compile(source, "fib.ab").expect("fib compiles");
//!
//! // One value of `n` per member: a batch of four.
//! let inputs = Inputs::new().batched("n", [0_i64, 1, 5, 10]);
//! let batch = compiled.bind("fib", &inputs).expect("the inputs fit `fib`");
//!
//! let config = RunConfig { strategy: Strategy::Reference, ..RunConfig::default() };
//! let result = batch.run(&config).expect("the strategy is available");
//! let values: Vec<serde_json::Value> = result
//!     .members
//!     .iter()
//!     .map(|member| autobatch::value_to_json(member.as_ref().expect("no member fails")))
//!     .collect();
//! assert_eq!(values, [1, 1, 8, 89]);
//!
//! // The same results as `autobatch run` prints them.
//! assert_eq!(result.to_json(false), serde_json::json!({
//!     "results": [{"ok": 1}, {"ok": 1}, {"ok": 8}, {"ok": 89}]
//! }));
//! ```
//!
//! The steps, each with its own error type:
//!
//! 1. [`compile()`] parses, type-checks and lowers a source file to the IR
//!    ([`CompileError`] holds the diagnostics, rendered with file, line,
//!    column and source line).
//! 2. [`Inputs`] are built in Rust or read from the `--inputs` JSON format;
//!    [`Compiled::bind`] checks them against the entry function's signature and
//!    the statics and converts them to tensors ([`InputError`] names the
//!    argument, member and place inside the value that is wrong).
//! 3. [`BoundBatch::run`] runs the batch with a [`RunConfig`] ([`RunError`] if
//!    it cannot run at all); each member gets a [`Value`] or a [`MemberError`]
//!    in the [`RunResult`], which also carries the run's [`Stats`] and writes
//!    itself as JSON with [`RunResult::to_json`].
//!
//! A batch too large for one machine runs over the ranks of a job:
//! [`shard::run_sharded`] gives each rank a contiguous slice of the members
//! (numbered from their index in the whole batch, so that every member
//! draws the same random numbers) and writes, on rank 0, the bytes one
//! process writes; the transport is a [`shard::Communicator`].
//!
//! Without JSON, [`Compiled::call`] takes inputs as Rust values by argument
//! name (slices, arrays, tuples, [`typed::Array`], `ndarray` arrays with the
//! `ndarray` feature) and gives typed results: see [`typed`].
//!
//! A program can also live in the Rust code itself: [`program!`] checks it
//! when the Rust code compiles (its diagnostics are compile errors at the
//! program's own tokens) and gives a method per function, with Rust types
//! for its arguments and result:
//!
//! ```
//! use autobatch::{RunConfig, Shared};
//!
//! let prog = autobatch::program! {
//!     fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }
//!     fn scale(xs: [f64; L], k: f64) -> [f64; L] { xs * k }
//! };
//! let out = prog.fib(vec![3, 7, 4]).run(&RunConfig::default()).unwrap();
//! assert_eq!(out.members, [Ok(3), Ok(21), Ok(5)]);
//! // One value for all members, and arrays of each member's own length.
//! let out = prog.scale(vec![vec![1.0, 2.0], vec![3.0]], Shared(10.0))
//!     .run(&RunConfig::default())
//!     .unwrap();
//! assert_eq!(out.members, [Ok(vec![10.0, 20.0]), Ok(vec![30.0])]);
//! ```
//!
//! Architecture Invariant: this crate must not know about the command line
//! (flags, exit codes, files, terminals). The `autobatch` command is a thin
//! layer over it, and everything it can do must be possible from Rust.

pub mod bind;
pub mod compile;
mod frontend_bridge;
pub mod inputs;
pub mod json_output;
pub mod run;
pub mod shard;
pub mod typed;

/// A model's constrained parameters, lowered to the sampler's form.
pub use autobatch_frontend::parameters;
/// A model's transformed parameters and generated quantities.
pub use autobatch_frontend::quantities;
pub use bind::{BoundBatch, BoundProgram, InputError, InputErrorKind, Preparation};
pub use compile::{compile, CompileError, Compiled};
pub use frontend_bridge::Diagnostic;
pub use inputs::{parse_strict_json, ArrayInput, InputValue, Inputs};
pub use json_output::{
    float_to_json, member_result_to_json, report_to_json, scalar_to_json, strategy_reason,
    tensor_from_json, tensor_to_json, value_to_json,
};
pub use run::{
    check_threads, default_threads, max_threads, BatchingOptions, BlockChoice, Gradient, LaneMode,
    RowGradient, RunConfig, RunError, RunOptions, RunResult, Strategy, THREADS_PER_CORE,
};
pub use typed::{Call, CallError, CallResult, Shared};

/// An autobatch program embedded in Rust code, checked when the Rust code
/// compiles: see [`autobatch_macros::program`].
pub use autobatch_macros::program;

/// The table of the language's operations: its builtins, their names and
/// spellings, and the signature class of each.
pub use autobatch_ops as ops;

/// The executor the `auto` strategy picked for a run, and why ([`Stats::choice`]).
pub use autobatch_exec::auto::Choice as StrategyChoice;
/// A run's profile ([`RunOptions::profile`], `autobatch run --profile`).
pub use autobatch_exec::profile;
pub use autobatch_exec::{
    available_memory_bytes, Interrupt, Observer, OpCount, ReportField, ReportValue, RunProgress,
    Stats, DEFAULT_MAX_STACK_DEPTH, DEFAULT_MAX_STEPS,
};
pub use autobatch_types::{
    Data, Dim, ErrorKind, Loc, MemberError, Scalar, ScalarType, Tensor, TensorType, Type, Value,
};
