//! A function read as one line of operations with check arms beside it.
//!
//! A *check arm* is a block marked as one ([`crate::BlockData::check_arm`])
//! that a branch enters on one value of its condition and that jumps to
//! the branch's other target: it only tests and faults (no draw, no call),
//! and no variable it writes is read or written anywhere else. The
//! library's distributions put their argument checks in such arms, run
//! only when the density they compute is not finite or zero, and mark them
//! with their promise: the arm is entered whenever one of its checks would
//! fail. Removing the arms changes no value a function computes, only
//! whether a member faults; so passes that want one block (the splicing of
//! calls for a gradient, the fused derivation) take the line without its
//! arms, work on it, and put the arms back where their faults still come
//! in the same order ([`Line::arms_movable_to_end`]). By the promise,
//! entering the arms always gives the same faults too: a derivation that
//! does not fuse takes them as part of the line
//! ([`Function::with_check_arms_always_entered`]), where a branch would
//! cost it a taped choice.

use std::collections::HashSet;

use crate::{Block, BlockData, EntityRef, Function, Loc, Op, Terminator, Var};

/// A function's operations from its entry to its return, as one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// The operations of the blocks along the line, in order.
    pub ops: Vec<Op>,
    /// The check arms, in the order the line meets them.
    pub arms: Vec<CheckArm>,
    /// The variables the line returns.
    pub results: Vec<Var>,
}

/// A check arm of a [`Line`].
#[derive(Clone, Debug, PartialEq)]
pub struct CheckArm {
    /// The arm is entered after the line's first `at` operations.
    pub at: usize,
    /// The branch's condition, and the value of it that enters the arm.
    pub cond: Var,
    pub enters_on: bool,
    /// The arm's operations.
    pub ops: Vec<Op>,
    /// Where the arm's block opens.
    pub loc: Loc,
}

impl CheckArm {
    /// The variables the arm reads that it does not write itself.
    fn reads(&self) -> Vec<Var> {
        let written: HashSet<Var> = self.ops.iter().flat_map(|op| op.defs()).copied().collect();
        std::iter::once(self.cond)
            .chain(self.ops.iter().flat_map(|op| op.uses()).copied())
            .filter(|v| !written.contains(v))
            .collect()
    }

    /// The arm with its variables renamed by `rename`.
    pub fn renamed(&self, at: usize, mut rename: impl FnMut(Var) -> Var) -> CheckArm {
        CheckArm {
            at,
            cond: rename(self.cond),
            enters_on: self.enters_on,
            ops: self
                .ops
                .iter()
                .map(|op| match op {
                    Op::Prim {
                        dst,
                        prim,
                        args,
                        loc,
                    } => Op::Prim {
                        dst: dst.map(&mut rename),
                        prim: prim.clone(),
                        args: args.iter().map(|a| rename(*a)).collect(),
                        loc: *loc,
                    },
                    other => other.clone(),
                })
                .collect(),
            loc: self.loc,
        }
    }
}

impl Function {
    /// The function as one line with check arms: its blocks from the entry
    /// along jumps, and along branches of which one target is a check arm,
    /// to a return, each block met once; `None` if it has any other branch,
    /// a block met twice, or a block the line does not reach.
    pub fn line(&self) -> Option<Line> {
        let mut seen = vec![false; self.blocks.len()];
        let mut line = Line {
            ops: Vec::new(),
            arms: Vec::new(),
            results: Vec::new(),
        };
        let mut b = Function::ENTRY;
        loop {
            if std::mem::replace(&mut seen[b.index()], true) {
                return None;
            }
            let data = &self.blocks[b];
            line.ops.extend(data.ops.iter().cloned());
            match &data.term {
                Terminator::Jump(next) => b = *next,
                Terminator::Return(vs) => {
                    line.results = vs.clone();
                    break;
                }
                Terminator::Branch {
                    cond,
                    then_block,
                    else_block,
                } => {
                    let (arm, next, enters_on) = if self.is_check_arm(*else_block, *then_block) {
                        (*else_block, *then_block, false)
                    } else if self.is_check_arm(*then_block, *else_block) {
                        (*then_block, *else_block, true)
                    } else {
                        return None;
                    };
                    if std::mem::replace(&mut seen[arm.index()], true) {
                        return None;
                    }
                    line.arms.push(CheckArm {
                        at: line.ops.len(),
                        cond: *cond,
                        enters_on,
                        ops: self.blocks[arm].ops.clone(),
                        loc: self.blocks[arm].loc,
                    });
                    b = next;
                }
            }
        }
        seen.iter().all(|s| *s).then_some(line)
    }

