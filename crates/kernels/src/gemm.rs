//! Deterministic float products for one member or many: `dot`, a shared
//! matrix times many vectors (`matvec_into`, `vecmat_into`), `matmul_into`
//! and its batched forms, and the lane-ordered `sum` of the reductions.
//!
//! **The order of every output element is fixed**, whatever the batch size,
//! the sub-range of the batch a thread computes, the tile the element falls
//! in, and the CPU path ([`Path`]: AVX-512, AVX2+FMA, NEON or portable,
//! chosen at run time; `*_into_on` force one), so a member's result has the same bits
//! in every executor:
//!
//! - dot form (`dot`, `matvec_into`, `sum`): element `p` of the summed index
//!   goes to lane partial `p mod L` (`L` = [`GemmFloat::LANES`]: 8 for `f32`,
//!   4 for `f64`), each partial accumulates with `mul_add` in increasing `p`
//!   from `+0.0` over the operands padded with `+0.0` to a multiple of `L`
//!   (the padding can only turn a `-0.0` partial into `+0.0`), and the `L`
//!   partials are added in a fixed pairwise tree (lane `l` plus lane
//!   `l + L/2`, then again, down to one).
//! - axpy form (`vecmat_into`, `matmul_into`): `out[b][j]` starts at `+0.0`
//!   and accumulates `mul_add(x[b][i], mat[i][j], acc)` in increasing `i`.
//!
//! Every multiply feeding an add is a `mul_add`, exactly rounded in hardware
//! and in software, and Rust neither contracts nor reassociates floats, so
//! the generic source compiled inside `#[target_feature(enable = "avx2,fma")]`
//! functions (chosen at run time), on NEON registers ([`neon`], aarch64) and
//! the portable fallback agree bit for bit.
//! The AVX-512 path ([`avx512`]) runs the axpy form on 512-bit vectors (it is
//! lane-wise) and keeps the dot form's `L` partials by holding two output
//! elements' partials per 512-bit register (tests/gemm_paths.rs compares
//! the paths). `dot` and `sum` stay on AVX2 (one output element each).
//! Speed comes from register tiles (several matrix rows times several vectors
//! in `matvec_into`, several vectors times several column chunks in
//! `vecmat_into`) and cache blocking, which change only which elements are
//! computed together, never the order within one element.
//!
//! Layouts are row-major; batched operands are contiguous `[batch, ...]`
//! buffers. A caller that splits a batch over threads passes each thread
//! its sub-slices (`vs[lo*k..hi*k]`, `out[lo*rows..hi*rows]`): the same bits
//! as computing the whole batch. Nothing here allocates (the AVX-512 matvec
//! packs its vectors into a buffer on the stack, per call: no shared matrix
//! is ever repacked, so there is nothing to cache across calls). Lengths that do not
//! match the stated shapes are a caller bug (an internal-error panic).

use std::fmt::Debug;
use std::ops::{Add, Mul, Sub};

use crate::internal_error;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The element types of the products: `f32` and `f64`.
pub trait GemmFloat:
    sealed::Sealed
    + Copy
    + Debug
    + PartialEq
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
{
    /// `+0.0`.
    const ACC_ZERO: Self;
    /// The number of lane partial sums of the dot form (one 256-bit register).
    const LANES: usize;
    /// `self * b + c` with one rounding (`mul_add`).
    fn fma(self, b: Self, c: Self) -> Self;
    /// `e^self`, the [`crate::vmath`] function of this type (inlinable here).
    #[doc(hidden)]
    fn vm_exp(self) -> Self;
    /// The portable vector backend of this type.
    #[doc(hidden)]
    type Portable: DotVector<Self>;
    /// The AVX2+FMA vector backend of this type.
    #[cfg(target_arch = "x86_64")]
    #[doc(hidden)]
    type Avx: DotVector<Self>;
    /// The AVX-512 vector backend of this type (the axpy form).
    #[cfg(target_arch = "x86_64")]
    #[doc(hidden)]
    type Avx512: Vector<Self>;
    /// The AVX-512 pairs of dot-form partials (the dot form).
    #[cfg(target_arch = "x86_64")]
    #[doc(hidden)]
    type Pairs: avx512::Pairs<Self>;
    /// The NEON vector backend of this type (two registers per vector).
    #[cfg(target_arch = "aarch64")]
    #[doc(hidden)]
    type Neon: DotVector<Self>;
}

impl GemmFloat for f32 {
    type Portable = Portable<f32, 8>;
    #[cfg(target_arch = "x86_64")]
    type Avx = avx::F32x8;
    #[cfg(target_arch = "x86_64")]
    type Avx512 = avx512::F32x16;
    #[cfg(target_arch = "x86_64")]
    type Pairs = avx512::F32Pairs;
    #[cfg(target_arch = "aarch64")]
    type Neon = neon::F32x8;
    const ACC_ZERO: Self = 0.0;
    const LANES: usize = 8;
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn vm_exp(self) -> Self {
        crate::vmath::exp_kernel(self as f64) as f32
    }
}

impl GemmFloat for f64 {
    type Portable = Portable<f64, 4>;
    #[cfg(target_arch = "x86_64")]
    type Avx = avx::F64x4;
    #[cfg(target_arch = "x86_64")]
    type Avx512 = avx512::F64x8;
    #[cfg(target_arch = "x86_64")]
    type Pairs = avx512::F64Pairs;
    #[cfg(target_arch = "aarch64")]
    type Neon = neon::F64x4;
    const ACC_ZERO: Self = 0.0;
    const LANES: usize = 4;
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn vm_exp(self) -> Self {
        crate::vmath::exp_kernel(self)
    }
}

// ---------------------------------------------------------------------------
// Shape checks.

fn product(what: &str, a: usize, b: usize) -> usize {
    a.checked_mul(b)
        .unwrap_or_else(|| internal_error(format!("gemm::{what}: {a} x {b} overflows")))
}

fn expect_len(what: &str, operand: &str, got: usize, want: usize) {
    if got != want {
        internal_error(format!(
            "gemm::{what}: {operand} has {got} elements, the shape needs {want}"
        ));
    }
}

// ---------------------------------------------------------------------------
// Vectors of lanes: the one generic kernel source runs on `[T; L]` arrays
// (portable) or on AVX registers (inside `#[target_feature]` functions).

