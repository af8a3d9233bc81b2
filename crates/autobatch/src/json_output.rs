//! Writing results as JSON, exactly as the command line prints them:
//! `{"results": [{"ok": VALUE} | {"error": {...}}], "stats": {...}}`.
//!
//! Values: `true`/`false`; integers as JSON integers; floats as JSON numbers
//! with their shortest representation in their own type (an `f32` 0.1 is
//! written `0.1`, not `0.10000000149011612`); non-finite floats as the strings
//! `"NaN"`, `"inf"`, `"-inf"`; arrays as nested lists; tuples as lists; the
//! unit value `()` as `null`.

use autobatch_types::{Data, MemberError, Scalar, ScalarType, Tensor, Value};
use serde_json::json;

use crate::run::RunResult;

/// A float as JSON: a number, or one of the strings `"NaN"`, `"inf"`, `"-inf"`
/// (JSON has no non-finite numbers).
pub fn float_to_json(x: f64) -> serde_json::Value {
    match serde_json::Number::from_f64(x) {
        Some(number) => serde_json::Value::Number(number),
        None if x.is_nan() => serde_json::Value::String("NaN".into()),
        None if x > 0.0 => serde_json::Value::String("inf".into()),
        None => serde_json::Value::String("-inf".into()),
    }
}

/// An `f32` as JSON, written with the shortest decimal that reads back as
/// the same `f32`: widening to `f64` first would print the binary error
/// (`0.1_f32` as `0.10000000149011612`).
fn f32_to_json(x: f32) -> serde_json::Value {
    if !x.is_finite() {
        return float_to_json(f64::from(x));
    }
    let shortest: f64 = format!("{x}").parse().unwrap_or(f64::from(x));
    float_to_json(shortest)
}

/// One scalar as JSON.
pub fn scalar_to_json(scalar: Scalar) -> serde_json::Value {
    match scalar {
        Scalar::Bool(b) => serde_json::Value::Bool(b),
        Scalar::I32(i) => i.into(),
        Scalar::I64(i) => i.into(),
        Scalar::Usize(u) => u.into(),
        Scalar::F32(x) => f32_to_json(x),
        Scalar::F64(x) => float_to_json(x),
    }
}

/// A JSON number, bool or rectangular nest of lists as a tensor of `elem`
/// (what [`tensor_to_json`] writes, read back: the same bits), or what is
/// wrong with it.
pub fn tensor_from_json(json: &serde_json::Value, elem: ScalarType) -> Result<Tensor, String> {
    fn walk(
        json: &serde_json::Value,
        depth: usize,
        shape: &mut Vec<usize>,
        out: &mut Vec<Scalar>,
        elem: ScalarType,
    ) -> Result<(), String> {
        match json {
            serde_json::Value::Array(items) => {
                if depth == shape.len() {
                    if !out.is_empty() {
                        return Err("a value that is not a rectangular array".to_owned());
                    }
                    shape.push(items.len());
                } else if shape.get(depth) != Some(&items.len()) {
                    return Err("a value that is not a rectangular array".to_owned());
                }
                items
                    .iter()
                    .try_for_each(|item| walk(item, depth + 1, shape, out, elem))
            }
            scalar if depth == shape.len() => {
                out.push(json_scalar(scalar, elem)?);
                Ok(())
            }
            _ => Err("a value that is not a rectangular array".to_owned()),
        }
    }
    let mut shape = Vec::new();
    let mut scalars = Vec::new();
    walk(json, 0, &mut shape, &mut scalars, elem)?;
    let mut data = Data::with_capacity(elem, scalars.len());
    scalars.into_iter().for_each(|s| data.push(s));
    Ok(Tensor::new(shape, data))
}

fn json_scalar(json: &serde_json::Value, elem: ScalarType) -> Result<Scalar, String> {
    let wrong = || format!("{json}, which is not a {}", elem.name());
    let float = || match json {
        serde_json::Value::Number(n) => n.as_f64().ok_or_else(wrong),
        serde_json::Value::String(s) if s == "NaN" => Ok(f64::NAN),
        serde_json::Value::String(s) if s == "inf" => Ok(f64::INFINITY),
        serde_json::Value::String(s) if s == "-inf" => Ok(f64::NEG_INFINITY),
        _ => Err(wrong()),
    };
    Ok(match elem {
        ScalarType::Bool => Scalar::Bool(json.as_bool().ok_or_else(wrong)?),
        ScalarType::I32 => Scalar::I32(
            json.as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(wrong)?,
        ),
        ScalarType::I64 => Scalar::I64(json.as_i64().ok_or_else(wrong)?),
        ScalarType::Usize => Scalar::Usize(json.as_u64().ok_or_else(wrong)?),
        ScalarType::F32 => Scalar::F32(float()? as f32),
        ScalarType::F64 => Scalar::F64(float()?),
    })
}

