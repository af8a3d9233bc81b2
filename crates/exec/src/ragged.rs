//! Ragged batches: members whose symbolic dimensions have different
//! lengths (a batch of sentences of different lengths, each member's own
//! data set), on the executors that do not run them as one batch
//! ([`crate::Executor::runs_ragged`]: the reference; program-counter and
//! local-static use `crate::batched::classes`, the native strategies one
//! program that reads each member's lengths), and where a batch goes whose padded rows do not fit.
//!
//! A batch whose [`Env::ragged`] is not empty runs here as one batch per
//! **size**: the members that agree on every ragged dimension run together,
//! with those dimensions fixed, on the chosen strategy; their results go
//! back to their places. Each member thus computes on exactly its own
//! elements (no padding is stored or touched, nothing is masked) and gets
//! the result it gets alone: its random stream is still that of its index
//! in the whole batch ([`RunOptions::member_ids`]).
//!
//! With one thread the sizes run one after the other, each batched as any
//! batch is; with more, the sizes run in parallel, each on one of the
//! `threads` workers (largest first), instead of splitting each size's
//! operations between threads. Either way a member's result is the same.
//! What this costs: members of different sizes never share an operation,
//! so a batch with many distinct sizes runs as many small batches
//! (`docs/ragged.md`). It is also where a ragged batch goes when its rows,
//! padded to its longest member, do not fit in memory on an executor that
//! would run it as one batch (a few very long members among many short
//! ones): each size needs only its own lengths' memory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use autobatch_ir::Program;

use crate::{
    Arg, Backend, Batch, Env, ExecError, OpCount, ReportField, ReportValue, RunOptions, RunOutput,
    Stats, Strategy,
};

/// The members of one size: each ragged dimension's length, and the
/// members (indices into the batch) that have those lengths.
struct SizeGroup {
    lengths: Vec<u64>,
    members: Vec<usize>,
}

impl SizeGroup {
    /// A measure of the group's work: its members times the product of
    /// its lengths (at least 1 each).
    fn elements(&self) -> u128 {
        self.lengths
            .iter()
            .fold(self.members.len() as u128, |n, &l| {
                n.saturating_mul(u128::from(l.max(1)))
            })
    }
}

/// Runs a ragged batch as one batch per size (see the module docs).
pub(crate) fn run_by_size(
    backend: &dyn Backend,
    strategy: Strategy,
    program: &Program,
    env: &Env,
    batch: &Batch,
    options: &RunOptions,
) -> Result<RunOutput, ExecError> {
    let groups = size_groups(env, batch.size)?;
    let run_group = |group: &SizeGroup, threads: usize| {
        let group_env = env_of(env, group);
        let group_batch = batch_of(batch, &group.members);
        let ids: Arc<[u64]> = group
            .members
            .iter()
            .map(|&m| options.member_id(m))
            .collect();
        let group_options = RunOptions {
            member_ids: Some(ids),
            threads,
            ..options.clone()
        };
        strategy
            .executor()
            .run(backend, program, &group_env, &group_batch, &group_options)
    };
    let start = Instant::now();
    let outputs: Vec<Result<RunOutput, ExecError>> = if options.threads > 1 && groups.len() > 1 {
        // Sizes are independent batches: each runs on one worker (a size's
        // results do not depend on the thread that runs it).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .build()
            .map_err(|e| ExecError::Resources(format!("cannot start worker threads: {e}")))?;
        pool.install(|| groups.par_iter().map(|g| run_group(g, 1)).collect())
    } else {
        groups
            .iter()
            .map(|g| run_group(g, options.threads))
            .collect()
    };
    let wall_seconds = start.elapsed().as_secs_f64();
    let mut results = vec![None; batch.size];
    let mut stats = Vec::with_capacity(groups.len());
    let mut adjoints = autobatch_kernels::adjoints::AdjointLog::new();
    for (group, output) in groups.iter().zip(outputs) {
        let output = output?;
        // The group's member index is the batch's `group.members[..]`.
        adjoints.append(&output.adjoints, |m| group.members[m as usize] as u32);
        if output.results.len() != group.members.len() {
            return Err(ExecError::Internal(format!(
                "the executor returned {} results for {} members of one size",
                output.results.len(),
                group.members.len()
            )));
        }
        for (&member, result) in group.members.iter().zip(output.results) {
            results[member] = Some(result);
        }
        stats.push(output.stats);
    }
    let results = results
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ExecError::Internal("a member of a ragged batch was not run".into()))?;
    let mut stats = merge_stats(stats);
    stats.sizes = groups.len() as u64;
    stats.wall_seconds = wall_seconds;
    Ok(RunOutput {
        results,
        adjoints,
        stats,
    })
}

/// One size of a ragged batch: the lengths of every symbolic dimension
/// (the shared ones and the size's own), and its members.
pub(crate) struct SizeSymbols {
    pub symbols: Vec<u64>,
    pub members: Vec<usize>,
}

/// The sizes of a ragged batch of `members` members (largest first).
pub(crate) fn size_symbols(env: &Env, members: usize) -> Result<Vec<SizeSymbols>, ExecError> {
    Ok(size_groups(env, members)?
        .into_iter()
        .map(|group| SizeSymbols {
            symbols: symbols_of(env, &group.lengths),
            members: group.members,
        })
        .collect())
}

/// The lengths of every symbolic dimension for a size whose ragged ones
/// have `lengths`.
fn symbols_of(env: &Env, lengths: &[u64]) -> Vec<u64> {
    let mut symbols = env.symbols.clone();
    for (ragged, &length) in env.ragged.iter().zip(lengths) {
        if let Some(slot) = symbols.get_mut(ragged.symbol.0 as usize) {
            *slot = length;
        }
    }
    symbols
}

