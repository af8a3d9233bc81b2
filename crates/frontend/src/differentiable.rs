//! Which code `grad`, `value_and_grad` and `jacobian` may differentiate.
//!
//! Run once every body is checked: for each `grad(f, x)` (or
//! `value_and_grad`, `jacobian`) of the module, `f` and every function it
//! calls or runs as instances (`join`, `map`, `pfor`: their callees are
//! walked as calls, the index of `pfor` not depending on the parameter)
//! must be free of random draws and nested `grad` / `value_and_grad` /
//! `jacobian`, a `catch` may only call a function on values that do not
//! depend on the differentiated parameter (its result has no derivative),
//! and **control
//! that repeats code must not depend on the differentiated parameter** (the
//! first one, `x`; the data arguments of `grad(f, x, d..)` are like
//! statics), so
//! that how often each loop runs and how deep
//! each recursion goes, once entered, is decided by data that do not depend
//! on it:
//!
//! - the bounds of a `for` loop and the condition of a `while` loop;
//! - inside a loop (`for`, `while`, `loop`), the conditions (of an `if`, or
//!   the left operand of `&&` / `||`) around a `break` of that loop or a
//!   `return` (which leaves every loop it is in), up to the loop;
//! - in a function that is part of a recursion (a cycle of the call graph:
//!   it calls itself, directly or through others), every condition: `if`,
//!   `while`, the left operands of `&&` and `||`. This is the simplest rule
//!   that keeps whether a recursive call happens (and every `return` before
//!   it) independent of the parameter; piecewise code on the parameter
//!   belongs in a helper outside the cycle, or in `select` / `max`.
//!
//! Conditions elsewhere (an `if` on the parameter in straight-line code, in a
//! loop body away from its exits, in a non-recursive helper) are
//! differentiated piecewise. Dependence on the parameter is followed through
//! every value (integers, casts, indices, tuples), through assignments made
//! under a condition that depends on it (also the code after a `continue`
//! under such a condition), and into called functions through their
//! arguments (a call's result depends on it if an argument does).
//!
//! An error points at the offending construct (for control, at the
//! condition or bound) and names (in a note) the `grad` call that made the
//! code differentiated.

use std::collections::HashSet;

use autobatch_types::Loc;

use crate::hir::{Block, Expr, ExprKind, LocalId, Module, Pattern, Place, Stmt};
use crate::Diagnostic;

