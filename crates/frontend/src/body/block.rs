//! Blocks and statements: scopes, `let` with its optional type and its
//! pattern (names, `_`, tuples).

use autobatch_types::Loc;

use crate::hir::{self, Expr, ExprKind, Pattern, Ty};
use crate::items::{error, pattern_range, unsupported, CheckResult, MapNote};
use crate::location::{end_of, expr_end, start_of};

use super::{mk, FunctionChecker, MAX_EXPRESSION_DEPTH};

impl FunctionChecker<'_, '_> {
    pub(super) fn check_block(&mut self, block: &syn::Block) -> CheckResult<(hir::Block, Ty)> {
        if self.depth >= MAX_EXPRESSION_DEPTH {
            let s = block.brace_token.span;
            return Err(Box::new(crate::guard::too_deep(
                start_of(s.open()),
                end_of(s.close()),
            )));
        }
        self.depth += 1;
        self.scopes.push(Vec::new());
        let result = self.check_block_inner(block);
        self.scopes.pop();
        self.depth -= 1;
        result
    }

    fn check_block_inner(&mut self, block: &syn::Block) -> CheckResult<(hir::Block, Ty)> {
        let loc = start_of(block.brace_token.span.open());
        let mut stmts = Vec::new();
        let mut tail = None;
        let mut diverges = false;
        let count = block.stmts.len();
        for (i, stmt) in block.stmts.iter().enumerate() {
            let last = i + 1 == count;
            match stmt {
                syn::Stmt::Local(l) => {
                    let s = self.check_let(l)?;
                    if let hir::Stmt::Let { init, .. } = &s {
                        diverges |= init.ty == Ty::Never;
                    }
                    stmts.push(s);
                }
                syn::Stmt::Item(item) => {
                    let what = match item {
                        syn::Item::Fn(_) => "a function defined inside another function",
                        syn::Item::Const(_) => "a `const` inside a function",
                        _ => "an item inside a function",
                    };
                    let (loc, end, _) = crate::items::item_name_span(item);
                    return Err(unsupported(what, loc, end)
                        .map_note("define it at the top level of the file"));
                }
                syn::Stmt::Expr(e, semi) => {
                    let x = self.check_expr(e)?;
                    if last && semi.is_none() {
                        tail = Some(Box::new(x));
                        continue;
                    }
                    if semi.is_none() && !self.unify(&Ty::unit(), &x.ty) {
                        return Err(error(
                            format!(
                                "mismatched types: expected `()`, found `{}`",
                                self.show(&x.ty)
                            ),
                            x.loc,
                            expr_end(e),
                            "this value is not used",
                        )
                        .map_note(
                            "add `;` after it, or make it the last expression of the block",
                        ));
                    }
                    diverges |= x.ty == Ty::Never;
                    stmts.push(hir::Stmt::Expr(x));
                }
                syn::Stmt::Macro(m) => {
                    let (l, e) = (
                        crate::location::path_start(&None, &m.mac.path),
                        end_of(match &m.mac.delimiter {
                            syn::MacroDelimiter::Paren(p) => p.span.close(),
                            syn::MacroDelimiter::Brace(b) => b.span.close(),
                            syn::MacroDelimiter::Bracket(b) => b.span.close(),
                        }),
                    );
                    let x = self.check_macro(&m.mac, l, e)?;
                    stmts.push(hir::Stmt::Expr(x));
                }
            }
        }
        let ty = match &tail {
            Some(t) => t.ty.clone(),
            None if diverges => Ty::Never,
            None => Ty::unit(),
        };
        Ok((hir::Block { stmts, tail, loc }, ty))
    }

