//! Runs one primitive for a set of active rows: the shared core of the
//! batching strategies.
//!
//! Every value computed here is computed by the `kernels` crate, the same
//! functions the reference executor calls, so a member gets bit-identical
//! results whatever strategy runs it. This module only decides *which rows*
//! are computed and *how they are laid out*:
//!
//! - an operation whose operands are all invariant (and that draws no random
//!   number) is computed once; its result goes to an invariant slot, or is
//!   broadcast to the active rows;
//! - an elementwise operation (unary, binary, comparison, cast, select) over
//!   per-member operands of one row shape runs as ONE kernel call over a flat
//!   buffer of rows: all rows of the columns under [`LaneMode::Mask`] (then
//!   only the active rows are kept), or the active rows gathered into a dense
//!   buffer and scattered back under [`LaneMode::Compact`];
//! - everything else (array builtins, indexing, random draws, asserts) runs
//!   row by row on the active rows only.
//!
//! An inactive row never raises a fault, never draws a random number and
//! is never written.

use autobatch_ir::Prim;
use autobatch_kernels::{self as kernels, Fault, MemberRng, PrimContext};
use autobatch_types::{Data, Tensor};

use super::storage::{self, copy_into, Slot};

/// How an elementwise operation treats inactive rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LaneMode {
    /// Compute every row of the columns, keep the active ones.
    Mask,
    /// Gather the active rows, compute only those, scatter back.
    Compact,
    /// Mask when at least half of the rows are active, else compact.
    #[default]
    Auto,
}

impl LaneMode {
    pub const ALL: [LaneMode; 3] = [LaneMode::Mask, LaneMode::Compact, LaneMode::Auto];

    pub fn name(self) -> &'static str {
        match self {
            LaneMode::Mask => "mask",
            LaneMode::Compact => "compact",
            LaneMode::Auto => "auto",
        }
    }
}

impl std::fmt::Display for LaneMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LaneMode {
    type Err = String;
    fn from_str(name: &str) -> Result<LaneMode, String> {
        LaneMode::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| format!("unknown lanes mode `{name}` (expected mask, compact or auto)"))
    }
}

impl LaneMode {
    /// Whether to run dense over all `total` rows when `active` of them are active.
    pub fn dense(self, active: usize, total: usize) -> bool {
        match self {
            LaneMode::Mask => true,
            LaneMode::Compact => active == total,
            LaneMode::Auto => active * 2 >= total,
        }
    }
}

/// What a primitive may read besides its operands.
pub struct SharedEnv<'a> {
    pub statics: &'a [Tensor],
    pub symbols: &'a [u64],
}

/// Inputs of one primitive execution.
pub struct PrimExecution<'a> {
    pub prim: &'a Prim,
    /// Slot index of each operand.
    pub args: &'a [usize],
    /// Slot index of the result, if any.
    pub dst: Option<usize>,
    /// Active rows, in any order (each row is computed independently).
    pub rows: &'a [u32],
    /// Number of rows of every column.
    pub total_rows: usize,
    pub mode: LaneMode,
}

/// Runs the primitive; a row that faults is reported in `faults` and
/// nothing of it is written. `rngs[member_of(row)]` is each row's stream.
pub fn run_prim(
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    env: &SharedEnv<'_>,
    rngs: &mut [MemberRng],
    member_of: &dyn Fn(u32) -> usize,
    faults: &mut Vec<(u32, Fault)>,
) {
    let prim = exec.prim;
    let Some(first_row) = exec.rows.first() else {
        return;
    };
    if !prim.is_random() {
        // Non-random primitives never read a stream; one is passed only
        // because the kernels' context holds one.
        let unused_rng = &mut rngs[member_of(*first_row)];
        let all_invariant = exec
            .args
            .iter()
            .all(|a| matches!(slots[*a], Slot::Invariant(_)));
        if all_invariant {
            run_once(exec, slots, env, unused_rng, faults);
            return;
        }
        if let Prim::Copy = prim {
            copy_rows(exec, slots);
            return;
        }
        if is_elementwise(prim) && run_flat(exec, slots, env, unused_rng) {
            return;
        }
    }
    run_row_by_row(exec, slots, env, rngs, member_of, faults);
}

