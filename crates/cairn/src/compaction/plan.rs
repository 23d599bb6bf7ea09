//! A compaction plan: which files to merge and where the result goes.
//!
//! Invariants (checked by [`Plan::check`], which policies and planners assert in debug
//! builds):
//! 1. `inputs` is non-empty, and every input is live at `level` of the version the plan was
//!    made from; every `output_level_inputs` file is live in the output run.
//! 2. `level < output_level < level_count`.
//! 3. `output_level_inputs` is exactly the set of output-run files overlapping the inputs'
//!    user-key range, so the merged output can replace them without overlapping what stays
//!    in that run. It is itself sorted and non-overlapping (a run, iterated as one).
//!
//! Thread-safety contract: a plain value; it holds `Arc`s of the files it names, which keeps
//! their metadata (not their version) alive.

use crate::version::{FileMeta, Version};
use std::collections::HashSet;
use std::sync::Arc;

/// Which run of the output level receives the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputRun {
    /// Merge into run `index` of the output level (0 = newest); its files overlapping the
    /// inputs are rewritten with them. If the level has no run yet the output becomes its
    /// first run.
    Merge(usize),
}

/// What to compact.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The level being compacted.
    pub level: usize,
    /// Where the output goes.
    pub output_level: usize,
    /// Which run of `output_level` the output joins.
    pub output_run: OutputRun,
    /// Chosen files of `level`.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Files of the output run overlapping the inputs (rewritten with them).
    pub output_level_inputs: Vec<Arc<FileMeta>>,
    /// Why (for stats and logs).
    pub reason: String,
}

impl Plan {
    /// Every input file.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.output_level_inputs.iter())
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|file| file.size_bytes).sum()
    }

    /// True if the plan can be done by moving a file down without rewriting it.
    pub fn is_trivial_move(&self) -> bool {
        self.inputs.len() == 1 && self.output_level_inputs.is_empty()
    }

    /// The largest internal key among the level's inputs (the next compact pointer).
    pub fn largest_input_key(&self) -> Option<&[u8]> {
        self.inputs
            .iter()
            .map(|file| file.largest.as_slice())
            .max_by(|a, b| crate::key::compare_internal_keys(a, b))
    }

    /// The user-key range `[smallest, largest]` of the level's inputs.
    pub fn input_range(&self) -> Option<(&[u8], &[u8])> {
        let lower = self
            .inputs
            .iter()
            .map(|file| file.smallest_user_key())
            .min()?;
        let upper = self
            .inputs
            .iter()
            .map(|file| file.largest_user_key())
            .max()?;
        Some((lower, upper))
    }

    /// Checks the module invariants against `version`, the version the plan was made from.
    pub fn check(&self, version: &Version) -> Result<(), String> {
        let Some((lower, upper)) = self.input_range() else {
            return Err("a plan without inputs".into());
        };
        if self.output_level <= self.level || self.output_level >= version.level_count() {
            return Err(format!(
                "output level {} for input level {} of {}",
                self.output_level,
                self.level,
                version.level_count()
            ));
        }
        let live: HashSet<u64> = version.files(self.level).iter().map(|f| f.number).collect();
        if let Some(file) = self.inputs.iter().find(|file| !live.contains(&file.number)) {
            return Err(format!(
                "input {} is not live at level {}",
                file.number, self.level
            ));
        }
        let OutputRun::Merge(index) = self.output_run;
        let run = version.level(self.output_level).run_at(index);
        let expected: Vec<u64> = run
            .overlapping_files(Some(lower), Some(upper))
            .iter()
            .map(|file| file.number)
            .collect();
        let actual: Vec<u64> = self.output_level_inputs.iter().map(|f| f.number).collect();
        if expected != actual {
            return Err(format!(
                "output-level inputs {actual:?}, but the output run overlaps {expected:?}"
            ));
        }
        Ok(())
    }
}
