//! Control flow: `if`, `while`, `loop`, `for`, `break`, `continue`,
//! `return`, and the conditions and loop bodies they check.

use autobatch_types::{Loc, ScalarType};

use crate::hir::{self, Expr, ExprKind, TensorTy, Ty};
use crate::items::{error, pattern_range, unsupported, CheckResult, MapNote};
use crate::location::{end_of, expr_end, expr_start, start_of};

use super::infer::Class;
use super::{bool_ty, mk, peel, FunctionChecker, LoopContext, LoopKind};

impl FunctionChecker<'_, '_> {
    pub(super) fn check_condition(&mut self, cond: &syn::Expr, what: &str) -> CheckResult<Expr> {
        let c = self.check_expr(cond)?;
        if !self.unify(&bool_ty(), &c.ty) {
            return Err(error(
                format!(
                    "mismatched types: {what} must be a `bool`, but this is `{}`",
                    self.show(&c.ty)
                ),
                c.loc,
                expr_end(cond),
                "expected `bool`",
            ));
        }
        Ok(c)
    }

    pub(super) fn check_if(&mut self, i: &syn::ExprIf, loc: Loc, end: Loc) -> CheckResult<Expr> {
        if let syn::Expr::Let(l) = &*i.cond {
            return Err(unsupported("`if let`", loc, end_of(l.let_token.span)));
        }
        let cond = self.check_condition(&i.cond, "an `if` condition")?;
        let (then_block, then_ty) = self.check_block(&i.then_branch)?;
        let (else_branch, ty) = match &i.else_branch {
            None => {
                if !self.unify(&Ty::unit(), &then_ty) {
                    let (l, e) = match &i.then_branch.stmts.last() {
                        Some(syn::Stmt::Expr(t, None)) => (expr_start(t), expr_end(t)),
                        _ => (loc, end),
                    };
                    return Err(error(
                        format!(
                            "this `if` has no `else`, so its block cannot give a value (it gives `{}`)",
                            self.show(&then_ty)
                        ),
                        l,
                        e,
                        "value of an `if` without `else`",
                    )
                    .map_note("add an `else` branch, or end the value with `;`"));
                }
                (None, Ty::unit())
            }
            Some((_, else_expr)) => {
                let else_checked = self.check_expr(else_expr)?;
                if !self.unify(&then_ty, &else_checked.ty) {
                    return Err(error(
                        format!(
                            "`if` and `else` have different types: `{}` and `{}`",
                            self.show(&then_ty),
                            self.show(&else_checked.ty)
                        ),
                        expr_start(else_expr),
                        expr_end(else_expr),
                        format!("expected `{}`", self.show(&then_ty)),
                    ));
                }
                let ty = if then_ty == Ty::Never {
                    else_checked.ty.clone()
                } else {
                    then_ty
                };
                (Some(Box::new(else_checked)), ty)
            }
        };
        Ok(mk(
            ExprKind::If {
                cond: Box::new(cond),
                then_block,
                else_branch,
            },
            ty,
            loc,
        ))
    }

    pub(super) fn check_loop_body(&mut self, body: &syn::Block) -> CheckResult<hir::Block> {
        let (block, ty) = self.check_block(body)?;
        if !self.unify(&Ty::unit(), &ty) {
            let (l, e) = match &body.stmts.last() {
                Some(syn::Stmt::Expr(t, None)) => (expr_start(t), expr_end(t)),
                _ => (
                    start_of(body.brace_token.span.open()),
                    end_of(body.brace_token.span.close()),
                ),
            };
            return Err(error(
                format!(
                    "a loop body cannot give a value (this gives `{}`)",
                    self.show(&ty)
                ),
                l,
                e,
                "value at the end of a loop body",
            )
            .map_note("end it with `;`, or use `break value` inside `loop`"));
        }
        Ok(block)
    }

