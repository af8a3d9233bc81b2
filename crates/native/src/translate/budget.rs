//! One step test per loop iteration instead of one per block.
//!
//! The reference takes one step at the entry of every block and stops the
//! member at the first block it enters with none left. Native code tests
//! that at every block ([`Translator::take_step`]); in a tight loop those
//! tests and the jumps around them cost as much as the loop's own work.
//!
//! A *simple loop* is a loop without calls, forks, loops or uncounted
//! blocks inside it, entered only at its header: from the header, every path through the
//! loop's blocks ends within a known number of steps (`steps`, at most
//! one per block and one per merged arm) back at the header or outside
//! the loop. Its blocks are translated twice:
//!
//! - the checked copy, as every block is (a step test per block);
//! - the *fast copy*, which takes its steps without testing them and jumps
//!   back to the header through a *dispatch*: if the member holds at least
//!   `steps` steps, no test of the coming iteration can fail, so it runs
//!   the fast copy; otherwise the checked copy, which stops the member at
//!   the very block where the reference stops it.
//!
//! Every jump to the header, from inside the loop or outside, goes
//! through the dispatch; the fast copy leaves the loop into the checked
//! blocks outside it. The member's steps, results, stops and counts are
//! those of the checked code. In code that polls for interrupts the
//! member holds its steps a slice at a time: the dispatch compares the
//! steps held, and the checked copy takes the next slice (and sees an
//! interrupt) when they run short.

use std::collections::HashMap;

use autobatch_ir::{Block, EntityRef, Function, Op};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block as NativeBlock, InstBuilder};

use super::function::Translator;
use super::select::Merge;

/// A simple loop of a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LoopShape {
    pub header: Block,
    /// The loop's blocks (the header first), arms of merged branches
    /// apart (they are translated inside their branch's block).
    pub blocks: Vec<Block>,
    /// The most steps one pass from the header takes before it is back at
    /// the header or outside the loop.
    pub steps: u64,
}

/// A simple loop being translated: its shape, its dispatch, and the fast
/// copy of each of its blocks.
pub(super) struct FastLoop {
    pub shape: LoopShape,
    pub dispatch: NativeBlock,
    pub copies: HashMap<Block, NativeBlock>,
}

/// The successors of `block` as translated: a merged branch goes on to its
/// join.
fn successors(function: &Function, merges: &[Option<Merge>], block: Block) -> Vec<Block> {
    match &merges[block.index()] {
        Some(merge) => vec![merge.join],
        None => function.blocks[block].term.successors(),
    }
}

