//! The program-test harness: reads the `//@` directives of a `.ab` file
//! (format in `tests/programs/README.md`), runs the cases on every
//! registered strategy (`Strategy::ALL`), and describes every mismatch with the file and line
//! of the directive it comes from.
//!
//! Parsing ([`parse_test_file`]) and comparing ([`compare_results`]) are
//! separate from running ([`run_test_file`]) so that each can be tested on
//! its own.

use std::panic::{catch_unwind, AssertUnwindSafe};

use autobatch::{compile, BlockChoice, Inputs, LaneMode, RunConfig, Strategy};

/// Every way of running a case: each registered strategy, with every lanes
/// mode and block choice it reads ([`Strategy::configurations`]).
pub fn configurations() -> Vec<(Strategy, LaneMode, BlockChoice)> {
    Strategy::ALL
        .into_iter()
        .flat_map(|strategy| {
            strategy
                .configurations()
                .into_iter()
                .map(move |batching| (strategy, batching.lanes, batching.block_choice))
        })
        .collect()
}

/// The ways of running the `k`-th `run` of a file: every configuration, or
/// with [`Configurations::OnePerRun`] each strategy with the `k`-th of its
/// configurations (cycling), so that the file's runs together still take
/// every configuration.
pub fn configurations_of_run(
    which: Configurations,
    k: usize,
) -> Vec<(Strategy, LaneMode, BlockChoice)> {
    match which {
        Configurations::All => configurations(),
        Configurations::OnePerRun => Strategy::ALL
            .into_iter()
            .map(|strategy| {
                let all = strategy.configurations();
                let batching = all[k % all.len()];
                (strategy, batching.lanes, batching.block_choice)
            })
            .collect(),
    }
}

/// The `//@ configurations:` directive of a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Configurations {
    /// `all` (the default): every run on every configuration.
    #[default]
    All,
    /// `one per run`: every run on every strategy, one configuration each.
    OnePerRun,
}

/// The run's settings for `strategy` with `lanes` and `block_choice` (one
/// of [`configurations`]), every other option at its default.
pub fn run_config(strategy: Strategy, lanes: LaneMode, block_choice: BlockChoice) -> RunConfig {
    let mut config = RunConfig {
        strategy,
        ..RunConfig::default()
    };
    config.options.batching = autobatch::BatchingOptions {
        lanes,
        block_choice,
    };
    config
}

/// Float tolerance when no `//@ tolerance:` line applies.
pub const DEFAULT_TOLERANCE: f64 = 1e-12;

/// Overrides of the run's limits and seed from `run(...)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOverrides {
    pub max_stack_depth: Option<usize>,
    pub max_steps: Option<u64>,
    pub seed: Option<u64>,
    /// `--max-instances`: the bound on instances alive at once (default: from memory).
    pub max_instances: Option<usize>,
    /// `--max-tape-bytes`: the bound on a member's tape (default: from memory).
    pub max_tape_bytes: Option<u64>,
}

/// What a `run` must give.
#[derive(Clone, Debug, PartialEq)]
pub enum Expectation {
    /// `//@ expect:` on `line`: the `results` array, compared with `tolerance` for floats.
    Results {
        line: usize,
        tolerance: f64,
        results: Vec<serde_json::Value>,
    },
    /// `//@ input-error:` on `line`: binding must fail with a message containing `text`.
    InputError { line: usize, text: String },
}

/// One `//@ run` directive and what it must give.
#[derive(Clone, Debug, PartialEq)]
pub struct RunCase {
    pub line: usize,
    pub entry: String,
    pub inputs: String,
    pub overrides: RunOverrides,
    pub expectation: Option<Expectation>,
}

/// One `//@ compile-error` directive.
#[derive(Clone, Debug, PartialEq)]
pub struct CompileErrorCase {
    pub line: usize,
    pub at: Option<(u32, u32)>,
    pub text: String,
}

/// Everything the directives of one file say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TestFile {
    pub runs: Vec<RunCase>,
    pub compile_errors: Vec<CompileErrorCase>,
    /// Which configurations each run takes.
    pub configurations: Configurations,
    /// Malformed directives, as `line: problem`.
    pub problems: Vec<(usize, String)>,
}