/// One structured value as JSON.
pub fn value_to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Tuple(items) if items.is_empty() => serde_json::Value::Null,
        Value::Tuple(items) => serde_json::Value::Array(items.iter().map(value_to_json).collect()),
        Value::Tensor(tensor) => tensor_to_json(tensor),
    }
}

/// A tensor as nested lists, outermost axis first; a scalar tensor as a scalar.
pub fn tensor_to_json(tensor: &Tensor) -> serde_json::Value {
    fn nested(tensor: &Tensor, axis: usize, offset: usize) -> serde_json::Value {
        if axis == tensor.shape.len() {
            // An element past the end can only come from an executor bug;
            // print `null` there rather than abort the whole output.
            return if offset < tensor.data.len() {
                scalar_to_json(tensor.data.get(offset))
            } else {
                serde_json::Value::Null
            };
        }
        let stride: usize = tensor.shape[axis + 1..].iter().product();
        let items = (0..tensor.shape[axis])
            .map(|i| nested(tensor, axis + 1, offset + i * stride))
            .collect();
        serde_json::Value::Array(items)
    }
    nested(tensor, 0, 0)
}

/// A member error as the `error` object of the results.
pub fn member_error_to_json(error: &MemberError) -> serde_json::Value {
    json!({
        "kind": error.kind.name(),
        "message": error.message,
        "line": error.loc.line,
        "column": error.loc.column,
    })
}

/// One member's entry of `results`: `{"ok": VALUE}` or `{"error": {...}}`.
pub fn member_result_to_json(result: &Result<Value, MemberError>) -> serde_json::Value {
    match result {
        Ok(value) => json!({ "ok": value_to_json(value) }),
        Err(error) => json!({ "error": member_error_to_json(error) }),
    }
}

impl RunResult {
    /// The results as the command line prints them; `stats` only if `with_stats`.
    pub fn to_json(&self, with_stats: bool) -> serde_json::Value {
        let results: Vec<serde_json::Value> =
            self.members.iter().map(member_result_to_json).collect();
        let mut out = serde_json::Map::new();
        out.insert("results".into(), serde_json::Value::Array(results));
        if !self.static_gradients.is_empty() {
            let gradients: serde_json::Map<String, serde_json::Value> = self
                .static_gradients
                .iter()
                .map(|(name, g)| (name.clone(), tensor_to_json(g)))
                .collect();
            out.insert(
                "static_gradients".into(),
                serde_json::Value::Object(gradients),
            );
        }
        if with_stats {
            out.insert("stats".into(), self.stats_to_json());
        }
        serde_json::Value::Object(out)
    }

    /// The `stats` object of the results.
    pub fn stats_to_json(&self) -> serde_json::Value {
        let op_counts: Vec<serde_json::Value> = self
            .stats
            .op_counts
            .iter()
            .map(|count| {
                json!({
                    "op": count.op,
                    "line": count.loc.line,
                    "column": count.loc.column,
                    "executions": count.executions,
                    "active_lanes": count.active_lanes,
                })
            })
            .collect();
        let mut stats = json!({
            "strategy": self.strategy.name(),
            "strategy_reason": self.strategy_reason(),
            "lanes": self.lanes.name(),
            "batch_size": self.batch_size,
            "threads": self.threads,
            "steps": self.stats.steps,
            "wall_seconds": float_to_json(self.stats.wall_seconds),
            "read_seconds": float_to_json(self.preparation.read_seconds),
            "bind_seconds": float_to_json(self.preparation.bind_seconds),
            "lane_utilization": float_to_json(self.stats.lane_utilization),
            "instances": self.stats.instances,
            "peak_instances": self.stats.peak_instances,
            "call_bytes": self.stats.call_bytes,
            "peak_state_bytes": self.stats.peak_state_bytes,
            "tape_bytes": self.stats.tape_bytes,
            "sizes": self.stats.sizes,
            "op_counts": op_counts,
        });
        if !self.stats.report.is_empty() {
            stats[self.strategy.name()] = report_to_json(&self.stats.report);
        }
        stats
    }
}

impl RunResult {
    /// Why [`RunResult::strategy`] ran: `auto`'s reason, prefixed with
    /// its name, or that it was asked for.
    pub fn strategy_reason(&self) -> String {
        strategy_reason(self.strategy.name(), self.stats.choice.as_ref())
    }
}

/// Why a run's strategy ran, from `auto`'s choice if it picked one;
/// `asked` names the strategy asked for.
pub fn strategy_reason(asked: &str, choice: Option<&crate::StrategyChoice>) -> String {
    match choice {
        Some(choice) => format!("picked by auto: {}", choice.reason),
        None if asked == crate::Strategy::Auto.name() => "auto picked nothing: nothing ran".into(),
        None => "asked for".into(),
    }
}

/// An executor's own figures ([`autobatch_exec::Stats::report`]) as one
/// JSON object, a member per field: what `--stats` prints under the
/// strategy's name.
pub fn report_to_json(report: &[autobatch_exec::ReportField]) -> serde_json::Value {
    let fields: serde_json::Map<String, serde_json::Value> = report
        .iter()
        .map(|field| (field.name.to_string(), report_value_to_json(&field.value)))
        .collect();
    serde_json::Value::Object(fields)
}

