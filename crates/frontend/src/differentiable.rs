//! Which code `grad` and `value_and_grad` may differentiate.
//!
//! Run once every body is checked: for each `grad(f, x)` of the module, `f`
//! and every function it calls must be free of `while`, `loop`, `break`,
//! random draws, nested `grad`, instances (`join`, `map`, `pfor`: not yet),
//! recursion, and `for` loops whose bounds
//! depend on the differentiated parameter. That dependence is followed
//! through every value (integers, casts, indices, tuples), through
//! assignments made under a condition that depends on it, and into called
//! functions through their arguments.
//!
//! An error points at the offending construct and names (in a note) the
//! `grad` call that made the code differentiated.

use std::collections::HashSet;

use autobatch_types::Loc;

use crate::hir::{Block, Expr, ExprKind, LocalId, Module, Pattern, Projection, Stmt};
use crate::Diagnostic;

/// Checks every `grad` / `value_and_grad` of `module`.
pub(crate) fn check_module(module: &Module) -> Result<(), Vec<Diagnostic>> {
    let mut sites = Vec::new();
    for f in &module.functions {
        visit_block(&f.body, &mut |e| {
            if let ExprKind::Grad {
                function,
                with_value,
                ..
            } = &e.kind
            {
                sites.push((*function, e.loc, *with_value));
            }
        });
    }
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for (function, loc, with_value) in sites {
        if !seen.insert(function) {
            continue;
        }
        let site = Site {
            function,
            loc,
            name: if with_value { "value_and_grad" } else { "grad" },
        };
        if let Err(d) = check_site(module, &site) {
            errors.push(*d);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

struct Site {
    function: usize,
    loc: Loc,
    name: &'static str,
}

type CheckResult<T> = Result<T, Box<Diagnostic>>;

fn check_site(module: &Module, site: &Site) -> CheckResult<()> {
    let mut checker = Checker {
        module,
        site,
        done: HashSet::new(),
        acyclic: HashSet::new(),
        path: Vec::new(),
    };
    checker.recursion(site.function, &mut Vec::new())?;
    checker.function(site.function, vec![true])
}

struct Checker<'m> {
    module: &'m Module,
    site: &'m Site,
    /// (function, which parameters carry the differentiated value) already walked.
    done: HashSet<(usize, Vec<bool>)>,
    /// Functions whose calls were followed without finding a cycle.
    acyclic: HashSet<usize>,
    /// The chain of functions from the differentiated one to the current one.
    path: Vec<usize>,
}

/// The walk of one function body: which locals depend on the parameter.
struct Walk {
    tainted: Vec<bool>,
    /// Whether the code being walked runs under a condition that depends on it.
    control: Vec<bool>,
}

impl Checker<'_> {
    fn error(
        &self,
        message: String,
        loc: Loc,
        len: usize,
        label: &str,
        note: &str,
    ) -> Box<Diagnostic> {
        let end = Loc::new(loc.line, loc.column + len.max(1) as u32);
        let differentiated = &self.module.functions[self.site.function].name;
        let mut d = Diagnostic::new(message, loc, end, label).with_note(note);
        let mut reached = format!(
            "`{differentiated}` is differentiated by the `{}` at {}:{}",
            self.site.name, self.site.loc.line, self.site.loc.column
        );
        if self.path.len() > 1 {
            let names: Vec<&str> = self
                .path
                .iter()
                .map(|f| self.module.functions[*f].name.as_str())
                .collect();
            reached.push_str(&format!(
                ", and reaches this code through {}",
                names.join(" -> ")
            ));
        }
        d = d.with_note(reached);
        Box::new(d)
    }

    /// Rejects a cycle of calls among the functions reached from `f`.
    fn recursion(&mut self, f: usize, stack: &mut Vec<usize>) -> CheckResult<()> {
        if self.acyclic.contains(&f) {
            return Ok(());
        }
        stack.push(f);
        let mut calls = Vec::new();
        visit_block(&self.module.functions[f].body, &mut |e| match &e.kind {
            ExprKind::Call { function, .. } | ExprKind::Map { function, .. } => {
                calls.push((*function, e.loc))
            }
            _ => {}
        });
        for (callee, loc) in calls {
            if stack.contains(&callee) {
                self.path = stack.clone();
                let name = &self.module.functions[callee].name;
                return Err(self.error(
                    format!("cannot differentiate the recursive call of `{name}`"),
                    loc,
                    name.chars().count(),
                    "recursive call in differentiated code",
                    "autodiff needs a call graph without cycles (the depth of the recursion could depend on the differentiated value); write the recursion as a `for` loop",
                ));
            }
            self.recursion(callee, stack)?;
        }
        stack.pop();
        self.acyclic.insert(f);
        Ok(())
    }

    /// Walks function `f` whose parameters marked in `tainted` depend on the
    /// differentiated value.
    fn function(&mut self, f: usize, tainted: Vec<bool>) -> CheckResult<()> {
        if !self.done.insert((f, tainted.clone())) {
            return Ok(());
        }
        let function = &self.module.functions[f];
        let mut walk = Walk {
            tainted: vec![false; function.locals.len()],
            control: vec![false],
        };
        for (p, t) in function.params.iter().zip(&tainted) {
            walk.tainted[p.0 as usize] = *t;
        }
        self.path.push(f);
        self.block(&mut walk, &function.body)?;
        self.path.pop();
        Ok(())
    }

    fn block(&mut self, w: &mut Walk, b: &Block) -> CheckResult<bool> {
        for s in &b.stmts {
            match s {
                Stmt::Let { pattern, init, .. } => {
                    let t = self.expr(w, init)? || w.under_condition();
                    bind(w, pattern, t);
                }
                Stmt::Expr(e) => {
                    self.expr(w, e)?;
                }
            }
        }
        match &b.tail {
            Some(t) => self.expr(w, t),
            None => Ok(false),
        }
    }

    /// Checks `e`; returns whether its value depends on the differentiated value.
    fn expr(&mut self, w: &mut Walk, e: &Expr) -> CheckResult<bool> {
        if let Some(d) = self.rejection(e) {
            return Err(d);
        }
        Ok(match &e.kind {
            ExprKind::Literal(_) | ExprKind::Static(_) | ExprKind::Dim(_) => false,
            ExprKind::Local(l) => w.tainted[l.0 as usize],
            ExprKind::Continue => false,
            ExprKind::Len { array, .. } => {
                self.expr(w, array)?;
                false
            }
            ExprKind::Unary { operand, .. } | ExprKind::Cast { operand, .. } => {
                self.expr(w, operand)?
            }
            ExprKind::Binary { lhs, rhs, .. }
            | ExprKind::Compare { lhs, rhs, .. }
            | ExprKind::And { lhs, rhs }
            | ExprKind::Or { lhs, rhs } => self.operands(w, lhs, rhs)?,
            ExprKind::Call { function, args, .. } => {
                let mut mask = Vec::with_capacity(args.len());
                for a in args {
                    mask.push(self.expr(w, a)?);
                }
                let any = mask.iter().any(|t| *t);
                self.function(*function, mask)?;
                any
            }
            ExprKind::Join { calls } => {
                let mut t = false;
                for c in calls {
                    t |= self.expr(w, c)?;
                }
                t
            }
            ExprKind::Map {
                function,
                indexed,
                args,
                ..
            } => {
                // The index of `pfor` does not depend on the differentiated value.
                let mut mask = vec![false; usize::from(*indexed)];
                for a in args {
                    mask.push(self.expr(w, a)?);
                }
                let any = mask.iter().any(|t| *t);
                self.function(*function, mask)?;
                any
            }
            ExprKind::Builtin { args, .. } | ExprKind::Tuple(args) | ExprKind::Array(args) => {
                let mut t = false;
                for a in args {
                    t |= self.expr(w, a)?;
                }
                t
            }
            ExprKind::Field { base, .. } => self.expr(w, base)?,
            ExprKind::Index { base, index } => {
                let a = self.expr(w, base)?;
                self.expr(w, index)? || a
            }
            ExprKind::Repeat { element, .. } => self.expr(w, element)?,
            ExprKind::Block(b) => self.block(w, b)?,
            ExprKind::If {
                cond,
                then_block,
                else_branch,
            } => self.branch(w, cond, then_block, else_branch.as_deref())?,
            ExprKind::For {
                var,
                start,
                end,
                body,
                ..
            } => self.for_loop(w, *var, start, end, body)?,
            ExprKind::Return { value } => match value {
                Some(v) => self.expr(w, v)?,
                None => false,
            },
            ExprKind::Assign { place, value, .. } => {
                let mut t = self.expr(w, value)? || w.under_condition();
                for p in &place.projections {
                    if let Projection::Index(i) = p {
                        t |= self.expr(w, i)?;
                    }
                }
                if t {
                    w.tainted[place.local.0 as usize] = true;
                }
                false
            }
            ExprKind::Assert { cond, .. } => {
                self.expr(w, cond)?;
                false
            }
            // Rejected by `rejection` above.
            ExprKind::Grad { .. }
            | ExprKind::While { .. }
            | ExprKind::Loop { .. }
            | ExprKind::Break { .. } => false,
        })
    }

    /// The error for a construct that differentiated code may not contain
    /// (checked before its operands).
    fn rejection(&self, e: &Expr) -> Option<Box<Diagnostic>> {
        let loop_note = "the trip count could depend on the differentiated value; use a `for` loop whose bounds do not depend on it";
        let d = match &e.kind {
            ExprKind::Call { catch: true, .. } => self.error(
                "cannot differentiate through `catch`".into(),
                e.loc,
                "catch".len(),
                "`catch` in differentiated code",
                "a recovered fault has no derivative; call `catch` outside the function that is differentiated (for example around the `grad` call)",
            ),
            // The table's `nograd` rows are the random draws (a test of the
            // table checks it).
            ExprKind::Builtin { builtin, .. } if !builtin.differentiable() => {
                let name = builtin.name();
                self.error(
                    format!("cannot differentiate the random draw `{name}`"),
                    e.loc,
                    name.len(),
                    "random draw in differentiated code",
                    "draw the random numbers outside the differentiated function and pass them in as part of the point, or as statics",
                )
            }
            // Not yet: the autodiff does not derive a fork. Lifting this
            // refusal is all the front end needs (`expr` walks instances).
            ExprKind::Join { .. } | ExprKind::Map { .. } => {
                let name = instance_form(e);
                self.error(
                    format!("cannot differentiate through `{name}`"),
                    e.loc,
                    name.len(),
                    &format!("`{name}` in differentiated code"),
                    "instances (`join`, `map`, `pfor`) cannot be differentiated yet; compute them outside the differentiated function and pass their results in as part of the point or as statics, or use calls and `for` loops in it",
                )
            }
            ExprKind::Grad { .. } => self.error(
                "cannot differentiate a `grad` or `value_and_grad` inside differentiated code"
                    .into(),
                e.loc,
                4,
                "nested autodiff",
                "higher derivatives are not supported",
            ),
            ExprKind::While { .. } => self.error(
                "cannot differentiate a `while` loop".into(),
                e.loc,
                5,
                "`while` in differentiated code",
                loop_note,
            ),
            ExprKind::Loop { .. } => self.error(
                "cannot differentiate a `loop`".into(),
                e.loc,
                4,
                "`loop` in differentiated code",
                loop_note,
            ),
            ExprKind::Break { .. } => self.error(
                "cannot differentiate a `break`".into(),
                e.loc,
                5,
                "`break` in differentiated code",
                loop_note,
            ),
            _ => return None,
        };
        Some(d)
    }

    /// The operands of an operator; the left one may be a long left-nested
    /// chain (`a + b + ... + z`), walked with a loop.
    fn operands(&mut self, w: &mut Walk, lhs: &Expr, rhs: &Expr) -> CheckResult<bool> {
        let mut t = self.expr(w, rhs)?;
        let mut cur: &Expr = lhs;
        loop {
            match &cur.kind {
                ExprKind::Binary { lhs, rhs, .. }
                | ExprKind::Compare { lhs, rhs, .. }
                | ExprKind::And { lhs, rhs }
                | ExprKind::Or { lhs, rhs } => {
                    t |= self.expr(w, rhs)?;
                    cur = lhs;
                }
                _ => return Ok(self.expr(w, cur)? || t),
            }
        }
    }

    /// `if cond { then } else ...`: what the branches assign depends on the
    /// differentiated value if `cond` does.
    fn branch(
        &mut self,
        w: &mut Walk,
        cond: &Expr,
        then_block: &Block,
        else_branch: Option<&Expr>,
    ) -> CheckResult<bool> {
        let c = self.expr(w, cond)?;
        w.control.push(c || w.under_condition());
        let mut t = self.block(w, then_block);
        if let (Ok(tt), Some(e)) = (&t, else_branch) {
            let tt = *tt;
            t = self.expr(w, e).map(|te| te || tt);
        }
        w.control.pop();
        Ok(t? || c)
    }

    /// `for var in start..end { body }`: the bounds must not depend on the
    /// differentiated value.
    fn for_loop(
        &mut self,
        w: &mut Walk,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        body: &Block,
    ) -> CheckResult<bool> {
        let ts = self.expr(w, start)?;
        let te = self.expr(w, end)?;
        if ts || te {
            let bound = if ts { start } else { end };
            return Err(self.error(
                "cannot differentiate a `for` loop whose bounds depend on the differentiated value".into(),
                bound.loc,
                1,
                "this bound depends on the differentiated value",
                "the trip count must not depend on the differentiated value; compute the bounds from constants, statics or integers that do not depend on it",
            ));
        }
        w.tainted[var.0 as usize] = w.under_condition();
        // Values assigned in one iteration flow into the next: walk the body
        // until the dependence no longer grows.
        loop {
            let before = w.tainted.clone();
            self.block(w, body)?;
            if w.tainted == before {
                return Ok(false);
            }
        }
    }
}

/// The name the user wrote for an instance form.
fn instance_form(e: &Expr) -> &'static str {
    match &e.kind {
        ExprKind::Join { .. } => "join",
        ExprKind::Map { indexed: true, .. } => "pfor",
        _ => "map",
    }
}

