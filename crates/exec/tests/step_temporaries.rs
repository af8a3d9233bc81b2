//! Temporaries that die within a block get no column with a row per member
//! or lane: a block computing a chain of `K` elementwise operations over a
//! large array holds, at its peak (`peak_state_bytes`), the same storage
//! for `K = 4` as for `K = 32`, and far less than a column per temporary;
//! on every batching strategy, lanes mode and block choice, with members
//! that skip the block (so that it runs for some rows only) and members
//! that fault in the middle of the chain (so that rows leave while
//! temporaries are live), and the results are the reference's, bit for bit.

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, RunOutput, Strategy};
use autobatch_ir::Program;
use autobatch_types::{Data, Scalar, Tensor};

/// Elements of the array.
const N: usize = 4096;

/// `chain(x, d)`: if `d != 1`, a chain of `steps` operations on arrays of
/// `N` floats in one block, with `100 / d` (a fault where `d == 0`) while
/// the first temporary is live.
fn program(steps: usize) -> Program {
    let mut chain = String::from("        let y0 = x * 1.5;\n        let q = 100 / d;\n");
    chain.push_str("        let y1 = (y0 + (q as f64)).tanh();\n");
    for k in 2..=steps {
        chain.push_str(&format!(
            "        let y{k} = (y{} * 0.5 + 0.25).tanh();\n",
            k - 1
        ));
    }
    let source = format!(
        "
fn chain(x: [f64; {N}], d: i64) -> f64 {{
    let mut total = 0.0;
    if d != 1 {{
{chain}        total = sum(y{steps});
    }}
    total
}}
"
    );
    let mut program = autobatch_lower::compile(&source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

const DIVISORS: [i64; 8] = [2, 1, 0, 3, 1, 5, 0, 7];

fn run_on(
    program: &Program,
    strategy: Strategy,
    batching: &autobatch_exec::BatchingOptions,
) -> RunOutput {
    let x = |m: usize| {
        let values = (0..N)
            .map(|k| ((k * 13 + m) % 17) as f64 * 0.125 - 1.0)
            .collect();
        Tensor::new(vec![N], Data::F64(values))
    };
    let batch = Batch {
        entry: program.function_by_name("chain").expect("entry"),
        size: DIVISORS.len(),
        args: vec![
            Arg::Batched((0..DIVISORS.len()).map(x).collect()),
            Arg::Batched(
                DIVISORS
                    .iter()
                    .map(|d| Tensor::scalar(Scalar::I64(*d)))
                    .collect(),
            ),
        ],
    };
    run(
        strategy,
        program,
        &Env::default(),
        &batch,
        &RunOptions {
            batching: *batching,
            ..RunOptions::default()
        },
    )
    .expect("runs")
}

#[test]
fn a_chain_of_temporaries_in_one_block_needs_no_column_per_temporary() {
    let (short, long) = (program(4), program(32));
    let column = (DIVISORS.len() * N * 8) as u64;
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        for batching in strategy.configurations() {
            let mut peaks = Vec::new();
            for (steps, program) in [(4, &short), (32, &long)] {
                let output = run_on(program, strategy, &batching);
                let reference = run_on(program, Strategy::Reference, &batching);
                assert_eq!(
                    output.results, reference.results,
                    "{strategy} {batching:?} with {steps} steps"
                );
                let faulted = output.results.iter().filter(|r| r.is_err()).count();
                assert_eq!(faulted, 2, "the members with d == 0 fault");
                peaks.push(output.stats.peak_state_bytes);
            }
            assert_eq!(
                peaks[0], peaks[1],
                "{strategy} {batching:?}: the peak storage grows with the chain's length"
            );
            // The parameter `x`, and at most three arrays of temporaries at
            // once (an operand, a result, an intermediate), for all rows.
            assert!(
                peaks[1] <= 4 * column + (1 << 12),
                "{strategy} {batching:?}: {} bytes at the peak, a column is {column}",
                peaks[1]
            );
        }
    }
}
