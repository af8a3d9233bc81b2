//! Tests of the `autobatch` command as scripts use it: the built binary run
//! on files in a scratch directory, checking exit codes, stdout and that
//! every bad input gives exactly one `error: ` line on stderr.

use std::process::{Command, Output};

mod common;
use common::{assert_one_line_error, autobatch, stderr, stdout, Scratch};

const FIB: &str = "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }\n";

const SHAPES: &str = "\
extern \"autobatch\" {
    static X: [f64; N];
}
fn scaled(y: [f64; N], k: f64) -> f64 {
    let mut total = 0.0;
    for i in 0..y.len() {
        total += X[i] * y[i] * k;
    }
    total
}
";

const PLAIN: &str = "\
fn ratio(a: i64, b: i64) -> i64 { a / b }
fn pair(x: f64) -> (f64, bool) { (x * 0.5, x > 1.0) }
fn nothing(x: i64) { }
";

/// Runs `entry` of SHAPES (`scaled`) or PLAIN (the others) on `inputs`.
fn run_entry(scratch: &Scratch, entry: &str, inputs: &str, extra: &[&str]) -> Output {
    let program = if entry == "scaled" {
        scratch.file("shapes.ab", SHAPES)
    } else {
        scratch.file("plain.ab", PLAIN)
    };
    let inputs = scratch.file("inputs.json", inputs);
    let mut args = vec![
        "run",
        program.as_str(),
        "--entry",
        entry,
        "--inputs",
        inputs.as_str(),
    ];
    args.extend_from_slice(extra);
    autobatch(&args)
}

// ---- exit code 2 without a program to compile ----

#[test]
fn no_arguments_is_a_usage_error() {
    assert_one_line_error(&autobatch(&[]), "a command is required");
}

#[test]
fn unknown_flag_is_one_line() {
    let scratch = Scratch::new("unknown_flag");
    let program = scratch.file("fib.ab", FIB);
    assert_one_line_error(
        &autobatch(&["check", &program, "--frobnicate"]),
        "--frobnicate",
    );
}

#[test]
fn missing_required_flag_names_it() {
    let scratch = Scratch::new("missing_flag");
    let program = scratch.file("fib.ab", FIB);
    assert_one_line_error(&autobatch(&["run", &program, "--entry", "fib"]), "--inputs");
}

#[test]
fn help_exits_zero() {
    let output = autobatch(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(stdout(&output).contains("run"));
}

#[test]
fn missing_program_file() {
    let scratch = Scratch::new("missing_program");
    assert_one_line_error(
        &autobatch(&["check", &scratch.path("absent.ab")]),
        "cannot read program",
    );
}

#[test]
fn sample_refuses_an_improper_posterior() {
    // A flat density: the step size search never finds a step too large.
    let scratch = Scratch::new("sample");
    let model = scratch.file(
        "model.ab",
        "fn log_density(theta: [f64; 2]) -> f64 { 0.0 }\n",
    );
    let data = scratch.file("data.json", "{}");
    assert_one_line_error(
        &autobatch(&["sample", &model, "--data", &data]),
        "the posterior may be improper",
    );
}

#[test]
fn lowered_ir_shows_stacks_and_variable_classes() {
    let scratch = Scratch::new("lowered");
    let program = scratch.file("fib.ab", FIB);
    let output = autobatch(&["ir", &program, "--lowered"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("; stack pushes: 2;"), "{text}");
    assert!(
        text.contains("push_jump") && text.contains(" full"),
        "{text}"
    );
}

#[test]
fn zero_stack_depth_and_zero_threads_are_refused() {
    let scratch = Scratch::new("zero_limits");
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [1]}}"#);
    let base = [
        "run",
        program.as_str(),
        "--entry",
        "fib",
        "--inputs",
        inputs.as_str(),
    ];
    assert_one_line_error(
        &autobatch(&[&base[..], &["--max-stack-depth", "0"]].concat()),
        "--max-stack-depth",
    );
    assert_one_line_error(
        &autobatch(&[&base[..], &["--threads", "0"]].concat()),
        "--threads",
    );
    assert_one_line_error(
        &autobatch(&[&base[..], &["--max-instances", "0"]].concat()),
        "--max-instances",
    );
    let bounded = autobatch(&[&base[..], &["--max-instances", "3"]].concat());
    assert_eq!(bounded.status.code(), Some(0), "{}", stderr(&bounded));
    assert_one_line_error(
        &autobatch(&[&base[..], &["--strategy", "fastest"]].concat()),
        "unknown strategy `fastest`",
    );
    assert_one_line_error(
        &autobatch(&[&base[..], &["--lanes", "wide"]].concat()),
        "unknown lanes mode `wide`",
    );
}

