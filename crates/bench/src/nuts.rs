//! `autobatch-bench nuts [--quick]`: the No-U-Turn Sampler of
//! `autobatch-sample` measured as in Figures 6 and 7 of TFP's autobatching paper.
//!
//! - `logistic` (Figure 6): Bayesian logistic regression, N = 10,000 synthetic
//!   data points, D = 100 regressors (fixed seed): NUTS gradient evaluations
//!   per second (gradients used by chains, summed over chains) against the
//!   number of chains, for program-counter and local-static; beside it the
//!   plain `value_and_grad` throughput of the same batch (steady state: the
//!   marginal rate of gradient steps, setup excluded), and their ratio.
//! - `correlated_gaussian` (Figure 7): a 100-dimensional correlated Gaussian;
//!   the utilization of the batched gradient (active lanes / (executions x
//!   chains) of the leapfrog's gradient) against the number of chains, for
//!   program-counter and local-static, with one and ten trajectories per
//!   run of the batch (the chains wait for one another at the end of each
//!   run, as a sampler that synchronises per trajectory does), and with all
//!   of them in one run, as `sample` runs them (warmup runs the same way).
//!
//! Prints one JSON document on stdout. Times are wall seconds of the
//! sampler's runs (binding and running), excluding compilation.

use std::time::Instant;

use autobatch::{BlockChoice, Inputs, RunConfig, Strategy};
use autobatch_sample::{Model, SampleConfig};
use serde_json::{json, Value};

/// A small deterministic generator for the synthetic data (splitmix64 and
/// Box-Muller), so that the data never depends on a library's version.
struct DataRng(u64);

impl DataRng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

const LOGISTIC: &str = "\
extern \"autobatch\" {
    static X: [[f64; D]; N];
    static y: [f64; N];
}

fn log_density(theta: [f64; D]) -> f64 {
    let z = matvec(X, theta);
    dot(y, z) - sum(softplus(z)) - 0.5 * dot(theta, theta)
}
";

const GAUSSIAN: &str = "\
extern \"autobatch\" {
    static P: [[f64; D]; D];
}

fn log_density(theta: [f64; D]) -> f64 {
    -0.5 * dot(theta, matvec(P, theta))
}
";

/// Logistic regression data: X standard normal, true coefficients normal
/// with scale 1/sqrt(D), y Bernoulli of the logistic of X beta.
fn logistic_data(n: usize, d: usize) -> String {
    let mut rng = DataRng(20_190_000);
    let beta: Vec<f64> = (0..d).map(|_| rng.normal() / (d as f64).sqrt()).collect();
    let mut xs = Vec::with_capacity(n);
    let mut ys = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
        let z: f64 = row.iter().zip(&beta).map(|(a, b)| a * b).sum();
        let p = 1.0 / (1.0 + (-z).exp());
        ys.push(if rng.uniform() < p { 1.0 } else { 0.0 });
        xs.push(row);
    }
    json!({ "X": xs, "y": ys }).to_string()
}

/// The precision matrix of a Gaussian with unit variances and correlation
/// rho^|i - j| (an AR(1) process): tridiagonal.
fn gaussian_data(d: usize, rho: f64) -> String {
    let mut p = vec![vec![0.0; d]; d];
    let s = 1.0 / (1.0 - rho * rho);
    for i in 0..d {
        p[i][i] = if i == 0 || i == d - 1 {
            s
        } else {
            (1.0 + rho * rho) * s
        };
        if i + 1 < d {
            p[i][i + 1] = -rho * s;
            p[i + 1][i] = -rho * s;
        }
    }
    json!({ "P": p }).to_string()
}

/// The strategies measured: the batching strategies with the
/// smallest-index block choice (the most-members choice keeps fewer
/// chains together on NUTS; `docs/benchmarks.md`).
fn strategies() -> [(Strategy, BlockChoice); 2] {
    [
        (Strategy::ProgramCounter, BlockChoice::SmallestIndex),
        (Strategy::LocalStatic, BlockChoice::SmallestIndex),
    ]
}

/// Plain `value_and_grad` of the model (whose parameter is `[float; D]`) over
/// `chains` members: gradients per second in steady state, the marginal
/// rate of the gradient steps alone (each member takes `count` steps of a
/// tiny gradient ascent, in runs of 4 and of 12 steps; median times of
/// repetitions within a budget), so that the run's setup does not count.
/// A model as `plain_gradients` measures it: its source, the float type it
/// is written in, its data (JSON) and its dimension.
struct PlainModel<'a> {
    source: &'a str,
    float: autobatch::ScalarType,
    data: &'a str,
    dim: usize,
}

