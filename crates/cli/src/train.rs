//! `autobatch train`: the training loop of `autobatch-train` over a data
//! file, with a progress line, a log of every step (CSV or JSON), a loss
//! curve, and a checkpoint written after every epoch (`.npz` or
//! `.safetensors`) from which `--resume` continues with the same bits.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use autobatch::{Inputs, RunConfig, Strategy};
use autobatch_train::{
    Event, History, OptimizerConfig, OptimizerKind, ScheduleKind, StepRecord, TrainConfig,
    TrainError, Trainer,
};

use crate::arrays::{self, OutArray};
use crate::input::{self, compile_file};
use crate::{output, values, Failure};

// The arguments of `autobatch train` (its help is the variant's doc in main.rs).
#[derive(clap::Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct TrainArgs {
    /// The program file.
    program: PathBuf,
    /// The loss: an entry function of one example returning a float scalar.
    #[arg(long, value_name = "NAME")]
    entry: String,
    /// The training examples, in the format of `run --inputs` (JSON, or a
    /// .npz or .safetensors file of batch/NAME and shared/NAME arrays):
    /// the batched arguments are the examples.
    #[arg(long, value_name = "TRAIN.json|.npz")]
    data: PathBuf,
    /// The initial statics, by name: a .npz, .safetensors or JSON file ({NAME: value}).
    #[arg(long, value_name = "INIT.npz|.safetensors|.json")]
    statics: String,
    /// The statics to train (comma-separated) [default: every float static].
    #[arg(long, value_name = "W1,W2,..", value_delimiter = ',')]
    train: Vec<String>,
    /// Examples per mini-batch (the last of an epoch may have fewer).
    #[arg(long, value_name = "N", default_value_t = 32)]
    batch_size: usize,
    /// Passes over the training examples.
    #[arg(long, value_name = "N", value_parser = values::positive, default_value_t = 1)]
    epochs: usize,
    /// The optimizer, with PyTorch's definitions and defaults.
    #[arg(long, value_name = "sgd|adam|adamw", value_parser = optimizer_kind, default_value = "adam")]
    optimizer: OptimizerKind,
    /// The base learning rate.
    #[arg(long, value_name = "X", default_value_t = 1e-3)]
    lr: f64,
    /// SGD's momentum.
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    momentum: f64,
    /// SGD with Nesterov momentum (needs --momentum).
    #[arg(long)]
    nesterov: bool,
    /// Weight decay: L2 added to the gradient (sgd, adam), decoupled (adamw)
    /// [default: 0; 0.01 for adamw].
    #[arg(long, value_name = "X")]
    weight_decay: Option<f64>,
    /// Clip each step's gradient to this global norm.
    #[arg(long, value_name = "X")]
    clip_norm: Option<f64>,
    /// Update every row of the statics the loss reads only by rows (an
    /// embedding table) at every step, instead of only the rows the
    /// mini-batch read (lazy updates, as DyNet's and PyTorch's SparseAdam).
    #[arg(long)]
    dense_updates: bool,
    /// The learning rate after the warmup: constant, linear decay to 0,
    /// or cosine decay to 0 at the last step.
    #[arg(long, value_name = "constant|linear|cosine", value_parser = schedule_kind, default_value = "constant")]
    schedule: ScheduleKind,
    /// Steps of linear warmup from 0 to the base learning rate.
    #[arg(long, value_name = "N", default_value_t = 0)]
    warmup_steps: u64,
    /// The seed of the shuffles (and of the members' random streams).
    #[arg(long, value_name = "N", value_parser = values::seed, default_value_t = 0)]
    seed: u64,
    /// Worker threads, at most 4 per available core [default: the number of available cores].
    #[arg(long, value_name = "N", value_parser = values::threads)]
    threads: Option<usize>,
    /// The most bytes one member's gradient tape may hold (what the forward
    /// part saves for the backward part); a member whose tape would hold
    /// more stops with `tape_limit` [default: a quarter of the available
    /// memory].
    #[arg(long, value_name = "N", value_parser = values::positive)]
    max_tape_bytes: Option<usize>,
    #[arg(long, value_parser = values::strategy, default_value = "auto", help = values::strategy_help(), long_help = values::strategy_long_help())]
    strategy: Strategy,
    /// An entry run on --dev after each epoch, one scalar per example
    /// (a number or a bool), averaged (e.g. accuracy).
    #[arg(long, value_name = "NAME", requires = "dev")]
    eval: Option<String>,
    /// The dev examples for --eval, in the format of --data.
    #[arg(long, value_name = "DEV.json|.npz", requires = "eval")]
    dev: Option<PathBuf>,
    /// Write every step's record to this file: CSV, or JSON by a .json
    /// name (`-`: CSV on stdout).
    #[arg(long, value_name = "FILE.csv|FILE.json|-")]
    log: Option<PathBuf>,
    /// Draw the loss curve into this directory (created if needed):
    /// loss.png and loss.svg.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Write the statics and the optimizer's state to this file after
    /// every epoch (.npz or .safetensors).
    #[arg(long, value_name = "FILE.npz|.safetensors")]
    checkpoint: Option<PathBuf>,
    /// Continue from a checkpoint (its statics replace --statics').
    #[arg(long, value_name = "FILE.npz|.safetensors")]
    resume: Option<PathBuf>,
}

