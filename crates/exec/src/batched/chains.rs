//! Fused chains: consecutive elementwise operations (and reductions of
//! rows) of a block run as one pass over the rows, a cache-sized group of
//! rows at a time ([`autobatch_kernels::fused`], through
//! [`Backend::chain`](autobatch_kernels::Backend::chain)).
//!
//! [`find_chains`] finds them once per function: a chain is a run of at
//! least two consecutive operations of a block, each `unary`, `binary`,
//! `compare`, cast, `select` or a reduction, where some operation reads a
//! value an earlier one of the run computed; constants and statics loaded
//! between them join the run and are run before it. The value of an operation is
//! *kept* (written to its variable's storage) unless a later operation of
//! the chain overwrites the variable, or the variable is a step temporary
//! ([`super::temps`]) whose last mention in the block is inside the chain:
//! such a value lives only in the backend's group-sized scratch and never
//! gets a column.
//!
//! A member-uniform operand (an entry's parameter) is copied into a column
//! of the active rows once per chain, as the engine does once per
//! operation. [`Fuser::run`] runs a chain in the layout of the step's
//! temporaries ([`super::temps`]): in a dense step (every row active, or
//! enough of them under `mask` and `auto`) over every row of the columns,
//! as the unfused batched forms do, storing the active rows; in a compact
//! step over the active rows' positions, the columns it reads gathered
//! once for the whole chain (the unfused operations gather them one by
//! one) and the values it keeps in columns scattered back. It runs when
//! every operation has its batched form, computes the kept values into
//! spare buffers and stores them only once the whole chain succeeded.
//! Otherwise (an operand the batched forms do not take, or a fault
//! anywhere: an integer division by zero) it writes nothing and returns
//! false, and the executor runs the operations one by one as unfused,
//! which finds exactly the rows that fault and reports them with their
//! operation's location. Each element is computed by the same batched
//! form as unfused, so the bits do not depend on fusion, the layout, the
//! group size or the thread split.

use autobatch_ir::Prim;
use autobatch_kernels::buffer::{Rows, RowsMut, Values, ValuesMut};
use autobatch_kernels::fused::{Chain, Link, Scratch, Source, Step, MAX_OPERANDS};
use autobatch_kernels::product_chain::ProductChain;
use autobatch_kernels::{Backend, Fault};
use autobatch_types::Data;

use super::engine::{plan, Engine, Kind, SharedEnv};
use super::storage::{Column, Slot};
use super::temps::StepTemps;
use crate::{ReportField, ReportValue};

/// The most operations one chain fuses (a longer run is cut).
pub const MAX_LINKS: usize = 32;

/// The most distinct inputs a chain reads.
const MAX_INPUTS: usize = MAX_LINKS * MAX_OPERANDS;

/// An operation of a block as [`find_chains`] sees it (`None` for calls,
/// forks and stack moves).
#[derive(Clone, Copy, Debug)]
pub struct OpView<'a> {
    pub prim: &'a Prim,
    pub args: &'a [usize],
    pub dst: Option<usize>,
}

/// One operation of a chain.
#[derive(Clone, Debug)]
pub struct ChainOp {
    pub prim: Prim,
    pub args: Vec<usize>,
    pub dst: usize,
    /// Whether its value is stored to `dst` (else it lives in scratch).
    pub keep: bool,
}

/// A chain found in a block: the operations from the one it starts at to
/// `end` (exclusive). Those at `hoisted` (constants and statics loaded,
/// which no earlier operation of the chain mentions) the executor runs
/// first, as usual; `ops` are the others, fused.
#[derive(Clone, Debug)]
pub struct ChainSite {
    pub end: usize,
    pub hoisted: Vec<usize>,
    pub ops: Vec<ChainOp>,
    /// The chain sits between two products with one matrix
    /// ([`autobatch_kernels::product_chain`]): `ops[0]` is `z = matvec(M, v)`,
    /// read by the chain only, and the last op `vecmat(r, M)` of a value `r`
    /// of the chain that nothing else reads.
    pub between_products: bool,
}

impl ChainSite {
    /// The elementwise operations and reductions (without the products).
    pub fn links(&self) -> &[ChainOp] {
        match self.between_products {
            true => &self.ops[1..self.ops.len() - 1],
            false => &self.ops,
        }
    }
}

