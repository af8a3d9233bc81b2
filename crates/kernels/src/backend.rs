//! The seam under the batched engine: [`Backend`] names every operation the
//! engine of `autobatch-exec` asks for, and [`Cpu`] is its implementation
//! by this crate's functions.
//!
//! As in candle (a `Tensor` over a `Storage` over a backend), the engine
//! plans (which rows, which layout, which thread) and a backend computes.
//! Every operation works on a *column of rows* ([`Rows`], [`RowsMut`]): row
//! `r` is the value of one member, and an operand may instead be one value
//! all rows share. A second backend (a JIT, a GPU) implements this trait;
//! it must give every output element the bits [`Cpu`] gives it (the
//! project's rule: the batch, the strategy, the thread count never change
//! one bit of a member's result), which it can check against [`Cpu`] on the
//! executor tests.
//!
//! Storage: the buffers are host memory, [`Data`] (a typed `Vec`), viewed as
//! [`Values`] / [`ValuesMut`]; the engine sizes its spare buffers through
//! [`Backend::resize`] and [`Backend::capacity`]. The executors' column
//! storage (`autobatch-exec`'s `batched::storage`) is this layout too, so a
//! backend with memory of its own would copy at this seam, or take over that
//! storage as well.
//!
//! Fused chains: [`Backend::chain`] runs several elementwise steps (and
//! reductions of rows) as one pass, a cache-sized group of rows at a time;
//! its default calls the backend's own forms, so a backend need not
//! implement it.
//!
//! Faults: an operation that may fault (`binary`, `chain`, `index`, `index_set`,
//! `set_items`) returns the first [`Fault`] it meets; the engine then runs
//! the operation row by row ([`Backend::eval`]) to find which rows fault.
//! A broken invariant (operands the IR verifier rules out) is an internal
//! error (`internal_error`, a panic), as everywhere in this crate.

use autobatch_ir::{BinaryOp, CompareOp, Prim, ReduceOp, UnaryOp};
use autobatch_types::{Data, ScalarType, Tensor};

use crate::buffer::{self, Rows, RowsMut, Values, ValuesMut};
use crate::fused::{self, Chain, Scratch};
use crate::linalg::{self, Dims, ProductOp};
use crate::product_chain::{self, ProductChain};
use crate::rng::{self, Draw, Streams};
use crate::{elementwise, eval, layout, reduce, Fault, PrimContext};

/// What the batched engine runs its operations on. Every method computes
/// the rows of its result from the same rows of its operands (or from
/// shared operands); the engine may call it on any range of rows, from
/// several threads at once, and each output element must not depend on the
/// range.
pub trait Backend: Send + Sync {
    /// A short name, for reports.
    fn name(&self) -> &'static str;

    // --- Storage.

    /// Makes `data` hold `len` elements of `ty` (contents unspecified),
    /// keeping its allocation when it can.
    fn resize(&self, data: &mut Data, ty: ScalarType, len: usize);
    /// The elements `data` can hold without allocating.
    fn capacity(&self, data: &Data) -> usize;

    // --- Moving rows.

