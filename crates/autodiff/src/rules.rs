//! The adjoint of each operation: given the adjoint `dy` of its result, the
//! contributions to the adjoints of its active operands, written with the
//! existing primitives.

use autobatch_ir::{
    BinaryOp as B, Dim, Op, Prim, ReduceOp, Scalar, TensorType, TernaryOp as T, UnaryOp as U, Var,
};
use autobatch_types::Loc;

use crate::builder::Builder;
use crate::{analysis, derive_error, DeriveResult};

/// Emits the adjoint operations of `op` (a primitive operation of the
/// function being derived; calls and forks are the taped derivation's,
/// see [`crate::tape`]) and accumulates their contributions.
pub(crate) fn adjoint(b: &mut Builder, op: &Op) -> DeriveResult<()> {
    match op {
        Op::Prim {
            dst: Some(y),
            prim,
            args,
            loc,
        } => prim_op_adjoint(b, prim, args, *y, *loc),
        _ => Ok(()),
    }
}

/// The adjoint of `y = prim(args)`, when `y` has an adjoint and some
/// operand is active.
fn prim_op_adjoint(
    b: &mut Builder,
    prim: &Prim,
    args: &[Var],
    y: Var,
    loc: Loc,
) -> DeriveResult<()> {
    if !analysis::propagates(prim) {
        return Ok(());
    }
    let Some(dy) = b.adj.get(&y).copied() else {
        return Ok(());
    };
    if !args.iter().any(|a| b.active[a.0 as usize]) {
        return Ok(());
    }
    // Elementwise rules and reductions (whose result is a scalar)
    // take a broadcast adjoint as it is, except where an active
    // scalar operand was broadcast (its adjoint is the sum over the
    // array); the others need it whole.
    let broadcast_scalar = !b.ty(y).is_scalar()
        && args
            .iter()
            .any(|a| b.active[a.0 as usize] && b.ty(*a).is_scalar());
    let dy = match prim {
        Prim::Binary(_) if broadcast_scalar => b.full(y, dy, loc)?,
        Prim::Copy
        | Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Cast(_)
        | Prim::Dot
        | Prim::Reduce(_) => dy,
        _ => b.full(y, dy, loc)?,
    };
    prim_adjoint(b, prim, Site { args, y, dy, loc })
}

/// The values the adjoint of `y = prim(args)` reads besides `dy`: the
/// operands it uses and whether it uses `y`. A value it does not read need
/// not be kept for it (the taped derivation pushes only these).
pub(crate) struct AdjointReads {
    pub operands: Vec<Var>,
    pub result: bool,
}

/// What [`prim_adjoint`]'s rule for `prim` reads when the operands for
/// which `active` holds carry adjoints: the rules that move, add, negate,
/// index or sum `dy` read no operand's value (only types, which the
/// backward part knows), an index's rule reads the index and a `select`'s
/// the condition; a product's (`*`, `dot`) reads each active operand's
/// partner, a quotient's the divisor, and the result when the divisor is
/// active; the unary rules that are `dy` times a function of the operand
/// (`abs`, `ln`, `ln_1p`, `log_sigmoid`, `softplus`) read the operand but
/// not the result; every other rule may read all of them and the result.
pub(crate) fn adjoint_reads(
    prim: &Prim,
    args: &[Var],
    active: &dyn Fn(Var) -> bool,
) -> AdjointReads {
    let partners = || -> Vec<Var> {
        let mut read = Vec::new();
        if active(args[0]) {
            read.push(args[1]);
        }
        if active(args[1]) {
            read.push(args[0]);
        }
        read
    };
    let (operands, result): (Vec<Var>, bool) = match prim {
        Prim::Copy
        | Prim::Cast(_)
        | Prim::Unary(U::Neg)
        | Prim::Binary(B::Add | B::Sub)
        | Prim::Fill(_)
        | Prim::Stack
        | Prim::Transpose
        | Prim::Reduce(ReduceOp::Sum | ReduceOp::Mean) => (Vec::new(), false),
        Prim::Index | Prim::IndexSet | Prim::Slice(_) | Prim::SliceSet => (vec![args[1]], false),
        Prim::Select => (vec![args[0]], false),
        Prim::Binary(B::Mul) | Prim::Dot => (partners(), false),
        Prim::Binary(B::Div) => (vec![args[1]], active(args[1])),
        Prim::Unary(U::Abs | U::Ln | U::Ln1p | U::LogSigmoid | U::Softplus) => {
            (args.to_vec(), false)
        }
        _ => (args.to_vec(), true),
    };
    AdjointReads { operands, result }
}

/// Adds `c` (shaped like the result of a broadcasting operation) to the
/// adjoint of operand `v`, summing it down to a scalar when `v` is a scalar.
fn contribute(b: &mut Builder, v: Var, c: Var, loc: Loc) -> DeriveResult<()> {
    if !b.active[v.0 as usize] {
        return Ok(());
    }
    let c = if b.ty(v).is_scalar() && !b.ty(c).is_scalar() {
        sum_all(b, c, loc)?
    } else {
        c
    };
    b.accumulate(v, c, loc)
}

/// The sum of every element of `c`.
fn sum_all(b: &mut Builder, c: Var, loc: Loc) -> DeriveResult<Var> {
    let ty = b.ty(c).clone();
    match ty.dims.len() {
        0 => Ok(c),
        1 => b.prim(Prim::Reduce(ReduceOp::Sum), vec![c], loc),
        _ => {
            let rows = sum_leading(b, c, loc)?;
            sum_all(b, rows, loc)
        }
    }
}

