//! The `autobatch` command: argument parsing and printing over the
//! `autobatch` library, nothing more (see `/work/shared/spec/cli.md`, a contract).
//!
//! Exit codes: 0 the command did its work (in `run`, some members may have
//! errors); 1 the program does not compile (diagnostics on stderr); 2 bad
//! usage or bad input data, reported as one line on stderr starting with
//! `error: `; 130 Ctrl-C stopped a `run` or `sample`, after it wrote what
//! had finished (`progress`). No input makes it panic with a backtrace: a panic hook turns
//! any bug into one `error: internal error: ...` line and exit code 2.
//!
//! The help of `--strategy`, `--lanes` and `--block-choice` lists the
//! registered executors and the options each reads (`Strategy`).
//!
//! Started by an MPI launcher as the ranks of a job (`mpirun -n K autobatch
//! run ...`, built with `--features mpi`), the command shards the batch
//! (`job`): rank 0 reads and checks everything and writes every output,
//! the bytes one process writes; an error is printed once, by rank 0
//! (naming the rank it happened on), and every rank exits with the same
//! code. Every output is written by `output`: `-` is standard output,
//! links are followed, devices and FIFOs are written in place, and a
//! regular file is replaced whole once complete. `--inputs -` and `--data
//! -` read standard input (`input`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use autobatch::shard::Communicator;
use autobatch::{BlockChoice, CompileError, Compiled, LaneMode, RunConfig, Strategy};
use clap::{Parser, Subcommand};

mod arrays;
mod input;
mod job;
#[cfg(feature = "mpi")]
mod mpi;
mod output;
mod pictures;
mod progress;
mod results;
mod train;
mod values;

use input::{compile_file, read_file, read_program};

/// Compile and run batched programs written in autobatch's Rust-syntax language.
#[derive(Parser, Debug)]
#[command(name = "autobatch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and type-check a program.
    Check {
        /// The program file.
        program: PathBuf,
    },
    /// Print the program's IR in its text form.
    Ir {
        /// The program file.
        program: PathBuf,
        /// Only the functions reachable from this entry function.
        #[arg(long, value_name = "NAME")]
        entry: Option<String>,
        /// The IR after lowering to the explicit-stack form of the program-counter strategy.
        #[arg(long)]
        lowered: bool,
        /// The IR of the gradient of `--entry` with respect to these
        /// statics (as `run --grad-statics` runs it).
        #[arg(
            long,
            value_name = "S1,S2,..",
            value_delimiter = ',',
            requires = "entry",
            conflicts_with = "lowered"
        )]
        grad_statics: Vec<String>,
    },
    /// Run an entry function on a batch of inputs and print each member's result as JSON.
    Run(RunArgs),
    /// Run the No-U-Turn Sampler on a model: warmup, then draws, all chains as one batch.
    Sample(SampleArgs),
    /// Train a program's statics on a data set (see docs/training.md).
    Train(train::TrainArgs),
}

