//! What the executor tests share: the `//@ run:` / `//@ expect:` directives
//! of a test file (IR or source) as cases, a case's JSON inputs as a
//! [`Batch`], results as JSON or as bits, every configuration of the
//! strategies, and every directive of the test programs ready to run
//! ([`directives`]) with what differs between two runs ([`difference`]).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use autobatch_exec::{
    Arg, Batch, BatchingOptions, Env, ExecError, ReportField, ReportValue, RunOptions, RunOutput,
    Strategy,
};
use autobatch_ir::{Function, Program};
use autobatch_types::{Data, Dim, MemberError, Scalar, ScalarType, Tensor, TensorType, Value};
use serde_json::Value as Json;

/// One `run` directive and the expectation that follows it.
pub struct Case {
    /// The line of the `run` directive, for messages.
    pub line: usize,
    pub entry: String,
    pub options: RunOptions,
    pub inputs: Json,
    pub tolerance: f64,
    /// One entry per member; `None` until the `expect` line is read.
    pub expect: Option<Vec<Json>>,
}

pub const DEFAULT_TOLERANCE: f64 = 1e-12;

/// The `//@` directives of a file, as cases.
pub fn cases(text: &str) -> Result<Vec<Case>, String> {
    let mut cases: Vec<Case> = Vec::new();
    let mut tolerance = DEFAULT_TOLERANCE;
    for (i, line) in text.lines().enumerate() {
        let Some(directive) = line.trim_start().strip_prefix("//@ ") else {
            continue;
        };
        let at = |m: String| format!("line {}: {m}", i + 1);
        if let Some(rest) = directive.strip_prefix("run") {
            cases.push(run_directive(i + 1, rest).map_err(at)?);
            tolerance = DEFAULT_TOLERANCE;
        } else if let Some(rest) = directive.strip_prefix("tolerance: ") {
            tolerance = rest
                .trim()
                .parse()
                .map_err(|_| at("bad tolerance".into()))?;
        } else if directive.starts_with("configurations: ") {
            // Which configurations the program tests run each `run` on;
            // the tests here choose their own.
        } else if let Some(rest) = directive.strip_prefix("expect: ") {
            let case = cases
                .last_mut()
                .filter(|c| c.expect.is_none())
                .ok_or_else(|| at("`expect` must follow a `run`".into()))?;
            let Json::Array(members) = serde_json::from_str(rest).map_err(|e| at(e.to_string()))?
            else {
                return Err(at("`expect` takes an array, one entry per member".into()));
            };
            case.expect = Some(members);
            case.tolerance = tolerance;
        } else {
            return Err(at(format!("unknown directive `{directive}`")));
        }
    }
    Ok(cases)
}

/// `(OPTIONS): ENTRY INPUTS` after `run`.
pub fn run_directive(line: usize, rest: &str) -> Result<Case, String> {
    let mut options = RunOptions::default();
    let rest = match rest.strip_prefix('(') {
        Some(inside) => {
            let (list, after) = inside.split_once(')').ok_or("unclosed options")?;
            for option in list.split(',') {
                set_option(&mut options, option.trim())?;
            }
            after
        }
        None => rest,
    };
    let rest = rest.strip_prefix(": ").ok_or("expected `: ENTRY INPUTS`")?;
    let (entry, inputs) = rest.split_once(' ').ok_or("expected `ENTRY INPUTS`")?;
    Ok(Case {
        line,
        entry: entry.to_string(),
        options,
        inputs: serde_json::from_str(inputs).map_err(|e| e.to_string())?,
        tolerance: DEFAULT_TOLERANCE,
        expect: None,
    })
}

