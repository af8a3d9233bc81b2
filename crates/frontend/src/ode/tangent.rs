//! The coupled right-hand side of a sensitivity solve by forward mode,
//! written as source: `{name}_tangent` evaluates `f` and, beside every
//! value that depends on the state or the parameters, its tangent in all
//! `D` directions at once (a `[f64; D]` per float, a `[[f64; D]; K]` per
//! vector), so one evaluation gives `f` and `J_y S_j + df/dp_j` for every
//! `j`: about the operations of `f` twice over, each on `D` lanes,
//! whatever `D`.
//!
//! It covers the right-hand sides written as straight-line code: `let`
//! bindings, `if`/`else` expressions, arithmetic on floats and on a vector
//! with a float, indexing, array literals, and the methods `exp ln sqrt
//! sin cos tanh recip exp_m1 ln_1p powi powf` (an exponent that does not
//! depend on the state or the parameters). Code that depends on neither is
//! kept as written. For anything else [`tangent_function`] gives `None` and
//! the caller keeps the Jacobian's rows by `grad`.

use std::fmt::Write;

use quote::ToTokens;

use super::{number_value, FloatTensor, Sensitivities};

/// The prefix of every name the generated function introduces; a
/// right-hand side that uses such a name is left to the rows by `grad`.
const PREFIX: &str = "odet_";

/// The state's tangent parameter of `{name}_tangent`: `[[f64; D]; N]`,
/// row `c` the derivatives of `y[c]` in every parameter.
const STATE_TANGENT: &str = "odet_dy";

/// The lengths of a call's sensitivity solve, as written (`N`, and the
/// constants `D` and `M` of the generated text) and as numbers if they are.
pub(super) struct Lengths<'a> {
    pub(super) n: &'a str,
    pub(super) d: &'a str,
    pub(super) m: &'a str,
    pub(super) numbers: Option<(usize, usize)>,
}

/// The largest `N * D` written out element by element (the coupled state's
/// gathering and scattering); longer ones are loops.
const MOST_WRITTEN_OUT: usize = 4096;

/// `fn {name}_tangent(<f's parameters>, odet_dy: [[f64; D]; N]) -> [f64;
/// M]`: `f` at `(t, y, a..)` and the derivatives of the sensitivities, in
/// the coupled state's layout (`y'` then each `S_j'`), if `f` is written in
/// the forms this module covers.
pub(super) fn tangent_function(
    name: &str,
    f: &syn::ItemFn,
    globals: &[Global],
    layout: &Sensitivities,
    lengths: &Lengths,
) -> Option<String> {
    if uses_prefix(f.to_token_stream()) {
        return None;
    }
    let mut w = Writer::new(lengths.d);
    for g in globals {
        w.env
            .push((g.name.clone(), Binding::Inactive { rank: g.rank }));
    }
    let mut params = String::new();
    let inputs: Vec<&syn::PatType> = f
        .sig
        .inputs
        .iter()
        .map(|a| match a {
            syn::FnArg::Typed(t) => Some(t),
            syn::FnArg::Receiver(_) => None,
        })
        .collect::<Option<_>>()?;
    let body_tokens = f.block.to_token_stream();
    for (k, input) in inputs.iter().enumerate() {
        let syn::Pat::Ident(ident) = &*input.pat else {
            return None;
        };
        if ident.by_ref.is_some() || ident.mutability.is_some() || ident.subpat.is_some() {
            return None;
        }
        let pname = ident.ident.to_string();
        write!(params, "{}, ", input.to_token_stream()).unwrap();
        let binding = match k {
            0 => Binding::Inactive { rank: Some(0) },
            1 => Binding::Active {
                tangent: STATE_TANGENT.to_owned(),
                rank: 1,
            },
            _ => {
                let tensors = layout.extras.get(k - 2)?;
                if tensors.is_empty() {
                    Binding::Inactive {
                        rank: rank_of_type(&input.ty),
                    }
                } else if mentions(&body_tokens, &pname) {
                    w.parameter(&pname, tensors, lengths)
                } else {
                    Binding::Unsupported
                }
            }
        };
        w.env.push((pname, binding));
    }
    let result = w.block_value(&f.block)?;
    if let Value::One(node) = &result {
        if node.rank != Some(1) {
            return None;
        }
    }
    let out = w.output(&result, lengths)?;
    Some(format!(
        "fn {name}_tangent({params}{STATE_TANGENT}: [[f64; {d}]; {n}]) -> [f64; {m}] {{\n{code}{out}}}\n",
        d = lengths.d,
        n = lengths.n,
        m = lengths.m,
        code = w.code,
    ))
}

