//! Versions: which SSTables make up the database, and the MANIFEST that records it.
//!
//! A [`Version`] is an immutable list of files per level. Every flush or compaction produces a
//! [`VersionEdit`] (files added and removed, counters), which is appended to the MANIFEST and
//! synced *before* the new version is installed, so what readers can see is always on disk.
//!
//! Invariants:
//! 1. Level 0 files may overlap each other; they are ordered newest first (highest file
//!    number first, since one flusher numbers them in flush order).
//! 2. Files in a level >= 1 do not overlap in user keys and are ordered by smallest key;
//!    no user key is split across two files of the same level (compaction never cuts a file
//!    between two versions of one key).
//! 3. A file is deleted from disk only when no live `Version` lists it (see `db` for the
//!    obsolete-file sweep).
//! 4. A MANIFEST starts with a full snapshot edit, so replaying one MANIFEST alone rebuilds
//!    the version; `CURRENT` names the live MANIFEST and is replaced atomically.
//!
//! Thread-safety contract: `Version` and `FileMeta` are immutable once built and shared by
//! `Arc`; `VersionSet` is not synchronised itself — the database holds it in a mutex taken only
//! by background work and open, never by reads or writes.

use crate::coding::{put_length_prefixed, put_u32, put_u64, Reader};
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::key::{compare_internal_keys, user_key, SequenceNumber};
use crate::sstable::Table;
use crate::wal::{read_log, LogWriter};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock, Weak};

/// MANIFEST format version written by this build, and the only one it reads (tag 7 of the
/// first record). Bump it (never reuse a number) for any change to a byte of a MANIFEST or a
/// version edit; docs/format.md, "Changing the format", says what else that change must do.
pub const MANIFEST_FORMAT_VERSION: u32 = 1;

/// One SSTable and what the version knows about it.
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

/// An immutable set of files per level.
#[derive(Debug, Default)]
pub struct Version {
    /// `levels[0]` newest first; deeper levels sorted by smallest key (module invariants).
    pub levels: Vec<Vec<Arc<FileMeta>>>,
}

impl Version {
    /// An empty version with `level_count` levels.
    pub fn empty(level_count: usize) -> Self {
        Version {
            levels: vec![Vec::new(); level_count],
        }
    }

    /// Number of levels.
    pub fn level_count(&self) -> usize {
        self.levels.len()
    }

    /// Files in `level` (empty for a level out of range).
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Total bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|file| file.size_bytes).sum()
    }

    /// Files of `level` whose user-key range intersects `[lower, upper]`.
    pub fn overlapping_files(
        &self,
        level: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.files(level)
            .iter()
            .filter(|file| file.overlaps(lower, upper))
            .cloned()
            .collect()
    }

    /// In a level >= 1, the one file that may hold `user_key` (binary search on largest key).
    pub fn find_file(&self, level: usize, key: &[u8]) -> Option<&Arc<FileMeta>> {
        debug_assert!(level >= 1);
        let files = self.files(level);
        let index = files.partition_point(|file| file.largest_user_key() < key);
        files
            .get(index)
            .filter(|file| file.smallest_user_key() <= key)
    }

    /// True if no level deeper than `level` holds a file whose range includes `user_key`:
    /// a tombstone for it written to `level` may be dropped.
    pub fn is_base_level_for_key(&self, level: usize, key: &[u8]) -> bool {
        (level + 1..self.level_count()).all(|deeper| self.find_file(deeper, key).is_none())
    }

    /// Checks invariants 1 and 2 (used after every edit in debug builds and by tests).
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for pair in self.files(0).windows(2) {
            if pair[0].number <= pair[1].number {
                return Err(format!(
                    "level 0 not newest first: {} before {}",
                    pair[0].number, pair[1].number
                ));
            }
        }
        for level in 1..self.level_count() {
            for pair in self.files(level).windows(2) {
                if pair[0].largest_user_key() >= pair[1].smallest_user_key() {
                    return Err(format!(
                        "level {level}: files {} and {} overlap",
                        pair[0].number, pair[1].number
                    ));
                }
            }
        }
        for level in 0..self.level_count() {
            for file in self.files(level) {
                if compare_internal_keys(&file.smallest, &file.largest) == Ordering::Greater {
                    return Err(format!("file {} has smallest > largest", file.number));
                }
            }
        }
        Ok(())
    }

    /// Every file number in the version.
    pub fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().flatten().map(|file| file.number)
    }
}

