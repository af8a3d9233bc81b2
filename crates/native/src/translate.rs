//! The JIT module of one program: the native functions' signatures, the
//! shims, each IR function's translation ([`function`]), the trampoline
//! the host calls, and linking.
//!
//! Every IR function `f(p..) -> (r..)` becomes
//! `f(context, depth_left, steps_left, p..) -> (steps_left, r..)`: the
//! depth the member may still grow by and the steps it may still take
//! travel in registers; a stop is written to `context.status` and every
//! caller, seeing it after the call, returns at once (or, at a catching
//! call, recovers). An array parameter is a pointer to the caller's
//! elements (the callee copies them into its own frame on entry); an array
//! result is not returned but written, on return, through a pointer the
//! caller passes after the parameters (one per array result, in order).

mod budget;
mod fork;
mod function;
mod inline;
mod loops;
pub(crate) mod pieces;
mod popped;
mod prims;
mod select;
mod tail;

use std::collections::HashMap;

use autobatch_ir::{FuncId, Function, Op, Program};
use autobatch_kernels::Fault;
use autobatch_types::{ErrorKind, Loc, ScalarType, TensorType};
use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, MemFlagsData, Signature, Type, UserFuncName,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{ArenaMemoryProvider, JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};

use crate::arrays::{self, ArrayOp};
use crate::forks;
use crate::{
    offsets, operand, shims, Counting, Interrupts, Lengths, NativeProgram, Segment, Stop,
    Trampoline,
};

/// The bit of a stop code that a catching call does not recover from.
pub(crate) const UNCATCHABLE: u32 = 1 << 30;

/// The code `context.status` holds for stop number `index`.
pub(crate) fn stop_code(index: usize, stop: &Stop) -> u32 {
    let code = index as u32 + 1;
    if stop.catchable() {
        code
    } else {
        code | UNCATCHABLE
    }
}

/// The stop number of a status code.
pub(crate) fn stop_index(code: u32) -> usize {
    ((code & !UNCATCHABLE) - 1) as usize
}

/// The machine type of a scalar type (`bool` is a byte, 0 or 1).
pub(crate) fn machine_type(ty: ScalarType) -> Type {
    match ty {
        ScalarType::Bool => types::I8,
        ScalarType::I32 => types::I32,
        ScalarType::I64 | ScalarType::Usize => types::I64,
        ScalarType::F32 => types::F32,
        ScalarType::F64 => types::F64,
    }
}

/// What every function's translation shares: the module, the ids of the
/// native functions and shims, and the stops and segments found so far.
pub(crate) struct Unit<'p> {
    pub program: &'p Program,
    pub jit: JITModule,
    pub ids: HashMap<FuncId, cranelift_module::FuncId>,
    pub shims: HashMap<&'static str, cranelift_module::FuncId>,
    pub stops: Vec<Stop>,
    /// Per stop: whether its fault is the one the host left in the context.
    pub dynamic: Vec<bool>,
    pub segments: Vec<Segment>,
    /// The lengths compiled for: constants, and the per-member ones the
    /// code reads from the context ([`crate::lengths`]).
    pub lengths: &'p Lengths,
    pub arrays: Vec<ArrayOp>,
    /// How many branches were merged into selects (`function::select`).
    pub merged_branches: usize,
    /// Functions whose self tail call became a jump (`tail`).
    pub tail_calls: usize,
    /// Loops with one step test per pass (`budget`).
    pub fast_loops: usize,
    /// Loops of fused array operations emitted (`fused`).
    pub fused_loops: usize,
    pub counting: Counting,
    pub interrupts: Interrupts,
    /// Whether the program uses a tape (a derived function's parts): then
    /// a catching call sets the member's tape aside (`forks::catch_begin`).
    pub taped: bool,
    /// Per function: whether nothing is pushed on the tape while it runs
    /// ([`popped::quiet`]).
    pub quiet: Vec<bool>,
}

