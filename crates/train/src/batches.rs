//! The order of a data set's members in each epoch: a permutation drawn
//! from the seed and the epoch alone (ChaCha8, stream = epoch), cut into
//! mini-batches of the chosen size, the last one smaller when the size does
//! not divide the data set (PyTorch's `DataLoader` with `shuffle=True`,
//! `drop_last=False`). Since the order depends on nothing else, a run
//! resumed at any mini-batch sees the members the uninterrupted run saw.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The members of the data set in the order of `epoch` (from 0).
pub fn epoch_order(members: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(epoch);
    let mut order: Vec<usize> = (0..members).collect();
    order.shuffle(&mut rng);
    order
}

/// The number of mini-batches of `batch_size` in an epoch of `members`.
pub fn batches_per_epoch(members: usize, batch_size: usize) -> usize {
    members.div_ceil(batch_size.max(1))
}
