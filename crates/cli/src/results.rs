//! `run --output FILE.npz`: the results document as arrays, one per
//! result, the members stacked along the first axis:
//!
//! - `result`: the entry's result (a tuple's items are `result/0`,
//!   `result/1`, ..., nested ones `result/1/0`; a unit result has none),
//!   of the result's element type; a failed member's row is NaN (floats),
//!   0 or false;
//! - `ok`: whether each member finished (bool);
//! - `error/kind`, `error/message` (text, empty where the member
//!   finished), `error/line`, `error/column` (int64, 0 there);
//! - `static_gradients/NAME` with `--grad-statics`;
//! - `stats` with `--stats`: the `stats` object as JSON text (a 0-d array).
//!
//! The arrays come from the document the command would write as JSON (on
//! one process or many, the same bytes), read back exactly.

use autobatch::{Compiled, Data, Scalar, ScalarType, Tensor, TensorType, Type};
use serde_json::Value as Json;

use crate::arrays::{write_npz, OutArray};

/// The `.npz` bytes of the results `document` of `entry` (see the module).
pub fn results_npz(document: &str, compiled: &Compiled, entry: &str) -> Result<Vec<u8>, String> {
    let document: Json = serde_json::from_str(document)
        .map_err(|e| format!("internal error: the results are not JSON: {e}"))?;
    let program = compiled.program();
    let function = program
        .function_by_name(entry)
        .map(|id| &program.functions[id])
        .ok_or_else(|| format!("internal error: no entry `{entry}`"))?;
    let members = document["results"].as_array().cloned().unwrap_or_default();
    let mut arrays = Vec::new();
    let mut leaves = Vec::new();
    leaf_types(&function.ret_type, "result", &mut Vec::new(), &mut leaves);
    for leaf in &leaves {
        arrays.push((leaf.name.clone(), OutArray::Tensor(stack(leaf, &members)?)));
    }
    arrays.extend(error_arrays(&members));
    if let Some(gradients) = document.get("static_gradients").and_then(Json::as_object) {
        for (name, value) in gradients {
            let decl = program
                .statics
                .values()
                .find(|s| s.name == *name)
                .ok_or_else(|| format!("internal error: no static `{name}`"))?;
            let tensor = autobatch::tensor_from_json(value, decl.ty.elem)
                .map_err(|e| format!("internal error: a gradient is {e}"))?;
            arrays.push((format!("static_gradients/{name}"), OutArray::Tensor(tensor)));
        }
    }
    if let Some(stats) = document.get("stats") {
        arrays.push((
            "stats".into(),
            OutArray::Text(Vec::new(), vec![stats.to_string()]),
        ));
    }
    write_npz(&arrays)
}

/// One array of the result: its name, where it is in a member's value (the
/// indices into tuples) and its type.
struct Leaf {
    name: String,
    path: Vec<usize>,
    ty: TensorType,
}

fn leaf_types(ty: &Type, name: &str, path: &mut Vec<usize>, out: &mut Vec<Leaf>) {
    match ty {
        Type::Tensor(ty) => out.push(Leaf {
            name: name.to_owned(),
            path: path.clone(),
            ty: ty.clone(),
        }),
        Type::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                leaf_types(item, &format!("{name}/{i}"), path, out);
                path.pop();
            }
        }
    }
}

/// The members' values of `leaf`, stacked; a failed member's row filled.
fn stack(leaf: &Leaf, members: &[Json]) -> Result<Tensor, String> {
    let mut values: Vec<Option<Tensor>> = Vec::with_capacity(members.len());
    for member in members {
        let Some(mut value) = member.get("ok") else {
            values.push(None);
            continue;
        };
        for &i in &leaf.path {
            value = &value[i];
        }
        let tensor = autobatch::tensor_from_json(value, leaf.ty.elem)
            .map_err(|e| format!("internal error: a result is {e}"))?;
        values.push(Some(tensor));
    }
    let first = values.iter().flatten().next();
    let shape: Vec<usize> = match first {
        Some(t) => t.shape.clone(),
        None => leaf
            .ty
            .dims
            .iter()
            .map(|d| match d {
                autobatch::Dim::Fixed(n) => *n as usize,
                autobatch::Dim::Symbolic(_) => 0,
            })
            .collect(),
    };
    let row: usize = shape.iter().product();
    let filler = match leaf.ty.elem {
        ScalarType::Bool => Scalar::Bool(false),
        ScalarType::I32 => Scalar::I32(0),
        ScalarType::I64 => Scalar::I64(0),
        ScalarType::Usize => Scalar::Usize(0),
        ScalarType::F32 => Scalar::F32(f32::NAN),
        ScalarType::F64 => Scalar::F64(f64::NAN),
    };
    let mut data = Data::with_capacity(leaf.ty.elem, row * values.len());
    for (member, value) in values.iter().enumerate() {
        match value {
            Some(t) if t.shape != shape => {
                return Err(format!(
                    "member {member}'s `{}` has shape {:?} but another member's has {shape:?}, \
                     and the arrays of a .npz stack the members; write the results as JSON",
                    leaf.name, t.shape
                ))
            }
            Some(t) => data.extend_from(&t.data, 0..t.data.len()),
            None => (0..row).for_each(|_| data.push(filler)),
        }
    }
    let mut stacked_shape = vec![values.len()];
    stacked_shape.extend(shape);
    Ok(Tensor::new(stacked_shape, data))
}

/// `ok` and the `error/...` arrays.
fn error_arrays(members: &[Json]) -> Vec<(String, OutArray)> {
    let n = members.len();
    let errors: Vec<Option<&Json>> = members.iter().map(|m| m.get("error")).collect();
    let text = |key: &str| -> Vec<String> {
        errors
            .iter()
            .map(|e| e.and_then(|e| e[key].as_str()).unwrap_or("").to_owned())
            .collect()
    };
    let number = |key: &str| -> Vec<i64> {
        errors
            .iter()
            .map(|e| e.and_then(|e| e[key].as_i64()).unwrap_or(0))
            .collect()
    };
    let ok = errors.iter().map(Option::is_none).collect();
    vec![
        (
            "ok".into(),
            OutArray::Tensor(Tensor::new(vec![n], Data::Bool(ok))),
        ),
        ("error/kind".into(), OutArray::Text(vec![n], text("kind"))),
        (
            "error/message".into(),
            OutArray::Text(vec![n], text("message")),
        ),
        (
            "error/line".into(),
            OutArray::Tensor(Tensor::new(vec![n], Data::I64(number("line")))),
        ),
        (
            "error/column".into(),
            OutArray::Tensor(Tensor::new(vec![n], Data::I64(number("column")))),
        ),
    ]
}