/// The sum over the leading axis of `c` (rank at least 1), in a fixed
/// order: a vector by the `sum` primitive (its fixed lane order), a matrix
/// by `ones · c` (`vecmat`, which adds the rows first to last), a higher
/// rank row by row, first to last (unrolled up to 64 rows, else a loop).
pub(crate) fn sum_leading(b: &mut Builder, c: Var, loc: Loc) -> DeriveResult<Var> {
    let ty = b.ty(c).clone();
    match ty.dims.len() {
        0 => derive_error("cannot sum over the leading axis of a scalar", loc),
        1 => b.prim(Prim::Reduce(ReduceOp::Sum), vec![c], loc),
        2 => {
            let ones = b.filled(
                &TensorType {
                    elem: ty.elem,
                    dims: vec![ty.dims[0]],
                },
                1.0,
                loc,
            )?;
            b.prim(Prim::Vecmat, vec![ones, c], loc)
        }
        _ => match ty.dims[0] {
            Dim::Fixed(n) if (1..=64).contains(&n) => {
                let mut acc: Option<Var> = None;
                for i in 0..n {
                    let idx = b.prim(Prim::Const(Scalar::Usize(i)), Vec::new(), loc)?;
                    let row = b.prim(Prim::Index, vec![c, idx], loc)?;
                    acc = Some(match acc {
                        None => row,
                        Some(a) => b.prim(Prim::Binary(B::Add), vec![a, row], loc)?,
                    });
                }
                Ok(acc.expect("n >= 1"))
            }
            _ => sum_leading_loop(b, c, loc),
        },
    }
}

/// The sum over the leading axis of `c` (rank 2 or more, any length) by a
/// loop over its rows, first to last, from zeros. The values the loop
/// computes are not recorded for reuse: they change with each iteration.
fn sum_leading_loop(b: &mut Builder, c: Var, loc: Loc) -> DeriveResult<Var> {
    use autobatch_ir::{CompareOp, ScalarType, Terminator};
    let ty = b.ty(c).clone();
    let row_ty = TensorType {
        elem: ty.elem,
        dims: ty.dims[1..].to_vec(),
    };
    let n = match ty.dims[0] {
        Dim::Fixed(n) => b.prim(Prim::Const(Scalar::Usize(n)), Vec::new(), loc)?,
        Dim::Symbolic(s) => b.prim(Prim::SymbolValue(s), Vec::new(), loc)?,
    };
    let zero = b.prim(Prim::Const(Scalar::Usize(0)), Vec::new(), loc)?;
    let one = b.prim(Prim::Const(Scalar::Usize(1)), Vec::new(), loc)?;
    let zeros = b.filled(&row_ty, 0.0, loc)?;
    let usize_ty = TensorType::scalar(ScalarType::Usize);
    let acc = b.var(row_ty.clone(), None, false);
    let i = b.var(usize_ty.clone(), None, false);
    b.prim_into(acc, Prim::Copy, vec![zeros], loc);
    b.prim_into(i, Prim::Copy, vec![zero], loc);
    let header = b.new_block(loc);
    let body = b.new_block(loc);
    let exit = b.new_block(loc);
    b.terminate(Terminator::Jump(header));
    b.current = header;
    let more = b.var(TensorType::scalar(ScalarType::Bool), None, false);
    b.prim_into(more, Prim::Compare(CompareOp::Lt), vec![i, n], loc);
    b.terminate(Terminator::Branch {
        cond: more,
        then_block: body,
        else_block: exit,
    });
    b.current = body;
    let row = b.var(row_ty.clone(), None, false);
    b.prim_into(row, Prim::Index, vec![c, i], loc);
    let sum = b.var(row_ty, None, false);
    b.prim_into(sum, Prim::Binary(B::Add), vec![acc, row], loc);
    b.prim_into(acc, Prim::Copy, vec![sum], loc);
    let next = b.var(usize_ty, None, false);
    b.prim_into(next, Prim::Binary(B::Add), vec![i, one], loc);
    b.prim_into(i, Prim::Copy, vec![next], loc);
    b.terminate(Terminator::Jump(header));
    b.current = exit;
    Ok(acc)
}

fn bin(b: &mut Builder, op: B, x: Var, y: Var, loc: Loc) -> DeriveResult<Var> {
    b.prim(Prim::Binary(op), vec![x, y], loc)
}

fn un(b: &mut Builder, op: U, x: Var, loc: Loc) -> DeriveResult<Var> {
    b.prim(Prim::Unary(op), vec![x], loc)
}

/// One where `v` (a float) is not zero (or is NaN), zero where it is: `v
/// as bool` (`!= 0`), back in `v`'s type.
fn not_zero(b: &mut Builder, v: Var, loc: Loc) -> DeriveResult<Var> {
    let elem = b.ty(v).elem;
    let flag = b.prim(Prim::Cast(autobatch_ir::ScalarType::Bool), vec![v], loc)?;
    b.prim(Prim::Cast(elem), vec![flag], loc)
}

/// One where `v` (a float) is NaN, zero elsewhere, in `v`'s type.
fn is_nan(b: &mut Builder, v: Var, loc: Loc) -> DeriveResult<Var> {
    let elem = b.ty(v).elem;
    let flag = un(b, U::IsNan, v, loc)?;
    b.prim(Prim::Cast(elem), vec![flag], loc)
}

