//! Products and transposition: `dot`, `matvec`, `vecmat`, `matmul`,
//! `transpose`, `outer`, for every element type.
//!
//! Float products (`f32`, `f64`) are [`crate::gemm`]'s deterministic kernels
//! called for one member: `dot` and `matvec` in the dot form (lane partial
//! sums `p mod L` with `mul_add`, then a fixed pairwise tree), `vecmat` and
//! `matmul` in the axpy form (`mul_add` over the summed index ascending from
//! `+0.0`). The batched engine calls the same kernels for many members at
//! once and gets the same bits. Integer and `bool` products sum from zero in
//! increasing order of the summed index with the [`Ring`] operations
//! (wrapping on integers, `or`/`and` on `bool`).

use autobatch_types::{Data, Scalar, Tensor};

use crate::buffer::{Rows, RowsMut, Typed, Values, ValuesMut};
use crate::gemm::{self, GemmFloat};
use crate::internal_error;
use crate::scalar::Ring;

/// The products of one element type: the generic ring versions, overridden
/// for floats by the [`gemm`] kernels.
pub trait Product: Ring {
    /// `sum(a[k] * b[k])`.
    fn dot_slices(a: &[Self], b: &[Self]) -> Self {
        a.iter()
            .zip(b)
            .fold(Self::ZERO, |acc, (&x, &y)| acc.ring_add(x.ring_mul(y)))
    }

    /// `out[i] = dot(m row i, v)` for `m` of `rows x cols`.
    fn matvec_slices(m: &[Self], rows: usize, cols: usize, v: &[Self], out: &mut [Self]) {
        for (i, o) in out.iter_mut().enumerate().take(rows) {
            *o = Self::dot_slices(&m[i * cols..(i + 1) * cols], v);
        }
    }

    /// `out (rows x cols) = a (rows x inner) * b (inner x cols)`, each element
    /// summed over the inner index ascending; `vecmat` is the case `rows = 1`.
    fn matmul_slices(
        a: &[Self],
        b: &[Self],
        rows: usize,
        inner: usize,
        cols: usize,
        out: &mut [Self],
    ) {
        out.fill(Self::ZERO);
        for i in 0..rows {
            let out_row = &mut out[i * cols..(i + 1) * cols];
            for k in 0..inner {
                let scale = a[i * inner + k];
                let b_row = &b[k * cols..(k + 1) * cols];
                for (acc, &x) in out_row.iter_mut().zip(b_row) {
                    *acc = acc.ring_add(scale.ring_mul(x));
                }
            }
        }
    }

    /// `out[i * b.len() + j] = a[i] * b[j]`.
    fn outer_slices(a: &[Self], b: &[Self], out: &mut [Self]) {
        if b.is_empty() {
            return;
        }
        for (&x, row) in a.iter().zip(out.chunks_exact_mut(b.len())) {
            for (o, &y) in row.iter_mut().zip(b) {
                *o = x.ring_mul(y);
            }
        }
    }
}

impl Product for bool {}
impl Product for i32 {}
impl Product for i64 {}
impl Product for u64 {}

macro_rules! impl_product_float {
    ($t:ty) => {
        impl Product for $t {
            fn dot_slices(a: &[Self], b: &[Self]) -> Self {
                gemm::dot(a, b)
            }
            fn matvec_slices(m: &[Self], rows: usize, cols: usize, v: &[Self], out: &mut [Self]) {
                gemm::matvec_into(m, rows, cols, v, 1, out)
            }
            fn matmul_slices(
                a: &[Self],
                b: &[Self],
                rows: usize,
                inner: usize,
                cols: usize,
                out: &mut [Self],
            ) {
                gemm::matmul_into(a, b, rows, inner, cols, out)
            }
            fn outer_slices(a: &[Self], b: &[Self], out: &mut [Self]) {
                gemm::outer_into(a, b, out)
            }
        }
    };
}

impl_product_float!(f32);
impl_product_float!(f64);

