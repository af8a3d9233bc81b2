//! The primitives on scalars: what native code computes itself (integer
//! arithmetic with the kernels' wrapping and faults, IEEE float `+ - * /`,
//! `sqrt`, `abs`, comparisons, Rust's `as`), and the calls of the shims
//! for the rest (see `crate::shims`).

use autobatch_ir::{BinaryOp, CompareOp, EntityRef, Loc, Prim, TensorType, UnaryOp, Var};
use autobatch_kernels::Fault;
use autobatch_types::{Dim, Scalar, ScalarType};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, InstructionData, Opcode, Type, Value,
};
use cranelift_module::{Linkage, Module};

use super::function::{LowTest, Translator, FLAGS};
use super::{machine_type, ARRAY_OP, TAPE_POP};
use crate::arrays::{ArrayOp, RaggedTypes};
use crate::shims::{self, Shim};
use crate::{check, offsets, operand, Stop};

impl Translator<'_, '_, '_> {
    /// `dst = prim(args)` (no `dst` for `assert`).
    pub(super) fn prim(
        &mut self,
        dst: Option<Var>,
        prim: &Prim,
        args: &[Var],
        loc: Loc,
    ) -> Result<(), String> {
        let types: Vec<ScalarType> = args
            .iter()
            .map(|v| self.function.vars[*v].ty.elem)
            .collect();
        let all_scalar = args.iter().chain(&dst).all(|v| !self.is_array(*v));
        if !check::inline(prim, &types, all_scalar) {
            if all_scalar && self.scalar_tape(dst, prim, args, loc) {
                return Ok(());
            }
            if let (Prim::TapePop(_), Some(d)) = (prim, dst) {
                if self.popped[d.index()] {
                    self.pop_in_place(d);
                    return Ok(());
                }
            }
            if matches!(prim, Prim::LoadStatic(_))
                && dst.is_some_and(|d| self.statics[d.index()].is_some())
            {
                // Read in place (see `Translator::statics`).
                return Ok(());
            }
            if !self.inline_array(dst, prim, args, loc) {
                self.host(dst, prim, args, loc);
            }
            return Ok(());
        }
        if let Some(test) = self.low_bits_test(dst, prim, args) {
            return Ok(test);
        }
        if let (Some(d), Some(quotient)) = (dst, self.exact_division(prim, args)) {
            self.b.def_var(self.vars[d.index()], quotient);
            return Ok(());
        }
        if let (Some(d), Some(product)) = (dst, self.multiply_by_constant(prim, args)) {
            self.b.def_var(self.vars[d.index()], product);
            return Ok(());
        }
        let values: Vec<Value> = args
            .iter()
            .map(|v| self.b.use_var(self.vars[v.index()]))
            .collect();
        let result = match prim {
            Prim::Const(value) => Some(self.constant(*value)),
            Prim::Copy => Some(values[0]),
            // A constant, or the member's own length.
            Prim::SymbolValue(symbol) => Some(self.dim_value(Dim::Symbolic(*symbol))),
            Prim::Unary(op) => Some(self.unary(*op, types[0], values[0])),
            Prim::Binary(op) => Some(self.binary(*op, &types, values[0], values[1], loc)),
            Prim::Compare(op) => Some(self.compare(*op, types[0], values[0], values[1])),
            Prim::Cast(to) => Some(self.cast(types[0], *to, values[0])),
            Prim::Select => Some(self.b.ins().select(values[0], values[1], values[2])),
            Prim::Assert { message } | Prim::Check { message } => {
                let failed = self.b.ins().icmp_imm_s(IntCC::Equal, values[0], 0);
                let fault = match prim {
                    Prim::Check { .. } => Fault::domain_error(message),
                    _ => Fault::assertion_failed(message),
                };
                self.stop_if(failed, Stop::Fault { fault, loc });
                None
            }
            other => {
                return Err(format!(
                    "`{}` at {}:{} is not compiled yet",
                    other.name(),
                    loc.line,
                    loc.column
                ))
            }
        };
        match (dst, result) {
            (Some(dst), Some(value)) => self.b.def_var(self.vars[dst.index()], value),
            (None, None) => {}
            _ => {
                return Err(format!(
                    "`{}` at {}:{}: results and destinations differ",
                    prim.name(),
                    loc.line,
                    loc.column
                ))
            }
        }
        Ok(())
    }

    fn constant(&mut self, value: Scalar) -> Value {
        let ins = self.b.ins();
        match value {
            Scalar::Bool(b) => ins.iconst(types::I8, i64::from(b)),
            Scalar::I32(x) => ins.iconst(types::I32, i64::from(x as u32)),
            Scalar::I64(x) => ins.iconst(types::I64, x),
            Scalar::Usize(x) => ins.iconst(types::I64, x as i64),
            Scalar::F32(x) => ins.f32const(Ieee32::with_bits(x.to_bits())),
            Scalar::F64(x) => ins.f64const(Ieee64::with_bits(x.to_bits())),
        }
    }

    fn unary(&mut self, op: UnaryOp, ty: ScalarType, x: Value) -> Value {
        let float = ty.is_float();
        match op {
            UnaryOp::Neg if float => self.flip_sign(x),
            UnaryOp::Neg => self.b.ins().ineg(x),
            UnaryOp::Not if ty == ScalarType::Bool => self.b.ins().bxor_imm_u(x, 1),
            UnaryOp::Not => self.b.ins().bnot(x),
            UnaryOp::Abs if float => self.b.ins().fabs(x),
            UnaryOp::Abs if ty == ScalarType::Usize => x,
            UnaryOp::Abs => self.b.ins().iabs(x),
            UnaryOp::Sqrt => self.b.ins().sqrt(x),
            UnaryOp::Recip => {
                let one = self.float_const(ty, 1.0);
                self.b.ins().fdiv(one, x)
            }
            UnaryOp::IsNan => self.b.ins().fcmp(FloatCC::Unordered, x, x),
            UnaryOp::IsFinite => {
                let magnitude = self.b.ins().fabs(x);
                let infinity = self.float_const(ty, f64::INFINITY);
                self.b.ins().fcmp(FloatCC::LessThan, magnitude, infinity)
            }
            _ => {
                let shim = shims::unary(op, ty).expect("checked: a shim exists");
                if let Some(value) = self.folded_unary(shim, ty, x) {
                    return value;
                }
                self.call_shim(shim, &[x], machine_type(ty))
            }
        }
    }

    pub(super) fn float_const(&mut self, ty: ScalarType, value: f64) -> Value {
        if ty == ScalarType::F32 {
            self.b.ins().f32const(value as f32)
        } else {
            self.b.ins().f64const(value)
        }
    }

    /// `x % 2^k == 0` (or `!=`) as a test of `x`'s low `k` bits, which is
    /// the same for either sign of `x` and costs one instruction instead of
    /// the remainder's five; `Some` when it applies (and is done).
    fn low_bits_test(&mut self, dst: Option<Var>, prim: &Prim, args: &[Var]) -> Option<()> {
        let (d, test) = self.low_test(dst, prim, args)?;
        let bits = self
            .b
            .ins()
            .band_imm_s(test.remainder.x, test.remainder.mask);
        let cc = if test.zero {
            IntCC::Equal
        } else {
            IntCC::NotEqual
        };
        let test = self.b.ins().icmp_imm_s(cc, bits, 0);
        self.b.def_var(self.vars[d.index()], test);
        Some(())
    }

    /// For `d = (x % 2^k == 0)` (or `!= 0`) with the remainder known
    /// ([`Translator::remainders`]): `d` and what it tests.
    pub(super) fn low_test(
        &self,
        dst: Option<Var>,
        prim: &Prim,
        args: &[Var],
    ) -> Option<(Var, LowTest)> {
        let (Prim::Compare(op @ (CompareOp::Eq | CompareOp::Ne)), Some(d)) = (prim, dst) else {
            return None;
        };
        let is_zero = |v: &Var| self.constants.get(v) == Some(&0);
        let remainder = match args {
            [r, z] if is_zero(z) => *r,
            [z, r] if is_zero(z) => *r,
            _ => return None,
        };
        let remainder = *self.remainders.get(&remainder)?;
        Some((
            d,
            LowTest {
                remainder,
                zero: *op == CompareOp::Eq,
            },
        ))
    }

    /// `x / 2^j` where the arm being translated runs only for an `x` whose
    /// low bits under a mask covering `2^j - 1` are zero
    /// ([`Translator::divisible`]): the division is exact, and an
    /// arithmetic shift gives its quotient for either sign of `x` (the
    /// general signed division by `2^j` rounds toward zero in three
    /// instructions). In a merged branch the arm also runs where its
    /// values are not picked; a shift never faults, and what it gives
    /// there is never used.
    fn exact_division(&mut self, prim: &Prim, args: &[Var]) -> Option<Value> {
        let Prim::Binary(BinaryOp::Div) = prim else {
            return None;
        };
        let (x, mask) = self.divisible?;
        if args[0] != x {
            return None;
        }
        let ty = self.function.vars[args[0]].ty.elem;
        if !matches!(ty, ScalarType::I64 | ScalarType::I32) || self.is_array(args[0]) {
            return None;
        }
        let c = *self.constants.get(&args[1])?;
        if c < 2 || c.count_ones() != 1 || (c - 1) & !i128::from(mask) != 0 {
            return None;
        }
        let a = self.b.use_var(self.vars[x.index()]);
        Some(self.b.ins().sshr_imm_s(a, i64::from(c.trailing_zeros())))
    }

    /// An integer `x * c` with `c` known and `2^k` or `2^k + 1` (`k` from 1
    /// to 3) as shifts and an add, which the machine does in one or two
    /// cycles (an `lea`) where a multiplication takes three: the same
    /// wrapped product.
    fn multiply_by_constant(&mut self, prim: &Prim, args: &[Var]) -> Option<Value> {
        let Prim::Binary(BinaryOp::Mul) = prim else {
            return None;
        };
        let ty = self.function.vars[args[0]].ty.elem;
        if ty.is_float() || self.is_array(args[0]) || self.is_array(args[1]) {
            return None;
        }
        let (x, c) = match (self.constants.get(&args[0]), self.constants.get(&args[1])) {
            (_, Some(c)) => (args[0], *c),
            (Some(c), None) => (args[1], *c),
            (None, None) => return None,
        };
        let bits = i128::from(machine_type(ty).bits());
        let x = self.b.use_var(self.vars[x.index()]);
        let power = |c: i128| {
            (c > 1 && c.count_ones() == 1 && c < 1 << (bits - 1)).then(|| c.trailing_zeros())
        };
        if let Some(k) = power(c) {
            return Some(self.b.ins().ishl_imm_s(x, i64::from(k)));
        }
        match power(c - 1) {
            Some(k @ 1..=3) => {
                let shifted = self.b.ins().ishl_imm_s(x, i64::from(k));
                Some(self.b.ins().iadd(x, shifted))
            }
            _ => None,
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        types: &[ScalarType],
        a: Value,
        b: Value,
        loc: Loc,
    ) -> Value {
        let ty = types[0];
        let float = ty.is_float();
        let ins = self.b.ins();
        match op {
            BinaryOp::Add if float => ins.fadd(a, b),
            BinaryOp::Add => ins.iadd(a, b),
            BinaryOp::Sub if float => ins.fsub(a, b),
            BinaryOp::Sub => ins.isub(a, b),
            BinaryOp::Mul if float => ins.fmul(a, b),
            BinaryOp::Mul => ins.imul(a, b),
            BinaryOp::Div if float => ins.fdiv(a, b),
            BinaryOp::Div => self.integer_division(ty, a, b, loc, false),
            BinaryOp::Rem if !float => self.integer_division(ty, a, b, loc, true),
            BinaryOp::BitAnd => ins.band(a, b),
            BinaryOp::BitOr => ins.bor(a, b),
            BinaryOp::BitXor => ins.bxor(a, b),
            BinaryOp::Shl => ins.ishl(a, b),
            BinaryOp::Shr if ty == ScalarType::Usize => ins.ushr(a, b),
            BinaryOp::Shr => ins.sshr(a, b),
            BinaryOp::Max if ty == ScalarType::Usize => ins.umax(a, b),
            BinaryOp::Max if !float => ins.smax(a, b),
            BinaryOp::Min if ty == ScalarType::Usize => ins.umin(a, b),
            BinaryOp::Min if !float => ins.smin(a, b),
            BinaryOp::Pow => {
                // `as u32` of any integer exponent: its low 32 bits.
                let exponent = if types[1] == ScalarType::I32 {
                    b
                } else {
                    ins.ireduce(types::I32, b)
                };
                let shim = shims::binary(op, ty).expect("checked: a shim exists");
                self.call_shim(shim, &[a, exponent], machine_type(ty))
            }
            _ => {
                let shim = shims::binary(op, ty).expect("checked: a shim exists");
                self.call_shim(shim, &[a, b], machine_type(ty))
            }
        }
    }

    /// Integer `/` or `%`: a zero divisor stops the member with the
    /// kernels' fault; `MIN / -1` wraps to `MIN` and `MIN % -1` is 0
    /// (the machine instruction would trap on both).
    fn integer_division(
        &mut self,
        ty: ScalarType,
        a: Value,
        b: Value,
        loc: Loc,
        remainder: bool,
    ) -> Value {
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
        let fault = if remainder {
            Fault::remainder_by_zero()
        } else {
            Fault::division_by_zero()
        };
        self.stop_if(zero, Stop::Fault { fault, loc });
        let ins = self.b.ins();
        if ty == ScalarType::Usize {
            return if remainder {
                ins.urem(a, b)
            } else {
                ins.udiv(a, b)
            };
        }
        let machine = machine_type(ty);
        let all_ones = if machine == types::I32 {
            i64::from(u32::MAX)
        } else {
            -1
        };
        let minus_one = ins.iconst(machine, all_ones);
        let is_minus_one = self.b.ins().icmp(IntCC::Equal, b, minus_one);
        let one = self.b.ins().iconst(machine, 1);
        let divisor = self.b.ins().select(is_minus_one, one, b);
        if remainder {
            // `x % 1` is 0, as `MIN % -1` is.
            return self.b.ins().srem(a, divisor);
        }
        let quotient = self.b.ins().sdiv(a, divisor);
        let negated = self.b.ins().ineg(a);
        self.b.ins().select(is_minus_one, negated, quotient)
    }

    fn compare(&mut self, op: CompareOp, ty: ScalarType, a: Value, b: Value) -> Value {
        if ty.is_float() {
            let cc = match op {
                CompareOp::Eq => FloatCC::Equal,
                CompareOp::Ne => FloatCC::NotEqual,
                CompareOp::Lt => FloatCC::LessThan,
                CompareOp::Le => FloatCC::LessThanOrEqual,
                CompareOp::Gt => FloatCC::GreaterThan,
                CompareOp::Ge => FloatCC::GreaterThanOrEqual,
            };
            return self.b.ins().fcmp(cc, a, b);
        }
        let signed = matches!(ty, ScalarType::I32 | ScalarType::I64);
        let cc = match (op, signed) {
            (CompareOp::Eq, _) => IntCC::Equal,
            (CompareOp::Ne, _) => IntCC::NotEqual,
            (CompareOp::Lt, true) => IntCC::SignedLessThan,
            (CompareOp::Le, true) => IntCC::SignedLessThanOrEqual,
            (CompareOp::Gt, true) => IntCC::SignedGreaterThan,
            (CompareOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
            (CompareOp::Lt, false) => IntCC::UnsignedLessThan,
            (CompareOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
            (CompareOp::Gt, false) => IntCC::UnsignedGreaterThan,
            (CompareOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
        };
        self.b.ins().icmp(cc, a, b)
    }

    /// Rust's `as` (and "is not zero" into `bool`), as `CastScalar`.
    fn cast(&mut self, from: ScalarType, to: ScalarType, x: Value) -> Value {
        use ScalarType as S;
        if from == to {
            return x;
        }
        let target = machine_type(to);
        let ins = self.b.ins();
        match (from, to) {
            (S::F32 | S::F64, S::Bool) => {
                let zero = self.float_const(from, 0.0);
                self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            (_, S::Bool) => ins.icmp_imm_s(IntCC::NotEqual, x, 0),
            (S::Bool, S::F32 | S::F64) => {
                let wide = ins.uextend(types::I32, x);
                self.b.ins().fcvt_from_uint(target, wide)
            }
            (S::Bool, _) => ins.uextend(target, x),
            (S::F32, S::F64) => ins.fpromote(target, x),
            (S::F64, S::F32) => ins.fdemote(target, x),
            (S::F32 | S::F64, S::Usize) => ins.fcvt_to_uint_sat(target, x),
            (S::F32 | S::F64, _) => ins.fcvt_to_sint_sat(target, x),
            (S::Usize, _) if to.is_float() => ins.fcvt_from_uint(target, x),
            (_, _) if to.is_float() => ins.fcvt_from_sint(target, x),
            _ => {
                let source = machine_type(from);
                if source == target {
                    x
                } else if source.bits() < target.bits() {
                    // Only `i32` is narrower: `as` extends its sign.
                    ins.sextend(target, x)
                } else {
                    ins.ireduce(target, x)
                }
            }
        }
    }

    /// `dst = prim(args)` by the host (`crate::arrays::array_op`): each
    /// operand's pointer (a scalar's through the operand slot), the call,
    /// the fault check, and a scalar result loaded back.
    pub(super) fn host(&mut self, dst: Option<Var>, prim: &Prim, args: &[Var], loc: Loc) {
        let failed = self.host_call(dst, prim, args);
        let types: Vec<&TensorType> = args.iter().map(|a| &self.function.vars[*a].ty).collect();
        if prim.may_fault(&types) {
            let code = self.unit.dynamic_fault(loc);
            self.stop_with_code_if(failed, code);
        }
        if let Some(d) = dst.filter(|d| !self.is_array(*d)) {
            let ty = machine_type(self.function.vars[d].ty.elem);
            let value = self
                .b
                .ins()
                .stack_load(types::I64, ty, self.operand_slot, 0);
            self.b.def_var(self.vars[d.index()], value);
        }
    }

    /// `prim(args)` by the host where it faults (an index out of bounds,
    /// known to be so): the host leaves the kernels' fault in the context
    /// and the member stops, whatever the call returns. The block ends
    /// here, so the code after the operation is reached from its fast path
    /// alone, and nothing live there is kept across this call.
    pub(super) fn host_fault(&mut self, dst: Option<Var>, prim: &Prim, args: &[Var], loc: Loc) {
        self.host_call(dst, prim, args);
        let code = self.unit.dynamic_fault(loc);
        self.stop_with_code(code);
    }

    /// The host's call for `dst = prim(args)`: each operand's pointer in
    /// the pointer slot (a scalar's through the operand slot), then
    /// `crate::arrays::array_op`; gives its return code (non-zero: failed).
    fn host_call(&mut self, dst: Option<Var>, prim: &Prim, args: &[Var]) -> Value {
        let symbols = self.unit.symbols();
        let vars = &self.function.vars;
        let number = self.unit.arrays.len();
        let operands = dst.iter().chain(args);
        // An operation on values of per-member lengths gets its shapes
        // from the member's lengths when it runs.
        let ragged = operands
            .clone()
            .any(|v| self.is_ragged(*v))
            .then(|| RaggedTypes {
                args: args.iter().map(|v| vars[*v].ty.clone()).collect(),
                result: dst.map(|d| vars[d].ty.clone()),
            });
        self.unit.arrays.push(ArrayOp {
            prim: prim.clone(),
            args: args
                .iter()
                .map(|v| operand(&vars[*v].ty, symbols))
                .collect(),
            result: dst.map(|d| operand(&vars[d].ty, symbols)),
            batched: ragged.is_none() && self.static_product(prim, args),
            backward: self.function.uncounted,
            ragged,
        });
        let (operands, pointers) = (self.operand_slot, self.pointer_slot);
        let pointer = match dst {
            None => self.b.ins().iconst(types::I64, 0),
            Some(d) if self.is_array(d) => self.addr(d),
            Some(_) => self.b.ins().stack_addr(types::I64, operands, 0),
        };
        self.b.ins().stack_store(types::I64, pointer, pointers, 0);
        for (k, v) in args.iter().enumerate() {
            let at = 8 * (k as i32 + 1);
            let pointer = if self.is_array(*v) {
                self.addr(*v)
            } else {
                let value = self.b.use_var(self.vars[v.index()]);
                self.b.ins().stack_store(types::I64, value, operands, at);
                self.b.ins().stack_addr(types::I64, operands, at)
            };
            self.b.ins().stack_store(types::I64, pointer, pointers, at);
        }
        let number = self.b.ins().iconst(types::I64, number as i64);
        let table = self.b.ins().stack_addr(types::I64, pointers, 0);
        self.call_import(ARRAY_OP, &[self.ctx, number, table], Some(types::I32))
            .expect("array_op returns a code")
    }

    /// `tape_push` of scalars or `dst = tape_pop` of a scalar in the code
    /// itself, the host called only when the tape's limit or its start is
    /// in the way (see `crate::tape::Tape`); false for other operations.
    fn scalar_tape(&mut self, dst: Option<Var>, prim: &Prim, args: &[Var], loc: Loc) -> bool {
        match (prim, dst) {
            (Prim::TapePush, None) if !args.is_empty() => self.push_scalars(args, loc),
            (Prim::TapePop(_), Some(d)) => self.pop_scalar(d, prim, loc),
            _ => return false,
        }
        true
    }

    /// The bytes of padding after scalar `v` on the tape (each value takes
    /// 8 bytes there).
    fn tape_padding(&self, v: Var) -> i64 {
        8 - self.function.vars[v].ty.elem.byte_size() as i64
    }

    /// `tape_push args` (scalars): stored at the tape's top and the top
    /// moved up when they fit below its limit; else the host pushes them
    /// (growing the tape, counting the member's most, checking its bound).
    fn push_scalars(&mut self, args: &[Var], loc: Loc) {
        let ctx = self.ctx;
        let top = self.b.ins().load(types::I64, FLAGS, ctx, offsets::TAPE_TOP);
        let limit = self
            .b
            .ins()
            .load(types::I64, FLAGS, ctx, offsets::TAPE_LIMIT);
        let end = self.b.ins().iadd_imm_s(top, 8 * args.len() as i64);
        let full = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, limit);
        let (slow, fast, done) = self.tape_paths(full);
        self.b.switch_to_block(slow);
        self.host(None, &Prim::TapePush, args, loc);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(fast);
        for (k, v) in args.iter().enumerate() {
            let value = self.b.use_var(self.vars[v.index()]);
            self.b.ins().store(FLAGS, value, top, 8 * k as i32);
        }
        self.b.ins().store(FLAGS, end, ctx, offsets::TAPE_TOP);
        let padding: i64 = args.iter().map(|v| self.tape_padding(*v)).sum();
        if padding > 0 {
            let held = self
                .b
                .ins()
                .load(types::I64, FLAGS, ctx, offsets::TAPE_PADDING);
            let held = self.b.ins().iadd_imm_s(held, padding);
            self.b.ins().store(FLAGS, held, ctx, offsets::TAPE_PADDING);
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// `dst = tape_pop` (a scalar): loaded from below the tape's top and
    /// the top moved down (with the limit, by the padding no longer held);
    /// the host's pop (which finds nothing to pop) when the tape is empty.
    fn pop_scalar(&mut self, dst: Var, prim: &Prim, loc: Loc) {
        let ctx = self.ctx;
        let ty = self.function.vars[dst].ty.elem;
        let top = self.b.ins().load(types::I64, FLAGS, ctx, offsets::TAPE_TOP);
        let start = self
            .b
            .ins()
            .load(types::I64, FLAGS, ctx, offsets::TAPE_START);
        let at = self.b.ins().iadd_imm_s(top, -8);
        let empty = self.b.ins().icmp(IntCC::UnsignedLessThan, at, start);
        let (slow, fast, done) = self.tape_paths(empty);
        self.b.switch_to_block(slow);
        self.host(Some(dst), prim, &[], loc);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(fast);
        let value = self.b.ins().load(machine_type(ty), FLAGS, at, 0);
        self.b.def_var(self.vars[dst.index()], value);
        self.b.ins().store(FLAGS, at, ctx, offsets::TAPE_TOP);
        let padding = self.tape_padding(dst);
        if padding > 0 {
            for field in [offsets::TAPE_PADDING, offsets::TAPE_LIMIT] {
                let old = self.b.ins().load(types::I64, FLAGS, ctx, field);
                let new = self.b.ins().iadd_imm_s(old, -padding);
                self.b.ins().store(FLAGS, new, ctx, field);
            }
        }
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// The blocks of a tape operation: the host's (cold), taken when
    /// `slow`, the code's own, and the one after both.
    fn tape_paths(&mut self, slow: Value) -> (Block, Block, Block) {
        let (host, code, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.set_cold_block(host);
        self.b.ins().brif(slow, host, &[], code, &[]);
        (host, code, done)
    }

    /// `dst = tape_pop` for an array read in place on the tape
    /// ([`super::popped`]): the host pops it and gives the address to read
    /// it at (on the tape, or `dst`'s place in the frame, where it copied it).
    fn pop_in_place(&mut self, dst: Var) {
        let offset = self.offsets[dst.index()].expect("a popped array has a place");
        let area = self.area.expect("a function with arrays has an area");
        let frame = self.b.ins().stack_addr(types::I64, area, offset as i32);
        let bytes = self.bytes(dst);
        let ty = &self.function.vars[dst].ty;
        let align = self.b.ins().iconst(types::I64, ty.elem.byte_size() as i64);
        let at = self
            .call_import(TAPE_POP, &[self.ctx, frame, bytes, align], Some(types::I64))
            .expect("the pop gives an address");
        let view = self.views[dst.index()].expect("a popped array has a view");
        self.b.def_var(view, at);
    }

    /// Whether `prim(args)` is a float product with a matrix read in place
    /// from a static (the static, or a view of one: `matvec(S, x)`,
    /// `vecmat(x, W[d])`), which members run among others compute together
    /// when they wait at it with the same matrix (`crate::waits`).
    fn static_product(&self, prim: &Prim, args: &[Var]) -> bool {
        let matrix = match prim {
            Prim::Matvec => args[0],
            Prim::Vecmat => args[1],
            _ => return false,
        };
        let ty = &self.function.vars[matrix].ty;
        let in_place = self.statics[matrix.index()].is_some()
            || (self.views[matrix.index()].is_some() && !self.popped[matrix.index()]);
        ty.elem.is_float() && ty.dims.len() == 2 && in_place
    }

    /// The float shim `shim` of one operand applied to `x` now, as a
    /// constant, if `x` is a constant: the shim is the very function the
    /// call would run, so the bits are the call's.
    fn folded_unary(&mut self, shim: Shim, ty: ScalarType, x: Value) -> Option<Value> {
        let inst = self.b.func.dfg.value_def(x).inst()?;
        use InstructionData::{UnaryIeee32, UnaryIeee64};
        use Opcode::{F32const, F64const};
        let data = self.b.func.dfg.insts[inst];
        let ins = self.b.ins();
        // SAFETY: a unary shim of `f64` is an `extern "C" fn(f64) -> f64`,
        // and of `f32` an `extern "C" fn(f32) -> f32`.
        match (ty, data) {
            (
                ScalarType::F64,
                UnaryIeee64 {
                    opcode: F64const,
                    imm,
                },
            ) => {
                let f: extern "C" fn(f64) -> f64 = unsafe { std::mem::transmute(shim.address) };
                let value = f(f64::from_bits(imm.bits()));
                Some(ins.f64const(Ieee64::with_bits(value.to_bits())))
            }
            (
                ScalarType::F32,
                UnaryIeee32 {
                    opcode: F32const,
                    imm,
                },
            ) => {
                let f: extern "C" fn(f32) -> f32 = unsafe { std::mem::transmute(shim.address) };
                let value = f(f32::from_bits(imm.bits()));
                Some(ins.f32const(Ieee32::with_bits(value.to_bits())))
            }
            _ => None,
        }
    }

    /// Calls `shim` on `args`, giving one value of type `ret`.
    fn call_shim(&mut self, shim: Shim, args: &[Value], ret: Type) -> Value {
        self.call_import(shim.name, args, Some(ret))
            .expect("a shim returns a value")
    }

    /// Calls the imported function `name` (a shim or a host function) on
    /// `args`, giving its value if it returns one of type `ret`.
    pub(super) fn call_import(
        &mut self,
        name: &'static str,
        args: &[Value],
        ret: Option<Type>,
    ) -> Option<Value> {
        let func_ref = match self.shim_refs.get(name) {
            Some(r) => *r,
            None => {
                let id = match self.unit.shims.get(name) {
                    Some(id) => *id,
                    None => {
                        let mut sig = self.unit.jit.make_signature();
                        for a in args {
                            let ty = self.b.func.dfg.value_type(*a);
                            sig.params.push(AbiParam::new(ty));
                        }
                        sig.returns.extend(ret.map(AbiParam::new));
                        let id = self
                            .unit
                            .jit
                            .declare_function(name, Linkage::Import, &sig)
                            .expect("an import is declared once, with one signature");
                        self.unit.shims.insert(name, id);
                        id
                    }
                };
                let r = self.unit.jit.declare_func_in_func(id, self.b.func);
                self.shim_refs.insert(name, r);
                r
            }
        };
        let call = self.b.ins().call(func_ref, args);
        self.b.inst_results(call).first().copied()
    }
}
