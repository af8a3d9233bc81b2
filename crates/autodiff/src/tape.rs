//! The taped derivation: the vjp of a function as a forward part that
//! runs the function's own blocks and saves on the lane's tape what the
//! adjoints read, and a backward part that walks the blocks in reverse.
//!
//! For a function `g` (with its active parameters) the plan gets three
//! functions:
//!
//! - `g'…fwd`: `g`'s blocks, operations, terminators and locations
//!   unchanged (so it takes `g`'s steps, nests `g`'s depth and faults where
//!   `g` faults), a call of a differentiated callee calling the callee's
//!   forward part (a fork forking the callees' forward parts and keeping
//!   their tapes, `TapeMode::Save`), plus `tape_push` operations: before an operation
//!   overwrites a variable whose value an adjoint reads, the old value; at
//!   the end of a block, the values its adjoints read that are still held;
//!   then the block's index where the backward part must learn where it
//!   came from (a successor with several predecessors, or one of several
//!   returning blocks).
//! - `g'…bwd` (`uncounted`: its blocks take no steps): one block per block
//!   of `g`, from the returning block back to the entry. Each pops the
//!   block's values in reverse, runs its operations' adjoints in reverse
//!   (a call's is the callee's backward part, which pops what the callee
//!   pushed; a fork's is a fork of the callees' backward parts that gives
//!   instance `k` the tape forward instance `k` left), hands the adjoints of the variables live at its start to the
//!   predecessors (one variable per active variable of `g` carries them
//!   between blocks), and goes on to the predecessor the tape names. A loop
//!   is a loop again; a recursion recurses once per level.
//! - the vjp itself (the plan's entry id): calls the two.
//!
//! At a call of a function that loops, forks or recurses, or calls (also
//! through others) one that does, and at a fork of such functions, the forward part saves the arguments instead of the
//! callee's (or the instances') tape when the member holds more than half
//! the run's tape bound, before the call (`tape_over`: the callee runs
//! untaped) or after it (`tape_mark` and `tape_settle`: what the callee
//! saved is dropped); then a flag saying which. The backward part pops the
//! flag and, when the arguments are on the tape, pops them and runs the
//! callee's forward part again (a copy counting no steps whose forks draw
//! no key, so the member's stream advances as in the first run; the
//! instances of differentiated code draw nothing) before its backward
//! part: checkpointing, with the bits, steps and depth of the taped form.
//!
//! A call of a function with a custom derivative ([`crate::CustomVjp`])
//! is made as it is, after a push of its arguments; the backward part pops
//! them and calls the copy (counting no steps) of the function's backward
//! function, whose results are the float arguments' adjoints.
//!
//! A catching call has nothing to differentiate (the front end refuses one
//! whose arguments or callee depend on what is differentiated): the
//! forward part makes it as `g` does, calling the function itself, and the
//! backward part only restores what it overwrote. The callee pushes
//! nothing, so when it fails the tape holds what it held before the call,
//! as the caught member's other state does.
//!
//! A parameter passed unchanged down the whole gradient (nothing assigns
//! it and every call or fork hands it the caller's own such parameter, as
//! a TreeLSTM's node arrays: `tape/passed.rs`) is never pushed either: the
//! backward part takes it as an argument after the result adjoints, from
//! its caller's backward part (the vjp's own parameter at the top), so a
//! recomputed call or fork saves no copy of it; and only when it reads it
//! or hands it to a backward part that does ([`drop_unread_passed`]).
//!
//! Statics of a static gradient are never pushed: the backward part loads
//! them again where it needs them, and a row read of a differentiated
//! static (`E[w]`) is a view of that row again, so that its adjoint goes
//! to the member's log row by row (see [`Invariant`]).

use std::collections::{BTreeSet, HashMap};

use autobatch_ir::liveness::{Liveness, VarSet};
use autobatch_ir::{
    fork_calls, Block, BlockData, CompareOp, EntityRef, FuncId, Function, InstanceArg, Instances,
    JoinCall, Op, Prim, Program, Scalar, ScalarType, StaticId, TapeMode, TensorType, Terminator,
    Type, Var, VarData,
};
use autobatch_types::Loc;

use crate::analysis::Sources;
use crate::builder::{Builder, View};
use crate::{analysis, derive_error, rules, DeriveResult, Deriver};

mod passed;
mod saved;
use passed::{check_passed, passed_args};
pub(crate) use passed::{drop_unread_passed, passed_params, BackwardPart};
use saved::{block_tape, has_adjoint, BlockTape};
mod recompute;
use recompute::{recomputable, recomputing_call, rerun_if_recomputed, rerun_instances};

/// The ids of a taped plan's two parts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TapedIds {
    pub fwd: FuncId,
    pub bwd: FuncId,
}

/// Refuses `g` (as [`crate::prepare`] puts it) when a variable holding
/// a differentiated static, or a row of one, fits no [`Invariant`]: the
/// backward part could not find it again. `prepare` makes every function
/// fit, so this names a bug.
pub(crate) fn check_invariants(g: &Function, sources: &Sources) -> DeriveResult<()> {
    match invariants(g, sources, &[]) {
        Some(_) => Ok(()),
        None => derive_error(
            format!(
                "cannot differentiate `{}`: a differentiated static is held where the tape cannot find it again",
                g.name
            ),
            g.loc,
        ),
    }
}

/// A variable of `g` that the backward part does not take from the tape.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Invariant {
    /// Every definition loads this static: the backward part loads it
    /// again where it needs it (a differentiated one as a whole view, see
    /// [`crate::block::View`]).
    Static(StaticId),
    /// Every definition is this constant: made again where needed.
    Constant(Scalar),
    /// Its one definition reads row `i` (a parameter nothing assigns, or a
    /// constant) of a differentiated static, held by `whole`: the backward
    /// part reads the row again, and its adjoint goes to the static's log
    /// row by row, as a view of that row.
    Row {
        id: StaticId,
        index: Var,
        whole: Var,
    },
    /// A parameter passed unchanged down the whole gradient
    /// ([`passed_params`]): the backward part takes it as an argument.
    Passed,
}

