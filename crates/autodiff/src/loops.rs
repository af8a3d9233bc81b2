//! Counted loops: unrolled when short, differentiated as two loops over a
//! tape when long (see the crate doc, "Counted loops").
//!
//! A *counted loop* of the function being differentiated is a header `H`
//! whose only operations compute `c = lt i, n` (and other inactive values),
//! branching to a straight-line body `B` that jumps back to `H` and to an
//! exit `X`; `H` has no predecessor besides `B` and one preheader `P`; `B`
//! increments the integer `i` by one exactly once; and `n` is a constant or
//! a symbolic dimension's value everywhere it is defined. Then the loop
//! runs at most `n` iterations, which gives its tape a type: `[T; n]`.

use std::collections::{BTreeSet, HashMap};

use autobatch_ir::{
    BinaryOp, Block, CompareOp, Dim, EntityRef, Function, Op, Prim, Scalar, ScalarType, TensorType,
    Terminator, Var,
};
use autobatch_types::Loc;

use crate::analysis::{merge_jump_chains, predecessor_counts};
use crate::block::{self, Builder, Known};
use crate::{rules, DeriveResult, Deriver};

/// The most iterations a loop with a constant count may have to be unrolled.
const UNROLL_TRIPS: u64 = 16;
/// The most operations unrolling one loop may produce.
const UNROLL_OPS: u64 = 400;

/// A counted loop of `g` (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct CountedLoop {
    pub header: Block,
    pub body: Block,
    pub exit: Block,
    /// Whether the header branches to the body when its condition holds
    /// (`for` loops) or when it does not.
    pub body_on_true: bool,
    pub counter: Var,
    /// The bound `n` as a dimension: the most iterations the loop runs.
    pub bound: Dim,
}

/// The counted loop whose header is `h`, if `h` heads one.
pub(crate) fn counted_loop(g: &Function, h: Block, preds: &[usize]) -> Option<CountedLoop> {
    let hd = &g.blocks[h];
    let Terminator::Branch {
        cond,
        then_block,
        else_block,
    } = hd.term
    else {
        return None;
    };
    let back = |blk: Block| {
        blk != h && preds[blk.index()] == 1 && g.blocks[blk].term == Terminator::Jump(h)
    };
    let (body, exit, body_on_true) = if back(then_block) && !back(else_block) {
        (then_block, else_block, true)
    } else if back(else_block) && !back(then_block) {
        (else_block, then_block, false)
    } else {
        return None;
    };
    if preds[h.index()] != 2 || exit == h || exit == body {
        return None;
    }
    // `cond = lt i, n`, the header's only definition of `cond`.
    let mut compare = None;
    for op in &hd.ops {
        if op.defs().contains(&cond) {
            if compare.is_some() {
                return None;
            }
            compare = Some(op);
        }
    }
    let Some(Op::Prim {
        prim: Prim::Compare(CompareOp::Lt),
        args,
        ..
    }) = compare
    else {
        return None;
    };
    let (counter, n) = (args[0], args[1]);
    let elem = g.vars[counter].ty.elem;
    if !matches!(elem, ScalarType::Usize | ScalarType::I64) || !g.vars[counter].ty.is_scalar() {
        return None;
    }
    // (The header may define `n`: every definition gives the same value.)
    if hd.ops.iter().any(|op| op.defs().contains(&counter)) {
        return None;
    }
    if !body_increments_once(g, body, counter) {
        return None;
    }
    let bound = constant_bound(g, n)?;
    // An i64 counter must start at zero or above for `n` to bound the trips.
    if elem == ScalarType::I64 && !starts_non_negative(g, counter, body) {
        return None;
    }
    let plain = g.blocks[body]
        .ops
        .iter()
        .all(|op| matches!(op, Op::Prim { .. } | Op::Call { catch: false, .. }));
    plain.then_some(CountedLoop {
        header: h,
        body,
        exit,
        body_on_true,
        counter,
        bound,
    })
}

/// Whether `body` defines `counter` once, as `counter = add counter, one`.
fn body_increments_once(g: &Function, body: Block, counter: Var) -> bool {
    let mut defs = g.blocks[body]
        .ops
        .iter()
        .filter(|op| op.defs().contains(&counter));
    let (Some(op), None) = (defs.next(), defs.next()) else {
        return false;
    };
    match op {
        Op::Prim {
            prim: Prim::Binary(BinaryOp::Add),
            args,
            ..
        } => args[0] == counter && constant_of(g, args[1]) == Some(1),
        _ => false,
    }
}

