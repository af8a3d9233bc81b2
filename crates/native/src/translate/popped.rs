//! Values popped off the tape and read where they lie on it, not copied
//! into the frame.
//!
//! A pop leaves the popped bytes in the tape's memory (it only shortens the
//! tape), and they stay there, unchanged, until something is pushed again:
//! a push may write over them or move the tape's memory when it grows.
//! So in a function during whose activations nothing is pushed on the
//! member's tape (a [`quiet`] function, such as a derived function's
//! backward part), an array that only pops define and nothing else writes
//! is read in place: the pop gives the address of its bytes on the tape
//! (`crate::arrays::tape_pop_in_place`), or copies them into the variable's
//! own place in the frame when that address is not aligned for its
//! elements. The bytes read are the same either way.

use autobatch_ir::{EntityRef, Function, Op, Prim, Program};

/// Per function of `program`: whether nothing is pushed on the member's
/// tape while one of its activations runs (it pushes nothing, keeps no
/// fork's tapes, and every function it calls or forks is quiet too). A
/// recursion is quiet unless something on its way pushes.
pub(crate) fn quiet(program: &Program) -> Vec<bool> {
    let mut quiet = vec![true; program.functions.len()];
    loop {
        let mut changed = false;
        for (id, function) in program.functions.iter() {
            if quiet[id.index()] && !quiet_alone(function, &quiet) {
                quiet[id.index()] = false;
                changed = true;
            }
        }
        if !changed {
            return quiet;
        }
    }
}

/// Whether `function` pushes nothing itself and calls or forks only
/// functions `quiet` holds quiet.
fn quiet_alone(function: &Function, quiet: &[bool]) -> bool {
    function
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .all(|op| match op {
            Op::Prim { prim, .. } => *prim != Prim::TapePush,
            Op::Fork { tape, .. } if tape.saves() => false,
            Op::Call { .. } | Op::Fork { .. } => {
                op.callees().iter().all(|callee| quiet[callee.index()])
            }
        })
}

/// Per variable of `function` (quiet when `quiet`): whether it is an array
/// read in place on the tape, one that is no parameter, is defined only by
/// `tape_pop` and by nothing else.
pub(crate) fn popped(function: &Function, quiet: bool) -> Vec<bool> {
    if !quiet {
        return vec![false; function.vars.len()];
    }
    let pops = super::function::arrays_defined_only_by(function, |prim| {
        matches!(prim, Prim::TapePop(_)).then_some(())
    });
    pops.iter().map(Option::is_some).collect()
}
