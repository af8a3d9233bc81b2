//! The primitive operations of the IR and their typing rules.
//!
//! A primitive takes variables and produces at most one variable. Its meaning
//! (what it computes on values) lives in the `kernels` crate; here is only its
//! name, its arity and the type of its result, which the verifier and the
//! lowering share so that the two can never disagree.
//!
//! The names, signature classes and spellings come from the table of
//! operations (`autobatch_ops::for_each_op!`); the typing rule of each
//! [`Signature`] class is written once, in [`Prim::result_type`].

use autobatch_types::{Dim, Scalar, ScalarType, SymbolId, TensorType};
use std::fmt;

pub use autobatch_ops::{BinaryOp, CompareOp, ReduceOp, Signature, Spelling, TernaryOp, UnaryOp};

use crate::StaticId;

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
    /// `(a, b, x)`: floats of one type and shape, elementwise.
    Ternary(TernaryOp),
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
    /// `(a, i)`: the `len` items `a[i..i + len]`; faults unless they all lie in `a`.
    Slice(Dim),
    /// `(a, i, v)`: a copy of `a` with `a[i..i + n] = v`, `n` the length of
    /// `v`; faults unless the range lies in `a`.
    SliceSet,
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
    /// `(a: [K, K])`: the lower Cholesky factor (a `domain_error` unless
    /// `a` is symmetric positive definite).
    Cholesky,
    /// `(l: [K, K], b: [K] or [K, M])`: `L⁻¹ b`, `L` the lower triangle of `l`.
    TriSolve,
    /// `(l, b)` as `TriSolve`: `L⁻ᵀ b`.
    TriSolveT,
    /// `(a: [K, K])`: the lower triangle of `a`.
    Tril,
    /// `(l, dl)`, both `[K, K]`: the adjoint of `cholesky`'s operand.
    CholeskyAdjoint,
    /// `(a: [K, K])`: the diagonal `[K]`.
    Diagonal,
    /// `(v: [K])`: the diagonal matrix `[K, K]`.
    DiagMatrix,
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
    /// `(cond: bool)`, no result: faults with `domain_error` and `message` if
    /// `cond` is false (the argument checks of the distributions).
    Check {
        message: String,
    },
    /// The operands of the declared parameter types: what the host function
    /// registered under the name gives (a fault if it fails or gives a value
    /// of another type or shape). Never computed once for all members, even
    /// of shared operands: each member's call is its own.
    Host(Box<HostPrim>),
    /// A contribution to the adjoint of a static in a gradient taken with
    /// respect to statics (`autobatch run --grad-statics`), appended to
    /// the member's log of adjoints; no result. The operands by
    /// [`AdjointKind`]. Like a host primitive, each member's operation is
    /// its own: never computed once for all members.
    StaticAdjoint(StaticAdjoint),
    /// One or more operands, no result: appends their values, in order, to
    /// the lane's tape (the values a derived function's backward part reads
    /// back). Each lane's operation is its own.
    TapePush,
    /// No operands: takes the value pushed last off the lane's tape, which
    /// has the payload's type (its shape, for a symbolic dimension, that of
    /// the member's lengths).
    TapePop(TensorType),
    /// No operands; a `bool`: whether the lane's member holds more than
    /// half the run's tape bound along the lane's path
    /// ([`TAPE_OVER_SHARE`]), so that a derivation recomputes a call's
    /// forward part in the backward part instead of keeping its tape.
    TapeOver,
    /// No operands; an `i64` (the bytes the lane's tape holds): marks the
    /// lane's tape where it is now, for the [`Prim::TapeSettle`] that
    /// follows (marks nest: each settle takes the latest).
    TapeMark,
    /// No operands; a `bool`: takes the latest [`Prim::TapeMark`] off the
    /// lane's tape and, when the member then holds more than half the
    /// run's tape bound ([`tape_over`]), drops everything pushed since the
    /// mark (true); else keeps it (false). What a derivation does after a
    /// call whose callee's tape it may recompute instead of keeping.
    TapeSettle,
}

/// `tape_over` is true when the tape holds more than the bound divided by
/// this: what is left is room for the tape of one recomputed call.
pub const TAPE_OVER_SHARE: usize = 2;

