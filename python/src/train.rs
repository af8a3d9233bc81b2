//! `BoundProgram.train`: the training loop of `autobatch-train` (the one
//! `autobatch train` runs) over the bound program's statics, which it
//! updates where they are bound; `bound.statics` reads them back. The loop
//! runs without the GIL; the checkpoint after each epoch (`.npz`, written
//! with numpy) takes it back to write.

use std::path::PathBuf;

use autobatch::Inputs;
use autobatch_train::{
    EpochRecord, Event, History, OptimizerConfig, OptimizerKind, ScheduleKind, StepRecord,
    TrainConfig, TrainError, Trainer,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{array_input, tensor_to_numpy};

/// What one `train` call trains on and where it keeps its checkpoints.
pub struct TrainOptions {
    pub config: TrainConfig,
    pub data: Inputs,
    pub dev: Option<Inputs>,
    pub checkpoint: Option<PathBuf>,
    pub resume: Option<PathBuf>,
}

/// The optimizer's options; `None`s take PyTorch's defaults for the kind.
pub struct OptimizerOptions<'a> {
    pub kind: &'a str,
    pub lr: f64,
    pub momentum: f64,
    pub nesterov: bool,
    pub weight_decay: Option<f64>,
    pub betas: Option<(f64, f64)>,
    pub eps: Option<f64>,
}

impl OptimizerOptions<'_> {
    pub fn config(&self) -> PyResult<OptimizerConfig> {
        let kind: OptimizerKind = self.kind.parse().map_err(PyValueError::new_err)?;
        let defaults = OptimizerConfig::new(kind);
        let (beta1, beta2) = self.betas.unwrap_or((defaults.beta1, defaults.beta2));
        Ok(OptimizerConfig {
            lr: self.lr,
            momentum: self.momentum,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay.unwrap_or(defaults.weight_decay),
            beta1,
            beta2,
            eps: self.eps.unwrap_or(defaults.eps),
            ..defaults
        })
    }
}

/// A schedule by its name.
pub fn schedule(name: &str) -> PyResult<ScheduleKind> {
    name.parse().map_err(PyValueError::new_err)
}

/// A training error as Python's `ValueError`, with the command line's message.
fn train_error(error: TrainError) -> PyErr {
    PyValueError::new_err(match error {
        TrainError::Input(e) => e.message().to_owned(),
        other => other.to_string(),
    })
}

/// A checkpoint path must name an `.npz` file (numpy writes it).
fn check_npz(path: &std::path::Path, option: &str) -> PyResult<()> {
    let npz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npz"));
    if npz {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!(
            "`{option}`: {} is not an .npz file (the Python package writes and reads checkpoints as .npz)",
            path.display()
        )))
    }
}

/// Trains `bound`'s statics as `options` say; the history as a dict of
/// `steps` and `epochs` (the records of `autobatch train --log FILE.json`).
pub fn train<'py>(
    py: Python<'py>,
    bound: &mut autobatch::BoundProgram,
    options: TrainOptions,
) -> PyResult<Bound<'py, PyDict>> {
    for (path, option) in [
        (&options.checkpoint, "checkpoint"),
        (&options.resume, "resume"),
    ] {
        if let Some(path) = path {
            check_npz(path, option)?;
        }
    }
    // The trainer owns a handle on the statics while it runs; the trained
    // program replaces `bound` when it is done (or has failed), so an
    // error before the first step leaves `bound` as it was.
    let mut trainer =
        Trainer::new(bound.clone(), options.config, options.data).map_err(train_error)?;
    if let Some(path) = &options.resume {
        let state = read_npz(py, path)?;
        trainer.restore(state).map_err(|e| {
            PyValueError::new_err(format!("{}: {}", path.display(), train_error(e)))
        })?;
    }
    let checkpoint = options.checkpoint;
    let dev = options.dev;
    let mut written: PyResult<()> = Ok(());
    let history = py.allow_threads(|| {
        trainer.fit(dev.as_ref(), &mut |trainer, event| {
            if let (Event::Epoch(_), Some(path), Ok(())) = (event, &checkpoint, &written) {
                written = Python::with_gil(|py| write_npz(py, path, trainer));
            }
        })
    });
    *bound = trainer.into_bound();
    let history = history.map_err(train_error)?;
    written?;
    history_to_py(py, &history)
}

/// The trainer's state (statics, optimizer moments, position) written as
/// an `.npz` with `numpy.savez`, as `autobatch train --checkpoint` writes it.
fn write_npz(py: Python<'_>, path: &std::path::Path, trainer: &Trainer) -> PyResult<()> {
    let arrays = PyDict::new(py);
    for (name, tensor) in trainer.state() {
        arrays.set_item(name, tensor_to_numpy(py, &tensor)?)?;
    }
    py.import("numpy")?
        .call_method("savez", (path,), Some(&arrays))
        .map_err(|e| PyRuntimeError::new_err(format!("cannot write `{}`: {e}", path.display())))?;
    Ok(())
}

/// The named arrays of an `.npz` checkpoint, read with `numpy.load`.
fn read_npz(
    py: Python<'_>,
    path: &std::path::Path,
) -> PyResult<Vec<(String, autobatch_types::Tensor)>> {
    let file = py.import("numpy")?.call_method1("load", (path,))?;
    let mut state = Vec::new();
    let names: Vec<String> = file.getattr("files")?.extract()?;
    for name in names {
        let array = file.get_item(&name)?;
        let array = array.downcast::<numpy::PyUntypedArray>()?;
        let input = array_input(array, &|| format!("`{name}` of {}", path.display()))?;
        state.push((name, input.tensor));
    }
    file.call_method0("close")?;
    Ok(state)
}

/// The history as `{"steps": [...], "epochs": [...]}`.
fn history_to_py<'py>(py: Python<'py>, history: &History) -> PyResult<Bound<'py, PyDict>> {
    let steps = PyList::empty(py);
    for step in &history.steps {
        steps.append(step_to_py(py, step)?)?;
    }
    let epochs = PyList::empty(py);
    for epoch in &history.epochs {
        epochs.append(epoch_to_py(py, epoch)?)?;
    }
    let out = PyDict::new(py);
    out.set_item("steps", steps)?;
    out.set_item("epochs", epochs)?;
    Ok(out)
}

fn step_to_py<'py>(py: Python<'py>, step: &StepRecord) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("epoch", step.epoch)?;
    out.set_item("step", step.step)?;
    out.set_item("loss", step.loss)?;
    out.set_item("grad_norm", step.grad_norm)?;
    out.set_item("lr", step.lr)?;
    out.set_item("items_per_second", step.items_per_second)?;
    out.set_item("members", step.members)?;
    out.set_item("faulted", step.faulted)?;
    let fault = step.first_fault.as_ref().map(|(member, message)| {
        let fault = PyDict::new(py);
        fault.set_item("example", member)?;
        fault.set_item("message", message)?;
        Ok::<_, PyErr>(fault)
    });
    out.set_item("first_fault", fault.transpose()?)?;
    Ok(out)
}

fn epoch_to_py<'py>(py: Python<'py>, epoch: &EpochRecord) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("epoch", epoch.epoch)?;
    out.set_item("loss", epoch.loss)?;
    out.set_item("faulted", epoch.faulted)?;
    let dev = epoch.eval.as_ref().map(|eval| {
        let dev = PyDict::new(py);
        dev.set_item("mean", eval.mean)?;
        dev.set_item("members", eval.members)?;
        dev.set_item("faulted", eval.faulted)?;
        Ok::<_, PyErr>(dev)
    });
    out.set_item("dev", dev.transpose()?)?;
    Ok(out)
}
