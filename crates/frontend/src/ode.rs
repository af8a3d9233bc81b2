//! The ODE solvers `ode_rk45`, `ode_rk45_tol`, `ode_bdf` and `ode_bdf_tol`
//! (Stan's variadic forms), written in the language itself.
//!
//! For each call `ode_rk45(f, y0, t0, ts, a..)` whose first argument names
//! a function of the program `fn f(t: f64, y: [f64; N], a..) -> [f64; N]`,
//! [`expand`] appends to the source a function solving `dy/dt = f(t, y, a..)`
//! for that call alone, named after the call's position (`ode_rk45_12_9` for
//! a call at line 12, column 9), taking the call's arguments after `f` (the
//! `_tol` forms' rtol, atol and max_num_steps included; the plain forms get
//! Stan's defaults 1e-6, 1e-6 and 1e6). The body checker resolves the call to
//! that function ([`site_function`]); so every executor runs the solver as
//! it runs any loop, with per-member step control. Every location inside a
//! generated function is the call's ([`crate::location`] maps them while the
//! module is checked): a member whose solve fails stops with
//! `assertion_failed` at the call, the message naming the call as written
//! (`the `ode_rk45` call at 12:9: ...`) and why, in the user's words.
//!
//! `ode_rk45` is Dormand and Prince's explicit 5(4) pair with the local
//! error measured in the root-mean-square norm of `atol + rtol |y|` and the
//! step chosen as Hairer, Nørsett and Wanner do (factor 0.9 err^(-1/5),
//! between 0.2 and 5). The norms are taken as squares, kept away from zero
//! where a root or a power follows, so that a gradient through the step
//! control is finite where the error is zero. `ode_bdf` is for stiff systems: the linearly implicit
//! Rosenbrock 2(3) method of Shampine and Reichelt (MATLAB's `ode23s`),
//! L-stable, with the Jacobians of `f` (in `y` and in `t`) by forward
//! differences at every step, as `ode23s` takes them by default, and one
//! linear solve (Gaussian elimination with partial pivoting) per stage.
//!
//! A gradient of a solve is the forward sensitivities: for each call,
//! [`sensitivity_text`] appends the coupled system of the state and its
//! derivatives in every float argument, solved by the call's method, and
//! `{solver}_{line}_{column}_adjoint`, the solver's custom derivative
//! ([`custom_vjp_of`], `autobatch_autodiff::CustomVjp`), which the
//! derivation calls in the backward pass in place of differentiating the
//! solver's steps. The parameters are every float of `y0` and of the
//! further arguments, whatever holds it (arrays of any rank, tuples). The
//! coupled right-hand side is `f`'s forward-mode derivative in all the
//! parameters at once, written as source by [`tangent`] where `f` is
//! straight-line code of the forms it covers, else `f`'s Jacobian row by
//! row, each row a `grad`. A
//! gradient reaching the call is checked as `grad` of `{name}_row`
//! ([`sensitivity_row`]), the one generated `grad`; diagnostics name the
//! generated functions as their call ([`user_name`]). A call whose lengths
//! are not fixed by the program (a symbolic dimension) gets no sensitivity
//! solve: its gradient differentiates the solve as it ran, which is why the
//! body checker lets the solvers' `while` conditions depend on the
//! differentiated value ([`is_generated`]).

use std::cell::RefCell;
use std::fmt::Write;

use autobatch_types::Loc;
use quote::ToTokens;
use syn::visit::Visit;

mod tangent;

/// The solvers, by the name a program calls them with.
pub(crate) const SOLVERS: [&str; 4] = autobatch_types::ODE_SOLVERS;

/// The generated function serving the call of `solver` starting at `loc`.
pub(crate) fn site_function(solver: &str, loc: Loc) -> String {
    format!("{solver}_{}_{}", loc.line, loc.column)
}

/// The call a generated function serves, if `name` is a generated solver
/// or one of its helpers (`ode_bdf_12_9`, `ode_bdf_12_9_solve`): the
/// solver as the call names it, and the call's line and column.
fn site_of(name: &str) -> Option<(&'static str, u32, u32)> {
    autobatch_types::ode_call_of(name).map(|(solver, loc)| (solver, loc.line, loc.column))
}

/// Whether `name` is a generated solver or one of its helpers
/// (`ode_bdf_12_9`, `ode_bdf_12_9_solve`).
pub(crate) fn is_generated(name: &str) -> bool {
    site_of(name).is_some()
}

/// The name of function `name` as the user knows it: a generated function
/// is its call (`ode_rk45 (the call at 12:9)`); any other is its own.
pub(crate) fn user_name(name: &str) -> String {
    match site_of(name) {
        Some((solver, line, column)) => format!("{solver} (the call at {line}:{column})"),
        None => name.to_owned(),
    }
}

/// The function of `module` that a gradient through a call of the
/// generated solver `index` differentiates, if the solver has a custom
/// derivative: `{name}_row`, `f` in every float of the state and of the
/// further arguments, which the sensitivity solve takes `grad` of.
pub(crate) fn sensitivity_row(module: &crate::hir::Module, index: usize) -> Option<usize> {
    custom_vjp_of(module, index)?;
    let row = format!("{}_row", module.functions[index].name);
    module.functions.iter().position(|f| f.name == row)
}

/// One call site's generated function: its first line in the expanded
/// source, and the call's range, which every location inside it reports.
#[derive(Clone, Copy, Debug)]
struct Site {
    first_line: u32,
    start: Loc,
    end: Loc,
}

thread_local! {
    /// The generated functions of the source being checked on this thread.
    static SITES: RefCell<Vec<Site>> = const { RefCell::new(Vec::new()) };
}

/// `loc` as the user sees it: a location inside a generated function is its
/// call's start (`end` false) or end (`end` true).
pub(crate) fn map_location(loc: Loc, end: bool) -> Loc {
    SITES.with(|sites| {
        let sites = sites.borrow();
        match sites.iter().rev().find(|s| s.first_line <= loc.line) {
            Some(s) if end => s.end,
            Some(s) => s.start,
            None => loc,
        }
    })
}

/// Clears the generated functions' locations when the check ends.
pub(crate) struct Expanded {
    pub(crate) source: Option<String>,
}

impl Drop for Expanded {
    fn drop(&mut self) {
        SITES.with(|sites| sites.borrow_mut().clear());
    }
}

