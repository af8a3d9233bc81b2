//! A fused chain between two products with one shared matrix
//! (`autobatch_kernels::product_chain`: `z = matvec(X, theta)`, the chain
//! of `value_and_grad` of `sum(Y * z - softplus(z))`, `vecmat(r, X)`)
//! changes no bit: the logistic gradient gives every member the reference's
//! result with fusion and without it, on every batching strategy, lanes
//! mode and block choice, one thread and two, f32 and f64, with a matrix
//! whose rows are many blocks (and a partial last one) and with one
//! smaller than a block. Members that skip the gradient make it run for
//! some rows only (compact steps run the chain between the products on
//! the active rows' positions); members whose integer division by zero sits inside a
//! chain between products fault with the reference's error (the chain
//! then runs unfused). The runs report that the chains did run between
//! the products, so the fused values are what is compared.

mod common;

use autobatch_exec::{
    run, Arg, Batch, BatchingOptions, Env, LaneMode, ReportValue, RunOptions, RunOutput, Strategy,
};
use autobatch_ir::Program;
use autobatch_types::{Scalar, Tensor};
use common::{batched_runs, float_tensor, report_field, result_bits};

/// The logistic gradient's steps; with `extra`, a chain between products
/// outside the gradient too.
fn program(float: &str, n: usize, d: usize, extra: bool) -> Program {
    let tail = if extra {
        "// A chain between products outside a gradient, with an integer
    // division that faults where `skip == -1`.
    let extra = vecmat(sigmoid(matvec(X, t)) * ((100 / (skip + 1)) as {float}), X);
    (total, t + 0.001 * extra)"
            .replace("{float}", float)
    } else {
        "(total, t)".to_string()
    };
    let source = format!(
        "
extern \"autobatch\" {{
    static X: [[{float}; {d}]; {n}];
    static Y: [{float}; {n}];
}}
fn log_lik(theta: [{float}; {d}]) -> {float} {{
    let z = matvec(X, theta);
    sum(Y * z - softplus(z))
}}
fn steps(theta: [{float}; {d}], skip: i64) -> ({float}, [{float}; {d}]) {{
    let mut t = theta;
    let mut total = 0.0;
    for _k in 0..2 {{
        if skip == 0 {{
            let (value, g) = value_and_grad(log_lik, t);
            t = t + 0.001 * g;
            total += value;
        }}
    }}
    {tail}
}}
"
    );
    let mut program = autobatch_lower::compile(&source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

struct Case<'a> {
    program: &'a Program,
    float: &'a str,
    n: usize,
    d: usize,
    skips: &'a [i64],
}

fn run_on(
    case: &Case<'_>,
    strategy: Strategy,
    batching: &BatchingOptions,
    options: &RunOptions,
) -> RunOutput {
    let Case { float, n, d, .. } = *case;
    let wave = |len: usize, seed: usize, scale: f64| {
        (0..len).map(move |i| ((i * 7919 + seed * 131) % 1001) as f64 * scale - 500.0 * scale)
    };
    let env = Env {
        statics: vec![
            float_tensor(float, vec![n, d], wave(n * d, 1, 2e-3)),
            float_tensor(float, vec![n], (0..n).map(|i| (i % 3 == 0) as u8 as f64)),
        ]
        .into(),
        ..Env::default()
    };
    let thetas = (0..case.skips.len())
        .map(|m| float_tensor(float, vec![d], wave(d, m + 2, 1e-3)))
        .collect();
    let skips = case
        .skips
        .iter()
        .map(|s| Tensor::scalar(Scalar::I64(*s)))
        .collect();
    let batch = Batch {
        entry: case.program.function_by_name("steps").expect("entry"),
        size: case.skips.len(),
        args: vec![Arg::Batched(thetas), Arg::Batched(skips)],
    };
    run(
        strategy,
        case.program,
        &env,
        &batch,
        &RunOptions {
            batching: *batching,
            ..options.clone()
        },
    )
    .expect("runs")
}

#[test]
fn chains_between_products_agree_bit_for_bit() {
    for float in ["f32", "f64"] {
        // Many blocks of rows (the last partial), and fewer rows than a block.
        for (n, d) in [(3000, 100), (50, 7)] {
            let program = program(float, n, d, true);
            for skips in [
                &[0, 0, 0, 0, 0][..],
                &[0, 1, 0, 0, 1, 1, 0][..],
                &[0, -1, 1, 0][..],
            ] {
                let case = Case {
                    program: &program,
                    float,
                    n,
                    d,
                    skips,
                };
                let reference = run_on(
                    &case,
                    Strategy::Reference,
                    &BatchingOptions::default(),
                    &RunOptions::default(),
                );
                let faults = reference.results.iter().filter(|r| r.is_err()).count();
                let zeros = skips.iter().filter(|&&s| s == -1).count();
                assert_eq!(faults, zeros, "the members with skip == -1 fault");
                let expected = result_bits(&reference);
                let mut between = 0;
                for (strategy, batching, options) in batched_runs() {
                    let (threads, fuse) = (options.threads, options.fuse);
                    let output = run_on(&case, strategy, &batching, &options);
                    assert_eq!(
                        result_bits(&output),
                        expected,
                        "{float} {n}x{d} {skips:?} {strategy} {batching:?} threads={threads} fuse={fuse}"
                    );
                    if fuse {
                        let ReportValue::Count(count) =
                            *report_field(&output.stats.report, "chains_between_products")
                        else {
                            panic!("chains_between_products is a count");
                        };
                        between += count;
                        // Members that skip the gradient leave its steps
                        // compact under `compact`: still run between the
                        // products, on the active rows' positions.
                        if batching.lanes == LaneMode::Compact && faults == 0 {
                            assert!(
                                count > 0,
                                "{float} {n}x{d} {skips:?} {strategy} compact: no chain between products"
                            );
                        }
                    }
                }
                // No member faulting: the chains ran between the products,
                // so the comparisons above compared their values.
                assert!(
                    faults > 0 || between > 0,
                    "{float} {n}x{d}: no chain ran between its products"
                );
            }
        }
    }
}

/// `value_and_grad` of a function that is one block runs its forward and
/// backward parts as one block (`autobatch_autodiff`'s fusion): its two
/// products and the elementwise code between them (`Y * z`, `softplus`,
/// `sum`, `sigmoid`, `Y - ..`) run as one chain between products, with the
/// reference's bits, on both batching strategies, one thread and two.
#[test]
fn value_and_grad_runs_as_one_chain_between_products() {
    for float in ["f32", "f64"] {
        let (n, d) = (3000, 100);
        let program = program(float, n, d, false);
        let case = Case {
            program: &program,
            float,
            n,
            d,
            skips: &[0, 0, 1, 0, 0],
        };
        let batching = BatchingOptions::default();
        let reference = run_on(
            &case,
            Strategy::Reference,
            &batching,
            &RunOptions::default(),
        );
        assert!(reference.results.iter().all(|r| r.is_ok()));
        let expected = result_bits(&reference);
        for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
            for threads in [1, 2] {
                let options = RunOptions {
                    threads,
                    ..RunOptions::default()
                };
                let output = run_on(&case, strategy, &batching, &options);
                assert_eq!(
                    result_bits(&output),
                    expected,
                    "{float} {strategy} threads={threads}"
                );
                let ReportValue::Count(count) =
                    *report_field(&output.stats.report, "chains_between_products")
                else {
                    panic!("chains_between_products is a count");
                };
                assert!(count > 0, "{float} {strategy} threads={threads}: the gradient ran no chain between its products");
            }
        }
    }
}