/// Checks every `grad` / `value_and_grad` of `module`.
pub(crate) fn check_module(module: &Module) -> Result<(), Vec<Diagnostic>> {
    let mut sites = Vec::new();
    for f in &module.functions {
        // A generated ODE solver's `grad` is checked where a gradient
        // reaches the solver's call (`Checker::call`).
        if crate::ode::is_generated(&f.name) {
            continue;
        }
        visit_block(&f.body, &mut |e| {
            if let ExprKind::Grad { function, kind, .. } = &e.kind {
                sites.push((*function, e.loc, *kind));
            }
        });
    }
    let graph = CallGraph::new(module);
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for (function, loc, kind) in sites {
        if !seen.insert(function) {
            continue;
        }
        let site = Site {
            function,
            loc,
            name: kind.name(),
        };
        if let Err(d) = check_site(module, &graph, &site) {
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

/// Checks a gradient of `function` (its result a member's loss) with
/// respect to the statics marked in `statics` (`autobatch run
/// --grad-statics`): the rules of `grad` with those statics in the place
/// of the point `x` (no parameter is differentiated).
pub fn check_static_gradient(
    module: &Module,
    function: usize,
    statics: &[bool],
) -> Result<(), Vec<Diagnostic>> {
    let graph = CallGraph::new(module);
    let site = Site {
        function,
        loc: module.functions[function].loc,
        name: "--grad-statics",
    };
    let reads = graph.reading(module, statics);
    let mut checker = Checker {
        module,
        graph: &graph,
        site: &site,
        done: HashSet::new(),
        path: Vec::new(),
        statics: statics.to_vec(),
        reads,
    };
    let params = module.functions[function].params.len();
    checker
        .function(function, vec![false; params])
        .map_err(|d| vec![*d])
}

fn check_site(module: &Module, graph: &CallGraph, site: &Site) -> CheckResult<()> {
    let mut checker = Checker {
        module,
        graph,
        site,
        done: HashSet::new(),
        path: Vec::new(),
        statics: Vec::new(),
        reads: Vec::new(),
    };
    // Only the first parameter (the point `x`) is differentiated; data
    // arguments (`grad(f, x, d..)`) are like statics: control may depend
    // on them.
    let params = module.functions[site.function].params.len();
    checker.function(site.function, (0..params).map(|i| i == 0).collect())
}

struct Checker<'m> {
    module: &'m Module,
    graph: &'m CallGraph,
    site: &'m Site,
    /// (function, which parameters carry the differentiated value) already walked.
    done: HashSet<(usize, Vec<bool>)>,
    /// The chain of functions from the differentiated one to the current one.
    path: Vec<usize>,
    /// By static: whether it is differentiated (`check_static_gradient`).
    statics: Vec<bool>,
    /// By function: whether it reads a differentiated static, itself or
    /// through the functions it calls.
    reads: Vec<bool>,
}

/// The walk of one function body: which locals depend on the parameter.
struct Walk {
    tainted: Vec<bool>,
    /// Per local: how many entries of `control` were there where it was
    /// declared. Assigning it under a later one that depends on the
    /// parameter makes it depend on the parameter (it is seen after the
    /// condition, with a value that depends on whether the code ran).
    declared: Vec<usize>,
    /// What the code being walked runs under, innermost last: each enclosing
    /// condition, and each point after a `continue` under a condition (see
    /// [`LoopFrame::skips`]); whether it depends on the parameter.
    control: Vec<bool>,
    /// The conditions around the code being walked, innermost last: whether
    /// each depends on the parameter, and where it starts.
    conditions: Vec<(bool, Loc)>,
    /// The loops around the code being walked, innermost last.
    loops: Vec<LoopFrame>,
    /// The function walked.
    function: usize,
    /// Whether it is part of a recursion: none of its conditions may depend
    /// on the parameter.
    recursive: bool,
    /// Whether it is a generated ODE solver (`crate::ode`), whose adaptive
    /// steps are differentiated as they were taken: its `while` conditions
    /// may depend on the parameter.
    adaptive: bool,
}

/// A loop around the code being walked.
#[derive(Clone, Copy, Default)]
struct LoopFrame {
    /// How many of [`Walk::conditions`] are outside the loop.
    outside: usize,
    /// Whether a `break` value depends on the parameter.
    value: bool,
    /// Whether a `continue` runs under a condition (inside the loop) that
    /// depends on it: the rest of the iteration runs under that condition.
    skips: bool,
}

impl Checker<'_> {
    /// Whether function `f` reads a differentiated static.
    fn reads(&self, f: usize) -> bool {
        self.reads.get(f).copied().unwrap_or(false)
    }

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
            let names: Vec<String> = self
                .path
                .iter()
                .map(|f| crate::ode::user_name(&self.module.functions[*f].name))
                .collect();
            reached.push_str(&format!(
                ", and reaches this code through {}",
                names.join(" -> ")
            ));
        }
        d = d.with_note(reached);
        Box::new(d)
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
            declared: vec![0; function.locals.len()],
            control: Vec::new(),
            conditions: Vec::new(),
            loops: Vec::new(),
            function: f,
            recursive: self.graph.recursive[f],
            adaptive: crate::ode::is_generated(&function.name),
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
        // After a statement that may `continue` under a condition on the
        // parameter, the rest of the block runs under that condition.
        let mut skipped = false;
        for s in &b.stmts {
            match s {
                Stmt::Let { pattern, init, .. } => {
                    let t = self.expr(w, init)?;
                    bind(w, pattern, t);
                }
                Stmt::Expr(e) => {
                    self.expr(w, e)?;
                }
            }
            if !skipped && w.skipping() {
                skipped = true;
                w.control.push(true);
            }
        }
        let t = match &b.tail {
            Some(t) => self.expr(w, t)?,
            None => false,
        };
        if skipped {
            w.control.pop();
        }
        Ok(t)
    }

    /// Checks `e`; returns whether its value depends on the differentiated value.
    fn expr(&mut self, w: &mut Walk, e: &Expr) -> CheckResult<bool> {
        if let Some(d) = self.rejection(e) {
            return Err(d);
        }
        Ok(match &e.kind {
            ExprKind::Literal(_) | ExprKind::Dim(_) => false,
            ExprKind::Static(s) => self.statics.get(*s).copied().unwrap_or(false),
            ExprKind::Local(l) => w.tainted[l.0 as usize],
            ExprKind::Continue => {
                if let Some(frame) = w.loops.last_mut() {
                    frame.skips |= w.conditions[frame.outside..].iter().any(|c| c.0);
                }
                false
            }
            ExprKind::Len { array, .. } => {
                self.expr(w, array)?;
                false
            }
            ExprKind::Unary { operand, .. } | ExprKind::Cast { operand, .. } => {
                self.expr(w, operand)?
            }
            ExprKind::Binary { .. }
            | ExprKind::Compare { .. }
            | ExprKind::And { .. }
            | ExprKind::Or { .. } => self.operands(w, e)?,
            ExprKind::Call {
                function,
                args,
                catch: true,
                ..
            } => self.catching_call(w, e.loc, *function, args)?,
            ExprKind::Call { function, args, .. } => self.call(w, *function, false, args)?,
            ExprKind::Join { calls } => self.any_of(w, calls)?,
            // The index of `pfor` does not depend on the differentiated value.
            ExprKind::Map {
                function,
                indexed,
                args,
                ..
            } => self.call(w, *function, *indexed, args)?,
            ExprKind::Builtin { args, .. }
            | ExprKind::Library { args, .. }
            | ExprKind::HostCall { args, .. }
            | ExprKind::Tuple(args)
            | ExprKind::Array(args) => self.any_of(w, args)?,
            ExprKind::Field { base, .. } => self.expr(w, base)?,
            ExprKind::Index { base, index }
            | ExprKind::Slice {
                base, start: index, ..
            } => {
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
            ExprKind::While { cond, body } => self.while_loop(w, cond, body)?,
            ExprKind::Loop { body } => self.repeat(w, body)?,
            ExprKind::Break { value } => {
                let t = self.optional(w, value.as_deref())?;
                self.exit(w, e.loc, false)?;
                if let Some(frame) = w.loops.last_mut() {
                    frame.value |= t;
                }
                false
            }
            ExprKind::Return { value } => {
                let t = self.optional(w, value.as_deref())?;
                self.exit(w, e.loc, true)?;
                t
            }
            ExprKind::Assign { place, value, .. } => {
                self.assign(w, place, value)?;
                false
            }
            ExprKind::Assert { cond, .. } => {
                self.expr(w, cond)?;
                false
            }
            // Rejected by `rejection` above.
            ExprKind::Grad { .. } => false,
        })
    }

    /// `catch(function(args))` at `loc`: allowed when its result does not
    /// depend on the differentiated value (no argument does, and `function`
    /// reads no differentiated static), so that it needs no derivative and
    /// runs forward only. Its result does not depend on it either.
    fn catching_call(
        &mut self,
        w: &mut Walk,
        loc: Loc,
        function: usize,
        args: &[Expr],
    ) -> CheckResult<bool> {
        let mut mask = Vec::with_capacity(args.len());
        for a in args {
            mask.push(self.expr(w, a)?);
        }
        let label = if mask.iter().any(|t| *t) {
            "the call takes a value that depends on the differentiated value"
        } else if self.reads(function) {
            "the called function reads a differentiated static"
        } else {
            self.function(function, mask)?;
            return Ok(false);
        };
        Err(self.error(
            "cannot differentiate through `catch`".into(),
            loc,
            "catch".len(),
            label,
            "a recovered fault has no derivative: in differentiated code a `catch` may only call a function on values that do not depend on the differentiated value; call `catch` outside the function that is differentiated (for example around the `grad` call)",
        ))
    }

    /// Checks the arguments of a call of `function` (after the index of a
    /// `pfor` when `indexed`) and the function for the arguments that depend
    /// on the differentiated value; returns whether the result may depend on it.
    fn call(
        &mut self,
        w: &mut Walk,
        function: usize,
        indexed: bool,
        args: &[Expr],
    ) -> CheckResult<bool> {
        let mut mask = vec![false; usize::from(indexed)];
        for a in args {
            mask.push(self.expr(w, a)?);
        }
        let any = mask.iter().any(|t| *t) || self.reads(function);
        // A call of an ODE solver with a custom derivative runs forward
        // only; its derivative takes `grad` of its right-hand side in every
        // float, as `{solver}_row` (`crate::ode`). A gradient with respect
        // to statics walks the solve itself.
        match crate::ode::sensitivity_row(self.module, function) {
            Some(row) if self.statics.is_empty() => {
                if any {
                    let params = self.module.functions[row].params.len();
                    self.function(row, (0..params).map(|i| i == 0).collect())?;
                }
            }
            _ => self.function(function, mask)?,
        }
        Ok(any)
    }

    /// Checks every expression of `exprs`; returns whether any depends on the
    /// differentiated value.
    fn any_of(&mut self, w: &mut Walk, exprs: &[Expr]) -> CheckResult<bool> {
        let mut t = false;
        for e in exprs {
            t |= self.expr(w, e)?;
        }
        Ok(t)
    }

    /// Checks the value of a `break` or `return`, if any.
    fn optional(&mut self, w: &mut Walk, value: Option<&Expr>) -> CheckResult<bool> {
        match value {
            Some(v) => self.expr(w, v),
            None => Ok(false),
        }
    }

    /// Checks an assignment to `place`: the assigned local depends on the
    /// differentiated value from here on when the value, an index of the place
    /// or a condition the assignment is under does.
    fn assign(&mut self, w: &mut Walk, place: &Place, value: &Expr) -> CheckResult<()> {
        let mut t = self.expr(w, value)? || w.assigned_under_condition(place.local);
        for p in &place.projections {
            if let Some(i) = p.operand() {
                t |= self.expr(w, i)?;
            }
        }
        if t {
            w.tainted[place.local.0 as usize] = true;
        }
        Ok(())
    }

    /// The error for a construct that differentiated code may not contain
    /// (checked before its operands).
    fn rejection(&self, e: &Expr) -> Option<Box<Diagnostic>> {
        let d = match &e.kind {
            // The table's `nograd` rows are the random draws and the
            // functions without a derivative rule (`trigamma`; a test of
            // the table checks it).
            ExprKind::Builtin { builtin, .. }
                if !builtin.differentiable() && !builtin.signature().is_random() =>
            {
                let name = builtin.name();
                self.error(
                    format!("cannot differentiate `{name}`: autobatch has no derivative of it"),
                    e.loc,
                    name.len(),
                    "not differentiable",
                    "compute it outside the differentiated function and pass it in as part of the point, or as statics",
                )
            }
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
            ExprKind::Library { function, .. } if !function.is_differentiable() => {
                let name = function.name();
                self.error(
                    format!("cannot differentiate the random draw `{name}`"),
                    e.loc,
                    name.len(),
                    "random draw in differentiated code",
                    "draw the random numbers outside the differentiated function and pass them in as part of the point, or as statics",
                )
            }
            ExprKind::HostCall { host, .. } => {
                let name = &self.module.host_functions[*host].name;
                self.error(
                    format!("cannot differentiate through the host primitive `{name}`"),
                    e.loc,
                    name.chars().count(),
                    "host primitive in differentiated code",
                    "autobatch knows no derivative of a host function; compute its value outside the differentiated function and pass it in as part of the point, or write the computation in autobatch",
                )
            }
            ExprKind::Grad { kind, .. } => self.error(
                format!(
                    "cannot differentiate a `{}` inside differentiated code",
                    kind.name()
                ),
                e.loc,
                kind.name().len(),
                "nested autodiff",
                "higher derivatives are not supported: `grad`, `value_and_grad` and `jacobian` may not be reached from code that is differentiated",
            ),
            _ => return None,
        };
        Some(d)
    }

    /// An operator `e` and its operands, in evaluation order; the left one
    /// may be a long left-nested chain (`a + b + ... + z`), walked with a
    /// loop. The left operand of `&&` / `||` is a condition: it decides
    /// whether the right one runs.
    fn operands(&mut self, w: &mut Walk, e: &Expr) -> CheckResult<bool> {
        // The right operands, outermost first, and whether each runs only
        // when the left one says so.
        let mut rights: Vec<(&Expr, bool)> = Vec::new();
        let mut cur: &Expr = e;
        loop {
            match &cur.kind {
                ExprKind::Binary { lhs, rhs, .. } | ExprKind::Compare { lhs, rhs, .. } => {
                    rights.push((rhs, false));
                    cur = lhs;
                }
                ExprKind::And { lhs, rhs } | ExprKind::Or { lhs, rhs } => {
                    rights.push((rhs, true));
                    cur = lhs;
                }
                _ => break,
            }
        }
        let first = cur.loc;
        let mut t = self.expr(w, cur)?;
        for (rhs, short_circuit) in rights.into_iter().rev() {
            if short_circuit {
                self.recursive_condition(w, t, first)?;
                t |= self.conditional(w, t, first, |c, w| c.expr(w, rhs))?;
            } else {
                t |= self.expr(w, rhs)?;
            }
        }
        Ok(t)
    }

    /// Runs `walk` on code that runs under a condition (`dependent` when it
    /// depends on the parameter, starting at `loc`).
    fn conditional<T>(
        &mut self,
        w: &mut Walk,
        dependent: bool,
        loc: Loc,
        walk: impl FnOnce(&mut Self, &mut Walk) -> CheckResult<T>,
    ) -> CheckResult<T> {
        w.control.push(dependent);
        w.conditions.push((dependent, loc));
        let r = walk(self, w);
        w.conditions.pop();
        w.control.pop();
        r
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
        self.recursive_condition(w, c, cond.loc)?;
        let t = self.conditional(w, c, cond.loc, |checker, w| {
            let tt = checker.block(w, then_block)?;
            match else_branch {
                Some(e) => Ok(checker.expr(w, e)? || tt),
                None => Ok(tt),
            }
        })?;
        Ok(t || c)
    }

    /// In a recursive function, refuses a condition that depends on the
    /// differentiated value.
    fn recursive_condition(&self, w: &Walk, dependent: bool, loc: Loc) -> CheckResult<()> {
        if !(w.recursive && dependent) {
            return Ok(());
        }
        let f = w.function;
        let name = &self.module.functions[f].name;
        let cycle: Vec<&str> = self
            .graph
            .cycle(f)
            .iter()
            .map(|g| self.module.functions[*g].name.as_str())
            .collect();
        Err(self.error(
            format!("cannot differentiate the recursive function `{name}`: this condition depends on the differentiated value"),
            loc,
            1,
            "this condition depends on the differentiated value",
            &format!(
                "`{name}` is recursive ({}); in a recursive function no condition may depend on the differentiated value, so that whether the recursion goes on does not; decide it from constants, statics or integers that do not depend on it, and move piecewise code on the value into a function outside the recursion (or use `select`, `max`, `min`)",
                cycle.join(" -> ")
            ),
        ))
    }

    /// A `break` (or, when `leaves_all`, a `return`) at `loc`: no condition
    /// between it and the loop it leaves (the outermost one for `return`) may
    /// depend on the differentiated value.
    fn exit(&self, w: &Walk, loc: Loc, leaves_all: bool) -> CheckResult<()> {
        let frame = if leaves_all {
            w.loops.first()
        } else {
            w.loops.last()
        };
        let Some(frame) = frame else {
            return Ok(());
        };
        let Some((_, cond)) = w.conditions[frame.outside..].iter().rev().find(|c| c.0) else {
            return Ok(());
        };
        let (what, leaves) = if leaves_all {
            ("return", "a loop")
        } else {
            ("break", "the loop")
        };
        Err(self.error(
            format!("cannot differentiate a `{what}` from a loop under a condition that depends on the differentiated value"),
            *cond,
            1,
            "this condition depends on the differentiated value",
            &format!(
                "it decides whether the `{what}` at {}:{} leaves {leaves}, so the trip count would depend on the differentiated value; decide it from constants, statics or integers that do not depend on it",
                loc.line, loc.column
            ),
        ))
    }

    /// The body of a loop, walked until the dependence no longer grows
    /// (values assigned in one iteration flow into the next); `head` checks
    /// what runs before each iteration (a `while` condition, part of the
    /// loop: a `return` in it leaves the loop). Returns whether a `break`
    /// value depends on the differentiated value.
    fn loop_body(
        &mut self,
        w: &mut Walk,
        body: &Block,
        mut head: impl FnMut(&mut Self, &mut Walk) -> CheckResult<()>,
    ) -> CheckResult<bool> {
        let mut value = false;
        loop {
            let before = w.tainted.clone();
            w.loops.push(LoopFrame {
                outside: w.conditions.len(),
                value,
                skips: false,
            });
            let r = head(self, w).and_then(|()| self.block(w, body));
            let frame = w.loops.pop().unwrap_or_default();
            r?;
            value = frame.value;
            if w.tainted == before {
                return Ok(value);
            }
        }
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
        w.tainted[var.0 as usize] = false;
        w.declared[var.0 as usize] = w.control.len();
        self.loop_body(w, body, |_, _| Ok(()))?;
        Ok(false)
    }

    /// `while cond { body }`: the condition must not depend on the
    /// differentiated value.
    fn while_loop(&mut self, w: &mut Walk, cond: &Expr, body: &Block) -> CheckResult<bool> {
        self.loop_body(w, body, |checker, w| {
            if checker.expr(w, cond)? && !w.adaptive {
                return Err(checker.error(
                    "cannot differentiate a `while` loop whose condition depends on the differentiated value".into(),
                    cond.loc,
                    1,
                    "this condition depends on the differentiated value",
                    "the trip count must not depend on the differentiated value; compute the condition from constants, statics or integers that do not depend on it",
                ));
            }
            Ok(())
        })?;
        Ok(false)
    }

    /// `loop { body }`: its value is its `break` values.
    fn repeat(&mut self, w: &mut Walk, body: &Block) -> CheckResult<bool> {
        self.loop_body(w, body, |_, _| Ok(()))
    }
}