/// The source with a solver appended for every call of an ODE solver on a
/// function of the program (`source: None` if there is none); the
/// locations of the appended text map to their calls until the result is
/// dropped. Calls whose first argument is not such a function are left for
/// the body checker to report.
pub(crate) fn expand(source: &str, file: &syn::File) -> Expanded {
    let mut finder = Finder::default();
    finder.visit_file(file);
    let mut text = String::new();
    let mut line = source.matches('\n').count() as u32 + 2;
    let mut sites = Vec::new();
    let consts: Vec<String> = file
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Const(c) => Some(c.ident.to_string()),
            _ => None,
        })
        .collect();
    let globals = tangent::globals(file);
    for call in finder.calls {
        let Some(f) = find_function(file, &call.function) else {
            continue;
        };
        let Some(sig) = rhs_signature(f) else {
            continue;
        };
        let mut generated = solver_text(&call, &sig);
        if let Some(layout) = Sensitivities::of(&sig, &consts) {
            generated.push_str(&sensitivity_text(&call, f, &globals, &sig, &layout));
        }
        sites.push(Site {
            first_line: line,
            start: call.start,
            end: call.end,
        });
        line += generated.matches('\n').count() as u32;
        text.push_str(&generated);
    }
    if sites.is_empty() {
        return Expanded { source: None };
    }
    SITES.with(|s| *s.borrow_mut() = sites);
    Expanded {
        source: Some(format!("{source}\n{text}")),
    }
}

/// The backward function of the generated function `index` of `module`
/// (a solver's, `ode_rk45_12_9`: `ode_rk45_12_9_adjoint`), if it has one: its
/// custom derivative, which the lowering hands to the derivation.
pub(crate) fn custom_vjp_of(module: &crate::hir::Module, index: usize) -> Option<usize> {
    let name = &module.functions.get(index)?.name;
    let (solver, line, column) = site_of(name)?;
    if *name != site_function(solver, Loc::new(line, column)) {
        return None;
    }
    let backward = format!("{name}_adjoint");
    module.functions.iter().position(|f| f.name == backward)
}

/// A call of a solver with a function name as its first argument.
struct Call {
    solver: &'static str,
    function: String,
    start: Loc,
    end: Loc,
}

#[derive(Default)]
struct Finder {
    calls: Vec<Call>,
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let Some(call) = solver_call(c) {
            self.calls.push(call);
        }
        syn::visit::visit_expr_call(self, c);
    }
}

fn solver_call(c: &syn::ExprCall) -> Option<Call> {
    let syn::Expr::Path(p) = &*c.func else {
        return None;
    };
    let name = p.path.get_ident()?.to_string();
    let solver = SOLVERS.into_iter().find(|s| *s == name)?;
    let syn::Expr::Path(first) = c.args.first()? else {
        return None;
    };
    let function = first.path.get_ident()?.to_string();
    Some(Call {
        solver,
        function,
        start: crate::location::expr_start(&syn::Expr::Call(c.clone())),
        end: crate::location::end_of(c.paren_token.span.close()),
    })
}

fn find_function<'f>(file: &'f syn::File, name: &str) -> Option<&'f syn::ItemFn> {
    file.items.iter().find_map(|item| match item {
        syn::Item::Fn(f) if f.sig.ident == name => Some(f),
        _ => None,
    })
}

/// The right-hand side's shape: `fn f(t: f64, y: [f64; N], a..) -> [f64; N]`.
struct Rhs {
    /// `N` as written.
    dim: String,
    /// The types of the arguments after `y`, as written.
    extra: Vec<String>,
}

/// `f`'s shape, if it has the right-hand side's (the body checker reports
/// any other).
fn rhs_signature(f: &syn::ItemFn) -> Option<Rhs> {
    if !f.sig.generics.params.is_empty() {
        return None;
    }
    let types: Vec<&syn::Type> = f
        .sig
        .inputs
        .iter()
        .map(|a| match a {
            syn::FnArg::Typed(t) => Some(&*t.ty),
            syn::FnArg::Receiver(_) => None,
        })
        .collect::<Option<_>>()?;
    let [time, state, extra @ ..] = types.as_slice() else {
        return None;
    };
    let text = |t: &syn::Type| t.to_token_stream().to_string();
    if text(time) != "f64" {
        return None;
    }
    let syn::Type::Array(state) = state else {
        return None;
    };
    if text(&state.elem) != "f64" {
        return None;
    }
    let syn::ReturnType::Type(_, ret) = &f.sig.output else {
        return None;
    };
    if text(ret) != text(&syn::Type::Array((*state).clone())) {
        return None;
    }
    Some(Rhs {
        dim: state.len.to_token_stream().to_string(),
        extra: extra.iter().map(|t| text(t)).collect(),
    })
}

/// The generated function of one call.
fn solver_text(call: &Call, rhs: &Rhs) -> String {
    let name = site_function(call.solver, call.start);
    let n = &rhs.dim;
    let tol = call.solver.ends_with("_tol");
    let mut params = format!("y0: [f64; {n}], t0: f64, ts: [f64; ODE_T]");
    if tol {
        params.push_str(", rtol: f64, atol: f64, max_num_steps: i64");
    }
    let mut args = String::new();
    for (k, ty) in rhs.extra.iter().enumerate() {
        write!(params, ", a{k}: {ty}").unwrap();
        write!(args, ", a{k}").unwrap();
    }
    let defaults = if tol {
        ""
    } else {
        "    let rtol = 1e-6;\n    let atol = 1e-6;\n    let max_num_steps: i64 = 1000000;\n"
    };
    let solver = call.solver.trim_end_matches("_tol");
    let words = Words::value(call);
    let checks = input_checks(&words.call, n);
    let (helpers, main) = if solver == "ode_rk45" {
        (String::new(), rk45_body(&words, &call.function, &args, n))
    } else {
        (
            rosenbrock_helpers(&name, n),
            rosenbrock_body(
                &words,
                &call.function,
                &args,
                n,
                &Linear::dense(&name, &call.function, &args, n),
            ),
        )
    };
    format!(
        "{helpers}fn {name}<const ODE_T: usize>({params}) -> [[f64; {n}]; ODE_T] {{\n{defaults}{checks}{main}}}\n"
    )
}

/// What the failures of a call's solve say, in the words of the call as
/// written: the call (`the `ode_rk45` call at 12:9`, and what the solve is
/// for if it is not the call's value), and what is not finite when a step's
/// error is not a number (naming the right-hand side).
struct Words {
    call: String,
    not_finite: String,
}

