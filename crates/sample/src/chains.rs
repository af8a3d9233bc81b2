//! The chains between two runs of the batch: the layout of the sampler's
//! state (the tuple `nuts_segment` takes and returns, see `nuts.ab`), what
//! each chain has drawn so far, reading a run's output into it, and pooled
//! adaptation.

use autobatch::{Tensor, Value};
use autobatch_types::{Data, Scalar};

use crate::driver::ChainFailure;
use crate::model::SampleError;

/// The names of the entry's state parameters, in the order of the state
/// tuple the entry returns.
pub(crate) const STATE: [&str; 15] = [
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

/// Stan's warmup windows for a number of warmup iterations.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Windows {
    pub init_buffer: i64,
    pub term_buffer: i64,
    /// The first adaptation window (each next one is twice as long).
    pub base_window: i64,
}

impl Windows {
    /// The defaults 75 / 50 / 25, shrunk to 15% / 10% / the rest when they
    /// do not fit in `warmup` iterations.
    pub fn for_warmup(warmup: usize) -> Windows {
        let (mut init, mut term, mut base) = (75_i64, 50_i64, 25_i64);
        let n = warmup as i64;
        if warmup >= 20 && init + term + base > n {
            init = (0.15 * warmup as f64) as i64;
            term = (0.1 * warmup as f64) as i64;
            base = n - (init + term);
        }
        Windows {
            init_buffer: init,
            term_buffer: term,
            base_window: base,
        }
    }
}

/// One chain, as the driver carries it from one run of the batch to the next.
#[derive(Clone, Debug)]
pub(crate) struct ChainState {
    /// The sampler's state, one value per name of [`STATE`].
    pub state: Vec<Value>,
    /// The draws so far, row after row: `samples[draw * dim + i]`.
    pub samples: Vec<f64>,
    /// Per draw: tree depth, leapfrog steps, divergence, acceptance
    /// statistic, log density, energy.
    pub tree_depth: Vec<i64>,
    pub n_leapfrog: Vec<i64>,
    pub divergent: Vec<bool>,
    pub accept_stat: Vec<f64>,
    pub log_density: Vec<f64>,
    pub energy: Vec<f64>,
    pub warmup_divergences: u64,
    /// Leapfrog steps at which the model faulted, in warmup and in sampling.
    pub warmup_faults: u64,
    pub sampling_faults: u64,
    /// Why the chain stopped, once it has: its later runs are ignored.
    pub failure: Option<ChainFailure>,
}

/// A chain at the end of the run: its draws and figures, or why it stopped.
pub(crate) enum ChainOutcome {
    Finished(Box<FinishedChain>),
    Failed(ChainFailure),
}

/// What a chain that finished gives the run (see [`crate::SampleRun`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FinishedChain {
    pub samples: Vec<f64>,
    pub tree_depth: Vec<i64>,
    pub n_leapfrog: Vec<i64>,
    pub divergent: Vec<bool>,
    pub accept_stat: Vec<f64>,
    pub log_density: Vec<f64>,
    pub energy: Vec<f64>,
    pub warmup_divergences: u64,
    pub warmup_faults: u64,
    pub sampling_faults: u64,
    /// After warmup: the step size and the diagonal inverse metric.
    pub step_size: f64,
    pub inv_metric: Vec<f64>,
}

impl ChainState {
    /// The chain's outcome, once the run is over.
    pub fn outcome(self) -> ChainOutcome {
        if let Some(failure) = self.failure {
            return ChainOutcome::Failed(failure);
        }
        let (step_size, inv_metric) = (self.step_size(), self.inv_metric());
        ChainOutcome::Finished(Box::new(FinishedChain {
            samples: self.samples,
            tree_depth: self.tree_depth,
            n_leapfrog: self.n_leapfrog,
            divergent: self.divergent,
            accept_stat: self.accept_stat,
            log_density: self.log_density,
            energy: self.energy,
            warmup_divergences: self.warmup_divergences,
            warmup_faults: self.warmup_faults,
            sampling_faults: self.sampling_faults,
            step_size,
            inv_metric,
        }))
    }
}

/// Gradients computed by the chains in one run, per phase.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Gradients {
    pub warmup: u64,
    pub sampling: u64,
}

