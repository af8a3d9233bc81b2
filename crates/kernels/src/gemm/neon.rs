//! The aarch64 NEON backend of the products. NEON is part of every aarch64
//! CPU, so its functions need no test of the CPU; they compute exactly
//! what [`super::Portable`] computes.
//!
//! A NEON register holds 128 bits: 4 `f32` or 2 `f64` lanes. The dot
//! form keeps [`GemmFloat::LANES`] lane partials per output element (8
//! for `f32`, 4 for `f64`), so one vector here is **two** registers (the
//! lower lanes, then the upper ones): [`F32x8`] and [`F64x4`] have the
//! lanes of the AVX2 backend's vectors, and the generic tiles (sized for
//! 16 of those) fit NEON's 32 registers. The tree adds the upper register
//! to the lower one (lane `l` plus lane `l + L/2`), then goes on inside it.

use std::arch::aarch64::*;

use super::{DotVector, GemmFloat, Vector};

/// 8 `f32` lanes in two registers.
#[derive(Clone, Copy)]
pub struct F32x8(float32x4_t, float32x4_t);

/// 4 `f64` lanes in two registers.
#[derive(Clone, Copy)]
pub struct F64x4(float64x2_t, float64x2_t);

/// The first `count` elements at `p` in an array of `L` lanes, the others `+0.0`.
///
/// # Safety
/// `p` points to `count <= L` readable elements.
#[inline(always)]
unsafe fn padded<T: GemmFloat, const L: usize>(p: *const T, count: usize) -> [T; L] {
    let mut lanes = [T::ACC_ZERO; L];
    std::ptr::copy_nonoverlapping(p, lanes.as_mut_ptr(), count);
    lanes
}

/// [`Vector`] for a pair of registers of `$half` lanes: the same code for
/// both types, with their intrinsics.
macro_rules! register_pair {
    ($name:ident, $t:ty, $half:literal, $dup:ident, $load:ident, $store:ident, $fma:ident) => {
        impl Vector<$t> for $name {
            const L: usize = 2 * $half;
            #[inline(always)]
            fn zero() -> Self {
                Self::splat(0.0)
            }
            #[inline(always)]
            fn splat(x: $t) -> Self {
                unsafe { $name($dup(x), $dup(x)) }
            }
            #[inline(always)]
            unsafe fn load(p: *const $t) -> Self {
                $name($load(p), $load(p.add($half)))
            }
            #[inline(always)]
            unsafe fn load_partial(p: *const $t, count: usize) -> Self {
                Self::load(padded::<$t, { 2 * $half }>(p, count).as_ptr())
            }
            #[inline(always)]
            unsafe fn store(self, p: *mut $t) {
                $store(p, self.0);
                $store(p.add($half), self.1);
            }
            #[inline(always)]
            unsafe fn store_partial(self, p: *mut $t, count: usize) {
                let mut lanes = [0.0; 2 * $half];
                self.store(lanes.as_mut_ptr());
                std::ptr::copy_nonoverlapping(lanes.as_ptr(), p, count);
            }
            #[inline(always)]
            fn mul_add(a: Self, b: Self, c: Self) -> Self {
                // vfmaq(c, a, b) = c + a * b with one rounding.
                unsafe { $name($fma(c.0, a.0, b.0), $fma(c.1, a.1, b.1)) }
            }
        }
    };
}

register_pair!(F32x8, f32, 4, vdupq_n_f32, vld1q_f32, vst1q_f32, vfmaq_f32);
register_pair!(F64x4, f64, 2, vdupq_n_f64, vld1q_f64, vst1q_f64, vfmaq_f64);

impl DotVector<f32> for F32x8 {
    #[inline(always)]
    fn tree(self) -> f32 {
        unsafe {
            let four = vaddq_f32(self.0, self.1); // l + (l + 4)
            let two = vadd_f32(vget_low_f32(four), vget_high_f32(four)); // l + (l + 2)
            vget_lane_f32::<0>(two) + vget_lane_f32::<1>(two) // 0 + 1
        }
    }
}

impl DotVector<f64> for F64x4 {
    #[inline(always)]
    fn tree(self) -> f64 {
        unsafe {
            let two = vaddq_f64(self.0, self.1); // l + (l + 2)
            vgetq_lane_f64::<0>(two) + vgetq_lane_f64::<1>(two) // 0 + 1
        }
    }
}