fn report_value_to_json(value: &autobatch_exec::ReportValue) -> serde_json::Value {
    use autobatch_exec::ReportValue;
    match value {
        ReportValue::Bool(b) => json!(b),
        ReportValue::Count(n) => json!(n),
        ReportValue::Seconds(s) => float_to_json(*s),
        ReportValue::Text(t) => json!(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_exec::{OpCount, Stats};
    use autobatch_types::{Data, ErrorKind, Loc};

    use crate::run::{LaneMode, Strategy};

    fn scalar(s: Scalar) -> Value {
        Value::Tensor(Tensor::scalar(s))
    }

    fn check(value: Value, expected: serde_json::Value) {
        assert_eq!(value_to_json(&value), expected, "{value:?}");
    }

    #[test]
    fn scalars() {
        check(scalar(Scalar::Bool(true)), json!(true));
        check(scalar(Scalar::I32(-3)), json!(-3));
        check(scalar(Scalar::I64(i64::MIN)), json!(i64::MIN));
        check(scalar(Scalar::Usize(u64::MAX)), json!(u64::MAX));
        check(scalar(Scalar::F64(2.0)), json!(2.0));
        check(scalar(Scalar::F64(0.1)), json!(0.1));
    }

    #[test]
    fn f32_prints_its_shortest_representation() {
        check(scalar(Scalar::F32(0.1)), json!(0.1));
        check(scalar(Scalar::F32(1.0e-7)), json!(1.0e-7));
        check(scalar(Scalar::F32(f32::MAX)), json!(3.4028235e38));
    }

    #[test]
    fn non_finite_floats_are_strings() {
        check(scalar(Scalar::F64(f64::NAN)), json!("NaN"));
        check(scalar(Scalar::F64(f64::INFINITY)), json!("inf"));
        check(scalar(Scalar::F32(f32::NEG_INFINITY)), json!("-inf"));
    }

    #[test]
    fn arrays_are_nested_lists() {
        let matrix = Tensor::new(vec![2, 3], Data::I64(vec![1, 2, 3, 4, 5, 6]));
        check(Value::Tensor(matrix), json!([[1, 2, 3], [4, 5, 6]]));
        check(
            Value::Tensor(Tensor::new(vec![0], Data::F64(vec![]))),
            json!([]),
        );
        check(
            Value::Tensor(Tensor::new(vec![2, 0], Data::F64(vec![]))),
            json!([[], []]),
        );
    }

    #[test]
    fn tuples_are_lists_and_unit_is_null() {
        check(Value::Tuple(vec![]), json!(null));
        check(
            Value::Tuple(vec![
                scalar(Scalar::I64(1)),
                Value::Tuple(vec![scalar(Scalar::Bool(false)), Value::Tuple(vec![])]),
            ]),
            json!([1, [false, null]]),
        );
    }

    fn sample_result() -> RunResult {
        RunResult {
            strategy: Strategy::Reference,
            lanes: LaneMode::Auto,
            threads: 4,
            batch_size: 2,
            static_gradients: Vec::new(),
            preparation: crate::Preparation {
                read_seconds: 0.25,
                bind_seconds: 0.125,
            },
            row_gradients: Vec::new(),
            members: vec![
                Ok(scalar(Scalar::I64(3))),
                Err(MemberError::new(
                    ErrorKind::IndexOutOfBounds,
                    "index 5 out of bounds for length 3",
                    Loc::new(12, 9),
                )),
            ],
            stats: Stats {
                steps: 7,
                lane_utilization: 0.75,
                op_counts: vec![OpCount {
                    op: "add",
                    loc: Loc::new(3, 4),
                    executions: 2,
                    active_lanes: 3,
                }],
                wall_seconds: 0.5,
                ..Stats::default()
            },
        }
    }

    #[test]
    fn results_without_stats() {
        assert_eq!(
            sample_result().to_json(false),
            json!({"results": [
                {"ok": 3},
                {"error": {"kind": "index_out_of_bounds", "message": "index 5 out of bounds for length 3", "line": 12, "column": 9}}
            ]})
        );
    }

    #[test]
    fn results_with_stats() {
        let out = sample_result().to_json(true);
        let stats = &out["stats"];
        assert_eq!(stats["strategy"], json!("reference"));
        assert_eq!(stats["batch_size"], json!(2));
        assert_eq!(stats["steps"], json!(7));
        assert_eq!(stats["wall_seconds"], json!(0.5));
        assert_eq!(stats["read_seconds"], json!(0.25));
        assert_eq!(stats["bind_seconds"], json!(0.125));
        assert_eq!(stats["lane_utilization"], json!(0.75));
        assert_eq!(
            stats["op_counts"],
            json!([{"op": "add", "line": 3, "column": 4, "executions": 2, "active_lanes": 3}])
        );
    }
}