impl<'p> Unit<'p> {
    /// A unit with a new module and nothing translated yet.
    pub fn new(
        program: &'p Program,
        lengths: &'p Lengths,
        counting: Counting,
        interrupts: Interrupts,
    ) -> Result<Unit<'p>, String> {
        Ok(Unit {
            program,
            jit: new_module()?,
            ids: HashMap::new(),
            shims: HashMap::new(),
            stops: Vec::new(),
            dynamic: Vec::new(),
            segments: Vec::new(),
            lengths,
            arrays: Vec::new(),
            merged_branches: 0,
            tail_calls: 0,
            fast_loops: 0,
            fused_loops: 0,
            counting,
            interrupts,
            taped: program
                .functions
                .values()
                .flat_map(|f| f.blocks.values())
                .flat_map(|b| &b.ops)
                .any(|op| matches!(op, autobatch_ir::Op::Prim { prim, .. } if prim.is_tape())),
            quiet: popped::quiet(program),
        })
    }

    /// Per symbol: its length, or for a per-member one its capacity (what
    /// the frames are sized for).
    pub fn symbols(&self) -> &'p [u64] {
        &self.lengths.values
    }

    /// Registers a stop and gives its status code.
    pub fn stop(&mut self, stop: Stop) -> u32 {
        let code = stop_code(self.stops.len(), &stop);
        self.stops.push(stop);
        self.dynamic.push(false);
        code
    }

    /// Registers the stop of a fault an array operation at `loc` reports
    /// (its message is the context's), and gives its status code.
    pub fn dynamic_fault(&mut self, loc: Loc) -> u32 {
        // A placeholder: the run reports the fault the host left.
        let fault = Fault::new(ErrorKind::IndexOutOfBounds, "");
        let code = self.stop(Stop::Fault { fault, loc });
        *self.dynamic.last_mut().expect("just pushed") = true;
        code
    }
}

/// Whether Cranelift verifies each function it compiles (see `new_module`).
const VERIFY: &str = if cfg!(debug_assertions) {
    "true"
} else {
    "false"
};

fn new_module() -> Result<JITModule, String> {
    let mut flags = settings::builder();
    for (name, value) in [
        ("opt_level", "speed"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        ("enable_multi_ret_implicit_sret", "true"),
        // Cranelift's verifier checks the IR this crate builds: on in
        // debug builds (every test), off in release builds, where it would
        // only add compile time (docs/benchmarks.md, "Compiling").
        ("enable_verifier", VERIFY),
    ] {
        flags
            .set(name, value)
            .map_err(|e| format!("Cranelift setting {name}: {e}"))?;
    }
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this machine is not supported by Cranelift: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| format!("Cranelift: {e}"))?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    builder.memory_provider(Box::new(code_region()?));
    for shim in shims::all() {
        builder.symbol(shim.name, shim.address);
    }
    builder.symbol(ARRAY_OP, arrays::array_op as *const u8);
    builder.symbol(COPY_BYTES, arrays::copy_bytes as *const u8);
    builder.symbol(ZERO_BYTES, arrays::zero_bytes as *const u8);
    builder.symbol(TAPE_POP, arrays::tape_pop_in_place as *const u8);
    builder.symbol(FORK_BEGIN, forks::fork_begin as *const u8);
    builder.symbol(INSTANCE_BEGIN, forks::instance_begin as *const u8);
    builder.symbol(INSTANCE_END, forks::instance_end as *const u8);
    builder.symbol(FORK_END, forks::fork_end as *const u8);
    builder.symbol(CATCH_BEGIN, forks::catch_begin as *const u8);
    builder.symbol(CATCH_END, forks::catch_end as *const u8);
    Ok(JITModule::new(builder))
}

/// The address space a module's code is placed in, reserved (not committed)
/// when the module is created.
const CODE_REGION_BYTES: usize = 256 << 20;

/// One contiguous region for all of a module's code: calls between its
/// functions are encoded relative to the caller (32-bit displacements), so
/// the functions must lie within 2 GiB of each other, which separately
/// mapped pages do not promise.
fn code_region() -> Result<ArenaMemoryProvider, String> {
    ArenaMemoryProvider::new_with_size(CODE_REGION_BYTES)
        .map_err(|e| format!("cannot reserve address space for native code: {e}"))
}

/// The host's array operations and copies (`crate::arrays`).
pub(crate) const ARRAY_OP: &str = "autobatch_array_op";
pub(crate) const COPY_BYTES: &str = "autobatch_copy_bytes";
pub(crate) const ZERO_BYTES: &str = "autobatch_zero_bytes";
pub(crate) const TAPE_POP: &str = "autobatch_tape_pop_in_place";
pub(crate) const FORK_BEGIN: &str = "autobatch_fork_begin";
pub(crate) const INSTANCE_BEGIN: &str = "autobatch_instance_begin";
pub(crate) const INSTANCE_END: &str = "autobatch_instance_end";
pub(crate) const FORK_END: &str = "autobatch_fork_end";
pub(crate) const CATCH_BEGIN: &str = "autobatch_catch_begin";
pub(crate) const CATCH_END: &str = "autobatch_catch_end";

