//! Gradients with respect to statics, summed over the members
//! (`autobatch run --grad-statics`, [`Compiled::bind_static_gradient`]):
//! against central finite differences (the TreeLSTM and BiRNN training
//! losses of `examples/models/`, in f64, and a small model with an
//! embedding row, a matrix and a bias), the same bits under every
//! strategy, batching configuration and thread count and for the members
//! in another order, members that fault contributing nothing, and the
//! errors of requests that cannot be served.

#[allow(dead_code)]
mod harness;

use std::path::PathBuf;

use autobatch::{compile, Compiled, InputErrorKind, Inputs, RunConfig, Tensor, Value};
use autobatch_types::Data;
use harness::{configurations, run_config};
use serde_json::Value as Json;

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/models")
}

fn read(name: &str) -> String {
    let path = models().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn compiled(source: &str, name: &str) -> Compiled {
    compile(source, name)
        .unwrap_or_else(|e| panic!("{name} does not compile:\n{}", e.render(false)))
}

fn inputs(json: &Json) -> Inputs {
    Inputs::from_json_str(&json.to_string()).expect("the inputs parse")
}

/// The names of the statics in `json`'s `shared` section, in order.
fn static_names(json: &Json) -> Vec<String> {
    json["shared"]
        .as_object()
        .expect("a shared section")
        .keys()
        .cloned()
        .collect()
}

/// The gradients of the sum of `entry` over the batch, by static.
fn gradients(
    program: &Compiled,
    entry: &str,
    statics: &[String],
    json: &Json,
    config: &RunConfig,
) -> Vec<(String, Tensor)> {
    let names: Vec<&str> = statics.iter().map(String::as_str).collect();
    let bound = program
        .bind_static_gradient(entry, &names, &inputs(json))
        .unwrap_or_else(|e| panic!("does not bind: {}", e.message()));
    let run = bound.run(config).expect("runs");
    for member in &run.members {
        assert!(member.is_ok(), "a member failed: {member:?}");
    }
    run.static_gradients
}

/// The sum over the members of `entry`'s result (a float scalar each).
fn total_loss(program: &Compiled, entry: &str, json: &Json) -> f64 {
    let bound = program.bind(entry, &inputs(json)).expect("binds");
    let run = bound
        .run(&RunConfig {
            strategy: autobatch::Strategy::Reference,
            ..RunConfig::default()
        })
        .expect("runs");
    run.members
        .iter()
        .map(|m| match m {
            Ok(Value::Tensor(t)) => match &t.data {
                Data::F64(v) => v[0],
                other => panic!("an f64 loss, found {other:?}"),
            },
            other => panic!("a loss, found {other:?}"),
        })
        .sum()
}

/// The element at flat position `k` of the (nested) JSON array `value`.
fn element_mut(value: &mut Json, k: usize) -> &mut Json {
    /// The indices leading to leaf `k` (counting down), if it is inside.
    fn path_to(value: &Json, k: &mut usize, path: &mut Vec<usize>) -> bool {
        match value {
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i);
                    if path_to(item, k, path) {
                        return true;
                    }
                    path.pop();
                }
                false
            }
            _ if *k == 0 => true,
            _ => {
                *k -= 1;
                false
            }
        }
    }
    let mut path = Vec::new();
    assert!(
        path_to(value, &mut { k }, &mut path),
        "position {k} is outside the array"
    );
    path.iter().fold(value, |v, i| &mut v[*i])
}

/// Checks `entry`'s gradients with respect to every static of `json`
/// against central differences of the summed loss at a few positions of
/// each static: the largest gradient element and two others.
fn check_against_finite_differences(program: &Compiled, entry: &str, json: &Json) {
    let statics = static_names(json);
    let config = RunConfig::default();
    let grads = gradients(program, entry, &statics, json, &config);
    assert_eq!(grads.len(), statics.len());
    let h = 1e-6;
    for (name, g) in &grads {
        let Data::F64(values) = &g.data else {
            panic!("an f64 gradient for {name}")
        };
        let largest = (0..values.len())
            .max_by(|a, b| values[*a].abs().total_cmp(&values[*b].abs()))
            .expect("a nonempty gradient");
        for k in [largest, values.len() / 3, values.len() - 1] {
            let mut plus = json.clone();
            let mut minus = json.clone();
            let x = element_mut(&mut plus["shared"][name], k)
                .as_f64()
                .expect("a number");
            *element_mut(&mut plus["shared"][name], k) = Json::from(x + h);
            *element_mut(&mut minus["shared"][name], k) = Json::from(x - h);
            let fd = (total_loss(program, entry, &plus) - total_loss(program, entry, &minus))
                / (2.0 * h);
            let scale = values[k].abs().max(fd.abs()).max(1e-3);
            assert!(
                (values[k] - fd).abs() <= 1e-5 * scale + 1e-8,
                "{entry}: d/d{name}[{k}] is {} but central differences give {fd}",
                values[k]
            );
        }
    }
}

