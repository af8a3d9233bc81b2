//! A lane's tape: what the forward part of a derived function saves for
//! its backward part (`tape_push`, `tape_pop`), and what a taped fork
//! keeps of its instances (`TapeMode::Save`, `TapeMode::Restore`).
//!
//! Every executor keeps one [`Tape`] per lane (a member, or an instance of
//! a fork). A `Save` fork moves its instances' tapes, in instance order,
//! into one [`TapeEntry::Instances`] on the forking lane's tape; the
//! `Restore` fork of the backward part takes that entry off again and gives
//! instance `k` the tape of forward instance `k`. Values are moved, never
//! copied.

use autobatch_types::Tensor;

/// One entry of a [`Tape`].
#[derive(Clone, Debug)]
pub enum TapeEntry {
    /// A value pushed by `tape_push`.
    Value(Tensor),
    /// The tapes of a `Save` fork's instances, in instance order.
    Instances(Vec<Tape>),
}

/// A lane's tape, the value pushed last at the end.
#[derive(Clone, Debug, Default)]
pub struct Tape {
    entries: Vec<TapeEntry>,
}

impl Tape {
    pub fn push(&mut self, value: Tensor) {
        self.entries.push(TapeEntry::Value(value));
    }

    /// Keeps the tapes of a `Save` fork's instances, in instance order.
    pub fn push_instances(&mut self, tapes: Vec<Tape>) {
        self.entries.push(TapeEntry::Instances(tapes));
    }

    /// The value pushed last, or `None` when the tape is empty or its last
    /// entry is a fork's (a derivation that does not balance its tape).
    pub fn pop(&mut self) -> Option<Tensor> {
        match self.entries.pop()? {
            TapeEntry::Value(v) => Some(v),
            TapeEntry::Instances(_) => None,
        }
    }

    /// The instances' tapes a `Save` fork of `count` instances left last,
    /// or `None` when the last entry is no such thing.
    pub fn pop_instances(&mut self, count: usize) -> Option<Vec<Tape>> {
        match self.entries.pop()? {
            TapeEntry::Instances(tapes) if tapes.len() == count => Some(tapes),
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