/// σ(x), as `1 - σ(w)` when `x` is `-w` and σ(w) is already computed (the
/// log-likelihood `y log σ(z) + (1 - y) log σ(-z)` then needs one σ, not two).
fn sigmoid(b: &mut Builder, x: Var, elem: autobatch_ir::ScalarType, loc: Loc) -> DeriveResult<Var> {
    let sig = Prim::Unary(U::Sigmoid);
    if b.known.lookup(&sig, &[x]).is_none() {
        if let Some(w) = b.known.negation_of(x) {
            if let Some(s) = b.known.lookup(&sig, &[w]) {
                let one = b.constant(elem, 1.0, loc)?;
                return bin(b, B::Sub, one, s, loc);
            }
        }
    }
    un(b, U::Sigmoid, x, loc)
}

/// `scale * e^(rate * v^2)`: the derivatives of `erf`, `erfc`, `Phi`, `inv_Phi`.
fn gaussian(b: &mut Builder, v: Var, rate: f64, scale: f64, loc: Loc) -> DeriveResult<Var> {
    let elem = b.ty(v).elem;
    let sq = bin(b, B::Mul, v, v, loc)?;
    let r = b.constant(elem, rate, loc)?;
    let e = bin(b, B::Mul, sq, r, loc)?;
    let ex = un(b, U::Exp, e, loc)?;
    let s = b.constant(elem, scale, loc)?;
    bin(b, B::Mul, ex, s, loc)
}

/// One operation `y = prim(args)` whose adjoint is being emitted, with the
/// adjoint `dy` of its result (shaped as [`adjoint`] decided).
#[derive(Clone, Copy)]
struct Site<'a> {
    args: &'a [Var],
    y: Var,
    dy: Var,
    loc: Loc,
}

impl Site<'_> {
    /// Whether operand `i` carries an adjoint.
    fn active(&self, b: &Builder, i: usize) -> bool {
        b.active[self.args[i].0 as usize]
    }
}

/// The adjoint of one primitive: each family of operations has its own
/// function, with one arm per operation.
fn prim_adjoint(b: &mut Builder, prim: &Prim, site: Site) -> DeriveResult<()> {
    match prim {
        Prim::Copy | Prim::Cast(_) | Prim::Select => elementwise_adjoint(b, prim, site),
        Prim::Unary(op) => unary_adjoint(b, *op, site),
        Prim::Binary(op) => binary_adjoint(b, *op, site),
        Prim::Ternary(op) => incomplete_beta_adjoint(b, *op, site),
        Prim::Fill(_)
        | Prim::Stack
        | Prim::Index
        | Prim::IndexSet
        | Prim::Slice(_)
        | Prim::SliceSet => layout_adjoint(b, prim, site),
        Prim::Dot | Prim::Matvec | Prim::Vecmat | Prim::Matmul | Prim::Transpose | Prim::Outer => {
            linalg_adjoint(b, prim, site)
        }
        Prim::Reduce(_) | Prim::Softmax => reduction_adjoint(b, prim, site),
        Prim::Cholesky | Prim::TriSolve | Prim::Tril | Prim::Diagonal | Prim::DiagMatrix => {
            factor_adjoint(b, prim, site)
        }
        // Used by adjoints only, and not differentiated again.
        Prim::TriSolveT | Prim::CholeskyAdjoint => derive_error(
            "second derivatives through `cholesky_decompose` and `mdivide_left_tri_low` \
             (and the distributions that use them) are not available",
            site.loc,
        ),
        // Constants, comparisons and random draws have no adjoint.
        Prim::Const(_)
        | Prim::LoadStatic(_)
        | Prim::SymbolValue(_)
        | Prim::Compare(_)
        | Prim::Uniform
        | Prim::Normal
        | Prim::Bernoulli
        | Prim::UniformLike
        | Prim::NormalLike
        | Prim::Assert { .. }
        | Prim::Check { .. }
        | Prim::StaticAdjoint(_)
        | Prim::TapePush
        | Prim::TapePop(_)
        | Prim::TapeOver
        | Prim::TapeMark
        | Prim::TapeSettle => Ok(()),
        // The front end refuses to differentiate through a host primitive.
        Prim::Host(host) => derive_error(
            format!("cannot differentiate the host primitive `{}`", host.name),
            site.loc,
        ),
    }
}

/// Copies, casts and `select`.
fn elementwise_adjoint(b: &mut Builder, prim: &Prim, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    match prim {
        Prim::Copy => contribute(b, args[0], dy, loc),
        Prim::Cast(_) => {
            let x = args[0];
            let from = b.ty(x).elem;
            if !from.is_float() {
                return Ok(());
            }
            let c = b.prim(Prim::Cast(from), vec![dy], loc)?;
            contribute(b, x, c, loc)
        }
        Prim::Select => {
            let c = args[0];
            if site.active(b, 1) || site.active(b, 2) {
                let ty = b.ty(dy).clone();
                let zero = b.filled(&ty, 0.0, loc)?;
                if site.active(b, 1) {
                    let t = b.prim(Prim::Select, vec![c, dy, zero], loc)?;
                    contribute(b, args[1], t, loc)?;
                }
                if site.active(b, 2) {
                    let e = b.prim(Prim::Select, vec![c, zero, dy], loc)?;
                    contribute(b, args[2], e, loc)?;
                }
            }
            Ok(())
        }
        _ => derive_error(format!("`{prim}` is not a copy, cast or select"), loc),
    }
}

