//! The `autobatch-fuzz` command: `autobatch-fuzz programs --count N --seed S
//! [--out DIR] [--threads T]` checks the generated programs of seeds
//! `S .. S+N` on `T` threads, prints progress, shrinks every failing program
//! and saves it to `DIR` as a `tests/programs` test file, and ends with the
//! line `P passed, F failed` (exit code 1 if any failed, 2 on bad usage).
//! With `--derivatives-only` it checks only each program's derivatives
//! against central differences of their functions (`finite`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use autobatch_fuzz::{
    check_seed, check_seed_derivatives, regression_file, shrink_failure, test_file, Outcome,
};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "autobatch-fuzz",
    about = "Differential fuzzing of autobatch's strategies against the reference"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check random programs on every strategy, lanes mode and block choice.
    Programs(ProgramsArgs),
    /// Print the program of one seed as a test file, with the reference's results.
    Show {
        #[arg(long)]
        seed: u64,
    },
}

#[derive(clap::Args)]
struct ProgramsArgs {
    /// How many programs (seeds `seed .. seed + count`).
    #[arg(long)]
    count: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where to save shrunk failing programs (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads (default: available cores).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Check only the derivatives against central differences of their
    /// functions, on the reference (cheap; failures are printed, not shrunk).
    #[arg(long)]
    derivatives_only: bool,
}

/// Counts shared by the workers.
#[derive(Default)]
struct Tally {
    done: AtomicU64,
    failed: AtomicU64,
}

fn main() -> ExitCode {
    let args = match Cli::parse().command {
        Command::Programs(args) => args,
        Command::Show { seed } => return show(seed),
    };
    // Panics inside autobatch are caught and reported as findings; keep
    // the default hook from printing each one.
    std::panic::set_hook(Box::new(|_| {}));
    if let Some(dir) = &args.out {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("error: cannot create {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(|| autobatch::default_threads() as u64);
    let tally = Tally::default();
    let next = AtomicU64::new(0);
    let progress = Mutex::new(Instant::now());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= args.count {
                    break;
                }
                let seed = args.seed.wrapping_add(i);
                if !check_one_caught(seed, args.out.as_ref(), args.derivatives_only) {
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                }
                let done = tally.done.fetch_add(1, Ordering::Relaxed) + 1;
                report_progress(&progress, &tally, done, args.count, start);
            });
        }
    });
    let failed = tally.failed.load(Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    eprintln!(
        "{:.1} s, {:.1} programs/s",
        elapsed,
        args.count as f64 / elapsed.max(1e-9)
    );
    println!("{} passed, {failed} failed", args.count - failed);
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints the case of `seed` as a test file whose `expect` is the reference's results.
fn show(seed: u64) -> ExitCode {
    match test_file(seed, &autobatch_fuzz::generate(seed)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("error: {why}");
            ExitCode::from(1)
        }
    }
}

/// Prints a progress line at most every five seconds.
fn report_progress(last: &Mutex<Instant>, tally: &Tally, done: u64, count: u64, start: Instant) {
    let Ok(mut last) = last.lock() else {
        return;
    };
    if last.elapsed() < Duration::from_secs(5) && done != count {
        return;
    }
    *last = Instant::now();
    let rate = done as f64 / start.elapsed().as_secs_f64().max(1e-9);
    eprintln!(
        "{done}/{count} programs, {} failed, {rate:.1} programs/s",
        tally.failed.load(Ordering::Relaxed)
    );
}

/// [`check_one`], reporting a panic of the fuzzer itself (autobatch's are
/// caught by the oracle) as a failure of that seed.
fn check_one_caught(seed: u64, out: Option<&PathBuf>, derivatives_only: bool) -> bool {
    let checked = std::panic::catch_unwind(|| {
        if derivatives_only {
            check_derivatives(seed)
        } else {
            check_one(seed, out)
        }
    });
    checked.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        eprintln!("seed {seed}: the fuzzer panicked: {message}");
        false
    })
}

/// Checks one seed's derivatives only; on failure prints the program and
/// every mismatch. True if it passed.
fn check_derivatives(seed: u64) -> bool {
    match check_seed_derivatives(seed) {
        Outcome::Pass => true,
        Outcome::Fail { case, findings } => {
            let details: Vec<String> = findings.into_iter().map(|f| f.detail).collect();
            eprintln!(
                "seed {seed}: WRONG DERIVATIVES:\n{}\n{}",
                details.join("\n"),
                case.source()
            );
            false
        }
        Outcome::GeneratorBug { source, why } => {
            eprintln!("seed {seed}: GENERATOR BUG: {why}\n{source}");
            false
        }
        Outcome::ConflictAccepted { why, .. } => {
            eprintln!("seed {seed}: {why}");
            false
        }
    }
}

/// Checks one seed; on failure prints it, shrinks it and saves it. True if it passed.
fn check_one(seed: u64, out: Option<&PathBuf>) -> bool {
    match check_seed(seed) {
        Outcome::Pass => true,
        Outcome::GeneratorBug { source, why } => {
            eprintln!("seed {seed}: GENERATOR BUG: {why}\n{source}");
            false
        }
        Outcome::ConflictAccepted {
            source,
            inputs,
            why,
        } => {
            eprintln!(
                "seed {seed}: CONFLICTING RAGGED INPUTS NOT REFUSED: {why}\ninputs: {inputs}\n{source}"
            );
            false
        }
        Outcome::Fail { case, findings } => {
            let first = findings
                .first()
                .map(|f| format!("{}: {}", f.configuration, f.detail));
            eprintln!(
                "seed {seed}: FAILED in {} configurations; first {}",
                findings.len(),
                first.unwrap_or_default()
            );
            let shrunk = shrink_failure(&case);
            match regression_file(seed, &shrunk) {
                Ok(text) => save(seed, &text, out),
                Err(why) => eprintln!("seed {seed}: cannot write the shrunk case: {why}"),
            }
            false
        }
    }
}

fn save(seed: u64, text: &str, out: Option<&PathBuf>) {
    let Some(dir) = out else {
        eprintln!("seed {seed}: shrunk:\n{text}");
        return;
    };
    let path = dir.join(format!("regress_seed_{seed}.ab"));
    match std::fs::write(&path, text) {
        Ok(()) => eprintln!("seed {seed}: saved {}", path.display()),
        Err(e) => eprintln!("seed {seed}: cannot write {}: {e}", path.display()),
    }
}
