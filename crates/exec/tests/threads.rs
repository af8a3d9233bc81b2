//! A member's result is bit-identical whatever the number of threads and
//! whatever else is in the batch: a float-heavy program (a product with a
//! shared matrix, exp/ln, reductions, random draws) run on 1, 2, 3 and 8
//! threads, on a batch of 1000, on prefixes of it, and beside other members.

use autobatch_exec::{
    run, Arg, Batch, BatchingOptions, Env, LaneMode, RunOptions, RunOutput, Strategy,
};
use autobatch_ir::Program;
use autobatch_types::{Data, Scalar, Tensor};

const PROGRAM: &str = "
fn walk(theta: [f64; 64], m: [[f64; 64]; 256], n: i64) -> (f64, [f64; 64]) {
    let mut t = theta;
    let mut acc = 0.0;
    for _i in 0..n {
        let z = matvec(m, t);
        let p = sigmoid(z);
        acc += logsumexp(z) + mean(p.ln()) + max(z.exp()) + uniform();
        t = t + 0.01 * vecmat(p - normal_like(p) * 0.1, m);
    }
    (acc, t)
}
";

fn compile() -> Program {
    let mut program = autobatch_lower::compile(PROGRAM).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

/// Member `i`'s inputs; `variant` changes every member from `keep` on.
fn inputs(members: usize, keep: usize, variant: u64) -> Vec<Arg> {
    let theta = (0..members)
        .map(|i| {
            let shift = if i >= keep { variant as f64 } else { 0.0 };
            Tensor::new(
                vec![64],
                Data::F64(
                    (0..64)
                        .map(|j| ((i * 7 + j) % 13) as f64 * 0.01 - 0.06 + shift)
                        .collect(),
                ),
            )
        })
        .collect();
    let m = Tensor::new(
        vec![256, 64],
        Data::F64(
            (0..256 * 64)
                .map(|k| ((k * 31) % 17) as f64 / 17.0 - 0.5)
                .collect(),
        ),
    );
    let n = (0..members)
        .map(|i| {
            let extra = if i >= keep { variant as i64 } else { 0 };
            Tensor::scalar(Scalar::I64(1 + (i % 4) as i64 + extra))
        })
        .collect();
    vec![Arg::Batched(theta), Arg::Shared(m), Arg::Batched(n)]
}

fn run_with(program: &Program, args: Vec<Arg>, threads: usize, lanes: LaneMode) -> RunOutput {
    let size = match &args[0] {
        Arg::Batched(values) => values.len(),
        Arg::Shared(_) => unreachable!(),
    };
    let batch = Batch {
        entry: program.function_by_name("walk").expect("entry"),
        size,
        args,
    };
    let options = RunOptions {
        threads,
        seed: 5,
        ..RunOptions::default()
    };
    let batching = BatchingOptions {
        lanes,
        ..BatchingOptions::default()
    };
    run(
        Strategy::ProgramCounter,
        program,
        &Env::default(),
        &batch,
        &RunOptions {
            batching,
            ..options.clone()
        },
    )
    .expect("runs")
}

/// The bits of member `i`'s results.
fn bits(output: &RunOutput, i: usize) -> Vec<u64> {
    let values = output.results[i].as_ref().expect("no member fails");
    values
        .iter()
        .flat_map(|t| match &t.data {
            Data::F64(v) => v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            other => panic!("unexpected {}", other.ty()),
        })
        .collect()
}

#[test]
fn results_do_not_depend_on_threads_or_batch_composition() {
    let program = compile();
    let members = 1000;
    let kept = 37;
    let base = run_with(&program, inputs(members, members, 0), 1, LaneMode::Auto);
    let reference = autobatch_exec::run_reference(
        &program,
        &Env::default(),
        &Batch {
            entry: program.function_by_name("walk").expect("entry"),
            size: kept,
            args: inputs(kept, kept, 0),
        },
        &RunOptions {
            seed: 5,
            ..RunOptions::default()
        },
    )
    .expect("runs");
    for i in 0..kept {
        assert_eq!(
            bits(&base, i),
            bits(&reference, i),
            "member {i} against the reference"
        );
    }
    for (threads, lanes) in [
        (2, LaneMode::Auto),
        (3, LaneMode::Mask),
        (8, LaneMode::Compact),
    ] {
        let other = run_with(&program, inputs(members, members, 0), threads, lanes);
        for i in 0..members {
            assert_eq!(
                bits(&base, i),
                bits(&other, i),
                "member {i} on {threads} threads"
            );
        }
    }
    // The first members alone, and beside other members doing other work.
    for (size, variant, threads) in [(1, 0, 2), (kept, 0, 3), (members, 3, 2), (members, 1, 8)] {
        let other = run_with(
            &program,
            inputs(size, kept, variant),
            threads,
            LaneMode::Auto,
        );
        for i in 0..kept.min(size) {
            assert_eq!(
                bits(&base, i),
                bits(&other, i),
                "member {i} in a batch of {size} (variant {variant}, {threads} threads)"
            );
        }
    }
}
