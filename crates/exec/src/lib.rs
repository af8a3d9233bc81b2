//! Executors: they run a verified IR [`Program`] on a batch of members.
//!
//! Every executor takes the same [`Batch`], [`Env`] and [`RunOptions`] and
//! returns the same [`RunOutput`]; the reference executor ([`reference`])
//! defines what every member's result is, and every other strategy must give
//! exactly the same per-member results, errors included.
//!
//! This crate must not know about syntax, JSON or the command line: inputs
//! arrive as tensors already checked against the entry function's signature.

use autobatch_ir::{FuncId, Program};
use autobatch_types::{Loc, MemberError, Tensor};

pub mod reference;

/// Default `--max-stack-depth`: the deepest chain of calls one member may
/// have (the entry function counts as depth 1).
pub const DEFAULT_MAX_STACK_DEPTH: usize = 10_000;
/// Default `--max-steps`: the most basic blocks one member may execute.
pub const DEFAULT_MAX_STEPS: u64 = 100_000_000;

/// How a run behaves, whatever the strategy.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub max_stack_depth: usize,
    pub max_steps: u64,
    /// The seed of the run; member `i` draws from a stream that depends only on `(seed, i)`.
    pub seed: u64,
    /// Worker threads for large operations (1 = none).
    pub threads: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { max_stack_depth: DEFAULT_MAX_STACK_DEPTH, max_steps: DEFAULT_MAX_STEPS, seed: 0, threads: 1 }
    }
}

/// What is shared by all members: the statics (indexed by `StaticId`) and
/// the values of the symbolic dimensions (indexed by `SymbolId`).
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub statics: Vec<Tensor>,
    pub symbols: Vec<u64>,
}

/// One flattened entry argument: one value per member, or one for all.
#[derive(Clone, Debug)]
pub enum Arg {
    Batched(Vec<Tensor>),
    Shared(Tensor),
}

impl Arg {
    /// The value member `member` sees.
    pub fn for_member(&self, member: usize) -> &Tensor {
        match self {
            Arg::Batched(values) => &values[member],
            Arg::Shared(value) => value,
        }
    }
}

/// A batch: the entry function and its flattened arguments.
#[derive(Clone, Debug)]
pub struct Batch {
    pub entry: FuncId,
    /// Number of members.
    pub size: usize,
    /// One per flattened parameter of the entry function, in order.
    pub args: Vec<Arg>,
}

/// Execution counts of one primitive operation of the source.
#[derive(Clone, Debug, PartialEq)]
pub struct OpCount {
    pub op: &'static str,
    pub loc: Loc,
    /// Batched executions of the operation.
    pub executions: u64,
    /// (member, execution) pairs in which the member was active.
    pub active_lanes: u64,
}

/// Figures of one run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Blocks executed (each a batched execution of one basic block).
    pub steps: u64,
    /// Mean fraction of the batch active in the operations run.
    pub lane_utilization: f64,
    /// One entry per user operation of the source (bookkeeping excluded),
    /// sorted by location then name.
    pub op_counts: Vec<OpCount>,
    /// Seconds spent executing the batch only.
    pub wall_seconds: f64,
}

/// The outcome of a run: per member, the flattened results or the error
/// that stopped it; and the run's figures.
#[derive(Clone, Debug)]
pub struct RunOutput {
    pub results: Vec<Result<Vec<Tensor>, MemberError>>,
    pub stats: Stats,
}

/// Runs `batch` on `program` with the reference executor.
pub fn run_reference(program: &Program, env: &Env, batch: &Batch, options: &RunOptions) -> RunOutput {
    reference::run(program, env, batch, options)
}
