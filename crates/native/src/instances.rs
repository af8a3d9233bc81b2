//! Concurrent instances: the host side of a fork compiled with
//! [`Forks::Concurrent`](crate::Forks::Concurrent) (the `native-batched`
//! strategy).
//!
//! The forking code writes, per instance, the address of its callee's
//! instance trampoline and of the instance's argument and result slots
//! into a table, then calls [`fork_wait`]. A member run among others
//! ([`crate::waits`]) suspends there; the scheduler starts each instance
//! on a stack of its own, as a member of the run (an instance waits at
//! products with the others: the nodes of one tree batch with each
//! other, as in DyNet and ACRoBat), and resumes the forking code when the
//! last one has returned. When the scheduler cannot (too many members
//! alive, or no stack to be had), and for a member run alone, the forking
//! code runs the instances itself, one after the other
//! ([`run_in_order`]).
//!
//! Each instance's context is its own: its random stream (the fork key's
//! stream `k`, as under the reference), its steps (the member's steps
//! left at the fork: never fewer than the sequential evaluation would
//! leave it), its depth (the member's, one level deeper), its figures and
//! its log of static adjoints; its counters are the member's.
//! [`resolve`] then gives the member what the sequential evaluation
//! would: the steps of the instances added in order, their adjoints
//! logged in order, their instances counted, and the deepest nesting of
//! instances as the most live at once (the reference's figure, although
//! here they were live together). What a concurrent fork
//! cannot reproduce exactly is a stop inside an instance (which instance
//! stopped first in the sequential order, where the step limit falls,
//! what a catching call recovers): a member with any instance that did
//! not return, or whose instances' steps together pass its limit, stops
//! with [`Stop::NativeStack`](crate::Stop::NativeStack), and the executor
//! reruns it alone on the reference executor, which gives its exact
//! result. That is rare: programs that fault inside an instance.

use autobatch_kernels::adjoints::AdjointRecord;
use autobatch_kernels::MemberRng;

use crate::waits::{MemberYielder, Wait};
use crate::Context;

/// `fn(context, args, results)`: an instance trampoline.
pub(crate) type InstanceTrampoline = unsafe extern "C" fn(*mut Context, *const u64, *mut u64);

/// One entry of the table the forking code writes: the instance's
/// trampoline, and its argument and result slots.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Request {
    pub trampoline: InstanceTrampoline,
    pub args: *const u64,
    pub results: *mut u64,
}

/// How an instance ended.
pub(crate) struct Ended {
    /// Its context's status: 0 if it returned.
    status: u32,
    /// The steps it took.
    steps: u64,
    instances: u64,
    peak_instances: u64,
    adjoints: Vec<AdjointRecord>,
}

/// A fork whose instances run concurrently, in the frame of
/// [`fork_wait`] while the forking code waits.
pub(crate) struct PendingFork {
    /// The forking context (the member's or an instance's).
    pub parent: *mut Context,
    pub requests: Vec<Request>,
    /// Per instance, how it ended, once it has.
    pub ended: Vec<Option<Ended>>,
    /// The steps each instance may take: the member's left at the fork.
    budget: u64,
    /// The depth each instance may still grow by.
    depth_left: u64,
}

impl PendingFork {
    /// The context instance `k` starts with, on a stack whose frames may
    /// go down to `stack_limit`, suspending through `yielder`, drawing
    /// from `rng` (the instance's stream; `None` when the program draws
    /// nothing).
    ///
    /// # Safety
    /// `parent` is the forking context, suspended (or calling) while the
    /// instance runs.
    pub unsafe fn context(
        &self,
        stack_limit: u64,
        yielder: *const MemberYielder,
        rng: Option<&mut MemberRng>,
    ) -> Context {
        // SAFETY: as the function's contract.
        let parent = unsafe { &*self.parent };
        let (steps_left, steps_reserve) = if parent.polled {
            // Polling code takes its first slice at the callee's entry.
            (0, self.budget)
        } else {
            (self.budget, 0)
        };
        Context {
            status: 0,
            _pad: 0,
            steps_left,
            depth_left: self.depth_left,
            stack_limit,
            counters: parent.counters,
            symbols: parent.symbols,
            static_data: parent.static_data,
            steps_reserve,
            interrupt: parent.interrupt,
            symbol_count: parent.symbol_count,
            arrays: parent.arrays,
            statics: parent.statics,
            rng: rng.map_or(std::ptr::null_mut(), |r| r),
            fault: None,
            scratch: Vec::new(),
            forks: Vec::new(),
            instances: 0,
            live_instances: 0,
            peak_instances: 0,
            adjoints: Vec::new(),
            yielder,
            polled: parent.polled,
            rerun_status: parent.rerun_status,
        }
    }

