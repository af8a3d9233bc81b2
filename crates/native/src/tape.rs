//! A member's tape in native code (`tape_push`, `tape_pop`, taped forks),
//! kept as bytes so that a push or a pop allocates nothing once the tape
//! has grown to its size.
//!
//! A tape holds two stacks: the bytes of the values pushed, one after the
//! other, each from a multiple of 8 bytes (a pop knows its value's size
//! from its type, so no lengths are kept; the padding is not counted as
//! held), and the instances' tapes of each `Save` fork, in the order the
//! forks ended. A derivation pops values and forks' tapes in the reverse
//! of the order it pushed them, so the two stacks give each pop what the
//! one sequence of entries of `autobatch_kernels::Tape` would.
//!
//! The tapes of forks' instances come from a spare list of the thread's
//! ([`Tape::spare`]) and go back to it when their backward instance ends
//! ([`Tape::give_back`]), so a run reuses the memory of the runs before it
//! on the same thread.
//!
//! A tape counts what it holds as `autobatch_kernels::Tape::held` does
//! ([`Tape::held`]): its values, its forks' instances' tapes, and what the
//! lane's ancestors held when it started.

use std::cell::RefCell;

#[derive(Debug, Default)]
pub(crate) struct Tape {
    /// The values pushed, their bytes in order, each padded to a multiple
    /// of 8 bytes (so that a value's bytes are as aligned as the tape's
    /// memory, for native code to read them in place).
    bytes: Vec<u8>,
    /// The bytes of padding in `bytes`.
    padding: usize,
    /// Per `Save` fork, its instances' tapes in instance order.
    forks: Vec<Vec<Tape>>,
    /// The bytes the tapes in `forks` hold.
    fork_bytes: usize,
    /// The bytes the lane's ancestors held when it started.
    below: usize,
}

/// Spare tapes and lists of tapes of a thread (`Tape::spare`).
#[derive(Default)]
struct Spares {
    tapes: Vec<Tape>,
    lists: Vec<Vec<Tape>>,
}

/// The most spare tapes (and lists) a thread keeps.
const MOST_SPARES: usize = 1 << 14;
/// The largest tape a thread keeps as a spare, in bytes.
const LARGEST_SPARE: usize = 1 << 20;

thread_local! {
    static SPARES: RefCell<Spares> = RefCell::new(Spares::default());
}

impl Tape {
    /// An empty tape, with the memory of one given back on this thread if any.
    pub fn spare() -> Tape {
        SPARES
            .with(|s| s.borrow_mut().tapes.pop())
            .unwrap_or_default()
    }

    /// An empty tape ([`Tape::spare`]) of a lane whose ancestors hold
    /// `below` bytes (a taped fork's instance, a catching call's callee).
    pub fn spare_above(below: usize) -> Tape {
        Tape {
            below,
            ..Tape::spare()
        }
    }

    /// The bytes the lane's member holds along the lane's path: this
    /// tape's values and forks' tapes, and its ancestors'.
    pub fn held(&self) -> usize {
        self.below + self.own()
    }

    /// The bytes of this tape's values and forks' tapes.
    fn own(&self) -> usize {
        self.bytes.len() - self.padding + self.fork_bytes
    }

    /// An empty list for a fork's instances' tapes, likewise.
    pub fn spare_list() -> Vec<Tape> {
        SPARES
            .with(|s| s.borrow_mut().lists.pop())
            .unwrap_or_default()
    }

    /// Keeps `tape`'s memory for [`Tape::spare`] (its contents are dropped).
    pub fn give_back(mut tape: Tape) {
        tape.clear();
        let bytes = tape.bytes.capacity();
        if bytes > LARGEST_SPARE || bytes == 0 && tape.forks.capacity() == 0 {
            return;
        }
        SPARES.with(|s| {
            let mut s = s.borrow_mut();
            if s.tapes.len() < MOST_SPARES {
                s.tapes.push(tape);
            }
        });
    }

    /// Keeps an emptied list's memory for [`Tape::spare_list`].
    pub fn give_back_list(mut list: Vec<Tape>) {
        for tape in list.drain(..) {
            Tape::give_back(tape);
        }
        SPARES.with(|s| {
            let mut s = s.borrow_mut();
            if s.lists.len() < MOST_SPARES {
                s.lists.push(list);
            }
        });
    }

