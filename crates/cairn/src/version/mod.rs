//! Versions: which `SSTables` make up the database, arranged in levels of sorted runs.
//!
//! A [`Version`] is an immutable list of levels; a level is a list of **sorted runs**, newest
//! first; a run is a list of files sorted by key whose user-key ranges do not overlap. Every
//! flush or compaction produces a [`VersionEdit`] (files added and removed, counters), which
//! [`VersionSet`] appends to the MANIFEST and syncs *before* the new version is installed.
//!
//! Runs have identity: each run of a level carries a **run id**, and a level's runs are ordered
//! by it, the larger the newer. A level-0 run is one file and its id is that file's number. From
//! MANIFEST format version 3 on, an edit records the run id of every file it adds at a deeper
//! level (`VersionEdit::file_runs`); [`apply_edit`] puts the file into the run with that id,
//! creating the run if the level has none. A file added without a run id (every file of a
//! version-1 or version-2 MANIFEST, written when the only policy was leveling) joins the
//! level's newest run, or a new run with id 0 if the level is empty — the one run per level
//! those versions always had. New run ids are drawn from the file-number counter, so a run
//! created later always has a larger id than any run that exists when it is created.
//!
//! Invariants:
//! 1. Level 0 holds one run per file, ordered newest first (highest file number first, since
//!    one flusher numbers them in flush order); level-0 files may overlap each other.
//! 2. Within a run, files are ordered by smallest key and do not overlap in user keys; no user
//!    key is split across two files of one run (compaction never cuts a file between two
//!    versions of one key).
//! 3. Runs of a level are ordered newest first: for any user key, an entry in run `i` is newer
//!    than every entry of that key in run `j > i`, and any entry at level `l` is newer than
//!    every entry of that key at level `l + 1`. Lookups rely on this to stop at the first hit.
//! 4. No run is empty, and a file number appears at most once in a version.
//! 5. A file is deleted from disk only when no live `Version` lists it (see `db` for the
//!    obsolete-file sweep).
//! 6. Within a level, run ids are strictly descending (newest first, unique); at level 0 a
//!    run's id is its file's number.
//!
//! [`Version::check_invariants`] checks 1, 2, 4 and 6 (and that each file's smallest key is not
//! above its largest); 3 is kept by construction (placement above, and compactions that only
//! ever write a level's output below or beside older data). It runs on the version recovery
//! builds from a MANIFEST (`builder`), so a MANIFEST describing an impossible shape is reported
//! as corruption. [`apply_edit`] checks only what one edit can break (`apply`, invariant 2),
//! so that a flush's install does not cost the whole version; the `invariants` feature runs
//! the full check there too.
//!
//! Thread-safety contract: `Version`, `Level` and `FileMeta` are immutable once built and shared
//! by `Arc` (a `FileMeta` caches its opened table in a `OnceLock`); `VersionSet` is not
//! synchronised itself — the database holds it in a mutex taken only by background work and
//! open, never by reads or writes.

mod apply;
mod builder;
mod edit;
mod set;
#[cfg(test)]
mod tests;

pub use apply::apply_edit;
pub use edit::{AddedFile, VersionEdit};
pub use set::VersionSet;

use crate::key::{compare_internal_keys, user_key, SequenceNumber};
use crate::sstable::Table;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

/// MANIFEST format version written by this build (tag 7 of the first record). Bump it (never
/// reuse a number) for any change to a byte of a MANIFEST, a version edit or a WAL;
/// docs/format.md, "Changing the format", says what else that change must do. Version 2:
/// the database's WALs are version 2 (a header record and sync markers); the MANIFEST bytes
/// are those of version 1. Version 3: edits record the run id of each added file (tag 8).
pub const MANIFEST_FORMAT_VERSION: u32 = 3;

/// The oldest MANIFEST format version this build reads (whose WALs are version 1).
pub const MANIFEST_FORMAT_VERSION_OLDEST: u32 = 1;

/// One `SSTable` and what the version knows about it.
#[derive(Debug)]
pub struct FileMeta {
    /// File number (names `NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    /// Smallest sequence number in the file.
    pub smallest_sequence: SequenceNumber,
    /// Largest sequence number in the file.
    pub largest_sequence: SequenceNumber,
    /// The opened table, filled on first use and kept while the file is live.
    pub table: OnceLock<Arc<Table>>,
}

impl FileMeta {
    /// Metadata for a file whose table is not opened yet.
    pub fn new(
        number: u64,
        size_bytes: u64,
        smallest: Vec<u8>,
        largest: Vec<u8>,
        smallest_sequence: SequenceNumber,
        largest_sequence: SequenceNumber,
    ) -> Self {
        FileMeta {
            number,
            size_bytes,
            smallest,
            largest,
            smallest_sequence,
            largest_sequence,
            table: OnceLock::new(),
        }
    }

