//! What every executor keeps of a run besides its results: the counts of
//! the user's operations ([`OpCounter`]), the calls of the run's observer
//! ([`Watch`]), which also sees the run's interrupt flag, and the errors of
//! the run's limits (`--max-steps`, `--max-stack-depth`) and of an
//! interrupted run. A run's profile is [`crate::profile`].

use std::collections::HashMap;

use autobatch_ir::{Loc, Prim};
use autobatch_types::{ErrorKind, MemberError};

use crate::OpCount;

/// Calls a run's [`Observer`](crate::Observer), if it has one, at most once
/// per its interval: executors call [`Watch::tick`] after every step. It
/// is the interpreters' one look at the run's interrupt flag
/// ([`Watch::interrupted`]).
pub struct Watch<'a> {
    observer: Option<&'a crate::Observer>,
    interrupt: Option<&'a crate::Interrupt>,
    last: std::time::Instant,
    /// Steps until the clock is read again (reading it every step would cost
    /// more than a small step).
    countdown: u32,
}

impl<'a> Watch<'a> {
    pub fn new(options: &'a crate::RunOptions) -> Watch<'a> {
        Watch {
            observer: options.observer.as_ref(),
            interrupt: options.interrupt.as_ref(),
            last: std::time::Instant::now(),
            countdown: 0,
        }
    }

    /// Whether the run's interrupt flag ([`crate::RunOptions::interrupt`])
    /// is raised: from then on, each member not finished may take
    /// [`crate::INTERRUPT_GRACE_STEPS`] more steps.
    #[inline]
    pub fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(crate::Interrupt::is_requested)
    }

    /// `members_done`: the members known to have ended so far
    /// ([`crate::RunProgress::members_done`]).
    #[inline]
    pub fn tick(&mut self, steps: u64, members_done: u64, counter: &OpCounter) {
        let Some(observer) = self.observer else {
            return;
        };
        if self.countdown > 0 {
            self.countdown -= 1;
            return;
        }
        self.countdown = 16;
        let now = std::time::Instant::now();
        if now.duration_since(self.last) >= observer.interval {
            self.last = now;
            // The caller's code: a panic there is not autobatch's.
            crate::internal::outside_capture(|| {
                (observer.callback)(&crate::RunProgress {
                    steps,
                    members_done,
                    op_counts: counter.counts(),
                })
            });
        }
    }
}

/// Counts executions of the user's primitive operations, keyed by name and
/// location, and the lanes they could have served.
#[derive(Default)]
pub struct OpCounter {
    index: HashMap<(&'static str, Loc), usize>,
    counts: Vec<OpCount>,
    pub lane_sum: u64,
    pub execution_sum: u64,
    /// The threads of control now (the members, a lane waiting at a fork
    /// counting as its running instances, [`lanes::LaneTable::threads`]): an
    /// executor sets it before it records executions.
    pub lanes: u64,
    /// The sum of `lanes` over the executions recorded.
    pub lane_slots: u64,
}

impl OpCounter {
    /// Registers an operation so that it is listed even if it never runs;
    /// returns its counter index, or `None` for bookkeeping.
    pub fn register(&mut self, prim: &Prim, loc: Loc) -> Option<usize> {
        if prim.is_bookkeeping() {
            return None;
        }
        let key = (prim.name(), loc);
        let counts = &mut self.counts;
        Some(*self.index.entry(key).or_insert_with(|| {
            counts.push(OpCount {
                op: prim.name(),
                loc,
                executions: 0,
                active_lanes: 0,
            });
            counts.len() - 1
        }))
    }

    /// A counter with every user operation of `program` registered, and the
    /// counter index of each operation, by function, block and position.
    pub fn for_program(
        program: &autobatch_ir::Program,
    ) -> (OpCounter, Vec<Vec<Vec<Option<usize>>>>) {
        let mut counter = OpCounter::default();
        let indices = program
            .functions
            .values()
            .map(|f| {
                f.blocks
                    .values()
                    .map(|b| {
                        b.ops
                            .iter()
                            .map(|op| match op {
                                autobatch_ir::Op::Prim { prim, loc, .. } => {
                                    counter.register(prim, *loc)
                                }
                                autobatch_ir::Op::Call { .. } | autobatch_ir::Op::Fork { .. } => {
                                    None
                                }
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        (counter, indices)
    }

    /// The counts so far, in registration order.
    pub fn counts(&self) -> &[OpCount] {
        &self.counts
    }

    pub fn record(&mut self, counter: Option<usize>, active: usize) {
        if let Some(i) = counter {
            self.counts[i].executions += 1;
            self.counts[i].active_lanes += active as u64;
            self.execution_sum += 1;
            self.lane_sum += active as u64;
            self.lane_slots += self.lanes;
        }
    }

    /// The counts sorted by location then name, and the lane utilization:
    /// the active lanes of every execution over the threads at the time.
    pub fn finish(mut self) -> (Vec<OpCount>, f64) {
        self.counts
            .sort_by(|a, b| (a.loc, a.op).cmp(&(b.loc, b.op)));
        let utilization = if self.execution_sum == 0 || self.lane_slots == 0 {
            0.0
        } else {
            self.lane_sum as f64 / self.lane_slots as f64
        };
        (self.counts, utilization)
    }
}

pub fn stack_overflow(limit: usize, loc: Loc) -> MemberError {
    MemberError::new(
        ErrorKind::StackOverflow,
        format!("stack depth exceeded the limit of {limit} (--max-stack-depth)"),
        loc,
    )
}

/// The error of a member stopped at `loc` because the run was interrupted
/// ([`crate::RunOptions::interrupt`]); [`crate::run_on`] places every such
/// error at the entry function ([`crate::interrupted_error`]).
pub fn interrupted(loc: Loc) -> MemberError {
    MemberError::new(
        ErrorKind::Interrupted,
        "the run was interrupted (Ctrl-C) before this member finished",
        loc,
    )
}

pub fn step_limit(limit: u64, loc: Loc) -> MemberError {
    MemberError::new(
        ErrorKind::StepLimit,
        format!("the member exceeded the limit of {limit} steps (--max-steps)"),
        loc,
    )
}

/// The outcome of a run whose stack limit is 0: not even the entry function
/// can be entered, so every member stops at the entry's location, as under
/// the reference executor.
pub fn all_members_overflow(
    program: &autobatch_ir::Program,
    batch: &crate::Batch,
) -> crate::RunOutput {
    let loc = program.functions[batch.entry].loc;
    let (counter, _) = OpCounter::for_program(program);
    let (op_counts, lane_utilization) = counter.finish();
    crate::RunOutput {
        adjoints: Default::default(),
        results: (0..batch.size)
            .map(|_| Err(stack_overflow(0, loc)))
            .collect(),
        stats: crate::Stats {
            steps: 0,
            lane_utilization,
            op_counts,
            wall_seconds: 0.0,
            ..crate::Stats::default()
        },
    }
}
