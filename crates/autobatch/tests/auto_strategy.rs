//! The `auto` strategy: which executor it picks for representative
//! programs (the examples, scalar control, products with small and large
//! static matrices, a host primitive, a profile), that the run reports the
//! pick and its reason, and that its results are the reference's, bit for
//! bit. The expected picks follow the rule of README.md (`--strategy auto`) applied
//! by hand to each program's source.
//!
//! A run whose native code the process has not compiled yet may be tried
//! first on program-counter (README.md, "a small run first"): which
//! executor ran then depends on what the test process ran before, so the
//! picks are checked with `strategy_for` (the rule's pick) and the results
//! of every run against the reference's; the trial has tests of its own,
//! on programs no other test compiles.

use std::path::PathBuf;

use autobatch::typed::{FromValue, IntoValue};
use autobatch::{compile, Compiled, Inputs, RunConfig, RunResult, Strategy};
use serde_json::json;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn read(path: &str) -> String {
    let path = examples().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn compiled(source: &str, path: &str) -> Compiled {
    compile(source, path).unwrap_or_else(|e| panic!("{path}: {}", e.render(false)))
}

/// `strategy` on `threads` threads, the other options the defaults.
fn config(strategy: Strategy, threads: usize) -> RunConfig {
    let mut config = RunConfig {
        strategy,
        ..RunConfig::default()
    };
    config.options.threads = threads;
    config
}

/// What `auto` did with a run: the rule's pick, and the run.
struct AutoRun {
    /// The executor the rule picks (which ran, unless a trial on
    /// program-counter finished the run).
    pick: Strategy,
    run: RunResult,
}

/// Runs `entry` under `auto` on `threads` threads and under the reference;
/// checks that they agree bit for bit (the JSON of `f64`s round-trips) and
/// that the result names the strategy that ran with `auto`'s reason: the
/// rule's pick, or program-counter after a trial that finished the run.
fn run_auto(program: &Compiled, entry: &str, inputs: &Inputs, threads: usize) -> AutoRun {
    let bound = program
        .bind(entry, inputs)
        .unwrap_or_else(|e| panic!("{entry}: {}", e.message()));
    let pick = bound.strategy_for(&config(Strategy::Auto, threads));
    let auto = bound.run(&config(Strategy::Auto, threads)).expect("runs");
    let reference = bound
        .run(&config(Strategy::Reference, threads))
        .expect("runs");
    assert_eq!(
        auto.to_json(false)["results"],
        reference.to_json(false)["results"],
        "{entry}: auto ({}) differs from the reference",
        auto.strategy
    );
    let choice = auto
        .stats
        .choice
        .as_ref()
        .expect("auto says what it picked");
    assert_eq!(choice.strategy, auto.strategy);
    let stats = auto.stats_to_json();
    assert_eq!(stats["strategy"], json!(auto.strategy.name()));
    assert_eq!(
        stats["strategy_reason"],
        json!(format!("picked by auto: {}", choice.reason))
    );
    let tried = choice.reason.contains("tried first on program-counter");
    assert!(
        auto.strategy == pick || (tried && auto.strategy == Strategy::ProgramCounter),
        "{entry}: picked {pick}, ran {}: {}",
        auto.strategy,
        choice.reason
    );
    AutoRun { pick, run: auto }
}

fn example_inputs(path: &str) -> Inputs {
    Inputs::from_json_str(&read(path)).expect("the example's input parses")
}

#[test]
fn the_examples_pick_by_their_products() {
    // (program, entry, inputs, the pick on one thread)
    let cases = [
        ("fib.ab", "fib", "fib.json", Strategy::Native),
        ("collatz.ab", "collatz", "collatz.json", Strategy::Native),
        (
            "newton_sqrt.ab",
            "newton_sqrt",
            "newton_sqrt.json",
            Strategy::Native,
        ),
        // matvec(X, theta) with X a static, three members, no recursion.
        (
            "logistic.ab",
            "log_likelihood",
            "logistic.json",
            Strategy::ProgramCounter,
        ),
        // The gates' matvec with static weights, a batch of trees:
        // recursion, with the small inputs' small matrices.
        (
            "models/treelstm.ab",
            "classify",
            "models/treelstm_small.json",
            Strategy::Native,
        ),
        // The gates' matvec with static weights in loops over the tokens.
        (
            "models/birnn.ab",
            "classify",
            "models/birnn_small.json",
            Strategy::ProgramCounter,
        ),
        // Three static matvec against two matvec with per-member matrices
        // and two matmul: mostly per-member products.
        (
            "models/mvrnn.ab",
            "classify",
            "models/mvrnn_small.json",
            Strategy::Native,
        ),
        // Attention: matmul of whole sequences, one static matvec.
        (
            "models/berxit.ab",
            "classify",
            "models/berxit_small.json",
            Strategy::Native,
        ),
    ];
    for (program, entry, inputs, expected) in cases {
        let source = read(program);
        let run = run_auto(
            &compiled(&source, program),
            entry,
            &example_inputs(inputs),
            1,
        );
        assert_eq!(run.pick, expected, "{program}");
    }
}

#[test]
fn scalar_control_runs_native() {
    let program = compiled(&read("fib.ab"), "fib.ab");
    let run = run_auto(&program, "fib", &example_inputs("fib.json"), 1);
    assert_eq!(run.pick, Strategy::Native);
    let reason = &run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains("no product with a static matrix"),
        "{reason}"
    );
}

