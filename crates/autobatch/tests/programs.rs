//! Runs every program test of `tests/programs/*.ab` at the workspace root
//! (directives described in `tests/programs/README.md`) on every implemented
//! strategy (the files shared out among the machine's cores), and reports all
//! failures at once, each with the file and line of its directive. Also tests the harness itself on `tests/harness_selftest/`.

mod harness;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use autobatch::Strategy;
use harness::{
    compare_results, configurations_of_run, parse_test_file, run_test_file, CompileErrorCase,
    Configurations, Expectation, RunOverrides,
};
use serde_json::json;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn selftest_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness_selftest")
}

/// The `.ab` files of `dir`, sorted so that failures come in a stable order.
fn program_files(dir: &Path) -> Vec<PathBuf> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "ab"))
        .filter(|path| {
            // `AUTOBATCH_PROGRAMS=prefix` runs only the files whose name starts with it.
            std::env::var("AUTOBATCH_PROGRAMS").map_or(true, |prefix| {
                path.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
        })
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn program_tests() {
    let dir = workspace_root().join("tests/programs");
    let files = program_files(&dir);
    let failures = run_in_parallel(&files, |path| {
        let name = path.file_name().expect("a file name").to_string_lossy();
        run_test_file(&format!("tests/programs/{name}"), &read(path))
    });
    if files.is_empty() {
        eprintln!("note: no program tests in {}", dir.display());
    }
    assert!(
        failures.is_empty(),
        "{} program test failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The failures of `test` on every file, the files shared out among the
/// machine's cores, in the files' order.
fn run_in_parallel(files: &[PathBuf], test: impl Fn(&Path) -> Vec<String> + Sync) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Vec<String>>> = files.iter().map(|_| Mutex::default()).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(n) else {
                    break;
                };
                *results[n].lock().expect("no test thread panicked") = test(path);
            });
        }
    });
    results
        .into_iter()
        .flat_map(|r| r.into_inner().expect("no test thread panicked"))
        .collect()
}

// ---- the harness itself ----