/// A change from one version to the next, as logged in the MANIFEST.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct VersionEdit {
    /// WALs numbered below this are fully flushed and may be deleted.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The largest sequence number used so far.
    pub last_sequence: Option<SequenceNumber>,
    /// MANIFEST format version (present in the first edit of a MANIFEST).
    pub format_version: Option<u32>,
    /// Where the next compaction of a level starts (round robin).
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// `(level, file number)` removed.
    pub deleted_files: Vec<(usize, u64)>,
    /// `(level, file)` added.
    pub added_files: Vec<(usize, AddedFile)>,
}

/// A file added by an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedFile {
    /// File number.
    pub number: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_sequence: SequenceNumber,
    /// Largest sequence number.
    pub largest_sequence: SequenceNumber,
}

impl AddedFile {
    /// Metadata for a version.
    pub fn to_meta(&self) -> FileMeta {
        FileMeta::new(
            self.number,
            self.size_bytes,
            self.smallest.clone(),
            self.largest.clone(),
            self.smallest_sequence,
            self.largest_sequence,
        )
    }

    /// The edit entry that re-adds `meta` (MANIFEST snapshots, trivial moves).
    pub fn from_meta(meta: &FileMeta) -> Self {
        AddedFile {
            number: meta.number,
            size_bytes: meta.size_bytes,
            smallest: meta.smallest.clone(),
            largest: meta.largest.clone(),
            smallest_sequence: meta.smallest_sequence,
            largest_sequence: meta.largest_sequence,
        }
    }
}

/// Version edit field tags (docs/format.md, "MANIFEST record payload").
/// On disk: never change a tag's number or meaning; a new field takes a new number.
mod tag {
    pub const LOG_NUMBER: u8 = 1;
    pub const NEXT_FILE_NUMBER: u8 = 2;
    pub const LAST_SEQUENCE: u8 = 3;
    pub const DELETED_FILE: u8 = 4;
    pub const ADDED_FILE: u8 = 5;
    pub const COMPACT_POINTER: u8 = 6;
    pub const FORMAT_VERSION: u8 = 7;
}

/// Levels are stored in one byte; 32 levels at most (see `Options::validate`).
fn level_byte(level: usize) -> u8 {
    debug_assert!(level < 256);
    level as u8
}

impl VersionEdit {
    /// Encodes the edit (docs/format.md, "MANIFEST record payload", is the byte layout).
    pub fn encode(&self) -> Vec<u8> {
        let mut buffer = Vec::new();
        if let Some(version) = self.format_version {
            buffer.push(tag::FORMAT_VERSION);
            put_u32(&mut buffer, version);
        }
        if let Some(number) = self.log_number {
            buffer.push(tag::LOG_NUMBER);
            put_u64(&mut buffer, number);
        }
        if let Some(number) = self.next_file_number {
            buffer.push(tag::NEXT_FILE_NUMBER);
            put_u64(&mut buffer, number);
        }
        if let Some(sequence) = self.last_sequence {
            buffer.push(tag::LAST_SEQUENCE);
            put_u64(&mut buffer, sequence);
        }
        for (level, key) in &self.compact_pointers {
            buffer.push(tag::COMPACT_POINTER);
            buffer.push(level_byte(*level));
            put_length_prefixed(&mut buffer, key);
        }
        for (level, number) in &self.deleted_files {
            buffer.push(tag::DELETED_FILE);
            buffer.push(level_byte(*level));
            put_u64(&mut buffer, *number);
        }
        for (level, file) in &self.added_files {
            buffer.push(tag::ADDED_FILE);
            buffer.push(level_byte(*level));
            put_u64(&mut buffer, file.number);
            put_u64(&mut buffer, file.size_bytes);
            put_u64(&mut buffer, file.smallest_sequence);
            put_u64(&mut buffer, file.largest_sequence);
            put_length_prefixed(&mut buffer, &file.smallest);
            put_length_prefixed(&mut buffer, &file.largest);
        }
        buffer
    }

