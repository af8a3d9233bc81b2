//! Primitives that build or take apart arrays without computing on their
//! elements: `fill` (`[x; N]`), `stack` (`[a, b, c]`), `index` (`a[i]`) and
//! `index_set` (`a[i] = v`, which makes an updated copy).
//!
//! An index may be of any integer type. A negative index, or one not below
//! the length of the outermost axis, faults with `index_out_of_bounds`.

use autobatch_types::{Data, Tensor};

use crate::{internal_error, Fault};

/// `[x; count]`: an array of `count` copies of `x` (a scalar or an array).
pub fn fill(count: usize, x: &Tensor) -> Tensor {
    let mut shape = Vec::with_capacity(x.shape.len() + 1);
    shape.push(count);
    shape.extend_from_slice(&x.shape);
    let data = map_same_type!(&x.data, |values| values.repeat(count));
    Tensor::new(shape, data)
}

/// `[x0, ..., xn-1]`: the items, all of one shape and type, as one array.
pub fn stack(items: &[&Tensor]) -> Tensor {
    let Some(first) = items.first() else {
        internal_error("stack of no items".to_string())
    };
    let mut shape = Vec::with_capacity(first.shape.len() + 1);
    shape.push(items.len());
    shape.extend_from_slice(&first.shape);
    let mut data = Data::with_capacity(first.elem_type(), first.len() * items.len());
    for item in items {
        if item.shape != first.shape || item.elem_type() != first.elem_type() {
            internal_error(format!(
                "stack: items of types {} {:?} and {} {:?}",
                first.elem_type(),
                first.shape,
                item.elem_type(),
                item.shape
            ));
        }
        data.extend_from(&item.data, 0..item.len());
    }
    Tensor::new(shape, data)
}

/// The value of an integer index operand, exactly (it may be negative).
pub fn index_value(index: &Tensor) -> i128 {
    match &index.data {
        Data::I32(v) if v.len() == 1 => v[0] as i128,
        Data::I64(v) if v.len() == 1 => v[0] as i128,
        Data::Usize(v) if v.len() == 1 => v[0] as i128,
        other => internal_error(format!(
            "an index is an integer scalar, got {} values of {}",
            other.len(),
            other.ty()
        )),
    }
}

/// `index` as a position in `0..length`, or the fault of an index out of bounds.
pub fn checked_index(index: &Tensor, length: usize) -> Result<usize, Fault> {
    let value = index_value(index);
    if value >= 0 && value < length as i128 {
        Ok(value as usize)
    } else {
        Err(Fault::index_out_of_bounds(value, length))
    }
}

/// The number of elements of one item of the outermost axis of `array`.
fn item_size(array: &Tensor) -> usize {
    if array.shape.is_empty() {
        internal_error("indexing a scalar".to_string());
    }
    array.shape[1..].iter().product()
}

/// `array[index]`: an element, or a sub-array for a multi-dimensional array.
pub fn index(array: &Tensor, index: &Tensor) -> Result<Tensor, Fault> {
    let size = item_size(array);
    let position = checked_index(index, array.shape[0])?;
    let mut data = Data::with_capacity(array.elem_type(), size);
    data.extend_from(&array.data, position * size..(position + 1) * size);
    Ok(Tensor::new(array.shape[1..].to_vec(), data))
}

/// A copy of `array` with `array[index] = value`.
pub fn index_set(array: &Tensor, index: &Tensor, value: &Tensor) -> Result<Tensor, Fault> {
    // Check before copying, so that a fault costs no copy.
    checked_index(index, *array.shape.first().unwrap_or(&0))?;
    let mut updated = array.clone();
    index_set_in_place(&mut updated, index, value)?;
    Ok(updated)
}

