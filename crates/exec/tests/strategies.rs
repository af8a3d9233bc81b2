//! Properties of the batching strategies that the differential tests do not
//! pin down: how often operations run, and limits that behave per member.

use autobatch_exec::{
    run, Arg, Batch, BatchingOptions, BlockChoice, Env, LaneMode, RunOptions, RunOutput, Strategy,
};
use autobatch_ir::Program;
use autobatch_types::{ErrorKind, Scalar, Tensor};

fn compile(source: &str) -> Program {
    let mut program = autobatch_lower::compile(source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    autobatch_ir::verify::verify_program(&program).expect("verifies");
    program
}

fn run_i64(
    program: &Program,
    entry: &str,
    columns: &[&[i64]],
    strategy: Strategy,
    options: &RunOptions,
) -> RunOutput {
    let entry = program.function_by_name(entry).expect("entry");
    let size = columns[0].len();
    let args = columns
        .iter()
        .map(|c| Arg::Batched(c.iter().map(|v| Tensor::scalar(Scalar::I64(*v))).collect()))
        .collect();
    let batch = Batch { entry, size, args };
    run(strategy, program, &Env::default(), &batch, options).expect("runs")
}

const FIB: &str = "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }";

#[test]
fn fib_adds_as_often_as_its_longest_member_alone() {
    // fib(7) alone needs 20 additions; batching [3, 7, 4, 5] must not need more
    // (TFP's autobatching paper and its test check the same figure).
    let program = compile(FIB);
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        let output = run_i64(
            &program,
            "fib",
            &[&[3, 7, 4, 5]],
            strategy,
            &RunOptions::default(),
        );
        let add = output
            .stats
            .op_counts
            .iter()
            .find(|c| c.op == "add")
            .expect("an add");
        assert_eq!(add.executions, 20, "{strategy:?}");
        // Every member's additions happen in some batched execution.
        assert_eq!(add.active_lanes, 2 + 20 + 4 + 7, "{strategy:?}");
        let values: Vec<_> = output
            .results
            .iter()
            .map(|r| r.as_ref().unwrap()[0].as_scalar())
            .collect();
        assert_eq!(values, [3, 21, 5, 8].map(Scalar::I64));
    }
}

#[test]
fn a_self_tail_call_does_not_grow_the_stack() {
    let program = compile(
        "fn iota_sum(n: i64, acc: i64) -> i64 { if n == 0 { acc } else { iota_sum(n - 1, acc + n) } }",
    );
    let options = RunOptions {
        max_stack_depth: 8,
        ..RunOptions::default()
    };
    for strategy in Strategy::ALL {
        let output = run_i64(
            &program,
            "iota_sum",
            &[&[1000, 10], &[0, 0]],
            strategy,
            &options,
        );
        let values: Vec<_> = output
            .results
            .iter()
            .map(|r| r.as_ref().unwrap()[0].as_scalar())
            .collect();
        assert_eq!(
            values,
            [Scalar::I64(500500), Scalar::I64(55)],
            "{strategy:?}"
        );
    }
}

#[test]
fn a_stack_overflow_stops_only_the_deep_member() {
    let program = compile(FIB);
    let options = RunOptions {
        max_stack_depth: 5,
        ..RunOptions::default()
    };
    for strategy in Strategy::ALL {
        let output = run_i64(&program, "fib", &[&[3, 12, 4]], strategy, &options);
        assert!(
            output.results[0].is_ok() && output.results[2].is_ok(),
            "{strategy:?}"
        );
        assert_eq!(
            output.results[1].as_ref().unwrap_err().kind,
            ErrorKind::StackOverflow,
            "{strategy:?}"
        );
    }
}

#[test]
fn program_counter_batches_across_recursion_depths() {
    // Each member reaches `work` at its own recursion depth. Local-static runs
    // `work` once per depth (one activation each); program-counter runs it
    // once for everyone.
    let program = compile(
        "fn descend(n: i64) -> i64 { if n == 0 { work(7) } else { descend(n - 1) + 1 } }\n\
         fn work(x: i64) -> i64 { x * 3 }",
    );
    let inputs: Vec<i64> = (0..8).collect();
    let options = RunOptions::default();
    let local = run_i64(
        &program,
        "descend",
        &[&inputs],
        Strategy::LocalStatic,
        &options,
    );
    let counter = run_i64(
        &program,
        "descend",
        &[&inputs],
        Strategy::ProgramCounter,
        &options,
    );
    assert_eq!(local.results, counter.results);
    let executions = |output: &RunOutput| {
        output
            .stats
            .op_counts
            .iter()
            .find(|c| c.op == "mul")
            .unwrap()
            .executions
    };
    assert_eq!(executions(&local), 8);
    assert_eq!(executions(&counter), 1);
    assert!(counter.stats.lane_utilization > local.stats.lane_utilization);
}