impl Words {
    /// The words of the solve of `call`'s value.
    fn value(call: &Call) -> Words {
        Words {
            call: call_words(call, ""),
            not_finite: format!(
                "the state or the derivative `{}` gives is not finite",
                call.function
            ),
        }
    }

    /// The words of the solve of `call`'s sensitivities.
    fn sensitivities(call: &Call) -> Words {
        Words {
            call: call_words(call, ", solving the sensitivities for its gradient"),
            not_finite: format!(
                "the state, the sensitivities, or the derivative `{}` gives or its Jacobian is not finite",
                call.function
            ),
        }
    }
}

/// `the `ode_rk45` call at 12:9`, then `purpose`.
fn call_words(call: &Call, purpose: &str) -> String {
    format!(
        "the `{}` call at {}:{}{purpose}",
        call.solver, call.start.line, call.start.column
    )
}

/// Stan's checks of the arguments, each named by its position in the call
/// (`f` being argument 1) and its name in Stan's signature.
fn input_checks(call: &str, n: &str) -> String {
    format!(
        "    assert!(t0.is_finite(), \"{call}: the initial time (argument 3, `t0`) is not finite\");
    let mut i: usize = 0;
    while i < {n} {{
        assert!(y0[i].is_finite(), \"{call}: the initial state (argument 2, `y0`) is not finite\");
        i += 1;
    }}
    let mut j: usize = 0;
    while j < ODE_T {{
        assert!(ts[j].is_finite(), \"{call}: an output time (argument 4, `ts`) is not finite\");
        if j == 0 {{
            assert!(ts[0] > t0, \"{call}: the first output time (argument 4, `ts`) is not after the initial time (argument 3, `t0`)\");
        }} else {{
            assert!(ts[j] >= ts[j - 1], \"{call}: the output times (argument 4, `ts`) are not sorted\");
        }}
        j += 1;
    }}
    assert!(rtol > 0.0 && rtol.is_finite(), \"{call}: the relative tolerance (argument 5, `rtol`) is not positive and finite\");
    assert!(atol > 0.0 && atol.is_finite(), \"{call}: the absolute tolerance (argument 6, `atol`) is not positive and finite\");
    assert!(max_num_steps > 0, \"{call}: the maximum number of steps (argument 7, `max_num_steps`) is not positive\");
"
    )
}

/// A float literal of `value` that reads back as the same bits.
fn lit(value: f64) -> String {
    format!("{value:?}")
}

/// The loops over the output times and the steps to each, up to the step
/// size `hs` of a step (the last one to an output time ends on it), with
/// the checks of the number of steps and of the step size: the same in
/// both methods.
fn steps_head(call: &str) -> String {
    format!(
        "    let mut i: usize = 0;
    while i < ODE_T {{
        let target = ts[i];
        let mut steps: i64 = 0;
        while t < target {{
            assert!(steps < max_num_steps, \"{call}: max_num_steps steps taken before the next output time\");
            steps += 1;
            let last = t + h >= target;
            let hs = if last {{ target - t }} else {{ h }};
            assert!(hs > 4.0e-16 * t.abs(), \"{call}: the step size underflowed\");"
    )
}

/// The Dormand-Prince integration from `t0` through every time of `ts`.
fn rk45_body(words: &Words, f: &str, args: &str, n: &str) -> String {
    format!(
        "    let n = {n} as f64;
    let mut out = [y0; ODE_T];
    let mut y = y0;
    let mut t = t0;
    let mut k1 = {f}(t, y{args});
{initial}
{steps_head}
{stages}
            let r = e / (atol + rtol * y.abs().max(y5.abs()));
            let err2 = dot(r, r) / n;
            assert!(!err2.is_nan(), \"{call}: {not_finite}\");
            let factor = (0.9 * err2.max(1e-20).powf(-0.1)).max(0.2).min(5.0);
            if err2 <= 1.0 {{
                t = if last {{ target }} else {{ t + hs }};
                y = y5;
                k1 = k7;
                h = if last {{ h.max(hs * factor) }} else {{ hs * factor }};
            }} else {{
                h = hs * factor.min(1.0);
            }}
        }}
        out[i] = y;
        i += 1;
    }}
    out
",
        initial = initial_step(f, args),
        steps_head = steps_head(&words.call),
        call = words.call,
        not_finite = words.not_finite,
        stages = dormand_prince_stages(f, args),
    )
}

/// One Dormand-Prince step of size `hs` from `t`, `y` and `k1`: the stages
/// `k2` to `k6`, the fifth-order solution `y5`, `k7` at it, and the error
/// estimate `e`.
fn dormand_prince_stages(f: &str, args: &str) -> String {
    let q = |(a, b): (f64, f64)| lit(a / b);
    // The stages' coefficients (Dormand and Prince 1980), the fifth-order
    // weights being the last stage's, and the error weights b - b̂.
    let a: [&[(f64, f64)]; 5] = [
        &[(1.0, 5.0)],
        &[(3.0, 40.0), (9.0, 40.0)],
        &[(44.0, 45.0), (-56.0, 15.0), (32.0, 9.0)],
        &[
            (19372.0, 6561.0),
            (-25360.0, 2187.0),
            (64448.0, 6561.0),
            (-212.0, 729.0),
        ],
        &[
            (9017.0, 3168.0),
            (-355.0, 33.0),
            (46732.0, 5247.0),
            (49.0, 176.0),
            (-5103.0, 18656.0),
        ],
    ];
    let b = [
        (35.0, 384.0),
        (500.0, 1113.0),
        (125.0, 192.0),
        (-2187.0, 6784.0),
        (11.0, 84.0),
    ];
    let e = [
        (71.0, 57600.0),
        (-71.0, 16695.0),
        (71.0, 1920.0),
        (-17253.0, 339200.0),
        (22.0, 525.0),
        (-1.0, 40.0),
    ];
    let c = [(1.0, 5.0), (3.0, 10.0), (4.0, 5.0), (8.0, 9.0)];
    // `w0 * kN + w1 * kM + ...` over the weights and the stages they weigh.
    let sum = |weights: &[(f64, f64)], stages: &[usize]| {
        weights
            .iter()
            .zip(stages)
            .map(|(&w, k)| format!("{} * k{k}", q(w)))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let mut out = String::new();
    for (i, row) in a.iter().enumerate() {
        let stage = i + 2;
        let time = match c.get(i) {
            Some(&ci) => format!("t + {} * hs", q(ci)),
            None => "t + hs".to_owned(),
        };
        let earlier: Vec<usize> = (1..stage).collect();
        let _ = writeln!(
            out,
            "            let k{stage} = {f}({time}, y + hs * ({}){args});",
            sum(row, &earlier)
        );
    }
    let _ = writeln!(
        out,
        "            let y5 = y + hs * ({});",
        sum(&b, &[1, 3, 4, 5, 6])
    );
    let _ = writeln!(out, "            let k7 = {f}(t + hs, y5{args});");
    let _ = write!(
        out,
        "            let e = hs * ({});",
        sum(&e, &[1, 3, 4, 5, 6, 7])
    );
    out
}

/// The first step size, as Hairer, Nørsett and Wanner choose it (for a
/// method of order 5; `k1` is `f` at the initial point), at most the whole
/// span of the solve.
fn initial_step(f: &str, args: &str) -> String {
    format!(
        "    let sc = atol + rtol * y0.abs();
    let d0 = (dot(y0 / sc, y0 / sc) / n).max(1e-300).sqrt();
    let d1 = (dot(k1 / sc, k1 / sc) / n).max(1e-300).sqrt();
    let h0 = if d0 < 1e-5 || d1 < 1e-5 {{ 1e-6 }} else {{ 0.01 * d0 / d1 }};
    let f1 = {f}(t0 + h0, y0 + h0 * k1{args});
    let d2 = (dot((f1 - k1) / sc, (f1 - k1) / sc) / n).max(1e-300).sqrt() / h0;
    let h1 = if d1.max(d2) <= 1e-15 {{ (h0 * 1e-3).max(1e-6) }} else {{ (0.01 / d1.max(d2)).powf(0.2) }};
    let mut h = (100.0 * h0).min(h1).min(ts[ODE_T - 1] - t0);"
    )
}

/// The Rosenbrock method's linear solve `m x = b`, by Gaussian elimination
/// with partial pivoting.
fn rosenbrock_helpers(name: &str, n: &str) -> String {
    format!(
        "fn {name}_solve(m: [[f64; {n}]; {n}], b: [f64; {n}]) -> [f64; {n}] {{
    let mut a = m;
    let mut x = b;
    let mut col: usize = 0;
    while col < {n} {{
        let mut p = col;
        let mut r = col + 1;
        while r < {n} {{
            if a[r][col].abs() > a[p][col].abs() {{ p = r; }}
            r += 1;
        }}
        let row = a[p];
        a[p] = a[col];
        a[col] = row;
        let xp = x[p];
        x[p] = x[col];
        x[col] = xp;
        let mut r2 = col + 1;
        while r2 < {n} {{
            let l = a[r2][col] / a[col][col];
            a[r2] = a[r2] - l * a[col];
            x[r2] = x[r2] - l * x[col];
            r2 += 1;
        }}
        col += 1;
    }}
    let mut k: usize = {n};
    while k > 0 {{
        k -= 1;
        let mut s = x[k];
        let mut c: usize = k + 1;
        while c < {n} {{
            s -= a[k][c] * x[c];
            c += 1;
        }}
        x[k] = s / a[k][k];
    }}
    x
}}
"
    )
}

/// How a Rosenbrock step forms `W = I - h d J` and solves `W x = b`.
struct Linear {
    /// The size of `J` (the state's length, or the coupled system's state
    /// part alone).
    size: String,
    /// Statements after `f0 = f(t, y)` that leave `J` in `jy`.
    jacobian: String,
    /// The function solving `W x = b`, called as `{solve}(w, b{solve_args})`.
    solve: String,
    solve_args: String,
}

/// Statements leaving in `jy` the Jacobian of `f(t, ., a..)` at `y` by
/// forward differences in each coordinate (`fy` is `f` at `y`).
fn difference_jacobian(f: &str, args: &str, n: &str, y: &str, fy: &str) -> String {
    format!(
        "            let mut columns = [[0.0; {n}]; {n}];
            let mut c: usize = 0;
            while c < {n} {{
                let mut yc = {y};
                yc[c] = {y}[c] + {sqrt_eps} * {y}[c].abs().max(atol);
                columns[c] = ({f}(t, yc{args}) - {fy}) / (yc[c] - {y}[c]);
                c += 1;
            }}
            let jy = transpose(columns);
",
        sqrt_eps = lit(f64::EPSILON.sqrt())
    )
}

impl Linear {
    /// `J` by forward differences of `f` in each coordinate of `y`, and
    /// Gaussian elimination with partial pivoting (`{name}_solve`).
    fn dense(name: &str, f: &str, args: &str, n: &str) -> Linear {
        Linear {
            size: n.to_owned(),
            jacobian: difference_jacobian(f, args, n, "y", "f0"),
            solve: format!("{name}_solve"),
            solve_args: String::new(),
        }
    }

    /// For the coupled system of the state `y` and its sensitivities `S_j`
    /// (`z`, [`Sensitivities`]): its Jacobian is block lower triangular,
    /// `J = df/dy` on the diagonal of every block and `B_j = d(J S_j +
    /// df/dp_j)/dy` below, so `W x = b` is solved with `J` alone (`N` by
    /// `N`, from forward differences of `f`) and one directional difference
    /// of the coupled right-hand side per solve (`{sens}_wsolve`), not with
    /// the `M` by `M` matrix of the whole system.
    fn coupled(s: &SensNames, f_args: &str) -> Linear {
        let SensNames { f, n, sens, .. } = s;
        Linear {
            size: (*n).to_owned(),
            jacobian: format!(
                "            let mut ys = [0.0; {n}];
            let mut fs = [0.0; {n}];
            let mut c0: usize = 0;
            while c0 < {n} {{
                ys[c0] = y[c0];
                fs[c0] = f0[c0];
                c0 += 1;
            }}
{columns}",
                columns = difference_jacobian(f, f_args, n, "ys", "fs")
            ),
            solve: format!("{sens}_wsolve"),
            solve_args: format!(", t, y, f0, hs * {d}{f_args}", d = lit(rosenbrock_d())),
        }
    }
}

/// `{sens}_wsolve(w, b, t, z, fz, hd, a..)`: `x` with `W x = b` for the
/// coupled system at `(t, z)` (`fz` its right-hand side there, `W = I - hd
/// J`, `w` its state block): the state part `x_y = w^-1 b_y`, then each
/// sensitivity part `x_j = w^-1 (b_j + hd B_j x_y)`, `B_j x_y` by a forward
/// difference of the coupled right-hand side along `x_y`.
fn coupled_solve_text(s: &SensNames, t: &ArgTexts) -> String {
    let SensNames {
        n,
        d,
        m,
        coupled,
        sens,
        ..
    } = s;
    let (typed, args) = (&t.typed, &t.args);
    format!(
        "fn {sens}_wsolve(w: [[f64; {n}]; {n}], b: [f64; {m}], t: f64, z: [f64; {m}], fz: [f64; {m}], hd: f64{typed}) -> [f64; {m}] {{
    let mut by = [0.0; {n}];
    let mut ny = 0.0;
    let mut k: usize = 0;
    while k < {n} {{
        by[k] = b[k];
        ny += z[k] * z[k];
        k += 1;
    }}
    let xy = {sens}_solve(w, by);
    let nx = dot(xy, xy);
    let eps = if nx > 0.0 {{ {sqrt_eps} * (1.0 + ny.sqrt()) / nx.sqrt() }} else {{ 0.0 }};
    let mut x = b;
    let mut zp = z;
    k = 0;
    while k < {n} {{
        x[k] = xy[k];
        zp[k] = z[k] + eps * xy[k];
        k += 1;
    }}
    let bx = if nx > 0.0 {{ ({coupled}(t, zp{args}) - fz) / eps }} else {{ [0.0; {m}] }};
    let mut j: usize = 0;
    while j < {d} {{
        let mut bj = [0.0; {n}];
        let mut c: usize = 0;
        while c < {n} {{
            bj[c] = b[{n} + j * {n} + c] + hd * bx[{n} + j * {n} + c];
            c += 1;
        }}
        let xj = {sens}_solve(w, bj);
        c = 0;
        while c < {n} {{
            x[{n} + j * {n} + c] = xj[c];
            c += 1;
        }}
        j += 1;
    }}
    x
}}
",
        sqrt_eps = lit(f64::EPSILON.sqrt())
    )
}

/// The Rosenbrock 2(3) method's `d = 1 / (2 + sqrt 2)`.
fn rosenbrock_d() -> f64 {
    1.0 / (2.0 + 2f64.sqrt())
}

/// The Rosenbrock 2(3) integration (Shampine and Reichelt 1997) from `t0`
/// through every time of `ts`.
fn rosenbrock_body(words: &Words, f: &str, args: &str, n: &str, linear: &Linear) -> String {
    let d = rosenbrock_d();
    let e32 = 6.0 + 2f64.sqrt();
    let Linear {
        size,
        jacobian,
        solve,
        solve_args,
    } = linear;
    format!(
        "    let n = {n} as f64;
    let mut out = [y0; ODE_T];
    let mut y = y0;
    let mut t = t0;
    let k1 = {f}(t, y{args});
    let mut eye = [[0.0; {size}]; {size}];
    let mut q: usize = 0;
    while q < {size} {{
        eye[q][q] = 1.0;
        q += 1;
    }}
    let sc = atol + rtol * y0.abs();
    let d1 = (dot(k1 / sc, k1 / sc) / n).max(1e-300).sqrt();
    let mut h = if d1 < 1e-5 {{ 1e-6 }} else {{ 0.01 / d1 }};
    h = h.min(ts[ODE_T - 1] - t0);
{steps_head}
            let f0 = {f}(t, y{args});
{jacobian}            let tt = t + {sqrt_eps} * t.abs().max((t + hs).abs());
            let jt = ({f}(tt, y{args}) - f0) / (tt - t);
            let w = eye - (hs * {d}) * jy;
            let s1 = {solve}(w, f0 + (hs * {d}) * jt{solve_args});
            let f1 = {f}(t + 0.5 * hs, y + (0.5 * hs) * s1{args});
            let s2 = {solve}(w, f1 - s1{solve_args}) + s1;
            let ynew = y + hs * s2;
            let f2 = {f}(t + hs, ynew{args});
            let s3 = {solve}(w, f2 - {e32} * (s2 - f1) - 2.0 * (s1 - f0) + (hs * {d}) * jt{solve_args});
            let e = (hs / 6.0) * (s1 - 2.0 * s2 + s3);
            let r = e / (atol + rtol * y.abs().max(ynew.abs()));
            let err2 = dot(r, r) / n;
            assert!(!err2.is_nan(), \"{call}: {not_finite}\");
            let factor = (0.8 * err2.max(1e-20).powf({sixth})).max(0.2).min(5.0);
            if err2 <= 1.0 {{
                t = if last {{ target }} else {{ t + hs }};
                y = ynew;
                h = if last {{ h.max(hs * factor) }} else {{ hs * factor }};
            }} else {{
                h = hs * factor.min(1.0);
            }}
        }}
        out[i] = y;
        i += 1;
    }}
    out
",
        steps_head = steps_head(&words.call),
        call = words.call,
        not_finite = words.not_finite,
        d = lit(d),
        e32 = lit(e32),
        sixth = lit(-1.0 / 6.0),
        sqrt_eps = lit(f64::EPSILON.sqrt()),
    )
}

/// A tensor of floats inside an argument after `y` of the right-hand side
/// (the argument itself, or a part of a tuple): each of its floats is a
/// parameter of the sensitivities.
struct FloatTensor {
    /// The tuple fields that lead to it (`.1.0`; empty: the argument).
    path: String,
    /// `f64` or `f32`.
    elem: &'static str,
    /// Its lengths as written, outermost first (none: a scalar).
    dims: Vec<String>,
    /// The offset of its first float in `p`, a constant expression.
    offset: String,
}

impl FloatTensor {
    /// Its type (`[[f64; 3]; 2]`).
    fn type_text(&self) -> String {
        self.dims
            .iter()
            .rev()
            .fold(self.elem.to_owned(), |t, d| format!("[{t}; {d}]"))
    }

    /// Its number of floats, a constant expression.
    fn size(&self) -> String {
        let dims: Vec<String> = self.dims.iter().map(|d| format!("({d})")).collect();
        if dims.is_empty() {
            "1".to_owned()
        } else {
            dims.join(" * ")
        }
    }

    /// Statements running `body(index, flat)` for each of its floats: the
    /// float's indices (`[q0_1_0][q0_1_1]`) and its position in `p`; the
    /// loop counters are named after `tag`, unique in a function.
    fn for_each(&self, tag: &str, body: impl Fn(&str, &str) -> String) -> String {
        let mut index = String::new();
        let mut flat = String::new();
        let mut head = String::new();
        let mut tail = String::new();
        for (level, dim) in self.dims.iter().enumerate() {
            let q = format!("q{tag}_{level}");
            let indent = "    ".repeat(level + 1);
            writeln!(
                head,
                "{indent}let mut {q}: usize = 0;\n{indent}while {q} < {dim} {{"
            )
            .unwrap();
            tail = format!("{indent}    {q} += 1;\n{indent}}}\n{tail}");
            write!(index, "[{q}]").unwrap();
            flat = if flat.is_empty() {
                q
            } else {
                format!("({flat}) * ({dim}) + {q}")
            };
        }
        let at = if flat.is_empty() {
            self.offset.clone()
        } else {
            format!("{} + {flat}", self.offset)
        };
        let indent = "    ".repeat(self.dims.len() + 1);
        format!("{head}{indent}{}\n{tail}", body(&index, &at))
    }
}

/// The layout of the sensitivity solve of a call: the parameters `p`
/// packed as `y` then every float of the further arguments, `D` of them;
/// the coupled state `z`, `M = N + N D` long, holds `y` then the columns
/// `dy/dp_j`, each `N` long.
struct Sensitivities {
    /// Per argument after `y`, the tensors of floats it holds (none: data,
    /// passed unchanged).
    extras: Vec<Vec<FloatTensor>>,
    /// `D` and `M` as constant expressions.
    d: String,
    m: String,
}

impl Sensitivities {
    /// The layout, when every length is a number, a constant or a constant
    /// expression (else `None`: the gradient differentiates the solve as it
    /// ran).
    fn of(rhs: &Rhs, consts: &[String]) -> Option<Sensitivities> {
        if !fixed(&rhs.dim, consts) {
            return None;
        }
        let n = &rhs.dim;
        let mut extras = Vec::new();
        let mut offset = format!("({n})");
        for ty in &rhs.extra {
            let ty: syn::Type = syn::parse_str(ty).ok()?;
            let mut tensors = Vec::new();
            float_tensors(&ty, String::new(), consts, &mut tensors)?;
            for t in &mut tensors {
                t.offset = offset.clone();
                write!(offset, " + {}", t.size()).unwrap();
            }
            extras.push(tensors);
        }
        Some(Sensitivities {
            extras,
            m: format!("({n}) + ({n}) * ({offset})"),
            d: offset,
        })
    }
}

/// Whether the length `len` (as written) is fixed by the program: its
/// names are all constants.
fn fixed(len: &str, consts: &[String]) -> bool {
    fn names_known(tokens: proc_macro2::TokenStream, consts: &[String]) -> bool {
        tokens.into_iter().all(|tree| match tree {
            proc_macro2::TokenTree::Ident(name) => consts.iter().any(|c| name == c),
            proc_macro2::TokenTree::Group(g) => names_known(g.stream(), consts),
            _ => true,
        })
    }
    len.parse::<proc_macro2::TokenStream>()
        .is_ok_and(|tokens| names_known(tokens, consts))
}

/// Appends the tensors of floats that a value of type `ty` holds, at the
/// tuple fields `path` of the argument (their offsets left to the caller);
/// `None` if a length is not fixed or the type is not one of the
/// language's.
fn float_tensors(
    ty: &syn::Type,
    path: String,
    consts: &[String],
    out: &mut Vec<FloatTensor>,
) -> Option<()> {
    match ty {
        syn::Type::Paren(p) => float_tensors(&p.elem, path, consts, out),
        syn::Type::Group(g) => float_tensors(&g.elem, path, consts, out),
        syn::Type::Tuple(t) => {
            for (i, elem) in t.elems.iter().enumerate() {
                float_tensors(elem, format!("{path}.{i}"), consts, out)?;
            }
            Some(())
        }
        _ => {
            let mut dims = Vec::new();
            let mut elem = ty;
            while let syn::Type::Array(a) = elem {
                let len = a.len.to_token_stream().to_string();
                if !fixed(&len, consts) {
                    return None;
                }
                dims.push(len);
                elem = &a.elem;
            }
            let syn::Type::Path(p) = elem else {
                return None;
            };
            let float = match p.path.get_ident()?.to_string().as_str() {
                "f64" => "f64",
                "f32" => "f32",
                _ => return Some(()),
            };
            out.push(FloatTensor {
                path,
                elem: float,
                dims,
                offset: String::new(),
            });
            Some(())
        }
    }
}

/// The custom derivative of a call's solver (`{name}_adjoint`, see
/// [`custom_vjp_of`]) and what it uses: the sensitivities solved with the
/// state as one system, by the call's method with its step control over
/// the whole coupled state.
///
/// - `{name}_row(p, i, t, a..)`: `f(t, y, a..)[i]` with `y` and the float
///   arguments taken from `p`, whose `grad` is row `i` of the Jacobian of
///   `f` in `(y, a..)`;
/// - `{name}_coupled(t, z, a..)`: the coupled right-hand side, `f` and
///   `dS_j/dt = J_y S_j + df/dp_j` (the last term for the arguments only),
///   by `{name}_tangent` (forward mode, [`tangent`]) or by the rows;
/// - `{name}_sens`: the call's solver on the coupled system, from `y0` and
///   the identity in `y0`'s columns, its failures naming the sensitivities;
/// - `{name}_adjoint`: the adjoints `S^T ybar` of `y0` and the float
///   arguments, `f(t_i, y_i) . ybar_i` of `ts[i]`, `-(S_y0^T ybar) .
///   f(t0, y0)` of `t0`, zero of the tolerances.
fn sensitivity_text(
    call: &Call,
    f_item: &syn::ItemFn,
    globals: &[tangent::Global],
    rhs: &Rhs,
    layout: &Sensitivities,
) -> String {
    let name = site_function(call.solver, call.start);
    let f = &call.function;
    let n = &rhs.dim;
    let consts = name.to_uppercase();
    let (d, m) = (format!("{consts}_D"), format!("{consts}_M"));
    let tol = call.solver.ends_with("_tol");
    let solver = call.solver.trim_end_matches("_tol");
    let t = argument_texts(rhs, layout);
    let (tol_params, tol_results, tol_types, defaults) = if tol {
        (
            ", rtol: f64, atol: f64, max_num_steps: i64",
            ", 0.0, 0.0",
            ", f64, f64",
            "",
        )
    } else {
        (
            "",
            "",
            "",
            "    let rtol = 1e-6;\n    let atol = 1e-6;\n    let max_num_steps: i64 = 1000000;\n",
        )
    };
    let words = Words::sensitivities(call);
    let coupled = format!("{name}_coupled");
    let sens = format!("{name}_sens");
    let names = SensNames {
        name: &name,
        f,
        n,
        d: &d,
        m: &m,
        coupled: &coupled,
        sens: &sens,
    };
    let (helpers, body) = if solver == "ode_rk45" {
        (String::new(), rk45_body(&words, &coupled, &t.args, &m))
    } else {
        (
            rosenbrock_helpers(&sens, n) + &coupled_solve_text(&names, &t),
            rosenbrock_body(
                &words,
                &coupled,
                &t.args,
                &m,
                &Linear::coupled(&names, &t.args),
            ),
        )
    };
    format!(
        "const {d}: usize = {layout_d};
const {m}: usize = {layout_m};
{rhs_fns}{helpers}fn {sens}<const ODE_T: usize>(y0: [f64; {m}], t0: f64, ts: [f64; ODE_T], rtol: f64, atol: f64, max_num_steps: i64{typed}) -> [[f64; {m}]; ODE_T] {{
{body}}}
{adjoint_fn}",
        layout_d = layout.d,
        layout_m = layout.m,
        typed = t.typed,
        rhs_fns = rhs_functions(&names, &t, f_item, globals, layout),
        adjoint_fn = adjoint_function(&names, &t, tol_params, tol_types, tol_results, defaults),
    )
}

/// The names a call's sensitivity solve is written with.
struct SensNames<'a> {
    /// The solver's generated function (`ode_rk45_12_9`).
    name: &'a str,
    /// The right-hand side `f`.
    f: &'a str,
    /// The state's length.
    n: &'a str,
    /// The constants of the differentiated length and the coupled state's.
    d: &'a str,
    m: &'a str,
    /// The coupled right-hand side and the solve of the coupled system.
    coupled: &'a str,
    sens: &'a str,
}

/// The texts the further arguments `a..` give the sensitivity solve's
/// functions, each in its place.
#[derive(Default)]
struct ArgTexts {
    /// `, a0: T0, ..`: the parameters.
    typed: String,
    /// `, a0, ..`: the arguments passed on.
    args: String,
    /// Statements taking the float arguments out of the point `p`.
    from_p: String,
    /// `, a0, b1, ..`: the arguments of `f` in the row function.
    row_args: String,
    /// Statements putting the float arguments into `p`.
    into_p: String,
    /// Statements taking the float arguments' adjoints out of `dp`.
    adjoints: String,
    /// `, b1, ..`: the adjoints returned, and their types.
    results: String,
    ret_types: String,
}

/// The [`ArgTexts`] of a call's further arguments: each float goes into `p`
/// as an `f64`, comes out of it into a copy of its argument, and its
/// adjoint out of `dp` into one tensor of the adjoints of each argument.
fn argument_texts(rhs: &Rhs, layout: &Sensitivities) -> ArgTexts {
    let mut t = ArgTexts::default();
    for (k, (ty, tensors)) in rhs.extra.iter().zip(&layout.extras).enumerate() {
        write!(t.typed, ", a{k}: {ty}").unwrap();
        write!(t.args, ", a{k}").unwrap();
        if tensors.is_empty() {
            write!(t.row_args, ", a{k}").unwrap();
            continue;
        }
        write!(t.row_args, ", b{k}").unwrap();
        writeln!(t.from_p, "    let mut b{k} = a{k};").unwrap();
        for (j, tensor) in tensors.iter().enumerate() {
            let FloatTensor { path, elem, .. } = tensor;
            let tag = format!("{k}_{j}");
            let cast = if *elem == "f64" {
                String::new()
            } else {
                format!(" as {elem}")
            };
            t.into_p.push_str(&tensor.for_each(&tag, |index, at| {
                let value = if *elem == "f64" {
                    format!("a{k}{path}{index}")
                } else {
                    format!("a{k}{path}{index} as f64")
                };
                format!("p[{at}] = {value};")
            }));
            t.from_p.push_str(&tensor.for_each(&tag, |index, at| {
                format!("b{k}{path}{index} = p[{at}]{cast};")
            }));
            let zero = tensor
                .dims
                .iter()
                .rev()
                .fold(zero_of(elem).to_owned(), |z, d| format!("[{z}; {d}]"));
            writeln!(t.adjoints, "    let mut c{tag} = {zero};").unwrap();
            t.adjoints.push_str(
                &tensor.for_each(&tag, |index, at| format!("c{tag}{index} = dp[{at}]{cast};")),
            );
            write!(t.results, ", c{tag}").unwrap();
            write!(t.ret_types, ", {}", tensor.type_text()).unwrap();
        }
    }
    t
}

/// The zero of the float type `elem`, as a literal.
fn zero_of(elem: &str) -> &'static str {
    if elem == "f32" {
        "0.0f32"
    } else {
        "0.0"
    }
}

/// `{name}_row` and `{coupled}` ([`sensitivity_text`]): the coupled
/// right-hand side by forward mode ([`tangent`]) where `f_item` is written
/// in the forms it covers, else by the rows of the Jacobian, each a `grad`
/// of `{name}_row`.
fn rhs_functions(
    s: &SensNames,
    t: &ArgTexts,
    f_item: &syn::ItemFn,
    globals: &[tangent::Global],
    layout: &Sensitivities,
) -> String {
    let numbers = number_value(s.n).zip(number_value(&layout.d));
    let row = row_function(s, t);
    let lengths = tangent::Lengths {
        n: s.n,
        d: s.d,
        m: s.m,
        numbers,
    };
    match tangent::tangent_function(s.name, f_item, globals, layout, &lengths) {
        Some(tangent_fn) => {
            let coupled =
                tangent::coupled_by_tangent(s.name, s.coupled, &t.typed, &t.args, &lengths);
            format!("{row}{tangent_fn}{coupled}")
        }
        None => format!("{row}{}", coupled_by_rows(s, t, numbers)),
    }
}

/// `{name}_row(p, i, t, a..)`: `f(t, y, a..)[i]` at the point `p` (`y`
/// then the float arguments), whose `grad` is row `i` of the Jacobian.
fn row_function(s: &SensNames, t: &ArgTexts) -> String {
    let SensNames { name, f, n, d, .. } = s;
    let (typed, from_p, row_args) = (&t.typed, &t.from_p, &t.row_args);
    format!(
        "fn {name}_row(p: [f64; {d}], i: usize, t: f64{typed}) -> f64 {{
    let mut y = [0.0; {n}];
    let mut k: usize = 0;
    while k < {n} {{
        y[k] = p[k];
        k += 1;
    }}
{from_p}    let r = {f}(t, y{row_args});
    r[i]
}}
"
    )
}

