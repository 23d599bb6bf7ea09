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
//! into one run. Lazy leveling (`lazy == true`, Dostoevsky) merges into the last level as
//! leveling does, into its one run with that run's overlapping files, so the largest level
//! (most of the data) stays a single run; a last level holding several runs (after a switch
//! from tiering) is rewritten into one. Scores: a level's fullness is the larger of runs / D
//! and bytes / limit; the highest score >= 1 whose levels are not busy wins, ties to the deeper
//! level. A single input file with nothing to merge under it is moved, not rewritten.
//!
//! Invariants: those of every policy (see `policy`), plus
//! 1. a plan from a level above the last takes whole runs, the oldest ones, and its output is a
//!    new run of the next level — or, under lazy leveling into the last level, run 0 of it;
//! 2. a plan at the last level is a level rewrite, chosen only when the level has 2+ runs
//!    (tiering: D or more).
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
        let last = version.level_count().saturating_sub(1);
        for (level, score) in candidates {
            let output_level = if level == last { level } else { level + 1 };
            if state.levels_busy(level, output_level) {
                continue;
            }
            let plan = if level == last {
                rewrite_level(version, level)
            } else {
                self.merge_down(version, &state.shape, level)
            };
            if let Some(mut plan) = plan.filter(|plan| !state.plan_collides(plan)) {
                plan.reason = format!("level {level} score {score:.2}");
                // Postconditions: policy invariants 1 and 2.
                debug_assert_eq!(plan.check(version), Ok(()));
                return Choice::Compact(plan);
            }
        }
        Choice::Nothing
    }

    fn scores(&self, version: &Version, shape: &ShapeOptions) -> Vec<f64> {
        let last = version.level_count().saturating_sub(1);
        let runs_per_level = shape.runs_per_level.max(1) as f64;
        (0..version.level_count())
            .map(|level| {
                let runs = version.level(level).run_count();
                if level == 0 {
                    version.files(0).len() as f64 / shape.level0_compaction_trigger.max(1) as f64
                } else if level == last {
                    // Lazy leveling's last level holds one run; tiering's up to D.
                    let limit = if self.lazy { 2.0 } else { runs_per_level };
                    if runs >= 2 {
                        runs as f64 / limit
                    } else {
                        0.0
                    }
                } else {
                    let bytes = version.level_bytes(level) as f64
                        / level_size_bytes_max(shape, level) as f64;
                    bytes.max(runs as f64 / runs_per_level)
                }
            })
            .collect()
    }
}

impl Tiered {
    /// The plan merging the oldest runs of `level` (not the last) into the next level.
    fn merge_down(self, version: &Version, shape: &ShapeOptions, level: usize) -> Option<Plan> {
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
        let into_last = output_level + 1 == version.level_count();
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
