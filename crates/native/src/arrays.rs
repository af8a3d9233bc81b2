//! The host side of the operations native code does not inline: every
//! primitive with an array operand or result, statics and random draws.
//!
//! Native code keeps each array in member-local memory (its function's
//! frame area, [`Operand::bytes`] bytes of row-major elements; a `bool` is
//! one byte, 0 or 1) and calls [`array_op`] with the number of the
//! operation (an [`ArrayOp`] of the program's table) and one pointer per
//! operand: the destination first (null for none), then the arguments. A
//! scalar operand is passed through an 8-byte scratch slot.
//!
//! [`array_op`] computes each primitive with the kernels' own per-member
//! functions on slices (the `*_into`, `*_rows` and `*_values` forms that
//! `autobatch_kernels::eval` is built on), so its bits are the reference
//! executor's by construction; a primitive without such a form goes
//! through `eval` itself on tensors copied from and to the frame. Random
//! draws use the member's own `MemberRng`, in the reference's order. A
//! fault (an index out of bounds, an integer division by zero) is left in
//! the run's context and reported by the return code.

use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_ir::{Prim, ReduceOp};
use autobatch_kernels::buffer::{copy, Rows, RowsMut, Values, ValuesMut};
use autobatch_kernels::elementwise::{self, DataOperand, Operand as BoolOperand};
use autobatch_kernels::{layout, linalg, reduce, Fault, PrimContext};
use autobatch_types::{Data, Scalar, ScalarType, Tensor, TensorType};

static NO_HOSTS: autobatch_kernels::Hosts = autobatch_kernels::Hosts::new();

use crate::Context;

/// The type and (resolved) shape of one operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Operand {
    pub ty: ScalarType,
    pub shape: Vec<usize>,
}

impl Operand {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn bytes(&self) -> usize {
        self.len() * byte_size(self.ty)
    }

    fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }
}

/// One operation of the program's table: the primitive, its operands and
/// its result.
#[derive(Clone, Debug)]
pub(crate) struct ArrayOp {
    pub prim: Prim,
    pub args: Vec<Operand>,
    pub result: Option<Operand>,
    /// A float `matvec` of a static matrix or `vecmat` by one: a member
    /// run among others waits here for the product of all members waiting
    /// (`crate::waits`).
    pub batched: bool,
    /// Whether the operation belongs to the backward part of a derivation
    /// (a function that counts no steps): members run together have their
    /// forward parts' products before any backward part's
    /// (`crate::waits`).
    pub backward: bool,
    /// For an operation on values with per-member lengths
    /// (`crate::lengths`): its operands' types, from which each run takes
    /// the member's own shapes (`args` and `result` then hold those of
    /// the capacities).
    pub ragged: Option<RaggedTypes>,
}

/// The types of a ragged operation's operands.
#[derive(Clone, Debug)]
pub(crate) struct RaggedTypes {
    pub args: Vec<TensorType>,
    pub result: Option<TensorType>,
}

impl ArrayOp {
    /// The operation with the shapes of a member whose lengths are
    /// `symbols`: the table's own when it has no ragged operand, else
    /// written into `scratch` (whose memory is reused).
    fn for_member<'s>(
        &'s self,
        symbols: &[u64],
        scratch: &'s mut Option<Box<ArrayOp>>,
    ) -> &'s ArrayOp {
        let Some(types) = &self.ragged else {
            return self;
        };
        let op = scratch.get_or_insert_with(|| {
            Box::new(ArrayOp {
                prim: self.prim.clone(),
                args: Vec::new(),
                result: None,
                batched: false,
                backward: false,
                ragged: None,
            })
        });
        op.prim.clone_from(&self.prim);
        let blank = || Operand {
            ty: ScalarType::Bool,
            shape: Vec::new(),
        };
        op.args.resize_with(types.args.len(), blank);
        for (operand, ty) in op.args.iter_mut().zip(&types.args) {
            crate::operand_into(ty, symbols, operand);
        }
        match &types.result {
            Some(ty) => crate::operand_into(ty, symbols, op.result.get_or_insert_with(blank)),
            None => op.result = None,
        }
        op
    }
}

/// The bytes of one element of `ty` in member memory.
pub(crate) fn byte_size(ty: ScalarType) -> usize {
    ty.byte_size()
}

