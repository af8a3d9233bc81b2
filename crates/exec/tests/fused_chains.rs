//! Fused chains (`batched::chains`) change no bit: programs whose blocks hold
//! chains of elementwise operations and reductions (f32 and f64, unary
//! transcendental functions, comparisons, casts, `select`, per-member
//! scalars broadcast, a kept value read after the chain, a variable
//! overwritten inside the chain) give every member the same result with
//! fusion and without it, and the reference executor's, on every batching
//! strategy, lanes mode and block choice, on one thread and two. Members
//! whose integer division by zero sits inside a chain fault with the
//! reference's error and location; members that skip the block make it
//! run for some rows only (under `compact`, chains in compact steps run
//! fused on the active rows' positions). Wide rows (more elements than a group) and
//! narrow ones (many rows per group) are both run. A batch without such
//! members runs too: a fault in a chain makes its block run unfused, so
//! only there are the fused values themselves compared.

mod common;

use autobatch_exec::{
    run, Arg, Batch, BatchingOptions, Env, LaneMode, ReportValue, RunOptions, RunOutput, Strategy,
};
use autobatch_ir::Program;
use autobatch_types::{Data, Scalar, Tensor};
use common::{batched_runs, report_field, result_bits};

/// `chain(x, d)` on `[FLOAT; n]`: if `d != 1`, one block of chained
/// elementwise operations with `100 / d` (a fault where `d == 0`) inside,
/// in a function the entry calls (its `x` is the entry's, member-uniform:
/// a chain reads it copied into a column).
fn program(float: &str, n: usize) -> Program {
    let source = format!(
        "
fn chain(x: [{float}; {n}], d: i64) -> ({float}, [{float}; {n}], {float}, i64) {{
    body(x, d)
}}
fn body(x: [{float}; {n}], d: i64) -> ({float}, [{float}; {n}], {float}, i64) {{
    let mut total = 0.0;
    let mut kept = x;
    let mut count = 0;
    if d != 1 {{
        let a = x * 1.5 - 0.25;
        let s = sigmoid(a);
        let p = softplus(a) + s * 2.0;
        let q = 100 / d;
        let c = p.exp() * ((q as {float}) * 0.01);
        let big = sum(c) > (d as {float}) * 1000.0;
        let chosen = select(big, c.ln(), a.tanh());
        total = sum(chosen) + max(p);
        let m = sum(chosen) / 8.0;
        let mut w = chosen - m;
        w = w * w + a;
        kept = w.sqrt().abs();
        count = q * 3 + (sum(s) as i64);
    }}
    (total, kept, total * 0.5, count)
}}
"
    );
    let mut program = autobatch_lower::compile(&source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

const DIVISORS: [i64; 9] = [2, 1, 0, 3, 1, 5, 0, 7, 4];
/// No member faults: a fault anywhere in a chain makes its block run
/// unfused, so only a batch like this one compares the fused values.
const NO_FAULT: [i64; 7] = [2, 1, 3, 1, 5, 7, 4];

fn run_on(
    divisors: &[i64],
    program: &Program,
    float: &str,
    n: usize,
    strategy: Strategy,
    batching: &BatchingOptions,
    options: &RunOptions,
) -> RunOutput {
    let x = |m: usize| {
        let values = (0..n).map(|k| ((k * 13 + m * 7) % 23) as f64 * 0.125 - 1.3);
        let data = if float == "f32" {
            Data::F32(values.map(|v| v as f32).collect())
        } else {
            Data::F64(values.collect())
        };
        Tensor::new(vec![n], data)
    };
    let batch = Batch {
        entry: program.function_by_name("chain").expect("entry"),
        size: divisors.len(),
        args: vec![
            Arg::Batched((0..divisors.len()).map(x).collect()),
            Arg::Batched(
                divisors
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
            ..options.clone()
        },
    )
    .expect("runs")
}

#[test]
fn fused_and_unfused_runs_agree_bit_for_bit() {
    for float in ["f32", "f64"] {
        // Wide rows (a group is one row) and narrow ones (many rows a group).
        for (n, divisors) in [10_000, 6]
            .into_iter()
            .flat_map(|n| [(n, &DIVISORS[..]), (n, &NO_FAULT[..])])
        {
            let program = program(float, n);
            let reference = run_on(
                divisors,
                &program,
                float,
                n,
                Strategy::Reference,
                &BatchingOptions::default(),
                &RunOptions::default(),
            );
            let expected = result_bits(&reference);
            let faulted = reference.results.iter().filter(|r| r.is_err()).count();
            let zeros = divisors.iter().filter(|&&d| d == 0).count();
            assert_eq!(faulted, zeros, "the members with d == 0 fault");
            let mut fused_somewhere = false;
            let faults = divisors.contains(&0);
            for (strategy, batching, options) in batched_runs() {
                let (threads, fuse) = (options.threads, options.fuse);
                let output = run_on(divisors, &program, float, n, strategy, &batching, &options);
                assert_eq!(
                    result_bits(&output),
                    expected,
                    "{float} n={n} {strategy} {batching:?} threads={threads} fuse={fuse}"
                );
                // Fusion off reports nothing; on, its counts.
                let report = &output.stats.report;
                if fuse {
                    let fused = report_field(report, "fused_chains");
                    fused_somewhere |= *fused != ReportValue::Count(0);
                    // Members with d == 1 skip the chain's block: under
                    // `compact` its steps are compact, and still fused.
                    if batching.lanes == LaneMode::Compact && !faults {
                        assert_ne!(
                            *fused,
                            ReportValue::Count(0),
                            "{float} n={n} {strategy} compact: the chain ran unfused"
                        );
                    }
                } else {
                    assert!(report.is_empty(), "fuse off: {report:?}");
                }
            }
            // Without faults, the chains run fused: the comparisons above
            // did compare fused values.
            assert!(
                faults || fused_somewhere,
                "{float} n={n}: no chain ran fused"
            );
        }
    }
}

/// Every member active and none faulting: the chains run fused; their
/// values that die inside them get no column, so the run's peak storage is
/// below the unfused one.
#[test]
fn fused_chains_hold_less_storage() {
    let n = 10_000;
    let program = program("f64", n);
    let batching = BatchingOptions::default();
    let peak = |fuse| {
        let options = RunOptions {
            threads: 1,
            fuse,
            ..RunOptions::default()
        };
        let output = run_on(
            &[2, 3, 5, 7],
            &program,
            "f64",
            n,
            Strategy::ProgramCounter,
            &batching,
            &options,
        );
        output.stats.peak_state_bytes
    };
    let (fused, unfused) = (peak(true), peak(false));
    eprintln!("peak state: fused {fused} bytes, unfused {unfused} bytes");
    assert!(
        fused < unfused,
        "fused peak {fused} bytes, unfused {unfused} bytes"
    );
}