/// The value of an integer constant (`usize` or `i64`) that `op` loads.
fn integer_constant(op: &Op) -> Option<i128> {
    match op {
        Op::Prim {
            prim: Prim::Const(Scalar::Usize(c)),
            ..
        } => Some(*c as i128),
        Op::Prim {
            prim: Prim::Const(Scalar::I64(c)),
            ..
        } => Some(*c as i128),
        _ => None,
    }
}

/// What every definition of `v` in `g` gives by `value`, if each gives
/// something and all the same (and there is at least one definition).
fn same_everywhere<T: PartialEq>(
    g: &Function,
    v: Var,
    value: impl Fn(&Op) -> Option<T>,
) -> Option<T> {
    let mut common = None;
    for op in g.blocks.values().flat_map(|b| &b.ops) {
        if !op.defs().contains(&v) {
            continue;
        }
        let this = value(op)?;
        if common.as_ref().is_some_and(|c| *c != this) {
            return None;
        }
        common = Some(this);
    }
    common
}

/// The integer constant every definition of `v` in `g` gives, if they all
/// give the same one.
fn constant_of(g: &Function, v: Var) -> Option<i128> {
    same_everywhere(g, v, integer_constant)
}

/// `n` as a dimension: every definition of `n` is the same constant (not
/// negative) or the value of the same symbolic dimension.
fn constant_bound(g: &Function, n: Var) -> Option<Dim> {
    if let Some(c) = constant_of(g, n) {
        return (c >= 0).then_some(Dim::Fixed(c as u64));
    }
    same_everywhere(g, n, |op| match op {
        Op::Prim {
            prim: Prim::SymbolValue(s),
            ..
        } => Some(*s),
        _ => None,
    })
    .map(Dim::Symbolic)
}

/// Whether every definition of `counter` outside `body` is a constant of
/// zero or more (and it is not a parameter).
fn starts_non_negative(g: &Function, counter: Var, body: Block) -> bool {
    if g.params.contains(&counter) {
        return false;
    }
    g.blocks
        .iter()
        .filter(|(b, _)| *b != body)
        .flat_map(|(_, data)| &data.ops)
        .filter(|op| op.defs().contains(&counter))
        .all(|op| integer_constant(op).is_some_and(|c| c >= 0))
}

/// `g` with its short counted loops of constant count unrolled (innermost
/// first), and straight-line jump chains merged again.
pub(crate) fn unroll_short_loops(mut g: Function) -> Function {
    while let Some(unrolled) = unroll_one(&g) {
        g = merge_jump_chains(&unrolled);
    }
    g
}

/// `g` with one short counted loop unrolled, if it has one: the preheader
/// runs the header and the body as many times as the loop iterates, then
/// the header once more, and jumps to the exit. The same operations run in
/// the same order as in the loop.
fn unroll_one(g: &Function) -> Option<Function> {
    let preds = predecessor_counts(g);
    let reach = crate::analysis::reachable(g);
    for (h, _) in g.blocks.iter().filter(|(h, _)| reach[h.index()]) {
        let Some(lp) = counted_loop(g, h, &preds) else {
            continue;
        };
        let Dim::Fixed(n) = lp.bound else {
            continue;
        };
        let Some(pre) = preheader(g, &lp, &reach) else {
            continue;
        };
        let Some(start) = last_constant(g, pre, lp.counter) else {
            continue;
        };
        if !lp.body_on_true || start < 0 {
            continue;
        }
        let trips = n.saturating_sub(start as u64);
        let per_trip = (g.blocks[h].ops.len() + g.blocks[lp.body].ops.len()) as u64;
        if trips > UNROLL_TRIPS || trips * per_trip > UNROLL_OPS {
            continue;
        }
        let mut out = g.clone();
        let mut ops = Vec::new();
        for _ in 0..trips {
            ops.extend(g.blocks[h].ops.iter().cloned());
            ops.extend(g.blocks[lp.body].ops.iter().cloned());
        }
        ops.extend(g.blocks[h].ops.iter().cloned());
        out.blocks[pre].ops.extend(ops);
        out.blocks[pre].term = Terminator::Jump(lp.exit);
        return Some(out);
    }
    None
}

/// The loop's predecessor other than its body, when it only jumps to the header.
fn preheader(g: &Function, lp: &CountedLoop, reach: &[bool]) -> Option<Block> {
    g.blocks
        .iter()
        .find(|(b, data)| {
            reach[b.index()] && *b != lp.body && data.term.successors().contains(&lp.header)
        })
        .filter(|(_, data)| data.term == Terminator::Jump(lp.header))
        .map(|(b, _)| b)
}

