//! What the native compiler takes: the functions an entry reaches, and
//! the first construct among them it does not compile yet (with where it
//! is), so that the executor can fall back and say why.
//!
//! Phase 1 compiles scalar control: every variable a scalar (`bool`,
//! `i32`, `i64`, `usize`, `f32`, `f64`); constants, copies, symbolic
//! dimensions, unary and binary operations, comparisons, casts, `select`,
//! `assert`; calls (catching ones included), branches, loops, returns. Not
//! yet: arrays and everything on them (indexing, products, reductions,
//! `fill`, `stack`, `softmax`), statics, random draws, forks (`join`,
//! `map`, `pfor`).

use autobatch_ir::{BinaryOp, FuncId, Function, Loc, Op, Prim, Program, UnaryOp};
use autobatch_types::ScalarType;

use crate::shims;

/// The functions `entry` reaches through calls, in id order, or why the
/// program cannot be compiled: the first unsupported construct met.
pub(crate) fn reachable(program: &Program, entry: FuncId) -> Result<Vec<FuncId>, String> {
    let mut seen = vec![false; program.functions.len()];
    let mut stack = vec![entry];
    seen[entry.0 as usize] = true;
    while let Some(id) = stack.pop() {
        let function = &program.functions[id];
        check_function(function)?;
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
fn check_function(function: &Function) -> Result<(), String> {
    for block in function.blocks.values() {
        for op in &block.ops {
            match op {
                Op::Prim {
                    prim, args, loc, ..
                } => {
                    let types: Vec<ScalarType> =
                        args.iter().map(|v| function.vars[*v].ty.elem).collect();
                    let scalar_operands = args.iter().all(|v| function.vars[*v].ty.is_scalar());
                    if !scalar_operands || !supported(prim, &types) {
                        return Err(format!(
                            "`{}` at {} is not compiled yet",
                            prim.name(),
                            at(*loc)
                        ));
                    }
                }
                Op::Call { .. } => {}
                Op::Fork { loc, .. } => {
                    return Err(format!(
                        "the fork (`join`, `map` or `pfor`) at {} is not compiled yet",
                        at(*loc)
                    ))
                }
            }
        }
    }
    for var in function.vars.values() {
        if !var.ty.is_scalar() {
            let name = var.name.as_deref().unwrap_or("a temporary");
            return Err(format!(
                "the array `{name}` of `{}` (at {}) is not compiled yet",
                function.name,
                at(function.loc)
            ));
        }
    }
    Ok(())
}

/// Whether native code computes `prim` on scalar operands of `types`
/// (itself or by a shim).
pub(crate) fn supported(prim: &Prim, types: &[ScalarType]) -> bool {
    let first = types.first().copied();
    match prim {
        Prim::Const(_)
        | Prim::Copy
        | Prim::SymbolValue(_)
        | Prim::Compare(_)
        | Prim::Cast(_)
        | Prim::Select
        | Prim::Assert { .. } => true,
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
        BinaryOp::Powi | BinaryOp::Powf | BinaryOp::Pow => shims::binary(op, t).is_some(),
    }
}
