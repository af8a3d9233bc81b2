//! The generated program as a syntax tree we own: types, functions,
//! statements and typed expressions, and the printer that writes them as
//! autobatch source text. Every expression carries its type, so the
//! shrinker can replace any expression by a constant of the same type.

use std::fmt::Write;

/// Length of every `[i64; N]` array in generated programs.
pub const INT_ARRAY_LEN: usize = 4;
/// Length of every `[f64; N]` array in generated programs.
pub const FLOAT_ARRAY_LEN: usize = 3;
/// Items of the static `MS: [[[f64; 3]; 3]; 2]`.
pub const MATRIX_STACK_LEN: usize = 2;
/// Rows of the coefficients `[[f64; 3]; 2]` of an ODE call.
pub const ODE_ROWS: usize = 2;
/// The symbolic dimension of the ragged arrays: only batched entry
/// arguments fix it, so it may differ from member to member.
pub const RAGGED_DIM: &str = "L";
/// The second ragged dimension, of the rows of `[[f64; D]; L]` and of
/// `[f64; D]`: each member its own, independent of its `L`.
pub const INNER_RAGGED_DIM: &str = "D";

/// The types a generated program uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    Float,
    Bool,
    IntArray,
    FloatArray,
    /// `i32`: wraps at 32 bits.
    I32,
    /// `usize`: unsigned, wraps at 64 bits.
    Usize,
    /// `f32`.
    F32,
    /// `[f32; 3]`.
    F32Array,
    /// `[bool; 3]`: conditions of an elementwise `select`.
    BoolArray,
    /// `[[f32; 3]; 3]`: products of `f32` (`matvec`, `matmul`, ...).
    F32Matrix,
    /// `(i64, f64)`.
    Pair,
    /// `[i64; L]`: a ragged array (each member its own length).
    IntRagged,
    /// `[f64; L]`.
    FloatRagged,
    /// `[f32; L]`.
    F32Ragged,
    /// `[[f64; 3]; L]`: a ragged number of rows of `[f64; 3]`.
    RowsRagged,
    /// `[f64; D]`: ragged in the second dimension `D`.
    ColsRagged,
    /// `[[f64; D]; L]`: ragged in both dimensions.
    GridRagged,
    /// `[[f64; 3]; 3]`: only the static `M` (read by the differentiable
    /// helpers' loss: products with a static matrix).
    Matrix,
    /// `[[[f64; 3]; 3]; 2]`: only the static `MS`, whose items a member
    /// picks by its own index (`matvec(MS[i], v)`: products grouped by
    /// index in the batching strategies).
    MatrixStack,
    /// `[[f64; 3]; 2]`: only the coefficients of an ODE call held in a
    /// matrix (see `crate::differentiable`).
    TwoRows,
    /// `(f64, [f64; 3])`: only the coefficients of an ODE call held in a
    /// tuple, a scale and an array.
    ScaledArray,
}

