//! The explicit-stack form a program-counter run steps through, kept for
//! the next run of the same program.
//!
//! Finding which variables are invariant, lowering the program to the
//! explicit stack and verifying the result take longer than running a
//! small batch; a host that runs one program many times (a Python loop
//! calling `BoundProgram.run`, a sampler) would pay that on every call.
//! [`lowered`] therefore keeps the last [`CAPACITY`] lowered programs of
//! the process (the oldest goes first) and gives a run the one it already
//! has.
//!
//! What identifies a lowered program: the program (found as the native
//! code cache finds it: a shared program by its address, any other by a
//! fingerprint of its shape, then compared whole), the entry, which of the
//! entry's arguments are shared and which symbolic dimensions are ragged ([`InvarianceInputs`]). The statics, the
//! members' inputs and the options are read at run time, so they are not
//! part of the key.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use autobatch_ir::Program;
use autobatch_passes::stack::{lower_to_stack, verify_lowered, LoweredProgram};

use crate::batched::skeleton::InvarianceInputs;
use crate::native_cache::ProgramKey;
use crate::{Batch, Env, ExecError};

/// The most lowered programs kept.
pub const CAPACITY: usize = 32;

/// One lowered program and what it was lowered from.
struct Entry {
    /// The program ([`ProgramKey::to_kept`]).
    program: Arc<Program>,
    fingerprint: u64,
    inputs: InvarianceInputs,
    lowered: Arc<LoweredProgram>,
}

static CACHE: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());

fn lock() -> std::sync::MutexGuard<'static, VecDeque<Entry>> {
    // Every change is one push or one removal: a panic elsewhere while
    // holding the lock leaves the cache whole.
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The explicit-stack form of `program` for `batch` and `env`: the kept
/// one if there is one, else lowered and verified now, and kept.
pub(crate) fn lowered(
    program: &Program,
    batch: &Batch,
    env: &Env,
) -> Result<Arc<LoweredProgram>, ExecError> {
    let key = ProgramKey::of(program);
    let inputs = InvarianceInputs::of(batch, env);
    let found = lock()
        .iter()
        .find(|e| e.inputs == inputs && key.is(&e.program, e.fingerprint))
        .map(|e| Arc::clone(&e.lowered));
    if let Some(lowered) = found {
        return Ok(lowered);
    }
    // Lowered outside the lock: other runs go on meanwhile.
    let invariance = inputs.invariance(program);
    let lowered = lower_to_stack(program, &invariance);
    verify_lowered(&lowered).map_err(|errors| {
        let listed: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        ExecError::Internal(format!(
            "the explicit-stack form is invalid: {}",
            listed.join("; ")
        ))
    })?;
    let lowered = Arc::new(lowered);
    let mut cache = lock();
    if cache.len() >= CAPACITY {
        cache.pop_front();
    }
    cache.push_back(Entry {
        program: key.to_kept(),
        fingerprint: key.fingerprint(),
        inputs,
        lowered: Arc::clone(&lowered),
    });
    Ok(lowered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Arg;
    use autobatch_types::{Scalar, Tensor};

    #[test]
    fn a_program_is_lowered_once_per_shape_of_its_batch() {
        let source = "\
fn f0 f(v0 x: f64) -> (f64)  @1:1
  vars: v0 x: f64, v1: f64, v2: f64
b0:  @1:1
  v1 = const 0.5_f64  @1:27
  v2 = mul v0, v1  @1:23
  return v2
";
        let program = autobatch_ir::parse::parse_program(source).expect("a program");
        let entry = program.function_by_name("f").expect("f");
        let x = Tensor::scalar(Scalar::F64(2.0));
        let batch = |arg: Arg| Batch {
            entry,
            size: 1,
            args: vec![arg],
        };
        let env = Env {
            statics: Arc::new(Vec::new()),
            symbols: Vec::new(),
            hosts: Default::default(),
            ragged: Vec::new(),
        };
        let batched = batch(Arg::Batched(vec![x.clone()]));
        let first = lowered(&program, &batched, &env).unwrap();
        let again = lowered(&program.clone(), &batched, &env).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the same program is kept");
        let shared = lowered(&program, &batch(Arg::Shared(x)), &env).unwrap();
        assert!(
            !Arc::ptr_eq(&first, &shared),
            "a shared argument changes what is invariant"
        );
    }
}
