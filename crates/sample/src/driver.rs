//! Running the chains: all of them as one batch, segment after segment of
//! at most [`SEGMENT`](crate::SEGMENT) iterations, the chains' state passing from one run of
//! the batch to the next as batched inputs.

use std::time::Instant;

use autobatch::{RunConfig, Tensor, Value};
use autobatch_types::Data;

use crate::model::{Model, SampleError};

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
        }
    }
}

/// How far the run is, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Iterations finished by every chain (warmup and sampling).
    pub done: usize,
    pub total: usize,
    /// Whether the next segment is still warmup.
    pub warming_up: bool,
}

/// Figures of one phase (warmup or sampling), summed over chains and segments.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseFigures {
    /// Wall seconds of the phase's runs (binding the inputs and running).
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

/// The draws and per-draw statistics of every chain, and the run's figures.
#[derive(Clone, Debug)]
pub struct SampleRun {
    pub dim: usize,
    pub chains: usize,
    pub warmup: usize,
    pub draws: usize,
    /// Per chain, the draws row after row: `draws[chain][draw * dim + i]`.
    pub samples: Vec<Vec<f64>>,
    /// Per chain and draw (sampling only): tree depth, leapfrog steps,
    /// divergence, acceptance statistic, log density.
    pub tree_depth: Vec<Vec<i64>>,
    pub n_leapfrog: Vec<Vec<i64>>,
    pub divergent: Vec<Vec<bool>>,
    pub accept_stat: Vec<Vec<f64>>,
    pub log_density: Vec<Vec<f64>>,
    /// Divergences during warmup, per chain.
    pub warmup_divergences: Vec<u64>,
    /// Per chain after warmup: the step size and the diagonal inverse metric.
    pub step_size: Vec<f64>,
    pub inv_metric: Vec<Vec<f64>>,
    pub warmup_figures: PhaseFigures,
    pub sampling_figures: PhaseFigures,
}

impl SampleRun {
    /// Draw `draw` of chain `chain`.
    pub fn draw(&self, chain: usize, draw: usize) -> &[f64] {
        &self.samples[chain][draw * self.dim..(draw + 1) * self.dim]
    }
    /// Coordinate `i` of every draw of every chain: `[chain][draw]`.
    pub fn coordinate(&self, i: usize) -> Vec<Vec<f64>> {
        self.samples
            .iter()
            .map(|chain| chain.iter().skip(i).step_by(self.dim).copied().collect())
            .collect()
    }
    pub fn divergences(&self) -> u64 {
        self.divergent.iter().flatten().filter(|d| **d).count() as u64
    }
    pub fn mean_tree_depth(&self) -> f64 {
        let n = self.chains * self.draws;
        if n == 0 {
            return f64::NAN;
        }
        self.tree_depth.iter().flatten().sum::<i64>() as f64 / n as f64
    }
}

/// The names of the entry's state parameters, in the order of the state
/// tuple the entry returns.
const STATE: [&str; 14] = [
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
];

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

impl Model {
    /// The line (in the combined program) of the leapfrog's position update,
    /// whose operations run exactly once per gradient of a trajectory.
    pub fn gradient_marker_line(&self) -> u32 {
        let index = crate::model::LIBRARY
            .lines()
            .position(|l| {
                l.trim_start()
                    .starts_with("let q1 = q + inv_metric * p_half * eps;")
            })
            .expect("the library has its leapfrog");
        self.model_lines + index as u32 + 1
    }

    /// Runs warmup and sampling; `progress` is called before the first and
    /// after every segment.
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
        config
            .run
            .validate()
            .map_err(|e| SampleError::Config(e.to_string()))?;
        let dim = self.dim();
        let chains = config.chains;
        // The host keeps every chain's state and draws: refuse a run that
        // cannot fit before allocating any of it (the batch's own run checks
        // its variables again).
        let per_chain = 8 * (config.draws as u128 * (dim as u128 + 4) + 64 * dim as u128 + 1024);
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
        let zeros = |n: usize| {
            Value::Tensor(Tensor {
                shape: vec![n],
                data: Data::F64(vec![0.0; n]),
            })
        };
        let f = |x: f64| {
            Value::Tensor(Tensor {
                shape: vec![],
                data: Data::F64(vec![x]),
            })
        };
        let i = |x: i64| {
            Value::Tensor(Tensor {
                shape: vec![],
                data: Data::I64(vec![x]),
            })
        };
        let initial: Vec<Value> = vec![
            zeros(dim),
            f(0.0),
            zeros(dim),
            f(1.0),
            zeros(dim),
            f(0.0),
            f(0.0),
            f(0.0),
            f(0.0),
            i(0),
            zeros(dim),
            zeros(dim),
            i(0),
            i(0),
        ];
        // state[k][chain]
        let mut state: Vec<Vec<Value>> = initial.into_iter().map(|v| vec![v; chains]).collect();

        let total = config.warmup + config.draws;
        let mut out = SampleRun {
            dim,
            chains,
            warmup: config.warmup,
            draws: config.draws,
            samples: vec![Vec::with_capacity(config.draws * dim); chains],
            tree_depth: vec![Vec::with_capacity(config.draws); chains],
            n_leapfrog: vec![Vec::with_capacity(config.draws); chains],
            divergent: vec![Vec::with_capacity(config.draws); chains],
            accept_stat: vec![Vec::with_capacity(config.draws); chains],
            log_density: vec![Vec::with_capacity(config.draws); chains],
            warmup_divergences: vec![0; chains],
            step_size: vec![f64::NAN; chains],
            inv_metric: vec![vec![1.0; dim]; chains],
            warmup_figures: PhaseFigures::default(),
            sampling_figures: PhaseFigures::default(),
        };
        let marker = self.gradient_marker_line();