impl Ty {
    /// The type as written in source.
    pub fn source(self) -> &'static str {
        match self {
            Ty::Int => "i64",
            Ty::Float => "f64",
            Ty::Bool => "bool",
            Ty::IntArray => "[i64; 4]",
            Ty::FloatArray => "[f64; 3]",
            Ty::I32 => "i32",
            Ty::Usize => "usize",
            Ty::F32 => "f32",
            Ty::F32Array => "[f32; 3]",
            Ty::BoolArray => "[bool; 3]",
            Ty::F32Matrix => "[[f32; 3]; 3]",
            Ty::Pair => "(i64, f64)",
            Ty::IntRagged => "[i64; L]",
            Ty::FloatRagged => "[f64; L]",
            Ty::F32Ragged => "[f32; L]",
            Ty::RowsRagged => "[[f64; 3]; L]",
            Ty::ColsRagged => "[f64; D]",
            Ty::GridRagged => "[[f64; D]; L]",
            Ty::Matrix => "[[f64; 3]; 3]",
            Ty::MatrixStack => "[[[f64; 3]; 3]; 2]",
            Ty::TwoRows => "[[f64; 3]; 2]",
            Ty::ScaledArray => "(f64, [f64; 3])",
        }
    }

    /// Whether the type is an array of the symbolic length `L`.
    pub fn is_ragged(self) -> bool {
        matches!(
            self,
            Ty::IntRagged | Ty::FloatRagged | Ty::F32Ragged | Ty::RowsRagged | Ty::GridRagged
        )
    }

    /// Whether the type mentions a ragged dimension (`L` or `D`).
    pub fn is_per_member(self) -> bool {
        self.is_ragged() || self == Ty::ColsRagged
    }

    /// The ragged dimension of the outermost axis, if it has one.
    pub fn outer_dim(self) -> Option<&'static str> {
        if self.is_ragged() {
            Some(RAGGED_DIM)
        } else if self == Ty::ColsRagged {
            Some(INNER_RAGGED_DIM)
        } else {
            None
        }
    }

    /// The element type of an array type (a row of `[[f64; 3]; L]`); the
    /// type itself otherwise.
    pub fn element(self) -> Ty {
        match self {
            Ty::IntArray | Ty::IntRagged => Ty::Int,
            Ty::FloatArray | Ty::FloatRagged | Ty::ColsRagged => Ty::Float,
            Ty::GridRagged => Ty::ColsRagged,
            Ty::F32Array | Ty::F32Ragged => Ty::F32,
            Ty::BoolArray => Ty::Bool,
            Ty::F32Matrix => Ty::F32Array,
            Ty::RowsRagged | Ty::Matrix | Ty::TwoRows => Ty::FloatArray,
            Ty::MatrixStack => Ty::Matrix,
            other => other,
        }
    }

    /// The scalar type of the elements (the type itself for a scalar).
    pub fn scalar(self) -> Ty {
        match self.element() {
            e if e == self => self,
            e => e.scalar(),
        }
    }

    /// The simplest value of the type: what the shrinker puts in place of an expression.
    pub fn zero(self) -> Expr {
        let kind = match self {
            Ty::Int => ExprKind::Int(0),
            Ty::Float => ExprKind::Float(0.0),
            Ty::Bool => ExprKind::Bool(false),
            Ty::IntArray => ExprKind::Array(vec![Ty::Int.zero(); INT_ARRAY_LEN]),
            Ty::FloatArray => ExprKind::Array(vec![Ty::Float.zero(); FLOAT_ARRAY_LEN]),
            Ty::I32 | Ty::Usize => ExprKind::Int(0),
            Ty::F32 => ExprKind::Float(0.0),
            Ty::F32Array => ExprKind::Array(vec![Ty::F32.zero(); FLOAT_ARRAY_LEN]),
            Ty::BoolArray => ExprKind::Array(vec![Ty::Bool.zero(); FLOAT_ARRAY_LEN]),
            Ty::F32Matrix => ExprKind::Array(vec![Ty::F32Array.zero(); FLOAT_ARRAY_LEN]),
            Ty::Pair => ExprKind::Pair(Box::new(Ty::Int.zero()), Box::new(Ty::Float.zero())),
            Ty::IntRagged
            | Ty::FloatRagged
            | Ty::F32Ragged
            | Ty::RowsRagged
            | Ty::ColsRagged
            | Ty::GridRagged => ExprKind::Fill(Box::new(self.element().zero())),
            Ty::Matrix => ExprKind::Array(vec![Ty::FloatArray.zero(); FLOAT_ARRAY_LEN]),
            Ty::MatrixStack => ExprKind::Array(vec![Ty::Matrix.zero(); MATRIX_STACK_LEN]),
            Ty::TwoRows => ExprKind::Array(vec![Ty::FloatArray.zero(); ODE_ROWS]),
            Ty::ScaledArray => {
                ExprKind::Pair(Box::new(Ty::Float.zero()), Box::new(Ty::FloatArray.zero()))
            }
        };
        Expr { ty: self, kind }
    }
}

