//! Reverse-mode automatic differentiation as a transformation of the IR.
//!
//! [`derive`] adds to a [`Program`] the vector-Jacobian product ("vjp") of
//! the functions it is asked for. The vjp of a function `g` with respect to
//! a set of its float parameters (the *active* ones) is an ordinary IR
//! function named `g'vjp`:
//!
//! - parameters: `g`'s parameters, then one adjoint per float result of `g`;
//! - results: `g`'s results, then the adjoints of the active parameters, in order.
//!
//! `value_and_grad(f, x)` is `call f'grad(x)`, where `f'grad` is `f'vjp`
//! with the result's adjoint fixed to one (and folded away: `1 · a` is `a`,
//! `a + -b` is `a - b`). Because the gradient is plain IR, every executor
//! runs and batches it unchanged.
//!
//! A function is derived over a **tape** (`tape.rs`), for `grad` as for
//! the statics' gradient: its vjp calls a forward part, the function's own
//! blocks plus `tape_push`es (its forks keep their instances' tapes; a
//! catching call, which nothing differentiated reaches, runs as it is),
//! and an `uncounted` backward part walking the blocks in reverse (see the
//! module's doc), on the function as `prepare.rs` puts it (a re-entered
//! entry copied, rows of differentiated statics read through shadow
//! indices), which every function fits. What the forward part saves is
//! counted and bounded by the executors (`autobatch_kernels::Tape::held`,
//! the run's `tape_bytes` and `max_tape_bytes`): past the bound a member
//! stops with `tape_limit`; nothing recomputes.
//!
//! The rest of this description is of the older, checkpointed derivation
//! (block continuations whose vjps recompute callees' forward passes),
//! still in the crate (`block.rs`, `loops.rs`, `fork.rs`): it is what a
//! function `tape::tapeable` refused would get, and `tapeable` refuses
//! none, so no request reaches it (`jacobian`'s rows call taped vjps).
//! See `docs/language-notes.md`, "Autodiff", for the user's view.
//!
//! - **Block continuations.** Straight-line jump chains of `g` are merged
//!   first. Then each block `B` becomes a function `g'vjp.bN` taking `B`'s
//!   live-in variables and the result adjoints, and returning `g`'s results
//!   and the adjoints of `B`'s active live-in variables. Its body runs `B`'s
//!   operations (every definition renamed to a fresh variable, so the
//!   backward pass sees every intermediate value), then, in place of the
//!   terminator, *calls* the successor's function (a branch calls one of
//!   two, both writing the same variables), then runs `B`'s adjoint
//!   operations in reverse order and returns. A block whose only
//!   predecessor is a branch is emitted inside that branch's arm instead of
//!   as a function (so a loop body lives in its header's function, and the
//!   exit path needs no call); so is a block that only returns. The entry
//!   block's function is `g'vjp`. A
//!   loop of `n` iterations therefore nests about `n` activations, unless
//!   it is a counted loop (below). Every
//!   loop form (`for`, `while`, `loop`, with `break` and `continue`) lowers
//!   to such blocks: a loop header, the block after a `&&` in a `while`
//!   condition, the block where several `break`s meet are join points; the
//!   loop body is inlined in its header's function, which calls the
//!   header's function again for the next iteration.
//! - **Counted loops** (`loops.rs`): a loop whose header tests `i < n`
//!   with `n` a constant or a symbolic dimension, and whose body is one
//!   straight block incrementing `i` once, runs at most `n` times. With a
//!   short constant count it is unrolled first (the plan's `g`); else its
//!   header's function runs it as a loop that writes what the adjoint needs
//!   into `[T; n]` tapes, continues with the exit, then runs the body's
//!   adjoint as a second loop from the last iteration to the first, reading
//!   the tapes back (cheap values are computed again instead). One
//!   activation instead of `n`, and the same operations in the same order
//!   as the recursive form, so the same bits.
//! - **Calls** inside differentiated code run the callee forward; the
//!   backward pass calls the callee's vjp, which recomputes its forward
//!   values (checkpointing at call boundaries).
//! - **Forks** (`join`, `map`, `pfor`) likewise: the forward pass runs the
//!   fork; its adjoint is a fork of the callees' vjps, so the backward
//!   instances run concurrently as the forward ones do (a `join` of the
//!   calls' vjps; a `map` of the same count over `f'vjp.map`, a wrapper
//!   taking the vjp's parameters in the fork's order, the result adjoints
//!   one element per instance; the adjoint of an argument every instance
//!   gets whole is the sum of the instances' adjoints over the leading
//!   axis, in a fixed order). See `fork.rs`.
//! - **Jacobians** ([`Derivative::Jacobian`]): `h'jacobian(x)` is
//!   `pfor::<M>(h'jrow, x)`, row `m` being the vjp of `h` with the one-hot
//!   adjoint `e_m`: `M` vjps, run as `M` concurrent instances.
//! - **Cycles of calls** (recursion, direct or mutual) need nothing
//!   special: a vjp is named and given its `FuncId` by its *plan*, made the
//!   first time a call asks for (function, active parameters, seed) and
//!   built later from a queue, so the vjp of a recursive call is the plan
//!   being built (or one of its cycle's), and each vjp is emitted once.
//!   There are finitely many such keys (activity is a set of parameters),
//!   so the derivation terminates; a callee whose activity differs on the
//!   way round (`r(b, a)` inside `r(a, b)`) gets one vjp per pattern
//!   (`r'vjp@10`, `r'vjp@01`), which call each other. The price of
//!   checkpointing: the vjp of each level of a recursion re-runs the
//!   forward pass of the levels below it, so a linear recursion of depth d
//!   runs about d²/2 forward activations (a tree of n nodes and height h,
//!   at most n·h); each level of the gradient nests one activation, plus one
//!   per join point its recursive call comes after (see
//!   `docs/language.md`, sections 8 and 10).
//! - **Activity.** Only variables that depend on an active parameter carry
//!   adjoints; operations on the other values (statics, integers, data)
//!   run forward only. An adjoint that gets no contribution is zero.
//! - **Errors.** A derived function stops a member with the error the
//!   function stops it with, where it does: every forward operation runs
//!   before any adjoint (a call's or fork's recomputation included), the
//!   adjoint code faults nowhere the forward code did not, and the clean-up
//!   that drops operations whose value nothing reads keeps those that may
//!   fault ([`autobatch_ir::Prim::may_fault`]). A `jacobian` with no rows
//!   runs the function itself.
//! - **Reuse.** Adjoint code takes values already computed at its position
//!   (forward values included) instead of recomputing them, and `-(-w)` is
//!   `w`.
//! - **Adjoints** use only existing primitives: the products keep their
//!   form (`matvec` gives `vecmat` and `outer`, `matmul` gives `matmul`s),
//!   so that the batched executors' matrix-product paths serve the gradient.
//!
//! Architecture Invariant: this crate reads and writes IR only. It knows
//! nothing of syntax (which construct may be differentiated is the front
//! end's business, with its diagnostics), of executors or of batching.

