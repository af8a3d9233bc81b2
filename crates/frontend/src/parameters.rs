//! A model's parameters declared with their constraints, lowered to the
//! form the sampler runs.
//!
//! A model written as `fn model(mu: f64, #[lower = 0.0] tau: f64,
//! theta_tilde: [f64; J]) -> f64` (the log density of the constrained
//! parameters, up to a constant) becomes the low-level model
//! `fn log_density(theta: [f64; D]) -> f64` over Stan's unconstrained
//! vector: [`lower_model`] blanks the constraint attributes (so that every
//! line and column of the user's text stays where it was) and appends
//! generated functions in the language itself: `nuts_transform` maps the
//! unconstrained vector to each parameter on its constrained scale and
//! sums the log absolute Jacobian determinants of those maps, exactly as
//! Stan's `*_constrain` functions; `log_density` calls `model` at the
//! constrained point and adds that sum; `nuts_constrain` gives the
//! parameters, then the quantities of `fn transformed` and `fn generated`
//! ([`crate::quantities`]), as a tuple, for the draws the sampler reports.
//!
//! `D` is the symbolic dimension [`UNCONSTRAINED_DIM`]; the sampler fixes it
//! from the parameters' shapes once the data fixes their lengths
//! ([`Parameter::unconstrained_len`]).

use std::collections::HashMap;
use std::fmt::Write;

use autobatch_types::Loc;
use syn::spanned::Spanned;

use crate::diagnostic::Diagnostic;
use crate::location::{end_of, start_of};
use crate::quantities::{Found, Quantity};

/// The symbolic dimension of the generated `log_density`'s parameter.
pub const UNCONSTRAINED_DIM: &str = "NUTS_UNCONSTRAINED";

/// The generated function giving the constrained parameters of an
/// unconstrained point, as a tuple in declaration order.
pub const CONSTRAIN_FUNCTION: &str = "nuts_constrain";

/// The generated function giving the unconstrained point of given
/// constrained parameters (Stan's `*_free` transforms), for initial values:
/// `nuts_unconstrain(nuts_theta, mu, tau, theta_tilde)`, `nuts_theta` any
/// point of the right length (it fixes the result's).
pub const UNCONSTRAIN_FUNCTION: &str = "nuts_unconstrain";

/// The generated functions; names the sampler otherwise reserves.
pub const GENERATED_FUNCTIONS: [&str; 5] = [
    CONSTRAIN_FUNCTION,
    UNCONSTRAIN_FUNCTION,
    "nuts_transform",
    LUB_CONSTRAIN,
    LUB_FREE,
];

/// The name of the function whose parameters carry constraints.
pub const MODEL_FUNCTION: &str = "model";

/// A model lowered to the sampler's form.
#[derive(Clone, Debug, PartialEq)]
pub struct LoweredModel {
    /// The program to compile: the user's text, attributes blanked, and the
    /// generated functions after it.
    pub source: String,
    /// The parameters, in declaration order (the order of the
    /// unconstrained vector).
    pub parameters: Vec<Parameter>,
    /// The transformed parameters and generated quantities, reported
    /// after the parameters in this order.
    pub quantities: Vec<Quantity>,
}

/// One parameter of `model`.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    /// The lengths of its axes, outermost first; empty for a scalar.
    pub shape: Vec<Extent>,
    pub constraint: Constraint,
}

/// The length of one axis: a number, or the name of a symbolic dimension
/// (fixed by the data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extent {
    Fixed(u64),
    Named(String),
}

/// A parameter's constraint. Bounds, offsets and multipliers are the text
/// of an expression of numbers, constants and statics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    None,
    Bounds {
        lower: Option<String>,
        upper: Option<String>,
    },
    Affine {
        offset: Option<String>,
        multiplier: Option<String>,
    },
    Ordered,
    PositiveOrdered,
    Simplex,
    UnitVector,
    SumToZero,
    CholeskyFactorCorr,
    CholeskyFactorCov,
    CorrMatrix,
    CovMatrix,
}

/// The constraints written as one word, with the rank they need.
const WORDS: [(&str, usize); 9] = [
    ("ordered", 1),
    ("positive_ordered", 1),
    ("simplex", 1),
    ("unit_vector", 1),
    ("sum_to_zero", 1),
    ("cholesky_factor_corr", 2),
    ("cholesky_factor_cov", 2),
    ("corr_matrix", 2),
    ("cov_matrix", 2),
];

/// The constraints written `name = value`.
const VALUED: [&str; 4] = ["lower", "upper", "offset", "multiplier"];

impl Parameter {
    /// How many unconstrained numbers the parameter takes, its axes'
    /// lengths being `shape`.
    pub fn unconstrained_len(&self, shape: &[u64]) -> u64 {
        let elements: u64 = shape.iter().product();
        let k = shape.first().copied().unwrap_or(0);
        match self.constraint {
            Constraint::Simplex | Constraint::SumToZero => k.saturating_sub(1),
            Constraint::CholeskyFactorCorr | Constraint::CorrMatrix => k * k.saturating_sub(1) / 2,
            Constraint::CovMatrix => k * (k + 1) / 2,
            Constraint::CholeskyFactorCov => {
                let (m, n) = (shape[0], shape[1]);
                n * (n + 1) / 2 + m.saturating_sub(n) * n
            }
            _ => elements,
        }
    }

    /// The number of constrained values (the parameter's elements).
    pub fn len(&self, shape: &[u64]) -> u64 {
        shape.iter().product()
    }
}