/// The elements at `ptr`.
///
/// # Safety
/// `ptr` points at `len` initialized, aligned elements of `ty` that are
/// not written while the view lives.
unsafe fn view<'a>(ty: ScalarType, ptr: *const u8, len: usize) -> Values<'a> {
    use std::slice::from_raw_parts as at;
    match ty {
        ScalarType::Bool => Values::Bool(at(ptr.cast(), len)),
        ScalarType::I32 => Values::I32(at(ptr.cast(), len)),
        ScalarType::I64 => Values::I64(at(ptr.cast(), len)),
        ScalarType::Usize => Values::Usize(at(ptr.cast(), len)),
        ScalarType::F32 => Values::F32(at(ptr.cast(), len)),
        ScalarType::F64 => Values::F64(at(ptr.cast(), len)),
    }
}

/// The elements at `ptr`, to write.
///
/// # Safety
/// As [`view`], and nothing else reads or writes them while the view lives.
unsafe fn view_mut<'a>(ty: ScalarType, ptr: *mut u8, len: usize) -> ValuesMut<'a> {
    use std::slice::from_raw_parts_mut as at;
    match ty {
        ScalarType::Bool => ValuesMut::Bool(at(ptr.cast(), len)),
        ScalarType::I32 => ValuesMut::I32(at(ptr.cast(), len)),
        ScalarType::I64 => ValuesMut::I64(at(ptr.cast(), len)),
        ScalarType::Usize => ValuesMut::Usize(at(ptr.cast(), len)),
        ScalarType::F32 => ValuesMut::F32(at(ptr.cast(), len)),
        ScalarType::F64 => ValuesMut::F64(at(ptr.cast(), len)),
    }
}

/// The elements of a tensor as raw bytes (to copy into member memory).
pub(crate) fn data_bytes(data: &Data) -> (*const u8, usize) {
    match data {
        Data::Bool(v) => (v.as_ptr().cast(), v.len()),
        Data::I32(v) => (v.as_ptr().cast(), 4 * v.len()),
        Data::I64(v) => (v.as_ptr().cast(), 8 * v.len()),
        Data::Usize(v) => (v.as_ptr().cast(), 8 * v.len()),
        Data::F32(v) => (v.as_ptr().cast(), 4 * v.len()),
        Data::F64(v) => (v.as_ptr().cast(), 8 * v.len()),
    }
}

/// The elements of a tensor as raw bytes, to write.
pub(crate) fn data_bytes_mut(data: &mut Data) -> *mut u8 {
    match data {
        Data::Bool(v) => v.as_mut_ptr().cast(),
        Data::I32(v) => v.as_mut_ptr().cast(),
        Data::I64(v) => v.as_mut_ptr().cast(),
        Data::Usize(v) => v.as_mut_ptr().cast(),
        Data::F32(v) => v.as_mut_ptr().cast(),
        Data::F64(v) => v.as_mut_ptr().cast(),
    }
}

/// `memcpy` for native code (copies of arrays between frames).
pub(crate) extern "C" fn copy_bytes(dst: *mut u8, src: *const u8, bytes: u64) {
    if !std::ptr::eq(dst, src) {
        // SAFETY: native code passes two frame areas (or a caller's
        // destination) of `bytes` bytes each, distinct or equal.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes as usize) };
    }
}

/// `memset(0)` for native code (the zeros of a caught call's arrays).
pub(crate) extern "C" fn zero_bytes(dst: *mut u8, bytes: u64) {
    // SAFETY: native code passes a frame area of `bytes` bytes.
    unsafe { std::ptr::write_bytes(dst, 0, bytes as usize) };
}