// The arguments of `autobatch run` (its help is the variant's doc above).
#[derive(clap::Args, Debug)]
#[command(allow_negative_numbers = true)]
struct RunArgs {
    /// The program file.
    program: PathBuf,
    /// The function to run.
    #[arg(long, value_name = "NAME")]
    entry: String,
    /// The inputs: {"batch": {NAME: [one value per member]}, "shared": {NAME: value}};
    /// `-` reads standard input. Also a .npz or .safetensors file whose
    /// arrays are named batch/NAME (the first axis: the members) and
    /// shared/NAME. May be given more than once.
    #[arg(
        long,
        value_name = "INPUTS.json|.npz",
        required_unless_present = "shared"
    )]
    inputs: Vec<PathBuf>,
    /// Shared values (statics and shared arguments) by name: a .npz,
    /// .safetensors or JSON file ({NAME: value}), or NAME=FILE.npy for one
    /// array. May be given more than once.
    #[arg(long, value_name = "FILE|NAME=FILE.npy")]
    shared: Vec<String>,
    #[arg(long, value_parser = values::strategy, default_value = "auto", help = values::strategy_help(), long_help = values::strategy_long_help())]
    strategy: Strategy,
    #[arg(long, value_parser = values::lanes, default_value = "auto", help = values::lanes_help())]
    lanes: LaneMode,
    #[arg(long, value_parser = values::block_choice, default_value = "smallest-index", help = values::block_choice_help())]
    block_choice: BlockChoice,
    /// The deepest chain of calls one member may have (at least 1).
    #[arg(long, value_name = "N", value_parser = values::max_stack_depth, default_value_t = autobatch::DEFAULT_MAX_STACK_DEPTH)]
    max_stack_depth: usize,
    /// The most basic blocks one member may execute (at least 1).
    #[arg(long, value_name = "N", value_parser = values::max_steps, default_value_t = autobatch::DEFAULT_MAX_STEPS)]
    max_steps: u64,
    /// The seed of the members' random streams.
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
    /// The most instances (of `join`, `map`, `pfor`) alive at once; the
    /// others start as earlier ones end (results do not change) [default:
    /// as many as a quarter of the available memory holds].
    #[arg(long, value_name = "N", value_parser = values::positive)]
    max_instances: Option<usize>,
    /// Add the run's figures (`stats`) to the output.
    #[arg(long)]
    stats: bool,
    /// Statics (comma-separated) to differentiate the sum of the members'
    /// results with respect to: the entry returns each member's loss (a
    /// float scalar); the output gains `static_gradients`, the gradient of
    /// the sum (one process).
    #[arg(long, value_name = "S1,S2,..", value_delimiter = ',')]
    grad_statics: Vec<String>,
    /// Write the results to this file instead of stdout (`-`: stdout); a
    /// name ending in .npz writes them as arrays: `result` (the members
    /// stacked), `ok`, `error/kind`, `error/message`, `error/line`,
    /// `error/column` (see docs/language.md).
    #[arg(long, value_name = "RESULT.json|.npz")]
    output: Option<PathBuf>,
    /// Draw the run's profile into this picture, SVG or PNG by its
    /// extension: the lane utilization of every step, and each block's
    /// steps and lanes (program-counter and local-static; one process).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    profile: Option<PathBuf>,
}

// The arguments of `autobatch sample` (its help is the variant's doc above).
#[derive(clap::Args, Debug)]
#[command(allow_negative_numbers = true)]
struct SampleArgs {
    /// The model: defines `fn log_density(theta: [f64; D]) -> f64`.
    model: PathBuf,
    /// The model's statics, by name (and optionally its symbolic
    /// dimensions); `-` reads standard input.
    #[arg(long, value_name = "DATA.json")]
    data: PathBuf,
    /// The number of chains.
    #[arg(long, value_name = "N", value_parser = values::positive, default_value_t = 4)]
    chains: usize,
    /// Warmup (adaptation) iterations per chain; warmup and draws
    /// together at most 2147483647.
    #[arg(long, value_name = "N", value_parser = values::warmup, default_value_t = 1000)]
    warmup: usize,
    /// Draws per chain after warmup.
    #[arg(long, value_name = "N", value_parser = values::iterations, default_value_t = 1000)]
    draws: usize,
    /// The seed of the chains' random streams.
    #[arg(long, value_name = "N", value_parser = values::seed, default_value_t = 0)]
    seed: u64,
    #[arg(long, value_parser = values::strategy, default_value = autobatch_sample::DEFAULT_STRATEGY.name(), help = values::strategy_help(), long_help = values::strategy_long_help())]
    strategy: Strategy,
    /// The deepest tree of a trajectory (at most 2^N - 1 leapfrog steps), from 1 to 30.
    #[arg(long, value_name = "N", value_parser = values::tree_depth, default_value_t = 10)]
    max_depth: u32,
    /// The acceptance statistic warmup adapts the step size towards
    /// (Stan's adapt_delta); raise it (0.9, 0.95) against divergences.
    #[arg(long, value_name = "X", value_parser = values::target_accept, default_value_t = 0.8)]
    target_accept: f64,
    /// Worker threads, at most 4 per available core [default: the number of available cores].
    #[arg(long, value_name = "N", value_parser = values::threads)]
    threads: Option<usize>,
    /// The most bytes one member's gradient tape may hold (what the forward
    /// part saves for the backward part); a member whose tape would hold
    /// more stops with `tape_limit` [default: a quarter of the available
    /// memory].
    #[arg(long, value_name = "N", value_parser = values::positive)]
    max_tape_bytes: Option<usize>,
    /// Write the draws to this CSV file (`-`: stdout, and the summary goes
    /// to stderr). Columns:
    /// chain,draw,theta[0],...,lp__,accept_stat__,treedepth__,n_leapfrog__,divergent__,energy__
    /// (a `fn model`'s parameters by name in place of theta: tau,theta_tilde.0,...)
    #[arg(long, value_name = "DRAWS.csv")]
    output: Option<PathBuf>,
    /// Write the sampler's figures to this JSON file (`-`: stdout, and the
    /// summary goes to stderr).
    #[arg(long, value_name = "STATS.json")]
    stats: Option<PathBuf>,
    /// Draw pictures of the draws into this directory (created if
    /// needed), as PNG and SVG: trace-theta-I and rank-theta-I for every
    /// parameter (trace-tau, trace-theta_tilde-3 for a `fn model`'s), and
    /// energy.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Adapt one step size and one metric for all chains, pooling their
    /// warmup: chains then wait for one another during warmup, and a
    /// chain's draws depend on the others. Without it, each chain adapts
    /// alone and no chain ever waits for another.
    #[arg(long)]
    pooled_adaptation: bool,
    /// With --pooled-adaptation: the warmup iterations between two
    /// poolings (also at the end of every adaptation window).
    #[arg(long, value_name = "N", value_parser = values::iterations, default_value_t = 1, requires = "pooled_adaptation")]
    pool_every: usize,
    /// Start every chain at these values instead of a random point: a JSON
    /// object giving each parameter of `fn model` by name on its
    /// constrained scale ({"tau": 1.5, ...}), or {"theta": [...]} for a
    /// `log_density`.
    #[arg(long, value_name = "INIT.json")]
    init: Option<PathBuf>,
}

