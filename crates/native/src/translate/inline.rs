//! Array operations native code does itself, without a call of the host,
//! where the bits are fixed by copying or by IEEE 754:
//!
//! - `a[i]`, `a[i] = v`, `a[i..i + n]` and its `slice_set`: a bounds
//!   check, then loads and stores (an item of an array is copied). An index
//!   or a range out of bounds takes the host's path (`crate::arrays`),
//!   which makes the kernels' fault;
//! - copies of small arrays (`Copy`, parameters, results): loads and
//!   stores of 8-byte words;
//! - elementwise float `+ - * /` and negation on small arrays (a scalar
//!   operand broadcast): one instruction per element, as the kernels'
//!   `scalar::float_add` ... compute it, keeping the kernels' NaN of two
//!   (`loops::binary`);
//! - `[x; N]` of a scalar: a store per element;
//! - `[a, b, ...]` into a small array: a store per scalar item, a copy
//!   per array item, in the items' order;
//! - `dot` and `sum` of small float vectors, in the kernels' order (the
//!   dot form of `autobatch_kernels::gemm`: element `k` to lane partial
//!   `k mod L` from `+0`, a dot's partial chunk at the end padded with
//!   `+0`, the partials added in the fixed pairwise tree), so that every
//!   result that is not NaN has the kernels' bits: each step is one IEEE
//!   754 operation (a fused multiply-add or an addition) on the same
//!   operands. A NaN result is computed again by the host, because which
//!   of two NaNs an addition or a fused multiply-add keeps depends on the
//!   encoding the kernels' compiler picked.
//!
//! "Small" is at most [`INLINE_BYTES`]; larger arrays call the host.

use autobatch_ir::{BinaryOp, EntityRef, Loc, Prim, ReduceOp, UnaryOp, Var};
use autobatch_types::{Dim, ScalarType, TensorType};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};

use super::function::{Translator, FLAGS};
use super::machine_type;
use crate::arrays::byte_size;
use crate::operand;

/// The largest array (in bytes) copied or computed inline.
pub(super) const INLINE_BYTES: usize = 256;

