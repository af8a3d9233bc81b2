//! The inputs of a run before they meet a program: per entry parameter a
//! batched list or a shared value, and the statics, by name.
//!
//! Inputs come from JSON in the `--inputs` format,
//!
//! ```json
//! { "batch":  { "n": [3, 7, 4, 5] },
//!   "shared": { "k": 2, "X": [[1.0, 2.0], [3.0, 4.0]] } }
//! ```
//!
//! or are built in Rust with [`Inputs::batched`] and [`Inputs::shared`].
//! Nothing here knows the program's types: values stay as given until
//! [`Compiled::bind`](crate::Compiled::bind) converts them, directed by the
//! entry function's signature.
//!
//! JSON is parsed strictly: a key repeated in one object is an error, where
//! `serde_json` alone would silently keep the last value, and the user would
//! run a batch other than the one they wrote.
//!
//! Inputs read from JSON keep its text, so that a message quotes a number
//! as the user wrote it (`99999999999999999999`, not the `1e20` it parses
//! to): only when a message needs it is the text parsed again, as raw
//! values, down to that number.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use autobatch_types::Value;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::bind::{InputError, InputErrorKind};

/// One value given for an argument or a static: JSON, converted by type when
/// bound (an integer is accepted where a float is expected, and so on), a
/// structured [`Value`], which must have exactly the expected scalar type,
/// or an [`ArrayInput`] (a numpy array, an array of a `.npy` file),
/// converted within its family of element types.
#[derive(Clone, Debug, PartialEq)]
pub enum InputValue {
    Json(serde_json::Value),
    Value(Value),
    Array(ArrayInput),
}

/// An array read from a binary source, as one of the language's element
/// types, with the name its source gives that type (`float32`, `int16`),
/// for messages. When bound it is converted, in one pass, to the declared
/// element type of its family: any float or integer array for a float
/// type, any integer array for an integer type (each element must fit),
/// bools for `bool`; the shape must be the declared one.
///
/// ```
/// use autobatch::{compile, ArrayInput, Data, Inputs, RunConfig, Tensor};
/// use autobatch::typed::IntoValue;
/// let program = compile("fn total(x: [f64; 3]) -> f64 { sum(x) }", "t.ab").unwrap();
/// // float32 elements for an `f64` argument.
/// let x = ArrayInput::new(Tensor::new(vec![3], Data::F32(vec![1.0, 2.0, 3.5])), "float32");
/// let out = program.bind("total", &Inputs::new().shared("x", x)).unwrap()
///     .run(&RunConfig::default()).unwrap();
/// assert_eq!(out.members[0], Ok(6.5_f64.into_value()));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayInput {
    pub tensor: autobatch_types::Tensor,
    /// The source's name of the element type.
    pub dtype: String,
}

impl ArrayInput {
    pub fn new(tensor: autobatch_types::Tensor, dtype: &str) -> ArrayInput {
        ArrayInput {
            tensor,
            dtype: dtype.to_owned(),
        }
    }
}

impl ArrayInput {
    /// The rows of the array along its first axis, each an array of its
    /// own (a batched argument's members); none for a scalar.
    pub fn rows(self) -> Vec<ArrayInput> {
        let ArrayInput { tensor, dtype } = self;
        let Some((&count, row_shape)) = tensor.shape.split_first() else {
            return Vec::new();
        };
        let row_len: usize = row_shape.iter().product();
        (0..count)
            .map(|i| {
                let mut data = autobatch_types::Data::with_capacity(tensor.data.ty(), row_len);
                data.extend_from(&tensor.data, i * row_len..(i + 1) * row_len);
                ArrayInput::new(
                    autobatch_types::Tensor::new(row_shape.to_vec(), data),
                    &dtype,
                )
            })
            .collect()
    }
}

impl From<ArrayInput> for InputValue {
    fn from(array: ArrayInput) -> Self {
        InputValue::Array(array)
    }
}