/// Reads the directives of `source`. Never fails: malformed directives are
/// listed in `problems` so that all of them are reported at once.
pub fn parse_test_file(source: &str) -> TestFile {
    let mut file = TestFile::default();
    // A `tolerance` line applies to every `expect` after it in the file,
    // until the next `tolerance` line.
    let mut tolerance = DEFAULT_TOLERANCE;
    for (index, text) in source.lines().enumerate() {
        let line = index + 1;
        let Some(directive) = text.trim_start().strip_prefix("//@") else {
            continue;
        };
        let (name, options, rest) = match split_directive(directive.trim()) {
            Ok(parts) => parts,
            Err(problem) => {
                file.problems.push((line, problem));
                continue;
            }
        };
        let pending_run = |file: &mut TestFile, what: &str| -> Option<usize> {
            match file.runs.last() {
                Some(run) if run.expectation.is_none() => Some(file.runs.len() - 1),
                _ => {
                    file.problems.push((
                        line,
                        format!("`{what}` must follow a `run` that has no expectation yet"),
                    ));
                    None
                }
            }
        };
        match name {
            "run" => {
                let overrides = match parse_run_options(options.unwrap_or("")) {
                    Ok(overrides) => overrides,
                    Err(problem) => {
                        file.problems.push((line, problem));
                        continue;
                    }
                };
                let Some((entry, inputs)) = rest.split_once(char::is_whitespace) else {
                    file.problems.push((
                        line,
                        "`run` needs an entry name and the inputs as JSON".into(),
                    ));
                    continue;
                };
                file.runs.push(RunCase {
                    line,
                    entry: entry.to_owned(),
                    inputs: inputs.trim().to_owned(),
                    overrides,
                    expectation: None,
                });
            }
            "expect" => {
                if options.is_some() {
                    file.problems
                        .push((line, "`expect` takes no options".into()));
                    continue;
                }
                let results = match serde_json::from_str::<serde_json::Value>(rest) {
                    Ok(serde_json::Value::Array(results)) => results,
                    Ok(_) => {
                        file.problems
                            .push((line, "`expect` needs a JSON list of results".into()));
                        continue;
                    }
                    Err(e) => {
                        file.problems
                            .push((line, format!("`expect` is not valid JSON: {e}")));
                        continue;
                    }
                };
                if let Some(run) = pending_run(&mut file, "expect") {
                    file.runs[run].expectation = Some(Expectation::Results {
                        line,
                        tolerance,
                        results,
                    });
                }
            }
            "input-error" => {
                if rest.is_empty() {
                    file.problems.push((
                        line,
                        "`input-error` needs the text the message must contain".into(),
                    ));
                    continue;
                }
                if let Some(run) = pending_run(&mut file, "input-error") {
                    file.runs[run].expectation = Some(Expectation::InputError {
                        line,
                        text: rest.to_owned(),
                    });
                }
            }
            "configurations" => match rest {
                "all" => file.configurations = Configurations::All,
                "one per run" => file.configurations = Configurations::OnePerRun,
                _ => file.problems.push((
                    line,
                    format!("`configurations` is `all` or `one per run`, found `{rest}`"),
                )),
            },
            "tolerance" => match rest.parse::<f64>() {
                Ok(t) if t >= 0.0 && t.is_finite() => tolerance = t,
                _ => file.problems.push((
                    line,
                    format!("`tolerance` needs a non-negative number, found `{rest}`"),
                )),
            },
            "compile-error" => {
                let at = match options.map(parse_line_column).transpose() {
                    Ok(at) => at,
                    Err(problem) => {
                        file.problems.push((line, problem));
                        continue;
                    }
                };
                if rest.is_empty() {
                    file.problems.push((
                        line,
                        "`compile-error` needs the text a diagnostic must contain".into(),
                    ));
                    continue;
                }
                file.compile_errors.push(CompileErrorCase {
                    line,
                    at,
                    text: rest.to_owned(),
                });
            }
            other => file
                .problems
                .push((line, format!("unknown directive `{other}`"))),
        }
    }
    for run in &file.runs {
        if run.expectation.is_none() {
            file.problems.push((
                run.line,
                "`run` without a following `expect` or `input-error`".into(),
            ));
        }
    }
    if !file.compile_errors.is_empty() {
        for run in &file.runs {
            file.problems.push((
                run.line,
                "a file that must not compile cannot have `run` directives".into(),
            ));
        }
    }
    file
}

/// Splits `name(options): rest` into its parts.
fn split_directive(text: &str) -> Result<(&str, Option<&str>, &str), String> {
    let name_end = text
        .find(['(', ':'])
        .ok_or_else(|| format!("malformed directive `{text}` (expected `name: ...`)"))?;
    let name = text[..name_end].trim();
    let (options, after) = if text[name_end..].starts_with('(') {
        let close = text[name_end..]
            .find(')')
            .ok_or_else(|| format!("unclosed `(` in `{text}`"))?
            + name_end;
        (Some(text[name_end + 1..close].trim()), &text[close + 1..])
    } else {
        (None, &text[name_end..])
    };
    let rest = after
        .trim_start()
        .strip_prefix(':')
        .ok_or_else(|| format!("missing `:` after `{name}`"))?;
    Ok((name, options, rest.trim()))
}

