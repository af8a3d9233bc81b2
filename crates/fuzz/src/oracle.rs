//! The oracle: compiles a case with `autobatch::compile`, runs it under
//! every registered strategy with every lanes mode and block choice it
//! reads ([`configurations`]) through the library API, and
//! compares every member's result with the reference executor's, bit for
//! bit (values) or by kind, line and column (errors); in a ragged batch,
//! also on two threads ([`threaded_configurations`]), and the reference's
//! result of each member with that member run alone; and, on the
//! reference, each differentiable helper with the entries that
//! differentiate it, and a loss with its gradient with respect to statics
//! (the same errors, kind, message and location: [`compare_with_function`]);
//! and, on the reference, each derivative against central differences of
//! its function ([`crate::finite`]), which sees a wrong derivation that
//! every executor runs alike.

use std::panic::{catch_unwind, AssertUnwindSafe};

use autobatch::{
    compile, BlockChoice, BoundBatch, Compiled, Inputs, LaneMode, MemberError, RunConfig,
    RunResult, Scalar, Strategy, Tensor, Value,
};

use crate::case::{Case, GradientCase, InputValue, Inputs as CaseInputs, Limits, ENTRY};

/// One way of running a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Configuration {
    pub strategy: Strategy,
    pub lanes: LaneMode,
    pub block_choice: BlockChoice,
    /// Worker threads (1 but for [`threaded_configurations`]).
    pub threads: usize,
    /// Whether an observer watches the run (called from a watcher thread
    /// as well as the workers) with an interrupt flag, never raised, that
    /// native code looks at while members run (which makes the native
    /// strategies compile interruptible code).
    pub watched: bool,
}

impl std::fmt::Display for Configuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.strategy, self.lanes, self.block_choice)?;
        if self.threads > 1 {
            write!(f, "/{} threads", self.threads)?;
        }
        if self.watched {
            write!(f, "/watched")?;
        }
        Ok(())
    }
}

/// Every strategy with its first lanes mode and block choice on two
/// threads: ragged batches run as one batch (or, on the reference, one
/// batch per size) split between the threads, and every member must keep
/// its own random stream.
pub fn threaded_configurations() -> Vec<Configuration> {
    Strategy::ALL
        .into_iter()
        .filter_map(|strategy| {
            let options = strategy.configurations().into_iter().next()?;
            Some(Configuration {
                strategy,
                lanes: options.lanes,
                block_choice: options.block_choice,
                threads: 2,
                watched: false,
            })
        })
        .collect()
}

/// The reference first, then every other registered strategy with every
/// lanes mode and block choice it reads ([`Strategy::configurations`]),
/// then each of them once more with its first options, watched by an
/// observer.
pub fn configurations() -> Vec<Configuration> {
    let reference = Configuration {
        strategy: Strategy::Reference,
        lanes: LaneMode::Auto,
        block_choice: BlockChoice::SmallestIndex,
        threads: 1,
        watched: false,
    };
    let others = Strategy::ALL
        .into_iter()
        .filter(|s| *s != Strategy::Reference);
    let batching = others.flat_map(|strategy| {
        strategy
            .configurations()
            .into_iter()
            .map(move |options| Configuration {
                strategy,
                lanes: options.lanes,
                block_choice: options.block_choice,
                threads: 1,
                watched: false,
            })
    });
    let all: Vec<Configuration> = std::iter::once(reference).chain(batching).collect();
    let watched = Strategy::ALL
        .into_iter()
        .filter(|s| *s != Strategy::Reference)
        .filter_map(|strategy| {
            all.iter()
                .find(|c| c.strategy == strategy)
                .map(|c| Configuration {
                    watched: true,
                    ..*c
                })
        })
        .collect::<Vec<_>>();
    all.into_iter().chain(watched).collect()
}

/// What checking one case found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every configuration agrees with the reference on every member.
    Pass,
    /// The program or its inputs were refused: a generator bug (or, for a
    /// shrunk variant, a variant that is not a program).
    Invalid(String),
    /// Some configuration disagrees with the reference, fails to run, or panics.
    Fail(Vec<Finding>),
}

/// One disagreement.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub configuration: Configuration,
    pub detail: String,
}

