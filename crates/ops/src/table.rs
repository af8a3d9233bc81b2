//! The table of operations, and the selection of its rows.
//!
//! [`for_each_op!`](crate::for_each_op) holds one row per operation and hands
//! the rows to a callback macro (in the spirit of wasmi's `for_each_op!` and
//! Cranelift's instruction definitions). Every row is a bracketed group:
//!
//! ```text
//! [Name: Group Variant, "ir_name", SignatureClass, grad, Spelling("user")]
//! ```
//!
//! - `Name`: the row's name; the variant of [`Builtin`](crate::Builtin), or
//!   of [`UnaryOperator`](crate::UnaryOperator) / [`BinaryOperator`](crate::BinaryOperator),
//!   when the user can write the operation.
//! - `Group Variant`: the IR primitive it lowers to. `Unary`, `Binary`,
//!   `Ternary`, `Compare`, `Reduce`: `Prim::Unary(UnaryOp::Variant)` and so on (the
//!   row is then a variant of that op enum); `Plain`: the payload-free
//!   `Prim::Variant`; `Payload`: a `Prim::Variant` that carries data (a
//!   constant, a type, a length, a message), which only the compiler makes.
//! - `"ir_name"`: the name in the IR text form and in `op_counts`.
//! - `SignatureClass`: a [`Signature`](crate::Signature) (its typing rule and arity).
//! - `grad` or `nograd`: whether `grad` may differentiate through it.
//! - The spelling: `Method("exp")` (`x.exp()`), `Function("softmax")`,
//!   `Both("name")`, `Operator("+")`, `Syntax("a[i]")`, or `Internal`
//!   (made by the compiler only). See [`Spelling`](crate::Spelling).
//!
//! Doc comments on a row document the generated variants.
//!
//! The order of the rows is the order of the variants of every generated
//! enum and of the methods listed in the front end's unknown-method note.
//!
//! Selecting rows (only the unary ones, only the builtins) is done by
//! recursion over the rows, one level per row; the default
//! `recursion_limit` of 128 leaves room for about 120 rows.