/// A whole program: `usize` constants, optional statics, then functions;
/// the first function is the entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// `const NAME: usize = VALUE;` (the counts of some `pfor`s).
    pub consts: Vec<(String, usize)>,
    pub statics: Vec<Param>,
    pub functions: Vec<Function>,
    /// Whether the program declares the [`HOSTS`] (it calls some).
    pub hosts: bool,
}

/// The host primitives generated programs may call, as declared, with their
/// arity (every operand and the result are `f64`). The oracle registers
/// their functions (`crate::oracle::register_hosts`): `host_affine` one
/// member's call at a time, `host_square` batched.
pub const HOSTS: [(&str, &str, usize); 2] = [
    ("host_affine", "fn host_affine(x: f64, k: f64) -> f64;", 2),
    ("host_square", "fn host_square(x: f64) -> f64;", 1),
];

/// A named, typed parameter (or static).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: Ty,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub params: Vec<Param>,
    pub ret: Ty,
    pub body: Block,
}

/// Statements, then the value of the block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Expr,
}

/// Compound assignment operators on scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignOp {
    Set,
    Add,
    Sub,
    Mul,
}

impl AssignOp {
    pub fn source(self) -> &'static str {
        match self {
            AssignOp::Set => "=",
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `let mut name: ty = value;`
    Let { name: String, value: Expr },
    /// `name op= value;`, or with `slice` an array of a fixed length
    /// written through slices of it, as [`SlicePlace`] says.
    Assign {
        name: String,
        op: AssignOp,
        value: Expr,
        slice: Option<SlicePlace>,
    },
    /// `name[index] op= value;`
    SetIndex {
        name: String,
        index: Expr,
        op: AssignOp,
        value: Expr,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `let mut counter = 0; while counter < limit { counter += 1; body }`
    While {
        counter: String,
        limit: Expr,
        body: Vec<Stmt>,
    },
    /// `for var in start..end { body }`
    For {
        var: String,
        start: Expr,
        end: Expr,
        body: Vec<Stmt>,
    },
    /// `if cond { break; }` or `if cond { break value; }`
    BreakIf { cond: Expr, value: Option<Expr> },
    /// `if cond { continue; }`
    ContinueIf { cond: Expr },
    /// `if cond { return value; }`
    ReturnIf { cond: Expr, value: Expr },
    /// `assert!(cond, "...");`
    Assert { cond: Expr },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub fn source(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Rem => "%",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            Shl => "<<",
            Shr => ">>",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Eq => "==",
            Ne => "!=",
            And => "&&",
            Or => "||",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

/// Builtins written as functions (`sum(a)`) or methods (`x.abs()`): the
/// language's own, from its table of operations (the generator uses a few).
pub use autobatch::ops::Builtin;

/// An expression and its type.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub ty: Ty,
    pub kind: ExprKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    Var(String),
    /// `(d - step)`: the depth argument of a call that lowers the depth.
    DepthStep(i64),
    Unary {
        op: UnOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Builtin {
        builtin: Builtin,
        args: Vec<Expr>,
    },
    /// `operand as ty` (the expression's own type).
    Cast {
        operand: Box<Expr>,
    },
    If {
        cond: Box<Expr>,
        then: Box<Block>,
        otherwise: Box<Block>,
    },
    /// `({ let mut counter = 0; loop { if counter >= limit { break exit; } counter += 1; body } })`
    Loop {
        counter: String,
        limit: Box<Expr>,
        body: Vec<Stmt>,
        exit: Box<Expr>,
    },
    Call {
        callee: String,
        args: Vec<Expr>,
    },
    /// `name(args)` of one of the [`HOSTS`] (host primitives the oracle
    /// registers functions for); of type `f64`.
    HostCall {
        name: &'static str,
        args: Vec<Expr>,
    },
    /// `name(args)` of a library function (a distribution's density or
    /// draw, a compound special function; see `crate::generate`'s
    /// `LIBRARY`); of type `f64`.
    Library {
        name: &'static str,
        args: Vec<Expr>,
    },
    /// `({ let (caught, value) = catch(call); if caught { value } else { fallback } })`:
    /// `call` is a `Call`; a member that faults inside it goes on with `fallback`.
    Catch {
        call: Box<Expr>,
        fallback: Box<Expr>,
    },
    /// `({ let joined = join(c0, c1, ..); joined.i + joined.j + .. })`:
    /// the calls (each a `Call`) run as instances; the value adds up the
    /// results of the calls listed in `picks` (those of the expression's
    /// type; field by field for a pair).
    Join {
        calls: Vec<Expr>,
        picks: Vec<usize>,
    },
    /// `map(callee, [d0, d1, ..], args..)` or `pfor::<N>(callee, args..)`
    /// (`form`), then `use_` makes a value of the expression's type of the
    /// array (or pair of arrays) of the results.
    Instances {
        callee: String,
        form: InstanceForm,
        args: Vec<Expr>,
        use_: InstanceUse,
    },
    /// `jacobian(function, point, data..)[row]`: a row of the Jacobian of
    /// a differentiable helper `[f64; 3] -> [f64; 3]` (see
    /// [`crate::differentiable`]), with its data argument if it takes one;
    /// of type `[f64; 3]`.
    Jacobian {
        function: String,
        point: Box<Expr>,
        data: Vec<Expr>,
        row: usize,
    },
    /// `grad(function, point, data..)`: the derivative of the scalar helper
    /// `ds(a: f64, c: f64) -> f64` in `a` at the point, `c` being the data
    /// argument; of type `f64`. With `field`, `value_and_grad(..).field`
    /// instead: the value (`0`) or the derivative (`1`).
    Grad {
        function: String,
        point: Box<Expr>,
        data: Vec<Expr>,
        field: Option<u8>,
    },
    Index {
        array: Box<Expr>,
        index: Box<Expr>,
    },
    /// `len` of `items` from `start`, the range written as `form` says:
    /// an array of the node's type.
    Slice {
        items: Vec<Expr>,
        start: usize,
        len: usize,
        form: SliceForm,
    },
    Array(Vec<Expr>),
    /// `[value; L]` (`[value; D]` when of type `[f64; D]`): a ragged
    /// array of each member's own length.
    Fill(Box<Expr>),
    /// `((array).len() as i64)`.
    Len(Box<Expr>),
    /// `(L as i64)` or `(D as i64)`: a ragged dimension as a value.
    Dim(&'static str),
    Pair(Box<Expr>, Box<Expr>),
    Field {
        pair: Box<Expr>,
        field: u8,
    },
}

/// How an [`ExprKind::Slice`] writes its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceForm {
    /// `[start..start + len]`.
    Offset,
    /// `[start..end]`, two numbers.
    Between,
    /// `[(start as i32)..(start as i32) + len]`: the start an `i32`
    /// expression, written twice.
    Computed,
    /// `[..len]` (`start` is 0).
    Prefix,
}

/// How a [`Stmt::Assign`] to an array of a fixed length writes it through
/// slices: the value is computed once, before any item is written.
#[derive(Clone, Debug, PartialEq)]
pub enum SlicePlace {
    /// The whole array as one slice: `name[0..len] op= value;`, the range
    /// in `form`.
    Whole(SliceForm),
    /// The value bound to `temp`, then written in two parts split at `at`
    /// (`0 < at < len`): `let temp: T = value; name[0..at] op= temp[0..at];
    /// name[at..len] op= temp[at..len];`, the ranges in `form` (the second
    /// as `Between` where `form` is `Prefix`).
    Split {
        form: SliceForm,
        at: usize,
        temp: String,
    },
}

/// How the instances of [`ExprKind::Instances`] get their depth argument.
#[derive(Clone, Debug, PartialEq)]
pub enum InstanceForm {
    /// `map` over an array of depths (`d`, `(d - 1)`, ...), one instance per element.
    Map { depths: Vec<Expr> },
    /// `pfor::<count>`: instance `k` gets depth `k`; the count is written
    /// as the constant `name` when given.
    Pfor { count: usize, name: Option<String> },
    /// `map` over `[depth; L]`: as many instances as the member's own `L`,
    /// each given `depth`.
    MapRagged { depth: Box<Expr> },
    /// `pfor::<L>`: the member's own `L` instances, instance `k` given depth `k`.
    PforRagged,
}

impl InstanceForm {
    /// The number of instances; `None` for a ragged count (`L`).
    pub fn count(&self) -> Option<usize> {
        match self {
            InstanceForm::Map { depths } => Some(depths.len()),
            InstanceForm::Pfor { count, .. } => Some(*count),
            InstanceForm::MapRagged { .. } | InstanceForm::PforRagged => None,
        }
    }
}

/// What is made of the results of a `map` or `pfor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceUse {
    /// The array itself (`[i64; 4]`, `[f64; 3]`).
    Whole,
    /// `sum(..)` of an array of scalars.
    Sum,
    /// Element `k` (in bounds).
    Index(usize),
    /// `sum(..)` of field `0` or `1` of the pair of arrays that a callee
    /// returning a pair gives.
    SumField(u8),
}

impl Expr {
    pub fn new(ty: Ty, kind: ExprKind) -> Expr {
        Expr { ty, kind }
    }
    pub fn int(v: i64) -> Expr {
        Expr::new(Ty::Int, ExprKind::Int(v))
    }
    pub fn var(name: &str, ty: Ty) -> Expr {
        Expr::new(ty, ExprKind::Var(name.to_owned()))
    }
    pub fn binary(ty: Ty, op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::new(
            ty,
            ExprKind::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
        )
    }
}

/// Writes a program as source text.
pub fn print_program(program: &Program) -> String {
    let mut out = Printer {
        out: String::new(),
        indent: 0,
    };
    out.program(program);
    out.out
}

struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn program(&mut self, program: &Program) {
        for (name, value) in &program.consts {
            self.line(&format!("const {name}: usize = {value};"));
        }
        if !program.statics.is_empty() || program.hosts {
            self.line("extern \"autobatch\" {");
            for s in &program.statics {
                self.line(&format!("    static {}: {};", s.name, s.ty.source()));
            }
            if program.hosts {
                for (_, declaration, _) in HOSTS {
                    self.line(&format!("    {declaration}"));
                }
            }
            self.line("}");
        }
        for f in &program.functions {
            let params: Vec<String> = f
                .params
                .iter()
                .map(|p| format!("{}: {}", p.name, p.ty.source()))
                .collect();
            self.line(&format!(
                "fn {}({}) -> {} {{",
                f.name,
                params.join(", "),
                f.ret.source()
            ));
            self.block_body(&f.body);
            self.line("}");
        }
    }

    fn block_body(&mut self, block: &Block) {
        self.indent += 1;
        self.stmts(&block.stmts);
        let tail = expr(&block.tail);
        self.line(&tail);
        self.indent -= 1;
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn nested(&mut self, open: &str, body: &[Stmt]) {
        self.line(open);
        self.indent += 1;
        self.stmts(body);
        self.indent -= 1;
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Let { name, value } => self.line(&format!(
                "let mut {name}: {} = {};",
                value.ty.source(),
                expr(value)
            )),
            Stmt::Assign {
                name,
                op,
                value,
                slice,
            } => match slice {
                None => self.line(&format!("{name} {} {};", op.source(), expr(value))),
                Some(SlicePlace::Whole(form)) => self.line(&format!(
                    "{name}[{}] {} {};",
                    range(*form, 0, fixed_len(value.ty)),
                    op.source(),
                    expr(value)
                )),
                Some(SlicePlace::Split { form, at, temp }) => {
                    let len = fixed_len(value.ty);
                    let rest = match form {
                        SliceForm::Prefix => SliceForm::Between,
                        other => *other,
                    };
                    self.line(&format!(
                        "let {temp}: {} = {};",
                        value.ty.source(),
                        expr(value)
                    ));
                    for part in [range(*form, 0, *at), range(rest, *at, len - at)] {
                        self.line(&format!("{name}[{part}] {} {temp}[{part}];", op.source()));
                    }
                }
            },
            Stmt::SetIndex {
                name,
                index,
                op,
                value,
            } => self.line(&format!(
                "{name}[{}] {} {};",
                expr(index),
                op.source(),
                expr(value)
            )),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.nested(&format!("if {} {{", expr(cond)), then);
                self.nested("} else {", otherwise);
                self.line("}");
            }
            Stmt::While {
                counter,
                limit,
                body,
            } => {
                self.line(&format!("let mut {counter}: i64 = 0;"));
                self.line(&format!("while {counter} < {} {{", expr(limit)));
                self.indent += 1;
                self.line(&format!("{counter} += 1;"));
                self.stmts(body);
                self.indent -= 1;
                self.line("}");
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                self.nested(
                    &format!("for {var} in {}..{} {{", expr(start), expr(end)),
                    body,
                );
                self.line("}");
            }
            Stmt::BreakIf { cond, value: None } => {
                self.line(&format!("if {} {{ break; }}", expr(cond)))
            }
            Stmt::BreakIf {
                cond,
                value: Some(v),
            } => self.line(&format!("if {} {{ break {}; }}", expr(cond), expr(v))),
            Stmt::ContinueIf { cond } => self.line(&format!("if {} {{ continue; }}", expr(cond))),
            Stmt::ReturnIf { cond, value } => {
                self.line(&format!("if {} {{ return {}; }}", expr(cond), expr(value)))
            }
            Stmt::Assert { cond } => self.line(&format!("assert!({}, \"fuzz\");", expr(cond))),
        }
    }
}

/// An expression on one line: every compound expression is parenthesized,
/// so precedence never matters.
pub fn expr(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, e);
    out
}