fn fusable(prim: &Prim) -> bool {
    matches!(
        prim,
        Prim::Unary(_)
            | Prim::Binary(_)
            | Prim::Compare(_)
            | Prim::Cast(_)
            | Prim::Select
            | Prim::Reduce(_)
    )
}

/// The chains of a block whose operations are `ops`, indexed by the
/// operation each starts at. `dying[i]` are the step temporaries operation
/// `i` mentions last.
pub fn find_chains(
    ops: &[Option<OpView<'_>>],
    is_temp: &[bool],
    dying: &[Vec<usize>],
) -> Vec<Option<ChainSite>> {
    let mut sites = vec![None; ops.len()];
    let candidate = |op: &Option<OpView<'_>>| {
        op.is_some_and(|o| fusable(o.prim) && o.dst.is_some() && o.args.len() <= MAX_OPERANDS)
    };
    let mut start = 0;
    while start < ops.len() {
        if !candidate(&ops[start]) {
            start += 1;
            continue;
        }
        let (mut end, mut links) = (start, 0);
        let mut hoisted = Vec::new();
        while end < ops.len() && links < MAX_LINKS {
            if candidate(&ops[end]) {
                links += 1;
            } else if hoistable(&ops[start..end], &ops[end]) {
                hoisted.push(end);
            } else {
                break;
            }
            end += 1;
        }
        // A constant at the end is no part of the chain.
        while hoisted.last().is_some_and(|h| *h + 1 == end) {
            hoisted.pop();
            end -= 1;
        }
        let run: Vec<OpView<'_>> = (start..end)
            .filter(|i| !hoisted.contains(i))
            .filter_map(|i| ops[i])
            .collect();
        let chain_dying: Vec<usize> = (start..end)
            .filter(|i| !hoisted.contains(i))
            .flat_map(|i| dying[i].iter().copied())
            .collect();
        if let Some(mut site) = chain_site(&run, end, is_temp, &chain_dying) {
            site.hoisted = hoisted;
            // Both: when the products cannot run with the chain (their
            // operands are not a shared matrix and rows of vectors), the
            // executor runs the opening product alone, then this chain.
            if let Some((at, products)) = between_products(ops, &site, start, is_temp, dying) {
                sites[at] = Some(products);
            }
            sites[start] = Some(site);
        }
        start = end.max(start + 1);
    }
    sites
}

/// The chain `site` (from operation `start`) with the products around it,
/// and the operation it then starts at, if the operation before it (but
/// constants and statics loaded, which then run first) is `z = matvec(M,
/// v)` whose `z` (a step temporary) dies inside the chain, and the
/// operation after it (but such loads) `vecmat(r, M)` of a temporary `r`
/// of the chain that dies there. `M` is one variable, or two loaded from
/// one static in the block.
fn between_products(
    ops: &[Option<OpView<'_>>],
    site: &ChainSite,
    start: usize,
    is_temp: &[bool],
    dying: &[Vec<usize>],
) -> Option<(usize, ChainSite)> {
    let loads = |o: &Option<OpView<'_>>| {
        o.is_some_and(|o| matches!(o.prim, Prim::Const(_) | Prim::LoadStatic(_)) && o.dst.is_some())
    };
    let mut open = start.checked_sub(1)?;
    while loads(&ops[open]) {
        open = open.checked_sub(1)?;
    }
    let mut close = site.end;
    while ops.get(close).is_some_and(loads) {
        close += 1;
    }
    let (opening, closing) = (ops[open]?, (*ops.get(close)?)?);
    let (&[matrix, v], Some(z)) = (opening.args, opening.dst) else {
        return None;
    };
    let &[r, matrix_again] = closing.args else {
        return None;
    };
    let hoisted: Vec<usize> = (open + 1..start)
        .chain(site.hoisted.iter().copied())
        .chain(site.end..close)
        .collect();
    let chain_dying: Vec<usize> = (start..site.end)
        .flat_map(|i| dying[i].iter().copied())
        .collect();
    let chain_writes = |slot: usize| site.ops.iter().any(|o| o.dst == slot);
    // The loads run before the opening product: none may write what an
    // operation before it (the opening product, the chain) mentions.
    let early = |h: usize| {
        let Some(d) = ops[h].and_then(|o| o.dst) else {
            return false;
        };
        (open..h)
            .filter(|i| !hoisted.contains(i))
            .filter_map(|i| ops[i])
            .all(|o| o.dst != Some(d) && !o.args.contains(&d))
    };
    let same_matrix = matrix_again == matrix
        || static_of(ops, matrix, open)
            .is_some_and(|s| static_of(ops, matrix_again, close) == Some(s));
    let fits = matches!(opening.prim, Prim::Matvec)
        && matches!(closing.prim, Prim::Vecmat)
        && closing.dst.is_some()
        && same_matrix
        && ![matrix, v].contains(&z)
        && is_temp[z]
        && chain_dying.contains(&z)
        && is_temp[r]
        && dying[close].contains(&r)
        && chain_writes(r)
        && !chain_writes(matrix)
        && !chain_writes(v)
        && !chain_writes(z)
        && hoisted.iter().all(|&h| early(h));
    if !fits {
        return None;
    }
    let mut run: Vec<OpView<'_>> = vec![opening];
    run.extend(
        (start..site.end)
            .filter(|i| !hoisted.contains(i))
            .filter_map(|i| ops[i]),
    );
    run.push(closing);
    let all_dying: Vec<usize> = (open..=close)
        .filter(|i| !hoisted.contains(i))
        .flat_map(|i| dying[i].iter().copied())
        .collect();
    let mut products = chain_site(&run, close + 1, is_temp, &all_dying)?;
    products.hoisted = hoisted;
    products.between_products = true;
    Some((open, products))
}

