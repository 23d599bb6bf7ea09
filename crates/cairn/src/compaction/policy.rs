//! The policy interface: what a compaction policy sees and what it decides.
//!
//! A [`CompactionPolicy`] is a pure decision: given an immutable [`Version`] and the
//! [`CompactionState`] (shape options, round-robin pointers, what is being compacted right
//! now), it returns a [`Choice`]. It reads nothing else and changes nothing, so every policy is
//! tested on hand-built versions (see `testdata/` and the picker harness).
//!
//! Invariants (every policy, checked by `Plan::check` in debug builds):
//! 1. A chosen plan's inputs are live in the version it was chosen from, at the levels the
//!    plan names, and its output-level inputs are the files of the output run that overlap
//!    the inputs' key range.
//! 2. A chosen plan touches no busy level and no file already being compacted.
//!
//! Thread-safety contract: policies are `Send + Sync` and stateless per call (`&self`), so a
//! database may hold one in a `Box<dyn CompactionPolicy>` and call it from any thread.

use super::{Plan, ShapeOptions};
use crate::version::Version;
use std::collections::{BTreeSet, HashSet};

/// The policy's decision.
#[derive(Debug, Clone)]
pub enum Choice {
    /// The tree is in shape (or every compaction it needs is blocked by busy work).
    Nothing,
    /// Run this compaction.
    Compact(Plan),
}

/// Everything besides the version that a decision depends on.
#[derive(Debug, Clone)]
pub struct CompactionState {
    /// The shape the tree is kept in.
    pub shape: ShapeOptions,
    /// Per level, where the next compaction of that level starts (an internal key; round
    /// robin). Missing entries mean "from the start".
    pub compact_pointers: Vec<Option<Vec<u8>>>,
    /// Levels a running compaction reads or writes: no new plan may touch them.
    pub busy_levels: BTreeSet<usize>,
    /// Files a running compaction reads: no new plan may take them.
    pub compacting_files: HashSet<u64>,
}

impl CompactionState {
    /// A state with nothing running and no pointers.
    pub fn new(shape: ShapeOptions) -> Self {
        CompactionState {
            shape,
            compact_pointers: Vec::new(),
            busy_levels: BTreeSet::new(),
            compacting_files: HashSet::new(),
        }
    }

    /// The compact pointer of `level`, if any.
    pub fn pointer(&self, level: usize) -> Option<&[u8]> {
        self.compact_pointers.get(level).and_then(Option::as_deref)
    }

    /// True if a plan touching levels `level` and `output_level` would collide with running
    /// work.
    pub fn levels_busy(&self, level: usize, output_level: usize) -> bool {
        self.busy_levels.contains(&level) || self.busy_levels.contains(&output_level)
    }

    /// True if any file of `plan` is already being compacted.
    pub fn plan_collides(&self, plan: &Plan) -> bool {
        plan.all_inputs()
            .any(|file| self.compacting_files.contains(&file.number))
    }
}

/// A compaction policy: leveling, tiering or lazy leveling (`CompactionStyle`).
pub trait CompactionPolicy: Send + Sync + std::fmt::Debug {
    /// Chooses the next compaction. Pure: depends only on its arguments.
    fn choose(&self, version: &Version, state: &CompactionState) -> Choice;

    /// How full each level is by this policy's measure (>= 1: it wants compaction). Pure.
    fn scores(&self, version: &Version, shape: &ShapeOptions) -> Vec<f64> {
        super::level_scores(version, shape)
    }
}