fn parse_run_options(text: &str) -> Result<RunOverrides, String> {
    let mut overrides = RunOverrides::default();
    for option in text.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (key, value) = option
            .split_once('=')
            .ok_or_else(|| format!("run option `{option}` is not `key=value`"))?;
        let bad_value = |_| format!("run option `{option}` needs an unsigned integer");
        match key.trim() {
            "max-stack-depth" => {
                overrides.max_stack_depth = Some(value.trim().parse().map_err(bad_value)?)
            }
            "max-steps" => overrides.max_steps = Some(value.trim().parse().map_err(bad_value)?),
            "seed" => overrides.seed = Some(value.trim().parse().map_err(bad_value)?),
            "max-instances" => {
                overrides.max_instances = Some(value.trim().parse().map_err(bad_value)?)
            }
            "max-tape-bytes" => {
                overrides.max_tape_bytes = Some(value.trim().parse().map_err(bad_value)?)
            }
            other => {
                return Err(format!(
                    "unknown run option `{other}` (known: max-instances, max-stack-depth, max-steps, max-tape-bytes, seed)"
                ))
            }
        }
    }
    Ok(overrides)
}

fn parse_line_column(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .split_once(':')
        .and_then(|(l, c)| Some((l.trim().parse().ok()?, c.trim().parse().ok()?)));
    parsed.ok_or_else(|| format!("`compile-error({text})` must be `compile-error(LINE:COLUMN)`"))
}

/// Compares the `results` a run printed with the expected ones; each
/// mismatch is one line starting `member I: `. Empty means they agree.
pub fn compare_results(
    expected: &[serde_json::Value],
    actual: &[serde_json::Value],
    tolerance: f64,
) -> Vec<String> {
    let mut mismatches = Vec::new();
    if expected.len() != actual.len() {
        mismatches.push(format!(
            "expected {} results, got {}: {}",
            expected.len(),
            actual.len(),
            serde_json::Value::Array(actual.to_vec())
        ));
        return mismatches;
    }
    for (member, (expected, actual)) in expected.iter().zip(actual).enumerate() {
        if let Err(why) = compare_member(expected, actual, tolerance) {
            mismatches.push(format!(
                "member {member}: {why}: expected {expected}, got {actual}"
            ));
        }
    }
    mismatches
}

fn compare_member(
    expected: &serde_json::Value,
    actual: &serde_json::Value,
    tolerance: f64,
) -> Result<(), String> {
    let expected_object = expected.as_object().filter(|o| o.len() == 1);
    let Some((kind, expected_body)) = expected_object.and_then(|o| o.iter().next()) else {
        return Err("an expected result must be {\"ok\": ...} or {\"error\": {...}}".into());
    };
    let actual_body = actual
        .get(kind.as_str())
        .ok_or_else(|| format!("not an `{kind}` result"))?;
    match kind.as_str() {
        "ok" => compare_values(expected_body, actual_body, tolerance, ""),
        "error" => compare_error(expected_body, actual_body),
        other => Err(format!("unknown result kind `{other}` in the expectation")),
    }
}

fn compare_error(expected: &serde_json::Value, actual: &serde_json::Value) -> Result<(), String> {
    let expected = expected
        .as_object()
        .ok_or("an expected error must be an object")?;
    if !expected.contains_key("kind") {
        return Err("an expected error must give its `kind`".into());
    }
    for (key, value) in expected {
        match key.as_str() {
            "kind" | "line" | "column" => {
                if actual.get(key) != Some(value) {
                    return Err(format!("different `{key}`"));
                }
            }
            "message" => {
                let wanted = value
                    .as_str()
                    .ok_or("an expected `message` must be a string")?;
                let message = actual.get("message").and_then(|m| m.as_str()).unwrap_or("");
                if !message.contains(wanted) {
                    return Err("the message does not contain the expected text".into());
                }
            }
            other => return Err(format!("unknown key `{other}` in the expected error")),
        }
    }
    Ok(())
}

