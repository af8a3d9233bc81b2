//! Per-member data a recursion passes down unchanged costs O(1) per call:
//! the bytes calls and forks move (`call_bytes`) and the most per-lane
//! storage held (`peak_state_bytes`) do not grow with the array's length,
//! through ordinary recursive calls (the array read after the call, so a
//! copy would be saved around it) and through `join` instances; the results
//! are the reference's, with any `--max-instances`.

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, RunOutput, Strategy};
use autobatch_ir::Program;
use autobatch_types::{Data, Scalar, Tensor};

/// `fn walk(xs: [f64; N], i: i64) -> f64 { if i <= 0 { xs[0] } else { let s = walk(xs, i - 1); s + xs[i % N] } }`
/// `fn split(xs: [f64; N], i: i64) -> f64 { if i <= 0 { xs[0] } else { let (a, b) = join(split(xs, i - 1), split(xs, i - 2)); a + b + xs[i % N] } }`
fn program(entry: &str, n: usize) -> Program {
    let walk = format!(
        "
fn f0 walk(v0 xs: [f64; {n}], v1 i: i64) -> (f64)  @1:1
  vars: v0 xs: [f64; {n}], v1 i: i64, v2: i64, v3: bool, v4: f64, v5: i64, v6: i64, v7: f64, v8: i64, v9: i64, v10: f64, v11: f64
b0:  @1:1
  v2 = const 0_i64  @2:13
  v3 = le v1, v2  @2:8
  branch v3, b1, b2
b1:  @2:15
  v4 = index v0, v2  @2:17
  return v4
b2:  @2:30
  v5 = const 1_i64  @2:50
  v6 = sub v1, v5  @2:46
  v7 = call f0 walk(v0, v6)  @2:38
  v8 = const {n}_i64  @2:60
  v9 = rem v1, v8  @2:60
  v10 = index v0, v9  @2:57
  v11 = add v7, v10  @2:53
  return v11
"
    );
    let split = format!(
        "
fn f0 split(v0 xs: [f64; {n}], v1 i: i64) -> (f64)  @3:1
  vars: v0 xs: [f64; {n}], v1 i: i64, v2: i64, v3: bool, v4: f64, v5: i64, v6: i64, v7: i64, v8: i64, v9: f64, v10: f64, v11: f64, v12: i64, v13: i64, v14: f64, v15: f64
b0:  @3:1
  v2 = const 0_i64  @4:13
  v3 = le v1, v2  @4:8
  branch v3, b1, b2
b1:  @4:15
  v4 = index v0, v2  @4:17
  return v4
b2:  @4:30
  v5 = const 1_i64  @5:30
  v6 = sub v1, v5  @5:30
  v7 = const 2_i64  @5:50
  v8 = sub v1, v7  @5:50
  v9, v10 = join f0 split(v0, v6) @5:20, f0 split(v0, v8) @5:40  @5:20
  v11 = add v9, v10  @6:9
  v12 = const {n}_i64  @6:20
  v13 = rem v1, v12  @6:20
  v14 = index v0, v13  @6:17
  v15 = add v11, v14  @6:9
  return v15
"
    );
    let text = if entry == "walk" { walk } else { split };
    let mut program = autobatch_ir::parse::parse_program(&text).expect("parses");
    autobatch_ir::verify::verify_program(&program).expect("verifies");
    autobatch_passes::optimize(&mut program);
    program
}

fn run_on(
    program: &Program,
    entry: &str,
    strategy: Strategy,
    n: usize,
    depths: &[i64],
    max_instances: Option<usize>,
) -> RunOutput {
    let xs = |m: usize| {
        let values = (0..n).map(|k| ((k * 7 + m) % 11) as f64 * 0.25).collect();
        Tensor::new(vec![n], Data::F64(values))
    };
    let batch = Batch {
        entry: program.function_by_name(entry).expect("entry"),
        size: depths.len(),
        args: vec![
            Arg::Batched((0..depths.len()).map(xs).collect()),
            Arg::Batched(
                depths
                    .iter()
                    .map(|d| Tensor::scalar(Scalar::I64(*d)))
                    .collect(),
            ),
        ],
    };
    let options = RunOptions {
        max_instances,
        max_stack_depth: 100_000,
        ..RunOptions::default()
    };
    run(strategy, program, &Env::default(), &batch, &options).expect("runs")
}

/// The figures of both batching strategies on arrays of 8 and of 4096
/// elements: equal, and the results those of the reference.
fn check_independent_of_length(entry: &str, depths: &[i64], max_instances: Option<usize>) {
    let (short, long) = (program(entry, 8), program(entry, 4096));
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        let mut figures = Vec::new();
        for (n, program) in [(8, &short), (4096, &long)] {
            let output = run_on(program, entry, strategy, n, depths, max_instances);
            let reference = run_on(program, entry, Strategy::Reference, n, depths, None);
            assert_eq!(
                output.results, reference.results,
                "{strategy} {entry} n={n}"
            );
            assert!(output.results.iter().all(|r| r.is_ok()));
            figures.push((output.stats.call_bytes, output.stats.peak_state_bytes));
        }
        assert_eq!(
            figures[0], figures[1],
            "{strategy} {entry}: (call_bytes, peak_state_bytes) grow with the array's length"
        );
        assert!(
            figures[0].0 > 0,
            "{strategy} {entry}: the calls move their other arguments"
        );
    }
}

#[test]
fn an_array_passed_down_a_deep_recursion_costs_nothing_per_call() {
    check_independent_of_length("walk", &[0, 3, 1000, 2000], None);
}

#[test]
fn an_array_passed_to_join_instances_costs_nothing_per_instance() {
    check_independent_of_length("split", &[0, 1, 5, 12], None);
    check_independent_of_length("split", &[7, 3, 9], Some(1));
}