/// Whether two constants are the same value, bit for bit (`-0.0` is not `0.0`).
fn same_bits(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F64(a), Scalar::F64(b)) => a.to_bits() == b.to_bits(),
        (Scalar::F32(a), Scalar::F32(b)) => a.to_bits() == b.to_bits(),
        _ => a == b,
    }
}

/// Per variable of `g`, how it is [`Invariant`] (`passed`: per parameter,
/// whether it is [`Invariant::Passed`]); `None` when a variable holding a
/// differentiated static, or a row of one, fits no form.
fn invariants(g: &Function, sources: &Sources, passed: &[bool]) -> Option<Vec<Option<Invariant>>> {
    let mut defs: Vec<Vec<&Op>> = vec![Vec::new(); g.vars.len()];
    for op in g.blocks.values().flat_map(|b| &b.ops) {
        for d in op.defs() {
            defs[d.index()].push(op);
        }
    }
    let load = |op: &Op| match op {
        Op::Prim {
            prim: Prim::LoadStatic(id),
            ..
        } => Some(*id),
        _ => None,
    };
    let constant = |op: &Op| match op {
        Op::Prim {
            prim: Prim::Const(c),
            ..
        } => Some(*c),
        _ => None,
    };
    let mut inv = vec![None; g.vars.len()];
    for (v, ops) in defs.iter().enumerate() {
        let constants: Vec<Option<Scalar>> = ops.iter().map(|op| constant(op)).collect();
        if let Some(Some(c)) = constants.first() {
            if constants
                .iter()
                .all(|k| k.is_some_and(|k| same_bits(k, *c)))
            {
                inv[v] = Some(Invariant::Constant(*c));
            }
        }
        let loads: Vec<Option<StaticId>> = ops.iter().map(|op| load(op)).collect();
        match loads.first() {
            Some(Some(id)) if loads.iter().all(|l| *l == Some(*id)) => {
                inv[v] = Some(Invariant::Static(*id))
            }
            _ if loads.iter().flatten().any(|id| sources.is_active(*id)) => return None,
            _ => {}
        }
    }
    for (p, is) in g.params.iter().zip(passed) {
        if *is {
            inv[p.index()] = Some(Invariant::Passed);
        }
    }
    let shadows = shadow_indices(g);
    for (v, ops) in defs.iter().enumerate() {
        let rows: Vec<(StaticId, Var, Var)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Prim {
                    prim: Prim::Index,
                    args,
                    ..
                } => match inv[args[0].index()] {
                    Some(Invariant::Static(id)) if sources.is_active(id) => {
                        Some((id, args[1], args[0]))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let Some((id, i, whole)) = rows.first().copied() else {
            continue;
        };
        let fixed = defs[i.index()].is_empty()
            || matches!(inv[i.index()], Some(Invariant::Constant(_)))
            || shadows[i.index()] == Some(Var::new(v));
        let same = |r: &(StaticId, Var, Var)| (r.0, r.1) == (id, i);
        if rows.len() == ops.len() && rows.iter().all(same) && fixed {
            inv[v] = Some(Invariant::Row {
                id,
                index: i,
                whole,
            });
        } else {
            return None;
        }
    }
    Some(inv)
}

/// Per variable of `g`: the variable it is the shadow index of (see
/// [`crate::prepare`]): every definition of it but constants (its value
/// before the first) is a copy directly followed by a definition of that
/// variable reading it.
fn shadow_indices(g: &Function) -> Vec<Option<Var>> {
    let mut followed: Vec<Vec<Option<Var>>> = vec![Vec::new(); g.vars.len()];
    for data in g.blocks.values() {
        for (k, op) in data.ops.iter().enumerate() {
            let Op::Prim {
                dst: Some(iv),
                prim: Prim::Copy,
                ..
            } = op
            else {
                if !matches!(
                    op,
                    Op::Prim {
                        prim: Prim::Const(_),
                        ..
                    }
                ) {
                    for d in op.defs() {
                        followed[d.index()].push(None);
                    }
                }
                continue;
            };
            let next = match data.ops.get(k + 1) {
                Some(Op::Prim {
                    dst: Some(v),
                    prim: Prim::Index,
                    args,
                    ..
                }) if args[1] == *iv => Some(*v),
                _ => None,
            };
            followed[iv.index()].push(next);
        }
    }
    followed
        .iter()
        .map(|f| match f.first() {
            Some(Some(v)) if f.iter().all(|w| *w == Some(*v)) => Some(*v),
            _ => None,
        })
        .collect()
}

/// How a call of the function being derived is differentiated.
enum CallKind {
    /// No active argument: runs forward only.
    Plain,
    /// The callee's forward and backward parts, for its `active`
    /// parameters; with `recompute`, the forward part chooses per member
    /// at the call between them and the callee's untaped function
    /// ([`recomputing_call`]).
    Taped {
        ids: TapedIds,
        active: Vec<bool>,
        recompute: bool,
    },
    /// A fork of the callees' forward parts that saves the instances'
    /// tapes, and backward a fork of their backward parts that restores
    /// them: per call of a `join` (one for a `map`), its parts and active
    /// parameters; with `recompute`, the forward part chooses per member
    /// at the fork between it and the fork of the callees' untaped
    /// functions ([`recomputing_call`]).
    TapedFork {
        parts: Vec<(TapedIds, Vec<bool>)>,
        recompute: bool,
    },
    /// A callee with a custom derivative ([`crate::CustomVjp`]): forward,
    /// its arguments pushed and the call made as it is; backward, the
    /// arguments popped and `backward` (the copy counting no steps of the
    /// callee's backward function) called, which returns the adjoint of
    /// every float parameter (of types `float_params`), kept where
    /// `active`.
    Custom {
        backward: FuncId,
        active: Vec<bool>,
        float_params: Vec<TensorType>,
    },
}

/// Everything both parts derive from `g` alike.
struct Layout {
    tapes: Vec<BlockTape>,
    calls: HashMap<(usize, usize), CallKind>,
    reachable: Vec<bool>,
    /// Per block, its distinct reachable predecessors.
    preds: Vec<Vec<usize>>,
    /// Per block, whether it pushes its index at its end.
    pushes_index: Vec<bool>,
    returns: Vec<usize>,
    live_in: Vec<VarSet>,
    invariants: Vec<Option<Invariant>>,
    /// Per variable of `g`, whether it reaches a float result
    /// ([`analysis::useful`]).
    useful: Vec<bool>,
}

/// The instance calls of fork `op` and, per call, its callee's
/// parameters that are active (a `map`'s index never is).
fn fork_instances(d: &Deriver, op: &Op, act: &[bool]) -> Vec<(FuncId, Vec<bool>)> {
    let Fork {
        dsts,
        args,
        instances,
        ..
    } = fork_of(op);
    let calls = fork_calls(d.program, dsts, args, instances);
    let calls = match instances {
        Instances::Map { .. } => &calls[..1],
        Instances::Join(_) => &calls[..],
    };
    calls
        .iter()
        .map(|call| {
            let active = call
                .args
                .iter()
                .map(|a| match a {
                    InstanceArg::Whole(v) | InstanceArg::Element(v) => act[v.index()],
                    InstanceArg::Index => false,
                })
                .collect();
            (call.callee, active)
        })
        .collect()
}

/// How fork `op` is differentiated: `None` when no instance has anything
/// to propagate; taped when every callee is derived over a tape.
fn fork_kind(d: &mut Deriver, op: &Op, act: &[bool]) -> DeriveResult<Option<CallKind>> {
    let calls = fork_instances(d, op, act);
    let propagates = calls
        .iter()
        .any(|(callee, active)| active.contains(&true) || d.sources.reads(*callee));
    if !propagates {
        return Ok(None);
    }
    let mut parts = Vec::new();
    let mut recompute = false;
    for (callee, active) in calls {
        let q = d.plan(callee, &active, false)?;
        parts.push((d.plans[q].parts, active));
        recompute |= recomputable(d.program, callee);
    }
    Ok(Some(CallKind::TapedFork { parts, recompute }))
}

fn layout(d: &mut Deriver, p: usize) -> DeriveResult<Layout> {
    let g = d.plans[p].g.clone();
    let act = d.plans[p].active.clone();
    let reachable = analysis::reachable(&g);
    let mut calls = HashMap::new();
    for (b, data) in g.blocks.iter() {
        if !reachable[b.index()] {
            continue;
        }
        for (k, op) in data.ops.iter().enumerate() {
            if let Op::Fork { .. } = op {
                if let Some(kind) = fork_kind(d, op, &act)? {
                    calls.insert((b.index(), k), kind);
                }
                continue;
            }
            let Op::Call {
                callee,
                args,
                catch,
                loc,
                ..
            } = op
            else {
                continue;
            };
            let active: Vec<bool> = args.iter().map(|a| act[a.index()]).collect();
            let custom = d.custom.get(callee).copied();
            let kind = if !active.contains(&true) && !d.sources.reads(*callee) {
                CallKind::Plain
            } else if *catch {
                return derive_error("a catching call cannot be differentiated", *loc);
            } else if let (Some(backward), false) = (custom, d.sources.reads(*callee)) {
                let f = &d.program.functions[*callee];
                CallKind::Custom {
                    backward: d.uncounted_copy(backward),
                    active,
                    float_params: f
                        .params
                        .iter()
                        .map(|v| f.vars[*v].ty.clone())
                        .filter(|t| t.elem.is_float())
                        .collect(),
                }
            } else {
                let q = d.plan(*callee, &active, false)?;
                // (A self tail call is a jump before deriving: a call
                // here is none, and pushes may follow it.)
                CallKind::Taped {
                    ids: d.plans[q].parts,
                    active,
                    recompute: recomputable(d.program, *callee),
                }
            };
            calls.insert((b.index(), k), kind);
        }
    }
    let n = g.blocks.len();
    let mut preds = vec![Vec::new(); n];
    for (b, data) in g.blocks.iter() {
        if !reachable[b.index()] {
            continue;
        }
        for s in data.term.successors() {
            if !preds[s.index()].contains(&b.index()) {
                preds[s.index()].push(b.index());
            }
        }
    }
    let returns: Vec<usize> = (0..n)
        .filter(|b| reachable[*b] && matches!(g.blocks[Block::new(*b)].term, Terminator::Return(_)))
        .collect();
    let pushes_index = (0..n)
        .map(|b| {
            let term = &g.blocks[Block::new(b)].term;
            let joins = term.successors().iter().any(|s| preds[s.index()].len() > 1);
            joins || (returns.len() > 1 && returns.contains(&b))
        })
        .collect();
    let passed = &d.passed[d.plans[p].function.index()];
    let invariants = invariants(&g, &d.sources, passed).expect("a taped function");
    check_passed(d, &g, &calls, &invariants)?;
    let useful = analysis::useful(&g, &reachable);
    let tapes = (0..n)
        .map(|b| block_tape(&g.blocks[Block::new(b)], &act, &useful, &invariants))
        .collect();
    Ok(Layout {
        tapes,
        calls,
        reachable,
        preds,
        pushes_index,
        returns,
        live_in: Liveness::compute(&g).live_in,
        invariants,
        useful,
    })
}

/// Builds the three functions of taped plan `p`: (vjp, fwd, bwd).
pub(crate) fn build(d: &mut Deriver, p: usize) -> DeriveResult<[Function; 3]> {
    let layout = layout(d, p)?;
    let fwd = forward(d, p, &layout);
    let bwd = backward(d, p, &layout)?;
    let vjp = entry(d, p)?;
    Ok([vjp, fwd, bwd])
}

/// `g`'s function with the tape's pushes, and calls of differentiated
/// callees' forward parts.
fn forward(d: &Deriver, p: usize, layout: &Layout) -> Function {
    let plan = &d.plans[p];
    let mut f = plan.g.clone();
    f.name = format!("{}.fwd", plan.name);
    let index_ty = TensorType::scalar(ScalarType::I64);
    for (b, data) in plan.g.blocks.iter() {
        let bi = b.index();
        if !layout.reachable[bi] {
            continue;
        }
        let tape = &layout.tapes[bi];
        let loc = data.loc;
        // The block being filled: `b`, or after a recomputing call the
        // block where the forward part goes on.
        let mut piece = b;
        let mut ops = Vec::new();
        for (k, op) in data.ops.iter().enumerate() {
            if !tape.before[k].is_empty() {
                ops.push(push(tape.before[k].clone(), loc));
            }
            match (op, layout.calls.get(&(bi, k))) {
                (
                    Op::Call {
                        dsts, args, loc, ..
                    },
                    Some(CallKind::Taped { ids, recompute, .. }),
                ) => {
                    let taped = Op::Call {
                        dsts: dsts.clone(),
                        callee: ids.fwd,
                        args: args.clone(),
                        loc: *loc,
                        catch: false,
                    };
                    let before = std::mem::take(&mut ops);
                    let invariants = &layout.invariants;
                    (piece, ops) =
                        place_taped(&mut f, piece, before, op, taped, *recompute, invariants);
                }
                (Op::Fork { .. }, Some(CallKind::TapedFork { parts, recompute })) => {
                    let taped = saving_fork(op, parts);
                    let before = std::mem::take(&mut ops);
                    let invariants = &layout.invariants;
                    (piece, ops) =
                        place_taped(&mut f, piece, before, op, taped, *recompute, invariants);
                }
                (Op::Call { loc, .. }, Some(CallKind::Custom { .. })) => {
                    let saved = saved_args(op, &layout.invariants);
                    if !saved.is_empty() {
                        ops.push(push(saved, *loc));
                    }
                    ops.push(op.clone());
                }
                _ => ops.push(op.clone()),
            }
        }
        if !tape.end.is_empty() {
            ops.push(push(tape.end.clone(), loc));
        }
        if layout.pushes_index[bi] {
            let v = f.vars.push(VarData {
                ty: index_ty.clone(),
                name: None,
            });
            ops.push(Op::Prim {
                dst: Some(v),
                prim: Prim::Const(Scalar::I64(bi as i64)),
                args: Vec::new(),
                loc,
            });
            ops.push(push(vec![v], loc));
        }
        f.blocks[piece].ops = ops;
        f.blocks[piece].term = data.term.clone();
    }
    f
}

/// The arguments of a call or fork.
fn call_args(call: &Op) -> &[Var] {
    match call {
        Op::Call { args, .. } | Op::Fork { args, .. } => args,
        Op::Prim { .. } => unreachable!("a call or a fork"),
    }
}

/// The arguments of `call` (a call or a fork) that a recomputation takes
/// from the tape: all but the [`Invariant`]s, which the backward part
/// makes again.
fn saved_args<'a>(call: &'a Op, invariants: &'a [Option<Invariant>]) -> Vec<Var> {
    call_args(call)
        .iter()
        .filter(|a| invariants[a.index()].is_none())
        .copied()
        .collect()
}

/// Appends `taped` (the call or fork of the callees' forward parts standing
/// for `op`) to `ops`, or, with `recompute`, the per-member choice around
/// it ([`recomputing_call`]). Returns the block where the forward part goes
/// on and its operations so far.
fn place_taped(
    f: &mut Function,
    at: Block,
    mut ops: Vec<Op>,
    op: &Op,
    taped: Op,
    recompute: bool,
    invariants: &[Option<Invariant>],
) -> (Block, Vec<Op>) {
    if recompute {
        return recomputing_call(f, at, ops, op, taped, invariants);
    }
    ops.push(taped);
    (at, ops)
}

/// Fork `op` over its callees' forward parts, saving their tapes.
fn saving_fork(op: &Op, parts: &[(TapedIds, Vec<bool>)]) -> Op {
    let Fork {
        dsts,
        args,
        instances,
        loc,
    } = fork_of(op);
    let instances = match instances {
        Instances::Join(calls) => Instances::Join(
            calls
                .iter()
                .zip(parts)
                .map(|(call, (ids, _))| JoinCall {
                    callee: ids.fwd,
                    ..call.clone()
                })
                .collect(),
        ),
        Instances::Map {
            count, index, each, ..
        } => Instances::Map {
            callee: parts[0].0.fwd,
            count: *count,
            index: *index,
            each: *each,
        },
    };
    Op::Fork {
        dsts: dsts.to_vec(),
        args: args.to_vec(),
        instances,
        loc,
        tape: TapeMode::Save,
    }
}

/// The parts of a fork operation of `g`.
struct Fork<'a> {
    dsts: &'a [Var],
    args: &'a [Var],
    instances: &'a Instances,
    loc: Loc,
}