impl Walk {
    /// Whether an assignment to `local` here runs under a condition on the
    /// parameter that `local` was declared outside of.
    fn assigned_under_condition(&self, local: LocalId) -> bool {
        let from = self.declared[local.0 as usize].min(self.control.len());
        self.control[from..].iter().any(|c| *c)
    }

    /// Whether the innermost loop may `continue` under a condition that
    /// depends on the parameter (see [`LoopFrame::skips`]).
    fn skipping(&self) -> bool {
        self.loops.last().is_some_and(|l| l.skips)
    }
}

fn bind(w: &mut Walk, pattern: &Pattern, tainted: bool) {
    match pattern {
        Pattern::Bind(l) => {
            w.tainted[l.0 as usize] = tainted;
            w.declared[l.0 as usize] = w.control.len();
        }
        Pattern::Wildcard => {}
        Pattern::Tuple(items) => items.iter().for_each(|p| bind(w, p, tainted)),
    }
}

/// The call graph of the module: which functions are recursive.
struct CallGraph {
    /// Per function: the functions it calls, each once, in order of appearance.
    callees: Vec<Vec<usize>>,
    /// Per function: its strongly connected component.
    component: Vec<usize>,
    /// Per function: whether it is part of a cycle of calls (its component
    /// has several functions, or it calls itself).
    recursive: Vec<bool>,
}

