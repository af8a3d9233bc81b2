//! The host side of forks (`join`, `map`, `pfor`) in native code.
//!
//! A member runs its instances one after the other, as the reference
//! executor does: each is a native call of its callee, one level deeper.
//! What native code cannot do itself is the random streams and the
//! figures, so it calls these around the instances:
//!
//! - [`fork_begin`]: the forking stream draws the fork's key (four words,
//!   whether or not an instance draws);
//! - [`instance_begin`]: instance `k` gets the key's stream number `k`
//!   (the forking stream is kept aside at the first instance), and counts
//!   as one more instance started and live;
//! - [`instance_end`]: the instance is no longer live (it returned, or it
//!   stopped and the fork is being left);
//! - [`fork_end`]: the forking stream comes back; native code calls it when
//!   every instance has returned, and also before it leaves a fork on a
//!   stop, so that a catching call further out goes on with its own stream,
//!   as the reference's unwinding gives it back.
//!
//! A program that draws nothing runs without a stream (a null pointer):
//! then only the figures are kept.

use autobatch_kernels::{ForkKey, MemberRng};

use crate::Context;

/// A fork in progress in a member's run.
pub(crate) struct OpenFork {
    key: Option<ForkKey>,
    /// The forking stream, kept aside while the instances use theirs.
    parent: Option<MemberRng>,
}

/// The stream behind the context, if the program draws.
fn stream(ctx: &mut Context) -> Option<&mut MemberRng> {
    // SAFETY: `rng` is null or the member's stream, alive for the run.
    unsafe { ctx.rng.as_mut() }
}

pub(crate) extern "C" fn fork_begin(ctx: *mut Context) {
    // SAFETY: native code passes its own context.
    let ctx = unsafe { &mut *ctx };
    let key = stream(ctx).map(MemberRng::fork);
    ctx.forks.push(OpenFork { key, parent: None });
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
    ctx.instances += 1;
    ctx.live_instances += 1;
    ctx.peak_instances = ctx.peak_instances.max(ctx.live_instances);
}

pub(crate) extern "C" fn instance_end(ctx: *mut Context) {
    // SAFETY: native code passes its own context.
    let ctx = unsafe { &mut *ctx };
    ctx.live_instances -= 1;
}

pub(crate) extern "C" fn fork_end(ctx: *mut Context) {
    // SAFETY: native code passes its own context, inside a fork.
    let ctx = unsafe { &mut *ctx };
    let fork = ctx.forks.pop().expect("the end of an open fork");
    if let (Some(parent), Some(current)) = (fork.parent, stream(ctx)) {
        *current = parent;
    }
}