fn plain_gradients(
    model: &PlainModel<'_>,
    chains: usize,
    strategy: Strategy,
    block_choice: BlockChoice,
    budget: f64,
) -> f64 {
    let PlainModel {
        source,
        float,
        data,
        dim,
    } = *model;
    let program = format!(
        "{source}\nfn bench_grad(theta: [{float}; D], count: i64) -> {float} {{\n    let mut t = theta;\n    let mut total = 0.0_{float};\n    for _k in 0..count {{\n        let (value, g) = value_and_grad(log_density, t);\n        t = t + 0.000001 * g;\n        total += value;\n    }}\n    total\n}}\n"
    );
    let compiled = autobatch::compile(&program, "bench.ab").expect("the benchmark model compiles");
    let serde_json::Value::Object(statics) = serde_json::from_str::<Value>(data).expect("JSON")
    else {
        unreachable!("the data is an object")
    };
    let mut rng = DataRng(7);
    let points: Vec<Vec<f64>> = (0..chains)
        .map(|_| (0..dim).map(|_| 0.1 * rng.normal()).collect())
        .collect();
    let config = RunConfig {
        strategy,
        options: autobatch::RunOptions {
            batching: autobatch::BatchingOptions {
                block_choice,
                ..RunConfig::default().options.batching
            },
            ..RunConfig::default().options
        },
    };
    let seconds = |count: i64| {
        let mut inputs = Inputs::new();
        for (name, value) in &statics {
            inputs = inputs.shared(name, value.clone());
        }
        let batch = compiled
            .bind(
                "bench_grad",
                &inputs
                    .batched("theta", points.clone())
                    .shared("count", count),
            )
            .expect("binds");
        let mut times = Vec::new();
        let began = Instant::now();
        while times.len() < 3 || (began.elapsed().as_secs_f64() < budget && times.len() < 20) {
            let result = batch.run(&config).expect("runs");
            times.push(result.stats.wall_seconds);
        }
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let (short, long) = (seconds(4), seconds(12));
    chains as f64 * 8.0 / (long - short).max(1e-9)
}

fn logistic(
    quick: bool,
    only: &Option<Vec<usize>>,
    lengths: Option<(usize, usize)>,
    f32: bool,
) -> Value {
    let (n, d) = (10_000, 100);
    let data = logistic_data(n, d);
    // The same model and data in f32 (the sampler's own arithmetic stays f64).
    let source = if f32 {
        LOGISTIC.replace("f64", "f32")
    } else {
        LOGISTIC.to_string()
    };
    let default: &[usize] = if quick {
        &[1, 4, 16, 64]
    } else {
        &[1, 4, 16, 64, 256, 1024]
    };
    let chain_counts = only.as_deref().unwrap_or(default);
    let (warmup, draws) = lengths.unwrap_or(if quick { (10, 10) } else { (20, 20) });
    let model = Model::new(&source, "logistic.ab", &data).expect("the logistic model compiles");
    let mut rows = Vec::new();
    for &(strategy, block_choice) in &strategies() {
        for &chains in chain_counts {
            let config = SampleConfig {
                chains,
                warmup,
                draws,
                run: RunConfig {
                    strategy,
                    options: autobatch::RunOptions {
                        seed: 1,
                        batching: autobatch::BatchingOptions {
                            block_choice,
                            ..RunConfig::default().options.batching
                        },
                        ..RunConfig::default().options
                    },
                },
                ..SampleConfig::default()
            };
            let run = model
                .sample(&config, &mut |_| {})
                .expect("the sampler runs");
            let grads =
                run.warmup_figures.gradient_evaluations + run.sampling_figures.gradient_evaluations;
            let seconds = run.warmup_figures.seconds + run.sampling_figures.seconds;
            let nuts_rate = grads as f64 / seconds;
            let plain_model = PlainModel {
                source: &source,
                float: model.precision(),
                data: &data,
                dim: d,
            };
            let plain_rate = plain_gradients(
                &plain_model,
                chains,
                strategy,
                block_choice,
                if quick { 1.0 } else { 3.0 },
            );
            let row = json!({
                "strategy": strategy.name(),
                "block_choice": block_choice.name(),
                "chains": chains,
                "warmup": warmup,
                "draws": draws,
                "gradient_evaluations": grads,
                "seconds": seconds,
                "nuts_gradients_per_second": nuts_rate,
                "plain_gradients_per_second": plain_rate,
                "nuts_over_plain": nuts_rate / plain_rate,
                "utilization": run.sampling_figures.utilization(chains),
                "utilization_with_warmup": run.gradient_utilization(),
                "mean_tree_depth": run.mean_tree_depth(),
            });
            eprintln!("{row}");
            rows.push(row);
        }
    }
    json!({ "n": n, "d": d, "model_float": if f32 { "f32" } else { "f64" }, "results": rows })
}

fn correlated_gaussian(
    quick: bool,
    only: &Option<Vec<usize>>,
    trajectories_list: &Option<Vec<Option<usize>>>,
) -> Value {
    let d = 100;
    let rho = 0.9;
    let data = gaussian_data(d, rho);
    let default: &[usize] = if quick {
        &[1, 4, 16, 64]
    } else {
        &[1, 4, 16, 64, 256, 1024]
    };
    let chain_counts = only.as_deref().unwrap_or(default);
    let warmup = if quick { 100 } else { 200 };
    let mut rows = Vec::new();
    let model = Model::new(GAUSSIAN, "gaussian.ab", &data).expect("the Gaussian model compiles");
    for &trajectories in trajectories_list
        .as_deref()
        .unwrap_or(&[Some(1), Some(10), None])
    {
        for &(strategy, block_choice) in &strategies() {
            for &chains in chain_counts {
                // Warmup runs in the same segments; only sampling is measured.
                let config = SampleConfig {
                    chains,
                    warmup,
                    draws: if quick { 20 } else { 100 },
                    segment: trajectories,
                    run: RunConfig {
                        strategy,
                        options: autobatch::RunOptions {
                            seed: 2,
                            batching: autobatch::BatchingOptions {
                                block_choice,
                                ..RunConfig::default().options.batching
                            },
                            ..RunConfig::default().options
                        },
                    },
                    ..SampleConfig::default()
                };
                let run = model
                    .sample(&config, &mut |_| {})
                    .expect("the sampler runs");
                let row = json!({
                    "strategy": strategy.name(),
                    "block_choice": block_choice.name(),
                    "trajectories_per_run": match trajectories {
                        Some(t) => json!(t),
                        None => json!("all"),
                    },
                    "chains": chains,
                    "utilization": run.sampling_figures.utilization(chains),
                    "utilization_with_warmup": run.gradient_utilization(),
                    "gradient_executions": run.sampling_figures.gradient_executions,
                    "gradient_active_lanes": run.sampling_figures.gradient_active_lanes,
                    "mean_tree_depth": run.mean_tree_depth(),
                    "seconds": run.warmup_figures.seconds + run.sampling_figures.seconds,
                });
                eprintln!("{row}");
                rows.push(row);
            }
        }
    }
    json!({ "d": d, "rho": rho, "results": rows })
}

/// The value after `name` in `args`, read by `parse`; exits 2 with a
/// message saying that the flag takes `what` when it does not read.
fn flag<T>(
    args: &[String],
    name: &str,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    let text = args
        .iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))?;
    match parse(text) {
        Some(value) => Some(value),
        None => {
            eprintln!("error: {name} takes {what}, not `{text}`");
            std::process::exit(2)
        }
    }
}

