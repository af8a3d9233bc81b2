//! Binding an [`ArrayInput`]: its shape checked against the declared type
//! as a whole (one message with the expected and the found shape), its
//! elements converted to the declared element type in one pass.

use autobatch_ir::Program;
use autobatch_types::{Data, Dim, ScalarType, TensorType, Type};

use super::{finish_tensor, type_name, AxisLength, Converted, DimensionBinder, InputError, Place};
use crate::inputs::ArrayInput;

/// Converts `array`, given for a value of type `ty`.
pub(super) fn convert_array(
    program: &Program,
    array: &ArrayInput,
    ty: &Type,
    place: &Place,
    dimensions: &mut DimensionBinder,
) -> Result<Converted, InputError> {
    let found = || {
        if array.tensor.shape.is_empty() {
            format!("a {} scalar", array.dtype)
        } else {
            format!(
                "an array of {} with shape {}",
                array.dtype,
                shape_text(&array.tensor.shape)
            )
        }
    };
    let Type::Tensor(tensor_type) = ty else {
        return Err(place.error(
            place.root,
            format_args!("must be `{}`, found {}", type_name(program, ty), found()),
        ));
    };
    check_shape(program, array, tensor_type, place)?;
    let data = convert_elements(array, tensor_type.elem, place)?;
    let lengths = array
        .tensor
        .shape
        .iter()
        .enumerate()
        .map(|(axis, &length)| {
            Some(AxisLength {
                length,
                root: place.root,
                axis,
            })
        })
        .collect();
    finish_tensor(tensor_type, lengths, data, place, dimensions)
}

/// `[3, 4]`.
fn shape_text(shape: &[usize]) -> String {
    let lengths: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", lengths.join(", "))
}

/// The shape a type needs, with symbolic lengths by name: `[N, 4]`.
fn expected_shape(program: &Program, ty: &TensorType) -> String {
    let lengths: Vec<String> = ty
        .dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Symbolic(s) => program.symbol_name(*s).to_string(),
        })
        .collect();
    format!("[{}]", lengths.join(", "))
}

/// The array's rank and fixed lengths are the type's.
fn check_shape(
    program: &Program,
    array: &ArrayInput,
    ty: &TensorType,
    place: &Place,
) -> Result<(), InputError> {
    let shape = &array.tensor.shape;
    let fits = shape.len() == ty.dims.len()
        && shape.iter().zip(&ty.dims).all(|(&length, dim)| match dim {
            Dim::Fixed(n) => length as u64 == *n,
            Dim::Symbolic(_) => true,
        });
    if fits {
        return Ok(());
    }
    let found = if shape.is_empty() {
        format!("is a {} scalar", array.dtype)
    } else {
        format!(
            "is an array of {} with shape {}",
            array.dtype,
            shape_text(shape)
        )
    };
    let needs = if ty.dims.is_empty() {
        "a scalar".to_owned()
    } else {
        format!("shape {}", expected_shape(program, ty))
    };
    Err(place.error(
        place.root,
        format_args!(
            "{found}, but its type `{}` needs {needs}",
            program.type_name(ty)
        ),
    ))
}

/// The elements as `elem`, converted in one pass, or what is wrong: an
/// array of another family, or an element that does not fit.
fn convert_elements(
    array: &ArrayInput,
    elem: ScalarType,
    place: &Place,
) -> Result<Data, InputError> {
    let data = &array.tensor.data;
    if data.ty() == elem {
        return Ok(data.clone());
    }
    let wrong_family = || {
        let family = match elem {
            ScalarType::Bool => "bools".to_owned(),
            ScalarType::F32 | ScalarType::F64 => format!("numbers ({elem})"),
            _ => format!("integers ({elem})"),
        };
        place.error(
            place.root,
            format_args!(
                "must be an array of {family}, found an array of {}",
                array.dtype
            ),
        )
    };
    let not_fitting = |index: usize, value: String| {
        let path = element_path(place.root, &array.tensor.shape, index);
        place.error(
            &path,
            format_args!(
                "must fit {elem}, found {value} in an array of {}",
                array.dtype
            ),
        )
    };
    Ok(match (elem, data) {
        (ScalarType::F64, Data::F32(v)) => Data::F64(v.iter().map(|&x| f64::from(x)).collect()),
        (ScalarType::F64, _) if data.ty().is_integer() => Data::F64(integers_as_f64(data)),
        (ScalarType::F32, Data::F64(v)) => {
            let narrowed: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            if let Some(i) = (0..v.len()).find(|&i| v[i].is_finite() && !narrowed[i].is_finite()) {
                return Err(not_fitting(i, v[i].to_string()));
            }
            Data::F32(narrowed)
        }
        (ScalarType::F32, _) if data.ty().is_integer() => Data::F32(
            integers_as_f64(data)
                .into_iter()
                .map(|x| x as f32)
                .collect(),
        ),
        (ScalarType::I32 | ScalarType::I64 | ScalarType::Usize, _) if data.ty().is_integer() => {
            convert_integers(data, elem).map_err(|i| not_fitting(i, integer_text(data, i)))?
        }
        _ => return Err(wrong_family()),
    })
}

/// The integer element `i`, as written.
fn integer_text(data: &Data, i: usize) -> String {
    match data {
        Data::I32(v) => v[i].to_string(),
        Data::I64(v) => v[i].to_string(),
        Data::Usize(v) => v[i].to_string(),
        _ => unreachable!("integer data"),
    }
}

/// Integer elements as `f64` (as a JSON integer converts).
fn integers_as_f64(data: &Data) -> Vec<f64> {
    match data {
        Data::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Data::Usize(v) => v.iter().map(|&x| x as f64).collect(),
        _ => unreachable!("integer data"),
    }
}

/// Integer elements as the integer type `elem`, or the index of the first
/// that does not fit.
fn convert_integers(data: &Data, elem: ScalarType) -> Result<Data, usize> {
    fn narrow<S: Copy + Into<i128>, T: TryFrom<i128>>(v: &[S]) -> Result<Vec<T>, usize> {
        v.iter()
            .enumerate()
            .map(|(i, &x)| T::try_from(x.into()).map_err(|_| i))
            .collect()
    }
    fn to<T: TryFrom<i128>>(data: &Data) -> Result<Vec<T>, usize> {
        match data {
            Data::I32(v) => narrow(v),
            Data::I64(v) => narrow(v),
            Data::Usize(v) => narrow(v),
            _ => unreachable!("integer data"),
        }
    }
    Ok(match elem {
        ScalarType::I32 => Data::I32(to(data)?),
        ScalarType::I64 => Data::I64(to(data)?),
        _ => Data::Usize(to(data)?),
    })
}

/// The path of the element at row-major `index` of an array of `shape`:
/// `x[1][2]`.
fn element_path(root: &str, shape: &[usize], mut index: usize) -> String {
    let mut indices = vec![0; shape.len()];
    for (axis, &length) in shape.iter().enumerate().rev() {
        if length > 0 {
            indices[axis] = index % length;
            index /= length;
        }
    }
    let mut path = root.to_owned();
    for i in indices {
        path.push_str(&format!("[{i}]"));
    }
    path
}
