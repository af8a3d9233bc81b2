//! Ragged batches beyond what a program file can say: a member of a ragged
//! batch gets exactly the result (random draws included) it gets in a batch
//! where every member has its size, under every strategy, lanes mode, block
//! choice and thread count; and the run says how many sizes it ran.

// Only the configurations are used here.
#[allow(dead_code)]
mod harness;

use autobatch::{compile, Compiled, Inputs, RunConfig};
use harness::{configurations, numbers, run_config};
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
            let mut config = run_config(strategy, lanes, block_choice);
            config.options.threads = threads;
            config.options.seed = 5;
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
        let config = run_config(strategy, lanes, block_choice);
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

/// Runs `examples/ragged/NAME.ab`'s `entry` on `NAME.json` and checks:
/// every configuration gives the reference executor's bits; each member
/// alone (a batch of one, on the reference executor) gets the bits it gets
/// in the batch; and the reference is within `tolerance` (relative, or
/// absolute below 1) of numpy's results, `NAME.expect.json`
/// (`tools/ragged_reference.py`).
fn check_example(name: &str, entry: &str, tolerance: f64) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ragged");
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).expect("the example's files");
    let compiled = compile(&read(&format!("{name}.ab")), &format!("{name}.ab"))
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let inputs_json: Value = serde_json::from_str(&read(&format!("{name}.json"))).expect("JSON");
    let expected: Value =
        serde_json::from_str(&read(&format!("{name}.expect.json"))).expect("JSON");
    let run = |inputs: &Value, config: &RunConfig| -> Vec<Value> {
        let inputs = Inputs::from_json_str(&inputs.to_string()).expect("inputs parse");
        let bound = compiled.bind(entry, &inputs).expect("binds");
        harness::ok_values(&bound.run(config).expect("runs"), name)
    };
    let reference = RunConfig {
        strategy: autobatch::Strategy::Reference,
        ..RunConfig::default()
    };
    let want = run(&inputs_json, &reference);
    let expected = expected.as_array().expect("expected results");
    assert_eq!(want.len(), expected.len(), "{name}: members");
    for (member, (got, numpy)) in want.iter().zip(expected).enumerate() {
        let (mut g, mut e) = (Vec::new(), Vec::new());
        numbers(got, &mut g);
        numbers(&numpy["ok"], &mut e);
        assert_eq!(
            g.len(),
            e.len(),
            "{name}: member {member}: {got} against {numpy}"
        );
        for (x, y) in g.iter().zip(&e) {
            assert!(
                (x - y).abs() <= tolerance * y.abs().max(1.0),
                "{name}: member {member}: {x} against numpy's {y}"
            );
        }
    }
    for (strategy, lanes, block_choice) in configurations() {
        let config = run_config(strategy, lanes, block_choice);
        let got = run(&inputs_json, &config);
        for (member, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g, w,
                "{name}: {strategy:?}/{lanes:?}/{block_choice:?}: member {member} differs from the reference"
            );
        }
    }
    let batch = inputs_json["batch"].as_object().expect("a batch");
    for (member, w) in want.iter().enumerate() {
        let mut alone = inputs_json.clone();
        for (key, values) in batch {
            alone["batch"][key] = json!([values[member].clone()]);
        }
        assert_eq!(
            &run(&alone, &reference)[0],
            w,
            "{name}: member {member} alone differs from the batch"
        );
    }
}

/// `examples/ragged/regressions.ab`: 40 regressions of 1 to 200
/// observations, each fitted by 200 gradient steps through
/// `value_and_grad(loss, theta, xs, ys)`. numpy sums in another order than
/// the kernels (pairwise against fixed lanes), so each gradient differs in
/// the last bits; gradient descent at this rate is a contraction, so those
/// differences do not grow over the steps (the largest measured is 2.5e-16
/// relative): 1e-12 leaves a wide margin.
#[test]
fn the_regressions_example_matches_numpy() {
    check_example("regressions", "fit", 1e-12);
}

/// `examples/ragged/rnn.ab`: an Elman RNN over 120 sentences of the
/// Stanford Sentiment Treebank (6 to 42 words). Against numpy: the kernels'
/// `tanh` is autobatch's own (a few units in the last place from numpy's)
/// and their products and `softmax` sum in another order, but `tanh` does
/// not amplify differences, so they stay at the rounding level (the
/// largest measured is 5.6e-16 relative): 1e-12 leaves a wide margin. The
/// label is compared exactly (the reference asserts no near tie).
#[test]
fn the_rnn_example_matches_numpy() {
    check_example("rnn", "classify", 1e-12);
}

