//! The derivative oracle: every derivative a case checks is compared with
//! central differences of the function it differentiates, on the reference
//! executor, so that a wrong derivation (which every executor runs alike,
//! and so agrees on) is seen.
//!
//! For each member, the derivative along a fixed direction `d` (the
//! partials `g` weighed by `d`'s elements, all nonzero and different, so
//! that no wrong partial hides behind another: [`direction`]) is compared
//! with the function run at the point moved along `d` by `±h`, `±h/2` and
//! `±c` (`h` is [`RELATIVE_STEP`] and `c` [`CLOSE_STEP`] times the point's
//! largest magnitude, at least one), and at the point: `D(h)` and `D(h/2)` are two
//! central differences and `R = (4 D(h/2) - D(h)) / 3` their Richardson
//! extrapolation. A member is skipped where the function is not smooth
//! across the points: some of them fault or give a value that is not
//! finite, `D(h)` and `D(h/2)` disagree by more than [`KINK`] (a step of
//! the function between them, such as the helpers' `fault as f64 * 0.125`
//! whose integer comes from the point, moves `D(h/2)` to about twice
//! `D(h)`), or the value at the point is apart from the mean of its
//! neighbours at `±h/2` (a step exactly at the point), or the difference
//! at the close step `D(c)` is not `R` within [`CLOSE_TOLERANCE`] (a
//! feature of the function narrower than `h`, or a step too small for the
//! other tests), or the one-sided differences at `c` disagree (a bend
//! exactly at the point). Elsewhere `g·d` must be within
//! `TOLERANCE·(1 + |R|) + |D(h) - D(h/2)| + noise / h` of `R`, or within
//! `TOLERANCE·(1 + |D(c)|) + rounding / c` of `D(c)` (where `h` is beyond the
//! range in which the differences shrink as `h²`, `R` is off by more than
//! their spread). The noise ([`Noise`]) is what evaluating the function
//! costs in accuracy: rounding, and between points `h` apart in a function
//! that reaches an ODE solver, the jumps of its adaptive steps, which take
//! other steps there; the tests at the close step allow rounding only,
//! the steps being the same between close points (else a jump shows as a
//! narrow feature). So a bend at the point shows in an ODE-reaching
//! function too, and the piecewise function an adaptive solver computes
//! (smooth between the points where a step is accepted or rejected
//! otherwise, with jumps of the order of its tolerances there, which
//! `ode_bdf_tol`'s gradient, of the steps as taken, can make steeper
//! than the solution's slope) is not judged by differences that straddle
//! its jumps.
//!
//! Checked so: the gradients of the scalar helper (`g_ds`), each row of a
//! Jacobian of a vector helper (`j_dv0`, `j_dl`, ...: the row's entries are
//! the output's partials in each coordinate of the point), the moved points
//! all in one batch (seven members for each of the first three members);
//! and the gradient
//! of the loss with respect to the statics summed over members (`--grad-statics
//! W,M`), summed over the members that finish at the point, along a fixed
//! direction per static whose elements are all nonzero and different (the
//! statics are shared, so each moved point is a run of its own). The helpers are all `f64`, so no `f32`
//! difference is taken.

use autobatch::{Compiled, MemberError, RunResult, Scalar, Value};
use serde_json::{json, Map, Value as Json};

use crate::ast::{print_program, ExprKind, Program};
use crate::case::{Case, DerivedCase, GradientCase};
use crate::oracle::{bind_entry, configurations, derived_limits, run};

/// The step along a coordinate, relative to its magnitude (at least one).
pub const RELATIVE_STEP: f64 = 1e-2;

/// The relative disagreement of `D(h)` and `D(h/2)` beyond which the
/// function is taken to have a kink or a step between the points.
pub const KINK: f64 = 1e-2;

/// The relative tolerance of a derivative against the extrapolated difference.
pub const TOLERANCE: f64 = 1e-6;

/// The close step, relative to the coordinate's magnitude (at least one):
/// a feature of the function narrower than `h` (a loop that amplifies a
/// small difference by `1.5^30` around an unstable fixed point, or a small
/// step at the point) shows in the difference at this step only.
pub const CLOSE_STEP: f64 = 1e-7;

/// The relative disagreement of the difference at the close step with the
/// extrapolated one beyond which the function is taken not to be smooth
/// at the scale of `h`.
pub const CLOSE_TOLERANCE: f64 = 1e-2;

