//! Size classes: a ragged batch run as **one** batch (the way of the
//! program-counter and local-static strategies, `docs/ragged.md`).
//!
//! A ragged batch's members have their own lengths of some symbolic
//! dimensions (`xs: [f64; L]`, `L` per member). Members with the same
//! lengths of all of them form a *size class*. The columns are padded:
//! each row has room for the longest member's value, and a member's value
//! of a type that mentions a ragged dimension sits, laid out for its own
//! lengths, at the start of its row (the rest of the row is never read).
//!
//! An operation whose types do not mention a ragged dimension (the shared
//! weights' `matvec` of an RNN, its `tanh`, a loop's counter) runs as
//! always, once over all the active rows, whatever their classes. An
//! operation whose types do (`xs[i]`, `sum(xs)`, `xs.len()`, `softmax(xs)`)
//! runs once per class of its active rows ([`run_split`]): those rows'
//! values are gathered (each member's own elements only, never the padding)
//! into a dense buffer of the class's shapes, the operation runs there with
//! the class's lengths, and its results go back to their rows. A copy (an
//! argument, `let y = xs`) moves whole rows and is not split. Nor is an
//! item read or written (`xs[i]`, `xs[i] = v`) of an array whose only
//! ragged dimension is its outermost, for the rows whose index lies inside
//! their own length ([`SizeClasses::bounds_only`]): such an item is where
//! it would be in a row of the longest member, so the operation runs once
//! over those rows; the others (out of their own bounds) run split, where
//! the kernels report each fault against the member's own length. So control
//! flow and the shared-weight products are batched across sizes, and an
//! operation on a ragged value touches only the elements that exist.
//!
//! The operands and results of the split operations are no step
//! temporaries, and the split operations are no links of fused chains (the
//! executors see to both: temporaries are laid out by position in a step,
//! and a chain runs over whole padded rows).
//!
//! This module knows the classes and how to run one operation split by
//! them, through the engine; the executors decide which operations split
//! (it must know nothing of their control).

use std::collections::BTreeMap;

use autobatch_ir::{Prim, SymbolId};
use autobatch_kernels::buffer::{Values, ValuesMut};
use autobatch_kernels::{dim_length, Fault, MemberRng};
use autobatch_types::{Data, Dim, Scalar, Tensor, TensorType};

use super::engine::{Engine, PrimExecution, SharedEnv};
use super::storage::{Column, Slot};
use crate::internal::internal_error;
use crate::{Env, ExecError};

/// How one operation runs in a ragged batch ([`SizeClasses::plan`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitPlan {
    /// Whether it runs through [`run_split`] (it mentions a ragged
    /// dimension and is no plain copy).
    pub split: bool,
    /// Whether, split, only its rows outside their own bounds need the
    /// classes ([`SizeClasses::bounds_only`]).
    pub bounds_only: bool,
    /// The ragged dimensions it mentions (a bit per position in
    /// [`SizeClasses`]'s list): its rows are grouped by their lengths of
    /// these only.
    pub mentions: u32,
}

/// The size classes of a ragged batch.
#[derive(Clone, Debug)]
pub struct SizeClasses {
    /// The symbolic dimensions whose length differs between members.
    ragged: Vec<SymbolId>,
    /// Per member, its class.
    class_of: Vec<u32>,
    /// Per class, the length of every symbolic dimension (the batch's
    /// shared ones and the class's own ragged ones).
    symbols: Vec<Vec<u64>>,
    /// The lengths the padded rows are made for (the longest member's).
    longest: Vec<u64>,
    /// Per set of ragged dimensions (a bit each, as [`SplitPlan::mentions`];
    /// every set when there are at most [`MAX_VIEWED`] dimensions, else
    /// only all of them), the classes by those dimensions' lengths alone.
    views: Vec<ClassView>,
}

/// The most ragged dimensions for which an operation's rows are grouped by
/// the dimensions it mentions only (beyond, by all of them).
const MAX_VIEWED: usize = 6;

