//! Python values to inputs, and results back to Python.
//!
//! A numpy array is read through its buffer ([`array_input`]): no Python
//! object per element, one pass over its elements. Other values go through
//! [`autobatch::Inputs`] as JSON values, so that they are checked and
//! converted by the same rules, with the same messages, as the command
//! line's `--inputs` file: a tuple becomes a list, a float that is not
//! finite the strings `"NaN"`, `"inf"`, `"-inf"`. Results come back as
//! Python scalars, numpy arrays of the element type (`bool`, `int32`,
//! `int64`, `uint64`, `float32`, `float64`) copied from their buffers, and
//! tuples; [`stacked`] gives a batch's results as one array.

use autobatch::{ArrayInput, InputValue, MemberError, Tensor, Value};
use autobatch_types::Data;
use numpy::{
    PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// How deep lists may nest in one input: far beyond any array the language
/// has, and short of Python's and Rust's stacks.
const MAX_NESTING: usize = 64;

/// One Python value as JSON. `what` names the value for messages
/// (`argument `x` of member 2`).
pub fn to_json(value: &Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<serde_json::Value> {
    to_json_at(value, what, 0)
}

fn to_json_at(
    value: &Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
    depth: usize,
) -> PyResult<serde_json::Value> {
    if depth > MAX_NESTING {
        return Err(PyTypeError::new_err(format!(
            "{} nests lists more than {MAX_NESTING} deep",
            what()
        )));
    }
    if value.is_none() {
        return Ok(serde_json::Value::Null);
    }
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(serde_json::Value::Bool(b.is_true()));
    }
    if let Ok(i) = value.downcast::<PyInt>() {
        if let Ok(i) = i.extract::<i64>() {
            return Ok(i.into());
        }
        if let Ok(u) = i.extract::<u64>() {
            return Ok(u.into());
        }
        // Beyond 64 bits: a number the binder reports as out of range.
        let x: f64 = i.extract()?;
        return Ok(autobatch::float_to_json(x));
    }
    if let Ok(x) = value.downcast::<PyFloat>() {
        return Ok(autobatch::float_to_json(x.value()));
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(serde_json::Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(list) = value.downcast::<PyList>() {
        return list
            .iter()
            .map(|item| to_json_at(&item, what, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(serde_json::Value::Array);
    }
    if let Ok(tuple) = value.downcast::<PyTuple>() {
        return tuple
            .iter()
            .map(|item| to_json_at(&item, what, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(serde_json::Value::Array);
    }
    if is_numpy(value) {
        // numpy arrays and numpy scalars: `tolist()` gives Python lists and scalars.
        let plain = value.call_method0("tolist")?;
        return to_json_at(&plain, what, depth);
    }
    Err(PyTypeError::new_err(format!(
        "{} is a Python `{}`, which cannot be an input (give a number, a bool, a list, a tuple or a numpy array)",
        what(),
        type_name(value)
    )))
}

/// Whether `value` is a numpy array or scalar (without importing numpy).
fn is_numpy(value: &Bound<'_, PyAny>) -> bool {
    value
        .get_type()
        .module()
        .map(|m| m.to_string_lossy().starts_with("numpy"))
        .unwrap_or(false)
        && value.hasattr("tolist").unwrap_or(false)
}

/// The name of a value's Python type, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// One Python value as an input: a numpy array through its buffer (see
/// [`array_input`]), anything else as JSON.
pub fn to_input(value: &Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<InputValue> {
    match value.downcast::<PyUntypedArray>() {
        Ok(array) => Ok(InputValue::Array(array_input(array, what)?)),
        Err(_) => to_json(value, what).map(InputValue::Json),
    }
}

/// A numpy array's elements read through its buffer, in one pass: as they
/// are when their type is one of the language's (`bool`, `int32`,
/// `int64`, `uint64`, `float32`, `float64`) in the machine's byte order,
/// C- or Fortran-ordered or strided; other integer and float types (and
/// other byte orders) first become `int64`, `uint64` or a float type by
/// one numpy conversion. The binder converts them to the declared type.
pub fn array_input(
    array: &Bound<'_, PyUntypedArray>,
    what: &dyn Fn() -> String,
) -> PyResult<ArrayInput> {
    let dtype = array.dtype();
    let name = dtype_name(&dtype);
    let shape = array.shape().to_vec();
    let data = match native_elements(array)? {
        Some(data) => data,
        None => {
            let target = match (dtype.kind(), dtype.itemsize()) {
                (b'b', _) => "bool",
                (b'i', _) | (b'u', 1..=4) => "int64",
                (b'u', _) => "uint64",
                (b'f', 2 | 4) => "float32",
                (b'f', _) => "float64",
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "{} is a numpy array of {name}, which cannot be an input (give an array of numbers or bools)",
                        what()
                    )))
                }
            };
            let converted = array.call_method1("astype", (target,))?;
            let converted = converted.downcast::<PyUntypedArray>()?;
            native_elements(converted)?.expect("a native element type")
        }
    };
    Ok(ArrayInput::new(Tensor::new(shape, data), &name))
}

/// numpy's name of an element type (`float32`), for messages: made from
/// its kind and size where numpy's is, without asking Python (which costs
/// more than converting a small batch); numpy's own text for the others.
fn dtype_name(dtype: &Bound<'_, numpy::PyArrayDescr>) -> String {
    let bits = 8 * dtype.itemsize();
    let native_order = matches!(dtype.byteorder(), b'=' | b'|');
    match dtype.kind() {
        b'b' if bits == 8 => "bool".to_owned(),
        b'i' if native_order => format!("int{bits}"),
        b'u' if native_order => format!("uint{bits}"),
        b'f' if native_order => format!("float{bits}"),
        _ => dtype.to_string(),
    }
}

/// The elements of an array whose element type is one of the language's,
/// in the machine's byte order; `None` for any other.
fn native_elements(array: &Bound<'_, PyUntypedArray>) -> PyResult<Option<Data>> {
    fn read<T: numpy::Element + Copy>(
        array: &Bound<'_, PyUntypedArray>,
    ) -> PyResult<Option<Vec<T>>> {
        let py = array.py();
        if !array.dtype().is_equiv_to(&numpy::dtype::<T>(py)) {
            return Ok(None);
        }
        let typed = array.downcast::<PyArrayDyn<T>>()?.readonly();
        // (`as_slice` also takes Fortran order, whose elements are not in row-major order.)
        Ok(Some(match typed.as_slice() {
            Ok(contiguous) if array.is_c_contiguous() => contiguous.to_vec(),
            // Fortran-ordered or strided: one pass in row-major order.
            _ => typed.as_array().iter().copied().collect(),
        }))
    }
    Ok(if let Some(v) = read::<f64>(array)? {
        Some(Data::F64(v))
    } else if let Some(v) = read::<f32>(array)? {
        Some(Data::F32(v))
    } else if let Some(v) = read::<i64>(array)? {
        Some(Data::I64(v))
    } else if let Some(v) = read::<i32>(array)? {
        Some(Data::I32(v))
    } else if let Some(v) = read::<u64>(array)? {
        Some(Data::Usize(v))
    } else {
        read::<bool>(array)?.map(Data::Bool)
    })
}

/// A batched argument's values, one per member: the items of a list or
/// tuple, or the rows of a numpy array along its first axis (read in one
/// pass, then split).
pub fn members(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<InputValue>> {
    let not_a_list = || {
        PyTypeError::new_err(format!(
            "batched argument `{name}` must be a list or array with one value per member, found a Python `{}`",
            type_name(value)
        ))
    };
    if let Ok(array) = value.downcast::<PyUntypedArray>() {
        if array.ndim() == 0 {
            return Err(not_a_list());
        }
        let whole = array_input(array, &|| format!("batched argument `{name}`"))?;
        return Ok(whole.rows().into_iter().map(InputValue::Array).collect());
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = value.downcast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = value.downcast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(not_a_list());
    };
    items
        .iter()
        .enumerate()
        .map(|(member, item)| to_input(item, &|| format!("argument `{name}` of member {member}")))
        .collect()
}

/// A result value in Python: a scalar as a Python scalar, an array as a
/// numpy array, a tuple as a tuple.
pub fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Value::Tuple(items) => {
            let items = items
                .iter()
                .map(|item| value_to_py(py, item))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, items)?.into_any())
        }
        Value::Tensor(tensor) if tensor.shape.is_empty() && tensor.data.len() == 1 => {
            scalar_to_py(py, tensor)
        }
        Value::Tensor(tensor) => tensor_to_numpy(py, tensor),
    }
}

fn scalar_to_py<'py>(py: Python<'py>, tensor: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    Ok(match &tensor.data {
        Data::Bool(v) => PyBool::new(py, v[0]).to_owned().into_any(),
        Data::I32(v) => v[0].into_pyobject(py)?.into_any(),
        Data::I64(v) => v[0].into_pyobject(py)?.into_any(),
        Data::Usize(v) => v[0].into_pyobject(py)?.into_any(),
        Data::F32(v) => f64::from(v[0]).into_pyobject(py)?.into_any(),
        Data::F64(v) => v[0].into_pyobject(py)?.into_any(),
    })
}

