//! The translation of lock-step pieces (run by `crate::lockstep`): each
//! *piece* of an IR function (a block from its entry, or from the operation
//! after a call, to its next call or its terminator) becomes one native function that runs the
//! piece for a list of members: a loop over their rows.
//!
//! `piece(context, rows, n)`: for each `i < n`, member `r = rows[i]`
//! reads the variables the piece needs from their columns (one `u64` slot
//! per member, the value in its low bytes), runs the piece's operations
//! with the per-member translator's own code (`Translator::operations_in`:
//! the same machine code for every primitive, so the same bits), writes
//! the variables live after the piece back, and appends `r` to the queue
//! of the piece it runs next (the context's queues: one per piece, room
//! for every member in each). A member that returns from the entry gets
//! the status [`RETURNED`]; one that stops, its stop code; neither is
//! queued again.
//!
//! A call saves the caller's variables live across it on the member's own
//! save stack, with the piece to resume at, stores the arguments in the
//! callee's parameter columns and goes on at the callee's entry; a return
//! writes the results into the result columns and goes on at the piece
//! the top of the save stack names, which restores what was saved. A
//! piece ending with a call first checks that the member's save stack has
//! room; if not, it queues the member at the same piece, untouched, and
//! raises the context's `grow` flag for the host to grow that stack.

use std::collections::HashMap;

use autobatch_ir::liveness::Liveness;
use autobatch_ir::{Block, EntityRef, FuncId, Function, Op, Program, Terminator, Var};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature, UserFuncName, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module};

use super::function::{explicit_slot, segments, Translator, FLAGS};
use super::{machine_type, Unit};
use crate::Lengths;
use crate::{Counting, Interrupts, Segment, Stop};

/// The status of a member that returned from the entry (0: still
/// running; else a stop code, `super::stop_code`).
pub(crate) const RETURNED: u32 = u32::MAX;

/// The offsets of `crate::lockstep::LockContext`'s fields, which the code
/// reads.
pub(crate) mod offsets {
    /// The members of the run: the stride of every column.
    pub const MEMBERS: i32 = 0;
    /// The variables' columns, one after the other.
    pub const COLUMNS: i32 = 8;
    pub const STEPS_LEFT: i32 = 16;
    pub const DEPTH_LEFT: i32 = 24;
    /// One `u32` per member.
    pub const STATUS: i32 = 32;
    /// Per member: the words its save stack holds.
    pub const SAVED: i32 = 40;
    /// Per member: the address of its save stack.
    pub const STACKS: i32 = 48;
    /// Per member: the words its save stack has room for.
    pub const ROOM: i32 = 56;
    /// Set to 1 by a piece that left a member for want of room.
    pub const GROW: i32 = 64;
    pub const COUNTERS: i32 = 72;
    /// The result columns, one per result position.
    pub const RESULTS: i32 = 80;
    /// The queues, one per piece, each with room for every member.
    pub const QUEUES: i32 = 88;
    /// Per piece, the members in its queue.
    pub const LENGTHS: i32 = 96;
}

/// Where a piece starts: at `op` of `block` of `function` (0: the block's
/// entry, which takes the member's step; else just after a call).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PieceStart {
    pub function: FuncId,
    pub block: Block,
    pub op: usize,
}

/// The compiled pieces of a program, and what the host needs to run them.
pub(crate) struct LockCode {
    pub jit: JITModule,
    pub pieces: Vec<*const u8>,
    /// Per piece: the save-stack words its call needs (0 without a call).
    pub needs: Vec<u64>,
    pub entry_piece: u32,
    /// The column of the entry's variable 0 (its variable `v` is in
    /// column `entry_column + v`).
    pub entry_column: usize,
    pub columns: usize,
    pub result_columns: usize,
    pub stops: Vec<Stop>,
    pub segments: Vec<Segment>,
}

/// What every piece of one function shares.
struct FunctionFacts {
    /// The column of the function's variable 0.
    column: usize,
    liveness: Liveness,
    /// Per block: its first segment's counter.
    segment_base: Vec<usize>,
}

/// The layout of the whole program: columns, pieces, per-function facts.
struct Layout {
    starts: Vec<PieceStart>,
    /// Per piece: the stretches of blocks it runs.
    shapes: Vec<Shape>,
    piece_of: HashMap<PieceStart, u32>,
    facts: HashMap<FuncId, FunctionFacts>,
    columns: usize,
    result_columns: usize,
}

impl Layout {
    fn piece(&self, function: FuncId, block: Block, op: usize) -> u32 {
        self.piece_of[&PieceStart {
            function,
            block,
            op,
        }]
    }
}

