//! Lowers the checked program ([`autobatch_frontend::hir::Module`]) to the
//! control-flow-graph IR ([`autobatch_ir::Program`]).
//!
//! What it does: one IR function per function instance (const-generic
//! functions are copied once per distinct tuple of const arguments reachable
//! from a non-generic function); tuples become several variables; control
//! flow (`if`, loops, `&&`/`||`, `break`, `continue`, `return`) becomes basic
//! blocks and jumps; `join`, `map` and `pfor` become one `Op::Fork` each,
//! after their arguments (tuples flattened, const-generic callees
//! instantiated as for calls). Every operation carries the location where
//! its source expression starts.
//!
//! Architecture Invariant: this crate knows nothing about execution or
//! batching. It describes what one member computes; executors decide how.
//! The types of the variables it creates come from
//! [`autobatch_ir::Prim::result_type`], the same rule the verifier checks.

mod flatten;
mod function;
mod library;

use std::collections::HashMap;

use autobatch_frontend::hir::{self, DimExpr};
use autobatch_frontend::Diagnostic;
use autobatch_ir::{
    Dim, EntityRef, EntityVec, FuncId, Function, Op, Program, StaticDecl, TensorType, Type, Var,
};
use autobatch_types::Loc;

/// Parses, checks and lowers a program. Runs on a thread with a large stack
/// so that deeply nested input cannot overflow it; never panics.
pub fn compile(source: &str) -> Result<Program, Vec<Diagnostic>> {
    let source = source.to_string();
    let result = autobatch_frontend::run_with_big_stack(move || {
        let module = autobatch_frontend::check_on_this_thread(&source)?;
        lower(&module)
    });
    match result {
        Ok(r) => r,
        Err(d) => Err(vec![d]),
    }
}

/// Parses, checks and lowers a program, then derives `entry'sgrad`: the
/// gradient of `entry` (a non-generic function whose result is a float
/// scalar, each member's loss) with respect to the `statics` (see
/// `autobatch_autodiff::derive_static_gradient`). The rules of `grad` hold
/// with those statics in the place of the point, checked as for `grad`
/// (diagnostics point at the offending construct). Returns the program and
/// the derived function's id. The caller has checked that `entry` and the
/// statics exist; a missing one is a diagnostic at 1:1.
pub fn compile_static_gradient(
    source: &str,
    entry: &str,
    statics: &[String],
) -> Result<(Program, FuncId), Vec<Diagnostic>> {
    let source = source.to_string();
    let (entry, statics) = (entry.to_string(), statics.to_vec());
    let result = autobatch_frontend::run_with_big_stack(move || {
        let module = autobatch_frontend::check_on_this_thread(&source)?;
        let nowhere =
            |message: String| vec![Diagnostic::new(message, Loc::new(1, 1), Loc::new(1, 2), "")];
        let Some(index) = module
            .functions
            .iter()
            .position(|f| f.name == entry && f.const_params.is_empty())
        else {
            return Err(nowhere(format!("no function `{entry}` to differentiate")));
        };
        let mut marked = vec![false; module.statics.len()];
        for name in &statics {
            match module.statics.iter().position(|s| &s.name == name) {
                Some(k) => marked[k] = true,
                None => return Err(nowhere(format!("no static `{name}`"))),
            }
        }
        autobatch_frontend::check_static_gradient(&module, index, &marked)?;
        let mut program = lower(&module)?;
        let Some(id) = program.function_by_name(&entry) else {
            return Err(nowhere(format!("`{entry}` was not lowered")));
        };
        let ids: Vec<autobatch_ir::StaticId> = program
            .statics
            .keys()
            .filter(|s| marked[s.index()])
            .collect();
        let sgrad = autobatch_autodiff::derive_static_gradient(&mut program, id, &ids)
            .map_err(derive_diagnostic)?;
        // `entry'sgrad` returns what `entry` returns (no parameter is
        // differentiated): the same value, shown the same way.
        program.functions[sgrad].ret_type = program.functions[id].ret_type.clone();
        Ok((program, sgrad))
    });
    match result {
        Ok(r) => r,
        Err(d) => Err(vec![d]),
    }
}

