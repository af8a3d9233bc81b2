//! The neural models of `examples/models/` against a numpy reference: each
//! model runs on its small checked-in input
//! (`tools/treelstm_inputs.py` wrote the input and, with numpy in float32,
//! the expected outputs) under every strategy and batching configuration,
//! and every member's outputs must agree with numpy's to float32 rounding.
//! All strategies must also agree with one another bit for bit.

#[allow(dead_code)]
mod harness;

use std::path::PathBuf;

use autobatch::{compile, value_to_json, Inputs, RunConfig};
use harness::configurations;
use serde_json::Value;

/// Agreement asked of numpy's float32 outputs (the sums are taken in another
/// order; the logits are about 0.1).
const TOLERANCE: f64 = 1e-5;

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/models")
}

fn read(name: &str) -> String {
    let path = models().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Runs `program`'s `entry` on `input` under every configuration; checks
/// every member against `expected` and every configuration against the first.
fn check_model(program: &str, entry: &str, input: &str, expected: &str) {
    let compiled = compile(&read(program), program)
        .unwrap_or_else(|e| panic!("{program} does not compile:\n{}", e.render(false)));
    let inputs = Inputs::from_json_str(&read(input)).expect("the input parses");
    let bound = compiled
        .bind(entry, &inputs)
        .unwrap_or_else(|e| panic!("{program}: the input does not bind: {}", e.message()));
    let expected: Vec<Vec<f64>> = serde_json::from_str(&read(expected)).expect("expected JSON");
    let mut first: Option<Vec<Value>> = None;
    let mut failures = Vec::new();
    for (strategy, lanes, block_choice) in configurations() {
        let config = RunConfig {
            strategy,
            lanes,
            block_choice,
            ..RunConfig::default()
        };
        let run = bound.run(&config).expect("runs");
        let outputs: Vec<Value> = run
            .members
            .iter()
            .map(|m| value_to_json(m.as_ref().expect("no member fails")))
            .collect();
        for (member, (ours, numpy)) in outputs.iter().zip(&expected).enumerate() {
            let ours: Vec<f64> = ours
                .as_array()
                .expect("an array of outputs")
                .iter()
                .map(|x| x.as_f64().expect("a float"))
                .collect();
            let close = ours.len() == numpy.len()
                && ours
                    .iter()
                    .zip(numpy)
                    .all(|(a, b)| (a - b).abs() <= TOLERANCE);
            if !close {
                failures.push(format!(
                    "{program} {strategy}/{lanes}/{block_choice} member {member}: {ours:?}, numpy {numpy:?}"
                ));
            }
        }
        match &first {
            None => first = Some(outputs),
            Some(first) if *first != outputs => failures.push(format!(
                "{program} {strategy}/{lanes}/{block_choice}: differs from the first configuration"
            )),
            Some(_) => {}
        }
    }
    assert_eq!(expected.len(), first.map_or(0, |f| f.len()), "member count");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn treelstm_with_join_over_sst_trees_matches_numpy() {
    check_model(
        "treelstm.ab",
        "classify",
        "treelstm_small.json",
        "treelstm_small.expect.json",
    );
}

#[test]
fn treelstm_over_sst_trees_matches_numpy() {
    check_model(
        "treelstm_seq.ab",
        "classify",
        "treelstm_small.json",
        "treelstm_small.expect.json",
    );
}