    /// Pushes a value's bytes (a scalar's as one word, not a call of
    /// `memcpy`).
    pub fn push(&mut self, value: &[u8]) {
        match <&[u8; 8]>::try_from(value) {
            Ok(word) => self.bytes.extend_from_slice(word),
            Err(_) => {
                self.bytes.extend_from_slice(value);
                let pad = value.len().next_multiple_of(8) - value.len();
                self.bytes.resize(self.bytes.len() + pad, 0);
                self.padding += pad;
            }
        }
    }

    /// Pops the value pushed last, of `into.len()` bytes, into `into`;
    /// false when fewer bytes are on the tape.
    pub fn pop(&mut self, into: &mut [u8]) -> bool {
        let padded = into.len().next_multiple_of(8);
        let Some(start) = self.bytes.len().checked_sub(padded) else {
            return false;
        };
        match <&mut [u8; 8]>::try_from(&mut *into) {
            Ok(word) => word.copy_from_slice(&self.bytes[start..start + 8]),
            Err(_) => into.copy_from_slice(&self.bytes[start..start + into.len()]),
        }
        self.bytes.truncate(start);
        self.padding -= padded - into.len();
        true
    }

    /// Pops the value pushed last, of `bytes` bytes, and gives the address
    /// of its bytes, which stay as they are until the next push; `None`
    /// when fewer bytes are on the tape.
    pub fn pop_in_place(&mut self, bytes: usize) -> Option<*const u8> {
        let padded = bytes.next_multiple_of(8);
        let start = self.bytes.len().checked_sub(padded)?;
        self.bytes.truncate(start);
        self.padding -= padded - bytes;
        // SAFETY: `start` is within the tape's memory (its old length).
        Some(unsafe { self.bytes.as_ptr().add(start) })
    }

    /// Keeps the tapes of a `Save` fork's instances, in instance order.
    pub fn push_instances(&mut self, tapes: Vec<Tape>) {
        self.fork_bytes += tapes.iter().map(Tape::own).sum::<usize>();
        self.forks.push(tapes);
    }

    /// The instances' tapes a `Save` fork of `count` instances left last,
    /// or `None` when there is no such thing.
    pub fn pop_instances(&mut self, count: usize) -> Option<Vec<Tape>> {
        match self.forks.pop()? {
            tapes if tapes.len() == count => {
                self.fork_bytes -= tapes.iter().map(Tape::own).sum::<usize>();
                Some(tapes)
            }
            _ => None,
        }
    }

    /// Whether nothing is on the tape (neither values nor forks' tapes).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.forks.is_empty()
    }

    /// Empties the tape (keeping its memory); the forks' tapes go back to
    /// the spares.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.padding = 0;
        self.fork_bytes = 0;
        self.below = 0;
        for list in self.forks.drain(..) {
            Tape::give_back_list(list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_forks_come_off_in_reverse() {
        let mut tape = Tape::spare();
        tape.push(&[1, 2, 3]);
        let mut instances = Tape::spare_list();
        let mut first = Tape::spare();
        first.push(&[9]);
        instances.push(first);
        instances.push(Tape::spare());
        tape.push_instances(instances);
        tape.push(&[4, 5]);
        let mut two = [0; 2];
        assert!(tape.pop(&mut two));
        assert_eq!(two, [4, 5]);
        let mut instances = tape.pop_instances(2).expect("the fork's tapes");
        let mut one = [0; 1];
        assert!(instances[0].pop(&mut one));
        assert_eq!(one, [9]);
        Tape::give_back_list(instances);
        let mut nine = [0; 9];
        assert!(!tape.pop(&mut nine), "three bytes (in eight) are left");
        let mut three = [0; 3];
        assert!(tape.pop(&mut three));
        assert_eq!(three, [1, 2, 3]);
        assert!(tape.pop_instances(1).is_none());
        assert!(tape.is_empty());
    }

    #[test]
    fn values_start_at_multiples_of_eight_and_padding_is_not_held() {
        let mut tape = Tape::spare();
        tape.push(&[7]);
        tape.push(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(tape.held(), 13);
        let at = tape.pop_in_place(12).expect("twelve bytes");
        // SAFETY: nothing was pushed since the pop.
        let popped = unsafe { std::slice::from_raw_parts(at, 12) };
        assert_eq!(popped, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(tape.held(), 1);
        let mut one = [0];
        assert!(tape.pop(&mut one));
        assert_eq!((one, tape.held()), ([7], 0));
    }
}
