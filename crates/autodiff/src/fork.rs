//! The adjoint of a fork (`join`, `map`, `pfor`) and the Jacobian.
//!
//! As for a call, the forward pass runs the fork as it is and the backward
//! pass runs the callees' vjps, which recompute their forward values; the
//! vjps run as instances too, so the backward instances of all members run
//! concurrently in the batch as the forward ones do:
//!
//! - `join(f(a), g(b))`: a `join` of `f'vjp(a, df)` and `g'vjp(b, dg)`
//!   (a plain call when one call alone has something to propagate); each
//!   call's adjoints are added to its arguments' in call order.
//! - `map(f, xs, extra..)` / `pfor::<N>(g, extra..)`: a `map` of the same
//!   count over the callee's vjp, the result adjoints passed one element
//!   per instance. The adjoint of `xs` comes back stacked, as it is; an
//!   extra argument (the same for every instance) gets the sum of the
//!   instances' adjoints over the leading axis, in a fixed order (see
//!   [`crate::rules::sum_leading`]). The index of `pfor` is an integer: no
//!   adjoint. Because an instance of a `map` takes its elements first and
//!   the vjp takes the result adjoints last, the instances run a small
//!   wrapper, `f'vjp.map` (`g'vjp.pfor`), that takes its parameters in the
//!   fork's order and calls the vjp.
//! - `jacobian(h, x)` is `h'jacobian(x)`: a `pfor` over the `M` rows,
//!   row `m` (`h'jrow(m, x)`) being the vjp of `h` at `x` with the one-hot
//!   adjoint `e_m`. With data arguments (`jacobian(h, x, d..)`, `h`'s
//!   parameters after the first), `h'jacobian(x, d..)` passes them whole
//!   to every row, `h'jrow(m, x, d..)`, which passes them to the vjp.

use autobatch_ir::{
    fork_calls, Dim, EntityRef, FuncId, InstanceArg, Instances, JoinCall, Op, Prim, ScalarType,
    TapeMode, TensorType, Terminator, Var,
};
use autobatch_types::Loc;

use crate::block::{callee_vjp, Builder, CalleeVjp};
use crate::{derive_error, rules, DeriveResult, Deriver};

/// What identifies the wrapper a `map`'s adjoint runs: the callee, its
/// active parameters, whether the instances get their index, and how many
/// of the `map`'s arguments go one element per instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WrapperKey {
    callee: FuncId,
    active: Vec<bool>,
    index: bool,
    each: usize,
}

/// A forward fork whose adjoint is being emitted (its variables are those
/// of the function being built).
pub(crate) struct Fork<'a> {
    pub dsts: &'a [Var],
    pub args: &'a [Var],
    pub instances: &'a Instances,
    pub loc: Loc,
}

/// Emits the adjoint of `fork` and accumulates its contributions.
pub(crate) fn fork_adjoint(d: &mut Deriver, b: &mut Builder, fork: Fork) -> DeriveResult<()> {
    match fork.instances {
        Instances::Join(_) => join_adjoint(d, b, &fork),
        Instances::Map {
            callee,
            count,
            index,
            each,
        } => {
            let site = MapSite {
                callee: *callee,
                count: *count,
                index: *index,
                each: *each,
            };
            map_adjoint(d, b, &fork, site)
        }
    }
}

/// The backward call of one call of a `join`.
struct BackwardCall {
    call: JoinCall,
    /// The vjp's arguments: the call's, then its result adjoints.
    args: Vec<Var>,
    /// The vjp's results: the callee's results, then the adjoints.
    outs: Vec<Var>,
    /// How many of `outs` are the callee's results.
    results: usize,
    /// The call's active arguments, whose adjoints the vjp returns in order.
    targets: Vec<Var>,
}

