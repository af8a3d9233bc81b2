//! Primitives that build or take apart arrays without computing on their
//! elements: `fill` (`[x; N]`), `stack` (`[a, b, c]`), `index` (`a[i]`),
//! `index_set` (`a[i] = v`, which makes an updated copy, or updates in place
//! when the old array is not needed any more), `slice` (`a[i..i + N]`) and
//! `slice_set` (a copy with `a[i..i + n]` replaced).
//!
//! Each exists as a batched form on a column of rows (`*_rows`, what a
//! backend runs) and as a tensor form for one member, which is the batched
//! form on one row (the updates: [`set_items`] on one row), so the two
//! cannot differ. Every indexed write goes through one `set_item`, every
//! index through [`position`].
//!
//! An index may be of any integer type. A negative index, or one not below
//! the length of the outermost axis, faults with `index_out_of_bounds`.

use autobatch_types::{Data, Scalar, Tensor};

use crate::buffer::{copy, Rows, RowsMut, Typed, Values, ValuesMut};
use crate::{internal_error, Fault};

/// `[x; count]`: an array of `count` copies of `x` (a scalar or an array).
pub fn fill(count: usize, x: &Tensor) -> Tensor {
    let mut shape = Vec::with_capacity(x.shape.len() + 1);
    shape.push(count);
    shape.extend_from_slice(&x.shape);
    let mut out = Data::filled(Scalar::zero(x.elem_type()), count * x.len());
    fill_rows(
        Rows::Shared(Values::all(&x.data)),
        count,
        RowsMut::one(ValuesMut::all(&mut out)),
    );
    Tensor::new(shape, out)
}

/// `[x0, ..., xn-1]`: the items, all of one shape and type, as one array.
pub fn stack(items: &[&Tensor]) -> Tensor {
    let Some(first) = items.first() else {
        internal_error("stack of no items".to_string())
    };
    let mut shape = Vec::with_capacity(first.shape.len() + 1);
    shape.push(items.len());
    shape.extend_from_slice(&first.shape);
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
    }
    let operands: Vec<Rows<'_>> = items
        .iter()
        .map(|t| Rows::Shared(Values::all(&t.data)))
        .collect();
    let mut out = Data::filled(Scalar::zero(first.elem_type()), first.len() * items.len());
    stack_rows(&operands, RowsMut::one(ValuesMut::all(&mut out)));
    Tensor::new(shape, out)
}

/// The value of an integer index operand, exactly (it may be negative).
pub fn index_value(index: &Tensor) -> i128 {
    if index.len() != 1 {
        internal_error(format!(
            "an index is an integer scalar, got {} values of {}",
            index.len(),
            index.elem_type()
        ));
    }
    Values::all(&index.data).integer(0)
}