/// Lowers a program whose `fn model` declares constrained parameters.
/// `Ok(None)` when there is nothing to lower: no `fn model`, a
/// `fn log_density` (the low-level form, used as written), or text that
/// does not parse (the compiler then says why).
pub fn lower_model(source: &str) -> Result<Option<LoweredModel>, Vec<Diagnostic>> {
    let Ok(file) = syn::parse_file(source) else {
        return Ok(None);
    };
    let functions: Vec<&syn::ItemFn> = file
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Fn(f) => Some(f),
            _ => None,
        })
        .collect();
    if functions.iter().any(|f| f.sig.ident == "log_density") {
        return Ok(None);
    }
    let Some(model) = functions.iter().find(|f| f.sig.ident == MODEL_FUNCTION) else {
        return Ok(None);
    };
    let mut names = Names::of(&file);
    let mut errors = Vec::new();
    let mut parameters = Vec::new();
    let mut blanks = Vec::new();
    for input in &model.sig.inputs {
        let syn::FnArg::Typed(typed) = input else {
            continue;
        };
        for attr in &typed.attrs {
            blanks.push((start_of(attr.span()), end_of(attr.span())));
        }
        match parameter(typed, &names) {
            Ok(p) => {
                names.parameters.push(p.name.clone());
                parameters.push(p);
            }
            Err(d) => errors.push(d),
        }
    }
    if !matches!(&model.sig.output, syn::ReturnType::Type(_, t) if is_f64(t)) {
        let span = match &model.sig.output {
            syn::ReturnType::Type(_, t) => t.span(),
            syn::ReturnType::Default => model.sig.ident.span(),
        };
        errors.push(Diagnostic::new(
            "`fn model` must return `f64`: the log density of its parameters, up to a constant",
            start_of(span),
            end_of(span),
            "not `f64`",
        ));
    }
    if parameters.is_empty() && errors.is_empty() {
        let span = model.sig.ident.span();
        errors.push(Diagnostic::new(
            "`fn model` has no parameters: there is nothing to sample",
            start_of(span),
            end_of(span),
            "no parameters",
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let found = crate::quantities::find(&functions, &parameters, &names)?;
    let mut text = blank(source, &blanks);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&generate(&parameters, &found));
    Ok(Some(LoweredModel {
        source: text,
        parameters,
        quantities: found.quantities,
    }))
}

/// The names a bound may use, and the constants' values.
pub(crate) struct Names {
    statics: Vec<String>,
    constants: HashMap<String, Option<u64>>,
    /// The parameters declared so far (a bound may use them, as in Stan).
    parameters: Vec<String>,
}

impl Names {
    fn of(file: &syn::File) -> Names {
        let mut names = Names {
            statics: Vec::new(),
            constants: HashMap::new(),
            parameters: Vec::new(),
        };
        for item in &file.items {
            match item {
                syn::Item::Const(c) => {
                    let value = match &*c.expr {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Int(i),
                            ..
                        }) => i.base10_parse::<u64>().ok(),
                        _ => None,
                    };
                    names.constants.insert(c.ident.to_string(), value);
                }
                syn::Item::ForeignMod(m) => {
                    for item in &m.items {
                        if let syn::ForeignItem::Static(s) = item {
                            names.statics.push(s.ident.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        names
    }

    fn known(&self, name: &str) -> bool {
        self.statics.iter().any(|s| s == name)
            || self.constants.contains_key(name)
            || self.parameters.iter().any(|p| p == name)
    }
}

fn error_at(span: proc_macro2::Span, message: impl Into<String>, label: &str) -> Diagnostic {
    Diagnostic::new(message, start_of(span), end_of(span), label)
}

fn is_f64(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("f64"))
}

/// One parameter of `fn model`: its name, shape and constraint.
fn parameter(typed: &syn::PatType, names: &Names) -> Result<Parameter, Diagnostic> {
    let syn::Pat::Ident(ident) = &*typed.pat else {
        return Err(error_at(
            typed.pat.span(),
            "a parameter of `fn model` must be a name",
            "not a name",
        ));
    };
    let name = ident.ident.to_string();
    if name.starts_with("nuts_") {
        return Err(error_at(
            ident.ident.span(),
            format!("the parameter `{name}` has a name starting with `nuts_`, which the sampler reserves; rename it"),
            "reserved name",
        ));
    }
    let shape = shape(&typed.ty, names)?;
    let constraint = constraint(&typed.attrs, names)?;
    check_rank(&constraint, &shape, typed)?;
    Ok(Parameter {
        name,
        shape,
        constraint,
    })
}

/// The axes of `f64`, `[f64; N]` or `[[f64; N]; M]`.
fn shape(ty: &syn::Type, names: &Names) -> Result<Vec<Extent>, Diagnostic> {
    let mut extents = Vec::new();
    let mut ty = ty;
    loop {
        match ty {
            syn::Type::Array(array) => {
                extents.push(extent(&array.len, names, "a parameter of `fn model`")?);
                ty = &array.elem;
            }
            t if is_f64(t) => break,
            t => {
                return Err(error_at(
                    t.span(),
                    "a parameter of `fn model` is an `f64` or an array of them (`[f64; N]`, `[[f64; N]; M]`)",
                    "not an f64 or an array of f64",
                ))
            }
        }
    }
    if extents.len() > 2 {
        return Err(error_at(
            ty.span(),
            "a parameter of `fn model` has at most two axes (a matrix)",
            "too many axes",
        ));
    }
    Ok(extents)
}

/// The length of one axis of `what` (a parameter, a reported quantity).
pub(crate) fn extent(len: &syn::Expr, names: &Names, what: &str) -> Result<Extent, Diagnostic> {
    match len {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i
            .base10_parse::<u64>()
            .map(Extent::Fixed)
            .map_err(|_| error_at(i.span(), "this length is not a number", "not a length")),
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            let name = p.path.get_ident().expect("checked").to_string();
            match names.constants.get(&name) {
                Some(Some(n)) => Ok(Extent::Fixed(*n)),
                Some(None) => Err(error_at(
                    p.span(),
                    format!("the length `{name}` of {what} is a constant whose value is not a number literal"),
                    "write the number, or a symbolic dimension fixed by the data",
                )),
                None => Ok(Extent::Named(name)),
            }
        }
        other => Err(error_at(
            other.span(),
            format!("the length of {what} must be a number, a `const` or a symbolic dimension"),
            "unsupported length",
        )),
    }
}

/// The constraint the attributes of one parameter declare.
fn constraint(attrs: &[syn::Attribute], names: &Names) -> Result<Constraint, Diagnostic> {
    let mut found: Vec<(String, Option<String>, proc_macro2::Span)> = Vec::new();
    for attr in attrs {
        let (key, value) = match &attr.meta {
            syn::Meta::Path(p) => (path_name(p, attr)?, None),
            syn::Meta::NameValue(nv) => {
                let key = path_name(&nv.path, attr)?;
                if !VALUED.contains(&key.as_str()) {
                    return Err(unknown(&key, attr.span()));
                }
                check_bound(&nv.value, names)?;
                check_side(&key, &nv.value)?;
                (key, Some(expr_text(&nv.value)))
            }
            syn::Meta::List(l) => {
                return Err(error_at(
                    l.span(),
                    "a constraint is written `#[name]` or `#[name = value]`",
                    "not a constraint",
                ))
            }
        };
        if VALUED.contains(&key.as_str()) && value.is_none() {
            return Err(error_at(
                attr.span(),
                format!("`{key}` needs a value: `#[{key} = ...]`"),
                "no value",
            ));
        }
        if !VALUED.contains(&key.as_str()) && !WORDS.iter().any(|(w, _)| *w == key) {
            return Err(unknown(&key, attr.span()));
        }
        if found.iter().any(|(k, _, _)| *k == key) {
            return Err(error_at(
                attr.span(),
                format!("`{key}` is given twice"),
                "given again here",
            ));
        }
        found.push((key, value, attr.span()));
    }
    combine(found)
}

fn path_name(path: &syn::Path, attr: &syn::Attribute) -> Result<String, Diagnostic> {
    path.get_ident().map(|i| i.to_string()).ok_or_else(|| {
        error_at(
            attr.span(),
            "a constraint is one name: `#[lower = 0.0]`, `#[simplex]`, ...",
            "not a constraint",
        )
    })
}

fn unknown(key: &str, span: proc_macro2::Span) -> Diagnostic {
    let words: Vec<&str> = WORDS.iter().map(|(w, _)| *w).collect();
    error_at(
        span,
        format!("unknown constraint `{key}`"),
        "not a constraint",
    )
    .with_note(format!(
        "the constraints are `{}` (with a value: `#[lower = 0.0]`) and `{}`",
        VALUED.join("`, `"),
        words.join("`, `")
    ))
}

/// The one constraint that the attributes found make.
fn combine(
    found: Vec<(String, Option<String>, proc_macro2::Span)>,
) -> Result<Constraint, Diagnostic> {
    let Some((first, _, _)) = found.first() else {
        return Ok(Constraint::None);
    };
    let family = |k: &str| match k {
        "lower" | "upper" => 0,
        "offset" | "multiplier" => 1,
        _ => 2,
    };
    let first_family = family(first);
    if let Some((key, _, span)) = found
        .iter()
        .skip(1)
        .find(|(k, _, _)| family(k) != first_family || family(k) == 2)
    {
        return Err(error_at(
            *span,
            format!("`{key}` cannot be combined with `{first}`"),
            "a second constraint",
        )
        .with_note(
            "a parameter takes bounds (`lower`, `upper`), or `offset`/`multiplier`, or one of the other constraints",
        ));
    }
    let value = |key: &str| {
        found
            .iter()
            .find(|(k, _, _)| k == key)
            .and_then(|(_, v, _)| v.clone())
    };
    Ok(match first.as_str() {
        "lower" | "upper" => {
            // A side bounded by its infinity is unbounded (Stan's
            // `lb_constrain` of `-inf` is the identity).
            let lower = value("lower").filter(|b| literal(b) != Some(f64::NEG_INFINITY));
            let upper = value("upper").filter(|b| literal(b) != Some(f64::INFINITY));
            if lower.is_none() && upper.is_none() {
                Constraint::None
            } else {
                Constraint::Bounds { lower, upper }
            }
        }
        "offset" | "multiplier" => Constraint::Affine {
            offset: value("offset"),
            multiplier: value("multiplier"),
        },
        "ordered" => Constraint::Ordered,
        "positive_ordered" => Constraint::PositiveOrdered,
        "simplex" => Constraint::Simplex,
        "unit_vector" => Constraint::UnitVector,
        "sum_to_zero" => Constraint::SumToZero,
        "cholesky_factor_corr" => Constraint::CholeskyFactorCorr,
        "cholesky_factor_cov" => Constraint::CholeskyFactorCov,
        "corr_matrix" => Constraint::CorrMatrix,
        _ => Constraint::CovMatrix,
    })
}

/// A bound is a number, or an expression of numbers, constants, statics
/// and the parameters declared before (`#[upper = max_y]`, `#[lower = -2.0
/// * scale]`, `#[upper = 1.0 - alpha1]`).
fn check_bound(expr: &syn::Expr, names: &Names) -> Result<(), Diagnostic> {
    let wrong = |span, what: &str| {
        Err(error_at(
            span,
            format!("a bound must be a number, or an arithmetic expression of numbers, constants, statics and earlier parameters; this is {what}"),
            "not a bound",
        ))
    };
    match expr {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(_) | syn::Lit::Float(_) => Ok(()),
            syn::Lit::Str(_) => wrong(l.span(), "a string"),
            syn::Lit::Bool(_) => wrong(l.span(), "a bool"),
            _ => wrong(l.span(), "a literal of another kind"),
        },
        syn::Expr::Path(p) => match p.path.get_ident() {
            Some(i) if names.known(&i.to_string()) => Ok(()),
            Some(i) => Err(error_at(
                p.span(),
                format!(
                    "the bound names `{i}`, which is neither a `const` nor a static of the model, nor a parameter declared before this one"
                ),
                "unknown name",
            )),
            None if infinity(&p.path).is_some() => Ok(()),
            None => wrong(p.span(), "a path other than `f64::INFINITY` or `f64::NEG_INFINITY`"),
        },
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => check_bound(&u.expr, names),
        syn::Expr::Paren(p) => check_bound(&p.expr, names),
        syn::Expr::Binary(b)
            if matches!(
                b.op,
                syn::BinOp::Add(_) | syn::BinOp::Sub(_) | syn::BinOp::Mul(_) | syn::BinOp::Div(_)
            ) =>
        {
            check_bound(&b.left, names)?;
            check_bound(&b.right, names)
        }
        syn::Expr::Index(i) => {
            check_bound(&i.expr, names)?;
            match &*i.index {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(_),
                    ..
                }) => Ok(()),
                other => check_bound(other, names),
            }
        }
        other => wrong(other.span(), "another kind of expression"),
    }
}

