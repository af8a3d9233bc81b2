//! The AVX2+FMA backend. Its functions are only ever inlined into
//! `#[target_feature(enable = "avx2,fma")]` functions that run after the
//! CPU was tested; they compute exactly what [`super::Portable`] computes.

use super::{DotVector, Vector};
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub struct F32x8(__m256);

/// All ones in the lanes below `count`.
#[inline(always)]
fn mask32(count: usize) -> __m256i {
    unsafe {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(count as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
}

#[inline(always)]
fn mask64(count: usize) -> __m256i {
    unsafe {
        _mm256_cmpgt_epi64(
            _mm256_set1_epi64x(count as i64),
            _mm256_setr_epi64x(0, 1, 2, 3),
        )
    }
}

#[derive(Clone, Copy)]
pub struct F64x4(__m256d);

impl Vector<f32> for F32x8 {
    const L: usize = 8;
    #[inline(always)]
    fn zero() -> Self {
        F32x8(unsafe { _mm256_setzero_ps() })
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        F32x8(unsafe { _mm256_set1_ps(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        F32x8(_mm256_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, count: usize) -> Self {
        // Lanes from `count` on read as +0.0 and are never touched in
        // memory: half a vector (a row of 100 ends so) is a plain 128-bit
        // load, zero-extended; other counts a masked load.
        if count == 4 {
            return F32x8(_mm256_zextps128_ps256(_mm_loadu_ps(p)));
        }
        F32x8(_mm256_maskload_ps(p, mask32(count)))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self.0)
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, count: usize) {
        if count == 4 {
            return _mm_storeu_ps(p, _mm256_castps256_ps128(self.0));
        }
        _mm256_maskstore_ps(p, mask32(count), self.0)
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        F32x8(unsafe { _mm256_fmadd_ps(a.0, b.0, c.0) })
    }
}

impl DotVector<f32> for F32x8 {
    #[inline(always)]
    fn tree(self) -> f32 {
        unsafe {
            let lo = _mm256_castps256_ps128(self.0);
            let hi = _mm256_extractf128_ps::<1>(self.0);
            let four = _mm_add_ps(lo, hi); // l + (l + 4)
            let two = _mm_add_ps(four, _mm_movehl_ps(four, four)); // l + (l + 2)
            let one = _mm_add_ss(two, _mm_shuffle_ps::<0b01>(two, two)); // 0 + 1
            _mm_cvtss_f32(one)
        }
    }
    #[inline(always)]
    fn tree4(a: Self, b: Self, c: Self, d: Self) -> [f32; 4] {
        unsafe {
            // l + (l + 4) for each vector.
            let half =
                |v: __m256| _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let (a, b, c, d) = (half(a.0), half(b.0), half(c.0), half(d.0));
            // l + (l + 2): [a0+a2, a1+a3, b0+b2, b1+b3] and the same for c, d.
            let ab = _mm_add_ps(_mm_shuffle_ps::<0x44>(a, b), _mm_shuffle_ps::<0xEE>(a, b));
            let cd = _mm_add_ps(_mm_shuffle_ps::<0x44>(c, d), _mm_shuffle_ps::<0xEE>(c, d));
            // 0 + 1: [a, b, c, d].
            let sums = _mm_add_ps(
                _mm_shuffle_ps::<0x88>(ab, cd),
                _mm_shuffle_ps::<0xDD>(ab, cd),
            );
            let mut out = [0.0f32; 4];
            _mm_storeu_ps(out.as_mut_ptr(), sums);
            out
        }
    }
    #[inline(always)]
    fn tree8(v: [Self; 8]) -> [f32; 8] {
        unsafe {
            // q(l) + q(l + 4): vectors i, i + 1 -> [i's four | i + 1's four].
            let step1 = |a: __m256, b: __m256| {
                _mm256_add_ps(
                    _mm256_permute2f128_ps::<0x20>(a, b),
                    _mm256_permute2f128_ps::<0x31>(a, b),
                )
            };
            let s0 = step1(v[0].0, v[1].0);
            let s1 = step1(v[2].0, v[3].0);
            let s2 = step1(v[4].0, v[5].0);
            let s3 = step1(v[6].0, v[7].0);
            // a(l) + a(l + 2): [0 0 2 2 | 1 1 3 3] and [4 4 6 6 | 5 5 7 7].
            let step2 = |a: __m256, b: __m256| {
                _mm256_add_ps(
                    _mm256_shuffle_ps::<0x44>(a, b),
                    _mm256_shuffle_ps::<0xEE>(a, b),
                )
            };
            let t0 = step2(s0, s1);
            let t1 = step2(s2, s3);
            // b0 + b1: [0 2 4 6 | 1 3 5 7], then in order.
            let sums = _mm256_add_ps(
                _mm256_shuffle_ps::<0x88>(t0, t1),
                _mm256_shuffle_ps::<0xDD>(t0, t1),
            );
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            let mut out = [0.0f32; 8];
            _mm256_storeu_ps(out.as_mut_ptr(), _mm256_permutevar8x32_ps(sums, order));
            out
        }
    }
}

impl Vector<f64> for F64x4 {
    const L: usize = 4;
    #[inline(always)]
    fn zero() -> Self {
        F64x4(unsafe { _mm256_setzero_pd() })
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        F64x4(unsafe { _mm256_set1_pd(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> Self {
        F64x4(_mm256_loadu_pd(p))
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f64, count: usize) -> Self {
        // As for f32: half a vector is a plain 128-bit load.
        if count == 2 {
            return F64x4(_mm256_zextpd128_pd256(_mm_loadu_pd(p)));
        }
        F64x4(_mm256_maskload_pd(p, mask64(count)))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64) {
        _mm256_storeu_pd(p, self.0)
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f64, count: usize) {
        if count == 2 {
            return _mm_storeu_pd(p, _mm256_castpd256_pd128(self.0));
        }
        _mm256_maskstore_pd(p, mask64(count), self.0)
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        F64x4(unsafe { _mm256_fmadd_pd(a.0, b.0, c.0) })
    }
}

impl DotVector<f64> for F64x4 {
    #[inline(always)]
    fn tree(self) -> f64 {
        unsafe {
            let lo = _mm256_castpd256_pd128(self.0);
            let hi = _mm256_extractf128_pd::<1>(self.0);
            let two = _mm_add_pd(lo, hi); // l + (l + 2)
            let one = _mm_add_sd(two, _mm_unpackhi_pd(two, two)); // 0 + 1
            _mm_cvtsd_f64(one)
        }
    }
    #[inline(always)]
    fn tree4(a: Self, b: Self, c: Self, d: Self) -> [f64; 4] {
        unsafe {
            // q(l) + q(l + 2): vectors a, b -> [a's two | b's two].
            let step1 = |a: __m256d, b: __m256d| {
                _mm256_add_pd(
                    _mm256_permute2f128_pd::<0x20>(a, b),
                    _mm256_permute2f128_pd::<0x31>(a, b),
                )
            };
            let ab = step1(a.0, b.0);
            let cd = step1(c.0, d.0);
            // 0 + 1: [a c | b d], then in order.
            let sums = _mm256_add_pd(_mm256_unpacklo_pd(ab, cd), _mm256_unpackhi_pd(ab, cd));
            let mut out = [0.0f64; 4];
            _mm256_storeu_pd(
                out.as_mut_ptr(),
                _mm256_permute4x64_pd::<0b11_01_10_00>(sums),
            );
            out
        }
    }
}