/// The first construct of `functions` lock-step code does not take:
/// arrays, forks, catching calls, and primitives native code does not
/// compute inline.
pub(crate) fn scope(program: &Program, functions: &[FuncId]) -> Result<(), String> {
    for &id in functions {
        let function = &program.functions[id];
        if let Some(var) = function.vars.values().find(|v| !v.ty.is_scalar()) {
            let name = var.name.as_deref().unwrap_or("a temporary");
            return Err(format!(
                "`{name}` of `{}` is an array: lock-step code takes scalar variables only",
                function.name
            ));
        }
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            let at = |loc: autobatch_types::Loc| format!("{}:{}", loc.line, loc.column);
            match op {
                Op::Fork { loc, .. } => {
                    return Err(format!(
                        "the fork at {} is not compiled for lock-step",
                        at(*loc)
                    ))
                }
                Op::Call {
                    catch: true, loc, ..
                } => {
                    return Err(format!(
                        "the catching call at {} is not compiled for lock-step",
                        at(*loc)
                    ))
                }
                Op::Call { .. } => {}
                Op::Prim {
                    prim, args, loc, ..
                } => {
                    let types: Vec<_> = args.iter().map(|a| function.vars[*a].ty.elem).collect();
                    if !crate::check::inline(prim, &types, true) {
                        return Err(format!(
                            "`{}` at {} is not compiled for lock-step",
                            prim.name(),
                            at(*loc)
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Compiles every piece of `functions` (all in [`scope`]).
pub(crate) fn compile(
    program: &Program,
    entry: FuncId,
    functions: &[FuncId],
    symbols: &[u64],
    counting: Counting,
) -> Result<LockCode, String> {
    let lengths = Lengths::fixed(symbols);
    let mut unit = Unit::new(program, &lengths, counting, Interrupts::Ignored)?;
    let layout = layout(&mut unit, functions);
    match define_pieces(&mut unit, &layout) {
        Ok(pieces) => Ok(LockCode {
            needs: layout
                .starts
                .iter()
                .zip(&layout.shapes)
                .map(|(s, shape)| {
                    let facts = &layout.facts[&s.function];
                    shape
                        .call
                        .and_then(|(block, at)| {
                            call_site(&program.functions[s.function], &facts.liveness, block, at)
                        })
                        .map_or(0, |c| c.need)
                })
                .collect(),
            entry_piece: layout.piece(entry, Function::ENTRY, 0),
            entry_column: layout.facts[&entry].column,
            columns: layout.columns,
            result_columns: layout.result_columns,
            stops: unit.stops,
            segments: unit.segments,
            pieces,
            jit: unit.jit,
        }),
        Err(reason) => {
            // SAFETY: nothing of the module has run.
            unsafe { unit.jit.free_memory() };
            Err(reason)
        }
    }
}

/// Numbers the columns, the pieces and the segments.
fn layout(unit: &mut Unit<'_>, functions: &[FuncId]) -> Layout {
    let program = unit.program;
    let mut starts = Vec::new();
    let mut facts = HashMap::new();
    let mut column = 0;
    let mut result_columns = 0;
    for &id in functions {
        let function = &program.functions[id];
        result_columns = result_columns.max(function.results.len());
        let mut segment_base = Vec::with_capacity(function.blocks.len());
        for (block, data) in function.blocks.iter() {
            segment_base.push(unit.segments.len());
            for (_, ops) in segments(function, data) {
                unit.segments.push(Segment {
                    function: id,
                    block,
                    ops,
                });
            }
            starts.push(PieceStart {
                function: id,
                block,
                op: 0,
            });
            for (k, op) in data.ops.iter().enumerate() {
                if matches!(op, Op::Call { .. }) {
                    starts.push(PieceStart {
                        function: id,
                        block,
                        op: k + 1,
                    });
                }
            }
        }
        facts.insert(
            id,
            FunctionFacts {
                column,
                liveness: Liveness::compute(function),
                segment_base,
            },
        );
        column += function.vars.len();
    }
    let piece_of = starts
        .iter()
        .enumerate()
        .map(|(p, s)| (*s, p as u32))
        .collect();
    let shapes = starts
        .iter()
        .map(|s| shape(&program.functions[s.function], *s))
        .collect();
    Layout {
        starts,
        shapes,
        piece_of,
        facts,
        columns: column,
        result_columns,
    }
}

/// The call a piece ends with: where it is and what it saves.
struct CallSite<'f> {
    block: Block,
    at: usize,
    dsts: &'f [Var],
    callee: FuncId,
    args: &'f [Var],
    loc: autobatch_types::Loc,
    /// The caller's variables live after the call (its results apart).
    saved: Vec<Var>,
    /// Save-stack words: one per saved variable, and the piece to resume.
    need: u64,
}

/// The call at position `at` of `start`'s block, if it is one.
fn call_site<'f>(
    function: &'f Function,
    liveness: &Liveness,
    block: Block,
    at: usize,
) -> Option<CallSite<'f>> {
    let data = &function.blocks[block];
    let Op::Call {
        dsts,
        callee,
        args,
        loc,
        ..
    } = data.ops.get(at)?
    else {
        return None;
    };
    let live = &liveness.live_after_ops(function, block)[at];
    let saved: Vec<Var> = live.iter().filter(|v| !dsts.contains(v)).collect();
    Some(CallSite {
        block,
        at,
        dsts,
        callee: *callee,
        args,
        loc: *loc,
        need: saved.len() as u64 + 1,
        saved,
    })
}

/// The blocks a piece runs: from its start to its block's first call or
/// terminator, and on through every `jump` to a block that only this one
/// jumps to (one piece for a straight line of blocks, so that its members
/// are queued once), up to [`MAX_PARTS`] blocks.
struct Shape {
    /// Each block and the positions of its operations the piece runs.
    parts: Vec<(Block, std::ops::Range<usize>)>,
    /// The call the piece ends with (its block and position), if it does.
    call: Option<(Block, usize)>,
}

/// The most blocks one piece runs.
const MAX_PARTS: usize = 16;

fn shape(function: &Function, start: PieceStart) -> Shape {
    let mut predecessors = vec![0_usize; function.blocks.len()];
    for data in function.blocks.values() {
        for s in data.term.successors() {
            predecessors[s.index()] += 1;
        }
    }
    let mut parts = Vec::new();
    let (mut block, mut from) = (start.block, start.op);
    loop {
        let ops = &function.blocks[block].ops;
        let call = ops[from..]
            .iter()
            .position(|op| matches!(op, Op::Call { .. }))
            .map(|k| from + k);
        parts.push((block, from..call.unwrap_or(ops.len())));
        if let Some(at) = call {
            return Shape {
                parts,
                call: Some((block, at)),
            };
        }
        match function.blocks[block].term {
            Terminator::Jump(next)
                if predecessors[next.index()] == 1
                    && next != Function::ENTRY
                    && parts.len() < MAX_PARTS
                    && parts.iter().all(|(b, _)| *b != next) =>
            {
                (block, from) = (next, 0);
            }
            _ => return Shape { parts, call: None },
        }
    }
}

fn piece_signature(jit: &JITModule) -> Signature {
    let mut sig = jit.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig
}

/// Declares, defines and links every piece; gives their addresses.
fn define_pieces(unit: &mut Unit<'_>, layout: &Layout) -> Result<Vec<*const u8>, String> {
    let sig = piece_signature(&unit.jit);
    let mut ids = Vec::with_capacity(layout.starts.len());
    for p in 0..layout.starts.len() {
        let id = unit
            .jit
            .declare_function(&format!("autobatch_piece{p}"), Linkage::Local, &sig)
            .map_err(|e| format!("Cranelift: {e}"))?;
        ids.push(id);
    }
    let mut builder_context = FunctionBuilderContext::new();
    let mut context = unit.jit.make_context();
    for (p, id) in ids.iter().enumerate() {
        context.func.signature = sig.clone();
        context.func.name = UserFuncName::user(2, p as u32);
        let b = FunctionBuilder::new(&mut context.func, &mut builder_context);
        translate_piece(unit, layout, p as u32, b)?;
        let disasm = std::env::var_os("AUTOBATCH_NATIVE_DISASM").is_some();
        context.set_disasm(disasm);
        unit.jit
            .define_function(*id, &mut context)
            .map_err(|e| format!("Cranelift could not compile piece {p}: {e:?}"))?;
        if let Some(code) = context
            .compiled_code()
            .and_then(|c| c.vcode.as_ref())
            .filter(|_| disasm)
        {
            eprintln!("; piece {p} ({:?})\n{code}", layout.starts[p]);
        }
        unit.jit.clear_context(&mut context);
    }
    unit.jit
        .finalize_definitions()
        .map_err(|e| format!("Cranelift could not link: {e}"))?;
    Ok(ids
        .iter()
        .map(|id| unit.jit.get_finalized_function(*id))
        .collect())
}

/// What a piece reads from the columns before its first operation, and
/// what it defines (restored variables included).
struct Traffic {
    loads: Vec<Var>,
    defined: Vec<bool>,
}

fn traffic(function: &Function, shape: &Shape, restored: &[Var], end_reads: &[Var]) -> Traffic {
    let mut defined = vec![false; function.vars.len()];
    let mut loaded = vec![false; function.vars.len()];
    let mut loads = Vec::new();
    for v in restored {
        defined[v.index()] = true;
    }
    let mut read = |v: Var, defined: &[bool], loads: &mut Vec<Var>| {
        if !defined[v.index()] && !std::mem::replace(&mut loaded[v.index()], true) {
            loads.push(v);
        }
    };
    for (block, range) in &shape.parts {
        let data = &function.blocks[*block];
        for op in &data.ops[range.clone()] {
            for u in op.uses() {
                read(*u, &defined, &mut loads);
            }
            for d in op.defs() {
                defined[d.index()] = true;
            }
        }
        // A later block's terminator is read at the end (`end_reads`).
    }
    for v in end_reads {
        read(*v, &defined, &mut loads);
    }
    Traffic { loads, defined }
}

/// The per-row values a piece's code keeps while it runs one member.
#[derive(Clone, Copy)]
struct Row {
    /// `i`, the position in `rows`.
    i: Variable,
    /// The member's row `r`, times 8 (its slot in a column).
    slot: Variable,
}

/// The column pointers and context fields a piece reads, loaded once
/// before its loop (a value must be defined where it is used).
struct Frame {
    ctx: Value,
    /// The stride of a column in bytes.
    stride: Value,
    fields: HashMap<i32, Value>,
    /// The start of every column the piece may touch, by column number
    /// (those it does not use cost nothing: the code drops them).
    columns: HashMap<usize, Value>,
    /// The start of each result column.
    results: Vec<Value>,
    /// Per piece the code queues members at by number: the start of its
    /// queue, and its length, kept in a register while the piece runs.
    queues: HashMap<u32, (Value, Variable)>,
}

impl Frame {
    fn field(&self, offset: i32) -> Value {
        self.fields[&offset]
    }
}

/// The pieces a piece queues members at, by number (a return's are read
/// from the save stack instead).
fn static_targets(
    layout: &Layout,
    id: u32,
    call: Option<&CallSite<'_>>,
    term: &Terminator,
) -> Vec<u32> {
    let start = layout.starts[id as usize];
    let mut targets = match (call, term) {
        (Some(call), _) => vec![id, layout.piece(call.callee, Function::ENTRY, 0)],
        (None, Terminator::Return(_)) => Vec::new(),
        (None, term) => term
            .successors()
            .into_iter()
            .map(|b| layout.piece(start.function, b, 0))
            .collect(),
    };
    targets.sort_unstable();
    targets.dedup();
    targets
}

/// What a piece does, decided before any code: its shape, the call it
/// ends with, the call it resumes after, what it reads and defines.
struct Plan<'f> {
    start: PieceStart,
    shape: &'f Shape,
    /// The block it ends in.
    last: Block,
    call: Option<CallSite<'f>>,
    resumed: Option<CallSite<'f>>,
    traffic: Traffic,
}

fn plan<'f>(layout: &'f Layout, function: &'f Function, id: u32) -> Plan<'f> {
    let start = layout.starts[id as usize];
    let facts = &layout.facts[&start.function];
    let shape = &layout.shapes[id as usize];
    let (last, _) = shape.parts.last().cloned().expect("a piece runs a block");
    let call = shape
        .call
        .and_then(|(block, at)| call_site(function, &facts.liveness, block, at));
    let resumed = (start.op > 0)
        .then(|| call_site(function, &facts.liveness, start.block, start.op - 1))
        .flatten();
    let restored: Vec<Var> = resumed
        .as_ref()
        .map(|c| c.saved.iter().chain(c.dsts).copied().collect())
        .unwrap_or_default();
    let end_reads: Vec<Var> = match &call {
        Some(c) => c.args.iter().chain(&c.saved).copied().collect(),
        None => function.blocks[last].term.uses().to_vec(),
    };
    let traffic = traffic(function, shape, &restored, &end_reads);
    Plan {
        start,
        shape,
        last,
        call,
        resumed,
        traffic,
    }
}

/// Loads, in the entry block, what the piece's loop reads (see [`Frame`]).
fn frame(
    b: &mut FunctionBuilder<'_>,
    ctx: Value,
    program: &Program,
    layout: &Layout,
    id: u32,
    plan: &Plan<'_>,
) -> Frame {
    let function = &program.functions[plan.start.function];
    let facts = &layout.facts[&plan.start.function];
    let members = b.ins().load(types::I64, FLAGS, ctx, offsets::MEMBERS);
    let stride = b.ins().ishl_imm_u(members, 3);
    let fields: HashMap<i32, Value> = [
        offsets::COLUMNS,
        offsets::STEPS_LEFT,
        offsets::DEPTH_LEFT,
        offsets::STATUS,
        offsets::SAVED,
        offsets::STACKS,
        offsets::ROOM,
        offsets::RESULTS,
        offsets::QUEUES,
        offsets::LENGTHS,
    ]
    .into_iter()
    .map(|offset| (offset, b.ins().load(types::I64, FLAGS, ctx, offset)))
    .collect();
    let mut column_numbers: Vec<usize> =
        (0..function.vars.len()).map(|v| facts.column + v).collect();
    if let Some(call) = &plan.call {
        let callee = &program.functions[call.callee];
        let base = layout.facts[&call.callee].column;
        column_numbers.extend(callee.params.iter().map(|p| base + p.index()));
    }
    let column_start = |b: &mut FunctionBuilder<'_>, base: Value, k: usize| {
        let offset = b.ins().imul_imm_u(stride, k as i64);
        b.ins().iadd(base, offset)
    };
    let columns = column_numbers
        .into_iter()
        .map(|c| (c, column_start(b, fields[&offsets::COLUMNS], c)))
        .collect();
    let results = (0..layout.result_columns)
        .map(|k| column_start(b, fields[&offsets::RESULTS], k))
        .collect();
    let mut queues = HashMap::new();
    let term = &function.blocks[plan.last].term;
    for q in static_targets(layout, id, plan.call.as_ref(), term) {
        // Queue `q` starts `q * members * 4` bytes in.
        let queue_bytes = b.ins().ushr_imm_u(stride, 1);
        let start = b.ins().imul_imm_u(queue_bytes, i64::from(q));
        let start = b.ins().iadd(fields[&offsets::QUEUES], start);
        let length = b
            .ins()
            .load(types::I64, FLAGS, fields[&offsets::LENGTHS], 8 * q as i32);
        let var = b.declare_var(types::I64);
        b.def_var(var, length);
        queues.insert(q, (start, var));
    }
    Frame {
        ctx,
        stride,
        fields,
        columns,
        results,
        queues,
    }
}

/// The loop's blocks: its test, the member's piece, the step to the next
/// member, the exit; the stop of a member, and `propagate` (unused: the
/// code makes no native calls).
struct Loop {
    head: cranelift_codegen::ir::Block,
    body: cranelift_codegen::ir::Block,
    latch: cranelift_codegen::ir::Block,
    exit: cranelift_codegen::ir::Block,
    stop: cranelift_codegen::ir::Block,
    propagate: cranelift_codegen::ir::Block,
}

impl Loop {
    fn new(b: &mut FunctionBuilder<'_>) -> Loop {
        let lp = Loop {
            head: b.create_block(),
            body: b.create_block(),
            latch: b.create_block(),
            exit: b.create_block(),
            stop: b.create_block(),
            propagate: b.create_block(),
        };
        b.append_block_param(lp.stop, types::I32);
        b.set_cold_block(lp.stop);
        b.set_cold_block(lp.propagate);
        lp
    }

    /// Jumps to the loop's head, which goes on to its body while row `i`
    /// is below `n`; the body starts by reading the row's member `r` from
    /// `rows` and its slot offset.
    fn open(&self, b: &mut FunctionBuilder<'_>, row: Row, rows: Value, n: Value) {
        b.ins().jump(self.head, &[]);
        b.switch_to_block(self.head);
        let i = b.use_var(row.i);
        let more = b.ins().icmp(IntCC::UnsignedLessThan, i, n);
        b.ins().brif(more, self.body, &[], self.exit, &[]);
        b.switch_to_block(self.body);
        let offset = b.ins().ishl_imm_u(i, 2);
        let at = b.ins().iadd(rows, offset);
        let r = b.ins().uload32(FLAGS, at, 0);
        let slot = b.ins().ishl_imm_u(r, 3);
        b.def_var(row.slot, slot);
    }
}

/// A register counter, from zero, for each segment the piece enters.
fn local_counts(
    b: &mut FunctionBuilder<'_>,
    function: &Function,
    facts: &FunctionFacts,
    shape: &Shape,
    zero: Value,
) -> Vec<(usize, Variable)> {
    let mut counts = Vec::new();
    for (block, range) in &shape.parts {
        let base = facts.segment_base[block.index()];
        let data = &function.blocks[*block];
        for (k, (seg_start, _)) in segments(function, data).into_iter().enumerate() {
            if range.contains(&seg_start) {
                let var = b.declare_var(types::I64);
                b.def_var(var, zero);
                counts.push((base + k, var));
            }
        }
    }
    counts
}

fn translate_piece(
    unit: &mut Unit<'_>,
    layout: &Layout,
    id: u32,
    mut b: FunctionBuilder<'_>,
) -> Result<(), String> {
    let program = unit.program;
    let function = &program.functions[layout.starts[id as usize].function];
    let plan = plan(layout, function, id);
    let (start, shape) = (plan.start, plan.shape);
    let facts = &layout.facts[&start.function];

    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (ctx, rows, n) = (params[0], params[1], params[2]);
    let mut frame = frame(&mut b, ctx, program, layout, id, &plan);
    let counters = (unit.counting == Counting::Kept)
        .then(|| b.ins().load(types::I64, FLAGS, ctx, offsets::COUNTERS));
    let vars: Vec<Variable> = function
        .vars
        .values()
        .map(|v| b.declare_var(machine_type(v.ty.elem)))
        .collect();
    let steps = b.declare_var(types::I64);
    let row = Row {
        i: b.declare_var(types::I64),
        slot: b.declare_var(types::I64),
    };
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(row.i, zero);
    // Pieces make no calls through the translator: its depth is unused.
    let depth = b.declare_var(types::I64);
    b.def_var(depth, zero);
    // The segments this piece enters count in registers, added to the
    // counters when the piece ends.
    let local_counts = match counters {
        Some(_) => local_counts(&mut b, function, facts, shape, zero),
        None => Vec::new(),
    };
    let lp = Loop::new(&mut b);
    let vars_count = function.vars.len();
    let operand_slot = explicit_slot(&mut b, 8);
    let pointer_slot = explicit_slot(&mut b, 8);
    lp.open(&mut b, row, rows, n);

    let mut t = Translator {
        unit,
        function,
        b,
        vars,
        steps,
        ctx,
        depth,
        counters,
        segment_base: facts.segment_base.clone(),
        local_counts,
        stop_block: lp.stop,
        propagate: lp.propagate,
        blocks: Vec::new(),
        shim_refs: HashMap::new(),
        callee_refs: HashMap::new(),
        area: None,
        offsets: vec![None; vars_count],
        statics: vec![None; vars_count],
        operand_slot,
        pointer_slot,
        result_ptrs: Vec::new(),
        in_place: vec![None; vars_count],
        views: vec![None; vars_count],
        popped: vec![false; vars_count],
        constants: HashMap::new(),
        remainders: HashMap::new(),
        low_tests: HashMap::new(),
        divisible: None,
        merges: vec![None; function.blocks.len()],
        absorbed: vec![false; function.blocks.len()],
        tail: None,
        fast: Vec::new(),
        in_fast: None,
        fuse_counts: super::loops::Counts::of(function),
    };
    let mut piece = Piece {
        layout,
        facts,
        id,
        row,
        frame: &mut frame,
        latch: lp.latch,
    };
    piece.member(&mut t, &plan)?;
    piece.close_loop(&mut t, &lp);
    let Translator { unit, mut b, .. } = t;
    b.seal_all_blocks();
    b.finalize(unit.jit.target_config());
    Ok(())
}

/// The piece being translated, and where its code finds things.
struct Piece<'l, 'f> {
    layout: &'l Layout,
    facts: &'l FunctionFacts,
    id: u32,
    row: Row,
    frame: &'f mut Frame,
    latch: cranelift_codegen::ir::Block,
}

impl Piece<'_, '_> {
    /// One member's run of the piece, in the loop's body: what it reads,
    /// its step and operations block by block, and where it goes next.
    fn member(&mut self, t: &mut Translator<'_, '_, '_>, plan: &Plan<'_>) -> Result<(), String> {
        let function = t.function;
        if let Some(call) = &plan.call {
            self.room_check(t, call);
        }
        let steps_left = self.column_field(t, offsets::STEPS_LEFT, types::I64);
        t.b.def_var(t.steps, steps_left);
        if let Some(resumed) = &plan.resumed {
            self.restore(t, resumed);
        }
        for v in &plan.traffic.loads {
            let value = self.load_var(t, self.facts.column + v.index(), function, *v);
            t.b.def_var(t.vars[v.index()], value);
        }
        for (block, range) in &plan.shape.parts {
            let data = &function.blocks[*block];
            if range.start == 0 {
                t.take_step(data);
            }
            t.constants.clear();
            t.remainders.clear();
            t.low_tests.clear();
            t.operations_in(*block, data, range.clone(), None)?;
        }
        match &plan.call {
            Some(call) => self.call(t, call),
            None => self.terminate(t, plan.start.function, plan.last, &plan.traffic.defined),
        }
        t.b.ins().jump(self.latch, &[]);
        Ok(())
    }

    /// The loop's other blocks: a stopped member's (its code and steps,
    /// no queue), the step to the next member, and the exit, which writes
    /// the counts and the queue lengths kept in registers.
    fn close_loop(&mut self, t: &mut Translator<'_, '_, '_>, lp: &Loop) {
        t.b.switch_to_block(lp.stop);
        let code = t.b.block_params(lp.stop)[0];
        let status = self.frame.field(offsets::STATUS);
        let slot = t.b.use_var(self.row.slot);
        let half = t.b.ins().ushr_imm_u(slot, 1);
        let at = t.b.ins().iadd(status, half);
        t.b.ins().store(FLAGS, code, at, 0);
        let steps = t.b.use_var(t.steps);
        self.store_field(t, offsets::STEPS_LEFT, steps);
        t.b.ins().jump(lp.latch, &[]);

        t.b.switch_to_block(lp.propagate);
        t.b.ins().jump(lp.latch, &[]);

        t.b.switch_to_block(lp.latch);
        let i = t.b.use_var(self.row.i);
        let i = t.b.ins().iadd_imm_s(i, 1);
        t.b.def_var(self.row.i, i);
        t.b.ins().jump(lp.head, &[]);

        t.b.switch_to_block(lp.exit);
        t.flush_counts();
        let lengths = self.frame.field(offsets::LENGTHS);
        let mut queued: Vec<_> = self
            .frame
            .queues
            .iter()
            .map(|(q, (_, var))| (*q, *var))
            .collect();
        queued.sort_unstable_by_key(|(q, _)| *q);
        for (q, var) in queued {
            let length = t.b.use_var(var);
            t.b.ins().store(FLAGS, length, lengths, 8 * q as i32);
        }
        t.b.ins().return_(&[]);
    }

    /// The address of the member's slot in column `column`.
    fn column_slot(&mut self, t: &mut Translator<'_, '_, '_>, column: usize) -> Value {
        let base = self.frame.columns[&column];
        let slot = t.b.use_var(self.row.slot);
        t.b.ins().iadd(base, slot)
    }

    /// The address of the member's slot in the per-member field at `offset`.
    fn field_slot(&mut self, t: &mut Translator<'_, '_, '_>, offset: i32) -> Value {
        let base = self.frame.field(offset);
        let slot = t.b.use_var(self.row.slot);
        t.b.ins().iadd(base, slot)
    }

    fn column_field(
        &mut self,
        t: &mut Translator<'_, '_, '_>,
        offset: i32,
        ty: types::Type,
    ) -> Value {
        let at = self.field_slot(t, offset);
        t.b.ins().load(ty, FLAGS, at, 0)
    }

    fn store_field(&mut self, t: &mut Translator<'_, '_, '_>, offset: i32, value: Value) {
        let at = self.field_slot(t, offset);
        t.b.ins().store(FLAGS, value, at, 0);
    }

    fn load_var(
        &mut self,
        t: &mut Translator<'_, '_, '_>,
        column: usize,
        function: &Function,
        v: Var,
    ) -> Value {
        let at = self.column_slot(t, column);
        let ty = machine_type(function.vars[v].ty.elem);
        t.b.ins().load(ty, FLAGS, at, 0)
    }

    fn store_var(&mut self, t: &mut Translator<'_, '_, '_>, column: usize, v: Var) {
        let value = t.b.use_var(t.vars[v.index()]);
        let at = self.column_slot(t, column);
        t.b.ins().store(FLAGS, value, at, 0);
    }

    /// The address of the member's slot in result column `k`.
    fn result_slot(&mut self, t: &mut Translator<'_, '_, '_>, k: usize) -> Value {
        let base = self.frame.results[k];
        let slot = t.b.use_var(self.row.slot);
        t.b.ins().iadd(base, slot)
    }

    /// Appends the member to the queue of piece `piece`, one of the
    /// piece's [`static_targets`] (its length in a register).
    fn queue_at(&mut self, t: &mut Translator<'_, '_, '_>, piece: u32) {
        let (start, length) = self.frame.queues[&piece];
        let position = t.b.use_var(length);
        self.store_row(t, start, position);
        let grown = t.b.ins().iadd_imm_s(position, 1);
        t.b.def_var(length, grown);
    }

    /// Appends the member to the queue of `yes` if `c`, else of `no`.
    fn queue_either(&mut self, t: &mut Translator<'_, '_, '_>, c: Value, yes: u32, no: u32) {
        if yes == no {
            return self.queue_at(t, yes);
        }
        let (yes_start, yes_length) = self.frame.queues[&yes];
        let (no_start, no_length) = self.frame.queues[&no];
        let (yes_at, no_at) = (t.b.use_var(yes_length), t.b.use_var(no_length));
        let start = t.b.ins().select(c, yes_start, no_start);
        let position = t.b.ins().select(c, yes_at, no_at);
        self.store_row(t, start, position);
        let taken = t.b.ins().uextend(types::I64, c);
        let yes_at = t.b.ins().iadd(yes_at, taken);
        let not_taken = t.b.ins().bxor_imm_u(taken, 1);
        let no_at = t.b.ins().iadd(no_at, not_taken);
        t.b.def_var(yes_length, yes_at);
        t.b.def_var(no_length, no_at);
    }

    /// `start[position] = r` (a `u32` row).
    fn store_row(&mut self, t: &mut Translator<'_, '_, '_>, start: Value, position: Value) {
        let offset = t.b.ins().ishl_imm_u(position, 2);
        let at = t.b.ins().iadd(start, offset);
        let slot = t.b.use_var(self.row.slot);
        let r = t.b.ins().ushr_imm_u(slot, 3);
        t.b.ins().istore32(FLAGS, r, at, 0);
    }

    /// Appends the member to the queue of the piece numbered `piece` (an
    /// `i64`): `queues[piece * members + lengths[piece]++] = r`.
    fn queue(&mut self, t: &mut Translator<'_, '_, '_>, piece: Value) {
        let lengths = self.frame.field(offsets::LENGTHS);
        let queues = self.frame.field(offsets::QUEUES);
        let at_length = t.b.ins().ishl_imm_u(piece, 3);
        let at_length = t.b.ins().iadd(lengths, at_length);
        let length = t.b.ins().load(types::I64, FLAGS, at_length, 0);
        let grown = t.b.ins().iadd_imm_s(length, 1);
        t.b.ins().store(FLAGS, grown, at_length, 0);
        // Queue `piece` starts `piece * members * 4` bytes in.
        let queue_bytes = t.b.ins().ushr_imm_u(self.frame.stride, 1);
        let start = t.b.ins().imul(piece, queue_bytes);
        let position = t.b.ins().ishl_imm_u(length, 2);
        let offset = t.b.ins().iadd(start, position);
        let at = t.b.ins().iadd(queues, offset);
        let slot = t.b.use_var(self.row.slot);
        let r = t.b.ins().ushr_imm_u(slot, 3);
        t.b.ins().istore32(FLAGS, r, at, 0);
    }

    /// A member whose save stack has no room for `call`'s words stays at
    /// this piece, untouched, and asks the host to grow its stack.
    fn room_check(&mut self, t: &mut Translator<'_, '_, '_>, call: &CallSite<'_>) {
        let saved = self.column_field(t, offsets::SAVED, types::I64);
        let room = self.column_field(t, offsets::ROOM, types::I64);
        let need = t.b.ins().iadd_imm_s(saved, call.need as i64);
        let short = t.b.ins().icmp(IntCC::UnsignedGreaterThan, need, room);
        let grow = t.b.create_block();
        t.b.set_cold_block(grow);
        let go_on = t.b.create_block();
        t.b.ins().brif(short, grow, &[], go_on, &[]);
        t.b.switch_to_block(grow);
        let one = t.b.ins().iconst(types::I64, 1);
        t.b.ins().store(FLAGS, one, self.frame.ctx, offsets::GROW);
        self.queue_at(t, self.id);
        t.b.ins().jump(self.latch, &[]);
        t.b.switch_to_block(go_on);
    }

    /// The address of word `k` above the member's saved words `base`.
    fn stack_word(&mut self, t: &mut Translator<'_, '_, '_>, saved: Value, k: i64) -> Value {
        let stack = self.column_field(t, offsets::STACKS, types::I64);
        let words = t.b.ins().iadd_imm_s(saved, k);
        let bytes = t.b.ins().ishl_imm_u(words, 3);
        t.b.ins().iadd(stack, bytes)
    }

    /// The call at the end: depth, the saved variables and the piece to
    /// resume at, the arguments into the callee's parameters.
    fn call(&mut self, t: &mut Translator<'_, '_, '_>, call: &CallSite<'_>) {
        let depth = self.column_field(t, offsets::DEPTH_LEFT, types::I64);
        let no_room = t.b.ins().icmp_imm_s(IntCC::Equal, depth, 0);
        t.stop_if(no_room, Stop::StackOverflow(call.loc));
        let depth = t.b.ins().iadd_imm_s(depth, -1);
        self.store_field(t, offsets::DEPTH_LEFT, depth);
        let saved = self.column_field(t, offsets::SAVED, types::I64);
        let base = self.stack_word(t, saved, 0);
        for (k, v) in call.saved.iter().enumerate() {
            let value = t.b.use_var(t.vars[v.index()]);
            t.b.ins().store(FLAGS, value, base, 8 * k as i32);
        }
        let caller = self.layout.starts[self.id as usize].function;
        let resume = self.layout.piece(caller, call.block, call.at + 1);
        let resume = t.b.ins().iconst(types::I64, i64::from(resume));
        t.b.ins()
            .store(FLAGS, resume, base, 8 * call.saved.len() as i32);
        let saved = t.b.ins().iadd_imm_s(saved, call.need as i64);
        self.store_field(t, offsets::SAVED, saved);
        let values: Vec<Value> = call
            .args
            .iter()
            .map(|a| t.b.use_var(t.vars[a.index()]))
            .collect();
        let callee = &t.unit.program.functions[call.callee];
        let callee_column = self.layout.facts[&call.callee].column;
        for (p, value) in callee.params.iter().zip(values) {
            let at = self.column_slot(t, callee_column + p.index());
            t.b.ins().store(FLAGS, value, at, 0);
        }
        let steps = t.b.use_var(t.steps);
        self.store_field(t, offsets::STEPS_LEFT, steps);
        self.queue_at(t, self.layout.piece(call.callee, Function::ENTRY, 0));
    }

    /// After a call: the saved variables back from the save stack, the
    /// call's results from the result columns.
    fn restore(&mut self, t: &mut Translator<'_, '_, '_>, call: &CallSite<'_>) {
        let saved = self.column_field(t, offsets::SAVED, types::I64);
        let saved = t.b.ins().iadd_imm_s(saved, -(call.need as i64));
        let base = self.stack_word(t, saved, 0);
        for (k, v) in call.saved.iter().enumerate() {
            let ty = machine_type(t.function.vars[*v].ty.elem);
            let value = t.b.ins().load(ty, FLAGS, base, 8 * k as i32);
            t.b.def_var(t.vars[v.index()], value);
        }
        self.store_field(t, offsets::SAVED, saved);
        for (k, d) in call.dsts.iter().enumerate() {
            let ty = machine_type(t.function.vars[*d].ty.elem);
            let at = self.result_slot(t, k);
            let value = t.b.ins().load(ty, FLAGS, at, 0);
            t.b.def_var(t.vars[d.index()], value);
        }
    }

    /// The block's terminator: the variables live after it written back,
    /// and the next piece (for a return: the results, and the piece the
    /// save stack names, or none from the entry).
    fn terminate(
        &mut self,
        t: &mut Translator<'_, '_, '_>,
        function_id: FuncId,
        block: Block,
        defined: &[bool],
    ) {
        let function = t.function;
        let term = &function.blocks[block].term;
        let live = &self.facts.liveness.live_out[block.index()];
        for v in live.iter().filter(|v| defined[v.index()]) {
            self.store_var(t, self.facts.column + v.index(), v);
        }
        let steps = t.b.use_var(t.steps);
        self.store_field(t, offsets::STEPS_LEFT, steps);
        let layout = self.layout;
        let piece = |target: Block| layout.piece(function_id, target, 0);
        match term {
            Terminator::Jump(target) => {
                let to = piece(*target);
                self.queue_at(t, to);
            }
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            } => {
                let (yes, no) = (piece(*then_block), piece(*else_block));
                let c = t.b.use_var(t.vars[cond.index()]);
                self.queue_either(t, c, yes, no);
            }
            Terminator::Return(values) => {
                let values: Vec<Value> = values
                    .iter()
                    .map(|v| t.b.use_var(t.vars[v.index()]))
                    .collect();
                for (k, value) in values.into_iter().enumerate() {
                    let at = self.result_slot(t, k);
                    t.b.ins().store(FLAGS, value, at, 0);
                }
                let depth = self.column_field(t, offsets::DEPTH_LEFT, types::I64);
                let depth = t.b.ins().iadd_imm_s(depth, 1);
                self.store_field(t, offsets::DEPTH_LEFT, depth);
                let saved = self.column_field(t, offsets::SAVED, types::I64);
                let back = t.b.create_block();
                let returned = t.b.create_block();
                let after = t.b.create_block();
                t.b.ins().brif(saved, back, &[], returned, &[]);
                t.b.switch_to_block(back);
                let word = self.stack_word(t, saved, -1);
                let resume = t.b.ins().load(types::I64, FLAGS, word, 0);
                self.queue(t, resume);
                t.b.ins().jump(after, &[]);
                t.b.switch_to_block(returned);
                let status = self.frame.field(offsets::STATUS);
                let slot = t.b.use_var(self.row.slot);
                let half = t.b.ins().ushr_imm_u(slot, 1);
                let at = t.b.ins().iadd(status, half);
                let code = t.b.ins().iconst(types::I32, i64::from(RETURNED as i32));
                t.b.ins().store(FLAGS, code, at, 0);
                t.b.ins().jump(after, &[]);
                t.b.switch_to_block(after);
            }
        }
    }
}