/// The classes of a ragged batch as seen by operations that mention some of
/// its ragged dimensions: classes that agree on those are one.
#[derive(Clone, Debug)]
struct ClassView {
    /// Per class of the batch, its class here.
    of_class: Vec<u32>,
    /// Per class here, the length of every symbolic dimension (those not
    /// mentioned: the first member's of the class).
    symbols: Vec<Vec<u64>>,
}

impl ClassView {
    /// The view of the classes with `symbols` by the ragged dimensions in
    /// `mask` (positions in `ragged`).
    fn new(ragged: &[SymbolId], symbols: &[Vec<u64>], mask: u32) -> ClassView {
        let mut ids: BTreeMap<Vec<u64>, u32> = BTreeMap::new();
        let mut view = ClassView {
            of_class: Vec::with_capacity(symbols.len()),
            symbols: Vec::new(),
        };
        for own in symbols {
            let key: Vec<u64> = ragged
                .iter()
                .enumerate()
                .filter(|(k, _)| mask & (1 << k) != 0)
                .map(|(_, s)| own[s.0 as usize])
                .collect();
            let next = ids.len() as u32;
            let id = *ids.entry(key).or_insert_with(|| {
                view.symbols.push(own.clone());
                next
            });
            view.of_class.push(id);
        }
        view
    }
}

impl SizeClasses {
    /// The classes of `env`'s ragged dimensions over `members` members;
    /// `None` for a batch of one size.
    pub fn of(env: &Env, members: usize) -> Result<Option<SizeClasses>, ExecError> {
        if env.ragged.is_empty() {
            return Ok(None);
        }
        // Classes numbered in the order of their first members.
        let mut sizes = crate::ragged::size_symbols(env, members)?;
        sizes.sort_by_key(|size| size.members.first().copied());
        let mut class_of = vec![0; members];
        let mut symbols = Vec::with_capacity(sizes.len());
        for (class, size) in sizes.into_iter().enumerate() {
            for m in size.members {
                class_of[m] = class as u32;
            }
            symbols.push(size.symbols);
        }
        let ragged: Vec<SymbolId> = env.ragged.iter().map(|r| r.symbol).collect();
        let views = if ragged.len() <= MAX_VIEWED {
            (0..1u32 << ragged.len())
                .map(|mask| ClassView::new(&ragged, &symbols, mask))
                .collect()
        } else {
            Vec::new()
        };
        Ok(Some(SizeClasses {
            ragged,
            class_of,
            symbols,
            longest: env.symbols.clone(),
            views,
        }))
    }

    /// How many classes there are.
    fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether a value of type `ty` has each member's own shape.
    pub fn mentions(&self, ty: &TensorType) -> bool {
        ty.dims.iter().any(|d| self.is_ragged(*d))
    }

    fn is_ragged(&self, dim: Dim) -> bool {
        matches!(dim, Dim::Symbolic(s) if self.ragged.contains(&s))
    }

    /// How an operation with these operand and result types runs.
    pub fn plan(&self, prim: &Prim, types: &[&TensorType]) -> SplitPlan {
        let split = self.splits(prim, types);
        let all = (1u32 << self.ragged.len().min(31)) - 1;
        let mentions = match prim {
            // Whatever a host function may read of the dimensions.
            _ if prim.is_per_member() => all,
            _ if self.views.is_empty() => all,
            _ => {
                let bit = |d: &Dim| match d {
                    Dim::Symbolic(s) => self
                        .ragged
                        .iter()
                        .position(|r| r == s)
                        .map_or(0, |k| 1 << k),
                    Dim::Fixed(_) => 0,
                };
                let own = match prim {
                    Prim::SymbolValue(s) => bit(&Dim::Symbolic(*s)),
                    _ => 0,
                };
                types
                    .iter()
                    .flat_map(|t| &t.dims)
                    .fold(own, |mask, d| mask | bit(d))
            }
        };
        SplitPlan {
            split,
            bounds_only: split && self.bounds_only(prim, types),
            mentions,
        }
    }

