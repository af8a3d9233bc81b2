//! The native module of the `autobatch` Python package (`autobatch._native`),
//! over the `autobatch` library API and the sampler of `autobatch-sample`:
//! [`compile`] a program, [`Program::run`] a batch with numpy arrays in and
//! out, and `_sample` (wrapped by the package's `autobatch.sample`).
//!
//! Bad input raises `ValueError` (a value that does not fit) or `TypeError`
//! (a Python value of a type that cannot be an input) with the command
//! line's one-line messages; a program that does not compile raises
//! `autobatch.CompileError` with the rendered diagnostics. Nothing panics
//! across the boundary: a panic inside autobatch (a bug) is caught and
//! raised as `RuntimeError`. The GIL is released while a batch runs.
//!
//! Architecture Invariant: a thin layer: every check and every message
//! comes from the `autobatch` and `autobatch-sample` crates; this crate only
//! converts between Python and their types.

mod convert;
mod sample;
mod train;

use std::panic::{catch_unwind, AssertUnwindSafe};

use autobatch::{BoundBatch, Compiled, Inputs, LaneMode, RunConfig, Strategy};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyList};

create_exception!(
    _native,
    CompileError,
    PyException,
    "The program does not compile; `str(err)` is every diagnostic, with file, line, column and source line."
);

/// Runs `f`, turning a panic (a bug in autobatch) into `RuntimeError`.
fn no_panic<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("a panic without a message");
        Err(PyRuntimeError::new_err(format!(
            "internal error: {message} (this is a bug in autobatch)"
        )))
    })
}

/// A whole number argument between `min` and `max`: `TypeError` if it is
/// not an integer, `ValueError` if it is out of range.
fn whole_number(value: &Bound<'_, PyAny>, name: &str, min: u64, max: u64) -> PyResult<u64> {
    let not_integer = || {
        PyTypeError::new_err(format!(
            "`{name}` must be an integer, found a Python `{}`",
            convert::type_name(value)
        ))
    };
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(not_integer());
    }
    // numpy's integers are integers too (they have `__index__`).
    let value = if value.is_instance_of::<pyo3::types::PyInt>() {
        value.clone()
    } else if value.hasattr("__index__").unwrap_or(false) {
        value.call_method0("__index__").map_err(|_| not_integer())?
    } else {
        return Err(not_integer());
    };
    match value.extract::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(PyValueError::new_err(format!(
            "`{name}` must be between {min} and {max}, found {value}"
        ))),
    }
}

/// An optional whole number argument (`None`: `default`).
fn optional_number(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
    min: u64,
    max: u64,
    default: u64,
) -> PyResult<u64> {
    match value {
        Some(value) if !value.is_none() => whole_number(value, name, min, max),
        _ => Ok(default),
    }
}

/// A strategy or lanes name, parsed by the library (whose message lists the names).
fn parse_name<T: std::str::FromStr<Err = String>>(text: &str) -> PyResult<T> {
    text.parse::<T>().map_err(PyValueError::new_err)
}

/// The names and values of a `batch` or `shared` dict, in order.
fn named_items<'py>(
    section: &str,
    dict: Option<&Bound<'py, PyAny>>,
) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let Some(dict) = dict.filter(|d| !d.is_none()) else {
        return Ok(Vec::new());
    };
    let dict = dict.downcast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "`{section}` must be a dict from names to values, found a Python `{}`",
            convert::type_name(dict)
        ))
    })?;
    dict.iter()
        .map(|(key, value)| match key.extract::<String>() {
            Ok(name) => Ok((name, value)),
            Err(_) => Err(PyTypeError::new_err(format!(
                "the names in `{section}` must be strings, found a Python `{}`",
                convert::type_name(&key)
            ))),
        })
        .collect()
}