/// `f64::INFINITY` (also `std::f64::INFINITY`) or `f64::NEG_INFINITY`.
fn infinity(path: &syn::Path) -> Option<f64> {
    let words: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let tail = match words[..] {
        ["std" | "core", "f64", last] | ["f64", last] => last,
        _ => return None,
    };
    match tail {
        "INFINITY" => Some(f64::INFINITY),
        "NEG_INFINITY" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// The value of a bound written with numbers and infinities only
/// (`0.0`, `-f64::INFINITY`, `2.0 * 3.0`); `None` for one that names
/// data, constants or parameters.
fn literal_value(expr: &syn::Expr) -> Option<f64> {
    match expr {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse::<f64>().ok(),
            syn::Lit::Float(f) => f.base10_parse::<f64>().ok(),
            _ => None,
        },
        syn::Expr::Path(p) => infinity(&p.path),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => Some(-literal_value(&u.expr)?),
        syn::Expr::Paren(p) => literal_value(&p.expr),
        syn::Expr::Binary(b) => {
            let (l, r) = (literal_value(&b.left)?, literal_value(&b.right)?);
            match b.op {
                syn::BinOp::Add(_) => Some(l + r),
                syn::BinOp::Sub(_) => Some(l - r),
                syn::BinOp::Mul(_) => Some(l * r),
                syn::BinOp::Div(_) => Some(l / r),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The value of a bound's text (see [`literal_value`]).
fn literal(text: &str) -> Option<f64> {
    literal_value(&syn::parse_str::<syn::Expr>(text).ok()?)
}

/// Refuses a bound that leaves no value: a lower bound of `+inf` or an
/// upper bound of `-inf` (or NaN), written as numbers.
fn check_side(key: &str, value: &syn::Expr) -> Result<(), Diagnostic> {
    let Some(v) = literal_value(value) else {
        return Ok(());
    };
    let empty = match key {
        "lower" => v == f64::INFINITY || v.is_nan(),
        "upper" => v == f64::NEG_INFINITY || v.is_nan(),
        _ => !v.is_finite(),
    };
    if empty {
        return Err(error_at(
            value.span(),
            format!("`{key}` is {v}, which leaves no value for the parameter"),
            "not a usable bound",
        ));
    }
    Ok(())
}

/// Whether a bound is a finite number written as such: its transform is
/// then the one-sided or logistic map fixed at compile time. Any other
/// bound (data, constants, parameters) may be infinite when the model
/// runs, and is transformed element by element as Stan does.
fn is_finite_literal(text: &Option<String>) -> bool {
    text.as_deref()
        .is_none_or(|t| literal(t).is_some_and(f64::is_finite))
}

/// The text of a bound, as the generated code uses it (parenthesized).
fn expr_text(expr: &syn::Expr) -> String {
    let tokens = quote_tokens(expr);
    format!("({tokens})")
}

fn quote_tokens(expr: &syn::Expr) -> String {
    use quote::ToTokens;
    expr.to_token_stream().to_string()
}

/// Checks that the constraint fits the parameter's shape.
fn check_rank(
    constraint: &Constraint,
    shape: &[Extent],
    typed: &syn::PatType,
) -> Result<(), Diagnostic> {
    let word = match constraint {
        Constraint::None | Constraint::Bounds { .. } | Constraint::Affine { .. } => return Ok(()),
        Constraint::Ordered => "ordered",
        Constraint::PositiveOrdered => "positive_ordered",
        Constraint::Simplex => "simplex",
        Constraint::UnitVector => "unit_vector",
        Constraint::SumToZero => "sum_to_zero",
        Constraint::CholeskyFactorCorr => "cholesky_factor_corr",
        Constraint::CholeskyFactorCov => "cholesky_factor_cov",
        Constraint::CorrMatrix => "corr_matrix",
        Constraint::CovMatrix => "cov_matrix",
    };
    let rank = WORDS.iter().find(|(w, _)| *w == word).expect("a word").1;
    let wanted = if rank == 1 {
        "a vector `[f64; K]`"
    } else {
        "a matrix `[[f64; K]; K]`"
    };
    if shape.len() != rank {
        return Err(error_at(
            typed.ty.span(),
            format!(
                "`{word}` needs {wanted}; this parameter is {}",
                ["a scalar", "a vector", "a matrix"][shape.len()]
            ),
            "wrong shape for the constraint",
        ));
    }
    let square = !matches!(constraint, Constraint::CholeskyFactorCov);
    if rank == 2 && square && shape[0] != shape[1] {
        return Err(error_at(
            typed.ty.span(),
            format!("`{word}` needs a square matrix `[[f64; K]; K]`"),
            "not square",
        ));
    }
    Ok(())
}

/// `source` with the characters of each range replaced by spaces (line
/// breaks kept), so that every other character keeps its line and column.
fn blank(source: &str, ranges: &[(Loc, Loc)]) -> String {
    let mut out = String::with_capacity(source.len());
    let (mut line, mut column) = (1_u32, 1_u32);
    for c in source.chars() {
        let here = Loc::new(line, column);
        let inside = ranges.iter().any(|(a, b)| *a <= here && here < *b);
        if c == '\n' {
            out.push('\n');
            line += 1;
            column = 1;
            continue;
        }
        out.push(if inside { ' ' } else { c });
        column += 1;
    }
    out
}

/// The text of an extent in the generated code (a `usize` value or a length).
fn extent_text(e: &Extent) -> String {
    match e {
        Extent::Fixed(n) => n.to_string(),
        Extent::Named(name) => name.clone(),
    }
}

/// The generated functions (see the module's documentation).
fn generate(parameters: &[Parameter], found: &Found) -> String {
    let types: Vec<String> = parameters.iter().map(|p| type_text(&p.shape)).collect();
    let names: Vec<&str> = parameters.iter().map(|p| p.name.as_str()).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated from the parameters of `fn model`: their constraining transforms."
    );
    let _ = writeln!(
        out,
        "fn nuts_transform(nuts_theta: [f64; {UNCONSTRAINED_DIM}]) -> ({}, f64) {{",
        types.join(", ")
    );
    let _ = writeln!(out, "    let mut nuts_at: usize = 0;");
    let _ = writeln!(out, "    let mut nuts_lj = 0.0;");
    for p in parameters {
        out.push_str(&transform(p));
        let _ = writeln!(out, "    nuts_at += {};", unconstrained_len_text(p));
    }
    let _ = writeln!(out, "    assert!(nuts_at == nuts_theta.len());");
    let _ = writeln!(out, "    ({}, nuts_lj)", names.join(", "));
    let _ = writeln!(out, "}}");
    let bind = format!(
        "let ({}, nuts_lj) = nuts_transform(nuts_theta);",
        names.join(", ")
    );
    let _ = writeln!(
        out,
        "fn log_density(nuts_theta: [f64; {UNCONSTRAINED_DIM}]) -> f64 {{ {bind} model({}) + nuts_lj }}",
        names.join(", ")
    );
    let mut reported = names.clone();
    let mut reported_types = types.clone();
    for q in &found.quantities {
        reported.push(&q.name);
        reported_types.push(type_text(&q.shape).replace("f64", element(q)));
    }
    let _ = writeln!(
        out,
        "fn {CONSTRAIN_FUNCTION}(nuts_theta: [f64; {UNCONSTRAINED_DIM}]) -> {} {{\n    {bind}\n    {}    {}\n}}",
        tuple_text(&reported_types),
        found.code.replace('\n', "\n    "),
        tuple_text(&reported)
    );
    out.push_str(&unconstrain(parameters));
    if parameters.iter().any(uses_bound_functions) {
        out.push_str(&bound_functions());
    }
    out
}

/// `(a, b)`, or `(a,)` for one.
fn tuple_text(items: &[impl AsRef<str>]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    if items.len() == 1 {
        format!("({},)", items[0])
    } else {
        format!("({})", items.join(", "))
    }
}

fn element(q: &Quantity) -> &'static str {
    if q.integer {
        "i64"
    } else {
        "f64"
    }
}

fn type_text(shape: &[Extent]) -> String {
    shape.iter().rev().fold("f64".to_string(), |inner, e| {
        format!("[{inner}; {}]", extent_text(e))
    })
}

/// The number of unconstrained values, as a `usize` expression.
fn unconstrained_len_text(p: &Parameter) -> String {
    let dims: Vec<String> = p.shape.iter().map(extent_text).collect();
    match p.constraint {
        Constraint::Simplex | Constraint::SumToZero => format!("({} - 1)", dims[0]),
        Constraint::CholeskyFactorCorr | Constraint::CorrMatrix => {
            format!("({k} * ({k} - 1) / 2)", k = dims[0])
        }
        Constraint::CovMatrix => format!("({k} * ({k} + 1) / 2)", k = dims[0]),
        Constraint::CholeskyFactorCov => format!(
            "({n} * ({n} + 1) / 2 + ({m} - {n}) * {n})",
            m = dims[0],
            n = dims[1]
        ),
        _ if dims.is_empty() => "1".to_string(),
        _ => format!("({})", dims.join(" * ")),
    }
}

/// The unconstrained value `i` of the parameter being read.
fn free(i: &str) -> String {
    format!("nuts_theta[nuts_at + {i}]")
}

/// The statements that define the parameter `p` from the unconstrained
/// values at `nuts_at` and add its log-Jacobian to `nuts_lj`.
fn transform(p: &Parameter) -> String {
    let name = &p.name;
    let k = p.shape.first().map(extent_text).unwrap_or_default();
    match &p.constraint {
        Constraint::None => format!("    let {name} = {};\n", read(&p.shape)),
        Constraint::Bounds { lower, upper }
            if is_finite_literal(lower) && is_finite_literal(upper) =>
        {
            elementwise(p, &bounds(lower, upper))
        }
        Constraint::Bounds { lower, upper } => {
            let call = format!(
                "{{ let (nuts_x, nuts_j) = {LUB_CONSTRAIN}({}, nuts_lb{at}, nuts_ub{at}); nuts_lj += nuts_j; nuts_x }}",
                free(&flat_index(&p.shape)),
                at = element_index(&p.shape),
            );
            format!(
                "{}    let mut {name} = nuts_lb;\n{}",
                bound_arrays(p, lower, upper),
                for_each_element(
                    &p.shape,
                    &format!("{name}{} = {call};", element_index(&p.shape))
                )
            )
        }
        Constraint::Affine { offset, multiplier } => elementwise(p, &affine(offset, multiplier)),
        Constraint::Ordered | Constraint::PositiveOrdered => {
            let first = if p.constraint == Constraint::Ordered {
                free("0")
            } else {
                format!("nuts_lj += {f}; {f}.exp()", f = free("0"))
            };
            format!(
                "    let mut {name} = [0.0; {k}];
    if {k} > 0 {{ {name}[0] = {{ {first} }}; }}
    for nuts_i in 1..{k} {{
        {name}[nuts_i] = {name}[nuts_i - 1] + {f}.exp();
        nuts_lj += {f};
    }}\n",
                f = free("nuts_i")
            )
        }
        Constraint::Simplex => format!(
            "    let mut {name} = [0.0; {k}];
    let mut nuts_stick = 1.0;
    for nuts_i in 0..({k} - 1) {{
        let nuts_y = {f} - (({k} - 1 - nuts_i) as f64).ln();
        {name}[nuts_i] = nuts_stick * sigmoid(nuts_y);
        nuts_lj += nuts_stick.ln() - softplus(-nuts_y) - softplus(nuts_y);
        nuts_stick -= {name}[nuts_i];
    }}
    {name}[{k} - 1] = nuts_stick;\n",
            f = free("nuts_i")
        ),
        Constraint::SumToZero => format!(
            "    let mut {name} = [0.0; {k}];
    let mut nuts_sum = 0.0;
    for nuts_j in 0..({k} - 1) {{
        let nuts_i = {k} - 1 - nuts_j;
        let nuts_n = nuts_i as f64;
        let nuts_w = {f} / (nuts_n * (nuts_n + 1.0)).sqrt();
        nuts_sum += nuts_w;
        {name}[nuts_i - 1] += nuts_sum;
        {name}[nuts_i] -= nuts_w * nuts_n;
    }}\n",
            f = free("nuts_i - 1")
        ),
        Constraint::UnitVector => format!(
            "    let nuts_y = {read};
    let nuts_r2 = dot(nuts_y, nuts_y);
    nuts_lj -= 0.5 * nuts_r2;
    let {name} = nuts_y / nuts_r2.sqrt();\n",
            read = read(&p.shape)
        ),
        Constraint::CholeskyFactorCorr
        | Constraint::CholeskyFactorCov
        | Constraint::CorrMatrix
        | Constraint::CovMatrix => matrix_transform(p),
    }
}

/// The most rows a matrix parameter of fixed shape is read as an array
/// literal of row slices rather than by a loop over its rows: a loop in
/// the differentiated `log_density` is taped, row by row.
const LITERAL_ROWS: u64 = 64;

/// The parameter's unconstrained values in its own shape: a vector as one
/// slice of `nuts_theta`, a matrix as a slice per row, so that the
/// gradient of `log_density` is derived without a tape where the model
/// needs none.
fn read(shape: &[Extent]) -> String {
    let row = |at: &str, n: &str| format!("nuts_theta[{at}..{at} + {n}]");
    match shape {
        [] => free("0"),
        [n] => row("nuts_at", &extent_text(n)),
        [Extent::Fixed(m), n] if *m <= LITERAL_ROWS => {
            let n = extent_text(n);
            let rows: Vec<String> = (0..*m)
                .map(|i| row(&format!("nuts_at + {i} * {n}"), &n))
                .collect();
            format!("[{}]", rows.join(", "))
        }
        [m, n] => format!(
            "{{ let mut nuts_v = [[0.0; {n}]; {m}]; for nuts_i in 0..{m} {{ nuts_v[nuts_i] = {r}; }} nuts_v }}",
            m = extent_text(m),
            n = extent_text(n),
            r = row(&format!("nuts_at + nuts_i * {}", extent_text(n)), &extent_text(n))
        ),
        _ => unreachable!("at most two axes"),
    }
}

/// The generated function of Stan's `lub_constrain` on one element:
/// `(value, log_jacobian)` of the unconstrained `y` for bounds that may be
/// infinite (`-inf` below or `+inf` above: that side is unbounded).
const LUB_CONSTRAIN: &str = "nuts_lub_constrain";

/// The generated function of Stan's `lub_free` on one element.
const LUB_FREE: &str = "nuts_lub_free";

/// The two functions above, written once into a program that uses them.
fn bound_functions() -> String {
    format!(
        "fn {LUB_CONSTRAIN}(y: f64, lb: f64, ub: f64) -> (f64, f64) {{
    if lb == f64::NEG_INFINITY {{
        if ub == f64::INFINITY {{ (y, 0.0) }} else {{ (ub - y.exp(), y) }}
    }} else if ub == f64::INFINITY {{
        (y.exp() + lb, y)
    }} else {{
        ((ub - lb) * sigmoid(y) + lb, (ub - lb).ln() + (-y.abs() - 2.0 * softplus(-y.abs())))
    }}
}}
fn {LUB_FREE}(x: f64, lb: f64, ub: f64) -> f64 {{
    if lb == f64::NEG_INFINITY {{
        if ub == f64::INFINITY {{ x }} else {{ (ub - x).ln() }}
    }} else if ub == f64::INFINITY {{
        (x - lb).ln()
    }} else {{
        let u = (x - lb) / (ub - lb);
        (u / (1.0 - u)).ln()
    }}
}}
"
    )
}

/// Whether the parameter's bounds are transformed by [`bound_functions`].
fn uses_bound_functions(p: &Parameter) -> bool {
    matches!(&p.constraint, Constraint::Bounds { lower, upper }
        if !(is_finite_literal(lower) && is_finite_literal(upper)))
}

/// `nuts_lb` and `nuts_ub`: the bounds of the parameter `p` in its shape,
/// an absent side infinite.
fn bound_arrays(p: &Parameter, lower: &Option<String>, upper: &Option<String>) -> String {
    let ones = if p.shape.is_empty() {
        "1.0".to_string()
    } else {
        type_text(&p.shape).replace("f64", "1.0")
    };
    let side = |b: &Option<String>, infinity: &str| {
        b.clone().unwrap_or_else(|| format!("f64::{infinity}"))
    };
    format!(
        "    let nuts_lb = {} * {ones};\n    let nuts_ub = {} * {ones};\n",
        side(lower, "NEG_INFINITY"),
        side(upper, "INFINITY")
    )
}

/// `[nuts_i]`, `[nuts_i][nuts_j]` or nothing: one element of a value of `shape`.
fn element_index(shape: &[Extent]) -> &'static str {
    match shape.len() {
        0 => "",
        1 => "[nuts_i]",
        _ => "[nuts_i][nuts_j]",
    }
}

