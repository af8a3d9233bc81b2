//! The native strategies (`native`, `native-batched`, `native-lockstep`)
//! really compile the programs they are meant to (the report says
//! `compiled: true`), so that their code paths cannot rot into the
//! fallback unnoticed, and give every member the reference's result:
//! values, every fault kind, step limits and stack depth, caught or not;
//! arrays, statics, products and random draws included. A program it does
//! not compile yet (a fork) runs on program-counter, and the report says
//! what stopped the compiler, and where.

mod common;

use std::sync::Arc;
use std::time::Duration;

use autobatch_exec::{
    run, Arg, Batch, Env, Observer, ReportField, ReportValue, RunOptions, Strategy,
};
use autobatch_ir::Program;
use autobatch_types::{Data, Scalar, Tensor};
use common::report_field as field;

fn compile(source: &str) -> Program {
    let mut program = autobatch_lower::compile(source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

fn native() -> Strategy {
    Strategy::from_name("native").expect("registered")
}

fn native_batched() -> Strategy {
    Strategy::from_name("native-batched").expect("registered")
}

fn native_lockstep() -> Strategy {
    Strategy::from_name("native-lockstep").expect("registered")
}

/// Runs `entry` on `members` (one scalar argument list each) natively and
/// on the reference; asserts identical results and steps, and gives the
/// native report.
fn agree(
    source: &str,
    entry: &str,
    members: &[Vec<Scalar>],
    options: &RunOptions,
) -> Vec<ReportField> {
    let [native, _, _] = agree_all(source, entry, members, options);
    native
}

/// [`agree`] giving the reports of `native`, `native-batched` and
/// `native-lockstep`, in that order.
fn agree_all(
    source: &str,
    entry: &str,
    members: &[Vec<Scalar>],
    options: &RunOptions,
) -> [Vec<ReportField>; 3] {
    let program = compile(source);
    let batch = scalar_batch(&program, entry, members);
    let run_with = |strategy, options: &RunOptions| run_batch(strategy, &program, &batch, options);
    let expected = run_with(Strategy::Reference, options);
    // Every shape of native code: members alone, members together waiting
    // at products, members in lock-step.
    [native(), native_batched(), native_lockstep()].map(|strategy| {
        let got = run_with(strategy, options);
        let name = format!("{entry} on {strategy}");
        assert_eq!(
            results_bits(&got.results),
            results_bits(&expected.results),
            "{name}"
        );
        // Code that counts nothing gives the same results and steps, and
        // no counts.
        let uncounted = run_with(
            strategy,
            &RunOptions {
                count_operations: false,
                ..options.clone()
            },
        );
        assert_eq!(
            results_bits(&uncounted.results),
            results_bits(&expected.results),
            "{name}, uncounted"
        );
        assert_eq!(
            uncounted.stats.steps, got.stats.steps,
            "{name}, uncounted: steps"
        );
        if field(&got.stats.report, "compiled") == &ReportValue::Bool(true) {
            assert!(
                uncounted.stats.op_counts.is_empty(),
                "{name}: nothing counted"
            );
            // Each member's executions and steps, summed, as under the
            // reference.
            assert_eq!(
                got.stats.op_counts, expected.stats.op_counts,
                "{name}: op counts"
            );
            assert_eq!(got.stats.steps, expected.stats.steps, "{name}: steps");
            assert_eq!(
                (got.stats.instances, got.stats.peak_instances),
                (expected.stats.instances, expected.stats.peak_instances),
                "{name}: instances started and most live at once"
            );
        }
        got.stats.report
    })
}

/// One member per list of scalar arguments, for `entry` of `program`.
fn scalar_batch(program: &Program, entry: &str, members: &[Vec<Scalar>]) -> Batch {
    Batch {
        entry: program.function_by_name(entry).expect("entry"),
        size: members.len(),
        args: (0..members[0].len())
            .map(|p| Arg::Batched(members.iter().map(|m| Tensor::scalar(m[p])).collect()))
            .collect(),
    }
}

/// Runs `batch` of `program` on `strategy` (no statics).
fn run_batch(
    strategy: Strategy,
    program: &Program,
    batch: &Batch,
    options: &RunOptions,
) -> autobatch_exec::RunOutput {
    run(strategy, program, &Env::default(), batch, options).expect("runs")
}

/// Each member's results with their floats as bit patterns, or its error.
fn results_bits(results: &[Result<Vec<Tensor>, autobatch_types::MemberError>]) -> Vec<String> {
    results
        .iter()
        .map(|r| {
            format!(
                "{:?}",
                r.as_ref()
                    .map(|values| values.iter().map(tensor_bits).collect::<Vec<_>>())
            )
        })
        .collect()
}

/// A value with its floats as bit patterns (so that NaNs compare).
fn tensor_bits(t: &Tensor) -> String {
    match &t.data {
        Data::F64(values) => format!(
            "{:?}",
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        ),
        Data::F32(values) => format!(
            "{:?}",
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    }
}

fn assert_compiled(report: &[ReportField], what: &str) {
    assert_eq!(
        field(report, "compiled"),
        &ReportValue::Bool(true),
        "{what}: {report:?}"
    );
    assert_eq!(
        field(report, "members_rerun"),
        &ReportValue::Count(0),
        "{what}"
    );
}

fn i64s(values: &[i64]) -> Vec<Vec<Scalar>> {
    values.iter().map(|v| vec![Scalar::I64(*v)]).collect()
}

const FIB: &str = "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }";

const COLLATZ: &str = "
fn collatz(n: i64) -> i64 {
    let mut x = n;
    let mut steps = 0;
    while x != 1 {
        if x % 2 == 0 { x = x / 2; } else { x = 3 * x + 1; }
        steps += 1;
    }
    steps
}";

const NESTED: &str = "
fn nested(n: i64) -> (i64, f64) {
    let mut acc = 0;
    let mut f = 0.0;
    for i in 0..n {
        for j in 0..i {
            acc = acc * 31 + (i ^ j) - (j << 3);
            f = f + (j as f64).sqrt() * 0.5 - (i as f64) / 3.0;
            f = f.max(-1e6).min(1e6) + (f * 0.001).tanh() + (j as f64 + 1.0).ln();
        }
    }
    (acc, f)
}";

#[test]
fn fib_collatz_and_nested_loops_are_compiled() {
    let options = RunOptions::default();
    let report = agree(FIB, "fib", &i64s(&[0, 1, 5, 15, 20, 3]), &options);
    assert_compiled(&report, "fib");
    let report = agree(
        COLLATZ,
        "collatz",
        &i64s(&[1, 2, 27, 97, 871, 6171]),
        &options,
    );
    assert_compiled(&report, "collatz");
    let report = agree(NESTED, "nested", &i64s(&[0, 1, 7, 40, 100]), &options);
    assert_compiled(&report, "nested");
}

/// Runs `entry` on `members` on native and native-batched with an
/// observer and an interrupt that native code looks at (so that the code
/// is interruptible: it holds its steps a slice at a time) and on the
/// reference; asserts identical results, steps and operation counts.
fn agree_watched(source: &str, entry: &str, members: &[Vec<Scalar>], max_steps: u64) {
    let program = compile(source);
    let batch = scalar_batch(&program, entry, members);
    let options = RunOptions {
        max_steps,
        observer: Some(autobatch_exec::Observer {
            interval: std::time::Duration::from_secs(3600),
            callback: std::sync::Arc::new(|_| {}),
        }),
        interrupt: Some(autobatch_exec::Interrupt::new().within_members()),
        ..RunOptions::default()
    };
    let expected = run_batch(Strategy::Reference, &program, &batch, &options);
    for strategy in [native(), native_batched()] {
        let got = run_batch(strategy, &program, &batch, &options);
        let name = format!("{entry} on {strategy}, max_steps {max_steps}");
        assert_compiled(&got.stats.report, &name);
        assert_eq!(
            results_bits(&got.results),
            results_bits(&expected.results),
            "{name}"
        );
        assert_eq!(got.stats.steps, expected.stats.steps, "{name}: steps");
        assert_eq!(
            got.stats.op_counts, expected.stats.op_counts,
            "{name}: op counts"
        );
    }
}

#[test]
fn members_stop_at_the_step_limit_across_the_slices_of_their_steps() {
    // Code that can be interrupted holds its steps `POLL_STEPS` at a time
    // and takes the next slice when one is used up: a limit just before,
    // at and after each boundary stops every member where the reference
    // does (merged branches included), with the same steps.
    const SPIN: &str = "
fn spin(n: i64) -> i64 {
    let mut x = 0;
    for i in 0..n {
        if i % 3 == 0 { x = x + 1; } else { x = x - 2; }
    }
    x
}";
    let report = agree(SPIN, "spin", &i64s(&[10_000]), &RunOptions::default());
    assert_ne!(field(&report, "merged_branches"), &ReportValue::Count(0));
    let slice = autobatch_native::POLL_STEPS;
    for max_steps in [1, 2, 1000, u64::MAX] {
        agree_watched(SPIN, "spin", &i64s(&[10_000, 3000, 5]), max_steps);
    }
    for k in 1..4 {
        for max_steps in [k * slice - 1, k * slice, k * slice + 1] {
            agree_watched(NESTED, "nested", &i64s(&[100, 60, 3]), max_steps);
            agree_watched(SPIN, "spin", &i64s(&[10_000, 3000, 5]), max_steps);
            agree_watched(FIB, "fib", &i64s(&[18, 12]), max_steps);
        }
    }
}

/// Branches that native code merges into selects (Collatz's is one):
/// both arms, one arm (either), in and out of loops, floats, bools, a
/// division by a constant, and two that must stay branches (a division
/// by zero and by `-1` on a path members may not take).
const MERGED: &str = "
fn arms(n: i64, x: f64) -> (i64, f64, bool) {
    let mut k = n;
    let mut y = x;
    let mut flag = false;
    for i in 0..n {
        if (k ^ i) % 3 == 0 { k = k / 3 + i; y = y * 0.5; } else { k = 3 * k - 1; y = y - 1.5; }
        if k < 0 { k = -k; flag = !flag; }
        if y > 10.0 { } else { y = y + 2.25; }
    }
    if x < 0.0 { y = -y; }
    (k, y, flag)
}
fn guarded(n: i64) -> (i64, i32) {
    let mut r = n;
    if n > 100 { r = n / 0; }
    let mut s = n as i32;
    if n < -100 { s = s / -1; }
    (r, s)
}";

#[test]
fn merged_branches_count_steps_and_operations_as_branches_do() {
    let members: Vec<Vec<Scalar>> = [(0, 1.0), (1, -2.0), (5, 3.5), (17, 40.0), (30, -0.25)]
        .iter()
        .map(|(n, x)| vec![Scalar::I64(*n), Scalar::F64(*x)])
        .collect();
    let report = agree(MERGED, "arms", &members, &RunOptions::default());
    assert_compiled(&report, "merged branches");
    // Four of `arms`' branches (the loop's test is not one).
    assert_eq!(
        field(&report, "merged_branches"),
        &ReportValue::Count(4),
        "merged branches"
    );
    // The step limit met at every block in turn, merged arms included:
    // each member stops where the reference stops, with its counts.
    for max_steps in 1..60 {
        let limited = RunOptions {
            max_steps,
            ..RunOptions::default()
        };
        agree(MERGED, "arms", &members, &limited);
    }
    // A division by zero or by -1 is not run on a path not taken.
    let report = agree(
        MERGED,
        "guarded",
        &i64s(&[5, 101, -101, i64::MIN, 100]),
        &RunOptions::default(),
    );
    assert_compiled(&report, "guarded");
}

const FAULTS: &str = "
fn div(a: i64, b: i64) -> i64 { a / b }
fn rem(a: i32, b: i32) -> i32 { a % b }
fn check(a: i64, b: i64) -> i64 {
    assert!(a < 100, \"a is too large\");
    let q = div(a, b);
    let r = rem(a as i32, b as i32) as i64;
    let (ok, c) = catch(div(b, a));
    if ok { q + r + c } else { q + r - 1000 }
}
fn deep(n: i64) -> i64 { if n == 0 { 0 } else { 1 + deep(n - 1) } }
fn spin(n: i64) -> i64 { let mut i = 0; while i < n { i += 1; } i }
fn safe_deep(n: i64) -> (bool, i64) { catch(deep(n)) }
fn div_loop(n: i64, z: i64) -> i64 {
    let mut s = 0;
    let mut i = 0;
    while i < n { s += 100 / (z - i); i += 1; }
    s
}
fn caught_loop(n: i64, z: i64) -> i64 {
    let (ok, v) = catch(div_loop(n, z));
    let mut t = 0;
    for k in 0..n { if k % 2 == 0 { t += k; } }
    if ok { v + t } else { t - 1 }
}";

#[test]
fn every_fault_kind_and_limit_agrees_with_the_reference() {
    let pairs = |values: &[(i64, i64)]| -> Vec<Vec<Scalar>> {
        values
            .iter()
            .map(|(a, b)| vec![Scalar::I64(*a), Scalar::I64(*b)])
            .collect()
    };
    let options = RunOptions::default();
    // Division and remainder by zero, a failed assert, a caught division,
    // MIN / -1 and MIN % -1 wrapping, an ordinary member.
    let members = pairs(&[
        (7, 2),
        (7, 0),
        (200, 1),
        (0, 5),
        (i64::MIN, -1),
        (-7, 3),
        (5, -1),
    ]);
    let report = agree(FAULTS, "check", &members, &options);
    assert_compiled(&report, "faults");
    let limited = RunOptions {
        max_stack_depth: 8,
        max_steps: 60,
        ..RunOptions::default()
    };
    let report = agree(FAULTS, "deep", &i64s(&[3, 6, 7, 20]), &limited);
    assert_compiled(&report, "stack depth");
    let report = agree(FAULTS, "safe_deep", &i64s(&[3, 7, 20]), &limited);
    assert_compiled(&report, "caught stack depth");
    let report = agree(FAULTS, "spin", &i64s(&[2, 28, 29, 1000]), &limited);
    assert_compiled(&report, "step limit");
    // Faults and the step limit inside loops (whose operation counts native
    // code keeps in registers until the function exits), caught or not.
    let loops = pairs(&[(5, 3), (5, 10), (0, 0), (9, 4), (40, 100)]);
    let report = agree(FAULTS, "div_loop", &loops, &options);
    assert_compiled(&report, "fault in a loop");
    let report = agree(FAULTS, "caught_loop", &loops, &options);
    assert_compiled(&report, "caught fault in a loop");
    agree(FAULTS, "caught_loop", &loops, &limited);
    let none = RunOptions {
        max_stack_depth: 0,
        ..RunOptions::default()
    };
    agree(FAULTS, "spin", &i64s(&[1]), &none);
}

#[test]
fn float_functions_casts_and_edge_values_agree_bit_for_bit() {
    let source = "
fn f(x: f64, k: i64) -> (f64, f32, i32, usize, i64, bool, f64) {
    let a = x.exp() + x.ln() * x.sin() - x.cos() / x.tan() + x.tanh() + x.exp_m1() + x.ln_1p();
    let b = (x as f32).sqrt().powi(3) + (x as f32).powf(0.5) + (x as f32).abs().floor();
    let c = x as i32;
    let d = x as usize;
    let e = (k as i32 as i64).pow(3) + (k % 7) + (k >> 2) + (k as usize as i64) / 3;
    let g = x.is_nan() || !x.is_finite() || (k as f64) < x;
    let h = x.max(0.0).min(1e300) + x.round() + x.ceil() + x.signum() + x.recip() + x % 1.5
        + sigmoid(x) + softplus(x) + log_sigmoid(x) + x.log10() + (k as usize as f64);
    (a, b, c, d, e, g, h)
}";
    let values = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        2.5,
        1e300,
        -1e300,
        1e-310,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        3.7,
        -2.5,
        4e9,
        -4e9,
        1.8e19,
        0.1,
    ];
    let ks = [0, -1, 7, i64::MIN, i64::MAX, 1 << 40, -(1 << 53) - 1];
    let members: Vec<Vec<Scalar>> = values
        .iter()
        .zip(ks.iter().cycle())
        .map(|(x, k)| vec![Scalar::F64(*x), Scalar::I64(*k)])
        .collect();
    let report = agree(source, "f", &members, &RunOptions::default());
    assert_compiled(&report, "float functions");
}

/// As [`agree`], with statics and a seed: `args` are the entry's flattened
/// arguments (one tensor per member each).
fn agree_with(
    source: &str,
    entry: &str,
    env: &Env,
    args: Vec<Arg>,
    size: usize,
    options: &RunOptions,
) -> Vec<ReportField> {
    let program = compile(source);
    let batch = Batch {
        entry: program.function_by_name(entry).expect("entry"),
        size,
        args,
    };
    let run = |strategy| run(strategy, &program, env, &batch, options).expect("runs");
    let expected = run(Strategy::Reference);
    let bits = |output: &autobatch_exec::RunOutput| results_bits(&output.results);
    let mut reports = [native(), native_batched()].map(|strategy| {
        let got = run(strategy);
        let name = format!("{entry} on {strategy}");
        assert_eq!(bits(&got), bits(&expected), "{name}");
        assert_eq!(
            got.stats.op_counts, expected.stats.op_counts,
            "{name}: op counts"
        );
        assert_eq!(got.stats.steps, expected.stats.steps, "{name}: steps");
        got.stats.report
    });
    // The native report, and the batched one's figures after it.
    let mut report = std::mem::take(&mut reports[0]);
    report.extend(
        reports[1]
            .drain(..)
            .filter(|f| f.name.starts_with("batched_")),
    );
    report
}

fn f64s(values: &[f64]) -> Tensor {
    Tensor::new(vec![values.len()], Data::F64(values.to_vec()))
}

const ARRAYS: &str = r#"extern "autobatch" { static W: [[f64; 3]; 2]; static B: [f64; 2]; }
fn affine(x: [f64; 3]) -> [f64; 2] { matvec(W, x) + B }
fn pick(v: [f64; 3], i: i64) -> f64 { v[i] }
fn arrays(x: [f64; 3], i: i64) -> (f64, [f64; 2], f64, [f64; 3], bool, [[f64; 3]; 2], f64) {
    let v = [x[0], 2.0 * x[1], x[2] - 1.0];
    let mut w = [0.0; 3];
    w[1] = sum(v);
    w[2] = max(v) + logsumexp(x);
    let s = softmax(v);
    let (ok, p) = catch(pick(v, i));
    let m = [v * 2.0, select(v.is_nan(), w, v).exp()];
    (dot(v, w), affine(v).tanh(), p, s + vecmat(B, W), ok, m, pick(v, i + 1))
}
fn draws(n: i64) -> (f64, f64, bool, [f64; 3], [f32; 2]) {
    let z = normal_like([0.0; 3]);
    let mut u = uniform_like([0.0f32; 2]);
    if n > 1 { u[1] = 0.5; }
    (uniform(), normal(), bernoulli(0.25), z, u)
}"#;

fn arrays_env() -> Env {
    Env {
        statics: vec![
            Tensor::new(
                vec![2, 3],
                Data::F64(vec![0.5, -1.0, 2.0, 1.5, 0.25, -0.75]),
            ),
            f64s(&[0.1, -0.2]),
        ]
        .into(),
        symbols: Vec::new(),
        ..Env::default()
    }
}

#[test]
fn arrays_statics_products_and_caught_index_faults_are_compiled() {
    let xs = [
        [1.0, 2.0, 3.0],
        [-0.5, 0.0, f64::NAN],
        [1e300, -1e300, 7.0],
        [0.0; 3],
    ];
    let is = [0_i64, 2, -1, 3];
    let args = vec![
        Arg::Batched(xs.iter().map(|x| f64s(x)).collect()),
        Arg::Batched(is.iter().map(|i| Tensor::scalar(Scalar::I64(*i))).collect()),
    ];
    let report = agree_with(
        ARRAYS,
        "arrays",
        &arrays_env(),
        args,
        4,
        &RunOptions::default(),
    );
    assert_compiled(&report, "arrays");
}

/// Members of different depths waiting at products with a static matrix
/// and with views of a static (`T[n % 2]`: two matrices), one of them
/// failing an assert half way.
const WAITING: &str = r#"extern "autobatch" { static W: [[f64; 3]; 3]; static T: [[[f64; 3]; 3]; 2]; }
fn walk(x: [f64; 3], n: i64) -> [f64; 3] {
    if n <= 0 {
        x
    } else {
        let y = matvec(W, x).tanh();
        let z = vecmat(y, T[n % 2]);
        assert!(n != 13, "thirteen");
        walk(z * 0.5 + y, n - 1)
    }
}"#;

/// `WAITING`'s statics.
fn waiting_env() -> Env {
    Env {
        statics: vec![
            Tensor::new(
                vec![3, 3],
                Data::F64(vec![0.5, -1.0, 2.0, 1.5, 0.25, -0.75, 0.1, 0.2, -0.3]),
            ),
            Tensor::new(
                vec![2, 3, 3],
                Data::F64((0..18).map(|k| (k as f64 - 8.5) / 7.0).collect()),
            ),
        ]
        .into(),
        symbols: Vec::new(),
        ..Env::default()
    }
}

#[test]
fn members_together_wait_at_products_and_get_their_own_bits() {
    let env = waiting_env();
    let ns = [0_i64, 1, 5, 5, 9, 20, 17, 3];
    let args = || {
        vec![
            Arg::Batched(
                (0..ns.len())
                    .map(|m| f64s(&[m as f64 * 0.25, -1.0, 0.5]))
                    .collect(),
            ),
            Arg::Batched(ns.iter().map(|n| Tensor::scalar(Scalar::I64(*n))).collect()),
        ]
    };
    for threads in [1, 2] {
        let options = RunOptions {
            threads,
            ..RunOptions::default()
        };
        let report = agree_with(WAITING, "walk", &env, args(), ns.len(), &options);
        assert_compiled(&report, "waiting");
        let count = |name| match field(&report, name) {
            ReportValue::Count(n) => *n,
            other => panic!("{name}: {other:?}"),
        };
        let (products, waits) = (count("batched_products"), count("batched_waits"));
        // Every member-product was waited for (two per level; a member
        // that starts above 13 stops at 13), and most were computed with
        // others.
        let levels = |n: i64| if n < 13 { n } else { n - 12 } as u64;
        assert_eq!(waits, ns.iter().map(|n| 2 * levels(*n)).sum::<u64>());
        assert!(products < waits, "{products} products for {waits} waits");
    }
    // More members than a thread keeps alive at once (1024): the later
    // ones start, on the stacks of those that ended, as others end.
    let many = 1100;
    let args = vec![
        Arg::Batched(
            (0..many)
                .map(|m| f64s(&[m as f64 * 0.01, -1.0, 0.5]))
                .collect(),
        ),
        Arg::Batched(
            (0..many)
                .map(|m| Tensor::scalar(Scalar::I64(ns[m % ns.len()])))
                .collect(),
        ),
    ];
    let report = agree_with(WAITING, "walk", &env, args, many, &RunOptions::default());
    assert_compiled(&report, "many waiting");
}

#[test]
fn a_watched_run_shares_each_product_among_all_of_a_threads_members() {
    // A sampler's run is always watched (its progress bar): the members
    // of a thread still run as one group, so that each product is one
    // for all of them. Eight members of the same depth on one thread:
    // each of the ten levels' products is computed once.
    let env = waiting_env();
    let members = 8;
    let args = vec![
        Arg::Batched(
            (0..members)
                .map(|m| f64s(&[m as f64 * 0.25, -1.0, 0.5]))
                .collect(),
        ),
        Arg::Batched(vec![Tensor::scalar(Scalar::I64(5)); members]),
    ];
    let options = RunOptions {
        threads: 1,
        observer: Some(Observer {
            interval: Duration::ZERO,
            callback: Arc::new(|_| {}),
        }),
        ..RunOptions::default()
    };
    let report = agree_with(WAITING, "walk", &env, args, members, &options);
    let count = |name| match field(&report, name) {
        ReportValue::Count(n) => *n,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(count("batched_waits"), 2 * 5 * members as u64);
    assert_eq!(count("batched_products"), 2 * 5);
}

#[test]
fn random_draws_follow_each_members_stream() {
    for seed in [0, 7] {
        let options = RunOptions {
            seed,
            ..RunOptions::default()
        };
        let members: Vec<Tensor> = (0..5).map(|n| Tensor::scalar(Scalar::I64(n))).collect();
        let report = agree_with(
            ARRAYS,
            "draws",
            &arrays_env(),
            vec![Arg::Batched(members)],
            5,
            &options,
        );
        assert_compiled(&report, "random draws");
    }
}

const FORKS: &str = "
fn twice(n: i64) -> i64 { 2 * n }
fn both(n: i64) -> (i64, i64) { join(twice(n), twice(n + 1)) }
fn pair(n: i64) -> (i64, [f64; 3]) { (n + 1, [n as f64, uniform(), 0.5]) }
fn arrays(n: i64) -> (i64, [f64; 3], [f64; 3]) {
    let ((a, v), (b, w)) = join(pair(n), pair(n * 3));
    (a + b, v + w, w)
}
fn tree(n: i64) -> f64 {
    if n <= 1 { uniform() } else {
        let (a, b) = join(tree(n - 1), tree(n - 2));
        a + b + normal()
    }
}
fn sq(k: i64, n: i64) -> (i64, [f64; 2], bool) { (k * k + n, [uniform(), k as f64], k % 2 == 0) }
fn squares(n: i64) -> ([i64; 5], [[f64; 2]; 5], [bool; 5]) { pfor::<5>(sq, n) }
fn halve(x: f64) -> f64 { x / 2.0 + uniform() }
fn halved(n: i64) -> [f64; 4] {
    let mut xs = [1.0, 2.0, 3.0, n as f64];
    xs = map(halve, xs);
    xs = map(halve, xs);
    xs
}
fn div(a: i64, b: i64) -> i64 { a / b }
fn risky(n: i64) -> i64 { let (a, b) = join(div(n, 1), div(10, n)); a + b }
fn guarded(n: i64) -> (bool, i64, f64, f64) {
    let (ok, v) = catch(risky(n));
    (ok, v, uniform(), tree(3))
}
fn deep(n: i64) -> i64 { if n == 0 { 0 } else { let (a, b) = join(deep(n - 1), twice(n)); a + b } }
fn safe_deep(n: i64) -> (bool, i64, f64) { let (ok, v) = catch(deep(n)); (ok, v, uniform()) }
fn none(n: i64) -> [i64; 0] { pfor::<0>(twice_k, n) }
fn twice_k(k: i64, n: i64) -> i64 { k * n }";

#[test]
fn forks_run_natively_as_the_reference_runs_them() {
    let members = i64s(&[0, 1, 2, 5, -3, 7]);
    for seed in [0, 11] {
        let options = RunOptions {
            seed,
            ..RunOptions::default()
        };
        for entry in [
            "both", "arrays", "tree", "squares", "halved", "guarded", "none",
        ] {
            let report = agree(FORKS, entry, &members, &options);
            assert_compiled(&report, entry);
        }
    }
    // Instances past the depth limit (a caught one included) and the step
    // limit inside instances.
    let limited = RunOptions {
        max_stack_depth: 6,
        max_steps: 90,
        ..RunOptions::default()
    };
    for entry in ["deep", "safe_deep", "tree"] {
        let report = agree(FORKS, entry, &i64s(&[1, 3, 5, 6, 9]), &limited);
        assert_compiled(&report, entry);
    }
}

#[test]
fn a_deep_recursion_within_the_limit_runs_natively_on_every_thread_count() {
    let options = |threads| RunOptions {
        max_stack_depth: 200_000,
        threads,
        ..RunOptions::default()
    };
    let source = "fn deep(n: i64) -> i64 { if n == 0 { 0 } else { 1 + deep(n - 1) } }";
    for threads in [1, 2] {
        let report = agree(
            source,
            "deep",
            &i64s(&[10, 150_000, 199_999, 200_000]),
            &options(threads),
        );
        assert_compiled(&report, "deep recursion");
    }
}

/// Runs `entry` of `program` on one member natively; gives its result and
/// how many of the run's programs came from the code cache.
fn run_cached(
    program: &Program,
    entry: &str,
    n: i64,
    count_operations: bool,
) -> (Vec<Tensor>, u64) {
    let batch = scalar_batch(program, entry, &i64s(&[n]));
    let options = RunOptions {
        count_operations,
        ..RunOptions::default()
    };
    let output = run_batch(native(), program, &batch, &options);
    assert_compiled(&output.stats.report, entry);
    let ReportValue::Count(cached) = field(&output.stats.report, "cached_programs") else {
        panic!("cached_programs is a count: {:?}", output.stats.report);
    };
    let result = output.results.into_iter().next().expect("one member");
    (result.expect("no fault"), *cached)
}

#[test]
fn a_program_run_again_is_not_compiled_again() {
    // A function no other test compiles (the cache is the process's).
    let source = |k: i64| format!("fn cached_twice(n: i64) -> i64 {{ n * {k} + 7 }}");
    let program = compile(&source(3));
    let (first, cached) = run_cached(&program, "cached_twice", 5, true);
    assert_eq!(cached, 0, "the first run compiles");
    let (again, cached) = run_cached(&program, "cached_twice", 6, true);
    assert_eq!(cached, 1, "the second run takes the kept code");
    assert_eq!(
        (first, again),
        (
            vec![Tensor::scalar(Scalar::I64(22))],
            vec![Tensor::scalar(Scalar::I64(25))]
        )
    );
    // Code that counts nothing is other code.
    let (_, cached) = run_cached(&program, "cached_twice", 5, false);
    assert_eq!(cached, 0);
    // So is a program that differs in one constant: its own result.
    let other = compile(&source(4));
    let (result, cached) = run_cached(&other, "cached_twice", 5, true);
    assert_eq!((result, cached), (vec![Tensor::scalar(Scalar::I64(27))], 0));
    let (result, cached) = run_cached(&program, "cached_twice", 5, true);
    assert_eq!((result, cached), (vec![Tensor::scalar(Scalar::I64(22))], 1));
}

fn assert_lockstep_compiled(report: &[ReportField], what: &str) {
    assert_eq!(
        field(report, "compiled"),
        &ReportValue::Bool(true),
        "{what} on native-lockstep: {report:?}"
    );
}

#[test]
fn lockstep_compiles_scalar_control_and_agrees_with_the_reference() {
    // Recursion (values live across calls), loops whose trip counts
    // differ, float functions through the shims, every fault and limit
    // but a caught one: each compiled to lock-step pieces, each member
    // the reference's, bit for bit, with its steps and counts (`agree_all`).
    let options = RunOptions::default();
    let [_, _, report] = agree_all(FIB, "fib", &i64s(&[0, 1, 5, 15, 20, 3]), &options);
    assert_lockstep_compiled(&report, "fib");
    let members = i64s(&[1, 2, 27, 97, 871, 6171]);
    let [_, _, report] = agree_all(COLLATZ, "collatz", &members, &options);
    assert_lockstep_compiled(&report, "collatz");
    let [_, _, report] = agree_all(NESTED, "nested", &i64s(&[0, 1, 7, 40, 100]), &options);
    assert_lockstep_compiled(&report, "nested");
    let limited = RunOptions {
        max_stack_depth: 8,
        max_steps: 60,
        ..RunOptions::default()
    };
    let [_, _, report] = agree_all(FAULTS, "deep", &i64s(&[3, 6, 7, 20]), &limited);
    assert_lockstep_compiled(&report, "stack depth");
    let [_, _, report] = agree_all(FAULTS, "spin", &i64s(&[2, 28, 29, 1000]), &limited);
    assert_lockstep_compiled(&report, "step limit");
    let pairs: Vec<Vec<Scalar>> = [(5, 3), (5, 10), (0, 0), (9, 4), (40, 100)]
        .iter()
        .map(|(n, z)| vec![Scalar::I64(*n), Scalar::I64(*z)])
        .collect();
    let [_, _, report] = agree_all(FAULTS, "div_loop", &pairs, &options);
    assert_lockstep_compiled(&report, "division by zero in a loop");
    // A catching call is not compiled for lock-step: program-counter runs
    // it, and the report says why.
    let [_, _, report] = agree_all(FAULTS, "caught_loop", &pairs, &options);
    assert_eq!(field(&report, "compiled"), &ReportValue::Bool(false));
    let ReportValue::Text(reason) = field(&report, "reason") else {
        panic!("a reason: {report:?}")
    };
    assert!(reason.contains("catching call"), "{reason}");
}

#[test]
fn lockstep_runs_large_batches_in_groups_on_every_thread_count() {
    // More members than one group of lock-step members (4096), recursions
    // deep enough that each member's save stack grows several times, and
    // members that stop at the depth limit: every thread count gives the
    // reference's bits, steps and counts.
    const DEEP: &str = "
fn deep(n: i64, x: f64) -> f64 { if n == 0 { x } else { x * 0.5 + deep(n - 1, x + 1.0) / 3.0 } }
fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }";
    let program = compile(DEEP);
    let members = 4500;
    let deep = Batch {
        entry: program.function_by_name("deep").expect("entry"),
        size: members,
        args: vec![
            Arg::Batched(
                (0..members)
                    .map(|i| Tensor::scalar(Scalar::I64((i * 7 % 300) as i64)))
                    .collect(),
            ),
            Arg::Batched(
                (0..members)
                    .map(|i| Tensor::scalar(Scalar::F64(i as f64 * 0.25)))
                    .collect(),
            ),
        ],
    };
    let fib = scalar_batch(
        &program,
        "fib",
        &i64s(&(0..members as i64).map(|i| i % 17).collect::<Vec<_>>()),
    );
    for batch in [&deep, &fib] {
        let options = RunOptions {
            max_stack_depth: 250,
            ..RunOptions::default()
        };
        let expected = run_batch(Strategy::Reference, &program, batch, &options);
        for threads in [1, 2, 3] {
            let options = RunOptions {
                threads,
                ..options.clone()
            };
            let got = run_batch(native_lockstep(), &program, batch, &options);
            assert_lockstep_compiled(&got.stats.report, "large batch");
            assert_eq!(
                results_bits(&got.results),
                results_bits(&expected.results),
                "{threads} threads"
            );
            assert_eq!(got.stats.steps, expected.stats.steps);
            assert_eq!(got.stats.op_counts, expected.stats.op_counts);
        }
    }
    // Members that agree on control: every piece runs for its whole
    // group (4096 members, then 404), a lane utilization of exactly 1.
    let same = compile("fn same(n: i64) -> i64 { let mut s = 0; for i in 0..n { s += i; } s }");
    let batch = scalar_batch(&same, "same", &i64s(&vec![40; members]));
    let got = run_batch(native_lockstep(), &same, &batch, &RunOptions::default());
    assert_lockstep_compiled(&got.stats.report, "members that agree");
    assert_eq!(got.stats.lane_utilization, 1.0);
    let options = RunOptions {
        max_stack_depth: 250,
        ..RunOptions::default()
    };
    let expected = run_batch(Strategy::Reference, &program, &deep, &options);
    assert!(
        expected.results.iter().any(|r| r.is_err()) && expected.results.iter().any(|r| r.is_ok()),
        "some members stop at the depth limit, others return"
    );
}

const TAILS: &str = "
fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }
fn fact(n: i64) -> i64 { if n <= 1 { 1 } else { n * fact(n - 1) } }
fn sum32(n: i32) -> i32 { if n == 0 { 7 } else { n * 1000003 + sum32(n - 1) } }
fn tri(n: usize) -> usize { if n == 0 { 3 } else { let k = n * n; k + tri(n - 1) } }
fn fsum(n: i64) -> f64 { if n == 0 { 0.0 } else { 0.1 + fsum(n - 1) } }
fn twice(n: i64) -> i64 {
    if n <= 0 { 1 } else if n % 2 == 0 { 1 + twice(n - 1) } else { 2 + twice(n - 2) }
}";

/// A self call whose result is returned `+` or `*` an integer of the
/// caller becomes a jump in native code: the function restarts its
/// activation. What a member shows does not change: its result (wrapped),
/// the depth limit at the call, its steps, the step limit wherever it
/// falls (before or after the innermost return: the frames left out take
/// their return block's step as they return) and its operation counts.
#[test]
fn self_tail_calls_become_jumps_and_agree_with_the_reference() {
    let tails = |report: &[ReportField]| field(report, "tail_calls").clone();
    let cases: Vec<(&str, Vec<Vec<Scalar>>, u64)> = vec![
        ("fib", i64s(&[0, 1, 2, 7, 12]), 1),
        ("fact", i64s(&[0, 1, 5, 20, 25, 40]), 1),
        (
            "sum32",
            [0, 1, 9, 3000]
                .iter()
                .map(|n| vec![Scalar::I32(*n)])
                .collect(),
            1,
        ),
        (
            "tri",
            [0_u64, 1, 6, 50]
                .iter()
                .map(|n| vec![Scalar::Usize(*n)])
                .collect(),
            1,
        ),
        // A float sum does not associate: the calls stay.
        ("fsum", i64s(&[0, 1, 10]), 0),
        // Two self calls that could each be a jump: neither is.
        ("twice", i64s(&[0, 5, 10]), 0),
    ];
    for (entry, members, expected) in &cases {
        let report = agree(TAILS, entry, members, &RunOptions::default());
        assert_compiled(&report, entry);
        assert_eq!(tails(&report), ReportValue::Count(*expected), "{entry}");
        // Every step limit up to past the end, and every depth limit: the
        // member stops where the reference stops it.
        for max_steps in 1..=48 {
            let options = RunOptions {
                max_steps,
                ..RunOptions::default()
            };
            agree(TAILS, entry, members, &options);
        }
        for max_stack_depth in 1..=7 {
            let options = RunOptions {
                max_stack_depth,
                ..RunOptions::default()
            };
            agree(TAILS, entry, members, &options);
        }
    }
}

/// A second run of the same program for the same lengths takes its
/// lock-step code from the process's cache (`cached_programs`), as
/// `native` does, with the same results.
#[test]
fn lockstep_code_is_compiled_once_per_program() {
    let program = compile("fn cached_lockstep_triple(n: i64) -> i64 { let mut s = 0; for i in 0..n { s += 3 * i + 1; } s }");
    let batch = scalar_batch(&program, "cached_lockstep_triple", &i64s(&[0, 4, 9]));
    let options = RunOptions::default();
    let first = run_batch(native_lockstep(), &program, &batch, &options);
    let second = run_batch(native_lockstep(), &program, &batch, &options);
    assert_eq!(
        field(&first.stats.report, "compiled"),
        &ReportValue::Bool(true)
    );
    assert_eq!(
        field(&first.stats.report, "cached_programs"),
        &ReportValue::Count(0)
    );
    assert_eq!(
        field(&second.stats.report, "cached_programs"),
        &ReportValue::Count(1)
    );
    assert_eq!(results_bits(&first.results), results_bits(&second.results));
}

const HALVES: &str = "
fn halves(x: i64) -> (i64, i64, i64, i64, i64) {
    let a = if x % 2 == 0 { x / 2 } else { 3 * x + 1 };
    let b = if x % 4 != 0 { x - 1 } else { x / 4 };
    let c = if x % 2 == 0 { x / 4 } else { x };
    let d = if x % 2 == 0 { let y = x + 1; y / 2 } else { x };
    let mut w = x;
    let e = if w % 2 == 0 { w = w - 1; w / 2 } else { 0 };
    (a, b, c, d, e + w)
}
fn halves32(x: i32) -> i32 { if x % 2 == 0 { x / 2 } else { x } }";

/// A signed division by `2^j` in the arm of a merged branch that only
/// runs (its values picked) where `x % 2^k == 0`, `j <= k`, is an
/// arithmetic shift; every other division stays a division. Negative
/// values included, the results are the reference's.
#[test]
fn exact_divisions_in_merged_arms_agree_with_the_reference() {
    let values = [
        0,
        1,
        -1,
        2,
        -2,
        3,
        -3,
        6,
        -6,
        8,
        -8,
        12,
        -12,
        16,
        -24,
        27,
        i64::MAX,
        i64::MIN,
        i64::MIN + 1,
        i64::MAX - 1,
    ];
    let report = agree(HALVES, "halves", &i64s(&values), &RunOptions::default());
    assert_compiled(&report, "halves");
    assert_ne!(field(&report, "merged_branches"), &ReportValue::Count(0));
    let members: Vec<Vec<Scalar>> = [0, 1, -1, 2, -2, 7, -8, i32::MIN, i32::MAX, i32::MIN + 1]
        .iter()
        .map(|x| vec![Scalar::I32(*x)])
        .collect();
    let report = agree(HALVES, "halves32", &members, &RunOptions::default());
    assert_compiled(&report, "halves32");
}

const LOOPS: &str = "
fn collatz(n: i64) -> i64 {
    let mut x = n;
    let mut s = 0;
    while x != 1 { if x % 2 == 0 { x = x / 2; } else { x = 3 * x + 1; } s += 1; }
    s
}
fn nested(n: i64) -> i64 { let mut s = 0; for i in 0..n { for j in 0..i { s += (i * j) % 7; } } s }
fn early(n: i64) -> i64 {
    let mut s = 0;
    let mut i = 0;
    while i < n {
        i += 1;
        if i % 5 == 3 { continue; }
        s += i;
        if s > 40 { break; }
    }
    s
}
fn oneway(n: i64) -> i64 { let mut s = n; for i in 0..n { if i % 2 == 1 { s = s * 3; } s = s - i; } s }
fn faulty(n: i64) -> i64 {
    let xs = [1, 2, 3, 4];
    let mut s = 0;
    for i in 0..(n as usize) { s += xs[i]; }
    s
}
fn divides(n: i64) -> i64 { let mut s = 0; for i in 0..n { s += 100 / (3 - i); } s }
fn spin(n: i64) -> i64 { let mut x = 0; loop { x += 1; if x >= n { break; } } x }
fn g(x: i64) -> i64 { x + 1 }
fn calls(n: i64) -> i64 { let mut s = 0; for i in 0..n { s = g(s) + i; } s }";

/// A loop without calls or loops inside tests the member's steps once per
/// pass in native code (`fast_loops`), in a copy of its blocks entered only
/// when the member holds steps for a whole pass. What a member shows does
/// not change: its result, its fault, its steps, its operation counts, and
/// the step limit at the very block where the reference stops it.
#[test]
fn loops_test_steps_once_per_pass_and_agree_with_the_reference() {
    let fast = |report: &[ReportField]| field(report, "fast_loops").clone();
    let members = i64s(&[1, 2, 3, 7, 27]);
    let cases = [
        ("collatz", 1),
        ("nested", 1),
        ("early", 1),
        ("oneway", 1),
        ("faulty", 1),
        ("divides", 1),
        ("spin", 1),
        // A call may take any number of steps: the loop keeps its tests.
        ("calls", 0),
    ];
    for (entry, expected) in cases {
        let report = agree(LOOPS, entry, &members, &RunOptions::default());
        assert_compiled(&report, entry);
        assert_eq!(fast(&report), ReportValue::Count(expected), "{entry}");
        // Every step limit up to past the longest member's end (Collatz
        // of 27 takes 450 steps), then with a member that never ends
        // (Collatz of 0).
        let mut with_zero = members.clone();
        with_zero.push(vec![Scalar::I64(0)]);
        for (batch, max_steps) in (1..=120)
            .chain([449, 450, 451, 452, 453])
            .map(|m| (&members, m))
            .chain([1, 2, 3, 4, 5, 99, 1000].map(|m| (&with_zero, m)))
        {
            let options = RunOptions {
                max_steps,
                ..RunOptions::default()
            };
            agree(LOOPS, entry, batch, &options);
        }
        // Watched code holds its steps a slice at a time: the dispatch
        // reads the steps held, the checked copy takes the next slice.
        for max_steps in [1, 2, 3, 50, u64::MAX] {
            agree_watched(LOOPS, entry, &members, max_steps);
        }
    }
    let slice = autobatch_native::POLL_STEPS;
    for k in 1..4 {
        for max_steps in [k * slice - 1, k * slice, k * slice + 1] {
            agree_watched(LOOPS, "spin", &i64s(&[20_000, 4100, 5]), max_steps);
            agree_watched(LOOPS, "nested", &i64s(&[60, 45, 3]), max_steps);
        }
    }
}

/// A random chain of float array operations over arrays of `n` elements
/// (`+ - * /` with arrays or scalars, negation, variables overwritten, the
/// `sum`s they feed, scalars computed from sums and read by later steps,
/// and `dot`s, which stay the host's), once or `reps` times in a loop, on
/// arrays whose elements include NaN of both signs, infinities, `-0` and
/// subnormals: what native code fuses into one loop (`fused_loops`), the
/// scalar steps on sums run after it.
fn chain_program(seed: u64, float: &str, n: usize, reps: usize) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below as u64) as usize
    };
    let tiny = if float == "f32" { "1e-40" } else { "1e-310" };
    let mut arrays = vec!["x".to_string(), "y".to_string()];
    let mut scalars = vec!["s".to_string(), "t".to_string()];
    let mut body = String::new();
    let mut reductions = Vec::new();
    let pick = |arrays: &[String], k: usize| arrays[k % arrays.len()].clone();
    for step in 0..6 + next(6) {
        let op = ["+", "-", "*", "/"][next(4)];
        let a = pick(&arrays, next(8));
        let b = pick(&arrays, next(8));
        let scalar = scalars[next(scalars.len())].clone();
        // The first two steps make arrays, so that every program fuses.
        let kind = if step < 2 { next(3) } else { next(8) };
        match kind {
            0 => {
                let name = format!("a{step}");
                body.push_str(&format!("        let mut {name} = {a} {op} {b};\n"));
                arrays.push(name);
            }
            1 => {
                let name = format!("a{step}");
                let expr = if next(2) == 0 {
                    format!("{a} {op} {scalar}")
                } else {
                    format!("{scalar} {op} {a}")
                };
                body.push_str(&format!("        let mut {name} = {expr};\n"));
                arrays.push(name);
            }
            2 => {
                let name = format!("a{step}");
                body.push_str(&format!("        let mut {name} = -{a};\n"));
                arrays.push(name);
            }
            3 | 4 => {
                // Overwrites an array (read earlier in the chain).
                body.push_str(&format!("        {a} = {a} {op} {b};\n"));
            }
            5 => {
                body.push_str(&format!("        total = total + sum({a});\n"));
                reductions.push(format!("sum({a})"));
            }
            6 => {
                // A scalar from a sum, which later steps may read.
                let name = format!("u{step}");
                body.push_str(&format!("        let {name} = sum({a}) {op} {scalar};\n"));
                scalars.push(name);
            }
            _ => {
                body.push_str(&format!("        total = total + dot({a}, {b});\n"));
                reductions.push(format!("dot({b}, {a})"));
            }
        }
    }
    let last = arrays.last().expect("arrays").clone();
    let firsts = reductions.first().cloned().unwrap_or("sum(x)".into());
    format!(
        "
fn value(k: i64) -> {float} {{
    let m = k % 13;
    if m == 0 {{ 0.0 / 0.0 }} else if m == 1 {{ 1.0 / 0.0 }} else if m == 2 {{ -0.0 }}
    else if m == 3 {{ -1.0 / 0.0 }} else if m == 4 {{ {tiny} }}
    else {{ ((k * 37) % 101) as {float} * 0.37 - 17.0 }}
}}

fn chain(seed: i64, s: {float}) -> ({float}, {float}, [{float}; {n}]) {{
    let mut x = [0.0; {n}];
    let mut y = [0.0; {n}];
    for i in 0..{n} {{
        x[i] = value(seed * 7 + (i as i64) * 3);
        y[i] = value(seed * 5 + (i as i64) * 11 + 1) + 0.5;
    }}
    let t = s * 0.5 - 1.0;
    let mut total = 0.0;
    let mut out = x;
    for rep in 0..{reps} {{
{body}        out = {last};
        total = total + {firsts};
    }}
    (total, sum(out), out)
}}
"
    )
}

