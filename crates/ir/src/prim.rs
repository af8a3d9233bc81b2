//! The primitive operations of the IR and their typing rules.
//!
//! A primitive takes variables and produces at most one variable. Its meaning
//! (what it computes on values) lives in the `kernels` crate; here is only its
//! name, its arity and the type of its result, which the verifier and the
//! lowering share so that the two can never disagree.

use autobatch_types::{Dim, Scalar, ScalarType, SymbolId, TensorType};
use std::fmt;

use crate::StaticId;

/// Elementwise operations of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Arithmetic negation (wrapping on integers).
    Neg,
    /// Logical not on `bool`, bitwise not on integers.
    Not,
    Abs,
    Exp,
    ExpM1,
    Ln,
    Ln1p,
    Log10,
    Sqrt,
    Sin,
    Cos,
    Tan,
    Tanh,
    Floor,
    Ceil,
    Round,
    Signum,
    Recip,
    IsNan,
    IsFinite,
    Sigmoid,
    LogSigmoid,
    Softplus,
}

/// Elementwise operations of two operands: both of the same shape, or one of
/// them a scalar that is broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Integer division (faults on a zero divisor) or float division.
    Div,
    /// Integer remainder (faults on a zero divisor) or float remainder (`fmod`).
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    /// Shift left; the shift amount may be any integer type and is taken modulo the bit width.
    Shl,
    /// Shift right (arithmetic on signed types); amount as for `Shl`.
    Shr,
    Max,
    Min,
    /// `f.powi(i32)`: the right operand is an `i32`.
    Powi,
    /// `f.powf(f)`.
    Powf,
    /// Integer `pow`: the right operand is any integer type, taken as `u32` (wrapping).
    Pow,
}

/// Comparisons of two scalars of the same type, giving a `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reductions over a 1-D array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    /// Index of the first maximum, as `usize`.
    Argmax,
    /// Index of the first minimum, as `usize`.
    Argmin,
    LogSumExp,
}

impl UnaryOp {
    /// Every operation, in declaration order (the text form reads them by name).
    pub const ALL: [UnaryOp; 23] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::ExpM1,
        UnaryOp::Ln,
        UnaryOp::Ln1p,
        UnaryOp::Log10,
        UnaryOp::Sqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Tanh,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Signum,
        UnaryOp::Recip,
        UnaryOp::IsNan,
        UnaryOp::IsFinite,
        UnaryOp::Sigmoid,
        UnaryOp::LogSigmoid,
        UnaryOp::Softplus,
    ];
}

impl BinaryOp {
    /// Every operation, in declaration order (the text form reads them by name).
    pub const ALL: [BinaryOp; 15] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Powi,
        BinaryOp::Powf,
        BinaryOp::Pow,
    ];
}

impl CompareOp {
    /// Every operation, in declaration order (the text form reads them by name).
    pub const ALL: [CompareOp; 6] = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ];
}

impl ReduceOp {
    /// Every operation, in declaration order (the text form reads them by name).
    pub const ALL: [ReduceOp; 7] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Argmax,
        ReduceOp::Argmin,
        ReduceOp::LogSumExp,
    ];
}

