//! `VersionBuilder`: replays a MANIFEST's edits in place and builds the version they describe
//! once, at the end.
//!
//! Why: applying one edit ([`apply_edit`](super::apply_edit)) copies each level it touches,
//! so recovery that applied a MANIFEST's edits one by one would cost O(edits × files) on a
//! database whose edits keep touching its largest level. A MANIFEST may hold up to
//! `manifest_size_bytes_max` (64 MiB by default) of edits before it rolls over, hundreds of
//! thousands of them, over a database of thousands of files. The builder keeps each level as
//! a map from run id to the run's files and an index from file number to its place, so an
//! edit costs O(its own files) map operations (its run ids too: a map per edit, not a search
//! of a snapshot's list once per file); sorting and the invariant check run once.
//!
//! The result is the version the edit-by-edit replay gives whenever every version along the
//! way is valid. A MANIFEST whose final version is invalid is reported where the replay
//! fails ([`first_bad_edit`]); one with an invalid version along the way but a valid end —
//! which no writer produces, since every edit is applied to a checked version before it is
//! logged — is accepted as the state it ends in, as `RocksDB`'s builder does.
//!
//! Thread-safety contract: owned by one thread (`&mut self`); recovery runs before the
//! database is shared.
//!
//! Invariants:
//! 1. `placed` holds exactly the file numbers present, each with its level and run id: a
//!    file number is present at most once (an edit adding a present one is refused).
//! 2. Between edits no run is empty (an edit's emptied runs are dropped after its adds, so a
//!    file added without a run id joins the newest run as `apply_edit` chooses it, emptied
//!    runs included).

use super::{apply_edit, FileMeta, Level, Version, VersionEdit};
use crate::key::compare_internal_keys;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A level being built: run id to the run's files by number.
type Runs = BTreeMap<u64, HashMap<u64, Arc<FileMeta>>>;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct VersionBuilder {
    levels: Vec<Runs>,
    /// Every present file number: its level and run id (invariant 1).
    placed: HashMap<u64, (usize, u64)>,
}

impl VersionBuilder {
    /// A builder over an empty version of `level_count` levels.
    pub(crate) fn new(level_count: usize) -> Self {
        VersionBuilder {
            levels: vec![Runs::new(); level_count],
            placed: HashMap::new(),
        }
    }

    /// A builder holding `base`'s files (their `Arc<FileMeta>` shared, so opened tables stay
    /// open).
    #[cfg(test)]
    pub(crate) fn from_version(base: &Version) -> Self {
        let mut builder = VersionBuilder::new(base.levels.len());
        for (index, (runs, level)) in builder.levels.iter_mut().zip(&base.levels).enumerate() {
            for (id, files) in level.to_runs() {
                let run = runs.entry(id).or_default();
                for file in files {
                    builder.placed.insert(file.number, (index, id));
                    run.insert(file.number, file);
                }
            }
        }
        builder
    }

    /// Applies `edit`: its deletions, then its additions, placed as the module documentation
    /// of `version` says. Errors name what the edit got wrong (a level that does not exist, a file
    /// deleted that is not there, a file added twice).
    pub(crate) fn apply(&mut self, edit: &VersionEdit) -> Result<(), String> {
        for &(level, number) in &edit.deleted_files {
            let runs = self
                .levels
                .get_mut(level)
                .ok_or_else(|| format!("edit deletes from level {level}, which does not exist"))?;
            let removed = match self.placed.get(&number) {
                Some(&(placed_level, id)) if placed_level == level => runs
                    .get_mut(&id)
                    .and_then(|run| run.remove(&number))
                    .is_some(),
                _ => false,
            };
            if !removed {
                return Err(format!("edit deletes file {number}, not in level {level}"));
            }
            self.placed.remove(&number);
        }
        let run_of = edit.runs_named();
        for (level, added) in &edit.added_files {
            let runs = self
                .levels
                .get_mut(*level)
                .ok_or_else(|| format!("edit adds to level {level}, which does not exist"))?;
            let newest = runs.keys().next_back().copied();
            let id = VersionEdit::run_for(added.number, *level, &run_of, newest);
            if self.placed.insert(added.number, (*level, id)).is_some() {
                return Err(format!("file {} is listed twice", added.number));
            }
            let file = Arc::new(added.to_meta());
            runs.entry(id).or_default().insert(added.number, file);
        }
        // Invariant 2, once per level the edit deleted from (not once per deleted file).
        let mut emptied: Vec<usize> = edit.deleted_files.iter().map(|&(level, _)| level).collect();
        emptied.sort_unstable();
        emptied.dedup();
        for level in emptied {
            if let Some(runs) = self.levels.get_mut(level) {
                runs.retain(|_, run| !run.is_empty());
            }
        }
        Ok(())
    }

