//! Assignments: `place = value` and `place op= value`, and the place
//! itself (a `mut` local, then tuple fields and indices, and last perhaps
//! a slice).

use autobatch_types::Loc;

use crate::hir::{BinaryOp, Expr, ExprKind, LocalId, Place, Projection, TensorTy, Ty};
use crate::items::{error, unsupported, CheckResult, MapNote, ModuleName};
use crate::location::{expr_end, expr_start};

use super::{mk, FunctionChecker, MAX_EXPRESSION_DEPTH};

impl FunctionChecker<'_, '_> {
    pub(super) fn check_assign(
        &mut self,
        left: &syn::Expr,
        op: Option<BinaryOp>,
        right: &syn::Expr,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        // Rust evaluates the value before the place; so does the lowering.
        let value = self.check_expr(right)?;
        let (place, place_ty) = self.check_place(left)?;
        let place_start = expr_start(left);
        match op {
            None => {
                if !self.unify(&place_ty, &value.ty) {
                    return Err(error(
                        format!(
                            "mismatched types: cannot assign `{}` to a place of type `{}`",
                            self.show(&value.ty),
                            self.show(&place_ty)
                        ),
                        value.loc,
                        expr_end(right),
                        format!("expected `{}`", self.show(&place_ty)),
                    ));
                }
            }
            Some(op) => {
                let symbol = format!("{}=", op.symbol());
                let place_expr = mk(ExprKind::Tuple(Vec::new()), place_ty.clone(), place_start);
                let signature = op.op().signature();
                let result =
                    self.binary_result(signature, &symbol, &place_expr, &value, loc, end)?;
                if !self.unify(&place_ty, &result) {
                    return Err(error(
                        format!(
                            "mismatched types: `{symbol}` would change `{}` into `{}`",
                            self.show(&place_ty),
                            self.show(&result)
                        ),
                        loc,
                        end,
                        "the result does not fit the place",
                    ));
                }
            }
        }
        Ok(mk(
            ExprKind::Assign {
                place,
                op,
                value: Box::new(value),
            },
            Ty::unit(),
            loc,
        ))
    }

    /// The target of an assignment and its type.
    fn check_place(&mut self, e: &syn::Expr) -> CheckResult<(Place, Ty)> {
        let (loc, end) = (expr_start(e), expr_end(e));
        let (root, steps) = place_steps(e)?;
        let local = self.place_root(root, loc, end)?;
        let mut ty = self.locals[local.0 as usize].ty.clone();
        let mut projections = Vec::new();
        for step in steps.iter().rev() {
            if let Some(Projection::Slice { .. }) = projections.last() {
                return Err(error(
                    "a slice in a place must be its last step",
                    expr_start(step),
                    expr_end(step),
                    "a step after a slice",
                )
                .map_note("assign to the item itself (`a[i + k] = x`, or `m[i][j..j + N] = v` for a row's items)"));
            }
            let (projection, projected) = self.check_projection(step, &ty)?;
            projections.push(projection);
            ty = projected;
        }
        Ok((
            Place {
                local,
                projections,
                loc,
            },
            ty,
        ))
    }

    /// The `mut` local that the place `loc..end` starts from, named by `root`.
    fn place_root(&self, root: &syn::Expr, loc: Loc, end: Loc) -> CheckResult<LocalId> {
        let (rl, re) = (expr_start(root), expr_end(root));
        let name = match root {
            syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
            syn::Expr::Tuple(_) => {
                return Err(unsupported("destructuring assignment", rl, re)
                    .map_note("assign each variable separately, or use `let (a, b) = ...`"))
            }
            _ => None,
        };
        let Some(name) = name else {
            return Err(error(
                "cannot assign to this expression",
                rl,
                re,
                "not a variable",
            ));
        };
        let Some(local) = self.lookup_local(&name) else {
            let message = match self.scope.names.get(&name).map(|(k, _)| *k) {
                Some(ModuleName::Static(_)) => {
                    format!("cannot assign to the static `{name}`; statics are read-only")
                }
                Some(ModuleName::Const) => format!("cannot assign to the constant `{name}`"),
                Some(_) => format!("cannot assign to the function `{name}`"),
                None if self.const_params.contains(&name) => {
                    format!("cannot assign to the const generic parameter `{name}`")
                }
                None => format!("cannot find variable `{name}` in this scope"),
            };
            return Err(error(message, rl, re, "cannot assign here"));
        };
        let info = &self.locals[local.0 as usize];
        if !info.mutable {
            let declared = info.loc;
            return Err(error(
                format!("cannot assign to `{name}`, which is not declared `mut`"),
                loc,
                end,
                "assignment to an immutable variable",
            )
            .map_note(format!(
                "declare it as `mut {name}` (line {}, column {})",
                declared.line, declared.column
            )));
        }
        Ok(local)
    }

