//! Members run together, each in machine code on its own stack, that wait
//! at the products with a static matrix: the products of all the members
//! waiting at one such operation are computed as one product of the
//! matrix with their vectors stacked: per-member native code that
//! suspends at batched operations.
//!
//! Each member runs on a coroutine (`corosensei`, a stack of its own). At
//! a `matvec(S, x)` or `vecmat(x, S)` whose matrix is a static or a view
//! of one (`ArrayOp::batched`), the host side of the operation ([`wait`])
//! hands the scheduler a [`Wait`] (the operation and the member's operand
//! and destination addresses) and suspends. When no member can go on, the
//! scheduler picks a product ([`Pending::take_next`]: a forward part's
//! before a backward part's, then the one most members wait at), gathers
//! their vectors, runs the kernels' shared-matrix product once
//! (`gemm::matvec_into` / `vecmat_into`, whose every row has the bits of
//! the product alone), writes each member's row where it waits, and
//! resumes them. A member's control, scalars, faults, limits, random
//! stream and counts are those of [`crate::Runner::run`]; only the order in
//! which members interleave changes, which no member can observe.
//!
//! The members of a ragged batch run together whatever their lengths
//! (`crate::lengths`): a product with a static matrix has the matrix's
//! shape for every member.
//!
//! At most `MAX_LIVE` members of a thread are alive at once (each has a
//! stack of its own, which the next member reuses when it ends, and which
//! the next runs reuse: `stacks`). Every
//! coroutine runs to its end before [`NativeProgram::run_batched`] returns
//! (a member always ends: its steps are bounded), so none is dropped while
//! suspended in machine code.

use autobatch_ir::Prim;
use autobatch_kernels::adjoints::AdjointLog;
use autobatch_kernels::gemm::{self, GemmFloat};
use autobatch_kernels::MemberRng;
use autobatch_types::{ScalarType, Tensor};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::arrays::ArrayOp;
use crate::published::{Publisher, Watch};
use crate::{Limits, MemberRun, NativeProgram};

/// What a member's coroutine yields: the product it waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    /// The operation's number in the program's table.
    op: u32,
    /// Where the member's result goes.
    dst: *mut u8,
    /// The operands, in order: the static matrix and the member's vector
    /// (`matvec`), or the vector and the matrix (`vecmat`).
    args: [*const u8; 2],
}

pub(crate) type MemberYielder = Yielder<(), Wait>;

/// The host side of a batched product for a member run among others:
/// suspends until the scheduler has written the product at `ptrs[0]`.
pub(crate) fn wait(yielder: &MemberYielder, op: u32, ptrs: &[*mut u8]) {
    let [dst, a, b] = ptrs else {
        unreachable!("a product has a destination and two operands")
    };
    yielder.suspend(Wait {
        op,
        dst: *dst,
        args: [*a as *const u8, *b as *const u8],
    });
}

/// One member of a batched run: its arguments, its random stream if the
/// program draws, and the member its contributions to static adjoints
/// name.
pub struct MemberInput<'a> {
    pub args: Vec<&'a Tensor>,
    pub rng: Option<MemberRng>,
    pub member: u32,
}

/// What [`NativeProgram::run_batched`] gives: each member's run and
/// segment counts, and how the products were batched.
pub struct BatchedRun {
    pub runs: Vec<MemberRun>,
    pub counters: Vec<Vec<u64>>,
    /// Products computed (each for all the members waiting at it).
    pub products: u64,
    /// Member-products they served (`waits / products` is the mean batch).
    pub waits: u64,
}

/// Machine stack each member's coroutine gets beyond its frames' room (the
/// host's and the kernels' frames below the member's).
const HOST_MARGIN: usize = 1 << 20;
/// The most room for a member's frames on its coroutine: a member that
/// needs more stops with `Stop::NativeStack` (the caller reruns it).
const MAX_ROOM: usize = 32 << 20;
/// The most members alive at once on one thread (each has a stack of its
/// own); the others start as members end.
const MAX_LIVE: usize = 1024;

/// One member's state, at a fixed address while its coroutine runs.
struct Slot<'p> {
    /// The program it runs (its table of operations).
    program: &'p NativeProgram,
    runner: crate::Runner<'p>,
    args: Vec<&'p Tensor>,
    rng: Option<MemberRng>,
    /// The member its contributions to static adjoints name.
    member: u32,
    counters: Vec<u64>,
    run: Option<MemberRun>,
    waiting: Option<Wait>,
}

type MemberCoroutine = Coroutine<(), Wait, (), DefaultStack>;