/// The static that operation `before` finds in `slot`, if the block loads
/// it there earlier.
fn static_of(
    ops: &[Option<OpView<'_>>],
    slot: usize,
    before: usize,
) -> Option<autobatch_ir::StaticId> {
    let writer = ops[..before]
        .iter()
        .rev()
        .flatten()
        .find(|o| o.dst == Some(slot))?;
    match writer.prim {
        Prim::LoadStatic(s) => Some(*s),
        _ => None,
    }
}

/// Whether `op` (a constant, or a static loaded) may run before the
/// operations `before` it in the block: it writes an invariant value that
/// none of them mentions.
fn hoistable(before: &[Option<OpView<'_>>], op: &Option<OpView<'_>>) -> bool {
    let Some(op) = op else { return false };
    let Some(dst) = op.dst else { return false };
    matches!(op.prim, Prim::Const(_) | Prim::LoadStatic(_))
        && before
            .iter()
            .flatten()
            .all(|o| o.dst != Some(dst) && !o.args.contains(&dst))
}

/// The chain of the run `ops` (ending at `end`), if some operation reads
/// the value of an earlier one.
fn chain_site(
    ops: &[OpView<'_>],
    end: usize,
    is_temp: &[bool],
    dying: &[usize],
) -> Option<ChainSite> {
    let written_before = |i: usize, slot: usize| ops[..i].iter().any(|o| o.dst == Some(slot));
    let flows = ops
        .iter()
        .enumerate()
        .any(|(i, op)| op.args.iter().any(|a| written_before(i, *a)));
    if ops.len() < 2 || !flows {
        return None;
    }
    let dies_inside = |slot: usize| is_temp[slot] && dying.contains(&slot);
    let ops = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let dst = op.dst.unwrap_or_default();
            let overwritten = ops[i + 1..].iter().any(|o| o.dst == Some(dst));
            ChainOp {
                prim: op.prim.clone(),
                args: op.args.to_vec(),
                dst,
                keep: !overwritten && !dies_inside(dst),
            }
        })
        .collect();
    Some(ChainSite {
        end,
        hoisted: Vec::new(),
        ops,
        between_products: false,
    })
}

/// The step a chain runs in.
pub struct FusedStep<'a> {
    /// Per slot, whether it is a step temporary.
    pub is_temp: &'a [bool],
    pub env: &'a SharedEnv<'a>,
    /// The active rows, in increasing order, of columns of `total` rows.
    pub rows: &'a [u32],
    pub total: usize,
    /// The member of a row.
    pub member_of: &'a dyn Fn(u32) -> usize,
}

