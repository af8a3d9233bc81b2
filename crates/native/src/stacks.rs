//! The machine stacks of `native-batched`'s members (`waits`), and of
//! one-thread runs on the calling thread ([`run_on_stack`]), kept from
//! one run to the next.
//!
//! A fresh stack is a mapping whose pages fault in one by one as a
//! member's frames first reach them, a fault per page, which can cost a
//! small warm run more than its work. Stacks of members that ended go to a pool
//! shared by every thread and every run; a later member takes one whose
//! room is large enough. What the pool keeps is bounded: at most [`POOLED`]
//! stacks, each keeping only its top [`KEPT`] bytes surely resident (where
//! every member's frames begin). The pages below are handed to the system
//! as free when the stack enters the pool (`MADV_FREE`): it takes them back
//! only when it runs short of memory, and until then the next member whose
//! frames reach them writes them without a page fault (a recursive
//! member's frames go well below the top, on every run). Where the system
//! has no such hint, they are given back at once (`MADV_DONTNEED`) and
//! fault in again when a deep member reaches them. Either way they read as
//! zeros or as they were: a stack's contents never matter to the next
//! member, whose frames are written before they are read.

use std::sync::{Mutex, PoisonError};

use corosensei::stack::{DefaultStack, Stack};

/// The most stacks the pool keeps.
const POOLED: usize = 256;
/// The bytes at the top of a pooled stack that stay resident.
const KEPT: usize = 128 << 10;

static POOL: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());

/// The bytes a member's frames may use on `stack`.
fn room(stack: &DefaultStack) -> usize {
    stack.base().get() - stack.limit().get()
}

/// A stack with at least `size` bytes of room: a pooled one, else a new one.
pub(crate) fn take(size: usize) -> std::io::Result<DefaultStack> {
    let pooled = {
        let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
        let found = pool.iter().rposition(|s| room(s) >= size);
        found.map(|i| pool.swap_remove(i))
    };
    match pooled {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(size),
    }
}

/// Runs `f` on this thread, on a pooled machine stack with at least
/// `room` bytes (given back to the pool when `f` returns or panics; a
/// panic goes on in the caller). A run of one thread uses it to run its
/// members where it is called, instead of waking a worker thread with a
/// stack that large, which can cost more than the members of a small run
/// take. An error when no stack could be mapped.
pub fn run_on_stack<R>(room: usize, f: impl FnOnce() -> R) -> std::io::Result<R> {
    let mut stack = take(room)?;
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        corosensei::on_stack(&mut stack, f)
    }));
    give_back(vec![stack]);
    match ran {
        Ok(value) => Ok(value),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Gives the stacks of ended members to the pool (those beyond its
/// capacity are unmapped).
pub(crate) fn give_back(stacks: Vec<DefaultStack>) {
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    for stack in stacks {
        if pool.len() < POOLED {
            release_deep_pages(&stack);
            pool.push(stack);
        }
    }
}

/// Hands the pages below the top [`KEPT`] bytes of `stack` to the system
/// as free (see the module doc).
fn release_deep_pages(stack: &DefaultStack) {
    let (limit, base) = (stack.limit().get(), stack.base().get());
    let deep_end = base.saturating_sub(KEPT).max(limit);
    if deep_end > limit {
        let (start, bytes) = (limit as *mut libc::c_void, deep_end - limit);
        // SAFETY: [limit, deep_end) lies inside the stack's private
        // anonymous mapping, which no coroutine uses (the stack's member
        // has ended) and whose pages may read as zeros or as they were
        // when next touched (a stack's data is dead between members).
        // `limit` is page-aligned (the mapping's start plus its guard
        // page), as the address must be. A failure leaves the pages
        // resident, which only costs memory.
        unsafe {
            if !free_lazily(start, bytes) {
                libc::madvise(start, bytes, libc::MADV_DONTNEED);
            }
        }
    }
}

/// `MADV_FREE` on the range, where the system has it; whether it took it.
///
/// # Safety
/// As `madvise`: the range is page-aligned, mapped, and its contents dead.
unsafe fn free_lazily(start: *mut libc::c_void, bytes: usize) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
    {
        libc::madvise(start, bytes, libc::MADV_FREE) == 0
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
    {
        let _ = (start, bytes);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the pool: one at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// A stack given back is the one the next member gets, its top kept
    /// and its deep pages (handed to the system) usable again.
    #[test]
    fn a_stack_given_back_is_reused_with_its_deep_pages_released() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let size = 3 << 20;
        let stack = take(size).expect("a stack");
        let (limit, base) = (stack.limit().get(), stack.base().get());
        // SAFETY: both addresses lie inside the stack's writable mapping.
        unsafe {
            *((limit + 4096) as *mut u8) = 7;
            *((base - 64) as *mut u8) = 9;
        }
        give_back(vec![stack]);
        let again = take(size).expect("a stack");
        assert_eq!(again.base().get(), base, "the pooled stack is reused");
        // SAFETY: as above.
        let (deep, top) = unsafe { (*((limit + 4096) as *const u8), *((base - 64) as *const u8)) };
        assert!(
            deep == 0 || deep == 7,
            "a deep page reads as zeros (taken back) or as it was (not yet)"
        );
        assert_eq!(top, 9, "the top pages stay resident");
        // SAFETY: as above.
        unsafe {
            *((limit + 4096) as *mut u8) = 5;
            assert_eq!(
                *((limit + 4096) as *const u8),
                5,
                "a deep page is writable again"
            );
        }
        give_back(vec![again]);
    }

    /// `run_on_stack` runs its closure on a stack of the room asked (not
    /// the caller's), gives its value back, and lets a panic go on in the
    /// caller, the stack returned to the pool either way.
    #[test]
    fn a_closure_runs_on_a_pooled_stack_and_its_panic_goes_on() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let room = 5 << 20;
        let here = 0_u8;
        let caller = std::hint::black_box(&here) as *const u8 as usize;
        let (on, value) = run_on_stack(room, || {
            let there = 0_u8;
            (std::hint::black_box(&there) as *const u8 as usize, 42)
        })
        .expect("a stack");
        assert_eq!(value, 42);
        assert!(on.abs_diff(caller) > 1 << 20, "ran on another stack");
        let pooled = |at: usize| {
            let pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
            pool.iter()
                .any(|s| s.limit().get() <= at && at < s.base().get())
        };
        assert!(pooled(on), "the stack went back to the pool");
        let panicked = std::panic::catch_unwind(|| {
            run_on_stack(room, || -> usize { panic!("a member's host code failed") })
        });
        let message = panicked.expect_err("the panic goes on");
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"a member's host code failed")
        );
        assert!(
            pooled(on),
            "the stack went back to the pool after the panic"
        );
    }
}
