//! Recomputation past the tape bound: at a call (or fork) of a function
//! whose tape may be large, the forward part chooses per member whether to
//! save the callee's tape or only its arguments and a flag; the backward
//! part runs the callee's forward part again where the flag says so.

use super::*;

/// Whether a call of `callee` (or an instance of it) may be recomputed:
/// its tape may be large, that is, it loops, forks or recurses, or calls
/// (directly or through others) a function that does. A function of
/// straight-line code calling only such functions saves a bounded tape,
/// as one block does, and is taped like one.
pub(super) fn recomputable(program: &Program, callee: FuncId) -> bool {
    grows(program, callee, &mut Vec::new(), &mut HashMap::new())
}

/// [`recomputable`] of `f`, reached through the calls of `path`; `known`
/// holds the answers found so far (an answer does not depend on the path:
/// a function that reaches one on the path recurses itself).
fn grows(
    program: &Program,
    f: FuncId,
    path: &mut Vec<FuncId>,
    known: &mut HashMap<FuncId, bool>,
) -> bool {
    if path.contains(&f) {
        return true;
    }
    if let Some(&answer) = known.get(&f) {
        return answer;
    }
    let function = &program.functions[f];
    path.push(f);
    let answer = loops(function)
        || function
            .blocks
            .values()
            .flat_map(|b| &b.ops)
            .any(|op| match op {
                Op::Fork { .. } => true,
                Op::Call { callee, .. } => grows(program, *callee, path, known),
                _ => false,
            });
    path.pop();
    known.insert(f, answer);
    answer
}

/// Whether a block of `f` reachable from its entry can be entered again.
fn loops(f: &Function) -> bool {
    // Depth-first from the entry; an edge to a block on the path is a loop.
    let n = f.blocks.len();
    let mut state = vec![0u8; n]; // 0 unseen, 1 on the path, 2 done
    let mut stack = vec![(Function::ENTRY, 0usize)];
    state[0] = 1;
    while let Some((b, next)) = stack.pop() {
        let successors = f.blocks[b].term.successors();
        match successors.get(next) {
            Some(s) => {
                stack.push((b, next + 1));
                match state[s.index()] {
                    1 => return true,
                    0 => {
                        state[s.index()] = 1;
                        stack.push((*s, 0));
                    }
                    _ => {}
                }
            }
            None => state[b.index()] = 2,
        }
    }
    false
}

/// Ends block `at` of a forward part, holding `ops`, with the call of
/// the callee of `call` (of `g`; or its fork of the callees) as the
/// member's tape decides, in blocks
/// that count no step: when the member already holds more than half the
/// run's tape bound (`tape_over`), the arguments (as [`saved_args`] takes
/// them) are pushed and `call` runs, untaped; else `taped` (the call of
/// the forward part, the fork of the forward parts) runs between `tape_mark` and
/// `tape_settle`, which drops what the callee saved when the member then
/// holds more than half the bound, and then the arguments (read before
/// the call) are pushed. Last a flag: `true` when the arguments are on
/// the tape in place of the callee's tape. The backward part pops it and,
/// when it is `true`, runs the callee's forward part again from the
/// arguments before its backward part ([`rerun_if_recomputed`]): the same
/// values either way (the forward part computes what the function does),
/// and the same choices inside it (the member's tape holds what it held
/// at the call). Returns the block where the forward part goes on and its
/// operations so far.
pub(super) fn recomputing_call(
    f: &mut Function,
    at: Block,
    mut ops: Vec<Op>,
    call: &Op,
    taped: Op,
    invariants: &[Option<Invariant>],
) -> (Block, Vec<Op>) {
    let (dsts, loc) = (call.defs(), call.loc());
    let mut var = |ty: TensorType| f.vars.push(VarData { ty, name: None });
    let bool_ty = TensorType::scalar(ScalarType::Bool);
    let over = var(bool_ty.clone());
    let mark = var(TensorType::scalar(ScalarType::I64));
    let dropped = var(bool_ty.clone());
    let recomputed = var(bool_ty);
    let prim = |dst: Var, prim: Prim, args: Vec<Var>| Op::Prim {
        dst: Some(dst),
        prim,
        args,
        loc,
    };
    let block = |ops: Vec<Op>, term: Terminator| BlockData {
        ops,
        term,
        loc,
        uncounted: true,
        check_arm: false,
    };
    let saved = saved_args(call, invariants);
    let next = f
        .blocks
        .push(block(Vec::new(), Terminator::Return(Vec::new())));
    // Recomputed: `true` after the arguments.
    let flagged = f.blocks.push(block(
        vec![
            prim(recomputed, Prim::Const(Scalar::Bool(true)), Vec::new()),
            push(vec![recomputed], loc),
        ],
        Terminator::Jump(next),
    ));
    let kept = f.blocks.push(block(
        vec![push(vec![dropped], loc)],
        Terminator::Jump(next),
    ));
    // Already over half the bound: the callee's own function, untaped.
    let mut untaped = Vec::new();
    if !saved.is_empty() {
        untaped.push(push(saved.clone(), loc));
    }
    untaped.push(call.clone());
    let untaped = f.blocks.push(block(untaped, Terminator::Jump(flagged)));
    // Else taped, and its tape dropped if the member is over half the
    // bound after it; an argument the call overwrites is read before it.
    let mut taped_ops = vec![prim(mark, Prim::TapeMark, Vec::new())];
    let mut saved_after = saved;
    for a in saved_after.iter_mut() {
        if dsts.contains(a) {
            let ty = f.vars[*a].ty.clone();
            let before = f.vars.push(VarData { ty, name: None });
            taped_ops.push(prim(before, Prim::Copy, vec![*a]));
            *a = before;
        }
    }
    taped_ops.push(taped);
    taped_ops.push(prim(dropped, Prim::TapeSettle, Vec::new()));
    let dropping = if saved_after.is_empty() {
        flagged
    } else {
        f.blocks.push(block(
            vec![push(saved_after, loc)],
            Terminator::Jump(flagged),
        ))
    };
    let taped = f.blocks.push(block(
        taped_ops,
        Terminator::Branch {
            cond: dropped,
            then_block: dropping,
            else_block: kept,
        },
    ));
    ops.push(prim(over, Prim::TapeOver, Vec::new()));
    f.blocks[at].ops = ops;
    f.blocks[at].term = Terminator::Branch {
        cond: over,
        then_block: untaped,
        else_block: taped,
    };
    (next, Vec::new())
}

