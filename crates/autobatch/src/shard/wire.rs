//! The byte form of what ranks send one another: integers and floats
//! little-endian (floats as their bits, so that every value arrives with the
//! bits it left with), strings and lists prefixed by their length, tensors
//! as shape and typed elements.
//!
//! Only autobatch writes what autobatch reads here, so a malformed message
//! is a bug ([`WireError`]), never the user's input.

use autobatch_types::{Data, Tensor};

/// A message that does not read back (a bug in autobatch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a message between ranks does not read back: {}", self.0)
    }
}

/// Writes values one after the other into a byte buffer.
#[derive(Default)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
    pub fn u8(&mut self, x: u8) {
        self.bytes.push(x);
    }
    pub fn bool(&mut self, x: bool) {
        self.u8(u8::from(x));
    }
    pub fn u64(&mut self, x: u64) {
        self.bytes.extend_from_slice(&x.to_le_bytes());
    }
    pub fn i64(&mut self, x: i64) {
        self.bytes.extend_from_slice(&x.to_le_bytes());
    }
    pub fn f64(&mut self, x: f64) {
        self.u64(x.to_bits());
    }
    pub fn usize(&mut self, x: usize) {
        self.u64(x as u64);
    }
    pub fn bytes(&mut self, x: &[u8]) {
        self.usize(x.len());
        self.bytes.extend_from_slice(x);
    }
    pub fn str(&mut self, x: &str) {
        self.bytes(x.as_bytes());
    }
    pub fn f64s(&mut self, xs: &[f64]) {
        self.usize(xs.len());
        xs.iter().for_each(|x| self.f64(*x));
    }
    pub fn i64s(&mut self, xs: &[i64]) {
        self.usize(xs.len());
        xs.iter().for_each(|x| self.i64(*x));
    }
    pub fn bools(&mut self, xs: &[bool]) {
        self.usize(xs.len());
        xs.iter().for_each(|x| self.bool(*x));
    }
    pub fn tensor(&mut self, t: &Tensor) {
        self.usize(t.shape.len());
        t.shape.iter().for_each(|d| self.usize(*d));
        match &t.data {
            Data::Bool(v) => {
                self.u8(0);
                self.bools(v);
            }
            Data::I32(v) => {
                self.u8(1);
                self.usize(v.len());
                v.iter().for_each(|x| self.i64(i64::from(*x)));
            }
            Data::I64(v) => {
                self.u8(2);
                self.i64s(v);
            }
            Data::Usize(v) => {
                self.u8(3);
                self.usize(v.len());
                v.iter().for_each(|x| self.u64(*x));
            }
            Data::F32(v) => {
                self.u8(4);
                self.usize(v.len());
                v.iter().for_each(|x| self.u64(u64::from(x.to_bits())));
            }
            Data::F64(v) => {
                self.u8(5);
                self.f64s(v);
            }
        }
    }
}

/// Reads back what a [`Writer`] wrote, in the same order.
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }
    /// Whether everything was read.
    pub fn is_done(&self) -> bool {
        self.bytes.is_empty()
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.bytes.len() {
            return Err(WireError(format!(
                "{n} bytes asked for, {} left",
                self.bytes.len()
            )));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    pub fn bool(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(WireError(format!("{other} is no bool"))),
        }
    }
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }
    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(self.u64()? as i64)
    }
    pub fn f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_bits(self.u64()?))
    }
    pub fn usize(&mut self) -> Result<usize, WireError> {
        let x = self.u64()?;
        usize::try_from(x).map_err(|_| WireError(format!("{x} is too large a count")))
    }
    /// A length of items of at least `item_bytes` each, checked against the
    /// bytes left before anything is allocated.
    fn len(&mut self, item_bytes: usize) -> Result<usize, WireError> {
        let n = self.usize()?;
        if n.saturating_mul(item_bytes) > self.bytes.len() {
            return Err(WireError(format!(
                "a list of {n} items is longer than the message"
            )));
        }
        Ok(n)
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.len(1)?;
        self.take(n)
    }
    pub fn str(&mut self) -> Result<String, WireError> {
        String::from_utf8(self.bytes()?.to_vec())
            .map_err(|_| WireError("a string is not UTF-8".into()))
    }
    pub fn f64s(&mut self) -> Result<Vec<f64>, WireError> {
        let n = self.len(8)?;
        (0..n).map(|_| self.f64()).collect()
    }
    pub fn i64s(&mut self) -> Result<Vec<i64>, WireError> {
        let n = self.len(8)?;
        (0..n).map(|_| self.i64()).collect()
    }
    pub fn bools(&mut self) -> Result<Vec<bool>, WireError> {
        let n = self.len(1)?;
        (0..n).map(|_| self.bool()).collect()
    }
    pub fn tensor(&mut self) -> Result<Tensor, WireError> {
        let rank = self.len(8)?;
        let shape = (0..rank)
            .map(|_| self.usize())
            .collect::<Result<Vec<_>, _>>()?;
        let data = match self.u8()? {
            0 => Data::Bool(self.bools()?),
            1 => {
                let n = self.len(8)?;
                Data::I32(
                    (0..n)
                        .map(|_| Ok(self.i64()? as i32))
                        .collect::<Result<_, WireError>>()?,
                )
            }
            2 => Data::I64(self.i64s()?),
            3 => {
                let n = self.len(8)?;
                Data::Usize((0..n).map(|_| self.u64()).collect::<Result<_, _>>()?)
            }
            4 => {
                let n = self.len(8)?;
                Data::F32(
                    (0..n)
                        .map(|_| Ok(f32::from_bits(self.u64()? as u32)))
                        .collect::<Result<_, WireError>>()?,
                )
            }
            5 => Data::F64(self.f64s()?),
            other => return Err(WireError(format!("{other} is no element type"))),
        };
        if shape.iter().product::<usize>() != data.len() {
            return Err(WireError(
                "a tensor's shape does not fit its elements".into(),
            ));
        }
        Ok(Tensor::new(shape, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_with_their_bits() {
        let tensors = [
            Tensor::new(
                vec![2, 2],
                Data::F64(vec![0.1, -0.0, f64::NAN, f64::INFINITY]),
            ),
            Tensor::new(vec![3], Data::F32(vec![0.1, f32::MIN_POSITIVE, -1.5])),
            Tensor::new(vec![2], Data::I32(vec![i32::MIN, 7])),
            Tensor::new(vec![], Data::Usize(vec![u64::MAX])),
            Tensor::new(vec![0], Data::Bool(vec![])),
            Tensor::new(vec![2], Data::I64(vec![i64::MIN, 3])),
        ];
        let mut w = Writer::new();
        w.str("héllo");
        w.f64(-0.0);
        tensors.iter().for_each(|t| w.tensor(t));
        let bytes = w.finish();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.str().unwrap(), "héllo");
        assert_eq!(r.f64().unwrap().to_bits(), (-0.0_f64).to_bits());
        for t in &tensors {
            let back = r.tensor().unwrap();
            assert_eq!(back.shape, t.shape);
            assert_eq!(format!("{:?}", back.data), format!("{:?}", t.data));
        }
        assert!(r.is_done());
    }

    #[test]
    fn a_short_message_is_an_error_not_a_panic() {
        let mut w = Writer::new();
        w.f64s(&[1.0, 2.0, 3.0]);
        let bytes = w.finish();
        for cut in 0..bytes.len() {
            assert!(Reader::new(&bytes[..cut]).f64s().is_err(), "cut at {cut}");
        }
        let mut huge = Writer::new();
        huge.u64(u64::MAX / 2);
        assert!(Reader::new(&huge.finish()).tensor().is_err());
    }
}