/// A primitive with invariant operands: computed once.
fn run_once(
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    env: &SharedEnv<'_>,
    unused_rng: &mut MemberRng,
    faults: &mut Vec<(u32, Fault)>,
) {
    let values: Vec<Tensor> = exec.args.iter().map(|a| slots[*a].value(0)).collect();
    let refs: Vec<&Tensor> = values.iter().collect();
    let mut ctx = PrimContext {
        statics: env.statics,
        symbols: env.symbols,
        rng: unused_rng,
    };
    match kernels::eval(exec.prim, &refs, &mut ctx) {
        Err(fault) => faults.extend(exec.rows.iter().map(|r| (*r, fault.clone()))),
        Ok(None) => {}
        Ok(Some(value)) => {
            let Some(dst) = exec.dst else { return };
            match &mut slots[dst] {
                Slot::Invariant(v) => *v = Some(value),
                Slot::Column(c) => c.fill_rows(&value, exec.rows),
            }
        }
    }
}

fn copy_rows(exec: &PrimExecution<'_>, slots: &mut [Slot]) {
    let (src, dst) = (exec.args[0], exec.dst.expect("copy has a result"));
    if src == dst {
        return;
    }
    let (src_slot, dst_slot) = two_slots(slots, src, dst);
    match (src_slot, dst_slot) {
        (Slot::Column(s), Slot::Column(d)) => {
            if exec.rows.len() == exec.total_rows {
                copy_into(&mut d.data, 0, &s.data, 0..s.data.len());
            } else {
                storage::copy_rows(&mut d.data, &s.data, exec.rows, d.row_len);
            }
        }
        (Slot::Invariant(Some(v)), Slot::Column(d)) => d.fill_rows(v, exec.rows),
        (Slot::Invariant(v), Slot::Invariant(d)) => *d = v.clone(),
        (Slot::Column(_), Slot::Invariant(_)) | (Slot::Invariant(None), _) => {
            panic!("internal error: copy between incompatible slots")
        }
    }
}

/// Borrows two distinct slots, the first shared and the second mutable.
fn two_slots(slots: &mut [Slot], a: usize, b: usize) -> (&Slot, &mut Slot) {
    assert_ne!(a, b);
    if a < b {
        let (lo, hi) = slots.split_at_mut(b);
        (&lo[a], &mut hi[0])
    } else {
        let (lo, hi) = slots.split_at_mut(a);
        (&hi[0], &mut lo[b])
    }
}

fn is_elementwise(prim: &Prim) -> bool {
    matches!(
        prim,
        Prim::Unary(_) | Prim::Binary(_) | Prim::Compare(_) | Prim::Cast(_) | Prim::Select
    )
}