// ---- check and ir (need the front end) ----

#[test]
fn check_accepts_a_good_program() {
    let scratch = Scratch::new("check_good");
    let program = scratch.file("fib.ab", FIB);
    let output = autobatch(&["check", &program]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(output.stdout.is_empty() && output.stderr.is_empty());
}

#[test]
fn check_shows_where_a_bad_program_is_wrong() {
    let scratch = Scratch::new("check_bad");
    let program = scratch.file(
        "bad.ab",
        "fn f() -> i64 {\n    let y: i64 = true;\n    y\n}\n",
    );
    let output = autobatch(&["check", &program]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("bad.ab"), "names the file:\n{err}");
    assert!(err.contains("2:"), "gives the line:\n{err}");
    assert!(
        err.contains("let y: i64 = true;"),
        "quotes the source line:\n{err}"
    );
    assert!(
        !err.contains("\x1b["),
        "no colors when stderr is not a terminal:\n{err}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn run_on_a_bad_program_exits_one() {
    let scratch = Scratch::new("run_bad");
    let program = scratch.file("bad.ab", "fn f() -> i64 { true }\n");
    let inputs = scratch.file("inputs.json", "{}");
    let output = autobatch(&["run", &program, "--entry", "f", "--inputs", &inputs]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
}

#[test]
fn ir_prints_the_program() {
    let scratch = Scratch::new("ir");
    let program = scratch.file("both.ab", &format!("{SHAPES}{PLAIN}"));
    let output = autobatch(&["ir", &program]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains(" scaled(") && text.contains(" ratio("),
        "{text}"
    );
    let only_ratio = stdout(&autobatch(&["ir", &program, "--entry", "ratio"]));
    assert!(
        only_ratio.contains(" ratio(") && !only_ratio.contains(" scaled("),
        "{only_ratio}"
    );
    assert_one_line_error(
        &autobatch(&["ir", &program, "--entry", "missing"]),
        "no function named `missing`",
    );
    // The callees of a fork are reachable too.
    let forked = scratch.file(
        "forked.ab",
        "fn left(x: f64) -> f64 { x * 2.0 }\n\
         fn right(x: f64) -> f64 { x + 1.0 }\n\
         fn unused(x: f64) -> f64 { x }\n\
         fn both(x: f64) -> f64 { let (a, b) = join(left(x), right(x)); a + b }\n",
    );
    let text = stdout(&autobatch(&["ir", &forked, "--entry", "both"]));
    assert!(
        text.contains(" left(") && text.contains(" right(") && !text.contains(" unused("),
        "{text}"
    );
}

// ---- run (needs the front end and the reference executor) ----

#[test]
fn run_prints_compact_results() {
    let scratch = Scratch::new("run_fib");
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [0, 1, 5, 10]}}"#);
    let output = autobatch(&["run", &program, "--entry", "fib", "--inputs", &inputs]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "{\"results\":[{\"ok\":1},{\"ok\":1},{\"ok\":8},{\"ok\":89}]}\n"
    );
    assert!(output.stderr.is_empty());
}

#[test]
fn run_writes_output_file() {
    let scratch = Scratch::new("run_output");
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [5]}}"#);
    let result_path = scratch.path("result.json");
    let output = autobatch(&[
        "run",
        &program,
        "--entry",
        "fib",
        "--inputs",
        &inputs,
        "--output",
        &result_path,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(output.stdout.is_empty());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result_path).expect("result file"))
            .expect("JSON");
    assert_eq!(written, serde_json::json!({"results": [{"ok": 8}]}));
}

#[test]
fn run_output_to_an_unwritable_place() {
    let scratch = Scratch::new("run_output_bad");
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [5]}}"#);
    let result_path = scratch.path("no/such/dir/result.json");
    let output = autobatch(&[
        "run",
        &program,
        "--entry",
        "fib",
        "--inputs",
        &inputs,
        "--output",
        &result_path,
    ]);
    assert_one_line_error(&output, "cannot write");
}

