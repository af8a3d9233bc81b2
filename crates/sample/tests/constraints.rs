//! Constrained parameters (`fn model(#[lower = 0.0] tau: f64, ...)`): each
//! constraining transform the compiler generates, run as the sampler runs
//! it, against the closed form. Its log-Jacobian equals log |det J| of the
//! transform (J by central finite differences, from the unconstrained
//! values to the constrained parameter's free coordinates); it inverts
//! Stan's unconstraining transform (written here from its definition); its
//! value satisfies the constraint. Then the errors of wrong constraints,
//! located at them, and the named draws of a sampled model.

use autobatch::{Inputs, RunConfig};
use autobatch_sample::{Model, SampleConfig, SampleError};

/// A model of one parameter `x` with `attributes` of type `ty` (and
/// statics `a`, `lo`, `hi` for bounds of data, see [`data`]), lowered and compiled.
fn compile_parameter(attributes: &str, ty: &str) -> autobatch::Compiled {
    let source = format!(
        "extern \"autobatch\" {{ static a: [f64; 3]; static lo: [f64; 3]; static hi: [f64; 3]; }}\nfn model({attributes} x: {ty}) -> f64 {{ 0.0 }}\n"
    );
    let lowered = autobatch::parameters::lower_model(&source)
        .expect("the model lowers")
        .expect("a model with parameters");
    autobatch::compile(&lowered.source, "t.ab")
        .unwrap_or_else(|e| panic!("{}\n{}", lowered.source, e.render(false)))
}

/// The statics bounds may name: `lo` and `hi` have infinite elements.
fn data(inputs: Inputs) -> Inputs {
    inputs
        .shared("a", serde_json::json!([-1.5, 0.25, 4.0]))
        .shared("lo", serde_json::json!(["-inf", 0.5, "-inf"]))
        .shared("hi", serde_json::json!(["inf", "inf", 2.0]))
}

/// One parameter with `attributes` of type `ty`, lowered and compiled;
/// returns the generated transform at each point: (the constrained values
/// flattened, the log-Jacobian).
fn transform(attributes: &str, ty: &str, points: &[Vec<f64>]) -> Vec<(Vec<f64>, f64)> {
    let compiled = compile_parameter(attributes, ty);
    let inputs =
        data(Inputs::new()).batched("nuts_theta", points.iter().map(|p| serde_json::json!(p)));
    let result = compiled
        .bind("nuts_transform", &inputs)
        .expect("binds")
        .run(&RunConfig::default())
        .expect("runs");
    result
        .members
        .into_iter()
        .map(|m| {
            let tensors = m.expect("no error").flatten();
            let floats = |t: &autobatch::Tensor| match &t.data {
                autobatch_types::Data::F64(v) => v.clone(),
                other => panic!("not f64: {other:?}"),
            };
            let (lj, x) = tensors.split_last().expect("values");
            (x.iter().flat_map(floats).collect(), floats(lj)[0])
        })
        .collect()
}

/// The generated `nuts_unconstrain` (Stan's free transform) of the value
/// `x` (JSON, of the parameter's shape): the unconstrained values, or the
/// error's message.
fn unconstrain(
    attributes: &str,
    ty: &str,
    x: serde_json::Value,
    dim: usize,
) -> Result<Vec<f64>, String> {
    let compiled = compile_parameter(attributes, ty);
    let inputs = data(Inputs::new())
        .shared("x", x)
        .batched("nuts_theta", [serde_json::json!(vec![0.0; dim])]);
    let result = compiled
        .bind("nuts_unconstrain", &inputs)
        .expect("binds")
        .run(&RunConfig::default())
        .expect("runs");
    match result.members.into_iter().next().expect("one member") {
        Ok(value) => match &value.flatten()[0].data {
            autobatch_types::Data::F64(v) => Ok(v.clone()),
            other => panic!("not f64: {other:?}"),
        },
        Err(e) => Err(e.message),
    }
}

/// `x` (flattened) as JSON of `shape`.
fn shaped(x: &[f64], shape: &[usize]) -> serde_json::Value {
    match shape {
        [] => serde_json::json!(x[0]),
        [_] => serde_json::json!(x),
        [_, n] => serde_json::json!(x.chunks(*n).collect::<Vec<_>>()),
        _ => unreachable!(),
    }
}

