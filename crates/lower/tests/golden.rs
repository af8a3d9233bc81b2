//! Golden tests of the IR text form: every `tests/ir/*.ab` is compiled and
//! printed; the text must equal the `.ir` file beside it. With
//! `AUTOBATCH_BLESS=1` the expectations are rewritten instead. Every lowered
//! program must pass the IR verifier.

use std::path::Path;

#[test]
fn ir_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ir");
    let bless = std::env::var("AUTOBATCH_BLESS").is_ok_and(|v| v == "1");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ir exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ab"))
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "no golden programs found");
    let mut failures = Vec::new();
    for path in entries {
        let source = std::fs::read_to_string(&path).expect("readable program");
        let program = match autobatch_lower::compile(&source) {
            Ok(p) => p,
            Err(diagnostics) => {
                let text: Vec<String> = diagnostics
                    .iter()
                    .map(|d| d.render(&source, &path.display().to_string(), false))
                    .collect();
                failures.push(format!(
                    "{} does not compile:\n{}",
                    path.display(),
                    text.join("\n")
                ));
                continue;
            }
        };
        if let Err(errors) = autobatch_ir::verify::verify_program(&program) {
            let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            failures.push(format!(
                "{} fails the verifier:\n{}",
                path.display(),
                text.join("\n")
            ));
        }
        let actual = autobatch_ir::print::program_to_string(&program);
        let expected_path = path.with_extension("ir");
        if bless {
            std::fs::write(&expected_path, &actual).expect("writable expectation");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{} differs from {} (run with AUTOBATCH_BLESS=1 to accept):\n{}",
                path.display(),
                expected_path.display(),
                actual
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
