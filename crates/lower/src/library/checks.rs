//! The argument checks of the expansions, and where their faults go.
//!
//! A check computes what it tests where it is called, but its fault (the
//! `check` effect, and the comparison that feeds it) is *pending* until
//! the expansion ends or emits an operation that may fault or draws
//! ([`Builder::flush_checks`]); then the pending checks are emitted in the
//! order they were made. Everything emitted in between only computes
//! values, so a member meets the same first failing check, with the same
//! message, as if each fault came where its check was made. Keeping the
//! faults out of the arithmetic leaves a density over long vectors one run
//! of elementwise operations and sums, which native code computes in one
//! loop (a fault between two operations would split it), and lets the
//! tests of a vector be sums in that loop:
//!
//! - finite: `sum(v - v)` is `+0` when every element is finite (`x - x`
//!   is `+0`), NaN otherwise (`inf - inf`);
//! - not NaN: `sum(v * v)` is NaN exactly when an element is (the terms
//!   are never negative, so no `inf - inf` arises); the density's own
//!   `v . v` when it takes one;
//! - positive, once finite: `sum(ln(v))` is finite exactly when every
//!   element is positive (`ln` of a positive finite float lies within
//!   ±745, of zero is `-inf`, of a negative number NaN), when the density
//!   takes `ln(v)` anyway; else the smallest element is positive.

use autobatch_ir::{CompareOp, Dim, Prim, ReduceOp, UnaryOp, Var};

use super::{Builder, LowerResult};

/// A check whose fault is not emitted yet.
pub(super) struct Pending {
    test: Test,
    message: String,
}

/// What holds when a pending check passes.
enum Test {
    /// A bool scalar is true.
    Holds(Var),
    /// A float scalar is `+0` (or `-0`).
    Zero(Var),
    /// A float scalar is not NaN.
    NotNan(Var),
    /// A float vector, known finite when this is tested, is positive.
    Positive(Var),
}