/// The simple loops of `function` (see the module's doc), given the
/// branches merged into selects and the blocks that are their arms.
pub(super) fn simple_loops(
    function: &Function,
    merges: &[Option<Merge>],
    absorbed: &[bool],
) -> Vec<LoopShape> {
    let n = function.blocks.len();
    let blocks: Vec<Block> = function
        .blocks
        .keys()
        .filter(|b| !absorbed[b.index()])
        .collect();
    let succ: Vec<Vec<Block>> = (0..n)
        .map(|i| successors(function, merges, Block::new(i)))
        .collect();
    let mut pred: Vec<Vec<Block>> = vec![Vec::new(); n];
    for &b in &blocks {
        for s in &succ[b.index()] {
            pred[s.index()].push(b);
        }
    }
    // The blocks reachable from the entry without passing through `avoid`.
    let reach_avoiding = |avoid: Block| -> Vec<bool> {
        let mut seen = vec![false; n];
        let mut stack = vec![Function::ENTRY];
        while let Some(b) = stack.pop() {
            if b != avoid && !std::mem::replace(&mut seen[b.index()], true) {
                stack.extend(&succ[b.index()]);
            }
        }
        seen
    };
    let mut taken = vec![false; n];
    let mut loops = Vec::new();
    for &header in &blocks {
        // Only a block that a later block jumps back to is taken for a
        // header (as lowering orders a loop's blocks): a loop missed only
        // keeps its tests, and each header costs a walk of the function.
        if !pred[header.index()]
            .iter()
            .any(|p| p.index() >= header.index())
        {
            continue;
        }
        // The natural loop of the header's back edges: those from blocks
        // it dominates (which the entry reaches only through it).
        let around = reach_avoiding(header);
        let sources: Vec<Block> = pred[header.index()]
            .iter()
            .copied()
            .filter(|p| !around[p.index()])
            .collect();
        if sources.is_empty() {
            continue;
        }
        let mut members = vec![header];
        let mut inside = vec![false; n];
        inside[header.index()] = true;
        let mut stack = sources;
        while let Some(b) = stack.pop() {
            if !std::mem::replace(&mut inside[b.index()], true) {
                members.push(b);
                stack.extend(&pred[b.index()]);
            }
        }
        // Entered only at the header: no edge from outside (nor the
        // function's entry) reaches another of its blocks.
        let entered_elsewhere = members[1..]
            .iter()
            .any(|b| *b == Function::ENTRY || pred[b.index()].iter().any(|p| !inside[p.index()]));
        let calls = members.iter().any(|b| {
            function.blocks[*b]
                .ops
                .iter()
                .any(|op| matches!(op, Op::Call { .. } | Op::Fork { .. }))
        });
        // A pass takes one step per block it enters: none may be uncounted
        // (nor the function).
        let uncounted = function.uncounted || members.iter().any(|b| function.blocks[*b].uncounted);
        if entered_elsewhere || calls || uncounted || members.iter().any(|b| taken[b.index()]) {
            continue;
        }
        let Some(steps) = longest_pass(header, &inside, &succ, merges) else {
            continue; // a loop inside
        };
        for b in &members {
            taken[b.index()] = true;
        }
        loops.push(LoopShape {
            header,
            blocks: members,
            steps,
        });
    }
    loops
}

/// The most steps a pass from `header` through the blocks `inside` takes (a block's
/// entry one, a merged branch's arm taken one more), or `None` if the
/// blocks have a cycle that does not pass through the header. An
/// iterative depth-first walk: a loop's body may have thousands of blocks.
fn longest_pass(
    header: Block,
    inside: &[bool],
    succ: &[Vec<Block>],
    merges: &[Option<Merge>],
) -> Option<u64> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done(u64),
    }
    let inner = |b: Block| {
        succ[b.index()]
            .iter()
            .copied()
            .filter(move |s| *s != header && inside[s.index()])
    };
    let mut marks: Vec<Option<Mark>> = vec![None; inside.len()];
    // Each entry: a block and whether its successors are done.
    let mut stack = vec![(header, false)];
    while let Some((b, expanded)) = stack.pop() {
        if expanded {
            let arm = merges[b.index()]
                .as_ref()
                .is_some_and(|m| m.then_arm.is_some() || m.else_arm.is_some());
            let after = inner(b)
                .map(|s| match marks[s.index()] {
                    Some(Mark::Done(steps)) => steps,
                    _ => 0,
                })
                .max()
                .unwrap_or(0);
            marks[b.index()] = Some(Mark::Done(1 + u64::from(arm) + after));
            continue;
        }
        match marks[b.index()] {
            Some(Mark::Done(_)) => continue,
            Some(Mark::Open) => return None, // on the current path: a cycle
            None => {}
        }
        marks[b.index()] = Some(Mark::Open);
        stack.push((b, true));
        for s in inner(b) {
            match marks[s.index()] {
                Some(Mark::Done(_)) => {}
                Some(Mark::Open) => return None,
                None => stack.push((s, false)),
            }
        }
    }
    match marks[header.index()] {
        Some(Mark::Done(steps)) => Some(steps),
        _ => None,
    }
}

