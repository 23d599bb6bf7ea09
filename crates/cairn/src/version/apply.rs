//! [`apply_edit`]: one edit over a version, paying for the levels the edit touches rather than
//! for the whole version.
//!
//! Why: every flush and compaction installs its edit through here, under the version set.
//! Rebuilding every level and hashing every file number made an install cost O(files in the
//! database) — about 11 ms per install at 50,000 files (`examples/version_install.rs`). Here
//! a level the edit does not touch is shared with the base (`Arc<Level>`); a touched level is
//! copied run by run without its deleted files; only the runs that gained files are sorted
//! again, and only the files beside an added one are compared (a sorted run stays sorted
//! when files leave it). An added file number above every number in the base
//! (`Version::file_number_max`) is fresh without a search — every flush and compaction
//! output is — so the version is searched for duplicates only when an edit adds an older
//! number it does not also delete (a move deletes and adds its file in one edit).
//!
//! Placement: deleted files leave their runs; an added file joins the run the edit names for
//! it, else at level 0 a run of its own (id: its number), else the level's newest run (the
//! largest id, runs emptied by this edit's deletions included, as formats 1 and 2 had one run
//! per level); runs left empty are dropped.
//!
//! Thread-safety contract: a pure function of its arguments.
//!
//! Invariants (given a base that satisfies the module invariants of `version`):
//! 1. The result is the version `builder::VersionBuilder` gives for the same edit over the
//!    same base, and each refuses an edit the other refuses (the tests compare them on
//!    random edits).
//! 2. The result satisfies `Version::check_invariants`: the checks here cover what an edit
//!    can break (a touched level's structure, level 0, the neighbours of each added file, the
//!    added files' keys, duplicate numbers); the `invariants` feature runs the full check too.

use super::{check_file_keys, check_level0, check_level_structure, Level, Run, Version};
use super::{FileMeta, VersionEdit};
use crate::key::compare_internal_keys;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A run being edited: its id, the files it keeps, the files it gains.
type EditedRun = (u64, Vec<Arc<FileMeta>>, Vec<Arc<FileMeta>>);

/// Applies `edit` to `base`, producing a new version (module documentation). Tables already
/// opened by `base` stay shared (the `Arc<FileMeta>` is reused), and so do the levels the
/// edit does not touch. Errors name what the edit got wrong: a level that does not exist, a
/// file deleted that is not there, a file listed twice, a shape the invariants refuse.
pub fn apply_edit(base: &Version, edit: &VersionEdit) -> std::result::Result<Version, String> {
    let touched = touched_levels(base, edit)?;
    let run_of = edit.runs_named();
    let mut levels = base.levels.clone();
    for (index, slot) in levels.iter_mut().enumerate() {
        if touched.get(index).copied().unwrap_or(false) {
            *slot = Arc::new(edit_level(slot, index, edit, &run_of)?);
        }
    }
    check_fresh_numbers(base, edit)?;
    let added_max = edit.added_files.iter().map(|(_, added)| added.number).max();
    let version = Version {
        levels,
        file_number_max: base.file_number_max.max(added_max.unwrap_or(0)),
    };
    if touched.first().copied().unwrap_or(false) {
        check_level0(version.level(0))?;
    }
    if cfg!(feature = "invariants") {
        let full = version.check_invariants();
        assert!(full.is_ok(), "invariant 2: {full:?} after {edit:?}");
    }
    Ok(version)
}

/// Which levels `edit` deletes from or adds to; an error for a level that does not exist.
fn touched_levels(base: &Version, edit: &VersionEdit) -> std::result::Result<Vec<bool>, String> {
    let mut touched = vec![false; base.level_count()];
    for &(level, _) in &edit.deleted_files {
        *touched
            .get_mut(level)
            .ok_or_else(|| format!("edit deletes from level {level}, which does not exist"))? =
            true;
    }
    for &(level, _) in &edit.added_files {
        *touched
            .get_mut(level)
            .ok_or_else(|| format!("edit adds to level {level}, which does not exist"))? = true;
    }
    Ok(touched)
}

