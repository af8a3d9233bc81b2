//! Fused chains: several elementwise operations (and reductions of rows)
//! that run as one pass over a column of rows, a group of rows at a time.
//!
//! A [`Chain`] is a list of [`Link`]s, each one step (`unary`, `binary`,
//! `compare`, `cast`, `select`, or a reduction of each row) whose operands
//! are the chain's inputs ([`Source::Input`]) or the values of earlier
//! links ([`Source::Link`]). [`run_chain`] computes every link on the first
//! group of rows, then on the next, and so on: a group is small enough
//! (about [`GROUP_ELEMENTS`] elements per value) that the values passed
//! from link to link stay in the cache, and a link whose value the caller
//! does not keep ([`Link::output`] `None`) gets only a group-sized buffer
//! of the caller's [`Scratch`], never a full column.
//!
//! Every element is computed by the same batched form the unfused
//! operation calls ([`Backend::unary`], [`Backend::binary`], ...) on a
//! subset of the rows; those compute each element (each row, for a
//! reduction) independently of the rows around it, so a fused chain gives
//! every element the bits of the unfused operations: fusion reorders which
//! element is computed when, never the arithmetic. One exception of form,
//! not of bits: a `softplus` and a `sigmoid` of the same operand (a
//! `softplus`'s value and its gradient) run as one
//! [`Backend::softplus_sigmoid`], which shares each element's exponential
//! and gives both the bits of the two apart.

use autobatch_ir::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
use autobatch_types::{Data, ScalarType};

use crate::backend::Backend;
use crate::buffer::{self, Rows, RowsMut, Values, ValuesMut};
use crate::reduce::Piecewise;
use crate::{internal_error, Fault};

/// About how many elements of each value a group of rows holds: a few such
/// values (f64: 64 KiB each) stay in a core's L2 cache while the group runs.
pub const GROUP_ELEMENTS: usize = 8192;

/// The most operands of a step (`select` has three).
pub const MAX_OPERANDS: usize = 3;

/// One step of a chain, as the unfused batched forms name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Unary(UnaryOp),
    /// Faults on an integer division by zero.
    Binary(BinaryOp),
    Compare(CompareOp),
    /// A conversion into the link's type.
    Cast,
    Select,
    /// A reduction of each (1-D) row to one element.
    Reduce(ReduceOp),
}

/// Where an operand of a link comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Input `k` of the chain.
    Input(usize),
    /// The value of link `k` (an earlier one).
    Link(usize),
}

/// One link of a chain: its step, operands and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub step: Step,
    pub operands: [Source; MAX_OPERANDS],
    pub arity: usize,
    /// The value's element type and the elements of one row of it.
    pub ty: ScalarType,
    pub row_len: usize,
    /// The index of the caller's output that receives the value, if the
    /// caller keeps it; else the value lives in scratch, a group at a time.
    pub output: Option<usize>,
}

impl Link {
    pub fn operands(&self) -> &[Source] {
        &self.operands[..self.arity]
    }
}

/// A chain of links, in an order where each reads earlier links only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    pub links: Vec<Link>,
}

/// The buffers of the values a chain does not keep, reused from run to run.
#[derive(Debug, Default)]
pub struct Scratch {
    buffers: Vec<Data>,
    /// How each link runs ([`partners`]), kept for its allocation.
    partners: Vec<Partner>,
    /// What [`crate::product_chain`] keeps from run to run: the chain on a
    /// block of rows, the reductions' partial states, the block's buffers.
    pub(crate) block_chain: Chain,
    pub(crate) partials: Vec<Option<Piecewise>>,
    pub(crate) product: Vec<Data>,
}

impl Scratch {
    /// The bytes the scratch buffers hold.
    pub fn bytes(&self) -> u64 {
        self.buffers
            .iter()
            .chain(&self.product)
            .map(|d| {
                let element = match d.ty() {
                    ScalarType::Bool => 1,
                    ScalarType::I32 | ScalarType::F32 => 4,
                    ScalarType::I64 | ScalarType::Usize | ScalarType::F64 => 8,
                };
                (buffer::capacity(d) * element) as u64
            })
            .sum()
    }
}

/// Rows per group for a chain whose widest value or input row has `widest`
/// elements.
pub fn group_rows(widest: usize) -> usize {
    (GROUP_ELEMENTS / widest.max(1)).max(1)
}

