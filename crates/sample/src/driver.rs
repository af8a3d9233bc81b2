//! Running the chains: all of them as one batch, warmup and sampling in
//! one run of it, so that no chain ever waits for another. Only pooled
//! adaptation (which a user asks for) and benchmarks that imitate samplers
//! synchronising per trajectory run the batch in segments, the chains' state
//! passing from one run to the next as batched inputs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use autobatch::{
    BoundBatch, MemberError, Observer, RunConfig, RunError, RunProgress, RunResult, Strategy,
    Tensor, Value,
};
use autobatch_types::Data;

use autobatch::shard::{Communicator, RankFailure, Single};

use crate::chains::{ChainOutcome, ChainState, FinishedChain, Gradients, Windows, STATE};
use crate::model::{Model, SampleError};

/// The most iterations (warmup and draws together) a chain may run, as in
/// Stan (whose counts are 32-bit integers); the sampler counts them in
/// `i64`, which this keeps far from overflowing.
pub const MAX_ITERATIONS: usize = i32::MAX as usize;

/// What to run.
#[derive(Clone, Debug)]
pub struct SampleConfig {
    pub chains: usize,
    pub warmup: usize,
    pub draws: usize,
    /// The deepest tree of a trajectory: at most 2^max_depth - 1 leapfrog steps.
    pub max_depth: u32,
    /// The acceptance statistic warmup aims the step size at.
    pub target_accept: f64,
    /// How the batch runs: strategy, lanes, threads; and the seed. The
    /// limits are set by the sampler (no step limit: a long trajectory is not an error).
    pub run: RunConfig,
    /// Whether each chain adapts alone or the chains pool their adaptation.
    pub adaptation: Adaptation,
    /// Iterations per run of the batch; `None` (the default): all of them in
    /// one run. Chains wait for one another at the end of every run, so only
    /// benchmarks set this, to imitate samplers that synchronise every few
    /// trajectories. Each run has its own random streams, so the draws
    /// depend on it.
    pub segment: Option<usize>,
    /// Every chain's initial point on the unconstrained scale (from
    /// [`Model::initial_point`]); `None` (the default): each chain draws
    /// its own, uniform in (-2, 2) in every coordinate, as Stan does.
    pub init: Option<Vec<f64>>,
}

/// How warmup adapts the step size and the metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adaptation {
    /// Each chain adapts alone, as Stan does; chains never wait for one
    /// another, and a chain's draws do not depend on the other chains.
    PerChain,
    /// The chains share one step size and one metric. Warmup runs in
    /// segments of `every` iterations (also ending at every adaptation
    /// window's end); between segments the chains meet and pool: the metric
    /// is estimated from every chain's draws of the window, and the step
    /// size's dual averaging state is averaged over the chains, which (the
    /// update being linear) is dual averaging driven by the chains' mean
    /// acceptance statistic when `every` is 1. Sampling then runs in one
    /// run. A chain's draws depend on the other chains; a failed chain drops
    /// out of the pool.
    Pooled { every: usize },
}

/// The strategy `sample` runs the chains with unless told otherwise:
/// `auto`, which picks per model (`autobatch_exec::auto`; see
/// `docs/sampler.md`, "Which strategy"). Every strategy gives every chain
/// the same draws.
pub const DEFAULT_STRATEGY: Strategy = Strategy::Auto;

impl Default for SampleConfig {
    /// Stan's defaults: 4 chains, 1000 warmup iterations, 1000 draws,
    /// depth 10, target 0.8; the [`DEFAULT_STRATEGY`] and seed 0.
    fn default() -> Self {
        SampleConfig {
            chains: 4,
            warmup: 1000,
            draws: 1000,
            max_depth: 10,
            target_accept: 0.8,
            run: RunConfig {
                strategy: DEFAULT_STRATEGY,
                ..RunConfig::default()
            },
            adaptation: Adaptation::PerChain,
            segment: None,
            init: None,
        }
    }
}

/// A request to stop a [`Model::sample_stoppable`] that is running, from
/// another thread (a host's Ctrl-C handler, say). Clones share one request.
///
/// The sampler looks at it between runs of the batch and, while a run goes,
/// each time the executor reports progress (every 10 ms): it then ends the
/// run by unwinding out of its observer, which the executors let through
/// (the observer's panics are the caller's), so that the run's memory is
/// freed at once and [`SampleError::Stopped`] is returned.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A stop not requested (yet).
    pub fn new() -> Stop {
        Stop::default()
    }
    /// Asks the sampler to stop as soon as it can.
    pub fn request(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    /// Whether a stop was requested.
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The payload the observer unwinds with when a stop is requested
/// (`resume_unwind`, so that no panic hook prints it).
struct Stopped;

/// How far the run is, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Iterations (warmup and sampling) finished per chain, on average over
    /// the chains.
    pub done: usize,
    pub total: usize,
    /// Whether some chain is still in warmup.
    pub warming_up: bool,
}

/// A chain that stopped with an error: the other chains' draws are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainFailure {
    pub chain: usize,
    /// The error's kind, as the command line names it (`index_out_of_bounds`, ...).
    pub kind: String,
    pub message: String,
    /// Where, for people: `model.ab:12:5`, or a place in the sampler.
    pub location: String,
}

impl std::fmt::Display for ChainFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chain {} stopped: {} at {}: {}",
            self.chain, self.kind, self.location, self.message
        )
    }
}