    /// The classes as an operation that mentions the ragged dimensions in
    /// `mask` sees them.
    fn view(&self, mask: u32) -> Option<&ClassView> {
        self.views.get(mask as usize)
    }

    /// Whether an operation with these operand and result types must run
    /// class by class: it reads or writes a ragged value, or a ragged
    /// dimension's value or length, and is not a plain copy of rows.
    /// (A `fill`'s dimension is its result's outermost.)
    fn splits(&self, prim: &Prim, types: &[&TensorType]) -> bool {
        match prim {
            Prim::Copy => false,
            Prim::SymbolValue(s) => self.ragged.contains(s),
            _ => types.iter().any(|t| self.mentions(t)),
        }
    }

    /// Whether an operation is an item read or write (`xs[i]`, `xs[i] = v`)
    /// of an array whose only ragged dimension is its outermost, with an
    /// index, a value and (for a read) a result that mention none: only its
    /// bounds check depends on a member's lengths (module docs).
    fn bounds_only(&self, prim: &Prim, types: &[&TensorType]) -> bool {
        let outer_only = |t: &TensorType| {
            t.dims.first().is_some_and(|d| self.is_ragged(*d))
                && !t.dims[1..].iter().any(|d| self.is_ragged(*d))
        };
        match (prim, types) {
            (Prim::Index, [array, index, item]) => {
                outer_only(array) && !self.mentions(index) && !self.mentions(item)
            }
            (Prim::IndexSet, [array, index, value, result]) => {
                outer_only(array)
                    && !self.mentions(index)
                    && !self.mentions(value)
                    && result == array
            }
            _ => false,
        }
    }

    /// For a [`SizeClasses::bounds_only`] operation over `rows` whose
    /// arrays have type `array` and whose indices are in `index`: the rows
    /// whose index lies in `0..` their member's own outer length go to
    /// `inside`, the others to `outside` (both in the rows' order).
    fn split_by_bounds(
        &self,
        array: &TensorType,
        index: &Slot,
        rows: &[u32],
        member_of: &dyn Fn(u32) -> usize,
        inside: &mut Vec<u32>,
        outside: &mut Vec<u32>,
    ) {
        inside.clear();
        outside.clear();
        let Some(&outer) = array.dims.first() else {
            internal_error("an item of a scalar");
        };
        let member_slot = matches!(index, Slot::Member(_));
        for &r in rows {
            let member = member_of(r);
            let length = dim_length(self.symbols_of(member), outer) as i128;
            let at = if member_slot { member } else { r as usize };
            let i = index.values(at, 0, 1).integer(0);
            if (0..length).contains(&i) {
                inside.push(r);
            } else {
                outside.push(r);
            }
        }
    }

    /// The lengths of the symbolic dimensions as member `member` sees them.
    pub fn symbols_of(&self, member: usize) -> &[u64] {
        &self.symbols[self.class_of[member] as usize]
    }

    /// The elements of member `member`'s value of type `ty`.
    pub fn row_len(&self, ty: &TensorType, member: usize) -> usize {
        let symbols = self.symbols_of(member);
        ty.dims.iter().map(|d| dim_length(symbols, *d)).product()
    }

    /// Member `member`'s value of type `ty` from its padded row `row` (its
    /// own elements, at the row's start).
    pub fn value(&self, row: Values<'_>, ty: &TensorType, member: usize) -> Tensor {
        let symbols = self.symbols_of(member);
        let shape: Vec<usize> = ty.dims.iter().map(|d| dim_length(symbols, *d)).collect();
        let len = shape.iter().product();
        let mut data = Data::filled(Scalar::zero(ty.elem), len);
        buffer_copy(row.slice(0..len), ValuesMut::all(&mut data));
        Tensor::new(shape, data)
    }

