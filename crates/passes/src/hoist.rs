//! Loop-invariant operations move out of their loops.
//!
//! An operation inside a loop whose operands do not change while the loop
//! runs computes the same value on every iteration: `ln(sigma)` in the
//! `normal_lupdf` of a loop over observations, the `1 / sigma` of a
//! standardization. Such an operation moves to the end of the loop's
//! preheader (the one block outside the loop that enters it, by an
//! unconditional jump), where it runs once per entry into the loop.
//!
//! An operation moves only when moving it cannot change anything a member
//! observes:
//! - it is a primitive without effect ([`Prim::has_effect`]: no draw, no
//!   check, no tape, no host call) that cannot fault on its operands'
//!   types ([`Prim::may_fault`]), so that running it once before the loop,
//!   even a loop that then runs zero times, or before an earlier fault of
//!   the loop, computes nothing a member could see but the same value;
//! - every operand is written nowhere in the loop, so its value inside the
//!   loop is the one it has when the loop is entered;
//! - its result is written by this operation only, and every read of the
//!   result comes after it on every path (later in its block, or in a block
//!   its block dominates), so that no read sees a different value;
//! - a constant moves only with an operation that reads it.
//!
//! The value computed is the same operation on the same operands, so the
//! same bits, on every executor. No block is added or removed, so the steps
//! a member counts are the same. The pass runs after the derivation of
//! gradients: the derivative is that of the program as written.

use autobatch_ir::{Block, EntityRef, Function, Op, Prim, Program, Terminator, Var};

/// Moves the loop-invariant operations of every function out of their
/// loops; returns how many operations moved.
pub fn hoist_loop_invariants(program: &mut Program) -> usize {
    program.functions.values_mut().map(hoist_in_function).sum()
}

/// A natural loop: its header and the blocks of its body (the header
/// among them).
struct Loop {
    header: Block,
    body: Vec<bool>,
    size: usize,
}

fn hoist_in_function(function: &mut Function) -> usize {
    let n = function.blocks.len();
    if n == 0 {
        return 0;
    }
    let preds = predecessors(function);
    let order = reverse_postorder(function);
    let idom = immediate_dominators(&order, &preds, n);
    let mut loops = natural_loops(function, &preds, &idom);
    // Inner loops first: what leaves an inner loop may then leave the
    // loop around it.
    loops.sort_by_key(|l| l.size);
    let mut moved = 0;
    for l in &loops {
        moved += hoist_from_loop(function, l, &preds, &idom);
    }
    moved
}

fn predecessors(function: &Function) -> Vec<Vec<Block>> {
    let mut preds = vec![Vec::new(); function.blocks.len()];
    for (b, data) in function.blocks.iter() {
        for s in data.term.successors() {
            if s.index() < preds.len() && !preds[s.index()].contains(&b) {
                preds[s.index()].push(b);
            }
        }
    }
    preds
}

/// The blocks reachable from the entry, in reverse postorder.
fn reverse_postorder(function: &Function) -> Vec<Block> {
    let n = function.blocks.len();
    let mut seen = vec![false; n];
    let mut post = Vec::with_capacity(n);
    // (block, index of the next successor to visit)
    let mut stack = vec![(Function::ENTRY, 0usize)];
    seen[Function::ENTRY.index()] = true;
    while let Some((b, next)) = stack.pop() {
        let successors = function.blocks[b].term.successors();
        match successors.get(next) {
            Some(&s) => {
                stack.push((b, next + 1));
                if s.index() < n && !seen[s.index()] {
                    seen[s.index()] = true;
                    stack.push((s, 0));
                }
            }
            None => post.push(b),
        }
    }
    post.reverse();
    post
}

