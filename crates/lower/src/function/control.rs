//! Lowering of structured control flow: `if`, `while`, `loop`, `for`,
//! `break`, `continue`, `return` and `assert` become blocks and terminators
//! of the function being lowered.

use autobatch_frontend::hir::{self, Expr, LocalId};
use autobatch_ir::{BinaryOp, Block, CompareOp, EntityRef, Op, Prim, ScalarType, Terminator, Var};
use autobatch_types::Loc;

use super::{contains_assign, one_of, Flow, FunctionLowerer, LoopTargets, LowerResult};
use crate::internal;

impl FunctionLowerer<'_> {
    /// `while cond { body }`: a header block that tests `cond`, the body,
    /// and an exit block.
    pub(super) fn lower_while(&mut self, cond: &Expr, body: &hir::Block, loc: Loc) -> Flow {
        let header = self.new_block(loc);
        self.jump(header);
        self.switch_to(header);
        let Some(c) = self.lower_single(cond, loc)? else {
            return Ok(None);
        };
        let body_block = self.new_block(body.loc);
        let exit = self.new_block(loc);
        self.terminate(Terminator::Branch {
            cond: c,
            then_block: body_block,
            else_block: exit,
        });
        self.loops.push(LoopTargets {
            continue_to: header,
            break_to: Some(exit),
            result: Vec::new(),
            loc,
        });
        self.switch_to(body_block);
        let flow = self.lower_block(body, None);
        self.loops.pop();
        if flow?.is_some() {
            self.jump(header);
        }
        self.switch_to(exit);
        Ok(Some(Vec::new()))
    }

    /// `loop { body }` (the expression `e`): its value is what a `break`
    /// gives; without a `break`, control does not continue past it.
    pub(super) fn lower_loop(&mut self, e: &Expr, body: &hir::Block, dst: Option<&[Var]>) -> Flow {
        let loc = e.loc;
        let result = if e.ty == hir::Ty::Never {
            Vec::new()
        } else {
            self.ty_vars(&e.ty, dst)?
        };
        let header = self.new_block(loc);
        self.jump(header);
        self.switch_to(header);
        self.loops.push(LoopTargets {
            continue_to: header,
            break_to: None,
            result: result.clone(),
            loc,
        });
        let flow = self.lower_block(body, None);
        let targets = self.loops.pop();
        if flow?.is_some() {
            self.jump(header);
        }
        match targets.and_then(|t| t.break_to) {
            Some(exit) => {
                self.switch_to(exit);
                Ok(Some(result))
            }
            None => Ok(None),
        }
    }

    /// `break` or `break value`: the value into the loop's result, then a
    /// jump to its exit (made by the first `break` of a `loop`).
    pub(super) fn lower_break(&mut self, value: Option<&Expr>, loc: Loc) -> Flow {
        let Some(targets) = self.loops.last() else {
            return Err(internal("`break` outside of a loop", loc));
        };
        let result = targets.result.clone();
        if let Some(v) = value {
            let Some(vars) = self.lower_expr(v, Some(&result))? else {
                return Ok(None);
            };
            if !vars.is_empty() || !result.is_empty() {
                self.copy_into(&vars, &result, v.loc)?;
            }
        }
        let exit = match self.loops.last().and_then(|t| t.break_to) {
            Some(b) => b,
            None => {
                let loop_loc = self.loops.last().map(|t| t.loc).unwrap_or(loc);
                let b = self.new_block(loop_loc);
                if let Some(t) = self.loops.last_mut() {
                    t.break_to = Some(b);
                }
                b
            }
        };
        self.jump(exit);
        Ok(None)
    }

    pub(super) fn lower_continue(&mut self, loc: Loc) -> Flow {
        let Some(targets) = self.loops.last() else {
            return Err(internal("`continue` outside of a loop", loc));
        };
        let target = targets.continue_to;
        self.jump(target);
        Ok(None)
    }

    pub(super) fn lower_return(&mut self, value: Option<&Expr>, loc: Loc) -> Flow {
        let vars = match value {
            Some(v) => match self.lower_expr(v, None)? {
                Some(vars) => vars,
                None => return Ok(None),
            },
            None => Vec::new(),
        };
        if vars.len() != self.func.results.len() {
            return Err(internal("`return` with the wrong number of values", loc));
        }
        self.terminate(Terminator::Return(vars));
        Ok(None)
    }

    pub(super) fn lower_assert(&mut self, cond: &Expr, message: &str, loc: Loc) -> Flow {
        let Some(c) = self.lower_single(cond, loc)? else {
            return Ok(None);
        };
        self.push_op(Op::Prim {
            dst: None,
            prim: Prim::Assert {
                message: message.to_owned(),
            },
            args: vec![c],
            loc,
        })?;
        Ok(Some(Vec::new()))
    }

    pub(super) fn lower_if(
        &mut self,
        e: &Expr,
        cond: &Expr,
        then_block: &hir::Block,
        else_branch: Option<&Expr>,
        dst: Option<&[Var]>,
    ) -> Flow {
        let Some(c) = self.lower_expr(cond, None)? else {
            return Ok(None);
        };
        let c = self.single(&c, e.loc)?;
        let result = if e.ty == hir::Ty::Never {
            Vec::new()
        } else {
            self.ty_vars(&e.ty, dst)?
        };
        let then_start = self.new_block(then_block.loc);
        let Some(else_branch) = else_branch else {
            // Without `else`, a false condition goes straight to the join.
            let join = self.new_block(e.loc);
            self.terminate(Terminator::Branch {
                cond: c,
                then_block: then_start,
                else_block: join,
            });
            self.switch_to(then_start);
            if self.lower_block(then_block, None)?.is_some() {
                self.jump(join);
            }
            self.switch_to(join);
            return Ok(Some(Vec::new()));
        };
        let else_branch = Some(else_branch);
        let else_start = self.new_block(else_branch.map(|b| b.loc).unwrap_or(e.loc));
        self.terminate(Terminator::Branch {
            cond: c,
            then_block: then_start,
            else_block: else_start,
        });
        let mut join: Option<Block> = None;
        self.switch_to(then_start);
        if let Some(vars) = self.lower_block(then_block, Some(&result))? {
            self.copy_into(
                &vars,
                &result,
                then_block
                    .tail
                    .as_ref()
                    .map(|t| t.loc)
                    .unwrap_or(then_block.loc),
            )?;
            let j = *join.get_or_insert_with(|| self.new_block(e.loc));
            self.jump(j);
        }
        self.switch_to(else_start);
        let else_flow = match else_branch {
            Some(b) => self.lower_expr(b, Some(&result))?,
            None => Some(Vec::new()),
        };
        if let Some(vars) = else_flow {
            self.copy_into(&vars, &result, else_branch.map(|b| b.loc).unwrap_or(e.loc))?;
            let j = match join {
                Some(j) => j,
                None => {
                    let j = self.new_block(e.loc);
                    join = Some(j);
                    j
                }
            };
            self.jump(j);
        }
        match join {
            Some(j) => {
                self.switch_to(j);
                Ok(Some(result))
            }
            None => Ok(None),
        }
    }

    pub(super) fn lower_for(
        &mut self,
        e: &Expr,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        inclusive: bool,
        body: &hir::Block,
    ) -> Flow {
        let loc = e.loc;
        let local_vars = self.local_vars[var.0 as usize].clone();
        let user_var = self.single(&local_vars, loc)?;
        let mutable = self.hir.local(var).mutable;
        // An immutable loop variable is the counter itself; a `mut` one is a
        // copy the body may change without disturbing the iteration.
        let counter = if mutable {
            self.temp(self.var_ty(user_var))
        } else {
            user_var
        };
        // The start may be computed into the counter directly: the end
        // cannot read the counter (it is not in scope yet).
        let Some(s) = self.lower_expr(start, Some(&[counter]))? else {
            return Ok(None);
        };
        let s = self.single(&s, loc)?;
        let s = self.protect(vec![s], contains_assign(end), start.loc)?[0];
        let Some(stop) = self.lower_expr(end, None)? else {
            return Ok(None);
        };
        let stop = self.single(&stop, loc)?;
        // The bounds are evaluated once: a bound held by a variable the body
        // may reassign is copied first.
        let stop = if self.is_local_var[stop.index()] {
            self.prim(Prim::Copy, vec![stop], end.loc, None)?
        } else {
            stop
        };
        if s != counter {
            self.prim(Prim::Copy, vec![s], start.loc, Some(counter))?;
        }
        let elem = self.var_ty(counter).elem;
        let body_block = self.new_block(body.loc);
        let exit = self.new_block(loc);
        let latch = self.new_block(loc);
        if inclusive {
            let c = self.prim(Prim::Compare(CompareOp::Le), vec![counter, stop], loc, None)?;
            self.terminate(Terminator::Branch {
                cond: c,
                then_block: body_block,
                else_block: exit,
            });
        } else {
            let header = self.new_block(loc);
            self.jump(header);
            self.switch_to(header);
            let c = self.prim(Prim::Compare(CompareOp::Lt), vec![counter, stop], loc, None)?;
            self.terminate(Terminator::Branch {
                cond: c,
                then_block: body_block,
                else_block: exit,
            });
            // The latch increments and goes back to the header.
            self.lower_for_body(
                body,
                body_block,
                latch,
                exit,
                mutable.then_some((counter, user_var)),
                loc,
            )?;
            self.increment(counter, elem, loc)?;
            self.jump(header);
            self.switch_to(exit);
            return Ok(Some(Vec::new()));
        }
        // Inclusive: test for the last value before incrementing, so that
        // `a..=MAX` does not overflow.
        self.lower_for_body(
            body,
            body_block,
            latch,
            exit,
            mutable.then_some((counter, user_var)),
            loc,
        )?;
        let done = self.prim(Prim::Compare(CompareOp::Eq), vec![counter, stop], loc, None)?;
        let increment = self.new_block(loc);
        self.terminate(Terminator::Branch {
            cond: done,
            then_block: exit,
            else_block: increment,
        });
        self.switch_to(increment);
        self.increment(counter, elem, loc)?;
        self.jump(body_block);
        self.switch_to(exit);
        Ok(Some(Vec::new()))
    }

    /// Lowers a `for` body into `body_block`, with `continue` going to
    /// `latch` and `break` to `exit`, and leaves the builder at `latch`.
    /// `copy_counter` is `(counter, user variable)` for a `mut` loop variable.
    fn lower_for_body(
        &mut self,
        body: &hir::Block,
        body_block: Block,
        latch: Block,
        exit: Block,
        copy_counter: Option<(Var, Var)>,
        loc: Loc,
    ) -> LowerResult<()> {
        self.loops.push(LoopTargets {
            continue_to: latch,
            break_to: Some(exit),
            result: Vec::new(),
            loc,
        });
        self.switch_to(body_block);
        if let Some((counter, user_var)) = copy_counter {
            self.prim(Prim::Copy, vec![counter], loc, Some(user_var))?;
        }
        let flow = self.lower_block(body, None);
        self.loops.pop();
        if flow?.is_some() {
            self.jump(latch);
        }
        self.switch_to(latch);
        Ok(())
    }

    /// `counter += 1` in the counter's type.
    fn increment(&mut self, counter: Var, elem: ScalarType, loc: Loc) -> LowerResult<()> {
        let one = self.constant(one_of(elem), loc, None)?;
        self.prim(
            Prim::Binary(BinaryOp::Add),
            vec![counter, one],
            loc,
            Some(counter),
        )?;
        Ok(())
    }
}