/// Runs `chain` on `rows` rows: `inputs` are its inputs (columns of `rows`
/// rows, or shared values), `outputs[k]` receives the value of the link
/// whose `output` is `k` (`rows` rows of that link's row length). Stops at
/// the first fault (outputs then hold part of their rows).
///
/// The default of [`Backend::chain`]: each link of each group of rows is one
/// call of `backend`'s batched form.
pub fn run_chain<B: Backend + ?Sized>(
    backend: &B,
    chain: &Chain,
    inputs: &[Rows<'_>],
    outputs: &mut [RowsMut<'_>],
    rows: usize,
    scratch: &mut Scratch,
) -> Result<(), Fault> {
    let mut none = Partials {
        states: &mut [],
        rows,
    };
    run_chain_with(backend, chain, inputs, outputs, rows, scratch, &mut none)
}

/// The reductions of a chain that runs a piece of each row (a block of
/// columns): `states[link * rows + row]` is link `link`'s reduction of row
/// `row` so far, fed the piece instead of reduced into an output. Empty:
/// every reduction reduces whole rows.
pub(crate) struct Partials<'p> {
    pub states: &'p mut [Option<Piecewise>],
    pub rows: usize,
}

/// [`run_chain`], the reductions fed to `partials` when it has states.
pub(crate) fn run_chain_with<B: Backend + ?Sized>(
    backend: &B,
    chain: &Chain,
    inputs: &[Rows<'_>],
    outputs: &mut [RowsMut<'_>],
    rows: usize,
    scratch: &mut Scratch,
    partials: &mut Partials<'_>,
) -> Result<(), Fault> {
    let widest = chain
        .links
        .iter()
        .map(|l| l.row_len)
        .chain(
            inputs
                .iter()
                .filter(|i| !i.is_shared())
                .map(|i| i.row_len()),
        )
        .max()
        .unwrap_or(1);
    let group = group_rows(widest);
    if scratch.buffers.len() < chain.links.len() {
        scratch.buffers.resize_with(chain.links.len(), || {
            Data::with_capacity(ScalarType::Bool, 0)
        });
    }
    for link in &chain.links {
        if let Some(o) = link.output {
            let out = &outputs[o];
            if out.rows != rows || out.row_len != link.row_len || out.ty() != link.ty {
                internal_error(format!(
                    "a chain output of {} rows of {} {} for {rows} rows of {} {}",
                    out.rows,
                    out.row_len,
                    out.ty(),
                    link.row_len,
                    link.ty
                ));
            }
        }
    }
    let mut partners = std::mem::take(&mut scratch.partners);
    pair_links(chain, &mut partners);
    let mut start = 0;
    let mut outcome = Ok(());
    while start < rows && outcome.is_ok() {
        let end = (start + group).min(rows);
        let cut = Cut {
            inputs,
            range: start..end,
        };
        outcome = run_group(backend, chain, &partners, &cut, outputs, scratch, partials);
        start = end;
    }
    scratch.partners = partners;
    outcome
}

/// How a link runs within a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Partner {
    /// On its own.
    Alone,
    /// Together with the later link given, which then has nothing to do:
    /// `softplus` and `sigmoid` of one operand share each element's
    /// exponential ([`Backend::softplus_sigmoid`]).
    With(usize),
    /// Already computed with an earlier link.
    Done,
}

/// Pairs each `softplus` with a later `sigmoid` of the same operand and
/// row length (or the other way round), as the gradient of a `softplus`
/// has them; every other link runs alone. Into `partners` (one per link;
/// allocates only when it is the longest chain yet).
fn pair_links(chain: &Chain, partners: &mut Vec<Partner>) {
    let links = &chain.links;
    partners.clear();
    partners.resize(links.len(), Partner::Alone);
    let pairable = |l: &Link| {
        l.arity == 1
            && matches!(l.ty, ScalarType::F32 | ScalarType::F64)
            && matches!(
                l.step,
                Step::Unary(UnaryOp::Softplus) | Step::Unary(UnaryOp::Sigmoid)
            )
    };
    for i in 0..links.len() {
        if partners[i] != Partner::Alone || !pairable(&links[i]) {
            continue;
        }
        let (a, rest) = (&links[i], i + 1..links.len());
        let found = rest.into_iter().find(|&j| {
            let b = &links[j];
            partners[j] == Partner::Alone
                && pairable(b)
                && b.step != a.step
                && b.operands[0] == a.operands[0]
                && (b.ty, b.row_len) == (a.ty, a.row_len)
        });
        if let Some(j) = found {
            partners[i] = Partner::With(j);
            partners[j] = Partner::Done;
        }
    }
}

/// The rows of one group and the chain's inputs, which every link reads.
struct Cut<'c, 'i> {
    inputs: &'c [Rows<'i>],
    range: std::ops::Range<usize>,
}

/// Every link of `chain` on the rows of `cut`.
fn run_group<B: Backend + ?Sized>(
    backend: &B,
    chain: &Chain,
    partners: &[Partner],
    cut: &Cut<'_, '_>,
    outputs: &mut [RowsMut<'_>],
    scratch: &mut Scratch,
    partials: &mut Partials<'_>,
) -> Result<(), Fault> {
    for (i, link) in chain.links.iter().enumerate() {
        if matches!(link.step, Step::Reduce(_)) && !partials.states.is_empty() {
            let operands = operands(chain, link, cut, outputs, scratch);
            for (r, row) in cut.range.clone().enumerate() {
                let Some(state) = &mut partials.states[i * partials.rows + row] else {
                    internal_error(format!("link {i} reduces no piece"));
                };
                state.add(operands[0].row(r));
            }
            continue;
        }
        let partner = match partners[i] {
            Partner::Done => continue,
            Partner::Alone => None,
            Partner::With(j) => Some(j),
        };
        // A link's own buffer is moved out while it is written, so that
        // the earlier links' values can be read at the same time.
        let mut own = take(backend, chain, i, cut, outputs, scratch);
        let outcome = match partner {
            None => {
                let operands = operands(chain, link, cut, outputs, scratch);
                let out = own.rows(link, cut);
                run_step(backend, link.step, &operands[..link.arity], out)
            }
            Some(j) => {
                let mut other = take(backend, chain, j, cut, outputs, scratch);
                let operands = operands(chain, link, cut, outputs, scratch);
                let (mine, theirs) = (own.rows(link, cut), other.rows(&chain.links[j], cut));
                let (softplus, sigmoid) = match link.step {
                    Step::Unary(UnaryOp::Softplus) => (mine, theirs),
                    _ => (theirs, mine),
                };
                backend.softplus_sigmoid(operands[0], softplus, sigmoid);
                give(chain, j, other, outputs, scratch);
                Ok(())
            }
        };
        give(chain, i, own, outputs, scratch);
        outcome?;
    }
    Ok(())
}

/// Moves link `i`'s buffer out: the caller's output, or its scratch sized
/// for the group.
fn take<'o, B: Backend + ?Sized>(
    backend: &B,
    chain: &Chain,
    i: usize,
    cut: &Cut<'_, '_>,
    outputs: &mut [RowsMut<'o>],
    scratch: &mut Scratch,
) -> Own<'o> {
    let link = &chain.links[i];
    match link.output {
        Some(o) => Own::Output(std::mem::replace(&mut outputs[o], empty_rows())),
        None => {
            let mut data = std::mem::replace(
                &mut scratch.buffers[i],
                Data::with_capacity(ScalarType::Bool, 0),
            );
            backend.resize(&mut data, link.ty, cut.range.len() * link.row_len);
            Own::Scratch(data)
        }
    }
}

/// Puts link `i`'s buffer back where [`take`] found it.
fn give<'o>(
    chain: &Chain,
    i: usize,
    own: Own<'o>,
    outputs: &mut [RowsMut<'o>],
    scratch: &mut Scratch,
) {
    match own {
        Own::Output(rows) => outputs[chain.links[i].output.unwrap_or_default()] = rows,
        Own::Scratch(data) => scratch.buffers[i] = data,
    }
}

/// The operands of `link` on the rows of `cut`.
fn operands<'s>(
    chain: &Chain,
    link: &Link,
    cut: &Cut<'_, 's>,
    outputs: &'s [RowsMut<'_>],
    scratch: &'s Scratch,
) -> [Rows<'s>; MAX_OPERANDS] {
    let mut operands = [Rows::NONE; MAX_OPERANDS];
    for (operand, source) in operands.iter_mut().zip(link.operands()) {
        *operand = match *source {
            Source::Input(k) => cut.inputs[k].rows(cut.range.clone()),
            Source::Link(j) => link_rows(chain, j, outputs, scratch, cut.range.clone()),
        };
    }
    operands
}

