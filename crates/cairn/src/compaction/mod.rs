//! Compaction: policies (pure decisions) and the job that executes a decision.
//!
//! - `policy`: the [`CompactionPolicy`] trait, the [`CompactionState`] a decision reads
//!   besides the version, and the [`Choice`] it returns.
//! - `leveled`: [`Leveled`], LevelDB-style leveling (the default policy).
//! - `tiered`: [`Tiered`], tiering and lazy leveling (several runs per level).
//! - `plan`: [`Plan`], the files to merge with an explicit output level and output run.
//! - `levels`: [`table_options_for`], each level's Bloom bits and block size (Monkey).
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
//! Sync`, called with `&self`); a job owns its inputs and outputs. With
//! `Options::compaction_threads > 1` several jobs run at once; `CompactionState` carries the
//! busy levels and files so that a policy only ever picks work disjoint from them.

mod filter;
mod leveled;
mod levels;
mod output;
#[cfg(test)]
mod picker_tests;
mod plan;
mod policy;
#[cfg(test)]
mod tests;
mod tiered;

pub use filter::{CompactionFilter, FilterDecision, VersionFilter};
pub use leveled::{level_scores, rewrite_level, rewrite_level_fully, Leveled};
pub use levels::table_options_for;
pub use output::{write_tables, OutputSettings};
pub use plan::{OutputRun, Plan};
pub use policy::{Choice, CompactionPolicy, CompactionState};
pub use tiered::Tiered;

use crate::version::{FileMeta, Version};
pub use crate::CompactionStyle;
use std::sync::Arc;

impl CompactionStyle {
    /// The policy that keeps this shape.
    pub(crate) fn policy(self) -> Box<dyn CompactionPolicy> {
        match self {
            CompactionStyle::Leveling => Box::new(Leveled),
            CompactionStyle::Tiering => Box::new(Tiered { lazy: false }),
            CompactionStyle::LazyLeveling => Box::new(Tiered { lazy: true }),
        }
    }
}

/// The options that shape the tree.
#[derive(Debug, Clone)]
pub struct ShapeOptions {
    /// Level-0 file count that triggers a compaction (the level-0 run limit).
    pub level0_compaction_trigger: usize,
    /// Maximum bytes of level 1.
    pub level1_size_bytes_max: u64,
    /// Growth factor between levels (fanout T).
    pub level_size_ratio: u64,
    /// Runs a tiered level may hold before it is merged down (D).
    pub runs_per_level: usize,
    /// Share of a full tiered level's runs merged down at a time (m, in (0, 1]).
    pub merge_fraction: f64,
}

impl ShapeOptions {
    /// Leveling's shape with these limits and tiering's defaults for the rest.
    #[cfg(test)]
    pub fn leveled(trigger: usize, level1: u64, ratio: u64) -> Self {
        ShapeOptions {
            level0_compaction_trigger: trigger,
            level1_size_bytes_max: level1,
            level_size_ratio: ratio,
            runs_per_level: 4,
            merge_fraction: 1.0,
        }
    }
}

impl From<&crate::Options> for ShapeOptions {
    fn from(options: &crate::Options) -> Self {
        ShapeOptions {
            level0_compaction_trigger: options.level0_compaction_trigger,
            level1_size_bytes_max: options.level1_size_bytes_max,
            level_size_ratio: options.level_size_ratio,
            runs_per_level: options.runs_per_level,
            merge_fraction: options.merge_fraction,
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

/// A plan for `compact_range`: the files of `level` overlapping `[lower, upper]` (the whole
/// level if it holds several runs).
pub fn plan_for_range(
    version: &Version,
    level: usize,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Option<Plan> {
    leveled::plan_for_range(version, level, lower, upper)
}