/// [`Prim::TapeOver`]'s value for a lane whose member holds `held` tape
/// bytes under a run's bound of `bound` bytes.
pub fn tape_over(held: usize, bound: usize) -> bool {
    held > bound / TAPE_OVER_SHARE
}

/// See [`Prim::StaticAdjoint`]: which static, and the form of the contribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StaticAdjoint {
    pub id: StaticId,
    pub kind: AdjointKind,
}

/// The form of a [`StaticAdjoint`] contribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdjointKind {
    /// `(a)`: `a`, of the static's type.
    Dense,
    /// `(i, r)`: `r` added to row `i` of the static (`S[i]`'s type).
    Row,
    /// `(u: [M], v: [K])`, the static `[[F; K]; M]`: `outer(u, v)` (the
    /// adjoint of `matvec(S, v)` with the result's adjoint `u`).
    Outer,
    /// `(i, u: [M], v: [K])`, the static `[[[F; K]; M]; R]`: `outer(u, v)`
    /// added to `S[i]` (the adjoint of `matvec(S[i], v)`).
    OuterRow,
}

impl AdjointKind {
    pub const ALL: [AdjointKind; 4] = [
        AdjointKind::Dense,
        AdjointKind::Row,
        AdjointKind::Outer,
        AdjointKind::OuterRow,
    ];

    /// The suffix in the text form: `static_adjoint.outer s3`.
    pub fn name(self) -> &'static str {
        match self {
            AdjointKind::Dense => "dense",
            AdjointKind::Row => "row",
            AdjointKind::Outer => "outer",
            AdjointKind::OuterRow => "outer_row",
        }
    }
}

/// A host primitive (a bodiless `fn` of an `extern "autobatch"` block), as
/// the operations that call it carry it.
#[derive(Clone, Debug, PartialEq)]
pub struct HostPrim {
    pub name: String,
    pub params: Vec<TensorType>,
    pub result: TensorType,
}

/// The [`Prim`] that a row of the table of operations lowers to, from the
/// row's group and variant (`Unary Exp` is `Prim::Unary(UnaryOp::Exp)`,
/// `Plain Dot` is `Prim::Dot`). Rows of group `Payload` have none: the
/// compiler makes those primitives with their data.
#[macro_export]
macro_rules! prim_of_row {
    (Unary $op:ident) => {
        $crate::Prim::Unary($crate::UnaryOp::$op)
    };
    (Binary $op:ident) => {
        $crate::Prim::Binary($crate::BinaryOp::$op)
    };
    (Ternary $op:ident) => {
        $crate::Prim::Ternary($crate::TernaryOp::$op)
    };
    (Compare $op:ident) => {
        $crate::Prim::Compare($crate::CompareOp::$op)
    };
    (Reduce $op:ident) => {
        $crate::Prim::Reduce($crate::ReduceOp::$op)
    };
    (Plain $op:ident) => {
        $crate::Prim::$op
    };
    (Payload $op:ident) => {
        compile_error!(concat!(
            "`",
            stringify!($op),
            "` carries a payload; a builtin cannot lower to it"
        ))
    };
}

/// The pattern matching the primitives of a row (any payload).
macro_rules! row_pattern {
    (Payload $op:ident) => {
        Prim::$op { .. }
    };
    ($group:ident $op:ident) => {
        prim_of_row!($group $op)
    };
}

/// The primitive of a row, if it has no payload.
macro_rules! plain_prim {
    (Payload $op:ident) => {
        None
    };
    ($group:ident $op:ident) => {
        Some(prim_of_row!($group $op))
    };
}

/// `Prim`'s view of the table: every variant's name, class and spelling.
macro_rules! prim_table {
    ($($(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?,
        $grad:ident, $spelling:ident $(($user:literal))?])*) => {
        impl Prim {
            /// The name used in the text form and in `op_counts`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(row_pattern!($g $o) => $ir,)*
                }
            }

            /// The typing rule: see [`Prim::result_type`].
            pub fn signature(&self) -> Signature {
                match self {
                    $(row_pattern!($g $o) => Signature::$s $({$($sa)*})?,)*
                }
            }

            /// How the user writes it ([`Spelling::Internal`] if only the
            /// compiler makes it).
            pub fn spelling(&self) -> Spelling {
                match self {
                    $(row_pattern!($g $o) => Spelling::$spelling $(($user))?,)*
                }
            }

            /// The primitive whose text form is `name` alone: every primitive but
            /// those that carry a constant, static, symbol, type, length or message.
            pub fn from_plain_name(name: &str) -> Option<Prim> {
                match name {
                    $($ir => plain_prim!($g $o),)*
                    _ => None,
                }
            }
        }
    };
}