/// The position of that element among the parameter's values, row-major.
fn flat_index(shape: &[Extent]) -> String {
    match shape {
        [] => "0".to_string(),
        [_] => "nuts_i".to_string(),
        [_, n] => format!("nuts_i * {} + nuts_j", extent_text(n)),
        _ => unreachable!("at most two axes"),
    }
}

/// `statement` once per element of a value of `shape` (see [`element_index`]).
fn for_each_element(shape: &[Extent], statement: &str) -> String {
    match shape {
        [] => format!("    {statement}\n"),
        [n] => format!(
            "    for nuts_i in 0..{} {{ {statement} }}\n",
            extent_text(n)
        ),
        [m, n] => format!(
            "    for nuts_i in 0..{} {{ for nuts_j in 0..{} {{ {statement} }} }}\n",
            extent_text(m),
            extent_text(n)
        ),
        _ => unreachable!("at most two axes"),
    }
}

/// An elementwise transform: `(value, log_jacobian)` as expressions of the
/// unconstrained `nuts_y` and of `nuts_ones` (ones of the parameter's
/// shape, so that a scalar bound counts once per element).
struct Elementwise {
    value: String,
    log_jacobian: Option<String>,
}

fn bounds(lower: &Option<String>, upper: &Option<String>) -> Elementwise {
    match (lower, upper) {
        (Some(lb), None) => Elementwise {
            value: format!("nuts_y.exp() + {lb}"),
            log_jacobian: Some("nuts_y".into()),
        },
        (None, Some(ub)) => Elementwise {
            value: format!("{ub} - nuts_y.exp()"),
            log_jacobian: Some("nuts_y".into()),
        },
        (Some(lb), Some(ub)) => Elementwise {
            value: format!("({ub} - {lb}) * sigmoid(nuts_y) + {lb}"),
            log_jacobian: Some(format!(
                "(({ub} - {lb}) * nuts_ones).ln() + (-nuts_y.abs() - 2.0 * softplus(-nuts_y.abs()))"
            )),
        },
        (None, None) => unreachable!("a bound is given"),
    }
}

