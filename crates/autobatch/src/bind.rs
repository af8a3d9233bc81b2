//! Binding inputs to an entry function: checking that every parameter and
//! static is given exactly once, converting each value to tensors directed by
//! its declared type, and binding the symbolic dimensions from the shapes.
//!
//! Everything that can be wrong with the inputs is found here, before
//! anything runs, and reported as an [`InputError`] whose message names what
//! is wrong and where: the argument or static, the member, and the path
//! inside the value (`x[2][0]`, `pair.1`).
//!
//! Conversion rules for JSON: `true`/`false` for `bool`; integers must be
//! JSON integers that fit their type (no fraction, no negative `usize`); floats
//! accept any JSON number and the strings `"NaN"`, `"inf"`, `"-inf"`; arrays
//! are nested lists, rectangular, with the declared lengths; tuples are lists
//! of the tuple's arity; the unit type `()` is `null` or `[]`. A structured
//! [`Value`] must have exactly the declared scalar type and shape.

use std::fmt;
use std::sync::Arc;

use autobatch_exec::{Arg, Batch, Env, RaggedSymbol};
use autobatch_ir::{EntityRef, FuncId, Function, Program};
use autobatch_types::{Data, Dim, Scalar, ScalarType, SymbolId, Tensor, TensorType, Type, Value};

use crate::compile::Compiled;
use crate::inputs::{InputValue, Inputs, JsonPlace};
use names::{check_names, check_statics_given, missing_argument, missing_static, Statics};

/// What kind of problem an [`InputError`] reports; the message says the details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputErrorKind {
    /// The inputs text is not JSON.
    InvalidJson,
    /// The inputs are JSON but not of the `{"batch": {...}, "shared": {...}}`
    /// form (including a key repeated in one object).
    BadLayout,
    /// No function of that name to run.
    UnknownEntry,
    /// A name that is neither a parameter of the entry nor a static.
    UnknownName,
    /// A parameter or static that is not given.
    MissingName,
    /// A name given twice (in both sections, or twice in one).
    DuplicatedName,
    /// A static given per member: statics are shared by all members.
    StaticInBatch,
    /// A parameter with the same name as a static, so the inputs cannot name both.
    NameClash,
    /// A batched list with no values.
    EmptyBatch,
    /// Batched lists of different lengths.
    BatchLengthMismatch,
    /// A value of the wrong type or shape.
    BadValue,
    /// A symbolic dimension with different lengths in different places.
    DimensionMismatch,
    /// A symbolic dimension that only occurs inside empty arrays.
    UndeterminedDimension,
    /// A gradient with respect to statics that cannot be taken (the entry
    /// does not return a float scalar, a static is not a float, or the
    /// code breaks a rule of `grad`).
    NotDifferentiable,
}

/// Inputs that cannot be run: what is wrong and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    kind: InputErrorKind,
    message: String,
    /// Whether the error is about what the inputs hold, rather than about
    /// the request (the entry, the statics to differentiate) or the program.
    about_the_inputs: bool,
    /// The argument or static whose value is wrong, for an error about one value.
    input: Option<String>,
}

impl InputError {
    /// An error about what the inputs hold; one of kind
    /// [`InputErrorKind::UnknownEntry`] or [`InputErrorKind::NotDifferentiable`]
    /// is about the request.
    pub(crate) fn new(kind: InputErrorKind, message: impl Into<String>) -> Self {
        let about_the_inputs = !matches!(
            kind,
            InputErrorKind::UnknownEntry | InputErrorKind::NotDifferentiable
        );
        InputError {
            kind,
            message: message.into(),
            about_the_inputs,
            input: None,
        }
    }
    /// An error about the request (a static to differentiate, a host
    /// function) or the program, not about what the inputs hold.
    pub(crate) fn about_the_request(kind: InputErrorKind, message: impl Into<String>) -> Self {
        InputError {
            about_the_inputs: false,
            ..InputError::new(kind, message)
        }
    }
    /// The same error, about the value of the input `name`.
    pub(crate) fn about_input(self, name: &str) -> Self {
        InputError {
            input: Some(name.to_owned()),
            ..self
        }
    }
    pub fn kind(&self) -> InputErrorKind {
        self.kind
    }
    /// Whether the error is about what the inputs hold (a value, a name,
    /// the layout), so that a message may name the file they came from;
    /// not about the entry, the statics to differentiate or the program.
    pub fn is_about_the_inputs(&self) -> bool {
        self.about_the_inputs
    }
    /// One line for people.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The argument or static whose value is wrong, when the error is
    /// about one value (so that a caller that read the inputs from several
    /// sources can say which one held it).
    pub fn input_name(&self) -> Option<&str> {
        self.input.as_deref()
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for InputError {}

/// A batch ready to run: the program, the entry function, the shared
/// environment (statics and symbolic dimensions) and the flattened arguments.
#[derive(Clone, Debug)]
pub struct BoundBatch {
    pub(crate) program: Arc<Program>,
    entry: FuncId,
    env: Env,
    batch: Batch,
    /// The index of member 0 in the whole batch this one is a slice of
    /// (0 for a whole batch): member `m` draws random numbers as member
    /// `first_member + m` of the whole batch.
    first_member: u64,
    /// The statics whose gradient (summed over the members) the run gives
    /// ([`Compiled::bind_static_gradient`]), by name; none for a plain run.
    pub(crate) gradients: Vec<(String, autobatch_ir::StaticId)>,
    /// The seconds spent reading and binding this batch.
    pub(crate) preparation: Preparation,
    /// For each of `gradients`, whether the derived program reads the
    /// static only by rows.
    pub(crate) by_rows: Vec<bool>,
    /// Whether the statics read only by rows have their gradients summed
    /// by rows ([`BoundBatch::with_row_gradients`]).
    pub(crate) row_gradients: bool,
}

/// The seconds a batch took to make before it ran, which `--stats`
/// reports beside the run's own (`wall_seconds`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Preparation {
    /// Reading and parsing the files the inputs came from: set by the
    /// caller that read them ([`BoundBatch::read_in`]); 0 for inputs
    /// given in memory.
    pub read_seconds: f64,
    /// Binding: checking the inputs against the entry and converting them
    /// to its types (the statics too, unless they were bound before, by
    /// [`Compiled::with_statics`]).
    pub bind_seconds: f64,
}

/// Runs `bind` and records its seconds in the batch it makes.
fn timed_bind(
    bind: impl FnOnce() -> Result<BoundBatch, InputError>,
) -> Result<BoundBatch, InputError> {
    let started = std::time::Instant::now();
    let mut batch = bind()?;
    batch.preparation.bind_seconds = started.elapsed().as_secs_f64();
    Ok(batch)
}

impl BoundBatch {
    /// A batch made of its parts (a shard received from another rank).
    pub(crate) fn from_parts(
        program: Arc<Program>,
        env: Env,
        batch: Batch,
        first_member: u64,
    ) -> BoundBatch {
        BoundBatch {
            program,
            entry: batch.entry,
            env,
            batch,
            first_member,
            gradients: Vec::new(),
            preparation: Preparation::default(),
            by_rows: Vec::new(),
            row_gradients: false,
        }
    }
    /// The same batch as members `first..` of a larger batch: member `m`
    /// draws the random numbers member `first + m` draws in the larger
    /// batch, so its results are the ones it has there (used to run one
    /// shard of a batch, and by `sample` for one rank's chains).
    pub fn numbered_from(mut self, first: u64) -> BoundBatch {
        self.first_member = first;
        self
    }
    /// The same batch, recording that reading its inputs took
    /// `seconds` ([`Preparation::read_seconds`]).
    pub fn read_in(mut self, seconds: f64) -> BoundBatch {
        self.preparation.read_seconds = seconds;
        self
    }
    /// How long the batch took to read and bind.
    pub fn preparation(&self) -> Preparation {
        self.preparation
    }
    /// The index in the whole batch of this batch's member 0.
    pub fn first_member(&self) -> u64 {
        self.first_member
    }
    pub fn program(&self) -> &Program {
        &self.program
    }
    /// The entry function's id in [`BoundBatch::program`].
    pub fn entry(&self) -> FuncId {
        self.entry
    }
    pub fn entry_function(&self) -> &Function {
        &self.program.functions[self.entry]
    }
    /// The statics and symbolic dimensions, as the executors take them.
    pub fn env(&self) -> &Env {
        &self.env
    }
    /// The flattened arguments, as the executors take them.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }
    /// The number of members.
    pub fn batch_size(&self) -> usize {
        self.batch.size
    }

