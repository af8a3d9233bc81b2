//! `grad` and `value_and_grad` through the real pipeline (compile, bind,
//! run on every strategy and lanes mode), against central finite
//! differences of the same function (one table row per supported
//! operation) and against hand-written gradients.

// Only `configurations` is used here; the rest serves `programs.rs`.
#[allow(dead_code)]
mod harness;

use autobatch::{compile, Compiled, Inputs, RunConfig, Strategy};
use harness::{configurations, numbers, ok_values, run_config};
use serde_json::{json, Value};

/// Statics and helpers every case may use.
const PRELUDE: &str = r#"
extern "autobatch" {
    static M: [[f64; 3]; 3];
    static V: [f64; 3];
    static IDX: [usize; 3];
    static M32: [[f32; 3]; 3];
}
fn helper(a: f64, b: f64) -> f64 { a * b.sin() }
fn pair(v: [f64; 3]) -> (f64, [f64; 3]) { (sum(v), v * 2.0) }
fn norm2<const K: usize>(v: [f64; K]) -> f64 { dot(v, v) }
fn branchy(a: f64, n: i64) -> f64 {
    let mut r = a;
    for k in 0..n {
        if r > 1.0 { r = r.sqrt(); } else { r = r * 1.5 + 0.1; }
    }
    r
}
fn rec_poly(a: f64, k: i64) -> f64 {
    if k <= 0 { a } else { a * rec_poly(a, k - 1) + (k as f64) * a.sin() }
}
fn settle(a: f64, n: usize) -> f64 {
    let mut r = a;
    let mut i = 0;
    while i < n && V[i % 3] * (i as f64) > -2.0 { r = (r * 0.9 + V[i % 3]).tanh(); i += 1; }
    r
}
fn tree_sum(v: [f64; 3], i: usize) -> f64 {
    if i >= 3 { 0.0 } else { v[i].tanh() + 0.5 * tree_sum(v, 2 * i + 1) + 0.25 * tree_sum(v, 2 * i + 2) }
}
fn ping(a: f64, n: i64) -> f64 { if n == 0 { a } else { pong(a * a, n - 1) + a } }
fn pong(a: f64, n: i64) -> f64 { ping(a.sin(), n) * 0.5 }
"#;

const SHARED: &str = r#"{
    "M": [[0.5, -0.3, 0.8], [0.1, 0.9, -0.4], [-0.6, 0.2, 0.3]],
    "V": [0.7, -1.2, 0.4],
    "IDX": [2, 0, 1],
    "M32": [[0.5, -0.3, 0.8], [0.1, 0.9, -0.4], [-0.6, 0.2, 0.3]]
}"#;

/// The shape of the differentiated parameter.
#[derive(Clone, Copy)]
enum Shape {
    Scalar,
    Vector,
    Matrix,
}

struct Case {
    ty: &'static str,
    shape: Shape,
    /// Only positive points (for `ln`, `sqrt`, `powf`...).
    positive: bool,
    body: &'static str,
}

const fn case(ty: &'static str, shape: Shape, positive: bool, body: &'static str) -> Case {
    Case {
        ty,
        shape,
        positive,
        body,
    }
}

use Shape::{Matrix, Scalar, Vector};