impl Translator<'_, '_, '_> {
    /// Emits `dst = prim(args)` inline if it is one of the module doc's
    /// cases; gives whether it did.
    pub(super) fn inline_array(
        &mut self,
        dst: Option<Var>,
        prim: &Prim,
        args: &[Var],
        loc: Loc,
    ) -> bool {
        let Some(dst) = dst else { return false };
        match prim {
            Prim::Index => self.index(dst, args, loc),
            Prim::IndexSet => self.index_set(dst, args, loc),
            Prim::Slice(len) => self.slice(dst, *len, args, loc),
            Prim::SliceSet => self.slice_set(dst, args, loc),
            Prim::Copy
                if self.is_array(dst)
                    && !self.is_ragged(dst)
                    && self.var_bytes(dst) <= INLINE_BYTES =>
            {
                let (to, from) = (self.addr(dst), self.addr(args[0]));
                self.copy_inline(to, from, self.var_bytes(dst));
                true
            }
            Prim::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div)) => {
                let scalar_second = !self.is_array(args[1]) && self.is_array(args[0]);
                self.float_elementwise(dst, args, |t, a, b| {
                    super::loops::binary(t, *op, a, b, scalar_second)
                })
            }
            Prim::Unary(UnaryOp::Neg) => {
                self.float_elementwise(dst, args, |t, a, _| t.flip_sign(a))
            }
            Prim::Fill(_) => self.fill(dst, args),
            Prim::Stack => self.stack(dst, args),
            Prim::Dot | Prim::Reduce(ReduceOp::Sum) => self.lane_reduction(dst, prim, args, loc),
            _ => false,
        }
    }

    /// The bytes of array variable `v`, known while translating: for one
    /// with a per-member dimension, those of its capacity (its room in the
    /// frame; its copies move the member's own, [`Self::copy_var`]).
    pub(super) fn var_bytes(&self, v: Var) -> usize {
        operand(&self.function.vars[v].ty, self.unit.symbols()).bytes()
    }

    /// Copies `bytes` (a multiple of the element size) from `from` to `to`:
    /// inline when small, else by the host.
    pub(super) fn copy_inline(&mut self, to: Value, from: Value, bytes: usize) {
        if bytes > INLINE_BYTES {
            let n = self.b.ins().iconst(types::I64, bytes as i64);
            self.copy(to, from, n);
            return;
        }
        let mut at = 0;
        for (width, ty) in [(8, types::I64), (4, types::I32), (1, types::I8)] {
            while bytes - at >= width {
                let word = self.b.ins().load(ty, FLAGS, from, at as i32);
                self.b.ins().store(FLAGS, word, to, at as i32);
                at += width;
            }
        }
    }

    /// The index operand as an unsigned 64-bit position (negative indices
    /// become huge, so one unsigned compare checks both bounds).
    fn position(&mut self, index: Var) -> Value {
        let value = self.b.use_var(self.vars[index.index()]);
        if self.function.vars[index].ty.elem == ScalarType::I32 {
            self.b.ins().sextend(types::I64, value)
        } else {
            value
        }
    }

    /// The position of `args[1]` in `args[0]`, checked: a constant within
    /// the bounds (known while translating, see `Translator::constants`)
    /// needs no check; any other position branches to the host's path when
    /// it is out of bounds, which faults and stops the member there
    /// ([`Self::host_fault`]), so the code after the operation has one way
    /// in: no merge for Cranelift to rebuild pure values after, and no
    /// value kept across the host's call.
    ///
    /// The bound is the member's own length of the array's first dimension
    /// (read from the context when each member has its own).
    fn checked_position(&mut self, dst: Var, prim: &Prim, args: &[Var], loc: Loc) -> Value {
        let outer = self.function.vars[args[0]].ty.dims[0];
        let length = self.dim_value(outer);
        let known = match outer {
            Dim::Symbolic(s) if self.unit.lengths.is_per_member(s) => None,
            _ => Some(operand(&self.function.vars[args[0]].ty, self.unit.symbols()).shape[0]),
        };
        if let (Some(c), Some(known)) = (self.constants.get(&args[1]).copied(), known) {
            if c >= 0 && c < known as i128 {
                return self.b.ins().iconst(types::I64, c as i64);
            }
        }
        let position = self.position(args[1]);
        let out = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, position, length);
        self.fault_if(out, dst, prim, args, loc);
        position
    }

    /// The start `args[1]` of a range of `count` items of `args[0]`,
    /// checked as [`Self::checked_position`] checks an index: the range
    /// must end within the array.
    fn checked_range(
        &mut self,
        dst: Var,
        prim: &Prim,
        args: &[Var],
        count: Dim,
        loc: Loc,
    ) -> Value {
        let length = self.dim_value(self.function.vars[args[0]].ty.dims[0]);
        let count = self.dim_value(count);
        let position = self.position(args[1]);
        let past = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, position, length);
        let room = self.b.ins().isub(length, position);
        let short = self.b.ins().icmp(IntCC::UnsignedLessThan, room, count);
        let out = self.b.ins().bor(past, short);
        self.fault_if(out, dst, prim, args, loc);
        position
    }

    /// Branches to the host's path of the operation when `out` holds: it
    /// faults and stops the member there.
    fn fault_if(&mut self, out: Value, dst: Var, prim: &Prim, args: &[Var], loc: Loc) {
        let slow = self.b.create_block();
        let fast = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(out, slow, &[], fast, &[]);
        self.b.switch_to_block(slow);
        self.host_fault(Some(dst), prim, args, loc);
        self.b.switch_to_block(fast);
    }

    /// The bytes of one item of `array` (along its first dimension), if
    /// they are the same for every member.
    fn item_bytes(&self, array: Var) -> Option<usize> {
        let ty = &self.function.vars[array].ty;
        let item = TensorType {
            elem: ty.elem,
            dims: ty.dims[1..].to_vec(),
        };
        if self.unit.lengths.is_ragged(&item) {
            return None;
        }
        let shape = operand(ty, self.unit.symbols());
        Some(shape.bytes() / shape.shape[0].max(1))
    }

    fn index(&mut self, dst: Var, args: &[Var], loc: Loc) -> bool {
        // An item with a per-member length: the host copies it.
        let Some(item) = self.item_bytes(args[0]) else {
            return false;
        };
        if let Some(view) = self.views[dst.index()] {
            // A view: the address of the item, no copy (a position out of
            // bounds takes the host's path, which faults before writing).
            let position = self.checked_position(dst, &Prim::Index, args, loc);
            let offset = self.b.ins().imul_imm_u(position, item as i64);
            let base = self.addr(args[0]);
            let at = self.b.ins().iadd(base, offset);
            self.b.def_var(view, at);
            return true;
        }
        if item > INLINE_BYTES {
            return false;
        }
        let position = self.checked_position(dst, &Prim::Index, args, loc);
        let offset = self.b.ins().imul_imm_u(position, item as i64);
        let base = self.addr(args[0]);
        let at = self.b.ins().iadd(base, offset);
        if self.is_array(dst) {
            let to = self.addr(dst);
            self.copy_inline(to, at, item);
        } else {
            let ty = machine_type(self.function.vars[dst].ty.elem);
            let value = self.b.ins().load(ty, FLAGS, at, 0);
            self.b.def_var(self.vars[dst.index()], value);
        }
        true
    }

    fn index_set(&mut self, dst: Var, args: &[Var], loc: Loc) -> bool {
        let Some(item) = self.item_bytes(args[0]) else {
            return false;
        };
        let whole = self.var_bytes(args[0]);
        let copies = dst != args[0];
        if item > INLINE_BYTES || (copies && (whole > INLINE_BYTES || self.is_ragged(dst))) {
            return false;
        }
        let position = self.checked_position(dst, &Prim::IndexSet, args, loc);
        let to = self.addr(dst);
        if dst != args[0] {
            let from = self.addr(args[0]);
            self.copy_inline(to, from, whole);
        }
        let offset = self.b.ins().imul_imm_u(position, item as i64);
        let at = self.b.ins().iadd(to, offset);
        self.write_item(at, 0, args[2], item);
        true
    }

    /// `a[i..i + n]`: its items copied, where their number and size are the
    /// same for every member.
    fn slice(&mut self, dst: Var, count: Dim, args: &[Var], loc: Loc) -> bool {
        let Some(item) = self.item_bytes(args[0]) else {
            return false;
        };
        if self.is_ragged(dst) {
            return false;
        }
        let position = self.checked_range(dst, &Prim::Slice(count), args, count, loc);
        let offset = self.b.ins().imul_imm_u(position, item as i64);
        let base = self.addr(args[0]);
        let at = self.b.ins().iadd(base, offset);
        let to = self.addr(dst);
        let bytes = self.var_bytes(dst);
        self.copy_inline(to, at, bytes);
        true
    }

    /// `a` with `a[i..i + n] = v`, as [`Self::index_set`] writes one item.
    fn slice_set(&mut self, dst: Var, args: &[Var], loc: Loc) -> bool {
        let Some(item) = self.item_bytes(args[0]) else {
            return false;
        };
        let copies = dst != args[0];
        if self.is_ragged(args[2]) || (copies && (self.is_ragged(dst) || dst == args[2])) {
            return false;
        }
        let count = self.function.vars[args[2]].ty.dims[0];
        let position = self.checked_range(dst, &Prim::SliceSet, args, count, loc);
        let to = self.addr(dst);
        if copies {
            let from = self.addr(args[0]);
            let whole = self.var_bytes(args[0]);
            self.copy_inline(to, from, whole);
        }
        let offset = self.b.ins().imul_imm_u(position, item as i64);
        let at = self.b.ins().iadd(to, offset);
        let from = self.addr(args[2]);
        let bytes = self.var_bytes(args[2]);
        self.copy_inline(at, from, bytes);
        true
    }

    /// Writes item `v` (a scalar, or an array of `bytes`) at `at + offset`.
    fn write_item(&mut self, at: Value, offset: usize, v: Var, bytes: usize) {
        if self.is_array(v) {
            let from = self.addr(v);
            let to = if offset == 0 {
                at
            } else {
                self.b.ins().iadd_imm_u(at, offset as i64)
            };
            self.copy_inline(to, from, bytes);
        } else {
            let value = self.b.use_var(self.vars[v.index()]);
            self.b.ins().store(FLAGS, value, at, offset as i32);
        }
    }

    /// `dst[k] = f(a[k], b[k])` for a small float array `dst`, a scalar
    /// operand standing for every element (`b` unused for unary `f`).
    fn float_elementwise(
        &mut self,
        dst: Var,
        args: &[Var],
        f: impl Fn(&mut Self, Value, Value) -> Value,
    ) -> bool {
        let ty = self.function.vars[dst].ty.elem;
        if !self.is_array(dst)
            || !ty.is_float()
            || self.is_ragged(dst)
            || self.var_bytes(dst) > INLINE_BYTES
        {
            return false;
        }
        let size = byte_size(ty);
        let len = self.var_bytes(dst) / size;
        let machine = machine_type(ty);
        let to = self.addr(dst);
        // Each operand: its base address, or its scalar value.
        let operands: Vec<Result<Value, Value>> = args
            .iter()
            .map(|v| {
                if self.is_array(*v) {
                    Ok(self.addr(*v))
                } else {
                    Err(self.b.use_var(self.vars[v.index()]))
                }
            })
            .collect();
        for k in 0..len {
            let offset = (k * size) as i32;
            let mut values = Vec::with_capacity(2);
            for o in &operands {
                values.push(match o {
                    Ok(base) => {
                        let at = self.b.ins().iconst(types::I64, i64::from(offset));
                        self.element_load(machine, *base, at)
                    }
                    Err(value) => *value,
                });
            }
            let a = values[0];
            let b = values.get(1).copied().unwrap_or(a);
            let value = f(self, a, b);
            self.b.ins().store(FLAGS, value, to, offset);
        }
        true
    }

    /// The element count of `v` when it is a small one-dimensional float
    /// array with the same length for every member.
    fn small_vector(&self, v: Var) -> Option<usize> {
        let ty = &self.function.vars[v].ty;
        if ty.dims.len() != 1 || !ty.elem.is_float() || !self.is_array(v) || self.is_ragged(v) {
            return None;
        }
        let bytes = self.var_bytes(v);
        (bytes <= INLINE_BYTES).then(|| bytes / byte_size(ty.elem))
    }

    /// `dst = [x; N]` of a scalar `x` into a small array: a store per element.
    fn fill(&mut self, dst: Var, args: &[Var]) -> bool {
        if self.is_array(args[0]) || !self.is_array(dst) || self.is_ragged(dst) {
            return false;
        }
        let bytes = self.var_bytes(dst);
        if bytes > INLINE_BYTES {
            return false;
        }
        let size = byte_size(self.function.vars[args[0]].ty.elem);
        let value = self.b.use_var(self.vars[args[0].index()]);
        let to = self.addr(dst);
        for k in 0..bytes / size {
            self.b.ins().store(FLAGS, value, to, (k * size) as i32);
        }
        true
    }

    /// `dst = [a, b, ...]` into a small array of the same length for every
    /// member (so are its items): each item stored or copied to its place,
    /// first to last, as the host's `stack_rows` writes them.
    fn stack(&mut self, dst: Var, args: &[Var]) -> bool {
        if args.is_empty() || !self.is_array(dst) || self.is_ragged(dst) {
            return false;
        }
        let bytes = self.var_bytes(dst);
        if bytes > INLINE_BYTES {
            return false;
        }
        let item = bytes / args.len();
        let to = self.addr(dst);
        for (k, a) in args.iter().enumerate() {
            self.write_item(to, k * item, *a, item);
        }
        true
    }

    /// `dst = dot(a, b)` or `dst = sum(a)` of small float vectors in the
    /// kernels' lane order (see the module doc), the host computing it
    /// again when the result is NaN.
    fn lane_reduction(&mut self, dst: Var, prim: &Prim, args: &[Var], loc: Loc) -> bool {
        let dot = matches!(prim, Prim::Dot);
        let Some(len) = self.small_vector(args[0]) else {
            return false;
        };
        if self.is_array(dst) || (dot && self.small_vector(args[1]) != Some(len)) {
            return false;
        }
        let elem = self.function.vars[args[0]].ty.elem;
        let lanes = if elem == ScalarType::F32 { 8 } else { 4 };
        let (machine, size) = (machine_type(elem), byte_size(elem));
        let bases: Vec<Value> = args.iter().map(|a| self.addr(*a)).collect();
        let zero = self.float_const(elem, 0.0);
        let mut partials = vec![zero; lanes];
        for k in 0..len {
            let at = self.b.ins().iconst(types::I64, (k * size) as i64);
            let x = self.element_load(machine, bases[0], at);
            let lane = &mut partials[k % lanes];
            *lane = if dot {
                let y = self.element_load(machine, bases[1], at);
                self.b.ins().fma(x, y, *lane)
            } else {
                self.b.ins().fadd(*lane, x)
            };
        }
        if dot && len % lanes != 0 {
            // The padding: `fma(+0, +0, p)` is `p + +0`.
            for lane in &mut partials[len % lanes..] {
                *lane = self.b.ins().fadd(*lane, zero);
            }
        }
        let mut width = lanes;
        while width > 1 {
            width /= 2;
            for i in 0..width {
                partials[i] = self.b.ins().fadd(partials[i], partials[i + width]);
            }
        }
        self.b.def_var(self.vars[dst.index()], partials[0]);
        let nan = self
            .b
            .ins()
            .fcmp(FloatCC::Unordered, partials[0], partials[0]);
        let (again, done) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(again);
        self.b.ins().brif(nan, again, &[], done, &[]);
        self.b.switch_to_block(again);
        self.host(Some(dst), prim, args, loc);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        true
    }
}
