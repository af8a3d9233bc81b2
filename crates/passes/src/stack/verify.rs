//! The verifier of the explicit-stack form: the invariants that make a
//! lowered program compute what the IR computes, whatever the recursion.
//!
//! The program-counter strategy keeps one copy of each variable per member
//! (no frames): a nested activation of a function overwrites the variables
//! of the activation that called it, and only the explicit `push`/`pop`
//! pairs bring them back. A mistake there gives members wrong values without
//! any error, so the lowering's output is checked, like the IR is after every
//! pass. Invariants, checked along every path of every function:
//!
//! 1. **Balance.** Each full variable's stack height, counted from the
//!    function's entry, is the same on every path into a block, never goes
//!    below zero (a `pop` or `peek` never reaches a value its caller saved),
//!    and is zero again at every `return` (a call leaves the stacks as it
//!    found them). Only full variables have stacks.
//! 2. **No stale read.** A variable is read (by an operation, a branch, a
//!    `push`, or as a callee's parameter at a call) only while it holds this
//!    activation's value: it was written on every path to the read and not
//!    overwritten since. A call overwrites every variable that the callee,
//!    or anything it calls, writes (its parameters, its variables, its result
//!    registers and whatever its `pop`s restore), except invariant variables,
//!    which hold the same value in every activation; a `pop` or `peek`
//!    restores this activation's value. The callee's result registers hold
//!    its results after the call.
//! 3. **Temporaries stay in their block.** A temporary is never read in a
//!    block other than the one that wrote it (the executor keeps no value
//!    of a temporary across steps).
//! 4. **Returns return.** Every result register of the function holds this
//!    activation's value at every `return`.
//! 5. **Targets are sound.** Jumps, branches, continuations and recovery
//!    blocks stay inside the function; `push_jump` targets the entry of its
//!    callee. A catching call's recovery block starts with the stacks as the
//!    call found them and none of the callee's results.
//! 6. **Forks.** Each instance starts at its callee's entry, with every
//!    parameter of the callee given and every result register taken; what
//!    the fork passes is valid in this activation. Instances run in rows of
//!    their own, so a fork overwrites nothing of the forking activation and
//!    leaves its stacks as they were.
//!
//! A violation is a compiler bug, never the user's fault.

use std::collections::VecDeque;
use std::fmt;

use autobatch_ir::{EntityRef, EntityVec, FuncId};

use super::{
    GlobalVar, LoweredArg, LoweredFork, LoweredOp, LoweredProgram, LoweredTerm, PcBlock, VarClass,
};

/// A broken invariant of the explicit-stack form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StackVerifyError {
    pub function: String,
    pub block: PcBlock,
    pub message: String,
}

impl fmt::Display for StackVerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stack verifier: fn {} {}: {}",
            self.function, self.block, self.message
        )
    }
}

/// Checks every invariant of the module doc on `program`; lists every violation.
pub fn verify_lowered(program: &LoweredProgram) -> Result<(), Vec<StackVerifyError>> {
    let clobbers = Clobbers::compute(program);
    let mut errors = Vec::new();
    for func in program.functions.keys() {
        FunctionCheck::new(program, &clobbers, func, &mut errors).run();
    }
    // A block is checked again when what flows into it shrinks: keep each
    // violation once.
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.clone()));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// A set of global variables, as bits.
#[derive(Clone, Debug, PartialEq, Eq)]
struct VarBits {
    words: Vec<u64>,
}

impl VarBits {
    fn empty(len: usize) -> Self {
        VarBits {
            words: vec![0; len.div_ceil(64)],
        }
    }
    fn insert(&mut self, x: GlobalVar) {
        self.words[x.index() / 64] |= 1 << (x.index() % 64);
    }
    fn contains(&self, x: GlobalVar) -> bool {
        self.words[x.index() / 64] >> (x.index() % 64) & 1 == 1
    }
    /// Adds every member of `other`; returns whether anything was added.
    fn union_with(&mut self, other: &VarBits) -> bool {
        let mut changed = false;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            changed |= *a | *b != *a;
            *a |= *b;
        }
        changed
    }
    /// Keeps only members of `other`; returns whether anything was removed.
    fn intersect_with(&mut self, other: &VarBits) -> bool {
        let mut changed = false;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            changed |= *a & *b != *a;
            *a &= *b;
        }
        changed
    }
    fn subtract(&mut self, other: &VarBits) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !*b;
        }
    }
}

