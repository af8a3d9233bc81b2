//! Statistics of the reference executor (steps, operation counts, lane
//! utilization) and its random streams, on the IR programs of `tests/ir/`.
//!
//! What each member computes on these programs, errors included, is checked
//! on every strategy by the directives in the `.ir` files themselves
//! (`tests/ir_files.rs`); the figures here are the reference executor's own,
//! which the batching strategies do not share, and the draws are compared
//! with `MemberRng` itself, which a text directive cannot name.

use autobatch_exec::{reference, Arg, Batch, Env, OpCount, RunOptions, RunOutput};
use autobatch_ir::verify::verify_program;
use autobatch_ir::{FuncId, Program};
use autobatch_kernels::MemberRng;
use autobatch_types::{Data, Loc, Scalar, Tensor};

fn loc(line: u32, column: u32) -> Loc {
    Loc::new(line, column)
}

/// The program of `tests/ir/{name}.ir`, verified.
fn program(name: &str) -> Program {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ir")
        .join(format!("{name}.ir"));
    let text = std::fs::read_to_string(&path).expect("readable IR file");
    let program = autobatch_ir::parse::parse_program(&text)
        .unwrap_or_else(|e| panic!("{}:{e}", path.display()));
    if let Err(errors) = verify_program(&program) {
        panic!("the test program does not verify: {errors:?}");
    }
    program
}

fn i64s(values: &[i64]) -> Arg {
    Arg::Batched(
        values
            .iter()
            .map(|&v| Tensor::scalar(Scalar::I64(v)))
            .collect(),
    )
}

fn run_with(program: &Program, entry: FuncId, args: Vec<Arg>, options: &RunOptions) -> RunOutput {
    // A batch of only shared arguments has one member.
    let batched_len = |a: &Arg| match a {
        Arg::Batched(values) => Some(values.len()),
        Arg::Shared(_) => None,
    };
    let size = args.iter().find_map(batched_len).unwrap_or(1);
    reference::run(
        program,
        &Env::default(),
        &Batch { entry, size, args },
        options,
    )
}

fn ok_i64(output: &RunOutput, member: usize) -> i64 {
    match &output.results[member] {
        Ok(values) => match values[..] {
            [ref t] => match t.as_scalar() {
                Scalar::I64(v) => v,
                other => panic!("member {member}: expected an i64, got {other:?}"),
            },
            _ => panic!("member {member}: expected one result, got {}", values.len()),
        },
        Err(e) => panic!("member {member} failed: {e}"),
    }
}

fn count<'a>(output: &'a RunOutput, op: &str, at: Loc) -> &'a OpCount {
    match output
        .stats
        .op_counts
        .iter()
        .find(|c| c.op == op && c.loc == at)
    {
        Some(c) => c,
        None => panic!("no count for {op} at {at}: {:?}", output.stats.op_counts),
    }
}

// ---------------------------------------------------------------------------
// Tests.

#[test]
fn a_loop_counts_its_steps_and_operations() {
    let output = run_with(
        &program("sum_to"),
        FuncId(0),
        vec![i64s(&[0, 1, 5, 10])],
        &RunOptions::default(),
    );
    // sum_to(n) enters 2n + 3 blocks: entry, n + 1 headers, n bodies, exit.
    assert_eq!(
        output.stats.steps,
        [0, 1, 5, 10].iter().map(|n| 2 * n + 3).sum::<u64>()
    );
    let add = count(&output, "add", loc(4, 9));
    assert_eq!((add.executions, add.active_lanes), (16, 16));
    assert_eq!(count(&output, "lt", loc(3, 11)).executions, 1 + 2 + 6 + 11);
}

#[test]
fn recursive_fib_counts() {
    let inputs = [3, 7, 4, 5];
    let output = run_with(
        &program("fib"),
        FuncId(0),
        vec![i64s(&inputs)],
        &RunOptions::default(),
    );
    let results: Vec<i64> = (0..4).map(|m| ok_i64(&output, m)).collect();
    // Each call tree with fib(n) leaves has fib(n) - 1 additions: one per member execution.
    let add = count(&output, "add", loc(2, 28));
    assert_eq!(
        add.executions,
        results.iter().map(|r| (r - 1) as u64).sum::<u64>()
    );
    assert_eq!(add.executions, 33);
    assert_eq!(add.active_lanes, add.executions);
    // 2 fib(n) - 1 calls per member, each comparing once.
    assert_eq!(
        count(&output, "le", loc(2, 8)).executions,
        results.iter().map(|r| (2 * r - 1) as u64).sum::<u64>()
    );
    assert!((output.stats.lane_utilization - 0.25).abs() < 1e-15);
    // Constants are bookkeeping; the two subtractions are separate entries.
    assert!(output.stats.op_counts.iter().all(|c| c.op != "const"));
    let names: Vec<(&str, u32)> = output
        .stats
        .op_counts
        .iter()
        .map(|c| (c.op, c.loc.column))
        .collect();
    assert_eq!(
        names,
        vec![("le", 8), ("add", 28), ("sub", 32), ("sub", 47)]
    );
}

