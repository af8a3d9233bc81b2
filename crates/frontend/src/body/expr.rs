//! Expressions that are neither control flow, calls nor assignments:
//! literals, paths, operators (unary, arithmetic, comparisons, `&&`/`||`),
//! casts, fields, indexing (slicing: `slice`), tuples and arrays, and `assert!`.

use autobatch_ops::Signature as OpSignature;
use autobatch_types::{Loc, ScalarType};

use crate::diagnostic::source_text;
use crate::hir::{BinaryOp, CompareOp, DimExpr, Expr, ExprKind, Literal, TensorTy, Ty, UnaryOp};
use crate::items::{
    error, float_literal_value, path_text, read_float_literal, read_int_literal, unsupported,
    CheckResult, MapNote, ModuleName, ModuleScope, NumberLiteral,
};
use crate::location::{end_of, expr_end, expr_start, start_of, type_range};

use super::builtin::accepts;
use super::infer::{Class, Elem};
use super::place::compound_assignment;
use super::{
    bool_ty, mk, too_long, usize_ty, FunctionChecker, SignedCheck, MAX_CHAIN_LENGTH,
    MAX_EXPRESSION_DEPTH,
};

impl FunctionChecker<'_, '_> {
    pub(super) fn check_expr(&mut self, e: &syn::Expr) -> CheckResult<Expr> {
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

    pub(super) fn tensor_of(&self, e: &Expr, end: Loc, what: &str) -> CheckResult<TensorTy> {
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

    /// Checks one expression: one arm per syntax form, each a method of the
    /// module of its concern (a form outside the language is rejected here).
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
            E::Field(f) => self.check_field(f, loc, end),
            E::Index(i) => self.check_index(i, loc),
            E::Tuple(t) => self.check_tuple(t, loc),
            E::Array(a) => self.check_array(a, loc, end),
            E::Repeat(r) => self.check_repeat(r, loc, end),
            E::Block(b) => self.check_block_expr(b, loc),
            E::If(i) => self.check_if(i, loc, end),
            E::While(w) => self.check_while(w, loc),
            E::Loop(l) => self.check_loop(l, loc),
            E::ForLoop(f) => self.check_for(f, loc),
            E::Break(b) => self.check_break(b, loc, end),
            E::Continue(c) => self.check_continue(c, loc, end),
            E::Return(r) => self.check_return(r, loc, end),
            E::Macro(m) => self.check_macro(&m.mac, loc, end),
            E::Match(m) => Err(unsupported("`match`", loc, end_of(m.match_token.span))
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

    /// `base.0`: a field of a tuple.
    fn check_field(&mut self, f: &syn::ExprField, loc: Loc, end: Loc) -> CheckResult<Expr> {
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

    /// `a[i]`.
    fn check_index(&mut self, i: &syn::ExprIndex, loc: Loc) -> CheckResult<Expr> {
        let base = self.check_expr(&i.expr)?;
        if let syn::Expr::Range(range) = &*i.index {
            let range_locs = (expr_start(&i.index), expr_end(&i.index));
            return self.check_slice(base, expr_end(&i.expr), range, range_locs, loc);
        }
        let index = self.check_expr(&i.index)?;
        self.check_index_types(base, index, loc, expr_end(&i.expr), expr_end(&i.index))
    }

    /// `(a, b, ...)`.
    fn check_tuple(&mut self, t: &syn::ExprTuple, loc: Loc) -> CheckResult<Expr> {
        let mut items = Vec::new();
        let mut tys = Vec::new();
        for elem in &t.elems {
            let x = self.check_expr(elem)?;
            tys.push(x.ty.clone());
            items.push(x);
        }
        Ok(mk(ExprKind::Tuple(items), Ty::Tuple(tys), loc))
    }

    /// `[a, b, ...]`: elements of one type.
    fn check_array(&mut self, a: &syn::ExprArray, loc: Loc, end: Loc) -> CheckResult<Expr> {
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

    /// `[x; N]`: `N` known before the program runs.
    fn check_repeat(&mut self, r: &syn::ExprRepeat, loc: Loc, end: Loc) -> CheckResult<Expr> {
        let element = self.check_expr(&r.expr)?;
        let t = self.tensor_of(&element, expr_end(&r.expr), "an array element")?;
        let len = self.length(&r.len)?;
        let mut dims = vec![len];
        dims.extend(t.dims.iter().copied());
        let repeated = TensorTy {
            elem: t.elem,
            dims,
            var: t.var,
        };
        crate::items::check_array_size(&repeated, loc, end)?;
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

    /// That `e` (ending at `end`), `what` in messages, is an integer scalar
    /// (or never has a value).
    pub(super) fn integer_operand(&self, e: &Expr, end: Loc, what: &str) -> CheckResult<()> {
        let ok = e.ty == Ty::Never
            || matches!(&e.ty, Ty::Tensor(t) if t.is_scalar() && self.class(t) == Class::Int);
        if ok {
            return Ok(());
        }
        Err(error(
            format!(
                "{what} must be an integer, but this is `{}`",
                self.show(&e.ty)
            ),
            e.loc,
            end,
            "expected an integer",
        ))
    }

    /// A length written in the program (`N` of `[x; N]` and `a[i..i + N]`):
    /// a number, a `const`, a const generic parameter or a symbolic
    /// dimension, never a variable.
    pub(super) fn length(&mut self, len: &syn::Expr) -> CheckResult<DimExpr> {
        if let syn::Expr::Path(p) = len {
            if let Some(ident) = p.path.get_ident() {
                let name = ident.to_string();
                if self.lookup_local(&name).is_some() && !self.const_params.contains(&name) {
                    let (ll, le) = (expr_start(len), expr_end(len));
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
        self.scope.resolve_dim(len, &generics, &|_| false)
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
            Some(ModuleName::Function(_) | ModuleName::HostFunction(_)) => {
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
    pub(super) fn binary_result(
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
        self.integer_operand(&index, index_end, "an index")?;
        let ty = Ty::Tensor(TensorTy {
            elem: bt.elem,
            dims: bt.dims[1..].to_vec(),
            var: bt.var,
        });
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
        // A scalar, or an array element by element (the result has the
        // array's shape).
        let t = match &operand.ty {
            Ty::Tensor(t) => t.clone(),
            other => {
                return Err(error(
                    format!(
                        "`as` converts scalars and arrays, but this is `{}`",
                        self.show(other)
                    ),
                    operand.loc,
                    expr_end(&c.expr),
                    "not a scalar or an array",
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
        let ty = Ty::Tensor(TensorTy {
            elem: to,
            dims: t.dims.clone(),
            var: None,
        });
        Ok(mk(
            ExprKind::Cast {
                operand: Box::new(operand),
                to,
            },
            ty,
            loc,
        ))
    }

    pub(super) fn check_macro(
        &mut self,
        mac: &syn::Macro,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
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
