//! Module-level checking: which items exist, their names, the values of
//! `const` items, the symbolic dimensions, and the resolution of written
//! types into [`Ty`]s. Function bodies are checked by `body`.

use std::collections::HashMap;

use autobatch_types::{Loc, ScalarType, SymbolId};
use syn::visit::Visit;

use crate::hir::{self, DimExpr, Literal, TensorTy, Ty};
use crate::location::{end_of, expr_end, expr_start, path_end, path_start, start_of, type_range};
use crate::Diagnostic;

mod const_eval;

use const_eval::{defined_in_terms_of_itself, length_out_of_range};

pub(crate) use const_eval::{
    check_array_size, eval_const_expr, float_literal_value, read_float_literal, read_int_literal,
    NumberLiteral, MAX_ARRAY_BYTES,
};

pub(crate) type CheckResult<T> = Result<T, Box<Diagnostic>>;

/// "`what` is not supported by autobatch", located at `loc..end`.
pub(crate) fn unsupported(what: &str, loc: Loc, end: Loc) -> Box<Diagnostic> {
    Box::new(Diagnostic::new(
        format!("{what} is not supported by autobatch"),
        loc,
        end,
        "not supported",
    ))
}

pub(crate) fn error(
    message: impl Into<String>,
    loc: Loc,
    end: Loc,
    label: impl Into<String>,
) -> Box<Diagnostic> {
    Box::new(Diagnostic::new(message, loc, end, label))
}

/// The value and type of a `const` item (or of a well-known constant such as `f64::MAX`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConstValue {
    pub ty: ScalarType,
    pub literal: Literal,
}

/// A function's signature, as callers see it.
#[derive(Clone, Debug)]
pub(crate) struct Signature {
    pub name: String,
    pub const_params: Vec<String>,
    /// (name, mutable, type, location of the name)
    pub params: Vec<(String, bool, Ty, Loc)>,
    pub ret: Ty,
    pub loc: Loc,
    pub name_end: Loc,
}

/// Something that a name at module level may refer to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ModuleName {
    Function(usize),
    /// A host primitive: its index in `ModuleScope::host_functions`.
    HostFunction(usize),
    Const,
    Static(usize),
}

/// Everything known at module level while function bodies are checked.
pub(crate) struct ModuleScope<'a> {
    pub source: &'a str,
    pub names: HashMap<String, (ModuleName, Loc)>,
    pub consts: HashMap<String, ConstValue>,
    pub symbols: Vec<String>,
    pub symbol_ids: HashMap<String, SymbolId>,
    pub statics: Vec<hir::Static>,
    pub signatures: Vec<Signature>,
    pub host_functions: Vec<hir::HostFunction>,
}

impl<'a> ModuleScope<'a> {
    fn new(source: &'a str) -> Self {
        ModuleScope {
            source,
            names: HashMap::new(),
            consts: HashMap::new(),
            symbols: Vec::new(),
            symbol_ids: HashMap::new(),
            statics: Vec::new(),
            signatures: Vec::new(),
            host_functions: Vec::new(),
        }
    }

    pub fn symbol(&mut self, name: &str) -> SymbolId {
        if let Some(id) = self.symbol_ids.get(name) {
            return *id;
        }
        let id = SymbolId(self.symbols.len() as u32);
        self.symbols.push(name.to_string());
        self.symbol_ids.insert(name.to_string(), id);
        id
    }

    /// Resolves a written type. `generics` are the const generic parameters in scope.
    pub fn resolve_type(&mut self, ty: &syn::Type, generics: &[String]) -> CheckResult<Ty> {
        let (loc, end) = type_range(ty);
        match ty {
            syn::Type::Paren(p) => self.resolve_type(&p.elem, generics),
            syn::Type::Group(g) => self.resolve_type(&g.elem, generics),
            syn::Type::Tuple(t) => {
                let mut items = Vec::new();
                for elem in &t.elems {
                    items.push(self.resolve_type(elem, generics)?);
                }
                Ok(Ty::Tuple(items))
            }
            syn::Type::Path(p) => {
                if p.qself.is_none() && p.path.segments.len() == 1 {
                    let seg = &p.path.segments[0];
                    let name = seg.ident.to_string();
                    if let (Some(s), syn::PathArguments::None) =
                        (ScalarType::from_name(&name), &seg.arguments)
                    {
                        return Ok(Ty::scalar(s));
                    }
                    let known = matches!(
                        name.as_str(),
                        "u8" | "u16"
                            | "u32"
                            | "u64"
                            | "u128"
                            | "i8"
                            | "i16"
                            | "i128"
                            | "isize"
                            | "f16"
                            | "f128"
                            | "char"
                    );
                    if known {
                        return Err(error(
                            format!("the type `{name}` is not supported by autobatch"),
                            loc,
                            end,
                            "unsupported type",
                        )
                        .map_note("the scalar types are bool, i32, i64, usize, f32 and f64"));
                    }
                }
                let text = path_text(&p.path);
                Err(
                    error(format!("unknown type `{text}`"), loc, end, "unknown type").map_note(
                        "autobatch has bool, i32, i64, usize, f32, f64, arrays `[T; N]` and tuples",
                    ),
                )
            }
            syn::Type::Array(a) => {
                let elem = self.resolve_type(&a.elem, generics)?;
                let Ty::Tensor(inner) = elem else {
                    return Err(error(
                        "arrays of tuples are not supported by autobatch",
                        loc,
                        end,
                        "array elements must be scalars or arrays",
                    ));
                };
                let dim = self.resolve_dim(&a.len, generics, &|_| false)?;
                let mut dims = vec![dim];
                dims.extend(inner.dims);
                let t = TensorTy::new(inner.elem, dims);
                check_array_size(&t, loc, end)?;
                Ok(Ty::Tensor(t))
            }
            syn::Type::Reference(_) => Err(unsupported("a reference type (`&`)", loc, end)),
            syn::Type::Slice(_) => Err(unsupported("a slice type `[T]`", loc, end)
                .map_note("arrays need a length: `[T; N]`")),
            syn::Type::Ptr(_) => Err(unsupported("a raw pointer type", loc, end)),
            syn::Type::BareFn(_) => Err(unsupported("a function pointer type", loc, end)),
            syn::Type::ImplTrait(_) => Err(unsupported("`impl Trait`", loc, end)),
            syn::Type::TraitObject(_) => Err(unsupported("a trait object type", loc, end)),
            syn::Type::Never(_) => Err(unsupported("the never type `!`", loc, end)),
            syn::Type::Infer(_) => Err(error(
                "the type placeholder `_` is not supported here; write the type",
                loc,
                end,
                "write the type",
            )),
            syn::Type::Macro(_) => Err(unsupported("a macro in type position", loc, end)),
            _ => Err(unsupported("this type", loc, end)),
        }
    }