/// A primitive operation. See each variant for its operands (`args`) and result.
#[derive(Clone, Debug, PartialEq)]
pub enum Prim {
    /// No operands; the constant.
    Const(Scalar),
    /// One operand; the same value.
    Copy,
    /// No operands; the value of a shared static.
    LoadStatic(StaticId),
    /// No operands; the value of a symbolic dimension, as `usize`.
    SymbolValue(SymbolId),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    /// One operand; elementwise conversion as Rust's `as`.
    Cast(ScalarType),
    /// `(cond: bool, a, b)`: `a` if `cond` else `b`; `cond` is a scalar or has the shape of `a`.
    Select,
    /// `(x)`: an array of `dim` copies of `x` (`[x; N]`).
    Fill(Dim),
    /// `(x0, ..., xn-1)`, all of one type: the array `[x0, ..., xn-1]`.
    Stack,
    /// `(a, i)`: the element (or sub-array) `a[i]`; faults if `i` is out of bounds.
    Index,
    /// `(a, i, v)`: a copy of `a` with `a[i] = v`; faults if `i` is out of bounds.
    IndexSet,
    /// `(a, b)`, 1-D of one length: the inner product.
    Dot,
    /// `(m: [M, K], v: [K])`: `[M]`.
    Matvec,
    /// `(v: [M], m: [M, K])`: `[K]`.
    Vecmat,
    /// `(a: [M, K], b: [K, N])`: `[M, N]`.
    Matmul,
    /// `(m: [M, K])`: `[K, M]`.
    Transpose,
    /// `(a: [M], b: [K])`: `[M, K]`.
    Outer,
    /// `(a)` 1-D: a scalar (`usize` for argmax/argmin).
    Reduce(ReduceOp),
    /// `(a)` 1-D float: the softmax of `a`.
    Softmax,
    /// No operands: a draw from U\[0, 1) as `f64`.
    Uniform,
    /// No operands: a draw from N(0, 1) as `f64`.
    Normal,
    /// `(p: f64)`: a `bool`, true with probability `p`.
    Bernoulli,
    /// `(x)`: draws from U\[0, 1) shaped like `x` (its float type, or `f64`).
    UniformLike,
    /// `(x)`: draws from N(0, 1) shaped like `x` (its float type, or `f64`).
    NormalLike,
    /// `(cond: bool)`, no result: faults with `assertion_failed` and `message` if `cond` is false.
    Assert {
        message: String,
    },
}

