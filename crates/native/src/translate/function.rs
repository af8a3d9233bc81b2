//! One IR function as one native function: its blocks, steps, counters,
//! calls, stops and returns. The primitives are in [`super::prims`].
//!
//! The IR's variables are mutable registers; each becomes a Cranelift
//! `Variable`, and the frontend builds the SSA form. So does the member's
//! `steps` (left to take): the entry of every IR block takes one, or stops
//! the member at the block's location. Stops branch to one cold block per
//! function that writes the stop code into the context and returns; a
//! caller that sees a non-zero status after a call returns too
//! (`propagate`), unless the call catches and the stop is catchable.
//!
//! Arrays live in the function's *array area*, one explicit stack slot per
//! activation holding every array variable at a fixed offset (their byte
//! sizes are known once the symbols are bound; a per-member dimension's
//! capacity, `crate::lengths`, sizes its place); their operations call the
//! host (`crate::arrays`) with pointers into it.

use std::collections::HashMap;

use autobatch_ir::{
    BinaryOp, Block, BlockData, EntityRef, FuncId, Function, Loc, Op, Prim, Terminator, Var,
};
use autobatch_types::{Dim, Scalar, ScalarType, TensorType};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, Block as NativeBlock, BlockArg, FuncRef, InstBuilder, MemFlagsData, StackSlot,
    StackSlotData, StackSlotKind, Type, Value,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_module::Module;

use super::budget::FastLoop;
use super::loops::Counts;
use super::select::{merges, Merge};
use super::tail::{tail_site, Tail};
use super::{machine_type, Unit, CATCH_BEGIN, CATCH_END, COPY_BYTES, UNCATCHABLE, ZERO_BYTES};
use crate::{offsets, operand, Counting, Interrupts, Segment, Stop};

/// The translation of one function in progress.
pub(super) struct Translator<'u, 'p, 'b> {
    pub unit: &'u mut Unit<'p>,
    pub function: &'p Function,
    pub b: FunctionBuilder<'b>,
    pub vars: Vec<Variable>,
    pub steps: Variable,
    pub ctx: Value,
    /// How much deeper the member may call (a variable: a self tail call
    /// restarts the activation one level deeper, [`super::tail`]).
    pub depth: Variable,
    /// The context's counters (`None` when the code counts nothing).
    pub counters: Option<Value>,
    /// Per IR block, the number of its first segment (its counter).
    pub segment_base: Vec<usize>,
    /// The counters of the segments inside loops, kept in registers while
    /// the function runs and added to the context's at every exit (one
    /// memory update per segment execution would chain each iteration of a
    /// loop to the previous one through memory): segment number, variable,
    /// by segment number.
    pub local_counts: Vec<(usize, Variable)>,
    /// Takes the stop code: writes it, then returns.
    pub stop_block: NativeBlock,
    /// Returns at once (the status is already set).
    pub propagate: NativeBlock,
    pub blocks: Vec<NativeBlock>,
    pub shim_refs: HashMap<&'static str, FuncRef>,
    pub callee_refs: HashMap<FuncId, FuncRef>,
    /// The array area, and each array variable's offset in it.
    pub area: Option<StackSlot>,
    pub offsets: Vec<Option<u32>>,
    /// Per variable: the static it always holds, if every definition of
    /// it loads that one static (then it is read in place, never copied).
    pub statics: Vec<Option<u32>>,
    /// 8 bytes per operand of a host operation (destination first): the
    /// scalar operands' values, and the operands' pointers.
    pub operand_slot: StackSlot,
    pub pointer_slot: StackSlot,
    /// Where to write each array result (the caller's pointers).
    pub result_ptrs: Vec<Value>,
    /// Per variable: the caller's pointer, for an array parameter that no
    /// operation of the function writes (read in place, never copied).
    pub in_place: Vec<Option<Value>>,
    /// Per variable: for a *view* (see [`views`]), the variable holding
    /// the address of the elements it reads in place; for an array popped
    /// in place (`popped`), the address its pop gave.
    pub views: Vec<Option<Variable>>,
    /// Per variable: whether it is read in place on the tape
    /// ([`super::popped`]).
    pub popped: Vec<bool>,
    /// The integer variables whose value is known at this point of the
    /// block being translated: constants, and `+ - *` of them (with the
    /// type's wrapping); an index by one within bounds needs no check.
    pub constants: HashMap<Var, i128>,
    /// The integer variables that hold `x % 2^k` at this point of the
    /// block: `x`'s value then and `2^k - 1`. Such a remainder compared
    /// with 0 is the test of `x`'s low bits (for either sign of `x`).
    pub remainders: HashMap<Var, Remainder>,
    /// The `bool` variables that hold such a test of `x`'s low bits at
    /// this point of the block.
    pub low_tests: HashMap<Var, LowTest>,
    /// Inside the arm of a merged branch whose values are picked only
    /// where `x`'s low bits under the mask are zero: the variable `x` (as
    /// long as it keeps that value) and the mask. `x / 2^j` there is
    /// exact: one arithmetic shift.
    pub divisible: Option<(Var, i64)>,
    /// Per block: the branch it ends with, merged into selects (see
    /// [`super::select`]).
    pub merges: Vec<Option<Merge>>,
    /// Per block: whether it is an arm of a merge (translated inside its
    /// branch's block, not on its own).
    pub absorbed: Vec<bool>,
    /// The function's self tail call, made a jump ([`super::tail`]).
    pub tail: Option<Tail>,
    /// The function's simple loops, with a fast copy each
    /// ([`super::budget`]).
    pub fast: Vec<FastLoop>,
    /// While a fast copy is translated: its loop's number in `fast`.
    pub in_fast: Option<usize>,
    /// How often each variable is defined and read ([`super::loops`]).
    pub fuse_counts: Counts,
}

/// A catching call's status after the call, and where it goes on.
struct Caught {
    /// The status the callee left (zero: it returned).
    status: Value,
    /// Where the call's results are taken.
    ok: NativeBlock,
    /// Where a caught stop (or no depth left) is recovered from.
    recover: NativeBlock,
    /// Whether the callee records on a tape of its own while it runs
    /// (`CATCH_BEGIN`, `CATCH_END`).
    aside: bool,
}

