//! Models and data that cannot be sampled: each gets an error that says
//! what is wrong and where, of the kind the command line maps to exit 1
//! (the model) or 2 (the data, the settings).

use autobatch_sample::{Model, SampleConfig, SampleError};

fn model_error(source: &str, data: &str) -> SampleError {
    match Model::new(source, "m.ab", data) {
        Ok(_) => panic!("expected an error for:\n{source}\nwith data {data}"),
        Err(e) => e,
    }
}

fn assert_model(source: &str, data: &str, wanted: &[&str]) {
    let e = model_error(source, data);
    assert_eq!(e.exit_code(), 1, "{e}");
    for w in wanted {
        assert!(e.to_string().contains(w), "`{e}` does not contain `{w}`");
    }
}

fn assert_data(source: &str, data: &str, wanted: &[&str]) {
    let e = model_error(source, data);
    assert!(matches!(e, SampleError::Data(_)), "{e:?}");
    assert_eq!(e.exit_code(), 2);
    for w in wanted {
        assert!(e.to_string().contains(w), "`{e}` does not contain `{w}`");
    }
}

const OK: &str = "\
extern \"autobatch\" {
    static y: [f64; N];
}
fn log_density(theta: [f64; 2]) -> f64 {
    let r = y - theta[0];
    -0.5 * dot(r, r) * (-2.0 * theta[1]).exp() - N as f64 * theta[1]
}
";

#[test]
fn models_without_a_usable_log_density() {
    assert_model(
        "fn f(x: f64) -> f64 { x }\n",
        "{}",
        &["no function `log_density`"],
    );
    assert_model(
        "fn log_density(a: [f64; 2], b: f64) -> f64 { b }\n",
        "{}",
        &["m.ab:1:1", "takes 2 parameters"],
    );
    assert_model(
        "fn log_density(theta: f64) -> f64 { theta }\n",
        "{}",
        &["type `f64`", "one-dimensional array of f64"],
    );
    // A model in f32 is sampled (tests/sampling.rs), but in f32 throughout.
    assert_model(
        "fn log_density(theta: [f32; 2]) -> f64 { theta[0] as f64 }\n",
        "{}",
        &["returns `f64`", "an f32 like its parameter"],
    );
    assert_model(
        "fn log_density(theta: [i64; 2]) -> f64 { 0.0 }\n",
        "{}",
        &["`[i64; 2]`", "one-dimensional array of f64 (or f32)"],
    );
    assert_model(
        "fn log_density(theta: [f64; 2]) -> [f64; 2] { theta }\n",
        "{}",
        &["returns `[f64; 2]`", "an f64"],
    );
    assert_model(
        "fn log_density(theta: [[f64; 2]; 2]) -> f64 { theta[0][0] }\n",
        "{}",
        &["`[[f64; 2]; 2]`"],
    );
    assert_model(
        "fn log_density(theta: [f64; 0]) -> f64 { 0.0 }\n",
        "{}",
        &["length 0"],
    );
    assert_model(
        "fn nuts_leapfrog(x: f64) -> f64 { x }\nfn log_density(theta: [f64; 1]) -> f64 { theta[0] }\n",
        "{}",
        &["m.ab:1:1", "`nuts_leapfrog`", "reserves"],
    );
}

#[test]
fn compile_errors_point_into_the_model() {
    // Line 3 of the model, whatever the library appended after it.
    let e = model_error(
        "// a comment\nfn log_density(theta: [f64; 2]) -> f64 {\n    theta[0] + undefined_name\n}\n",
        "{}",
    );
    assert!(matches!(e, SampleError::Compile(_)));
    assert_eq!(e.exit_code(), 1);
    let text = e.to_string();
    assert!(text.contains("m.ab:3:"), "{text}");
    assert!(text.contains("undefined_name"), "{text}");
    assert!(!text.contains("nuts.ab"), "{text}");
}

#[test]
fn a_log_density_that_cannot_be_differentiated() {
    // A `while` whose condition depends on theta is outside what `grad`
    // differentiates; the error points at the condition.
    let source = "\
fn log_density(theta: [f64; 2]) -> f64 {
    let mut s = 0.0;
    let mut i = 0;
    while (i as f64) < theta[0] {
        s += theta[1];
        i += 1;
    }
    s
}
";
    let e = model_error(source, "{}");
    assert_eq!(e.exit_code(), 1, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("m.ab:4:11") && text.contains("while"),
        "{text}"
    );
    // The note naming the library's `value_and_grad` places it in the sampler's text.
    assert!(text.contains("of the sampler"), "{text}");
}