/// Calls `$callback! { rows }` with every row of the table (see the
/// [`table`](crate::table) module for the row format).
#[macro_export]
macro_rules! for_each_op {
    ($callback:ident) => {
        $crate::for_each_op! { @select all $callback () }
    };
    // `$key` selects rows (see `__select!`); `$prefix` goes before the rows.
    (@select $key:ident $callback:ident ($($prefix:tt)*)) => {
        $crate::__select! { $key $callback ($($prefix)*) []
            // Name         IR operation       IR name          signature class   grad    user spelling

            // ---- operators
            /// Arithmetic negation (wrapping on integers).
            [Neg:           Unary Neg,         "neg",           SignedMap,        grad,   Operator("-")]
            /// Logical not on `bool`, bitwise not on integers.
            [Not:           Unary Not,         "not",           LogicMap,         grad,   Operator("!")]
            [Add:           Binary Add,        "add",           Arithmetic,       grad,   Operator("+")]
            [Sub:           Binary Sub,        "sub",           Arithmetic,       grad,   Operator("-")]
            [Mul:           Binary Mul,        "mul",           Arithmetic,       grad,   Operator("*")]
            /// Integer division (faults on a zero divisor) or float division.
            [Div:           Binary Div,        "div",           Arithmetic,       grad,   Operator("/")]
            /// Integer remainder (faults on a zero divisor) or float remainder (`fmod`).
            [Rem:           Binary Rem,        "rem",           Arithmetic,       grad,   Operator("%")]
            [BitAnd:        Binary BitAnd,     "bitand",        Bitwise,          grad,   Operator("&")]
            [BitOr:         Binary BitOr,      "bitor",         Bitwise,          grad,   Operator("|")]
            [BitXor:        Binary BitXor,     "bitxor",        Bitwise,          grad,   Operator("^")]
            /// Shift left; the shift amount may be any integer type and is taken modulo the bit width.
            [Shl:           Binary Shl,        "shl",           Shift,            grad,   Operator("<<")]
            /// Shift right (arithmetic on signed types); amount as for `Shl`.
            [Shr:           Binary Shr,        "shr",           Shift,            grad,   Operator(">>")]
            [Eq:            Compare Eq,        "eq",            Compare,          grad,   Operator("==")]
            [Ne:            Compare Ne,        "ne",            Compare,          grad,   Operator("!=")]
            [Lt:            Compare Lt,        "lt",            Compare,          grad,   Operator("<")]
            [Le:            Compare Le,        "le",            Compare,          grad,   Operator("<=")]
            [Gt:            Compare Gt,        "gt",            Compare,          grad,   Operator(">")]
            [Ge:            Compare Ge,        "ge",            Compare,          grad,   Operator(">=")]

            // ---- methods
            [Abs:           Unary Abs,         "abs",           SignedMap,        grad,   Method("abs")]
            [Exp:           Unary Exp,         "exp",           FloatMap,         grad,   Method("exp")]
            [ExpM1:         Unary ExpM1,       "exp_m1",        FloatMap,         grad,   Method("exp_m1")]
            [Ln:            Unary Ln,          "ln",            FloatMap,         grad,   Method("ln")]
            [Ln1p:          Unary Ln1p,        "ln_1p",         FloatMap,         grad,   Method("ln_1p")]
            [Log10:         Unary Log10,       "log10",         FloatMap,         grad,   Method("log10")]
            [Sqrt:          Unary Sqrt,        "sqrt",          FloatMap,         grad,   Method("sqrt")]
            [Sin:           Unary Sin,         "sin",           FloatMap,         grad,   Method("sin")]
            [Cos:           Unary Cos,         "cos",           FloatMap,         grad,   Method("cos")]
            [Tan:           Unary Tan,         "tan",           FloatMap,         grad,   Method("tan")]
            /// The arctangent, in `[-pi/2, pi/2]`.
            [Atan:          Unary Atan,        "atan",          FloatMap,         grad,   Method("atan")]
            [Tanh:          Unary Tanh,        "tanh",          FloatMap,         grad,   Method("tanh")]
            [Floor:         Unary Floor,       "floor",         FloatMap,         grad,   Method("floor")]
            [Ceil:          Unary Ceil,        "ceil",          FloatMap,         grad,   Method("ceil")]
            [Round:         Unary Round,       "round",         FloatMap,         grad,   Method("round")]
            [Signum:        Unary Signum,      "signum",        FloatMap,         grad,   Method("signum")]
            [Recip:         Unary Recip,       "recip",         FloatMap,         grad,   Method("recip")]
            /// `f.powi(i32)`: the right operand is an `i32`.
            [Powi:          Binary Powi,       "powi",          FloatPowi,        grad,   Method("powi")]
            /// `f.powf(f)`.
            [Powf:          Binary Powf,       "powf",          FloatBinary,      grad,   Method("powf")]
            /// `y.atan2(x)`: the angle of the point `(x, y)`, in `[-pi, pi]`.
            [Atan2:         Binary Atan2,      "atan2",         FloatBinary,      grad,   Method("atan2")]
            [Max:           Binary Max,        "max",           Arithmetic,       grad,   Method("max")]
            [Min:           Binary Min,        "min",           Arithmetic,       grad,   Method("min")]
            [IsNan:         Unary IsNan,       "is_nan",        FloatPredicate,   grad,   Method("is_nan")]
            [IsFinite:      Unary IsFinite,    "is_finite",     FloatPredicate,   grad,   Method("is_finite")]
            /// Integer `pow`: the right operand is any integer type, taken as `u32` (wrapping).
            [Pow:           Binary Pow,        "pow",           IntPower,         grad,   Method("pow")]

            // ---- functions
            [Sigmoid:       Unary Sigmoid,     "sigmoid",       FloatMap,         grad,   Function("sigmoid")]
            [LogSigmoid:    Unary LogSigmoid,  "log_sigmoid",   FloatMap,         grad,   Function("log_sigmoid")]
            [Softplus:      Unary Softplus,    "softplus",      FloatMap,         grad,   Function("softplus")]
            /// `ln |Gamma(x)|` (`+inf` at the poles 0, -1, -2, ...).
            [Lgamma:        Unary Lgamma,      "lgamma",        FloatMap,         grad,   Function("lgamma")]
            /// `Gamma'(x) / Gamma(x)`, the derivative of `lgamma` (NaN at the poles).
            [Digamma:       Unary Digamma,     "digamma",       FloatMap,         grad,   Function("digamma")]
            /// The derivative of `digamma` (itself not differentiable).
            [Trigamma:      Unary Trigamma,    "trigamma",      FloatMap,         nograd, Function("trigamma")]
            /// The error function.
            [Erf:           Unary Erf,         "erf",           FloatMap,         grad,   Function("erf")]
            /// `1 - erf(x)`, accurate where it is tiny.
            [Erfc:          Unary Erfc,        "erfc",          FloatMap,         grad,   Function("erfc")]
            /// The standard normal CDF.
            [Phi:           Unary Phi,         "Phi",           FloatMap,         grad,   Function("Phi")]
            /// The inverse of the standard normal CDF (NaN outside `[0, 1]`).
            [InvPhi:        Unary InvPhi,      "inv_Phi",       FloatMap,         grad,   Function("inv_Phi")]
            /// `(a, b)`, 1-D of one length: the inner product.
            [Dot:           Plain Dot,         "dot",           Product {
                left: 1, right: 1, contract: true,
                lengths: "`dot(a, b)` needs two vectors of the same length" },
                                                                                  grad,   Function("dot")]
            /// `(m: [M, K], v: [K])`: `[M]`.
            [Matvec:        Plain Matvec,      "matvec",        Product {
                left: 2, right: 1, contract: true,
                lengths: "`matvec(m, v)` needs `m: [[T; K]; M]` and `v: [T; K]`" },
                                                                                  grad,   Function("matvec")]
            /// `(v: [M], m: [M, K])`: `[K]`.
            [Vecmat:        Plain Vecmat,      "vecmat",        Product {
                left: 1, right: 2, contract: true,
                lengths: "`vecmat(v, m)` needs `v: [T; M]` and `m: [[T; K]; M]`" },
                                                                                  grad,   Function("vecmat")]
            /// `(a: [M, K], b: [K, N])`: `[M, N]`.
            [Matmul:        Plain Matmul,      "matmul",        Product {
                left: 2, right: 2, contract: true,
                lengths: "`matmul(a, b)` needs `a: [[T; K]; M]` and `b: [[T; N]; K]`" },
                                                                                  grad,   Function("matmul")]
            /// `(m: [M, K])`: `[K, M]`.
            [Transpose:     Plain Transpose,   "transpose",     Transpose,        grad,   Function("transpose")]
            /// `(a: [M], b: [K])`: `[M, K]`.
            [Outer:         Plain Outer,       "outer",         Product {
                left: 1, right: 1, contract: false,
                lengths: "the lengths must agree" },
                                                                                  grad,   Function("outer")]
            /// `ln(I0(x) e^-|x|)`, the log of the scaled modified Bessel function of the first kind of order 0.
            [LogBesselI0e:  Unary LogBesselI0e, "log_bessel_i0e", FloatMap,       grad,   Internal]
            /// `I1(x) / I0(x)` (the derivative of `log_bessel_i0e` less the sign; itself not differentiable).
            [BesselI1OverI0: Unary BesselI1OverI0, "bessel_i1_over_i0", FloatMap, nograd, Internal]
            /// `(a, x)`: `ln P(a, x)`, `P` the regularized lower incomplete gamma function.
            [LogGammaP:     Binary LogGammaP,  "log_gamma_p",   FloatBinary,      grad,   Internal]
            /// `(a, x)`: `ln Q(a, x) = ln(1 - P(a, x))`.
            [LogGammaQ:     Binary LogGammaQ,  "log_gamma_q",   FloatBinary,      grad,   Internal]
            /// `(a, x)`: the derivative of `log_gamma_p` in `a` (itself not differentiable).
            [LogGammaPDa:   Binary LogGammaPDa, "log_gamma_p_da", FloatBinary,    nograd, Internal]
            /// `(a, x)`: the derivative of `log_gamma_q` in `a` (itself not differentiable).
            [LogGammaQDa:   Binary LogGammaQDa, "log_gamma_q_da", FloatBinary,    nograd, Internal]
            /// `(a, u)`: `ln x` for the `x` with `P(a, x) = u` (a gamma draw from a uniform one).
            [LogGammaPInv:  Binary LogGammaPInv, "log_gamma_p_inv", FloatBinary,  nograd, Internal]
            /// `(lambda, u)`: the smallest `k` whose Poisson CDF reaches `u` (a Poisson draw), as a float.
            [PoissonInv:    Binary PoissonInv, "poisson_inv",   FloatBinary,      nograd, Internal]
            /// `(kappa, u)`: a von Mises angle in `[-pi, pi]` about 0 with concentration `kappa`, made from the uniform draw `u`.
            [VonMisesDraw:  Binary VonMisesDraw, "von_mises_draw", FloatBinary,  nograd, Internal]
            /// `(a, b)`: `ln B(a, b)`, the logarithm of the beta function.
            [Lbeta:         Binary Lbeta,      "lbeta",         FloatBinary,      grad,   Internal]
            /// `(a, b, x)`: `ln I_x(a, b)`, `I` the regularized incomplete beta function.
            [LogBetaInc:    Ternary LogBetaInc,  "log_beta_inc",  FloatTernary,     grad,   Internal]
            /// `(a, b, x)`: `ln(1 - I_x(a, b))`.
            [LogBetaIncC:   Ternary LogBetaIncC, "log_beta_inc_c", FloatTernary,    grad,   Internal]
            /// `(a, b, x)`: the derivative of `log_beta_inc` in `a` (itself not differentiable).
            [LogBetaIncDa:  Ternary LogBetaIncDa, "log_beta_inc_da", FloatTernary,  nograd, Internal]
            /// `(a, b, x)`: the derivative of `log_beta_inc` in `b` (itself not differentiable).
            [LogBetaIncDb:  Ternary LogBetaIncDb, "log_beta_inc_db", FloatTernary,  nograd, Internal]
            /// `(a, b, x)`: the derivative of `log_beta_inc_c` in `a` (itself not differentiable).
            [LogBetaIncCDa: Ternary LogBetaIncCDa, "log_beta_inc_c_da", FloatTernary, nograd, Internal]
            /// `(a, b, x)`: the derivative of `log_beta_inc_c` in `b` (itself not differentiable).
            [LogBetaIncCDb: Ternary LogBetaIncCDb, "log_beta_inc_c_db", FloatTernary, nograd, Internal]
            /// `(n, p, u)`: the smallest `k` whose binomial CDF (`n` trials of
            /// probability `p`) reaches `u` (a binomial draw), as a float.
            [BinomialInv:   Ternary BinomialInv, "binomial_inv",  FloatTernary,     nograd, Internal]
            /// `(a: [K, K])`, symmetric positive definite: its lower Cholesky
            /// factor `L` (`L Lᵀ = a`; reads the lower triangle); faults with
            /// `domain_error` if `a` is not symmetric or not positive definite.
            [Cholesky:      Plain Cholesky,    "cholesky",      SquareMap,        grad,   Function("cholesky_decompose")]
            /// `(l: [K, K], b: [K] or [K, M])`: `L⁻¹ b` for the lower triangle `L` of `l`.
            [TriSolve:      Plain TriSolve,    "tri_solve",     TriangularSolve,  grad,   Function("mdivide_left_tri_low")]
            /// `(l, b)` as `tri_solve`: `L⁻ᵀ b` (in the adjoint of `tri_solve`).
            [TriSolveT:     Plain TriSolveT,   "tri_solve_t",   TriangularSolve,  nograd, Internal]
            /// `(a: [K, K])`: its lower triangle (the diagonal included), zeros above.
            [Tril:          Plain Tril,        "tril",          SquareMap,        grad,   Internal]
            /// `(l, dl)`, both `[K, K]`: the adjoint of the operand of `cholesky`
            /// whose factor is `l`, given the adjoint `dl` of the factor (symmetric).
            [CholeskyAdjoint: Plain CholeskyAdjoint, "cholesky_adjoint", TriangularSolve, nograd, Internal]
            /// `(a: [K, K])`: its diagonal, `[K]`.
            [Diagonal:      Plain Diagonal,    "diagonal",      Diagonal,         grad,   Function("diagonal")]
            /// `(v: [K])`: the `[K, K]` matrix with `v` on its diagonal, zeros elsewhere.
            [DiagMatrix:    Plain DiagMatrix,  "diag_matrix",   DiagMatrix,       grad,   Function("diag_matrix")]
            [Sum:           Reduce Sum,        "sum",           Reduce,           grad,   Function("sum")]
            [Mean:          Reduce Mean,       "mean",          FloatReduce,      grad,   Function("mean")]
            [ReduceMax:     Reduce Max,        "reduce_max",    Reduce,           grad,   Function("max")]
            [ReduceMin:     Reduce Min,        "reduce_min",    Reduce,           grad,   Function("min")]
            /// Index of the first maximum, as `usize`.
            [Argmax:        Reduce Argmax,     "argmax",        ArgReduce,        grad,   Function("argmax")]
            /// Index of the first minimum, as `usize`.
            [Argmin:        Reduce Argmin,     "argmin",        ArgReduce,        grad,   Function("argmin")]
            [LogSumExp:     Reduce LogSumExp,  "logsumexp",     FloatReduce,      grad,   Function("logsumexp")]
            /// `(a)` 1-D float: the softmax of `a`.
            [Softmax:       Plain Softmax,     "softmax",       FloatVectorMap,   grad,   Function("softmax")]
            /// `(cond: bool, a, b)`: `a` if `cond` else `b`; `cond` is a scalar or has the shape of `a`.
            [Select:        Plain Select,      "select",        Select,           grad,   Function("select")]
            /// No operands: a draw from U\[0, 1) as `f64`.
            [Uniform:       Plain Uniform,     "uniform",       Draw,             nograd, Function("uniform")]
            /// No operands: a draw from N(0, 1) as `f64`.
            [Normal:        Plain Normal,      "normal",        Draw,             nograd, Function("normal")]
            /// `(x)`: draws from U\[0, 1) shaped like `x` (its float type, or `f64`).
            [UniformLike:   Plain UniformLike, "uniform_like",  DrawLike,         nograd, Function("uniform_like")]
            /// `(x)`: draws from N(0, 1) shaped like `x` (its float type, or `f64`).
            [NormalLike:    Plain NormalLike,  "normal_like",   DrawLike,         nograd, Function("normal_like")]
            /// `(p: f64)`: a `bool`, true with probability `p`.
            [Bernoulli:     Plain Bernoulli,   "bernoulli",     Bernoulli,        nograd, Function("bernoulli")]

            // ---- written by syntax
            /// One operand; elementwise conversion as Rust's `as`.
            [Cast:          Payload Cast,      "cast",          Cast,             grad,   Syntax("x as T")]
            /// `(x)`: an array of `dim` copies of `x` (`[x; N]`).
            [Fill:          Payload Fill,      "fill",          Fill,             grad,   Syntax("[x; N]")]
            /// `(x0, ..., xn-1)`, all of one type: the array `[x0, ..., xn-1]`.
            [Stack:         Plain Stack,       "stack",         Stack,            grad,   Syntax("[a, b, c]")]
            /// `(a, i)`: the element (or sub-array) `a[i]`; faults if `i` is out of bounds.
            [Index:         Plain Index,       "index",         Index,            grad,   Syntax("a[i]")]
            /// `(a, i, v)`: a copy of `a` with `a[i] = v`; faults if `i` is out of bounds.
            [IndexSet:      Plain IndexSet,    "index_set",     IndexSet,         grad,   Syntax("a[i] = v")]
            /// `(a, i)`: the `len` items `a[i..i + len]` (`len` the payload); faults
            /// if they do not all lie in `a`.
            [Slice:         Payload Slice,     "slice",         Slice,            grad,   Syntax("a[i..i + N]")]
            /// `(a, i, v)`: a copy of `a` with `a[i..i + n] = v`, `n` the length of
            /// `v`; faults if the range does not lie in `a`.
            [SliceSet:      Plain SliceSet,    "slice_set",     SliceSet,         grad,   Syntax("a[i..i + N] = v")]
            /// `(cond: bool)`, no result: faults with `assertion_failed` and `message` if `cond` is false.
            [Assert:        Payload Assert,    "assert",        Assert,           grad,   Syntax("assert!(cond)")]
            /// `(cond: bool)`, no result: faults with `domain_error` and `message` if
            /// `cond` is false (the argument checks of the distributions).
            [Check:         Payload Check,     "check",         Assert,           grad,   Internal]
            /// The operands of the declared parameter types: the value the host
            /// function registered under the primitive's name gives (a fault if it fails).
            [Host:          Payload Host,      "host",          Host,             nograd, Syntax("h(args)")]

            // ---- made by the compiler (bookkeeping: not in `op_counts`)
            /// No operands; the constant.
            [Const:         Payload Const,     "const",         Value,            grad,   Internal]
            /// One operand; the same value.
            [Copy:          Plain Copy,        "copy",          Copy,             grad,   Internal]
            /// No operands; the value of a shared static.
            [LoadStatic:    Payload LoadStatic, "load_static",  Value,            grad,   Internal]
            /// No operands; the value of a symbolic dimension, as `usize`.
            [SymbolValue:   Payload SymbolValue, "symbol_value", Value,           grad,   Internal]
            /// The adjoint of a static the gradient is taken with respect to
            /// (`--grad-statics`), appended to the member's log: no result.
            [StaticAdjoint: Payload StaticAdjoint, "static_adjoint", StaticAdjoint, nograd, Internal]
            /// Appends its operands' values to the lane's tape (the saved
            /// values of a derived function's forward part): no result.
            [TapePush:      Plain TapePush,    "tape_push",     TapePush,         nograd, Internal]
            /// No operands; takes the value of the payload's type pushed
            /// last off the lane's tape.
            [TapePop:       Payload TapePop,   "tape_pop",      Value,            nograd, Internal]
            /// No operands; whether the lane's member holds more than half
            /// the run's tape bound (a `bool`).
            [TapeOver:      Plain TapeOver,    "tape_over",     Value,            nograd, Internal]
            /// No operands; marks the lane's tape for the next `tape_settle`
            /// (an `i64`: the bytes it holds).
            [TapeMark:      Plain TapeMark,    "tape_mark",     Value,            nograd, Internal]
            /// No operands; takes the latest mark off the lane's tape and
            /// drops what was pushed since when the member holds more than
            /// half the run's tape bound (a `bool`: whether it did).
            [TapeSettle:    Plain TapeSettle,  "tape_settle",   Value,            nograd, Internal]
        }
    };
}

