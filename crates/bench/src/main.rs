//! `autobatch-bench`: members per second against batch size for each
//! strategy and lanes mode, next to the same function written natively in
//! Rust and run member by member. Prints one JSON document on stdout.
//!
//! ```sh
//! cargo run --release -p autobatch-bench -- strategies [--quick]
//! cargo run --release -p autobatch-bench -- autodiff [--quick] [--threads N]
//! cargo run --release -p autobatch-bench -- instances [--quick]
//! cargo run --release -p autobatch-bench -- native [--quick]
//! cargo run --release -p autobatch-bench -- ragged [--quick] [--members N,M]
//! cargo run --release -p autobatch-bench -- model PROGRAM --entry E --inputs FILE [...]
//! ```
//!
//! `autodiff`: see the module [`autodiff`]; `instances`: see [`instances`];
//! `ragged`: see [`ragged`]; `model`: see [`model`].
//!
//! Timings are medians over repetitions of the execution only (the
//! executors' own `wall_seconds`: no parsing, compiling or input binding).
//! This crate is a measuring tool: it must not contain logic the executors
//! need.

mod autodiff;
mod instances;
mod model;
mod native;
mod nuts;
mod ragged;

use std::time::Instant;

use autobatch_exec::{
    run, Arg, Batch, BatchingOptions, BlockChoice, Env, LaneMode, RunOptions, Strategy,
};
use autobatch_ir::{FuncId, Program};
use autobatch_types::{Scalar, Tensor};
use serde_json::{json, Value};

struct Workload {
    name: &'static str,
    source: &'static str,
    entry: &'static str,
    /// The input of member `i`.
    input: fn(usize) -> i64,
    native: fn(i64) -> i64,
}

fn native_fib(n: i64) -> i64 {
    if n <= 1 {
        1
    } else {
        native_fib(n - 2).wrapping_add(native_fib(n - 1))
    }
}

fn native_collatz(n: i64) -> i64 {
    let (mut x, mut steps) = (n, 0i64);
    while x != 1 {
        x = if x % 2 == 0 {
            x / 2
        } else {
            x.wrapping_mul(3).wrapping_add(1)
        };
        steps += 1;
    }
    steps
}

fn native_nested(n: i64) -> i64 {
    let mut s = 0i64;
    for i in 0..n {
        for j in 0..i {
            s = s.wrapping_add(i.wrapping_mul(j) % 7);
        }
    }
    s
}

fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "fib",
            source: include_str!("../programs/fib.ab"),
            entry: "fib",
            input: |i| 15 + (i % 6) as i64,
            native: native_fib,
        },
        Workload {
            name: "collatz",
            source: include_str!("../programs/collatz.ab"),
            entry: "collatz",
            input: |i| 1 + ((i as i64 * 7919) % 100_000),
            native: native_collatz,
        },
        Workload {
            name: "nested",
            source: include_str!("../programs/nested.ab"),
            entry: "nested",
            input: |i| 20 + (i % 21) as i64,
            native: native_nested,
        },
        Workload {
            name: "nested-same",
            source: include_str!("../programs/nested.ab"),
            entry: "nested",
            input: |_| 30,
            native: native_nested,
        },
    ]
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// Runs `f` (which returns the seconds to count) until `budget` seconds have
/// been spent or `max_runs` runs are done, at least 3 times; the median.
fn measure(budget: f64, max_runs: usize, mut f: impl FnMut() -> f64) -> f64 {
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 3 || (start.elapsed().as_secs_f64() < budget && times.len() < max_runs) {
        times.push(f());
    }
    median(times)
}

fn compile(source: &str) -> Program {
    let mut program = autobatch_lower::compile(source)
        .unwrap_or_else(|d| panic!("benchmark program does not compile: {d:?}"));
    autobatch_passes::optimize(&mut program);
    program
}