/// What a run of chains reuses from step to step.
#[derive(Default)]
pub struct Fuser {
    /// The member-uniform operands, lent out as columns while a chain runs.
    lent: Vec<(usize, Slot)>,
    /// Spare shape vectors for those columns.
    shapes: Vec<Vec<usize>>,
    chain: Chain,
    /// The slot of each input of the chain.
    inputs: Vec<usize>,
    /// The buffers of the kept values, by output index, while a chain runs.
    outputs: Vec<Data>,
    /// Per worker thread, the scratch of the values not kept.
    scratch: Vec<Scratch>,
    /// The products around the chain, when it sits between two.
    products: Option<Products>,
    /// Chain executions that ran fused, and those that ran unfused; of
    /// the fused ones, those between two products.
    fused: u64,
    unfused: u64,
    between_products: u64,
}

/// The products around a built chain ([`ChainSite::between_products`]):
/// its input 0 is `matvec(matrix, vectors)`.
#[derive(Clone, Copy, Debug)]
struct Products {
    /// The slot of the shared matrix (`rows x k`) and of the vectors.
    matrix: usize,
    vectors: usize,
    rows: usize,
    k: usize,
    /// The link whose value the closing `vecmat` takes.
    closing_link: usize,
    /// The slot the closing `vecmat` writes.
    closing_dst: usize,
}

impl Fuser {
    /// Runs `site` on the active `rows` of columns of `total` rows (row `r`
    /// of a member-uniform operand is member `step.member_of(r)`'s): true
    /// when it ran (every kept value stored), false having written nothing
    /// (the executor then runs the operations one by one).
    pub fn run(
        &mut self,
        engine: &mut Engine<'_>,
        temps: &mut StepTemps,
        site: &ChainSite,
        slots: &mut [Slot],
        step: &FusedStep<'_>,
    ) -> bool {
        let ran = self.try_run(engine, temps, site, slots, step);
        if ran {
            self.fused += 1;
            self.between_products += u64::from(site.between_products);
        } else {
            self.unfused += 1;
        }
        ran
    }

    /// The run's figures of fusion, for the executor's report (`--stats`):
    /// `fused_chains`, the chain executions that ran fused, and
    /// `chains_run_unfused`, those that ran op by op instead (an operand
    /// the batched forms do not take, or a fault in the chain).
    pub fn report(&self) -> Vec<ReportField> {
        vec![
            ReportField {
                name: "fused_chains",
                value: ReportValue::Count(self.fused),
            },
            ReportField {
                name: "chains_run_unfused",
                value: ReportValue::Count(self.unfused),
            },
            ReportField {
                name: "chains_between_products",
                value: ReportValue::Count(self.between_products),
            },
        ]
    }

    fn try_run(
        &mut self,
        engine: &mut Engine<'_>,
        temps: &mut StepTemps,
        site: &ChainSite,
        slots: &mut [Slot],
        step: &FusedStep<'_>,
    ) -> bool {
        if step.rows.is_empty() {
            return false;
        }
        // A dense step runs over every row of the columns, as the unfused
        // batched forms do (inactive rows compute on whatever they hold,
        // and only the active rows are stored). A compact step runs over
        // its positions, as its temporaries are laid out: the columns it
        // reads are gathered once for the whole chain, and the values it
        // keeps in columns are scattered back.
        let layout = Layout::of(temps);
        let rows = layout.rows(step);
        let mut lent = std::mem::take(&mut self.lent);
        // Each slot the chain reads before it writes it (a value written
        // first is read from its link).
        let inputs = site.ops.iter().enumerate().flat_map(|(i, op)| {
            let written = move |a: &usize| site.ops[..i].iter().any(|o| o.dst == *a);
            op.args.iter().copied().filter(move |a| !written(a))
        });
        for a in inputs {
            if lent.iter().any(|(s, _)| *s == a) {
                continue;
            }
            let column = match (&slots[a], layout) {
                (Slot::Member(member), _) => self.member_rows(engine, member, step, layout),
                (Slot::Column(column), Layout::Compact) if !step.is_temp[a] => {
                    self.gathered(engine, column, step.rows)
                }
                _ => continue,
            };
            lent.push((a, std::mem::replace(&mut slots[a], Slot::Column(column))));
        }
        let computed = self.run_on_columns(engine, site, slots, step, rows);
        for (a, original) in lent.drain(..) {
            if let Slot::Column(mut column) = std::mem::replace(&mut slots[a], original) {
                self.shapes.push(std::mem::take(&mut column.shape));
                engine.give(column.data);
            }
        }
        self.lent = lent;
        if computed {
            self.store_outputs(engine, temps, site, slots, step, layout);
        }
        computed
    }

