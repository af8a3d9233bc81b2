//! The products of `gemm` and the row-wise reductions: each output element
//! has the bits of its stated order (checked against naive implementations
//! of that order), the same for any batch size, any sub-range of the batch,
//! and the portable path; and the values are close to an exact-ish `f64`
//! (or compensated) reference.

use autobatch_kernels::gemm::{self, GemmFloat};
use autobatch_kernels::reduce;
use proptest::prelude::*;

trait TestFloat: GemmFloat + autobatch_kernels::scalar::Float {
    fn of(x: f64) -> Self;
    fn wide(self) -> f64;
    fn bits(self) -> u64;
}

impl TestFloat for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn wide(self) -> f64 {
        self as f64
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl TestFloat for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn wide(self) -> f64 {
        self
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

struct Gen(u64);

impl Gen {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    fn vec<T: TestFloat>(&mut self, len: usize) -> Vec<T> {
        (0..len).map(|_| T::of(self.next())).collect()
    }
}

/// The dot-form order, written naively: partial `p mod L` over the operands
/// padded with `+0.0` to a multiple of `L`, then the pairwise tree.
fn naive_dot<T: TestFloat>(a: &[T], b: &[T]) -> T {
    let lanes = T::LANES;
    let mut acc = vec![T::ACC_ZERO; lanes];
    let padded = a.len().div_ceil(lanes) * lanes;
    for p in 0..padded {
        let (x, y) = if p < a.len() {
            (a[p], b[p])
        } else {
            (T::ACC_ZERO, T::ACC_ZERO)
        };
        acc[p % lanes] = x.fma(y, acc[p % lanes]);
    }
    let mut width = lanes;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] = acc[i] + acc[i + width];
        }
    }
    acc[0]
}

/// The axpy-form order, written naively.
fn naive_axpy<T: TestFloat>(x: impl Iterator<Item = (T, T)>) -> T {
    x.fold(T::ACC_ZERO, |acc, (a, b)| a.fma(b, acc))
}

fn same_bits<T: TestFloat>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.bits() == w.bits() || (g.wide().is_nan() && w.wide().is_nan()),
            "{what}: element {i}: {g:?} vs {w:?}"
        );
    }
}

const KS: [usize; 10] = [0, 1, 3, 4, 7, 8, 9, 17, 33, 100];
const NS: [usize; 4] = [1, 3, 17, 256];

fn matvec_case<T: TestFloat>(gen: &mut Gen) {
    for &k in &KS {
        for rows in [1usize, 5, 13] {
            let m: Vec<T> = gen.vec(rows * k);
            let all: Vec<T> = gen.vec(256 * k);
            let mut full = vec![T::ACC_ZERO; 256 * rows];
            gemm::matvec_into(&m, rows, k, &all, 256, &mut full);
            let mut portable = vec![T::ACC_ZERO; 256 * rows];
            gemm::portable::matvec_into(&m, rows, k, &all, 256, &mut portable);
            same_bits("matvec portable", &portable, &full);
            for b in 0..256 {
                for i in 0..rows {
                    let want = naive_dot(&m[i * k..(i + 1) * k], &all[b * k..(b + 1) * k]);
                    assert_eq!(
                        full[b * rows + i].bits(),
                        want.bits(),
                        "matvec k={k} rows={rows} b={b} i={i}"
                    );
                    assert_eq!(
                        gemm::dot(&m[i * k..(i + 1) * k], &all[b * k..(b + 1) * k]).bits(),
                        want.bits()
                    );
                }
            }
            for &n in &NS {
                for lo in [0, n / 3, n.saturating_sub(1)] {
                    let mut out = vec![T::ACC_ZERO; (n - lo) * rows];
                    gemm::matvec_into(&m, rows, k, &all[lo * k..n * k], n - lo, &mut out);
                    same_bits("matvec sub-range", &out, &full[lo * rows..n * rows]);
                }
            }
        }
    }
}