autobatch_ops::for_each_op!(prim_table);

impl Prim {
    /// Whether this primitive is bookkeeping introduced by the compiler
    /// (constants, copies, loads) rather than an operation the user wrote.
    /// Only user operations appear in `op_counts`.
    pub fn is_bookkeeping(&self) -> bool {
        self.spelling() == Spelling::Internal
    }

    /// Whether the primitive draws from the member's random stream.
    pub fn is_random(&self) -> bool {
        self.signature().is_random()
    }

    /// Whether this calls a host function (computed per member, never once).
    pub fn is_host(&self) -> bool {
        matches!(self, Prim::Host(_))
    }

    /// Whether each member's operation must run on its own, never once for
    /// all members even when every operand is shared: a host function's
    /// call, and a contribution to a member's log of static adjoints.
    pub fn is_per_member(&self) -> bool {
        matches!(
            self,
            Prim::Host(_)
                | Prim::StaticAdjoint(_)
                | Prim::TapePush
                | Prim::TapePop(_)
                | Prim::TapeOver
                | Prim::TapeMark
                | Prim::TapeSettle
        )
    }

    /// Whether the operation moves values onto or off the lane's tape, or
    /// reads how much it holds.
    pub fn is_tape(&self) -> bool {
        matches!(
            self,
            Prim::TapePush | Prim::TapePop(_) | Prim::TapeOver | Prim::TapeMark | Prim::TapeSettle
        )
    }

    /// Whether the operation matters for something besides its result
    /// (so that it is never removed when nothing reads its result).
    pub fn has_effect(&self) -> bool {
        self.is_random()
            || matches!(
                self,
                Prim::Host(_)
                    | Prim::Assert { .. }
                    | Prim::Check { .. }
                    | Prim::StaticAdjoint(_)
                    | Prim::TapePush
                    | Prim::TapePop(_)
                    | Prim::TapeOver
                    | Prim::TapeMark
                    | Prim::TapeSettle
            )
    }

    /// Whether running the primitive on operands of the types `operands`
    /// may stop the member with a fault: an integer `/` or `%`
    /// (`division_by_zero`), indexing and indexed assignment
    /// (`index_out_of_bounds`), an assertion (`assertion_failed`), a
    /// host function's call (`host_error`) and a push onto a tape past the
    /// run's bound (`tape_limit`). Every other primitive has a
    /// value for every operand the verifier accepts (integers wrap, float
    /// arithmetic gives NaN or an infinity, casts saturate, reductions and
    /// draws of empty arrays have values). With no operand types given, a
    /// division is taken to be an integer one.
    ///
    /// An operation that may fault is part of what the program does even
    /// when nothing reads its result: a transformation must not remove it,
    /// nor run it where the member's path does not.
    pub fn may_fault(&self, operands: &[&TensorType]) -> bool {
        match self {
            Prim::Binary(op) => {
                let integer = operands.first().is_none_or(|t| !t.elem.is_float());
                integer && divides(*op)
            }
            Prim::Index
            | Prim::IndexSet
            | Prim::Slice(_)
            | Prim::SliceSet
            | Prim::Assert { .. }
            | Prim::Check { .. }
            | Prim::Cholesky
            | Prim::TapePush
            | Prim::Host(_) => true,
            Prim::Const(_)
            | Prim::Copy
            | Prim::LoadStatic(_)
            | Prim::SymbolValue(_)
            | Prim::Unary(_)
            | Prim::Ternary(_)
            | Prim::Compare(_)
            | Prim::Cast(_)
            | Prim::Select
            | Prim::Fill(_)
            | Prim::Stack
            | Prim::Dot
            | Prim::Matvec
            | Prim::Vecmat
            | Prim::Matmul
            | Prim::Transpose
            | Prim::Outer
            | Prim::TriSolve
            | Prim::TriSolveT
            | Prim::Tril
            | Prim::CholeskyAdjoint
            | Prim::Diagonal
            | Prim::DiagMatrix
            | Prim::Reduce(_)
            | Prim::Softmax
            | Prim::Uniform
            | Prim::Normal
            | Prim::Bernoulli
            | Prim::UniformLike
            | Prim::NormalLike
            | Prim::StaticAdjoint(_)
            | Prim::TapePop(_)
            | Prim::TapeOver
            | Prim::TapeMark
            | Prim::TapeSettle => false,
        }
    }

