//! The typed API: inputs from Rust values by argument name, results as Rust
//! values, no JSON on the way.
//!
//! ```
//! use autobatch::{compile, MemberError, RunConfig};
//!
//! let fib = compile(
//!     "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }",
//!     "fib.ab",
//! )
//! .unwrap();
//! let out = fib.call("fib").batched("n", [3_i64, 7, 4, 5]).run::<i64>(&RunConfig::default()).unwrap();
//! let values: Vec<i64> = out.members.into_iter().map(Result::unwrap).collect();
//! assert_eq!(values, [3, 21, 5, 8]);
//! ```
//!
//! Rust types and the language's types ([`IntoValue`], [`FromValue`]):
//! `bool`, `i32`, `i64`, `u64` (the language's `usize`), `f32`, `f64` are
//! scalars; `Vec<T>`, `&[T]` and `[T; N]` of them are one-dimensional
//! arrays; [`Array`] (and, with the `ndarray` feature, `ndarray::ArrayD`)
//! is an array of any rank; tuples of up to four values are tuples, `()`
//! is the unit type. Inputs are bound as they are: a value must have
//! exactly the declared element type and lengths (an `i64` is not taken for
//! an `f64`), else [`Call::run`] returns the binder's [`InputError`], which
//! names the argument, the member and the place.

use std::fmt;

use autobatch_exec::Stats;
use autobatch_types::{Data, MemberError, Scalar, Tensor, Value};

use crate::bind::InputError;
use crate::compile::Compiled;
use crate::inputs::Inputs;
use crate::run::{RunConfig, RunError};

/// A scalar type of the language as a Rust type: `bool`, `i32`, `i64`,
/// `u64` (the language's `usize`), `f32`, `f64`.
///
/// ```
/// use autobatch::typed::Element;
/// use autobatch::Scalar;
/// assert_eq!(2.5_f64.to_scalar(), Scalar::F64(2.5));
/// assert_eq!(i64::from_scalar(Scalar::I64(7)), Some(7));
/// assert_eq!(i64::from_scalar(Scalar::F64(7.0)), None);
/// ```
pub trait Element: Copy + Sized {
    /// The language's name of the type (`f64`, `usize`, ...).
    const NAME: &'static str;
    /// The value as a scalar of the language.
    fn to_scalar(self) -> Scalar;
    /// The value of a scalar of exactly this type.
    fn from_scalar(scalar: Scalar) -> Option<Self>;
    /// Values as a tensor's data.
    fn to_data(values: Vec<Self>) -> Data;
    /// A tensor's data of exactly this type.
    fn from_data(data: Data) -> Option<Vec<Self>>;
    /// A tensor's elements of exactly this type, to change in place.
    fn data_mut(data: &mut Data) -> Option<&mut [Self]>;
}

