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
//! element is computed when, never the arithmetic.

use autobatch_ir::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
use autobatch_types::{Data, ScalarType};

use crate::backend::Backend;
use crate::buffer::{self, Rows, RowsMut, Values, ValuesMut};
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
}

impl Scratch {
    /// The bytes the scratch buffers hold.
    pub fn bytes(&self) -> u64 {
        self.buffers
            .iter()
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
    let mut start = 0;
    while start < rows {
        let end = (start + group).min(rows);
        run_group(backend, chain, inputs, outputs, start..end, scratch)?;
        start = end;
    }
    Ok(())
}

/// Every link of `chain` on the rows `range`.
fn run_group<B: Backend + ?Sized>(
    backend: &B,
    chain: &Chain,
    inputs: &[Rows<'_>],
    outputs: &mut [RowsMut<'_>],
    range: std::ops::Range<usize>,
    scratch: &mut Scratch,
) -> Result<(), Fault> {
    let n = range.len();
    for (i, link) in chain.links.iter().enumerate() {
        // The link's own buffer is moved out while it is written, so that
        // the earlier links' values can be read at the same time.
        let mut own = match link.output {
            Some(o) => Own::Output(std::mem::replace(&mut outputs[o], empty_rows())),
            None => {
                let mut data = std::mem::replace(
                    &mut scratch.buffers[i],
                    Data::with_capacity(ScalarType::Bool, 0),
                );
                backend.resize(&mut data, link.ty, n * link.row_len);
                Own::Scratch(data)
            }
        };
        let outcome = {
            let mut operands = [Rows::NONE; MAX_OPERANDS];
            for (operand, source) in operands.iter_mut().zip(link.operands()) {
                *operand = match *source {
                    Source::Input(k) => inputs[k].rows(range.clone()),
                    Source::Link(j) => link_rows(chain, j, outputs, scratch, range.clone()),
                };
            }
            let out = match &mut own {
                Own::Output(rows) => {
                    let len = link.row_len;
                    RowsMut::new(
                        rows.values.slice(range.start * len..range.end * len),
                        n,
                        len,
                    )
                }
                Own::Scratch(data) => RowsMut::new(ValuesMut::all(data), n, link.row_len),
            };
            run_step(backend, link.step, &operands[..link.arity], out)
        };
        match own {
            Own::Output(rows) => outputs[link.output.unwrap_or_default()] = rows,
            Own::Scratch(data) => scratch.buffers[i] = data,
        }
        outcome?;
    }
    Ok(())
}

/// The buffer a link writes, while it runs.
enum Own<'a> {
    Output(RowsMut<'a>),
    Scratch(Data),
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
