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
//!
//! Native code pushes and pops scalars itself (`translate::prims`): the
//! running tape's top, limit, padding and start are at fixed offsets of
//! the runner's context (`crate::offsets::TAPE_TOP` and the others). The
//! limit is where the member's tape would hold the most it has held so far
//! (or its bound, if that is less), or the end of the memory if that comes
//! first: a push that ends below it can neither change the member's most
//! (`tape_bytes`) nor fault. A push past it calls the host, which grows
//! the memory, counts the most, checks the bound and moves the limit up
//! (`Context::note_tape`); anything that lowers that point lowers the
//! limit with it.

use std::cell::RefCell;

/// A member's tape. Native code pushes and pops scalars itself through the
/// first four fields (at fixed offsets, [`TOP`], [`LIMIT`], [`PADDING`],
/// [`START`]):
/// a push of `n` bytes (a multiple of 8) while `top + n <= limit` stores
/// at `top` and moves it up; anything else calls the host.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Tape {
    /// The end of the values pushed: an address in `memory`.
    top: *mut u8,
    /// How far native code may push by itself: never past the end of
    /// `memory`, and never so far that the member's tape would hold more
    /// than its most so far or its bound ([`Tape::fit_limit`]), so that a
    /// push below it changes neither the member's most nor faults. An
    /// operation that lowers that point lowers it too.
    limit: *mut u8,
    /// The bytes of padding among the values.
    padding: usize,
    /// The start of `memory`.
    start: *mut u8,
    /// The values pushed, their bytes in order from the start, each padded
    /// to a multiple of 8 bytes (so that a value's bytes are as aligned as
    /// the tape's memory, for native code to read them in place); its
    /// length is the tape's capacity.
    memory: Vec<u64>,
    /// Per `Save` fork, its instances' tapes in instance order.
    forks: Vec<Vec<Tape>>,
    /// The bytes the tapes in `forks` hold.
    fork_bytes: usize,
    /// The bytes the lane's ancestors held when it started.
    below: usize,
    /// The marks of `tape_mark` not yet settled, the latest last.
    marks: Vec<Mark>,
}

/// Where a tape was when it was marked (`tape_mark`).
#[derive(Clone, Copy, Debug)]
struct Mark {
    /// The bytes of its values, padding included.
    len: usize,
    padding: usize,
    forks: usize,
}

/// Offsets in a [`Tape`] that native code reads and writes.
pub(crate) const TOP: usize = std::mem::offset_of!(Tape, top);
pub(crate) const LIMIT: usize = std::mem::offset_of!(Tape, limit);
pub(crate) const PADDING: usize = std::mem::offset_of!(Tape, padding);
pub(crate) const START: usize = std::mem::offset_of!(Tape, start);

// SAFETY: `top` and `limit` point into the tape's own `memory`, which
// moves with it.
unsafe impl Send for Tape {}

