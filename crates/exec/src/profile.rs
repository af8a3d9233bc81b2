//! A run's profile: the lanes each step used, in order, and each block's
//! steps and lanes — what `autobatch run --profile` draws. The batching
//! strategies record it when [`crate::RunOptions::profile`] is set; it
//! changes no result and costs a few additions per step.
//!
//! A long run is kept in a bounded number of bins: when [`MAX_BINS`] are
//! full, neighbouring bins merge and each later bin holds twice the steps,
//! so a profile of a billion steps takes as little memory as one of ten
//! thousand, at a resolution a picture can show.

use autobatch_types::Loc;

/// The most bins of steps a profile keeps (a picture is a few thousand
/// pixels wide).
pub const MAX_BINS: usize = 4096;

/// Lanes used by a run of consecutive steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepBin {
    /// Steps in the bin: [`Profile::bin_width`], but for the last bin of a
    /// profile and where two profiles were joined ([`Profile::append`]).
    pub steps: u64,
    /// The rows (members or instances) the bin's steps ran, summed.
    pub active: u64,
    /// The threads of control alive at each of the bin's steps, summed:
    /// `active / threads` is the bin's lane utilization.
    pub threads: u64,
}

/// One basic block of the program, as the profile counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockProfile {
    /// The function the block belongs to.
    pub function: String,
    /// The block's index in its function (the `bbN` of the IR text).
    pub block: usize,
    /// Where the block starts in the source.
    pub loc: Loc,
    /// Times the block ran (each a step).
    pub executions: u64,
    /// Rows it ran, summed over its executions.
    pub active: u64,
    /// Threads of control alive at its executions, summed.
    pub threads: u64,
    /// The user operations it holds (bookkeeping excluded): each execution
    /// runs each of them once over its rows.
    pub operations: u64,
}

/// The profile of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Steps per bin (a power of two; each bin says how many it holds).
    pub bin_width: u64,
    /// The run's steps in order, about `bin_width` to a bin.
    pub bins: Vec<StepBin>,
    /// Every block that ran at least once, in program order (by
    /// function, then block).
    pub blocks: Vec<BlockProfile>,
}

impl Profile {
    /// The steps of the run.
    pub fn steps(&self) -> u64 {
        self.bins.iter().map(|b| b.steps).sum()
    }

    /// Appends the steps of `later` (a run that followed this one: the
    /// next size of a ragged batch) and adds its blocks' counts.
    pub fn append(&mut self, later: &Profile) {
        let mut profile = std::mem::replace(self, Profile::empty());
        // A last bin that is not full is continued by `later`'s steps.
        let current = match profile.bins.last() {
            Some(last) if last.steps < profile.bin_width => profile.bins.pop().unwrap_or_default(),
            _ => StepBin::default(),
        };
        let mut recorder = Recorder { profile, current };
        recorder.widen_to(later.bin_width);
        for bin in &later.bins {
            recorder.push_bin(*bin);
        }
        *self = recorder.finish_bins();
        for block in &later.blocks {
            match self
                .blocks
                .iter_mut()
                .find(|b| b.function == block.function && b.block == block.block)
            {
                Some(mine) => {
                    mine.executions += block.executions;
                    mine.active += block.active;
                    mine.threads += block.threads;
                }
                None => self.blocks.push(block.clone()),
            }
        }
    }

    fn empty() -> Profile {
        Profile {
            bin_width: 1,
            bins: Vec::new(),
            blocks: Vec::new(),
        }
    }
}

/// Records the steps of a run into bins (see the module doc).
#[derive(Debug)]
struct Recorder {
    profile: Profile,
    /// The bin being filled (not yet in `profile.bins`).
    current: StepBin,
}

impl Recorder {
    fn step(&mut self, active: u64, threads: u64) {
        self.current.steps += 1;
        self.current.active += active;
        self.current.threads += threads;
        if self.current.steps == self.profile.bin_width {
            let full = std::mem::take(&mut self.current);
            self.close(full);
        }
    }

    /// Adds a full bin to the profile, halving the resolution when it is
    /// full.
    fn close(&mut self, bin: StepBin) {
        self.profile.bins.push(bin);
        if self.profile.bins.len() == MAX_BINS {
            self.halve();
        }
    }

    fn halve(&mut self) {
        let bins = std::mem::take(&mut self.profile.bins);
        self.profile.bins = bins
            .chunks(2)
            .map(|pair| StepBin {
                steps: pair.iter().map(|b| b.steps).sum(),
                active: pair.iter().map(|b| b.active).sum(),
                threads: pair.iter().map(|b| b.threads).sum(),
            })
            .collect();
        self.profile.bin_width *= 2;
    }

    /// Coarsens this profile until its bins are at least `width` wide.
    fn widen_to(&mut self, width: u64) {
        while self.profile.bin_width < width {
            // An odd last bin waits in `current` for the next steps rather
            // than become a narrow bin between wide ones.
            if self.profile.bins.len() % 2 == 1 {
                let last = self.profile.bins.pop().unwrap_or_default();
                self.current = add(last, self.current);
            }
            self.halve();
        }
    }

    /// Adds a bin of another profile, whose bins are at most as wide as
    /// this one's (as `widen_to` made them).
    fn push_bin(&mut self, bin: StepBin) {
        self.current = add(self.current, bin);
        if self.current.steps >= self.profile.bin_width {
            let full = std::mem::take(&mut self.current);
            self.close(full);
        }
    }