impl ChainState {
    /// A chain before iteration 0 (which draws the initial point).
    /// A chain before its first iteration, at `init` when given (else the
    /// sampler draws its initial point).
    pub fn new(dim: usize, windows: Windows, init: Option<&[f64]>) -> ChainState {
        let state = vec![
            vector_value(init.map_or_else(|| vec![0.0; dim], <[f64]>::to_vec)),
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
            scalar_value(Scalar::I64(windows.base_window)),
            scalar_value(Scalar::I64(windows.init_buffer + windows.base_window - 1)),
            scalar_value(Scalar::Bool(false)),
        ];
        ChainState {
            state,
            samples: Vec::new(),
            tree_depth: Vec::new(),
            n_leapfrog: Vec::new(),
            divergent: Vec::new(),
            accept_stat: Vec::new(),
            log_density: Vec::new(),
            energy: Vec::new(),
            warmup_divergences: 0,
            warmup_faults: 0,
            sampling_faults: 0,
            failure: None,
        }
    }

    /// The last warmup iteration of the current adaptation window, if known.
    pub fn window_end(&self) -> Option<i64> {
        scalar_i64(&self.state[WIN_NEXT])
    }

    /// The step size (after warmup: the adapted one).
    pub fn step_size(&self) -> f64 {
        scalar_f64(&self.state[EPS])
    }

    /// The diagonal inverse metric (after warmup: the adapted one).
    pub fn inv_metric(&self) -> Vec<f64> {
        vector_f64(&self.state[INV_METRIC]).to_vec()
    }

    /// Takes in what one run of `nuts_segment` returned for this chain,
    /// whose first `recorded` iterations' draws are kept; returns the
    /// gradients the chain computed in the run.
    pub fn record(
        &mut self,
        value: Value,
        recorded: usize,
        dim: usize,
    ) -> Result<Gradients, SampleError> {
        let out = SegmentOutput::read(value)?;
        let recorded_leapfrogs = &out.leapfrogs[..recorded];
        append(&mut self.samples, out.draws, recorded * dim);
        self.tree_depth.extend_from_slice(&out.depths[..recorded]);
        self.n_leapfrog.extend_from_slice(recorded_leapfrogs);
        self.divergent.extend_from_slice(&out.divergent[..recorded]);
        self.accept_stat
            .extend_from_slice(&out.accept_stats[..recorded]);
        self.log_density
            .extend_from_slice(&out.log_densities[..recorded]);
        self.energy.extend_from_slice(&out.energies[..recorded]);
        let counts = out.counts;
        let gradients = Gradients {
            warmup: (counts.warmup_leapfrogs + counts.other_gradients) as u64,
            sampling: recorded_leapfrogs.iter().sum::<i64>() as u64,
        };
        self.warmup_divergences += counts.warmup_divergences as u64;
        self.warmup_faults += counts.warmup_faults as u64;
        self.sampling_faults += counts.sampling_faults as u64;
        self.state = out.state;
        Ok(gradients)
    }
}

/// Appends the first `n` of `values` to `to`, moving them when `to` is empty.
fn append(to: &mut Vec<f64>, mut values: Vec<f64>, n: usize) {
    values.truncate(n);
    if to.is_empty() {
        *to = values;
    } else {
        to.extend_from_slice(&values);
    }
}

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
    energies: Vec<f64>,
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
        if parts.len() != 9 {
            return Err(internal("a tuple of the wrong length"));
        }
        let counts: Vec<Tensor> = parts.pop().expect("9 parts").flatten();
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
        let [draws, depths, leapfrogs, divergent, accepts, lps, energies] =
            <[Tensor; 7]>::try_from(per_iteration)
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
            energies: f64s(&energies)?.to_vec(),
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

fn unexpected_type() -> SampleError {
    SampleError::Run("internal error: the sampler returned a value of an unexpected type".into())
}

fn f64s(t: &Tensor) -> Result<&[f64], SampleError> {
    match &t.data {
        Data::F64(v) => Ok(v),
        _ => Err(unexpected_type()),
    }
}

fn into_f64s(t: Tensor) -> Result<Vec<f64>, SampleError> {
    match t.data {
        Data::F64(v) => Ok(v),
        _ => Err(unexpected_type()),
    }
}

fn i64s(t: &Tensor) -> Result<&[i64], SampleError> {
    match &t.data {
        Data::I64(v) => Ok(v),
        _ => Err(unexpected_type()),
    }
}

