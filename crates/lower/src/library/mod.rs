//! The expansion of the library functions (`autobatch_ops::library`) into
//! primitives: each distribution's log density, CDFs and draws, and the
//! compound special functions, written once here with the elementwise
//! primitives (which broadcast a scalar over a vector, as Stan's vectorized
//! signatures do) and summed where the result is a log density. So `grad`,
//! every executor and native code see only primitives, and every strategy
//! computes the same bits.
//!
//! [`Builder`] is the small vocabulary the expansions are written in;
//! [`distributions`] and [`special`] hold the expansions.

mod beta_cdf;
mod checks;
mod distributions;
mod multivariate;
mod special;
mod von_mises_cdf;

use autobatch_frontend::Diagnostic;
use autobatch_ir::{BinaryOp, CompareOp, Dim, Prim, ReduceOp, TernaryOp, UnaryOp, Var};
use autobatch_ops::library::Function;
use autobatch_types::{Scalar, ScalarType, TensorType};

pub(crate) type LowerResult<T> = Result<T, Box<Diagnostic>>;

/// Where the expansion's operations go: the function being lowered, at the
/// call's location.
pub(crate) trait Emit {
    /// Appends `prim(args)` and gives its result.
    fn prim(&mut self, prim: Prim, args: Vec<Var>) -> LowerResult<Var>;
    /// Appends `prim(args)`, which has no result (a check).
    fn effect(&mut self, prim: Prim, args: Vec<Var>) -> LowerResult<()>;
    /// The type of a variable.
    fn ty(&self, v: Var) -> TensorType;
    /// The value of `v` where the expansion starts when a float constant
    /// sets it in the block being lowered (a literal argument), else `None`.
    fn constant(&self, v: Var) -> Option<f64>;
    /// Ends the block being lowered with a branch on `usual`, to a new
    /// block entered when it is false (a check arm, where the operations go
    /// until [`Emit::end_check_arm`]) and to the block after the arm.
    /// Neither new block counts a step.
    fn begin_check_arm(&mut self, usual: Var) -> LowerResult<()>;
    /// Ends the check arm with a jump to the block after it, where the
    /// operations go on.
    fn end_check_arm(&mut self) -> LowerResult<()>;
}

/// Expands a call of `function` on `args` (checked by the front end).
pub(crate) fn expand(function: Function, args: &[Var], emit: &mut dyn Emit) -> LowerResult<Var> {
    let float = args
        .iter()
        .map(|a| emit.ty(*a).elem)
        .find(|t| t.is_float())
        .unwrap_or(ScalarType::F64);
    // The length `N` of the elementwise arguments (not the size of a
    // vector or matrix argument).
    let params = function.params();
    let length = args
        .iter()
        .zip(&params)
        .filter(|(_, p)| p.kind.is_elementwise())
        .find_map(|(a, _)| emit.ty(*a).dims.first().copied());
    let mut b = Builder {
        emit,
        float,
        length,
        guarded: length.is_some() && distributions::fails_only_when_not_finite(function),
        name: function.name(),
        squares: Vec::new(),
        logs: Vec::new(),
        zeros: Vec::new(),
        pending: Vec::new(),
    };
    let result = match function {
        Function::Distribution(family, suffix) => {
            distributions::expand(&mut b, family, suffix, args)
        }
        Function::Special(s) => special::expand(&mut b, s, args),
    }?;
    b.finish_checks(result)?;
    Ok(result)
}

/// Emits the operations of one expansion: arithmetic in the call's float
/// type, broadcasting a scalar over the call's vectors.
pub(crate) struct Builder<'e> {
    emit: &'e mut dyn Emit,
    /// The float type of the call.
    float: ScalarType,
    /// The length of the call's vectors, if it has any.
    length: Option<Dim>,
    /// Whether the checks' tests and faults go in a check arm at the end,
    /// entered only when the density is not finite ([`checks`]): for the
    /// vectorized calls of a density whose every failing check makes it
    /// infinite or NaN (`normal` and `normal_id_glm`), where the tests
    /// would be passes over the vectors at every evaluation.
    guarded: bool,
    /// The function's name, for the messages of its checks.
    name: String,
    /// The products `v . v` emitted so far, `(v, product)`: the expansion
    /// is straight-line code in one block and writes only its own
    /// variables, so a product of the same vector has the same value.
    squares: Vec<(Var, Var)>,
    /// The logarithms `ln(v)` emitted so far, `(v, ln)`, as `squares`.
    logs: Vec<(Var, Var)>,
    /// The vectors of zeros the finiteness checks of matrices take,
    /// `(length, zeros)`: one per length per expansion, as `squares`.
    zeros: Vec<(Dim, Var)>,
    /// The checks whose faults are not emitted yet ([`checks`]).
    pending: Vec<checks::Pending>,
}