/// Checks a case whose program text is preceded by `header_lines` lines
/// (so that error lines match a test file with that many directive lines).
///
/// A ragged batch (members of different lengths) is also checked member by
/// member: each member run alone on the reference, numbered as in the
/// batch (so that it draws the same random numbers), must get what it gets
/// in the batch ([`members_alone`]).
pub fn check(case: &Case, header_lines: usize) -> Verdict {
    let source = format!("{}{}", "\n".repeat(header_lines), case.source());
    let inputs = case.inputs.to_json().to_string();
    let compiled = match compile_source(&source) {
        Ok(compiled) => compiled,
        Err(why) => return Verdict::Invalid(why),
    };
    let bound = match bind_compiled(&compiled, &inputs) {
        Ok(bound) => bound,
        Err(why) => return Verdict::Invalid(why),
    };
    let verdict = if !is_ragged_batch(&case.inputs) {
        compare_configurations(&bound, case.limits, &configurations()).0
    } else {
        let mut all = configurations();
        all.extend(threaded_configurations());
        match compare_configurations(&bound, case.limits, &all) {
            (Verdict::Pass, Some(batch)) => {
                members_alone(&compiled, &case.inputs, case.limits, &batch)
            }
            (verdict, _) => verdict,
        }
    };
    let verdict = match (verdict, &case.gradient) {
        (Verdict::Pass, Some(gradient)) => check_gradient(&compiled, case, gradient),
        (verdict, _) => verdict,
    };
    let verdict = match verdict {
        Verdict::Pass => check_derived(&compiled, case),
        verdict => verdict,
    };
    match verdict {
        Verdict::Pass => check_derivatives(&compiled, case),
        verdict => verdict,
    }
}

/// Checks the case's derivatives against central differences of their
/// functions on the reference ([`crate::finite`]).
pub fn check_derivatives(compiled: &Compiled, case: &Case) -> Verdict {
    let reference = configurations()[0];
    let finding = |detail: String| Finding {
        configuration: reference,
        detail,
    };
    match crate::finite::check_case(compiled, case) {
        Ok(mismatches) if mismatches.is_empty() => Verdict::Pass,
        Ok(mismatches) => Verdict::Fail(mismatches.into_iter().map(finding).collect()),
        Err(why) => Verdict::Fail(vec![finding(format!("central differences: {why}"))]),
    }
}

/// Checks only the case's derivatives against central differences of
/// their functions on the reference, as [`check`] does last.
pub fn check_derivatives_only(case: &Case, header_lines: usize) -> Verdict {
    let source = format!("{}{}", "\n".repeat(header_lines), case.source());
    match compile_source(&source) {
        Ok(compiled) => check_derivatives(&compiled, case),
        Err(why) => Verdict::Invalid(why),
    }
}

/// The limits of the runs that compare a function with its derivatives:
/// the defaults, so that no member reaches a limit (the derived program's
/// steps and depth are its own, not the function's).
pub(crate) fn derived_limits(case: &Case) -> Limits {
    let defaults = RunConfig::default();
    Limits {
        max_stack_depth: defaults.options.max_stack_depth,
        max_steps: defaults.options.max_steps,
        seed: case.limits.seed,
    }
}

/// Runs each helper of [`Case::derived`] and the entries that
/// differentiate it on the reference, with the same arguments, and
/// compares them member by member ([`compare_with_function`]).
fn check_derived(compiled: &Compiled, case: &Case) -> Verdict {
    let reference = configurations()[0];
    let limits = derived_limits(case);
    let mut findings = Vec::new();
    for derived in &case.derived {
        let inputs = derived.inputs_json(case).to_string();
        let run_entry = |entry: &str| {
            bind_entry(compiled, entry, &inputs).map(|bound| run(&bound, reference, limits))
        };
        let plain = match run_entry(&derived.function) {
            Ok(Ok(plain)) => plain,
            Ok(Err(detail)) => {
                findings.push(Finding {
                    configuration: reference,
                    detail,
                });
                continue;
            }
            Err(why) => return Verdict::Invalid(why),
        };
        for derivative in &derived.derivatives {
            let detail = match run_entry(&derivative.entry) {
                Ok(Ok(got)) => compare_with_function(&plain, &got, derivative.value),
                Ok(Err(detail)) => Some(detail),
                Err(why) => return Verdict::Invalid(why),
            };
            if let Some(detail) = detail {
                findings.push(Finding {
                    configuration: reference,
                    detail: format!(
                        "`{}` against `{}`: {detail}",
                        derivative.entry, derived.function
                    ),
                });
            }
        }
    }
    if findings.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(findings)
    }
}