fn vecmat_case<T: TestFloat>(gen: &mut Gen) {
    // (m, k): include a matrix taller than one cache block (k = 3, m = 12000).
    for (m, k) in [
        (0, 5),
        (5, 0),
        (1, 1),
        (7, 3),
        (9, 8),
        (13, 23),
        (31, 24),
        (40, 100),
        (12000, 3),
    ] {
        let mat: Vec<T> = gen.vec(m * k);
        let n_all = if m > 1000 { 17 } else { 256 };
        let all: Vec<T> = gen.vec(n_all * m);
        let mut full = vec![T::of(7.0); n_all * k];
        gemm::vecmat_into(&all, &mat, n_all, m, k, &mut full);
        let mut portable = vec![T::ACC_ZERO; n_all * k];
        gemm::portable::vecmat_into(&all, &mat, n_all, m, k, &mut portable);
        same_bits("vecmat portable", &portable, &full);
        for b in 0..n_all {
            for j in 0..k {
                let want = naive_axpy((0..m).map(|i| (all[b * m + i], mat[i * k + j])));
                assert_eq!(
                    full[b * k + j].bits(),
                    want.bits(),
                    "vecmat m={m} k={k} b={b} j={j}"
                );
            }
        }
        for &n in NS.iter().filter(|&&n| n <= n_all) {
            for lo in [0, n / 3, n.saturating_sub(1)] {
                let mut out = vec![T::ACC_ZERO; (n - lo) * k];
                gemm::vecmat_into(&all[lo * m..n * m], &mat, n - lo, m, k, &mut out);
                same_bits("vecmat sub-range", &out, &full[lo * k..n * k]);
            }
        }
    }
}

fn matmul_case<T: TestFloat>(gen: &mut Gen) {
    let (batch, m, k, n) = (5, 3, 7, 10);
    let a: Vec<T> = gen.vec(batch * m * k);
    let b: Vec<T> = gen.vec(batch * k * n);
    let single = |a: &[T], b: &[T]| {
        let mut out = vec![T::ACC_ZERO; m * n];
        gemm::matmul_into(a, b, m, k, n, &mut out);
        for i in 0..m {
            for j in 0..n {
                let want = naive_axpy((0..k).map(|p| (a[i * k + p], b[p * n + j])));
                assert_eq!(out[i * n + j].bits(), want.bits());
            }
        }
        out
    };
    let (mk, kn, mn) = (m * k, k * n, m * n);
    let mut out = vec![T::ACC_ZERO; batch * mn];
    gemm::matmul_batched_into(&a, &b, batch, m, k, n, &mut out);
    for t in 0..batch {
        same_bits(
            "batched",
            &out[t * mn..(t + 1) * mn],
            &single(&a[t * mk..(t + 1) * mk], &b[t * kn..(t + 1) * kn]),
        );
    }
    gemm::matmul_shared_a_into(&a[..mk], &b, batch, m, k, n, &mut out);
    for t in 0..batch {
        same_bits(
            "shared a",
            &out[t * mn..(t + 1) * mn],
            &single(&a[..mk], &b[t * kn..(t + 1) * kn]),
        );
    }
    gemm::matmul_shared_b_into(&a, &b[..kn], batch, m, k, n, &mut out);
    for t in 0..batch {
        same_bits(
            "shared b",
            &out[t * mn..(t + 1) * mn],
            &single(&a[t * mk..(t + 1) * mk], &b[..kn]),
        );
    }
    // Per-member matrix-vector products.
    let mut mv = vec![T::ACC_ZERO; batch * m];
    gemm::matvec_batched_into(&a, m, k, &b[..batch * k], batch, &mut mv);
    let mut vm = vec![T::ACC_ZERO; batch * k];
    gemm::vecmat_batched_into(&b[..batch * m], &a, batch, m, k, &mut vm);
    let mut dots = vec![T::ACC_ZERO; batch];
    gemm::dot_rows_into(&a[..batch * k], &b[..batch * k], k, batch, &mut dots);
    for t in 0..batch {
        for i in 0..m {
            let want = naive_dot(
                &a[t * mk + i * k..t * mk + (i + 1) * k],
                &b[t * k..(t + 1) * k],
            );
            assert_eq!(mv[t * m + i].bits(), want.bits());
        }
        for j in 0..k {
            let want = naive_axpy((0..m).map(|i| (b[t * m + i], a[t * mk + i * k + j])));
            assert_eq!(vm[t * k + j].bits(), want.bits());
        }
        assert_eq!(
            dots[t].bits(),
            naive_dot(&a[t * k..(t + 1) * k], &b[t * k..(t + 1) * k]).bits()
        );
    }
    let mut outer = vec![T::ACC_ZERO; m * k];
    gemm::outer_into(&a[..m], &b[..k], &mut outer);
    for i in 0..m {
        for j in 0..k {
            assert_eq!(outer[i * k + j].bits(), (a[i] * b[j]).bits());
        }
    }
}

