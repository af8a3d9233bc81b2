//! Sharding a batch over the ranks of a job (MPI processes, say): rank `r`
//! of `K` runs the contiguous members `[r*N/K, (r+1)*N/K)` of a batch of
//! `N` ([`member_range`]), each member drawing random numbers as the member
//! of that global index ([`BoundBatch::numbered_from`]), so that every
//! member's result is the one it has in one process.
//!
//! Rank 0 (the root) binds the whole batch, which checks every input once
//! with the messages of one process, and sends each rank its slice
//! ([`BoundBatch::slice_bytes`], [`Compiled::bind_slice`]); the ranks run
//! their slices and send back their members' results (as the JSON text of
//! each member, which the root splices into the document one process
//! writes) and their figures, which the root merges ([`run_sharded`]).
//! Every exchange carries each rank's status, so a rank that failed is
//! named at the next exchange ([`RankFailure`]) instead of leaving the
//! others waiting.
//!
//! The transport is a [`Communicator`]; this crate has [`Single`] (one
//! process) and [`InProcess`] (ranks as threads, for tests); the
//! `autobatch` command adds MPI.

mod comm;
mod run;
pub mod wire;

pub use comm::{Communicator, InProcess, Single};
pub use run::{merge_stats_json, run_sharded, run_sharded_observed, RankFigures, RunDocument};

use std::ops::Range;

use autobatch_exec::{Arg, Batch, Env, RaggedSymbol};
use autobatch_ir::EntityRef;
use autobatch_types::{SymbolId, Tensor};

use crate::bind::BoundBatch;
use crate::compile::Compiled;
use wire::{Reader, WireError, Writer};

/// The members rank `rank` of `size` runs in a batch of `members`:
/// `[rank*members/size, (rank+1)*members/size)` (some empty when there are
/// fewer members than ranks).
pub fn member_range(rank: usize, size: usize, members: usize) -> Range<usize> {
    let at = |r: usize| (r as u128 * members as u128 / size.max(1) as u128) as usize;
    at(rank)..at(rank + 1)
}

/// A rank that could not do its part: the job stops, naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankFailure {
    pub rank: usize,
    pub message: String,
}

impl std::fmt::Display for RankFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {}: {}", self.rank, self.message)
    }
}

impl std::error::Error for RankFailure {}

/// A rank's status and, if it did its part, its payload, as bytes.
pub fn status_bytes(status: Result<Vec<u8>, String>) -> Vec<u8> {
    let mut w = Writer::new();
    match status {
        Ok(payload) => {
            w.u8(0);
            w.bytes(&payload);
        }
        Err(message) => {
            w.u8(1);
            w.str(&message);
        }
    }
    w.finish()
}