/// Runs operation `op` of the context's table on the operands at `ptrs`
/// (destination, then arguments): 0, or 1 with the fault left in the context.
pub(crate) extern "C" fn array_op(ctx: *mut Context, op: u64, ptrs: *const *mut u8) -> u32 {
    // SAFETY: native code passes its own context, an operation number of
    // its table and one pointer per operand, each to memory of the
    // operand's type and shape (see the module doc).
    let ctx = unsafe { &mut *ctx };
    let table = unsafe { &*ctx.arrays };
    let number = op;
    let entry = &table[op as usize];
    if entry.prim.is_tape() && entry.ragged.is_none() {
        // The gradient's most frequent operations, straight to the tape:
        // they cannot wait or alias (a push faults past the tape's bound).
        let ptrs = unsafe { std::slice::from_raw_parts(ptrs, entry.args.len() + 1) };
        let outcome = unsafe { move_tape(ctx, entry, ptrs[0], &ptrs[1..]) };
        return outcome_code(ctx, outcome);
    }
    // SAFETY: the member's lengths, one per symbol (`Context::symbols`).
    let symbols = unsafe { std::slice::from_raw_parts(ctx.symbols, ctx.symbol_count) };
    let mut member_op = ctx.member_op.take();
    let op = table[op as usize].for_member(symbols, &mut member_op);
    let ptrs = unsafe { std::slice::from_raw_parts(ptrs, op.args.len() + 1) };
    if op.batched && !ctx.yielder.is_null() {
        // SAFETY: a non-null yielder is the member's coroutine's, and this
        // code runs on that coroutine's stack.
        unsafe { crate::waits::wait(&*ctx.yielder, number as u32, ptrs) };
        ctx.member_op = member_op;
        return 0;
    }
    let dst = ptrs[0];
    let aliased = !dst.is_null()
        && ptrs[1..].contains(&dst)
        && !matches!(op.prim, Prim::IndexSet | Prim::Copy);
    let outcome = if aliased {
        // Compute into scratch memory, then copy over the operand.
        let result = op.result.as_ref().expect("a destination has an operand");
        let mut scratch = std::mem::take(&mut ctx.scratch);
        scratch.clear();
        scratch.resize(result.bytes().div_ceil(8), 0);
        let out = scratch.as_mut_ptr().cast::<u8>();
        let outcome = unsafe { apply(ctx, op, out, &ptrs[1..]) };
        if outcome.is_ok() {
            copy_bytes(dst, out, result.bytes() as u64);
        }
        ctx.scratch = scratch;
        outcome
    } else {
        unsafe { apply(ctx, op, dst, &ptrs[1..]) }
    };
    ctx.member_op = member_op;
    outcome_code(ctx, outcome)
}

/// [`array_op`]'s answer: 0, or 1 with the fault left in the context.
fn outcome_code(ctx: &mut Context, outcome: Result<(), Fault>) -> u32 {
    match outcome {
        Ok(()) => 0,
        Err(fault) => {
            ctx.fault = Some(fault);
            1
        }
    }
}

/// Computes `op` into `dst` (distinct from every argument but for
/// `index_set` and `copy`, which may update in place).
///
/// # Safety
/// As [`array_op`]'s operands.
unsafe fn apply(
    ctx: &mut Context,
    op: &ArrayOp,
    dst: *mut u8,
    args: &[*mut u8],
) -> Result<(), Fault> {
    let arg = |k: usize| view(op.args[k].ty, args[k], op.args[k].len());
    let operand = |k: usize| DataOperand {
        values: arg(k),
        broadcast: op.args[k].is_scalar(),
    };
    let result = op.result.as_ref();
    let out = || {
        let r = result.expect("the primitive has a result");
        view_mut(r.ty, dst, r.len())
    };
    match &op.prim {
        Prim::Copy => copy_bytes(dst, args[0], op.args[0].bytes() as u64),
        Prim::LoadStatic(id) => {
            let statics = &*ctx.statics;
            copy(Values::all(&statics[id.0 as usize].data), out());
        }
        Prim::Unary(u) => elementwise::unary_into(*u, arg(0), out()),
        Prim::Binary(b) => elementwise::binary_into(*b, operand(0), operand(1), out())?,
        Prim::Compare(c) => {
            let ValuesMut::Bool(o) = out() else {
                unreachable!("a comparison gives bools")
            };
            elementwise::compare_into(*c, operand(0), operand(1), o);
        }
        Prim::Cast(_) => elementwise::cast_into(arg(0), out()),
        Prim::Select => {
            let Values::Bool(cond) = arg(0) else {
                unreachable!("a condition is bool")
            };
            let cond = BoolOperand {
                values: cond,
                broadcast: op.args[0].is_scalar(),
            };
            elementwise::select_into(cond, arg(1), arg(2), out());
        }
        Prim::Fill(_) => {
            let count = result.map_or(0, |r| r.shape[0]);
            layout::fill_rows(Rows::Shared(arg(0)), count, RowsMut::one(out()));
        }
        Prim::Stack => {
            let items: Vec<Rows<'_>> = (0..args.len()).map(|k| Rows::Shared(arg(k))).collect();
            layout::stack_rows(&items, RowsMut::one(out()));
        }
        Prim::Index | Prim::IndexSet | Prim::Slice(_) | Prim::SliceSet => indexing(op, dst, args)?,
        Prim::Reduce(r) => reduce_into(*r, arg(0), out()),
        Prim::Dot => products(op, arg(0), arg(1), out()),
        Prim::Matvec | Prim::Vecmat | Prim::Matmul => products(op, arg(0), arg(1), out()),
        Prim::Transpose => {
            let (m, k) = (op.args[0].shape[0], op.args[0].shape[1]);
            linalg::transpose_rows(Rows::Shared(arg(0)), m, k, RowsMut::one(out()));
        }
        Prim::Softmax => match (arg(0), out()) {
            (Values::F32(v), ValuesMut::F32(o)) => reduce::softmax_into(v, o),
            (Values::F64(v), ValuesMut::F64(o)) => reduce::softmax_into(v, o),
            _ => return through_eval(ctx, op, dst, args),
        },
        Prim::Uniform => write_scalar(out(), Scalar::F64((*ctx.rng).uniform())),
        Prim::Normal => write_scalar(out(), Scalar::F64((*ctx.rng).normal())),
        Prim::Bernoulli => {
            let Values::F64(p) = arg(0) else {
                return through_eval(ctx, op, dst, args);
            };
            write_scalar(out(), Scalar::Bool((*ctx.rng).bernoulli(p[0])));
        }
        Prim::UniformLike => match out() {
            ValuesMut::F32(o) => (*ctx.rng).uniform_into(o),
            ValuesMut::F64(o) => (*ctx.rng).uniform_into(o),
            _ => return through_eval(ctx, op, dst, args),
        },
        Prim::NormalLike => match out() {
            ValuesMut::F32(o) => (*ctx.rng).normal_into(o),
            ValuesMut::F64(o) => (*ctx.rng).normal_into(o),
            _ => return through_eval(ctx, op, dst, args),
        },
        Prim::StaticAdjoint(adjoint) => {
            // (At most three operands: a row, then two vectors.)
            let mut values = [Values::Bool(&[]); 3];
            let count = args.len().min(3);
            for (k, value) in values.iter_mut().enumerate().take(count) {
                *value = arg(k);
            }
            // The running member's log, which only it touches while it
            // runs (`Runner::run_in_place`).
            let log = &mut *ctx.adjoints;
            log.push(ctx.member, adjoint, &values[..count]);
        }
        Prim::TapePush | Prim::TapePop(_) | Prim::TapeOver | Prim::TapeMark | Prim::TapeSettle => {
            return move_tape(ctx, op, dst, args)
        }
        _ => return through_eval(ctx, op, dst, args),
    }
    Ok(())
}

