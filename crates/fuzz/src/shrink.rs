//! The shrinker: makes a failing case smaller while it still fails.
//!
//! A variant is one edit of the case: drop a function (its calls become
//! constants), drop a statement, put the body of an `if` or loop statement
//! in its place, replace an expression by a constant of its type or by one
//! of its operands of the same type, drop a member, share a batched
//! argument, make one input value simpler, or make ragged arrays one
//! element shorter (a member's all at once, so that its `L` stays one). Variants that do not compile
//! are just failures of the predicate. Shrinking is greedy: the first
//! variant that still fails replaces the case, and the search goes on from
//! there until a whole round of variants passes.

use serde_json::Value as Json;

use crate::ast::{Block, Expr, ExprKind, InstanceForm, Program, Stmt, Ty};
use crate::case::{Case, InputValue, Limits};
use crate::generate::USUAL_LIMITS;

/// Gives up after this many calls of the predicate.
pub const MAX_CHECKS: usize = 4000;

/// The smallest case found that still satisfies `fails`.
pub fn shrink(case: &Case, mut fails: impl FnMut(&Case) -> bool) -> Case {
    let mut current = case.clone();
    let mut checks = 0;
    let mut start = 0;
    'rounds: loop {
        let variants = Variants::of(&current);
        let count = variants.len();
        for offset in 0..count {
            let index = (start + offset) % count;
            let Some(candidate) = variants.build(&current, index) else {
                continue;
            };
            if checks >= MAX_CHECKS {
                break 'rounds;
            }
            checks += 1;
            if fails(&candidate) {
                current = candidate;
                start = index;
                continue 'rounds;
            }
        }
        break;
    }
    current
}

