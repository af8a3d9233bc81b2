//! Chains of elementwise float operations over arrays of one length, with
//! the sums they feed, run as **one native loop** instead
//! of one call of the host per operation.
//!
//! A *group* is a run of a block's operations, each one of
//!
//! - `a + b`, `a - b`, `a * b`, `a / b` with `a` or `b` a float array (the
//!   other an array of the same shape, or a scalar standing for every
//!   element), and `-a`;
//! - `sum(a)` of a one-dimensional float array,
//!
//! all of one element type and one element count, larger than what
//! `inline` computes element by element. Operations between them that
//! neither read what the group defines, nor define what it reads or
//! defines, nor may stop the member run before the loop (so the group's
//! operations keep every value they had in the block's order). One that
//! computes floats from a group's sums (or from what such an operation
//! computes), and does nothing else, runs after the loop, where the sums
//! have their values (its operands keep theirs: nothing between redefines
//! them), so that a derivative's scalar steps between two vector passes
//! (`dot`'s adjoint scaled by a sum) leave the passes one loop.
//!
//! The loop takes the elements a *chunk* at a time: the lane count `L` of
//! the kernels' reductions (`gemm::GemmFloat::LANES`: 4 for `f64`, 8 for
//! `f32`), as two vectors of `L / 2`. Within a chunk every operation runs
//! in the block's order, so an array a later operation reads is in a
//! register; it is stored only if something outside the group reads it.
//! The bits are the kernels':
//!
//! - `+ - * /` and negation are IEEE 754 operations (any order of elements
//!   gives the same bits);
//! - a sum keeps the kernels' `L` lane partials (element `k` of a chunk
//!   goes to lane `k`, a partial chunk at the end to its first lanes),
//!   starting from `+0`, then their fixed pairwise tree (`gemm::tree`),
//!   each addition with the partial as its first operand, as the kernels'
//!   (which of two NaNs an addition keeps depends on the order).
//!
//! `dot` stays the host's: its lanes are fused multiply-adds, and which of
//! several NaN operands an x86 FMA keeps depends on which of its three
//! encodings the compiler picks, which Cranelift and the kernels' compiler
//! pick independently (a chain of random programs found a NaN of the other
//! sign).

use std::collections::HashMap;
use std::ops::Range;

use autobatch_ir::{BinaryOp, BlockData, EntityRef, Function, Op, Prim, ReduceOp, UnaryOp, Var};
use autobatch_types::ScalarType;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, MemFlagsData, Type, Value};

use super::function::{may_stop, Translator, LANES};
use super::inline::INLINE_BYTES;
use crate::operand;

/// Vector loads and stores: the arrays are 8-byte aligned, not 16.
const UNALIGNED: MemFlagsData = MemFlagsData::new().with_notrap();

/// How many times each variable of a function is defined (parameters
/// included) and read (by operations and terminators).
pub(crate) struct Counts {
    defs: Vec<u32>,
    uses: Vec<u32>,
}

impl Counts {
    pub(crate) fn of(function: &Function) -> Counts {
        let n = function.vars.len();
        let (mut defs, mut uses) = (vec![0; n], vec![0; n]);
        for p in &function.params {
            defs[p.index()] += 1;
        }
        for data in function.blocks.values() {
            for op in &data.ops {
                for d in op.defs() {
                    defs[d.index()] += 1;
                }
                for u in op.uses() {
                    uses[u.index()] += 1;
                }
            }
            for u in data.term.uses() {
                uses[u.index()] += 1;
            }
        }
        Counts { defs, uses }
    }
}

/// What one operation of a group computes.
#[derive(Clone, Copy)]
enum Step {
    Binary(BinaryOp),
    Neg,
    Sum,
}

/// A planned group: its operations' positions in the block (the loop is
/// emitted at the last one), their element type and count, and the
/// positions of the operations between them postponed past the loop.
pub(super) struct Group {
    pub members: Vec<usize>,
    pub postponed: Vec<usize>,
    elem: ScalarType,
    len: usize,
}

/// A group's operations as its loop reads them: each operation (result,
/// step, operands), whether its array result is stored, each array's base
/// address and each scalar operand (its value and its splat).
struct Chain<'a> {
    ops: Vec<ChainOp<'a>>,
    stored: Vec<bool>,
    bases: HashMap<Var, Value>,
    scalars: HashMap<Var, ScalarOperand>,
    /// The positions in `ops` of the sums, in order.
    sums: Vec<usize>,
}