    /// [`Prim::may_fault`], knowing the values of some integer scalar
    /// operands (`constant(i)` is operand `i`'s, if known): a division by
    /// a known divisor other than zero cannot fault, nor can an index known
    /// to be within an array of fixed length.
    pub fn may_fault_knowing(
        &self,
        operands: &[&TensorType],
        constant: impl Fn(usize) -> Option<i128>,
    ) -> bool {
        if !self.may_fault(operands) {
            return false;
        }
        match self {
            Prim::Binary(_) => constant(1).is_none_or(|c| c == 0),
            Prim::Index | Prim::IndexSet => {
                let length = operands.first().and_then(|a| a.dims.first());
                match (length, constant(1)) {
                    (Some(Dim::Fixed(n)), Some(c)) => !(0..i128::from(*n)).contains(&c),
                    _ => true,
                }
            }
            _ => true,
        }
    }

    /// The type of the result for operands of types `args`, `None` for a
    /// primitive without result, or a message saying why the operands do not fit.
    /// `static_type` gives the declared type of a static.
    ///
    /// One rule per [`Signature`] class; the rules of `Value`, `Cast` and
    /// `Fill` read the primitive's payload.
    pub fn result_type(
        &self,
        args: &[&TensorType],
        static_type: &dyn Fn(StaticId) -> Option<TensorType>,
    ) -> Result<Option<TensorType>, String> {
        let signature = self.signature();
        let name = self.name();
        match signature.arity() {
            Some(n) if args.len() != n => {
                return Err(format!("{name} takes {n} operand(s), got {}", args.len()))
            }
            _ => {}
        }
        let rule = Rule { name, args };
        use Signature as S;
        match signature {
            S::Value => self.value_type(static_type),
            S::Cast => match self {
                Prim::Cast(to) => rule.cast(*to),
                _ => Err(format!("{name} has no target type")),
            },
            S::Fill => match self {
                Prim::Fill(d) => rule.fill(*d),
                _ => Err(format!("{name} has no length")),
            },
            S::Slice => match self {
                Prim::Slice(d) => rule.slice(*d),
                _ => Err(format!("{name} has no length")),
            },
            S::Copy => Ok(Some(args[0].clone())),
            S::SignedMap => rule.map(|e| e.is_numeric(), "numbers"),
            S::LogicMap => rule.map(|e| !e.is_float(), "bool or integers"),
            S::FloatMap => {
                rule.need_float(args[0])?;
                Ok(Some(args[0].clone()))
            }
            S::FloatPredicate => {
                rule.need_float(args[0])?;
                rule.shaped(ScalarType::Bool, &args[0].dims)
            }
            S::Arithmetic => rule.broadcast(|e| e.is_numeric(), "numbers"),
            S::Bitwise => rule.broadcast(|e| !e.is_float(), "bool or integers"),
            S::FloatBinary => rule.broadcast(|e| e.is_float(), "floats"),
            S::Shift | S::IntPower => rule.shift(),
            S::FloatPowi => rule.powi(),
            S::Compare => rule.compare(),
            S::FloatTernary => rule.ternary(),
            S::Reduce => {
                rule.need_rank(args[0], 1)?;
                if !args[0].elem.is_numeric() {
                    return Err(format!("{name} needs numbers"));
                }
                rule.scalar(args[0].elem)
            }
            S::FloatReduce => {
                rule.need_rank(args[0], 1)?;
                rule.need_float(args[0])?;
                rule.scalar(args[0].elem)
            }
            S::ArgReduce => {
                rule.need_rank(args[0], 1)?;
                rule.scalar(ScalarType::Usize)
            }
            S::FloatVectorMap => {
                rule.need_rank(args[0], 1)?;
                rule.need_float(args[0])?;
                Ok(Some(args[0].clone()))
            }
            S::Product {
                left,
                right,
                contract,
                ..
            } => rule.product(left, right, contract),
            S::Transpose => {
                rule.need_rank(args[0], 2)?;
                rule.shaped(args[0].elem, &[args[0].dims[1], args[0].dims[0]])
            }
            S::SquareMap => {
                rule.need_square(args[0])?;
                Ok(Some(args[0].clone()))
            }
            S::Diagonal => {
                rule.need_square(args[0])?;
                rule.shaped(args[0].elem, &args[0].dims[..1])
            }
            S::DiagMatrix => {
                rule.need_rank(args[0], 1)?;
                rule.need_float(args[0])?;
                rule.shaped(args[0].elem, &[args[0].dims[0], args[0].dims[0]])
            }
            S::TriangularSolve => {
                let (l, b) = (args[0], args[1]);
                rule.need_square(l)?;
                rule.same_elem(l, b)?;
                if b.dims.is_empty() || b.dims.len() > 2 {
                    return Err(format!("{name} needs a 1-D or 2-D right-hand side"));
                }
                rule.same_dim(l.dims[0], b.dims[0])?;
                Ok(Some(b.clone()))
            }
            S::Select => rule.select(),
            S::Draw => rule.scalar(ScalarType::F64),
            S::DrawLike => {
                let elem = if args[0].elem.is_float() {
                    args[0].elem
                } else {
                    ScalarType::F64
                };
                rule.shaped(elem, &args[0].dims)
            }
            S::Bernoulli => {
                if *args[0] != TensorType::scalar(ScalarType::F64) {
                    return Err(format!("{name} needs an f64 probability"));
                }
                rule.scalar(ScalarType::Bool)
            }
            S::Stack => rule.stack(),
            S::Index => rule.index(),
            S::IndexSet => rule.index_set(),
            S::SliceSet => rule.slice_set(),
            S::Assert => {
                if *args[0] != TensorType::scalar(ScalarType::Bool) {
                    return Err(format!("{name} needs a bool"));
                }
                Ok(None)
            }
            S::Host => match self {
                Prim::Host(host) => rule.host(host),
                _ => Err(format!("{name} has no declaration")),
            },
            S::TapePush => {
                if args.is_empty() {
                    return Err(format!("{name} takes one or more operands"));
                }
                Ok(None)
            }
            S::StaticAdjoint => match self {
                Prim::StaticAdjoint(adjoint) => match static_type(adjoint.id) {
                    Some(ty) => rule.static_adjoint(adjoint.kind, &ty),
                    None => Err(format!("no static {}", adjoint.id)),
                },
                _ => Err(format!("{name} has no static")),
            },
        }
    }