/// The machine type a value of `ty` travels as: its scalar's, or a pointer.
pub(crate) fn value_type(ty: &TensorType) -> Type {
    if ty.is_scalar() {
        machine_type(ty.elem)
    } else {
        types::I64
    }
}

/// The native signature of an IR function (see the module doc).
fn signature(jit: &JITModule, function: &Function) -> Signature {
    let mut sig = jit.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(types::I64));
    }
    for p in &function.params {
        sig.params
            .push(AbiParam::new(value_type(&function.vars[*p].ty)));
    }
    sig.returns.push(AbiParam::new(types::I64));
    for r in &function.results {
        if r.is_scalar() {
            sig.returns.push(AbiParam::new(machine_type(r.elem)));
        } else {
            sig.params.push(AbiParam::new(types::I64));
        }
    }
    sig
}

/// Compiles `functions` (every function `entry` reaches, all supported).
pub(crate) fn compile(
    program: &Program,
    entry: FuncId,
    functions: &[FuncId],
    lengths: &Lengths,
    counting: Counting,
    interrupts: Interrupts,
) -> Result<NativeProgram, String> {
    let symbols = lengths.values.as_slice();
    let mut unit = Unit::new(program, lengths, counting, interrupts)?;
    let outcome = define_all(&mut unit, entry, functions);
    let trampoline = match outcome {
        Ok(trampoline) => trampoline,
        Err(reason) => {
            // SAFETY: nothing of the module has run.
            unsafe { unit.jit.free_memory() };
            return Err(reason);
        }
    };
    let entry_function = &program.functions[entry];
    let frame_bytes = functions
        .iter()
        .map(|f| frame_bound(&program.functions[*f], symbols))
        .max()
        .unwrap_or(0);
    Ok(NativeProgram {
        _module: crate::CodeMemory::new(unit.jit),
        trampoline,
        params: entry_function
            .params
            .iter()
            .map(|p| operand(&entry_function.vars[*p].ty, symbols))
            .collect(),
        results: entry_function
            .results
            .iter()
            .map(|r| operand(r, symbols))
            .collect(),
        param_types: entry_function
            .params
            .iter()
            .map(|p| entry_function.vars[*p].ty.clone())
            .collect(),
        result_types: entry_function.results.clone(),
        stops: unit.stops,
        dynamic: unit.dynamic,
        draws: unit.arrays.iter().any(|op| op.prim.is_random()),
        arrays: unit.arrays,
        lengths: lengths.clone(),
        segments: unit.segments,
        frame_bytes,
        entry_loc: entry_function.loc,
        functions: functions.len(),
        merged_branches: unit.merged_branches,
        tail_calls: unit.tail_calls,
        fast_loops: unit.fast_loops,
        fused_loops: unit.fused_loops,
        interrupts,
    })
}

/// A generous bound on one activation's machine frame: the return
/// address, saved registers, a slot per variable and temporary, and the
/// frame area of its arrays.
fn frame_bound(function: &Function, symbols: &[u64]) -> usize {
    let ops: usize = function.blocks.values().map(|b| b.ops.len()).sum();
    let args = function
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .map(|op| match op {
            Op::Prim { args, .. } | Op::Call { args, .. } | Op::Fork { args, .. } => args.len(),
        })
        .max()
        .unwrap_or(0);
    let area = function::array_area(function, symbols).bytes;
    // Copies of call arguments that are also the call's results.
    let copies: usize = function
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .map(|op| match op {
            Op::Call { dsts, args, .. } | Op::Fork { dsts, args, .. } => args
                .iter()
                .filter(|a| dsts.contains(a) && !function.vars[**a].ty.is_scalar())
                .map(|a| crate::operand(&function.vars[*a].ty, symbols).bytes() + 8)
                .sum(),
            _ => 0,
        })
        .sum();
    128 + 16 * (function.vars.len() + ops + args) + area + copies
}