/// One operation of a [`Chain`].
struct ChainOp<'a> {
    dst: Var,
    step: Step,
    args: &'a [Var],
}

/// A scalar operand of a [`Chain`]: its value, for the leftover elements,
/// and its splat, for the vectors of whole chunks.
#[derive(Clone, Copy)]
struct ScalarOperand {
    value: Value,
    splat: Value,
}

/// How a fused loop takes its elements: `lanes` (the kernels' `L`: 4 for
/// `f64`, 8 for `f32`) a chunk, as two vectors of `lanes / 2` scalars of
/// `size` bytes.
#[derive(Clone, Copy)]
struct ChunkShape {
    scalar: Type,
    vector: Type,
    lanes: usize,
    size: usize,
}

impl ChunkShape {
    fn of(elem: ScalarType) -> ChunkShape {
        let scalar = if elem == ScalarType::F64 {
            types::F64
        } else {
            types::F32
        };
        let size = scalar.bytes() as usize;
        let lanes = 32 / size;
        ChunkShape {
            scalar,
            vector: scalar.by(lanes as u32 / 2).expect("a 128-bit vector"),
            lanes,
            size,
        }
    }
}

/// A group being gathered: its members, and every variable they read and
/// define.
struct Gathering {
    group: Group,
    reads: Vec<Var>,
    defs: Vec<Var>,
    /// The scalars its reductions define (no member may read them: they
    /// hold their values only after the loop).
    sums: Vec<Var>,
    /// The operations since the last member that read what the group (or
    /// such an operation) defines: postponed past the loop if another
    /// member joins, else run where they are, after it.
    waiting: Vec<usize>,
    /// Every variable the postponed and waiting operations read and define.
    postponed_reads: Vec<Var>,
    postponed_defs: Vec<Var>,
}

impl Gathering {
    fn new(elem: ScalarType, len: usize) -> Gathering {
        Gathering {
            group: Group {
                members: Vec::new(),
                postponed: Vec::new(),
                elem,
                len,
            },
            reads: Vec::new(),
            defs: Vec::new(),
            sums: Vec::new(),
            waiting: Vec::new(),
            postponed_reads: Vec::new(),
            postponed_defs: Vec::new(),
        }
    }

    /// Whether `op`, a fusable operation of the group's element type and
    /// count, may join it: it reads no sum and nothing postponed, and
    /// defines nothing a postponed operation reads or defines.
    fn admits(&self, op: &Op) -> bool {
        !op.uses()
            .iter()
            .any(|u| self.sums.contains(u) || self.postponed_defs.contains(u))
            && !op
                .defs()
                .iter()
                .any(|d| self.postponed_reads.contains(d) || self.postponed_defs.contains(d))
    }

    fn join(&mut self, i: usize, op: &Op, is_array: impl Fn(Var) -> bool) {
        self.group.members.push(i);
        self.group.postponed.append(&mut self.waiting);
        self.reads.extend_from_slice(op.uses());
        self.defs.extend_from_slice(op.defs());
        if op.defs().iter().all(|d| !is_array(*d)) {
            self.sums.extend_from_slice(op.defs());
        }
    }

    /// Takes `op`, an operation between members, into account; gives
    /// whether the group may still grow past it: `op` neither may stop,
    /// nor defines what the group or a postponed operation reads or
    /// defines, nor reads the group's arrays, and, if it reads its sums or
    /// what a postponed operation defines, may be postponed. (Reading an
    /// array it could be postponed too, but the longer loops that allows
    /// keep more values live than the registers hold.)
    fn passes(&mut self, i: usize, op: &Op, stops: bool, postponable: bool) -> bool {
        let defined = |v: &Var| self.defs.contains(v) || self.postponed_defs.contains(v);
        let clobbers = op
            .defs()
            .iter()
            .any(|d| defined(d) || self.reads.contains(d) || self.postponed_reads.contains(d));
        let reads_array = op
            .uses()
            .iter()
            .any(|u| self.defs.contains(u) && !self.sums.contains(u));
        if stops || clobbers || reads_array {
            return false;
        }
        if op.uses().iter().any(defined) {
            if !postponable {
                return false;
            }
            self.waiting.push(i);
            self.postponed_reads.extend_from_slice(op.uses());
            self.postponed_defs.extend_from_slice(op.defs());
        }
        true
    }

    fn close(self, groups: &mut Vec<Group>) {
        if self.group.members.len() >= 2 {
            groups.push(self.group);
        }
    }
}