    /// The type of a primitive of class `Value`, from its payload.
    fn value_type(
        &self,
        static_type: &dyn Fn(StaticId) -> Option<TensorType>,
    ) -> Result<Option<TensorType>, String> {
        match self {
            Prim::Const(s) => Ok(Some(TensorType::scalar(s.ty()))),
            Prim::LoadStatic(id) => static_type(*id)
                .map(Some)
                .ok_or_else(|| format!("no static {id}")),
            Prim::SymbolValue(_) => Ok(Some(TensorType::scalar(ScalarType::Usize))),
            Prim::TapePop(ty) => Ok(Some(ty.clone())),
            Prim::TapeOver | Prim::TapeSettle => Ok(Some(TensorType::scalar(ScalarType::Bool))),
            Prim::TapeMark => Ok(Some(TensorType::scalar(ScalarType::I64))),
            other => Err(format!("{} has no value", other.name())),
        }
    }
}

/// Whether the binary operation divides (and so faults on an integer zero
/// divisor). Every operation is named, so that a new one is decided here.
fn divides(op: BinaryOp) -> bool {
    use BinaryOp as B;
    match op {
        B::Div | B::Rem => true,
        B::Add
        | B::Sub
        | B::Mul
        | B::BitAnd
        | B::BitOr
        | B::BitXor
        | B::Shl
        | B::Shr
        | B::Powi
        | B::Powf
        | B::Atan2
        | B::LogGammaP
        | B::LogGammaQ
        | B::LogGammaPDa
        | B::LogGammaQDa
        | B::LogGammaPInv
        | B::PoissonInv
        | B::VonMisesDraw
        | B::Lbeta
        | B::Max
        | B::Min
        | B::Pow => false,
    }
}