    /// `dst = src`, one type and length.
    fn copy(&self, src: Values<'_>, dst: ValuesMut<'_>);
    /// Row `k` of `out` = row `rows[k]` of `src` (compaction).
    fn gather_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], out: ValuesMut<'_>);
    /// Row `rows[k]` of `dst` = row `k` of `src` (the inverse of a gather).
    fn scatter_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>);
    /// Row `r` of `dst` = row `r` of `src` for each `r` in `rows`.
    fn copy_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>);
    /// Row `r` of `dst` = `value` (one row) for each `r` in `rows`.
    fn broadcast_rows(&self, value: Values<'_>, rows: &[u32], dst: ValuesMut<'_>);

    // --- Elementwise, with broadcasting of scalars and shared values.

    /// A unary operation; `out` has the result type.
    fn unary(&self, op: UnaryOp, x: Rows<'_>, out: RowsMut<'_>);
    /// `softplus(x)` into `softplus` and `sigmoid(x)` into `sigmoid` (float
    /// `x`): the bits of two [`Backend::unary`] calls, which the default
    /// makes; a backend may share the work the two have in common.
    fn softplus_sigmoid(&self, x: Rows<'_>, softplus: RowsMut<'_>, sigmoid: RowsMut<'_>) {
        self.unary(UnaryOp::Softplus, x, softplus);
        self.unary(UnaryOp::Sigmoid, x, sigmoid);
    }
    /// A binary operation; faults on an integer division by zero.
    fn binary(&self, op: BinaryOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>)
        -> Result<(), Fault>;
    /// A comparison into `bool`s.
    fn compare(&self, op: CompareOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>);
    /// A conversion into `out`'s type, as Rust's `as`.
    fn cast(&self, x: Rows<'_>, out: RowsMut<'_>);
    /// `if_true` where `cond`, else `if_false`.
    fn select(&self, cond: Rows<'_>, if_true: Rows<'_>, if_false: Rows<'_>, out: RowsMut<'_>);

    /// A fused chain of elementwise steps and row reductions
    /// ([`crate::fused`]) on `rows` rows, a cache-sized group of rows at a
    /// time; values the caller does not keep live in `scratch`. Each
    /// element must have the bits the chain's steps give it one by one; the
    /// default runs the steps through this backend's own batched forms.
    fn chain(
        &self,
        chain: &Chain,
        inputs: &[Rows<'_>],
        outputs: &mut [RowsMut<'_>],
        rows: usize,
        scratch: &mut Scratch,
    ) -> Result<(), Fault> {
        fused::run_chain(self, chain, inputs, outputs, rows, scratch)
    }

    /// A fused chain between two products with one shared matrix
    /// ([`crate::product_chain`]): `inputs` and `outputs` as for
    /// [`Backend::chain`] (input `pc.opening` is the opening product's value
    /// and is not read; the closing link is not kept), `closing` receives
    /// `vecmat(closing link's value, matrix)`, `members` rows of `pc.k`.
    /// Each element must have the bits of the operations one by one, which
    /// the default runs.
    fn product_chain(
        &self,
        pc: &ProductChain<'_>,
        inputs: &[Rows<'_>],
        outputs: &mut [RowsMut<'_>],
        closing: RowsMut<'_>,
        members: usize,
        scratch: &mut Scratch,
    ) -> Result<(), Fault> {
        product_chain::unblocked(self, pc, inputs, outputs, closing, members, scratch)
    }

    // --- Reductions over each row.

    /// A reduction of each (1-D) row to one element.
    fn reduce(&self, op: ReduceOp, x: Rows<'_>, out: RowsMut<'_>);
    /// The softmax of each (1-D, float) row.
    fn softmax(&self, x: Rows<'_>, out: RowsMut<'_>);

    // --- Products and transposition.

    /// A float `dot`, `matvec`, `vecmat` or `matmul` per row; a shared
    /// operand makes it one product with all rows.
    fn product(&self, op: ProductOp, dims: Dims, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>);
    /// The outer product of each row of `a` with the same row of `b`.
    fn outer(&self, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>);
    /// The transpose of each row (an `m x k` matrix).
    fn transpose(&self, x: Rows<'_>, m: usize, k: usize, out: RowsMut<'_>);

    // --- Building and taking apart arrays.

    /// `array[index]` per row, `length` items per array row.
    fn index(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault>;
    /// `array[index] = value` per row, into a copy.
    fn index_set(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault>;
    /// `array[index] = value` in place on the rows `rows` of the column
    /// `array`, writing only the items; nothing is written on a fault.
    fn set_items(
        &self,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        rows: &[u32],
        array: RowsMut<'_>,
    ) -> Result<(), Fault>;
    /// `[x; count]` per row.
    fn fill(&self, x: Rows<'_>, count: usize, out: RowsMut<'_>);
    /// `[x0, ..., xn-1]` per row.
    fn stack(&self, items: &[Rows<'_>], out: RowsMut<'_>);

    // --- Random draws.

    /// Each row of `rows` draws from its member's stream into its row of
    /// the column `out`, as the per-member primitive does.
    fn draw(
        &self,
        draw: Draw,
        p: Option<Rows<'_>>,
        rows: &[u32],
        streams: &mut Streams<'_>,
        out: RowsMut<'_>,
    );

    // --- Everything else.

    /// Any primitive for one member (the engine's row-by-row path, and
    /// operations on shared operands computed once).
    fn eval(
        &self,
        prim: &Prim,
        args: &[&Tensor],
        ctx: &mut PrimContext<'_>,
    ) -> Result<Option<Tensor>, Fault>;
}

/// The CPU backend: this crate's kernels, in host memory. The engine splits
/// large operations over rows between its worker threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

impl Backend for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn resize(&self, data: &mut Data, ty: ScalarType, len: usize) {
        buffer::resize(data, ty, len)
    }

    fn capacity(&self, data: &Data) -> usize {
        buffer::capacity(data)
    }

    fn copy(&self, src: Values<'_>, dst: ValuesMut<'_>) {
        buffer::copy(src, dst)
    }

    fn gather_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], out: ValuesMut<'_>) {
        buffer::gather_rows(src, row_len, rows, out)
    }

    fn scatter_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
        buffer::scatter_rows(src, row_len, rows, dst)
    }

    fn copy_rows(&self, src: Values<'_>, row_len: usize, rows: &[u32], dst: ValuesMut<'_>) {
        buffer::copy_rows(src, row_len, rows, dst)
    }

    fn broadcast_rows(&self, value: Values<'_>, rows: &[u32], dst: ValuesMut<'_>) {
        buffer::broadcast_rows(value, rows, dst)
    }

    fn unary(&self, op: UnaryOp, x: Rows<'_>, out: RowsMut<'_>) {
        elementwise::unary_rows(op, x, out)
    }

    fn softplus_sigmoid(&self, x: Rows<'_>, softplus: RowsMut<'_>, sigmoid: RowsMut<'_>) {
        elementwise::softplus_sigmoid_rows(x, softplus, sigmoid)
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Rows<'_>,
        b: Rows<'_>,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        elementwise::binary_rows(op, a, b, out)
    }

    fn compare(&self, op: CompareOp, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        elementwise::compare_rows(op, a, b, out)
    }

    fn cast(&self, x: Rows<'_>, out: RowsMut<'_>) {
        elementwise::cast_rows(x, out)
    }

    fn select(&self, cond: Rows<'_>, if_true: Rows<'_>, if_false: Rows<'_>, out: RowsMut<'_>) {
        elementwise::select_rows(cond, if_true, if_false, out)
    }

    fn product_chain(
        &self,
        pc: &ProductChain<'_>,
        inputs: &[Rows<'_>],
        outputs: &mut [RowsMut<'_>],
        closing: RowsMut<'_>,
        members: usize,
        scratch: &mut Scratch,
    ) -> Result<(), Fault> {
        product_chain::blocked(self, pc, inputs, outputs, closing, members, scratch)
    }

    fn reduce(&self, op: ReduceOp, x: Rows<'_>, out: RowsMut<'_>) {
        reduce::reduce_rows(op, x, out)
    }

    fn softmax(&self, x: Rows<'_>, out: RowsMut<'_>) {
        reduce::softmax_rows(x, out)
    }

    fn product(&self, op: ProductOp, dims: Dims, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        linalg::product_rows(op, dims, a, b, out)
    }

    fn outer(&self, a: Rows<'_>, b: Rows<'_>, out: RowsMut<'_>) {
        linalg::outer_rows(a, b, out)
    }

    fn transpose(&self, x: Rows<'_>, m: usize, k: usize, out: RowsMut<'_>) {
        linalg::transpose_rows(x, m, k, out)
    }

    fn index(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        layout::index_rows(array, index, length, out)
    }

    fn index_set(
        &self,
        array: Rows<'_>,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        out: RowsMut<'_>,
    ) -> Result<(), Fault> {
        layout::index_set_rows(array, index, value, length, out)
    }

    fn set_items(
        &self,
        index: Rows<'_>,
        value: Rows<'_>,
        length: usize,
        rows: &[u32],
        array: RowsMut<'_>,
    ) -> Result<(), Fault> {
        layout::set_items(index, value, length, rows, array)
    }

    fn fill(&self, x: Rows<'_>, count: usize, out: RowsMut<'_>) {
        layout::fill_rows(x, count, out)
    }

    fn stack(&self, items: &[Rows<'_>], out: RowsMut<'_>) {
        layout::stack_rows(items, out)
    }

    fn draw(
        &self,
        draw: Draw,
        p: Option<Rows<'_>>,
        rows: &[u32],
        streams: &mut Streams<'_>,
        out: RowsMut<'_>,
    ) {
        rng::draw_rows(draw, p, rows, streams, out)
    }

    fn eval(
        &self,
        prim: &Prim,
        args: &[&Tensor],
        ctx: &mut PrimContext<'_>,
    ) -> Result<Option<Tensor>, Fault> {
        eval(prim, args, ctx)
    }
}