/// The inner product of two slices of one length.
#[inline]
pub fn dot_values<T: Product>(a: &[T], b: &[T]) -> T {
    T::dot_slices(a, b)
}

/// `m` (`rows x cols`, row-major) times `v` (`cols`): `rows` dot products.
pub fn matvec_values<T: Product>(m: &[T], rows: usize, cols: usize, v: &[T]) -> Vec<T> {
    let mut out = vec![T::ZERO; rows];
    T::matvec_slices(m, rows, cols, v, &mut out);
    out
}

/// `v` (`rows`) times `m` (`rows x cols`): `out[j] = sum_i v[i] * m[i][j]`, `i` ascending.
pub fn vecmat_values<T: Product>(v: &[T], m: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; cols];
    T::matmul_slices(v, m, 1, rows, cols, &mut out);
    out
}

/// `a` (`rows x inner`) times `b` (`inner x cols`); each output element sums
/// over the inner index ascending.
pub fn matmul_values<T: Product>(
    a: &[T],
    b: &[T],
    rows: usize,
    inner: usize,
    cols: usize,
) -> Vec<T> {
    let mut out = vec![T::ZERO; rows * cols];
    T::matmul_slices(a, b, rows, inner, cols, &mut out);
    out
}

/// `out` (`k x m`) = the transpose of `x` (`m x k`, row-major).
pub fn transpose_into<T: Copy>(x: &[T], m: usize, k: usize, out: &mut [T]) {
    for i in 0..m {
        for j in 0..k {
            out[j * m + i] = x[i * k + j];
        }
    }
}

fn require_shape(what: &str, t: &Tensor, rank: usize) {
    if t.shape.len() != rank {
        internal_error(format!(
            "{what} needs a {rank}-D operand, got shape {:?}",
            t.shape
        ));
    }
}

fn require_equal(what: &str, a: usize, b: usize) {
    if a != b {
        internal_error(format!("{what}: lengths {a} and {b} differ"));
    }
}

/// The inner product of two 1-D arrays of one length.
pub fn dot(a: &Tensor, b: &Tensor) -> Tensor {
    require_shape("dot", a, 1);
    require_shape("dot", b, 1);
    require_equal("dot", a.shape[0], b.shape[0]);
    let data = map_same_type_pair!("dot", &a.data, &b.data, |x, y| vec![dot_values(x, y)]);
    Tensor::scalar(data.get(0))
}

/// `m: [M, K]` times `v: [K]`, giving `[M]`.
pub fn matvec(m: &Tensor, v: &Tensor) -> Tensor {
    require_shape("matvec", m, 2);
    require_shape("matvec", v, 1);
    let (rows, cols) = (m.shape[0], m.shape[1]);
    require_equal("matvec", cols, v.shape[0]);
    let data = map_same_type_pair!("matvec", &m.data, &v.data, |x, y| matvec_values(
        x, rows, cols, y
    ));
    Tensor::new(vec![rows], data)
}

/// `v: [M]` times `m: [M, K]`, giving `[K]` (that is, `mᵀ v`).
pub fn vecmat(v: &Tensor, m: &Tensor) -> Tensor {
    require_shape("vecmat", v, 1);
    require_shape("vecmat", m, 2);
    let (rows, cols) = (m.shape[0], m.shape[1]);
    require_equal("vecmat", v.shape[0], rows);
    let data = map_same_type_pair!("vecmat", &v.data, &m.data, |x, y| vecmat_values(
        x, y, rows, cols
    ));
    Tensor::new(vec![cols], data)
}

/// `a: [M, K]` times `b: [K, N]`, giving `[M, N]`.
pub fn matmul(a: &Tensor, b: &Tensor) -> Tensor {
    require_shape("matmul", a, 2);
    require_shape("matmul", b, 2);
    let (rows, inner, cols) = (a.shape[0], a.shape[1], b.shape[1]);
    require_equal("matmul", inner, b.shape[0]);
    let data = map_same_type_pair!("matmul", &a.data, &b.data, |x, y| matmul_values(
        x, y, rows, inner, cols
    ));
    Tensor::new(vec![rows, cols], data)
}

