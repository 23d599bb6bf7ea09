//! Compaction: policies (pure decisions) and the job that executes a decision.
//!
//! - `policy`: the [`CompactionPolicy`] trait, the [`CompactionState`] a decision reads
//!   besides the version, and the [`Choice`] it returns.
//! - `leveled`: [`Leveled`], LevelDB-style leveling (the policy in use).
//! - `plan`: [`Plan`], the files to merge with an explicit output level and output run.
//! - `filter`: [`VersionFilter`], which versions a job keeps (snapshot stripes, tombstones),
//!   and the user-facing [`CompactionFilter`] hook.
//! - `output`: [`write_tables`], which writes what the filter keeps into `SSTables`.
//!
//! The free functions [`choose`], [`plan_for_inputs`] and [`plan_for_range`] keep the
//! database's call sites working; they delegate to [`Leveled`].
//!
//! Invariants:
//! 1. Policies are pure: a choice depends only on the version and the state passed in.
//! 2. A plan's inputs are live in the version it was chosen from, and its output-level inputs
//!    are exactly the output run's files overlapping the inputs (`Plan::check`).
//! 3. A job's outputs are sorted, non-overlapping and within the inputs' key range, and keep
//!    at most one version per snapshot stripe of each key (`output`, `filter`).
//!
//! Thread-safety contract: policies are pure decisions over an immutable `Version` (`Send +
//! Sync`, called with `&self`); a job owns its inputs and outputs. The database runs one
//! compaction job at a time (background thread or `compact_range`) today; `CompactionState`
//! already carries busy levels and files so that several may run later.

mod filter;
mod leveled;
mod output;
#[cfg(test)]
mod picker_tests;
mod plan;
mod policy;
#[cfg(test)]
mod tests;

pub use filter::{CompactionFilter, FilterDecision, VersionFilter};
pub use leveled::{level_scores, Leveled};
pub use output::{write_tables, OutputSettings};
pub use plan::Plan;
pub use policy::{Choice, CompactionPolicy, CompactionState};

use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// The options that shape the tree.
#[derive(Debug, Clone)]
pub struct ShapeOptions {
    /// Level-0 file count that triggers a compaction.
    pub level0_compaction_trigger: usize,
    /// Maximum bytes of level 1.
    pub level1_size_bytes_max: u64,
    /// Growth factor between levels.
    pub level_size_ratio: u64,
}

impl From<&crate::Options> for ShapeOptions {
    fn from(options: &crate::Options) -> Self {
        ShapeOptions {
            level0_compaction_trigger: options.level0_compaction_trigger,
            level1_size_bytes_max: options.level1_size_bytes_max,
            level_size_ratio: options.level_size_ratio,
        }
    }
}

#[cfg(test)]
/// Chooses the next compaction with [`Leveled`], nothing running (pure).
pub fn choose(
    version: &Version,
    shape: &ShapeOptions,
    compact_pointers: &[Option<Vec<u8>>],
) -> Choice {
    let mut state = CompactionState::new(shape.clone());
    state.compact_pointers = compact_pointers.to_vec();
    Leveled.choose(version, &state)
}

/// Builds a plan compacting `inputs` of `level` into `level + 1` (see [`Leveled`]).
pub fn plan_for_inputs(
    version: &Version,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
) -> Option<Plan> {
    leveled::plan_for_inputs(version, level, inputs)
}

/// A plan for `compact_range`: the files of `level` overlapping `[lower, upper]`.
pub fn plan_for_range(
    version: &Version,
    level: usize,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Option<Plan> {
    leveled::plan_for_range(version, level, lower, upper)
}