macro_rules! element {
    ($($rust:ty => $variant:ident, $name:literal;)*) => {$(
        impl Element for $rust {
            const NAME: &'static str = $name;
            fn to_scalar(self) -> Scalar {
                Scalar::$variant(self)
            }
            fn from_scalar(scalar: Scalar) -> Option<Self> {
                match scalar {
                    Scalar::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn to_data(values: Vec<Self>) -> Data {
                Data::$variant(values)
            }
            fn from_data(data: Data) -> Option<Vec<Self>> {
                match data {
                    Data::$variant(values) => Some(values),
                    _ => None,
                }
            }
            fn data_mut(data: &mut Data) -> Option<&mut [Self]> {
                match data {
                    Data::$variant(values) => Some(values),
                    _ => None,
                }
            }
        }
    )*};
}

element! {
    bool => Bool, "bool";
    i32 => I32, "i32";
    i64 => I64, "i64";
    u64 => Usize, "usize";
    f32 => F32, "f32";
    f64 => F64, "f64";
}

/// A Rust value that is an input of the language's type.
///
/// ```
/// use autobatch::typed::IntoValue;
/// use autobatch::{Scalar, Tensor, Value};
/// assert_eq!(3_i64.into_value(), Value::Tensor(Tensor::scalar(Scalar::I64(3))));
/// assert_eq!((1.0_f64, true).into_value(), Value::Tuple(vec![1.0_f64.into_value(), true.into_value()]));
/// ```
pub trait IntoValue {
    /// The value of the language.
    fn into_value(self) -> Value;
}

/// A Rust type that a result of the language's type converts to.
///
/// ```
/// use autobatch::typed::{FromValue, IntoValue};
/// assert_eq!(i64::from_value(5_i64.into_value()), Some(5));
/// assert_eq!(f64::from_value(5_i64.into_value()), None);
/// assert_eq!(<Vec<f32>>::from_value(vec![1.0_f32, 2.0].into_value()), Some(vec![1.0, 2.0]));
/// ```
pub trait FromValue: Sized {
    /// The Rust value, or `None` if `value` is not of this type.
    fn from_value(value: Value) -> Option<Self>;
}

impl<T: Element> IntoValue for T {
    fn into_value(self) -> Value {
        Value::Tensor(Tensor::scalar(self.to_scalar()))
    }
}

impl<T: Element> FromValue for T {
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Tensor(tensor) if tensor.shape.is_empty() && tensor.data.len() == 1 => {
                T::from_scalar(tensor.data.get(0))
            }
            _ => None,
        }
    }
}

impl<T: Element> IntoValue for Vec<T> {
    fn into_value(self) -> Value {
        Value::Tensor(Tensor::new(vec![self.len()], T::to_data(self)))
    }
}

impl<T: Element> IntoValue for &[T] {
    fn into_value(self) -> Value {
        self.to_vec().into_value()
    }
}

impl<T: Element, const N: usize> IntoValue for [T; N] {
    fn into_value(self) -> Value {
        self.to_vec().into_value()
    }
}

impl<T: Element> FromValue for Vec<T> {
    /// A one-dimensional array.
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Tensor(tensor) if tensor.shape.len() == 1 => T::from_data(tensor.data),
            _ => None,
        }
    }
}

impl<T: Element, const N: usize> FromValue for [T; N] {
    /// A one-dimensional array of length `N`.
    fn from_value(value: Value) -> Option<Self> {
        <Vec<T>>::from_value(value)?.try_into().ok()
    }
}

/// An array of any rank: its shape and its elements in row-major order
/// (the last axis varies fastest).
///
/// ```
/// use autobatch::typed::Array;
/// let matrix = Array::new(vec![2, 3], vec![1.0_f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// assert_eq!(matrix.get(&[1, 0]), Some(4.0));
/// assert!(Array::new(vec![2, 2], vec![1_i64, 2, 3]).is_none());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Array<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

impl<T: Element> Array<T> {
    /// The array of `shape` holding `data`, or `None` if the lengths disagree.
    pub fn new(shape: Vec<usize>, data: Vec<T>) -> Option<Array<T>> {
        (shape.iter().product::<usize>() == data.len()).then_some(Array { shape, data })
    }

    /// The element at `index` (one index per axis), if inside the array.
    pub fn get(&self, index: &[usize]) -> Option<T> {
        if index.len() != self.shape.len() || index.iter().zip(&self.shape).any(|(i, n)| i >= n) {
            return None;
        }
        let offset = index
            .iter()
            .zip(&self.shape)
            .fold(0, |offset, (i, n)| offset * n + i);
        self.data.get(offset).copied()
    }
}

impl<T: Element> IntoValue for Array<T> {
    fn into_value(self) -> Value {
        Value::Tensor(Tensor::new(self.shape, T::to_data(self.data)))
    }
}

impl<T: Element> FromValue for Array<T> {
    /// An array of any rank (a scalar is an array of rank 0).
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Tensor(Tensor { shape, data }) => Array::new(shape, T::from_data(data)?),
            Value::Tuple(_) => None,
        }
    }
}

impl IntoValue for () {
    fn into_value(self) -> Value {
        Value::Tuple(Vec::new())
    }
}

