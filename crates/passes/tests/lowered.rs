//! Golden tests of the explicit-stack form: every `tests/lowered/*.ab` is
//! compiled, optimized, verified, lowered and verified again (entry parameters batched), and
//! its text must equal the `*.lowered` file beside it. The text records the
//! variable classes and the number of stack pushes. `AUTOBATCH_BLESS=1`
//! rewrites the expectations.

use std::path::Path;

use autobatch_passes::stack::{lower_to_stack, lowered_to_string};
use autobatch_passes::uniformity::Invariance;

fn lowered_text(source: &str) -> String {
    let mut program = match autobatch_lower::compile(source) {
        Ok(p) => p,
        Err(diagnostics) => panic!(
            "does not compile: {:?}",
            diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
        ),
    };
    autobatch_passes::optimize(&mut program);
    if let Err(errors) = autobatch_ir::verify::verify_program(&program) {
        panic!("verifier: {errors:?}");
    }
    let entry = autobatch_ir::FuncId(0);
    let batched = vec![false; program.functions[entry].params.len()];
    let invariance = Invariance::compute(&program, entry, &batched);
    let lowered = lower_to_stack(&program, &invariance);
    if let Err(errors) = autobatch_passes::stack::verify_lowered(&lowered) {
        panic!("stack verifier: {errors:?}");
    }
    lowered_to_string(&program, &lowered)
}

#[test]
fn lowered_forms_match_their_expectations() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lowered");
    let bless = std::env::var_os("AUTOBATCH_BLESS").is_some();
    let mut failures = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "ab"))
    {
        let actual = lowered_text(&std::fs::read_to_string(path).unwrap());
        let expected_path = path.with_extension("lowered");
        if bless {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{}:\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "lowered forms differ (AUTOBATCH_BLESS=1 to accept):\n{}",
        failures.join("\n")
    );
}

fn push_count(source: &str) -> usize {
    let mut program = autobatch_lower::compile(source).unwrap();
    autobatch_passes::optimize(&mut program);
    let entry = autobatch_ir::FuncId(0);
    let batched = vec![false; program.functions[entry].params.len()];
    lower_to_stack(&program, &Invariance::compute(&program, entry, &batched)).push_count()
}

#[test]
fn fib_saves_n_and_the_first_result_only() {
    assert_eq!(push_count(include_str!("lowered/fib.ab")), 2);
}

#[test]
fn tail_calls_need_no_stack() {
    assert_eq!(push_count(include_str!("lowered/iota_sum.ab")), 0);
    assert_eq!(push_count(include_str!("lowered/gcd.ab")), 0);
}

#[test]
fn mutual_recursion_in_tail_position_saves_nothing() {
    // is_even and is_odd call each other in tail position, but only self tail
    // calls become jumps; nothing is live after their calls, so nothing is saved.
    assert_eq!(push_count(include_str!("lowered/even_odd.ab")), 0);
}