    /// Resolves an array length. `is_local` tells whether a name is a local
    /// variable in scope (a length cannot be one).
    pub fn resolve_dim(
        &mut self,
        expr: &syn::Expr,
        generics: &[String],
        is_local: &dyn Fn(&str) -> bool,
    ) -> CheckResult<DimExpr> {
        let (loc, end) = (expr_start(expr), expr_end(expr));
        match expr {
            syn::Expr::Paren(p) => return self.resolve_dim(&p.expr, generics, is_local),
            syn::Expr::Group(g) => return self.resolve_dim(&g.expr, generics, is_local),
            syn::Expr::Block(b) if b.block.stmts.len() == 1 && b.label.is_none() => {
                if let syn::Stmt::Expr(inner, None) = &b.block.stmts[0] {
                    return self.resolve_dim(inner, generics, is_local);
                }
            }
            syn::Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
                let seg = &p.path.segments[0];
                if matches!(seg.arguments, syn::PathArguments::None) {
                    let name = seg.ident.to_string();
                    if let Some(i) = generics.iter().position(|g| *g == name) {
                        return Ok(DimExpr::Generic(i as u32));
                    }
                    if let Some(c) = self.consts.get(&name) {
                        return match (c.ty, c.literal) {
                            (ScalarType::Usize, Literal::Int(v)) => Ok(DimExpr::Fixed(v as u64)),
                            (ty, _) => Err(error(
                                format!("an array length must be a `usize`, but the constant `{name}` is `{ty}`"),
                                loc,
                                end,
                                "not a usize",
                            )),
                        };
                    }
                    if is_local(&name) {
                        return Err(error(
                            format!("the array length `{name}` is a variable; lengths must be known before the program runs"),
                            loc,
                            end,
                            "a variable cannot be a length",
                        )
                        .map_note("use a number, a `const`, a const generic parameter or a symbolic dimension"));
                    }
                    if let Some((kind, _)) = self.names.get(&name) {
                        if !matches!(kind, ModuleName::Const) {
                            return Err(error(
                                format!("`{name}` cannot be used as an array length"),
                                loc,
                                end,
                                "not a length",
                            ));
                        }
                    }
                    return Ok(DimExpr::Symbol(self.symbol(&name)));
                }
            }
            _ => {}
        }
        match eval_const_expr(self, expr, Some(ScalarType::Usize), &mut Vec::new()) {
            Ok(ConstValue { literal: Literal::Int(v), ty: ScalarType::Usize }) => {
                if v > i128::from(MAX_ARRAY_BYTES) {
                    let text = format!("the array length {v} is out of range");
                    return Err(length_out_of_range(text, loc, end));
                }
                Ok(DimExpr::Fixed(v as u64))
            }
            Ok(_) => Err(error("an array length must be a `usize`", loc, end, "not a usize")),
            // A literal beyond 64 bits.
            Err(d) if d.label == "too large" => {
                let text = match expr {
                    syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => {
                        format!("the array length {} is out of range", i.base10_digits())
                    }
                    _ => "the array length is out of range".to_owned(),
                };
                Err(length_out_of_range(text, loc, end))
            }
            // A constant expression that overflows, divides by zero, is negative...
            Err(d) if d.label != "not a constant expression" && d.label != "not a constant" => {
                Err(d)
            }
            Err(_) => Err(error(
                "an array length must be a number, a `const`, a const generic parameter or a symbolic dimension name",
                loc,
                end,
                "unsupported array length",
            )),
        }
    }

    /// The value of a well-known constant path like `f64::MAX` or `std::f64::consts::PI`.
    pub fn well_known_constant(path: &syn::Path) -> Option<ConstValue> {
        let mut parts: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if path
            .segments
            .iter()
            .any(|s| !matches!(s.arguments, syn::PathArguments::None))
        {
            return None;
        }
        if parts.first().is_some_and(|p| p == "std" || p == "core") {
            parts.remove(0);
        }
        let float = |ty: ScalarType, v: f64| {
            let literal = if ty == ScalarType::F32 {
                Literal::Float {
                    as_f64: v as f32 as f64,
                    as_f32: v as f32,
                }
            } else {
                Literal::Float {
                    as_f64: v,
                    as_f32: v as f32,
                }
            };
            Some(ConstValue { ty, literal })
        };
        let int = |ty: ScalarType, v: i128| {
            Some(ConstValue {
                ty,
                literal: Literal::Int(v),
            })
        };
        let parts: Vec<&str> = parts.iter().map(|s| s.as_str()).collect();
        match parts.as_slice() {
            ["i32", "MAX"] => int(ScalarType::I32, i32::MAX as i128),
            ["i32", "MIN"] => int(ScalarType::I32, i32::MIN as i128),
            ["i64", "MAX"] => int(ScalarType::I64, i64::MAX as i128),
            ["i64", "MIN"] => int(ScalarType::I64, i64::MIN as i128),
            ["usize", "MAX"] => int(ScalarType::Usize, u64::MAX as i128),
            ["usize", "MIN"] => int(ScalarType::Usize, 0),
            ["f32", name] => {
                let v = f32_limit(name)?;
                Some(ConstValue {
                    ty: ScalarType::F32,
                    literal: Literal::Float {
                        as_f64: v as f64,
                        as_f32: v,
                    },
                })
            }
            ["f64", name] => float(ScalarType::F64, f64_limit(name)?),
            [width @ ("f32" | "f64"), "consts", name] => {
                let v = math_constant(name)?;
                float(
                    if *width == "f32" {
                        ScalarType::F32
                    } else {
                        ScalarType::F64
                    },
                    v,
                )
            }
            _ => None,
        }
    }
}