/// The elementwise fast path; returns false when the operands do not fit it
/// (then the caller runs row by row).
fn run_flat(
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    env: &SharedEnv<'_>,
    unused_rng: &mut MemberRng,
) -> bool {
    let Some(dst) = exec.dst else { return false };
    let Slot::Column(dst_column) = &slots[dst] else {
        return false;
    };
    let row_len = dst_column.row_len;
    // Every operand is a column of the result's row length, or an invariant scalar.
    for a in exec.args {
        match &slots[*a] {
            Slot::Column(c) if c.row_len == row_len => {}
            Slot::Invariant(Some(t)) if t.is_scalar() => {}
            _ => return false,
        }
    }
    // `select` broadcasts only its condition: its alternatives must both be columns.
    if matches!(exec.prim, Prim::Select)
        && exec.args[1..]
            .iter()
            .any(|a| !matches!(slots[*a], Slot::Column(_)))
    {
        return false;
    }
    let dense = exec.mode.dense(exec.rows.len(), exec.total_rows);
    let n = if dense {
        exec.total_rows
    } else {
        exec.rows.len()
    };
    // Column operands as flat tensors of `n` rows: under masking the column's
    // own buffer, moved out of its slot for the call (no copy) and put back
    // after; under compaction the active rows gathered. Each slot once, even
    // when it is read twice (`x * x`).
    let mut unique: Vec<usize> = Vec::with_capacity(exec.args.len());
    for a in exec.args {
        if !unique.contains(a) {
            unique.push(*a);
        }
    }
    let mut flat: Vec<Option<Tensor>> = Vec::with_capacity(unique.len());
    for a in &unique {
        flat.push(match &mut slots[*a] {
            Slot::Column(c) => {
                let data = if dense {
                    let empty = Data::with_capacity(c.data.ty(), 0);
                    std::mem::replace(&mut c.data, empty)
                } else {
                    c.gather(exec.rows).data
                };
                Some(Tensor {
                    shape: vec![n * row_len],
                    data,
                })
            }
            Slot::Invariant(_) => None,
        });
    }
    let outcome = {
        let refs: Vec<&Tensor> = exec
            .args
            .iter()
            .map(|a| {
                let k = unique
                    .iter()
                    .position(|u| u == a)
                    .expect("every operand is listed");
                match (&flat[k], &slots[*a]) {
                    (Some(tensor), _) => tensor,
                    (None, Slot::Invariant(Some(tensor))) => tensor,
                    _ => unreachable!("checked above"),
                }
            })
            .collect();
        let mut ctx = PrimContext {
            statics: env.statics,
            symbols: env.symbols,
            rng: unused_rng,
        };
        kernels::eval(exec.prim, &refs, &mut ctx)
    };
    if dense {
        for (a, tensor) in unique.iter().zip(flat) {
            if let (Slot::Column(c), Some(tensor)) = (&mut slots[*a], tensor) {
                c.data = tensor.data;
            }
        }
    }
    // A fault (a division by zero, perhaps only in an inactive row under
    // masking) sends the operation down the row-by-row path, which finds out
    // exactly which active rows fault.
    let Ok(Some(result)) = outcome else {
        return false;
    };
    let Slot::Column(dst_column) = &mut slots[dst] else {
        unreachable!()
    };
    if dense && exec.rows.len() == exec.total_rows {
        dst_column.data = result.data;
    } else if dense {
        storage::copy_rows(&mut dst_column.data, &result.data, exec.rows, row_len);
    } else {
        storage::scatter_rows(&mut dst_column.data, &result.data, exec.rows, row_len);
    }
    true
}

/// The general path: each active row alone, through the reference kernels.
fn run_row_by_row(
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    env: &SharedEnv<'_>,
    rngs: &mut [MemberRng],
    member_of: &dyn Fn(u32) -> usize,
    faults: &mut Vec<(u32, Fault)>,
) {
    for &row in exec.rows {
        let values: Vec<Tensor> = exec
            .args
            .iter()
            .map(|a| slots[*a].value(row as usize))
            .collect();
        let refs: Vec<&Tensor> = values.iter().collect();
        let mut ctx = PrimContext {
            statics: env.statics,
            symbols: env.symbols,
            rng: &mut rngs[member_of(row)],
        };
        match kernels::eval(exec.prim, &refs, &mut ctx) {
            Err(fault) => faults.push((row, fault)),
            Ok(None) => {}
            Ok(Some(value)) => {
                let Some(dst) = exec.dst else { continue };
                match &mut slots[dst] {
                    Slot::Column(c) => c.set_row(row as usize, &value),
                    // Only a random primitive with invariant operands can get
                    // here with an invariant result, and the uniformity
                    // analysis never makes a random result invariant.
                    Slot::Invariant(_) => {
                        panic!("internal error: per-member value into an invariant variable")
                    }
                }
            }
        }
    }
}
