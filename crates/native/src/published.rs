//! The operation counts of members run together (`waits`), published
//! while they run to counters another thread reads (an observer watching
//! a long run: a sampler's chains).
//!
//! Each member counts into counters of its own, which only its coroutine
//! writes while it runs; the scheduler reads them between two resumptions.
//! What a member counted since the last look is added to the shared
//! counters when it ends, and for every member at most once per
//! [`EVERY`] while members wait at products, so that the cost stays a
//! small share of the run however many members wait and however small
//! their products. The shared counters only grow; they are a view of the
//! run for a watcher, not its totals (a member rerun elsewhere counts
//! again there). After each publication the watcher's callback runs (on
//! the scheduler's thread, between resumptions: it must not unwind).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The least time between two publications of every member's counts.
const EVERY: Duration = Duration::from_millis(5);

/// Where [`crate::NativeProgram::run_batched`] publishes its members'
/// counts: counters (one per segment) and what to call after adding to
/// them.
pub struct Watch<'a> {
    pub counts: &'a [AtomicU64],
    pub published: &'a mut dyn FnMut(),
}

/// The shared counters, and what each member has added to them so far.
pub(crate) struct Publisher<'a> {
    live: &'a [AtomicU64],
    published: &'a mut dyn FnMut(),
    /// Per member, its counts as last added (empty: none yet).
    added: Vec<Vec<u64>>,
    last: Instant,
}

impl<'a> Publisher<'a> {
    pub(crate) fn new(watch: Watch<'a>, members: usize) -> Publisher<'a> {
        Publisher {
            live: watch.counts,
            published: watch.published,
            added: vec![Vec::new(); members],
            last: Instant::now(),
        }
    }

    /// Adds what member `m` counted since its last publication, then
    /// calls the watcher's callback.
    pub(crate) fn member(&mut self, m: usize, counters: &[u64]) {
        self.add(m, counters);
        (self.published)();
    }

    fn add(&mut self, m: usize, counters: &[u64]) {
        let added = &mut self.added[m];
        if added.is_empty() {
            added.resize(counters.len(), 0);
        }
        for ((live, now), before) in self.live.iter().zip(counters).zip(added.iter_mut()) {
            if *now > *before {
                live.fetch_add(*now - *before, Ordering::Relaxed);
                *before = *now;
            }
        }
    }

    /// [`Publisher::member`] for every member, if [`EVERY`] has passed
    /// since the last time.
    pub(crate) fn every_member<'c>(&mut self, counters: impl Iterator<Item = &'c [u64]>) {
        let now = Instant::now();
        if now.duration_since(self.last) < EVERY {
            return;
        }
        self.last = now;
        for (m, counts) in counters.enumerate() {
            self.add(m, counts);
        }
        (self.published)();
    }
}
