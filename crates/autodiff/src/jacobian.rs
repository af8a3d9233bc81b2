//! The Jacobian: `jacobian(h, x)` is `h'jacobian(x)`, a `pfor` over the
//! `M` rows of the result, row `m` (`h'jrow(m, x)`) calling the vjp of
//! `h` at `x` with the one-hot adjoint `e_m` (so each row runs `h`'s
//! forward part and its backward part: `M` forward passes, run as `M`
//! concurrent instances). With data arguments (`jacobian(h, x, d..)`,
//! `h`'s parameters after the first), `h'jacobian(x, d..)` passes them
//! whole to every row, `h'jrow(m, x, d..)`, which passes them to the vjp.

use autobatch_ir::{
    Dim, FuncId, Instances, Op, Prim, ScalarType, TapeMode, TensorType, Terminator, Var,
};
use autobatch_types::Loc;

use crate::builder::Builder;
use crate::{derive_error, DeriveResult, Deriver};

/// `[t; count]`.
fn stacked(t: &TensorType, count: Dim) -> TensorType {
    TensorType {
        elem: t.elem,
        dims: std::iter::once(count)
            .chain(t.dims.iter().copied())
            .collect(),
    }
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
    let p = d.plan(h, active, false)?;
    let vjp = d.plans[p].id;
    let gradient = match &d.plans[p].result_types()[..] {
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
        callee: vjp,
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