/// The parts of fork operation `op`.
fn fork_of(op: &Op) -> Fork<'_> {
    match op {
        Op::Fork {
            dsts,
            args,
            instances,
            loc,
            ..
        } => Fork {
            dsts,
            args,
            instances,
            loc: *loc,
        },
        _ => unreachable!("a fork"),
    }
}

fn push(args: Vec<Var>, loc: Loc) -> Op {
    Op::Prim {
        dst: None,
        prim: Prim::TapePush,
        args,
        loc,
    }
}

/// The vjp: `r = call fwd(params); d = call bwd(result adjoints)` (for a
/// `grad` request the backward part takes none: it seeds with ones).
fn entry(d: &Deriver, p: usize) -> DeriveResult<Function> {
    let plan = &d.plans[p];
    let ids = plan.parts;
    let g = &plan.g;
    let loc = g.loc;
    let mut b = Builder::new(d.program, plan.name.clone(), loc, g.blocks[Block(0)].loc);
    let params: Vec<Var> = g
        .params
        .iter()
        .map(|v| {
            let data = &g.vars[*v];
            let name = data.name.clone().unwrap_or_else(|| format!("{v}"));
            b.param(data.ty.clone(), name)
        })
        .collect();
    let mut dres = Vec::new();
    if !plan.seed_one {
        for (k, i) in plan.float_results.iter().enumerate() {
            dres.push(b.param(g.results[*i].clone(), format!("d.result{k}")));
        }
    }
    let results: Vec<Var> = g
        .results
        .iter()
        .map(|t| b.var(t.clone(), None, false))
        .collect();
    // The backward part takes the passed parameters after the adjoints.
    let passed = &d.passed[plan.function.index()];
    dres.extend(
        params
            .iter()
            .zip(passed)
            .filter(|(_, p)| **p)
            .map(|(v, _)| *v),
    );
    b.push(Op::Call {
        dsts: results.clone(),
        callee: ids.fwd,
        args: params,
        loc,
        catch: false,
    });
    let adjoints: Vec<Var> = plan
        .active_params
        .iter()
        .map(|v| b.var(g.vars[*v].ty.clone(), None, false))
        .collect();
    b.push(Op::Call {
        dsts: adjoints.clone(),
        callee: ids.bwd,
        args: dres,
        loc,
        catch: false,
    });
    let mut out = results;
    out.extend(adjoints);
    b.return_vars(out);
    Ok(b.func)
}