#[test]
fn run_with_stats() {
    let scratch = Scratch::new("run_stats");
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [3, 7]}}"#);
    let output = autobatch(&[
        "run",
        &program,
        "--entry",
        "fib",
        "--inputs",
        &inputs,
        "--stats",
        "--threads",
        "2",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let stats = &result["stats"];
    for field in [
        "strategy",
        "batch_size",
        "steps",
        "wall_seconds",
        "read_seconds",
        "bind_seconds",
        "lane_utilization",
        "instances",
        "peak_instances",
        "op_counts",
    ] {
        assert!(stats.get(field).is_some(), "stats lacks `{field}`: {stats}");
    }
    // Reading the file and binding it took some time, less than the process.
    for field in ["read_seconds", "bind_seconds"] {
        let seconds = stats[field].as_f64().expect("seconds");
        assert!(seconds > 0.0 && seconds < 60.0, "{field}: {seconds}");
    }
    assert_eq!(stats["batch_size"], 2);
    // No --strategy: auto, whose rule runs scalar control as native code;
    // a run this small it tries on program-counter first, where it ends.
    assert_eq!(stats["strategy"], "program-counter");
    let reason = stats["strategy_reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with(
            "picked by auto: no product with a static matrix: each member runs alone in \
             machine code; but a small run, tried first on program-counter (no compiling)"
        ),
        "{reason}"
    );
    let op_counts = stats["op_counts"].as_array().expect("a list");
    assert!(!op_counts.is_empty(), "fib has operations: {stats}");
    for count in op_counts {
        for field in ["op", "line", "column", "executions", "active_lanes"] {
            assert!(
                count.get(field).is_some(),
                "op count lacks `{field}`: {count}"
            );
        }
    }
}

