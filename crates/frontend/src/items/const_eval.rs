//! Constant evaluation: the values of `const` items and of constant
//! expressions (array lengths, const generic arguments), as Rust computes
//! them (wrapping, rounding and `as` casts of the item's type), the largest
//! array, and the reading of number literals.

use autobatch_types::{Loc, ScalarType};

use super::{error, CheckResult, ConstValue, MapNote, ModuleScope};
use crate::hir::{DimExpr, Literal, TensorTy};
use crate::location::{end_of, expr_end, expr_start, start_of};
use crate::Diagnostic;

/// An intermediate value of constant evaluation; `None` types are unsuffixed
/// literals that take the type of what they meet.
#[derive(Clone, Copy, Debug)]
enum Eval {
    Bool(bool),
    Int(i128, Option<ScalarType>),
    Float(f64, Option<ScalarType>),
}

/// The largest size of an array value, in bytes (as in Rust, `isize::MAX`);
/// so also the largest array length.
pub(crate) const MAX_ARRAY_BYTES: u64 = isize::MAX as u64;

/// The error for an array length past [`MAX_ARRAY_BYTES`].
pub(super) fn length_out_of_range(message: String, loc: Loc, end: Loc) -> Box<Diagnostic> {
    error(message, loc, end, "length out of range")
        .map_note(format!("an array length is at most {MAX_ARRAY_BYTES}"))
}

/// Rejects an array type whose fixed lengths make a value of more than
/// [`MAX_ARRAY_BYTES`] bytes (symbolic and generic lengths are not known yet).
pub(crate) fn check_array_size(t: &TensorTy, loc: Loc, end: Loc) -> CheckResult<()> {
    let element_bytes: u64 = match t.elem {
        ScalarType::Bool => 1,
        ScalarType::I32 | ScalarType::F32 => 4,
        ScalarType::I64 | ScalarType::Usize | ScalarType::F64 => 8,
    };
    let mut bytes = Some(element_bytes);
    for d in &t.dims {
        match d {
            DimExpr::Fixed(0) => return Ok(()),
            DimExpr::Fixed(n) => bytes = bytes.and_then(|b| b.checked_mul(*n)),
            DimExpr::Symbol(_) | DimExpr::Generic(_) => {}
        }
    }
    match bytes {
        Some(b) if b <= MAX_ARRAY_BYTES => Ok(()),
        _ => Err(error(
            "array lengths out of range: this array would take more bytes than a computer can address",
            loc,
            end,
            "array too large",
        )
        .map_note(format!(
            "an array holds at most {MAX_ARRAY_BYTES} bytes; each `{}` takes {element_bytes}",
            t.elem
        ))),
    }
}

fn int_range(ty: ScalarType) -> (i128, i128) {
    match ty {
        ScalarType::I32 => (i32::MIN as i128, i32::MAX as i128),
        ScalarType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => (0, u64::MAX as i128),
    }
}

/// Evaluates a constant expression to a value of type `want` (or its natural type).
/// `in_progress` holds the constants being evaluated, to report cycles.
pub(crate) fn eval_const_expr(
    scope: &ModuleScope,
    expr: &syn::Expr,
    want: Option<ScalarType>,
    in_progress: &mut Vec<String>,
) -> CheckResult<ConstValue> {
    let value = eval(scope, expr, in_progress, 0)?;
    let (loc, end) = (expr_start(expr), expr_end(expr));
    let mismatch = |found: &str, want: ScalarType| {
        error(
            format!("mismatched types: expected `{want}`, found {found}"),
            loc,
            end,
            format!("expected `{want}`"),
        )
    };
    let coerced = match (value, want) {
        (Eval::Bool(b), None | Some(ScalarType::Bool)) => ConstValue {
            ty: ScalarType::Bool,
            literal: Literal::Bool(b),
        },
        (Eval::Int(v, t), w) => {
            let ty = match (t, w) {
                (Some(t), Some(w)) if t != w => return Err(mismatch(&format!("`{t}`"), w)),
                (Some(t), _) => t,
                (None, Some(w)) if w.is_integer() => w,
                (None, Some(w)) => return Err(mismatch("an integer", w)),
                (None, None) => ScalarType::I64,
            };
            let (lo, hi) = int_range(ty);
            if v < lo || v > hi {
                return Err(error(
                    format!("the constant value {v} does not fit in `{ty}`"),
                    loc,
                    end,
                    "out of range",
                ));
            }
            ConstValue {
                ty,
                literal: Literal::Int(v),
            }
        }
        (Eval::Float(v, t), w) => {
            let ty = match (t, w) {
                (Some(t), Some(w)) if t != w => return Err(mismatch(&format!("`{t}`"), w)),
                (Some(t), _) => t,
                (None, Some(w)) if w.is_float() => w,
                (None, Some(w)) => return Err(mismatch("a float", w)),
                (None, None) => ScalarType::F64,
            };
            ConstValue {
                ty,
                literal: Literal::Float {
                    as_f64: v,
                    as_f32: v as f32,
                },
            }
        }
        (Eval::Bool(_), Some(w)) => return Err(mismatch("`bool`", w)),
    };
    Ok(coerced)
}

