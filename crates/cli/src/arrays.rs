//! Arrays in binary files: numpy's `.npy` (one array) and `.npz` (a zip of
//! `.npy` files, stored or deflated, as `np.savez` and
//! `np.savez_compressed` write them), and `.safetensors` files. Each
//! array is read into an [`ArrayInput`] in one pass over its bytes: an
//! element type the language has (`bool`, `int32`, `int64`, `uint64`,
//! `float32`, `float64`) as it is, the other integer types as `int64`, in
//! either byte order and C or Fortran order; the binder converts it to the
//! declared type. Results are written as `.npz` ([`write_npz`]), training
//! checkpoints as `.npz` or `.safetensors` ([`write_safetensors`]).

use std::io::{Cursor, Read, Write};

use autobatch::{ArrayInput, Data, Tensor};

/// An array of a file, with the name the file gives it.
#[derive(Debug)]
pub struct NamedArray {
    pub name: String,
    pub array: ArrayInput,
}

/// The element types of arrays in files: the language's, the narrower
/// integers (read as `int64`), and the rest by name (refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    Bool,
    Int(usize),
    Uint(usize),
    Float(usize),
}

impl Element {
    fn size(self) -> usize {
        match self {
            Element::Bool => 1,
            Element::Int(n) | Element::Uint(n) | Element::Float(n) => n,
        }
    }

    /// numpy's name of the type.
    fn name(self) -> String {
        match self {
            Element::Bool => "bool".to_owned(),
            Element::Int(n) => format!("int{}", 8 * n),
            Element::Uint(n) => format!("uint{}", 8 * n),
            Element::Float(n) => format!("float{}", 8 * n),
        }
    }
}

/// The elements of `bytes` (exactly `count` of type `element`, in the byte
/// order `big_endian` says) as the language's data.
fn decode(bytes: &[u8], element: Element, big_endian: bool) -> Result<Data, String> {
    fn each<const N: usize, T>(bytes: &[u8], big: bool, f: impl Fn([u8; N]) -> T) -> Vec<T> {
        bytes
            .chunks_exact(N)
            .map(|c| {
                let mut b: [u8; N] = c.try_into().expect("chunks of N bytes");
                if big {
                    b.reverse();
                }
                f(b)
            })
            .collect()
    }
    let big = big_endian;
    Ok(match element {
        Element::Bool => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
        Element::Float(4) => Data::F32(each(bytes, big, f32::from_le_bytes)),
        Element::Float(8) => Data::F64(each(bytes, big, f64::from_le_bytes)),
        Element::Int(4) => Data::I32(each(bytes, big, i32::from_le_bytes)),
        Element::Int(8) => Data::I64(each(bytes, big, i64::from_le_bytes)),
        Element::Uint(8) => Data::Usize(each(bytes, big, u64::from_le_bytes)),
        Element::Int(1) => Data::I64(bytes.iter().map(|&b| i64::from(b as i8)).collect()),
        Element::Int(2) => Data::I64(each(bytes, big, |b| i64::from(i16::from_le_bytes(b)))),
        Element::Uint(1) => Data::I64(bytes.iter().map(|&b| i64::from(b)).collect()),
        Element::Uint(2) => Data::I64(each(bytes, big, |b| i64::from(u16::from_le_bytes(b)))),
        Element::Uint(4) => Data::I64(each(bytes, big, |b| i64::from(u32::from_le_bytes(b)))),
        other => {
            return Err(format!(
                "has elements of type {}, which cannot be an input (save it as float32 or float64)",
                other.name()
            ))
        }
    })
}