    /// The active rows of one operation, grouped by class (each group in
    /// the rows' order), into `groups` (one entry per class, reused).
    /// With a view (`mask`: [`SplitPlan::mentions`]), by the classes of
    /// that view; gives each group's lengths of every symbolic dimension.
    fn group<'c>(
        &'c self,
        rows: &[u32],
        member_of: &dyn Fn(u32) -> usize,
        mask: u32,
        groups: &mut Vec<Vec<u32>>,
    ) -> &'c [Vec<u64>] {
        let view = self.view(mask);
        let count = view.map_or(self.len(), |v| v.symbols.len());
        groups.resize_with(count, Vec::new);
        groups.iter_mut().for_each(Vec::clear);
        for &r in rows {
            let class = self.class_of[member_of(r)];
            let group = view.map_or(class, |v| v.of_class[class as usize]);
            groups[group as usize].push(r);
        }
        view.map_or(&self.symbols, |v| &v.symbols)
    }
}

/// Buffers [`run_split`] reuses from operation to operation.
#[derive(Default)]
pub struct SplitScratch {
    groups: Vec<Vec<u32>>,
    args: Vec<usize>,
    rows: Vec<u32>,
    members: Vec<u32>,
    faults: Vec<(u32, Fault)>,
    /// A bounds-only operation's rows inside and outside their bounds.
    inside: Vec<u32>,
    outside: Vec<u32>,
}

/// What one split operation needs besides the engine and the slots.
pub struct Split<'a> {
    pub classes: &'a SizeClasses,
    /// The operation as it runs over the real slots and rows.
    pub exec: &'a PrimExecution<'a>,
    /// The type of each operand, then of the result (if any).
    pub types: &'a [&'a TensorType],
    pub statics: &'a [Tensor],
    pub hosts: &'a autobatch_kernels::Hosts,
    /// The member of an active row (a lane's member): its class, and its
    /// row of a member slot.
    pub member_of: &'a dyn Fn(u32) -> usize,
    /// The random stream of an active row (its lane's).
    pub rng_of: &'a dyn Fn(u32) -> usize,
    /// How it runs (`bounds_only`: the index is the second operand).
    pub plan: SplitPlan,
}

/// Runs `split.exec`, an operation that mentions a ragged dimension, for
/// its rows (module docs): for a bounds-only one, once over the rows inside
/// their own bounds as over any rows, and by class for the others; for any
/// other, by class (`run_by_class`). The operation's operands and result
/// are no step temporaries (the executors keep them whole).
pub fn run_split(
    engine: &mut Engine<'_>,
    split: &Split<'_>,
    slots: &mut Vec<Slot>,
    rngs: &mut [MemberRng],
    scratch: &mut SplitScratch,
    faults: &mut Vec<(u32, Fault)>,
) {
    let exec = split.exec;
    if !split.plan.bounds_only {
        return run_by_class(engine, split, slots, rngs, scratch, faults);
    }
    let (mut inside, mut outside) = (
        std::mem::take(&mut scratch.inside),
        std::mem::take(&mut scratch.outside),
    );
    split.classes.split_by_bounds(
        split.types[0],
        &slots[exec.args[1]],
        exec.rows,
        split.member_of,
        &mut inside,
        &mut outside,
    );
    if !inside.is_empty() {
        let mut members = std::mem::take(&mut scratch.members);
        members.clear();
        if !exec.member_rows.is_empty() {
            members.extend(inside.iter().map(|&r| (split.member_of)(r) as u32));
        }
        let whole = PrimExecution {
            rows: &inside,
            member_rows: &members,
            ..*exec
        };
        let env = SharedEnv {
            statics: split.statics,
            symbols: &split.classes.longest,
            hosts: split.hosts,
        };
        engine.run_prim(&whole, slots, &env, rngs, split.rng_of, faults);
        scratch.members = members;
    }
    if !outside.is_empty() {
        // `member_rows` only says whether the operation reads members:
        // `run_by_class` finds the members of its rows.
        let rest = PrimExecution {
            rows: &outside,
            ..*exec
        };
        let rest = Split {
            exec: &rest,
            ..*split
        };
        run_by_class(engine, &rest, slots, rngs, scratch, faults);
    }
    (scratch.inside, scratch.outside) = (inside, outside);
}