/// A tensor as a writable numpy array of its shape and element type
/// (`bool`, `int32`, `int64`, `uint64`, `float32`, `float64`), copied from
/// its buffer.
pub fn tensor_to_numpy<'py>(py: Python<'py>, tensor: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    elements_to_numpy(py, &tensor.data, &tensor.shape)
}

/// `data` as a writable numpy array of `shape`.
fn elements_to_numpy<'py>(
    py: Python<'py>,
    data: &Data,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    fn array<'py, T: numpy::Element>(
        py: Python<'py>,
        v: &[T],
        shape: &[usize],
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyArray1::from_slice(py, v)
            .reshape(shape.to_vec())?
            .into_any())
    }
    match data {
        Data::Bool(v) => array(py, v, shape),
        Data::I32(v) => array(py, v, shape),
        Data::I64(v) => array(py, v, shape),
        Data::Usize(v) => array(py, v, shape),
        Data::F32(v) => array(py, v, shape),
        Data::F64(v) => array(py, v, shape),
    }
}

/// The members' values stacked along a new first axis, one numpy array
/// (a tuple of them for a tuple type), built from the members' buffers;
/// `ValueError` if a member failed or two members' shapes differ.
pub fn stacked<'py>(
    py: Python<'py>,
    members: &[Result<Value, MemberError>],
) -> PyResult<Bound<'py, PyAny>> {
    let mut values = Vec::with_capacity(members.len());
    for (member, result) in members.iter().enumerate() {
        match result {
            Ok(value) => values.push(value),
            Err(error) => {
                return Err(PyValueError::new_err(format!(
                    "member {member} failed ({}: {}), so the results cannot be stacked; \
                     read `values` and `errors`",
                    error.kind.name(),
                    error.message
                )))
            }
        }
    }
    stack_values(py, &values)
}

