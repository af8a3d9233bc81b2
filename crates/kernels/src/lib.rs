//! The meaning of every IR primitive ([`Prim`]), for one member and for a
//! column of members at once.
//!
//! Following wasmi's habit, the meaning of each operation is one pure
//! function, and executors only dispatch: [`eval`] takes a primitive and its
//! operand tensors for one member and returns the result tensor or a
//! [`Fault`]; [`Backend`] (implemented by [`Cpu`]) runs each operation on a
//! column of rows, one row per member, for the batched engine. The layers:
//!
//! - [`scalar`]: each elementwise operation on one scalar, per type
//!   (wrapping integers, `std` floats, Rust's `as`).
//! - [`buffer`]: typed views of buffers, the operands of batched operations
//!   (a column of rows or a shared value) and the moves of rows.
//! - [`factor`]: the Cholesky factorization, triangular solves and the
//!   factorization's adjoint, for one member.
//! - [`elementwise`], [`reduce`], [`linalg`], [`layout`]: the operations on
//!   tensors (broadcasting, reductions, products, indexing), each as a
//!   batched form on rows (`*_rows`) and a form for one member built on the
//!   same core (often the batched form on one row), so that the reference
//!   executor and the batched engine cannot compute different bits.
//! - [`rng`]: the per-member random streams, and draws for many members.
//! - [`vmath`], [`gemm`]: the vectorized transcendental functions and the
//!   products, for one member or for many at once (slices of a batch), with
//!   one fixed evaluation order per output element on every CPU path.
//! - [`fused`]: chains of elementwise steps run as one pass over groups of
//!   rows, each element by the same batched form as unfused.
//! - [`backend`]: the seam under the batched engine.
//!
//! Architecture Invariant: this crate knows nothing of control flow (blocks,
//! calls, stacks), of executors, and of syntax. It sees one primitive
//! applied to the values of one member, or of a column of members that it
//! computes row by row alike; which rows, and where an error happened in
//! the source, are the executor's business (a [`Fault`] carries no
//! location). A broken invariant (operands the verifier rules out) panics
//! with an internal error (`internal_error`).

use autobatch_ir::Prim;
use autobatch_types::{Data, Dim, ErrorKind, Scalar, ScalarType, Tensor};
use std::fmt;

/// Dispatches on the common element type of two buffers, keeping the type;
/// two buffers of different types are an internal error (the IR verifier
/// rules them out).
macro_rules! map_same_type_pair {
    ($what:expr, $left:expr, $right:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($left, $right) {
            (Data::Bool($x), Data::Bool($y)) => Data::Bool($body),
            (Data::I32($x), Data::I32($y)) => Data::I32($body),
            (Data::I64($x), Data::I64($y)) => Data::I64($body),
            (Data::Usize($x), Data::Usize($y)) => Data::Usize($body),
            (Data::F32($x), Data::F32($y)) => Data::F32($body),
            (Data::F64($x), Data::F64($y)) => Data::F64($body),
            (left, right) => $crate::internal_error(format!(
                "{}: operand types {} and {} differ",
                $what,
                left.ty(),
                right.ty()
            )),
        }
    };
}

#[macro_use]
pub mod buffer;
pub mod adjoints;
pub mod backend;
pub mod elementwise;
pub mod factor;
pub mod fused;
pub mod gemm;
pub mod host;
pub mod layout;
pub mod linalg;
pub mod product_chain;
pub mod reduce;
pub mod rng;
pub mod scalar;
pub mod special;
pub mod tape;
pub mod vmath;

pub use host::{BatchHostFn, HostFn, Hosts};

pub use backend::{Backend, Cpu};
pub use rng::{ForkKey, MemberRng};
pub use tape::Tape;

/// An error that stops the member that executed the primitive. The executor
/// adds where in the source it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: ErrorKind,
    pub message: String,
}

impl Fault {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Fault {
        Fault {
            kind,
            message: message.into(),
        }
    }

    /// An integer division by zero (Rust's wording).
    pub fn division_by_zero() -> Fault {
        Fault::new(ErrorKind::DivisionByZero, "attempt to divide by zero")
    }

