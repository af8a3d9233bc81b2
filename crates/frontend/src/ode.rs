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
//! `assertion_failed` at the call, the message naming the solver and why.
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
//! solver's steps. A call whose further arguments hold floats otherwise
//! than as `f64` or `[f64; K]`, or whose lengths are not numbers or
//! constants, gets none: its gradient differentiates the solve as it ran,
//! which is why the body checker lets the solvers' `while` conditions
//! depend on the differentiated value ([`is_generated`]).

use std::cell::RefCell;
use std::fmt::Write;

use autobatch_types::Loc;
use quote::ToTokens;
use syn::visit::Visit;

/// The solvers, by the name a program calls them with.
pub(crate) const SOLVERS: [&str; 4] = ["ode_rk45", "ode_rk45_tol", "ode_bdf", "ode_bdf_tol"];

/// The generated function serving the call of `solver` starting at `loc`.
pub(crate) fn site_function(solver: &str, loc: Loc) -> String {
    format!("{solver}_{}_{}", loc.line, loc.column)
}

/// Whether `name` is a generated solver or one of its helpers
/// (`ode_bdf_12_9`, `ode_bdf_12_9_solve`).
pub(crate) fn is_generated(name: &str) -> bool {
    SOLVERS.iter().any(|solver| {
        let Some(rest) = name.strip_prefix(solver).and_then(|r| r.strip_prefix('_')) else {
            return false;
        };
        let mut parts = rest.splitn(3, '_');
        let number = |p: Option<&str>| {
            p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        };
        number(parts.next()) && number(parts.next())
    })
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
    for call in finder.calls {
        let Some(f) = find_function(file, &call.function) else {
            continue;
        };
        let Some(sig) = rhs_signature(f) else {
            continue;
        };
        let mut generated = solver_text(&call, &sig);
        if let Some(layout) = Sensitivities::of(&sig, &consts) {
            generated.push_str(&sensitivity_text(&call, &sig, &layout));
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
    let site = SOLVERS.iter().any(|solver| {
        name.strip_prefix(solver)
            .and_then(|r| r.strip_prefix('_'))
            .and_then(|r| r.split_once('_'))
            .is_some_and(|(l, c)| {
                [l, c]
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
    });
    let backward = format!("{name}_adjoint");
    site.then(|| module.functions.iter().position(|f| f.name == backward))?
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
    let checks = input_checks(solver, n);
    let (helpers, main) = if solver == "ode_rk45" {
        (String::new(), rk45_body(solver, &call.function, &args, n))
    } else {
        (
            rosenbrock_helpers(&name, n),
            rosenbrock_body(
                solver,
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

/// Stan's checks of the arguments.
fn input_checks(solver: &str, n: &str) -> String {
    format!(
        "    assert!(t0.is_finite(), \"{solver}: the initial time is not finite\");
    let mut i: usize = 0;
    while i < {n} {{
        assert!(y0[i].is_finite(), \"{solver}: the initial state is not finite\");
        i += 1;
    }}
    let mut j: usize = 0;
    while j < ODE_T {{
        assert!(ts[j].is_finite(), \"{solver}: an output time is not finite\");
        if j == 0 {{
            assert!(ts[0] > t0, \"{solver}: the first output time is not after the initial time\");
        }} else {{
            assert!(ts[j] >= ts[j - 1], \"{solver}: the output times are not sorted\");
        }}
        j += 1;
    }}
    assert!(rtol > 0.0 && rtol.is_finite(), \"{solver}: the relative tolerance is not positive and finite\");
    assert!(atol > 0.0 && atol.is_finite(), \"{solver}: the absolute tolerance is not positive and finite\");
    assert!(max_num_steps > 0, \"{solver}: the maximum number of steps is not positive\");
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
fn steps_head(solver: &str) -> String {
    format!(
        "    let mut i: usize = 0;
    while i < ODE_T {{
        let target = ts[i];
        let mut steps: i64 = 0;
        while t < target {{
            assert!(steps < max_num_steps, \"{solver}: max_num_steps steps taken before the next output time\");
            steps += 1;
            let last = t + h >= target;
            let hs = if last {{ target - t }} else {{ h }};
            assert!(hs > 4.0e-16 * t.abs(), \"{solver}: the step size underflowed\");"
    )
}

/// The Dormand-Prince integration from `t0` through every time of `ts`.
fn rk45_body(solver: &str, f: &str, args: &str, n: &str) -> String {
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
            assert!(!err2.is_nan(), \"{solver}: the state or its derivative is not finite\");
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
        steps_head = steps_head(solver),
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

impl Linear {
    /// `J` by forward differences of `f` in each coordinate of `y`, and
    /// Gaussian elimination with partial pivoting (`{name}_solve`).
    fn dense(name: &str, f: &str, args: &str, n: &str) -> Linear {
        Linear {
            size: n.to_owned(),
            jacobian: format!(
                "            let mut columns = [[0.0; {n}]; {n}];
            let mut c: usize = 0;
            while c < {n} {{
                let mut yc = y;
                yc[c] = y[c] + {sqrt_eps} * y[c].abs().max(atol);
                columns[c] = ({f}(t, yc{args}) - f0) / (yc[c] - y[c]);
                c += 1;
            }}
            let jy = transpose(columns);
",
                sqrt_eps = lit(f64::EPSILON.sqrt())
            ),
            solve: format!("{name}_solve"),
            solve_args: String::new(),
        }
    }
}

impl Linear {
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
            let mut columns = [[0.0; {n}]; {n}];
            let mut c: usize = 0;
            while c < {n} {{
                let mut yc = ys;
                yc[c] = ys[c] + {sqrt_eps} * ys[c].abs().max(atol);
                columns[c] = ({f}(t, yc{f_args}) - fs) / (yc[c] - ys[c]);
                c += 1;
            }}
            let jy = transpose(columns);
",
                sqrt_eps = lit(f64::EPSILON.sqrt())
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
fn rosenbrock_body(solver: &str, f: &str, args: &str, n: &str, linear: &Linear) -> String {
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
            assert!(!err2.is_nan(), \"{solver}: the state or its derivative is not finite\");
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
        steps_head = steps_head(solver),
        d = lit(d),
        e32 = lit(e32),
        sixth = lit(-1.0 / 6.0),
        sqrt_eps = lit(f64::EPSILON.sqrt()),
    )
}

/// How an argument after `y` of the right-hand side enters the
/// sensitivities.
enum Extra {
    /// A float (`f64`, one parameter) or a float vector (`[f64; K]`, `K`
    /// parameters, `K` as written).
    Float(Option<String>),
    /// No float: passed unchanged, no derivative.
    Data,
}

/// The layout of the sensitivity solve of a call: the parameters `p`
/// packed as `y` then every float argument, `D` of them; the coupled state
/// `z`, `M = N + N D` long, holds `y` then the columns `dy/dp_j`, each `N`
/// long.
struct Sensitivities {
    extras: Vec<Extra>,
    /// `D` and `M` as constant expressions.
    d: String,
    m: String,
    /// Per argument after `y`, the offset of its first parameter in `p`.
    offsets: Vec<String>,
}

impl Sensitivities {
    /// The layout, when every length is a number or a constant and every
    /// float argument a float or a vector of floats (else `None`: the
    /// gradient differentiates the solve as it ran).
    fn of(rhs: &Rhs, consts: &[String]) -> Option<Sensitivities> {
        let fixed =
            |len: &str| len.bytes().all(|b| b.is_ascii_digit()) || consts.iter().any(|c| c == len);
        if !fixed(&rhs.dim) {
            return None;
        }
        let n = &rhs.dim;
        let mut extras = Vec::new();
        let mut offsets = Vec::new();
        let mut offset = format!("({n})");
        for ty in &rhs.extra {
            offsets.push(offset.clone());
            let extra = if ty == "f64" {
                Extra::Float(None)
            } else if let Some(len) = ty
                .strip_prefix("[f64 ;")
                .and_then(|r| r.strip_suffix(']'))
                .map(str::trim)
            {
                if !fixed(len) {
                    return None;
                }
                Extra::Float(Some(len.to_owned()))
            } else if ty.contains("f64") || ty.contains("f32") {
                return None;
            } else {
                Extra::Data
            };
            match &extra {
                Extra::Float(None) => offset.push_str(" + 1"),
                Extra::Float(Some(len)) => write!(offset, " + ({len})").unwrap(),
                Extra::Data => {}
            }
            extras.push(extra);
        }
        Some(Sensitivities {
            extras,
            m: format!("({n}) + ({n}) * ({offset})"),
            d: offset,
            offsets,
        })
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
///   `dS_j/dt = J_y S_j + df/dp_j` (the last term for the arguments only);
/// - `{name}_sens`: the call's solver on the coupled system, from `y0` and
///   the identity in `y0`'s columns, its failures naming the sensitivities;
/// - `{name}_adjoint`: the adjoints `S^T ybar` of `y0` and the float
///   arguments, `f(t_i, y_i) . ybar_i` of `ts[i]`, `-(S_y0^T ybar) .
///   f(t0, y0)` of `t0`, zero of the tolerances.
fn sensitivity_text(call: &Call, rhs: &Rhs, layout: &Sensitivities) -> String {
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
    let label = format!("{solver} sensitivities");
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
        (String::new(), rk45_body(&label, &coupled, &t.args, &m))
    } else {
        (
            rosenbrock_helpers(&sens, n) + &coupled_solve_text(&names, &t),
            rosenbrock_body(
                &label,
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
        rhs_fns = rhs_functions(&names, &t),
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

/// The [`ArgTexts`] of a call's further arguments.
fn argument_texts(rhs: &Rhs, layout: &Sensitivities) -> ArgTexts {
    let mut t = ArgTexts::default();
    for (k, (ty, extra)) in rhs.extra.iter().zip(&layout.extras).enumerate() {
        let off = &layout.offsets[k];
        write!(t.typed, ", a{k}: {ty}").unwrap();
        write!(t.args, ", a{k}").unwrap();
        match extra {
            Extra::Data => write!(t.row_args, ", a{k}").unwrap(),
            Extra::Float(None) => {
                write!(t.row_args, ", b{k}").unwrap();
                writeln!(t.from_p, "    let b{k} = p[{off}];").unwrap();
                writeln!(t.into_p, "    p[{off}] = a{k};").unwrap();
                writeln!(t.adjoints, "    let b{k} = dp[{off}];").unwrap();
                write!(t.results, ", b{k}").unwrap();
                write!(t.ret_types, ", f64").unwrap();
            }
            Extra::Float(Some(len)) => {
                write!(t.row_args, ", b{k}").unwrap();
                let copy = |src: &str| {
                    format!(
                        "    let mut b{k} = [0.0; {len}];\n    let mut q{k}: usize = 0;\n    while q{k} < {len} {{\n        b{k}[q{k}] = {src}[{off} + q{k}];\n        q{k} += 1;\n    }}\n"
                    )
                };
                t.from_p.push_str(&copy("p"));
                writeln!(
                    t.into_p,
                    "    let mut q{k}: usize = 0;\n    while q{k} < {len} {{\n        p[{off} + q{k}] = a{k}[q{k}];\n        q{k} += 1;\n    }}"
                )
                .unwrap();
                t.adjoints.push_str(&copy("dp"));
                write!(t.results, ", b{k}").unwrap();
                write!(t.ret_types, ", [f64; {len}]").unwrap();
            }
        }
    }
    t
}

/// `{name}_row` and `{coupled}` ([`sensitivity_text`]).
fn rhs_functions(s: &SensNames, t: &ArgTexts) -> String {
    let SensNames {
        name,
        f,
        n,
        d,
        m,
        coupled,
        ..
    } = s;
    let (typed, args, from_p, row_args, into_p) =
        (&t.typed, &t.args, &t.from_p, &t.row_args, &t.into_p);
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
fn {coupled}(t: f64, z: [f64; {m}]{typed}) -> [f64; {m}] {{
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
        let mut j: usize = 0;
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
        i += 1;
    }}
    out
}}
"
    )
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