/// Figures of one phase (warmup or sampling), summed over chains and runs.
/// When both phases share a run (chains finish warmup at different times),
/// warmup ends, for `seconds` and the gradient executions, when the last
/// chain finishes it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseFigures {
    /// Wall seconds of the phase (binding the inputs and running).
    pub seconds: f64,
    /// Gradients computed for active chains, summed over chains.
    pub gradient_evaluations: u64,
    /// Batched executions of the leapfrog step's gradient.
    pub gradient_executions: u64,
    /// (chain, execution) pairs in which the chain was active, over those executions.
    pub gradient_active_lanes: u64,
}

impl PhaseFigures {
    /// The fraction of the computed gradient lanes some chain used.
    pub fn utilization(&self, chains: usize) -> f64 {
        if self.gradient_executions == 0 {
            return f64::NAN;
        }
        self.gradient_active_lanes as f64 / (self.gradient_executions as f64 * chains as f64)
    }
}

/// The draws and per-draw statistics of every chain that finished, and the
/// run's figures. Per-chain vectors hold the chains of `chain_ids`, in order.
#[derive(Clone, Debug)]
pub struct SampleRun {
    pub dim: usize,
    /// Chains run (the batch size), finished or not.
    pub chains: usize,
    pub warmup: usize,
    pub draws: usize,
    /// The deepest tree a trajectory may have (`SampleConfig::max_depth`).
    pub max_depth: u32,
    /// The chains that finished, by number: every chain but the failed ones.
    pub chain_ids: Vec<usize>,
    /// The chains that stopped with an error, by chain number.
    pub failures: Vec<ChainFailure>,
    /// Runs of the batch: 1 unless adaptation is pooled or segments are set.
    pub runs: usize,
    /// Per finished chain, the draws row after row: `samples[k][draw * dim + i]`.
    pub samples: Vec<Vec<f64>>,
    /// The quantities each draw reports, by name: `theta` (of `dim`
    /// values) for a model written as `log_density`, else the parameters
    /// `fn model` declares, on their constrained scale.
    pub variables: Vec<Variable>,
    /// The names of the reported columns, one per element of the
    /// variables: `theta[i]`, or Stan's `tau`, `theta_tilde.3`, `L.1.0`.
    pub columns: Vec<String>,
    /// Per finished chain, the constrained parameters row after row
    /// (`columns.len()` per draw); `None` when the draws are `samples`.
    pub constrained: Option<Vec<Vec<f64>>>,
    /// Per chain and draw (sampling only): tree depth, leapfrog steps,
    /// divergence, acceptance statistic, log density, and energy (the
    /// Hamiltonian at the draw with the momentum it was reached with:
    /// Stan's `energy__`).
    pub tree_depth: Vec<Vec<i64>>,
    pub n_leapfrog: Vec<Vec<i64>>,
    pub divergent: Vec<Vec<bool>>,
    pub accept_stat: Vec<Vec<f64>>,
    pub log_density: Vec<Vec<f64>>,
    pub energy: Vec<Vec<f64>>,
    /// Divergences during warmup, per finished chain.
    pub warmup_divergences: Vec<u64>,
    /// Per finished chain, the leapfrog steps at which the model faulted
    /// (caught: each ended its trajectory as a divergence), in warmup and
    /// in sampling.
    pub warmup_faults: Vec<u64>,
    pub sampling_faults: Vec<u64>,
    /// Per chain after warmup: the step size and the diagonal inverse metric.
    pub step_size: Vec<f64>,
    pub inv_metric: Vec<Vec<f64>>,
    pub warmup_figures: PhaseFigures,
    pub sampling_figures: PhaseFigures,
    /// What the run held in memory, against what it had to.
    pub memory: MemoryFigures,
    /// The executor's own figures for the last run of the batch
    /// (`Stats::report`: under `native`, whether the sampler was compiled).
    pub executor_report: Vec<autobatch::ReportField>,
    /// Under the `auto` strategy: the executor it picked for the last run
    /// of the batch, and why (`Stats::choice`).
    pub strategy_choice: Option<autobatch::StrategyChoice>,
    /// Every parameter's summary, computed once when first asked for.
    summaries: std::sync::OnceLock<Vec<crate::diagnostics::Summary>>,
}

/// A quantity each draw reports: its name and the lengths of its axes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub shape: Vec<usize>,
}

/// What a run held in memory, against what it had to hold: the model's
/// data and the chains' state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryFigures {
    /// The model's data (its statics), as bound: stored once for all chains.
    pub data_bytes: u64,
    /// What the chains must keep: each chain's sampler state (the point,
    /// its gradient, the metric and the adaptation's vectors and scalars)
    /// and the draws with their per-draw figures.
    pub chain_state_bytes: u64,
    /// The most bytes of variable storage (the batch's columns and value
    /// stacks, `Stats::peak_state_bytes`) one run of the batch held at once;
    /// under several ranks, the largest of any rank.
    pub peak_batch_bytes: u64,
    /// The process's peak resident memory (Linux's `VmHWM`; rank 0's under
    /// several ranks), when the system says.
    pub peak_resident_bytes: Option<u64>,
}

/// The bytes of a tensor's elements.
fn tensor_bytes(t: &autobatch::Tensor) -> u64 {
    let width = match t.elem_type() {
        autobatch::ScalarType::Bool => 1,
        autobatch::ScalarType::I32 | autobatch::ScalarType::F32 => 4,
        _ => 8,
    };
    (t.len() * width) as u64
}

