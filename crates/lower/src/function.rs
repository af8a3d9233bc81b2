//! Lowering of one function instance: HIR expressions and statements to
//! basic blocks of IR operations.
//!
//! Each local of the function owns fixed variables (several for a tuple);
//! `let mut` reassignments write the same variables, as the IR's variables
//! are mutable registers. Lowering an expression returns the variables
//! holding its value, or `None` when control cannot continue past it
//! (`return`, `break`, `continue`, a `loop` without `break`); code after such
//! an expression is unreachable and is not lowered.
//!
//! Because a local's variables may be returned directly as an operand, an
//! operand is first copied when a later operand of the same operation
//! contains an assignment (which could change the local before the
//! operation reads it).

use autobatch_frontend::hir::{
    self, BinaryOp as HirBinary, Builtin, CompareOp as HirCompare, Expr, ExprKind, Literal,
    Pattern, Projection, UnaryOp as HirUnary,
};
use autobatch_frontend::Diagnostic;
use autobatch_ir::EntityRef;
use autobatch_ir::{
    BinaryOp, Block, BlockData, CompareOp, Dim, FuncId, Function, Instances, JoinCall, Op, Param,
    Prim, Program, Scalar, ScalarType, StaticId, TapeMode, TensorType, Terminator, Type, UnaryOp,
    Var, VarData,
};
use autobatch_types::Loc;

use crate::{concrete_dim, concrete_type, internal, InstanceRegistry};

mod control;

type LowerResult<T> = Result<T, Box<Diagnostic>>;
/// The variables holding a value, or `None` when control does not continue.
type Flow = LowerResult<Option<Vec<Var>>>;

struct LoopTargets {
    continue_to: Block,
    /// Created when the first `break` needs it (a `loop` may have none).
    break_to: Option<Block>,
    /// Where a `loop`'s `break value` puts the value.
    result: Vec<Var>,
    loc: Loc,
}

struct FunctionLowerer<'a> {
    module: &'a hir::Module,
    program: &'a Program,
    registry: &'a mut InstanceRegistry,
    hir: &'a hir::Function,
    const_args: &'a [Dim],
    func: Function,
    terminated: Vec<bool>,
    current: Option<Block>,
    local_vars: Vec<Vec<Var>>,
    /// Whether each variable belongs to a `mut` binding (and may be reassigned
    /// while an operation's operands are being evaluated).
    is_local_var: Vec<bool>,
    loops: Vec<LoopTargets>,
}

/// Lowers the function `module.functions[index]` with const arguments `const_args`.
pub(crate) fn lower_function(
    module: &hir::Module,
    program: &Program,
    registry: &mut InstanceRegistry,
    index: usize,
    const_args: &[Dim],
    name: String,
) -> LowerResult<Function> {
    let hir = module
        .functions
        .get(index)
        .ok_or_else(|| internal("missing function", Loc::new(1, 1)))?;
    let mut signature = Vec::new();
    for p in &hir.params {
        let local = hir.local(*p);
        signature.push(Param {
            name: local.name.clone(),
            ty: concrete_type(&local.ty, const_args)?,
        });
    }
    let ret_type = concrete_type(&hir.ret, const_args)?;
    let results = ret_type.flatten();
    let mut lowerer = FunctionLowerer {
        module,
        program,
        registry,
        hir,
        const_args,
        func: Function {
            name,
            signature,
            ret_type,
            params: Vec::new(),
            results,
            vars: Default::default(),
            blocks: Default::default(),
            loc: hir.loc,
            uncounted: false,
        },
        terminated: Vec::new(),
        current: None,
        local_vars: Vec::new(),
        is_local_var: Vec::new(),
        loops: Vec::new(),
    };
    for local in &hir.locals {
        let ty = concrete_type(&local.ty, const_args)?;
        let flat = ty.flatten();
        let single = flat.len() == 1;
        let mut vars = Vec::new();
        for (i, t) in flat.into_iter().enumerate() {
            let name = if local.name == "_" {
                None
            } else if single {
                Some(local.name.clone())
            } else {
                Some(format!("{}.{}", local.name, tuple_path(&ty, i)))
            };
            vars.push(lowerer.new_var(t, name, local.mutable));
        }
        lowerer.local_vars.push(vars);
    }
    for p in &hir.params {
        let vars = lowerer.local_vars[p.0 as usize].clone();
        lowerer.func.params.extend(vars);
    }
    let entry = lowerer.new_block(hir.loc);
    lowerer.current = Some(entry);
    if let Some(vars) = lowerer.lower_block(&hir.body, None)? {
        if vars.len() != lowerer.func.results.len() {
            return Err(internal(
                "the function body gives the wrong number of values",
                hir.loc,
            ));
        }
        lowerer.terminate(Terminator::Return(vars));
    }
    if let Some(b) = lowerer.terminated.iter().position(|t| !t) {
        return Err(internal(format!("block b{b} has no terminator"), hir.loc));
    }
    let mut func = lowerer.func;
    order_blocks(&mut func);
    Ok(func)
}