    /// Decodes an edit; `Err(reason)` if malformed.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        let mut edit = VersionEdit::default();
        let mut reader = Reader::new(bytes);
        let truncated = || "edit truncated".to_string();
        while !reader.is_empty() {
            let field = reader.u8().ok_or_else(truncated)?;
            match field {
                tag::FORMAT_VERSION => {
                    edit.format_version = Some(reader.u32().ok_or_else(truncated)?)
                }
                tag::LOG_NUMBER => edit.log_number = Some(reader.u64().ok_or_else(truncated)?),
                tag::NEXT_FILE_NUMBER => {
                    edit.next_file_number = Some(reader.u64().ok_or_else(truncated)?)
                }
                tag::LAST_SEQUENCE => {
                    edit.last_sequence = Some(reader.u64().ok_or_else(truncated)?)
                }
                tag::COMPACT_POINTER => {
                    let level = reader.u8().ok_or_else(truncated)? as usize;
                    let key = reader.length_prefixed().ok_or_else(truncated)?.to_vec();
                    edit.compact_pointers.push((level, key));
                }
                tag::DELETED_FILE => {
                    let level = reader.u8().ok_or_else(truncated)? as usize;
                    let number = reader.u64().ok_or_else(truncated)?;
                    edit.deleted_files.push((level, number));
                }
                tag::ADDED_FILE => {
                    let level = reader.u8().ok_or_else(truncated)? as usize;
                    let number = reader.u64().ok_or_else(truncated)?;
                    let size_bytes = reader.u64().ok_or_else(truncated)?;
                    let smallest_sequence = reader.u64().ok_or_else(truncated)?;
                    let largest_sequence = reader.u64().ok_or_else(truncated)?;
                    let smallest = reader.length_prefixed().ok_or_else(truncated)?.to_vec();
                    let largest = reader.length_prefixed().ok_or_else(truncated)?.to_vec();
                    edit.added_files.push((
                        level,
                        AddedFile {
                            number,
                            size_bytes,
                            smallest,
                            largest,
                            smallest_sequence,
                            largest_sequence,
                        },
                    ));
                }
                unknown => return Err(format!("unknown edit tag {unknown}")),
            }
        }
        Ok(edit)
    }
}

/// Applies `edit` to `base`, producing a new version. Tables already opened by `base` stay
/// shared (the `Arc<FileMeta>` is reused).
pub fn apply_edit(base: &Version, edit: &VersionEdit) -> std::result::Result<Version, String> {
    let mut levels = base.levels.clone();
    for &(level, number) in &edit.deleted_files {
        let files = levels
            .get_mut(level)
            .ok_or_else(|| format!("edit deletes from level {level}, which does not exist"))?;
        let before = files.len();
        files.retain(|file| file.number != number);
        if files.len() == before {
            return Err(format!("edit deletes file {number}, not in level {level}"));
        }
    }
    for (level, added) in &edit.added_files {
        let files = levels
            .get_mut(*level)
            .ok_or_else(|| format!("edit adds to level {level}, which does not exist"))?;
        files.push(Arc::new(added.to_meta()));
    }
    for (level, files) in levels.iter_mut().enumerate() {
        if level == 0 {
            files.sort_by_key(|file| std::cmp::Reverse(file.number));
        } else {
            files.sort_by(|a, b| compare_internal_keys(&a.smallest, &b.smallest));
        }
    }
    let version = Version { levels };
    version.check_invariants()?;
    Ok(version)
}

/// The current version, the MANIFEST being appended to, and the counters it persists.
#[derive(Debug)]
pub struct VersionSet {
    directory: PathBuf,
    file_system: Arc<dyn FileSystem>,
    level_count: usize,
    manifest_size_bytes_max: u64,
    current: Arc<Version>,
    /// Versions handed out that may still be referenced (pruned as they die).
    live_versions: Vec<Weak<Version>>,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// WALs numbered below this are flushed.
    pub log_number: u64,
    /// Next unused file number; shared so writers can number a new WAL without this set's
    /// lock (which background work holds across MANIFEST syncs).
    next_file_number: Arc<AtomicU64>,
    /// Largest sequence number recorded in the MANIFEST.
    pub last_sequence: SequenceNumber,
    /// Per-level round-robin compaction start (user key).
    pub compact_pointers: Vec<Option<Vec<u8>>>,
    /// Set when appending to, syncing or replacing the MANIFEST failed. The file may then end
    /// in a partial record, or hold an edit that was never installed; appending anything
    /// after it would turn that into mid-file corruption or a conflicting edit, so every
    /// later `log_and_apply` fails with this error (the database is stopped until reopened).
    manifest_error: Option<Error>,
    /// Set by `recover` when the MANIFEST ended in a damaged record that was ignored as a
    /// torn tail: `(MANIFEST path, offset)`. Recovery uses it to name the MANIFEST when the
    /// WALs show that edits are missing.
    pub manifest_torn_tail: Option<(PathBuf, u64)>,
}