const MATRICES: &str = r#"
extern "autobatch" {
    static W: [[f64; C]; R];
}
/// A product with a static matrix inside a loop.
fn apply(x: [f64; C], times: i64) -> f64 {
    let mut total = 0.0;
    let mut i = 0;
    while i < times {
        total += sum(matvec(W, x));
        i += 1;
    }
    total
}
"#;

/// `MATRICES` with the loop made a recursion.
const RECURSIVE_MATRICES: &str = r#"
extern "autobatch" {
    static W: [[f64; C]; R];
}
/// A product with a static matrix in each call of a recursion.
fn apply(x: [f64; C], times: i64) -> f64 {
    if times <= 0 {
        0.0
    } else {
        sum(matvec(W, x)) + apply(x, times - 1)
    }
}
"#;

/// `MATRICES` bound with an `rows` x `columns` static and `members`
/// members (member m's vector is all m / 10, its loop runs 1 + m % 3 times).
fn matrix_inputs(rows: usize, columns: usize, members: usize) -> Inputs {
    let w: Vec<Vec<f64>> = (0..rows)
        .map(|r| {
            (0..columns)
                .map(|c| ((r * 7 + c) % 13) as f64 / 8.0)
                .collect()
        })
        .collect();
    let x: Vec<Vec<f64>> = (0..members)
        .map(|m| vec![m as f64 / 10.0; columns])
        .collect();
    let times: Vec<i64> = (0..members).map(|m| 1 + (m % 3) as i64).collect();
    Inputs::new()
        .shared("W", json!(w))
        .batched("x", x)
        .batched("times", times)
}

#[test]
fn small_static_matrices_in_loops_run_program_counter() {
    let program = compiled(MATRICES, "matrices.ab");
    let run = run_auto(&program, "apply", &matrix_inputs(16, 8, 6), 2);
    assert_eq!(run.pick, Strategy::ProgramCounter);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains(
            "1 of the program's 1 matrix products with a static matrix, the largest 16 x 8"
        ) && reason.contains("no recursion"),
        "{reason}"
    );
}

