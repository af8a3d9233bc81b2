//! The analyses the derivation needs on the function it differentiates:
//! a re-entered entry copied, reachability and activity (which variables
//! depend on the active parameters); and one on the functions it builds: updating arrays in place.

use std::collections::BTreeSet;

use autobatch_ir::liveness::{Liveness, VarSet};
use autobatch_ir::{Block, BlockData, EntityRef, Function, Op, Prim, Terminator, UnaryOp, Var};

/// A copy of `f` whose entry block has no predecessor: when blocks jump
/// back to the entry (a self tail call made a jump), they jump to a copy
/// of it instead, so that entering the function and restarting it each
/// enter one block (one step) with the same operations, and the entry is
/// only ever entered from the caller.
pub(crate) fn copy_reentered_entry(f: &Function) -> Function {
    let mut g = f.clone();
    if predecessor_counts(&g)[0] == 0 {
        return g;
    }
    let n = g.blocks.len();
    let copy = Block::new(n);
    let retarget = |b: Block| if b.0 == 0 { copy } else { b };
    for b in 0..n {
        let t = retarget_term(&g.blocks[Block::new(b)].term, &retarget);
        g.blocks[Block::new(b)].term = t;
    }
    let body = g.blocks[Block(0)].clone();
    g.blocks.push(body);
    g
}