/// `L` lanes of `T` as one value; every operation is lane-wise and exactly
/// rounded, so the backends agree bit for bit.
#[doc(hidden)]
pub trait Vector<T: GemmFloat>: Copy {
    const L: usize;
    fn zero() -> Self;
    fn splat(x: T) -> Self;
    /// # Safety
    /// `p` points to `L` readable elements.
    unsafe fn load(p: *const T) -> Self;
    /// The first `count < L` lanes from `p`, the others `+0.0`.
    /// # Safety
    /// `p` points to `count` readable elements.
    unsafe fn load_partial(p: *const T, count: usize) -> Self;
    /// # Safety
    /// `p` points to `L` writable elements.
    unsafe fn store(self, p: *mut T);
    /// The first `count < L` lanes to `p`.
    /// # Safety
    /// `p` points to `count` writable elements.
    unsafe fn store_partial(self, p: *mut T, count: usize);
    /// `a * b + c` lane-wise, one rounding.
    fn mul_add(a: Self, b: Self, c: Self) -> Self;
}

/// A [`Vector`] whose `L` is [`GemmFloat::LANES`]: it holds the lane
/// partials of one dot-form output element.
#[doc(hidden)]
pub trait DotVector<T: GemmFloat>: Vector<T> {
    /// The fixed pairwise tree: lane `l` plus lane `l + width` for `width`
    /// = L/2, L/4, ..., 1, the lower lane as the left operand.
    fn tree(self) -> T;
    /// [`Vector::tree`] of four vectors at once (the same operations).
    #[inline(always)]
    fn tree4(a: Self, b: Self, c: Self, d: Self) -> [T; 4] {
        [a.tree(), b.tree(), c.tree(), d.tree()]
    }
    /// [`Vector::tree`] of eight vectors at once (the same operations).
    #[inline(always)]
    fn tree8(v: [Self; 8]) -> [T; 8] {
        let lo = Self::tree4(v[0], v[1], v[2], v[3]);
        let hi = Self::tree4(v[4], v[5], v[6], v[7]);
        std::array::from_fn(|i| if i < 4 { lo[i] } else { hi[i - 4] })
    }
}

/// The portable backend: `L` lanes in an array.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Portable<T, const L: usize>([T; L]);

impl<T: GemmFloat, const L: usize> Vector<T> for Portable<T, L> {
    const L: usize = L;
    #[inline(always)]
    fn zero() -> Self {
        Portable([T::ACC_ZERO; L])
    }
    #[inline(always)]
    fn splat(x: T) -> Self {
        Portable([x; L])
    }
    #[inline(always)]
    unsafe fn load(p: *const T) -> Self {
        Portable(std::array::from_fn(|l| *p.add(l)))
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const T, count: usize) -> Self {
        Portable(std::array::from_fn(|l| {
            if l < count {
                *p.add(l)
            } else {
                T::ACC_ZERO
            }
        }))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut T) {
        for l in 0..L {
            *p.add(l) = self.0[l];
        }
    }
    #[inline(always)]
    unsafe fn store_partial(self, p: *mut T, count: usize) {
        for l in 0..count {
            *p.add(l) = self.0[l];
        }
    }
    #[inline(always)]
    fn mul_add(a: Self, b: Self, c: Self) -> Self {
        Portable(std::array::from_fn(|l| a.0[l].fma(b.0[l], c.0[l])))
    }
}

impl<T: GemmFloat, const L: usize> DotVector<T> for Portable<T, L> {
    #[inline(always)]
    fn tree(self) -> T {
        tree(self.0)
    }
}

#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
pub mod avx512;
mod path;

pub(crate) use path::ceiling;
pub use path::{requested_path, Path, SIMD_VARIABLE};

#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
pub mod avx;
#[cfg(target_arch = "aarch64")]
#[doc(hidden)]
pub mod neon;

// ---------------------------------------------------------------------------
// Building blocks (inline(always): compiled into each caller's target features).

/// The fixed pairwise tree over the lane partials.
#[inline(always)]
fn tree<T: GemmFloat, const L: usize>(mut w: [T; L]) -> T {
    let mut width = L;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            w[i] = w[i] + w[i + width];
        }
    }
    w[0]
}

#[inline(always)]
fn sum_l<T: GemmFloat, const L: usize>(a: &[T]) -> T {
    let mut partials = [T::ACC_ZERO; MOST_LANES];
    add_pieces_l::<T, L>(&mut partials, a);
    finish_l::<T, L>(&partials)
}

#[inline(always)]
fn sum_exp_l<T: GemmFloat, const L: usize>(a: &[T], shift: T) -> T {
    let full = a.len() / L * L;
    let mut acc = [T::ACC_ZERO; L];
    for x in a[..full].chunks_exact(L) {
        for l in 0..L {
            acc[l] = acc[l] + (x[l] - shift).vm_exp();
        }
    }
    for l in 0..a.len() - full {
        acc[l] = acc[l] + (a[full + l] - shift).vm_exp();
    }
    tree(acc)
}

/// The dot products of `MR` rows (`mp`) with `NR` vectors (`vp`), all of
/// length `k`, each in the dot-form order (the last partial chunk padded with +0.0).
///
/// # Safety
/// Every pointer points to `k` readable elements.
#[allow(clippy::needless_range_loop)] // tiles index several arrays at once
#[inline(always)]
unsafe fn dot_tile<T: GemmFloat, V: DotVector<T>, const MR: usize, const NR: usize>(
    mp: [*const T; MR],
    vp: [*const T; NR],
    k: usize,
) -> [[T; NR]; MR] {
    let mut acc = [[V::zero(); NR]; MR];
    let full = k / V::L * V::L;
    let mut p = 0;
    while p < full {
        let mut mv = [V::zero(); MR];
        for r in 0..MR {
            mv[r] = V::load(mp[r].add(p));
        }
        for v in 0..NR {
            let x = V::load(vp[v].add(p));
            for r in 0..MR {
                acc[r][v] = V::mul_add(mv[r], x, acc[r][v]);
            }
        }
        p += V::L;
    }
    if full < k {
        let rem = k - full;
        let mut mv = [V::zero(); MR];
        for r in 0..MR {
            mv[r] = V::load_partial(mp[r].add(full), rem);
        }
        for v in 0..NR {
            let x = V::load_partial(vp[v].add(full), rem);
            for r in 0..MR {
                acc[r][v] = V::mul_add(mv[r], x, acc[r][v]);
            }
        }
    }
    // The trees of the tile's outputs (row-major), eight at once, then
    // four, then one by one: which outputs share the tree instructions
    // changes nothing in any output's additions.
    let mut result = [[T::ACC_ZERO; NR]; MR];
    let at = |o: usize| (o / NR, o % NR);
    let mut o = 0;
    while o + 8 <= MR * NR {
        let t = V::tree8(std::array::from_fn(|i| {
            let (r, v) = at(o + i);
            acc[r][v]
        }));
        for (i, x) in t.into_iter().enumerate() {
            let (r, v) = at(o + i);
            result[r][v] = x;
        }
        o += 8;
    }
    if o + 4 <= MR * NR {
        let [a, b, c, d] = std::array::from_fn(|i| {
            let (r, v) = at(o + i);
            acc[r][v]
        });
        for (i, x) in V::tree4(a, b, c, d).into_iter().enumerate() {
            let (r, v) = at(o + i);
            result[r][v] = x;
        }
        o += 4;
    }
    while o < MR * NR {
        let (r, v) = at(o);
        result[r][v] = acc[r][v].tree();
        o += 1;
    }
    result
}

