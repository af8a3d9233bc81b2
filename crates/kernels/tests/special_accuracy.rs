//! The special functions against mpmath at 50 digits (`tests/data/special.json`,
//! written by `tools/special_reference.py`): the relative error of every
//! `f64` value, tails and the neighbourhoods of roots included, and the
//! `f32` forms within an `f32` rounding of the same values.

use autobatch_kernels::special;
use serde_json::Value;

type Function = (&'static str, fn(f64) -> f64, fn(f32) -> f32, f64);

/// Each function, its `f32` form, and the largest relative error allowed.
const FUNCTIONS: [Function; 7] = [
    ("lgamma", special::lgamma_f64, special::lgamma_f32, 1e-14),
    ("digamma", special::digamma_f64, special::digamma_f32, 1e-14),
    (
        "trigamma",
        special::trigamma_f64,
        special::trigamma_f32,
        1e-14,
    ),
    ("erf", special::erf_f64, special::erf_f32, 1e-15),
    ("erfc", special::erfc_f64, special::erfc_f32, 1e-14),
    ("Phi", special::phi_f64, special::phi_f32, 1e-14),
    ("inv_Phi", special::inv_phi_f64, special::inv_phi_f32, 1e-14),
];

fn reference() -> Value {
    let text = include_str!("data/special.json");
    serde_json::from_str(text).expect("tests/data/special.json is JSON")
}

fn points(data: &Value, name: &str) -> Vec<(f64, f64)> {
    data[name]
        .as_array()
        .unwrap_or_else(|| panic!("no points for {name}"))
        .iter()
        .map(|p| (number(&p[0]), number(&p[1])))
        .collect()
}

/// A number written as a string (Rust's parser rounds it exactly).
fn number(v: &Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

fn relative_error(got: f64, want: f64) -> f64 {
    if got == want {
        0.0
    } else {
        ((got - want) / want).abs()
    }
}

#[test]
fn f64_values_match_mpmath() {
    let data = reference();
    let mut failures = Vec::new();
    for (name, f, _, tolerance) in FUNCTIONS {
        let points = points(&data, name);
        assert!(points.len() >= 100, "{name}: only {} points", points.len());
        let mut worst = (0.0, 0.0);
        for (x, want) in points {
            let error = relative_error(f(x), want);
            if error > worst.0 || error.is_nan() {
                worst = (error, x);
            }
            if error.is_nan() || error > tolerance {
                failures.push(format!(
                    "{name}({x:e}) = {:e}, mpmath {want:e}, relative error {error:e}",
                    f(x)
                ));
            }
        }
        eprintln!(
            "{name}: worst relative error {:e} at {:e}",
            worst.0, worst.1
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn f32_values_are_the_f64_values_rounded() {
    let data = reference();
    for (name, _, f, _) in FUNCTIONS {
        for (x, want) in points(&data, name) {
            let x32 = x as f32;
            if x32 as f64 != x || !x32.is_normal() {
                continue;
            }
            let want = want as f32;
            let got = f(x32);
            let ulps = (got.to_bits() as i64 - want.to_bits() as i64).abs();
            assert!(
                got == want || ulps <= 1,
                "{name}({x32:e}) as f32 = {got:e}, want {want:e}"
            );
        }
    }
}

#[test]
fn edge_values() {
    let inf = f64::INFINITY;
    assert_eq!(special::lgamma_f64(0.0), inf);
    assert_eq!(special::lgamma_f64(-3.0), inf);
    assert_eq!(special::lgamma_f64(-inf), inf);
    assert_eq!(special::lgamma_f64(1.0), 0.0);
    assert_eq!(special::lgamma_f64(2.0), 0.0);
    assert!(special::digamma_f64(0.0).is_nan());
    assert!(special::digamma_f64(-2.0).is_nan());
    assert_eq!(special::digamma_f64(inf), inf);
    assert_eq!(special::trigamma_f64(-1.0), inf);
    assert_eq!(special::trigamma_f64(inf), 0.0);
    assert_eq!(special::erf_f64(inf), 1.0);
    assert_eq!(special::erf_f64(-inf), -1.0);
    assert_eq!(special::erfc_f64(inf), 0.0);
    assert_eq!(special::erfc_f64(-inf), 2.0);
    assert_eq!(special::phi_f64(-inf), 0.0);
    assert_eq!(special::phi_f64(inf), 1.0);
    assert_eq!(special::inv_phi_f64(0.0), -inf);
    assert_eq!(special::inv_phi_f64(1.0), inf);
    assert_eq!(special::inv_phi_f64(0.5), 0.0);
    for bad in [-0.1, 1.1, f64::NAN] {
        assert!(special::inv_phi_f64(bad).is_nan());
    }
    for f in FUNCTIONS {
        assert!((f.1)(f64::NAN).is_nan(), "{}", f.0);
    }
}

/// The rows of a table of `tests/data/beta_inc.json`.
fn beta_inc_table(name: &str) -> Vec<Vec<f64>> {
    let text = include_str!("data/beta_inc.json");
    let data: Value = serde_json::from_str(text).expect("tests/data/beta_inc.json is JSON");
    data[name]
        .as_array()
        .unwrap_or_else(|| panic!("no rows for {name}"))
        .iter()
        .map(|row| row.as_array().expect("a row").iter().map(number).collect())
        .collect()
}

/// The error of `got` against `want`, relative to `max(|want|, scale)`.
fn error_against(got: f64, want: f64, scale: f64) -> f64 {
    if got == want {
        0.0
    } else {
        ((got - want) / want.abs().max(scale)).abs()
    }
}

#[test]
fn lbeta_matches_mpmath() {
    let rows = beta_inc_table("lbeta");
    assert!(rows.len() >= 150, "only {} points", rows.len());
    let mut failures = Vec::new();
    for row in rows {
        let (a, b, want) = (row[0], row[1], row[2]);
        let got = special::lbeta_f64(a, b);
        // Relative, or absolute where ln B is near 0 (the terms cancel there).
        let error = error_against(got, want, 1.0);
        if error.is_nan() || error > 1e-14 {
            failures.push(format!("lbeta({a:e}, {b:e}) = {got:e}, mpmath {want:e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The largest relative errors the incomplete beta kernels keep to: `ln I`
/// and `ln(1 - I)` relative to `max(|value|, 1e-300)`, their derivatives
/// relative to `max(|d|, 1)` (they pass through 0 as a shape varies). The
/// values' prefactor `a ln x + b ln(1 - x) - ln B(a, b)` is taken in
/// logarithms: its terms (up to about `a + b` and `|ln x|`) cancel, and a
/// tail's `ln(1 - e^l)` carries the absolute error of `l`, so the values
/// keep to 1e-12, and that bound grows by `1e-15 (a + b)`.
const BETA_INC_TOLERANCES: [(f64, f64); 3] = [(1e-300, 1e-12), (1.0, 1e-12), (1.0, 1e-12)];

#[test]
fn log_beta_inc_and_its_derivatives_match_mpmath() {
    type Kernel = fn(f64, f64, f64) -> f64;
    let kernels: [(&str, Kernel); 6] = [
        ("ln I", special::log_beta_inc_f64),
        ("d ln I/da", special::log_beta_inc_da_f64),
        ("d ln I/db", special::log_beta_inc_db_f64),
        ("ln(1 - I)", special::log_beta_inc_c_f64),
        ("d ln(1 - I)/da", special::log_beta_inc_c_da_f64),
        ("d ln(1 - I)/db", special::log_beta_inc_c_db_f64),
    ];
    let rows = beta_inc_table("log_beta_inc");
    assert!(rows.len() >= 500, "only {} points", rows.len());
    let mut failures = Vec::new();
    let mut worst = [0.0f64; 6];
    for row in rows {
        let (a, b, x) = (row[0], row[1], row[2]);
        for (k, (name, kernel)) in kernels.iter().enumerate() {
            let (scale, mut tolerance) = BETA_INC_TOLERANCES[k % 3];
            if k % 3 == 0 {
                tolerance += 1e-15 * (a + b);
            }
            let (got, want) = (kernel(a, b, x), row[3 + k]);
            if !want.is_finite() || want != 0.0 && want.abs() < 2.3e-308 {
                continue; // beyond f64: nothing to compare
            }
            let error = error_against(got, want, scale);
            worst[k] = worst[k].max(error);
            if error.is_nan() || error > tolerance {
                failures.push(format!(
                    "{name}: a {a:e}, b {b:e}, x {x:e}: {got:e}, mpmath {want:e}"
                ));
            }
        }
    }
    eprintln!("incomplete beta: worst errors {worst:?}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