    /// Smallest user key.
    pub fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    /// Largest user key.
    pub fn largest_user_key(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// True if the file's user-key range intersects `[lower, upper]` (None = unbounded).
    pub fn overlaps(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        let after_upper = upper.is_some_and(|upper| self.smallest_user_key() > upper);
        let before_lower = lower.is_some_and(|lower| self.largest_user_key() < lower);
        !after_upper && !before_lower
    }
}

/// One sorted run: files ordered by smallest key, non-overlapping in user keys (a borrowed
/// view into its level).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    files: &'a [Arc<FileMeta>],
}

impl<'a> Run<'a> {
    /// A run over `files`, which must be sorted and non-overlapping (see [`Run::check`]).
    pub fn new(files: &'a [Arc<FileMeta>]) -> Self {
        Run { files }
    }

    /// The run's files, by smallest key.
    pub fn files(&self) -> &'a [Arc<FileMeta>] {
        self.files
    }

    /// Total bytes of the run.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|file| file.size_bytes).sum()
    }

    /// The one file that may hold `key` (binary search on largest key).
    pub fn find_file(&self, key: &[u8]) -> Option<&'a Arc<FileMeta>> {
        let index = self
            .files
            .partition_point(|file| file.largest_user_key() < key);
        self.files
            .get(index)
            .filter(|file| file.smallest_user_key() <= key)
    }

    /// The files whose user-key range intersects `[lower, upper]` (None = unbounded): a
    /// contiguous part of the run, itself a run.
    pub fn overlapping_files(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> &'a [Arc<FileMeta>] {
        self.files
            .get(self.overlapping_range(lower, upper))
            .unwrap_or(&[])
    }

    /// The indexes (into [`Run::files`]) of [`Run::overlapping_files`].
    pub fn overlapping_range(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> std::ops::Range<usize> {
        let start = lower.map_or(0, |lower| {
            self.files
                .partition_point(|file| file.largest_user_key() < lower)
        });
        let end = upper.map_or(self.files.len(), |upper| {
            self.files
                .partition_point(|file| file.smallest_user_key() <= upper)
        });
        start..end.max(start)
    }

    /// Checks invariant 2 on this run.
    pub fn check(&self) -> std::result::Result<(), String> {
        for pair in self.files.windows(2) {
            let [left, right] = pair else { continue };
            if left.largest_user_key() >= right.smallest_user_key() {
                return Err(format!(
                    "files {} and {} of one run overlap or are out of order",
                    left.number, right.number
                ));
            }
        }
        Ok(())
    }
}

/// One level: its files, stored run by run.
#[derive(Debug, Clone, Default)]
pub struct Level {
    /// Every file of the level, run by run (newest run first), each run by smallest key.
    files: Vec<Arc<FileMeta>>,
    /// Exclusive end in `files` of each run, strictly ascending; the last is `files.len()`.
    run_ends: Vec<usize>,
    /// The id of each run (invariant 6: strictly descending).
    run_ids: Vec<u64>,
}

impl Level {
    /// A level holding `runs` as `(run id, files)`, newest first; empty runs are left out
    /// (invariant 4).
    pub fn from_identified_runs(runs: Vec<(u64, Vec<Arc<FileMeta>>)>) -> Self {
        let mut level = Level::default();
        for (id, run) in runs.into_iter().filter(|(_, run)| !run.is_empty()) {
            level.files.extend(run);
            level.run_ends.push(level.files.len());
            level.run_ids.push(id);
        }
        level
    }

    #[cfg(any(test, feature = "testing"))]
    /// A level holding `runs`, newest first, with made-up ids (tests): a level-0 run's id is
    /// its first file's number, a deeper run's is its distance from the end (the oldest is 1).
    pub fn from_runs(level: usize, runs: Vec<Vec<Arc<FileMeta>>>) -> Self {
        let count = runs.len() as u64;
        let runs = runs
            .into_iter()
            .enumerate()
            .map(|(index, run)| {
                let id = if level == 0 {
                    run.first().map_or(0, |file| file.number)
                } else {
                    count - index as u64
                };
                (id, run)
            })
            .collect();
        Level::from_identified_runs(runs)
    }

    /// The id of run `index` (0 = newest), if it exists.
    pub fn run_id(&self, index: usize) -> Option<u64> {
        self.run_ids.get(index).copied()
    }

