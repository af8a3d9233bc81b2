//! The typed API with `ndarray` arrays (the `ndarray` feature): arrays of
//! any rank in, `ArrayD` out, and the same results as from plain slices.
#![cfg(feature = "ndarray")]

use autobatch::{compile, RunConfig};
use ndarray::{array, ArrayD, IxDyn};

const TRANSPOSE: &str = "fn t(m: [[f64; 3]; 2], k: f64) -> [[f64; 2]; 3] {
    let mut out = [[0.0; 2]; 3];
    for i in 0..2 { for j in 0..3 { out[j][i] = m[i][j] * k; } }
    out
}";

#[test]
fn matrices_in_and_out() {
    let program = compile(TRANSPOSE, "t.ab").expect("compiles");
    let a = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let b = array![[0.5, 0.0, -1.0], [2.0, 1.0, 0.0]];
    let out = program
        .call("t")
        .batched("m", [a.clone(), b.clone()])
        .shared("k", 2.0)
        .run::<ArrayD<f64>>(&RunConfig::default())
        .expect("runs");
    let expected_a = (a.t().to_owned() * 2.0).into_dyn();
    let expected_b = (b.t().to_owned() * 2.0).into_dyn();
    assert_eq!(out.members, [Ok(expected_a), Ok(expected_b)]);
    assert_eq!(out.members[0].as_ref().unwrap().shape(), &[3, 2]);
}

#[test]
fn a_wrong_shape_is_the_binders_error() {
    let program = compile(TRANSPOSE, "t.ab").expect("compiles");
    let wrong = ArrayD::<f64>::zeros(IxDyn(&[3, 2]));
    let error = program
        .call("t")
        .batched("m", [wrong])
        .shared("k", 1.0)
        .run::<ArrayD<f64>>(&RunConfig::default())
        .unwrap_err();
    assert!(
        error.to_string().contains("argument `m` of member 0"),
        "{error}"
    );
}