/// A model's source in f64 (every `f32` an `f64`), for finite differences.
fn in_f64(source: &str) -> String {
    source.replace("f32", "f64")
}

#[test]
fn treelstm_gradients_match_finite_differences() {
    let program = compiled(&in_f64(&read("treelstm.ab")), "treelstm.ab");
    let json: Json = serde_json::from_str(&read("treelstm_train_small.json")).expect("JSON");
    check_against_finite_differences(&program, "loss", &json);
}

#[test]
fn birnn_gradients_match_finite_differences() {
    let program = compiled(&in_f64(&read("birnn.ab")), "birnn.ab");
    let json: Json = serde_json::from_str(&read("birnn_train_small.json")).expect("JSON");
    check_against_finite_differences(&program, "loss", &json);
}

const SMALL: &str = r#"
extern "autobatch" {
    static W: [[f64; 3]; 2];
    static B: [f64; 2];
    static E: [[f64; 3]; 4];
    static K: i64;
}
fn loss(word: usize, y: [f64; 2]) -> f64 {
    assert!(y[0] < 10.0);
    let x = E[word];
    let h = (matvec(W, x) + B).tanh();
    let d = h - y;
    sum(d * d) + dot(vecmat(h, W), x)
}
fn both(word: usize, y: [f64; 2]) -> [f64; 2] { y }
fn deep(n: i64) -> f64 { if B[0] > 0.0 { 1.0 } else if n > 0 { deep(n - 1) } else { B[1] } }
fn recursive(n: i64) -> f64 { deep(n) }
fn noisy(word: usize, y: [f64; 2]) -> f64 { W[0][0] * uniform() }
fn unused(word: usize, y: [f64; 2]) -> f64 {
    let k = 10 / (word as i64 - 3);
    loss(word, y)
}
"#;

fn small_inputs(words: &[usize], ys: &[[f64; 2]]) -> Json {
    serde_json::json!({
        "batch": {"word": words, "y": ys},
        "shared": {
            "W": [[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]],
            "B": [0.01, -0.02],
            "E": [[1.0, 2.0, 3.0], [0.5, 0.1, 0.2], [-1.0, 0.3, 0.7], [0.2, 0.2, -0.9]],
            "K": 3
        }
    })
}

#[test]
fn rows_products_and_biases_match_finite_differences() {
    let program = compiled(SMALL, "small.ab");
    let mut json = small_inputs(
        &[0, 2, 3, 2],
        &[[0.1, 0.2], [0.5, -0.5], [0.0, 1.0], [0.3, 0.3]],
    );
    // `K` is an integer: not differentiated (and left out of the check).
    json["shared"].as_object_mut().expect("shared").remove("K");
    let statics = static_names(&json);
    json["shared"]["K"] = Json::from(3);
    let grads = gradients(&program, "loss", &statics, &json, &RunConfig::default());
    let h = 1e-6;
    for (name, g) in &grads {
        let Data::F64(values) = &g.data else {
            panic!("f64")
        };
        for (k, value) in values.iter().enumerate() {
            let mut plus = json.clone();
            let mut minus = json.clone();
            let x = element_mut(&mut plus["shared"][name], k)
                .as_f64()
                .expect("a number");
            *element_mut(&mut plus["shared"][name], k) = Json::from(x + h);
            *element_mut(&mut minus["shared"][name], k) = Json::from(x - h);
            let fd = (total_loss(&program, "loss", &plus) - total_loss(&program, "loss", &minus))
                / (2.0 * h);
            assert!(
                (value - fd).abs() <= 1e-6,
                "d/d{name}[{k}]: {value} against {fd}"
            );
        }
    }
    // Row 1 of `E` is read by no member: its gradient is zero.
    let e = &grads.iter().find(|(n, _)| n == "E").expect("E").1;
    assert_eq!(e.shape, vec![4, 3]);
    assert_eq!(e_row(e, 1), vec![0.0; 3]);
}