/// What recovery read from the MANIFEST.
#[derive(Debug)]
pub struct RecoveredManifest {
    /// Records that were replayed.
    pub edit_count: usize,
    /// A torn tail that was ignored.
    pub torn_tail_offset: Option<u64>,
}

impl VersionSet {
    /// A version set for a new, empty database (nothing is written until `write_snapshot`).
    pub fn new(
        directory: &Path,
        file_system: Arc<dyn FileSystem>,
        level_count: usize,
        manifest_size_bytes_max: u64,
    ) -> Self {
        VersionSet {
            directory: directory.to_path_buf(),
            file_system,
            level_count,
            manifest_size_bytes_max,
            current: Arc::new(Version::empty(level_count)),
            live_versions: Vec::new(),
            manifest: None,
            manifest_number: 0,
            log_number: 0,
            next_file_number: Arc::new(AtomicU64::new(1)),
            last_sequence: 0,
            compact_pointers: vec![None; level_count],
            manifest_error: None,
            manifest_torn_tail: None,
        }
    }

    /// Replays the MANIFEST named by CURRENT.
    pub fn recover(&mut self) -> Result<RecoveredManifest> {
        let current_path = filename::current_path(&self.directory);
        let current = self.file_system.read_all(&current_path)?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|text| text.strip_suffix('\n'))
            .filter(|name| {
                matches!(
                    filename::parse_file_name(name),
                    Some(filename::FileKind::Manifest(_))
                )
            })
            .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a MANIFEST"))?
            .to_string();
        let manifest_path = self.directory.join(&name);
        let contents = read_log(self.file_system.as_ref(), &manifest_path)?;
        let mut version = Version::empty(self.level_count);
        let mut saw_format = false;
        for (offset, payload) in contents.records() {
            let corrupt = |reason: String| Error::corruption(&manifest_path, offset, reason);
            let edit = VersionEdit::decode(payload).map_err(corrupt)?;
            if let Some(format) = edit.format_version {
                if format != MANIFEST_FORMAT_VERSION {
                    return Err(corrupt(format!(
                        "MANIFEST format version {format}; this build reads {MANIFEST_FORMAT_VERSION}"
                    )));
                }
                saw_format = true;
            }
            if !saw_format {
                return Err(corrupt(
                    "MANIFEST does not start with a format version".into(),
                ));
            }
            for (level, _) in &edit.added_files {
                if *level >= self.level_count {
                    return Err(corrupt(format!(
                        "file at level {level}, but the database is opened with {} levels",
                        self.level_count
                    )));
                }
            }
            version = apply_edit(&version, &edit).map_err(corrupt)?;
            self.apply_counters(&edit);
        }
        if contents.record_count() == 0 {
            return Err(Error::corruption(
                &manifest_path,
                0,
                "MANIFEST holds no edit",
            ));
        }
        // Every file number in use must be below next_file_number, or a new file could
        // overwrite a live one.
        let largest = version.file_numbers().max().unwrap_or(0);
        self.next_file_number
            .fetch_max(largest.max(self.log_number) + 1, AtomicOrdering::SeqCst);
        self.current = Arc::new(version);
        self.manifest_torn_tail = contents
            .torn_tail_offset
            .map(|offset| (manifest_path.clone(), offset));
        Ok(RecoveredManifest {
            edit_count: contents.record_count(),
            torn_tail_offset: contents.torn_tail_offset,
        })
    }

    fn apply_counters(&mut self, edit: &VersionEdit) {
        if let Some(number) = edit.log_number {
            self.log_number = number;
        }
        if let Some(number) = edit.next_file_number {
            self.next_file_number
                .fetch_max(number, AtomicOrdering::SeqCst);
        }
        if let Some(sequence) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(sequence);
        }
        for (level, key) in &edit.compact_pointers {
            if let Some(slot) = self.compact_pointers.get_mut(*level) {
                *slot = Some(key.clone());
            }
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// Allocates a file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, AtomicOrdering::SeqCst)
    }

    /// Makes sure `number` is never handed out again.
    pub fn reserve_file_numbers_through(&self, number: u64) {
        self.next_file_number
            .fetch_max(number.saturating_add(1), AtomicOrdering::SeqCst);
    }

    /// The shared file-number counter (see the field's comment).
    pub fn file_number_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.next_file_number)
    }

    /// Applies `edit` in memory only. Used by recovery before `write_snapshot`, which then
    /// records the result in a fresh MANIFEST.
    pub fn apply_unlogged(&mut self, edit: &VersionEdit) -> Result<()> {
        let version = apply_edit(&self.current, edit)
            .map_err(|reason| Error::Internal(format!("bad version edit: {reason}")))?;
        self.apply_counters(edit);
        self.install(version);
        Ok(())
    }

    /// The live MANIFEST's number.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Starts a fresh MANIFEST holding a snapshot of the current state and points CURRENT at
    /// it (write temp, sync, rename, sync directory). Used at open and when the MANIFEST grows
    /// past its limit.
    pub fn write_snapshot(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let path = filename::manifest_path(&self.directory, number);
        let mut writer = LogWriter::new(self.file_system.create(&path)?, path);
        let mut snapshot = VersionEdit {
            format_version: Some(MANIFEST_FORMAT_VERSION),
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number.load(AtomicOrdering::SeqCst)),
            last_sequence: Some(self.last_sequence),
            ..VersionEdit::default()
        };
        for (level, pointer) in self.compact_pointers.iter().enumerate() {
            if let Some(key) = pointer {
                snapshot.compact_pointers.push((level, key.clone()));
            }
        }
        for (level, files) in self.current.levels.iter().enumerate() {
            for file in files {
                snapshot
                    .added_files
                    .push((level, AddedFile::from_meta(file)));
            }
        }
        writer.add_record(&snapshot.encode())?;
        writer.sync()?;
        self.file_system.sync_dir(&self.directory)?;
        set_current(self.file_system.as_ref(), &self.directory, number)?;
        self.manifest = Some(writer);
        self.manifest_number = number;
        Ok(())
    }

    /// Logs `edit` durably, then makes the edited version current. On error nothing is
    /// installed in memory, although the edit may already be in the MANIFEST (a failed sync
    /// does not say the bytes are absent): the caller must keep the edit's new files (they
    /// may be referenced at the next open) and treat the error as sticky. After an error the
    /// MANIFEST is poisoned and every later call fails (see `manifest_error`).
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        if let Some(error) = &self.manifest_error {
            return Err(error.clone());
        }
        edit.next_file_number = Some(self.next_file_number.load(AtomicOrdering::SeqCst));
        edit.last_sequence = Some(edit.last_sequence.unwrap_or(0).max(self.last_sequence));
        let version = apply_edit(&self.current, &edit)
            .map_err(|reason| Error::Internal(format!("bad version edit: {reason}")))?;
        let logged = match self.manifest.as_mut() {
            Some(manifest) => manifest
                .add_record(&edit.encode())
                .and_then(|()| manifest.sync()),
            None => Err(Error::Internal("no MANIFEST open".into())),
        };
        if let Err(error) = logged {
            self.manifest_error = Some(error.clone());
            return Err(error);
        }
        let previous = (
            Arc::clone(&self.current),
            self.log_number,
            self.last_sequence,
            self.compact_pointers.clone(),
        );
        self.apply_counters(&edit);
        self.install(version);
        let too_big = self
            .manifest
            .as_ref()
            .is_some_and(|manifest| manifest.size_bytes() > self.manifest_size_bytes_max);
        if too_big {
            if let Err(error) = self.write_snapshot() {
                // The edit is durable in the old MANIFEST (and in the new one if CURRENT was
                // switched), but the caller will not install it: roll memory back so this
                // set and the caller agree, and stop logging (CURRENT may name either file).
                let (current, log_number, last_sequence, compact_pointers) = previous;
                self.current = current;
                self.log_number = log_number;
                self.last_sequence = last_sequence;
                self.compact_pointers = compact_pointers;
                self.manifest_error = Some(error.clone());
                return Err(error);
            }
        }
        Ok(self.current())
    }

    fn install(&mut self, version: Version) {
        let version = Arc::new(version);
        let previous = std::mem::replace(&mut self.current, Arc::clone(&version));
        self.live_versions.push(Arc::downgrade(&previous));
        self.live_versions.retain(|weak| weak.strong_count() > 0);
    }

    /// Every file number listed by the current version or any version still referenced.
    pub fn live_file_numbers(&mut self) -> std::collections::HashSet<u64> {
        self.live_versions.retain(|weak| weak.strong_count() > 0);
        let mut live: std::collections::HashSet<u64> = self.current.file_numbers().collect();
        for weak in &self.live_versions {
            if let Some(version) = weak.upgrade() {
                live.extend(version.file_numbers());
            }
        }
        live
    }
}

