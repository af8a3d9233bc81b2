//! The AVX-512 backend of the products. Its functions are only ever inlined
//! into `#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]`
//! functions that run after the CPU was tested, and compute exactly what
//! the portable backend computes:
//!
//! - the axpy form (`vecmat_into`, `matmul_into`) is lane-wise, so it runs
//!   the generic kernel on 512-bit vectors ([`F32x16`], [`F64x8`]);
//! - the dot form (`matvec_into`) keeps its `LANES` lane partials per
//!   output element (8 for `f32`, 4 for `f64`, a 256-bit register's worth),
//!   so one 512-bit register holds the partials of **two** output elements
//!   (one matrix row against two vectors, [`Pairs`]): the matrix row's chunk
//!   is broadcast to both halves, the two vectors' chunks sit side by side.
//!   [`matvec`] packs each block of vectors in pairs on the stack (chunk by
//!   chunk, padded with `+0.0` as the dot form pads) so that the inner loop
//!   is loads and FMAs only, and reduces eight accumulators at once in the
//!   dot form's pairwise tree (the lane additions of the tree, lower lane on
//!   the left, only arranged across registers).

use std::arch::x86_64::*;

use super::{few_vectors, matvec_row_tile, one_at_a_time, GemmFloat, Vector};

/// 16 `f32` lanes.
#[derive(Clone, Copy)]
pub struct F32x16(__m512);

/// 8 `f64` lanes.
#[derive(Clone, Copy)]
pub struct F64x8(__m512d);

/// All ones in the lanes below `count`.
#[inline(always)]
fn mask16(count: usize) -> __mmask16 {
    ((1u32 << count) - 1) as __mmask16
}

#[inline(always)]
fn mask8(count: usize) -> __mmask8 {
    ((1u32 << count) - 1) as __mmask8
}

