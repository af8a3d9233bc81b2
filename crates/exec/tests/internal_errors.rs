//! One policy for internal errors: a broken invariant inside an executor,
//! the engine, the kernels or a backend reaches the caller of `exec::run` as
//! `ExecError::Internal` (printed as an internal error, a bug in autobatch),
//! never as a panic, on every strategy and configuration, whether it breaks
//! on the calling thread, the local-static executor's thread or a worker
//! thread; a panic of the caller's own observer stays the caller's.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use autobatch_exec::{
    run, run_on, Arg, Backend, Batch, BatchingOptions, Cpu, Env, ExecError, Observer, RunOptions,
    Strategy,
};
use autobatch_ir::{BinaryOp, CompareOp, Prim, Program, ReduceOp, UnaryOp};
use autobatch_kernels::buffer::{Rows, RowsMut, Values, ValuesMut};
use autobatch_kernels::linalg::{Dims, ProductOp};
use autobatch_kernels::rng::{Draw, Streams};
use autobatch_kernels::{Fault, PrimContext};
use autobatch_types::{Data, Scalar, ScalarType, Tensor};

/// `x + 1.5` with `x: i64`: a program the IR verifier rejects (the operand
/// types of `add` differ), so running it breaks an invariant of the kernels.
const ILL_TYPED: &str = "
fn f0 bad(v0 x: i64) -> (i64)  @1:1
  vars: v0 x: i64, v1: f64, v2: i64
b0:  @1:1
  v1 = const 1.5_f64  @1:5
  v2 = add v0, v1  @1:9
  return v2
";

/// `x * 2` with `x: i64`, well typed.
const DOUBLE: &str = "
fn f0 double(v0 x: i64) -> (i64)  @1:1
  vars: v0 x: i64, v1: i64, v2: i64
b0:  @1:1
  v1 = const 2_i64  @1:5
  v2 = mul v0, v1  @1:9
  return v2
";

fn parse(text: &str) -> Program {
    let mut program = autobatch_ir::parse::parse_program(text).expect("parses");
    autobatch_passes::optimize(&mut program);
    program
}

fn batch(program: &Program, entry: &str, size: usize) -> Batch {
    Batch {
        entry: program.function_by_name(entry).expect("entry"),
        size,
        args: vec![Arg::Batched(
            (0..size)
                .map(|i| Tensor::scalar(Scalar::I64(i as i64)))
                .collect(),
        )],
    }
}

/// Every strategy with every configuration it reads.
fn configurations() -> Vec<(Strategy, BatchingOptions)> {
    Strategy::ALL
        .into_iter()
        .flat_map(|s| s.configurations().into_iter().map(move |b| (s, b)))
        .collect()
}

fn expect_internal(outcome: Result<autobatch_exec::RunOutput, ExecError>, what: &str) -> String {
    match outcome {
        Err(ExecError::Internal(message)) => message,
        Err(other) => panic!("{what}: expected an internal error, got {other:?}"),
        Ok(_) => panic!("{what}: expected an internal error, the run went through"),
    }
}

#[test]
fn a_broken_invariant_of_the_kernels_is_an_internal_error_on_every_strategy() {
    let program = parse(ILL_TYPED);
    let batch = batch(&program, "bad", 5);
    for (strategy, batching) in configurations() {
        for threads in [1, 2] {
            let options = RunOptions {
                threads,
                ..RunOptions::default()
            };
            let what = format!("{strategy} {batching:?} on {threads} thread(s)");
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                run(
                    strategy,
                    &program,
                    &Env::default(),
                    &batch,
                    &RunOptions {
                        batching,
                        ..options.clone()
                    },
                )
            }))
            .unwrap_or_else(|_| panic!("{what}: the run panicked"));
            let message = expect_internal(outcome, &what);
            assert!(
                message.contains("operand types i64 and f64 differ")
                    && message.contains("(at crates/kernels/src/"),
                "{what}: {message}"
            );
            let printed = ExecError::Internal(message).to_string();
            assert!(
                printed.starts_with("internal error: ")
                    && printed.ends_with("(this is a bug in autobatch)"),
                "{printed}"
            );
        }
    }
}

/// A backend with a bug: every `binary` panics (and everything else is the
/// CPU's).
struct Broken;