    /// The version the edits describe: runs newest first, each by smallest key; its
    /// invariants checked.
    pub(crate) fn build(self) -> Result<Version, String> {
        let levels = self.levels.into_iter().map(|runs| {
            let runs = runs
                .into_iter()
                .rev()
                .map(|(id, files)| {
                    let mut files: Vec<Arc<FileMeta>> = files.into_values().collect();
                    files.sort_by(|a, b| compare_internal_keys(&a.smallest, &b.smallest));
                    (id, files)
                })
                .collect();
            Level::from_identified_runs(runs)
        });
        let version = Version::from_levels(levels.collect());
        version.check_invariants()?;
        Ok(version)
    }
}

/// Replays `edits` one by one with `apply_edit` over an empty version of `level_count`
/// levels and returns the index of the first edit whose version is invalid, with the reason
/// (`None` if every version is valid): where to report a MANIFEST whose builder failed.
pub(crate) fn first_bad_edit<'a>(
    level_count: usize,
    edits: impl IntoIterator<Item = &'a VersionEdit>,
) -> Option<(usize, String)> {
    let mut version = Version::empty(level_count);
    for (index, edit) in edits.into_iter().enumerate() {
        match apply_edit(&version, edit) {
            Ok(next) => version = next,
            Err(reason) => return Some((index, reason)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use crate::version::AddedFile;

    fn added(number: u64, smallest: &[u8], largest: &[u8]) -> AddedFile {
        AddedFile {
            number,
            size_bytes: 100,
            smallest: internal_key(smallest, 1, ValueKind::Put),
            largest: internal_key(largest, 1, ValueKind::Put),
            smallest_sequence: 1,
            largest_sequence: 1,
        }
    }

    /// Each level as its runs' `(id, file numbers)`, newest run first.
    fn shape(version: &Version) -> Vec<Vec<(u64, Vec<u64>)>> {
        version
            .levels
            .iter()
            .map(|level| {
                level
                    .to_runs()
                    .into_iter()
                    .map(|(id, files)| (id, files.iter().map(|file| file.number).collect()))
                    .collect()
            })
            .collect()
    }

    /// A flush, a compaction into two runs at level 1 (one named, one by format-2 rules), a
    /// deletion that empties a run, and a move: the builder and the edit-by-edit replay agree.
    #[test]
    fn the_builder_gives_the_version_the_edit_by_edit_replay_gives() {
        let mut edits = Vec::new();
        let mut edit = VersionEdit::default();
        edit.added_files.push((0, added(5, b"a", b"z")));
        edit.added_files.push((0, added(6, b"b", b"c")));
        edits.push(edit);
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((0, 5));
        edit.added_files.push((1, added(8, b"m", b"p")));
        edit.added_files.push((1, added(7, b"a", b"f")));
        edit.file_runs.push((8, 20));
        edit.file_runs.push((7, 20));
        edit.added_files.push((1, added(9, b"q", b"r")));
        edits.push(edit);
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((0, 6));
        edit.added_files.push((1, added(10, b"b", b"c")));
        edit.file_runs.push((10, 30));
        edits.push(edit);
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((1, 10));
        edit.added_files.push((2, added(10, b"b", b"c")));
        edits.push(edit);

        let mut builder = VersionBuilder::new(4);
        let mut replayed = Version::empty(4);
        for edit in &edits {
            builder.apply(edit).unwrap();
            replayed = apply_edit(&replayed, edit).unwrap();
        }
        let built = builder.build().unwrap();
        assert_eq!(shape(&built), shape(&replayed));
        assert_eq!(
            shape(&built)[1],
            vec![(20, vec![7, 8, 9])],
            "format-2 rules: file 9 joined the newest run"
        );
        assert_eq!(first_bad_edit(4, &edits), None);
    }

    #[test]
    fn bad_edits_are_refused_with_the_reason() {
        let mut builder = VersionBuilder::new(2);
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((1, 3));
        assert_eq!(
            builder.apply(&edit).unwrap_err(),
            "edit deletes file 3, not in level 1"
        );
        let mut edit = VersionEdit::default();
        edit.added_files.push((0, added(4, b"a", b"b")));
        builder.apply(&edit).unwrap();
        assert_eq!(builder.apply(&edit).unwrap_err(), "file 4 is listed twice");
        let mut edit = VersionEdit::default();
        edit.added_files.push((2, added(5, b"a", b"b")));
        assert!(builder.apply(&edit).unwrap_err().contains("level 2"));
        // Two overlapping files in one run: the builder's check fails, and the replay names
        // the edit that made them.
        let mut builder = VersionBuilder::new(2);
        let mut first = VersionEdit::default();
        first.added_files.push((1, added(6, b"a", b"m")));
        let mut second = VersionEdit::default();
        second.added_files.push((1, added(7, b"k", b"z")));
        builder.apply(&first).unwrap();
        builder.apply(&second).unwrap();
        assert!(builder.build().is_err());
        let (index, _) = first_bad_edit(2, [&first, &second]).unwrap();
        assert_eq!(index, 1);
    }
}