/// Every constraint: the generated free transform inverts the generated
/// constraining transform (to rounding), and refuses a value outside the
/// constraint, naming the parameter.
#[test]
fn free_transforms_invert_the_constraining_transforms() {
    let cases: [(&str, &str, &[usize], usize); 14] = [
        ("#[corr_matrix]", "[[f64; 3]; 3]", &[3, 3], 3),
        ("#[cov_matrix]", "[[f64; 2]; 2]", &[2, 2], 3),
        ("", "[f64; 2]", &[2], 2),
        ("#[lower = -2.0]", "f64", &[], 1),
        ("#[upper = a]", "[f64; 3]", &[3], 3),
        (
            "#[lower = -1.0] #[upper = 3.0]",
            "[[f64; 2]; 2]",
            &[2, 2],
            4,
        ),
        ("#[offset = 1.0] #[multiplier = 3.0]", "[f64; 2]", &[2], 2),
        ("#[ordered]", "[f64; 4]", &[4], 4),
        ("#[positive_ordered]", "[f64; 4]", &[4], 4),
        ("#[simplex]", "[f64; 4]", &[4], 3),
        ("#[sum_to_zero]", "[f64; 4]", &[4], 3),
        ("#[unit_vector]", "[f64; 3]", &[3], 3),
        ("#[cholesky_factor_corr]", "[[f64; 3]; 3]", &[3, 3], 3),
        ("#[cholesky_factor_cov]", "[[f64; 2]; 3]", &[3, 2], 5),
    ];
    let values = [0.3, -0.8, 1.1, 0.2, -0.5];
    for (attributes, ty, shape, dim) in cases {
        let mut y = values[..dim].to_vec();
        if attributes == "#[unit_vector]" {
            // The free transform of a unit vector is itself.
            let norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
            y.iter_mut().for_each(|v| *v /= norm);
        }
        let (x, _) = transform(attributes, ty, std::slice::from_ref(&y)).remove(0);
        let back = unconstrain(attributes, ty, shaped(&x, shape), dim)
            .unwrap_or_else(|e| panic!("{attributes}: {e}"));
        for (b, want) in back.iter().zip(&y) {
            assert!(
                (b - want).abs() < 1e-12,
                "{attributes}: {back:?} against {y:?}"
            );
        }
    }
    for (attributes, ty, x, dim) in [
        ("#[lower = 0.0]", "f64", serde_json::json!(-1.0), 1),
        (
            "#[lower = 0.0] #[upper = 1.0]",
            "f64",
            serde_json::json!(1.0),
            1,
        ),
        (
            "#[ordered]",
            "[f64; 3]",
            serde_json::json!([1.0, 3.0, 2.0]),
            3,
        ),
        (
            "#[simplex]",
            "[f64; 3]",
            serde_json::json!([0.5, 0.4, 0.2]),
            2,
        ),
        (
            "#[sum_to_zero]",
            "[f64; 3]",
            serde_json::json!([0.5, 0.4, 0.2]),
            2,
        ),
        (
            "#[unit_vector]",
            "[f64; 2]",
            serde_json::json!([1.0, 1.0]),
            2,
        ),
    ] {
        let error = unconstrain(attributes, ty, x, dim).expect_err(attributes);
        assert!(
            error.contains("the initial value of `x`"),
            "{attributes}: {error}"
        );
    }
}

/// log |det| of a square matrix (rows), by Gaussian elimination with
/// partial pivoting.
fn log_abs_det(mut m: Vec<Vec<f64>>) -> f64 {
    let n = m.len();
    let mut total = 0.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| m[i][c].abs().total_cmp(&m[j][c].abs()))
            .expect("rows");
        m.swap(c, p);
        let pivot_row = m[c].clone();
        total += pivot_row[c].abs().ln();
        for row in m.iter_mut().skip(c + 1) {
            let f = row[c] / pivot_row[c];
            for (x, p) in row.iter_mut().zip(&pivot_row).skip(c) {
                *x -= f * p;
            }
        }
    }
    total
}

/// Checks the log-Jacobian at `y` against log |det| of the finite-difference
/// Jacobian of `free(constrain(y))`, `free` picking the constrained
/// parameter's free coordinates.
fn check_jacobian(
    attributes: &str,
    ty: &str,
    y: &[f64],
    free: &dyn Fn(&[f64]) -> Vec<f64>,
) -> Vec<f64> {
    let h = 1e-6;
    let mut points = vec![y.to_vec()];
    for i in 0..y.len() {
        for s in [1.0, -1.0] {
            let mut p = y.to_vec();
            p[i] += s * h;
            points.push(p);
        }
    }
    let out = transform(attributes, ty, &points);
    let (x, lj) = out[0].clone();
    let columns: Vec<Vec<f64>> = (0..y.len())
        .map(|i| {
            let plus = free(&out[1 + 2 * i].0);
            let minus = free(&out[2 + 2 * i].0);
            plus.iter()
                .zip(&minus)
                .map(|(a, b)| (a - b) / (2.0 * h))
                .collect()
        })
        .collect();
    assert_eq!(columns[0].len(), y.len(), "{attributes}: not square");
    let rows: Vec<Vec<f64>> = (0..y.len())
        .map(|r| columns.iter().map(|c| c[r]).collect())
        .collect();
    let want = log_abs_det(rows);
    assert!(
        (lj - want).abs() < 1e-6 * (1.0 + want.abs()),
        "{attributes} {ty} at {y:?}: log-Jacobian {lj}, finite differences {want}"
    );
    x
}