        let mut start = 0;
        let mut segment = 0_u64;
        progress(Progress {
            done: 0,
            total,
            warming_up: config.warmup > 0,
        });
        while start < total {
            let warming_up = start < config.warmup;
            let end = if warming_up {
                (start + self.segment).min(config.warmup)
            } else {
                (start + self.segment).min(total)
            };
            let n_iter = end - start;
            let began = Instant::now();
            let mut inputs = self.statics.clone();
            for (name, values) in STATE.iter().zip(&state) {
                inputs = inputs.batched(name, values.iter().cloned());
            }
            inputs = inputs
                .shared("nuts_start", start as i64)
                .shared("nuts_n_iter", n_iter as i64)
                .shared("nuts_num_warmup", config.warmup as i64)
                .shared("nuts_max_depth", i64::from(config.max_depth))
                .shared("nuts_target_accept", config.target_accept)
                .shared("nuts_init_buffer", init_buffer)
                .shared("nuts_term_buffer", term_buffer)
                .shared("nuts_base_window", base_window);
            let batch = self.compiled.bind("nuts_segment", &inputs).map_err(|e| {
                SampleError::Data(format!("the data does not fit the model: {}", e.message()))
            })?;
            let run_config = RunConfig {
                seed: segment_seed(config.run.seed, segment),
                max_steps: u64::MAX,
                ..config.run.clone()
            };
            let result = batch
                .run(&run_config)
                .map_err(|e| SampleError::Run(e.to_string()))?;
            let seconds = began.elapsed().as_secs_f64();

            let figures = if warming_up {
                &mut out.warmup_figures
            } else {
                &mut out.sampling_figures
            };
            figures.seconds += seconds;
            if let Some(op) = result
                .stats
                .op_counts
                .iter()
                .find(|op| op.loc.line == marker)
            {
                figures.gradient_executions += op.executions;
                figures.gradient_active_lanes += op.active_lanes;
            }
            for (chain, member) in result.members.into_iter().enumerate() {
                let value = member.map_err(|e| {
                    SampleError::Chain(format!(
                        "chain {chain} stopped at iteration {} or after: {} at {}: {}",
                        start,
                        e.kind.name(),
                        self.describe_loc(e.loc.line, e.loc.column),
                        e.message
                    ))
                })?;
                let Value::Tuple(mut parts) = value else {
                    return Err(SampleError::Run(
                        "internal error: the sampler returned no tuple".into(),
                    ));
                };
                if parts.len() != 8 {
                    return Err(SampleError::Run(
                        "internal error: the sampler returned a tuple of the wrong length".into(),
                    ));
                }
                let other_grads = parts.pop().expect("8 parts").flatten();
                let rest: Vec<Tensor> = parts
                    .split_off(1)
                    .into_iter()
                    .flat_map(Value::flatten)
                    .collect();
                let Value::Tuple(new_state) = parts.pop().expect("the state") else {
                    return Err(SampleError::Run(
                        "internal error: the sampler's state is no tuple".into(),
                    ));
                };
                let [draws, depths, leapfrogs, divergent, accepts, lps] =
                    <[Tensor; 6]>::try_from(rest).map_err(|_| {
                        SampleError::Run(
                            "internal error: the sampler's draws have the wrong form".into(),
                        )
                    })?;
                let draws = f64s(&draws)?;
                let depths = i64s(&depths)?;
                let leapfrogs = i64s(&leapfrogs)?;
                let divergent = bools(&divergent)?;
                let accepts = f64s(&accepts)?;
                let lps = f64s(&lps)?;
                let grads = leapfrogs[..n_iter].iter().sum::<i64>() + i64s(&other_grads[0])?[0];
                figures.gradient_evaluations += grads as u64;
                if warming_up {
                    out.warmup_divergences[chain] +=
                        divergent[..n_iter].iter().filter(|d| **d).count() as u64;
                } else {
                    out.samples[chain].extend_from_slice(&draws[..n_iter * dim]);
                    out.tree_depth[chain].extend_from_slice(&depths[..n_iter]);
                    out.n_leapfrog[chain].extend_from_slice(&leapfrogs[..n_iter]);
                    out.divergent[chain].extend_from_slice(&divergent[..n_iter]);
                    out.accept_stat[chain].extend_from_slice(&accepts[..n_iter]);
                    out.log_density[chain].extend_from_slice(&lps[..n_iter]);
                }
                for (k, v) in new_state.into_iter().enumerate() {
                    state[k][chain] = v;
                }
            }
            segment += 1;
            start = end;
            progress(Progress {
                done: start,
                total,
                warming_up: start < config.warmup,
            });
        }
        for (chain, (eps, metric)) in state[3].iter().zip(&state[4]).enumerate() {
            if let (Value::Tensor(eps), Value::Tensor(metric)) = (eps, metric) {
                out.step_size[chain] = f64s(eps)?[0];
                out.inv_metric[chain] = f64s(metric)?.to_vec();
            }
        }
        Ok(out)
    }
}
