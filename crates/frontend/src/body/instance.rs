//! The instance forms: `join(f(a), g(b), ..)`, `map(f, xs, extra..)` and
//! `pfor::<N>(g, extra..)`. Each names functions of the program (`join` by
//! calls of them, `map` and `pfor` by name, their const generics inferred
//! as for calls or given as `f::<3>`) whose calls run as concurrent
//! instances of the member; the meaning is the sequential evaluation
//! (`docs/language.md`, "Instances").
//!
//! `map` maps exactly one array (its second argument); the arguments after
//! it go whole to every instance. To go through several arrays together,
//! `pfor` over the indices.

use autobatch_types::{Loc, ScalarType};

use crate::hir::{Builtin, DimExpr, Expr, ExprKind, TensorTy, Ty};
use crate::items::{check_array_size, error, CheckResult, MapNote, Signature};
use crate::location::{end_of, expr_end, expr_start, start_of};

use super::call::{inferred_const_args, partially_bound, substitute};
use super::{mk, no_generic_arguments, peel, FunctionChecker};

type Args = syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>;
type Turbofish = syn::AngleBracketedGenericArguments;

const JOIN_USAGE: &str = "write `join(f(a), g(b))`: two calls or more of functions of the program, which run as instances of the member; it gives the tuple `(f(a), g(b))`";
const MAP_USAGE: &str = "write `map(f, xs, a, b)`: one instance of the function `f` of the program per element of the array `xs`, instance `k` computing `f(xs[k], a, b)`; it gives the array of the results";
const PFOR_USAGE: &str = "write `pfor::<N>(g, a, b)`: `N` instances of the function `g` of the program, instance `k` computing `g(k as i64, a, b)` for `k` in `0..N`; it gives the array of the results";

/// Names that are syntax forms taking calls or functions, not functions.
const FORMS: [&str; 7] = [
    "catch",
    "grad",
    "value_and_grad",
    "jacobian",
    "join",
    "map",
    "pfor",
];

impl FunctionChecker<'_, '_> {
    /// `join(f(a), g(b), ...)`: two calls or more of functions of the
    /// program; the tuple of their results.
    pub(super) fn check_join(
        &mut self,
        turbofish: Option<&Turbofish>,
        args: &Args,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if let Some(t) = turbofish {
            return Err(no_generic_arguments("`join`", t).map_note(
                "give a function's const arguments in its call: `join(f::<3>(x), g(y))`",
            ));
        }
        if args.len() < 2 {
            let given = if args.is_empty() {
                "none was given"
            } else {
                "one was given"
            };
            return Err(error(
                format!("`join` takes two calls or more, but {given}"),
                loc,
                end,
                "expected two calls or more",
            )
            .map_note(JOIN_USAGE)
            .map_note("a single call needs no `join`: call the function"));
        }
        let mut calls = Vec::with_capacity(args.len());
        let mut tys = Vec::with_capacity(args.len());
        for a in args {
            self.check_join_call_syntax(a)?;
            let call = self.check_expr(a)?;
            if !matches!(call.kind, ExprKind::Call { catch: false, .. }) {
                return Err(error(
                    "`join` takes calls of functions of the program, but this is not one",
                    call.loc,
                    expr_end(a),
                    "not a call of a function of the program",
                )
                .map_note(JOIN_USAGE));
            }
            tys.push(call.ty.clone());
            calls.push(call);
        }
        Ok(mk(ExprKind::Join { calls }, Ty::Tuple(tys), loc))
    }