#[test]
fn a_recursion_with_small_matrices_runs_native() {
    let program = compiled(RECURSIVE_MATRICES, "recursive.ab");
    // 64 x 64 = 2^12 elements, the threshold.
    for (rows, columns) in [(16, 8), (64, 64)] {
        let run = run_auto(&program, "apply", &matrix_inputs(rows, columns, 6), 2);
        assert_eq!(run.pick, Strategy::Native, "{rows} x {columns}");
        let reason = run.run.stats.choice.unwrap().reason;
        assert!(
            reason.contains(&format!(
                "1 of the program's 1 matrix products with a static matrix, the largest {rows} x {columns}"
            )) && reason.contains("a recursive program with small matrices"),
            "{reason}"
        );
    }
}

#[test]
fn larger_matrices_in_a_recursion_run_native_batched_with_members_to_share_them() {
    let program = compiled(RECURSIVE_MATRICES, "recursive.ab");
    let run = run_auto(&program, "apply", &matrix_inputs(64, 65, 6), 2);
    assert_eq!(run.pick, Strategy::NativeBatched);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains(
            "1 of the program's 1 matrix products with a static matrix, the largest 64 x 65"
        ) && reason.contains("a recursive program: each shared by up to 3 members per thread"),
        "{reason}"
    );
    // One member per thread: nothing to share the product with.
    let run = run_auto(&program, "apply", &matrix_inputs(64, 65, 2), 2);
    assert_eq!(run.pick, Strategy::Native);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains("one member per thread to share them"),
        "{reason}"
    );
}

#[test]
fn a_recursions_gradient_with_respect_to_small_statics_runs_native() {
    let program = compiled(RECURSIVE_MATRICES, "recursive.ab");
    let bound = program
        .bind_static_gradient("apply", &["W"], &matrix_inputs(16, 8, 6))
        .unwrap_or_else(|e| panic!("{}", e.message()));
    let auto = bound.run(&config(Strategy::Auto, 2)).expect("runs");
    let reference = bound.run(&config(Strategy::Reference, 2)).expect("runs");
    assert_eq!(
        bound.strategy_for(&config(Strategy::Auto, 2)),
        Strategy::Native
    );
    assert_eq!(
        auto.to_json(false)["static_gradients"],
        reference.to_json(false)["static_gradients"]
    );
    let reason = auto.stats.choice.unwrap().reason;
    assert!(
        reason.contains("a recursive program's gradient with respect to statics"),
        "{reason}"
    );
}

#[test]
fn products_mostly_with_per_member_matrices_run_native() {
    let source = r#"
extern "autobatch" {
    static W: [[f64; 3]; 3];
}
fn mix(m: [[f64; 3]; 3], x: [f64; 3]) -> f64 {
    let a = matvec(m, x);
    let b = matvec(matmul(m, m), a);
    sum(matvec(W, b))
}
"#;
    let program = compiled(source, "mix.ab");
    let m: Vec<Vec<Vec<f64>>> = (0..4)
        .map(|k| {
            (0..3)
                .map(|r| (0..3).map(|c| ((k + r * 3 + c) % 5) as f64 / 4.0).collect())
                .collect()
        })
        .collect();
    let x: Vec<Vec<f64>> = (0..4).map(|k| vec![k as f64, 1.0, -0.5]).collect();
    let w = json!([[1.0, 0.5, 0.0], [0.0, 1.0, 0.5], [0.5, 0.0, 1.0]]);
    let inputs = Inputs::new()
        .batched("m", m.into_iter().map(|v| json!(v)))
        .batched("x", x)
        .shared("W", w);
    let run = run_auto(&program, "mix", &inputs, 1);
    assert_eq!(run.pick, Strategy::Native);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains("1 of the program's 4 matrix products with a static matrix")
            && reason.contains("most products are with per-member matrices"),
        "{reason}"
    );
}

#[test]
fn large_static_matrices_without_recursion_run_program_counter() {
    let program = compiled(MATRICES, "matrices.ab");
    // 512 x 512 = 2^18 elements, the threshold.
    let run = run_auto(&program, "apply", &matrix_inputs(512, 512, 4), 1);
    assert_eq!(run.pick, Strategy::ProgramCounter);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains("the largest 512 x 512") && reason.contains("larger than the cache"),
        "{reason}"
    );
}