/// The sampler state of `chains` chains of `dim` parameters (five vectors
/// of `dim` and ten scalars each) and the draws and per-draw figures `run`
/// keeps.
fn chain_state_bytes(dim: usize, chains: usize, run: &SampleRun) -> u64 {
    let state = chains * (5 * dim + 10) * 8;
    let draws: usize = run.samples.iter().map(|s| s.len() * 8).sum();
    // Tree depth, leapfrog steps, acceptance, log density, energy; divergence.
    let per_draw: usize = run.tree_depth.iter().map(|d| d.len() * (5 * 8 + 1)).sum();
    (state + draws + per_draw) as u64
}

/// The process's peak resident set, from `/proc/self/status` (`VmHWM`, in
/// kB); `None` where there is no such file.
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

impl SampleRun {
    /// Draw `draw` of the `k`-th finished chain (chain `chain_ids[k]`).
    pub fn draw(&self, k: usize, draw: usize) -> &[f64] {
        &self.samples[k][draw * self.dim..(draw + 1) * self.dim]
    }
    /// The reported values of draw `draw` of the `k`-th finished chain,
    /// one per column (the constrained parameters, or `theta`).
    pub fn reported(&self, k: usize, draw: usize) -> &[f64] {
        match &self.constrained {
            Some(values) => {
                let width = self.columns.len();
                &values[k][draw * width..(draw + 1) * width]
            }
            None => self.draw(k, draw),
        }
    }
    /// Reported column `i` of every draw of every chain: `[chain][draw]`.
    pub fn column(&self, i: usize) -> Vec<Vec<f64>> {
        match &self.constrained {
            Some(values) => values
                .iter()
                .map(|chain| {
                    chain
                        .iter()
                        .skip(i)
                        .step_by(self.columns.len())
                        .copied()
                        .collect()
                })
                .collect(),
            None => self.coordinate(i),
        }
    }
    /// The summary (mean, quantiles, R-hat, ESS) of every reported
    /// column, in order; computed on first use, the columns in parallel.
    pub fn summaries(&self) -> &[crate::diagnostics::Summary] {
        self.summaries.get_or_init(|| {
            use rayon::prelude::*;
            (0..self.columns.len())
                .into_par_iter()
                .map(|i| crate::diagnostics::summarize(&self.column(i)))
                .collect()
        })
    }
    /// The chains that finished.
    pub fn finished(&self) -> usize {
        self.chain_ids.len()
    }
    /// Coordinate `i` of every draw of every chain: `[chain][draw]`.
    pub fn coordinate(&self, i: usize) -> Vec<Vec<f64>> {
        self.samples
            .iter()
            .map(|chain| chain.iter().skip(i).step_by(self.dim).copied().collect())
            .collect()
    }
    /// The fraction of the leapfrog gradient's batched lanes that some
    /// chain used, over warmup and sampling together.
    pub fn gradient_utilization(&self) -> f64 {
        let (w, s) = (self.warmup_figures, self.sampling_figures);
        PhaseFigures {
            gradient_executions: w.gradient_executions + s.gradient_executions,
            gradient_active_lanes: w.gradient_active_lanes + s.gradient_active_lanes,
            ..PhaseFigures::default()
        }
        .utilization(self.chains)
    }
    /// Leapfrog steps, over every finished chain and both phases, at which
    /// the model faulted.
    pub fn model_faults(&self) -> u64 {
        self.warmup_faults.iter().chain(&self.sampling_faults).sum()
    }
    pub fn divergences(&self) -> u64 {
        self.divergent.iter().flatten().filter(|d| **d).count() as u64
    }
    /// Per finished chain, the E-BFMI of its energies
    /// ([`crate::diagnostics::e_bfmi`]).
    pub fn e_bfmi(&self) -> Vec<f64> {
        self.energy
            .iter()
            .map(|e| crate::diagnostics::e_bfmi(e))
            .collect()
    }

    /// Sampling draws, over the finished chains, whose trajectory reached
    /// the maximum tree depth (Stan's `treedepth__ >= max_depth`).
    pub fn max_depth_hits(&self) -> u64 {
        let limit = i64::from(self.max_depth);
        self.tree_depth
            .iter()
            .flatten()
            .filter(|d| **d >= limit)
            .count() as u64
    }

    pub fn mean_tree_depth(&self) -> f64 {
        let n = self.finished() * self.draws;
        if n == 0 {
            return f64::NAN;
        }
        self.tree_depth.iter().flatten().sum::<i64>() as f64 / n as f64
    }
}

/// The library lines the driver watches, in the combined program.
#[derive(Clone, Copy, Debug)]
struct Markers {
    /// The leapfrog's position update: once per gradient of a trajectory.
    gradient: u32,
    /// `let it = start + k;`: once per iteration.
    iteration: u32,
    /// `da_n += 1.0;`: once per warmup iteration.
    warmup_iteration: u32,
}

/// What the observer saw at one moment of a run (or at its end).
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    at: Duration,
    /// Iterations and warmup iterations done in this run, summed over chains.
    iterations: u64,
    warmup_iterations: u64,
    /// The leapfrog's batched executions, and its active lanes.
    gradient_executions: u64,
    gradient_active_lanes: u64,
}

