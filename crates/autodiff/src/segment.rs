//! Loops cut into segments, so that past the tape bound the derivation
//! recomputes a loop a segment at a time.
//!
//! The tape's bound is kept at calls (`tape/recompute.rs`): past half the
//! bound a call of a function that loops runs untaped and its backward
//! part runs it again. A loop in one activation has no such call. So
//! before deriving, each loop of a function the derivation may reach
//! (one whose header dominates its blocks, with no `return` inside) is
//! moved into a generated function, a *segment*, that runs at most
//! [`SEGMENT`] iterations of it: it takes the variables the loop reads or
//! assigns, runs the loop's own blocks from its header, and returns the
//! variables the loop assigns that are read after it or in the next
//! iteration, and a code: `0` when the segment ended with the loop going
//! on, `j + 1` when the loop left for its `j`-th exit. In `g`, the loop is
//! one block calling the segment again while the code is `0`, then going
//! to the exit the code names.
//!
//! The blocks the cut adds count no steps and the loop's blocks count
//! theirs, so the function takes its steps as before; the segment's calls
//! nest one level for the time of a segment. Values, faults and draws are
//! the loop's own: a segment runs the same operations in the same order.
//! The derivation then treats a segment as any call of a function that
//! loops: taped while the member holds less than half the bound,
//! recomputed from its arguments past it. A loop of `n` iterations is so
//! run again at most once in the backward part (work `O(n)`), and a
//! member past half the bound holds its arguments per segment instead of
//! the iterations' values.
//!
//! Only the copy of the program the derivation reads is cut; the
//! functions themselves (and so every undifferentiated run) keep their
//! loops. A segment is named `g'seg` and its id, a name messages never
//! show ([`autobatch_ir::Function::user_name`]).

use std::collections::BTreeSet;

use autobatch_ir::liveness::Liveness;
use autobatch_ir::{
    user_function_name, BinaryOp, Block, BlockData, CompareOp, EntityRef, EntityVec, FuncId,
    Function, Op, Prim, Program, Scalar, ScalarType, TensorType, Terminator, Var, VarData,
};
use autobatch_types::Loc;

use crate::analysis;

/// The iterations a segment runs at most.
pub(crate) const SEGMENT: i64 = 64;

/// `program` with the loops of the functions `roots` reach (through calls
/// and forks) cut into segments; the generated functions follow the
/// program's.
pub(crate) fn segmented(program: &Program, roots: &[FuncId]) -> Program {
    let mut out = program.clone();
    for f in reached(program, roots) {
        let g = analysis::copy_reentered_entry(&out.functions[f]);
        let (g, cut) = cut_loops(&mut out, g, None);
        if cut {
            out.functions[f] = g;
        }
    }
    out
}

/// The functions `roots` reach through calls and forks, roots included.
fn reached(program: &Program, roots: &[FuncId]) -> Vec<FuncId> {
    let mut seen = vec![false; program.functions.len()];
    let mut stack: Vec<FuncId> = roots.to_vec();
    let mut out = Vec::new();
    while let Some(f) = stack.pop() {
        if f.index() >= seen.len() || seen[f.index()] {
            continue;
        }
        seen[f.index()] = true;
        out.push(f);
        for op in program.functions[f].blocks.values().flat_map(|b| &b.ops) {
            stack.extend(op.callees());
        }
    }
    out.sort_by_key(|f| f.index());
    out
}

/// A natural loop of a function: its header and, per block, whether the
/// block is in it.
struct Loop {
    header: Block,
    blocks: Vec<bool>,
}

/// Cuts the loops of `g` into segments, the outermost first (the loop
/// headed by `skip` left as it is: a segment's own), adding the segment
/// functions to `program`. Returns `g` and whether it changed.
fn cut_loops(program: &mut Program, mut g: Function, skip: Option<Block>) -> (Function, bool) {
    let mut changed = false;
    loop {
        let mut loops = natural_loops(&g, skip);
        loops.sort_by_key(|l| std::cmp::Reverse(l.blocks.iter().filter(|b| **b).count()));
        let Some(cut) = loops.iter().find_map(|l| cut_loop(program, &g, l)) else {
            return (g, changed);
        };
        g = cut;
        changed = true;
    }
}

