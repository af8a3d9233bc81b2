//! The control-flow-graph IR of autobatch (the form of TFP's autobatching
//! paper, its Figure 2).
//!
//! A [`Program`] is a table of [`Function`]s; a function is a table of basic
//! [`BlockData`]s over a table of typed variables. A block holds a list of
//! [`Op`]s (a [`Prim`]itive or a [`Call`](Op::Call)) and ends in one
//! [`Terminator`]: `Jump`, `Branch` or `Return`. Variables are mutable
//! registers (the IR is not SSA): `let mut x` assigned in a loop is one
//! variable written in several places. Tuples do not exist here: the
//! lowering flattens them into several variables, and a function takes and
//! returns lists of variables. Const generics do not exist either: the
//! lowering makes one copy of a generic function per instantiation.
//!
//! Entities are `u32` newtypes in typed tables ([`entity`]); the one text form
//! is written by [`print`] and read back by [`parse`]; the invariants are
//! checked by [`verify`].
//!
//! This crate must not know about syntax (`syn`), about executors or about
//! batching: it describes what one member computes, nothing more.

pub mod entity;
pub mod line;
pub mod liveness;
pub mod parse;
pub mod prim;
pub mod print;
pub mod verify;

pub use autobatch_types::{Dim, Loc, Scalar, ScalarType, SymbolId, TensorType, Type};
pub use entity::{EntityRef, EntityVec};
pub use prim::{
    AdjointKind, BinaryOp, CompareOp, HostPrim, Prim, ReduceOp, Signature, Spelling, StaticAdjoint,
    TernaryOp, UnaryOp,
};

entity!(
    /// A function of a program.
    FuncId,
    "f"
);
entity!(
    /// A basic block of a function.
    Block,
    "b"
);
entity!(
    /// A variable of a function.
    Var,
    "v"
);
entity!(
    /// A shared static (`extern "autobatch" { static X: ... }`).
    StaticId,
    "s"
);

/// A whole program: everything one member may execute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// Names of the symbolic dimensions, indexed by `SymbolId`.
    pub symbols: Vec<String>,
    pub statics: EntityVec<StaticId, StaticDecl>,
    pub functions: EntityVec<FuncId, Function>,
}

impl Program {
    /// Per function, whether a run of `entry` may execute it: whether its
    /// calls and forks reach it.
    pub fn reachable(&self, entry: FuncId) -> Vec<bool> {
        let mut seen = vec![false; self.functions.len()];
        let mut todo = vec![entry];
        while let Some(f) = todo.pop() {
            if f.index() >= seen.len() || std::mem::replace(&mut seen[f.index()], true) {
                continue;
            }
            for op in self.functions[f].blocks.values().flat_map(|b| &b.ops) {
                todo.extend(op.callees());
            }
        }
        seen
    }

    pub fn function_by_name(&self, name: &str) -> Option<FuncId> {
        self.functions
            .iter()
            .find(|(_, f)| f.name == name)
            .map(|(id, _)| id)
    }
    pub fn symbol_name(&self, s: SymbolId) -> String {
        self.symbols
            .get(s.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("sym{}", s.0))
    }
    /// A tensor type in source syntax, with symbolic dimensions by name.
    pub fn type_name(&self, t: &TensorType) -> String {
        let name = |s| self.symbol_name(s);
        let text = t.display(&name).to_string();
        text
    }
    pub fn static_type(&self, id: StaticId) -> Option<TensorType> {
        self.statics.get(id).map(|s| s.ty.clone())
    }
}

/// A shared static declared in an `extern "autobatch"` block.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticDecl {
    pub name: String,
    pub ty: TensorType,
    pub loc: Loc,
}

/// A named, structured parameter of a function, as written in the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: Type,
}