    /// Instance `k`'s random stream, if the program draws.
    pub fn stream(&self, k: usize) -> Option<MemberRng> {
        // SAFETY: the parent is suspended or calling (see `context`).
        let parent = unsafe { &*self.parent };
        let fork = parent.forks.last().expect("an instance inside a fork");
        fork.key().map(|key| key.instance(k as u64))
    }

    /// Records how instance `k` ended, from its context after its
    /// trampoline returned.
    pub fn end(&mut self, k: usize, ctx: &mut Context) {
        let left = ctx.steps_left + ctx.steps_reserve;
        self.ended[k] = Some(Ended {
            status: ctx.status,
            steps: self.budget.saturating_sub(left),
            instances: ctx.instances,
            peak_instances: ctx.peak_instances,
            adjoints: std::mem::take(&mut ctx.adjoints),
        });
    }
}

/// Called by the forking code with `count` [`Request`]s at `table`, the
/// depth it may still grow by (at least one: checked before), and its
/// steps in hand; returns its steps in hand after the instances (see the
/// module doc). On return the instances' results are in their slots,
/// unless the context's status is set.
pub(crate) extern "C" fn fork_wait(
    ctx: *mut Context,
    table: *const Request,
    count: u64,
    depth_left: u64,
    steps: u64,
) -> u64 {
    // SAFETY: native code passes its own context and a table of `count`
    // requests in its frame.
    let (parent, requests) = unsafe {
        (
            &mut *ctx,
            std::slice::from_raw_parts(table, count as usize).to_vec(),
        )
    };
    let total = steps + parent.steps_reserve;
    let n = requests.len();
    let mut fork = PendingFork {
        parent: ctx,
        requests,
        ended: (0..n).map(|_| None).collect(),
        budget: total,
        depth_left: depth_left - 1,
    };
    if !parent.yielder.is_null() {
        // SAFETY: a non-null yielder is this coroutine's; `fork` stays in
        // this frame until the scheduler resumes it.
        unsafe { (*parent.yielder).suspend(Wait::Fork(&mut fork)) };
    }
    if fork.ended.iter().any(Option::is_none) {
        // SAFETY: this context is the parent, calling.
        unsafe { run_in_order(&mut fork) };
    }
    // SAFETY: `ctx` is this code's context (the `parent` borrow ended).
    resolve(unsafe { &mut *ctx }, fork, steps, total)
}

/// Runs the instances one after the other on this stack (the forking
/// code's), each with the steps the earlier ones left, until one stops.
///
/// # Safety
/// The fork's parent is the context calling.
unsafe fn run_in_order(fork: &mut PendingFork) {
    // SAFETY: as the function's contract.
    let (stack_limit, yielder) = unsafe { ((*fork.parent).stack_limit, (*fork.parent).yielder) };
    let full = fork.budget;
    let mut used = 0;
    for k in 0..fork.requests.len() {
        fork.budget = full - used;
        let mut rng = fork.stream(k);
        // SAFETY: as the function's contract.
        let mut ctx = unsafe { fork.context(stack_limit, yielder, rng.as_mut()) };
        let request = fork.requests[k];
        // SAFETY: the trampoline of the instance's callee, with the
        // slots the forking code wrote; `ctx` is this instance's.
        unsafe { (request.trampoline)(&mut ctx, request.args, request.results) };
        fork.end(k, &mut ctx);
        let ended = fork.ended[k].as_mut().expect("just ended");
        if ended.status != 0 {
            break;
        }
        used += ended.steps;
    }
    fork.budget = full;
}

/// Gives the forking context what the sequential evaluation of the fork
/// would have: the instances' steps, figures and adjoints; returns its
/// steps in hand (`steps` before the fork, `total` with its reserve).
/// A fork with an instance that did not return, or whose instances took
/// more steps than the context had, sets the rerun status instead.
fn resolve(ctx: &mut Context, fork: PendingFork, steps: u64, total: u64) -> u64 {
    let mut used: u64 = 0;
    for ended in &fork.ended {
        match ended {
            Some(e) if e.status == 0 => used = used.saturating_add(e.steps),
            _ => {
                ctx.status = ctx.rerun_status;
                return steps;
            }
        }
    }
    if used > total {
        ctx.status = ctx.rerun_status;
        return steps;
    }
    // The figures of the sequential evaluation: one instance live at a
    // time, each as deep as its own forks nest.
    let mut deepest = 0;
    for ended in fork.ended.into_iter().flatten() {
        ctx.instances += 1 + ended.instances;
        deepest = deepest.max(ended.peak_instances);
        ctx.adjoints.extend(ended.adjoints);
    }
    ctx.peak_instances = ctx.peak_instances.max(ctx.live_instances + 1 + deepest);
    let left = total - used;
    let in_hand = steps.min(left);
    ctx.steps_reserve = left - in_hand;
    in_hand
}