/// Lowers a checked module to IR. Errors are compiler bugs (the front end
/// accepted something the lowering cannot express), reported as diagnostics.
pub fn lower(module: &hir::Module) -> Result<Program, Vec<Diagnostic>> {
    let mut program = Program {
        symbols: module.symbols.clone(),
        ..Program::default()
    };
    for s in &module.statics {
        let ty = concrete_tensor(&s.ty, &[]).map_err(|d| vec![*d])?;
        program.statics.push(StaticDecl {
            name: s.name.clone(),
            ty,
            loc: s.loc,
        });
    }
    let mut registry = InstanceRegistry::default();
    // Non-generic functions first, in source order, so that FuncIds follow the source.
    for (index, f) in module.functions.iter().enumerate() {
        if f.const_params.is_empty() {
            registry.instance(module, index, Vec::new());
        }
    }
    let mut lowered: Vec<Function> = Vec::new();
    let mut errors = Vec::new();
    while lowered.len() < registry.order.len() {
        let (index, args) = registry.order[lowered.len()].clone();
        let name = registry.names[lowered.len()].clone();
        match function::lower_function(module, &program, &mut registry, index, &args, name) {
            Ok(f) => lowered.push(f),
            Err(d) => {
                errors.push(*d);
                break;
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    program.functions = lowered.into_iter().collect::<EntityVec<FuncId, Function>>();
    // A self tail call is a jump in the function (it is part of the meaning
    // of a program), so it must be one in the function's gradient too: the
    // derivation sees the loop it makes.
    autobatch_passes::tail_calls::eliminate_self_tail_calls(&mut program);
    derive_gradients(&mut program, &registry.vjps, &registry.custom)?;
    Ok(program)
}

/// Adds the vjp functions that `grad` / `value_and_grad` call (see the
/// `autobatch-autodiff` crate) and points the calls, which the lowering
/// emitted to placeholder ids ([`InstanceRegistry::vjp`]), at them.
///
/// The gradients that the backward functions of custom derivatives take
/// are derived first, so that those functions are whole when the others'
/// derivation copies them.
fn derive_gradients(
    program: &mut Program,
    vjps: &[(FuncId, autobatch_autodiff::Derivative)],
    custom: &[autobatch_autodiff::CustomVjp],
) -> Result<(), Vec<Diagnostic>> {
    let mut inner = vec![false; vjps.len()];
    for c in custom {
        let reached = program.reachable(c.backward);
        for (_, f) in program
            .functions
            .iter()
            .filter(|(id, _)| reached[id.index()])
        {
            let ops = f.blocks.values().flat_map(|b| &b.ops);
            for callee in ops.flat_map(|op| op.callees()) {
                if let Some(k) = placeholder_index(callee, vjps.len()) {
                    inner[k] = true;
                }
            }
        }
    }
    for first in [true, false] {
        let ks: Vec<usize> = (0..vjps.len()).filter(|k| inner[*k] == first).collect();
        derive_some(program, vjps, &ks, custom)?;
    }
    Ok(())
}

/// [`derive_gradients`] for the placeholders `ks` (indices into `vjps`).
fn derive_some(
    program: &mut Program,
    vjps: &[(FuncId, autobatch_autodiff::Derivative)],
    ks: &[usize],
    custom: &[autobatch_autodiff::CustomVjp],
) -> Result<(), Vec<Diagnostic>> {
    if ks.is_empty() {
        return Ok(());
    }
    // The derivative is taken with respect to the first parameter (the
    // point `x`, one variable: a float or a float array); the others are
    // the data arguments of `grad(f, x, d..)`, passed through unchanged.
    // A gradient of a function that is one block of primitives and calls
    // of such functions is derived from its copy with the calls spliced
    // (module `flatten`), so that the derivation is fused.
    let mut copies: HashMap<FuncId, FuncId> = HashMap::new();
    let requests: Vec<autobatch_autodiff::Request> = ks
        .iter()
        .map(|k| &vjps[*k])
        .map(|(f, kind)| {
            let function = match kind {
                autobatch_autodiff::Derivative::Gradient => *copies
                    .entry(*f)
                    .or_insert_with(|| flatten::flattened(program, *f).unwrap_or(*f)),
                autobatch_autodiff::Derivative::Jacobian => *f,
            };
            autobatch_autodiff::Request {
                function,
                active: (0..program.functions[function].params.len())
                    .map(|i| i == 0)
                    .collect(),
                kind: *kind,
            }
        })
        .collect();
    let derived = autobatch_autodiff::derive_with_custom(program, &requests, custom)
        .map_err(derive_diagnostic)?;
    // A taped gradient's function only calls its forward and backward
    // parts: its body replaces the call, so that the forward part runs
    // where the function itself would (same depth, same steps).
    let entries: Vec<Option<Function>> = derived
        .iter()
        .map(|d| d.taped.then(|| program.functions[d.id].clone()))
        .collect();
    for f in program.functions.values_mut() {
        let blocks: Vec<autobatch_ir::Block> = f.blocks.keys().collect();
        for b in blocks {
            let ops = std::mem::take(&mut f.blocks[b].ops);
            let mut out = Vec::with_capacity(ops.len());
            for mut op in ops {
                if let Op::Call {
                    callee,
                    dsts,
                    args,
                    loc,
                    ..
                } = &mut op
                {
                    let k = placeholder_index(*callee, vjps.len())
                        .and_then(|k| ks.iter().position(|j| *j == k));
                    if let Some(k) = k {
                        *callee = derived[k].id;
                        if let Some(entry) = &entries[k] {
                            let call = InlinedCall {
                                dsts,
                                args,
                                loc: *loc,
                            };
                            if inline_call(f, entry, &call, &mut out) {
                                continue;
                            }
                        }
                    }
                }
                out.push(op);
            }
            f.blocks[b].ops = out;
        }
    }
    Ok(())
}

/// Appends to `out` the operations of `entry` (one block of primitives and
/// calls) with its parameters bound to `args` and its results written to
/// `dsts`, its other variables new ones of `caller`, every operation at
/// the call's location. False (nothing appended) if `entry` is not of that
/// form.
fn inline_call(
    caller: &mut Function,
    entry: &Function,
    call: &InlinedCall,
    out: &mut Vec<Op>,
) -> bool {
    let (dsts, args, at) = (call.dsts, call.args, call.loc);
    let [block] = &entry.blocks.values().collect::<Vec<_>>()[..] else {
        return false;
    };
    let autobatch_ir::Terminator::Return(results) = &block.term else {
        return false;
    };
    let mut map: HashMap<Var, Var> = entry
        .params
        .iter()
        .copied()
        .zip(args.iter().copied())
        .collect();
    for (r, d) in results.iter().zip(dsts) {
        map.entry(*r).or_insert(*d);
    }
    let mut var = |v: Var, map: &mut HashMap<Var, Var>| {
        *map.entry(v).or_insert_with(|| {
            caller.vars.push(autobatch_ir::VarData {
                ty: entry.vars[v].ty.clone(),
                name: None,
            })
        })
    };
    let mut inlined = Vec::with_capacity(block.ops.len() + results.len());
    for op in &block.ops {
        inlined.push(match op {
            Op::Prim {
                dst, prim, args, ..
            } => Op::Prim {
                dst: dst.map(|d| var(d, &mut map)),
                prim: prim.clone(),
                args: args.iter().map(|a| var(*a, &mut map)).collect(),
                loc: at,
            },
            Op::Call {
                dsts,
                callee,
                args,
                catch,
                ..
            } => Op::Call {
                dsts: dsts.iter().map(|d| var(*d, &mut map)).collect(),
                callee: *callee,
                args: args.iter().map(|a| var(*a, &mut map)).collect(),
                loc: at,
                catch: *catch,
            },
            Op::Fork { .. } => return false,
        });
    }
    for (r, d) in results.iter().zip(dsts) {
        if map[r] != *d {
            inlined.push(Op::Prim {
                dst: Some(*d),
                prim: autobatch_ir::Prim::Copy,
                args: vec![map[r]],
                loc: at,
            });
        }
    }
    out.extend(inlined);
    true
}

/// A call of a derived function, to inline ([`inline_call`]).
struct InlinedCall<'c> {
    dsts: &'c [Var],
    args: &'c [Var],
    loc: Loc,
}

/// A derivation that failed (a limit of the transformation, or a bug: the
/// front end refuses what is not differentiable), as a diagnostic.
fn derive_diagnostic(e: autobatch_autodiff::DeriveError) -> Vec<Diagnostic> {
    vec![Diagnostic::new(
        format!("cannot differentiate: {}", e.message),
        e.loc,
        Loc::new(e.loc.line, e.loc.column + 1),
        "in the differentiated code",
    )]
}

/// The request index of a placeholder callee id, if `id` is one.
fn placeholder_index(id: FuncId, count: usize) -> Option<usize> {
    let k = (u32::MAX - id.0) as usize;
    (k < count).then_some(k)
}

/// The function instances of the program: each (function, const arguments)
/// pair gets a `FuncId` the first time a call needs it.
#[derive(Default)]
pub(crate) struct InstanceRegistry {
    ids: HashMap<(usize, Vec<Dim>), FuncId>,
    pub(crate) order: Vec<(usize, Vec<Dim>)>,
    pub(crate) names: Vec<String>,
    /// Function instances whose gradient `grad` / `value_and_grad` calls
    /// or whose Jacobian `jacobian` calls.
    pub(crate) vjps: Vec<(FuncId, autobatch_autodiff::Derivative)>,
    /// Function instances whose derivative the program gives, with the
    /// instance of their backward function (same const arguments).
    pub(crate) custom: Vec<autobatch_autodiff::CustomVjp>,
}

impl InstanceRegistry {
    /// The placeholder callee id of the gradient or Jacobian of `function`
    /// (the k-th distinct one is `u32::MAX - k`), replaced by the real id
    /// once derived.
    pub(crate) fn vjp(
        &mut self,
        function: FuncId,
        derivative: autobatch_autodiff::Derivative,
    ) -> FuncId {
        let key = (function, derivative);
        let k = match self.vjps.iter().position(|f| *f == key) {
            Some(k) => k,
            None => {
                self.vjps.push(key);
                self.vjps.len() - 1
            }
        };
        FuncId(u32::MAX - k as u32)
    }

    pub(crate) fn instance(
        &mut self,
        module: &hir::Module,
        index: usize,
        args: Vec<Dim>,
    ) -> FuncId {
        let key = (index, args);
        if let Some(id) = self.ids.get(&key) {
            return *id;
        }
        let id = FuncId(self.order.len() as u32);
        let base = module
            .functions
            .get(index)
            .map(|f| f.name.clone())
            .unwrap_or_default();
        let name = if key.1.is_empty() {
            base
        } else {
            let parts: Vec<String> = key
                .1
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => n.to_string(),
                    Dim::Symbolic(s) => module
                        .symbols
                        .get(s.0 as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("sym{}", s.0)),
                })
                .collect();
            format!("{base}<{}>", parts.join(", "))
        };
        self.ids.insert(key.clone(), id);
        let dims = key.1.clone();
        self.order.push(key);
        self.names.push(name);
        if let Some(backward) = autobatch_frontend::custom_vjp_of(module, index) {
            let backward = self.instance(module, backward, dims);
            self.custom.push(autobatch_autodiff::CustomVjp {
                function: id,
                backward,
            });
        }
        id
    }
}

