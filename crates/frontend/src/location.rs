//! Source locations of `syn` nodes as [`Loc`]s.
//!
//! `syn`'s `Spanned::span()` re-tokenizes a whole expression to find its
//! extent, which is quadratic (and deeply recursive) on long expressions, so
//! the start and end of an expression are found here by walking only its
//! leftmost or rightmost spine, without recursion. Re-tokenizing can also be
//! exponential: `syn` decides where to print parentheses by rescanning the
//! right spine of every operand (`|| && && ... .. ..` took minutes), so no
//! node that may hold an expression (types, patterns, items, generic
//! arguments) is ever asked for its `span()` here.

use autobatch_types::Loc;
use proc_macro2::Span;
use syn::spanned::Spanned;

/// The first character of `span`. proc-macro2 columns are 0-based; ours are
/// 1-based. Inside a generated ODE solver, its call's start (`crate::ode`).
pub(crate) fn start_of(span: Span) -> Loc {
    let lc = span.start();
    if lc.line == 0 {
        return Loc::new(1, 1);
    }
    crate::ode::map_location(Loc::new(lc.line as u32, lc.column as u32 + 1), false)
}

/// Just past the last character of `span` (inside a generated ODE solver,
/// its call's end).
pub(crate) fn end_of(span: Span) -> Loc {
    let lc = span.end();
    if lc.line == 0 {
        return Loc::new(1, 2);
    }
    crate::ode::map_location(Loc::new(lc.line as u32, lc.column as u32 + 1), true)
}

/// Where the expression starts.
pub(crate) fn expr_start(expr: &syn::Expr) -> Loc {
    use syn::Expr as E;
    let mut e = expr;
    loop {
        if let Some(attr) = expr_attrs(e).first() {
            return start_of(attr.pound_token.span);
        }
        e = match e {
            E::Binary(b) => &b.left,
            E::Assign(a) => &a.left,
            E::Call(c) => &c.func,
            E::MethodCall(m) => &m.receiver,
            E::Field(f) => &f.base,
            E::Index(i) => &i.expr,
            E::Cast(c) => &c.expr,
            E::Try(t) => &t.expr,
            E::Await(a) => &a.base,
            E::Range(r) => match &r.start {
                Some(s) => s,
                None => return start_of(range_limits_span(&r.limits)),
            },
            E::Path(p) => return path_start(&p.qself, &p.path),
            E::Lit(l) => return start_of(l.lit.span()),
            E::Paren(p) => return start_of(p.paren_token.span.open()),
            E::Tuple(t) => return start_of(t.paren_token.span.open()),
            E::Array(a) => return start_of(a.bracket_token.span.open()),
            E::Repeat(r) => return start_of(r.bracket_token.span.open()),
            E::Block(b) => match &b.label {
                Some(l) => return start_of(l.name.apostrophe),
                None => return start_of(b.block.brace_token.span.open()),
            },
            E::If(i) => return start_of(i.if_token.span),
            E::While(w) => match &w.label {
                Some(l) => return start_of(l.name.apostrophe),
                None => return start_of(w.while_token.span),
            },
            E::Loop(l) => match &l.label {
                Some(label) => return start_of(label.name.apostrophe),
                None => return start_of(l.loop_token.span),
            },
            E::ForLoop(f) => match &f.label {
                Some(label) => return start_of(label.name.apostrophe),
                None => return start_of(f.for_token.span),
            },
            E::Unary(u) => return start_of(unary_op_span(&u.op)),
            E::Return(r) => return start_of(r.return_token.span),
            E::Break(b) => return start_of(b.break_token.span),
            E::Continue(c) => return start_of(c.continue_token.span),
            E::Macro(m) => return path_start(&None, &m.mac.path),
            E::Group(g) => &g.expr,
            E::Reference(r) => return start_of(r.and_token.span),
            E::Closure(c) => return start_of(closure_start(c)),
            E::Match(m) => return start_of(m.match_token.span),
            E::Unsafe(u) => return start_of(u.unsafe_token.span),
            E::Let(l) => return start_of(l.let_token.span),
            E::Struct(s) => return path_start(&s.qself, &s.path),
            E::Async(a) => return start_of(a.async_token.span),
            E::Const(c) => return start_of(c.const_token.span),
            E::TryBlock(t) => return start_of(t.try_token.span),
            E::Infer(i) => return start_of(i.underscore_token.span),
            E::Yield(y) => return start_of(y.yield_token.span),
            E::RawAddr(r) => return start_of(r.and_token.span),
            // Only `Verbatim` is left, which is tokens already.
            other => return start_of(other.span()),
        };
    }
}