mod analysis;
mod block;
mod fork;
mod loops;
mod prepare;
mod rules;
mod tape;

use std::collections::{HashMap, VecDeque};

use autobatch_ir::{Block, EntityRef, FuncId, Function, Program, TensorType, Terminator, Var};

use analysis::Sources;
use autobatch_types::Loc;

/// A gradient to derive: of `function`, with respect to the flattened
/// parameters marked `true` in `active` (which must be float parameters).
/// The derived function, `f'grad`, is the vjp with the adjoint of the
/// (scalar) result fixed to one, as `grad` and `value_and_grad` need it: it
/// takes `function`'s parameters only and returns its results followed by
/// the gradient. Knowing the seed lets the derivation fold it away
/// (`1 · a` is `a`), which saves whole passes over arrays.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    pub function: FuncId,
    pub active: Vec<bool>,
    pub kind: Derivative,
}

/// What a [`Request`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Derivative {
    /// `f'grad` (see [`Request`]): `grad` and `value_and_grad`.
    Gradient,
    /// `h'jacobian`, for `jacobian(h, x)`: `h` takes one array `[F; D]`
    /// (its one active parameter) and returns one array `[F; M]`; the
    /// derived function takes `x` and returns the `[[F; D]; M]` whose row
    /// `m` is the vjp of `h` at `x` with the one-hot adjoint `e_m`. The rows
    /// are the `M` instances of a `pfor` (see the crate doc).
    Jacobian,
}