/// What evaluating a function costs in accuracy, relative to its values:
/// between points close together, and between points `h` apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    /// Rounding: the error of a difference at the close step.
    pub close: f64,
    /// The error of a difference at `h`: rounding, and in a function that
    /// reaches an ODE solver, the jumps of its adaptive steps.
    pub wide: f64,
}

impl Noise {
    /// Rounding over the generated helpers' few dozen operations.
    pub const ROUNDING: Noise = Noise {
        close: 1e-13,
        wide: 1e-13,
    };

    /// A function that reaches an ODE solver: between points `h` apart its
    /// steps differ, and its value is accurate to its tolerances (`1e-6`
    /// relative at the loosest), and so is its derivative, which
    /// differences at `h` cannot be held to more closely than this over
    /// `h`. Between close points the steps are the same (it is smooth
    /// there), its value noisy by rounding in many steps and in the
    /// forward differences of `ode_bdf`'s Jacobians.
    pub const SOLVER: Noise = Noise {
        close: 1e-10,
        wide: 1e-6,
    };
}

/// The function's values around one coordinate `x` of a point: at `x ± h`,
/// `x ± h/2`, `x ± c` (the close step) and `x`, in that order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Differences {
    pub h: f64,
    pub close: f64,
    pub values: [f64; 7],
}

/// The seven offsets of [`Differences::values`] for steps `h` and `close`.
fn offsets(h: f64, close: f64) -> [f64; 7] {
    [h, -h, 0.5 * h, -0.5 * h, close, -close, 0.0]
}

impl Differences {
    /// The steps `h` and `close` along a coordinate whose value is `x`.
    pub fn steps(x: f64) -> (f64, f64) {
        let scale = x.abs().max(1.0);
        (RELATIVE_STEP * scale, CLOSE_STEP * scale)
    }

    /// `None` if the function is not smooth across the points (see the
    /// module doc), else why `derivative` is neither the extrapolated
    /// difference nor the close one, or `Some(Ok(()))`; `noise` is the
    /// function's relative evaluation error.
    pub fn judge(&self, derivative: f64, noise: Noise) -> Option<Result<(), String>> {
        let [plus, minus, half_plus, half_minus, close_plus, close_minus, at] = self.values;
        if !self.values.iter().all(|v| v.is_finite()) || !derivative.is_finite() {
            return None;
        }
        let largest = self.values.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
        let (rounding, fine) = (noise.wide * largest, noise.close * largest);
        let wide = (plus - minus) / (2.0 * self.h);
        let narrow = (half_plus - half_minus) / self.h;
        let spread = (wide - narrow).abs();
        // A step or a bend between the points, or a value at `x` apart
        // from its neighbours' (`h²/8 f''` where smooth).
        let bend = ((half_plus + half_minus) / 2.0 - at).abs();
        let smooth = 1.0 + narrow.abs();
        if spread > KINK * smooth || bend > 10.0 * KINK * self.h * smooth + rounding {
            return None;
        }
        let estimate = (4.0 * narrow - wide) / 3.0;
        // A feature narrower than `h`, or a step at the point smaller than
        // the bend allows: the close difference is not the extrapolated one.
        let close = (close_plus - close_minus) / (2.0 * self.close);
        if (close - estimate).abs() > CLOSE_TOLERANCE * (1.0 + close.abs()) + fine / self.close {
            return None;
        }
        // A bend exactly at the point (a continuous function whose slopes
        // on its two sides differ, where the derivative is one side's and
        // every central difference their mean): the one-sided close
        // differences disagree.
        let forward = (close_plus - at) / self.close;
        let backward = (at - close_minus) / self.close;
        if (forward - backward).abs()
            > CLOSE_TOLERANCE * (1.0 + close.abs()) + 2.0 * fine / self.close
        {
            return None;
        }
        let allowed = TOLERANCE * (1.0 + estimate.abs()) + spread + rounding / self.h;
        if (derivative - estimate).abs() <= allowed {
            return Some(Ok(()));
        }
        // Where `h` is beyond the range in which the differences shrink
        // as `h²` (higher derivatives large at its scale), the
        // extrapolation is off by more than the spread; the close
        // difference is not, to its rounding (of the values there: no
        // floor, so that a function near zero is held closely).
        let near = [close_plus, close_minus, at]
            .iter()
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        let close_allowed = TOLERANCE * (1.0 + close.abs()) + noise.close * near / self.close;
        if (derivative - close).abs() <= close_allowed {
            return Some(Ok(()));
        }
        Some(Err(format!(
            "{derivative} where the central differences give {estimate} \
             (h = {}: {wide}, h/2: {narrow}, close: {close}; allowed error {allowed:.3e})",
            self.h
        )))
    }
}

