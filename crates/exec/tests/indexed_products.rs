//! Products with an item of a static chosen per member (`matvec(W[l], h)`,
//! `batched::indexed`) change no bit: run grouped by index (fused) or as
//! written (an item copied per row, then the product), every member gets
//! the reference executor's result, on every batching strategy, lanes
//! mode and block choice, one thread and two. The members' indices differ
//! (several groups), some members skip the block (steps for some rows
//! only), and one member's index is out of bounds (it faults at the
//! index, with the reference's error and location, and no other member
//! is harmed). `matvec`, `vecmat` and both sides of `matmul` are covered,
//! f32 and f64, with indices that are variables, computed temporaries and
//! the entry's parameters. The grouped form copies no item: the run's peak storage is
//! below the unfused one.

mod common;

use autobatch_exec::{run, Arg, Batch, BatchingOptions, Env, RunOptions, RunOutput, Strategy};
use autobatch_ir::Program;
use autobatch_types::{Scalar, Tensor};
use common::{batched_runs, float_tensor, result_bits};

/// `M x K` items, `LAYERS` of them, and a loop over `steps` layers with a
/// per-member layer counter.
const M: usize = 24;
const K: usize = 16;
const LAYERS: usize = 3;

fn program(float: &str) -> Program {
    let source = format!(
        "
extern \"autobatch\" {{
    static W: [[[{float}; {K}]; {M}]; {LAYERS}];
    static S: [[[{float}; {M}]; {M}]; {LAYERS}];
}}
fn layers(x: [{float}; {K}], first: i64, steps: i64, skip: bool) -> ({float}, [{float}; {M}], [{float}; {K}]) {{
    let mut h = [0.0; {M}];
    let mut back = x;
    let mut t = 0;
    let mut l = first;
    let mut total = 0.0;
    if first < {LAYERS} {{
        // An index that is the entry's parameter (member-uniform).
        total = sum(matvec(W[first], x));
    }}
    while t < steps {{
        if !skip || t % 2 == 0 {{
            let a = matvec(W[l], back);
            h = (a + matvec(S[l], h)).tanh();
            back = vecmat(h, W[l]) * 0.5;
            let outer = matmul(S[l], [h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h]);
            let inner = matmul([back; {M}], transpose(W[l]));
            // An index computed in the block (a step temporary).
            let next = matvec(S[(l + 1) % {LAYERS}], h);
            // One item read by two products.
            let w = W[l];
            back = back + vecmat(matvec(w, back), w) * 0.25;
            total = total + sum(outer[0]) + sum(inner[1]) + sum(next);
        }}
        l = (l + 1) % {LAYERS};
        t = t + 1;
    }}
    (total, h, back)
}}
"
    );
    let mut program = autobatch_lower::compile(&source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

fn env(float: &str) -> Env {
    let w = (0..LAYERS * M * K).map(|i| ((i * 37 % 101) as f64 - 50.0) / 200.0);
    let s = (0..LAYERS * M * M).map(|i| ((i * 53 % 97) as f64 - 48.0) / 300.0);
    Env {
        statics: vec![
            float_tensor(float, vec![LAYERS, M, K], w),
            float_tensor(float, vec![LAYERS, M, M], s),
        ]
        .into(),
        ..Env::default()
    }
}

/// Per member: its first layer (one out of bounds), its steps, whether it
/// skips every other step.
const MEMBERS: [(i64, i64, bool); 9] = [
    (0, 5, false),
    (1, 4, false),
    (2, 5, true),
    (0, 0, false),
    (7, 3, false),
    (1, 6, true),
    (2, 5, false),
    (0, 5, false),
    (1, 2, false),
];

fn run_on(
    members: &[(i64, i64, bool)],
    program: &Program,
    float: &str,
    strategy: Strategy,
    batching: &BatchingOptions,
    options: &RunOptions,
) -> RunOutput {
    let x = |m: usize| {
        float_tensor(
            float,
            vec![K],
            (0..K).map(move |k| ((k * 7 + m * 3) % 11) as f64 * 0.1 - 0.5),
        )
    };
    let scalar = |f: &dyn Fn(&(i64, i64, bool)) -> Scalar| {
        Arg::Batched(members.iter().map(|m| Tensor::scalar(f(m))).collect())
    };
    let batch = Batch {
        entry: program.function_by_name("layers").expect("entry"),
        size: members.len(),
        args: vec![
            Arg::Batched((0..members.len()).map(x).collect()),
            scalar(&|m| Scalar::I64(m.0)),
            scalar(&|m| Scalar::I64(m.1)),
            scalar(&|m| Scalar::Bool(m.2)),
        ],
    };
    run(
        strategy,
        program,
        &env(float),
        &batch,
        &RunOptions {
            batching: *batching,
            ..options.clone()
        },
    )
    .expect("runs")
}

#[test]
fn grouped_and_copied_items_agree_bit_for_bit() {
    for float in ["f32", "f64"] {
        let program = program(float);
        let reference = run_on(
            &MEMBERS,
            &program,
            float,
            Strategy::Reference,
            &BatchingOptions::default(),
            &RunOptions::default(),
        );
        let expected = result_bits(&reference);
        let faulted: Vec<String> = expected.iter().filter_map(|r| r.clone().err()).collect();
        assert_eq!(faulted.len(), 1, "the member whose layer is 7 faults");
        assert!(faulted[0].contains("IndexOutOfBounds"), "{faulted:?}");
        for (strategy, batching, options) in batched_runs() {
            let (threads, fuse) = (options.threads, options.fuse);
            let output = run_on(&MEMBERS, &program, float, strategy, &batching, &options);
            assert_eq!(
                result_bits(&output),
                expected,
                "{float} {strategy} {batching:?} threads={threads} fuse={fuse}"
            );
        }
    }
}

/// Every member in bounds and active: the items are never copied, so the
/// run's peak storage is below the unfused run's by about one item per
/// member.
#[test]
fn grouped_products_copy_no_item() {
    // The index: the entry's parameter, a temporary, a loop's variable;
    // an item read by two products.
    let bodies = [
        "matvec(W[l], x).tanh()",
        "matvec(W[(l + 1) % 3], x).tanh()",
        "let w = W[l]; (matvec(w, x) + matvec(w, x * 2.0)).tanh()",
        "let mut y = x; let mut k = l; let mut t = 0; \
         while t < 2 { y = vecmat(matvec(W[k], y), W[k]); k = (k + 1) % 3; t = t + 1; } \
         matvec(W[k], y)",
    ];
    for body in bodies {
        let source = format!(
            "
extern \"autobatch\" {{
    static W: [[[f64; {K}]; {M}]; {LAYERS}];
}}
fn one(x: [f64; {K}], l: i64) -> [f64; {M}] {{
    {body}
}}
"
        );
        let mut program = autobatch_lower::compile(&source).expect("compiles");
        autobatch_passes::optimize(&mut program);
        peak_storage_drops(&program, body);
    }
}