/// The suffix a literal of type `ty` is written with: none for the
/// default types (`i64`, `f64`).
fn suffix(ty: Ty) -> &'static str {
    match ty {
        Ty::I32 => "i32",
        Ty::Usize => "usize",
        Ty::F32 => "f32",
        _ => "",
    }
}

fn write_expr(out: &mut String, e: &Expr) {
    match &e.kind {
        // `i32` and `f32` literals carry their suffix.
        ExprKind::Int(v) if *v < 0 => write!(out, "({v}{})", suffix(e.ty)).unwrap_or(()),
        ExprKind::Int(v) => write!(out, "{v}{}", suffix(e.ty)).unwrap_or(()),
        ExprKind::Float(v) if *v < 0.0 => write!(out, "({v:?}{})", suffix(e.ty)).unwrap_or(()),
        ExprKind::Float(v) => write!(out, "{v:?}{}", suffix(e.ty)).unwrap_or(()),
        ExprKind::Bool(b) => write!(out, "{b}").unwrap_or(()),
        ExprKind::Var(name) => out.push_str(name),
        ExprKind::DepthStep(step) => write!(out, "(d - {step})").unwrap_or(()),
        ExprKind::Unary { op, operand } => {
            out.push_str(if *op == UnOp::Neg { "(-" } else { "(!" });
            write_expr(out, operand);
            out.push(')');
        }
        ExprKind::Binary { op, lhs, rhs } => {
            out.push('(');
            write_expr(out, lhs);
            write!(out, " {} ", op.source()).unwrap_or(());
            write_expr(out, rhs);
            out.push(')');
        }
        ExprKind::Builtin { builtin, args } => write_builtin(out, *builtin, args),
        ExprKind::HostCall { name, args } | ExprKind::Library { name, args } => {
            out.push_str(name);
            write_args(out, args);
        }
        ExprKind::Cast { operand } => {
            // An array casts element by element: `as` names the scalar type.
            out.push('(');
            write_expr(out, operand);
            write!(out, " as {})", e.ty.scalar().source()).unwrap_or(());
        }
        ExprKind::If {
            cond,
            then,
            otherwise,
        } => {
            out.push_str("(if ");
            write_expr(out, cond);
            out.push_str(" { ");
            write_inline_block(out, then);
            out.push_str(" } else { ");
            write_inline_block(out, otherwise);
            out.push_str(" })");
        }
        ExprKind::Loop {
            counter,
            limit,
            body,
            exit,
        } => {
            write!(
                out,
                "({{ let mut {counter}: i64 = 0; loop {{ if {counter} >= "
            )
            .unwrap_or(());
            write_expr(out, limit);
            out.push_str(" { break ");
            write_expr(out, exit);
            write!(out, "; }} {counter} += 1; ").unwrap_or(());
            write_inline_stmts(out, body);
            out.push_str("} })");
        }
        ExprKind::Call { callee, args } => {
            out.push_str(callee);
            write_args(out, args);
        }
        ExprKind::Catch { call, fallback } => {
            out.push_str("({ let (caught, value) = catch(");
            write_expr(out, call);
            out.push_str("); if caught { value } else { ");
            write_expr(out, fallback);
            out.push_str(" } })");
        }
        ExprKind::Join { calls, picks } => write_join(out, e, calls, picks),
        ExprKind::Instances {
            callee,
            form,
            args,
            use_,
        } => write_instances(out, callee, form, args, *use_),
        ExprKind::Jacobian {
            function,
            point,
            data,
            row,
        } => {
            write_derivative(out, "jacobian", function, point, data);
            write!(out, "[{row}]").unwrap_or(());
        }
        ExprKind::Grad {
            function,
            point,
            data,
            field,
        } => match field {
            None => write_derivative(out, "grad", function, point, data),
            Some(field) => {
                out.push('(');
                write_derivative(out, "value_and_grad", function, point, data);
                write!(out, ".{field})").unwrap_or(());
            }
        },
        ExprKind::Index { array, index } => {
            write_expr(out, array);
            out.push('[');
            write_expr(out, index);
            out.push(']');
        }
        ExprKind::Slice {
            items,
            start,
            len,
            form,
        } => {
            out.push('[');
            write_list(out, items);
            write!(out, "][{}]", range(*form, *start, *len)).unwrap_or(());
        }
        ExprKind::Array(items) => {
            out.push('[');
            write_list(out, items);
            out.push(']');
        }
        ExprKind::Fill(value) => {
            out.push('[');
            write_expr(out, value);
            let dim = e.ty.outer_dim().unwrap_or(RAGGED_DIM);
            write!(out, "; {dim}]").unwrap_or(());
        }
        ExprKind::Len(array) => {
            out.push_str("((");
            write_expr(out, array);
            out.push_str(").len() as i64)");
        }
        ExprKind::Dim(dim) => write!(out, "({dim} as i64)").unwrap_or(()),
        ExprKind::Pair(a, b) => {
            out.push('(');
            write_expr(out, a);
            out.push_str(", ");
            write_expr(out, b);
            out.push(')');
        }
        ExprKind::Field { pair, field } => {
            write_expr(out, pair);
            write!(out, ".{field}").unwrap_or(());
        }
    }
}

