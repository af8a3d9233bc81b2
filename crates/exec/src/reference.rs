//! The reference executor: the definition of what every member computes.
//!
//! It runs the members one at a time, in member order, each alone from its
//! entry block to its result or its first error, executing the operations in
//! the order of the source. Every other strategy must agree with it on every
//! member's results and errors.
//!
//! The rules it defines for all strategies:
//!
//! - **Steps.** A member executes one step each time it enters a basic block,
//!   the entry block of every call included. A member that is about to enter a
//!   block after `max_steps` steps stops with `step_limit` at that block's loc.
//! - **Stack depth.** The entry function's activation is depth 1. A call that
//!   would make the depth exceed `max_stack_depth` stops the member with
//!   `stack_overflow` at the call (with a limit of 0, the entry itself
//!   overflows, at the entry function's loc). The depth check comes before
//!   the step check of the callee's entry block.
//! - **Faults.** A primitive that faults stops the member with the fault's
//!   kind and message at the operation's loc, unless the member is inside a
//!   `catch(f(..))` and the error is catchable (every kind but `step_limit`):
//!   then the innermost such call gives `(false, zeros)` and the member goes
//!   on after it, with the steps and random draws it used inside counted.
//!   A catching call that would overflow the stack is caught the same way.
//! - **Counts.** An operation counts as executed by a member when the member
//!   reaches it, even if it then faults.
//! - **Instances.** A fork (`join`, `map`, `pfor`) runs its instances one
//!   after the other, in order (a `join`'s calls left to right, a `map`'s
//!   `k` ascending), each to completion before the next, exactly as calls:
//!   an instance's depth is its parent's plus one, its blocks are the
//!   member's steps, and its first error is the member's (or is caught by a
//!   `catch` around the fork). At the fork the member's stream gives the
//!   fork's key ([`MemberRng::fork`], four words); instance `k` draws from
//!   the key's stream `k`, and the member's own stream comes back after the
//!   last instance (or when an error unwinds past the fork).
//!
//! Calls do not use host recursion: each member has an explicit stack of
//! frames, so a deep recursion in a program cannot overflow the host stack.
//! A variable loaded from a static borrows the run's copy of the static
//! ([`Held::Borrowed`]) until it is changed, so a recursion reading a large
//! static neither copies it per call nor keeps a copy per frame.
//!
//! [`run_member`] runs one member alone: the batching executors use it to
//! place a `step_limit` met inside instances exactly (see
//! `crate::batched::lanes`).
//!
//! [`Reference`] registers it as the `reference` strategy.

use std::borrow::Cow;
use std::time::Instant;

use autobatch_ir::{
    fork_calls, Block, EntityRef, FuncId, Function, InstanceArg, Instances, Loc, Op, Prim, Program,
    TapeMode, Terminator, Var,
};
use autobatch_kernels::{
    adjoints::AdjointLog, dim_length, eval, layout, Backend, Fault, ForkKey, MemberRng,
    PrimContext, Tape,
};
use autobatch_types::{Data, MemberError, Scalar, Tensor};

use crate::internal::internal_error;
use crate::memory::concrete_shape;
use crate::monitor::{interrupted, stack_overflow, step_limit, OpCounter, Watch};
use crate::{Batch, Env, ExecError, Executor, RunOptions, RunOutput, Stats};
use autobatch_passes::last_reads::{last_reads, LastReads};

/// The reference executor in the registry ([`crate::EXECUTORS`]).
pub struct Reference;

impl Executor for Reference {
    fn name(&self) -> &'static str {
        "reference"
    }

    fn description(&self) -> &'static str {
        "one member at a time; defines every result"
    }

    fn uses_backend(&self) -> bool {
        false
    }

    /// Ignores `backend`: the reference defines every result, so it computes
    /// with the kernels themselves.
    fn run(
        &self,
        _backend: &dyn Backend,
        program: &Program,
        env: &Env,
        batch: &Batch,
        options: &RunOptions,
    ) -> Result<RunOutput, ExecError> {
        // One member runs at a time: its variables count once.
        let one_member: u128 = program.functions[batch.entry]
            .vars
            .values()
            .map(|v| crate::memory::value_bytes(&v.ty, &env.symbols))
            .sum();
        crate::memory::check_memory(0, batch.size, one_member).map_err(ExecError::Resources)?;
        Ok(run(program, env, batch, options))
    }
}

