//! Host functions: Rust code a program calls through a host primitive (a
//! bodiless `fn` of an `extern "autobatch"` block), registered by name for
//! a run. A call is one member's: it gets the member's operands and gives
//! a value of the declared type and shape, or a message that becomes the
//! member's `host_error`. Nothing a host function does (a failure, a value
//! of the wrong shape) harms another member.

use std::fmt;
use std::sync::Arc;

use autobatch_ir::HostPrim;
use autobatch_types::{ErrorKind, Tensor, TensorType};

use crate::{dim_length, Fault};

/// A host function: the operands of one member's call, in order; its
/// value, or why it failed.
pub type HostFn = Arc<dyn Fn(&[&Tensor]) -> Result<Tensor, String> + Send + Sync>;

/// A batched host function: the calls of several members at once (`calls[m]`
/// holds member `m`'s operands, in order); one outcome per call, in order,
/// each depending on its own call alone.
pub type BatchHostFn = Arc<dyn Fn(&[Vec<&Tensor>]) -> Vec<Result<Tensor, String>> + Send + Sync>;

/// How a host function takes its calls.
#[derive(Clone)]
enum Function {
    /// One member's call at a time.
    Member(HostFn),
    /// The calls of the members that reach it together, at once.
    Batch(BatchHostFn),
}

/// The host functions of a run, by name.
#[derive(Clone, Default)]
pub struct Hosts {
    functions: Vec<(String, Function)>,
}

impl fmt::Debug for Hosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.functions.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Hosts {
    /// No host functions.
    pub const fn new() -> Hosts {
        Hosts {
            functions: Vec::new(),
        }
    }

    /// Registers `function` as `name`, in place of any earlier one.
    pub fn insert(&mut self, name: &str, function: HostFn) {
        self.put(name, Function::Member(function));
    }

    /// Registers the batched `function` as `name`, in place of any earlier one.
    pub fn insert_batched(&mut self, name: &str, function: BatchHostFn) {
        self.put(name, Function::Batch(function));
    }

    fn put(&mut self, name: &str, function: Function) {
        match self.functions.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = function,
            None => self.functions.push((name.to_owned(), function)),
        }
    }

    fn get(&self, name: &str) -> Option<&Function> {
        self.functions
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| f)
    }

    /// Whether `name`'s function takes many members' calls at once.
    pub fn is_batched(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Function::Batch(_)))
    }

    /// Whether a function is registered as `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// One member's call of `host` on `args`: the value, checked against
    /// the declared result type (`symbols` give the symbolic lengths).
    pub fn call(
        &self,
        host: &HostPrim,
        args: &[&Tensor],
        symbols: &[u64],
    ) -> Result<Tensor, Fault> {
        let outcome = match self.get(&host.name) {
            None => Err("no host function is registered for it".to_owned()),
            Some(Function::Member(function)) => function(args),
            Some(Function::Batch(function)) => {
                let mut outcomes = function(&[args.to_vec()]);
                match outcomes.len() {
                    1 => outcomes.remove(0),
                    n => Err(format!("it gave {n} outcomes for 1 call")),
                }
            }
        };
        checked(host, outcome, symbols)
    }

    /// The calls of several members at once (`calls[m]`: member `m`'s
    /// operands): one outcome each, in order. A function that is not
    /// batched is called once per member.
    pub fn call_batch(
        &self,
        host: &HostPrim,
        calls: &[Vec<&Tensor>],
        symbols: &[u64],
    ) -> Vec<Result<Tensor, Fault>> {
        let Some(Function::Batch(function)) = self.get(&host.name) else {
            return calls
                .iter()
                .map(|args| self.call(host, args, symbols))
                .collect();
        };
        let outcomes = function(calls);
        if outcomes.len() != calls.len() {
            let message = format!(
                "it gave {} outcomes for {} calls",
                outcomes.len(),
                calls.len()
            );
            return calls
                .iter()
                .map(|_| checked(host, Err(message.clone()), symbols))
                .collect();
        }
        outcomes
            .into_iter()
            .map(|outcome| checked(host, outcome, symbols))
            .collect()
    }
}

/// One call's outcome as a value of the declared type and shape, or the
/// member's `host_error`.
fn checked(
    host: &HostPrim,
    outcome: Result<Tensor, String>,
    symbols: &[u64],
) -> Result<Tensor, Fault> {
    let fault = |message: String| Fault::new(ErrorKind::HostError, message);
    let value = outcome
        .map_err(|message| fault(format!("host primitive `{}` failed: {message}", host.name)))?;
    let expected = concrete(&host.result, symbols);
    if value.data.ty() != host.result.elem || value.shape != expected {
        return Err(fault(format!(
            "host primitive `{}` returned {}, but is declared to return {}",
            host.name,
            describe(value.data.ty().name(), &value.shape),
            describe(host.result.elem.name(), &expected)
        )));
    }
    Ok(value)
}

fn concrete(ty: &TensorType, symbols: &[u64]) -> Vec<usize> {
    ty.dims.iter().map(|d| dim_length(symbols, *d)).collect()
}

/// `f64`, `[f64; 3]`, `[[i64; 2]; 4]`.
fn describe(elem: &str, shape: &[usize]) -> String {
    shape
        .iter()
        .rev()
        .fold(elem.to_owned(), |inner, n| format!("[{inner}; {n}]"))
}