/// One function, after monomorphization and tuple flattening.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// The source name; instances of a const-generic function are named
    /// `name<3>`, `name<N>`, ... so that names stay unique.
    pub name: String,
    /// The parameters as written (with tuple types); `params` is their flattening.
    pub signature: Vec<Param>,
    /// The structured result type; `results` is its flattening.
    pub ret_type: Type,
    /// Flattened parameters, in order; each is a variable of this function.
    pub params: Vec<Var>,
    /// Flattened result types; every `Return` returns this many variables.
    pub results: Vec<TensorType>,
    pub vars: EntityVec<Var, VarData>,
    pub blocks: EntityVec<Block, BlockData>,
    /// Where the function is declared.
    pub loc: Loc,
    /// Whether its blocks count no steps: the backward part of a
    /// derivation, whose forward part counted them. Entering such a block
    /// never meets the step limit. (Its calls count depth as any call: the
    /// backward part's calls mirror the forward part's.)
    pub uncounted: bool,
}

impl Function {
    /// The entry block is always the first.
    pub const ENTRY: Block = Block(0);

    /// Whether entering block `b` counts a step: neither the function nor
    /// the block is uncounted.
    pub fn counts_step(&self, b: Block) -> bool {
        !self.uncounted && !self.blocks[b].uncounted
    }

    /// Whether the compiler derived this function from one of the user's
    /// (`f'grad`, `f'vjp@10`, `f'grad.b1`, `h'jacobian`): its name is not
    /// one the user wrote, and messages name it by [`Function::user_name`].
    pub fn is_derived(&self) -> bool {
        self.name.contains('\'')
    }

    /// The name of the user's function this one is or is derived from.
    pub fn user_name(&self) -> &str {
        user_function_name(&self.name)
    }

    /// The signature the flattened parameters imply when no tuple is
    /// involved: one parameter per variable, named as the variable (or
    /// `""`), of its type. The text form writes a `sig:` line only for a
    /// function whose `signature` or `ret_type` differs from these.
    pub fn flat_signature(&self) -> Vec<Param> {
        self.params
            .iter()
            .filter_map(|p| self.vars.get(*p))
            .map(|data| Param {
                name: data.name.clone().unwrap_or_default(),
                ty: Type::Tensor(data.ty.clone()),
            })
            .collect()
    }

    /// The result type the flattened results imply: the one tensor type, or
    /// the tuple of them (unit for none).
    pub fn flat_ret_type(&self) -> Type {
        match &self.results[..] {
            [one] => Type::Tensor(one.clone()),
            many => Type::Tuple(many.iter().cloned().map(Type::Tensor).collect()),
        }
    }
}

/// The name of the user's function that the function named `name` is or
/// is derived from: `f` for `f'grad`, `f'vjp@10` or `f'grad.b1`.
pub fn user_function_name(name: &str) -> &str {
    name.split('\'').next().unwrap_or(name)
}

/// A variable: its type and, when it comes from a source binding, its name.
#[derive(Clone, Debug, PartialEq)]
pub struct VarData {
    pub ty: TensorType,
    pub name: Option<String>,
}

/// A basic block: operations run in order, then the terminator.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockData {
    pub ops: Vec<Op>,
    pub term: Terminator,
    /// The source construct that opened this block (function body, loop
    /// header, branch arm); a member that runs out of steps on entering this
    /// block reports this location.
    pub loc: Loc,
    /// Whether entering this block counts no step (and so never meets the
    /// step limit): a block a derivation adds to a function whose own
    /// blocks take the steps, such as the choice at a call between its
    /// taped and its recomputed forward part. A block counts a step when
    /// neither it nor its function ([`Function::uncounted`]) is uncounted.
    pub uncounted: bool,
    /// Whether this block is a check arm ([`line`]): it only tests and
    /// faults, and whoever made it promises that it is entered whenever
    /// one of its checks would fail, so that entering it always gives the
    /// same faults.
    pub check_arm: bool,
}