/// What a variable holding `x % 2^k` is known to hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Remainder {
    /// `x`'s value then.
    pub x: Value,
    /// `2^k - 1`.
    pub mask: i64,
    /// The variable `x`, while it still holds that value.
    pub var: Option<Var>,
}

/// What a `bool` variable holding `x % 2^k == 0` (or `!= 0`) is known to
/// hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LowTest {
    pub remainder: Remainder,
    /// Whether the variable is true when the low bits are zero (`== 0`)
    /// rather than when they are not (`!= 0`).
    pub zero: bool,
}

/// Where a function keeps its arrays: each array variable's offset (8-byte
/// aligned) and the area's size.
pub(crate) struct ArrayArea {
    pub offsets: Vec<Option<u32>>,
    pub bytes: usize,
    /// Per variable: whether it is a view (see [`views`]), which takes no room.
    pub views: Vec<bool>,
}

/// The array area of `function` when the symbols are `symbols`.
///
/// Arrays read in place take no room: a static's (see
/// [`Translator::statics`]) and a parameter no operation writes.
pub(crate) fn array_area(function: &Function, symbols: &[u64]) -> ArrayArea {
    let statics = static_vars(function);
    let written = written(function);
    let views = views(function, &statics);
    let mut in_place = statics
        .iter()
        .zip(&views)
        .map(|(s, view)| s.is_some() || *view)
        .collect::<Vec<_>>();
    for p in &function.params {
        in_place[p.index()] |= !written[p.index()];
    }
    let mut bytes = 0;
    let offsets = function
        .vars
        .values()
        .zip(in_place)
        .map(|(v, in_place)| {
            if v.ty.is_scalar() || in_place {
                return None;
            }
            let at = bytes;
            bytes += operand(&v.ty, symbols).bytes().next_multiple_of(8);
            Some(at as u32)
        })
        .collect();
    ArrayArea {
        offsets,
        bytes,
        views,
    }
}