impl Snapshot {
    fn take(progress: &RunProgress<'_>, markers: &Markers, at: Duration) -> Snapshot {
        let mut snapshot = Snapshot {
            at,
            ..Snapshot::default()
        };
        // Each of these lines has one `add` (operations of the same name at
        // the same place share a count, so it must be the only one).
        for op in progress.op_counts.iter().filter(|op| op.op == "add") {
            if op.loc.line == markers.iteration {
                snapshot.iterations += op.active_lanes;
            } else if op.loc.line == markers.warmup_iteration {
                snapshot.warmup_iterations += op.active_lanes;
            } else if op.loc.line == markers.gradient {
                snapshot.gradient_executions += op.executions;
                snapshot.gradient_active_lanes += op.active_lanes;
            }
        }
        snapshot
    }
}

impl Model {
    /// The line, in the combined program, of the library line that starts
    /// with `text`.
    fn library_line(&self, text: &str) -> u32 {
        let index = crate::model::LIBRARY
            .lines()
            .position(|l| l.trim_start().starts_with(text))
            .unwrap_or_else(|| panic!("the library has the line `{text}`"));
        self.model_lines + index as u32 + 1
    }

    fn markers(&self) -> Markers {
        Markers {
            gradient: self.library_line("let q1 = q + inv_metric * p_half * eps;"),
            iteration: self.library_line("let it = start + k;"),
            warmup_iteration: self.library_line("da_n += 1.0;"),
        }
    }

