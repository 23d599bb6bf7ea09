//! Tiering and lazy leveling: several sorted runs per level, merged down a level at a time.
//!
//! A level is *full* when it holds `runs_per_level` (D) runs or more, or more bytes than its
//! leveled limit (`level1_size_bytes_max * level_size_ratio^(i-1)`); level 0 is full at
//! `level0_compaction_trigger` files (each a run). A full level merges its oldest
//! `ceil(merge_fraction * runs)` runs (m; level 0: all of it, as leveling does) into one new
//! run of the next level, without reading that level: each entry is written once per level,
//! which is why tiering's write amplification is about `levels` where leveling's is about
//! `levels * T / 2`. Taking the oldest runs keeps the newest-first order of runs (version
//! invariant 3): what moves down is older than every run left behind and newer than every run
//! already below.
//!
//! Tiering (`lazy == false`) keeps the last level tiered too: when it is full it is rewritten
//! into one run. Lazy leveling (`lazy == true`, Dostoevsky) levels the *deepest level that
//! holds data* (at least level 1; the configured `level_count` is only a ceiling, so a tree
//! that never reaches the last configured level still gets a leveled largest level). Runs
//! merged into it from above merge into its one run with that run's overlapping files, as
//! leveling does, so the largest level (most of the data) stays a single run; when it is
//! full by bytes (its leveled limit) and a deeper level exists it moves down as a whole,
//! becoming the new, deeper leveled level (a move: its files are disjoint and the level below
//! is empty, so nothing is rewritten); when it holds several runs (after a switch from
//! tiering, or because the deepest level just changed) it is rewritten into one. Scores: a
//! level's fullness is the larger of runs / D and bytes / limit; the highest score >= 1 whose
//! levels are not busy wins, ties to the deeper level. A single input file with nothing to
//! merge under it is moved, not rewritten.
//!
//! Invariants: those of every policy (see `policy`), plus
//! 1. a plan from a level above the leveled level takes whole runs, the oldest ones, and its
//!    output is a new run of the next level — or, under lazy leveling into the leveled
//!    level, run 0 of it;
//! 2. a plan at the leveled level is a level rewrite, chosen only when the level has 2+ runs
//!    (tiering: D or more), or, under lazy leveling with one run over its byte limit, the
//!    whole level as a new run of the empty level below (a trivial move);
//! 3. the leveled level is the last configured level under tiering, and under lazy leveling
//!    the deepest level >= 1 holding data (level 1 when only level 0 does), never above it:
//!    every level below it is empty.
//!
//! Thread-safety contract: `Tiered` is a plain `Copy` value; `choose` is pure.

use super::leveled::{level_size_bytes_max, ranked_candidates, rewrite_level};
use super::plan::{OutputRun, Plan};
use super::policy::{Choice, CompactionPolicy, CompactionState};
use super::ShapeOptions;
use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// The tiered policies: tiering, or lazy leveling when `lazy`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tiered {
    /// Keep the last level leveled (one run).
    pub lazy: bool,
}

impl CompactionPolicy for Tiered {
    fn choose(&self, version: &Version, state: &CompactionState) -> Choice {
        let candidates = ranked_candidates(&self.scores(version, &state.shape));
        let last = self.leveled_level(version);
        for (level, score) in candidates {
            let plan = if level == last {
                self.at_last_level(version, level)
            } else {
                self.merge_down(version, &state.shape, level, last)
            };
            let Some(mut plan) = plan else { continue };
            if state.levels_busy(plan.level, plan.output_level) || state.plan_collides(&plan) {
                continue;
            }
            plan.reason = format!("level {level} score {score:.2}");
            // Postconditions: policy invariants 1 and 2.
            debug_assert_eq!(plan.check(version), Ok(()));
            return Choice::Compact(plan);
        }
        Choice::Nothing
    }