/// Level `index` of the result: `base` without the edit's deletions there, with its
/// additions there, placed as the module documentation says; checked where the edit could
/// have broken it.
fn edit_level(
    base: &Level,
    index: usize,
    edit: &VersionEdit,
    run_of: &HashMap<u64, u64>,
) -> std::result::Result<Level, String> {
    let mut runs = without_deleted(base, index, edit)?;
    let mut added = Vec::new();
    for (_, file) in edit.added_files.iter().filter(|(level, _)| *level == index) {
        let newest = runs.iter().map(|(id, _, _)| *id).max();
        let id = VersionEdit::run_for(file.number, index, run_of, newest);
        let file = Arc::new(file.to_meta());
        check_file_keys(&file)?;
        added.push(Arc::clone(&file));
        match runs.iter_mut().find(|(run_id, _, _)| *run_id == id) {
            Some((_, _, gained)) => gained.push(file),
            None => runs.push((id, Vec::new(), vec![file])),
        }
    }
    runs.retain(|(_, kept, gained)| !kept.is_empty() || !gained.is_empty());
    runs.sort_by_key(|(id, _, _)| std::cmp::Reverse(*id));
    let mut merged_runs = Vec::with_capacity(runs.len());
    for (id, kept, gained) in runs {
        let grew = !gained.is_empty();
        let files = merge_sorted(kept, gained);
        if grew {
            check_beside_added(&files, &added)
                .map_err(|reason| format!("level {index}: {reason}"))?;
        }
        merged_runs.push((id, files));
    }
    let level = Level::from_identified_runs(merged_runs);
    check_level_structure(&level).map_err(|reason| format!("level {index}: {reason}"))?;
    Ok(level)
}

/// `base`'s runs (id, files kept, none gained yet) without the files `edit` deletes from
/// level `index`; an error if one of those is not there (or is deleted twice).
fn without_deleted(
    base: &Level,
    index: usize,
    edit: &VersionEdit,
) -> std::result::Result<Vec<EditedRun>, String> {
    let mut deleted: Vec<u64> = edit
        .deleted_files
        .iter()
        .filter(|(level, _)| *level == index)
        .map(|(_, number)| *number)
        .collect();
    deleted.sort_unstable();
    if let Some(&[twice, _]) = deleted.windows(2).find(|pair| pair.first() == pair.get(1)) {
        return Err(format!("edit deletes file {twice}, not in level {index}"));
    }
    let mut removed = 0;
    let mut runs = Vec::with_capacity(base.run_count() + 1);
    for (id, run) in base.run_ids.iter().zip(base.runs()) {
        let kept: Vec<Arc<FileMeta>> = run
            .files()
            .iter()
            .filter(|file| deleted.binary_search(&file.number).is_err())
            .cloned()
            .collect();
        removed += run.files().len() - kept.len();
        runs.push((*id, kept, Vec::new()));
    }
    if removed != deleted.len() {
        let present = |number: &&u64| base.files().iter().any(|file| file.number == **number);
        let missing = deleted.iter().find(|number| !present(number)).copied();
        return Err(format!(
            "edit deletes file {}, not in level {index}",
            missing.unwrap_or_default()
        ));
    }
    Ok(runs)
}

/// `kept` (a run, sorted by smallest key) with `gained` merged in by smallest key, a file of
/// `kept` before an added one of the same key (as a stable sort of `kept` then `gained`
/// orders them). A binary search per added file and moves in between: no comparison per
/// kept file, as the largest level's run may hold tens of thousands.
fn merge_sorted(kept: Vec<Arc<FileMeta>>, mut gained: Vec<Arc<FileMeta>>) -> Vec<Arc<FileMeta>> {
    gained.sort_by(|a, b| compare_internal_keys(&a.smallest, &b.smallest));
    let mut merged = Vec::with_capacity(kept.len() + gained.len());
    let mut rest = kept.into_iter();
    for file in gained {
        let before = rest.as_slice().partition_point(|other| {
            compare_internal_keys(&other.smallest, &file.smallest) != Ordering::Greater
        });
        merged.extend(rest.by_ref().take(before));
        merged.push(file);
    }
    merged.extend(rest);
    merged
}

/// Invariant 2 of `version` for a sorted run that gained `added` files (among others'):
/// a run that was sorted and non-overlapping stays so without some of its files, so only
/// the pairs an added file is part of need comparing.
fn check_beside_added(
    files: &[Arc<FileMeta>],
    added: &[Arc<FileMeta>],
) -> std::result::Result<(), String> {
    for file in added {
        let first = files.partition_point(|other| {
            compare_internal_keys(&other.smallest, &file.smallest) == Ordering::Less
        });
        // Among the files of the same smallest key (one, in a valid run), if in this run.
        let Some(position) = files
            .iter()
            .skip(first)
            .take_while(|other| other.smallest == file.smallest)
            .position(|other| Arc::ptr_eq(other, file))
            .map(|offset| first + offset)
        else {
            continue;
        };
        let window = files
            .get(position.saturating_sub(1)..files.len().min(position + 2))
            .unwrap_or(&[]);
        Run::new(window).check()?;
    }
    Ok(())
}

