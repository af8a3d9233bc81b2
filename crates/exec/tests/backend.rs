//! The seam under the engine is real: every executor test program (the IR
//! files of `tests/ir` and the source programs of the workspace's
//! `tests/programs`, but for those whose runs are long) runs on a
//! backend that wraps the CPU backend and counts its calls, on every
//! batching strategy (each program in one lanes mode and block choice,
//! taken in turn, so that every configuration runs); every member gets the
//! bits (or the error) it gets on the CPU backend, the figures are the
//! same, and every method of the trait was called.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_exec::{run_on, Backend, BatchingOptions, Cpu, RunOptions, Strategy};
use autobatch_ir::{BinaryOp, CompareOp, Prim, ReduceOp, UnaryOp};
use autobatch_kernels::buffer::{Rows, RowsMut, Values, ValuesMut};
use autobatch_kernels::linalg::{Dims, ProductOp};
use autobatch_kernels::rng::{Draw, Streams};
use autobatch_kernels::{Fault, PrimContext};
use autobatch_types::{Data, ScalarType, Tensor};
use common::{config_name, configuration, directives, run_difference, Directive};

/// The methods of [`Backend`], in the order of the trait.
const METHODS: [&str; 25] = [
    "resize",
    "capacity",
    "copy",
    "gather_rows",
    "scatter_rows",
    "copy_rows",
    "broadcast_rows",
    "unary",
    "binary",
    "compare",
    "cast",
    "select",
    "reduce",
    "softmax",
    "product",
    "outer",
    "transpose",
    "index",
    "index_set",
    "set_items",
    "fill",
    "stack",
    "draw",
    "eval",
    "name",
];

/// The CPU backend, counting the calls of each method.
struct Counting {
    inner: Cpu,
    calls: [AtomicU64; METHODS.len()],
}

impl Counting {
    fn new() -> Counting {
        Counting {
            inner: Cpu,
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn count(&self, method: &str) -> &Cpu {
        let i = METHODS
            .iter()
            .position(|m| *m == method)
            .expect("a method of the trait");
        self.calls[i].fetch_add(1, Ordering::Relaxed);
        &self.inner
    }
}

impl Backend for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn resize(&self, data: &mut Data, ty: ScalarType, len: usize) {
        self.count("resize").resize(data, ty, len)
    }
    fn capacity(&self, data: &Data) -> usize {
        self.count("capacity").capacity(data)
    }
    fn copy(&self, src: Values<'_>, dst: ValuesMut<'_>) {
        self.count("copy").copy(src, dst)
    }
    fn gather_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], out: ValuesMut<'_>) {
        self.count("gather_rows")
            .gather_rows(src, row_len, rows, out)
    }
    fn scatter_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
        self.count("scatter_rows")
            .scatter_rows(src, row_len, rows, dst)
    }
    fn copy_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
        self.count("copy_rows").copy_rows(src, row_len, rows, dst)
    }
    fn broadcast_rows(&self, value: Values<'_>, rows: &[u32], dst: ValuesMut<'_>) {
        self.count("broadcast_rows")
            .broadcast_rows(value, rows, dst)
    }
    fn unary(&self, op: UnaryOp, x: Rows<'_>, out: RowsMut<'_>) {
        self.count("unary").unary(op, x, out)
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: Rows<'_>,
        b: Rows<'_>,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        self.count("binary").binary(op, a, b, out)
    }
    fn compare(&self, op: CompareOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        self.count("compare").compare(op, a, b, out)
    }
    fn cast(&self, x: Rows<'_>, out: RowsMut<'_>) {
        self.count("cast").cast(x, out)
    }
    fn select(&self, cond: Rows<'_>, if_true: Rows<'_>, if_false: Rows<'_>, out: RowsMut<'_>) {
        self.count("select").select(cond, if_true, if_false, out)
    }
    fn reduce(&self, op: ReduceOp, x: Rows<'_>, out: RowsMut<'_>) {
        self.count("reduce").reduce(op, x, out)
    }
    fn softmax(&self, x: Rows<'_>, out: RowsMut<'_>) {
        self.count("softmax").softmax(x, out)
    }
    fn product(&self, op: ProductOp, dims: Dims, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        self.count("product").product(op, dims, a, b, out)
    }
    fn outer(&self, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        self.count("outer").outer(a, b, out)
    }
    fn transpose(&self, x: Rows<'_>, m: usize, k: usize, out: RowsMut<'_>) {
        self.count("transpose").transpose(x, m, k, out)
    }
    fn index(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        self.count("index").index(array, index, length, out)
    }
    fn index_set(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        self.count("index_set")
            .index_set(array, index, value, length, out)
    }
    fn set_items(
        &self,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        rows: &[u32],
        array: RowsMut<'_>,
    ) -> Result<(), Fault> {
        self.count("set_items")
            .set_items(index, value, length, rows, array)
    }
    fn fill(&self, x: Rows<'_>, count: usize, out: RowsMut<'_>) {
        self.count("fill").fill(x, count, out)
    }
    fn stack(&self, items: &[Rows<'_>], out: RowsMut<'_>) {
        self.count("stack").stack(items, out)
    }
    fn draw(
        &self,
        draw: Draw,
        p: Option<Rows<'_>>,
        rows: &[u32],
        streams: &mut Streams<'_>,
        out: RowsMut<'_>,
    ) {
        self.count("draw").draw(draw, p, rows, streams, out)
    }
    fn eval(
        &self,
        prim: &Prim,
        args: &[&Tensor],
        ctx: &mut PrimContext<'_>,
    ) -> Result<Option<Tensor>, Fault> {
        self.count("eval").eval(prim, args, ctx)
    }
}

