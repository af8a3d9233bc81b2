//! `program!`: a program written in Rust code, checked when the Rust code
//! compiles, run through typed methods (its compile errors: `tests/ui/`,
//! run by `program_macro_errors`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use autobatch::typed::Array;
use autobatch::{ErrorKind, RunConfig, Shared, Strategy};

#[test]
fn a_function_of_the_program_is_a_typed_method() {
    let prog = autobatch::program! {
        /// The Fibonacci numbers, by recursion.
        fn fib(n: i64) -> i64 {
            if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) }
        }
    };
    for strategy in Strategy::ALL {
        let config = RunConfig {
            strategy,
            ..RunConfig::default()
        };
        let out = prog.fib(vec![3, 7, 4, 5]).run(&config).expect("runs");
        assert_eq!(out.members, [Ok(3), Ok(21), Ok(5), Ok(8)], "{strategy:?}");
    }
}

#[test]
fn shared_arguments_statics_arrays_and_tuples() {
    let prog = autobatch::program! {
        extern "autobatch" {
            static W: [[f64; 2]; 2];
        }

        fn step(x: [f64; 2], k: f64) -> ([f64; 2], usize) {
            (matvec(W, x) * k, x.len())
        }

        fn outer2(a: [f64; 2], b: [f64; 3]) -> [[f64; 3]; 2] {
            outer(a, b)
        }

        fn at(xs: [i64; 3], i: usize) -> i64 { xs[i] }
    };
    let config = RunConfig::default();
    // Every run gives every static, even one its function does not read.
    let w = || Array::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let out = prog
        .step(vec![vec![1.0, 0.0], vec![0.0, 1.0]], Shared(2.0))
        .shared("W", w())
        .run(&config)
        .expect("runs");
    assert_eq!(
        out.members,
        [Ok((vec![2.0, 6.0], 2)), Ok((vec![4.0, 8.0], 2))]
    );
    let out = prog
        .outer2(Shared(vec![1.0, 2.0]), vec![vec![1.0, 0.0, -1.0]])
        .shared("W", w())
        .run(&config)
        .expect("runs");
    let product = out.members[0].as_ref().expect("a value");
    assert_eq!(product.shape, [2, 3]);
    assert_eq!(product.data, [1.0, 0.0, -1.0, 2.0, 0.0, -2.0]);
    let out = prog
        .at(Shared(vec![10, 20, 30]), vec![2_u64, 3])
        .shared("W", w())
        .run(&config)
        .expect("runs");
    assert_eq!(out.members[0], Ok(30));
    assert_eq!(
        out.members[1].as_ref().unwrap_err().kind,
        ErrorKind::IndexOutOfBounds
    );
    assert!(prog.as_compiled().source().contains("fn at"));
}

#[test]
fn a_ragged_argument() {
    let prog = autobatch::program! {
        fn total(xs: [f64; L]) -> f64 { sum(xs) }
    };
    let out = prog
        .total(vec![vec![1.0, 2.0], vec![3.0], vec![4.0, 5.0, 6.0]])
        .run(&RunConfig::default())
        .expect("runs");
    assert_eq!(out.members, [Ok(3.0), Ok(3.0), Ok(15.0)]);
}

#[test]
fn a_host_primitive_of_an_embedded_program() {
    use autobatch::typed::{FromValue, IntoValue};
    let prog = autobatch::program! {
        extern "autobatch" { fn half(x: f64) -> f64; }
        fn quarter(x: f64) -> f64 { half(half(x)) }
    }
    .with_host("half", |args| {
        let x = f64::from_value(args[0].clone()).ok_or("not an f64")?;
        Ok((x / 2.0).into_value())
    })
    .expect("half is called");
    let out = prog
        .quarter(vec![8.0, 1.0])
        .run(&RunConfig::default())
        .expect("runs");
    assert_eq!(out.members, [Ok(2.0), Ok(0.25)]);
}

/// The compile errors of embedded programs: each `tests/ui/*.rs` must fail
/// to compile with the diagnostics of its `.stderr` file (rewrite them with
/// `AUTOBATCH_BLESS=1`).
///
/// Each case is checked by `rustc` against the `autobatch` library this
/// test was built with (`--emit=metadata`: no code is generated), so no
/// dependency is compiled again, as a harness that builds its own project
/// (trybuild) would, with its own flags.
#[test]
fn program_macro_errors() {
    let ui = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut cases: Vec<PathBuf> = fs::read_dir(&ui)
        .expect("tests/ui is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no case in {}", ui.display());
    let library = autobatch_library();
    let deps = library.parent().expect("the library's directory");
    let bless = std::env::var_os("AUTOBATCH_BLESS").is_some();
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let output = Command::new(std::env::var_os("RUSTC").unwrap_or("rustc".into()))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["--edition=2021", "--crate-type=bin", "--emit=metadata"])
            .args(["--color=never", "--diagnostic-width=140"])
            .arg("--out-dir")
            .arg(std::env::temp_dir())
            .arg(format!("--crate-name=ui_{}", name.trim_end_matches(".rs")))
            .arg("-L")
            .arg(format!("dependency={}", deps.display()))
            .arg("--extern")
            .arg(format!("autobatch={}", library.display()))
            .arg(format!("tests/ui/{name}"))
            .output()
            .expect("rustc runs");
        let got = diagnostics(&String::from_utf8_lossy(&output.stderr));
        let expected_path = case.with_extension("stderr");
        if bless {
            fs::write(&expected_path, &got).expect("the .stderr file is writable");
            continue;
        }
        let Ok(expected) = fs::read_to_string(&expected_path) else {
            failures.push(format!("{name}: no {}", expected_path.display()));
            continue;
        };
        if output.status.success() {
            failures.push(format!("{name} compiled; it must not"));
        } else if got.trim_end() != expected.trim_end() {
            failures.push(format!(
                "{name}: the diagnostics differ from {}.\n--- expected\n{expected}\n--- got\n{got}",
                expected_path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The `autobatch` library this test links (the newest `libautobatch-*.rlib`
/// beside the test's own binary: the one its last build wrote).
fn autobatch_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's directory");
    fs::read_dir(deps)
        .expect("the deps directory is readable")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("libautobatch-") && name.ends_with(".rlib")
        })
        .max_by_key(|path| fs::metadata(path).and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("no libautobatch-*.rlib in {}", deps.display()))
}

/// rustc's diagnostics without its closing summary (`aborting due to`, the
/// `--explain` hint), which says nothing of the case.
fn diagnostics(stderr: &str) -> String {
    let mut kept: Vec<&str> = stderr
        .lines()
        .take_while(|line| !line.starts_with("error: aborting due to"))
        .filter(|line| !line.starts_with("For more information about"))
        .collect();
    while kept.last().is_some_and(|line| line.trim().is_empty()) {
        kept.pop();
    }
    kept.join("\n") + "\n"
}
