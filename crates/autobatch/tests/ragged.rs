//! Ragged batches beyond what a program file can say: a member of a ragged
//! batch gets exactly the result (random draws included) it gets in a batch
//! where every member has its size, under every strategy, lanes mode, block
//! choice and thread count; and the run says how many sizes it ran.

// Only the configurations are used here.
#[allow(dead_code)]
mod harness;

use autobatch::{compile, Compiled, Inputs, RunConfig};
use harness::configurations;
use serde_json::{json, Value};

const SOURCE: &str = r#"
extern "autobatch" { static SCALE: f64; }

/// A random walk along the member's own array: the draws depend on the
/// member's index in the batch, the number of them on its length.
fn walk(xs: [f64; L], n: i64) -> (f64, [f64; L], i64) {
    let mut at = 0.0;
    let mut noisy = xs;
    for i in 0..xs.len() {
        at = at + xs[i] * SCALE + normal();
        noisy[i] = xs[i] + uniform();
    }
    (at + sum(softmax(noisy)), noisy, n + xs.len() as i64)
}
"#;

fn compiled() -> Compiled {
    compile(SOURCE, "walk.ab").unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// Member `m`'s array: length `m % 4` (0 to 3), so sizes repeat.
fn member_array(m: usize) -> Vec<f64> {
    (0..m % 4)
        .map(|k| (m * 3 + k) as f64 * 0.25 - 1.0)
        .collect()
}

fn run(compiled: &Compiled, arrays: &[Vec<f64>], config: &RunConfig) -> Value {
    let inputs = json!({
        "batch": {"xs": arrays, "n": (0..arrays.len()).collect::<Vec<_>>()},
        "shared": {"SCALE": 0.5},
    });
    let inputs = Inputs::from_json_str(&inputs.to_string()).expect("inputs parse");
    let bound = compiled.bind("walk", &inputs).expect("binds");
    bound.run(config).expect("runs").to_json(true)
}

#[test]
fn a_ragged_member_gets_what_it_gets_in_a_batch_of_its_size() {
    let compiled = compiled();
    let members = 11;
    let arrays: Vec<Vec<f64>> = (0..members).map(member_array).collect();
    for (strategy, lanes, block_choice) in configurations() {
        for threads in [1, 2] {
            let config = RunConfig {
                strategy,
                lanes,
                block_choice,
                threads,
                seed: 5,
                ..RunConfig::default()
            };
            let ragged = run(&compiled, &arrays, &config);
            assert_eq!(
                ragged["stats"]["sizes"], 4,
                "lengths 0..3: {}",
                ragged["stats"]
            );
            assert_eq!(ragged["stats"]["batch_size"], members);
            for m in 0..members {
                // Every member of this batch has member m's array.
                let uniform = run(&compiled, &vec![arrays[m].clone(); members], &config);
                assert_eq!(uniform["stats"]["sizes"], 1);
                assert_eq!(
                    ragged["results"][m], uniform["results"][m],
                    "{strategy:?}/{lanes:?}/{block_choice:?}, {threads} threads, member {m}"
                );
            }
        }
    }
}

#[test]
fn ragged_results_have_each_members_length() {
    let compiled = compiled();
    let arrays: Vec<Vec<f64>> = (0..6).map(member_array).collect();
    let out = run(&compiled, &arrays, &RunConfig::default());
    for (m, array) in arrays.iter().enumerate() {
        let ok = &out["results"][m]["ok"];
        assert_eq!(
            ok[1].as_array().expect("an array").len(),
            array.len(),
            "{ok}"
        );
        assert_eq!(ok[2], json!(m + array.len()));
    }
}

#[test]
fn the_typed_api_takes_and_gives_ragged_arrays() {
    let program = compile("fn twice(xs: [f64; L]) -> [f64; L] { xs * 2.0 }", "t.ab")
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let out = program
        .call("twice")
        .batched("xs", vec![vec![1.0, 2.0], vec![], vec![3.0]])
        .run::<Vec<f64>>(&RunConfig::default())
        .expect("runs");
    assert_eq!(out.members, [Ok(vec![2.0, 4.0]), Ok(vec![]), Ok(vec![6.0])]);
}

/// `examples/ragged/attention.ab` against numpy's softmax attention
/// (`tools/ragged_reference.py`), on every configuration: the kernels' own
/// order of sums differs from numpy's, so within a relative 1e-12.
#[test]
fn the_attention_example_matches_numpy() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ragged");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("the example's files");
    let compiled = compile(&read("attention.ab"), "attention.ab")
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let inputs = Inputs::from_json_str(&read("attention.json")).expect("inputs parse");
    let expected: Value = serde_json::from_str(&read("attention.expect.json")).expect("JSON");
    let bound = compiled.bind("attend", &inputs).expect("binds");
    for (strategy, lanes, block_choice) in configurations() {
        let config = RunConfig {
            strategy,
            lanes,
            block_choice,
            ..RunConfig::default()
        };
        let got = bound.run(&config).expect("runs").to_json(false)["results"].clone();
        for (member, (g, e)) in got
            .as_array()
            .expect("results")
            .iter()
            .zip(expected.as_array().expect("expected"))
            .enumerate()
        {
            let (g, e) = (
                g["ok"].as_array().expect("a value"),
                e["ok"].as_array().expect("a value"),
            );
            assert_eq!(g.len(), e.len());
            for (x, y) in g.iter().zip(e) {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(
                    (x - y).abs() <= 1e-12 * y.abs().max(1.0),
                    "{strategy:?}/{lanes:?}: member {member}: {x} against numpy's {y}"
                );
            }
        }
    }
}
