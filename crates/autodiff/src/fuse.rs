//! One function for the vjp of a function that is one block: its forward
//! part's operations, then its backward part's, with nothing on the tape.
//!
//! When `g` (as [`crate::prepare`] puts it) is a single block of
//! primitives (no call, no fork) and its backward part is a straight line
//! of blocks (jumps only), the forward part's pushes and the backward
//! part's pops pair up one to one in the order the tape takes them. The
//! fused function runs the forward part's operations unchanged (same
//! operations, order and locations: it faults where `g` faults and, as one
//! counted block, takes `g`'s one step at `g`'s block), then the backward
//! part's, each pop reading the variable whose value was pushed (or a
//! copy of it made where it was pushed, when a later operation overwrites
//! the variable or the backward part assigns what it popped). The vjp then
//! calls that function alone. Nothing is pushed, so the tape holds nothing
//! (`tape_bytes` 0) and no `tape_limit` can arise, and the values each
//! operation computes are the same, so the bits are too. The executors see
//! the whole gradient as one block: a product, its elementwise chain and
//! the product of its adjoint (`z = X theta` ... `vecmat(r, X)`) fuse as
//! one product chain.
//!
//! A `g` with check arms (blocks that only test and fault, see
//! `autobatch_ir::line`) is derived without them, and the fused function
//! gets them back after the backward part's operations when none of those
//! may fault (so the first fault a member meets is still `g`'s), else
//! right after the forward part's; a member that does not enter an arm
//! takes the one counted step. When an arm may not move to `g`'s end (an
//! operation after it may fault), `g` is derived with the arm's
//! operations in line, always run ([`Function::with_check_arms_always_entered`]).
//!
//! The forward and backward parts are still built (and kept, unused by the
//! fused vjp): the plan's ids name them.

use std::collections::HashMap;

use autobatch_ir::line::{CheckArm, Line};
use autobatch_ir::{EntityRef, Function, Op, Prim, Terminator, Var, VarData};

/// The vjp `vjp` of plan `g` rewritten to call one fused function instead
/// of `fwd` then `bwd`, with that function (to be given the id the new
/// vjp's call names, `fused_id`), when `g` fits (see the module doc).
pub(crate) fn fuse(
    vjp: &Function,
    fwd: &Function,
    bwd: &Function,
    fused_id: autobatch_ir::FuncId,
    arms: &[CheckArm],
) -> Option<(Function, Function)> {
    let shared = shared_args(vjp)?;
    let fused = fused(fwd, bwd, &shared, arms)?;
    let vjp = calling_fused(vjp, fused_id, &shared)?;
    Some((vjp, fused))
}

/// Per argument of the vjp's call of the backward part, the position of
/// the same variable among the arguments of its call of the forward part
/// (a parameter passed to both, `tape/passed.rs`): the fused function
/// takes it once.
fn shared_args(vjp: &Function) -> Option<Vec<Option<usize>>> {
    let [block] = &vjp.blocks.values().collect::<Vec<_>>()[..] else {
        return None;
    };
    let [Op::Call { args: a1, .. }, Op::Call { args: a2, .. }] = &block.ops[..] else {
        return None;
    };
    Some(a2.iter().map(|a| a1.iter().position(|b| b == a)).collect())
}

/// The vjp with its two calls (forward part, backward part) made one call
/// of the fused function, which takes both calls' arguments (those of the
/// backward part's that are also the forward part's once: `shared`) and
/// gives both calls' results.
fn calling_fused(
    vjp: &Function,
    fused_id: autobatch_ir::FuncId,
    shared: &[Option<usize>],
) -> Option<Function> {
    let [block] = &vjp.blocks.values().collect::<Vec<_>>()[..] else {
        return None;
    };
    let [Op::Call {
        dsts: d1,
        args: a1,
        loc,
        catch: false,
        ..
    }, Op::Call {
        dsts: d2,
        args: a2,
        catch: false,
        ..
    }] = &block.ops[..]
    else {
        return None;
    };
    let mut out = vjp.clone();
    out.blocks[Function::ENTRY].ops = vec![Op::Call {
        dsts: d1.iter().chain(d2).copied().collect(),
        callee: fused_id,
        args: a1
            .iter()
            .chain(
                a2.iter()
                    .zip(shared)
                    .filter(|(_, s)| s.is_none())
                    .map(|(a, _)| a),
            )
            .copied()
            .collect(),
        loc: *loc,
        catch: false,
    }];
    Some(out)
}