/// Runs the NUTS benchmarks named in `args` (`logistic`, `gaussian`; both if
/// neither is named) and prints one JSON document. `--chains 16,256` measures
/// only those numbers of chains, `--trajectories 10` (gaussian) only those
/// numbers of trajectories per run; `--f32` writes the logistic model and
/// its data in f32.
pub fn main(args: &[String]) {
    let quick = args.iter().any(|a| a == "--quick");
    let positive = |n: &str| n.parse::<usize>().ok().filter(|n| *n > 0);
    let only = flag(
        args,
        "--chains",
        "a comma-separated list of positive integers",
        |list| list.split(',').map(|n| positive(n.trim())).collect(),
    );
    let trajectories = flag(
        args,
        "--trajectories",
        "a comma-separated list of positive integers or `all`",
        |list| {
            list.split(',')
                .map(|n| match n.trim() {
                    "all" => Some(None),
                    n => positive(n).map(Some),
                })
                .collect::<Option<Vec<Option<usize>>>>()
        },
    );
    let number_flag = |name: &str| flag(args, name, "a number", |n| n.parse::<usize>().ok());
    let lengths = match (number_flag("--warmup"), number_flag("--draws")) {
        (None, None) => None,
        (warmup, draws) => Some((warmup.unwrap_or(20), draws.unwrap_or(20).max(1))),
    };
    let want_logistic = args.iter().any(|a| a == "logistic");
    let want_gaussian = args.iter().any(|a| a == "gaussian");
    let both = !want_logistic && !want_gaussian;
    let mut out = serde_json::Map::new();
    out.insert("benchmark".into(), json!("nuts"));
    out.insert("quick".into(), json!(quick));
    out.insert("threads".into(), json!(autobatch::default_threads()));
    if both || want_gaussian {
        out.insert(
            "correlated_gaussian".into(),
            correlated_gaussian(quick, &only, &trajectories),
        );
    }
    if both || want_logistic {
        let f32 = args.iter().any(|a| a == "--f32");
        out.insert("logistic".into(), logistic(quick, &only, lengths, f32));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&Value::Object(out)).expect("JSON")
    );
}