/// The backward part under construction.
struct Backward<'b, 'p> {
    b: &'b mut Builder<'p>,
    g: &'b Function,
    act: &'b [bool],
    useful: &'b [bool],
    /// The builder's variable holding each variable of `g` at the point
    /// the walk has reached (a value no adjoint reads gets a variable of
    /// its own that is never assigned: it only names the value's adjoint).
    map: HashMap<Var, Var>,
    /// Per active variable of `g`, the variable that carries its adjoint
    /// from a block to its predecessor.
    carried: HashMap<Var, Var>,
    /// The backward block of each block of `g`.
    blocks: Vec<Block>,
    invariants: &'b [Option<Invariant>],
    /// Per passed parameter of `g` ([`Invariant::Passed`]), the backward
    /// part's parameter that holds it.
    passed: HashMap<Var, Var>,
}

impl Backward<'_, '_> {
    fn value(&mut self, v: Var) -> Var {
        let x = match self.map.get(&v) {
            Some(x) => *x,
            None if self.invariants[v.index()] == Some(Invariant::Passed) => {
                let x = self.passed[&v];
                self.map.insert(v, x);
                x
            }
            None => {
                let x = self.fresh(v);
                let loc = self.b.func.blocks[self.b.current].loc;
                match self.invariants[v.index()] {
                    Some(Invariant::Static(id)) => {
                        self.b.prim_into(x, Prim::LoadStatic(id), Vec::new(), loc)
                    }
                    Some(Invariant::Constant(c)) => {
                        self.b.prim_into(x, Prim::Const(c), Vec::new(), loc)
                    }
                    // Read again: the static's row, not a copy on the tape.
                    Some(Invariant::Row { index, whole, .. }) => {
                        let whole = self.value(whole);
                        let index = self.value(index);
                        self.b.prim_into(x, Prim::Index, vec![whole, index], loc)
                    }
                    Some(Invariant::Passed) | None => {}
                }
                self.map.insert(v, x);
                x
            }
        };
        if let Some(Invariant::Row { id, index, .. }) = self.invariants[v.index()] {
            if self.b.view(x).is_none() {
                let i = self.value(index);
                self.b.views.insert(x, View::Row(id, i));
            }
        }
        x
    }

