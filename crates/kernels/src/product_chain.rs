//! A fused chain between two products with one shared matrix: the chain
//! reads `z = matvec(M, v)` of each row's vector `v`, and one of its values
//! `r` (as long as `z`) goes into `vecmat(r, M)`. The gradient of a
//! generalized linear model has this shape (`value_and_grad` of
//! `sum(Y * z - softplus(z))`, `z = X theta`: the chain is `Y * z`,
//! `softplus`, `-`, `sum`, `sigmoid`, `Y - sigmoid(z)`, then `vecmat(r, X)`).
//!
//! [`unblocked`] runs it as the operations one after the other do: `z` for
//! every row into a column, the chain, then the closing product.
//! [`blocked`] (the CPU backend) runs it a block of the matrix's rows at a
//! time: the opening product of those rows for every row of the batch, the
//! chain on that block of `z`, and the closing product's partial sums over
//! those rows, before the next block. `z` and `r` then live in block-sized
//! buffers that stay in the cache, and each block of `M` is read by both
//! products while it is there: `z` and `r` (20 MB each for 256 members and
//! 10,000 rows in f64) never go to memory.
//!
//! Every element keeps the bits the unblocked order gives it: an element
//! of `z` is one dot product, whatever block its row falls in; the chain's
//! steps are elementwise and its reductions carry their partial state from
//! block to block in the order of the whole row ([`Piecewise`], blocks a
//! multiple of [`Piecewise::PIECE_MULTIPLE`] long); the closing product
//! continues each element's `mul_add` chain block after block
//! ([`gemm::vecmat_add_into`]). `tests` compare the two bit for bit.

use autobatch_types::{Data, ScalarType};

use crate::backend::Backend;
use crate::buffer::{Rows, RowsMut, Values, ValuesMut};
use crate::fused::{self, Chain, Partials, Scratch, Source, Step};
use crate::gemm::{self, GemmFloat};
use crate::linalg::{Dims, ProductOp};
use crate::reduce::Piecewise;
use crate::{internal_error, Fault};

/// A chain between two products with one shared matrix.
#[derive(Clone, Copy, Debug)]
pub struct ProductChain<'a> {
    pub chain: &'a Chain,
    /// The shared matrix, `rows x k`, row-major.
    pub matrix: Values<'a>,
    pub rows: usize,
    pub k: usize,
    /// Each row's vector (`k` elements) of the opening product.
    pub vectors: Rows<'a>,
    /// The chain input that is the opening product's value (`rows`
    /// elements per row); the caller's input there is not read.
    pub opening: usize,
    /// The link whose value (`rows` per row, not kept: its `output` is
    /// `None`) the closing product takes.
    pub closing: usize,
}

/// The most inputs a blocked chain takes (more run unblocked).
const MAX_BLOCK_INPUTS: usize = 32;