fn special_values_case<T: TestFloat>() {
    let nan = T::of(f64::NAN);
    let inf = T::of(f64::INFINITY);
    let one = T::of(1.0);
    let zero = T::ACC_ZERO;
    // rows: [1, 1, 1], [NaN, 1, 1], [inf, 1, 1], [inf, -inf, 0]
    let m = vec![
        one,
        one,
        one,
        nan,
        one,
        one,
        inf,
        one,
        one,
        inf,
        T::of(f64::NEG_INFINITY),
        zero,
    ];
    let v = vec![one, one, one, one, zero, one];
    let mut out = vec![zero; 8];
    gemm::matvec_into(&m, 4, 3, &v, 2, &mut out);
    assert_eq!(out[0].wide(), 3.0);
    assert!(out[1].wide().is_nan());
    assert_eq!(out[2].wide(), f64::INFINITY);
    assert!(out[3].wide().is_nan(), "inf - inf");
    assert_eq!(out[4].wide(), 2.0);
    assert!(out[5].wide().is_nan());
    assert_eq!(out[6].wide(), f64::INFINITY);
    assert!(out[7].wide().is_nan(), "-inf * 0");
    let mut vm = vec![zero; 3];
    gemm::vecmat_into(&[one, one, one, one], &m, 1, 4, 3, &mut vm);
    assert!(vm[0].wide().is_nan(), "NaN and inf in column 0");
    assert_eq!(vm[1].wide(), f64::NEG_INFINITY);
    assert_eq!(vm[2].wide(), 3.0);
}

#[test]
fn matvec_is_the_dot_order_for_every_batch_and_range() {
    matvec_case::<f32>(&mut Gen(1));
    matvec_case::<f64>(&mut Gen(2));
}

#[test]
fn vecmat_is_the_axpy_order_for_every_batch_and_range() {
    vecmat_case::<f32>(&mut Gen(3));
    vecmat_case::<f64>(&mut Gen(4));
}

#[test]
fn matmul_and_batched_products_match_the_single_member() {
    matmul_case::<f32>(&mut Gen(5));
    matmul_case::<f64>(&mut Gen(6));
}

#[test]
fn a_partial_chunk_is_padded_with_plus_zero() {
    // Lane 1 underflows to -0.0; lanes 0, 2, 3 are +0.0 or padding: the sum is +0.0,
    // and a lone -0.0 lane is turned into +0.0 by the padding fma.
    let tiny = f64::MIN_POSITIVE;
    let a = [0.0, -tiny, 0.0, 0.0, 0.0, -tiny];
    let b = [0.0, tiny, 0.0, 0.0, 0.0, tiny];
    assert_eq!(gemm::dot(&a, &b).to_bits(), naive_dot(&a, &b).to_bits());
    assert_eq!(
        gemm::portable::dot(&a, &b).to_bits(),
        naive_dot(&a, &b).to_bits()
    );
    assert_eq!(gemm::dot(&a, &b).to_bits(), 0.0f64.to_bits());
}

#[test]
fn special_values_propagate() {
    special_values_case::<f32>();
    special_values_case::<f64>();
}

