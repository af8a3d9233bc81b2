//! Liveness of variables, per function, by the classic backward data-flow
//! analysis over the CFG. A variable is live at a point if some path from
//! that point reads it before writing it. The derivation (which variables a
//! backward block hands on), the passes (last reads, the explicit-stack
//! form) and the executors all read this one analysis.

use crate::{Block, EntityRef, Function, Op, Terminator, Var};

/// A set of variables of one function, as a bit set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarSet {
    bits: Vec<u64>,
}

impl VarSet {
    pub fn new(var_count: usize) -> Self {
        VarSet {
            bits: vec![0; var_count.div_ceil(64)],
        }
    }
    pub fn insert(&mut self, v: Var) -> bool {
        let (word, bit) = (v.index() / 64, v.index() % 64);
        let was = self.bits[word] >> bit & 1 == 1;
        self.bits[word] |= 1 << bit;
        !was
    }
    pub fn remove(&mut self, v: Var) {
        let (word, bit) = (v.index() / 64, v.index() % 64);
        self.bits[word] &= !(1 << bit);
    }
    pub fn contains(&self, v: Var) -> bool {
        let (word, bit) = (v.index() / 64, v.index() % 64);
        self.bits.get(word).is_some_and(|w| w >> bit & 1 == 1)
    }
    /// Adds every member of `other`; returns whether anything was added.
    pub fn union_with(&mut self, other: &VarSet) -> bool {
        let mut changed = false;
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            let merged = *a | *b;
            changed |= merged != *a;
            *a = merged;
        }
        changed
    }
    pub fn iter(&self) -> impl Iterator<Item = Var> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, word)| {
            (0..64)
                .filter(move |b| word >> b & 1 == 1)
                .map(move |b| Var::new(w * 64 + b))
        })
    }
}

/// Live variables at the entry and exit of every block of one function.
#[derive(Clone, Debug)]
pub struct Liveness {
    pub live_in: Vec<VarSet>,
    pub live_out: Vec<VarSet>,
}

impl Liveness {
    pub fn compute(function: &Function) -> Liveness {
        let n = function.vars.len();
        let blocks = function.blocks.len();
        let mut live_in = vec![VarSet::new(n); blocks];
        let mut live_out = vec![VarSet::new(n); blocks];
        let mut changed = true;
        while changed {
            changed = false;
            for (b, block) in function.blocks.iter().rev() {
                let mut out = VarSet::new(n);
                for s in block.term.successors() {
                    out.union_with(&live_in[s.index()]);
                }
                let mut live = out.clone();
                transfer_terminator(&block.term, &mut live);
                for op in block.ops.iter().rev() {
                    transfer_op(op, &mut live);
                }
                if live != live_in[b.index()] {
                    live_in[b.index()] = live;
                    changed = true;
                }
                live_out[b.index()] = out;
            }
        }
        Liveness { live_in, live_out }
    }

    /// The variables live just after each operation of `block` (index i: after op i).
    pub fn live_after_ops(&self, function: &Function, block: Block) -> Vec<VarSet> {
        let data = &function.blocks[block];
        let mut live = self.live_out[block.index()].clone();
        transfer_terminator(&data.term, &mut live);
        let mut after = vec![VarSet::new(0); data.ops.len()];
        for (i, op) in data.ops.iter().enumerate().rev() {
            after[i] = live.clone();
            transfer_op(op, &mut live);
        }
        after
    }
}

fn transfer_terminator(term: &Terminator, live: &mut VarSet) {
    for u in term.uses() {
        live.insert(*u);
    }
}

fn transfer_op(op: &Op, live: &mut VarSet) {
    for d in op.defs() {
        live.remove(*d);
    }
    for u in op.uses() {
        live.insert(*u);
    }
}