/// A derived function ([`derive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Derived {
    pub id: FuncId,
    /// Derived over a tape: its one block calls the forward and the
    /// backward parts.
    pub taped: bool,
}

/// Why a vjp could not be derived: an operation the transformation cannot
/// express (the front end rejects what is not differentiable, so this names
/// a limit of the transformation or a bug), with where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct DeriveError {
    pub message: String,
    pub loc: Loc,
}

impl std::fmt::Display for DeriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at {})", self.message, self.loc)
    }
}

impl std::error::Error for DeriveError {}

pub(crate) type DeriveResult<T> = Result<T, DeriveError>;

pub(crate) fn derive_error<T>(message: impl Into<String>, loc: Loc) -> DeriveResult<T> {
    Err(DeriveError {
        message: message.into(),
        loc,
    })
}

/// Derives the vjp of every request (and of everything they need: callees'
/// vjps, block functions) and appends them to `program`, each once (also
/// through cycles of calls). Returns, in the order of `requests`, each
/// request's vjp and whether it is derived over a tape: then its function
/// is one block that calls the forward and the backward parts, which a
/// caller may inline in place of the call (so that the forward part runs
/// at the depth the function itself would).
pub fn derive(program: &mut Program, requests: &[Request]) -> DeriveResult<Vec<Derived>> {
    let mut deriver = Deriver::new(program, Sources::default());
    let mut ids = Vec::with_capacity(requests.len());
    for r in requests {
        let id = match r.kind {
            Derivative::Gradient => {
                let p = deriver.plan(r.function, &r.active, true)?;
                Derived {
                    id: deriver.plans[p].ids[0].expect("the entry block is reachable"),
                    taped: deriver.plans[p].taped.is_some(),
                }
            }
            Derivative::Jacobian => Derived {
                id: fork::jacobian(&mut deriver, r.function, &r.active)?,
                taped: false,
            },
        };
        ids.push(id);
    }
    let built = deriver.build_all()?;
    append(program, built);
    Ok(ids)
}

/// Derives `f'sgrad`, the gradient of `function` (whose one result is a
/// float scalar, the member's loss) with respect to the `statics`, and
/// appends it (and what it needs) to `program`. `f'sgrad` takes `f`'s
/// parameters and returns its result; every use of a static of the set
/// appends its contribution to the member's log of adjoints instead of
/// flowing back through variables, in the form the use gives it
/// (`static_adjoint.outer S, dy, x` for `matvec(S, x)`, `.row` for a read
/// `S[i]`, `.dense` otherwise), so that no member holds a copy of a
/// weight matrix. The executors keep the logs; the sum over members is
/// `autobatch_kernels::adjoints::static_gradients`.
///
/// The rules of `grad` hold with the statics in the place of the point:
/// control that repeats code must not depend on them (the front end checks
/// that before asking).
pub fn derive_static_gradient(
    program: &mut Program,
    function: FuncId,
    statics: &[autobatch_ir::StaticId],
) -> DeriveResult<FuncId> {
    let mut marked = vec![false; program.statics.len()];
    for s in statics {
        match marked.get_mut(s.0 as usize) {
            Some(m) => *m = true,
            None => return derive_error(format!("no static {s}"), Loc::new(1, 1)),
        }
    }
    let sources = Sources::new(program, marked);
    let mut deriver = Deriver::new(program, sources);
    let params = match program.functions.get(function) {
        Some(f) => f.params.len(),
        None => return derive_error(format!("no function {function}"), Loc::new(1, 1)),
    };
    let p = deriver.plan(function, &vec![false; params], true)?;
    let id = deriver.plans[p].ids[0].expect("the entry block is reachable");
    let built = deriver.build_all()?;
    append(program, built);
    Ok(id)
}