#[inline(always)]
fn dot_v<T: GemmFloat, V: DotVector<T>>(a: &[T], b: &[T]) -> T {
    // SAFETY: both slices have a.len() elements (checked by the public function).
    unsafe { dot_tile::<T, V, 1, 1>([a.as_ptr()], [b.as_ptr()], a.len())[0][0] }
}

const MV_MR: usize = 3;
const MV_NR: usize = 4;
/// Rows of a tile against one vector (the vector left over from groups
/// of [`MV_NR`], or a call's only one): eight independent
/// accumulators keep both FMA units busy through the FMA's latency, where
/// [`MV_MR`] would leave the single vector's three chains waiting.
const MV_MR_ONE: usize = 8;
/// Rows of a tile against two vectors ([`few_vectors`]) with 16 vector
/// registers (AVX2): 8 accumulators, four row loads and one vector load
/// live; three vectors take [`MV_MR`] rows (9 accumulators: four rows'
/// 12 would spill). With 32 (AVX-512), `avx512::matvec` takes more.
const MV_MR_FEW: usize = 4;

/// The dot products of rows `i0..i0 + MR` of `m` with vectors `b..b + NR`
/// of `vs`, written to `out` (`. x rows`).
///
/// # Safety
/// Those rows and vectors exist, and `out` holds `(b + NR) * rows` elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn matvec_tile<T: GemmFloat, V: DotVector<T>, const MR: usize, const NR: usize>(
    m: *const T,
    rows: usize,
    k: usize,
    i0: usize,
    vs: *const T,
    b: usize,
    out: *mut T,
) {
    let mut mp = [m; MR];
    for (r, p) in mp.iter_mut().enumerate() {
        *p = m.add((i0 + r) * k);
    }
    let mut vp = [vs; NR];
    for (v, p) in vp.iter_mut().enumerate() {
        *p = vs.add((b + v) * k);
    }
    let d = dot_tile::<T, V, MR, NR>(mp, vp, k);
    for (r, row) in d.iter().enumerate() {
        for (v, x) in row.iter().enumerate() {
            *out.add((b + v) * rows + i0 + r) = *x;
        }
    }
}

/// # Safety
/// Rows `i0..i0 + MR` of `m` and vectors `b_start..b_end` of `vs` exist, and
/// `out` holds `b_end * rows` elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matvec_row_tile<T: GemmFloat, V: DotVector<T>, const MR: usize>(
    m: *const T,
    rows: usize,
    k: usize,
    i0: usize,
    vs: *const T,
    b_start: usize,
    b_end: usize,
    out: *mut T,
) {
    let mut b = b_start;
    while b + MV_NR <= b_end {
        matvec_tile::<T, V, MR, MV_NR>(m, rows, k, i0, vs, b, out);
        b += MV_NR;
    }
    while b < b_end {
        matvec_tile::<T, V, MR, 1>(m, rows, k, i0, vs, b, out);
        b += 1;
    }
}

/// Rows `r0..r1` of `m` against the vectors `b0..b1` of `vs`: groups of
/// [`MV_NR`] vectors against tiles of [`MV_MR`] rows, then the vectors
/// left: two or three together against tiles of `FEW` rows
/// ([`few_vectors`]; a product batching a few members' vectors is this
/// case), one against tiles of [`MV_MR_ONE`] rows, then of 4, then single
/// rows.
///
/// # Safety
/// As [`matvec_row_tile`], for every row and vector named.
#[inline(always)]
pub(crate) unsafe fn matvec_rows<T: GemmFloat, V: DotVector<T>>(
    m: *const T,
    rows: usize,
    k: usize,
    (r0, r1): (usize, usize),
    vs: *const T,
    (b0, b1): (usize, usize),
    out: *mut T,
) {
    let grouped = b0 + (b1 - b0) / MV_NR * MV_NR;
    if grouped > b0 {
        let mut i = r0;
        while i + MV_MR <= r1 {
            matvec_row_tile::<T, V, MV_MR>(m, rows, k, i, vs, b0, grouped, out);
            i += MV_MR;
        }
        while i < r1 {
            matvec_row_tile::<T, V, 1>(m, rows, k, i, vs, b0, grouped, out);
            i += 1;
        }
    }
    match b1 - grouped {
        0 => {}
        2 => few_vectors::<T, V, MV_MR_FEW, 2>(m, rows, k, (r0, r1), vs, grouped, out),
        3 => few_vectors::<T, V, MV_MR, 3>(m, rows, k, (r0, r1), vs, grouped, out),
        _ => one_at_a_time::<T, V>(m, rows, k, (r0, r1), vs, (grouped, b1), out),
    }
}

/// Rows `r0..r1` of `m` against the vectors `b0..b1` of `vs` one vector
/// at a time: tiles of [`MV_MR_ONE`] rows, then of 4, then single rows.
///
/// # Safety
/// As [`matvec_row_tile`], for every row and vector named.
#[inline(always)]
pub(crate) unsafe fn one_at_a_time<T: GemmFloat, V: DotVector<T>>(
    m: *const T,
    rows: usize,
    k: usize,
    (r0, r1): (usize, usize),
    vs: *const T,
    (b0, b1): (usize, usize),
    out: *mut T,
) {
    let mut i = r0;
    while i + MV_MR_ONE <= r1 {
        matvec_row_tile::<T, V, MV_MR_ONE>(m, rows, k, i, vs, b0, b1, out);
        i += MV_MR_ONE;
    }
    if i + 4 <= r1 {
        matvec_row_tile::<T, V, 4>(m, rows, k, i, vs, b0, b1, out);
        i += 4;
    }
    while i < r1 {
        matvec_row_tile::<T, V, 1>(m, rows, k, i, vs, b0, b1, out);
        i += 1;
    }
}