/// The operations of `bwd` from its entry along its jumps to its return,
/// and the returned variables; `None` if it branches or calls.
fn straight_line(bwd: &Function) -> Option<(Vec<&Op>, &[Var])> {
    let mut ops = Vec::new();
    let mut seen = vec![false; bwd.blocks.len()];
    let mut b = Function::ENTRY;
    loop {
        if std::mem::replace(&mut seen[b.index()], true) {
            return None;
        }
        let data = &bwd.blocks[b];
        if !data.ops.iter().all(|op| matches!(op, Op::Prim { .. })) {
            return None;
        }
        ops.extend(data.ops.iter());
        match &data.term {
            Terminator::Jump(next) => b = *next,
            Terminator::Return(vs) => return Some((ops, vs)),
            Terminator::Branch { .. } => return None,
        }
    }
}

/// `fwd`'s block without its pushes, then `bwd`'s operations reading the
/// pushed values where they pop them (see the module doc), then the check
/// arms `arms` of the function `fwd` was derived from
/// ([`without_check_arms`]); before `bwd`'s operations if one of those may
/// fault.
fn fused(
    fwd: &Function,
    bwd: &Function,
    shared: &[Option<usize>],
    arms: &[CheckArm],
) -> Option<Function> {
    let [block] = &fwd.blocks.values().collect::<Vec<_>>()[..] else {
        return None;
    };
    let Terminator::Return(results) = &block.term else {
        return None;
    };
    if !block.ops.iter().all(|op| matches!(op, Op::Prim { .. })) {
        return None;
    }
    let (bwd_ops, bwd_results) = straight_line(bwd)?;
    let mut w = Fusing {
        f: fwd.clone(),
        ops: Vec::with_capacity(block.ops.len() + bwd_ops.len()),
        tape: Vec::new(),
    };
    w.forward(&block.ops);
    let forward_end = w.ops.len();
    let map = w.backward(bwd, &bwd_ops, shared)?;
    let mut returned = results.clone();
    for v in bwd_results {
        returned.push(*map.get(v)?);
    }
    let Fusing { mut f, ops, .. } = w;
    let faults = crate::builder::faulting_operations(&f.vars, &ops);
    let at = if faults[forward_end..].contains(&true) {
        forward_end
    } else {
        ops.len()
    };
    f.results.extend(bwd.results.iter().cloned());
    f.set_line(Line {
        ops,
        arms: arms.iter().map(|arm| arm.renamed(at, |v| v)).collect(),
        results: returned,
    });
    f.name = fwd.name.replace(".fwd", ".fused");
    f.signature = f.flat_signature();
    f.ret_type = f.flat_ret_type();
    f.uncounted = false;
    Some(f)
}

/// The fused function under construction.
struct Fusing {
    /// The forward part, gaining the backward part's variables.
    f: Function,
    /// The operations of its one block so far.
    ops: Vec<Op>,
    /// The variables holding the values pushed so far, the last pushed last.
    tape: Vec<Var>,
}

impl Fusing {
    /// The forward part's operations, its pushes dropped: a pushed
    /// variable that a later operation overwrites is copied where it was
    /// pushed.
    fn forward(&mut self, block_ops: &[Op]) {
        for (k, op) in block_ops.iter().enumerate() {
            let Op::Prim {
                prim: Prim::TapePush,
                args,
                loc,
                ..
            } = op
            else {
                self.ops.push(op.clone());
                continue;
            };
            for a in args {
                let later = block_ops[k + 1..].iter().any(|o| o.defs().contains(a));
                let held = if later { self.copy_of(*a, *loc) } else { *a };
                self.tape.push(held);
            }
        }
    }