/// The first member where a derivative's run (`derived`) does not agree
/// with the run of its function (`plain`), described: where the function
/// stops a member with an error, the derivative must stop it with the
/// same error (kind, message, location); where it gives a value, the
/// derivative must give one, the same bits if `value`. A member the
/// function stops at a limit is not compared (the derived program's steps
/// and depth are its own).
fn compare_with_function(plain: &RunResult, derived: &RunResult, value: bool) -> Option<String> {
    if plain.members.len() != derived.members.len() {
        return Some(format!(
            "{} results instead of {}",
            derived.members.len(),
            plain.members.len()
        ));
    }
    let limit = |e: &MemberError| {
        matches!(
            e.kind,
            autobatch::ErrorKind::StepLimit | autobatch::ErrorKind::StackOverflow
        )
    };
    let agrees = |(p, d): &(&Result<Value, MemberError>, &Result<Value, MemberError>)| match (p, d)
    {
        (Err(e), _) if limit(e) => true,
        (Err(e), Err(g)) => e == g,
        (Ok(v), Ok(w)) => !value || same_value(v, w),
        _ => false,
    };
    let pairs: Vec<_> = plain.members.iter().zip(&derived.members).collect();
    let m = pairs.iter().position(|pair| !agrees(pair))?;
    let show = |r: &Result<Value, MemberError>| autobatch::member_result_to_json(r).to_string();
    Some(format!(
        "member {m}: the function gives {}, the derivative {}",
        show(pairs[m].0),
        show(pairs[m].1)
    ))
}

/// Checks a gradient with respect to statics: under every configuration
/// (and two threads) each member's loss and the summed gradient's bits
/// must be the reference's, and the members in reverse order must give
/// the same gradient.
fn check_gradient(compiled: &Compiled, case: &Case, gradient: &GradientCase) -> Verdict {
    let bind_points = |points: &[serde_json::Value]| {
        let reordered = GradientCase {
            points: points.to_vec(),
            ..gradient.clone()
        };
        let json = reordered.inputs_json(case).to_string();
        let inputs =
            Inputs::from_json_str(&json).map_err(|e| format!("bad inputs: {}", e.message()))?;
        let statics: Vec<&str> = gradient.statics.iter().map(String::as_str).collect();
        without_panics(|| compiled.bind_static_gradient(&gradient.entry, &statics, &inputs))
            .map_err(|panic| format!("binding the gradient {panic}"))?
            .map_err(|e| format!("the gradient does not bind: {}", e.message()))
    };
    let bound = match bind_points(&gradient.points) {
        Ok(bound) => bound,
        Err(why) => return Verdict::Invalid(why),
    };
    let mut all = configurations();
    all.extend(threaded_configurations());
    let reference = match run(&bound, all[0], case.limits) {
        Ok(reference) => reference,
        Err(detail) => {
            return Verdict::Fail(vec![Finding {
                configuration: all[0],
                detail,
            }])
        }
    };
    let mut findings = Vec::new();
    // Each member's loss and error are those of a run of the entry, both
    // under the derived runs' limits (a gradient nests deeper than its
    // function: a differentiated loop or recursion).
    let json = gradient.inputs_json(case).to_string();
    let limits = derived_limits(case);
    let plain = bind_entry(compiled, &gradient.entry, &json)
        .map_err(|why| format!("the loss alone: {why}"))
        .and_then(|bound| run(&bound, all[0], limits));
    let detail = match (plain, run(&bound, all[0], limits)) {
        (Ok(plain), Ok(derived)) => compare_with_function(&plain, &derived, true),
        (Err(why), _) | (_, Err(why)) => Some(why),
    };
    if let Some(detail) = detail {
        findings.push(Finding {
            configuration: all[0],
            detail: format!("the gradient against the loss alone: {detail}"),
        });
    }
    for &configuration in &all[1..] {
        let detail = match run(&bound, configuration, case.limits) {
            Ok(run) => compare_runs(&reference, &run)
                .or_else(|| compare_gradients(&reference, &run))
                .or_else(|| compare_tape_bytes(&reference, &run)),
            Err(detail) => Some(detail),
        };
        if let Some(detail) = detail {
            findings.push(Finding {
                configuration,
                detail,
            });
        }
    }
    findings.extend(under_a_small_tape_bound(&bound, case.limits, &reference));
    let mut reversed = gradient.points.clone();
    reversed.reverse();
    let again = bind_points(&reversed).and_then(|bound| run(&bound, all[0], case.limits));
    let detail = match again {
        Ok(again) => {
            compare_gradients(&reference, &again).map(|d| format!("members reversed: {d}"))
        }
        Err(why) => Some(format!("members reversed: {why}")),
    };
    if let Some(detail) = detail {
        findings.push(Finding {
            configuration: all[0],
            detail,
        });
    }
    if findings.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(findings)
    }
}