/// The inputs of a run from the `batch` and `shared` dicts.
fn inputs_from_py(
    batch: Option<&Bound<'_, PyAny>>,
    shared: Option<&Bound<'_, PyAny>>,
) -> PyResult<Inputs> {
    let mut inputs = Inputs::new();
    for (name, value) in named_items("batch", batch)? {
        let members = convert::members(&name, &value)?;
        inputs = inputs.batched(&name, members);
    }
    for (name, value) in named_items("shared", shared)? {
        let value = convert::to_input(&value, &|| format!("`{name}` in `shared`"))?;
        inputs = inputs.shared(&name, value);
    }
    Ok(inputs)
}

/// The settings of a run from `run`'s keyword arguments
/// (`max_tape_bytes`: `None` for the default).
fn run_config(
    strategy: &str,
    seed: Option<&Bound<'_, PyAny>>,
    lanes: &str,
    threads: Option<&Bound<'_, PyAny>>,
    max_stack_depth: Option<&Bound<'_, PyAny>>,
    max_steps: Option<&Bound<'_, PyAny>>,
    max_tape_bytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<RunConfig> {
    let config = RunConfig {
        strategy: parse_name::<Strategy>(strategy)?,
        options: autobatch::RunOptions {
            seed: optional_number(seed, "seed", 0, u64::MAX, 0)?,
            threads: optional_number(
                threads,
                "threads",
                0,
                u64::MAX,
                autobatch::default_threads() as u64,
            )? as usize,
            max_stack_depth: optional_number(
                max_stack_depth,
                "max_stack_depth",
                1,
                usize::MAX as u64,
                autobatch::DEFAULT_MAX_STACK_DEPTH as u64,
            )? as usize,
            max_steps: optional_number(
                max_steps,
                "max_steps",
                1,
                u64::MAX,
                autobatch::DEFAULT_MAX_STEPS,
            )?,
            max_tape_bytes: match max_tape_bytes {
                Some(n) if !n.is_none() => Some(whole_number(n, "max_tape_bytes", 1, u64::MAX)?),
                _ => None,
            },
            batching: autobatch::BatchingOptions {
                lanes: parse_name::<LaneMode>(lanes)?,
                ..RunConfig::default().options.batching
            },
            ..RunConfig::default().options
        },
    };
    config
        .validate()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(config)
}

/// An input error as Python's `ValueError`.
fn value_error(error: autobatch::InputError) -> PyErr {
    PyValueError::new_err(error.message().to_owned())
}

/// The batch of a `run`: its inputs bound to `entry` by `bind`, or with
/// `grad_statics` by `bind_gradient` to the gradient of the summed results
/// with respect to those statics.
fn bind_entry(
    entry: &str,
    grad_statics: Option<&[String]>,
    inputs: Inputs,
    bind: impl FnOnce(&str, Inputs) -> Result<BoundBatch, autobatch::InputError>,
    bind_gradient: impl FnOnce(&str, &[&str], Inputs) -> Result<BoundBatch, autobatch::InputError>,
) -> PyResult<BoundBatch> {
    match grad_statics {
        None => bind(entry, inputs),
        Some(statics) => {
            let statics: Vec<&str> = statics.iter().map(String::as_str).collect();
            bind_gradient(entry, &statics, inputs)
        }
    }
    .map_err(value_error)
}

/// Runs a bound batch with the GIL released.
fn run_batch(py: Python<'_>, batch: BoundBatch, config: &RunConfig) -> PyResult<RunResult> {
    let result = py
        .allow_threads(|| catch_unwind(AssertUnwindSafe(|| batch.run(config))))
        .map_err(|_| {
            PyRuntimeError::new_err("internal error: the run panicked (this is a bug in autobatch)")
        })?
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    RunResult::from_result(py, result)
}

/// Compiles the program `source`; `path` names it in diagnostics.
#[pyfunction]
#[pyo3(signature = (source, path = "<string>"))]
fn compile(source: &str, path: &str) -> PyResult<Program> {
    no_panic(|| match autobatch::compile(source, path) {
        Ok(compiled) => Ok(Program { compiled }),
        Err(error) => Err(CompileError::new_err(
            error.render(false).trim_end().to_owned(),
        )),
    })
}

/// A program that compiled.
#[pyclass(frozen, module = "autobatch")]
struct Program {
    compiled: Compiled,
}

#[pymethods]
impl Program {
    /// The names of the functions that can be run as an entry.
    #[getter]
    fn entries(&self) -> Vec<String> {
        self.compiled
            .entry_names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The source the program was compiled from.
    #[getter]
    fn source(&self) -> &str {
        self.compiled.source()
    }

    /// Runs the entry function `entry` on a batch: `batch` gives each
    /// batched argument one value per member, `shared` the arguments and
    /// statics every member shares.
    #[pyo3(signature = (entry, batch = None, shared = None, *, strategy = "auto",
                        seed = None, lanes = "auto", threads = None, max_stack_depth = None,
                        max_steps = None, max_tape_bytes = None, grad_statics = None,
                        count_operations = false))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        entry: &str,
        batch: Option<&Bound<'_, PyAny>>,
        shared: Option<&Bound<'_, PyAny>>,
        strategy: &str,
        seed: Option<&Bound<'_, PyAny>>,
        lanes: &str,
        threads: Option<&Bound<'_, PyAny>>,
        max_stack_depth: Option<&Bound<'_, PyAny>>,
        max_steps: Option<&Bound<'_, PyAny>>,
        max_tape_bytes: Option<&Bound<'_, PyAny>>,
        grad_statics: Option<Vec<String>>,
        count_operations: bool,
    ) -> PyResult<RunResult> {
        no_panic(|| {
            let mut config = run_config(
                strategy,
                seed,
                lanes,
                threads,
                max_stack_depth,
                max_steps,
                max_tape_bytes,
            )?;
            config.options.count_operations = count_operations;
            let inputs = inputs_from_py(batch, shared)?;
            // The statics' arrays become the program's without a copy.
            let bound = bind_entry(
                entry,
                grad_statics.as_deref(),
                inputs,
                |e, inputs| self.compiled.bind_owned(e, inputs),
                |e, statics, inputs| self.compiled.bind_static_gradient_owned(e, statics, inputs),
            )?;
            run_batch(py, bound, &config)
        })
    }

    /// The program with its statics (every one) and any shared arguments
    /// in `shared` bound once, converted and kept: a `BoundProgram`, whose
    /// `run` converts only each batch.
    #[pyo3(signature = (shared = None))]
    fn bind(&self, shared: Option<&Bound<'_, PyAny>>) -> PyResult<BoundProgram> {
        no_panic(|| {
            let inputs = inputs_from_py(None, shared)?;
            let bound = self
                .compiled
                .with_statics_owned(inputs)
                .map_err(value_error)?;
            Ok(BoundProgram { bound })
        })
    }

    /// A copy of the program with `function` as the host function of the
    /// host primitive `name`: each member's call gets its operands (Python
    /// scalars or numpy arrays) and returns the value (a number, a bool, a
    /// list or a numpy array of the declared type and shape); an exception
    /// stops that member with a `host_error` naming it. Runs call it with
    /// the GIL held, one call at a time. With `batched=True` a call takes
    /// the calls of many members at once: each operand stacked over them
    /// (a numpy array whose first axis is the calls), and returns the values
    /// stacked the same way; an exception then retries each call alone, so
    /// that only the members whose own call fails get the error.
    #[pyo3(signature = (name, function, *, batched = false))]
    fn with_host(&self, name: &str, function: Py<PyAny>, batched: bool) -> PyResult<Program> {
        no_panic(|| {
            let Some(result) = self.compiled.host_result_type(name) else {
                let error = self
                    .compiled
                    .clone()
                    .with_host(name, |_| Err(String::new()))
                    .err()
                    .map(|e| e.message().to_owned())
                    .unwrap_or_default();
                return Err(PyValueError::new_err(error));
            };
            let compiled = if batched {
                let call = move |calls: &[Vec<autobatch::Value>]| {
                    Python::with_gil(|py| {
                        convert::call_host_batch(py, &function, calls, result.elem)
                    })
                };
                self.compiled.clone().with_batched_host(name, call)
            } else {
                let call = move |args: &[autobatch::Value]| {
                    Python::with_gil(|py| convert::call_host(py, &function, args, result.elem))
                };
                self.compiled.clone().with_host(name, call)
            };
            let compiled = compiled.map_err(|e| PyValueError::new_err(e.message().to_owned()))?;
            Ok(Program { compiled })
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<autobatch.Program {} ({})>",
            self.compiled.path(),
            self.compiled.entry_names().join(", ")
        )
    }
}