#[test]
fn selftest_directives_parse() {
    let file = parse_test_file(&read(&selftest_dir().join("runs.ab")));
    assert_eq!(file.problems, vec![]);
    assert!(file.compile_errors.is_empty());
    assert_eq!(file.runs.len(), 4);

    let first = &file.runs[0];
    assert_eq!((first.line, first.entry.as_str()), (1, "fib"));
    assert_eq!(first.inputs, r#"{"batch": {"n": [0, 1, 5, 10]}}"#);
    assert_eq!(first.overrides, RunOverrides::default());
    let Some(Expectation::Results {
        line: 2,
        tolerance,
        results,
    }) = &first.expectation
    else {
        panic!("{first:?}")
    };
    assert_eq!(*tolerance, harness::DEFAULT_TOLERANCE);
    assert_eq!(results.len(), 4);

    assert_eq!(
        file.runs[1].overrides,
        RunOverrides {
            max_stack_depth: Some(3),
            max_steps: None,
            seed: Some(7),
            max_instances: Some(2),
            max_tape_bytes: None,
        }
    );
    assert_eq!(file.runs[2].overrides.max_steps, Some(1000));
    assert!(
        matches!(file.runs[2].expectation, Some(Expectation::Results { line: 7, tolerance, .. }) if tolerance == 1e-6)
    );
    assert_eq!(
        file.runs[3].expectation,
        Some(Expectation::InputError {
            line: 9,
            text: "given in both".into()
        })
    );
    assert_eq!(file.configurations, Configurations::OnePerRun);
}

/// With `configurations: one per run`, each run takes every strategy once,
/// and runs enough together take every configuration.
#[test]
fn selftest_one_configuration_per_run_cycles_through_all() {
    let all = harness::configurations();
    let mut taken = Vec::new();
    for k in 0..all.len() {
        let runs = configurations_of_run(Configurations::OnePerRun, k);
        let strategies: Vec<Strategy> = runs.iter().map(|(s, _, _)| *s).collect();
        assert_eq!(strategies, Strategy::ALL.to_vec());
        taken.extend(runs);
    }
    assert!(all.iter().all(|c| taken.contains(c)), "{taken:?}");
    assert_eq!(configurations_of_run(Configurations::All, 3), all);
}

#[test]
fn selftest_compile_error_directives_parse() {
    let file = parse_test_file(&read(&selftest_dir().join("compile_errors.ab")));
    assert_eq!(file.problems, vec![]);
    let expected = vec![
        CompileErrorCase {
            line: 1,
            at: Some((4, 1)),
            text: "struct".into(),
        },
        CompileErrorCase {
            line: 2,
            at: None,
            text: "cannot find".into(),
        },
    ];
    assert_eq!(file.compile_errors, expected);
}

#[test]
fn selftest_malformed_directives_are_all_reported() {
    let file = parse_test_file(&read(&selftest_dir().join("malformed.ab")));
    let lines: Vec<usize> = file.problems.iter().map(|(line, _)| *line).collect();
    assert_eq!(
        lines,
        vec![1, 2, 3, 4, 5, 6, 8, 9, 10, 7],
        "{:#?}",
        file.problems
    );
    let text = |line: usize| {
        file.problems
            .iter()
            .find(|(l, _)| *l == line)
            .map(|(_, p)| p.as_str())
            .unwrap_or("")
    };
    assert!(text(1).contains("must follow a `run`"));
    assert!(text(2).contains("needs an entry name and the inputs"));
    assert!(text(3).contains("unknown run option `speed`"));
    assert!(text(4).contains("unknown directive `frobnicate`"));
    assert!(text(5).contains("`tolerance` needs a non-negative number"));
    assert!(text(6).contains("compile-error(LINE:COLUMN)"));
    assert!(text(7).contains("without a following `expect`"));
    assert!(text(8).contains("needs a JSON list"));
    assert!(text(9).contains("malformed directive"));
    assert!(text(10).contains("`configurations` is `all` or `one per run`"));

    let failures = run_test_file("malformed.ab", &read(&selftest_dir().join("malformed.ab")));
    assert_eq!(failures.len(), 10);
    assert!(
        failures[0].starts_with("malformed.ab:1: bad directive: "),
        "{failures:?}"
    );
}

#[test]
fn compare_exact_integers_and_booleans() {
    assert!(compare_results(
        &[json!({"ok": [1, true]})],
        &[json!({"ok": [1, true]})],
        0.0
    )
    .is_empty());
    let mismatches = compare_results(&[json!({"ok": 1})], &[json!({"ok": 2})], 1.0);
    assert_eq!(mismatches.len(), 1);
    assert!(
        mismatches[0].starts_with("member 0: a different integer"),
        "{mismatches:?}"
    );
    assert_eq!(
        compare_results(&[json!({"ok": false})], &[json!({"ok": true})], 0.0).len(),
        1
    );
    // A float expectation for an integer result is a type error, not a tolerance question.
    assert_eq!(
        compare_results(&[json!({"ok": 1.0})], &[json!({"ok": 1})], 0.0).len(),
        1
    );
}

#[test]
fn compare_floats_with_tolerance() {
    let close = compare_results(
        &[json!({"ok": 1.0})],
        &[json!({"ok": 1.0000000000001})],
        1e-12,
    );
    assert!(close.is_empty(), "{close:?}");
    assert_eq!(
        compare_results(&[json!({"ok": 1.0})], &[json!({"ok": 1.001})], 1e-12).len(),
        1
    );
    // Relative for large values, absolute near zero.
    assert!(compare_results(
        &[json!({"ok": 1e20})],
        &[json!({"ok": 1.0000000000001e20})],
        1e-12
    )
    .is_empty());
    assert!(compare_results(&[json!({"ok": 0.0})], &[json!({"ok": 1e-13})], 1e-12).is_empty());
    // An integer literal may stand for a float result.
    assert!(compare_results(
        &[json!({"ok": [2, 0.5]})],
        &[json!({"ok": [2.0, 0.5]})],
        1e-12
    )
    .is_empty());
    assert!(compare_results(
        &[json!({"ok": ["NaN", "inf"]})],
        &[json!({"ok": ["NaN", "inf"]})],
        1e-12
    )
    .is_empty());
    assert_eq!(
        compare_results(&[json!({"ok": "inf"})], &[json!({"ok": "-inf"})], 1e-12).len(),
        1
    );
    let nested = compare_results(
        &[json!({"ok": [[1.0, 2.0]]})],
        &[json!({"ok": [[1.0, 2.5]]})],
        1e-12,
    );
    assert!(nested[0].contains("at [0][1]"), "{nested:?}");
}

#[test]
fn compare_errors_on_the_fields_given() {
    let actual = json!({"error": {"kind": "division_by_zero", "message": "attempt to divide by zero", "line": 3, "column": 5}});
    for expected in [
        json!({"error": {"kind": "division_by_zero"}}),
        json!({"error": {"kind": "division_by_zero", "line": 3}}),
        json!({"error": {"kind": "division_by_zero", "line": 3, "column": 5, "message": "divide"}}),
    ] {
        assert!(
            compare_results(
                std::slice::from_ref(&expected),
                std::slice::from_ref(&actual),
                0.0
            )
            .is_empty(),
            "{expected}"
        );
    }
    for expected in [
        json!({"error": {"kind": "step_limit"}}),
        json!({"error": {"kind": "division_by_zero", "column": 6}}),
        json!({"error": {"kind": "division_by_zero", "message": "modulo"}}),
        json!({"error": {"line": 3}}),
        json!({"error": {"kind": "division_by_zero", "colum": 5}}),
        json!({"ok": 1}),
    ] {
        assert_eq!(
            compare_results(
                std::slice::from_ref(&expected),
                std::slice::from_ref(&actual),
                0.0
            )
            .len(),
            1,
            "{expected}"
        );
    }
    assert_eq!(
        compare_results(
            &[json!({"error": {"kind": "step_limit"}})],
            &[json!({"ok": 1})],
            0.0
        )
        .len(),
        1
    );
}

#[test]
fn compare_counts_members() {
    let mismatches = compare_results(
        &[json!({"ok": 1})],
        &[json!({"ok": 1}), json!({"ok": 2})],
        0.0,
    );
    assert!(
        mismatches[0].contains("expected 1 results, got 2"),
        "{mismatches:?}"
    );
}

/// End to end: a file whose expectations are all right passes. Needs the
/// front end and the reference executor.
#[test]
fn selftest_passing_file_passes() {
    let failures = run_test_file("runs.ab", &read(&selftest_dir().join("runs.ab")));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// End to end: every wrong expectation is reported, each at its own line.
/// Needs the front end and the reference executor.
#[test]
fn selftest_every_failure_is_reported_at_its_line() {
    let failures = run_test_file(
        "wrong.ab",
        &read(&selftest_dir().join("wrong_expectations.ab")),
    );
    let expected_prefixes = [
        "wrong.ab:2: [reference/auto/smallest-index] member 1: a different integer",
        "wrong.ab:3: the inputs do not bind",
        "wrong.ab:6: expected an input error",
        "wrong.ab:8: [reference/auto/smallest-index] member 0: different `line`",
        "wrong.ab:10: [reference/auto/smallest-index] expected 1 results, got 2",
    ];
    // The three wrong results are reported once per way of running the case.
    let runs = harness::configurations().len();
    assert_eq!(failures.len(), 2 + 3 * runs, "{}", failures.join("\n"));
    let failures: Vec<&String> = failures
        .iter()
        .filter(|f| !f.contains('[') || f.contains("[reference/"))
        .collect();
    assert_eq!(
        failures.len(),
        expected_prefixes.len(),
        "{}",
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    for (failure, prefix) in failures.iter().zip(expected_prefixes) {
        assert!(
            failure.starts_with(prefix),
            "{failure}\ndoes not start with\n{prefix}"
        );
    }
}