impl FromValue for () {
    fn from_value(value: Value) -> Option<Self> {
        matches!(value, Value::Tuple(items) if items.is_empty()).then_some(())
    }
}

macro_rules! tuple {
    ($($name:ident),+) => {
        impl<$($name: IntoValue),+> IntoValue for ($($name,)+) {
            #[allow(non_snake_case)]
            fn into_value(self) -> Value {
                let ($($name,)+) = self;
                Value::Tuple(vec![$($name.into_value()),+])
            }
        }

        impl<$($name: FromValue),+> FromValue for ($($name,)+) {
            #[allow(non_snake_case)]
            fn from_value(value: Value) -> Option<Self> {
                let Value::Tuple(items) = value else { return None };
                let mut items = items.into_iter();
                $(let $name = $name::from_value(items.next()?)?;)+
                items.next().is_none().then_some(($($name,)+))
            }
        }
    };
}

tuple!(A);
tuple!(A, B);
tuple!(A, B, C);
tuple!(A, B, C, D);

/// The inputs of one call of an entry function, by argument name; made by
/// [`Compiled::call`].
///
/// ```
/// use autobatch::{compile, RunConfig};
/// let program = compile("fn scale(x: [f64; 2], k: f64) -> [f64; 2] { x * k }", "s.ab").unwrap();
/// let out = program
///     .call("scale")
///     .batched("x", [[1.0, 2.0], [3.0, 4.0]])
///     .shared("k", 10.0)
///     .run::<[f64; 2]>(&RunConfig::default())
///     .unwrap();
/// assert_eq!(out.members[1], Ok([30.0, 40.0]));
/// ```
#[derive(Clone, Debug)]
pub struct Call<'c> {
    compiled: &'c Compiled,
    entry: String,
    inputs: Inputs,
}

impl Compiled {
    /// Starts a call of the entry function `entry`; give its arguments (and
    /// the statics) with [`Call::batched`] and [`Call::shared`], then [`Call::run`].
    ///
    /// ```
    /// use autobatch::{compile, RunConfig};
    /// let program = compile("fn one() -> i32 { 1 }", "one.ab").unwrap();
    /// let out = program.call("one").run::<i32>(&RunConfig::default()).unwrap();
    /// assert_eq!(out.members, [Ok(1)]);
    /// ```
    pub fn call(&self, entry: &str) -> Call<'_> {
        Call {
            compiled: self,
            entry: entry.to_owned(),
            inputs: Inputs::new(),
        }
    }
}