/// The immediate dominator of each reachable block (the entry's is
/// itself; an unreachable block has none), by the iterative algorithm of
/// Cooper, Harvey and Kennedy.
fn immediate_dominators(order: &[Block], preds: &[Vec<Block>], n: usize) -> Vec<Option<Block>> {
    let mut rank = vec![usize::MAX; n];
    for (i, b) in order.iter().enumerate() {
        rank[b.index()] = i;
    }
    let mut idom: Vec<Option<Block>> = vec![None; n];
    idom[Function::ENTRY.index()] = Some(Function::ENTRY);
    let intersect = |idom: &[Option<Block>], mut a: Block, mut b: Block| {
        while a != b {
            while rank[a.index()] > rank[b.index()] {
                a = idom[a.index()].unwrap_or(Function::ENTRY);
            }
            while rank[b.index()] > rank[a.index()] {
                b = idom[b.index()].unwrap_or(Function::ENTRY);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new: Option<Block> = None;
            for &p in &preds[b.index()] {
                if idom[p.index()].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(q) => intersect(&idom, p, q),
                });
            }
            if new.is_some() && idom[b.index()] != new {
                idom[b.index()] = new;
                changed = true;
            }
        }
    }
    idom
}

/// Whether `a` dominates `b` (both reachable).
fn dominates(idom: &[Option<Block>], a: Block, b: Block) -> bool {
    let mut at = b;
    loop {
        if at == a {
            return true;
        }
        match idom[at.index()] {
            Some(up) if up != at => at = up,
            _ => return false,
        }
    }
}

/// The natural loops, one per header (the back edges into one header make
/// one loop).
fn natural_loops(function: &Function, preds: &[Vec<Block>], idom: &[Option<Block>]) -> Vec<Loop> {
    let n = function.blocks.len();
    let mut loops: Vec<Loop> = Vec::new();
    for (b, data) in function.blocks.iter() {
        if idom[b.index()].is_none() {
            continue;
        }
        for header in data.term.successors() {
            if header.index() >= n || !dominates(idom, header, b) {
                continue;
            }
            let at = match loops.iter().position(|l| l.header == header) {
                Some(at) => at,
                None => {
                    let mut body = vec![false; n];
                    body[header.index()] = true;
                    loops.push(Loop {
                        header,
                        body,
                        size: 1,
                    });
                    loops.len() - 1
                }
            };
            let l = &mut loops[at];
            let mut todo = vec![b];
            while let Some(x) = todo.pop() {
                if idom[x.index()].is_none() || std::mem::replace(&mut l.body[x.index()], true) {
                    continue;
                }
                l.size += 1;
                todo.extend(preds[x.index()].iter().copied());
            }
        }
    }
    loops
}

/// Moves the invariant operations of loop `l` to the end of its preheader;
/// returns how many moved.
fn hoist_from_loop(
    function: &mut Function,
    l: &Loop,
    preds: &[Vec<Block>],
    idom: &[Option<Block>],
) -> usize {
    let outside: Vec<Block> = preds[l.header.index()]
        .iter()
        .copied()
        .filter(|p| !l.body[p.index()])
        .collect();
    let [preheader] = outside[..] else {
        return 0;
    };
    if function.blocks[preheader].term != Terminator::Jump(l.header) {
        return 0;
    }
    let places = Places::of(function);
    // Whether each variable is written in the loop; updated as operations move.
    let mut written_in_loop = vec![false; function.vars.len()];
    for (b, data) in function.blocks.iter() {
        if l.body[b.index()] {
            for op in &data.ops {
                for d in op.defs() {
                    written_in_loop[d.index()] = true;
                }
            }
        }
    }
    // The positions (block, index) of the operations that move, in an order
    // in which each comes after the operations whose results it reads.
    let mut chosen: Vec<(Block, usize)> = Vec::new();
    let mut taken = vec![false; function.vars.len()];
    let blocks: Vec<Block> = function
        .blocks
        .keys()
        .filter(|b| l.body[b.index()])
        .collect();
    let mut progress = true;
    while progress {
        progress = false;
        for &b in &blocks {
            for (i, op) in function.blocks[b].ops.iter().enumerate() {
                let Op::Prim {
                    dst: Some(dst),
                    prim,
                    args,
                    ..
                } = op
                else {
                    continue;
                };
                if taken[dst.index()]
                    || !movable(function, prim, args)
                    || args.iter().any(|a| written_in_loop[a.index()])
                    || !places.single_dominating_def(*dst, b, i, idom)
                {
                    continue;
                }
                taken[dst.index()] = true;
                written_in_loop[dst.index()] = false;
                chosen.push((b, i));
                progress = true;
            }
        }
    }
    keep_read_constants(function, &mut chosen);
    if chosen.is_empty() {
        return 0;
    }
    let mut moving: Vec<Op> = chosen
        .iter()
        .map(|&(b, i)| function.blocks[b].ops[i].clone())
        .collect();
    let mut removed: Vec<(Block, usize)> = chosen.clone();
    removed.sort_unstable_by(|x, y| y.cmp(x));
    for (b, i) in removed {
        function.blocks[b].ops.remove(i);
    }
    let count = moving.len();
    function.blocks[preheader].ops.append(&mut moving);
    count
}

