//! Self calls in tail position up to one `+` or `*`, as jumps. A pure self
//! tail call (`return f(..)`) is a jump in the IR already, and is part of
//! the language's meaning (`autobatch_passes::tail_calls`: it takes no
//! depth). A function whose block ends by calling itself and returning
//! the value combined by `+` or `*` with a value of the caller (integers,
//! which wrap: the operations are associative and commutative, so the
//! order of the combining changes no bit) keeps its meaning, one depth
//! level per call, but native code restarts the activation instead of
//! calling: the arguments become the parameters, the caller's operand goes
//! into an accumulator, and the depth left goes down by one (the frames so
//! left out are the depth taken since the activation's entry). Naive recursive Fibonacci (`fib(n - 2) + fib(n - 1)`) then makes
//! half its machine calls, as compiled Rust does.
//!
//! Nothing the member shows changes:
//!
//! - the call's depth check stays (the depth left is a variable, one less
//!   per restart), so a member stops at the depth limit where the
//!   reference stops it;
//! - each restart takes the entry block's step, as the callee's entry
//!   does;
//! - at a return, the frames left out are paid for as the reference
//!   returns through them, innermost first: each runs the operation after
//!   its call (whose counter grows by one) and steps into the block that
//!   returns (one step each). A member whose steps run out there stops
//!   with the step limit at that block, with the operations the reference
//!   ran before it counted;
//! - a member that stops inside (a fault, a limit) never returns through
//!   the frames left out, under the reference either.
//!
//! The function must have scalar parameters and one integer result, and
//! exactly one such call (its block ends with the call and the combining
//! operation, then returns or jumps to a block that only returns). Code
//! compiled with [`Interrupts::Polled`](crate::Interrupts::Polled) (a run
//! an observer follows) holds its steps in slices and keeps its calls.

use autobatch_ir::{BinaryOp, Block, EntityRef, FuncId, Function, Loc, Op, Prim, Terminator, Var};
use autobatch_types::ScalarType;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::function::{segments, Translator};
use super::machine_type;
use crate::Stop;

/// How a frame left out combines the value returned to it with its
/// operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fold {
    /// `value + other` (wrapping).
    Add,
    /// `value * other` (wrapping).
    Mul,
}

impl Fold {
    fn apply(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        match self {
            Fold::Add => b.ins().iadd(x, y),
            Fold::Mul => b.ins().imul(x, y),
        }
    }
}

/// The one self tail call of a function.
#[derive(Clone, Debug)]
pub(super) struct TailSite {
    /// The block that ends with it, and the call's position in it.
    pub block: Block,
    pub call: usize,
    args: Vec<Var>,
    loc: Loc,
    fold: Fold,
    /// The caller's operand of the combining operation.
    other: Var,
    /// The segment of the combining operation (its number among the
    /// block's segments).
    after: Option<usize>,
    /// The block that returns, entered by each frame left out (`None`
    /// when the call's own block returns).
    returns_through: Option<Loc>,
}

/// A function's tail call and the variables that stand for the frames
/// left out.
pub(super) struct Tail {
    pub site: TailSite,
    /// The depth left at the activation's entry: the frames left out so
    /// far are this less the depth left now (each restart takes one), so
    /// no count of them is kept in the loop.
    entry_depth: Value,
    /// Their operands, combined.
    acc: Variable,
}

/// `id`'s self tail call, if it has exactly one of the module doc's form.
pub(super) fn tail_site(function: &Function, id: FuncId) -> Option<TailSite> {
    let scalar_params = function
        .params
        .iter()
        .all(|p| function.vars[*p].ty.is_scalar());
    if !scalar_params || function.results.len() != 1 || !function.results[0].is_scalar() {
        return None;
    }
    let mut sites = function
        .blocks
        .keys()
        .filter_map(|block| site_in(function, id, block));
    let site = sites.next()?;
    sites.next().is_none().then_some(site)
}

/// The tail call ending `block`, if it is one.
fn site_in(function: &Function, id: FuncId, block: Block) -> Option<TailSite> {
    let data = &function.blocks[block];
    let call = data.last_self_call(id)?;
    let Op::Call {
        dsts, args, loc, ..
    } = &data.ops[call]
    else {
        return None;
    };
    let [r] = dsts[..] else { return None };
    let [Op::Prim {
        dst: Some(returned),
        prim: Prim::Binary(op @ (BinaryOp::Add | BinaryOp::Mul)),
        args: operands,
        ..
    }] = &data.ops[call + 1..]
    else {
        return None;
    };
    let other = match operands[..] {
        [a, b] if a == r && b != r => b,
        [a, b] if b == r && a != r => a,
        _ => return None,
    };
    let integer = matches!(
        function.vars[r].ty.elem,
        ScalarType::I64 | ScalarType::I32 | ScalarType::Usize
    );
    if !integer {
        return None;
    }
    let fold = if *op == BinaryOp::Add {
        Fold::Add
    } else {
        Fold::Mul
    };
    let returned = *returned;
    let returns = |term: &Terminator| matches!(term, Terminator::Return(v) if v[..] == [returned]);
    let returns_through = match &data.term {
        term if returns(term) => None,
        Terminator::Jump(j) => {
            let joined = &function.blocks[*j];
            (joined.ops.is_empty() && returns(&joined.term)).then_some(Some(joined.loc))?
        }
        _ => return None,
    };
    let after = segments(function, data)
        .iter()
        .position(|(start, _)| *start == call + 1);
    Some(TailSite {
        block,
        call,
        args: args.clone(),
        loc: *loc,
        fold,
        other,
        after,
        returns_through,
    })
}

