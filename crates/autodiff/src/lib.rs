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
//! Every function is derived over a **tape** (`tape.rs`), for `grad` as
//! for the statics' gradient: its vjp calls a forward part, the function's
//! own blocks plus `tape_push`es (a call of a differentiated callee calls
//! the callee's forward part; a fork forks the callees' forward parts and
//! keeps their instances' tapes; a catching call, which nothing
//! differentiated reaches, runs as it is), and an `uncounted` backward
//! part walking the blocks in reverse, popping what the forward part
//! pushed (see the module's doc). The function is derived as `prepare.rs`
//! puts it (a re-entered entry copied, rows of differentiated statics read
//! through shadow indices). What the forward part saves is counted and
//! bounded by the executors (`autobatch_kernels::Tape::held`, the run's
//! `tape_bytes` and `max_tape_bytes`): at a call of a function that loops,
//! forks or recurses, or calls one that does, a member holding more than half the bound before it runs the
//! callee untaped (`tape_over`), one holding more after it drops what the
//! callee saved (`tape_mark`, `tape_settle`), and the backward part
//! recomputes the callee's forward part (in a copy that counts no steps,
//! [`Deriver::uncounted_copy`]); past the bound itself a member stops with
//! `tape_limit`. A vjp of a function that is one block of primitives
//! calls one function instead, the forward part's operations then the
//! backward part's, reading the values where they are instead of from the
//! tape (`fuse.rs`): nothing is taped, and the executors see the whole
//! gradient as one block. See `docs/language.md`, section 8, for the
//! user's view.
//!
//! - **Plans.** A vjp is named and given its ids (the vjp, its forward and
//!   its backward part) by its *plan*, made the first time a call asks for
//!   (function, active parameters, seed) and built later from a queue, so
//!   the parts of a recursive call are the plan being built (or one of its
//!   cycle's), and each is emitted once. There are finitely many such keys
//!   (activity is a set of parameters), so the derivation terminates; a
//!   callee whose activity differs on the way round (`r(b, a)` inside
//!   `r(a, b)`) gets one plan per pattern (`r'vjp@10`, `r'vjp@01`).
//! - **Custom derivatives** ([`CustomVjp`], [`derive_with_custom`]): a
//!   function the program gives a backward function for is called as it
//!   is and never derived; the backward part calls its backward function
//!   (uncounted) on the saved arguments and the result's adjoint.
//! - **Jacobians** ([`Derivative::Jacobian`], `jacobian.rs`):
//!   `h'jacobian(x)` is `pfor::<M>(h'jrow, x)`, row `m` calling the vjp of
//!   `h` with the one-hot adjoint `e_m`: `M` vjps, run as `M` concurrent
//!   instances.
//! - **Activity.** Only variables that depend on an active parameter carry
//!   adjoints; operations on the other values (statics, integers, data)
//!   run forward only. An adjoint that gets no contribution is zero.
//! - **Errors.** A derived function stops a member with the error the
//!   function stops it with, where it does: the forward part is the
//!   function's code and runs before any adjoint, the
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
mod builder;
mod fuse;
mod jacobian;
mod prepare;
mod rules;
mod tape;

use std::collections::{HashMap, VecDeque};

use autobatch_ir::{FuncId, Function, Program, TensorType, Var};

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
    /// A gradient's vjp: its one block calls the forward and the backward
    /// parts, or the one function fusing them (a Jacobian's function is a
    /// fork of rows).
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
/// forward and backward parts) and appends them to `program`, each once
/// (also through cycles of calls). Returns, in the order of `requests`,
/// each request's derived function and whether it is a gradient's vjp
/// (`taped`): then its function is one block that calls the forward and
/// the backward parts, which a caller may inline in place of the call (so
/// that the forward part runs at the depth the function itself would); a
/// Jacobian's is not.
pub fn derive(program: &mut Program, requests: &[Request]) -> DeriveResult<Vec<Derived>> {
    derive_with_custom(program, requests, &[])
}

/// A function whose derivative the program gives (as JAX's `custom_vjp`):
/// wherever a derivation meets a call of `function` with an active
/// argument, the forward part makes the call as it is (the same value,
/// steps and faults) and saves its arguments, and the backward part calls
/// `backward` (in its copy that counts no steps) on those arguments and
/// the adjoints of `function`'s float results (its parameters are
/// `function`'s, then one per float result), which returns the adjoint of
/// every float parameter of `function`, in order; the derivation keeps
/// those of the active arguments. `function` itself is never derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CustomVjp {
    pub function: FuncId,
    pub backward: FuncId,
}