/// Runs every member of `batch` alone, in member order.
pub fn run(program: &Program, env: &Env, batch: &Batch, options: &RunOptions) -> RunOutput {
    let entry = match program.functions.get(batch.entry) {
        Some(f) => f,
        None => internal_error(format!("the entry function {} does not exist", batch.entry)),
    };
    if batch.args.len() != entry.params.len() {
        internal_error(format!(
            "{} arguments for the {} parameters of {}",
            batch.args.len(),
            entry.params.len(),
            entry.name
        ));
    }

    let (mut op_counter, count_slots) = OpCounter::for_program(program);
    op_counter.lanes = batch.size as u64;
    let plan = Plan {
        count_slots,
        last_reads: program.functions.values().map(last_reads).collect(),
        tape_bound: options.tape_bound(),
    };
    let mut counters = Counters {
        ops: op_counter,
        steps: 0,
        watch: Watch::new(options),
        instances: 0,
        live_instances: 0,
        peak_instances: 0,
        tape_bytes: 0,
        adjoints: AdjointLog::spare(),
    };
    let started = Instant::now();
    let results = (0..batch.size)
        .map(|member| run_one(program, &plan, options, &mut counters, env, batch, member))
        .collect();
    let wall_seconds = started.elapsed().as_secs_f64();

    let (op_counts, lane_utilization) = counters.ops.finish();
    RunOutput {
        results,
        adjoints: counters.adjoints,
        stats: Stats {
            steps: counters.steps,
            lane_utilization,
            instances: counters.instances,
            peak_instances: counters.peak_instances,
            tape_bytes: counters.tape_bytes as u64,
            op_counts,
            wall_seconds,
            ..Stats::default()
        },
    }
}

/// Runs member `member` of `batch` alone, exactly as [`run`] would, and
/// gives its outcome (nothing else: no figures, no observer). The batching
/// executors use it for the one outcome they cannot place exactly: a
/// member that forked and ran out of steps.
pub fn run_member(
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
    member: usize,
) -> Result<Vec<Tensor>, MemberError> {
    run_member_logged(program, env, batch, options, member).result
}

/// What [`run_member_logged`] gives: the member's outcome, and its
/// contributions to static adjoints (none if it failed).
pub struct LoggedMember {
    pub result: Result<Vec<Tensor>, MemberError>,
    pub adjoints: AdjointLog,
}

/// [`run_member`] with the member's log of static adjoints (the native
/// strategy's fallback for a member whose machine stack ran out).
pub fn run_member_logged(
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
    member: usize,
) -> LoggedMember {
    let options = RunOptions {
        observer: None,
        ..options.clone()
    };
    let (ops, count_slots) = OpCounter::for_program(program);
    let plan = Plan {
        count_slots,
        last_reads: program.functions.values().map(last_reads).collect(),
        tape_bound: options.tape_bound(),
    };
    let mut counters = Counters {
        ops,
        steps: 0,
        watch: Watch::new(&options),
        instances: 0,
        live_instances: 0,
        peak_instances: 0,
        tape_bytes: 0,
        adjoints: AdjointLog::new(),
    };
    let result = run_one(program, &plan, &options, &mut counters, env, batch, member);
    LoggedMember {
        result,
        adjoints: counters.adjoints,
    }
}

/// Runs one member, adding its figures to `counters`.
fn run_one(
    program: &Program,
    plan: &Plan,
    options: &RunOptions,
    counters: &mut Counters<'_>,
    env: &Env,
    batch: &Batch,
    member: usize,
) -> Result<Vec<Tensor>, MemberError> {
    counters.live_instances = 0;
    let mut run = MemberRun {
        program,
        plan,
        options,
        counters,
        steps: 0,
        member: member as u32,
        deadline: None,
        tape: Tape::default(),
    };
    let mark = run.counters.adjoints.mark();
    let outcome = run.run(env, batch, member);
    let steps = run.steps;
    if outcome.is_err() {
        // A member that faults contributes nothing.
        counters.adjoints.truncate(mark);
    }
    counters.steps += steps;
    outcome
}

/// What the executor precomputes once per program: where each user
/// operation is counted, and which reads may move their value.
struct Plan {
    /// Per function, per block, per op: the counter of a user primitive.
    count_slots: Vec<Vec<Vec<Option<usize>>>>,
    last_reads: Vec<LastReads>,
    /// The most bytes a member's tape may hold ([`RunOptions::tape_bound`]).
    tape_bound: usize,
}

/// Figures summed over all members. One member runs at a time, so every
/// execution of an operation has exactly one active lane.
struct Counters<'a> {
    ops: OpCounter,
    steps: u64,
    watch: Watch<'a>,
    /// Instances started, and how many run (are on the stack) now and at most.
    instances: u64,
    live_instances: u64,
    peak_instances: u64,
    /// The most bytes a member's tape held ([`Tape::held`]).
    tape_bytes: usize,
    /// The contributions to static adjoints of the members that finished.
    adjoints: AdjointLog,
}