/// The unary operations: `dy` times the derivative, for the one operand.
fn unary_adjoint(b: &mut Builder, op: U, site: Site) -> DeriveResult<()> {
    let Site { args, y, dy, loc } = site;
    let elem = b.ty(y).elem;
    let x = args[0];
    let c = match op {
        U::Neg => un(b, U::Neg, dy, loc)?,
        U::Abs => {
            let s = un(b, U::Signum, x, loc)?;
            bin(b, B::Mul, dy, s, loc)?
        }
        U::Exp => bin(b, B::Mul, dy, y, loc)?,
        U::ExpM1 => {
            let one = b.constant(elem, 1.0, loc)?;
            let e = bin(b, B::Add, y, one, loc)?;
            bin(b, B::Mul, dy, e, loc)?
        }
        U::Ln => bin(b, B::Div, dy, x, loc)?,
        U::Ln1p => {
            let one = b.constant(elem, 1.0, loc)?;
            let e = bin(b, B::Add, x, one, loc)?;
            bin(b, B::Div, dy, e, loc)?
        }
        U::Log10 => {
            let l = b.constant(elem, std::f64::consts::LN_10, loc)?;
            let e = bin(b, B::Mul, x, l, loc)?;
            bin(b, B::Div, dy, e, loc)?
        }
        U::Sqrt => {
            let half = b.constant(elem, 0.5, loc)?;
            let h = bin(b, B::Mul, dy, half, loc)?;
            bin(b, B::Div, h, y, loc)?
        }
        U::Sin => {
            let c = un(b, U::Cos, x, loc)?;
            bin(b, B::Mul, dy, c, loc)?
        }
        U::Cos => {
            let s = un(b, U::Sin, x, loc)?;
            let m = bin(b, B::Mul, dy, s, loc)?;
            un(b, U::Neg, m, loc)?
        }
        U::Tan => {
            let one = b.constant(elem, 1.0, loc)?;
            let sq = bin(b, B::Mul, y, y, loc)?;
            let e = bin(b, B::Add, sq, one, loc)?;
            bin(b, B::Mul, dy, e, loc)?
        }
        // atan' = 1 / (1 + x^2)
        U::Atan => {
            let one = b.constant(elem, 1.0, loc)?;
            let sq = bin(b, B::Mul, x, x, loc)?;
            let e = bin(b, B::Add, sq, one, loc)?;
            bin(b, B::Div, dy, e, loc)?
        }
        U::Tanh => {
            let one = b.constant(elem, 1.0, loc)?;
            let sq = bin(b, B::Mul, y, y, loc)?;
            let e = bin(b, B::Sub, one, sq, loc)?;
            bin(b, B::Mul, dy, e, loc)?
        }
        U::Recip => {
            let sq = bin(b, B::Mul, y, y, loc)?;
            let m = bin(b, B::Mul, dy, sq, loc)?;
            un(b, U::Neg, m, loc)?
        }
        U::Sigmoid => {
            let one = b.constant(elem, 1.0, loc)?;
            let om = bin(b, B::Sub, one, y, loc)?;
            let e = bin(b, B::Mul, y, om, loc)?;
            bin(b, B::Mul, dy, e, loc)?
        }
        U::LogSigmoid => {
            // d/dx log σ(x) = σ(-x)
            let nx = un(b, U::Neg, x, loc)?;
            let s = sigmoid(b, nx, elem, loc)?;
            bin(b, B::Mul, dy, s, loc)?
        }
        U::Softplus => {
            let s = sigmoid(b, x, elem, loc)?;
            bin(b, B::Mul, dy, s, loc)?
        }
        U::Lgamma => {
            let d = un(b, U::Digamma, x, loc)?;
            bin(b, B::Mul, dy, d, loc)?
        }
        U::Digamma => {
            let d = un(b, U::Trigamma, x, loc)?;
            bin(b, B::Mul, dy, d, loc)?
        }
        // erf' = 2/sqrt(pi) e^(-x^2), erfc' = -erf'.
        U::Erf | U::Erfc => {
            let scale = if op == U::Erf { 1.0 } else { -1.0 };
            let g = gaussian(b, x, -1.0, scale * std::f64::consts::FRAC_2_SQRT_PI, loc)?;
            bin(b, B::Mul, dy, g, loc)?
        }
        // Phi' = e^(-x^2/2) / sqrt(2 pi).
        U::Phi => {
            let g = gaussian(b, x, -0.5, 0.398_942_280_401_432_7, loc)?;
            bin(b, B::Mul, dy, g, loc)?
        }
        // inv_Phi' = 1 / Phi'(inv_Phi(x)) = sqrt(2 pi) e^(y^2/2).
        U::InvPhi => {
            let g = gaussian(b, y, 0.5, 2.506_628_274_631_000_7, loc)?;
            bin(b, B::Mul, dy, g, loc)?
        }
        // ln(I0(x) e^-|x|)' = I1(x) / I0(x) - sign(x)
        U::LogBesselI0e => {
            let r = un(b, U::BesselI1OverI0, x, loc)?;
            let s = un(b, U::Signum, x, loc)?;
            let d = bin(b, B::Sub, r, s, loc)?;
            bin(b, B::Mul, dy, d, loc)?
        }
        // Not differentiable (the front end refuses it in `grad`).
        U::Trigamma | U::BesselI1OverI0 => return Ok(()),
        U::Floor | U::Ceil | U::Round | U::Signum => return Ok(()),
        U::Not | U::IsNan | U::IsFinite => return Ok(()),
    };
    contribute(b, x, c, loc)
}