/// Integers and booleans exactly; a float result to `tolerance` (relative
/// and absolute), and an expected integer is accepted for a float result.
fn compare_values(
    expected: &serde_json::Value,
    actual: &serde_json::Value,
    tolerance: f64,
    path: &str,
) -> Result<(), String> {
    use serde_json::Value as J;
    let at = |what: &str| {
        if path.is_empty() {
            what.to_owned()
        } else {
            format!("{what} at {path}")
        }
    };
    match (expected, actual) {
        (J::Number(e), J::Number(a)) => {
            if a.is_f64() {
                let (e, a) = (
                    e.as_f64().unwrap_or(f64::NAN),
                    a.as_f64().unwrap_or(f64::NAN),
                );
                if (a - e).abs() <= tolerance * e.abs().max(1.0) {
                    Ok(())
                } else {
                    Err(at(&format!(
                        "{a} differs from {e} by more than {tolerance:e}"
                    )))
                }
            } else if e.is_f64() {
                Err(at("an integer where a float is expected"))
            } else if e.as_i64() == a.as_i64() && e.as_u64() == a.as_u64() {
                Ok(())
            } else {
                Err(at("a different integer"))
            }
        }
        (J::Array(e), J::Array(a)) => {
            if e.len() != a.len() {
                return Err(at(&format!("{} elements instead of {}", a.len(), e.len())));
            }
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                compare_values(e, a, tolerance, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (e, a) if e == a => Ok(()),
        _ => Err(at("a different value")),
    }
}

/// Runs `f`, turning a panic into an error that carries the panic's message,
/// so that one broken case does not hide the others.
fn without_panics<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        if let Some(s) = payload.downcast_ref::<&str>() {
            format!("panicked: {s}")
        } else if let Some(s) = payload.downcast_ref::<String>() {
            format!("panicked: {s}")
        } else {
            "panicked".into()
        }
    })
}

/// Runs every case of one test file; returns every failure, each prefixed
/// with `display:LINE: ` of the directive it belongs to.
/// A run's profile, when it recorded one, accounts for every step: its
/// bins and its blocks count the run's steps, and the same rows.
pub fn check_profile(stats: &autobatch::Stats, recorded: bool) -> Result<(), String> {
    let Some(profile) = &stats.profile else {
        return if recorded {
            Err("none was recorded".into())
        } else {
            Ok(())
        };
    };
    if !recorded {
        return Err("recorded without being asked".into());
    }
    let executions: u64 = profile.blocks.iter().map(|b| b.executions).sum();
    if profile.steps() != stats.steps || executions != stats.steps {
        return Err(format!(
            "{} steps in the bins and {executions} in the blocks, but the run took {}",
            profile.steps(),
            stats.steps
        ));
    }
    let rows = |active: fn(&autobatch::profile::StepBin) -> u64| -> u64 {
        profile.bins.iter().map(active).sum()
    };
    let block_rows: u64 = profile.blocks.iter().map(|b| b.active).sum();
    let block_threads: u64 = profile.blocks.iter().map(|b| b.threads).sum();
    if rows(|b| b.active) != block_rows || rows(|b| b.threads) != block_threads {
        return Err("the bins and the blocks count other rows".into());
    }
    if profile.bins.len() > autobatch::profile::MAX_BINS {
        return Err(format!("{} bins", profile.bins.len()));
    }
    Ok(())
}

