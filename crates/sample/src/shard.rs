//! `sample` over the ranks of a job: rank `r` of `K` runs the chains
//! `[r*N/K, (r+1)*N/K)`, chain `i` drawing from the streams of batch member
//! `i`, so that every chain does what it does in one process. Pooled
//! adaptation meets at every pooling: each rank sends its chains'
//! adaptation states, every rank pools all of them in chain order (so the
//! result does not depend on `K`); at the end rank 0 gathers every chain's
//! draws and figures and makes the one [`SampleRun`] one process makes.

use autobatch::shard::wire::{Reader, WireError, Writer};
use autobatch::shard::{exchange, member_range, payloads, status_bytes, Communicator, RankFailure};

use crate::chains::{pooled, ChainAdaptation, ChainOutcome, FinishedChain, Pooled};
use crate::driver::{check_config, Figures, Halt, Ran, Sampler, Stop};
use crate::{ChainFailure, Model, PhaseFigures, Progress, SampleConfig, SampleError, SampleRun};

/// Why a sharded `sample` stopped.
#[derive(Debug)]
pub enum ShardedError {
    /// What one process reports (settings, every chain failed, and in a
    /// job of one rank everything).
    Sample(SampleError),
    /// A rank of a job of several could not do its part.
    Rank(RankFailure),
}

/// Runs `sample` over the ranks of `comm`: every rank calls it, with its
/// model (or why it has none); rank 0 gets the run, the other ranks `None`.
/// `progress` follows this rank's chains.
pub fn sample_sharded(
    comm: &dyn Communicator,
    model: Result<&Model, String>,
    config: &SampleConfig,
    progress: &mut dyn FnMut(Progress),
    stop: &Stop,
) -> Result<Option<SampleRun>, ShardedError> {
    // The same settings on every rank: each refuses them alike, alone.
    let pool_every = check_config(config).map_err(ShardedError::Sample)?;
    let chains = member_range(comm.rank(), comm.size(), config.chains);
    let (sampler, ran) = match model
        .map_err(SampleError::Run)
        .and_then(|model| Sampler::new(model, config, chains))
    {
        Ok(sampler) => {
            let ran = sampler.run_chains(comm, progress, stop);
            (Some(sampler), ran)
        }
        Err(error) => {
            if pool_every.is_some() && config.warmup > 0 {
                // The others wait at the first pooling: tell them.
                let _ = pool_across(comm, Err(error.to_string()), 0);
            }
            (None, Err(Halt::Local(error)))
        }
    };
    if comm.size() == 1 {
        let ran = ran.map_err(|stop| match stop {
            Halt::Local(error) => ShardedError::Sample(error),
            Halt::Rank(failure) => ShardedError::Rank(failure),
        })?;
        let outcomes = ran.chains.into_iter().map(|c| c.outcome()).collect();
        return finish(sampler, outcomes, ran.figures, ran.runs, ran.last_run);
    }
    // The executor's report is rank 0's (each rank's describes its own runs).
    let report = ran
        .as_ref()
        .map(|ran| ran.last_run.clone())
        .unwrap_or_default();
    // Every rank learnt another's failure at the same pooling.
    let mut learnt = None;
    let status = match ran {
        Ok(ran) => Ok(encode_ran(ran)),
        Err(Halt::Local(error)) => Err(error.to_string()),
        Err(Halt::Rank(failure)) => {
            let message = failure.to_string();
            learnt = Some(failure);
            Err(message)
        }
    };
    let Some(statuses) = comm.gather(status_bytes(status)) else {
        return Ok(None);
    };
    if let Some(failure) = learnt {
        return Err(ShardedError::Rank(failure));
    }
    let parts = payloads(statuses).map_err(ShardedError::Rank)?;
    let (outcomes, figures, runs) = merge(&parts, config.chains).map_err(|(rank, e)| {
        ShardedError::Rank(RankFailure {
            rank,
            message: format!("internal error: {e} (this is a bug in autobatch)"),
        })
    })?;
    finish(sampler, outcomes, figures, runs, report)
}

/// The run from every chain's outcome (on rank 0, whose sampler it is).
fn finish(
    sampler: Option<Sampler<'_>>,
    outcomes: Vec<ChainOutcome>,
    figures: Figures,
    runs: usize,
    last_run: crate::driver::ExecutorFigures,
) -> Result<Option<SampleRun>, ShardedError> {
    let Some(sampler) = sampler else {
        return Err(ShardedError::Rank(RankFailure {
            rank: 0,
            message: "internal error: rank 0 has no sampler (this is a bug in autobatch)".into(),
        }));
    };
    sampler
        .finish(outcomes, figures, runs, last_run)
        .map(Some)
        .map_err(ShardedError::Sample)
}

/// Pools the adaptation of every rank's chains that have not failed (this
/// rank's `mine`, or why it cannot): every rank gets the same [`Pooled`] and
/// the first such chain's window end; `None` when every chain has failed.
pub(crate) fn pool_across(
    comm: &dyn Communicator,
    mine: Result<Vec<ChainAdaptation>, String>,
    dim: usize,
) -> Result<Option<(Pooled, Option<i64>)>, RankFailure> {
    let mine = mine.map(|chains| {
        let mut w = Writer::new();
        w.usize(chains.len());
        chains.iter().for_each(|c| write_adaptation(&mut w, c));
        w.finish()
    });
    let parts = if comm.size() == 1 {
        payloads(vec![status_bytes(mine)])?
    } else {
        exchange(comm, mine)?
    };
    let mut all = Vec::new();
    for (rank, part) in parts.iter().enumerate() {
        read_adaptations(part, &mut all).map_err(|e| RankFailure {
            rank,
            message: format!("internal error: {e} (this is a bug in autobatch)"),
        })?;
    }
    let Some(first) = all.first() else {
        return Ok(None);
    };
    Ok(Some((pooled(&all, dim), first.window_end)))
}