/// The binary operations: a contribution to each active operand (a
/// scalar operand broadcast over an array gets the sum, by `contribute`).
fn binary_adjoint(b: &mut Builder, op: B, site: Site) -> DeriveResult<()> {
    let Site { args, y, dy, loc } = site;
    let elem = b.ty(y).elem;
    let (x, z) = (args[0], args[1]);
    let (x_active, z_active) = (site.active(b, 0), site.active(b, 1));
    match op {
        B::Add => {
            contribute(b, x, dy, loc)?;
            contribute(b, z, dy, loc)
        }
        B::Sub => {
            contribute(b, x, dy, loc)?;
            if z_active {
                let n = un(b, U::Neg, dy, loc)?;
                contribute(b, z, n, loc)?;
            }
            Ok(())
        }
        B::Mul => {
            if x_active {
                let c = bin(b, B::Mul, dy, z, loc)?;
                contribute(b, x, c, loc)?;
            }
            if z_active {
                let c = bin(b, B::Mul, dy, x, loc)?;
                contribute(b, z, c, loc)?;
            }
            Ok(())
        }
        B::Div => {
            let q = bin(b, B::Div, dy, z, loc)?;
            if x_active {
                contribute(b, x, q, loc)?;
            }
            if z_active {
                // d(x/z)/dz = -y/z
                let m = bin(b, B::Mul, q, y, loc)?;
                let n = un(b, U::Neg, m, loc)?;
                contribute(b, z, n, loc)?;
            }
            Ok(())
        }
        B::Rem => {
            contribute(b, x, dy, loc)?;
            if z_active {
                // x % z = x - trunc(x/z) z, and trunc(x/z) = (x - y) / z
                let diff = bin(b, B::Sub, x, y, loc)?;
                let t = bin(b, B::Div, diff, z, loc)?;
                let m = bin(b, B::Mul, dy, t, loc)?;
                let n = un(b, U::Neg, m, loc)?;
                contribute(b, z, n, loc)?;
            }
            Ok(())
        }
        B::Max | B::Min => extremum_adjoint(b, op, site),
        B::Powi => {
            // n x^(n-1)
            let one_i = b.prim(Prim::Const(Scalar::I32(1)), Vec::new(), loc)?;
            let nm1 = bin(b, B::Sub, z, one_i, loc)?;
            let p = b.prim(Prim::Binary(B::Powi), vec![x, nm1], loc)?;
            let nf = b.prim(Prim::Cast(elem), vec![z], loc)?;
            let e = bin(b, B::Mul, p, nf, loc)?;
            let c = bin(b, B::Mul, dy, e, loc)?;
            contribute(b, x, c, loc)
        }
        B::Powf => {
            if x_active {
                // z x^(z-1)
                let one = b.constant(elem, 1.0, loc)?;
                let zm1 = bin(b, B::Sub, z, one, loc)?;
                let p = bin(b, B::Powf, x, zm1, loc)?;
                let e = bin(b, B::Mul, p, z, loc)?;
                let c = bin(b, B::Mul, dy, e, loc)?;
                contribute(b, x, c, loc)?;
            }
            if z_active {
                // y ln x
                let l = un(b, U::Ln, x, loc)?;
                let e = bin(b, B::Mul, y, l, loc)?;
                let c = bin(b, B::Mul, dy, e, loc)?;
                contribute(b, z, c, loc)?;
            }
            Ok(())
        }
        B::Atan2 => {
            // d atan2(x, z) = (z dx - x dz) / (x^2 + z^2)
            let xx = bin(b, B::Mul, x, x, loc)?;
            let zz = bin(b, B::Mul, z, z, loc)?;
            let r = bin(b, B::Add, xx, zz, loc)?;
            let q = bin(b, B::Div, dy, r, loc)?;
            if x_active {
                let c = bin(b, B::Mul, q, z, loc)?;
                contribute(b, x, c, loc)?;
            }
            if z_active {
                let m = bin(b, B::Mul, q, x, loc)?;
                let c = un(b, U::Neg, m, loc)?;
                contribute(b, z, c, loc)?;
            }
            Ok(())
        }
        B::LogGammaP | B::LogGammaQ => incomplete_gamma_adjoint(b, op == B::LogGammaQ, site),
        B::Lbeta => lbeta_adjoint(b, site),
        B::BitAnd
        | B::BitOr
        | B::BitXor
        | B::Shl
        | B::Shr
        | B::Pow
        | B::LogGammaPDa
        | B::LogGammaQDa
        | B::LogGammaPInv
        | B::PoissonInv
        | B::VonMisesDraw => Ok(()),
    }
}

/// `max` and `min`: each operand's share of the adjoint.
fn extremum_adjoint(b: &mut Builder, op: B, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    let elem = b.ty(site.y).elem;
    let (x, z) = (args[0], args[1]);
    let (x_active, z_active) = (site.active(b, 0), site.active(b, 1));
    // The share of the left operand: one where the result is the
    // left, zero where it is the right, a half each where they are
    // equal (as `jax.numpy.maximum`); NaN where their difference is.
    let diff = if op == B::Max {
        bin(b, B::Sub, x, z, loc)?
    } else {
        bin(b, B::Sub, z, x, loc)?
    };
    let sign = un(b, U::Signum, diff, loc)?;
    let unequal = not_zero(b, diff, loc)?;
    let s = bin(b, B::Mul, sign, unequal, loc)?;
    let one = b.constant(elem, 1.0, loc)?;
    let half = b.constant(elem, 0.5, loc)?;
    let s1 = bin(b, B::Add, s, one, loc)?;
    let left = bin(b, B::Mul, s1, half, loc)?;
    if x_active {
        let c = bin(b, B::Mul, dy, left, loc)?;
        contribute(b, x, c, loc)?;
    }
    if z_active {
        let right = bin(b, B::Sub, one, left, loc)?;
        let c = bin(b, B::Mul, dy, right, loc)?;
        contribute(b, z, c, loc)?;
    }
    Ok(())
}