/// Renumbers the blocks in reverse postorder from the entry (then-branches
/// before else-branches, a loop's header before its body and its body before
/// what follows the loop) and drops unreachable blocks. Executors that run
/// the waiting block with the smallest index rely on this order to let
/// members re-converge.
fn order_blocks(func: &mut Function) {
    let n = func.blocks.len();
    let mut visited = vec![false; n];
    let mut postorder = Vec::with_capacity(n);
    // Iterative depth-first search: (block, successors still to visit).
    let mut stack: Vec<(Block, Vec<Block>)> = Vec::new();
    visited[0] = true;
    // Successors are popped from the end: the last is explored first, so
    // the first (a branch's then-block) finishes last and comes first.
    let successors = |b: Block, f: &Function| -> Vec<Block> { f.blocks[b].term.successors() };
    stack.push((Block(0), successors(Block(0), func)));
    while let Some((block, pending)) = stack.last_mut() {
        match pending.pop() {
            Some(next) => {
                if !visited[next.index()] {
                    visited[next.index()] = true;
                    let succ = successors(next, func);
                    stack.push((next, succ));
                }
            }
            None => {
                postorder.push(*block);
                stack.pop();
            }
        }
    }
    postorder.reverse();
    let mut new_index = vec![None; n];
    for (i, b) in postorder.iter().enumerate() {
        new_index[b.index()] = Some(Block(i as u32));
    }
    let renumber = |b: Block| new_index[b.index()].unwrap_or(b);
    let mut old_blocks: Vec<Option<BlockData>> = std::mem::take(&mut func.blocks)
        .values()
        .cloned()
        .map(Some)
        .collect();
    for b in &postorder {
        if let Some(mut data) = old_blocks[b.index()].take() {
            data.term = match data.term {
                Terminator::Jump(t) => Terminator::Jump(renumber(t)),
                Terminator::Branch {
                    cond,
                    then_block,
                    else_block,
                } => Terminator::Branch {
                    cond,
                    then_block: renumber(then_block),
                    else_block: renumber(else_block),
                },
                Terminator::Return(vars) => Terminator::Return(vars),
            };
            func.blocks.push(data);
        }
    }
}

/// The field path (`0`, `1.0`, ...) of the `i`-th flattened part of a tuple type.
fn tuple_path(ty: &Type, mut i: usize) -> String {
    let mut parts = Vec::new();
    let mut cur = ty;
    while let Type::Tuple(items) = cur {
        let mut found = None;
        for (k, t) in items.iter().enumerate() {
            let n = t.flat_len();
            if i < n {
                found = Some((k, t));
                break;
            }
            i -= n;
        }
        match found {
            Some((k, t)) => {
                parts.push(k.to_string());
                cur = t;
            }
            None => break,
        }
    }
    parts.join(".")
}

fn contains_assign(e: &Expr) -> bool {
    // An explicit stack: operands may be long chains.
    let mut stack: Vec<&Expr> = vec![e];
    let mut blocks: Vec<&hir::Block> = Vec::new();
    loop {
        if let Some(b) = blocks.pop() {
            for s in &b.stmts {
                match s {
                    hir::Stmt::Let { init, .. } => stack.push(init),
                    hir::Stmt::Expr(x) => stack.push(x),
                }
            }
            if let Some(t) = &b.tail {
                stack.push(t);
            }
            continue;
        }
        let Some(e) = stack.pop() else { return false };
        match &e.kind {
            ExprKind::Assign { .. } => return true,
            ExprKind::Literal(_)
            | ExprKind::Local(_)
            | ExprKind::Static(_)
            | ExprKind::Dim(_)
            | ExprKind::Continue => {}
            ExprKind::Len { array, .. } => stack.push(array),
            ExprKind::Unary { operand, .. } | ExprKind::Cast { operand, .. } => stack.push(operand),
            ExprKind::Binary { lhs, rhs, .. }
            | ExprKind::Compare { lhs, rhs, .. }
            | ExprKind::And { lhs, rhs }
            | ExprKind::Or { lhs, rhs } => {
                stack.push(lhs);
                stack.push(rhs);
            }
            ExprKind::Call { args, .. }
            | ExprKind::Builtin { args, .. }
            | ExprKind::Library { args, .. }
            | ExprKind::HostCall { args, .. }
            | ExprKind::Map { args, .. }
            | ExprKind::Join { calls: args }
            | ExprKind::Tuple(args)
            | ExprKind::Grad { args, .. }
            | ExprKind::Array(args) => stack.extend(args.iter()),
            ExprKind::Field { base, .. } => stack.push(base),
            ExprKind::Index { base, index }
            | ExprKind::Slice {
                base, start: index, ..
            } => {
                stack.push(base);
                stack.push(index);
            }
            ExprKind::Repeat { element, .. } => stack.push(element),
            ExprKind::Block(b) => blocks.push(b),
            ExprKind::If {
                cond,
                then_block,
                else_branch,
            } => {
                stack.push(cond);
                blocks.push(then_block);
                if let Some(e) = else_branch {
                    stack.push(e);
                }
            }
            ExprKind::While { cond, body } => {
                stack.push(cond);
                blocks.push(body);
            }
            ExprKind::Loop { body } => blocks.push(body),
            ExprKind::For {
                start, end, body, ..
            } => {
                stack.push(start);
                stack.push(end);
                blocks.push(body);
            }
            ExprKind::Break { value } | ExprKind::Return { value } => {
                if let Some(v) = value {
                    stack.push(v);
                }
            }
            ExprKind::Assert { cond, .. } => stack.push(cond),
        }
    }
}

/// For operands `exprs`, whether any operand after the k-th contains an assignment.
fn later_assigns(exprs: &[&Expr]) -> Vec<bool> {
    let mut out = vec![false; exprs.len()];
    let mut any = false;
    // The first operand is never scanned: nothing precedes it (and it may be
    // a long chain, whose scan at every level would take quadratic time).
    for k in (0..exprs.len()).rev() {
        out[k] = any;
        if k > 0 {
            any = any || contains_assign(exprs[k]);
        }
    }
    out
}

/// Whether evaluating the expression has no effect (it cannot fault, draw or assign).
fn is_pure(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Local(_) | ExprKind::Static(_) | ExprKind::Dim(_) => true,
        ExprKind::Field { base, .. } => is_pure(base),
        _ => false,
    }
}

