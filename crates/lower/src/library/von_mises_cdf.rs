//! `von_mises_lcdf` and `von_mises_lccdf` as Stan defines them: the CDF of
//! an angle `y` in `[-pi, pi]` of `von_mises(mu, kappa)`, integrated from
//! `-pi`, with `mu` anywhere on the line. The centred CDF (mean 0) is a
//! backward recurrence over the Fourier series `x / 2pi + (1/pi) sum_n
//! I_n(kappa) / I_0(kappa) sin(n x) / n` for `kappa` below 49, the normal
//! approximation `Phi(sqrt(2/pi) e^kappa / I_0(kappa) sin(x/2))` above 50,
//! and a linear blend of the two between. Built of elementwise operations,
//! so that it is differentiated like any other expression.

use autobatch_ir::{BinaryOp, CompareOp, UnaryOp, Var};
use autobatch_ops::library::Suffix;

use super::distributions::positive;
use super::{Builder, LowerResult};

use std::f64::consts::{PI, TAU};

/// Below this `kappa` the series alone, above `NORMAL_FROM` the normal
/// approximation alone (Stan's bounds).
const SERIES_BELOW: f64 = 49.0;
const NORMAL_FROM: f64 = 50.0;

/// The terms of the series: the recurrence starts at this index. Stan
/// starts at `28 + kappa / 2 - 100 / (kappa + 5) + 1` (at most 51 below
/// `kappa` 49); one fixed start at least as high gives the same sum to
/// rounding for every `kappa` of the series.
const TERMS: usize = 52;

/// `ln F` (`Lcdf`) or `ln(1 - F)` (`Lccdf`) of each element, `F` the CDF.
pub(super) fn expand(b: &mut Builder, suffix: Suffix, y: Var, p: &[Var]) -> LowerResult<Var> {
    let (mu, kappa) = (p[0], p[1]);
    let within = "in [-pi, pi]";
    b.check_c(y, CompareOp::Ge, -PI, "Random variable", "y", within)?;
    b.check_c(y, CompareOp::Le, PI, "Random variable", "y", within)?;
    b.check_finite(mu, "Location parameter", "mu")?;
    positive(b, kappa, "Scale parameter", "kappa")?;
    let f = cdf(b, y, mu, kappa)?;
    if suffix == Suffix::Lccdf {
        let nf = b.neg(f)?;
        let one_minus = b.shift(nf, 1.0)?;
        b.ln(one_minus)
    } else {
        b.ln(f)
    }
}

/// `v` moved by a multiple of 2 pi into `[-pi, pi)`.
fn wrapped(b: &mut Builder, v: Var) -> LowerResult<Var> {
    let shifted = b.shift(v, PI)?;
    let turns = b.scale(shifted, 1.0 / TAU)?;
    let whole = b.unary(UnaryOp::Floor, turns)?;
    let back = b.scale(whole, -TAU)?;
    let inside = b.add(shifted, back)?;
    b.shift(inside, -PI)
}

/// The CDF: the centred CDF at `y - mu` (wrapped) less its value at the
/// point `-pi` maps to, plus 1 past the cut where the wrap turns over;
/// 0 at `y = -pi`, 1 at `y = pi`, and never below 0.
fn cdf(b: &mut Builder, y: Var, mu: Var, kappa: Var) -> LowerResult<Var> {
    let d = b.sub(y, mu)?;
    let x = wrapped(b, d)?;
    let m = wrapped(b, mu)?;
    let negative = b.compare_c(CompareOp::Lt, m, 0.0)?;
    let m_plus = b.shift(m, PI)?;
    let m_minus = b.shift(m, -PI)?;
    let cut = b.select(negative, m_plus, m_minus)?;
    let nm = b.neg(m)?;
    let low = b.shift(nm, -PI)?;
    let high = b.shift(nm, PI)?;
    let bound = b.select(negative, low, high)?;
    let fx = centred(b, x, kappa)?;
    let fb = centred(b, bound, kappa)?;
    let diff = b.sub(fx, fb)?;
    let past = b.compare(CompareOp::Gt, y, cut)?;
    let past = b.float_of_bool(past)?;
    let f = b.add(diff, past)?;
    let zero = b.c(0.0)?;
    let f = b.binary(BinaryOp::Max, f, zero)?;
    let at_low = b.compare_c(CompareOp::Eq, y, -PI)?;
    let at_high = b.compare_c(CompareOp::Eq, y, PI)?;
    let one = b.c(1.0)?;
    let f = b.select(at_high, one, f)?;
    b.select(at_low, zero, f)
}

