//! The version set: the current version, the MANIFEST it is logged to, and its counters.
//!
//! Invariants:
//! 1. An edit is appended to the MANIFEST and synced *before* the version it produces is
//!    installed, so what readers can see is always on disk.
//! 2. A MANIFEST starts with a full snapshot edit, so replaying one MANIFEST alone rebuilds
//!    the version; `CURRENT` names the live MANIFEST and is replaced atomically.
//! 3. After a MANIFEST write fails, nothing more is appended (`manifest_error` is sticky).
//!
//! Thread-safety contract: `VersionSet` is not synchronised itself — the database holds it in
//! a mutex taken only by background work and open, never by reads or writes.

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::key::SequenceNumber;
use crate::wal::{read_log, LogContents, LogWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Weak};

use super::builder::{first_bad_edit, VersionBuilder};
use super::{
    apply_edit, AddedFile, Version, VersionEdit, MANIFEST_FORMAT_VERSION,
    MANIFEST_FORMAT_VERSION_OLDEST,
};

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
    /// Bytes of the live MANIFEST's first record, the snapshot (0 before one is written): the
    /// MANIFEST rolls over at twice this, or at `manifest_size_bytes_max` if that is larger,
    /// so a snapshot past the limit does not make every edit rewrite every live file.
    snapshot_bytes: u64,
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
    /// The format version of the MANIFEST `recover` read (this build's for a new database):
    /// from version 2 on, every WAL the MANIFEST leaves to replay is a version-2 WAL.
    pub manifest_format_version: u32,
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
            snapshot_bytes: 0,
            log_number: 0,
            next_file_number: Arc::new(AtomicU64::new(1)),
            last_sequence: 0,
            compact_pointers: vec![None; level_count],
            manifest_error: None,
            manifest_torn_tail: None,
            manifest_format_version: MANIFEST_FORMAT_VERSION,
        }
    }

    /// Replays the MANIFEST named by CURRENT; returns how many edit records were replayed.
    pub fn recover(&mut self) -> Result<usize> {
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
        let version = self.replay(&contents, &manifest_path)?;
        // Every file number in use must be below next_file_number, or a new file could
        // overwrite a live one.
        let largest = version.file_numbers().max().unwrap_or(0);
        self.next_file_number
            .fetch_max(largest.max(self.log_number) + 1, AtomicOrdering::SeqCst);
        self.current = Arc::new(version);
        self.manifest_torn_tail = contents
            .torn_tail_offset
            .map(|offset| (manifest_path.clone(), offset));
        Ok(contents.record_count())
    }

    /// The version `contents` (the MANIFEST at `manifest_path`) describes, its counters
    /// applied to `self` (`VersionBuilder`: the edits in place, the version built once).
    fn replay(&mut self, contents: &LogContents, manifest_path: &Path) -> Result<Version> {
        let corrupt =
            |offset: u64, reason: String| Error::corruption(manifest_path, offset, reason);
        let mut builder = VersionBuilder::new(self.level_count);
        let mut saw_format = false;
        for (offset, payload) in contents.records() {
            let edit = VersionEdit::decode(payload).map_err(|reason| corrupt(offset, reason))?;
            if let Some(format) = edit.format_version {
                check_manifest_format(format).map_err(|reason| corrupt(offset, reason))?;
                self.manifest_format_version = format;
                saw_format = true;
            }
            if !saw_format {
                return Err(corrupt(
                    offset,
                    "MANIFEST does not start with a format version".into(),
                ));
            }
            if let Some((level, _)) = edit
                .added_files
                .iter()
                .find(|(level, _)| *level >= self.level_count)
            {
                return Err(corrupt(
                    offset,
                    format!(
                        "file at level {level}, but the database is opened with {} levels",
                        self.level_count
                    ),
                ));
            }
            builder
                .apply(&edit)
                .map_err(|reason| corrupt(offset, reason))?;
            self.apply_counters(&edit);
        }
        if contents.record_count() == 0 {
            return Err(corrupt(0, "MANIFEST holds no edit".into()));
        }
        builder.build().map_err(|reason| {
            // Name the edit whose version first broke an invariant (decoded once more: only
            // a damaged MANIFEST gets here).
            let edits: Vec<(u64, VersionEdit)> = contents
                .records()
                .filter_map(|(offset, payload)| Some((offset, VersionEdit::decode(payload).ok()?)))
                .collect();
            match first_bad_edit(self.level_count, edits.iter().map(|(_, edit)| edit)) {
                Some((index, reason)) => {
                    corrupt(edits.get(index).map_or(0, |(offset, _)| *offset), reason)
                }
                None => corrupt(0, reason),
            }
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
        for level in 0..self.current.level_count() {
            let runs = self.current.level(level);
            for (index, run) in runs.runs().enumerate() {
                for file in run.files() {
                    snapshot
                        .added_files
                        .push((level, AddedFile::from_meta(file)));
                    // Level-0 run ids are file numbers (derived); deeper ones are recorded.
                    if let Some(id) = runs.run_id(index).filter(|_| level > 0) {
                        snapshot.file_runs.push((file.number, id));
                    }
                }
            }
        }
        writer.add_record(&snapshot.encode())?;
        writer.sync()?;
        self.file_system.sync_dir(&self.directory)?;
        set_current(self.file_system.as_ref(), &self.directory, number)?;
        self.snapshot_bytes = writer.size_bytes();
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
        let rollover_bytes = self
            .manifest_size_bytes_max
            .max(self.snapshot_bytes.saturating_mul(2));
        let too_big = self
            .manifest
            .as_ref()
            .is_some_and(|manifest| manifest.size_bytes() > rollover_bytes);
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

/// Whether this build reads MANIFEST format `format`; the reason if not.
fn check_manifest_format(format: u32) -> std::result::Result<(), String> {
    if (MANIFEST_FORMAT_VERSION_OLDEST..=MANIFEST_FORMAT_VERSION).contains(&format) {
        return Ok(());
    }
    let age = if format < MANIFEST_FORMAT_VERSION_OLDEST {
        "is too old"
    } else {
        "is newer than this build"
    };
    Err(format!(
        "MANIFEST format version {format} {age}; this build reads versions \
         {MANIFEST_FORMAT_VERSION_OLDEST} to {MANIFEST_FORMAT_VERSION}"
    ))
}
