//! The checked program (HIR): what `check` hands to the lowering.
//!
//! Every name is resolved (locals to [`LocalId`]s, calls to function indices,
//! statics to static indices, constants to their values), every expression
//! carries its type, every array length is a [`DimExpr`]. Generic functions
//! stay generic: a length may be [`DimExpr::Generic`], which the lowering
//! substitutes per instance. Nothing here knows about the IR.

use autobatch_types::{Loc, ScalarType, SymbolId};

/// The operators and builtins come from the table of operations:
/// `UnaryOp` is `-` / `!`, `BinaryOp` the operators whose result has the
/// operands' type, `CompareOp` the comparisons, `Builtin` the builtin
/// functions and methods (a method takes its receiver as the first argument).
pub use autobatch_ops::{
    BinaryOperator as BinaryOp, Builtin, CompareOperator as CompareOp, UnaryOperator as UnaryOp,
};

/// The length of one array axis as written in the source, after resolving
/// constants: a number, a symbolic dimension of the program, or the `index`-th
/// const generic parameter of the enclosing function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimExpr {
    Fixed(u64),
    Symbol(SymbolId),
    Generic(u32),
}

/// A scalar (no dims) or an array of scalars, outermost axis first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorTy {
    pub elem: ScalarType,
    pub dims: Vec<DimExpr>,
    /// While checking, the element type of an unsuffixed literal is an
    /// inference variable; `check` resolves every one before returning, so
    /// outside the front end this is always `None`.
    pub(crate) var: Option<u32>,
}

impl TensorTy {
    pub fn new(elem: ScalarType, dims: Vec<DimExpr>) -> TensorTy {
        TensorTy {
            elem,
            dims,
            var: None,
        }
    }
    pub fn scalar(elem: ScalarType) -> TensorTy {
        TensorTy::new(elem, Vec::new())
    }
    pub fn is_scalar(&self) -> bool {
        self.dims.is_empty()
    }
}

/// The type of an expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Tensor(TensorTy),
    /// A tuple; `()` is the empty tuple.
    Tuple(Vec<Ty>),
    /// The type of an expression that never finishes (`return`, `break`,
    /// `continue`, a `loop` without `break`, a block that ends in one of these).
    Never,
}