fn affine(offset: &Option<String>, multiplier: &Option<String>) -> Elementwise {
    let mu = offset.clone().unwrap_or_else(|| "0.0".into());
    match multiplier {
        Some(sigma) => Elementwise {
            value: format!("{mu} + {sigma} * nuts_y"),
            log_jacobian: Some(format!("({sigma} * nuts_ones).ln()")),
        },
        None => Elementwise {
            value: format!("{mu} + nuts_y"),
            log_jacobian: None,
        },
    }
}

fn elementwise(p: &Parameter, t: &Elementwise) -> String {
    let ones = type_text(&p.shape).replace("f64", "1.0");
    let ones = if p.shape.is_empty() {
        "1.0".to_string()
    } else {
        // `[[1.0; N]; M]` from the type `[[f64; N]; M]`.
        ones
    };
    let mut out = format!(
        "    let nuts_y = {};\n    let nuts_ones = {ones};\n    let {} = {} * nuts_ones;\n",
        read(&p.shape),
        p.name,
        paren(&t.value)
    );
    if let Some(lj) = &t.log_jacobian {
        let _ = writeln!(out, "    nuts_lj += {};", sum_all(&p.shape, &paren(lj)));
    }
    out
}

fn paren(text: &str) -> String {
    format!("({text})")
}