/// `join`: a `join` of the vjps of the calls that have something to
/// propagate (active arguments, and a result with an adjoint).
fn join_adjoint(d: &mut Deriver, b: &mut Builder, fork: &Fork) -> DeriveResult<()> {
    let loc = fork.loc;
    let mut backward = Vec::new();
    for call in fork_calls(d.program, fork.dsts, fork.args, fork.instances) {
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            match a {
                InstanceArg::Whole(v) => args.push(*v),
                _ => return derive_error("a `join` call takes its arguments whole", loc),
            }
        }
        let active: Vec<bool> = args.iter().map(|a| b.active[a.index()]).collect();
        let reads = d.sources.reads(call.callee);
        if !(active.iter().any(|a| *a) || reads) || !call.dsts.iter().any(|v| b.adj.contains_key(v))
        {
            continue;
        }
        let vjp = callee_vjp(d, call.callee, &active)?;
        let targets: Vec<Var> = args
            .iter()
            .zip(&active)
            .filter(|(_, a)| **a)
            .map(|(v, _)| *v)
            .collect();
        for i in &vjp.float_results {
            args.push(b.adjoint_or_zero(call.dsts[*i], loc)?);
        }
        let outs: Vec<Var> = vjp
            .result_types
            .iter()
            .map(|t| b.var(t.clone(), None, false))
            .collect();
        backward.push(BackwardCall {
            call: JoinCall {
                callee: vjp.id,
                args: args.len(),
                loc: call.loc.unwrap_or(loc),
            },
            args,
            outs,
            results: call.dsts.len(),
            targets,
        });
    }
    match &backward[..] {
        [] => return Ok(()),
        [one] => b.push(Op::Call {
            dsts: one.outs.clone(),
            callee: one.call.callee,
            args: one.args.clone(),
            loc: one.call.loc,
            catch: false,
        }),
        many => b.push(Op::Fork {
            dsts: many.iter().flat_map(|c| c.outs.iter().copied()).collect(),
            args: many.iter().flat_map(|c| c.args.iter().copied()).collect(),
            instances: Instances::Join(many.iter().map(|c| c.call.clone()).collect()),
            loc,
            tape: TapeMode::None,
        }),
    }
    for c in &backward {
        for (v, a) in c.targets.iter().zip(&c.outs[c.results..]) {
            b.accumulate(*v, *a, loc)?;
        }
    }
    Ok(())
}

/// The instances of a `map` or `pfor` (see [`Instances::Map`]).
#[derive(Clone, Copy)]
struct MapSite {
    callee: FuncId,
    count: Dim,
    index: bool,
    each: usize,
}

/// `map` / `pfor`: a `map` of the same count over `f'vjp.map`, the result
/// adjoints passed one element per instance; the stacked adjoints of the
/// extra arguments are summed over the instances.
fn map_adjoint(d: &mut Deriver, b: &mut Builder, fork: &Fork, site: MapSite) -> DeriveResult<()> {
    let loc = fork.loc;
    let mut active = vec![false; usize::from(site.index)];
    active.extend(fork.args.iter().map(|a| b.active[a.index()]));
    let reads = d.sources.reads(site.callee);
    if !(active.iter().any(|a| *a) || reads) || !fork.dsts.iter().any(|v| b.adj.contains_key(v)) {
        return Ok(());
    }
    let vjp = callee_vjp(d, site.callee, &active)?;
    let key = WrapperKey {
        callee: site.callee,
        active,
        index: site.index,
        each: site.each,
    };
    let wrapper = map_wrapper(d, key, &vjp)?;
    let mut args = fork.args[..site.each].to_vec();
    for i in &vjp.float_results {
        args.push(b.adjoint_or_zero(fork.dsts[*i], loc)?);
    }
    let each = args.len();
    args.extend_from_slice(&fork.args[site.each..]);
    let results = d.program.functions[site.callee].results.len();
    let outs: Vec<Var> = vjp.result_types[results..]
        .iter()
        .map(|t| b.var(stacked(t, site.count), None, false))
        .collect();
    b.push(Op::Fork {
        dsts: outs.clone(),
        args,
        instances: Instances::Map {
            callee: wrapper,
            count: site.count,
            index: site.index,
            each,
        },
        loc,
        tape: TapeMode::None,
    });
    let targets = fork
        .args
        .iter()
        .enumerate()
        .filter(|(_, a)| b.active[a.index()])
        .map(|(j, a)| (j, *a))
        .collect::<Vec<_>>();
    for ((j, v), out) in targets.into_iter().zip(outs) {
        let c = if j < site.each {
            out
        } else {
            rules::sum_leading(b, out, loc)?
        };
        b.accumulate(v, c, loc)?;
    }
    Ok(())
}