/// Rows `r0..r1` of `m` against the `NR` vectors from `b0` of `vs`, all
/// at once: tiles of `MR` rows, then single rows. Each
/// row is loaded once for the `NR` vectors, where one vector at a time
/// would load it `NR` times (the same bits: each element is its own
/// accumulator in [`dot_tile`]).
///
/// # Safety
/// As [`matvec_row_tile`], for every row named and vectors `b0..b0 + NR`.
#[inline(always)]
pub(crate) unsafe fn few_vectors<
    T: GemmFloat,
    V: DotVector<T>,
    const MR: usize,
    const NR: usize,
>(
    m: *const T,
    rows: usize,
    k: usize,
    (r0, r1): (usize, usize),
    vs: *const T,
    b0: usize,
    out: *mut T,
) {
    let mut i = r0;
    while i + MR <= r1 {
        matvec_tile::<T, V, MR, NR>(m, rows, k, i, vs, b0, out);
        i += MR;
    }
    while i < r1 {
        matvec_tile::<T, V, 1, NR>(m, rows, k, i, vs, b0, out);
        i += 1;
    }
}

#[inline(always)]
fn matvec_v<T: GemmFloat, V: DotVector<T>>(
    m: &[T],
    rows: usize,
    k: usize,
    vs: &[T],
    n: usize,
    out: &mut [T],
) {
    // Rows of the matrix in blocks of about 128 KiB (kept in L2), vectors in
    // blocks of about 16 KiB (kept in L1) while the row tiles of the row
    // block pass over them.
    let row_bytes = k.max(1) * std::mem::size_of::<T>();
    // (A multiple of both row tiles' heights.)
    let tiles = MV_MR * MV_MR_ONE;
    let row_block = ((128 * 1024 / row_bytes) / tiles * tiles).max(tiles);
    let vec_block = ((16 * 1024 / row_bytes) / MV_NR * MV_NR).max(MV_NR);
    let (mp, vp, op) = (m.as_ptr(), vs.as_ptr(), out.as_mut_ptr());
    let mut r_start = 0;
    while r_start < rows {
        let r_end = (r_start + row_block).min(rows);
        let mut b_start = 0;
        while b_start < n {
            let b_end = (b_start + vec_block).min(n);
            // SAFETY: the public function checked m (rows x k), vs (n x k), out (n x rows).
            unsafe { matvec_rows::<T, V>(mp, rows, k, (r_start, r_end), vp, (b_start, b_end), op) };
            b_start = b_end;
        }
        r_start = r_end;
    }
}

/// Accumulates rows `i0..i1` of the axpy form into the `NV x cols` tile
/// of `out` at vector `b0`, column `j0` (loaded from and stored back to
/// `out`, which holds the partial sums of the rows before `i0`); `cols` is
/// more than `(JC - 1) * L` and at most `JC * L` (the last chunk may be partial).
///
/// # Safety
/// The tile lies inside `vs` (`. x m`), `mat` (`m x k`) and `out` (`. x k`).
#[allow(clippy::needless_range_loop)] // tiles index several arrays at once
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn axpy_tile<T: GemmFloat, V: Vector<T>, const NV: usize, const JC: usize>(
    vs: *const T,
    mat: *const T,
    out: *mut T,
    m: usize,
    k: usize,
    (i0, i1): (usize, usize),
    b0: usize,
    j0: usize,
    cols: usize,
) {
    // Lanes of the last chunk (all of them when it is full).
    let last = cols - (JC - 1) * V::L;
    let partial = |c: usize| c == JC - 1 && last < V::L;
    let mut acc = [[V::zero(); JC]; NV];
    let mut vp = [vs; NV];
    for v in 0..NV {
        vp[v] = vs.add((b0 + v) * m);
        for c in 0..JC {
            let p = out.add((b0 + v) * k + j0 + c * V::L);
            acc[v][c] = if partial(c) {
                V::load_partial(p, last)
            } else {
                V::load(p)
            };
        }
    }
    for i in i0..i1 {
        let row = mat.add(i * k + j0);
        let mut mc = [V::zero(); JC];
        for c in 0..JC {
            mc[c] = if partial(c) {
                V::load_partial(row.add(c * V::L), last)
            } else {
                V::load(row.add(c * V::L))
            };
        }
        for v in 0..NV {
            let s = V::splat(*vp[v].add(i));
            for c in 0..JC {
                acc[v][c] = V::mul_add(s, mc[c], acc[v][c]);
            }
        }
    }
    for v in 0..NV {
        for c in 0..JC {
            let p = out.add((b0 + v) * k + j0 + c * V::L);
            if partial(c) {
                acc[v][c].store_partial(p, last);
            } else {
                acc[v][c].store(p);
            }
        }
    }
}

/// # Safety
/// As [`axpy_tile`], for all `k` columns: tiles of `JC` chunks, then one
/// tile of the chunks left (its last one possibly partial). When the
/// narrower vector `W` holds the last few columns, they run on it (a wide
/// chunk with a few lanes costs a whole one; each column's `mul_add`
/// chain, and so its bits, is the same on any width).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn axpy_columns<
    T: GemmFloat,
    V: Vector<T>,
    W: Vector<T>,
    const NV: usize,
    const JC: usize,
>(
    vs: *const T,
    mat: *const T,
    out: *mut T,
    m: usize,
    k: usize,
    rows: (usize, usize),
    b0: usize,
) {
    let l = V::L;
    let mut j = 0;
    while j + JC * l <= k {
        axpy_tile::<T, V, NV, JC>(vs, mat, out, m, k, rows, b0, j, JC * l);
        j += JC * l;
    }
    // Fewer than `JC` whole chunks are left, so only tiles of at most `JC`
    // chunks are instantiated (the `const` guard drops the others at
    // compile time).
    macro_rules! rest {
        ($vector:ty, $j:expr, $cols:expr, $($c:literal)*) => {
            match $cols.div_ceil(<$vector>::L) {
                0 => {}
                $($c if const { $c <= JC } => {
                    axpy_tile::<T, $vector, NV, $c>(vs, mat, out, m, k, rows, b0, $j, $cols)
                })*
                more => internal_error(format!("gemm: {more} chunks left of a {JC}-chunk tile")),
            }
        };
    }
    let cols = k - j;
    let tail = cols % l;
    if W::L < l && tail != 0 && tail <= W::L {
        let whole = cols - tail;
        rest!(V, j, whole, 1 2 3 4 5 6 7);
        rest!(W, j + whole, tail, 1);
    } else {
        rest!(V, j, cols, 1 2 3 4 5 6 7);
    }
}

