//! The function a gradient derives from: a function that is one block of
//! primitives and calls of such functions is derived from its copy with
//! those calls replaced by the callees' operations.
//!
//! The derivation of a function that is one block of primitives is fused
//! (`autobatch_autodiff`, module `fuse`): its forward and backward
//! operations run as one block and nothing is taped. A call in that block
//! would instead tape the callee's values and run its forward and
//! backward parts as separate functions. A model written as `fn model`
//! is such a function (the generated `log_density` calls the generated
//! transform, then `model`), so its gradient is derived from the copy
//! made here, which holds the same operations in the same order at the
//! same locations: the same values, bits and faults. The copy keeps the
//! function's name and is reached only through the gradient; the
//! function itself is unchanged (its steps and depth are its own).

use std::collections::HashMap;

use autobatch_ir::{FuncId, Function, Op, Prim, Program, Terminator, Var, VarData};

/// The most calls deep a callee is spliced (deeper ones stay calls, and
/// the function is derived as it is).
const MAX_DEPTH: usize = 8;

/// The id of the copy of `f` with its calls spliced, added to `program`;
/// `None` (nothing added) when `f` has no call or is not of the form the
/// module doc describes.
pub(crate) fn flattened(program: &mut Program, f: FuncId) -> Option<FuncId> {
    let function = &program.functions[f];
    if !function
        .blocks
        .values()
        .any(|b| b.ops.iter().any(|op| matches!(op, Op::Call { .. })))
    {
        return None;
    }
    let copy = flatten(program, f, &mut vec![f])?;
    Some(program.functions.push(copy))
}

/// `f` as one block of primitives, its calls spliced (recursively);
/// `None` if it, or a callee, is not one block ending in a return, makes a
/// catching call, forks, or calls a function of `active` (a cycle).
fn flatten(program: &Program, f: FuncId, active: &mut Vec<FuncId>) -> Option<Function> {
    let function = program.functions.get(f)?;
    let [block] = &function.blocks.values().collect::<Vec<_>>()[..] else {
        return None;
    };
    let Terminator::Return(_) = &block.term else {
        return None;
    };
    let mut out = function.clone();
    let mut ops = Vec::with_capacity(block.ops.len());
    for op in &block.ops {
        match op {
            Op::Prim { .. } => ops.push(op.clone()),
            Op::Call {
                dsts,
                callee,
                args,
                catch: false,
                ..
            } => {
                if active.contains(callee) || active.len() >= MAX_DEPTH {
                    return None;
                }
                active.push(*callee);
                let callee_body = flatten(program, *callee, active);
                active.pop();
                splice(&mut out, &callee_body?, dsts, args, &mut ops);
            }
            Op::Call { .. } | Op::Fork { .. } => return None,
        }
    }
    out.blocks[Function::ENTRY].ops = ops;
    Some(out)
}

/// Appends to `out` the operations of `callee` (one block of primitives
/// ending in a return) with its parameters bound to `args` and its results
/// copied to `dsts`, its other variables new ones of `caller`, each
/// operation at its own location.
fn splice(caller: &mut Function, callee: &Function, dsts: &[Var], args: &[Var], out: &mut Vec<Op>) {
    let block = &callee.blocks[Function::ENTRY];
    let Terminator::Return(results) = &block.term else {
        unreachable!("flatten gives a block ending in a return");
    };
    let written: Vec<Var> = block
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::Prim { dst, .. } => *dst,
            _ => None,
        })
        .collect();
    let mut map: HashMap<Var, Var> = HashMap::new();
    // A parameter the callee never assigns reads the argument itself; one
    // it assigns is a copy, so that the caller's variable keeps its value.
    for (p, a) in callee.params.iter().zip(args) {
        if !written.contains(p) {
            map.insert(*p, *a);
        }
    }
    let mut var = |v: Var, map: &mut HashMap<Var, Var>| {
        *map.entry(v).or_insert_with(|| {
            caller.vars.push(VarData {
                ty: callee.vars[v].ty.clone(),
                name: callee.vars[v].name.clone(),
            })
        })
    };
    for (p, a) in callee.params.iter().zip(args) {
        if written.contains(p) {
            let copy = var(*p, &mut map);
            out.push(Op::Prim {
                dst: Some(copy),
                prim: Prim::Copy,
                args: vec![*a],
                loc: callee.loc,
            });
        }
    }
    for op in &block.ops {
        let Op::Prim {
            dst,
            prim,
            args,
            loc,
        } = op
        else {
            unreachable!("flatten gives a block of primitives");
        };
        let args = args.iter().map(|a| var(*a, &mut map)).collect();
        out.push(Op::Prim {
            dst: dst.map(|d| var(d, &mut map)),
            prim: prim.clone(),
            args,
            loc: *loc,
        });
    }
    for (r, d) in results.iter().zip(dsts) {
        let value = var(*r, &mut map);
        out.push(Op::Prim {
            dst: Some(*d),
            prim: Prim::Copy,
            args: vec![value],
            loc: callee.loc,
        });
    }
}