impl From<serde_json::Value> for InputValue {
    fn from(json: serde_json::Value) -> Self {
        InputValue::Json(json)
    }
}

impl From<Value> for InputValue {
    fn from(value: Value) -> Self {
        InputValue::Value(value)
    }
}

impl From<bool> for InputValue {
    fn from(b: bool) -> Self {
        InputValue::Json(serde_json::Value::Bool(b))
    }
}

impl From<i32> for InputValue {
    fn from(i: i32) -> Self {
        InputValue::Json(i.into())
    }
}

impl From<i64> for InputValue {
    fn from(i: i64) -> Self {
        InputValue::Json(i.into())
    }
}

impl From<u64> for InputValue {
    fn from(u: u64) -> Self {
        InputValue::Json(u.into())
    }
}

impl From<usize> for InputValue {
    fn from(u: usize) -> Self {
        InputValue::Json((u as u64).into())
    }
}

impl From<f64> for InputValue {
    /// Non-finite floats become the strings `"NaN"`, `"inf"`, `"-inf"`,
    /// which is how JSON inputs spell them (`serde_json` would make them `null`).
    fn from(x: f64) -> Self {
        InputValue::Json(crate::json_output::float_to_json(x))
    }
}

impl From<f32> for InputValue {
    fn from(x: f32) -> Self {
        InputValue::Json(crate::json_output::float_to_json(f64::from(x)))
    }
}

impl From<Vec<f64>> for InputValue {
    fn from(xs: Vec<f64>) -> Self {
        InputValue::Json(serde_json::Value::Array(
            xs.into_iter()
                .map(crate::json_output::float_to_json)
                .collect(),
        ))
    }
}

impl From<Vec<i64>> for InputValue {
    fn from(xs: Vec<i64>) -> Self {
        InputValue::Json(serde_json::Value::Array(
            xs.into_iter().map(Into::into).collect(),
        ))
    }
}

impl From<Vec<bool>> for InputValue {
    fn from(xs: Vec<bool>) -> Self {
        InputValue::Json(serde_json::Value::Array(
            xs.into_iter().map(Into::into).collect(),
        ))
    }
}

/// The inputs of one run, by name, in the order given.
///
/// ```
/// use autobatch::Inputs;
/// let inputs = Inputs::new()
///     .batched("n", [3_i64, 7, 4])
///     .shared("scale", 0.5)
///     .shared("X", serde_json::json!([[1.0, 2.0], [3.0, 4.0]]));
/// assert_eq!(inputs.batch_size_hint(), Some(3));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    // Vectors rather than maps: the same name given twice must be reported
    // when the inputs are bound, not silently merged.
    pub(crate) batch: Vec<(String, Vec<InputValue>)>,
    pub(crate) shared: Vec<(String, InputValue)>,
    text: SourceText,
}

/// The JSON texts inputs were read from, if they were (one per source
/// merged): kept for messages, no part of the inputs' value (inputs compare
/// equal whatever their text).
#[derive(Clone, Default)]
struct SourceText(Vec<JsonText>);

/// One JSON text inputs were read from, and how it holds them.
#[derive(Clone)]
struct JsonText {
    text: Arc<str>,
    /// Whether the text is one object of shared values by name
    /// ([`Inputs::shared_from_json_str`]) rather than the `batch` and
    /// `shared` sections ([`Inputs::from_json_str`]).
    shared_only: bool,
}

impl PartialEq for SourceText {
    fn eq(&self, _: &SourceText) -> bool {
        true
    }
}

impl fmt::Debug for SourceText {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let bytes: Vec<usize> = self.0.iter().map(|t| t.text.len()).collect();
        write!(f, "SourceText({bytes:?} bytes)")
    }
}

impl Inputs {
    /// No inputs: enough for an entry function without parameters in a
    /// program without statics (a batch of one member).
    pub fn new() -> Self {
        Inputs::default()
    }