/// Runs `split.exec` once per size class of its active rows (module docs):
/// the operands of the class's rows gathered into columns of the class's
/// shapes (pushed past the end of `slots` for the time of the operation;
/// invariant operands are read where they are), the operation run over
/// them with the class's lengths, each result written back at the start of
/// its row. Faulting rows are reported in `faults` (as real rows) and
/// nothing of them is written.
fn run_by_class(
    engine: &mut Engine<'_>,
    split: &Split<'_>,
    slots: &mut Vec<Slot>,
    rngs: &mut [MemberRng],
    scratch: &mut SplitScratch,
    faults: &mut Vec<(u32, Fault)>,
) {
    let exec = split.exec;
    let classes = split.classes;
    let mut groups = std::mem::take(&mut scratch.groups);
    let group_symbols = classes.group(exec.rows, split.member_of, split.plan.mentions, &mut groups);
    let base = slots.len();
    for (class, group) in groups.iter().enumerate() {
        if group.is_empty() {
            continue;
        }
        let symbols = &group_symbols[class];
        let shape_of = |ty: &TensorType| -> Vec<usize> {
            ty.dims.iter().map(|d| dim_length(symbols, *d)).collect()
        };
        // The operands: invariant ones where they are, the others gathered.
        scratch.args.clear();
        for (k, &a) in exec.args.iter().enumerate() {
            let ty = split.types[k];
            match &slots[a] {
                Slot::Invariant(_) => scratch.args.push(a),
                Slot::Column(_) | Slot::Member(_) => {
                    let gathered =
                        gather_prefix(engine, &slots[a], ty, shape_of(ty), group, split.member_of);
                    scratch.args.push(slots.len());
                    slots.push(Slot::Column(gathered));
                }
            }
        }
        let dst = exec.dst.map(|d| {
            let ty = split.types[exec.args.len()];
            let shape = shape_of(ty);
            let row_len: usize = shape.iter().product();
            let data = engine.take(ty.elem, group.len() * row_len);
            slots.push(Slot::Column(Column {
                shape,
                row_len,
                data,
            }));
            (d, slots.len() - 1)
        });
        scratch.rows.clear();
        scratch.rows.extend(0..group.len() as u32);
        scratch.members.clear();
        if !exec.member_rows.is_empty() {
            scratch
                .members
                .extend(group.iter().map(|&r| (split.member_of)(r) as u32));
        }
        let class_exec = PrimExecution {
            prim: exec.prim,
            args: &scratch.args,
            dst: dst.map(|(_, t)| t),
            rows: &scratch.rows,
            member_rows: &scratch.members,
            total_rows: group.len(),
            mode: exec.mode,
            indexed: None,
        };
        let env = SharedEnv {
            statics: split.statics,
            symbols,
            hosts: split.hosts,
        };
        scratch.faults.clear();
        engine.run_prim(
            &class_exec,
            slots,
            &env,
            rngs,
            &|t| (split.rng_of)(group[t as usize]),
            &mut scratch.faults,
        );
        scratch.faults.sort_unstable_by_key(|(t, _)| *t);
        if let Some((d, t)) = dst {
            scatter_prefix(slots, t, d, group, &scratch.faults);
        }
        faults.extend(
            scratch
                .faults
                .drain(..)
                .map(|(t, fault)| (group[t as usize], fault)),
        );
        for slot in slots.drain(base..) {
            if let Slot::Column(column) = slot {
                engine.give(column.data);
            }
        }
    }
    scratch.groups = groups;
}