impl Translator<'_, '_, '_> {
    /// The groups among operations `range` of `data`.
    pub(super) fn fused_groups(&self, data: &BlockData, range: Range<usize>) -> Vec<Group> {
        let mut groups = Vec::new();
        let mut open: Option<Gathering> = None;
        let no_constants = HashMap::new();
        for i in range {
            let op = &data.ops[i];
            if let Some((elem, len)) = self.fusable(op) {
                let joins = open
                    .as_ref()
                    .is_some_and(|g| g.group.elem == elem && g.group.len == len && g.admits(op));
                if !joins {
                    if let Some(g) = open.take() {
                        g.close(&mut groups);
                    }
                }
                let g = open.get_or_insert_with(|| Gathering::new(elem, len));
                g.join(i, op, |d| self.is_array(d));
                continue;
            }
            let Some(g) = open.as_mut() else { continue };
            let stops = may_stop(self.function, op, &no_constants);
            if !g.passes(i, op, stops, self.postponable(op)) {
                open.take().expect("open").close(&mut groups);
            }
        }
        if let Some(g) = open {
            g.close(&mut groups);
        }
        groups
    }

    /// Whether `op` may run after a group's loop instead of before it: it
    /// computes floats from its operands and nothing else (no fault, no
    /// draw, no effect; what is known of integers stays as it was).
    fn postponable(&self, op: &Op) -> bool {
        let Op::Prim {
            dst: Some(dst),
            prim,
            ..
        } = op
        else {
            return false;
        };
        self.function.vars[*dst].ty.elem.is_float()
            && matches!(
                prim,
                Prim::Unary(_)
                    | Prim::Binary(_)
                    | Prim::Ternary(_)
                    | Prim::Select
                    | Prim::Cast(_)
                    | Prim::Fill(_)
                    | Prim::Copy
                    | Prim::Dot
                    | Prim::Reduce(_)
            )
    }

    /// The element type and count of a float array operation a group may
    /// hold (see the module doc), if `op` is one.
    fn fusable(&self, op: &Op) -> Option<(ScalarType, usize)> {
        let Op::Prim {
            dst: Some(dst),
            prim,
            args,
            ..
        } = op
        else {
            return None;
        };
        let step = step_of(prim)?;
        let array = match step {
            Step::Sum => args[0],
            Step::Binary(_) | Step::Neg => *dst,
        };
        let elem = self.function.vars[array].ty.elem;
        if !matches!(elem, ScalarType::F32 | ScalarType::F64) || !self.is_array(array) {
            return None;
        }
        // Arrays of per-member lengths run on the host (the loop's
        // length is a constant).
        if self.is_ragged(array) {
            return None;
        }
        let shape = operand(&self.function.vars[array].ty, self.unit.symbols());
        if shape.bytes() <= INLINE_BYTES {
            return None;
        }
        let same_elem = |v: &Var| self.function.vars[*v].ty.elem == elem;
        let same_shape = |v: &Var| {
            !self.is_array(*v)
                || operand(&self.function.vars[*v].ty, self.unit.symbols()).shape == shape.shape
        };
        let fits = match step {
            Step::Binary(_) | Step::Neg => args.iter().all(|v| same_elem(v) && same_shape(v)),
            Step::Sum => shape.shape.len() == 1 && !self.is_array(*dst) && same_elem(dst),
        };
        let len = shape.shape.iter().product();
        fits.then_some((elem, len))
    }

    /// Emits `group`'s loop: its operations, chunk by chunk in the block's
    /// order, then the chunk left over element by element, then each
    /// sum's tree.
    pub(super) fn fused_loop(&mut self, data: &BlockData, group: &Group) {
        self.unit.fused_loops += 1;
        let shape = ChunkShape::of(group.elem);
        let chain = self.chain(data, group, shape.vector);
        let whole = group.len / shape.lanes * shape.lanes;
        let mut partials = self.whole_chunks(&chain, shape, whole);
        // The chunk left over, element by element into lanes 0, 1, ...
        for k in whole..group.len {
            let lane = k - whole;
            let at = self.b.ins().iconst(types::I64, (k * shape.size) as i64);
            let mut part: Vec<Value> = partials.iter().map(|p| p[lane]).collect();
            self.chain_at(&chain, shape.scalar, at, &mut part);
            for (r, value) in part.into_iter().enumerate() {
                partials[r][lane] = value;
            }
        }
        // Each sum's tree over its lanes (`gemm::tree`).
        for (mut w, k) in partials.into_iter().zip(&chain.sums) {
            let mut width = shape.lanes;
            while width > 1 {
                width /= 2;
                for i in 0..width {
                    w[i] = self.b.ins().fadd(w[i], w[i + width]);
                }
            }
            let d = chain.ops[*k].dst;
            self.b.def_var(self.vars[d.index()], w[0]);
        }
    }

    /// `group`'s operations as its loop reads them (see [`Chain`]); the
    /// bases and splats are computed here, before the loop.
    fn chain<'d>(&mut self, data: &'d BlockData, group: &Group, vector: Type) -> Chain<'d> {
        let ops: Vec<ChainOp<'d>> = group
            .members
            .iter()
            .map(|i| match &data.ops[*i] {
                Op::Prim {
                    dst: Some(d),
                    prim,
                    args,
                    ..
                } => ChainOp {
                    dst: *d,
                    step: step_of(prim).expect("planned"),
                    args: args.as_slice(),
                },
                _ => unreachable!("a group holds primitives with a result"),
            })
            .collect();
        // An array result is stored unless the group's later operations
        // are all that ever read it (and it is defined nowhere else).
        let stored: Vec<bool> = (0..ops.len())
            .map(|j| {
                let d = ops[j].dst;
                let later = ops[j + 1..]
                    .iter()
                    .flat_map(|op| op.args.iter())
                    .filter(|a| **a == d)
                    .count() as u32;
                let counts = &self.fuse_counts;
                counts.defs[d.index()] != 1 || counts.uses[d.index()] != later
            })
            .collect();
        let mut bases: HashMap<Var, Value> = HashMap::new();
        let mut scalars: HashMap<Var, ScalarOperand> = HashMap::new();
        for op in &ops {
            let elementwise = matches!(op.step, Step::Binary(_) | Step::Neg);
            for v in op.args.iter().chain(elementwise.then_some(&op.dst)) {
                if self.is_array(*v) {
                    if !bases.contains_key(v) {
                        let base = self.addr(*v);
                        bases.insert(*v, base);
                    }
                } else if !scalars.contains_key(v) {
                    let value = self.b.use_var(self.vars[v.index()]);
                    let splat = self.b.ins().splat(vector, value);
                    scalars.insert(*v, ScalarOperand { value, splat });
                }
            }
        }
        let sums = (0..ops.len())
            .filter(|k| matches!(ops[*k].step, Step::Sum))
            .collect();
        Chain {
            ops,
            stored,
            bases,
            scalars,
            sums,
        }
    }

    /// The loop over the `whole` first elements, a chunk a pass (there is
    /// at least one chunk: the arrays are larger than `INLINE_BYTES`): its
    /// byte offset and, per sum, two vectors of lane partials as block
    /// parameters. Gives each sum's lane partials after it, as scalars.
    fn whole_chunks(
        &mut self,
        chain: &Chain<'_>,
        shape: ChunkShape,
        whole: usize,
    ) -> Vec<Vec<Value>> {
        let (vector, half_lanes) = (shape.vector, shape.lanes / 2);
        let sums = chain.sums.len();
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let offset = self.b.append_block_param(body, types::I64);
        let mut accs = Vec::new();
        for _ in 0..2 * sums {
            accs.push(self.b.append_block_param(body, vector));
            self.b.append_block_param(exit, vector);
        }
        let zero = if shape.scalar == types::F64 {
            self.b.ins().f64const(0.0)
        } else {
            self.b.ins().f32const(0.0)
        };
        let zeros = self.b.ins().splat(vector, zero);
        let start = self.b.ins().iconst(types::I64, 0);
        let mut entry_args = vec![BlockArg::Value(start)];
        entry_args.extend(std::iter::repeat_n(BlockArg::Value(zeros), accs.len()));
        self.b.ins().jump(body, &entry_args);
        self.b.switch_to_block(body);
        // Sum `r`'s partials of lanes `0..L/2` are `accs[2r]`, of the other
        // half `accs[2r + 1]`.
        for half in 0..2 {
            let at = self
                .b
                .ins()
                .iadd_imm_s(offset, (half * half_lanes * shape.size) as i64);
            let mut part: Vec<Value> = (0..sums).map(|r| accs[2 * r + half]).collect();
            self.chain_at(chain, vector, at, &mut part);
            for (r, value) in part.into_iter().enumerate() {
                accs[2 * r + half] = value;
            }
        }
        let next = self
            .b
            .ins()
            .iadd_imm_s(offset, (shape.lanes * shape.size) as i64);
        let more =
            self.b
                .ins()
                .icmp_imm_u(IntCC::UnsignedLessThan, next, (whole * shape.size) as i64);
        let mut body_args = vec![BlockArg::Value(next)];
        body_args.extend(accs.iter().map(|v| BlockArg::Value(*v)));
        let exit_args: Vec<BlockArg> = accs.iter().map(|v| BlockArg::Value(*v)).collect();
        self.b.ins().brif(more, body, &body_args, exit, &exit_args);
        self.b.switch_to_block(exit);
        let accs: Vec<Value> = self.b.block_params(exit).to_vec();
        accs.chunks(2)
            .map(|pair| {
                let mut lanes = Vec::with_capacity(shape.lanes);
                for v in pair {
                    for l in 0..half_lanes {
                        lanes.push(self.b.ins().extractlane(*v, l as u8));
                    }
                }
                lanes
            })
            .collect()
    }

    /// The elements of an operand at byte offset `at` of `base`, as `ty`.
    /// They are loaded as integers and reinterpreted: Cranelift folds a
    /// float load into the operation that reads it, and to do so swaps the
    /// operands of `+` and `*`, which changes which of two NaNs the result
    /// keeps (see [`binary`]).
    pub(super) fn element_load(&mut self, ty: Type, base: Value, at: Value) -> Value {
        let address = self.b.ins().iadd(base, at);
        let bits = self.b.ins().load(ty.as_int(), UNALIGNED, address, 0);
        self.b.ins().bitcast(ty, LANES, bits)
    }

    /// Every operation of `chain`, in order, on the elements at byte
    /// offset `at`: a vector of them or one (`ty`); `accs` holds each sum's
    /// partial for these elements (a vector of lanes, or one lane) and is
    /// updated.
    fn chain_at(&mut self, chain: &Chain<'_>, ty: Type, at: Value, accs: &mut [Value]) {
        let wide = ty.is_vector();
        let mut values: HashMap<Var, Value> = HashMap::new();
        let mut reduction = 0;
        for (j, op) in chain.ops.iter().enumerate() {
            let mut operands = Vec::new();
            for a in op.args {
                let value = match (values.get(a), chain.scalars.get(a)) {
                    (Some(v), _) => *v,
                    (None, Some(s)) if wide => s.splat,
                    (None, Some(s)) => s.value,
                    (None, None) => self.element_load(ty, chain.bases[a], at),
                };
                operands.push(value);
            }
            let value = match op.step {
                Step::Sum => {
                    accs[reduction] = self.b.ins().fadd(accs[reduction], operands[0]);
                    reduction += 1;
                    continue;
                }
                Step::Binary(binary_op) => {
                    let args = op.args;
                    let scalar_second = !self.is_array(args[1]) && self.is_array(args[0]);
                    binary(self, binary_op, operands[0], operands[1], scalar_second)
                }
                Step::Neg => self.flip_sign(operands[0]),
            };
            if chain.stored[j] {
                let address = self.b.ins().iadd(chain.bases[&op.dst], at);
                self.b.ins().store(UNALIGNED, value, address, 0);
            }
            values.insert(op.dst, value);
        }
    }
}