impl BlockData {
    /// A block that counts its step.
    pub fn new(ops: Vec<Op>, term: Terminator, loc: Loc) -> BlockData {
        BlockData {
            ops,
            term,
            loc,
            uncounted: false,
            check_arm: false,
        }
    }

    /// The position of the block's last call, if that call is a call of
    /// function `id` (itself, when the block is `id`'s) that does not
    /// catch: the one call a tail call can be (a catching call never is:
    /// the member goes on after it).
    pub fn last_self_call(&self, id: FuncId) -> Option<usize> {
        let at = self
            .ops
            .iter()
            .rposition(|op| matches!(op, Op::Call { .. }))?;
        matches!(&self.ops[at], Op::Call { callee, catch: false, .. } if *callee == id)
            .then_some(at)
    }
}

/// An operation inside a block.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `dst = prim(args)`; `dst` is `None` only for primitives without result (`assert`).
    Prim {
        dst: Option<Var>,
        prim: Prim,
        args: Vec<Var>,
        loc: Loc,
    },
    /// `dsts = callee(args)`, flattened on both sides.
    ///
    /// With `catch` (the language's `catch(callee(args))`), `dsts[0]` is a
    /// `bool` that says whether the call completed, and `dsts[1..]` receive
    /// the callee's results: when a catchable member error
    /// ([`autobatch_types::ErrorKind::is_catchable`]) arises anywhere inside
    /// the call, the member goes on after it with `dsts[0] = false` and
    /// zeros in `dsts[1..]`.
    Call {
        dsts: Vec<Var>,
        callee: FuncId,
        args: Vec<Var>,
        loc: Loc,
        catch: bool,
    },
    /// `dsts = join(...)`, `map(...)` or `pfor(...)`: calls that run as
    /// concurrent **instances** of the member ([`Instances`] says which
    /// calls, with which of `args`). The meaning is the sequential
    /// evaluation: the instances in order, each run to completion before
    /// the next; the member's error is the first one that evaluation meets.
    /// Instance `k` draws from its own random stream, derived from the
    /// member's stream at the fork and `k`.
    ///
    /// `tape` says what becomes of the instances' tapes ([`TapeMode`]).
    Fork {
        dsts: Vec<Var>,
        args: Vec<Var>,
        instances: Instances,
        loc: Loc,
        tape: TapeMode,
    },
}

/// What a fork does with the tapes of its instances (the values the
/// forward part of a derived function saves for its backward part; every
/// lane, a member or an instance, has a tape of its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TapeMode {
    /// Each instance starts with an empty tape and leaves it empty.
    #[default]
    None,
    /// The forward part of a derivation: when the fork completes, the
    /// instances' tapes are kept, in instance order, as one entry on the
    /// forking lane's tape. Draws the fork's key as any fork does.
    Save,
    /// Its backward part: takes the entry a `Save` fork of as many
    /// instances left on the forking lane's tape and gives instance `k`
    /// the tape of that fork's instance `k` (which it empties). Draws no
    /// key from the member's stream (the instances draw nothing).
    Restore,
    /// A `None` fork run again by a recomputation (the backward part of a
    /// derivation running a callee's forward part once more): draws no
    /// key, so that the member's stream advances as in the first run (the
    /// instances of differentiated code draw nothing).
    Again,
    /// A `Save` fork run again by a recomputation: keeps the instances'
    /// tapes as `Save` does and draws no key, as `Again`.
    SaveAgain,
}

impl TapeMode {
    /// Whether the fork keeps its instances' tapes (`Save`, `SaveAgain`).
    pub fn saves(self) -> bool {
        matches!(self, TapeMode::Save | TapeMode::SaveAgain)
    }

    /// Whether the fork's instances have tapes of their own to keep or
    /// restore (every mode but `None` and `Again`).
    pub fn taped(self) -> bool {
        self.saves() || self == TapeMode::Restore
    }

    /// Whether the fork draws its key from the forking lane's stream
    /// (advancing it): `None` and `Save`.
    pub fn draws_key(self) -> bool {
        matches!(self, TapeMode::None | TapeMode::Save)
    }

