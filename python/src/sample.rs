//! `_sample`: the No-U-Turn Sampler of `autobatch sample`, run on its own
//! thread while the calling thread, without the GIL, waits for progress and
//! looks for Ctrl-C (Python's signal handlers run only with the GIL, on the
//! main thread) every tenth of a second. On a signal's exception (or one
//! raised by the progress callback) the run is stopped through
//! [`autobatch_sample::Stop`], joined, and the exception raised.

use std::sync::{mpsc, Mutex};
use std::time::Duration;

use autobatch::{RunConfig, Strategy};
use autobatch_sample::{Adaptation, Model, Progress, SampleConfig, SampleError, SampleRun, Stop};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{flat_to_numpy, json_to_py, to_json};
use crate::{named_items, no_panic, optional_number, parse_name, whole_number, CompileError};

/// What the sampling thread tells the waiting one.
enum Message {
    Progress(Progress),
    Done(Box<Result<SampleRun, SampleError>>),
}

/// The sampler's settings, as `autobatch sample` takes them.
struct Settings {
    config: SampleConfig,
    strategy: Strategy,
}

/// Samples `log_density` of `model_source` given `data`; returns a dict the
/// package's `Fit` wraps (draws, stats, summary, per-draw statistics, table).
#[pyfunction]
#[pyo3(signature = (model_source, data = None, *, chains = None, warmup = None, draws = None,
                    seed = None, strategy = None, threads = None, max_depth = None,
                    target_accept = 0.8, pooled_adaptation = None, progress = None,
                    path = "<model>", init = None))]
#[allow(clippy::too_many_arguments)]
pub fn sample<'py>(
    py: Python<'py>,
    model_source: &str,
    data: Option<&Bound<'py, PyAny>>,
    chains: Option<&Bound<'py, PyAny>>,
    warmup: Option<&Bound<'py, PyAny>>,
    draws: Option<&Bound<'py, PyAny>>,
    seed: Option<&Bound<'py, PyAny>>,
    strategy: Option<&str>,
    threads: Option<&Bound<'py, PyAny>>,
    max_depth: Option<&Bound<'py, PyAny>>,
    target_accept: f64,
    pooled_adaptation: Option<&Bound<'py, PyAny>>,
    progress: Option<&Bound<'py, PyAny>>,
    path: &str,
    init: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    no_panic(|| {
        let max = autobatch_sample::MAX_ITERATIONS as u64;
        let strategy = match strategy {
            Some(name) => parse_name::<Strategy>(name)?,
            None => autobatch_sample::DEFAULT_STRATEGY,
        };
        let adaptation = match pooled_adaptation.filter(|p| !p.is_none()) {
            None => Adaptation::PerChain,
            Some(every) => Adaptation::Pooled {
                every: whole_number(every, "pooled_adaptation", 1, max)? as usize,
            },
        };
        let mut settings = Settings {
            config: SampleConfig {
                chains: optional_number(chains, "chains", 1, u32::MAX as u64, 4)? as usize,
                warmup: optional_number(warmup, "warmup", 0, max, 1000)? as usize,
                draws: optional_number(draws, "draws", 1, max, 1000)? as usize,
                max_depth: optional_number(max_depth, "max_depth", 1, 30, 10)? as u32,
                target_accept,
                run: RunConfig {
                    strategy,
                    options: autobatch::RunOptions {
                        seed: optional_number(seed, "seed", 0, u64::MAX, 0)?,
                        threads: optional_number(
                            threads,
                            "threads",
                            0,
                            u64::MAX,
                            autobatch::default_threads() as u64,
                        )? as usize,
                        ..RunConfig::default().options
                    },
                },
                adaptation,
                ..SampleConfig::default()
            },
            strategy,
        };
        let data_text = data_json(data)?;
        let model = Model::new(model_source, path, &data_text).map_err(sample_error)?;
        if let Some(init) = init.filter(|i| !i.is_none()) {
            let text = named_json("init", Some(init))?;
            settings.config.init = Some(model.initial_point(&text).map_err(sample_error)?);
        }
        let run = run_stoppable(py, model, settings.config, progress)?;
        fit_dict(py, &run, settings.strategy)
    })
}

/// The model's data (a dict of statics by name) as the JSON text `sample --data` reads.
fn data_json(data: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    named_json("data", data)
}

/// A dict of values by name (`data`, `init`) as the text of a JSON object.
fn named_json(what: &str, dict: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let mut object = serde_json::Map::new();
    for (name, value) in named_items(what, dict)? {
        let json = to_json(&value, &|| format!("`{name}` in `{what}`"))?;
        object.insert(name, json);
    }
    Ok(serde_json::Value::Object(object).to_string())
}