/// Per variable of `function`: whether it is a *view*, an array that every
/// definition takes as an item of a static or of another view (`row =
/// Y[i]` with `Y` a static) and that nothing else defines (no parameter,
/// no `index_set` into it): its elements are never written, so it is read
/// in place, where the item lies in the static's data (which no run
/// changes), instead of being copied out.
fn views(function: &Function, statics: &[Option<u32>]) -> Vec<bool> {
    let count = function.vars.len();
    let mut view: Vec<bool> = function.vars.values().map(|v| !v.ty.is_scalar()).collect();
    for p in &function.params {
        view[p.index()] = false;
    }
    let mut defined = vec![false; count];
    loop {
        let mut changed = false;
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            let (dsts, source): (&[Var], Option<Var>) = match op {
                Op::Prim {
                    dst: Some(d),
                    prim: Prim::Index,
                    args,
                    ..
                } => (std::slice::from_ref(d), Some(args[0])),
                Op::Prim { dst, .. } => (dst.as_slice(), None),
                Op::Call { dsts, .. } | Op::Fork { dsts, .. } => (dsts.as_slice(), None),
            };
            for d in dsts {
                defined[d.index()] = true;
                let from_view =
                    source.is_some_and(|a| statics[a.index()].is_some() || view[a.index()]);
                if view[d.index()] && !from_view {
                    view[d.index()] = false;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    view.iter().zip(defined).map(|(v, d)| *v && d).collect()
}

/// Per variable of `function`: the static it holds, if it is an array
/// that only `LoadStatic` of that one static defines (no parameter, no
/// other destination).
fn static_vars(function: &Function) -> Vec<Option<u32>> {
    arrays_defined_only_by(function, |prim| match prim {
        Prim::LoadStatic(id) => Some(id.0),
        _ => None,
    })
}

/// Per variable of `function`: `Some(k)` when it is an array, no
/// parameter, and every operation defining it is a primitive that `key`
/// maps to the same `Some(k)`.
pub(super) fn arrays_defined_only_by<K: Copy + PartialEq>(
    function: &Function,
    key: impl Fn(&Prim) -> Option<K>,
) -> Vec<Option<K>> {
    let count = function.vars.len();
    let mut found: Vec<Option<K>> = vec![None; count];
    let mut other = vec![false; count];
    for p in &function.params {
        other[p.index()] = true;
    }
    for op in function.blocks.values().flat_map(|b| &b.ops) {
        match op {
            Op::Prim {
                dst: Some(d), prim, ..
            } => {
                let i = d.index();
                match (key(prim), found[i]) {
                    (Some(k), Some(old)) if old != k => other[i] = true,
                    (Some(k), _) => found[i] = Some(k),
                    (None, _) => other[i] = true,
                }
            }
            Op::Prim { dst: None, .. } => {}
            Op::Call { dsts, .. } | Op::Fork { dsts, .. } => {
                for d in dsts {
                    other[d.index()] = true;
                }
            }
        }
    }
    function
        .vars
        .values()
        .zip(found.into_iter().zip(other))
        .map(|(v, (k, other))| k.filter(|_| !other && !v.ty.is_scalar()))
        .collect()
}

/// Per variable of `function`: whether an operation writes it (it is the
/// destination of a primitive, a call or a fork).
fn written(function: &Function) -> Vec<bool> {
    let mut written = vec![false; function.vars.len()];
    for op in function.blocks.values().flat_map(|b| &b.ops) {
        match op {
            Op::Prim { dst, .. } => {
                if let Some(d) = dst {
                    written[d.index()] = true;
                }
            }
            Op::Call { dsts, .. } | Op::Fork { dsts, .. } => {
                for d in dsts {
                    written[d.index()] = true;
                }
            }
        }
    }
    written
}

/// The most operands (destination included) of one op of `function`.
fn max_operands(function: &Function) -> usize {
    function
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .map(|op| match op {
            Op::Prim { args, .. } => args.len() + 1,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
        .max(1)
}

pub(super) fn explicit_slot(b: &mut FunctionBuilder<'_>, bytes: usize) -> StackSlot {
    b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        bytes as u32,
        4,
    ))
}

pub(super) const FLAGS: MemFlagsData = MemFlagsData::trusted();

/// Memory flags for what no code writes while a member runs (the
/// context's table of static data, and the statics themselves): such loads
/// are pure to Cranelift, so a loop reads a static's address once, not at
/// every element.
pub(super) const FIXED: MemFlagsData = FLAGS.with_readonly().with_can_move();

/// Reinterpreting a value's bits as another type of the same width, lanes
/// in their order.
pub(super) const LANES: MemFlagsData =
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);

/// Translates function `id` of the unit's program into `b`.
pub(super) fn translate(
    unit: &mut Unit<'_>,
    id: FuncId,
    mut b: FunctionBuilder<'_>,
) -> Result<(), String> {
    let function = &unit.program.functions[id];
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let vars: Vec<Variable> = function
        .vars
        .values()
        .map(|v| b.declare_var(machine_type(v.ty.elem)))
        .collect();
    let steps = b.declare_var(types::I64);
    b.def_var(steps, params[2]);
    let depth = b.declare_var(types::I64);
    b.def_var(depth, params[1]);
    let area = array_area(function, unit.symbols());
    let popped = super::popped::popped(function, unit.quiet[id.index()]);
    let has_arrays = function.vars.values().any(|v| !v.ty.is_scalar());
    let area_slot = has_arrays.then(|| explicit_slot(&mut b, area.bytes.max(8)));
    let operands = 8 * max_operands(function);
    let operand_slot = explicit_slot(&mut b, operands);
    let pointer_slot = explicit_slot(&mut b, operands);
    let result_ptrs = params[3 + function.params.len()..].to_vec();
    let ctx = params[0];
    let counters = (unit.counting == Counting::Kept)
        .then(|| b.ins().load(types::I64, FLAGS, ctx, offsets::COUNTERS));
    let stop_block = b.create_block();
    b.append_block_param(stop_block, types::I32);
    b.set_cold_block(stop_block);
    let propagate = b.create_block();
    b.set_cold_block(propagate);
    let blocks = function.blocks.keys().map(|_| b.create_block()).collect();
    let (segment_base, local_counts) = register_segments(unit, id, function, &mut b);
    let mut t = Translator {
        unit,
        function,
        b,
        vars,
        steps,
        ctx,
        depth,
        counters,
        segment_base,
        local_counts,
        stop_block,
        propagate,
        blocks,
        shim_refs: HashMap::new(),
        callee_refs: HashMap::new(),
        area: area_slot,
        offsets: area.offsets,
        statics: static_vars(function),
        operand_slot,
        pointer_slot,
        result_ptrs,
        in_place: vec![None; function.vars.len()],
        views: Vec::new(),
        popped,
        constants: HashMap::new(),
        remainders: HashMap::new(),
        low_tests: HashMap::new(),
        divisible: None,
        merges: Vec::new(),
        absorbed: vec![false; function.blocks.len()],
        tail: None,
        fast: Vec::new(),
        in_fast: None,
        fuse_counts: Counts::of(function),
    };
    t.merge_branches();
    t.declare_views(&area.views);
    t.guard_stack();
    t.bind_params(&params[3..]);
    t.plan_tail_call(id, params[1]);
    // A tail call's restart jumps to the entry, which may head a loop.
    if t.tail.is_none() {
        t.plan_fast_loops();
    }
    let first = t.target(Function::ENTRY);
    t.b.ins().jump(first, &[]);
    for (block, data) in function.blocks.iter() {
        if !t.absorbed[block.index()] {
            t.block_into(t.blocks[block.index()], block, data)?;
        }
    }
    t.fast_copies()?;
    t.exits();
    let Translator { unit, mut b, .. } = t;
    b.seal_all_blocks();
    b.finalize(unit.jit.target_config());
    Ok(())
}

impl Translator<'_, '_, '_> {
    /// Finds the branches whose arms merge into straight-line code
    /// ([`merges`]); their arms are absorbed, translated with the branch.
    fn merge_branches(&mut self) {
        self.merges = merges(self.function);
        self.unit.merged_branches += self.merges.iter().flatten().count();
        let arms = self
            .merges
            .iter()
            .flatten()
            .flat_map(|m| [m.then_arm, m.else_arm]);
        for arm in arms.flatten() {
            self.absorbed[arm.index()] = true;
        }
    }

    /// Binds the parameters to the function's arguments `values`: an array
    /// the function never writes is read in place.
    fn bind_params(&mut self, values: &[Value]) {
        let function = self.function;
        let written = written(function);
        for (p, value) in function.params.iter().zip(values) {
            if self.is_array(*p) && !written[p.index()] {
                self.in_place[p.index()] = Some(*value);
            } else {
                self.set_from(*p, *value);
            }
        }
    }

    /// Plans the function's self tail call, if it has one, with the depth
    /// `depth` it restarts with. Code that polls for interrupts holds its
    /// steps in slices, which the frames a tail call leaves out would have
    /// to pay for one by one: it keeps its calls.
    fn plan_tail_call(&mut self, id: FuncId, depth: Value) {
        if self.unit.interrupts != Interrupts::Ignored {
            return;
        }
        let function = self.function;
        let site = tail_site(function, id).filter(|site| !self.absorbed[site.block.index()]);
        self.tail = site.map(|site| Tail::new(site, function, depth, &mut self.b));
        self.unit.tail_calls += usize::from(self.tail.is_some());
    }
}

/// The integer value `op` gives its destination, when `constants` (the
/// values known before it) determine it: a constant, a copy, or `+ - *`
/// wrapped to the destination's type.
pub(super) fn known_constant(
    function: &Function,
    constants: &HashMap<Var, i128>,
    op: &Op,
) -> Option<i128> {
    let Op::Prim {
        dst: Some(d),
        prim,
        args,
        ..
    } = op
    else {
        return None;
    };
    let value = |v: &Var| constants.get(v).copied();
    let wide = match prim {
        Prim::Const(Scalar::Usize(c)) => *c as i128,
        Prim::Const(Scalar::I64(c)) => *c as i128,
        Prim::Const(Scalar::I32(c)) => *c as i128,
        Prim::Copy => value(&args[0])?,
        Prim::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul)) => {
            let (a, b) = (value(&args[0])?, value(&args[1])?);
            match op {
                BinaryOp::Add => a.wrapping_add(b),
                BinaryOp::Sub => a.wrapping_sub(b),
                _ => a.wrapping_mul(b),
            }
        }
        _ => return None,
    };
    // Wrap as the destination's type does.
    Some(match function.vars[*d].ty.elem {
        ScalarType::Usize => wide as u64 as i128,
        ScalarType::I64 => wide as i64 as i128,
        ScalarType::I32 => wide as i32 as i128,
        _ => return None,
    })
}

