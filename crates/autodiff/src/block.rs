//! Building the function of one block (see the crate doc): forward
//! operations with fresh variables, the call of the successor's function in
//! place of the terminator, then the adjoint operations in reverse.

use std::collections::HashMap;

use autobatch_ir::{
    AdjointKind, Block, BlockData, EntityRef, EntityVec, FuncId, Function, Op, Param, Prim,
    Program, Scalar, ScalarType, TensorType, Terminator, Type, Var, VarData,
};
use autobatch_types::Loc;

use crate::{derive_error, rules, DeriveResult, Deriver, Plan};

/// Emits operations into a function under construction.
pub(crate) struct Builder<'p> {
    pub program: &'p Program,
    pub func: Function,
    pub current: Block,
    /// Whether each variable of `func` carries an adjoint.
    pub active: Vec<bool>,
    /// The adjoint accumulated so far for a variable of `func`.
    pub adj: HashMap<Var, Var>,
    /// Values already computed at the current position, by operation, so
    /// that the adjoint code reuses forward values and its own instead of
    /// recomputing them; and which variables are negations of which.
    pub known: Known,
    /// By static: whether it is differentiated (`derive_static_gradient`).
    pub statics: Vec<bool>,
    /// The variables that hold a differentiated static or a row of one:
    /// their adjoints never accumulate; each contribution goes to the
    /// member's log at once ([`Builder::accumulate`]).
    pub views: HashMap<Var, View>,
}

/// A variable holding a differentiated static ([`Builder::views`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    /// The whole static.
    Whole(autobatch_ir::StaticId),
    /// Its row at the index held by the variable.
    Row(autobatch_ir::StaticId, Var),
}

/// See [`Builder::known`].
#[derive(Clone, Default)]
pub(crate) struct Known {
    values: HashMap<(String, Vec<Var>), Var>,
    negations: HashMap<Var, Var>,
    /// Variables holding a float constant.
    constants: HashMap<Var, f64>,
}

/// Whether two evaluations of `prim` on the same operands give the same value.
fn reusable(prim: &Prim) -> bool {
    !prim.has_effect()
}

impl Known {
    fn key(prim: &Prim, args: &[Var]) -> (String, Vec<Var>) {
        (format!("{prim:?}"), args.to_vec())
    }
    /// Records that `dst` holds `prim(args)`.
    pub fn record(&mut self, dst: Var, prim: &Prim, args: &[Var]) {
        if !reusable(prim) {
            return;
        }
        self.values.entry(Self::key(prim, args)).or_insert(dst);
        if *prim == Prim::Unary(autobatch_ir::UnaryOp::Neg) {
            self.negations.insert(dst, args[0]);
        }
        match prim {
            Prim::Const(Scalar::F64(c)) => {
                self.constants.insert(dst, *c);
            }
            Prim::Const(Scalar::F32(c)) => {
                self.constants.insert(dst, *c as f64);
            }
            _ => {}
        }
    }
    /// The value of `v` when it holds a float constant.
    pub fn constant_of(&self, v: Var) -> Option<f64> {
        self.constants.get(&v).copied()
    }
    /// `w` when `v` holds `-w`.
    pub fn negation_of(&self, v: Var) -> Option<Var> {
        self.negations.get(&v).copied()
    }
    pub fn lookup(&self, prim: &Prim, args: &[Var]) -> Option<Var> {
        if !reusable(prim) {
            return None;
        }
        if *prim == Prim::Unary(autobatch_ir::UnaryOp::Neg) {
            if let Some(v) = self.negations.get(&args[0]) {
                return Some(*v);
            }
        }
        self.values.get(&Self::key(prim, args)).copied()
    }
}