    /// The backward part's operations on variables of their own, each pop
    /// reading the variable that holds the value it pops; the variables
    /// of `bwd` in the fused function (a parameter `shared` with the
    /// forward part is its parameter, which nothing assigns). `None` if
    /// the pops do not match the pushes one to one.
    fn backward(
        &mut self,
        bwd: &Function,
        bwd_ops: &[&Op],
        shared: &[Option<usize>],
    ) -> Option<HashMap<Var, Var>> {
        let mut defs: HashMap<Var, usize> = HashMap::new();
        for op in bwd_ops {
            for d in op.defs() {
                *defs.entry(*d).or_default() += 1;
            }
        }
        let mut map: HashMap<Var, Var> = HashMap::new();
        let fwd_params = self.f.params.clone();
        for (p, s) in bwd.params.iter().zip(shared) {
            let v = match s {
                Some(j) => fwd_params[*j],
                None => {
                    let v = self.f.vars.push(bwd.vars[*p].clone());
                    self.f.params.push(v);
                    v
                }
            };
            map.insert(*p, v);
        }
        for op in bwd_ops {
            let Op::Prim {
                dst,
                prim,
                args,
                loc,
            } = op
            else {
                return None;
            };
            if let (Prim::TapePop(ty), Some(x)) = (prim, dst) {
                let v = self.tape.pop()?;
                if self.f.vars[v].ty != *ty || map.contains_key(x) {
                    return None;
                }
                // A popped variable the backward part assigns again gets a
                // copy, so that the forward variable keeps its value.
                let held = if defs[x] == 1 {
                    v
                } else {
                    self.copy_of(v, *loc)
                };
                map.insert(*x, held);
                continue;
            }
            let f = &mut self.f;
            let mut var = |v: &Var| {
                *map.entry(*v)
                    .or_insert_with(|| f.vars.push(bwd.vars[*v].clone()))
            };
            let op = Op::Prim {
                dst: dst.as_ref().map(&mut var),
                prim: prim.clone(),
                args: args.iter().map(&mut var).collect(),
                loc: *loc,
            };
            self.ops.push(op);
        }
        self.tape.is_empty().then_some(map)
    }

    /// A fresh variable holding a copy of `v`, made at the end of the ops.
    fn copy_of(&mut self, v: Var, loc: autobatch_types::Loc) -> Var {
        let data = VarData {
            ty: self.f.vars[v].ty.clone(),
            name: None,
        };
        let x = self.f.vars.push(data);
        self.ops.push(Op::Prim {
            dst: Some(x),
            prim: Prim::Copy,
            args: vec![v],
            loc,
        });
        x
    }
}

/// `g` (as [`crate::prepare`] puts it) as one block without its check
/// arms (`autobatch_ir::line`), and the arms, when `g` is one line of
/// primitives whose arms may run at its end: the derivation is then fused,
/// and [`fuse`] puts the arms after the forward part's operations (after
/// the backward part's too when none of those may fault). An arm writes
/// nothing the line reads, so the forward and backward operations are
/// those of `g`, and the arms meet the faults they meet in `g`, in the same
/// order, since no forward operation after them may fault.
pub(crate) fn without_check_arms(g: &Function) -> Option<(Function, Vec<CheckArm>)> {
    let line = g.line()?;
    if line.arms.is_empty() || !line.ops.iter().all(|op| matches!(op, Op::Prim { .. })) {
        return None;
    }
    if !line.arms_movable_to_end(&crate::builder::faulting_operations(&g.vars, &line.ops)) {
        return None;
    }
    let mut stripped = g.clone();
    stripped.set_line(Line {
        ops: line.ops,
        arms: Vec::new(),
        results: line.results,
    });
    Some((stripped, line.arms))
}