/// The constant the last definition of `v` in block `blk` gives, if it is one.
fn last_constant(g: &Function, blk: Block, v: Var) -> Option<i128> {
    let op = g.blocks[blk]
        .ops
        .iter()
        .rev()
        .find(|op| op.defs().contains(&v))?;
    integer_constant(op)
}

/// Whether the counted loop `lp` of plan `p` is differentiated over a tape:
/// its header defines no active value.
pub(crate) fn tapeable(g: &Function, active: &[bool], lp: &CountedLoop) -> bool {
    let header_active = g.blocks[lp.header]
        .ops
        .iter()
        .flat_map(|op| op.defs())
        .any(|v| active[v.index()]);
    !header_active && lp.bound != Dim::Fixed(0)
}

/// The blocks of one emitted loop, and where the tape's operations go.
struct Emitted {
    /// The block where the loop is entered (tapes are created there).
    entry: Block,
    head: Block,
    body: Block,
    /// Where, in `body`, the forward operations end (the tape is written there).
    store_at: usize,
    /// The reverse loop's body, and where its reloads go.
    rev_body: Block,
    reload_at: usize,
    /// Blocks after this one were made by the reverse loop's rules.
    done: Block,
    /// The tape's position, one more after each iteration.
    t: Var,
    /// The state variables the body changes (their value at an
    /// iteration's start is taped).
    state: Vec<Var>,
}

/// Where the loop is entered: its state (its own copy of each of the
/// header's variables), the constants and the tape's position.
struct Entered {
    block: Block,
    state: HashMap<Var, Var>,
    zero: Var,
    one: Var,
    t: Var,
    known: Known,
}

/// The forward loop, as emitted.
struct Forward {
    head: Block,
    body: Block,
    exit: Block,
    /// The value of every variable of `g` after the header's operations,
    /// and after the body's.
    map_head: HashMap<Var, Var>,
    map_end: HashMap<Var, Var>,
    known_head: Known,
    known_body: Known,
    /// The body's operations as emitted, for their adjoints.
    records: Vec<Op>,
    store_at: usize,
}

/// The loop's variables: the header's live ones of `g`, and which carry adjoints.
struct LoopVars {
    live: Vec<Var>,
    active: Vec<Var>,
}

/// Emits the function of the header of the counted loop `lp` (plan `p`):
///
/// ```text
/// entry:    state = the header's variables; t = 0; tapes = zeros
/// head:     the header's operations; branch to body or exit
/// body:     the body's operations (fresh variables); tape[t] = the values
///           the adjoint reads; state = the body's new values; t += 1
/// exit:     continue with the exit (inline or a call), its adjoint;
///           dstate = the adjoints of the state
/// rev_head: while t > 0
/// rev_body: t -= 1; reload from tape[t]; the body's adjoint, from dstate
///           to the adjoints of the state at the iteration's start
/// done:     the adjoints of the header's variables are dstate
/// ```
///
/// Returns the variables holding the results.
pub(crate) fn emit_taped(
    d: &mut Deriver,
    p: usize,
    b: &mut Builder,
    lp: &CountedLoop,
    map_in: HashMap<Var, Var>,
    dres: &[Var],
) -> DeriveResult<Vec<Var>> {
    let plan = &d.plans[p];
    let loc = plan.g.blocks[lp.header].loc;
    let live = plan.live[lp.header.index()].clone();
    let active = live
        .iter()
        .copied()
        .filter(|v| plan.active[v.index()])
        .collect();
    let vars = LoopVars { live, active };
    let adj_outer = std::mem::take(&mut b.adj);
    let entered = enter(d, p, b, &vars, &map_in, loc)?;
    let fwd = forward(d, p, b, lp, &vars, &entered, loc);

    // exit: the rest of the function, forward and back.
    b.current = fwd.exit;
    b.known = fwd.known_head.clone();
    let exit_results = block::successor(d, p, b, lp.exit.index(), &fwd.map_head, dres)?;
    let results = exit_results.iter().map(|r| copied(b, *r, loc)).collect();
    let mut dstate = Vec::with_capacity(vars.active.len());
    for v in &vars.active {
        let value = b.adjoint_or_zero(entered.state[v], loc)?;
        let ds = copied(b, value, loc);
        b.func.vars[ds].name = b.func.vars[entered.state[v]]
            .name
            .as_ref()
            .map(|n| format!("d.{n}"));
        dstate.push(ds);
    }

    let (rev_body, reload_at, done) = reverse(d, b, &vars, &entered, &fwd, &dstate, loc)?;

    // done: the adjoints of the header's variables.
    b.current = done;
    b.known = entered.known.clone();
    b.adj = adj_outer;
    for (v, ds) in vars.active.iter().zip(&dstate) {
        b.accumulate(map_in[v], *ds, loc)?;
    }
    let emitted = Emitted {
        entry: entered.block,
        head: fwd.head,
        body: fwd.body,
        store_at: fwd.store_at,
        rev_body,
        reload_at,
        done,
        t: entered.t,
        state: vars
            .live
            .iter()
            .filter(|v| fwd.map_end[*v] != entered.state[*v])
            .map(|v| entered.state[v])
            .collect(),
    };
    write_tape(b, &emitted, lp.bound, loc);
    Ok(results)
}

