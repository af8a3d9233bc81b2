//! The `auto` strategy: picks, per run, the executor that runs the program
//! fastest by a rule over the compiled program and the batch, and runs it.
//! The choice reads only the IR, the bound lengths, the batch size and the
//! run's options, so the same run always picks the same executor; every
//! executor gives every member the reference's result, so the choice
//! changes no bit of any result.
//!
//! The rule, first match wins:
//! 1. a profile is asked for: `program-counter` (it records one, the
//!    native executors do not);
//! 2. the native compiler does not take the program (a host primitive, a
//!    static not bound): `program-counter`, the executor the native ones
//!    would fall back to, saying why;
//! 3. of the matrix products of the source (`matvec`, `vecmat`, `matmul`
//!    in the functions the entry reaches), at least half are `matvec` or
//!    `vecmat` with a static matrix (a static or an item of one), there are
//!    at least two members per thread to share them, a function the entry
//!    reaches is recursive (calls itself, directly or through others:
//!    trees, a sampler's trajectories), the program takes a gradient with
//!    respect to statics (training) and the largest such matrix has fewer
//!    than [`LARGE_MATRIX`] elements: `native` (each member alone in
//!    machine code, its tape and its statics' adjoints in its own frames,
//!    which costs less than suspending members at each product to share
//!    it);
//! 4. as 3 without a gradient with respect to statics, the largest matrix
//!    with at most [`SMALL_MATRIX`] elements: `native` (a product this
//!    small costs less than suspending members at it to share it);
//! 5. as 3 otherwise: `native-batched` (each
//!    member's control in machine code, each such product once for the
//!    members of a thread waiting at it, whatever their depths);
//! 6. as 3 without recursion, the largest such matrix with at least
//!    [`LARGE_MATRIX`] elements: `program-counter` (each product one
//!    product of the matrix with every member's vector at once, the matrix
//!    read once per step);
//! 7. as 6 with smaller matrices, in a program that keeps arrays on its
//!    tape (it takes `value_and_grad` or `grad` with respect to a member's
//!    arrays; not a gradient with respect to statics): `native` (the
//!    program-counter executor copies every member's taped arrays onto the
//!    tape and back, which costs more than such products save; native
//!    code keeps them in the member's frames);
//! 8. as 6 with smaller matrices: `program-counter` (without recursion
//!    the members' loops run in step, and every other operation is one
//!    for the whole batch too);
//! 9. otherwise: `native` (each member alone in machine code: scalar
//!    control, per-member arrays, products mostly with per-member
//!    matrices, or one member per thread).
//!
//! `local-static` and `native-lockstep` are never picked
//! (docs/benchmarks.md has their timings beside the others').
//!
//! A small run first: where the rule picks `native` or `native-batched`
//! and the process has not compiled the program's code yet, compiling it
//! (a millisecond or more) can cost more than the whole run. Such a run is
//! tried on `program-counter` first, each member limited to
//! [`trial_steps`]: [`TRIAL_WORK_PER_OP`] per operation of the program
//! ([`TRIAL_WORK_PER_ARRAY_OP`] on arrays), about what compiling costs,
//! over the work of a step through its heaviest block for the whole batch
//! ([`block_work`]). If every member
//! finishes (or stops with an error of its own) within its steps, that is
//! the run; if one is stopped by the limit, the run starts again on the
//! picked executor, having spent about one more compile's worth of work at
//! most. A run whose members would get fewer than [`MIN_TRIAL_STEPS`] has
//! no trial. The trial changes no result (every executor gives the
//! reference's), only which executor gave it; `--stats` says which ran
//! and why.

use autobatch_ir::{EntityRef, FuncId, Function, Op, Prim, Program, Var};
use autobatch_kernels::backend::Backend;
use autobatch_types::Dim;

use crate::{native, Batch, Env, ErrorKind, ExecError, Executor, RunOptions, RunOutput, Strategy};

/// The elements of a static matrix from which `auto` runs a program
/// without recursion that takes gradients on program-counter: 2 MB of
/// `f64`, more than a core's L2 cache holds, so that reading the matrix
/// once per step for all members saves more than the tape costs.
pub const LARGE_MATRIX: u64 = 1 << 18;

/// The elements of a static matrix up to which `auto` runs a recursive
/// program on `native`: 64 x 64.
/// A product this small takes less time than suspending the members of a
/// thread at it and resuming them, which is what `native-batched` pays to
/// share it.
pub const SMALL_MATRIX: u64 = 1 << 12;

/// The work `auto`'s trial of a small run on `program-counter` may do
/// per scalar operation of the program (of the functions the entry
/// reaches): about what compiling the operation to machine code costs, in
/// the units of [`block_work`].
pub const TRIAL_WORK_PER_OP: u64 = 1 << 13;