/// `{coupled}` by the rows of the Jacobian: for each row `i`, `grad` of
/// `{name}_row` and the products with the sensitivities ([`products`]);
/// `lengths` are `N` and `D` if they are numbers.
fn coupled_by_rows(s: &SensNames, t: &ArgTexts, lengths: Option<(usize, usize)>) -> String {
    let SensNames {
        name,
        f,
        n,
        d,
        m,
        coupled,
        ..
    } = s;
    let (typed, args, into_p) = (&t.typed, &t.args, &t.into_p);
    format!(
        "fn {coupled}(t: f64, z: [f64; {m}]{typed}) -> [f64; {m}] {{
    let mut y = [0.0; {n}];
    let mut p = [0.0; {d}];
    let mut k: usize = 0;
    while k < {n} {{
        y[k] = z[k];
        p[k] = z[k];
        k += 1;
    }}
{into_p}    let fy = {f}(t, y{args});
    let mut out = [0.0; {m}];
    let mut i: usize = 0;
    while i < {n} {{
        out[i] = fy[i];
        let g = grad({name}_row, p, i, t{args});
{products}        i += 1;
    }}
    out
}}
",
        products = products(s, lengths),
    )
}

/// The largest `N * D * N` (the terms of the coupled right-hand side's
/// products) written out term by term.
const MOST_TERMS_WRITTEN_OUT: usize = 4096;

