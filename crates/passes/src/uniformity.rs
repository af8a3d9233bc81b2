//! Which variables hold the same value for every member, at every moment.
//!
//! A variable is *invariant* when its value depends only on shared inputs,
//! statics and constants, so that one copy with no batch axis serves every
//! member, and the operation that defines it is computed once per block
//! execution instead of once per member.
//!
//! The rule is stricter than "uniform within one activation", because the
//! program-counter strategy runs members that sit at different iterations of
//! a loop, or in different activations of a function, in the same step. A
//! variable is invariant when it has exactly one definition and that
//! definition is
//! - a constant, a static, a symbolic dimension's value;
//! - a primitive that neither draws a random number nor calls a host
//!   function, whose operands are all invariant;
//! - a call whose callee returns one and the same invariant variable in that
//!   position at every `return` (two different invariant variables at two
//!   returns give members on different paths different values), unless the
//!   call is a `catch` (a member that faulted gets zeros);
//! - for a parameter (defined by its callers): every call site passes the
//!   same expression of shared values (a static, `W[0]`, a shared entry
//!   parameter: [`crate::views`]), or, for the entry function, the argument
//!   is shared. (Invariant arguments that differ between call sites, as
//!   `f(1)` and `f(2)`, give a per-member parameter.)
//!
//! A loop counter (`let mut i = 0; ... i += 1`) has two definitions, so it is
//! per-member even when every member runs the loop the same number of
//! times: members may be at different iterations at once. The one
//! exception: a variable every definition of which loads the same static
//! (derived code reloads a static where the forward code loaded it) holds
//! that static whenever it is read, so it counts as defined once.
//!
//! A symbolic dimension whose length differs from member to member (a
//! ragged batch: [`Invariance::compute_varying`]) is no shared input: its
//! value, and every variable whose type mentions it, is per-member.
//!
//! Between the two sits member-uniform data ([`crate::member`]): a parameter
//! that holds one value per member in every activation (stored once per
//! member); [`Invariance::member_root`] gives it.

use autobatch_ir::{Dim, EntityRef, FuncId, Op, Prim, Program, SymbolId, Terminator, Var};

/// Invariant variables of every function: `invariant[f][v]`.
#[derive(Clone, Debug)]
pub struct Invariance {
    pub invariant: Vec<Vec<bool>>,
    /// Per function and variable: for a member-uniform parameter, the
    /// position of the entry's parameter whose value it holds
    /// ([`crate::member`]).
    pub member_root: Vec<Vec<Option<u32>>>,
}

impl Invariance {
    pub fn is_invariant(&self, f: FuncId, v: Var) -> bool {
        self.invariant[f.index()][v.index()]
    }

    /// For a member-uniform parameter, the position of the entry parameter
    /// whose value it holds in every activation of the member.
    pub fn member_root(&self, f: FuncId, v: Var) -> Option<usize> {
        self.member_root
            .get(f.index())
            .and_then(|vars| vars.get(v.index()).copied().flatten())
            .map(|k| k as usize)
    }

    /// `entry` is the function being run and `shared_params[k]` whether its
    /// k-th flattened parameter is shared by all members.
    pub fn compute(program: &Program, entry: FuncId, shared_params: &[bool]) -> Invariance {
        Invariance::compute_varying(program, entry, shared_params, &[])
    }

    /// [`Invariance::compute`] for a batch whose symbolic dimensions
    /// `varying` have each member's own length: their values, and the
    /// variables whose types mention them, are per-member.
    ///
    /// A parameter takes a new value at every call, and the program-counter
    /// strategy runs activations that received different values in one step
    /// (`f(1)` and `f(2)`, or the levels of a recursion), so only a shared
    /// parameter of an entry function that nothing calls is invariant, or
    /// one that every call site passes the same expression of shared values
    /// (a weight passed as an argument: [`crate::views`]).
    pub fn compute_varying(
        program: &Program,
        entry: FuncId,
        shared_params: &[bool],
        varying: &[SymbolId],
    ) -> Invariance {
        let mut invariant = single_definitions(program);
        let views = crate::views::shared_params(program, entry, shared_params, varying);
        let called = called_functions(program);
        for (fid, f) in program.functions.iter() {
            for (k, p) in f.params.iter().enumerate() {
                let shared = (fid == entry
                    && !called[fid.index()]
                    && shared_params.get(k).copied().unwrap_or(false))
                    || views.is_shared(fid, *p);
                if !shared {
                    invariant[fid.index()][p.index()] = false;
                }
            }
            for (v, data) in f.vars.iter() {
                if mentions_varying(&data.ty, varying) {
                    invariant[fid.index()][v.index()] = false;
                }
            }
        }
        while remove_varying_definitions(program, varying, &mut invariant) {}
        let member_root = crate::member::member_roots(program, entry, &invariant);
        Invariance {
            invariant,
            member_root,
        }
    }

    /// Whether result `k` of function `f` is invariant at every `return`.
    pub fn result_invariant(&self, program: &Program, f: FuncId, k: usize) -> bool {
        single_return_var(&program.functions[f], k).is_some_and(|v| self.is_invariant(f, v))
    }
}