    /// The function with its check arms always entered: the same values
    /// and, by the arms' promise (see the module doc), the same faults. A
    /// line becomes one block, each arm's operations where it was entered;
    /// elsewhere a branch to an arm becomes a jump to it.
    pub fn with_check_arms_always_entered(&self) -> Function {
        let mut f = self.clone();
        if let Some(line) = self.line() {
            if !line.arms.is_empty() {
                f.set_line(line.with_arms_inline());
            }
            return f;
        }
        for (b, data) in self.blocks.iter() {
            if let Terminator::Branch {
                then_block,
                else_block,
                ..
            } = &data.term
            {
                let arm = if self.is_check_arm(*else_block, *then_block) {
                    *else_block
                } else if self.is_check_arm(*then_block, *else_block) {
                    *then_block
                } else {
                    continue;
                };
                f.blocks[b].term = Terminator::Jump(arm);
            }
        }
        f
    }

    /// Whether block `arm` is a check arm that jumps to `join`.
    fn is_check_arm(&self, arm: Block, join: Block) -> bool {
        let data = &self.blocks[arm];
        if !data.check_arm || data.term != Terminator::Jump(join) {
            return false;
        }
        let only_checks = data.ops.iter().all(|op| match op {
            Op::Prim { prim, .. } => !prim.is_random() && !prim.is_host() && !prim.is_tape(),
            _ => false,
        });
        let written: HashSet<Var> = data.ops.iter().flat_map(|op| op.defs()).copied().collect();
        let elsewhere = self
            .blocks
            .iter()
            .filter(|(b, _)| *b != arm)
            .any(|(_, other)| {
                other
                    .ops
                    .iter()
                    .flat_map(|op| op.uses().iter().chain(op.defs()))
                    .chain(other.term.uses())
                    .any(|v| written.contains(v))
            });
        only_checks && !elsewhere && !self.params.iter().any(|p| written.contains(p))
    }

    /// Replaces the function's blocks with `line`: a block of its
    /// operations up to each arm, ending in a branch to the arm and to the
    /// next such block (the arm's block and that next one count no step,
    /// so the function takes the steps it takes without its arms), the
    /// last returning the line's results.
    pub fn set_line(&mut self, line: Line) {
        let loc = self.blocks[Function::ENTRY].loc;
        let entry_uncounted = self.blocks[Function::ENTRY].uncounted;
        let mut blocks = crate::EntityVec::new();
        let mut current = blocks.push(BlockData::new(
            Vec::new(),
            Terminator::Return(Vec::new()),
            loc,
        ));
        blocks[current].uncounted = entry_uncounted;
        let mut ops = line.ops.into_iter();
        let mut taken = 0;
        for arm in line.arms {
            blocks[current]
                .ops
                .extend(ops.by_ref().take(arm.at - taken));
            taken = arm.at;
            let mut arm_block = BlockData::new(arm.ops, Terminator::Return(Vec::new()), arm.loc);
            arm_block.uncounted = true;
            arm_block.check_arm = true;
            let arm_id = blocks.push(arm_block);
            let mut next = BlockData::new(Vec::new(), Terminator::Return(Vec::new()), loc);
            next.uncounted = true;
            let next_id = blocks.push(next);
            blocks[arm_id].term = Terminator::Jump(next_id);
            let (then_block, else_block) = if arm.enters_on {
                (arm_id, next_id)
            } else {
                (next_id, arm_id)
            };
            blocks[current].term = Terminator::Branch {
                cond: arm.cond,
                then_block,
                else_block,
            };
            current = next_id;
        }
        blocks[current].ops.extend(ops);
        blocks[current].term = Terminator::Return(line.results);
        self.blocks = blocks;
    }
}

impl Line {
    /// The line with each arm's operations in it where the arm was
    /// entered, and no arms.
    pub fn with_arms_inline(self) -> Line {
        let mut ops = Vec::with_capacity(
            self.ops.len() + self.arms.iter().map(|a| a.ops.len()).sum::<usize>(),
        );
        let mut taken = 0;
        let mut rest = self.ops.into_iter();
        for arm in self.arms {
            ops.extend(rest.by_ref().take(arm.at - taken));
            taken = arm.at;
            ops.extend(arm.ops);
        }
        ops.extend(rest);
        Line {
            ops,
            arms: Vec::new(),
            results: self.results,
        }
    }