/// Chains of float array operations run as one native loop per block give
/// every member the reference's bits (sums in the kernels' lane order,
/// specials included), steps and counts, on every native shape,
/// in `f32` and `f64`, with lengths that leave a partial chunk or none.
#[test]
fn fused_array_chains_agree_with_the_reference() {
    let mut fused = 0;
    for seed in 0..48u64 {
        let float = if seed % 2 == 0 { "f64" } else { "f32" };
        let lengths: &[usize] = if float == "f64" {
            &[33, 36, 45, 64]
        } else {
            &[65, 70, 96, 131]
        };
        let n = lengths[(seed / 2) as usize % lengths.len()];
        let reps = 1 + (seed as usize / 8) % 3;
        let source = chain_program(seed, float, n, reps);
        let members: Vec<Vec<Scalar>> = (0..5i64)
            .map(|m| {
                let s = [2.5, -0.0, 0.75, 1e30, -3.0][m as usize];
                let s = if float == "f32" {
                    Scalar::F32(s as f32)
                } else {
                    Scalar::F64(s)
                };
                vec![Scalar::I64(m * 3 + seed as i64), s]
            })
            .collect();
        let report = agree(&source, "chain", &members, &RunOptions::default());
        assert_compiled(&report, &source);
        let ReportValue::Count(loops) = field(&report, "fused_loops") else {
            panic!("fused_loops is a count")
        };
        assert!(*loops >= 1, "nothing fused in\n{source}");
        fused += loops;
    }
    assert!(fused >= 24);
}