/// A program with its statics bound (`Program.bind`).
#[pyclass(module = "autobatch")]
struct BoundProgram {
    bound: autobatch::BoundProgram,
}

#[pymethods]
impl BoundProgram {
    /// Runs the entry function `entry` on a batch, as `Program.run` does,
    /// with the statics and shared arguments bound: `batch` and `shared`
    /// give only the rest.
    #[pyo3(signature = (entry, batch = None, shared = None, *, strategy = "auto",
                        seed = None, lanes = "auto", threads = None, max_stack_depth = None,
                        max_steps = None, max_tape_bytes = None, grad_statics = None,
                        count_operations = false))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        entry: &str,
        batch: Option<&Bound<'_, PyAny>>,
        shared: Option<&Bound<'_, PyAny>>,
        strategy: &str,
        seed: Option<&Bound<'_, PyAny>>,
        lanes: &str,
        threads: Option<&Bound<'_, PyAny>>,
        max_stack_depth: Option<&Bound<'_, PyAny>>,
        max_steps: Option<&Bound<'_, PyAny>>,
        max_tape_bytes: Option<&Bound<'_, PyAny>>,
        grad_statics: Option<Vec<String>>,
        count_operations: bool,
    ) -> PyResult<RunResult> {
        no_panic(|| {
            let mut config = run_config(
                strategy,
                seed,
                lanes,
                threads,
                max_stack_depth,
                max_steps,
                max_tape_bytes,
            )?;
            config.options.count_operations = count_operations;
            let inputs = inputs_from_py(batch, shared)?;
            let batch = bind_entry(
                entry,
                grad_statics.as_deref(),
                inputs,
                |e, inputs| self.bound.bind(e, &inputs),
                |e, statics, inputs| self.bound.bind_static_gradient(e, statics, &inputs),
            )?;
            run_batch(py, batch, &config)
        })
    }

    /// Trains the statics on the examples in `batch` (and `shared`): the
    /// training loop of `autobatch train`, with its options and defaults
    /// (see docs/training.md). `loss` is an entry returning one example's
    /// loss; each step is the gradient of a shuffled mini-batch's mean loss
    /// and the optimizer's update of the trained statics (`train`: their
    /// names; default every float static), in place: `statics` reads them
    /// back. With `eval` and `dev` (and `dev_shared`), the mean of `eval`
    /// over the dev examples after each epoch. `checkpoint` writes the
    /// statics and the optimizer's state after each epoch (`.npz`),
    /// `resume` continues from one. `dense_updates` updates every row of
    /// an embedding table at every step (default: the rows read, lazily).
    /// Returns the history: `{"steps": [...],
    /// "epochs": [...]}`, the records of `autobatch train --log FILE.json`.
    #[pyo3(signature = (loss, batch, shared = None, *, train = None, batch_size = None,
                        epochs = None, optimizer = "adam", lr = 1e-3, momentum = 0.0,
                        nesterov = false, weight_decay = None, betas = None, eps = None,
                        clip_norm = None, dense_updates = false, schedule = "constant",
                        warmup_steps = None, seed = None, eval = None, dev = None, dev_shared = None, checkpoint = None,
                        resume = None, strategy = "auto", lanes = "auto",
                        threads = None, max_stack_depth = None, max_steps = None, max_tape_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn train<'py>(
        &mut self,
        py: Python<'py>,
        loss: &str,
        batch: &Bound<'py, PyAny>,
        shared: Option<&Bound<'py, PyAny>>,
        train: Option<Vec<String>>,
        batch_size: Option<&Bound<'py, PyAny>>,
        epochs: Option<&Bound<'py, PyAny>>,
        optimizer: &str,
        lr: f64,
        momentum: f64,
        nesterov: bool,
        weight_decay: Option<f64>,
        betas: Option<(f64, f64)>,
        eps: Option<f64>,
        clip_norm: Option<f64>,
        dense_updates: bool,
        schedule: &str,
        warmup_steps: Option<&Bound<'py, PyAny>>,
        seed: Option<&Bound<'py, PyAny>>,
        eval: Option<String>,
        dev: Option<&Bound<'py, PyAny>>,
        dev_shared: Option<&Bound<'py, PyAny>>,
        checkpoint: Option<std::path::PathBuf>,
        resume: Option<std::path::PathBuf>,
        strategy: &str,
        lanes: &str,
        threads: Option<&Bound<'py, PyAny>>,
        max_stack_depth: Option<&Bound<'py, PyAny>>,
        max_steps: Option<&Bound<'py, PyAny>>,
        max_tape_bytes: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        no_panic(|| {
            let run = run_config(
                strategy,
                seed,
                lanes,
                threads,
                max_stack_depth,
                max_steps,
                max_tape_bytes,
            )?;
            let dev = match dev {
                Some(dev) if !dev.is_none() => Some(inputs_from_py(Some(dev), dev_shared)?),
                _ => None,
            };
            let optimizer = train::OptimizerOptions {
                kind: optimizer,
                lr,
                momentum,
                nesterov,
                weight_decay,
                betas,
                eps,
            };
            let config = autobatch_train::TrainConfig {
                loss: loss.to_owned(),
                trained: train.unwrap_or_default(),
                batch_size: optional_number(batch_size, "batch_size", 1, usize::MAX as u64, 32)?
                    as usize,
                epochs: optional_number(epochs, "epochs", 1, u64::MAX, 1)?,
                optimizer: optimizer.config()?,
                clip_norm,
                schedule: train::schedule(schedule)?,
                warmup_steps: optional_number(warmup_steps, "warmup_steps", 0, u64::MAX, 0)?,
                seed: run.options.seed,
                eval,
                dense_updates,
                run,
            };
            let options = train::TrainOptions {
                config,
                data: inputs_from_py(Some(batch), shared)?,
                dev,
                checkpoint,
                resume,
            };
            train::train(py, &mut self.bound, options)
        })
    }

    /// The statics by name, as numpy arrays (copies: change one with
    /// `set_static`).
    #[getter]
    fn statics(slf: Py<Self>) -> Statics {
        Statics { bound: slf }
    }

    /// Replaces the value of the static `name` (checked as when bound);
    /// the other statics stay as they are.
    fn set_static(&mut self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        no_panic(|| {
            let input = convert::to_input(value, &|| format!("static `{name}`"))?;
            self.bound.set_static(name, input).map_err(value_error)
        })
    }

    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.bound.static_names().collect();
        format!(
            "<autobatch.BoundProgram {} (statics: {})>",
            self.bound.compiled().path(),
            names.join(", ")
        )
    }
}