/// The typing rules of the classes, for the operands `args` of a primitive
/// named `name` (in messages); the arity is checked already.
struct Rule<'a, 'b> {
    name: &'static str,
    args: &'a [&'b TensorType],
}

impl Rule<'_, '_> {
    /// The operands the declaration names, one by one; its result.
    fn host(&self, host: &HostPrim) -> Result<Option<TensorType>, String> {
        if self.args.len() != host.params.len() {
            return Err(format!(
                "host {} takes {} operand(s), got {}",
                host.name,
                host.params.len(),
                self.args.len()
            ));
        }
        for (k, (arg, param)) in self.args.iter().zip(&host.params).enumerate() {
            if *arg != param {
                return Err(format!(
                    "operand {k} of host {} has another type than declared",
                    host.name
                ));
            }
        }
        Ok(Some(host.result.clone()))
    }

    fn scalar(&self, elem: ScalarType) -> Result<Option<TensorType>, String> {
        Ok(Some(TensorType::scalar(elem)))
    }

    fn shaped(&self, elem: ScalarType, dims: &[Dim]) -> Result<Option<TensorType>, String> {
        Ok(Some(TensorType {
            elem,
            dims: dims.to_vec(),
        }))
    }

    fn need_float(&self, t: &TensorType) -> Result<(), String> {
        if t.elem.is_float() {
            Ok(())
        } else {
            Err(format!("{} needs floats, got {}", self.name, t.elem))
        }
    }

    /// A square 2-D float operand.
    fn need_square(&self, t: &TensorType) -> Result<(), String> {
        self.need_rank(t, 2)?;
        self.need_float(t)?;
        self.same_dim(t.dims[0], t.dims[1])
    }

    fn need_rank(&self, t: &TensorType, r: usize) -> Result<(), String> {
        if t.dims.len() == r {
            Ok(())
        } else {
            Err(format!(
                "{} needs a {}-D operand, got {} dims",
                self.name,
                r,
                t.dims.len()
            ))
        }
    }

    fn same_elem(&self, a: &TensorType, b: &TensorType) -> Result<(), String> {
        if a.elem == b.elem {
            Ok(())
        } else {
            Err(format!(
                "{}: operand types {} and {} differ",
                self.name, a.elem, b.elem
            ))
        }
    }

    fn same_dim(&self, a: Dim, b: Dim) -> Result<(), String> {
        if a == b {
            Ok(())
        } else {
            Err(format!("{}: lengths {:?} and {:?} differ", self.name, a, b))
        }
    }

    /// One operand whose element type `fits`; the same type.
    fn map(&self, fits: fn(ScalarType) -> bool, need: &str) -> Result<Option<TensorType>, String> {
        if !fits(self.args[0].elem) {
            return Err(format!("{} needs {need}", self.name));
        }
        Ok(Some(self.args[0].clone()))
    }

    /// Two operands of one element type that `fits`, broadcast.
    fn broadcast(
        &self,
        fits: fn(ScalarType) -> bool,
        need: &str,
    ) -> Result<Option<TensorType>, String> {
        let (a, b) = (self.args[0], self.args[1]);
        self.same_elem(a, b)?;
        if !fits(a.elem) {
            return Err(format!("{} needs {need}", self.name));
        }
        if a.is_scalar() {
            Ok(Some(b.clone()))
        } else if b.is_scalar() || a.dims == b.dims {
            Ok(Some(a.clone()))
        } else {
            Err(format!("{}: operand shapes differ", self.name))
        }
    }

    /// `FloatTernary`: three floats of one type and shape.
    fn ternary(&self) -> Result<Option<TensorType>, String> {
        let (a, b, x) = (self.args[0], self.args[1], self.args[2]);
        self.need_float(a)?;
        if a != b || a != x {
            return Err(format!("{}: the operands' types differ", self.name));
        }
        Ok(Some(a.clone()))
    }