/// A place in the program tree: a statement list or an expression.
enum Node<'a> {
    Stmts(&'a mut Vec<Stmt>),
    Expr(&'a mut Expr),
}

/// The edits available on one case, numbered.
struct Variants {
    functions: usize,
    /// The number of replacements at each node, in walk order.
    node_options: Vec<usize>,
    inputs: usize,
}

impl Variants {
    fn of(case: &Case) -> Variants {
        let mut program = case.program.clone();
        let mut node_options = Vec::new();
        walk_program(&mut program, &mut |node| {
            let options = match node {
                Node::Stmts(list) => stmt_list_variants(list).len(),
                Node::Expr(e) => expr_variants(e).len(),
            };
            node_options.push(options);
        });
        Variants {
            functions: case.program.functions.len().saturating_sub(1),
            node_options,
            inputs: input_variants(case).len(),
        }
    }

    fn len(&self) -> usize {
        self.functions + self.node_options.iter().sum::<usize>() + self.inputs
    }

    fn build(&self, case: &Case, mut index: usize) -> Option<Case> {
        if index < self.functions {
            let mut variant = case.clone();
            remove_function(&mut variant.program, index + 1);
            return Some(variant);
        }
        index -= self.functions;
        for (node, &options) in self.node_options.iter().enumerate() {
            if index < options {
                let mut variant = case.clone();
                edit_node(&mut variant.program, node, index);
                return Some(variant);
            }
            index -= options;
        }
        input_variants(case).into_iter().nth(index)
    }
}

/// Replaces node number `node` (walk order) by its `option`-th variant.
fn edit_node(program: &mut Program, node: usize, option: usize) {
    let mut seen = 0;
    walk_program(program, &mut |place| {
        if seen == node {
            match place {
                Node::Stmts(list) => {
                    if let Some(v) = stmt_list_variants(list).into_iter().nth(option) {
                        *list = v;
                    }
                }
                Node::Expr(e) => {
                    if let Some(v) = expr_variants(e).into_iter().nth(option) {
                        *e = v;
                    }
                }
            }
        }
        seen += 1;
    });
}

/// Drops function `index`; its calls (and the `join`, `map`, `pfor`,
/// `jacobian` and `grad` that name it) become constants of their types.
fn remove_function(program: &mut Program, index: usize) {
    let removed = program.functions.remove(index);
    let calls_removed = |e: &Expr| match &e.kind {
        ExprKind::Call { callee, .. }
        | ExprKind::Instances { callee, .. }
        | ExprKind::Jacobian {
            function: callee, ..
        }
        | ExprKind::Grad {
            function: callee, ..
        } => *callee == removed.name,
        _ => false,
    };
    walk_program(program, &mut |node| {
        if let Node::Expr(e) = node {
            let joins_removed =
                matches!(&e.kind, ExprKind::Join { calls, .. } if calls.iter().any(calls_removed));
            if calls_removed(e) || joins_removed {
                *e = e.ty.zero();
            }
        }
    });
}

/// Each statement dropped; each `if` replaced by either branch; each loop by its body.
fn stmt_list_variants(list: &[Stmt]) -> Vec<Vec<Stmt>> {
    let mut out = Vec::new();
    for i in 0..list.len() {
        let splice = |inner: &[Stmt]| {
            let mut v = list[..i].to_vec();
            v.extend_from_slice(inner);
            v.extend_from_slice(&list[i + 1..]);
            v
        };
        out.push(splice(&[]));
        match &list[i] {
            Stmt::If {
                then, otherwise, ..
            } => {
                out.push(splice(then));
                out.push(splice(otherwise));
            }
            Stmt::While { body, .. } | Stmt::For { body, .. } => out.push(splice(body)),
            _ => {}
        }
    }
    out
}

/// A constant of the same type, then each operand of the same type. (A
/// depth argument `d - k` is one node: it only becomes a constant, never
/// `d` or `d - 0`, which would make the recursion endless and the case a
/// case about limits.)
fn expr_variants(e: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    let zero = e.ty.zero();
    if *e != zero {
        out.push(zero);
    }
    let same_type = |child: &Expr| child.ty == e.ty;
    match &e.kind {
        ExprKind::Unary { operand, .. } | ExprKind::Cast { operand } => {
            out.extend(Some(operand.as_ref()).filter(|c| same_type(c)).cloned())
        }
        ExprKind::Binary { lhs, rhs, .. } => out.extend(
            [lhs.as_ref(), rhs.as_ref()]
                .into_iter()
                .filter(|c| same_type(c))
                .cloned(),
        ),
        ExprKind::Builtin { args, .. }
        | ExprKind::Call { args, .. }
        | ExprKind::HostCall { args, .. }
        | ExprKind::Library { args, .. } => {
            out.extend(args.iter().filter(|c| same_type(c)).cloned())
        }
        ExprKind::If {
            then, otherwise, ..
        } => out.extend(
            [then, otherwise]
                .into_iter()
                .filter(|b| b.stmts.is_empty())
                .map(|b| b.tail.clone()),
        ),
        ExprKind::Loop { exit, .. } => out.push(exit.as_ref().clone()),
        ExprKind::Slice {
            items, start, len, ..
        } => out.push(Expr::new(
            e.ty,
            ExprKind::Array(items.iter().skip(*start).take(*len).cloned().collect()),
        )),
        ExprKind::Catch { call, fallback } => {
            out.push(call.as_ref().clone());
            out.push(fallback.as_ref().clone());
        }
        ExprKind::Join { calls, picks } => out.extend(picks.iter().map(|&i| calls[i].clone())),
        _ => {}
    }
    out
}

/// Fewer members, shared instead of batched arguments, simpler values;
/// no statics; the generator's usual limits and seed 0.
fn input_variants(case: &Case) -> Vec<Case> {
    let mut out = setting_variants(case);
    out.extend(shorter_ragged(case));
    out.extend(narrower_inner(case));
    let members = case.inputs.members;
    if members > 1 {
        for m in 0..members {
            let mut variant = case.clone();
            variant.inputs.members -= 1;
            for arg in &mut variant.inputs.args {
                if let InputValue::Batched(values) = &mut arg.value {
                    values.remove(m);
                }
            }
            out.push(variant);
        }
    }
    for (a, arg) in case.inputs.args.iter().enumerate() {
        let InputValue::Batched(values) = &arg.value else {
            continue;
        };
        if values.windows(2).all(|w| w[0] == w[1]) {
            let mut variant = case.clone();
            variant.inputs.args[a].value = InputValue::Shared(values[0].clone());
            out.push(variant);
        }
        for (m, value) in values.iter().enumerate() {
            if let Some(simpler) = simpler_value(value) {
                let mut variant = case.clone();
                if let InputValue::Batched(vs) = &mut variant.inputs.args[a].value {
                    vs[m] = simpler;
                }
                out.push(variant);
            }
        }
    }
    out
}

/// Ragged arrays one element shorter, so that the lengths stay a valid
/// binding: a member's every ragged argument at once (when none is shared),
/// or every ragged value of the batch at once.
fn shorter_ragged(case: &Case) -> Vec<Case> {
    fn pop(_: Ty, value: &mut Json) -> bool {
        pop_last(value)
    }
    shortened(case, |ty| ty.is_ragged(), pop)
}

/// `[f64; D]` arrays one element shorter, and the rows of `[[f64; D]; L]`
/// arrays with them, so that each member's `D` stays one, as
/// [`shorter_ragged`] does for `L`.
fn narrower_inner(case: &Case) -> Vec<Case> {
    fn narrow(ty: Ty, value: &mut Json) -> bool {
        match (ty, value) {
            (Ty::ColsRagged, value) => pop_last(value),
            // Every row (no short circuit: the rows keep one width).
            (Ty::GridRagged, Json::Array(rows)) => {
                rows.iter_mut()
                    .map(pop_last)
                    .filter(|&popped| popped)
                    .count()
                    > 0
            }
            _ => false,
        }
    }
    shortened(
        case,
        |ty| matches!(ty, Ty::ColsRagged | Ty::GridRagged),
        narrow,
    )
}

/// Drops the last element of an array; whether there was one.
fn pop_last(value: &mut Json) -> bool {
    match value {
        Json::Array(items) => items.pop().is_some(),
        _ => false,
    }
}

/// Variants of `case` with `shorten` applied to the arguments whose type
/// `chosen` picks: for one member at a time (when none of them is
/// shared), and for the whole batch.
fn shortened(case: &Case, chosen: fn(Ty) -> bool, shorten: fn(Ty, &mut Json) -> bool) -> Vec<Case> {
    let args: Vec<usize> = (0..case.inputs.args.len())
        .filter(|&a| chosen(case.inputs.args[a].ty))
        .collect();
    if args.is_empty() {
        return Vec::new();
    }
    let apply = |variant: &mut Case, member: Option<usize>| -> bool {
        let mut changed = false;
        for &a in &args {
            let arg = &mut variant.inputs.args[a];
            let ty = arg.ty;
            let values: Vec<&mut Json> = match &mut arg.value {
                InputValue::Shared(v) => vec![v],
                InputValue::Batched(vs) => match member {
                    Some(m) => vs.get_mut(m).into_iter().collect(),
                    None => vs.iter_mut().collect(),
                },
            };
            for value in values {
                changed |= shorten(ty, value);
            }
        }
        changed
    };
    let any_shared = args
        .iter()
        .any(|&a| matches!(case.inputs.args[a].value, InputValue::Shared(_)));
    let mut out = Vec::new();
    if !any_shared {
        for m in 0..case.inputs.members {
            let mut variant = case.clone();
            if apply(&mut variant, Some(m)) {
                out.push(variant);
            }
        }
    }
    let mut variant = case.clone();
    if apply(&mut variant, None) {
        out.push(variant);
    }
    out
}

/// The case without statics, with the usual limits, with seed 0.
fn setting_variants(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    if !case.program.statics.is_empty() {
        let mut variant = case.clone();
        let statics = std::mem::take(&mut variant.program.statics);
        variant
            .inputs
            .args
            .retain(|arg| statics.iter().all(|s| s.name != arg.name));
        out.push(variant);
    }
    let usual = Limits {
        seed: 0,
        ..USUAL_LIMITS
    };
    for limits in [
        Limits {
            max_stack_depth: usual.max_stack_depth,
            ..case.limits
        },
        Limits {
            max_steps: usual.max_steps,
            ..case.limits
        },
        Limits {
            seed: usual.seed,
            ..case.limits
        },
    ] {
        if limits != case.limits {
            out.push(Case {
                limits,
                ..case.clone()
            });
        }
    }
    out
}

/// An integer one step closer to 0, a float or array of zeros.
fn simpler_value(value: &Json) -> Option<Json> {
    match value {
        Json::Number(n) if n.as_i64().is_some_and(|i| i != 0) => {
            let i = n.as_i64().unwrap_or(0);
            Some(Json::from(i - i.signum()))
        }
        Json::Number(n) if n.as_f64().is_some_and(|f| f != 0.0) => Some(Json::from(0.0)),
        Json::Array(items) => {
            let zeros: Vec<Json> = items
                .iter()
                .map(|i| simpler_value(i).map(|_| zero_like(i)).unwrap_or(i.clone()))
                .collect();
            (zeros != *items).then_some(Json::Array(zeros))
        }
        _ => None,
    }
}

fn zero_like(value: &Json) -> Json {
    match value {
        Json::Array(items) => Json::Array(items.iter().map(zero_like).collect()),
        Json::Number(n) if n.is_f64() => Json::from(0.0),
        _ => Json::from(0),
    }
}

// ---- the walk: every statement list and expression, parents first ----

fn walk_program(program: &mut Program, visit: &mut dyn FnMut(Node<'_>)) {
    for function in &mut program.functions {
        walk_block(&mut function.body, visit);
    }
}

fn walk_block(block: &mut Block, visit: &mut dyn FnMut(Node<'_>)) {
    walk_stmts(&mut block.stmts, visit);
    walk_expr(&mut block.tail, visit);
}

fn walk_stmts(stmts: &mut Vec<Stmt>, visit: &mut dyn FnMut(Node<'_>)) {
    visit(Node::Stmts(stmts));
    for stmt in stmts.iter_mut() {
        walk_stmt(stmt, visit);
    }
}

fn walk_stmt(stmt: &mut Stmt, visit: &mut dyn FnMut(Node<'_>)) {
    match stmt {
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } => walk_expr(value, visit),
        Stmt::SetIndex { index, value, .. } => {
            walk_expr(index, visit);
            walk_expr(value, visit);
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => {
            walk_expr(cond, visit);
            walk_stmts(then, visit);
            walk_stmts(otherwise, visit);
        }
        Stmt::While { limit, body, .. } => {
            walk_expr(limit, visit);
            walk_stmts(body, visit);
        }
        Stmt::For {
            start, end, body, ..
        } => {
            walk_expr(start, visit);
            walk_expr(end, visit);
            walk_stmts(body, visit);
        }
        Stmt::BreakIf { cond, value } => {
            walk_expr(cond, visit);
            if let Some(v) = value {
                walk_expr(v, visit);
            }
        }
        Stmt::ContinueIf { cond } | Stmt::Assert { cond } => walk_expr(cond, visit),
        Stmt::ReturnIf { cond, value } => {
            walk_expr(cond, visit);
            walk_expr(value, visit);
        }
    }
}

fn walk_expr(e: &mut Expr, visit: &mut dyn FnMut(Node<'_>)) {
    visit(Node::Expr(e));
    match &mut e.kind {
        ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Bool(_)
        | ExprKind::Var(_)
        | ExprKind::DepthStep(_)
        | ExprKind::Dim(_) => {}
        ExprKind::Fill(value) | ExprKind::Len(value) => walk_expr(value, visit),
        ExprKind::Unary { operand, .. } | ExprKind::Cast { operand } => walk_expr(operand, visit),
        ExprKind::Binary { lhs, rhs, .. } => {
            walk_expr(lhs, visit);
            walk_expr(rhs, visit);
        }
        ExprKind::Builtin { args, .. }
        | ExprKind::Call { args, .. }
        | ExprKind::HostCall { args, .. }
        | ExprKind::Library { args, .. }
        | ExprKind::Array(args) => args.iter_mut().for_each(|a| walk_expr(a, visit)),
        ExprKind::Catch { call, fallback } => {
            walk_expr(call, visit);
            walk_expr(fallback, visit);
        }
        // The calls of a `join` stay calls: only their arguments are edited.
        ExprKind::Join { calls, .. } => {
            for call in calls {
                if let ExprKind::Call { args, .. } = &mut call.kind {
                    args.iter_mut().for_each(|a| walk_expr(a, visit));
                }
            }
        }
        ExprKind::Instances { form, args, .. } => {
            match form {
                InstanceForm::Map { depths } => depths.iter_mut().for_each(|d| walk_expr(d, visit)),
                InstanceForm::MapRagged { depth } => walk_expr(depth, visit),
                InstanceForm::Pfor { .. } | InstanceForm::PforRagged => {}
            }
            args.iter_mut().for_each(|a| walk_expr(a, visit));
        }
        ExprKind::If {
            cond,
            then,
            otherwise,
        } => {
            walk_expr(cond, visit);
            walk_block(then, visit);
            walk_block(otherwise, visit);
        }
        ExprKind::Loop {
            limit, body, exit, ..
        } => {
            walk_expr(limit, visit);
            walk_stmts(body, visit);
            walk_expr(exit, visit);
        }
        ExprKind::Index { array, index } => {
            walk_expr(array, visit);
            walk_expr(index, visit);
        }
        ExprKind::Slice { items, .. } => items.iter_mut().for_each(|i| walk_expr(i, visit)),
        ExprKind::Pair(a, b) => {
            walk_expr(a, visit);
            walk_expr(b, visit);
        }
        ExprKind::Field { pair, .. } => walk_expr(pair, visit),
        ExprKind::Jacobian { point, data, .. } | ExprKind::Grad { point, data, .. } => {
            walk_expr(point, visit);
            data.iter_mut().for_each(|d| walk_expr(d, visit));
        }
    }
}
