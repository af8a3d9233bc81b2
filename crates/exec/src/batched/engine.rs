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

use super::storage::{self, copy_into, Column, Slot};

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
    let all_invariant = exec
        .args
        .iter()
        .all(|a| matches!(slots[*a], Slot::Invariant(_)));
    if all_invariant && !prim.is_random() {
        run_once(exec, slots, env, faults);
        return;
    }
    if let Prim::Copy = prim {
        copy_rows(exec, slots);
        return;
    }
    if is_elementwise(prim) && run_flat(exec, slots, env) {
        return;
    }
    run_row_by_row(exec, slots, env, rngs, member_of, faults);
}

/// A primitive with invariant operands: computed once.
fn run_once(
    exec: &PrimExecution<'_>,
    slots: &mut [Slot],
    env: &SharedEnv<'_>,
    faults: &mut Vec<(u32, Fault)>,
) {
    let values: Vec<Tensor> = exec.args.iter().map(|a| slots[*a].value(0)).collect();
    let refs: Vec<&Tensor> = values.iter().collect();
    // No random primitive gets here, so the stream is never read.
    let mut unused_rng = MemberRng::new(0, 0);
    let mut ctx = PrimContext {
        statics: env.statics,
        symbols: env.symbols,
        rng: &mut unused_rng,
    };
    match kernels::eval(exec.prim, &refs, &mut ctx) {
        Err(fault) => faults.extend(exec.rows.iter().map(|r| (*r, fault.clone()))),
        Ok(None) => {}
        Ok(Some(value)) => {
            let Some(dst) = exec.dst else { return };
            match &mut slots[dst] {
                Slot::Invariant(v) => *v = Some(value),
                Slot::Column(c) => broadcast(c, &value, exec.rows),
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
        (Slot::Invariant(Some(v)), Slot::Column(d)) => broadcast(d, v, exec.rows),
        (Slot::Invariant(v), Slot::Invariant(d)) => *d = v.clone(),
        (Slot::Column(_), Slot::Invariant(_)) | (Slot::Invariant(None), _) => {
            panic!("internal error: copy between incompatible slots")
        }
    }
}

/// Writes `value` into the rows `rows` of `column`.
fn broadcast(column: &mut Column, value: &Tensor, rows: &[u32]) {
    if column.row_len == 1 {
        // One element: a typed fill and scatter instead of a copy per row.
        let filled = Data::filled(value.as_scalar(), rows.len());
        storage::scatter_rows(&mut column.data, &filled, rows, 1);
    } else {
        for r in rows {
            column.set_row(*r as usize, value);
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
fn run_flat(exec: &PrimExecution<'_>, slots: &mut [Slot], env: &SharedEnv<'_>) -> bool {
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
    let operands: Vec<Tensor> = exec
        .args
        .iter()
        .map(|a| match &slots[*a] {
            Slot::Column(c) => {
                let data = if dense {
                    c.data.clone()
                } else {
                    gather(c, exec.rows)
                };
                Tensor {
                    shape: vec![n * row_len],
                    data,
                }
            }
            Slot::Invariant(Some(t)) => t.clone(),
            Slot::Invariant(None) => unreachable!("checked above"),
        })
        .collect();
    let refs: Vec<&Tensor> = operands.iter().collect();
    let mut unused_rng = MemberRng::new(0, 0);
    let mut ctx = PrimContext {
        statics: env.statics,
        symbols: env.symbols,
        rng: &mut unused_rng,
    };
    // A fault (a division by zero, perhaps only in an inactive row under
    // masking) sends the operation down the row-by-row path, which finds out
    // exactly which active rows fault.
    let Ok(Some(result)) = kernels::eval(exec.prim, &refs, &mut ctx) else {
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

/// The active rows of `column`, one after another.
fn gather(column: &Column, rows: &[u32]) -> Data {
    let mut data = Data::with_capacity(column.data.ty(), rows.len() * column.row_len);
    storage::gather_rows(&mut data, &column.data, rows, column.row_len);
    data
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