/// Why the command stopped early; the exit code follows from it.
enum Failure {
    /// Exit 1: the diagnostics, already rendered.
    DoesNotCompile(CompileError),
    /// Exit 2: one line, without the `error: ` prefix.
    Usage(String),
    /// Exit 1: a model `sample` cannot use, or a program file that is not
    /// text, already rendered.
    Model(String),
    /// A rank other than rank 0 stopped: rank 0 reports why, and says
    /// with which exit code every rank ends.
    Elsewhere,
    /// Exit 130: Ctrl-C stopped the run; what it finished is written (one
    /// line, without the `error: ` prefix, says what was not).
    Interrupted(String),
}

impl From<autobatch::InputError> for Failure {
    fn from(error: autobatch::InputError) -> Self {
        Failure::Usage(error.message().to_owned())
    }
}

fn main() -> ExitCode {
    let job = match job::Job::start() {
        Ok(job) => job,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let comm = job.comm();
    install_panic_hook((comm.size() > 1).then(|| comm.rank()));
    let code = run_command(comm);
    ExitCode::from(job::agree_on_exit_code(comm, code))
}

/// Parses the arguments and runs the command; the exit code of this rank
/// (rank 0's is the job's). Only rank 0 prints errors.
fn run_command(comm: &dyn Communicator) -> u8 {
    let print = comm.is_root();
    if let Err(message) = job::same_arguments(comm) {
        if print {
            eprintln!("error: {message}");
        }
        return 2;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return report_clap_error(error, print),
    };
    let failure = match execute(cli.command, comm) {
        Ok(()) => return 0,
        Err(failure) => failure,
    };
    match failure {
        Failure::DoesNotCompile(error) => {
            if print {
                let color = std::io::stderr().is_terminal();
                eprint!("{}", error.render(color));
            }
            1
        }
        Failure::Model(text) => {
            let text = text.trim_end();
            if !print {
            } else if text.contains('\n') {
                eprintln!("{text}");
            } else {
                eprintln!("error: {text}");
            }
            1
        }
        Failure::Usage(message) => {
            if print {
                eprintln!("error: {}", one_line(&message));
            }
            2
        }
        Failure::Elsewhere => 2,
        Failure::Interrupted(message) => {
            if print {
                eprintln!("error: {message}");
            }
            progress::INTERRUPTED_EXIT
        }
    }
}

/// Any panic is a bug: say so in one line and exit 2, without a backtrace
/// (naming the rank in a job of several, whose launcher then stops the others).
fn install_panic_hook(rank: Option<usize>) {
    let prefix = rank.map(|r| format!("rank {r}: ")).unwrap_or_default();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "unknown panic".to_owned()
        };
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "error: {prefix}internal error: {}{place} (this is a bug in autobatch)",
            one_line(&message)
        );
        std::process::exit(2);
    }));
}