/// `[t; count]`.
fn stacked(t: &TensorType, count: Dim) -> TensorType {
    TensorType {
        elem: t.elem,
        dims: std::iter::once(count)
            .chain(t.dims.iter().copied())
            .collect(),
    }
}

/// The function a `map`'s adjoint runs as its instances, made once per
/// key: `f'vjp.map` (`.pfor` for a `pfor`) takes `f`'s parameters up to its last one passed per
/// element (the index, the elements), then the adjoints of `f`'s float
/// results (per element too), then `f`'s other parameters; it calls
/// `f'vjp` and returns the adjoints of the active parameters.
fn map_wrapper(d: &mut Deriver, key: WrapperKey, vjp: &CalleeVjp) -> DeriveResult<FuncId> {
    if let Some(id) = d.wrappers.get(&key) {
        return Ok(*id);
    }
    let program = d.program;
    let f = &program.functions[key.callee];
    let loc = f.loc;
    // `.map` and `.pfor` as the language makes them (one array passed per
    // element, or the index); the count of such arrays otherwise.
    let name = match (key.index, key.each) {
        (false, 1) => format!("{}.map", vjp.name),
        (true, 0) => format!("{}.pfor", vjp.name),
        (false, each) => format!("{}.map{each}", vjp.name),
        (true, each) => format!("{}.pfor{each}", vjp.name),
    };
    let mut b = Builder::new(program, name, loc, loc);
    let split = usize::from(key.index) + key.each;
    let params = |b: &mut Builder, range: std::ops::Range<usize>| -> Vec<Var> {
        f.params[range]
            .iter()
            .map(|p| {
                let data = &f.vars[*p];
                let name = data.name.clone().unwrap_or_else(|| format!("{p}"));
                b.param(data.ty.clone(), name)
            })
            .collect()
    };
    let mut call_args = params(&mut b, 0..split);
    let dres: Vec<Var> = vjp
        .float_results
        .iter()
        .enumerate()
        .map(|(k, i)| b.param(f.results[*i].clone(), format!("d.result{k}")))
        .collect();
    call_args.extend(params(&mut b, split..f.params.len()));
    call_args.extend(dres);
    let outs: Vec<Var> = vjp
        .result_types
        .iter()
        .map(|t| b.var(t.clone(), None, false))
        .collect();
    b.push(Op::Call {
        dsts: outs.clone(),
        callee: vjp.id,
        args: call_args,
        loc,
        catch: false,
    });
    b.return_vars(outs[f.results.len()..].to_vec());
    let id = d.add_function(b.func);
    d.wrappers.insert(key, id);
    Ok(id)
}