/// [`TRIAL_WORK_PER_OP`] for an operation on arrays, whose machine code
/// (loops over the elements, products) costs about four times as much to
/// compile.
pub const TRIAL_WORK_PER_ARRAY_OP: u64 = 1 << 15;

/// The fewest steps per member a trial gives: a run whose members would
/// get fewer (many members, heavy blocks) is compiled at once.
pub const MIN_TRIAL_STEPS: u64 = 256;

/// The work of interpreting an operation for the whole batch beyond its
/// elements, in the units of an element of one member.
const OP_WORK: u64 = 32;

/// The `auto` executor of the registry: [`choose`], then the chosen one.
pub struct Auto;

/// The executor `auto` picked for a run, and why, in words for a user.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub strategy: Strategy,
    pub reason: String,
}

impl Executor for Auto {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn description(&self) -> &'static str {
        "picks per run: native for scalar control, program-counter where products with a \
         static matrix can be shared (native-batched if the program recurses), and \
         where native code does not compile or a profile is asked for"
    }

    /// Not always: the native executors it mostly picks compute with the
    /// kernels themselves.
    fn uses_backend(&self) -> bool {
        false
    }

    /// It hands a ragged batch to the executor it picks, whole.
    fn runs_ragged(&self) -> bool {
        true
    }

    fn run(
        &self,
        backend: &dyn Backend,
        program: &Program,
        env: &Env,
        batch: &Batch,
        options: &RunOptions,
    ) -> Result<RunOutput, ExecError> {
        let choice = choose(program, env, batch, options);
        run_choice(choice, program, env, batch, options, |strategy, options| {
            strategy
                .executor()
                .run(backend, program, env, batch, options)
        })
    }
}

/// Runs the batch as `auto` does once it has picked `choice`: through
/// `run` (the picked executor, given the options), after a trial on
/// `program-counter` where [`trial_steps`] gives one (the module docs).
/// The output's `choice` is the executor that gave the results.
pub fn run_choice(
    choice: Choice,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
    run: impl Fn(Strategy, &RunOptions) -> Result<RunOutput, ExecError>,
) -> Result<RunOutput, ExecError> {
    let mut reason = choice.reason;
    let mut trial_seconds = 0.0;
    if let Some(limit) = trial_steps(choice.strategy, program, env, batch, options) {
        let trial = RunOptions {
            max_steps: limit,
            ..options.clone()
        };
        let mut output = run(Strategy::ProgramCounter, &trial)?;
        let stopped = limit < options.max_steps
            && output
                .results
                .iter()
                .any(|r| matches!(r, Err(e) if e.kind == ErrorKind::StepLimit));
        if !stopped {
            output.stats.choice = Some(Choice {
                strategy: Strategy::ProgramCounter,
                reason: format!(
                    "{reason}; but a small run, tried first on program-counter (no compiling): \
                     every member finished within its {limit} steps"
                ),
            });
            return Ok(output);
        }
        trial_seconds = output.stats.wall_seconds;
        reason = format!(
            "{reason}; tried first on program-counter, a member did not finish within the \
             trial's steps"
        );
    }
    let mut output = run(choice.strategy, options)?;
    output.stats.wall_seconds += trial_seconds;
    output.stats.choice = Some(Choice {
        strategy: choice.strategy,
        reason,
    });
    Ok(output)
}

