//! Golden tests of loop-invariant code motion: every `tests/hoist/*.ab` is
//! compiled and optimized ([`autobatch_passes::optimize`], which moves the
//! invariant operations out of their loops) and printed; the text must
//! equal the `.ir` file beside it, and the program must pass the IR
//! verifier. `AUTOBATCH_BLESS=1` rewrites the expectations.

use std::path::Path;

#[test]
fn hoisted_forms_match_their_expectations() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hoist");
    let bless = std::env::var_os("AUTOBATCH_BLESS").is_some();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ab"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no programs in {}", dir.display());
    let mut failures = Vec::new();
    for path in &paths {
        let source = std::fs::read_to_string(path).unwrap();
        let mut program = autobatch_lower::compile(&source).unwrap_or_else(|d| {
            panic!("{} does not compile: {d:?}", path.display());
        });
        autobatch_passes::optimize(&mut program);
        if let Err(errors) = autobatch_ir::verify::verify_program(&program) {
            panic!("{} fails the verifier: {errors:?}", path.display());
        }
        let actual = autobatch_ir::print::program_to_string(&program);
        let expected_path = path.with_extension("ir");
        if bless {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{}:\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "hoisted forms differ (AUTOBATCH_BLESS=1 to accept):\n{}",
        failures.join("\n")
    );
}

/// Nothing moves twice: optimizing an optimized program changes nothing.
#[test]
fn hoisting_twice_moves_nothing() {
    let source = include_str!("hoist/invariants.ab");
    let mut program = autobatch_lower::compile(source).unwrap();
    autobatch_passes::optimize(&mut program);
    assert_eq!(
        autobatch_passes::hoist::hoist_loop_invariants(&mut program),
        0
    );
}