/// [`axpy_columns`] for a tile of `NV = 2 HV` vectors whose `k` columns
/// end at most one chunk past a whole number of `JC`-chunk tiles (at
/// D = 100: four `f32` columns past 96, one `f64` chunk past 96): the last
/// whole tile and those columns run as two tiles of `HV` vectors by `JT =
/// JC + 1` chunks, where a tile of `NV` vectors by one chunk would leave
/// only `NV` accumulator chains to wait on the FMA's latency row after row.
/// Any other shape (or `HV`, `JT` not so) runs [`axpy_columns`]. Only which
/// columns run together changes: each column's `mul_add` chain is the same.
///
/// # Safety
/// As [`axpy_columns`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn axpy_columns_split<
    T: GemmFloat,
    V: Vector<T>,
    const NV: usize,
    const JC: usize,
    const HV: usize,
    const JT: usize,
>(
    vs: *const T,
    mat: *const T,
    out: *mut T,
    m: usize,
    k: usize,
    rows: (usize, usize),
    b0: usize,
) {
    let (l, span) = (V::L, JC * V::L);
    let left = k % span;
    if HV * 2 != NV || JT != JC + 1 || left == 0 || left > l || k < span + left {
        return axpy_columns::<T, V, V, NV, JC>(vs, mat, out, m, k, rows, b0);
    }
    let tail = k - span - left;
    let mut j = 0;
    while j < tail {
        axpy_tile::<T, V, NV, JC>(vs, mat, out, m, k, rows, b0, j, span);
        j += span;
    }
    for half in [b0, b0 + HV] {
        axpy_tile::<T, V, HV, JT>(vs, mat, out, m, k, rows, half, tail, k - tail);
    }
}

/// The axpy form with tiles of `NV` vectors by `JC` chunks, then the
/// vectors left: three at a time by `JC3` chunks, two by `JC2`, one by
/// `JC1` (a product batching a few members' vectors reads each row once
/// for all of them). `HV`, `JT`: the tiles of `NV` vectors end as
/// [`axpy_columns_split`] says (0, 0: as [`axpy_columns`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn vecmat_v<
    T: GemmFloat,
    V: Vector<T>,
    W: Vector<T>,
    const NV: usize,
    const JC: usize,
    const JC3: usize,
    const JC2: usize,
    const JC1: usize,
    const HV: usize,
    const JT: usize,
    const ADD: bool,
>(
    vs: &[T],
    mat: &[T],
    n: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    // `ADD`: each element goes on from its value (see [`vecmat_add_into`]).
    if !ADD {
        out.fill(T::ACC_ZERO);
    }
    if m == 0 || k == 0 {
        return;
    }
    // Rows of the matrix in blocks of about 128 KiB (kept in L2 while every
    // vector tile passes over them); the partial sums wait in `out`.
    let block = (128 * 1024 / (k * std::mem::size_of::<T>())).max(8);
    let (vp, mp, op) = (vs.as_ptr(), mat.as_ptr(), out.as_mut_ptr());
    let mut i0 = 0;
    while i0 < m {
        let i1 = (i0 + block).min(m);
        let mut b = 0;
        // SAFETY: the public function checked vs (n x m), mat (m x k), out (n x k).
        unsafe {
            while b + NV <= n {
                if HV == 0 {
                    axpy_columns::<T, V, W, NV, JC>(vp, mp, op, m, k, (i0, i1), b);
                } else {
                    axpy_columns_split::<T, V, NV, JC, HV, JT>(vp, mp, op, m, k, (i0, i1), b);
                }
                b += NV;
            }
            while b + 3 <= n {
                axpy_columns::<T, V, W, 3, JC3>(vp, mp, op, m, k, (i0, i1), b);
                b += 3;
            }
            if b + 2 <= n {
                axpy_columns::<T, V, W, 2, JC2>(vp, mp, op, m, k, (i0, i1), b);
                b += 2;
            }
            while b < n {
                axpy_columns::<T, V, W, 1, JC1>(vp, mp, op, m, k, (i0, i1), b);
                b += 1;
            }
        }
        i0 = i1;
    }
}

/// The axpy form on the portable or AVX2 backend: 6 vectors x 2 column
/// chunks, 12 accumulators, 2 row loads and 6 broadcasts per row, within
/// the 16 AVX registers (3 x 3, 2 x 4 and 1 x 7 for the vectors left; a
/// last tile of one chunk as two of 3 x 3, [`axpy_columns_split`]).
#[inline(always)]
fn vecmat_narrow<T: GemmFloat, V: Vector<T>, const ADD: bool>(
    vs: &[T],
    mat: &[T],
    n: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    vecmat_v::<T, V, V, 6, 2, 3, 4, 7, 3, 3, ADD>(vs, mat, n, m, k, out)
}

/// The axpy form on AVX-512: 6 vectors x 4 chunks of 16 (`f32`) or 8
/// (`f64`) lanes, 24 accumulators, within the 32 registers (3 x 6, 2 x 7
/// and 1 x 7 for the vectors left); the last few columns on 256-bit
/// vectors `W`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn vecmat_wide<T: GemmFloat, V: Vector<T>, W: Vector<T>, const ADD: bool>(
    vs: &[T],
    mat: &[T],
    n: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    vecmat_v::<T, V, W, 6, 4, 6, 7, 7, 0, 0, ADD>(vs, mat, n, m, k, out)
}

// ---------------------------------------------------------------------------
// Dispatch on the lane count and on the CPU.

macro_rules! lanes {
    ($T:ty, $f:ident ( $($arg:expr),* )) => {
        match <$T as GemmFloat>::LANES {
            4 => $f::<$T, 4>($($arg),*),
            8 => $f::<$T, 8>($($arg),*),
            other => internal_error(format!("gemm: no kernel for {other} lanes")),
        }
    };
}

macro_rules! dispatched {
    ($(fn $name:ident<T>($($arg:ident: $ty:ty),*) -> $ret:ty = $kernel:ident;)*) => {
        $(
            #[inline]
            fn $name<T: GemmFloat>($($arg: $ty),*) -> $ret {
                #[inline(always)]
                fn portable<T: GemmFloat>($($arg: $ty),*) -> $ret {
                    lanes!(T, $kernel($($arg),*))
                }
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn fast<T: GemmFloat>($($arg: $ty),*) -> $ret {
                        portable::<T>($($arg),*)
                    }
                    if crate::vmath::fast_path_available() {
                        // SAFETY: the CPU has AVX2 and FMA.
                        return unsafe { fast::<T>($($arg),*) };
                    }
                }
                portable::<T>($($arg),*)
            }
        )*
    };
}