fn main() {
    if let Err(message) = autobatch_kernels::gemm::requested_path() {
        eprintln!("autobatch-bench: {message}");
        std::process::exit(2);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    match args.first().map(String::as_str) {
        Some("nuts") => nuts::main(&args[1..]),
        Some("instances") => instances::main(&args[1..]),
        Some("native") => native::main(&args[1..]),
        Some("ragged") => ragged::main(&args[1..]),
        Some("model") => model::main(&args[1..]),
        Some("autodiff") => autodiff_command(&args, quick),
        Some("strategies") => strategies(quick),
        _ => {
            eprintln!(
                "usage: autobatch-bench strategies [--quick] | autodiff [--quick] [--threads N] | instances [--quick] | native [--quick] | ragged [--quick] [--members N,M] | model PROGRAM --entry E --inputs FILE [...]"
            );
            std::process::exit(2);
        }
    }
}

/// `autodiff [--quick] [--threads N] [--batch B] [--precision f32|f64]`.
fn autodiff_command(args: &[String], quick: bool) {
    let threads = match args.iter().position(|a| a == "--threads") {
        Some(i) => match args.get(i + 1).and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if n >= 1 => n,
            _ => {
                eprintln!("usage: autobatch-bench autodiff [--quick] [--threads N] (N >= 1)");
                std::process::exit(2);
            }
        },
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let only_batch = value_of("--batch").and_then(|b| b.parse().ok());
    let report = autodiff::run(quick, threads, only_batch, value_of("--precision"));
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}

/// A strategy with the batching options it is measured with.
#[derive(Clone, Copy, Debug)]
struct Configuration {
    strategy: Strategy,
    lanes: LaneMode,
    block_choice: BlockChoice,
}

/// Every configuration measured: each batching strategy in every lanes
/// mode, and program-counter with the other block choice.
fn configurations() -> Vec<Configuration> {
    let configuration = |strategy, lanes, block_choice| Configuration {
        strategy,
        lanes,
        block_choice,
    };
    vec![
        configuration(
            Strategy::Reference,
            LaneMode::Auto,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::LocalStatic,
            LaneMode::Mask,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::LocalStatic,
            LaneMode::Compact,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::LocalStatic,
            LaneMode::Auto,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::ProgramCounter,
            LaneMode::Mask,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::ProgramCounter,
            LaneMode::Compact,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::ProgramCounter,
            LaneMode::Auto,
            BlockChoice::SmallestIndex,
        ),
        configuration(
            Strategy::ProgramCounter,
            LaneMode::Auto,
            BlockChoice::MostMembers,
        ),
    ]
}

/// `strategies [--quick]`: every workload at every batch size.
fn strategies(quick: bool) {
    let sizes: Vec<usize> = if quick {
        vec![1, 16, 256, 1024]
    } else {
        vec![1, 4, 16, 64, 256, 1024, 4096]
    };
    let budget = if quick { 0.3 } else { 1.0 };
    let mut report = Vec::new();
    for workload in workloads() {
        let program = compile(workload.source);
        let entry = program
            .function_by_name(workload.entry)
            .expect("entry exists");
        let mut rows = Vec::new();
        for &size in &sizes {
            rows.push(measure_batch(&workload, &program, entry, size, budget));
            eprintln!("{} batch {size}: done", workload.name);
        }
        report.push(json!({ "workload": workload.name, "rows": rows }));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({ "benchmark": "strategies", "results": report }))
            .unwrap()
    );
}

/// One row of the report: `workload` at `size` members, natively and in
/// every configuration.
fn measure_batch(
    workload: &Workload,
    program: &Program,
    entry: FuncId,
    size: usize,
    budget: f64,
) -> Value {
    let inputs: Vec<i64> = (0..size).map(workload.input).collect();
    let native_seconds = measure(budget, 1000, || {
        let t = Instant::now();
        let mut sink = 0i64;
        for &n in &inputs {
            sink = sink.wrapping_add((workload.native)(std::hint::black_box(n)));
        }
        std::hint::black_box(sink);
        t.elapsed().as_secs_f64()
    });
    let mut row = serde_json::Map::new();
    row.insert("batch_size".into(), json!(size));
    row.insert(
        "native_members_per_second".into(),
        json!(size as f64 / native_seconds),
    );
    let batch = Batch {
        entry,
        size,
        args: vec![Arg::Batched(
            inputs
                .iter()
                .map(|n| Tensor::scalar(Scalar::I64(*n)))
                .collect(),
        )],
    };
    for configuration in configurations() {
        // The reference runs members one by one, and slowly: its
        // throughput no longer changes past a few hundred members.
        if configuration.strategy == Strategy::Reference && size > 256 {
            continue;
        }
        let options = RunOptions {
            batching: BatchingOptions {
                lanes: configuration.lanes,
                block_choice: configuration.block_choice,
            },
            ..RunOptions::default()
        };
        let mut utilization = 0.0;
        let seconds = measure(budget, 50, || {
            let output = run(
                configuration.strategy,
                program,
                &Env::default(),
                &batch,
                &options,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            utilization = output.stats.lane_utilization;
            output.stats.wall_seconds
        });
        row.insert(
            configuration.key(),
            json!({
                "members_per_second": size as f64 / seconds,
                "median_seconds": seconds,
                "lane_utilization": utilization,
                "slowdown_vs_native": seconds / native_seconds,
            }),
        );
    }
    Value::Object(row)
}

impl Configuration {
    /// Its key in the report: the strategy's name, then the options it
    /// reads (the block choice only when not the default).
    fn key(&self) -> String {
        let reads = self.strategy.reads();
        let mut key = self.strategy.name().to_string();
        if reads.lanes {
            key = format!("{key}/{}", self.lanes);
        }
        if reads.block_choice && self.block_choice != BlockChoice::default() {
            key = format!("{key}/{}", self.block_choice);
        }
        key
    }
}