    /// An argument of `join` that is not a call of a function of the
    /// program, rejected by what it is (before it is checked). Calls of
    /// variables, constants and host primitives, and calls of unknown
    /// names, get the errors of any call.
    fn check_join_call_syntax(&self, a: &syn::Expr) -> CheckResult<()> {
        let (al, ae) = (expr_start(a), expr_end(a));
        let refuse = |what: String, note: &str| {
            Err(error(
                format!("`join` takes calls of functions of the program, but {what}"),
                al,
                ae,
                "not a call of a function of the program",
            )
            .map_note(note))
        };
        let c = match peel(a) {
            syn::Expr::Call(c) => c,
            syn::Expr::MethodCall(m) => {
                return refuse(
                    format!("`.{}()` is a method", m.method),
                    "wrap it in a function of the program and join calls of that function",
                )
            }
            _ => return refuse("this is not a call".into(), JOIN_USAGE),
        };
        let syn::Expr::Path(p) = peel(&c.func) else {
            return Ok(());
        };
        let Some(segment) = p.path.segments.first() else {
            return Ok(());
        };
        if p.qself.is_some() || p.path.segments.len() != 1 || p.path.leading_colon.is_some() {
            return Ok(());
        }
        let name = segment.ident.to_string();
        if self.lookup_local(&name).is_some() || self.scope.names.contains_key(&name) {
            return Ok(());
        }
        if name == "catch" {
            return refuse(
                "`catch(..)` is not one".into(),
                "to recover from a fault of an instance, join a function that catches it: `fn safe(x: i64) -> (bool, i64) { catch(f(x)) }`, then `join(safe(a), safe(b))`",
            );
        }
        if FORMS.contains(&name.as_str()) {
            return refuse(
                format!("`{name}(..)` is not one"),
                &format!(
                    "put the `{name}` in a function of the program and join calls of that function"
                ),
            );
        }
        if Builtin::function(&name).is_some() || Builtin::method(&name).is_some() {
            return refuse(
                format!("`{name}` is a builtin"),
                "wrap it in a function: `fn g(x: f64) -> f64 { ... }`",
            );
        }
        Ok(())
    }

    /// `map(f, xs, extra..)` or `pfor::<N>(g, extra..)` (`name` says which):
    /// `f`'s parameters take an element of `xs` (or the index `k: i64`),
    /// then the other arguments; the result is the array of `f`'s results
    /// (a tuple of arrays for a tuple result).
    pub(super) fn check_map(
        &mut self,
        name: &str,
        turbofish: Option<&Turbofish>,
        args: &Args,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let indexed = name == "pfor";
        let usage = if indexed { PFOR_USAGE } else { MAP_USAGE };
        let pfor_count = self.instance_header(name, turbofish, args.len(), (loc, end))?;
        let needed = if indexed { 1 } else { 2 };
        let (index, f_turbofish) = self.function_argument(name, &args[0], usage)?;
        let sig = self.scope.signatures[index].clone();
        let mut bindings = self.turbofish_bindings(&sig, f_turbofish)?;
        check_instance_arity(name, &sig, args.len() - needed, (loc, end))?;
        let mut checked = Vec::with_capacity(args.len() - 1);
        for a in args.iter().skip(1) {
            let x = self.check_expr(a)?;
            checked.push((x, expr_end(a)));
        }
        // What instance `k` gets first: the index, or element `k` of `xs`.
        let count = match pfor_count {
            Some(count) => {
                self.check_pfor_index(&sig, &args[0])?;
                Some(count)
            }
            None => {
                let (xs, xs_end) = &checked[0];
                self.mapped_array(&sig, xs, *xs_end, &mut bindings)?
            }
        };
        let extras = &checked[usize::from(!indexed)..];
        self.match_extra_args(name, &sig, extras, &mut bindings)?;
        let hint = if indexed {
            format!("give it explicitly: `pfor::<N>({}::<K>, ...)`", sig.name)
        } else {
            format!("give it explicitly: `map({}::<K>, xs)`", sig.name)
        };
        let const_args = inferred_const_args(&sig, &bindings, "the arguments", hint, (loc, end))?;
        let (ty, count) = match count {
            Some(count) => {
                let ty = arrays_of(&substitute(&sig.ret, &const_args), count);
                check_result_size(&ty, loc, end)?;
                (ty, count)
            }
            None => (Ty::Never, DimExpr::Fixed(0)),
        };
        Ok(mk(
            ExprKind::Map {
                function: index,
                const_args,
                count,
                indexed,
                args: checked.into_iter().map(|(x, _)| x).collect(),
            },
            ty,
            loc,
        ))
    }