/// The statics of a `BoundProgram`, a read-only mapping from names to
/// numpy arrays (each read is a copy).
#[pyclass(module = "autobatch")]
struct Statics {
    bound: Py<BoundProgram>,
}

#[pymethods]
impl Statics {
    fn __getitem__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let bound = self.bound.borrow(py);
        match bound.bound.static_value(name) {
            Some(tensor) => convert::tensor_to_numpy(py, tensor),
            None => Err(pyo3::exceptions::PyKeyError::new_err(name.to_owned())),
        }
    }

    fn __contains__(&self, py: Python<'_>, name: &str) -> bool {
        self.bound.borrow(py).bound.static_value(name).is_some()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.bound.borrow(py).bound.static_names().count()
    }

    /// The names of the statics, in the program's order.
    fn keys(&self, py: Python<'_>) -> Vec<String> {
        let bound = self.bound.borrow(py);
        bound.bound.static_names().map(str::to_owned).collect()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyList::new(py, self.keys(py))?
            .try_iter()
            .map(Bound::into_any)
    }
}

/// The outcome of a run: per member a value or an error, and the figures.
/// The members' Python values are made when first read.
#[pyclass(frozen, module = "autobatch")]
struct RunResult {
    members: Vec<Result<autobatch::Value, autobatch::MemberError>>,
    values: GILOnceCell<Py<PyList>>,
    errors: GILOnceCell<Py<PyList>>,
    /// The run's figures (its members taken out): `stats` is made from
    /// them when first read.
    figures: autobatch::RunResult,
    stats: GILOnceCell<Py<PyDict>>,
    static_gradients: Py<PyDict>,
}

