//! Every CPU path of the products (portable, AVX2, AVX-512, forced through
//! `gemm::*_into_on`) gives every output element the same bits, on odd
//! sizes around the tile and vector widths, with NaN and infinities among
//! the inputs; and a member's result does not depend on the batch it is
//! computed in nor on where the tile boundaries fall. Paths this CPU cannot
//! run are skipped (and named on stderr).

use autobatch_kernels::gemm::{self, GemmFloat, Path};

trait TestFloat: GemmFloat {
    fn of(x: f64) -> Self;
    fn bits(self) -> u64;
    fn is_nan(self) -> bool;
}

impl TestFloat for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl TestFloat for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
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

    /// Values in [-1, 1); with `special`, about one in 64 is NaN, an
    /// infinity, a signed zero or a subnormal.
    fn vec<T: TestFloat>(&mut self, len: usize, special: bool) -> Vec<T> {
        (0..len)
            .map(|_| {
                let x = self.next();
                if special && x.abs() < 1.0 / 64.0 {
                    let odd = [
                        f64::NAN,
                        f64::INFINITY,
                        f64::NEG_INFINITY,
                        -0.0,
                        0.0,
                        1e-310,
                    ];
                    T::of(odd[((x.abs() * 64.0 * 6.0) as usize).min(5)])
                } else {
                    T::of(x)
                }
            })
            .collect()
    }
}

/// The same bits, NaN payloads aside (any NaN equals any NaN).
fn same_bits<T: TestFloat>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.bits() == w.bits() || (g.is_nan() && w.is_nan()),
            "{what}: element {i}: {g:?} vs {w:?}"
        );
    }
}

fn paths() -> Vec<Path> {
    Path::ALL
        .into_iter()
        .filter(|p| {
            let ok = p.available();
            if !ok {
                eprintln!("gemm_paths: this CPU cannot run {p:?}; not compared");
            }
            ok
        })
        .collect()
}

fn matvec_paths<T: TestFloat>(gen: &mut Gen) {
    let paths = paths();
    for rows in [1usize, 7, 8, 9, 17, 100, 257] {
        for k in [0usize, 1, 3, 7, 8, 9, 15, 16, 17, 100, 257, 700] {
            for n in [1usize, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 40] {
                if rows * k * n > 3_000_000 {
                    continue;
                }
                let special = (rows + k + n) % 2 == 0;
                let m: Vec<T> = gen.vec(rows * k, special);
                let vs: Vec<T> = gen.vec(n * k, special);
                let mut want = vec![T::of(9.0); n * rows];
                gemm::matvec_into_on(Path::Portable, &m, rows, k, &vs, n, &mut want);
                for &path in &paths {
                    let mut got = vec![T::of(-9.0); n * rows];
                    gemm::matvec_into_on(path, &m, rows, k, &vs, n, &mut got);
                    same_bits(
                        &format!("matvec {path:?} rows={rows} k={k} n={n}"),
                        &got,
                        &want,
                    );
                }
            }
        }
    }
}

/// Every path, and on every path the rows in two parts (`vecmat_add_into_on`
/// continuing the first part's sums): the bits of the portable path.
fn vecmat_paths<T: TestFloat>(gen: &mut Gen) {
    let paths = paths();
    for m in [1usize, 7, 17, 100, 257] {
        for k in [1usize, 3, 7, 8, 15, 16, 17, 31, 63, 64, 65, 100, 113, 257] {
            for n in [1usize, 2, 3, 4, 5, 6, 7, 8, 9, 13] {
                let special = (m + k + n) % 2 == 1;
                let mat: Vec<T> = gen.vec(m * k, special);
                let vs: Vec<T> = gen.vec(n * m, special);
                let mut want = vec![T::of(9.0); n * k];
                gemm::vecmat_into_on(Path::Portable, &vs, &mat, n, m, k, &mut want);
                // The first `a` rows, then the others continued from them.
                let a = m / 2;
                let part = |range: std::ops::Range<usize>| -> Vec<T> {
                    (0..n)
                        .flat_map(|b| vs[b * m + range.start..b * m + range.end].iter().copied())
                        .collect()
                };
                let (first, rest) = (part(0..a), part(a..m));
                for &path in &paths {
                    let mut got = vec![T::of(-9.0); n * k];
                    gemm::vecmat_into_on(path, &vs, &mat, n, m, k, &mut got);
                    same_bits(&format!("vecmat {path:?} m={m} k={k} n={n}"), &got, &want);
                    let mut got = vec![T::of(-9.0); n * k];
                    gemm::vecmat_into_on(path, &first, &mat[..a * k], n, a, k, &mut got);
                    gemm::vecmat_add_into_on(path, &rest, &mat[a * k..], n, m - a, k, &mut got);
                    same_bits(
                        &format!("vecmat in two {path:?} m={m} k={k} n={n}"),
                        &got,
                        &want,
                    );
                }
            }
        }
    }
}

