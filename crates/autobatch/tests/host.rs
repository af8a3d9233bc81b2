//! Host primitives: Rust functions a program calls, registered with
//! `Compiled::with_host`. Every strategy calls them once per member call,
//! gives each member the value of its own call, and turns a failure (an
//! error, a value of the wrong shape, a panic) into that member's
//! `host_error`, which `catch` recovers; the other members go on.

// Only the configurations are used here.
#[allow(dead_code)]
mod harness;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autobatch::typed::{FromValue, IntoValue};
use autobatch::{compile, Compiled, Inputs, RunConfig, Strategy, Value};
use harness::{configurations, run_config};
use serde_json::{json, Value as Json};

const SOURCE: &str = r#"
extern "autobatch" {
    static W: [f64; N];
    fn affine(x: f64, k: f64) -> f64;
    fn weigh(v: [f64; N]) -> [f64; 2];
    fn shaky(x: f64) -> f64;
}

/// A host call in a loop, and one whose operands are all shared.
fn walk(x: f64, steps: i64) -> (f64, f64) {
    let mut y = x;
    let mut i = 0;
    while i < steps {
        y = affine(y, 0.5);
        i += 1;
    }
    (y, affine(2.0, 3.0))
}

/// Arrays in and out, a static's length in the declaration.
fn weighed(scale: f64) -> [f64; 2] {
    weigh(W * scale)
}

/// A host function that fails for some members, caught or not.
fn risky(x: f64) -> f64 { shaky(x) * 2.0 }

fn guarded(x: f64) -> (bool, f64) { catch(risky(x)) }

/// A host call in a recursion and in instances.
fn tree(x: f64, depth: i64) -> f64 {
    if depth <= 0 {
        affine(x, 2.0)
    } else {
        let (a, b) = join(tree(x, depth - 1), tree(x + 1.0, depth - 1));
        a + b
    }
}
"#;

fn f64_arg(args: &[Value], k: usize) -> Result<f64, String> {
    f64::from_value(args[k].clone()).ok_or_else(|| format!("operand {k} is not an f64"))
}

/// The program with its host functions; `calls` counts `affine`'s calls.
fn program(calls: Arc<AtomicUsize>) -> Compiled {
    compile(SOURCE, "host.ab")
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
        .with_host("affine", move |args| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok((f64_arg(args, 0)? * f64_arg(args, 1)? + 1.0).into_value())
        })
        .expect("affine is called")
        .with_host("weigh", |args| {
            let v = Vec::<f64>::from_value(args[0].clone()).ok_or("not a vector")?;
            Ok(vec![v.iter().sum::<f64>(), v.len() as f64].into_value())
        })
        .expect("weigh is called")
        .with_host("shaky", |args| {
            let x = f64_arg(args, 0)?;
            if x < 0.0 {
                Err(format!("no value below zero ({x})"))
            } else if x > 100.0 {
                panic!("too large: {x}")
            } else if x == 7.0 {
                Ok(vec![x, x].into_value())
            } else {
                Ok(x.sqrt().into_value())
            }
        })
        .expect("shaky is called")
}

fn run(compiled: &Compiled, entry: &str, inputs: Json, config: &RunConfig) -> Json {
    let inputs = Inputs::from_json_str(&inputs.to_string()).expect("inputs parse");
    let bound = compiled.bind(entry, &inputs).expect("binds");
    bound.run(config).expect("runs").to_json(false)["results"].clone()
}

fn every_configuration() -> Vec<RunConfig> {
    configurations()
        .into_iter()
        .flat_map(|(strategy, lanes, block_choice)| {
            [1, 2].map(|threads| {
                let mut config = run_config(strategy, lanes, block_choice);
                config.options.threads = threads;
                config
            })
        })
        .collect()
}

#[test]
fn each_member_gets_its_own_calls_on_every_strategy() {
    let calls = Arc::new(AtomicUsize::new(0));
    let compiled = program(Arc::clone(&calls));
    let w = json!({"W": [1.0, 2.0, 4.0]});
    for config in every_configuration() {
        calls.store(0, Ordering::Relaxed);
        let walked = run(
            &compiled,
            "walk",
            json!({"batch": {"x": [1.0, 2.0, -4.0], "steps": [0, 1, 3]}, "shared": w}),
            &config,
        );
        // x -> 0.5 x + 1 per step; the shared call is 2 * 3 + 1 = 7.
        assert_eq!(
            walked,
            json!([{"ok": [1.0, 7.0]}, {"ok": [2.0, 7.0]}, {"ok": [1.25, 7.0]}]),
            "{config:?}"
        );
        // 0 + 1 + 3 calls in the loops, and one shared call per member.
        assert_eq!(calls.load(Ordering::Relaxed), 4 + 3, "{config:?}");
        let weighed = run(
            &compiled,
            "weighed",
            json!({"batch": {"scale": [1.0, 0.5]}, "shared": w}),
            &config,
        );
        assert_eq!(weighed, json!([{"ok": [7.0, 3.0]}, {"ok": [3.5, 3.0]}]));
        let tree = run(
            &compiled,
            "tree",
            json!({"batch": {"x": [0.0, 1.0], "depth": [0, 2]}, "shared": w}),
            &config,
        );
        // depth 0: 2x + 1; depth 2: 2l + 1 at the leaves l = x, x+1, x+1, x+2.
        assert_eq!(tree, json!([{"ok": 1.0}, {"ok": 20.0}]), "{config:?}");
    }
}

