//! Checking of function bodies: name resolution, type inference for
//! unsuffixed literals, shape checks, mutability, loops and returns. Builds
//! the HIR of one function.
//!
//! Types are checked as in Rust, except that inference is limited to what
//! this language needs: the element type of an unsuffixed literal is an
//! inference variable (of integer or float kind) that is fixed by what the
//! literal meets anywhere in the function, and defaults to `i64` / `f64`.
//! Everything else (array lengths, tuple shapes) is known where it is written.

use autobatch_ops::Signature as OpSignature;
use autobatch_types::{Loc, ScalarType};

use crate::diagnostic::source_text;
use crate::hir::{
    self, BinaryOp, Builtin, CompareOp, DimExpr, Expr, ExprKind, Literal, LocalId, Pattern, Place,
    Projection, TensorTy, Ty, UnaryOp,
};
use crate::items::{
    error, float_literal_value, path_text, pattern_range, read_float_literal, read_int_literal,
    unsupported, CheckResult, MapNote, ModuleName, ModuleScope, NumberLiteral, Signature,
};
use crate::location::{end_of, expr_end, expr_start, path_end, path_start, start_of, type_range};

/// How deeply expressions may nest (not counting the left operands of a chain
/// of binary operators, which are bounded by [`MAX_CHAIN_LENGTH`]).
pub(crate) const MAX_EXPRESSION_DEPTH: usize = crate::guard::MAX_NESTING;
/// How many binary operators may follow each other (`a + b + c + ...`).
pub(crate) const MAX_CHAIN_LENGTH: usize = 10_000;

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

use crate::Diagnostic;

/// The state of one element-type inference variable (union-find).
struct ElemVar {
    parent: u32,
    float: bool,
    value: Option<ScalarType>,
}

/// An element type during inference.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Elem {
    Known(ScalarType),
    /// An unresolved variable (its root) and whether it is of float kind.
    Var(u32, bool),
}