/// Just past the end of the expression.
pub(crate) fn expr_end(expr: &syn::Expr) -> Loc {
    use syn::Expr as E;
    let mut e = expr;
    loop {
        e = match e {
            E::Binary(b) => &b.right,
            E::Assign(a) => &a.right,
            E::Unary(u) => &u.expr,
            E::Reference(r) => &r.expr,
            E::Group(g) => &g.expr,
            E::Call(c) => return end_of(c.paren_token.span.close()),
            E::MethodCall(m) => return end_of(m.paren_token.span.close()),
            E::Field(f) => return end_of(f.member.span()),
            E::Index(i) => return end_of(i.bracket_token.span.close()),
            E::Cast(c) => return end_of(type_end_span(&c.ty)),
            E::Path(p) => return path_end(&p.path),
            E::Lit(l) => return end_of(l.lit.span()),
            E::Paren(p) => return end_of(p.paren_token.span.close()),
            E::Tuple(t) => return end_of(t.paren_token.span.close()),
            E::Array(a) => return end_of(a.bracket_token.span.close()),
            E::Repeat(r) => return end_of(r.bracket_token.span.close()),
            E::Block(b) => return end_of(b.block.brace_token.span.close()),
            E::If(i) => match &i.else_branch {
                Some((_, else_expr)) => else_expr,
                None => return end_of(i.then_branch.brace_token.span.close()),
            },
            E::While(w) => return end_of(w.body.brace_token.span.close()),
            E::Loop(l) => return end_of(l.body.brace_token.span.close()),
            E::ForLoop(f) => return end_of(f.body.brace_token.span.close()),
            E::Return(r) => match &r.expr {
                Some(v) => v,
                None => return end_of(r.return_token.span),
            },
            E::Break(b) => match &b.expr {
                Some(v) => v,
                None => return end_of(b.break_token.span),
            },
            E::Continue(c) => return end_of(c.continue_token.span),
            E::Range(r) => match &r.end {
                Some(v) => v,
                None => return end_of(range_limits_span(&r.limits)),
            },
            E::Macro(m) => return end_of(macro_delimiter_close(&m.mac)),
            E::Try(t) => return end_of(t.question_token.span),
            E::Unsafe(u) => return end_of(u.block.brace_token.span.close()),
            E::Match(m) => return end_of(m.brace_token.span.close()),
            E::Closure(c) => &c.body,
            E::Let(l) => &l.expr,
            E::RawAddr(r) => &r.expr,
            E::Struct(s) => return end_of(s.brace_token.span.close()),
            E::Await(a) => return end_of(a.await_token.span),
            E::Async(a) => return end_of(a.block.brace_token.span.close()),
            E::Const(c) => return end_of(c.block.brace_token.span.close()),
            E::TryBlock(t) => return end_of(t.block.brace_token.span.close()),
            E::Infer(i) => return end_of(i.underscore_token.span),
            E::Yield(y) => match &y.expr {
                Some(v) => v,
                None => return end_of(y.yield_token.span),
            },
            // Only `Verbatim` is left, which is tokens already.
            other => return end_of(other.span()),
        };
    }
}

fn expr_attrs(e: &syn::Expr) -> &[syn::Attribute] {
    use syn::Expr as E;
    match e {
        E::Array(x) => &x.attrs,
        E::Assign(x) => &x.attrs,
        E::Binary(x) => &x.attrs,
        E::Block(x) => &x.attrs,
        E::Call(x) => &x.attrs,
        E::Cast(x) => &x.attrs,
        E::Field(x) => &x.attrs,
        E::ForLoop(x) => &x.attrs,
        E::If(x) => &x.attrs,
        E::Index(x) => &x.attrs,
        E::Lit(x) => &x.attrs,
        E::Loop(x) => &x.attrs,
        E::MethodCall(x) => &x.attrs,
        E::Paren(x) => &x.attrs,
        E::Path(x) => &x.attrs,
        E::Unary(x) => &x.attrs,
        E::While(x) => &x.attrs,
        _ => &[],
    }
}

pub(crate) fn path_start(qself: &Option<syn::QSelf>, path: &syn::Path) -> Loc {
    if let Some(q) = qself {
        return start_of(q.lt_token.span);
    }
    if let Some(colon) = &path.leading_colon {
        return start_of(colon.spans[0]);
    }
    match path.segments.first() {
        Some(seg) => start_of(seg.ident.span()),
        None => Loc::new(1, 1),
    }
}

pub(crate) fn path_end(path: &syn::Path) -> Loc {
    match path.segments.last() {
        Some(seg) => match &seg.arguments {
            syn::PathArguments::AngleBracketed(a) => end_of(a.gt_token.span),
            syn::PathArguments::Parenthesized(p) => end_of(p.paren_token.span.close()),
            syn::PathArguments::None => end_of(seg.ident.span()),
        },
        None => Loc::new(1, 2),
    }
}

fn unary_op_span(op: &syn::UnOp) -> Span {
    match op {
        syn::UnOp::Deref(t) => t.span,
        syn::UnOp::Not(t) => t.span,
        syn::UnOp::Neg(t) => t.span,
        other => other.span(),
    }
}

fn range_limits_span(limits: &syn::RangeLimits) -> Span {
    match limits {
        syn::RangeLimits::HalfOpen(t) => t.spans[0],
        syn::RangeLimits::Closed(t) => t.spans[0],
    }
}

fn closure_start(c: &syn::ExprClosure) -> Span {
    if let Some(m) = &c.movability {
        return m.span;
    }
    if let Some(a) = &c.asyncness {
        return a.span;
    }
    if let Some(m) = &c.capture {
        return m.span;
    }
    c.or1_token.span
}