/// [`derive`], with the functions whose derivatives `custom` gives.
pub fn derive_with_custom(
    program: &mut Program,
    requests: &[Request],
    custom: &[CustomVjp],
) -> DeriveResult<Vec<Derived>> {
    let mut deriver = Deriver::new(program, Sources::default());
    for c in custom {
        check_custom(program, *c)?;
        deriver.custom.insert(c.function, c.backward);
    }
    let mut ids = Vec::with_capacity(requests.len());
    for r in requests {
        let id = match r.kind {
            Derivative::Gradient => {
                let p = deriver.plan(r.function, &r.active, true)?;
                Derived {
                    id: deriver.plans[p].id,
                    taped: true,
                }
            }
            Derivative::Jacobian => Derived {
                id: jacobian::jacobian(&mut deriver, r.function, &r.active)?,
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
    let id = deriver.plans[p].id;
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
            copies: HashMap::new(),
            copies_to_build: Vec::new(),
            sources,
            custom: HashMap::new(),
            passed: tape::passed_params(program),
        }
    }

    /// Builds every queued plan; the functions to append, in id order.
    fn build_all(mut self) -> DeriveResult<Vec<Function>> {
        while let Some(p) = self.queue.pop_front() {
            let [mut vjp, mut fwd, mut bwd] = tape::build(&mut self, p)?;
            let fused_id = FuncId(self.next_id);
            let arms = std::mem::take(&mut self.plans[p].arms);
            if let Some((calling, fused)) = fuse::fuse(&vjp, &fwd, &bwd, fused_id, &arms) {
                self.add_function(fused);
                vjp = calling;
            } else if let Some(whole) = self.plans[p].whole.take() {
                // Without its check arms the function did not fuse after
                // all: it is derived with them.
                self.plans[p].g = whole;
                [vjp, fwd, bwd] = tape::build(&mut self, p)?;
            }
            let plan = &self.plans[p];
            self.built
                .extend([(plan.id, vjp), (plan.parts.fwd, fwd), (plan.parts.bwd, bwd)]);
        }
        while let Some((source, id)) = self.copies_to_build.pop() {
            let copy = self.uncounted_copy_of(source);
            self.built.push((id, copy));
        }
        let mut built = std::mem::take(&mut self.built);
        let parts: Vec<tape::BackwardPart> = self
            .plans
            .iter()
            .map(|p| tape::BackwardPart {
                id: p.parts.bwd,
                adjoints: if p.seed_one { 0 } else { p.float_results.len() },
            })
            .collect();
        tape::drop_unread_passed(&mut built, &parts);
        built.sort_by_key(|(id, _)| *id);
        Ok(built.into_iter().map(|(_, f)| f).collect())
    }
}

impl Deriver<'_> {
    /// The id of the copy of function `f` (of the program, or built by
    /// the derivation) that counts no steps, made the first time it is
    /// asked for: what a backward part runs when it recomputes a call's
    /// forward part, so that the recomputation takes no steps the
    /// function did not take.
    pub(crate) fn uncounted_copy(&mut self, f: FuncId) -> FuncId {
        if let Some(id) = self.copies.get(&f) {
            return *id;
        }
        let id = self.fresh_id();
        self.copies.insert(f, id);
        self.copies_to_build.push((f, id));
        id
    }

    /// The copy of `source` that [`Deriver::uncounted_copy`] names: its
    /// blocks count no steps, its calls call the callees' copies, and its
    /// forks fork them and draw no key from the member's stream
    /// ([`autobatch_ir::TapeMode::again`]), so that the member's stream
    /// advances as in the first run.
    fn uncounted_copy_of(&mut self, source: FuncId) -> Function {
        let original = match self.program.functions.get(source) {
            Some(f) => f,
            None => {
                let (_, f) = self
                    .built
                    .iter()
                    .find(|(id, _)| *id == source)
                    .expect("a function the derivation built");
                f
            }
        };
        let mut copy = original.clone();
        copy.name = format!("{}'again", original.name);
        copy.uncounted = true;
        for data in copy.blocks.values_mut() {
            for op in &mut data.ops {
                match op {
                    autobatch_ir::Op::Call { callee, .. } => *callee = self.uncounted_copy(*callee),
                    autobatch_ir::Op::Fork {
                        instances, tape, ..
                    } => {
                        match instances {
                            autobatch_ir::Instances::Join(calls) => {
                                for call in calls {
                                    call.callee = self.uncounted_copy(call.callee);
                                }
                            }
                            autobatch_ir::Instances::Map { callee, .. } => {
                                *callee = self.uncounted_copy(*callee)
                            }
                        }
                        *tape = tape.again();
                    }
                    autobatch_ir::Op::Prim { .. } => {}
                }
            }
        }
        copy
    }
}