/// The `f32` constant `f32::NAME`: its limits, infinities and NaN.
fn f32_limit(name: &str) -> Option<f32> {
    Some(match name {
        "MAX" => f32::MAX,
        "MIN" => f32::MIN,
        "MIN_POSITIVE" => f32::MIN_POSITIVE,
        "EPSILON" => f32::EPSILON,
        "INFINITY" => f32::INFINITY,
        "NEG_INFINITY" => f32::NEG_INFINITY,
        "NAN" => f32::NAN,
        _ => return None,
    })
}

/// The `f64` constant `f64::NAME`: its limits, infinities and NaN.
fn f64_limit(name: &str) -> Option<f64> {
    Some(match name {
        "MAX" => f64::MAX,
        "MIN" => f64::MIN,
        "MIN_POSITIVE" => f64::MIN_POSITIVE,
        "EPSILON" => f64::EPSILON,
        "INFINITY" => f64::INFINITY,
        "NEG_INFINITY" => f64::NEG_INFINITY,
        "NAN" => f64::NAN,
        _ => return None,
    })
}

/// The mathematical constant `f64::consts::NAME` (also read as `f32`'s,
/// rounded).
fn math_constant(name: &str) -> Option<f64> {
    use std::f64::consts as c;
    Some(match name {
        "PI" => c::PI,
        "TAU" => c::TAU,
        "E" => c::E,
        "LN_2" => c::LN_2,
        "LN_10" => c::LN_10,
        "LOG2_E" => c::LOG2_E,
        "LOG10_E" => c::LOG10_E,
        "SQRT_2" => c::SQRT_2,
        "FRAC_1_SQRT_2" => c::FRAC_1_SQRT_2,
        "FRAC_PI_2" => c::FRAC_PI_2,
        "FRAC_PI_3" => c::FRAC_PI_3,
        "FRAC_PI_4" => c::FRAC_PI_4,
        "FRAC_PI_6" => c::FRAC_PI_6,
        "FRAC_PI_8" => c::FRAC_PI_8,
        "FRAC_1_PI" => c::FRAC_1_PI,
        "FRAC_2_PI" => c::FRAC_2_PI,
        "FRAC_2_SQRT_PI" => c::FRAC_2_SQRT_PI,
        _ => return None,
    })
}

/// Helper to add a note to a boxed diagnostic.
pub(crate) trait MapNote {
    fn map_note(self, note: impl Into<String>) -> Self;
}