fn close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() < 1e-12 * (1.0 + y.abs()),
            "{what}: {a:?} against {b:?}"
        );
    }
}

fn all(x: &[f64]) -> Vec<f64> {
    x.to_vec()
}

fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

#[test]
fn scalar_and_vector_bounds() {
    // Lower: x = exp(y) + a, free y = ln(x - a).
    let y = [0.3];
    let x = check_jacobian("#[lower = -2.0]", "f64", &y, &all);
    close(&x, &[0.3_f64.exp() - 2.0], "lower");
    close(&[(x[0] + 2.0).ln()], &y, "lower round trip");
    // Upper: x = b - exp(y).
    let x = check_jacobian("#[upper = 1.5]", "f64", &[-0.7], &all);
    close(&x, &[1.5 - (-0.7_f64).exp()], "upper");
    close(&[(1.5 - x[0]).ln()], &[-0.7], "upper round trip");
    // Both: x = a + (b - a) inv_logit(y), free y = logit((x - a) / (b - a)).
    let y = [1.2, -0.4, 0.0];
    let x = check_jacobian("#[lower = -1.0] #[upper = 3.0]", "[f64; 3]", &y, &all);
    for (xi, yi) in x.iter().zip(y) {
        assert!(*xi > -1.0 && *xi < 3.0);
        close(
            &[logit((xi + 1.0) / 4.0)],
            &[yi],
            "lower and upper round trip",
        );
    }
    // Data-dependent bounds: each element by its own bound, a static.
    let x = check_jacobian("#[lower = a]", "[f64; 3]", &[0.1, 0.2, -0.3], &all);
    close(
        &x,
        &[
            0.1_f64.exp() - 1.5,
            0.2_f64.exp() + 0.25,
            (-0.3_f64).exp() + 4.0,
        ],
        "lower = a",
    );
    let x = check_jacobian("#[lower = a[0]] #[upper = 2.0 * a[2]]", "f64", &[0.6], &all);
    close(&[logit((x[0] + 1.5) / 9.5)], &[0.6], "bounds of data");
}

/// Matrices are read from the unconstrained vector row by row (a slice
/// per row: an array of row slices up to 64 rows, a loop over rows past
/// that), in row-major order: unconstrained as they are, and bounded below
/// elementwise (`x = exp(y)`, log-Jacobian `sum(y)`).
#[test]
fn matrices_are_read_row_by_row() {
    for rows in [3, 65] {
        let ty = format!("[[f64; 2]; {rows}]");
        let y: Vec<f64> = (0..2 * rows).map(|k| 0.01 * k as f64 - 0.4).collect();
        let (x, lj) = transform("", &ty, std::slice::from_ref(&y)).remove(0);
        close(&x, &y, "unconstrained matrix");
        assert_eq!(lj, 0.0);
        let (x, lj) = transform("#[lower = 0.0]", &ty, std::slice::from_ref(&y)).remove(0);
        let exp: Vec<f64> = y.iter().map(|v| v.exp()).collect();
        close(&x, &exp, "lower-bounded matrix");
        close(&[lj], &[y.iter().sum::<f64>()], "its log-Jacobian");
    }
}