/// The natural loops of `g` (one per header, the union of its back
/// edges' loops), but the one headed by `skip`.
fn natural_loops(g: &Function, skip: Option<Block>) -> Vec<Loop> {
    let n = g.blocks.len();
    let reach = analysis::reachable(g);
    let mut preds = vec![Vec::new(); n];
    for (b, data) in g.blocks.iter() {
        if reach[b.index()] {
            for s in data.term.successors() {
                preds[s.index()].push(b.index());
            }
        }
    }
    let dom = dominators(n, &reach, &preds);
    let mut loops: Vec<Loop> = Vec::new();
    for (b, data) in g.blocks.iter() {
        for s in data.term.successors() {
            let back = reach[b.index()] && dom[b.index()][s.index()];
            if !back || Some(s) == skip {
                continue;
            }
            let at = match loops.iter().position(|l| l.header == s) {
                Some(at) => at,
                None => {
                    let mut blocks = vec![false; n];
                    blocks[s.index()] = true;
                    loops.push(Loop { header: s, blocks });
                    loops.len() - 1
                }
            };
            let blocks = &mut loops[at].blocks;
            let mut stack = vec![b.index()];
            while let Some(x) = stack.pop() {
                if !blocks[x] {
                    blocks[x] = true;
                    stack.extend(preds[x].iter().copied());
                }
            }
        }
    }
    loops
}

/// Per reachable block, the blocks that dominate it (`dom[b][a]`: `a`
/// dominates `b`).
fn dominators(n: usize, reach: &[bool], preds: &[Vec<usize>]) -> Vec<Vec<bool>> {
    let mut dom: Vec<Vec<bool>> = (0..n)
        .map(|b| {
            if b == 0 {
                (0..n).map(|a| a == 0).collect()
            } else {
                reach.to_vec()
            }
        })
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for b in 1..n {
            if !reach[b] {
                continue;
            }
            let mut meet = reach.to_vec();
            for p in &preds[b] {
                for (m, d) in meet.iter_mut().zip(&dom[*p]) {
                    *m &= *d;
                }
            }
            meet[b] = true;
            if meet != dom[b] {
                dom[b] = meet;
                changed = true;
            }
        }
    }
    dom
}

/// `g` with loop `l` cut into a segment function (added to `program`),
/// or `None` when the loop does not fit a segment: its header is the
/// entry, a block of it returns or is one the derivation added, or a
/// variable it assigns and hands on may have no value where it starts.
fn cut_loop(program: &mut Program, g: &Function, l: &Loop) -> Option<Function> {
    let h = l.header;
    let inside: Vec<Block> = (0..g.blocks.len())
        .filter(|b| l.blocks[*b])
        .map(Block::new)
        .collect();
    let fits = h != Function::ENTRY
        && inside.iter().all(|b| {
            let data = &g.blocks[*b];
            g.counts_step(*b) && !matches!(data.term, Terminator::Return(_))
        });
    if !fits {
        return None;
    }
    let live = Liveness::compute(g);
    let mut assigned = vec![false; g.vars.len()];
    let mut read = vec![false; g.vars.len()];
    for b in &inside {
        let data = &g.blocks[*b];
        for op in &data.ops {
            op.defs().iter().for_each(|d| assigned[d.index()] = true);
            op.uses().iter().for_each(|u| read[u.index()] = true);
        }
        data.term.uses().iter().for_each(|u| read[u.index()] = true);
    }
    let mut exits: Vec<Block> = Vec::new();
    for b in &inside {
        for s in g.blocks[*b].term.successors() {
            if !l.blocks[s.index()] && !exits.contains(&s) {
                exits.push(s);
            }
        }
    }
    let at_header = &live.live_in[h.index()];
    let mut handed: BTreeSet<Var> = at_header.iter().collect();
    for t in &exits {
        handed.extend(live.live_in[t.index()].iter());
    }
    let results: Vec<Var> = handed.into_iter().filter(|v| assigned[v.index()]).collect();
    if results.iter().any(|v| !at_header.contains(*v)) {
        return None;
    }
    let inputs: Vec<Var> = at_header
        .iter()
        .filter(|v| read[v.index()] || assigned[v.index()])
        .collect();
    // A constant or a static the loop only reads is made again in the
    // segment rather than passed.
    let remade: Vec<(Var, Op)> = inputs
        .iter()
        .filter(|v| !assigned[v.index()])
        .filter_map(|v| remade_definition(g, *v).map(|op| (*v, op)))
        .collect();
    let params: Vec<Var> = inputs
        .iter()
        .filter(|v| !remade.iter().any(|(r, _)| r == *v))
        .copied()
        .collect();
    let cut = Cut {
        inside: &inside,
        header: h,
        exits: &exits,
        params: &params,
        results: &results,
        remade: remade.into_iter().map(|(_, op)| op).collect(),
    };
    let segment = segment_function(g, &cut);
    let header = segment.entered;
    let (mut segment, _) = cut_loops(program, segment.function, Some(header));
    // Named by its id, so that no two segments share a name (a program
    // derived again, for the statics' gradient, gets segments of its own).
    segment.name = format!(
        "{}'seg{}",
        user_function_name(&g.name),
        program.functions.len()
    );
    let id = program.functions.push(segment);
    Some(calling_segments(g, &cut, id))
}