/// Whether an operation may stop the member (so that the operations after
/// it in its block may not run): a call, a fork, or a primitive that may
/// fault ([`Prim::may_fault_knowing`], with the integer scalars known from
/// `constants`: an integer division by a known divisor other than zero,
/// or an index known within a fixed length, cannot).
pub(super) fn may_stop(function: &Function, op: &Op, constants: &HashMap<Var, i128>) -> bool {
    match op {
        Op::Prim { prim, args, .. } => {
            let types: Vec<&TensorType> = args.iter().map(|a| &function.vars[*a].ty).collect();
            let constant = |i: usize| {
                let v = args.get(i)?;
                function.vars[*v]
                    .ty
                    .is_scalar()
                    .then(|| constants.get(v).copied())
                    .flatten()
            };
            prim.may_fault_knowing(&types, constant)
        }
        Op::Call { .. } | Op::Fork { .. } => true,
    }
}

/// The block's segments with user operations: (first op, user ops).
pub(super) fn segments(function: &Function, data: &BlockData) -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    let (mut start, mut ops) = (0, Vec::new());
    let mut constants = HashMap::new();
    for (i, op) in data.ops.iter().enumerate() {
        if let Op::Prim { prim, .. } = op {
            if !prim.is_bookkeeping() {
                ops.push(i);
            }
        }
        if may_stop(function, op, &constants) {
            out.push((start, std::mem::take(&mut ops)));
            start = i + 1;
        }
        let known = known_constant(function, &constants, op);
        for d in op.defs() {
            constants.remove(d);
        }
        if let (Some(d), Some(value)) = (op.defs().first(), known) {
            constants.insert(*d, value);
        }
    }
    out.push((start, ops));
    out.retain(|(_, ops)| !ops.is_empty());
    out
}

/// Registers the segments of `function`'s blocks in the unit (block by
/// block, in order; each gets the next counter) and declares a variable,
/// zero on entry, for each segment in a block that is part of a loop.
/// Gives each block's first segment number and the variables.
fn register_segments(
    unit: &mut Unit<'_>,
    id: FuncId,
    function: &Function,
    b: &mut FunctionBuilder<'_>,
) -> (Vec<usize>, Vec<(usize, Variable)>) {
    let looping = in_loops(function);
    let mut bases = Vec::with_capacity(function.blocks.len());
    let mut locals = Vec::new();
    for (block, data) in function.blocks.iter() {
        bases.push(unit.segments.len());
        for (_, ops) in segments(function, data) {
            if looping[block.index()] && unit.counting == Counting::Kept {
                let var = b.declare_var(types::I64);
                let zero = b.ins().iconst(types::I64, 0);
                b.def_var(var, zero);
                locals.push((unit.segments.len(), var));
            }
            unit.segments.push(Segment {
                function: id,
                block,
                ops,
            });
        }
    }
    (bases, locals)
}

/// Per block of `function`: whether it lies on a cycle of the control-flow
/// graph (a loop's blocks).
fn in_loops(function: &Function) -> Vec<bool> {
    let successors: Vec<Vec<Block>> = function
        .blocks
        .values()
        .map(|d| d.term.successors())
        .collect();
    (0..successors.len())
        .map(|start| {
            let mut seen = vec![false; successors.len()];
            let mut stack = successors[start].clone();
            while let Some(b) = stack.pop() {
                if b.index() == start {
                    return true;
                }
                if !std::mem::replace(&mut seen[b.index()], true) {
                    stack.extend(&successors[b.index()]);
                }
            }
            false
        })
        .collect()
}

