//! Calls of the library functions (`autobatch_ops::library`): the
//! distributions' `normal_lpdf`, `poisson_rng`, ... and the compound special
//! functions. Each argument is checked against its parameter, by name: a
//! real is a float scalar or vector, all of one float type; an outcome or
//! count is an `i64` scalar or vector; every elementwise vector of a call
//! has one length `N`, every vector and matrix argument (a simplex, a
//! covariance) one size `K`. A size argument (`K` of
//! `lkj_corr_cholesky_rng(K, eta)`) is a length, read as an array length;
//! the call passes it on as a float vector of that length (its values
//! unused), from which the lowering takes `K`.

use autobatch_ops::library::{ArgKind, Function, Param, ResultKind};
use autobatch_types::{Loc, ScalarType};

use crate::hir::{DimExpr, Expr, ExprKind, Literal, TensorTy, Ty};
use crate::items::{error, CheckResult, MapNote};
use crate::location::{expr_end, expr_start};
use crate::Diagnostic;

use super::call::check_arity;
use super::infer::{Class, Elem};
use super::{mk, no_generic_arguments, FunctionChecker};

/// What the arguments of one call have in common, gathered argument by argument.
#[derive(Default)]
struct Common {
    /// The type of the first float argument (its element type is the call's).
    float: Option<TensorTy>,
    /// The length `N` of the elementwise arguments, and the name of the
    /// parameter that fixed it.
    length: Option<(DimExpr, &'static str)>,
    /// The size `K` of the vector and matrix arguments, likewise.
    order: Option<(DimExpr, &'static str)>,
}

impl FunctionChecker<'_, '_> {
    pub(super) fn check_library_call(
        &mut self,
        function: Function,
        turbofish: Option<&syn::AngleBracketedGenericArguments>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let name = function.name();
        if let Some(t) = turbofish {
            return Err(no_generic_arguments(&format!("`{name}`"), t));
        }
        let params = function.params();
        check_arity(&name, params.len(), args.len(), (loc, end))?;
        let mut common = Common::default();
        // The sizes, by position among the arguments; the other arguments.
        let mut sizes = Vec::new();
        let mut checked = Vec::new();
        let mut values = Vec::new();
        for (position, (arg, param)) in args.iter().zip(&params).enumerate() {
            if param.kind == ArgKind::Size {
                let len = self.size_argument(&name, *param, arg)?;
                common.order.get_or_insert((len, param.name));
                sizes.push((position, len));
            } else {
                checked.push((self.check_expr(arg)?, expr_end(arg)));
                values.push(*param);
            }
        }
        let never = checked.iter().any(|(a, _)| a.ty == Ty::Never);
        if !never {
            for ((arg, arg_end), param) in checked.iter().zip(&values) {
                self.library_argument(&name, *param, arg, *arg_end, &mut common)?;
            }
        }
        let ty = if never {
            Ty::Never
        } else {
            result_type(function, &common)
        };
        if let Ty::Tensor(t) = &ty {
            crate::items::check_array_size(t, loc, end)?;
        }
        let mut args: Vec<Expr> = checked.into_iter().map(|(a, _)| a).collect();
        for (position, len) in sizes {
            args.insert(position, size_template(&common, len, loc));
        }
        Ok(mk(ExprKind::Library { function, args }, ty, loc))
    }

    /// The length a size argument gives, read as an array length: a
    /// number, a `const`, a const generic parameter or a symbolic
    /// dimension, never a variable.
    fn size_argument(&mut self, name: &str, param: Param, arg: &syn::Expr) -> CheckResult<DimExpr> {
        let (loc, end) = (expr_start(arg), expr_end(arg));
        let wrong = |what: String| {
            error(
                format!(
                    "`{}` of `{name}` must be a length known before the program runs: {what}",
                    param.name
                ),
                loc,
                end,
                "expected a length",
            )
            .map_note("use a number, a `const`, a const generic parameter or a symbolic dimension")
        };
        if let syn::Expr::Path(p) = arg {
            if let Some(ident) = p.path.get_ident() {
                let local = ident.to_string();
                if self.lookup_local(&local).is_some() && !self.const_params.contains(&local) {
                    return Err(wrong(format!("`{local}` is a variable")));
                }
            }
        }
        let generics = self.const_params.clone();
        self.scope
            .resolve_dim(arg, &generics, &|_| false)
            .map_err(|e| wrong(e.message))
    }

    /// Checks one argument against its parameter and what the arguments
    /// before it fixed.
    fn library_argument(
        &mut self,
        name: &str,
        param: Param,
        arg: &Expr,
        arg_end: Loc,
        common: &mut Common,
    ) -> CheckResult<()> {
        let wrong = |this: &Self, need: String| -> Box<Diagnostic> {
            error(
                format!(
                    "`{}` of `{name}` must be {need}, but is `{}`",
                    param.name,
                    this.show(&arg.ty)
                ),
                arg.loc,
                arg_end,
                format!("expected {need}"),
            )
        };
        let ranks: &[usize] = match param.kind {
            ArgKind::Real | ArgKind::Int => &[0, 1],
            ArgKind::Scalar => &[0],
            ArgKind::Vector => &[1],
            ArgKind::Matrix | ArgKind::Design => &[2],
            ArgKind::Points => &[1, 2],
            ArgKind::Size => &[],
        };
        let t = match &arg.ty {
            Ty::Tensor(t) if ranks.contains(&t.dims.len()) => t.clone(),
            _ => return Err(wrong(self, kind_text(param.kind).to_string())),
        };
        if param.kind == ArgKind::Int {
            let e = self.elem(&t);
            if !self.unify_elem(e, Elem::Known(ScalarType::I64)) {
                return Err(wrong(self, kind_text(param.kind).to_string()));
            }
        } else {
            if self.class(&t) != Class::Float {
                return Err(wrong(self, kind_text(param.kind).to_string()));
            }
            match &common.float {
                None => common.float = Some(t.clone()),
                Some(first) => {
                    let (a, b) = (self.elem(first), self.elem(&t));
                    if !self.unify_elem(a, b) {
                        let scalar = TensorTy {
                            dims: Vec::new(),
                            ..first.clone()
                        };
                        let need = format!(
                            "of the call's float type `{}` ({})",
                            self.show_tensor(&scalar),
                            kind_text(param.kind)
                        );
                        return Err(wrong(self, need));
                    }
                }
            }
        }
        // Which length each axis is: `N` (elementwise) or `K`.
        let axes: &[bool] = match param.kind {
            ArgKind::Real | ArgKind::Int | ArgKind::Points => &[true],
            ArgKind::Vector => &[false],
            ArgKind::Matrix => &[false, false],
            ArgKind::Design => &[true, false],
            ArgKind::Scalar | ArgKind::Size => &[],
        };
        for (&len, &elementwise) in t.dims.iter().zip(axes) {
            let (slot, what) = if elementwise {
                (&mut common.length, "a scalar or a vector of the length of")
            } else {
                (&mut common.order, "of the size of")
            };
            match *slot {
                None => *slot = Some((len, param.name)),
                Some((first, first_name)) if first != len => {
                    let need = format!("{what} `{first_name}`");
                    return Err(wrong(self, need));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// The argument a size is passed on as: `[0.0; len]` in the call's float type.
fn size_template(common: &Common, len: DimExpr, loc: Loc) -> Expr {
    let scalar = common
        .float
        .clone()
        .map(|t| TensorTy {
            dims: Vec::new(),
            ..t
        })
        .unwrap_or_else(|| TensorTy::new(ScalarType::F64, Vec::new()));
    let vector = TensorTy {
        dims: vec![len],
        ..scalar.clone()
    };
    let zero = Literal::Float {
        as_f64: 0.0,
        as_f32: 0.0,
    };
    let element = mk(ExprKind::Literal(zero), Ty::Tensor(scalar), loc);
    let kind = ExprKind::Repeat {
        element: Box::new(element),
        len,
    };
    mk(kind, Ty::Tensor(vector), loc)
}

fn kind_text(kind: ArgKind) -> &'static str {
    match kind {
        ArgKind::Real => "a float (`f64` or `f32`) or a vector of floats",
        ArgKind::Int => "an `i64` or a vector of `i64`",
        ArgKind::Scalar => "a float (`f64` or `f32`)",
        ArgKind::Vector => "a vector of floats (`[f64; K]`)",
        ArgKind::Matrix => "a square matrix of floats (`[[f64; K]; K]`)",
        ArgKind::Design => "a matrix of floats (`[[f64; K]; N]`)",
        ArgKind::Points => "a vector of floats or a matrix of floats, a point per row",
        ArgKind::Size => "a length known before the program runs",
    }
}

/// The type of the call: a float scalar for a log density, the arguments'
/// shape for an elementwise function or a draw.
fn result_type(function: Function, common: &Common) -> Ty {
    let dims: Vec<DimExpr> = common.length.iter().map(|(len, _)| *len).collect();
    let float = common
        .float
        .clone()
        .unwrap_or_else(|| TensorTy::new(ScalarType::F64, Vec::new()));
    let shaped = |dims: Vec<DimExpr>| TensorTy {
        dims,
        ..float.clone()
    };
    let order: Vec<DimExpr> = common.order.iter().map(|(len, _)| *len).collect();
    Ty::Tensor(match function.result() {
        ResultKind::Sum => shaped(Vec::new()),
        ResultKind::Elementwise | ResultKind::Draw { integer: false } => shaped(dims),
        ResultKind::Draw { integer: true } => TensorTy::new(ScalarType::I64, dims),
        ResultKind::DrawVector => shaped(order),
        ResultKind::DrawMatrix => shaped([order.clone(), order].concat()),
        ResultKind::Covariance => shaped([dims.clone(), dims].concat()),
    })
}