    /// The same batch, giving the gradients of the statics the derived
    /// program reads only by rows (`E[i]`: an embedding table) in
    /// [`crate::RunResult::row_gradients`], kept to the rows the members
    /// touched, instead of whole in [`crate::RunResult::static_gradients`].
    /// Each touched row has the bits the whole gradient gives it; the
    /// others are zero. Nothing else changes.
    pub fn with_row_gradients(mut self) -> BoundBatch {
        self.row_gradients = true;
        self
    }

    /// Makes this batch give the gradients `derived` was derived for.
    fn set_gradients(&mut self, derived: Derived) {
        self.gradients = derived.statics;
        self.by_rows = derived.read_by_rows;
    }
}

impl Compiled {
    /// Binds `inputs` to the entry function `entry`: see the [module docs](crate::bind)
    /// for the rules. With no batched argument the batch has one member.
    pub fn bind(&self, entry: &str, inputs: &Inputs) -> Result<BoundBatch, InputError> {
        timed_bind(|| {
            let entry_id = self.entry_function(entry)?;
            self.bind_function(entry_id, inputs)
        })
    }

    /// Binds `inputs` to `entry` to run, instead of `entry`, the gradient
    /// of the sum of the members' results (each member's loss: `entry`
    /// returns a float scalar) with respect to the `statics`, as JAX's
    /// `grad(lambda W: vmap(loss)(W, xs).sum())`. Each member still gets
    /// its own result (its loss), exactly as [`Compiled::bind`] gives it;
    /// the run's [`crate::RunResult::static_gradients`] holds the sum's
    /// gradient, one value per static, of the static's type: the sum of
    /// the contributions of the members that finish (a member that faults
    /// contributes nothing), in an order fixed by the contributions'
    /// values (see `docs/language.md`, "Gradients with respect to
    /// statics"), so that its bits depend neither on the strategy, the
    /// threads, nor the order of the members. The rules of `grad` hold
    /// with the statics in the place of the point.
    pub fn bind_static_gradient(
        &self,
        entry: &str,
        statics: &[&str],
        inputs: &Inputs,
    ) -> Result<BoundBatch, InputError> {
        timed_bind(|| {
            let derived = self.derive_static_gradient(entry, statics)?;
            let mut bound = derived.program.bind_function(derived.entry, inputs)?;
            bound.set_gradients(derived);
            Ok(bound)
        })
    }

    /// The IR of `entry'sgrad` (see [`Compiled::bind_static_gradient`]) and
    /// of the functions it reaches, as `autobatch ir --entry NAME
    /// --grad-statics S,..` prints it.
    pub fn static_gradient_ir_text(
        &self,
        entry: &str,
        statics: &[&str],
    ) -> Result<String, InputError> {
        let derived = self.derive_static_gradient(entry, statics)?;
        Ok(derived.program.ir_text_from(derived.entry))
    }

    /// The program with `entry'sgrad` added (see
    /// [`Compiled::bind_static_gradient`]), verified and optimized.
    fn derive_static_gradient(&self, entry: &str, statics: &[&str]) -> Result<Derived, InputError> {
        let original = self.entry_function(entry)?;
        let ids = self.check_static_gradient(original, entry, statics)?;
        let names: Vec<String> = statics.iter().map(|s| s.to_string()).collect();
        let (mut program, sgrad) =
            crate::frontend_bridge::lower_static_gradient(self.source(), entry, &names).map_err(
                |diagnostics| {
                    let error = crate::compile::CompileError::new(diagnostics, self);
                    InputError::new(
                        InputErrorKind::NotDifferentiable,
                        format!(
                            "cannot differentiate `{entry}` with respect to {}:\n{}",
                            statics.join(", "),
                            error.render(false)
                        ),
                    )
                },
            )?;
        crate::compile::verify_and_optimize(&mut program);
        let read_by_rows = ids.iter().map(|&id| read_by_rows(&program, id)).collect();
        Ok(Derived {
            program: self.with_program(program),
            entry: sgrad,
            entry_name: entry.to_owned(),
            statics: names.into_iter().zip(ids).collect(),
            read_by_rows,
        })
    }