/// `tape_push`: the operands go onto the member's tape (a `tape_limit`
/// fault when it then holds more than its bound); `tape_pop`: the value
/// pushed last comes off it into `dst`; `tape_over`: whether the tape
/// holds more than its share of the bound, a `bool` byte into `dst`;
/// `tape_mark`: marks the tape (its bytes held, an `i64`, into `dst`);
/// `tape_settle`: settles the latest mark, dropping what was pushed since
/// when the tape holds more than its share (a `bool` byte into `dst`).
///
/// # Safety
/// As [`array_op`]'s operands.
unsafe fn move_tape(
    ctx: &mut Context,
    op: &ArrayOp,
    dst: *mut u8,
    args: &[*mut u8],
) -> Result<(), Fault> {
    use std::slice::{from_raw_parts, from_raw_parts_mut};
    match op.prim {
        Prim::TapeOver => {
            let over = autobatch_ir::prim::tape_over(ctx.tape.held(), ctx.tape_bound);
            *dst = u8::from(over);
            return Ok(());
        }
        Prim::TapeMark => {
            ctx.tape.mark();
            let held = ctx.tape.held() as i64;
            std::ptr::copy_nonoverlapping(held.to_ne_bytes().as_ptr(), dst, 8);
            return Ok(());
        }
        Prim::TapeSettle => {
            let over = autobatch_ir::prim::tape_over(ctx.tape.held(), ctx.tape_bound);
            ctx.tape.settle(over);
            *dst = u8::from(over);
            return Ok(());
        }
        Prim::TapePush => {
            for (operand, at) in op.args.iter().zip(args) {
                ctx.tape.push(from_raw_parts(*at, operand.bytes()));
            }
            ctx.note_tape();
            return autobatch_kernels::tape::within_bound(ctx.tape.held(), ctx.tape_bound);
        }
        _ => {}
    }
    let r = op.result.as_ref().expect("tape_pop has a result");
    if !ctx.tape.pop(from_raw_parts_mut(dst, r.bytes())) {
        unreachable!("a tape popped past its start")
    }
    if !r.is_scalar() {
        count_pop(ctx, r.bytes(), true);
    }
    Ok(())
}

