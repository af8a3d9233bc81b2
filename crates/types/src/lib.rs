//! Vocabulary shared by every stage of autobatch: scalar and array types,
//! dimensions, source locations, runtime values and member errors.
//!
//! This crate is the bottom of the dependency graph. It must not know about
//! syntax, the IR, executors or the command line: anything that mentions a
//! `syn` node, a basic block or a strategy belongs elsewhere.

use std::fmt;

/// A position in a source file: 1-based line and 1-based column (in characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    pub line: u32,
    pub column: u32,
}

impl Loc {
    pub const fn new(line: u32, column: u32) -> Self {
        Loc { line, column }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The ODE solvers, by the name a program calls them with.
pub const ODE_SOLVERS: [&str; 4] = ["ode_rk45", "ode_rk45_tol", "ode_bdf", "ode_bdf_tol"];

/// The call of an ODE solver that a function the compiler writes for it
/// serves, if `name` is one: the solver and the call's location. The
/// functions of the call at 12:9 of `ode_bdf` are named `ode_bdf_12_9` and
/// `ode_bdf_12_9_` followed by what they do, their instances and
/// derivatives as any function's (`ode_bdf_12_9<3>`, `ode_bdf_12_9_sens'grad`).
pub fn ode_call_of(name: &str) -> Option<(&'static str, Loc)> {
    let name = name.split(['<', '\'']).next().unwrap_or(name);
    ODE_SOLVERS.iter().find_map(|solver| {
        let rest = name.strip_prefix(solver)?.strip_prefix('_')?;
        let mut parts = rest.splitn(3, '_');
        let mut number = || {
            parts
                .next()
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?
                .parse::<u32>()
                .ok()
        };
        Some((*solver, Loc::new(number()?, number()?)))
    })
}

/// The scalar types of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    Bool,
    I32,
    I64,
    Usize,
    F32,
    F64,
}

impl ScalarType {
    pub const ALL: [ScalarType; 6] = [
        ScalarType::Bool,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::Usize,
        ScalarType::F32,
        ScalarType::F64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::Usize => "usize",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
        }
    }

    pub fn from_name(name: &str) -> Option<ScalarType> {
        ScalarType::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F32 | ScalarType::F64)
    }

    /// The bytes one element takes in memory (a `bool`, one).
    pub fn byte_size(self) -> usize {
        match self {
            ScalarType::Bool => 1,
            ScalarType::I32 | ScalarType::F32 => 4,
            ScalarType::I64 | ScalarType::Usize | ScalarType::F64 => 8,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, ScalarType::I32 | ScalarType::I64 | ScalarType::Usize)
    }

    pub fn is_numeric(self) -> bool {
        self != ScalarType::Bool
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Index of a symbolic dimension in a program's symbol table
/// (`Program::symbols` in the IR, bound at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymbolId(pub u32);

/// The length of one array axis: known when the program is compiled, or a
/// symbolic dimension bound from the inputs when it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    Fixed(u64),
    Symbolic(SymbolId),
}

/// The type of one IR variable: a scalar (no dims) or a rectangular array of
/// scalars, outermost axis first (`[[f64; D]; N]` has dims `[N, D]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub elem: ScalarType,
    pub dims: Vec<Dim>,
}

impl TensorType {
    pub fn scalar(elem: ScalarType) -> Self {
        TensorType {
            elem,
            dims: Vec::new(),
        }
    }
    pub fn is_scalar(&self) -> bool {
        self.dims.is_empty()
    }
    /// Writes the type in source syntax, naming symbols with `symbol_name`.
    pub fn display<'a>(
        &'a self,
        symbol_name: &'a dyn Fn(SymbolId) -> String,
    ) -> impl fmt::Display + 'a {
        DisplayTensorType {
            ty: self,
            symbol_name,
        }
    }
}

struct DisplayTensorType<'a> {
    ty: &'a TensorType,
    symbol_name: &'a dyn Fn(SymbolId) -> String,
}

impl fmt::Display for DisplayTensorType<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for _ in &self.ty.dims {
            f.write_str("[")?;
        }
        write!(f, "{}", self.ty.elem)?;
        for d in self.ty.dims.iter().rev() {
            match d {
                Dim::Fixed(n) => write!(f, "; {n}]")?,
                Dim::Symbolic(s) => write!(f, "; {}]", (self.symbol_name)(*s))?,
            }
        }
        Ok(())
    }
}

/// A structured type as the user sees it: tensors and (nested) tuples.
/// The IR flattens tuples into several variables; this type is kept for the
/// entry function's parameters and results so that inputs and outputs can be
/// read and written in their source shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Tensor(TensorType),
    Tuple(Vec<Type>),
}