/// What a call to each function may overwrite: the variables written by the
/// function and by everything it reaches through calls, invariants excepted.
struct Clobbers {
    by_function: EntityVec<FuncId, VarBits>,
}

impl Clobbers {
    fn compute(program: &LoweredProgram) -> Clobbers {
        let var_count = program.vars.len();
        let function_count = program.functions.len();
        let mut writes: Vec<VarBits> = vec![VarBits::empty(var_count); function_count];
        let mut callees: Vec<Vec<FuncId>> = vec![Vec::new(); function_count];
        for block in program.blocks.values() {
            let own = &mut writes[block.func.index()];
            for op in &block.ops {
                if let Some(x) = written_by(op) {
                    if program.vars[x].class != VarClass::Invariant {
                        own.insert(x);
                    }
                }
            }
            if let LoweredTerm::PushJump { callee, .. } = block.term {
                callees[block.func.index()].push(callee);
            }
        }
        // The union over reachable functions, to a fixed point.
        let mut by_function = writes;
        let mut changed = true;
        while changed {
            changed = false;
            for f in 0..function_count {
                for g in callees[f].clone() {
                    if g.index() != f {
                        let reached = by_function[g.index()].clone();
                        changed |= by_function[f].union_with(&reached);
                    }
                }
            }
        }
        let mut table = EntityVec::new();
        for bits in by_function {
            table.push(bits);
        }
        Clobbers { by_function: table }
    }
}

/// The variable an operation writes, if any.
fn written_by(op: &LoweredOp) -> Option<GlobalVar> {
    match op {
        LoweredOp::Prim { dst, .. } => *dst,
        LoweredOp::Pop(x) | LoweredOp::Peek(x) => Some(*x),
        LoweredOp::Push(_) => None,
    }
}

/// What is known at a program point of one activation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    /// Stack height of each full variable, counted from the function's entry.
    heights: Vec<u32>,
    /// Variables that hold this activation's value.
    valid: VarBits,
}

/// The data-flow check of one function's blocks.
struct FunctionCheck<'a> {
    program: &'a LoweredProgram,
    clobbers: &'a Clobbers,
    func: FuncId,
    /// Index into `State::heights` of each full variable.
    stack_index: Vec<Option<usize>>,
    /// Invariant variables: never overwritten by a call.
    invariants: VarBits,
    temporaries: VarBits,
    errors: &'a mut Vec<StackVerifyError>,
}

impl<'a> FunctionCheck<'a> {
    fn new(
        program: &'a LoweredProgram,
        clobbers: &'a Clobbers,
        func: FuncId,
        errors: &'a mut Vec<StackVerifyError>,
    ) -> Self {
        let mut stack_index = vec![None; program.vars.len()];
        let mut invariants = VarBits::empty(program.vars.len());
        let mut temporaries = VarBits::empty(program.vars.len());
        let mut full = 0;
        for (x, var) in program.vars.iter() {
            match var.class {
                VarClass::Full => {
                    stack_index[x.index()] = Some(full);
                    full += 1;
                }
                // Written once per member, before the entry runs: always valid.
                VarClass::Invariant | VarClass::Member(_) => invariants.insert(x),
                VarClass::Temporary => temporaries.insert(x),
                VarClass::Register => {}
            }
        }
        FunctionCheck {
            program,
            clobbers,
            func,
            stack_index,
            invariants,
            temporaries,
            errors,
        }
    }