/// The steps each member may take in `auto`'s trial of this run on
/// `program-counter`, or `None` for no trial: the picked `strategy`
/// compiles native code the process has not compiled yet, and the trial's
/// work (per operation the entry reaches, [`TRIAL_WORK_PER_OP`], or
/// [`TRIAL_WORK_PER_ARRAY_OP`] on arrays) over the work of a step of the
/// whole batch through the heaviest block ([`block_work`]) gives each member at least [`MIN_TRIAL_STEPS`] steps
/// (at most the run's own limit); none when `options.auto_trial` is false.
pub fn trial_steps(
    strategy: Strategy,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Option<u64> {
    if !options.auto_trial || (strategy != Strategy::Native && strategy != Strategy::NativeBatched)
    {
        return None;
    }
    let members = batch.size.max(1) as u64;
    let work = block_work(program, batch.entry, &env.symbols, members);
    let steps = work.trial / work.heaviest_step.max(1);
    if steps < MIN_TRIAL_STEPS || native::compiled_already(program, env, batch, options) {
        return None;
    }
    Some(steps.min(options.max_steps))
}

/// The work of a trial, and of a step of the batch through the heaviest
/// block the entry reaches.
struct TrialWork {
    /// [`TRIAL_WORK_PER_OP`] per scalar operation, [`TRIAL_WORK_PER_ARRAY_OP`]
    /// per operation on arrays.
    trial: u64,
    /// Per operation of the block, [`OP_WORK`] and, per member, the
    /// elements of its largest operand or result (loading a static reads
    /// none, an item of an array only the item's).
    heaviest_step: u64,
}

/// The [`TrialWork`] of the functions the entry reaches, for a batch of
/// `members`.
fn block_work(program: &Program, entry: FuncId, symbols: &[u64], members: u64) -> TrialWork {
    let reachable = program.reachable(entry);
    let length = |d: &Dim| match d {
        Dim::Fixed(n) => *n,
        Dim::Symbolic(s) => symbols.get(s.0 as usize).copied().unwrap_or(1),
    };
    let elements = |function: &Function, var: &Var| -> u64 {
        function.vars[*var].ty.dims.iter().map(length).product()
    };
    let op_work = |function: &Function, op: &Op| -> u64 {
        let largest = match op {
            Op::Prim {
                prim: Prim::LoadStatic(_),
                ..
            } => 0,
            Op::Prim {
                prim: Prim::Index,
                dst,
                ..
            } => dst.as_ref().map_or(0, |d| elements(function, d)),
            _ => op
                .uses()
                .iter()
                .chain(op.defs())
                .map(|v| elements(function, v))
                .max()
                .unwrap_or(0),
        };
        OP_WORK.saturating_add(members.saturating_mul(largest))
    };
    let on_arrays = |function: &Function, op: &Op| {
        op.uses()
            .iter()
            .chain(op.defs())
            .any(|v| !function.vars[*v].ty.dims.is_empty())
    };
    let (mut trial, mut heaviest) = (0u64, 0u64);
    for (id, function) in program.functions.iter() {
        if !reachable[id.index()] {
            continue;
        }
        for block in function.blocks.values() {
            for op in &block.ops {
                trial = trial.saturating_add(if on_arrays(function, op) {
                    TRIAL_WORK_PER_ARRAY_OP
                } else {
                    TRIAL_WORK_PER_OP
                });
            }
            let work = block
                .ops
                .iter()
                .map(|op| op_work(function, op))
                .fold(0u64, u64::saturating_add);
            heaviest = heaviest.max(work);
        }
    }
    TrialWork {
        trial,
        heaviest_step: heaviest,
    }
}

/// The executor the rule of the module docs picks for this run.
pub fn choose(program: &Program, env: &Env, batch: &Batch, options: &RunOptions) -> Choice {
    if options.profile {
        return Choice {
            strategy: Strategy::ProgramCounter,
            reason: "a profile was asked for, which program-counter records".into(),
        };
    }
    if let Some(reason) = native::refusal(program, env, batch) {
        return Choice {
            strategy: Strategy::ProgramCounter,
            reason: format!("native code does not compile the program: {reason}"),
        };
    }
    let products = products(program, batch.entry, &env.symbols);
    let per_thread = batch.size.div_ceil(options.threads.max(1));
    let Some((rows, columns)) = products.largest else {
        return Choice {
            strategy: Strategy::Native,
            reason: "no product with a static matrix: each member runs alone in machine code"
                .into(),
        };
    };
    let described = format!(
        "{} of the program's {} matrix products with a static matrix, the largest {rows} x {columns}",
        products.shared,
        products.shared + products.others,
    );
    let in_recursion = recursive(program, batch.entry);
    let (strategy, why) = if products.others > products.shared {
        (
            Strategy::Native,
            "most products are with per-member matrices".to_string(),
        )
    } else if per_thread < 2 {
        (
            Strategy::Native,
            "one member per thread to share them".to_string(),
        )
    } else if in_recursion && rows * columns < LARGE_MATRIX && to_statics(program, batch.entry) {
        (
            Strategy::Native,
            "a recursive program's gradient with respect to statics, with matrices smaller \
             than the cache: each member alone in machine code, its tape and its statics' \
             adjoints in its own frames"
                .to_string(),
        )
    } else if in_recursion && rows * columns <= SMALL_MATRIX {
        (
            Strategy::Native,
            "a recursive program with small matrices: each member alone in machine code, \
             a product this small costing less than suspending members at it to share it"
                .to_string(),
        )
    } else if in_recursion {
        (
            Strategy::NativeBatched,
            format!("a recursive program: each shared by up to {per_thread} members per thread"),
        )
    } else if rows * columns >= LARGE_MATRIX {
        (
            Strategy::ProgramCounter,
            "larger than the cache: each one product for the whole batch".to_string(),
        )
    } else if tapes_arrays(program, batch.entry) {
        (
            Strategy::Native,
            "a gradient that keeps arrays on its tape, with matrices smaller than the cache: \
             each member alone in machine code, its tape in its frames"
                .to_string(),
        )
    } else {
        (
            Strategy::ProgramCounter,
            "no recursion: the members' loops run in step, each product and operation once \
             for the whole batch"
                .to_string(),
        )
    };
    Choice {
        strategy,
        reason: format!("{described}; {why}"),
    }
}

/// The matrix products (`matvec`, `vecmat`, `matmul`) in the functions an
/// entry reaches, counted once per operation of the source.
#[derive(Debug, Default, PartialEq)]
struct Products {
    /// `matvec`/`vecmat` of a float static matrix (or an item of one): the
    /// products native-batched shares between members.
    shared: usize,
    /// The others: with a per-member matrix, or `matmul`.
    others: usize,
    /// The shape of the largest static matrix among the shared ones.
    largest: Option<(u64, u64)>,
}

fn products(program: &Program, entry: FuncId, symbols: &[u64]) -> Products {
    let mut found = Products::default();
    let reachable = program.reachable(entry);
    for (id, function) in program.functions.iter() {
        if !reachable[id.index()] {
            continue;
        }
        let from_static = static_vars(function);
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            let Op::Prim { prim, args, .. } = op else {
                continue;
            };
            let matrix = match prim {
                Prim::Matvec => args[0],
                Prim::Vecmat => args[1],
                Prim::Matmul => {
                    found.others += 1;
                    continue;
                }
                _ => continue,
            };
            let ty = &function.vars[matrix].ty;
            if !from_static[matrix.index()] || !ty.elem.is_float() || ty.dims.len() != 2 {
                found.others += 1;
                continue;
            }
            let length = |d: &Dim| match d {
                Dim::Fixed(n) => *n,
                Dim::Symbolic(s) => symbols.get(s.0 as usize).copied().unwrap_or(0),
            };
            let shape = (length(&ty.dims[0]), length(&ty.dims[1]));
            found.shared += 1;
            if found.largest.is_none_or(|(r, c)| r * c < shape.0 * shape.1) {
                found.largest = Some(shape);
            }
        }
    }
    found
}