    /// What comes before the function of `map` / `pfor` (`name`): `pfor`'s
    /// count (`None` for `map`, which takes no `::<...>`), and enough
    /// arguments (`given`).
    fn instance_header(
        &mut self,
        name: &str,
        turbofish: Option<&Turbofish>,
        given: usize,
        (loc, end): (Loc, Loc),
    ) -> CheckResult<Option<DimExpr>> {
        let indexed = name == "pfor";
        let usage = if indexed { PFOR_USAGE } else { MAP_USAGE };
        let pfor_count = if indexed {
            Some(self.pfor_count(turbofish, loc)?)
        } else {
            if let Some(t) = turbofish {
                return Err(no_generic_arguments("`map`", t)
                .map_note("the number of instances is the length of the array; give the function's const arguments on the function: `map(f::<3>, xs)`"));
            }
            None
        };
        let needed = if indexed { 1 } else { 2 };
        if given < needed {
            let want = if indexed {
                "a function (then arguments for every instance)"
            } else {
                "a function and an array (then arguments for every instance)"
            };
            return Err(error(
                format!("`{name}` takes {want}, but {given} argument(s) were given"),
                loc,
                end,
                format!("expected {needed} argument(s) or more"),
            )
            .map_note(usage));
        }
        Ok(pfor_count)
    }

    /// The arguments after the array of `map`, or after the function of
    /// `pfor`, against the parameters of `sig` after the first.
    fn match_extra_args(
        &mut self,
        name: &str,
        sig: &Signature,
        extras: &[(Expr, Loc)],
        bindings: &mut [Option<DimExpr>],
    ) -> CheckResult<()> {
        let indexed = name == "pfor";
        for (k, (arg, arg_end)) in extras.iter().enumerate() {
            let (pname, _, pty, _) = &sig.params[k + 1];
            if self.match_param(pty, &arg.ty, bindings) {
                continue;
            }
            let pty = &substitute(pty, &partially_bound(bindings));
            let mut d = error(
                format!(
                    "mismatched types: argument {} (`{pname}`) of `{}` must be `{}`, but this is `{}`",
                    k + 2,
                    sig.name,
                    self.show_with(pty, &sig.const_params),
                    self.show(&arg.ty)
                ),
                arg.loc,
                *arg_end,
                format!("expected `{}`", self.show_with(pty, &sig.const_params)),
            )
            .map_note(format!(
                "`{name}` passes {} first, then the other arguments whole to every instance",
                if indexed { "the index" } else { "an element of the array" }
            ));
            if !indexed && matches!(&arg.ty, Ty::Tensor(t) if !t.is_scalar()) {
                d = d.map_note("`map` maps over one array only; to go through several arrays together, use `pfor::<N>(g, xs, ys)` and index them with `k`");
            }
            return Err(d);
        }
        Ok(())
    }

    /// The `N` of `pfor::<N>`: a number, a `const`, a const generic
    /// parameter or a symbolic dimension.
    fn pfor_count(&mut self, turbofish: Option<&Turbofish>, loc: Loc) -> CheckResult<DimExpr> {
        let Some(t) = turbofish else {
            return Err(error(
                "`pfor` needs the number of instances: write `pfor::<N>(g, ...)`",
                loc,
                Loc::new(loc.line, loc.column + "pfor".len() as u32),
                "missing `::<N>`",
            )
            .map_note(
                "`N` is a number, a `const`, a const generic parameter or a symbolic dimension",
            )
            .map_note(PFOR_USAGE));
        };
        let (tl, te) = (start_of(t.lt_token.span), end_of(t.gt_token.span));
        if t.args.len() != 1 {
            return Err(error(
                format!(
                    "`pfor` takes one generic argument, the number of instances, but {} were given",
                    t.args.len()
                ),
                tl,
                te,
                "expected `::<N>`",
            )
            .map_note(PFOR_USAGE));
        }
        if let syn::GenericArgument::Type(syn::Type::Path(tp)) = &t.args[0] {
            if let Some(ident) = tp.path.get_ident() {
                let n = ident.to_string();
                if self.lookup_local(&n).is_some() && !self.const_params.contains(&n) {
                    return Err(error(
                        format!("the number of instances `{n}` of `pfor` is a variable; it must be known before the program runs"),
                        start_of(ident.span()),
                        end_of(ident.span()),
                        "a variable cannot be a length",
                    )
                    .map_note("use a number, a `const`, a const generic parameter or a symbolic dimension"));
                }
            }
        }
        self.resolve_const_arg(&t.args[0])
    }

