//! The one table of autobatch's operations.
//!
//! Every operation a program can perform (an operator, a builtin method or
//! function, the primitives that syntax such as `a[i]` becomes, the
//! bookkeeping the compiler adds) is one row of [`for_each_op!`]: its name,
//! the IR primitive it is, its IR text name, its signature class
//! ([`Signature`]: typing rule and arity), whether `grad` may differentiate
//! through it, and how the user writes it ([`Spelling`]). See [`table`] for
//! the row format.
//!
//! From the table this crate generates the op enums the IR's `Prim` holds
//! ([`UnaryOp`], [`BinaryOp`], [`CompareOp`], [`ReduceOp`]), the front end's
//! [`Builtin`], [`UnaryOperator`], [`BinaryOperator`] and
//! [`CompareOperator`], their `ALL` lists,
//! names both ways, arities and spellings. The IR generates its `Prim` names
//! and classes from the same table, the lowering its builtin-to-`Prim` map
//! ([`for_each_builtin!`]). [`library`] lists the library functions (the
//! distributions and compound special functions) that the lowering expands
//! into primitives.
//!
//! Architecture Invariant: sits below both the front end and the IR, so it
//! knows neither: no syntax tree, no `Prim`, no typing over concrete or
//! inferred types (each side writes the rule of each [`Signature`] once,
//! over its own types). It is data about operations, nothing more.

pub mod library;
pub mod signature;
pub mod table;

pub use signature::Signature;

/// How the user writes an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Spelling {
    /// A method: `x.name(...)`, the receiver the first operand.
    Method(&'static str),
    /// A function: `name(...)`.
    Function(&'static str),
    /// Both a method and a function of the same name.
    Both(&'static str),
    /// An operator symbol: `-x`, `a + b`, `a < b`.
    Operator(&'static str),
    /// Written by a piece of syntax (shown as an example): `a[i]`, `[x; N]`.
    Syntax(&'static str),
    /// Never written by the user; made by the compiler.
    Internal,
}

impl Spelling {
    /// The method name, if the operation is a method.
    pub fn method(self) -> Option<&'static str> {
        match self {
            Spelling::Method(name) | Spelling::Both(name) => Some(name),
            _ => None,
        }
    }

    /// The function name, if the operation is a function.
    pub fn function(self) -> Option<&'static str> {
        match self {
            Spelling::Function(name) | Spelling::Both(name) => Some(name),
            _ => None,
        }
    }
}

/// The op enums of the IR's `Prim`: one variant per row of a group, named
/// by the row's IR variant.
macro_rules! op_enum {
    ($(#[$attr:meta])* $Enum:ident;
     $($(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?,
        $grad:ident, $spelling:ident $(($user:literal))?])*) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $Enum {
            $($(#[$a])* $o,)*
        }

        impl $Enum {
            /// Every operation, in the table's order (the text form reads them by name).
            pub const ALL: &'static [$Enum] = &[$($Enum::$o),*];

            /// The name in the IR text form and in `op_counts`.
            pub fn name(self) -> &'static str {
                match self {
                    $($Enum::$o => $ir,)*
                }
            }

            /// The typing rule.
            pub fn signature(self) -> Signature {
                match self {
                    $($Enum::$o => Signature::$s $({$($sa)*})?,)*
                }
            }
        }
    };
}

for_each_op!(@select unary op_enum (
    /// Elementwise operations of one operand.
    UnaryOp;
));
for_each_op!(@select binary op_enum (
    /// Elementwise operations of two operands: both of the same shape, or one
    /// of them a scalar that is broadcast (but see each [`Signature`]).
    BinaryOp;
));
for_each_op!(@select ternary op_enum (
    /// Elementwise operations of three float operands of one type and shape.
    TernaryOp;
));
for_each_op!(@select compare op_enum (
    /// Comparisons of two scalars of the same type, giving a `bool`.
    CompareOp;
));
for_each_op!(@select reduce op_enum (
    /// Reductions over a 1-D array.
    ReduceOp;
));

/// The operators as the front end sees them: one variant per operator row of
/// a group, named by the row, with its symbol and its IR operation.
macro_rules! operator_enum {
    ($(#[$attr:meta])* $Enum:ident => $Op:ident;
     $($(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident, $grad:ident,
        Operator($symbol:literal)])*) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $Enum {
            $($(#[$a])* $n,)*
        }

        impl $Enum {
            /// Every operator, in the table's order.
            pub const ALL: &'static [$Enum] = &[$($Enum::$n),*];

            /// The symbol the user writes (`+`).
            pub fn symbol(self) -> &'static str {
                match self {
                    $($Enum::$n => $symbol,)*
                }
            }

            /// The IR operation it is.
            pub fn op(self) -> $Op {
                match self {
                    $($Enum::$n => $Op::$o,)*
                }
            }
        }
    };
}

for_each_op!(@select unary_operator operator_enum (
    /// The prefix operators `-` and `!`.
    UnaryOperator => UnaryOp;
));
for_each_op!(@select binary_operator operator_enum (
    /// The operators of two operands whose result has the operands' type
    /// (arithmetic, bitwise, shifts; comparisons are [`CompareOp`]s).
    BinaryOperator => BinaryOp;
));
for_each_op!(@select compare_operator operator_enum (
    /// The comparison operators (`<` and so on), of two scalars.
    CompareOperator => CompareOp;
));

/// The builtins: operations the user writes as a method or a function.
macro_rules! builtin_enum {
    ($($(#[$a:meta])* [$n:ident: $g:ident $o:ident, $ir:literal, $s:ident $({$($sa:tt)*})?,
        $grad:ident, $spelling:ident($user:literal)])*) => {
        /// Built-in functions and methods (a method takes its receiver as the
        /// first operand).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Builtin {
            $($(#[$a])* $n,)*
        }

        impl Builtin {
            /// Every builtin, in the table's order.
            pub const ALL: &'static [Builtin] = &[$(Builtin::$n),*];

            /// The name the user writes (`exp` for `x.exp()`, `max` for both
            /// `x.max(y)` and `max(a)`, which are two builtins).
            pub fn name(self) -> &'static str {
                match self {
                    $(Builtin::$n => $user,)*
                }
            }

            /// How the user writes it: a method, a function or both.
            pub fn spelling(self) -> Spelling {
                match self {
                    $(Builtin::$n => Spelling::$spelling($user),)*
                }
            }

            /// The typing rule.
            pub fn signature(self) -> Signature {
                match self {
                    $(Builtin::$n => Signature::$s $({$($sa)*})?,)*
                }
            }

            /// Whether `grad` may differentiate through it.
            pub fn differentiable(self) -> bool {
                match self {
                    $(Builtin::$n => $crate::__grad!($grad),)*
                }
            }

            /// The IR text name of the primitive it lowers to.
            pub fn ir_name(self) -> &'static str {
                match self {
                    $(Builtin::$n => $ir,)*
                }
            }
        }
    };
}

for_each_builtin!(builtin_enum);

impl Builtin {
    /// The builtin written `x.name(...)`.
    pub fn method(name: &str) -> Option<Builtin> {
        Builtin::ALL
            .iter()
            .copied()
            .find(|b| b.spelling().method() == Some(name))
    }

    /// The builtin written `name(...)`.
    pub fn function(name: &str) -> Option<Builtin> {
        Builtin::ALL
            .iter()
            .copied()
            .find(|b| b.spelling().function() == Some(name))
    }

    /// How many operands it takes, counting a method's receiver.
    pub fn arity(self) -> usize {
        self.signature().arity().unwrap_or(1)
    }
}