    /// Every file, run by run.
    pub fn files(&self) -> &[Arc<FileMeta>] {
        &self.files
    }

    /// Number of runs.
    pub fn run_count(&self) -> usize {
        self.run_ends.len()
    }

    /// The runs, newest first.
    pub fn runs(&self) -> impl DoubleEndedIterator<Item = Run<'_>> + ExactSizeIterator + '_ {
        (0..self.run_ends.len()).map(|index| self.run_at(index))
    }

    /// Run `index` (0 = newest); an empty run if out of range.
    pub fn run_at(&self, index: usize) -> Run<'_> {
        let start = index
            .checked_sub(1)
            .and_then(|previous| self.run_ends.get(previous))
            .copied()
            .unwrap_or(0);
        let end = self.run_ends.get(index).copied().unwrap_or(start);
        Run::new(self.files.get(start..end).unwrap_or(&[]))
    }

    /// The level's runs as owned `(run id, files)` lists (to rebuild a level).
    #[cfg(test)]
    fn to_runs(&self) -> Vec<(u64, Vec<Arc<FileMeta>>)> {
        self.run_ids
            .iter()
            .copied()
            .zip(self.runs().map(|run| run.files().to_vec()))
            .collect()
    }
}

/// An immutable set of files, arranged in levels of sorted runs (module doc).
#[derive(Debug, Default)]
pub struct Version {
    /// Shared with the versions before and after it that did not edit the level.
    levels: Vec<Arc<Level>>,
    /// No file number above this is in the version (0 when empty): an added file above it is
    /// known to be fresh without a search (`apply`).
    file_number_max: u64,
}

impl Version {
    /// An empty version with `level_count` levels.
    pub fn empty(level_count: usize) -> Self {
        Version {
            levels: (0..level_count)
                .map(|_| Arc::new(Level::default()))
                .collect(),
            file_number_max: 0,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// A version from explicit runs: `levels[l][r]` is run `r` (newest first) of level `l`.
    /// Nothing is checked here: call [`Version::check_invariants`] (tests build bad shapes
    /// on purpose).
    pub fn from_runs(levels: Vec<Vec<Vec<Arc<FileMeta>>>>) -> Self {
        Version::from_levels(
            levels
                .into_iter()
                .enumerate()
                .map(|(index, runs)| Level::from_runs(index, runs))
                .collect(),
        )
    }

    /// A version of `levels` (nothing checked).
    fn from_levels(levels: Vec<Level>) -> Self {
        let file_number_max = levels
            .iter()
            .flat_map(Level::files)
            .map(|file| file.number)
            .max()
            .unwrap_or(0);
        Version {
            levels: levels.into_iter().map(Arc::new).collect(),
            file_number_max,
        }
    }

    /// Number of levels.
    pub fn level_count(&self) -> usize {
        self.levels.len()
    }

    /// The deepest level holding a file (0 if none does): where Monkey's Bloom allocation
    /// (`compaction::table_options_for`) counts the tree's depth from.
    pub fn deepest_nonempty_level(&self) -> usize {
        (0..self.level_count())
            .rev()
            .find(|&level| !self.files(level).is_empty())
            .unwrap_or(0)
    }

    /// Level `level` (an empty level if out of range).
    pub fn level(&self, level: usize) -> &Level {
        static EMPTY: Level = Level {
            files: Vec::new(),
            run_ends: Vec::new(),
            run_ids: Vec::new(),
        };
        self.levels.get(level).map_or(&EMPTY, |level| level)
    }

    /// Every file in `level`, run by run (empty for a level out of range). At level 0 this
    /// is newest first; at a level with one run it is that run, by key.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.level(level).files()
    }

    /// The runs of `level`, newest first.
    pub fn runs(
        &self,
        level: usize,
    ) -> impl DoubleEndedIterator<Item = Run<'_>> + ExactSizeIterator + '_ {
        self.level(level).runs()
    }

    /// Total bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.runs(level).map(|run| run.bytes()).sum()
    }

    /// Files of `level` whose user-key range intersects `[lower, upper]`, run by run (newest
    /// run first). With several runs the result may overlap itself: use
    /// [`Version::overlapping_runs`] where a sorted run is needed.
    pub fn overlapping_files(
        &self,
        level: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.runs(level)
            .flat_map(|run| run.overlapping_files(lower, upper).iter().cloned())
            .collect()
    }

