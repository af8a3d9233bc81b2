//! The text form reads back what it writes: for every program of the test
//! suite (`tests/programs`, `examples`, and the `.ab` inputs under
//! `crates/*/tests` and `crates/*/programs`) that compiles, the optimized IR
//! printed, parsed and printed again gives the same text, the parsed
//! program equals the original, and it passes the verifier.

use std::path::{Path, PathBuf};

use autobatch_ir::parse::parse_program;
use autobatch_ir::print::program_to_string;
use autobatch_ir::verify::verify_program;

/// Every `.ab` file under `dir`, recursively.
fn sources_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources_under(&path, out);
        } else if path.extension().is_some_and(|x| x == "ab") {
            out.push(path);
        }
    }
}

fn suite() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    sources_under(&root.join("tests/programs"), &mut paths);
    sources_under(&root.join("examples"), &mut paths);
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/ exists");
    for krate in crates.flatten() {
        sources_under(&krate.path().join("tests"), &mut paths);
        sources_under(&krate.path().join("programs"), &mut paths);
        sources_under(&krate.path().join("src"), &mut paths);
    }
    paths.sort();
    paths
}

/// What is wrong with the round trip of `text`, if anything.
fn round_trip_failure(text: &str) -> Option<String> {
    let parsed = match parse_program(text) {
        Ok(p) => p,
        Err(e) => return Some(format!("does not parse: {e}")),
    };
    if let Err(errors) = verify_program(&parsed) {
        return Some(format!("parsed program fails the verifier: {errors:?}"));
    }
    let again = program_to_string(&parsed);
    if again != text {
        return Some(format!("printed again differently:\n{again}"));
    }
    None
}

#[test]
fn print_parse_print_is_the_identity_on_the_suite() {
    let mut compiled = 0;
    let mut failures = Vec::new();
    for path in suite() {
        let source = std::fs::read_to_string(&path).expect("readable program");
        let Ok(mut program) = autobatch_lower::compile(&source) else {
            continue;
        };
        autobatch_passes::optimize(&mut program);
        compiled += 1;
        let text = program_to_string(&program);
        if let Some(failure) = round_trip_failure(&text) {
            failures.push(format!("{}: {failure}", path.display()));
        } else if parse_program(&text).ok() != Some(program.clone()) {
            // Equal texts but unequal programs: NaN constants compare unequal.
            if !text.contains("NaN") {
                failures.push(format!("{}: parsed program differs", path.display()));
            }
        }
    }
    assert!(compiled > 120, "only {compiled} programs compiled");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