impl Call<'_> {
    /// Gives the argument `name` one value per member (all of them give
    /// the batch size).
    ///
    /// ```
    /// use autobatch::{compile, RunConfig};
    /// let program = compile("fn neg(b: bool) -> bool { !b }", "n.ab").unwrap();
    /// let out = program.call("neg").batched("b", vec![true, false]).run::<bool>(&RunConfig::default()).unwrap();
    /// assert_eq!(out.members, [Ok(false), Ok(true)]);
    /// ```
    pub fn batched<V: IntoValue>(
        mut self,
        name: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        let values: Vec<Value> = values.into_iter().map(IntoValue::into_value).collect();
        self.inputs = self.inputs.batched(name, values);
        self
    }

    /// Gives the argument or static `name` one value for every member.
    ///
    /// ```
    /// use autobatch::{compile, RunConfig};
    /// let source = "extern \"autobatch\" { static W: [f32; 2]; }\nfn dot2(x: [f32; 2]) -> f32 { dot(x, W) }";
    /// let program = compile(source, "d.ab").unwrap();
    /// let out = program
    ///     .call("dot2")
    ///     .batched("x", [[1.0_f32, 0.0], [0.0, 1.0]])
    ///     .shared("W", [2.0_f32, 3.0])
    ///     .run::<f32>(&RunConfig::default())
    ///     .unwrap();
    /// assert_eq!(out.members, [Ok(2.0), Ok(3.0)]);
    /// ```
    pub fn shared(mut self, name: &str, value: impl IntoValue) -> Self {
        self.inputs = self.inputs.shared(name, value.into_value());
        self
    }

    /// Binds the inputs and runs the batch; each member's result converted
    /// to `R`, which must be the entry's result type.
    ///
    /// ```
    /// use autobatch::typed::CallError;
    /// use autobatch::{compile, ErrorKind, RunConfig};
    /// let program = compile("fn at(xs: [i64; 3], i: usize) -> i64 { xs[i] }", "at.ab").unwrap();
    /// let call = program.call("at").shared("xs", [10_i64, 20, 30]);
    /// let out = call.clone().batched("i", [2_u64, 5]).run::<i64>(&RunConfig::default()).unwrap();
    /// assert_eq!(out.members[0], Ok(30));
    /// assert_eq!(out.members[1].as_ref().unwrap_err().kind, ErrorKind::IndexOutOfBounds);
    ///
    /// // An i64 where the program declares usize: the binder's message.
    /// let wrong = call.clone().batched("i", [2_i64]).run::<i64>(&RunConfig::default());
    /// assert!(matches!(wrong, Err(CallError::Input(_))));
    /// // A result type other than the entry's.
    /// let wrong = call.batched("i", [2_u64]).run::<f64>(&RunConfig::default());
    /// assert!(matches!(wrong, Err(CallError::ResultType { .. })));
    /// ```
    pub fn run<R: FromValue>(&self, config: &RunConfig) -> Result<CallResult<R>, CallError> {
        let batch = self
            .compiled
            .bind(&self.entry, &self.inputs)
            .map_err(CallError::Input)?;
        let result = batch.run(config).map_err(CallError::Run)?;
        let mut members = Vec::with_capacity(result.members.len());
        for (member, outcome) in result.members.into_iter().enumerate() {
            members.push(match outcome {
                Ok(value) => Ok(R::from_value(value).ok_or_else(|| CallError::ResultType {
                    entry: self.entry.clone(),
                    member,
                    expected: std::any::type_name::<R>(),
                })?),
                Err(error) => Err(error),
            });
        }
        Ok(CallResult {
            members,
            stats: result.stats,
        })
    }
}

/// The typed outcome of [`Call::run`]: per member its value or its error,
/// in member order, and the run's figures.
///
/// ```
/// use autobatch::{compile, RunConfig};
/// let program = compile("fn sq(x: f64) -> f64 { x * x }", "sq.ab").unwrap();
/// let out = program.call("sq").batched("x", [1.5, -2.0]).run::<f64>(&RunConfig::default()).unwrap();
/// assert_eq!(out.members, [Ok(2.25), Ok(4.0)]);
/// assert!(out.stats.steps > 0);
/// ```
#[derive(Clone, Debug)]
pub struct CallResult<R> {
    pub members: Vec<Result<R, MemberError>>,
    pub stats: Stats,
}

/// Why [`Call::run`] gave no results.
///
/// ```
/// use autobatch::{compile, RunConfig};
/// let program = compile("fn id(x: f64) -> f64 { x }", "id.ab").unwrap();
/// let error = program.call("id").batched("y", [1.0]).run::<f64>(&RunConfig::default()).unwrap_err();
/// assert_eq!(error.to_string(), "`y` in `batch` is not a parameter of `id` (the parameters of `id` are: x)");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// The inputs do not fit the entry (the message names what and where).
    Input(InputError),
    /// The batch could not run at all.
    Run(RunError),
    /// A member's result is not of the Rust type asked for.
    ResultType {
        entry: String,
        member: usize,
        expected: &'static str,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Input(error) => write!(f, "{error}"),
            CallError::Run(error) => write!(f, "{error}"),
            CallError::ResultType {
                entry,
                member,
                expected,
            } => write!(
                f,
                "the result of `{entry}` for member {member} is not a `{expected}`: ask for the entry's result type"
            ),
        }
    }
}

impl std::error::Error for CallError {}

#[cfg(feature = "ndarray")]
mod ndarray_values {
    //! `ndarray` arrays as inputs and results.
    use super::{Array, Element, FromValue, IntoValue};
    use autobatch_types::Value;
    use ndarray::{ArrayBase, ArrayD, Data as Storage, Dimension, IxDyn};