impl Builder<'_> {
    /// Faults with `domain_error` unless `ok` (a bool, bool vector or matrix) holds
    /// everywhere: "`normal_lpdf`: Scale parameter `sigma` must be positive".
    pub(crate) fn check(&mut self, ok: Var, what: &str, arg: &str, must: &str) -> LowerResult<()> {
        let dims = self.emit.ty(ok).dims;
        let all = match dims[..] {
            [] => ok,
            // Every element holds: the smallest of the 0/1 indicators is
            // 1 (of no element, the type's largest value).
            [_] => {
                let ones = self.indicator(ok)?;
                let least = self.op(Prim::Reduce(ReduceOp::Min), vec![ones])?;
                self.compare_int(CompareOp::Gt, least, 0)?
            }
            // No element fails: the count of failures is 0.
            _ => {
                let bad = self.unary(UnaryOp::Not, ok)?;
                let mut ones = self.indicator(bad)?;
                if let [_, columns] = dims[..] {
                    let one = self.int(1)?;
                    let row = self.op(Prim::Fill(columns), vec![one])?;
                    ones = self.op(Prim::Matvec, vec![ones, row])?;
                }
                let count = self.op(Prim::Reduce(ReduceOp::Sum), vec![ones])?;
                self.compare_int(CompareOp::Eq, count, 0)?
            }
        };
        self.defer(Test::Holds(all), what, arg, must);
        Ok(())
    }

    /// Checks `v op k` everywhere (see [`Self::check`]).
    pub(crate) fn check_c(
        &mut self,
        v: Var,
        op: CompareOp,
        k: f64,
        what: &str,
        arg: &str,
        must: &str,
    ) -> LowerResult<()> {
        let ok = self.compare_c(op, v, k)?;
        self.check(ok, what, arg, must)
    }

    /// Checks that a float is finite everywhere. Of a matrix, in two
    /// products: each row of `matvec(m, 0)` is 0 or NaN as the row is
    /// finite or not, and their dot with themselves is 0 or NaN (a product
    /// with a static matrix, which the chains of a thread share under
    /// native-batched, as they share `normal_id_glm`'s `x beta`).
    pub(crate) fn check_finite(&mut self, v: Var, what: &str, arg: &str) -> LowerResult<()> {
        let test = match self.emit.ty(v).dims[..] {
            [] => Test::Holds(self.unary(UnaryOp::IsFinite, v)?),
            [_] => {
                let differences = self.sub(v, v)?;
                Test::Zero(self.op(Prim::Reduce(ReduceOp::Sum), vec![differences])?)
            }
            [_, columns] => {
                let zeros = self.zeros(columns)?;
                let rows = self.op(Prim::Matvec, vec![v, zeros])?;
                Test::Zero(self.op(Prim::Dot, vec![rows, rows])?)
            }
            _ => {
                let ok = self.unary(UnaryOp::IsFinite, v)?;
                return self.check(ok, what, arg, "finite");
            }
        };
        self.defer(test, what, arg, "finite");
        Ok(())
    }

    /// Checks that a float is not NaN anywhere.
    pub(crate) fn check_not_nan(&mut self, v: Var, what: &str, arg: &str) -> LowerResult<()> {
        let probe = match self.emit.ty(v).dims[..] {
            [] => v,
            [_] => match self.squares.iter().find(|(of, _)| *of == v) {
                Some(&(_, product)) => product,
                None => {
                    let squares = self.mul(v, v)?;
                    self.op(Prim::Reduce(ReduceOp::Sum), vec![squares])?
                }
            },
            _ => {
                let nan = self.unary(UnaryOp::IsNan, v)?;
                let ok = self.unary(UnaryOp::Not, nan)?;
                return self.check(ok, what, arg, "not NaN");
            }
        };
        self.defer(Test::NotNan(probe), what, arg, "not NaN");
        Ok(())
    }

    /// Checks that a float vector, checked finite before, is positive
    /// everywhere.
    pub(crate) fn check_positive(&mut self, v: Var, what: &str, arg: &str) -> LowerResult<()> {
        self.defer(Test::Positive(v), what, arg, "positive");
        Ok(())
    }

    /// `[0.0; len]` for a finiteness check, emitted once per length per
    /// expansion (nothing writes it).
    fn zeros(&mut self, len: Dim) -> LowerResult<Var> {
        if let Some(&(_, zeros)) = self.zeros.iter().find(|(of, _)| *of == len) {
            return Ok(zeros);
        }
        let zeros = self.filled(0.0, len)?;
        self.zeros.push((len, zeros));
        Ok(zeros)
    }

    fn defer(&mut self, test: Test, what: &str, arg: &str, must: &str) {
        let message = format!("`{}`: {what} `{arg}` must be {must}", self.name);
        self.pending.push(Pending { test, message });
    }

    /// Whether the pending checks' faults must come before `prim(args)`:
    /// it may fault, or it draws (a later fault would leave the member's
    /// random stream where it was not).
    pub(super) fn orders_checks(&self, prim: &Prim, args: &[Var]) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let types: Vec<_> = args.iter().map(|a| self.emit.ty(*a)).collect();
        let types: Vec<_> = types.iter().collect();
        prim.may_fault(&types)
            || matches!(
                prim,
                Prim::Uniform
                    | Prim::Normal
                    | Prim::Bernoulli
                    | Prim::UniformLike
                    | Prim::NormalLike
            )
    }

    /// Emits the pending checks' faults, in the order they were made.
    pub(super) fn flush_checks(&mut self) -> LowerResult<()> {
        for Pending { test, message } in std::mem::take(&mut self.pending) {
            let ok = match test {
                Test::Holds(ok) => ok,
                Test::Zero(probe) => self.compare_c(CompareOp::Eq, probe, 0.0)?,
                Test::NotNan(probe) => {
                    let nan = self.unary(UnaryOp::IsNan, probe)?;
                    self.unary(UnaryOp::Not, nan)?
                }
                Test::Positive(v) => match self.logs.iter().find(|(of, _)| *of == v) {
                    Some(&(_, logs)) => {
                        let total = self.op(Prim::Reduce(ReduceOp::Sum), vec![logs])?;
                        self.unary(UnaryOp::IsFinite, total)?
                    }
                    None => {
                        let least = self.op(Prim::Reduce(ReduceOp::Min), vec![v])?;
                        self.compare_c(CompareOp::Gt, least, 0.0)?
                    }
                },
            };
            self.emit.effect(Prim::Check { message }, vec![ok])?;
        }
        Ok(())
    }
}