impl NativeProgram {
    /// Runs `members` together on this thread (see the module doc), with
    /// `limits` (whose `stack_room` is capped for the members' own stacks).
    /// With `watch`, the members' counts are added to its counters as
    /// they run (`published`), for another thread to watch. The members'
    /// contributions to static adjoints go to `log`, as they are made
    /// (interleaved); those of members that do not finish are taken out
    /// again.
    pub fn run_batched<'p>(
        &'p self,
        statics: &'p [Tensor],
        members: Vec<MemberInput<'p>>,
        limits: &Limits,
        watch: Option<Watch<'_>>,
        log: &mut AdjointLog,
    ) -> Result<BatchedRun, String> {
        let limits = Limits {
            stack_room: limits.stack_room.min(MAX_ROOM),
            ..*limits
        };
        let mut slots: Vec<Box<Slot<'p>>> = members
            .into_iter()
            .map(|m| {
                Box::new(Slot {
                    program: self,
                    runner: self.runner(statics),
                    args: m.args,
                    rng: m.rng,
                    member: m.member,
                    counters: vec![0; self.segments.len()],
                    run: None,
                    waiting: None,
                })
            })
            .collect();
        let mut publisher = watch.map(|watch| Publisher::new(watch, slots.len()));
        let (products, waits) = drive(&mut slots, limits, publisher.as_mut(), log)?;
        let mut stopped: Vec<u32> = slots
            .iter()
            .filter(|slot| slot.run.as_ref().is_some_and(|run| run.outcome.is_err()))
            .map(|slot| slot.member)
            .collect();
        if !stopped.is_empty() {
            stopped.sort_unstable();
            log.retain(|r| stopped.binary_search(&r.member).is_err());
        }
        let (runs, counters) = slots
            .into_iter()
            .map(|slot| {
                let slot = *slot;
                let run = slot.run.expect("an ended member has its run");
                (run, slot.counters)
            })
            .unzip();
        Ok(BatchedRun {
            runs,
            counters,
            products,
            waits,
        })
    }
}

/// Runs the members of `slots` to their ends (see the module doc), giving
/// the products computed and the member-products they served; their
/// counts go to `publisher` as they end, and between products.
fn drive<'p>(
    slots: &mut [Box<Slot<'p>>],
    limits: Limits,
    mut publisher: Option<&mut Publisher<'_>>,
    log: &mut AdjointLog,
) -> Result<(u64, u64), String> {
    // Every member's coroutine logs through this pointer, one at a time
    // (they run on this thread, each until it waits or ends).
    let log: *mut AdjointLog = log;
    let n = slots.len();
    let mut coroutines: Vec<Option<MemberCoroutine>> = (0..n).map(|_| None).collect();
    // Stacks of members that ended, for the next ones.
    let mut spare: Vec<DefaultStack> = Vec::new();
    let (mut next, mut live) = (0, 0);
    let (mut products, mut waits) = (0_u64, 0_u64);
    let mut scratch = Scratch::default();
    loop {
        // Start members while fewer than `MAX_LIVE` are alive (and stacks
        // can be had: with none alive, failing to map one ends the run; no
        // coroutine is ever dropped suspended).
        while live < MAX_LIVE && next < n {
            let stack = match spare.pop() {
                Some(stack) => stack,
                None => match crate::stacks::take(limits.stack_room + HOST_MARGIN) {
                    Ok(stack) => stack,
                    Err(_) if live > 0 => break,
                    Err(e) => return Err(format!("a member's stack could not be mapped: {e}")),
                },
            };
            let slot: *mut Slot<'p> = &mut *slots[next];
            // SAFETY: the slot is boxed, outlives the coroutine, and is
            // touched only by it while it runs.
            coroutines[next] = Some(unsafe { member_coroutine(stack, slot, limits, log) });
            live += 1;
            let ended = advance(&mut coroutines[next], &mut slots[next], &mut spare);
            scratch.pending.note(next, &slots[next]);
            live -= usize::from(published(ended, next, slots, publisher.as_deref_mut()));
            next += 1;
        }
        if !scratch.pending.take_next(&mut scratch.members) {
            if next == n {
                break;
            }
            continue;
        }
        compute(&scratch.members, slots, &mut scratch.gathered);
        products += 1;
        waits += scratch.members.len() as u64;
        for &m in &scratch.members {
            slots[m].waiting = None;
            let ended = advance(&mut coroutines[m], &mut slots[m], &mut spare);
            scratch.pending.note(m, &slots[m]);
            live -= usize::from(published(ended, m, slots, publisher.as_deref_mut()));
        }
        if let Some(p) = publisher.as_deref_mut() {
            p.every_member(slots.iter().map(|s| &s.counters[..]));
        }
    }
    debug_assert!(coroutines.iter().all(Option::is_none), "every member ended");
    crate::stacks::give_back(spare);
    Ok((products, waits))
}