/// `ln P(a, z)` (`upper`: `ln Q(a, z)`), the regularized incomplete gamma
/// functions, in the shape `a` and the point `z`.
fn incomplete_gamma_adjoint(b: &mut Builder, upper: bool, site: Site) -> DeriveResult<()> {
    let Site { args, y, dy, loc } = site;
    let elem = b.ty(y).elem;
    let (x, z) = (args[0], args[1]);
    let (x_active, z_active) = (site.active(b, 0), site.active(b, 1));
    if x_active {
        // The derivative in the shape, by its own operation.
        let da = if upper {
            B::LogGammaQDa
        } else {
            B::LogGammaPDa
        };
        let d = bin(b, da, x, z, loc)?;
        let c = bin(b, B::Mul, dy, d, loc)?;
        contribute(b, x, c, loc)?;
    }
    if z_active {
        // d ln P / dz = z^(a-1) e^-z / (Gamma(a) P) = e^((a-1) ln z - z - lgamma(a) - y);
        // the same over Q with the opposite sign.
        let one = b.constant(elem, 1.0, loc)?;
        let am1 = bin(b, B::Sub, x, one, loc)?;
        let lz = un(b, U::Ln, z, loc)?;
        let t = bin(b, B::Mul, am1, lz, loc)?;
        let t = bin(b, B::Sub, t, z, loc)?;
        let g = un(b, U::Lgamma, x, loc)?;
        let t = bin(b, B::Sub, t, g, loc)?;
        let t = bin(b, B::Sub, t, y, loc)?;
        let e = un(b, U::Exp, t, loc)?;
        let c = bin(b, B::Mul, dy, e, loc)?;
        let c = if upper { un(b, U::Neg, c, loc)? } else { c };
        contribute(b, z, c, loc)?;
    }
    Ok(())
}

/// `ln B(a, z)`: `digamma(a) - digamma(a + z)` in `a`, the same in `z`.
fn lbeta_adjoint(b: &mut Builder, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    let sum = bin(b, B::Add, args[0], args[1], loc)?;
    let psi_sum = un(b, U::Digamma, sum, loc)?;
    for (k, &arg) in args.iter().enumerate().take(2) {
        if site.active(b, k) {
            let psi = un(b, U::Digamma, arg, loc)?;
            let d = bin(b, B::Sub, psi, psi_sum, loc)?;
            let c = bin(b, B::Mul, dy, d, loc)?;
            contribute(b, arg, c, loc)?;
        }
    }
    Ok(())
}

/// `ln I_x(a, z)` and `ln(1 - I_x(a, z))`, the regularized incomplete beta
/// function and its complement, in the shapes `a`, `z` and the point `x`;
/// the other ternary operations (their derivatives, the binomial quantile)
/// have no adjoint.
fn incomplete_beta_adjoint(b: &mut Builder, op: T, site: Site) -> DeriveResult<()> {
    let Site { args, y, dy, loc } = site;
    let (shape_derivatives, complement) = match op {
        T::LogBetaInc => ([T::LogBetaIncDa, T::LogBetaIncDb], false),
        T::LogBetaIncC => ([T::LogBetaIncCDa, T::LogBetaIncCDb], true),
        T::LogBetaIncDa
        | T::LogBetaIncDb
        | T::LogBetaIncCDa
        | T::LogBetaIncCDb
        | T::BinomialInv => return Ok(()),
    };
    let (a, z, x) = (args[0], args[1], args[2]);
    for (k, derivative) in shape_derivatives.into_iter().enumerate() {
        if site.active(b, k) {
            // The derivatives in the shapes, by their own operations.
            let d = b.prim(Prim::Ternary(derivative), vec![a, z, x], loc)?;
            let c = bin(b, B::Mul, dy, d, loc)?;
            contribute(b, args[k], c, loc)?;
        }
    }
    if site.active(b, 2) {
        // d ln I / dx = x^(a-1) (1-x)^(z-1) / (B(a, z) I)
        //             = e^((a-1) ln x + (z-1) ln(1-x) - ln B(a, z) - y);
        // the same over 1 - I with the opposite sign.
        let elem = b.ty(y).elem;
        let one = b.constant(elem, 1.0, loc)?;
        let am1 = bin(b, B::Sub, a, one, loc)?;
        let zm1 = bin(b, B::Sub, z, one, loc)?;
        let lx = un(b, U::Ln, x, loc)?;
        let nx = un(b, U::Neg, x, loc)?;
        let l1x = un(b, U::Ln1p, nx, loc)?;
        let t = bin(b, B::Mul, am1, lx, loc)?;
        let u = bin(b, B::Mul, zm1, l1x, loc)?;
        let t = bin(b, B::Add, t, u, loc)?;
        let lb = bin(b, B::Lbeta, a, z, loc)?;
        let t = bin(b, B::Sub, t, lb, loc)?;
        let t = bin(b, B::Sub, t, y, loc)?;
        let e = un(b, U::Exp, t, loc)?;
        let c = bin(b, B::Mul, dy, e, loc)?;
        let c = if complement {
            un(b, U::Neg, c, loc)?
        } else {
            c
        };
        contribute(b, x, c, loc)?;
    }
    Ok(())
}