/// The buffer a link writes, while it runs.
enum Own<'a> {
    Output(RowsMut<'a>),
    Scratch(Data),
}

impl Own<'_> {
    /// The rows of `cut` that `link` writes.
    fn rows(&mut self, link: &Link, cut: &Cut<'_, '_>) -> RowsMut<'_> {
        let (n, len) = (cut.range.len(), link.row_len);
        match self {
            Own::Output(rows) => RowsMut::new(
                rows.values
                    .slice(cut.range.start * len..cut.range.end * len),
                n,
                len,
            ),
            Own::Scratch(data) => RowsMut::new(ValuesMut::all(data), n, len),
        }
    }
}

fn empty_rows() -> RowsMut<'static> {
    RowsMut {
        values: ValuesMut::Bool(&mut []),
        rows: 0,
        row_len: 0,
    }
}

/// The rows `range` of link `j`'s value, as an operand (a scratch value
/// holds those rows only).
fn link_rows<'s>(
    chain: &Chain,
    j: usize,
    outputs: &'s [RowsMut<'_>],
    scratch: &'s Scratch,
    range: std::ops::Range<usize>,
) -> Rows<'s> {
    let link = &chain.links[j];
    let len = link.row_len;
    let values = match link.output {
        Some(o) => read(&outputs[o].values).slice(range.start * len..range.end * len),
        None => Values::all(&scratch.buffers[j]),
    };
    Rows::Column {
        values,
        row_len: len,
    }
}