    /// Checks a request of [`Compiled::bind_static_gradient`]: `entry`
    /// returns a float scalar; the statics exist, are floats, and are
    /// named once each. Gives their ids, in order.
    fn check_static_gradient(
        &self,
        entry_id: FuncId,
        entry: &str,
        statics: &[&str],
    ) -> Result<Vec<autobatch_ir::StaticId>, InputError> {
        let program = self.program();
        let function = &program.functions[entry_id];
        let scalar_float =
            matches!(function.results.as_slice(), [t] if t.is_scalar() && t.elem.is_float());
        if !scalar_float {
            return Err(InputError::new(
                InputErrorKind::NotDifferentiable,
                format!(
                    "a gradient with respect to statics needs an entry that returns one float \
                     scalar (each member's loss), but `{entry}` returns {}",
                    type_name(program, &function.ret_type)
                ),
            ));
        }
        if statics.is_empty() {
            return Err(InputError::new(
                InputErrorKind::NotDifferentiable,
                "a gradient with respect to statics needs at least one static",
            ));
        }
        let float_statics: Vec<&str> = program
            .statics
            .values()
            .filter(|s| s.ty.elem.is_float())
            .map(|s| s.name.as_str())
            .collect();
        let mut ids = Vec::with_capacity(statics.len());
        for (k, name) in statics.iter().enumerate() {
            let found = program.statics.iter().find(|(_, s)| s.name == *name);
            let id = match found {
                Some((id, s)) if s.ty.elem.is_float() => id,
                Some((_, s)) => {
                    return Err(InputError::new(
                        InputErrorKind::NotDifferentiable,
                        format!(
                            "cannot differentiate with respect to the static `{name}`: it is of type {}, not a float",
                            type_name(program, &Type::Tensor(s.ty.clone()))
                        ),
                    ))
                }
                None => {
                    return Err(InputError::about_the_request(
                        InputErrorKind::UnknownName,
                        format!(
                            "no static named `{name}` in {} (float statics: {})",
                            self.path(),
                            if float_statics.is_empty() {
                                "none".to_owned()
                            } else {
                                float_statics.join(", ")
                            }
                        ),
                    ))
                }
            };
            if statics[..k].contains(name) {
                return Err(InputError::about_the_request(
                    InputErrorKind::DuplicatedName,
                    format!("the static `{name}` is named twice"),
                ));
            }
            ids.push(id);
        }
        Ok(ids)
    }

    /// Binds `inputs` to the function `entry_id` (see [`Compiled::bind`]):
    /// the statics through a [`BoundProgram`] made for this batch alone.
    fn bind_function(&self, entry_id: FuncId, inputs: &Inputs) -> Result<BoundBatch, InputError> {
        let program = self.program();
        let function = &program.functions[entry_id];
        check_names(program, function, inputs, Statics::Given)?;
        let batch_size = batch_size(inputs)?;
        let bound = BoundProgram::convert(self.clone(), inputs)?;
        bound.bind_params(self, entry_id, inputs, batch_size)
    }
}

/// A program with a gradient with respect to statics derived: the program,
/// the derived function, and the statics by name.
#[derive(Clone, Debug)]
struct Derived {
    program: Compiled,
    entry: FuncId,
    /// The name of the function whose gradient it is.
    entry_name: String,
    statics: Vec<(String, autobatch_ir::StaticId)>,
    /// For each of `statics`, whether the derived program reads it only by
    /// rows ([`read_by_rows`]).
    read_by_rows: Vec<bool>,
}

/// Whether every contribution `program` makes to the adjoint of static
/// `id` is a row (`row` or `outer_row`: the static is read only as
/// `S[i]`, as an embedding table is), and there is one.
fn read_by_rows(program: &Program, id: autobatch_ir::StaticId) -> bool {
    use autobatch_ir::{AdjointKind, Op, Prim};
    let mut kinds = program
        .functions
        .values()
        .flat_map(|f| f.blocks.values())
        .flat_map(|b| &b.ops)
        .filter_map(|op| match op {
            Op::Prim {
                prim: Prim::StaticAdjoint(a),
                ..
            } if a.id == id => Some(a.kind),
            _ => None,
        })
        .peekable();
    kinds.peek().is_some() && kinds.all(|k| matches!(k, AdjointKind::Row | AdjointKind::OuterRow))
}

/// The value given in `shared` for `name`.
fn shared_value<'i>(inputs: &'i Inputs, name: &str) -> Option<&'i InputValue> {
    inputs
        .shared
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

/// Every static of `program`, converted, in order.
fn convert_statics(
    program: &Program,
    inputs: &Inputs,
    dimensions: &mut DimensionBinder,
) -> Result<Vec<Converted>, InputError> {
    let mut converted = Vec::with_capacity(program.statics.len());
    for (_, decl) in program.statics.iter() {
        // `check_names` made sure every static is in `shared`.
        let value = shared_value(inputs, &decl.name).ok_or_else(|| missing_static(&decl.name))?;
        let place = Place {
            what: "static",
            root: &decl.name,
            written: Written::shared(inputs),
        };
        let ty = Type::Tensor(decl.ty.clone());
        converted.push(convert(program, value, &ty, &place, dimensions)?);
    }
    Ok(converted)
}

/// A converted argument of the entry: one value for every member, or one
/// value per member.
enum ConvertedParam {
    Shared(Converted),
    Batched(Vec<Converted>),
}