    /// Per run of `level` (newest first), its files intersecting `[lower, upper]`; runs with
    /// none are left out. Each entry is sorted and non-overlapping (one level iterator each).
    /// Reads use the reference-count-free [`Version::overlapping_run_ranges`]; this owned form
    /// is for callers that outlive the version (compaction inputs, tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn overlapping_runs(
        &self,
        level: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<Vec<Arc<FileMeta>>> {
        self.runs(level)
            .map(|run| run.overlapping_files(lower, upper).to_vec())
            .filter(|files| !files.is_empty())
            .collect()
    }

    /// Like [`Version::overlapping_runs`], as index ranges into [`Version::files`]`(level)`:
    /// describing the runs takes no reference count, however many files they hold.
    pub fn overlapping_run_ranges(
        &self,
        level: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<std::ops::Range<usize>> {
        let mut run_start = 0;
        let mut ranges = Vec::new();
        for run in self.runs(level) {
            let range = run.overlapping_range(lower, upper);
            if !range.is_empty() {
                ranges.push(run_start + range.start..run_start + range.end);
            }
            run_start += run.files().len();
        }
        ranges
    }

    /// The files of `level` that may hold `key`, at most one per run, newest run first: a
    /// point lookup reads them in this order and stops at the first hit (invariant 3).
    pub fn find_files<'a>(
        &'a self,
        level: usize,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<FileMeta>> + 'a {
        self.runs(level).filter_map(move |run| run.find_file(key))
    }

    /// True if no level deeper than `level` holds a file whose range includes `user_key`:
    /// a tombstone for it written to `level` may be dropped.
    pub fn is_base_level_for_key(&self, level: usize, key: &[u8]) -> bool {
        (level + 1..self.level_count()).all(|deeper| self.find_files(deeper, key).next().is_none())
    }

    /// Every file number in the version.
    pub fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels
            .iter()
            .flat_map(|level| level.files())
            .map(|file| file.number)
    }

    /// Checks invariants 1, 2, 4 and 6 of the module doc, and that no file has its smallest key
    /// above its largest. Linear in the files (and it hashes every number): recovery's builder
    /// runs it once, `apply_edit` only under the `invariants` feature.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        check_level0(self.level(0))?;
        for (index, level) in self.levels.iter().enumerate() {
            check_level_structure(level).map_err(|reason| format!("level {index}: {reason}"))?;
            for run in level.runs() {
                run.check()
                    .map_err(|reason| format!("level {index}: {reason}"))?;
            }
            for file in level.files() {
                check_file_keys(file)?;
            }
        }
        let mut seen = HashSet::new();
        if let Some(number) = self.file_numbers().find(|&number| !seen.insert(number)) {
            return Err(format!("file {number} is listed twice"));
        }
        Ok(())
    }
}

/// Invariants 1 and 6 at level 0: one file per run, newest first, each run's id its file's
/// number.
fn check_level0(level0: &Level) -> std::result::Result<(), String> {
    if level0.runs().any(|run| run.files().len() != 1) {
        return Err("level 0 holds a run of more than one file".into());
    }
    for pair in level0.files().windows(2) {
        let [newer, older] = pair else { continue };
        if newer.number <= older.number {
            return Err(format!(
                "level 0 not newest first: {} before {}",
                newer.number, older.number
            ));
        }
    }
    if let Some((file, id)) = level0
        .files()
        .iter()
        .zip(&level0.run_ids)
        .find(|(file, id)| file.number != **id)
    {
        return Err(format!("level-0 file {} in run {id}", file.number));
    }
    Ok(())
}

/// A file's smallest key is not above its largest.
fn check_file_keys(file: &FileMeta) -> std::result::Result<(), String> {
    if compare_internal_keys(&file.smallest, &file.largest) == Ordering::Greater {
        return Err(format!("file {} has smallest > largest", file.number));
    }
    Ok(())
}

/// Invariants 4 and 6 and the bookkeeping behind them: run ends strictly ascending, ending at
/// the last file (so no run is empty and every file is in a run); one id per run, strictly
/// descending.
fn check_level_structure(level: &Level) -> std::result::Result<(), String> {
    if level.run_ids.len() != level.run_ends.len() {
        return Err(format!(
            "{} run ids for {} runs",
            level.run_ids.len(),
            level.run_ends.len()
        ));
    }
    if let Some(pair) = level
        .run_ids
        .windows(2)
        .find(|pair| matches!(pair, [newer, older] if newer <= older))
    {
        return Err(format!("run ids {pair:?} not strictly descending"));
    }
    let mut previous = 0;
    for &end in &level.run_ends {
        if end <= previous {
            return Err("an empty run".into());
        }
        previous = end;
    }
    if previous != level.files.len() {
        return Err(format!(
            "runs cover {previous} of {} files",
            level.files.len()
        ));
    }
    Ok(())
}