/// A new variable holding a copy of `v`.
fn copied(b: &mut Builder, v: Var, loc: Loc) -> Var {
    let ty = b.ty(v).clone();
    let copy = b.var(ty, None, false);
    b.prim_into(copy, Prim::Copy, vec![v], loc);
    copy
}

/// Emits the loop's entry: `state = ` the header's variables, `t = 0`.
fn enter(
    d: &Deriver,
    p: usize,
    b: &mut Builder,
    vars: &LoopVars,
    map_in: &HashMap<Var, Var>,
    loc: Loc,
) -> DeriveResult<Entered> {
    let plan = &d.plans[p];
    let mut state = HashMap::new();
    for v in &vars.live {
        let data = plan.g.vars[*v].clone();
        let s = b.var(data.ty, data.name, plan.active[v.index()]);
        b.prim_into(s, Prim::Copy, vec![map_in[v]], loc);
        state.insert(*v, s);
    }
    let zero = b.prim(Prim::Const(Scalar::Usize(0)), Vec::new(), loc)?;
    let one = b.prim(Prim::Const(Scalar::Usize(1)), Vec::new(), loc)?;
    let t = b.var(
        TensorType::scalar(ScalarType::Usize),
        Some("tape.t".into()),
        false,
    );
    b.prim_into(t, Prim::Copy, vec![zero], loc);
    Ok(Entered {
        block: b.current,
        state,
        zero,
        one,
        t,
        known: b.known.clone(),
    })
}

/// Emits the forward loop: the header's operations, then the body's, the
/// state updated and `t` advanced at the end of each iteration.
fn forward(
    d: &Deriver,
    p: usize,
    b: &mut Builder,
    lp: &CountedLoop,
    vars: &LoopVars,
    entered: &Entered,
    loc: Loc,
) -> Forward {
    let plan = &d.plans[p];
    let header = &plan.g.blocks[lp.header];
    let Terminator::Branch { cond, .. } = header.term else {
        unreachable!("a counted loop's header branches");
    };
    let head = b.new_block(loc);
    b.terminate(Terminator::Jump(head));
    b.current = head;
    let mut map = entered.state.clone();
    block::emit_forward(plan, b, &header.ops, &mut map);
    let map_head = map.clone();
    let known_head = b.known.clone();
    let body = b.new_block(plan.g.blocks[lp.body].loc);
    let exit = b.new_block(plan.g.blocks[lp.exit].loc);
    let (then_block, else_block) = if lp.body_on_true {
        (body, exit)
    } else {
        (exit, body)
    };
    b.terminate(Terminator::Branch {
        cond: map[&cond],
        then_block,
        else_block,
    });
    b.current = body;
    let records = block::emit_forward(plan, b, &plan.g.blocks[lp.body].ops, &mut map);
    let known_body = b.known.clone();
    let store_at = b.func.blocks[body].ops.len();
    for v in &vars.live {
        if map[v] != entered.state[v] {
            b.prim_into(entered.state[v], Prim::Copy, vec![map[v]], loc);
        }
    }
    step_tape(b, entered, BinaryOp::Add, loc);
    b.terminate(Terminator::Jump(head));
    Forward {
        head,
        body,
        exit,
        map_head,
        map_end: map,
        known_head,
        known_body,
        records,
        store_at,
    }
}