fn write_join(out: &mut String, e: &Expr, calls: &[Expr], picks: &[usize]) {
    out.push_str("({ let joined = join(");
    write_list(out, calls);
    out.push_str("); ");
    let sum = |field: &str| -> String {
        let parts: Vec<String> = picks
            .iter()
            .map(|i| format!("(joined.{i}){field}"))
            .collect();
        format!("({})", parts.join(" + "))
    };
    if e.ty == Ty::Pair {
        write!(out, "({}, {})", sum(".0"), sum(".1")).unwrap_or(());
    } else {
        out.push_str(&sum(""));
    }
    out.push_str(" })");
}

fn write_instances(
    out: &mut String,
    callee: &str,
    form: &InstanceForm,
    args: &[Expr],
    use_: InstanceUse,
) {
    let mut call = String::new();
    match form {
        InstanceForm::Map { depths } => {
            write!(call, "map({callee}, [").unwrap_or(());
            write_list(&mut call, depths);
            call.push(']');
        }
        InstanceForm::Pfor { count, name } => {
            let count = name.clone().unwrap_or_else(|| count.to_string());
            write!(call, "pfor::<{count}>({callee}").unwrap_or(());
        }
        InstanceForm::MapRagged { depth } => {
            write!(call, "map({callee}, [").unwrap_or(());
            write_expr(&mut call, depth);
            write!(call, "; {RAGGED_DIM}]").unwrap_or(());
        }
        InstanceForm::PforRagged => {
            write!(call, "pfor::<{RAGGED_DIM}>({callee}").unwrap_or(());
        }
    }
    for a in args {
        call.push_str(", ");
        write_expr(&mut call, a);
    }
    call.push(')');
    match use_ {
        InstanceUse::Whole => write!(out, "{call}"),
        InstanceUse::Sum => write!(out, "sum({call})"),
        InstanceUse::Index(k) => write!(out, "{call}[{k}]"),
        InstanceUse::SumField(f) => write!(out, "sum({call}.{f})"),
    }
    .unwrap_or(());
}