    /// `Shift` and `IntPower`: integers; the right a scalar or of the left's shape.
    fn shift(&self) -> Result<Option<TensorType>, String> {
        let (a, b) = (self.args[0], self.args[1]);
        if !a.elem.is_integer() || !b.elem.is_integer() || !b.is_scalar() && b.dims != a.dims {
            return Err(format!("{} needs integers", self.name));
        }
        Ok(Some(a.clone()))
    }

    fn powi(&self) -> Result<Option<TensorType>, String> {
        let (a, b) = (self.args[0], self.args[1]);
        self.need_float(a)?;
        if b.elem != ScalarType::I32 || !b.is_scalar() {
            return Err(format!("{} needs an i32 scalar exponent", self.name));
        }
        Ok(Some(a.clone()))
    }

    /// `Compare`: two operands of one element type, broadcast as
    /// arithmetic is; `bool`s of the result's shape. The language compares
    /// scalars only; the expansions of the distributions compare vectors.
    fn compare(&self) -> Result<Option<TensorType>, String> {
        let (a, b) = (self.args[0], self.args[1]);
        self.same_elem(a, b)?;
        let shape = if a.is_scalar() {
            b
        } else if b.is_scalar() || a.dims == b.dims {
            a
        } else {
            return Err(format!("{}: operand shapes differ", self.name));
        };
        Ok(Some(TensorType {
            elem: ScalarType::Bool,
            dims: shape.dims.clone(),
        }))
    }

    /// `Product`: ranks `left` and `right`; with `contract`, the left's last
    /// axis against the right's first.
    fn product(
        &self,
        left: usize,
        right: usize,
        contract: bool,
    ) -> Result<Option<TensorType>, String> {
        let (a, b) = (self.args[0], self.args[1]);
        self.need_rank(a, left)?;
        self.need_rank(b, right)?;
        self.same_elem(a, b)?;
        let mut dims = a.dims.clone();
        let mut rest = &b.dims[..];
        if contract {
            self.same_dim(a.dims[left - 1], b.dims[0])?;
            dims.pop();
            rest = &b.dims[1..];
        }
        dims.extend_from_slice(rest);
        self.shaped(a.elem, &dims)
    }

    fn select(&self) -> Result<Option<TensorType>, String> {
        let (c, a, b) = (self.args[0], self.args[1], self.args[2]);
        if c.elem != ScalarType::Bool || !(c.is_scalar() || c.dims == a.dims) {
            return Err(format!(
                "{} needs a bool condition (scalar or of the operands' shape)",
                self.name
            ));
        }
        if a != b {
            return Err(format!(
                "{}: the two alternatives have different types",
                self.name
            ));
        }
        Ok(Some(a.clone()))
    }

    fn cast(&self, to: ScalarType) -> Result<Option<TensorType>, String> {
        self.shaped(to, &self.args[0].dims)
    }

    fn fill(&self, d: Dim) -> Result<Option<TensorType>, String> {
        let mut dims = vec![d];
        dims.extend(self.args[0].dims.iter().copied());
        self.shaped(self.args[0].elem, &dims)
    }

    fn stack(&self) -> Result<Option<TensorType>, String> {
        let args = self.args;
        if args.is_empty() {
            return Err(format!("{} needs at least one operand", self.name));
        }
        if args.iter().any(|t| *t != args[0]) {
            return Err(format!("{}: elements have different types", self.name));
        }
        let mut dims = vec![Dim::Fixed(args.len() as u64)];
        dims.extend(args[0].dims.iter().copied());
        self.shaped(args[0].elem, &dims)
    }

    fn index(&self) -> Result<Option<TensorType>, String> {
        let (a, i) = (self.args[0], self.args[1]);
        if a.is_scalar() || !i.elem.is_integer() || !i.is_scalar() {
            return Err(format!(
                "{} needs an array and an integer scalar",
                self.name
            ));
        }
        self.shaped(a.elem, &a.dims[1..])
    }

    fn index_set(&self) -> Result<Option<TensorType>, String> {
        let (a, i, v) = (self.args[0], self.args[1], self.args[2]);
        if a.is_scalar() || !i.elem.is_integer() || !i.is_scalar() {
            return Err(format!(
                "{} needs an array and an integer scalar",
                self.name
            ));
        }
        if v.elem != a.elem || v.dims[..] != a.dims[1..] {
            return Err(format!("{}: the value does not fit the array", self.name));
        }
        Ok(Some(a.clone()))
    }