impl<'p> Builder<'p> {
    /// A builder of an empty function named `name` (declared at `loc`) with
    /// one block (opened at `block_loc`), no parameters and no results.
    pub fn new(program: &'p Program, name: String, loc: Loc, block_loc: Loc) -> Builder<'p> {
        let mut b = Builder {
            program,
            func: Function {
                name,
                signature: Vec::new(),
                ret_type: Type::Tuple(Vec::new()),
                params: Vec::new(),
                results: Vec::new(),
                vars: Default::default(),
                blocks: Default::default(),
                loc,
                uncounted: false,
            },
            current: Block(0),
            active: Vec::new(),
            adj: HashMap::new(),
            known: Known::default(),
            statics: Vec::new(),
            views: HashMap::new(),
        };
        b.new_block(block_loc);
        b
    }
    /// Adds a parameter of type `ty` named `name` (inactive).
    pub fn param(&mut self, ty: TensorType, name: String) -> Var {
        let v = self.var(ty.clone(), Some(name.clone()), false);
        self.func.params.push(v);
        self.func.signature.push(Param {
            name,
            ty: Type::Tensor(ty),
        });
        v
    }
    /// Ends the current block by returning `vars`, which become the
    /// function's results.
    pub fn return_vars(&mut self, vars: Vec<Var>) {
        self.func.results = vars.iter().map(|v| self.ty(*v).clone()).collect();
        self.func.ret_type = self.func.flat_ret_type();
        self.terminate(Terminator::Return(vars));
    }
    pub fn var(&mut self, ty: TensorType, name: Option<String>, active: bool) -> Var {
        self.active.push(active);
        self.func.vars.push(VarData { ty, name })
    }
    pub fn ty(&self, v: Var) -> &TensorType {
        &self.func.vars[v].ty
    }
    pub fn push(&mut self, op: Op) {
        self.note_view(&op);
        self.func.blocks[self.current].ops.push(op);
    }
    /// Records in [`Builder::views`] a load of a differentiated static, or
    /// a row read of one.
    fn note_view(&mut self, op: &Op) {
        let Op::Prim {
            dst: Some(dst),
            prim,
            args,
            ..
        } = op
        else {
            return;
        };
        let view = match prim {
            Prim::LoadStatic(id) if self.statics.get(id.0 as usize) == Some(&true) => {
                View::Whole(*id)
            }
            Prim::Index => match self.views.get(&args[0]) {
                Some(View::Whole(id)) => View::Row(*id, args[1]),
                _ => return,
            },
            _ => return,
        };
        self.views.insert(*dst, view);
    }
    /// What `v` holds of a differentiated static, if anything.
    pub fn view(&self, v: Var) -> Option<View> {
        self.views.get(&v).copied()
    }
    /// Records the contribution `outer(u, w)` to the matrix `m` holds, when
    /// `m` holds a differentiated static or a row of one (a matrix): true
    /// if it did.
    pub fn record_outer(&mut self, m: Var, u: Var, w: Var, loc: Loc) -> bool {
        if self.ty(m).dims.len() != 2 {
            return false;
        }
        match self.view(m) {
            Some(View::Whole(id)) => self.record_adjoint(id, AdjointKind::Outer, vec![u, w], loc),
            Some(View::Row(id, i)) => {
                self.record_adjoint(id, AdjointKind::OuterRow, vec![i, u, w], loc)
            }
            None => return false,
        }
        true
    }
    /// Appends `prim` (a contribution to a static's adjoint) to the block.
    pub fn record_adjoint(
        &mut self,
        id: autobatch_ir::StaticId,
        kind: autobatch_ir::AdjointKind,
        args: Vec<Var>,
        loc: Loc,
    ) {
        self.push(Op::Prim {
            dst: None,
            prim: Prim::StaticAdjoint(autobatch_ir::StaticAdjoint { id, kind }),
            args,
            loc,
        });
    }
    /// The type of `prim` applied to `args`.
    fn result_type(&self, prim: &Prim, args: &[Var], loc: Loc) -> DeriveResult<Option<TensorType>> {
        let tys: Vec<&TensorType> = args.iter().map(|a| &self.func.vars[*a].ty).collect();
        let statics = |s| self.program.static_type(s);
        match prim.result_type(&tys, &statics) {
            Ok(t) => Ok(t),
            Err(m) => derive_error(format!("autodiff produced an ill-typed `{prim}`: {m}"), loc),
        }
    }
    /// `dst = prim(args)` into a new inactive variable, or the variable that
    /// already holds that value here.
    pub fn prim(&mut self, prim: Prim, args: Vec<Var>, loc: Loc) -> DeriveResult<Var> {
        if let Some(v) = self.known.lookup(&prim, &args) {
            return Ok(v);
        }
        if let Some(v) = self.simplify(&prim, &args, loc)? {
            return Ok(v);
        }
        let Some(ty) = self.result_type(&prim, &args, loc)? else {
            return derive_error(format!("`{prim}` has no result"), loc);
        };
        let dst = self.var(ty, None, false);
        self.known.record(dst, &prim, &args);
        self.push(Op::Prim {
            dst: Some(dst),
            prim,
            args,
            loc,
        });
        Ok(dst)
    }
    /// Rewrites that give the same bits and save an operation (over a
    /// whole array, often): `1·a = a·1 = a`, `-1·a = -a`, `a + -b = a - b`,
    /// `-a + b = b - a`, and `-c` of a constant `c` is a constant.
    fn simplify(&mut self, prim: &Prim, args: &[Var], loc: Loc) -> DeriveResult<Option<Var>> {
        use autobatch_ir::{BinaryOp as B, UnaryOp as U};
        match prim {
            Prim::Binary(B::Mul) => {
                for (c, a) in [(args[0], args[1]), (args[1], args[0])] {
                    if !self.ty(c).is_scalar() || self.ty(c).elem != self.ty(a).elem {
                        continue;
                    }
                    match self.known.constant_of(c) {
                        Some(1.0) => return Ok(Some(a)),
                        Some(-1.0) => {
                            return self.prim(Prim::Unary(U::Neg), vec![a], loc).map(Some)
                        }
                        _ => {}
                    }
                }
            }
            Prim::Binary(B::Add) => {
                if let Some(b) = self.known.negation_of(args[1]) {
                    return self
                        .prim(Prim::Binary(B::Sub), vec![args[0], b], loc)
                        .map(Some);
                }
                if let Some(a) = self.known.negation_of(args[0]) {
                    return self
                        .prim(Prim::Binary(B::Sub), vec![args[1], a], loc)
                        .map(Some);
                }
            }
            Prim::Unary(U::Neg) => {
                let x = args[0];
                if let (Some(c), true) = (self.known.constant_of(x), self.ty(x).is_scalar()) {
                    let elem = self.ty(x).elem;
                    return self.constant(elem, -c, loc).map(Some);
                }
            }
            _ => {}
        }
        Ok(None)
    }
    /// `dst = prim(args)` into the given variable.
    pub fn prim_into(&mut self, dst: Var, prim: Prim, args: Vec<Var>, loc: Loc) {
        self.push(Op::Prim {
            dst: Some(dst),
            prim,
            args,
            loc,
        });
    }
    pub fn constant(&mut self, elem: ScalarType, value: f64, loc: Loc) -> DeriveResult<Var> {
        let s = match elem {
            ScalarType::F32 => Scalar::F32(value as f32),
            ScalarType::F64 => Scalar::F64(value),
            ScalarType::I32 => Scalar::I32(value as i32),
            ScalarType::I64 => Scalar::I64(value as i64),
            ScalarType::Usize => Scalar::Usize(value as u64),
            ScalarType::Bool => Scalar::Bool(value != 0.0),
        };
        self.prim(Prim::Const(s), Vec::new(), loc)
    }
    /// A value of type `ty` filled with `value` (zeros, ones).
    pub fn filled(&mut self, ty: &TensorType, value: f64, loc: Loc) -> DeriveResult<Var> {
        let mut v = self.constant(ty.elem, value, loc)?;
        for d in ty.dims.iter().rev() {
            v = self.prim(Prim::Fill(*d), vec![v], loc)?;
        }
        Ok(v)
    }
    /// Adds `contribution` to the adjoint of `v` (the first one is taken as
    /// is); for a variable holding a differentiated static (or a row of
    /// one), appends the contribution to the member's log instead.
    pub fn accumulate(&mut self, v: Var, contribution: Var, loc: Loc) -> DeriveResult<()> {
        if let Some(view) = self.views.get(&v).copied() {
            let c = self.full(v, contribution, loc)?;
            match view {
                View::Whole(id) => self.record_adjoint(id, AdjointKind::Dense, vec![c], loc),
                View::Row(id, i) => self.record_adjoint(id, AdjointKind::Row, vec![i, c], loc),
            }
            return Ok(());
        }
        let sum = match self.adj.get(&v) {
            None => contribution,
            Some(old) => {
                let old = *old;
                self.prim(
                    Prim::Binary(autobatch_ir::BinaryOp::Add),
                    vec![old, contribution],
                    loc,
                )?
            }
        };
        self.adj.insert(v, sum);
        Ok(())
    }
    /// `adjoint` (an adjoint of `v`) with `v`'s own type. An array's adjoint
    /// may be held as a scalar that stands for that scalar broadcast over the
    /// array (the adjoint of `sum`, of a scalar seed): elementwise rules use
    /// it as it is, which saves filling and reading a whole array; this fills
    /// it out where a full array is needed (products, indexing, results).
    pub fn full(&mut self, v: Var, adjoint: Var, loc: Loc) -> DeriveResult<Var> {
        let ty = self.ty(v).clone();
        if ty.is_scalar() || !self.ty(adjoint).is_scalar() {
            return Ok(adjoint);
        }
        let mut a = adjoint;
        for d in ty.dims.iter().rev() {
            a = self.prim(Prim::Fill(*d), vec![a], loc)?;
        }
        Ok(a)
    }
    /// The adjoint of `v`, zero when nothing contributed to it, with `v`'s type.
    pub fn adjoint_or_zero(&mut self, v: Var, loc: Loc) -> DeriveResult<Var> {
        match self.adj.get(&v).copied() {
            Some(a) => {
                let a = self.full(v, a, loc)?;
                self.adj.insert(v, a);
                Ok(a)
            }
            None => {
                let ty = self.ty(v).clone();
                self.filled(&ty, 0.0, loc)
            }
        }
    }
    pub fn new_block(&mut self, loc: Loc) -> Block {
        self.func.blocks.push(BlockData {
            ops: Vec::new(),
            term: Terminator::Return(Vec::new()),
            loc,
        })
    }
    pub fn terminate(&mut self, term: Terminator) {
        self.func.blocks[self.current].term = term;
    }
}

fn adjoint_name(name: &Option<String>) -> Option<String> {
    name.as_ref().map(|n| format!("d.{n}"))
}

/// The function of block `block` of plan `p`.
pub(crate) fn build(d: &mut Deriver, p: usize, block: usize) -> DeriveResult<Function> {
    let plan = &d.plans[p];
    let g = &plan.g;
    let bdata = g.blocks[Block::new(block)].clone();
    let loc = bdata.loc;
    let mut b = Builder::new(d.program, plan.names[block].clone(), g.loc, loc);
    b.statics = d.sources.statics.clone();
    // Parameters: the block's variables, then the result adjoints.
    let mut map: HashMap<Var, Var> = HashMap::new();
    let mut param_of: Vec<(Var, Var)> = Vec::new();
    for v in &plan.live[block] {
        let data = &g.vars[*v];
        let nv = b.var(data.ty.clone(), data.name.clone(), plan.active[v.index()]);
        b.func.params.push(nv);
        b.func.signature.push(Param {
            name: data.name.clone().unwrap_or_else(|| format!("{v}")),
            ty: Type::Tensor(data.ty.clone()),
        });
        map.insert(*v, nv);
        param_of.push((*v, nv));
    }
    let mut dres = Vec::new();
    for (k, i) in plan.float_results.iter().enumerate() {
        let ty = g.results[*i].clone();
        if plan.seed_one && block == 0 {
            // `grad`: the result's adjoint is one.
            dres.push(b.filled(&ty, 1.0, loc)?);
            continue;
        }
        let nv = b.var(ty.clone(), Some(format!("d.result{k}")), false);
        b.func.params.push(nv);
        b.func.signature.push(Param {
            name: format!("d.result{k}"),
            ty: Type::Tensor(ty),
        });
        dres.push(nv);
    }
    let result_types = plan.result_types(block);
    b.func.results = result_types.clone();
    b.func.ret_type = Type::Tuple(result_types.iter().cloned().map(Type::Tensor).collect());

    let results = emit(d, p, &mut b, block, map, &dres)?;

    // Return the results and the adjoints of the block's active variables.
    let mut out = results;
    let plan = &d.plans[p];
    for v in plan.adj_in[block].clone() {
        let pv = param_of
            .iter()
            .find(|(g_var, _)| *g_var == v)
            .map(|(_, nv)| *nv)
            .expect("active variables are parameters");
        out.push(b.adjoint_or_zero(pv, loc)?);
    }
    b.terminate(Terminator::Return(out));
    let mut func = b.func;
    remove_unused_operations(&mut func);
    crate::analysis::update_in_place(&mut func);
    Ok(func)
}

/// Drops the primitive operations whose result nothing reads (forward
/// values the adjoint did not need, negations folded into a subtraction),
/// until none is left. Kept are those with an effect besides their result
/// (asserts, random draws) and those that may fault (an integer division,
/// indexing, ...: [`Prim::may_fault_knowing`]), so that the derived
/// function stops with the error its function would stop with, where it
/// would.
pub(crate) fn remove_unused_operations(func: &mut Function) {
    loop {
        let mut used = vec![false; func.vars.len()];
        for block in func.blocks.values() {
            for op in &block.ops {
                for v in op.uses() {
                    used[v.index()] = true;
                }
            }
            for v in block.term.uses() {
                used[v.index()] = true;
            }
        }
        let mut removed = false;
        let vars = &func.vars;
        for block in func.blocks.values_mut() {
            let removable = removable_operations(vars, &block.ops, &used);
            let mut k = 0;
            block.ops.retain(|_| {
                k += 1;
                !removable[k - 1]
            });
            removed |= removable.contains(&true);
        }
        if !removed {
            return;
        }
    }
}

/// Per operation of `ops` (a block's): whether it may be removed, its
/// result unread (`used` by variable), without an effect and unable to
/// fault, knowing the integer constants the block defined before it.
fn removable_operations(vars: &EntityVec<Var, VarData>, ops: &[Op], used: &[bool]) -> Vec<bool> {
    let mut constants: HashMap<Var, i128> = HashMap::new();
    let mut removable = Vec::with_capacity(ops.len());
    for op in ops {
        removable.push(match op {
            Op::Prim {
                dst: Some(dst),
                prim,
                args,
                ..
            } if !used[dst.index()] && !prim.has_effect() => {
                let types: Vec<&TensorType> = args.iter().map(|a| &vars[*a].ty).collect();
                !prim.may_fault_knowing(&types, |i| constants.get(&args[i]).copied())
            }
            _ => false,
        });
        for d in op.defs() {
            constants.remove(d);
        }
        if let Op::Prim {
            dst: Some(d),
            prim: Prim::Const(c),
            ..
        } = op
        {
            let value = match c {
                Scalar::I32(c) => Some(i128::from(*c)),
                Scalar::I64(c) => Some(i128::from(*c)),
                Scalar::Usize(c) => Some(i128::from(*c)),
                _ => None,
            };
            if let Some(value) = value {
                constants.insert(*d, value);
            }
        }
    }
    removable
}

/// Emits block `block` of plan `p` at the current position of `b`, where
/// `map` gives the current value of every variable of the original
/// function: its operations (fresh variables), its terminator (a call of
/// the successor's function, or the successor inlined when this block is its
/// only predecessor), then its adjoint operations in reverse. Returns the
/// variables holding the original function's results.
fn emit(
    d: &mut Deriver,
    p: usize,
    b: &mut Builder,
    block: usize,
    mut map: HashMap<Var, Var>,
    dres: &[Var],
) -> DeriveResult<Vec<Var>> {
    if let Some(lp) = d.plans[p].loops[block].clone() {
        return crate::loops::emit_taped(d, p, b, &lp, map, dres);
    }
    let bdata = d.plans[p].g.blocks[Block::new(block)].clone();
    let loc = bdata.loc;
    let records = emit_forward(&d.plans[p], b, &bdata.ops, &mut map);
    let results: Vec<Var> = match &bdata.term {
        Terminator::Return(vs) => {
            let out: Vec<Var> = vs.iter().map(|v| map[v]).collect();
            let float_results = d.plans[p].float_results.clone();
            for (k, i) in float_results.iter().enumerate() {
                let v = out[*i];
                if b.active[v.index()] {
                    b.accumulate(v, dres[k], loc)?;
                }
            }
            out
        }
        Terminator::Jump(c) => successor(d, p, b, c.index(), &map, dres)?,
        Terminator::Branch {
            cond,
            then_block,
            else_block,
        } => {
            let branch = Branch {
                cond: map[cond],
                then_block: *then_block,
                else_block: *else_block,
                loc,
            };
            emit_branch(d, p, b, branch, &map, dres)?
        }
    };
    // Backward: the adjoint of every operation, in reverse order.
    for op in records.iter().rev() {
        rules::adjoint(d, b, op)?;
    }
    Ok(results)
}

/// Forward: emits `ops` (operations of `plan.g`) with every definition a
/// fresh variable, recorded in `map`; returns the operations emitted, for
/// the backward pass.
pub(crate) fn emit_forward(
    plan: &Plan,
    b: &mut Builder,
    ops: &[Op],
    map: &mut HashMap<Var, Var>,
) -> Vec<Op> {
    let mut records: Vec<Op> = Vec::with_capacity(ops.len());
    for op in ops {
        let args: Vec<Var> = op.uses().iter().map(|v| map[v]).collect();
        let mut defs = Vec::new();
        for v in op.defs() {
            let data = &plan.g.vars[*v];
            let nv = b.var(data.ty.clone(), data.name.clone(), plan.active[v.index()]);
            defs.push(nv);
        }
        for (v, nv) in op.defs().iter().zip(&defs) {
            map.insert(*v, *nv);
        }
        let new_op = match op {
            Op::Prim { prim, loc, .. } => Op::Prim {
                dst: defs.first().copied(),
                prim: prim.clone(),
                args,
                loc: *loc,
            },
            Op::Call {
                callee, loc, catch, ..
            } => Op::Call {
                dsts: defs,
                callee: *callee,
                args,
                loc: *loc,
                catch: *catch,
            },
            Op::Fork {
                instances,
                loc,
                tape,
                ..
            } => Op::Fork {
                dsts: defs,
                args,
                instances: instances.clone(),
                loc: *loc,
                tape: *tape,
            },
        };
        if let Op::Prim {
            dst: Some(dst),
            prim,
            args,
            ..
        } = &new_op
        {
            b.known.record(*dst, prim, args);
        }
        b.push(new_op.clone());
        records.push(new_op);
    }
    records
}

/// What holds where a branch starts; each arm starts from it.
struct BranchStart {
    /// The adjoints that exist before the branch; each arm adds to them.
    adj: HashMap<Var, Var>,
    /// Values computed in one arm are not available in the other or after.
    known: Known,
    /// The variables defined before the branch are those below this index.
    visible: usize,
}

/// Where one arm of a branch ends, with the adjoints it leaves.
struct ArmEnd {
    block: Block,
    adj: HashMap<Var, Var>,
}

/// A branch of `g` to emit: its condition (a variable of the function
/// being built), its targets (blocks of `g`), and where it is.
struct Branch {
    cond: Var,
    then_block: Block,
    else_block: Block,
    loc: Loc,
}

/// Emits `branch`: each arm continues with its successor and copies the
/// results into shared variables; then the arms meet in a join block,
/// where the adjoints either arm changed meet in shared variables too.
/// Returns the result variables.
fn emit_branch(
    d: &mut Deriver,
    p: usize,
    b: &mut Builder,
    branch: Branch,
    map: &HashMap<Var, Var>,
    dres: &[Var],
) -> DeriveResult<Vec<Var>> {
    let Branch {
        cond,
        then_block,
        else_block,
        loc,
    } = branch;
    let result_types = d.plans[p].g.results.clone();
    let res: Vec<Var> = result_types
        .into_iter()
        .map(|t| b.var(t, None, false))
        .collect();
    let bt = b.new_block(d.plans[p].g.blocks[then_block].loc);
    let be = b.new_block(d.plans[p].g.blocks[else_block].loc);
    let join = b.new_block(loc);
    b.terminate(Terminator::Branch {
        cond,
        then_block: bt,
        else_block: be,
    });
    let start = BranchStart {
        adj: b.adj.clone(),
        known: b.known.clone(),
        visible: b.func.vars.len(),
    };
    let mut ends = Vec::new();
    for (arm, succ) in [(bt, then_block), (be, else_block)] {
        b.current = arm;
        b.adj = start.adj.clone();
        b.known = start.known.clone();
        let arm_res = successor(d, p, b, succ.index(), map, dres)?;
        for (r, a) in res.iter().zip(&arm_res) {
            b.prim_into(*r, Prim::Copy, vec![*a], loc);
        }
        ends.push(ArmEnd {
            block: b.current,
            adj: std::mem::take(&mut b.adj),
        });
    }
    join_arms(b, start, &ends, join, loc)?;
    Ok(res)
}

/// Ends both arms of a branch with a jump to `join`, the adjoints either arm
/// changed, of variables defined before the branch, copied into shared
/// variables that hold them from `join` on.
fn join_arms(
    b: &mut Builder,
    start: BranchStart,
    ends: &[ArmEnd],
    join: Block,
    loc: Loc,
) -> DeriveResult<()> {
    let mut changed: Vec<Var> = Vec::new();
    for end in ends {
        for (k, v) in &end.adj {
            if k.index() < start.visible && start.adj.get(k) != Some(v) && !changed.contains(k) {
                changed.push(*k);
            }
        }
    }
    changed.sort();
    let shared: Vec<Var> = changed
        .iter()
        .map(|k| {
            let ty = b.ty(*k).clone();
            let name = adjoint_name(&b.func.vars[*k].name);
            b.var(ty, name, false)
        })
        .collect();
    for end in ends {
        b.current = end.block;
        b.known = start.known.clone();
        for (k, u) in changed.iter().zip(&shared) {
            let value = match end.adj.get(k).or_else(|| start.adj.get(k)) {
                Some(v) => b.full(*k, *v, loc)?,
                None => {
                    let ty = b.ty(*k).clone();
                    b.filled(&ty, 0.0, loc)?
                }
            };
            b.prim_into(*u, Prim::Copy, vec![value], loc);
        }
        b.terminate(Terminator::Jump(join));
    }
    b.current = join;
    b.adj = start.adj;
    b.known = start.known;
    for (k, u) in changed.iter().zip(&shared) {
        b.adj.insert(*k, *u);
    }
    Ok(())
}

/// Continues with block `succ`: inline when this is its only predecessor,
/// else by calling its function and adding the adjoints it returns.
pub(crate) fn successor(
    d: &mut Deriver,
    p: usize,
    b: &mut Builder,
    succ: usize,
    map: &HashMap<Var, Var>,
    dres: &[Var],
) -> DeriveResult<Vec<Var>> {
    if d.plans[p].inline[succ] {
        return emit(d, p, b, succ, map.clone(), dres);
    }
    let outputs = successor_call(d, p, b, succ, map, dres)?;
    let loc = d.plans[p].g.blocks[Block::new(succ)].loc;
    for (v, a) in d.plans[p].adj_in[succ].clone().iter().zip(outputs.adjoints) {
        b.accumulate(map[v], a, loc)?;
    }
    Ok(outputs.results)
}

/// What the call of a block's function gives.
struct SuccessorOutputs {
    /// The results of `g`.
    results: Vec<Var>,
    /// The adjoints of the block's active variables.
    adjoints: Vec<Var>,
}

/// Calls the function of block `succ` with the current values of its
/// variables.
fn successor_call(
    d: &mut Deriver,
    p: usize,
    b: &mut Builder,
    succ: usize,
    map: &HashMap<Var, Var>,
    dres: &[Var],
) -> DeriveResult<SuccessorOutputs> {
    let plan = &d.plans[p];
    let loc = plan.g.blocks[Block::new(succ)].loc;
    let Some(callee) = plan.ids[succ] else {
        return derive_error("a jump to an unreachable block", loc);
    };
    let mut args = Vec::new();
    for v in &plan.live[succ] {
        match map.get(v) {
            Some(nv) => args.push(*nv),
            None => {
                return derive_error(
                    format!("{v} is live into block b{succ} but has no value"),
                    loc,
                )
            }
        }
    }
    args.extend(dres.iter().copied());
    let types = plan.result_types(succ);
    let n_results = plan.g.results.len();
    let dsts: Vec<Var> = types.into_iter().map(|t| b.var(t, None, false)).collect();
    b.push(Op::Call {
        dsts: dsts.clone(),
        callee,
        args,
        loc,
        catch: false,
    });
    Ok(SuccessorOutputs {
        results: dsts[..n_results].to_vec(),
        adjoints: dsts[n_results..].to_vec(),
    })
}

/// The vjp of a callee with respect to some of its parameters: its id and
/// what its call needs (see the crate doc).
pub(crate) struct CalleeVjp {
    pub id: FuncId,
    /// Its name (`f'vjp`, `f'vjp@10`).
    pub name: String,
    /// The callee's results, then the adjoints of its active parameters.
    pub result_types: Vec<TensorType>,
    /// The callee's float results, each of which the vjp takes an adjoint for.
    pub float_results: Vec<usize>,
}

/// The vjp of `callee` with respect to `active` (planned if new).
pub(crate) fn callee_vjp(
    d: &mut Deriver,
    callee: FuncId,
    active: &[bool],
) -> DeriveResult<CalleeVjp> {
    let p = d.plan(callee, active, false)?;
    let plan = &d.plans[p];
    Ok(CalleeVjp {
        id: plan.ids[0].expect("the entry block is reachable"),
        name: plan.names[0].clone(),
        result_types: plan.result_types(0),
        float_results: plan.float_results.clone(),
    })
}