/// An array of `shape` from its bytes, which hold its elements in C order
/// or (`fortran`) in Fortran order.
fn array_from_bytes(
    bytes: &[u8],
    element: Element,
    big_endian: bool,
    shape: Vec<usize>,
    fortran: bool,
) -> Result<ArrayInput, String> {
    let count = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or("has a shape too large to hold")?;
    let needed = count
        .checked_mul(element.size())
        .ok_or("has a shape too large to hold")?;
    if bytes.len() < needed {
        return Err(format!(
            "is truncated: its shape {shape:?} of {} needs {needed} bytes, but only {} are there",
            element.name(),
            bytes.len()
        ));
    }
    let mut data = decode(&bytes[..needed], element, big_endian)?;
    if fortran && shape.len() > 1 {
        data = fortran_to_c(data, &shape);
    }
    Ok(ArrayInput::new(Tensor::new(shape, data), &element.name()))
}

/// Elements of an array of `shape` stored in Fortran order, in C order.
fn fortran_to_c(data: Data, shape: &[usize]) -> Data {
    // The Fortran offset of every element, visited in C order.
    let count: usize = shape.iter().product();
    let mut strides = vec![1usize; shape.len()];
    for axis in 1..shape.len() {
        strides[axis] = strides[axis - 1] * shape[axis - 1];
    }
    let mut index = vec![0usize; shape.len()];
    let mut order = Vec::with_capacity(count);
    for _ in 0..count {
        order.push(
            index
                .iter()
                .zip(&strides)
                .map(|(i, s)| i * s)
                .sum::<usize>(),
        );
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    fn gather<T: Copy>(v: &[T], order: &[usize]) -> Vec<T> {
        order.iter().map(|&k| v[k]).collect()
    }
    match &data {
        Data::Bool(v) => Data::Bool(gather(v, &order)),
        Data::I32(v) => Data::I32(gather(v, &order)),
        Data::I64(v) => Data::I64(gather(v, &order)),
        Data::Usize(v) => Data::Usize(gather(v, &order)),
        Data::F32(v) => Data::F32(gather(v, &order)),
        Data::F64(v) => Data::F64(gather(v, &order)),
    }
}

/// The array of a `.npy` file's bytes.
pub fn read_npy(bytes: &[u8]) -> Result<ArrayInput, String> {
    let header = NpyHeader::read(bytes)?;
    let element = parse_descr(&header.descr)?;
    array_from_bytes(
        &bytes[header.data_start..],
        element.0,
        element.1,
        header.shape,
        header.fortran_order,
    )
}

/// What a `.npy` header says.
struct NpyHeader {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
    data_start: usize,
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

impl NpyHeader {
    fn read(bytes: &[u8]) -> Result<NpyHeader, String> {
        if !bytes.starts_with(NPY_MAGIC) || bytes.len() < 10 {
            return Err("is not a .npy array (it does not start with numpy's magic bytes)".into());
        }
        let (length, start) = match bytes[6] {
            1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
            2 | 3 if bytes.len() >= 12 => (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            ),
            version => {
                return Err(format!(
                    "is a .npy array of format version {version}, which is not read"
                ))
            }
        };
        let text = bytes
            .get(start..start + length)
            .and_then(|h| std::str::from_utf8(h).ok())
            .ok_or("has a .npy header that is cut short or not text")?;
        let bad = || format!("has a .npy header that is not understood: {}", text.trim());
        let descr = dict_value(text, "descr").ok_or_else(bad)?;
        let descr = descr
            .strip_prefix('\'')
            .and_then(|d| d.strip_suffix('\''))
            .ok_or_else(|| {
                format!("has elements of a structured type ({descr}), which cannot be an input")
            })?
            .to_owned();
        let fortran_order = match dict_value(text, "fortran_order").ok_or_else(bad)? {
            "True" => true,
            "False" => false,
            _ => return Err(bad()),
        };
        let shape_text = dict_value(text, "shape").ok_or_else(bad)?;
        let shape = shape_text
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(bad)?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<usize>().map_err(|_| bad()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NpyHeader {
            descr,
            fortran_order,
            shape,
            data_start: start + length,
        })
    }
}

/// The text of the value of `key` in a `.npy` header (a Python dict
/// literal of strings, booleans and tuples of integers).
fn dict_value<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let quoted = format!("'{key}'");
    let after = &text[text.find(&quoted)? + quoted.len()..];
    let after = after.trim_start().strip_prefix(':')?.trim_start();
    let end = match after.chars().next()? {
        '(' => after.find(')')? + 1,
        '[' => after.find(']')? + 1,
        '\'' => after[1..].find('\'')? + 2,
        _ => after.find([',', '}'])?,
    };
    Some(after[..end].trim())
}

/// The element type and byte order (big-endian?) of a numpy type string
/// (`<f4`, `|b1`, `>i8`).
fn parse_descr(descr: &str) -> Result<(Element, bool), String> {
    let refuse = || format!("has elements of type '{descr}', which cannot be an input");
    let mut chars = descr.chars();
    let big_endian = match chars.next() {
        Some('>') => true,
        Some('<' | '|') => false,
        Some('=') => cfg!(target_endian = "big"),
        _ => return Err(refuse()),
    };
    let kind = chars.next().ok_or_else(refuse)?;
    let size: usize = chars.as_str().parse().map_err(|_| refuse())?;
    let element = match (kind, size) {
        ('b', 1) => Element::Bool,
        ('i', 1 | 2 | 4 | 8) => Element::Int(size),
        ('u', 1 | 2 | 4 | 8) => Element::Uint(size),
        ('f', 2 | 4 | 8) => Element::Float(size),
        _ => return Err(refuse()),
    };
    Ok((element, big_endian))
}

/// The arrays of a `.npz` file's bytes, in the order of the archive,
/// named without the `.npy` ending.
pub fn read_npz(bytes: &[u8]) -> Result<Vec<NamedArray>, String> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("is not a .npz archive: {e}"))?;
    let mut arrays = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        let raw = archive
            .by_index_raw(i)
            .map_err(|e| format!("cannot be read: {e}"))?;
        let name = raw
            .name()
            .map_err(|e| format!("holds a member whose name cannot be read: {e}"))?
            .into_owned();
        let Some(stem) = name.strip_suffix(".npy") else {
            return Err(format!("holds `{name}`, which is not a .npy array"));
        };
        let stored = match (raw.compression(), raw.data_start(), raw.encrypted()) {
            (zip::CompressionMethod::Stored, Some(start), false) => Some(StoredMember {
                start,
                size: raw.size(),
                crc32: raw.crc32(),
            }),
            _ => None,
        };
        drop(raw);
        let array = match stored {
            // numpy's `savez` stores its arrays: read them where they are.
            Some(member) => read_npy(member.bytes(bytes, stem)?),
            None => {
                let mut file = archive
                    .by_index(i)
                    .map_err(|e| format!("cannot be read: {e}"))?;
                let mut member = Vec::with_capacity(file.size() as usize);
                file.read_to_end(&mut member)
                    .map_err(|e| format!("cannot read array `{stem}`: {e}"))?;
                read_npy(&member)
            }
        }
        .map_err(|e| format!("array `{stem}` {e}"))?;
        arrays.push(NamedArray {
            name: stem.to_owned(),
            array,
        });
    }
    Ok(arrays)
}