fn peak_storage_drops(program: &Program, body: &str) {
    let members = 64;
    let x = |m: usize| float_tensor("f64", vec![K], (0..K).map(move |k| (k + m) as f64 * 0.01));
    let l = |m: usize| Tensor::scalar(Scalar::I64((m % LAYERS) as i64));
    let batch = Batch {
        entry: program.function_by_name("one").expect("entry"),
        size: members,
        args: vec![
            Arg::Batched((0..members).map(x).collect()),
            Arg::Batched((0..members).map(l).collect()),
        ],
    };
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        let run_with = |fuse| {
            let options = RunOptions {
                threads: 1,
                fuse,
                ..RunOptions::default()
            };
            let batching = BatchingOptions::default();
            run(
                strategy,
                program,
                &env("f64"),
                &batch,
                &RunOptions {
                    batching,
                    ..options.clone()
                },
            )
            .expect("runs")
        };
        let (fused, unfused) = (run_with(true), run_with(false));
        assert_eq!(
            result_bits(&fused),
            result_bits(&unfused),
            "{strategy}: {body}"
        );
        assert!(fused.results.iter().all(|r| r.is_ok()));
        let (fused, unfused) = (fused.stats.peak_state_bytes, unfused.stats.peak_state_bytes);
        let item = (members * M * K * 8) as u64;
        eprintln!("{strategy}, {body}: peak state fused {fused} bytes, unfused {unfused} bytes");
        assert!(
            fused + item / 2 <= unfused,
            "{strategy}, {body}: fused peak {fused} bytes, unfused {unfused} bytes"
        );
    }
}
