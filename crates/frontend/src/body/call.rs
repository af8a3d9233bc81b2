//! Calls of the program's functions (with their const generic arguments
//! given or inferred), `catch(f(..))`, `grad` / `value_and_grad`, and the
//! dispatch of a call by name to those, to the instance forms (`join`,
//! `map`, `pfor`: [`super::instance`]) or to a builtin function.

use autobatch_types::{Loc, ScalarType};

use crate::hir::{Builtin, DimExpr, Expr, ExprKind, GradKind, TensorTy, Ty};
use crate::items::{error, path_text, CheckResult, MapNote, ModuleName, Signature};
use crate::location::{end_of, expr_end, expr_start, path_end, path_start, start_of, type_range};
use crate::Diagnostic;

use super::infer::Elem;
use super::{mk, no_generic_arguments, peel, FunctionChecker};

impl FunctionChecker<'_, '_> {
    pub(super) fn check_args(
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

    /// `f(args)`: a call of a function of the program, of a host primitive,
    /// of a construct (`catch`, `join`, `map`, `pfor`, `grad`, ...) or of a
    /// builtin or library function, by the name `f`.
    pub(super) fn check_call(
        &mut self,
        c: &syn::ExprCall,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let callee = callee(c)?;
        let Callee {
            name,
            loc: fl,
            end: fe,
            ..
        } = &callee;
        if self.lookup_local(name).is_some() {
            return Err(error(
                format!("`{name}` is a variable, not a function"),
                *fl,
                *fe,
                "not a function",
            ));
        }
        match self.scope.names.get(name).map(|(k, _)| *k) {
            Some(ModuleName::Function(index)) => {
                return self.check_user_call(index, callee.turbofish, &c.args, loc, end)
            }
            Some(ModuleName::HostFunction(index)) => {
                return self.check_host_call(index, callee.turbofish, &c.args, loc, end)
            }
            Some(ModuleName::Const | ModuleName::Static(_)) => {
                return Err(error(
                    format!("`{name}` is not a function"),
                    *fl,
                    *fe,
                    "not a function",
                ));
            }
            None => {}
        }
        self.check_construct_call(&callee, &c.args, loc, end)
    }

    /// A call of a name that is not the module's: a construct (`catch`,
    /// `join`, `map`, `pfor`, `grad`, `value_and_grad`, `jacobian`), a
    /// builtin or a library function.
    fn check_construct_call(
        &mut self,
        callee: &Callee<'_>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let Callee {
            name,
            turbofish,
            loc: fl,
            end: fe,
        } = callee;
        let (name, turbofish) = (name.as_str(), *turbofish);
        if name == "catch" {
            return self.check_catch(turbofish, args, loc, end);
        }
        if name == "join" {
            return self.check_join(turbofish, args, loc, end);
        }
        if name == "map" || name == "pfor" {
            return self.check_map(name, turbofish, args, loc, end);
        }
        if crate::ode::SOLVERS.contains(&name) {
            return self.check_ode_call(name, turbofish, args, loc, end);
        }
        if name == "grad" || name == "value_and_grad" || name == "jacobian" {
            if let Some(t) = turbofish {
                return Err(
                    no_generic_arguments(&format!("`{name}`"), t).map_note(format!(
                        "give the function's const arguments on the function: `{name}(f::<3>, x)`"
                    )),
                );
            }
            return self.check_grad(name, args, loc, end);
        }
        let Some(builtin) = Builtin::function(name) else {
            if let Some(function) = autobatch_ops::library::Function::lookup(name) {
                return self.check_library_call(function, turbofish, args, loc, end);
            }
            return Err(error(
                format!("cannot find function `{name}`"),
                *fl,
                *fe,
                "not found",
            ));
        };
        if let Some(t) = turbofish {
            return Err(no_generic_arguments(&format!("the builtin `{name}`"), t));
        }
        self.check_builtin_function(builtin, name, args, loc, end)
    }
    /// `ode_rk45(f, y0, t0, ts, a..)` (or another solver): a call of the
    /// solver generated for this call ([`crate::ode`]) on the arguments
    /// after `f`.
    fn check_ode_call(
        &mut self,
        name: &str,
        turbofish: Option<&syn::AngleBracketedGenericArguments>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if let Some(t) = turbofish {
            return Err(no_generic_arguments(&format!("`{name}`"), t));
        }
        let generated = crate::ode::site_function(name, loc);
        let Some(ModuleName::Function(index)) = self.scope.names.get(&generated).map(|(k, _)| *k)
        else {
            let (at, to) = args
                .first()
                .map_or((loc, end), |f| (expr_start(f), expr_end(f)));
            return Err(error(
                format!("the first argument of `{name}` must name the system's function"),
                at,
                to,
                "not a function of the program of the right form",
            )
            .map_note(format!(
                "declare the right-hand side `fn f(t: f64, y: [f64; N], ...) -> [f64; N]` (not generic) and write `{name}(f, y0, t0, ts, ...)`"
            )));
        };
        let params = self.scope.signatures[index].params.len();
        check_arity(name, params + 1, args.len(), (loc, end))?;
        let rest: syn::punctuated::Punctuated<syn::Expr, syn::Token![,]> =
            args.iter().skip(1).cloned().collect();
        // The user's names of the further arguments: the parameters of `f`
        // after `t` and `y`.
        let rhs_params: Vec<String> = match args.first() {
            Some(syn::Expr::Path(p)) => p
                .path
                .get_ident()
                .and_then(|f| self.scope.names.get(&f.to_string()))
                .and_then(|(k, _)| match k {
                    ModuleName::Function(f) => Some(*f),
                    _ => None,
                })
                .map(|f| {
                    let sig = &self.scope.signatures[f];
                    sig.params
                        .iter()
                        .skip(2)
                        .map(|(param, ..)| format!("`{param}` of `{}`", sig.name))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        self.check_user_call(index, None, &rest, loc, end)
            .map_err(|mut d| {
                let words = |text: &str| as_solver_message(text, &generated, name, &rhs_params);
                d.message = words(&d.message);
                d.label = words(&d.label);
                for note in &mut d.notes {
                    *note = words(note);
                }
                for s in &mut d.secondary {
                    s.label = words(&s.label);
                }
                d
            })
    }

    pub(super) fn resolve_const_arg(&mut self, arg: &syn::GenericArgument) -> CheckResult<DimExpr> {
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
    pub(super) fn turbofish_bindings(
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
        check_arity(&sig.name, sig.params.len(), args.len(), (loc, end))?;
        let checked = self.check_args(args)?;
        let mut out = Vec::new();
        for (k, ((arg, arg_end), (pname, _, pty, _))) in
            checked.into_iter().zip(&sig.params).enumerate()
        {
            if !self.match_param(pty, &arg.ty, &mut bindings) {
                let pty = &substitute(pty, &partially_bound(&bindings));
                let expected = self.show_with(pty, &sig.const_params);
                return Err(self.mismatched_argument(k, pname, &sig.name, &expected, &arg, arg_end));
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

    /// Argument `k` (`pname`) of `callee` is `arg`, not of the type `expected`.
    fn mismatched_argument(
        &self,
        k: usize,
        pname: &str,
        callee: &str,
        expected: &str,
        arg: &Expr,
        arg_end: Loc,
    ) -> Box<Diagnostic> {
        error(
            format!(
                "mismatched types: argument {} (`{pname}`) of `{callee}` must be `{expected}`, but this is `{}`",
                k + 1,
                self.show(&arg.ty)
            ),
            arg.loc,
            arg_end,
            format!("expected `{expected}`"),
        )
    }

    /// `h(args)` of a host primitive: its arguments against its declared
    /// parameter types (no generics; symbolic lengths as written).
    fn check_host_call(
        &mut self,
        index: usize,
        turbofish: Option<&syn::AngleBracketedGenericArguments>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        let host = self.scope.host_functions[index].clone();
        if let Some(t) = turbofish {
            return Err(no_generic_arguments(
                &format!("host primitive `{}`", host.name),
                t,
            ));
        }
        check_arity(&host.name, host.params.len(), args.len(), (loc, end))?;
        let checked = self.check_args(args)?;
        let mut out = Vec::with_capacity(checked.len());
        for (k, ((arg, arg_end), (pname, pty))) in checked.into_iter().zip(&host.params).enumerate()
        {
            if !self.match_param(pty, &arg.ty, &mut []) {
                let expected = self.show(pty);
                return Err(
                    self.mismatched_argument(k, pname, &host.name, &expected, &arg, arg_end)
                );
            }
            out.push(arg);
        }
        Ok(mk(
            ExprKind::HostCall {
                host: index,
                args: out,
            },
            host.ret.clone(),
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
            return Err(no_generic_arguments("`catch`", t));
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

    /// `grad(f, x, d..)` / `value_and_grad(f, x, d..)` / `jacobian(h, x,
    /// d..)`: `f` names a function of the module whose first parameter is
    /// a float (or float array) and whose result is a float scalar (for
    /// `jacobian`: an array of floats in, one out); `x` has the first
    /// parameter's type, each data argument `d` the type of the parameter
    /// it is passed to (const generics of `f` inferred from all of them or
    /// given as `f::<...>`). Only `x` is differentiated; `grad(f, x)` is
    /// the case without data arguments. Whether `f` is differentiable is
    /// checked once every body is known (`crate::differentiable`).
    fn check_grad(
        &mut self,
        name: &str,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        loc: Loc,
        end: Loc,
    ) -> CheckResult<Expr> {
        if args.len() < 2 {
            return Err(error(
                format!(
                    "`{name}` takes at least 2 arguments (a function and a point), but {} were given",
                    args.len()
                ),
                loc,
                end,
                "expected at least 2 arguments",
            )
            .map_note(format!(
                "write `{name}(f, x)`, or `{name}(f, x, d1, d2, ...)` where the data arguments `d1, d2, ...` go to `f`'s other parameters"
            )));
        }
        let kind = match name {
            "jacobian" => GradKind::Jacobian,
            "value_and_grad" => GradKind::ValueAndGrad,
            _ => GradKind::Grad,
        };
        let usage = if kind == GradKind::Jacobian {
            "write `jacobian(h, x)` where `h` is declared with `fn h(x: [f64; D]) -> [f64; M]`"
                .into()
        } else {
            format!("write `{name}(f, x)` where `f` is declared with `fn f(x: ...) -> f64`")
        };
        let (index, turbofish) = self.function_argument(name, &args[0], &usage)?;
        let sig = self.scope.signatures[index].clone();
        self.check_grad_signature(kind, &sig, &args[0])?;
        self.check_grad_arity(kind, &sig, args, (loc, end))?;
        let mut bindings = self.turbofish_bindings(&sig, turbofish)?;
        let checked = self.check_grad_args(name, &sig, args, &mut bindings)?;
        let const_args = inferred_const_args(
            &sig,
            &bindings,
            "the point",
            format!("give it explicitly: `{name}({}::<N>, x)`", sig.name),
            (loc, end),
        )?;
        let point_ty = substitute(&sig.params[0].2, &const_args);
        let value_ty = substitute(&sig.ret, &const_args);
        let ty = grad_type(kind, point_ty, value_ty, (loc, end))?;
        Ok(mk(
            ExprKind::Grad {
                function: index,
                const_args,
                args: checked,
                kind,
            },
            ty,
            loc,
        ))
    }

    /// The arguments of `name(f, x, d..)` after `f` (whose signature is
    /// `sig`): the point `x` against `f`'s first parameter, each data argument
    /// against the parameter it is passed to; their types bind `f`'s const
    /// generics in `bindings`.
    fn check_grad_args(
        &mut self,
        name: &str,
        sig: &Signature,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        bindings: &mut [Option<DimExpr>],
    ) -> CheckResult<Vec<Expr>> {
        let pty = &sig.params[0].2;
        let x = self.check_expr(&args[1])?;
        let x_end = expr_end(&args[1]);
        if !self.match_param(pty, &x.ty, bindings) {
            let want = substitute(pty, &partially_bound(bindings));
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
        let mut checked = vec![x];
        // The data arguments, passed to `f`'s other parameters as they are.
        for (a, (pname, _, pty, _)) in args.iter().skip(2).zip(&sig.params[1..]) {
            let d = self.check_expr(a)?;
            if !self.match_param(pty, &d.ty, bindings) {
                let want = substitute(pty, &partially_bound(bindings));
                let want = self.show_with(&want, &sig.const_params);
                return Err(error(
                    format!(
                        "mismatched types: `{name}` passes this data argument to the parameter `{pname}` of `{}`, of type `{want}`, but this is `{}`",
                        sig.name,
                        self.show(&d.ty)
                    ),
                    d.loc,
                    expr_end(a),
                    format!("expected `{want}`"),
                )
                .map_note(format!(
                    "`{}` is declared at {}:{}",
                    sig.name, sig.loc.line, sig.loc.column
                )));
            }
            checked.push(d);
        }
        Ok(checked)
    }

    /// The function of the program that `f_expr`, the first argument of
    /// `construct` (`grad`, `value_and_grad`, `map`, `pfor`), names (its
    /// index), with its `::<...>` if any; `usage` is the note of the error
    /// when it names nothing of the kind.
    pub(super) fn function_argument<'e>(
        &self,
        construct: &str,
        f_expr: &'e syn::Expr,
        usage: &str,
    ) -> CheckResult<(usize, Option<&'e syn::AngleBracketedGenericArguments>)> {
        let (fl, fe) = (expr_start(f_expr), expr_end(f_expr));
        let not_function = |what: String| {
            error(
                format!("the first argument of `{construct}` must name a function of the program, but {what}"),
                fl,
                fe,
                "not a function of the program",
            )
            .map_note(usage)
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
        match self.scope.names.get(&fname).map(|(k, _)| *k) {
            Some(ModuleName::Function(index)) => Ok((index, turbofish)),
            Some(ModuleName::HostFunction(_))
                if construct.ends_with("grad") || construct == "jacobian" =>
            {
                Err(error(
                    format!("cannot differentiate the host primitive `{fname}`"),
                    fl,
                    fe,
                    "host primitive",
                )
                .map_note("only functions written in autobatch can be differentiated"))
            }
            Some(ModuleName::HostFunction(_)) => Err(error(
                format!("`{construct}` cannot take the host primitive `{fname}` itself"),
                fl,
                fe,
                "host primitive",
            )
            .map_note(format!(
                "call it from a function of the program and give that function to `{construct}`: `fn g(x: T) -> U {{ {fname}(x) }}`"
            ))),
            Some(ModuleName::Const) => Err(not_function(format!("`{fname}` is a constant"))),
            Some(ModuleName::Static(_)) => Err(not_function(format!("`{fname}` is a static"))),
            None if Builtin::function(&fname).is_some() => {
                Err(not_function(format!("`{fname}` is a builtin"))
                    .map_note("wrap it in a function: `fn g(x: f64) -> f64 { ... }`"))
            }
            None if Builtin::method(&fname).is_some() => Err(not_function(format!(
                "`{fname}` is a builtin method"
            ))
            .map_note(format!(
                "wrap it in a function: `fn g(x: f64) -> f64 {{ x.{fname}() }}`"
            ))),
            None => Err(error(
                format!("cannot find function `{fname}`"),
                fl,
                fe,
                "not found",
            )),
        }
    }

    /// What `grad` asks of the function it differentiates (`sig`, named by
    /// `f_expr`): a float first parameter and a float scalar result; what
    /// `jacobian` asks: a first parameter that is an array of floats, and a
    /// result, an array of the same float type. (How many parameters is
    /// [`Self::check_grad_arity`]'s business.)
    fn check_grad_signature(
        &self,
        kind: GradKind,
        sig: &Signature,
        f_expr: &syn::Expr,
    ) -> CheckResult<()> {
        let name = kind.name();
        let (fl, fe) = (expr_start(f_expr), expr_end(f_expr));
        let declared = |d: Box<Diagnostic>| -> Box<Diagnostic> {
            d.map_note(format!(
                "`{}` is declared at {}:{}",
                sig.name, sig.loc.line, sig.loc.column
            ))
        };
        if sig.params.is_empty() {
            return Err(declared(
                error(
                    format!(
                        "`{name}` differentiates a function with respect to its first parameter, but `{}` takes none",
                        sig.name
                    ),
                    fl,
                    fe,
                    "takes no parameters",
                )
                .map_note(format!("declare the point as the first parameter: `fn {}(x: f64) -> f64`", sig.name)),
            ));
        }
        let (pname, _, pty, _) = &sig.params[0];
        if kind == GradKind::Jacobian {
            return self
                .check_jacobian_signature(sig, pname, pty, (fl, fe))
                .map_err(declared);
        }
        if !matches!(pty, Ty::Tensor(t) if t.elem.is_float()) {
            return Err(declared(error(
                format!(
                    "`{name}` needs a float parameter (`f32`, `f64` or an array of them), but the parameter `{pname}` of `{}` is `{}`",
                    sig.name,
                    self.show_with(pty, &sig.const_params)
                ),
                fl,
                fe,
                "parameter is not a float",
            )));
        }
        if !matches!(&sig.ret, Ty::Tensor(t) if t.elem.is_float() && t.is_scalar()) {
            let mut d = error(
                format!(
                    "`{name}` needs a function returning a float scalar (`f32` or `f64`), but `{}` returns `{}`",
                    sig.name,
                    self.show_with(&sig.ret, &sig.const_params)
                ),
                fl,
                fe,
                "result is not a float scalar",
            );
            if matches!(&sig.ret, Ty::Tensor(t) if t.elem.is_float() && t.dims.len() == 1) {
                d = d.map_note(format!(
                    "for the derivatives of every element of the result, use `jacobian({}, x)`",
                    sig.name
                ));
            }
            return Err(declared(d));
        }
        Ok(())
    }

    /// `grad(f, x, d..)` passes `f` the point and one data argument per
    /// other parameter of `f`: a missing one is reported at the call, an
    /// extra one at itself.
    fn check_grad_arity(
        &self,
        kind: GradKind,
        sig: &Signature,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        (loc, end): (Loc, Loc),
    ) -> CheckResult<()> {
        let name = kind.name();
        let wanted = sig.params.len() - 1;
        let given = args.len() - 2;
        if given == wanted {
            return Ok(());
        }
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let params: Vec<String> = sig
            .params
            .iter()
            .map(|(pname, _, pty, _)| {
                format!("{pname}: {}", self.show_with(pty, &sig.const_params))
            })
            .collect();
        let declared = format!(
            "`{}` is declared at {}:{} with `fn {}({})`; the point goes to `{}` and one data argument to each other parameter, unchanged (only the point is differentiated)",
            sig.name,
            sig.loc.line,
            sig.loc.column,
            sig.name,
            params.join(", "),
            sig.params[0].0
        );
        let message = format!(
            "`{name}` passes `{}` the point and {given} data argument{}, but `{}` takes {wanted} parameter{} after the point",
            sig.name,
            plural(given),
            sig.name,
            plural(wanted)
        );
        if given > wanted {
            let extra = &args[2 + wanted];
            return Err(error(
                message,
                expr_start(extra),
                expr_end(extra),
                "unexpected data argument",
            )
            .map_note(declared));
        }
        let missing: Vec<String> = sig.params[1 + given..]
            .iter()
            .map(|(pname, ..)| format!("`{pname}`"))
            .collect();
        Err(error(
            message,
            loc,
            end,
            format!(
                "missing data argument{} for {}",
                plural(missing.len()),
                missing.join(", ")
            ),
        )
        .map_note(declared))
    }

    /// What `jacobian` asks of `h` (`sig`, whose one parameter is `pname:
    /// pty`): an array of floats `[F; D]` in, an array `[F; M]` out.
    fn check_jacobian_signature(
        &self,
        sig: &Signature,
        pname: &str,
        pty: &Ty,
        (fl, fe): (Loc, Loc),
    ) -> CheckResult<()> {
        let vector = |t: &Ty| matches!(t, Ty::Tensor(t) if t.elem.is_float() && t.dims.len() == 1);
        let show = |t: &Ty| self.show_with(t, &sig.const_params);
        if !vector(pty) {
            return Err(error(
                format!(
                    "`jacobian` needs a parameter that is an array of floats (`[f64; D]` or `[f32; D]`), but the parameter `{pname}` of `{}` is `{}`",
                    sig.name,
                    show(pty)
                ),
                fl,
                fe,
                "parameter is not an array of floats",
            ));
        }
        if !vector(&sig.ret) {
            let mut d = error(
                format!(
                    "`jacobian` needs a function returning an array of floats (`[f64; M]` or `[f32; M]`), but `{}` returns `{}`",
                    sig.name,
                    show(&sig.ret)
                ),
                fl,
                fe,
                "result is not an array of floats",
            );
            if matches!(&sig.ret, Ty::Tensor(t) if t.elem.is_float() && t.is_scalar()) {
                d = d.map_note(format!(
                    "for the derivatives of a scalar result, use `grad({}, x)`",
                    sig.name
                ));
            }
            return Err(d);
        }
        if let (Ty::Tensor(p), Ty::Tensor(r)) = (pty, &sig.ret) {
            if p.elem != r.elem {
                return Err(error(
                    format!(
                        "`jacobian` needs the parameter and the result of `{}` to have the same float type, but they are `{}` and `{}`",
                        sig.name,
                        show(pty),
                        show(&sig.ret)
                    ),
                    fl,
                    fe,
                    "parameter and result of different float types",
                ));
            }
        }
        Ok(())
    }

    /// Matches an argument type against a parameter type, binding const generics.
    pub(super) fn match_param(
        &mut self,
        param: &Ty,
        arg: &Ty,
        bindings: &mut [Option<DimExpr>],
    ) -> bool {
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
}

/// The const arguments of a call of `sig` once inference from `from` (the
/// arguments, the point of a `grad`) is done: an error naming the first one
/// still unknown, with `hint` as its note.
pub(super) fn inferred_const_args(
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

/// The const arguments bound so far; a parameter not yet bound stays itself
/// (for messages).
pub(super) fn partially_bound(bindings: &[Option<DimExpr>]) -> Vec<DimExpr> {
    bindings
        .iter()
        .enumerate()
        .map(|(i, b)| b.unwrap_or(DimExpr::Generic(i as u32)))
        .collect()
}

/// Replaces const generic parameters by their values.
pub(super) fn substitute(ty: &Ty, args: &[DimExpr]) -> Ty {
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

/// A diagnostic's text about a call of the generated function `generated`
/// in the words of the call of `solver` the user wrote: the solver's name,
/// its arguments counted with `f` (argument 1), the further arguments named
/// as `f`'s parameters (`rhs_params`), and the output times' length `T`.
fn as_solver_message(
    message: &str,
    generated: &str,
    solver: &str,
    rhs_params: &[String],
) -> String {
    let mut message = message
        .replace(&format!("`{generated}`"), &format!("`{solver}`"))
        .replace("ODE_T", "T");
    for (k, param) in rhs_params.iter().enumerate() {
        message = message.replace(&format!("(`a{k}`)"), &format!("({param})"));
    }
    let Some((before, after)) = message.split_once("argument ") else {
        return message;
    };
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    match after[..digits].parse::<usize>() {
        Ok(k) => format!("{before}argument {}{}", k + 1, &after[digits..]),
        Err(_) => message,
    }
}

/// `callee` takes `expected` arguments; `given` were written at `place`.
pub(super) fn check_arity(
    callee: &str,
    expected: usize,
    given: usize,
    place: (Loc, Loc),
) -> CheckResult<()> {
    if given == expected {
        return Ok(());
    }
    Err(error(
        format!("`{callee}` takes {expected} argument(s), but {given} were given"),
        place.0,
        place.1,
        format!("expected {expected} argument(s)"),
    ))
}

/// The name a call calls, with its `::<...>` if any, and where the name is
/// written.
struct Callee<'c> {
    name: String,
    turbofish: Option<&'c syn::AngleBracketedGenericArguments>,
    loc: Loc,
    end: Loc,
}

/// The callee of `c`: a name alone (no path, no `::` but a turbofish).
fn callee(c: &syn::ExprCall) -> CheckResult<Callee<'_>> {
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
    Ok(Callee {
        name,
        turbofish,
        loc: fl,
        end: fe,
    })
}

/// The type of `grad` (the point's), `value_and_grad` (the value's and the
/// point's) or `jacobian` (`[[F; D]; M]` for `h: [F; D] -> [F; M]`) of a
/// function from `point_ty` to `value_ty`; `range` is the call's.
fn grad_type(kind: GradKind, point_ty: Ty, value_ty: Ty, range: (Loc, Loc)) -> CheckResult<Ty> {
    Ok(match (kind, &point_ty, &value_ty) {
        (GradKind::Grad, _, _) => point_ty,
        (GradKind::ValueAndGrad, _, _) => Ty::Tuple(vec![value_ty, point_ty]),
        // The signature of a `jacobian`'s function is checked before.
        (GradKind::Jacobian, Ty::Tensor(x), Ty::Tensor(y)) => Ty::Tensor(TensorTy::new(
            x.elem,
            y.dims.iter().chain(&x.dims).copied().collect(),
        )),
        (GradKind::Jacobian, _, _) => {
            return Err(error(
                "internal compiler error: `jacobian` of a function that does not map an array to an array",
                range.0,
                range.1,
                "here",
            ))
        }
    })
}