impl FunctionLowerer<'_> {
    // -----------------------------------------------------------------------
    // Building blocks

    fn new_var(&mut self, ty: TensorType, name: Option<String>, is_local: bool) -> Var {
        self.is_local_var.push(is_local);
        self.func.vars.push(VarData { ty, name })
    }

    fn temp(&mut self, ty: TensorType) -> Var {
        self.new_var(ty, None, false)
    }

    fn new_block(&mut self, loc: Loc) -> Block {
        let b = self
            .func
            .blocks
            .push(BlockData::new(Vec::new(), Terminator::Jump(Block(0)), loc));
        self.terminated.push(false);
        b
    }

    fn terminate(&mut self, term: Terminator) {
        if let Some(b) = self.current.take() {
            self.func.blocks[b].term = term;
            self.terminated[b.index()] = true;
        }
    }

    fn jump(&mut self, target: Block) {
        self.terminate(Terminator::Jump(target));
    }

    fn switch_to(&mut self, b: Block) {
        self.current = Some(b);
    }

    fn push_op(&mut self, op: Op) -> LowerResult<()> {
        match self.current {
            Some(b) => {
                self.func.blocks[b].ops.push(op);
                Ok(())
            }
            None => Err(internal("an operation in unreachable code", op.loc())),
        }
    }

    fn var_ty(&self, v: Var) -> TensorType {
        self.func.vars[v].ty.clone()
    }

    /// Emits `dst = prim(args)`; the result type comes from `Prim::result_type`.
    /// `dst` is used when it has exactly that type.
    /// The primitive that calls the host primitive `host`, with its
    /// declared types (the front end allows numbers and arrays only).
    fn host_prim(&self, host: usize, loc: Loc) -> LowerResult<Prim> {
        let decl = self
            .module
            .host_functions
            .get(host)
            .ok_or_else(|| crate::internal(format!("no host primitive {host}"), loc))?;
        let tensor = |ty: &hir::Ty| match ty {
            hir::Ty::Tensor(t) => crate::concrete_tensor(t, &[]),
            _ => Err(crate::internal(
                format!(
                    "host primitive `{}` has a tuple in its signature",
                    decl.name
                ),
                loc,
            )),
        };
        let mut params = Vec::with_capacity(decl.params.len());
        for (_, ty) in &decl.params {
            params.push(tensor(ty)?);
        }
        Ok(Prim::Host(Box::new(autobatch_ir::HostPrim {
            name: decl.name.clone(),
            params,
            result: tensor(&decl.ret)?,
        })))
    }

    fn prim(&mut self, prim: Prim, args: Vec<Var>, loc: Loc, dst: Option<Var>) -> LowerResult<Var> {
        let arg_tys: Vec<TensorType> = args.iter().map(|a| self.var_ty(*a)).collect();
        let arg_refs: Vec<&TensorType> = arg_tys.iter().collect();
        let program = self.program;
        let static_type = |s: StaticId| program.static_type(s);
        let ty = match prim.result_type(&arg_refs, &static_type) {
            Ok(Some(t)) => t,
            Ok(None) => return Err(internal(format!("{} has no result", prim.name()), loc)),
            Err(m) => return Err(internal(format!("ill-typed operation: {m}"), loc)),
        };
        let dst = match dst {
            Some(d) if self.func.vars[d].ty == ty => d,
            _ => self.temp(ty),
        };
        self.push_op(Op::Prim {
            dst: Some(dst),
            prim,
            args,
            loc,
        })?;
        Ok(dst)
    }

    fn constant(&mut self, value: Scalar, loc: Loc, dst: Option<Var>) -> LowerResult<Var> {
        self.prim(Prim::Const(value), Vec::new(), loc, dst)
    }

    fn dim_value(&mut self, d: hir::DimExpr, loc: Loc, dst: Option<Var>) -> LowerResult<Var> {
        match concrete_dim(d, self.const_args)? {
            Dim::Fixed(n) => self.constant(Scalar::Usize(n), loc, dst),
            Dim::Symbolic(s) => self.prim(Prim::SymbolValue(s), Vec::new(), loc, dst),
        }
    }

    /// Copies `srcs` into `dsts` (as a parallel assignment).
    fn copy_into(&mut self, srcs: &[Var], dsts: &[Var], loc: Loc) -> LowerResult<()> {
        if srcs.len() != dsts.len() {
            return Err(internal("a value of the wrong size", loc));
        }
        let overlapping = srcs
            .iter()
            .enumerate()
            .any(|(i, s)| dsts.iter().enumerate().any(|(j, d)| s == d && i != j));
        let srcs: Vec<Var> = if overlapping {
            let mut staged = Vec::new();
            for s in srcs {
                staged.push(self.prim(Prim::Copy, vec![*s], loc, None)?);
            }
            staged
        } else {
            srcs.to_vec()
        };
        for (s, d) in srcs.iter().zip(dsts) {
            if s != d {
                self.prim(Prim::Copy, vec![*s], loc, Some(*d))?;
            }
        }
        Ok(())
    }

    /// A copy of the variables that belong to bindings, when `needed`.
    fn protect(&mut self, vars: Vec<Var>, needed: bool, loc: Loc) -> LowerResult<Vec<Var>> {
        if !needed {
            return Ok(vars);
        }
        let mut out = Vec::new();
        for v in vars {
            if self.is_local_var[v.index()] {
                out.push(self.prim(Prim::Copy, vec![v], loc, None)?);
            } else {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Lowers operands left to right; `None` if one of them does not finish.
    fn lower_operands(&mut self, exprs: &[&Expr]) -> LowerResult<Option<Vec<Vec<Var>>>> {
        let later = later_assigns(exprs);
        let mut out = Vec::new();
        for (k, e) in exprs.iter().enumerate() {
            let Some(vars) = self.lower_expr(e, None)? else {
                return Ok(None);
            };
            out.push(self.protect(vars, later[k], e.loc)?);
        }
        Ok(Some(out))
    }

    fn single(&self, vars: &[Var], loc: Loc) -> LowerResult<Var> {
        match vars {
            [v] => Ok(*v),
            _ => Err(internal("expected one value", loc)),
        }
    }

    fn ty_vars(&mut self, ty: &hir::Ty, dst: Option<&[Var]>) -> LowerResult<Vec<Var>> {
        let flat = concrete_type(ty, self.const_args)?.flatten();
        if let Some(d) = dst {
            let fits = d.len() == flat.len()
                && d.iter()
                    .zip(&flat)
                    .all(|(v, t)| self.func.vars[*v].ty == *t);
            if fits {
                return Ok(d.to_vec());
            }
        }
        Ok(flat.into_iter().map(|t| self.temp(t)).collect())
    }

    // -----------------------------------------------------------------------
    // Blocks and statements

    fn lower_block(&mut self, block: &hir::Block, dst: Option<&[Var]>) -> Flow {
        for stmt in &block.stmts {
            match stmt {
                hir::Stmt::Let { pattern, init, .. } => {
                    // The new binding's variables cannot be read by its own
                    // initializer, so the value may be computed into them directly.
                    let hint = self.pattern_vars(pattern);
                    let Some(vars) = self.lower_expr(init, hint.as_deref())? else {
                        return Ok(None);
                    };
                    self.bind(pattern, &init.ty, &vars, init.loc)?;
                }
                hir::Stmt::Expr(e) => {
                    if self.lower_expr(e, None)?.is_none() {
                        return Ok(None);
                    }
                }
            }
        }
        match &block.tail {
            Some(t) => self.lower_expr(t, dst),
            None => Ok(Some(Vec::new())),
        }
    }

    /// The variables of a pattern made only of bindings, in flattened order.
    fn pattern_vars(&self, pattern: &Pattern) -> Option<Vec<Var>> {
        match pattern {
            Pattern::Bind(id) => Some(self.local_vars[id.0 as usize].clone()),
            Pattern::Wildcard => None,
            Pattern::Tuple(items) => {
                let mut out = Vec::new();
                for p in items {
                    out.extend(self.pattern_vars(p)?);
                }
                Some(out)
            }
        }
    }

    fn bind(&mut self, pattern: &Pattern, ty: &hir::Ty, vars: &[Var], loc: Loc) -> LowerResult<()> {
        match pattern {
            Pattern::Wildcard => Ok(()),
            Pattern::Bind(id) => {
                let dsts = self.local_vars[id.0 as usize].clone();
                self.copy_into(vars, &dsts, loc)
            }
            Pattern::Tuple(items) => {
                let hir::Ty::Tuple(tys) = ty else {
                    return Err(internal(
                        "a tuple pattern for a value that is not a tuple",
                        loc,
                    ));
                };
                let mut offset = 0;
                for (p, t) in items.iter().zip(tys) {
                    let n = concrete_type(t, self.const_args)?.flat_len();
                    let part = vars
                        .get(offset..offset + n)
                        .ok_or_else(|| internal("a tuple of the wrong size", loc))?;
                    self.bind(p, t, part, loc)?;
                    offset += n;
                }
                Ok(())
            }
        }
    }

    // -----------------------------------------------------------------------
    // Expressions

    /// Lowers `e`; its value goes into `dst` when `dst` fits it (a hint: the
    /// variables returned hold the value). Control flow, calls and the
    /// structural cases have functions of their own; the expressions that are
    /// one operation on their operands go to [`Self::lower_operation`].
    fn lower_expr(&mut self, e: &Expr, dst: Option<&[Var]>) -> Flow {
        let loc = e.loc;
        let dst1 = match dst {
            Some([d]) => Some(*d),
            _ => None,
        };
        match &e.kind {
            ExprKind::Literal(_)
            | ExprKind::Static(_)
            | ExprKind::Dim(_)
            | ExprKind::Len { .. }
            | ExprKind::Unary { .. }
            | ExprKind::Binary { .. }
            | ExprKind::Compare { .. }
            | ExprKind::Cast { .. }
            | ExprKind::Builtin { .. }
            | ExprKind::Library { .. }
            | ExprKind::HostCall { .. }
            | ExprKind::Index { .. }
            | ExprKind::Slice { .. }
            | ExprKind::Array(_)
            | ExprKind::Repeat { .. } => self.lower_operation(e, dst1),
            ExprKind::Local(id) => Ok(Some(self.local_vars[id.0 as usize].clone())),
            ExprKind::And { lhs, rhs } => self.lower_short_circuit(true, lhs, rhs, loc, dst1),
            ExprKind::Or { lhs, rhs } => self.lower_short_circuit(false, lhs, rhs, loc, dst1),
            ExprKind::Call {
                function,
                const_args,
                args,
                catch,
            } => self.lower_call(e, *function, const_args, args, *catch, dst),
            ExprKind::Grad {
                function,
                const_args,
                args,
                kind,
            } => self.lower_grad(e, *function, const_args, args, *kind),
            ExprKind::Join { .. } => self.lower_join(e, dst),
            ExprKind::Map { .. } => self.lower_map(e, dst),
            ExprKind::Tuple(items) => {
                let refs: Vec<&Expr> = items.iter().collect();
                let Some(vs) = self.lower_operands(&refs)? else {
                    return Ok(None);
                };
                Ok(Some(vs.concat()))
            }
            ExprKind::Field { base, index } => self.lower_field(base, *index, loc),
            ExprKind::Block(b) => self.lower_block(b, dst),
            ExprKind::If {
                cond,
                then_block,
                else_branch,
            } => self.lower_if(e, cond, then_block, else_branch.as_deref(), dst),
            ExprKind::While { cond, body } => self.lower_while(cond, body, loc),
            ExprKind::Loop { body } => self.lower_loop(e, body, dst),
            ExprKind::For {
                var,
                start,
                end,
                inclusive,
                body,
            } => self.lower_for(e, *var, start, end, *inclusive, body),
            ExprKind::Break { value } => self.lower_break(value.as_deref(), loc),
            ExprKind::Continue => self.lower_continue(loc),
            ExprKind::Return { value } => self.lower_return(value.as_deref(), loc),
            ExprKind::Assign { place, op, value } => self.lower_assign(place, *op, value, loc),
            ExprKind::Assert { cond, message } => self.lower_assert(cond, message, loc),
        }
    }

    /// Lowers `e`, an expression that is one operation (a primitive, a
    /// constant or a library expansion) on its operands; its value goes into
    /// `dst1` when given.
    fn lower_operation(&mut self, e: &Expr, dst1: Option<Var>) -> Flow {
        let loc = e.loc;
        let one = |v: Var| Ok(Some(vec![v]));
        match &e.kind {
            ExprKind::Literal(lit) => {
                let Some(t) = e.ty.as_tensor() else {
                    return Err(internal("a literal without a scalar type", loc));
                };
                let value = literal_scalar(*lit, t.elem);
                one(self.constant(value, loc, dst1)?)
            }
            ExprKind::Static(i) => {
                one(self.prim(Prim::LoadStatic(StaticId(*i as u32)), Vec::new(), loc, dst1)?)
            }
            ExprKind::Dim(d) => one(self.dim_value(*d, loc, dst1)?),
            ExprKind::Len { array, len } => {
                if !is_pure(array) && self.lower_expr(array, None)?.is_none() {
                    return Ok(None);
                }
                one(self.dim_value(*len, loc, dst1)?)
            }
            ExprKind::Unary { op, operand } => {
                let Some(v) = self.lower_single(operand, loc)? else {
                    return Ok(None);
                };
                let op = match op {
                    HirUnary::Neg => UnaryOp::Neg,
                    HirUnary::Not => UnaryOp::Not,
                };
                one(self.prim(Prim::Unary(op), vec![v], loc, dst1)?)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let Some(operands) = self.lower_single_operands(&[lhs, rhs], loc)? else {
                    return Ok(None);
                };
                one(self.prim(Prim::Binary(binary_op(*op)), operands, loc, dst1)?)
            }
            ExprKind::Compare { op, lhs, rhs } => {
                let Some(operands) = self.lower_single_operands(&[lhs, rhs], loc)? else {
                    return Ok(None);
                };
                one(self.prim(Prim::Compare(compare_op(*op)), operands, loc, dst1)?)
            }
            ExprKind::Cast { operand, to } => {
                let Some(v) = self.lower_single(operand, loc)? else {
                    return Ok(None);
                };
                one(self.prim(Prim::Cast(*to), vec![v], loc, dst1)?)
            }
            ExprKind::Builtin { builtin, args } => {
                let refs: Vec<&Expr> = args.iter().collect();
                let Some(operands) = self.lower_single_operands(&refs, loc)? else {
                    return Ok(None);
                };
                one(self.prim(builtin_prim(*builtin), operands, loc, dst1)?)
            }
            ExprKind::Library { function, args } => {
                let refs: Vec<&Expr> = args.iter().collect();
                let Some(operands) = self.lower_single_operands(&refs, loc)? else {
                    return Ok(None);
                };
                let mut emit = LibraryEmit {
                    lowerer: self,
                    loc,
                    joins: Vec::new(),
                };
                one(crate::library::expand(*function, &operands, &mut emit)?)
            }
            ExprKind::HostCall { host, args } => {
                let refs: Vec<&Expr> = args.iter().collect();
                let Some(operands) = self.lower_single_operands(&refs, loc)? else {
                    return Ok(None);
                };
                let prim = self.host_prim(*host, loc)?;
                one(self.prim(prim, operands, loc, dst1)?)
            }
            ExprKind::Index { .. }
            | ExprKind::Slice { .. }
            | ExprKind::Array(_)
            | ExprKind::Repeat { .. } => self.lower_layout(e, dst1),
            _ => Err(internal("an expression that is not one operation", loc)),
        }
    }

    /// Indexing, slicing and array literals: one operation each.
    fn lower_layout(&mut self, e: &Expr, dst1: Option<Var>) -> Flow {
        let loc = e.loc;
        let one = |v: Var| Ok(Some(vec![v]));
        match &e.kind {
            ExprKind::Index { base, index } => {
                let Some(operands) = self.lower_single_operands(&[base, index], loc)? else {
                    return Ok(None);
                };
                one(self.prim(Prim::Index, operands, loc, dst1)?)
            }
            ExprKind::Slice { base, start, len } => {
                let Some(operands) = self.lower_single_operands(&[base, start], loc)? else {
                    return Ok(None);
                };
                let dim = concrete_dim(*len, self.const_args)?;
                one(self.prim(Prim::Slice(dim), operands, loc, dst1)?)
            }
            ExprKind::Array(items) => {
                let refs: Vec<&Expr> = items.iter().collect();
                let Some(operands) = self.lower_single_operands(&refs, loc)? else {
                    return Ok(None);
                };
                one(self.prim(Prim::Stack, operands, loc, dst1)?)
            }
            ExprKind::Repeat { element, len } => {
                let Some(v) = self.lower_single(element, loc)? else {
                    return Ok(None);
                };
                let dim = concrete_dim(*len, self.const_args)?;
                one(self.prim(Prim::Fill(dim), vec![v], loc, dst1)?)
            }
            _ => Err(internal(
                "an expression that is not a layout operation",
                loc,
            )),
        }
    }

    /// Lowers `e`, which has one variable; `None` when control does not continue.
    fn lower_single(&mut self, e: &Expr, loc: Loc) -> LowerResult<Option<Var>> {
        let Some(vars) = self.lower_expr(e, None)? else {
            return Ok(None);
        };
        self.single(&vars, loc).map(Some)
    }

    /// Lowers the operands of one operation (see [`Self::lower_operands`]),
    /// each of which has one variable.
    fn lower_single_operands(
        &mut self,
        exprs: &[&Expr],
        loc: Loc,
    ) -> LowerResult<Option<Vec<Var>>> {
        let Some(vs) = self.lower_operands(exprs)? else {
            return Ok(None);
        };
        let mut operands = Vec::with_capacity(vs.len());
        for v in &vs {
            operands.push(self.single(v, loc)?);
        }
        Ok(Some(operands))
    }

    /// The instance of function `function` of the module for `const_args`.
    fn instance(&mut self, function: usize, const_args: &[hir::DimExpr]) -> LowerResult<FuncId> {
        let mut concrete = Vec::new();
        for d in const_args {
            concrete.push(concrete_dim(*d, self.const_args)?);
        }
        Ok(self.registry.instance(self.module, function, concrete))
    }

    /// `lhs && rhs` (`is_and`) or `lhs || rhs`: the right operand runs only
    /// when the left one does not decide.
    fn lower_short_circuit(
        &mut self,
        is_and: bool,
        lhs: &Expr,
        rhs: &Expr,
        loc: Loc,
        dst1: Option<Var>,
    ) -> Flow {
        // The result is written before the right operand runs, so it
        // may only go into a destination no source binding can read
        // (a temporary or a fresh `let` binding), never into a `mut` one.
        let bool_ty = TensorType::scalar(ScalarType::Bool);
        let result = match dst1 {
            Some(d) if !self.is_local_var[d.index()] && self.func.vars[d].ty == bool_ty => d,
            _ => self.temp(bool_ty),
        };
        let Some(l) = self.lower_expr(lhs, Some(&[result]))? else {
            return Ok(None);
        };
        self.copy_into(&l, &[result], lhs.loc)?;
        let rhs_block = self.new_block(rhs.loc);
        let join = self.new_block(loc);
        let (then_block, else_block) = if is_and {
            (rhs_block, join)
        } else {
            (join, rhs_block)
        };
        self.terminate(Terminator::Branch {
            cond: result,
            then_block,
            else_block,
        });
        self.switch_to(rhs_block);
        if let Some(r) = self.lower_expr(rhs, Some(&[result]))? {
            self.copy_into(&r, &[result], rhs.loc)?;
            self.jump(join);
        }
        self.switch_to(join);
        Ok(Some(vec![result]))
    }

    /// A call `e` of function `function` of the module, caught when `catch`.
    fn lower_call(
        &mut self,
        e: &Expr,
        function: usize,
        const_args: &[hir::DimExpr],
        args: &[Expr],
        catch: bool,
        dst: Option<&[Var]>,
    ) -> Flow {
        // For `catch`, the flattened tuple type gives the flag first.
        let refs: Vec<&Expr> = args.iter().collect();
        let Some(vs) = self.lower_operands(&refs)? else {
            return Ok(None);
        };
        let callee = self.instance(function, const_args)?;
        let dsts = self.ty_vars(&e.ty, dst)?;
        let unique = dsts.iter().collect::<std::collections::HashSet<_>>().len() == dsts.len();
        let dsts = if unique {
            dsts
        } else {
            self.ty_vars(&e.ty, None)?
        };
        self.push_op(Op::Call {
            dsts: dsts.clone(),
            callee,
            args: vs.concat(),
            loc: e.loc,
            catch,
        })?;
        Ok(Some(dsts))
    }

    /// `grad(function, x, d..)` or `value_and_grad`: a call of the
    /// gradient the autodiff derives, which takes `function`'s arguments
    /// (the point, then the data arguments, flattened) and gives `(f(x,
    /// d..), gradient)`; `jacobian`: a call of the function the autodiff
    /// derives for it, which takes the same arguments and gives the
    /// Jacobian (the expression `e`). The point is the function's first
    /// flattened parameter, the one the derivative is taken with respect
    /// to (see `derive_gradients`).
    fn lower_grad(
        &mut self,
        e: &Expr,
        function: usize,
        const_args: &[hir::DimExpr],
        args: &[Expr],
        kind: hir::GradKind,
    ) -> Flow {
        let loc = e.loc;
        let refs: Vec<&Expr> = args.iter().collect();
        let Some(vs) = self.lower_operands(&refs)? else {
            return Ok(None);
        };
        let Some(first) = vs.first() else {
            return Err(internal("`grad` without a point", loc));
        };
        let x = self.single(first, loc)?;
        let args = vs.concat();
        let callee = self.instance(function, const_args)?;
        let derivative = match kind {
            hir::GradKind::Jacobian => autobatch_autodiff::Derivative::Jacobian,
            _ => autobatch_autodiff::Derivative::Gradient,
        };
        let derived = self.registry.vjp(callee, derivative);
        if kind == hir::GradKind::Jacobian {
            let dsts = self.ty_vars(&e.ty, None)?;
            self.push_op(Op::Call {
                dsts: dsts.clone(),
                callee: derived,
                args,
                loc,
                catch: false,
            })?;
            return Ok(Some(dsts));
        }
        let Some(hir::Ty::Tensor(ret)) = self.module.functions.get(function).map(|f| &f.ret) else {
            return Err(internal(
                "`grad` of a function without a scalar result",
                loc,
            ));
        };
        let value = self.temp(TensorType {
            elem: ret.elem,
            dims: Vec::new(),
        });
        let gradient = self.temp(self.var_ty(x));
        self.push_op(Op::Call {
            dsts: vec![value, gradient],
            callee: derived,
            args,
            loc,
            catch: false,
        })?;
        if kind == hir::GradKind::ValueAndGrad {
            Ok(Some(vec![value, gradient]))
        } else {
            Ok(Some(vec![gradient]))
        }
    }

    /// The variables of a fork's results: `dst` if it fits, names no
    /// variable twice and none of the fork's arguments (so that no executor
    /// writes a result where a later instance still reads an argument).
    fn fork_results(
        &mut self,
        ty: &hir::Ty,
        dst: Option<&[Var]>,
        args: &[Var],
    ) -> LowerResult<Vec<Var>> {
        let dsts = self.ty_vars(ty, dst)?;
        let unique = dsts.iter().collect::<std::collections::HashSet<_>>().len() == dsts.len();
        if unique && !dsts.iter().any(|d| args.contains(d)) {
            Ok(dsts)
        } else {
            self.ty_vars(ty, None)
        }
    }

    /// `join(f(a), g(b, c))` (the expression `e`): the arguments of every
    /// call, left to right, then one fork whose calls take them in order.
    fn lower_join(&mut self, e: &Expr, dst: Option<&[Var]>) -> Flow {
        let ExprKind::Join { calls } = &e.kind else {
            return Err(internal("not a `join`", e.loc));
        };
        let mut operands: Vec<&Expr> = Vec::new();
        let mut targets = Vec::with_capacity(calls.len());
        for c in calls {
            let ExprKind::Call {
                function,
                const_args,
                args,
                catch: false,
            } = &c.kind
            else {
                return Err(internal("`join` of something that is not a call", c.loc));
            };
            operands.extend(args);
            targets.push((*function, const_args, args.len(), c.loc));
        }
        let Some(vs) = self.lower_operands(&operands)? else {
            return Ok(None);
        };
        let mut values = vs.into_iter();
        let mut join_calls = Vec::with_capacity(targets.len());
        let mut args = Vec::new();
        for (function, const_args, count, loc) in targets {
            let callee = self.instance(function, const_args)?;
            let taken: Vec<Var> = values.by_ref().take(count).flatten().collect();
            join_calls.push(JoinCall {
                callee,
                args: taken.len(),
                loc,
            });
            args.extend(taken);
        }
        let dsts = self.fork_results(&e.ty, dst, &args)?;
        self.push_op(Op::Fork {
            dsts: dsts.clone(),
            args,
            instances: Instances::Join(join_calls),
            loc: e.loc,
            tape: TapeMode::None,
        })?;
        Ok(Some(dsts))
    }

    /// `map(f, xs, extra..)`, or `pfor::<count>(g, extra..)` when `indexed`
    /// (the expression `e`): the arguments left to right, then one fork of
    /// `count` instances.
    fn lower_map(&mut self, e: &Expr, dst: Option<&[Var]>) -> Flow {
        let ExprKind::Map {
            function,
            const_args,
            count,
            indexed,
            args,
        } = &e.kind
        else {
            return Err(internal("not a `map` or `pfor`", e.loc));
        };
        let refs: Vec<&Expr> = args.iter().collect();
        let Some(vs) = self.lower_operands(&refs)? else {
            return Ok(None);
        };
        let callee = self.instance(*function, const_args)?;
        let args = vs.concat();
        let dsts = self.fork_results(&e.ty, dst, &args)?;
        self.push_op(Op::Fork {
            dsts: dsts.clone(),
            args,
            instances: Instances::Map {
                callee,
                count: concrete_dim(*count, self.const_args)?,
                index: *indexed,
                each: usize::from(!*indexed),
            },
            loc: e.loc,
            tape: TapeMode::None,
        })?;
        Ok(Some(dsts))
    }

    /// Field `index` of the tuple `base`: its part of the flattened variables.
    fn lower_field(&mut self, base: &Expr, index: usize, loc: Loc) -> Flow {
        let Some(vars) = self.lower_expr(base, None)? else {
            return Ok(None);
        };
        let hir::Ty::Tuple(items) = &base.ty else {
            return Err(internal("a field of a value that is not a tuple", loc));
        };
        let mut offset = 0;
        for t in &items[..index] {
            offset += concrete_type(t, self.const_args)?.flat_len();
        }
        let n = match items.get(index) {
            Some(t) => concrete_type(t, self.const_args)?.flat_len(),
            None => return Err(internal("a missing tuple field", loc)),
        };
        let part = vars
            .get(offset..offset + n)
            .ok_or_else(|| internal("a tuple of the wrong size", loc))?;
        Ok(Some(part.to_vec()))
    }

    /// The variables `place` names after its tuple fields, the indices
    /// (and a slice's start) that follow, and the slice's length.
    fn place_steps<'p>(&self, place: &'p hir::Place, loc: Loc) -> LowerResult<Steps<'p>> {
        let mut ty = concrete_type(&self.hir.local(place.local).ty, self.const_args)?;
        let mut target = self.local_vars[place.local.0 as usize].clone();
        let mut indices: Vec<&Expr> = Vec::new();
        let mut slice = None;
        for p in &place.projections {
            match p {
                Projection::Field(k) => {
                    let Type::Tuple(items) = &ty else {
                        return Err(internal("a field of a value that is not a tuple", loc));
                    };
                    let offset: usize = items[..*k].iter().map(Type::flat_len).sum();
                    let item = items
                        .get(*k)
                        .cloned()
                        .ok_or_else(|| internal("a missing tuple field", loc))?;
                    let n = item.flat_len();
                    target = target
                        .get(offset..offset + n)
                        .ok_or_else(|| internal("a tuple of the wrong size", loc))?
                        .to_vec();
                    ty = item;
                }
                Projection::Index(i) => indices.push(i),
                Projection::Slice { start, len } => {
                    indices.push(start);
                    slice = Some(concrete_dim(*len, self.const_args)?);
                }
            }
        }
        Ok(Steps {
            target,
            indices,
            slice,
        })
    }

    fn lower_assign(
        &mut self,
        place: &hir::Place,
        op: Option<HirBinary>,
        value: &Expr,
        loc: Loc,
    ) -> Flow {
        let Steps {
            target,
            indices,
            slice,
        } = self.place_steps(place, loc)?;
        let direct = indices.is_empty() && op.is_none() && target.len() == 1;
        // Rust evaluates the value first, then the place's indices.
        let hint = if direct { Some(target.clone()) } else { None };
        let Some(v) = self.lower_expr(value, hint.as_deref())? else {
            return Ok(None);
        };
        if indices.is_empty() {
            match op {
                None => self.copy_into(&v, &target, value.loc)?,
                Some(op) => {
                    let (t, x) = (self.single(&target, loc)?, self.single(&v, loc)?);
                    self.prim(Prim::Binary(binary_op(op)), vec![t, x], loc, Some(t))?;
                }
            }
            return Ok(Some(Vec::new()));
        }
        let array = self.single(&target, loc)?;
        let any_assign = indices.iter().any(|i| contains_assign(i));
        let v = self.protect(v, any_assign, value.loc)?;
        let Some(idx) = self.lower_operands(&indices)? else {
            return Ok(None);
        };
        let mut idx_vars = Vec::new();
        for i in &idx {
            idx_vars.push(self.single(i, loc)?);
        }
        let x = self.single(&v, loc)?;
        // bases[j] is the array indexed by idx_vars[j].
        let mut bases = vec![array];
        for j in 0..idx_vars.len() - 1 {
            let next = self.prim(Prim::Index, vec![bases[j], idx_vars[j]], place.loc, None)?;
            bases.push(next);
        }
        let last = idx_vars.len() - 1;
        // The last step reads and writes an item, or the slice's items.
        let (read, write) = match slice {
            Some(len) => (Prim::Slice(len), Prim::SliceSet),
            None => (Prim::Index, Prim::IndexSet),
        };
        let mut new_value = match op {
            None => x,
            Some(op) => {
                let old = self.prim(read, vec![bases[last], idx_vars[last]], place.loc, None)?;
                self.prim(Prim::Binary(binary_op(op)), vec![old, x], loc, None)?
            }
        };
        for j in (0..idx_vars.len()).rev() {
            let dst = if j == 0 { Some(array) } else { None };
            let prim = if j == last {
                write.clone()
            } else {
                Prim::IndexSet
            };
            new_value = self.prim(prim, vec![bases[j], idx_vars[j], new_value], place.loc, dst)?;
        }
        if new_value != array {
            return Err(internal(
                "an indexed assignment did not update its array",
                loc,
            ));
        }
        Ok(Some(Vec::new()))
    }
}