/// Whether `actual` counts the most bytes a member's tape held as the
/// reference does, when every member finished (a batching strategy may
/// run, and count, instances of a fork after an earlier one faulted).
fn compare_tape_bytes(reference: &RunResult, actual: &RunResult) -> Option<String> {
    let (expected, got) = (reference.stats.tape_bytes, actual.stats.tape_bytes);
    let finished = reference.members.iter().all(Result::is_ok);
    (finished && expected != got).then(|| format!("tape_bytes {got} instead of {expected}"))
}

/// The gradient run again with each member's tape bounded at half the
/// most the reference's held (when it held any): every configuration must
/// stop the same members with `tape_limit` where the reference does and
/// give the others the same bits and summed gradients; and a member that
/// finishes (past half the bound its calls and forks are recomputed) must have the
/// bits of the unbounded run, as must the summed gradients when every
/// member finishes.
fn under_a_small_tape_bound(
    bound: &BoundBatch,
    limits: Limits,
    reference: &RunResult,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let all = configurations();
    let most = reference.stats.tape_bytes;
    if most < 2 {
        return findings;
    }
    let tight = Some(most / 2);
    let mut expected: Option<RunResult> = None;
    for &configuration in &all {
        let detail = match run_with_tape_bound(bound, configuration, limits, tight) {
            Err(detail) => Some(detail),
            Ok(result) => match &expected {
                Some(expected) => {
                    compare_runs(expected, &result).or_else(|| compare_gradients(expected, &result))
                }
                None => {
                    let detail = same_as_unbounded(reference, &result);
                    expected = Some(result);
                    detail
                }
            },
        };
        if let Some(detail) = detail {
            findings.push(Finding {
                configuration,
                detail: format!("under --max-tape-bytes {}: {detail}", most / 2),
            });
        }
    }
    findings
}

/// Whether the members of `bounded` (a run under a tape bound) that
/// finish have the bits of the `unbounded` run, and its summed gradients
/// when all finish.
fn same_as_unbounded(unbounded: &RunResult, bounded: &RunResult) -> Option<String> {
    let show = |r: &Result<Value, MemberError>| autobatch::member_result_to_json(r).to_string();
    let differing = unbounded
        .members
        .iter()
        .zip(&bounded.members)
        .position(|(expected, got)| got.is_ok() && !same_result(expected, got));
    if let Some(k) = differing {
        return Some(format!(
            "member {k}: unbounded {}, bounded {}",
            show(&unbounded.members[k]),
            show(&bounded.members[k])
        ));
    }
    if bounded.members.iter().all(Result::is_ok) {
        return compare_gradients(unbounded, bounded).map(|d| format!("against unbounded: {d}"));
    }
    None
}