impl Backend for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn resize(&self, data: &mut Data, ty: ScalarType, len: usize) {
        Cpu.resize(data, ty, len)
    }
    fn capacity(&self, data: &Data) -> usize {
        Cpu.capacity(data)
    }
    fn copy(&self, src: Values<'_>, dst: ValuesMut<'_>) {
        Cpu.copy(src, dst)
    }
    fn gather_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], out: ValuesMut<'_>) {
        Cpu.gather_rows(src, row_len, rows, out)
    }
    fn scatter_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
        Cpu.scatter_rows(src, row_len, rows, dst)
    }
    fn copy_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
        Cpu.copy_rows(src, row_len, rows, dst)
    }
    fn broadcast_rows(&self, value: Values<'_>, rows: &[u32], dst: ValuesMut<'_>) {
        Cpu.broadcast_rows(value, rows, dst)
    }
    fn unary(&self, op: UnaryOp, x: Rows<'_>, out: RowsMut<'_>) {
        Cpu.unary(op, x, out)
    }
    fn binary(&self, _: BinaryOp, _: Rows<'_>, _: Rows<'_>, out: RowsMut<'_>) -> Result<(), Fault> {
        panic!("a broken backend wrote {} rows", out.rows)
    }
    fn compare(&self, op: CompareOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        Cpu.compare(op, a, b, out)
    }
    fn cast(&self, x: Rows<'_>, out: RowsMut<'_>) {
        Cpu.cast(x, out)
    }
    fn select(&self, cond: Rows<'_>, if_true: Rows<'_>, if_false: Rows<'_>, out: RowsMut<'_>) {
        Cpu.select(cond, if_true, if_false, out)
    }
    fn reduce(&self, op: ReduceOp, x: Rows<'_>, out: RowsMut<'_>) {
        Cpu.reduce(op, x, out)
    }
    fn softmax(&self, x: Rows<'_>, out: RowsMut<'_>) {
        Cpu.softmax(x, out)
    }
    fn product(&self, op: ProductOp, dims: Dims, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        Cpu.product(op, dims, a, b, out)
    }
    fn outer(&self, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        Cpu.outer(a, b, out)
    }
    fn transpose(&self, x: Rows<'_>, m: usize, k: usize, out: RowsMut<'_>) {
        Cpu.transpose(x, m, k, out)
    }
    fn index(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        Cpu.index(array, index, length, out)
    }
    fn index_set(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        Cpu.index_set(array, index, value, length, out)
    }
    fn set_items(
        &self,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        rows: &[u32],
        array: RowsMut<'_>,
    ) -> Result<(), Fault> {
        Cpu.set_items(index, value, length, rows, array)
    }
    fn fill(&self, x: Rows<'_>, count: usize, out: RowsMut<'_>) {
        Cpu.fill(x, count, out)
    }
    fn stack(&self, items: &[Rows<'_>], out: RowsMut<'_>) {
        Cpu.stack(items, out)
    }
    fn draw(
        &self,
        draw: Draw,
        p: Option<Rows<'_>>,
        rows: &[u32],
        streams: &mut Streams<'_>,
        out: RowsMut<'_>,
    ) {
        Cpu.draw(draw, p, rows, streams, out)
    }
    fn eval(
        &self,
        prim: &Prim,
        args: &[&Tensor],
        ctx: &mut PrimContext<'_>,
    ) -> Result<Option<Tensor>, Fault> {
        Cpu.eval(prim, args, ctx)
    }
}

#[test]
fn a_bug_in_a_backend_is_an_internal_error_on_any_thread() {
    let program = parse(DOUBLE);
    // Large enough for the engine to split the product between two threads.
    for size in [3, 100_000] {
        let batch = batch(&program, "double", size);
        for (strategy, batching) in configurations() {
            if !strategy.uses_backend() {
                continue;
            }
            let options = RunOptions {
                threads: 2,
                ..RunOptions::default()
            };
            let what = format!("{strategy} {batching:?}, {size} members");
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                run_on(
                    &Broken,
                    strategy,
                    &program,
                    &Env::default(),
                    &batch,
                    &RunOptions {
                        batching,
                        ..options.clone()
                    },
                )
            }))
            .unwrap_or_else(|_| panic!("{what}: the run panicked"));
            let message = expect_internal(outcome, &what);
            assert!(
                message.starts_with("a broken backend wrote ")
                    && message.contains("tests/internal_errors.rs"),
                "{what}: {message}"
            );
        }
        // The CPU backend runs the same batch.
        let output = run(
            Strategy::ProgramCounter,
            &program,
            &Env::default(),
            &batch,
            &RunOptions::default(),
        )
        .expect("runs");
        assert_eq!(output.results[2], Ok(vec![Tensor::scalar(Scalar::I64(4))]));
    }
}

#[test]
fn a_panic_in_the_callers_observer_stays_the_callers() {
    let program = parse(DOUBLE);
    let batch = batch(&program, "double", 4);
    for strategy in Strategy::ALL {
        let options = RunOptions {
            observer: Some(Observer {
                interval: Duration::ZERO,
                callback: Arc::new(|_| panic!("the observer's own bug")),
            }),
            ..RunOptions::default()
        };
        let caught = catch_unwind(AssertUnwindSafe(|| {
            run(strategy, &program, &Env::default(), &batch, &options)
        }));
        let payload = caught.expect_err("the observer's panic goes on unwinding");
        assert_eq!(
            payload.downcast_ref::<&str>().copied(),
            Some("the observer's own bug"),
            "{strategy}"
        );
    }
}