/// Every rank's payload, in rank order, or the first rank that failed.
pub fn payloads(statuses: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, RankFailure> {
    let mut out = Vec::with_capacity(statuses.len());
    for (rank, bytes) in statuses.iter().enumerate() {
        let mut r = Reader::new(bytes);
        let read = match r.u8() {
            Ok(0) => r.bytes().map(|payload| Ok(payload.to_vec())),
            Ok(_) => r.str().map(Err),
            Err(e) => Err(e),
        };
        match read {
            Ok(Ok(payload)) => out.push(payload),
            Ok(Err(message)) => return Err(RankFailure { rank, message }),
            Err(e) => {
                return Err(RankFailure {
                    rank,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}

/// Every rank's payload on every rank, or (on every rank alike) the first
/// rank that failed.
pub fn exchange(
    comm: &dyn Communicator,
    status: Result<Vec<u8>, String>,
) -> Result<Vec<Vec<u8>>, RankFailure> {
    payloads(comm.all_gather(status_bytes(status)))
}

impl BoundBatch {
    /// The members `range` of this batch, as bytes for [`Compiled::bind_slice`]:
    /// the statics and dimensions, the shared arguments, and the batched
    /// arguments of those members, numbered from their index in this batch.
    pub fn slice_bytes(&self, range: Range<usize>) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(self.entry().index() as u64);
        w.u64(self.first_member() + range.start as u64);
        w.usize(range.len());
        let env = self.env();
        w.usize(env.statics.len());
        env.statics.iter().for_each(|t| w.tensor(t));
        w.usize(env.symbols.len());
        env.symbols.iter().for_each(|s| w.u64(*s));
        w.usize(env.ragged.len());
        for ragged in &env.ragged {
            w.u64(u64::from(ragged.symbol.0));
            ragged.lengths[range.clone()].iter().for_each(|l| w.u64(*l));
        }
        let args = &self.batch().args;
        w.usize(args.len());
        for arg in args {
            match arg {
                Arg::Shared(t) => {
                    w.u8(0);
                    w.tensor(t);
                }
                Arg::Batched(values) => {
                    w.u8(1);
                    values[range.clone()].iter().for_each(|t| w.tensor(t));
                }
            }
        }
        w.finish()
    }
}

impl Compiled {
    /// The batch [`BoundBatch::slice_bytes`] wrote, bound to this program
    /// (the one the slice was bound to). An error is a bug: the bytes come
    /// from another rank of autobatch.
    pub fn bind_slice(&self, bytes: &[u8]) -> Result<BoundBatch, WireError> {
        let mut r = Reader::new(bytes);
        let entry = r.u64()?;
        let entry = self
            .program()
            .functions
            .keys()
            .find(|f| f.index() as u64 == entry)
            .ok_or_else(|| WireError(format!("no function {entry}")))?;
        let first_member = r.u64()?;
        let size = r.usize()?;
        let statics: Vec<Tensor> = (0..r.usize()?)
            .map(|_| r.tensor())
            .collect::<Result<_, _>>()?;
        let symbols: Vec<u64> = (0..r.usize()?).map(|_| r.u64()).collect::<Result<_, _>>()?;
        let mut ragged = Vec::new();
        for _ in 0..r.usize()? {
            let symbol = SymbolId(r.u64()? as u32);
            let lengths = (0..size).map(|_| r.u64()).collect::<Result<_, _>>()?;
            ragged.push(RaggedSymbol { symbol, lengths });
        }
        // A slice whose members all have one size is not ragged.
        let mut symbols = symbols;
        ragged.retain(|r: &RaggedSymbol| {
            let first = r.lengths.first().copied().unwrap_or(0);
            if r.lengths.iter().all(|&l| l == first) {
                if let Some(slot) = symbols.get_mut(r.symbol.0 as usize) {
                    *slot = first;
                }
                false
            } else {
                true
            }
        });
        let n_args = r.usize()?;
        let mut args = Vec::new();
        for _ in 0..n_args {
            args.push(match r.u8()? {
                0 => Arg::Shared(r.tensor()?),
                _ => Arg::Batched((0..size).map(|_| r.tensor()).collect::<Result<_, _>>()?),
            });
        }
        if !r.is_done() {
            return Err(WireError("bytes left after a batch".into()));
        }
        let env = Env {
            statics: statics.into(),
            symbols,
            ragged,
            hosts: self.hosts().clone(),
        };
        let batch = Batch { entry, size, args };
        Ok(BoundBatch::from_parts(
            self.shared_program(),
            env,
            batch,
            first_member,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_batch_in_order() {
        for size in 1..=5 {
            for members in 0..=11 {
                let ranges: Vec<_> = (0..size).map(|r| member_range(r, size, members)).collect();
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges[size - 1].end, members);
                for pair in ranges.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                }
                let lens: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
                let (min, max) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(max - min <= 1, "{lens:?}");
            }
        }
        assert_eq!(member_range(1, 3, 10), 3..6);
        assert_eq!(member_range(2, 3, 10), 6..10);
    }

    #[test]
    fn statuses_name_the_first_failed_rank() {
        let ok = payloads(vec![status_bytes(Ok(vec![1])), status_bytes(Ok(vec![]))]);
        assert_eq!(ok, Ok(vec![vec![1], vec![]]));
        let failed = payloads(vec![
            status_bytes(Ok(vec![1])),
            status_bytes(Err("out of memory".into())),
            status_bytes(Err("later".into())),
        ]);
        assert_eq!(
            failed,
            Err(RankFailure {
                rank: 1,
                message: "out of memory".into()
            })
        );
        assert_eq!(failed.unwrap_err().to_string(), "rank 1: out of memory");
    }
}