/// Which NaN an operation with two NaN operands keeps (their signs
/// differ here) is the reference's in native code too: arrays of 3
/// elements (computed inline), of 83 (fused loops, each operation followed
/// by a negation so that it joins a group, a partial chunk at the end),
/// array with array, array with a scalar on either side, and the product
/// of two negations (which Cranelift would rewrite into the product of
/// the operands: a NaN of the other sign), arrays and scalars.
#[test]
fn nan_operands_keep_the_reference_nan() {
    for n in [3, 83] {
        for float in ["f64", "f32"] {
            let source = format!(
                "
fn f(k: i64) -> ([{float}; {n}], [{float}; {n}], [{float}; {n}], [{float}; {n}],
                 [{float}; {n}], [{float}; {n}], [{float}; {n}], [{float}; {n}],
                 [{float}; {n}], {float}) {{
    let inf = (k as {float} + 1.0) / 0.0;
    let neg = inf - inf;
    let pos = -neg;
    let x = [neg; {n}];
    let y = [pos; {n}];
    let (a, b) = (-x, -y);
    (-(x + y), -(x * y), -(x - y), -(x / y), -(x + pos), -(pos + x), -(x * pos), -(pos * x),
     a * a * b, (-neg) * (-neg) * neg)
}}"
            );
            let members: Vec<Vec<Scalar>> = (0..2).map(|k| vec![Scalar::I64(k)]).collect();
            let report = agree(&source, "f", &members, &RunOptions::default());
            if n == 83 {
                assert_ne!(field(&report, "fused_loops"), &ReportValue::Count(0));
            }
        }
    }
}
