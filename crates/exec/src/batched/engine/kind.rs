//! The batched forms of the primitives ([`Kind`]): which form an operation
//! takes on its operands' slots (the plan), and the backend call each form
//! is (`Kind::run`).

use autobatch_ir::{Prim, ReduceOp};
use autobatch_kernels::backend::Backend;
use autobatch_kernels::buffer::{Rows, RowsMut};
use autobatch_kernels::elementwise::unary_result_type;
use autobatch_kernels::linalg::{Dims, ProductOp};
use autobatch_kernels::{dim_length, Fault};
use autobatch_types::ScalarType;

use super::super::storage::Slot;
use super::{rows_of, slot_shape, SharedEnv};
use crate::internal::internal_error;

/// The batched form of a primitive on these operands (see [`plan`]).
#[derive(Clone, Copy, Debug)]
pub(in crate::batched) enum Kind {
    Unary(autobatch_ir::UnaryOp),
    Binary(autobatch_ir::BinaryOp),
    Compare(autobatch_ir::CompareOp),
    Cast,
    Select,
    /// A reduction of each row (1-D) to a scalar.
    Reduce(ReduceOp),
    /// The softmax of each (1-D, float) row.
    Softmax,
    /// `array[index]`, `length` items per array.
    Index {
        length: usize,
    },
    /// `array[index] = value`, into a copy; `length` items per array.
    IndexSet {
        length: usize,
    },
    /// `[x; count]`.
    Fill {
        count: usize,
    },
    /// `transpose(m)` of an `m x k` matrix.
    Transpose {
        m: usize,
        k: usize,
    },
    /// `outer(a, b)` of vectors.
    Outer,
    /// `[x0, ..., xn-1]`.
    Stack,
    /// A float product, each operand shared or per member.
    Product {
        op: ProductOp,
        dims: Dims,
    },
}

impl Kind {
    /// The batched form of an elementwise primitive.
    pub(super) fn elementwise(prim: &Prim) -> Option<Kind> {
        Some(match prim {
            Prim::Unary(op) => Kind::Unary(*op),
            Prim::Binary(op) => Kind::Binary(*op),
            Prim::Compare(op) => Kind::Compare(*op),
            Prim::Cast(_) => Kind::Cast,
            Prim::Select => Kind::Select,
            _ => return None,
        })
    }

    /// The element type of an elementwise primitive's result, from its
    /// operands' types.
    pub(super) fn elementwise_type(
        self,
        prim: &Prim,
        first: ScalarType,
        second: impl FnOnce() -> ScalarType,
    ) -> ScalarType {
        match (self, prim) {
            (Kind::Unary(op), _) => unary_result_type(op, first),
            (Kind::Binary(_), _) => first,
            (Kind::Compare(_), _) => ScalarType::Bool,
            (Kind::Cast, Prim::Cast(to)) => *to,
            (Kind::Select, _) => second(),
            _ => internal_error(format!("{} is not elementwise", prim.name())),
        }
    }

    /// A rough cost of one result element, in elements of memory traffic.
    pub(super) fn cost_per_element(&self) -> usize {
        match self {
            Kind::Reduce(_) | Kind::Softmax => 64,
            Kind::Product { dims, .. } => dims.k.max(1),
            _ => 1,
        }
    }