/// The start of the backward part of a call (or fork) the forward part
/// chose to recompute or not ([`recomputing_call`]): pops the flag; when
/// it is `true`, pops the arguments and runs `again(arguments, results)`
/// on them, the call of the copy of the callee's forward part that counts
/// no steps (or the fork of the copies), which saves the callee's tape
/// again, its own calls choosing again. The callee's backward part
/// follows, either way.
pub(super) fn rerun_if_recomputed(
    w: &mut Backward,
    call: &Op,
    loc: Loc,
    again: impl FnOnce(Vec<Var>, Vec<Var>) -> Op,
) {
    let dsts = call.defs();
    // The arguments the tape does not hold are made before the choice, so
    // that they are defined wherever they are read.
    let made: Vec<Option<Var>> = call_args(call)
        .iter()
        .map(|a| w.invariants[a.index()].is_some().then(|| w.value(*a)))
        .collect();
    let bool_ty = TensorType::scalar(ScalarType::Bool);
    let flag = w.b.var(bool_ty.clone(), None, false);
    w.b.prim_into(flag, Prim::TapePop(bool_ty), Vec::new(), loc);
    let recomputed = w.b.new_block(loc);
    let next = w.b.new_block(loc);
    w.b.terminate(Terminator::Branch {
        cond: flag,
        then_block: recomputed,
        else_block: next,
    });
    w.b.current = recomputed;
    let saved = saved_args(call, w.invariants);
    let mut popped = w.pop(&saved, loc).into_iter();
    let args: Vec<Var> = made
        .into_iter()
        .map(|m| m.unwrap_or_else(|| popped.next().expect("a saved argument")))
        .collect();
    let results: Vec<Var> = dsts.iter().map(|v| w.fresh(*v)).collect();
    w.b.push(again(args, results));
    w.b.terminate(Terminator::Jump(next));
    w.b.current = next;
}

/// The instances of taped fork `op` as a recomputation runs it again
/// (with `TapeMode::SaveAgain`: saving the instances' tapes, drawing no
/// key): the copies of the callees' forward parts that count no steps.
pub(super) fn rerun_instances(
    d: &mut Deriver,
    op: &Op,
    parts: &[(TapedIds, Vec<bool>)],
) -> Instances {
    let Op::Fork { instances, .. } = saving_fork(op, parts) else {
        unreachable!("a fork")
    };
    match instances {
        Instances::Join(calls) => Instances::Join(
            calls
                .into_iter()
                .map(|call| JoinCall {
                    callee: d.uncounted_copy(call.callee),
                    ..call
                })
                .collect(),
        ),
        Instances::Map {
            callee,
            count,
            index,
            each,
        } => Instances::Map {
            callee: d.uncounted_copy(callee),
            count,
            index,
            each,
        },
    }
}
