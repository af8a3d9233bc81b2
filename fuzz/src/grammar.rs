//! A program generator driven by fuzzer bytes: functions whose bodies are
//! mostly well typed (so that they get past the checker into the lowering),
//! with a pinch of ill-typed or extreme choices (huge literals, wrong types,
//! deep nesting) so that the checker's rejections are exercised too.

use arbitrary::Unstructured;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Ty {
    I64,
    I32,
    Usize,
    F64,
    Bool,
    /// `[f64; n]`
    Arr(usize),
}

impl Ty {
    fn name(self) -> String {
        match self {
            Ty::I64 => "i64".into(),
            Ty::I32 => "i32".into(),
            Ty::Usize => "usize".into(),
            Ty::F64 => "f64".into(),
            Ty::Bool => "bool".into(),
            Ty::Arr(n) => format!("[f64; {n}]"),
        }
    }

    fn is_int(self) -> bool {
        matches!(self, Ty::I64 | Ty::I32 | Ty::Usize)
    }
}

struct Var {
    name: String,
    ty: Ty,
    mutable: bool,
}

struct Func {
    name: String,
    params: Vec<Ty>,
    ret: Ty,
}

/// The generator's state: the input left, the text so far, what is in scope.
struct Gen<'a, 'b> {
    u: &'b mut Unstructured<'a>,
    out: String,
    scopes: Vec<Vec<Var>>,
    funcs: Vec<Func>,
    depth: usize,
    loops: usize,
    fresh: usize,
}

/// A program generated from `data`.
pub fn program(data: &[u8]) -> String {
    let mut u = Unstructured::new(data);
    let mut g = Gen {
        u: &mut u,
        out: String::new(),
        scopes: Vec::new(),
        funcs: Vec::new(),
        depth: 0,
        loops: 0,
        fresh: 0,
    };
    let count = 1 + g.pick(4);
    for i in 0..count {
        g.function(i);
    }
    g.out
}

impl Gen<'_, '_> {
    /// A number in `0..n` (0 once the input is used up).
    fn pick(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.u.int_in_range(0..=n - 1).unwrap_or(0)
    }

    /// True with probability about `1/n`.
    fn rarely(&mut self, n: usize) -> bool {
        self.pick(n) == 1
    }

    fn ty(&mut self) -> Ty {
        match self.pick(7) {
            0 | 6 => Ty::F64,
            1 => Ty::I64,
            2 => Ty::I32,
            3 => Ty::Usize,
            4 => Ty::Bool,
            _ => Ty::Arr(1 + self.pick(4)),
        }
    }

    fn fresh_name(&mut self) -> String {
        self.fresh += 1;
        format!("v{}", self.fresh)
    }

    fn vars_of(&self, ty: Ty, mutable: bool) -> Vec<String> {
        self.scopes
            .iter()
            .flatten()
            .filter(|v| v.ty == ty && (v.mutable || !mutable))
            .map(|v| v.name.clone())
            .collect()
    }

    fn function(&mut self, index: usize) {
        let name = format!("f{index}");
        let params: Vec<Ty> = (0..self.pick(4)).map(|_| self.ty()).collect();
        let ret = self.ty();
        let mut scope = Vec::new();
        let mut list = Vec::new();
        for (i, ty) in params.iter().enumerate() {
            let mutable = self.rarely(3);
            let p = format!("p{i}");
            list.push(format!("{}{p}: {}", if mutable { "mut " } else { "" }, ty.name()));
            scope.push(Var { name: p, ty: *ty, mutable });
        }
        self.out
            .push_str(&format!("fn {name}({}) -> {} {{\n", list.join(", "), ret.name()));
        // Calls may go to earlier functions and, rarely, to this one.
        if self.rarely(6) {
            self.funcs.push(Func { name: name.clone(), params: params.clone(), ret });
        }
        self.scopes = vec![scope];
        self.block_body(ret);
        self.out.push_str("}\n");
        if !self.funcs.iter().any(|f| f.name == name) {
            self.funcs.push(Func { name, params, ret });
        }
    }

    /// Statements then a final expression of type `ty`.
    fn block_body(&mut self, ty: Ty) {
        for _ in 0..self.pick(5) {
            self.statement();
        }
        let e = self.expr(ty);
        self.out.push_str(&e);
        self.out.push('\n');
    }