#[test]
fn member_errors_still_exit_zero() {
    let scratch = Scratch::new("member_error");
    let output = run_entry(
        &scratch,
        "ratio",
        r#"{"batch": {"a": [6, 1]}, "shared": {"b": 0}, "shared": {}}"#,
        &[],
    );
    // The repeated `shared` key is itself an input error...
    assert_one_line_error(&output, "duplicate key `shared`");
    // ...and without it one member divides by zero, the run still succeeds.
    let output = run_entry(
        &scratch,
        "ratio",
        r#"{"batch": {"a": [6, 1], "b": [3, 0]}}"#,
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(result["results"][0], serde_json::json!({"ok": 2}));
    let error = &result["results"][1]["error"];
    assert_eq!(error["kind"], "division_by_zero");
    assert_eq!(error["line"], 1);
    assert!(
        error["column"].is_u64() && error["message"].is_string(),
        "{error}"
    );
}

#[test]
fn tuples_unit_and_symbolic_dimensions() {
    let scratch = Scratch::new("shapes");
    let output = run_entry(&scratch, "pair", r#"{"batch": {"x": [1, 3]}}"#, &[]);
    assert_eq!(
        stdout(&output),
        "{\"results\":[{\"ok\":[0.5,false]},{\"ok\":[1.5,true]}]}\n",
        "{}",
        stderr(&output)
    );
    let output = run_entry(&scratch, "nothing", r#"{"batch": {"x": [1]}}"#, &[]);
    assert_eq!(
        stdout(&output),
        "{\"results\":[{\"ok\":null}]}\n",
        "{}",
        stderr(&output)
    );
    // inf * 0 is NaN: non-finite results are the strings of the spec.
    let output = run_entry(
        &scratch,
        "scaled",
        r#"{"batch": {"y": [[1, 1], [2, 0]]}, "shared": {"k": 2, "X": [1.5, "inf"]}}"#,
        &[],
    );
    assert_eq!(
        stdout(&output),
        "{\"results\":[{\"ok\":\"inf\"},{\"ok\":\"NaN\"}]}\n",
        "{}",
        stderr(&output)
    );
}

#[test]
fn every_kind_of_bad_input_is_one_line() {
    let scratch = Scratch::new("bad_inputs");
    let cases: &[(&str, &str, &str)] = &[
        ("scaled", "{\"batch\": {\"y\": [[1, 2]],}}", "line 1 column"),
        (
            "scaled",
            r#"{"batch": {"y": [[1, 2]]}, "shared": {"X": [1, 2]}}"#,
            "missing argument `k`",
        ),
        (
            "scaled",
            r#"{"batch": {"y": [[1, 2]]}, "shared": {"k": 1}}"#,
            "missing static `X`",
        ),
        (
            "scaled",
            r#"{"batch": {"y": [[1, 2]], "z": [1]}, "shared": {"k": 1, "X": [1, 2]}}"#,
            "`z` in `batch` is not a parameter",
        ),
        (
            "scaled",
            r#"{"batch": {"y": [[1, 2]], "k": [1]}, "shared": {"k": 1, "X": [1, 2]}}"#,
            "`k` is given in both",
        ),
        (
            "scaled",
            r#"{"batch": {"y": [[1, 2]], "y": [[1, 2]]}, "shared": {"k": 1, "X": [1, 2]}}"#,
            "`y` is given twice",
        ),
        (
            "scaled",
            r#"{"batch": {"y": [[1, "two"]]}, "shared": {"k": 1, "X": [1, 2]}}"#,
            "`y[1]` must be a number",
        ),
        (
            "scaled",
            r#"{"batch": {"y": [[1, 2], [3, 4, 5]]}, "shared": {"k": 1, "X": [1, 2]}}"#,
            "symbolic dimension `N` is 2 in static `X` but 3 in argument `y` of member 1",
        ),
        (
            "ratio",
            r#"{"batch": {"a": [1, 2], "b": [1]}}"#,
            "differ in length",
        ),
        ("ratio", r#"{"batch": {"a": [], "b": []}}"#, "empty list"),
        (
            "ratio",
            r#"{"batch": {"a": [1.5], "b": [1]}}"#,
            "must be an integer (i64), found 1.5",
        ),
        ("missing", r#"{}"#, "no function named `missing`"),
    ];
    for (entry, inputs, expected) in cases {
        assert_one_line_error(&run_entry(&scratch, entry, inputs, &[]), expected);
    }
}

#[test]
fn missing_inputs_file() {
    let scratch = Scratch::new("missing_inputs");
    let program = scratch.file("fib.ab", FIB);
    let output = autobatch(&[
        "run",
        &program,
        "--entry",
        "fib",
        "--inputs",
        &scratch.path("absent.json"),
    ]);
    assert_one_line_error(&output, "cannot read inputs");
}

#[test]
fn every_strategy_and_lanes_mode_prints_the_same_results() {
    let scratch = Scratch::new("strategies");
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [3, 7, 4, 5, 0]}}"#);
    let base = ["run", &program, "--entry", "fib", "--inputs", &inputs];
    let reference = autobatch(&[&base[..], &["--strategy", "reference"]].concat());
    assert_eq!(reference.status.code(), Some(0), "{}", stderr(&reference));
    for strategy in ["local-static", "program-counter"] {
        for lanes in ["mask", "compact", "auto"] {
            let output =
                autobatch(&[&base[..], &["--strategy", strategy, "--lanes", lanes]].concat());
            assert_eq!(
                stdout(&output),
                stdout(&reference),
                "{strategy} {lanes}: {}",
                stderr(&output)
            );
        }
    }
}

#[test]
fn default_strategy_runs() {
    let scratch = Scratch::new("default_strategy");
    let program = scratch.file("plain.ab", PLAIN);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"a": [4], "b": [2]}}"#);
    let output = autobatch(&["run", &program, "--entry", "ratio", "--inputs", &inputs]);
    assert_eq!(
        stdout(&output),
        "{\"results\":[{\"ok\":2}]}\n",
        "{}",
        stderr(&output)
    );
}

// ---- rough edges a new user hits ----

/// Counts to `n` one step at a time: a run that takes long, on purpose.
const SPIN: &str = "fn spin(n: i64) -> i64 { let mut i = 0; while i < n { i += 1; } i }\n";

#[test]
fn too_many_threads_are_refused_naming_the_range() {
    let scratch = Scratch::new("too_many_threads");
    let output = run_entry(
        &scratch,
        "ratio",
        r#"{"batch": {"a": [6]}, "shared": {"b": 3}}"#,
        &["--threads", "4096"],
    );
    assert_one_line_error(&output, "--threads");
    assert!(
        stderr(&output).contains("between 1 and"),
        "{}",
        stderr(&output)
    );
}

/// A typo in `--output` is reported at once, not after the run: the run
/// here would take many seconds.
#[test]
fn the_output_path_is_checked_before_running() {
    let scratch = Scratch::new("output_first");
    let program = scratch.file("spin.ab", SPIN);
    let inputs = scratch.file("inputs.json", r#"{"batch": {"n": [100000000]}}"#);
    let missing = scratch.path("no/such/dir/result.json");
    let started = std::time::Instant::now();
    let output = autobatch(&[
        "run",
        &program,
        "--entry",
        "spin",
        "--inputs",
        &inputs,
        "--output",
        &missing,
        "--strategy",
        "reference",
        "--max-steps",
        "1000000000",
    ]);
    assert_one_line_error(&output, &missing);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "the error came after {:?}",
        started.elapsed()
    );
    // An existing file is checked without being changed.
    let existing = scratch.file("old.json", "old");
    let output = autobatch(&[
        "run",
        &program,
        "--entry",
        "spin",
        "--inputs",
        &inputs,
        "--output",
        &existing,
        "--max-steps",
        "10",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(std::fs::read_to_string(&existing)
        .unwrap()
        .contains("step_limit"));
}

/// Like rustc: a program file that is not UTF-8 is a program that does not
/// compile (exit 1), in one line.
#[test]
fn a_program_that_is_not_utf8_does_not_compile() {
    let scratch = Scratch::new("not_utf8");
    let path = scratch.path("latin1.ab");
    std::fs::write(&path, b"fn f() {}\n// caf\xe9\n").unwrap();
    for args in [vec!["check", path.as_str()], vec!["ir", path.as_str()]] {
        let output = autobatch(&args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("error: couldn't read"), "{err}");
        assert!(err.contains("stream did not contain valid UTF-8"), "{err}");
    }
}

#[test]
fn run_help_tells_the_true_default_strategy() {
    let output = autobatch(&["run", "--help"]);
    let help = stdout(&output);
    assert!(help.contains("[default: auto]"), "{help}");
    assert!(!help.contains("once it exists"), "{help}");
}

/// The function `small` calls nothing; `unused` has a value too large for
/// any memory. Running `small` works; running `unused` names the `let`.
#[test]
fn only_reachable_functions_count_for_memory() {
    let scratch = Scratch::new("reachable_memory");
    let program = scratch.file(
        "unused.ab",
        "fn small(x: f64) -> f64 { x + 1.0 }\n\
         fn unused(x: f64) -> f64 {\n    let big = [1.0; 100000000000];\n    big[0] + x\n}\n",
    );
    let inputs = scratch.file("inputs.json", r#"{"batch": {"x": [1.0, 2.0]}}"#);
    // TODO(program-counter): add it here once program_counter.rs calls
    // batched::check_lowered_memory.
    for strategy in ["reference", "local-static", "program-counter"] {
        let run = |entry: &str| {
            autobatch(&[
                "run",
                &program,
                "--entry",
                entry,
                "--inputs",
                &inputs,
                "--strategy",
                strategy,
            ])
        };
        let output = run("small");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{strategy}: {}",
            stderr(&output)
        );
        assert_eq!(
            stdout(&output).trim(),
            r#"{"results":[{"ok":2.0},{"ok":3.0}]}"#
        );
        assert_one_line_error(
            &run("unused"),
            "`big` (assigned at 3:15 in function `unused`)",
        );
    }
}

/// Inputs too large for the memory there is are one line and exit 2: the
/// file before it is parsed, the batch before it runs.
/// `AUTOBATCH_MEMORY_LIMIT` stands for a small machine.
#[test]
fn inputs_too_large_for_memory_are_one_line() {
    let scratch = Scratch::new("inputs_memory");
    let program = scratch.file("id.ab", "fn f(x: f64) -> f64 { x + 1.0 }\n");
    let members = |n: usize| format!(r#"{{"batch": {{"x": [{}1.5]}}}}"#, "1.5, ".repeat(n - 1));
    // Every strategy checks its members' state against the memory before
    // it runs: program-counter its variables, the native strategies (which
    // `auto` picks here) the results and records each member keeps.
    let run_limited = |inputs: &str, limit: &str, strategy: &str| {
        Command::new(env!("CARGO_BIN_EXE_autobatch"))
            .args(["run", &program, "--entry", "f", "--inputs", inputs])
            .args(["--strategy", strategy])
            .env("AUTOBATCH_MEMORY_LIMIT", limit)
            .output()
            .expect("run the autobatch binary")
    };
    // 5 MB of text, parsed into more than the 64 MiB allowed.
    let big = scratch.file("big.json", &members(1_000_000));
    let output = run_limited(&big, "64M", "program-counter");
    assert_one_line_error(&output, "MiB of memory is available");
    assert!(
        stderr(&output).contains("cannot read inputs"),
        "{}",
        stderr(&output)
    );
    // 100,000 members of 1 KiB each do not fit in 64 MiB either.
    let many = scratch.file("many.json", &members(100_000));
    for strategy in ["program-counter", "auto", "native", "native-batched"] {
        let output = run_limited(&many, "64M", strategy);
        assert_one_line_error(&output, "100000 members");
        let output = run_limited(&many, "1G", strategy);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{strategy}: {}",
            stderr(&output)
        );
    }
}

/// `--profile FILE` draws the run's profile (SVG or PNG by the extension)
/// without changing a byte of the results; it is refused, before the run,
/// for a path that names no picture format or cannot be written, and for a
/// strategy that records no profile.
#[test]
fn profile_pictures_leave_the_results_unchanged() {
    let s = Scratch::new("profile");
    let program = s.file("fib.ab", FIB);
    let inputs = s.file("in.json", r#"{"batch": {"n": [3, 7, 4, 5, 0, 9]}}"#);
    let base = ["run", &program, "--entry", "fib", "--inputs", &inputs];
    let plain = autobatch(&base);
    assert!(plain.status.success(), "{}", stderr(&plain));
    for strategy in ["program-counter", "local-static"] {
        for extension in ["svg", "png"] {
            let picture = s.path(&format!("{strategy}.{extension}"));
            let mut args = base.to_vec();
            args.extend(["--strategy", strategy, "--profile", &picture]);
            let output = autobatch(&args);
            assert!(output.status.success(), "{}", stderr(&output));
            assert_eq!(stdout(&output), stdout(&plain), "{strategy}");
            let bytes = std::fs::read(&picture).expect("the picture is written");
            if extension == "png" {
                assert_eq!(&bytes[..4], b"\x89PNG");
            } else {
                let text = String::from_utf8(bytes).unwrap();
                assert!(
                    text.contains(&format!("fib on 6 members, {strategy}: ")),
                    "{text}"
                );
                assert!(text.contains("fib bb0 (line 1)"));
            }
        }
    }
    let mut args = base.to_vec();
    let gif = s.path("p.gif");
    args.extend(["--profile", &gif]);
    assert_one_line_error(
        &autobatch(&args),
        "a picture is written as .svg or .png, not `.gif`",
    );
    let missing = s.path("no/such/dir/p.svg");
    let mut args = base.to_vec();
    args.extend(["--profile", &missing]);
    assert_one_line_error(&autobatch(&args), &format!("cannot write `{missing}`"));
    let mut args = base.to_vec();
    let svg = s.path("reference.svg");
    args.extend(["--strategy", "reference", "--profile", &svg]);
    assert_one_line_error(
        &autobatch(&args),
        "the reference strategy records no profile",
    );
    assert!(!std::path::Path::new(&svg).exists());
}

#[test]
fn op_counts_name_a_slice_and_an_assignment_to_one() {
    let scratch = Scratch::new("slice_ops");
    let program = scratch.file(
        "put.ab",
        "fn put(v: [f64; 3], w: [f64; 2]) -> [f64; 3] {\n    let mut a = v;\n    a[1..1 + 2] += w;\n    a\n}\n",
    );
    let inputs = scratch.file(
        "inputs.json",
        r#"{"batch": {"v": [[1.0, 2.0, 3.0]], "w": [[1.0, 1.0]]}}"#,
    );
    let output = autobatch(&[
        "run", &program, "--entry", "put", "--inputs", &inputs, "--stats",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(
        result["results"][0]["ok"],
        serde_json::json!([1.0, 3.0, 4.0])
    );
    let ops: Vec<(String, u64)> = result["stats"]["op_counts"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| {
            let op = c["op"].as_str().unwrap_or_default().to_owned();
            (op, c["line"].as_u64().unwrap_or(0))
        })
        .collect();
    for op in ["slice", "add", "slice_set"] {
        assert!(
            ops.contains(&(op.to_owned(), 3)),
            "`{op}` at line 3: {ops:?}"
        );
    }
}
