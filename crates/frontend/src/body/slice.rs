//! Slicing, `a[i..i + N]` and `a[..N]`: `N` items of the outermost axis of
//! `a` from `i`, an array `[T; N]`. The length must be known before the
//! program runs (a number, a `const`, a const generic parameter or a
//! symbolic dimension), so the range is written as a start and that
//! length, or from `0` (`a[0..N]`), or between two numbers (`a[2..5]`); a
//! range that does not lie in `a` faults at run time with
//! `index_out_of_bounds`, as an index does. A slice may also be the last
//! step of an assignment's place (`a[i..i + N] = v`, `a[..N] += v`).

use autobatch_types::Loc;
use quote::ToTokens;

use crate::hir::{DimExpr, Expr, ExprKind, Literal, TensorTy, Ty};
use crate::items::{error, CheckResult, MapNote};

use super::{mk, usize_ty, FunctionChecker};

/// The forms a slice may take, for messages.
const FORMS: &str = "write a slice as `a[i..i + N]`, `a[..N]` or `a[2..5]`, `N` a number, a `const`, a const generic parameter or a symbolic dimension";

impl FunctionChecker<'_, '_> {
    /// `base[range]`, `base` already checked.
    pub(super) fn check_slice(
        &mut self,
        base: Expr,
        base_end: Loc,
        range: &syn::ExprRange,
        (rl, re): (Loc, Loc),
        loc: Loc,
    ) -> CheckResult<Expr> {
        let (start, len) = self.slice_range(range, (rl, re))?;
        self.slice_types(base, base_end, start, len, loc)
    }

    /// The start and the length of the range `rl..re` of a slice.
    pub(super) fn slice_range(
        &mut self,
        range: &syn::ExprRange,
        (rl, re): (Loc, Loc),
    ) -> CheckResult<(Expr, DimExpr)> {
        let form_error = |what: &str| {
            error(
                format!("{what}: a slice's length must be known before the program runs"),
                rl,
                re,
                "not `i..i + N`, `..N` or `2..5`",
            )
            .map_note(FORMS)
        };
        if !matches!(range.limits, syn::RangeLimits::HalfOpen(_)) {
            return Err(form_error("an inclusive range"));
        }
        let Some(end) = &range.end else {
            return Err(form_error("a range without an end"));
        };
        let (start, len) = match (&range.start, &**end) {
            (None, len) => (zero(rl), self.length(len)?),
            (Some(start), syn::Expr::Binary(sum))
                if matches!(sum.op, syn::BinOp::Add(_)) && same_tokens(start, &sum.left) =>
            {
                (self.check_expr(start)?, self.length(&sum.right)?)
            }
            (Some(start), len) if literal(start) == Some(0) => (zero(rl), self.length(len)?),
            (Some(start), end) => match (literal(start), literal(end)) {
                (Some(s), Some(e)) if s <= e => (self.check_expr(start)?, DimExpr::Fixed(e - s)),
                (Some(_), Some(_)) => return Err(form_error("a range that ends before it starts")),
                _ => {
                    return Err(form_error(
                        "a range whose end is not its start plus a length",
                    ))
                }
            },
        };
        Ok((start, len))
    }

    /// The type of `base[start..start + len]`.
    fn slice_types(
        &mut self,
        base: Expr,
        base_end: Loc,
        start: Expr,
        len: DimExpr,
        loc: Loc,
    ) -> CheckResult<Expr> {
        let kind = |base: Expr, start: Expr| ExprKind::Slice {
            base: Box::new(base),
            start: Box::new(start),
            len,
        };
        if base.ty == Ty::Never || start.ty == Ty::Never {
            return Ok(mk(kind(base, start), Ty::Never, loc));
        }
        let bt = match &base.ty {
            Ty::Tensor(t) if !t.is_scalar() => t.clone(),
            other => {
                return Err(error(
                    format!("cannot slice a value of type `{}`", self.show(other)),
                    base.loc,
                    base_end,
                    "not an array",
                ))
            }
        };
        self.integer_operand(&start, start.loc, "a slice's start")?;
        let ty = sliced(&bt, len);
        Ok(mk(kind(base, start), ty, loc))
    }
}

/// The type of `len` items of an array of type `t`.
pub(super) fn sliced(t: &TensorTy, len: DimExpr) -> Ty {
    let mut dims = vec![len];
    dims.extend(t.dims[1..].iter().copied());
    Ty::Tensor(TensorTy {
        elem: t.elem,
        dims,
        var: t.var,
    })
}

/// The `usize` zero a slice `a[..N]` starts at.
fn zero(loc: Loc) -> Expr {
    mk(ExprKind::Literal(Literal::Int(0)), usize_ty(), loc)
}

/// The value of an integer literal without a sign (`2` in `a[2..5]`).
fn literal(e: &syn::Expr) -> Option<u64> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse::<u64>().ok(),
        _ => None,
    }
}

/// Whether two expressions are written alike (`i` in `i..i + N`).
fn same_tokens(a: &syn::Expr, b: &syn::Expr) -> bool {
    a.to_token_stream().to_string() == b.to_token_stream().to_string()
}