pub fn run_test_file(display: &str, source: &str) -> Vec<String> {
    let file = parse_test_file(source);
    let mut failures: Vec<String> = file
        .problems
        .iter()
        .map(|(line, problem)| format!("{display}:{line}: bad directive: {problem}"))
        .collect();
    if !failures.is_empty() {
        return failures;
    }
    let compiled = match without_panics(|| compile(source, display)) {
        Err(panic) => return vec![format!("{display}:1: compiling {panic}")],
        Ok(compiled) => compiled,
    };

    if !file.compile_errors.is_empty() {
        let error = match compiled {
            Ok(_) => {
                return file
                    .compile_errors
                    .iter()
                    .map(|case| format!("{display}:{}: expected a compile error containing {:?}, but the program compiles", case.line, case.text))
                    .collect()
            }
            Err(error) => error,
        };
        let diagnostics = error.located_messages();
        for case in &file.compile_errors {
            let matched = diagnostics.iter().any(|(loc, words)| {
                words.contains(&case.text)
                    && case
                        .at
                        .is_none_or(|(line, column)| loc.line == line && loc.column == column)
            });
            if !matched {
                let at = case
                    .at
                    .map(|(l, c)| format!(" at {l}:{c}"))
                    .unwrap_or_default();
                let listed: Vec<String> = diagnostics
                    .iter()
                    .map(|(loc, words)| format!("{loc}: {}", words.replace('\n', " / ")))
                    .collect();
                failures.push(format!(
                    "{display}:{}: no diagnostic{at} contains {:?}; the diagnostics are: {}",
                    case.line,
                    case.text,
                    listed.join(" | ")
                ));
            }
        }
        return failures;
    }

    let compiled = match compiled {
        Ok(compiled) => compiled,
        Err(error) => {
            return vec![format!(
                "{display}:1: does not compile:\n{}",
                error.render(false)
            )]
        }
    };
    for (k, case) in file.runs.iter().enumerate() {
        let Some(expectation) = &case.expectation else {
            continue;
        };
        let bound = without_panics(|| {
            Inputs::from_json_str(&case.inputs)
                .and_then(|inputs| compiled.bind(&case.entry, &inputs))
        });
        let bound = match (bound, expectation) {
            (Err(panic), _) => {
                failures.push(format!(
                    "{display}:{}: binding the inputs {panic}",
                    case.line
                ));
                continue;
            }
            (Ok(Err(error)), Expectation::InputError { line, text }) => {
                if !error.message().contains(text.as_str()) {
                    failures.push(format!(
                        "{display}:{line}: the input error {:?} does not contain {text:?}",
                        error.message()
                    ));
                }
                continue;
            }
            (Ok(Err(error)), Expectation::Results { .. }) => {
                failures.push(format!(
                    "{display}:{}: the inputs do not bind: {}",
                    case.line,
                    error.message()
                ));
                continue;
            }
            (Ok(Ok(_)), Expectation::InputError { line, text }) => {
                failures.push(format!("{display}:{line}: expected an input error containing {text:?}, but the inputs bind"));
                continue;
            }
            (Ok(Ok(bound)), Expectation::Results { .. }) => bound,
        };
        let Expectation::Results {
            line,
            tolerance,
            results: expected,
        } = expectation
        else {
            continue;
        };
        for (strategy, lanes, block_choice) in configurations_of_run(file.configurations, k) {
            let mut config = run_config(strategy, lanes, block_choice);
            let options = &mut config.options;
            let overrides = &case.overrides;
            options.max_stack_depth = overrides.max_stack_depth.unwrap_or(options.max_stack_depth);
            options.max_steps = overrides.max_steps.unwrap_or(options.max_steps);
            options.seed = overrides.seed.unwrap_or(options.seed);
            options.max_instances = overrides.max_instances.or(options.max_instances);
            options.max_tape_bytes = overrides.max_tape_bytes.or(options.max_tape_bytes);
            // Every strategy that records a profile records one here:
            // recording must change no result, and the profile must account
            // for every step.
            options.profile = strategy.records_profile();
            let actual = match without_panics(|| bound.run(&config)) {
                Err(panic) => {
                    failures.push(format!(
                        "{display}:{}: [{strategy}/{lanes}/{block_choice}] running {panic}",
                        case.line
                    ));
                    continue;
                }
                Ok(Err(error)) => {
                    failures.push(format!(
                        "{display}:{}: [{strategy}/{lanes}/{block_choice}] cannot run: {error}",
                        case.line
                    ));
                    continue;
                }
                Ok(Ok(result)) => {
                    if let Err(problem) = check_profile(&result.stats, config.options.profile) {
                        failures.push(format!(
                            "{display}:{}: [{strategy}/{lanes}/{block_choice}] profile: {problem}",
                            case.line
                        ));
                    }
                    result.to_json(false)
                }
            };
            let actual = actual["results"].as_array().cloned().unwrap_or_default();
            for mismatch in compare_results(expected, &actual, *tolerance) {
                failures.push(format!(
                    "{display}:{line}: [{strategy}/{lanes}/{block_choice}] {mismatch}"
                ));
            }
        }
    }
    failures
}

/// The numbers of a JSON result, depth first, appended to `out`.
#[allow(dead_code)]
pub fn numbers(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|i| numbers(i, out)),
        other => out.push(
            other
                .as_f64()
                .unwrap_or_else(|| panic!("expected a number, got {other}")),
        ),
    }
}

/// Each member's `ok` value of a run's results; panics naming `what` and
/// the member's result when one failed.
#[allow(dead_code)]
pub fn ok_values(result: &autobatch::RunResult, what: &str) -> Vec<serde_json::Value> {
    result.to_json(false)["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            r.get("ok")
                .cloned()
                .unwrap_or_else(|| panic!("{what} failed: {r}"))
        })
        .collect()
}
