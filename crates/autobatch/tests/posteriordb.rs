//! The posteriordb models shipped in `examples/posteriordb/` against Stan:
//! at five posterior points per model (recorded by
//! `tools/posteriordb_reference.py` in `log_density_checks.json`), our
//! `log_density` must differ between points exactly as Stan's `log_prob`
//! does (Stan drops the constants of `~` statements, so only differences
//! are compared), and `value_and_grad(log_density, theta)` must give Stan's
//! `grad_log_prob`, under every strategy and lanes mode.

#[allow(dead_code)]
mod harness;

use std::path::PathBuf;

use autobatch::{compile, value_to_json, Inputs};
use harness::{configurations, run_config};
use serde_json::{json, Value};

/// (model folder, model file): arK's loop form (loops over the time steps
/// and the lags, differentiated over a tape) is checked against the same
/// points as its matrix form, and each model written with its parameters
/// declared (`model_constrained.ab`, lowered to `log_density` over the
/// unconstrained vector by `autobatch::parameters`) against them too.
const MODELS: &[(&str, &str)] = &[
    ("eight_schools", "model.ab"),
    ("kidiq", "model.ab"),
    ("arK", "model.ab"),
    ("arK", "model_loop.ab"),
    ("eight_schools", "model_constrained.ab"),
    ("kidiq", "model_constrained.ab"),
    ("arK", "model_constrained.ab"),
];

/// Relative agreement asked of values and gradients (Stan and we evaluate the
/// same formulas in a different order).
const TOLERANCE: f64 = 1e-8;

fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/posteriordb")
        .join(name)
}

fn read_json(path: &PathBuf) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn log_density_and_gradient_agree_with_stan() {
    let mut failures = Vec::new();
    for (folder, file) in MODELS {
        let name = format!("{folder}/{file}");
        let dir = model_dir(folder);
        let model = std::fs::read_to_string(dir.join(file)).expect("the model exists");
        let (model, d) = match autobatch::parameters::lower_model(&model) {
            Ok(Some(lowered)) => (lowered.source, autobatch::parameters::UNCONSTRAINED_DIM),
            Ok(None) => (model, "D"),
            Err(e) => panic!("{name}: {e:?}"),
        };
        // The model plus an entry that returns the value and the gradient.
        let source = format!(
            "{model}\nfn value_and_gradient(theta: [f64; {d}]) -> (f64, [f64; {d}]) {{ value_and_grad(log_density, theta) }}\n"
        );
        let compiled = compile(&source, "model.ab")
            .unwrap_or_else(|e| panic!("{name}: does not compile:\n{}", e.render(false)));
        let data = read_json(&dir.join("data.json"));
        let checks = read_json(&dir.join("log_density_checks.json"));
        let points = checks["points"].as_array().expect("points");
        assert!(points.len() >= 2, "{name}: too few points");

        // Shared: the data's statics (a count such as "J" that only names a
        // symbolic dimension is not an input of `run`).
        let statics: Vec<String> = compiled
            .program()
            .statics
            .iter()
            .map(|(_, s)| s.name.clone())
            .collect();
        let shared: serde_json::Map<String, Value> = data
            .as_object()
            .expect("data is an object")
            .iter()
            .filter(|(k, _)| statics.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let thetas: Vec<Value> = points.iter().map(|p| p["theta"].clone()).collect();
        let inputs_json = json!({ "batch": { "theta": thetas }, "shared": shared });
        let inputs = Inputs::from_json_str(&inputs_json.to_string()).expect("inputs parse");
        let bound = compiled
            .bind("value_and_gradient", &inputs)
            .unwrap_or_else(|e| panic!("{name}: inputs do not bind: {}", e.message()));

        for (strategy, lanes, block_choice) in configurations() {
            let config = run_config(strategy, lanes, block_choice);
            let result = bound.run(&config).expect("runs");
            let outputs: Vec<(f64, Vec<f64>)> = result
                .members
                .iter()
                .map(|m| {
                    let value = value_to_json(m.as_ref().expect("no member fails"));
                    let lp = value[0].as_f64().expect("a float value");
                    let grad = value[1]
                        .as_array()
                        .expect("a gradient array")
                        .iter()
                        .map(|g| g.as_f64().expect("float"))
                        .collect();
                    (lp, grad)
                })
                .collect();
            let base_ours = outputs[0].0;
            let base_stan = points[0]["log_prob"].as_f64().expect("log_prob");
            for (i, (point, (lp, grad))) in points.iter().zip(&outputs).enumerate() {
                let stan_diff = point["log_prob"].as_f64().expect("log_prob") - base_stan;
                let our_diff = lp - base_ours;
                if !close(our_diff, stan_diff) {
                    failures.push(format!(
                        "{name} {strategy}/{lanes}/{block_choice} point {i}: log_density difference {our_diff} vs Stan's {stan_diff}"
                    ));
                }
                let stan_grad = point["grad_log_prob"].as_array().expect("grad_log_prob");
                assert_eq!(stan_grad.len(), grad.len(), "{name}: gradient length");
                for (k, (ours, theirs)) in grad.iter().zip(stan_grad).enumerate() {
                    let theirs = theirs.as_f64().expect("float");
                    if !close(*ours, theirs) {
                        failures.push(format!(
                            "{name} {strategy}/{lanes}/{block_choice} point {i}: d/dtheta[{k}] = {ours} vs Stan's {theirs}"
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