impl<'p> Deriver<'p> {
    fn new(program: &'p Program, sources: Sources) -> Deriver<'p> {
        Deriver {
            program,
            plans: Vec::new(),
            plan_index: HashMap::new(),
            next_id: program.functions.len() as u32,
            built: Vec::new(),
            queue: VecDeque::new(),
            wrappers: HashMap::new(),
            sources,
        }
    }

    /// Builds every queued plan; the functions to append, in id order.
    fn build_all(mut self) -> DeriveResult<Vec<Function>> {
        while let Some(p) = self.queue.pop_front() {
            if let Some(ids) = self.plans[p].taped {
                let entry = self.plans[p].ids[0].expect("a taped plan has an entry");
                let [vjp, fwd, bwd] = tape::build(&mut self, p)?;
                self.built
                    .extend([(entry, vjp), (ids.fwd, fwd), (ids.bwd, bwd)]);
                continue;
            }
            let blocks: Vec<usize> = (0..self.plans[p].ids.len())
                .filter(|b| self.plans[p].ids[*b].is_some())
                .collect();
            for b in blocks {
                let id = self.plans[p].ids[b].expect("filtered");
                let f = block::build(&mut self, p, b)?;
                self.built.push((id, f));
            }
        }
        let mut built = std::mem::take(&mut self.built);
        built.sort_by_key(|(id, _)| *id);
        Ok(built.into_iter().map(|(_, f)| f).collect())
    }
}

/// Appends the functions a derivation built (their ids follow the program's).
fn append(program: &mut Program, built: Vec<Function>) {
    for f in built {
        program.functions.push(f);
    }
}

/// What the derivation of one (function, active parameters) pair needs to
/// know before any body is built: the signatures of its block functions.
pub(crate) struct Plan {
    /// The original function, with straight-line jump chains merged.
    pub g: Function,
    /// Whether each variable of `g` carries an adjoint.
    pub active: Vec<bool>,
    /// Per block: the variables its function takes (for the entry, `g`'s
    /// parameters; else its live-in variables, in order).
    pub live: Vec<Vec<Var>>,
    /// Per block: the active variables among `live`, whose adjoints it returns.
    pub adj_in: Vec<Vec<Var>>,
    /// Per block: its function, `None` for unreachable and inlined blocks.
    pub ids: Vec<Option<FuncId>>,
    /// Per block: whether it is emitted where it is reached (inside its only
    /// predecessor's branch arm, or a block that only returns) instead of as
    /// a function of its own.
    pub inline: Vec<bool>,
    /// Per block: its function's name.
    pub names: Vec<String>,
    /// Per block: the counted loop it heads, when that loop is
    /// differentiated over a tape instead of by recursion.
    pub loops: Vec<Option<loops::CountedLoop>>,
    /// Indices of `g`'s float results (each gets an adjoint parameter).
    pub float_results: Vec<usize>,
    /// Whether the adjoint of the result is one (a `grad` request): the
    /// entry function then takes no adjoint parameter.
    pub seed_one: bool,
    /// For a plan derived over a tape ([`tape`]): its forward and backward
    /// parts (its entry id calls both; it has no block functions).
    pub taped: Option<tape::TapedIds>,
}

impl Plan {
    pub(crate) fn result_types(&self, block: usize) -> Vec<TensorType> {
        let mut out = self.g.results.clone();
        out.extend(
            self.adj_in[block]
                .iter()
                .map(|v| self.g.vars[*v].ty.clone()),
        );
        out
    }
}

pub(crate) struct Deriver<'p> {
    pub program: &'p Program,
    pub plans: Vec<Plan>,
    plan_index: HashMap<(FuncId, Vec<bool>, bool), usize>,
    next_id: u32,
    built: Vec<(FuncId, Function)>,
    queue: VecDeque<usize>,
    /// The functions that a `map`'s adjoint runs as instances (see
    /// [`fork::map_wrapper`]), each made once.
    pub(crate) wrappers: HashMap<fork::WrapperKey, FuncId>,
    /// The statics differentiated (none but for `derive_static_gradient`).
    pub(crate) sources: Sources,
}