const CASES: &[Case] = &[
    // f64 scalars: arithmetic and every float builtin.
    case("f64", Scalar, false, "x * x * 3.0 - x / 2.0 + 1.0 - (-x)"),
    case("f64", Scalar, false, "2.0 / x + x / (x * x + 1.0)"),
    case("f64", Scalar, false, "x.exp() * x.sin() + x.cos() - x.tan()"),
    case("f64", Scalar, false, "x.exp_m1() + x.tanh() + x.recip() + x.abs()"),
    case("f64", Scalar, true, "x.ln() + x.ln_1p() + x.log10() + x.sqrt()"),
    case("f64", Scalar, true, "x.powi(3) + x.powf(1.7) + (2.5f64).powf(x) + x.powf(x)"),
    case("f64", Scalar, false, "x.max(0.5) + x.min(0.2) + (2.0 * x).max(x) + x.min(x * x)"),
    case("f64", Scalar, false, "x.floor() + x.ceil() * x + x.round() + x.signum() * x"),
    case("f64", Scalar, false, "sigmoid(x) + log_sigmoid(x) + softplus(x) * x"),
    case("f64", Scalar, false, "x % 0.7 + 1.3 % x"),
    case("f64", Scalar, false, "(x * 3.0) as i64 as f64 + x * ((x * 3.0) as i64 as f64)"),
    case("f64", Scalar, false, "((x as f32) * 2.0f32) as f64 * 0.0 + (x * x) as f64"),
    case("f64", Scalar, false, "select(x > 0.0, x * x, -x * 3.0) + select(x < 1.0, 2.0, x)"),
    case("f64", Scalar, false, "if x > 0.0 { x.exp() } else if x > -0.5 { x * x } else { -x }"),
    case("f64", Scalar, false, "let mut a = x; for i in 0..4 { a = a * x + (i as f64); } a"),
    case("f64", Scalar, false, "helper(x, x * 2.0) + helper(1.5, x) + helper(x, 0.3)"),
    case("f64", Scalar, false, "let (s, w) = pair([x, 2.0 * x, 3.0]); s * w[1]"),
    case("f64", Scalar, true, "branchy(x, 3) + branchy(x * x, IDX[0] as i64)"),
    case("f64", Scalar, false, "let t = (x, 2.0 * x); let mut u = t; u.1 = u.0 * u.1; u.1 + t.0"),
    case("f64", Scalar, false, "let mut s = 0.0; let k = IDX[0] + 1; for i in 0..k { s += x * (i as f64); } s"),
    // Recursion, `while`, `loop` with `break` (control on data only).
    case("f64", Scalar, false, "rec_poly(x, 3) + rec_poly(x * 0.5, IDX[0] as i64) + ping(x, 3)"),
    case("f64", Scalar, false, "settle(x, 5) + settle(x * x, IDX[1])"),
    // Counted loops too long to unroll: differentiated over a tape.
    case("f64", Scalar, false, "let mut a = x; for i in 0..30 { a = (a * 0.9 + x * (i as f64) * 0.01).sin(); } a * x"),
    case("f64", Scalar, false, "let mut a = x; for _i in 0..18 { a = helper(a, x) * 0.5 + 0.1; } a"),
    case("f64", Scalar, false, "let mut s = 0.0; for i in 0..20 { let mut a = x; for j in 0..20 { a = (a * 0.95 + 0.01 * (j as f64)).tanh(); } s += a * (i as f64); } s"),
    case("f64", Scalar, false, "let mut a = x; let mut i = 0; let r = loop { a = (a + V[i]).sin(); i += 1; if i == 3 || V[i] > 0.3 { break a * a; } }; r + a"),
    // f64 vectors.
    case("[f64; 3]", Vector, false, "dot(x, x) + sum(x * V) + mean(x.exp())"),
    case("[f64; 3]", Vector, false, "logsumexp(x) + softmax(x)[1] * 3.0 + dot(softmax(x), V)"),
    case("[f64; 3]", Vector, false, "sum(matvec(M, x).tanh()) + dot(vecmat(x, M), x)"),
    case("[f64; 3]", Vector, false, "max(x * V) + min(x) + sum(x.max(V)) + sum(V.min(x))"),
    case("[f64; 3]", Vector, false, "x[IDX[0]] * x[(IDX[1] + 1) % 3] + x[2] * x[argmax(x)]"),
    case("[f64; 3]", Vector, false, "let mut y = x; y[1] = x[0] * x[2]; y[0] = 2.0; y[2] += y[1]; sum(y * y)"),
    case("[f64; 3]", Vector, false, "let a = [x[0], x[1] * 2.0, 3.0]; let b = [x[2]; 3]; dot(a, b)"),
    case("[f64; 3]", Vector, false, "sum(x * 2.0 + 1.0) + sum(3.0 / (x * x + 1.0)) + sum(x - x[0]) + sum(x[1] * x)"),
    case("[f64; 3]", Vector, false, "norm2(x) + norm2::<3>(x * 2.0)"),
    case("[f64; 3]", Vector, false, "let mut acc = 0.0; for i in 0..3 { if x[i] > 0.0 { acc += x[i].exp(); } else { acc -= x[i] * x[i]; } } acc"),
    case("[f64; 3]", Vector, false, "sum(sigmoid(x) + log_sigmoid(x) * softplus(x)) + sum(x.powi(2)) + sum(x.sin().abs())"),
    case("[f64; 3]", Vector, false, "let o = outer(x, V); sum(matvec(transpose(o), x)) + sum(matvec(o, V)) + sum(vecmat(V, outer(x, x)))"),
    case("[f64; 3]", Vector, false, "let mut h = x; for i in 0..5 { h = matvec(M, h).tanh() + V * (i as f64); } sum(h)"),
    case("[f64; 3]", Vector, false, "let mut m = [x; 3]; m[1] = x * x; m[2][IDX[2]] = x[0] * 3.0; sum(matvec(m, V)) + sum(m[2])"),
    case("[f64; 3]", Vector, false, "select(x[0] > x[1], sum(x), dot(x, V)) + sum(select(x[2] > 0.0, x, V))"),
    case("[f64; 3]", Vector, false, "let mut h = x; let mut k = 0; while k < 20 { h = matvec(M, h).tanh() * 0.5 + x; h[k % 3] = h[k % 3] * x[0]; k += 1; } sum(h * h)"),
    case("[f64; 3]", Vector, false, "tree_sum(x, 0) + tree_sum(x * x, 1) + settle(x[IDX[0]], 4)"),
    // f64 matrices (rank 2).
    case("[[f64; 3]; 2]", Matrix, false, "let m = matmul(transpose(x), x); sum(matvec(m, V)) + dot(vecmat([1.0, -2.0], x), V)"),
    case("[[f64; 3]; 2]", Matrix, false, "let s = 2.0 * x[0][1]; sum(matvec(x * s, V)) + sum(matvec(x.exp(), V)) + sum(matvec(s / (x * x + 1.0), V))"),
    case("[[f64; 3]; 2]", Matrix, false, "let t = [x; 2]; sum(matvec(t[1], V)) + sum(matvec(t[0] * t[1], V))"),
    case("[[f64; 3]; 2]", Matrix, false, "sum(matvec(matmul(x, M), V)) + sum(matvec(matmul(x, transpose(x)), [1.0, 0.5]))"),
    case("[[f64; 3]; 2]", Matrix, false, "let mut y = x; y[0][1] = y[1][2] * y[0][0]; y[1] = V * x[0][2]; sum(vecmat([0.3, 0.7], y * y))"),
    // f32.
    case("f32", Scalar, false, "x * x.exp() + sigmoid(x) - x.cos() / 2.0"),
    case("f32", Scalar, false, "((x as f64) * 2.0).exp() as f32 + x.max(0.1)"),
    case("[f32; 3]", Vector, false, "dot(x, x.tanh()) + logsumexp(x) + sum(matvec(M32, x))"),
];

fn prelude_program(case: &Case) -> String {
    let ret = if case.ty.contains("f32") {
        "f32"
    } else {
        "f64"
    };
    format!(
        "{PRELUDE}\nfn f(x: {ty}) -> {ret} {{ {body} }}\nfn g(x: {ty}) -> {ty} {{ grad(f, x) }}\nfn vg(x: {ty}) -> ({ret}, {ty}) {{ value_and_grad(f, x) }}\n",
        ty = case.ty,
        body = case.body
    )
}

/// Points as flat coordinates (row-major).
fn points(case: &Case) -> Vec<Vec<f64>> {
    let n = match case.shape {
        Scalar => 1,
        Vector => 3,
        Matrix => 6,
    };
    let bases: [&[f64]; 3] = [
        &[0.3, -0.7, 1.1, 0.45, -1.35, 0.8],
        &[-0.35, 0.55, -0.15, 1.25, 0.65, -0.9],
        &[1.45, 0.15, 0.6, -0.55, 0.95, 0.35],
    ];
    bases
        .iter()
        .map(|b| {
            b[..n]
                .iter()
                .map(|v| if case.positive { v.abs() + 0.2 } else { *v })
                .collect()
        })
        .collect()
}

fn to_json(shape: Shape, flat: &[f64]) -> Value {
    match shape {
        Scalar => json!(flat[0]),
        Vector => json!(flat),
        Matrix => json!([flat[..3], flat[3..]]),
    }
}

/// Runs `entry` on one member per point; returns each member's `ok` value.
fn run(compiled: &Compiled, entry: &str, points: &[Value], config: &RunConfig) -> Vec<Value> {
    let inputs = format!(
        "{{\"batch\": {{\"x\": {}}}, \"shared\": {SHARED}}}",
        Value::Array(points.to_vec())
    );
    let inputs = Inputs::from_json_str(&inputs).expect("inputs parse");
    let bound = compiled
        .bind(entry, &inputs)
        .unwrap_or_else(|e| panic!("binding {entry}: {}", e.message()));
    let result = bound
        .run(config)
        .unwrap_or_else(|e| panic!("running {entry}: {e}"));
    harness::ok_values(&result, entry)
}

