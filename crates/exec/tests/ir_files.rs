//! Executor tests written as IR text: every `tests/ir/*.ir` is parsed,
//! verified, optimized, and each of its `//@ run:` directives is run on every
//! registered strategy, with every lanes mode and block choice it reads;
//! every member must get what the
//! `//@ expect:` after it says. The format is in `tests/ir/README.md`.

mod common;

use std::path::{Path, PathBuf};

use autobatch_exec::{run, BatchingOptions, Env, RunOptions, Strategy};
use autobatch_ir::Program;

use common::{batch_of, cases, configurations, json_of_results, same_error, same_value, Case};

fn ir_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ir");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/ir exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ir"))
        .collect();
    files.sort();
    files
}

/// What goes wrong when `case` runs on `program` with one configuration.
fn check_case(
    program: &Program,
    case: &Case,
    strategy: Strategy,
    batching: &BatchingOptions,
) -> Result<(), String> {
    let expect = case
        .expect
        .as_deref()
        .ok_or("no `expect` after the `run`")?;
    let batch = batch_of(program, case)?;
    let output = run(
        strategy,
        program,
        &Env::default(),
        &batch,
        &RunOptions {
            batching: *batching,
            ..case.options.clone()
        },
    )
    .map_err(|e| e.to_string())?;
    if output.results.len() != expect.len() {
        return Err(format!(
            "{} members ran, {} expected",
            output.results.len(),
            expect.len()
        ));
    }
    let function = &program.functions[batch.entry];
    for (member, (expected, actual)) in expect.iter().zip(&output.results).enumerate() {
        let fits = match actual {
            Ok(results) => same_value(
                &expected["ok"],
                &json_of_results(function, results),
                case.tolerance,
            ),
            Err(error) => same_error(&expected["error"], error),
        };
        if !fits {
            let actual = match actual {
                Ok(results) => json_of_results(function, results).to_string(),
                Err(error) => format!("error {error}"),
            };
            return Err(format!(
                "member {member}: expected {expected}, got {actual}"
            ));
        }
    }
    Ok(())
}

fn check_file(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("readable file");
    let mut program = match autobatch_ir::parse::parse_program(&text) {
        Ok(p) => p,
        Err(e) => return vec![format!("does not parse: {e}")],
    };
    if let Err(errors) = autobatch_ir::verify::verify_program(&program) {
        return vec![format!("does not verify: {errors:?}")];
    }
    autobatch_passes::optimize(&mut program);
    let cases = match cases(&text) {
        Ok(cases) if !cases.is_empty() => cases,
        Ok(_) => return vec!["no `run` directive".into()],
        Err(e) => return vec![e],
    };
    let mut failures = Vec::new();
    for case in &cases {
        for (strategy, batching) in configurations() {
            if let Err(e) = check_case(&program, case, strategy, &batching) {
                failures.push(format!(
                    "line {} on {strategy} ({:?}, {:?}): {e}",
                    case.line, batching.lanes, batching.block_choice
                ));
            }
        }
    }
    failures
}

#[test]
fn ir_files_run_as_expected_on_every_strategy() {
    let files = ir_files();
    assert!(!files.is_empty(), "no tests/ir/*.ir files");
    let mut failures = Vec::new();
    for path in files {
        for failure in check_file(&path) {
            failures.push(format!("{}: {failure}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
