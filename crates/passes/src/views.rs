//! Which parameters hold one and the same shared value in every activation:
//! a weight matrix passed as an argument (`cell(W, h)`, `cell(WS[0], h)`).
//!
//! A parameter normally takes a new value at every call, and the
//! program-counter strategy runs activations that received different values
//! in one step, so [`crate::uniformity`] treats every parameter (but the
//! shared ones of an uncalled entry) as per-member. When every call site
//! (every call and every instance of a fork, in every function a run of the
//! entry may reach, through recursion) passes the *same expression* of
//! shared values, the parameter holds that value in every activation of
//! every member, and is invariant like the expression itself: stored once,
//! never copied into a per-member column, and a product with it is one
//! shared product over all rows.
//!
//! The expression of a variable ([`Expr`]) is known when the variable has
//! one definition and that definition is
//! - a non-random primitive whose operands have known expressions (a
//!   static, a constant, `WS[0]`, `transpose(W)`, ...): the primitive over
//!   its operands' expressions;
//! - the binding of a parameter: for the entry function (when nothing calls
//!   it) its `k`-th parameter if shared by all members, else the one
//!   expression that every call site passes (an element or the index of a
//!   `map` never has one).
//!
//! In a ragged batch, a symbolic dimension whose length is each member's
//! own is no shared value: neither its value nor a variable whose type
//! mentions it (`[0.5; L]`) has an expression.
//!
//! Two expressions are the same when they are built by equal primitives
//! (`PartialEq`: a constant NaN is never equal to itself, so it is never
//! matched, which errs on the per-member side) over the same operands.
//! Since the kernels are deterministic, the same expression gives the same
//! bits wherever it is computed.
//!
//! Found as a greatest fixpoint, as [`crate::member`]: parameters start
//! unknown, each call site lowers its callee's parameters to what it passes,
//! operations are recomputed from their operands, and what stays unknown
//! (functions the entry never reaches, cycles no outside call enters)
//! becomes per-member; then again until nothing changes.

use autobatch_ir::{EntityRef, FuncId, Op, Prim, Program, SymbolId, Var};

use crate::member::{self, call_sites, lower_params, Passed};

/// An expression of shared values, interned: an index into [`Exprs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExprId(u32);

/// One node of an expression of shared values.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The entry function's `k`-th parameter, shared by all members.
    Entry(u32),
    /// A non-random primitive over expressions.
    Prim { prim: Prim, args: Vec<ExprId> },
}

/// The interned expressions: equal expressions get one id.
#[derive(Clone, Debug, Default)]
pub struct Exprs {
    nodes: Vec<Expr>,
}

impl Exprs {
    fn intern(&mut self, expr: Expr) -> ExprId {
        if let Some(k) = self.nodes.iter().position(|e| *e == expr) {
            return ExprId(k as u32);
        }
        self.nodes.push(expr);
        ExprId(self.nodes.len() as u32 - 1)
    }

    pub fn get(&self, id: ExprId) -> &Expr {
        &self.nodes[id.0 as usize]
    }
}

/// What is known of one variable: the expression of shared values it holds
/// in every activation.
type State = member::State<ExprId>;

/// Per function and variable, the expression of shared values a parameter
/// holds in every activation (for parameters only; `None` elsewhere).
#[derive(Clone, Debug)]
pub struct SharedParams {
    pub exprs: Exprs,
    pub param_expr: Vec<Vec<Option<ExprId>>>,
}

impl SharedParams {
    /// Whether parameter `v` of `f` holds one expression of shared values.
    pub fn is_shared(&self, f: FuncId, v: Var) -> bool {
        self.param_expr[f.index()][v.index()].is_some()
    }
}