/// `array[index] = value`, updating `array` itself: what an executor uses
/// when the old value of the array is not needed any more. On a fault,
/// `array` is unchanged.
pub fn index_set_in_place(array: &mut Tensor, index: &Tensor, value: &Tensor) -> Result<(), Fault> {
    let size = item_size(array);
    let position = checked_index(index, array.shape[0])?;
    if value.shape[..] != array.shape[1..] {
        internal_error(format!(
            "index_set: a value of shape {:?} in an array of shape {:?}",
            value.shape, array.shape
        ));
    }
    let range = position * size..(position + 1) * size;
    match (&mut array.data, &value.data) {
        (Data::Bool(a), Data::Bool(v)) => a[range].copy_from_slice(v),
        (Data::I32(a), Data::I32(v)) => a[range].copy_from_slice(v),
        (Data::I64(a), Data::I64(v)) => a[range].copy_from_slice(v),
        (Data::Usize(a), Data::Usize(v)) => a[range].copy_from_slice(v),
        (Data::F32(a), Data::F32(v)) => a[range].copy_from_slice(v),
        (Data::F64(a), Data::F64(v)) => a[range].copy_from_slice(v),
        (a, v) => internal_error(format!(
            "index_set: a {} value in a {} array",
            v.ty(),
            a.ty()
        )),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_types::{ErrorKind, Scalar};

    fn t(shape: &[usize], data: Data) -> Tensor {
        Tensor::new(shape.to_vec(), data)
    }
    fn i64s(i: i64) -> Tensor {
        Tensor::scalar(Scalar::I64(i))
    }

    #[test]
    fn fill_scalars_and_arrays() {
        assert_eq!(
            fill(3, &Tensor::scalar(Scalar::Bool(true))),
            t(&[3], Data::Bool(vec![true; 3]))
        );
        let row = t(&[2], Data::F32(vec![1.0, 2.0]));
        assert_eq!(
            fill(2, &row),
            t(&[2, 2], Data::F32(vec![1.0, 2.0, 1.0, 2.0]))
        );
        assert_eq!(fill(0, &row), t(&[0, 2], Data::F32(vec![])));
        assert_eq!(
            fill(1, &Tensor::scalar(Scalar::Usize(9))),
            t(&[1], Data::Usize(vec![9]))
        );
    }

    #[test]
    fn stack_scalars_and_arrays() {
        let a = Tensor::scalar(Scalar::I32(1));
        let b = Tensor::scalar(Scalar::I32(2));
        assert_eq!(stack(&[&a, &b, &a]), t(&[3], Data::I32(vec![1, 2, 1])));
        let r = t(&[2], Data::F64(vec![1.0, 2.0]));
        let s = t(&[2], Data::F64(vec![3.0, 4.0]));
        assert_eq!(
            stack(&[&r, &s]),
            t(&[2, 2], Data::F64(vec![1.0, 2.0, 3.0, 4.0]))
        );
    }

    #[test]
    fn index_with_every_integer_type() {
        let v = t(&[3], Data::I64(vec![10, 20, 30]));
        assert_eq!(
            index(&v, &Tensor::scalar(Scalar::I32(0))).unwrap(),
            i64s(10)
        );
        assert_eq!(index(&v, &i64s(2)).unwrap(), i64s(30));
        assert_eq!(
            index(&v, &Tensor::scalar(Scalar::Usize(1))).unwrap(),
            i64s(20)
        );
        let m = t(&[2, 2], Data::Bool(vec![true, false, false, false]));
        assert_eq!(
            index(&m, &i64s(0)).unwrap(),
            t(&[2], Data::Bool(vec![true, false]))
        );
    }

    #[test]
    fn index_out_of_bounds_faults() {
        let v = t(&[5], Data::F64(vec![0.0; 5]));
        let fault = index(&v, &i64s(7)).unwrap_err();
        assert_eq!(fault.kind, ErrorKind::IndexOutOfBounds);
        assert_eq!(
            fault.message,
            "index 7 is out of bounds for an array of length 5"
        );
        let fault = index(&v, &Tensor::scalar(Scalar::I32(-1))).unwrap_err();
        assert_eq!(
            fault.message,
            "index -1 is out of bounds for an array of length 5"
        );
        let fault = index(&v, &Tensor::scalar(Scalar::Usize(u64::MAX))).unwrap_err();
        assert_eq!(
            fault.message,
            format!(
                "index {} is out of bounds for an array of length 5",
                u64::MAX
            )
        );
        assert!(index(&v, &i64s(5)).is_err());
        assert!(index(&t(&[0], Data::F64(vec![])), &i64s(0)).is_err());
        assert!(index_set(&v, &i64s(-3), &Tensor::scalar(Scalar::F64(1.0))).is_err());
    }

    #[test]
    fn index_set_copies_and_in_place_updates() {
        let v = t(&[3], Data::I32(vec![1, 2, 3]));
        let updated = index_set(
            &v,
            &Tensor::scalar(Scalar::Usize(1)),
            &Tensor::scalar(Scalar::I32(9)),
        )
        .unwrap();
        assert_eq!(updated, t(&[3], Data::I32(vec![1, 9, 3])));
        assert_eq!(
            v,
            t(&[3], Data::I32(vec![1, 2, 3])),
            "the original is unchanged"
        );
        let mut m = t(&[2, 2], Data::F64(vec![1.0, 2.0, 3.0, 4.0]));
        index_set_in_place(&mut m, &i64s(1), &t(&[2], Data::F64(vec![5.0, 6.0]))).unwrap();
        assert_eq!(m, t(&[2, 2], Data::F64(vec![1.0, 2.0, 5.0, 6.0])));
        let before = m.clone();
        let fault =
            index_set_in_place(&mut m, &i64s(2), &t(&[2], Data::F64(vec![0.0, 0.0]))).unwrap_err();
        assert_eq!(
            fault.message,
            "index 2 is out of bounds for an array of length 2"
        );
        assert_eq!(m, before);
    }
}