/// The sum of every element of an expression of the parameter's shape.
fn sum_all(shape: &[Extent], expr: &str) -> String {
    match shape.len() {
        0 => expr.to_string(),
        1 => format!("sum({expr})"),
        _ => format!(
            "{{ let nuts_m = {expr}; let mut nuts_s = 0.0; for nuts_i in 0..nuts_m.len() {{ nuts_s += sum(nuts_m[nuts_i]); }} nuts_s }}"
        ),
    }
}

/// The matrix constraints (Stan's `cholesky_corr_constrain` and
/// `cholesky_factor_constrain`).
fn matrix_transform(p: &Parameter) -> String {
    let (name, k) = (&p.name, extent_text(&p.shape[0]));
    match p.constraint {
        Constraint::CholeskyFactorCorr => cholesky_corr(name, &k),
        Constraint::CorrMatrix => corr_matrix(name, &k),
        Constraint::CovMatrix => format!(
            "{factor}    let {name} = matmul(nuts_l, transpose(nuts_l));
    nuts_lj += ({k} as f64) * (2.0_f64).ln();
    for nuts_i in 0..{k} {{ nuts_lj += (({k} - nuts_i) as f64) * nuts_l[nuts_i][nuts_i].ln(); }}\n",
            factor = cholesky_cov("nuts_l", &k, &k)
        ),
        _ => cholesky_cov(name, &k, &extent_text(&p.shape[1])),
    }
}