impl Translator<'_, '_, '_> {
    /// Translates `block` (`data`) into the native block `native`.
    pub(super) fn block_into(
        &mut self,
        native: NativeBlock,
        block: Block,
        data: &BlockData,
    ) -> Result<(), String> {
        self.b.switch_to_block(native);
        self.take_step(data);
        self.constants.clear();
        self.remainders.clear();
        self.low_tests.clear();
        let tail_call = self.tail_call_in(block);
        self.operations_in(block, data, 0..tail_call.unwrap_or(data.ops.len()), None)?;
        if tail_call.is_some() {
            self.restart();
            return Ok(());
        }
        match self.merges[block.index()].clone() {
            Some(merge) => self.merged_branch(&merge),
            None => {
                self.terminate(&data.term);
                Ok(())
            }
        }
    }

    /// `block`'s operations (`data`'s), each segment's counter growing by
    /// one, or by `taken` (0 or 1) for an arm run whether taken or not.
    pub(super) fn operations(
        &mut self,
        block: Block,
        data: &BlockData,
        taken: Option<Value>,
    ) -> Result<(), String> {
        self.operations_in(block, data, 0..data.ops.len(), taken)
    }

    /// The operations of `block` at positions `range`, which starts where
    /// a segment may start (the block's first operation, or the one after
    /// a call). The constants known are those of the range only.
    pub(super) fn operations_in(
        &mut self,
        block: Block,
        data: &BlockData,
        range: std::ops::Range<usize>,
        taken: Option<Value>,
    ) -> Result<(), String> {
        let mut segments = segments(self.function, data)
            .into_iter()
            .enumerate()
            .filter(|(_, (start, _))| *start >= range.start)
            .peekable();
        // Each operation of a fused group runs in its group's loop, emitted
        // at the group's last operation, and the operations postponed past
        // the loop right after it (`super::loops`).
        let groups = self.fused_groups(data, range.start..range.end);
        let mut fused: HashMap<usize, Fused> = HashMap::new();
        for (g, group) in groups.iter().enumerate() {
            let last = *group.members.last().expect("a group has members");
            for m in &group.members {
                fused.insert(
                    *m,
                    if *m == last {
                        Fused::Loop(g)
                    } else {
                        Fused::Member
                    },
                );
            }
            for p in &group.postponed {
                fused.insert(*p, Fused::Postponed);
            }
        }
        for (i, op) in data
            .ops
            .iter()
            .enumerate()
            .take(range.end)
            .skip(range.start)
        {
            if let Some((k, _)) = segments.next_if(|(_, (start, _))| *start == i) {
                self.count(self.segment_base[block.index()] + k, taken);
            }
            match fused.get(&i) {
                Some(Fused::Loop(g)) => {
                    self.fused_loop(data, &groups[*g]);
                    self.forget_defs(op);
                    for p in &groups[*g].postponed {
                        self.operation(&data.ops[*p])?;
                    }
                }
                Some(Fused::Member) => self.forget_defs(op),
                Some(Fused::Postponed) => {}
                None => self.operation(op)?,
            }
        }
        Ok(())
    }

    /// Translates one operation, and updates what is known of the
    /// variables it defines.
    fn operation(&mut self, op: &Op) -> Result<(), String> {
        let known = known_constant(self.function, &self.constants, op);
        let remainder = self.power_of_two_remainder(op);
        let low_test = match op {
            Op::Prim {
                dst, prim, args, ..
            } => self.low_test(*dst, prim, args),
            _ => None,
        };
        match op {
            Op::Prim {
                dst,
                prim,
                args,
                loc,
            } => self.prim(*dst, prim, args, *loc)?,
            Op::Call {
                dsts,
                callee,
                args,
                loc,
                catch,
            } => self.call(dsts, *callee, args, *loc, *catch),
            Op::Fork {
                dsts,
                args,
                instances,
                loc,
                tape,
            } => self.fork(super::fork::ForkSite {
                dsts,
                args,
                instances,
                loc: *loc,
                tape: *tape,
            }),
        }
        self.forget_defs(op);
        if let (Some(d), Some(value)) = (op.defs().first(), known) {
            self.constants.insert(*d, value);
        }
        if let Some((d, source)) = remainder {
            self.remainders.insert(d, source);
        }
        if let Some((d, test)) = low_test {
            self.low_tests.insert(d, test);
        }
        Ok(())
    }

    /// Forgets what was known of the variables `op` defines.
    fn forget_defs(&mut self, op: &Op) {
        for d in op.defs() {
            self.constants.remove(d);
            self.remainders.remove(d);
            self.low_tests.remove(d);
            self.forget_value_of(*d);
        }
    }

    /// `x`, redefined, no longer holds the value the facts about its low
    /// bits are about.
    fn forget_value_of(&mut self, x: Var) {
        let facts = self
            .remainders
            .values_mut()
            .chain(self.low_tests.values_mut().map(|t| &mut t.remainder));
        for fact in facts {
            if fact.var == Some(x) {
                fact.var = None;
            }
        }
        if self.divisible.is_some_and(|(var, _)| var == x) {
            self.divisible = None;
        }
    }

    /// For `d = x % c` with `c` a known power of two: `d`, and `x`'s
    /// value with the mask `c - 1`.
    fn power_of_two_remainder(&mut self, op: &Op) -> Option<(Var, Remainder)> {
        let Op::Prim {
            dst: Some(d),
            prim: Prim::Binary(BinaryOp::Rem),
            args,
            ..
        } = op
        else {
            return None;
        };
        if !self.function.vars[*d].ty.is_scalar() || self.function.vars[*d].ty.elem.is_float() {
            return None;
        }
        let divisor = *self.constants.get(&args[1])?;
        if divisor < 1 || divisor.count_ones() != 1 || divisor > i64::MAX as i128 {
            return None;
        }
        let x = self.b.use_var(self.vars[args[0].index()]);
        Some((
            *d,
            Remainder {
                x,
                mask: divisor as i64 - 1,
                var: Some(args[0]),
            },
        ))
    }

    fn terminate(&mut self, term: &Terminator) {
        match term {
            Terminator::Jump(target) => {
                let target = self.target(*target);
                self.b.ins().jump(target, &[]);
            }
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.b.use_var(self.vars[cond.index()]);
                // In a fast copy, the path that stays in the loop is the
                // fall-through (the else successor) and leaving it the jump.
                let leaves =
                    self.stays_in_fast_loop(*then_block) && !self.stays_in_fast_loop(*else_block);
                let (then_native, else_native) =
                    (self.target(*then_block), self.target(*else_block));
                if leaves {
                    let not_c = self.b.ins().icmp_imm_u(IntCC::Equal, c, 0);
                    self.b.ins().brif(not_c, else_native, &[], then_native, &[]);
                } else {
                    self.b.ins().brif(c, then_native, &[], else_native, &[]);
                }
            }
            Terminator::Return(values) => {
                let mut scalars = Vec::new();
                let mut result_ptrs = self.result_ptrs.clone().into_iter();
                for v in values {
                    if self.is_array(*v) {
                        let to = result_ptrs.next().expect("a pointer per array result");
                        let from = self.addr(*v);
                        self.copy_var(to, from, *v);
                    } else {
                        let value = self.b.use_var(self.vars[v.index()]);
                        // The frames a tail call left out take their steps here.
                        scalars.push(self.unwind(value));
                    }
                }
                let mut returned = vec![self.b.use_var(self.steps)];
                returned.extend(scalars);
                self.flush_counts();
                self.b.ins().return_(&returned);
            }
        }
    }

    /// The step of entering block `data`, or the step limit at its
    /// location (none when it counts none: [`Function::counts_step`]). Under `Interrupts::Polled`
    /// the member holds a slice of its steps; when it is used up, a cold
    /// path takes the next (`refuel`), which is none when the member's
    /// limit is reached or the run is interrupted (the merge of that path
    /// costs code made of tiny calls about a sixth of its speed).
    pub(super) fn take_step(&mut self, data: &BlockData) {
        if self.function.uncounted || data.uncounted {
            // The backward part of a derivation, or a block a derivation
            // added: the function's own blocks take the steps.
            return;
        }
        let loc = data.loc;
        let left = self.b.use_var(self.steps);
        if self.in_fast.is_some() {
            // The loop's dispatch saw steps for the whole pass.
            let left = self.b.ins().iadd_imm_s(left, -1);
            self.b.def_var(self.steps, left);
            return;
        }
        if self.unit.interrupts == Interrupts::Ignored {
            // All the member's steps are held: the test has one exit.
            let out = self.b.ins().icmp_imm_s(IntCC::Equal, left, 0);
            self.stop_if(out, Stop::StepLimit(loc));
            let left = self.b.ins().iadd_imm_s(left, -1);
            self.b.def_var(self.steps, left);
            return;
        }
        let held = self.refill_when_empty(left, Some(loc));
        let left = self.b.ins().iadd_imm_s(held, -1);
        self.b.def_var(self.steps, left);
    }

    /// If the member holds no steps (`left` is 0), takes the next slice on
    /// a cold path (`refuel`); with `stop_at`, a member given none stops
    /// there with the step limit. Gives the steps held after it.
    fn refill_when_empty(&mut self, left: Value, stop_at: Option<Loc>) -> Value {
        let empty = self.b.ins().icmp_imm_s(IntCC::Equal, left, 0);
        let refill = self.b.create_block();
        self.b.set_cold_block(refill);
        let go_on = self.b.create_block();
        let held = self.b.append_block_param(go_on, types::I64);
        self.b
            .ins()
            .brif(empty, refill, &[], go_on, &[BlockArg::Value(left)]);
        self.b.switch_to_block(refill);
        // The counts kept in registers go to the context's counters with
        // every slice, so that a host watching them sees a long member's
        // progress (within `POLL_STEPS` steps).
        self.flush_counts();
        for (_, var) in self.local_counts.clone() {
            let zero = self.b.ins().iconst(types::I64, 0);
            self.b.def_var(var, zero);
        }
        let given = self.refuel();
        if let Some(loc) = stop_at {
            let out = self.b.ins().icmp_imm_s(IntCC::Equal, given, 0);
            self.stop_if(out, Stop::StepLimit(loc));
        }
        self.b.ins().jump(go_on, &[BlockArg::Value(given)]);
        self.b.switch_to_block(go_on);
        held
    }

    /// The member's next slice of steps, taken from the context's reserve:
    /// at most `POLL_STEPS`, none when the reserve is empty or the run's
    /// interrupt flag is set. Inline, without a call, so that a function
    /// keeps its registers as if the path were not there.
    fn refuel(&mut self) -> Value {
        let ctx = self.ctx;
        let reserve = self
            .b
            .ins()
            .load(types::I64, FLAGS, ctx, offsets::STEPS_RESERVE);
        let most = self.b.ins().iconst(types::I64, crate::POLL_STEPS as i64);
        let slice = self.b.ins().umin(reserve, most);
        let flag = self
            .b
            .ins()
            .load(types::I64, FLAGS, ctx, offsets::INTERRUPT);
        let interrupted = self.b.ins().uload8(types::I32, FLAGS, flag, 0);
        let zero = self.b.ins().iconst(types::I64, 0);
        let slice = self.b.ins().select(interrupted, zero, slice);
        let rest = self.b.ins().isub(reserve, slice);
        self.b.ins().store(FLAGS, rest, ctx, offsets::STEPS_RESERVE);
        slice
    }

    /// Takes the next slice of steps if the member holds none, under
    /// `Interrupts::Polled` (where the step is taken by selects:
    /// `select::merged_step`, which then tests for none itself).
    pub(super) fn refuel_if_empty(&mut self) {
        if self.unit.interrupts == Interrupts::Ignored {
            return;
        }
        let left = self.b.use_var(self.steps);
        let held = self.refill_when_empty(left, None);
        self.b.def_var(self.steps, held);
    }

    /// Adds one (or `by`) to the counter of segment number `segment`: in
    /// its register inside a loop, else in the context's counters.
    pub(super) fn count(&mut self, segment: usize, by: Option<Value>) {
        let Some(counters) = self.counters else {
            return;
        };
        let local = self
            .local_counts
            .binary_search_by_key(&segment, |(s, _)| *s)
            .ok()
            .map(|at| self.local_counts[at].1);
        let add = |t: &mut Self, count: Value| match by {
            Some(by) => t.b.ins().iadd(count, by),
            None => t.b.ins().iadd_imm_s(count, 1),
        };
        if let Some(var) = local {
            let count = self.b.use_var(var);
            let count = add(self, count);
            self.b.def_var(var, count);
            return;
        }
        let offset = 8 * segment as i32;
        let count = self.b.ins().load(types::I64, FLAGS, counters, offset);
        let count = add(self, count);
        self.b.ins().store(FLAGS, count, counters, offset);
    }

    /// Adds the counters kept in registers to the context's (before every
    /// exit of the function).
    pub(super) fn flush_counts(&mut self) {
        let Some(counters) = self.counters else {
            return;
        };
        for (segment, var) in self.local_counts.clone() {
            let offset = 8 * segment as i32;
            let local = self.b.use_var(var);
            let count = self.b.ins().load(types::I64, FLAGS, counters, offset);
            let count = self.b.ins().iadd(count, local);
            self.b.ins().store(FLAGS, count, counters, offset);
        }
    }

    /// Stops the member with `stop` if `cond` (non-zero).
    pub(super) fn stop_if(&mut self, cond: Value, stop: Stop) {
        let code = self.unit.stop(stop);
        self.stop_with_code_if(cond, code);
    }

    /// Stops the member with the stop code `code` if `cond` (non-zero).
    /// The code is set in a cold block of its own, off the path that goes
    /// on.
    pub(super) fn stop_with_code_if(&mut self, cond: Value, code: u32) {
        let stop = self.b.create_block();
        self.b.set_cold_block(stop);
        let go_on = self.b.create_block();
        self.b.ins().brif(cond, stop, &[], go_on, &[]);
        self.b.switch_to_block(stop);
        self.stop_with_code(code);
        self.b.switch_to_block(go_on);
    }

    /// Stops the member with the stop code `code`: ends the current block.
    pub(super) fn stop_with_code(&mut self, code: u32) {
        let code = self.b.ins().iconst(types::I32, i64::from(code));
        self.b.ins().jump(self.stop_block, &[BlockArg::Value(code)]);
    }

    /// `-x` for a float or a vector of floats: the sign bit flipped, as the
    /// kernels' `-` does, but not as Cranelift's `fneg`: its mid-end
    /// rewrites `(-a) * (-b)` into `a * b`, which changes which NaN a
    /// product of two NaNs keeps (the kernels compute the negations).
    pub(super) fn flip_sign(&mut self, x: Value) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let lane = ty.lane_type();
        let vector = if ty.is_vector() {
            ty
        } else {
            lane.by(128 / lane.bits()).expect("a 128-bit vector")
        };
        let wide = if ty.is_vector() {
            x
        } else {
            self.b.ins().scalar_to_vector(vector, x)
        };
        let bits = self.b.ins().bitcast(vector.as_int(), LANES, wide);
        let sign = self
            .b
            .ins()
            .iconst(lane.as_int(), (1u64 << (lane.bits() - 1)) as i64);
        let signs = self.b.ins().splat(vector.as_int(), sign);
        let flipped = self.b.ins().bxor(bits, signs);
        let back = self.b.ins().bitcast(vector, LANES, flipped);
        if ty.is_vector() {
            back
        } else {
            self.b.ins().extractlane(back, 0)
        }
    }

    /// The machine stack must have room for this activation.
    fn guard_stack(&mut self) {
        let sp = self.b.ins().get_stack_pointer(types::I64);
        let limit = self
            .b
            .ins()
            .load(types::I64, FLAGS, self.ctx, offsets::STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, limit);
        self.stop_if(low, Stop::NativeStack);
    }

    /// The two exits: write the stop code, and return with zeros.
    fn exits(&mut self) {
        self.b.switch_to_block(self.stop_block);
        let code = self.b.block_params(self.stop_block)[0];
        self.b.ins().store(FLAGS, code, self.ctx, offsets::STATUS);
        self.b.ins().jump(self.propagate, &[]);
        self.b.switch_to_block(self.propagate);
        self.flush_counts();
        let mut returned = vec![self.b.use_var(self.steps)];
        for r in self.function.results.iter().filter(|r| r.is_scalar()) {
            returned.push(self.zero(machine_type(r.elem)));
        }
        self.b.ins().return_(&returned);
    }

    pub(super) fn zero(&mut self, ty: Type) -> Value {
        if ty == types::F32 {
            self.b.ins().f32const(0.0)
        } else if ty == types::F64 {
            self.b.ins().f64const(0.0)
        } else {
            self.b.ins().iconst(ty, 0)
        }
    }

    /// A call: the depth check, the call, and what its status means.
    fn call(&mut self, dsts: &[Var], callee: FuncId, args: &[Var], loc: Loc, catch: bool) {
        let recover = catch.then(|| self.b.create_block());
        let aside = catch && self.unit.taped;
        if aside {
            self.call_import(CATCH_BEGIN, &[self.ctx], None);
        }
        let depth = self.depth_check(recover, loc);
        let results = if catch { &dsts[1..] } else { dsts };
        let values = self.call_operands(depth, args, results);
        let callee_ref = self.callee_ref(callee);
        let call = self.b.ins().call(callee_ref, &values);
        let returned = self.b.inst_results(call).to_vec();
        let scalar_dsts: Vec<Var> = results
            .iter()
            .copied()
            .filter(|d| !self.is_array(*d))
            .collect();
        self.b.def_var(self.steps, returned[0]);
        let status = self
            .b
            .ins()
            .load(types::I32, FLAGS, self.ctx, offsets::STATUS);
        let ok = self.b.create_block();
        let Some(recover) = recover else {
            self.b.ins().brif(status, self.propagate, &[], ok, &[]);
            self.b.switch_to_block(ok);
            for (d, value) in scalar_dsts.iter().zip(&returned[1..]) {
                self.b.def_var(self.vars[d.index()], *value);
            }
            return;
        };
        let caught = Caught {
            status,
            ok,
            recover,
            aside,
        };
        self.catching_status(caught, dsts, &scalar_dsts, &returned[1..]);
    }

    /// The depth check before a call: with no depth left, a stack overflow
    /// at `loc`, or (a catching call) a jump to `recover`. The callee's
    /// depth left.
    fn depth_check(&mut self, recover: Option<NativeBlock>, loc: Loc) -> Value {
        let depth_left = self.b.use_var(self.depth);
        let no_room = self.b.ins().icmp_imm_s(IntCC::Equal, depth_left, 0);
        match recover {
            Some(recover) => {
                let go = self.b.create_block();
                self.b.ins().brif(no_room, recover, &[], go, &[]);
                self.b.switch_to_block(go);
            }
            None => self.stop_if(no_room, Stop::StackOverflow(loc)),
        }
        self.b.ins().iadd_imm_s(depth_left, -1)
    }

    /// A call's operands: the context, the callee's depth and steps left,
    /// the arguments (an array argument that is also a result passed as a
    /// copy) and the addresses of the array results.
    fn call_operands(&mut self, depth: Value, args: &[Var], results: &[Var]) -> Vec<Value> {
        let steps = self.b.use_var(self.steps);
        let mut values = vec![self.ctx, depth, steps];
        for v in args {
            let value = self.get(*v);
            if self.is_array(*v) && results.contains(v) {
                // The callee may read its parameter in place while it
                // writes its results: pass a copy.
                let bytes = self.var_bytes(*v);
                let slot = explicit_slot(&mut self.b, bytes.max(8));
                let copy = self.b.ins().stack_addr(types::I64, slot, 0);
                self.copy_var(copy, value, *v);
                values.push(copy);
            } else {
                values.push(value);
            }
        }
        for d in results {
            if self.is_array(*d) {
                let to = self.addr(*d);
                values.push(to);
            }
        }
        values
    }

    /// What a catching call's status means: none, its results and
    /// `dsts[0]` true (at `ok`); a catchable stop, cleared, its results
    /// zero and `dsts[0]` false (at `recover`, where a failed depth check
    /// also goes); an uncatchable stop, passed on to the caller.
    fn catching_status(
        &mut self,
        caught: Caught,
        dsts: &[Var],
        scalar_dsts: &[Var],
        returned: &[Value],
    ) {
        let Caught {
            status,
            ok,
            recover,
            aside,
        } = caught;
        let failed = self.b.create_block();
        let after = self.b.create_block();
        self.b.ins().brif(status, failed, &[], ok, &[]);
        self.b.switch_to_block(failed);
        let uncatchable = self.b.ins().band_imm_u(status, i64::from(UNCATCHABLE));
        self.b
            .ins()
            .brif(uncatchable, self.propagate, &[], recover, &[]);
        self.b.switch_to_block(ok);
        if aside {
            self.call_import(CATCH_END, &[self.ctx], None);
        }
        let completed = self.b.ins().iconst(types::I8, 1);
        self.b.def_var(self.vars[dsts[0].index()], completed);
        for (d, value) in scalar_dsts.iter().zip(returned) {
            self.b.def_var(self.vars[d.index()], *value);
        }
        self.b.ins().jump(after, &[]);
        self.b.switch_to_block(recover);
        if aside {
            self.call_import(CATCH_END, &[self.ctx], None);
        }
        let clear = self.b.ins().iconst(types::I32, 0);
        self.b.ins().store(FLAGS, clear, self.ctx, offsets::STATUS);
        let faulted = self.b.ins().iconst(types::I8, 0);
        self.b.def_var(self.vars[dsts[0].index()], faulted);
        for d in &dsts[1..] {
            if self.is_array(*d) {
                let to = self.addr(*d);
                let bytes = self.bytes(*d);
                self.call_import(ZERO_BYTES, &[to, bytes], None);
            } else {
                let ty = machine_type(self.function.vars[*d].ty.elem);
                let zero = self.zero(ty);
                self.b.def_var(self.vars[d.index()], zero);
            }
        }
        self.b.ins().jump(after, &[]);
        self.b.switch_to_block(after);
    }

    pub(super) fn is_array(&self, v: Var) -> bool {
        !self.function.vars[v].ty.is_scalar()
    }

    /// A variable for the address of each view (`views`) and each array
    /// popped in place (`popped`).
    fn declare_views(&mut self, views: &[bool]) {
        self.views = views
            .iter()
            .zip(&self.popped)
            .map(|(view, popped)| (*view || *popped).then(|| self.b.declare_var(types::I64)))
            .collect();
    }

    /// The address of array variable `v` in this activation's area.
    pub(super) fn addr(&mut self, v: Var) -> Value {
        if let Some(pointer) = self.in_place[v.index()] {
            return pointer;
        }
        if let Some(view) = self.views[v.index()] {
            return self.b.use_var(view);
        }
        if let Some(id) = self.statics[v.index()] {
            let table = self
                .b
                .ins()
                .load(types::I64, FIXED, self.ctx, offsets::STATIC_DATA);
            return self.b.ins().load(types::I64, FIXED, table, 8 * id as i32);
        }
        let offset = self.offsets[v.index()].expect("an array variable");
        let area = self.area.expect("a function with arrays has an area");
        self.b.ins().stack_addr(types::I64, area, offset as i32)
    }

    /// The byte size of array variable `v` (the member's own), as a value.
    pub(super) fn bytes(&mut self, v: Var) -> Value {
        let function = self.function;
        self.bytes_of(&function.vars[v].ty, 0)
    }

    /// The bytes of a value of type `ty` without its first `skip`
    /// dimensions (0: the whole value; 1: one item) for this member: a
    /// constant, times the per-member lengths read from the context.
    pub(super) fn bytes_of(&mut self, ty: &TensorType, skip: usize) -> Value {
        let mut constant = crate::arrays::byte_size(ty.elem) as i64;
        let mut per_member = Vec::new();
        for dim in &ty.dims[skip..] {
            match *dim {
                Dim::Fixed(n) => constant *= n as i64,
                Dim::Symbolic(s) if self.unit.lengths.is_per_member(s) => per_member.push(s),
                Dim::Symbolic(s) => constant *= self.unit.symbols()[s.0 as usize] as i64,
            }
        }
        let mut bytes = self.b.ins().iconst(types::I64, constant);
        for s in per_member {
            let length = self.dim_value(Dim::Symbolic(s));
            bytes = self.b.ins().imul(bytes, length);
        }
        bytes
    }

    /// The member's length of `dim`: a constant, or for a per-member
    /// symbol, its length read from the context ([`crate::lengths`]).
    pub(super) fn dim_value(&mut self, dim: Dim) -> Value {
        let length = match dim {
            Dim::Symbolic(s) if self.unit.lengths.is_per_member(s) => {
                // The member's lengths do not change while it runs.
                let table = self
                    .b
                    .ins()
                    .load(types::I64, FIXED, self.ctx, offsets::SYMBOLS);
                return self.b.ins().load(types::I64, FIXED, table, 8 * s.0 as i32);
            }
            Dim::Symbolic(s) => self.unit.symbols()[s.0 as usize],
            Dim::Fixed(n) => n,
        };
        self.b.ins().iconst(types::I64, length as i64)
    }

    /// Whether array variable `v` has a dimension each member has its own
    /// length of.
    pub(super) fn is_ragged(&self, v: Var) -> bool {
        self.unit.lengths.is_ragged(&self.function.vars[v].ty)
    }

    /// Copies array variable `v`'s elements (the member's own) from `from`
    /// to `to`: inline when small and the same for every member, else by
    /// the host.
    pub(super) fn copy_var(&mut self, to: Value, from: Value, v: Var) {
        if self.is_ragged(v) {
            let bytes = self.bytes(v);
            self.copy(to, from, bytes);
        } else {
            let bytes = self.var_bytes(v);
            self.copy_inline(to, from, bytes);
        }
    }

    /// What passes `v` to a callee: its value, or its address.
    pub(super) fn get(&mut self, v: Var) -> Value {
        if self.is_array(v) {
            self.addr(v)
        } else {
            self.b.use_var(self.vars[v.index()])
        }
    }

    /// `v = value` (for an array, `value` points at the elements to copy).
    pub(super) fn set_from(&mut self, v: Var, value: Value) {
        if self.is_array(v) {
            let to = self.addr(v);
            self.copy_var(to, value, v);
        } else {
            self.b.def_var(self.vars[v.index()], value);
        }
    }

    pub(super) fn copy(&mut self, to: Value, from: Value, bytes: Value) {
        self.call_import(COPY_BYTES, &[to, from, bytes], None);
    }

    pub(super) fn callee_ref(&mut self, callee: FuncId) -> FuncRef {
        if let Some(r) = self.callee_refs.get(&callee) {
            return *r;
        }
        let r = self
            .unit
            .jit
            .declare_func_in_func(self.unit.ids[&callee], self.b.func);
        self.callee_refs.insert(callee, r);
        r
    }
}

/// Where an operation of a fused group (`super::loops`) is translated.
enum Fused {
    /// The group's last operation: the loop goes here, then the
    /// operations postponed past it.
    Loop(usize),
    /// Another operation of the group, computed by its loop.
    Member,
    /// An operation postponed past the group's loop.
    Postponed,
}