impl Default for Tape {
    fn default() -> Tape {
        let mut memory = Vec::<u64>::new();
        let start = memory.as_mut_ptr().cast::<u8>();
        Tape {
            top: start,
            limit: start,
            padding: 0,
            start,
            memory,
            forks: Vec::new(),
            fork_bytes: 0,
            below: 0,
            marks: Vec::new(),
        }
    }
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
        self.len() - self.padding + self.fork_bytes
    }

    /// The bytes of the values, padding included.
    fn len(&self) -> usize {
        self.top as usize - self.start as usize
    }

    /// Moves the top to `len` bytes from the start.
    fn set_len(&mut self, len: usize) {
        debug_assert!(len <= 8 * self.memory.len());
        // SAFETY: `len` is within the memory.
        self.top = unsafe { self.start.add(len) };
    }

    /// Lets native code push until the member's tape holds `most` bytes
    /// (the least of its most so far and its bound) or the memory is full.
    pub fn fit_limit(&mut self, most: usize) {
        let len = most
            .saturating_add(self.padding)
            .saturating_sub(self.below + self.fork_bytes)
            .min(8 * self.memory.len());
        // SAFETY: `len` is within the memory.
        self.limit = unsafe { self.start.add(len) };
    }

    /// Lowers the limit by `bytes` (the point where the tape would hold
    /// the member's most came down by as much).
    fn lower_limit(&mut self, bytes: usize) {
        self.limit = self.limit.wrapping_sub(bytes);
    }

    /// Room for `bytes` more bytes of values (the limit goes to the top:
    /// the host raises it again, [`Tape::fit_limit`]). The memory grows to
    /// a power of two of words, so that a tape that held up to
    /// [`LARGEST_SPARE`] bytes is kept as a spare whatever the size of its
    /// first value: the next run's member then pushes into memory already
    /// grown and touched, instead of growing it again (each growth copies
    /// the values and touches new pages).
    fn reserve(&mut self, bytes: usize) {
        let len = self.len();
        if len + bytes > 8 * self.memory.len() {
            let words = (len + bytes)
                .div_ceil(8)
                .max(2 * self.memory.len())
                .next_power_of_two();
            self.memory.resize(words, 0);
            self.start = self.memory.as_mut_ptr().cast();
            self.set_len(len);
            self.limit = self.top;
        }
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
        let bytes = 8 * tape.memory.len();
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

    /// Pushes a value's bytes.
    pub fn push(&mut self, value: &[u8]) {
        let padded = value.len().next_multiple_of(8);
        self.reserve(padded);
        // SAFETY: `reserve` made room for `padded` bytes at the top.
        unsafe {
            std::ptr::copy_nonoverlapping(value.as_ptr(), self.top, value.len());
            std::ptr::write_bytes(self.top.add(value.len()), 0, padded - value.len());
            self.top = self.top.add(padded);
        }
        self.padding += padded - value.len();
    }

    /// Pops the value pushed last, of `into.len()` bytes, into `into`;
    /// false when fewer bytes are on the tape.
    pub fn pop(&mut self, into: &mut [u8]) -> bool {
        match self.pop_in_place(into.len()) {
            Some(at) => {
                // SAFETY: the popped bytes are in the memory.
                unsafe { std::ptr::copy_nonoverlapping(at, into.as_mut_ptr(), into.len()) };
                true
            }
            None => false,
        }
    }

    /// Pops the value pushed last, of `bytes` bytes, and gives the address
    /// of its bytes, which stay as they are until the next push; `None`
    /// when fewer bytes are on the tape.
    pub fn pop_in_place(&mut self, bytes: usize) -> Option<*const u8> {
        let padded = bytes.next_multiple_of(8);
        let start = self.len().checked_sub(padded)?;
        self.set_len(start);
        self.padding -= padded - bytes;
        self.lower_limit(padded - bytes);
        Some(self.top)
    }

    /// Keeps the tapes of a `Save` fork's instances, in instance order.
    pub fn push_instances(&mut self, tapes: Vec<Tape>) {
        let bytes = tapes.iter().map(Tape::own).sum::<usize>();
        self.fork_bytes += bytes;
        self.lower_limit(bytes);
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

    /// Marks the tape where it is now (`tape_mark`).
    pub fn mark(&mut self) {
        self.marks.push(Mark {
            len: self.len(),
            padding: self.padding,
            forks: self.forks.len(),
        });
    }

    /// Takes the latest mark off (`tape_settle`) and, when `drop`, drops
    /// everything pushed since.
    pub fn settle(&mut self, drop: bool) {
        let Some(mark) = self.marks.pop() else {
            unreachable!("a tape settled without a mark")
        };
        if !drop {
            return;
        }
        while self.forks.len() > mark.forks {
            let tapes = self.forks.pop().unwrap_or_default();
            self.fork_bytes -= tapes.iter().map(Tape::own).sum::<usize>();
            Tape::give_back_list(tapes);
        }
        self.set_len(mark.len);
        self.lower_limit(self.padding - mark.padding);
        self.padding = mark.padding;
    }

    /// Whether nothing is on the tape (neither values nor forks' tapes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.forks.is_empty()
    }

    /// Empties the tape (keeping its memory); the forks' tapes go back to
    /// the spares.
    pub fn clear(&mut self) {
        self.top = self.start;
        self.limit = self.top;
        self.padding = 0;
        self.fork_bytes = 0;
        self.below = 0;
        self.marks.clear();
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

    /// How many bytes from the start the limit is.
    fn limit_len(tape: &Tape) -> usize {
        tape.limit as usize - tape.start as usize
    }

    #[test]
    fn the_limit_is_where_the_tape_would_hold_the_most_or_its_memory_ends() {
        let mut tape = Tape::spare_above(5);
        assert_eq!(limit_len(&tape), 0, "an empty tape calls the host");
        tape.push(&[1; 8]);
        tape.fit_limit(13);
        assert_eq!((tape.len(), limit_len(&tape)), (8, 8));
        tape.push(&[2; 4]);
        tape.fit_limit(17);
        assert_eq!((tape.len(), limit_len(&tape)), (16, 16));
        let mut four = [0; 4];
        assert!(tape.pop(&mut four));
        // Without the padding, 12 bytes from the start hold the most.
        assert_eq!((tape.len(), limit_len(&tape)), (8, 12));
        let mut instances = Tape::spare_list();
        let mut instance = Tape::spare();
        instance.push(&[3; 2]);
        instances.push(instance);
        tape.push_instances(instances);
        assert_eq!((tape.held(), limit_len(&tape)), (15, 10));
        tape.fit_limit(usize::MAX);
        assert_eq!(limit_len(&tape), 8 * tape.memory.len());
    }

    /// A tape whose first value is not a power of two of words still grows
    /// to one, and is kept as a spare up to the largest size kept.
    #[test]
    fn a_tape_grows_to_powers_of_two_and_is_kept_up_to_the_largest_spare() {
        let mut tape = Tape::default();
        tape.push(&[1; 24]);
        assert_eq!(tape.memory.len(), 4);
        let value = [2; 1000];
        while tape.len() + 1000 <= LARGEST_SPARE {
            tape.push(&value);
            assert!(tape.memory.len().is_power_of_two());
        }
        assert_eq!(8 * tape.memory.len(), LARGEST_SPARE);
        let memory = tape.memory.as_ptr();
        Tape::give_back(tape);
        let kept = SPARES.with(|s| {
            let s = s.borrow();
            s.tapes
                .iter()
                .any(|t| std::ptr::eq(t.memory.as_ptr(), memory))
        });
        assert!(kept, "the tape's memory is a spare");
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