/// The first static whose summed gradient differs in a bit, described.
fn compare_gradients(reference: &RunResult, actual: &RunResult) -> Option<String> {
    let same = reference.static_gradients.len() == actual.static_gradients.len()
        && reference
            .static_gradients
            .iter()
            .zip(&actual.static_gradients)
            .all(|((n, a), (m, b))| n == m && same_tensor(a, b));
    if same {
        return None;
    }
    let show = |run: &RunResult| {
        run.static_gradients
            .iter()
            .map(|(n, t)| format!("{n} = {}", autobatch::tensor_to_json(t)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "static gradients: expected {}, got {}",
        show(reference),
        show(actual)
    ))
}

/// Whether the batched ragged arguments differ in shape between members
/// (in `L`, or in the rows' `D`).
fn is_ragged_batch(inputs: &CaseInputs) -> bool {
    fn shape(v: &serde_json::Value, out: &mut Vec<usize>) {
        if let Some(items) = v.as_array() {
            out.push(items.len());
            items.iter().for_each(|item| shape(item, out));
        }
    }
    let shape_of = |v: &serde_json::Value| {
        let mut out = Vec::new();
        shape(v, &mut out);
        out
    };
    inputs.args.iter().any(|arg| match &arg.value {
        InputValue::Batched(values) if arg.ty.is_per_member() => values
            .windows(2)
            .any(|w| shape_of(&w[0]) != shape_of(&w[1])),
        _ => false,
    })
}

/// The inputs of member `m` alone: a batch of one.
fn member_inputs(inputs: &CaseInputs, m: usize) -> CaseInputs {
    let mut alone = inputs.clone();
    alone.members = 1;
    for arg in &mut alone.args {
        if let InputValue::Batched(values) = &mut arg.value {
            *values = values.get(m).cloned().into_iter().collect();
        }
    }
    alone
}

/// Runs each member of the batch alone on the reference (numbered as in
/// the batch) and compares its result with `batch`'s (the reference's).
fn members_alone(
    compiled: &Compiled,
    inputs: &CaseInputs,
    limits: Limits,
    batch: &RunResult,
) -> Verdict {
    let reference = configurations()[0];
    let mut findings = Vec::new();
    for (m, in_batch) in batch.members.iter().enumerate() {
        let alone = bind_compiled(compiled, &member_inputs(inputs, m).to_json().to_string())
            .map(|bound| bound.numbered_from(m as u64))
            .and_then(|bound| run(&bound, reference, limits));
        let show = |r: &Result<Value, MemberError>| autobatch::member_result_to_json(r).to_string();
        let detail = match alone {
            Err(why) => format!("member {m} alone: {why}"),
            Ok(alone) => match alone.members.first() {
                Some(result) if same_result(result, in_batch) => continue,
                Some(result) => format!(
                    "member {m}: alone {}, in the batch {}",
                    show(result),
                    show(in_batch)
                ),
                None => format!("member {m} alone: no result"),
            },
        };
        findings.push(Finding {
            configuration: reference,
            detail,
        });
    }
    if findings.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(findings)
    }
}

/// Checks program text with inputs JSON and limits.
pub fn check_source(source: &str, inputs_json: &str, limits: Limits) -> Verdict {
    match bind(source, inputs_json) {
        Ok(bound) => compare_configurations(&bound, limits, &configurations()).0,
        Err(why) => Verdict::Invalid(why),
    }
}

/// Runs a batch on `configurations`, the first of which is the reference,
/// and compares each run with the reference's; the reference's result too
/// if it ran.
fn compare_configurations(
    bound: &BoundBatch,
    limits: Limits,
    configurations: &[Configuration],
) -> (Verdict, Option<RunResult>) {
    let mut runs = configurations.iter().map(|&c| (c, run(bound, c, limits)));
    let Some((reference_config, reference)) = runs.next() else {
        return (Verdict::Pass, None);
    };
    let reference = match reference {
        Ok(result) => result,
        Err(detail) => {
            let finding = Finding {
                configuration: reference_config,
                detail,
            };
            return (Verdict::Fail(vec![finding]), None);
        }
    };
    let findings: Vec<Finding> = runs
        .filter_map(|(configuration, result)| {
            let detail = match result {
                Ok(result) => compare_runs(&reference, &result)?,
                Err(detail) => detail,
            };
            Some(Finding {
                configuration,
                detail,
            })
        })
        .collect();
    let verdict = if findings.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(findings)
    };
    (verdict, Some(reference))
}

/// Whether a case compiles and its inputs bind (without running it);
/// the reason if not.
pub fn validate(case: &Case) -> Result<(), String> {
    bind(&case.source(), &case.inputs.to_json().to_string()).map(|_| ())
}

/// Checks that the binder refuses `inputs` for the case's program (inputs
/// that fix the ragged dimension both in `shared` and, with other lengths,
/// in `batch`) with an input error naming the dimension; the error message
/// if so, what happened instead if not (it binds, or the binder panics).
pub fn refuses_inputs(case: &Case, inputs: &crate::case::Inputs) -> Result<String, String> {
    let compiled = compile_source(&case.source())?;
    let inputs = Inputs::from_json_str(&inputs.to_json().to_string())
        .map_err(|e| format!("bad inputs: {}", e.message()))?;
    match without_panics(|| compiled.bind(ENTRY, &inputs)) {
        Err(panic) => Err(format!("binding {panic}")),
        Ok(Ok(_)) => Err("the inputs bind".into()),
        Ok(Err(e))
            if e.message()
                .contains(&format!("`{}`", crate::ast::RAGGED_DIM)) =>
        {
            Ok(e.message().to_owned())
        }
        Ok(Err(e)) => Err(format!("refused for another reason: {}", e.message())),
    }
}