    /// Whether the adjoint of `v` is carried from block to block: an
    /// active variable that is no view of a static (whose adjoint goes to
    /// the member's log at once).
    fn carries(&self, v: Var) -> bool {
        let view = matches!(
            self.invariants[v.index()],
            Some(Invariant::Static(_) | Invariant::Row { .. })
        );
        self.act[v.index()] && !view
    }

    fn fresh(&mut self, v: Var) -> Var {
        let data = &self.g.vars[v];
        self.b
            .var(data.ty.clone(), data.name.clone(), self.act[v.index()])
    }

    fn carried(&mut self, v: Var) -> Var {
        if let Some(x) = self.carried.get(&v) {
            return *x;
        }
        let ty = self.g.vars[v].ty.clone();
        let name = self.g.vars[v].name.as_ref().map(|n| format!("d.{n}"));
        let x = self.b.var(ty, name, false);
        self.carried.insert(v, x);
        x
    }

    /// Pops `vars` (pushed in that order) into fresh variables.
    fn pop(&mut self, vars: &[Var], loc: Loc) -> Vec<Var> {
        let mut popped = vec![Var(0); vars.len()];
        for (k, v) in vars.iter().enumerate().rev() {
            let x = self.fresh(*v);
            let ty = self.g.vars[*v].ty.clone();
            self.b.prim_into(x, Prim::TapePop(ty), Vec::new(), loc);
            popped[k] = x;
        }
        popped
    }

    fn switch_to(&mut self, block: Block) {
        self.b.current = block;
        self.b.known = Default::default();
        self.b.adj.clear();
        self.map.clear();
    }
}