impl CallGraph {
    fn new(module: &Module) -> CallGraph {
        let callees: Vec<Vec<usize>> = module
            .functions
            .iter()
            .map(|f| {
                let mut calls = Vec::new();
                visit_block(&f.body, &mut |e| {
                    if let ExprKind::Call { function, .. } | ExprKind::Map { function, .. } =
                        &e.kind
                    {
                        if !calls.contains(function) {
                            calls.push(*function);
                        }
                    }
                });
                calls
            })
            .collect();
        let component = components(&callees);
        let mut size = vec![0usize; callees.len()];
        for c in &component {
            size[*c] += 1;
        }
        let recursive = (0..callees.len())
            .map(|f| size[component[f]] > 1 || callees[f].contains(&f))
            .collect();
        CallGraph {
            callees,
            component,
            recursive,
        }
    }

    /// By function: whether it reads a static marked in `statics`, in its
    /// body or through the functions it calls.
    fn reading(&self, module: &Module, statics: &[bool]) -> Vec<bool> {
        let mut reads: Vec<bool> = module
            .functions
            .iter()
            .map(|f| {
                let mut found = false;
                visit_block(&f.body, &mut |e| {
                    if let ExprKind::Static(s) = &e.kind {
                        found |= statics.get(*s).copied().unwrap_or(false);
                    }
                });
                found
            })
            .collect();
        let mut changed = true;
        while changed {
            changed = false;
            for f in 0..reads.len() {
                if !reads[f] && self.callees[f].iter().any(|g| reads[*g]) {
                    reads[f] = true;
                    changed = true;
                }
            }
        }
        reads
    }