fn stack_values<'py>(py: Python<'py>, values: &[&Value]) -> PyResult<Bound<'py, PyAny>> {
    let Some(first) = values.first() else {
        return Err(PyValueError::new_err("no members to stack"));
    };
    match first {
        Value::Tuple(items) => {
            let mut stacked = Vec::with_capacity(items.len());
            for k in 0..items.len() {
                let column: Vec<&Value> = values
                    .iter()
                    .map(|v| match v {
                        Value::Tuple(items) => &items[k],
                        other => other,
                    })
                    .collect();
                stacked.push(stack_values(py, &column)?);
            }
            Ok(PyTuple::new(py, stacked)?.into_any())
        }
        Value::Tensor(first) => {
            let mut data = Data::with_capacity(first.data.ty(), first.data.len() * values.len());
            for (member, value) in values.iter().enumerate() {
                let Value::Tensor(tensor) = value else {
                    unreachable!("members of one type")
                };
                if tensor.shape != first.shape {
                    return Err(PyValueError::new_err(format!(
                        "member {member}'s result has shape {:?} but member 0's has {:?}: \
                         results of different shapes cannot be stacked; read `values`",
                        tensor.shape, first.shape
                    )));
                }
                data.extend_from(&tensor.data, 0..tensor.data.len());
            }
            let mut shape = vec![values.len()];
            shape.extend(&first.shape);
            elements_to_numpy(py, &data, &shape)
        }
    }
}

/// Raw machine-order bytes as a writable numpy array of `dtype` and `shape`.
pub fn flat_to_numpy<'py>(
    py: Python<'py>,
    bytes: &[u8],
    dtype: &str,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy")?;
    let buffer = PyByteArray::new(py, bytes);
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", dtype)?;
    let flat = numpy.call_method("frombuffer", (buffer,), Some(&kwargs))?;
    flat.call_method1("reshape", (PyTuple::new(py, shape)?,))
}

/// A member's error as the dict `{"kind", "message", "line", "column"}`.
pub fn error_to_py<'py>(py: Python<'py>, error: &MemberError) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("kind", error.kind.name())?;
    dict.set_item("message", &error.message)?;
    dict.set_item("line", error.loc.line)?;
    dict.set_item("column", error.loc.column)?;
    Ok(dict)
}

