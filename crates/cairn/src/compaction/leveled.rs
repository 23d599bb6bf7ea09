//! Leveling as in `LevelDB`: one run per level >= 1, each `level_size_ratio` times the last.
//!
//! Level 0 is scored by file count against `level0_compaction_trigger`, level `i >= 1` by bytes
//! against `level1_size_bytes_max * level_size_ratio^(i-1)`; the last level has no limit. The
//! highest score >= 1 whose levels are not busy wins (ties go to the deeper level). A level-0
//! compaction takes every level-0 file (they overlap, and taking only some could put an older
//! version above a newer one); a deeper one takes the first file of the level's oldest run
//! after the level's round-robin compact pointer that is not being compacted. The output goes
//! into the newest run of the next level, together with that run's files overlapping the
//! inputs. A single input with nothing under it is moved, not rewritten.
//!
//! Convergence after a switch from a tiered style: a level >= 1 holding several runs scores
//! at least 1, so its oldest run drains into the next level file by file; the last level, which
//! has nowhere to drain to, is rewritten into one run (a level rewrite, see `plan`).
//!
//! Invariants: those of every policy (see `policy`), plus
//! 1. plans go from `level` to `level + 1` and into run 0 of it, or rewrite the last level;
//! 2. with one run per level, no busy level and no file being compacted, the decision is the
//!    one the leveled picker has always made (the picker testdata pins it).
//!
//! Thread-safety contract: `Leveled` is a unit struct; `choose` is pure.

use super::plan::{OutputRun, Plan};
use super::policy::{Choice, CompactionPolicy, CompactionState};
use super::ShapeOptions;
use crate::key::compare_internal_keys;
use crate::version::{FileMeta, Version};
use std::cmp::Ordering;
use std::sync::Arc;

/// The leveled compaction policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Leveled;

impl CompactionPolicy for Leveled {
    fn choose(&self, version: &Version, state: &CompactionState) -> Choice {
        let candidates = ranked_candidates(&level_scores(version, &state.shape));
        let last = version.level_count().saturating_sub(1);
        for (level, score) in candidates {
            let output_level = if level == last { level } else { level + 1 };
            if state.levels_busy(level, output_level) {
                continue;
            }
            let plan = if level == last {
                rewrite_level(version, level).filter(|plan| !state.plan_collides(plan))
            } else {
                self.pick_level(version, state, level)
            };
            if let Some(mut plan) = plan {
                plan.reason = format!("level {level} score {score:.2}");
                // Postconditions: policy invariants 1 and 2.
                debug_assert_eq!(plan.check(version), Ok(()));
                debug_assert!(!state.plan_collides(&plan));
                return Choice::Compact(plan);
            }
        }
        Choice::Nothing
    }
}

impl Leveled {
    /// The plan for `level`, or None if every candidate collides with running work.
    fn pick_level(self, version: &Version, state: &CompactionState, level: usize) -> Option<Plan> {
        if level == 0 {
            let plan = plan_for_inputs(version, 0, version.files(0).to_vec())?;
            return (!state.plan_collides(&plan)).then_some(plan);
        }
        // The oldest run (invariant 4 of `plan`): with one run, the level's files.
        let files = version.runs(level).last()?.files();
        let start = first_after_pointer(files, state.pointer(level));
        // Round robin from the pointer, wrapping, skipping files a running job holds.
        (0..files.len())
            .filter_map(|offset| files.get((start + offset) % files.len()))
            .filter_map(|file| plan_for_inputs(version, level, vec![Arc::clone(file)]))
            .find(|plan| !state.plan_collides(plan))
    }
}

/// Index of the first file whose largest key is after `pointer` (0 if none or no pointer).
fn first_after_pointer(files: &[Arc<FileMeta>], pointer: Option<&[u8]>) -> usize {
    pointer
        .map(|key| {
            files.partition_point(|file| {
                compare_internal_keys(&file.largest, key) != Ordering::Greater
            })
        })
        .filter(|&index| index < files.len())
        .unwrap_or(0)
}

/// Maximum bytes of `level` (>= 1).
pub fn level_size_bytes_max(shape: &ShapeOptions, level: usize) -> u64 {
    let mut size = shape.level1_size_bytes_max;
    for _ in 1..level {
        size = size.saturating_mul(shape.level_size_ratio);
    }
    size
}