impl Translator<'_, '_, '_> {
    /// Makes the dispatch and the fast copies' blocks of the function's
    /// simple loops (translated later, [`Self::fast_copies`]).
    pub(super) fn plan_fast_loops(&mut self) {
        let shapes = simple_loops(self.function, &self.merges, &self.absorbed);
        self.fast = shapes
            .into_iter()
            .map(|shape| FastLoop {
                dispatch: self.b.create_block(),
                copies: shape
                    .blocks
                    .iter()
                    .map(|b| (*b, self.b.create_block()))
                    .collect(),
                shape,
            })
            .collect();
        self.unit.fast_loops += self.fast.len();
    }

    /// The native block a jump to `block` goes to: a simple loop's header
    /// through its dispatch; inside a fast copy, the copy of a block of the
    /// same loop; else the block.
    pub(super) fn target(&self, block: Block) -> NativeBlock {
        if let Some(fast) = self.fast.iter().find(|f| f.shape.header == block) {
            return fast.dispatch;
        }
        self.in_fast
            .and_then(|l| self.fast[l].copies.get(&block).copied())
            .unwrap_or(self.blocks[block.index()])
    }

    /// Whether the code being translated is a fast copy whose loop holds
    /// `block`.
    pub(super) fn stays_in_fast_loop(&self, block: Block) -> bool {
        self.in_fast
            .is_some_and(|l| self.fast[l].copies.contains_key(&block))
    }

    /// Translates each simple loop's fast copy and its dispatch.
    pub(super) fn fast_copies(&mut self) -> Result<(), String> {
        for l in 0..self.fast.len() {
            self.in_fast = Some(l);
            for block in self.fast[l].shape.blocks.clone() {
                let native = self.fast[l].copies[&block];
                self.block_into(native, block, &self.function.blocks[block])?;
            }
            self.in_fast = None;
            self.dispatch(l);
        }
        Ok(())
    }

    /// Loop `l`'s dispatch: the fast copy of its header if the member
    /// holds steps for a whole pass, else the checked header.
    fn dispatch(&mut self, l: usize) {
        let fast = &self.fast[l];
        let (dispatch, steps) = (fast.dispatch, fast.shape.steps);
        let (checked, quick) = (
            self.blocks[fast.shape.header.index()],
            fast.copies[&fast.shape.header],
        );
        self.b.switch_to_block(dispatch);
        let left = self.b.use_var(self.steps);
        let short = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, left, steps as i64);
        // The fast copy is the branch's fall-through.
        self.b.ins().brif(short, checked, &[], quick, &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(source: &str, name: &str) -> Vec<LoopShape> {
        let program = autobatch_lower::compile(source).expect("compiles");
        let id = program.function_by_name(name).expect("the function");
        let function = &program.functions[id];
        let merges = super::super::select::merges(function);
        let mut absorbed = vec![false; function.blocks.len()];
        for m in merges.iter().flatten() {
            for arm in [m.then_arm, m.else_arm].into_iter().flatten() {
                absorbed[arm.index()] = true;
            }
        }
        simple_loops(function, &merges, &absorbed)
    }

    #[test]
    fn a_while_loop_with_a_merged_branch_is_simple() {
        let found = shapes(
            "fn c(n: i64) -> i64 { let mut x = n; let mut s = 0; \
             while x != 1 { if x % 2 == 0 { x = x / 2; } else { x = 3 * x + 1; } s += 1; } s }",
            "c",
        );
        assert_eq!(found.len(), 1);
        // The header, the body's branch and its arm, the join.
        assert_eq!(found[0].steps, 4);
    }

    #[test]
    fn only_the_inner_of_two_nested_loops_is_simple() {
        let found = shapes(
            "fn n(n: i64) -> i64 { let mut s = 0; for i in 0..n { for j in 0..i { s += (i * j) % 7; } } s }",
            "n",
        );
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn a_loop_of_thousands_of_blocks_is_walked_without_recursion() {
        let ifs = "if x % 3 == 0 { x = x + xs[1]; } ".repeat(5000);
        let source = format!(
            "fn long(n: i64) -> i64 {{ let xs = [1, 2]; let mut x = n; \
             for i in 0..n {{ {ifs} x = x + i; }} x }}"
        );
        let found = shapes(&source, "long");
        assert_eq!(found.len(), 1);
        // Each `if` a branch block and its arm, then the join.
        assert!(found[0].steps > 10_000, "{}", found[0].steps);
    }

    #[test]
    fn a_loop_with_a_call_is_not_simple() {
        let found = shapes(
            "fn g(x: i64) -> i64 { x + 1 } \
             fn f(n: i64) -> i64 { let mut s = 0; for i in 0..n { s = g(s); } s }",
            "f",
        );
        assert!(found.is_empty());
    }
}
