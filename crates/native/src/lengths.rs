//! The lengths of the symbolic dimensions native code runs with.
//!
//! A dimension is either one length for the whole run, which the code has
//! as a constant, or, in a ragged batch, each member's own
//! (*per member*). Code compiled with per-member dimensions reads a
//! member's lengths from its context (`Context::symbols`) where it needs
//! them: a loop's count, a symbol's value, an index's bound, the bytes an
//! array copy moves, the shapes the host's array operations see. Each
//! array still has a fixed place in its function's frame, sized for the
//! *capacity* of its dimensions (the most any member of the run has); a
//! member's value lies, laid out for its own lengths, at the start of that
//! place, and nothing reads the rest.
//!
//! A member's lengths come from its arguments: a per-member dimension is
//! one that only batched entry arguments have in their types, so the
//! shapes of the member's arguments fix it ([`member_symbols`]).

use autobatch_types::{Dim, SymbolId, Tensor, TensorType};

/// The lengths a program is compiled for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lengths {
    /// Per symbol: its length, or for a per-member one its capacity (the
    /// most any member of the runs may have).
    pub values: Vec<u64>,
    /// Per symbol: whether each member has its own length (read at run
    /// time). Empty or shorter than `values`: the rest are not.
    pub per_member: Vec<bool>,
}

impl Lengths {
    /// Lengths fixed for the whole run.
    pub fn fixed(values: &[u64]) -> Lengths {
        Lengths {
            values: values.to_vec(),
            per_member: Vec::new(),
        }
    }

    /// Whether symbol `s` is each member's own.
    pub fn is_per_member(&self, s: SymbolId) -> bool {
        self.per_member.get(s.0 as usize).copied().unwrap_or(false)
    }

    /// Whether any dimension is each member's own.
    pub fn any_per_member(&self) -> bool {
        self.per_member.iter().any(|p| *p)
    }

    /// Whether a value of type `ty` has a per-member dimension.
    pub fn is_ragged(&self, ty: &TensorType) -> bool {
        ty.dims
            .iter()
            .any(|d| matches!(d, Dim::Symbolic(s) if self.is_per_member(*s)))
    }
}

/// A member's own lengths of every symbol: `lengths.values` with each
/// per-member symbol's length read from the member's arguments `args` of
/// the entry's parameter types `params`, written into `into`. Refused
/// (as an internal error: the executor checked the batch) when an
/// argument's shape does not fit its parameter: another fixed length, a
/// per-member length past its capacity or two lengths for one symbol.
pub(crate) fn member_symbols(
    lengths: &Lengths,
    params: &[TensorType],
    args: &[&Tensor],
    into: &mut Vec<u64>,
) -> Result<(), String> {
    into.clear();
    into.extend_from_slice(&lengths.values);
    let mut seen = vec![false; into.len()];
    for (k, (ty, arg)) in params.iter().zip(args).enumerate() {
        if ty.dims.len() != arg.shape.len() {
            return Err(format!(
                "argument {k} has {} dimensions, its parameter {}",
                arg.shape.len(),
                ty.dims.len()
            ));
        }
        for (dim, &length) in ty.dims.iter().zip(&arg.shape) {
            let length = length as u64;
            let fits = match dim {
                Dim::Fixed(n) => *n == length,
                Dim::Symbolic(s) if lengths.is_per_member(*s) => {
                    let s = s.0 as usize;
                    let agrees = !seen[s] || into[s] == length;
                    let fits = agrees && length <= lengths.values[s];
                    (seen[s], into[s]) = (true, length);
                    fits
                }
                Dim::Symbolic(s) => lengths.values[s.0 as usize] == length,
            };
            if !fits {
                return Err(format!(
                    "argument {k} has shape {:?}, which does not fit its parameter's {:?}",
                    arg.shape, ty.dims
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_types::{Data, ScalarType, SymbolId};

    fn vector(n: usize) -> Tensor {
        Tensor::new(vec![n], Data::F64(vec![0.0; n]))
    }

    fn ragged() -> (Lengths, Vec<TensorType>) {
        let lengths = Lengths {
            values: vec![3, 8],
            per_member: vec![false, true],
        };
        let ty = |s| TensorType {
            elem: ScalarType::F64,
            dims: vec![Dim::Symbolic(SymbolId(s))],
        };
        (lengths, vec![ty(1), ty(1), ty(0)])
    }

    #[test]
    fn a_members_lengths_come_from_its_arguments() {
        let (lengths, params) = ragged();
        let (a, b, c) = (vector(5), vector(5), vector(3));
        let mut symbols = Vec::new();
        member_symbols(&lengths, &params, &[&a, &b, &c], &mut symbols).unwrap();
        assert_eq!(symbols, vec![3, 5]);
    }

    #[test]
    fn arguments_that_do_not_fit_are_refused() {
        let (lengths, params) = ragged();
        let mut symbols = Vec::new();
        for (a, b, c) in [
            (9, 9, 3), // past the capacity
            (5, 4, 3), // two lengths for one symbol
            (5, 5, 2), // another fixed length
        ] {
            let (a, b, c) = (vector(a), vector(b), vector(c));
            assert!(member_symbols(&lengths, &params, &[&a, &b, &c], &mut symbols).is_err());
        }
    }
}