impl Builder<'_> {
    /// A float constant.
    pub(crate) fn c(&mut self, value: f64) -> LowerResult<Var> {
        let scalar = match self.float {
            ScalarType::F32 => Scalar::F32(value as f32),
            _ => Scalar::F64(value),
        };
        self.emit_prim(Prim::Const(scalar), Vec::new())
    }

    /// An `i64` constant.
    pub(crate) fn int(&mut self, value: i64) -> LowerResult<Var> {
        self.emit_prim(Prim::Const(Scalar::I64(value)), Vec::new())
    }

    /// Appends `prim(args)`, after the faults of the pending checks if it
    /// may fault or draws (see [`checks`]).
    fn emit_prim(&mut self, prim: Prim, args: Vec<Var>) -> LowerResult<Var> {
        if self.orders_checks(&prim, &args) {
            self.flush_checks()?;
        }
        self.emit.prim(prim, args)
    }

    /// Appends any primitive with a result.
    pub(crate) fn op(&mut self, prim: Prim, args: Vec<Var>) -> LowerResult<Var> {
        self.emit_prim(prim, args)
    }

    /// Whether `v` is the float constant `k`, every bit (`-0.0` is not
    /// `0.0`), as a literal argument is.
    pub(crate) fn is_constant(&self, v: Var, k: f64) -> bool {
        self.emit
            .constant(v)
            .is_some_and(|x| x.to_bits() == k.to_bits())
    }

    /// `v . v` of a vector, emitted once per expansion.
    pub(crate) fn square(&mut self, v: Var) -> LowerResult<Var> {
        if let Some(&(_, product)) = self.squares.iter().find(|(of, _)| *of == v) {
            return Ok(product);
        }
        let product = self.emit_prim(Prim::Dot, vec![v, v])?;
        self.squares.push((v, product));
        Ok(product)
    }

    /// The axes of a variable.
    pub(crate) fn ty_dims(&self, v: Var) -> Vec<Dim> {
        self.emit.ty(v).dims
    }

    /// A bool (or bool array) as the call's float type: 0 or 1.
    pub(crate) fn float_of_bool(&mut self, v: Var) -> LowerResult<Var> {
        self.emit_prim(Prim::Cast(self.float), vec![v])
    }

    /// The length of the first axis of an array.
    pub(crate) fn dim(&self, v: Var) -> Dim {
        self.emit.ty(v).dims[0]
    }

    /// `[value; len]` in the call's float type.
    pub(crate) fn filled(&mut self, value: f64, len: Dim) -> LowerResult<Var> {
        let c = self.c(value)?;
        self.emit_prim(Prim::Fill(len), vec![c])
    }

    /// The sum of a float vector's elements, or of a matrix's.
    pub(crate) fn sum(&mut self, v: Var) -> LowerResult<Var> {
        let v = if self.emit.ty(v).dims.len() == 2 {
            let ones = self.filled(1.0, self.emit.ty(v).dims[1])?;
            self.emit_prim(Prim::Matvec, vec![v, ones])?
        } else {
            v
        };
        self.emit_prim(Prim::Reduce(ReduceOp::Sum), vec![v])
    }

    pub(crate) fn binary(&mut self, op: BinaryOp, a: Var, b: Var) -> LowerResult<Var> {
        self.emit_prim(Prim::Binary(op), vec![a, b])
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, a: Var) -> LowerResult<Var> {
        self.emit_prim(Prim::Unary(op), vec![a])
    }

    pub(crate) fn add(&mut self, a: Var, b: Var) -> LowerResult<Var> {
        self.binary(BinaryOp::Add, a, b)
    }

    pub(crate) fn sub(&mut self, a: Var, b: Var) -> LowerResult<Var> {
        self.binary(BinaryOp::Sub, a, b)
    }

    pub(crate) fn mul(&mut self, a: Var, b: Var) -> LowerResult<Var> {
        self.binary(BinaryOp::Mul, a, b)
    }

    pub(crate) fn div(&mut self, a: Var, b: Var) -> LowerResult<Var> {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `a * k` for a constant `k`.
    pub(crate) fn scale(&mut self, a: Var, k: f64) -> LowerResult<Var> {
        let k = self.c(k)?;
        self.mul(a, k)
    }

    /// `a + k` for a constant `k`.
    pub(crate) fn shift(&mut self, a: Var, k: f64) -> LowerResult<Var> {
        let k = self.c(k)?;
        self.add(a, k)
    }

    pub(crate) fn neg(&mut self, a: Var) -> LowerResult<Var> {
        self.unary(UnaryOp::Neg, a)
    }

    /// `ln(a)`, emitted once per expansion.
    pub(crate) fn ln(&mut self, a: Var) -> LowerResult<Var> {
        if let Some(&(_, l)) = self.logs.iter().find(|(of, _)| *of == a) {
            return Ok(l);
        }
        let l = self.unary(UnaryOp::Ln, a)?;
        self.logs.push((a, l));
        Ok(l)
    }

    pub(crate) fn compare(&mut self, op: CompareOp, a: Var, b: Var) -> LowerResult<Var> {
        self.emit_prim(Prim::Compare(op), vec![a, b])
    }

    /// `a op k` for a float constant `k`.
    pub(crate) fn compare_c(&mut self, op: CompareOp, a: Var, k: f64) -> LowerResult<Var> {
        let k = self.c(k)?;
        self.compare(op, a, k)
    }

    /// `a op k` for an `i64` constant `k`.
    pub(crate) fn compare_int(&mut self, op: CompareOp, a: Var, k: i64) -> LowerResult<Var> {
        let k = self.int(k)?;
        self.compare(op, a, k)
    }

    /// `c ? a : b` elementwise; a scalar among them is broadcast.
    pub(crate) fn select(&mut self, c: Var, a: Var, b: Var) -> LowerResult<Var> {
        // `select` needs its alternatives of one shape, and its condition
        // a scalar or of that shape.
        let shape = [c, a, b]
            .iter()
            .map(|v| self.emit.ty(*v).dims)
            .max_by_key(|d| d.len());
        let dims = shape.unwrap_or_default();
        let (c, a, b) = (
            self.shaped(c, &dims)?,
            self.shaped(a, &dims)?,
            self.shaped(b, &dims)?,
        );
        self.emit_prim(Prim::Select, vec![c, a, b])
    }

    /// An elementwise operation of three floats; a scalar among them is
    /// broadcast to the others' shape.
    pub(crate) fn ternary(&mut self, op: TernaryOp, a: Var, b: Var, x: Var) -> LowerResult<Var> {
        let shape = [a, b, x]
            .iter()
            .map(|v| self.emit.ty(*v).dims)
            .max_by_key(|d| d.len());
        let dims = shape.unwrap_or_default();
        let args = vec![
            self.shaped(a, &dims)?,
            self.shaped(b, &dims)?,
            self.shaped(x, &dims)?,
        ];
        self.emit_prim(Prim::Ternary(op), args)
    }

    /// `v` broadcast to `dims` (a vector's length, a matrix's shape) if it
    /// is a scalar.
    fn shaped(&mut self, v: Var, dims: &[Dim]) -> LowerResult<Var> {
        if !self.emit.ty(v).dims.is_empty() {
            return Ok(v);
        }
        let mut out = v;
        for &len in dims.iter().rev() {
            out = self.emit_prim(Prim::Fill(len), vec![out])?;
        }
        Ok(out)
    }

    /// An `i64` (or `i64` vector) as the call's float type.
    pub(crate) fn float(&mut self, v: Var) -> LowerResult<Var> {
        if self.emit.ty(v).elem == self.float {
            return Ok(v);
        }
        self.emit_prim(Prim::Cast(self.float), vec![v])
    }

    /// A bool (or bool vector) as an `i64` 0 or 1.
    pub(crate) fn indicator(&mut self, v: Var) -> LowerResult<Var> {
        self.emit_prim(Prim::Cast(ScalarType::I64), vec![v])
    }

    /// The sum over the call's vectors of an elementwise term: a vector's
    /// sum, or a scalar times the call's length (a term of scalar
    /// arguments only, such as `-ln(sigma)`, counts once per element).
    pub(crate) fn total(&mut self, v: Var) -> LowerResult<Var> {
        if !self.emit.ty(v).dims.is_empty() {
            return self.emit_prim(Prim::Reduce(ReduceOp::Sum), vec![v]);
        }
        match self.length {
            Some(len) => {
                let n = self.count(len)?;
                self.mul(v, n)
            }
            None => Ok(v),
        }
    }

    /// The length `len` as a number of the call's float type.
    pub(crate) fn count(&mut self, len: Dim) -> LowerResult<Var> {
        match len {
            Dim::Fixed(n) => self.c(n as f64),
            Dim::Symbolic(symbol) => {
                let n = self.emit_prim(Prim::SymbolValue(symbol), Vec::new())?;
                self.float(n)
            }
        }
    }

    /// `x` where `keep` holds, `k` elsewhere: an argument made safe for a
    /// term whose value is replaced there anyway, so that neither the value
    /// nor the derivative of the term that is not taken is infinite or NaN.
    pub(crate) fn where_else(&mut self, keep: Var, x: Var, k: f64) -> LowerResult<Var> {
        let k = self.c(k)?;
        self.select(keep, x, k)
    }

    /// `a * ln(b)`, taken as 0 where `a` and `b` are 0 (Stan's
    /// `multiply_log`), for `b >= 0` and an `a` in the call's float type.
    pub(crate) fn multiply_log(&mut self, a: Var, b: Var) -> LowerResult<Var> {
        self.times_log_at(a, b, false)
    }

    /// `a * ln(1 - b)`, taken as 0 where `a` is 0 and `b` is 1.
    pub(crate) fn multiply_log1m(&mut self, a: Var, b: Var) -> LowerResult<Var> {
        self.times_log_at(a, b, true)
    }

    /// `a * ln(b)` (or `a * ln(1 - b)` with `one_minus`). Where the logarithm
    /// is of 0 the value is a constant (0 for `a = 0`, else `-inf` or
    /// `+inf` by the sign of `a`) and the logarithm is taken of a safe
    /// argument, so that its derivative is finite where it is not used.
    fn times_log_at(&mut self, a: Var, b: Var, one_minus: bool) -> LowerResult<Var> {
        let pole = if one_minus { 1.0 } else { 0.0 };
        let at_pole = self.compare_c(CompareOp::Eq, b, pole)?;
        let away = self.unary(UnaryOp::Not, at_pole)?;
        let safe = self.where_else(away, b, 0.5)?;
        let l = if one_minus {
            let m = self.neg(safe)?;
            self.unary(UnaryOp::Ln1p, m)?
        } else {
            self.ln(safe)?
        };
        let term = self.mul(a, l)?;
        let a_zero = self.compare_c(CompareOp::Eq, a, 0.0)?;
        let a_positive = self.compare_c(CompareOp::Gt, a, 0.0)?;
        let (zero, ninf, inf) = (
            self.c(0.0)?,
            self.c(f64::NEG_INFINITY)?,
            self.c(f64::INFINITY)?,
        );
        let signed = self.select(a_positive, ninf, inf)?;
        let limit = self.select(a_zero, zero, signed)?;
        self.select(at_pole, limit, term)
    }

    /// Draws from U[0, 1) shaped like the call's vectors (one draw if it has none).
    pub(crate) fn uniform(&mut self) -> LowerResult<Var> {
        let shape = self.shape_template()?;
        self.emit_prim(Prim::UniformLike, vec![shape])
    }

    /// Draws from N(0, 1) shaped like the call's vectors.
    pub(crate) fn normal(&mut self) -> LowerResult<Var> {
        let shape = self.shape_template()?;
        self.emit_prim(Prim::NormalLike, vec![shape])
    }

    /// A zero of the call's float type and shape: what `uniform_like` and
    /// `normal_like` draw like.
    fn shape_template(&mut self) -> LowerResult<Var> {
        let zero = self.c(0.0)?;
        match self.length {
            Some(len) => self.emit_prim(Prim::Fill(len), vec![zero]),
            None => Ok(zero),
        }
    }
}
