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
//!
//! Where every failing check makes the density infinite or NaN (the
//! vectorized `normal` and `normal_id_glm` log densities: see
//! `distributions::fails_only_when_not_finite`), the expansion is
//! *guarded*: no test is computed with the arithmetic; at its end a check
//! arm, a block entered only when the density is not finite or is zero (a
//! sum over no element is zero whatever the scalar arguments), computes
//! the tests and emits the faults in the same order
//! ([`Builder::finish_checks`]). A member whose checks pass gets the same
//! value; one whose check fails reaches the arm and meets the same first
//! failing check; the usual evaluation pays one comparison instead of a
//! pass over each vector.

use autobatch_ir::{BinaryOp, CompareOp, Dim, Prim, ReduceOp, UnaryOp, Var};

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
    /// A test not computed yet: an expansion whose checks run only when
    /// its density is not finite ([`Builder::finish_checks`]) computes it
    /// where the fault goes.
    Later(Kind),
}

/// What a check tests.
#[derive(Clone, Copy)]
enum Kind {
    /// `ok` (a bool, bool vector or matrix) holds everywhere.
    All(Var),
    /// `v op k` everywhere.
    Compare(Var, CompareOp, f64),
    Finite(Var),
    NotNan(Var),
    /// Positive everywhere, of a float vector checked finite before.
    Positive(Var),
}

impl Builder<'_> {
    /// Faults with `domain_error` unless `ok` (a bool, bool vector or matrix) holds
    /// everywhere: "`normal_lpdf`: Scale parameter `sigma` must be positive".
    pub(crate) fn check(&mut self, ok: Var, what: &str, arg: &str, must: &str) -> LowerResult<()> {
        self.add_check(Kind::All(ok), what, arg, must)
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
        self.add_check(Kind::Compare(v, op, k), what, arg, must)
    }

    /// Checks that a float is finite everywhere.
    pub(crate) fn check_finite(&mut self, v: Var, what: &str, arg: &str) -> LowerResult<()> {
        self.add_check(Kind::Finite(v), what, arg, "finite")
    }

    /// Checks that a float is not NaN anywhere.
    pub(crate) fn check_not_nan(&mut self, v: Var, what: &str, arg: &str) -> LowerResult<()> {
        self.add_check(Kind::NotNan(v), what, arg, "not NaN")
    }

    /// Checks that a float vector, checked finite before, is positive
    /// everywhere.
    pub(crate) fn check_positive(&mut self, v: Var, what: &str, arg: &str) -> LowerResult<()> {
        self.add_check(Kind::Positive(v), what, arg, "positive")
    }

    /// A pending check of `kind`, its test computed now unless the
    /// expansion's checks run only when its density is not finite.
    fn add_check(&mut self, kind: Kind, what: &str, arg: &str, must: &str) -> LowerResult<()> {
        let test = if self.guarded {
            Test::Later(kind)
        } else {
            self.test(kind)?
        };
        let message = format!("`{}`: {what} `{arg}` must be {must}", self.name);
        self.pending.push(Pending { test, message });
        Ok(())
    }

    /// Computes the test of a check of `kind`.
    fn test(&mut self, kind: Kind) -> LowerResult<Test> {
        Ok(match kind {
            Kind::All(ok) => Test::Holds(self.everywhere(ok)?),
            Kind::Compare(v, op, k) => {
                let ok = self.compare_c(op, v, k)?;
                Test::Holds(self.everywhere(ok)?)
            }
            Kind::Finite(v) => self.finite_test(v)?,
            Kind::NotNan(v) => self.not_nan_test(v)?,
            Kind::Positive(v) => Test::Positive(v),
        })
    }

    /// A bool scalar that is true when `ok` holds everywhere.
    fn everywhere(&mut self, ok: Var) -> LowerResult<Var> {
        let dims = self.emit.ty(ok).dims;
        Ok(match dims[..] {
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
        })
    }

    /// The test that a float is finite everywhere. Of a matrix, in two
    /// products: each row of `matvec(m, 0)` is 0 or NaN as the row is
    /// finite or not, and their dot with themselves is 0 or NaN (a product
    /// with a static matrix, which the chains of a thread share under
    /// native-batched, as they share `normal_id_glm`'s `x beta`).
    fn finite_test(&mut self, v: Var) -> LowerResult<Test> {
        Ok(match self.emit.ty(v).dims[..] {
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
                Test::Holds(self.everywhere(ok)?)
            }
        })
    }

    /// The test that a float is not NaN anywhere.
    fn not_nan_test(&mut self, v: Var) -> LowerResult<Test> {
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
                return Ok(Test::Holds(self.everywhere(ok)?));
            }
        };
        Ok(Test::NotNan(probe))
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
            let test = match test {
                Test::Later(kind) => self.test(kind)?,
                computed => computed,
            };
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
                Test::Later(_) => unreachable!("computed above"),
            };
            self.emit.effect(Prim::Check { message }, vec![ok])?;
        }
        Ok(())
    }

    /// Emits the pending checks' faults at the end of the expansion whose
    /// result is `density`: where the checks run only when the density is
    /// not finite (`guarded`), in a check arm entered unless `density` is
    /// finite and not zero (a sum over no element is zero, whatever the
    /// scalar arguments), with their tests computed there.
    pub(super) fn finish_checks(&mut self, density: Var) -> LowerResult<()> {
        if !self.guarded || self.pending.is_empty() {
            return self.flush_checks();
        }
        let finite = self.unary(UnaryOp::IsFinite, density)?;
        let nonzero = self.compare_c(CompareOp::Ne, density, 0.0)?;
        let usual = self.binary(BinaryOp::BitAnd, finite, nonzero)?;
        self.emit.begin_check_arm(usual)?;
        self.flush_checks()?;
        self.emit.end_check_arm()
    }
}