fn set_option(options: &mut RunOptions, option: &str) -> Result<(), String> {
    let (key, value) = option
        .split_once('=')
        .ok_or_else(|| format!("bad option `{option}`"))?;
    let bad = |_| format!("bad value in `{option}`");
    match key {
        "max-stack-depth" => options.max_stack_depth = value.parse().map_err(bad)?,
        "max-steps" => options.max_steps = value.parse().map_err(bad)?,
        "seed" => options.seed = value.parse().map_err(bad)?,
        "max-instances" => options.max_instances = Some(value.parse().map_err(bad)?),
        "max-tape-bytes" => options.max_tape_bytes = Some(value.parse().map_err(bad)?),
        _ => return Err(format!("unknown option `{key}`")),
    }
    Ok(())
}

/// The batch a case's inputs make for `entry`: `{"batch": {..}, "shared": {..}}`
/// keyed by the names of the entry's (flattened) parameter variables.
pub fn batch_of(program: &Program, case: &Case) -> Result<Batch, String> {
    let entry = program
        .function_by_name(&case.entry)
        .ok_or_else(|| format!("no function `{}`", case.entry))?;
    let function = &program.functions[entry];
    let mut args = Vec::new();
    let mut size = None;
    for param in &function.params {
        let data = &function.vars[*param];
        let name = data.name.as_deref().unwrap_or_default();
        if let Some(values) = case.inputs["batch"].get(name) {
            let values = values
                .as_array()
                .ok_or_else(|| format!("`{name}`: a batched input is an array"))?;
            let tensors = values
                .iter()
                .map(|v| tensor_of(v, &data.ty))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("`{name}`: {e}"))?;
            if size.is_some_and(|s| s != tensors.len()) {
                return Err(format!("`{name}`: another number of members"));
            }
            size = Some(tensors.len());
            args.push(Arg::Batched(tensors));
        } else if let Some(value) = case.inputs["shared"].get(name) {
            let tensor = tensor_of(value, &data.ty).map_err(|e| format!("`{name}`: {e}"))?;
            args.push(Arg::Shared(tensor));
        } else {
            return Err(format!("no input for parameter `{name}`"));
        }
    }
    Ok(Batch {
        entry,
        size: size.unwrap_or(1),
        args,
    })
}

/// A JSON value (nested arrays of scalars) as a tensor of type `ty`.
fn tensor_of(value: &Json, ty: &TensorType) -> Result<Tensor, String> {
    let mut shape = Vec::new();
    let mut data = Data::with_capacity(ty.elem, 0);
    collect_elements(value, ty, 0, &mut shape, &mut data)?;
    Ok(Tensor::new(shape, data))
}

fn collect_elements(
    value: &Json,
    ty: &TensorType,
    depth: usize,
    shape: &mut Vec<usize>,
    data: &mut Data,
) -> Result<(), String> {
    let Some(dim) = ty.dims.get(depth) else {
        data.push(scalar_of(value, ty.elem)?);
        return Ok(());
    };
    let items = value.as_array().ok_or("expected an array")?;
    if shape.len() == depth {
        shape.push(items.len());
    }
    if shape[depth] != items.len() || matches!(dim, Dim::Fixed(n) if *n as usize != items.len()) {
        return Err(format!("an axis of length {} does not fit", items.len()));
    }
    items
        .iter()
        .try_for_each(|item| collect_elements(item, ty, depth + 1, shape, data))
}

fn scalar_of(value: &Json, elem: ScalarType) -> Result<Scalar, String> {
    let wrong = || format!("{value} is not a {elem}");
    let scalar = match elem {
        ScalarType::Bool => Scalar::Bool(value.as_bool().ok_or_else(wrong)?),
        ScalarType::I32 => Scalar::I32(
            value
                .as_i64()
                .and_then(|v| v.try_into().ok())
                .ok_or_else(wrong)?,
        ),
        ScalarType::I64 => Scalar::I64(value.as_i64().ok_or_else(wrong)?),
        ScalarType::Usize => Scalar::Usize(value.as_u64().ok_or_else(wrong)?),
        ScalarType::F32 => Scalar::F32(float_of(value).ok_or_else(wrong)? as f32),
        ScalarType::F64 => Scalar::F64(float_of(value).ok_or_else(wrong)?),
    };
    Ok(scalar)
}

