//! `native [--quick] [--workload NAME] [--members N]`: the native strategy
//! (per-member machine code) against program-counter and against
//! the same function written in Rust and run member by member, on fib (n in
//! 15..20), Collatz and a nested loop, 1024 members (or `N`; `NAME` runs
//! one workload).
//!
//! ```sh
//! cargo run --release -p autobatch-bench -- native [--quick] [--workload fib|collatz|nested] [--members N]
//! ```
//!
//! Per workload: the median execution seconds (the executors' own
//! `wall_seconds`; compile time apart) of native on one thread and on all
//! cores (counting nothing, as `autobatch run` without `--stats`), of
//! native on one thread counting every operation (as with `--stats`), of
//! program-counter, and of the Rust loop on one thread; `native_vs_rust`
//! is the Rust time over the native time on one thread (1 = as fast as
//! Rust),
//! `native_counting_vs_rust` the same with counting, and
//! `native_vs_program_counter` the speed-up over program-counter.
//!
//! The same for `native-lockstep` (the other shape: the members in
//! lock-step, each piece of the program a native loop over the members at
//! it): `lockstep_seconds_1_thread`, `lockstep_seconds_all_cores`,
//! `lockstep_vs_native` (the native time over the lock-step time, one
//! thread: above 1, lock-step is faster) and `lockstep_lane_utilization`
//! (the members a piece ran for over the batch, on average). The
//! `nested-same` workload gives every member the same `n`: members that
//! agree on control, lock-step's best case.

use std::hint::black_box;
use std::time::Instant;

use autobatch_exec::{run, Arg, Batch, Env, ReportValue, RunOptions, Strategy};
use autobatch_types::{Scalar, Tensor};
use serde_json::{json, Value};

use crate::{compile, measure, workloads, Workload};

const MEMBERS: usize = 1024;

pub fn main(args: &[String]) {
    let quick = args.iter().any(|a| a == "--quick");
    let budget = if quick { 0.3 } else { 2.0 };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let only = option("--workload");
    let members: usize = option("--members").map_or(MEMBERS, |n| {
        n.parse()
            .unwrap_or_else(|_| panic!("--members takes a number, not `{n}`"))
    });
    for workload in workloads() {
        if only.is_some_and(|name| name != workload.name) {
            continue;
        }
        rows.push(measure_workload(&workload, members, budget, cores));
    }
    let out: Value = json!({ "benchmark": "native", "results": rows });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}

/// One workload's figures (see the module doc).
fn measure_workload(workload: &Workload, members: usize, budget: f64, cores: usize) -> Value {
    let native = Strategy::Native;
    let program = compile(workload.source);
    let inputs: Vec<i64> = (0..members).map(workload.input).collect();
    let batch = Batch {
        entry: program.function_by_name(workload.entry).expect("entry"),
        size: members,
        args: vec![Arg::Batched(
            inputs
                .iter()
                .map(|n| Tensor::scalar(Scalar::I64(*n)))
                .collect(),
        )],
    };
    let time = |strategy: Strategy, threads: usize, count_operations: bool| {
        let options = RunOptions {
            threads,
            count_operations,
            ..RunOptions::default()
        };
        let mut compile_seconds = 0.0;
        let mut compiled = None;
        let seconds = measure(budget, 50, || {
            let out = run(strategy, &program, &Env::default(), &batch, &options).expect("runs");
            for field in &out.stats.report {
                match (field.name, &field.value) {
                    ("compile_seconds", ReportValue::Seconds(s)) => compile_seconds = *s,
                    ("compiled", ReportValue::Bool(b)) => compiled = Some(*b),
                    _ => {}
                }
            }
            out.stats.wall_seconds
        });
        (seconds, compile_seconds, compiled)
    };
    // As `autobatch run` runs without `--stats`: nothing counted.
    let (native_1, compile_seconds, compiled) = time(native, 1, false);
    let (native_all, _, _) = time(native, cores, false);
    // With `--stats`: every operation's executions counted.
    let (native_counting, _, _) = time(native, 1, true);
    let (program_counter, _, _) = time(Strategy::ProgramCounter, 1, true);
    let lockstep = Strategy::NativeLockstep;
    let (lockstep_1, lockstep_compile, lockstep_compiled) = time(lockstep, 1, false);
    let (lockstep_all, _, _) = time(lockstep, cores, false);
    let utilization = run(
        lockstep,
        &program,
        &Env::default(),
        &batch,
        &RunOptions::default(),
    )
    .expect("runs")
    .stats
    .lane_utilization;
    let rust = measure(budget, 200, || {
        let start = Instant::now();
        let mut total = 0i64;
        for n in &inputs {
            total = total.wrapping_add((workload.native)(black_box(*n)));
        }
        black_box(total);
        start.elapsed().as_secs_f64()
    });
    json!({
        "workload": workload.name,
        "members": members,
        "compiled": compiled,
        "compile_seconds": compile_seconds,
        "native_seconds_1_thread": native_1,
        "native_seconds_all_cores": native_all,
        "native_counting_seconds_1_thread": native_counting,
        "cores": cores,
        "program_counter_seconds_1_thread": program_counter,
        "rust_seconds_1_thread": rust,
        "native_vs_rust": rust / native_1,
        "native_counting_vs_rust": rust / native_counting,
        "native_vs_program_counter": program_counter / native_1,
        "lockstep_compiled": lockstep_compiled,
        "lockstep_compile_seconds": lockstep_compile,
        "lockstep_seconds_1_thread": lockstep_1,
        "lockstep_seconds_all_cores": lockstep_all,
        "lockstep_vs_native": native_1 / lockstep_1,
        "lockstep_vs_rust": rust / lockstep_1,
        "lockstep_lane_utilization": utilization,
    })
}