/// `m: [M, K]` transposed: `[K, M]`; [`transpose_rows`] on one row.
pub fn transpose(m: &Tensor) -> Tensor {
    require_shape("transpose", m, 2);
    let (rows, cols) = (m.shape[0], m.shape[1]);
    let mut out = Data::filled(Scalar::zero(m.elem_type()), m.len());
    transpose_rows(
        Rows::Shared(Values::all(&m.data)),
        rows,
        cols,
        RowsMut::one(ValuesMut::all(&mut out)),
    );
    Tensor::new(vec![cols, rows], out)
}

/// `a: [M]` and `b: [K]`: `[M, K]` with `a[i] * b[j]`; [`outer_rows`] on one row.
pub fn outer(a: &Tensor, b: &Tensor) -> Tensor {
    require_shape("outer", a, 1);
    require_shape("outer", b, 1);
    let shape = vec![a.shape[0], b.shape[0]];
    let mut out = Data::filled(Scalar::zero(a.elem_type()), a.len() * b.len());
    outer_rows(
        Rows::Shared(Values::all(&a.data)),
        Rows::Shared(Values::all(&b.data)),
        RowsMut::one(ValuesMut::all(&mut out)),
    );
    Tensor::new(shape, out)
}

// ---------------------------------------------------------------------------
// Batched forms: one operation on a column of rows.

/// The transpose of each row of `x` (an `m x k` matrix) into `out`.
pub fn transpose_rows(x: Rows<'_>, m: usize, k: usize, out: RowsMut<'_>) {
    fn each<T: Copy>(x: &[T], shared: bool, m: usize, k: usize, rows: usize, out: &mut [T]) {
        let size = m * k;
        for (r, o) in out.chunks_exact_mut(size).take(rows).enumerate() {
            let row = if shared {
                x
            } else {
                &x[r * size..(r + 1) * size]
            };
            transpose_into(row, m, k, o);
        }
    }
    if m * k == 0 {
        return;
    }
    let (shared, rows) = (x.is_shared(), out.rows);
    with_same_type!("transpose", x.values(), out.values, |x, o| each(
        x, shared, m, k, rows, o
    ))
}

/// The outer product of each row of `a` (`m` elements) with the same row
/// of `b` (`k`), into `out` (`m * k` per row). Floats use
/// [`gemm::outer_into`], other types the [`Ring`] product, as [`outer`] does.
pub fn outer_rows(a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
    fn each<T: Product>(a: Typed<'_, T>, b: Typed<'_, T>, rows: usize, out: &mut [T]) {
        let size = a.row_len * b.row_len;
        for r in 0..rows {
            T::outer_slices(a.row(r), b.row(r), &mut out[r * size..(r + 1) * size]);
        }
    }
    let rows = out.rows;
    match (a.values(), b.values(), out.values) {
        (Values::Bool(x), Values::Bool(y), ValuesMut::Bool(o)) => {
            each(Typed::of(a, x), Typed::of(b, y), rows, o)
        }
        (Values::I32(x), Values::I32(y), ValuesMut::I32(o)) => {
            each(Typed::of(a, x), Typed::of(b, y), rows, o)
        }
        (Values::I64(x), Values::I64(y), ValuesMut::I64(o)) => {
            each(Typed::of(a, x), Typed::of(b, y), rows, o)
        }
        (Values::Usize(x), Values::Usize(y), ValuesMut::Usize(o)) => {
            each(Typed::of(a, x), Typed::of(b, y), rows, o)
        }
        (Values::F32(x), Values::F32(y), ValuesMut::F32(o)) => {
            each(Typed::of(a, x), Typed::of(b, y), rows, o)
        }
        (Values::F64(x), Values::F64(y), ValuesMut::F64(o)) => {
            each(Typed::of(a, x), Typed::of(b, y), rows, o)
        }
        (x, y, _) => internal_error(format!("outer of {} and {}", x.ty(), y.ty())),
    }
}