    /// A column whose rows hold their members' rows of `member`: at the
    /// active rows of a dense step (the others unspecified), as the
    /// engine's `run_with_members` makes, or at a compact step's positions.
    fn member_rows(
        &mut self,
        engine: &mut Engine<'_>,
        member: &Column,
        step: &FusedStep<'_>,
        layout: Layout,
    ) -> Column {
        let n = member.row_len;
        let mut data = engine.take(member.data.ty(), layout.rows(step) * n);
        for (k, &row) in step.rows.iter().enumerate() {
            let r = layout.position(k, row);
            let m = (step.member_of)(row);
            engine.backend().copy(
                Values::of(&member.data, m * n..(m + 1) * n),
                ValuesMut::of(&mut data, r * n..(r + 1) * n),
            );
        }
        self.column_like(member, data)
    }

    /// The active `rows` of `column`, at positions `0..rows.len()`.
    fn gathered(&mut self, engine: &mut Engine<'_>, column: &Column, rows: &[u32]) -> Column {
        let n = column.row_len;
        let mut data = engine.take(column.data.ty(), rows.len() * n);
        engine.backend().gather_rows(
            Values::all(&column.data),
            n,
            rows,
            ValuesMut::all(&mut data),
        );
        self.column_like(column, data)
    }

    /// A column of `like`'s shape holding `data`.
    fn column_like(&mut self, like: &Column, data: Data) -> Column {
        let mut shape = self.shapes.pop().unwrap_or_default();
        shape.clear();
        shape.extend_from_slice(&like.shape);
        Column {
            shape,
            row_len: like.row_len,
            data,
        }
    }

    /// Builds and computes the chain of `site` over rows `0..rows` of the
    /// slots as they are now, into `self.outputs`: false (nothing kept)
    /// if it cannot be built or faults.
    fn run_on_columns(
        &mut self,
        engine: &mut Engine<'_>,
        site: &ChainSite,
        slots: &mut [Slot],
        step: &FusedStep<'_>,
        rows: usize,
    ) -> bool {
        if !self.build(site, slots, step.is_temp, step.env, rows) {
            return false;
        }
        self.outputs.clear();
        for link in &self.chain.links {
            if link.output.is_some() {
                self.outputs.push(engine.take(link.ty, rows * link.row_len));
            }
        }
        if let Some(p) = self.products {
            let ty = self.chain.links[p.closing_link].ty;
            self.outputs.push(engine.take(ty, rows * p.k));
        }
        if self.compute(engine, slots, rows).is_err() {
            for data in self.outputs.drain(..) {
                engine.give(data);
            }
            return false;
        }
        true
    }

    /// Stores the computed kept values (`self.outputs`) into their slots.
    fn store_outputs(
        &mut self,
        engine: &mut Engine<'_>,
        temps: &mut StepTemps,
        site: &ChainSite,
        slots: &mut [Slot],
        step: &FusedStep<'_>,
        layout: Layout,
    ) {
        let mut outputs = std::mem::take(&mut self.outputs);
        let destination = |slot: usize| Destination {
            slot,
            rows: step.rows,
            total: step.total,
            layout,
        };
        for (op, link) in site.links().iter().zip(&self.chain.links) {
            if let Some(o) = link.output {
                let data = std::mem::replace(&mut outputs[o], Data::with_capacity(link.ty, 0));
                store(
                    engine,
                    temps,
                    slots,
                    step.is_temp,
                    &destination(op.dst),
                    data,
                );
            }
        }
        if let (Some(p), Some(data)) = (self.products, outputs.pop()) {
            store(
                engine,
                temps,
                slots,
                step.is_temp,
                &destination(p.closing_dst),
                data,
            );
        }
        outputs.clear();
        self.outputs = outputs;
    }