impl Vector<f32> for F32x16 {
    const L: usize = 16;
    #[inline(always)]
    fn zero() -> Self {
        F32x16(unsafe { _mm512_setzero_ps() })
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        F32x16(unsafe { _mm512_set1_ps(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        F32x16(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, count: usize) -> Self {
        // Masked-out lanes read as +0.0 and are never touched in memory.
        F32x16(_mm512_maskz_loadu_ps(mask16(count), p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_storeu_ps(p, self.0)
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f32, count: usize) {
        _mm512_mask_storeu_ps(p, mask16(count), self.0)
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        F32x16(unsafe { _mm512_fmadd_ps(a.0, b.0, c.0) })
    }
}

impl Vector<f64> for F64x8 {
    const L: usize = 8;
    #[inline(always)]
    fn zero() -> Self {
        F64x8(unsafe { _mm512_setzero_pd() })
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        F64x8(unsafe { _mm512_set1_pd(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> Self {
        F64x8(_mm512_loadu_pd(p))
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f64, count: usize) -> Self {
        F64x8(_mm512_maskz_loadu_pd(mask8(count), p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64) {
        _mm512_storeu_pd(p, self.0)
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut f64, count: usize) {
        _mm512_mask_storeu_pd(p, mask8(count), self.0)
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        F64x8(unsafe { _mm512_fmadd_pd(a.0, b.0, c.0) })
    }
}

/// The lane partials of two dot-form output elements in one 512-bit
/// register: lanes `0..H` for the first, `H..2H` for the second
/// (`H` = [`GemmFloat::LANES`]).
pub trait Pairs<T: GemmFloat>: Copy {
    fn zero() -> Self;
    /// `2H` packed values.
    /// # Safety
    /// `p` points to `2H` readable elements.
    unsafe fn load(p: *const T) -> Self;
    /// `H` values into both halves.
    /// # Safety
    /// `p` points to `H` readable elements.
    unsafe fn broadcast(p: *const T) -> Self;
    /// The first `count < H` values into both halves, the other lanes `+0.0`.
    /// # Safety
    /// `p` points to `count` readable elements.
    unsafe fn broadcast_partial(p: *const T, count: usize) -> Self;
    /// `a * b + c` lane-wise, one rounding.
    fn mul_add(a: Self, b: Self, c: Self) -> Self;
    /// The pairwise trees of eight registers (matrix rows `r = 0..8` against
    /// one pair of vectors): stores row `r`'s result for the first vector to
    /// `first[r]` and for the second to `second[r]`.
    /// # Safety
    /// `first` and `second` point to 8 writable elements each.
    unsafe fn trees8(acc: &[Self; 8], first: *mut T, second: *mut T);
}

/// Two 8-lane `f32` partial sets.
#[derive(Clone, Copy)]
pub struct F32Pairs(__m512);

/// Two 4-lane `f64` partial sets.
#[derive(Clone, Copy)]
pub struct F64Pairs(__m512d);

/// Where output `x` of [`F32Pairs::trees8`]'s last sum sits: lane `4 (x mod 4) + x / 4`;
/// the index puts `(row t, first vector) = x = 2t` in lane `t` and
/// `(row t, second vector) = 2t + 1` in lane `8 + t`.
const F32_ORDER: [i32; 16] = {
    let mut idx = [0i32; 16];
    let mut t = 0;
    while t < 16 {
        let x = if t < 8 { 2 * t } else { 2 * (t - 8) + 1 };
        idx[t] = (4 * (x % 4) + x / 4) as i32;
        t += 1;
    }
    idx
};

/// As [`F32_ORDER`] for four registers of `f64` pairs: output `x` (of 8)
/// sits in lane `2 (x mod 4) + x / 4`.
const F64_ORDER: [i64; 8] = {
    let mut idx = [0i64; 8];
    let mut t = 0;
    while t < 8 {
        let x = if t < 4 { 2 * t } else { 2 * (t - 4) + 1 };
        idx[t] = (2 * (x % 4) + x / 4) as i64;
        t += 1;
    }
    idx
};

impl Pairs<f32> for F32Pairs {
    #[inline(always)]
    fn zero() -> Self {
        F32Pairs(unsafe { _mm512_setzero_ps() })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        F32Pairs(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> Self {
        F32Pairs(_mm512_broadcast_f32x8(_mm256_loadu_ps(p)))
    }
    #[inline(always)]
    unsafe fn broadcast_partial(p: *const f32, count: usize) -> Self {
        let half = _mm256_maskz_loadu_ps(mask8(count), p);
        F32Pairs(_mm512_broadcast_f32x8(half))
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        F32Pairs(unsafe { _mm512_fmadd_ps(a.0, b.0, c.0) })
    }
    #[inline(always)]
    unsafe fn trees8(acc: &[Self; 8], first: *mut f32, second: *mut f32) {
        // Register i holds outputs o(2i) (lanes 0..8) and o(2i+1) (8..16),
        // four 128-bit blocks: [o(2i) q0..4, o(2i) q4..8, o(2i+1) q0..4, o(2i+1) q4..8].
        // Step 1, q(l) + q(l+4): registers i, i+1 -> blocks [o(2i).. o(2i+3)].
        let step1 = |a: __m512, b: __m512| {
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x88>(a, b),
                _mm512_shuffle_f32x4::<0xDD>(a, b),
            )
        };
        let s0 = step1(acc[0].0, acc[1].0); // o0..o4
        let s1 = step1(acc[2].0, acc[3].0); // o4..o8
        let s2 = step1(acc[4].0, acc[5].0); // o8..o12
        let s3 = step1(acc[6].0, acc[7].0); // o12..o16
                                            // Step 2, a(l) + a(l+2): block j = [b0, b1 of o(j), b0, b1 of o(4+j)].
        let step2 = |a: __m512, b: __m512| {
            _mm512_add_ps(
                _mm512_shuffle_ps::<0x44>(a, b),
                _mm512_shuffle_ps::<0xEE>(a, b),
            )
        };
        let t0 = step2(s0, s1); // o0..o8
        let t1 = step2(s2, s3); // o8..o16
                                // Step 3, b0 + b1: block j = [o(j), o(4+j), o(8+j), o(12+j)].
        let sums = _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(t0, t1),
            _mm512_shuffle_ps::<0xDD>(t0, t1),
        );
        let order = _mm512_loadu_si512(F32_ORDER.as_ptr() as *const _);
        let sorted = _mm512_permutexvar_ps(order, sums);
        _mm256_storeu_ps(first, _mm512_castps512_ps256(sorted));
        _mm256_storeu_ps(second, _mm512_extractf32x8_ps::<1>(sorted));
    }
}

impl F64Pairs {
    /// The trees of four registers (rows 0..4): `first[0..4]`, `second[0..4]`.
    #[inline(always)]
    unsafe fn trees4(acc: &[F64Pairs], first: *mut f64, second: *mut f64) {
        // Register i: blocks [o(2i) q0 q1, o(2i) q2 q3, o(2i+1) q0 q1, o(2i+1) q2 q3].
        // Step 1, q(l) + q(l+2): registers i, i+1 -> blocks [o(2i) .. o(2i+3)].
        let step1 = |a: __m512d, b: __m512d| {
            _mm512_add_pd(
                _mm512_shuffle_f64x2::<0x88>(a, b),
                _mm512_shuffle_f64x2::<0xDD>(a, b),
            )
        };
        let s0 = step1(acc[0].0, acc[1].0); // o0..o4
        let s1 = step1(acc[2].0, acc[3].0); // o4..o8
                                            // Step 2, a0 + a1: block j = [o(j), o(4+j)].
        let sums = _mm512_add_pd(
            _mm512_shuffle_pd::<0x00>(s0, s1),
            _mm512_shuffle_pd::<0xFF>(s0, s1),
        );
        let order = _mm512_loadu_si512(F64_ORDER.as_ptr() as *const _);
        let sorted = _mm512_permutexvar_pd(order, sums);
        _mm256_storeu_pd(first, _mm512_castpd512_pd256(sorted));
        _mm256_storeu_pd(second, _mm512_extractf64x4_pd::<1>(sorted));
    }
}

impl Pairs<f64> for F64Pairs {
    #[inline(always)]
    fn zero() -> Self {
        F64Pairs(unsafe { _mm512_setzero_pd() })
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> Self {
        F64Pairs(_mm512_loadu_pd(p))
    }
    #[inline(always)]
    unsafe fn broadcast(p: *const f64) -> Self {
        F64Pairs(_mm512_broadcast_f64x4(_mm256_loadu_pd(p)))
    }
    #[inline(always)]
    unsafe fn broadcast_partial(p: *const f64, count: usize) -> Self {
        let half = _mm256_maskz_loadu_pd(mask8(count), p);
        F64Pairs(_mm512_broadcast_f64x4(half))
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        F64Pairs(unsafe { _mm512_fmadd_pd(a.0, b.0, c.0) })
    }
    #[inline(always)]
    unsafe fn trees8(acc: &[Self; 8], first: *mut f64, second: *mut f64) {
        Self::trees4(&acc[..4], first, second);
        Self::trees4(&acc[4..], first.add(4), second.add(4));
    }
}

/// Matrix rows per tile of [`matvec`].
const ROWS: usize = 8;
/// Vector pairs per tile of [`matvec`] (6 vectors): 24 accumulators, 3
/// pair loads and one broadcast live, within the 32 registers.
const PAIRS: usize = 3;
/// Elements of the stack buffer the vectors are packed into.
const PACK: usize = 4096;

/// Whether [`matvec`] handles inner length `k` (not empty, and a tile's six
/// packed vectors fit the stack buffer); otherwise the caller runs the AVX2 kernel.
pub fn matvec_fits(k: usize, lanes: usize) -> bool {
    k > 0 && 2 * PAIRS * k.div_ceil(lanes) * lanes <= PACK
}

/// Packs vectors `b0..b0 + 2 * pairs` of `vs` (each `k` long) into `dst`:
/// pair `q`, chunk `c` is `2H` values, the chunk of vector `b0 + 2q` then
/// that of `b0 + 2q + 1`, padded with `+0.0` past `k`.
#[inline(always)]
fn pack<T: GemmFloat>(vs: &[T], k: usize, b0: usize, pairs: usize, dst: &mut [T]) {
    let h = T::LANES;
    let chunks = k.div_ceil(h);
    for q in 0..pairs {
        for half in 0..2 {
            let v = &vs[(b0 + 2 * q + half) * k..(b0 + 2 * q + half + 1) * k];
            let at = |c: usize| (q * chunks + c) * 2 * h + half * h;
            // Whole chunks copy a constant length (inlined vector moves,
            // not a call per chunk); the last, partial one is padded.
            for c in 0..k / h {
                dst[at(c)..at(c) + h].copy_from_slice(&v[c * h..(c + 1) * h]);
            }
            if !k.is_multiple_of(h) {
                let (c, tail) = (k / h, k % h);
                dst[at(c)..at(c) + tail].copy_from_slice(&v[c * h..k]);
                dst[at(c) + tail..at(c) + h].fill(T::ACC_ZERO);
            }
        }
    }
}

/// The dot products of matrix rows `i0..i0 + 8` with the `2 * PAIRS` packed
/// vectors at `packed` (vectors `b0..`), into `out` (`. x rows`).
///
/// # Safety
/// The rows exist in `m` (`. x k`), `packed` holds `PAIRS` packed pairs of
/// `k.div_ceil(H)` chunks, and `out` holds the vectors' rows.
#[allow(clippy::needless_range_loop)] // tiles index several arrays at once
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pair_tile<T: GemmFloat, P: Pairs<T>>(
    m: *const T,
    k: usize,
    i0: usize,
    packed: *const T,
    out: *mut T,
    rows: usize,
    b0: usize,
) {
    let h = T::LANES;
    let chunks = k.div_ceil(h);
    let full = k / h;
    let mut acc = [[P::zero(); ROWS]; PAIRS];
    let mut mrow = [m; ROWS];
    for r in 0..ROWS {
        mrow[r] = m.add((i0 + r) * k);
    }
    for c in 0..chunks {
        let mut x = [P::zero(); PAIRS];
        for q in 0..PAIRS {
            x[q] = P::load(packed.add((q * chunks + c) * 2 * h));
        }
        for r in 0..ROWS {
            let mr = if c < full {
                P::broadcast(mrow[r].add(c * h))
            } else {
                P::broadcast_partial(mrow[r].add(c * h), k - c * h)
            };
            for q in 0..PAIRS {
                acc[q][r] = P::mul_add(mr, x[q], acc[q][r]);
            }
        }
    }
    for q in 0..PAIRS {
        let first = out.add((b0 + 2 * q) * rows + i0);
        let second = out.add((b0 + 2 * q + 1) * rows + i0);
        P::trees8(&acc[q], first, second);
    }
}

/// `matvec_into` on AVX-512 (`matvec_fits(k)` holds): tiles of 8 rows by 6
/// vectors in pairs; the rows and vectors left over run on the AVX2
/// kernel's dot tiles `V` (the vectors together: [`left_over`]), whose
/// elements have the same bits.
#[inline(always)]
pub fn matvec<T: GemmFloat, P: Pairs<T>, V: super::DotVector<T>>(
    m: &[T],
    rows: usize,
    k: usize,
    vs: &[T],
    n: usize,
    out: &mut [T],
) {
    let h = T::LANES;
    let chunks = k.div_ceil(h);
    let tile_vectors = 2 * PAIRS;
    let tile_len = PAIRS * chunks * 2 * h;
    let n_tiled = n / tile_vectors * tile_vectors;
    let (mp, vp, op) = (m.as_ptr(), vs.as_ptr(), out.as_mut_ptr());
    if n_tiled == 0 {
        // Fewer vectors than a tile (a product of a few members): no
        // packing buffer to clear, each row read once for all of them.
        // SAFETY: the public function checked m (rows x k), vs (n x k),
        // out (n x rows).
        unsafe { left_over::<T, V>(mp, rows, k, (0, rows), vp, (0, n), op) };
        return;
    }
    let mut buffer = [T::ACC_ZERO; PACK];
    // Vectors in blocks that fill the buffer (about 16 KiB of f32, kept in
    // L1), matrix rows in blocks of about 128 KiB (kept in L2).
    let per_block = (PACK / tile_len).max(1);
    let row_bytes = k.max(1) * std::mem::size_of::<T>();
    let row_block = ((128 * 1024 / row_bytes) / ROWS * ROWS).max(ROWS);
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + row_block).min(rows);
        let mut b0 = 0;
        while b0 < n_tiled {
            let tiles = ((n_tiled - b0) / tile_vectors).min(per_block);
            for t in 0..tiles {
                let at = t * tile_len;
                pack(
                    vs,
                    k,
                    b0 + t * tile_vectors,
                    PAIRS,
                    &mut buffer[at..at + tile_len],
                );
            }
            let b1 = b0 + tiles * tile_vectors;
            let mut i = r0;
            // SAFETY: the public function checked m (rows x k), vs (n x k),
            // out (n x rows); the buffer holds `tiles` packed tiles.
            unsafe {
                while i + ROWS <= r1 {
                    for t in 0..tiles {
                        let packed = buffer.as_ptr().add(t * tile_len);
                        pair_tile::<T, P>(mp, k, i, packed, op, rows, b0 + t * tile_vectors);
                    }
                    i += ROWS;
                }
                while i < r1 {
                    matvec_row_tile::<T, V, 1>(mp, rows, k, i, vp, b0, b1, op);
                    i += 1;
                }
            }
            b0 = b1;
        }
        // SAFETY: as above, for the vectors after the tiled ones.
        unsafe { left_over::<T, V>(mp, rows, k, (r0, r1), vp, (n_tiled, n), op) };
        r0 = r1;
    }
}

/// Rows `r0..r1` against the vectors `b0..b1` left after the tiles (fewer
/// than six), each row read once for all of them, in tiles whose
/// accumulators the 32 registers hold (one vector: the AVX2 kernel's
/// tiles).
///
/// # Safety
/// As `matvec_row_tile`, for every row and vector named.
#[inline(always)]
unsafe fn left_over<T: GemmFloat, V: super::DotVector<T>>(
    mp: *const T,
    rows: usize,
    k: usize,
    (r0, r1): (usize, usize),
    vp: *const T,
    (b0, b1): (usize, usize),
    op: *mut T,
) {
    let rows_of = (r0, r1);
    match b1 - b0 {
        0 => {}
        2 => few_vectors::<T, V, 8, 2>(mp, rows, k, rows_of, vp, b0, op),
        3 => few_vectors::<T, V, 8, 3>(mp, rows, k, rows_of, vp, b0, op),
        4 => few_vectors::<T, V, 6, 4>(mp, rows, k, rows_of, vp, b0, op),
        5 => few_vectors::<T, V, 4, 5>(mp, rows, k, rows_of, vp, b0, op),
        // One vector (fewer than a tile's six are left).
        _ => one_at_a_time::<T, V>(mp, rows, k, rows_of, vp, (b0, b1), op),
    }
}