/// Which product of [`product_rows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductOp {
    Dot,
    Matvec,
    Vecmat,
    Matmul,
}

/// The dimensions of a product: `m x k` times `k x p` (a vector is `1 x k`
/// on the left, `k x 1` on the right).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub m: usize,
    pub k: usize,
    pub p: usize,
}

/// A float product for every row of `out` (`m * p` elements each): `a` and
/// `b` are columns of rows, or one shared value (ONE batched product of the
/// shared matrix with every row). Every kernel called gives each output
/// element the bits the per-member product ([`dot`], [`matvec`], [`vecmat`],
/// [`matmul`]) gives it.
pub fn product_rows(op: ProductOp, dims: Dims, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
    let shared = [a.is_shared(), b.is_shared()];
    let n = out.rows;
    match (a.values(), b.values(), out.values) {
        (Values::F32(a), Values::F32(b), ValuesMut::F32(out)) => {
            float_product(op, dims, shared, a, b, n, out)
        }
        (Values::F64(a), Values::F64(b), ValuesMut::F64(out)) => {
            float_product(op, dims, shared, a, b, n, out)
        }
        (a, b, _) => internal_error(format!(
            "{op:?}: a batched product of {} and {}",
            a.ty(),
            b.ty()
        )),
    }
}

/// `n` rows of a float product: `a` and `b` hold `n` rows each, or one
/// shared value; `out` has `n` rows of `m * p` elements.
fn float_product<T: GemmFloat>(
    op: ProductOp,
    Dims { m, k, p }: Dims,
    shared: [bool; 2],
    a: &[T],
    b: &[T],
    n: usize,
    out: &mut [T],
) {
    match (op, shared) {
        // dot(a, b) == dot(b, a) bit for bit: the products commute.
        (ProductOp::Dot, [false, false]) => gemm::dot_rows_into(a, b, k, n, out),
        (ProductOp::Dot, [true, false]) => gemm::matvec_into(a, 1, k, b, n, out),
        (ProductOp::Dot, [false, true]) => gemm::matvec_into(b, 1, k, a, n, out),
        (ProductOp::Matvec, [true, false]) => gemm::matvec_into(a, m, k, b, n, out),
        (ProductOp::Matvec, [false, false]) => gemm::matvec_batched_into(a, m, k, b, n, out),
        (ProductOp::Matvec, [false, true]) => {
            for r in 0..n {
                gemm::matvec_into(
                    &a[r * m * k..(r + 1) * m * k],
                    m,
                    k,
                    b,
                    1,
                    &mut out[r * m..(r + 1) * m],
                );
            }
        }
        (ProductOp::Vecmat, [false, true]) => gemm::vecmat_into(a, b, n, k, p, out),
        (ProductOp::Vecmat, [false, false]) => gemm::vecmat_batched_into(a, b, n, k, p, out),
        (ProductOp::Vecmat, [true, false]) => {
            for r in 0..n {
                gemm::vecmat_into(
                    a,
                    &b[r * k * p..(r + 1) * k * p],
                    1,
                    k,
                    p,
                    &mut out[r * p..(r + 1) * p],
                );
            }
        }
        (ProductOp::Matmul, [true, false]) => gemm::matmul_shared_a_into(a, b, n, m, k, p, out),
        (ProductOp::Matmul, [false, true]) => gemm::matmul_shared_b_into(a, b, n, m, k, p, out),
        (ProductOp::Matmul, [false, false]) => gemm::matmul_batched_into(a, b, n, m, k, p, out),
        _ => internal_error(format!("{op:?} with operands shared {shared:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_types::Scalar;

    fn t(shape: &[usize], data: Data) -> Tensor {
        Tensor::new(shape.to_vec(), data)
    }

    #[test]
    fn dot_on_every_type() {
        let f = t(&[3], Data::F64(vec![1.0, 2.0, 3.0]));
        assert_eq!(dot(&f, &f), Tensor::scalar(Scalar::F64(14.0)));
        let g = t(&[2], Data::F32(vec![0.5, 4.0]));
        assert_eq!(dot(&g, &g), Tensor::scalar(Scalar::F32(16.25)));
        let i = t(&[2], Data::I32(vec![i32::MAX, 1]));
        assert_eq!(
            dot(&i, &t(&[2], Data::I32(vec![2, 2]))),
            Tensor::scalar(Scalar::I32(0))
        );
        let l = t(&[2], Data::I64(vec![-3, 4]));
        assert_eq!(dot(&l, &l), Tensor::scalar(Scalar::I64(25)));
        let u = t(&[2], Data::Usize(vec![u64::MAX, 1]));
        assert_eq!(
            dot(&u, &t(&[2], Data::Usize(vec![1, 1]))),
            Tensor::scalar(Scalar::Usize(0))
        );
        let b = t(&[2], Data::Bool(vec![true, false]));
        assert_eq!(
            dot(&b, &t(&[2], Data::Bool(vec![false, true]))),
            Tensor::scalar(Scalar::Bool(false))
        );
        assert_eq!(dot(&b, &b), Tensor::scalar(Scalar::Bool(true)));
        let empty = t(&[0], Data::F64(vec![]));
        assert_eq!(dot(&empty, &empty), Tensor::scalar(Scalar::F64(0.0)));
    }

    #[test]
    fn float_dot_uses_lane_partial_sums() {
        // f64 has 4 lanes: elements 0 and 4 share a partial, 1 and 5 another;
        // the partials are then added (0 + 2) + (1 + 3).
        let a = t(&[6], Data::F64(vec![1e16, 1.0, -1e16, 0.0, 1.0, 1.0]));
        let ones = t(&[6], Data::F64(vec![1.0; 6]));
        let lanes = [1e16 + 1.0, 1.0 + 1.0, -1e16, 0.0];
        assert_eq!(
            dot(&a, &ones),
            Tensor::scalar(Scalar::F64((lanes[0] + lanes[2]) + (lanes[1] + lanes[3])))
        );
        let i = t(&[3], Data::I64(vec![i64::MAX, 1, -1]));
        assert_eq!(
            dot(&i, &t(&[3], Data::I64(vec![1; 3]))),
            Tensor::scalar(Scalar::I64(i64::MAX))
        );
    }

    #[test]
    fn matrix_products() {
        // m = [[1, 2, 3], [4, 5, 6]]
        let m = t(&[2, 3], Data::I64(vec![1, 2, 3, 4, 5, 6]));
        let v3 = t(&[3], Data::I64(vec![1, 0, -1]));
        let v2 = t(&[2], Data::I64(vec![1, 10]));
        assert_eq!(matvec(&m, &v3), t(&[2], Data::I64(vec![-2, -2])));
        assert_eq!(vecmat(&v2, &m), t(&[3], Data::I64(vec![41, 52, 63])));
        let mt = transpose(&m);
        assert_eq!(mt, t(&[3, 2], Data::I64(vec![1, 4, 2, 5, 3, 6])));
        assert_eq!(matmul(&m, &mt), t(&[2, 2], Data::I64(vec![14, 32, 32, 77])));
        assert_eq!(matmul(&mt, &m).shape, vec![3, 3]);
        assert_eq!(
            outer(&v2, &v3),
            t(&[2, 3], Data::I64(vec![1, 0, -1, 10, 0, -10]))
        );
        let fm = t(&[2, 2], Data::F32(vec![1.0, 2.0, 3.0, 4.0]));
        let fv = t(&[2], Data::F32(vec![0.5, -1.0]));
        assert_eq!(matvec(&fm, &fv), t(&[2], Data::F32(vec![-1.5, -2.5])));
        assert_eq!(vecmat(&fv, &fm), t(&[2], Data::F32(vec![-2.5, -3.0])));
        assert_eq!(
            matmul(&fm, &fm),
            t(&[2, 2], Data::F32(vec![7.0, 10.0, 15.0, 22.0]))
        );
        let um = t(&[1, 2], Data::Usize(vec![u64::MAX, 2]));
        assert_eq!(
            matvec(&um, &t(&[2], Data::Usize(vec![2, 1]))),
            t(&[1], Data::Usize(vec![0]))
        );
        let im = t(&[1, 1], Data::I32(vec![i32::MIN]));
        assert_eq!(
            matmul(&im, &t(&[1, 1], Data::I32(vec![-1]))),
            t(&[1, 1], Data::I32(vec![i32::MIN]))
        );
        let bm = t(&[2, 2], Data::Bool(vec![true, false, false, true]));
        assert_eq!(matmul(&bm, &bm), bm);
        assert_eq!(
            transpose(&t(&[1, 2], Data::Bool(vec![true, false]))),
            t(&[2, 1], Data::Bool(vec![true, false]))
        );
        let fo = outer(
            &t(&[2], Data::F64(vec![1.0, 2.0])),
            &t(&[1], Data::F64(vec![3.0])),
        );
        assert_eq!(fo, t(&[2, 1], Data::F64(vec![3.0, 6.0])));
    }

    #[test]
    fn float_products_follow_their_stated_orders_bit_for_bit() {
        let a: Vec<f64> = (0..12).map(|k| ((k * 7 % 5) as f64 - 1.3) / 3.1).collect();
        let b: Vec<f64> = (0..12).map(|k| ((k * 3 % 7) as f64 + 0.7) / 1.9).collect();
        let ma = t(&[3, 4], Data::F64(a.clone()));
        let mb = t(&[4, 3], Data::F64(b.clone()));
        let axpy =
            |x: &[f64], y: &[f64]| x.iter().zip(y).fold(0.0, |acc, (&p, &q)| p.mul_add(q, acc));
        let Data::F64(prod) = matmul(&ma, &mb).data else {
            panic!()
        };
        for i in 0..3 {
            for j in 0..3 {
                let column: Vec<f64> = (0..4).map(|k| b[k * 3 + j]).collect();
                assert_eq!(
                    prod[i * 3 + j].to_bits(),
                    axpy(&a[i * 4..i * 4 + 4], &column).to_bits()
                );
            }
        }
        let v = t(&[4], Data::F64(b[..4].to_vec()));
        let Data::F64(mv) = matvec(&ma, &v).data else {
            panic!()
        };
        for i in 0..3 {
            assert_eq!(
                mv[i].to_bits(),
                dot_values(&a[i * 4..i * 4 + 4], &b[..4]).to_bits()
            );
        }
        let Data::F64(vm) = vecmat(&t(&[3], Data::F64(b[..3].to_vec())), &ma).data else {
            panic!()
        };
        for j in 0..4 {
            let column: Vec<f64> = (0..3).map(|i| a[i * 4 + j]).collect();
            assert_eq!(vm[j].to_bits(), axpy(&b[..3], &column).to_bits());
        }
    }

    #[test]
    fn degenerate_shapes() {
        let m = t(&[2, 0], Data::F64(vec![]));
        let v = t(&[0], Data::F64(vec![]));
        assert_eq!(matvec(&m, &v), t(&[2], Data::F64(vec![0.0, 0.0])));
        assert_eq!(
            vecmat(&t(&[2], Data::F64(vec![1.0, 2.0])), &m),
            t(&[0], Data::F64(vec![]))
        );
        assert_eq!(transpose(&m), t(&[0, 2], Data::F64(vec![])));
        assert_eq!(
            matmul(&m, &t(&[0, 3], Data::F64(vec![]))),
            t(&[2, 3], Data::F64(vec![0.0; 6]))
        );
        assert_eq!(
            outer(&v, &t(&[2], Data::F64(vec![1.0, 2.0]))),
            t(&[0, 2], Data::F64(vec![]))
        );
    }
}