impl ConvertedParam {
    /// The argument's flattened tensors, each one [`Arg`].
    fn finish(self, program: &Program, lengths: &Lengths) -> Result<Vec<Arg>, InputError> {
        match self {
            ConvertedParam::Shared(value) => Ok(value
                .finish(program, &lengths.batch)?
                .flatten()
                .into_iter()
                .map(Arg::Shared)
                .collect()),
            ConvertedParam::Batched(members) => {
                let mut per_member = Vec::with_capacity(members.len());
                for (member, value) in members.into_iter().enumerate() {
                    per_member.push(value.finish(program, &lengths.of_member(member))?.flatten());
                }
                // Transpose member-major to argument-major: one `Arg` per flattened tensor.
                let flat_len = per_member.first().map_or(0, Vec::len);
                let mut columns: Vec<Vec<Tensor>> = (0..flat_len)
                    .map(|_| Vec::with_capacity(per_member.len()))
                    .collect();
                for flat in per_member {
                    for (column, tensor) in columns.iter_mut().zip(flat) {
                        column.push(tensor);
                    }
                }
                Ok(columns.into_iter().map(Arg::Batched).collect())
            }
        }
    }
}

/// Every parameter of `function`, converted, in order; and, per member,
/// the lengths its batched arguments fix (over those `shared` has: the
/// statics' and shared arguments', converted first).
fn convert_params<'p>(
    program: &'p Program,
    function: &Function,
    inputs: &Inputs,
    batch_size: usize,
    shared: &mut DimensionBinder<'p>,
) -> Result<(Vec<ConvertedParam>, Vec<DimensionBinder<'p>>), InputError> {
    let mut converted: Vec<Option<ConvertedParam>> = Vec::with_capacity(function.signature.len());
    for param in &function.signature {
        converted.push(match shared_value(inputs, &param.name) {
            Some(value) => {
                let place = Place {
                    what: "argument",
                    root: &param.name,
                    written: Written::shared(inputs),
                };
                let value = convert(program, value, &param.ty, &place, shared)?;
                Some(ConvertedParam::Shared(value))
            }
            None => None,
        });
    }
    let mut members = vec![shared.clone(); batch_size];
    for (param, converted) in function.signature.iter().zip(&mut converted) {
        if converted.is_some() {
            continue;
        }
        let values = inputs
            .batch
            .iter()
            .find(|(n, _)| *n == param.name)
            .map(|(_, values)| values)
            .ok_or_else(|| missing_argument(function, &param.name))?;
        let mut converted_members = Vec::with_capacity(values.len());
        for (member, value) in values.iter().enumerate() {
            let place = Place {
                what: "argument",
                root: &param.name,
                written: Written {
                    inputs,
                    section: "batch",
                    member: Some(member),
                },
            };
            let dimensions = members.get_mut(member).ok_or_else(|| {
                InputError::new(
                    InputErrorKind::BatchLengthMismatch,
                    format!(
                        "batched argument `{}` has more values than the batch has members",
                        param.name
                    ),
                )
            })?;
            converted_members.push(convert(program, value, &param.ty, &place, dimensions)?);
        }
        *converted = Some(ConvertedParam::Batched(converted_members));
    }
    let converted = converted.into_iter().flatten().collect();
    Ok((converted, members))
}

/// The batch size: the common length of the batched lists, or 1 without any.
fn batch_size(inputs: &Inputs) -> Result<usize, InputError> {
    let Some((first_name, first_values)) = inputs.batch.first() else {
        return Ok(1);
    };
    for (name, values) in &inputs.batch {
        if values.is_empty() {
            return Err(InputError::new(
                InputErrorKind::EmptyBatch,
                format!(
                    "batched argument `{name}` is an empty list: a batch needs at least one member"
                ),
            ));
        }
        if values.len() != first_values.len() {
            return Err(InputError::new(
                InputErrorKind::BatchLengthMismatch,
                format!(
                    "batched arguments differ in length: `{first_name}` has {} values but `{name}` has {}",
                    first_values.len(),
                    values.len()
                ),
            ));
        }
    }
    Ok(first_values.len())
}

/// Which input a value is, for messages: what it is (`argument`,
/// `static`), the name its paths start with (`x`), and where the inputs'
/// text has it (with the member of a batched argument). Its description
/// ("argument `x` of member 2") is only written out for a message.
struct Place<'i> {
    what: &'static str,
    root: &'i str,
    written: Written<'i>,
}

/// Where in the inputs a value is given: in `section`, as the value of
/// member `member` for a batched argument.
struct Written<'i> {
    inputs: &'i Inputs,
    section: &'static str,
    member: Option<usize>,
}

impl<'i> Written<'i> {
    fn shared(inputs: &'i Inputs) -> Written<'i> {
        Written {
            inputs,
            section: "shared",
            member: None,
        }
    }
}

impl Place<'_> {
    /// "argument `x` of member 2", "argument `x`", "static `W`".
    fn description(&self) -> String {
        match self.written.member {
            Some(member) => format!("{} `{}` of member {member}", self.what, self.root),
            None => format!("{} `{}`", self.what, self.root),
        }
    }

    /// What the JSON value at `path` is, for "found ..." in messages: a
    /// number as the inputs' text writes it.
    fn found(&self, json: &serde_json::Value, path: &str) -> String {
        if let serde_json::Value::Number(_) = json {
            // The indices after the root: `x[2].1[0]` is 2, 1, 0.
            let within = path.strip_prefix(self.root).unwrap_or("");
            let indices = within
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .filter_map(|s| s.parse().ok());
            let place = JsonPlace {
                section: self.written.section,
                name: self.root,
                indices: self.written.member.into_iter().chain(indices).collect(),
            };
            if let Some(written) = self.written.inputs.written_number(&place) {
                return written;
            }
        }
        describe_json(json)
    }

    /// An error about the part of the value at `path`.
    fn error(&self, path: &str, problem: impl fmt::Display) -> InputError {
        let message = if path == self.root {
            format!("{} {problem}", self.description())
        } else {
            format!("{}: `{path}` {problem}", self.description())
        };
        InputError::new(InputErrorKind::BadValue, message).about_input(self.root)
    }

    /// Where an axis was measured, for dimension messages.
    fn axis_description(&self, axis_path: &str) -> String {
        if axis_path == self.root {
            self.description()
        } else {
            format!("{} (at `{axis_path}`)", self.description())
        }
    }
}