/// Where an uncompressed member of an archive lies in its bytes, and the
/// checksum its bytes must have.
struct StoredMember {
    start: u64,
    size: u64,
    crc32: u32,
}

impl StoredMember {
    /// The member's bytes in the archive's `bytes`, checked against its
    /// checksum (as reading it through the archive would).
    fn bytes<'a>(&self, bytes: &'a [u8], stem: &str) -> Result<&'a [u8], String> {
        let range = usize::try_from(self.start)
            .ok()
            .zip(usize::try_from(self.size).ok())
            .and_then(|(start, size)| Some(start..start.checked_add(size)?))
            .filter(|range| range.end <= bytes.len());
        let Some(range) = range else {
            return Err(format!(
                "cannot read array `{stem}`: the archive ends inside it"
            ));
        };
        let member = &bytes[range];
        if crc32fast::hash(member) != self.crc32 {
            return Err(format!(
                "cannot read array `{stem}`: its bytes do not match the archive's checksum"
            ));
        }
        Ok(member)
    }
}

/// The tensors of a `.safetensors` file's bytes, in the order of their data.
pub fn read_safetensors(bytes: &[u8]) -> Result<Vec<NamedArray>, String> {
    use safetensors::Dtype;
    let file = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| format!("is not a .safetensors file: {e}"))?;
    let mut tensors = file.tensors();
    tensors.sort_by_key(|(_, view)| view.data().as_ptr() as usize);
    let mut arrays = Vec::with_capacity(tensors.len());
    for (name, view) in tensors {
        let element = match view.dtype() {
            Dtype::BOOL => Element::Bool,
            Dtype::U8 => Element::Uint(1),
            Dtype::I8 => Element::Int(1),
            Dtype::I16 => Element::Int(2),
            Dtype::U16 => Element::Uint(2),
            Dtype::F16 => Element::Float(2),
            Dtype::I32 => Element::Int(4),
            Dtype::U32 => Element::Uint(4),
            Dtype::F32 => Element::Float(4),
            Dtype::F64 => Element::Float(8),
            Dtype::I64 => Element::Int(8),
            Dtype::U64 => Element::Uint(8),
            other => {
                return Err(format!(
                    "tensor `{name}` has elements of type {other:?}, which cannot be an input"
                ))
            }
        };
        let array = array_from_bytes(view.data(), element, false, view.shape().to_vec(), false)
            .map_err(|e| format!("tensor `{name}` {e}"))?;
        arrays.push(NamedArray { name, array });
    }
    Ok(arrays)
}

