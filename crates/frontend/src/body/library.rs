//! Calls of the library functions (`autobatch_ops::library`): the
//! distributions' `normal_lpdf`, `poisson_rng`, ... and the compound special
//! functions. Each argument is checked against its parameter, by name: a
//! real is a float scalar or vector, all of one float type; an outcome or
//! count is an `i64` scalar or vector; every elementwise vector of a call
//! has one length `N`, every vector and matrix argument (a simplex, a
//! covariance) one size `K`.

use autobatch_ops::library::{ArgKind, Function, Param, ResultKind};
use autobatch_types::{Loc, ScalarType};

use crate::hir::{DimExpr, Expr, ExprKind, TensorTy, Ty};
use crate::items::{error, CheckResult};
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
        let checked = self.check_args(args)?;
        let never = checked.iter().any(|(a, _)| a.ty == Ty::Never);
        let mut common = Common::default();
        if !never {
            for ((arg, arg_end), param) in checked.iter().zip(&params) {
                self.library_argument(&name, *param, arg, *arg_end, &mut common)?;
            }
        }
        let ty = if never {
            Ty::Never
        } else {
            result_type(function, &common)
        };
        let args = checked.into_iter().map(|(a, _)| a).collect();
        Ok(mk(ExprKind::Library { function, args }, ty, loc))
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
            ArgKind::Scalar => &[],
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

fn kind_text(kind: ArgKind) -> &'static str {
    match kind {
        ArgKind::Real => "a float (`f64` or `f32`) or a vector of floats",
        ArgKind::Int => "an `i64` or a vector of `i64`",
        ArgKind::Scalar => "a float (`f64` or `f32`)",
        ArgKind::Vector => "a vector of floats (`[f64; K]`)",
        ArgKind::Matrix => "a square matrix of floats (`[[f64; K]; K]`)",
        ArgKind::Design => "a matrix of floats (`[[f64; K]; N]`)",
        ArgKind::Points => "a vector of floats or a matrix of floats, a point per row",
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
        ResultKind::Covariance => shaped([dims.clone(), dims].concat()),
    })
}
