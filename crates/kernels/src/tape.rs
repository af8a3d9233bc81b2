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
//!
//! A tape counts the bytes it holds ([`Tape::held`]): its values (an
//! element's bytes each, as [`autobatch_types::ScalarType::byte_size`]
//! says), the instances' tapes it keeps, and what the lane's ancestors
//! held when it started (the forking lane's tape at the fork, the tape a
//! catching call set aside). So a lane's count is what its member holds
//! along the lane's path, whatever order an executor runs the instances in.

use autobatch_types::Tensor;

use crate::Fault;

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
    /// The bytes of the values on it and of the instances' tapes it keeps.
    bytes: usize,
    /// The bytes the lane's ancestors held when it started.
    below: usize,
}

/// A `tape_limit` fault when a tape holding `held` bytes holds more than
/// `bound` ([`Tape::held`]; executors check after each push).
pub fn within_bound(held: usize, bound: usize) -> Result<(), Fault> {
    if held > bound {
        Err(Fault::tape_limit(bound))
    } else {
        Ok(())
    }
}

/// The bytes of a value on a tape.
pub fn value_bytes(value: &Tensor) -> usize {
    value.len() * value.elem_type().byte_size()
}

impl Tape {
    /// An empty tape of a lane whose ancestors hold `below` bytes (a fork's
    /// instance, or a catching call's callee: the [`Tape::held`] of the
    /// tape it starts from).
    pub fn above(below: usize) -> Tape {
        Tape {
            below,
            ..Tape::default()
        }
    }

    /// The bytes the lane's member holds along the lane's path: this
    /// tape's values and kept instances' tapes, and its ancestors'.
    pub fn held(&self) -> usize {
        self.below + self.bytes
    }

    /// A `tape_limit` fault when the tape holds more than `bound` bytes.
    pub fn check(&self, bound: usize) -> Result<(), Fault> {
        within_bound(self.held(), bound)
    }

    pub fn push(&mut self, value: Tensor) {
        self.bytes += value_bytes(&value);
        self.entries.push(TapeEntry::Value(value));
    }

    /// Keeps the tapes of a `Save` fork's instances, in instance order.
    pub fn push_instances(&mut self, tapes: Vec<Tape>) {
        self.bytes += tapes.iter().map(|t| t.bytes).sum::<usize>();
        self.entries.push(TapeEntry::Instances(tapes));
    }

    /// The value pushed last, or `None` when the tape is empty or its last
    /// entry is a fork's (a derivation that does not balance its tape).
    pub fn pop(&mut self) -> Option<Tensor> {
        match self.entries.pop()? {
            TapeEntry::Value(v) => {
                self.bytes -= value_bytes(&v);
                Some(v)
            }
            TapeEntry::Instances(_) => None,
        }
    }

    /// The instances' tapes a `Save` fork of `count` instances left last,
    /// or `None` when the last entry is no such thing.
    pub fn pop_instances(&mut self, count: usize) -> Option<Vec<Tape>> {
        match self.entries.pop()? {
            TapeEntry::Instances(tapes) if tapes.len() == count => {
                self.bytes -= tapes.iter().map(|t| t.bytes).sum::<usize>();
                Some(tapes)
            }
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}