impl Type {
    pub fn unit() -> Type {
        Type::Tuple(Vec::new())
    }
    /// The tensor types of the flattened form, in order (depth-first, left to right).
    pub fn flatten(&self) -> Vec<TensorType> {
        let mut out = Vec::new();
        self.flatten_into(&mut out);
        out
    }
    fn flatten_into(&self, out: &mut Vec<TensorType>) {
        match self {
            Type::Tensor(t) => out.push(t.clone()),
            Type::Tuple(items) => items.iter().for_each(|t| t.flatten_into(out)),
        }
    }
    pub fn flat_len(&self) -> usize {
        match self {
            Type::Tensor(_) => 1,
            Type::Tuple(items) => items.iter().map(Type::flat_len).sum(),
        }
    }
}

/// One scalar value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    I32(i32),
    I64(i64),
    Usize(u64),
    F32(f32),
    F64(f64),
}

impl Scalar {
    /// The zero (`false`) of a scalar type.
    pub fn zero(ty: ScalarType) -> Scalar {
        match ty {
            ScalarType::Bool => Scalar::Bool(false),
            ScalarType::I32 => Scalar::I32(0),
            ScalarType::I64 => Scalar::I64(0),
            ScalarType::Usize => Scalar::Usize(0),
            ScalarType::F32 => Scalar::F32(0.0),
            ScalarType::F64 => Scalar::F64(0.0),
        }
    }
    pub fn ty(self) -> ScalarType {
        match self {
            Scalar::Bool(_) => ScalarType::Bool,
            Scalar::I32(_) => ScalarType::I32,
            Scalar::I64(_) => ScalarType::I64,
            Scalar::Usize(_) => ScalarType::Usize,
            Scalar::F32(_) => ScalarType::F32,
            Scalar::F64(_) => ScalarType::F64,
        }
    }
}

impl fmt::Display for Scalar {
    /// Prints the value the way the IR text form writes constants:
    /// with its type as a suffix, so that the text is unambiguous.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::I32(v) => write!(f, "{v}_i32"),
            Scalar::I64(v) => write!(f, "{v}_i64"),
            Scalar::Usize(v) => write!(f, "{v}_usize"),
            Scalar::F32(v) => write!(f, "{v:?}_f32"),
            Scalar::F64(v) => write!(f, "{v:?}_f64"),
        }
    }
}

/// The elements of a tensor, in row-major order, stored by scalar type.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Usize(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Data {
    pub fn ty(&self) -> ScalarType {
        match self {
            Data::Bool(_) => ScalarType::Bool,
            Data::I32(_) => ScalarType::I32,
            Data::I64(_) => ScalarType::I64,
            Data::Usize(_) => ScalarType::Usize,
            Data::F32(_) => ScalarType::F32,
            Data::F64(_) => ScalarType::F64,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Data::Bool(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Usize(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn get(&self, i: usize) -> Scalar {
        match self {
            Data::Bool(v) => Scalar::Bool(v[i]),
            Data::I32(v) => Scalar::I32(v[i]),
            Data::I64(v) => Scalar::I64(v[i]),
            Data::Usize(v) => Scalar::Usize(v[i]),
            Data::F32(v) => Scalar::F32(v[i]),
            Data::F64(v) => Scalar::F64(v[i]),
        }
    }
    /// `n` copies of `s`.
    pub fn filled(s: Scalar, n: usize) -> Data {
        match s {
            Scalar::Bool(x) => Data::Bool(vec![x; n]),
            Scalar::I32(x) => Data::I32(vec![x; n]),
            Scalar::I64(x) => Data::I64(vec![x; n]),
            Scalar::Usize(x) => Data::Usize(vec![x; n]),
            Scalar::F32(x) => Data::F32(vec![x; n]),
            Scalar::F64(x) => Data::F64(vec![x; n]),
        }
    }
    /// An empty buffer of type `ty` with room for `n` elements.
    pub fn with_capacity(ty: ScalarType, n: usize) -> Data {
        match ty {
            ScalarType::Bool => Data::Bool(Vec::with_capacity(n)),
            ScalarType::I32 => Data::I32(Vec::with_capacity(n)),
            ScalarType::I64 => Data::I64(Vec::with_capacity(n)),
            ScalarType::Usize => Data::Usize(Vec::with_capacity(n)),
            ScalarType::F32 => Data::F32(Vec::with_capacity(n)),
            ScalarType::F64 => Data::F64(Vec::with_capacity(n)),
        }
    }
    /// Appends `s`; panics if its type differs (an internal invariant, not user input).
    pub fn push(&mut self, s: Scalar) {
        match (self, s) {
            (Data::Bool(v), Scalar::Bool(x)) => v.push(x),
            (Data::I32(v), Scalar::I32(x)) => v.push(x),
            (Data::I64(v), Scalar::I64(x)) => v.push(x),
            (Data::Usize(v), Scalar::Usize(x)) => v.push(x),
            (Data::F32(v), Scalar::F32(x)) => v.push(x),
            (Data::F64(v), Scalar::F64(x)) => v.push(x),
            (d, s) => panic!("internal error: pushing {:?} into a {} buffer", s, d.ty()),
        }
    }
    /// Appends the elements `range` of `other` (same scalar type).
    pub fn extend_from(&mut self, other: &Data, range: std::ops::Range<usize>) {
        match (self, other) {
            (Data::Bool(a), Data::Bool(b)) => a.extend_from_slice(&b[range]),
            (Data::I32(a), Data::I32(b)) => a.extend_from_slice(&b[range]),
            (Data::I64(a), Data::I64(b)) => a.extend_from_slice(&b[range]),
            (Data::Usize(a), Data::Usize(b)) => a.extend_from_slice(&b[range]),
            (Data::F32(a), Data::F32(b)) => a.extend_from_slice(&b[range]),
            (Data::F64(a), Data::F64(b)) => a.extend_from_slice(&b[range]),
            (a, b) => panic!(
                "internal error: extending a {} buffer with {}",
                a.ty(),
                b.ty()
            ),
        }
    }
}

/// A runtime value of one IR variable for one member: a scalar (empty shape)
/// or an array, its elements in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    pub fn scalar(s: Scalar) -> Tensor {
        Tensor {
            shape: Vec::new(),
            data: Data::filled(s, 1),
        }
    }
    /// Zeros (`false`) of an element type and shape.
    pub fn zeros(elem: ScalarType, shape: Vec<usize>) -> Tensor {
        let len = shape.iter().product();
        Tensor {
            shape,
            data: Data::filled(Scalar::zero(elem), len),
        }
    }
    pub fn new(shape: Vec<usize>, data: Data) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor { shape, data }
    }
    pub fn elem_type(&self) -> ScalarType {
        self.data.ty()
    }
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }
    /// The value of a scalar tensor (or the first element of an array).
    pub fn as_scalar(&self) -> Scalar {
        self.data.get(0)
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// A structured value as the user sees it: a tensor or a tuple of values.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Tensor(Tensor),
    Tuple(Vec<Value>),
}