fn optimizer_kind(text: &str) -> Result<OptimizerKind, String> {
    text.parse()
}

fn schedule_kind(text: &str) -> Result<ScheduleKind, String> {
    text.parse()
}

/// A training error as the command reports it.
fn failure(error: TrainError) -> Failure {
    Failure::Usage(message(error))
}

fn message(error: TrainError) -> String {
    match error {
        TrainError::Input(e) => e.message().to_owned(),
        other => other.to_string(),
    }
}

/// `autobatch train`.
pub fn train(args: TrainArgs) -> Result<(), Failure> {
    for path in [&args.log, &args.checkpoint].into_iter().flatten() {
        output::check(path)?;
    }
    check_checkpoint_name(args.checkpoint.as_deref())?;
    let compiled = compile_file(&args.program)?;
    let (init, sources) = input::read_run_inputs(&[], std::slice::from_ref(&args.statics))?;
    let bound = compiled
        .with_statics_owned(init)
        .map_err(|e| sources.error(e))?;
    let (data, _) = input::read_run_inputs(std::slice::from_ref(&args.data), &[])?;
    let dev = match &args.dev {
        Some(path) => Some(input::read_run_inputs(std::slice::from_ref(path), &[])?.0),
        None => None,
    };
    let mut trainer = Trainer::new(bound, config(&args), data).map_err(failure)?;
    if let Some(path) = &args.resume {
        let state = input::read_checkpoint(path)?
            .into_iter()
            .map(|a| (a.name, a.array.tensor))
            .collect();
        trainer
            .restore(state)
            .map_err(|e| Failure::Usage(format!("{}: {}", input::source_name(path), message(e))))?;
    }
    let history = fit(&mut trainer, dev.as_ref(), &args)?;
    if let Some(path) = &args.log {
        write_log(path, &history)?;
    }
    if let Some(dir) = &args.plots {
        draw_loss(dir, &history, args.eval.as_deref())?;
    }
    Ok(())
}

/// The library's options from the command line's.
fn config(args: &TrainArgs) -> TrainConfig {
    let defaults = OptimizerConfig::new(args.optimizer);
    TrainConfig {
        loss: args.entry.clone(),
        trained: args.train.clone(),
        batch_size: args.batch_size,
        epochs: args.epochs as u64,
        optimizer: OptimizerConfig {
            lr: args.lr,
            momentum: args.momentum,
            nesterov: args.nesterov,
            weight_decay: args.weight_decay.unwrap_or(defaults.weight_decay),
            ..defaults
        },
        clip_norm: args.clip_norm,
        schedule: args.schedule,
        warmup_steps: args.warmup_steps,
        seed: args.seed,
        eval: args.eval.clone(),
        dense_updates: args.dense_updates,
        run: RunConfig {
            strategy: args.strategy,
            options: autobatch::RunOptions {
                seed: args.seed,
                threads: args.threads.unwrap_or_else(autobatch::default_threads),
                max_tape_bytes: args.max_tape_bytes.map(|n| n as u64),
                count_operations: false,
                ..RunConfig::default().options
            },
        },
    }
}

