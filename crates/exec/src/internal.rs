//! Internal errors, one policy: a broken invariant inside an executor, the
//! engine or the kernels reaches the caller of [`crate::run`] as
//! [`ExecError::Internal`], never as a panic or a backtrace.
//!
//! Inside, a broken invariant is reported where it is found, by
//! [`internal_error`] here or `autobatch_kernels::internal_error` in the
//! kernels: a panic whose message says what broke (the same for what Rust
//! itself checks: an index out of a slice, an `expect`). Threading an error
//! value through every kernel and every loop of the engine would cost a
//! branch per call and still miss what Rust checks, so there is one
//! boundary instead: [`guard`], around each run of an executor in
//! [`crate::run_on`], catches the unwinding panic and returns its message
//! and place as `ExecError::Internal`. Code that already returns a
//! `Result<_, ExecError>` (the verifier of the explicit-stack form, binding
//! the arguments) returns `ExecError::Internal` directly.
//!
//! So that nothing is printed, the first guarded run installs a panic hook
//! that records, instead of printing, the panics raised on a thread while
//! it works for a run: the thread that called [`guard`], the threads a
//! run starts (the local-static executor's thread, the engine's workers),
//! which call [`capture_for`] first, and the workers of the pools kept from
//! run to run ([`worker_pool`], the native strategy's), which hold
//! [`working_for`] while they do a run's job. Every other panic goes to the hook that
//! was installed before (the default one, or the command line's). The
//! observer a caller passes in [`crate::RunOptions`] runs outside the
//! capture ([`outside_capture`]): a panic there is the caller's, and
//! [`guard`] lets it go on unwinding.

use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

use rayon::ThreadPool;

use crate::ExecError;

/// Reports a broken invariant of an executor or the engine (never the
/// consequence of a value a program computes): [`guard`] turns it into
/// `ExecError::Internal` at the boundary.
#[cold]
#[track_caller]
pub(crate) fn internal_error(message: impl std::fmt::Display) -> ! {
    panic!("internal error: {message}")
}

thread_local! {
    /// The run this thread works for, whose panics are recorded; `None`
    /// outside runs.
    static CAPTURING: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The message and place of the panics recorded, by run.
static CAPTURED: Mutex<Option<HashMap<u64, String>>> = Mutex::new(None);
static NEXT_RUN: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

/// Runs `run` (one run of an executor) so that a panic inside it, on this
/// thread or on a thread the run started, comes back as
/// `ExecError::Internal` with its message and place, unprinted. A panic
/// raised outside the capture (by the caller's observer) goes on unwinding.
pub(crate) fn guard<T>(run: impl FnOnce() -> Result<T, ExecError>) -> Result<T, ExecError> {
    install_hook();
    let id = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
    let outer = CAPTURING.replace(Some(id));
    let outcome = panic::catch_unwind(AssertUnwindSafe(run));
    CAPTURING.set(outer);
    let recorded = take_recorded(id);
    match outcome {
        Ok(result) => result,
        Err(payload) => match recorded {
            Some(message) => Err(ExecError::Internal(message)),
            None => panic::resume_unwind(payload),
        },
    }
}

/// The run the calling thread works for, to pass to [`capture_for`] on a
/// thread it starts.
pub(crate) fn current_run() -> Option<u64> {
    CAPTURING.get()
}

/// Makes the calling thread (started by a run) record its panics for `run`.
pub(crate) fn capture_for(run: Option<u64>) {
    CAPTURING.set(run);
}

/// While the value lives, the calling thread (a worker of a pool that
/// [`worker_pool`] keeps from run to run) records its panics for `run`;
/// dropping it restores what the thread worked for before (a worker that
/// waits inside one run's job may run another run's job meanwhile).
pub(crate) struct WorkingFor(Option<u64>);

pub(crate) fn working_for(run: Option<u64>) -> WorkingFor {
    WorkingFor(CAPTURING.replace(run))
}

impl Drop for WorkingFor {
    fn drop(&mut self) {
        CAPTURING.set(self.0);
    }
}

/// The pools kept for later runs: threads, stack bytes, pool.
type Pools = Vec<(usize, usize, Arc<ThreadPool>)>;
static POOLS: Mutex<Pools> = Mutex::new(Vec::new());
/// How many pools are kept (the least recently used goes first).
const KEPT_POOLS: usize = 4;

/// A pool of `threads` workers named `name-i`, each with a machine stack
/// of at least `stack` bytes, kept for the runs that follow (starting the
/// threads of a new pool costs more than a whole run of many small
/// members). The stack is rounded up to a
/// power of two so that runs of similar programs share a pool. Every job a
/// run sends to the pool must hold [`working_for`] while it works.
pub(crate) fn worker_pool(
    threads: usize,
    stack: usize,
    name: &'static str,
) -> Result<Arc<ThreadPool>, ExecError> {
    let stack = stack.next_power_of_two();
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(at) = pools
        .iter()
        .position(|(t, s, _)| *t == threads && *s == stack)
    {
        let kept = pools.remove(at);
        let pool = kept.2.clone();
        pools.push(kept);
        return Ok(pool);
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .stack_size(stack)
            .thread_name(move |i| format!("{name}-{i}"))
            .build()
            .map_err(|e| ExecError::Resources(format!("cannot start the worker threads: {e}")))?,
    );
    if pools.len() == KEPT_POOLS {
        pools.remove(0);
    }
    pools.push((threads, stack, pool.clone()));
    Ok(pool)
}

/// Runs `f` (the caller's code, called back during a run) with the capture
/// off on this thread, so that a panic in it stays the caller's.
pub(crate) fn outside_capture<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAPTURING.set(self.0);
        }
    }
    let _restore = Restore(CAPTURING.replace(None));
    f()
}

fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| match CAPTURING.get() {
            Some(run) => {
                let message = payload_message(info.payload());
                let message = message.strip_prefix("internal error: ").unwrap_or(&message);
                let place = info
                    .location()
                    .map(|l| format!(" (at {}:{})", l.file(), l.line()))
                    .unwrap_or_default();
                let mut captured = CAPTURED.lock().unwrap_or_else(|e| e.into_inner());
                captured
                    .get_or_insert_with(HashMap::new)
                    .entry(run)
                    .or_insert_with(|| format!("{message}{place}"));
            }
            None => previous(info),
        }));
    });
}

fn take_recorded(run: u64) -> Option<String> {
    let mut captured = CAPTURED.lock().unwrap_or_else(|e| e.into_inner());
    captured.as_mut().and_then(|c| c.remove(&run))
}

fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_a_guarded_run_is_an_internal_error_with_its_place() {
        let outcome: Result<(), ExecError> = guard(|| internal_error("a broken invariant"));
        let Err(ExecError::Internal(message)) = outcome else {
            panic!("expected an internal error, got {outcome:?}")
        };
        assert!(message.starts_with("a broken invariant (at "), "{message}");
        assert!(message.contains("internal.rs"), "{message}");
        let outcome: Result<(), ExecError> = guard(|| {
            let v: Vec<u8> = Vec::new();
            let _ = v[std::hint::black_box(3)];
            Ok(())
        });
        assert!(
            matches!(outcome, Err(ExecError::Internal(m)) if m.contains("index out of bounds"))
        );
        assert_eq!(guard(|| Ok(7)), Ok(7));
    }

    #[test]
    fn a_panic_of_a_thread_the_run_starts_is_captured_too() {
        let outcome: Result<(), ExecError> = guard(|| {
            let run = current_run();
            let worker = std::thread::spawn(move || {
                capture_for(run);
                internal_error("on a worker")
            });
            match worker.join() {
                Ok(()) => Ok(()),
                Err(panic) => panic::resume_unwind(panic),
            }
        });
        assert!(matches!(outcome, Err(ExecError::Internal(m)) if m.starts_with("on a worker")));
    }

    #[test]
    fn a_panic_of_the_callers_code_goes_on_unwinding() {
        let caught = panic::catch_unwind(|| {
            guard(|| -> Result<(), ExecError> {
                outside_capture(|| panic!("the observer's own bug"))
            })
        });
        let payload = caught.expect_err("the panic goes on");
        assert_eq!(payload_message(&*payload), "the observer's own bug");
        assert_eq!(current_run(), None, "the capture ends with the run");
    }
}