/// Invariant 4 of `version` for the added files: none is added twice, and none is already in
/// `base` unless the edit deletes it too (a move).
fn check_fresh_numbers(base: &Version, edit: &VersionEdit) -> std::result::Result<(), String> {
    let mut added: Vec<u64> = edit
        .added_files
        .iter()
        .map(|(_, file)| file.number)
        .collect();
    added.sort_unstable();
    if let Some(&[twice, _]) = added.windows(2).find(|pair| pair.first() == pair.get(1)) {
        return Err(format!("file {twice} is listed twice"));
    }
    let deleted = |number: u64| edit.deleted_files.iter().any(|(_, gone)| *gone == number);
    let older: Vec<u64> = added
        .into_iter()
        .filter(|&number| number <= base.file_number_max && !deleted(number))
        .collect();
    if older.is_empty() {
        return Ok(());
    }
    match base
        .file_numbers()
        .find(|number| older.binary_search(number).is_ok())
    {
        Some(number) => Err(format!("file {number} is listed twice")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::apply_edit;
    use crate::key::{internal_key, ValueKind};
    use crate::version::builder::VersionBuilder;
    use crate::version::{AddedFile, Version, VersionEdit};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    const LEVELS: usize = 4;

    /// The oracle (invariant 1): recovery's builder over the base.
    fn by_builder(base: &Version, edit: &VersionEdit) -> Result<Version, String> {
        let mut builder = VersionBuilder::from_version(base);
        builder.apply(edit)?;
        builder.build()
    }

    /// Each level as its runs' `(id, file numbers)`, newest run first.
    fn shape(version: &Version) -> Vec<Vec<(u64, Vec<u64>)>> {
        (0..version.level_count())
            .map(|level| {
                let level = version.level(level);
                level
                    .runs()
                    .enumerate()
                    .map(|(index, run)| {
                        let numbers = run.files().iter().map(|file| file.number).collect();
                        (level.run_id(index).unwrap_or(u64::MAX), numbers)
                    })
                    .collect()
            })
            .collect()
    }

    fn file(number: u64, low: u64, high: u64) -> AddedFile {
        let key = |value: u64| internal_key(&value.to_be_bytes(), 1, ValueKind::Put);
        AddedFile {
            number,
            size_bytes: 1,
            smallest: key(low),
            largest: key(high),
            smallest_sequence: 1,
            largest_sequence: 1,
        }
    }

    /// A random edit over `base`: deletions of present files (now and then at the wrong
    /// level, of an absent number, or twice), additions of fresh numbers with random key
    /// ranges (often overlapping: refused), moves, re-added old numbers, run ids old, new
    /// or none, and levels out of range.
    fn random_edit(rng: &mut SmallRng, base: &Version, next_number: &mut u64) -> VersionEdit {
        let mut edit = VersionEdit::default();
        let present: Vec<(usize, u64)> = (0..LEVELS)
            .flat_map(|level| base.files(level).iter().map(move |f| (level, f.number)))
            .collect();
        for _ in 0..rng.gen_range(0..4) {
            let Some(&(level, number)) = present.get(rng.gen_range(0..present.len().max(1))) else {
                break;
            };
            match rng.gen_range(0..20) {
                0 => edit.deleted_files.push(((level + 1) % LEVELS, number)),
                1 => edit.deleted_files.push((level, *next_number + 1000)),
                2 => edit
                    .deleted_files
                    .extend([(level, number), (level, number)]),
                3 if level + 1 < LEVELS => {
                    // A move, keys and number kept.
                    let meta = base.files(level).iter().find(|f| f.number == number);
                    if let Some(meta) = meta {
                        edit.deleted_files.push((level, number));
                        edit.added_files
                            .push((level + 1, AddedFile::from_meta(meta)));
                    }
                }
                _ => edit.deleted_files.push((level, number)),
            }
        }
        for _ in 0..rng.gen_range(0..4) {
            let level = if rng.gen_range(0..40) == 0 {
                LEVELS
            } else {
                rng.gen_range(0..LEVELS)
            };
            let number = match present.get(rng.gen_range(0..present.len().max(1))) {
                Some(&(_, old)) if rng.gen_range(0..15) == 0 => old,
                _ => {
                    *next_number += 1;
                    *next_number
                }
            };
            let low: u64 = rng.gen_range(0..400);
            let high = if rng.gen_range(0..30) == 0 {
                low.saturating_sub(1)
            } else {
                low + rng.gen_range(0..6)
            };
            edit.added_files.push((level, file(number, low, high)));
            if level > 0 {
                let runs: Vec<u64> = (0..base.level(level).run_count())
                    .filter_map(|index| base.level(level).run_id(index))
                    .collect();
                match rng.gen_range(0..4) {
                    0 => {}
                    1 => {
                        *next_number += 1;
                        edit.file_runs.push((number, *next_number));
                    }
                    _ => {
                        let id = runs.get(rng.gen_range(0..runs.len().max(1))).copied();
                        edit.file_runs.push((number, id.unwrap_or(1)));
                    }
                }
            } else if rng.gen_range(0..25) == 0 {
                edit.file_runs.push((number, number + 1));
            }
        }
        edit
    }

    /// Whether the two paths disagree on `edit` over `base` (invariant 1), and how.
    fn disagreement(base: &Version, edit: &VersionEdit) -> Option<String> {
        match (apply_edit(base, edit), by_builder(base, edit)) {
            (Ok(fast), Ok(oracle)) => {
                let bounded = fast.file_numbers().all(|n| n <= fast.file_number_max);
                (shape(&fast) != shape(&oracle) || !bounded)
                    .then(|| format!("{:?} vs {:?}", shape(&fast), shape(&oracle)))
            }
            (Err(_), Err(_)) => None,
            (fast, oracle) => Some(format!(
                "{:?} vs {:?}",
                fast.map(|v| shape(&v)),
                oracle.map(|v| shape(&v))
            )),
        }
    }

    /// Shrinks a disagreeing edit: drops its entries one at a time while it still disagrees.
    fn shrink(base: &Version, mut edit: VersionEdit) -> VersionEdit {
        loop {
            let mut smaller = None;
            for index in 0..edit.deleted_files.len() + edit.added_files.len() + edit.file_runs.len()
            {
                let mut candidate = edit.clone();
                let deleted = candidate.deleted_files.len();
                let added = candidate.added_files.len();
                if index < deleted {
                    candidate.deleted_files.remove(index);
                } else if index < deleted + added {
                    candidate.added_files.remove(index - deleted);
                } else {
                    candidate.file_runs.remove(index - deleted - added);
                }
                if disagreement(base, &candidate).is_some() {
                    smaller = Some(candidate);
                    break;
                }
            }
            match smaller {
                Some(candidate) => edit = candidate,
                None => return edit,
            }
        }
    }

    /// Levels the edit does not touch are the base's own (no copy): a flush's install costs
    /// its level 0, not the deep levels.
    #[test]
    fn untouched_levels_are_shared_with_the_base() {
        let mut edit = VersionEdit::default();
        edit.added_files.push((2, file(5, 0, 9)));
        edit.file_runs.push((5, 7));
        let base = apply_edit(&Version::empty(LEVELS), &edit).unwrap();
        let mut flush = VersionEdit::default();
        flush.added_files.push((0, file(6, 3, 4)));
        let next = apply_edit(&base, &flush).unwrap();
        assert_eq!(next.files(0).len(), 1);
        for level in 1..LEVELS {
            assert!(
                std::sync::Arc::ptr_eq(&next.levels[level], &base.levels[level]),
                "{level}"
            );
        }
        assert!(!std::sync::Arc::ptr_eq(&next.levels[0], &base.levels[0]));
    }

    /// Invariant 1 on random edit sequences: the same version, or both refuse. An accepted
    /// edit becomes the next base.
    #[test]
    fn apply_edit_agrees_with_the_builder_on_random_edits() {
        let mut accepted = 0;
        let mut refused = 0;
        for seed in 0..200 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut base = Version::empty(LEVELS);
            let mut next_number = 0;
            for step in 0..60 {
                let edit = random_edit(&mut rng, &base, &mut next_number);
                if let Some(how) = disagreement(&base, &edit) {
                    let small = shrink(&base, edit);
                    panic!(
                        "seed {seed} step {step}: {how}\nbase {:?}\nedit (shrunk) {small:?}",
                        shape(&base)
                    );
                }
                match apply_edit(&base, &edit) {
                    Ok(next) => {
                        base = next;
                        accepted += 1;
                    }
                    Err(_) => refused += 1,
                }
            }
        }
        // Both outcomes are exercised, and the bases grow.
        assert!(
            accepted > 2_000 && refused > 2_000,
            "{accepted} accepted, {refused} refused"
        );
    }
}
