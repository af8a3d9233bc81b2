//! A model's transformed parameters and generated quantities: the values
//! `fn transformed` and `fn generated` compute from the parameters of
//! `fn model`, reported with every draw under the names their results
//! carry.
//!
//! ```text
//! fn transformed(mu: f64, tau: f64, theta_tilde: [f64; J]) -> [f64; J] {
//!     let theta = mu + tau * theta_tilde;
//!     theta
//! }
//! fn generated(theta: [f64; J]) -> ([f64; J], f64) {
//!     let y_rep = normal_rng(theta, sigma);
//!     let max_y = ...;
//!     (y_rep, max_y)
//! }
//! ```
//!
//! Each function's arguments are found by name: `fn transformed` takes
//! parameters of `fn model`, `fn generated` parameters or results of `fn
//! transformed`, each with the type it has there. The names of the results
//! are those of the function's last expression, a name or a tuple of names
//! (`(y_rep, max_y)`), one per element of the declared result. [`find`]
//! checks this and gives the quantities and the code that computes them
//! from the constrained parameters, which the lowering puts into
//! `nuts_constrain`: the sampler runs it once per kept draw.

use syn::spanned::Spanned;

use crate::diagnostic::Diagnostic;
use crate::location::{end_of, start_of};
use crate::parameters::{Extent, Names, Parameter};

/// The function of the transformed parameters.
pub const TRANSFORMED_FUNCTION: &str = "transformed";

/// The function of the generated quantities.
pub const GENERATED_FUNCTION: &str = "generated";

/// One reported quantity: a result of `fn transformed` or `fn generated`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantity {
    pub name: String,
    /// The lengths of its axes, outermost first; empty for a scalar.
    pub shape: Vec<Extent>,
    /// Whether its elements are `i64` (reported as numbers like the rest).
    pub integer: bool,
}

/// The quantities of a model and the statements computing them.
#[derive(Default)]
pub(crate) struct Found {
    /// Those of `fn transformed`, then those of `fn generated`.
    pub quantities: Vec<Quantity>,
    /// Statements binding each quantity by name, given the parameters
    /// bound by name.
    pub code: String,
}

/// A value a function may take by name: a parameter or an earlier quantity.
struct Known {
    name: String,
    shape: Vec<Extent>,
    integer: bool,
    what: &'static str,
}

/// The quantities of `fn transformed` and `fn generated` among `functions`.
pub(crate) fn find(
    functions: &[&syn::ItemFn],
    parameters: &[Parameter],
    names: &Names,
) -> Result<Found, Vec<Diagnostic>> {
    let mut known: Vec<Known> = parameters
        .iter()
        .map(|p| Known {
            name: p.name.clone(),
            shape: p.shape.clone(),
            integer: false,
            what: "a parameter of `fn model`",
        })
        .collect();
    let mut found = Found::default();
    let mut errors = Vec::new();
    for (function, takes) in [
        (TRANSFORMED_FUNCTION, "parameters of `fn model`"),
        (
            GENERATED_FUNCTION,
            "parameters of `fn model` or results of `fn transformed`",
        ),
    ] {
        let Some(f) = functions.iter().find(|f| f.sig.ident == function) else {
            continue;
        };
        match quantities_of(f, &known, names, takes) {
            Ok((quantities, call)) => {
                found.code.push_str(&call);
                for q in &quantities {
                    known.push(Known {
                        name: q.name.clone(),
                        shape: q.shape.clone(),
                        integer: q.integer,
                        what: "a result of `fn transformed`",
                    });
                }
                found.quantities.extend(quantities);
            }
            Err(e) => {
                errors.extend(e);
                // Later functions would report its results as unknown.
                break;
            }
        }
    }
    if errors.is_empty() {
        Ok(found)
    } else {
        Err(errors)
    }
}

fn error_at(span: proc_macro2::Span, message: impl Into<String>, label: &str) -> Diagnostic {
    Diagnostic::new(message, start_of(span), end_of(span), label)
}