    /// Gives the entry argument `name` one value per member.
    pub fn batched<V: Into<InputValue>>(
        mut self,
        name: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.batch.push((
            name.to_owned(),
            values.into_iter().map(Into::into).collect(),
        ));
        self
    }

    /// Gives the entry argument or static `name` one value for all members.
    pub fn shared(mut self, name: &str, value: impl Into<InputValue>) -> Self {
        self.shared.push((name.to_owned(), value.into()));
        self
    }

    /// Adds shared values (arguments or statics), after those given.
    pub fn with_shared(mut self, values: impl IntoIterator<Item = (String, InputValue)>) -> Self {
        self.shared.extend(values);
        self
    }

    /// The inputs of `self` and of `other` together (as read from two
    /// sources: the weights in one file, the batch in another). A name
    /// given in both is reported when the inputs are bound.
    pub fn merge(mut self, other: Inputs) -> Self {
        self.batch.extend(other.batch);
        self.shared.extend(other.shared);
        self.text.0.extend(other.text.0);
        self
    }

    /// The names given, batched ones first, each in the order given.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let batch = self.batch.iter().map(|(n, _)| n.as_str());
        batch.chain(self.shared.iter().map(|(n, _)| n.as_str()))
    }

    /// The length of the first batched list, if any: the batch size when
    /// the inputs are consistent.
    pub fn batch_size_hint(&self) -> Option<usize> {
        self.batch.first().map(|(_, values)| values.len())
    }

    /// The inputs of the members `members` (indices into each batched
    /// list, in the order given; each must be below every list's length),
    /// with the shared values unchanged: a mini-batch of a data set.
    ///
    /// ```
    /// use autobatch::Inputs;
    /// let all = Inputs::new().batched("n", [10_i64, 11, 12, 13]).shared("k", 2_i64);
    /// let picked = all.select_members(&[3, 0]);
    /// assert_eq!(picked, Inputs::new().batched("n", [13_i64, 10]).shared("k", 2_i64));
    /// ```
    pub fn select_members(&self, members: &[usize]) -> Inputs {
        Inputs {
            batch: self
                .batch
                .iter()
                .map(|(name, values)| {
                    let picked = members.iter().map(|&m| values[m].clone()).collect();
                    (name.clone(), picked)
                })
                .collect(),
            shared: self.shared.clone(),
            text: self.text.clone(),
        }
    }

    /// Reads inputs in the `--inputs` JSON format: an object with an
    /// optional `batch` object (each value a list, one element per member)
    /// and an optional `shared` object. Errors carry `serde_json`'s line and
    /// column; a key repeated in any object is an error.
    pub fn from_json_str(text: &str) -> Result<Inputs, InputError> {
        check_top_level(text)?;
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let parsed = InputsSeed { text }
            .deserialize(&mut deserializer)
            .and_then(|inputs| {
                deserializer.end()?;
                Ok(inputs)
            });
        let parsed = parsed.map(|inputs| Inputs {
            text: SourceText(vec![JsonText {
                text: Arc::from(text),
                shared_only: false,
            }]),
            ..inputs
        });
        parsed.map_err(|e| {
            let kind = match e.classify() {
                serde_json::error::Category::Data => InputErrorKind::BadLayout,
                _ => InputErrorKind::InvalidJson,
            };
            let message = match kind {
                InputErrorKind::BadLayout => format!("inputs are not in the expected form: {e}"),
                _ => format!("inputs are not valid JSON: {e}"),
            };
            InputError::new(kind, message)
        })
    }

    /// Reads shared values (arguments or statics) from `text`, one JSON
    /// object holding each value by name (`--shared FILE.json`, the data of
    /// `autobatch sample`): parsed as strictly as the `shared` object of
    /// [`Inputs::from_json_str`] (a repeated key is an error), and
    /// keeping the text, so that a message quotes a number as written.
    /// Errors: [`InputErrorKind::InvalidJson`] with `serde_json`'s message
    /// (a repeated key's starts `duplicate key`), or
    /// [`InputErrorKind::BadLayout`] for JSON that is not an object.
    pub fn shared_from_json_str(text: &str) -> Result<Inputs, InputError> {
        let value = parse_strict_json(text)
            .map_err(|e| InputError::new(InputErrorKind::InvalidJson, e.to_string()))?;
        let serde_json::Value::Object(object) = value else {
            return Err(InputError::new(
                InputErrorKind::BadLayout,
                format!(
                    "shared values must be a JSON object holding each value by name, found {}",
                    crate::bind::describe_json(&value)
                ),
            ));
        };
        Ok(Inputs {
            batch: Vec::new(),
            shared: object
                .into_iter()
                .map(|(name, json)| (name, InputValue::Json(json)))
                .collect(),
            text: SourceText(vec![JsonText {
                text: Arc::from(text),
                shared_only: true,
            }]),
        })
    }

    /// Takes the shared value `name` out of the inputs (the first given).
    pub fn take_shared(&mut self, name: &str) -> Option<InputValue> {
        let index = self.shared.iter().position(|(n, _)| n == name)?;
        Some(self.shared.remove(index).1)
    }

    /// The JSON value `json` given for the shared `name`, for a message: a
    /// number as the inputs' text writes it, else a description.
    pub fn describe_shared(&self, name: &str, json: &serde_json::Value) -> String {
        let place = JsonPlace {
            section: "shared",
            name,
            indices: Vec::new(),
        };
        match json {
            serde_json::Value::Number(_) => self.written_number(&place),
            _ => None,
        }
        .unwrap_or_else(|| crate::bind::describe_json(json))
    }

    /// The JSON number at `place` as the inputs' text writes it, if the
    /// inputs were read from JSON and it is there.
    pub(crate) fn written_number(&self, place: &JsonPlace) -> Option<String> {
        self.text.0.iter().find_map(|source| {
            if source.shared_only {
                (place.section == "shared")
                    .then(|| written_in(&source.text, place.name, &place.indices))
                    .flatten()
            } else {
                written_number(&source.text, place)
            }
        })
    }
}