/// Help and version go to stdout with exit 0; every usage error becomes one
/// `error: ` line (clap's own text without its usage block), exit 2.
/// Prints only if `print` (rank 0 of a job).
fn report_clap_error(error: clap::Error, print: bool) -> u8 {
    use clap::error::ErrorKind;
    if !print {
        return match error.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
            _ => 2,
        };
    }
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            0
        }
        // `autobatch` alone: clap would print the whole help; one line is the contract.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            eprintln!(
                "error: a command is required: check, ir, run, sample or train (see `autobatch --help`)"
            );
            2
        }
        _ => {
            let text = error.render().to_string();
            let before_usage = text.split("\nUsage:").next().unwrap_or(&text);
            // The pointer to `--help` is noise on a one-line error.
            let without_help_hint: String = before_usage
                .lines()
                .filter(|line| !line.trim_start().starts_with("For more information"))
                .collect::<Vec<_>>()
                .join("\n");
            let message = one_line(&without_help_hint);
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            eprintln!("error: {message}");
            2
        }
    }
}

/// Joins the non-empty lines of `text` so that a message is one line: with
/// a space after a line that ends in `:` (a list follows), else with "; ".
fn one_line(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out
}

fn execute(command: Command, comm: &dyn Communicator) -> Result<(), Failure> {
    match command {
        // Nothing to shard: rank 0 does it alone.
        Command::Check { .. } | Command::Ir { .. } if !comm.is_root() => Ok(()),
        Command::Check { program } => {
            compile_file(&program)?;
            Ok(())
        }
        Command::Ir {
            program,
            entry,
            lowered,
            grad_statics,
        } => {
            let compiled = compile_file(&program)?;
            let text = match (entry, lowered) {
                (Some(name), false) if !grad_statics.is_empty() => {
                    let statics: Vec<&str> = grad_statics.iter().map(String::as_str).collect();
                    compiled.static_gradient_ir_text(&name, &statics)?
                }
                (entry, true) => compiled.lowered_ir_text(entry.as_deref())?,
                (Some(name), false) => compiled.ir_text_for_entry(&name)?,
                (None, false) => compiled.ir_text(),
            };
            write_stdout(&text)
        }
        Command::Run(args) => run(args, comm),
        Command::Sample(args) => sample(args, comm),
        Command::Train(_) if comm.size() > 1 => Err(Failure::Usage(format!(
            "train runs in one process, but this job has {} ranks; run it without the MPI launcher",
            comm.size()
        ))),
        Command::Train(args) => train::train(args),
    }
}