fn float_of(value: &Json) -> Option<f64> {
    match value.as_str() {
        Some("NaN") => Some(f64::NAN),
        Some("inf") => Some(f64::INFINITY),
        Some("-inf") => Some(f64::NEG_INFINITY),
        Some(_) => None,
        None => value.as_f64(),
    }
}

/// A member's results as JSON, tuples as arrays (the shape of `ret_type`).
pub fn json_of_results(function: &Function, results: &[Tensor]) -> Json {
    let mut flat = results.iter().cloned();
    match Value::unflatten(&function.ret_type, &mut flat) {
        Some(value) => json_of_value(&value),
        None => Json::String(format!("{} results", results.len())),
    }
}

fn json_of_value(value: &Value) -> Json {
    match value {
        Value::Tuple(items) => Json::Array(items.iter().map(json_of_value).collect()),
        Value::Tensor(t) => {
            let elements: Vec<Json> = (0..t.len())
                .map(|i| json_of_scalar(t.data.get(i)))
                .collect();
            nest(&t.shape, &elements)
        }
    }
}

/// Row-major `elements` as nested arrays of `shape`.
fn nest(shape: &[usize], elements: &[Json]) -> Json {
    match shape.split_first() {
        None => elements.first().cloned().unwrap_or(Json::Null),
        Some((&n, inner)) => {
            let step = inner.iter().product::<usize>();
            Json::Array(
                (0..n)
                    .map(|i| nest(inner, &elements[i * step..(i + 1) * step]))
                    .collect(),
            )
        }
    }
}

fn json_of_scalar(s: Scalar) -> Json {
    let float = |v: f64| match v {
        v if v.is_nan() => Json::from("NaN"),
        v if v == f64::INFINITY => Json::from("inf"),
        v if v == f64::NEG_INFINITY => Json::from("-inf"),
        v => Json::from(v),
    };
    match s {
        Scalar::Bool(v) => Json::from(v),
        Scalar::I32(v) => Json::from(v),
        Scalar::I64(v) => Json::from(v),
        Scalar::Usize(v) => Json::from(v),
        Scalar::F32(v) => float(v as f64),
        Scalar::F64(v) => float(v),
    }
}

/// Whether `actual` is `expected`: exactly, or to `tolerance` for floats.
pub fn same_value(expected: &Json, actual: &Json, tolerance: f64) -> bool {
    match (expected, actual) {
        (Json::Array(e), Json::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| same_value(e, a, tolerance))
        }
        (Json::Number(e), Json::Number(a)) if e.is_f64() || a.is_f64() => {
            let (e, a) = (
                e.as_f64().unwrap_or(f64::NAN),
                a.as_f64().unwrap_or(f64::NAN),
            );
            (e - a).abs() <= tolerance * e.abs().max(1.0)
        }
        _ => expected == actual,
    }
}

/// Whether `actual` is the error `expected` describes: its `kind`, and its
/// `line`, `column` and (a substring of) `message` when given.
pub fn same_error(expected: &Json, actual: &MemberError) -> bool {
    let kind = expected["kind"].as_str() == Some(actual.kind.name());
    let line = expected["line"]
        .as_u64()
        .is_none_or(|l| l == u64::from(actual.loc.line));
    let column = expected["column"]
        .as_u64()
        .is_none_or(|c| c == u64::from(actual.loc.column));
    let message = expected["message"]
        .as_str()
        .is_none_or(|m| actual.message.contains(m));
    kind && line && column && message
}

/// Every registered strategy, each with every lanes mode and block choice
/// it reads (`Strategy::configurations`), the reference first.
pub fn configurations() -> Vec<(Strategy, BatchingOptions)> {
    Strategy::ALL
        .into_iter()
        .flat_map(|s| s.configurations().into_iter().map(move |b| (s, b)))
        .collect()
}

