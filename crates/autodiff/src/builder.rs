//! Emitting the operations of a derived function: [`Builder`] keeps the
//! adjoints accumulated so far and the values already computed (so that
//! adjoint code reuses them), and sends the adjoints of differentiated
//! statics to the member's log.

use std::collections::HashMap;

use autobatch_ir::{
    AdjointKind, Block, BlockData, EntityRef, EntityVec, Function, Op, Param, Prim, Program,
    Scalar, ScalarType, TensorType, Terminator, Type, Var, VarData,
};
use autobatch_types::Loc;

use crate::{derive_error, DeriveResult};

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
        self.func.blocks.push(BlockData::new(
            Vec::new(),
            Terminator::Return(Vec::new()),
            loc,
        ))
    }
    pub fn terminate(&mut self, term: Terminator) {
        self.func.blocks[self.current].term = term;
    }
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
    let faults = faulting_operations(vars, ops);
    ops.iter()
        .zip(faults)
        .map(|(op, faults)| match op {
            Op::Prim {
                dst: Some(dst),
                prim,
                ..
            } => !used[dst.index()] && !prim.has_effect() && !faults,
            _ => false,
        })
        .collect()
}

/// Per operation of `ops` (a block's): whether it may fault
/// ([`Prim::may_fault_knowing`], knowing the integer constants the block
/// defined before it); a call or fork may.
pub(crate) fn faulting_operations(vars: &EntityVec<Var, VarData>, ops: &[Op]) -> Vec<bool> {
    let mut constants: HashMap<Var, i128> = HashMap::new();
    let mut faults = Vec::with_capacity(ops.len());
    for op in ops {
        faults.push(match op {
            Op::Prim { prim, args, .. } => {
                let types: Vec<&TensorType> = args.iter().map(|a| &vars[*a].ty).collect();
                prim.may_fault_knowing(&types, |i| constants.get(&args[i]).copied())
            }
            _ => true,
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
    faults
}