/// `autobatch run`: rank 0 reads and binds the inputs, the ranks run
/// their slices, rank 0 writes the results.
fn run(args: RunArgs, comm: &dyn Communicator) -> Result<(), Failure> {
    if !args.grad_statics.is_empty() && comm.size() > 1 {
        return Err(Failure::Usage(format!(
            "--grad-statics sums over the members of one process, but this job has {} ranks; \
             run it without the MPI launcher",
            comm.size()
        )));
    }
    if args.profile.is_some() && comm.size() > 1 {
        return Err(Failure::Usage(format!(
            "--profile records the run of one process, but this job has {} ranks; \
             run it without the MPI launcher to profile it",
            comm.size()
        )));
    }
    let prepared = comm.is_root().then(|| prepare_run(&args));
    let root_texts = prepared.as_ref().map(|p| {
        p.as_ref()
            .map(|(compiled, _)| vec![compiled.source().to_owned()])
    });
    let shared = job::share_texts(comm, root_texts);
    let (compiled, batch) = match prepared {
        Some(Ok((compiled, batch))) => (Ok(compiled), Some(batch)),
        Some(Err(failure)) => return Err(failure),
        None => {
            let source = shared?;
            let path = args.program.display().to_string();
            let compiled = autobatch::compile(&source[0], &path).map_err(|e| e.render(false));
            (compiled, None)
        }
    };
    let interrupt = progress::interrupt_on_ctrl_c();
    let config = RunConfig {
        strategy: args.strategy,
        options: autobatch::RunOptions {
            max_stack_depth: args.max_stack_depth,
            max_steps: args.max_steps,
            seed: args.seed,
            threads: args.threads.unwrap_or_else(autobatch::default_threads),
            max_instances: args.max_instances,
            max_tape_bytes: args.max_tape_bytes.map(|n| n as u64),
            profile: args.profile.is_some(),
            // The counts are printed only with `--stats`.
            count_operations: args.stats,
            interrupt: Some(interrupt.clone()),
            batching: autobatch::BatchingOptions {
                lanes: args.lanes,
                block_choice: args.block_choice,
            },
            ..autobatch::RunOptions::default()
        },
    };
    let members = batch.as_ref().map_or(0, |b| b.batch_size() as u64);
    let display = progress::Display::new(progress::RUN_TEMPLATE, members, comm.is_root());
    let document = autobatch::shard::run_sharded_observed(
        comm,
        compiled.as_ref().map_err(Clone::clone),
        batch.as_ref(),
        &config,
        args.stats,
        display.observer(&interrupt, !args.strategy.name().starts_with("native")),
    );
    display.finish(interrupt.is_requested());
    let document = document.map_err(|failure| job::rank_failure(comm, failure))?;
    let Some(document) = document else {
        return Ok(());
    };
    if let (Some(path), Some(profile), Some(batch)) = (&args.profile, &document.profile, &batch) {
        // The strategy that ran (`auto` runs program-counter for a profile).
        let strategy = batch.strategy_for(&config);
        pictures::write_profile(
            path,
            profile,
            &args.entry,
            batch.batch_size(),
            strategy.name(),
        )?;
    }
    let to = args.output.as_deref().unwrap_or(Path::new("-"));
    match compiled {
        Ok(compiled) if input::is_npz(to) => {
            let bytes =
                results::results_npz(&document.text, &compiled, &args.entry).map_err(|reason| {
                    Failure::Usage(format!("cannot write `{}`: {reason}", to.display()))
                })?;
            output::write_bytes(to, &bytes)?;
        }
        _ => output::write_bytes(to, document.text.as_bytes())?,
    }
    if interrupt.is_requested() {
        return Err(Failure::Interrupted(
            "interrupted (Ctrl-C): the members that had not finished have the error \
             `interrupted` in the results"
                .into(),
        ));
    }
    Ok(())
}

/// What rank 0 reads and checks before `run` starts: the program, compiled,
/// and the inputs, bound.
fn prepare_run(args: &RunArgs) -> Result<(Compiled, autobatch::BoundBatch), Failure> {
    if let Some(path) = &args.output {
        output::check(path)?;
    }
    if let Some(path) = &args.profile {
        pictures::check_picture_path(path)?;
    }
    let compiled = compile_file(&args.program)?;
    let reading = std::time::Instant::now();
    let (parsed, sources) = input::read_run_inputs(&args.inputs, &args.shared)?;
    let read_seconds = reading.elapsed().as_secs_f64();
    let in_inputs = |e: autobatch::InputError| sources.error(e);
    // The inputs are given to the binding: the statics' arrays become the
    // program's statics without a copy.
    let batch = if args.grad_statics.is_empty() {
        compiled
            .bind_owned(&args.entry, parsed)
            .map_err(in_inputs)?
    } else {
        let statics: Vec<&str> = args.grad_statics.iter().map(String::as_str).collect();
        compiled
            .bind_static_gradient_owned(&args.entry, &statics, parsed)
            .map_err(in_inputs)?
    };
    Ok((compiled, batch.read_in(read_seconds)))
}