    fn slice(&self, len: Dim) -> Result<Option<TensorType>, String> {
        let (a, i) = (self.args[0], self.args[1]);
        if a.is_scalar() || !i.elem.is_integer() || !i.is_scalar() {
            return Err(format!(
                "{} needs an array and an integer scalar",
                self.name
            ));
        }
        let mut dims = vec![len];
        dims.extend(a.dims[1..].iter().copied());
        self.shaped(a.elem, &dims)
    }

    fn slice_set(&self) -> Result<Option<TensorType>, String> {
        let (a, i, v) = (self.args[0], self.args[1], self.args[2]);
        if a.is_scalar() || v.is_scalar() || !i.elem.is_integer() || !i.is_scalar() {
            return Err(format!(
                "{} needs two arrays and an integer scalar",
                self.name
            ));
        }
        if v.elem != a.elem || v.dims[1..] != a.dims[1..] {
            return Err(format!("{}: the value does not fit the array", self.name));
        }
        Ok(Some(a.clone()))
    }
}

impl Rule<'_, '_> {
    /// The operands of a contribution of `kind` to a static of type `ty`.
    fn static_adjoint(
        &self,
        kind: AdjointKind,
        ty: &TensorType,
    ) -> Result<Option<TensorType>, String> {
        let name = self.name;
        let args = self.args;
        let expect = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "{name}.{} takes {n} operand(s), got {}",
                    kind.name(),
                    args.len()
                ))
            }
        };
        if !ty.elem.is_float() {
            return Err(format!("{name} needs a float static"));
        }
        let fits = match kind {
            AdjointKind::Dense => {
                expect(1)?;
                args[0] == ty
            }
            AdjointKind::Row => {
                expect(2)?;
                !ty.dims.is_empty()
                    && args[0].is_scalar()
                    && args[0].elem.is_integer()
                    && args[1].elem == ty.elem
                    && args[1].dims[..] == ty.dims[1..]
            }
            AdjointKind::Outer => {
                expect(2)?;
                ty.dims.len() == 2
                    && args.iter().all(|a| a.elem == ty.elem && a.dims.len() == 1)
                    && args[0].dims[0] == ty.dims[0]
                    && args[1].dims[0] == ty.dims[1]
            }
            AdjointKind::OuterRow => {
                expect(3)?;
                ty.dims.len() == 3
                    && args[0].is_scalar()
                    && args[0].elem.is_integer()
                    && args[1..]
                        .iter()
                        .all(|a| a.elem == ty.elem && a.dims.len() == 1)
                    && args[1].dims[0] == ty.dims[1]
                    && args[2].dims[0] == ty.dims[2]
            }
        };
        if fits {
            Ok(None)
        } else {
            Err(format!(
                "{name}.{}: the operands do not fit the static",
                kind.name()
            ))
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
            Prim::Slice(Dim::Fixed(n)) => write!(f, "slice.{n}"),
            Prim::Slice(Dim::Symbolic(s)) => write!(f, "slice.sym{}", s.0),
            Prim::Assert { message } => write!(f, "assert {message:?}"),
            Prim::Check { message } => write!(f, "check {message:?}"),
            Prim::StaticAdjoint(a) => write!(f, "static_adjoint.{} {}", a.kind.name(), a.id),
            Prim::TapePop(ty) => {
                let symbol = |s: SymbolId| format!("sym{}", s.0);
                let shown = ty.display(&symbol).to_string();
                write!(f, "tape_pop {shown}")
            }
            Prim::Host(host) => {
                let symbol = |s: SymbolId| format!("sym{}", s.0);
                write!(f, "host {}(", host.name)?;
                for (k, param) in host.params.iter().enumerate() {
                    let sep = if k == 0 { "" } else { ", " };
                    write!(f, "{sep}{}", param.display(&symbol))?;
                }
                let result = host.result.display(&symbol).to_string();
                write!(f, ") -> {result}")
            }
            other => f.write_str(other.name()),
        }
    }
}
