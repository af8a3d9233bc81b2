//! Running the chains: all of them as one batch, warmup and sampling in
//! one run of it, so that no chain ever waits for another. Only pooled
//! adaptation (which a user asks for) and benchmarks that imitate samplers
//! synchronising per trajectory run the batch in segments, the chains' state
//! passing from one run to the next as batched inputs.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use autobatch::{BoundBatch, Observer, RunConfig, RunError, RunProgress, RunResult, Tensor, Value};
use autobatch_types::{Data, Scalar};

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

impl Default for SampleConfig {
    /// Stan's defaults: 4 chains, 1000 warmup iterations, 1000 draws,
    /// depth 10, target 0.8; the program-counter strategy and seed 0.
    fn default() -> Self {
        SampleConfig {
            chains: 4,
            warmup: 1000,
            draws: 1000,
            max_depth: 10,
            target_accept: 0.8,
            run: RunConfig::default(),
            adaptation: Adaptation::PerChain,
            segment: None,
        }
    }
}

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
    /// The chains that finished, by number: every chain but the failed ones.
    pub chain_ids: Vec<usize>,
    /// The chains that stopped with an error, by chain number.
    pub failures: Vec<ChainFailure>,
    /// Runs of the batch: 1 unless adaptation is pooled or segments are set.
    pub runs: usize,
    /// Per finished chain, the draws row after row: `samples[k][draw * dim + i]`.
    pub samples: Vec<Vec<f64>>,
    /// Per chain and draw (sampling only): tree depth, leapfrog steps,
    /// divergence, acceptance statistic, log density.
    pub tree_depth: Vec<Vec<i64>>,
    pub n_leapfrog: Vec<Vec<i64>>,
    pub divergent: Vec<Vec<bool>>,
    pub accept_stat: Vec<Vec<f64>>,
    pub log_density: Vec<Vec<f64>>,
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
    /// Every parameter's summary, computed once when first asked for.
    summaries: std::sync::OnceLock<Vec<crate::diagnostics::Summary>>,
}