/// A correlation matrix from `K (K - 1) / 2` unconstrained values: Stan's
/// `corr_matrix_constrain`, canonical partial correlations `tanh(y)` column
/// by column into a Cholesky factor (Stan's `read_corr_L`), its log-Jacobian,
/// and the factor times its transpose.
fn corr_matrix(name: &str, k: &str) -> String {
    format!(
        "    let mut nuts_l = [[0.0; {k}]; {k}];
    let mut nuts_acc = [1.0; {k}];
    let mut nuts_p: usize = 0;
    for nuts_j in 0..{k} {{
        nuts_l[nuts_j][nuts_j] = nuts_acc[nuts_j].sqrt();
        for nuts_i in (nuts_j + 1)..{k} {{
            let nuts_z = {f}.tanh();
            nuts_p += 1;
            let nuts_log1m = (1.0 - nuts_z * nuts_z).ln();
            nuts_lj += nuts_log1m + 0.5 * (({k} as f64) - (nuts_j as f64) - 2.0) * nuts_log1m;
            nuts_l[nuts_i][nuts_j] = nuts_z * nuts_acc[nuts_i].sqrt();
            nuts_acc[nuts_i] *= 1.0 - nuts_z * nuts_z;
        }}
    }}
    let {name} = matmul(nuts_l, transpose(nuts_l));\n",
        f = free("nuts_p")
    )
}

/// The Cholesky factor of a correlation matrix from `K (K - 1) / 2`
/// unconstrained values: canonical partial correlations `tanh(y)`, row by
/// row, and the log-Jacobian of Stan's `cholesky_corr_constrain`.
fn cholesky_corr(name: &str, k: &str) -> String {
    format!(
        "    let mut {name} = [[0.0; {k}]; {k}];
    let mut nuts_p: usize = 0;
    if {k} > 0 {{ {name}[0][0] = 1.0; }}
    for nuts_i in 1..{k} {{
        let mut nuts_sq = 0.0;
        for nuts_j in 0..nuts_i {{
            let nuts_z = {f}.tanh();
            nuts_p += 1;
            nuts_lj += (1.0 - nuts_z * nuts_z).ln();
            if nuts_j > 0 {{ nuts_lj += 0.5 * (1.0 - nuts_sq).ln(); }}
            {name}[nuts_i][nuts_j] = nuts_z * (1.0 - nuts_sq).sqrt();
            nuts_sq += {name}[nuts_i][nuts_j] * {name}[nuts_i][nuts_j];
        }}
        {name}[nuts_i][nuts_i] = (1.0 - nuts_sq).sqrt();
    }}\n",
        f = free("nuts_p")
    )
}

/// A Cholesky factor of a covariance matrix (`M` by `N`, `M >= N`): the
/// first `N` rows lower triangular with a positive diagonal (`exp`), the
/// rest free; the log-Jacobian the sum of the diagonal's unconstrained
/// values (Stan's `cholesky_factor_constrain`).
fn cholesky_cov(name: &str, m: &str, n: &str) -> String {
    format!(
        "    let mut {name} = [[0.0; {n}]; {m}];
    let mut nuts_p: usize = 0;
    for nuts_i in 0..{m} {{
        for nuts_j in 0..(nuts_i + 1).min({n}) {{
            let nuts_y = {f};
            nuts_p += 1;
            if nuts_i == nuts_j {{
                {name}[nuts_i][nuts_j] = nuts_y.exp();
                nuts_lj += nuts_y;
            }} else {{
                {name}[nuts_i][nuts_j] = nuts_y;
            }}
        }}
    }}\n",
        f = free("nuts_p")
    )
}