/// Drops from `chosen` the constants that no other chosen operation reads:
/// a constant moves only with an operation that reads it.
fn keep_read_constants(function: &Function, chosen: &mut Vec<(Block, usize)>) {
    let mut read_by_moved = vec![false; function.vars.len()];
    for &(b, i) in chosen.iter() {
        let op = &function.blocks[b].ops[i];
        if !matches!(
            op,
            Op::Prim {
                prim: Prim::Const(_),
                ..
            }
        ) {
            for a in op.uses() {
                read_by_moved[a.index()] = true;
            }
        }
    }
    chosen.retain(|&(b, i)| match &function.blocks[b].ops[i] {
        Op::Prim {
            prim: Prim::Const(_),
            dst: Some(dst),
            ..
        } => read_by_moved[dst.index()],
        _ => true,
    });
}

/// Whether an operation may run where the member's path would not run it:
/// a primitive without effect that cannot fault on its operands.
fn movable(function: &Function, prim: &Prim, args: &[Var]) -> bool {
    if prim.has_effect() || prim.is_per_member() {
        return false;
    }
    let types: Vec<_> = args.iter().map(|a| &function.vars[*a].ty).collect();
    !prim.may_fault(&types)
}

/// Where each variable is written and read.
struct Places {
    /// Per variable, its writes: (block, index of the operation).
    defs: Vec<Vec<(Block, usize)>>,
    /// Per variable, its reads: (block, index of the operation, or the
    /// number of operations for the terminator).
    uses: Vec<Vec<(Block, usize)>>,
    /// Per variable, whether it is a parameter.
    param: Vec<bool>,
}

impl Places {
    fn of(function: &Function) -> Places {
        let n = function.vars.len();
        let mut places = Places {
            defs: vec![Vec::new(); n],
            uses: vec![Vec::new(); n],
            param: vec![false; n],
        };
        for p in &function.params {
            places.param[p.index()] = true;
        }
        for (b, data) in function.blocks.iter() {
            for (i, op) in data.ops.iter().enumerate() {
                for d in op.defs() {
                    places.defs[d.index()].push((b, i));
                }
                for u in op.uses() {
                    places.uses[u.index()].push((b, i));
                }
            }
            for u in data.term.uses() {
                places.uses[u.index()].push((b, data.ops.len()));
            }
        }
        places
    }

    /// Whether `v` is written only by operation `i` of block `b`, and every
    /// read of it comes after that operation on every path.
    fn single_dominating_def(&self, v: Var, b: Block, i: usize, idom: &[Option<Block>]) -> bool {
        if self.param[v.index()] || self.defs[v.index()] != [(b, i)] {
            return false;
        }
        self.uses[v.index()].iter().all(|&(ub, ui)| {
            if ub == b {
                ui > i
            } else {
                idom[ub.index()].is_some() && dominates(idom, b, ub)
            }
        })
    }
}