/// An internal error: the lowering met something the front end should have rejected.
pub(crate) fn internal(message: impl Into<String>, loc: Loc) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::new(
            format!("internal compiler error: {}", message.into()),
            loc,
            Loc::new(loc.line, loc.column + 1),
            "while compiling this",
        )
        .with_note(
            "this is a bug in autobatch, not in your program; please report it with the program",
        ),
    )
}

/// A dimension with const generic parameters replaced by the instance's values.
pub(crate) fn concrete_dim(d: DimExpr, args: &[Dim]) -> Result<Dim, Box<Diagnostic>> {
    match d {
        DimExpr::Fixed(n) => Ok(Dim::Fixed(n)),
        DimExpr::Symbol(s) => Ok(Dim::Symbolic(s)),
        DimExpr::Generic(k) => args.get(k as usize).copied().ok_or_else(|| {
            internal(
                format!("const generic parameter {k} has no value"),
                Loc::new(1, 1),
            )
        }),
    }
}

pub(crate) fn concrete_tensor(
    t: &hir::TensorTy,
    args: &[Dim],
) -> Result<TensorType, Box<Diagnostic>> {
    let mut dims = Vec::with_capacity(t.dims.len());
    for d in &t.dims {
        dims.push(concrete_dim(*d, args)?);
    }
    Ok(TensorType { elem: t.elem, dims })
}

/// The structured IR type of a HIR type; `!` has no values, so no variables.
pub(crate) fn concrete_type(ty: &hir::Ty, args: &[Dim]) -> Result<Type, Box<Diagnostic>> {
    match ty {
        hir::Ty::Tensor(t) => Ok(Type::Tensor(concrete_tensor(t, args)?)),
        hir::Ty::Tuple(items) => {
            let mut out = Vec::with_capacity(items.len());
            for t in items {
                out.push(concrete_type(t, args)?);
            }
            Ok(Type::Tuple(out))
        }
        hir::Ty::Never => Ok(Type::Tuple(Vec::new())),
    }
}