/// A variable's value: its own, or a static of the run, borrowed.
type Held<'e> = Cow<'e, Tensor>;

/// One activation of a function.
struct Frame<'e> {
    function: FuncId,
    block: Block,
    /// The next operation of `block` to execute; past the end, the terminator.
    next_op: usize,
    /// The value of each variable of `function`; `None` before its first
    /// assignment and after its value was moved out by a last read.
    vars: Vec<Option<Held<'e>>>,
    /// While the frame waits at a fork: which instance runs, and what the
    /// finished ones gave.
    fork: Option<Box<ForkState>>,
    /// While the frame waits at a catching call: the lane's tape, set aside
    /// (the callee starts with an empty one) and given back when the call
    /// ends, completed or caught, so that a caught failure leaves nothing
    /// of what it pushed.
    caught_tape: Option<Tape>,
}

impl<'e> Frame<'e> {
    /// A new activation of `function`, at its entry, with `vars` (its
    /// parameters set).
    fn entry(function: FuncId, vars: Vec<Option<Held<'e>>>) -> Frame<'e> {
        Frame {
            function,
            block: Function::ENTRY,
            next_op: 0,
            vars,
            fork: None,
            caught_tape: None,
        }
    }
}

/// A fork in progress: its instances run one after the other, each in a
/// frame pushed above the forking one, with its own random stream.
struct ForkState {
    key: ForkKey,
    /// The instance running now.
    next: usize,
    total: usize,
    /// The forking frame's stream, while an instance's is in use.
    parent_rng: Option<MemberRng>,
    /// For a `map`: per result, the finished instances' values in order.
    elements: Vec<Vec<Tensor>>,
    /// What becomes of the instances' tapes.
    mode: TapeMode,
    /// The forking frame's tape, while the instances of a taped fork use
    /// theirs.
    parent_tape: Option<Tape>,
    /// `Save`: the finished instances' tapes, in order; `Restore`: the
    /// tapes the instances get, by index.
    tapes: Vec<Tape>,
}

/// A call operation, with which of its arguments are read for the last
/// time.
struct Call<'p> {
    callee: FuncId,
    args: &'p [Var],
    last_reads: &'p [bool],
    loc: Loc,
    catch: bool,
}

/// The execution of one member.
struct MemberRun<'a, 'w> {
    program: &'a Program,
    plan: &'a Plan,
    options: &'a RunOptions,
    counters: &'a mut Counters<'w>,
    /// Blocks this member has entered.
    steps: u64,
    /// The member its contributions to static adjoints (logged straight
    /// into `counters`) name.
    member: u32,
    /// Once the run is interrupted, the steps the member may reach
    /// ([`crate::INTERRUPT_GRACE_STEPS`] after the first block it enters).
    deadline: Option<u64>,
    /// The tape of the lane that runs ([`Prim::TapePush`]): the member's,
    /// shared by the instances of an untaped fork (which run one after the
    /// other and each leave it as they found it); an instance of a taped
    /// fork has its own ([`ForkState::parent_tape`]).
    tape: Tape,
}