/// The lengths bound to symbolic dimensions so far, with where each was first seen.
#[derive(Clone)]
struct DimensionBinder<'p> {
    program: &'p Program,
    /// Per symbol.
    bound: Vec<Option<BoundDimension>>,
}

/// The length of a symbolic dimension, and the input it was first seen in.
#[derive(Clone, Debug)]
struct BoundDimension {
    length: u64,
    /// Shared by the clones of the binder made for each member.
    seen_in: Arc<str>,
}

impl<'p> DimensionBinder<'p> {
    fn new(program: &'p Program) -> Self {
        DimensionBinder {
            program,
            bound: vec![None; program.symbols.len()],
        }
    }

    /// Binds `symbol` to `length`, or checks it against the length bound
    /// before; `seen_in` says where (written out only when it is the
    /// first or differs).
    fn observe(
        &mut self,
        symbol: SymbolId,
        length: usize,
        seen_in: impl FnOnce() -> String,
    ) -> Result<(), InputError> {
        let Some(slot) = self.bound.get_mut(symbol.0 as usize) else {
            // The verifier guarantees symbols exist; a stray one binds nothing.
            return Ok(());
        };
        match slot {
            None => {
                *slot = Some(BoundDimension {
                    length: length as u64,
                    seen_in: seen_in().into(),
                });
                Ok(())
            }
            Some(first) if first.length == length as u64 => Ok(()),
            Some(first) => Err(InputError::new(
                InputErrorKind::DimensionMismatch,
                format!(
                    "symbolic dimension `{}` is {} in {} but {length} in {}",
                    self.program.symbol_name(symbol),
                    first.length,
                    first.seen_in,
                    seen_in()
                ),
            )),
        }
    }

    /// Per symbol, the length bound so far.
    fn known_lengths(&self) -> Vec<Option<u64>> {
        self.bound
            .iter()
            .map(|b| b.as_ref().map(|b| b.length))
            .collect()
    }

    fn get(&self, symbol: SymbolId) -> Option<u64> {
        self.bound
            .get(symbol.0 as usize)
            .and_then(|b| b.as_ref().map(|b| b.length))
    }
}

/// The length of every symbolic dimension: one for the whole batch (fixed by
/// a static or a shared argument, or by batched arguments on which every
/// member agrees), or, for a ragged dimension (only batched arguments fix
/// it, and members differ), one per member.
struct Lengths {
    /// Per symbol: its length for every member, if it has one.
    batch: Vec<Option<u64>>,
    /// Per member: the lengths its own arguments fix.
    members: Vec<Vec<Option<u64>>>,
    ragged: Vec<RaggedSymbol>,
}