    /// Runs `batch` on a scoped thread while this one passes what the
    /// observer sees to `watch`.
    fn run_watched(
        &self,
        batch: &BoundBatch,
        config: &RunConfig,
        markers: Markers,
        stop: &Stop,
        watch: &mut dyn FnMut(Snapshot),
    ) -> Result<RunResult, SampleError> {
        let (sender, receiver) = mpsc::channel();
        let began = Instant::now();
        let observed_stop = stop.clone();
        let observer = Observer {
            interval: Duration::from_millis(10),
            callback: Arc::new(move |progress: &RunProgress<'_>| {
                if observed_stop.is_requested() {
                    std::panic::resume_unwind(Box::new(Stopped));
                }
                // The receiver lives until the run ends; a failed send only
                // means nobody watches any more.
                let _ = sender.send(Snapshot::take(progress, &markers, began.elapsed()));
            }),
        };
        std::thread::scope(|scope| {
            let run = std::thread::Builder::new()
                .name("autobatch-sample".into())
                .spawn_scoped(scope, move || batch.run_observed(config, Some(observer)))
                .map_err(|e| SampleError::Run(format!("cannot start a thread: {e}")))?;
            // Ends when the run ends and drops the observer (the sender).
            for snapshot in receiver {
                watch(snapshot);
            }
            match run.join() {
                Ok(result) => result.map_err(|e: RunError| SampleError::Run(e.to_string())),
                Err(panic) if panic.is::<Stopped>() => Err(SampleError::Stopped),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Runs warmup and sampling; `progress` is called before the run, while
    /// it goes, and after it.
    pub fn sample(
        &self,
        config: &SampleConfig,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<SampleRun, SampleError> {
        self.sample_stoppable(config, progress, &Stop::new())
    }

    /// [`Model::sample`], ending early with [`SampleError::Stopped`] once
    /// `stop` is requested (see [`Stop`]).
    pub fn sample_stoppable(
        &self,
        config: &SampleConfig,
        progress: &mut dyn FnMut(Progress),
        stop: &Stop,
    ) -> Result<SampleRun, SampleError> {
        match crate::shard::sample_sharded(&Single, Ok(self), config, progress, stop) {
            Ok(Some(run)) => Ok(run),
            Ok(None) => Err(SampleError::Run(
                "internal error: one process has no result (this is a bug in autobatch)".into(),
            )),
            Err(crate::shard::ShardedError::Sample(e)) => Err(e),
            Err(crate::shard::ShardedError::Rank(failure)) => {
                Err(SampleError::Run(failure.message))
            }
        }
    }
}

/// Why this rank's chains stopped early: an error of its own, or another
/// rank's (learnt at an exchange).
pub(crate) enum Halt {
    Local(SampleError),
    Rank(RankFailure),
}

impl From<SampleError> for Halt {
    fn from(error: SampleError) -> Halt {
        Halt::Local(error)
    }
}

/// This rank's chains after the run, and the run's figures and count.
pub(crate) struct Ran {
    pub chains: Vec<ChainState>,
    pub figures: Figures,
    pub runs: usize,
    /// What the executor said of this rank's last run.
    pub last_run: ExecutorFigures,
}

/// What the executor said of a run: its own figures (`Stats::report`)
/// and, under `auto`, the executor it picked and why (`Stats::choice`).
#[derive(Clone, Debug, Default)]
pub struct ExecutorFigures {
    pub report: Vec<autobatch::ReportField>,
    pub choice: Option<autobatch::StrategyChoice>,
}

impl Sampler<'_> {
    /// Runs warmup and sampling of this rank's chains; under pooled
    /// adaptation the ranks meet at every pooling, through `comm`.
    pub(crate) fn run_chains(
        &self,
        comm: &dyn Communicator,
        progress: &mut dyn FnMut(Progress),
        stop: &Stop,
    ) -> Result<Ran, Halt> {
        let mut chains: Vec<ChainState> = (0..self.chains)
            .map(|_| ChainState::new(self.dim, self.windows, self.config.init.as_deref()))
            .collect();
        let mut figures = Figures::default();
        let mut start = 0;
        let mut runs = 0_u64;
        // Every chain starts with the same windows; pooling then says.
        let mut window_end = ChainState::new(self.dim, self.windows, None).window_end();
        let mut last_run = ExecutorFigures::default();
        progress(Progress {
            done: 0,
            total: self.total,
            warming_up: self.warmup > 0,
        });
        while start < self.total {
            if stop.is_requested() {
                return Err(Halt::Local(SampleError::Stopped));
            }
            let alive = alive_chains(&chains);
            let pooling = self.pool_every.is_some();
            if alive.is_empty() && !pooling {
                break;
            }
            let segment = self.segment(start, window_end, alive.len());
            if !alive.is_empty() {
                let ran = self
                    .run_segment(&chains, &segment, runs, progress, stop)
                    .and_then(|run| {
                        last_run = ExecutorFigures {
                            report: run.result.stats.report.clone(),
                            choice: run.result.stats.choice.clone(),
                        };
                        figures.peak_batch_bytes = figures
                            .peak_batch_bytes
                            .max(run.result.stats.peak_state_bytes);
                        figures.data_bytes = run.data_bytes;
                        let gradients =
                            self.record(&mut chains, run.result.members, segment.recorded)?;
                        figures.add_run(&segment, self.warmup, &run.timing, gradients);
                        Ok(())
                    });
                if let Err(error) = ran {
                    if pooling && segment.end <= self.warmup {
                        // The others wait at the pooling: tell them.
                        let _ = crate::shard::pool_across(comm, Err(error.to_string()), self.dim);
                    }
                    return Err(Halt::Local(error));
                }
            }
            runs += 1;
            if pooling && segment.end <= self.warmup {
                let mine = alive_chains(&chains)
                    .into_iter()
                    .map(|c| chains[c].adaptation())
                    .collect();
                let Some((pooled, first_window_end)) =
                    crate::shard::pool_across(comm, Ok(mine), self.dim).map_err(Halt::Rank)?
                else {
                    break;
                };
                for c in alive_chains(&chains) {
                    chains[c].adopt(&pooled, self.dim);
                }
                window_end = first_window_end;
            }
            start = segment.end;
            progress(Progress {
                done: start,
                total: self.total,
                warming_up: start < self.warmup,
            });
        }
        Ok(Ran {
            chains,
            figures,
            runs: runs as usize,
            last_run,
        })
    }
}

/// The seed of segment `k`: every segment gets its own streams.
pub(crate) fn segment_seed(seed: u64, k: u64) -> u64 {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    splitmix(seed ^ splitmix(k.wrapping_add(1)))
}

/// The chains that have not stopped with an error, by number.
fn alive_chains(chains: &[ChainState]) -> Vec<usize> {
    (0..chains.len())
        .filter(|c| chains[*c].failure.is_none())
        .collect()
}

/// Refuses settings without meaning; returns how often pooled adaptation
/// pools (`None`: each chain adapts alone).
pub(crate) fn check_config(config: &SampleConfig) -> Result<Option<usize>, SampleError> {
    let refuse = |message: &str| Err(SampleError::Config(message.into()));
    if config.chains == 0 {
        return refuse("the number of chains must be at least 1");
    }
    if config.draws == 0 {
        return refuse("the number of draws must be at least 1");
    }
    if config.max_depth == 0 || config.max_depth > 30 {
        return refuse("the maximum tree depth must be between 1 and 30");
    }
    if !(config.target_accept > 0.0 && config.target_accept < 1.0) {
        return refuse("the target acceptance statistic must be in (0, 1)");
    }
    if config
        .warmup
        .checked_add(config.draws)
        .is_none_or(|total| total > MAX_ITERATIONS)
    {
        return Err(SampleError::Config(format!(
            "{} warmup iterations and {} draws make more than {MAX_ITERATIONS} iterations per chain",
            config.warmup, config.draws
        )));
    }
    if config.segment == Some(0) {
        return refuse("a segment must have at least 1 iteration");
    }
    let pool_every = match config.adaptation {
        Adaptation::PerChain => None,
        Adaptation::Pooled { every: 0 } => {
            return refuse("pooled adaptation must pool at least every iteration (every >= 1)")
        }
        Adaptation::Pooled { every } => Some(every),
    };
    config
        .run
        .validate()
        .map_err(|e| SampleError::Config(e.to_string()))?;
    Ok(pool_every)
}

/// The host keeps every chain's state and draws, and the batch holds the
/// draws of its run: refuses a run that cannot fit before allocating any of
/// it (the batch's own run checks its variables again).
fn check_memory(config: &SampleConfig, chains: usize, dim: usize) -> Result<(), SampleError> {
    let per_chain = 8 * (2 * config.draws as u128 * (dim as u128 + 4) + 64 * dim as u128 + 1024);
    let needed = per_chain * chains as u128;
    let available = autobatch::available_memory_bytes() as u128;
    if needed > available {
        return Err(SampleError::Config(format!(
            "{chains} chains of {} draws would need about {} MiB for their state and draws, \
             but only {} MiB of memory is available; run fewer chains or draws",
            config.draws,
            needed >> 20,
            available >> 20
        )));
    }
    Ok(())
}

/// One call of [`Model::sample`]: the model, the checked settings and what
/// stays the same in every run of the batch.
pub(crate) struct Sampler<'a> {
    model: &'a Model,
    config: &'a SampleConfig,
    /// This rank's chains: `chains` of them, the first numbered `first_chain`.
    first_chain: usize,
    chains: usize,
    pub(crate) dim: usize,
    warmup: usize,
    /// Iterations per chain, warmup and sampling.
    total: usize,
    /// With pooled adaptation: the warmup iterations between two poolings.
    pool_every: Option<usize>,
    windows: Windows,
    markers: Markers,
}

/// The iterations `start..end` of every chain, run as one run of the batch.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: usize,
    end: usize,
    /// Its sampling iterations, whose draws are kept.
    recorded: usize,
    /// The chains that run it (those that have not failed).
    alive: usize,
    /// Its warmup iterations, summed over the chains that run it.
    warmup_iterations: u64,
}

/// How long a run took, and when in it warmup ended.
#[derive(Clone, Copy)]
struct Timing {
    /// Binding the inputs and running.
    seconds: Duration,
    /// What the observer saw at the end of the run.
    last: Snapshot,
    /// The first moment every chain was seen past warmup, if that was in this run.
    warmup_end: Option<Snapshot>,
}

/// A finished run of the batch.
struct SegmentRun {
    result: RunResult,
    timing: Timing,
    /// The bytes of the model's data the run was bound with.
    data_bytes: u64,
}

/// The figures of both phases, summed over the runs, and the memory the
/// runs held.
#[derive(Default)]
pub(crate) struct Figures {
    pub warmup: PhaseFigures,
    pub sampling: PhaseFigures,
    /// The bytes of the model's data (its statics).
    pub data_bytes: u64,
    /// The most bytes of per-chain variable storage (columns and value
    /// stacks) a run held at once (`Stats::peak_state_bytes`).
    pub peak_batch_bytes: u64,
}

impl Figures {
    /// Adds the figures of the run of `segment`, split between the phases
    /// where warmup ended.
    fn add_run(&mut self, segment: &Segment, warmup: usize, timing: &Timing, gradients: Gradients) {
        let Timing {
            seconds,
            last,
            warmup_end,
        } = *timing;
        let split = if segment.end <= warmup {
            last
        } else if segment.start >= warmup {
            Snapshot::default()
        } else {
            warmup_end.unwrap_or_else(|| {
                // Too short a run to see warmup end, or members that ran
                // whole (`native`): split by gradients.
                let share =
                    gradients.warmup as f64 / (gradients.warmup + gradients.sampling).max(1) as f64;
                Snapshot {
                    at: seconds.mul_f64(share),
                    gradient_executions: (last.gradient_executions as f64 * share) as u64,
                    gradient_active_lanes: (last.gradient_active_lanes as f64 * share) as u64,
                    ..Snapshot::default()
                }
            })
        };
        let w = &mut self.warmup;
        w.seconds += split.at.as_secs_f64();
        w.gradient_evaluations += gradients.warmup;
        w.gradient_executions += split.gradient_executions;
        w.gradient_active_lanes += split.gradient_active_lanes;
        let s = &mut self.sampling;
        s.seconds += (seconds - split.at.min(seconds)).as_secs_f64();
        s.gradient_evaluations += gradients.sampling;
        s.gradient_executions += last.gradient_executions - split.gradient_executions;
        s.gradient_active_lanes += last.gradient_active_lanes - split.gradient_active_lanes;
    }
}

impl<'a> Sampler<'a> {
    /// The sampler of the chains `chains` (this rank's).
    pub(crate) fn new(
        model: &'a Model,
        config: &'a SampleConfig,
        chains: std::ops::Range<usize>,
    ) -> Result<Sampler<'a>, SampleError> {
        let pool_every = check_config(config)?;
        let dim = model.dim();
        check_memory(config, chains.len(), dim)?;
        if let Some(init) = &config.init {
            if init.len() != dim || init.iter().any(|x| !x.is_finite()) {
                return Err(SampleError::Config(format!(
                    "the initial point must be {dim} finite numbers (the unconstrained parameters); it has {}",
                    init.len()
                )));
            }
        }
        Ok(Sampler {
            model,
            config,
            first_chain: chains.start,
            chains: chains.len(),
            dim,
            warmup: config.warmup,
            total: config.warmup + config.draws,
            pool_every,
            windows: Windows::for_warmup(config.warmup),
            markers: model.markers(),
        })
    }

