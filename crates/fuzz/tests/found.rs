//! Bugs the fuzzer found in other crates, each as its shrunk (then
//! hand-reduced) case, kept as a regression test once fixed (an unfixed
//! one is `#[ignore]`d until its fix lands).

use autobatch_fuzz::oracle::{check_source, Verdict};
use autobatch_fuzz::Limits;

/// `autobatch-fuzz programs --seed 200000 --count 40000` (seed 208649):
/// a variable read before a `map` in one expression and assigned after it
/// in the same expression (in an `if` inside an array literal). The stack
/// pass (program-counter and native) reads the variable's temporary in the
/// fork's arguments where it is not written: "internal error: the
/// explicit-stack form is invalid: stack verifier: fn main pc0: the fork's
/// arguments: reads x1 (v), a temporary not written earlier in this block".
/// The reference and local-static give `6.0, 14.0`. Fixed: the stack
/// pass's copy coalescing now counts a fork's arguments as reads
/// (`term_reads` in `crates/passes/src/stack`).
#[test]
fn a_variable_assigned_after_a_map_in_one_expression() {
    let source = r#"
fn main(d: i64) -> f64 {
    let mut v: f64 = d as f64;
    let a: [f64; 3] = [v, map(f, [0, 0], v)[0], (if d > 5 { v = 1.0; 0.0 } else { 0.0 })];
    a[0] + a[1]
}
fn f(d: i64, p: f64) -> f64 { p }
"#;
    let limits = Limits {
        max_stack_depth: 64,
        max_steps: 20_000,
        seed: 0,
    };
    let verdict = check_source(source, r#"{"batch": {"d": [3, 7]}}"#, limits);
    assert_eq!(verdict, Verdict::Pass);
}
