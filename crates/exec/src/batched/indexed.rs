//! Products with an item of a shared array chosen per row:
//! `matvec(W[l], h)` where `W` is invariant (a static) and `l` is each
//! row's own index (a layer counter, a direction, a word).
//!
//! Run as written, `W[l]` copies an item (a whole matrix) into every row
//! and the product then reads one matrix per row: memory-bound, where the
//! same product with a named static reads the matrix once. Here the
//! two operations run as one: the rows are grouped by their index, and
//! each group runs the product with its item shared, as it would with a
//! static named in the program. The item is never copied.
//!
//! [`find_indexed_products`] finds them once per block: an `index` whose
//! result is a step temporary that every later operation mentioning it, up
//! to its death, reads as the matrix of a product. [`Deferral`] is the
//! state of a step: the executor *defers* the `index` when, at its turn,
//! the operands are of the kinds this form takes and every active row's
//! index is in bounds (so the `index` cannot fault, and deferring it moves
//! no fault); its products then run grouped
//! ([`super::engine::Engine::run_prim`] with [`PrimExecution::indexed`]).
//! Otherwise nothing is deferred and both run as usual.
//!
//! Each element is computed by the same kernel in the same order as the
//! product of the copied item (the products' order does not depend on
//! whether an operand is shared, nor on the batch), so the bits are the
//! same; every executor's tests compare them with the reference.
//!
//! [`PrimExecution::indexed`]: super::engine::PrimExecution::indexed

use autobatch_ir::Prim;
use autobatch_kernels::buffer::Values;

use super::chains::OpView;
use super::storage::Slot;

/// What an operation of a block is to an indexed product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedRole {
    /// `dst = array[index]`, read only by products, the last at operation
    /// `product`.
    Index {
        product: usize,
        array: usize,
        index: usize,
    },
    /// The product reading the item `array[index]` of the `index` at
    /// operation `index_op` as its operand `operand` (0 or 1).
    Product {
        index_op: usize,
        operand: usize,
        array: usize,
        index: usize,
    },
}

impl IndexedRole {
    /// The product's execution as an indexed product: its operands
    /// `[index, other]` (from its own `args`) and the indexed operand.
    pub fn product_operands(self, args: &[usize]) -> Option<([usize; 2], IndexedOperand)> {
        let IndexedRole::Product {
            operand,
            array,
            index,
            ..
        } = self
        else {
            return None;
        };
        let other = *args.get(1 - operand)?;
        Some(([index, other], IndexedOperand { operand, array }))
    }
}

/// The operand of a grouped product that is an item of a shared array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexedOperand {
    /// Which operand of the product (0 or 1) it is; the execution's
    /// `args` are then `[index, other]`.
    pub operand: usize,
    /// The slot of the shared array.
    pub array: usize,
}

/// Whether the product takes an item of an array as operand `k` in a form
/// with a shared matrix: `matvec`'s matrix, `vecmat`'s matrix, either
/// side of `matmul`.
fn takes_matrix(prim: &Prim, k: usize) -> bool {
    matches!(
        (prim, k),
        (Prim::Matvec, 0) | (Prim::Vecmat, 1) | (Prim::Matmul, 0 | 1)
    )
}

