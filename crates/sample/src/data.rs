//! Reading the data file straight into tensors.
//!
//! A model's data is mostly large arrays of numbers (posteriordb's `X` of
//! 10,000 x 100 is 20 MB of JSON). Parsed into a `serde_json::Value` first,
//! every number takes a 32-byte node and every row a vector: about 70 MB
//! above the 8 MB of the tensors, for the few moments of binding, which set
//! the peak resident memory of a run with few chains. [`read`] parses the
//! text once, writing each static's numbers into one flat vector of its
//! element type as they are read, and checks that each array is
//! rectangular.
//!
//! It takes only what it can convert exactly as the binder converts JSON
//! (`autobatch`'s `json_to_scalar`: the same `serde_json` number, the same
//! `as` casts): numbers for floats, integers in range for integer types,
//! `true`/`false` for `bool`, non-empty rectangular arrays of the static's
//! rank, a non-negative integer for a symbolic dimension, and no key twice.
//! Anything else (the strings `"NaN"`, `"inf"`, `"-inf"`, an empty array, a
//! wrong type, an unknown key) gives `None`, and the caller binds the data
//! the general way, which accepts or names the problem exactly as before.
//! So this changes how much memory reading takes, never what is accepted,
//! what the tensors hold, or what an error says.

use std::fmt;

use autobatch::ScalarType;
use autobatch_ir::Program;
use autobatch_types::{Data, Scalar, Tensor};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The data of a model read the fast way.
pub(crate) struct Compact {
    /// Each static given, by name, as a tensor of its element type.
    pub statics: Vec<(String, Tensor)>,
    /// Each symbolic dimension given by name.
    pub dims: Vec<(String, u64)>,
}

/// Reads `text` (a JSON object) for `program`'s statics and symbolic
/// dimensions, or `None` when anything in it needs the general binder.
pub(crate) fn read(program: &Program, text: &str) -> Option<Compact> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let compact = ObjectSeed { program }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(compact)
}

/// Why the fast reader gave up (the message is never shown).
#[derive(Debug)]
struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not for the fast reader")
    }
}

fn give_up<E: de::Error>() -> E {
    E::custom(GiveUp)
}

struct ObjectSeed<'p> {
    program: &'p Program,
}

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_> {
    type Value = Compact;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Compact, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectSeed<'_> {
    type Value = Compact;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of statics and dimensions")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Compact, A::Error> {
        let mut compact = Compact {
            statics: Vec::new(),
            dims: Vec::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            let seen = compact.statics.iter().any(|(name, _)| *name == key)
                || compact.dims.iter().any(|(name, _)| *name == key);
            if seen {
                return Err(give_up());
            }
            if let Some(decl) = self.program.statics.values().find(|s| s.name == key) {
                let mut array = Array::new(decl.ty.elem, decl.ty.dims.len());
                map.next_value_seed(Level {
                    array: &mut array,
                    depth: 0,
                })?;
                compact.statics.push((key, array.finish()));
            } else if self.program.symbols.contains(&key) {
                let n: u64 = map.next_value()?;
                compact.dims.push((key, n));
            } else {
                return Err(give_up());
            }
        }
        Ok(compact)
    }
}

/// A static's elements as they are read, and its shape as far as known.
struct Array {
    data: Data,
    shape: Vec<Option<usize>>,
}

impl Array {
    fn new(elem: ScalarType, rank: usize) -> Array {
        Array {
            data: Data::filled(Scalar::zero(elem), 0),
            shape: vec![None; rank],
        }
    }

    fn finish(self) -> Tensor {
        Tensor {
            shape: self.shape.into_iter().map(|n| n.unwrap_or(0)).collect(),
            data: self.data,
        }
    }

    /// Appends one element given as JSON `value`, converted as the binder
    /// converts it; `false` if the binder would refuse it or convert it
    /// otherwise than plainly.
    fn push(&mut self, value: Number) -> bool {
        match (&mut self.data, value) {
            (Data::Bool(v), Number::Bool(b)) => v.push(b),
            (Data::F64(v), Number::F64(x)) => v.push(x),
            (Data::F64(v), Number::I64(i)) => v.push(i as f64),
            (Data::F64(v), Number::U64(u)) => v.push(u as f64),
            (Data::F32(v), number) => {
                let x = match number {
                    Number::F64(x) => x,
                    Number::I64(i) => i as f64,
                    Number::U64(u) => u as f64,
                    Number::Bool(_) => return false,
                };
                let narrowed = x as f32;
                if x.is_finite() && !narrowed.is_finite() {
                    return false;
                }
                v.push(narrowed);
            }
            (Data::I64(v), Number::I64(i)) => v.push(i),
            (Data::I64(v), Number::U64(u)) => match i64::try_from(u) {
                Ok(i) => v.push(i),
                Err(_) => return false,
            },
            (Data::I32(v), Number::I64(i)) => match i32::try_from(i) {
                Ok(i) => v.push(i),
                Err(_) => return false,
            },
            (Data::I32(v), Number::U64(u)) => match i32::try_from(u) {
                Ok(i) => v.push(i),
                Err(_) => return false,
            },
            (Data::Usize(v), Number::U64(u)) => v.push(u),
            (Data::Usize(v), Number::I64(i)) => match u64::try_from(i) {
                Ok(u) => v.push(u),
                Err(_) => return false,
            },
            _ => return false,
        }
        true
    }
}

/// A JSON scalar as `serde_json` hands it over.
#[derive(Clone, Copy)]
enum Number {
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
}

/// One level of nesting of a static's array: `depth` 0 is the whole value.
struct Level<'a> {
    array: &'a mut Array,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Level<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.depth == self.array.shape.len() {
            deserializer.deserialize_any(self)
        } else {
            deserializer.deserialize_seq(self)
        }
    }
}

impl<'de> Visitor<'de> for Level<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a rectangular array of numbers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.depth == self.array.shape.len() {
            return Err(give_up());
        }
        let mut length = 0;
        while seq
            .next_element_seed(Level {
                array: &mut *self.array,
                depth: self.depth + 1,
            })?
            .is_some()
        {
            length += 1;
        }
        match self.array.shape[self.depth] {
            // An empty array leaves the lengths inside it to the binder.
            _ if length == 0 => Err(give_up()),
            Some(known) if known != length => Err(give_up()),
            _ => {
                self.array.shape[self.depth] = Some(length);
                Ok(())
            }
        }
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        self.scalar(Number::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<(), E> {
        self.scalar(Number::I64(i))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<(), E> {
        self.scalar(Number::U64(u))
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<(), E> {
        self.scalar(Number::F64(x))
    }
}

impl Level<'_> {
    fn scalar<E: de::Error>(self, value: Number) -> Result<(), E> {
        if self.depth != self.array.shape.len() || !self.array.push(value) {
            return Err(give_up());
        }
        Ok(())
    }
}
