//! The host side of forks (`join`, `map`, `pfor`) in native code.
//!
//! A member runs its instances one after the other, as the reference
//! executor does: each is a native call of its callee, one level deeper.
//! What native code cannot do itself is the random streams and the
//! figures, so it calls these around the instances:
//!
//! - [`fork_begin`]: the forking stream draws the fork's key (four words,
//!   whether or not an instance draws; none for a `Restore` fork or one run
//!   again by a recomputation, whose instances draw nothing); a taped fork sets the forking tape aside
//!   (`Restore` first takes the instances' tapes off it);
//! - [`instance_begin`]: instance `k` gets the key's stream number `k`
//!   (the forking stream is kept aside at the first instance), and counts
//!   as one more instance started and live; an instance of a `Restore`
//!   fork gets forward instance `k`'s tape;
//! - [`instance_end`]: the instance is no longer live (it returned, or it
//!   stopped and the fork is being left); a `Save` fork keeps its tape;
//! - [`fork_end`]: the forking stream and tape come back (a `Save` fork
//!   pushes its instances' tapes on it); native code calls it when every
//!   instance has returned, and also before it leaves a fork on a stop, so
//!   that a catching call further out goes on with its own stream, as the
//!   reference's unwinding gives it back.
//!
//! A program that draws nothing runs without a stream (a null pointer):
//! then only the figures are kept.
//!
//! A catching call of a program that uses a tape calls [`catch_begin`]
//! before it (the member's tape is set aside, the callee starts with an
//! empty one) and [`catch_end`] when it completed or was caught (the tape
//! comes back), so that a caught failure leaves nothing of what it pushed.

use autobatch_ir::TapeMode;
use autobatch_kernels::{ForkKey, MemberRng};

use crate::tape::Tape;
use crate::Context;

/// A fork in progress in a member's run.
pub(crate) struct OpenFork {
    key: Option<ForkKey>,
    /// The forking stream, kept aside while the instances use theirs.
    parent: Option<MemberRng>,
    mode: TapeMode,
    /// The forking tape, kept aside while the instances of a taped fork
    /// use theirs.
    parent_tape: Tape,
    /// `Save`: the tapes of the instances that ended, in order; `Restore`:
    /// the tapes the instances get, by index.
    tapes: Vec<Tape>,
}

/// The [`TapeMode`] a fork passes to [`fork_begin`] as a number.
pub(crate) fn tape_mode_code(mode: TapeMode) -> i64 {
    match mode {
        TapeMode::None => 0,
        TapeMode::Save => 1,
        TapeMode::Restore => 2,
        TapeMode::Again => 3,
        TapeMode::SaveAgain => 4,
    }
}

/// The stream behind the context, if the program draws.
fn stream(ctx: &mut Context) -> Option<&mut MemberRng> {
    // SAFETY: `rng` is null or the member's stream, alive for the run.
    unsafe { ctx.rng.as_mut() }
}

/// Begins a fork of `count` instances with tape mode `mode`
/// ([`tape_mode_code`]).
pub(crate) extern "C" fn fork_begin(ctx: *mut Context, mode: i64, count: u64) {
    // SAFETY: native code passes its own context.
    let ctx = unsafe { &mut *ctx };
    let mode = match mode {
        1 => TapeMode::Save,
        2 => TapeMode::Restore,
        3 => TapeMode::Again,
        4 => TapeMode::SaveAgain,
        _ => TapeMode::None,
    };
    let key = if mode.draws_key() {
        stream(ctx).map(MemberRng::fork)
    } else {
        stream(ctx).map(|s| s.clone().fork())
    };
    let mut parent_tape = if mode.taped() {
        std::mem::take(&mut ctx.tape)
    } else {
        Tape::default()
    };
    let tapes = match mode {
        TapeMode::Restore => match parent_tape.pop_instances(count as usize) {
            Some(tapes) => tapes,
            None => unreachable!("a restoring fork found no fork's tapes"),
        },
        TapeMode::Save | TapeMode::SaveAgain => Tape::spare_list(),
        TapeMode::None | TapeMode::Again => Vec::new(),
    };
    ctx.forks.push(OpenFork {
        key,
        parent: None,
        mode,
        parent_tape,
        tapes,
    });
}

pub(crate) extern "C" fn instance_begin(ctx: *mut Context, k: u64) {
    // SAFETY: native code passes its own context, inside a fork.
    let ctx = unsafe { &mut *ctx };
    let rng = ctx.rng;
    let fork = ctx.forks.last_mut().expect("an instance inside a fork");
    if let Some(key) = &fork.key {
        // SAFETY: a key exists only when the stream does.
        let current = unsafe { &mut *rng };
        let previous = std::mem::replace(current, key.instance(k));
        if fork.parent.is_none() {
            fork.parent = Some(previous);
        }
    }
    match fork.mode {
        TapeMode::Save | TapeMode::SaveAgain => {
            ctx.tape = Tape::spare_above(fork.parent_tape.held())
        }
        TapeMode::Restore => ctx.tape = std::mem::take(&mut fork.tapes[k as usize]),
        TapeMode::None | TapeMode::Again => {}
    }
    // A fork run again by a recomputation counts no instances.
    ctx.instances += u64::from(!matches!(fork.mode, TapeMode::Again | TapeMode::SaveAgain));
    ctx.live_instances += 1;
    ctx.peak_instances = ctx.peak_instances.max(ctx.live_instances);
}

pub(crate) extern "C" fn instance_end(ctx: *mut Context) {
    // SAFETY: native code passes its own context.
    let ctx = unsafe { &mut *ctx };
    ctx.live_instances -= 1;
    let fork = ctx.forks.last_mut().expect("an instance inside a fork");
    match fork.mode {
        TapeMode::Save | TapeMode::SaveAgain => fork.tapes.push(std::mem::take(&mut ctx.tape)),
        TapeMode::Restore => Tape::give_back(std::mem::take(&mut ctx.tape)),
        TapeMode::None | TapeMode::Again => {}
    }
}

pub(crate) extern "C" fn fork_end(ctx: *mut Context) {
    // SAFETY: native code passes its own context, inside a fork.
    let ctx = unsafe { &mut *ctx };
    let fork = ctx.forks.pop().expect("the end of an open fork");
    if let (Some(parent), Some(current)) = (fork.parent, stream(ctx)) {
        *current = parent;
    }
    if fork.mode.taped() {
        ctx.tape = fork.parent_tape;
        if fork.mode.saves() {
            ctx.tape.push_instances(fork.tapes);
            ctx.note_tape();
        } else {
            Tape::give_back_list(fork.tapes);
        }
    }
}

pub(crate) extern "C" fn catch_begin(ctx: *mut Context) {
    // SAFETY: native code passes its own context.
    let ctx = unsafe { &mut *ctx };
    let held = ctx.tape.held();
    let tape = std::mem::replace(&mut ctx.tape, Tape::spare_above(held));
    ctx.caught_tapes.push(tape);
}

pub(crate) extern "C" fn catch_end(ctx: *mut Context) {
    // SAFETY: native code passes its own context, after a `catch_begin`.
    let ctx = unsafe { &mut *ctx };
    let outer = ctx
        .caught_tapes
        .pop()
        .expect("the end of a catching call that began");
    Tape::give_back(std::mem::replace(&mut ctx.tape, outer));
}
