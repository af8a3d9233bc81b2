//! A program with its statics bound once ([`BoundProgram`]): the statics
//! are converted to tensors when bound, and every batch bound afterwards
//! shares them (the executors' `Env` holds them by `Arc`), so a batch costs
//! the conversion of its own arguments only.

use std::sync::{Arc, Mutex};

use autobatch_exec::{Batch, Env};
use autobatch_ir::{FuncId, Program};
use autobatch_types::{Data, Dim, Tensor, Type};

use super::{
    batch_size, check_hosts_registered, check_names, check_statics_given, check_symbols_fixed,
    convert, convert_params, BoundBatch, BoundDimension, Converted, Derived, DimensionBinder,
    InputError, InputErrorKind, Lengths, Place, Statics, Written,
};
use crate::compile::Compiled;
use crate::inputs::{InputValue, Inputs};
use crate::typed::Element;

/// A compiled program with its statics (and, optionally, shared arguments)
/// bound: converted once, kept, and shared by every batch bound to it.
///
/// ```
/// use autobatch::{compile, Inputs, RunConfig};
///
/// let source = "extern \"autobatch\" { static W: [f64; 3]; }
///               fn weigh(x: [f64; 3]) -> f64 { sum(W * x) }";
/// let program = compile(source, "weigh.ab").unwrap();
/// let mut bound = program.with_statics(&Inputs::new().shared("W", vec![1.0, 2.0, 3.0])).unwrap();
/// let batch = Inputs::new().batched("x", [vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 1.0]]);
/// let out = bound.bind("weigh", &batch).unwrap().run(&RunConfig::default()).unwrap();
/// assert_eq!(out.members[1], Ok(5.0_f64.into_value()));
///
/// // Statics can be read, replaced, or updated in place.
/// bound.static_values_mut::<f64>("W").unwrap()[0] = 10.0;
/// let out = bound.bind("weigh", &batch).unwrap().run(&RunConfig::default()).unwrap();
/// assert_eq!(out.members[0], Ok(10.0_f64.into_value()));
/// # use autobatch::typed::IntoValue;
/// ```
#[derive(Debug)]
pub struct BoundProgram {
    compiled: Compiled,
    /// One tensor per static, in the program's order.
    statics: Arc<Vec<Tensor>>,
    /// The statics whose shapes have axes only inside empty arrays: each
    /// batch finishes them from the lengths its arguments fix.
    open: Vec<OpenStatic>,
    /// Per symbol: the length the statics fix, and where it was first seen.
    dimensions: Vec<Option<BoundDimension>>,
    /// Shared arguments bound with the statics, added to every batch.
    shared: Vec<(String, InputValue)>,
    /// The programs derived for gradients with respect to statics, kept
    /// for the next batch that asks for the same.
    derived: Mutex<Vec<Derived>>,
}

/// A static with axes that only the arguments of a batch can tell (its
/// data is empty, since those axes are inside an empty array).
#[derive(Clone, Debug)]
struct OpenStatic {
    index: usize,
    known_axes: usize,
    description: String,
}

impl Clone for BoundProgram {
    fn clone(&self) -> Self {
        BoundProgram {
            compiled: self.compiled.clone(),
            statics: Arc::clone(&self.statics),
            open: self.open.clone(),
            dimensions: self.dimensions.clone(),
            shared: self.shared.clone(),
            derived: Mutex::new(Vec::new()),
        }
    }
}

impl Compiled {
    /// Binds the program's statics (every one, in `shared`) and any shared
    /// arguments in `inputs`, converted once: every batch bound to the
    /// result with [`BoundProgram::bind`] shares them. The shared arguments
    /// are checked against an entry when a batch is bound.
    pub fn with_statics(&self, inputs: &Inputs) -> Result<BoundProgram, InputError> {
        if let Some((name, _)) = inputs.batch.first() {
            return Err(InputError::new(
                InputErrorKind::BadLayout,
                format!(
                    "`{name}` is in `batch`, but binding statics takes only shared values; \
                     give batched arguments with each batch"
                ),
            ));
        }
        for (i, (name, _)) in inputs.shared.iter().enumerate() {
            if inputs.shared[..i].iter().any(|(n, _)| n == name) {
                return Err(InputError::new(
                    InputErrorKind::DuplicatedName,
                    format!("`{name}` is given twice in `shared`"),
                ));
            }
        }
        check_statics_given(self.program(), inputs)?;
        let mut bound = BoundProgram::convert(self.clone(), inputs)?;
        let program = self.program();
        bound.shared = inputs
            .shared
            .iter()
            .filter(|(name, _)| !program.statics.values().any(|s| s.name == *name))
            .cloned()
            .collect();
        Ok(bound)
    }
}

