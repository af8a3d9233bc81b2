//! The function a gradient derives from: a function that is one line of
//! primitives (one block, or one block with check arms beside it: see
//! `autobatch_ir::line`) and calls of such functions is derived from its
//! copy with those calls replaced by the callees' operations, their check
//! arms placed after the same operations.
//!
//! The derivation of a function that is one line of primitives is fused
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

use autobatch_ir::line::Line;
use autobatch_ir::{FuncId, Function, Op, Prim, Program, Var, VarData};

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
    let (mut copy, line) = flatten(program, f, &mut vec![f])?;
    copy.set_line(line);
    Some(program.functions.push(copy))
}

/// `f` as one line of primitives and check arms (`autobatch_ir::line`),
/// its calls spliced (recursively): a copy of `f` holding the spliced
/// callees' variables too (its blocks still `f`'s), and the line; `None`
/// if it, or a callee, is not one line ending in a return, makes a
/// catching call, forks, or calls a function of `active` (a cycle).
fn flatten(program: &Program, f: FuncId, active: &mut Vec<FuncId>) -> Option<(Function, Line)> {
    let function = program.functions.get(f)?;
    let line = function.line()?;
    let mut out = function.clone();
    let mut spliced = Line {
        ops: Vec::with_capacity(line.ops.len()),
        arms: Vec::new(),
        results: line.results.clone(),
    };
    let mut arms = line.arms.iter().peekable();
    for (k, op) in line.ops.iter().enumerate() {
        while let Some(arm) = arms.next_if(|a| a.at == k) {
            spliced.arms.push(arm.renamed(spliced.ops.len(), |v| v));
        }
        match op {
            Op::Prim { .. } => spliced.ops.push(op.clone()),
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
                let (callee_fn, callee_line) = callee_body?;
                splice(&mut out, &callee_fn, &callee_line, dsts, args, &mut spliced);
            }
            Op::Call { .. } | Op::Fork { .. } => return None,
        }
    }
    for arm in arms {
        spliced.arms.push(arm.renamed(spliced.ops.len(), |v| v));
    }
    Some((out, spliced))
}

/// Appends to `out` the operations and check arms of `callee` (a line of
/// primitives ending in a return, in `callee_fn`) with its parameters
/// bound to `args` and its results copied to `dsts`, its other variables
/// new ones of `caller`, each operation at its own location.
fn splice(
    caller: &mut Function,
    callee_fn: &Function,
    callee: &Line,
    dsts: &[Var],
    args: &[Var],
    out: &mut Line,
) {
    let written: Vec<Var> = callee
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
    for (p, a) in callee_fn.params.iter().zip(args) {
        if !written.contains(p) {
            map.insert(*p, *a);
        }
    }
    let mut var = |v: Var, map: &mut HashMap<Var, Var>| {
        *map.entry(v).or_insert_with(|| {
            caller.vars.push(VarData {
                ty: callee_fn.vars[v].ty.clone(),
                name: callee_fn.vars[v].name.clone(),
            })
        })
    };
    for (p, a) in callee_fn.params.iter().zip(args) {
        if written.contains(p) {
            let copy = var(*p, &mut map);
            out.ops.push(Op::Prim {
                dst: Some(copy),
                prim: Prim::Copy,
                args: vec![*a],
                loc: callee_fn.loc,
            });
        }
    }
    let start = out.ops.len();
    for op in &callee.ops {
        let Op::Prim {
            dst,
            prim,
            args,
            loc,
        } = op
        else {
            unreachable!("flatten gives a line of primitives");
        };
        let args = args.iter().map(|a| var(*a, &mut map)).collect();
        out.ops.push(Op::Prim {
            dst: dst.map(|d| var(d, &mut map)),
            prim: prim.clone(),
            args,
            loc: *loc,
        });
    }
    for arm in &callee.arms {
        out.arms
            .push(arm.renamed(start + arm.at, |v| var(v, &mut map)));
    }
    for (r, d) in callee.results.iter().zip(dsts) {
        let value = var(*r, &mut map);
        out.ops.push(Op::Prim {
            dst: Some(*d),
            prim: Prim::Copy,
            args: vec![value],
            loc: callee_fn.loc,
        });
    }
}