/// The results of one function, and the statement that calls it.
fn quantities_of(
    f: &syn::ItemFn,
    known: &[Known],
    names: &Names,
    takes: &str,
) -> Result<(Vec<Quantity>, String), Vec<Diagnostic>> {
    let function = f.sig.ident.to_string();
    let mut errors = Vec::new();
    let mut arguments = Vec::new();
    for input in &f.sig.inputs {
        match argument(input, known, names, &function, takes) {
            Ok(name) => arguments.push(name),
            Err(d) => errors.push(d),
        }
    }
    if !f.sig.generics.params.is_empty() {
        errors.push(error_at(
            f.sig.generics.span(),
            format!(
                "`fn {function}` must not be generic: the sampler calls it with the parameters"
            ),
            "generic",
        ));
    }
    let results = match results(f, known, names) {
        Ok(r) => r,
        Err(d) => {
            errors.push(d);
            Vec::new()
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let bound: Vec<&str> = results.iter().map(|q| q.name.as_str()).collect();
    let pattern = if bound.len() == 1 && !returns_tuple(f) {
        bound[0].to_string()
    } else {
        format!(
            "({}{})",
            bound.join(", "),
            if bound.len() == 1 { "," } else { "" }
        )
    };
    let call = format!("let {pattern} = {function}({});\n", arguments.join(", "));
    Ok((results, call))
}

fn returns_tuple(f: &syn::ItemFn) -> bool {
    matches!(&f.sig.output, syn::ReturnType::Type(_, t) if matches!(&**t, syn::Type::Tuple(_)))
}

/// The name of one argument, checked against the value of that name.
fn argument(
    input: &syn::FnArg,
    known: &[Known],
    names: &Names,
    function: &str,
    takes: &str,
) -> Result<String, Diagnostic> {
    let syn::FnArg::Typed(typed) = input else {
        return Err(error_at(
            input.span(),
            format!("`fn {function}` takes {takes}, by name"),
            "not a name",
        ));
    };
    let syn::Pat::Ident(ident) = &*typed.pat else {
        return Err(error_at(
            typed.pat.span(),
            format!("an argument of `fn {function}` must be a name: one of the {takes}"),
            "not a name",
        ));
    };
    let name = ident.ident.to_string();
    let Some(k) = known.iter().find(|k| k.name == name) else {
        let all: Vec<&str> = known.iter().map(|k| k.name.as_str()).collect();
        return Err(error_at(
            ident.ident.span(),
            format!(
                "`fn {function}` takes `{name}`, which is not one of the {takes} (those are: {})",
                all.join(", ")
            ),
            "unknown name",
        ));
    };
    let (shape, integer) = shape(&typed.ty, names, &format!("the argument `{name}`"))?;
    if shape != k.shape || integer != k.integer {
        return Err(error_at(
            typed.ty.span(),
            format!(
                "the argument `{name}` of `fn {function}` has the type `{}`, but `{name}` is {} of type `{}`",
                type_text(&shape, integer),
                k.what,
                type_text(&k.shape, k.integer)
            ),
            "wrong type",
        ));
    }
    Ok(name)
}

/// The results a function declares, named by its last expression.
fn results(f: &syn::ItemFn, known: &[Known], names: &Names) -> Result<Vec<Quantity>, Diagnostic> {
    let function = f.sig.ident.to_string();
    let syn::ReturnType::Type(_, ty) = &f.sig.output else {
        return Err(error_at(
            f.sig.ident.span(),
            format!("`fn {function}` returns nothing: declare its results, `-> [f64; J]` or a tuple `-> ([f64; J], f64)`"),
            "no results",
        ));
    };
    let types: Vec<&syn::Type> = match &**ty {
        syn::Type::Tuple(t) => t.elems.iter().collect(),
        t => vec![t],
    };
    let how = "it must end with the names of its results: `theta` or `(theta, y_rep)`";
    let tail = match f.block.stmts.last() {
        Some(syn::Stmt::Expr(e, None)) => e,
        _ => {
            return Err(error_at(
                f.sig.ident.span(),
                format!("`fn {function}` does not end with its results; {how}, which name them in the draws"),
                "no final expression",
            ))
        }
    };
    let tail_names: Vec<&syn::Expr> = match tail {
        syn::Expr::Tuple(t) => t.elems.iter().collect(),
        syn::Expr::Paren(p) => vec![&*p.expr],
        e => vec![e],
    };
    let mut quantities = Vec::new();
    for e in &tail_names {
        let name = match e {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                p.path.get_ident().expect("checked").to_string()
            }
            other => {
                return Err(error_at(
                    other.span(),
                    format!("a result of `fn {function}` must be a name, which names it in the draws; {how}"),
                    "not a name",
                ))
            }
        };
        check_name(&name, e.span(), known, &quantities, &function)?;
        quantities.push(name);
    }
    if quantities.len() != types.len() {
        return Err(error_at(
            tail.span(),
            format!(
                "`fn {function}` declares {} results but ends with {} names; {how}, one name per result",
                types.len(),
                quantities.len()
            ),
            "not one name per result",
        ));
    }
    quantities
        .into_iter()
        .zip(types)
        .map(|(name, ty)| {
            let (shape, integer) = shape(ty, names, &format!("the result `{name}`"))?;
            Ok(Quantity {
                name,
                shape,
                integer,
            })
        })
        .collect()
}

/// A result's name must be new and not the sampler's.
fn check_name(
    name: &str,
    span: proc_macro2::Span,
    known: &[Known],
    earlier: &[String],
    function: &str,
) -> Result<(), Diagnostic> {
    if name.starts_with("nuts_") {
        return Err(error_at(
            span,
            format!("the result `{name}` of `fn {function}` has a name starting with `nuts_`, which the sampler reserves; rename it"),
            "reserved name",
        ));
    }
    if let Some(k) = known.iter().find(|k| k.name == name) {
        return Err(error_at(
            span,
            format!("the result `{name}` of `fn {function}` has the name of {}; each reported value needs its own name", k.what),
            "name already used",
        ));
    }
    if earlier.iter().any(|e| e == name) {
        return Err(error_at(
            span,
            format!("`fn {function}` names two results `{name}`"),
            "named twice",
        ));
    }
    Ok(())
}

/// The axes of `f64`, `i64` or arrays of them, and whether they are `i64`.
fn shape(ty: &syn::Type, names: &Names, what: &str) -> Result<(Vec<Extent>, bool), Diagnostic> {
    let mut extents = Vec::new();
    let mut ty = ty;
    loop {
        match ty {
            syn::Type::Array(array) => {
                extents.push(crate::parameters::extent(&array.len, names, what)?);
                ty = &array.elem;
            }
            syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("f64") => {
                return Ok((extents, false))
            }
            syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("i64") => {
                return Ok((extents, true))
            }
            t => {
                return Err(error_at(
                    t.span(),
                    format!("{what} is reported with the draws, so it must be an `f64`, an `i64` or an array of them"),
                    "not a number or an array of numbers",
                ))
            }
        }
    }
}

fn type_text(shape: &[Extent], integer: bool) -> String {
    let elem = if integer { "i64" } else { "f64" };
    shape.iter().rev().fold(elem.to_string(), |inner, e| {
        let len = match e {
            Extent::Fixed(n) => n.to_string(),
            Extent::Named(name) => name.clone(),
        };
        format!("[{inner}; {len}]")
    })
}