/// The bytes of arrays the process's pops gave native code (`tape_pop`),
/// counted since it began.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoppedBytes {
    /// Copied off the tape into a frame.
    pub copied: u64,
    /// Read in place on the tape ([`tape_pop_in_place`]).
    pub in_place: u64,
}

static POPPED_COPIED: AtomicU64 = AtomicU64::new(0);
static POPPED_IN_PLACE: AtomicU64 = AtomicU64::new(0);

/// The process's [`PoppedBytes`] so far.
pub fn popped_bytes() -> PoppedBytes {
    PoppedBytes {
        copied: POPPED_COPIED.load(Ordering::Relaxed),
        in_place: POPPED_IN_PLACE.load(Ordering::Relaxed),
    }
}

/// Adds a runner's counts to the process's (once, when it is dropped: the
/// pops themselves count in the runner's context).
pub(crate) fn add_popped_bytes(counts: PoppedBytes) {
    POPPED_COPIED.fetch_add(counts.copied, Ordering::Relaxed);
    POPPED_IN_PLACE.fetch_add(counts.in_place, Ordering::Relaxed);
}

fn count_pop(ctx: &mut Context, bytes: usize, copied: bool) {
    let counter = if copied {
        &mut ctx.popped.copied
    } else {
        &mut ctx.popped.in_place
    };
    *counter += bytes as u64;
}

/// `tape_pop` of an array that native code reads in place
/// (`translate::popped`): pops `bytes` bytes off the member's tape and
/// gives their address there when it is aligned to `align`, else copies
/// them to `frame` (the array's place in the frame) and gives that.
pub(crate) extern "C" fn tape_pop_in_place(
    ctx: *mut Context,
    frame: *mut u8,
    bytes: u64,
    align: u64,
) -> *const u8 {
    // SAFETY: native code passes its own context.
    let ctx = unsafe { &mut *ctx };
    let Some(at) = ctx.tape.pop_in_place(bytes as usize) else {
        unreachable!("a tape popped past its start")
    };
    if (at as usize).is_multiple_of(align.max(1) as usize) {
        count_pop(ctx, bytes as usize, false);
        return at;
    }
    // SAFETY: the popped bytes stay on the tape's memory (see
    // `Tape::pop_in_place`); `frame` is the array's place, of `bytes` bytes.
    unsafe { std::ptr::copy_nonoverlapping(at, frame, bytes as usize) };
    count_pop(ctx, bytes as usize, true);
    frame
}

fn write_scalar(out: ValuesMut<'_>, value: Scalar) {
    copy(Values::scalar(&value), out);
}

/// Indexing and slicing, and their updated copies.
///
/// # Safety
/// As [`array_op`]'s operands.
unsafe fn indexing(op: &ArrayOp, dst: *mut u8, args: &[*mut u8]) -> Result<(), Fault> {
    match op.prim {
        Prim::Index => index(op, dst, args),
        Prim::IndexSet => index_set(op, dst, args),
        Prim::Slice(_) => slice(op, dst, args),
        _ => slice_set(op, dst, args),
    }
}

/// `a[i]`: the item at the index, or the kernels' fault.
unsafe fn index(op: &ArrayOp, dst: *mut u8, args: &[*mut u8]) -> Result<(), Fault> {
    let array = &op.args[0];
    let i = view(op.args[1].ty, args[1], 1).integer(0);
    let p = layout::position(i, array.shape[0])?;
    let item = array.bytes() / array.shape[0].max(1);
    copy_bytes(dst, args[0].add(p * item), item as u64);
    Ok(())
}

/// `a` with `a[i] = v`, into `dst` (which may be `a` itself): checked
/// before anything is written, as the kernels do.
unsafe fn index_set(op: &ArrayOp, dst: *mut u8, args: &[*mut u8]) -> Result<(), Fault> {
    let array = &op.args[0];
    let i = view(op.args[1].ty, args[1], 1).integer(0);
    let p = layout::position(i, array.shape[0])?;
    copy_bytes(dst, args[0], array.bytes() as u64);
    let item = op.args[2].bytes();
    copy_bytes(dst.add(p * item), args[2], item as u64);
    Ok(())
}