#[test]
fn a_zero_stack_limit_runs_no_step_and_lists_every_operation() {
    let options = RunOptions {
        max_stack_depth: 0,
        ..RunOptions::default()
    };
    let output = run_with(&program("depth"), FuncId(0), vec![i64s(&[0, 1])], &options);
    assert_eq!(output.stats.steps, 0);
    assert_eq!(output.stats.lane_utilization, 0.0);
    assert!(
        output.stats.op_counts.iter().all(|c| c.executions == 0),
        "ops that never ran are listed with zero"
    );
    let names: Vec<&str> = output.stats.op_counts.iter().map(|c| c.op).collect();
    assert_eq!(names, vec!["eq", "add", "sub"]);
}

#[test]
fn steps_stop_at_the_step_limit() {
    let options = RunOptions {
        max_steps: 13,
        ..RunOptions::default()
    };
    let output = run_with(
        &program("sum_to"),
        FuncId(0),
        vec![i64s(&[5, 6, 1_000_000_000])],
        &options,
    );
    assert_eq!(output.stats.steps, 13 * 3);
    // depth(2) enters: entry, recurse, entry, recurse, entry, base = 6 blocks.
    let exact = RunOptions {
        max_steps: 6,
        ..RunOptions::default()
    };
    let output = run_with(&program("depth"), FuncId(0), vec![i64s(&[2])], &exact);
    assert_eq!(output.stats.steps, 6);
}

#[test]
fn a_faulting_division_counts_as_executed() {
    let args = vec![
        Arg::Shared(Tensor::scalar(Scalar::I64(12))),
        i64s(&[4, 0, -5]),
    ];
    let output = run_with(
        &program("quotient"),
        FuncId(0),
        args,
        &RunOptions::default(),
    );
    // The faulting division still counts as executed by the member that reached it.
    assert_eq!(count(&output, "div", loc(1, 40)).executions, 3);
}

#[test]
fn random_draws_depend_only_on_seed_and_member() {
    let program = program("draws");
    let options = RunOptions {
        seed: 2024,
        ..RunOptions::default()
    };
    let small = run_with(&program, FuncId(0), vec![i64s(&[0; 4])], &options);
    let large = run_with(&program, FuncId(0), vec![i64s(&[0; 10])], &options);
    for member in 0..4 {
        assert_eq!(
            small.results[member], large.results[member],
            "member {member}"
        );
    }
    // Member 3's draws are exactly its own stream, in program order.
    let mut rng = MemberRng::new(2024, 3);
    let expected = vec![
        Tensor::scalar(Scalar::F64(rng.uniform())),
        Tensor::scalar(Scalar::F64(rng.normal())),
        Tensor::scalar(Scalar::Bool(rng.bernoulli(0.5))),
        Tensor::new(vec![3], Data::F64(rng.normal_vec(3))),
    ];
    assert_eq!(small.results[3].as_ref().unwrap(), &expected);
    assert_ne!(
        small.results[2], small.results[3],
        "members draw from different streams"
    );
    let other_seed = run_with(
        &program,
        FuncId(0),
        vec![i64s(&[0; 4])],
        &RunOptions { seed: 7, ..options },
    );
    assert_ne!(other_seed.results[3], small.results[3]);
}

#[test]
fn ops_with_the_same_name_and_loc_merge_and_unrun_ops_count_zero() {
    // `neg<1>` and `neg<2>` both negate at 5:9; only the first is called.
    let output = run_with(
        &program("neg_copies"),
        FuncId(0),
        vec![i64s(&[2, 3])],
        &RunOptions::default(),
    );
    let summary: Vec<(&str, Loc, u64)> = output
        .stats
        .op_counts
        .iter()
        .map(|c| (c.op, c.loc, c.executions))
        .collect();
    assert_eq!(summary, vec![("mul", loc(2, 20), 2), ("neg", loc(5, 9), 2)]);
    assert!((output.stats.lane_utilization - 0.5).abs() < 1e-15);
    assert!(output.stats.wall_seconds >= 0.0);
}

#[test]
fn an_empty_batch_runs_nothing() {
    let output = run_with(
        &program("fib"),
        FuncId(0),
        vec![i64s(&[])],
        &RunOptions::default(),
    );
    assert!(output.results.is_empty());
    assert_eq!(output.stats.steps, 0);
    assert_eq!(output.stats.lane_utilization, 0.0);
    assert_eq!(output.stats.op_counts.len(), 4);
}