dispatched! {
    fn sum_any<T>(a: &[T]) -> T = sum_l;
    fn sum_exp_any<T>(a: &[T], shift: T) -> T = sum_exp_l;
    fn add_pieces_any<T>(partials: &mut [T; MOST_LANES], a: &[T]) -> () = add_pieces_l;
}

/// The products on a given path (available on this CPU): the `avx2` kernel
/// on AVX2 and FMA, the `avx512` one on AVX-512, the `neon` one on NEON,
/// else the portable one.
macro_rules! path_dispatched {
    ($(fn $name:ident<T>($($arg:ident: $ty:ty),*)
        = $portable:expr, $avx2:expr, $avx512:expr, $neon:expr;)*) => {
        $(
            #[inline]
            fn $name<T: GemmFloat>(path: Path, $($arg: $ty),*) {
                #[cfg(target_arch = "aarch64")]
                if path == Path::Neon {
                    return $neon($($arg),*);
                }
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn avx2<T: GemmFloat>($($arg: $ty),*) {
                        $avx2($($arg),*)
                    }
                    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
                    unsafe fn avx512<T: GemmFloat>($($arg: $ty),*) {
                        $avx512($($arg),*)
                    }
                    match path {
                        // SAFETY: the caller checked that the CPU runs `path`.
                        Path::Avx512 => return unsafe { avx512::<T>($($arg),*) },
                        Path::Avx2 => return unsafe { avx2::<T>($($arg),*) },
                        Path::Portable | Path::Neon => {}
                    }
                }
                let _ = path;
                $portable($($arg),*)
            }
        )*
    };
}

/// `matvec_into` on AVX-512: the pairs kernel when a tile fits its buffer,
/// else a call of the AVX2 kernel (the same bits either way).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn matvec_avx512<T: GemmFloat>(m: &[T], rows: usize, k: usize, vs: &[T], n: usize, out: &mut [T]) {
    if avx512::matvec_fits(k, T::LANES) {
        avx512::matvec::<T, T::Pairs, T::Avx>(m, rows, k, vs, n, out)
    } else {
        matvec_on_path(Path::Avx2, m, rows, k, vs, n, out)
    }
}

path_dispatched! {
    fn matvec_on_path<T>(m: &[T], rows: usize, k: usize, vs: &[T], n: usize, out: &mut [T])
        = matvec_v::<T, T::Portable>, matvec_v::<T, T::Avx>, matvec_avx512::<T>,
          matvec_v::<T, T::Neon>;
    fn vecmat_on_path<T>(vs: &[T], mat: &[T], n: usize, m: usize, k: usize, out: &mut [T])
        = vecmat_narrow::<T, T::Portable, false>, vecmat_narrow::<T, T::Avx, false>,
          vecmat_wide::<T, T::Avx512, T::Avx, false>, vecmat_narrow::<T, T::Neon, false>;
    fn vecmat_add_on_path<T>(vs: &[T], mat: &[T], n: usize, m: usize, k: usize, out: &mut [T])
        = vecmat_narrow::<T, T::Portable, true>, vecmat_narrow::<T, T::Avx, true>,
          vecmat_wide::<T, T::Avx512, T::Avx, true>, vecmat_narrow::<T, T::Neon, true>;
}

/// `dot` on the AVX (or NEON) backend when the CPU has it, else the
/// portable one (one output element has no use for the wider registers).
#[inline]
fn dot_any<T: GemmFloat>(a: &[T], b: &[T]) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fast<T: GemmFloat>(a: &[T], b: &[T]) -> T {
            dot_v::<T, T::Avx>(a, b)
        }
        if crate::vmath::fast_path_available() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { fast::<T>(a, b) };
        }
    }
    #[cfg(target_arch = "aarch64")]
    if Path::Neon.available() {
        return dot_v::<T, T::Neon>(a, b);
    }
    dot_v::<T, T::Portable>(a, b)
}

fn matvec_any<T: GemmFloat>(m: &[T], rows: usize, k: usize, vs: &[T], n: usize, out: &mut [T]) {
    matvec_on_path(Path::detected(), m, rows, k, vs, n, out)
}

fn vecmat_any<T: GemmFloat>(vs: &[T], mat: &[T], n: usize, m: usize, k: usize, out: &mut [T]) {
    vecmat_on_path(Path::detected(), vs, mat, n, m, k, out)
}

// ---------------------------------------------------------------------------
// Public API.

/// `sum_p a[p] * b[p]` in the dot-form order (see the module doc).
pub fn dot<T: GemmFloat>(a: &[T], b: &[T]) -> T {
    expect_len("dot", "b", b.len(), a.len());
    dot_any(a, b)
}

/// `sum_p a[p]` in the same lane order as [`dot`] (plain adds).
pub fn sum<T: GemmFloat>(a: &[T]) -> T {
    sum_any(a)
}

/// The most lanes of any [`GemmFloat`] (`f32`'s 8).
const MOST_LANES: usize = 8;

/// A [`sum`] of one array fed a piece at a time, in order: the bits of
/// [`sum`] of the whole, as long as every piece but the last has a multiple
/// of [`LaneSum::PIECE_MULTIPLE`] elements (each piece then starts at lane
/// 0, where the whole array's element would go).
#[derive(Clone, Copy, Debug)]
pub struct LaneSum<T> {
    partials: [T; MOST_LANES],
    /// A piece that was not a multiple of the lanes came: it must be the last.
    ended: bool,
}

impl<T: GemmFloat> LaneSum<T> {
    /// Every piece but the last is a multiple of this many elements (a
    /// multiple of every type's lanes).
    pub const PIECE_MULTIPLE: usize = MOST_LANES;

    pub fn new() -> LaneSum<T> {
        LaneSum {
            partials: [T::ACC_ZERO; MOST_LANES],
            ended: false,
        }
    }

    /// Adds the next piece of the array.
    pub fn add(&mut self, piece: &[T]) {
        if self.ended {
            internal_error("LaneSum::add: a piece after a short one".into());
        }
        self.ended = !piece.len().is_multiple_of(T::LANES);
        add_pieces_any(&mut self.partials, piece);
    }