    /// The segment that starts at iteration `start`, run by `alive` chains
    /// (of this rank), the current adaptation window ending at iteration
    /// `window_end`: to the end, unless segments are asked for, or pooled
    /// adaptation meets at the next window's end.
    fn segment(&self, start: usize, window_end: Option<i64>, alive: usize) -> Segment {
        let (warmup, config) = (self.warmup, self.config);
        let mut end = self.total;
        if let Some(segment) = config.segment {
            end = end.min(start.saturating_add(segment));
        }
        if let Some(every) = self.pool_every.filter(|_| start < warmup) {
            end = end.min(start.saturating_add(every));
            if let Some(next) = window_end {
                if next >= start as i64 {
                    end = end.min((next as usize).saturating_add(1));
                }
            }
        }
        if (config.segment.is_some() || self.pool_every.is_some()) && start < warmup {
            end = end.min(warmup);
        }
        Segment {
            start,
            end,
            recorded: end.saturating_sub(start.max(warmup)),
            alive,
            warmup_iterations: (warmup.min(end).saturating_sub(start) * alive) as u64,
        }
    }

    /// Binds and runs `segment` as run number `run` (which picks its random
    /// streams), passing the progress the observer sees to `progress`.
    fn run_segment(
        &self,
        chains: &[ChainState],
        segment: &Segment,
        run: u64,
        progress: &mut dyn FnMut(Progress),
        stop: &Stop,
    ) -> Result<SegmentRun, SampleError> {
        let began = Instant::now();
        let batch = self.bind(chains, segment)?;
        let data_bytes = batch.env().statics.iter().map(tensor_bytes).sum();
        let run_config = RunConfig {
            options: autobatch::RunOptions {
                seed: segment_seed(self.config.run.options.seed, run),
                max_steps: u64::MAX,
                // A chain's run is long: `auto` compiles at once.
                auto_trial: false,
                // A chain is one member, which native code runs to its end
                // unless it looks at the interrupt as it goes: so it stops
                // at the caller's Ctrl-C, or when the observer stops the
                // run (`Stop`), and shows the iterations as they are done.
                interrupt: Some(
                    (self.config.run.options.interrupt.clone())
                        .unwrap_or_default()
                        .within_members(),
                ),
                ..self.config.run.clone().options
            },
            ..self.config.run.clone()
        };
        let mut warmup_end: Option<Snapshot> = None;
        let mut shown = segment.start;
        // A snapshot that sees warmup end but no sampling left saw no
        // boundary: the phases' seconds are then split by gradients. So
        // they are under a strategy whose chains do not advance together
        // (the native ones run them one after the other on each thread:
        // the last chain ends warmup near the end of the run).
        let together = batch.strategy_for(&run_config).advances_members_together();
        let iterations = (segment.alive * (segment.end - segment.start)) as u64;
        let result =
            self.model
                .run_watched(&batch, &run_config, self.markers, stop, &mut |snapshot| {
                    if together
                        && warmup_end.is_none()
                        && segment.warmup_iterations > 0
                        && snapshot.warmup_iterations >= segment.warmup_iterations
                        && snapshot.iterations < iterations
                    {
                        warmup_end = Some(snapshot);
                    }
                    let per_chain = (snapshot.iterations / segment.alive.max(1) as u64) as usize;
                    let done = (segment.start + per_chain).min(segment.end);
                    if done != shown {
                        shown = done;
                        progress(Progress {
                            done,
                            total: self.total,
                            warming_up: snapshot.warmup_iterations < segment.warmup_iterations,
                        });
                    }
                })?;
        let seconds = began.elapsed();
        let last = Snapshot::take(
            &RunProgress {
                steps: result.stats.steps,
                members_done: result.members.len() as u64,
                op_counts: &result.stats.op_counts,
            },
            &self.markers,
            seconds,
        );
        Ok(SegmentRun {
            data_bytes,
            result,
            timing: Timing {
                seconds,
                last,
                warmup_end,
            },
        })
    }