/// `a[i..i + n]`: the items of the range, or the kernels' fault.
unsafe fn slice(op: &ArrayOp, dst: *mut u8, args: &[*mut u8]) -> Result<(), Fault> {
    let array = &op.args[0];
    let result = op.result.as_ref().expect("slice has a result");
    let i = view(op.args[1].ty, args[1], 1).integer(0);
    let first = layout::range_position(i, result.shape[0], array.shape[0])?;
    let item = array.bytes() / array.shape[0].max(1);
    copy_bytes(dst, args[0].add(first * item), result.bytes() as u64);
    Ok(())
}

/// `a` with `a[i..i + n] = v` into `dst` (distinct from the operands):
/// checked before anything is written, as the kernels do.
unsafe fn slice_set(op: &ArrayOp, dst: *mut u8, args: &[*mut u8]) -> Result<(), Fault> {
    let (array, value) = (&op.args[0], &op.args[2]);
    let i = view(op.args[1].ty, args[1], 1).integer(0);
    let first = layout::range_position(i, value.shape[0], array.shape[0])?;
    let item = array.bytes() / array.shape[0].max(1);
    copy_bytes(dst, args[0], array.bytes() as u64);
    copy_bytes(dst.add(first * item), args[2], value.bytes() as u64);
    Ok(())
}

fn reduce_into(op: ReduceOp, x: Values<'_>, out: ValuesMut<'_>) {
    reduce::reduce_rows(op, Rows::Shared(x), RowsMut::one(out));
}

/// `dot`, `matvec`, `vecmat`, `matmul` with the kernels' `*_values`.
unsafe fn products(op: &ArrayOp, a: Values<'_>, b: Values<'_>, out: ValuesMut<'_>) {
    macro_rules! each {
        ($($variant:ident),*) => {
            match (a, b, out) {
                $((Values::$variant(x), Values::$variant(y), ValuesMut::$variant(o)) => {
                    product(op, x, y, o)
                })*
                (x, y, _) => unreachable!("products of {} and {}", x.ty(), y.ty()),
            }
        };
    }
    each!(Bool, I32, I64, Usize, F32, F64)
}

fn product<T: linalg::Product>(op: &ArrayOp, a: &[T], b: &[T], out: &mut [T]) {
    let shape = |k: usize| &op.args[k].shape;
    // Each product writes every element of `out` (the kernels' `*_values`
    // are these into a fresh vector).
    match op.prim {
        Prim::Dot => out[0] = linalg::dot_values(a, b),
        Prim::Matvec => T::matvec_slices(a, shape(0)[0], shape(0)[1], b, out),
        Prim::Vecmat => T::matmul_slices(a, b, 1, shape(1)[0], shape(1)[1], out),
        Prim::Matmul => T::matmul_slices(a, b, shape(0)[0], shape(0)[1], shape(1)[1], out),
        _ => unreachable!("not a product"),
    }
}

/// The operands of `op`, copied out of member memory into tensors.
///
/// # Safety
/// As [`array_op`]'s operands.
unsafe fn operand_tensors(op: &ArrayOp, args: &[*mut u8]) -> Vec<Tensor> {
    op.args
        .iter()
        .zip(args)
        .map(|(a, p)| {
            let mut data = Data::filled(Scalar::zero(a.ty), a.len());
            copy(view(a.ty, *p, a.len()), ValuesMut::all(&mut data));
            Tensor::new(a.shape.clone(), data)
        })
        .collect()
}

/// Any primitive through `autobatch_kernels::eval` on tensors copied out
/// of member memory, its result copied back.
unsafe fn through_eval(
    ctx: &mut Context,
    op: &ArrayOp,
    dst: *mut u8,
    args: &[*mut u8],
) -> Result<(), Fault> {
    let tensors = operand_tensors(op, args);
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let symbols = std::slice::from_raw_parts(ctx.symbols, ctx.symbol_count);
    // A program that draws nothing runs without a stream (a null
    // pointer): such an operation draws nothing, so any stream will do.
    let mut unused;
    let rng = match ctx.rng.as_mut() {
        Some(rng) => rng,
        None => {
            unused = autobatch_kernels::MemberRng::new(0, 0);
            &mut unused
        }
    };
    // Native code never calls a host primitive (`check`).
    let mut prim_ctx = PrimContext {
        statics: &*ctx.statics,
        symbols,
        rng,
        hosts: &NO_HOSTS,
    };
    let value = autobatch_kernels::eval(&op.prim, &refs, &mut prim_ctx)?;
    if let (Some(value), Some(r)) = (value, &op.result) {
        copy(Values::all(&value.data), view_mut(r.ty, dst, r.len()));
    }
    Ok(())
}