/// `autobatch sample`: rank 0 reads the model and the data and shares
/// them, the ranks run their chains, rank 0 writes the draws, the figures
/// and the summary.
fn sample(args: SampleArgs, comm: &dyn Communicator) -> Result<(), Failure> {
    return_large_buffers_to_the_system();
    let prepared = comm.is_root().then(|| prepare_sample(&args));
    // The other ranks build the model from rank 0's texts (none to share
    // in one process: the data's text is dropped before sampling starts).
    let root_texts = prepared
        .as_ref()
        .filter(|_| comm.size() > 1)
        .map(|p| p.as_ref().map(|(_, texts)| texts.clone()));
    let shared = job::share_texts(comm, root_texts);
    let model = match prepared {
        Some(Ok((model, texts))) => {
            drop((texts, shared));
            Ok(model)
        }
        Some(Err(failure)) => return Err(failure),
        None => {
            let texts = shared?;
            let path = args.model.display().to_string();
            autobatch_sample::Model::new(&texts[0], &path, &texts[1]).map_err(|e| e.to_string())
        }
    };
    let interrupt = progress::interrupt_on_ctrl_c();
    let mut config = sample_config(&args, &interrupt);
    if let (Ok(model), Some(path)) = (&model, &args.init) {
        let text = read_file(path, "initial values")?;
        config.init = Some(
            model
                .initial_point(&text)
                .map_err(|e| sample_failure(e, path))?,
        );
    }
    let total = (args.warmup + args.draws) as u64;
    let display = progress::Display::new(progress::SAMPLE_TEMPLATE, total, comm.is_root());
    let run = autobatch_sample::sample_sharded(
        comm,
        model.as_ref().map_err(Clone::clone),
        &config,
        &mut |p| {
            let phase = match (interrupt.is_requested(), p.warming_up) {
                (true, _) => "stopping",
                (false, true) => "warmup",
                (false, false) => "sampling",
            };
            display.update(p.done as u64, phase.into());
        },
        &autobatch_sample::Stop::new(),
    );
    display.finish(interrupt.is_requested());
    let run = match run {
        Ok(Some(run)) => run,
        Ok(None) => return Ok(()),
        Err(_) if interrupt.is_requested() => {
            return Err(Failure::Interrupted(
                "interrupted (Ctrl-C) before any chain finished: nothing written".into(),
            ))
        }
        Err(autobatch_sample::ShardedError::Rank(failure)) => {
            return Err(job::rank_failure(comm, failure))
        }
        Err(autobatch_sample::ShardedError::Sample(e)) => {
            return Err(sample_failure(e, &args.data))
        }
    };
    // Exit 0, as `run` does when some members fail: the other chains'
    // draws are written, and every failure is named.
    for failure in &run.failures {
        eprintln!("warning: {failure}");
    }
    if let Some(path) = &args.output {
        output::write(path, &mut |out| {
            autobatch_sample::report::write_csv(&run, out)
        })?;
    }
    if let Some(path) = &args.stats {
        let json = autobatch_sample::report::stats_json(&run, args.strategy.name());
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| Failure::Usage(format!("cannot write the figures as JSON: {e}")))?;
        output::write_bytes(path, (text + "\n").as_bytes())?;
    }
    if let Some(dir) = &args.plots {
        pictures::write_sample_plots(dir, &run)?;
    }
    let table = autobatch_sample::report::table(&run);
    if sample_outputs(&args).any(output::is_standard) {
        eprint!("{table}");
    } else {
        write_stdout(&table)?;
    }
    for warning in autobatch_sample::report::warnings(&run) {
        eprintln!("{warning}");
    }
    if interrupt.is_requested() {
        return Err(Failure::Interrupted(interrupted_chains(&run)));
    }
    Ok(())
}

/// The files `sample` writes besides its pictures.
fn sample_outputs(args: &SampleArgs) -> impl Iterator<Item = &Path> {
    args.output.iter().chain(&args.stats).map(PathBuf::as_path)
}