impl<'a> MemberRun<'a, '_> {
    fn run<'e>(
        &mut self,
        env: &'e Env,
        batch: &'e Batch,
        member: usize,
    ) -> Result<Vec<Tensor>, MemberError> {
        let program = self.program;
        let entry = &program.functions[batch.entry];
        if self.options.max_stack_depth == 0 {
            return Err(stack_overflow(self.options.max_stack_depth, entry.loc));
        }
        let mut vars = vec![None; entry.vars.len()];
        for (param, arg) in entry.params.iter().zip(&batch.args) {
            vars[param.index()] = Some(Cow::Borrowed(arg.for_member(member)));
        }
        self.enter_block(entry, Function::ENTRY)?;
        let mut stack = vec![Frame::entry(batch.entry, vars)];
        let mut rng = MemberRng::new(self.options.seed, self.options.member_id(member));
        let mut ctx = PrimContext {
            statics: &env.statics,
            symbols: &env.symbols,
            rng: &mut rng,
            hosts: &env.hosts,
        };

        loop {
            match self.step(&mut stack, &mut ctx, env) {
                Ok(None) => {}
                Ok(Some(values)) => {
                    if !self.tape.is_empty() {
                        internal_error("a member finished with values left on its tape");
                    }
                    return Ok(values);
                }
                Err(error) => self.unwind(&mut stack, error, env, ctx.rng)?,
            }
        }
    }

    /// Runs the member's next operation or terminator. Gives its results
    /// when its entry function returns.
    fn step<'e>(
        &mut self,
        stack: &mut Vec<Frame<'e>>,
        ctx: &mut PrimContext<'_>,
        env: &'e Env,
    ) -> Result<Option<Vec<Tensor>>, MemberError> {
        let program = self.program;
        let plan = self.plan;
        let Some(frame) = stack.last_mut() else {
            unreachable!("the run returns when the stack empties")
        };
        let (f, b, op_index) = (frame.function.index(), frame.block.index(), frame.next_op);
        let block = &program.functions[frame.function].blocks[frame.block];
        let Some(op) = block.ops.get(op_index) else {
            return self.terminate(stack, &block.term, ctx, env);
        };
        frame.next_op += 1;
        let last_reads = &plan.last_reads[f].ops[b][op_index];
        match op {
            Op::Prim {
                dst,
                prim,
                args,
                loc,
            } => {
                self.counters
                    .ops
                    .record(plan.count_slots[f][b][op_index], 1);
                if let Prim::StaticAdjoint(adjoint) = prim {
                    let operands: Vec<&Tensor> =
                        args.iter().map(|v| borrow(&frame.vars, *v)).collect();
                    let log = &mut self.counters.adjoints;
                    log.push_tensors(self.member, adjoint, &operands);
                    return Ok(None);
                }
                if prim.is_tape() {
                    self.move_tape(&mut frame.vars, prim, *dst, args)
                        .map_err(|fault| MemberError::new(fault.kind, fault.message, *loc))?;
                    return Ok(None);
                }
                let value = eval_prim(&mut frame.vars, prim, args, last_reads, env, ctx)
                    .map_err(|fault| MemberError::new(fault.kind, fault.message, *loc))?;
                match (dst, value) {
                    (Some(dst), Some(value)) => frame.vars[dst.index()] = Some(value),
                    (None, None) => {}
                    (dst, value) => internal_error(format!(
                        "{} wrote {} result(s) into {} variable(s)",
                        prim.name(),
                        usize::from(value.is_some()),
                        usize::from(dst.is_some())
                    )),
                }
            }
            Op::Call {
                callee,
                args,
                loc,
                catch,
                ..
            } => {
                let call = Call {
                    callee: *callee,
                    args,
                    last_reads,
                    loc: *loc,
                    catch: *catch,
                };
                self.call(stack, &call, env)?;
            }
            Op::Fork {
                dsts,
                instances,
                tape,
                ..
            } => {
                frame.fork = Some(Box::new(self.fork_state(
                    dsts.len(),
                    instances,
                    *tape,
                    ctx,
                    env,
                )));
                self.next_instance(stack, ctx, env)?;
            }
        }
        Ok(None)
    }

    /// The state of a fork as it starts: its instances, its key (a
    /// `Restore` fork, or one run again by a recomputation, draws none: its
    /// instances draw nothing) and its tapes.
    fn fork_state(
        &mut self,
        results: usize,
        instances: &Instances,
        tape: TapeMode,
        ctx: &mut PrimContext<'_>,
        env: &Env,
    ) -> ForkState {
        let total = match instances {
            Instances::Join(calls) => calls.len(),
            Instances::Map { count, .. } => dim_length(&env.symbols, *count),
        };
        let key = if tape.draws_key() {
            ctx.rng.fork()
        } else {
            ctx.rng.clone().fork()
        };
        let (parent_tape, tapes) = self.fork_tapes(tape, total);
        ForkState {
            key,
            next: 0,
            total,
            parent_rng: None,
            elements: vec![Vec::new(); results],
            mode: tape,
            parent_tape,
            tapes,
        }
    }

    /// Starts the next instance of the fork the top frame waits at, in a
    /// frame of its own with its own stream, or, when every instance has
    /// returned, gives the fork its results and the frame its stream back.
    fn next_instance<'e>(
        &mut self,
        stack: &mut Vec<Frame<'e>>,
        ctx: &mut PrimContext<'_>,
        env: &'e Env,
    ) -> Result<(), MemberError> {
        let depth = stack.len();
        let Some(frame) = stack.last_mut() else {
            unreachable!("a fork is made from a frame")
        };
        let Some(
            op @ Op::Fork {
                dsts,
                args,
                instances,
                loc,
                ..
            },
        ) = self.pending_op(frame)
        else {
            internal_error("a fork state on a frame that waits at no fork");
        };
        let Some(state) = frame.fork.as_deref_mut() else {
            internal_error("a frame waits at a fork without its state");
        };
        let k = state.next;
        if k == state.total {
            if let Some(parent) = state.parent_rng.take() {
                *ctx.rng = parent;
            }
            if let Some(parent) = state.parent_tape.take() {
                self.tape = parent;
                if state.mode.saves() {
                    self.tape.push_instances(std::mem::take(&mut state.tapes));
                    self.note_tape();
                }
            }
            let elements = std::mem::take(&mut state.elements);
            frame.fork = None;
            if let Instances::Map { .. } = instances {
                let function = &self.program.functions[frame.function];
                for (dst, values) in op.call_results().iter().zip(elements) {
                    let array = if values.is_empty() {
                        let ty = &function.vars[*dst].ty;
                        Tensor::zeros(ty.elem, concrete_shape(ty, &env.symbols))
                    } else {
                        layout::stack(&values.iter().collect::<Vec<_>>())
                    };
                    frame.vars[dst.index()] = Some(Cow::Owned(array));
                }
            }
            return Ok(());
        }
        if depth >= self.options.max_stack_depth {
            let at = instances.overflow_loc(*loc);
            return Err(stack_overflow(self.options.max_stack_depth, at));
        }
        let calls = fork_calls(self.program, dsts, args, instances);
        let call = &calls[if calls.len() == 1 { 0 } else { k }];
        let callee = &self.program.functions[call.callee];
        let mut vars = vec![None; callee.vars.len()];
        for (arg, param) in call.args.iter().zip(&callee.params) {
            let value = match arg {
                InstanceArg::Whole(v) => read_value(&mut frame.vars, *v, false),
                InstanceArg::Element(v) => {
                    let at = Tensor::scalar(Scalar::Usize(k as u64));
                    let element = layout::index(borrow(&frame.vars, *v), &at)
                        .map_err(|fault| MemberError::new(fault.kind, fault.message, *loc))?;
                    Cow::Owned(element)
                }
                InstanceArg::Index => Cow::Owned(Tensor::scalar(Scalar::I64(k as i64))),
            };
            vars[param.index()] = Some(value);
        }
        match (state.mode, &state.parent_tape) {
            (TapeMode::Restore, _) => self.tape = std::mem::take(&mut state.tapes[k]),
            (mode, Some(parent)) if mode.saves() => self.tape = Tape::above(parent.held()),
            _ => {}
        }
        let instance_rng = state.key.instance(k as u64);
        let previous = std::mem::replace(&mut *ctx.rng, instance_rng);
        if state.parent_rng.is_none() {
            state.parent_rng = Some(previous);
        }
        let again = matches!(state.mode, TapeMode::Again | TapeMode::SaveAgain);
        self.enter_block(callee, Function::ENTRY)?;
        let counters = &mut *self.counters;
        // A fork run again by a recomputation counts no instances, as its
        // blocks count no steps.
        counters.instances += u64::from(!again);
        counters.live_instances += 1;
        counters.peak_instances = counters.peak_instances.max(counters.live_instances);
        stack.push(Frame::entry(call.callee, vars));
        Ok(())
    }

    /// A call from the top frame: a new frame for the callee with the
    /// arguments as its parameters, unless the call would overflow the
    /// stack (caught, for a catching call, like a fault inside it).
    fn call<'e>(
        &mut self,
        stack: &mut Vec<Frame<'e>>,
        call: &Call<'_>,
        env: &'e Env,
    ) -> Result<(), MemberError> {
        let depth = stack.len();
        let Some(frame) = stack.last_mut() else {
            unreachable!("a call is made from a frame")
        };
        if depth >= self.options.max_stack_depth {
            if call.catch {
                // The call itself overflows: caught like a fault inside it.
                self.recover_at(frame, env);
                return Ok(());
            }
            return Err(stack_overflow(self.options.max_stack_depth, call.loc));
        }
        let callee = &self.program.functions[call.callee];
        let mut vars = vec![None; callee.vars.len()];
        for (position, (arg, param)) in call.args.iter().zip(&callee.params).enumerate() {
            vars[param.index()] =
                Some(read_value(&mut frame.vars, *arg, call.last_reads[position]));
        }
        self.enter_block(callee, Function::ENTRY)?;
        if call.catch {
            let held = self.tape.held();
            frame.caught_tape = Some(std::mem::replace(&mut self.tape, Tape::above(held)));
        }
        stack.push(Frame::entry(call.callee, vars));
        Ok(())
    }

    /// The terminator of the top frame's block: on to the next block, or a
    /// return ([`MemberRun::ret`]).
    fn terminate<'e>(
        &mut self,
        stack: &mut Vec<Frame<'e>>,
        term: &Terminator,
        ctx: &mut PrimContext<'_>,
        env: &'e Env,
    ) -> Result<Option<Vec<Tensor>>, MemberError> {
        let Some(frame) = stack.last_mut() else {
            unreachable!("the run returns when the stack empties")
        };
        let function = &self.program.functions[frame.function];
        let target = match term {
            Terminator::Jump(target) => *target,
            Terminator::Branch {
                cond,
                then_block,
                else_block,
            } => {
                if read_bool(&frame.vars, *cond) {
                    *then_block
                } else {
                    *else_block
                }
            }
            Terminator::Return(returned) => return self.ret(stack, returned, ctx, env),
        };
        self.enter_block(function, target)?;
        frame.block = target;
        frame.next_op = 0;
        Ok(None)
    }

    /// Returns the values `returned` from the top frame: into the results
    /// of the call its caller waits at (with `true` for a catching call),
    /// into the fork its caller waits at (then the next instance starts),
    /// or, from the entry function, as the member's results.
    fn ret<'e>(
        &mut self,
        stack: &mut Vec<Frame<'e>>,
        returned: &[Var],
        ctx: &mut PrimContext<'_>,
        env: &'e Env,
    ) -> Result<Option<Vec<Tensor>>, MemberError> {
        let Some(frame) = stack.last_mut() else {
            unreachable!("the run returns when the stack empties")
        };
        let moves = &self.plan.last_reads[frame.function.index()].returns[frame.block.index()];
        let values: Vec<Held<'e>> = returned
            .iter()
            .zip(moves)
            .map(|(v, &last)| read_value(&mut frame.vars, *v, last))
            .collect();
        stack.pop();
        let Some(caller) = stack.last_mut() else {
            return Ok(Some(values.into_iter().map(Cow::into_owned).collect()));
        };
        if let Some(Op::Fork {
            dsts,
            args,
            instances,
            ..
        }) = self.pending_op(caller)
        {
            let Some(state) = caller.fork.as_deref_mut() else {
                internal_error("a frame waits at a fork without its state");
            };
            self.counters.live_instances -= 1;
            match state.mode {
                TapeMode::Save | TapeMode::SaveAgain => {
                    state.tapes.push(std::mem::take(&mut self.tape))
                }
                TapeMode::Restore => self.tape.clear(),
                TapeMode::None | TapeMode::Again => {}
            }
            match instances {
                Instances::Join(_) => {
                    let calls = fork_calls(self.program, dsts, args, instances);
                    for (dst, value) in calls[state.next].dsts.iter().zip(values) {
                        caller.vars[dst.index()] = Some(value);
                    }
                }
                Instances::Map { .. } => {
                    for (elements, value) in state.elements.iter_mut().zip(values) {
                        elements.push(value.into_owned());
                    }
                }
            }
            state.next += 1;
            self.next_instance(stack, ctx, env)?;
            return Ok(None);
        }
        let Some(call @ Op::Call { dsts, catch, .. }) = self.pending_op(caller) else {
            internal_error("a frame returned to an operation that is not a call");
        };
        if *catch {
            caller.vars[dsts[0].index()] = Some(Cow::Owned(Tensor::scalar(
                autobatch_types::Scalar::Bool(true),
            )));
            if let Some(tape) = caller.caught_tape.take() {
                self.tape = tape;
            }
        }
        for (dst, value) in call.call_results().iter().zip(values) {
            caller.vars[dst.index()] = Some(value);
        }
        Ok(None)
    }

    /// After a catchable `error`, goes on after the innermost catching call
    /// the member is in: its frames above it are dropped and the call gives
    /// `(false, zeros)`. Without one, the member stops with `error`.
    fn unwind(
        &mut self,
        stack: &mut Vec<Frame<'_>>,
        error: MemberError,
        env: &Env,
        rng: &mut MemberRng,
    ) -> Result<(), MemberError> {
        if !error.kind.is_catchable() {
            return Err(error);
        }
        // Every frame but the top waits at the call that made the frame above it.
        let below_top = stack.len().saturating_sub(1);
        let catching = (0..below_top).rev().find(|&i| {
            matches!(
                self.pending_op(&stack[i]),
                Some(Op::Call { catch: true, .. })
            )
        });
        let Some(i) = catching else {
            return Err(error);
        };
        // Forks abandoned by the unwinding: the outermost gives the stream
        // back to the frames that go on.
        if let Some(parent) = stack[i + 1..]
            .iter_mut()
            .find_map(|f| f.fork.as_mut().and_then(|state| state.parent_rng.take()))
        {
            *rng = parent;
        }
        if let Some(parent) = stack[i + 1..]
            .iter_mut()
            .find_map(|f| f.fork.as_mut().and_then(|state| state.parent_tape.take()))
        {
            self.tape = parent;
        }
        // The instances abandoned: the frames whose caller waits at a fork.
        let abandoned = (i + 1..stack.len())
            .filter(|&j| stack[j - 1].fork.is_some())
            .count();
        self.counters.live_instances -= abandoned as u64;
        stack.truncate(i + 1);
        if let Some(tape) = stack[i].caught_tape.take() {
            self.tape = tape;
        }
        self.recover_at(&mut stack[i], env);
        Ok(())
    }

    /// The operation `frame` executed last (the call it waits at, below the top).
    fn pending_op(&self, frame: &Frame<'_>) -> Option<&'a Op> {
        let function = &self.program.functions[frame.function];
        function.blocks[frame.block]
            .ops
            .get(frame.next_op.checked_sub(1)?)
    }

    /// Gives the catching call `frame` waits at its "faulted" value:
    /// `false`, then zeros of each result.
    fn recover_at(&self, frame: &mut Frame<'_>, env: &Env) {
        let Some(Op::Call { dsts, .. }) = self.pending_op(frame) else {
            internal_error("recovering at an operation that is not a call");
        };
        let function = &self.program.functions[frame.function];
        frame.vars[dsts[0].index()] = Some(Cow::Owned(Tensor::scalar(
            autobatch_types::Scalar::Bool(false),
        )));
        for d in &dsts[1..] {
            let ty = &function.vars[*d].ty;
            let zeros = Tensor::zeros(ty.elem, concrete_shape(ty, &env.symbols));
            frame.vars[d.index()] = Some(Cow::Owned(zeros));
        }
    }

    /// At a fork with tape `mode` of `total` instances: the forking frame's
    /// tape, set aside while the instances of a taped fork use their own,
    /// and the tapes the instances of a `Restore` fork get (popped off it).
    fn fork_tapes(&mut self, mode: TapeMode, total: usize) -> (Option<Tape>, Vec<Tape>) {
        if !mode.taped() {
            return (None, Vec::new());
        }
        let mut parent = std::mem::take(&mut self.tape);
        let tapes = match mode {
            TapeMode::Restore => parent
                .pop_instances(total)
                .unwrap_or_else(|| internal_error("a restoring fork found no fork's tapes")),
            _ => Vec::new(),
        };
        (Some(parent), tapes)
    }

    /// Counts what the tape holds now in the run's most ([`Stats::tape_bytes`]).
    fn note_tape(&mut self) {
        let counters = &mut *self.counters;
        counters.tape_bytes = counters.tape_bytes.max(self.tape.held());
    }

    /// `tape_push args` (no `dst`), `dst = tape_pop`, `dst = tape_over`,
    /// `dst = tape_mark` or `dst = tape_settle`;
    /// a push past the run's bound faults.
    fn move_tape(
        &mut self,
        vars: &mut [Option<Held<'_>>],
        prim: &Prim,
        dst: Option<Var>,
        args: &[Var],
    ) -> Result<(), Fault> {
        match dst {
            Some(dst) if *prim == Prim::TapeOver => {
                let over = autobatch_ir::prim::tape_over(self.tape.held(), self.plan.tape_bound);
                vars[dst.index()] = Some(Cow::Owned(Tensor::scalar(Scalar::Bool(over))));
            }
            Some(dst) if *prim == Prim::TapeMark => {
                self.tape.mark();
                let held = Scalar::I64(self.tape.held() as i64);
                vars[dst.index()] = Some(Cow::Owned(Tensor::scalar(held)));
            }
            Some(dst) if *prim == Prim::TapeSettle => {
                let over = autobatch_ir::prim::tape_over(self.tape.held(), self.plan.tape_bound);
                self.tape.settle(over);
                vars[dst.index()] = Some(Cow::Owned(Tensor::scalar(Scalar::Bool(over))));
            }
            None => {
                for a in args {
                    self.tape.push(borrow(vars, *a));
                }
                self.note_tape();
                self.tape.check(self.plan.tape_bound)?;
            }
            Some(dst) => {
                let value = self
                    .tape
                    .pop()
                    .unwrap_or_else(|| internal_error("a tape popped past its start"));
                vars[dst.index()] = Some(Cow::Owned(value));
            }
        }
        Ok(())
    }

    /// Counts the step of entering `block`, or stops the member if it has
    /// used up its steps, or its grace since the run was interrupted.
    fn enter_block(&mut self, function: &Function, block: Block) -> Result<(), MemberError> {
        if !function.counts_step(block) {
            return Ok(());
        }
        if self.steps >= self.options.max_steps {
            return Err(step_limit(
                self.options.max_steps,
                function.blocks[block].loc,
            ));
        }
        if self.counters.watch.interrupted() {
            let deadline = *self
                .deadline
                .get_or_insert(self.steps + crate::INTERRUPT_GRACE_STEPS);
            if self.steps >= deadline {
                return Err(interrupted(function.blocks[block].loc));
            }
        }
        self.steps += 1;
        let counters = &mut *self.counters;
        // Members run in order: those before this one have ended.
        let done = u64::from(self.member);
        counters
            .watch
            .tick(counters.steps + self.steps, done, &counters.ops);
        Ok(())
    }
}

/// Evaluates one primitive on the current values of `args`. Loading a
/// static borrows it, and a copy borrows what its operand borrows; a copy
/// whose operand is read for the last time moves it, and an `index_set`
/// whose array is read for the last time (and is not a borrowed static)
/// updates it in place instead of copying.
fn eval_prim<'e>(
    vars: &mut [Option<Held<'e>>],
    prim: &Prim,
    args: &[Var],
    last_reads: &[bool],
    env: &'e Env,
    ctx: &mut PrimContext<'_>,
) -> Result<Option<Held<'e>>, Fault> {
    match prim {
        Prim::LoadStatic(id) => {
            if let Some(value) = env.statics.get(id.0 as usize) {
                return Ok(Some(Cow::Borrowed(value)));
            }
        }
        Prim::Copy if last_reads[0] => return Ok(Some(take(vars, args[0]))),
        Prim::Copy => {
            if let Some(Some(Cow::Borrowed(value))) = vars.get(args[0].index()) {
                return Ok(Some(Cow::Borrowed(*value)));
            }
        }
        Prim::IndexSet if last_reads[0] => {
            let mut array = take(vars, args[0]).into_owned();
            layout::index_set_in_place(&mut array, borrow(vars, args[1]), borrow(vars, args[2]))?;
            return Ok(Some(Cow::Owned(array)));
        }
        _ => {}
    }
    eval_owned(vars, prim, args, ctx).map(|value| value.map(Cow::Owned))
}