impl Value {
    /// The tensors of the flattened form, in the order of [`Type::flatten`].
    pub fn flatten(self) -> Vec<Tensor> {
        let mut out = Vec::new();
        fn go(v: Value, out: &mut Vec<Tensor>) {
            match v {
                Value::Tensor(t) => out.push(t),
                Value::Tuple(items) => items.into_iter().for_each(|v| go(v, out)),
            }
        }
        go(self, &mut out);
        out
    }
    /// Rebuilds a structured value of type `ty` from its flattened tensors.
    pub fn unflatten(ty: &Type, flat: &mut impl Iterator<Item = Tensor>) -> Option<Value> {
        match ty {
            Type::Tensor(_) => flat.next().map(Value::Tensor),
            Type::Tuple(items) => {
                let mut out = Vec::with_capacity(items.len());
                for t in items {
                    out.push(Value::unflatten(t, flat)?);
                }
                Some(Value::Tuple(out))
            }
        }
    }
}

/// The kinds of error that stop one member (and only that member).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    DivisionByZero,
    IndexOutOfBounds,
    AssertionFailed,
    StackOverflow,
    StepLimit,
    /// A host function failed, or gave a value other than its declared type.
    HostError,
    /// The run was interrupted (the user's Ctrl-C) before the member
    /// finished: not a result of the program, but of when it was stopped.
    Interrupted,
    /// An argument of a distribution or special function outside its domain
    /// (a negative scale, a probability above 1).
    DomainError,
    /// The tape of a member's gradient would hold more than the run's
    /// bound (`--max-tape-bytes`).
    TapeLimit,
}

impl ErrorKind {
    /// Whether `catch(f(..))` recovers from this error raised inside the
    /// call: every fault of the program's meaning and a too-deep recursion,
    /// but not the step limit, which bounds the whole member's run, nor an
    /// interruption, which stops the whole run.
    pub fn is_catchable(self) -> bool {
        !matches!(self, ErrorKind::StepLimit | ErrorKind::Interrupted)
    }
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::DivisionByZero => "division_by_zero",
            ErrorKind::IndexOutOfBounds => "index_out_of_bounds",
            ErrorKind::AssertionFailed => "assertion_failed",
            ErrorKind::StackOverflow => "stack_overflow",
            ErrorKind::StepLimit => "step_limit",
            ErrorKind::HostError => "host_error",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::DomainError => "domain_error",
            ErrorKind::TapeLimit => "tape_limit",
        }
    }
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        [
            ErrorKind::DivisionByZero,
            ErrorKind::IndexOutOfBounds,
            ErrorKind::AssertionFailed,
            ErrorKind::StackOverflow,
            ErrorKind::StepLimit,
            ErrorKind::HostError,
            ErrorKind::Interrupted,
            ErrorKind::DomainError,
            ErrorKind::TapeLimit,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error that stopped one member: its kind, a message for people, and
/// where in the source it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberError {
    pub kind: ErrorKind,
    pub message: String,
    pub loc: Loc,
}

impl MemberError {
    pub fn new(kind: ErrorKind, message: impl Into<String>, loc: Loc) -> Self {
        MemberError {
            kind,
            message: message.into(),
            loc,
        }
    }
}

impl fmt::Display for MemberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}: {}", self.kind, self.loc, self.message)
    }
}

impl std::error::Error for MemberError {}