impl Deriver<'_> {
    /// The next function id.
    pub(crate) fn fresh_id(&mut self) -> FuncId {
        let id = FuncId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Gives `f` (a function built whole, not from a plan) the next id and
    /// adds it to the program with the vjps.
    pub(crate) fn add_function(&mut self, f: Function) -> FuncId {
        let id = FuncId(self.next_id);
        self.next_id += 1;
        self.built.push((id, f));
        id
    }

    /// The plan of the vjp of `function` with respect to `active` (with the
    /// result's adjoint fixed to one when `seed_one`), made (and queued for
    /// building) the first time it is asked for. Registering it before any
    /// body is built is what lets recursive vjps call each other: a call
    /// met while building finds the plan already there.
    pub(crate) fn plan(
        &mut self,
        function: FuncId,
        active: &[bool],
        seed_one: bool,
    ) -> DeriveResult<usize> {
        let key = (function, active.to_vec(), seed_one);
        if let Some(p) = self.plan_index.get(&key) {
            return Ok(*p);
        }
        let Some(original) = self.program.functions.get(function) else {
            return derive_error(
                format!("no function {function} to differentiate"),
                Loc::new(1, 1),
            );
        };
        check_active(original, active)?;
        if tape::tapeable(self.program, function, &self.sources) {
            return Ok(self.taped_plan(key, original, seed_one));
        }
        let g = loops::unroll_short_loops(analysis::merge_jump_chains(original));
        let reachable = analysis::reachable(&g);
        let inline = inline_blocks(&g, &reachable);
        let act = analysis::activity(&g, active, &reachable, &self.sources);
        let taped = taped_loops(&g, &act, &reachable, &inline);
        let live = block_inputs(&g);
        let adj_in: Vec<Vec<Var>> = live
            .iter()
            .enumerate()
            .map(|(b, vars)| {
                if b == 0 {
                    g.params
                        .iter()
                        .zip(active)
                        .filter(|(_, a)| **a)
                        .map(|(v, _)| *v)
                        .collect()
                } else {
                    vars.iter().copied().filter(|v| act[v.0 as usize]).collect()
                }
            })
            .collect();
        let statics = self.sources.statics.iter().any(|s| *s);
        let base = vjp_name(original, active, seed_one, statics);
        let n = g.blocks.len();
        let mut ids = Vec::with_capacity(n);
        let mut names = Vec::with_capacity(n);
        for b in 0..n {
            names.push(if b == 0 {
                base.clone()
            } else {
                format!("{base}.b{b}")
            });
            if reachable[b] && !inline[b] {
                ids.push(Some(FuncId(self.next_id)));
                self.next_id += 1;
            } else {
                ids.push(None);
            }
        }
        let float_results = float_result_indices(&g);
        let p = self.plans.len();
        self.plans.push(Plan {
            g,
            active: act,
            live,
            adj_in,
            ids,
            inline,
            names,
            loops: taped,
            float_results,
            seed_one,
            taped: None,
        });
        self.plan_index.insert(key, p);
        self.queue.push_back(p);
        Ok(p)
    }
}

impl Deriver<'_> {
    /// The plan of a function derived over a tape ([`tape`]): `g` as it
    /// is, one entry id and the two parts' ids.
    fn taped_plan(
        &mut self,
        key: (FuncId, Vec<bool>, bool),
        original: &Function,
        seed_one: bool,
    ) -> usize {
        let active = key.1.clone();
        let g = prepare::prepare(original, &self.sources);
        let reachable = analysis::reachable(&g);
        let act = analysis::activity(&g, &active, &reachable, &self.sources);
        let n = g.blocks.len();
        let mut adj_in = vec![Vec::new(); n];
        adj_in[0] = g
            .params
            .iter()
            .zip(&active)
            .filter(|(_, a)| **a)
            .map(|(v, _)| *v)
            .collect();
        let mut ids = vec![None; n];
        ids[0] = Some(self.fresh_id());
        let mut names = vec![String::new(); n];
        let statics = self.sources.statics.iter().any(|s| *s);
        names[0] = vjp_name(original, &active, seed_one, statics);
        let float_results = float_result_indices(&g);
        let taped = Some(tape::plan_ids(self));
        let p = self.plans.len();
        self.plans.push(Plan {
            live: block_inputs(&g),
            g,
            active: act,
            adj_in,
            ids,
            inline: vec![false; n],
            names,
            loops: vec![None; n],
            float_results,
            seed_one,
            taped,
        });
        self.plan_index.insert(key, p);
        self.queue.push_back(p);
        p
    }
}