fn backward(d: &mut Deriver, p: usize, layout: &Layout) -> DeriveResult<Function> {
    let plan = &d.plans[p];
    let g = plan.g.clone();
    let act = plan.active.clone();
    let float_results = plan.float_results.clone();
    let name = format!("{}.bwd", plan.name);
    let active_params = plan.active_params.clone();
    let program = d.program;
    let mut b = Builder::new(program, name, g.loc, g.loc);
    b.func.uncounted = true;
    b.statics = d.sources.statics.clone();
    // A `grad` request's result adjoint is one, made where it is used so
    // that the adjoints fold it away (`1 · a` is `a`).
    let dres: Vec<Var> = if plan.seed_one {
        Vec::new()
    } else {
        float_results
            .iter()
            .enumerate()
            .map(|(k, i)| b.param(g.results[*i].clone(), format!("d.result{k}")))
            .collect()
    };
    // Then the passed parameters, which its callers hand it.
    let mut passed = HashMap::new();
    for (v, is) in g.params.iter().zip(&d.passed[plan.function.index()]) {
        if *is {
            let data = &g.vars[*v];
            let name = data.name.clone().unwrap_or_else(|| format!("{v}"));
            let x = b.param(data.ty.clone(), name);
            b.active[x.index()] = act[v.index()];
            passed.insert(*v, x);
        }
    }
    if layout.returns.is_empty() {
        // `g` returns nowhere, nor does its forward part: this part never runs.
        let mut zeros = Vec::new();
        for v in &active_params {
            zeros.push(b.filled(&g.vars[*v].ty, 0.0, g.loc)?);
        }
        b.terminate(Terminator::Return(zeros));
    } else {
        let entry = b.current;
        let blocks: Vec<Block> = g
            .blocks
            .iter()
            .map(|(_, data)| b.new_block(data.loc))
            .collect();
        let mut w = Backward {
            b: &mut b,
            g: &g,
            act: &act,
            useful: &layout.useful,
            map: HashMap::new(),
            carried: HashMap::new(),
            blocks,
            invariants: &layout.invariants,
            passed,
        };
        w.switch_to(entry);
        dispatch(&mut w, &layout.returns, layout.returns.len() > 1, g.loc);
        for bi in 0..g.blocks.len() {
            if layout.reachable[bi] {
                backward_block(d, &mut w, layout, bi, &dres, &active_params)?;
            }
        }
    }
    let mut func = b.func;
    let results: Vec<TensorType> = active_params
        .iter()
        .map(|v| g.vars[*v].ty.clone())
        .collect();
    func.ret_type = Type::Tuple(results.iter().cloned().map(Type::Tensor).collect());
    func.results = results;
    crate::builder::remove_unused_operations(&mut func);
    analysis::update_in_place(&mut func);
    Ok(func)
}

/// Goes on to the backward block of one of `targets`: the only one, or
/// the one whose index the tape holds (popped when `pop`).
fn dispatch(w: &mut Backward, targets: &[usize], pop: bool, loc: Loc) {
    let index = pop.then(|| {
        let x = w.b.var(TensorType::scalar(ScalarType::I64), None, false);
        let ty = TensorType::scalar(ScalarType::I64);
        w.b.prim_into(x, Prim::TapePop(ty), Vec::new(), loc);
        x
    });
    let (last, tested) = targets.split_last().expect("a block with a predecessor");
    for t in tested {
        let index = index.expect("several targets pop an index");
        let c = w.b.var(TensorType::scalar(ScalarType::I64), None, false);
        w.b.prim_into(c, Prim::Const(Scalar::I64(*t as i64)), Vec::new(), loc);
        let same = w.b.var(TensorType::scalar(ScalarType::Bool), None, false);
        w.b.prim_into(same, Prim::Compare(CompareOp::Eq), vec![index, c], loc);
        let next = w.b.new_block(loc);
        w.b.terminate(Terminator::Branch {
            cond: same,
            then_block: w.blocks[*t],
            else_block: next,
        });
        w.b.current = next;
    }
    w.b.terminate(Terminator::Jump(w.blocks[*last]));
}

/// The backward block of block `bi` of `g`.
fn backward_block(
    d: &mut Deriver,
    w: &mut Backward,
    layout: &Layout,
    bi: usize,
    dres: &[Var],
    active_params: &[Var],
) -> DeriveResult<()> {
    let g = w.g;
    let data = g.blocks[Block::new(bi)].clone();
    let loc = data.loc;
    let tape = &layout.tapes[bi];
    w.switch_to(w.blocks[bi]);
    let end = w.pop(&tape.end, loc);
    for (v, x) in tape.end.iter().zip(end) {
        w.map.insert(*v, x);
    }
    match &data.term {
        Terminator::Return(vs) => {
            let float_results: Vec<usize> = (0..g.results.len())
                .filter(|i| g.results[*i].elem.is_float())
                .collect();
            for (k, i) in float_results.iter().enumerate() {
                let v = vs[*i];
                if w.act[v.index()] {
                    let seed = match dres.get(k) {
                        Some(d) => *d,
                        None => w.b.filled(&g.results[*i], 1.0, loc)?,
                    };
                    let x = w.value(v);
                    w.b.accumulate(x, seed, loc)?;
                }
            }
        }
        term => {
            let mut out: BTreeSet<Var> = BTreeSet::new();
            for s in term.successors() {
                out.extend(layout.live_in[s.index()].iter());
            }
            let out: Vec<Var> = out.into_iter().filter(|v| w.carries(*v)).collect();
            for v in out {
                let x = w.value(v);
                let carried = w.carried(v);
                w.b.adj.insert(x, carried);
            }
        }
    }
    for (k, op) in data.ops.iter().enumerate().rev() {
        op_adjoint(d, w, layout, (bi, k), op)?;
    }
    if bi == 0 {
        let mut out = Vec::new();
        for v in active_params {
            let x = w.value(*v);
            out.push(w.b.adjoint_or_zero(x, loc)?);
        }
        w.b.terminate(Terminator::Return(out));
        return Ok(());
    }
    // The adjoints of the variables live out of a predecessor, for it.
    let preds = &layout.preds[bi];
    let mut handed: BTreeSet<Var> = BTreeSet::new();
    for q in preds {
        for s in g.blocks[Block::new(*q)].term.successors() {
            handed.extend(layout.live_in[s.index()].iter());
        }
    }
    let handed: Vec<Var> = handed.into_iter().filter(|v| w.carries(*v)).collect();
    let mut values = Vec::new();
    for v in &handed {
        let x = w.value(*v);
        values.push(w.b.adjoint_or_zero(x, loc)?);
    }
    let carried: Vec<Var> = handed.iter().map(|v| w.carried(*v)).collect();
    hand_over(w, &carried, values, loc);
    let pop = preds.iter().any(|q| layout.pushes_index[*q]);
    dispatch(w, preds, pop, loc);
    Ok(())
}

