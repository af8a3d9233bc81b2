//! `model PROGRAM --entry E --inputs FILE [--grad-statics A,B,..]
//! [--strategy S] [--threads N] [--runs N] [--warmup SECONDS]`: one program on one inputs
//! file, run again and again in this process, the way a user's training
//! loop or server runs batch after batch.
//!
//! ```sh
//! cargo run --release -p autobatch-bench -- model examples/models/treelstm.ab \
//!     --entry classify --inputs /tmp/treelstm.json --strategy native --runs 5
//! ```
//!
//! The program is compiled and the inputs bound once; the first run is
//! timed apart (`cold_seconds`: the process's first touch of its memory
//! and, under the native strategies, nothing compiled yet), then untimed
//! runs until `--warmup` seconds have passed (`warmup_runs`; none by
//! default), then `--runs` more (`seconds`, `median_seconds`). A warm-up
//! matters with two threads on a shared VM: for the first tens of
//! milliseconds of a process, the second worker may wake too late to take
//! its share of a small batch (docs/benchmarks.md, "What we learned"). Every time is the run's own
//! `wall_seconds` (execution only), operations not counted (as a loop that
//! reads no figures runs). `document` is the output of one more run with
//! the operations counted, what `autobatch run --stats` prints (results,
//! figures, `static_gradients` with `--grad-statics`): the values timed,
//! as counting changes no result. `tools/dynet_bench.py` times our side
//! with this, as DyNet's side is timed after a warm-up in one process.
//! `simd_path` is the kernels' path (`AUTOBATCH_SIMD` caps it).

use autobatch::{Inputs, RunConfig, Strategy};
use serde_json::{json, Value};

use crate::median;

/// What the command line asks for.
struct ModelArgs {
    program: String,
    entry: String,
    inputs: String,
    grad_statics: Vec<String>,
    strategy: Strategy,
    threads: usize,
    runs: usize,
    /// Seconds of untimed runs after the cold one.
    warmup: f64,
}

const USAGE: &str = "usage: autobatch-bench model PROGRAM --entry E --inputs FILE \
                     [--grad-statics A,B,..] [--strategy S] [--threads N] [--runs N] \
                     [--warmup SECONDS]";

fn fail(message: &str) -> ! {
    eprintln!("autobatch-bench model: {message}\n{USAGE}");
    std::process::exit(2)
}

fn parse(args: &[String]) -> ModelArgs {
    let value_of = |flag: &str| {
        args.iter().position(|a| a == flag).map(|i| {
            args.get(i + 1)
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        })
    };
    let number = |flag: &str, default: usize| match value_of(flag) {
        None => default,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => fail(&format!(
                "{flag} takes a whole number of at least 1, not `{text}`"
            )),
        },
    };
    let program = match args.first() {
        Some(path) if !path.starts_with("--") => path.clone(),
        _ => fail("the program file comes first"),
    };
    let strategy = match value_of("--strategy") {
        None => RunConfig::default().strategy,
        Some(name) => name.parse().unwrap_or_else(|e: String| fail(&e)),
    };
    ModelArgs {
        program,
        entry: value_of("--entry")
            .unwrap_or_else(|| fail("--entry is required"))
            .clone(),
        inputs: value_of("--inputs")
            .unwrap_or_else(|| fail("--inputs is required"))
            .clone(),
        grad_statics: value_of("--grad-statics")
            .map(|list| list.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
        strategy,
        threads: number("--threads", autobatch::default_threads()),
        runs: number("--runs", 5),
        warmup: match value_of("--warmup") {
            None => 0.0,
            Some(text) => match text.parse::<f64>() {
                Ok(s) if s.is_finite() && s >= 0.0 => s,
                _ => fail(&format!(
                    "--warmup takes a number of seconds of at least 0, not `{text}`"
                )),
            },
        },
    }
}

pub fn main(args: &[String]) {
    let args = parse(args);
    let read = |path: &str| {
        std::fs::read_to_string(path).unwrap_or_else(|e| fail(&format!("cannot read {path}: {e}")))
    };
    let compiled = autobatch::compile(&read(&args.program), &args.program)
        .unwrap_or_else(|e| fail(&e.render(false)));
    let inputs = Inputs::from_json_str(&read(&args.inputs))
        .unwrap_or_else(|e| fail(&format!("{}: {}", args.inputs, e.message())));
    let bound = if args.grad_statics.is_empty() {
        compiled.bind(&args.entry, &inputs)
    } else {
        let statics: Vec<&str> = args.grad_statics.iter().map(String::as_str).collect();
        compiled.bind_static_gradient(&args.entry, &statics, &inputs)
    }
    .unwrap_or_else(|e| fail(&e.to_string()));
    let config = RunConfig {
        strategy: args.strategy,
        options: autobatch::RunOptions {
            threads: args.threads,
            // As a loop that reads no figures runs (the native strategies'
            // code then counts nothing); `op_counts` stays empty.
            count_operations: false,
            ..RunConfig::default().options
        },
    };
    let run = |config: &RunConfig| {
        bound
            .run(config)
            .unwrap_or_else(|e| fail(&format!("the run failed: {e}")))
    };
    let cold_seconds = run(&config).stats.wall_seconds;
    let warming = std::time::Instant::now();
    let mut warmup_runs = 0;
    while warming.elapsed().as_secs_f64() < args.warmup {
        run(&config);
        warmup_runs += 1;
    }
    let seconds: Vec<f64> = (0..args.runs)
        .map(|_| run(&config).stats.wall_seconds)
        .collect();
    // One more run, counted, for the figures (the results are the same
    // bits counted or not).
    let counted = RunConfig {
        options: autobatch::RunOptions {
            count_operations: true,
            ..config.clone().options
        },
        ..config.clone()
    };
    let document: Value = run(&counted).to_json(true);
    let report = json!({
        "benchmark": "model",
        "program": args.program,
        "entry": args.entry,
        "strategy": args.strategy.name(),
        "threads": args.threads,
        "simd_path": autobatch_kernels::gemm::Path::detected().name(),
        "batch_size": bound.batch_size(),
        "cold_seconds": cold_seconds,
        "warmup_runs": warmup_runs,
        "median_seconds": median(seconds.clone()),
        "seconds": seconds,
        "document": document,
    });
    println!("{}", serde_json::to_string(&report).expect("JSON"));
}