fn write_adaptation(w: &mut Writer, c: &ChainAdaptation) {
    w.f64(c.eps);
    w.f64(c.mu);
    w.f64(c.s_bar);
    w.f64(c.x_bar);
    w.bool(c.window_ended);
    w.i64(c.w_n);
    w.f64s(&c.w_mean);
    w.f64s(&c.w_m2);
    w.bool(c.window_end.is_some());
    w.i64(c.window_end.unwrap_or(0));
}

fn read_adaptations(bytes: &[u8], into: &mut Vec<ChainAdaptation>) -> Result<(), WireError> {
    let mut r = Reader::new(bytes);
    for _ in 0..r.usize()? {
        into.push(ChainAdaptation {
            eps: r.f64()?,
            mu: r.f64()?,
            s_bar: r.f64()?,
            x_bar: r.f64()?,
            window_ended: r.bool()?,
            w_n: r.i64()?,
            w_mean: r.f64s()?,
            w_m2: r.f64s()?,
            window_end: {
                let known = r.bool()?;
                let end = r.i64()?;
                known.then_some(end)
            },
        });
    }
    Ok(())
}

/// A rank's chains and figures at the end, as bytes.
fn encode_ran(ran: Ran) -> Vec<u8> {
    let mut w = Writer::new();
    w.usize(ran.runs);
    w.usize(ran.chains.len());
    for phase in [&ran.figures.warmup, &ran.figures.sampling] {
        w.f64(phase.seconds);
        w.u64(phase.gradient_evaluations);
        w.u64(phase.gradient_executions);
        w.u64(phase.gradient_active_lanes);
    }
    w.u64(ran.figures.data_bytes);
    w.u64(ran.figures.peak_batch_bytes);
    for chain in ran.chains {
        match chain.outcome() {
            ChainOutcome::Failed(f) => {
                w.u8(1);
                w.usize(f.chain);
                w.str(&f.kind);
                w.str(&f.message);
                w.str(&f.location);
            }
            ChainOutcome::Finished(c) => {
                w.u8(0);
                w.f64s(&c.samples);
                w.i64s(&c.tree_depth);
                w.i64s(&c.n_leapfrog);
                w.bools(&c.divergent);
                w.f64s(&c.accept_stat);
                w.f64s(&c.log_density);
                w.f64s(&c.energy);
                w.u64(c.warmup_divergences);
                w.u64(c.warmup_faults);
                w.u64(c.sampling_faults);
                w.f64(c.step_size);
                w.f64s(&c.inv_metric);
            }
        }
    }
    w.finish()
}

/// Every rank's chains in chain order, the figures of the job and its
/// runs (the most any rank made), from the ranks' parts; on an error, the
/// rank whose part does not read.
#[allow(clippy::type_complexity)]
fn merge(
    parts: &[Vec<u8>],
    total_chains: usize,
) -> Result<(Vec<ChainOutcome>, Figures, usize), (usize, WireError)> {
    let mut outcomes = Vec::with_capacity(total_chains);
    let mut figures = Figures::default();
    // Batched executions of each rank, weighted by its chains: the
    // utilization is over each rank's own lanes.
    let mut weighted = [0_u128; 2];
    let mut runs = 0;
    for (rank, part) in parts.iter().enumerate() {
        let mut r = Reader::new(part);
        let read = read_part(&mut r, &mut outcomes, &mut figures, &mut weighted);
        runs = runs.max(read.map_err(|e| (rank, e))?);
    }
    let total = total_chains.max(1) as u128;
    figures.warmup.gradient_executions = weighted[0].div_ceil(total) as u64;
    figures.sampling.gradient_executions = weighted[1].div_ceil(total) as u64;
    Ok((outcomes, figures, runs))
}

/// One rank's part; returns its runs.
fn read_part(
    r: &mut Reader<'_>,
    outcomes: &mut Vec<ChainOutcome>,
    figures: &mut Figures,
    weighted: &mut [u128; 2],
) -> Result<usize, WireError> {
    let runs = r.usize()?;
    let chains = r.usize()?;
    for (k, phase) in [&mut figures.warmup, &mut figures.sampling]
        .into_iter()
        .enumerate()
    {
        let seconds = r.f64()?;
        let read = PhaseFigures {
            seconds,
            gradient_evaluations: r.u64()?,
            gradient_executions: r.u64()?,
            gradient_active_lanes: r.u64()?,
        };
        phase.seconds = phase.seconds.max(read.seconds);
        phase.gradient_evaluations += read.gradient_evaluations;
        phase.gradient_active_lanes += read.gradient_active_lanes;
        weighted[k] += read.gradient_executions as u128 * chains as u128;
    }
    figures.data_bytes = figures.data_bytes.max(r.u64()?);
    figures.peak_batch_bytes = figures.peak_batch_bytes.max(r.u64()?);
    for _ in 0..chains {
        outcomes.push(match r.u8()? {
            1 => ChainOutcome::Failed(ChainFailure {
                chain: r.usize()?,
                kind: r.str()?,
                message: r.str()?,
                location: r.str()?,
            }),
            _ => ChainOutcome::Finished(Box::new(FinishedChain {
                samples: r.f64s()?,
                tree_depth: r.i64s()?,
                n_leapfrog: r.i64s()?,
                divergent: r.bools()?,
                accept_stat: r.f64s()?,
                log_density: r.f64s()?,
                energy: r.f64s()?,
                warmup_divergences: r.u64()?,
                warmup_faults: r.u64()?,
                sampling_faults: r.u64()?,
                step_size: r.f64()?,
                inv_metric: r.f64s()?,
            })),
        });
    }
    Ok(runs)
}