/// An assignment's place, lowered: the variables it names after its
/// tuple fields (a tuple field narrows them to some of the local's), the
/// indices that follow (and last perhaps a slice's start), and the slice's
/// length when the last step is a slice.
struct Steps<'p> {
    target: Vec<Var>,
    indices: Vec<&'p Expr>,
    slice: Option<Dim>,
}

/// The IR comparison of a source comparison.
fn compare_op(op: HirCompare) -> CompareOp {
    match op {
        HirCompare::Eq => CompareOp::Eq,
        HirCompare::Ne => CompareOp::Ne,
        HirCompare::Lt => CompareOp::Lt,
        HirCompare::Le => CompareOp::Le,
        HirCompare::Gt => CompareOp::Gt,
        HirCompare::Ge => CompareOp::Ge,
    }
}

fn one_of(elem: ScalarType) -> Scalar {
    match elem {
        ScalarType::I32 => Scalar::I32(1),
        ScalarType::Usize => Scalar::Usize(1),
        _ => Scalar::I64(1),
    }
}

fn literal_scalar(lit: Literal, elem: ScalarType) -> Scalar {
    match (lit, elem) {
        (Literal::Bool(b), _) => Scalar::Bool(b),
        (Literal::Int(v), ScalarType::I32) => Scalar::I32(v as i32),
        (Literal::Int(v), ScalarType::I64) => Scalar::I64(v as i64),
        (Literal::Int(v), ScalarType::Usize) => Scalar::Usize(v as u64),
        (Literal::Int(v), ScalarType::F32) => Scalar::F32(v as f32),
        (Literal::Int(v), ScalarType::F64) => Scalar::F64(v as f64),
        (Literal::Int(v), ScalarType::Bool) => Scalar::Bool(v != 0),
        (Literal::Float { as_f32, .. }, ScalarType::F32) => Scalar::F32(as_f32),
        (Literal::Float { as_f64, .. }, _) => Scalar::F64(as_f64),
    }
}