impl MapNote for Box<Diagnostic> {
    fn map_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

pub(crate) fn path_text(path: &syn::Path) -> String {
    let mut out = String::new();
    if path.leading_colon.is_some() {
        out.push_str("::");
    }
    for (i, seg) in path.segments.iter().enumerate() {
        if i > 0 {
            out.push_str("::");
        }
        out.push_str(&seg.ident.to_string());
        if !matches!(seg.arguments, syn::PathArguments::None) {
            out.push_str("<...>");
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Symbol collection

/// Collects the names used as array lengths that are neither constants nor
/// const generic parameters, in order of first appearance in the source.
struct SymbolCollector<'s, 'a> {
    scope: &'s mut ModuleScope<'a>,
    generics: Vec<String>,
    depth: usize,
}

impl SymbolCollector<'_, '_> {
    fn length(&mut self, len: &syn::Expr) {
        let mut e = len;
        loop {
            match e {
                syn::Expr::Paren(p) => e = &p.expr,
                syn::Expr::Group(g) => e = &g.expr,
                syn::Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                    syn::Stmt::Expr(inner, None) => e = inner,
                    _ => return,
                },
                _ => break,
            }
        }
        if let syn::Expr::Path(p) = e {
            if let Some(ident) = p.path.get_ident() {
                let name = ident.to_string();
                if !self.generics.contains(&name)
                    && !self.scope.consts.contains_key(&name)
                    && !self.scope.names.contains_key(&name)
                {
                    self.scope.symbol(&name);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for SymbolCollector<'_, '_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.generics = const_generic_names(&f.sig.generics);
        syn::visit::visit_item_fn(self, f);
        self.generics.clear();
    }
    fn visit_type_array(&mut self, a: &'ast syn::TypeArray) {
        self.visit_type(&a.elem);
        self.length(&a.len);
    }
    fn visit_expr_repeat(&mut self, r: &'ast syn::ExprRepeat) {
        self.visit_expr(&r.expr);
        self.length(&r.len);
    }
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        // The checker reports expressions nested this deeply; here we only
        // avoid descending into them.
        if self.depth > crate::body::MAX_EXPRESSION_DEPTH {
            return;
        }
        self.depth += 1;
        syn::visit::visit_expr(self, e);
        self.depth -= 1;
    }
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            if let Some(seg) = p.path.segments.last() {
                if let syn::PathArguments::AngleBracketed(args) = &seg.arguments {
                    for arg in &args.args {
                        match arg {
                            syn::GenericArgument::Const(e) => self.length(e),
                            syn::GenericArgument::Type(syn::Type::Path(tp))
                                if tp.path.get_ident().is_some() =>
                            {
                                let name = tp.path.segments[0].ident.to_string();
                                if ScalarType::from_name(&name).is_none()
                                    && !self.generics.contains(&name)
                                    && !self.scope.consts.contains_key(&name)
                                    && !self.scope.names.contains_key(&name)
                                {
                                    self.scope.symbol(&name);
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}

pub(crate) fn const_generic_names(generics: &syn::Generics) -> Vec<String> {
    generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The module

/// Where an item's keyword is, and what the item is, in words.
pub(crate) fn item_name_span(item: &syn::Item) -> (Loc, Loc, &'static str) {
    use syn::spanned::Spanned;
    let (span, what) = match item {
        syn::Item::Fn(f) => (f.sig.fn_token.span, "a function"),
        syn::Item::Const(c) => (c.const_token.span, "a `const`"),
        syn::Item::Struct(s) => (s.struct_token.span, "`struct`"),
        syn::Item::Enum(e) => (e.enum_token.span, "`enum`"),
        syn::Item::Union(u) => (u.union_token.span, "`union`"),
        syn::Item::Use(u) => (u.use_token.span, "`use`"),
        syn::Item::Impl(i) => (i.impl_token.span, "`impl`"),
        syn::Item::Trait(t) => (t.trait_token.span, "`trait`"),
        syn::Item::TraitAlias(t) => (t.trait_token.span, "a trait alias"),
        syn::Item::Mod(m) => (m.mod_token.span, "`mod`"),
        syn::Item::Type(t) => (t.type_token.span, "a type alias (`type`)"),
        syn::Item::Macro(m) => {
            let is_rules = m.mac.path.is_ident("macro_rules");
            (
                m.mac
                    .path
                    .segments
                    .first()
                    .map(|s| s.ident.span())
                    .unwrap_or_else(|| m.span()),
                if is_rules {
                    "`macro_rules!`"
                } else {
                    "a macro at item level"
                },
            )
        }
        syn::Item::ExternCrate(e) => (e.extern_token.span, "`extern crate`"),
        syn::Item::Static(s) => (
            s.static_token.span,
            "`static` outside an `extern \"autobatch\"` block",
        ),
        syn::Item::ForeignMod(f) => (f.abi.extern_token.span, "this `extern` block"),
        other => (other.span(), "this item"),
    };
    (start_of(span), end_of(span), what)
}

/// Checks a parsed file: items, constants, signatures, then every body.
pub(crate) fn check_file(source: &str, file: &syn::File) -> Result<hir::Module, Vec<Diagnostic>> {
    let mut scope = ModuleScope::new(source);
    let mut errors: Vec<Diagnostic> = Vec::new();

    // 1. Names of every item, rejecting unsupported items.
    let items = collect_items(&mut scope, file, &mut errors);

    // 2. Constants, in dependency order (each may refer to the others).
    let const_items: HashMap<String, &syn::ItemConst> = items
        .consts
        .iter()
        .map(|c| (c.ident.to_string(), *c))
        .collect();
    for c in &items.consts {
        let mut in_progress = Vec::new();
        if let Err(d) = evaluate_const(&mut scope, &const_items, c, &mut in_progress, 0) {
            if !errors.contains(&d) {
                errors.push(*d);
            }
        }
    }

    // 3. Symbolic dimensions, in order of first appearance.
    {
        let mut collector = SymbolCollector {
            scope: &mut scope,
            generics: Vec::new(),
            depth: 0,
        };
        collector.visit_file(file);
    }

    // 4. Statics and signatures.
    for s in &items.statics {
        resolve_static(&mut scope, s, &mut errors);
    }
    for f in &items.host_functions {
        resolve_host_function(&mut scope, f, &mut errors);
    }
    let signature_ok: Vec<bool> = items
        .functions
        .iter()
        .map(|f| resolve_function_signature(&mut scope, f, &mut errors))
        .collect();

    // 5. Bodies.
    let mut checked = Vec::new();
    for (index, f) in items.functions.iter().enumerate() {
        if !signature_ok[index] {
            continue;
        }
        match crate::body::check_function(&mut scope, index, f) {
            Ok(function) => checked.push(function),
            Err(d) => errors.push(*d),
        }
    }
    if !errors.is_empty() {
        errors.sort_by_key(|d| d.loc);
        errors.dedup();
        return Err(errors);
    }
    let module = hir::Module {
        symbols: scope.symbols,
        statics: scope.statics,
        functions: checked,
        host_functions: scope.host_functions,
    };
    crate::differentiable::check_module(&module)?;
    Ok(module)
}

/// The items of a file that name something, by kind, in source order.
#[derive(Default)]
struct Items<'f> {
    consts: Vec<&'f syn::ItemConst>,
    functions: Vec<&'f syn::ItemFn>,
    /// `static`s of `extern "autobatch"` blocks.
    statics: Vec<&'f syn::ForeignItemStatic>,
    /// `fn` declarations of `extern "autobatch"` blocks.
    host_functions: Vec<&'f syn::ForeignItemFn>,
}

/// Declares every item's name in `scope`; an unsupported item or a name
/// defined twice is an error.
fn collect_items<'f>(
    scope: &mut ModuleScope,
    file: &'f syn::File,
    errors: &mut Vec<Diagnostic>,
) -> Items<'f> {
    let mut items = Items::default();
    for item in &file.items {
        match item {
            syn::Item::Const(c) => {
                if declare(scope, errors, &c.ident, ModuleName::Const) {
                    items.consts.push(c);
                }
            }
            syn::Item::Fn(f) => {
                let kind = ModuleName::Function(items.functions.len());
                if declare(scope, errors, &f.sig.ident, kind) {
                    items.functions.push(f);
                }
            }
            syn::Item::ForeignMod(m)
                if m.abi
                    .name
                    .as_ref()
                    .is_some_and(|n| n.value() == "autobatch") =>
            {
                for foreign in &m.items {
                    collect_foreign_item(scope, foreign, &mut items, errors);
                }
            }
            syn::Item::ForeignMod(m) => {
                let span = m.abi.extern_token.span;
                errors.push(*error(
                    "only `extern \"autobatch\"` blocks are supported",
                    start_of(span),
                    end_of(span),
                    "write `extern \"autobatch\"`",
                ));
            }
            other => {
                let (loc, end, what) = item_name_span(other);
                errors.push(*unsupported(what, loc, end));
            }
        }
    }
    items
}

/// One declaration of an `extern "autobatch"` block: a `static` or a `fn`.
fn collect_foreign_item<'f>(
    scope: &mut ModuleScope,
    foreign: &'f syn::ForeignItem,
    items: &mut Items<'f>,
    errors: &mut Vec<Diagnostic>,
) {
    match foreign {
        syn::ForeignItem::Static(s) => {
            if let syn::StaticMutability::Mut(t) = &s.mutability {
                errors.push(*unsupported(
                    "`static mut`",
                    start_of(t.span),
                    end_of(t.span),
                ));
                return;
            }
            if declare(
                scope,
                errors,
                &s.ident,
                ModuleName::Static(items.statics.len()),
            ) {
                items.statics.push(s);
            }
        }
        syn::ForeignItem::Fn(f) => {
            let index = items.host_functions.len();
            if declare(scope, errors, &f.sig.ident, ModuleName::HostFunction(index)) {
                items.host_functions.push(f);
            }
        }
        other => {
            use syn::spanned::Spanned;
            // Not `other.span()`: items are not re-tokenized (see `location`).
            let span = match other {
                syn::ForeignItem::Type(t) => t.type_token.span,
                syn::ForeignItem::Macro(m) => match m.mac.path.segments.first() {
                    Some(s) => s.ident.span(),
                    None => m.mac.bang_token.span,
                },
                verbatim => verbatim.span(),
            };
            errors.push(*error(
                "only `static` and `fn` declarations may appear in an `extern \"autobatch\"` block",
                start_of(span),
                end_of(span),
                "not supported here",
            ));
        }
    }
}

/// Declares the module-level name `ident` as `kind`; false (and an error)
/// if the name is taken.
fn declare(
    scope: &mut ModuleScope,
    errors: &mut Vec<Diagnostic>,
    ident: &syn::Ident,
    kind: ModuleName,
) -> bool {
    let name = ident.to_string();
    let loc = start_of(ident.span());
    if let Some((_, first)) = scope.names.get(&name) {
        errors.push(
            Diagnostic::new(
                format!("the name `{name}` is defined more than once"),
                loc,
                end_of(ident.span()),
                "defined again here",
            )
            .with_note(format!(
                "first defined at line {}, column {}",
                first.line, first.column
            )),
        );
        return false;
    }
    scope.names.insert(name, (kind, loc));
    true
}

/// Adds the static `s` to `scope` (an `f64` in place of a type in error,
/// so that its index stays right).
fn resolve_static(
    scope: &mut ModuleScope,
    s: &syn::ForeignItemStatic,
    errors: &mut Vec<Diagnostic>,
) {
    let loc = start_of(s.ident.span());
    let ty = match scope.resolve_type(&s.ty, &[]) {
        Ok(Ty::Tensor(ty)) => ty,
        Ok(_) => {
            let (l, e) = type_range(&s.ty);
            errors.push(*error(
                "a static must be a scalar or an array, not a tuple",
                l,
                e,
                "tuple type",
            ));
            TensorTy::scalar(ScalarType::F64)
        }
        Err(d) => {
            errors.push(*d);
            TensorTy::scalar(ScalarType::F64)
        }
    };
    scope.statics.push(hir::Static {
        name: s.ident.to_string(),
        ty,
        loc,
    });
}

/// Whether a host primitive's signature takes and returns numbers, `bool`s
/// or arrays of them: one value each (a host function gets one tensor per
/// operand and gives one).
fn check_tensor_signature(sig: &Signature) -> Result<(), Box<Diagnostic>> {
    let not_tensor = |what: String, (loc, end): (Loc, Loc)| {
        Box::new(
            Diagnostic::new(
                format!("{what} of host primitive `{}` is not a number, a `bool` or an array", sig.name),
                loc,
                end,
                "not one value",
            )
            .with_note("a host primitive takes and returns numbers, `bool`s or arrays of them; pass a tuple's parts as separate parameters"),
        )
    };
    for (name, _, ty, at) in &sig.params {
        if !matches!(ty, Ty::Tensor(_)) {
            let end = Loc {
                line: at.line,
                column: at.column + name.chars().count() as u32,
            };
            return Err(not_tensor(format!("parameter `{name}`"), (*at, end)));
        }
    }
    if !matches!(sig.ret, Ty::Tensor(_)) {
        return Err(not_tensor("the result".to_owned(), (sig.loc, sig.name_end)));
    }
    Ok(())
}

/// Adds the host primitive `f` to `scope` (with no parameters if its
/// signature is in error).
fn resolve_host_function(
    scope: &mut ModuleScope,
    f: &syn::ForeignItemFn,
    errors: &mut Vec<Diagnostic>,
) {
    let host = match resolve_signature(scope, &f.sig, false) {
        Ok(sig) => {
            // Calls are still checked against the signature as written.
            if let Err(d) = check_tensor_signature(&sig) {
                errors.push(*d);
            }
            hir::HostFunction {
                name: sig.name,
                params: sig.params.into_iter().map(|(n, _, t, _)| (n, t)).collect(),
                ret: sig.ret,
                loc: sig.loc,
            }
        }
        Err(d) => {
            errors.push(*d);
            hir::HostFunction {
                name: f.sig.ident.to_string(),
                params: Vec::new(),
                ret: Ty::unit(),
                loc: start_of(f.sig.fn_token.span),
            }
        }
    };
    scope.host_functions.push(host);
}

/// Adds the signature of `f` to `scope`; whether it resolved (a stand-in
/// keeps the indices right otherwise, and the body is not checked).
fn resolve_function_signature(
    scope: &mut ModuleScope,
    f: &syn::ItemFn,
    errors: &mut Vec<Diagnostic>,
) -> bool {
    match resolve_signature(scope, &f.sig, true) {
        Ok(sig) => {
            scope.signatures.push(sig);
            true
        }
        Err(d) => {
            errors.push(*d);
            scope.signatures.push(Signature {
                name: f.sig.ident.to_string(),
                const_params: Vec::new(),
                params: Vec::new(),
                ret: Ty::unit(),
                loc: start_of(f.sig.fn_token.span),
                name_end: end_of(f.sig.ident.span()),
            });
            false
        }
    }
}

fn evaluate_const(
    scope: &mut ModuleScope,
    items: &HashMap<String, &syn::ItemConst>,
    item: &syn::ItemConst,
    in_progress: &mut Vec<String>,
    depth: usize,
) -> CheckResult<ConstValue> {
    let name = item.ident.to_string();
    if let Some(v) = scope.consts.get(&name) {
        return Ok(*v);
    }
    let (loc, end) = (start_of(item.ident.span()), end_of(item.ident.span()));
    if in_progress.contains(&name) {
        return Err(defined_in_terms_of_itself(&name, loc, end));
    }
    if depth > crate::guard::MAX_NESTING {
        return Err(Box::new(crate::guard::too_deep(loc, end)));
    }
    if !item.generics.params.is_empty() {
        let t = item.const_token.span;
        return Err(unsupported("a generic `const`", start_of(t), end_of(t)));
    }
    let ty = match scope.resolve_type(&item.ty, &[])? {
        Ty::Tensor(t) if t.is_scalar() => t.elem,
        _ => {
            let (l, e) = type_range(&item.ty);
            return Err(error(
                "a `const` must have a scalar type",
                l,
                e,
                "not a scalar type",
            )
            .map_note("constants are integers, floats or bools"));
        }
    };
    // Evaluate the constants this one refers to first.
    in_progress.push(name.clone());
    let mut referenced = Vec::new();
    collect_paths(&item.expr, &mut referenced, 0);
    for r in referenced {
        if let Some(other) = items.get(&r) {
            if in_progress.contains(&r) {
                in_progress.pop();
                return Err(defined_in_terms_of_itself(&name, loc, end));
            }
            evaluate_const(scope, items, other, in_progress, depth + 1)?;
        }
    }
    in_progress.pop();
    let value = eval_const_expr(scope, &item.expr, Some(ty), in_progress)?;
    scope.consts.insert(name, value);
    Ok(value)
}

fn collect_paths(expr: &syn::Expr, out: &mut Vec<String>, depth: usize) {
    if depth > crate::guard::MAX_NESTING {
        return;
    }
    match expr {
        syn::Expr::Path(p) => {
            if let Some(i) = p.path.get_ident() {
                out.push(i.to_string());
            }
        }
        syn::Expr::Paren(p) => collect_paths(&p.expr, out, depth + 1),
        syn::Expr::Group(g) => collect_paths(&g.expr, out, depth + 1),
        syn::Expr::Unary(u) => collect_paths(&u.expr, out, depth + 1),
        syn::Expr::Cast(c) => collect_paths(&c.expr, out, depth + 1),
        syn::Expr::Binary(b) => {
            collect_paths(&b.left, out, depth + 1);
            collect_paths(&b.right, out, depth + 1);
        }
        _ => {}
    }
}

/// Resolves a function signature; `allow_generics` is false for host functions.
fn resolve_signature(
    scope: &mut ModuleScope,
    sig: &syn::Signature,
    allow_generics: bool,
) -> CheckResult<Signature> {
    reject_qualifiers(sig)?;
    let const_params = const_params(sig, allow_generics)?;
    let mut params: Vec<(String, bool, Ty, Loc)> = Vec::new();
    for input in &sig.inputs {
        let pt = match input {
            syn::FnArg::Receiver(r) => {
                let s = r.self_token.span;
                return Err(unsupported("a `self` parameter", start_of(s), end_of(s)));
            }
            syn::FnArg::Typed(pt) => pt,
        };
        let ty = scope.resolve_type(&pt.ty, &const_params)?;
        let (pname, mutable, ploc) = parameter_name(&pt.pat)?;
        if pname != "_" && params.iter().any(|(n, _, _, _)| *n == pname) {
            let (l, e) = pattern_range(&pt.pat);
            return Err(error(
                format!("the parameter name `{pname}` is used more than once"),
                l,
                e,
                "used again here",
            ));
        }
        params.push((pname, mutable, ty, ploc));
    }
    let ret = match &sig.output {
        syn::ReturnType::Default => Ty::unit(),
        syn::ReturnType::Type(_, ty) => scope.resolve_type(ty, &const_params)?,
    };
    Ok(Signature {
        name: sig.ident.to_string(),
        const_params,
        params,
        ret,
        loc: start_of(sig.fn_token.span),
        name_end: end_of(sig.ident.span()),
    })
}

/// Rejects `const fn`, `async`, `unsafe`, an ABI, variadics and `where`.
fn reject_qualifiers(sig: &syn::Signature) -> CheckResult<()> {
    if let Some(t) = &sig.constness {
        return Err(unsupported("`const fn`", start_of(t.span), end_of(t.span)));
    }
    if let Some(t) = &sig.asyncness {
        return Err(unsupported("`async`", start_of(t.span), end_of(t.span)));
    }
    if let Some(t) = &sig.unsafety {
        return Err(unsupported("`unsafe`", start_of(t.span), end_of(t.span)));
    }
    if let Some(abi) = &sig.abi {
        let t = abi.extern_token.span;
        return Err(unsupported(
            "an `extern` function ABI",
            start_of(t),
            end_of(t),
        ));
    }
    if let Some(v) = &sig.variadic {
        let t = v.dots.spans[0];
        return Err(unsupported("a variadic function", start_of(t), end_of(t)));
    }
    if let Some(w) = &sig.generics.where_clause {
        let t = w.where_token.span;
        return Err(unsupported("a `where` clause", start_of(t), end_of(t)));
    }
    Ok(())
}

/// The names of the const generic parameters (`<const K: usize>`), the only
/// generics there are (and none if `allow_generics` is false).
fn const_params(sig: &syn::Signature, allow_generics: bool) -> CheckResult<Vec<String>> {
    let mut const_params = Vec::new();
    for param in &sig.generics.params {
        match param {
            syn::GenericParam::Lifetime(l) => {
                let s = l.lifetime.apostrophe;
                return Err(unsupported(
                    "a lifetime parameter",
                    start_of(s),
                    end_of(l.lifetime.ident.span()),
                ));
            }
            syn::GenericParam::Type(t) => {
                let s = t.ident.span();
                return Err(
                    unsupported("a generic type parameter", start_of(s), end_of(s)).map_note(
                        "only const generic parameters are supported: `<const K: usize>`",
                    ),
                );
            }
            syn::GenericParam::Const(c) => {
                let (cl, ce) = (start_of(c.const_token.span), end_of(c.ident.span()));
                if !allow_generics {
                    return Err(unsupported("a generic host function", cl, ce));
                }
                let is_usize = matches!(&c.ty, syn::Type::Path(p) if p.path.is_ident("usize"));
                if !is_usize {
                    let (tl, te) = type_range(&c.ty);
                    return Err(error(
                        "a const generic parameter must be a `usize`",
                        tl,
                        te,
                        "expected `usize`",
                    ));
                }
                if c.default.is_some() {
                    return Err(unsupported(
                        "a default value for a const generic parameter",
                        cl,
                        ce,
                    ));
                }
                const_params.push(c.ident.to_string());
            }
        }
    }
    Ok(const_params)
}

/// A parameter's name (`_` for a wildcard), whether it is `mut`, and where
/// the name is.
fn parameter_name(pat: &syn::Pat) -> CheckResult<(String, bool, Loc)> {
    match pat {
        syn::Pat::Ident(pi) => {
            if let Some(b) = &pi.by_ref {
                return Err(unsupported(
                    "`ref` bindings",
                    start_of(b.span),
                    end_of(b.span),
                ));
            }
            if let Some((at, _)) = &pi.subpat {
                return Err(unsupported(
                    "`@` patterns",
                    start_of(at.span),
                    end_of(at.span),
                ));
            }
            Ok((
                pi.ident.to_string(),
                pi.mutability.is_some(),
                start_of(pi.ident.span()),
            ))
        }
        syn::Pat::Wild(w) => Ok(("_".to_string(), false, start_of(w.underscore_token.span))),
        other => {
            let (l, e) = pattern_range(other);
            Err(unsupported("this parameter pattern", l, e)
                .map_note("parameters are written `name: type`"))
        }
    }
}

/// Start and end of a pattern.
pub(crate) fn pattern_range(pat: &syn::Pat) -> (Loc, Loc) {
    use syn::spanned::Spanned;
    match pat {
        syn::Pat::Ident(p) => {
            let start = p
                .mutability
                .map(|m| m.span)
                .unwrap_or_else(|| p.ident.span());
            (start_of(start), end_of(p.ident.span()))
        }
        syn::Pat::Wild(w) => (
            start_of(w.underscore_token.span),
            end_of(w.underscore_token.span),
        ),
        syn::Pat::Tuple(t) => (
            start_of(t.paren_token.span.open()),
            end_of(t.paren_token.span.close()),
        ),
        syn::Pat::Path(p) => (path_start(&p.qself, &p.path), path_end(&p.path)),
        // A pattern may hold expressions, which are never re-tokenized (see `location`).
        syn::Pat::Lit(l) => (start_of(l.lit.span()), end_of(l.lit.span())),
        syn::Pat::Const(c) => (
            start_of(c.const_token.span),
            end_of(c.block.brace_token.span.close()),
        ),
        syn::Pat::Range(r) => {
            let limits = match &r.limits {
                syn::RangeLimits::HalfOpen(t) => (t.spans[0], t.spans[1]),
                syn::RangeLimits::Closed(t) => (t.spans[0], t.spans[2]),
            };
            let start = r.start.as_deref().map_or(start_of(limits.0), expr_start);
            let end = r.end.as_deref().map_or(end_of(limits.1), expr_end);
            (start, end)
        }
        syn::Pat::Paren(p) => (
            start_of(p.paren_token.span.open()),
            end_of(p.paren_token.span.close()),
        ),
        syn::Pat::Slice(p) => (
            start_of(p.bracket_token.span.open()),
            end_of(p.bracket_token.span.close()),
        ),
        syn::Pat::Struct(p) => (
            path_start(&p.qself, &p.path),
            end_of(p.brace_token.span.close()),
        ),
        syn::Pat::TupleStruct(p) => (
            path_start(&p.qself, &p.path),
            end_of(p.paren_token.span.close()),
        ),
        syn::Pat::Rest(r) => (
            start_of(r.dot2_token.spans[0]),
            end_of(r.dot2_token.spans[1]),
        ),
        syn::Pat::Macro(m) => (path_start(&None, &m.mac.path), path_end(&m.mac.path)),
        syn::Pat::Reference(r) => (start_of(r.and_token.span), pattern_range(&r.pat).1),
        syn::Pat::Type(t) => (pattern_range(&t.pat).0, type_range(&t.ty).1),
        syn::Pat::Or(o) => match (o.cases.first(), o.cases.last()) {
            (Some(first), Some(last)) => (pattern_range(first).0, pattern_range(last).1),
            _ => (Loc::new(1, 1), Loc::new(1, 2)),
        },
        // Only `Verbatim` is left, which is tokens already.
        other => (start_of(other.span()), end_of(other.span())),
    }
}