    /// A shortest cycle of calls through recursive function `f`: `f`, the
    /// functions it goes through, and `f` again.
    fn cycle(&self, f: usize) -> Vec<usize> {
        let mut from: Vec<Option<usize>> = vec![None; self.callees.len()];
        let mut queue = std::collections::VecDeque::from([f]);
        while let Some(g) = queue.pop_front() {
            for &h in &self.callees[g] {
                if h == f {
                    let mut path = vec![f, g];
                    let mut k = g;
                    while let Some(prev) = from[k] {
                        path.push(prev);
                        k = prev;
                    }
                    path.reverse();
                    return path;
                }
                if self.component[h] == self.component[f] && from[h].is_none() && h != f {
                    from[h] = Some(g);
                    queue.push_back(h);
                }
            }
        }
        vec![f]
    }
}

/// The strongly connected components of a graph given by its successor
/// lists (Tarjan's algorithm, with an explicit stack): per node, its
/// component's index.
fn components(succ: &[Vec<usize>]) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    let n = succ.len();
    let mut index = vec![NONE; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut component = vec![NONE; n];
    let (mut next, mut count) = (0, 0);
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, how many of its successors were looked at)
        let mut work = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&(v, i)) = work.last() {
            if let Some(&w) = succ[v].get(i) {
                let top = work.len() - 1;
                work[top].1 += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = count;
                    if w == v {
                        break;
                    }
                }
                count += 1;
            }
        }
    }
    component
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
        | ExprKind::Library { args, .. }
        | ExprKind::HostCall { args, .. }
        | ExprKind::Map { args, .. }
        | ExprKind::Join { calls: args }
        | ExprKind::Tuple(args)
        | ExprKind::Grad { args, .. }
        | ExprKind::Array(args) => args.iter().for_each(|a| visit_expr(a, visit)),
        ExprKind::Field { base, .. } => visit_expr(base, visit),
        ExprKind::Index { base, index }
        | ExprKind::Slice {
            base, start: index, ..
        } => {
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
                if let Some(i) = p.operand() {
                    visit_expr(i, visit);
                }
            }
        }
        ExprKind::Assert { cond, .. } => visit_expr(cond, visit),
    }
}