    /// Computes the rows of `out` from the same rows of `args` (already cut
    /// to those rows): one backend call per form.
    pub(super) fn run(
        self,
        backend: &dyn Backend,
        args: &[Rows<'_>],
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        let arg = |k: usize| args[k];
        match self {
            Kind::Unary(op) => backend.unary(op, arg(0), out),
            Kind::Binary(op) => return backend.binary(op, arg(0), arg(1), out),
            Kind::Compare(op) => backend.compare(op, arg(0), arg(1), out),
            Kind::Cast => backend.cast(arg(0), out),
            Kind::Select => backend.select(arg(0), arg(1), arg(2), out),
            Kind::Reduce(op) => backend.reduce(op, arg(0), out),
            Kind::Softmax => backend.softmax(arg(0), out),
            Kind::Index { length } => return backend.index(arg(0), arg(1), length, out),
            Kind::IndexSet { length } => {
                return backend.index_set(arg(0), arg(1), arg(2), length, out)
            }
            Kind::Fill { count } => backend.fill(arg(0), count, out),
            Kind::Transpose { m, k } => backend.transpose(arg(0), m, k, out),
            Kind::Outer => backend.outer(arg(0), arg(1), out),
            Kind::Stack => backend.stack(args, out),
            Kind::Product { op, dims } => backend.product(op, dims, arg(0), arg(1), out),
        }
        Ok(())
    }
}

/// Which batched form runs `prim` on these operands, if any: the operands'
/// shapes must be the ones the form takes, and `out_len` (the elements of
/// one row of the result) the one it gives.
pub(in crate::batched) fn plan(
    prim: &Prim,
    args: &[usize],
    slots: &[Slot],
    out_len: usize,
    env: &SharedEnv<'_>,
) -> Option<Kind> {
    let slot = |k: usize| &slots[args[k]];
    match prim {
        Prim::Unary(_) | Prim::Binary(_) | Prim::Compare(_) | Prim::Cast(_) | Prim::Select => {
            let fits = args.iter().enumerate().all(|(k, a)| {
                elementwise_operand_fits(&slots[*a], out_len, matches!(prim, Prim::Select) && k > 0)
            });
            fits.then(|| Kind::elementwise(prim)).flatten()
        }
        Prim::Reduce(op) => match slot(0) {
            Slot::Column(c) if c.shape.len() == 1 && out_len == 1 && c.row_len == c.shape[0] => {
                Some(Kind::Reduce(*op))
            }
            _ => None,
        },
        Prim::Softmax => match slot(0) {
            Slot::Column(c)
                if c.shape.len() == 1 && c.row_len == out_len && c.data.ty().is_float() =>
            {
                Some(Kind::Softmax)
            }
            _ => None,
        },
        Prim::Index | Prim::IndexSet => plan_index(prim, args, slots, out_len),
        Prim::Fill(dim) => match slot(0) {
            Slot::Column(c) => {
                let count = dim_length(env.symbols, *dim);
                (c.row_len.checked_mul(count) == Some(out_len)).then_some(Kind::Fill { count })
            }
            Slot::Invariant(_) | Slot::Member(_) => None,
        },
        Prim::Transpose => match (slot(0), slot_shape(slot(0))?) {
            (Slot::Column(_), &[m, k]) if m * k == out_len => Some(Kind::Transpose { m, k }),
            _ => None,
        },
        Prim::Outer => match (slot_shape(slot(0))?, slot_shape(slot(1))?) {
            (&[m], &[k]) if m * k == out_len => Some(Kind::Outer),
            _ => None,
        },
        Prim::Stack => {
            let item = out_len.checked_div(args.len())?;
            let fits = args
                .iter()
                .all(|a| rows_of(&slots[*a]).is_some_and(|r| r.row_len() == item));
            (fits && item * args.len() == out_len).then_some(Kind::Stack)
        }
        Prim::Dot | Prim::Matvec | Prim::Vecmat | Prim::Matmul => {
            plan_product(prim, slot(0), slot(1), out_len)
        }
        _ => None,
    }
}

/// Whether an operand of an elementwise operation fits its batched form:
/// a column of the result's row length, a per-member scalar, a shared
/// scalar, or a shared value of the result's shape (`select`'s alternatives
/// are never broadcast).
fn elementwise_operand_fits(slot: &Slot, out_len: usize, alternative: bool) -> bool {
    match slot {
        Slot::Column(c) => c.row_len == out_len || (c.row_len == 1 && !alternative),
        Slot::Invariant(Some(t)) => (t.is_scalar() && !alternative) || t.len() == out_len,
        Slot::Invariant(None) | Slot::Member(_) => false,
    }
}

/// `array[index]` and `array[index] = value`: an array with an outer axis,
/// an integer scalar index per row, items of the result's (or the value's)
/// length.
fn plan_index(prim: &Prim, args: &[usize], slots: &[Slot], out_len: usize) -> Option<Kind> {
    let (&length, item_shape) = slot_shape(&slots[args[0]])?.split_first()?;
    let item: usize = item_shape.iter().product();
    let index = rows_of(&slots[args[1]])?;
    if index.row_len() != 1 || !index.ty().is_integer() {
        return None;
    }
    match prim {
        Prim::Index => (item == out_len).then_some(Kind::Index { length }),
        _ => {
            let value = rows_of(&slots[args[2]])?;
            (value.row_len() == item && length * item == out_len)
                .then_some(Kind::IndexSet { length })
        }
    }
}

/// A float product of two operands, each a column or shared.
fn plan_product(prim: &Prim, a: &Slot, b: &Slot, out_len: usize) -> Option<Kind> {
    let float = |slot: &Slot| rows_of(slot).is_some_and(|r| r.ty().is_float());
    if !float(a) || !float(b) {
        return None;
    }
    product_kind(prim, slot_shape(a)?, slot_shape(b)?, out_len)
}

/// The batched form of a product of operands of these shapes (of one row),
/// if the shapes fit it and its result has `out_len` elements.
pub(super) fn product_kind(prim: &Prim, a: &[usize], b: &[usize], out_len: usize) -> Option<Kind> {
    let (op, m, k, p) = match (prim, a, b) {
        (Prim::Dot, &[k], &[k2]) if k == k2 => (ProductOp::Dot, 1, k, 1),
        (Prim::Matvec, &[m, k], &[k2]) if k == k2 => (ProductOp::Matvec, m, k, 1),
        (Prim::Vecmat, &[k], &[k2, p]) if k == k2 => (ProductOp::Vecmat, 1, k, p),
        (Prim::Matmul, &[m, k], &[k2, p]) if k == k2 => (ProductOp::Matmul, m, k, p),
        _ => return None,
    };
    (m * p == out_len).then_some(Kind::Product {
        op,
        dims: Dims { m, k, p },
    })
}