/// The CDF of `von_mises(0, kappa)` at `x` in `[-pi, pi]`: the series
/// (clamped to `[0, 1]`) below 49, the normal approximation from 50, and
/// between them `(50 - kappa)` series at 49 plus `(kappa - 49)` normal at
/// 50. Each branch is given a `kappa` inside its range, so that the
/// branches not taken stay finite and so do their derivatives.
fn centred(b: &mut Builder, x: Var, kappa: Var) -> LowerResult<Var> {
    let series_k = b.c(SERIES_BELOW)?;
    let normal_k = b.c(NORMAL_FROM)?;
    let k_series = b.binary(BinaryOp::Min, kappa, series_k)?;
    let k_normal = b.binary(BinaryOp::Max, kappa, normal_k)?;
    let s = series(b, x, k_series)?;
    let n = normal_approximation(b, x, k_normal)?;
    let zero = b.c(0.0)?;
    let one = b.c(1.0)?;
    let clamped = b.binary(BinaryOp::Max, s, zero)?;
    let clamped = b.binary(BinaryOp::Min, clamped, one)?;
    // The blend's weights: kappa - 49 and 50 - kappa.
    let w = b.shift(kappa, -SERIES_BELOW)?;
    let nw = b.neg(w)?;
    let v = b.shift(nw, 1.0)?;
    let ws = b.mul(v, s)?;
    let wn = b.mul(w, n)?;
    let blend = b.add(ws, wn)?;
    let below = b.compare_c(CompareOp::Lt, kappa, SERIES_BELOW)?;
    let above = b.compare_c(CompareOp::Ge, kappa, NORMAL_FROM)?;
    let f = b.select(above, n, blend)?;
    b.select(below, clamped, f)
}

/// `1/2 + x / 2pi + V / pi` with `V = sum_n (I_n / I_0)(kappa) sin(n x) /
/// n`, the ratios by the backward recurrence `R_n = 1 / (2n / kappa +
/// R_{n+1})` from `n = TERMS - 1` down, `sin(n x)` and `cos(n x)` stepped
/// down from `n = TERMS` by the angle-difference formulas.
fn series(b: &mut Builder, x: Var, kappa: Var) -> LowerResult<Var> {
    let s = b.unary(UnaryOp::Sin, x)?;
    let c = b.unary(UnaryOp::Cos, x)?;
    let px = b.scale(x, TERMS as f64)?;
    let mut sn = b.unary(UnaryOp::Sin, px)?;
    let mut cn = b.unary(UnaryOp::Cos, px)?;
    let inverse = b.unary(UnaryOp::Recip, kappa)?;
    let two_over_k = b.scale(inverse, 2.0)?;
    let mut r = b.c(0.0)?;
    let mut v = b.c(0.0)?;
    for n in (1..TERMS).rev() {
        let snc = b.mul(sn, c)?;
        let cns = b.mul(cn, s)?;
        let cnc = b.mul(cn, c)?;
        let sns = b.mul(sn, s)?;
        sn = b.sub(snc, cns)?;
        cn = b.add(cnc, sns)?;
        let t = b.scale(two_over_k, n as f64)?;
        let t = b.add(t, r)?;
        r = b.unary(UnaryOp::Recip, t)?;
        let term = b.scale(sn, 1.0 / n as f64)?;
        let term = b.add(term, v)?;
        v = b.mul(r, term)?;
    }
    let a = b.scale(x, 1.0 / TAU)?;
    let a = b.shift(a, 0.5)?;
    let vp = b.scale(v, 1.0 / PI)?;
    b.add(a, vp)
}

/// `Phi(sqrt(2 / pi) e^kappa / I_0(kappa) sin(x / 2))`, `e^kappa / I_0`
/// as `exp(-ln(I_0(kappa) e^-kappa))`.
fn normal_approximation(b: &mut Builder, x: Var, kappa: Var) -> LowerResult<Var> {
    let l = b.unary(UnaryOp::LogBesselI0e, kappa)?;
    let nl = b.neg(l)?;
    let e = b.unary(UnaryOp::Exp, nl)?;
    let scale = b.scale(e, (2.0 / PI).sqrt())?;
    let h = b.scale(x, 0.5)?;
    let s = b.unary(UnaryOp::Sin, h)?;
    let z = b.mul(scale, s)?;
    b.unary(UnaryOp::Phi, z)
}