/// `a op b`. Which NaN an operation with two keeps is its first
/// operand's, on x86 as Cranelift emits it (no operand being a load, see
/// [`Translator::element_load`]), as the kernels' for two arrays; the
/// kernels' `+` and `*` of an array and a broadcast scalar keep the
/// scalar's, whichever side it is written on (the compiler puts the
/// array's elements, read from memory, second). `scalar_second` says `b` is such a scalar: `+` and `*` then
/// take it first, so that the bits are the kernels' (a test with NaNs of
/// both signs on either side checks it).
pub(super) fn binary(
    t: &mut Translator<'_, '_, '_>,
    op: BinaryOp,
    a: Value,
    b: Value,
    scalar_second: bool,
) -> Value {
    let (a, b) = match op {
        BinaryOp::Add | BinaryOp::Mul if scalar_second => (b, a),
        _ => (a, b),
    };
    let ins = t.b.ins();
    match op {
        BinaryOp::Add => ins.fadd(a, b),
        BinaryOp::Sub => ins.fsub(a, b),
        BinaryOp::Mul => ins.fmul(a, b),
        _ => ins.fdiv(a, b),
    }
}

fn step_of(prim: &Prim) -> Option<Step> {
    Some(match prim {
        Prim::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div)) => {
            Step::Binary(*op)
        }
        Prim::Unary(UnaryOp::Neg) => Step::Neg,
        Prim::Reduce(ReduceOp::Sum) => Step::Sum,
        _ => return None,
    })
}