#[test]
fn large_static_matrices_in_a_recursion_run_native_batched() {
    // A recursion's members wait at the products at different depths:
    // native-batched shares each product among them whatever the size.
    let program = compiled(RECURSIVE_MATRICES, "recursive.ab");
    let run = run_auto(&program, "apply", &matrix_inputs(512, 512, 4), 1);
    assert_eq!(run.pick, Strategy::NativeBatched);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains("the largest 512 x 512") && reason.contains("a recursive program"),
        "{reason}"
    );
}

/// `MATRICES` through `value_and_grad`: the forward part keeps the
/// product's result (an array) on the tape (the loss branches, so its
/// gradient is not one fused block).
const GRADIENT_MATRICES: &str = r#"
extern "autobatch" {
    static W: [[f64; C]; R];
}
fn loss(x: [f64; C]) -> f64 {
    let z = matvec(W, x);
    if z[0] > 1.0e300 { 0.0 } else { sum(softplus(z)) }
}
/// Gradient steps on x, each through the product with W.
fn apply(x: [f64; C], times: i64) -> f64 {
    let mut t = x;
    let mut total = 0.0;
    let mut i = 0;
    while i < times {
        let (value, g) = value_and_grad(loss, t);
        t = t - 0.01 * g;
        total += value;
        i += 1;
    }
    total + sum(t)
}
"#;

#[test]
fn gradients_with_small_static_matrices_run_native_and_large_ones_program_counter() {
    let program = compiled(GRADIENT_MATRICES, "gradient.ab");
    let run = run_auto(&program, "apply", &matrix_inputs(16, 8, 6), 2);
    assert_eq!(run.pick, Strategy::Native);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains("the largest 16 x 8")
            && reason.contains("each member alone in machine code, its tape in its frames"),
        "{reason}"
    );
    let run = run_auto(&program, "apply", &matrix_inputs(512, 512, 4), 2);
    assert_eq!(run.pick, Strategy::ProgramCounter);
}

/// A loss of one block: its gradient is one fused function that tapes
/// nothing, so the members' steps run in step on program-counter, each
/// product once for the whole batch.
#[test]
fn a_fused_gradient_with_small_static_matrices_runs_program_counter() {
    let source = GRADIENT_MATRICES.replace(
        "let z = matvec(W, x);\n    if z[0] > 1.0e300 { 0.0 } else { sum(softplus(z)) }",
        "sum(softplus(matvec(W, x)))",
    );
    assert_ne!(source, GRADIENT_MATRICES);
    let program = compiled(&source, "fused.ab");
    let run = run_auto(&program, "apply", &matrix_inputs(16, 8, 6), 2);
    assert_eq!(run.pick, Strategy::ProgramCounter);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(reason.contains("no recursion"), "{reason}");
}

#[test]
fn a_program_native_code_does_not_compile_runs_program_counter() {
    let source = r#"
extern "autobatch" {
    fn twice(x: f64) -> f64;
}
fn f(x: f64) -> f64 { twice(x) + 1.0 }
"#;
    let program = compiled(source, "host.ab")
        .with_host("twice", |args| {
            let x = f64::from_value(args[0].clone()).ok_or("not an f64")?;
            Ok((2.0 * x).into_value())
        })
        .expect("twice is called");
    let inputs = Inputs::new().batched("x", vec![1.0, -2.5, 3.0]);
    let run = run_auto(&program, "f", &inputs, 1);
    assert_eq!(run.pick, Strategy::ProgramCounter);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.starts_with("native code does not compile the program"),
        "{reason}"
    );
}

#[test]
fn a_profile_runs_program_counter_which_records_it() {
    let program = compiled(&read("fib.ab"), "fib.ab");
    let bound = program
        .bind("fib", &example_inputs("fib.json"))
        .expect("binds");
    let mut profiled = config(Strategy::Auto, 1);
    profiled.options.profile = true;
    let run = bound.run(&profiled).expect("runs");
    assert_eq!(run.strategy, Strategy::ProgramCounter);
    assert!(run.stats.profile.is_some());
}