/// How many sizes a ragged batch of `members` members has.
pub(crate) fn sizes(env: &Env, members: usize) -> Result<u64, ExecError> {
    Ok(size_groups(env, members)?.len() as u64)
}

/// The batch's members grouped by their lengths of the ragged dimensions:
/// the groups with the most elements first (so that, run in parallel, a
/// large one does not start last), ties in increasing order of lengths.
fn size_groups(env: &Env, members: usize) -> Result<Vec<SizeGroup>, ExecError> {
    if let Some(bad) = env.ragged.iter().find(|r| r.lengths.len() != members) {
        return Err(ExecError::Internal(format!(
            "ragged dimension {} has {} lengths for {members} members",
            bad.symbol.0,
            bad.lengths.len()
        )));
    }
    let mut groups: BTreeMap<Vec<u64>, Vec<usize>> = BTreeMap::new();
    for member in 0..members {
        let key = env.ragged.iter().map(|r| r.lengths[member]).collect();
        groups.entry(key).or_default().push(member);
    }
    let mut groups: Vec<SizeGroup> = groups
        .into_iter()
        .map(|(lengths, members)| SizeGroup { lengths, members })
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.elements()));
    Ok(groups)
}

/// The environment of one size: every dimension fixed.
fn env_of(env: &Env, group: &SizeGroup) -> Env {
    Env {
        statics: env.statics.clone(),
        symbols: symbols_of(env, &group.lengths),
        ragged: Vec::new(),
        hosts: env.hosts.clone(),
    }
}

/// The environment member `member` of a ragged batch sees alone: its own
/// lengths (`env` itself for a batch of one size).
pub(crate) fn member_env(env: &Env, member: usize) -> std::borrow::Cow<'_, Env> {
    if env.ragged.is_empty() {
        return std::borrow::Cow::Borrowed(env);
    }
    let lengths = env.ragged.iter().map(|r| r.lengths[member]).collect();
    std::borrow::Cow::Owned(env_of(
        env,
        &SizeGroup {
            lengths,
            members: Vec::new(),
        },
    ))
}

/// The batch of the members `members` (shared arguments as they are).
fn batch_of(batch: &Batch, members: &[usize]) -> Batch {
    let args = batch
        .args
        .iter()
        .map(|arg| match arg {
            Arg::Shared(value) => Arg::Shared(value.clone()),
            Arg::Batched(values) => {
                Arg::Batched(members.iter().map(|&m| values[m].clone()).collect())
            }
        })
        .collect();
    Batch {
        entry: batch.entry,
        size: members.len(),
        args,
    }
}

/// The figures of a run made of the runs of its sizes: counts add up,
/// peaks are the largest (as if the sizes ran one after the other), the
/// lane utilization is the mean over all the operations run. The caller
/// sets the seconds (the sizes may have run in parallel).
fn merge_stats(runs: Vec<Stats>) -> Stats {
    let mut merged = Stats::default();
    let mut weighted_utilization = 0.0;
    let mut weight = 0.0;
    let mut op_counts: BTreeMap<(u32, u32, &'static str), OpCount> = BTreeMap::new();
    for run in runs {
        let operations: u64 = run.op_counts.iter().map(|c| c.executions).sum();
        let run_weight = operations.max(run.steps).max(1) as f64;
        weighted_utilization += run.lane_utilization * run_weight;
        weight += run_weight;
        merged.steps += run.steps;
        merged.instances += run.instances;
        merged.peak_instances = merged.peak_instances.max(run.peak_instances);
        merged.call_bytes += run.call_bytes;
        merged.peak_state_bytes = merged.peak_state_bytes.max(run.peak_state_bytes);
        merged.tape_bytes = merged.tape_bytes.max(run.tape_bytes);
        for count in run.op_counts {
            let key = (count.loc.line, count.loc.column, count.op);
            match op_counts.get_mut(&key) {
                Some(total) => {
                    total.executions += count.executions;
                    total.active_lanes += count.active_lanes;
                }
                None => {
                    op_counts.insert(key, count);
                }
            }
        }
        merge_report(&mut merged.report, run.report);
        match (&mut merged.profile, run.profile) {
            (Some(mine), Some(later)) => mine.append(&later),
            (mine @ None, later) => *mine = later,
            (Some(_), None) => {}
        }
    }
    merged.lane_utilization = if weight > 0.0 {
        weighted_utilization / weight
    } else {
        0.0
    };
    merged.op_counts = op_counts.into_values().collect();
    merged
}

/// An executor's own figures over several runs: counts and seconds add up,
/// a flag holds if it held in every run, a text is kept if every run said
/// the same (else the distinct texts, joined).
fn merge_report(total: &mut Vec<ReportField>, run: Vec<ReportField>) {
    for field in run {
        let Some(existing) = total.iter_mut().find(|f| f.name == field.name) else {
            total.push(field);
            continue;
        };
        existing.value = match (&existing.value, field.value) {
            (ReportValue::Count(a), ReportValue::Count(b)) => ReportValue::Count(a + b),
            (ReportValue::Seconds(a), ReportValue::Seconds(b)) => ReportValue::Seconds(a + b),
            (ReportValue::Bool(a), ReportValue::Bool(b)) => ReportValue::Bool(*a && b),
            (ReportValue::Text(a), ReportValue::Text(b)) if a.split("; ").any(|t| t == b) => {
                ReportValue::Text(a.clone())
            }
            (ReportValue::Text(a), ReportValue::Text(b)) => ReportValue::Text(format!("{a}; {b}")),
            (_, other) => other,
        };
    }
}