/// The Cholesky factorization, triangular solves and the lower triangle.
fn factor_adjoint(b: &mut Builder, prim: &Prim, site: Site) -> DeriveResult<()> {
    let Site { args, y, dy, loc } = site;
    match prim {
        // The standard reverse-mode rule, in one kernel.
        Prim::Cholesky => {
            let c = b.prim(Prim::CholeskyAdjoint, vec![y, dy], loc)?;
            contribute(b, args[0], c, loc)
        }
        // y = L⁻¹ r: dr = L⁻ᵀ dy, dL = -tril(dr yᵀ).
        Prim::TriSolve => {
            let (l, r) = (args[0], args[1]);
            let dr = b.prim(Prim::TriSolveT, vec![l, dy], loc)?;
            if site.active(b, 0) {
                let outer = if b.ty(y).dims.len() == 1 {
                    b.prim(Prim::Outer, vec![dr, y], loc)?
                } else {
                    let yt = b.prim(Prim::Transpose, vec![y], loc)?;
                    b.prim(Prim::Matmul, vec![dr, yt], loc)?
                };
                let lower = b.prim(Prim::Tril, vec![outer], loc)?;
                let c = un(b, U::Neg, lower, loc)?;
                contribute(b, l, c, loc)?;
            }
            contribute(b, r, dr, loc)
        }
        Prim::Tril => {
            let c = b.prim(Prim::Tril, vec![dy], loc)?;
            contribute(b, args[0], c, loc)
        }
        Prim::Diagonal => {
            let c = b.prim(Prim::DiagMatrix, vec![dy], loc)?;
            contribute(b, args[0], c, loc)
        }
        Prim::DiagMatrix => {
            let c = b.prim(Prim::Diagonal, vec![dy], loc)?;
            contribute(b, args[0], c, loc)
        }
        _ => derive_error(format!("`{prim}` is not a factorization"), loc),
    }
}

/// `fill`, array literals, indexing, slicing and their assignments.
fn layout_adjoint(b: &mut Builder, prim: &Prim, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    match prim {
        Prim::Fill(_) => {
            let s = sum_leading(b, dy, loc)?;
            contribute(b, args[0], s, loc)
        }
        Prim::Stack => {
            for (i, a) in args.iter().enumerate() {
                if b.active[a.0 as usize] {
                    let idx = b.prim(Prim::Const(Scalar::Usize(i as u64)), Vec::new(), loc)?;
                    let c = b.prim(Prim::Index, vec![dy, idx], loc)?;
                    contribute(b, *a, c, loc)?;
                }
            }
            Ok(())
        }
        Prim::Index => add_into(b, Prim::Index, Prim::IndexSet, site),
        Prim::IndexSet => set_adjoint(b, Prim::Index, Prim::IndexSet, site),
        Prim::Slice(len) => add_into(b, Prim::Slice(*len), Prim::SliceSet, site),
        Prim::SliceSet => {
            let len = b.ty(args[2]).dims[0];
            set_adjoint(b, Prim::Slice(len), Prim::SliceSet, site)
        }
        _ => derive_error(format!("`{prim}` is not a layout operation"), loc),
    }
}

/// The adjoint of a read of part of `a` (`a[i]`, `a[i..i + len]`: `read`):
/// `dy` added into that part of the adjoint of `a` by `write` (`index_set`,
/// `slice_set`), in place of a sum of a mostly-zero array.
fn add_into(b: &mut Builder, read: Prim, write: Prim, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    let (a, i) = (args[0], args[1]);
    if !site.active(b, 0) {
        return Ok(());
    }
    if b.view(a).is_some() {
        // `a` holds a differentiated static or a row of one: its adjoint
        // goes to the member's log, `dy` in the part read.
        let ty = b.ty(a).clone();
        let zeros = b.filled(&ty, 0.0, loc)?;
        let placed = b.prim(write, vec![zeros, i, dy], loc)?;
        return b.accumulate(a, placed, loc);
    }
    let (base, part) = match b.adj.get(&a).copied() {
        Some(old) => {
            let old = b.full(a, old, loc)?;
            let items = b.prim(read, vec![old, i], loc)?;
            (old, bin(b, B::Add, items, dy, loc)?)
        }
        None => {
            let ty = b.ty(a).clone();
            (b.filled(&ty, 0.0, loc)?, dy)
        }
    };
    let new = b.prim(write, vec![base, i, part], loc)?;
    b.adj.insert(a, new);
    Ok(())
}

/// The adjoint of a copy of `a` with a part replaced by `v` (`write`:
/// `index_set`, `slice_set`): `v` gets that part of `dy` (`read`), `a`
/// the rest of `dy` (zeros written into the part).
fn set_adjoint(b: &mut Builder, read: Prim, write: Prim, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    let (a, i, v) = (args[0], args[1], args[2]);
    if site.active(b, 2) {
        let c = b.prim(read, vec![dy, i], loc)?;
        contribute(b, v, c, loc)?;
    }
    if site.active(b, 0) {
        let vty = b.ty(v).clone();
        let zeros = b.filled(&vty, 0.0, loc)?;
        let c = b.prim(write, vec![dy, i, zeros], loc)?;
        contribute(b, a, c, loc)?;
    }
    Ok(())
}

