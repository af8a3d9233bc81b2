//! The sum of a batch's contributions to static gradients
//! (`autobatch run --grad-statics`) on several threads.
//!
//! The sum is `autobatch_kernels::adjoints::static_gradients`: each
//! static's gradient depends on its own contributions alone, so the statics
//! are shared among the threads (the costliest first, each to the thread
//! with the least work so far) and every gradient has the bits the sum on
//! one thread gives. A small sum runs on the calling thread: starting a
//! thread costs more than it saves.

use autobatch_ir::StaticId;
use autobatch_kernels::adjoints::{
    by_static, static_of, summing_cost, AdjointLog, AdjointRecord, Gradient,
};
use autobatch_types::Tensor;

/// Below this many multiply-adds, the sum runs on the calling thread.
const SHARED_FROM: usize = 1 << 20;

/// The gradient of each static of `wanted` from `log`, on at most
/// `threads` threads (see the module doc); the statics marked in `by_rows`
/// (whose contributions are all rows) kept to the rows touched.
pub fn static_gradients(
    statics: &[Tensor],
    wanted: &[StaticId],
    by_rows: &[bool],
    log: &AdjointLog,
    threads: usize,
) -> Vec<Gradient> {
    let threads = threads.clamp(1, wanted.len().max(1));
    let sum_one = |k: usize, part: Vec<AdjointRecord>| {
        Gradient::of(static_of(statics, wanted[k]), log, part, by_rows[k])
    };
    if threads == 1 || summing_cost(log.records()) < SHARED_FROM {
        return by_static(wanted, log)
            .into_iter()
            .enumerate()
            .map(|(k, part)| sum_one(k, part))
            .collect();
    }
    let parts = by_static(wanted, log);
    let costs: Vec<usize> = parts.iter().map(|p| summing_cost(p)).collect();
    let shares = shares(&costs, threads);
    let mut jobs: Vec<Vec<(usize, Vec<AdjointRecord>)>> = vec![Vec::new(); threads];
    for (k, part) in parts.into_iter().enumerate() {
        jobs[shares[k]].push((k, part));
    }
    let sum = |job: Vec<(usize, Vec<AdjointRecord>)>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            job.into_iter()
                .map(|(k, part)| (k, sum_one(k, part)))
                .collect::<Vec<_>>()
        }))
    };
    let mut jobs = jobs.into_iter();
    let here = jobs.next().expect("at least one thread");
    let done: Vec<_> = std::thread::scope(|scope| {
        let others: Vec<_> = jobs.map(|job| scope.spawn(move || sum(job))).collect();
        let mut done = vec![sum(here)];
        done.extend(
            others
                .into_iter()
                .map(|h| h.join().expect("the sum catches its panics")),
        );
        done
    });
    let mut gradients: Vec<Option<Gradient>> = vec![None; wanted.len()];
    for part in done {
        match part {
            Ok(sums) => sums.into_iter().for_each(|(k, g)| gradients[k] = Some(g)),
            // An internal error in a sum goes on as the caller's own.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    gradients
        .into_iter()
        .map(|g| g.expect("every static's gradient was summed"))
        .collect()
}

/// The thread of each static: the costliest first, each to the thread
/// with the least work so far (ties to the lowest thread).
fn shares(costs: &[usize], threads: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(costs[k]));
    let mut load = vec![0usize; threads];
    let mut share = vec![0; costs.len()];
    for k in order {
        let t = (0..threads).min_by_key(|&t| load[t]).expect("a thread");
        share[k] = t;
        load[t] += costs[k];
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;
    use autobatch_ir::{AdjointKind, StaticAdjoint};
    use autobatch_kernels::buffer::Values;
    use autobatch_types::Data;

    /// Several statics with outer-product contributions large enough to be
    /// shared: the gradients have the bits of the sum on one thread.
    #[test]
    fn shared_sums_have_the_bits_of_one_thread() {
        let (m, k) = (64usize, 48usize);
        let statics: Vec<Tensor> = (0..5)
            .map(|_| Tensor::new(vec![m, k], Data::F32(vec![0.0; m * k])))
            .collect();
        let mut log = AdjointLog::new();
        for r in 0..400u32 {
            let x = |i: usize| {
                (r as f32 * 0.37 + i as f32 * 1.3).sin() * 10f32.powi((r % 5) as i32 - 2)
            };
            let (u, v): (Vec<f32>, Vec<f32>) =
                ((0..m).map(x).collect(), (m..m + k).map(x).collect());
            let adjoint = StaticAdjoint {
                id: StaticId(r % 5),
                kind: AdjointKind::Outer,
            };
            log.push(r % 7, &adjoint, &[Values::F32(&u), Values::F32(&v)]);
        }
        let wanted: Vec<StaticId> = [3, 0, 4, 1, 2].map(StaticId).to_vec();
        assert!(summing_cost(log.records()) >= SHARED_FROM);
        let serial = autobatch_kernels::adjoints::static_gradients(&statics, &wanted, &log);
        for threads in [1, 2, 3, 8] {
            let shared: Vec<Tensor> =
                static_gradients(&statics, &wanted, &[false; 5], &log, threads)
                    .into_iter()
                    .map(Gradient::into_dense)
                    .collect();
            assert_eq!(shared, serial, "{threads} threads");
        }
    }

    #[test]
    fn the_costliest_static_goes_first_to_the_least_loaded_thread() {
        assert_eq!(shares(&[5, 100, 7, 90], 2), vec![1, 0, 1, 1]);
        assert_eq!(shares(&[1, 1, 1], 4), vec![0, 1, 2]);
    }
}