/// A side bounded by its infinity is unbounded, as in Stan: written as a
/// number (`-f64::INFINITY`) the compiler leaves it out; given by data
/// (`lo`, `hi` with infinite elements) each element takes the transform of
/// the sides it has (identity, `exp(y) + lb`, `ub - exp(y)`, logistic),
/// its log-Jacobian that transform's, with no NaN.
#[test]
fn infinite_bounds_leave_their_side_unbounded() {
    for attributes in [
        "#[lower = -f64::INFINITY]",
        "#[upper = f64::INFINITY]",
        "#[lower = f64::NEG_INFINITY] #[upper = std::f64::INFINITY]",
        "#[lower = lo[0]]",
        "#[lower = lo[0]] #[upper = hi[0]]",
    ] {
        let (x, lj) = transform(attributes, "f64", &[vec![0.7]]).remove(0);
        assert_eq!((x[0], lj), (0.7, 0.0), "{attributes}: the identity");
        let back = unconstrain(attributes, "f64", serde_json::json!(-3.0), 1);
        assert_eq!(back, Ok(vec![-3.0]), "{attributes}");
    }
    for (attributes, want) in [
        (
            "#[lower = 1.0] #[upper = f64::INFINITY]",
            0.7_f64.exp() + 1.0,
        ),
        (
            "#[lower = -f64::INFINITY] #[upper = 2.0]",
            2.0 - 0.7_f64.exp(),
        ),
        ("#[lower = lo[1]] #[upper = hi[1]]", 0.7_f64.exp() + 0.5),
        ("#[upper = hi[2]]", 2.0 - 0.7_f64.exp()),
    ] {
        let x = check_jacobian(attributes, "f64", &[0.7], &all);
        close(&x, &[want], attributes);
    }
    // Each element by the sides its bounds have.
    let y = [0.3, -0.2, 0.9];
    let x = check_jacobian("#[lower = lo] #[upper = hi]", "[f64; 3]", &y, &all);
    let want = [0.3, (-0.2_f64).exp() + 0.5, 2.0 - 0.9_f64.exp()];
    close(&x, &want, "lower = lo, upper = hi");
    let (_, lj) = transform("#[lower = lo] #[upper = hi]", "[f64; 3]", &[y.to_vec()]).remove(0);
    close(&[lj], &[-0.2 + 0.9], "log-Jacobian of lo, hi");
    let back = unconstrain(
        "#[lower = lo] #[upper = hi]",
        "[f64; 3]",
        serde_json::json!(want),
        3,
    )
    .expect("inside the bounds");
    close(&back, &y, "free transform of lo, hi");
    // Mixed finite and infinite bounds of data and a finite number.
    let x = check_jacobian(
        "#[lower = lo[1]] #[upper = 3.0]",
        "[f64; 2]",
        &[0.4, -1.0],
        &all,
    );
    for (xi, yi) in x.iter().zip([0.4, -1.0]) {
        close(&[logit((xi - 0.5) / 2.5)], &[yi], "lo[1] to 3");
    }
    // A value outside its finite side is refused.
    let error = unconstrain(
        "#[lower = lo] #[upper = hi]",
        "[f64; 3]",
        serde_json::json!([0.0, 0.0, 0.0]),
        3,
    )
    .expect_err("below lo[1]");
    assert!(error.contains("the initial value of `x`"), "{error}");
}