/// The one definition of `v` in `g` when every definition of it is the
/// same constant or the same load of a static (and there is one).
fn remade_definition(g: &Function, v: Var) -> Option<Op> {
    let defs: Vec<&Op> = g
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter(|op| op.defs().contains(&v))
        .collect();
    let first = defs.first()?;
    let plain = matches!(
        first,
        Op::Prim {
            prim: Prim::Const(_) | Prim::LoadStatic(_),
            ..
        }
    );
    let same = |op: &&Op| match (op, first) {
        (
            Op::Prim {
                prim: Prim::Const(a),
                ..
            },
            Op::Prim {
                prim: Prim::Const(b),
                ..
            },
        ) => same_bits(*a, *b),
        (
            Op::Prim {
                prim: Prim::LoadStatic(a),
                ..
            },
            Op::Prim {
                prim: Prim::LoadStatic(b),
                ..
            },
        ) => a == b,
        _ => false,
    };
    (plain && defs.iter().all(same)).then(|| (*first).clone())
}

/// Whether two constants are the same value, bit for bit.
fn same_bits(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F64(a), Scalar::F64(b)) => a.to_bits() == b.to_bits(),
        (Scalar::F32(a), Scalar::F32(b)) => a.to_bits() == b.to_bits(),
        _ => a == b,
    }
}

/// A loop being cut: its blocks, header and exits, what the segment takes
/// and returns, and the definitions it makes again.
struct Cut<'a> {
    inside: &'a [Block],
    header: Block,
    exits: &'a [Block],
    params: &'a [Var],
    results: &'a [Var],
    remade: Vec<Op>,
}

/// A segment function and the block its loop's header became.
struct Segment {
    function: Function,
    entered: Block,
}

fn i64_type() -> TensorType {
    TensorType::scalar(ScalarType::I64)
}

fn prim(dst: Var, prim: Prim, args: Vec<Var>, loc: Loc) -> Op {
    Op::Prim {
        dst: Some(dst),
        prim,
        args,
        loc,
    }
}

/// An added block: it counts no step.
fn added(ops: Vec<Op>, term: Terminator, loc: Loc) -> BlockData {
    BlockData {
        ops,
        term,
        loc,
        uncounted: true,
    }
}

/// The function running at most [`SEGMENT`] iterations of the loop `cut`
/// from its header (see the module doc); its variables are `g`'s.
fn segment_function(g: &Function, cut: &Cut) -> Segment {
    let mut s = g.clone();
    let loc = g.blocks[cut.header].loc;
    let mut var = |ty: TensorType| s.vars.push(VarData { ty, name: None });
    let (count, one, most) = (var(i64_type()), var(i64_type()), var(i64_type()));
    let more = var(TensorType::scalar(ScalarType::Bool));
    let code = var(i64_type());
    let mut blocks: EntityVec<Block, BlockData> = EntityVec::new();
    let mut entry_ops = cut.remade.clone();
    entry_ops.extend([
        prim(count, Prim::Const(Scalar::I64(0)), Vec::new(), loc),
        prim(one, Prim::Const(Scalar::I64(1)), Vec::new(), loc),
        prim(most, Prim::Const(Scalar::I64(SEGMENT)), Vec::new(), loc),
    ]);
    let entry = blocks.push(added(entry_ops, Terminator::Return(Vec::new()), loc));
    let mut map = vec![None; g.blocks.len()];
    for b in cut.inside {
        map[b.index()] = Some(blocks.push(g.blocks[*b].clone()));
    }
    let header = map[cut.header.index()].expect("the header is in the loop");
    let returning = |code_value: i64| {
        let mut out = cut.results.to_vec();
        out.push(code);
        added(
            vec![prim(
                code,
                Prim::Const(Scalar::I64(code_value)),
                Vec::new(),
                loc,
            )],
            Terminator::Return(out),
            loc,
        )
    };
    let going_on = blocks.push(returning(0));
    let counted = blocks.push(added(
        vec![
            prim(count, Prim::Binary(BinaryOp::Add), vec![count, one], loc),
            prim(more, Prim::Compare(CompareOp::Lt), vec![count, most], loc),
        ],
        Terminator::Branch {
            cond: more,
            then_block: header,
            else_block: going_on,
        },
        loc,
    ));
    let exits: Vec<Block> = (0..cut.exits.len())
        .map(|j| blocks.push(returning(j as i64 + 1)))
        .collect();
    blocks[entry].term = Terminator::Jump(header);
    for b in cut.inside {
        let new = map[b.index()].expect("a block of the loop");
        let target = |t: Block| {
            if t == cut.header {
                counted
            } else if let Some(m) = map[t.index()] {
                m
            } else {
                let j = cut.exits.iter().position(|e| *e == t).expect("an exit");
                exits[j]
            }
        };
        blocks[new].term = retarget(&blocks[new].term, target);
    }
    s.blocks = blocks;
    s.params = cut.params.to_vec();
    s.results = cut.results.iter().map(|v| g.vars[*v].ty.clone()).collect();
    s.results.push(i64_type());
    s.signature = s.flat_signature();
    s.ret_type = s.flat_ret_type();
    s.uncounted = false;
    Segment {
        function: s,
        entered: header,
    }
}

