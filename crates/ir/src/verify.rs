//! The IR verifier. Tests run it after every pass; a failure is a compiler
//! bug, never a user error.
//!
//! Invariants checked:
//!
//! 1. Every function has at least one block; its entry is `b0`.
//! 2. Every variable, block, callee, static and symbol that is referenced exists.
//! 3. Parameters are distinct variables whose types are the flattening of the
//!    function's signature; `results` is the flattening of `ret_type`.
//! 4. Every primitive's operand types fit it (`Prim::result_type`), its
//!    result variable has exactly the result type, and it has a result
//!    variable exactly when the primitive produces one.
//! 5. Every call passes as many variables as the callee has parameters, of the
//!    same types, and receives the callee's results into variables of the
//!    same types, none named twice (after a `bool` flag for a catching call).
//!    A fork's instances are calls in the same sense: each `join` call takes
//!    its arguments in order and the results are the calls' results in
//!    order; a `map` of count `N` passes `k: i64` first if it has an index,
//!    then element `k` of each `each` argument (`[T; N]` for a parameter
//!    `T`), then the others whole, and receives `[R; N]` for each result `R`.
//! 6. A branch condition is a `bool` scalar; a return returns variables of
//!    the function's result types.
//! 7. Every variable is assigned on every path from the entry before it is
//!    read (parameters count as assigned at entry).
//! 8. A block marked as a check arm counts no step, holds only primitives
//!    and ends in a jump.

use std::collections::HashSet;

use crate::{Block, EntityRef, Function, Op, Program, Terminator, Var};
use autobatch_types::{Dim, TensorType};