/// The operations one after the other: `z` for every row into a column,
/// the chain (its closing link's value into a column), then the closing
/// product into `closing` (`members x k`).
pub fn unblocked<B: Backend + ?Sized>(
    backend: &B,
    pc: &ProductChain<'_>,
    inputs: &[Rows<'_>],
    outputs: &mut [RowsMut<'_>],
    closing: RowsMut<'_>,
    members: usize,
    scratch: &mut Scratch,
) -> Result<(), Fault> {
    // `z`, `r` and the chain with `r` kept: the scratch's, reused from run
    // to run.
    let ty = pc.matrix.ty();
    let mut buffers = std::mem::take(&mut scratch.product);
    buffers.resize_with(2, || Data::with_capacity(ScalarType::Bool, 0));
    let [z, r] = &mut buffers[..] else {
        internal_error("a product chain without its two buffers".into());
    };
    backend.resize(z, ty, members * pc.rows);
    backend.resize(r, ty, members * pc.rows);
    let mut chain = std::mem::take(&mut scratch.block_chain);
    chain.links.clear();
    chain.links.extend_from_slice(&pc.chain.links);
    chain.links[pc.closing].output = Some(outputs.len());
    let outcome = unblocked_in(
        backend, pc, &chain, inputs, outputs, closing, members, z, r, scratch,
    );
    scratch.block_chain = chain;
    scratch.product = buffers;
    outcome
}

/// [`unblocked`] with its buffers and its chain (the closing link kept).
#[allow(clippy::too_many_arguments)]
fn unblocked_in<B: Backend + ?Sized>(
    backend: &B,
    pc: &ProductChain<'_>,
    chain: &Chain,
    inputs: &[Rows<'_>],
    outputs: &mut [RowsMut<'_>],
    closing: RowsMut<'_>,
    members: usize,
    z: &mut Data,
    r: &mut Data,
    scratch: &mut Scratch,
) -> Result<(), Fault> {
    let opening = Dims {
        m: pc.rows,
        k: pc.k,
        p: 1,
    };
    let z_rows = RowsMut::new(ValuesMut::all(z), members, pc.rows);
    backend.product(
        ProductOp::Matvec,
        opening,
        Rows::Shared(pc.matrix),
        pc.vectors,
        z_rows,
    );
    let mut all_inputs = inputs.to_vec();
    all_inputs[pc.opening] = Rows::Column {
        values: Values::all(z),
        row_len: pc.rows,
    };
    let mut all_outputs: Vec<RowsMut<'_>> = outputs
        .iter_mut()
        .map(|o| {
            let (rows, row_len) = (o.rows, o.row_len);
            RowsMut::new(o.values.slice(0..rows * row_len), rows, row_len)
        })
        .collect();
    all_outputs.push(RowsMut::new(ValuesMut::all(r), members, pc.rows));
    backend.chain(chain, &all_inputs, &mut all_outputs, members, scratch)?;
    let r_rows = Rows::Column {
        values: Values::all(r),
        row_len: pc.rows,
    };
    let closing_dims = Dims {
        m: 1,
        k: pc.rows,
        p: pc.k,
    };
    backend.product(
        ProductOp::Vecmat,
        closing_dims,
        r_rows,
        Rows::Shared(pc.matrix),
        closing,
    );
    Ok(())
}

/// A block of the matrix's rows at a time (see the module doc), when the
/// chain allows it ([`fits`]); else [`unblocked`]. The products are the
/// kernels' own (`gemm`): for the CPU backend.
pub fn blocked<B: Backend + ?Sized>(
    backend: &B,
    pc: &ProductChain<'_>,
    inputs: &[Rows<'_>],
    outputs: &mut [RowsMut<'_>],
    closing: RowsMut<'_>,
    members: usize,
    scratch: &mut Scratch,
) -> Result<(), Fault> {
    let block = block_rows(pc, members);
    if !fits(pc, inputs) || block >= pc.rows {
        return unblocked(backend, pc, inputs, outputs, closing, members, scratch);
    }
    let mut block_chain = std::mem::take(&mut scratch.block_chain);
    let mut partials = std::mem::take(&mut scratch.partials);
    let mut buffers = std::mem::take(&mut scratch.product);
    prepare(pc, members, &mut block_chain, &mut partials, &mut buffers);
    let run = Blocks {
        pc,
        inputs,
        members,
        block,
    };
    let mut state = BlockState {
        chain: &mut block_chain,
        partials: &mut partials,
        buffers: &mut buffers,
    };
    let outcome = run.all(backend, &mut state, closing, scratch);
    if outcome.is_ok() {
        finish(pc, &partials, outputs, members);
    }
    scratch.block_chain = block_chain;
    scratch.partials = partials;
    scratch.product = buffers;
    outcome
}

/// Bytes of the shared matrix's rows in one block.
const BLOCK_MATRIX_BYTES: usize = 256 * 1024;

/// Bytes of one block's `z` and `r` together, every member's.
const BLOCK_VALUES_BYTES: usize = 512 * 1024;

/// Rows of the matrix per block, for `members` members: at most
/// [`BLOCK_MATRIX_BYTES`] of the matrix and [`BLOCK_VALUES_BYTES`] of the
/// block's `z` and `r`, so that the block's rows of the matrix (read by
/// both products) and its values (written by the opening product, read
/// and written by the chain, read by the closing one) stay in a core's
/// 1 MiB L2 cache; a multiple of [`Piecewise::PIECE_MULTIPLE`]. Blocks of
/// any such size give the same bits (module doc).
fn block_rows(pc: &ProductChain<'_>, members: usize) -> usize {
    let element = match pc.matrix.ty() {
        ScalarType::F32 => 4,
        _ => 8,
    };
    let by_matrix = BLOCK_MATRIX_BYTES / (pc.k.max(1) * element);
    let by_values = BLOCK_VALUES_BYTES / (2 * members.max(1) * element);
    let multiple = Piecewise::PIECE_MULTIPLE;
    (by_matrix.min(by_values) / multiple * multiple).max(multiple)
}

/// Whether the chain runs a block of columns at a time: floats; every
/// link elementwise on rows of `rows` elements and not kept (save the
/// closing one's, which goes to the closing product), or a reduction that
/// [`Piecewise`] computes of such a row, which no link reads; every input
/// the opening product, or a shared value of `rows` elements or of one,
/// or one element per row.
pub fn fits(pc: &ProductChain<'_>, inputs: &[Rows<'_>]) -> bool {
    let links = &pc.chain.links;
    let rows = pc.rows;
    let float = matches!(pc.matrix.ty(), ScalarType::F32 | ScalarType::F64);
    let input_fits = |k: usize| {
        k == pc.opening
            || match inputs[k] {
                Rows::Shared(v) => v.len() == rows || v.len() == 1,
                Rows::Column { row_len, .. } => row_len == 1,
            }
    };
    let long = |s: &Source| match *s {
        Source::Input(k) => k == pc.opening || inputs[k].row_len() == rows,
        Source::Link(j) => links[j].row_len == rows,
    };
    // A link's operands that are links are `rows` long: so no link reads a
    // reduction (one element per row), whose value exists only at the end.
    let link_fits = |link: &fused::Link| {
        let operands_fit = link.operands().iter().all(|s| match *s {
            Source::Input(k) => input_fits(k),
            Source::Link(j) => links[j].row_len == rows,
        });
        operands_fit
            && match link.step {
                Step::Reduce(op) => {
                    link.row_len == 1
                        && Piecewise::new(op, link.ty).is_some()
                        && link.operands().iter().all(long)
                }
                _ => link.row_len == rows && link.output.is_none(),
            }
    };
    float
        && inputs.len() <= MAX_BLOCK_INPUTS
        && pc.closing < links.len()
        && links[pc.closing].row_len == rows
        && links.iter().all(link_fits)
}

/// The chain on a block (its long links `block` wide: set per block), the
/// reductions' states, and the block's two buffers.
fn prepare(
    pc: &ProductChain<'_>,
    members: usize,
    chain: &mut Chain,
    partials: &mut Vec<Option<Piecewise>>,
    buffers: &mut Vec<Data>,
) {
    chain.links.clear();
    chain
        .links
        .extend(pc.chain.links.iter().map(|link| fused::Link {
            output: None,
            ..*link
        }));
    chain.links[pc.closing].output = Some(0);
    partials.clear();
    for link in &pc.chain.links {
        let state = match link.step {
            Step::Reduce(op) => Piecewise::new(op, link.ty),
            _ => None,
        };
        partials.extend(std::iter::repeat_n(state, members));
    }
    buffers.resize_with(2, || Data::with_capacity(ScalarType::Bool, 0));
}

/// The reductions' values into their outputs.
fn finish(
    pc: &ProductChain<'_>,
    partials: &[Option<Piecewise>],
    outputs: &mut [RowsMut<'_>],
    members: usize,
) {
    for (i, link) in pc.chain.links.iter().enumerate() {
        let Some(o) = link.output else { continue };
        for m in 0..members {
            let Some(state) = &partials[i * members + m] else {
                internal_error(format!("a kept link {i} that is no reduction"));
            };
            state.finish(outputs[o].values.slice(m..m + 1));
        }
    }
}

/// One blocked run.
struct Blocks<'r, 'a> {
    pc: &'r ProductChain<'a>,
    inputs: &'r [Rows<'a>],
    members: usize,
    block: usize,
}

/// What a blocked run works in: the chain on a block, the reductions'
/// states (`link * members + member`), the block's `z` and `r`.
struct BlockState<'s> {
    chain: &'s mut Chain,
    partials: &'s mut [Option<Piecewise>],
    buffers: &'s mut [Data],
}

impl Blocks<'_, '_> {
    fn all<B: Backend + ?Sized>(
        &self,
        backend: &B,
        state: &mut BlockState<'_>,
        mut closing: RowsMut<'_>,
        scratch: &mut Scratch,
    ) -> Result<(), Fault> {
        let ty = self.pc.matrix.ty();
        let mut start = 0;
        while start < self.pc.rows {
            let end = (start + self.block).min(self.pc.rows);
            let [z, r] = &mut *state.buffers else {
                internal_error("a product chain without its two buffers".into());
            };
            backend.resize(z, ty, self.members * (end - start));
            backend.resize(r, ty, self.members * (end - start));
            self.opening(start..end, z);
            // The long links are the block's width.
            for (link, whole) in state.chain.links.iter_mut().zip(&self.pc.chain.links) {
                if whole.row_len == self.pc.rows {
                    link.row_len = end - start;
                }
            }
            self.chain_on(
                backend,
                state.chain,
                start..end,
                z,
                r,
                state.partials,
                scratch,
            )?;
            self.closing(start..end, r, &mut closing);
            start = end;
        }
        Ok(())
    }

    /// `z` of rows `range` of the matrix, for every member.
    fn opening(&self, range: std::ops::Range<usize>, z: &mut Data) {
        let (k, n) = (self.pc.k, range.len());
        let m = self.pc.matrix.slice(range.start * k..range.end * k);
        match (m, self.pc.vectors.values(), z) {
            (Values::F32(m), Values::F32(v), Data::F32(z)) => {
                gemm::matvec_into(m, n, k, v, self.members, z)
            }
            (Values::F64(m), Values::F64(v), Data::F64(z)) => {
                gemm::matvec_into(m, n, k, v, self.members, z)
            }
            _ => internal_error("a product chain of mixed types".into()),
        }
    }

    /// The chain on columns `range`: `z` in, `r` out, the reductions fed.
    #[allow(clippy::too_many_arguments)]
    fn chain_on<B: Backend + ?Sized>(
        &self,
        backend: &B,
        chain: &Chain,
        range: std::ops::Range<usize>,
        z: &Data,
        r: &mut Data,
        partials: &mut [Option<Piecewise>],
        scratch: &mut Scratch,
    ) -> Result<(), Fault> {
        let width = range.len();
        let mut inputs = [Rows::NONE; MAX_BLOCK_INPUTS];
        for (k, input) in self.inputs.iter().enumerate() {
            inputs[k] = match *input {
                _ if k == self.pc.opening => Rows::Column {
                    values: Values::all(z),
                    row_len: width,
                },
                Rows::Shared(v) if v.len() == self.pc.rows && v.len() > 1 => {
                    Rows::Shared(v.slice(range.clone()))
                }
                whole => whole,
            };
        }
        let mut outputs = [RowsMut::new(ValuesMut::all(r), self.members, width)];
        let mut states = Partials {
            states: partials,
            rows: self.members,
        };
        fused::run_chain_with(
            backend,
            chain,
            &inputs[..self.inputs.len()],
            &mut outputs,
            self.members,
            scratch,
            &mut states,
        )
    }

    /// The closing product's sums over rows `range`, on from the last block's.
    fn closing(&self, range: std::ops::Range<usize>, r: &Data, out: &mut RowsMut<'_>) {
        let (k, n, first) = (self.pc.k, range.len(), range.start == 0);
        let m = self.pc.matrix.slice(range.start * k..range.end * k);
        let members = self.members;
        match (r, m, &mut out.values) {
            (Data::F32(r), Values::F32(m), ValuesMut::F32(o)) => add(first, r, m, members, n, k, o),
            (Data::F64(r), Values::F64(m), ValuesMut::F64(o)) => add(first, r, m, members, n, k, o),
            _ => internal_error("a product chain of mixed types".into()),
        }
    }
}

/// `out = r m` for the first block, `out += r m` after it.
fn add<T: GemmFloat>(
    first: bool,
    r: &[T],
    m: &[T],
    members: usize,
    n: usize,
    k: usize,
    out: &mut [T],
) {
    if first {
        gemm::vecmat_into(r, m, members, n, k, out)
    } else {
        gemm::vecmat_add_into(r, m, members, n, k, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Cpu;
    use crate::fused::{Link, MAX_OPERANDS};
    use autobatch_ir::{BinaryOp, ReduceOp, UnaryOp};

    fn link(step: Step, operands: &[Source], ty: ScalarType, row_len: usize) -> Link {
        let mut all = [Source::Input(0); MAX_OPERANDS];
        all[..operands.len()].copy_from_slice(operands);
        Link {
            step,
            operands: all,
            arity: operands.len(),
            ty,
            row_len,
            output: None,
        }
    }

    /// The logistic gradient's chain (inputs: 0 `Y` shared, 1 `z`, 2 a
    /// per-row scale), with `reduce` for its reduction and a second one.
    fn chain(ty: ScalarType, rows: usize, reduce: ReduceOp) -> Chain {
        use Source::{Input, Link as L};
        let mut links = vec![
            link(Step::Binary(BinaryOp::Mul), &[Input(0), Input(1)], ty, rows),
            link(Step::Unary(UnaryOp::Softplus), &[Input(1)], ty, rows),
            link(Step::Binary(BinaryOp::Sub), &[L(0), L(1)], ty, rows),
            link(Step::Reduce(reduce), &[L(2)], ty, 1),
            link(Step::Unary(UnaryOp::Sigmoid), &[Input(1)], ty, rows),
            link(Step::Binary(BinaryOp::Sub), &[Input(0), L(4)], ty, rows),
            link(Step::Binary(BinaryOp::Mul), &[Input(2), L(5)], ty, rows),
            link(Step::Reduce(ReduceOp::Max), &[L(4)], ty, 1),
        ];
        links[3].output = Some(0);
        links[7].output = Some(1);
        Chain { links }
    }

    fn data(ty: ScalarType, values: impl Iterator<Item = f64>) -> Data {
        let v: Vec<f64> = values.collect();
        match ty {
            ScalarType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            _ => Data::F64(v),
        }
    }

    fn bits(d: &Data) -> Vec<u64> {
        match d {
            Data::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            Data::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
            _ => unreachable!(),
        }
    }

    /// The chain `chain` between `matrix` (`rows x k`) and each row's
    /// vector of `vectors`, its opening product input 1 and its closing
    /// link 6 (as [`chain`] builds them).
    fn test_chain<'a>(
        chain: &'a Chain,
        matrix: &'a Data,
        vectors: &'a Data,
        rows: usize,
        k: usize,
    ) -> ProductChain<'a> {
        ProductChain {
            chain,
            matrix: Values::all(matrix),
            rows,
            k,
            vectors: Rows::Column {
                values: Values::all(vectors),
                row_len: k,
            },
            opening: 1,
            closing: 6,
        }
    }

    /// Runs the chain one way, giving its outputs and the closing product.
    fn run(
        ty: ScalarType,
        rows: usize,
        k: usize,
        members: usize,
        reduce: ReduceOp,
        blocked: bool,
    ) -> [Data; 3] {
        let wave =
            |n: usize, scale: f64| (0..n).map(move |i| ((i * 7919 % 1001) as f64 - 500.0) * scale);
        let mut matrix = data(ty, wave(rows * k, 1e-3));
        if let Data::F64(m) = &mut matrix {
            m[5] = f64::NAN;
        }
        let y = data(ty, (0..rows).map(|i| (i % 2) as f64));
        let vectors = data(ty, wave(members * k, 2e-3));
        let scale = data(ty, (0..members).map(|m| 1.0 + m as f64));
        let chain = chain(ty, rows, reduce);
        let pc = test_chain(&chain, &matrix, &vectors, rows, k);
        let inputs = [
            Rows::Shared(Values::all(&y)),
            Rows::NONE,
            Rows::Column {
                values: Values::all(&scale),
                row_len: 1,
            },
        ];
        let mut first = data(ty, (0..members).map(|_| 0.0));
        let mut second = data(ty, (0..members).map(|_| 0.0));
        let mut closing = data(ty, (0..members * k).map(|_| 0.0));
        let mut outputs = [
            RowsMut::new(ValuesMut::all(&mut first), members, 1),
            RowsMut::new(ValuesMut::all(&mut second), members, 1),
        ];
        let out = RowsMut::new(ValuesMut::all(&mut closing), members, k);
        let mut scratch = Scratch::default();
        let f = if blocked {
            super::blocked::<Cpu>
        } else {
            super::unblocked::<Cpu>
        };
        assert!(
            !blocked || fits(&pc, &inputs) && block_rows(&pc, members) < rows,
            "runs blocked"
        );
        f(&Cpu, &pc, &inputs, &mut outputs, out, members, &mut scratch).unwrap();
        [first, second, closing]
    }

    #[test]
    fn blocks_give_the_bits_of_the_operations_one_by_one() {
        for ty in [ScalarType::F32, ScalarType::F64] {
            for (rows, k, members) in [
                (1000, 100, 7),
                (2051, 37, 3),
                (640, 256, 13),
                (1003, 10, 300),
            ] {
                for reduce in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Min] {
                    let one_by_one = run(ty, rows, k, members, reduce, false);
                    let blocked = run(ty, rows, k, members, reduce, true);
                    for (a, b) in one_by_one.iter().zip(&blocked) {
                        assert_eq!(
                            bits(a),
                            bits(b),
                            "{ty} {rows}x{k}, {members} members, {reduce:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_block_holds_at_most_its_share_of_the_matrix_and_of_the_values() {
        let chain = chain(ScalarType::F64, 10_000, ReduceOp::Sum);
        let matrix = Data::F64(vec![0.0; 10_000 * 100]);
        let vectors = Data::F64(vec![0.0; 100]);
        let pc = test_chain(&chain, &matrix, &vectors, 10_000, 100);
        // 256 KiB of the matrix's rows of 800 bytes: 327, down to a multiple of 8.
        assert_eq!(block_rows(&pc, 1), 320);
        // 512 KiB of `z` and `r`, 16 bytes per member and row.
        assert_eq!(block_rows(&pc, 256), 128);
        assert_eq!(block_rows(&pc, 1024), 32);
        assert_eq!(block_rows(&pc, 1 << 20), Piecewise::PIECE_MULTIPLE);
    }

    #[test]
    fn a_kept_long_value_runs_unblocked() {
        let mut chain = chain(ScalarType::F64, 1000, ReduceOp::Sum);
        chain.links[2].output = Some(2);
        let matrix = Data::F64(vec![0.0; 1000 * 10]);
        let vectors = Data::F64(vec![0.0; 10]);
        let y = Data::F64(vec![0.0; 1000]);
        let pc = test_chain(&chain, &matrix, &vectors, 1000, 10);
        let inputs = [
            Rows::Shared(Values::all(&y)),
            Rows::NONE,
            Rows::Shared(Values::of(&y, 0..1)),
        ];
        assert!(!fits(&pc, &inputs));
    }
}