impl Lengths {
    fn new(
        program: &Program,
        shared: &DimensionBinder<'_>,
        members: &[DimensionBinder<'_>],
    ) -> Result<Lengths, InputError> {
        let symbols = program.symbols.len();
        let mut batch = vec![None; symbols];
        let mut ragged = Vec::new();
        for (s, length) in batch.iter_mut().enumerate() {
            let symbol = SymbolId(s as u32);
            if let Some(fixed) = shared.get(symbol) {
                *length = Some(fixed);
                continue;
            }
            let mut seen = members.iter().filter_map(|m| m.get(symbol));
            let Some(first) = seen.next() else {
                continue;
            };
            if seen.all(|l| l == first) {
                *length = Some(first);
                continue;
            }
            let mut lengths = Vec::with_capacity(members.len());
            for (member, dimensions) in members.iter().enumerate() {
                lengths.push(dimensions.get(symbol).ok_or_else(|| {
                    InputError::new(
                        InputErrorKind::UndeterminedDimension,
                        format!(
                            "symbolic dimension `{}` cannot be determined for member {member}: its arguments have it only inside empty arrays, and the other members' lengths differ",
                            program.symbol_name(symbol)
                        ),
                    )
                })?);
            }
            ragged.push(RaggedSymbol { symbol, lengths });
        }
        let members = members
            .iter()
            .map(|m| (0..symbols).map(|s| m.get(SymbolId(s as u32))).collect())
            .collect();
        Ok(Lengths {
            batch,
            members,
            ragged,
        })
    }

    /// The lengths member `member` sees: its own, else the batch's.
    fn of_member(&self, member: usize) -> Vec<Option<u64>> {
        let own = &self.members[member];
        own.iter()
            .zip(&self.batch)
            .map(|(own, batch)| own.or(*batch))
            .collect()
    }

    /// Whether `symbol` has a length for every member.
    fn is_fixed(&self, symbol: SymbolId) -> bool {
        self.batch
            .get(symbol.0 as usize)
            .copied()
            .flatten()
            .is_some()
            || self.ragged.iter().any(|r| r.symbol == symbol)
    }

    /// The value of every symbol, for `Env::symbols`: a ragged one's is its
    /// longest member's. A symbol that no input has in its type cannot be
    /// bound from the inputs at all; it is 0, and only code the entry does
    /// not reach may use it (`check_symbols_fixed`).
    fn symbol_values(&self) -> Vec<u64> {
        let mut values: Vec<u64> = self.batch.iter().map(|l| l.unwrap_or(0)).collect();
        for ragged in &self.ragged {
            values[ragged.symbol.0 as usize] = ragged.lengths.iter().copied().max().unwrap_or(0);
        }
        values
    }
}

/// Refuses a run whose entry reaches code that uses a symbolic dimension
/// no input fixes (it would have no length). A symbol only unreachable
/// code uses may stay unfixed.
fn check_symbols_fixed(
    program: &Program,
    entry: FuncId,
    lengths: &Lengths,
) -> Result<(), InputError> {
    let reach = autobatch_passes::stack::reachability(program);
    for (fid, function) in program.functions.iter() {
        if !reach[entry.index()][fid.index()] {
            continue;
        }
        if let Some(symbol) = symbols_used(function).find(|s| !lengths.is_fixed(*s)) {
            return Err(InputError::new(
                InputErrorKind::UndeterminedDimension,
                format!(
                    "symbolic dimension `{}` (used by `{}`) is not fixed by any input: give a static or an argument whose type has it",
                    program.symbol_name(symbol),
                    function.user_name()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a run whose entry reaches a call of a host primitive that has
/// no host function registered.
fn check_hosts_registered(
    program: &Program,
    entry: FuncId,
    hosts: &autobatch_exec::Hosts,
) -> Result<(), InputError> {
    let reach = autobatch_passes::stack::reachability(program);
    for (fid, function) in program.functions.iter() {
        if !reach[entry.index()][fid.index()] {
            continue;
        }
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            if let autobatch_ir::Op::Prim {
                prim: autobatch_ir::Prim::Host(host),
                ..
            } = op
            {
                if !hosts.contains(&host.name) {
                    return Err(InputError::about_the_request(
                        InputErrorKind::MissingName,
                        format!(
                            "host primitive `{}` (called by `{}`) has no host function: register one with `Compiled::with_host` (the `autobatch` command cannot run a program that calls host primitives)",
                            host.name,
                            function.user_name()
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The symbolic dimensions a function uses: in the types of its variables
/// and results, and in its `fill` and `symbol_value` operations.
fn symbols_used(function: &Function) -> impl Iterator<Item = SymbolId> + '_ {
    let in_type = |ty: &TensorType| -> Vec<SymbolId> {
        ty.dims
            .iter()
            .filter_map(|d| match d {
                Dim::Symbolic(s) => Some(*s),
                Dim::Fixed(_) => None,
            })
            .collect()
    };
    let in_vars = function.vars.values().flat_map(move |v| in_type(&v.ty));
    let in_results = function.results.iter().flat_map(in_type);
    let in_ops = function
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter_map(|op| match op {
            autobatch_ir::Op::Prim {
                prim:
                    autobatch_ir::Prim::Fill(Dim::Symbolic(s))
                    | autobatch_ir::Prim::Slice(Dim::Symbolic(s))
                    | autobatch_ir::Prim::SymbolValue(s),
                ..
            } => Some(*s),
            _ => None,
        });
    in_vars.chain(in_results).chain(in_ops)
}

/// A value converted to tensors whose shapes may still miss the axes inside
/// an empty array, which only the other inputs can tell (`[]` for
/// `[[f64; D]; N]` says N = 0 but nothing about D).
enum Converted {
    Tensor {
        tensor: Tensor,
        ty: TensorType,
        known_axes: usize,
        description: String,
    },
    Tuple(Vec<Converted>),
}

impl Converted {
    /// The final value, with every axis length known (`lengths`: per symbol).
    fn finish(self, program: &Program, lengths: &[Option<u64>]) -> Result<Value, InputError> {
        match self {
            Converted::Tuple(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(item.finish(program, lengths)?);
                }
                Ok(Value::Tuple(out))
            }
            Converted::Tensor {
                mut tensor,
                ty,
                known_axes,
                description,
            } => {
                for axis in known_axes..ty.dims.len() {
                    tensor.shape[axis] = match ty.dims[axis] {
                        Dim::Fixed(n) => n as usize,
                        Dim::Symbolic(symbol) => match lengths.get(symbol.0 as usize).copied().flatten() {
                            Some(n) => n as usize,
                            None => {
                                return Err(InputError::new(
                                    InputErrorKind::UndeterminedDimension,
                                    format!(
                                        "symbolic dimension `{}` cannot be determined from the inputs: it only occurs inside empty arrays (as in {description})",
                                        program.symbol_name(symbol)
                                    ),
                                ))
                            }
                        },
                    };
                }
                Ok(Value::Tensor(tensor))
            }
        }
    }
}

fn convert(
    program: &Program,
    value: &InputValue,
    ty: &Type,
    place: &Place,
    dimensions: &mut DimensionBinder,
) -> Result<Converted, InputError> {
    match value {
        InputValue::Json(json) => convert_json(program, json, ty, place.root, place, dimensions),
        InputValue::Value(value) => {
            convert_structured(program, value, ty, place.root, place, dimensions)
        }
        InputValue::Array(array) => array::convert_array(program, array, ty, place, dimensions),
    }
}

/// Says what a JSON value is, briefly, for "found ..." in messages.
pub(crate) fn describe_json(json: &serde_json::Value) -> String {
    match json {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) if s.chars().count() > 40 => {
            let start: String = s.chars().take(40).collect();
            format!("the string {:?}...", start)
        }
        serde_json::Value::String(s) => format!("the string {s:?}"),
        serde_json::Value::Array(items) if items.len() == 1 => "a list of 1 value".into(),
        serde_json::Value::Array(items) => format!("a list of {} values", items.len()),
        serde_json::Value::Object(_) => "an object".into(),
    }
}

fn type_name(program: &Program, ty: &Type) -> String {
    match ty {
        Type::Tensor(t) => program.type_name(t),
        Type::Tuple(items) => {
            let names: Vec<String> = items.iter().map(|t| type_name(program, t)).collect();
            if names.len() == 1 {
                format!("({},)", names[0])
            } else {
                format!("({})", names.join(", "))
            }
        }
    }
}

fn convert_json(
    program: &Program,
    json: &serde_json::Value,
    ty: &Type,
    path: &str,
    place: &Place,
    dimensions: &mut DimensionBinder,
) -> Result<Converted, InputError> {
    match ty {
        Type::Tuple(items) if items.is_empty() => match json {
            serde_json::Value::Null => Ok(Converted::Tuple(Vec::new())),
            serde_json::Value::Array(values) if values.is_empty() => {
                Ok(Converted::Tuple(Vec::new()))
            }
            other => Err(place.error(
                path,
                format_args!(
                    "must be `()` (null or []), found {}",
                    place.found(other, path)
                ),
            )),
        },
        Type::Tuple(items) => match json {
            serde_json::Value::Array(values) if values.len() == items.len() => {
                let mut out = Vec::with_capacity(items.len());
                for (i, (value, item_ty)) in values.iter().zip(items).enumerate() {
                    out.push(convert_json(
                        program,
                        value,
                        item_ty,
                        &format!("{path}.{i}"),
                        place,
                        dimensions,
                    )?);
                }
                Ok(Converted::Tuple(out))
            }
            other => Err(place.error(
                path,
                format_args!(
                    "must be a tuple `{}`, written as a list of {} values, found {}",
                    type_name(program, ty),
                    items.len(),
                    place.found(other, path)
                ),
            )),
        },
        Type::Tensor(tensor_type) => {
            convert_json_tensor(program, json, tensor_type, path, place, dimensions)
        }
    }
}

/// The walk over a JSON value of an array type: checks its nesting and
/// lengths against the type and collects its scalars in row-major order.
struct Walk<'a> {
    program: &'a Program,
    ty: &'a TensorType,
    place: &'a Place<'a>,
    root: &'a str,
    /// The indices from the root to the list or element being visited;
    /// a path string is only made when something is wrong, so that a
    /// large array costs no allocation per element.
    indices: Vec<usize>,
    /// Per axis: the first list met on that axis.
    lengths: Vec<Option<AxisLength<'a>>>,
    data: Data,
}

impl Walk<'_> {
    fn path(&self) -> String {
        let mut path = self.root.to_owned();
        for i in &self.indices {
            path.push_str(&format!("[{i}]"));
        }
        path
    }

    fn sub_type_name(&self, axis: usize) -> String {
        let sub_type = TensorType {
            elem: self.ty.elem,
            dims: self.ty.dims[axis..].to_vec(),
        };
        self.program.type_name(&sub_type)
    }

    fn visit(&mut self, json: &serde_json::Value, axis: usize) -> Result<(), InputError> {
        if axis == self.ty.dims.len() {
            let found = || self.place.found(json, &self.path());
            let scalar = json_to_scalar(json, self.ty.elem, &found)
                .map_err(|problem| self.place.error(&self.path(), problem))?;
            self.data.push(scalar);
            return Ok(());
        }
        let serde_json::Value::Array(items) = json else {
            return Err(self.place.error(
                &self.path(),
                format_args!(
                    "must be an array `{}` (a list), found {}",
                    self.sub_type_name(axis),
                    self.place.found(json, &self.path())
                ),
            ));
        };
        if let Dim::Fixed(expected) = self.ty.dims[axis] {
            if items.len() as u64 != expected {
                return Err(self.place.error(
                    &self.path(),
                    format_args!(
                        "must have {expected} elements (type `{}`), found {}",
                        self.sub_type_name(axis),
                        items.len()
                    ),
                ));
            }
        }
        match &self.lengths[axis] {
            None => {
                // Depth first, the first list on an axis is the first
                // item of the first list on the axis above (if that one
                // is empty, so is every list there, and this is not reached).
                debug_assert!(self.indices.iter().all(|&i| i == 0));
                self.lengths[axis] = Some(AxisLength {
                    length: items.len(),
                    root: self.root,
                    axis,
                })
            }
            Some(first) if first.length != items.len() => {
                return Err(self.place.error(
                    &self.path(),
                    format_args!(
                        "has {} elements but `{}` has {}: arrays must be rectangular",
                        items.len(),
                        first.path(),
                        first.length
                    ),
                ))
            }
            Some(_) => {}
        }
        for (i, item) in items.iter().enumerate() {
            self.indices.push(i);
            self.visit(item, axis + 1)?;
            self.indices.pop();
        }
        Ok(())
    }
}

/// Converts the JSON value at `path` of a scalar or array type.
fn convert_json_tensor(
    program: &Program,
    json: &serde_json::Value,
    ty: &TensorType,
    path: &str,
    place: &Place,
    dimensions: &mut DimensionBinder,
) -> Result<Converted, InputError> {
    let mut walk = Walk {
        program,
        ty,
        place,
        root: path,
        indices: Vec::with_capacity(ty.dims.len()),
        lengths: vec![None; ty.dims.len()],
        data: Data::with_capacity(ty.elem, 0),
    };
    walk.visit(json, 0)?;
    let Walk { lengths, data, .. } = walk;
    finish_tensor(ty, lengths, data, place, dimensions)
}

/// The length of one axis of an input array, and where a list of that
/// length is, for messages: the first on its axis, `root[0]..[0]` (`axis`
/// times `[0]`), whose path is only written out for a message.
#[derive(Clone)]
struct AxisLength<'a> {
    length: usize,
    root: &'a str,
    axis: usize,
}

impl AxisLength<'_> {
    /// `x[0][0]`.
    fn path(&self) -> String {
        format!("{}{}", self.root, "[0]".repeat(self.axis))
    }
}

/// Binds the symbolic dimensions of one converted tensor and makes its
/// shape; `lengths` per axis, `None` for an axis only inside empty arrays.
fn finish_tensor(
    ty: &TensorType,
    lengths: Vec<Option<AxisLength>>,
    data: Data,
    place: &Place,
    dimensions: &mut DimensionBinder,
) -> Result<Converted, InputError> {
    let known_axes = lengths.iter().take_while(|l| l.is_some()).count();
    let mut shape = Vec::with_capacity(ty.dims.len());
    for (axis, length) in lengths.into_iter().enumerate() {
        match length {
            Some(length) => {
                if let Dim::Symbolic(symbol) = ty.dims[axis] {
                    dimensions.observe(symbol, length.length, || {
                        place.axis_description(&length.path())
                    })?;
                }
                shape.push(length.length);
            }
            // Filled in by `Converted::finish` once every input is seen.
            None => shape.push(0),
        }
    }
    // The description is only read for an axis left to finish.
    let description = if known_axes < ty.dims.len() {
        place.description()
    } else {
        String::new()
    };
    Ok(Converted::Tensor {
        tensor: Tensor { shape, data },
        ty: ty.clone(),
        known_axes,
        description,
    })
}

/// What is wrong with the JSON number `number`, which is neither an `i64`
/// nor a `u64` (a fraction, an exponent, or an integer beyond 64 bits), given
/// for the integer type `elem`: a whole number is out of range, or else must
/// be written as an integer. `written` quotes the number.
fn float_for_integer(number: &serde_json::Number, elem: ScalarType, written: &str) -> String {
    let Some(x) = number
        .as_f64()
        .filter(|x| x.is_finite() && x.fract() == 0.0)
    else {
        return format!("must be an integer ({elem}), found {written}");
    };
    // Exclusive upper and inclusive lower bounds, exact as f64.
    let (lo, hi) = match elem {
        ScalarType::I32 => (-2f64.powi(31), 2f64.powi(31)),
        ScalarType::I64 => (-2f64.powi(63), 2f64.powi(63)),
        _ => (0.0, 2f64.powi(64)),
    };
    if x < 0.0 && lo == 0.0 {
        format!("must be a non-negative integer ({elem}), found {written}")
    } else if x < lo || x >= hi {
        format!("must be an integer that fits {elem}, found {written}, which is out of range")
    } else {
        format!(
            "must be an integer ({elem}), found {written}; write it without a fraction or an exponent"
        )
    }
}

/// Converts one JSON scalar to `elem`, or says what is wrong with it;
/// `found` says what the value is, as the inputs write it.
fn json_to_scalar(
    json: &serde_json::Value,
    elem: ScalarType,
    found: &dyn Fn() -> String,
) -> Result<Scalar, String> {
    match elem {
        ScalarType::Bool => match json {
            serde_json::Value::Bool(b) => Ok(Scalar::Bool(*b)),
            _ => Err(format!(
                "must be `true` or `false` (bool), found {}",
                found()
            )),
        },
        ScalarType::I32 | ScalarType::I64 | ScalarType::Usize => {
            let serde_json::Value::Number(number) = json else {
                return Err(format!("must be an integer ({elem}), found {}", found()));
            };
            let out_of_range = || {
                format!(
                    "must be an integer that fits {elem}, found {}, which is out of range",
                    found()
                )
            };
            if let Some(i) = number.as_i64() {
                match elem {
                    ScalarType::I32 => i32::try_from(i)
                        .map(Scalar::I32)
                        .map_err(|_| out_of_range()),
                    ScalarType::I64 => Ok(Scalar::I64(i)),
                    _ => u64::try_from(i).map(Scalar::Usize).map_err(|_| {
                        format!("must be a non-negative integer (usize), found {}", found())
                    }),
                }
            } else if let Some(u) = number.as_u64() {
                match elem {
                    ScalarType::Usize => Ok(Scalar::Usize(u)),
                    _ => Err(out_of_range()),
                }
            } else {
                Err(float_for_integer(number, elem, &found()))
            }
        }
        ScalarType::F32 | ScalarType::F64 => {
            let x = match json {
                serde_json::Value::Number(number) => match number.as_f64() {
                    Some(x) => x,
                    None => return Err(format!("must be a number ({elem}), found {}", found())),
                },
                serde_json::Value::String(s) if s == "NaN" => f64::NAN,
                serde_json::Value::String(s) if s == "inf" => f64::INFINITY,
                serde_json::Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
                _ => {
                    return Err(format!(
                        "must be a number ({elem}) or one of the strings \"NaN\", \"inf\", \"-inf\", found {}",
                        found()
                    ))
                }
            };
            if elem == ScalarType::F64 {
                return Ok(Scalar::F64(x));
            }
            let narrowed = x as f32;
            if x.is_finite() && !narrowed.is_finite() {
                return Err(format!(
                    "must be a number that fits f32, found {}, which is out of range",
                    found()
                ));
            }
            Ok(Scalar::F32(narrowed))
        }
    }
}

fn describe_value(value: &Value) -> String {
    match value {
        Value::Tuple(items) => format!("a tuple of {} values", items.len()),
        Value::Tensor(t) if t.is_scalar() => format!("a scalar of type {}", t.elem_type()),
        Value::Tensor(t) => format!("an array of {} with shape {:?}", t.elem_type(), t.shape),
    }
}

fn convert_structured(
    program: &Program,
    value: &Value,
    ty: &Type,
    path: &str,
    place: &Place,
    dimensions: &mut DimensionBinder,
) -> Result<Converted, InputError> {
    match (ty, value) {
        (Type::Tuple(items), Value::Tuple(values)) if items.len() == values.len() => {
            let mut out = Vec::with_capacity(items.len());
            for (i, (item_ty, item)) in items.iter().zip(values).enumerate() {
                out.push(convert_structured(
                    program,
                    item,
                    item_ty,
                    &format!("{path}.{i}"),
                    place,
                    dimensions,
                )?);
            }
            Ok(Converted::Tuple(out))
        }
        (Type::Tensor(tensor_type), Value::Tensor(tensor)) => {
            let expected = program.type_name(tensor_type);
            if tensor.elem_type() != tensor_type.elem
                || tensor.shape.len() != tensor_type.dims.len()
            {
                return Err(place.error(
                    path,
                    format_args!("must be `{expected}`, found {}", describe_value(value)),
                ));
            }
            let elements: usize = tensor.shape.iter().product();
            if elements != tensor.data.len() {
                return Err(place.error(
                    path,
                    format_args!(
                        "is a malformed tensor: its shape {:?} needs {elements} elements but it has {}",
                        tensor.shape,
                        tensor.data.len()
                    ),
                ));
            }
            let mut lengths = Vec::with_capacity(tensor.shape.len());
            for (axis, (&length, dim)) in tensor.shape.iter().zip(&tensor_type.dims).enumerate() {
                let axis_length = AxisLength {
                    length,
                    root: path,
                    axis,
                };
                if let Dim::Fixed(expected_length) = dim {
                    if length as u64 != *expected_length {
                        return Err(place.error(
                            &axis_length.path(),
                            format_args!(
                                "must have {expected_length} elements (type `{}`), found {length}",
                                program.type_name(&TensorType {
                                    elem: tensor_type.elem,
                                    dims: tensor_type.dims[axis..].to_vec()
                                })
                            ),
                        ));
                    }
                }
                lengths.push(Some(axis_length));
            }
            finish_tensor(tensor_type, lengths, tensor.data.clone(), place, dimensions)
        }
        _ => Err(place.error(
            path,
            format_args!(
                "must be `{}`, found {}",
                type_name(program, ty),
                describe_value(value)
            ),
        )),
    }
}

mod array;
mod bound;
mod names;
#[cfg(test)]
mod tests;

pub use bound::BoundProgram;