/// The values of `rows` of `slot` (padded rows; a member slot is read at
/// the row's member), each `shape`'s elements from its row's start, as a
/// dense column of `rows.len()` rows.
fn gather_prefix(
    engine: &mut Engine<'_>,
    slot: &Slot,
    ty: &TensorType,
    shape: Vec<usize>,
    rows: &[u32],
    member_of: &dyn Fn(u32) -> usize,
) -> Column {
    let row_len: usize = shape.iter().product();
    let mut data = engine.take(ty.elem, rows.len() * row_len);
    let members: Vec<u32>;
    let sources = if matches!(slot, Slot::Member(_)) {
        members = rows.iter().map(|&r| member_of(r) as u32).collect();
        &members
    } else {
        rows
    };
    let from = slot.rows_column();
    autobatch_kernels::buffer::gather_prefixes(
        Values::all(&from.data),
        from.row_len,
        row_len,
        sources,
        ValuesMut::all(&mut data),
    );
    Column {
        shape,
        row_len,
        data,
    }
}

/// Writes row `k` of the dense column in slot `from` at the start of row
/// `rows[k]` of the padded column in slot `to`, for each row that did not
/// fault (`faulted`: sorted by dense row).
fn scatter_prefix(
    slots: &mut [Slot],
    from: usize,
    to: usize,
    rows: &[u32],
    faulted: &[(u32, Fault)],
) {
    let (head, tail) = slots.split_at_mut(from);
    let (Slot::Column(dense), Slot::Column(padded)) = (&tail[0], &mut head[to]) else {
        internal_error("a split operation's result is not a column");
    };
    let len = dense.row_len;
    if faulted.is_empty() {
        autobatch_kernels::buffer::scatter_prefixes(
            Values::all(&dense.data),
            len,
            rows,
            padded.row_len,
            ValuesMut::all(&mut padded.data),
        );
        return;
    }
    let mut faulted = faulted.iter().map(|(t, _)| *t as usize).peekable();
    for (k, &r) in rows.iter().enumerate() {
        if faulted.next_if_eq(&k).is_some() {
            continue;
        }
        padded.write(
            r as usize,
            0,
            Values::of(&dense.data, k * len..(k + 1) * len),
        );
    }
}

fn buffer_copy(from: Values<'_>, to: ValuesMut<'_>) {
    autobatch_kernels::buffer::copy(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RaggedSymbol;
    use autobatch_types::ScalarType;

    fn env(lengths: Vec<u64>) -> Env {
        Env {
            symbols: vec![*lengths.iter().max().unwrap()],
            ragged: vec![RaggedSymbol {
                symbol: SymbolId(0),
                lengths,
            }],
            ..Env::default()
        }
    }

    #[test]
    fn members_of_the_same_lengths_share_a_class() {
        let classes = SizeClasses::of(&env(vec![3, 1, 3, 2]), 4).unwrap().unwrap();
        assert_eq!(classes.len(), 3);
        assert_eq!(classes.symbols_of(0), &[3]);
        assert_eq!(classes.symbols_of(1), &[1]);
        assert_eq!(classes.class_of[0], classes.class_of[2]);
        let ragged = TensorType {
            elem: ScalarType::F64,
            dims: vec![Dim::Symbolic(SymbolId(0)), Dim::Fixed(2)],
        };
        assert!(classes.mentions(&ragged));
        assert_eq!(classes.row_len(&ragged, 3), 4);
        assert!(SizeClasses::of(&Env::default(), 4).unwrap().is_none());
    }

    #[test]
    fn rows_group_by_class_in_order() {
        let classes = SizeClasses::of(&env(vec![3, 1, 3, 2]), 4).unwrap().unwrap();
        let mut groups = Vec::new();
        let all = (1 << 1) - 1;
        classes.group(&[0, 1, 2, 3], &|r| r as usize, all, &mut groups);
        assert_eq!(groups, vec![vec![0, 2], vec![1], vec![3]]);
        // An operation that mentions no ragged dimension sees one class.
        let lengths = classes.group(&[0, 1, 2, 3], &|r| r as usize, 0, &mut groups);
        assert_eq!(groups, vec![vec![0, 1, 2, 3]]);
        assert_eq!(lengths.len(), 1);
    }
}
