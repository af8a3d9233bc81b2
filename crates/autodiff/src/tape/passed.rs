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
//! it per activation, and a recomputation reads it where it lives. Once
//! every backward part is built, those it does not read (itself, or
//! through the backward parts it hands it to) are taken off its
//! parameters and its callers' arguments ([`drop_unread_passed`]).

use std::collections::HashMap;

use autobatch_ir::{
    fork_calls, Block, EntityRef, FuncId, Function, InstanceArg, Instances, Op, Program, Var,
};

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

/// A backward part built over a tape: its id and the number of its
/// parameters before the passed ones (the result adjoints).
#[derive(Clone, Copy)]
pub(crate) struct BackwardPart {
    pub id: FuncId,
    pub adjoints: usize,
}

/// Takes off every backward part in `built` the passed parameters it does
/// not read, and the arguments its callers hand them: a parameter is read
/// when an operation or a terminator of the part uses it other than to
/// hand it to a backward part's passed parameter that is itself not read
/// (the greatest such set, so that a recursion handing a parameter down
/// and never reading it drops it at every level).
pub(crate) fn drop_unread_passed(built: &mut [(FuncId, Function)], parts: &[BackwardPart]) {
    let part_of: HashMap<FuncId, usize> =
        parts.iter().enumerate().map(|(k, p)| (p.id, k)).collect();
    let index: HashMap<FuncId, usize> = built
        .iter()
        .enumerate()
        .map(|(k, (id, _))| (*id, k))
        .collect();
    let passed = |p: &BackwardPart, built: &[(FuncId, Function)]| {
        built[index[&p.id]].1.params.len() - p.adjoints
    };
    // Per part, per passed parameter: whether it is read.
    let mut read: Vec<Vec<bool>> = parts
        .iter()
        .map(|p| vec![false; passed(p, built)])
        .collect();
    // Per part, per passed parameter: the (part, passed parameter) it is
    // handed to.
    let mut handed: Vec<Vec<Vec<(usize, usize)>>> = parts
        .iter()
        .map(|p| vec![Vec::new(); passed(p, built)])
        .collect();
    for (k, p) in parts.iter().enumerate() {
        let f = &built[index[&p.id]].1;
        let param_of: HashMap<Var, usize> = f.params[p.adjoints..]
            .iter()
            .enumerate()
            .map(|(j, v)| (*v, j))
            .collect();
        for data in f.blocks.values() {
            for op in &data.ops {
                let targets = handed_to(op, &part_of, parts);
                for (position, arg) in op.uses().iter().enumerate() {
                    let Some(j) = param_of.get(arg) else { continue };
                    match targets.get(&position) {
                        Some(target) => handed[k][*j].push(*target),
                        None => read[k][*j] = true,
                    }
                }
            }
            for v in data.term.uses() {
                if let Some(j) = param_of.get(v) {
                    read[k][*j] = true;
                }
            }
        }
    }
    let mut changed = true;
    while changed {
        changed = false;
        for k in 0..parts.len() {
            for j in 0..read[k].len() {
                if !read[k][j] && handed[k][j].iter().any(|(q, i)| read[*q][*i]) {
                    read[k][j] = true;
                    changed = true;
                }
            }
        }
    }
    // Arguments first (the positions are the parameters' before any goes).
    for (_, f) in built.iter_mut() {
        for data in f.blocks.values_mut() {
            for op in &mut data.ops {
                drop_arguments(op, &part_of, parts, &read);
            }
        }
    }
    for (k, p) in parts.iter().enumerate() {
        let f = &mut built[index[&p.id]].1;
        let kept: Vec<Var> = f.params[p.adjoints..]
            .iter()
            .zip(&read[k])
            .filter(|(_, r)| **r)
            .map(|(v, _)| *v)
            .collect();
        f.params.truncate(p.adjoints);
        f.params.extend(kept);
        f.signature = f.flat_signature();
    }
}

/// Per argument position of `op` that goes to a backward part's passed
/// parameter, that (part, passed parameter).
fn handed_to(
    op: &Op,
    part_of: &HashMap<FuncId, usize>,
    parts: &[BackwardPart],
) -> HashMap<usize, (usize, usize)> {
    let mut out = HashMap::new();
    for (start, callee, count) in call_spans(op) {
        let Some(q) = part_of.get(&callee) else {
            continue;
        };
        let adjoints = parts[*q].adjoints;
        for i in adjoints..count {
            out.insert(start + i, (*q, i - adjoints));
        }
    }
    out
}

/// Per call that `op` makes of a function taking its arguments in order:
/// the position of its first argument among `op`'s, the callee and how
/// many it takes (a `map`'s instances take its arguments in order when
/// they take no index; a backward part's instances never take one, as
/// `tape.rs` forks them, so a `map` with an index calls no backward part).
fn call_spans(op: &Op) -> Vec<(usize, FuncId, usize)> {
    match op {
        Op::Call { callee, args, .. } => vec![(0, *callee, args.len())],
        Op::Fork {
            args, instances, ..
        } => match instances {
            Instances::Join(calls) => {
                let mut start = 0;
                calls
                    .iter()
                    .map(|call| {
                        let span = (start, call.callee, call.args);
                        start += call.args;
                        span
                    })
                    .collect()
            }
            Instances::Map {
                callee,
                index: false,
                ..
            } => vec![(0, *callee, args.len())],
            Instances::Map { .. } => Vec::new(),
        },
        Op::Prim { .. } => Vec::new(),
    }
}

/// Takes off `op`'s arguments that go to passed parameters not `read`.
fn drop_arguments(
    op: &mut Op,
    part_of: &HashMap<FuncId, usize>,
    parts: &[BackwardPart],
    read: &[Vec<bool>],
) {
    let mut dropped: Vec<usize> = Vec::new();
    let mut per_call: Vec<usize> = Vec::new();
    for (start, callee, count) in call_spans(op) {
        let mut gone = 0;
        if let Some(q) = part_of.get(&callee) {
            let adjoints = parts[*q].adjoints;
            for i in adjoints..count {
                if !read[*q][i - adjoints] {
                    dropped.push(start + i);
                    gone += 1;
                }
            }
        }
        per_call.push(gone);
    }
    if dropped.is_empty() {
        return;
    }
    match op {
        Op::Call { args, .. } | Op::Fork { args, .. } => {
            let mut position = 0;
            args.retain(|_| {
                let keep = !dropped.contains(&position);
                position += 1;
                keep
            });
        }
        Op::Prim { .. } => {}
    }
    if let Op::Fork {
        instances: Instances::Join(calls),
        ..
    } = op
    {
        for (call, gone) in calls.iter_mut().zip(per_call) {
            call.args -= gone;
        }
    }
}
