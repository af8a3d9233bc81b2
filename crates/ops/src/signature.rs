//! Signature classes: the typing rules that operations share.
//!
//! Each row of the table names one class. The rule itself is written once
//! on each side of the pipeline: the front end types a call over its
//! inference types (with the diagnostics the user sees), the IR's
//! `Prim::result_type` over concrete `TensorType`s (for the lowering and the
//! verifier). Both sides `match` on this enum, so a new class is a compile
//! error until both have its rule; a new operation of an existing class needs
//! neither.
//!
//! "Broadcast" below: two operands of the same shape, or one of them a scalar
//! that is repeated over the other's shape.

/// The typing rule of an operation. The comment on each class says what its
/// operands must be and what its result is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signature {
    // ---- elementwise, one operand: the result has the operand's shape
    /// Numbers; the same type (wrapping on integers). The front end rejects
    /// `usize`, which has no sign. `-x`, `x.abs()`.
    SignedMap,
    /// `bool` or integers; the same type. `!x`.
    LogicMap,
    /// Floats; the same type. `x.exp()`, `sigmoid(x)`.
    FloatMap,
    /// Floats; `bool`s of the same shape. `x.is_nan()`.
    FloatPredicate,

    // ---- elementwise, two operands
    /// Numbers of one type, broadcast; that type. `a + b`, `x.max(y)`.
    Arithmetic,
    /// `bool`s or integers of one type, broadcast; that type. `a & b`.
    Bitwise,
    /// Floats of one type, broadcast; that type. `x.powf(y)`.
    FloatBinary,
    /// Integers; the right operand an integer scalar of any integer type, or
    /// an array of the left's shape; the left's type. `a << k`.
    Shift,
    /// An integer base and an integer exponent of any integer type; the
    /// base's type. The front end asks for a scalar exponent; the IR also
    /// takes one of the base's shape (as for `Shift`). `n.pow(k)`.
    IntPower,
    /// A float base and an `i32` scalar exponent; the base's type. `x.powi(n)`.
    FloatPowi,
    /// Two scalars of one type; `bool`. `a < b`.
    Compare,

    // ---- elementwise, three operands
    /// Floats of one type and one shape; that type. The incomplete beta
    /// function's `(a, b, x)` (the lowering broadcasts scalars first).
    FloatTernary,

    // ---- arrays
    /// A 1-D array of numbers; its element. `sum(a)`.
    Reduce,
    /// A 1-D array of floats; its element. `mean(a)`.
    FloatReduce,
    /// A 1-D array of numbers; a `usize` index. `argmax(a)`.
    ArgReduce,
    /// A 1-D array of floats; the same type. `softmax(a)`.
    FloatVectorMap,
    /// Arrays of numbers of one element type, of ranks `left` and `right`
    /// (1 or 2). With `contract`, the last axis of the left is summed against
    /// the first axis of the right (their lengths must agree) and the result
    /// has the remaining axes; without, the result has all axes of both
    /// (`outer`). `lengths` is the note shown when the lengths disagree.
    Product {
        left: usize,
        right: usize,
        contract: bool,
        lengths: &'static str,
    },
    /// A 2-D array of numbers; its axes swapped.
    Transpose,
    /// A square 2-D array of floats; the same type. `cholesky_decompose(a)`.
    SquareMap,
    /// `(l, b)`: a square `[K, K]` float array and a `[K]` or `[K, M]`
    /// array of its element type; `b`'s type. `mdivide_left_tri_low(l, b)`.
    TriangularSolve,
    /// A square 2-D array of floats; its diagonal (1-D). `diagonal(a)`.
    Diagonal,
    /// A 1-D array of floats; the square matrix with it on the diagonal.
    /// `diag_matrix(v)`.
    DiagMatrix,
    /// `(cond, a, b)`: `cond` a `bool` or `bool` array of `a`'s shape, `a`
    /// and `b` of one type; that type.
    Select,

    // ---- random draws (from the member's own stream)
    /// No operand; an `f64`.
    Draw,
    /// Any operand; draws shaped like it, in its float type (`f64` if it is
    /// not a float).
    DrawLike,
    /// An `f64` scalar probability; a `bool`.
    Bernoulli,

    // ---- written by syntax, or made by the compiler
    /// One operand; the same value.
    Copy,
    /// No operand; the type comes from the primitive's payload (a constant,
    /// a static's declared type, `usize` for a symbolic dimension, `bool`
    /// for `tape_over`).
    Value,
    /// One operand; the payload's scalar type, of the operand's shape.
    Cast,
    /// One operand; an array of the payload's length of it.
    Fill,
    /// One or more operands of one type; the array of them.
    Stack,
    /// `(a, i)`: an array and an integer scalar; the element (or sub-array).
    Index,
    /// `(a, i, v)`: an array, an integer scalar and a value of its element
    /// type; the array's type.
    IndexSet,
    /// `(a, i)`: an array and an integer scalar; the array's type with its
    /// leading length the payload's.
    Slice,
    /// `(a, i, v)`: an array, an integer scalar and an array of `a`'s items
    /// of any length; the array's type.
    SliceSet,
    /// A `bool` scalar; no result.
    Assert,
    /// The operands and the result the payload declares (a host primitive).
    Host,
    /// A contribution to the adjoint of the payload's static (`dense`: one
    /// value of the static's type; `row`: an index and a row; `outer`: two
    /// vectors whose outer product is the contribution); no result.
    StaticAdjoint,
    /// One or more operands of any types, saved on the lane's tape; no result.
    TapePush,
}

impl Signature {
    /// How many operands the class takes (for a method, counting the
    /// receiver); `None` for `Stack`, which takes one or more.
    pub fn arity(self) -> Option<usize> {
        use Signature as S;
        Some(match self {
            S::Draw | S::Value => 0,
            S::SignedMap
            | S::LogicMap
            | S::FloatMap
            | S::FloatPredicate
            | S::Reduce
            | S::FloatReduce
            | S::ArgReduce
            | S::FloatVectorMap
            | S::Transpose
            | S::SquareMap
            | S::Diagonal
            | S::DiagMatrix
            | S::DrawLike
            | S::Bernoulli
            | S::Copy
            | S::Cast
            | S::Fill
            | S::Assert => 1,
            S::Arithmetic
            | S::Bitwise
            | S::FloatBinary
            | S::Shift
            | S::IntPower
            | S::FloatPowi
            | S::Compare
            | S::Product { .. }
            | S::TriangularSolve
            | S::Index
            | S::Slice => 2,
            S::FloatTernary | S::Select | S::IndexSet | S::SliceSet => 3,
            S::Stack | S::Host | S::StaticAdjoint | S::TapePush => return None,
        })
    }

    /// Whether operations of this class draw from the member's random stream.
    pub fn is_random(self) -> bool {
        matches!(
            self,
            Signature::Draw | Signature::DrawLike | Signature::Bernoulli
        )
    }
}