    /// The batch of `segment`: the model's data, every chain's state, and
    /// the settings.
    fn bind(&self, chains: &[ChainState], segment: &Segment) -> Result<BoundBatch, SampleError> {
        let mut inputs = autobatch::Inputs::new();
        for (k, name) in STATE.iter().enumerate() {
            inputs = inputs.batched(name, chains.iter().map(|c| c.state[k].clone()));
        }
        let recorded = segment.recorded.max(1);
        let windows = self.windows;
        inputs = inputs
            .shared("nuts_start", segment.start as i64)
            .shared("nuts_n_iter", (segment.end - segment.start) as i64)
            .shared("nuts_num_warmup", self.warmup as i64)
            .shared("nuts_max_depth", i64::from(self.config.max_depth))
            .shared("nuts_target_accept", self.config.target_accept)
            .shared("nuts_init_buffer", windows.init_buffer)
            .shared("nuts_term_buffer", windows.term_buffer)
            .shared("nuts_base_window", windows.base_window)
            .shared("nuts_pooled", self.pool_every.is_some())
            .shared("nuts_init_given", self.config.init.is_some())
            .shared(
                "nuts_recorded",
                Value::Tensor(Tensor {
                    shape: vec![recorded],
                    data: Data::Bool(vec![false; recorded]),
                }),
            );
        self.model
            .bound
            .bind("nuts_segment", &inputs)
            .map(|batch| batch.numbered_from(self.first_chain as u64))
            .map_err(|e| {
                SampleError::Data(format!("the data does not fit the model: {}", e.message()))
            })
    }

    /// Takes in every chain's result of a run whose first `recorded`
    /// iterations are sampling ones: a chain that failed before is
    /// ignored, one that fails now is marked. Returns the gradients the
    /// chains computed.
    fn record(
        &self,
        chains: &mut [ChainState],
        members: Vec<Result<Value, MemberError>>,
        recorded: usize,
    ) -> Result<Gradients, SampleError> {
        let mut gradients = Gradients::default();
        for (number, (chain, member)) in chains.iter_mut().zip(members).enumerate() {
            if chain.failure.is_some() {
                continue;
            }
            match member {
                Ok(value) => {
                    let g = chain.record(value, recorded, self.dim)?;
                    gradients.warmup += g.warmup;
                    gradients.sampling += g.sampling;
                }
                Err(e) => {
                    let message = match e.kind {
                        autobatch::ErrorKind::Interrupted => {
                            "sampling was interrupted (Ctrl-C) before this chain finished".into()
                        }
                        _ => e.message,
                    };
                    chain.failure = Some(ChainFailure {
                        chain: self.first_chain + number,
                        kind: e.kind.name().to_string(),
                        location: self.model.describe_loc(e.loc.line, e.loc.column),
                        message,
                    });
                }
            }
        }
        Ok(gradients)
    }