fn eval(
    scope: &ModuleScope,
    expr: &syn::Expr,
    in_progress: &mut Vec<String>,
    depth: usize,
) -> CheckResult<Eval> {
    let (loc, end) = (expr_start(expr), expr_end(expr));
    if depth > crate::guard::MAX_NESTING {
        return Err(Box::new(crate::guard::too_deep(loc, end)));
    }
    match expr {
        syn::Expr::Paren(p) => eval(scope, &p.expr, in_progress, depth + 1),
        syn::Expr::Group(g) => eval(scope, &g.expr, in_progress, depth + 1),
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Bool(b) => Ok(Eval::Bool(b.value)),
            syn::Lit::Int(i) => {
                let lit = read_int_literal(i)?;
                Ok(match lit {
                    NumberLiteral::Int(v, t) => Eval::Int(v, t),
                    NumberLiteral::Float(v, t) => Eval::Float(v, t),
                })
            }
            syn::Lit::Float(f) => {
                let (value, ty) = read_float_literal(f)?;
                Ok(Eval::Float(value, ty))
            }
            _ => Err(not_const(loc, end)),
        },
        syn::Expr::Path(p) if p.qself.is_none() => eval_path(scope, &p.path, in_progress, loc, end),
        syn::Expr::Unary(u) => {
            let v = eval(scope, &u.expr, in_progress, depth + 1)?;
            eval_unary(&u.op, v, loc, end)
        }
        syn::Expr::Cast(c) => {
            let v = eval(scope, &c.expr, in_progress, depth + 1)?;
            eval_cast(v, &c.ty, loc, end)
        }
        syn::Expr::Binary(b) => {
            let l = eval(scope, &b.left, in_progress, depth + 1)?;
            let r = eval(scope, &b.right, in_progress, depth + 1)?;
            eval_binary(&b.op, l, r).map_err(|m| error(m, loc, end, "in this constant expression"))
        }
        _ => Err(not_const(loc, end)),
    }
}

/// The error for the constant `name` (at `loc..end`) whose definition
/// reaches itself.
pub(super) fn defined_in_terms_of_itself(name: &str, loc: Loc, end: Loc) -> Box<Diagnostic> {
    error(
        format!("the constant `{name}` is defined in terms of itself"),
        loc,
        end,
        "cycle in constant definitions",
    )
}

/// The error for an expression `loc..end` that is not a constant expression.
fn not_const(loc: Loc, end: Loc) -> Box<Diagnostic> {
    error(
        "this expression cannot be evaluated when the program is compiled",
        loc,
        end,
        "not a constant expression",
    )
    .map_note("constants may use literals, other constants, arithmetic, bitwise operators and `as`")
}

/// A name in a constant expression: a well-known constant or a `const`
/// evaluated already (one still `in_progress` is a cycle).
fn eval_path(
    scope: &ModuleScope,
    path: &syn::Path,
    in_progress: &[String],
    loc: Loc,
    end: Loc,
) -> CheckResult<Eval> {
    if let Some(c) = ModuleScope::well_known_constant(path) {
        return Ok(from_const(c));
    }
    let Some(name) = path.get_ident().map(|i| i.to_string()) else {
        return Err(not_const(loc, end));
    };
    if let Some(c) = scope.consts.get(&name) {
        return Ok(from_const(*c));
    }
    if in_progress.contains(&name) {
        return Err(defined_in_terms_of_itself(&name, loc, end));
    }
    Err(error(
        format!("cannot find constant `{name}`"),
        loc,
        end,
        "not a constant",
    )
    .map_note("constants may only refer to other `const` items"))
}