/// `t = t + 1` (`op` is `Add`) or `t = t - 1` (`Sub`): the tape's
/// position moves to the next iteration, or back to the previous one.
fn step_tape(b: &mut Builder, entered: &Entered, op: BinaryOp, loc: Loc) {
    let moved = b.var(TensorType::scalar(ScalarType::Usize), None, false);
    b.prim_into(moved, Prim::Binary(op), vec![entered.t, entered.one], loc);
    b.prim_into(entered.t, Prim::Copy, vec![moved], loc);
}

/// Emits the reverse loop, from the current block: while `t > 0`, step
/// `t` back and run the body's adjoint, from the adjoints of the state at
/// the iteration's end (`dstate`) to those at its start. Returns the
/// reverse body, where its reloads go, and the block after the loop.
fn reverse(
    d: &mut Deriver,
    b: &mut Builder,
    vars: &LoopVars,
    entered: &Entered,
    fwd: &Forward,
    dstate: &[Var],
    loc: Loc,
) -> DeriveResult<(Block, usize, Block)> {
    let rev_head = b.new_block(loc);
    b.terminate(Terminator::Jump(rev_head));
    b.current = rev_head;
    let more = b.var(TensorType::scalar(ScalarType::Bool), None, false);
    b.prim_into(
        more,
        Prim::Compare(CompareOp::Lt),
        vec![entered.zero, entered.t],
        loc,
    );
    let rev_body = b.new_block(b.func.blocks[fwd.body].loc);
    let done = b.new_block(loc);
    b.terminate(Terminator::Branch {
        cond: more,
        then_block: rev_body,
        else_block: done,
    });
    b.current = rev_body;
    step_tape(b, entered, BinaryOp::Sub, loc);
    let reload_at = b.func.blocks[rev_body].ops.len();
    b.known = fwd.known_body.clone();
    b.adj = HashMap::new();
    for (v, ds) in vars.active.iter().zip(dstate) {
        b.accumulate(fwd.map_end[v], *ds, loc)?;
    }
    for op in fwd.records.iter().rev() {
        rules::adjoint(d, b, op)?;
    }
    for (v, ds) in vars.active.iter().zip(dstate) {
        let value = b.adjoint_or_zero(entered.state[v], loc)?;
        if value != *ds {
            b.prim_into(*ds, Prim::Copy, vec![value], loc);
        }
    }
    b.terminate(Terminator::Jump(rev_head));
    Ok((rev_body, reload_at, done))
}

/// Adds the tape. The reverse loop needs, at each iteration, the values
/// the forward iteration had: those it reads among the values the loop's
/// head and body define, and the loop's state at the iteration's start.
/// Cheap operations ([`remade`]) are run again from their operands; every
/// other value is written at `tape[t]` where the forward operations end
/// and read back where the reverse iteration starts. Running an operation
/// again on the same operands gives the same bits.
fn write_tape(b: &mut Builder, e: &Emitted, bound: Dim, loc: Loc) {
    // What the forward iteration defines: by variable, the operation that
    // can make it again, or `None` when it must be taped.
    let mut defined: HashMap<Var, (usize, Option<Op>)> = HashMap::new();
    let forward = b.func.blocks[e.head]
        .ops
        .iter()
        .chain(&b.func.blocks[e.body].ops[..e.store_at]);
    for (order, op) in forward.enumerate() {
        for v in op.defs() {
            let again = remade(op).then(|| op.clone());
            defined
                .entry(*v)
                .and_modify(|d| d.1 = None)
                .or_insert((order, again));
        }
    }
    for v in &e.state {
        defined.insert(*v, (0, None));
    }
    defined.remove(&e.t);
    let mut needed: Vec<Var> = Vec::new();
    for blk in b.func.blocks.iter().map(|(blk, _)| blk) {
        if blk != e.rev_body && blk.index() <= e.done.index() {
            continue;
        }
        let data = &b.func.blocks[blk];
        let uses = data
            .ops
            .iter()
            .flat_map(|op| op.uses())
            .chain(data.term.uses());
        needed.extend(uses.filter(|v| defined.contains_key(v)));
    }
    // Close over the operands of what is made again. An arithmetic value
    // is made again only from operands that are at hand (loop-invariant,
    // taped, constants or indexed values), not from a chain of arithmetic
    // (which would run the forward iteration twice): such a value is taped.
    let fixed = fixed_values(&defined);
    let arithmetic = |v: &Var| {
        !fixed.contains(v)
            && matches!(
                defined.get(v),
                Some((_, Some(Op::Prim { prim, .. }))) if is_arithmetic(prim)
            )
    };
    let mut taped: BTreeSet<Var> = BTreeSet::new();
    let mut again: BTreeSet<(usize, Var)> = BTreeSet::new();
    let mut seen: BTreeSet<Var> = BTreeSet::new();
    while let Some(v) = needed.pop() {
        if !seen.insert(v) {
            continue;
        }
        match &defined[&v] {
            (order, Some(op)) if !(arithmetic(&v) && op.uses().iter().any(&arithmetic)) => {
                again.insert((*order, v));
                needed.extend(op.uses().iter().filter(|u| defined.contains_key(u)));
            }
            _ => {
                taped.insert(v);
            }
        }
    }
    let mut creates = Vec::new();
    let mut stores = Vec::new();
    let mut reloads = Vec::new();
    for v in taped {
        let tape = new_tape(b, v, bound, loc, &mut creates);
        stores.push(prim_op(tape, Prim::IndexSet, vec![tape, e.t, v], loc));
        reloads.push(prim_op(v, Prim::Index, vec![tape, e.t], loc));
    }
    for (_, v) in again {
        reloads.push(defined[&v].1.clone().expect("made again"));
    }
    b.func.blocks[e.entry].ops.extend(creates);
    let body_ops = &mut b.func.blocks[e.body].ops;
    body_ops.splice(e.store_at..e.store_at, stores);
    let rev_ops = &mut b.func.blocks[e.rev_body].ops;
    rev_ops.splice(e.reload_at..e.reload_at, reloads);
}