/// `nuts_unconstrain`: each parameter's unconstrained values, Stan's
/// `*_free` transforms, written over `nuts_theta` in order; a value that
/// does not satisfy its constraint stops the call with an error naming it.
fn unconstrain(parameters: &[Parameter]) -> String {
    let arguments: Vec<String> = parameters
        .iter()
        .map(|p| format!("{}: {}", p.name, type_text(&p.shape)))
        .collect();
    let mut out = format!(
        "fn {UNCONSTRAIN_FUNCTION}(nuts_theta: [f64; {UNCONSTRAINED_DIM}], {}) -> [f64; {UNCONSTRAINED_DIM}] {{
    let mut nuts_out = nuts_theta;
    let mut nuts_at: usize = 0;\n",
        arguments.join(", ")
    );
    for p in parameters {
        let len = unconstrained_len_text(p);
        out.push_str(&free_transform(p));
        let _ = write!(
            out,
            "    let mut nuts_s = 0.0;
    for nuts_i in 0..{len} {{ nuts_s += nuts_out[nuts_at + nuts_i]; }}
    assert!(nuts_s.is_finite(), \"the initial value of `{name}` does not satisfy its constraint\");
    nuts_at += {len};\n",
            name = p.name
        );
    }
    out.push_str("    nuts_out\n}\n");
    out
}

/// The statements writing parameter `p`'s unconstrained values at `nuts_at`.
fn free_transform(p: &Parameter) -> String {
    let name = &p.name;
    let k = p.shape.first().map(extent_text).unwrap_or_default();
    let out = |i: &str| format!("nuts_out[nuts_at + {i}]");
    let fails = |what: &str| format!("\"the initial value of `{name}` is not {what}\"");
    match &p.constraint {
        Constraint::None => write_elements(&p.shape, name),
        Constraint::Bounds { lower, upper }
            if !(is_finite_literal(lower) && is_finite_literal(upper)) =>
        {
            let at = element_index(&p.shape);
            let set = format!(
                "nuts_out[nuts_at + {}] = {LUB_FREE}({name}{at}, nuts_lb{at}, nuts_ub{at});",
                flat_index(&p.shape)
            );
            format!(
                "{}{}",
                bound_arrays(p, lower, upper),
                for_each_element(&p.shape, &set)
            )
        }
        Constraint::Bounds { lower, upper } => {
            let value = match (lower, upper) {
                (Some(lb), None) => format!("({name} - {lb}).ln()"),
                (None, Some(ub)) => format!("({ub} - {name}).ln()"),
                (Some(lb), Some(ub)) => format!(
                    "{{ let nuts_u = ({name} - {lb}) / ({ub} - {lb}); (nuts_u / (1.0 - nuts_u)).ln() }}"
                ),
                (None, None) => unreachable!("a bound is given"),
            };
            write_elements(&p.shape, &value)
        }
        Constraint::Affine { offset, multiplier } => {
            let mu = offset.clone().unwrap_or_else(|| "0.0".into());
            let sigma = multiplier.clone().unwrap_or_else(|| "1.0".into());
            write_elements(&p.shape, &format!("({name} - {mu}) / {sigma}"))
        }
        Constraint::Ordered | Constraint::PositiveOrdered => {
            let first = if p.constraint == Constraint::Ordered {
                format!("{name}[0]")
            } else {
                format!("{name}[0].ln()")
            };
            format!(
                "    if {k} > 0 {{ {o0} = {first}; }}
    for nuts_i in 1..{k} {{ {oi} = ({name}[nuts_i] - {name}[nuts_i - 1]).ln(); }}\n",
                o0 = out("0"),
                oi = out("nuts_i")
            )
        }
        Constraint::Simplex => format!(
            "    assert!((sum({name}) - 1.0).abs() <= 1e-8, {sums});
    let mut nuts_stick = 1.0;
    for nuts_i in 0..({k} - 1) {{
        let nuts_z = {name}[nuts_i] / nuts_stick;
        {oi} = (nuts_z / (1.0 - nuts_z)).ln() + (({k} - 1 - nuts_i) as f64).ln();
        nuts_stick -= {name}[nuts_i];
    }}\n",
            sums = fails("a simplex: its elements must sum to 1"),
            oi = out("nuts_i")
        ),
        Constraint::SumToZero => format!(
            "    assert!(sum({name}).abs() <= 1e-8, {sums});
    let nuts_n = ({k} - 1) as f64;
    let mut nuts_w = -{name}[{k} - 1] / nuts_n;
    let mut nuts_sum = nuts_w;
    if {k} > 1 {{ {last} = nuts_w * (nuts_n * (nuts_n + 1.0)).sqrt(); }}
    for nuts_r in 1..({k} - 1) {{
        let nuts_j = {k} - 1 - nuts_r;
        let nuts_m = nuts_j as f64;
        nuts_w = (nuts_sum - {name}[nuts_j]) / nuts_m;
        {oj} = nuts_w * (nuts_m * (nuts_m + 1.0)).sqrt();
        nuts_sum += nuts_w;
    }}\n",
            sums = fails("a sum-to-zero vector: its elements must sum to 0"),
            last = out(&format!("{k} - 2")),
            oj = out("nuts_j - 1")
        ),
        Constraint::UnitVector => format!(
            "    assert!((dot({name}, {name}) - 1.0).abs() <= 1e-8, {unit});
{copy}",
            unit = fails("a unit vector"),
            copy = write_elements(&p.shape, name)
        ),
        Constraint::CholeskyFactorCorr
        | Constraint::CholeskyFactorCov
        | Constraint::CorrMatrix
        | Constraint::CovMatrix => free_matrix(p),
    }
}

/// The free transforms of the Cholesky factors (Stan's
/// `cholesky_corr_free` and `cholesky_factor_free`).
fn free_matrix(p: &Parameter) -> String {
    let name = &p.name;
    let k = extent_text(&p.shape[0]);
    let out = |i: &str| format!("nuts_out[nuts_at + {i}]");
    let fails = |what: &str| format!("\"the initial value of `{name}` is not {what}\"");
    match p.constraint {
        Constraint::CholeskyFactorCorr => format!(
            "    let mut nuts_p: usize = 0;
    for nuts_i in 1..{k} {{
        let mut nuts_sq = 0.0;
        for nuts_j in 0..nuts_i {{
            let nuts_z = {name}[nuts_i][nuts_j] / (1.0 - nuts_sq).sqrt();
            {op} = 0.5 * ((1.0 + nuts_z) / (1.0 - nuts_z)).ln();
            nuts_p += 1;
            nuts_sq += {name}[nuts_i][nuts_j] * {name}[nuts_i][nuts_j];
        }}
        assert!((nuts_sq + {name}[nuts_i][nuts_i] * {name}[nuts_i][nuts_i] - 1.0).abs() <= 1e-8, {unit});
    }}\n",
            op = out("nuts_p"),
            unit = fails("the Cholesky factor of a correlation matrix: its rows must have length 1")
        ),
        Constraint::CholeskyFactorCov => format!(
            "    let mut nuts_p: usize = 0;
    for nuts_i in 0..{k} {{
        for nuts_j in 0..(nuts_i + 1).min({n}) {{
            {op} = if nuts_i == nuts_j {{ {name}[nuts_i][nuts_j].ln() }} else {{ {name}[nuts_i][nuts_j] }};
            nuts_p += 1;
        }}
    }}\n",
            n = extent_text(&p.shape[1]),
            op = out("nuts_p")
        ),
        Constraint::CovMatrix => format!(
            "{factor}    let mut nuts_p: usize = 0;
    for nuts_i in 0..{k} {{
        for nuts_j in 0..(nuts_i + 1) {{
            {op} = if nuts_i == nuts_j {{ nuts_l[nuts_i][nuts_j].ln() }} else {{ nuts_l[nuts_i][nuts_j] }};
            nuts_p += 1;
        }}
    }}\n",
            factor = cholesky_of(name, &k),
            op = out("nuts_p")
        ),
        Constraint::CorrMatrix => format!(
            "{factor}    let mut nuts_acc = [1.0; {k}];
    let mut nuts_p: usize = 0;
    for nuts_j in 0..{k} {{
        assert!(({name}[nuts_j][nuts_j] - 1.0).abs() <= 1e-8, {unit});
        for nuts_i in (nuts_j + 1)..{k} {{
            let nuts_z = nuts_l[nuts_i][nuts_j] / nuts_acc[nuts_i].sqrt();
            {op} = 0.5 * ((1.0 + nuts_z) / (1.0 - nuts_z)).ln();
            nuts_p += 1;
            nuts_acc[nuts_i] *= 1.0 - nuts_z * nuts_z;
        }}
    }}\n",
            factor = cholesky_of(name, &k),
            op = out("nuts_p"),
            unit = fails("a correlation matrix: its diagonal must be 1")
        ),
        _ => unreachable!("a matrix constraint"),
    }
}

/// `nuts_l`, the Cholesky factor of the symmetric matrix `name` (its lower
/// triangle read); NaN where the matrix is not positive definite.
fn cholesky_of(name: &str, k: &str) -> String {
    format!(
        "    let mut nuts_l = [[0.0; {k}]; {k}];
    for nuts_i in 0..{k} {{
        for nuts_j in 0..(nuts_i + 1) {{
            let mut nuts_s = {name}[nuts_i][nuts_j];
            for nuts_m in 0..nuts_j {{ nuts_s -= nuts_l[nuts_i][nuts_m] * nuts_l[nuts_j][nuts_m]; }}
            nuts_l[nuts_i][nuts_j] = if nuts_i == nuts_j {{ nuts_s.sqrt() }} else {{ nuts_s / nuts_l[nuts_j][nuts_j] }};
        }}
    }}\n"
    )
}

/// Writes the elements of `value` (an expression of the parameter's shape)
/// at `nuts_at`, row-major.
fn write_elements(shape: &[Extent], value: &str) -> String {
    match shape {
        [] => format!("    nuts_out[nuts_at] = {value};\n"),
        [n] => format!(
            "    let nuts_f = {value};\n    for nuts_i in 0..{n} {{ nuts_out[nuts_at + nuts_i] = nuts_f[nuts_i]; }}\n",
            n = extent_text(n)
        ),
        [m, n] => format!(
            "    let nuts_f = {value};\n    for nuts_i in 0..{m} {{ for nuts_j in 0..{n} {{ nuts_out[nuts_at + nuts_i * {n} + nuts_j] = nuts_f[nuts_i][nuts_j]; }} }}\n",
            m = extent_text(m),
            n = extent_text(n)
        ),
        _ => unreachable!("at most two axes"),
    }
}
