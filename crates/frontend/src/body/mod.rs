//! Checking of function bodies: name resolution, type inference for
//! unsuffixed literals, shape checks, mutability, loops and returns. Builds
//! the HIR of one function.
//!
//! Types are checked as in Rust, except that inference is limited to what
//! this language needs: the element type of an unsuffixed literal is an
//! inference variable (of integer or float kind) that is fixed by what the
//! literal meets anywhere in the function, and defaults to `i64` / `f64`.
//! Everything else (array lengths, tuple shapes) is known where it is written.
//!
//! This module holds the checker of one function (locals, scopes, loop
//! contexts) and its entry point; the rest is split by concern: [`infer`]
//! (element types, unification), [`expr`] (operators, literals, indexing,
//! arrays), [`control`] (conditions and loops), [`place`] (assignments),
//! [`call`] (calls, `catch`, `grad`), [`instance`] (`join`, `map`,
//! `pfor`), [`builtin`] (builtin methods and functions), [`library`] (the
//! distributions and compound special functions), [`block`] (blocks, `let`, patterns), [`finalize`] (fixing the
//! inferred types once the body is checked).

mod block;
mod builtin;
mod call;
mod control;
mod expr;
mod finalize;
mod infer;
mod instance;
mod library;
mod place;
mod slice;

use autobatch_types::{Loc, ScalarType};

use crate::hir::{self, Expr, ExprKind, LocalId, TensorTy, Ty};
use crate::items::{error, CheckResult, MapNote, ModuleScope, Signature};
use crate::location::{end_of, expr_end, expr_start, start_of};
use crate::Diagnostic;

use infer::{Elem, ElemVar};

/// How deeply expressions may nest (not counting the left operands of a chain
/// of binary operators, which are bounded by [`MAX_CHAIN_LENGTH`]).
pub(crate) const MAX_EXPRESSION_DEPTH: usize = crate::guard::MAX_NESTING;
/// How many binary operators may follow each other (`a + b + c + ...`).
pub(crate) const MAX_CHAIN_LENGTH: usize = 10_000;
/// The error of generic arguments (`f::<3>`) given to `subject` (e.g.
/// "`catch`"), which takes none; the caller may add a note.
fn no_generic_arguments(
    subject: &str,
    turbofish: &syn::AngleBracketedGenericArguments,
) -> Box<Diagnostic> {
    error(
        format!("{subject} takes no generic arguments"),
        start_of(turbofish.lt_token.span),
        end_of(turbofish.gt_token.span),
        "unexpected `::<...>`",
    )
}

fn too_long(loc: Loc, end: Loc) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::new(
            format!("expression too long (more than {MAX_CHAIN_LENGTH} operators in a row)"),
            loc,
            end,
            "too long",
        )
        .with_note("split the expression into several `let` statements"),
    )
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum LoopKind {
    Loop,
    While,
    For,
}

struct LoopContext {
    kind: LoopKind,
    break_ty: Option<Ty>,
}

/// A check that needs the final element type: negation and `abs` of an
/// unsigned integer.
struct SignedCheck {
    ty: TensorTy,
    loc: Loc,
    end: Loc,
    what: String,
}

struct FunctionChecker<'s, 'a> {
    scope: &'s mut ModuleScope<'a>,
    name: String,
    const_params: Vec<String>,
    ret: Ty,
    locals: Vec<hir::Local>,
    scopes: Vec<Vec<(String, LocalId)>>,
    vars: Vec<ElemVar>,
    loops: Vec<LoopContext>,
    depth: usize,
    chain: usize,
    signed_checks: Vec<SignedCheck>,
}

/// Checks one function body against its signature (`scope.signatures[index]`).
pub(crate) fn check_function(
    scope: &mut ModuleScope,
    index: usize,
    item: &syn::ItemFn,
) -> CheckResult<hir::Function> {
    let sig: Signature = scope.signatures[index].clone();
    let mut checker = FunctionChecker {
        scope,
        name: sig.name.clone(),
        const_params: sig.const_params.clone(),
        ret: sig.ret.clone(),
        locals: Vec::new(),
        scopes: vec![Vec::new()],
        vars: Vec::new(),
        loops: Vec::new(),
        depth: 0,
        chain: 0,
        signed_checks: Vec::new(),
    };
    let mut params = Vec::new();
    for (name, mutable, ty, loc) in &sig.params {
        params.push(checker.declare_local(name, ty.clone(), *mutable, *loc));
    }
    let (mut body, body_ty) = checker.check_block(&item.block)?;
    if !sig.ret.is_unit() && body_ty != Ty::Never && (body.tail.is_none() || body_ty.is_unit()) {
        let close = item.block.brace_token.span.close();
        return Err(error(
            format!(
                "function `{}` must return a value of type `{}`, but its body can end without one",
                sig.name,
                checker.show(&sig.ret)
            ),
            start_of(close),
            end_of(close),
            format!("the body can reach its end here without a value of type `{}`", checker.show(&sig.ret)),
        )
        .map_note("end the body with an expression of that type (no `;` after it) or `return` a value on every path"));
    }
    if !checker.unify(&sig.ret, &body_ty) {
        let (loc, end) = match &item.block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => (expr_start(e), expr_end(e)),
            _ => (sig.loc, sig.name_end),
        };
        return Err(error(
            format!(
                "mismatched types: `{}` returns `{}`, but its body ends with a value of type `{}`",
                sig.name,
                checker.show(&sig.ret),
                checker.show(&body_ty)
            ),
            loc,
            end,
            format!("expected `{}`", checker.show(&sig.ret)),
        ));
    }
    checker.finalize_block(&mut body)?;
    let mut locals = std::mem::take(&mut checker.locals);
    for local in &mut locals {
        checker.resolve_ty(&mut local.ty);
    }
    for check in std::mem::take(&mut checker.signed_checks) {
        if checker.elem(&check.ty) == Elem::Known(ScalarType::Usize) {
            return Err(error(
                format!(
                    "cannot apply {} to a `usize`, which has no sign",
                    check.what
                ),
                check.loc,
                check.end,
                "unsigned value",
            ));
        }
    }
    Ok(hir::Function {
        name: sig.name,
        const_params: sig.const_params,
        params,
        ret: sig.ret,
        body,
        locals,
        loc: sig.loc,
    })
}

fn mk(kind: ExprKind, ty: Ty, loc: Loc) -> Expr {
    Expr { kind, ty, loc }
}

fn bool_ty() -> Ty {
    Ty::scalar(ScalarType::Bool)
}

fn usize_ty() -> Ty {
    Ty::scalar(ScalarType::Usize)
}

impl FunctionChecker<'_, '_> {
    fn declare_local(&mut self, name: &str, ty: Ty, mutable: bool, loc: Loc) -> LocalId {
        let id = LocalId(self.locals.len() as u32);
        self.locals.push(hir::Local {
            name: name.to_string(),
            ty,
            mutable,
            loc,
        });
        if name != "_" {
            if let Some(scope) = self.scopes.last_mut() {
                scope.push((name.to_string(), id));
            }
        }
        id
    }

    fn lookup_local(&self, name: &str) -> Option<LocalId> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
    }
}

/// Strips parentheses and invisible groups.
fn peel(e: &syn::Expr) -> &syn::Expr {
    let mut e = e;
    for _ in 0..MAX_EXPRESSION_DEPTH {
        match e {
            syn::Expr::Paren(p) => e = &p.expr,
            syn::Expr::Group(g) => e = &g.expr,
            _ => break,
        }
    }
    e
}