fn retarget_term(t: &Terminator, map: &dyn Fn(Block) -> Block) -> Terminator {
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

/// How many reachable blocks jump or branch to each block.
pub(crate) fn predecessor_counts(g: &Function) -> Vec<usize> {
    let reach = reachable(g);
    let mut preds = vec![0; g.blocks.len()];
    for (b, data) in g.blocks.iter() {
        if !reach[b.index()] {
            continue;
        }
        for s in data.term.successors() {
            preds[s.index()] += 1;
        }
    }
    preds
}

/// Which blocks can be reached from the entry.
pub(crate) fn reachable(g: &Function) -> Vec<bool> {
    let mut seen = vec![false; g.blocks.len()];
    let mut stack = vec![Block(0)];
    seen[0] = true;
    while let Some(b) = stack.pop() {
        for s in g.blocks[b].term.successors() {
            if !seen[s.index()] {
                seen[s.index()] = true;
                stack.push(s);
            }
        }
    }
    seen
}

/// Whether a primitive's result carries derivative information from its
/// operands (false for the piecewise-constant ones).
pub(crate) fn propagates(prim: &Prim) -> bool {
    !matches!(
        prim,
        Prim::Unary(UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Signum)
    )
}

/// Which variables depend (through float values) on the active parameters
/// or on the statics of `sources`, flow-insensitively: a variable is active
/// if any of its definitions is. A load of an active static is active, as
/// are the results of a call or fork of a function that reads one.
pub(crate) fn activity(
    g: &Function,
    active: &[bool],
    reachable: &[bool],
    sources: &Sources,
) -> Vec<bool> {
    let mut act = vec![false; g.vars.len()];
    for (p, a) in g.params.iter().zip(active) {
        if *a {
            act[p.index()] = true;
        }
    }
    let mut changed = true;
    while changed {
        changed = false;
        for (b, data) in g.blocks.iter() {
            if !reachable[b.index()] {
                continue;
            }
            for op in &data.ops {
                if !op.uses().iter().any(|v| act[v.index()]) && !sources.starts(op) {
                    continue;
                }
                if let Op::Prim { prim, .. } = op {
                    if !propagates(prim) {
                        continue;
                    }
                }
                for d in op.defs() {
                    if g.vars[*d].ty.elem.is_float() && !act[d.index()] {
                        act[d.index()] = true;
                        changed = true;
                    }
                }
            }
        }
    }
    act
}

/// Which variables' values can reach a float result of `g`: a returned
/// value, an argument of a call or fork, or an operand of a primitive
/// whose float result propagates derivatives and is itself such a
/// variable. A value read only by comparisons, predicates, checks and
/// conditions (`normal_lpdf`'s `dot(mu, zeros) == 0` finiteness check)
/// is not: its adjoint is zero, so no adjoint rule need run for the
/// operation that defines it, nor keep that operation's operands.
/// Flow-insensitive over variables, as [`activity`].
pub(crate) fn useful(g: &Function, reachable: &[bool]) -> Vec<bool> {
    let mut useful = vec![false; g.vars.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for (b, data) in g.blocks.iter() {
            if !reachable[b.index()] {
                continue;
            }
            let mut reached: Vec<Var> = Vec::new();
            if let Terminator::Return(values) = &data.term {
                reached.extend(values);
            }
            for op in &data.ops {
                let reaches = match op {
                    Op::Prim {
                        dst: Some(y), prim, ..
                    } => propagates(prim) && g.vars[*y].ty.elem.is_float() && useful[y.index()],
                    Op::Prim { dst: None, .. } => false,
                    _ => true,
                };
                if reaches {
                    reached.extend(op.uses());
                }
            }
            for v in reached {
                if !useful[v.index()] {
                    useful[v.index()] = true;
                    changed = true;
                }
            }
        }
    }
    useful
}

/// Rewrites `d = index_set(s, i, v)` into `s = index_set(s, i, v)` (and
/// reads of `d` into reads of `s`) where that changes no value: `s` is
/// read no more after it (before it is defined again), `d` is defined
/// there only and read only later in the same block, before `s` is
/// defined again, and neither is live out of the block nor a parameter.
/// Executors update `s = index_set(s, ..)` in place instead of copying
/// the array (an adjoint accumulated element by element, `d.theta[k] +=
/// ..` in a loop, is one array, not a copy per element). Then drops the
/// copies of a variable into itself.
pub(crate) fn update_in_place(func: &mut Function) {
    let live = Liveness::compute(func);
    let mut defs = vec![0usize; func.vars.len()];
    for op in func.blocks.values().flat_map(|b| &b.ops) {
        for d in op.defs() {
            defs[d.index()] += 1;
        }
    }
    let params: BTreeSet<Var> = func.params.iter().copied().collect();
    let blocks: Vec<Block> = func.blocks.keys().collect();
    for blk in blocks {
        let live_out = &live.live_out[blk.index()];
        let data = &mut func.blocks[blk];
        for k in 0..data.ops.len() {
            let Op::Prim {
                dst: Some(d),
                prim: Prim::IndexSet,
                args,
                ..
            } = &data.ops[k]
            else {
                continue;
            };
            let (d, s) = (*d, args[0]);
            if d == s
                || defs[d.index()] != 1
                || params.contains(&s)
                || params.contains(&d)
                || live_out.contains(d)
                || !renamable(data, k, s, d, live_out)
            {
                continue;
            }
            if let Op::Prim { dst, .. } = &mut data.ops[k] {
                *dst = Some(s);
            }
            for op in &mut data.ops[k + 1..] {
                rename_uses(op, d, s);
            }
            if let Terminator::Branch { cond, .. } = &mut data.term {
                if *cond == d {
                    *cond = s;
                }
            }
            if let Terminator::Return(vars) = &mut data.term {
                for v in vars.iter_mut().filter(|v| **v == d) {
                    *v = s;
                }
            }
        }
        data.ops.retain(|op| {
            !matches!(op, Op::Prim { dst: Some(d), prim: Prim::Copy, args, .. } if args[0] == *d)
        });
    }
}

/// Whether, after op `k` of `data`, `s` is read no more before it is
/// defined again (nor live out of the block if it is not), and every read
/// of `d` comes before `s` is defined again (an operation reads before it
/// writes: `s = copy d` is fine).
fn renamable(data: &BlockData, k: usize, s: Var, d: Var, live_out: &VarSet) -> bool {
    for (j, op) in data.ops.iter().enumerate().skip(k + 1) {
        if op.uses().contains(&s) {
            return false;
        }
        if op.defs().contains(&s) {
            let later = data.ops[j + 1..].iter().flat_map(|o| o.uses());
            return !later.chain(data.term.uses()).any(|v| *v == d);
        }
    }
    !data.term.uses().contains(&s) && !live_out.contains(s)
}

fn rename_uses(op: &mut Op, from: Var, to: Var) {
    let args = match op {
        Op::Prim { args, .. } | Op::Call { args, .. } | Op::Fork { args, .. } => args,
    };
    for a in args.iter_mut().filter(|a| **a == from) {
        *a = to;
    }
}

/// The statics a gradient is taken with respect to (`--grad-statics`), and
/// which functions of the program read them (themselves, or through the
/// functions they call or run as instances).
#[derive(Clone, Debug, Default)]
pub(crate) struct Sources {
    /// By static: whether it is differentiated.
    pub statics: Vec<bool>,
    /// By function of the original program: whether it reads one.
    pub reads: Vec<bool>,
}

impl Sources {
    /// The sources for the statics marked in `statics` (by `StaticId`).
    pub fn new(program: &autobatch_ir::Program, statics: Vec<bool>) -> Sources {
        let mut sources = Sources {
            statics,
            reads: vec![false; program.functions.len()],
        };
        let mut changed = true;
        while changed {
            changed = false;
            for (f, func) in program.functions.iter() {
                if sources.reads[f.index()] {
                    continue;
                }
                let reads = func
                    .blocks
                    .values()
                    .flat_map(|b| &b.ops)
                    .any(|op| sources.starts(op));
                if reads {
                    sources.reads[f.index()] = true;
                    changed = true;
                }
            }
        }
        sources
    }

    /// Whether `static` is differentiated.
    pub fn is_active(&self, id: autobatch_ir::StaticId) -> bool {
        self.statics.get(id.0 as usize).copied().unwrap_or(false)
    }

    /// Whether function `f` reads a differentiated static.
    pub fn reads(&self, f: autobatch_ir::FuncId) -> bool {
        self.reads.get(f.index()).copied().unwrap_or(false)
    }

    /// Whether `op`'s results depend on a differentiated static whatever
    /// its operands: a load of one, or a call or fork of a function that
    /// reads one.
    pub fn starts(&self, op: &Op) -> bool {
        match op {
            Op::Prim {
                prim: Prim::LoadStatic(id),
                ..
            } => self.is_active(*id),
            Op::Prim { .. } => false,
            Op::Call { callee, .. } => self.reads(*callee),
            Op::Fork { instances, .. } => match instances {
                autobatch_ir::Instances::Join(calls) => calls.iter().any(|c| self.reads(c.callee)),
                autobatch_ir::Instances::Map { callee, .. } => self.reads(*callee),
            },
        }
    }
}
