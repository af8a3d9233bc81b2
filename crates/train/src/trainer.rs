//! The training loop: [`Trainer::step`] takes one mini-batch of the
//! epoch's shuffled order, runs the gradient of its mean loss, clips it,
//! and updates the trained statics; [`Trainer::fit`] runs the epochs with
//! an evaluation on a dev set after each. [`Trainer::state`] is everything
//! a resumed run needs to continue with the same bits
//! ([`Trainer::restore`]).

use std::fmt;
use std::time::Instant;

use autobatch::{
    ArrayInput, BoundProgram, Gradient, InputError, Inputs, RunConfig, RunError, RunResult, Value,
};
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use crate::batches::{batches_per_epoch, epoch_order};
use crate::clip::{clip_to, global_norm};
use crate::optim::{Moments, Optimizer, OptimizerConfig, OptimizerKind};
use crate::schedule::{Schedule, ScheduleKind};

/// What to train and how.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// The entry function giving one example's loss (a float scalar).
    pub loss: String,
    /// The statics to train, by name; none: every float static.
    pub trained: Vec<String>,
    /// Members per mini-batch (the last of an epoch may have fewer).
    pub batch_size: usize,
    pub epochs: u64,
    pub optimizer: OptimizerConfig,
    /// The largest global norm of a step's gradient (none: no clipping).
    pub clip_norm: Option<f64>,
    pub schedule: ScheduleKind,
    pub warmup_steps: u64,
    /// The seed of the epochs' shuffles.
    pub seed: u64,
    /// The entry run on the dev set after each epoch: one scalar per
    /// example (a float, an integer or a bool), averaged.
    pub eval: Option<String>,
    /// Update every element of the statics read only by rows (an
    /// embedding table) at every step, as other statics, instead of only
    /// the rows the step's mini-batch read (lazy updates, the default).
    pub dense_updates: bool,
    /// How every batch runs (strategy, threads, limits).
    pub run: RunConfig,
}

impl TrainConfig {
    /// Training `loss` with Adam at PyTorch's defaults, mini-batches of 32,
    /// one epoch, a constant learning rate, seed 0, every float static.
    pub fn new(loss: &str) -> TrainConfig {
        TrainConfig {
            loss: loss.to_owned(),
            trained: Vec::new(),
            batch_size: 32,
            epochs: 1,
            optimizer: OptimizerConfig::new(OptimizerKind::Adam),
            clip_norm: None,
            schedule: ScheduleKind::Constant,
            warmup_steps: 0,
            seed: 0,
            eval: None,
            dense_updates: false,
            run: RunConfig::default(),
        }
    }
}

/// Why training cannot start or go on.
#[derive(Debug)]
pub enum TrainError {
    /// The inputs (data, statics, checkpoint) do not fit the program.
    Input(InputError),
    /// A batch could not run at all.
    Run(RunError),
    /// An option or a checkpoint has no meaning.
    Config(String),
}

impl fmt::Display for TrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrainError::Input(error) => write!(f, "{error}"),
            TrainError::Run(error) => write!(f, "{error}"),
            TrainError::Config(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for TrainError {}

impl From<InputError> for TrainError {
    fn from(error: InputError) -> Self {
        TrainError::Input(error)
    }
}

impl From<RunError> for TrainError {
    fn from(error: RunError) -> Self {
        TrainError::Run(error)
    }
}

/// One optimizer step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRecord {
    /// From 1.
    pub epoch: u64,
    /// From 1, counted over the whole run.
    pub step: u64,
    /// The mean loss of the members that finished (NaN if none did).
    pub loss: f64,
    /// The global norm of the mean loss's gradient, before clipping.
    pub grad_norm: f64,
    /// The learning rate of the update.
    pub lr: f64,
    /// Members of the mini-batch per second of the step (wall time).
    pub items_per_second: f64,
    pub members: usize,
    /// The members whose loss faulted (they contributed nothing).
    pub faulted: usize,
    /// The first faulted member's index in the data set, and its error.
    pub first_fault: Option<(usize, String)>,
    /// Whether this step finished an epoch.
    pub ends_epoch: bool,
}