impl RunResult {
    fn from_result(py: Python<'_>, mut result: autobatch::RunResult) -> PyResult<RunResult> {
        let gradients = PyDict::new(py);
        for (name, gradient) in std::mem::take(&mut result.static_gradients) {
            let value = autobatch::Value::Tensor(gradient);
            gradients.set_item(name, convert::value_to_py(py, &value)?)?;
        }
        Ok(RunResult {
            members: std::mem::take(&mut result.members),
            figures: result,
            values: GILOnceCell::new(),
            errors: GILOnceCell::new(),
            stats: GILOnceCell::new(),
            static_gradients: gradients.unbind(),
        })
    }
}

#[pymethods]
impl RunResult {
    /// One per member: a Python scalar, a numpy array or a tuple; `None`
    /// where the member failed.
    #[getter]
    fn values(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let list = self.values.get_or_try_init(py, || {
            let values = PyList::empty(py);
            for member in &self.members {
                match member {
                    Ok(value) => values.append(convert::value_to_py(py, value)?)?,
                    Err(_) => values.append(py.None())?,
                }
            }
            Ok::<_, PyErr>(values.unbind())
        })?;
        Ok(list.clone_ref(py))
    }

    /// One per member: `None`, or `{"kind", "message", "line", "column"}`.
    #[getter]
    fn errors(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let list = self.errors.get_or_try_init(py, || {
            let errors = PyList::empty(py);
            for member in &self.members {
                match member {
                    Ok(_) => errors.append(py.None())?,
                    Err(error) => errors.append(convert::error_to_py(py, error)?)?,
                }
            }
            Ok::<_, PyErr>(errors.unbind())
        })?;
        Ok(list.clone_ref(py))
    }