    /// Whether every arm may run at the end of the line instead of where it
    /// is, with the same faults in the same order: no operation after an
    /// arm has an effect or may fault, and none writes a variable the
    /// arm reads. `faults` says, per operation of the line, whether it may
    /// fault.
    pub fn arms_movable_to_end(&self, faults: &[bool]) -> bool {
        let Some(first) = self.arms.first() else {
            return true;
        };
        let effect = |op: &Op| match op {
            Op::Prim { prim, .. } => prim.has_effect(),
            _ => true,
        };
        if (first.at..self.ops.len()).any(|k| effect(&self.ops[k]) || faults[k]) {
            return false;
        }
        self.arms.iter().all(|arm| {
            let reads = arm.reads();
            self.ops[arm.at..]
                .iter()
                .all(|op| !op.defs().iter().any(|d| reads.contains(d)))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_program;
    use crate::print::program_to_string;
    use crate::{EntityRef, FuncId, Function};

    /// A density `v1 = x * x` whose check (`x > 0`) runs in an arm
    /// entered when `v1` is not finite, then `v4 = v1 + v1` after it;
    /// `tail` replaces the block after the arm.
    fn program(tail: &str) -> String {
        format!(
            "fn f0 g(v0 x: f64) -> (f64)  @1:1
  vars: v0 x: f64, v1: f64, v2: bool, v3: f64, v4: f64, v5: bool
b0:  @1:1
  v1 = mul v0, v0  @1:2
  v2 = is_finite v1  @1:3
  branch v2, b2, b1
b1: uncounted check_arm  @1:1
  v3 = const 0.0_f64  @1:4
  v5 = gt v0, v3  @1:5
  check \"`x` must be positive\" v5  @1:6
  jump b2
b2: uncounted  @1:1
{tail}"
        )
    }

    fn function(text: &str) -> Function {
        let program = parse_program(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        program.functions[FuncId::new(0)].clone()
    }

    const USUAL_TAIL: &str = "  v4 = add v1, v1  @1:7\n  return v4\n";

    #[test]
    fn a_check_arm_is_read_beside_the_line_and_put_back_where_it_was() {
        let text = program(USUAL_TAIL);
        let f = function(&text);
        let line = f.line().expect("one line with an arm");
        assert_eq!(line.ops.len(), 3, "mul, is_finite, add");
        assert_eq!(line.arms.len(), 1);
        let arm = &line.arms[0];
        assert_eq!((arm.at, arm.enters_on, arm.ops.len()), (2, false, 3));
        let mut again = f.clone();
        again.set_line(line);
        assert_eq!(again, f);
        let printed = program_to_string(&parse_program(&text).unwrap());
        assert_eq!(printed, text);
    }

    #[test]
    fn a_block_whose_variables_are_read_after_it_is_no_check_arm() {
        let f = function(&program("  v4 = add v3, v1  @1:7\n  return v4\n"));
        assert_eq!(f.line(), None);
    }

    #[test]
    fn an_unmarked_block_is_no_check_arm() {
        let text = program(USUAL_TAIL).replace(" check_arm", "");
        let f = function(&text);
        assert_eq!(f.line(), None);
        assert_eq!(f.with_check_arms_always_entered(), f);
    }

    #[test]
    fn a_line_whose_arms_are_always_entered_is_one_block() {
        let f = function(&program(USUAL_TAIL));
        let always = f.with_check_arms_always_entered();
        assert_eq!(always.blocks.len(), 1);
        let entry = &always.blocks[crate::Block::new(0)];
        assert!(!entry.uncounted);
        assert_eq!(entry.ops.len(), 6, "mul, is_finite, the arm's three, add");
        assert_eq!(entry.ops[2..5], f.line().unwrap().arms[0].ops[..]);
    }

    #[test]
    fn an_arm_off_a_line_always_entered_is_jumped_to() {
        // A branch between two returns after the arm: no line.
        let f = function(&program(
            "  v4 = add v1, v1  @1:7\n  branch v2, b3, b4\nb3:  @1:1\n  return v4\nb4:  @1:1\n  return v1\n",
        ));
        assert_eq!(f.line(), None);
        let always = f.with_check_arms_always_entered();
        let entry = &always.blocks[crate::Block::new(0)];
        assert_eq!(entry.term, crate::Terminator::Jump(crate::Block::new(1)));
    }

    #[test]
    fn a_branch_between_two_returns_is_no_line() {
        let text = "fn f0 g(v0 x: f64) -> (f64)  @1:1
  vars: v0 x: f64, v1: bool
b0:  @1:1
  v1 = is_finite v0  @1:2
  branch v1, b1, b2
b1:  @1:1
  return v0
b2:  @1:1
  return v0
";
        assert_eq!(function(text).line(), None);
    }

    #[test]
    fn arms_stay_where_they_are_when_a_later_operation_may_fault() {
        let line = function(&program(USUAL_TAIL)).line().unwrap();
        assert!(line.arms_movable_to_end(&[false, false, false]));
        assert!(!line.arms_movable_to_end(&[false, false, true]));
        let rewrites = function(&program("  v0 = add v1, v1  @1:7\n  return v0\n"))
            .line()
            .unwrap();
        assert!(
            !rewrites.arms_movable_to_end(&[false, false, false]),
            "v0 is read by the arm"
        );
    }
}