/// Sets each carried adjoint `carried[k]` to `values[k]`, all at once: a
/// value that is itself another carried adjoint about to be set (the
/// adjoint of `gamma = next` is `next`'s, taken from `gamma`'s as it is)
/// is read into a temporary before any is set.
fn hand_over(w: &mut Backward, carried: &[Var], mut values: Vec<Var>, loc: Loc) {
    let set: Vec<bool> = carried.iter().zip(&values).map(|(c, a)| c != a).collect();
    for (k, value) in values.iter_mut().enumerate() {
        let a = *value;
        let overwritten = (0..carried.len()).any(|j| j != k && set[j] && carried[j] == a);
        if overwritten {
            let ty = w.b.ty(a).clone();
            let t = w.b.var(ty, None, false);
            w.b.prim_into(t, Prim::Copy, vec![a], loc);
            *value = t;
        }
    }
    for (c, a) in carried.iter().zip(values) {
        if *c != a {
            w.b.prim_into(*c, Prim::Copy, vec![a], loc);
        }
    }
}

/// The adjoint of operation `at` (block, index) of `g`, walking backward:
/// afterwards every variable it defined holds its value before it.
fn op_adjoint(
    d: &mut Deriver,
    w: &mut Backward,
    layout: &Layout,
    at: (usize, usize),
    op: &Op,
) -> DeriveResult<()> {
    let before = &layout.tapes[at.0].before[at.1];
    let dsts: Vec<Var> = op.defs().iter().map(|v| w.value(*v)).collect();
    let loc = match op {
        Op::Prim { loc, .. } | Op::Call { loc, .. } | Op::Fork { loc, .. } => *loc,
    };
    match (op, layout.calls.get(&at)) {
        (
            Op::Call { args, .. },
            Some(CallKind::Taped {
                ids,
                active,
                recompute,
            }),
        ) => {
            let dys = result_adjoints(w, op, &dsts, loc)?;
            let targets = active_args(args, active);
            let outs: Vec<Var> = targets.iter().map(|v| w.fresh(*v)).collect();
            if *recompute {
                let callee = d.uncounted_copy(ids.fwd);
                rerun_if_recomputed(w, op, loc, |args, dsts| Op::Call {
                    dsts,
                    callee,
                    args,
                    loc,
                    catch: false,
                });
            }
            let mut bwd_args = dys;
            for v in passed_args(d, op).expect("checked").concat() {
                bwd_args.push(w.value(v));
            }
            w.b.push(Op::Call {
                dsts: outs.clone(),
                callee: ids.bwd,
                args: bwd_args,
                loc,
                catch: false,
            });
            restore(w, op, before, loc);
            for (v, da) in targets.iter().zip(outs) {
                let x = w.value(*v);
                w.b.accumulate(x, da, loc)?;
            }
        }
        (
            Op::Call { args, .. },
            Some(CallKind::Custom {
                backward,
                active,
                float_params,
            }),
        ) => {
            let custom = Custom {
                backward: *backward,
                active,
                float_params,
            };
            custom_adjoint(w, op, args, custom, &dsts, before, loc)?;
        }
        (Op::Fork { .. }, Some(CallKind::TapedFork { parts, recompute })) => {
            let fork = TapedFork {
                parts,
                recompute: *recompute,
                before,
            };
            taped_fork_adjoint(d, w, op, &dsts, fork, loc)?;
        }
        (Op::Prim { prim, args, .. }, _) => {
            restore(w, op, before, loc);
            if has_adjoint(op, w.act, w.useful) {
                let record = Op::Prim {
                    dst: dsts.first().copied(),
                    prim: prim.clone(),
                    args: args.iter().map(|a| w.value(*a)).collect(),
                    loc,
                };
                rules::adjoint(w.b, &record)?;
            }
        }
        _ => restore(w, op, before, loc),
    }
    Ok(())
}

/// A taped fork's parts ([`CallKind::TapedFork`]) and the values it
/// restores.
struct TapedFork<'a> {
    parts: &'a [(TapedIds, Vec<bool>)],
    recompute: bool,
    before: &'a [Var],
}

/// The adjoint of a taped fork: its instances run again first when it is
/// recomputed, then the restoring fork, whose contributions accumulate
/// into the arguments' adjoints.
fn taped_fork_adjoint(
    d: &mut Deriver,
    w: &mut Backward,
    op: &Op,
    dsts: &[Var],
    fork: TapedFork,
    loc: Loc,
) -> DeriveResult<()> {
    if fork.recompute {
        let instances = rerun_instances(d, op, fork.parts);
        rerun_if_recomputed(w, op, loc, |args, dsts| Op::Fork {
            dsts,
            args,
            instances,
            loc,
            tape: TapeMode::SaveAgain,
        });
    }
    let contributions = restoring_fork(d, w, op, dsts, fork.parts)?;
    restore(w, op, fork.before, loc);
    for (v, c) in contributions {
        let x = w.value(v);
        let c = match c {
            Contribution::Whole(c) => c,
            Contribution::Stacked(c) => rules::sum_leading(w.b, c, loc)?,
        };
        w.b.accumulate(x, c, loc)?;
    }
    Ok(())
}

/// A custom derivative's parts of a call ([`CallKind::Custom`]).
struct Custom<'a> {
    backward: FuncId,
    active: &'a [bool],
    float_params: &'a [TensorType],
}

/// The backward part of a call with a custom derivative: pops the saved
/// arguments, calls the backward function on them and the results'
/// adjoints, and accumulates the adjoints of the active float arguments.
fn custom_adjoint(
    w: &mut Backward,
    op: &Op,
    args: &[Var],
    custom: Custom,
    dsts: &[Var],
    before: &[Var],
    loc: Loc,
) -> DeriveResult<()> {
    let Custom {
        backward,
        active,
        float_params,
    } = custom;
    let dys = result_adjoints(w, op, dsts, loc)?;
    let saved = saved_args(op, w.invariants);
    let mut popped = w.pop(&saved, loc).into_iter();
    let mut call_args = Vec::with_capacity(args.len() + dys.len());
    for a in args {
        let x = match w.invariants[a.index()] {
            Some(_) => w.value(*a),
            None => popped.next().expect("a saved argument"),
        };
        call_args.push(x);
    }
    call_args.extend(dys);
    let outs: Vec<Var> = float_params
        .iter()
        .map(|t| w.b.var(t.clone(), None, false))
        .collect();
    w.b.push(Op::Call {
        dsts: outs.clone(),
        callee: backward,
        args: call_args,
        loc,
        catch: false,
    });
    restore(w, op, before, loc);
    let floats: Vec<(Var, bool)> = args
        .iter()
        .zip(active)
        .filter(|(a, _)| w.g.vars[**a].ty.elem.is_float())
        .map(|(a, is_active)| (*a, *is_active))
        .collect();
    for ((v, is_active), da) in floats.into_iter().zip(outs) {
        if is_active {
            let x = w.value(v);
            w.b.accumulate(x, da, loc)?;
        }
    }
    Ok(())
}