impl Tail {
    /// The accumulator of `site`, set for the activation's first frame
    /// (whose depth left is `entry_depth`).
    pub(super) fn new(
        site: TailSite,
        function: &Function,
        entry_depth: Value,
        b: &mut FunctionBuilder<'_>,
    ) -> Tail {
        let ty = machine_type(function.results[0].elem);
        let acc = b.declare_var(ty);
        let identity = i64::from(site.fold == Fold::Mul);
        let start = b.ins().iconst(ty, identity);
        b.def_var(acc, start);
        Tail {
            site,
            entry_depth,
            acc,
        }
    }
}

impl Translator<'_, '_, '_> {
    /// The position of the tail call in `block`, if it has the function's.
    pub(super) fn tail_call_in(&self, block: Block) -> Option<usize> {
        let site = &self.tail.as_ref()?.site;
        (site.block == block).then_some(site.call)
    }

    /// The tail call: the call's depth check, then the activation starts
    /// again at the entry block on the call's arguments, one frame left
    /// out.
    pub(super) fn restart(&mut self) {
        let tail = self.tail.as_ref().expect("a function with a tail call");
        let (site, acc) = (tail.site.clone(), tail.acc);
        let depth_left = self.b.use_var(self.depth);
        let no_room = self.b.ins().icmp_imm_s(IntCC::Equal, depth_left, 0);
        self.stop_if(no_room, Stop::StackOverflow(site.loc));
        let values: Vec<Value> = site
            .args
            .iter()
            .map(|a| self.b.use_var(self.vars[a.index()]))
            .collect();
        let so_far = self.b.use_var(acc);
        let operand = self.b.use_var(self.vars[site.other.index()]);
        let combined = site.fold.apply(&mut self.b, so_far, operand);
        self.b.def_var(acc, combined);
        let deeper = self.b.ins().iadd_imm_s(depth_left, -1);
        self.b.def_var(self.depth, deeper);
        for (p, value) in self.function.params.iter().zip(values) {
            self.b.def_var(self.vars[p.index()], value);
        }
        let entry = self.blocks[Function::ENTRY.index()];
        self.b.ins().jump(entry, &[]);
    }

    /// At a return of `returned`: the frames left out return through,
    /// each counting the operations after its call and stepping into the
    /// returning block; gives what the outermost frame returns.
    pub(super) fn unwind(&mut self, returned: Value) -> Value {
        let Some(tail) = self.tail.as_ref() else {
            return returned;
        };
        let (site, entry_depth, acc) = (tail.site.clone(), tail.entry_depth, tail.acc);
        let segment = site
            .after
            .map(|k| self.segment_base[site.block.index()] + k);
        let depth_left = self.b.use_var(self.depth);
        let left_out = self.b.ins().isub(entry_depth, depth_left);
        if let Some(loc) = site.returns_through {
            let left = self.b.use_var(self.steps);
            let short = self.b.ins().icmp(IntCC::UnsignedLessThan, left, left_out);
            let stop = self.b.create_block();
            self.b.set_cold_block(stop);
            let go_on = self.b.create_block();
            self.b.ins().brif(short, stop, &[], go_on, &[]);
            // Steps for `left` frames; the next runs its operations, then
            // finds none for its step.
            self.b.switch_to_block(stop);
            if let Some(segment) = segment {
                let ran = self.b.ins().iadd_imm_s(left, 1);
                self.count(segment, Some(ran));
            }
            let none = self.b.ins().iconst(types::I64, 0);
            self.b.def_var(self.steps, none);
            let code = self.unit.stop(Stop::StepLimit(loc));
            let code = self.b.ins().iconst(types::I32, i64::from(code));
            self.b.ins().jump(self.stop_block, &[BlockArg::Value(code)]);
            self.b.switch_to_block(go_on);
            let left = self.b.ins().isub(left, left_out);
            self.b.def_var(self.steps, left);
        }
        if let Some(segment) = segment {
            self.count(segment, Some(left_out));
        }
        let so_far = self.b.use_var(acc);
        site.fold.apply(&mut self.b, so_far, returned)
    }
}