    /// An integer remainder by zero (Rust's wording).
    pub fn remainder_by_zero() -> Fault {
        Fault::new(
            ErrorKind::DivisionByZero,
            "attempt to calculate the remainder with a divisor of zero",
        )
    }

    /// An index outside `0..length`; `index` is the value as written (it may be negative).
    pub fn index_out_of_bounds(index: i128, length: usize) -> Fault {
        Fault::new(
            ErrorKind::IndexOutOfBounds,
            format!("index {index} is out of bounds for an array of length {length}"),
        )
    }

    /// A range `start..start + len` not within `0..length`; `start` as
    /// written (it may be negative).
    pub fn range_out_of_bounds(start: i128, len: usize, length: usize) -> Fault {
        Fault::new(
            ErrorKind::IndexOutOfBounds,
            format!(
                "range {start}..{} is out of bounds for an array of length {length}",
                start + len as i128
            ),
        )
    }

    /// A failed `assert!` with its message.
    pub fn assertion_failed(message: &str) -> Fault {
        Fault::new(ErrorKind::AssertionFailed, message)
    }

    /// An argument outside its distribution's domain, with the message of the check.
    pub fn domain_error(message: &str) -> Fault {
        Fault::new(ErrorKind::DomainError, message)
    }

    /// A push that makes a member's tape hold more than `bound` bytes.
    pub fn tape_limit(bound: usize) -> Fault {
        Fault::new(
            ErrorKind::TapeLimit,
            format!("the gradient's tape would hold more than {bound} bytes (--max-tape-bytes)"),
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Fault {}

/// What a primitive may read besides its operands: the shared statics
/// (indexed by `StaticId`), the values of the symbolic dimensions (indexed by
/// `SymbolId`), the random stream of the member it runs for and the run's
/// host functions.
pub struct PrimContext<'a> {
    pub statics: &'a [Tensor],
    pub symbols: &'a [u64],
    pub rng: &'a mut MemberRng,
    pub hosts: &'a Hosts,
}

/// Applies `prim` to `args` for one member: `Ok(Some(result))`, `Ok(None)`
/// for a primitive without result (`assert`), or the fault that stops the member.
///
/// The operands must have the types the IR verifier accepts for `prim`, and
/// array shapes must agree with them; anything else is a bug in the caller
/// and panics with an internal error (`internal_error`). Nothing a user
/// program computes can make this function panic.
pub fn eval(
    prim: &Prim,
    args: &[&Tensor],
    ctx: &mut PrimContext<'_>,
) -> Result<Option<Tensor>, Fault> {
    let operand = |k: usize| -> &Tensor {
        match args.get(k) {
            Some(t) => t,
            None => internal_error(format!(
                "{} got {} operand(s), needs operand {}",
                prim.name(),
                args.len(),
                k
            )),
        }
    };
    let result = match prim {
        Prim::Const(value) => Tensor::scalar(*value),
        Prim::Copy => operand(0).clone(),
        Prim::LoadStatic(id) => match ctx.statics.get(id.0 as usize) {
            Some(value) => value.clone(),
            None => internal_error(format!("static {id} is not in the environment")),
        },
        Prim::SymbolValue(symbol) => Tensor::scalar(Scalar::Usize(symbol_value(
            ctx.symbols,
            Dim::Symbolic(*symbol),
        ))),
        Prim::Unary(op) => elementwise::unary(*op, operand(0)),
        Prim::Binary(op) => elementwise::binary(*op, operand(0), operand(1))?,
        Prim::Ternary(op) => elementwise::ternary(*op, operand(0), operand(1), operand(2)),
        Prim::Compare(op) => elementwise::compare(*op, operand(0), operand(1)),
        Prim::Cast(to) => elementwise::cast(*to, operand(0)),
        Prim::Select => elementwise::select(operand(0), operand(1), operand(2)),
        Prim::Fill(dim) => layout::fill(dim_length(ctx.symbols, *dim), operand(0)),
        Prim::Stack => layout::stack(args),
        Prim::Index => layout::index(operand(0), operand(1))?,
        Prim::IndexSet => layout::index_set(operand(0), operand(1), operand(2))?,
        Prim::Slice(dim) => layout::slice(operand(0), operand(1), dim_length(ctx.symbols, *dim))?,
        Prim::SliceSet => layout::slice_set(operand(0), operand(1), operand(2))?,
        Prim::Dot => linalg::dot(operand(0), operand(1)),
        Prim::Matvec => linalg::matvec(operand(0), operand(1)),
        Prim::Vecmat => linalg::vecmat(operand(0), operand(1)),
        Prim::Matmul => linalg::matmul(operand(0), operand(1)),
        Prim::Transpose => linalg::transpose(operand(0)),
        Prim::Outer => linalg::outer(operand(0), operand(1)),
        Prim::Cholesky => factor::cholesky(operand(0))?,
        Prim::TriSolve => factor::tri_solve(operand(0), operand(1)),
        Prim::TriSolveT => factor::tri_solve_transposed(operand(0), operand(1)),
        Prim::Tril => factor::tril(operand(0)),
        Prim::CholeskyAdjoint => factor::cholesky_adjoint(operand(0), operand(1)),
        Prim::Diagonal => factor::diagonal(operand(0)),
        Prim::DiagMatrix => factor::diag_matrix(operand(0)),
        Prim::Reduce(op) => reduce::reduce(*op, operand(0)),
        Prim::Softmax => reduce::softmax(operand(0)),
        Prim::Uniform => Tensor::scalar(Scalar::F64(ctx.rng.uniform())),
        Prim::Normal => Tensor::scalar(Scalar::F64(ctx.rng.normal())),
        Prim::Bernoulli => {
            let p = scalar_f64(operand(0));
            Tensor::scalar(Scalar::Bool(ctx.rng.bernoulli(p)))
        }
        Prim::UniformLike => uniform_like(ctx.rng, operand(0)),
        Prim::NormalLike => normal_like(ctx.rng, operand(0)),
        Prim::Assert { message } => {
            return if scalar_bool(operand(0)) {
                Ok(None)
            } else {
                Err(Fault::assertion_failed(message))
            };
        }
        Prim::Check { message } => {
            return if scalar_bool(operand(0)) {
                Ok(None)
            } else {
                Err(Fault::domain_error(message))
            };
        }
        Prim::Host(host) => ctx.hosts.call(host, args, ctx.symbols)?,
        // A member's log is its executor's: see `adjoints`.
        Prim::StaticAdjoint(_) => internal_error(format!(
            "`{prim}` reached `eval`: executors record static adjoints themselves"
        )),
        // A lane's tape is its executor's too.
        Prim::TapePush | Prim::TapePop(_) | Prim::TapeOver | Prim::TapeMark | Prim::TapeSettle => {
            internal_error(format!(
                "`{prim}` reached `eval`: executors keep the lanes' tapes themselves"
            ))
        }
    };
    Ok(Some(result))
}

/// Draws from U\[0, 1) shaped like `x`, in row-major order: in `x`'s float
/// type, or `f64` when `x` is not a float.
pub fn uniform_like(rng: &mut MemberRng, x: &Tensor) -> Tensor {
    let data = match x.elem_type() {
        ScalarType::F32 => Data::F32(rng.uniform_vec(x.len())),
        _ => Data::F64(rng.uniform_vec(x.len())),
    };
    Tensor::new(x.shape.clone(), data)
}

/// Draws from N(0, 1) shaped like `x`, in row-major order: in `x`'s float
/// type, or `f64` when `x` is not a float.
pub fn normal_like(rng: &mut MemberRng, x: &Tensor) -> Tensor {
    let data = match x.elem_type() {
        ScalarType::F32 => Data::F32(rng.normal_vec(x.len())),
        _ => Data::F64(rng.normal_vec(x.len())),
    };
    Tensor::new(x.shape.clone(), data)
}

/// The length an array axis has in this run.
pub fn dim_length(symbols: &[u64], dim: Dim) -> usize {
    match dim {
        Dim::Fixed(n) => to_usize(n),
        Dim::Symbolic(_) => to_usize(symbol_value(symbols, dim)),
    }
}

fn symbol_value(symbols: &[u64], dim: Dim) -> u64 {
    match dim {
        Dim::Fixed(n) => n,
        Dim::Symbolic(symbol) => match symbols.get(symbol.0 as usize) {
            Some(value) => *value,
            None => internal_error(format!("symbolic dimension sym{} is not bound", symbol.0)),
        },
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n)
        .unwrap_or_else(|_| internal_error(format!("length {n} does not fit this machine")))
}

/// The value of a `bool` scalar operand.
pub(crate) fn scalar_bool(t: &Tensor) -> bool {
    match &t.data {
        Data::Bool(v) if v.len() == 1 => v[0],
        other => internal_error(format!(
            "expected a bool scalar, got {} values of {}",
            other.len(),
            other.ty()
        )),
    }
}

/// The value of an `f64` scalar operand.
pub(crate) fn scalar_f64(t: &Tensor) -> f64 {
    match &t.data {
        Data::F64(v) if v.len() == 1 => v[0],
        other => internal_error(format!(
            "expected an f64 scalar, got {} values of {}",
            other.len(),
            other.ty()
        )),
    }
}

/// Reports a broken invariant: operands that the IR verifier (or the binding
/// of symbolic dimensions before a run) should have ruled out. Never the
/// consequence of a value a program computes.
///
/// It panics, with the message and (through `track_caller`) the place in
/// this crate: an executor's run is the boundary that turns such a panic
/// into an internal error of the run (`autobatch_exec::ExecError::Internal`),
/// without a backtrace; an error value threaded through every kernel would
/// cost a branch per call and still miss what Rust itself checks.
#[cold]
#[track_caller]
pub(crate) fn internal_error(message: String) -> ! {
    panic!("internal error: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_ir::{BinaryOp, ReduceOp, StaticId, UnaryOp};
    use autobatch_types::SymbolId;

    fn f64s(shape: &[usize], values: &[f64]) -> Tensor {
        Tensor::new(shape.to_vec(), Data::F64(values.to_vec()))
    }

    fn run(prim: Prim, args: &[&Tensor]) -> Result<Option<Tensor>, Fault> {
        let statics = vec![f64s(&[2], &[1.0, 2.0])];
        let symbols = vec![3u64, 5];
        let mut rng = MemberRng::new(1, 2);
        let mut ctx = PrimContext {
            statics: &statics,
            symbols: &symbols,
            rng: &mut rng,
            hosts: &Hosts::default(),
        };
        eval(&prim, args, &mut ctx)
    }

    #[test]
    fn bookkeeping_primitives() {
        assert_eq!(
            run(Prim::Const(Scalar::I32(4)), &[]).unwrap(),
            Some(Tensor::scalar(Scalar::I32(4)))
        );
        let x = f64s(&[2], &[3.0, 4.0]);
        assert_eq!(run(Prim::Copy, &[&x]).unwrap(), Some(x.clone()));
        assert_eq!(
            run(Prim::LoadStatic(StaticId(0)), &[]).unwrap(),
            Some(f64s(&[2], &[1.0, 2.0]))
        );
        assert_eq!(
            run(Prim::SymbolValue(SymbolId(1)), &[]).unwrap(),
            Some(Tensor::scalar(Scalar::Usize(5)))
        );
    }

    #[test]
    fn fill_reads_symbolic_lengths() {
        let x = Tensor::scalar(Scalar::I64(7));
        let filled = run(Prim::Fill(Dim::Symbolic(SymbolId(0))), &[&x])
            .unwrap()
            .unwrap();
        assert_eq!(filled, Tensor::new(vec![3], Data::I64(vec![7, 7, 7])));
        let filled = run(Prim::Fill(Dim::Fixed(2)), &[&x]).unwrap().unwrap();
        assert_eq!(filled.shape, vec![2]);
    }

    #[test]
    fn assert_faults_with_its_message() {
        let yes = Tensor::scalar(Scalar::Bool(true));
        let no = Tensor::scalar(Scalar::Bool(false));
        let prim = Prim::Assert {
            message: "n must be positive".into(),
        };
        assert_eq!(run(prim.clone(), &[&yes]), Ok(None));
        let fault = run(prim, &[&no]).unwrap_err();
        assert_eq!(fault.kind, ErrorKind::AssertionFailed);
        assert_eq!(fault.message, "n must be positive");
    }

    #[test]
    fn faults_pass_through_eval() {
        let a = Tensor::scalar(Scalar::I64(1));
        let zero = Tensor::scalar(Scalar::I64(0));
        assert_eq!(
            run(Prim::Binary(BinaryOp::Div), &[&a, &zero]),
            Err(Fault::division_by_zero())
        );
        assert_eq!(
            run(Prim::Binary(BinaryOp::Rem), &[&a, &zero]),
            Err(Fault::remainder_by_zero())
        );
        let v = f64s(&[5], &[0.0; 5]);
        let i = Tensor::scalar(Scalar::I64(7));
        let fault = run(Prim::Index, &[&v, &i]).unwrap_err();
        assert_eq!(fault.kind, ErrorKind::IndexOutOfBounds);
        assert_eq!(
            fault.message,
            "index 7 is out of bounds for an array of length 5"
        );
        assert_eq!(
            fault.to_string(),
            "index_out_of_bounds: index 7 is out of bounds for an array of length 5"
        );
    }

    #[test]
    fn eval_dispatches_every_family() {
        let x = f64s(&[3], &[1.0, 2.0, 3.0]);
        let two = Tensor::scalar(Scalar::F64(2.0));
        assert_eq!(
            run(Prim::Unary(UnaryOp::Neg), &[&x]).unwrap(),
            Some(f64s(&[3], &[-1.0, -2.0, -3.0]))
        );
        assert_eq!(
            run(Prim::Binary(BinaryOp::Mul), &[&x, &two]).unwrap(),
            Some(f64s(&[3], &[2.0, 4.0, 6.0]))
        );
        assert_eq!(
            run(Prim::Reduce(ReduceOp::Sum), &[&x]).unwrap(),
            Some(Tensor::scalar(Scalar::F64(6.0)))
        );
        assert_eq!(
            run(Prim::Dot, &[&x, &x]).unwrap(),
            Some(Tensor::scalar(Scalar::F64(14.0)))
        );
        let stacked = run(Prim::Stack, &[&x, &x]).unwrap().unwrap();
        assert_eq!(stacked.shape, vec![2, 3]);
        assert_eq!(
            run(Prim::Transpose, &[&stacked]).unwrap().unwrap().shape,
            vec![3, 2]
        );
    }

    #[test]
    fn random_primitives_draw_from_the_member_stream() {
        let statics: Vec<Tensor> = Vec::new();
        let mut rng = MemberRng::new(10, 4);
        let mut expected = MemberRng::new(10, 4);
        let mut ctx = PrimContext {
            statics: &statics,
            symbols: &[],
            rng: &mut rng,
            hosts: &Hosts::default(),
        };
        let u = eval(&Prim::Uniform, &[], &mut ctx).unwrap().unwrap();
        assert_eq!(u, Tensor::scalar(Scalar::F64(expected.uniform())));
        let n = eval(&Prim::Normal, &[], &mut ctx).unwrap().unwrap();
        assert_eq!(n, Tensor::scalar(Scalar::F64(expected.normal())));
        let p = Tensor::scalar(Scalar::F64(0.5));
        let b = eval(&Prim::Bernoulli, &[&p], &mut ctx).unwrap().unwrap();
        assert_eq!(b, Tensor::scalar(Scalar::Bool(expected.uniform() < 0.5)));
        let shape = Tensor::new(vec![2, 2], Data::F32(vec![0.0; 4]));
        let draws = eval(&Prim::UniformLike, &[&shape], &mut ctx)
            .unwrap()
            .unwrap();
        assert_eq!(draws.shape, vec![2, 2]);
        assert_eq!(draws.data, Data::F32(expected.uniform_vec(4)));
        let ints = Tensor::new(vec![3], Data::I64(vec![0; 3]));
        let draws = eval(&Prim::NormalLike, &[&ints], &mut ctx)
            .unwrap()
            .unwrap();
        assert_eq!(draws.data, Data::F64(expected.normal_vec(3)));
        let scalar_like = eval(
            &Prim::UniformLike,
            &[&Tensor::scalar(Scalar::F64(0.0))],
            &mut ctx,
        )
        .unwrap()
        .unwrap();
        assert!(scalar_like.is_scalar());
        assert_eq!(scalar_like.data, Data::F64(vec![expected.uniform()]));
    }
}