    fn statement(&mut self) {
        self.depth += 1;
        let deep = self.depth > 4;
        match if deep { self.pick(3) } else { self.pick(9) } {
            0 | 1 => {
                let ty = self.ty();
                let mutable = self.pick(2) == 0;
                let e = self.expr(ty);
                let name = self.fresh_name();
                let annotated = if self.pick(2) == 0 { format!(": {}", ty.name()) } else { String::new() };
                let m = if mutable { "mut " } else { "" };
                self.out.push_str(&format!("let {m}{name}{annotated} = {e};\n"));
                self.scopes.last_mut().unwrap().push(Var { name, ty, mutable });
            }
            2 => self.assignment(),
            3 => {
                let c = self.expr(Ty::Bool);
                self.out.push_str(&format!("if {c} {{\n"));
                self.nested(|g| g.statement());
                self.out.push_str("} else {\n");
                self.nested(|g| g.statement());
                self.out.push_str("}\n");
            }
            4 => {
                let i = self.fresh_name();
                let end = self.pick(5);
                self.out.push_str(&format!("for {i} in 0..{end} {{\n"));
                self.loops += 1;
                self.scopes.push(vec![Var { name: i, ty: Ty::Usize, mutable: false }]);
                self.statement();
                self.scopes.pop();
                self.loops -= 1;
                self.out.push_str("}\n");
            }
            5 => {
                let c = self.fresh_name();
                let end = self.pick(4);
                self.out
                    .push_str(&format!("let mut {c} = 0;\nwhile {c} < {end} {{\n{c} += 1;\n"));
                self.loops += 1;
                self.nested(|g| g.statement());
                self.loops -= 1;
                self.out.push_str("}\n");
            }
            6 if self.loops > 0 => {
                let word = if self.pick(2) == 0 { "break" } else { "continue" };
                let c = self.expr(Ty::Bool);
                self.out.push_str(&format!("if {c} {{ {word}; }}\n"));
            }
            7 => {
                let c = self.expr(Ty::Bool);
                self.out.push_str(&format!("assert!({c});\n"));
            }
            _ => {
                let e = self.expr(Ty::F64);
                self.out.push_str(&format!("let _ = {e};\n"));
            }
        }
        self.depth -= 1;
    }

    fn nested(&mut self, body: impl FnOnce(&mut Self)) {
        self.scopes.push(Vec::new());
        body(self);
        self.scopes.pop();
    }

    fn assignment(&mut self) {
        let ty = self.ty();
        let targets = self.vars_of(ty, true);
        if targets.is_empty() {
            return;
        }
        let target = targets[self.pick(targets.len())].clone();
        match ty {
            Ty::Arr(n) if self.pick(2) == 0 => {
                let i = self.index(n);
                let e = self.expr(Ty::F64);
                self.out.push_str(&format!("{target}[{i}] = {e};\n"));
            }
            Ty::Bool => {
                let e = self.expr(ty);
                self.out.push_str(&format!("{target} = {e};\n"));
            }
            _ => {
                let op = ["=", "+=", "-=", "*=", "/="][self.pick(5)];
                let e = self.expr(ty);
                self.out.push_str(&format!("{target} {op} {e};\n"));
            }
        }
    }

    /// An index into an array of length `n`: a literal in range or not, or a `usize` expression.
    fn index(&mut self, n: usize) -> String {
        match self.pick(4) {
            0 => format!("{}", self.pick(n + 1)),
            1 => self.expr(Ty::Usize),
            _ => format!("{}", self.pick(n)),
        }
    }

    fn expr(&mut self, ty: Ty) -> String {
        self.depth += 1;
        let e = if self.depth > 6 || self.u.is_empty() {
            self.leaf(ty)
        } else if self.rarely(100) {
            // An expression of some other type, for the checker's errors.
            let other = self.ty();
            self.expr(other)
        } else {
            self.compound(ty)
        };
        self.depth -= 1;
        e
    }

    fn leaf(&mut self, ty: Ty) -> String {
        let vars = self.vars_of(ty, false);
        if !vars.is_empty() && self.pick(3) != 0 {
            return vars[self.pick(vars.len())].clone();
        }
        self.literal(ty)
    }

    fn literal(&mut self, ty: Ty) -> String {
        let extreme = self.rarely(60);
        match ty {
            Ty::I64 | Ty::I32 | Ty::Usize => {
                if extreme {
                    let big = ["9223372036854775807", "9223372036854775808", "4294967296", "2147483648", "18446744073709551616", "1e29", "0"];
                    return big[self.pick(big.len())].to_string();
                }
                let suffix = if self.pick(3) == 0 { ty.name() } else { String::new() };
                format!("{}{suffix}", self.pick(20))
            }
            Ty::F64 => {
                if extreme {
                    let odd = ["1e308", "1e309", "0.0", "-0.0", "1e-320", "f64::INFINITY", "f64::NAN"];
                    return odd[self.pick(odd.len())].to_string();
                }
                format!("{}.{}", self.pick(10), self.pick(100))
            }
            Ty::Bool => if self.pick(2) == 0 { "true" } else { "false" }.to_string(),
            Ty::Arr(n) => {
                if self.pick(2) == 0 {
                    format!("[{}; {n}]", self.expr(Ty::F64))
                } else {
                    let items: Vec<String> = (0..n).map(|_| self.expr(Ty::F64)).collect();
                    format!("[{}]", items.join(", "))
                }
            }
        }
    }