    fn scores(&self, version: &Version, shape: &ShapeOptions) -> Vec<f64> {
        let last = self.leveled_level(version);
        let runs_per_level = shape.runs_per_level.max(1) as f64;
        (0..version.level_count())
            .map(|level| {
                let runs = version.level(level).run_count();
                let bytes = || {
                    version.level_bytes(level) as f64 / level_size_bytes_max(shape, level) as f64
                };
                if level == 0 {
                    version.files(0).len() as f64 / shape.level0_compaction_trigger.max(1) as f64
                } else if level == last {
                    // Lazy leveling's leveled level holds one run, and moves down when full
                    // by bytes if a deeper level exists; tiering's last level holds up to D.
                    let limit = if self.lazy { 2.0 } else { runs_per_level };
                    let several = if runs >= 2 { runs as f64 / limit } else { 0.0 };
                    let deeper = level + 1 < version.level_count();
                    let full = if self.lazy && deeper { bytes() } else { 0.0 };
                    several.max(full)
                } else {
                    bytes().max(runs as f64 / runs_per_level)
                }
            })
            .collect()
    }
}

impl Tiered {
    /// The level kept as one run: under lazy leveling the deepest level >= 1 that holds data
    /// (level 1 if none does); under tiering the last configured level (invariant 3).
    fn leveled_level(self, version: &Version) -> usize {
        let last = version.level_count().saturating_sub(1);
        if !self.lazy {
            return last;
        }
        (1..=last)
            .rev()
            .find(|&level| !version.files(level).is_empty())
            .unwrap_or(1)
            .min(last)
    }

    /// The plan for the leveled (or tiering's last) level: a rewrite of its runs into one, or,
    /// under lazy leveling with one run full by bytes, a move of the whole level into the
    /// empty level below it (invariant 2).
    fn at_last_level(self, version: &Version, level: usize) -> Option<Plan> {
        if !self.lazy || version.level(level).run_count() >= 2 {
            return rewrite_level(version, level);
        }
        let output_level = level + 1;
        if output_level >= version.level_count() {
            return None;
        }
        // Precondition: `level` is the deepest level holding data, so the one below is empty.
        debug_assert!(version.files(output_level).is_empty());
        let inputs = version.files(level).to_vec();
        (!inputs.is_empty()).then(|| Plan {
            level,
            output_level,
            output_run: OutputRun::New,
            inputs,
            output_level_inputs: Vec::new(),
            reason: String::new(),
        })
    }

    /// The plan merging the oldest runs of `level` (above `last`, the leveled level) into the
    /// next level.
    fn merge_down(
        self,
        version: &Version,
        shape: &ShapeOptions,
        level: usize,
        last: usize,
    ) -> Option<Plan> {
        let runs: Vec<_> = version.runs(level).collect();
        let take = if level == 0 {
            runs.len()
        } else {
            merged_run_count(runs.len(), shape.merge_fraction)
        };
        let inputs: Vec<Arc<FileMeta>> = runs
            .iter()
            .skip(runs.len().saturating_sub(take))
            .flat_map(|run| run.files().iter().cloned())
            .collect();
        if inputs.is_empty() {
            return None;
        }
        let output_level = level + 1;
        let into_last = output_level == last;
        let (output_run, output_level_inputs) = if self.lazy && into_last {
            let lower = inputs.iter().map(|file| file.smallest_user_key()).min()?;
            let upper = inputs.iter().map(|file| file.largest_user_key()).max()?;
            let overlapping = version
                .level(output_level)
                .run_at(0)
                .overlapping_files(Some(lower), Some(upper))
                .to_vec();
            (OutputRun::Merge(0), overlapping)
        } else {
            (OutputRun::New, Vec::new())
        };
        Some(Plan {
            level,
            output_level,
            output_run,
            inputs,
            output_level_inputs,
            reason: String::new(),
        })
    }
}

/// How many of a full level's `runs` a merge takes: `ceil(fraction * runs)`, at least 1.
pub fn merged_run_count(runs: usize, fraction: f64) -> usize {
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        1.0
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // within [0, runs]
    let count = (fraction * runs as f64).ceil() as usize;
    count.clamp(1, runs.max(1))
}