#[test]
fn a_failing_call_is_its_members_error_and_catch_recovers_it() {
    let compiled = program(Arc::new(AtomicUsize::new(0)));
    let inputs = json!({"batch": {"x": [4.0, -1.0, 7.0, 200.0, 9.0]}, "shared": {"W": [1.0]}});
    for config in every_configuration() {
        let risky = run(&compiled, "risky", inputs.clone(), &config);
        assert_eq!(risky[0], json!({"ok": 4.0}));
        assert_eq!(risky[4], json!({"ok": 6.0}));
        let messages = [
            (1, "host primitive `shaky` failed: no value below zero (-1)"),
            (
                2,
                "host primitive `shaky` returned [f64; 2], but is declared to return f64",
            ),
            (
                3,
                "host primitive `shaky` failed: the host function `shaky` panicked: too large: 200",
            ),
        ];
        for (member, message) in messages {
            let error = &risky[member]["error"];
            assert_eq!(error["kind"], "host_error", "{config:?}: {risky}");
            assert_eq!(error["message"], message, "{config:?}");
            assert_eq!(error["line"], 26, "at the call of `shaky`");
        }
        let guarded = run(&compiled, "guarded", inputs.clone(), &config);
        assert_eq!(
            guarded,
            json!([{"ok": [true, 4.0]}, {"ok": [false, 0.0]}, {"ok": [false, 0.0]}, {"ok": [false, 0.0]}, {"ok": [true, 6.0]}]),
            "{config:?}"
        );
    }
}

#[test]
fn native_leaves_host_calls_to_program_counter() {
    let compiled = program(Arc::new(AtomicUsize::new(0)));
    let config = RunConfig {
        strategy: Strategy::from_name("native").expect("native exists"),
        ..RunConfig::default()
    };
    let inputs = Inputs::from_json_str(
        r#"{"batch": {"x": [1.0, 3.0], "steps": [2, 1]}, "shared": {"W": [1.0]}}"#,
    )
    .expect("inputs parse");
    let result = compiled
        .bind("walk", &inputs)
        .expect("binds")
        .run(&config)
        .expect("runs");
    let report = format!("{:?}", result.stats.report);
    assert!(
        report.contains("compiled") && report.contains("Bool(false)"),
        "{report}"
    );
    assert!(report.contains("host primitive `affine`"), "{report}");
    assert_eq!(
        result.to_json(false)["results"],
        json!([{"ok": [1.75, 7.0]}, {"ok": [2.5, 7.0]}])
    );
}

#[test]
fn a_program_runs_only_with_its_host_functions() {
    let bare = compile(SOURCE, "host.ab").expect("compiles");
    let inputs =
        Inputs::from_json_str(r#"{"batch": {"x": [1.0], "steps": [1]}, "shared": {"W": [1.0]}}"#)
            .expect("inputs parse");
    let error = bare.bind("walk", &inputs).expect_err("affine is missing");
    assert_eq!(
        error.message(),
        "host primitive `affine` (called by `walk`) has no host function: register one with `Compiled::with_host` (the `autobatch` command cannot run a program that calls host primitives)"
    );
    let error = bare
        .with_host("afine", |_| Ok(Value::Tuple(Vec::new())))
        .expect_err("no such primitive");
    assert_eq!(
        error.message(),
        "`afine` is not a host primitive that host.ab calls (it calls: affine, weigh, shaky)"
    );
}

#[test]
fn a_batched_host_function_takes_the_calls_of_a_step_at_once() {
    let widest = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&widest);
    let compiled = program(Arc::new(AtomicUsize::new(0)))
        .with_batched_host("affine", move |calls| {
            seen.fetch_max(calls.len(), Ordering::Relaxed);
            calls
                .iter()
                .map(|args| {
                    let (x, k) = (f64_arg(args, 0)?, f64_arg(args, 1)?);
                    if x > 1000.0 {
                        return Err(format!("{x} is too large"));
                    }
                    Ok((x * k + 1.0).into_value())
                })
                .collect()
        })
        .expect("affine is called");
    for config in every_configuration() {
        widest.store(0, Ordering::Relaxed);
        let walked = run(
            &compiled,
            "walk",
            json!({"batch": {"x": [1.0, 2.0, -4.0, 5000.0], "steps": [0, 1, 3, 1]}, "shared": {"W": [1.0]}}),
            &config,
        );
        let walked = walked.as_array().expect("results");
        assert_eq!(
            walked[..3],
            [
                json!({"ok": [1.0, 7.0]}),
                json!({"ok": [2.0, 7.0]}),
                json!({"ok": [1.25, 7.0]})
            ]
        );
        assert_eq!(
            walked[3]["error"]["message"], "host primitive `affine` failed: 5000 is too large",
            "{config:?}"
        );
        let widest = widest.load(Ordering::Relaxed);
        if config.strategy == Strategy::Reference {
            assert_eq!(widest, 1, "the reference runs one member at a time");
        } else if config.strategy != Strategy::from_name("native").unwrap() {
            assert!(
                widest >= 2,
                "{config:?}: the members' calls of a step go together"
            );
        }
    }
}

#[test]
fn a_call_whose_value_is_unused_still_happens() {
    let source = "extern \"autobatch\" { fn check(x: f64) -> f64; }\nfn f(x: f64) -> f64 { let unused = check(x); x * 2.0 }";
    let compiled = compile(source, "unused.ab")
        .expect("compiles")
        .with_host("check", |args| {
            let x = f64_arg(args, 0)?;
            if x < 0.0 {
                return Err("negative".into());
            }
            Ok(x.into_value())
        })
        .expect("check is called");
    for config in every_configuration() {
        let out = run(
            &compiled,
            "f",
            json!({"batch": {"x": [1.0, -1.0]}}),
            &config,
        );
        assert_eq!(out[0], json!({"ok": 2.0}), "{config:?}");
        assert_eq!(out[1]["error"]["kind"], "host_error", "{config:?}: {out}");
    }
}