    impl<T: Element, S: Storage<Elem = T>, D: Dimension> IntoValue for ArrayBase<S, D> {
        fn into_value(self) -> Value {
            let shape = self.shape().to_vec();
            let data: Vec<T> = self.iter().copied().collect();
            Array { shape, data }.into_value()
        }
    }

    impl<T: Element> FromValue for ArrayD<T> {
        fn from_value(value: Value) -> Option<Self> {
            let Array { shape, data } = Array::<T>::from_value(value)?;
            ArrayD::from_shape_vec(IxDyn(&shape), data).ok()
        }
    }
}

/// One value for every member of a call made by [`program!`](crate::program):
/// `prog.scale(xs, Shared(2.0))` gives every member `k = 2.0`, where an
/// iterator of values (`vec![1.0, 2.0]`) gives each member its own.
///
/// ```
/// use autobatch::{RunConfig, Shared};
/// let prog = autobatch::program! { fn scale(x: f64, k: f64) -> f64 { x * k } };
/// let out = prog.scale(vec![1.0, 2.0], Shared(3.0)).run(&RunConfig::default()).unwrap();
/// assert_eq!(out.members, [Ok(3.0), Ok(6.0)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shared<T>(pub T);

/// An argument of a function of a [`program!`](crate::program) whose
/// parameter is of the Rust type `R`: one value per member (anything that
/// iterates over `R`s) or one for all ([`Shared`]).
pub trait Arg<R> {
    /// `call` with this argument given as `name`.
    fn give<'c>(self, call: Call<'c>, name: &str) -> Call<'c>;
}

impl<R: IntoValue, I: IntoIterator<Item = R>> Arg<R> for I {
    fn give<'c>(self, call: Call<'c>, name: &str) -> Call<'c> {
        call.batched(name, self)
    }
}

impl<R: IntoValue> Arg<R> for Shared<R> {
    fn give<'c>(self, call: Call<'c>, name: &str) -> Call<'c> {
        call.shared(name, self.0)
    }
}

/// A call of a function of a [`program!`](crate::program), its result of
/// the Rust type `R`: give the statics with [`Typed::shared`], then
/// [`Typed::run`].
///
/// ```
/// use autobatch::RunConfig;
/// let prog = autobatch::program! {
///     extern "autobatch" { static W: [f64; 3]; }
///     fn score(x: [f64; 3]) -> f64 { dot(W, x) }
/// };
/// let call = prog.score(vec![vec![1.0, 0.0, 0.0], vec![1.0, 1.0, 1.0]]).shared("W", vec![0.5, 1.0, 2.0]);
/// assert_eq!(call.run(&RunConfig::default()).unwrap().members, [Ok(0.5), Ok(3.5)]);
/// ```
#[derive(Clone, Debug)]
pub struct Typed<'c, R> {
    call: Call<'c>,
    result: std::marker::PhantomData<fn() -> R>,
}

impl<'c, R: FromValue> Typed<'c, R> {
    /// Wraps a call whose entry returns `R` (the macro's expansion makes it).
    #[doc(hidden)]
    pub fn new(call: Call<'c>) -> Self {
        Typed {
            call,
            result: std::marker::PhantomData,
        }
    }

    /// Gives the static `name` (or any argument) one value for every member.
    pub fn shared(self, name: &str, value: impl IntoValue) -> Self {
        Typed::new(self.call.shared(name, value))
    }

    /// Binds the inputs and runs the batch ([`Call::run`]).
    pub fn run(&self, config: &RunConfig) -> Result<CallResult<R>, CallError> {
        self.call.run::<R>(config)
    }
}

/// Any value of the language, as it is (for types the Rust types above do
/// not cover, such as tuples of more than four values).
impl IntoValue for Value {
    fn into_value(self) -> Value {
        self
    }
}

impl FromValue for Value {
    fn from_value(value: Value) -> Option<Self> {
        Some(value)
    }
}