impl Prim {
    /// The name used in the text form and in `op_counts`.
    pub fn name(&self) -> &'static str {
        use BinaryOp as B;
        use UnaryOp as U;
        match self {
            Prim::Const(_) => "const",
            Prim::Copy => "copy",
            Prim::LoadStatic(_) => "load_static",
            Prim::SymbolValue(_) => "symbol_value",
            Prim::Unary(op) => match op {
                U::Neg => "neg",
                U::Not => "not",
                U::Abs => "abs",
                U::Exp => "exp",
                U::ExpM1 => "exp_m1",
                U::Ln => "ln",
                U::Ln1p => "ln_1p",
                U::Log10 => "log10",
                U::Sqrt => "sqrt",
                U::Sin => "sin",
                U::Cos => "cos",
                U::Tan => "tan",
                U::Tanh => "tanh",
                U::Floor => "floor",
                U::Ceil => "ceil",
                U::Round => "round",
                U::Signum => "signum",
                U::Recip => "recip",
                U::IsNan => "is_nan",
                U::IsFinite => "is_finite",
                U::Sigmoid => "sigmoid",
                U::LogSigmoid => "log_sigmoid",
                U::Softplus => "softplus",
            },
            Prim::Binary(op) => match op {
                B::Add => "add",
                B::Sub => "sub",
                B::Mul => "mul",
                B::Div => "div",
                B::Rem => "rem",
                B::BitAnd => "bitand",
                B::BitOr => "bitor",
                B::BitXor => "bitxor",
                B::Shl => "shl",
                B::Shr => "shr",
                B::Max => "max",
                B::Min => "min",
                B::Powi => "powi",
                B::Powf => "powf",
                B::Pow => "pow",
            },
            Prim::Compare(op) => match op {
                CompareOp::Eq => "eq",
                CompareOp::Ne => "ne",
                CompareOp::Lt => "lt",
                CompareOp::Le => "le",
                CompareOp::Gt => "gt",
                CompareOp::Ge => "ge",
            },
            Prim::Cast(_) => "cast",
            Prim::Select => "select",
            Prim::Fill(_) => "fill",
            Prim::Stack => "stack",
            Prim::Index => "index",
            Prim::IndexSet => "index_set",
            Prim::Dot => "dot",
            Prim::Matvec => "matvec",
            Prim::Vecmat => "vecmat",
            Prim::Matmul => "matmul",
            Prim::Transpose => "transpose",
            Prim::Outer => "outer",
            Prim::Reduce(op) => match op {
                ReduceOp::Sum => "sum",
                ReduceOp::Mean => "mean",
                ReduceOp::Max => "reduce_max",
                ReduceOp::Min => "reduce_min",
                ReduceOp::Argmax => "argmax",
                ReduceOp::Argmin => "argmin",
                ReduceOp::LogSumExp => "logsumexp",
            },
            Prim::Softmax => "softmax",
            Prim::Uniform => "uniform",
            Prim::Normal => "normal",
            Prim::Bernoulli => "bernoulli",
            Prim::UniformLike => "uniform_like",
            Prim::NormalLike => "normal_like",
            Prim::Assert { .. } => "assert",
        }
    }

    /// The primitive whose text form is `name` alone: every primitive but
    /// those that carry a constant, static, symbol, type, length or message.
    pub fn from_plain_name(name: &str) -> Option<Prim> {
        const PLAIN: [Prim; 17] = [
            Prim::Copy,
            Prim::Select,
            Prim::Stack,
            Prim::Index,
            Prim::IndexSet,
            Prim::Dot,
            Prim::Matvec,
            Prim::Vecmat,
            Prim::Matmul,
            Prim::Transpose,
            Prim::Outer,
            Prim::Softmax,
            Prim::Uniform,
            Prim::Normal,
            Prim::Bernoulli,
            Prim::UniformLike,
            Prim::NormalLike,
        ];
        let ops = UnaryOp::ALL
            .into_iter()
            .map(Prim::Unary)
            .chain(BinaryOp::ALL.into_iter().map(Prim::Binary))
            .chain(CompareOp::ALL.into_iter().map(Prim::Compare))
            .chain(ReduceOp::ALL.into_iter().map(Prim::Reduce));
        PLAIN.into_iter().chain(ops).find(|p| p.name() == name)
    }

    /// Whether this primitive is bookkeeping introduced by the compiler
    /// (constants, copies, loads) rather than an operation the user wrote.
    /// Only user operations appear in `op_counts`.
    pub fn is_bookkeeping(&self) -> bool {
        matches!(
            self,
            Prim::Const(_) | Prim::Copy | Prim::LoadStatic(_) | Prim::SymbolValue(_)
        )
    }

    /// Whether the primitive draws from the member's random stream.
    pub fn is_random(&self) -> bool {
        matches!(
            self,
            Prim::Uniform | Prim::Normal | Prim::Bernoulli | Prim::UniformLike | Prim::NormalLike
        )
    }

    /// Whether the primitive can stop a member with an error.
    pub fn can_fault(&self) -> bool {
        matches!(
            self,
            Prim::Binary(BinaryOp::Div | BinaryOp::Rem)
                | Prim::Index
                | Prim::IndexSet
                | Prim::Assert { .. }
        )
    }

    /// The type of the result for operands of types `args`, `None` for a
    /// primitive without result, or a message saying why the operands do not fit.
    /// `static_type` gives the declared type of a static.
    pub fn result_type(
        &self,
        args: &[&TensorType],
        static_type: &dyn Fn(StaticId) -> Option<TensorType>,
    ) -> Result<Option<TensorType>, String> {
        use ScalarType as S;
        let arity = |n: usize| -> Result<(), String> {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "{} takes {} operand(s), got {}",
                    self.name(),
                    n,
                    args.len()
                ))
            }
        };
        let scalar = |t: S| Ok(Some(TensorType::scalar(t)));
        let need_float = |t: &TensorType| -> Result<(), String> {
            if t.elem.is_float() {
                Ok(())
            } else {
                Err(format!("{} needs floats, got {}", self.name(), t.elem))
            }
        };
        let need_rank = |t: &TensorType, r: usize| -> Result<(), String> {
            if t.dims.len() == r {
                Ok(())
            } else {
                Err(format!(
                    "{} needs a {}-D operand, got {} dims",
                    self.name(),
                    r,
                    t.dims.len()
                ))
            }
        };
        let same_elem = |a: &TensorType, b: &TensorType| -> Result<(), String> {
            if a.elem == b.elem {
                Ok(())
            } else {
                Err(format!(
                    "{}: operand types {} and {} differ",
                    self.name(),
                    a.elem,
                    b.elem
                ))
            }
        };
        let same_dim = |a: Dim, b: Dim| -> Result<(), String> {
            if a == b {
                Ok(())
            } else {
                Err(format!(
                    "{}: lengths {:?} and {:?} differ",
                    self.name(),
                    a,
                    b
                ))
            }
        };
        match self {
            Prim::Const(s) => {
                arity(0)?;
                scalar(s.ty())
            }
            Prim::Copy => {
                arity(1)?;
                Ok(Some(args[0].clone()))
            }
            Prim::LoadStatic(id) => {
                arity(0)?;
                static_type(*id)
                    .map(Some)
                    .ok_or_else(|| format!("no static {id}"))
            }
            Prim::SymbolValue(_) => {
                arity(0)?;
                scalar(S::Usize)
            }
            Prim::Unary(op) => {
                arity(1)?;
                let t = args[0];
                use UnaryOp as U;
                match op {
                    U::Neg => {
                        if !t.elem.is_numeric() {
                            return Err("neg needs numbers".into());
                        }
                        Ok(Some(t.clone()))
                    }
                    U::Not => {
                        if t.elem.is_float() {
                            return Err("not needs bool or integers".into());
                        }
                        Ok(Some(t.clone()))
                    }
                    U::Abs => {
                        if !t.elem.is_numeric() {
                            return Err("abs needs numbers".into());
                        }
                        Ok(Some(t.clone()))
                    }
                    U::IsNan | U::IsFinite => {
                        need_float(t)?;
                        Ok(Some(TensorType {
                            elem: S::Bool,
                            dims: t.dims.clone(),
                        }))
                    }
                    _ => {
                        need_float(t)?;
                        Ok(Some(t.clone()))
                    }
                }
            }
            Prim::Binary(op) => {
                arity(2)?;
                let (a, b) = (args[0], args[1]);
                use BinaryOp as B;
                match op {
                    B::Powi => {
                        need_float(a)?;
                        if b.elem != S::I32 || !b.is_scalar() {
                            return Err("powi needs an i32 scalar exponent".into());
                        }
                        return Ok(Some(a.clone()));
                    }
                    B::Pow | B::Shl | B::Shr => {
                        if !a.elem.is_integer()
                            || !b.elem.is_integer()
                            || !b.is_scalar() && b.dims != a.dims
                        {
                            return Err(format!("{} needs integers", self.name()));
                        }
                        return Ok(Some(a.clone()));
                    }
                    _ => {}
                }
                same_elem(a, b)?;
                match op {
                    B::BitAnd | B::BitOr | B::BitXor if a.elem.is_float() => {
                        return Err(format!("{} needs bool or integers", self.name()))
                    }
                    B::Add | B::Sub | B::Mul | B::Div | B::Rem | B::Max | B::Min
                        if !a.elem.is_numeric() =>
                    {
                        return Err(format!("{} needs numbers", self.name()))
                    }
                    B::Powf if !a.elem.is_float() => return Err("powf needs floats".into()),
                    _ => {}
                }
                if a.is_scalar() {
                    Ok(Some(b.clone()))
                } else if b.is_scalar() || a.dims == b.dims {
                    Ok(Some(a.clone()))
                } else {
                    Err(format!("{}: operand shapes differ", self.name()))
                }
            }
            Prim::Compare(_) => {
                arity(2)?;
                same_elem(args[0], args[1])?;
                if !args[0].is_scalar() || !args[1].is_scalar() {
                    return Err("comparisons take scalars".into());
                }
                scalar(S::Bool)
            }
            Prim::Cast(to) => {
                arity(1)?;
                Ok(Some(TensorType {
                    elem: *to,
                    dims: args[0].dims.clone(),
                }))
            }
            Prim::Select => {
                arity(3)?;
                let (c, a, b) = (args[0], args[1], args[2]);
                if c.elem != S::Bool || !(c.is_scalar() || c.dims == a.dims) {
                    return Err(
                        "select needs a bool condition (scalar or of the operands' shape)".into(),
                    );
                }
                if a != b {
                    return Err("select: the two alternatives have different types".into());
                }
                Ok(Some(a.clone()))
            }
            Prim::Fill(d) => {
                arity(1)?;
                let mut dims = vec![*d];
                dims.extend(args[0].dims.iter().copied());
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims,
                }))
            }
            Prim::Stack => {
                if args.is_empty() {
                    return Err("stack needs at least one operand".into());
                }
                if args.iter().any(|t| *t != args[0]) {
                    return Err("stack: elements have different types".into());
                }
                let mut dims = vec![Dim::Fixed(args.len() as u64)];
                dims.extend(args[0].dims.iter().copied());
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims,
                }))
            }
            Prim::Index => {
                arity(2)?;
                let (a, i) = (args[0], args[1]);
                if a.is_scalar() || !i.elem.is_integer() || !i.is_scalar() {
                    return Err("index needs an array and an integer scalar".into());
                }
                Ok(Some(TensorType {
                    elem: a.elem,
                    dims: a.dims[1..].to_vec(),
                }))
            }
            Prim::IndexSet => {
                arity(3)?;
                let (a, i, v) = (args[0], args[1], args[2]);
                if a.is_scalar() || !i.elem.is_integer() || !i.is_scalar() {
                    return Err("index_set needs an array and an integer scalar".into());
                }
                if v.elem != a.elem || v.dims[..] != a.dims[1..] {
                    return Err("index_set: the value does not fit the array".into());
                }
                Ok(Some(a.clone()))
            }
            Prim::Dot => {
                arity(2)?;
                need_rank(args[0], 1)?;
                need_rank(args[1], 1)?;
                same_elem(args[0], args[1])?;
                same_dim(args[0].dims[0], args[1].dims[0])?;
                scalar(args[0].elem)
            }
            Prim::Matvec => {
                arity(2)?;
                need_rank(args[0], 2)?;
                need_rank(args[1], 1)?;
                same_elem(args[0], args[1])?;
                same_dim(args[0].dims[1], args[1].dims[0])?;
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims: vec![args[0].dims[0]],
                }))
            }
            Prim::Vecmat => {
                arity(2)?;
                need_rank(args[0], 1)?;
                need_rank(args[1], 2)?;
                same_elem(args[0], args[1])?;
                same_dim(args[0].dims[0], args[1].dims[0])?;
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims: vec![args[1].dims[1]],
                }))
            }
            Prim::Matmul => {
                arity(2)?;
                need_rank(args[0], 2)?;
                need_rank(args[1], 2)?;
                same_elem(args[0], args[1])?;
                same_dim(args[0].dims[1], args[1].dims[0])?;
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims: vec![args[0].dims[0], args[1].dims[1]],
                }))
            }
            Prim::Transpose => {
                arity(1)?;
                need_rank(args[0], 2)?;
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims: vec![args[0].dims[1], args[0].dims[0]],
                }))
            }
            Prim::Outer => {
                arity(2)?;
                need_rank(args[0], 1)?;
                need_rank(args[1], 1)?;
                same_elem(args[0], args[1])?;
                Ok(Some(TensorType {
                    elem: args[0].elem,
                    dims: vec![args[0].dims[0], args[1].dims[0]],
                }))
            }
            Prim::Reduce(op) => {
                arity(1)?;
                need_rank(args[0], 1)?;
                match op {
                    ReduceOp::Argmax | ReduceOp::Argmin => scalar(S::Usize),
                    ReduceOp::Mean | ReduceOp::LogSumExp => {
                        need_float(args[0])?;
                        scalar(args[0].elem)
                    }
                    ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min => {
                        if !args[0].elem.is_numeric() {
                            return Err(format!("{} needs numbers", self.name()));
                        }
                        scalar(args[0].elem)
                    }
                }
            }
            Prim::Softmax => {
                arity(1)?;
                need_rank(args[0], 1)?;
                need_float(args[0])?;
                Ok(Some(args[0].clone()))
            }
            Prim::Uniform | Prim::Normal => {
                arity(0)?;
                scalar(S::F64)
            }
            Prim::Bernoulli => {
                arity(1)?;
                if *args[0] != TensorType::scalar(S::F64) {
                    return Err("bernoulli needs an f64 probability".into());
                }
                scalar(S::Bool)
            }
            Prim::UniformLike | Prim::NormalLike => {
                arity(1)?;
                let elem = if args[0].elem.is_float() {
                    args[0].elem
                } else {
                    S::F64
                };
                Ok(Some(TensorType {
                    elem,
                    dims: args[0].dims.clone(),
                }))
            }
            Prim::Assert { .. } => {
                arity(1)?;
                if *args[0] != TensorType::scalar(S::Bool) {
                    return Err("assert needs a bool".into());
                }
                Ok(None)
            }
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prim::Const(s) => write!(f, "const {s}"),
            Prim::LoadStatic(id) => write!(f, "load_static {id}"),
            Prim::SymbolValue(s) => write!(f, "symbol_value sym{}", s.0),
            Prim::Cast(t) => write!(f, "cast.{t}"),
            Prim::Fill(Dim::Fixed(n)) => write!(f, "fill.{n}"),
            Prim::Fill(Dim::Symbolic(s)) => write!(f, "fill.sym{}", s.0),
            Prim::Assert { message } => write!(f, "assert {message:?}"),
            other => f.write_str(other.name()),
        }
    }
}