/// Runs the epochs with the progress line, writing the checkpoint after
/// each epoch; reports members that faulted on stderr.
fn fit(trainer: &mut Trainer, dev: Option<&Inputs>, args: &TrainArgs) -> Result<History, Failure> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(trainer.total_steps());
        bar.set_position(trainer.steps_taken());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} step {pos}/{len} {msg}")
                .expect("a valid template"),
        );
        bar
    });
    let mut written: Result<(), Failure> = Ok(());
    let mut warned = false;
    let history = trainer.fit(dev, &mut |trainer, event| match event {
        Event::Step(step) => {
            if let (Some((member, message)), false) = (&step.first_fault, warned) {
                warned = true;
                let text = format!(
                    "warning: step {}: {} of {} examples faulted and were left out (first: example {member}: {message})",
                    step.step, step.faulted, step.members
                );
                match &bar {
                    Some(bar) => bar.println(text),
                    None => eprintln!("{text}"),
                }
            }
            if let Some(bar) = &bar {
                bar.set_position(step.step);
                bar.set_message(format!("loss {:.6} {:.0} items/s", step.loss, step.items_per_second));
            }
        }
        Event::Epoch(epoch) => {
            let dev = epoch
                .eval
                .as_ref()
                .map(|e| format!(", dev {:.6}", e.mean))
                .unwrap_or_default();
            let faulted = if epoch.faulted > 0 {
                format!(", {} examples faulted", epoch.faulted)
            } else {
                String::new()
            };
            let text = format!("epoch {}: loss {:.6}{dev}{faulted}", epoch.epoch, epoch.loss);
            match &bar {
                Some(bar) => bar.println(text),
                None => eprintln!("{text}"),
            }
            if let (Some(path), Ok(())) = (&args.checkpoint, &written) {
                written = write_checkpoint(path, trainer);
            }
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let history = history.map_err(failure)?;
    written?;
    Ok(history)
}

fn check_checkpoint_name(path: Option<&Path>) -> Result<(), Failure> {
    match path {
        Some(path) if !is_checkpoint_name(path) => Err(Failure::Usage(format!(
            "--checkpoint {}: a checkpoint is written as .npz or .safetensors",
            path.display()
        ))),
        _ => Ok(()),
    }
}

fn is_checkpoint_name(path: &Path) -> bool {
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    matches!(extension.as_deref(), Some("npz" | "safetensors"))
}

/// Writes the trainer's state to `path`, .npz or .safetensors by its name.
fn write_checkpoint(path: &Path, trainer: &Trainer) -> Result<(), Failure> {
    let state = trainer.state();
    let safetensors = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    let bytes = if safetensors {
        arrays::write_safetensors(&state)
    } else {
        let arrays: Vec<(String, OutArray)> = state
            .into_iter()
            .map(|(n, t)| (n, OutArray::Tensor(t)))
            .collect();
        arrays::write_npz(&arrays)
    };
    let bytes = bytes
        .map_err(|reason| Failure::Usage(format!("cannot write `{}`: {reason}", path.display())))?;
    output::write_bytes(path, &bytes)
}

/// The step log: CSV (`-`: stdout), or JSON by a `.json` name.
fn write_log(path: &Path, history: &History) -> Result<(), Failure> {
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if json {
        let text = log_json(history).to_string();
        return output::write(path, &mut |out| writeln!(out, "{text}"));
    }
    output::write(path, &mut |out| {
        writeln!(
            out,
            "epoch,step,loss,grad_norm,lr,items_per_second,members,faulted,dev"
        )?;
        for step in &history.steps {
            let dev = if step.ends_epoch {
                history
                    .epochs
                    .iter()
                    .find(|e| e.epoch == step.epoch)
                    .and_then(|e| e.eval.as_ref())
                    .map(|e| e.mean.to_string())
                    .unwrap_or_default()
            } else {
                String::new()
            };
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{dev}",
                step.epoch,
                step.step,
                step.loss,
                step.grad_norm,
                step.lr,
                step.items_per_second,
                step.members,
                step.faulted
            )?;
        }
        Ok(())
    })
}

fn log_json(history: &History) -> serde_json::Value {
    let number = autobatch::float_to_json;
    let step = |s: &StepRecord| {
        serde_json::json!({
            "epoch": s.epoch, "step": s.step, "loss": number(s.loss),
            "grad_norm": number(s.grad_norm), "lr": number(s.lr),
            "items_per_second": number(s.items_per_second),
            "members": s.members, "faulted": s.faulted,
        })
    };
    let epochs: Vec<serde_json::Value> = history
        .epochs
        .iter()
        .map(|e| {
            let dev = e.eval.as_ref().map(|d| {
                serde_json::json!({"mean": number(d.mean), "members": d.members, "faulted": d.faulted})
            });
            serde_json::json!({"epoch": e.epoch, "loss": number(e.loss), "faulted": e.faulted, "dev": dev})
        })
        .collect();
    serde_json::json!({"steps": history.steps.iter().map(step).collect::<Vec<_>>(), "epochs": epochs})
}

/// The loss curve (loss per step, dev metric per epoch) as loss.png and
/// loss.svg in `dir`.
fn draw_loss(dir: &Path, history: &History, eval: Option<&str>) -> Result<(), Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Usage(format!("cannot create `{}`: {e}", dir.display())))?;
    let step_of_epoch = |epoch: u64| {
        history
            .steps
            .iter()
            .rfind(|s| s.epoch == epoch)
            .map_or(0.0, |s| s.step as f64)
    };
    let picture = autobatch_plots::LossPicture {
        losses: history
            .steps
            .iter()
            .map(|s| (s.step as f64, s.loss))
            .collect(),
        dev: history
            .epochs
            .iter()
            .filter_map(|e| Some((step_of_epoch(e.epoch), e.eval.as_ref()?.mean)))
            .collect(),
        dev_name: eval.unwrap_or_default().to_owned(),
    };
    for extension in ["png", "svg"] {
        let path = dir.join(format!("loss.{extension}"));
        output::draw(&path, |to| {
            autobatch_plots::loss_curve(to, &picture)
                .map(drop)
                .map_err(|e| e.to_string())
        })?;
    }
    Ok(())
}