/// An index of value `index` as a position in `0..length`, or the fault of
/// an index out of bounds.
#[inline]
pub fn position(index: i128, length: usize) -> Result<usize, Fault> {
    if index >= 0 && index < length as i128 {
        Ok(index as usize)
    } else {
        Err(Fault::index_out_of_bounds(index, length))
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
    let mut out = Data::filled(Scalar::zero(array.elem_type()), size);
    index_rows(
        Rows::Shared(Values::all(&array.data)),
        Rows::Shared(Values::all(&index.data)),
        array.shape[0],
        RowsMut::one(ValuesMut::all(&mut out)),
    )?;
    Ok(Tensor::new(array.shape[1..].to_vec(), out))
}

/// The first position of `start..start + len` when the range lies within
/// `0..length`, else the fault every executor gives.
pub fn range_position(start: i128, len: usize, length: usize) -> Result<usize, Fault> {
    if start >= 0 && start + len as i128 <= length as i128 {
        Ok(start as usize)
    } else {
        Err(Fault::range_out_of_bounds(start, len, length))
    }
}

/// `array[start..start + len]`: `len` items of the outermost axis.
pub fn slice(array: &Tensor, start: &Tensor, len: usize) -> Result<Tensor, Fault> {
    let size = item_size(array);
    let first = range_position(index_value(start), len, array.shape[0])?;
    let mut out = Data::with_capacity(array.elem_type(), len * size);
    out.extend_from(&array.data, first * size..(first + len) * size);
    let mut shape = array.shape.clone();
    shape[0] = len;
    Ok(Tensor::new(shape, out))
}

/// A copy of `array` with `array[start..start + n] = value`, `n` the
/// length of `value`'s outermost axis.
pub fn slice_set(array: &Tensor, start: &Tensor, value: &Tensor) -> Result<Tensor, Fault> {
    let size = item_size(array);
    if value.shape.is_empty() || value.shape[1..] != array.shape[1..] {
        internal_error(format!(
            "slice_set: a value of shape {:?} in an array of shape {:?}",
            value.shape, array.shape
        ));
    }
    let len = value.shape[0];
    let first = range_position(index_value(start), len, array.shape[0])?;
    let mut updated = array.clone();
    let mut out = ValuesMut::all(&mut updated.data);
    copy(
        Values::all(&value.data),
        out.slice(first * size..(first + len) * size),
    );
    Ok(updated)
}

/// A copy of `array` with `array[index] = value`.
pub fn index_set(array: &Tensor, index: &Tensor, value: &Tensor) -> Result<Tensor, Fault> {
    // Check before copying, so that a fault costs no copy.
    position(index_value(index), *array.shape.first().unwrap_or(&0))?;
    let mut updated = array.clone();
    index_set_in_place(&mut updated, index, value)?;
    Ok(updated)
}

/// `array[index] = value`, updating `array` itself: what an executor uses
/// when the old value of the array is not needed any more. On a fault,
/// `array` is unchanged.
pub fn index_set_in_place(array: &mut Tensor, index: &Tensor, value: &Tensor) -> Result<(), Fault> {
    item_size(array);
    if value.shape[..] != array.shape[1..] {
        internal_error(format!(
            "index_set: a value of shape {:?} in an array of shape {:?}",
            value.shape, array.shape
        ));
    }
    let length = array.shape[0];
    set_items(
        Rows::Shared(Values::all(&index.data)),
        Rows::Shared(Values::all(&value.data)),
        length,
        &[0],
        RowsMut::one(ValuesMut::all(&mut array.data)),
    )
}

// ---------------------------------------------------------------------------
// Batched forms: one operation on a column of rows.

/// `[x; count]` of each row of `x` into `out` (`count` items per row).
pub fn fill_rows(x: Rows<'_>, count: usize, out: RowsMut<'_>) {
    fn each<T: Copy>(x: Typed<'_, T>, count: usize, rows: usize, out: &mut [T]) {
        let size = x.row_len * count;
        if size == 0 {
            return;
        }
        for (r, o) in out.chunks_exact_mut(size).take(rows).enumerate() {
            let item = x.row(r);
            if item.len() == 1 {
                o.fill(item[0]);
            } else {
                for copy in o.chunks_exact_mut(item.len()) {
                    copy.copy_from_slice(item);
                }
            }
        }
    }
    let rows = out.rows;
    with_same_type!("fill", x.values(), out.values, |v, o| each(
        Typed::of(x, v),
        count,
        rows,
        o
    ))
}

/// `[x0, ..., xn-1]` of each row of the items into `out` (items of equal
/// length, one after another in each row).
pub fn stack_rows(items: &[Rows<'_>], mut out: RowsMut<'_>) {
    let Some(item) = out.row_len.checked_div(items.len()) else {
        internal_error("stack of no items".to_string())
    };
    for k in 0..out.rows {
        for (j, operand) in items.iter().enumerate() {
            copy(operand.row(k), out.row(k).slice(j * item..(j + 1) * item));
        }
    }
}

/// `array[index]` of each row: `length` items of `out.row_len` elements in
/// each row of `array`, an integer scalar per row in `index`. Stops at the
/// first row whose index is out of bounds.
pub fn index_rows(
    array: Rows<'_>,
    index: Rows<'_>,
    length: usize,
    mut out: RowsMut<'_>,
) -> Result<(), Fault> {
    let item = out.row_len;
    for k in 0..out.rows {
        let p = position(index.row(k).integer(0), length)?;
        copy(array.row(k).slice(p * item..(p + 1) * item), out.row(k));
    }
    Ok(())
}

/// `array[index] = value` of each row, into a copy: `out` row `k` is row `k`
/// of `array` (`length` items of `value`'s row length) with the item at the
/// row's index replaced ([`set_item`]). Stops at the first row whose index
/// is out of bounds.
pub fn index_set_rows(
    array: Rows<'_>,
    index: Rows<'_>,
    value: Rows<'_>,
    length: usize,
    mut out: RowsMut<'_>,
) -> Result<(), Fault> {
    for k in 0..out.rows {
        copy(array.row(k), out.row(k));
        set_item(index.row(k), value.row(k), length, out.row(k))?;
    }
    Ok(())
}

/// `array[index] = value` in place, for each row `r` of `rows` of the column
/// `array` (`length` items of `value`'s row length per row; `index` and
/// `value` are read at row `r` too): only the item is written
/// ([`set_item`]), so filling an array element by element costs the
/// elements written. Every row's index is checked first: on a fault nothing
/// is written.
pub fn set_items(
    index: Rows<'_>,
    value: Rows<'_>,
    length: usize,
    rows: &[u32],
    mut array: RowsMut<'_>,
) -> Result<(), Fault> {
    for &r in rows {
        position(index.row(r as usize).integer(0), length)?;
    }
    for &r in rows {
        let r = r as usize;
        set_item(index.row(r), value.row(r), length, array.row(r))?;
    }
    Ok(())
}

/// `row[index] = value` in one array row of `length` items of `value.len()`
/// elements: the one place that writes an indexed item.
fn set_item(
    index: Values<'_>,
    value: Values<'_>,
    length: usize,
    mut row: ValuesMut<'_>,
) -> Result<(), Fault> {
    let item = value.len();
    let p = position(index.integer(0), length)?;
    copy(value, row.slice(p * item..(p + 1) * item));
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
    fn slices_take_and_replace_rows() {
        let m = t(&[3, 2], Data::I64(vec![1, 2, 3, 4, 5, 6]));
        let rows = slice(&m, &Tensor::scalar(Scalar::Usize(1)), 2).unwrap();
        assert_eq!(rows, t(&[2, 2], Data::I64(vec![3, 4, 5, 6])));
        assert_eq!(
            slice(&m, &i64s(3), 0).unwrap(),
            t(&[0, 2], Data::I64(vec![]))
        );
        let v = t(&[1, 2], Data::I64(vec![0, -1]));
        assert_eq!(
            slice_set(&m, &Tensor::scalar(Scalar::I32(2)), &v).unwrap(),
            t(&[3, 2], Data::I64(vec![1, 2, 3, 4, 0, -1]))
        );
    }

    #[test]
    fn slices_outside_the_array_fault() {
        let v = t(&[5], Data::F64(vec![0.0; 5]));
        let fault = slice(&v, &i64s(4), 2).unwrap_err();
        assert_eq!(fault.kind, ErrorKind::IndexOutOfBounds);
        assert_eq!(
            fault.message,
            "range 4..6 is out of bounds for an array of length 5"
        );
        let fault = slice(&v, &i64s(-1), 1).unwrap_err();
        assert_eq!(
            fault.message,
            "range -1..0 is out of bounds for an array of length 5"
        );
        let three = t(&[3], Data::F64(vec![1.0; 3]));
        let fault = slice_set(&v, &i64s(3), &three).unwrap_err();
        assert_eq!(
            fault.message,
            "range 3..6 is out of bounds for an array of length 5"
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