/// The functions `function` calls, directly or not, itself included, by
/// their names in the program's text.
fn reached(program: &Program, function: &str) -> Vec<String> {
    let source = print_program(program);
    let bodies: Vec<(&str, &str)> = source
        .split("\nfn ")
        .skip(1)
        .filter_map(|chunk| Some((chunk.split('(').next()?, chunk)))
        .collect();
    let mut found = vec![function.to_owned()];
    let mut next = 0;
    while let Some(name) = found.get(next).cloned() {
        next += 1;
        let Some((_, body)) = bodies.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        for (callee, _) in &bodies {
            if !found.iter().any(|f| f == callee) && mentions(body, callee) {
                found.push((*callee).to_owned());
            }
        }
    }
    found
}

/// Whether `text` holds `name` as a whole word.
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The relative evaluation error of `function` (see [`Noise::SOLVER`]).
pub fn noise(program: &Program, function: &str) -> Noise {
    let source = print_program(program);
    let solves = reached(program, function).iter().any(|f| {
        source
            .split("\nfn ")
            .find(|chunk| chunk.starts_with(&format!("{f}(")))
            .is_some_and(|body| body.contains("ode_rk45") || body.contains("ode_bdf"))
    });
    if solves {
        Noise::SOLVER
    } else {
        Noise::ROUNDING
    }
}

/// The partial derivatives a derived entry gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partials {
    /// `grad(f, point, ..)`: one per coordinate of the point.
    Gradient,
    /// Row `r` of `jacobian(f, point, ..)`: output `r`'s partials in each
    /// coordinate of the point.
    Row(usize),
}

/// What the entry `entry` of a derived case gives, read from its wrapper:
/// the gradient (`grad(f, ..)`) or a row of the Jacobian.
pub fn partials_of(program: &Program, entry: &str) -> Option<Partials> {
    let wrapper = program.functions.iter().find(|f| f.name == entry)?;
    match &wrapper.body.tail.kind {
        ExprKind::Grad { field: None, .. } => Some(Partials::Gradient),
        ExprKind::Jacobian { row, .. } => Some(Partials::Row(*row)),
        _ => None,
    }
}

/// A derivative against the function it differentiates: the function,
/// the entry that gives the derivative and which, the arguments (the
/// point first, one value per member; a point is an `f64` or an array of
/// them) and the statics, shared.
pub struct DerivativeCheck<'a> {
    pub function: &'a str,
    pub entry: &'a str,
    pub partials: Partials,
    pub args: &'a [(String, Vec<Json>)],
    pub shared: Map<String, Json>,
    /// The function's relative evaluation error.
    pub noise: Noise,
}

/// Every derivative of [`Case::derived`] whose entry gives partials and
/// the gradient of [`Case::gradient`], against central differences: the
/// mismatches, described (an `Err` if a run could not be made).
pub fn check_case(compiled: &Compiled, case: &Case) -> Result<Vec<String>, String> {
    let mut mismatches = Vec::new();
    for derived in &case.derived {
        mismatches.extend(check_derived(compiled, case, derived)?);
    }
    if let Some(gradient) = &case.gradient {
        let bound = bind_static_gradient(compiled, case, gradient)?;
        let reference = run(&bound, configurations()[0], derived_limits(case))?;
        let noise = noise(&case.program, &gradient.entry);
        mismatches.extend(check_static_gradient(
            compiled, case, gradient, &reference, noise,
        )?);
    }
    Ok(mismatches)
}