/// An array to write into a `.npz`: numbers and bools, or text.
pub enum OutArray {
    Tensor(Tensor),
    /// Strings as numpy's fixed-width unicode (`<U`), with this shape.
    Text(Vec<usize>, Vec<String>),
}

/// A `.npy` file of `array`.
fn npy_bytes(array: &OutArray) -> Vec<u8> {
    let (descr, shape, body) = match array {
        OutArray::Tensor(tensor) => {
            let (descr, body) = tensor_bytes(&tensor.data);
            (descr.to_owned(), &tensor.shape, body)
        }
        OutArray::Text(shape, strings) => {
            let width = strings
                .iter()
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
                .max(1);
            let mut body = Vec::with_capacity(strings.len() * width * 4);
            for s in strings {
                let mut n = 0;
                for c in s.chars() {
                    body.extend_from_slice(&(c as u32).to_le_bytes());
                    n += 1;
                }
                body.resize(body.len() + (width - n) * 4, 0);
            }
            (format!("<U{width}"), shape, body)
        }
    };
    let lengths: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape_text = match lengths.len() {
        1 => format!("({},)", lengths[0]),
        _ => format!("({})", lengths.join(", ")),
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // Padded with spaces so that the data starts at a multiple of 64 bytes.
    let unpadded = NPY_MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + body.len());
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    out
}

/// numpy's type string of `data` and its elements' little-endian bytes.
fn tensor_bytes(data: &Data) -> (&'static str, Vec<u8>) {
    fn bytes<T: Copy, const N: usize>(v: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|x| to(*x)).collect()
    }
    match data {
        Data::Bool(v) => ("|b1", v.iter().map(|b| u8::from(*b)).collect()),
        Data::I32(v) => ("<i4", bytes(v, i32::to_le_bytes)),
        Data::I64(v) => ("<i8", bytes(v, i64::to_le_bytes)),
        Data::Usize(v) => ("<u8", bytes(v, u64::to_le_bytes)),
        Data::F32(v) => ("<f4", bytes(v, f32::to_le_bytes)),
        Data::F64(v) => ("<f8", bytes(v, f64::to_le_bytes)),
    }
}

/// A `.npz` archive of `arrays` by name, stored uncompressed, as
/// `np.savez` writes it.
pub fn write_npz(arrays: &[(String, OutArray)]) -> Result<Vec<u8>, String> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true);
    for (name, array) in arrays {
        zip.start_file(format!("{name}.npy"), options)
            .and_then(|()| zip.write_all(&npy_bytes(array)).map_err(Into::into))
            .map_err(|e| format!("cannot write array `{name}`: {e}"))?;
    }
    let cursor = zip.finish().map_err(|e| e.to_string())?;
    Ok(cursor.into_inner())
}