impl Compiled {
    /// [`Compiled::with_statics`], taking the inputs: an array given for a
    /// static with the static's element type becomes the static's tensor
    /// as it is, not copied (weights read from a `.npz` file, a numpy array
    /// of the declared dtype). The same statics, the same errors.
    pub fn with_statics_owned(&self, mut inputs: Inputs) -> Result<BoundProgram, InputError> {
        let taken = TakenArrays::take(self.program(), &mut inputs);
        let mut bound = self.with_statics(&inputs)?;
        taken.put_into(&mut bound.statics);
        Ok(bound)
    }

    /// [`Compiled::bind`], taking the inputs: the statics' arrays are
    /// bound without a copy, as [`Compiled::with_statics_owned`] binds
    /// them. The same batch, the same errors.
    pub fn bind_owned(&self, entry: &str, mut inputs: Inputs) -> Result<BoundBatch, InputError> {
        let taken = TakenArrays::take(self.program(), &mut inputs);
        let mut batch = self.bind(entry, &inputs)?;
        taken.put_into(&mut batch.env.statics);
        Ok(batch)
    }

    /// [`Compiled::bind_static_gradient`], taking the inputs: the statics'
    /// arrays are bound without a copy, as [`Compiled::bind_owned`] binds
    /// them.
    pub fn bind_static_gradient_owned(
        &self,
        entry: &str,
        statics: &[&str],
        mut inputs: Inputs,
    ) -> Result<BoundBatch, InputError> {
        let taken = TakenArrays::take(self.program(), &mut inputs);
        let mut batch = self.bind_static_gradient(entry, statics, &inputs)?;
        taken.put_into(&mut batch.env.statics);
        Ok(batch)
    }
}

/// The elements of the arrays given for statics of their element type,
/// taken out of the inputs before binding (an empty buffer of the same
/// type left in their place) and put into the bound statics after: binding
/// checks such an array's shape, which stays, and would copy its elements
/// unchanged. A static's index in the program's order, and its elements.
struct TakenArrays(Vec<(usize, Data)>);

impl TakenArrays {
    fn take(program: &Program, inputs: &mut Inputs) -> TakenArrays {
        let mut taken = Vec::new();
        for (index, (_, decl)) in program.statics.iter().enumerate() {
            // Binding refuses a name given twice: the first is the one taken.
            let value = inputs.shared.iter_mut().find(|(n, _)| *n == decl.name);
            let Some((_, InputValue::Array(array))) = value else {
                continue;
            };
            if array.tensor.data.ty() == decl.ty.elem {
                let empty = Data::with_capacity(decl.ty.elem, 0);
                taken.push((index, std::mem::replace(&mut array.tensor.data, empty)));
            }
        }
        TakenArrays(taken)
    }

    /// Puts the elements into the statics bound from the inputs they were
    /// taken from (each static's shape is its array's).
    fn put_into(self, statics: &mut Arc<Vec<Tensor>>) {
        if self.0.is_empty() {
            return;
        }
        // The statics were just bound, so nothing else holds them.
        let statics = Arc::make_mut(statics);
        for (index, data) in self.0 {
            debug_assert_eq!(statics[index].shape.iter().product::<usize>(), data.len());
            statics[index].data = data;
        }
    }
}

impl BoundProgram {
    /// Converts the statics `inputs` gives (each must be there).
    pub(super) fn convert(compiled: Compiled, inputs: &Inputs) -> Result<BoundProgram, InputError> {
        let program = compiled.program();
        let mut dimensions = DimensionBinder::new(program);
        let converted = super::convert_statics(program, inputs, &mut dimensions)?;
        let known = dimensions.known_lengths();
        let mut statics = Vec::with_capacity(converted.len());
        let mut open = Vec::new();
        for (index, converted) in converted.into_iter().enumerate() {
            let (tensor, pending) = finish_static(program, converted, &known)?;
            if let Some((known_axes, description)) = pending {
                open.push(OpenStatic {
                    index,
                    known_axes,
                    description,
                });
            }
            statics.push(tensor);
        }
        let dimensions = dimensions.bound;
        Ok(BoundProgram {
            compiled,
            statics: Arc::new(statics),
            open,
            dimensions,
            shared: Vec::new(),
            derived: Mutex::new(Vec::new()),
        })
    }