/// `g` with loop `cut` replaced by the calls of segment function `id`.
fn calling_segments(g: &Function, cut: &Cut, id: FuncId) -> Function {
    let mut f = g.clone();
    let loc = g.blocks[cut.header].loc;
    let code = f.vars.push(VarData {
        ty: i64_type(),
        name: None,
    });
    let mut dsts = cut.results.to_vec();
    dsts.push(code);
    let call = Op::Call {
        dsts,
        callee: id,
        args: cut.params.to_vec(),
        loc,
        catch: false,
    };
    let calls = f
        .blocks
        .push(added(vec![call], Terminator::Return(Vec::new()), loc));
    // Code 0 goes on with the next segment, code `j + 1` to exit `j`.
    let targets: Vec<Block> = std::iter::once(calls)
        .chain(cut.exits.iter().copied())
        .collect();
    let mut at = calls;
    let (last, tested) = targets.split_last().expect("the call's block");
    for (k, target) in tested.iter().enumerate() {
        let value = f.vars.push(VarData {
            ty: i64_type(),
            name: None,
        });
        let same = f.vars.push(VarData {
            ty: TensorType::scalar(ScalarType::Bool),
            name: None,
        });
        f.blocks[at].ops.extend([
            prim(value, Prim::Const(Scalar::I64(k as i64)), Vec::new(), loc),
            prim(same, Prim::Compare(CompareOp::Eq), vec![code, value], loc),
        ]);
        let next = f
            .blocks
            .push(added(Vec::new(), Terminator::Return(Vec::new()), loc));
        f.blocks[at].term = Terminator::Branch {
            cond: same,
            then_block: *target,
            else_block: next,
        };
        at = next;
    }
    f.blocks[at].term = Terminator::Jump(*last);
    let to_calls = |t: Block| if t == cut.header { calls } else { t };
    for b in 0..g.blocks.len() {
        let b = Block::new(b);
        if !cut.inside.contains(&b) {
            f.blocks[b].term = retarget(&f.blocks[b].term, to_calls);
        }
    }
    reached_blocks_only(f)
}

/// `f` without the blocks its entry no longer reaches (the loop's own,
/// now the segment's), the others renumbered in order.
fn reached_blocks_only(mut f: Function) -> Function {
    let reach = analysis::reachable(&f);
    let mut new_index = vec![None; f.blocks.len()];
    let mut blocks: EntityVec<Block, BlockData> = EntityVec::new();
    for (b, data) in f.blocks.iter() {
        if reach[b.index()] {
            new_index[b.index()] = Some(blocks.push(data.clone()));
        }
    }
    for data in blocks.values_mut() {
        data.term = retarget(&data.term, |t| {
            new_index[t.index()].expect("a reached block")
        });
    }
    f.blocks = blocks;
    f
}

/// `t` with every successor `s` replaced by `map(s)`.
fn retarget(t: &Terminator, map: impl Fn(Block) -> Block) -> Terminator {
    match t {
        Terminator::Jump(b) => Terminator::Jump(map(*b)),
        Terminator::Branch {
            cond,
            then_block,
            else_block,
        } => Terminator::Branch {
            cond: *cond,
            then_block: map(*then_block),
            else_block: map(*else_block),
        },
        Terminator::Return(v) => Terminator::Return(v.clone()),
    }
}