/// The derivatives of one derived case that give partials.
fn check_derived(
    compiled: &Compiled,
    case: &Case,
    derived: &DerivedCase,
) -> Result<Vec<String>, String> {
    let shared = derived.inputs_json(case)["shared"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut mismatches = Vec::new();
    for derivative in &derived.derivatives {
        let Some(partials) = partials_of(&case.program, &derivative.entry) else {
            continue;
        };
        let check = DerivativeCheck {
            function: &derived.function,
            entry: &derivative.entry,
            partials,
            args: &derived.args,
            shared: shared.clone(),
            noise: noise(&case.program, &derived.function),
        };
        mismatches.extend(check_derivative(compiled, &check, derived_limits(case))?);
    }
    Ok(mismatches)
}

/// The float elements of a JSON number or (nested) array, in row-major order.
fn floats(value: &Json) -> Vec<f64> {
    match value {
        Json::Array(items) => items.iter().flat_map(floats).collect(),
        v => v.as_f64().into_iter().collect(),
    }
}

/// `value` with each float element `k` (row-major) moved by `by(k)`.
fn shifted(value: &Json, by: &dyn Fn(usize) -> f64) -> Json {
    fn go(value: &Json, k: &mut usize, by: &dyn Fn(usize) -> f64) -> Json {
        match value {
            Json::Array(items) => Json::Array(items.iter().map(|v| go(v, k, by)).collect()),
            v => match v.as_f64() {
                Some(x) => {
                    *k += 1;
                    json!(x + by(*k - 1))
                }
                None => v.clone(),
            },
        }
    }
    go(value, &mut 0, by)
}

/// The direction along which a derivative is checked: element `k` of it
/// (row-major), all of them nonzero and different, so that no wrong
/// partial cancels another (nor two exchanged partials each other).
fn direction(k: usize) -> f64 {
    let sign = if k.is_multiple_of(2) { 1.0 } else { -1.0 };
    sign * (0.5 + 0.25 * ((k * 7) % 5) as f64)
}

/// The float elements of a member's result, row-major; empty for an error.
fn result_floats(result: &Result<Value, MemberError>) -> Vec<f64> {
    let Ok(value) = result else {
        return Vec::new();
    };
    value
        .clone()
        .flatten()
        .iter()
        .flat_map(|t| (0..t.len()).map(|i| t.data.get(i)))
        .map(|s| match s {
            Scalar::F64(v) => v,
            Scalar::F32(v) => f64::from(v),
            _ => f64::NAN,
        })
        .collect()
}

/// One derivative against central differences of its function: each
/// member's point moved along each coordinate, all in one batch.
pub fn check_derivative(
    compiled: &Compiled,
    check: &DerivativeCheck<'_>,
    limits: crate::Limits,
) -> Result<Vec<String>, String> {
    let reference = configurations()[0];
    let batch = |args: &[(String, Vec<Json>)]| {
        let batch: Map<String, Json> = args
            .iter()
            .map(|(name, values)| (name.clone(), Json::Array(values.clone())))
            .collect();
        json!({"batch": batch, "shared": check.shared}).to_string()
    };
    let given = bind_entry(compiled, check.entry, &batch(check.args))
        .and_then(|bound| run(&bound, reference, limits))?;
    let moves = moved_points(check.args, &given.members);
    if moves.points.is_empty() {
        // Every member faults (or the entry gives no finite partials).
        return Ok(Vec::new());
    }
    let values = bind_entry(compiled, check.function, &batch(&moves.args))
        .and_then(|bound| run(&bound, reference, limits))?;
    let component = match check.partials {
        Partials::Gradient => 0,
        Partials::Row(r) => r,
    };
    let value_at = |k: usize| {
        result_floats(&values.members[k])
            .get(component)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let mut mismatches = Vec::new();
    for (n, point) in moves.points.iter().enumerate() {
        let differences = Differences {
            h: point.h,
            close: point.close,
            values: std::array::from_fn(|o| value_at(7 * n + o)),
        };
        if let Some(Err(why)) = differences.judge(point.derivative, check.noise) {
            let at: Vec<String> = check
                .args
                .iter()
                .map(|(name, values)| format!("{name} = {}", values[point.member]))
                .collect();
            mismatches.push(format!(
                "`{}` member {} ({}), along {:?}: {why}",
                check.entry,
                point.member,
                at.join(", "),
                (0..3).map(direction).collect::<Vec<_>>()
            ));
        }
    }
    Ok(mismatches)
}

/// One directional derivative to check: the member, the steps, and the
/// derivative along [`direction`] of the partials the entry gave.
struct MovedPoint {
    member: usize,
    h: f64,
    close: f64,
    derivative: f64,
}

/// The arguments of a batch of seven members per member checked (the
/// point moved along [`direction`] by each of [`offsets`]), and the
/// derivatives to check in that order.
struct Moves {
    args: Vec<(String, Vec<Json>)>,
    points: Vec<MovedPoint>,
}

/// How many members of a derived case are checked (the first that the
/// entry gives partials): a bound on the oracle's share of the fuzz
/// test's time.
const MEMBERS_CHECKED: usize = 3;

/// The moved points of the first [`MEMBERS_CHECKED`] members that the
/// entry gave partials.
fn moved_points(args: &[(String, Vec<Json>)], given: &[Result<Value, MemberError>]) -> Moves {
    let mut moves = Moves {
        args: args.iter().map(|(n, _)| (n.clone(), Vec::new())).collect(),
        points: Vec::new(),
    };
    let Some((_, points)) = args.first() else {
        return moves;
    };
    for (member, point) in points.iter().enumerate() {
        let partials = given.get(member).map(result_floats).unwrap_or_default();
        let elements = floats(point);
        if partials.len() < elements.len() {
            continue;
        }
        if moves.points.len() == MEMBERS_CHECKED {
            break;
        }
        let derivative = along_direction(&partials[..elements.len()]);
        let (h, close) = Differences::steps(largest(&elements));
        for offset in offsets(h, close) {
            for (index, (into, (_, values))) in moves.args.iter_mut().zip(args).enumerate() {
                let value = &values[member];
                into.1.push(if index == 0 {
                    shifted(value, &|k| offset * direction(k))
                } else {
                    value.clone()
                });
            }
        }
        moves.points.push(MovedPoint {
            member,
            h,
            close,
            derivative,
        });
    }
    moves
}

/// The derivative along [`direction`] of a function with partials `partials`.
fn along_direction(partials: &[f64]) -> f64 {
    partials
        .iter()
        .enumerate()
        .map(|(k, p)| p * direction(k))
        .sum()
}

/// The largest magnitude among `elements` (zero for none).
fn largest(elements: &[f64]) -> f64 {
    elements.iter().fold(0.0_f64, |m, x| m.max(x.abs()))
}

fn bind_static_gradient(
    compiled: &Compiled,
    case: &Case,
    gradient: &GradientCase,
) -> Result<autobatch::BoundBatch, String> {
    let inputs = autobatch::Inputs::from_json_str(&gradient.inputs_json(case).to_string())
        .map_err(|e| format!("bad inputs: {}", e.message()))?;
    let statics: Vec<&str> = gradient.statics.iter().map(String::as_str).collect();
    compiled
        .bind_static_gradient(&gradient.entry, &statics, &inputs)
        .map_err(|e| format!("the gradient does not bind: {}", e.message()))
}

/// The gradient with respect to statics of a run (`reference`) against
/// central differences of the loss summed over the members that finish,
/// each static's along a fixed [`direction`] (its elements all moved at
/// once: six runs of the loss per static).
pub fn check_static_gradient(
    compiled: &Compiled,
    case: &Case,
    gradient: &GradientCase,
    reference: &RunResult,
    noise: Noise,
) -> Result<Vec<String>, String> {
    let inputs = gradient.inputs_json(case);
    let finished: Vec<bool> = reference
        .members
        .iter()
        .map(|r| result_floats(r).first().is_some_and(|v| v.is_finite()))
        .collect();
    let unmoved = summed_loss(compiled, case, gradient, &inputs, &finished)?;
    let mut mismatches = Vec::new();
    for (name, summed) in &reference.static_gradients {
        let value = &inputs["shared"][name];
        let elements = floats(value);
        let gradient_elements = result_floats(&Ok(Value::Tensor(summed.clone())));
        if gradient_elements.len() != elements.len() {
            continue;
        }
        let derivative = along_direction(&gradient_elements);
        let (h, close) = Differences::steps(largest(&elements));
        let mut values = [unmoved; 7];
        for (slot, offset) in values.iter_mut().zip(offsets(h, close)).take(6) {
            let mut moved_inputs = inputs.clone();
            moved_inputs["shared"][name] = shifted(value, &|k| offset * direction(k));
            *slot = summed_loss(compiled, case, gradient, &moved_inputs, &finished)?;
        }
        let differences = Differences { h, close, values };
        if let Some(Err(why)) = differences.judge(derivative, noise) {
            mismatches.push(format!(
                "the gradient with respect to {name}, along {:?}: {why}",
                (0..elements.len()).map(direction).collect::<Vec<_>>()
            ));
        }
    }
    Ok(mismatches)
}

/// The loss summed over the members that finished at the unmoved point;
/// not a number if one of them does not finish here.
fn summed_loss(
    compiled: &Compiled,
    case: &Case,
    gradient: &GradientCase,
    inputs: &Json,
    finished: &[bool],
) -> Result<f64, String> {
    let bound = bind_entry(compiled, &gradient.entry, &inputs.to_string())?;
    let result = run(&bound, configurations()[0], derived_limits(case))?;
    let mut sum = 0.0;
    for (member, done) in result.members.iter().zip(finished) {
        if *done {
            sum += result_floats(member).first().copied().unwrap_or(f64::NAN);
        }
    }
    Ok(sum)
}