    /// The run's result from every chain's outcome, in chain order: the
    /// finished chains' draws and figures; an error when every chain failed.
    pub(crate) fn finish(
        &self,
        outcomes: Vec<ChainOutcome>,
        figures: Figures,
        runs: usize,
        last_run: ExecutorFigures,
    ) -> Result<SampleRun, SampleError> {
        let n_chains = outcomes.len();
        let Outcomes {
            failures,
            chain_ids,
            finished,
        } = Outcomes::sort(outcomes);
        if chain_ids.is_empty() {
            let first = &failures[0];
            return Err(SampleError::Chain(if n_chains == 1 {
                first.to_string()
            } else {
                format!("every chain stopped with an error; the first: {first}")
            }));
        }
        let mut run = SampleRun {
            dim: self.dim,
            chains: n_chains,
            warmup: self.warmup,
            draws: self.config.draws,
            max_depth: self.config.max_depth,
            chain_ids,
            failures,
            runs,
            executor_report: last_run.report,
            strategy_choice: last_run.choice,
            samples: Vec::with_capacity(finished.len()),
            variables: vec![Variable {
                name: "theta".into(),
                shape: vec![self.dim],
            }],
            columns: (0..self.dim).map(|i| format!("theta[{i}]")).collect(),
            constrained: None,
            tree_depth: Vec::with_capacity(finished.len()),
            n_leapfrog: Vec::with_capacity(finished.len()),
            divergent: Vec::with_capacity(finished.len()),
            accept_stat: Vec::with_capacity(finished.len()),
            log_density: Vec::with_capacity(finished.len()),
            energy: Vec::with_capacity(finished.len()),
            warmup_divergences: Vec::with_capacity(finished.len()),
            warmup_faults: Vec::with_capacity(finished.len()),
            sampling_faults: Vec::with_capacity(finished.len()),
            step_size: Vec::with_capacity(finished.len()),
            inv_metric: Vec::with_capacity(finished.len()),
            warmup_figures: figures.warmup,
            sampling_figures: figures.sampling,
            memory: MemoryFigures::default(),
            summaries: std::sync::OnceLock::new(),
        };
        for chain in finished {
            push_chain(&mut run, chain);
        }
        self.name_parameters(&mut run)?;
        run.memory = MemoryFigures {
            data_bytes: figures.data_bytes,
            chain_state_bytes: chain_state_bytes(self.dim, n_chains, &run),
            peak_batch_bytes: figures.peak_batch_bytes,
            peak_resident_bytes: peak_resident_bytes(),
        };
        Ok(run)
    }

    /// The draws of a model with declared parameters as those parameters
    /// and its transformed parameters and generated quantities: their
    /// names, shapes and columns, and the draws on their constrained scale
    /// (a model without them keeps `theta`).
    fn name_parameters(&self, run: &mut SampleRun) -> Result<(), SampleError> {
        if self.model.parameters().is_none() {
            return Ok(());
        }
        let constrained = crate::constrained::constrain_draws(
            self.model,
            &run.samples,
            &run.chain_ids,
            self.dim,
            &self.config.run.options,
        )?;
        run.columns = crate::constrained::column_names(&constrained.variables);
        run.variables = constrained.variables;
        run.constrained = Some(constrained.values);
        Ok(())
    }
}

/// The chains' outcomes sorted into the failures and the finished chains
/// (with their numbers), each in chain order.
struct Outcomes {
    failures: Vec<ChainFailure>,
    chain_ids: Vec<usize>,
    finished: Vec<FinishedChain>,
}

impl Outcomes {
    fn sort(outcomes: Vec<ChainOutcome>) -> Outcomes {
        let mut sorted = Outcomes {
            failures: Vec::new(),
            chain_ids: Vec::new(),
            finished: Vec::new(),
        };
        for (number, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                ChainOutcome::Failed(failure) => sorted.failures.push(failure),
                ChainOutcome::Finished(chain) => {
                    sorted.chain_ids.push(number);
                    sorted.finished.push(*chain);
                }
            }
        }
        sorted
    }
}

/// Appends a finished chain's draws and figures to `run`'s per-chain lists.
fn push_chain(run: &mut SampleRun, chain: FinishedChain) {
    run.step_size.push(chain.step_size);
    run.inv_metric.push(chain.inv_metric);
    run.samples.push(chain.samples);
    run.tree_depth.push(chain.tree_depth);
    run.n_leapfrog.push(chain.n_leapfrog);
    run.divergent.push(chain.divergent);
    run.accept_stat.push(chain.accept_stat);
    run.log_density.push(chain.log_density);
    run.energy.push(chain.energy);
    run.warmup_divergences.push(chain.warmup_divergences);
    run.warmup_faults.push(chain.warmup_faults);
    run.sampling_faults.push(chain.sampling_faults);
}
