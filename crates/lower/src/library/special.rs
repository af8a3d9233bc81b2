//! The compound special functions, elementwise: each a few primitives
//! (and `gp_exp_quad_cov`, in [`super::multivariate`]).

use autobatch_ir::{BinaryOp, UnaryOp, Var};
use autobatch_ops::library::Special;

use super::{Builder, LowerResult};

pub(super) fn expand(b: &mut Builder, function: Special, args: &[Var]) -> LowerResult<Var> {
    match function {
        Special::Lbeta => b.binary(BinaryOp::Lbeta, args[0], args[1]),
        Special::IncBeta => super::beta_cdf::inc_beta(b, args[0], args[1], args[2]),
        Special::Lchoose => super::distributions::lchoose(b, args[0], args[1]),
        Special::LogMix => {
            // log_sum_exp(ln(theta) + lp1, ln(1 - theta) + lp2)
            let lt = b.ln(args[0])?;
            let m = b.neg(args[0])?;
            let l1t = b.unary(UnaryOp::Ln1p, m)?;
            let a = b.add(lt, args[1])?;
            let c = b.add(l1t, args[2])?;
            log_sum_exp(b, a, c)
        }
        Special::LogSumExp => log_sum_exp(b, args[0], args[1]),
        Special::Log1pExp => b.unary(UnaryOp::Softplus, args[0]),
        Special::LogInvLogit => b.unary(UnaryOp::LogSigmoid, args[0]),
        Special::InvLogit => b.unary(UnaryOp::Sigmoid, args[0]),
        Special::GpExpQuadCov => super::multivariate::gp_exp_quad_cov(b, args[0], args[1], args[2]),
    }
}

/// `ln(e^a + e^b) = max(a, b) + ln(1 + e^-|a - b|)`, `-inf` when both are.
fn log_sum_exp(b: &mut Builder, x: Var, y: Var) -> LowerResult<Var> {
    let m = b.binary(BinaryOp::Max, x, y)?;
    // Where both are -inf, the difference is NaN: take 0 there.
    let finite = b.unary(UnaryOp::IsFinite, m)?;
    let safe_x = b.where_else(finite, x, 0.0)?;
    let safe_y = b.where_else(finite, y, 0.0)?;
    let d = b.sub(safe_x, safe_y)?;
    let a = b.unary(UnaryOp::Abs, d)?;
    let n = b.neg(a)?;
    let sp = b.unary(UnaryOp::Softplus, n)?;
    let zero = b.c(0.0)?;
    let sp = b.select(finite, sp, zero)?;
    b.add(m, sp)
}