    /// The chain of `site` on the slots as they are now: false if some
    /// operation has no batched form on them.
    fn build(
        &mut self,
        site: &ChainSite,
        slots: &[Slot],
        is_temp: &[bool],
        env: &SharedEnv<'_>,
        total: usize,
    ) -> bool {
        self.chain.links.clear();
        self.inputs.clear();
        self.products = None;
        // The opening product's value is input 0.
        let opening = site.between_products.then(|| site.ops[0].dst);
        self.inputs.extend(opening);
        let links = site.links();
        let mut outputs = 0;
        for (i, op) in links.iter().enumerate() {
            let Slot::Column(dst) = &slots[op.dst] else {
                return false;
            };
            if !is_temp[op.dst] && dst.rows() < total {
                return false;
            }
            let step = match plan(&op.prim, &op.args, slots, dst.row_len, env) {
                Some(Kind::Unary(u)) => Step::Unary(u),
                Some(Kind::Binary(b)) => Step::Binary(b),
                Some(Kind::Compare(c)) => Step::Compare(c),
                Some(Kind::Cast) => Step::Cast,
                Some(Kind::Select) => Step::Select,
                Some(Kind::Reduce(r)) => Step::Reduce(r),
                _ => return false,
            };
            let mut operands = [Source::Input(0); MAX_OPERANDS];
            let mut per_row = false;
            for (operand, &a) in operands.iter_mut().zip(&op.args) {
                let writer = links[..i].iter().rposition(|o| o.dst == a);
                *operand = match writer {
                    Some(j) => Source::Link(j),
                    None if opening == Some(a) => Source::Input(0),
                    None => {
                        match &slots[a] {
                            Slot::Column(c) if c.rows() >= total => {}
                            Slot::Invariant(Some(_)) => {}
                            _ => return false,
                        }
                        let k = match self.inputs.iter().position(|s| *s == a) {
                            Some(k) => k,
                            None if self.inputs.len() < MAX_INPUTS => {
                                self.inputs.push(a);
                                self.inputs.len() - 1
                            }
                            None => return false,
                        };
                        Source::Input(k)
                    }
                };
                per_row |= matches!(operand, Source::Link(_))
                    || opening == Some(a)
                    || matches!(slots[a], Slot::Column(_));
            }
            if !per_row {
                return false;
            }
            let output = op.keep.then(|| {
                outputs += 1;
                outputs - 1
            });
            self.chain.links.push(Link {
                step,
                operands,
                arity: op.args.len(),
                ty: dst.data.ty(),
                row_len: dst.row_len,
                output,
            });
        }
        if site.between_products {
            self.products = self.products_of(site, slots, is_temp, total);
            return self.products.is_some();
        }
        true
    }

    /// The products around the built chain of `site`, if the slots take
    /// them: a shared float matrix, every row's vector, a closing value
    /// that the chain does not keep, a destination of every row.
    fn products_of(
        &self,
        site: &ChainSite,
        slots: &[Slot],
        is_temp: &[bool],
        total: usize,
    ) -> Option<Products> {
        let (opening, closing) = (&site.ops[0], site.ops.last()?);
        let &[matrix, vectors] = opening.args.as_slice() else {
            return None;
        };
        let Slot::Invariant(Some(m)) = &slots[matrix] else {
            return None;
        };
        let &[rows, k] = m.shape.as_slice() else {
            return None;
        };
        let Slot::Column(v) = &slots[vectors] else {
            return None;
        };
        let Slot::Column(dst) = &slots[closing.dst] else {
            return None;
        };
        let closing_link = site
            .links()
            .iter()
            .rposition(|o| o.dst == closing.args[0])?;
        let link = &self.chain.links[closing_link];
        let ty = m.data.ty();
        let fits = v.row_len == k
            && v.rows() >= total
            && v.data.ty() == ty
            && link.ty == ty
            && link.output.is_none()
            && link.row_len == rows
            && dst.row_len == k
            && dst.data.ty() == ty
            && (is_temp[closing.dst] || dst.rows() >= total);
        fits.then_some(Products {
            matrix,
            vectors,
            rows,
            k,
            closing_link,
            closing_dst: closing.dst,
        })
    }