/// `h'jacobian` (see [`crate::Derivative::Jacobian`]): a `pfor` over the
/// rows, each `h'jrow(m, x)`, the adjoint of `x` that `h'vjp` gives for
/// the one-hot adjoint `e_m` of the result.
pub(crate) fn jacobian(d: &mut Deriver, h: FuncId, active: &[bool]) -> DeriveResult<FuncId> {
    let program = d.program;
    let Some(f) = program.functions.get(h) else {
        return derive_error(format!("no function {h} to differentiate"), Loc::new(1, 1));
    };
    let loc = f.loc;
    let vector = |t: &TensorType| t.elem.is_float() && t.dims.len() == 1;
    // The point `x` is the first parameter; the others (the data
    // arguments of `jacobian(h, x, d..)`) are passed through unchanged.
    let (x_ty, y_ty) = match (&f.params[..], &f.results[..]) {
        ([x, ..], [y]) if vector(&f.vars[*x].ty) && vector(y) => {
            (f.vars[*x].ty.clone(), y.clone())
        }
        _ => {
            return derive_error(
                format!(
                "the Jacobian of `{}` needs a first parameter and one result, both arrays of floats",
                f.name
            ),
                loc,
            )
        }
    };
    let param_name = |k: usize, default: &str| {
        f.vars[f.params[k]]
            .name
            .clone()
            .unwrap_or_else(|| default.into())
    };
    let data: Vec<(TensorType, String)> = (1..f.params.len())
        .map(|k| (f.vars[f.params[k]].ty.clone(), param_name(k, "d")))
        .collect();
    let x_name = param_name(0, "x");
    let vjp = callee_vjp(d, h, active)?;
    let gradient = match &vjp.result_types[..] {
        [_, gradient] => gradient.clone(),
        _ => {
            return derive_error(
                format!("the Jacobian of `{}` needs its parameter active", f.name),
                loc,
            )
        }
    };

    let mut b = Builder::new(program, format!("{}'jrow", f.name), loc, loc);
    let m = b.param(TensorType::scalar(ScalarType::I64), "m".into());
    let mut args = vec![b.param(x_ty.clone(), x_name.clone())];
    for (ty, name) in &data {
        args.push(b.param(ty.clone(), name.clone()));
    }
    let zeros = b.filled(&y_ty, 0.0, loc)?;
    let one = b.constant(y_ty.elem, 1.0, loc)?;
    let e = b.prim(Prim::IndexSet, vec![zeros, m, one], loc)?;
    let value = b.var(y_ty.clone(), None, false);
    let row = b.var(gradient.clone(), None, false);
    args.push(e);
    b.push(Op::Call {
        dsts: vec![value, row],
        callee: vjp.id,
        args,
        loc,
        catch: false,
    });
    b.return_vars(vec![row]);
    let row_function = d.add_function(b.func);

    let mut b = Builder::new(program, format!("{}'jacobian", f.name), loc, loc);
    let mut args = vec![b.param(x_ty, x_name)];
    for (ty, name) in data {
        args.push(b.param(ty, name));
    }
    let count = y_ty.dims[0];
    run_when_no_rows(&mut b, h, &args, &y_ty, loc);
    let j = b.var(stacked(&gradient, count), None, false);
    b.push(Op::Fork {
        dsts: vec![j],
        args,
        instances: Instances::Map {
            callee: row_function,
            count,
            index: true,
            each: 0,
        },
        loc,
        tape: TapeMode::None,
    });
    b.return_vars(vec![j]);
    Ok(d.add_function(b.func))
}

/// Where the Jacobian may have no rows (`h`'s result of length zero, or of
/// a symbolic length), calls `h` itself when it has none: no row's vjp
/// then runs `h`, and the Jacobian must still stop with the error `h`
/// stops with.
fn run_when_no_rows(b: &mut Builder, h: FuncId, args: &[Var], y_ty: &TensorType, loc: Loc) {
    let call = |b: &mut Builder| {
        let y = b.var(y_ty.clone(), None, false);
        b.push(Op::Call {
            dsts: vec![y],
            callee: h,
            args: args.to_vec(),
            loc,
            catch: false,
        });
    };
    match y_ty.dims[0] {
        Dim::Fixed(0) => call(b),
        Dim::Fixed(_) => {}
        Dim::Symbolic(s) => {
            let usize_ty = TensorType::scalar(ScalarType::Usize);
            let n = b.var(usize_ty.clone(), None, false);
            b.prim_into(n, Prim::SymbolValue(s), Vec::new(), loc);
            let zero = b.var(usize_ty, None, false);
            b.prim_into(
                zero,
                Prim::Const(autobatch_ir::Scalar::Usize(0)),
                Vec::new(),
                loc,
            );
            let none = b.var(TensorType::scalar(ScalarType::Bool), None, false);
            b.prim_into(
                none,
                Prim::Compare(autobatch_ir::CompareOp::Eq),
                vec![n, zero],
                loc,
            );
            let empty = b.new_block(loc);
            let rows = b.new_block(loc);
            b.terminate(Terminator::Branch {
                cond: none,
                then_block: empty,
                else_block: rows,
            });
            b.current = empty;
            call(b);
            b.terminate(Terminator::Jump(rows));
            b.current = rows;
        }
    }
}
