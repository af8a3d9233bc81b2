//! The transport seam: a [`Communicator`] moves bytes between the ranks of
//! a job. An implementation gives its rank, the job's size, and sending
//! and receiving between two ranks (in order between any two); the
//! collectives the sharded runs use are built on those here, once, so that
//! every transport (MPI in the `autobatch` command, [`InProcess`] threads in
//! tests, [`Single`] for one process) runs the same protocol.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

use super::wire::{Reader, Writer};

/// The ranks of a job, and bytes between them. Every rank calls the
/// collectives (the provided methods) in the same order; rank 0 is the root.
pub trait Communicator {
    /// This process's rank, from 0 to `size() - 1`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Sends `bytes` to rank `to` (never this rank).
    fn send(&self, to: usize, bytes: &[u8]);
    /// The next bytes rank `from` sent to this rank (never this rank).
    fn receive(&self, from: usize) -> Vec<u8>;

    /// Whether this rank is the root (rank 0), which reads the inputs and
    /// writes the outputs.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// Rank 0's `bytes` (`None` on the other ranks), on every rank.
    fn broadcast(&self, bytes: Option<Vec<u8>>) -> Vec<u8> {
        if self.is_root() {
            let bytes = bytes.unwrap_or_default();
            (1..self.size()).for_each(|to| self.send(to, &bytes));
            bytes
        } else {
            self.receive(0)
        }
    }

    /// Every rank's `bytes`, in rank order, on rank 0 (`None` elsewhere).
    fn gather(&self, bytes: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        if self.is_root() {
            let mut all = Vec::with_capacity(self.size());
            all.push(bytes);
            all.extend((1..self.size()).map(|from| self.receive(from)));
            Some(all)
        } else {
            self.send(0, &bytes);
            None
        }
    }

    /// Every rank's `bytes`, in rank order, on every rank.
    fn all_gather(&self, bytes: Vec<u8>) -> Vec<Vec<u8>> {
        let gathered = self.gather(bytes).map(|all| {
            let mut w = Writer::new();
            w.usize(all.len());
            all.iter().for_each(|b| w.bytes(b));
            w.finish()
        });
        let joined = self.broadcast(gathered);
        let mut r = Reader::new(&joined);
        let n = r.usize().unwrap_or(0);
        (0..n)
            .map(|_| r.bytes().map(<[u8]>::to_vec).unwrap_or_default())
            .collect()
    }

    /// Rank 0 makes each rank's part with `part(rank)` (one at a time, so
    /// that it holds one part at once); every rank gets its own. `part` is
    /// called on rank 0 only.
    fn scatter(&self, part: &mut dyn FnMut(usize) -> Vec<u8>) -> Vec<u8> {
        if self.is_root() {
            for to in 1..self.size() {
                let bytes = part(to);
                self.send(to, &bytes);
            }
            part(0)
        } else {
            self.receive(0)
        }
    }
}

/// One process: rank 0 of 1. Its collectives never send anything.
#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

impl Communicator for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn send(&self, to: usize, _bytes: &[u8]) {
        unreachable!("internal error: a job of one rank sent to rank {to}")
    }
    fn receive(&self, from: usize) -> Vec<u8> {
        unreachable!("internal error: a job of one rank received from rank {from}")
    }
}

/// One rank of a job whose ranks are threads of this process, connected by
/// channels: the sharded runs tested without MPI.
pub struct InProcess {
    rank: usize,
    /// `to[r]` sends to rank `r`.
    to: Vec<Sender<Vec<u8>>>,
    /// `from[r]` receives what rank `r` sent here.
    from: Vec<Mutex<Receiver<Vec<u8>>>>,
}

impl InProcess {
    /// The `size` ranks of a job, to be moved each to its own thread.
    pub fn job(size: usize) -> Vec<InProcess> {
        // channels[from][to]
        let mut senders: Vec<Vec<Option<Sender<Vec<u8>>>>> = Vec::new();
        let mut receivers: Vec<Vec<Option<Receiver<Vec<u8>>>>> = (0..size)
            .map(|_| (0..size).map(|_| None).collect())
            .collect();
        for from in 0..size {
            let mut row = Vec::new();
            for receiving in receivers.iter_mut() {
                let (s, r) = channel();
                row.push(Some(s));
                receiving[from] = Some(r);
            }
            senders.push(row);
        }
        let mut ranks = Vec::with_capacity(size);
        for (rank, (row, inbox)) in senders.into_iter().zip(receivers).enumerate() {
            ranks.push(InProcess {
                rank,
                to: row.into_iter().map(|s| s.expect("every channel")).collect(),
                from: inbox
                    .into_iter()
                    .map(|r| Mutex::new(r.expect("every channel")))
                    .collect(),
            });
        }
        ranks
    }

    /// Runs `work` on every rank of a job of `size`, each on its own
    /// thread, and gives their results in rank order.
    pub fn run<T: Send>(size: usize, work: impl Fn(&InProcess) -> T + Sync) -> Vec<T> {
        let ranks = InProcess::job(size);
        std::thread::scope(|scope| {
            let handles: Vec<_> = ranks
                .iter()
                .map(|comm| {
                    let work = &work;
                    scope.spawn(move || work(comm))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }
}

impl Communicator for InProcess {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.to.len()
    }
    fn send(&self, to: usize, bytes: &[u8]) {
        // The receiving rank lives as long as the job.
        let _ = self.to[to].send(bytes.to_vec());
    }
    fn receive(&self, from: usize) -> Vec<u8> {
        let inbox = self.from[from].lock().unwrap_or_else(|p| p.into_inner());
        inbox.recv().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_in_rank_order() {
        for size in 1..=4 {
            let out = InProcess::run(size, |comm| {
                let rank = comm.rank();
                let b = comm.broadcast(comm.is_root().then(|| vec![7, 8]));
                let all = comm.all_gather(vec![rank as u8; rank]);
                let gathered = comm.gather(vec![rank as u8 * 2]);
                let part = comm.scatter(&mut |r| vec![r as u8 + 100]);
                (b, all, gathered, part)
            });
            for (rank, (b, all, gathered, part)) in out.into_iter().enumerate() {
                assert_eq!(b, vec![7, 8]);
                let expected: Vec<Vec<u8>> = (0..size).map(|r| vec![r as u8; r]).collect();
                assert_eq!(all, expected);
                if rank == 0 {
                    let g: Vec<Vec<u8>> = (0..size).map(|r| vec![r as u8 * 2]).collect();
                    assert_eq!(gathered, Some(g));
                } else {
                    assert_eq!(gathered, None);
                }
                assert_eq!(part, vec![rank as u8 + 100]);
            }
        }
    }

    #[test]
    fn a_single_process_is_its_own_root() {
        assert!(Single.is_root());
        assert_eq!(Single.all_gather(vec![1]), vec![vec![1]]);
        assert_eq!(Single.gather(vec![2]), Some(vec![vec![2]]));
        assert_eq!(Single.broadcast(Some(vec![3])), vec![3]);
        assert_eq!(Single.scatter(&mut |r| vec![r as u8]), vec![0]);
    }
}