    fn finish_bins(mut self) -> Profile {
        if self.current.steps > 0 {
            let last = std::mem::take(&mut self.current);
            self.profile.bins.push(last);
        }
        self.profile
    }
}

fn add(a: StepBin, b: StepBin) -> StepBin {
    StepBin {
        steps: a.steps + b.steps,
        active: a.active + b.active,
        threads: a.threads + b.threads,
    }
}

/// What a batching strategy keeps while it records a profile: the
/// recorder, every block of the program (by function and block index)
/// described in advance, and which of them ran.
#[derive(Debug)]
pub struct Profiler {
    recorder: Recorder,
    /// `blocks[function][block]`, counted as the run goes.
    blocks: Vec<Vec<BlockProfile>>,
}

impl Profiler {
    /// A profiler for the blocks of `program`.
    pub fn for_program(program: &autobatch_ir::Program) -> Profiler {
        let blocks = program
            .functions
            .values()
            .map(|f| {
                f.blocks
                    .values()
                    .enumerate()
                    .map(|(index, b)| BlockProfile {
                        function: f.name.clone(),
                        block: index,
                        loc: b.loc,
                        executions: 0,
                        active: 0,
                        threads: 0,
                        operations: b
                            .ops
                            .iter()
                            .filter(|op| {
                                matches!(op, autobatch_ir::Op::Prim { prim, .. } if !prim.is_bookkeeping())
                            })
                            .count() as u64,
                    })
                    .collect()
            })
            .collect();
        Profiler::with_blocks(blocks)
    }

    fn with_blocks(blocks: Vec<Vec<BlockProfile>>) -> Profiler {
        Profiler {
            recorder: Recorder {
                profile: Profile::empty(),
                current: StepBin::default(),
            },
            blocks,
        }
    }

    /// Records one step: block `block` of function `function` ran `active`
    /// rows while `threads` threads of control were alive.
    #[inline]
    pub fn step(&mut self, function: usize, block: usize, active: usize, threads: usize) {
        let (active, threads) = (active as u64, threads as u64);
        self.recorder.step(active, threads);
        let entry = &mut self.blocks[function][block];
        entry.executions += 1;
        entry.active += active;
        entry.threads += threads;
    }

    /// The profile: the blocks that ran, in program order (by function,
    /// then block).
    pub fn finish(self) -> Profile {
        let mut profile = self.recorder.finish_bins();
        profile.blocks = self
            .blocks
            .into_iter()
            .flatten()
            .filter(|b| b.executions > 0)
            .collect();
        profile
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(steps: &[(u64, u64)]) -> Profile {
        let mut profiler = Profiler::with_blocks(vec![vec![BlockProfile {
            function: "f".into(),
            block: 0,
            loc: Loc::new(1, 1),
            executions: 0,
            active: 0,
            threads: 0,
            operations: 2,
        }]]);
        for &(active, threads) in steps {
            profiler.step(0, 0, active as usize, threads as usize);
        }
        profiler.finish()
    }

    #[test]
    fn short_runs_keep_every_step() {
        let profile = record(&[(3, 4), (1, 4), (4, 4)]);
        assert_eq!(profile.bin_width, 1);
        assert_eq!(
            profile
                .bins
                .iter()
                .map(|b| (b.active, b.threads))
                .collect::<Vec<_>>(),
            [(3, 4), (1, 4), (4, 4)]
        );
        assert_eq!(profile.blocks[0].executions, 3);
        assert_eq!(profile.blocks[0].active, 8);
        assert_eq!(profile.blocks[0].threads, 12);
    }

    #[test]
    fn long_runs_merge_neighbouring_steps_and_keep_the_totals() {
        let steps: Vec<(u64, u64)> = (0..10_000u64).map(|i| (i % 7, 8)).collect();
        let profile = record(&steps);
        assert!(profile.bins.len() <= MAX_BINS);
        assert_eq!(profile.bin_width, 4);
        assert_eq!(profile.steps(), 10_000);
        let active: u64 = profile.bins.iter().map(|b| b.active).sum();
        assert_eq!(active, steps.iter().map(|s| s.0).sum::<u64>());
        // Every bin but the last is full, and holds consecutive steps.
        assert!(profile.bins[..profile.bins.len() - 1]
            .iter()
            .all(|b| b.steps == 4));
        assert_eq!(profile.bins[1].active, (4..8).map(|i| i % 7).sum::<u64>());
    }

    #[test]
    fn appending_a_run_keeps_its_steps_after_this_one() {
        let mut first = record(&[(1, 2); 5]);
        let second = record(&vec![(2, 2); 9000]);
        first.append(&second);
        assert_eq!(first.steps(), 9005);
        assert!(first.bins.len() <= MAX_BINS);
        assert_eq!(first.blocks.len(), 1);
        assert_eq!(first.blocks[0].executions, 9005);
        assert_eq!(first.blocks[0].active, 5 + 18_000);
        // The first bin holds the first run's five steps and the start of
        // the second's.
        assert_eq!(first.bin_width, 4);
        assert_eq!((first.bins[0].steps, first.bins[0].active), (4, 4));
        assert_eq!((first.bins[1].steps, first.bins[1].active), (5, 1 + 8));
    }
}