/// Evaluates `prim` by the kernels, into a value of its own.
fn eval_owned(
    vars: &[Option<Held<'_>>],
    prim: &Prim,
    args: &[Var],
    ctx: &mut PrimContext<'_>,
) -> Result<Option<Tensor>, Fault> {
    // Fixed-size operand lists for the common arities avoid an allocation per operation.
    match *args {
        [] => eval(prim, &[], ctx),
        [a] => eval(prim, &[borrow(vars, a)], ctx),
        [a, b] => eval(prim, &[borrow(vars, a), borrow(vars, b)], ctx),
        [a, b, c] => eval(
            prim,
            &[borrow(vars, a), borrow(vars, b), borrow(vars, c)],
            ctx,
        ),
        _ => {
            let operands: Vec<&Tensor> = args.iter().map(|v| borrow(vars, *v)).collect();
            eval(prim, &operands, ctx)
        }
    }
}

fn borrow<'v>(vars: &'v [Option<Held<'_>>], v: Var) -> &'v Tensor {
    match &vars[v.index()] {
        Some(value) => value.as_ref(),
        None => internal_error(format!("{v} is read before it is assigned")),
    }
}

fn take<'e>(vars: &mut [Option<Held<'e>>], v: Var) -> Held<'e> {
    match vars[v.index()].take() {
        Some(value) => value,
        None => internal_error(format!("{v} is read before it is assigned")),
    }
}

/// The value of `v`, moved out if this is its last read, else cloned (a
/// borrowed static stays borrowed).
fn read_value<'e>(vars: &mut [Option<Held<'e>>], v: Var, last_read: bool) -> Held<'e> {
    if last_read {
        return take(vars, v);
    }
    match &vars[v.index()] {
        Some(value) => value.clone(),
        None => internal_error(format!("{v} is read before it is assigned")),
    }
}

fn read_bool(vars: &[Option<Held<'_>>], v: Var) -> bool {
    match &borrow(vars, v).data {
        Data::Bool(values) if values.len() == 1 => values[0],
        other => internal_error(format!(
            "the branch condition {v} holds {} values of {}",
            other.len(),
            other.ty()
        )),
    }
}