/// What Ctrl-C left of a `sample` run that kept some chains.
fn interrupted_chains(run: &autobatch_sample::SampleRun) -> String {
    let stopped = run
        .failures
        .iter()
        .filter(|f| f.kind == "interrupted")
        .count();
    if stopped == 0 {
        return "interrupted (Ctrl-C) after every chain had finished: the summary and the files \
                are complete"
            .into();
    }
    format!(
        "interrupted (Ctrl-C): {stopped} of {} chains did not finish; the summary and the files \
         hold the others",
        run.chains
    )
}

/// What rank 0 reads and checks before `sample` starts: the model, and the
/// texts the other ranks build it from (its source and the data).
fn prepare_sample(args: &SampleArgs) -> Result<(autobatch_sample::Model, Vec<String>), Failure> {
    check_iterations(args.warmup, args.draws)?;
    if args.output.as_deref().is_some_and(output::is_standard)
        && args.stats.as_deref().is_some_and(output::is_standard)
    {
        return Err(Failure::Usage(
            "--output and --stats cannot both be `-`: standard output takes one of them".into(),
        ));
    }
    for path in sample_outputs(args) {
        output::check(path)?;
    }
    if let Some(dir) = &args.plots {
        pictures::prepare_plot_dir(dir)?;
    }
    let source = read_program(&args.model)?;
    let data_text = read_file(&args.data, "data")?;
    let path = args.model.display().to_string();
    let model = autobatch_sample::Model::new(&source, &path, &data_text)
        .map_err(|e| sample_failure(e, &args.data))?;
    Ok((model, vec![source, data_text]))
}

/// Makes every buffer of 128 kB or more its own mapping, given back to the
/// system when freed. glibc's default raises that threshold to the largest
/// such buffer freed so far (the data file's text, for one), after which
/// the chains' draws and results stay resident in the heap once freed.
fn return_large_buffers_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a parameter of glibc's allocator, under
    // the allocator's own lock; the value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

fn sample_config(
    args: &SampleArgs,
    interrupt: &autobatch::Interrupt,
) -> autobatch_sample::SampleConfig {
    autobatch_sample::SampleConfig {
        chains: args.chains,
        warmup: args.warmup,
        draws: args.draws,
        max_depth: args.max_depth,
        target_accept: args.target_accept,
        run: RunConfig {
            strategy: args.strategy,
            options: autobatch::RunOptions {
                seed: args.seed,
                threads: args.threads.unwrap_or_else(autobatch::default_threads),
                max_tape_bytes: args.max_tape_bytes.map(|n| n as u64),
                interrupt: Some(interrupt.clone()),
                ..RunConfig::default().options
            },
        },
        adaptation: if args.pooled_adaptation {
            autobatch_sample::Adaptation::Pooled {
                every: args.pool_every,
            }
        } else {
            autobatch_sample::Adaptation::PerChain
        },
        ..autobatch_sample::SampleConfig::default()
    }
}

/// A model that cannot be sampled is reported like a program that does not
/// compile (exit 1); bad data, settings or a failed chain as bad input (exit 2).
fn sample_failure(error: autobatch_sample::SampleError, data: &Path) -> Failure {
    match error {
        autobatch_sample::SampleError::Compile(text)
        | autobatch_sample::SampleError::Model(text) => Failure::Model(text),
        autobatch_sample::SampleError::Data(message) => {
            Failure::Usage(format!("{}: {message}", input::source_name(data)))
        }
        other => Failure::Usage(other.to_string()),
    }
}

/// Refuses warmup and draws that together exceed what a chain may run.
fn check_iterations(warmup: usize, draws: usize) -> Result<(), Failure> {
    let max = autobatch_sample::MAX_ITERATIONS;
    match warmup.checked_add(draws) {
        Some(total) if total <= max => Ok(()),
        _ => Err(Failure::Usage(format!(
            "--warmup {warmup} and --draws {draws} make more than {max} iterations per chain; \
             --warmup plus --draws must be at most {max}"
        ))),
    }
}

/// Writes to stdout; a closed pipe (`autobatch ir x.ab | head`) is not an error worth a message.
fn write_stdout(text: &str) -> Result<(), Failure> {
    output::write_bytes(Path::new("-"), text.as_bytes())
}
