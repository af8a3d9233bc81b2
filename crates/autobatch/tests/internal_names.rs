//! No message a user sees names an internal function. The compiler derives
//! functions for gradients (`f'grad`, `f'vjp@10`, `f'sgrad`, `h'jacobian`);
//! their names must never reach a diagnostic, an input error, a run error or
//! a member error: a fault inside `grad(f, x)` is reported in `f`'s words
//! and at `f`'s location.
//!
//! The test collects every message the suite's bad inputs produce: each
//! program of `tests/programs` and `examples` compiled, and each of its `run`
//! directives bound and run on the reference executor; each program written
//! as a string in the Rust tests of `crates/*/tests` compiled; the expected
//! compiler output of the `ui` tests; and programs of its own that fault
//! inside `grad`, `value_and_grad`, `jacobian` and a gradient with respect
//! to statics, or bind bad inputs to them. It fails on any message with an
//! internal name that the program's own text does not contain.

#[allow(dead_code)]
mod harness;

use std::path::{Path, PathBuf};

use autobatch::{compile, Compiled, Inputs, Loc, RunConfig, Strategy};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files under `dir` (recursively) whose name ends with `suffix`, sorted.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// `path` as a text relative to `root`.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Suffixes of the names of derived functions (`f'grad`, `g'jrow`).
const DERIVED: &[&str] = &["grad", "vjp", "sgrad", "svjp", "jrow", "jacobian"];

/// The internal names in `message`: a derived function's name (`f'grad`,
/// `f'vjp@10`), an instance suffix (`f@0`), a word with `vjp` or `sgrad`,
/// or a name with a `'` inside backquotes. Words that `source` (what the
/// user wrote) contains are the user's own.
fn internal_names(message: &str, source: &str) -> Vec<String> {
    let word_char = |c: char| c.is_alphanumeric() || "_'@.".contains(c);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for word in message.split(|c: char| !word_char(c)) {
        let word = word.trim_matches(|c: char| c == '.' || c == '\'');
        let chars: Vec<char> = word.chars().collect();
        let derived = word.split_once('\'').is_some_and(|(before, after)| {
            before.chars().last().is_some_and(ident) && DERIVED.iter().any(|d| after.starts_with(d))
        });
        let instance = chars
            .windows(3)
            .any(|w| ident(w[0]) && w[1] == '@' && w[2].is_ascii_digit());
        let lower = word.to_lowercase();
        let jargon = lower.contains("vjp") || lower.contains("sgrad") || lower.contains("'grad");
        if (derived || instance || jargon || ode_generated(&lower)) && !source.contains(word) {
            found.push(word.to_string());
        }
    }
    // Inside backquotes, any `name'more` is a derived name.
    for (k, quoted) in message.split('`').enumerate() {
        let chars: Vec<char> = quoted.chars().collect();
        let primed = chars
            .windows(3)
            .any(|w| ident(w[0]) && w[1] == '\'' && ident(w[2]));
        if k % 2 == 1 && primed && !source.contains(quoted) {
            found.push(format!("`{quoted}`"));
        }
    }
    found
}

/// Whether `word` (in lower case) names what the compiler writes for a call
/// of an ODE solver: a function or constant named after the call's place
/// (`ode_rk45_12_9`, `ode_bdf_tol_3_5_adjoint`, `ode_rk45_12_9_d`) or the
/// solvers' length of the output times (`ode_t`).
fn ode_generated(word: &str) -> bool {
    if word == "ode_t" {
        return true;
    }
    ["ode_rk45_tol_", "ode_bdf_tol_", "ode_rk45_", "ode_bdf_"]
        .iter()
        .any(|solver| {
            let Some(rest) = word.strip_prefix(solver) else {
                return false;
            };
            let mut parts = rest.split('_');
            let number = |p: Option<&str>| {
                p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            };
            number(parts.next()) && number(parts.next())
        })
}

/// Every message found, with where it comes from and the program's text.
#[derive(Default)]
struct Messages {
    /// `(origin, message, source)`.
    all: Vec<(String, String, String)>,
}

impl Messages {
    fn add(&mut self, origin: &str, message: impl Into<String>, source: &str) {
        self.all
            .push((origin.to_string(), message.into(), source.to_string()));
    }