/// Where a value is in the inputs' JSON: in `section` (`batch` or
/// `shared`), under `name`, then at `indices` into nested lists (a batched
/// argument's first index is the member).
pub(crate) struct JsonPlace<'a> {
    pub section: &'a str,
    pub name: &'a str,
    pub indices: Vec<usize>,
}

/// The number at `place` in `text` as written, or `None` if there is no
/// number there. Parses `text` again, as raw values: only for messages.
fn written_number(text: &str, place: &JsonPlace) -> Option<String> {
    let top: HashMap<String, &RawValue> = serde_json::from_str(text).ok()?;
    written_in(top.get(place.section)?.get(), place.name, &place.indices)
}

/// The number under `name`, then at `indices`, in the JSON object `text`,
/// as written (`None` if there is no number there).
fn written_in(text: &str, name: &str, indices: &[usize]) -> Option<String> {
    let object: HashMap<String, &RawValue> = serde_json::from_str(text).ok()?;
    let mut value: &RawValue = object.get(name)?;
    for &index in indices {
        let items: Vec<&RawValue> = serde_json::from_str(value.get()).ok()?;
        value = items.get(index)?;
    }
    let written = value.get().trim();
    written
        .starts_with(|c: char| c == '-' || c.is_ascii_digit())
        .then(|| written.to_owned())
}

/// Refuses a text that does not start an object: not JSON, or saying what
/// the inputs must be and what the text is; the other mistakes are found
/// as it is parsed.
fn check_top_level(text: &str) -> Result<(), InputError> {
    if text.trim_start().starts_with('{') {
        return Ok(());
    }
    let value = serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
        InputError::new(
            InputErrorKind::InvalidJson,
            format!("inputs are not valid JSON: {e}"),
        )
    })?;
    let found = match &value {
        serde_json::Value::Number(_) => text.trim().to_owned(),
        other => crate::bind::describe_json(other),
    };
    Err(InputError::new(
        InputErrorKind::BadLayout,
        format!(
            "the inputs must be a JSON object with the keys \"batch\" and \"shared\" \
             ({{\"batch\": {{NAME: [one value per member]}}, \"shared\": {{NAME: value}}}}), \
             found {found}"
        ),
    ))
}