    fn error(&mut self, block: PcBlock, message: String) {
        self.errors.push(StackVerifyError {
            function: self.program.functions[self.func].name.clone(),
            block,
            message,
        });
    }

    fn entry_state(&self) -> State {
        let full = self.stack_index.iter().flatten().count();
        let mut valid = VarBits::empty(self.program.vars.len());
        for p in &self.program.functions[self.func].params {
            valid.insert(*p);
        }
        State {
            heights: vec![0; full],
            valid,
        }
    }

    /// Forward data flow to a fixed point: heights must agree where paths
    /// meet; a variable is valid where it is valid on every incoming path.
    fn run(mut self) {
        let entry = self.program.functions[self.func].entry;
        let mut states: Vec<Option<State>> = vec![None; self.program.blocks.len()];
        states[entry.index()] = Some(self.entry_state());
        let mut queue = VecDeque::from([entry]);
        let mut reported_heights = vec![false; self.program.blocks.len()];
        while let Some(pc) = queue.pop_front() {
            let Some(state) = states[pc.index()].clone() else {
                continue;
            };
            for (next, out) in self.transfer(pc, state) {
                if !self.in_function(pc, next) {
                    continue;
                }
                match &mut states[next.index()] {
                    slot @ None => {
                        *slot = Some(out);
                        queue.push_back(next);
                    }
                    Some(known) => {
                        if known.heights != out.heights && !reported_heights[next.index()] {
                            reported_heights[next.index()] = true;
                            self.error(
                                next,
                                format!("stack heights differ between paths into {next} (a push or pop is unbalanced)"),
                            );
                        }
                        if known.valid.intersect_with(&out.valid) {
                            queue.push_back(next);
                        }
                    }
                }
            }
        }
    }

    fn in_function(&mut self, from: PcBlock, to: PcBlock) -> bool {
        if to.index() >= self.program.blocks.len() || self.program.blocks[to].func != self.func {
            self.error(from, format!("{to} is not a block of this function"));
            return false;
        }
        true
    }

    /// Runs one block on `state`; returns the successors with their states.
    fn transfer(&mut self, pc: PcBlock, mut state: State) -> Vec<(PcBlock, State)> {
        let program = self.program;
        let block = &program.blocks[pc];
        state.valid.subtract(&self.temporaries);
        for (k, op) in block.ops.iter().enumerate() {
            let at = format!("op {k}");
            match op {
                LoweredOp::Prim { dst, args, .. } => {
                    for a in args {
                        self.check_read(pc, &state, *a, &at);
                    }
                    if let Some(d) = dst {
                        state.valid.insert(*d);
                    }
                }
                LoweredOp::Push(x) => {
                    self.check_read(pc, &state, *x, &at);
                    if let Some(s) = self.stack_of(pc, *x, "push") {
                        state.heights[s] += 1;
                    }
                }
                LoweredOp::Pop(x) | LoweredOp::Peek(x) => {
                    let what = if matches!(op, LoweredOp::Pop(_)) {
                        "pop"
                    } else {
                        "peek"
                    };
                    if let Some(s) = self.stack_of(pc, *x, what) {
                        if state.heights[s] == 0 {
                            self.error(pc, format!("{at}: {what} {x} with nothing pushed in this activation (it would take a value its caller saved)"));
                        } else if what == "pop" {
                            state.heights[s] -= 1;
                        }
                    }
                    state.valid.insert(*x);
                }
            }
        }
        match &block.term {
            LoweredTerm::Jump(t) => vec![(*t, state)],
            LoweredTerm::Branch {
                cond,
                then_block,
                else_block,
            } => {
                self.check_read(pc, &state, *cond, "branch");
                vec![(*then_block, state.clone()), (*else_block, state)]
            }
            LoweredTerm::PushJump {
                callee,
                target,
                return_to,
                recover,
                ..
            } => {
                self.check_call(pc, &state, *callee, *target);
                state.valid.subtract(&self.clobbers.by_function[*callee]);
                // A member that faulted inside a catching call goes on at
                // `recover`, its stacks cut back to their heights here, and
                // no result of the callee.
                let recovered = recover.map(|r| (r, state.clone()));
                for r in &program.functions[*callee].results {
                    state.valid.insert(*r);
                }
                std::iter::once((*return_to, state))
                    .chain(recovered)
                    .collect()
            }
            LoweredTerm::Return => {
                self.check_return(pc, &state);
                Vec::new()
            }
            LoweredTerm::Fork(fork) => {
                self.check_fork(pc, &state, fork);
                // The instances run in rows of their own: nothing of this
                // activation is overwritten, and the destinations are set.
                for call in &fork.calls {
                    for (_, d) in &call.results {
                        state.valid.insert(*d);
                    }
                }
                vec![(fork.then, state)]
            }
        }
    }