/// A broken invariant: which function, where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    pub function: String,
    pub block: Option<Block>,
    pub message: String,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.block {
            Some(b) => write!(f, "verifier: fn {} {b}: {}", self.function, self.message),
            None => write!(f, "verifier: fn {}: {}", self.function, self.message),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Checks every invariant listed in the module doc; returns all failures.
pub fn verify_program(program: &Program) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    for (_, decl) in program.statics.iter() {
        check_type(program, &decl.ty, &mut |m| {
            errors.push(VerifyError {
                function: format!("<static {}>", decl.name),
                block: None,
                message: m,
            })
        });
    }
    for (_, f) in program.functions.iter() {
        verify_function(program, f, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn check_type(program: &Program, ty: &TensorType, report: &mut dyn FnMut(String)) {
    for d in &ty.dims {
        if let Dim::Symbolic(s) = d {
            if s.0 as usize >= program.symbols.len() {
                report(format!("unknown symbol sym{}", s.0));
            }
        }
    }
}

/// Every invariant of one function; invariant 7 only when the others hold
/// (it reads every variable and block).
fn verify_function(program: &Program, f: &Function, errors: &mut Vec<VerifyError>) {
    let mut err = |block: Option<Block>, message: String| {
        errors.push(VerifyError {
            function: f.name.clone(),
            block,
            message,
        });
    };
    if f.blocks.is_empty() {
        err(None, "no blocks".into());
        return;
    }
    for (v, d) in f.vars.iter() {
        check_type(program, &d.ty, &mut |m| err(None, format!("{v}: {m}")));
    }
    check_signature(f, &mut |m| err(None, m));
    for (b, block) in f.blocks.iter() {
        let mut err = |m: String| err(Some(b), m);
        for op in &block.ops {
            check_op(program, f, op, &mut err);
        }
        check_terminator(f, &block.term, &mut err);
        let arm_shaped = block.uncounted
            && matches!(block.term, Terminator::Jump(_))
            && block.ops.iter().all(|op| matches!(op, Op::Prim { .. }));
        if block.check_arm && !arm_shaped {
            err("a check arm must count no step, hold only primitives and end in a jump".into());
        }
    }
    if errors.iter().any(|e| e.function == f.name) {
        return;
    }
    check_definite_assignment(f, errors);
}

/// Invariant 3: parameters and results.
fn check_signature(f: &Function, err: &mut dyn FnMut(String)) {
    let flat_params: Vec<TensorType> = f.signature.iter().flat_map(|p| p.ty.flatten()).collect();
    if flat_params.len() != f.params.len() {
        err(format!(
            "{} parameter variables for a signature of {}",
            f.params.len(),
            flat_params.len()
        ));
    }
    let mut seen = HashSet::new();
    for (p, t) in f.params.iter().zip(&flat_params) {
        match f.vars.get(*p) {
            None => err(format!("parameter {p} does not exist")),
            Some(d) if d.ty != *t => err(format!("parameter {p} has the wrong type")),
            _ => {}
        }
        if !seen.insert(*p) {
            err(format!("parameter {p} appears twice"));
        }
    }
    if f.ret_type.flatten() != f.results {
        err("results are not the flattening of ret_type".into());
    }
}

/// Invariants 2, 4 and 5 for one operation of `f`.
fn check_op(program: &Program, f: &Function, op: &Op, err: &mut dyn FnMut(String)) {
    let var_ty = |v: Var| f.vars.get(v).map(|d| &d.ty);
    let mut missing = false;
    for v in op.uses().iter().chain(op.defs()) {
        if var_ty(*v).is_none() {
            err(format!("variable {v} does not exist"));
            missing = true;
        }
    }
    if missing {
        return;
    }
    let arg_tys: Vec<&TensorType> = op.uses().iter().map(|v| &f.vars[*v].ty).collect();
    match op {
        Op::Prim { dst, prim, .. } => {
            if let crate::Prim::SymbolValue(s)
            | crate::Prim::Fill(Dim::Symbolic(s))
            | crate::Prim::Slice(Dim::Symbolic(s)) = prim
            {
                if s.0 as usize >= program.symbols.len() {
                    err(format!("unknown symbol sym{}", s.0));
                    return;
                }
            }
            let static_type = |s| program.static_type(s);
            match (prim.result_type(&arg_tys, &static_type), dst) {
                (Err(m), _) => err(format!("{prim}: {m}")),
                (Ok(Some(t)), Some(d)) if f.vars[*d].ty != t => {
                    err(format!("{prim}: result {d} has the wrong type"))
                }
                (Ok(Some(_)), None) => err(format!("{prim}: result without a variable")),
                (Ok(None), Some(d)) => err(format!("{prim}: no result, but writes {d}")),
                _ => {}
            }
        }
        Op::Call {
            dsts,
            callee,
            args,
            catch,
            ..
        } => {
            let Some(g) = program.functions.get(*callee) else {
                err(format!("callee {callee} does not exist"));
                return;
            };
            let param_tys: Vec<&TensorType> = g
                .params
                .iter()
                .filter_map(|p| g.vars.get(*p).map(|d| &d.ty))
                .collect();
            if args.len() != g.params.len() || arg_tys != param_tys {
                err(format!(
                    "call of {}: arguments do not match its parameters",
                    g.name
                ));
            }
            if *catch
                && dsts.first().and_then(|d| var_ty(*d))
                    != Some(&TensorType::scalar(autobatch_types::ScalarType::Bool))
            {
                err(format!(
                    "catching call of {}: its first result variable is not a bool flag",
                    g.name
                ));
            }
            let dst_tys: Vec<&TensorType> =
                op.call_results().iter().map(|d| &f.vars[*d].ty).collect();
            if dst_tys.len() != g.results.len()
                || dst_tys.iter().zip(&g.results).any(|(a, b)| *a != b)
            {
                err(format!(
                    "call of {}: result variables do not match its results",
                    g.name
                ));
            }
            let unique: HashSet<&Var> = dsts.iter().collect();
            if unique.len() != dsts.len() {
                err(format!(
                    "call of {}: a result variable appears twice",
                    g.name
                ));
            }
        }
        Op::Fork {
            dsts,
            args,
            instances,
            ..
        } => check_fork(program, f, dsts, args, instances, err),
    }
}

/// Invariants 2 and 6 for a block's terminator.
fn check_terminator(f: &Function, term: &Terminator, err: &mut dyn FnMut(String)) {
    let var_ty = |v: Var| f.vars.get(v).map(|d| &d.ty);
    match term {
        Terminator::Jump(t) => {
            if !f.blocks.contains(*t) {
                err(format!("jump to missing block {t}"));
            }
        }
        Terminator::Branch {
            cond,
            then_block,
            else_block,
        } => {
            for t in [then_block, else_block] {
                if !f.blocks.contains(*t) {
                    err(format!("branch to missing block {t}"));
                }
            }
            match var_ty(*cond) {
                Some(t) if *t == TensorType::scalar(autobatch_types::ScalarType::Bool) => {}
                _ => err(format!("branch condition {cond} is not a bool scalar")),
            }
        }
        Terminator::Return(vars) => {
            let tys: Vec<Option<&TensorType>> = vars.iter().map(|v| var_ty(*v)).collect();
            if tys.len() != f.results.len()
                || tys.iter().zip(&f.results).any(|(a, b)| *a != Some(b))
            {
                err("return does not match the function's results".into());
            }
        }
    }
}

/// Invariant 7, by a forward "must be assigned" data-flow analysis.
fn check_definite_assignment(f: &Function, errors: &mut Vec<VerifyError>) {
    let n = f.vars.len();
    let nb = f.blocks.len();
    // `assigned_in[b]` = variables certainly assigned on entry to b; None = not yet reached.
    let mut assigned_in: Vec<Option<Vec<bool>>> = vec![None; nb];
    let mut entry = vec![false; n];
    for p in &f.params {
        entry[p.index()] = true;
    }
    assigned_in[0] = Some(entry);
    let mut changed = true;
    while changed {
        changed = false;
        for (b, block) in f.blocks.iter() {
            let Some(mut cur) = assigned_in[b.index()].clone() else {
                continue;
            };
            for op in &block.ops {
                for d in op.defs() {
                    cur[d.index()] = true;
                }
            }
            for s in block.term.successors() {
                let slot = &mut assigned_in[s.index()];
                match slot {
                    None => {
                        *slot = Some(cur.clone());
                        changed = true;
                    }
                    Some(old) => {
                        for i in 0..n {
                            if old[i] && !cur[i] {
                                old[i] = false;
                                changed = true;
                            }
                        }
                    }
                }
            }
        }
    }
    for (b, block) in f.blocks.iter() {
        let Some(mut cur) = assigned_in[b.index()].clone() else {
            continue;
        };
        let mut report = |v: Var| {
            errors.push(VerifyError {
                function: f.name.clone(),
                block: Some(b),
                message: format!("{v} may be read before it is assigned"),
            })
        };
        for op in &block.ops {
            for u in op.uses() {
                if !cur[u.index()] {
                    report(*u);
                }
            }
            for d in op.defs() {
                cur[d.index()] = true;
            }
        }
        for u in block.term.uses() {
            if !cur[u.index()] {
                report(*u);
            }
        }
    }
}

/// Invariant 5 for a fork: each instance is a well-typed call.
fn check_fork(
    program: &Program,
    f: &Function,
    dsts: &[Var],
    args: &[Var],
    instances: &crate::Instances,
    err: &mut dyn FnMut(String),
) {
    use crate::{InstanceArg, Instances};
    let count = match instances {
        Instances::Map { count, .. } => Some(*count),
        Instances::Join(calls) => {
            let taken: usize = calls.iter().map(|c| c.args).sum();
            if taken != args.len() || calls.len() < 2 {
                err("join: needs two calls or more that take all its arguments".into());
                return;
            }
            None
        }
    };
    if let (Some(Dim::Symbolic(s)), Instances::Map { .. }) = (count, instances) {
        if s.0 as usize >= program.symbols.len() {
            err(format!("unknown symbol sym{}", s.0));
            return;
        }
    }
    let element = |t: &TensorType| -> Option<TensorType> {
        (t.dims.first().copied() == count).then(|| TensorType {
            elem: t.elem,
            dims: t.dims[1..].to_vec(),
        })
    };
    let mut received = 0;
    for call in crate::fork_calls(program, dsts, args, instances) {
        let Some(g) = program.functions.get(call.callee) else {
            err(format!("callee {} does not exist", call.callee));
            return;
        };
        let passed: Vec<Option<TensorType>> = call
            .args
            .iter()
            .map(|a| match a {
                InstanceArg::Whole(v) => Some(f.vars[*v].ty.clone()),
                InstanceArg::Element(v) => element(&f.vars[*v].ty),
                InstanceArg::Index => Some(TensorType::scalar(autobatch_types::ScalarType::I64)),
            })
            .collect();
        let params: Vec<Option<TensorType>> = g
            .params
            .iter()
            .map(|p| g.vars.get(*p).map(|d| d.ty.clone()))
            .collect();
        if passed != params {
            err(format!(
                "instance of {}: arguments do not match its parameters",
                g.name
            ));
        }
        let expected: Vec<TensorType> = match count {
            None => g.results.clone(),
            Some(n) => g
                .results
                .iter()
                .map(|r| TensorType {
                    elem: r.elem,
                    dims: std::iter::once(n).chain(r.dims.iter().copied()).collect(),
                })
                .collect(),
        };
        let got: Vec<&TensorType> = call.dsts.iter().map(|d| &f.vars[*d].ty).collect();
        if got.len() != expected.len() || got.iter().zip(&expected).any(|(a, b)| *a != b) {
            err(format!(
                "instance of {}: result variables do not match its results",
                g.name
            ));
        }
        received += call.dsts.len();
    }
    let unique: HashSet<&Var> = dsts.iter().collect();
    if received != dsts.len() || unique.len() != dsts.len() {
        err("fork: result variables are not one per result, each once".into());
    }
}