#[test]
fn a_named_strategy_is_reported_as_asked_for() {
    let program = compiled(&read("fib.ab"), "fib.ab");
    let bound = program
        .bind("fib", &example_inputs("fib.json"))
        .expect("binds");
    let run = bound.run(&config(Strategy::LocalStatic, 1)).expect("runs");
    assert!(run.stats.choice.is_none());
    assert_eq!(run.stats_to_json()["strategy_reason"], json!("asked for"));
    assert_eq!(RunConfig::default().strategy, Strategy::Auto);
    assert_eq!(
        bound.strategy_for(&config(Strategy::Auto, 1)),
        Strategy::Native
    );
}

/// A recursion of its own name for each trial test (`name`), so that no
/// other test of the process has compiled it (a program compiled already
/// has no trial).
fn recursion(name: &str) -> Compiled {
    let source = format!(
        "fn {name}(n: i64) -> i64 {{ if n <= 1 {{ 1 }} else {{ {name}(n - 2) + {name}(n - 1) }} }}"
    );
    compiled(&source, &format!("{name}.ab"))
}

#[test]
fn a_small_run_is_tried_on_program_counter_and_finishes_there() {
    let program = recursion("trial_small");
    let inputs = Inputs::new().batched("n", vec![3i64, 7, 4, 5]);
    let run = run_auto(&program, "trial_small", &inputs, 1);
    assert_eq!(run.pick, Strategy::Native);
    assert_eq!(run.run.strategy, Strategy::ProgramCounter);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.starts_with("no product with a static matrix")
            && reason.contains("a small run, tried first on program-counter (no compiling)"),
        "{reason}"
    );
}

#[test]
fn a_run_longer_than_its_trial_is_compiled_and_later_runs_are_not_tried() {
    let program = recursion("trial_long");
    // fib(25) takes hundreds of thousands of steps: more than its share.
    let long = Inputs::new().batched("n", vec![3i64, 25]);
    let run = run_auto(&program, "trial_long", &long, 1);
    assert_eq!(run.run.strategy, Strategy::Native);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(
        reason.contains(
            "tried first on program-counter, a member did not finish within the trial's steps"
        ),
        "{reason}"
    );
    // The code is compiled now: a small run of the program runs it.
    let small = Inputs::new().batched("n", vec![3i64, 4]);
    let run = run_auto(&program, "trial_long", &small, 1);
    assert_eq!(run.run.strategy, Strategy::Native);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(!reason.contains("tried"), "{reason}");
}

#[test]
fn a_batch_too_large_for_a_trial_is_compiled_at_once() {
    let program = recursion("trial_large");
    let inputs = Inputs::new().batched("n", vec![2i64; 4096]);
    let run = run_auto(&program, "trial_large", &inputs, 1);
    assert_eq!(run.run.strategy, Strategy::Native);
    let reason = run.run.stats.choice.unwrap().reason;
    assert!(!reason.contains("tried"), "{reason}");
}

#[test]
fn a_trial_within_the_runs_own_step_limit_gives_the_step_limit_errors() {
    let program = recursion("trial_limited");
    let inputs = Inputs::new().batched("n", vec![3i64, 12]);
    let bound = program.bind("trial_limited", &inputs).expect("binds");
    let limited = |strategy| {
        let mut config = config(strategy, 1);
        config.options.max_steps = 20;
        bound.run(&config).expect("runs")
    };
    let auto = limited(Strategy::Auto);
    let reference = limited(Strategy::Reference);
    assert_eq!(auto.strategy, Strategy::ProgramCounter);
    assert_eq!(
        auto.to_json(false)["results"],
        reference.to_json(false)["results"]
    );
    let results = auto.to_json(false)["results"].to_string();
    assert!(results.contains("step_limit"), "{results}");
}