    /// One step of a place (`.0` or `[i]`) applied to a value of type `ty`:
    /// the projection and the type it gives.
    fn check_projection(&mut self, step: &syn::Expr, ty: &Ty) -> CheckResult<(Projection, Ty)> {
        match step {
            syn::Expr::Field(f) => {
                let syn::Member::Unnamed(index) = &f.member else {
                    return Err(error(
                        "fields by name do not exist in autobatch (there are no structs)",
                        expr_start(step),
                        expr_end(step),
                        "named field",
                    ));
                };
                let index = index.index as usize;
                match ty {
                    Ty::Tuple(items) if index < items.len() => {
                        Ok((Projection::Field(index), items[index].clone()))
                    }
                    other => Err(error(
                        format!("`.{index}` is not a field of `{}`", self.show(other)),
                        expr_start(step),
                        expr_end(step),
                        "no such field",
                    )),
                }
            }
            syn::Expr::Index(i) => {
                let t = match ty {
                    Ty::Tensor(t) if !t.is_scalar() => t.clone(),
                    other => {
                        return Err(error(
                            format!("cannot index into a value of type `{}`", self.show(other)),
                            expr_start(&i.expr),
                            expr_end(&i.expr),
                            "not an array",
                        ))
                    }
                };
                if let syn::Expr::Range(range) = &*i.index {
                    let at = (expr_start(&i.index), expr_end(&i.index));
                    let (start, len) = self.slice_range(range, at)?;
                    self.integer_operand(&start, start.loc, "a slice's start")?;
                    return Ok((
                        Projection::Slice { start, len },
                        super::slice::sliced(&t, len),
                    ));
                }
                let index = self.check_expr(&i.index)?;
                self.integer_operand(&index, expr_end(&i.index), "an index")?;
                let element = Ty::Tensor(TensorTy {
                    elem: t.elem,
                    dims: t.dims[1..].to_vec(),
                    var: t.var,
                });
                Ok((Projection::Index(index), element))
            }
            other => Err(error(
                "cannot assign to this expression",
                expr_start(other),
                expr_end(other),
                "not a place",
            )),
        }
    }
}

/// The operation of a compound assignment (`+=` gives `Add`), or `None` for
/// any other operator.
pub(super) fn compound_assignment(op: &syn::BinOp) -> Option<BinaryOp> {
    use syn::BinOp as B;
    Some(match op {
        B::AddAssign(_) => BinaryOp::Add,
        B::SubAssign(_) => BinaryOp::Sub,
        B::MulAssign(_) => BinaryOp::Mul,
        B::DivAssign(_) => BinaryOp::Div,
        B::RemAssign(_) => BinaryOp::Rem,
        B::BitAndAssign(_) => BinaryOp::BitAnd,
        B::BitOrAssign(_) => BinaryOp::BitOr,
        B::BitXorAssign(_) => BinaryOp::BitXor,
        B::ShlAssign(_) => BinaryOp::Shl,
        B::ShrAssign(_) => BinaryOp::Shr,
        _ => return None,
    })
}

/// The root of the place `e` (what its fields and indices apply to) and
/// its steps, outermost first; parentheses are looked through.
fn place_steps(e: &syn::Expr) -> CheckResult<(&syn::Expr, Vec<&syn::Expr>)> {
    let mut steps: Vec<&syn::Expr> = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            syn::Expr::Paren(p) => cur = &p.expr,
            syn::Expr::Group(g) => cur = &g.expr,
            syn::Expr::Field(f) => {
                steps.push(cur);
                cur = &f.base;
            }
            syn::Expr::Index(i) => {
                steps.push(cur);
                cur = &i.expr;
            }
            _ => break,
        }
        if steps.len() > MAX_EXPRESSION_DEPTH {
            return Err(Box::new(crate::guard::too_deep(expr_start(e), expr_end(e))));
        }
    }
    Ok((cur, steps))
}