/// `name(function, point, data..)`: `grad`, `value_and_grad`, `jacobian`.
fn write_derivative(out: &mut String, name: &str, function: &str, point: &Expr, data: &[Expr]) {
    write!(out, "{name}({function}, ").unwrap_or(());
    write_expr(out, point);
    for d in data {
        out.push_str(", ");
        write_expr(out, d);
    }
    out.push(')');
}

fn write_builtin(out: &mut String, builtin: Builtin, args: &[Expr]) {
    match args.split_first() {
        Some((receiver, rest)) if builtin.spelling().method().is_some() => {
            out.push('(');
            write_expr(out, receiver);
            write!(out, ").{}", builtin.name()).unwrap_or(());
            write_args(out, rest);
        }
        _ => {
            out.push_str(builtin.name());
            write_args(out, args);
        }
    }
}

fn write_args(out: &mut String, args: &[Expr]) {
    out.push('(');
    write_list(out, args);
    out.push(')');
}

fn write_list(out: &mut String, items: &[Expr]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, item);
    }
}

fn write_inline_block(out: &mut String, block: &Block) {
    write_inline_stmts(out, &block.stmts);
    write_expr(out, &block.tail);
}

/// Statements inside an expression, on one line.
fn write_inline_stmts(out: &mut String, stmts: &[Stmt]) {
    let mut printer = Printer {
        out: String::new(),
        indent: 0,
    };
    printer.stmts(stmts);
    for line in printer.out.lines() {
        out.push_str(line.trim());
        out.push(' ');
    }
}

/// The length of an array of the fixed-length type `ty`.
pub fn fixed_len(ty: Ty) -> usize {
    if ty == Ty::IntArray {
        INT_ARRAY_LEN
    } else {
        FLOAT_ARRAY_LEN
    }
}

/// `len` items from `start` as `form` writes the range (`Prefix` starts at 0).
fn range(form: SliceForm, start: usize, len: usize) -> String {
    match form {
        SliceForm::Offset => format!("{start}..{start} + {len}"),
        SliceForm::Between => format!("{start}..{}", start + len),
        SliceForm::Computed => format!("({start} as i32)..({start} as i32) + {len}"),
        SliceForm::Prefix => format!("..{len}"),
    }
}