    /// `for var in start..end` (or `..=`): integer bounds of one type.
    pub(super) fn check_for(&mut self, f: &syn::ExprForLoop, loc: Loc) -> CheckResult<Expr> {
        if let Some(label) = &f.label {
            return Err(unsupported(
                "a loop label",
                start_of(label.name.apostrophe),
                end_of(label.name.ident.span()),
            ));
        }
        let range_expr = peel(&f.expr);
        let syn::Expr::Range(range) = range_expr else {
            return Err(error(
                "`for` loops run over integer ranges `a..b` or `a..=b` only",
                expr_start(&f.expr),
                expr_end(&f.expr),
                "not a range",
            ));
        };
        let (Some(start), Some(stop)) = (&range.start, &range.end) else {
            return Err(error(
                "a `for` range needs both bounds: `a..b` or `a..=b`",
                expr_start(&f.expr),
                expr_end(&f.expr),
                "open range",
            ));
        };
        let inclusive = matches!(range.limits, syn::RangeLimits::Closed(_));
        let start_checked = self.check_expr(start)?;
        let stop_checked = self.check_expr(stop)?;
        let var_ty = self.range_type([
            (&start_checked, expr_end(start)),
            (&stop_checked, expr_end(stop)),
        ])?;
        let var = self.open_for_scope(&f.pat, var_ty)?;
        self.loops.push(LoopContext {
            kind: LoopKind::For,
            break_ty: None,
        });
        let body = self.check_loop_body(&f.body);
        self.loops.pop();
        self.scopes.pop();
        let body = body?;
        Ok(mk(
            ExprKind::For {
                var,
                start: Box::new(start_checked),
                end: Box::new(stop_checked),
                inclusive,
                body,
            },
            Ty::unit(),
            loc,
        ))
    }

    /// The type of a `for` range with the bounds `bounds` (each with the end
    /// of its text): the integer type both share (`i64` when neither says).
    fn range_type(&mut self, bounds: [(&Expr, Loc); 2]) -> CheckResult<Ty> {
        let mut bound_ty: Option<TensorTy> = None;
        for (b, bend) in bounds {
            if b.ty == Ty::Never {
                continue;
            }
            let ok = matches!(&b.ty, Ty::Tensor(t) if t.is_scalar() && self.class(t) == Class::Int);
            if !ok {
                return Err(error(
                    format!(
                        "a `for` range needs integer bounds, but this is `{}`",
                        self.show(&b.ty)
                    ),
                    b.loc,
                    bend,
                    "expected an integer",
                ));
            }
            if let Ty::Tensor(t) = &b.ty {
                match &bound_ty {
                    None => bound_ty = Some(t.clone()),
                    Some(prev) => {
                        if !self.unify_tensor(prev, t) {
                            return Err(error(
                                format!(
                                    "the bounds of a range must have one type, found `{}` and `{}`",
                                    self.show_tensor(prev),
                                    self.show_tensor(t)
                                ),
                                b.loc,
                                bend,
                                format!("expected `{}`", self.show_tensor(prev)),
                            )
                            .map_note("convert one bound with `as`"));
                        }
                    }
                }
            }
        }
        Ok(Ty::Tensor(
            bound_ty.unwrap_or_else(|| TensorTy::scalar(ScalarType::I64)),
        ))
    }