    fn call_returning(&mut self, ty: Ty) -> Option<String> {
        let candidates: Vec<usize> = (0..self.funcs.len()).filter(|&i| self.funcs[i].ret == ty).collect();
        if candidates.is_empty() {
            return None;
        }
        let f = candidates[self.pick(candidates.len())];
        let (name, params) = (self.funcs[f].name.clone(), self.funcs[f].params.clone());
        let args: Vec<String> = params.into_iter().map(|p| self.expr(p)).collect();
        Some(format!("{name}({})", args.join(", ")))
    }

    fn compound(&mut self, ty: Ty) -> String {
        let choice = self.pick(8);
        if choice == 0 {
            if let Some(call) = self.call_returning(ty) {
                return call;
            }
        }
        if choice == 1 {
            let c = self.expr(Ty::Bool);
            let (a, b) = (self.expr(ty), self.expr(ty));
            return format!("if {c} {{ {a} }} else {{ {b} }}");
        }
        if choice == 2 && self.depth < 4 {
            let mut body = String::new();
            std::mem::swap(&mut body, &mut self.out);
            self.nested(|g| g.block_body(ty));
            std::mem::swap(&mut body, &mut self.out);
            return format!("{{\n{body}}}");
        }
        match ty {
            t if t.is_int() => self.int_expr(t),
            Ty::F64 => self.float_expr(),
            Ty::Bool => self.bool_expr(),
            Ty::Arr(n) => self.array_expr(n),
            _ => self.leaf(ty),
        }
    }

    fn int_expr(&mut self, ty: Ty) -> String {
        match self.pick(5) {
            0 => {
                let from = [Ty::I64, Ty::I32, Ty::Usize, Ty::F64][self.pick(4)];
                format!("({} as {})", self.expr(from), ty.name())
            }
            1 if ty == Ty::Usize => {
                let n = 1 + self.pick(4);
                let f = ["argmax", "argmin"][self.pick(2)];
                format!("{f}({})", self.expr(Ty::Arr(n)))
            }
            2 if ty != Ty::Usize => format!("-{}", self.expr(ty)),
            _ => {
                let op = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"][self.pick(10)];
                format!("({} {op} {})", self.expr(ty), self.expr(ty))
            }
        }
    }

    fn float_expr(&mut self) -> String {
        match self.pick(7) {
            0 => {
                let m = ["sqrt", "exp", "ln", "abs", "sin", "tanh", "floor", "recip", "ln_1p", "exp_m1"][self.pick(10)];
                format!("{}.{m}()", self.expr(Ty::F64))
            }
            1 => {
                let n = 1 + self.pick(4);
                let f = ["sum", "mean", "max", "min", "logsumexp"][self.pick(5)];
                format!("{f}({})", self.expr(Ty::Arr(n)))
            }
            2 => {
                let n = 1 + self.pick(4);
                let (a, b) = (self.expr(Ty::Arr(n)), self.expr(Ty::Arr(n)));
                format!("dot({a}, {b})")
            }
            3 => {
                let n = 1 + self.pick(4);
                let a = self.expr(Ty::Arr(n));
                let i = self.index(n);
                format!("{a}[{i}]")
            }
            4 => {
                let from = [Ty::I64, Ty::I32, Ty::Usize, Ty::F64][self.pick(4)];
                format!("({} as f64)", self.expr(from))
            }
            5 => {
                let (a, b) = (self.expr(Ty::F64), self.expr(Ty::F64));
                let m = ["powf", "max", "min"][self.pick(3)];
                format!("{a}.{m}({b})")
            }
            _ => {
                let op = ["+", "-", "*", "/", "%"][self.pick(5)];
                format!("({} {op} {})", self.expr(Ty::F64), self.expr(Ty::F64))
            }
        }
    }

    fn bool_expr(&mut self) -> String {
        match self.pick(4) {
            0 => {
                let op = ["&&", "||", "==", "!=", "^"][self.pick(5)];
                format!("({} {op} {})", self.expr(Ty::Bool), self.expr(Ty::Bool))
            }
            1 => format!("!{}", self.expr(Ty::Bool)),
            _ => {
                let t = [Ty::I64, Ty::I32, Ty::Usize, Ty::F64][self.pick(4)];
                let op = ["<", "<=", ">", ">=", "==", "!="][self.pick(6)];
                format!("({} {op} {})", self.expr(t), self.expr(t))
            }
        }
    }

    fn array_expr(&mut self, n: usize) -> String {
        match self.pick(4) {
            0 => {
                let op = ["+", "-", "*", "/"][self.pick(4)];
                format!("({} {op} {})", self.expr(Ty::Arr(n)), self.expr(Ty::Arr(n)))
            }
            1 => {
                let f = ["softmax", "sigmoid", "softplus"][self.pick(3)];
                format!("{f}({})", self.expr(Ty::Arr(n)))
            }
            2 => format!("({} * {})", self.expr(Ty::Arr(n)), self.expr(Ty::F64)),
            _ => self.literal(Ty::Arr(n)),
        }
    }
}