    /// Compiles `source`; on failure adds every diagnostic's words.
    fn compile(&mut self, origin: &str, source: &str) -> Option<Compiled> {
        match compile(source, origin) {
            Ok(compiled) => Some(compiled),
            Err(error) => {
                for (loc, words) in error.located_messages() {
                    self.add(&format!("{origin}:{loc}"), words, source);
                }
                None
            }
        }
    }

    /// Binds `inputs` to `entry` and runs the batch on the reference
    /// executor; adds the input error, the run error or every member's
    /// error message. Gives the members' errors as JSON.
    fn run(
        &mut self,
        origin: &str,
        compiled: &Compiled,
        bind: impl FnOnce(&Inputs) -> Result<autobatch::BoundBatch, autobatch::InputError>,
        inputs: &str,
        config: &RunConfig,
    ) -> Vec<serde_json::Value> {
        let source = compiled.source().to_string();
        let inputs = match Inputs::from_json_str(inputs) {
            Ok(inputs) => inputs,
            Err(e) => {
                self.add(origin, e.message(), &source);
                return Vec::new();
            }
        };
        let bound = match bind(&inputs) {
            Ok(bound) => bound,
            Err(e) => {
                self.add(origin, e.message(), &source);
                return Vec::new();
            }
        };
        let result = match bound.run(config) {
            Ok(result) => result,
            Err(e) => {
                self.add(origin, e.to_string(), &source);
                return Vec::new();
            }
        };
        let json = result.to_json(false);
        let results = json["results"].as_array().cloned().unwrap_or_default();
        for member in &results {
            if let Some(message) = member["error"]["message"].as_str() {
                self.add(origin, message, &source);
            }
        }
        results
    }
}

fn reference(overrides: &harness::RunOverrides) -> RunConfig {
    let defaults = RunConfig::default().options;
    RunConfig {
        strategy: Strategy::Reference,
        options: autobatch::RunOptions {
            max_stack_depth: overrides
                .max_stack_depth
                .unwrap_or(defaults.max_stack_depth),
            max_steps: overrides.max_steps.unwrap_or(defaults.max_steps),
            seed: overrides.seed.unwrap_or(defaults.seed),
            max_instances: overrides.max_instances.or(defaults.max_instances),
            ..defaults
        },
    }
}

/// The programs of `tests/programs` and `examples`: compiled, and each
/// `run` directive bound and run.
fn program_files(messages: &mut Messages) {
    let root = workspace();
    let mut paths = files(&root.join("tests/programs"), ".ab");
    paths.extend(files(&root.join("examples"), ".ab"));
    for path in paths {
        let origin = relative(&root, &path);
        let source = read(&path);
        if let Some(compiled) = messages.compile(&origin, &source) {
            run_directives(messages, &origin, &compiled, "");
        }
    }
}

/// Binds and runs each `run` directive of the program `compiled` on the
/// reference executor; `note` follows the origin of its messages.
fn run_directives(messages: &mut Messages, origin: &str, compiled: &Compiled, note: &str) {
    for case in harness::parse_test_file(compiled.source()).runs {
        let origin = format!("{origin}:{}{note}", case.line);
        let bind = |inputs: &Inputs| compiled.bind(&case.entry, inputs);
        let config = reference(&case.overrides);
        messages.run(&origin, compiled, bind, &case.inputs, &config);
    }
}