/// A shared view of a mutable one.
fn read<'s>(values: &'s ValuesMut<'_>) -> Values<'s> {
    match values {
        ValuesMut::Bool(v) => Values::Bool(v),
        ValuesMut::I32(v) => Values::I32(v),
        ValuesMut::I64(v) => Values::I64(v),
        ValuesMut::Usize(v) => Values::Usize(v),
        ValuesMut::F32(v) => Values::F32(v),
        ValuesMut::F64(v) => Values::F64(v),
    }
}

/// One step on cut operands: the batched form the unfused operation calls.
pub fn run_step<B: Backend + ?Sized>(
    backend: &B,
    step: Step,
    args: &[Rows<'_>],
    out: RowsMut<'_>,
) -> Result<(), Fault> {
    let arg = |k: usize| args[k];
    match step {
        Step::Unary(op) => backend.unary(op, arg(0), out),
        Step::Binary(op) => return backend.binary(op, arg(0), arg(1), out),
        Step::Compare(op) => backend.compare(op, arg(0), arg(1), out),
        Step::Cast => backend.cast(arg(0), out),
        Step::Select => backend.select(arg(0), arg(1), arg(2), out),
        Step::Reduce(op) => backend.reduce(op, arg(0), out),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unary(op: UnaryOp, operand: Source, ty: ScalarType, row_len: usize) -> Link {
        Link {
            step: Step::Unary(op),
            operands: [operand, Source::Input(0), Source::Input(0)],
            arity: 1,
            ty,
            row_len,
            output: None,
        }
    }

    #[test]
    fn softplus_pairs_with_a_later_sigmoid_of_its_operand_only() {
        use ScalarType::{F32, F64};
        use UnaryOp::{Exp, Sigmoid, Softplus};
        let (x, y) = (Source::Input(0), Source::Input(1));
        let links = vec![
            unary(Sigmoid, x, F64, 4),  // 0: pairs with 3
            unary(Softplus, y, F64, 4), // 1: another operand: alone
            unary(Exp, x, F64, 4),      // 2: not a pair's step
            unary(Softplus, x, F64, 4), // 3: with 0
            unary(Softplus, x, F64, 4), // 4: 0 is taken: alone
            unary(Sigmoid, x, F32, 4),  // 5: another type than 4
            unary(Sigmoid, x, F64, 2),  // 6: another row length
            unary(Sigmoid, x, F64, 4),  // 7: with 4
        ];
        let chain = Chain { links };
        use Partner::{Alone, Done, With};
        let mut partners = vec![Done; 2];
        pair_links(&chain, &mut partners);
        assert_eq!(
            partners,
            vec![With(3), Alone, Alone, Done, With(7), Alone, Alone, Done]
        );
    }
}
