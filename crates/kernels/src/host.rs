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

/// The host functions of a run, by name.
#[derive(Clone, Default)]
pub struct Hosts {
    functions: Vec<(String, HostFn)>,
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
        match self.functions.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = function,
            None => self.functions.push((name.to_owned(), function)),
        }
    }

    /// Whether a function is registered as `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.functions.iter().any(|(n, _)| n == name)
    }

    /// One member's call of `host` on `args`: the value, checked against
    /// the declared result type (`symbols` give the symbolic lengths).
    pub fn call(
        &self,
        host: &HostPrim,
        args: &[&Tensor],
        symbols: &[u64],
    ) -> Result<Tensor, Fault> {
        let fault = |message: String| Fault::new(ErrorKind::HostError, message);
        let Some((_, function)) = self.functions.iter().find(|(n, _)| *n == host.name) else {
            return Err(fault(format!(
                "host primitive `{}` has no host function registered",
                host.name
            )));
        };
        let value = function(args).map_err(|message| {
            fault(format!("host primitive `{}` failed: {message}", host.name))
        })?;
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