    /// The mode of this fork in a recomputation: `Again` for `None`,
    /// `SaveAgain` for `Save` (the others unchanged).
    pub fn again(self) -> TapeMode {
        match self {
            TapeMode::None => TapeMode::Again,
            TapeMode::Save => TapeMode::SaveAgain,
            other => other,
        }
    }
}
/// The instances of an [`Op::Fork`].
#[derive(Clone, Debug, PartialEq)]
pub enum Instances {
    /// `join(f(a), g(b, c))`: one instance per call, in order; each call
    /// takes the next `args` of the fork in order (`a`, then `b, c`), and
    /// `dsts` are the calls' results, concatenated.
    Join(Vec<JoinCall>),
    /// `map(f, xs, extra..)` and `pfor::<N>(g, extra..)`: `count` instances
    /// of `callee`. Instance `k` passes, in order: `k` as `i64` if `index`;
    /// element `k` of each of the first `each` arguments (arrays of length
    /// `count`); the other arguments whole. `dsts[j]` is the array (of
    /// length `count`) of the callee's `j`-th result.
    Map {
        callee: FuncId,
        count: Dim,
        index: bool,
        each: usize,
    },
}

/// One call of a [`Instances::Join`].
#[derive(Clone, Debug, PartialEq)]
pub struct JoinCall {
    pub callee: FuncId,
    /// How many of the fork's arguments the call takes.
    pub args: usize,
    /// The call's own location (an instance that would exceed the stack
    /// depth stops the member here, as the call would).
    pub loc: Loc,
}

/// One instance of a fork, as a call: its callee, and how it gets each
/// parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceCall<'a> {
    pub callee: FuncId,
    pub args: Vec<InstanceArg>,
    /// The fork's destinations this instance's results go to (for `map`, an
    /// element of each).
    pub dsts: &'a [Var],
    /// Where a stack overflow of the instance is located: the call in a
    /// `join`, the fork itself for a `map`.
    pub loc: Option<Loc>,
}

/// How an instance gets one parameter: from a variable `V` of the forking
/// function (of the IR; the explicit-stack form has its own variables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceArg<V = Var> {
    /// The variable itself.
    Whole(V),
    /// Element `k` of the variable (an array of the fork's count).
    Element(V),
    /// `k` as an `i64`.
    Index,
}

impl<V> InstanceArg<V> {
    /// The same argument, its variable renamed by `f`.
    pub fn map<W>(self, f: impl FnOnce(V) -> W) -> InstanceArg<W> {
        match self {
            InstanceArg::Whole(v) => InstanceArg::Whole(f(v)),
            InstanceArg::Element(v) => InstanceArg::Element(f(v)),
            InstanceArg::Index => InstanceArg::Index,
        }
    }

    /// The variable read, if any (none for the index).
    pub fn var(&self) -> Option<&V> {
        match self {
            InstanceArg::Whole(v) | InstanceArg::Element(v) => Some(v),
            InstanceArg::Index => None,
        }
    }
}

impl Instances {
    /// Where the fork stops a member whose instances would exceed the stack
    /// depth: at the first instance the sequential evaluation starts, so at
    /// the first call of a `join`, or at the fork (`fork_loc`) for a `map`.
    pub fn overflow_loc(&self, fork_loc: Loc) -> Loc {
        match self {
            Instances::Join(calls) => calls.first().map_or(fork_loc, |c| c.loc),
            Instances::Map { .. } => fork_loc,
        }
    }
    /// The callees, once per call of a `join`, once for a `map`.
    pub fn callees(&self) -> Vec<FuncId> {
        match self {
            Instances::Join(calls) => calls.iter().map(|c| c.callee).collect(),
            Instances::Map { callee, .. } => vec![*callee],
        }
    }
}