/// Calls `$callback! { rows }` with the rows of the builtins only: the
/// operations written as a method or a function (see [`Builtin`](crate::Builtin)).
#[macro_export]
macro_rules! for_each_builtin {
    ($callback:ident) => {
        $crate::for_each_op! { @select builtin $callback () }
    };
}

/// Row selection behind [`for_each_op!`]: walks the rows, keeps those that
/// `$key` selects, then calls `$callback! { $prefix kept-rows }`.
///
/// Keys: `all`; `unary`, `binary`, `compare`, `reduce` (by IR group);
/// `builtin` (methods and functions); `unary_operator`, `binary_operator`,
/// `compare_operator`.
#[doc(hidden)]
#[macro_export]
macro_rules! __select {
    // Every row was seen.
    ($key:ident $callback:ident ($($prefix:tt)*) [$($kept:tt)*]) => {
        $callback! { $($prefix)* $($kept)* }
    };
    (all $callback:ident ($($prefix:tt)*) [] $($rows:tt)*) => {
        $callback! { $($prefix)* $($rows)* }
    };
    // By IR group.
    (unary $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Unary $($f:tt)*] $($rest:tt)*) => {
        $crate::__select! { unary $callback $prefix [$($kept)* $(#[$a])* [$n: Unary $($f)*]] $($rest)* }
    };
    (binary $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Binary $($f:tt)*] $($rest:tt)*) => {
        $crate::__select! { binary $callback $prefix [$($kept)* $(#[$a])* [$n: Binary $($f)*]] $($rest)* }
    };
    (ternary $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Ternary $($f:tt)*] $($rest:tt)*) => {
        $crate::__select! { ternary $callback $prefix [$($kept)* $(#[$a])* [$n: Ternary $($f)*]] $($rest)* }
    };
    (compare $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Compare $($f:tt)*] $($rest:tt)*) => {
        $crate::__select! { compare $callback $prefix [$($kept)* $(#[$a])* [$n: Compare $($f)*]] $($rest)* }
    };
    (reduce $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Reduce $($f:tt)*] $($rest:tt)*) => {
        $crate::__select! { reduce $callback $prefix [$($kept)* $(#[$a])* [$n: Reduce $($f)*]] $($rest)* }
    };
    // By spelling: the builtins (one rule per spelling, so that a row costs
    // one level of recursion).
    (builtin $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?, $grad:ident,
            Method($user:literal)] $($rest:tt)*) => {
        $crate::__select! { builtin $callback $prefix [$($kept)*
            $(#[$a])* [$n: $g $o, $ir, $s $({$($sa)*})?, $grad, Method($user)]] $($rest)* }
    };
    (builtin $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?, $grad:ident,
            Function($user:literal)] $($rest:tt)*) => {
        $crate::__select! { builtin $callback $prefix [$($kept)*
            $(#[$a])* [$n: $g $o, $ir, $s $({$($sa)*})?, $grad, Function($user)]] $($rest)* }
    };
    (builtin $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?, $grad:ident,
            Both($user:literal)] $($rest:tt)*) => {
        $crate::__select! { builtin $callback $prefix [$($kept)*
            $(#[$a])* [$n: $g $o, $ir, $s $({$($sa)*})?, $grad, Both($user)]] $($rest)* }
    };
    // By spelling: the operators, by group.
    (unary_operator $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Unary $o:ident, $ir:literal, $s:ident, $grad:ident, Operator($user:literal)]
        $($rest:tt)*) => {
        $crate::__select! { unary_operator $callback $prefix
            [$($kept)* $(#[$a])* [$n: Unary $o, $ir, $s, $grad, Operator($user)]] $($rest)* }
    };
    (binary_operator $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Binary $o:ident, $ir:literal, $s:ident, $grad:ident, Operator($user:literal)]
        $($rest:tt)*) => {
        $crate::__select! { binary_operator $callback $prefix
            [$($kept)* $(#[$a])* [$n: Binary $o, $ir, $s, $grad, Operator($user)]] $($rest)* }
    };
    (compare_operator $callback:ident $prefix:tt [$($kept:tt)*]
        $(#[$a:meta])* [$n:ident: Compare $o:ident, $ir:literal, $s:ident, $grad:ident, Operator($user:literal)]
        $($rest:tt)*) => {
        $crate::__select! { compare_operator $callback $prefix
            [$($kept)* $(#[$a])* [$n: Compare $o, $ir, $s, $grad, Operator($user)]] $($rest)* }
    };
    // Any other row is left out.
    ($key:ident $callback:ident $prefix:tt [$($kept:tt)*] $(#[$a:meta])* [$($row:tt)*] $($rest:tt)*) => {
        $crate::__select! { $key $callback $prefix [$($kept)*] $($rest)* }
    };
}

/// `grad` / `nograd` of a row as a `bool`.
#[doc(hidden)]
#[macro_export]
macro_rules! __grad {
    (grad) => {
        true
    };
    (nograd) => {
        false
    };
}