/// The coupled right-hand side `{coupled}(t, z, a..)` by `{name}_tangent`:
/// the state and its tangent gathered from `z`, `f` and the derivatives
/// of the sensitivities in one call.
pub(super) fn coupled_by_tangent(
    name: &str,
    coupled: &str,
    typed: &str,
    args: &str,
    lengths: &Lengths,
) -> String {
    let Lengths { n, d, m, numbers } = lengths;
    let gather = match *numbers {
        Some((n, d)) if n * d <= MOST_WRITTEN_OUT => {
            let y: Vec<String> = (0..n).map(|c| format!("z[{c}]")).collect();
            let rows: Vec<String> = (0..n)
                .map(|c| {
                    let row: Vec<String> =
                        (0..d).map(|j| format!("z[{}]", n + j * n + c)).collect();
                    format!("[{}]", row.join(", "))
                })
                .collect();
            format!(
                "    let y = [{}];\n    let dy = [{}];\n",
                y.join(", "),
                rows.join(", ")
            )
        }
        _ => format!(
            "    let mut y = [0.0; {n}];
    let mut dy = [[0.0; {d}]; {n}];
    let mut c: usize = 0;
    while c < {n} {{
        y[c] = z[c];
        let mut j: usize = 0;
        while j < {d} {{
            dy[c][j] = z[{n} + j * {n} + c];
            j += 1;
        }}
        c += 1;
    }}
"
        ),
    };
    format!(
        "fn {coupled}(t: f64, z: [f64; {m}]{typed}) -> [f64; {m}] {{\n{gather}    {name}_tangent(t, y{args}, dy)\n}}\n"
    )
}

/// A constant or a static of the program, which a right-hand side may
/// read: its name, and its rank if it is a scalar or an array of scalars.
pub(super) struct Global {
    name: String,
    rank: Option<usize>,
}

