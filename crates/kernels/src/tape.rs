//! A lane's tape: what the forward part of a derived function saves for
//! its backward part (`tape_push`, `tape_pop`), and what a taped fork
//! keeps of its instances (`TapeMode::Save`, `TapeMode::Restore`).
//!
//! Every executor keeps one [`Tape`] per lane (a member, or an instance of
//! a fork). A value pushed is kept as elements: per element type, one
//! buffer of the elements of the values on the tape in push order, and one
//! list of their shapes' dimensions. A push appends a value's elements
//! where they are read ([`Tape::push_values`], a row of a column), a pop
//! copies them straight to where they go ([`Tape::pop_into`]) and shortens
//! the buffer: once a lane's tape has grown to its size (the first step of
//! a loop of gradient steps), a push or a pop allocates nothing.
//!
//! A `Save` fork moves its instances' tapes, in instance order, onto the
//! forking lane's tape as one entry; the `Restore` fork of the backward
//! part takes that entry off again and gives instance `k` the tape of
//! forward instance `k`. Instances' tapes are moved, never copied.
//!
//! A tape counts the bytes it holds ([`Tape::held`]): its values (an
//! element's bytes each, as [`autobatch_types::ScalarType::byte_size`]
//! says), the instances' tapes it keeps, and what the lane's ancestors
//! held when it started (the forking lane's tape at the fork, the tape a
//! catching call set aside). So a lane's count is what its member holds
//! along the lane's path, whatever order an executor runs the instances in.

use autobatch_types::{Data, Scalar, ScalarType, Tensor};

use crate::buffer::{self, Values, ValuesMut};
use crate::Fault;

/// One entry of a [`Tape`], the entry pushed last at the end.
#[derive(Clone, Copy, Debug)]
enum Entry {
    /// A value pushed by `tape_push`: its elements are the last `len` of
    /// the tape's buffer of `ty`, its shape the last `rank` dimensions.
    Value {
        ty: ScalarType,
        rank: usize,
        len: usize,
    },
    /// The tapes of a `Save` fork's instances: the last of `Tape::forks`.
    Instances,
}

/// A lane's tape, the entry pushed last at the end.
#[derive(Clone, Debug, Default)]
pub struct Tape {
    entries: Vec<Entry>,
    /// Per element type pushed, the elements of the values on the tape.
    elements: Vec<Data>,
    /// The dimensions of the shapes of the values on the tape.
    dims: Vec<usize>,
    /// The instances' tapes of the `Save` forks on the tape, in instance order.
    forks: Vec<Vec<Tape>>,
    /// The bytes of the values on it and of the instances' tapes it keeps.
    bytes: usize,
    /// The bytes the lane's ancestors held when it started.
    below: usize,
    /// The marks of `tape_mark` not yet settled: the number of entries
    /// then, the latest last.
    marks: Vec<usize>,
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

    /// Pushes a copy of `value`.
    pub fn push(&mut self, value: &Tensor) {
        self.push_values(&value.shape, Values::all(&value.data));
    }

    /// Pushes the value of shape `shape` whose elements are `values`.
    pub fn push_values(&mut self, shape: &[usize], values: Values<'_>) {
        let ty = values.ty();
        buffer::append(self.elements_of(ty), values);
        self.dims.extend_from_slice(shape);
        self.bytes += values.len() * ty.byte_size();
        self.entries.push(Entry::Value {
            ty,
            rank: shape.len(),
            len: values.len(),
        });
    }

    /// Keeps the tapes of a `Save` fork's instances, in instance order.
    pub fn push_instances(&mut self, tapes: Vec<Tape>) {
        self.bytes += tapes.iter().map(|t| t.bytes).sum::<usize>();
        self.forks.push(tapes);
        self.entries.push(Entry::Instances);
    }

    /// Takes the value pushed last off the tape, or `None` when the tape is
    /// empty or its last entry is a fork's (a derivation that does not
    /// balance its tape).
    pub fn pop(&mut self) -> Option<Tensor> {
        let Some(&Entry::Value { ty, rank, len }) = self.entries.last() else {
            return None;
        };
        let shape = self.dims[self.dims.len() - rank..].to_vec();
        let mut data = Data::filled(Scalar::zero(ty), len);
        self.pop_into(ValuesMut::all(&mut data))
            .then(|| Tensor::new(shape, data))
    }