/// Parses the top-level object of the inputs file, whose text is `text`.
struct InputsSeed<'t> {
    text: &'t str,
}

impl<'de> DeserializeSeed<'de> for InputsSeed<'_> {
    type Value = Inputs;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Inputs, D::Error> {
        deserializer.deserialize_map(InputsVisitor { text: self.text })
    }
}

struct InputsVisitor<'t> {
    text: &'t str,
}

impl<'de> Visitor<'de> for InputsVisitor<'_> {
    type Value = Inputs;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with the keys `batch` and `shared`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Inputs, A::Error> {
        let mut inputs = Inputs::new();
        let mut seen_batch = false;
        let mut seen_shared = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "batch" => {
                    if std::mem::replace(&mut seen_batch, true) {
                        return Err(de::Error::custom("duplicate key `batch`"));
                    }
                    for (name, json) in map.next_value_seed(SectionSeed { section: "batch" })? {
                        match json {
                            serde_json::Value::Array(values) => inputs
                                .batch
                                .push((name, values.into_iter().map(InputValue::Json).collect())),
                            other => {
                                let place = JsonPlace {
                                    section: "batch",
                                    name: &name,
                                    indices: Vec::new(),
                                };
                                let found = written_number(self.text, &place)
                                    .unwrap_or_else(|| crate::bind::describe_json(&other));
                                return Err(de::Error::custom(format!(
                                    "batched argument `{name}` must be a list with one value per member, found {found}"
                                )));
                            }
                        }
                    }
                }
                "shared" => {
                    if std::mem::replace(&mut seen_shared, true) {
                        return Err(de::Error::custom("duplicate key `shared`"));
                    }
                    for (name, json) in map.next_value_seed(SectionSeed { section: "shared" })? {
                        inputs.shared.push((name, InputValue::Json(json)));
                    }
                }
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown key `{other}` at the top level (expected `batch` and `shared`)"
                    )))
                }
            }
        }
        Ok(inputs)
    }
}

/// Parses the `batch` or `shared` object, keeping the order and refusing repeated names.
struct SectionSeed {
    section: &'static str,
}

impl<'de> DeserializeSeed<'de> for SectionSeed {
    type Value = Vec<(String, serde_json::Value)>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SectionSeed {
    type Value = Vec<(String, serde_json::Value)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object mapping names to values in `{}`", self.section)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries: Vec<(String, serde_json::Value)> = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if entries.iter().any(|(seen, _)| *seen == name) {
                return Err(de::Error::custom(format!(
                    "`{name}` is given twice in `{}`",
                    self.section
                )));
            }
            let StrictJson(value) = map.next_value()?;
            entries.push((name, value));
        }
        Ok(entries)
    }
}

/// Parses `text` as JSON as the inputs are parsed: like
/// `serde_json::from_str`, except that a key repeated in any object is an
/// error (`duplicate key `NAME``, with its line and column).
pub fn parse_strict_json(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str::<StrictJson>(text).map(|StrictJson(value)| value)
}

/// A JSON value parsed like `serde_json::Value`, except that a key repeated
/// in an object is an error.
struct StrictJson(serde_json::Value);

impl<'de> Deserialize<'de> for StrictJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(StrictJsonVisitor)
            .map(StrictJson)
    }
}

struct StrictJsonVisitor;

impl<'de> Visitor<'de> for StrictJsonVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(i.into())
    }

    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(u.into())
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(x)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom(format!("the number {x} is not finite")))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        StrictJson::deserialize(deserializer).map(|StrictJson(v)| v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictJson(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let StrictJson(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}
