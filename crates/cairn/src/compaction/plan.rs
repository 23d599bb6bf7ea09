//! A compaction plan: which files to merge and where the result goes.
//!
//! Invariants (checked by [`Plan::check`], which policies and planners assert in debug
//! builds):
//! 1. `inputs` is non-empty, and every input is live at `level` of the version the plan was
//!    made from; every `output_level_inputs` file is live in the output run.
//! 2. `level < output_level < level_count`, except for a *level rewrite*: `level ==
//!    output_level`, the inputs are every file of the level and the output is a new run
//!    (several runs of one level merged into one).
//! 3. `output_level_inputs` is exactly the set of output-run files overlapping the inputs'
//!    user-key range, so the merged output can replace them without overlapping what stays
//!    in that run. It is itself sorted and non-overlapping (a run, iterated as one). A plan
//!    whose output is a new run has none.
//! 4. The inputs taken from a level with several runs are its *oldest* runs (a suffix of its
//!    runs, whole or, for one run, part of the oldest), so what moves down is older than
//!    everything that stays: the runs' newest-first order (version invariant 3) survives.
//!
//! Thread-safety contract: a plain value; it holds `Arc`s of the files it names, which keeps
//! their metadata (not their version) alive.

use crate::version::{FileMeta, Version};
use std::collections::HashSet;
use std::sync::Arc;

/// True if no two of `files` share a user key (sorted by smallest key, each ends before the
/// next begins): together they are one sorted run.
fn inputs_disjoint(files: &[Arc<FileMeta>]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8])> = files
        .iter()
        .map(|file| (file.smallest_user_key(), file.largest_user_key()))
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|pair| match pair {
        [(_, end), (start, _)] => end < start,
        _ => true,
    })
}

/// Which run of the output level receives the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputRun {
    /// Merge into run `index` of the output level (0 = newest); its files overlapping the
    /// inputs are rewritten with them. If the level has no run yet the output becomes its
    /// first run.
    Merge(usize),
    /// Become a new run of the output level, newer than every run already there (its id is
    /// drawn when the job installs its edit).
    New,
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
    ///
    /// That is one input file with nothing under it, or several inputs whose key ranges are
    /// disjoint (they form one run) becoming a new run of a deeper level (lazy leveling
    /// moving its leveled level down as a whole).
    pub fn is_trivial_move(&self) -> bool {
        // A level rewrite exists to read its files again (one run of one file included).
        if !self.output_level_inputs.is_empty() || self.is_level_rewrite() {
            return false;
        }
        self.inputs.len() == 1
            || (self.output_run == OutputRun::New
                && self.output_level > self.level
                && inputs_disjoint(&self.inputs))
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

    /// True if the plan merges every run of one level into one new run of that level.
    pub fn is_level_rewrite(&self) -> bool {
        self.level == self.output_level
    }

    /// Checks the module invariants against `version`, the version the plan was made from.
    pub fn check(&self, version: &Version) -> Result<(), String> {
        let Some((lower, upper)) = self.input_range() else {
            return Err("a plan without inputs".into());
        };
        let rewrite_ok = self.is_level_rewrite()
            && self.output_run == OutputRun::New
            && self.inputs.len() == version.files(self.level).len();
        if (self.output_level <= self.level && !rewrite_ok)
            || self.output_level >= version.level_count()
        {
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
        self.check_oldest_runs(version)?;
        let expected: Vec<u64> = match self.output_run {
            OutputRun::New => Vec::new(),
            OutputRun::Merge(index) => version
                .level(self.output_level)
                .run_at(index)
                .overlapping_files(Some(lower), Some(upper))
                .iter()
                .map(|file| file.number)
                .collect(),
        };
        let actual: Vec<u64> = self.output_level_inputs.iter().map(|f| f.number).collect();
        if expected != actual {
            return Err(format!(
                "output-level inputs {actual:?}, but the output run overlaps {expected:?}"
            ));
        }
        Ok(())
    }

    /// Invariant 4: once a run of the input level gives an input, every older run is all
    /// inputs (level 0 is exempt: all of it is newer than level 1, and it is merged whole).
    fn check_oldest_runs(&self, version: &Version) -> Result<(), String> {
        if self.level == 0 {
            return Ok(());
        }
        let taken: HashSet<u64> = self.inputs.iter().map(|file| file.number).collect();
        let mut seen_input = false;
        for (index, run) in version.runs(self.level).enumerate() {
            let inputs = run
                .files()
                .iter()
                .filter(|file| taken.contains(&file.number))
                .count();
            if seen_input && inputs != run.files().len() {
                return Err(format!(
                    "run {index} of level {} is older than an input run but not all input",
                    self.level
                ));
            }
            seen_input |= inputs > 0;
        }
        Ok(())
    }
}