/// `-v` or `!v` in a constant expression.
fn eval_unary(op: &syn::UnOp, v: Eval, loc: Loc, end: Loc) -> CheckResult<Eval> {
    match (op, v) {
        (syn::UnOp::Neg(_), Eval::Int(x, t)) => {
            if t == Some(ScalarType::Usize) {
                return Err(error(
                    "cannot negate a `usize`",
                    loc,
                    end,
                    "negation of an unsigned value",
                ));
            }
            Ok(Eval::Int(-x, t))
        }
        (syn::UnOp::Neg(_), Eval::Float(x, t)) => Ok(Eval::Float(-x, t)),
        (syn::UnOp::Not(_), Eval::Bool(b)) => Ok(Eval::Bool(!b)),
        (syn::UnOp::Not(_), Eval::Int(x, t)) => {
            let ty = t.unwrap_or(ScalarType::I64);
            Ok(Eval::Int(wrap_int(!x, ty), Some(ty)))
        }
        _ => Err(error(
            "this operator does not apply to this constant",
            loc,
            end,
            "invalid operand",
        )),
    }
}

/// `v as ty` in a constant expression, as Rust's `as`.
fn eval_cast(v: Eval, ty: &syn::Type, loc: Loc, end: Loc) -> CheckResult<Eval> {
    let to = match ty {
        syn::Type::Path(p) => p
            .path
            .get_ident()
            .and_then(|i| ScalarType::from_name(&i.to_string())),
        _ => None,
    };
    let Some(to) = to else {
        return Err(not_const(loc, end));
    };
    Ok(match (v, to) {
        (Eval::Bool(b), t) if t.is_integer() => Eval::Int(b as i128, Some(t)),
        (Eval::Int(x, _), t) if t.is_integer() => Eval::Int(wrap_int(x, t), Some(t)),
        (Eval::Int(x, _), t) if t.is_float() => Eval::Float(round_to(x as f64, t), Some(t)),
        (Eval::Float(x, _), t) if t.is_integer() => {
            let (lo, hi) = int_range(t);
            // `as` saturates and maps NaN to 0, as in Rust.
            let v = if x.is_nan() {
                0
            } else {
                (x.trunc().max(lo as f64).min(hi as f64)) as i128
            };
            Eval::Int(v.clamp(lo, hi), Some(t))
        }
        (Eval::Float(x, _), t) if t.is_float() => Eval::Float(round_to(x, t), Some(t)),
        (Eval::Bool(b), ScalarType::Bool) => Eval::Bool(b),
        _ => {
            return Err(error(
                format!("this constant cannot be cast to `{to}`"),
                loc,
                end,
                "invalid cast",
            ))
        }
    })
}

fn from_const(c: ConstValue) -> Eval {
    match c.literal {
        Literal::Bool(b) => Eval::Bool(b),
        Literal::Int(v) => Eval::Int(v, Some(c.ty)),
        Literal::Float { as_f64, .. } => Eval::Float(as_f64, Some(c.ty)),
    }
}

fn round_to(x: f64, ty: ScalarType) -> f64 {
    if ty == ScalarType::F32 {
        x as f32 as f64
    } else {
        x
    }
}

fn wrap_int(x: i128, ty: ScalarType) -> i128 {
    match ty {
        ScalarType::I32 => x as i32 as i128,
        ScalarType::I64 => x as i64 as i128,
        _ => x as u64 as i128,
    }
}

