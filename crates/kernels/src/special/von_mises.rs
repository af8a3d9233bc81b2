//! A draw of the von Mises distribution about 0 made from one uniform draw:
//! Best and Fisher's rejection method (the one Stan's `von_mises_rng`
//! uses), whose uniforms come from a small generator (SplitMix64) seeded by
//! the bits of that draw. The angle is thus a function of `(kappa, u)`
//! alone: every executor computes the same bits, and a member's stream
//! gives up one uniform per draw however many proposals are rejected.

use std::f64::consts::PI;

use crate::vmath::ln_f64;

/// Below this concentration the angle is drawn uniformly (as Stan does):
/// the density differs from the uniform one by less than `f64`'s rounding.
const UNIFORM_BELOW: f64 = 1.4e-8;

/// The proposals tried before giving up (each is accepted with
/// probability above 0.65, so the last is never reached in practice);
/// then the mode, 0, is returned.
const MAX_PROPOSALS: usize = 256;

/// SplitMix64: a 64-bit state advanced by a constant and mixed.
struct SplitMix(u64);

impl SplitMix {
    /// A uniform draw in `(0, 1)`: 53 random bits, centred in their step.
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

/// An angle in `[-pi, pi]` drawn from `von_mises(0, kappa)`, made from the
/// uniform draw `u` in `[0, 1]`; NaN for a `kappa` that is negative, NaN or
/// infinite, or a `u` outside `[0, 1]`.
pub fn von_mises_draw_f64(kappa: f64, u: f64) -> f64 {
    if !(kappa >= 0.0 && kappa.is_finite() && (0.0..=1.0).contains(&u)) {
        return f64::NAN;
    }
    let mut stream = SplitMix(u.to_bits());
    let w = if kappa < UNIFORM_BELOW {
        (PI * stream.uniform()).cos()
    } else {
        best_fisher(kappa, &mut stream)
    };
    let angle = w.clamp(-1.0, 1.0).acos();
    if stream.uniform() < 0.5 {
        -angle
    } else {
        angle
    }
}

/// The cosine of the angle, by Best and Fisher's wrapped-Cauchy envelope.
/// `rho = (r - sqrt(2r)) / (2 kappa)` with `r = 1 + sqrt(1 + 4 kappa^2)`
/// is computed as `2 kappa / (r + sqrt(2r))`, the same without the
/// cancellation at small `kappa`.
fn best_fisher(kappa: f64, stream: &mut SplitMix) -> f64 {
    let r = 1.0 + 1.0f64.hypot(2.0 * kappa);
    let rho = 2.0 * kappa / (r + (2.0 * r).sqrt());
    let s = (1.0 + rho * rho) / (2.0 * rho);
    for _ in 0..MAX_PROPOSALS {
        let z = (PI * stream.uniform()).cos();
        let w = (1.0 + s * z) / (s + z);
        let y = kappa * (s - w);
        let u2 = stream.uniform();
        if y * (2.0 - y) - u2 > 0.0 || ln_f64(y / u2) + 1.0 - y >= 0.0 {
            return w;
        }
    }
    1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angles_are_in_range_and_bad_arguments_give_nan() {
        for kappa in [0.0, 1e-9, 0.01, 1.0, 30.0, 1e6, 1e300] {
            for i in 0..=100 {
                let a = von_mises_draw_f64(kappa, i as f64 / 100.0);
                assert!((-PI..=PI).contains(&a), "kappa {kappa}: {a}");
            }
        }
        assert!(von_mises_draw_f64(-1.0, 0.5).is_nan());
        assert!(von_mises_draw_f64(f64::INFINITY, 0.5).is_nan());
        assert!(von_mises_draw_f64(1.0, 1.5).is_nan());
        assert!(von_mises_draw_f64(f64::NAN, 0.5).is_nan());
    }
}