/// The reference's results as `autobatch run` prints them (the `results` array).
pub fn reference_results(
    source: &str,
    inputs_json: &str,
    limits: Limits,
) -> Result<serde_json::Value, String> {
    let bound = bind(source, inputs_json)?;
    let reference = configurations()[0];
    let result = run(&bound, reference, limits)?;
    Ok(result.to_json(false)["results"].clone())
}

/// The figures of a run of the case under `strategy` (its first lanes
/// mode and block choice), as `autobatch run --stats` prints them: the
/// executor's own report is under the strategy's name.
pub fn stats(case: &Case, strategy: Strategy) -> Result<serde_json::Value, String> {
    let bound = bind(&case.source(), &case.inputs.to_json().to_string())?;
    let options = strategy.configurations().into_iter().next();
    let configuration = Configuration {
        strategy,
        lanes: options.map_or(LaneMode::Auto, |o| o.lanes),
        block_choice: options.map_or(BlockChoice::SmallestIndex, |o| o.block_choice),
        threads: 1,
        watched: false,
    };
    Ok(run(&bound, configuration, case.limits)?.stats_to_json())
}

fn bind(source: &str, inputs_json: &str) -> Result<BoundBatch, String> {
    bind_compiled(&compile_source(source)?, inputs_json)
}

fn compile_source(source: &str) -> Result<Compiled, String> {
    let compiled = without_panics(|| compile(source, "generated.ab"))
        .map_err(|panic| format!("compiling {panic}"))?
        .map_err(|e| format!("does not compile:\n{}", e.render(false)))?;
    Ok(register_hosts(compiled))
}

/// The program with the functions of the host primitives it calls
/// ([`crate::ast::HOSTS`]): `host_affine(x, k)` is `0.5 x - k` and fails
/// where `x > 2.5`; `host_square(x)` is `x * x - 1`, batched (the calls of
/// a step at once), and fails where `x < -2.5`. Deterministic, so every
/// strategy must give every member the reference's value or error.
pub fn register_hosts(compiled: Compiled) -> Compiled {
    let scalar = |v: &Value| -> Result<f64, String> {
        match v {
            Value::Tensor(t) => match t.data.get(0) {
                Scalar::F64(x) => Ok(x),
                other => Err(format!("not an f64: {other:?}")),
            },
            Value::Tuple(_) => Err("a tuple".into()),
        }
    };
    let f64_value = |x: f64| Value::Tensor(Tensor::scalar(Scalar::F64(x)));
    let affine = move |args: &[Value]| -> Result<Value, String> {
        let (x, k) = (scalar(&args[0])?, scalar(&args[1])?);
        if x > 2.5 {
            return Err(format!("{x} is over 2.5"));
        }
        Ok(f64_value(0.5 * x - k))
    };
    let square = move |calls: &[Vec<Value>]| -> Vec<Result<Value, String>> {
        calls
            .iter()
            .map(|args| {
                let x = scalar(&args[0])?;
                if x < -2.5 {
                    return Err(format!("{x} is below -2.5"));
                }
                Ok(f64_value(x * x - 1.0))
            })
            .collect()
    };
    // A program that does not call a primitive has no function for it.
    let compiled = match compiled.clone().with_host("host_affine", affine) {
        Ok(with) => with,
        Err(_) => compiled,
    };
    match compiled.clone().with_batched_host("host_square", square) {
        Ok(with) => with,
        Err(_) => compiled,
    }
}

fn bind_compiled(compiled: &Compiled, inputs_json: &str) -> Result<BoundBatch, String> {
    bind_entry(compiled, ENTRY, inputs_json)
}