impl Ty {
    pub fn unit() -> Ty {
        Ty::Tuple(Vec::new())
    }
    pub fn scalar(elem: ScalarType) -> Ty {
        Ty::Tensor(TensorTy::scalar(elem))
    }
    pub fn is_unit(&self) -> bool {
        matches!(self, Ty::Tuple(items) if items.is_empty())
    }
    pub fn as_tensor(&self) -> Option<&TensorTy> {
        match self {
            Ty::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// Index of a function in [`Module::functions`].
pub type FunctionIndex = usize;
/// Index of a static in [`Module::statics`].
pub type StaticIndex = usize;

/// A local variable of a function: a parameter or a binding made by `let` or
/// `for`. Each `let` makes a new local, so shadowing never reuses one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

/// The whole checked program.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// Names of the symbolic dimensions, in order of first appearance; a
    /// [`DimExpr::Symbol`] indexes this list.
    pub symbols: Vec<String>,
    pub statics: Vec<Static>,
    /// Every function with a body, in source order.
    pub functions: Vec<Function>,
    /// Bodiless functions of `extern "autobatch"` blocks (host primitives).
    pub host_functions: Vec<HostFunction>,
}

/// `static NAME: TYPE;` inside `extern "autobatch"`.
#[derive(Clone, Debug)]
pub struct Static {
    pub name: String,
    pub ty: TensorTy,
    pub loc: Loc,
}

/// `fn name(params) -> ret;` inside `extern "autobatch"`.
#[derive(Clone, Debug)]
pub struct HostFunction {
    pub name: String,
    pub params: Vec<(String, Ty)>,
    pub ret: Ty,
    pub loc: Loc,
}

/// A function with a body.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    /// Names of the const generic parameters (`<const K: usize>`), in order;
    /// `DimExpr::Generic(i)` refers to the i-th.
    pub const_params: Vec<String>,
    /// The parameters, in order; each is a local of this function.
    pub params: Vec<LocalId>,
    pub ret: Ty,
    pub body: Block,
    /// Every local of the function, indexed by `LocalId`.
    pub locals: Vec<Local>,
    /// Where the function is declared (the `fn` keyword).
    pub loc: Loc,
}

impl Function {
    pub fn local(&self, id: LocalId) -> &Local {
        &self.locals[id.0 as usize]
    }
}

#[derive(Clone, Debug)]
pub struct Local {
    /// The source name (`_` for an ignored parameter, `for` bound etc.).
    pub name: String,
    pub ty: Ty,
    pub mutable: bool,
    pub loc: Loc,
}

/// `{ stmts; tail }`.
#[derive(Clone, Debug)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
    /// The opening brace.
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let pattern = init;`
    Let {
        pattern: Pattern,
        init: Expr,
        loc: Loc,
    },
    /// An expression statement (its value, if any, is dropped).
    Expr(Expr),
}

/// The left side of a `let`.
#[derive(Clone, Debug)]
pub enum Pattern {
    Bind(LocalId),
    /// `_`: the value is computed and dropped.
    Wildcard,
    Tuple(Vec<Pattern>),
}

/// A typed expression.
#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Ty,
    /// Where the expression starts in the source.
    pub loc: Loc,
}

/// A literal value; its type is the expression's type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Bool(bool),
    /// An integer of any integer type (checked to fit it).
    Int(i128),
    /// A float, read from the source text as both widths so that an `f32`
    /// literal is rounded once.
    Float {
        as_f64: f64,
        as_f32: f32,
    },
}

/// The target of an assignment: a local, then tuple fields, then indices
/// (`t.0[i][j]`).
#[derive(Clone, Debug)]
pub struct Place {
    pub local: LocalId,
    pub projections: Vec<Projection>,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub enum Projection {
    Field(usize),
    Index(Expr),
    /// `[start..start + len]`: the last projection of a place.
    Slice {
        start: Expr,
        len: DimExpr,
    },
}

impl Projection {
    /// The index or the slice's start: the expression the projection evaluates.
    pub fn operand(&self) -> Option<&Expr> {
        match self {
            Projection::Field(_) => None,
            Projection::Index(i) | Projection::Slice { start: i, .. } => Some(i),
        }
    }

    /// [`Projection::operand`], mutable.
    pub fn operand_mut(&mut self) -> Option<&mut Expr> {
        match self {
            Projection::Field(_) => None,
            Projection::Index(i) | Projection::Slice { start: i, .. } => Some(i),
        }
    }
}

/// Which derivative an [`ExprKind::Grad`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradKind {
    /// `grad(f, x)`: the gradient of `f` (a float scalar result) at `x`.
    Grad,
    /// `value_and_grad(f, x)`: `(f(x), grad(f, x))`.
    ValueAndGrad,
    /// `jacobian(h, x)`: `h` maps an array `[F; D]` to an array `[F; M]`;
    /// the `[[F; D]; M]` of its partial derivatives at `x`, row `m` the
    /// gradient of result `m`.
    Jacobian,
}

impl GradKind {
    /// The name the user writes.
    pub fn name(self) -> &'static str {
        match self {
            GradKind::Grad => "grad",
            GradKind::ValueAndGrad => "value_and_grad",
            GradKind::Jacobian => "jacobian",
        }
    }
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Literal(Literal),
    Local(LocalId),
    Static(StaticIndex),
    /// The value of an array length as `usize` (a const generic parameter or
    /// a symbolic dimension used as a value).
    Dim(DimExpr),
    /// `array.len()`: `array` is evaluated (for its effects) unless it is a
    /// plain variable, then the length is `len`.
    Len {
        array: Box<Expr>,
        len: DimExpr,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    /// Arithmetic and bitwise operators; elementwise on arrays (an array and a
    /// scalar broadcast the scalar).
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// Comparisons of two scalars.
    Compare {
        op: CompareOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `lhs && rhs`, evaluating `rhs` only when `lhs` is true.
    And {
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `lhs || rhs`, evaluating `rhs` only when `lhs` is false.
    Or {
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Cast {
        operand: Box<Expr>,
        to: ScalarType,
    },
    /// A call of a function of the module; `const_args` gives the value of
    /// each of its const generic parameters (in the caller's terms).
    ///
    /// With `catch` (`catch(f(args))`), the value is `(completed, result)`:
    /// `(true, f(args))`, or `(false, zeros)` when a catchable member error
    /// arises anywhere inside the call.
    Call {
        function: FunctionIndex,
        const_args: Vec<DimExpr>,
        args: Vec<Expr>,
        catch: bool,
    },
    Builtin {
        builtin: Builtin,
        args: Vec<Expr>,
    },
    /// A call of a library function (a distribution's `normal_lpdf`,
    /// `poisson_rng`, ..., or a compound special function such as `lbeta`),
    /// which the lowering expands into primitives. The front end has checked
    /// the arguments against the function's parameters.
    Library {
        function: autobatch_ops::library::Function,
        args: Vec<Expr>,
    },
    /// `h(args)` of the host primitive `host` (an index into
    /// [`Module::host_functions`]): what the host function registered for
    /// it gives, for this member.
    HostCall {
        host: usize,
        args: Vec<Expr>,
    },
    /// `grad(function, x, d..)`, `value_and_grad(function, x, d..)` or
    /// `jacobian(function, x, d..)` (see [`GradKind`]) of a function of the
    /// module whose first parameter is a float (or float array) `x`, the one
    /// differentiated; `args` are the point `x` then the data arguments
    /// `d..` (none in `grad(f, x)`), passed to the function's other
    /// parameters unchanged and carrying no derivative. `const_args` as for
    /// [`ExprKind::Call`]. The front end has checked that everything the
    /// function reaches is differentiable.
    Grad {
        function: FunctionIndex,
        const_args: Vec<DimExpr>,
        args: Vec<Expr>,
        kind: GradKind,
    },
    /// `join(f(a), g(b, c), ...)`: two calls or more of functions of the
    /// module, each an [`ExprKind::Call`] without `catch`, run as concurrent
    /// instances of the member; the value is the tuple of their results.
    /// The meaning is the sequential evaluation: the arguments of every call,
    /// left to right, then the calls in order.
    Join {
        calls: Vec<Expr>,
    },
    /// `map(f, xs, extra..)` or `pfor::<count>(g, extra..)` (when
    /// `indexed`): `count` instances of the function `function` of the
    /// module (`const_args` as for [`ExprKind::Call`]). Instance `k` passes
    /// `k as i64` first if `indexed`, else element `k` of `args[0]` (`xs`,
    /// an array of `count` elements); then the other arguments whole. The
    /// value has the function's result type with each array (or scalar) of
    /// it made an array of `count` of them (a tuple of such arrays for a
    /// tuple result). The meaning is the sequential evaluation: the
    /// arguments left to right, then the instances for `k` ascending. When
    /// `xs` never finishes (its type is `!`), so does the `map`: its type is
    /// `!` and `count` is `Fixed(0)`, never used.
    Map {
        function: FunctionIndex,
        const_args: Vec<DimExpr>,
        count: DimExpr,
        indexed: bool,
        args: Vec<Expr>,
    },
    Tuple(Vec<Expr>),
    Field {
        base: Box<Expr>,
        index: usize,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    /// `base[start..start + len]` (`base[..len]`: `start` a zero).
    Slice {
        base: Box<Expr>,
        start: Box<Expr>,
        len: DimExpr,
    },
    /// `[a, b, c]` (never empty).
    Array(Vec<Expr>),
    /// `[element; len]`.
    Repeat {
        element: Box<Expr>,
        len: DimExpr,
    },
    Block(Block),
    /// `if cond { then } else ...`; `else_branch` is a block expression or
    /// another `if`.
    If {
        cond: Box<Expr>,
        then_block: Block,
        else_branch: Option<Box<Expr>>,
    },
    While {
        cond: Box<Expr>,
        body: Block,
    },
    Loop {
        body: Block,
    },
    /// `for var in start..end` (or `..=` when `inclusive`); the bounds are
    /// evaluated once, before the first iteration.
    For {
        var: LocalId,
        start: Box<Expr>,
        end: Box<Expr>,
        inclusive: bool,
        body: Block,
    },
    Break {
        value: Option<Box<Expr>>,
    },
    Continue,
    Return {
        value: Option<Box<Expr>>,
    },
    /// `place = value`, or `place op= value` when `op` is given.
    Assign {
        place: Place,
        op: Option<BinaryOp>,
        value: Box<Expr>,
    },
    /// `assert!(cond)`; `message` is the user's text or
    /// `assertion failed: <source of cond>`.
    Assert {
        cond: Box<Expr>,
        message: String,
    },
}