/// A model whose bounds are data with infinite elements samples with
/// finite draws inside the finite sides.
#[test]
fn a_model_with_infinite_bounds_of_data_samples() {
    let source = "\
extern \"autobatch\" { static lo: [f64; 3]; static hi: [f64; 3]; }
fn model(#[lower = lo] #[upper = hi] x: [f64; 3]) -> f64 { normal_lupdf(x, 1.0, 1.0) }
";
    let data = r#"{"lo": ["-inf", 0.5, "-inf"], "hi": ["inf", "inf", 2.0]}"#;
    let model = Model::new(source, "m.ab", data).expect("compiles");
    let config = SampleConfig {
        chains: 2,
        warmup: 200,
        draws: 200,
        ..SampleConfig::default()
    };
    let run = model.sample(&config, &mut |_| {}).expect("samples");
    let mut sums = [0.0; 3];
    for k in 0..run.finished() {
        for d in 0..run.draws {
            let x = run.reported(k, d);
            assert!(x.iter().all(|v| v.is_finite()), "{x:?}");
            assert!(x[1] > 0.5 && x[2] < 2.0, "{x:?}");
            for (s, v) in sums.iter_mut().zip(x) {
                *s += v;
            }
        }
    }
    // The first element is unbounded: normal(1, 1), its mean within 0.3.
    let n = (run.finished() * run.draws) as f64;
    assert!(
        (sums[0] / n - 1.0).abs() < 0.3,
        "mean of x[0]: {}",
        sums[0] / n
    );
}

#[test]
fn offset_and_multiplier() {
    let y = [0.5, -1.25];
    let x = check_jacobian("#[offset = 1.0] #[multiplier = 3.0]", "[f64; 2]", &y, &all);
    close(&x, &[2.5, -2.75], "offset and multiplier");
    let x = check_jacobian("#[multiplier = a[2]]", "f64", &[0.5], &all);
    close(&x, &[2.0], "multiplier");
    let x = check_jacobian(
        "#[offset = -3.0]",
        "[[f64; 2]; 2]",
        &[1.0, 2.0, 3.0, 4.0],
        &all,
    );
    close(&x, &[-2.0, -1.0, 0.0, 1.0], "offset of a matrix");
}

#[test]
fn ordered_and_positive_ordered() {
    let y = [0.4, -1.0, 0.7, 0.2];
    let x = check_jacobian("#[ordered]", "[f64; 4]", &y, &all);
    assert!(x.windows(2).all(|w| w[0] < w[1]), "{x:?}");
    let mut free = vec![x[0]];
    free.extend(x.windows(2).map(|w| (w[1] - w[0]).ln()));
    close(&free, &y, "ordered round trip");

    let x = check_jacobian("#[positive_ordered]", "[f64; 4]", &y, &all);
    assert!(x[0] > 0.0 && x.windows(2).all(|w| w[0] < w[1]), "{x:?}");
    let mut free = vec![x[0].ln()];
    free.extend(x.windows(2).map(|w| (w[1] - w[0]).ln()));
    close(&free, &y, "positive_ordered round trip");
}

#[test]
fn simplex() {
    let y = [0.3, -0.8, 1.1];
    let first = |x: &[f64]| x[..x.len() - 1].to_vec();
    let x = check_jacobian("#[simplex]", "[f64; 4]", &y, &first);
    assert!(x.iter().all(|v| *v > 0.0), "{x:?}");
    assert!((x.iter().sum::<f64>() - 1.0).abs() < 1e-15, "{x:?}");
    // Stan's simplex_free: stick-breaking fractions, centred.
    let k = x.len();
    let mut stick = 1.0;
    let mut free = Vec::new();
    for (i, xi) in x[..k - 1].iter().enumerate() {
        free.push(logit(xi / stick) + ((k - 1 - i) as f64).ln());
        stick -= xi;
    }
    close(&free, &y, "simplex round trip");
    // y = 0 is the centre: every element 1/K.
    let centre = transform("#[simplex]", "[f64; 4]", &[vec![0.0; 3]]);
    close(&centre[0].0, &[0.25; 4], "simplex centre");
}

#[test]
fn sum_to_zero() {
    let y = [0.3, -0.8, 1.1];
    let out = transform("#[sum_to_zero]", "[f64; 4]", &[y.to_vec()]);
    let (x, lj) = &out[0];
    assert!(x.iter().sum::<f64>().abs() < 1e-14, "{x:?}");
    assert_eq!(*lj, 0.0);
    // The map is linear and isometric: the unconstrained values' norm is
    // the vector's, and each unit vector maps to an orthonormal column.
    let norm2 = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>();
    assert!((norm2(x) - norm2(&y)).abs() < 1e-12);
    let basis: Vec<Vec<f64>> = (0..3)
        .map(|i| (0..3).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    let columns = transform("#[sum_to_zero]", "[f64; 4]", &basis);
    // Stan's pivot coordinates: e_N maps to (1, ..., 1, -N) / sqrt(N (N + 1)).
    let n = 3.0_f64;
    let mut last = vec![1.0 / (n * (n + 1.0)).sqrt(); 4];
    last[3] = -n / (n * (n + 1.0)).sqrt();
    close(&columns[2].0, &last, "the last pivot coordinate");
    for a in &columns {
        for b in &columns {
            let d: f64 = a.0.iter().zip(&b.0).map(|(p, q)| p * q).sum();
            let want = if std::ptr::eq(a, b) { 1.0 } else { 0.0 };
            assert!((d - want).abs() < 1e-14, "not orthonormal: {d}");
        }
    }
}

#[test]
fn unit_vector() {
    let y = [0.3, -0.8, 1.1];
    let out = transform("#[unit_vector]", "[f64; 3]", &[y.to_vec()]);
    let (x, lj) = &out[0];
    let r2: f64 = y.iter().map(|a| a * a).sum();
    close(x, &y.map(|a| a / r2.sqrt()), "unit vector");
    close(&[*lj], &[-0.5 * r2], "unit vector's term");
}

#[test]
fn cholesky_factors() {
    // A correlation matrix's factor: lower triangular, rows of unit norm;
    // free coordinates the strictly lower triangle.
    let y = [0.3, -0.8, 1.1, 0.2, -0.5, 0.9];
    let strictly_lower = |x: &[f64]| {
        let mut v = Vec::new();
        for i in 0..4 {
            for j in 0..i {
                v.push(x[i * 4 + j]);
            }
        }
        v
    };
    let x = check_jacobian(
        "#[cholesky_factor_corr]",
        "[[f64; 4]; 4]",
        &y,
        &strictly_lower,
    );
    for i in 0..4 {
        let row = &x[i * 4..i * 4 + 4];
        assert!(
            row[i + 1..].iter().all(|v| *v == 0.0) && row[i] > 0.0,
            "{x:?}"
        );
        let norm: f64 = row.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-14, "row {i}: {norm}");
    }
    // A correlation matrix: symmetric, unit diagonal, positive definite;
    // free coordinates the strictly lower triangle.
    let x = check_jacobian("#[corr_matrix]", "[[f64; 4]; 4]", &y, &strictly_lower);
    for i in 0..4 {
        assert!((x[i * 4 + i] - 1.0).abs() < 1e-14, "{x:?}");
        for j in 0..4 {
            assert!((x[i * 4 + j] - x[j * 4 + i]).abs() < 1e-15, "{x:?}");
        }
    }
    // A covariance matrix, 3 by 3: symmetric; free coordinates the lower
    // triangle with the diagonal.
    let lower3 = |x: &[f64]| vec![x[0], x[3], x[4], x[6], x[7], x[8]];
    let x = check_jacobian("#[cov_matrix]", "[[f64; 3]; 3]", &y, &lower3);
    for i in 0..3 {
        for j in 0..3 {
            assert!((x[i * 3 + j] - x[j * 3 + i]).abs() < 1e-15, "{x:?}");
        }
    }
    // Its Cholesky factor is the lower triangle of the unconstrained
    // values, the diagonal exponentiated: x[0] = exp(2 y[0]).
    close(&x[..1], &[(2.0 * 0.3_f64).exp()], "cov_matrix");
    // A covariance matrix's factor, 3 by 2: the lower triangle, a positive
    // diagonal, the last row free.
    let y = [0.3, -0.8, 1.1, 0.2, -0.5];
    let lower = |x: &[f64]| vec![x[0], x[2], x[3], x[4], x[5]];
    let x = check_jacobian("#[cholesky_factor_cov]", "[[f64; 2]; 3]", &y, &lower);
    close(
        &x,
        &[0.3_f64.exp(), 0.0, -0.8, 1.1_f64.exp(), 0.2, -0.5],
        "cholesky_factor_cov",
    );
}

fn compile_error(source: &str) -> String {
    match Model::new(source, "m.ab", r#"{"y": [1.0, 2.0]}"#) {
        Err(SampleError::Compile(text)) => text,
        Err(other) => panic!("not a compile error: {other}"),
        Ok(_) => panic!("compiled:\n{source}"),
    }
}

/// A bound of the wrong type is found when the generated code is checked:
/// the error says it comes from the constraints.
#[test]
fn a_bound_of_the_wrong_type_is_named() {
    let text = compile_error(
        "extern \"autobatch\" { static y: [f64; N]; }\nfn model(#[lower = y] s: [f64; 3]) -> f64 { 0.0 }\n",
    );
    assert!(
        text.contains("generated from the constraints of `fn model`'s parameters"),
        "{text}"
    );
}

#[test]
fn wrong_constraints_are_errors_located_at_them() {
    let data = "extern \"autobatch\" { static y: [f64; N]; }\n";
    for (params, wanted, at) in [
        (
            "#[lower = \"a\"] s: f64",
            "a bound must be a number",
            "m.ab:2:20",
        ),
        (
            "#[lowr = 0.0] s: f64",
            "unknown constraint `lowr`",
            "m.ab:2:10",
        ),
        ("#[simplex] s: f64", "`simplex` needs a vector", "m.ab:2:24"),
        (
            "#[lower = z] s: f64",
            "neither a `const` nor a static",
            "m.ab:2:20",
        ),
        (
            "#[lower = 0.0] #[simplex] s: [f64; 3]",
            "cannot be combined",
            "m.ab:2:25",
        ),
        (
            "#[lower = 0.0] #[lower = 1.0] s: f64",
            "given twice",
            "m.ab:2:25",
        ),
        (
            "#[cholesky_factor_corr] s: [[f64; 2]; 3]",
            "square",
            "m.ab:2:37",
        ),
        ("#[upper] s: f64", "needs a value", "m.ab:2:10"),
        (
            "#[lower = f64::INFINITY] s: f64",
            "`lower` is inf, which leaves no value",
            "m.ab:2:20",
        ),
        (
            "#[upper = -f64::INFINITY] s: f64",
            "`upper` is -inf, which leaves no value",
            "m.ab:2:20",
        ),
        ("#[cov_matrix] s: [f64; 2]", "needs a matrix", "m.ab:2:27"),
        ("s: [i64; 2]", "an array of them", "m.ab:2:14"),
    ] {
        let source = format!("{data}fn model({params}) -> f64 {{ 0.0 }}\n");
        let text = compile_error(&source);
        assert!(text.contains(wanted), "{params}: {text}");
        assert!(text.contains(at), "{params}: not at {at}: {text}");
        assert!(!text.contains("nuts_"), "{params}: {text}");
    }
}

/// A model of bounded, simplex and plain parameters: the draws come back
/// named, shaped and on the constrained scale, each the transform of the
/// unconstrained draw the sampler moved.
#[test]
fn draws_are_named_and_constrained() {
    let source = "\
extern \"autobatch\" { static y: [f64; N]; }
fn model(#[lower = 0.0] sigma: f64, #[simplex] w: [f64; 3], mu: [f64; 2]) -> f64 {
    let r = (y - mu[0]) / sigma;
    -0.5 * dot(r, r) - (N as f64) * sigma.ln() - sigma - 0.5 * dot(mu, mu)
        + w[0].ln() + w[1].ln() + w[2].ln()
}
";
    let model = Model::new(source, "m.ab", r#"{"y": [0.5, 1.5, 1.0, 2.0]}"#).expect("compiles");
    assert_eq!(model.dim(), 1 + 2 + 2);
    let config = SampleConfig {
        chains: 2,
        warmup: 100,
        draws: 50,
        ..SampleConfig::default()
    };
    let run = model.sample(&config, &mut |_| {}).expect("samples");
    assert_eq!(
        run.columns,
        ["sigma", "w.0", "w.1", "w.2", "mu.0", "mu.1"].map(String::from)
    );
    let shapes: Vec<(String, Vec<usize>)> = run
        .variables
        .iter()
        .map(|v| (v.name.clone(), v.shape.clone()))
        .collect();
    assert_eq!(
        shapes,
        vec![
            ("sigma".to_string(), vec![]),
            ("w".to_string(), vec![3]),
            ("mu".to_string(), vec![2])
        ]
    );
    for k in 0..run.finished() {
        for d in 0..run.draws {
            let theta = run.draw(k, d);
            let x = run.reported(k, d);
            close(&x[..1], &[theta[0].exp()], "sigma");
            let z0 = 1.0 / (1.0 + (-(theta[1] - 2.0_f64.ln())).exp());
            close(&x[1..2], &[z0], "w[0]");
            assert!((x[1] + x[2] + x[3] - 1.0).abs() < 1e-15);
            close(&x[4..6], &theta[3..5], "mu");
        }
    }
    let table = autobatch_sample::report::table(&run);
    assert!(table.contains("w.2") && table.contains("sigma"), "{table}");
    let mut csv = Vec::new();
    autobatch_sample::report::write_csv(&run, &mut csv).expect("writes");
    let csv = String::from_utf8(csv).expect("text");
    assert!(
        csv.starts_with("chain,draw,sigma,w.0,w.1,w.2,mu.0,mu.1,lp__,"),
        "{}",
        csv.lines().next().unwrap_or("")
    );
}

/// Initial values given by name on the constrained scale: the point the
/// chains start from, and the errors of values that do not fit.
#[test]
fn initial_values_by_name() {
    let source = "\
extern \"autobatch\" { static y: [f64; N]; }
fn model(mu: f64, #[lower = 0.0] sigma: f64, #[simplex] w: [f64; 2]) -> f64 {
    let r = (y - mu) / sigma;
    -0.5 * dot(r, r) - (N as f64) * sigma.ln() - sigma + w[0].ln() + w[1].ln()
}
";
    let model = Model::new(source, "m.ab", r#"{"y": [0.5, 1.5, 1.0]}"#).expect("compiles");
    let point = model
        .initial_point(r#"{"mu": 1.0, "sigma": 2.0, "w": [0.25, 0.75]}"#)
        .expect("fits");
    close(&point, &[1.0, 2.0_f64.ln(), logit(0.25)], "initial point");
    for (init, wanted) in [
        (r#"{"mu": 1.0, "sigma": 2.0}"#, "have no `w`"),
        (
            r#"{"mu": 1.0, "sigma": -2.0, "w": [0.5, 0.5]}"#,
            "the initial value of `sigma`",
        ),
        (
            r#"{"mu": 1.0, "sigma": 2.0, "w": [0.5, 0.6]}"#,
            "`w` is not a simplex",
        ),
        (
            r#"{"mu": 1.0, "sigma": 2.0, "w": [0.5, 0.5], "nu": 1}"#,
            "`nu`, which is not a parameter",
        ),
        (
            r#"{"mu": [1.0], "sigma": 2.0, "w": [0.5, 0.5]}"#,
            "do not fit",
        ),
    ] {
        let error = model.initial_point(init).expect_err(init);
        assert!(matches!(error, SampleError::Data(_)), "{error:?}");
        assert!(error.to_string().contains(wanted), "{init}: {error}");
    }
    // Started far out (mu = 100, the posterior's mean near 1), with no
    // warmup, every chain's first draws are still near there (a few
    // leapfrog steps of a step size fitted to that point); every strategy
    // gives the same draws.
    let far = model
        .initial_point(r#"{"mu": 100.0, "sigma": 2.0, "w": [0.25, 0.75]}"#)
        .expect("fits");
    let config = |strategy| SampleConfig {
        chains: 2,
        warmup: 0,
        draws: 3,
        init: Some(far.clone()),
        run: RunConfig {
            strategy,
            ..SampleConfig::default().run
        },
        ..SampleConfig::default()
    };
    let a = model
        .sample(&config(autobatch::Strategy::Native), &mut |_| {})
        .expect("samples");
    let b = model
        .sample(&config(autobatch::Strategy::ProgramCounter), &mut |_| {})
        .expect("samples");
    assert_eq!(a.samples, b.samples);
    for k in 0..2 {
        assert!(
            a.reported(k, 0)[0] > 50.0,
            "chain {k}: {:?}",
            a.reported(k, 0)
        );
    }
    // A point where the density is not finite stops every chain, naming why.
    let bad = model
        .initial_point(r#"{"mu": 1e308, "sigma": 1e-300, "w": [0.5, 0.5]}"#)
        .expect("fits the constraints");
    let error = model
        .sample(
            &SampleConfig {
                chains: 1,
                warmup: 0,
                draws: 1,
                init: Some(bad),
                ..SampleConfig::default()
            },
            &mut |_| {},
        )
        .expect_err("not finite");
    assert!(
        error
            .to_string()
            .contains("not finite at the given initial values"),
        "{error}"
    );
}

/// A bound of an earlier parameter, as Stan allows (`real<upper=1 - a1> b`):
/// `b = (1 - a1) inv_logit(y_b)` with log-Jacobian
/// `ln(1 - a1) + ln inv_logit(y_b) + ln(1 - inv_logit(y_b))`, added to
/// that of `a1`; a bound of a later parameter is an error located at it.
#[test]
fn a_bound_of_an_earlier_parameter() {
    let source = "fn model(#[lower = 0.0] #[upper = 1.0] a1: f64, #[lower = 0.0] #[upper = 1.0 - a1] b: f64) -> f64 { 0.0 }\n";
    let lowered = autobatch::parameters::lower_model(source)
        .expect("the model lowers")
        .expect("a model with parameters");
    let compiled = autobatch::compile(&lowered.source, "t.ab")
        .unwrap_or_else(|e| panic!("{}\n{}", lowered.source, e.render(false)));
    let (ya, yb) = (0.4_f64, -1.3_f64);
    let inputs = Inputs::new().batched("nuts_theta", [serde_json::json!([ya, yb])]);
    let result = compiled
        .bind("nuts_transform", &inputs)
        .expect("binds")
        .run(&RunConfig::default())
        .expect("runs");
    let tensors = result.members[0].clone().expect("no error").flatten();
    let floats: Vec<f64> = tensors
        .iter()
        .map(|t| match &t.data {
            autobatch_types::Data::F64(v) => v[0],
            other => panic!("not f64: {other:?}"),
        })
        .collect();
    let inv_logit = |y: f64| 1.0 / (1.0 + (-y).exp());
    let a1 = inv_logit(ya);
    let b = (1.0 - a1) * inv_logit(yb);
    let lj = |y: f64, width: f64| width.ln() + inv_logit(y).ln() + (1.0 - inv_logit(y)).ln();
    close(
        &floats,
        &[a1, b, lj(ya, 1.0) + lj(yb, 1.0 - a1)],
        "a bound of a1",
    );
    let text = compile_error(
        "extern \"autobatch\" { static y: [f64; N]; }\nfn model(#[upper = c] b: f64, c: f64) -> f64 { 0.0 }\n",
    );
    assert!(
        text.contains("nor a parameter declared before this one"),
        "{text}"
    );
    assert!(text.contains("m.ab:2:20"), "{text}");
}