    /// The sum of the pieces added.
    pub fn finish(&self) -> T {
        lanes!(T, finish_l(&self.partials))
    }
}

impl<T: GemmFloat> Default for LaneSum<T> {
    fn default() -> LaneSum<T> {
        LaneSum::new()
    }
}

/// The loop of [`sum`]'s lane order, from given partials (their first `L`).
#[inline(always)]
fn add_pieces_l<T: GemmFloat, const L: usize>(partials: &mut [T; MOST_LANES], a: &[T]) {
    let full = a.len() / L * L;
    let mut acc = [T::ACC_ZERO; L];
    acc.copy_from_slice(&partials[..L]);
    for x in a[..full].chunks_exact(L) {
        for l in 0..L {
            acc[l] = acc[l] + x[l];
        }
    }
    for l in 0..a.len() - full {
        acc[l] = acc[l] + a[full + l];
    }
    partials[..L].copy_from_slice(&acc);
}

#[inline(always)]
fn finish_l<T: GemmFloat, const L: usize>(partials: &[T; MOST_LANES]) -> T {
    let mut acc = [T::ACC_ZERO; L];
    acc.copy_from_slice(&partials[..L]);
    tree(acc)
}

/// `sum_p e^(a[p] - shift)` in the lane order of [`sum`]: the same bits as
/// computing the exponentials with [`crate::vmath`] and then [`sum`], without
/// storing them.
pub fn sum_exp_shifted<T: GemmFloat>(a: &[T], shift: T) -> T {
    sum_exp_any(a, shift)
}

/// One shared matrix `m` (`rows x k`) times `n` vectors `vs` (`n x k`):
/// `out[b * rows + i] = dot(m[i, :], vs[b, :])`, bit-identical to [`dot`].
/// `out` has `n * rows` elements. A sub-range of the vectors gives the same bits.
pub fn matvec_into<T: GemmFloat>(
    m: &[T],
    rows: usize,
    k: usize,
    vs: &[T],
    n: usize,
    out: &mut [T],
) {
    expect_len("matvec_into", "m", m.len(), product("matvec_into", rows, k));
    expect_len("matvec_into", "vs", vs.len(), product("matvec_into", n, k));
    expect_len(
        "matvec_into",
        "out",
        out.len(),
        product("matvec_into", n, rows),
    );
    matvec_any(m, rows, k, vs, n, out)
}

/// `n` vectors `vs` (`n x m`) times one shared matrix `mat` (`m x k`):
/// `out[b * k + j] = sum_i vs[b, i] * mat[i, j]`, accumulated with `mul_add`
/// from `+0.0` in increasing `i`. `out` has `n * k` elements. A sub-range of
/// the vectors gives the same bits.
pub fn vecmat_into<T: GemmFloat>(vs: &[T], mat: &[T], n: usize, m: usize, k: usize, out: &mut [T]) {
    expect_len("vecmat_into", "vs", vs.len(), product("vecmat_into", n, m));
    expect_len(
        "vecmat_into",
        "mat",
        mat.len(),
        product("vecmat_into", m, k),
    );
    expect_len(
        "vecmat_into",
        "out",
        out.len(),
        product("vecmat_into", n, k),
    );
    vecmat_any(vs, mat, n, m, k, out)
}

/// [`vecmat_into`] that goes on from `out`: each element continues its
/// `mul_add` chain from the value `out` holds, over `mat`'s rows in
/// increasing order. `vecmat_into` of rows `0..a` of a matrix then
/// `vecmat_add_into` of rows `a..m` gives the bits of `vecmat_into` of all
/// `m` rows (the fused product chains run the product a block of rows at
/// a time this way).
pub fn vecmat_add_into<T: GemmFloat>(
    vs: &[T],
    mat: &[T],
    n: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    vecmat_add_into_on(Path::detected(), vs, mat, n, m, k, out)
}

/// [`vecmat_add_into`] on a given path (available on this CPU).
pub fn vecmat_add_into_on<T: GemmFloat>(
    path: Path,
    vs: &[T],
    mat: &[T],
    n: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    check_vecmat(
        "vecmat_add_into",
        path,
        [vs.len(), mat.len(), out.len()],
        n,
        m,
        k,
    );
    vecmat_add_on_path(path, vs, mat, n, m, k, out)
}

/// That `path` runs here and the lengths of `vs`, `mat` and `out` are
/// those of a `vecmat` of `n` vectors of `m` with an `m x k` matrix.
fn check_vecmat(what: &str, path: Path, [vs, mat, out]: [usize; 3], n: usize, m: usize, k: usize) {
    path.check(what);
    expect_len(what, "vs", vs, product(what, n, m));
    expect_len(what, "mat", mat, product(what, m, k));
    expect_len(what, "out", out, product(what, n, k));
}

/// `a` (`m x k`) times `b` (`k x n`) into `out` (`m x n`), each element
/// accumulated with `mul_add` from `+0.0` over the inner index ascending
/// (row `i` of the result is `vecmat(a[i, :], b)`).
pub fn matmul_into<T: GemmFloat>(a: &[T], b: &[T], m: usize, k: usize, n: usize, out: &mut [T]) {
    expect_len("matmul_into", "a", a.len(), product("matmul_into", m, k));
    expect_len("matmul_into", "b", b.len(), product("matmul_into", k, n));
    expect_len(
        "matmul_into",
        "out",
        out.len(),
        product("matmul_into", m, n),
    );
    vecmat_any(a, b, m, k, n, out)
}

/// A shared `a` (`m x k`) times `batch` matrices `bs` (`batch x k x n`):
/// `out[t] = a * bs[t]` (`batch x m x n`), each bit-identical to [`matmul_into`].
pub fn matmul_shared_a_into<T: GemmFloat>(
    a: &[T],
    bs: &[T],
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    out: &mut [T],
) {
    let (kn, mn) = (
        product("matmul_shared_a_into", k, n),
        product("matmul_shared_a_into", m, n),
    );
    expect_len(
        "matmul_shared_a_into",
        "bs",
        bs.len(),
        product("matmul_shared_a_into", batch, kn),
    );
    expect_len(
        "matmul_shared_a_into",
        "out",
        out.len(),
        product("matmul_shared_a_into", batch, mn),
    );
    for t in 0..batch {
        matmul_into(
            a,
            &bs[t * kn..(t + 1) * kn],
            m,
            k,
            n,
            &mut out[t * mn..(t + 1) * mn],
        );
    }
}