fn sample_error(error: SampleError) -> PyErr {
    match error {
        SampleError::Compile(text) => CompileError::new_err(text.trim_end().to_owned()),
        SampleError::Run(message) => PyRuntimeError::new_err(message),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// Runs the sampler on a thread of its own; see the module doc.
fn run_stoppable(
    py: Python<'_>,
    model: Model,
    config: SampleConfig,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<SampleRun> {
    let stop = Stop::new();
    let (sender, receiver) = mpsc::channel::<Message>();
    let thread_stop = stop.clone();
    let worker = std::thread::Builder::new()
        .name("autobatch-sample-host".into())
        .spawn(move || {
            let progress_sender = sender.clone();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                model.sample_stoppable(
                    &config,
                    &mut |p| {
                        let _ = progress_sender.send(Message::Progress(p));
                    },
                    &thread_stop,
                )
            }))
            .unwrap_or_else(|_| {
                Err(SampleError::Run(
                    "internal error: the sampler panicked (this is a bug in autobatch)".into(),
                ))
            });
            let _ = sender.send(Message::Done(Box::new(result)));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    let outcome = wait(py, &Mutex::new(receiver), progress);
    if outcome.is_err() {
        stop.request();
    }
    // The thread ends soon after a stop (at the executor's next report).
    py.allow_threads(|| worker.join())
        .map_err(|_| PyRuntimeError::new_err("internal error: the sampling thread panicked"))?;
    match outcome? {
        Some(result) => result.map_err(sample_error),
        None => {
            // The thread ended without a result only if it was stopped.
            Err(PyRuntimeError::new_err(
                "internal error: the sampler ended without a result",
            ))
        }
    }
}

/// Waits for the sampler's result, calling `progress(done, total,
/// warming_up)` on progress and looking for signals; `Err` on a signal's or
/// the callback's exception.
fn wait(
    py: Python<'_>,
    receiver: &Mutex<mpsc::Receiver<Message>>,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Result<SampleRun, SampleError>>> {
    let progress = progress.filter(|p| !p.is_none());
    loop {
        // Only this thread receives; the mutex makes the receiver `Sync`
        // for `allow_threads`.
        let message = py.allow_threads(|| match receiver.lock() {
            Ok(receiver) => receiver.recv_timeout(Duration::from_millis(100)),
            Err(_) => Err(mpsc::RecvTimeoutError::Disconnected),
        });
        py.check_signals()?;
        match message {
            Ok(Message::Progress(p)) => {
                if let Some(callback) = progress {
                    callback.call1((p.done, p.total, p.warming_up))?;
                }
            }
            Ok(Message::Done(result)) => return Ok(Some(*result)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
        }
    }
}

/// What the package's `Fit` is made of.
fn fit_dict<'py>(
    py: Python<'py>,
    run: &SampleRun,
    strategy: Strategy,
) -> PyResult<Bound<'py, PyDict>> {
    let fit = PyDict::new(py);
    let finished = run.finished();
    let unconstrained: Vec<u8> = run
        .samples
        .iter()
        .flat_map(|chain| chain.iter().flat_map(|x| x.to_ne_bytes()))
        .collect();
    fit.set_item(
        "unconstrained",
        flat_to_numpy(
            py,
            &unconstrained,
            "float64",
            &[finished, run.draws, run.dim],
        )?,
    )?;
    // Each reported variable as (chains, draws, *shape).
    let variables = PyDict::new(py);
    let mut first = 0;
    for variable in &run.variables {
        let size: usize = variable.shape.iter().product();
        let mut bytes = Vec::with_capacity(finished * run.draws * size * 8);
        for k in 0..finished {
            for d in 0..run.draws {
                let row = &run.reported(k, d)[first..first + size];
                bytes.extend(row.iter().flat_map(|x| x.to_ne_bytes()));
            }
        }
        let mut shape = vec![finished, run.draws];
        shape.extend(&variable.shape);
        variables.set_item(
            &variable.name,
            flat_to_numpy(py, &bytes, "float64", &shape)?,
        )?;
        first += size;
    }
    fit.set_item("draws", variables)?;
    let stats = autobatch_sample::report::stats_json(run, strategy.name());
    fit.set_item("stats", json_to_py(py, &stats)?)?;
    fit.set_item("table", autobatch_sample::report::table(run))?;
    fit.set_item("warnings", autobatch_sample::report::warnings(run))?;
    fit.set_item("chain_ids", PyList::new(py, &run.chain_ids)?)?;
    let per_draw = PyDict::new(py);
    let shape = [finished, run.draws];
    let floats = |rows: &[Vec<f64>]| -> Vec<u8> {
        rows.iter()
            .flat_map(|r| r.iter().flat_map(|x| x.to_ne_bytes()))
            .collect()
    };
    let ints = |rows: &[Vec<i64>]| -> Vec<u8> {
        rows.iter()
            .flat_map(|r| r.iter().flat_map(|x| x.to_ne_bytes()))
            .collect()
    };
    let bools: Vec<u8> = run
        .divergent
        .iter()
        .flatten()
        .map(|d| u8::from(*d))
        .collect();
    per_draw.set_item(
        "tree_depth",
        flat_to_numpy(py, &ints(&run.tree_depth), "int64", &shape)?,
    )?;
    per_draw.set_item(
        "n_steps",
        flat_to_numpy(py, &ints(&run.n_leapfrog), "int64", &shape)?,
    )?;
    per_draw.set_item("diverging", flat_to_numpy(py, &bools, "bool", &shape)?)?;
    per_draw.set_item(
        "acceptance_rate",
        flat_to_numpy(py, &floats(&run.accept_stat), "float64", &shape)?,
    )?;
    per_draw.set_item(
        "lp",
        flat_to_numpy(py, &floats(&run.log_density), "float64", &shape)?,
    )?;
    per_draw.set_item(
        "energy",
        flat_to_numpy(py, &floats(&run.energy), "float64", &shape)?,
    )?;
    fit.set_item("sample_stats", per_draw)?;
    let step_size = floats(std::slice::from_ref(&run.step_size));
    fit.set_item(
        "step_size",
        flat_to_numpy(py, &step_size, "float64", &[run.step_size.len()])?,
    )?;
    Ok(fit)
}