/// The string literals of a Rust file, unescaped, with their lines.
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let Ok(tokens) = text.parse::<proc_macro2::TokenStream>() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut pending: Vec<proc_macro2::TokenStream> = vec![tokens];
    while let Some(stream) = pending.pop() {
        for tree in stream {
            match tree {
                proc_macro2::TokenTree::Group(g) => pending.push(g.stream()),
                proc_macro2::TokenTree::Literal(literal) => {
                    let line = literal.span().start().line;
                    if let Ok(s) = syn::parse_str::<syn::LitStr>(&literal.to_string()) {
                        found.push((line, s.value()));
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// Every program written as a string in the Rust tests (a literal with
/// `fn `), compiled; and the expected compiler output of the `ui` tests.
fn programs_in_rust_tests(messages: &mut Messages) {
    let root = workspace();
    for crate_dir in files(&root.join("crates"), "/Cargo.toml") {
        let tests = crate_dir.parent().expect("a crate directory").join("tests");
        for path in files(&tests, ".rs") {
            let file = relative(&root, &path);
            for (line, literal) in string_literals(&read(&path)) {
                if literal.contains("fn ") {
                    messages.compile(&format!("{file}:{line}"), &literal);
                }
            }
        }
        for path in files(&tests, ".stderr") {
            let file = relative(&root, &path);
            let expected = read(&path);
            let program = read(&path.with_extension("rs"));
            messages.add(&file, expected, &program);
        }
    }
}

/// A program whose functions fault: `checked` divides, indexes and asserts
/// on its data; it is called directly and through each way of
/// differentiating it.
const FAULTS: &str = r#"
fn checked(x: f64, k: i64, i: usize, v: [f64; 3]) -> f64 {
    assert!(x < 100.0, "x is too large");
    let q = 12 / k;
    x * x * v[i] + (q as f64)
}
fn power(x: f64, n: i64) -> f64 {
    if n == 0 { 1.0 } else { x * power(x, n - 1) }
}
fn row(x: [f64; 2], k: i64, i: usize, v: [f64; 3]) -> [f64; 2] {
    x * checked(x[0], k, i, v)
}
fn direct(x: f64, k: i64, i: usize, v: [f64; 3]) -> f64 { checked(x, k, i, v) }
fn through_grad(x: f64, k: i64, i: usize, v: [f64; 3]) -> f64 { grad(checked, x, k, i, v) }
fn through_value_and_grad(x: f64, k: i64, i: usize, v: [f64; 3]) -> (f64, f64) {
    value_and_grad(checked, x, k, i, v)
}
fn through_jacobian(x: f64, k: i64, i: usize, v: [f64; 3]) -> [[f64; 2]; 2] {
    jacobian(row, [x, 1.0], k, i, v)
}
fn direct_power(x: f64, n: i64) -> f64 { power(x, n) }
fn power_grad(x: f64, n: i64) -> f64 { grad(power, x, n) }
"#;

/// Members that divide by zero, index out of bounds and fail an assertion.
const FAULTING_MEMBERS: &str = r#"{"batch": {"x": [1.0, 2.0, 200.0, 3.0], "k": [0, 3, 3, 3], "i": [0, 5, 0, 1]}, "shared": {"v": [1.0, 2.0, 3.0]}}"#;

/// The kind, line and column of each member's error (`None` for a result).
fn error_places(results: &[serde_json::Value]) -> Vec<Option<(String, Loc)>> {
    results
        .iter()
        .map(|r| {
            let e = r.get("error")?;
            let at = |key: &str| e[key].as_u64().unwrap_or(0) as u32;
            Some((
                e["kind"].as_str().unwrap_or("").to_string(),
                Loc::new(at("line"), at("column")),
            ))
        })
        .collect()
}

/// A fault inside a derivative is the fault of the user's function, at
/// its location: the same kind and place as calling the function directly.
fn faults_inside_derivatives(messages: &mut Messages, failures: &mut Vec<String>) {
    let compiled = messages
        .compile("faults.ab", FAULTS)
        .expect("faults.ab compiles");
    let config = reference(&harness::RunOverrides::default());
    let run = |messages: &mut Messages, entry: &str, inputs: &str, config: &RunConfig| {
        let bind = |inputs: &Inputs| compiled.bind(entry, inputs);
        error_places(&messages.run(
            &format!("faults.ab {entry}"),
            &compiled,
            bind,
            inputs,
            config,
        ))
    };
    let direct = run(messages, "direct", FAULTING_MEMBERS, &config);
    assert!(
        direct.iter().filter(|e| e.is_some()).count() == 3,
        "{direct:?}"
    );
    for entry in ["through_grad", "through_value_and_grad", "through_jacobian"] {
        let derived = run(messages, entry, FAULTING_MEMBERS, &config);
        if derived != direct {
            failures.push(format!(
                "faults.ab {entry}: the members' errors {derived:?} are not those of `checked` called directly, {direct:?}"
            ));
        }
    }
    // A recursion too deep inside a gradient, and the step limit.
    let deep = r#"{"batch": {"x": [1.5, 1.5], "n": [2, 50]}}"#;
    for limits in [
        RunConfig {
            options: autobatch::RunOptions {
                max_stack_depth: 10,
                ..config.options.clone()
            },
            ..config.clone()
        },
        RunConfig {
            options: autobatch::RunOptions {
                max_steps: 40,
                ..config.options.clone()
            },
            ..config.clone()
        },
    ] {
        let direct = run(messages, "direct_power", deep, &limits);
        let derived = run(messages, "power_grad", deep, &limits);
        assert!(derived.iter().any(|e| e.is_some()), "{derived:?}");
        for (d, g) in direct.iter().zip(&derived) {
            if let (Some((dk, _)), Some((gk, _))) = (d, g) {
                if dk != gk {
                    failures.push(format!("power_grad: {gk} where `power` gives {dk}"));
                }
            }
        }
    }
    // An entry that does not exist: the functions listed are the user's.
    let bind = |inputs: &Inputs| compiled.bind("missing", inputs);
    messages.run("faults.ab missing", &compiled, bind, "{}", &config);
}

/// A machine too small for any value: the run errors name the variable
/// that does not fit and its function, the user's.
fn too_little_memory(messages: &mut Messages) {
    let compiled = compile(FAULTS, "faults.ab").expect("faults.ab compiles");
    std::env::set_var("AUTOBATCH_MEMORY_LIMIT", "1");
    for strategy in Strategy::ALL {
        let config = RunConfig {
            strategy,
            ..RunConfig::default()
        };
        for entry in [
            "through_grad",
            "through_value_and_grad",
            "through_jacobian",
            "power_grad",
        ] {
            let bind = |inputs: &Inputs| compiled.bind(entry, inputs);
            let inputs = if entry == "power_grad" {
                r#"{"batch": {"x": [1.5], "n": [2]}}"#
            } else {
                FAULTING_MEMBERS
            };
            messages.run(
                &format!("faults.ab {entry} ({strategy}, 1 byte)"),
                &compiled,
                bind,
                inputs,
                &config,
            );
        }
    }
    let root = workspace();
    for path in files(&root.join("tests/programs"), ".ab") {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let ode = name.starts_with("ode_") || name.contains("_ode");
        if !(name.starts_with("grad") || name.starts_with("jacobian") || ode) {
            continue;
        }
        if let Ok(compiled) = compile(&read(&path), &name) {
            run_directives(messages, &name, &compiled, " (1 byte)");
        }
    }
    std::env::remove_var("AUTOBATCH_MEMORY_LIMIT");
}

/// The program of the gradients with respect to statics.
const STATICS: &str = r#"
extern "autobatch" {
    static W: [[f64; 3]; 2];
    static B: [f64; 2];
}
fn predict(x: [f64; 3], y: [f64; 2]) -> f64 {
    assert!(y[0] < 10.0, "y is out of range");
    let d = (matvec(W, x) + B).tanh() - y;
    sum(d * d)
}
fn both(x: [f64; 3]) -> [f64; 2] { B }
fn deep(n: i64) -> f64 { if B[0] > 0.0 { 1.0 } else if n > 0 { deep(n - 1) } else { B[1] } }
fn recursive(x: [f64; 3], y: [f64; 2]) -> f64 { deep(3) }
fn noisy(x: [f64; 3], y: [f64; 2]) -> f64 { W[0][0] * uniform() }
"#;

/// Gradients with respect to statics (`--grad-statics`): bad inputs, a
/// request that cannot be served, and a member that faults.
fn static_gradients(messages: &mut Messages, failures: &mut Vec<String>) {
    let compiled = messages
        .compile("statics.ab", STATICS)
        .expect("statics.ab compiles");
    let config = reference(&harness::RunOverrides::default());
    let statics = r#""W": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], "B": [0.0, 1.0]"#;
    let cases = [
        ("missing argument", format!(r#"{{"batch": {{"x": [[1.0, 2.0, 3.0]]}}, "shared": {{{statics}}}}}"#)),
        ("unknown argument", format!(r#"{{"batch": {{"x": [[1.0, 2.0, 3.0]], "y": [[0.0, 0.0]], "z": [1]}}, "shared": {{{statics}}}}}"#)),
        ("wrong shape", format!(r#"{{"batch": {{"x": [[1.0, 2.0]], "y": [[0.0, 0.0]]}}, "shared": {{{statics}}}}}"#)),
        ("wrong type", format!(r#"{{"batch": {{"x": [[1.0, 2.0, 3.0]], "y": [[true, 0.0]]}}, "shared": {{{statics}}}}}"#)),
        ("missing static", r#"{"batch": {"x": [[1.0, 2.0, 3.0]], "y": [[0.0, 0.0]]}, "shared": {"W": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]}}"#.to_string()),
        ("faulting member", format!(r#"{{"batch": {{"x": [[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], "y": [[0.0, 0.0], [20.0, 0.0]]}}, "shared": {{{statics}}}}}"#)),
    ];
    for (what, inputs) in &cases {
        let origin = format!("statics.ab predict ({what})");
        let bind = |inputs: &Inputs| compiled.bind_static_gradient("predict", &["W", "B"], inputs);
        let derived = error_places(&messages.run(&origin, &compiled, bind, inputs, &config));
        let bind = |inputs: &Inputs| compiled.bind("predict", inputs);
        let direct = error_places(&messages.run(&origin, &compiled, bind, inputs, &config));
        if derived != direct {
            failures.push(format!(
                "{origin}: the members' errors {derived:?} are not those of `predict` run directly, {direct:?}"
            ));
        }
    }
    let inputs = &cases[5].1;
    for (entry, statics) in [
        ("both", &["B"][..]),
        ("predict", &["V"][..]),
        ("predict", &[][..]),
        ("recursive", &["B"][..]),
        ("noisy", &["W"][..]),
    ] {
        let bind = |inputs: &Inputs| compiled.bind_static_gradient(entry, statics, inputs);
        messages.run(
            &format!("statics.ab {entry} {statics:?}"),
            &compiled,
            bind,
            inputs,
            &config,
        );
    }
}

#[test]
fn no_message_names_an_internal_function() {
    let mut messages = Messages::default();
    let mut failures = Vec::new();
    // Each source gives at least this many messages (it gives more): a
    // check that the files are still found and read.
    let mut expect_more = |messages: &Messages, before: usize, least: usize, what: &str| {
        let found = messages.all.len() - before;
        if found < least {
            failures.push(format!("only {found} messages from {what}"));
        }
        messages.all.len()
    };
    program_files(&mut messages);
    let n = expect_more(&messages, 0, 150, "tests/programs");
    programs_in_rust_tests(&mut messages);
    let n = expect_more(&messages, n, 200, "the programs in the Rust tests");
    let mut found = Vec::new();
    faults_inside_derivatives(&mut messages, &mut found);
    static_gradients(&mut messages, &mut found);
    too_little_memory(&mut messages);
    expect_more(&messages, n, 30, "the gradients' faults");
    failures.extend(found);
    for (origin, message, source) in &messages.all {
        let names = internal_names(message, source);
        if !names.is_empty() {
            failures.push(format!("{origin}: {names:?} in: {message}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn internal_names_are_recognized() {
    let flagged = |message: &str| internal_names(message, "");
    assert_eq!(flagged("cannot bind `f'grad`"), ["f'grad", "`f'grad`"]);
    assert_eq!(flagged("in predict'sgrad@0 at 3:4"), ["predict'sgrad@0"]);
    assert_eq!(flagged("the function f@1"), ["f@1"]);
    assert_eq!(flagged("a vjp failed"), ["vjp"]);
    assert_eq!(flagged("see `h'jrow`"), ["h'jrow", "`h'jrow`"]);
    assert_eq!(flagged("`f'other`"), ["`f'other`"]);
    // What the compiler writes for an ODE solver's call, not the call.
    assert_eq!(
        flagged("in `ode_rk45_36_11_adjoint`, ODE_RK45_TOL_3_5_M and ODE_T"),
        ["ode_rk45_36_11_adjoint", "ODE_RK45_TOL_3_5_M", "ODE_T"]
    );
    assert!(flagged("the `ode_rk45_tol` call at 36:11, `ode_bdf`").is_empty());
    // English, lifetimes and character literals are not names.
    assert!(flagged("the member's value isn't `f`'s").is_empty());
    assert!(flagged("a lifetime `'a` or a character `'c'` at 1:2").is_empty());
    // A name that the program itself contains is the user's.
    assert!(internal_names("unknown `my'vjp`", "fn f() { my'vjp }").is_empty());
}