/// The class of an element type, as far as it is known.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Class {
    Bool,
    Int,
    Float,
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
    // -----------------------------------------------------------------------
    // Locals and scopes

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

    // -----------------------------------------------------------------------
    // Inference

    fn fresh(&mut self, float: bool) -> TensorTy {
        let id = self.vars.len() as u32;
        self.vars.push(ElemVar {
            parent: id,
            float,
            value: None,
        });
        TensorTy {
            elem: if float {
                ScalarType::F64
            } else {
                ScalarType::I64
            },
            dims: Vec::new(),
            var: Some(id),
        }
    }

    fn root(&self, mut v: u32) -> u32 {
        while self.vars[v as usize].parent != v {
            v = self.vars[v as usize].parent;
        }
        v
    }

    fn elem(&self, t: &TensorTy) -> Elem {
        match t.var {
            None => Elem::Known(t.elem),
            Some(v) => {
                let r = self.root(v);
                let var = &self.vars[r as usize];
                match var.value {
                    Some(s) => Elem::Known(s),
                    None => Elem::Var(r, var.float),
                }
            }
        }
    }

    fn class(&self, t: &TensorTy) -> Class {
        match self.elem(t) {
            Elem::Known(ScalarType::Bool) => Class::Bool,
            Elem::Known(s) if s.is_float() => Class::Float,
            Elem::Known(_) => Class::Int,
            Elem::Var(_, true) => Class::Float,
            Elem::Var(_, false) => Class::Int,
        }
    }

    fn unify_elem(&mut self, a: Elem, b: Elem) -> bool {
        match (a, b) {
            (Elem::Known(x), Elem::Known(y)) => x == y,
            (Elem::Var(v, float), Elem::Known(s)) | (Elem::Known(s), Elem::Var(v, float)) => {
                let fits = if float { s.is_float() } else { s.is_integer() };
                if fits {
                    self.vars[v as usize].value = Some(s);
                }
                fits
            }
            (Elem::Var(v, fv), Elem::Var(w, fw)) => {
                if fv != fw {
                    return false;
                }
                if v != w {
                    self.vars[v as usize].parent = w;
                }
                true
            }
        }
    }

    fn unify_tensor(&mut self, a: &TensorTy, b: &TensorTy) -> bool {
        a.dims == b.dims && {
            let (ea, eb) = (self.elem(a), self.elem(b));
            self.unify_elem(ea, eb)
        }
    }

    /// Makes `a` and `b` the same type if they can be; `Never` fits anything.
    fn unify(&mut self, a: &Ty, b: &Ty) -> bool {
        match (a, b) {
            (Ty::Never, _) | (_, Ty::Never) => true,
            (Ty::Tensor(x), Ty::Tensor(y)) => self.unify_tensor(x, y),
            (Ty::Tuple(xs), Ty::Tuple(ys)) => {
                xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| self.unify(x, y))
            }
            _ => false,
        }
    }

    fn resolve_tensor(&mut self, t: &mut TensorTy) {
        if let Some(v) = t.var {
            let elem = match self.elem(t) {
                Elem::Known(s) => s,
                Elem::Var(r, float) => {
                    let s = if float {
                        ScalarType::F64
                    } else {
                        ScalarType::I64
                    };
                    self.vars[r as usize].value = Some(s);
                    s
                }
            };
            let _ = v;
            t.elem = elem;
            t.var = None;
        }
    }

    fn resolve_ty(&mut self, ty: &mut Ty) {
        match ty {
            Ty::Tensor(t) => self.resolve_tensor(t),
            Ty::Tuple(items) => items.iter_mut().for_each(|t| self.resolve_ty(t)),
            Ty::Never => {}
        }
    }

    // -----------------------------------------------------------------------
    // Showing types

    fn show(&self, ty: &Ty) -> String {
        self.show_with(ty, &self.const_params)
    }

    fn show_with(&self, ty: &Ty, generics: &[String]) -> String {
        match ty {
            Ty::Never => "!".to_string(),
            Ty::Tuple(items) => {
                let parts: Vec<String> =
                    items.iter().map(|t| self.show_with(t, generics)).collect();
                if parts.len() == 1 {
                    format!("({},)", parts[0])
                } else {
                    format!("({})", parts.join(", "))
                }
            }
            Ty::Tensor(t) => self.show_tensor_with(t, generics),
        }
    }

    fn show_tensor(&self, t: &TensorTy) -> String {
        self.show_tensor_with(t, &self.const_params)
    }

    /// Like `show_tensor`, but an unsuffixed literal's type is shown as the
    /// type it defaults to; for messages about shapes, where the element
    /// type is not the point.
    fn show_shape(&self, t: &TensorTy) -> String {
        let mut t = t.clone();
        if let Elem::Var(_, float) = self.elem(&t) {
            t.elem = if float {
                ScalarType::F64
            } else {
                ScalarType::I64
            };
            t.var = None;
        }
        self.show_tensor(&t)
    }

    fn show_tensor_with(&self, t: &TensorTy, generics: &[String]) -> String {
        let elem = match self.elem(t) {
            Elem::Known(s) => s.name().to_string(),
            Elem::Var(_, true) => "{float}".to_string(),
            Elem::Var(_, false) => "{integer}".to_string(),
        };
        let mut out = String::new();
        for _ in &t.dims {
            out.push('[');
        }
        out.push_str(&elem);
        for d in t.dims.iter().rev() {
            out.push_str("; ");
            out.push_str(&self.show_dim(*d, generics));
            out.push(']');
        }
        out
    }

    fn show_dim(&self, d: DimExpr, generics: &[String]) -> String {
        match d {
            DimExpr::Fixed(n) => n.to_string(),
            DimExpr::Symbol(s) => self
                .scope
                .symbols
                .get(s.0 as usize)
                .cloned()
                .unwrap_or_else(|| "?".into()),
            DimExpr::Generic(i) => generics
                .get(i as usize)
                .cloned()
                .unwrap_or_else(|| "?".into()),
        }
    }

    // -----------------------------------------------------------------------
    // Expressions

    fn check_expr(&mut self, e: &syn::Expr) -> CheckResult<Expr> {
        if self.depth >= MAX_EXPRESSION_DEPTH {
            return Err(Box::new(crate::guard::too_deep(expr_start(e), expr_end(e))));
        }
        self.depth += 1;
        let result = self.check_expr_inner(e);
        self.depth -= 1;
        result
    }

    /// The left operand of a binary operator: long left-leaning chains such
    /// as `1 + 1 + ... + 1` are bounded separately from nesting depth.
    /// `start` is where the operator expression starts, which is also where
    /// its left operand starts (finding it again at every level of a long
    /// chain would take quadratic time).
    fn check_chain_operand(&mut self, e: &syn::Expr, start: Loc) -> CheckResult<Expr> {
        if self.chain >= MAX_CHAIN_LENGTH {
            return Err(too_long(start, expr_end(e)));
        }
        self.chain += 1;
        let result = self.check_expr_at(e, Some(start));
        self.chain -= 1;
        result
    }

    fn tensor_of(&self, e: &Expr, end: Loc, what: &str) -> CheckResult<TensorTy> {
        match &e.ty {
            Ty::Tensor(t) => Ok(t.clone()),
            other => Err(error(
                format!(
                    "{what} needs a number or an array, found `{}`",
                    self.show(other)
                ),
                e.loc,
                end,
                format!("this is `{}`", self.show(other)),
            )),
        }
    }

    fn check_expr_inner(&mut self, e: &syn::Expr) -> CheckResult<Expr> {
        self.check_expr_at(e, None)
    }

    fn check_expr_at(&mut self, e: &syn::Expr, start: Option<Loc>) -> CheckResult<Expr> {
        use syn::Expr as E;
        let (loc, end) = (start.unwrap_or_else(|| expr_start(e)), expr_end(e));
        match e {
            E::Lit(l) => self.check_literal(&l.lit, loc, end, false),
            E::Path(p) => self.check_path(p, loc, end),
            E::Paren(p) => self.check_expr(&p.expr),
            E::Group(g) => self.check_expr(&g.expr),
            E::Unary(u) => self.check_unary(u, loc, end),
            E::Binary(b) => self.check_binary(b, loc, end),
            E::Assign(a) => self.check_assign(&a.left, None, &a.right, loc, end),
            E::Cast(c) => self.check_cast(c, loc, end),
            E::Call(c) => self.check_call(c, loc, end),
            E::MethodCall(m) => self.check_method(m, loc, end),
            E::Field(f) => {
                let base = self.check_expr(&f.base)?;
                let member_span = match &f.member {
                    syn::Member::Named(i) => i.span(),
                    syn::Member::Unnamed(i) => i.span,
                };
                let (mloc, mend) = (start_of(member_span), end_of(member_span));
                let syn::Member::Unnamed(index) = &f.member else {
                    return Err(error(
                        "fields by name do not exist in autobatch (there are no structs)",
                        mloc,
                        mend,
                        "named field",
                    )
                    .map_note("tuples have fields `.0`, `.1`, ..."));
                };
                let index = index.index as usize;
                match &base.ty {
                    Ty::Tuple(items) if index < items.len() => {
                        let ty = items[index].clone();
                        Ok(mk(
                            ExprKind::Field {
                                base: Box::new(base),
                                index,
                            },
                            ty,
                            loc,
                        ))
                    }
                    Ty::Tuple(items) => Err(error(
                        format!(
                            "this tuple has {} field(s); there is no field `{index}`",
                            items.len()
                        ),
                        mloc,
                        mend,
                        "no such field",
                    )),
                    Ty::Never => Ok(mk(
                        ExprKind::Field {
                            base: Box::new(base),
                            index,
                        },
                        Ty::Never,
                        loc,
                    )),
                    other => Err(error(
                        format!(
                            "`.{index}` needs a tuple, but this is `{}`",
                            self.show(other)
                        ),
                        loc,
                        end,
                        "not a tuple",
                    )),
                }
            }
            E::Index(i) => {
                let base = self.check_expr(&i.expr)?;
                if let E::Range(r) = &*i.index {
                    let (rl, re) = (expr_start(&i.index), expr_end(&i.index));
                    let _ = r;
                    return Err(unsupported("slicing with a range (`a[i..j]`)", rl, re));
                }
                let index = self.check_expr(&i.index)?;
                self.check_index_types(base, index, loc, end, expr_end(&i.expr), expr_end(&i.index))
            }
            E::Tuple(t) => {
                let mut items = Vec::new();
                let mut tys = Vec::new();
                for elem in &t.elems {
                    let x = self.check_expr(elem)?;
                    tys.push(x.ty.clone());
                    items.push(x);
                }
                Ok(mk(ExprKind::Tuple(items), Ty::Tuple(tys), loc))
            }
            E::Array(a) => {
                if a.elems.is_empty() {
                    return Err(error(
                        "an empty array literal `[]` is not supported",
                        loc,
                        end,
                        "empty array",
                    )
                    .map_note("write an empty array as `[0.0; 0]`"));
                }
                let mut items = Vec::new();
                let mut first: Option<TensorTy> = None;
                for elem in &a.elems {
                    let x = self.check_expr(elem)?;
                    let xend = expr_end(elem);
                    let t = self.tensor_of(&x, xend, "an array element")?;
                    match &first {
                        None => first = Some(t),
                        Some(f) => {
                            if !self.unify_tensor(f, &t) {
                                return Err(error(
                                    format!(
                                        "the elements of an array must have one type; this is `{}`, the first is `{}`",
                                        self.show_tensor(&t),
                                        self.show_tensor(f)
                                    ),
                                    x.loc,
                                    xend,
                                    format!("expected `{}`", self.show_tensor(f)),
                                ));
                            }
                        }
                    }
                    items.push(x);
                }
                let first = first.unwrap_or_else(|| TensorTy::scalar(ScalarType::F64));
                let mut dims = vec![DimExpr::Fixed(items.len() as u64)];
                dims.extend(first.dims.iter().copied());
                let ty = Ty::Tensor(TensorTy {
                    elem: first.elem,
                    dims,
                    var: first.var,
                });
                Ok(mk(ExprKind::Array(items), ty, loc))
            }
            E::Repeat(r) => {
                let element = self.check_expr(&r.expr)?;
                let t = self.tensor_of(&element, expr_end(&r.expr), "an array element")?;
                if let syn::Expr::Path(p) = &*r.len {
                    if let Some(ident) = p.path.get_ident() {
                        let name = ident.to_string();
                        if self.lookup_local(&name).is_some() && !self.const_params.contains(&name)
                        {
                            let (ll, le) = (expr_start(&r.len), expr_end(&r.len));
                            return Err(error(
                                format!(
                                    "the array length `{name}` is a variable; lengths must be known before the program runs"
                                ),
                                ll,
                                le,
                                "a variable cannot be a length",
                            )
                            .map_note("use a number, a `const`, a const generic parameter or a symbolic dimension"));
                        }
                    }
                }
                let generics = self.const_params.clone();
                let len = self.scope.resolve_dim(&r.len, &generics, &|_| false)?;
                let mut dims = vec![len];
                dims.extend(t.dims.iter().copied());
                let repeated = TensorTy {
                    elem: t.elem,
                    dims,
                    var: t.var,
                };
                crate::items::check_array_size(&repeated, loc, expr_end(e))?;
                let ty = Ty::Tensor(repeated);
                Ok(mk(
                    ExprKind::Repeat {
                        element: Box::new(element),
                        len,
                    },
                    ty,
                    loc,
                ))
            }
            E::Block(b) => {
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
            E::If(i) => self.check_if(i, loc, end),
            E::While(w) => {
                if let Some(label) = &w.label {
                    return Err(unsupported(
                        "a loop label",
                        start_of(label.name.apostrophe),
                        end_of(label.name.ident.span()),
                    ));
                }
                if let E::Let(l) = &*w.cond {
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
            E::Loop(l) => {
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
            E::ForLoop(f) => self.check_for(f, loc, end),
            E::Break(b) => {
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
            E::Continue(c) => {
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
            E::Return(r) => {
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
            E::Macro(m) => self.check_macro(&m.mac, loc, end),
            E::Match(_) => Err(unsupported(
                "`match`",
                loc,
                end_of(match e {
                    E::Match(m) => m.match_token.span,
                    _ => proc_macro2::Span::call_site(),
                }),
            )
            .map_note("use `if` / `else if` / `else`")),
            E::Closure(_) => Err(unsupported("a closure", loc, end)),
            E::Reference(_) => Err(unsupported("a reference (`&`)", loc, end)
                .map_note("values are passed by value; arrays are copied as needed")),
            E::RawAddr(_) => Err(unsupported("a raw pointer", loc, end)),
            E::Range(_) => Err(error(
                "ranges (`a..b`) are only allowed in `for` loops",
                loc,
                end,
                "range outside of a `for` loop",
            )),
            E::Struct(_) => Err(unsupported("a struct literal", loc, end)),
            E::Unsafe(_) => Err(unsupported("`unsafe`", loc, end)),
            E::Async(_) => Err(unsupported("`async`", loc, end)),
            E::Await(_) => Err(unsupported("`.await`", loc, end)),
            E::Try(_) => Err(unsupported("the `?` operator", loc, end)),
            E::TryBlock(_) => Err(unsupported("a `try` block", loc, end)),
            E::Yield(_) => Err(unsupported("`yield`", loc, end)),
            E::Const(_) => Err(unsupported("a `const` block", loc, end)),
            E::Infer(_) => Err(unsupported("the placeholder `_` as a value", loc, end)),
            E::Let(_) => Err(unsupported(
                "`let` inside an expression (`if let`, `while let`, let chains)",
                loc,
                end,
            )),
            _ => Err(unsupported("this expression", loc, end)),
        }
    }

    fn check_literal(
        &mut self,
        lit: &syn::Lit,
        loc: Loc,
        end: Loc,
        negate: bool,
    ) -> CheckResult<Expr> {
        match lit {
            syn::Lit::Bool(b) => Ok(mk(
                ExprKind::Literal(Literal::Bool(b.value)),
                bool_ty(),
                loc,
            )),
            syn::Lit::Int(i) => match read_int_literal(i)? {
                NumberLiteral::Int(v, ty) => {
                    let ty = match ty {
                        Some(t) => TensorTy::scalar(t),
                        None => self.fresh(false),
                    };
                    let v = if negate { -v } else { v };
                    Ok(mk(ExprKind::Literal(Literal::Int(v)), Ty::Tensor(ty), loc))
                }
                NumberLiteral::Float(v, ty) => {
                    let ty = match ty {
                        Some(t) => TensorTy::scalar(t),
                        None => self.fresh(true),
                    };
                    let mut literal = float_literal_value(i.base10_digits(), v);
                    if negate {
                        literal = negate_float(literal);
                    }
                    Ok(mk(ExprKind::Literal(literal), Ty::Tensor(ty), loc))
                }
            },
            syn::Lit::Float(f) => {
                let (value, ty) = read_float_literal(f)?;
                let ty = match ty {
                    Some(t) => TensorTy::scalar(t),
                    None => self.fresh(true),
                };
                let mut literal = float_literal_value(f.base10_digits(), value);
                if negate {
                    literal = negate_float(literal);
                }
                Ok(mk(ExprKind::Literal(literal), Ty::Tensor(ty), loc))
            }
            syn::Lit::Str(_) => Err(error(
                "string literals are only allowed as the message of `assert!`",
                loc,
                end,
                "string literal",
            )),
            _ => Err(unsupported("this kind of literal", loc, end)),
        }
    }

    fn check_path(&mut self, p: &syn::ExprPath, loc: Loc, end: Loc) -> CheckResult<Expr> {
        if p.qself.is_some() {
            return Err(unsupported(
                "a qualified path (`<T as Trait>::...`)",
                loc,
                end,
            ));
        }
        if let Some(c) = ModuleScope::well_known_constant(&p.path) {
            return Ok(mk(ExprKind::Literal(c.literal), Ty::scalar(c.ty), loc));
        }
        let Some(ident) = p.path.get_ident() else {
            return Err(error(
                format!("the path `{}` is not supported by autobatch", path_text(&p.path)),
                loc,
                end,
                "paths with `::` are not supported",
            )
            .map_note("name functions, constants and statics directly; well-known constants such as `f64::MAX` and `std::f64::consts::PI` are available"));
        };
        let name = ident.to_string();
        if let Some(id) = self.lookup_local(&name) {
            let ty = self.locals[id.0 as usize].ty.clone();
            return Ok(mk(ExprKind::Local(id), ty, loc));
        }
        if let Some(i) = self.const_params.iter().position(|g| *g == name) {
            return Ok(mk(
                ExprKind::Dim(DimExpr::Generic(i as u32)),
                usize_ty(),
                loc,
            ));
        }
        if let Some(c) = self.scope.consts.get(&name) {
            return Ok(mk(ExprKind::Literal(c.literal), Ty::scalar(c.ty), loc));
        }
        match self.scope.names.get(&name).map(|(k, _)| *k) {
            Some(ModuleName::Static(i)) => {
                let ty = Ty::Tensor(self.scope.statics[i].ty.clone());
                return Ok(mk(ExprKind::Static(i), ty, loc));
            }
            Some(ModuleName::Function(_) | ModuleName::HostFunction) => {
                return Err(error(
                    format!("`{name}` is a function; functions are not values, call it with `{name}(...)`"),
                    loc,
                    end,
                    "a function used as a value",
                ));
            }
            Some(ModuleName::Const) => {
                // A constant whose definition failed: its error is reported already.
                return Err(error(
                    format!("the constant `{name}` has no value"),
                    loc,
                    end,
                    "invalid constant",
                ));
            }
            None => {}
        }
        if let Some(s) = self.scope.symbol_ids.get(&name) {
            return Ok(mk(ExprKind::Dim(DimExpr::Symbol(*s)), usize_ty(), loc));
        }
        Err(error(
            format!("cannot find value `{name}` in this scope"),
            loc,
            end,
            "not found in this scope",
        ))
    }

    fn check_unary(&mut self, u: &syn::ExprUnary, loc: Loc, end: Loc) -> CheckResult<Expr> {
        match u.op {
            syn::UnOp::Neg(_) => {
                // `-5` is one literal, so that `-2147483648_i32` fits.
                if let syn::Expr::Lit(l) = &*u.expr {
                    if matches!(l.lit, syn::Lit::Int(_) | syn::Lit::Float(_)) {
                        return self.check_literal(&l.lit, loc, end, true);
                    }
                }
                let operand = self.check_expr(&u.expr)?;
                if operand.ty == Ty::Never {
                    return Ok(operand);
                }
                let t = self.tensor_of(&operand, end, "`-`")?;
                match self.class(&t) {
                    Class::Bool => {
                        return Err(error(
                            "cannot negate a `bool`; use `!` for logical not",
                            loc,
                            end,
                            "`bool` value",
                        ))
                    }
                    Class::Int => {
                        if self.elem(&t) == Elem::Known(ScalarType::Usize) {
                            return Err(error(
                                "cannot apply `-` to a `usize`, which has no sign",
                                loc,
                                end,
                                "unsigned value",
                            ));
                        }
                        self.signed_checks.push(SignedCheck {
                            ty: t.clone(),
                            loc,
                            end,
                            what: "`-`".into(),
                        });
                    }
                    Class::Float => {}
                }
                Ok(mk(
                    ExprKind::Unary {
                        op: UnaryOp::Neg,
                        operand: Box::new(operand),
                    },
                    Ty::Tensor(t),
                    loc,
                ))
            }
            syn::UnOp::Not(_) => {
                let operand = self.check_expr(&u.expr)?;
                if operand.ty == Ty::Never {
                    return Ok(operand);
                }
                let t = self.tensor_of(&operand, end, "`!`")?;
                if self.class(&t) == Class::Float {
                    return Err(error(
                        format!(
                            "cannot apply `!` to `{}`; `!` needs a `bool` or an integer",
                            self.show_tensor(&t)
                        ),
                        loc,
                        end,
                        "float value",
                    ));
                }
                Ok(mk(
                    ExprKind::Unary {
                        op: UnaryOp::Not,
                        operand: Box::new(operand),
                    },
                    Ty::Tensor(t),
                    loc,
                ))
            }
            syn::UnOp::Deref(_) => Err(unsupported("the dereference operator `*`", loc, end)
                .map_note("there are no references in autobatch")),
            _ => Err(unsupported("this operator", loc, end)),
        }
    }

    fn check_binary(&mut self, b: &syn::ExprBinary, loc: Loc, end: Loc) -> CheckResult<Expr> {
        use syn::BinOp as B;
        if let Some(op) = compound_assignment(&b.op) {
            return self.check_assign(&b.left, Some(op), &b.right, loc, end);
        }
        let op = match b.op {
            B::Add(_) => BinaryOp::Add,
            B::Sub(_) => BinaryOp::Sub,
            B::Mul(_) => BinaryOp::Mul,
            B::Div(_) => BinaryOp::Div,
            B::Rem(_) => BinaryOp::Rem,
            B::BitAnd(_) => BinaryOp::BitAnd,
            B::BitOr(_) => BinaryOp::BitOr,
            B::BitXor(_) => BinaryOp::BitXor,
            B::Shl(_) => BinaryOp::Shl,
            B::Shr(_) => BinaryOp::Shr,
            B::And(_) => return self.check_logical(b, true, loc, end),
            B::Or(_) => return self.check_logical(b, false, loc, end),
            B::Eq(_) => return self.check_compare(b, CompareOp::Eq, loc, end),
            B::Ne(_) => return self.check_compare(b, CompareOp::Ne, loc, end),
            B::Lt(_) => return self.check_compare(b, CompareOp::Lt, loc, end),
            B::Le(_) => return self.check_compare(b, CompareOp::Le, loc, end),
            B::Gt(_) => return self.check_compare(b, CompareOp::Gt, loc, end),
            B::Ge(_) => return self.check_compare(b, CompareOp::Ge, loc, end),
            _ => return Err(unsupported("this operator", loc, end)),
        };
        let lhs = self.check_chain_operand(&b.left, loc)?;
        let rhs = self.check_expr(&b.right)?;
        let signature = op.op().signature();
        let ty = self.binary_result(signature, op.symbol(), &lhs, &rhs, loc, end)?;
        Ok(mk(
            ExprKind::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            ty,
            loc,
        ))
    }

    /// `lhs && rhs` (`and`) or `lhs || rhs`.
    fn check_logical(
        &mut self,
        b: &syn::ExprBinary,
        and: bool,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let lhs = self.check_chain_operand(&b.left, loc)?;
        let rhs = self.check_expr(&b.right)?;
        let word = if and { "&&" } else { "||" };
        for (operand, oend) in [(&lhs, expr_end(&b.left)), (&rhs, end)] {
            if !self.unify(&bool_ty(), &operand.ty) {
                return Err(error(
                    format!(
                        "`{word}` needs `bool` operands, but this is `{}`",
                        self.show(&operand.ty)
                    ),
                    operand.loc,
                    oend,
                    "expected `bool`",
                ));
            }
        }
        let (lhs, rhs) = (Box::new(lhs), Box::new(rhs));
        let kind = if and {
            ExprKind::And { lhs, rhs }
        } else {
            ExprKind::Or { lhs, rhs }
        };
        Ok(mk(kind, bool_ty(), loc))
    }

    /// A comparison: two scalars of one type.
    fn check_compare(
        &mut self,
        b: &syn::ExprBinary,
        op: CompareOp,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let symbol = op.symbol();
        let lhs = self.check_chain_operand(&b.left, loc)?;
        let rhs = self.check_expr(&b.right)?;
        if lhs.ty != Ty::Never && rhs.ty != Ty::Never {
            let lt = self.tensor_of(&lhs, expr_end(&b.left), &format!("`{symbol}`"))?;
            let rt = self.tensor_of(&rhs, end, &format!("`{symbol}`"))?;
            if !lt.is_scalar() || !rt.is_scalar() {
                return Err(error(
                    format!(
                        "comparisons apply to scalars only; cannot compare `{}` with `{}`",
                        self.show_tensor(&lt),
                        self.show_tensor(&rt)
                    ),
                    loc,
                    end,
                    "array operand",
                ));
            }
            if !self.unify_tensor(&lt, &rt) {
                return Err(error(
                    format!(
                        "mismatched types: cannot compare `{}` with `{}`",
                        self.show_tensor(&lt),
                        self.show_tensor(&rt)
                    ),
                    loc,
                    end,
                    format!(
                        "`{}` {symbol} `{}`",
                        self.show_tensor(&lt),
                        self.show_tensor(&rt)
                    ),
                )
                .map_note("convert one side with `as`"));
            }
        }
        Ok(mk(
            ExprKind::Compare {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            bool_ty(),
            loc,
        ))
    }

    /// The type of `lhs op rhs` for an elementwise operation of two operands
    /// of class `signature` (`Arithmetic`, `Bitwise`, `Shift`, `FloatBinary`):
    /// an operator, or a method such as `x.max(y)` (`symbol` `.max`).
    fn binary_result(
        &mut self,
        signature: OpSignature,
        symbol: &str,
        lhs: &Expr,
        rhs: &Expr,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Ty> {
        match (&lhs.ty, &rhs.ty) {
            (Ty::Never, other) | (other, Ty::Never) => return Ok(other.clone()),
            _ => {}
        }
        let what = format!("`{symbol}`");
        let lt = self.tensor_of(lhs, end, &what)?;
        let rt = self.tensor_of(rhs, end, &what)?;
        let (lc, rc) = (self.class(&lt), self.class(&rt));
        if signature == OpSignature::Shift {
            if lc != Class::Int || rc != Class::Int {
                return Err(error(
                    format!(
                        "`{symbol}` needs integer operands, found `{}` and `{}`",
                        self.show_tensor(&lt),
                        self.show_tensor(&rt)
                    ),
                    loc,
                    end,
                    "not integers",
                ));
            }
            if !rt.is_scalar() && rt.dims != lt.dims {
                return Err(error(
                    format!(
                        "shape mismatch: cannot shift `{}` by `{}`",
                        self.show_tensor(&lt),
                        self.show_tensor(&rt)
                    ),
                    loc,
                    end,
                    "shapes differ",
                ));
            }
            return Ok(Ty::Tensor(lt));
        }
        let (ls, rs) = (self.show_tensor(&lt), self.show_tensor(&rt));
        let (el, er) = (self.elem(&lt), self.elem(&rt));
        if !self.unify_elem(el, er) {
            return Err(error(
                format!("mismatched types: cannot apply `{symbol}` to `{ls}` and `{rs}`"),
                loc,
                end,
                format!("`{ls}` {symbol} `{rs}`"),
            )
            .map_note("autobatch never converts numbers implicitly; convert one side with `as`"));
        }
        if !accepts(signature, self.class(&lt)) {
            let need = match signature {
                OpSignature::Bitwise => "`bool` or integer",
                OpSignature::FloatBinary => "float",
                _ => "numeric",
            };
            return Err(error(
                format!("`{symbol}` needs {need} operands, but these are `{ls}`"),
                loc,
                end,
                format!("cannot apply `{symbol}` here"),
            ));
        }
        if lt.is_scalar() {
            Ok(Ty::Tensor(rt))
        } else if rt.is_scalar() || lt.dims == rt.dims {
            Ok(Ty::Tensor(lt))
        } else {
            let (ls, rs) = (self.show_shape(&lt), self.show_shape(&rt));
            Err(error(
                format!("shape mismatch: cannot apply `{symbol}` to `{ls}` and `{rs}`"),
                loc,
                end,
                "the shapes differ",
            )
            .map_note(
                "elementwise operators need arrays of the same shape, or an array and a scalar",
            ))
        }
    }

    fn check_index_types(
        &mut self,
        base: Expr,
        index: Expr,
        loc: Loc,
        end: Loc,
        base_end: Loc,
        index_end: Loc,
    ) -> CheckResult<Expr> {
        if base.ty == Ty::Never {
            return Ok(mk(
                ExprKind::Index {
                    base: Box::new(base),
                    index: Box::new(index),
                },
                Ty::Never,
                loc,
            ));
        }
        let bt = match &base.ty {
            Ty::Tensor(t) if !t.is_scalar() => t.clone(),
            other => {
                return Err(error(
                    format!("cannot index into a value of type `{}`", self.show(other)),
                    base.loc,
                    base_end,
                    "not an array",
                ))
            }
        };
        if index.ty != Ty::Never {
            let ok =
                matches!(&index.ty, Ty::Tensor(t) if t.is_scalar() && self.class(t) == Class::Int);
            if !ok {
                return Err(error(
                    format!(
                        "an index must be an integer, but this is `{}`",
                        self.show(&index.ty)
                    ),
                    index.loc,
                    index_end,
                    "expected an integer",
                ));
            }
        }
        let ty = Ty::Tensor(TensorTy {
            elem: bt.elem,
            dims: bt.dims[1..].to_vec(),
            var: bt.var,
        });
        let _ = end;
        Ok(mk(
            ExprKind::Index {
                base: Box::new(base),
                index: Box::new(index),
            },
            ty,
            loc,
        ))
    }

    fn check_cast(&mut self, c: &syn::ExprCast, loc: Loc, end: Loc) -> CheckResult<Expr> {
        let operand = self.check_expr(&c.expr)?;
        let (tl, te) = type_range(&c.ty);
        let target = self.scope.resolve_type(&c.ty, &[]).ok();
        let to = match target {
            Some(Ty::Tensor(t)) if t.is_scalar() => t.elem,
            _ => {
                return Err(error(
                    "`as` converts between scalar types only (bool, i32, i64, usize, f32, f64)",
                    tl,
                    te,
                    "not a scalar type",
                ))
            }
        };
        if operand.ty == Ty::Never {
            return Ok(mk(
                ExprKind::Cast {
                    operand: Box::new(operand),
                    to,
                },
                Ty::scalar(to),
                loc,
            ));
        }
        let t = match &operand.ty {
            Ty::Tensor(t) if t.is_scalar() => t.clone(),
            other => {
                return Err(error(
                    format!(
                        "`as` converts scalars only, but this is `{}`",
                        self.show(other)
                    ),
                    operand.loc,
                    expr_end(&c.expr),
                    "not a scalar",
                ))
            }
        };
        let from = self.class(&t);
        let allowed = match (from, to) {
            (Class::Bool, ScalarType::Bool) => true,
            (Class::Bool, t) => t.is_integer(),
            (_, ScalarType::Bool) => false,
            _ => true,
        };
        if !allowed {
            let note = if to == ScalarType::Bool {
                "compare instead, e.g. `x != 0`"
            } else {
                "cast to an integer first, e.g. `b as i64 as f64`"
            };
            return Err(error(
                format!("cannot cast `{}` as `{to}`", self.show_tensor(&t)),
                loc,
                end,
                "invalid cast",
            )
            .map_note(note));
        }
        Ok(mk(
            ExprKind::Cast {
                operand: Box::new(operand),
                to,
            },
            Ty::scalar(to),
            loc,
        ))
    }

    fn check_condition(&mut self, cond: &syn::Expr, what: &str) -> CheckResult<Expr> {
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

    fn check_if(&mut self, i: &syn::ExprIf, loc: Loc, end: Loc) -> CheckResult<Expr> {
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

    fn check_loop_body(&mut self, body: &syn::Block) -> CheckResult<hir::Block> {
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

    fn check_for(&mut self, f: &syn::ExprForLoop, loc: Loc, end: Loc) -> CheckResult<Expr> {
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
        let mut bound_ty: Option<TensorTy> = None;
        for (b, bend) in [
            (&start_checked, expr_end(start)),
            (&stop_checked, expr_end(stop)),
        ] {
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
        let var_ty = Ty::Tensor(bound_ty.unwrap_or_else(|| TensorTy::scalar(ScalarType::I64)));
        self.scopes.push(Vec::new());
        let var = match &*f.pat {
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
        self.loops.push(LoopContext {
            kind: LoopKind::For,
            break_ty: None,
        });
        let body = self.check_loop_body(&f.body);
        self.loops.pop();
        self.scopes.pop();
        let body = body?;
        let _ = end;
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

    fn check_assign(
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
        let (pl, pe) = (expr_start(left), expr_end(left));
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
                let place_expr = mk(ExprKind::Tuple(Vec::new()), place_ty.clone(), pl);
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
        let _ = pe;
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
        // Walk to the root variable, collecting projections outermost-last.
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
                return Err(Box::new(crate::guard::too_deep(loc, end)));
            }
        }
        let (rl, re) = (expr_start(cur), expr_end(cur));
        let root = match cur {
            syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
            syn::Expr::Tuple(_) => {
                return Err(unsupported("destructuring assignment", rl, re)
                    .map_note("assign each variable separately, or use `let (a, b) = ...`"))
            }
            _ => None,
        };
        let Some(name) = root else {
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
        let mut ty = info.ty.clone();
        let mut projections = Vec::new();
        for step in steps.iter().rev() {
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
                    match &ty {
                        Ty::Tuple(items) if index < items.len() => {
                            ty = items[index].clone();
                            projections.push(Projection::Field(index));
                        }
                        other => {
                            return Err(error(
                                format!("`.{index}` is not a field of `{}`", self.show(other)),
                                expr_start(step),
                                expr_end(step),
                                "no such field",
                            ))
                        }
                    }
                }
                syn::Expr::Index(i) => {
                    let t = match &ty {
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
                    let index = self.check_expr(&i.index)?;
                    let ok = index.ty == Ty::Never
                        || matches!(&index.ty, Ty::Tensor(it) if it.is_scalar() && self.class(it) == Class::Int);
                    if !ok {
                        return Err(error(
                            format!(
                                "an index must be an integer, but this is `{}`",
                                self.show(&index.ty)
                            ),
                            index.loc,
                            expr_end(&i.index),
                            "expected an integer",
                        ));
                    }
                    ty = Ty::Tensor(TensorTy {
                        elem: t.elem,
                        dims: t.dims[1..].to_vec(),
                        var: t.var,
                    });
                    projections.push(Projection::Index(index));
                }
                _ => {}
            }
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

    // -----------------------------------------------------------------------
    // Calls

    fn check_args(
        &mut self,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
    ) -> CheckResult<Vec<(Expr, Loc)>> {
        let mut out = Vec::new();
        for a in args {
            let x = self.check_expr(a)?;
            out.push((x, expr_end(a)));
        }
        Ok(out)
    }

    fn check_call(&mut self, c: &syn::ExprCall, loc: Loc, end: Loc) -> CheckResult<Expr> {
        let syn::Expr::Path(p) = peel(&c.func) else {
            return Err(error(
                "only named functions can be called",
                expr_start(&c.func),
                expr_end(&c.func),
                "not a function name",
            ));
        };
        let (fl, fe) = (path_start(&p.qself, &p.path), path_end(&p.path));
        if p.qself.is_some() || p.path.segments.len() != 1 || p.path.leading_colon.is_some() {
            return Err(error(
                format!(
                    "the path `{}` is not supported by autobatch",
                    path_text(&p.path)
                ),
                fl,
                fe,
                "paths with `::` are not supported",
            )
            .map_note("call functions by their name alone; methods are written `x.sqrt()`"));
        }
        let segment = &p.path.segments[0];
        let name = segment.ident.to_string();
        let turbofish = match &segment.arguments {
            syn::PathArguments::None => None,
            syn::PathArguments::AngleBracketed(a) => Some(a),
            syn::PathArguments::Parenthesized(_) => {
                return Err(error(
                    "unexpected parenthesized arguments",
                    fl,
                    fe,
                    "not supported",
                ));
            }
        };
        if self.lookup_local(&name).is_some() {
            return Err(error(
                format!("`{name}` is a variable, not a function"),
                fl,
                fe,
                "not a function",
            ));
        }
        match self.scope.names.get(&name).map(|(k, _)| *k) {
            Some(ModuleName::Function(index)) => {
                return self.check_user_call(index, turbofish, &c.args, loc, end)
            }
            Some(ModuleName::HostFunction) => {
                return Err(error(
                    format!("host primitive `{name}` is not yet supported"),
                    loc,
                    end,
                    "call of a host primitive",
                )
                .map_note(
                    "declaring host primitives is allowed; calling them comes in a later version",
                ));
            }
            Some(ModuleName::Const | ModuleName::Static(_)) => {
                return Err(error(
                    format!("`{name}` is not a function"),
                    fl,
                    fe,
                    "not a function",
                ));
            }
            None => {}
        }
        if name == "catch" {
            return self.check_catch(turbofish, &c.args, loc, end);
        }
        if name == "grad" || name == "value_and_grad" {
            if let Some(t) = turbofish {
                return Err(error(
                    format!("`{name}` takes no generic arguments"),
                    start_of(t.lt_token.span),
                    end_of(t.gt_token.span),
                    "unexpected `::<...>`",
                )
                .map_note(format!(
                    "give the function's const arguments on the function: `{name}(f::<3>, x)`"
                )));
            }
            return self.check_grad(&name, &c.args, loc, end);
        }
        let Some(builtin) = Builtin::function(&name) else {
            return Err(error(
                format!("cannot find function `{name}`"),
                fl,
                fe,
                "not found",
            ));
        };
        if let Some(t) = turbofish {
            return Err(error(
                format!("the builtin `{name}` takes no generic arguments"),
                start_of(t.lt_token.span),
                end_of(t.gt_token.span),
                "unexpected `::<...>`",
            ));
        }
        let operands = self.check_args(&c.args)?;
        self.check_builtin(BuiltinCall {
            builtin,
            name: &name,
            method: false,
            operands,
            loc,
            end,
        })
    }

    fn resolve_const_arg(&mut self, arg: &syn::GenericArgument) -> CheckResult<DimExpr> {
        let generics = self.const_params.clone();
        match arg {
            syn::GenericArgument::Const(e) => self.scope.resolve_dim(e, &generics, &|_| false),
            syn::GenericArgument::Type(syn::Type::Path(tp))
                if tp.qself.is_none() && tp.path.get_ident().is_some() =>
            {
                let expr = syn::Expr::Path(syn::ExprPath {
                    attrs: Vec::new(),
                    qself: None,
                    path: tp.path.clone(),
                });
                self.scope.resolve_dim(&expr, &generics, &|_| false)
            }
            other => {
                // Not `other.span()`: it may hold an expression (see `location`).
                let (loc, end) = match other {
                    syn::GenericArgument::Type(t) => type_range(t),
                    syn::GenericArgument::Lifetime(l) => {
                        (start_of(l.apostrophe), end_of(l.ident.span()))
                    }
                    syn::GenericArgument::AssocType(a) => {
                        (start_of(a.ident.span()), type_range(&a.ty).1)
                    }
                    syn::GenericArgument::AssocConst(a) => {
                        (start_of(a.ident.span()), expr_end(&a.value))
                    }
                    syn::GenericArgument::Constraint(c) => {
                        (start_of(c.ident.span()), end_of(c.colon_token.span))
                    }
                    verbatim => {
                        use syn::spanned::Spanned;
                        (start_of(verbatim.span()), end_of(verbatim.span()))
                    }
                };
                Err(error(
                    "a const generic argument must be a number, a `const`, a const generic parameter or a symbolic dimension",
                    loc,
                    end,
                    "not a length",
                ))
            }
        }
    }

    /// The const arguments of a call of `sig` given with `::<...>`, one per
    /// const generic parameter (all `None` without a turbofish; the rest are
    /// inferred from the arguments).
    fn turbofish_bindings(
        &mut self,
        sig: &Signature,
        turbofish: Option<&syn::AngleBracketedGenericArguments>,
    ) -> CheckResult<Vec<Option<DimExpr>>> {
        let mut bindings: Vec<Option<DimExpr>> = vec![None; sig.const_params.len()];
        if let Some(t) = turbofish {
            if t.args.len() != sig.const_params.len() {
                return Err(error(
                    format!(
                        "`{}` has {} const generic parameter(s), but {} were given",
                        sig.name,
                        sig.const_params.len(),
                        t.args.len()
                    ),
                    start_of(t.lt_token.span),
                    end_of(t.gt_token.span),
                    "wrong number of generic arguments",
                ));
            }
            for (i, a) in t.args.iter().enumerate() {
                bindings[i] = Some(self.resolve_const_arg(a)?);
            }
        }
        Ok(bindings)
    }

    fn check_user_call(
        &mut self,
        index: usize,
        turbofish: Option<&syn::AngleBracketedGenericArguments>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let sig = self.scope.signatures[index].clone();
        let mut bindings = self.turbofish_bindings(&sig, turbofish)?;
        if args.len() != sig.params.len() {
            return Err(error(
                format!(
                    "`{}` takes {} argument(s), but {} were given",
                    sig.name,
                    sig.params.len(),
                    args.len()
                ),
                loc,
                end,
                format!("expected {} argument(s)", sig.params.len()),
            ));
        }
        let checked = self.check_args(args)?;
        let mut out = Vec::new();
        for (k, ((arg, arg_end), (pname, _, pty, _))) in
            checked.into_iter().zip(&sig.params).enumerate()
        {
            if !self.match_param(pty, &arg.ty, &mut bindings) {
                let known: Vec<DimExpr> = bindings
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b.unwrap_or(DimExpr::Generic(i as u32)))
                    .collect();
                let pty = &substitute(pty, &known);
                return Err(error(
                    format!(
                        "mismatched types: argument {} (`{pname}`) of `{}` must be `{}`, but this is `{}`",
                        k + 1,
                        sig.name,
                        self.show_with(pty, &sig.const_params),
                        self.show(&arg.ty)
                    ),
                    arg.loc,
                    arg_end,
                    format!("expected `{}`", self.show_with(pty, &sig.const_params)),
                ));
            }
            out.push(arg);
        }
        let const_args = inferred_const_args(
            &sig,
            &bindings,
            "the arguments",
            format!("give it explicitly: `{}::<N>(...)`", sig.name),
            (loc, end),
        )?;
        let ret = substitute(&sig.ret, &const_args);
        Ok(mk(
            ExprKind::Call {
                function: index,
                const_args,
                args: out,
                catch: false,
            },
            ret,
            loc,
        ))
    }

    /// `catch(f(args))`: the call of a function of the module, whose member
    /// errors (but the step limit) are recovered: `(bool, T)` where `f`
    /// returns `T`.
    fn check_catch(
        &mut self,
        turbofish: Option<&syn::AngleBracketedGenericArguments>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if let Some(t) = turbofish {
            return Err(error(
                "`catch` takes no generic arguments",
                start_of(t.lt_token.span),
                end_of(t.gt_token.span),
                "unexpected `::<...>`",
            ));
        }
        let usage = "write `catch(f(a, b))`: one call of a function of the program, whose faults are caught; it gives `(true, result)`, or `(false, zeros)` when the call faults";
        if args.len() != 1 {
            return Err(error(
                format!(
                    "`catch` takes one call, but {} arguments were given",
                    args.len()
                ),
                loc,
                end,
                "expected one call",
            )
            .map_note(usage));
        }
        let call = self.check_expr(&args[0])?;
        let Expr {
            kind:
                ExprKind::Call {
                    function,
                    const_args,
                    args,
                    catch: false,
                },
            ty,
            ..
        } = call
        else {
            return Err(error(
                "`catch` takes a call of a function of the program",
                call.loc,
                end,
                "not a call of a function of the program",
            )
            .map_note(usage));
        };
        Ok(mk(
            ExprKind::Call {
                function,
                const_args,
                args,
                catch: true,
            },
            Ty::Tuple(vec![Ty::scalar(ScalarType::Bool), ty]),
            loc,
        ))
    }

    /// `grad(f, x)` / `value_and_grad(f, x)`: `f` names a function of the
    /// module with one float parameter and a float scalar result; `x` has the
    /// parameter's type (const generics of `f` inferred from it or given as
    /// `f::<...>`). Whether `f` is differentiable is checked once every body
    /// is known (`crate::differentiable`).
    fn check_grad(
        &mut self,
        name: &str,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if args.len() != 2 {
            return Err(error(
                format!(
                    "`{name}` takes 2 arguments (a function and a point), but {} were given",
                    args.len()
                ),
                loc,
                end,
                "expected 2 arguments",
            )
            .map_note(format!(
                "write `{name}(f, x)` where `f` is the name of a function of one parameter"
            )));
        }
        let f_expr = &args[0];
        let (fl, fe) = (expr_start(f_expr), expr_end(f_expr));
        let not_function = |what: String| {
            error(
                format!("the first argument of `{name}` must name a function of the program, but {what}"),
                fl,
                fe,
                "not a function of the program",
            )
            .map_note(format!("write `{name}(f, x)` where `f` is declared with `fn f(x: ...) -> f64`"))
        };
        let syn::Expr::Path(p) = peel(f_expr) else {
            return Err(not_function("this is an expression".into()));
        };
        if p.qself.is_some() || p.path.segments.len() != 1 || p.path.leading_colon.is_some() {
            return Err(not_function(format!("`{}` is a path", path_text(&p.path))));
        }
        let segment = &p.path.segments[0];
        let fname = segment.ident.to_string();
        let turbofish = match &segment.arguments {
            syn::PathArguments::None => None,
            syn::PathArguments::AngleBracketed(a) => Some(a),
            syn::PathArguments::Parenthesized(_) => {
                return Err(not_function(format!("`{fname}(...)` is not a name")));
            }
        };
        if self.lookup_local(&fname).is_some() {
            return Err(not_function(format!("`{fname}` is a variable")));
        }
        let index = match self.scope.names.get(&fname).map(|(k, _)| *k) {
            Some(ModuleName::Function(index)) => index,
            Some(ModuleName::HostFunction) => {
                return Err(error(
                    format!("cannot differentiate the host primitive `{fname}`"),
                    fl,
                    fe,
                    "host primitive",
                )
                .map_note("only functions written in autobatch can be differentiated"))
            }
            Some(ModuleName::Const) => {
                return Err(not_function(format!("`{fname}` is a constant")))
            }
            Some(ModuleName::Static(_)) => {
                return Err(not_function(format!("`{fname}` is a static")))
            }
            None if Builtin::function(&fname).is_some() => {
                return Err(not_function(format!("`{fname}` is a builtin"))
                    .map_note("wrap it in a function: `fn g(x: f64) -> f64 { ... }`"))
            }
            None => {
                return Err(error(
                    format!("cannot find function `{fname}`"),
                    fl,
                    fe,
                    "not found",
                ))
            }
        };
        let sig = self.scope.signatures[index].clone();
        let declared = |d: Box<Diagnostic>| -> Box<Diagnostic> {
            d.map_note(format!(
                "`{}` is declared at {}:{}",
                sig.name, sig.loc.line, sig.loc.column
            ))
        };
        if sig.params.len() != 1 {
            return Err(declared(
                error(
                    format!(
                        "`{name}` differentiates a function of exactly one parameter, but `{}` takes {}",
                        sig.name,
                        sig.params.len()
                    ),
                    fl,
                    fe,
                    format!("takes {} parameters", sig.params.len()),
                )
                .map_note("pass other inputs as statics (`extern \"autobatch\" { static X: ...; }`), or pack the parameters into one array"),
            ));
        }
        let (pname, _, pty, _) = sig.params[0].clone();
        if !matches!(&pty, Ty::Tensor(t) if t.elem.is_float()) {
            return Err(declared(error(
                format!(
                    "`{name}` needs a float parameter (`f32`, `f64` or an array of them), but the parameter `{pname}` of `{}` is `{}`",
                    sig.name,
                    self.show_with(&pty, &sig.const_params)
                ),
                fl,
                fe,
                "parameter is not a float",
            )));
        }
        if !matches!(&sig.ret, Ty::Tensor(t) if t.elem.is_float() && t.is_scalar()) {
            return Err(declared(error(
                format!(
                    "`{name}` needs a function returning a float scalar (`f32` or `f64`), but `{}` returns `{}`",
                    sig.name,
                    self.show_with(&sig.ret, &sig.const_params)
                ),
                fl,
                fe,
                "result is not a float scalar",
            )));
        }
        let mut bindings = self.turbofish_bindings(&sig, turbofish)?;
        let x = self.check_expr(&args[1])?;
        let x_end = expr_end(&args[1]);
        if !self.match_param(&pty, &x.ty, &mut bindings) {
            let known: Vec<DimExpr> = bindings
                .iter()
                .enumerate()
                .map(|(i, b)| b.unwrap_or(DimExpr::Generic(i as u32)))
                .collect();
            let want = substitute(&pty, &known);
            return Err(error(
                format!(
                    "mismatched types: `{name}` differentiates `{}` at a point of its parameter type `{}`, but this is `{}`",
                    sig.name,
                    self.show_with(&want, &sig.const_params),
                    self.show(&x.ty)
                ),
                x.loc,
                x_end,
                format!("expected `{}`", self.show_with(&want, &sig.const_params)),
            ));
        }
        let const_args = inferred_const_args(
            &sig,
            &bindings,
            "the point",
            format!("give it explicitly: `{name}({}::<N>, x)`", sig.name),
            (loc, end),
        )?;
        let point_ty = substitute(&pty, &const_args);
        let ty = if name == "value_and_grad" {
            Ty::Tuple(vec![substitute(&sig.ret, &const_args), point_ty])
        } else {
            point_ty
        };
        Ok(mk(
            ExprKind::Grad {
                function: index,
                const_args,
                arg: Box::new(x),
                with_value: name == "value_and_grad",
            },
            ty,
            loc,
        ))
    }

    /// Matches an argument type against a parameter type, binding const generics.
    fn match_param(&mut self, param: &Ty, arg: &Ty, bindings: &mut [Option<DimExpr>]) -> bool {
        match (param, arg) {
            (_, Ty::Never) => true,
            (Ty::Tensor(p), Ty::Tensor(a)) => {
                if p.dims.len() != a.dims.len() {
                    return false;
                }
                for (pd, ad) in p.dims.iter().zip(&a.dims) {
                    match pd {
                        DimExpr::Generic(k) => match bindings.get_mut(*k as usize) {
                            Some(slot @ None) => *slot = Some(*ad),
                            Some(Some(bound)) if bound == ad => {}
                            _ => return false,
                        },
                        other => {
                            if other != ad {
                                return false;
                            }
                        }
                    }
                }
                let ea = self.elem(a);
                self.unify_elem(Elem::Known(p.elem), ea)
            }
            (Ty::Tuple(ps), Ty::Tuple(as_)) => {
                ps.len() == as_.len()
                    && ps
                        .iter()
                        .zip(as_)
                        .all(|(p, a)| self.match_param(p, a, bindings))
            }
            _ => false,
        }
    }

    fn check_method(&mut self, m: &syn::ExprMethodCall, loc: Loc, end: Loc) -> CheckResult<Expr> {
        let name = m.method.to_string();
        let (ml, me) = (start_of(m.method.span()), end_of(m.method.span()));
        if let Some(t) = &m.turbofish {
            return Err(error(
                "methods take no generic arguments",
                start_of(t.lt_token.span),
                end_of(t.gt_token.span),
                "unexpected `::<...>`",
            ));
        }
        let receiver = self.check_expr(&m.receiver)?;
        let receiver_end = expr_end(&m.receiver);
        let args = self.check_args(&m.args)?;
        if name == "len" {
            return self.check_len(receiver, receiver_end, args.len(), loc, end);
        }
        let Some(builtin) = Builtin::method(&name) else {
            return Err(error(
                format!("the method `{name}` is not supported by autobatch"),
                ml,
                me,
                "unknown method",
            )
            .map_note(method_list()));
        };
        let mut operands = vec![(receiver, receiver_end)];
        operands.extend(args);
        self.check_builtin(BuiltinCall {
            builtin,
            name: &name,
            method: true,
            operands,
            loc,
            end,
        })
    }

    /// `array.len()`.
    fn check_len(
        &mut self,
        receiver: Expr,
        receiver_end: Loc,
        args: usize,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if args != 0 {
            return Err(error(
                format!("`.len()` takes 0 argument(s), but {args} were given"),
                loc,
                end,
                "expected 0 argument(s)",
            ));
        }
        let len = match &receiver.ty {
            Ty::Tensor(t) if !t.is_scalar() => t.dims[0],
            other => {
                return Err(error(
                    format!(
                        "`.len()` needs an array, but this is `{}`",
                        self.show(other)
                    ),
                    receiver.loc,
                    receiver_end,
                    "not an array",
                ))
            }
        };
        Ok(mk(
            ExprKind::Len {
                array: Box::new(receiver),
                len,
            },
            usize_ty(),
            loc,
        ))
    }

    /// A call of a builtin (method or function): the operand count, then the
    /// rule of its signature class.
    fn check_builtin(&mut self, call: BuiltinCall) -> CheckResult<Expr> {
        let never = if call.method {
            // A method's receiver is checked before its arguments are counted.
            let never = call.operands[0].0.ty == Ty::Never;
            if !never {
                self.operand(&call, 0)?;
                self.check_builtin_arity(&call)?;
            }
            never
        } else {
            self.check_builtin_arity(&call)?;
            let never = call.operands.iter().any(|(a, _)| a.ty == Ty::Never);
            if !never {
                for k in 0..call.operands.len() {
                    self.operand(&call, k)?;
                }
            }
            never
        };
        let ty = if never {
            Ty::Never
        } else {
            self.builtin_type(&call)?
        };
        let args = call.operands.into_iter().map(|(a, _)| a).collect();
        Ok(mk(
            ExprKind::Builtin {
                builtin: call.builtin,
                args,
            },
            ty,
            call.loc,
        ))
    }

    fn check_builtin_arity(&self, call: &BuiltinCall) -> CheckResult<()> {
        // A method's receiver is not one of the arguments the user counts.
        let skip = usize::from(call.method);
        let (want, given) = (call.builtin.arity() - skip, call.operands.len() - skip);
        if want == given {
            return Ok(());
        }
        let mut d = error(
            format!(
                "{} takes {want} argument(s), but {given} were given",
                call.shown()
            ),
            call.loc,
            call.end,
            format!("expected {want} argument(s)"),
        );
        let reduces = matches!(
            call.builtin.signature(),
            OpSignature::Reduce | OpSignature::FloatReduce | OpSignature::ArgReduce
        );
        let method = Builtin::method(call.name).map(Builtin::arity);
        if !call.method && reduces && method == Some(given) {
            let name = call.name;
            d = d.map_note(format!(
                "`{name}(a)` reduces an array; for two values write `x.{name}(y)`"
            ));
        }
        Err(d)
    }

    /// Operand `k` of a builtin as an array or scalar (else an error naming the builtin).
    fn operand(&self, call: &BuiltinCall, k: usize) -> CheckResult<TensorTy> {
        let (a, end) = &call.operands[k];
        self.tensor_of(a, *end, &call.shown())
    }

    /// Operand `k` of a builtin is not `need`: for a method's receiver,
    /// "is a method of {need}"; for an argument, "needs {need}".
    fn operand_error(&self, call: &BuiltinCall, k: usize, need: &str) -> Box<Diagnostic> {
        let (a, end) = &call.operands[k];
        if call.method && k == 0 {
            let note = match &a.ty {
                Ty::Tensor(t) if self.class(t) == Class::Int => {
                    "convert first, e.g. `(x as f64).sqrt()`"
                }
                _ => "check the type of the receiver",
            };
            return error(
                format!(
                    "{} is a method of {need}, but this is `{}`",
                    call.shown(),
                    self.show(&a.ty)
                ),
                a.loc,
                *end,
                format!("not {need}"),
            )
            .map_note(note);
        }
        let number = if call.method { k } else { k + 1 };
        error(
            format!(
                "{} needs {need}, but argument {number} is `{}`",
                call.shown(),
                self.show(&a.ty)
            ),
            a.loc,
            *end,
            format!("expected {need}"),
        )
    }

    /// Operand `k`, whose element type the class must accept (else
    /// `operand_error` with `need`).
    fn operand_of(&self, call: &BuiltinCall, k: usize, need: &str) -> CheckResult<TensorTy> {
        let t = self.operand(call, k)?;
        if !accepts(call.builtin.signature(), self.class(&t)) {
            return Err(self.operand_error(call, k, need));
        }
        Ok(t)
    }

    /// The type of a builtin call whose operands are counted and are not
    /// `!`: one rule per signature class.
    fn builtin_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        use OpSignature as S;
        let signature = call.builtin.signature();
        Ok(match signature {
            S::FloatMap => Ty::Tensor(self.operand_of(call, 0, "floats")?),
            S::FloatPredicate => {
                let t = self.operand_of(call, 0, "floats")?;
                Ty::Tensor(TensorTy::new(ScalarType::Bool, t.dims))
            }
            S::SignedMap => self.signed_map_type(call)?,
            S::Arithmetic | S::FloatBinary => self.same_type_binary(call, signature)?,
            S::FloatPowi => self.powi_type(call)?,
            S::IntPower => self.int_power_type(call)?,
            S::Reduce | S::ArgReduce | S::FloatReduce => self.reduce_type(call, signature)?,
            S::FloatVectorMap => {
                let t = self.operand(call, 0)?;
                if !accepts(signature, self.class(&t)) || t.dims.len() != 1 {
                    return Err(self.operand_error(call, 0, "a 1-D float array"));
                }
                Ty::Tensor(t)
            }
            S::Transpose => {
                let t = self.operand(call, 0)?;
                if t.dims.len() != 2 || !accepts(signature, self.class(&t)) {
                    return Err(self.operand_error(call, 0, "a matrix (a 2-D array of numbers)"));
                }
                Ty::Tensor(TensorTy {
                    elem: t.elem,
                    dims: vec![t.dims[1], t.dims[0]],
                    var: t.var,
                })
            }
            S::Product {
                left,
                right,
                contract,
                lengths,
            } => self.product_type(call, [left, right], contract, lengths)?,
            S::Select => self.select_type(call)?,
            S::Draw => Ty::scalar(ScalarType::F64),
            S::DrawLike => {
                let t = self.operand(call, 0)?;
                if self.class(&t) == Class::Float {
                    Ty::Tensor(t)
                } else {
                    Ty::Tensor(TensorTy::new(ScalarType::F64, t.dims))
                }
            }
            S::Bernoulli => {
                if !self.unify(&Ty::scalar(ScalarType::F64), &call.operands[0].0.ty) {
                    return Err(self.operand_error(call, 0, "an `f64` probability"));
                }
                bool_ty()
            }
            // Operators and syntax: the table has no builtin of these classes.
            S::LogicMap
            | S::Bitwise
            | S::Shift
            | S::Compare
            | S::Copy
            | S::Value
            | S::Cast
            | S::Fill
            | S::Stack
            | S::Index
            | S::IndexSet
            | S::Assert => {
                return Err(error(
                    format!("{} cannot be called", call.shown()),
                    call.loc,
                    call.end,
                    "not a builtin",
                ))
            }
        })
    }

    /// `SignedMap` (`x.abs()`): numbers, not `usize`; the same type.
    fn signed_map_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let t = self.operand_of(call, 0, "numbers")?;
        if self.class(&t) == Class::Int {
            let (a, end) = &call.operands[0];
            if self.elem(&t) == Elem::Known(ScalarType::Usize) {
                return Err(error(
                    format!(
                        "{} does not apply to a `usize`, which has no sign",
                        call.shown()
                    ),
                    a.loc,
                    *end,
                    "unsigned value",
                ));
            }
            self.signed_checks.push(SignedCheck {
                ty: t.clone(),
                loc: call.loc,
                end: call.end,
                what: call.shown(),
            });
        }
        Ok(Ty::Tensor(t))
    }

    /// `Arithmetic` and `FloatBinary` (`x.max(y)`, `x.powf(y)`): the argument
    /// has the receiver's type, or is a scalar of its element type.
    fn same_type_binary(&mut self, call: &BuiltinCall, signature: OpSignature) -> CheckResult<Ty> {
        let need = if signature == OpSignature::FloatBinary {
            "floats"
        } else {
            "numbers"
        };
        let t = self.operand_of(call, 0, need)?;
        let (x, (arg, arg_end)) = (&call.operands[0].0, &call.operands[1]);
        let symbol = format!(".{}", call.name);
        match self.binary_result(signature, &symbol, x, arg, call.loc, *arg_end) {
            Ok(ty) => Ok(ty),
            Err(_) if signature == OpSignature::FloatBinary => Err(error(
                format!(
                    "mismatched types: {} of `{}` needs a float exponent of the same type, found `{}`",
                    call.shown(),
                    self.show_tensor(&t),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                "wrong exponent type",
            )),
            Err(_) => {
                let elem = TensorTy {
                    elem: t.elem,
                    dims: Vec::new(),
                    var: t.var,
                };
                Err(error(
                    format!(
                        "mismatched types: {} of `{}` needs an argument of the same type (or a scalar), found `{}`",
                        call.shown(),
                        self.show_tensor(&t),
                        self.show(&arg.ty)
                    ),
                    arg.loc,
                    *arg_end,
                    format!("expected `{}`", self.show_tensor(&elem)),
                ))
            }
        }
    }

    /// `FloatPowi` (`x.powi(n)`): a float and an `i32` scalar.
    fn powi_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let t = self.operand_of(call, 0, "floats")?;
        let (arg, arg_end) = &call.operands[1];
        if !self.unify(&Ty::scalar(ScalarType::I32), &arg.ty) {
            return Err(error(
                format!(
                    "{} needs an `i32` exponent, but this is `{}`",
                    call.shown(),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                "expected `i32`",
            ));
        }
        Ok(Ty::Tensor(t))
    }

    /// `IntPower` (`n.pow(k)`): an integer and an integer scalar.
    fn int_power_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let t = self.operand(call, 0)?;
        if !accepts(OpSignature::IntPower, self.class(&t)) {
            let (a, end) = &call.operands[0];
            return Err(error(
                format!(
                    "{} is a method of integers, but this is `{}`",
                    call.shown(),
                    self.show_tensor(&t)
                ),
                a.loc,
                *end,
                "not an integer",
            )
            .map_note("for floats use `.powi(n)` or `.powf(x)`"));
        }
        let (arg, arg_end) = &call.operands[1];
        let ok = matches!(&arg.ty, Ty::Tensor(t) if t.is_scalar() && self.class(t) == Class::Int)
            || arg.ty == Ty::Never;
        if !ok {
            return Err(error(
                format!(
                    "{} needs an integer exponent, but this is `{}`",
                    call.shown(),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                "expected an integer",
            ));
        }
        Ok(Ty::Tensor(t))
    }

    /// `Reduce`, `ArgReduce`, `FloatReduce` (`sum(a)`, `argmax(a)`,
    /// `mean(a)`): a 1-D array; its element, or its index.
    fn reduce_type(&mut self, call: &BuiltinCall, signature: OpSignature) -> CheckResult<Ty> {
        let t = self.operand(call, 0)?;
        if t.dims.len() != 1 || !accepts(signature, self.class(&t)) {
            let need = if signature == OpSignature::FloatReduce {
                "a 1-D float array"
            } else {
                "a 1-D array of numbers"
            };
            return Err(self.operand_error(call, 0, need));
        }
        if signature == OpSignature::ArgReduce {
            return Ok(usize_ty());
        }
        Ok(Ty::Tensor(TensorTy {
            elem: t.elem,
            dims: Vec::new(),
            var: t.var,
        }))
    }

    /// `Product` (`dot`, `matvec`, `vecmat`, `matmul`, `outer`): arrays of
    /// numbers of ranks `ranks`, of one element type; with `contract`, the
    /// left's last axis against the right's first.
    fn product_type(
        &mut self,
        call: &BuiltinCall,
        ranks: [usize; 2],
        contract: bool,
        lengths: &str,
    ) -> CheckResult<Ty> {
        let describe = |r: usize| {
            if r == 1 {
                "a vector (a 1-D array of numbers)"
            } else {
                "a matrix (a 2-D array of numbers)"
            }
        };
        let mut operands = Vec::new();
        for (k, rank) in ranks.into_iter().enumerate() {
            let t = self.operand(call, k)?;
            if t.dims.len() != rank || !accepts(call.builtin.signature(), self.class(&t)) {
                return Err(self.operand_error(call, k, describe(rank)));
            }
            operands.push(t);
        }
        let (a, b) = (&operands[0], &operands[1]);
        let (ea, eb) = (self.elem(a), self.elem(b));
        if !self.unify_elem(ea, eb) {
            return Err(error(
                format!(
                    "mismatched types: {} of `{}` and `{}`",
                    call.shown(),
                    self.show_tensor(a),
                    self.show_tensor(b)
                ),
                call.loc,
                call.end,
                "element types differ",
            )
            .map_note("convert one side with `as`"));
        }
        let mut dims = a.dims.clone();
        let mut rest = &b.dims[..];
        if contract {
            if dims.pop() != b.dims.first().copied() {
                return Err(error(
                    format!(
                        "shape mismatch: {} of `{}` and `{}`",
                        call.shown(),
                        self.show_shape(a),
                        self.show_shape(b)
                    ),
                    call.loc,
                    call.end,
                    "the lengths do not agree",
                )
                .map_note(lengths));
            }
            rest = &b.dims[1..];
        }
        dims.extend_from_slice(rest);
        Ok(Ty::Tensor(TensorTy {
            elem: a.elem,
            dims,
            var: a.var,
        }))
    }

    /// `Select` (`select(c, a, b)`).
    fn select_type(&mut self, call: &BuiltinCall) -> CheckResult<Ty> {
        let (c, a, b) = (
            self.operand(call, 0)?,
            self.operand(call, 1)?,
            self.operand(call, 2)?,
        );
        let cond_ok = self.class(&c) == Class::Bool && (c.is_scalar() || c.dims == a.dims);
        if !cond_ok {
            return Err(self.operand_error(
                call,
                0,
                "a `bool` (or a `bool` array shaped like the alternatives)",
            ));
        }
        if !self.unify_tensor(&a, &b) {
            let (b_expr, b_end) = &call.operands[2];
            return Err(error(
                format!(
                    "the alternatives of {} must have one type, found `{}` and `{}`",
                    call.shown(),
                    self.show_tensor(&a),
                    self.show_tensor(&b)
                ),
                b_expr.loc,
                *b_end,
                format!("expected `{}`", self.show_tensor(&a)),
            ));
        }
        Ok(Ty::Tensor(a))
    }

    // -----------------------------------------------------------------------
    // Macros

    fn check_macro(&mut self, mac: &syn::Macro, loc: Loc, end: Loc) -> CheckResult<Expr> {
        let name = path_text(&mac.path);
        if name != "assert" {
            return Err(
                unsupported(&format!("the macro `{name}!`"), loc, end).map_note(
                    "the only macro is `assert!(condition)` or `assert!(condition, \"message\")`",
                ),
            );
        }
        use syn::parse::Parser;
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        let args = match parser.parse2(mac.tokens.clone()) {
            Ok(a) => a,
            Err(e) => {
                let s = e.span();
                return Err(error(
                    format!("syntax error in `assert!`: {e}"),
                    start_of(s),
                    end_of(s),
                    "here",
                ));
            }
        };
        let args: Vec<&syn::Expr> = args.iter().collect();
        if args.is_empty() {
            return Err(error(
                "`assert!` needs a condition",
                loc,
                end,
                "missing condition",
            ));
        }
        let cond_syntax = args[0];
        let cond = self.check_condition(cond_syntax, "the condition of `assert!`")?;
        let message = match args.get(1) {
            None => {
                let text = source_text(
                    self.scope.source,
                    expr_start(cond_syntax),
                    expr_end(cond_syntax),
                );
                format!(
                    "assertion failed: {}",
                    text.split_whitespace().collect::<Vec<_>>().join(" ")
                )
            }
            Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            })) => {
                if args.len() > 2 {
                    let (l, e) = (expr_start(args[2]), expr_end(args[args.len() - 1]));
                    return Err(unsupported(
                        "formatting arguments in an `assert!` message",
                        l,
                        e,
                    ));
                }
                let raw = s.value();
                match unescape_braces(&raw) {
                    Some(m) => m,
                    None => {
                        let sp = s.span();
                        return Err(unsupported(
                            "a placeholder `{}` in an `assert!` message",
                            start_of(sp),
                            end_of(sp),
                        )
                        .map_note("write `{{` and `}}` for literal braces"));
                    }
                }
            }
            Some(other) => {
                return Err(error(
                    "the message of `assert!` must be a string literal",
                    expr_start(other),
                    expr_end(other),
                    "expected a string literal",
                ))
            }
        };
        Ok(mk(
            ExprKind::Assert {
                cond: Box::new(cond),
                message,
            },
            Ty::unit(),
            loc,
        ))
    }

    // -----------------------------------------------------------------------
    // Blocks and statements

    fn check_block(&mut self, block: &syn::Block) -> CheckResult<(hir::Block, Ty)> {
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

    // -----------------------------------------------------------------------
    // Finalization: fixing inferred element types, checking literal ranges

    fn finalize_block(&mut self, block: &mut hir::Block) -> CheckResult<()> {
        for stmt in &mut block.stmts {
            match stmt {
                hir::Stmt::Let { init, .. } => self.finalize_expr(init)?,
                hir::Stmt::Expr(e) => self.finalize_expr(e)?,
            }
        }
        if let Some(t) = &mut block.tail {
            self.finalize_expr(t)?;
        }
        Ok(())
    }

    fn finalize_expr(&mut self, e: &mut Expr) -> CheckResult<()> {
        self.resolve_ty(&mut e.ty);
        match &mut e.kind {
            ExprKind::Literal(Literal::Int(v)) => {
                if let Ty::Tensor(t) = &e.ty {
                    let (lo, hi) = match t.elem {
                        ScalarType::I32 => (i32::MIN as i128, i32::MAX as i128),
                        ScalarType::I64 => (i64::MIN as i128, i64::MAX as i128),
                        _ => (0, u64::MAX as i128),
                    };
                    if *v < lo || *v > hi {
                        let message = if *v < 0 && t.elem == ScalarType::Usize {
                            format!("the literal `{v}` is negative, but its type is `usize`")
                        } else {
                            format!("the literal `{v}` does not fit in its type `{}`", t.elem)
                        };
                        let end = Loc::new(e.loc.line, e.loc.column + v.to_string().len() as u32);
                        return Err(error(
                            message,
                            e.loc,
                            end,
                            format!("out of range for `{}`", t.elem),
                        )
                        .map_note(format!("`{}` holds {lo} to {hi}", t.elem)));
                    }
                }
            }
            ExprKind::Literal(_)
            | ExprKind::Local(_)
            | ExprKind::Static(_)
            | ExprKind::Dim(_)
            | ExprKind::Continue => {}
            ExprKind::Len { array, .. } => self.finalize_expr(array)?,
            ExprKind::Unary { operand, .. } => self.finalize_expr(operand)?,
            ExprKind::Cast { operand, .. } => self.finalize_expr(operand)?,
            ExprKind::Binary { lhs, rhs, .. }
            | ExprKind::Compare { lhs, rhs, .. }
            | ExprKind::And { lhs, rhs }
            | ExprKind::Or { lhs, rhs } => {
                // The left operand may be a long chain: walk it with a loop.
                self.finalize_expr(rhs)?;
                let mut cur: &mut Expr = lhs;
                loop {
                    let is_operator = matches!(
                        cur.kind,
                        ExprKind::Binary { .. }
                            | ExprKind::Compare { .. }
                            | ExprKind::And { .. }
                            | ExprKind::Or { .. }
                    );
                    if !is_operator {
                        self.finalize_expr(cur)?;
                        break;
                    }
                    self.resolve_ty(&mut cur.ty);
                    match &mut cur.kind {
                        ExprKind::Binary { lhs, rhs, .. }
                        | ExprKind::Compare { lhs, rhs, .. }
                        | ExprKind::And { lhs, rhs }
                        | ExprKind::Or { lhs, rhs } => {
                            self.finalize_expr(rhs)?;
                            cur = lhs;
                        }
                        _ => break,
                    }
                }
            }
            ExprKind::Call { args, .. }
            | ExprKind::Builtin { args, .. }
            | ExprKind::Tuple(args)
            | ExprKind::Array(args) => {
                for a in args {
                    self.finalize_expr(a)?;
                }
            }
            ExprKind::Grad { arg, .. } => self.finalize_expr(arg)?,
            ExprKind::Field { base, .. } => self.finalize_expr(base)?,
            ExprKind::Index { base, index } => {
                self.finalize_expr(base)?;
                self.finalize_expr(index)?;
            }
            ExprKind::Repeat { element, .. } => self.finalize_expr(element)?,
            ExprKind::Block(b) => self.finalize_block(b)?,
            ExprKind::If {
                cond,
                then_block,
                else_branch,
            } => {
                self.finalize_expr(cond)?;
                self.finalize_block(then_block)?;
                if let Some(e) = else_branch {
                    self.finalize_expr(e)?;
                }
            }
            ExprKind::While { cond, body } => {
                self.finalize_expr(cond)?;
                self.finalize_block(body)?;
            }
            ExprKind::Loop { body } => self.finalize_block(body)?,
            ExprKind::For {
                start, end, body, ..
            } => {
                self.finalize_expr(start)?;
                self.finalize_expr(end)?;
                self.finalize_block(body)?;
            }
            ExprKind::Break { value } | ExprKind::Return { value } => {
                if let Some(v) = value {
                    self.finalize_expr(v)?;
                }
            }
            ExprKind::Assign { place, value, .. } => {
                self.finalize_expr(value)?;
                for p in &mut place.projections {
                    if let Projection::Index(i) = p {
                        self.finalize_expr(i)?;
                    }
                }
            }
            ExprKind::Assert { cond, .. } => self.finalize_expr(cond)?,
        }
        Ok(())
    }
}

fn negate_float(l: Literal) -> Literal {
    match l {
        Literal::Float { as_f64, as_f32 } => Literal::Float {
            as_f64: -as_f64,
            as_f32: -as_f32,
        },
        other => other,
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

/// Replaces const generic parameters by their values.
pub(crate) fn substitute(ty: &Ty, args: &[DimExpr]) -> Ty {
    match ty {
        Ty::Never => Ty::Never,
        Ty::Tuple(items) => Ty::Tuple(items.iter().map(|t| substitute(t, args)).collect()),
        Ty::Tensor(t) => Ty::Tensor(TensorTy {
            elem: t.elem,
            dims: t
                .dims
                .iter()
                .map(|d| match d {
                    DimExpr::Generic(k) => args.get(*k as usize).copied().unwrap_or(*d),
                    other => *other,
                })
                .collect(),
            var: t.var,
        }),
    }
}

/// `{{` and `}}` become single braces; a lone brace (a format placeholder) gives `None`.
fn unescape_braces(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' | '}' => {
                if chars.peek() == Some(&c) {
                    chars.next();
                    out.push(c);
                } else {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// A call of a builtin as the user wrote it.
struct BuiltinCall<'n> {
    builtin: Builtin,
    /// The name as written.
    name: &'n str,
    /// Written as a method: the receiver is the first operand.
    method: bool,
    /// The operands (a method's receiver first), each with where it ends.
    operands: Vec<(Expr, Loc)>,
    loc: Loc,
    end: Loc,
}

impl BuiltinCall<'_> {
    /// The builtin as messages name it: `` `.exp()` `` or `` `softmax` ``.
    fn shown(&self) -> String {
        if self.method {
            format!("`.{}()`", self.name)
        } else {
            format!("`{}`", self.name)
        }
    }
}

/// Whether the first operand of a builtin of class `signature` may have
/// element type class `class` (the receivers the unknown-method note lists).
fn accepts(signature: OpSignature, class: Class) -> bool {
    use OpSignature as S;
    match signature {
        S::FloatMap
        | S::FloatPredicate
        | S::FloatBinary
        | S::FloatPowi
        | S::FloatReduce
        | S::FloatVectorMap
        | S::Bernoulli => class == Class::Float,
        S::SignedMap
        | S::Arithmetic
        | S::Reduce
        | S::ArgReduce
        | S::Transpose
        | S::Product { .. } => class != Class::Bool,
        S::IntPower | S::Shift => class == Class::Int,
        S::LogicMap | S::Bitwise => class != Class::Float,
        S::Select => class == Class::Bool,
        S::Compare
        | S::DrawLike
        | S::Copy
        | S::Cast
        | S::Fill
        | S::Stack
        | S::Index
        | S::IndexSet
        | S::Assert => true,
        S::Draw | S::Value => false,
    }
}

/// The note of an unknown method: the methods, by receiver.
fn method_list() -> String {
    let methods = |class: Class| {
        let names: Vec<&str> = Builtin::ALL
            .iter()
            .filter(|b| b.spelling().method().is_some() && accepts(b.signature(), class))
            .map(|b| b.name())
            .collect();
        names.join(" ")
    };
    format!(
        "methods: {} (floats); {} (integers); len (arrays)",
        methods(Class::Float),
        methods(Class::Int)
    )
}

/// The operation of a compound assignment (`+=` gives `Add`), or `None` for
/// any other operator.
fn compound_assignment(op: &syn::BinOp) -> Option<BinaryOp> {
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

/// The const arguments of a call of `sig` once inference from `from` (the
/// arguments, the point of a `grad`) is done: an error naming the first one
/// still unknown, with `hint` as its note.
fn inferred_const_args(
    sig: &Signature,
    bindings: &[Option<DimExpr>],
    from: &str,
    hint: String,
    (loc, end): (Loc, Loc),
) -> CheckResult<Vec<DimExpr>> {
    bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            b.ok_or_else(|| {
                error(
                    format!(
                        "cannot infer the const parameter `{}` of `{}` from {from}",
                        sig.const_params[i], sig.name
                    ),
                    loc,
                    end,
                    "cannot infer",
                )
                .map_note(hint.clone())
            })
        })
        .collect()
}