fn binary_op(op: HirBinary) -> BinaryOp {
    op.op()
}

/// `fn builtin_prim(b: Builtin) -> Prim`: the primitive a builtin lowers to,
/// from the table of operations.
macro_rules! builtin_prim {
    ($($(#[$attr:meta])* [$name:ident: $group:ident $op:ident, $($rest:tt)*])*) => {
        fn builtin_prim(b: Builtin) -> Prim {
            match b {
                $(Builtin::$name => autobatch_ir::prim_of_row!($group $op),)*
            }
        }
    };
}

autobatch_ops::for_each_builtin!(builtin_prim);

/// The lowering as the place a library function's expansion goes: its
/// operations at the call's location.
struct LibraryEmit<'l, 'a> {
    lowerer: &'l mut FunctionLowerer<'a>,
    loc: Loc,
    /// The blocks after the check arms begun and not ended.
    joins: Vec<Block>,
}

impl crate::library::Emit for LibraryEmit<'_, '_> {
    fn prim(&mut self, prim: Prim, args: Vec<Var>) -> LowerResult<Var> {
        self.lowerer.prim(prim, args, self.loc, None)
    }

    fn effect(&mut self, prim: Prim, args: Vec<Var>) -> LowerResult<()> {
        self.lowerer.push_op(Op::Prim {
            dst: None,
            prim,
            args,
            loc: self.loc,
        })
    }

    fn ty(&self, v: Var) -> autobatch_ir::TensorType {
        self.lowerer.var_ty(v)
    }

    fn constant(&self, v: Var) -> Option<f64> {
        // The last write of `v` in the current block is the one the
        // expansion reads; a write in another block is not looked for.
        let block = self.lowerer.current?;
        let op = self.lowerer.func.blocks[block]
            .ops
            .iter()
            .rev()
            .find(|op| op.defs().contains(&v))?;
        match op {
            Op::Prim {
                prim: Prim::Const(scalar),
                ..
            } => match *scalar {
                Scalar::F64(x) => Some(x),
                Scalar::F32(x) => Some(f64::from(x)),
                _ => None,
            },
            _ => None,
        }
    }

    fn begin_check_arm(&mut self, usual: Var) -> LowerResult<()> {
        let l = &mut *self.lowerer;
        let arm = l.new_block(self.loc);
        let join = l.new_block(self.loc);
        l.func.blocks[arm].uncounted = true;
        l.func.blocks[arm].check_arm = true;
        l.func.blocks[join].uncounted = true;
        l.terminate(Terminator::Branch {
            cond: usual,
            then_block: join,
            else_block: arm,
        });
        l.switch_to(arm);
        self.joins.push(join);
        Ok(())
    }

    fn end_check_arm(&mut self) -> LowerResult<()> {
        let Some(join) = self.joins.pop() else {
            return Err(internal("a check arm ended that did not begin", self.loc));
        };
        self.lowerer.jump(join);
        self.lowerer.switch_to(join);
        Ok(())
    }
}