/// What differs, if anything, between `directive` run on the CPU backend
/// and on `counting`, on `strategy` in `batching`.
fn check(
    directive: &Directive,
    strategy: Strategy,
    batching: BatchingOptions,
    counting: &Counting,
) -> Option<String> {
    let on = |backend: &dyn Backend| {
        run_on(
            backend,
            strategy,
            &directive.program,
            &directive.env,
            &directive.batch,
            &RunOptions {
                batching,
                ..directive.options.clone()
            },
        )
    };
    let problem = run_difference(&on(&Cpu), &on(counting), true)?;
    Some(format!(
        "{}:{} on {strategy} {}: {problem}",
        directive.path.display(),
        directive.line,
        config_name(&batching)
    ))
}

#[test]
fn every_test_program_runs_the_same_on_a_backend_that_counts_its_calls() {
    let counting = Counting::new();
    let directives = directives();
    let strategies: Vec<Strategy> = Strategy::ALL
        .into_iter()
        .filter(|s| *s != Strategy::Reference)
        .collect();
    let mut failures = Vec::new();
    for (n, directive) in directives.iter().enumerate() {
        for &strategy in &strategies {
            let batching = configuration(strategy, n);
            if let Some(problem) = check(directive, strategy, batching, &counting) {
                // One line each, short enough to read in a CI log.
                let line: String = problem.chars().take(400).collect();
                eprintln!("{line}");
                failures.push(line);
            }
        }
    }
    for &strategy in &strategies {
        let configurations = strategy.configurations().len();
        assert!(
            directives.len() >= configurations,
            "{strategy}: {configurations} configurations, only {} runs",
            directives.len()
        );
    }
    let uncalled: Vec<&str> = METHODS
        .iter()
        .zip(&counting.calls)
        .filter(|(m, c)| **m != "name" && c.load(Ordering::Relaxed) == 0)
        .map(|(m, _)| *m)
        .collect();
    assert!(
        directives.len() > 100,
        "only {} directives",
        directives.len()
    );
    assert!(uncalled.is_empty(), "methods never called: {uncalled:?}");
    assert!(
        failures.is_empty(),
        "{} runs differ (listed above), the first: {}",
        failures.len(),
        failures[0]
    );
}
