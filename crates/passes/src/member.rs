//! Which parameters hold one value for the whole member: data a recursion
//! passes down unchanged (a tree's child-index arrays, a sentence).
//!
//! A parameter is *member-uniform* with root `k` when, in every activation
//! of its function in a member (its own calls, and the instances of its
//! forks, at every depth), it holds the value the member passed to the
//! entry function's `k`-th parameter. The batching executors then store it
//! once per member, and a call or an instance that passes it costs nothing
//! (no copy into the callee, no save on a value stack), whatever its size.
//!
//! The rule: a parameter `p` of `f` has root `k` when it is an array (a
//! scalar costs as little to copy as to look up), nothing but its binding
//! defines it, it is not invariant (stored once for all members anyway),
//! and
//! - `f` is the entry function and `p` its `k`-th parameter, or `f` is not
//!   the entry function and something calls it;
//! - every call of `f` and every instance of a fork running `f`, in the
//!   functions a run of the entry may execute, passes to `p`, whole, a
//!   variable of the caller with root `k` (a `map`'s element or index never
//!   qualifies).
//!
//! Found as the greatest fixpoint: every parameter starts as unknown (or
//! its own root, for the entry's), each call site lowers its callee's
//! parameters to what it passes (an unknown parameter passes unknown), and
//! what stays unknown at the end (functions the entry never reaches)
//! becomes per-lane; the rule is then checked again until
//! nothing changes.

use autobatch_ir::{fork_calls, EntityRef, FuncId, InstanceArg, Op, Program, Var};

/// What is known of one parameter (or variable) in a flat lattice: nothing
/// yet, one value `T` in every activation, or no one value. Shared by this
/// pass (`T` = the root entry parameter) and `views` (`T` = an expression).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State<T> {
    /// No call site seen yet.
    Unknown,
    /// The same `T` in every activation.
    Known(T),
    /// Not one value.
    Lane,
}

impl<T: Copy + Eq> State<T> {
    pub(crate) fn meet(self, other: State<T>) -> State<T> {
        match (self, other) {
            (State::Unknown, x) | (x, State::Unknown) => x,
            (State::Known(a), State::Known(b)) if a == b => State::Known(a),
            _ => State::Lane,
        }
    }
}

/// One call site's argument: the callee's parameter and what the caller
/// passes (`None`: an element or an index).
pub(crate) struct Passed {
    pub(crate) caller: FuncId,
    pub(crate) arg: Option<Var>,
    pub(crate) callee: FuncId,
    pub(crate) param: Var,
}

/// Per function and variable, the root of a member-uniform parameter.
pub fn member_roots(
    program: &Program,
    entry: FuncId,
    invariant: &[Vec<bool>],
) -> Vec<Vec<Option<u32>>> {
    let mut state: Vec<Vec<State<u32>>> = program
        .functions
        .values()
        .map(|f| vec![State::Lane; f.vars.len()])
        .collect();
    let defined = defined_by_ops(program);
    for (fid, f) in program.functions.iter() {
        for (k, p) in f.params.iter().enumerate() {
            let eligible = !f.vars[*p].ty.dims.is_empty()
                && !defined[fid.index()][p.index()]
                && !invariant[fid.index()][p.index()];
            if eligible {
                state[fid.index()][p.index()] = if fid == entry {
                    State::Known(k as u32)
                } else {
                    State::Unknown
                };
            }
        }
    }
    let sites = call_sites(program, &program.reachable(entry));
    lower_until_stable(&mut state, &sites);
    for s in state.iter_mut().flatten() {
        if *s == State::Unknown {
            *s = State::Lane;
        }
    }
    lower_until_stable(&mut state, &sites);
    state
        .into_iter()
        .map(|vars| {
            vars.into_iter()
                .map(|s| match s {
                    State::Known(k) => Some(k),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Lowers each callee parameter to what its call sites pass, until nothing
/// changes.
fn lower_until_stable(state: &mut [Vec<State<u32>>], sites: &[Passed]) {
    while lower_params(state, sites) {}
}

/// One pass over the call sites: each callee parameter lowered to the meet
/// of what it holds and what the site passes (an element or an index passes
/// no one value); whether anything changed.
pub(crate) fn lower_params<T: Copy + Eq>(state: &mut [Vec<State<T>>], sites: &[Passed]) -> bool {
    let mut changed = false;
    for site in sites {
        let passed = match site.arg {
            Some(a) => state[site.caller.index()][a.index()],
            None => State::Lane,
        };
        let current = state[site.callee.index()][site.param.index()];
        let lowered = current.meet(passed);
        if lowered != current {
            state[site.callee.index()][site.param.index()] = lowered;
            changed = true;
        }
    }
    changed
}

/// Per function and variable, whether an operation defines it.
fn defined_by_ops(program: &Program) -> Vec<Vec<bool>> {
    program
        .functions
        .values()
        .map(|f| {
            let mut defined = vec![false; f.vars.len()];
            for op in f.blocks.values().flat_map(|b| &b.ops) {
                for d in op.defs() {
                    defined[d.index()] = true;
                }
            }
            defined
        })
        .collect()
}

/// Every argument of every call and fork instance in the functions a run
/// may execute (`reachable`): the others never pass anything.
pub(crate) fn call_sites(program: &Program, reachable: &[bool]) -> Vec<Passed> {
    let mut sites = Vec::new();
    for (caller, f) in program.functions.iter() {
        if !reachable[caller.index()] {
            continue;
        }
        for op in f.blocks.values().flat_map(|b| &b.ops) {
            match op {
                Op::Call { callee, args, .. } => {
                    let params = &program.functions[*callee].params;
                    for (p, a) in params.iter().zip(args) {
                        sites.push(Passed {
                            caller,
                            arg: Some(*a),
                            callee: *callee,
                            param: *p,
                        });
                    }
                }
                Op::Fork {
                    dsts,
                    args,
                    instances,
                    ..
                } => {
                    for call in fork_calls(program, dsts, args, instances) {
                        let params = &program.functions[call.callee].params;
                        for (p, a) in params.iter().zip(&call.args) {
                            let arg = match a {
                                InstanceArg::Whole(v) => Some(*v),
                                InstanceArg::Element(_) | InstanceArg::Index => None,
                            };
                            sites.push(Passed {
                                caller,
                                arg,
                                callee: call.callee,
                                param: *p,
                            });
                        }
                    }
                }
                Op::Prim { .. } => {}
            }
        }
    }
    sites
}