/// The constants and statics of `file`.
pub(super) fn globals(file: &syn::File) -> Vec<Global> {
    let mut out = Vec::new();
    for item in &file.items {
        match item {
            syn::Item::Const(c) => out.push(Global {
                name: c.ident.to_string(),
                rank: rank_of_type(&c.ty),
            }),
            syn::Item::Static(s) => out.push(Global {
                name: s.ident.to_string(),
                rank: rank_of_type(&s.ty),
            }),
            syn::Item::ForeignMod(m) => {
                for item in &m.items {
                    if let syn::ForeignItem::Static(s) = item {
                        out.push(Global {
                            name: s.ident.to_string(),
                            rank: rank_of_type(&s.ty),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a name the generated function introduces appears in `tokens`.
fn uses_prefix(tokens: proc_macro2::TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(i) => i.to_string().starts_with(PREFIX),
        proc_macro2::TokenTree::Group(g) => uses_prefix(g.stream()),
        _ => false,
    })
}

/// Whether the identifier `name` appears in `tokens`.
fn mentions(tokens: &proc_macro2::TokenStream, name: &str) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(i) => i == name,
        proc_macro2::TokenTree::Group(g) => mentions(&g.stream(), name),
        _ => false,
    })
}

/// The rank of a value of type `ty` if it is a scalar or an array of
/// scalars (`None` for tuples and anything else).
fn rank_of_type(ty: &syn::Type) -> Option<usize> {
    match ty {
        syn::Type::Array(a) => Some(rank_of_type(&a.elem)? + 1),
        syn::Type::Paren(p) => rank_of_type(&p.elem),
        syn::Type::Group(g) => rank_of_type(&g.elem),
        syn::Type::Path(p) => {
            let name = p.path.get_ident()?.to_string();
            let scalars = [
                "f64", "f32", "i64", "i32", "usize", "u32", "u64", "u8", "i8", "bool",
            ];
            scalars.contains(&name.as_str()).then_some(0)
        }
        _ => None,
    }
}

/// What a name in scope is to the derivative.
#[derive(Clone)]
enum Binding {
    /// Depends on the state or the parameters: its tangent's variable and
    /// its rank (0 a float, 1 a vector).
    Active { tangent: String, rank: usize },
    /// Depends on neither (its rank if known).
    Inactive { rank: Option<usize> },
    /// A parameter whose floats this module does not follow (a tuple, a
    /// matrix, `f32`s): a right-hand side reading it is not covered.
    Unsupported,
}

/// A tangent: zero, or the variable holding it.
#[derive(Clone, PartialEq)]
enum Tangent {
    Zero,
    Var(String),
}

/// An expression's value (a variable or, for code that depends on neither
/// the state nor the parameters, the expression as written), its tangent
/// and its rank.
#[derive(Clone)]
struct Node {
    value: String,
    tangent: Tangent,
    rank: Option<usize>,
}

/// The value of a block: one node, or the floats of an array literal.
enum Value {
    One(Node),
    Elements(Vec<Node>),
}

struct Writer<'a> {
    /// The statements written so far (of the block being written).
    code: String,
    /// The names in scope, the latest last.
    env: Vec<(String, Binding)>,
    /// The count of variables introduced.
    next: usize,
    /// `D` as written.
    d: &'a str,
    /// The indentation of the block being written.
    indent: String,
}

impl<'a> Writer<'a> {
    fn new(d: &'a str) -> Writer<'a> {
        Writer {
            code: String::new(),
            env: Vec::new(),
            next: 0,
            d,
            indent: "    ".to_owned(),
        }
    }

    fn fresh(&mut self, what: &str) -> String {
        self.next += 1;
        format!("{PREFIX}{what}{}", self.next)
    }

    fn emit(&mut self, line: &str) {
        let indent = self.indent.clone();
        writeln!(self.code, "{indent}{line}").unwrap();
    }

    /// `let {var} = {text};`, returning `var`.
    fn bind(&mut self, what: &str, text: &str) -> String {
        let var = self.fresh(what);
        self.emit(&format!("let {var} = {text};"));
        var
    }

    /// The tangent of a linear operation (`of` spells it on a variable's
    /// name): zero stays zero, a tangent goes through the same operation.
    fn linear(&mut self, tangent: Tangent, of: impl Fn(&str) -> String) -> Tangent {
        match tangent {
            Tangent::Zero => Tangent::Zero,
            Tangent::Var(t) => Tangent::Var(self.bind("d", &of(&t))),
        }
    }

    /// The binding of the parameter `name` holding the float tensors
    /// `tensors` of the sensitivities: a float or a vector of `f64`, its
    /// tangent the unit vectors of its parameters.
    fn parameter(&mut self, name: &str, tensors: &[FloatTensor], lengths: &Lengths) -> Binding {
        let [tensor] = tensors else {
            return Binding::Unsupported;
        };
        if !tensor.path.is_empty() || tensor.elem != "f64" || tensor.dims.len() > 1 {
            return Binding::Unsupported;
        }
        let d = self.d;
        let var = format!("{PREFIX}d{name}");
        let numbers = lengths.numbers.map(|(_, d)| d);
        let offset = number_value(&tensor.offset);
        let unit = |at: usize, d: usize| {
            let row: Vec<&str> = (0..d)
                .map(|j| if j == at { "1.0" } else { "0.0" })
                .collect();
            format!("[{}]", row.join(", "))
        };
        match (tensor.dims.first(), numbers, offset) {
            (None, Some(dn), Some(o)) => self.emit(&format!("let {var} = {};", unit(o, dn))),
            (None, _, _) => {
                self.emit(&format!("let mut {var} = [0.0; {d}];"));
                self.emit(&format!("{var}[{}] = 1.0;", tensor.offset));
            }
            (Some(k), Some(dn), Some(o)) if number_value(k).is_some() => {
                let rows: Vec<String> = (0..number_value(k).unwrap())
                    .map(|q| unit(o + q, dn))
                    .collect();
                self.emit(&format!("let {var} = [{}];", rows.join(", ")));
            }
            (Some(k), _, _) => {
                let q = format!("{PREFIX}q{name}");
                self.emit(&format!("let mut {var} = [[0.0; {d}]; {k}];"));
                self.emit(&format!("let mut {q}: usize = 0;"));
                self.emit(&format!(
                    "while {q} < {k} {{ {var}[{q}][{} + {q}] = 1.0; {q} += 1; }}",
                    tensor.offset
                ));
            }
        }
        Binding::Active {
            tangent: var,
            rank: tensor.dims.len(),
        }
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.env
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
    }

    /// Whether `e` reads nothing that depends on the state or the
    /// parameters (`None`: it reads a parameter this module does not
    /// follow).
    fn inactive(&self, e: &syn::Expr) -> Option<bool> {
        fn walk(w: &Writer, tokens: proc_macro2::TokenStream) -> Option<bool> {
            for tree in tokens {
                let active = match tree {
                    proc_macro2::TokenTree::Ident(i) => match w.lookup(&i.to_string()) {
                        Some(Binding::Active { .. }) => true,
                        Some(Binding::Unsupported) => return None,
                        _ => false,
                    },
                    proc_macro2::TokenTree::Group(g) => !walk(w, g.stream())?,
                    _ => false,
                };
                if active {
                    return Some(false);
                }
            }
            Some(true)
        }
        walk(self, e.to_token_stream())
    }

    /// The rank of an expression that depends on neither the state nor the
    /// parameters, if it is known.
    fn inactive_rank(&self, e: &syn::Expr) -> Option<usize> {
        match e {
            syn::Expr::Lit(_) => Some(0),
            syn::Expr::Paren(p) => self.inactive_rank(&p.expr),
            syn::Expr::Group(g) => self.inactive_rank(&g.expr),
            syn::Expr::Path(p) => match self.lookup(&p.path.get_ident()?.to_string())? {
                Binding::Inactive { rank } => *rank,
                _ => None,
            },
            syn::Expr::Binary(b) => {
                let (l, r) = (self.inactive_rank(&b.left)?, self.inactive_rank(&b.right)?);
                if comparison(&b.op) {
                    Some(0)
                } else {
                    Some(l.max(r))
                }
            }
            syn::Expr::Unary(u) => self.inactive_rank(&u.expr),
            syn::Expr::MethodCall(m) => self.inactive_rank(&m.receiver),
            syn::Expr::Cast(c) => self.inactive_rank(&c.expr),
            syn::Expr::Index(i) => match &*i.index {
                syn::Expr::Range(_) => self.inactive_rank(&i.expr),
                _ => self.inactive_rank(&i.expr)?.checked_sub(1),
            },
            syn::Expr::Block(b) => match b.block.stmts.as_slice() {
                [syn::Stmt::Expr(tail, None)] => self.inactive_rank(tail),
                _ => None,
            },
            syn::Expr::If(i) => match i.then_branch.stmts.as_slice() {
                [syn::Stmt::Expr(tail, None)] => self.inactive_rank(tail),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value of a block (its statements written, its tail the value).
    fn block_value(&mut self, block: &syn::Block) -> Option<Value> {
        let (last, stmts) = block.stmts.split_last()?;
        for stmt in stmts {
            self.statement(stmt)?;
        }
        let syn::Stmt::Expr(tail, None) = last else {
            return None;
        };
        let tail = strip(tail);
        if let syn::Expr::Array(a) = tail {
            if self.inactive(tail)? {
                return Some(Value::One(self.expr(tail)?));
            }
            let nodes = a
                .elems
                .iter()
                .map(|e| self.expr(e))
                .collect::<Option<Vec<_>>>()?;
            if nodes.iter().all(|n| n.rank == Some(0)) {
                return Some(Value::Elements(nodes));
            }
            return None;
        }
        Some(Value::One(self.expr(tail)?))
    }

    fn statement(&mut self, stmt: &syn::Stmt) -> Option<()> {
        let syn::Stmt::Local(local) = stmt else {
            return None;
        };
        let init = local.init.as_ref()?;
        if init.diverge.is_some() {
            return None;
        }
        let (ident, ty) = match &local.pat {
            syn::Pat::Ident(i) => (i, None),
            syn::Pat::Type(t) => match &*t.pat {
                syn::Pat::Ident(i) => (i, Some(&*t.ty)),
                _ => return None,
            },
            _ => return None,
        };
        if ident.by_ref.is_some() || ident.mutability.is_some() || ident.subpat.is_some() {
            return None;
        }
        let name = ident.ident.to_string();
        if self.inactive(&init.expr)? {
            self.emit(&stmt.to_token_stream().to_string());
            let rank = match ty {
                Some(ty) => rank_of_type(ty),
                None => self.inactive_rank(&init.expr),
            };
            self.env.push((name, Binding::Inactive { rank }));
            return Some(());
        }
        let node = self.expr(&init.expr)?;
        let rank = node.rank?;
        if let Some(ty) = ty {
            let f64s = ty.to_token_stream().to_string().replace(' ', "");
            let expected = if rank == 0 { "f64" } else { "[f64;" };
            if !f64s.starts_with(expected) || rank_of_type(ty) != Some(rank) {
                return None;
            }
        }
        self.emit(&format!("let {name} = {};", node.value));
        let binding = match node.tangent {
            Tangent::Zero => Binding::Inactive { rank: Some(rank) },
            Tangent::Var(tangent) => Binding::Active { tangent, rank },
        };
        self.env.push((name, binding));
        Some(())
    }

    /// The node of `e`, its statements written.
    fn expr(&mut self, e: &syn::Expr) -> Option<Node> {
        let e = strip(e);
        if self.inactive(e)? {
            return Some(Node {
                value: format!("({})", e.to_token_stream()),
                tangent: Tangent::Zero,
                rank: self.inactive_rank(e),
            });
        }
        match e {
            syn::Expr::Path(p) => {
                let name = p.path.get_ident()?.to_string();
                let Binding::Active { tangent, rank } = self.lookup(&name)?.clone() else {
                    return None;
                };
                Some(Node {
                    value: name,
                    tangent: Tangent::Var(tangent),
                    rank: Some(rank),
                })
            }
            syn::Expr::Index(i) => self.index(i),
            syn::Expr::Binary(b) => self.binary(b),
            syn::Expr::Unary(u) => self.unary(u),
            syn::Expr::MethodCall(m) => self.method(m),
            syn::Expr::Array(a) => self.array(a),
            syn::Expr::If(i) => self.if_else(i),
            _ => None,
        }
    }

    fn index(&mut self, i: &syn::ExprIndex) -> Option<Node> {
        let base = self.expr(&i.expr)?;
        if !self.inactive(&i.index)? {
            return None;
        }
        let index = i.index.to_token_stream().to_string();
        // A slice (`a[i..i + N]`) keeps the rank; an index takes one off.
        let rank = match &*i.index {
            syn::Expr::Range(_) => base.rank?,
            _ => base.rank?.checked_sub(1)?,
        };
        let value = self.bind("v", &format!("{}[{index}]", base.value));
        let tangent = self.linear(base.tangent, |t| format!("{t}[{index}]"));
        Some(Node {
            value,
            tangent,
            rank: Some(rank),
        })
    }

    fn unary(&mut self, u: &syn::ExprUnary) -> Option<Node> {
        if !matches!(u.op, syn::UnOp::Neg(_)) {
            return None;
        }
        let x = self.expr(&u.expr)?;
        let value = self.bind("v", &format!("-{}", x.value));
        let tangent = self.linear(x.tangent, |t| format!("-{t}"));
        Some(Node {
            value,
            tangent,
            rank: x.rank,
        })
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Option<Node> {
        use syn::BinOp::{Add, Div, Mul, Sub};
        let op = b.op.to_token_stream().to_string();
        let arithmetic = matches!(b.op, Add(_) | Sub(_) | Mul(_) | Div(_));
        if !arithmetic && !comparison(&b.op) {
            return None;
        }
        let l = self.expr(&b.left)?;
        let r = self.expr(&b.right)?;
        let value = self.bind("v", &format!("{} {op} {}", l.value, r.value));
        if comparison(&b.op) {
            return Some(Node {
                value,
                tangent: Tangent::Zero,
                rank: Some(0),
            });
        }
        let (lr, rr) = (l.rank?, r.rank?);
        if lr > 1 || rr > 1 {
            return None;
        }
        let (a, c) = (&l.value, &r.value);
        let text = match (&b.op, &l.tangent, &r.tangent) {
            (_, Tangent::Zero, Tangent::Zero) => None,
            (Add(_) | Sub(_), Tangent::Var(da), Tangent::Zero) => {
                if lr < rr {
                    return None;
                }
                return Some(self.node_with(value, Tangent::Var(da.clone()), lr.max(rr)));
            }
            (Add(_), Tangent::Zero, Tangent::Var(dc)) => {
                if rr < lr {
                    return None;
                }
                return Some(self.node_with(value, Tangent::Var(dc.clone()), lr.max(rr)));
            }
            (Sub(_), Tangent::Zero, Tangent::Var(dc)) => {
                if rr < lr {
                    return None;
                }
                Some(format!("-{dc}"))
            }
            (Add(_) | Sub(_), Tangent::Var(da), Tangent::Var(dc)) => {
                if lr != rr {
                    return None;
                }
                Some(format!("{da} {op} {dc}"))
            }
            (Mul(_), da, dc) => {
                let mut terms = Vec::new();
                if let Tangent::Var(dc) = dc {
                    // a * dc: `a` a float (any rank of c), or a vector with c a float.
                    match (lr, rr) {
                        (0, _) => terms.push(format!("{a} * {dc}")),
                        (1, 0) => terms.push(format!("outer({a}, {dc})")),
                        _ => return None,
                    }
                }
                if let Tangent::Var(da) = da {
                    match (lr, rr) {
                        (_, 0) => terms.push(format!("{c} * {da}")),
                        (0, 1) => terms.push(format!("outer({c}, {da})")),
                        _ => return None,
                    }
                }
                Some(terms.join(" + "))
            }
            (Div(_), da, dc) => {
                if rr != 0 {
                    return None;
                }
                match (da, dc) {
                    (Tangent::Var(da), Tangent::Zero) => Some(format!("{da} / {c}")),
                    (da, Tangent::Var(dc)) => {
                        let q_dc = if lr == 0 {
                            format!("{value} * {dc}")
                        } else {
                            format!("outer({value}, {dc})")
                        };
                        match da {
                            Tangent::Var(da) => Some(format!("({da} - {q_dc}) / {c}")),
                            Tangent::Zero => Some(format!("-({q_dc}) / {c}")),
                        }
                    }
                    (Tangent::Zero, Tangent::Zero) => None,
                }
            }
            _ => return None,
        };
        let tangent = match text {
            None => Tangent::Zero,
            Some(text) => Tangent::Var(self.bind("d", &text)),
        };
        Some(self.node_with(value, tangent, lr.max(rr)))
    }

    fn node_with(&self, value: String, tangent: Tangent, rank: usize) -> Node {
        Node {
            value,
            tangent,
            rank: Some(rank),
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Option<Node> {
        if m.turbofish.is_some() {
            return None;
        }
        let x = self.expr(&m.receiver)?;
        if x.rank != Some(0) {
            return None;
        }
        let mut args = Vec::new();
        for arg in &m.args {
            if !self.inactive(arg)? {
                return None;
            }
            args.push(format!("({})", arg.to_token_stream()));
        }
        let name = m.method.to_string();
        let (xv, v) = (x.value.clone(), self.fresh("v"));
        let Tangent::Var(dx) = &x.tangent else {
            return None;
        };
        // The tangent of `v = x.name(args)` from `x`'s, `dx`.
        let tangent = match (name.as_str(), args.as_slice()) {
            ("exp", []) => format!("{v} * {dx}"),
            ("exp_m1", []) => format!("({v} + 1.0) * {dx}"),
            ("ln", []) => format!("{dx} / {xv}"),
            ("ln_1p", []) => format!("{dx} / (1.0 + {xv})"),
            ("sqrt", []) => format!("{dx} / (2.0 * {v})"),
            ("sin", []) => format!("{xv}.cos() * {dx}"),
            ("cos", []) => format!("-{xv}.sin() * {dx}"),
            ("tanh", []) => format!("(1.0 - {v} * {v}) * {dx}"),
            ("recip", []) => format!("-({v} * {v}) * {dx}"),
            ("powi", [k]) => format!("({k} as f64 * {xv}.powi({k} - 1)) * {dx}"),
            ("powf", [k]) => format!("({k} * {xv}.powf({k} - 1.0)) * {dx}"),
            _ => return None,
        };
        self.emit(&format!("let {v} = {xv}.{name}({});", args.join(", ")));
        let tangent = Tangent::Var(self.bind("d", &tangent));
        Some(Node {
            value: v,
            tangent,
            rank: Some(0),
        })
    }

    fn array(&mut self, a: &syn::ExprArray) -> Option<Node> {
        let nodes = a
            .elems
            .iter()
            .map(|e| self.expr(e))
            .collect::<Option<Vec<_>>>()?;
        if nodes.iter().any(|n| n.rank != Some(0)) {
            return None;
        }
        let values: Vec<&str> = nodes.iter().map(|n| n.value.as_str()).collect();
        let value = self.bind("v", &format!("[{}]", values.join(", ")));
        let tangents: Vec<String> = nodes
            .iter()
            .map(|n| self.tangent_text(&n.tangent))
            .collect();
        let tangent = self.bind("d", &format!("[{}]", tangents.join(", ")));
        Some(Node {
            value,
            tangent: Tangent::Var(tangent),
            rank: Some(1),
        })
    }

    /// A float's tangent as an expression (`[0.0; D]` for zero).
    fn tangent_text(&self, t: &Tangent) -> String {
        match t {
            Tangent::Zero => format!("[0.0; {}]", self.d),
            Tangent::Var(v) => v.clone(),
        }
    }

    /// `if c { a } else { b }`: each branch written inside its block, the
    /// value and the tangent taken out of the pair it gives.
    fn if_else(&mut self, i: &syn::ExprIf) -> Option<Node> {
        let cond = self.expr(&i.cond)?;
        let (_, otherwise) = i.else_branch.as_ref()?;
        let then = self.branch(|w| match w.block_value(&i.then_branch)? {
            Value::One(n) => Some(n),
            Value::Elements(_) => None,
        })?;
        let other = self.branch(|w| match strip(otherwise) {
            syn::Expr::Block(b) if b.label.is_none() => match w.block_value(&b.block)? {
                Value::One(n) => Some(n),
                Value::Elements(_) => None,
            },
            other => w.expr(other),
        })?;
        let ((then_code, then_node), (other_code, other_node)) = (then, other);
        let rank = then_node
            .rank
            .filter(|r| Some(*r) == other_node.rank && *r == 0)?;
        let pair = |n: &Node, w: &Writer| format!("({}, {})", n.value, w.tangent_text(&n.tangent));
        let outer = self.indent.clone();
        let text = format!(
            "if {} {{\n{then_code}{outer}    {}\n{outer}}} else {{\n{other_code}{outer}    {}\n{outer}}}",
            cond.value,
            pair(&then_node, self),
            pair(&other_node, self),
        );
        let both = self.bind("p", &text);
        let value = self.bind("v", &format!("{both}.0"));
        let tangent = self.bind("d", &format!("{both}.1"));
        Some(Node {
            value,
            tangent: Tangent::Var(tangent),
            rank: Some(rank),
        })
    }

    /// Writes a branch with `write` into code of its own, one level deeper,
    /// its names out of scope after it.
    fn branch(
        &mut self,
        write: impl FnOnce(&mut Writer<'a>) -> Option<Node>,
    ) -> Option<(String, Node)> {
        let code = std::mem::take(&mut self.code);
        let scope = self.env.len();
        self.indent.push_str("    ");
        let node = write(self);
        self.indent.truncate(self.indent.len() - 4);
        self.env.truncate(scope);
        let inner = std::mem::replace(&mut self.code, code);
        Some((inner, node?))
    }

    /// The statements giving the coupled state's derivative from the
    /// right-hand side's value: `y'` then, for each parameter `j`, the
    /// column `S_j'` (its elements the `j`th of each row's tangent).
    fn output(&mut self, result: &Value, lengths: &Lengths) -> Option<String> {
        let Lengths { n, d, m, numbers } = lengths;
        let indent = self.indent.clone();
        match (result, *numbers) {
            (Value::Elements(nodes), Some((nn, dn))) if nn * dn <= MOST_WRITTEN_OUT => {
                if nodes.len() != nn {
                    return None;
                }
                let mut items: Vec<String> = nodes.iter().map(|n| n.value.clone()).collect();
                for j in 0..dn {
                    for node in nodes {
                        items.push(match &node.tangent {
                            Tangent::Zero => "0.0".to_owned(),
                            Tangent::Var(t) => format!("{t}[{j}]"),
                        });
                    }
                }
                Some(format!("{indent}[{}]\n", items.join(", ")))
            }
            (Value::One(node), Some((nn, dn))) if nn * dn <= MOST_WRITTEN_OUT => {
                let r = self.bind("r", &node.value);
                let mut items: Vec<String> = (0..nn).map(|i| format!("{r}[{i}]")).collect();
                if let Tangent::Var(t) = &node.tangent {
                    let rows: Vec<String> = (0..nn)
                        .map(|i| self.bind("t", &format!("{t}[{i}]")))
                        .collect();
                    for j in 0..dn {
                        for row in &rows {
                            items.push(format!("{row}[{j}]"));
                        }
                    }
                } else {
                    items.extend(std::iter::repeat_n("0.0".to_owned(), nn * dn));
                }
                Some(format!("{indent}[{}]\n", items.join(", ")))
            }
            _ => {
                let (value, tangent) = match result {
                    Value::One(node) => (node.value.clone(), node.tangent.clone()),
                    Value::Elements(nodes) => {
                        let values: Vec<&str> = nodes.iter().map(|n| n.value.as_str()).collect();
                        let tangents: Vec<String> = nodes
                            .iter()
                            .map(|n| self.tangent_text(&n.tangent))
                            .collect();
                        let t = self.bind("t", &format!("[{}]", tangents.join(", ")));
                        (format!("[{}]", values.join(", ")), Tangent::Var(t))
                    }
                };
                let r = self.bind("r", &value);
                let t = match tangent {
                    Tangent::Zero => self.bind("t", &format!("[[0.0; {d}]; {n}]")),
                    Tangent::Var(t) => t,
                };
                Some(format!(
                    "{indent}let mut {PREFIX}out = [0.0; {m}];
{indent}let mut {PREFIX}i: usize = 0;
{indent}while {PREFIX}i < {n} {{
{indent}    {PREFIX}out[{PREFIX}i] = {r}[{PREFIX}i];
{indent}    let mut {PREFIX}j: usize = 0;
{indent}    while {PREFIX}j < {d} {{
{indent}        {PREFIX}out[{n} + {PREFIX}j * {n} + {PREFIX}i] = {t}[{PREFIX}i][{PREFIX}j];
{indent}        {PREFIX}j += 1;
{indent}    }}
{indent}    {PREFIX}i += 1;
{indent}}}
{indent}{PREFIX}out
"
                ))
            }
        }
    }
}

/// `e` without the parentheses and invisible groups around it.
fn strip(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip(&p.expr),
        syn::Expr::Group(g) => strip(&g.expr),
        _ => e,
    }
}

fn comparison(op: &syn::BinOp) -> bool {
    use syn::BinOp::{Eq, Ge, Gt, Le, Lt, Ne};
    matches!(op, Lt(_) | Le(_) | Gt(_) | Ge(_) | Eq(_) | Ne(_))
}
