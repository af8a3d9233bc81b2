//! Self tail calls become jumps.
//!
//! A call of a function to itself whose results are returned unchanged (a
//! `return f(..)`, or `f(..)` as the tail expression, possibly through the
//! copies that an `if` expression makes into its result variable) does not
//! need a new activation: the arguments are moved into the parameters and
//! control jumps back to the entry block. This is what lets
//! `iota_sum(1000, 0)` run under `--max-stack-depth 8`; it is part of the
//! meaning of a program (every executor runs the optimized IR), so the
//! reference executor and every batching strategy agree on stack depths.
//!
//! The arguments are first copied into fresh temporaries and only then into
//! the parameters, because an argument may read a parameter that an earlier
//! assignment would overwrite (`gcd(b, a % b)` swaps them).

use std::collections::HashMap;

use autobatch_ir::{
    Block, BlockData, FuncId, Function, Op, Prim, Program, Terminator, Var, VarData,
};

/// Rewrites every self tail call of every function; returns how many were rewritten.
pub fn eliminate_self_tail_calls(program: &mut Program) -> usize {
    let ids: Vec<FuncId> = program.functions.keys().collect();
    ids.into_iter()
        .map(|id| eliminate_in_function(id, &mut program.functions[id]))
        .sum()
}

fn eliminate_in_function(id: FuncId, function: &mut Function) -> usize {
    let mut rewritten = 0;
    let blocks: Vec<Block> = function.blocks.keys().collect();
    for b in blocks {
        let Some(call_index) = tail_call_position(id, function, b) else {
            continue;
        };
        let block = &mut function.blocks[b];
        let Op::Call { args, loc, .. } = block.ops[call_index].clone() else {
            unreachable!()
        };
        block.ops.truncate(call_index);
        let params = function.params.clone();
        let mut moves = Vec::new();
        let mut temporaries = Vec::new();
        for (param, arg) in params.iter().zip(&args) {
            if param == arg {
                continue;
            }
            let ty = function.vars[*arg].ty.clone();
            let temporary = function.vars.push(VarData { ty, name: None });
            moves.push(Op::Prim {
                dst: Some(temporary),
                prim: Prim::Copy,
                args: vec![*arg],
                loc,
            });
            temporaries.push((*param, temporary));
        }
        for (param, temporary) in temporaries {
            moves.push(Op::Prim {
                dst: Some(param),
                prim: Prim::Copy,
                args: vec![temporary],
                loc,
            });
        }
        let block = &mut function.blocks[b];
        block.ops.extend(moves);
        block.term = Terminator::Jump(Function::ENTRY);
        rewritten += 1;
    }
    rewritten
}

/// If block `b` of function `id` ends in a self call whose results reach a
/// `Return` unchanged, the index of that call in the block.
fn tail_call_position(id: FuncId, function: &Function, b: Block) -> Option<usize> {
    let block = &function.blocks[b];
    let call_index = block.last_self_call(id)?;
    let Op::Call { dsts, .. } = &block.ops[call_index] else {
        return None;
    };
    // Which result of the call each variable now holds.
    let mut holds: HashMap<Var, usize> = dsts.iter().enumerate().map(|(i, v)| (*v, i)).collect();
    let follow_copies = |ops: &[Op], holds: &mut HashMap<Var, usize>| -> bool {
        for op in ops {
            match op {
                Op::Prim {
                    dst: Some(dst),
                    prim: Prim::Copy,
                    args,
                    ..
                } => match holds.get(&args[0]).copied() {
                    Some(i) => {
                        holds.insert(*dst, i);
                    }
                    None => {
                        holds.remove(dst);
                    }
                },
                _ => return false,
            }
        }
        true
    };
    if !follow_copies(&block.ops[call_index + 1..], &mut holds) {
        return None;
    }
    let mut current: &BlockData = block;
    // A bounded walk: the chain of empty join blocks is short, and a cycle
    // of jumps (an infinite loop) must not hang the compiler.
    for _ in 0..function.blocks.len() + 1 {
        match &current.term {
            Terminator::Return(vars) => {
                let returns_results = vars.len() == dsts.len()
                    && vars
                        .iter()
                        .enumerate()
                        .all(|(i, v)| holds.get(v) == Some(&i));
                return returns_results.then_some(call_index);
            }
            Terminator::Jump(next) => {
                current = &function.blocks[*next];
                if !follow_copies(&current.ops, &mut holds) {
                    return None;
                }
            }
            Terminator::Branch { .. } => return None,
        }
    }
    None
}