/// Whether the reverse loop runs `op` again instead of taping its result:
/// operations that cost about as much as reading a tape (and cannot fail
/// where the forward run did not).
fn remade(op: &Op) -> bool {
    use autobatch_ir::UnaryOp;
    matches!(
        op,
        Op::Prim {
            dst: Some(_),
            prim: Prim::Const(_)
                | Prim::SymbolValue(_)
                | Prim::LoadStatic(_)
                | Prim::Copy
                | Prim::Index
                | Prim::Compare(_)
                | Prim::Unary(UnaryOp::Neg)
                | Prim::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul),
            ..
        }
    )
}

/// The values of an iteration that every iteration computes alike: made
/// again from constants, symbols' values, statics and loop-invariant
/// values only.
fn fixed_values(defined: &HashMap<Var, (usize, Option<Op>)>) -> BTreeSet<Var> {
    let mut ordered: Vec<(&usize, &Var, &Op)> = defined
        .iter()
        .filter_map(|(v, (order, op))| op.as_ref().map(|op| (order, v, op)))
        .collect();
    ordered.sort_by_key(|(order, v, _)| (**order, **v));
    let mut fixed = BTreeSet::new();
    for (_, v, op) in ordered {
        let operands_fixed = op
            .uses()
            .iter()
            .all(|u| fixed.contains(u) || !defined.contains_key(u));
        if operands_fixed {
            fixed.insert(*v);
        }
    }
    fixed
}

/// The operations [`remade`] that compute (as opposed to fetch) a value.
fn is_arithmetic(prim: &Prim) -> bool {
    matches!(prim, Prim::Compare(_) | Prim::Unary(_) | Prim::Binary(_))
}

/// A tape for `v` (`[T; bound]` where `v` is a `T`), filled with zeros by
/// the operations pushed onto `creates`.
fn new_tape(b: &mut Builder, v: Var, bound: Dim, loc: Loc, creates: &mut Vec<Op>) -> Var {
    let ty = b.ty(v).clone();
    let mut dims = ty.dims.clone();
    dims.insert(0, bound);
    let name = b.func.vars[v].name.as_ref().map(|n| format!("tape.{n}"));
    let tape = b.var(
        TensorType {
            elem: ty.elem,
            dims: dims.clone(),
        },
        name,
        false,
    );
    let mut value = b.var(TensorType::scalar(ty.elem), None, false);
    creates.push(prim_op(
        value,
        Prim::Const(Scalar::zero(ty.elem)),
        vec![],
        loc,
    ));
    for k in (0..dims.len()).rev() {
        let filled = if k == 0 {
            tape
        } else {
            let filled_ty = TensorType {
                elem: ty.elem,
                dims: dims[k..].to_vec(),
            };
            b.var(filled_ty, None, false)
        };
        creates.push(prim_op(filled, Prim::Fill(dims[k]), vec![value], loc));
        value = filled;
    }
    tape
}

fn prim_op(dst: Var, prim: Prim, args: Vec<Var>, loc: Loc) -> Op {
    Op::Prim {
        dst: Some(dst),
        prim,
        args,
        loc,
    }
}