/// Products and transposition: each adjoint is a product again (`matvec`
/// gives `vecmat` and `outer`, `matmul` gives `matmul`s), so that the
/// batched executors' product paths serve the gradient.
fn linalg_adjoint(b: &mut Builder, prim: &Prim, site: Site) -> DeriveResult<()> {
    let Site { args, dy, loc, .. } = site;
    match prim {
        Prim::Dot => {
            let (x, z) = (args[0], args[1]);
            if site.active(b, 0) {
                let c = bin(b, B::Mul, z, dy, loc)?;
                contribute(b, x, c, loc)?;
            }
            if site.active(b, 1) {
                let c = bin(b, B::Mul, x, dy, loc)?;
                contribute(b, z, c, loc)?;
            }
            Ok(())
        }
        Prim::Matvec => {
            let (m, v) = (args[0], args[1]);
            if site.active(b, 1) {
                let c = b.prim(Prim::Vecmat, vec![dy, m], loc)?;
                contribute(b, v, c, loc)?;
            }
            // The contribution to a differentiated static, as its two vectors.
            if !b.record_outer(m, dy, v, loc) && site.active(b, 0) {
                let c = b.prim(Prim::Outer, vec![dy, v], loc)?;
                contribute(b, m, c, loc)?;
            }
            Ok(())
        }
        Prim::Vecmat => {
            let (v, m) = (args[0], args[1]);
            if site.active(b, 0) {
                let c = b.prim(Prim::Matvec, vec![m, dy], loc)?;
                contribute(b, v, c, loc)?;
            }
            if !b.record_outer(m, v, dy, loc) && site.active(b, 1) {
                let c = b.prim(Prim::Outer, vec![v, dy], loc)?;
                contribute(b, m, c, loc)?;
            }
            Ok(())
        }
        Prim::Matmul => {
            let (x, z) = (args[0], args[1]);
            if site.active(b, 0) {
                let zt = b.prim(Prim::Transpose, vec![z], loc)?;
                let c = b.prim(Prim::Matmul, vec![dy, zt], loc)?;
                contribute(b, x, c, loc)?;
            }
            if site.active(b, 1) {
                let xt = b.prim(Prim::Transpose, vec![x], loc)?;
                let c = b.prim(Prim::Matmul, vec![xt, dy], loc)?;
                contribute(b, z, c, loc)?;
            }
            Ok(())
        }
        Prim::Transpose => {
            let c = b.prim(Prim::Transpose, vec![dy], loc)?;
            contribute(b, args[0], c, loc)
        }
        Prim::Outer => {
            let (x, z) = (args[0], args[1]);
            if site.active(b, 0) {
                let c = b.prim(Prim::Matvec, vec![dy, z], loc)?;
                contribute(b, x, c, loc)?;
            }
            if site.active(b, 1) {
                let c = b.prim(Prim::Vecmat, vec![x, dy], loc)?;
                contribute(b, z, c, loc)?;
            }
            Ok(())
        }
        _ => derive_error(format!("`{prim}` is not a product or a transposition"), loc),
    }
}

/// Reductions and `softmax`.
fn reduction_adjoint(b: &mut Builder, prim: &Prim, site: Site) -> DeriveResult<()> {
    let Site { args, y, dy, loc } = site;
    let elem = b.ty(y).elem;
    let a = args[0];
    let op = match prim {
        Prim::Reduce(op) => *op,
        Prim::Softmax => {
            // dx = y * (dy - <dy, y>)
            let inner = b.prim(Prim::Dot, vec![dy, y], loc)?;
            let centered = bin(b, B::Sub, dy, inner, loc)?;
            let c = bin(b, B::Mul, y, centered, loc)?;
            return contribute(b, a, c, loc);
        }
        _ => return derive_error(format!("`{prim}` is not a reduction"), loc),
    };
    let aty = b.ty(a).clone();
    match op {
        // The adjoint of a sum is `dy` broadcast: kept as the scalar.
        ReduceOp::Sum => contribute(b, a, dy, loc),
        ReduceOp::Mean => {
            let n = match aty.dims[0] {
                Dim::Fixed(n) => b.constant(elem, n as f64, loc)?,
                Dim::Symbolic(s) => {
                    let u = b.prim(Prim::SymbolValue(s), Vec::new(), loc)?;
                    b.prim(Prim::Cast(elem), vec![u], loc)?
                }
            };
            let q = bin(b, B::Div, dy, n, loc)?;
            contribute(b, a, q, loc)
        }
        ReduceOp::Max | ReduceOp::Min => {
            // `dy` split evenly among the elements equal to the result (as
            // `jax.numpy.max`): `hit` is one there, zero elsewhere. A
            // finite result `y`: `a - y` is zero exactly there. An infinite
            // one: `a - y` is NaN exactly there and at the NaN elements.
            let e = bin(b, B::Sub, a, y, loc)?;
            let unequal = not_zero(b, e, loc)?;
            let one = b.constant(elem, 1.0, loc)?;
            let equal = bin(b, B::Sub, one, unequal, loc)?;
            let nan_e = is_nan(b, e, loc)?;
            let nan_a = is_nan(b, a, loc)?;
            let infinite = bin(b, B::Sub, nan_e, nan_a, loc)?;
            let hit = bin(b, B::Add, equal, infinite, loc)?;
            let count = b.prim(Prim::Reduce(ReduceOp::Sum), vec![hit], loc)?;
            let share = bin(b, B::Div, dy, count, loc)?;
            let c = bin(b, B::Mul, hit, share, loc)?;
            contribute(b, a, c, loc)
        }
        ReduceOp::LogSumExp => {
            let s = b.prim(Prim::Softmax, vec![a], loc)?;
            let c = bin(b, B::Mul, s, dy, loc)?;
            contribute(b, a, c, loc)
        }
        ReduceOp::Argmax | ReduceOp::Argmin => Ok(()),
    }
}
