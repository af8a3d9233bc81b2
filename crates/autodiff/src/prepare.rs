//! The form of a function the taped derivation works on: `g` with the
//! definitions that hold a differentiated static, or a row of one, put so
//! that the backward part can find the static or the row again without the
//! tape holding it (see `tape::Invariant`).
//!
//! - **Entry.** Blocks that jump back to the entry (a self tail call made a
//!   jump) jump to a copy of it instead ([`analysis::copy_reentered_entry`]).
//! - **Mixed variables.** A variable assigned a differentiated static (or a
//!   row of one) in one place and something else in another gets the
//!   static (or the row) through a fresh variable and a copy: the fresh
//!   variable is the static's (its adjoint goes to the member's log), the
//!   variable itself an ordinary value (saved on the tape like any other).
//! - **Row indices.** A row `v = S[i]` whose index `i` may change while `v`
//!   holds the row (a computed or assigned index) reads it through a
//!   *shadow* index `iv`, copied from `i` just before each definition of
//!   `v` and assigned nowhere else: `iv` holds the index of the row `v`
//!   holds, and the tape saves it like any value an adjoint reads.
//!
//! Copies cannot fault and take no step: the function faults, steps and
//! nests as before.

use autobatch_ir::{Block, EntityRef, Function, Op, Prim, Scalar, StaticId, Var, VarData};

use crate::analysis::{self, Sources};

/// `g` prepared for the taped derivation (see the module doc).
pub(crate) fn prepare(g: &Function, sources: &Sources) -> Function {
    let mut g = analysis::copy_reentered_entry(g);
    if !sources.statics.iter().any(|s| *s) {
        return g;
    }
    let loads_active = |op: &Op| matches!(load(op), Some(id) if sources.is_active(id));
    split_definitions(&mut g, |op, defs| {
        loads_active(op) && !defs.iter().all(|d| load(d) == load(op))
    });
    let statics = static_vars(&g, sources);
    let row_of = |op: &Op| match op {
        Op::Prim {
            prim: Prim::Index,
            args,
            ..
        } => statics.get(args[0].index()).copied().flatten(),
        _ => None,
    };
    split_definitions(&mut g, |op, defs| row_of(op).is_some() && defs.len() > 1);
    shadow_row_indices(&mut g, &row_of);
    g
}

/// The static an operation loads, if it is a `load_static`.
pub(crate) fn load(op: &Op) -> Option<StaticId> {
    match op {
        Op::Prim {
            prim: Prim::LoadStatic(id),
            ..
        } => Some(*id),
        _ => None,
    }
}

/// The definitions of each variable of `g`, as (block, position).
fn definitions(g: &Function) -> Vec<Vec<(usize, usize)>> {
    let mut defs = vec![Vec::new(); g.vars.len()];
    for (b, data) in g.blocks.iter() {
        for (k, op) in data.ops.iter().enumerate() {
            for d in op.defs() {
                defs[d.index()].push((b.index(), k));
            }
        }
    }
    defs
}

/// Per variable: the differentiated static every one of its definitions
/// loads (`None` for a variable with another definition, or none).
fn static_vars(g: &Function, sources: &Sources) -> Vec<Option<StaticId>> {
    let defs = definitions(g);
    defs.iter()
        .map(|at| {
            let ids: Vec<Option<StaticId>> = at
                .iter()
                .map(|(b, k)| load(&g.blocks[Block::new(*b)].ops[*k]))
                .collect();
            match ids.first() {
                Some(Some(id)) if sources.is_active(*id) && ids.iter().all(|i| *i == Some(*id)) => {
                    Some(*id)
                }
                _ => None,
            }
        })
        .collect()
}

/// Replaces each operation `picked` chooses (given the definitions of its
/// result), `v = op(..)`, with `t = op(..); v = copy t` for a fresh `t`.
fn split_definitions(g: &mut Function, picked: impl Fn(&Op, &[&Op]) -> bool) {
    let defs = definitions(g);
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    for (b, data) in g.blocks.iter() {
        for (k, op) in data.ops.iter().enumerate() {
            let Op::Prim { dst: Some(v), .. } = op else {
                continue;
            };
            let of_v: Vec<&Op> = defs[v.index()]
                .iter()
                .map(|(c, j)| &g.blocks[Block::new(*c)].ops[*j])
                .collect();
            if picked(op, &of_v) {
                chosen.push((b.index(), k));
            }
        }
    }
    for (b, k) in chosen.into_iter().rev() {
        let block = Block::new(b);
        let Op::Prim {
            dst: Some(v), loc, ..
        } = g.blocks[block].ops[k].clone()
        else {
            unreachable!("a chosen definition")
        };
        let fresh = g.vars.push(VarData {
            ty: g.vars[v].ty.clone(),
            name: None,
        });
        if let Op::Prim { dst, .. } = &mut g.blocks[block].ops[k] {
            *dst = Some(fresh);
        }
        g.blocks[block].ops.insert(k + 1, copy(v, fresh, loc));
    }
}

fn copy(dst: Var, src: Var, loc: autobatch_types::Loc) -> Op {
    Op::Prim {
        dst: Some(dst),
        prim: Prim::Copy,
        args: vec![src],
        loc,
    }
}

/// Gives each variable holding a row whose index may change a shadow index
/// (see the module doc), set to zero on entry so that it always holds a
/// value the tape may save.
fn shadow_row_indices(g: &mut Function, row_of: &impl Fn(&Op) -> Option<StaticId>) {
    let defs = definitions(g);
    // A parameter nothing assigns, or a variable assigned one constant.
    let fixed = |i: Var| match defs[i.index()].as_slice() {
        [] => true,
        [(b, k)] => matches!(
            g.blocks[Block::new(*b)].ops[*k],
            Op::Prim {
                prim: Prim::Const(_),
                ..
            }
        ),
        _ => false,
    };
    let mut shadows: Vec<Option<Var>> = vec![None; g.vars.len()];
    let mut zeros = Vec::new();
    let entry_loc = g.blocks[Function::ENTRY].loc;
    for data in g.blocks.values() {
        for op in &data.ops {
            let (
                Some(_),
                Op::Prim {
                    dst: Some(v), args, ..
                },
            ) = (row_of(op), op)
            else {
                continue;
            };
            if fixed(args[1]) {
                continue;
            }
            let ty = g.vars[args[1]].ty.clone();
            let zero = Scalar::zero(ty.elem);
            let iv = g.vars.push(VarData { ty, name: None });
            shadows[v.index()] = Some(iv);
            zeros.push(Op::Prim {
                dst: Some(iv),
                prim: Prim::Const(zero),
                args: Vec::new(),
                loc: entry_loc,
            });
        }
    }
    let blocks: Vec<Block> = g.blocks.keys().collect();
    for b in blocks {
        let ops = std::mem::take(&mut g.blocks[b].ops);
        let mut out = Vec::with_capacity(ops.len());
        for mut op in ops {
            let shadow = op
                .defs()
                .first()
                .and_then(|d| shadows.get(d.index()).copied().flatten());
            if let (Some(iv), Op::Prim { args, loc, .. }) = (shadow, &mut op) {
                out.push(copy(iv, args[1], *loc));
                args[1] = iv;
            }
            out.push(op);
        }
        g.blocks[b].ops = out;
    }
    let entry = &mut g.blocks[Function::ENTRY].ops;
    entry.splice(0..0, zeros);
}