    /// Runs the built chain on rows `0..total` into `self.outputs`, split
    /// between the engine's threads when the work is large.
    fn compute(&mut self, engine: &Engine<'_>, slots: &[Slot], total: usize) -> Result<(), Fault> {
        let mut inputs = [Rows::NONE; MAX_INPUTS];
        let skip = usize::from(self.products.is_some());
        for (input, &s) in inputs.iter_mut().zip(&self.inputs).skip(skip) {
            *input = match &slots[s] {
                Slot::Column(c) => Rows::Column {
                    values: Values::of(&c.data, 0..total * c.row_len),
                    row_len: c.row_len,
                },
                Slot::Invariant(Some(t)) => Rows::Shared(Values::all(&t.data)),
                _ => unreachable!("checked when the chain was built"),
            };
        }
        let inputs = &inputs[..self.inputs.len()];
        let mut outputs: [RowsMut<'_>; MAX_LINKS + 1] =
            std::array::from_fn(|_| RowsMut::new(ValuesMut::Bool(&mut []), 0, 0));
        let kept = self.outputs.len();
        let mut data = self.outputs.iter_mut();
        for link in &self.chain.links {
            if let Some(o) = link.output {
                let Some(buffer) = data.next() else {
                    unreachable!("a buffer was taken for every output")
                };
                outputs[o] = RowsMut::new(ValuesMut::all(buffer), total, link.row_len);
            }
        }
        // The closing product's value comes last.
        if let (Some(p), Some(buffer)) = (self.products, data.next()) {
            outputs[kept - 1] = RowsMut::new(ValuesMut::all(buffer), total, p.k);
        }
        let outputs = &mut outputs[..kept];
        let mut work: usize = self.chain.links.iter().map(|l| l.row_len.max(1)).sum();
        let products = self.products.map(|p| {
            // Each row's two products: `rows x k` multiply-adds each.
            work += 2 * p.rows * p.k;
            ProductsView::of(&p, slots, total)
        });
        let pieces = engine.pieces(total, work);
        if self.scratch.len() < pieces {
            self.scratch.resize_with(pieces, Scratch::default);
        }
        let piece = Piece {
            backend: engine.backend(),
            chain: &self.chain,
            inputs,
            products,
        };
        if pieces <= 1 {
            return piece.run(inputs, outputs, 0..total, &mut self.scratch[0]);
        }
        let outputs: Vec<RowsMut<'_>> = outputs
            .iter_mut()
            .map(|o| std::mem::replace(o, RowsMut::new(ValuesMut::Bool(&mut []), 0, 0)))
            .collect();
        engine.install(|| piece.split(0..total, outputs, &mut self.scratch[..pieces]))
    }
}

/// The products around a chain, on the slots.
#[derive(Clone, Copy)]
struct ProductsView<'a> {
    matrix: Values<'a>,
    vectors: Rows<'a>,
    rows: usize,
    k: usize,
    closing_link: usize,
}

impl<'a> ProductsView<'a> {
    fn of(p: &Products, slots: &'a [Slot], total: usize) -> ProductsView<'a> {
        let (Slot::Invariant(Some(m)), Slot::Column(v)) = (&slots[p.matrix], &slots[p.vectors])
        else {
            unreachable!("checked when the chain was built")
        };
        ProductsView {
            matrix: Values::all(&m.data),
            vectors: Rows::Column {
                values: Values::of(&v.data, 0..total * p.k),
                row_len: p.k,
            },
            rows: p.rows,
            k: p.k,
            closing_link: p.closing_link,
        }
    }
}

/// A chain's inputs while its rows are split between threads.
struct Piece<'a> {
    backend: &'a dyn Backend,
    chain: &'a Chain,
    inputs: &'a [Rows<'a>],
    products: Option<ProductsView<'a>>,
}