/// The parameters of every function that hold one expression of shared
/// values; `shared_params[k]`: whether the entry's `k`-th parameter is
/// shared by all members; `varying`: the symbolic dimensions whose length
/// is each member's own (a ragged batch), whose values, and the values of
/// whose types, are no shared expression.
pub fn shared_params(
    program: &Program,
    entry: FuncId,
    shared_params: &[bool],
    varying: &[SymbolId],
) -> SharedParams {
    let sites = call_sites(program, &program.reachable(entry));
    let called = called_functions(program);
    let mut exprs = Exprs::default();
    let mut state: Vec<Vec<State>> = Vec::with_capacity(program.functions.len());
    for (fid, f) in program.functions.iter() {
        let mut defs = vec![0u32; f.vars.len()];
        for p in &f.params {
            defs[p.index()] += 1;
        }
        for op in f.blocks.values().flat_map(|b| &b.ops) {
            for d in op.defs() {
                defs[d.index()] += 1;
            }
        }
        let mut vars: Vec<State> = defs
            .iter()
            .zip(f.vars.values())
            .map(|(n, data)| {
                if *n == 1 && !crate::uniformity::mentions_varying(&data.ty, varying) {
                    State::Unknown
                } else {
                    State::Lane
                }
            })
            .collect();
        if fid == entry && !called[fid.index()] {
            for (k, p) in f.params.iter().enumerate() {
                if vars[p.index()] == State::Unknown {
                    vars[p.index()] = if shared_params.get(k).copied().unwrap_or(false) {
                        State::Known(exprs.intern(Expr::Entry(k as u32)))
                    } else {
                        State::Lane
                    };
                }
            }
        } else if fid == entry {
            // Called and also run from outside with the members' inputs.
            for p in &f.params {
                vars[p.index()] = State::Lane;
            }
        }
        state.push(vars);
    }
    settle(program, &sites, &mut state, &mut exprs, varying);
    for s in state.iter_mut().flatten() {
        if *s == State::Unknown {
            *s = State::Lane;
        }
    }
    settle(program, &sites, &mut state, &mut exprs, varying);
    let param_expr = program
        .functions
        .iter()
        .map(|(fid, f)| {
            let mut out = vec![None; f.vars.len()];
            for p in &f.params {
                if let State::Known(e) = state[fid.index()][p.index()] {
                    out[p.index()] = Some(e);
                }
            }
            out
        })
        .collect();
    SharedParams { exprs, param_expr }
}

/// Lowers parameters to what their call sites pass and recomputes every
/// operation's result from its operands, until nothing changes.
fn settle(
    program: &Program,
    sites: &[Passed],
    state: &mut [Vec<State>],
    exprs: &mut Exprs,
    varying: &[SymbolId],
) {
    let mut changed = true;
    while changed {
        changed = lower_params(state, sites);
        for (fid, f) in program.functions.iter() {
            let vars = &mut state[fid.index()];
            for op in f.blocks.values().flat_map(|b| &b.ops) {
                changed |= recompute(op, vars, exprs, varying);
            }
        }
    }
}

/// Recomputes what an operation's results hold from its operands; whether
/// anything changed. A variable with several definitions stays per-member.
fn recompute(op: &Op, vars: &mut [State], exprs: &mut Exprs, varying: &[SymbolId]) -> bool {
    let update = |vars: &mut [State], d: Var, new: State| {
        let old = vars[d.index()];
        // Several definitions, or already lowered.
        if old == State::Lane || old == new {
            return false;
        }
        vars[d.index()] = new;
        true
    };
    match op {
        Op::Prim {
            dst: Some(dst),
            prim,
            args,
            ..
        } => {
            let mut known = Vec::with_capacity(args.len());
            let mut new = None;
            for a in args {
                match vars[a.index()] {
                    State::Known(e) => known.push(e),
                    State::Lane => new = Some(State::Lane),
                    State::Unknown => {
                        if new.is_none() {
                            new = Some(State::Unknown);
                        }
                    }
                }
            }
            let new = match new {
                _ if prim.is_random() || prim.is_per_member() => State::Lane,
                _ if matches!(prim, Prim::SymbolValue(s) if varying.contains(s)) => State::Lane,
                Some(s) => s,
                None => State::Known(exprs.intern(Expr::Prim {
                    prim: prim.clone(),
                    args: known,
                })),
            };
            update(vars, *dst, new)
        }
        Op::Prim { dst: None, .. } => false,
        // What a call or an instance returns is not followed.
        Op::Call { dsts, .. } | Op::Fork { dsts, .. } => {
            let mut changed = false;
            for d in dsts {
                changed |= update(vars, *d, State::Lane);
            }
            changed
        }
    }
}

/// Per function, whether some call or fork of the program runs it.
fn called_functions(program: &Program) -> Vec<bool> {
    let mut called = vec![false; program.functions.len()];
    for f in program.functions.values() {
        for op in f.blocks.values().flat_map(|b| &b.ops) {
            for callee in op.callees() {
                called[callee.index()] = true;
            }
        }
    }
    called
}