fn bools(t: &Tensor) -> Result<&[bool], SampleError> {
    match &t.data {
        Data::Bool(v) => Ok(v),
        _ => Err(unexpected_type()),
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

/// What pooled adaptation reads of one chain: its step size, dual
/// averaging state, whether its adaptation window just ended, its Welford
/// state of the window, and the window's last iteration.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChainAdaptation {
    pub eps: f64,
    pub mu: f64,
    pub s_bar: f64,
    pub x_bar: f64,
    pub window_ended: bool,
    pub w_n: i64,
    pub w_mean: Vec<f64>,
    pub w_m2: Vec<f64>,
    pub window_end: Option<i64>,
}

/// What every chain adopts at a pooling (see [`pooled`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pooled {
    eps: f64,
    mu: f64,
    s_bar: f64,
    x_bar: f64,
    /// After a window's end: the pooled inverse metric.
    metric: Option<Vec<f64>>,
}

impl ChainState {
    /// What pooled adaptation reads of this chain.
    pub fn adaptation(&self) -> ChainAdaptation {
        let state = &self.state;
        ChainAdaptation {
            eps: scalar_f64(&state[EPS]),
            mu: scalar_f64(&state[MU]),
            s_bar: scalar_f64(&state[S_BAR]),
            x_bar: scalar_f64(&state[X_BAR]),
            window_ended: scalar(&state[RESTART]) == Some(Scalar::Bool(true)),
            w_n: scalar_i64(&state[W_N]).unwrap_or(0),
            w_mean: vector_f64(&state[W_MEAN]).to_vec(),
            w_m2: vector_f64(&state[W_M2]).to_vec(),
            window_end: self.window_end(),
        }
    }

    /// Takes the pooled step size and dual averaging state, and after a
    /// window's end the pooled metric (restarting the Welford state).
    pub fn adopt(&mut self, pooled: &Pooled, dim: usize) {
        let state = &mut self.state;
        state[EPS] = scalar_value(Scalar::F64(pooled.eps));
        state[MU] = scalar_value(Scalar::F64(pooled.mu));
        state[S_BAR] = scalar_value(Scalar::F64(pooled.s_bar));
        state[X_BAR] = scalar_value(Scalar::F64(pooled.x_bar));
        if let Some(metric) = &pooled.metric {
            state[INV_METRIC] = vector_value(metric.clone());
            state[W_N] = scalar_value(Scalar::I64(0));
            state[W_MEAN] = vector_value(vec![0.0; dim]);
            state[W_M2] = vector_value(vec![0.0; dim]);
        }
    }
}

/// Pooled adaptation, between two warmup segments, over the chains that
/// have not failed (`alive`, at least one, in chain order): every chain
/// gets the same step size (the geometric mean of theirs) and the mean of
/// their dual averaging states; after a window's end (as the first chain
/// says), also the same metric, from all their draws of the window
/// (Welford states combined in chain order), regularized as Stan
/// regularizes one chain's. A function of the chains in order only, so that
/// every rank of a job computes the same bits from the same list.
pub(crate) fn pooled(alive: &[ChainAdaptation], dim: usize) -> Pooled {
    let n = alive.len() as f64;
    let mean_of = |f: &dyn Fn(&ChainAdaptation) -> f64| alive.iter().map(f).sum::<f64>() / n;
    let window_ended = alive.first().is_some_and(|c| c.window_ended);
    Pooled {
        eps: mean_of(&|c| c.eps.ln()).exp(),
        mu: mean_of(&|c| c.mu),
        s_bar: mean_of(&|c| c.s_bar),
        x_bar: mean_of(&|c| c.x_bar),
        metric: window_ended.then(|| pooled_metric(alive, dim)),
    }
}

/// The inverse metric of the chains `alive` together, at the end of a
/// window: their Welford states combined in chain order, the variance
/// regularized as Stan regularizes one chain's.
fn pooled_metric(alive: &[ChainAdaptation], dim: usize) -> Vec<f64> {
    let (mut count, mut mean, mut m2) = (0.0_f64, vec![0.0; dim], vec![0.0; dim]);
    for chain in alive {
        let n_b = chain.w_n as f64;
        if n_b == 0.0 {
            continue;
        }
        let (mean_b, m2_b) = (&chain.w_mean, &chain.w_m2);
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
        .collect()
}