    /// Copies the value pushed last into `dst` and takes it off the tape;
    /// `false` (and the tape unchanged) when the last entry is no value of
    /// `dst`'s element type and number of elements.
    pub fn pop_into(&mut self, dst: ValuesMut<'_>) -> bool {
        let Some(&Entry::Value { ty, rank, len }) = self.entries.last() else {
            return false;
        };
        if dst.ty() != ty || dst.len() != len {
            return false;
        }
        self.entries.pop();
        self.dims.truncate(self.dims.len() - rank);
        self.bytes -= len * ty.byte_size();
        let elements = self.elements_of(ty);
        let start = elements.len() - len;
        buffer::copy(Values::of(elements, start..elements.len()), dst);
        buffer::resize(elements, ty, start);
        true
    }

    /// The instances' tapes a `Save` fork of `count` instances left last,
    /// or `None` (and the tape unchanged) when the last entry is no such
    /// thing.
    pub fn pop_instances(&mut self, count: usize) -> Option<Vec<Tape>> {
        match (self.entries.last(), self.forks.last()) {
            (Some(Entry::Instances), Some(tapes)) if tapes.len() == count => {
                self.entries.pop();
                let tapes = self.forks.pop();
                self.bytes -= tapes.iter().flatten().map(|t| t.bytes).sum::<usize>();
                tapes
            }
            _ => None,
        }
    }

    /// Marks the tape where it is now (`tape_mark`).
    pub fn mark(&mut self) {
        self.marks.push(self.entries.len());
    }

    /// Takes the latest mark off (`tape_settle`) and, when `drop`, drops
    /// every entry pushed since.
    pub fn settle(&mut self, drop: bool) {
        let mark = self
            .marks
            .pop()
            .unwrap_or_else(|| crate::internal_error("a tape settled without a mark".into()));
        while drop && self.entries.len() > mark {
            match self.entries.pop() {
                Some(Entry::Value { ty, rank, len }) => {
                    self.dims.truncate(self.dims.len() - rank);
                    self.bytes -= len * ty.byte_size();
                    let elements = self.elements_of(ty);
                    let start = elements.len() - len;
                    buffer::resize(elements, ty, start);
                }
                Some(Entry::Instances) => {
                    let tapes = self.forks.pop().unwrap_or_default();
                    self.bytes -= tapes.iter().map(|t| t.bytes).sum::<usize>();
                }
                None => {}
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Empties the tape, keeping its buffers' memory.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.dims.clear();
        self.forks.clear();
        self.marks.clear();
        self.bytes = 0;
        for elements in &mut self.elements {
            let ty = elements.ty();
            buffer::resize(elements, ty, 0);
        }
    }

    /// The tape's buffer of elements of type `ty` (empty at first).
    fn elements_of(&mut self, ty: ScalarType) -> &mut Data {
        let i = match self.elements.iter().position(|d| d.ty() == ty) {
            Some(i) => i,
            None => {
                self.elements.push(Data::with_capacity(ty, 0));
                self.elements.len() - 1
            }
        };
        &mut self.elements[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_in_reverse_order_with_their_shapes() {
        let mut tape = Tape::default();
        let a = Tensor::new(vec![2, 2], Data::F64(vec![1.0, 2.0, 3.0, 4.0]));
        let b = Tensor::scalar(Scalar::I64(7));
        let c = Tensor::new(vec![3], Data::F64(vec![5.0, 6.0, 7.0]));
        tape.push(&a);
        tape.push(&b);
        tape.push_instances(vec![Tape::default(); 2]);
        tape.push_values(&c.shape, Values::all(&c.data));
        // A pop into a destination of another size leaves the tape as it is.
        let mut wrong = Data::F64(vec![0.0; 2]);
        assert!(!tape.pop_into(ValuesMut::all(&mut wrong)));
        let mut row = Data::F64(vec![0.0; 3]);
        assert!(tape.pop_into(ValuesMut::all(&mut row)));
        assert_eq!(row, c.data);
        assert_eq!(tape.pop(), None, "the last entry is a fork's");
        assert!(tape.pop_instances(3).is_none());
        assert_eq!(tape.pop_instances(2).map(|t| t.len()), Some(2));
        assert_eq!(tape.pop(), Some(b));
        assert_eq!(tape.pop(), Some(a));
        assert!(tape.is_empty());
        assert_eq!(tape.pop(), None);
    }
}