/// The batching strategies (local-static and program-counter), each with
/// every lanes mode and block choice it reads, on one thread and two, with
/// fused chains and without: the runs the fusion tests compare.
pub fn batched_runs() -> Vec<(Strategy, BatchingOptions, RunOptions)> {
    let mut runs = Vec::new();
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        for batching in strategy.configurations() {
            for threads in [1, 2] {
                for fuse in [true, false] {
                    let options = RunOptions {
                        threads,
                        fuse,
                        ..RunOptions::default()
                    };
                    runs.push((strategy, batching, options));
                }
            }
        }
    }
    runs
}

/// Each member's results as bits (so that NaN compares equal to itself),
/// or its error as text.
pub fn result_bits(output: &RunOutput) -> Vec<Result<Vec<Vec<u64>>, String>> {
    output
        .results
        .iter()
        .map(|r| match r {
            Ok(values) => Ok(values
                .iter()
                .map(|t| match &t.data {
                    Data::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
                    Data::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
                    Data::I64(v) => v.iter().map(|x| *x as u64).collect(),
                    other => panic!("unexpected result type {}", other.ty()),
                })
                .collect()),
            Err(error) => Err(format!("{error:?}")),
        })
        .collect()
}

/// The field `name` of an executor's report (panics, naming the report,
/// if it has none).
pub fn report_field<'a>(report: &'a [ReportField], name: &str) -> &'a ReportValue {
    &report
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no `{name}` in {report:?}"))
        .value
}

/// A tensor of `float` (`"f32"` or `"f64"`) elements.
pub fn float_tensor(float: &str, shape: Vec<usize>, values: impl Iterator<Item = f64>) -> Tensor {
    let data = if float == "f32" {
        Data::F32(values.map(|v| v as f32).collect())
    } else {
        Data::F64(values.collect())
    };
    Tensor::new(shape, data)
}

/// The files of `dir` with `extension`, sorted.
pub fn files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    files
}