/// The statements of the coupled right-hand side giving row `i` of the
/// derivatives of the sensitivities, `out[N + j N + i] = sum_c g[c] S_j[c]`
/// plus `g[j]` for an argument's parameter `j`, from row `i` of the
/// Jacobian `g`. The sum runs over `c` in order from `0.0` (or `g[j]`):
/// loops in general, written out term by term (the same operations in the
/// same order, so the same bits, without the loops' index arithmetic) when
/// `N` and `D` are numbers (`lengths`) and the terms few.
fn products(s: &SensNames, lengths: Option<(usize, usize)>) -> String {
    let SensNames { n, d, .. } = s;
    match lengths {
        Some((n, d)) if n * d * n <= MOST_TERMS_WRITTEN_OUT => {
            let mut text = String::new();
            for j in 0..d {
                let mut sum = if j < n {
                    "0.0".to_owned()
                } else {
                    format!("g[{j}]")
                };
                for c in 0..n {
                    write!(sum, " + g[{c}] * z[{}]", n + j * n + c).unwrap();
                }
                writeln!(text, "        out[{} + i] = {sum};", n + j * n).unwrap();
            }
            text
        }
        _ => format!(
            "        let mut j: usize = 0;
        while j < {d} {{
            let mut s = if j < {n} {{ 0.0 }} else {{ g[j] }};
            let mut c: usize = 0;
            while c < {n} {{
                s += g[c] * z[{n} + j * {n} + c];
                c += 1;
            }}
            out[{n} + j * {n} + i] = s;
            j += 1;
        }}
"
        ),
    }
}