/// The levels whose score is at least 1 (over their limit), highest score first; among equal
/// scores the deeper level first. Every policy walks its candidates in this order.
pub fn ranked_candidates(scores: &[f64]) -> Vec<(usize, f64)> {
    let mut candidates: Vec<(usize, f64)> = scores
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, score)| *score >= 1.0)
        .collect();
    candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    candidates
}

/// How far over its limit each level is (>= 1 means it needs compaction). The last level has
/// no size limit; a level >= 1 with several runs scores at least 1 (module doc).
pub fn level_scores(version: &Version, shape: &ShapeOptions) -> Vec<f64> {
    let last = version.level_count().saturating_sub(1);
    (0..version.level_count())
        .map(|level| {
            let several_runs = if level > 0 && version.level(level).run_count() > 1 {
                1.0
            } else {
                0.0
            };
            let score = if level == last {
                0.0
            } else if level == 0 {
                version.files(0).len() as f64 / shape.level0_compaction_trigger as f64
            } else {
                version.level_bytes(level) as f64 / level_size_bytes_max(shape, level) as f64
            };
            score.max(several_runs)
        })
        .collect()
}

/// A plan merging every run of `level` into one new run of it; None with fewer than 2 runs.
pub fn rewrite_level(version: &Version, level: usize) -> Option<Plan> {
    if version.level(level).run_count() < 2 {
        return None;
    }
    Some(level_rewrite(
        version,
        level,
        format!("rewrite of level {level}'s runs into one"),
    ))
}

/// A plan rewriting every file of `level` into one new run of it, even a level of one run:
/// what a full manual compaction does to the last level, so that every value there is read
/// again (expired ones dropped, the compaction filter asked). None for an empty level.
pub fn rewrite_level_fully(version: &Version, level: usize) -> Option<Plan> {
    if version.files(level).is_empty() {
        return None;
    }
    Some(level_rewrite(
        version,
        level,
        format!("full rewrite of level {level}"),
    ))
}

/// A level rewrite (plan invariant 2) of every file of `level`.
fn level_rewrite(version: &Version, level: usize, reason: String) -> Plan {
    let plan = Plan {
        level,
        output_level: level,
        output_run: OutputRun::New,
        inputs: version.files(level).to_vec(),
        output_level_inputs: Vec::new(),
        reason,
    };
    debug_assert_eq!(plan.check(version), Ok(()));
    plan
}

/// Builds a plan compacting `inputs` of `level` into the one run of `level + 1`.
pub fn plan_for_inputs(
    version: &Version,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
) -> Option<Plan> {
    if inputs.is_empty() || level + 1 >= version.level_count() {
        return None;
    }
    // Precondition: the inputs are live at `level` (a stale plan would resurrect or lose data).
    debug_assert!(inputs.iter().all(|input| version
        .files(level)
        .iter()
        .any(|file| file.number == input.number)));
    let lower = inputs.iter().map(|file| file.smallest_user_key()).min()?;
    let upper = inputs.iter().map(|file| file.largest_user_key()).max()?;
    let output_run = OutputRun::Merge(0);
    let output_level_inputs = version
        .level(level + 1)
        .run_at(0)
        .overlapping_files(Some(lower), Some(upper))
        .to_vec();
    let plan = Plan {
        level,
        output_level: level + 1,
        output_run,
        inputs,
        output_level_inputs,
        reason: String::new(),
    };
    // Postcondition: plan invariants hold against the version it was made from.
    debug_assert_eq!(plan.check(version), Ok(()));
    Some(plan)
}

/// A plan for `compact_range`: the files of `level` overlapping `[lower, upper]` (the
/// overlapping part of the run at deeper levels). For level 0 the caller passes every file
/// through [`plan_for_inputs`] instead: level-0 files overlap one another, and compacting only
/// the ones overlapping a range could put an older version above a newer one.
pub fn plan_for_range(
    version: &Version,
    level: usize,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Option<Plan> {
    // With several runs, only whole runs may move down (plan invariant 4): take the level.
    let inputs = if version.level(level).run_count() > 1 {
        version.files(level).to_vec()
    } else {
        version.overlapping_files(level, lower, upper)
    };
    let mut plan = plan_for_inputs(version, level, inputs)?;
    plan.reason = format!("manual compaction of level {level}");
    Some(plan)
}