#[test]
fn bad_data() {
    assert_data(OK, "{", &["not valid JSON"]);
    assert_data(OK, "[1, 2]", &["must be a JSON object"]);
    assert_data(OK, "{}", &["no `y`", "m.ab:2:"]);
    assert_data(
        OK,
        r#"{"y": [1.0, 2.0], "z": 3}"#,
        &["`z`", "neither a static"],
    );
    assert_data(
        OK,
        r#"{"y": [1.0, 2.0], "y": [3.0]}"#,
        &["repeats a key", "y"],
    );
    assert_data(OK, r#"{"y": [[1.0], [2.0]]}"#, &["y"]);
    assert_data(OK, r#"{"y": [1.0, 2.0], "N": 3}"#, &["`N` = 3", "N = 2"]);
    assert_data(
        OK,
        r#"{"y": [1.0, 2.0], "N": -1}"#,
        &["non-negative integer"],
    );
    // A dimension that agrees with the shapes is welcome.
    assert!(Model::new(OK, "m.ab", r#"{"N": 2, "y": [1.0, 2.0]}"#).is_ok());
    // The length of theta from the data, or an error saying how to give it.
    let symbolic = "fn log_density(theta: [f64; K]) -> f64 { -0.5 * dot(theta, theta) }\n";
    assert_eq!(
        Model::new(symbolic, "m.ab", r#"{"K": 3}"#).unwrap().dim(),
        3
    );
    assert_data(symbolic, "{}", &["length K of `theta`", "\"K\""]);
    assert_data(symbolic, r#"{"K": 0}"#, &["0"]);
}

#[test]
fn data_errors_quote_numbers_as_written() {
    // As `run --inputs` does: the number as the file writes it, not as it
    // parses (99999999999999999999 parses to 1e20, 2.50 to 2.5).
    let counts = "\
extern \"autobatch\" {
    static k: [i32; 2];
}
fn log_density(theta: [f64; 1]) -> f64 { -0.5 * theta[0] * theta[0] * k[0] as f64 }
";
    let e = model_error(counts, r#"{"k": [1, 99999999999999999999]}"#).to_string();
    assert!(e.contains("99999999999999999999"), "{e}");
    assert!(!e.contains("1e20"), "{e}");
    assert_data(
        OK,
        r#"{"y": [1.0, 2.0], "N": 2.50}"#,
        &["`N` as 2.50;", "non-negative integer"],
    );
    assert_data(OK, r#"{"y": [1.0, 2.0], "N": -1e0}"#, &["`N` as -1e0;"]);
}

#[test]
fn meaningless_settings() {
    let model = Model::new(OK, "m.ab", r#"{"y": [0.5, 1.5, 1.0]}"#).unwrap();
    for (config, wanted) in [
        (
            SampleConfig {
                chains: 0,
                ..SampleConfig::default()
            },
            "chains",
        ),
        (
            SampleConfig {
                draws: 0,
                ..SampleConfig::default()
            },
            "draws",
        ),
        (
            SampleConfig {
                max_depth: 0,
                ..SampleConfig::default()
            },
            "tree depth",
        ),
        (
            SampleConfig {
                target_accept: 1.0,
                ..SampleConfig::default()
            },
            "acceptance",
        ),
        // Refused before anything is allocated, not an out-of-memory abort.
        (
            SampleConfig {
                chains: 1_000_000_000,
                ..SampleConfig::default()
            },
            "run fewer chains",
        ),
    ] {
        let e = model.sample(&config, &mut |_| {}).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(wanted), "{e}");
    }
}

#[test]
fn a_failing_chain_is_reported_with_its_place_in_the_model() {
    // An out-of-bounds index wherever theta[0] > -10, so every initial draw
    // in (-2, 2): the chains find no initial point and stop with the model's
    // error, located in the model, not a panic. (A fault met later in a
    // trajectory only rejects the step.)
    let source = "\
fn log_density(theta: [f64; 2]) -> f64 {
    let a = [1.0, 2.0];
    let k = if theta[0] > -10.0 { 5 } else { 0 };
    -0.5 * dot(theta, theta) + a[k]
}
";
    let model = Model::new(source, "m.ab", "{}").unwrap();
    let config = SampleConfig {
        chains: 2,
        warmup: 20,
        draws: 20,
        ..SampleConfig::default()
    };
    let e = model.sample(&config, &mut |_| {}).unwrap_err();
    assert!(matches!(e, SampleError::Chain(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("index_out_of_bounds") && text.contains("m.ab:4:"),
        "{text}"
    );
}
