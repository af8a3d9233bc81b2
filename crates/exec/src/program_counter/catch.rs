//! Catching calls under program-counter: per lane, a stack of the
//! catching calls it is inside ([`CatchFrame`]: return-stack depth,
//! recovery block, heights of the value stacks the callee may push); a
//! catchable fault cuts the lane's stacks back to its innermost frame and
//! sends it to the recovery block ([`unwind`]).

use super::*;

/// A catching call a member is inside: where it goes on if it faults, and
/// the state to cut its stacks back to.
#[derive(Clone, Debug)]
pub(super) struct CatchFrame {
    /// The block that made the call.
    pub(super) call: PcBlock,
    /// The length of the member's return stack before the call.
    pub(super) return_depth: usize,
    pub(super) recover: PcBlock,
    /// The heights of the variable stacks the callee may push, in the order
    /// of [`CatchPlan::saved`] for the call's block.
    pub(super) heights: Vec<usize>,
}

/// Which variable stacks each catching call must restore on a fault: the
/// full variables pushed anywhere the callee may reach.
pub(super) struct CatchPlan {
    /// Per block ending in a catching call, the variables to restore.
    pub(super) saved: Vec<Vec<GlobalVar>>,
}

impl CatchPlan {
    /// The plan of `lowered`, whose functions reach those of `calls`
    /// through calls ([`autobatch_passes::stack::reachability`]).
    pub(super) fn new(lowered: &LoweredProgram, calls: &[Vec<bool>]) -> CatchPlan {
        let mut pushed: Vec<BTreeSet<GlobalVar>> = vec![BTreeSet::new(); lowered.functions.len()];
        for block in lowered.blocks.values() {
            for op in &block.ops {
                if let LoweredOp::Push(x) = op {
                    pushed[block.func.index()].insert(*x);
                }
            }
        }
        let reached_pushes = |callee: usize| -> Vec<GlobalVar> {
            let reached = pushed.iter().zip(&calls[callee]).filter(|(_, r)| **r);
            let vars: BTreeSet<GlobalVar> = reached.flat_map(|(p, _)| p).copied().collect();
            vars.into_iter().collect()
        };
        let saved = lowered
            .blocks
            .values()
            .map(|block| match block.term {
                LoweredTerm::PushJump {
                    callee,
                    recover: Some(_),
                    ..
                } => reached_pushes(callee.index()),
                _ => Vec::new(),
            })
            .collect();
        CatchPlan { saved }
    }

    pub(super) fn saved_heights(
        &self,
        pc: PcBlock,
        stacks: &[Option<ValueStack>],
        r: u32,
    ) -> Vec<usize> {
        self.saved[pc.index()]
            .iter()
            .map(|x| {
                stacks[x.index()]
                    .as_ref()
                    .map_or(0, |s| s.height(r as usize))
            })
            .collect()
    }
}

/// After `error`, sends member `r` to its innermost catching call's
/// recovery block, its return stack and variable stacks cut back to where
/// they were at the call; gives the error back if it is not catchable or
/// the member is in no catching call.
pub(super) fn unwind(
    r: u32,
    error: MemberError,
    state: &mut MemberStacks<'_>,
) -> Result<PcBlock, MemberError> {
    if !error.kind.is_catchable() {
        return Err(error);
    }
    let m = r as usize;
    let Some(frame) = state.catches[m].pop() else {
        return Err(error);
    };
    state.return_stacks[m].truncate(frame.return_depth);
    for (x, height) in state.plan.saved[frame.call.index()]
        .iter()
        .zip(&frame.heights)
    {
        if let Some(stack) = state.stacks[x.index()].as_mut() {
            stack.truncate(m, *height);
        }
    }
    Ok(frame.recover)
}

/// The per-member stacks a fault unwinds.
pub(super) struct MemberStacks<'a> {
    pub(super) plan: &'a CatchPlan,
    pub(super) catches: &'a mut [Vec<CatchFrame>],
    pub(super) return_stacks: &'a mut [Vec<PcBlock>],
    pub(super) stacks: &'a mut [Option<ValueStack>],
}

/// The hooks of program-counter's steps: a fault unwinds its lane to its
/// innermost catching call's recovery block.
pub(super) struct Unwinding<'s> {
    pub(super) stacks: MemberStacks<'s>,
    pub(super) waiting: &'s mut Waiting<PcBlock>,
}

impl StepHooks for Unwinding<'_> {
    fn unwind(&mut self, r: u32, error: MemberError) -> Result<(), MemberError> {
        let recover = unwind(r, error, &mut self.stacks)?;
        self.waiting.push(recover, &[r]);
        Ok(())
    }
}