/// One evaluation on a dev set.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalRecord {
    /// The mean of the members' results (NaN if all faulted).
    pub mean: f64,
    pub members: usize,
    pub faulted: usize,
}

/// One epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochRecord {
    /// From 1.
    pub epoch: u64,
    /// The mean loss of the epoch's members that finished.
    pub loss: f64,
    pub faulted: usize,
    pub eval: Option<EvalRecord>,
}

/// The records of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub steps: Vec<StepRecord>,
    pub epochs: Vec<EpochRecord>,
}

/// What [`Trainer::fit`] tells its observer.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    Step(&'a StepRecord),
    Epoch(&'a EpochRecord),
}

/// Where a run is: epochs finished, mini-batches done in the current
/// epoch, steps taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    epoch: u64,
    batch: u64,
    step: u64,
}

/// A program, a data set and an optimizer, training the program's statics.
#[derive(Debug)]
pub struct Trainer {
    bound: BoundProgram,
    config: TrainConfig,
    trained: Vec<String>,
    data: Inputs,
    members: usize,
    optimizer: Optimizer,
    position: Position,
    /// The shuffled order of the current epoch.
    order: Vec<usize>,
    /// The current epoch's sum of losses, members finished and faulted.
    epoch_totals: (f64, usize, usize),
}

impl Trainer {
    /// A trainer of `bound`'s statics on `data` (the batched arguments of
    /// the loss entry, one per example, and any shared ones). Checks the
    /// options, the trained statics and the loss entry against the first
    /// example before any step.
    pub fn new(
        bound: BoundProgram,
        config: TrainConfig,
        data: Inputs,
    ) -> Result<Trainer, TrainError> {
        if config.batch_size == 0 {
            return Err(TrainError::Config(
                "the batch size must be at least 1".to_owned(),
            ));
        }
        config.optimizer.check().map_err(TrainError::Config)?;
        if let Some(clip) = config.clip_norm {
            if !(clip.is_finite() && clip > 0.0) {
                return Err(TrainError::Config(format!(
                    "the clipping norm must be a finite number above 0, not {clip}"
                )));
            }
        }
        let members = match data.batch_size_hint() {
            None => {
                return Err(TrainError::Config(
                    "the training data has no batched arguments: give the examples as `batch`"
                        .to_owned(),
                ))
            }
            Some(0) => {
                return Err(TrainError::Config(
                    "the training data has no examples".to_owned(),
                ))
            }
            Some(n) => n,
        };
        let trained = trained_statics(&bound, &config.trained)?;
        let names: Vec<&str> = trained.iter().map(String::as_str).collect();
        bound.bind_static_gradient(&config.loss, &names, &data.select_members(&[0]))?;
        let optimizer = Optimizer::new(config.optimizer, trained.len());
        Ok(Trainer {
            bound,
            config,
            trained,
            data,
            members,
            optimizer,
            position: Position {
                epoch: 0,
                batch: 0,
                step: 0,
            },
            order: Vec::new(),
            epoch_totals: (0.0, 0, 0),
        })
    }

    /// The program with its statics as trained so far.
    pub fn bound(&self) -> &BoundProgram {
        &self.bound
    }

    /// The program with its trained statics.
    pub fn into_bound(self) -> BoundProgram {
        self.bound
    }

    /// The names of the trained statics.
    pub fn trained(&self) -> &[String] {
        &self.trained
    }

    /// The mini-batches of an epoch.
    pub fn steps_per_epoch(&self) -> u64 {
        batches_per_epoch(self.members, self.config.batch_size) as u64
    }

    /// The steps of the whole run.
    pub fn total_steps(&self) -> u64 {
        self.steps_per_epoch() * self.config.epochs
    }

    /// The steps taken so far (also those of a run resumed from).
    pub fn steps_taken(&self) -> u64 {
        self.position.step
    }

    /// The epochs finished so far.
    pub fn epochs_done(&self) -> u64 {
        self.position.epoch
    }

    fn schedule(&self) -> Schedule {
        Schedule {
            kind: self.config.schedule,
            warmup: self.config.warmup_steps,
            total: self.total_steps(),
        }
    }