/// Gives `ended`, after adding the counts of member `m` to `publisher` if
/// it ended.
fn published(
    ended: bool,
    m: usize,
    slots: &[Box<Slot<'_>>],
    publisher: Option<&mut Publisher<'_>>,
) -> bool {
    if let (true, Some(p)) = (ended, publisher) {
        p.member(m, &slots[m].counters);
    }
    ended
}

/// What a thread's scheduler reuses from one product to the next (a
/// product of a few small vectors is so short that allocating its buffers
/// each time would be a good part of it).
#[derive(Default)]
struct Scratch {
    /// The products members wait at.
    pending: Pending,
    /// The members waiting at the product chosen, in order.
    members: Vec<usize>,
    gathered: Gathered,
}

/// The waits of one product, and its vectors and results, per type.
#[derive(Default)]
struct Gathered {
    waits: Vec<Wait>,
    f32: Buffers<f32>,
    f64: Buffers<f64>,
}

#[derive(Default)]
struct Buffers<T> {
    vectors: Vec<T>,
    out: Vec<T>,
}

/// Computes the product the members `waiting` wait at (one product:
/// [`Pending::take_next`]), writing each one's row where it waits.
fn compute(waiting: &[usize], slots: &[Box<Slot<'_>>], gathered: &mut Gathered) {
    let first = &slots[waiting[0]];
    let wait = first.waiting.expect("a waiting member");
    let table_op = &first.program.arrays[wait.op as usize];
    gathered.waits.clear();
    gathered.waits.extend(
        waiting
            .iter()
            .map(|m| slots[*m].waiting.expect("a waiting member")),
    );
    match table_op.args[0].ty {
        ScalarType::F64 => product::<f64>(table_op, &gathered.waits, &mut gathered.f64),
        ScalarType::F32 => product::<f32>(table_op, &gathered.waits, &mut gathered.f32),
        other => unreachable!("a batched product of {other}"),
    }
}

/// The coroutine that runs the member of `slot` on `stack`, logging into
/// `log`.
///
/// # Safety
/// `slot` and `log` stay valid, and are touched by nothing else while the
/// coroutine runs, until the coroutine has ended; the coroutine is driven
/// to its end before what the slot borrows goes away.
unsafe fn member_coroutine<'p>(
    stack: DefaultStack,
    slot: *mut Slot<'p>,
    limits: Limits,
    log: *mut AdjointLog,
) -> MemberCoroutine {
    let body = move |yielder: &MemberYielder, ()| {
        // SAFETY: as the function's contract.
        let slot = unsafe { &mut *slot };
        let run = slot.runner.run_waiting(
            &slot.args,
            &limits,
            slot.rng.as_mut(),
            (slot.counters.as_mut_ptr(), slot.counters.len()),
            yielder,
            (log, slot.member),
        );
        slot.run = Some(run);
    };
    // SAFETY: what the body borrows outlives the coroutine (the contract).
    unsafe { MemberCoroutine::with_stack_unchecked(stack, body) }
}

/// Resumes the member's coroutine until it waits again or ends; an ended
/// one is dropped and its stack kept in `spare`. Whether it ended.
fn advance(
    coroutine: &mut Option<MemberCoroutine>,
    slot: &mut Slot<'_>,
    spare: &mut Vec<DefaultStack>,
) -> bool {
    let running = coroutine.as_mut().expect("a live member");
    match running.resume(()) {
        CoroutineResult::Yield(wait) => {
            slot.waiting = Some(wait);
            false
        }
        CoroutineResult::Return(()) => {
            let ended = coroutine.take().expect("a live member");
            spare.push(ended.into_stack());
            true
        }
    }
}

/// The products members wait at, kept as members begin to wait (a
/// member's key is found once, when it yields, not at every product).
#[derive(Default)]
struct Pending {
    /// Each product key waited at (a handful: a list beats a map) and its
    /// members, in the order they began to wait.
    products: Vec<(ProductKey, Vec<usize>)>,
    /// Emptied lists of members, for the next keys.
    spare: Vec<Vec<usize>>,
}

impl Pending {
    /// Notes that member `m` of `slot` waits, if it does.
    fn note(&mut self, m: usize, slot: &Slot<'_>) {
        let Some(key) = ProductKey::of(slot) else {
            return;
        };
        match self.products.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(m),
            None => {
                let mut members = self.spare.pop().unwrap_or_default();
                members.push(m);
                self.products.push((key, members));
            }
        }
    }

    /// The product to run next, and the members waiting at it in order,
    /// into `members` (which no longer wait here); false when none waits.
    /// (A view of a static, `W[d]`, may be a different matrix for
    /// different members.)
    ///
    /// Two phases, then the widest: any product of a forward part (or of
    /// a program that derives nothing) runs before any product of a
    /// backward part (`ArrayOp::backward`), and among the products of the
    /// earlier phase, the one most members wait at (the least key among
    /// equals). A member whose forward part ends early then waits at its
    /// first backward product until every member's forward part has
    /// ended, and the backward parts start together. Within a phase the
    /// widest product runs, whatever its place in the program: the
    /// program's earliest operation first suits members that run loops
    /// one after the other (a BiRNN's two directions) but not a tree's
    /// recursion (docs/benchmarks.md, "Where the training step's time
    /// goes"). The order changes no member's bits: each row of a product
    /// has the bits of the product alone, and the static adjoints'
    /// records are summed in an order of their own.
    fn take_next(&mut self, members: &mut Vec<usize>) -> bool {
        let Some(chosen) = (0..self.products.len()).max_by(|&i, &j| {
            let ((a, x), (b, y)) = (&self.products[i], &self.products[j]);
            b.backward
                .cmp(&a.backward)
                .then(x.len().cmp(&y.len()))
                .then(b.cmp(a))
        }) else {
            return false;
        };
        let (_, mut waiting) = self.products.swap_remove(chosen);
        waiting.sort_unstable();
        members.clear();
        self.spare.push(std::mem::replace(members, waiting));
        true
    }
}