impl Piece<'_> {
    /// The rows `range` on this thread: `inputs` and `outputs` are theirs
    /// (the closing product's value last, between products).
    fn run(
        &self,
        inputs: &[Rows<'_>],
        outputs: &mut [RowsMut<'_>],
        range: std::ops::Range<usize>,
        scratch: &mut Scratch,
    ) -> Result<(), Fault> {
        let Some(p) = self.products else {
            return self
                .backend
                .chain(self.chain, inputs, outputs, range.len(), scratch);
        };
        let Some((closing, kept)) = outputs.split_last_mut() else {
            unreachable!("a chain between products has the closing product's value")
        };
        let closing = RowsMut::new(closing.values.slice(0..range.len() * p.k), range.len(), p.k);
        let pc = ProductChain {
            chain: self.chain,
            matrix: p.matrix,
            rows: p.rows,
            k: p.k,
            vectors: p.vectors.rows(range.clone()),
            opening: 0,
            closing: p.closing_link,
        };
        self.backend
            .product_chain(&pc, inputs, kept, closing, range.len(), scratch)
    }

    /// The rows `range` (whose outputs are `outputs`), split in as many
    /// consecutive parts as `scratch` has buffers, in parallel.
    fn split(
        &self,
        range: std::ops::Range<usize>,
        outputs: Vec<RowsMut<'_>>,
        scratch: &mut [Scratch],
    ) -> Result<(), Fault> {
        let pieces = scratch.len();
        if pieces <= 1 || range.len() <= 1 {
            let mut outputs = outputs;
            let inputs: Vec<Rows<'_>> = self.inputs.iter().map(|i| i.rows(range.clone())).collect();
            return self.run(&inputs, &mut outputs, range, &mut scratch[0]);
        }
        let left_pieces = pieces / 2;
        let mid = range.start + range.len() * left_pieces / pieces;
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for o in outputs {
            let (l, r) = o.split_at(mid - range.start);
            left.push(l);
            right.push(r);
        }
        let (ls, rs) = scratch.split_at_mut(left_pieces);
        let (a, b) = rayon::join(
            || self.split(range.start..mid, left, ls),
            || self.split(mid..range.end, right, rs),
        );
        a.and(b)
    }
}

/// How a step's chain lays out its rows: over every row of the columns,
/// or over the active rows' positions (as the step's temporaries are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Dense,
    Compact,
}

impl Layout {
    /// The layout of the running step's temporaries.
    fn of(temps: &StepTemps) -> Layout {
        if temps.dense() {
            Layout::Dense
        } else {
            Layout::Compact
        }
    }

    /// The rows a chain of `step` computes.
    fn rows(self, step: &FusedStep<'_>) -> usize {
        match self {
            Layout::Dense => step.total,
            Layout::Compact => step.rows.len(),
        }
    }

    /// Where the `k`-th active row (`row` of the columns) is.
    fn position(self, k: usize, row: u32) -> usize {
        match self {
            Layout::Dense => row as usize,
            Layout::Compact => k,
        }
    }
}

/// Where a kept value goes: a slot, for the active `rows` of `total`.
struct Destination<'a> {
    slot: usize,
    rows: &'a [u32],
    total: usize,
    layout: Layout,
}

/// Stores a kept value computed for every row (or every position) into
/// its slot: a step temporary adopts it as its storage (it has the step's
/// layout), a column gets its active rows.
fn store(
    engine: &mut Engine<'_>,
    temps: &mut StepTemps,
    slots: &mut [Slot],
    is_temp: &[bool],
    dst: &Destination<'_>,
    mut data: Data,
) {
    let temp = is_temp[dst.slot];
    if temp {
        return temps.adopt(engine, slots, dst.slot, data);
    }
    let Slot::Column(column) = &mut slots[dst.slot] else {
        unreachable!("checked when the chain was built")
    };
    let backend = engine.backend();
    let all = dst.rows.len() == dst.total;
    if dst.layout == Layout::Compact && !all {
        let to = ValuesMut::all(&mut column.data);
        backend.scatter_rows(Values::all(&data), column.row_len, dst.rows, to);
    } else if all && column.data.len() == data.len() {
        std::mem::swap(&mut column.data, &mut data);
    } else if all {
        let n = data.len();
        backend.copy(Values::all(&data), ValuesMut::of(&mut column.data, 0..n));
    } else {
        let to = ValuesMut::all(&mut column.data);
        backend.copy_rows(Values::all(&data), column.row_len, dst.rows, to);
    }
    engine.give(data);
}
