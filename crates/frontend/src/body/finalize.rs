//! Finalization: once a body is checked, every inferred element type is
//! fixed (defaulting to `i64` / `f64`) and every integer literal is checked
//! against its final type.

use autobatch_types::{Loc, ScalarType};

use crate::hir::{self, Expr, ExprKind, Literal, Ty};
use crate::items::{error, CheckResult, MapNote};

use super::FunctionChecker;

impl FunctionChecker<'_, '_> {
    pub(super) fn finalize_block(&mut self, block: &mut hir::Block) -> CheckResult<()> {
        for stmt in &mut block.stmts {
            match stmt {
                hir::Stmt::Let { init, .. } => self.finalize_expr(init)?,
                hir::Stmt::Expr(e) => self.finalize_expr(e)?,
            }
        }
        if let Some(t) = &mut block.tail {
            self.finalize_expr(t)?;
        }
        Ok(())
    }

    fn finalize_expr(&mut self, e: &mut Expr) -> CheckResult<()> {
        self.resolve_ty(&mut e.ty);
        match &mut e.kind {
            ExprKind::Literal(Literal::Int(v)) => check_int_range(*v, &e.ty, e.loc)?,
            ExprKind::Literal(_)
            | ExprKind::Local(_)
            | ExprKind::Static(_)
            | ExprKind::Dim(_)
            | ExprKind::Continue => {}
            ExprKind::Len { array, .. } => self.finalize_expr(array)?,
            ExprKind::Unary { operand, .. } => self.finalize_expr(operand)?,
            ExprKind::Cast { operand, .. } => self.finalize_expr(operand)?,
            ExprKind::Binary { lhs, rhs, .. }
            | ExprKind::Compare { lhs, rhs, .. }
            | ExprKind::And { lhs, rhs }
            | ExprKind::Or { lhs, rhs } => self.finalize_operands(lhs, rhs)?,
            ExprKind::Call { args, .. }
            | ExprKind::Builtin { args, .. }
            | ExprKind::Library { args, .. }
            | ExprKind::HostCall { args, .. }
            | ExprKind::Map { args, .. }
            | ExprKind::Join { calls: args }
            | ExprKind::Tuple(args)
            | ExprKind::Grad { args, .. }
            | ExprKind::Array(args) => {
                for a in args {
                    self.finalize_expr(a)?;
                }
            }
            ExprKind::Field { base, .. } => self.finalize_expr(base)?,
            ExprKind::Index { base, index }
            | ExprKind::Slice {
                base, start: index, ..
            } => {
                self.finalize_expr(base)?;
                self.finalize_expr(index)?;
            }
            ExprKind::Repeat { element, .. } => self.finalize_expr(element)?,
            ExprKind::Block(b) => self.finalize_block(b)?,
            ExprKind::If {
                cond,
                then_block,
                else_branch,
            } => {
                self.finalize_expr(cond)?;
                self.finalize_block(then_block)?;
                if let Some(e) = else_branch {
                    self.finalize_expr(e)?;
                }
            }
            ExprKind::While { cond, body } => {
                self.finalize_expr(cond)?;
                self.finalize_block(body)?;
            }
            ExprKind::Loop { body } => self.finalize_block(body)?,
            ExprKind::For {
                start, end, body, ..
            } => {
                self.finalize_expr(start)?;
                self.finalize_expr(end)?;
                self.finalize_block(body)?;
            }
            ExprKind::Break { value } | ExprKind::Return { value } => {
                if let Some(v) = value {
                    self.finalize_expr(v)?;
                }
            }
            ExprKind::Assign { place, value, .. } => {
                self.finalize_expr(value)?;
                for p in &mut place.projections {
                    if let Some(i) = p.operand_mut() {
                        self.finalize_expr(i)?;
                    }
                }
            }
            ExprKind::Assert { cond, .. } => self.finalize_expr(cond)?,
        }
        Ok(())
    }

    /// The operands of an operator; the left one may be a long chain of
    /// operators (`a + b + ... + z`), walked with a loop.
    fn finalize_operands(&mut self, lhs: &mut Expr, rhs: &mut Expr) -> CheckResult<()> {
        self.finalize_expr(rhs)?;
        let mut cur: &mut Expr = lhs;
        loop {
            let is_operator = matches!(
                cur.kind,
                ExprKind::Binary { .. }
                    | ExprKind::Compare { .. }
                    | ExprKind::And { .. }
                    | ExprKind::Or { .. }
            );
            if !is_operator {
                return self.finalize_expr(cur);
            }
            self.resolve_ty(&mut cur.ty);
            match &mut cur.kind {
                ExprKind::Binary { lhs, rhs, .. }
                | ExprKind::Compare { lhs, rhs, .. }
                | ExprKind::And { lhs, rhs }
                | ExprKind::Or { lhs, rhs } => {
                    self.finalize_expr(rhs)?;
                    cur = lhs;
                }
                _ => return Ok(()),
            }
        }
    }
}

/// An integer literal `v` at `loc` must fit its final type `ty`.
fn check_int_range(v: i128, ty: &Ty, loc: Loc) -> CheckResult<()> {
    let Ty::Tensor(t) = ty else {
        return Ok(());
    };
    let (lo, hi) = match t.elem {
        ScalarType::I32 => (i32::MIN as i128, i32::MAX as i128),
        ScalarType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => (0, u64::MAX as i128),
    };
    if lo <= v && v <= hi {
        return Ok(());
    }
    let message = if v < 0 && t.elem == ScalarType::Usize {
        format!("the literal `{v}` is negative, but its type is `usize`")
    } else {
        format!("the literal `{v}` does not fit in its type `{}`", t.elem)
    };
    let end = Loc::new(loc.line, loc.column + v.to_string().len() as u32);
    Err(
        error(message, loc, end, format!("out of range for `{}`", t.elem))
            .map_note(format!("`{}` holds {lo} to {hi}", t.elem)),
    )
}