#[test]
fn block_choices_and_lanes_agree() {
    let program = compile(FIB);
    let entry = program.function_by_name("fib").unwrap();
    let batch = Batch {
        entry,
        size: 6,
        args: vec![Arg::Batched(
            (0..6).map(|i| Tensor::scalar(Scalar::I64(i * 2))).collect(),
        )],
    };
    let options = RunOptions::default();
    let reference = run(
        Strategy::Reference,
        &program,
        &Env::default(),
        &batch,
        &options,
    )
    .unwrap();
    for lanes in [LaneMode::Mask, LaneMode::Compact, LaneMode::Auto] {
        for block_choice in [BlockChoice::SmallestIndex, BlockChoice::MostMembers] {
            let batching = BatchingOptions {
                lanes,
                block_choice,
            };
            let output = run(
                Strategy::ProgramCounter,
                &program,
                &Env::default(),
                &batch,
                &RunOptions {
                    batching,
                    ..options.clone()
                },
            )
            .unwrap();
            assert_eq!(output.results, reference.results);
        }
    }
}

#[test]
fn a_value_too_large_for_memory_is_refused_before_running() {
    let program = compile("fn f(n: i64) -> f64 { let a = [0.0; 100000000000]; a[0] + 1.0 }");
    let entry = program.function_by_name("f").unwrap();
    let batch = Batch {
        entry,
        size: 2,
        args: vec![Arg::Batched(vec![Tensor::scalar(Scalar::I64(1)); 2])],
    };
    for strategy in Strategy::ALL {
        let error = run(
            strategy,
            &program,
            &Env::default(),
            &batch,
            &RunOptions::default(),
        )
        .expect_err("refused")
        .to_string();
        assert!(
            error.contains("`a` (assigned at 1:31 in function `f`)") && error.contains("memory"),
            "{error}"
        );
    }
}

const UNUSED_BIG: &str = "\
fn small(x: f64) -> f64 { x + 1.0 }
fn unused(x: f64) -> f64 {
    let big = [1.0; 100000000000];
    big[0] + x
}
";

/// A function the entry never calls allocates nothing, so its variables do
/// not count; run from the function that has it, the error names the `let`.
#[test]
fn only_functions_the_entry_reaches_count_for_memory() {
    let program = compile(UNUSED_BIG);
    let batch = |name: &str| Batch {
        entry: program.function_by_name(name).unwrap(),
        size: 2,
        args: vec![Arg::Batched(vec![Tensor::scalar(Scalar::F64(1.0)); 2])],
    };
    let options = RunOptions::default();
    let batching = BatchingOptions::default();
    // Program-counter's own check is `check_lowered_memory`, below.
    for strategy in Strategy::ALL {
        let output = run(
            strategy,
            &program,
            &Env::default(),
            &batch("small"),
            &RunOptions {
                batching,
                ..options.clone()
            },
        )
        .unwrap_or_else(|e| panic!("{strategy}: {e}"));
        assert_eq!(
            output.results[0],
            Ok(vec![Tensor::scalar(Scalar::F64(2.0))])
        );
        let error = run(
            strategy,
            &program,
            &Env::default(),
            &batch("unused"),
            &RunOptions {
                batching,
                ..options.clone()
            },
        )
        .expect_err("refused")
        .to_string();
        assert!(
            error.contains("`big` (assigned at 3:15 in function `unused`)"),
            "{error}"
        );
    }
    let invariance =
        autobatch_passes::uniformity::Invariance::compute(&program, batch("small").entry, &[false]);
    let lowered = autobatch_passes::stack::lower_to_stack(&program, &invariance);
    let small =
        autobatch_exec::memory::lowered_state_bytes(&program, &lowered, batch("small").entry, &[]);
    assert!(small.per_member + small.shared < 1024, "{small:?}");
    autobatch_exec::memory::check_lowered_memory(&program, &lowered, batch("small").entry, &[], 2)
        .expect("fits");
    autobatch_exec::memory::check_lowered_memory(&program, &lowered, batch("unused").entry, &[], 2)
        .expect_err("does not fit");
}

#[test]
fn a_batch_too_large_for_memory_is_refused_before_running() {
    // 10^6 members of an array of 10^6 floats each: 8 TB.
    let program =
        compile("fn f(n: i64) -> f64 { let mut a = [0.0; 1000000]; a[0] = n as f64; a[0] }");
    let entry = program.function_by_name("f").unwrap();
    let size = 1_000_000;
    let batch = Batch {
        entry,
        size,
        args: vec![Arg::Shared(Tensor::scalar(Scalar::I64(1)))],
    };
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        let error = run(
            strategy,
            &program,
            &Env::default(),
            &batch,
            &RunOptions::default(),
        )
        .expect_err("refused")
        .to_string();
        assert!(
            error.contains("1000000 members") && error.contains("run fewer members"),
            "{error}"
        );
    }
}