/// `batch` matrices `as_` (`batch x m x k`) times a shared `b` (`k x n`):
/// one product of the stacked `(batch * m) x k` rows with `b`, each member
/// bit-identical to [`matmul_into`].
pub fn matmul_shared_b_into<T: GemmFloat>(
    as_: &[T],
    b: &[T],
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    out: &mut [T],
) {
    let rows = product("matmul_shared_b_into", batch, m);
    matmul_into(as_, b, rows, k, n, out)
}

/// Per-member matrices: `out[t] = as_[t] * bs[t]`, each bit-identical to [`matmul_into`].
pub fn matmul_batched_into<T: GemmFloat>(
    as_: &[T],
    bs: &[T],
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    out: &mut [T],
) {
    let what = "matmul_batched_into";
    let (mk, kn, mn) = (
        product(what, m, k),
        product(what, k, n),
        product(what, m, n),
    );
    expect_len(what, "as_", as_.len(), product(what, batch, mk));
    expect_len(what, "bs", bs.len(), product(what, batch, kn));
    expect_len(what, "out", out.len(), product(what, batch, mn));
    for t in 0..batch {
        matmul_into(
            &as_[t * mk..(t + 1) * mk],
            &bs[t * kn..(t + 1) * kn],
            m,
            k,
            n,
            &mut out[t * mn..(t + 1) * mn],
        );
    }
}

/// Per-member matrices `ms` (`batch x rows x k`) times per-member vectors
/// `vs` (`batch x k`): `out` is `batch x rows`, each bit-identical to [`matvec_into`].
pub fn matvec_batched_into<T: GemmFloat>(
    ms: &[T],
    rows: usize,
    k: usize,
    vs: &[T],
    batch: usize,
    out: &mut [T],
) {
    let what = "matvec_batched_into";
    let rk = product(what, rows, k);
    expect_len(what, "ms", ms.len(), product(what, batch, rk));
    expect_len(what, "vs", vs.len(), product(what, batch, k));
    expect_len(what, "out", out.len(), product(what, batch, rows));
    for t in 0..batch {
        matvec_into(
            &ms[t * rk..(t + 1) * rk],
            rows,
            k,
            &vs[t * k..(t + 1) * k],
            1,
            &mut out[t * rows..(t + 1) * rows],
        );
    }
}

/// Per-member vectors `vs` (`batch x m`) times per-member matrices `mats`
/// (`batch x m x k`): `out` is `batch x k`, each bit-identical to [`vecmat_into`].
pub fn vecmat_batched_into<T: GemmFloat>(
    vs: &[T],
    mats: &[T],
    batch: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    let what = "vecmat_batched_into";
    let mk = product(what, m, k);
    expect_len(what, "vs", vs.len(), product(what, batch, m));
    expect_len(what, "mats", mats.len(), product(what, batch, mk));
    expect_len(what, "out", out.len(), product(what, batch, k));
    for t in 0..batch {
        vecmat_into(
            &vs[t * m..(t + 1) * m],
            &mats[t * mk..(t + 1) * mk],
            1,
            m,
            k,
            &mut out[t * k..(t + 1) * k],
        );
    }
}

/// Per-member dot products: `out[t] = dot(a[t*k..(t+1)*k], c[t*k..(t+1)*k])`.
/// (A shared vector against batched ones is [`matvec_into`] with `rows = 1`.)
pub fn dot_rows_into<T: GemmFloat>(a: &[T], c: &[T], k: usize, batch: usize, out: &mut [T]) {
    let what = "dot_rows_into";
    expect_len(what, "a", a.len(), product(what, batch, k));
    expect_len(what, "c", c.len(), product(what, batch, k));
    expect_len(what, "out", out.len(), batch);
    for (t, o) in out.iter_mut().enumerate() {
        *o = dot_any(&a[t * k..(t + 1) * k], &c[t * k..(t + 1) * k]);
    }
}

/// The outer product `out[i * c.len() + j] = a[i] * c[j]` (one rounding each).
pub fn outer_into<T: GemmFloat>(a: &[T], c: &[T], out: &mut [T]) {
    expect_len(
        "outer_into",
        "out",
        out.len(),
        product("outer_into", a.len(), c.len()),
    );
    if c.is_empty() {
        return;
    }
    for (&x, row) in a.iter().zip(out.chunks_exact_mut(c.len())) {
        for (o, &y) in row.iter_mut().zip(c) {
            *o = x * y;
        }
    }
}

/// [`matvec_into`] on a given CPU path; panics (an internal error) if this
/// CPU cannot run it. For the tests and benchmarks that compare the paths.
pub fn matvec_into_on<T: GemmFloat>(
    path: Path,
    m: &[T],
    rows: usize,
    k: usize,
    vs: &[T],
    n: usize,
    out: &mut [T],
) {
    let what = "matvec_into_on";
    path.check(what);
    expect_len(what, "m", m.len(), product(what, rows, k));
    expect_len(what, "vs", vs.len(), product(what, n, k));
    expect_len(what, "out", out.len(), product(what, n, rows));
    matvec_on_path(path, m, rows, k, vs, n, out)
}

/// [`vecmat_into`] on a given CPU path; panics (an internal error) if this
/// CPU cannot run it.
pub fn vecmat_into_on<T: GemmFloat>(
    path: Path,
    vs: &[T],
    mat: &[T],
    n: usize,
    m: usize,
    k: usize,
    out: &mut [T],
) {
    check_vecmat(
        "vecmat_into_on",
        path,
        [vs.len(), mat.len(), out.len()],
        n,
        m,
        k,
    );
    vecmat_on_path(path, vs, mat, n, m, k, out)
}

/// The portable path only (no CPU dispatch), for the tests that check the
/// paths give the same bits.
#[doc(hidden)]
pub mod portable {
    use super::*;

    pub fn dot<T: GemmFloat>(a: &[T], b: &[T]) -> T {
        expect_len("portable::dot", "b", b.len(), a.len());
        dot_v::<T, T::Portable>(a, b)
    }

    pub fn matvec_into<T: GemmFloat>(
        m: &[T],
        rows: usize,
        k: usize,
        vs: &[T],
        n: usize,
        out: &mut [T],
    ) {
        matvec_into_on(Path::Portable, m, rows, k, vs, n, out)
    }

    pub fn vecmat_into<T: GemmFloat>(
        vs: &[T],
        mat: &[T],
        n: usize,
        m: usize,
        k: usize,
        out: &mut [T],
    ) {
        vecmat_into_on(Path::Portable, vs, mat, n, m, k, out)
    }
}