/// Slices of statics (`E[word..word + 2]`, a slice of a row read in
/// place, `B[..1]`): their adjoints go to the statics' gradients.
#[test]
fn slices_of_statics_match_finite_differences() {
    let source = r#"
extern "autobatch" {
    static E: [[f64; 3]; 4];
    static B: [f64; 2];
}
fn loss(word: usize, y: [f64; 2]) -> f64 {
    let rows = E[word..word + 2];
    let x = E[word][1..1 + 2];
    let d = x * B - y;
    dot(d, d) + sum(rows[1]) * B[..1][0]
}
"#;
    let program = compiled(source, "sliced.ab");
    let json = serde_json::json!({
        "batch": {"word": [0, 2, 1], "y": [[0.1, 0.2], [0.5, -0.5], [0.0, 1.0]]},
        "shared": {
            "E": [[1.0, 2.0, 3.0], [0.5, 0.1, 0.2], [-1.0, 0.3, 0.7], [0.2, 0.2, -0.9]],
            "B": [0.3, -0.7]
        }
    });
    check_against_finite_differences(&program, "loss", &json);
}

fn e_row(e: &Tensor, i: usize) -> Vec<f64> {
    let Data::F64(v) = &e.data else { panic!("f64") };
    v[3 * i..3 * i + 3].to_vec()
}

/// The gradients of a model under every configuration and 1 or 2 threads.
fn every_configuration(program: &Compiled, entry: &str, json: &Json) -> Vec<Vec<(String, Tensor)>> {
    let statics = static_names(json);
    let mut all = Vec::new();
    for (strategy, lanes, block_choice) in configurations() {
        for threads in [1, 2] {
            let mut config = run_config(strategy, lanes, block_choice);
            config.options.threads = threads;
            all.push(gradients(program, entry, &statics, json, &config));
        }
    }
    all
}

#[test]
fn every_strategy_and_member_order_gives_the_same_bits() {
    for (model, input) in [
        ("treelstm.ab", "treelstm_train_small.json"),
        ("birnn.ab", "birnn_train_small.json"),
    ] {
        let program = compiled(&read(model), model);
        let json: Json = serde_json::from_str(&read(input)).expect("JSON");
        let all = every_configuration(&program, "loss", &json);
        for other in &all[1..] {
            assert_eq!(
                &all[0], other,
                "{model}: the gradients differ between configurations"
            );
        }
        // The members in reverse order: the same multiset of contributions.
        let mut reversed = json.clone();
        for values in reversed["batch"]
            .as_object_mut()
            .expect("batch")
            .values_mut()
        {
            values.as_array_mut().expect("a list per member").reverse();
        }
        let statics = static_names(&json);
        let again = gradients(&program, "loss", &statics, &reversed, &RunConfig::default());
        assert_eq!(
            all[0], again,
            "{model}: the order of the members changed the gradients"
        );
    }
}

#[test]
fn a_member_that_faults_contributes_nothing() {
    let program = compiled(SMALL, "small.ab");
    let statics = vec!["W".to_string(), "B".to_string(), "E".to_string()];
    let with_fault = small_inputs(&[0, 2, 3], &[[0.1, 0.2], [50.0, 0.0], [0.0, 1.0]]);
    let without = small_inputs(&[0, 3], &[[0.1, 0.2], [0.0, 1.0]]);
    for (strategy, lanes, block_choice) in configurations() {
        let config = run_config(strategy, lanes, block_choice);
        let names: Vec<&str> = statics.iter().map(String::as_str).collect();
        let run = program
            .bind_static_gradient("loss", &names, &inputs(&with_fault))
            .expect("binds")
            .run(&config)
            .expect("runs");
        assert!(run.members[1].is_err(), "member 1 fails its assertion");
        let expected = gradients(&program, "loss", &statics, &without, &config);
        assert_eq!(run.static_gradients, expected, "{strategy}");
    }
}