impl SampleRun {
    /// Draw `draw` of the `k`-th finished chain (chain `chain_ids[k]`).
    pub fn draw(&self, k: usize, draw: usize) -> &[f64] {
        &self.samples[k][draw * self.dim..(draw + 1) * self.dim]
    }
    /// The summary (mean, quantiles, R-hat, ESS) of every parameter, in
    /// order; computed on first use, the parameters in parallel.
    pub fn summaries(&self) -> &[crate::diagnostics::Summary] {
        self.summaries.get_or_init(|| {
            use rayon::prelude::*;
            (0..self.dim)
                .into_par_iter()
                .map(|i| crate::diagnostics::summarize(&self.coordinate(i)))
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
    pub fn mean_tree_depth(&self) -> f64 {
        let n = self.finished() * self.draws;
        if n == 0 {
            return f64::NAN;
        }
        self.tree_depth.iter().flatten().sum::<i64>() as f64 / n as f64
    }
}

/// The names of the entry's state parameters, in the order of the state
/// tuple the entry returns.
const STATE: [&str; 15] = [
    "nuts_q",
    "nuts_lp",
    "nuts_g",
    "nuts_eps",
    "nuts_inv_metric",
    "nuts_mu",
    "nuts_s_bar",
    "nuts_x_bar",
    "nuts_da_n",
    "nuts_w_n",
    "nuts_w_mean",
    "nuts_w_m2",
    "nuts_win_size",
    "nuts_win_next",
    "nuts_restart",
];
const EPS: usize = 3;
const INV_METRIC: usize = 4;
const MU: usize = 5;
const S_BAR: usize = 6;
const X_BAR: usize = 7;
const W_N: usize = 9;
const W_MEAN: usize = 10;
const W_M2: usize = 11;
const WIN_NEXT: usize = 13;
const RESTART: usize = 14;

/// The seed of segment `k`: every segment gets its own streams.
fn segment_seed(seed: u64, k: u64) -> u64 {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    splitmix(seed ^ splitmix(k.wrapping_add(1)))
}

/// Stan's warmup windows for `warmup` iterations: (initial buffer, terminal
/// buffer, first window), shrunk to 15% / 10% / the rest when the defaults
/// 75 / 50 / 25 do not fit.
pub fn window_params(warmup: usize) -> (i64, i64, i64) {
    let (mut init, mut term, mut base) = (75_i64, 50_i64, 25_i64);
    let n = warmup as i64;
    if warmup >= 20 && init + term + base > n {
        init = (0.15 * warmup as f64) as i64;
        term = (0.1 * warmup as f64) as i64;
        base = n - (init + term);
    }
    (init, term, base)
}

fn f64s(t: &Tensor) -> Result<&[f64], SampleError> {
    match &t.data {
        Data::F64(v) => Ok(v),
        _ => Err(SampleError::Run(
            "internal error: the sampler returned a value of an unexpected type".into(),
        )),
    }
}

fn i64s(t: &Tensor) -> Result<&[i64], SampleError> {
    match &t.data {
        Data::I64(v) => Ok(v),
        _ => Err(SampleError::Run(
            "internal error: the sampler returned a value of an unexpected type".into(),
        )),
    }
}

fn bools(t: &Tensor) -> Result<&[bool], SampleError> {
    match &t.data {
        Data::Bool(v) => Ok(v),
        _ => Err(SampleError::Run(
            "internal error: the sampler returned a value of an unexpected type".into(),
        )),
    }
}

/// The rows of `per_chain` of the chains `ids` (sorted).
fn keep_chains<T>(per_chain: Vec<Vec<T>>, ids: &[usize]) -> Vec<Vec<T>> {
    per_chain
        .into_iter()
        .enumerate()
        .filter(|(c, _)| ids.binary_search(c).is_ok())
        .map(|(_, x)| x)
        .collect()
}

/// Appends the first `n` of `values` to `to`, moving them when `to` is empty.
/// What one chain's run of `nuts_segment` returns (see its doc in
/// `nuts.ab`): the state to go on from, per sampling iteration of the run
/// (padded to the library's `NUTS_REC`) the draw and its figures, and the
/// run's counts.
struct SegmentOutput {
    state: Vec<Value>,
    draws: Vec<f64>,
    depths: Vec<i64>,
    leapfrogs: Vec<i64>,
    divergent: Vec<bool>,
    accept_stats: Vec<f64>,
    log_densities: Vec<f64>,
    counts: SegmentCounts,
}

/// The counts `nuts_segment` returns last, in its order.
struct SegmentCounts {
    warmup_leapfrogs: i64,
    warmup_divergences: i64,
    other_gradients: i64,
    warmup_faults: i64,
    sampling_faults: i64,
}

impl SegmentOutput {
    fn read(value: Value) -> Result<SegmentOutput, SampleError> {
        let internal = |what: &str| {
            SampleError::Run(format!(
                "internal error: the sampler returned {what} (this is a bug in autobatch)"
            ))
        };
        let Value::Tuple(mut parts) = value else {
            return Err(internal("no tuple"));
        };
        if parts.len() != 8 {
            return Err(internal("a tuple of the wrong length"));
        }
        let counts: Vec<Tensor> = parts.pop().expect("8 parts").flatten();
        let per_iteration: Vec<Tensor> = parts
            .split_off(1)
            .into_iter()
            .flat_map(Value::flatten)
            .collect();
        let Value::Tuple(state) = parts.pop().expect("the state") else {
            return Err(internal("a state that is no tuple"));
        };
        if state.len() != STATE.len() {
            return Err(internal("a state of the wrong length"));
        }
        let [draws, depths, leapfrogs, divergent, accepts, lps] =
            <[Tensor; 6]>::try_from(per_iteration)
                .map_err(|_| internal("draws of the wrong form"))?;
        let counts =
            <[Tensor; 5]>::try_from(counts).map_err(|_| internal("counts of the wrong form"))?;
        let count = |k: usize| -> Result<i64, SampleError> {
            i64s(&counts[k])?
                .first()
                .copied()
                .ok_or_else(|| internal("an empty count"))
        };
        Ok(SegmentOutput {
            state,
            draws: into_f64s(draws)?,
            depths: i64s(&depths)?.to_vec(),
            leapfrogs: i64s(&leapfrogs)?.to_vec(),
            divergent: bools(&divergent)?.to_vec(),
            accept_stats: f64s(&accepts)?.to_vec(),
            log_densities: f64s(&lps)?.to_vec(),
            counts: SegmentCounts {
                warmup_leapfrogs: count(0)?,
                warmup_divergences: count(1)?,
                other_gradients: count(2)?,
                warmup_faults: count(3)?,
                sampling_faults: count(4)?,
            },
        })
    }
}

fn append(to: &mut Vec<f64>, mut values: Vec<f64>, n: usize) {
    values.truncate(n);
    if to.is_empty() {
        *to = values;
    } else {
        to.extend_from_slice(&values);
    }
}

fn into_f64s(t: Tensor) -> Result<Vec<f64>, SampleError> {
    match t.data {
        Data::F64(v) => Ok(v),
        _ => Err(SampleError::Run(
            "internal error: the sampler returned a value of an unexpected type".into(),
        )),
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

/// The scalar a state value holds (`None` for an array or a tuple).
fn scalar(value: &Value) -> Option<Scalar> {
    match value {
        Value::Tensor(t) if t.is_scalar() => Some(t.as_scalar()),
        _ => None,
    }
}

fn scalar_f64(value: &Value) -> f64 {
    match scalar(value) {
        Some(Scalar::F64(x)) => x,
        _ => f64::NAN,
    }
}

fn scalar_i64(value: &Value) -> Option<i64> {
    match scalar(value) {
        Some(Scalar::I64(x)) => Some(x),
        _ => None,
    }
}

fn vector_f64(value: &Value) -> &[f64] {
    match value {
        Value::Tensor(Tensor {
            data: Data::F64(v), ..
        }) => v,
        _ => &[],
    }
}

fn scalar_value(x: Scalar) -> Value {
    Value::Tensor(Tensor::scalar(x))
}

fn vector_value(x: Vec<f64>) -> Value {
    Value::Tensor(Tensor::new(vec![x.len()], Data::F64(x)))
}

/// Pooled adaptation, between two warmup segments: every chain in `alive`
/// gets the same step size (the geometric mean of theirs) and the mean of
/// their dual averaging states; after a window's end, also the same metric,
/// from all their draws of the window (Welford states combined in chain
/// order), regularized as Stan regularizes one chain's.
fn pool(state: &mut [Vec<Value>], alive: &[usize], dim: usize) {
    let n = alive.len() as f64;
    let mean_of = |k: usize, f: &dyn Fn(f64) -> f64| {
        alive
            .iter()
            .map(|&c| f(scalar_f64(&state[k][c])))
            .sum::<f64>()
            / n
    };
    let eps = mean_of(EPS, &f64::ln).exp();
    let mu = mean_of(MU, &|x| x);
    let s_bar = mean_of(S_BAR, &|x| x);
    let x_bar = mean_of(X_BAR, &|x| x);
    let window_ended = scalar(&state[RESTART][alive[0]]) == Some(Scalar::Bool(true));
    let metric = window_ended.then(|| {
        let (mut count, mut mean, mut m2) = (0.0_f64, vec![0.0; dim], vec![0.0; dim]);
        for &c in alive {
            let n_b = scalar_i64(&state[W_N][c]).unwrap_or(0) as f64;
            if n_b == 0.0 {
                continue;
            }
            let (mean_b, m2_b) = (vector_f64(&state[W_MEAN][c]), vector_f64(&state[W_M2][c]));
            let total = count + n_b;
            for i in 0..dim {
                let delta = mean_b[i] - mean[i];
                mean[i] += delta * n_b / total;
                m2[i] += m2_b[i] + delta * delta * count * n_b / total;
            }
            count = total;
        }
        m2.iter()
            .map(|m2| {
                let var = m2 / (count - 1.0);
                var * (count / (count + 5.0)) + 1.0e-3 * (5.0 / (count + 5.0))
            })
            .collect::<Vec<f64>>()
    });
    for &c in alive {
        state[EPS][c] = scalar_value(Scalar::F64(eps));
        state[MU][c] = scalar_value(Scalar::F64(mu));
        state[S_BAR][c] = scalar_value(Scalar::F64(s_bar));
        state[X_BAR][c] = scalar_value(Scalar::F64(x_bar));
        if let Some(metric) = &metric {
            state[INV_METRIC][c] = vector_value(metric.clone());
            state[W_N][c] = scalar_value(Scalar::I64(0));
            state[W_MEAN][c] = vector_value(vec![0.0; dim]);
            state[W_M2][c] = vector_value(vec![0.0; dim]);
        }
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

    /// The line (in the combined program) of the leapfrog's position update,
    /// whose operations run exactly once per gradient of a trajectory.
    pub fn gradient_marker_line(&self) -> u32 {
        self.library_line("let q1 = q + inv_metric * p_half * eps;")
    }

    fn markers(&self) -> Markers {
        Markers {
            gradient: self.gradient_marker_line(),
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
        watch: &mut dyn FnMut(Snapshot),
    ) -> Result<RunResult, RunError> {
        let (sender, receiver) = mpsc::channel();
        let began = Instant::now();
        let observer = Observer {
            interval: Duration::from_millis(10),
            callback: Arc::new(move |progress: &RunProgress<'_>| {
                // The receiver lives until the run ends; a failed send only
                // means nobody watches any more.
                let _ = sender.send(Snapshot::take(progress, &markers, began.elapsed()));
            }),
        };
        std::thread::scope(|scope| {
            let run = std::thread::Builder::new()
                .name("autobatch-sample".into())
                .spawn_scoped(scope, move || batch.run_observed(config, Some(observer)))
                .map_err(|e| RunError::Resources(format!("cannot start a thread: {e}")))?;
            // Ends when the run ends and drops the observer (the sender).
            for snapshot in receiver {
                watch(snapshot);
            }
            match run.join() {
                Ok(result) => result,
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
        if config.chains == 0 {
            return Err(SampleError::Config(
                "the number of chains must be at least 1".into(),
            ));
        }
        if config.draws == 0 {
            return Err(SampleError::Config(
                "the number of draws must be at least 1".into(),
            ));
        }
        if config.max_depth == 0 || config.max_depth > 30 {
            return Err(SampleError::Config(
                "the maximum tree depth must be between 1 and 30".into(),
            ));
        }
        if !(config.target_accept > 0.0 && config.target_accept < 1.0) {
            return Err(SampleError::Config(
                "the target acceptance statistic must be in (0, 1)".into(),
            ));
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
            return Err(SampleError::Config(
                "a segment must have at least 1 iteration".into(),
            ));
        }
        let pool_every = match config.adaptation {
            Adaptation::PerChain => None,
            Adaptation::Pooled { every: 0 } => {
                return Err(SampleError::Config(
                    "pooled adaptation must pool at least every iteration (every >= 1)".into(),
                ))
            }
            Adaptation::Pooled { every } => Some(every),
        };
        config
            .run
            .validate()
            .map_err(|e| SampleError::Config(e.to_string()))?;
        let dim = self.dim();
        let chains = config.chains;
        // The host keeps every chain's state and draws, and the batch holds
        // the draws of its run: refuse a run that cannot fit before
        // allocating any of it (the batch's own run checks its variables again).
        let per_chain =
            8 * (2 * config.draws as u128 * (dim as u128 + 4) + 64 * dim as u128 + 1024);
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
        let (init_buffer, term_buffer, base_window) = window_params(config.warmup);

        // The state before iteration 0 (which draws the initial point).
        let initial: Vec<Value> = vec![
            vector_value(vec![0.0; dim]),
            scalar_value(Scalar::F64(0.0)),
            vector_value(vec![0.0; dim]),
            scalar_value(Scalar::F64(1.0)),
            vector_value(vec![1.0; dim]),
            scalar_value(Scalar::F64(0.0)),
            scalar_value(Scalar::F64(0.0)),
            scalar_value(Scalar::F64(0.0)),
            scalar_value(Scalar::F64(0.0)),
            scalar_value(Scalar::I64(0)),
            vector_value(vec![0.0; dim]),
            vector_value(vec![0.0; dim]),
            scalar_value(Scalar::I64(base_window)),
            scalar_value(Scalar::I64(init_buffer + base_window - 1)),
            scalar_value(Scalar::Bool(false)),
        ];
        // state[k][chain]
        let mut state: Vec<Vec<Value>> = initial.into_iter().map(|v| vec![v; chains]).collect();

        let warmup = config.warmup;
        let total = warmup + config.draws;
        let mut samples = vec![Vec::new(); chains];
        let mut tree_depth = vec![Vec::new(); chains];
        let mut n_leapfrog = vec![Vec::new(); chains];
        let mut divergent = vec![Vec::new(); chains];
        let mut accept_stat = vec![Vec::new(); chains];
        let mut log_density = vec![Vec::new(); chains];
        let mut warmup_divergences = vec![0_u64; chains];
        let mut warmup_faults = vec![0_u64; chains];
        let mut sampling_faults = vec![0_u64; chains];
        let mut failures: Vec<Option<ChainFailure>> = vec![None; chains];
        let mut warmup_figures = PhaseFigures::default();
        let mut sampling_figures = PhaseFigures::default();
        let markers = self.markers();

        let mut start = 0;
        let mut runs = 0_u64;
        progress(Progress {
            done: 0,
            total,
            warming_up: warmup > 0,
        });
        while start < total {
            let alive: Vec<usize> = (0..chains).filter(|c| failures[*c].is_none()).collect();
            let Some(&first_alive) = alive.first() else {
                break;
            };
            // Where this run ends: the end, unless segments are asked for,
            // or pooled adaptation meets at the next window's end.
            let mut end = total;
            if let Some(segment) = config.segment {
                end = end.min(start.saturating_add(segment));
            }
            if let Some(every) = pool_every.filter(|_| start < warmup) {
                end = end.min(start.saturating_add(every));
                if let Some(next) = scalar_i64(&state[WIN_NEXT][first_alive]) {
                    if next >= start as i64 {
                        end = end.min((next as usize).saturating_add(1));
                    }
                }
            }
            if (config.segment.is_some() || pool_every.is_some()) && start < warmup {
                end = end.min(warmup);
            }
            let recorded = end.saturating_sub(start.max(warmup));
            let warmup_here = (warmup.min(end).saturating_sub(start) * alive.len()) as u64;

            let began = Instant::now();
            let mut inputs = self.statics.clone();
            for (name, values) in STATE.iter().zip(&state) {
                inputs = inputs.batched(name, values.iter().cloned());
            }
            inputs = inputs
                .shared("nuts_start", start as i64)
                .shared("nuts_n_iter", (end - start) as i64)
                .shared("nuts_num_warmup", warmup as i64)
                .shared("nuts_max_depth", i64::from(config.max_depth))
                .shared("nuts_target_accept", config.target_accept)
                .shared("nuts_init_buffer", init_buffer)
                .shared("nuts_term_buffer", term_buffer)
                .shared("nuts_base_window", base_window)
                .shared("nuts_pooled", pool_every.is_some())
                .shared(
                    "nuts_recorded",
                    Value::Tensor(Tensor {
                        shape: vec![recorded.max(1)],
                        data: Data::Bool(vec![false; recorded.max(1)]),
                    }),
                );
            let batch = self.compiled.bind("nuts_segment", &inputs).map_err(|e| {
                SampleError::Data(format!("the data does not fit the model: {}", e.message()))
            })?;
            let run_config = RunConfig {
                seed: segment_seed(config.run.seed, runs),
                max_steps: u64::MAX,
                ..config.run.clone()
            };
            // When warmup ends in this run: the first moment every chain was
            // seen past it.
            let mut warmup_end: Option<Snapshot> = None;
            let mut shown = start;
            let result = self
                .run_watched(&batch, &run_config, markers, &mut |snapshot| {
                    if warmup_end.is_none()
                        && warmup_here > 0
                        && snapshot.warmup_iterations >= warmup_here
                    {
                        warmup_end = Some(snapshot);
                    }
                    let done =
                        (start + (snapshot.iterations / alive.len() as u64) as usize).min(end);
                    if done != shown {
                        shown = done;
                        progress(Progress {
                            done,
                            total,
                            warming_up: snapshot.warmup_iterations < warmup_here,
                        });
                    }
                })
                .map_err(|e| SampleError::Run(e.to_string()))?;
            runs += 1;
            let seconds = began.elapsed();
            let last = Snapshot::take(
                &RunProgress {
                    steps: result.stats.steps,
                    op_counts: &result.stats.op_counts,
                },
                &markers,
                seconds,
            );

            let (mut warmup_grads, mut sampling_grads) = (0_u64, 0_u64);
            for (chain, member) in result.members.into_iter().enumerate() {
                if failures[chain].is_some() {
                    continue;
                }
                let value = match member {
                    Ok(value) => value,
                    Err(e) => {
                        failures[chain] = Some(ChainFailure {
                            chain,
                            kind: e.kind.name().to_string(),
                            location: self.describe_loc(e.loc.line, e.loc.column),
                            message: e.message,
                        });
                        continue;
                    }
                };
                let out = SegmentOutput::read(value)?;
                let recorded_leapfrogs = &out.leapfrogs[..recorded];
                append(&mut samples[chain], out.draws, recorded * dim);
                tree_depth[chain].extend_from_slice(&out.depths[..recorded]);
                n_leapfrog[chain].extend_from_slice(recorded_leapfrogs);
                divergent[chain].extend_from_slice(&out.divergent[..recorded]);
                accept_stat[chain].extend_from_slice(&out.accept_stats[..recorded]);
                log_density[chain].extend_from_slice(&out.log_densities[..recorded]);
                sampling_grads += recorded_leapfrogs.iter().sum::<i64>() as u64;
                let counts = out.counts;
                warmup_grads += (counts.warmup_leapfrogs + counts.other_gradients) as u64;
                warmup_divergences[chain] += counts.warmup_divergences as u64;
                warmup_faults[chain] += counts.warmup_faults as u64;
                sampling_faults[chain] += counts.sampling_faults as u64;
                for (k, v) in out.state.into_iter().enumerate() {
                    state[k][chain] = v;
                }
            }

            // The run's figures, split between the phases where warmup ended.
            let split = if end <= warmup {
                last
            } else if start >= warmup {
                Snapshot::default()
            } else {
                warmup_end.unwrap_or_else(|| {
                    // Too short a run to see warmup end: split by gradients.
                    let share = warmup_grads as f64 / (warmup_grads + sampling_grads).max(1) as f64;
                    Snapshot {
                        at: seconds.mul_f64(share),
                        gradient_executions: (last.gradient_executions as f64 * share) as u64,
                        gradient_active_lanes: (last.gradient_active_lanes as f64 * share) as u64,
                        ..Snapshot::default()
                    }
                })
            };
            warmup_figures.seconds += split.at.as_secs_f64();
            warmup_figures.gradient_evaluations += warmup_grads;
            warmup_figures.gradient_executions += split.gradient_executions;
            warmup_figures.gradient_active_lanes += split.gradient_active_lanes;
            sampling_figures.seconds += (seconds - split.at.min(seconds)).as_secs_f64();
            sampling_figures.gradient_evaluations += sampling_grads;
            sampling_figures.gradient_executions +=
                last.gradient_executions - split.gradient_executions;
            sampling_figures.gradient_active_lanes +=
                last.gradient_active_lanes - split.gradient_active_lanes;

            if pool_every.is_some() && end <= warmup {
                let alive: Vec<usize> = (0..chains).filter(|c| failures[*c].is_none()).collect();
                if !alive.is_empty() {
                    pool(&mut state, &alive, dim);
                }
            }
            start = end;
            progress(Progress {
                done: start,
                total,
                warming_up: start < warmup,
            });
        }

        let chain_ids: Vec<usize> = (0..chains).filter(|c| failures[*c].is_none()).collect();
        let failures: Vec<ChainFailure> = failures.into_iter().flatten().collect();
        if chain_ids.is_empty() {
            let first = &failures[0];
            return Err(SampleError::Chain(if chains == 1 {
                first.to_string()
            } else {
                format!("every chain stopped with an error; the first: {first}")
            }));
        }
        let step_size = chain_ids
            .iter()
            .map(|&c| scalar_f64(&state[EPS][c]))
            .collect();
        let inv_metric = chain_ids
            .iter()
            .map(|&c| vector_f64(&state[INV_METRIC][c]).to_vec())
            .collect();
        Ok(SampleRun {
            dim,
            chains,
            warmup,
            draws: config.draws,
            samples: keep_chains(samples, &chain_ids),
            tree_depth: keep_chains(tree_depth, &chain_ids),
            n_leapfrog: keep_chains(n_leapfrog, &chain_ids),
            divergent: keep_chains(divergent, &chain_ids),
            accept_stat: keep_chains(accept_stat, &chain_ids),
            log_density: keep_chains(log_density, &chain_ids),
            warmup_divergences: chain_ids.iter().map(|&c| warmup_divergences[c]).collect(),
            warmup_faults: chain_ids.iter().map(|&c| warmup_faults[c]).collect(),
            sampling_faults: chain_ids.iter().map(|&c| sampling_faults[c]).collect(),
            step_size,
            inv_metric,
            warmup_figures,
            sampling_figures,
            chain_ids,
            failures,
            runs: runs as usize,
            summaries: std::sync::OnceLock::new(),
        })
    }
}
