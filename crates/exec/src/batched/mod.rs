//! What the two batching executors share: the block planner ([`plan`]),
//! the step runner ([`step`]), lanes and the joins of forks ([`lanes`]),
//! what happens at a fork ([`instances`]), the loop pieces around them
//! ([`skeleton`]), column storage, the primitive engine, step temporaries,
//! fused chains ([`chains`]), indexed products and size classes.

pub mod chains;
pub mod classes;
pub mod engine;
pub mod indexed;
pub mod instances;
pub mod lanes;
pub mod plan;
pub mod skeleton;
pub mod step;
pub mod storage;
pub mod temps;

use autobatch_types::TensorType;

use crate::memory::concrete_shape;
use storage::{Column, Slot};

/// Which waiting block the program-counter strategy runs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BlockChoice {
    /// The smallest block index any member waits at.
    #[default]
    SmallestIndex,
    /// The block the most members wait at (ties: the smallest index).
    MostMembers,
}

impl BlockChoice {
    pub const ALL: [BlockChoice; 2] = [BlockChoice::SmallestIndex, BlockChoice::MostMembers];

    pub fn name(self) -> &'static str {
        match self {
            BlockChoice::SmallestIndex => "smallest-index",
            BlockChoice::MostMembers => "most-members",
        }
    }
}

impl std::fmt::Display for BlockChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BlockChoice {
    type Err = String;
    fn from_str(name: &str) -> Result<BlockChoice, String> {
        BlockChoice::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| {
                format!("unknown block choice `{name}` (expected smallest-index or most-members)")
            })
    }
}

/// A per-member slot of `rows` rows for a value of type `ty`.
pub fn column_slot(ty: &TensorType, symbols: &[u64], rows: usize) -> Slot {
    Slot::Column(Column::zeros(ty.elem, concrete_shape(ty, symbols), rows))
}
