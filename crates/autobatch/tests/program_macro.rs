//! `program!`: a program written in Rust code, checked when the Rust code
//! compiles, run through typed methods (its compile errors: `tests/ui/`,
//! run by `program_macro_errors`).

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

/// The compile errors of embedded programs, against `tests/ui/*.stderr`
/// (bless with `TRYBUILD=overwrite`).
#[test]
fn program_macro_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