/// Declares and defines every function, the trampoline, and links.
fn define_all(
    unit: &mut Unit<'_>,
    entry: FuncId,
    functions: &[FuncId],
) -> Result<Trampoline, String> {
    let program = unit.program;
    for &id in functions {
        let function = &program.functions[id];
        let sig = signature(&unit.jit, function);
        let name = format!("autobatch_f{}", id.0);
        let native = unit
            .jit
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| format!("Cranelift: {e}"))?;
        unit.ids.insert(id, native);
    }
    let mut builder_context = FunctionBuilderContext::new();
    let mut context = unit.jit.make_context();
    for &id in functions {
        let function = &program.functions[id];
        context.func.signature = signature(&unit.jit, function);
        context.func.name = UserFuncName::user(0, unit.ids[&id].as_u32());
        function::translate(
            unit,
            id,
            FunctionBuilder::new(&mut context.func, &mut builder_context),
        )?;
        let disasm = std::env::var_os("AUTOBATCH_NATIVE_DISASM").is_some();
        context.set_disasm(disasm);
        unit.jit
            .define_function(unit.ids[&id], &mut context)
            .map_err(|e| format!("Cranelift could not compile `{}`: {e:?}", function.name))?;
        if let Some(code) = context
            .compiled_code()
            .and_then(|c| c.vcode.as_ref())
            .filter(|_| disasm)
        {
            eprintln!("; `{}` (autobatch_f{})\n{code}", function.name, id.0);
        }
        unit.jit.clear_context(&mut context);
    }
    let trampoline = define_trampoline(unit, entry, &mut context, &mut builder_context)?;
    unit.jit
        .finalize_definitions()
        .map_err(|e| format!("Cranelift could not link: {e}"))?;
    let address = unit.jit.get_finalized_function(trampoline);
    // SAFETY: the trampoline was defined with the signature of `Trampoline`
    // in the platform's C calling convention.
    Ok(unsafe { std::mem::transmute::<*const u8, Trampoline>(address) })
}

/// `trampoline(context, args, results)`: loads the entry's arguments (one
/// 8-byte slot each), its depth and steps from `context`, calls it, and
/// stores its steps and results back.
fn define_trampoline(
    unit: &mut Unit<'_>,
    entry: FuncId,
    context: &mut cranelift_codegen::Context,
    builder_context: &mut FunctionBuilderContext,
) -> Result<cranelift_module::FuncId, String> {
    let function = &unit.program.functions[entry];
    let mut sig = unit.jit.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(types::I64));
    }
    let id = unit
        .jit
        .declare_function("autobatch_trampoline", Linkage::Local, &sig)
        .map_err(|e| format!("Cranelift: {e}"))?;
    context.func.signature = sig;
    context.func.name = UserFuncName::user(1, 0);
    let mut b = FunctionBuilder::new(&mut context.func, builder_context);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let (ctx, args, results) = (
        b.block_params(block)[0],
        b.block_params(block)[1],
        b.block_params(block)[2],
    );
    let flags = MemFlagsData::trusted();
    let depth = b.ins().load(types::I64, flags, ctx, offsets::DEPTH_LEFT);
    let steps = b.ins().load(types::I64, flags, ctx, offsets::STEPS_LEFT);
    let mut call_args = vec![ctx, depth, steps];
    for (i, p) in function.params.iter().enumerate() {
        let ty = value_type(&function.vars[*p].ty);
        call_args.push(b.ins().load(ty, flags, args, 8 * i as i32));
    }
    // An array result's slot holds the pointer to write it through.
    for (i, r) in function.results.iter().enumerate() {
        if !r.is_scalar() {
            call_args.push(b.ins().load(types::I64, flags, results, 8 * i as i32));
        }
    }
    let callee = unit.jit.declare_func_in_func(unit.ids[&entry], b.func);
    let call = b.ins().call(callee, &call_args);
    let returned = b.inst_results(call).to_vec();
    b.ins().store(flags, returned[0], ctx, offsets::STEPS_LEFT);
    let scalar_slots = function
        .results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_scalar())
        .map(|(i, _)| i);
    for (i, value) in scalar_slots.zip(&returned[1..]) {
        b.ins().store(flags, *value, results, 8 * i as i32);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(unit.jit.target_config());
    unit.jit
        .define_function(id, context)
        .map_err(|e| format!("Cranelift could not compile the trampoline: {e:?}"))?;
    unit.jit.clear_context(context);
    Ok(id)
}