    /// A fork reads what it passes from this activation, and each instance
    /// starts at its callee's entry with every parameter given and every
    /// result taken.
    fn check_fork(&mut self, pc: PcBlock, state: &State, fork: &LoweredFork) {
        for call in &fork.calls {
            let function = &self.program.functions[call.callee];
            if call.target != function.entry {
                self.error(
                    pc,
                    format!(
                        "fork to {}, not the entry {} of {}",
                        call.target, function.entry, function.name
                    ),
                );
            }
            let params: Vec<GlobalVar> = call.params.iter().map(|(p, _)| *p).collect();
            let results: Vec<GlobalVar> = call.results.iter().map(|(r, _)| *r).collect();
            if params != function.params || results != function.results {
                self.error(
                    pc,
                    format!(
                        "fork: the parameters or results of {} do not match",
                        function.name
                    ),
                );
            }
            for (_, arg) in &call.params {
                if let LoweredArg::Whole(v) | LoweredArg::Element(v) = arg {
                    self.check_read(pc, state, *v, "the fork's arguments");
                }
            }
        }
    }

    fn stack_of(&mut self, pc: PcBlock, x: GlobalVar, what: &str) -> Option<usize> {
        let index = self.stack_index[x.index()];
        if index.is_none() {
            let class = self.program.vars[x].class.name();
            self.error(
                pc,
                format!("{what} {x}, a {class} variable, which has no stack"),
            );
        }
        index
    }

    fn check_read(&mut self, pc: PcBlock, state: &State, x: GlobalVar, at: &str) {
        // An invariant holds the same value in every activation: where the
        // IR verifier lets it be read, no call can make it stale.
        if state.valid.contains(x) || self.invariants.contains(x) {
            return;
        }
        let var = &self.program.vars[x];
        let name = var.name.as_deref().unwrap_or("a compiler temporary");
        let why = if var.class == VarClass::Temporary {
            "a temporary not written earlier in this block"
        } else {
            "not written on every path in this activation, or overwritten by a call since"
        };
        self.error(pc, format!("{at}: reads {x} ({name}), {why}"));
    }

    fn check_call(&mut self, pc: PcBlock, state: &State, callee: FuncId, target: PcBlock) {
        let function = &self.program.functions[callee];
        if target != function.entry {
            self.error(
                pc,
                format!(
                    "push_jump to {target}, not the entry {} of {}",
                    function.entry, function.name
                ),
            );
        }
        for p in function.params.clone() {
            self.check_read(pc, state, p, "the call's arguments");
        }
    }

    fn check_return(&mut self, pc: PcBlock, state: &State) {
        let unbalanced: Vec<String> = self
            .program
            .vars
            .keys()
            .filter_map(|x| {
                let s = self.stack_index[x.index()]?;
                (state.heights[s] != 0).then(|| format!("{x} (height {})", state.heights[s]))
            })
            .collect();
        if !unbalanced.is_empty() {
            self.error(
                pc,
                format!("return leaves pushed values: {}", unbalanced.join(", ")),
            );
        }
        for r in self.program.functions[self.func].results.clone() {
            self.check_read(pc, state, r, "return");
        }
    }
}