    /// The run's figures, as `autobatch run --stats` writes them.
    #[getter]
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let dict = self.stats.get_or_try_init(py, || {
            convert::json_to_py(py, &self.figures.stats_to_json())?
                .downcast_into::<PyDict>()
                .map(Bound::unbind)
                .map_err(|_| PyRuntimeError::new_err("internal error: the stats are not an object"))
        })?;
        Ok(dict.clone_ref(py))
    }

    /// With `grad_statics`: each static's name and the gradient of the sum
    /// of the members' results with respect to it (a numpy array, or a
    /// float for a scalar static); else empty.
    #[getter]
    fn static_gradients(&self, py: Python<'_>) -> Py<PyDict> {
        self.static_gradients.clone_ref(py)
    }

    /// Every member's result in one numpy array whose first axis is the
    /// members (a tuple of such arrays for a tuple type); `ValueError` if
    /// a member failed or the members' shapes differ.
    fn stacked<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::stacked(py, &self.members)
    }

    fn __len__(&self) -> usize {
        self.members.len()
    }

    fn __repr__(&self) -> String {
        let failed = self.members.iter().filter(|m| m.is_err()).count();
        format!(
            "<autobatch.RunResult of {} members, {failed} failed>",
            self.members.len()
        )
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CompileError", m.py().get_type::<CompileError>())?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(sample::sample, m)?)?;
    m.add_class::<Program>()?;
    m.add_class::<RunResult>()?;
    m.add_class::<BoundProgram>()?;
    Ok(())
}