    /// Opens the scope of a `for` loop and declares its variable `pat` (a
    /// name or `_`) of type `var_ty` in it.
    fn open_for_scope(&mut self, pat: &syn::Pat, var_ty: Ty) -> CheckResult<hir::LocalId> {
        self.scopes.push(Vec::new());
        let var = match pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => self.declare_local(
                &p.ident.to_string(),
                var_ty,
                p.mutability.is_some(),
                start_of(p.ident.span()),
            ),
            syn::Pat::Wild(w) => {
                self.declare_local("_", var_ty, false, start_of(w.underscore_token.span))
            }
            other => {
                self.scopes.pop();
                let (l, e) = pattern_range(other);
                return Err(
                    unsupported("this `for` pattern", l, e).map_note("write `for i in a..b`")
                );
            }
        };
        Ok(var)
    }

    /// `while cond { body }`.
    pub(super) fn check_while(&mut self, w: &syn::ExprWhile, loc: Loc) -> CheckResult<Expr> {
        if let Some(label) = &w.label {
            return Err(unsupported(
                "a loop label",
                start_of(label.name.apostrophe),
                end_of(label.name.ident.span()),
            ));
        }
        if let syn::Expr::Let(l) = &*w.cond {
            let s = l.let_token.span;
            return Err(unsupported(
                "`while let`",
                start_of(w.while_token.span),
                end_of(s),
            ));
        }
        let cond = self.check_condition(&w.cond, "a `while` condition")?;
        self.loops.push(LoopContext {
            kind: LoopKind::While,
            break_ty: None,
        });
        let body = self.check_loop_body(&w.body);
        self.loops.pop();
        let body = body?;
        Ok(mk(
            ExprKind::While {
                cond: Box::new(cond),
                body,
            },
            Ty::unit(),
            loc,
        ))
    }

    /// `loop { body }`: its type is that of its `break`s (`!` without one).
    pub(super) fn check_loop(&mut self, l: &syn::ExprLoop, loc: Loc) -> CheckResult<Expr> {
        if let Some(label) = &l.label {
            return Err(unsupported(
                "a loop label",
                start_of(label.name.apostrophe),
                end_of(label.name.ident.span()),
            ));
        }
        self.loops.push(LoopContext {
            kind: LoopKind::Loop,
            break_ty: None,
        });
        let body = self.check_loop_body(&l.body);
        let context = self.loops.pop();
        let body = body?;
        let ty = context.and_then(|c| c.break_ty).unwrap_or(Ty::Never);
        Ok(mk(ExprKind::Loop { body }, ty, loc))
    }

    /// `break` or `break value` (inside `loop` only), whose values must agree.
    pub(super) fn check_break(
        &mut self,
        b: &syn::ExprBreak,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if let Some(label) = &b.label {
            return Err(unsupported(
                "a labeled `break`",
                loc,
                end_of(label.ident.span()),
            ));
        }
        let Some(kind) = self.loops.last().map(|l| l.kind) else {
            return Err(error(
                "`break` outside of a loop",
                loc,
                end,
                "not inside a loop",
            ));
        };
        let value = match &b.expr {
            None => None,
            Some(v) => {
                if kind != LoopKind::Loop {
                    return Err(error(
                        "`break` with a value is only allowed inside `loop`",
                        loc,
                        end,
                        "cannot break with a value here",
                    )
                    .map_note("`while` and `for` loops have no value"));
                }
                Some(Box::new(self.check_expr(v)?))
            }
        };
        let value_ty = value
            .as_ref()
            .map(|v| v.ty.clone())
            .unwrap_or_else(Ty::unit);
        let previous = self.loops.last().and_then(|l| l.break_ty.clone());
        match previous {
            None => {
                if let Some(l) = self.loops.last_mut() {
                    if value_ty != Ty::Never {
                        l.break_ty = Some(value_ty);
                    }
                }
            }
            Some(prev) => {
                if !self.unify(&prev, &value_ty) {
                    return Err(error(
                        format!(
                            "mismatched types: this `break` gives `{}`, but an earlier `break` of the same loop gives `{}`",
                            self.show(&value_ty),
                            self.show(&prev)
                        ),
                        loc,
                        end,
                        format!("expected `{}`", self.show(&prev)),
                    ));
                }
            }
        }
        Ok(mk(ExprKind::Break { value }, Ty::Never, loc))
    }

    pub(super) fn check_continue(
        &mut self,
        c: &syn::ExprContinue,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if let Some(label) = &c.label {
            return Err(unsupported(
                "a labeled `continue`",
                loc,
                end_of(label.ident.span()),
            ));
        }
        if self.loops.is_empty() {
            return Err(error(
                "`continue` outside of a loop",
                loc,
                end,
                "not inside a loop",
            ));
        }
        Ok(mk(ExprKind::Continue, Ty::Never, loc))
    }

    /// `return` or `return value`, of the function's result type.
    pub(super) fn check_return(
        &mut self,
        r: &syn::ExprReturn,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let value = match &r.expr {
            None => None,
            Some(v) => Some(Box::new(self.check_expr(v)?)),
        };
        let value_ty = value
            .as_ref()
            .map(|v| v.ty.clone())
            .unwrap_or_else(Ty::unit);
        let ret = self.ret.clone();
        if !self.unify(&ret, &value_ty) {
            let message = if value.is_none() {
                format!(
                    "`return` without a value, but `{}` returns `{}`",
                    self.name,
                    self.show(&ret)
                )
            } else {
                format!(
                    "mismatched types: `{}` returns `{}`, but this returns `{}`",
                    self.name,
                    self.show(&ret),
                    self.show(&value_ty)
                )
            };
            return Err(error(
                message,
                loc,
                end,
                format!("expected `{}`", self.show(&ret)),
            ));
        }
        Ok(mk(ExprKind::Return { value }, Ty::Never, loc))
    }
}
