//! What the native compiler takes: the functions an entry reaches, and
//! the first construct among them it does not compile yet (with where it
//! is), so that the executor can fall back and say why.
//!
//! It compiles scalar control (every scalar variable in a register),
//! arrays in member-local memory whose shapes are fixed once the symbols
//! are bound (or, for a ragged batch's dimensions, read from each member's
//! lengths, `crate::lengths`), and every primitive: scalar ones inline or through a shim,
//! the others (arrays, statics, random draws) through the host
//! (`crate::arrays`); calls, catching calls, forks (`join`, `map`,
//! `pfor`), branches, loops, returns. Not yet: calls of host primitives.

use autobatch_ir::{BinaryOp, FuncId, Function, Loc, Op, Prim, Program, UnaryOp};
use autobatch_types::{Dim, ScalarType};

use crate::shims;

/// The functions `entry` reaches through calls, in id order, or why the
/// program cannot be compiled: the first unsupported construct met.
pub(crate) fn reachable(
    program: &Program,
    entry: FuncId,
    symbols: &[u64],
) -> Result<Vec<FuncId>, String> {
    let mut seen = vec![false; program.functions.len()];
    let mut stack = vec![entry];
    seen[entry.0 as usize] = true;
    while let Some(id) = stack.pop() {
        let function = &program.functions[id];
        check_function(function, symbols)?;
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            for callee in op.callees() {
                if !seen[callee.0 as usize] {
                    seen[callee.0 as usize] = true;
                    stack.push(callee);
                }
            }
        }
    }
    Ok(program
        .functions
        .keys()
        .filter(|id| seen[id.0 as usize])
        .collect())
}

fn at(loc: Loc) -> String {
    format!("{}:{}", loc.line, loc.column)
}

/// The first thing in `function` the compiler does not take, as a reason.
fn check_function(function: &Function, symbols: &[u64]) -> Result<(), String> {
    for block in function.blocks.values() {
        for op in &block.ops {
            if let Op::Prim {
                prim: Prim::Host(host),
                loc,
                ..
            } = op
            {
                return Err(format!(
                    "the call of the host primitive `{}` at {} is not compiled yet",
                    host.name,
                    at(*loc)
                ));
            }
        }
    }
    for var in function.vars.values() {
        for dim in &var.ty.dims {
            if let Dim::Symbolic(s) = dim {
                if s.0 as usize >= symbols.len() {
                    let name = var.name.as_deref().unwrap_or("a temporary");
                    return Err(format!(
                        "the length of `{name}` of `{}` (at {}) is a symbol that is not bound",
                        function.name,
                        at(function.loc)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Whether native code computes `prim` inline (or by a scalar shim): it
/// has only scalar operands of `types` and a scalar result, and needs no
/// static or random stream. Every other primitive goes to the host
/// (`crate::arrays`).
pub(crate) fn inline(prim: &Prim, types: &[ScalarType], all_scalar: bool) -> bool {
    all_scalar && supported(prim, types)
}

/// Whether native code computes `prim` on scalar operands of `types`
/// (itself or by a shim).
fn supported(prim: &Prim, types: &[ScalarType]) -> bool {
    let first = types.first().copied();
    match prim {
        Prim::Const(_)
        | Prim::Copy
        | Prim::SymbolValue(_)
        | Prim::Compare(_)
        | Prim::Cast(_)
        | Prim::Select
        | Prim::Assert { .. }
        | Prim::Check { .. } => true,
        Prim::Unary(op) => first.is_some_and(|t| unary_supported(*op, t)),
        Prim::Binary(op) => first.is_some_and(|t| binary_supported(*op, t)),
        _ => false,
    }
}

fn unary_supported(op: UnaryOp, t: ScalarType) -> bool {
    match op {
        UnaryOp::Neg | UnaryOp::Abs => t.is_numeric(),
        UnaryOp::Not => !t.is_float(),
        UnaryOp::Sqrt | UnaryOp::Recip | UnaryOp::IsNan | UnaryOp::IsFinite => t.is_float(),
        _ => shims::unary(op, t).is_some(),
    }
}

fn binary_supported(op: BinaryOp, t: ScalarType) -> bool {
    match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => t.is_numeric(),
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => !t.is_float(),
        BinaryOp::Shl | BinaryOp::Shr => t.is_integer(),
        BinaryOp::Rem | BinaryOp::Max | BinaryOp::Min => {
            t.is_integer() || shims::binary(op, t).is_some()
        }
        BinaryOp::Powi
        | BinaryOp::Powf
        | BinaryOp::Pow
        | BinaryOp::Atan2
        | BinaryOp::LogGammaP
        | BinaryOp::LogGammaQ
        | BinaryOp::LogGammaPDa
        | BinaryOp::LogGammaQDa
        | BinaryOp::LogGammaPInv
        | BinaryOp::PoissonInv
        | BinaryOp::VonMisesDraw
        | BinaryOp::Lbeta => shims::binary(op, t).is_some(),
    }
}