/// What makes two waits one product: the phase (a backward part's or
/// not), the kind (`matvec` or `vecmat`), the element type, the static
/// matrix's address and its shape (waits at different operations of the
/// program share a product when these agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ProductKey {
    backward: bool,
    vecmat: bool,
    f32: bool,
    matrix: usize,
    shape: (usize, usize),
}

impl ProductKey {
    fn of(slot: &Slot<'_>) -> Option<ProductKey> {
        let wait = slot.waiting?;
        let op = &slot.program.arrays[wait.op as usize];
        let m = matrix_operand(op);
        let shape = &op.args[m].shape;
        Some(ProductKey {
            backward: op.backward,
            vecmat: m == 1,
            f32: op.args[0].ty == ScalarType::F32,
            matrix: wait.args[m] as usize,
            shape: (shape[0], shape[1]),
        })
    }
}

/// Which operand of a batched product is the matrix.
fn matrix_operand(op: &ArrayOp) -> usize {
    match op.prim {
        Prim::Matvec => 0,
        _ => 1,
    }
}

/// The product of `op` (`matvec(S, x)` or `vecmat(x, S)`) for every wait:
/// the vectors gathered into one block, one call of the kernels, the rows
/// scattered back (after all are read: a destination may be its vector).
fn product<T: GemmFloat>(op: &ArrayOp, waits: &[Wait], buffers: &mut Buffers<T>) {
    let n = waits.len();
    // Which operand is the static matrix, and the lengths.
    let m = matrix_operand(op);
    let (matrix_shape, vector_len) = (&op.args[m].shape, op.args[1 - m].len());
    let result_len = match op.prim {
        Prim::Matvec => matrix_shape[0],
        _ => matrix_shape[1],
    };
    let (rows, cols) = (matrix_shape[0], matrix_shape[1]);
    // SAFETY: every member waiting at `op` passed the static's elements
    // (`rows x cols` of `T`) and its own vector and destination, of the
    // operation's shapes; they stay put while it waits.
    let matrix = unsafe { std::slice::from_raw_parts(waits[0].args[m].cast::<T>(), rows * cols) };
    let Buffers { vectors, out } = buffers;
    vectors.clear();
    for wait in waits {
        let v = unsafe { std::slice::from_raw_parts(wait.args[1 - m].cast::<T>(), vector_len) };
        vectors.extend_from_slice(v);
    }
    // (Every element is written by the product.)
    out.resize(n * result_len, T::ACC_ZERO);
    match op.prim {
        Prim::Matvec => gemm::matvec_into(matrix, rows, cols, vectors, n, out),
        _ => gemm::vecmat_into(vectors, matrix, n, rows, cols, out),
    }
    for (wait, row) in waits.iter().zip(out.chunks_exact(result_len)) {
        let dst = unsafe { std::slice::from_raw_parts_mut(wait.dst.cast::<T>(), result_len) };
        dst.copy_from_slice(row);
    }
}