/// Every executor test program (the IR files of `tests/ir` and the
/// source programs of the workspace's `tests/programs` that compile, but
/// for those whose runs are long: [`has_long_runs`]), optimized, with the
/// text its directives are in.
pub fn programs() -> Vec<(PathBuf, Program, String)> {
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
        if has_long_runs(&text) {
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

/// Whether a program test's file says its runs are long (`//@
/// configurations: one per run`: the ODE solvers' and the random draws'
/// files). Their steps are thousands of small operations of kinds the
/// other programs make too, which would take most of the time of the tests
/// that run every directive ([`directives`]); the program tests run them
/// on every strategy.
pub fn has_long_runs(text: &str) -> bool {
    text.lines()
        .any(|line| line.trim() == "//@ configurations: one per run")
}

/// Whether two tensors have the same shape, type and elements, floats by
/// their bits (so that NaNs and signed zeros compare exactly).
pub fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.shape == b.shape
        && match (&a.data, &b.data) {
            (Data::F32(x), Data::F32(y)) => x
                .iter()
                .map(|v| v.to_bits())
                .eq(y.iter().map(|v| v.to_bits())),
            (Data::F64(x), Data::F64(y)) => x
                .iter()
                .map(|v| v.to_bits())
                .eq(y.iter().map(|v| v.to_bits())),
            (x, y) => x == y,
        }
}

/// What differs between two runs of one directive, bit for bit (the
/// members' results and errors and, if `figures`, the steps and operation
/// counts), or what is wrong with both: an internal error is never right.
pub fn run_difference(
    expected: &Result<RunOutput, ExecError>,
    actual: &Result<RunOutput, ExecError>,
    figures: bool,
) -> Option<String> {
    match (expected, actual) {
        (Ok(e), Ok(a)) => difference(e, a, figures),
        (Err(ExecError::Internal(e)), _) => Some(format!("internal error: {e}")),
        (Err(e), Err(a)) if e == a => None,
        (e, a) => Some(format!("{} against {}", outcome_of(e), outcome_of(a))),
    }
}

/// A run's outcome in a few words, for a message.
fn outcome_of(run: &Result<RunOutput, ExecError>) -> String {
    match run {
        Ok(output) => format!("{} results", output.results.len()),
        Err(e) => format!("{e:?}"),
    }
}

/// What differs between `expected` and `actual`, bit for bit: the
/// members' results and errors and, if `figures`, the steps and operation
/// counts.
pub fn difference(expected: &RunOutput, actual: &RunOutput, figures: bool) -> Option<String> {
    if figures
        && (expected.stats.steps != actual.stats.steps
            || expected.stats.op_counts != actual.stats.op_counts)
    {
        return Some("different figures".into());
    }
    if expected.results.len() != actual.results.len() {
        return Some("different batch sizes".into());
    }
    for (member, (e, c)) in expected.results.iter().zip(&actual.results).enumerate() {
        let same = match (e, c) {
            (Ok(e), Ok(c)) => e.len() == c.len() && e.iter().zip(c).all(|(e, c)| same_bits(e, c)),
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
pub struct Directive {
    pub path: PathBuf,
    pub line: usize,
    pub program: Program,
    /// The lengths of the symbolic dimensions ([`env_of`]).
    pub env: Env,
    pub batch: Batch,
    pub options: RunOptions,
}

/// Every `//@ run` directive of the test programs whose inputs these tests
/// can bind alone: no tuples and no statics, every batched argument with
/// as many members, every symbolic dimension of one length ([`env_of`]).
pub fn directives() -> Vec<Directive> {
    let mut directives = Vec::new();
    for (path, program, text) in programs() {
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("//@ run") else {
                continue;
            };
            let Ok(case) = run_directive(i + 1, rest) else {
                continue;
            };
            let Ok(batch) = batch_of(&program, &case) else {
                continue;
            };
            let Some(env) = env_of(&program, &batch) else {
                continue;
            };
            directives.push(Directive {
                path: path.clone(),
                line: i + 1,
                env,
                program: program.clone(),
                batch,
                options: case.options,
            });
        }
    }
    directives
}

/// The environment of a run of `batch` when the program needs no statics
/// and every member gives the symbolic dimensions the same lengths: the
/// lengths its arguments' shapes fix, 0 for those no argument has (as the
/// library binds them: only code the entry does not reach may use them).
pub fn env_of(program: &Program, batch: &Batch) -> Option<Env> {
    if !program.statics.is_empty() {
        return None;
    }
    let mut symbols: Vec<Option<u64>> = vec![None; program.symbols.len()];
    let function = &program.functions[batch.entry];
    for (param, arg) in function.params.iter().zip(&batch.args) {
        let dims = &function.vars[*param].ty.dims;
        let tensors: Vec<&Tensor> = match arg {
            Arg::Batched(tensors) => tensors.iter().collect(),
            Arg::Shared(tensor) => vec![tensor],
        };
        for tensor in tensors {
            for (dim, &len) in dims.iter().zip(&tensor.shape) {
                if let Dim::Symbolic(s) = dim {
                    let bound = symbols.get_mut(s.0 as usize)?;
                    if bound.is_some_and(|b| b != len as u64) {
                        return None;
                    }
                    *bound = Some(len as u64);
                }
            }
        }
    }
    Some(Env {
        symbols: symbols.into_iter().map(|s| s.unwrap_or(0)).collect(),
        ..Env::default()
    })
}

/// The configuration directive number `n` runs `strategy` in: each
/// directive runs every batching strategy once, the configurations taken
/// in turn from one directive to the next, so that every configuration of
/// every strategy runs without every program running in all of them (the
/// program tests do that).
pub fn configuration(strategy: Strategy, n: usize) -> BatchingOptions {
    let configurations = strategy.configurations();
    configurations[n % configurations.len()]
}

/// A configuration as `lanes/block-choice`.
pub fn config_name(batching: &BatchingOptions) -> String {
    format!("{}/{}", batching.lanes, batching.block_choice)
}