#[test]
fn row_wise_reductions_match_the_per_row_functions() {
    let mut gen = Gen(9);
    for row_len in [0usize, 1, 3, 8, 9, 100] {
        let rows = 17;
        let x: Vec<f64> = (0..rows * row_len).map(|_| gen.next() * 30.0).collect();
        let mut out = vec![0.0; rows];
        type RowFn = fn(&[f64], usize, &mut [f64]);
        type OneFn = fn(&[f64]) -> f64;
        let cases: [(RowFn, OneFn); 5] = [
            (reduce::sum_rows_into, reduce::float_sum),
            (reduce::mean_rows_into, reduce::float_mean),
            (reduce::max_rows_into, reduce::float_max),
            (reduce::min_rows_into, reduce::float_min),
            (reduce::logsumexp_rows_into, reduce::logsumexp),
        ];
        for (rowwise, single) in cases {
            rowwise(&x, row_len, &mut out);
            for r in 0..rows {
                let want = single(&x[r * row_len..(r + 1) * row_len]);
                assert!(out[r].to_bits() == want.to_bits() || (out[r].is_nan() && want.is_nan()));
            }
        }
        let mut soft = vec![0.0; x.len()];
        reduce::softmax_rows_into(&x, row_len, &mut soft);
        for r in 0..rows {
            let want = reduce::softmax_values(&x[r * row_len..(r + 1) * row_len]);
            same_bits("softmax", &soft[r * row_len..(r + 1) * row_len], &want);
        }
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut out32 = vec![0.0f32; rows];
        reduce::logsumexp_rows_into(&x32, row_len, &mut out32);
        for r in 0..rows {
            let row = &x32[r * row_len..(r + 1) * row_len];
            let want = reduce::logsumexp(row);
            assert!(out32[r].to_bits() == want.to_bits() || (out32[r].is_nan() && want.is_nan()));
            // logsumexp is close to the f64 computation.
            if !row.is_empty() {
                let wide: Vec<f64> = row.iter().map(|&v| v as f64).collect();
                let m = wide.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let exact = m + wide.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                assert!((out32[r] as f64 - exact).abs() <= 1e-5 * exact.abs().max(1.0));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Products are close to a compensated f64 reference (the f32 kernels to
    /// within k * 2^-23 of the sum of absolute products, the f64 ones 2^-52).
    #[test]
    fn products_are_accurate(k in 0usize..300, n in 1usize..6, rows in 1usize..6, seed in 1u64..u64::MAX) {
        let mut gen = Gen(seed);
        let m: Vec<f32> = gen.vec(rows * k);
        let vs: Vec<f32> = gen.vec(n * k);
        let mut out = vec![0.0f32; n * rows];
        gemm::matvec_into(&m, rows, k, &vs, n, &mut out);
        let m64: Vec<f64> = gen.vec(rows * k);
        let vs64: Vec<f64> = gen.vec(n * k);
        let mut out64 = vec![0.0f64; n * rows];
        gemm::matvec_into(&m64, rows, k, &vs64, n, &mut out64);
        for b in 0..n {
            for i in 0..rows {
                let exact: f64 = (0..k).map(|p| m[i * k + p] as f64 * vs[b * k + p] as f64).sum();
                let scale: f64 = (0..k).map(|p| (m[i * k + p] as f64 * vs[b * k + p] as f64).abs()).sum();
                prop_assert!((out[b * rows + i] as f64 - exact).abs() <= (k as f64 + 1.0) * 1.2e-7 * scale + 1e-30);
                let terms: Vec<f64> = (0..k).map(|p| m64[i * k + p] * vs64[b * k + p]).collect();
                let (mut s, mut c) = (0.0f64, 0.0f64);
                for t in terms.iter() { let y = t - c; let u = s + y; c = (u - s) - y; s = u; }
                let scale: f64 = terms.iter().map(|t| t.abs()).sum();
                prop_assert!((out64[b * rows + i] - s).abs() <= (k as f64 + 1.0) * 2.3e-16 * scale + 1e-300);
            }
        }
    }
}
