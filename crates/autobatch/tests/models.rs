//! The neural models of `examples/models/` against a numpy reference: each
//! model runs on its small checked-in input (`tools/treelstm_inputs.py` and
//! `tools/models_inputs.py` wrote the inputs and, with numpy in float32, the
//! expected outputs: each member's result flattened to a list of numbers)
//! under every strategy and batching configuration, and every member's
//! outputs must agree with numpy's to float32 rounding. All strategies must
//! also agree with one another bit for bit.

#[allow(dead_code)]
mod harness;

use std::path::PathBuf;

use autobatch::{compile, value_to_json, Inputs};
use harness::{configurations, run_config};
use serde_json::Value;

/// Agreement asked of numpy's float32 outputs, relative to the larger of 1
/// and numpy's value (the sums are taken in another order; the outputs are
/// between 0.01 and 20).
const TOLERANCE: f64 = 1e-5;

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/models")
}

fn read(name: &str) -> String {
    let path = models().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The numbers of a result (nested arrays and tuples), in order.
fn flatten(value: &Value, out: &mut Vec<f64>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| flatten(v, out)),
        v => out.push(v.as_f64().unwrap_or_else(|| panic!("a number, found {v}"))),
    }
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
        let config = run_config(strategy, lanes, block_choice);
        let run = bound.run(&config).expect("runs");
        let outputs: Vec<Value> = run
            .members
            .iter()
            .map(|m| value_to_json(m.as_ref().expect("no member fails")))
            .collect();
        for (member, (ours, numpy)) in outputs.iter().zip(&expected).enumerate() {
            let mut flat = Vec::new();
            flatten(ours, &mut flat);
            let ours = flat;
            let close = ours.len() == numpy.len()
                && ours
                    .iter()
                    .zip(numpy)
                    .all(|(a, b)| (a - b).abs() <= TOLERANCE * b.abs().max(1.0));
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

/// The SST training model's loss (every node's label, a ragged batch: each
/// tree its own node count) against numpy (`tools/sst_bench.py --small`).
#[test]
fn treelstm_training_loss_over_sst_trees_matches_numpy() {
    check_model(
        "treelstm_sst.ab",
        "loss",
        "treelstm_sst_small.json",
        "treelstm_sst_small.expect.json",
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

#[test]
fn mv_rnn_over_sst_trees_matches_numpy() {
    check_model(
        "mvrnn.ab",
        "classify",
        "mvrnn_small.json",
        "mvrnn_small.expect.json",
    );
}

#[test]
fn bidirectional_lstm_over_ragged_sequences_matches_numpy() {
    check_model(
        "birnn.ab",
        "classify",
        "birnn_small.json",
        "birnn_small.expect.json",
    );
}

#[test]
fn nested_rnn_over_inner_sequences_matches_numpy() {
    check_model(
        "nested.ab",
        "classify",
        "nested_small.json",
        "nested_small.expect.json",
    );
}

#[test]
fn doubly_recurrent_tree_decoder_matches_numpy() {
    check_model(
        "drnn.ab",
        "decode",
        "drnn_small.json",
        "drnn_small.expect.json",
    );
}

#[test]
fn berxit_transformer_with_early_exit_matches_numpy() {
    check_model(
        "berxit.ab",
        "classify",
        "berxit_small.json",
        "berxit_small.expect.json",
    );
}

#[test]
fn stack_rnn_with_push_and_pop_matches_numpy() {
    check_model(
        "stackrnn.ab",
        "classify",
        "stackrnn_small.json",
        "stackrnn_small.expect.json",
    );
}

#[test]
fn mv_rnn_without_join_matches_numpy() {
    check_model(
        "mvrnn_seq.ab",
        "classify",
        "mvrnn_small.json",
        "mvrnn_small.expect.json",
    );
}

#[test]
fn bidirectional_lstm_without_join_matches_numpy() {
    check_model(
        "birnn_seq.ab",
        "classify",
        "birnn_small.json",
        "birnn_small.expect.json",
    );
}

#[test]
fn nested_rnn_without_pfor_matches_numpy() {
    check_model(
        "nested_seq.ab",
        "classify",
        "nested_small.json",
        "nested_small.expect.json",
    );
}

#[test]
fn doubly_recurrent_decoder_without_join_matches_numpy() {
    check_model(
        "drnn_seq.ab",
        "decode",
        "drnn_small.json",
        "drnn_small.expect.json",
    );
}

#[test]
fn berxit_without_join_matches_numpy() {
    check_model(
        "berxit_seq.ab",
        "classify",
        "berxit_small.json",
        "berxit_small.expect.json",
    );
}