/// The value of a constant expression of numbers, `+`, `*` and
/// parentheses (a length as [`Sensitivities`] writes it), if it is one.
fn number_value(text: &str) -> Option<usize> {
    fn value(e: &syn::Expr) -> Option<usize> {
        match e {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse().ok(),
            syn::Expr::Paren(p) => value(&p.expr),
            syn::Expr::Group(g) => value(&g.expr),
            syn::Expr::Binary(b) => {
                let (l, r) = (value(&b.left)?, value(&b.right)?);
                match b.op {
                    syn::BinOp::Add(_) => l.checked_add(r),
                    syn::BinOp::Mul(_) => l.checked_mul(r),
                    _ => None,
                }
            }
            _ => None,
        }
    }
    value(&syn::parse_str(text).ok()?)
}

/// `{name}_adjoint` ([`sensitivity_text`]).
fn adjoint_function(
    s: &SensNames,
    t: &ArgTexts,
    tol_params: &str,
    tol_types: &str,
    tol_results: &str,
    defaults: &str,
) -> String {
    let SensNames {
        name,
        f,
        n,
        d,
        m,
        sens,
        ..
    } = s;
    let (typed, args, adjoints, results, ret_types) =
        (&t.typed, &t.args, &t.adjoints, &t.results, &t.ret_types);
    format!(
        "fn {name}_adjoint<const ODE_T: usize>(y0: [f64; {n}], t0: f64, ts: [f64; ODE_T]{tol_params}{typed}, ybar: [[f64; {n}]; ODE_T]) -> ([f64; {n}], f64, [f64; ODE_T]{tol_types}{ret_types}) {{
{defaults}    let mut z0 = [0.0; {m}];
    let mut k: usize = 0;
    while k < {n} {{
        z0[k] = y0[k];
        z0[{n} + k * {n} + k] = 1.0;
        k += 1;
    }}
    let zs = {sens}(z0, t0, ts, rtol, atol, max_num_steps{args});
    let mut dp = [0.0; {d}];
    let mut dts = [0.0; ODE_T];
    let mut i: usize = 0;
    while i < ODE_T {{
        let mut y = [0.0; {n}];
        let mut c: usize = 0;
        while c < {n} {{
            y[c] = zs[i][c];
            c += 1;
        }}
        dts[i] = dot({f}(ts[i], y{args}), ybar[i]);
        let mut j: usize = 0;
        while j < {d} {{
            let mut s = 0.0;
            let mut c2: usize = 0;
            while c2 < {n} {{
                s += zs[i][{n} + j * {n} + c2] * ybar[i][c2];
                c2 += 1;
            }}
            dp[j] += s;
            j += 1;
        }}
        i += 1;
    }}
    let mut dy0 = [0.0; {n}];
    let mut c3: usize = 0;
    while c3 < {n} {{
        dy0[c3] = dp[c3];
        c3 += 1;
    }}
    let dt0 = -dot(dy0, {f}(t0, y0{args}));
{adjoints}    (dy0, dt0, dts{tol_results}{results})
}}
"
    )
}