impl Walk {
    fn under_condition(&self) -> bool {
        self.control.last().copied().unwrap_or(false)
    }
}

fn bind(w: &mut Walk, pattern: &Pattern, tainted: bool) {
    match pattern {
        Pattern::Bind(l) => w.tainted[l.0 as usize] = tainted,
        Pattern::Wildcard => {}
        Pattern::Tuple(items) => items.iter().for_each(|p| bind(w, p, tainted)),
    }
}

/// Calls `visit` on every expression of `b`, outermost first.
pub(crate) fn visit_block(b: &Block, visit: &mut dyn FnMut(&Expr)) {
    for s in &b.stmts {
        match s {
            Stmt::Let { init, .. } => visit_expr(init, visit),
            Stmt::Expr(e) => visit_expr(e, visit),
        }
    }
    if let Some(t) = &b.tail {
        visit_expr(t, visit);
    }
}

fn visit_expr(e: &Expr, visit: &mut dyn FnMut(&Expr)) {
    visit(e);
    match &e.kind {
        ExprKind::Literal(_)
        | ExprKind::Local(_)
        | ExprKind::Static(_)
        | ExprKind::Dim(_)
        | ExprKind::Continue => {}
        ExprKind::Len { array, .. } => visit_expr(array, visit),
        ExprKind::Unary { operand, .. } | ExprKind::Cast { operand, .. } => {
            visit_expr(operand, visit)
        }
        ExprKind::Binary { lhs, rhs, .. }
        | ExprKind::Compare { lhs, rhs, .. }
        | ExprKind::And { lhs, rhs }
        | ExprKind::Or { lhs, rhs } => {
            // A long left-nested chain is walked with a loop.
            visit_expr(rhs, visit);
            let mut cur: &Expr = lhs;
            loop {
                match &cur.kind {
                    ExprKind::Binary { lhs, rhs, .. }
                    | ExprKind::Compare { lhs, rhs, .. }
                    | ExprKind::And { lhs, rhs }
                    | ExprKind::Or { lhs, rhs } => {
                        visit(cur);
                        visit_expr(rhs, visit);
                        cur = lhs;
                    }
                    _ => {
                        visit_expr(cur, visit);
                        break;
                    }
                }
            }
        }
        ExprKind::Call { args, .. }
        | ExprKind::Builtin { args, .. }
        | ExprKind::Map { args, .. }
        | ExprKind::Join { calls: args }
        | ExprKind::Tuple(args)
        | ExprKind::Array(args) => args.iter().for_each(|a| visit_expr(a, visit)),
        ExprKind::Grad { arg, .. } => visit_expr(arg, visit),
        ExprKind::Field { base, .. } => visit_expr(base, visit),
        ExprKind::Index { base, index } => {
            visit_expr(base, visit);
            visit_expr(index, visit);
        }
        ExprKind::Repeat { element, .. } => visit_expr(element, visit),
        ExprKind::Block(b) => visit_block(b, visit),
        ExprKind::If {
            cond,
            then_block,
            else_branch,
        } => {
            visit_expr(cond, visit);
            visit_block(then_block, visit);
            if let Some(e) = else_branch {
                visit_expr(e, visit);
            }
        }
        ExprKind::While { cond, body } => {
            visit_expr(cond, visit);
            visit_block(body, visit);
        }
        ExprKind::Loop { body } => visit_block(body, visit),
        ExprKind::For {
            start, end, body, ..
        } => {
            visit_expr(start, visit);
            visit_expr(end, visit);
            visit_block(body, visit);
        }
        ExprKind::Break { value } | ExprKind::Return { value } => {
            if let Some(v) = value {
                visit_expr(v, visit);
            }
        }
        ExprKind::Assign { place, value, .. } => {
            visit_expr(value, visit);
            for p in &place.projections {
                if let Projection::Index(i) = p {
                    visit_expr(i, visit);
                }
            }
        }
        ExprKind::Assert { cond, .. } => visit_expr(cond, visit),
    }
}
