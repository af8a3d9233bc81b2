//! The seam under the engine is real: every executor test program (the IR
//! files of `tests/ir` and the source programs of the workspace's
//! `tests/programs`, but for those that call an ODE solver) runs on a
//! backend that wraps the CPU backend and counts its calls, on every
//! batching strategy (each program in one lanes mode and block choice,
//! taken in turn, so that every configuration runs); every member gets the
//! bits (or the error) it gets on the CPU backend, the figures are the
//! same, and every method of the trait was called.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_exec::{run_on, Backend, BatchingOptions, Cpu, Env, RunOptions, RunOutput, Strategy};
use autobatch_ir::{BinaryOp, CompareOp, Prim, Program, ReduceOp, UnaryOp};
use autobatch_kernels::buffer::{Rows, RowsMut, Values, ValuesMut};
use autobatch_kernels::linalg::{Dims, ProductOp};
use autobatch_kernels::rng::{Draw, Streams};
use autobatch_kernels::{Fault, PrimContext};
use autobatch_types::{Data, ScalarType, Tensor};

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

fn files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    files
}

/// Every test program, optimized, with the text its directives are in.
fn programs() -> Vec<(PathBuf, Program, String)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut programs = Vec::new();
    for path in files(&here.join("tests/ir"), "ir") {
        let text = std::fs::read_to_string(&path).expect("readable");
        let mut program = autobatch_ir::parse::parse_program(&text).expect("parses");
        autobatch_passes::optimize(&mut program);
        programs.push((path, program, text));
    }
    for path in files(&here.join("../../tests/programs"), "ab") {
        let text = std::fs::read_to_string(&path).expect("readable");
        if calls_an_ode_solver(&text) {
            continue;
        }
        // Programs that must not compile have nothing to run.
        if let Ok(mut program) = autobatch_lower::compile(&text) {
            autobatch_passes::optimize(&mut program);
            programs.push((path, program, text));
        }
    }
    programs
}

/// Whether a source program calls an ODE solver. Its steps are thousands
/// of small operations of kinds the other programs make too, which would
/// take most of this test's time; the program tests run it on every
/// strategy and configuration on the CPU backend.
fn calls_an_ode_solver(text: &str) -> bool {
    ["ode_rk45", "ode_bdf"].iter().any(|s| text.contains(s))
}

/// A tensor's shape and elements as their types and exact bits, so that
/// NaNs and signed zeros compare exactly.
fn bits(t: &Tensor) -> (Vec<usize>, Vec<(u8, u64)>) {
    use autobatch_types::Scalar;
    let elements = (0..t.len())
        .map(|i| match t.data.get(i) {
            Scalar::Bool(v) => (0, u64::from(v)),
            Scalar::I32(v) => (1, v as u32 as u64),
            Scalar::I64(v) => (2, v as u64),
            Scalar::Usize(v) => (3, v),
            Scalar::F32(v) => (4, u64::from(v.to_bits())),
            Scalar::F64(v) => (5, v.to_bits()),
        })
        .collect();
    (t.shape.clone(), elements)
}

/// What differs between `expected` and `counted`, bit for bit.
fn difference(expected: &RunOutput, counted: &RunOutput) -> Option<String> {
    if expected.stats.steps != counted.stats.steps
        || expected.stats.op_counts != counted.stats.op_counts
    {
        return Some("different figures".into());
    }
    if expected.results.len() != counted.results.len() {
        return Some("different batch sizes".into());
    }
    for (member, (e, c)) in expected.results.iter().zip(&counted.results).enumerate() {
        let same = match (e, c) {
            (Ok(e), Ok(c)) => e.iter().map(bits).eq(c.iter().map(bits)),
            (Err(e), Err(c)) => e == c,
            _ => false,
        };
        if !same {
            return Some(format!("member {member}: {e:?} against {c:?}"));
        }
    }
    None
}

/// One `//@ run` directive of a test program, ready to run.
struct Directive {
    path: PathBuf,
    line: usize,
    program: Program,
    batch: autobatch_exec::Batch,
    options: RunOptions,
}

/// Every `//@ run` directive of the test programs whose inputs these tests
/// can bind alone (not tuples or symbolic dimensions).
fn directives() -> Vec<Directive> {
    let mut directives = Vec::new();
    for (path, program, text) in programs() {
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("//@ run") else {
                continue;
            };
            let Ok(case) = common::run_directive(i + 1, rest) else {
                continue;
            };
            let Ok(batch) = common::batch_of(&program, &case) else {
                continue;
            };
            directives.push(Directive {
                path: path.clone(),
                line: i + 1,
                program: program.clone(),
                batch,
                options: case.options,
            });
        }
    }
    directives
}

/// The configuration directive number `n` runs `strategy` in: each
/// directive runs every batching strategy once, the configurations taken
/// in turn from one directive to the next, so that every configuration of
/// every strategy runs on the counting backend (checked) without every
/// program running in all of them (the program tests do that on the CPU
/// backend).
fn configuration(strategy: Strategy, n: usize) -> BatchingOptions {
    let configurations = strategy.configurations();
    configurations[n % configurations.len()]
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
            &Env::default(),
            &directive.batch,
            &RunOptions {
                batching,
                ..directive.options.clone()
            },
        )
    };
    let problem = match (on(&Cpu), on(counting)) {
        (Ok(expected), Ok(counted)) => difference(&expected, &counted),
        (Err(e), Err(c)) if e == c => None,
        (e, c) => Some(format!("{e:?} against {c:?}")),
    }?;
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

fn config_name(batching: &BatchingOptions) -> String {
    format!("{}/{}", batching.lanes, batching.block_choice)
}