/// A member alone, and the same member at several places of a batch of
/// 1000 (so tiles of 6 vectors and blocks of the packing buffer start at
/// different members), on every path.
fn batch_independence<T: TestFloat>(gen: &mut Gen) {
    let (n, rows, k) = (1000usize, 21usize, 100usize);
    let m: Vec<T> = gen.vec(rows * k, false);
    let vs: Vec<T> = gen.vec(n * k, true);
    let r: Vec<T> = gen.vec(n * rows, true);
    for path in paths() {
        let mut all = vec![T::ACC_ZERO; n * rows];
        gemm::matvec_into_on(path, &m, rows, k, &vs, n, &mut all);
        let mut all_vm = vec![T::ACC_ZERO; n * k];
        gemm::vecmat_into_on(path, &r, &m, n, rows, k, &mut all_vm);
        for b in [0usize, 1, 5, 6, 7, 333, 998, 999] {
            let mut one = vec![T::ACC_ZERO; rows];
            gemm::matvec_into_on(path, &m, rows, k, &vs[b * k..(b + 1) * k], 1, &mut one);
            same_bits(
                &format!("matvec {path:?} member {b} alone"),
                &one,
                &all[b * rows..(b + 1) * rows],
            );
            let mut one_vm = vec![T::ACC_ZERO; k];
            gemm::vecmat_into_on(
                path,
                &r[b * rows..(b + 1) * rows],
                &m,
                1,
                rows,
                k,
                &mut one_vm,
            );
            same_bits(
                &format!("vecmat {path:?} member {b} alone"),
                &one_vm,
                &all_vm[b * k..(b + 1) * k],
            );
        }
        for lo in [1usize, 5, 7, 100, 331] {
            let hi = n - lo / 2;
            let mut part = vec![T::ACC_ZERO; (hi - lo) * rows];
            gemm::matvec_into_on(path, &m, rows, k, &vs[lo * k..hi * k], hi - lo, &mut part);
            same_bits(
                &format!("matvec {path:?} members {lo}..{hi}"),
                &part,
                &all[lo * rows..hi * rows],
            );
            let mut part_vm = vec![T::ACC_ZERO; (hi - lo) * k];
            gemm::vecmat_into_on(
                path,
                &r[lo * rows..hi * rows],
                &m,
                hi - lo,
                rows,
                k,
                &mut part_vm,
            );
            same_bits(
                &format!("vecmat {path:?} members {lo}..{hi}"),
                &part_vm,
                &all_vm[lo * k..hi * k],
            );
        }
    }
}

#[test]
fn matvec_paths_agree_bit_for_bit() {
    matvec_paths::<f32>(&mut Gen(21));
    matvec_paths::<f64>(&mut Gen(22));
}

#[test]
fn vecmat_paths_agree_bit_for_bit() {
    vecmat_paths::<f32>(&mut Gen(23));
    vecmat_paths::<f64>(&mut Gen(24));
}

#[test]
fn a_member_has_the_same_bits_alone_and_anywhere_in_a_batch() {
    batch_independence::<f32>(&mut Gen(25));
    batch_independence::<f64>(&mut Gen(26));
}

#[test]
fn the_detected_path_is_available() {
    assert!(Path::detected().available());
    assert!(Path::Portable.available());
}