/// The program-counter and local-static strategies run a ragged batch as
/// **one** batch (`docs/ragged.md`): an operation whose types do not mention `L` (the
/// recurrence's `tanh`) runs once per step for the members of every
/// length together, as many times as the longest member has tokens; one
/// that does (`tokens[t]`) runs once per size class present at the step.
/// One batch per size would run the `tanh` once per step of every size:
/// 1 + 2 + ... + 8 times. Each member still gets its own bits (random
/// draws, a member that faults at its own last token, empty members), and
/// a `pfor::<L>` forks each member's own number of instances.
#[test]
fn batching_strategies_run_members_of_all_sizes_together() {
    let source = r#"
fn step(h: f64, x: f64) -> f64 { (h * 0.5 + x).tanh() }

fn scaled(k: i64, xs: [f64; L]) -> f64 { xs[k] * (k as f64) }

fn rnn(tokens: [f64; L]) -> (f64, [f64; L], f64) {
    let mut h = 0.0;
    for t in 0..tokens.len() {
        let x = tokens[t];
        assert!(x != 99.0, "a poisoned token");
        h = step(h, x) + 0.001 * normal();
    }
    let forked = pfor::<L>(scaled, tokens);
    (h, forked, sum(forked) + tokens.len() as f64)
}
"#;
    let compiled = compile(source, "rnn.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    // Lengths 0 to 8, two members of each; member 5 has a poisoned token.
    let tokens: Vec<Vec<f64>> = (0..18)
        .map(|m| {
            (0..m / 2)
                .map(|t| {
                    if m == 5 && t == 1 {
                        99.0
                    } else {
                        (m * 7 + t) as f64 * 0.1 - 1.0
                    }
                })
                .collect()
        })
        .collect();
    let inputs = Inputs::from_json_str(&json!({"batch": {"tokens": tokens}}).to_string())
        .expect("inputs parse");
    let bound = compiled.bind("rnn", &inputs).expect("binds");
    let run = |strategy, lanes, block_choice, threads| {
        let mut config = run_config(strategy, lanes, block_choice);
        config.options.threads = threads;
        config.options.seed = 3;
        bound.run(&config).expect("runs").to_json(true)
    };
    let reference = run(
        autobatch::Strategy::Reference,
        Default::default(),
        Default::default(),
        1,
    );
    for (strategy, lanes, block_choice) in configurations() {
        for threads in [1, 2] {
            let got = run(strategy, lanes, block_choice, threads);
            assert_eq!(
                got["results"], reference["results"],
                "{strategy:?}/{lanes:?}/{block_choice:?}, {threads} threads"
            );
            assert_eq!(got["stats"]["sizes"], 9);
        }
    }
    assert!(
        reference["results"][5]["error"]
            .to_string()
            .contains("a poisoned token"),
        "{}",
        reference["results"][5]
    );
    for strategy in [
        autobatch::Strategy::ProgramCounter,
        autobatch::Strategy::LocalStatic,
    ] {
        let got = run(strategy, Default::default(), Default::default(), 1);
        let executions = |op: &str, line: u64| -> u64 {
            got["stats"]["op_counts"]
                .as_array()
                .expect("op counts")
                .iter()
                .filter(|c| c["op"] == op && c["line"] == line)
                .map(|c| c["executions"].as_u64().expect("a count"))
                .sum()
        };
        // The longest member has 8 tokens: 8 steps of the recurrence, all
        // lengths together (one batch per size: 36).
        assert_eq!(executions("tanh", 2), 8, "{strategy:?}: {}", got["stats"]);
        assert_eq!(executions("index", 9), 8, "{strategy:?}: {}", got["stats"]);
    }
}

/// A ragged batch whose rows, padded to its longest member, would not fit
/// in memory (one member of 4,000 among 4,095 of 1: a `[[f64; L]; L]` of
/// 128 MB for the long one, 512 GB padded for all) still runs on the
/// strategies that would pad it: one batch per size, each with its own
/// lengths (so its steps are those of both sizes' runs).
#[test]
fn a_batch_too_large_padded_runs_one_batch_per_size() {
    let source = "fn square(xs: [f64; L]) -> f64 { let m = [xs; L]; sum(m[0]) + (L as f64) }";
    let compiled = compile(source, "square.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let members = 4096;
    let arrays: Vec<Vec<f64>> = (0..members)
        .map(|m| vec![0.5; if m == 7 { 4000 } else { 1 }])
        .collect();
    let run = |arrays: &[Vec<f64>], strategy| {
        let inputs = Inputs::from_json_str(&json!({"batch": {"xs": arrays}}).to_string())
            .expect("inputs parse");
        let config = RunConfig {
            strategy,
            ..RunConfig::default()
        };
        let bound = compiled.bind("square", &inputs).expect("binds");
        bound.run(&config).expect("runs").to_json(true)
    };
    for strategy in [
        autobatch::Strategy::ProgramCounter,
        autobatch::Strategy::LocalStatic,
    ] {
        let got = run(&arrays, strategy);
        assert_eq!(got["stats"]["sizes"], 2, "{strategy:?}");
        assert_eq!(got["results"][7]["ok"], json!(6000.0), "{strategy:?}");
        assert_eq!(got["results"][0]["ok"], json!(1.5), "{strategy:?}");
        let short = run(&arrays[..2], strategy);
        assert_eq!(
            got["stats"]["steps"],
            json!(2 * short["stats"]["steps"].as_u64().expect("steps")),
            "{strategy:?}: one run per size"
        );
    }
}

/// `native-batched` runs the members of all lengths together on one
/// program: the product with the static `W` at token `t` is one product
/// for the members of every length above `t` (one batch per size would
/// batch only the two members of each length).
#[test]
fn native_batched_shares_products_across_sizes() {
    let source = r#"
extern "autobatch" { static W: [[f64; 4]; 4]; }
fn rnn(tokens: [f64; L]) -> f64 {
    let mut h = [0.0; 4];
    for t in 0..tokens.len() {
        h = (matvec(W, h) + tokens[t]).tanh();
    }
    sum(h)
}
"#;
    let compiled = compile(source, "rnn.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    // Lengths 1 to 9, two members of each.
    let tokens: Vec<Vec<f64>> = (0..18)
        .map(|m| {
            (0..=m / 2)
                .map(|t| (m * 5 + t) as f64 * 0.1 - 1.0)
                .collect()
        })
        .collect();
    let w: Vec<Vec<f64>> = (0..4)
        .map(|i| {
            (0..4)
                .map(|j| ((i * 4 + j) as f64 * 0.37).sin() * 0.5)
                .collect()
        })
        .collect();
    let inputs = Inputs::from_json_str(
        &json!({"batch": {"tokens": tokens}, "shared": {"W": w}}).to_string(),
    )
    .expect("inputs parse");
    let bound = compiled.bind("rnn", &inputs).expect("binds");
    let run = |strategy| {
        let config = RunConfig {
            strategy,
            options: autobatch::RunOptions {
                threads: 1,
                ..RunConfig::default().options
            },
        };
        bound.run(&config).expect("runs").to_json(true)
    };
    let reference = run(autobatch::Strategy::Reference);
    let together = run(autobatch::Strategy::from_name("native-batched").expect("a strategy"));
    assert_eq!(together["results"], reference["results"]);
    let report = &together["stats"]["native-batched"];
    assert_eq!(report["compiled"], true, "{report}");
    // 9 steps of the longest members: one product each, for all members
    // still in their loops (18 + 16 + ... + 2 = 90 member-products).
    assert_eq!(report["batched_products"], 9, "{report}");
    assert_eq!(report["batched_waits"], 90, "{report}");
}

/// A ragged batch of many sizes (0 to 299 elements) runs natively on one
/// program, each member with its own length; a batch whose longest member
/// rounds up to the same capacity (a power of two: 512 here) runs the code
/// kept from the first, one whose longest member is longer compiles again.
#[test]
fn native_runs_a_batch_of_many_sizes_on_one_program() {
    let source = r#"
fn total(xs: [f64; L]) -> (f64, [f64; L], f64) {
    let mut s = 0.0;
    for i in 0..xs.len() { s = s + xs[i] * (i as f64); }
    (sum(xs * xs), pfor::<L>(twice, xs), s)
}
fn twice(i: i64, xs: [f64; L]) -> f64 { 2.0 * xs[i] }
"#;
    let compiled = compile(source, "total.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    let run = |sizes: std::ops::Range<usize>, strategy| {
        let xs: Vec<Vec<f64>> = sizes
            .map(|n| (0..n).map(|k| k as f64 * 0.5 - 1.0).collect())
            .collect();
        let inputs =
            Inputs::from_json_str(&json!({"batch": {"xs": xs}}).to_string()).expect("inputs parse");
        let bound = compiled.bind("total", &inputs).expect("binds");
        let config = RunConfig {
            strategy,
            options: autobatch::RunOptions {
                threads: 2,
                ..RunConfig::default().options
            },
        };
        bound.run(&config).expect("runs").to_json(true)
    };
    for name in ["native", "native-batched"] {
        let strategy = autobatch::Strategy::from_name(name).expect("a strategy");
        let many = run(0..300, strategy);
        assert_eq!(
            many["results"],
            run(0..300, autobatch::Strategy::Reference)["results"]
        );
        assert_eq!(many["stats"]["sizes"], 300);
        let report = &many["stats"][name];
        assert_eq!(report["compiled"], true, "{report}");
        let longer = run(500..520, strategy);
        assert_eq!(
            longer["results"],
            run(500..520, autobatch::Strategy::Reference)["results"]
        );
    }
    // The two strategies run the same code (the cache's key has no
    // strategy): a new capacity compiles once.
    let native = autobatch::Strategy::from_name("native").expect("a strategy");
    let again = run(10..400, native);
    assert_eq!(
        again["stats"]["native"]["cached_programs"], 1,
        "{}",
        again["stats"]
    );
    let longer = run(600..1100, native);
    assert_eq!(
        longer["stats"]["native"]["cached_programs"], 0,
        "{}",
        longer["stats"]
    );
}

/// Both dimensions of `m: [[f64; D]; L]` each member's own: rows read by
/// index (the item's own length varies too), a `map` over the rows (each
/// instance gets its member's row of `D`), `pfor::<D>` and results of both
/// lengths; on every configuration, each member gets the bits it gets in
/// a batch where every member has its lengths.
#[test]
fn two_ragged_dimensions_get_each_members_own_lengths() {
    let source = r#"
fn rowsum(row: [f64; D]) -> f64 { sum(row * row) + (D as f64) }
fn column(k: i64, m: [[f64; D]; L]) -> f64 {
    let mut s = 0.0;
    for i in 0..m.len() { s = s + m[i][k]; }
    s
}
fn f(m: [[f64; D]; L]) -> ([f64; D], [f64; L], [f64; D], f64) {
    let mut acc = [0.0; D];
    for i in 0..m.len() { acc = acc + m[i] * (i as f64 + 1.0); }
    let sums = map(rowsum, m);
    let columns = pfor::<D>(column, m);
    (acc, sums, columns, sum(sums) + uniform())
}
"#;
    let compiled = compile(source, "m.ab").unwrap_or_else(|e| panic!("{}", e.render(false)));
    // Member k: L = 1 + k % 3 rows of D = 1 + k % 4 values: twelve sizes.
    let members = 12;
    let matrix = |k: usize| -> Vec<Vec<f64>> {
        (0..1 + k % 3)
            .map(|i| {
                (0..1 + k % 4)
                    .map(|j| (k * 7 + i * 3 + j) as f64 * 0.125 - 1.0)
                    .collect()
            })
            .collect()
    };
    let run = |ms: &[Vec<Vec<f64>>], strategy, lanes, block_choice| {
        let inputs =
            Inputs::from_json_str(&json!({"batch": {"m": ms}}).to_string()).expect("inputs parse");
        let mut config = run_config(strategy, lanes, block_choice);
        config.options.seed = 9;
        let bound = compiled.bind("f", &inputs).expect("binds");
        bound.run(&config).expect("runs").to_json(true)
    };
    let ms: Vec<Vec<Vec<f64>>> = (0..members).map(matrix).collect();
    for (strategy, lanes, block_choice) in configurations() {
        let got = run(&ms, strategy, lanes, block_choice);
        assert_eq!(got["stats"]["sizes"], 12, "{strategy:?}");
        for k in 0..members {
            let uniform = run(&vec![ms[k].clone(); members], strategy, lanes, block_choice);
            assert_eq!(
                got["results"][k], uniform["results"][k],
                "{strategy:?}/{lanes:?}/{block_choice:?}: member {k}"
            );
            let ok = &got["results"][k]["ok"];
            assert_eq!(ok[0].as_array().expect("acc").len(), 1 + k % 4);
            assert_eq!(ok[1].as_array().expect("sums").len(), 1 + k % 3);
        }
    }
}
