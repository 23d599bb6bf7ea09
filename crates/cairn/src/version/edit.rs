//! Version edits: the records of the MANIFEST, and their byte encoding.
//!
//! A [`VersionEdit`] lists files added and removed (by level) and the counters a flush or
//! compaction moved; `docs/format.md` ("MANIFEST") documents every byte. Edits name a level
//! for each file and, from MANIFEST format version 3 on, the run it joins (`file_runs`, tag 8);
//! an added file with no run entry (every file of a version-1 or version-2 MANIFEST) is placed
//! as the parent module's doc says.
//!
//! Invariants:
//! 1. `decode(encode(edit)) == edit` for every edit.
//! 2. `decode` never panics: malformed input is an `Err` naming the problem.
//!
//! Thread-safety contract: plain values, `Send + Sync`, no shared state.

use crate::coding::{put_length_prefixed, put_u32, put_u64, Reader};
use crate::key::SequenceNumber;

use super::FileMeta;

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
    /// `(file number, run id)`: the run of its level that an added file joins (format
    /// version 3). Run ids order a level's runs, the larger the newer.
    pub file_runs: Vec<(u64, u64)>,
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
    /// Format version 3: `number u64 | run id u64`, the run an added file joins.
    pub const FILE_RUN: u8 = 8;
}

/// Levels are stored in one byte; 32 levels at most (see `Options::validate`).
#[allow(clippy::cast_possible_truncation)] // bounded by `Options::validate`, as above
fn level_byte(level: usize) -> u8 {
    debug_assert!(level < 256);
    level as u8
}

impl VersionEdit {
    /// The run each added file names (`file_runs`), as a map: the first entry for a file
    /// wins. A map, not a search of the list per file (a snapshot edit of n files would cost
    /// O(n²)).
    pub(crate) fn runs_named(&self) -> std::collections::HashMap<u64, u64> {
        let mut run_of = std::collections::HashMap::with_capacity(self.file_runs.len());
        for &(number, run) in &self.file_runs {
            run_of.entry(number).or_insert(run);
        }
        run_of
    }

    /// The run id an added file `number` joins at `level` (the placement rule of the
    /// `version` module documentation): the run `runs_named` gives it, else at level 0 a run
    /// of its own, else the level's newest run `newest` (formats 1 and 2, one run per level),
    /// or run 0 in an empty level.
    pub(crate) fn run_for(
        number: u64,
        level: usize,
        runs_named: &std::collections::HashMap<u64, u64>,
        newest: Option<u64>,
    ) -> u64 {
        match runs_named.get(&number).copied() {
            Some(id) => id,
            None if level == 0 => number,
            None => newest.unwrap_or(0),
        }
    }

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
        for (number, run) in &self.file_runs {
            buffer.push(tag::FILE_RUN);
            put_u64(&mut buffer, *number);
            put_u64(&mut buffer, *run);
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
                    edit.format_version = Some(reader.u32().ok_or_else(truncated)?);
                }
                tag::LOG_NUMBER => edit.log_number = Some(number_bound(&mut reader)?),
                tag::NEXT_FILE_NUMBER => {
                    edit.next_file_number = Some(number_bound(&mut reader)?);
                }
                tag::LAST_SEQUENCE => {
                    let sequence = reader.u64().ok_or_else(truncated)?;
                    // Above it, the next sequence would not fit a key (or would wrap).
                    if sequence > crate::key::SEQUENCE_MAX {
                        return Err(format!("last sequence {sequence} past the largest"));
                    }
                    edit.last_sequence = Some(sequence);
                }
                tag::COMPACT_POINTER => {
                    let level = reader.u8().ok_or_else(truncated)? as usize;
                    let key = reader.length_prefixed().ok_or_else(truncated)?.to_vec();
                    edit.compact_pointers.push((level, key));
                }
                tag::DELETED_FILE => {
                    let level = reader.u8().ok_or_else(truncated)? as usize;
                    let number = file_number(&mut reader)?;
                    edit.deleted_files.push((level, number));
                }
                tag::ADDED_FILE => {
                    let level = reader.u8().ok_or_else(truncated)? as usize;
                    let number = file_number(&mut reader)?;
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
                tag::FILE_RUN => {
                    let number = file_number(&mut reader)?;
                    let run = file_number(&mut reader)?;
                    edit.file_runs.push((number, run));
                }
                unknown => return Err(format!("unknown edit tag {unknown}")),
            }
        }
        Ok(edit)
    }
}

/// A file number (or run id) field: below `FILE_NUMBER_MAX`, as every name
/// cairn parses is, or the edit is refused.
fn file_number(reader: &mut Reader<'_>) -> std::result::Result<u64, String> {
    let number = number_bound(reader)?;
    if number == crate::filename::FILE_NUMBER_MAX {
        return Err(format!("file number {number} past the largest"));
    }
    Ok(number)
}

/// A bound on file numbers (the next one to hand out, the oldest live log):
/// at most `FILE_NUMBER_MAX`, which the last file number allowed is below.
fn number_bound(reader: &mut Reader<'_>) -> std::result::Result<u64, String> {
    let number = reader.u64().ok_or_else(|| "edit truncated".to_string())?;
    if number > crate::filename::FILE_NUMBER_MAX {
        return Err(format!("file number {number} past the largest"));
    }
    Ok(number)
}