pub(crate) fn bind_entry(
    compiled: &Compiled,
    entry: &str,
    inputs_json: &str,
) -> Result<BoundBatch, String> {
    let inputs =
        Inputs::from_json_str(inputs_json).map_err(|e| format!("bad inputs: {}", e.message()))?;
    without_panics(|| compiled.bind(entry, &inputs))
        .map_err(|panic| format!("binding {panic}"))?
        .map_err(|e| format!("inputs of `{entry}` do not bind: {}", e.message()))
}

pub(crate) fn run(
    bound: &BoundBatch,
    configuration: Configuration,
    limits: Limits,
) -> Result<RunResult, String> {
    run_with_tape_bound(bound, configuration, limits, None)
}

/// [`run`] with a bound on each member's tape (`--max-tape-bytes`;
/// `None`: the default).
fn run_with_tape_bound(
    bound: &BoundBatch,
    configuration: Configuration,
    limits: Limits,
    max_tape_bytes: Option<u64>,
) -> Result<RunResult, String> {
    let config = RunConfig {
        strategy: configuration.strategy,
        options: autobatch::RunOptions {
            max_stack_depth: limits.max_stack_depth,
            max_steps: limits.max_steps,
            seed: limits.seed,
            threads: configuration.threads,
            max_instances: None,
            max_tape_bytes,
            // Recording a profile must change no result: every strategy that
            // records one does, under the fuzzer.
            profile: configuration.strategy.records_profile(),
            // Nor may counting the operations (or not): the threaded runs
            // count nothing.
            count_operations: configuration.threads == 1,
            interrupt: configuration
                .watched
                .then(|| autobatch::Interrupt::new().within_members()),
            batching: autobatch::BatchingOptions {
                lanes: configuration.lanes,
                block_choice: configuration.block_choice,
            },
            ..autobatch::RunOptions::default()
        },
    };
    // An observer that looks at every chance it gets (every millisecond,
    // from the workers and the native strategies' watcher thread).
    let observer = configuration.watched.then(|| autobatch::Observer {
        interval: std::time::Duration::from_millis(1),
        callback: std::sync::Arc::new(|progress: &autobatch::RunProgress<'_>| {
            std::hint::black_box(progress.op_counts.len());
        }),
    });
    match without_panics(|| bound.run_observed(&config, observer)) {
        Err(panic) => Err(format!("running {panic}")),
        Ok(Err(error)) => Err(format!("cannot run: {error}")),
        Ok(Ok(result)) => Ok(result),
    }
}

/// The first member whose result differs, described; `None` if all agree.
fn compare_runs(reference: &RunResult, actual: &RunResult) -> Option<String> {
    if reference.members.len() != actual.members.len() {
        return Some(format!(
            "{} results instead of {}",
            actual.members.len(),
            reference.members.len()
        ));
    }
    let differing = reference
        .members
        .iter()
        .zip(&actual.members)
        .position(|(expected, got)| !same_result(expected, got))?;
    let show = |r: &Result<Value, MemberError>| autobatch::member_result_to_json(r).to_string();
    Some(format!(
        "member {differing}: expected {}, got {}",
        show(&reference.members[differing]),
        show(&actual.members[differing])
    ))
}

fn same_result(a: &Result<Value, MemberError>, b: &Result<Value, MemberError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => same_value(a, b),
        (Err(a), Err(b)) => a.kind == b.kind && a.loc == b.loc,
        _ => false,
    }
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Tensor(a), Value::Tensor(b)) => same_tensor(a, b),
        (Value::Tuple(a), Value::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_value(a, b))
        }
        _ => false,
    }
}

fn same_tensor(a: &Tensor, b: &Tensor) -> bool {
    a.shape == b.shape
        && a.data.len() == b.data.len()
        && (0..a.data.len()).all(|i| scalar_bits(a.data.get(i)) == scalar_bits(b.data.get(i)))
}

/// A scalar as its type and exact bits, so that NaNs and signed zeros compare exactly.
fn scalar_bits(s: Scalar) -> (u8, u64) {
    match s {
        Scalar::Bool(v) => (0, u64::from(v)),
        Scalar::I32(v) => (1, v as u32 as u64),
        Scalar::I64(v) => (2, v as u64),
        Scalar::Usize(v) => (3, v),
        Scalar::F32(v) => (4, u64::from(v.to_bits())),
        Scalar::F64(v) => (5, v.to_bits()),
    }
}

/// Runs `f`, turning a panic into an error carrying its message.
fn without_panics<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("panicked: {message}")
    })
}