    /// Takes the next step; none when every epoch is done.
    pub fn step(&mut self) -> Result<Option<StepRecord>, TrainError> {
        if self.position.epoch >= self.config.epochs {
            return Ok(None);
        }
        let started = Instant::now();
        if self.position.batch == 0 || self.order.is_empty() {
            self.order = epoch_order(self.members, self.config.seed, self.position.epoch);
        }
        let size = self.config.batch_size;
        let start = self.position.batch as usize * size;
        let picked = self.order[start..(start + size).min(self.members)].to_vec();
        let names: Vec<&str> = self.trained.iter().map(String::as_str).collect();
        let mut batch = self.bound.bind_static_gradient(
            &self.config.loss,
            &names,
            &self.data.select_members(&picked),
        )?;
        if !self.config.dense_updates {
            batch = batch.with_row_gradients();
        }
        let result = batch.run(&self.config.run)?;
        // The batch shares the statics; dropped, it leaves them to update in place.
        drop(batch);
        let losses = member_losses(&result, &picked);
        let lr = self.config.optimizer.lr * self.schedule().factor(self.position.step);
        let mut grad_norm = f64::NAN;
        if losses.finished > 0 {
            let mut gradients = in_order(&self.trained, result);
            divide(&mut gradients, losses.finished);
            grad_norm = global_norm(gradients.iter().map(Gradient::values));
            if let Some(max_norm) = self.config.clip_norm {
                clip_to(
                    gradients.iter_mut().map(Gradient::values_mut),
                    grad_norm,
                    max_norm,
                );
            }
            self.optimizer
                .update(&mut self.bound, &self.trained, &gradients, lr)?;
        }
        let totals = &mut self.epoch_totals;
        totals.0 += losses.sum;
        totals.1 += losses.finished;
        totals.2 += picked.len() - losses.finished;
        self.position.step += 1;
        self.position.batch += 1;
        let ends_epoch = self.position.batch == self.steps_per_epoch();
        let epoch = self.position.epoch + 1;
        if ends_epoch {
            self.position.epoch += 1;
            self.position.batch = 0;
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(Some(StepRecord {
            epoch,
            step: self.position.step,
            loss: losses.sum / losses.finished as f64,
            grad_norm,
            lr,
            items_per_second: picked.len() as f64 / seconds.max(1e-9),
            members: picked.len(),
            faulted: picked.len() - losses.finished,
            first_fault: losses.first_fault,
            ends_epoch,
        }))
    }

    /// Runs the steps left; after each epoch, evaluates on `dev` (with the
    /// configured evaluation entry). Tells `observer` of each step and each
    /// epoch, with the trainer as it is then (to write a checkpoint).
    pub fn fit(
        &mut self,
        dev: Option<&Inputs>,
        observer: &mut dyn FnMut(&Trainer, Event<'_>),
    ) -> Result<History, TrainError> {
        if dev.is_some() != self.config.eval.is_some() {
            return Err(TrainError::Config(match dev {
                Some(_) => "a dev set needs an evaluation entry to run on it".to_owned(),
                None => "an evaluation entry needs a dev set to run on".to_owned(),
            }));
        }
        if let (Some(entry), Some(dev)) = (&self.config.eval, dev) {
            check_eval(&self.bound, entry, dev)?;
        }
        let mut history = History::default();
        while let Some(record) = self.step()? {
            observer(self, Event::Step(&record));
            let ends_epoch = record.ends_epoch;
            history.steps.push(record);
            if !ends_epoch {
                continue;
            }
            let eval = match (&self.config.eval, dev) {
                (Some(entry), Some(dev)) => Some(self.evaluate(entry, dev)?),
                _ => None,
            };
            let (sum, finished, faulted) = std::mem::replace(&mut self.epoch_totals, (0.0, 0, 0));
            let epoch = EpochRecord {
                epoch: self.position.epoch,
                loss: sum / finished as f64,
                faulted,
                eval,
            };
            observer(self, Event::Epoch(&epoch));
            history.epochs.push(epoch);
        }
        Ok(history)
    }

    /// Runs `entry` on `dev` with the statics as they are: the mean of the
    /// members' results (each one scalar) that finished.
    pub fn evaluate(&self, entry: &str, dev: &Inputs) -> Result<EvalRecord, TrainError> {
        let result = self.bound.bind(entry, dev)?.run(&self.config.run)?;
        let mut sum = 0.0;
        let mut finished = 0;
        for value in result.members.iter().flatten() {
            sum += scalar_f64(value).ok_or_else(|| not_scalar(entry))?;
            finished += 1;
        }
        Ok(EvalRecord {
            mean: sum / finished as f64,
            members: result.members.len(),
            faulted: result.members.len() - finished,
        })
    }

    /// Everything a resumed run needs, as named tensors: every static by
    /// its name; each trained static's moments as
    /// `optimizer/NAME/momentum_buffer` (SGD with momentum) or
    /// `optimizer/NAME/exp_avg` and `optimizer/NAME/exp_avg_sq` (Adam,
    /// AdamW); and `train/step`, `train/epoch`, `train/batch` (the position
    /// in the epoch), `train/optimizer_step` and `train/seed` (which, with
    /// the epoch, fixes the shuffle), as `uint64` scalars.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut state: Vec<(String, Tensor)> = self
            .bound
            .static_names()
            .zip(self.bound.statics())
            .map(|(name, tensor)| (name.to_owned(), tensor.clone()))
            .collect();
        for (name, moments) in self.trained.iter().zip(&self.optimizer.moments) {
            let (first, second) = moment_names(self.config.optimizer.kind);
            if let Some(tensor) = &moments.first {
                state.push((format!("optimizer/{name}/{first}"), tensor.clone()));
            }
            if let (Some(tensor), Some(second)) = (&moments.second, second) {
                state.push((format!("optimizer/{name}/{second}"), tensor.clone()));
            }
        }
        let position = [
            ("step", self.position.step),
            ("epoch", self.position.epoch),
            ("batch", self.position.batch),
            ("optimizer_step", self.optimizer.step),
            ("seed", self.config.seed),
        ];
        for (name, value) in position {
            state.push((
                format!("train/{name}"),
                Tensor::scalar(Scalar::Usize(value)),
            ));
        }
        state
    }

    /// Continues from `state` (as [`Trainer::state`] gave it, read back):
    /// the statics, the moments and the position; the seed is the one the
    /// state was trained with. The epoch's losses so far are not part of
    /// the state: a run resumed within an epoch reports that epoch's loss
    /// over its steps since the resumption.
    pub fn restore(&mut self, state: Vec<(String, Tensor)>) -> Result<(), TrainError> {
        let mut optimizer = Optimizer::new(self.config.optimizer, self.trained.len());
        let mut position = [None; 5];
        for (name, tensor) in state {
            if let Some(field) = name.strip_prefix("train/") {
                let k = ["step", "epoch", "batch", "optimizer_step", "seed"]
                    .iter()
                    .position(|f| *f == field)
                    .ok_or_else(|| unknown_entry(&name))?;
                position[k] = Some(count(&name, &tensor)?);
            } else if let Some(rest) = name.strip_prefix("optimizer/") {
                self.restore_moment(&mut optimizer, &name, rest, tensor)?;
            } else {
                let dtype = tensor.data.ty().name();
                self.bound
                    .set_static(&name, ArrayInput::new(tensor, dtype))?;
            }
        }
        let [Some(step), Some(epoch), Some(batch), Some(optimizer_step), Some(seed)] = position
        else {
            return Err(TrainError::Config(
                "the checkpoint has no position (train/step, train/epoch, train/batch, \
                 train/optimizer_step, train/seed)"
                    .to_owned(),
            ));
        };
        if batch >= self.steps_per_epoch() {
            return Err(TrainError::Config(format!(
                "the checkpoint is at mini-batch {batch} of an epoch, but an epoch of this data \
                 set at this batch size has {}",
                self.steps_per_epoch()
            )));
        }
        optimizer.step = optimizer_step;
        self.check_moments(&optimizer)?;
        self.optimizer = optimizer;
        self.config.seed = seed;
        self.position = Position { epoch, batch, step };
        self.order.clear();
        self.epoch_totals = (0.0, 0, 0);
        Ok(())
    }

    /// Puts the moment `name` (`NAME/KIND` after `optimizer/`) in place.
    fn restore_moment(
        &self,
        optimizer: &mut Optimizer,
        name: &str,
        rest: &str,
        tensor: Tensor,
    ) -> Result<(), TrainError> {
        let (static_name, kind) = rest.rsplit_once('/').ok_or_else(|| unknown_entry(name))?;
        let index = self
            .trained
            .iter()
            .position(|t| t == static_name)
            .ok_or_else(|| {
                TrainError::Config(format!(
                    "the checkpoint has optimizer state `{name}` for `{static_name}`, which is not trained (trained: {})",
                    self.trained.join(", ")
                ))
            })?;
        let (first, second) = moment_names(self.config.optimizer.kind);
        let value = self
            .bound
            .static_value(static_name)
            .expect("a trained static");
        if tensor.shape != value.shape || tensor.data.ty() != value.data.ty() {
            return Err(TrainError::Config(format!(
                "the checkpoint's `{name}` is not of the shape and element type of `{static_name}`"
            )));
        }
        let moments: &mut Moments = &mut optimizer.moments[index];
        if kind == first {
            moments.first = Some(tensor);
        } else if Some(kind) == second {
            moments.second = Some(tensor);
        } else {
            return Err(TrainError::Config(format!(
                "the checkpoint's `{name}` is no state of {} (a checkpoint resumes with the optimizer it was written by)",
                self.config.optimizer.kind
            )));
        }
        Ok(())
    }

    /// Checks that a restored optimizer that has stepped has every moment
    /// its kind keeps.
    fn check_moments(&self, optimizer: &Optimizer) -> Result<(), TrainError> {
        if optimizer.step == 0 {
            return Ok(());
        }
        let kind = self.config.optimizer.kind;
        let keeps_first = kind != OptimizerKind::Sgd || self.config.optimizer.momentum != 0.0;
        let (first, second) = moment_names(kind);
        for (name, moments) in self.trained.iter().zip(&optimizer.moments) {
            let missing = if keeps_first && moments.first.is_none() {
                Some(first)
            } else if second.is_some() && moments.second.is_none() {
                second
            } else {
                None
            };
            if let Some(missing) = missing {
                return Err(TrainError::Config(format!(
                    "the checkpoint has no `optimizer/{name}/{missing}`, which {kind} needs to resume"
                )));
            }
        }
        Ok(())
    }
}

/// The trained statics: those named (each a float static of `bound`), or
/// every float static.
fn trained_statics(bound: &BoundProgram, named: &[String]) -> Result<Vec<String>, TrainError> {
    let float = |tensor: &Tensor| matches!(tensor.data.ty(), ScalarType::F32 | ScalarType::F64);
    if named.is_empty() {
        let all: Vec<String> = bound
            .static_names()
            .zip(bound.statics())
            .filter(|(_, t)| float(t))
            .map(|(n, _)| n.to_owned())
            .collect();
        if all.is_empty() {
            return Err(TrainError::Config(format!(
                "{} has no float statics to train",
                bound.compiled().path()
            )));
        }
        return Ok(all);
    }
    for (k, name) in named.iter().enumerate() {
        if named[..k].contains(name) {
            return Err(TrainError::Config(format!(
                "the static `{name}` is named twice to train"
            )));
        }
        let names: Vec<&str> = bound.static_names().collect();
        match bound.static_value(name) {
            None => {
                return Err(TrainError::Config(format!(
                    "no static named `{name}` to train in {} (statics: {})",
                    bound.compiled().path(),
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )))
            }
            Some(t) if !float(t) => {
                return Err(TrainError::Config(format!(
                    "cannot train the static `{name}`: its elements are {}, not floats",
                    t.data.ty().name()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(named.to_vec())
}

/// The losses of a step's members that finished.
struct Losses {
    sum: f64,
    finished: usize,
    first_fault: Option<(usize, String)>,
}

/// The sum (in member order) of the finished members' losses; `picked`
/// gives each member's index in the data set.
fn member_losses(result: &RunResult, picked: &[usize]) -> Losses {
    let mut losses = Losses {
        sum: 0.0,
        finished: 0,
        first_fault: None,
    };
    for (member, outcome) in result.members.iter().enumerate() {
        match outcome {
            Ok(value) => {
                losses.sum += scalar_f64(value).expect("the loss entry returns a float scalar");
                losses.finished += 1;
            }
            Err(error) if losses.first_fault.is_none() => {
                losses.first_fault = Some((picked[member], error.to_string()));
            }
            Err(_) => {}
        }
    }
    losses
}

/// The gradients of a run, whole or kept to their rows, in the order of
/// the `trained` statics (each of the run's two lists is in that order).
fn in_order(trained: &[String], result: RunResult) -> Vec<Gradient> {
    let mut whole = result.static_gradients.into_iter().peekable();
    let mut rows = result.row_gradients.into_iter();
    trained
        .iter()
        .map(|name| match whole.next_if(|(n, _)| n == name) {
            Some((_, g)) => Gradient::Dense(g),
            None => match rows.next() {
                Some((n, g)) if n == *name => Gradient::Rows(g),
                _ => unreachable!("the run gives the gradient of every trained static"),
            },
        })
        .collect()
}

/// Divides each gradient (the sum over `finished` members) by `finished`,
/// in its element type: the gradient of the mean loss.
fn divide(gradients: &mut [Gradient], finished: usize) {
    for gradient in gradients {
        match &mut gradient.values_mut().data {
            Data::F32(values) => values.iter_mut().for_each(|x| *x /= finished as f32),
            Data::F64(values) => values.iter_mut().for_each(|x| *x /= finished as f64),
            _ => unreachable!("the gradient of a float static is a float"),
        }
    }
}

/// A scalar value as an `f64` (a bool as 0 or 1); none for other values.
fn scalar_f64(value: &Value) -> Option<f64> {
    match value {
        Value::Tensor(t) if t.shape.is_empty() => values_f64(t).first().copied(),
        _ => None,
    }
}

/// A tensor's elements as `f64`s, in row-major order.
pub fn values_f64(tensor: &Tensor) -> Vec<f64> {
    match &tensor.data {
        Data::Bool(v) => v.iter().map(|&b| f64::from(u8::from(b))).collect(),
        Data::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Data::Usize(v) => v.iter().map(|&x| x as f64).collect(),
        Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Data::F64(v) => v.clone(),
    }
}

/// Checks that `entry` takes the dev set's inputs and returns one scalar.
fn check_eval(bound: &BoundProgram, entry: &str, dev: &Inputs) -> Result<(), TrainError> {
    let batch = bound.bind(entry, dev)?;
    match batch.entry_function().results.as_slice() {
        [t] if t.is_scalar() => Ok(()),
        _ => Err(not_scalar(entry)),
    }
}

fn not_scalar(entry: &str) -> TrainError {
    TrainError::Config(format!(
        "the evaluation entry `{entry}` must return one scalar per example (a number or a bool), to average"
    ))
}

/// The checkpoint names of the first and second moments of `kind`.
fn moment_names(kind: OptimizerKind) -> (&'static str, Option<&'static str>) {
    match kind {
        OptimizerKind::Sgd => ("momentum_buffer", None),
        OptimizerKind::Adam | OptimizerKind::AdamW => ("exp_avg", Some("exp_avg_sq")),
    }
}

fn unknown_entry(name: &str) -> TrainError {
    TrainError::Config(format!(
        "the checkpoint's `{name}` is no static and no training state"
    ))
}

/// A checkpoint's count: a non-negative integer scalar.
fn count(name: &str, tensor: &Tensor) -> Result<u64, TrainError> {
    let value = match (&tensor.data, tensor.shape.is_empty()) {
        (Data::Usize(v), true) => Some(v[0]),
        (Data::I64(v), true) => u64::try_from(v[0]).ok(),
        (Data::I32(v), true) => u64::try_from(v[0]).ok(),
        _ => None,
    };
    value.ok_or_else(|| {
        TrainError::Config(format!(
            "the checkpoint's `{name}` must be a non-negative integer scalar"
        ))
    })
}