    /// `pfor` passes the index as an `i64` first.
    fn check_pfor_index(&self, sig: &Signature, f_expr: &syn::Expr) -> CheckResult<()> {
        let (pname, _, pty, _) = &sig.params[0];
        if *pty == Ty::scalar(ScalarType::I64) {
            return Ok(());
        }
        Err(error(
            format!(
                "mismatched types: `pfor` passes the index of each instance as an `i64` to the first parameter `{pname}` of `{}`, but it is `{}`",
                sig.name,
                self.show_with(pty, &sig.const_params)
            ),
            expr_start(f_expr),
            expr_end(f_expr),
            "first parameter is not `i64`",
        )
        .map_note(format!(
            "`{}` is declared at {}:{}",
            sig.name, sig.loc.line, sig.loc.column
        ))
        .map_note(format!("declare it `{pname}: i64`; convert inside with `{pname} as usize`")))
    }

    /// The array `xs` of a `map`: its elements go to the first parameter of
    /// `sig`. Its length (the number of instances), or `None` when `xs`
    /// never finishes.
    fn mapped_array(
        &mut self,
        sig: &Signature,
        xs: &Expr,
        xs_end: Loc,
        bindings: &mut [Option<DimExpr>],
    ) -> CheckResult<Option<DimExpr>> {
        let t = match &xs.ty {
            Ty::Never => return Ok(None),
            Ty::Tensor(t) if !t.is_scalar() => t.clone(),
            other => {
                return Err(error(
                    format!(
                        "`map` maps over an array, but this is `{}`",
                        self.show(other)
                    ),
                    xs.loc,
                    xs_end,
                    "not an array",
                )
                .map_note(MAP_USAGE)
                .map_note("to run a function a number of times, use `pfor::<N>(g, ...)`"))
            }
        };
        let element = Ty::Tensor(TensorTy {
            elem: t.elem,
            dims: t.dims[1..].to_vec(),
            var: t.var,
        });
        let (pname, _, pty, _) = &sig.params[0];
        if !self.match_param(pty, &element, bindings) {
            let want = substitute(pty, &partially_bound(bindings));
            return Err(error(
                format!(
                    "mismatched types: `map` passes the elements of this array to the first parameter `{pname}` of `{}`, which is `{}`, but they are `{}`",
                    sig.name,
                    self.show_with(&want, &sig.const_params),
                    self.show(&element)
                ),
                xs.loc,
                xs_end,
                format!(
                    "expected an array of `{}`",
                    self.show_with(&want, &sig.const_params)
                ),
            )
            .map_note(format!(
                "`{}` is declared at {}:{}",
                sig.name, sig.loc.line, sig.loc.column
            )));
        }
        Ok(Some(t.dims[0]))
    }
}

/// `map` and `pfor` (`name`) pass `sig`'s function one argument (an
/// element, the index), then the `extras`.
fn check_instance_arity(
    name: &str,
    sig: &Signature,
    extras: usize,
    (loc, end): (Loc, Loc),
) -> CheckResult<()> {
    let passed = extras + 1;
    if sig.params.len() == passed {
        return Ok(());
    }
    let first = if name == "pfor" {
        "the index"
    } else {
        "an element of the array"
    };
    let usage = if name == "pfor" {
        PFOR_USAGE
    } else {
        MAP_USAGE
    };
    Err(error(
        format!(
            "`{}` takes {} argument(s), but `{name}` passes {passed} ({first}, then {extras} more)",
            sig.name,
            sig.params.len()
        ),
        loc,
        end,
        format!("`{}` takes {} argument(s)", sig.name, sig.params.len()),
    )
    .map_note(usage)
    .map_note(format!(
        "`{}` is declared at {}:{}",
        sig.name, sig.loc.line, sig.loc.column
    )))
}

/// `ty` with every array (or scalar) made an array of `count` of them.
fn arrays_of(ty: &Ty, count: DimExpr) -> Ty {
    match ty {
        Ty::Never => Ty::Never,
        Ty::Tuple(items) => Ty::Tuple(items.iter().map(|t| arrays_of(t, count)).collect()),
        Ty::Tensor(t) => Ty::Tensor(TensorTy {
            elem: t.elem,
            dims: std::iter::once(count)
                .chain(t.dims.iter().copied())
                .collect(),
            var: t.var,
        }),
    }
}

/// Rejects a result array too large to exist.
fn check_result_size(ty: &Ty, loc: Loc, end: Loc) -> CheckResult<()> {
    match ty {
        Ty::Never => Ok(()),
        Ty::Tuple(items) => items
            .iter()
            .try_for_each(|t| check_result_size(t, loc, end)),
        Ty::Tensor(t) => check_array_size(t, loc, end),
    }
}