/// What a restoring fork gives the adjoint of one argument of the fork.
enum Contribution {
    /// The adjoint itself.
    Whole(Var),
    /// One per instance, stacked: the argument went whole to every
    /// instance of a `map`, so its adjoint is their sum.
    Stacked(Var),
}

/// The backward fork of taped fork `op` (whose results the backward holds
/// in `dsts`): a `Restore` fork of the callees' backward parts, the result
/// adjoints as arguments (one element per instance for a `map`). Gives the
/// contributions to the fork's active arguments, in order.
fn restoring_fork(
    d: &Deriver,
    w: &mut Backward,
    op: &Op,
    dsts: &[Var],
    parts: &[(TapedIds, Vec<bool>)],
) -> DeriveResult<Vec<(Var, Contribution)>> {
    let Fork {
        dsts: g_dsts,
        args,
        instances,
        loc,
    } = fork_of(op);
    let held: HashMap<Var, Var> = g_dsts.iter().copied().zip(dsts.iter().copied()).collect();
    let calls = fork_calls(d.program, g_dsts, args, instances);
    let passed = passed_args(d, op).expect("checked");
    let mut bwd_args = Vec::new();
    let mut outs = Vec::new();
    let mut contributions = Vec::new();
    let mut join_calls = Vec::new();
    let mut each = 0;
    for (call, (ids, active)) in calls.iter().zip(parts) {
        let first = bwd_args.len();
        for v in call
            .dsts
            .iter()
            .filter(|v| w.g.vars[**v].ty.elem.is_float())
        {
            bwd_args.push(w.b.adjoint_or_zero(held[v], loc)?);
        }
        let callee = &d.program.functions[call.callee];
        for ((arg, param), _) in call
            .args
            .iter()
            .zip(&callee.params)
            .zip(active)
            .filter(|(_, a)| **a)
        {
            let (v, stacked) = match arg {
                InstanceArg::Whole(v) => (*v, matches!(instances, Instances::Map { .. })),
                InstanceArg::Element(v) => (*v, false),
                InstanceArg::Index => unreachable!("an index is never active"),
            };
            let ty = callee.vars[*param].ty.clone();
            let ty = match instances {
                Instances::Map { count, .. } => TensorType {
                    elem: ty.elem,
                    dims: std::iter::once(*count).chain(ty.dims).collect(),
                },
                Instances::Join(_) => ty,
            };
            let out = w.b.var(ty, None, false);
            outs.push(out);
            contributions.push((
                v,
                if stacked {
                    Contribution::Stacked(out)
                } else {
                    Contribution::Whole(out)
                },
            ));
        }
        // A `map`'s adjoints are its elements; what follows goes whole
        // to every instance.
        each = bwd_args.len();
        for v in &passed[join_calls.len()] {
            bwd_args.push(w.value(*v));
        }
        join_calls.push(JoinCall {
            callee: ids.bwd,
            args: bwd_args.len() - first,
            loc: call.loc.unwrap_or(loc),
        });
    }
    let instances = match instances {
        Instances::Join(_) => Instances::Join(join_calls),
        Instances::Map { count, .. } => Instances::Map {
            callee: parts[0].0.bwd,
            count: *count,
            index: false,
            each,
        },
    };
    w.b.push(Op::Fork {
        dsts: outs,
        args: bwd_args,
        instances,
        loc,
        tape: TapeMode::Restore,
    });
    Ok(contributions)
}

/// The adjoints of a call's float results (`dsts`: the values it defined).
fn result_adjoints(w: &mut Backward, op: &Op, dsts: &[Var], loc: Loc) -> DeriveResult<Vec<Var>> {
    let mut dys = Vec::new();
    for (v, d) in op.defs().iter().zip(dsts) {
        if w.g.vars[*v].ty.elem.is_float() {
            dys.push(w.b.adjoint_or_zero(*d, loc)?);
        }
    }
    Ok(dys)
}

/// The arguments whose flag in `active` is set.
fn active_args(args: &[Var], active: &[bool]) -> Vec<Var> {
    args.iter()
        .zip(active)
        .filter(|(_, a)| **a)
        .map(|(v, _)| *v)
        .collect()
}

/// Walking back over `op`: the variables it defined take their values
/// before it, popped if pushed there (`before`), else values no adjoint
/// reads (a row of a differentiated static is read again where needed).
fn restore(w: &mut Backward, op: &Op, before: &[Var], loc: Loc) {
    let popped = w.pop(before, loc);
    for d in op.defs() {
        match w.invariants[d.index()] {
            // (A passed parameter has no definition.)
            Some(Invariant::Static(_) | Invariant::Constant(_) | Invariant::Passed) => continue,
            // Read again from the static when an earlier adjoint needs it,
            // at the index the row had then.
            Some(Invariant::Row { .. }) => {
                w.map.remove(d);
                continue;
            }
            None => {}
        }
        let x = match before.iter().position(|v| v == d) {
            Some(k) => popped[k],
            None => w.fresh(*d),
        };
        w.map.insert(*d, x);
    }
}

/// New ids for the two parts of a taped plan.
pub(crate) fn plan_ids(d: &mut Deriver) -> TapedIds {
    let fwd = d.fresh_id();
    let bwd = d.fresh_id();
    TapedIds { fwd, bwd }
}