/// Whether a function the entry reaches calls itself, directly or through
/// others (calls and forks both count).
fn recursive(program: &Program, entry: FuncId) -> bool {
    let reaches = |from: FuncId| program.reachable(from);
    let reachable = reaches(entry);
    program.functions.iter().any(|(id, function)| {
        reachable[id.index()]
            && function
                .blocks
                .values()
                .flat_map(|b| &b.ops)
                .flat_map(|op| op.callees())
                .any(|callee| reaches(callee)[id.index()])
    })
}

/// The operations of the functions the entry reaches, each with its function.
fn reached_ops(program: &Program, entry: FuncId) -> impl Iterator<Item = (&Function, &Op)> {
    let reachable = program.reachable(entry);
    program
        .functions
        .iter()
        .filter(move |(id, _)| reachable[id.index()])
        .flat_map(|(_, f)| {
            f.blocks
                .values()
                .flat_map(move |b| b.ops.iter().map(move |op| (f, op)))
        })
}

/// Whether the program takes a gradient with respect to statics (a
/// function the entry reaches logs a static's adjoint).
fn to_statics(program: &Program, entry: FuncId) -> bool {
    reached_ops(program, entry).any(|(_, op)| {
        matches!(
            op,
            Op::Prim {
                prim: Prim::StaticAdjoint(_),
                ..
            }
        )
    })
}

/// Whether a function the entry reaches pushes an array onto its tape
/// (the forward part of a member's gradient), in a program that takes no
/// gradient with respect to statics.
fn tapes_arrays(program: &Program, entry: FuncId) -> bool {
    !to_statics(program, entry)
        && reached_ops(program, entry).any(|(function, op)| match op {
            Op::Prim {
                prim: Prim::TapePush,
                args,
                ..
            } => args.iter().any(|a| !function.vars[*a].ty.dims.is_empty()),
            _ => false,
        })
}

/// Per variable of `function`: whether some definition of it loads a
/// static or takes an item of such a variable (`W[i]`, a row of a static
/// stack of matrices).
fn static_vars(function: &Function) -> Vec<bool> {
    let mut from_static = vec![false; function.vars.len()];
    let mark = |from_static: &mut Vec<bool>, dst: &Option<Var>| {
        let changed = dst.is_some_and(|d| !from_static[d.index()]);
        if let Some(d) = dst {
            from_static[d.index()] = true;
        }
        changed
    };
    loop {
        let mut changed = false;
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            match op {
                Op::Prim {
                    dst,
                    prim: Prim::LoadStatic(_),
                    ..
                } => changed |= mark(&mut from_static, dst),
                Op::Prim {
                    dst,
                    prim: Prim::Index,
                    args,
                    ..
                } if from_static[args[0].index()] => changed |= mark(&mut from_static, dst),
                _ => {}
            }
        }
        if !changed {
            return from_static;
        }
    }
}