/// A `.safetensors` file of `tensors` by name (as the `safetensors`
/// package's `save_file` writes it).
pub fn write_safetensors(tensors: &[(String, Tensor)]) -> Result<Vec<u8>, String> {
    use safetensors::Dtype;
    let bytes: Vec<(Dtype, Vec<u8>)> = tensors
        .iter()
        .map(|(_, tensor)| {
            let dtype = match tensor.data {
                Data::Bool(_) => Dtype::BOOL,
                Data::I32(_) => Dtype::I32,
                Data::I64(_) => Dtype::I64,
                Data::Usize(_) => Dtype::U64,
                Data::F32(_) => Dtype::F32,
                Data::F64(_) => Dtype::F64,
            };
            (dtype, tensor_bytes(&tensor.data).1)
        })
        .collect();
    let mut views = Vec::with_capacity(tensors.len());
    for ((name, tensor), (dtype, data)) in tensors.iter().zip(&bytes) {
        let view = safetensors::tensor::TensorView::new(*dtype, tensor.shape.clone(), data)
            .map_err(|e| format!("cannot write tensor `{name}`: {e}"))?;
        views.push((name.as_str(), view));
    }
    safetensors::tensor::serialize(views, None).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_every_form_numpy_writes() {
        let header = |h: &str| {
            let mut bytes = NPY_MAGIC.to_vec();
            bytes.extend_from_slice(&[1, 0]);
            bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
            bytes.extend_from_slice(h.as_bytes());
            NpyHeader::read(&bytes)
        };
        let h = header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }").unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("<f8", false, vec![2, 3])
        );
        let h = header("{'descr': '|b1', 'fortran_order': True, 'shape': (4,), }").unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("|b1", true, vec![4])
        );
        let h = header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }").unwrap();
        assert!(h.shape.is_empty());
        let error = header("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }");
        assert!(error.err().unwrap().contains("structured type"));
        assert!(header("{'descr': '<f8'}")
            .err()
            .unwrap()
            .contains("not understood"));
    }

    #[test]
    fn element_types_and_byte_orders() {
        assert_eq!(parse_descr("<f4"), Ok((Element::Float(4), false)));
        assert_eq!(parse_descr(">i2"), Ok((Element::Int(2), true)));
        assert_eq!(parse_descr("|u1"), Ok((Element::Uint(1), false)));
        assert!(parse_descr("<c16").unwrap_err().contains("'<c16'"));
        assert!(parse_descr("|O").is_err());
        let big = [0x3f, 0xf0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            decode(&big, Element::Float(8), true),
            Ok(Data::F64(vec![1.0]))
        );
        assert_eq!(
            decode(&[0xff], Element::Int(1), false),
            Ok(Data::I64(vec![-1]))
        );
        assert_eq!(
            decode(&[0xff, 0xff], Element::Uint(2), false),
            Ok(Data::I64(vec![65535]))
        );
        assert!(decode(&[0, 0x3c], Element::Float(2), false)
            .unwrap_err()
            .contains("float16"));
    }

    #[test]
    fn fortran_order_becomes_c_order() {
        // [[0, 1, 2], [3, 4, 5]] stored by columns.
        let f = Data::I64(vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(fortran_to_c(f, &[2, 3]), Data::I64(vec![0, 1, 2, 3, 4, 5]));
        // A 2 x 2 x 2 array: element (i, j, k) = 4i + 2j + k, at i + 2j + 4k.
        let mut stored = vec![0; 8];
        for v in 0..8 {
            let (i, j, k) = (v / 4, (v / 2) % 2, v % 2);
            stored[i + 2 * j + 4 * k] = v as i64;
        }
        assert_eq!(
            fortran_to_c(Data::I64(stored), &[2, 2, 2]),
            Data::I64((0..8).collect())
        );
    }

    #[test]
    fn arrays_written_read_back() {
        let tensor = Tensor::new(vec![2, 2], Data::F32(vec![1.5, -2.0, f32::NAN, 4.0]));
        let bytes = npy_bytes(&OutArray::Tensor(tensor.clone()));
        let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        assert_eq!(
            (10 + header_len) % 64,
            0,
            "the data starts at a multiple of 64"
        );
        let back = read_npy(&bytes).unwrap();
        assert_eq!(back.tensor.shape, tensor.shape);
        assert_eq!(back.dtype, "float32");
        let Data::F32(v) = back.tensor.data else {
            panic!()
        };
        assert_eq!((v[0], v[1], v[3]), (1.5, -2.0, 4.0));
        assert!(v[2].is_nan());
        let npz = write_npz(&[
            (
                "a/b".into(),
                OutArray::Tensor(Tensor::new(vec![3], Data::Bool(vec![true, false, true]))),
            ),
            (
                "c".into(),
                OutArray::Text(vec![2], vec!["xy".into(), "é".into()]),
            ),
        ])
        .unwrap();
        let error = read_npz(&npz).unwrap_err();
        assert!(
            error.contains("array `c` has elements of type '<U2'"),
            "{error}"
        );
        let npz = write_npz(&[
            (
                "a/b".into(),
                OutArray::Tensor(Tensor::new(vec![3], Data::Bool(vec![true, false, true]))),
            ),
            (
                "d".into(),
                OutArray::Tensor(Tensor::new(vec![], Data::Usize(vec![u64::MAX]))),
            ),
        ])
        .unwrap();
        let arrays = read_npz(&npz).unwrap();
        assert_eq!(arrays.len(), 2);
        assert_eq!(
            (arrays[0].name.as_str(), arrays[1].name.as_str()),
            ("a/b", "d")
        );
        assert_eq!(
            arrays[0].array.tensor.data,
            Data::Bool(vec![true, false, true])
        );
        assert_eq!(arrays[1].array.tensor.shape, Vec::<usize>::new());
        assert_eq!(arrays[1].array.tensor.data, Data::Usize(vec![u64::MAX]));
    }

    #[test]
    fn a_stored_member_read_in_place_is_checked_against_its_checksum() {
        let values: Vec<f64> = (0..64).map(|i| f64::from(i) / 8.0).collect();
        let npz = write_npz(&[(
            "w".into(),
            OutArray::Tensor(Tensor::new(vec![8, 8], Data::F64(values.clone()))),
        )])
        .unwrap();
        let arrays = read_npz(&npz).unwrap();
        assert_eq!(arrays[0].array.tensor.data, Data::F64(values));
        // Flip the lowest bit of the last element, 7.875, where it is stored.
        let last = 7.875f64.to_le_bytes();
        let at = npz.windows(8).rposition(|w| w == last).expect("stored");
        let mut corrupt = npz.clone();
        corrupt[at] ^= 1;
        let error = read_npz(&corrupt).unwrap_err();
        assert!(
            error.contains("array `w`") && error.contains("checksum"),
            "{error}"
        );
    }

    #[test]
    fn truncated_and_foreign_bytes_are_errors() {
        let tensor = Tensor::new(vec![4], Data::I64(vec![1, 2, 3, 4]));
        let bytes = npy_bytes(&OutArray::Tensor(tensor));
        let error = read_npy(&bytes[..bytes.len() - 8]).unwrap_err();
        assert_eq!(
            error,
            "is truncated: its shape [4] of int64 needs 32 bytes, but only 24 are there"
        );
        assert!(read_npy(b"{\"batch\": {}}").unwrap_err().contains("magic"));
        assert!(read_npz(b"not a zip")
            .unwrap_err()
            .starts_with("is not a .npz archive"));
        assert!(read_safetensors(b"xx")
            .unwrap_err()
            .starts_with("is not a .safetensors file"));
    }
}