fn reference() -> RunConfig {
    RunConfig {
        strategy: Strategy::Reference,
        ..RunConfig::default()
    }
}

#[test]
fn gradients_match_finite_differences() {
    let mut failures = Vec::new();
    for (index, case) in CASES.iter().enumerate() {
        let source = prelude_program(case);
        let compiled = match compile(&source, "case.ab") {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!(
                    "case {index} `{}`: does not compile:\n{}",
                    case.body,
                    e.render(false)
                ));
                continue;
            }
        };
        let f32_case = case.ty.contains("f32");
        let (step, tolerance) = if f32_case { (1e-2, 5e-3) } else { (1e-5, 1e-6) };
        let pts = points(case);
        // Central differences, evaluating `f` itself on the reference executor.
        let mut perturbed = Vec::new();
        for p in &pts {
            for j in 0..p.len() {
                let h = step * p[j].abs().max(1.0);
                for sign in [1.0, -1.0] {
                    let mut q = p.clone();
                    q[j] += sign * h;
                    perturbed.push(to_json(case.shape, &q));
                }
            }
        }
        let values = run(&compiled, "f", &perturbed, &reference());
        let mut fd = Vec::new();
        let mut k = 0;
        for p in &pts {
            let mut row = Vec::new();
            for xj in p {
                let h = step * xj.abs().max(1.0);
                let (plus, minus) = (values[k].as_f64().unwrap(), values[k + 1].as_f64().unwrap());
                row.push((plus - minus) / (2.0 * h));
                k += 2;
            }
            fd.push(row);
        }
        let at: Vec<Value> = pts.iter().map(|p| to_json(case.shape, p)).collect();
        let f_at = run(&compiled, "f", &at, &reference());
        for (strategy, lanes, block_choice) in configurations() {
            let config = run_config(strategy, lanes, block_choice);
            let grads = run(&compiled, "g", &at, &config);
            let vgs = run(&compiled, "vg", &at, &config);
            for (m, ((g, vg), want)) in grads.iter().zip(&vgs).zip(&fd).enumerate() {
                let mut got = Vec::new();
                numbers(g, &mut got);
                let close = got.len() == want.len()
                    && got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| (a - b).abs() <= tolerance * b.abs().max(1.0));
                if !close {
                    failures.push(format!(
                        "case {index} `{}` [{strategy}/{lanes}/{block_choice}] member {m}: grad {got:?}, finite differences {want:?}",
                        case.body
                    ));
                }
                // value_and_grad gives f's value and the same gradient.
                let (value, vgrad) = (&vg[0], &vg[1]);
                if value != &f_at[m] || vgrad != g {
                    failures.push(format!(
                        "case {index} `{}` [{strategy}/{lanes}/{block_choice}] member {m}: value_and_grad gives {vg}, but f gives {} and grad {g}",
                        case.body, f_at[m]
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs `a` and `b` on the same members under every configuration and
/// checks that they agree to a relative 1e-12.
fn same_results(source: &str, a: &str, b: &str, inputs: &str) {
    let compiled = compile(source, "hand.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let inputs = Inputs::from_json_str(inputs).expect("inputs parse");
    for (strategy, lanes, block_choice) in configurations() {
        let config = run_config(strategy, lanes, block_choice);
        let mut out = Vec::new();
        for entry in [a, b] {
            let bound = compiled.bind(entry, &inputs).expect("binds");
            let json = bound.run(&config).expect("runs").to_json(false);
            let mut flat = Vec::new();
            for r in json["results"].as_array().expect("results") {
                let ok = r.get("ok").unwrap_or_else(|| panic!("{entry} failed: {r}"));
                numbers(ok, &mut flat);
            }
            out.push(flat);
        }
        assert_eq!(out[0].len(), out[1].len());
        assert!(!out[0].is_empty());
        for (x, y) in out[0].iter().zip(&out[1]) {
            assert!(
                (x - y).abs() <= 1e-12 * y.abs().max(1.0),
                "[{strategy}/{lanes}/{block_choice}] {a} gives {x}, {b} gives {y}"
            );
        }
    }
}

#[test]
fn logistic_regression_gradient_matches_the_hand_written_one() {
    let source = r#"
extern "autobatch" {
    static X: [[f64; D]; N];
    static Y: [f64; N];
}
fn loglik(theta: [f64; D]) -> f64 {
    let z = matvec(X, theta);
    sum(Y * log_sigmoid(z) + (1.0 - Y) * log_sigmoid(-z))
}
fn auto(theta: [f64; D]) -> (f64, [f64; D]) { value_and_grad(loglik, theta) }
fn hand(theta: [f64; D]) -> (f64, [f64; D]) {
    (loglik(theta), vecmat(Y - sigmoid(matvec(X, theta)), X))
}
"#;
    // 7 data points, 4 regressors, 3 members.
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..7 {
        let row: Vec<f64> = (0..4)
            .map(|j| ((i * 4 + j) as f64 * 0.37).sin() * 1.5)
            .collect();
        x.push(row);
        y.push(if i % 3 == 0 { 1.0 } else { 0.0 });
    }
    let inputs = json!({
        "batch": {"theta": [[0.1, -0.2, 0.3, 0.05], [1.0, 0.5, -1.5, 0.2], [0.0, 0.0, 0.0, 0.0]]},
        "shared": {"X": x, "Y": y}
    });
    same_results(source, "auto", "hand", &inputs.to_string());
    // The derived functions are not entries.
    let compiled = compile(source, "hand.ab").expect("compiles");
    assert_eq!(compiled.entry_names(), vec!["loglik", "auto", "hand"]);
}

#[test]
fn recurrent_loop_gradient_matches_the_hand_written_one() {
    // h_{t+1} = tanh(W h_t + x_t), loss = sum(h_T); the hand-written
    // gradient runs the recursion forward, storing every state, then back.
    let source = r#"
extern "autobatch" {
    static W: [[f64; 3]; 3];
    static XS: [[f64; 3]; 4];
}
fn loss(h0: [f64; 3]) -> f64 {
    let mut h = h0;
    for i in 0..4 {
        h = (matvec(W, h) + XS[i]).tanh();
    }
    sum(h)
}
fn auto(h0: [f64; 3]) -> [f64; 3] { grad(loss, h0) }
fn hand(h0: [f64; 3]) -> [f64; 3] {
    let mut hs = [h0; 5];
    for i in 0..4 {
        hs[i + 1] = (matvec(W, hs[i]) + XS[i]).tanh();
    }
    let mut dh = [1.0; 3];
    for k in 0..4 {
        let i = 3 - k;
        let h = hs[i + 1];
        let dz = dh * (1.0 - h * h);
        dh = vecmat(dz, W);
    }
    dh
}
"#;
    let inputs = json!({
        "batch": {"h0": [[0.1, -0.2, 0.3], [1.0, 0.5, -1.5], [0.0, 2.0, -0.3]]},
        "shared": {
            "W": [[0.5, 0.1, -0.3], [0.2, -0.4, 0.6], [0.3, 0.3, 0.3]],
            "XS": [[0.1, 0.2, 0.3], [0.0, -0.1, 0.5], [1.0, 0.0, -1.0], [0.2, 0.2, 0.2]]
        }
    });
    same_results(source, "auto", "hand", &inputs.to_string());
}

/// `grad(f, x, d..)` with data arguments of every kind (a ragged array of
/// each member's own length, an integer, a tuple of a float and a bool),
/// through loops and a recursion whose control depends on the data, a
/// `map` over the data with the point as extra argument and a `pfor` over
/// the point with the data whole: against central finite differences of
/// `f` (run on the reference executor at the perturbed points, each member
/// with its own data), and the same bits on every configuration.
#[test]
fn gradients_with_data_arguments_match_finite_differences() {
    let source = r#"
fn rec(a: f64, n: i64, xs: [f64; L]) -> f64 {
    if n <= 0 || xs.len() == 0 { a } else { (a * xs[(n as usize) % xs.len()]).sin() + rec(a * 0.5, n - 1, xs) }
}
fn term(y: f64, x: [f64; 3]) -> f64 { (x[0] * y + x[1]).tanh() * y }
fn moment(k: i64, x: [f64; 3], xs: [f64; L]) -> f64 {
    let mut s = 0.0;
    for i in 0..xs.len() { s += x[k as usize] * xs[i]; }
    s * s
}
fn f(x: [f64; 3], xs: [f64; L], n: i64, p: (f64, bool)) -> f64 {
    let mut s = 0.0;
    let mut i = 0;
    while i < xs.len() {
        if p.1 && xs[i] < 0.0 { break; }
        s += (x[0] * xs[i] - x[1]).powi(2) * p.0;
        i += 1;
    }
    s + rec(x[2], n, xs) + sum(map(term, xs, x)) + sum(pfor::<3>(moment, x, xs))
}
fn g(x: [f64; 3], xs: [f64; L], n: i64, p: (f64, bool)) -> [f64; 3] { grad(f, x, xs, n, p) }
fn vg(x: [f64; 3], xs: [f64; L], n: i64, p: (f64, bool)) -> (f64, [f64; 3]) { value_and_grad(f, x, xs, n, p) }
"#;
    let compiled = compile(source, "data.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let points: [[f64; 3]; 4] = [
        [0.3, -0.7, 1.1],
        [-0.35, 0.55, -0.15],
        [1.45, 0.15, 0.6],
        [0.8, 0.2, -0.9],
    ];
    let xss: [&[f64]; 4] = [
        &[0.5, -1.0, 2.0],
        &[],
        &[1.5],
        &[0.25, 0.75, -0.5, 1.25, 2.0, -1.5],
    ];
    let ns = [3, 2, 0, 5];
    let ps = [
        json!([0.5, true]),
        json!([1.5, false]),
        json!([-0.25, true]),
        json!([2.0, false]),
    ];
    let run_on = |entry: &str, members: &[(usize, [f64; 3])], config: &RunConfig| -> Vec<Value> {
        let inputs = json!({"batch": {
            "x": members.iter().map(|(_, x)| x.to_vec()).collect::<Vec<_>>(),
            "xs": members.iter().map(|(m, _)| xss[*m].to_vec()).collect::<Vec<_>>(),
            "n": members.iter().map(|(m, _)| ns[*m]).collect::<Vec<_>>(),
            "p": members.iter().map(|(m, _)| ps[*m].clone()).collect::<Vec<_>>(),
        }});
        let inputs = Inputs::from_json_str(&inputs.to_string()).expect("inputs parse");
        let bound = compiled.bind(entry, &inputs).expect("binds");
        ok_values(&bound.run(config).expect("runs"), entry)
    };
    // Central differences: each member's point moved along each axis, with its own data.
    let step: f64 = 1e-5;
    let mut perturbed = Vec::new();
    for (m, p) in points.iter().enumerate() {
        for j in 0..3 {
            for sign in [1.0, -1.0] {
                let mut q = *p;
                q[j] += sign * step * p[j].abs().max(1.0);
                perturbed.push((m, q));
            }
        }
    }
    let values = run_on("f", &perturbed, &reference());
    let at: Vec<(usize, [f64; 3])> = points.iter().copied().enumerate().collect();
    let f_at = run_on("f", &at, &reference());
    let g_reference = run_on("g", &at, &reference());
    for (m, p) in points.iter().enumerate() {
        let mut got = Vec::new();
        numbers(&g_reference[m], &mut got);
        for j in 0..3 {
            let h = step * p[j].abs().max(1.0);
            let k = (m * 3 + j) * 2;
            let fd = (values[k].as_f64().unwrap() - values[k + 1].as_f64().unwrap()) / (2.0 * h);
            assert!(
                (got[j] - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                "member {m}, coordinate {j}: grad {}, finite differences {fd}",
                got[j]
            );
        }
    }
    for (strategy, lanes, block_choice) in configurations() {
        let config = run_config(strategy, lanes, block_choice);
        let g = run_on("g", &at, &config);
        let vg = run_on("vg", &at, &config);
        for m in 0..points.len() {
            assert_eq!(
                g[m], g_reference[m],
                "[{strategy}/{lanes}/{block_choice}] member {m}"
            );
            assert_eq!(
                vg[m],
                json!([f_at[m], g_reference[m]]),
                "[{strategy}/{lanes}/{block_choice}] member {m}"
            );
        }
    }
}

/// The operations a run of `entry` executes, over all its members.
fn operations(compiled: &Compiled, entry: &str, inputs: &str) -> u64 {
    let inputs = Inputs::from_json_str(inputs).expect("the inputs parse");
    let bound = compiled
        .bind(entry, &inputs)
        .unwrap_or_else(|e| panic!("{}", e.message()));
    operations_of(bound, entry)
}

/// The operations a run of `bound` executes on the reference, over all
/// its members (each of which must finish).
fn operations_of(bound: autobatch::BoundBatch, entry: &str) -> u64 {
    let config = RunConfig {
        strategy: Strategy::Reference,
        ..RunConfig::default()
    };
    let run = bound.run(&config).expect("runs");
    assert!(run.members.iter().all(|r| r.is_ok()), "{entry} runs");
    run.stats.op_counts.iter().map(|c| c.active_lanes).sum()
}

/// The gradient does a small constant times the function's work: each
/// activation (a level of a recursion, an iteration of a loop whose bound
/// is a runtime value, a node of a tree of `join`s) runs forward once and
/// backward once. A derivation that recomputes a callee's forward pass in
/// its vjp does quadratic work on the recursion, and on the tree its size
/// times its height. The same holds for functions holding a `catch` (of
/// a call on values that do not depend on `x`), some of whose calls fail.
#[test]
fn the_gradient_does_a_constant_times_the_work_of_the_function() {
    // The recursion, loop and tree of `RECURSIONS`, and the same holding
    // `catch`es.
    let guarded = r#"
fn inv(k: i64) -> i64 { 12 / k }
fn guarded_chain(a: f64, n: i64) -> f64 {
    if n == 0 {
        1.0
    } else {
        let (_, q) = catch(inv(n % 7));
        a.sin() * guarded_chain(a, n - 1) + a * (q as f64) * 0.001
    }
}
fn guarded_walk(a: f64, n: i64) -> f64 {
    let mut r = a;
    for k in 0..n {
        let (ok, q) = catch(inv(k % 3));
        if ok { r = (r * 0.9).tanh() + 0.001 * q as f64; } else { r = r * 1.1 + 0.05; }
    }
    r
}
fn guarded_tree(a: f64, lo: i64, hi: i64) -> f64 {
    let (_, q) = catch(inv(lo % 4));
    if hi - lo <= 1 {
        a.sin() + 0.001 * q as f64
    } else {
        let mid = (lo + hi) / 2;
        let (l, r) = join(guarded_tree(a, lo, mid), guarded_tree(a, mid, hi));
        l * a + r.cos()
    }
}
fn caught_deep(x: f64, n: i64) -> f64 { guarded_chain(x, n) }
fn caught_deep_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(caught_deep, x, n) }
fn caught_long(x: f64, n: i64) -> f64 { guarded_walk(x, n) }
fn caught_long_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(caught_long, x, n) }
fn caught_wide(x: f64, n: i64) -> f64 { guarded_tree(x, 0, n) }
fn caught_wide_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(caught_wide, x, n) }
"#;
    let source = format!("{RECURSIONS}{guarded}");
    let compiled = compile(&source, "work.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let long = r#"{"batch": {"x": [0.3, 0.9]}, "shared": {"n": 1000}}"#;
    // 250 leaves: a tree of 499 nodes, of height 8.
    let tree = r#"{"batch": {"x": [0.3, 0.9]}, "shared": {"n": 250}}"#;
    let cases = [
        ("deep", "deep_grad", long),
        ("long", "long_grad", long),
        ("wide", "wide_grad", tree),
        ("caught_deep", "caught_deep_grad", long),
        ("caught_long", "caught_long_grad", long),
        ("caught_wide", "caught_wide_grad", tree),
    ];
    for (plain, derived, inputs) in cases {
        let forward = operations(&compiled, plain, inputs);
        let gradient = operations(&compiled, derived, inputs);
        assert!(
            gradient <= 4 * forward,
            "{derived}: {gradient} operations, {plain}: {forward}"
        );
    }
    // The gradient with respect to a static (`--grad-statics`) of a
    // recursion and of a self tail call reading its rows by computed
    // indices.
    let rows = r#"
extern "autobatch" { static E: [[f64; 2]; 8]; }
fn rchain(n: i64) -> f64 {
    if n == 0 {
        1.0
    } else {
        let e = E[(n % 8) as usize];
        e[0].sin() * rchain(n - 1) + e[1]
    }
}
fn rtail(n: i64, acc: f64) -> f64 {
    if n == 0 {
        return acc;
    }
    let k = ((n * 3) % 8) as usize;
    rtail(n - 1, (acc * E[k][0]).tanh() + E[k][1])
}
fn rows_deep(n: i64) -> f64 { rchain(n) }
fn rows_long(n: i64) -> f64 { rtail(n, 0.5) }
"#;
    let rows = compile(rows, "rows.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let inputs = r#"{"batch": {"n": [1000, 999]}, "shared": {"E": [[0.3, 0.1], [0.2, -0.1],
        [0.5, 0.2], [-0.4, 0.3], [0.1, 0.1], [0.6, -0.2], [-0.2, 0.4], [0.3, 0.0]]}}"#;
    for plain in ["rows_deep", "rows_long"] {
        let forward = operations(&rows, plain, inputs);
        let gradient = static_operations(&rows, plain, &["E"], inputs);
        assert!(
            gradient <= 4 * forward,
            "the gradient of {plain} with respect to E: {gradient} operations, {plain}: {forward}"
        );
    }
}

/// The operations a run of the gradient of `entry` with respect to
/// `statics` executes, over all its members.
fn static_operations(compiled: &Compiled, entry: &str, statics: &[&str], inputs: &str) -> u64 {
    let inputs = Inputs::from_json_str(inputs).expect("the inputs parse");
    let bound = compiled
        .bind_static_gradient(entry, statics, &inputs)
        .unwrap_or_else(|e| panic!("{}", e.message()));
    operations_of(bound, entry)
}

/// The most bytes a member's tape held in a run of `bound` with `config`
/// (every member must finish).
fn tape_bytes_of(bound: &autobatch::BoundBatch, entry: &str, config: &RunConfig) -> u64 {
    let run = bound.run(config).expect("runs");
    assert!(run.members.iter().all(|r| r.is_ok()), "{entry} runs");
    run.stats.tape_bytes
}

/// `tape_bytes` counts what a gradient's forward part saves: nothing for
/// a run without a gradient; for a recursion, a loop and a tree of
/// `join`s, the same number on every strategy, growing by the same amount
/// per level, iteration or leaf (so doubling the size adds what the last
/// doubling added, twice); the most of any member, not the sum.
#[test]
fn tape_bytes_are_counted_alike_on_every_strategy() {
    let compiled = tapes();
    let bind = |entry: &str, n: i64, gradient_of_statics: bool| {
        bind_tapes(&compiled, entry, n, gradient_of_statics)
    };
    for plain in ["deep", "long", "wide"] {
        assert_eq!(
            tape_bytes_of(&bind(plain, 64, false), plain, &reference()),
            0
        );
    }
    let cases = [
        ("deep_grad", false),
        ("long_grad", false),
        ("wide_grad", false),
        ("rchain", true),
        ("narrow_grad", false),
        ("twice", false),
    ];
    for (entry, gradient_of_statics) in cases {
        let sizes = [64, 128, 256].map(|n| bind(entry, n, gradient_of_statics));
        let expected: Vec<u64> = sizes
            .iter()
            .map(|bound| tape_bytes_of(bound, entry, &reference()))
            .collect();
        let (small, middle, large) = (expected[0], expected[1], expected[2]);
        assert!(small > 0, "{entry}: {expected:?}");
        assert_eq!(
            large - middle,
            2 * (middle - small),
            "{entry}: {expected:?}"
        );
        for (strategy, lanes, block_choice) in configurations() {
            let config = configuration(strategy, lanes, block_choice, None);
            let got: Vec<u64> = sizes
                .iter()
                .map(|bound| tape_bytes_of(bound, entry, &config))
                .collect();
            assert_eq!(got, expected, "[{strategy}/{lanes}/{block_choice}] {entry}");
        }
    }
}

/// The gradient of a function that is one block of operations is not
/// taped (its forward and backward operations run as one block): every
/// strategy holds no tape (`tape_bytes` 0), gives the reference's bits,
/// and the closed form `tanh(x²) + 2x² (1 - tanh²(x²))` per element.
#[test]
fn a_function_of_one_block_is_differentiated_without_a_tape() {
    let source = r#"
fn f(x: [f64; 3]) -> f64 { sum((x * x).tanh() * x) }
fn both(x: [f64; 3]) -> (f64, [f64; 3]) { value_and_grad(f, x) }
"#;
    let compiled =
        compile(source, "one_block.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let points: [[f64; 3]; 2] = [[0.1, 0.2, 0.3], [1.0, -2.0, 0.5]];
    let inputs = Inputs::from_json_str(&json!({ "batch": { "x": points } }).to_string())
        .expect("the inputs parse");
    let bound = compiled
        .bind("both", &inputs)
        .unwrap_or_else(|e| panic!("{}", e.message()));
    let expected = bound.run(&reference()).expect("runs");
    for (member, got) in ok_values(&expected, "both").iter().enumerate() {
        let mut values = Vec::new();
        numbers(got, &mut values);
        let x = points[member];
        let value: f64 = x.iter().map(|x| (x * x).tanh() * x).sum();
        assert!((values[0] - value).abs() < 1e-12, "{values:?}");
        for (k, x) in x.iter().enumerate() {
            let t = (x * x).tanh();
            let slope = t + 2.0 * x * x * (1.0 - t * t);
            assert!((values[1 + k] - slope).abs() < 1e-12, "{values:?}");
        }
    }
    assert_eq!(expected.stats.tape_bytes, 0);
    for (strategy, lanes, block_choice) in configurations() {
        let at = format!("[{strategy}/{lanes}/{block_choice}]");
        let run = bound
            .run(&run_config(strategy, lanes, block_choice))
            .expect("runs");
        assert_eq!(run.to_json(false), expected.to_json(false), "{at}");
        assert_eq!(run.stats.tape_bytes, 0, "{at}");
    }
}

/// A recursion, a loop, a tree of `join`s and a tree of calls to
/// differentiate: the entries `deep`, `long`, `wide` and `split`, and
/// their `_grad`s.
const RECURSIONS: &str = r#"
fn chain(a: f64, n: i64) -> f64 { if n == 0 { 1.0 } else { a.sin() * chain(a, n - 1) + a } }
fn walk(a: f64, n: i64) -> f64 {
    let mut r = a;
    for k in 0..n { if r > 0.5 { r = (r * 0.9).tanh() + 0.1; } else { r = r * 1.1 + 0.05; } }
    r
}
fn tree(a: f64, lo: i64, hi: i64) -> f64 {
    if hi - lo <= 1 {
        a.sin()
    } else {
        let mid = (lo + hi) / 2;
        let (l, r) = join(tree(a, lo, mid), tree(a, mid, hi));
        l * a + r.cos()
    }
}
fn deep(x: f64, n: i64) -> f64 { chain(x, n) }
fn deep_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(deep, x, n) }
fn long(x: f64, n: i64) -> f64 { walk(x, n) }
fn long_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(long, x, n) }
fn wide(x: f64, n: i64) -> f64 { tree(x, 0, n) }
fn wide_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(wide, x, n) }
fn halves(a: f64, lo: i64, hi: i64) -> f64 {
    if hi - lo <= 1 {
        a.sin()
    } else {
        let mid = (lo + hi) / 2;
        halves(a, lo, mid) * a + halves(a, mid, hi).cos()
    }
}
fn split(x: f64, n: i64) -> f64 { halves(x, 0, n) }
fn split_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(split, x, n) }
"#;

/// [`RECURSIONS`], a recursion reading rows of a static `E` to
/// differentiate with respect to it (see [`bind_tapes`]), a loop on `f32`
/// (whose values take padding on the tape) and two gradients one after
/// the other in one member (the second's tape outgrows the first's after
/// the first emptied it), the gradient of a loop itself (`walk_grad`), and
/// a draw after a gradient of `join`s (`wide_draw`).
fn tapes() -> Compiled {
    let rows = r#"
fn walk32(a: f32, n: i64) -> f32 {
    let mut r = a;
    for k in 0..n { if r > 0.5 { r = (r * 0.9).tanh() + 0.1; } else { r = r * 1.1 + 0.05; } }
    r
}
fn narrow(x: f64, n: i64) -> f64 { walk32(x as f32, n) as f64 }
fn narrow_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(narrow, x, n) }
fn walk_grad(x: f64, n: i64) -> (f64, f64) { value_and_grad(walk, x, n) }
fn wide_draw(x: f64, n: i64) -> (f64, f64, f64) {
    let (v, d) = value_and_grad(wide, x, n);
    (v, d, uniform())
}
fn twice(x: f64, n: i64) -> (f64, f64) {
    let (a, da) = value_and_grad(long, x, n / 2);
    let (b, db) = value_and_grad(long, x, n);
    (a + b, da + db)
}
extern "autobatch" { static E: [[f64; 2]; 8]; }
fn rchain(x: f64, n: i64) -> f64 {
    if n == 0 {
        x
    } else {
        let e = E[(n % 8) as usize];
        e[0].sin() * rchain(x, n - 1) + e[1]
    }
}
"#;
    let source = format!("{RECURSIONS}{rows}");
    compile(&source, "tapes.ab").unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// `entry` of [`tapes`] bound for two members, at sizes `n` and `n / 2`
/// (`x` 0.3 and 0.9), as a gradient with respect to `E` if asked.
fn bind_tapes(
    compiled: &Compiled,
    entry: &str,
    n: i64,
    gradient_of_statics: bool,
) -> autobatch::BoundBatch {
    let statics = r#"[[0.3, 0.1], [0.2, -0.1], [0.5, 0.2], [-0.4, 0.3], [0.1, 0.1], [0.6, -0.2],
        [-0.2, 0.4], [0.3, 0.0]]"#;
    let inputs = format!(
        r#"{{"batch": {{"x": [0.3, 0.9], "n": [{n}, {}]}}, "shared": {{"E": {statics}}}}}"#,
        n / 2
    );
    let inputs = Inputs::from_json_str(&inputs).expect("the inputs parse");
    let bound = if gradient_of_statics {
        compiled.bind_static_gradient(entry, &["E"], &inputs)
    } else {
        compiled.bind(entry, &inputs)
    };
    bound.unwrap_or_else(|e| panic!("{}", e.message()))
}

/// A run on `strategy` with `lanes` and `block_choice`, its tape bounded
/// at `max_tape_bytes` (`None`: the default).
fn configuration(
    strategy: Strategy,
    lanes: autobatch::LaneMode,
    block_choice: autobatch::BlockChoice,
    max_tape_bytes: Option<u64>,
) -> RunConfig {
    let mut config = run_config(strategy, lanes, block_choice);
    config.options.max_tape_bytes = max_tape_bytes;
    config
}

/// `--max-tape-bytes`, on a gradient whose tape grows in the iterations
/// of a loop in the differentiated function's own activation (which are
/// not recomputed): bounded at the most a member's
/// tape holds, every member finishes with the bits of an
/// unbounded run; one byte less, the member with the larger tape stops
/// with `tape_limit` and the other finishes as before; the same on every
/// strategy, results and errors (kind, message, location) alike.
#[test]
fn the_tape_bound_stops_the_members_whose_tape_exceeds_it_alike_everywhere() {
    let compiled = tapes();
    for (entry, gradient_of_statics) in [("walk_grad", false)] {
        let bound = bind_tapes(&compiled, entry, 128, gradient_of_statics);
        let unbounded = bound.run(&reference()).expect("runs");
        let most = unbounded.stats.tape_bytes;
        let expected = unbounded.to_json(false);
        let tight = RunConfig {
            options: autobatch::RunOptions {
                max_tape_bytes: Some(most - 1),
                ..reference().options
            },
            ..reference()
        };
        let stopped = bound.run(&tight).expect("runs").to_json(false);
        let results = stopped["results"].as_array().expect("results");
        assert_eq!(
            results[0]["error"]["kind"], "tape_limit",
            "{entry}: {stopped}"
        );
        assert_eq!(
            results[0]["error"]["message"],
            format!(
                "the gradient's tape would hold more than {} bytes (--max-tape-bytes)",
                most - 1
            ),
        );
        assert_eq!(results[1], expected["results"][1], "{entry}");
        for (strategy, lanes, block_choice) in configurations() {
            let at = format!("[{strategy}/{lanes}/{block_choice}] {entry}");
            let exact = configuration(strategy, lanes, block_choice, Some(most));
            let run = bound.run(&exact).expect("runs");
            assert_eq!(run.to_json(false), expected, "{at}");
            assert_eq!(run.stats.tape_bytes, most, "{at}");
            let less = configuration(strategy, lanes, block_choice, Some(most - 1));
            assert_eq!(
                bound.run(&less).expect("runs").to_json(false),
                stopped,
                "{at}"
            );
        }
    }
}

/// Past half of `--max-tape-bytes`, a call whose callee calls, forks or
/// loops (and a fork of such callees) runs untaped or drops what the
/// callee saved, and its backward part runs the forward part again:
/// under a tenth of the tape an unbounded run holds, a recursion of depth
/// 1000, a tree of calls and a tree of `join`s (and a draw after its
/// gradient: a fork run again draws no key from the member's stream) give
/// the unbounded run's bits (results, gradients, the statics' gradients)
/// and `instances` (a fork run again counts none)
/// on every strategy, each member's tape stays within the bound, holding as much
/// on every strategy, and the reference executes more operations than
/// unbounded (the recomputation).
#[test]
fn past_the_tape_bound_calls_are_recomputed_with_the_same_bits() {
    let compiled = tapes();
    for (entry, gradient_of_statics) in [
        ("deep_grad", false),
        ("split_grad", false),
        ("wide_grad", false),
        ("wide_draw", false),
    ] {
        let bound = bind_tapes(&compiled, entry, 1000, gradient_of_statics);
        let unbounded = bound.run(&reference()).expect("runs");
        let expected = unbounded.to_json(false);
        let tenth = unbounded.stats.tape_bytes / 10;
        let small = RunConfig {
            options: autobatch::RunOptions {
                max_tape_bytes: Some(tenth),
                ..reference().options
            },
            ..reference()
        };
        let recomputed = bound.run(&small).expect("runs");
        assert_eq!(recomputed.to_json(false), expected, "{entry}");
        let instances = unbounded.stats.instances;
        assert_eq!(recomputed.stats.instances, instances, "{entry}");
        let held = recomputed.stats.tape_bytes;
        assert!(
            held <= tenth,
            "{entry}: {held} bytes under a bound of {tenth}"
        );
        let operations = |run: &autobatch::RunResult| -> u64 {
            run.stats.op_counts.iter().map(|c| c.active_lanes).sum()
        };
        assert!(
            operations(&recomputed) > operations(&unbounded),
            "{entry}: {} operations, unbounded {}",
            operations(&recomputed),
            operations(&unbounded)
        );
        for (strategy, lanes, block_choice) in configurations() {
            let at = format!("[{strategy}/{lanes}/{block_choice}] {entry}");
            let config = configuration(strategy, lanes, block_choice, Some(tenth));
            let run = bound.run(&config).expect("runs");
            assert_eq!(run.to_json(false), expected, "{at}");
            assert_eq!(run.stats.tape_bytes, held, "{at}");
            assert_eq!(run.stats.instances, instances, "{at}");
        }
    }
}

/// The TreeLSTM of `examples/models/treelstm.ab` (`loss`, its gradient
/// with respect to every weight), hidden 4, on three trees of up to 33
/// nodes (a chain leaning left, a balanced tree, a small one), their node
/// arrays padded to `n` entries.
fn bind_treelstm(n: usize) -> autobatch::BoundBatch {
    let source = include_str!("../../../examples/models/treelstm.ab");
    let compiled = compile(source, "treelstm.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    // A tree as its node arrays: leaves first, each inner node after its
    // children; the root last.
    struct Tree {
        left: Vec<i64>,
        right: Vec<i64>,
        word: Vec<usize>,
    }
    impl Tree {
        fn leaf(&mut self, word: usize) -> i64 {
            self.node(-1, -1, word)
        }
        fn node(&mut self, l: i64, r: i64, word: usize) -> i64 {
            self.left.push(l);
            self.right.push(r);
            self.word.push(word);
            self.left.len() as i64 - 1
        }
        fn balanced(&mut self, leaves: usize, first_word: usize) -> i64 {
            if leaves == 1 {
                return self.leaf(first_word % 5);
            }
            let l = self.balanced(leaves / 2, first_word);
            let r = self.balanced(leaves - leaves / 2, first_word + leaves / 2);
            self.node(l, r, 0)
        }
    }
    let new = || Tree {
        left: Vec::new(),
        right: Vec::new(),
        word: Vec::new(),
    };
    let mut chain = new();
    let mut top = chain.leaf(1);
    for k in 0..16 {
        let w = chain.leaf(k % 5);
        top = chain.node(top, w, 0);
    }
    let mut wide = new();
    wide.balanced(16, 2);
    let mut small = new();
    small.balanced(3, 4);
    let trees = [chain, wide, small];
    let padded = |column: &dyn Fn(&Tree) -> Vec<i64>| -> Vec<Vec<i64>> {
        trees
            .iter()
            .map(|t| {
                let mut c = column(t);
                c.resize(n, -1);
                c
            })
            .collect()
    };
    let words = |t: &Tree| t.word.iter().map(|w| *w as i64).collect();
    let mut word = padded(&words);
    for w in word.iter_mut().flatten() {
        *w = (*w).max(0);
    }
    // Weights: a fixed spread of small values.
    let mut k = 0u32;
    let mut matrix = |rows: usize, cols: usize| -> Value {
        let rows: Vec<Vec<f64>> = (0..rows)
            .map(|_| {
                (0..cols)
                    .map(|_| {
                        k += 1;
                        ((f64::from(k) * 0.754_877_666).fract() - 0.5) * 0.8
                    })
                    .collect()
            })
            .collect();
        json!(rows)
    };
    let (h, wd, v) = (4, 3, 5);
    let mut shared = serde_json::Map::new();
    shared.insert("E".into(), matrix(v, wd));
    for name in ["WI", "WO", "WU"] {
        shared.insert(name.into(), matrix(h, wd));
    }
    for name in ["UIL", "UIR", "UOL", "UOR", "UUL", "UUR", "UF1", "UF2"] {
        shared.insert(name.into(), matrix(h, h));
    }
    for name in ["BI", "BO", "BU", "BF"] {
        shared.insert(name.into(), matrix(1, h)[0].clone());
    }
    shared.insert("WOUT".into(), matrix(5, h));
    shared.insert("BOUT".into(), matrix(1, 5)[0].clone());
    let roots: Vec<usize> = trees.iter().map(|t| t.left.len() - 1).collect();
    let inputs = json!({
        "batch": {
            "left": padded(&|t| t.left.clone()),
            "right": padded(&|t| t.right.clone()),
            "word": word,
            "root": roots,
            "label": [1, 3, 4],
        },
        "shared": shared,
    });
    let inputs = Inputs::from_json_str(&inputs.to_string()).expect("the inputs parse");
    let statics: Vec<&str> = [
        "E", "WI", "WO", "WU", "UIL", "UIR", "UOL", "UOR", "UUL", "UUR", "UF1", "UF2", "BI", "BO",
        "BU", "BF", "WOUT", "BOUT",
    ]
    .into();
    compiled
        .bind_static_gradient("loss", &statics, &inputs)
        .unwrap_or_else(|e| panic!("{}", e.message()))
}

/// The arrays a TreeLSTM passes unchanged down its recursion (the trees'
/// `left`, `right` and `word`) are not saved per recomputed node: under a
/// tenth of the tape an unbounded run holds, the statics' gradient runs
/// (where each node's fork saving the arrays stopped it with `tape_limit`)
/// and gives the unbounded run's bits on every strategy, and the most a
/// member's tape holds does not grow when the arrays are padded to four
/// times their length.
#[test]
fn a_treelstm_under_a_tenth_of_its_tape_saves_its_node_arrays_once() {
    let bound = bind_treelstm(40);
    let unbounded = bound.run(&reference()).expect("runs");
    let expected = unbounded.to_json(false);
    assert!(
        unbounded.members.iter().all(|r| r.is_ok()),
        "the unbounded run: {expected}"
    );
    let tenth = unbounded.stats.tape_bytes / 10;
    let small = RunConfig {
        options: autobatch::RunOptions {
            max_tape_bytes: Some(tenth),
            ..reference().options
        },
        ..reference()
    };
    let recomputed = bound.run(&small).expect("runs");
    assert_eq!(recomputed.to_json(false), expected);
    assert!(recomputed.members.iter().all(|r| r.is_ok()));
    // (The most held may pass the bound for a moment, where a fork's
    // instances' tapes join the member's before the fork drops them.)
    let held = recomputed.stats.tape_bytes;
    assert!(
        held < unbounded.stats.tape_bytes / 4,
        "{held} bytes under a bound of {tenth}"
    );
    let longer = bind_treelstm(160);
    let run = longer.run(&small).expect("runs");
    assert_eq!(run.to_json(false)["results"], expected["results"]);
    assert_eq!(run.stats.tape_bytes, held, "the arrays padded");
    for (strategy, lanes, block_choice) in configurations() {
        let at = format!("[{strategy}/{lanes}/{block_choice}]");
        let config = configuration(strategy, lanes, block_choice, Some(tenth));
        let run = bound.run(&config).expect("runs");
        assert_eq!(run.to_json(false), expected, "{at}");
        assert_eq!(run.stats.tape_bytes, held, "{at}");
    }
}