    fn check_let(&mut self, l: &syn::Local) -> CheckResult<hir::Stmt> {
        let loc = start_of(l.let_token.span);
        let Some(init) = &l.init else {
            return Err(error(
                "`let` without a value is not supported; give the variable its first value here",
                loc,
                end_of(l.semi_token.span),
                "missing `= value`",
            ));
        };
        if let Some((else_token, _)) = &init.diverge {
            return Err(unsupported(
                "`let ... else`",
                start_of(else_token.span),
                end_of(else_token.span),
            ));
        }
        let value = self.check_expr(&init.expr)?;
        let (pat, annotation) = match &l.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            other => (other, None),
        };
        let mut ty = value.ty.clone();
        if let Some(annotation) = annotation {
            let generics = self.const_params.clone();
            let declared = self.scope.resolve_type(annotation, &generics)?;
            if !self.unify(&declared, &value.ty) {
                return Err(error(
                    format!(
                        "mismatched types: expected `{}`, found `{}`",
                        self.show(&declared),
                        self.show(&value.ty)
                    ),
                    value.loc,
                    expr_end(&init.expr),
                    format!("expected `{}`", self.show(&declared)),
                ));
            }
            ty = declared;
        }
        let pattern = self.bind_pattern(pat, &ty, 0)?;
        Ok(hir::Stmt::Let {
            pattern,
            init: value,
            loc,
        })
    }

    fn bind_pattern(&mut self, pat: &syn::Pat, ty: &Ty, depth: usize) -> CheckResult<Pattern> {
        let (pl, pe) = pattern_range(pat);
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(Box::new(crate::guard::too_deep(pl, pe)));
        }
        match pat {
            syn::Pat::Ident(p) => {
                if let Some(b) = &p.by_ref {
                    return Err(unsupported(
                        "`ref` bindings",
                        start_of(b.span),
                        end_of(b.span),
                    ));
                }
                if let Some((at, _)) = &p.subpat {
                    return Err(unsupported(
                        "`@` patterns",
                        start_of(at.span),
                        end_of(at.span),
                    ));
                }
                let name = p.ident.to_string();
                let id = self.declare_local(
                    &name,
                    ty.clone(),
                    p.mutability.is_some(),
                    start_of(p.ident.span()),
                );
                Ok(Pattern::Bind(id))
            }
            syn::Pat::Wild(_) => Ok(Pattern::Wildcard),
            syn::Pat::Paren(p) => self.bind_pattern(&p.pat, ty, depth + 1),
            syn::Pat::Tuple(t) => {
                let items: Vec<Ty> = match ty {
                    Ty::Tuple(items) if items.len() == t.elems.len() => items.clone(),
                    Ty::Never => vec![Ty::Never; t.elems.len()],
                    other => {
                        return Err(error(
                            format!(
                                "mismatched types: a pattern of {} element(s) cannot take a value of type `{}`",
                                t.elems.len(),
                                self.show(other)
                            ),
                            pl,
                            pe,
                            format!("this value is `{}`", self.show(other)),
                        ))
                    }
                };
                let mut out = Vec::new();
                for (p, t) in t.elems.iter().zip(&items) {
                    if matches!(p, syn::Pat::Rest(_)) {
                        let (rl, re) = pattern_range(p);
                        return Err(unsupported("`..` in a tuple pattern", rl, re));
                    }
                    out.push(self.bind_pattern(p, t, depth + 1)?);
                }
                Ok(Pattern::Tuple(out))
            }
            _ => Err(unsupported("this pattern", pl, pe)
                .map_note("patterns are names, `_` and tuples of them")),
        }
    }

    /// `{ ... }` as an expression (a labeled block is rejected).
    pub(super) fn check_block_expr(&mut self, b: &syn::ExprBlock, loc: Loc) -> CheckResult<Expr> {
        if let Some(label) = &b.label {
            return Err(unsupported(
                "a labeled block",
                start_of(label.name.apostrophe),
                end_of(label.name.ident.span()),
            ));
        }
        let (block, ty) = self.check_block(&b.block)?;
        Ok(mk(ExprKind::Block(block), ty, loc))
    }
}
