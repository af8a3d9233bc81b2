//! Parameters passed unchanged down the whole gradient: the backward part
//! takes them as arguments instead of from the tape.
//!
//! A parameter of a function is *passed* when nothing in the function
//! assigns it and every call or fork of the function anywhere in the
//! program passes it (whole, not an element of a `map`'s array nor its
//! index) a passed parameter of the caller. Its value is then the one the
//! outermost derived function received (the vjp's own argument), in every
//! activation of the function under that vjp: no operation of the gradient
//! changes it. The backward part of a function takes one argument per
//! passed parameter after the result adjoints, and its callers hand it
//! theirs (the vjp its own parameter), so a call or fork saves no copy of
//! it per activation, and a recomputation reads it where it lives.

use std::collections::HashMap;

use autobatch_ir::{fork_calls, Block, EntityRef, Function, InstanceArg, Op, Program, Var};

use super::{CallKind, Invariant};
use crate::{derive_error, DeriveResult, Deriver};

/// Per function of `program`, per parameter, whether it is passed (see the
/// module doc): the greatest set that every call site keeps.
pub(crate) fn passed_params(program: &Program) -> Vec<Vec<bool>> {
    let mut passed: Vec<Vec<bool>> = program
        .functions
        .values()
        .map(|f| {
            let mut assigned = vec![false; f.vars.len()];
            for op in f.blocks.values().flat_map(|b| &b.ops) {
                for d in op.defs() {
                    assigned[d.index()] = true;
                }
            }
            f.params
                .iter()
                .enumerate()
                .map(|(k, p)| !assigned[p.index()] && !f.params[..k].contains(p))
                .collect()
        })
        .collect();
    loop {
        let mut changed = false;
        for (caller_id, caller) in program.functions.iter() {
            let caller_id = caller_id.index();
            let is_passed = |passed: &[Vec<bool>], v: Var| {
                caller
                    .params
                    .iter()
                    .position(|p| *p == v)
                    .is_some_and(|k| passed[caller_id][k])
            };
            for op in caller.blocks.values().flat_map(|b| &b.ops) {
                for (callee, args) in sites(program, op) {
                    for (k, arg) in args.iter().enumerate() {
                        let keeps = matches!(arg, InstanceArg::Whole(v) if is_passed(&passed, *v));
                        let Some(flag) = passed.get_mut(callee).and_then(|f| f.get_mut(k)) else {
                            continue;
                        };
                        if *flag && !keeps {
                            *flag = false;
                            changed = true;
                        }
                    }
                }
            }
        }
        if !changed {
            return passed;
        }
    }
}

/// The calls operation `op` makes: per callee (as an index), its arguments.
fn sites(program: &Program, op: &Op) -> Vec<(usize, Vec<InstanceArg>)> {
    match op {
        Op::Call { callee, args, .. } => vec![(
            callee.index(),
            args.iter().map(|a| InstanceArg::Whole(*a)).collect(),
        )],
        Op::Fork {
            dsts,
            args,
            instances,
            ..
        } => fork_calls(program, dsts, args, instances)
            .into_iter()
            .map(|call| (call.callee.index(), call.args))
            .collect(),
        Op::Prim { .. } => Vec::new(),
    }
}

/// Per instance call of taped call or fork `op` (one for a call or a
/// `map`), the arguments its callee's backward part takes after the result
/// adjoints: those at the callee's passed parameters ([`passed_params`]).
/// `None` when one is not a variable passed whole.
pub(super) fn passed_args(d: &Deriver, op: &Op) -> Option<Vec<Vec<Var>>> {
    if matches!(op, Op::Prim { .. }) {
        return None;
    }
    sites(d.program, op)
        .into_iter()
        .map(|(callee, args)| {
            args.iter()
                .zip(&d.passed[callee])
                .filter(|(_, p)| **p)
                .map(|(a, _)| match a {
                    InstanceArg::Whole(v) => Some(*v),
                    InstanceArg::Element(_) | InstanceArg::Index => None,
                })
                .collect()
        })
        .collect()
}

/// Refuses `g` when a taped call or fork passes a callee's passed
/// parameter ([`passed_params`]) something that is not one of `g`'s: the
/// analysis and `g` disagree, a bug.
pub(super) fn check_passed(
    d: &Deriver,
    g: &Function,
    calls: &HashMap<(usize, usize), CallKind>,
    invariants: &[Option<Invariant>],
) -> DeriveResult<()> {
    for (&(b, k), kind) in calls {
        if !matches!(kind, CallKind::Taped { .. } | CallKind::TapedFork { .. }) {
            continue;
        }
        let op = &g.blocks[Block::new(b)].ops[k];
        let fits = passed_args(d, op).is_some_and(|calls| {
            calls
                .iter()
                .flatten()
                .all(|v| invariants[v.index()] == Some(Invariant::Passed))
        });
        if !fits {
            return derive_error(
                format!(
                    "cannot differentiate `{}`: an argument passed down unchanged is not found again",
                    g.name
                ),
                op.loc(),
            );
        }
    }
    Ok(())
}