/// Refuses a [`CustomVjp`] whose backward function does not fit its
/// function: parameters and results as [`CustomVjp`] says.
fn check_custom(program: &Program, c: CustomVjp) -> DeriveResult<()> {
    let (Some(f), Some(b)) = (
        program.functions.get(c.function),
        program.functions.get(c.backward),
    ) else {
        return derive_error("a custom derivative names no function", Loc::new(1, 1));
    };
    let mut params: Vec<&TensorType> = f.params.iter().map(|v| &f.vars[*v].ty).collect();
    params.extend(f.results.iter().filter(|t| t.elem.is_float()));
    let results: Vec<&TensorType> = params[..f.params.len()]
        .iter()
        .copied()
        .filter(|t| t.elem.is_float())
        .collect();
    let b_params: Vec<&TensorType> = b.params.iter().map(|v| &b.vars[*v].ty).collect();
    if b_params != params || b.results.iter().collect::<Vec<_>>() != results {
        return derive_error(
            format!(
                "`{}` does not fit as the derivative of `{}`",
                b.name, f.name
            ),
            b.loc,
        );
    }
    Ok(())
}

/// Appends the functions a derivation built (their ids follow the program's).
fn append(program: &mut Program, built: Vec<Function>) {
    for f in built {
        program.functions.push(f);
    }
}

/// The derivation of one (function, active parameters, seed) key: what
/// its callers need to know before its body is built.
pub(crate) struct Plan {
    /// The original function as [`prepare::prepare`] puts it, without
    /// its check arms when they go at the end of the fused function
    /// ([`fuse::without_check_arms`]), else with them always entered.
    pub g: Function,
    /// Those check arms (none if `g` is the whole function).
    pub arms: Vec<autobatch_ir::line::CheckArm>,
    /// The whole function with its check arms always entered, when `g`
    /// is it without them: derived instead if the derivation does not
    /// fuse.
    pub whole: Option<Function>,
    /// The original function's id.
    pub function: FuncId,
    /// Whether each variable of `g` carries an adjoint.
    pub active: Vec<bool>,
    /// The active parameters of `g`, whose adjoints the vjp returns.
    pub active_params: Vec<Var>,
    /// The vjp, which calls the two parts.
    pub id: FuncId,
    /// The vjp's name (`f'vjp`, `f'grad@10`, ...).
    pub name: String,
    /// Indices of `g`'s float results (each gets an adjoint parameter).
    pub float_results: Vec<usize>,
    /// Whether the adjoint of the result is one (a `grad` request): the
    /// vjp then takes no adjoint parameter.
    pub seed_one: bool,
    /// Its forward and backward parts.
    pub parts: tape::TapedIds,
}

impl Plan {
    /// The vjp's results: `g`'s, then the adjoints of the active parameters.
    pub(crate) fn result_types(&self) -> Vec<TensorType> {
        let mut out = self.g.results.clone();
        out.extend(
            self.active_params
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
    /// By function, its copy that counts no steps
    /// ([`Deriver::uncounted_copy`]); the copies still to build.
    copies: HashMap<FuncId, FuncId>,
    copies_to_build: Vec<(FuncId, FuncId)>,
    /// The statics differentiated (none but for `derive_static_gradient`).
    pub(crate) sources: Sources,
    /// By function, the backward function of its custom derivative
    /// ([`CustomVjp`]).
    pub(crate) custom: HashMap<FuncId, FuncId>,
    /// Per function of the program, per parameter, whether it is passed
    /// unchanged down the whole gradient (`tape/passed.rs`): its backward
    /// part takes it as an argument.
    pub(crate) passed: Vec<Vec<bool>>,
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
        let g = prepare::prepare(original, &self.sources);
        tape::check_invariants(&g, &self.sources)?;
        // A check arm costs a taped derivation a choice: it is derived as
        // part of the line (`autobatch_ir::line`), unless the derivation
        // fuses without it.
        let stripped = fuse::without_check_arms(&g);
        let g = g.with_check_arms_always_entered();
        let reachable = analysis::reachable(&g);
        let act = analysis::activity(&g, active, &reachable, &self.sources);
        let (g, arms, whole) = match stripped {
            Some((stripped, arms)) => (stripped, arms, Some(g)),
            None => (g, Vec::new(), None),
        };
        let active_params = g
            .params
            .iter()
            .zip(active)
            .filter(|(_, a)| **a)
            .map(|(v, _)| *v)
            .collect();
        let id = self.fresh_id();
        let statics = self.sources.statics.iter().any(|s| *s);
        let name = vjp_name(original, active, seed_one, statics);
        let float_results = float_result_indices(&g);
        let parts = tape::plan_ids(self);
        let p = self.plans.len();
        self.plans.push(Plan {
            g,
            arms,
            whole,
            function,
            active: act,
            active_params,
            id,
            name,
            float_results,
            seed_one,
            parts,
        });
        self.plan_index.insert(key, p);
        self.queue.push_back(p);
        Ok(p)
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