    /// The program.
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Binds `inputs` (the batched arguments, and shared ones not bound
    /// with the statics) to the entry function `entry`, as
    /// [`Compiled::bind`] does; the inputs may not name a static.
    pub fn bind(&self, entry: &str, inputs: &Inputs) -> Result<BoundBatch, InputError> {
        super::timed_bind(|| {
            let entry_id = self.compiled.entry_function(entry)?;
            self.bind_to(&self.compiled, entry_id, inputs)
        })
    }

    /// Binds `inputs` to run the gradient of the sum of the members'
    /// results of `entry` with respect to the `statics`, over the statics
    /// bound here, as [`Compiled::bind_static_gradient`] does. The
    /// derived program is kept for the next batch that asks for the same.
    pub fn bind_static_gradient(
        &self,
        entry: &str,
        statics: &[&str],
        inputs: &Inputs,
    ) -> Result<BoundBatch, InputError> {
        super::timed_bind(|| {
            let derived = self.derived(entry, statics)?;
            let mut bound = self.bind_to(&derived.program, derived.entry, inputs)?;
            bound.set_gradients(derived);
            Ok(bound)
        })
    }

    /// The program derived for the gradient of `entry` with respect to
    /// `statics`: kept from an earlier batch, or derived now.
    fn derived(&self, entry: &str, statics: &[&str]) -> Result<Derived, InputError> {
        let same = |d: &Derived| {
            d.entry_name == entry
                && d.statics
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .eq(statics.iter().copied())
        };
        let mut kept = self.derived.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(derived) = kept.iter().find(|d| same(d)) {
            return Ok(derived.clone());
        }
        let derived = self.compiled.derive_static_gradient(entry, statics)?;
        kept.push(derived.clone());
        Ok(derived)
    }

    /// Binds `inputs` and the shared arguments bound here to `entry_id` of
    /// `compiled` (this program, or one derived from it, which has the
    /// same statics).
    fn bind_to(
        &self,
        compiled: &Compiled,
        entry_id: FuncId,
        inputs: &Inputs,
    ) -> Result<BoundBatch, InputError> {
        let merged;
        let inputs = if self.shared.is_empty() {
            inputs
        } else {
            merged = inputs.clone().with_shared(self.shared.iter().cloned());
            &merged
        };
        let function = &compiled.program().functions[entry_id];
        check_names(compiled.program(), function, inputs, Statics::Bound)?;
        let batch_size = batch_size(inputs)?;
        self.bind_params(compiled, entry_id, inputs, batch_size)
    }

    /// Converts the arguments of a batch of `batch_size` members and makes
    /// the batch, with the statics bound here (`inputs`' names are checked).
    pub(super) fn bind_params(
        &self,
        compiled: &Compiled,
        entry_id: FuncId,
        inputs: &Inputs,
        batch_size: usize,
    ) -> Result<BoundBatch, InputError> {
        let program = compiled.program();
        let function = &program.functions[entry_id];
        // The statics fixed lengths for every member; the shared arguments
        // add theirs, and a member's batched arguments its own.
        let mut shared = DimensionBinder::new(program);
        shared.bound = self.dimensions.clone();
        let (converted_params, members) =
            convert_params(program, function, inputs, batch_size, &mut shared)?;
        let lengths = Lengths::new(program, &shared, &members)?;
        let statics = self.finish_open_statics(program, &lengths.batch)?;
        let mut args = Vec::with_capacity(function.params.len());
        for converted in converted_params {
            args.extend(converted.finish(program, &lengths)?);
        }
        check_symbols_fixed(program, entry_id, &lengths)?;
        check_hosts_registered(program, entry_id, compiled.hosts())?;
        let env = Env {
            statics,
            symbols: lengths.symbol_values(),
            ragged: lengths.ragged,
            hosts: compiled.hosts().clone(),
        };
        let batch = Batch {
            entry: entry_id,
            size: batch_size,
            args,
        };
        Ok(BoundBatch {
            program: compiled.shared_program(),
            entry: entry_id,
            env,
            batch,
            first_member: 0,
            gradients: Vec::new(),
            preparation: super::Preparation::default(),
            by_rows: Vec::new(),
            row_gradients: false,
        })
    }

    /// The statics of a batch whose symbolic dimensions are `lengths`: the
    /// ones bound here, with the axes of open statics filled in (a copy
    /// only when there are open statics).
    fn finish_open_statics(
        &self,
        program: &Program,
        lengths: &[Option<u64>],
    ) -> Result<Arc<Vec<Tensor>>, InputError> {
        if self.open.is_empty() {
            return Ok(Arc::clone(&self.statics));
        }
        let mut statics = (*self.statics).clone();
        for open in &self.open {
            let decl = program.statics.values().nth(open.index).expect("a static");
            let converted = Converted::Tensor {
                tensor: statics[open.index].clone(),
                ty: decl.ty.clone(),
                known_axes: open.known_axes,
                description: open.description.clone(),
            };
            statics[open.index] = match converted.finish(program, lengths)? {
                autobatch_types::Value::Tensor(t) => t,
                autobatch_types::Value::Tuple(_) => unreachable!("a static is a tensor"),
            };
        }
        Ok(Arc::new(statics))
    }

    /// The statics' values, in the program's order.
    pub fn statics(&self) -> &[Tensor] {
        &self.statics
    }

    /// The names of the statics, in the program's order.
    pub fn static_names(&self) -> impl Iterator<Item = &str> {
        self.compiled
            .program()
            .statics
            .values()
            .map(|s| s.name.as_str())
    }

    /// The value of the static `name`, as bound.
    pub fn static_value(&self, name: &str) -> Option<&Tensor> {
        let index = self.static_index(name).ok()?;
        Some(&self.statics[index])
    }

    /// The elements of the static `name` (of the element type `T`), in
    /// row-major order, to update in place: the next batch bound sees the
    /// new values. A batch bound before keeps the values it was bound with
    /// (the statics are then copied once, here).
    pub fn static_values_mut<T: Element>(&mut self, name: &str) -> Result<&mut [T], InputError> {
        let index = self.static_index(name)?;
        let program = self.compiled.program();
        let decl = program.statics.values().nth(index).expect("a static");
        if decl.ty.elem.name() != T::NAME {
            return Err(InputError::about_the_request(
                InputErrorKind::BadValue,
                format!(
                    "static `{name}` is of type {}, whose elements are not {}",
                    program.type_name(&decl.ty),
                    T::NAME
                ),
            ));
        }
        let statics = Arc::make_mut(&mut self.statics);
        Ok(T::data_mut(&mut statics[index].data).expect("the declared element type"))
    }

    /// Replaces the value of the static `name`, converted and checked as
    /// when bound (its symbolic dimensions must agree with the other
    /// statics'). The next batch bound sees the new value.
    pub fn set_static(
        &mut self,
        name: &str,
        value: impl Into<InputValue>,
    ) -> Result<(), InputError> {
        let index = self.static_index(name)?;
        let value = value.into();
        let program = self.compiled.program();
        let mut dimensions = DimensionBinder::new(program);
        for (k, decl) in program.statics.values().enumerate() {
            if k == index {
                continue;
            }
            let known = match self.open.iter().find(|o| o.index == k) {
                Some(open) => open.known_axes,
                None => decl.ty.dims.len(),
            };
            for (axis, dim) in decl.ty.dims.iter().enumerate().take(known) {
                if let Dim::Symbolic(symbol) = dim {
                    let length = self.statics[k].shape[axis];
                    dimensions.observe(*symbol, length, || format!("static `{}`", decl.name))?;
                }
            }
        }
        let decl = program.statics.values().nth(index).expect("a static");
        let empty = Inputs::new();
        let place = Place {
            what: "static",
            root: &decl.name,
            written: Written::shared(&empty),
        };
        let ty = Type::Tensor(decl.ty.clone());
        let converted = convert(program, &value, &ty, &place, &mut dimensions)?;
        let (tensor, pending) = finish_static(program, converted, &dimensions.known_lengths())?;
        self.open.retain(|o| o.index != index);
        if let Some((known_axes, description)) = pending {
            self.open.push(OpenStatic {
                index,
                known_axes,
                description,
            });
        }
        self.dimensions = dimensions.bound;
        Arc::make_mut(&mut self.statics)[index] = tensor;
        Ok(())
    }

    /// The index of the static `name`, or an error listing the statics.
    fn static_index(&self, name: &str) -> Result<usize, InputError> {
        let program = self.compiled.program();
        program
            .statics
            .values()
            .position(|s| s.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.static_names().collect();
                InputError::about_the_request(
                    InputErrorKind::UnknownName,
                    format!(
                        "no static named `{name}` in {} (statics: {})",
                        self.compiled.path(),
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                )
            })
    }
}

/// A converted static as a tensor, finished with the lengths the statics
/// fix; for one whose shape has axes no static fixes (inside an empty
/// array), also its known axes and description, to finish per batch.
#[allow(clippy::type_complexity)]
fn finish_static(
    program: &Program,
    converted: Converted,
    known: &[Option<u64>],
) -> Result<(Tensor, Option<(usize, String)>), InputError> {
    let Converted::Tensor {
        tensor,
        ty,
        known_axes,
        description,
    } = converted
    else {
        unreachable!("a static is a tensor")
    };
    let complete = ty.dims[known_axes..].iter().all(|d| match d {
        Dim::Fixed(_) => true,
        Dim::Symbolic(s) => known.get(s.0 as usize).copied().flatten().is_some(),
    });
    let pending = (!complete).then(|| (known_axes, description.clone()));
    if !complete {
        return Ok((tensor, pending));
    }
    let finished = Converted::Tensor {
        tensor,
        ty,
        known_axes,
        description,
    }
    .finish(program, known)?;
    match finished {
        autobatch_types::Value::Tensor(t) => Ok((t, None)),
        autobatch_types::Value::Tuple(_) => unreachable!("a static is a tensor"),
    }
}