/// A member whose loss faults in an operation whose value nothing reads
/// (`unused` divides by zero for word 3) stops with the error the loss
/// itself stops with, kind, message and place, and its term is not in the
/// sum: the gradient is that of the other members alone.
#[test]
fn a_member_whose_loss_faults_in_an_unused_operation_is_reported_and_left_out() {
    let program = compiled(SMALL, "small.ab");
    let statics = vec!["W".to_string(), "B".to_string(), "E".to_string()];
    let names: Vec<&str> = statics.iter().map(String::as_str).collect();
    let with_fault = small_inputs(&[0, 3, 2], &[[0.1, 0.2], [0.5, 0.0], [0.0, 1.0]]);
    let without = small_inputs(&[0, 2], &[[0.1, 0.2], [0.0, 1.0]]);
    let plain = program
        .bind("unused", &inputs(&with_fault))
        .expect("binds")
        .run(&RunConfig::default())
        .expect("runs");
    let Err(expected) = &plain.members[1] else {
        panic!("the loss of word 3 divides by zero: {:?}", plain.members[1]);
    };
    assert_eq!(expected.kind, autobatch::ErrorKind::DivisionByZero);
    assert_eq!((expected.loc.line, expected.loc.column), (20, 13));
    for (strategy, lanes, block_choice) in configurations() {
        let config = run_config(strategy, lanes, block_choice);
        let run = program
            .bind_static_gradient("unused", &names, &inputs(&with_fault))
            .expect("binds")
            .run(&config)
            .expect("runs");
        assert_eq!(run.members[1].as_ref().err(), Some(expected), "{strategy}");
        assert!(
            run.members[0].is_ok() && run.members[2].is_ok(),
            "{strategy}"
        );
        let alone = gradients(&program, "unused", &statics, &without, &config);
        assert_eq!(run.static_gradients, alone, "{strategy}");
    }
}

#[test]
fn requests_that_cannot_be_served_are_refused_with_what_is_wrong() {
    let program = compiled(SMALL, "small.ab");
    let json = small_inputs(&[0], &[[0.1, 0.2]]);
    let refused = |entry: &str, statics: &[&str], json: &Json| {
        program
            .bind_static_gradient(entry, statics, &inputs(json))
            .expect_err("refused")
    };
    let e = refused("both", &["W"], &json);
    assert_eq!(e.kind(), InputErrorKind::NotDifferentiable);
    assert!(
        e.message().contains("returns one float scalar") && e.message().contains("[f64; 2]"),
        "{}",
        e.message()
    );
    let e = refused("loss", &["V"], &json);
    assert_eq!(e.kind(), InputErrorKind::UnknownName);
    assert!(
        e.message().contains("no static named `V`") && e.message().contains("W, B, E"),
        "{}",
        e.message()
    );
    let e = refused("loss", &["K"], &json);
    assert!(
        e.message().contains("`K`") && e.message().contains("not a float"),
        "{}",
        e.message()
    );
    let e = refused("loss", &["W", "W"], &json);
    assert_eq!(e.kind(), InputErrorKind::DuplicatedName);
    let e = refused("loss", &[], &json);
    assert!(
        e.message().contains("at least one static"),
        "{}",
        e.message()
    );
    // Recursion whose control depends on a differentiated static: the rule of `grad`.
    let recursion = serde_json::json!({
        "batch": {"n": [2]},
        "shared": {"W": vec![[0.0; 3]; 2], "B": [1.0, 2.0], "E": vec![[0.0; 3]; 4], "K": 3}
    });
    let e = refused("recursive", &["B"], &recursion);
    assert_eq!(e.kind(), InputErrorKind::NotDifferentiable);
    assert!(
        e.message().contains("small.ab:16:29") && e.message().contains("`--grad-statics`"),
        "{}",
        e.message()
    );
    // Random draws in the differentiated code, as for `grad`.
    let e = refused("noisy", &["W"], &json);
    assert_eq!(e.kind(), InputErrorKind::NotDifferentiable);
    assert!(
        e.message().contains("small.ab:18") && e.message().contains("random"),
        "{}",
        e.message()
    );
    // The same recursion is fine with respect to a static it does not branch on.
    assert!(program
        .bind_static_gradient("recursive", &["W"], &inputs(&recursion))
        .is_ok());
}