/// A JSON value (the figures of `--stats`) as Python: dicts, lists,
/// numbers, strings; the strings `"NaN"`, `"inf"`, `"-inf"`, by which the
/// command line's JSON writes floats that are not finite, become floats.
pub fn json_to_py<'py>(py: Python<'py>, json: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match json {
        serde_json::Value::Null => py.None().into_bound(py),
        serde_json::Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => f64::NAN.into_pyobject(py)?.into_any(),
            "inf" => f64::INFINITY.into_pyobject(py)?.into_any(),
            "-inf" => f64::NEG_INFINITY.into_pyobject(py)?.into_any(),
            _ => PyString::new(py, s).into_any(),
        },
        serde_json::Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| json_to_py(py, item))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        serde_json::Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, json_to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// One member's call of a Python host function: its operands as Python
/// values, its value as a tensor of the declared element type `elem` (the
/// executor checks the shape), an exception as the message.
pub fn call_host(
    py: Python<'_>,
    function: &Py<PyAny>,
    args: &[Value],
    elem: autobatch::ScalarType,
) -> Result<Value, String> {
    let operands = args
        .iter()
        .map(|a| value_to_py(py, a))
        .collect::<PyResult<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let tuple = PyTuple::new(py, operands).map_err(|e| e.to_string())?;
    let value = function.call1(py, tuple).map_err(|e| e.to_string())?;
    let json = to_json(value.bind(py), &|| "the host function's value".to_owned())
        .map_err(|e| e.to_string())?;
    autobatch::tensor_from_json(&json, elem).map(Value::Tensor)
}

/// The calls of several members of a batched Python host function at once:
/// each operand stacked over the calls, the value split along its first
/// axis. If the function raises, or gives another number of values, each
/// call is retried alone, so that only the calls that fail by themselves
/// get the error.
pub fn call_host_batch(
    py: Python<'_>,
    function: &Py<PyAny>,
    calls: &[Vec<Value>],
    elem: autobatch::ScalarType,
) -> Vec<Result<Value, String>> {
    match stacked_call(py, function, calls, elem) {
        Ok(values) => values.into_iter().map(Ok).collect(),
        Err(message) if calls.len() == 1 => vec![Err(message)],
        Err(_) => calls
            .iter()
            .map(|call| {
                stacked_call(py, function, std::slice::from_ref(call), elem)
                    .map(|mut v| v.remove(0))
            })
            .collect(),
    }
}

/// One call of a batched host function on `calls`: a value per call.
fn stacked_call(
    py: Python<'_>,
    function: &Py<PyAny>,
    calls: &[Vec<Value>],
    elem: autobatch::ScalarType,
) -> Result<Vec<Value>, String> {
    let operands = calls.first().map_or(0, Vec::len);
    let mut stacked = Vec::with_capacity(operands);
    for k in 0..operands {
        let tensors: Vec<&Tensor> = calls
            .iter()
            .map(|call| match &call[k] {
                Value::Tensor(t) => Ok(t),
                Value::Tuple(_) => Err("an operand is a tuple".to_owned()),
            })
            .collect::<Result<_, _>>()?;
        stacked.push(stack(py, &tensors).map_err(|e| e.to_string())?);
    }
    let tuple = PyTuple::new(py, stacked).map_err(|e| e.to_string())?;
    let value = function.call1(py, tuple).map_err(|e| e.to_string())?;
    let json = to_json(value.bind(py), &|| "the host function's value".to_owned())
        .map_err(|e| e.to_string())?;
    let items = match json {
        serde_json::Value::Array(items) if items.len() == calls.len() => items,
        _ => {
            return Err(format!(
                "it returned something other than {} values stacked along the first axis",
                calls.len()
            ))
        }
    };
    items
        .iter()
        .map(|item| autobatch::tensor_from_json(item, elem).map(Value::Tensor))
        .collect()
}

/// Tensors of one type and shape as one numpy array, stacked along a new
/// first axis.
fn stack<'py>(py: Python<'py>, tensors: &[&Tensor]) -> PyResult<Bound<'py, PyAny>> {
    let first = tensors[0];
    let mut data = Data::with_capacity(first.data.ty(), first.data.len() * tensors.len());
    for t in tensors {
        data.extend_from(&t.data, 0..t.data.len());
    }
    let mut shape = vec![tensors.len()];
    shape.extend(&first.shape);
    tensor_to_numpy(py, &Tensor::new(shape, data))
}