impl Op {
    pub fn loc(&self) -> Loc {
        match self {
            Op::Prim { loc, .. } | Op::Call { loc, .. } | Op::Fork { loc, .. } => *loc,
        }
    }
    /// The variables this operation reads.
    pub fn uses(&self) -> &[Var] {
        match self {
            Op::Prim { args, .. } | Op::Call { args, .. } | Op::Fork { args, .. } => args,
        }
    }
    /// The variables that receive a call's or fork's results: all of
    /// `dsts`, or `dsts[1..]` for a catching call. Empty for a primitive.
    pub fn call_results(&self) -> &[Var] {
        match self {
            Op::Prim { .. } => &[],
            Op::Call {
                dsts, catch: true, ..
            } => &dsts[1..],
            Op::Call { dsts, .. } | Op::Fork { dsts, .. } => dsts,
        }
    }
    /// The variables this operation writes.
    pub fn defs(&self) -> &[Var] {
        match self {
            Op::Prim { dst, .. } => dst.as_slice(),
            Op::Call { dsts, .. } | Op::Fork { dsts, .. } => dsts,
        }
    }
    /// The functions this operation calls (a call's callee, a fork's callees).
    pub fn callees(&self) -> Vec<FuncId> {
        match self {
            Op::Prim { .. } => Vec::new(),
            Op::Call { callee, .. } => vec![*callee],
            Op::Fork { instances, .. } => instances.callees(),
        }
    }
}

/// The instances of a fork one by one: the calls of a `join` in order, or a
/// `map`'s one call (the same for every `k`). `program` gives the callees'
/// result counts (to split a `join`'s destinations).
pub fn fork_calls<'a>(
    program: &Program,
    dsts: &'a [Var],
    args: &[Var],
    instances: &Instances,
) -> Vec<InstanceCall<'a>> {
    match instances {
        Instances::Join(calls) => {
            let (mut next_arg, mut next_dst) = (0, 0);
            calls
                .iter()
                .map(|call| {
                    let results = program
                        .functions
                        .get(call.callee)
                        .map_or(0, |f| f.results.len());
                    let taken = args.get(next_arg..next_arg + call.args).unwrap_or(&[]);
                    let dst_end = (next_dst + results).min(dsts.len());
                    let out = InstanceCall {
                        callee: call.callee,
                        args: taken.iter().map(|a| InstanceArg::Whole(*a)).collect(),
                        dsts: &dsts[next_dst.min(dst_end)..dst_end],
                        loc: Some(call.loc),
                    };
                    next_arg += call.args;
                    next_dst = dst_end;
                    out
                })
                .collect()
        }
        Instances::Map {
            callee,
            index,
            each,
            ..
        } => {
            let mut passed = Vec::with_capacity(args.len() + 1);
            if *index {
                passed.push(InstanceArg::Index);
            }
            for (i, a) in args.iter().enumerate() {
                passed.push(if i < *each {
                    InstanceArg::Element(*a)
                } else {
                    InstanceArg::Whole(*a)
                });
            }
            vec![InstanceCall {
                callee: *callee,
                args: passed,
                dsts,
                loc: None,
            }]
        }
    }
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Terminator {
    Jump(Block),
    /// Go to `then_block` if `cond` (a `bool` scalar) is true, else to `else_block`.
    Branch {
        cond: Var,
        then_block: Block,
        else_block: Block,
    },
    Return(Vec<Var>),
}

impl Terminator {
    pub fn successors(&self) -> Vec<Block> {
        match self {
            Terminator::Jump(b) => vec![*b],
            Terminator::Branch {
                then_block,
                else_block,
                ..
            } => vec![*then_block, *else_block],
            Terminator::Return(_) => vec![],
        }
    }
    pub fn uses(&self) -> &[Var] {
        match self {
            Terminator::Jump(_) => &[],
            Terminator::Branch { cond, .. } => std::slice::from_ref(cond),
            Terminator::Return(vars) => vars,
        }
    }
}