/// The indexed products of a block whose operations are `ops` (`None` for
/// calls, forks, stack moves and operations split by size class), by
/// operation: an `index` whose item every later mention reads as the
/// matrix of a product, up to the one where it dies. `dying[i]` are the
/// step temporaries operation `i` mentions last; an index that is a step
/// temporary dying at its `index` now dies at the last product (which
/// reads it when the `index` was deferred).
pub fn find_indexed_products(
    ops: &[Option<OpView<'_>>],
    is_temp: &[bool],
    dying: &mut [Vec<usize>],
) -> Vec<Option<IndexedRole>> {
    let mut roles = vec![None; ops.len()];
    for (i, op) in ops.iter().enumerate() {
        let Some(OpView {
            prim: Prim::Index,
            args: &[array, index],
            dst: Some(item),
        }) = *op
        else {
            continue;
        };
        if !is_temp[item] || item == array || item == index || roles[i].is_some() {
            continue;
        }
        let Some(products) = item_products(ops, i, (array, index, item), dying) else {
            continue;
        };
        if products.iter().any(|(j, _)| roles[*j].is_some()) {
            continue;
        }
        let last = products.last().map_or(i, |(j, _)| *j);
        roles[i] = Some(IndexedRole::Index {
            product: last,
            array,
            index,
        });
        for (j, operand) in products {
            roles[j] = Some(IndexedRole::Product {
                index_op: i,
                operand,
                array,
                index,
            });
        }
        if let Some(k) = dying[i].iter().position(|d| *d == index) {
            dying[i].swap_remove(k);
            dying[last].push(index);
        }
    }
    roles
}

/// The products (operation, operand) that read the item `item =
/// array[index]` computed at operation `i`, if every mention of it up to
/// its death is one, and no operation until then is a call or a stack
/// move or writes the array or the index.
fn item_products(
    ops: &[Option<OpView<'_>>],
    i: usize,
    (array, index, item): (usize, usize, usize),
    dying: &[Vec<usize>],
) -> Option<Vec<(usize, usize)>> {
    let mut products = Vec::new();
    for (j, op) in ops.iter().enumerate().skip(i + 1) {
        let op = (*op)?;
        if op.dst == Some(array) || op.dst == Some(index) || op.dst == Some(item) {
            return None;
        }
        if !op.args.contains(&item) {
            continue;
        }
        let operand = op.args.iter().position(|a| *a == item)?;
        let once = op.args.iter().filter(|a| **a == item).count() == 1;
        if !once || !takes_matrix(op.prim, operand) {
            return None;
        }
        products.push((j, operand));
        if dying[j].contains(&item) {
            return Some(products);
        }
    }
    None
}

/// The products reading the item of the `index` at operation `index_op`.
pub fn products_of(
    roles: &[Option<IndexedRole>],
    index_op: usize,
) -> impl Iterator<Item = usize> + '_ {
    roles
        .iter()
        .enumerate()
        .filter_map(move |(j, role)| match role {
            Some(IndexedRole::Product { index_op: i, .. }) if *i == index_op => Some(j),
            _ => None,
        })
}

/// Whether the `index` of indexed products may be deferred for `rows`:
/// the array is an assigned shared value with items, the index integers in
/// bounds at every row, the products' other operands columns or
/// member-uniform, their results columns. The index is read at `row_of(k,
/// r)` for the `k`-th row `r` (its member, for a member-uniform index; `k`
/// for a step temporary of a compact step).
pub fn deferrable(
    slots: &[Slot],
    (array, index): (usize, usize),
    products: &[OpView<'_>],
    rows: &[u32],
    row_of: &dyn Fn(usize, u32) -> usize,
) -> bool {
    let Slot::Invariant(Some(items)) = &slots[array] else {
        return false;
    };
    let Some(&length) = items.shape.first() else {
        return false;
    };
    if items.shape.len() < 3 || !items.elem_type().is_float() {
        return false;
    }
    let indices = match &slots[index] {
        Slot::Column(c) => c,
        Slot::Member(c) => &**c,
        Slot::Invariant(_) => return false,
    };
    if indices.row_len != 1 || !indices.data.ty().is_integer() {
        return false;
    }
    // (The item's own slot, a step temporary, is a column too.)
    let operands = products.iter().all(|p| {
        p.args
            .iter()
            .all(|s| matches!(slots[*s], Slot::Column(_) | Slot::Member(_)))
    });
    let result = products
        .iter()
        .all(|p| p.dst.is_some_and(|d| matches!(slots[d], Slot::Column(_))));
    let values = Values::all(&indices.data);
    operands
        && result
        && rows.iter().enumerate().all(|(k, &r)| {
            let i = values.integer(row_of(k, r));
            i >= 0 && i < length as i128
        })
}

/// The indices deferred in the running step (reset when a step begins).
#[derive(Default)]
pub struct Deferral {
    deferred: Vec<usize>,
}

impl Deferral {
    pub fn begin(&mut self) {
        self.deferred.clear();
    }

    pub fn defer(&mut self, index_op: usize) {
        self.deferred.push(index_op);
    }

    /// Whether the `index` at `index_op` was deferred in this step (its
    /// products then run grouped).
    pub fn deferred(&self, index_op: usize) -> bool {
        self.deferred.contains(&index_op)
    }
}

/// Rows grouped by their index: `rows` in increasing index (a counting
/// sort, stable: rows of one index stay in increasing order).
pub struct RowGroups {
    pub rows: Vec<u32>,
    /// Per index value that some row has, that value and the range of
    /// `rows` holding its rows.
    starts: Vec<(usize, usize)>,
}

impl RowGroups {
    /// Groups `rows` by `indices` (an integer per row, in `0..length`:
    /// checked when the index was deferred).
    pub fn by_index(indices: Values<'_>, rows: &[u32], length: usize) -> RowGroups {
        let value = |r: u32| indices.integer(r as usize) as usize;
        let first = rows.first().map(|r| value(*r));
        if rows.iter().all(|r| Some(value(*r)) == first) {
            // The usual case: every row at the same index (a loop that all
            // members run together).
            return RowGroups {
                rows: rows.to_vec(),
                starts: first.map(|v| (v, 0)).into_iter().collect(),
            };
        }
        let mut counts = vec![0usize; length + 1];
        for &r in rows {
            counts[value(r) + 1] += 1;
        }
        for v in 0..length {
            counts[v + 1] += counts[v];
        }
        let starts = (0..length)
            .filter(|v| counts[v + 1] > counts[*v])
            .map(|v| (v, counts[v]))
            .collect();
        let mut sorted = vec![0u32; rows.len()];
        for &r in rows {
            let slot = &mut counts[value(r)];
            sorted[*slot] = r;
            *slot += 1;
        }
        RowGroups {
            rows: sorted,
            starts,
        }
    }

    /// Each index value with the range of [`RowGroups::rows`] at it.
    pub fn groups(&self) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
        self.starts.iter().enumerate().map(|(k, &(value, start))| {
            let end = self.starts.get(k + 1).map_or(self.rows.len(), |s| s.1);
            (value, start..end)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_ir::{BinaryOp, UnaryOp};

    const W: usize = 0;
    const L: usize = 1;
    const T: usize = 2;
    const H: usize = 3;
    const U: usize = 4;
    const Y: usize = 5;
    const Z: usize = 6;

    fn view<'a>(prim: &'a Prim, args: &'a [usize], dst: usize) -> Option<OpView<'a>> {
        Some(OpView {
            prim,
            args,
            dst: Some(dst),
        })
    }

    #[test]
    fn an_index_read_only_by_a_product_as_its_matrix_pairs_with_it() {
        // 0: T = W[L]; 1: U = tanh(H); 2: Y = matvec(T, U); 3: Z = Y + U
        let (index, tanh, matvec, add) = (
            Prim::Index,
            Prim::Unary(UnaryOp::Tanh),
            Prim::Matvec,
            Prim::Binary(BinaryOp::Add),
        );
        let ops = [
            view(&index, &[W, L], T),
            view(&tanh, &[H], U),
            view(&matvec, &[T, U], Y),
            view(&add, &[Y, U], Z),
        ];
        let is_temp = [false, false, true, false, true, true, false];
        let mut dying = vec![vec![], vec![], vec![T], vec![Y, U]];
        let roles = find_indexed_products(&ops, &is_temp, &mut dying);
        assert_eq!(
            roles,
            vec![
                Some(IndexedRole::Index {
                    product: 2,
                    array: W,
                    index: L
                }),
                None,
                Some(IndexedRole::Product {
                    index_op: 0,
                    operand: 0,
                    array: W,
                    index: L
                }),
                None
            ]
        );
        // Read as matvec's vector, or read again later, or the index
        // overwritten in between: no pair.
        let as_vector = [view(&index, &[W, L], T), view(&matvec, &[U, T], Y)];
        let mut dying2 = vec![vec![], vec![T]];
        assert_eq!(
            find_indexed_products(&as_vector, &is_temp, &mut dying2),
            vec![None, None]
        );
        let read_later = [
            view(&index, &[W, L], T),
            view(&matvec, &[T, U], Y),
            view(&add, &[T, T], Z),
        ];
        let mut dying3 = vec![vec![], vec![], vec![T]];
        assert_eq!(
            find_indexed_products(&read_later, &is_temp, &mut dying3),
            vec![None, None, None]
        );
        let two = [
            view(&index, &[W, L], T),
            view(&matvec, &[T, U], Y),
            view(&matvec, &[T, H], Z),
        ];
        assert_eq!(
            find_indexed_products(&two, &is_temp, &mut dying3),
            vec![
                Some(IndexedRole::Index {
                    product: 2,
                    array: W,
                    index: L
                }),
                Some(IndexedRole::Product {
                    index_op: 0,
                    operand: 0,
                    array: W,
                    index: L
                }),
                Some(IndexedRole::Product {
                    index_op: 0,
                    operand: 0,
                    array: W,
                    index: L
                }),
            ]
        );
        let overwritten = [
            view(&index, &[W, L], T),
            view(&add, &[H, H], L),
            view(&matvec, &[T, U], Y),
        ];
        assert_eq!(
            find_indexed_products(&overwritten, &is_temp, &mut dying3),
            vec![None, None, None]
        );
    }

    #[test]
    fn rows_are_grouped_by_index_in_order() {
        let indices = [2i64, 0, 2, 1, 0, 2];
        let groups = RowGroups::by_index(Values::I64(&indices), &[0, 1, 3, 4, 5], 3);
        assert_eq!(groups.rows, vec![1, 4, 3, 0, 5]);
        let all: Vec<_> = groups.groups().collect();
        assert_eq!(all, vec![(0, 0..2), (1, 2..3), (2, 3..5)]);
        let same = RowGroups::by_index(Values::I64(&[1, 1, 1]), &[0, 2], 3);
        assert_eq!(same.rows, vec![0, 2]);
        assert_eq!(same.groups().collect::<Vec<_>>(), vec![(1, 0..2)]);
    }
}