/// The indices of `g`'s float results (each gets an adjoint).
fn float_result_indices(g: &Function) -> Vec<usize> {
    g.results
        .iter()
        .enumerate()
        .filter(|(_, t)| t.elem.is_float())
        .map(|(i, _)| i)
        .collect()
}

/// Refuses flags that do not fit `original`'s parameters, or that mark a
/// parameter that is not a float.
fn check_active(original: &Function, active: &[bool]) -> DeriveResult<()> {
    if active.len() != original.params.len() {
        return derive_error(
            format!(
                "the vjp of `{}` asks for {} parameter flags, but it has {} parameters",
                original.name,
                active.len(),
                original.params.len()
            ),
            original.loc,
        );
    }
    for (p, a) in original.params.iter().zip(active) {
        if *a && !original.vars[*p].ty.elem.is_float() {
            return derive_error(
                format!(
                    "cannot differentiate `{}` with respect to a parameter that is not a float",
                    original.name
                ),
                original.loc,
            );
        }
    }
    Ok(())
}

/// Per block of `g`: whether it is emitted where it is reached instead of
/// as a function (see [`Plan::inline`]).
fn inline_blocks(g: &Function, reachable: &[bool]) -> Vec<bool> {
    let preds = analysis::predecessor_counts(g);
    (0..g.blocks.len())
        .map(|b| {
            let data = &g.blocks[Block::new(b)];
            let returns_at_once = data.ops.is_empty() && matches!(data.term, Terminator::Return(_));
            b != 0 && reachable[b] && (preds[b] == 1 || returns_at_once)
        })
        .collect()
}

/// Per block of `g`: the counted loop it heads, when that loop is
/// differentiated over a tape (see [`loops`]).
fn taped_loops(
    g: &Function,
    act: &[bool],
    reachable: &[bool],
    inline: &[bool],
) -> Vec<Option<loops::CountedLoop>> {
    let preds = analysis::predecessor_counts(g);
    (0..g.blocks.len())
        .map(|b| {
            if !reachable[b] || inline[b] {
                return None;
            }
            loops::counted_loop(g, Block::new(b), &preds).filter(|lp| loops::tapeable(g, act, lp))
        })
        .collect()
}

/// Per block of `g`: the variables its function takes (see [`Plan::live`]).
fn block_inputs(g: &Function) -> Vec<Vec<Var>> {
    analysis::live_in(g)
        .into_iter()
        .enumerate()
        .map(|(b, live_in)| if b == 0 { g.params.clone() } else { live_in })
        .collect()
}

/// The name of the vjp (`f'vjp`) or gradient (`f'grad`) of `original`, with
/// the active parameters as bits (`f'vjp@10`) unless they are all its float
/// parameters.
fn vjp_name(original: &Function, active: &[bool], seed_one: bool, statics: bool) -> String {
    let all = original
        .params
        .iter()
        .zip(active)
        .all(|(p, a)| *a == original.vars[*p].ty.elem.is_float());
    let kind = match (seed_one, statics) {
        (true, false) => "grad",
        (false, false) => "vjp",
        (true, true) => "sgrad",
        (false, true) => "svjp",
    };
    if all {
        format!("{}'{kind}", original.name)
    } else {
        let bits: String = active.iter().map(|a| if *a { '1' } else { '0' }).collect();
        format!("{}'{kind}@{bits}", original.name)
    }
}