fn macro_delimiter_close(mac: &syn::Macro) -> Span {
    match &mac.delimiter {
        syn::MacroDelimiter::Paren(p) => p.span.close(),
        syn::MacroDelimiter::Brace(b) => b.span.close(),
        syn::MacroDelimiter::Bracket(b) => b.span.close(),
    }
}

/// The span of the last token of a type (a type may hold expressions, in
/// array lengths and const arguments, so it is not re-tokenized).
pub(crate) fn type_end_span(ty: &syn::Type) -> Span {
    use syn::Type as T;
    let mut ty = ty;
    loop {
        ty = match ty {
            T::Path(p) => match p.path.segments.last() {
                Some(s) => return path_segment_end(s),
                None => {
                    return p
                        .path
                        .leading_colon
                        .map_or_else(Span::call_site, |c| c.spans[1])
                }
            },
            T::Array(a) => return a.bracket_token.span.close(),
            T::Slice(s) => return s.bracket_token.span.close(),
            T::Tuple(t) => return t.paren_token.span.close(),
            T::Paren(p) => return p.paren_token.span.close(),
            T::Group(g) => &g.elem,
            T::Reference(r) => &r.elem,
            T::Ptr(p) => &p.elem,
            T::BareFn(f) => match &f.output {
                syn::ReturnType::Type(_, out) => out,
                syn::ReturnType::Default => return f.paren_token.span.close(),
            },
            T::ImplTrait(i) => match i.bounds.last() {
                Some(b) => return bound_end(b).unwrap_or(i.impl_token.span),
                None => return i.impl_token.span,
            },
            T::TraitObject(o) => match (o.bounds.last(), o.dyn_token) {
                (Some(b), d) => {
                    return bound_end(b)
                        .or(d.map(|d| d.span))
                        .unwrap_or_else(Span::call_site)
                }
                (None, Some(d)) => return d.span,
                (None, None) => return Span::call_site(),
            },
            T::Never(n) => return n.bang_token.span,
            T::Infer(i) => return i.underscore_token.span,
            T::Macro(m) => return macro_delimiter_close(&m.mac),
            // Only `Verbatim` is left, which is tokens already.
            other => return other.span(),
        };
    }
}

fn path_segment_end(s: &syn::PathSegment) -> Span {
    match &s.arguments {
        syn::PathArguments::AngleBracketed(a) => a.gt_token.span,
        syn::PathArguments::Parenthesized(p) => match &p.output {
            syn::ReturnType::Type(_, out) => type_end_span(out),
            syn::ReturnType::Default => p.paren_token.span.close(),
        },
        syn::PathArguments::None => s.ident.span(),
    }
}

/// The last token of a trait or lifetime bound, if it has one to point at.
fn bound_end(b: &syn::TypeParamBound) -> Option<Span> {
    match b {
        syn::TypeParamBound::Trait(t) => match (&t.paren_token, t.path.segments.last()) {
            (Some(p), _) => Some(p.span.close()),
            (None, Some(s)) => Some(path_segment_end(s)),
            (None, None) => None,
        },
        syn::TypeParamBound::Lifetime(l) => Some(l.ident.span()),
        _ => None,
    }
}

/// The span of the first token of a type.
fn type_start_span(ty: &syn::Type) -> Span {
    use syn::Type as T;
    match ty {
        T::Path(p) => match (&p.qself, &p.path.leading_colon, p.path.segments.first()) {
            (Some(q), _, _) => q.lt_token.span,
            (None, Some(c), _) => c.spans[0],
            (None, None, Some(s)) => s.ident.span(),
            (None, None, None) => Span::call_site(),
        },
        T::Array(a) => a.bracket_token.span.open(),
        T::Slice(s) => s.bracket_token.span.open(),
        T::Tuple(t) => t.paren_token.span.open(),
        T::Paren(p) => p.paren_token.span.open(),
        T::Group(g) => type_start_span(&g.elem),
        T::Reference(r) => r.and_token.span,
        T::Ptr(p) => p.star_token.span,
        T::BareFn(f) => f.fn_token.span,
        T::ImplTrait(i) => i.impl_token.span,
        T::TraitObject(o) => match (o.dyn_token, o.bounds.first()) {
            (Some(d), _) => d.span,
            (None, Some(syn::TypeParamBound::Lifetime(l))) => l.apostrophe,
            (None, Some(syn::TypeParamBound::Trait(t))) => match t.path.segments.first() {
                Some(s) => s.ident.span(),
                None => Span::call_site(),
            },
            _ => Span::call_site(),
        },
        T::Never(n) => n.bang_token.span,
        T::Infer(i) => i.underscore_token.span,
        T::Macro(m) => match m.mac.path.segments.first() {
            Some(s) => s.ident.span(),
            None => Span::call_site(),
        },
        // Only `Verbatim` is left, which is tokens already.
        other => other.span(),
    }
}

/// Start and end of a type.
pub(crate) fn type_range(ty: &syn::Type) -> (Loc, Loc) {
    (start_of(type_start_span(ty)), end_of(type_end_span(ty)))
}