/// Points CURRENT at MANIFEST `number`, crash-safely.
fn set_current(file_system: &dyn FileSystem, directory: &Path, number: u64) -> Result<()> {
    let temporary = filename::current_temporary_path(directory);
    let mut file = file_system.create(&temporary)?;
    file.append(format!("{}\n", filename::manifest_name(number)).as_bytes())?;
    file.sync()?;
    drop(file);
    file_system.rename(&temporary, &filename::current_path(directory))?;
    file_system.sync_dir(directory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use crate::key::{internal_key, ValueKind};

    fn added(number: u64, low: &[u8], high: &[u8]) -> AddedFile {
        AddedFile {
            number,
            size_bytes: 100,
            smallest: internal_key(low, 5, ValueKind::Put),
            largest: internal_key(high, 1, ValueKind::Delete),
            smallest_sequence: 1,
            largest_sequence: 5,
        }
    }

    #[test]
    fn edit_round_trip_and_truncation() {
        let edit = VersionEdit {
            log_number: Some(3),
            next_file_number: Some(9),
            last_sequence: Some(77),
            format_version: Some(1),
            compact_pointers: vec![(2, b"k".to_vec())],
            deleted_files: vec![(1, 4)],
            added_files: vec![(2, added(8, b"a", b"z"))],
        };
        let encoded = edit.encode();
        assert_eq!(VersionEdit::decode(&encoded).unwrap(), edit);
        // A cut at a field boundary decodes to a shorter edit (the record checksum, not the
        // edit encoding, detects truncation); a cut inside a field is an error. Never a panic.
        for cut in 1..encoded.len() {
            assert_ne!(
                VersionEdit::decode(&encoded[..cut]).as_ref(),
                Ok(&edit),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn overlapping_files_in_a_level_are_rejected() {
        let base = Version::empty(3);
        let edit = VersionEdit {
            added_files: vec![(1, added(1, b"a", b"m")), (1, added(2, b"m", b"z"))],
            ..VersionEdit::default()
        };
        assert!(apply_edit(&base, &edit).is_err());
    }

    #[test]
    fn log_and_apply_then_recover() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let directory = Path::new("/db");
        let mut set = VersionSet::new(directory, Arc::clone(&fs), 4, 1 << 20);
        set.write_snapshot().unwrap();
        let first = set.new_file_number();
        set.log_and_apply(VersionEdit {
            added_files: vec![(0, added(first, b"a", b"c"))],
            log_number: Some(7),
            last_sequence: Some(10),
            ..VersionEdit::default()
        })
        .unwrap();
        let second = set.new_file_number();
        set.log_and_apply(VersionEdit {
            added_files: vec![(1, added(second, b"a", b"c"))],
            deleted_files: vec![(0, first)],
            ..VersionEdit::default()
        })
        .unwrap();

        let mut recovered = VersionSet::new(directory, Arc::clone(&fs), 4, 1 << 20);
        recovered.recover().unwrap();
        let version = recovered.current();
        assert!(version.files(0).is_empty());
        assert_eq!(version.files(1).len(), 1);
        assert_eq!(version.files(1)[0].number, second);
        assert_eq!(recovered.log_number, 7);
        assert_eq!(recovered.last_sequence, 10);
        assert!(recovered.new_file_number() > second);
    }

    #[test]
    fn manifest_rolls_over_when_too_big() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let directory = Path::new("/db");
        let mut set = VersionSet::new(directory, Arc::clone(&fs), 4, 1024);
        set.write_snapshot().unwrap();
        let first_manifest = set.manifest_number();
        for round in 0..40u64 {
            let number = set.new_file_number();
            let key = format!("{round:04}");
            set.log_and_apply(VersionEdit {
                added_files: vec![(0, added(number, key.as_bytes(), key.as_bytes()))],
                ..VersionEdit::default()
            })
            .unwrap();
        }
        assert_ne!(set.manifest_number(), first_manifest);
        let mut recovered = VersionSet::new(directory, fs, 4, 1024);
        recovered.recover().unwrap();
        assert_eq!(recovered.current().files(0).len(), 40);
    }
}