/// Per function and variable: whether the variable is no parameter and
/// every one of its definitions loads one and the same static (the caller
/// counts the definitions).
/// The optimistic start of the fixpoint: per function, whether each
/// variable has a single definition (a parameter counts one for being
/// passed in), or is a static's reload.
fn single_definitions(program: &Program) -> Vec<Vec<bool>> {
    let mut def_count: Vec<Vec<u32>> = program
        .functions
        .values()
        .map(|f| vec![0; f.vars.len()])
        .collect();
    for (fid, f) in program.functions.iter() {
        for p in &f.params {
            def_count[fid.index()][p.index()] += 1;
        }
        for block in f.blocks.values() {
            for op in &block.ops {
                for d in op.defs() {
                    def_count[fid.index()][d.index()] += 1;
                }
            }
        }
    }
    let reloads = static_reloads(program);
    def_count
        .iter()
        .zip(&reloads)
        .map(|(counts, reloads)| {
            counts
                .iter()
                .zip(reloads)
                .map(|(c, reload)| *c == 1 || *reload)
                .collect()
        })
        .collect()
}

/// Per function, whether any operation calls or forks it.
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

/// One round of the fixpoint: marks per-member every definition whose
/// operands, callee's result or operation are not invariant. Whether
/// anything changed.
fn remove_varying_definitions(
    program: &Program,
    varying: &[SymbolId],
    invariant: &mut [Vec<bool>],
) -> bool {
    let mut changed = false;
    let mut clear = |invariant: &mut [Vec<bool>], fid: FuncId, d: Var| {
        if invariant[fid.index()][d.index()] {
            invariant[fid.index()][d.index()] = false;
            changed = true;
        }
    };
    for (fid, f) in program.functions.iter() {
        for op in f.blocks.values().flat_map(|b| &b.ops) {
            match op {
                Op::Prim {
                    dst: Some(dst),
                    prim,
                    args,
                    ..
                } => {
                    let ok = !prim.is_random()
                        && !prim.is_per_member()
                        && !matches!(prim, Prim::SymbolValue(s) if varying.contains(s))
                        && args.iter().all(|a| invariant[fid.index()][a.index()]);
                    if !ok {
                        clear(invariant, fid, *dst);
                    }
                }
                Op::Prim { dst: None, .. } => {}
                Op::Call {
                    dsts,
                    callee,
                    catch,
                    ..
                } => {
                    let g = &program.functions[*callee];
                    for (k, d) in dsts.iter().enumerate() {
                        // What a catching call gives depends on whether
                        // the member faulted.
                        let returns_invariant = !*catch
                            && single_return_var(g, k)
                                .is_some_and(|v| invariant[callee.index()][v.index()]);
                        if !returns_invariant {
                            clear(invariant, fid, *d);
                        }
                    }
                }
                // What instances give depends on their own random streams
                // and faults: never invariant.
                Op::Fork { dsts, .. } => {
                    for d in dsts {
                        clear(invariant, fid, *d);
                    }
                }
            }
        }
    }
    changed
}

fn static_reloads(program: &Program) -> Vec<Vec<bool>> {
    program
        .functions
        .values()
        .map(|f| {
            let mut loads: Vec<Option<Option<autobatch_ir::StaticId>>> = vec![None; f.vars.len()];
            for p in &f.params {
                loads[p.index()] = Some(None);
            }
            for op in f.blocks.values().flat_map(|b| &b.ops) {
                let this = match op {
                    Op::Prim {
                        prim: Prim::LoadStatic(id),
                        ..
                    } => Some(*id),
                    _ => None,
                };
                for d in op.defs() {
                    let seen = &mut loads[d.index()];
                    *seen = match *seen {
                        None => Some(this),
                        Some(before) if before == this => Some(this),
                        Some(_) => Some(None),
                    };
                }
            }
            loads
                .iter()
                .map(|load| matches!(load, Some(Some(_))))
                .collect()
        })
        .collect()
}

/// Whether a value of type `ty` has a dimension of `varying` (each member's
/// own length, in a ragged batch).
pub(crate) fn mentions_varying(ty: &autobatch_ir::TensorType, varying: &[SymbolId]) -> bool {
    ty.dims
        .iter()
        .any(|d| matches!(d, Dim::Symbolic(s) if varying.contains(s)))
}

/// The variable that every `return` of `f` returns in position `k`, if it is
/// one variable. Two returns of two different invariant variables (`return 1`
/// on one path, `n1 + n2` on another) give different members different
/// values, since members take different paths: such a result is per-member.
fn single_return_var(f: &autobatch_ir::Function, k: usize) -> Option<Var> {
    let mut found: Option<Var> = None;
    for b in f.blocks.values() {
        if let Terminator::Return(vars) = &b.term {
            match found {
                None => found = Some(vars[k]),
                Some(v) if v == vars[k] => {}
                Some(_) => return None,
            }
        }
    }
    found
}