fn eval_binary(op: &syn::BinOp, l: Eval, r: Eval) -> Result<Eval, String> {
    use syn::BinOp as B;
    let join =
        |a: Option<ScalarType>, b: Option<ScalarType>| -> Result<Option<ScalarType>, String> {
            match (a, b) {
                (Some(a), Some(b)) if a != b => {
                    Err(format!("mismatched types in a constant: `{a}` and `{b}`"))
                }
                (Some(a), _) | (None, Some(a)) => Ok(Some(a)),
                (None, None) => Ok(None),
            }
        };
    match (l, r) {
        (Eval::Int(a, ta), Eval::Int(b, tb)) => {
            if matches!(op, B::Shl(_) | B::Shr(_)) {
                let ty = ta.unwrap_or(ScalarType::I64);
                let bits = match ty {
                    ScalarType::I32 => 32,
                    _ => 64,
                };
                if b < 0 || b >= bits {
                    return Err("shift amount out of range in a constant".into());
                }
                let v = if matches!(op, B::Shl(_)) {
                    wrap_int(a << b, ty)
                } else {
                    a >> b
                };
                return Ok(Eval::Int(v, ta));
            }
            let ty = join(ta, tb)?;
            let v = match op {
                B::Add(_) => a.checked_add(b),
                B::Sub(_) => a.checked_sub(b),
                B::Mul(_) => a.checked_mul(b),
                B::Div(_) if b == 0 => return Err("division by zero in a constant".into()),
                B::Rem(_) if b == 0 => return Err("division by zero in a constant".into()),
                B::Div(_) => a.checked_div(b),
                B::Rem(_) => a.checked_rem(b),
                B::BitAnd(_) => Some(a & b),
                B::BitOr(_) => Some(a | b),
                B::BitXor(_) => Some(a ^ b),
                _ => return Err("this operator is not supported in constants".into()),
            };
            let v = v.ok_or("arithmetic overflow in a constant")?;
            if let Some(t) = ty {
                let (lo, hi) = int_range(t);
                if v < lo || v > hi {
                    return Err(format!("arithmetic overflow in a constant of type `{t}`"));
                }
            }
            Ok(Eval::Int(v, ty))
        }
        (Eval::Float(a, ta), Eval::Float(b, tb)) => {
            let ty = join(ta, tb)?;
            let v = match op {
                B::Add(_) => a + b,
                B::Sub(_) => a - b,
                B::Mul(_) => a * b,
                B::Div(_) => a / b,
                B::Rem(_) => a % b,
                _ => return Err("this operator is not supported on float constants".into()),
            };
            Ok(Eval::Float(round_to(v, ty.unwrap_or(ScalarType::F64)), ty))
        }
        (Eval::Bool(a), Eval::Bool(b)) => match op {
            B::BitAnd(_) | B::And(_) => Ok(Eval::Bool(a & b)),
            B::BitOr(_) | B::Or(_) => Ok(Eval::Bool(a | b)),
            B::BitXor(_) => Ok(Eval::Bool(a ^ b)),
            _ => Err("this operator is not supported on bool constants".into()),
        },
        _ => Err("mismatched types in a constant expression; convert with `as`".into()),
    }
}

/// An integer literal token may still be a float (`1f64`).
pub(crate) enum NumberLiteral {
    Int(i128, Option<ScalarType>),
    Float(f64, Option<ScalarType>),
}

pub(crate) fn read_int_literal(lit: &syn::LitInt) -> CheckResult<NumberLiteral> {
    let span = lit.span();
    let (loc, end) = (start_of(span), end_of(span));
    let suffix = lit.suffix();
    let ty = match suffix {
        "" => None,
        s => match ScalarType::from_name(s) {
            Some(t) if t != ScalarType::Bool => Some(t),
            _ => {
                return Err(error(
                    format!("the literal suffix `{s}` is not supported"),
                    loc,
                    end,
                    "unsupported suffix",
                )
                .map_note("use i32, i64, usize, f32 or f64"))
            }
        },
    };
    if let Some(t) = ty {
        if t.is_float() {
            let v: f64 = lit.base10_digits().parse().unwrap_or(f64::NAN);
            return Ok(NumberLiteral::Float(v, Some(t)));
        }
    }
    match lit.base10_parse::<u128>() {
        Ok(v) if v <= u64::MAX as u128 => Ok(NumberLiteral::Int(v as i128, ty)),
        _ => Err(error(
            "this integer literal is too large",
            loc,
            end,
            "too large",
        )),
    }
}

pub(crate) fn read_float_literal(lit: &syn::LitFloat) -> CheckResult<(f64, Option<ScalarType>)> {
    let span = lit.span();
    let (loc, end) = (start_of(span), end_of(span));
    let ty = match lit.suffix() {
        "" => None,
        "f32" => Some(ScalarType::F32),
        "f64" => Some(ScalarType::F64),
        s => {
            return Err(error(
                format!("the literal suffix `{s}` is not supported"),
                loc,
                end,
                "unsupported suffix",
            )
            .map_note("float literals may end in f32 or f64"))
        }
    };
    match lit.base10_digits().parse::<f64>() {
        Ok(v) => Ok((v, ty)),
        Err(_) => Err(error(
            "this float literal cannot be read",
            loc,
            end,
            "invalid literal",
        )),
    }
}

/// Reads a float literal's digits as both widths (each rounded once).
pub(crate) fn float_literal_value(digits: &str, fallback: f64) -> Literal {
    let as_f64 = digits.parse::<f64>().unwrap_or(fallback);
    let as_f32 = digits.parse::<f32>().unwrap_or(fallback as f32);
    Literal::Float { as_f64, as_f32 }
}