#[test]
fn the_derived_program_reads_back_from_its_text() {
    let program = compiled(&read("treelstm.ab"), "treelstm.ab");
    let json: Json = serde_json::from_str(&read("treelstm_train_small.json")).expect("JSON");
    let statics = static_names(&json);
    let names: Vec<&str> = statics.iter().map(String::as_str).collect();
    let bound = program
        .bind_static_gradient("loss", &names, &inputs(&json))
        .expect("binds");
    let text = autobatch_ir::print::program_to_string(bound.program());
    assert!(
        text.contains("static_adjoint.outer s4 (UIL)"),
        "the log of a product"
    );
    assert!(
        text.contains("static_adjoint.row s0 (E)"),
        "the log of a row read"
    );
    assert!(
        text.contains("static_adjoint.dense s12 (BI)"),
        "the log of a bias"
    );
    let parsed = autobatch_ir::parse::parse_program(&text).expect("the text parses");
    assert_eq!(autobatch_ir::print::program_to_string(&parsed), text);
}

/// Rows read by computed or assigned indices, a variable holding a static
/// in one place and something else in another, a self tail call (a loop
/// whose parameters are assigned) and the elements of a row read one by one
/// (`e[0] * e[1]`): all derived over the tape, against central
/// differences, with the same bits under every configuration.
const HELD_ROWS: &str = r#"
extern "autobatch" { static E: [[f64; 2]; 4]; static W: [f64; 2]; }
fn chain(n: i64) -> f64 {
    if n == 0 {
        1.0
    } else {
        let k = (n % 4) as usize;
        let e = E[k];
        e[0].sin() * chain(n - 1) + e[1] * W[1]
    }
}
fn tail(n: i64, acc: f64) -> f64 {
    if n == 0 {
        return acc;
    }
    let k = ((n * 3) % 4) as usize;
    tail(n - 1, acc * E[k][0].cos() + E[k][1])
}
fn walk(n: i64) -> f64 {
    let mut s = 0.0;
    let mut i = 0;
    let mut row = E[0];
    while i < n {
        s = s + row[0] * row[1];
        row = E[((i * 7) % 4) as usize];
        i += 1;
    }
    s + row[1]
}
fn mixed(n: i64) -> f64 {
    let mut w = W;
    if n % 2 == 0 {
        w = w * 2.0;
    }
    sum(w * w)
}
fn pick(k: usize) -> f64 {
    let e = E[k];
    e[0] * e[1]
}
fn loss(n: i64) -> f64 { chain(n) + tail(n, 0.5) + walk(n) + mixed(n) + pick((n % 4) as usize) }
"#;

#[test]
fn rows_held_by_computed_indices_match_finite_differences_on_every_strategy() {
    let program = compiled(HELD_ROWS, "held_rows.ab");
    let json = serde_json::json!({
        "batch": {"n": [0, 1, 5, 12]},
        "shared": {"E": [[0.3, -0.2], [1.1, 0.4], [-0.7, 0.9], [0.5, 0.05]], "W": [0.6, -1.3]}
    });
    check_against_finite_differences(&program, "loss", &json);
    let all = every_configuration(&program, "loss", &json);
    for other in &all[1..] {
        assert_eq!(
            &all[0], other,
            "the gradients differ between configurations"
        );
    }
}

/// The same functions' gradient with respect to statics is derived over the
/// tape: the derived program holds no checkpointed vjp (`'svjp` functions
/// of blocks, `.b1`, ...), only forward and backward parts.
#[test]
fn rows_held_by_computed_indices_are_taped() {
    let program = compiled(HELD_ROWS, "held_rows.ab");
    let text = program
        .static_gradient_ir_text("loss", &["E", "W"])
        .unwrap_or_else(|e| panic!("{}", e.message()));
    assert!(text.contains(".fwd") && text.contains(".bwd"), "{text}");
    assert!(!text.contains(".b1"), "a checkpointed derivation:\n{text}");
}
