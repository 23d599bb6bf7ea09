//! `dump-manifest`: the edits of the MANIFEST that `CURRENT` names, and the live tables they
//! add up to.
//!
//! Reads with the engine's own log reader and edit decoder; this is the one file of the
//! inspection tools that reads MANIFEST internals. The live set is replayed here by file
//! number (added minus deleted), without the engine's run bookkeeping.
//!
//! Thread-safety contract: a pure function of the files' bytes; see the parent module.
//!
//! Invariants:
//! 1. Edits are listed in file order with the offset of each record header.
//! 2. A record that does not decode, or a `CURRENT` that names no MANIFEST, is an `Err`
//!    naming the file (and offset).

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::StdFs;
use crate::key::parse_internal_key;
use crate::version::VersionEdit;
use crate::wal::read_log;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A table an edit adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedTable {
    /// The level it joins.
    pub level: usize,
    /// Its file number.
    pub number: u64,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Its smallest user key.
    pub smallest_key: Vec<u8>,
    /// Its largest user key.
    pub largest_key: Vec<u8>,
    /// Its smallest sequence number.
    pub smallest_sequence: u64,
    /// Its largest sequence number.
    pub largest_sequence: u64,
}

/// One MANIFEST record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEdit {
    /// Offset of the record header in the MANIFEST.
    pub offset: u64,
    /// MANIFEST format version (in the first edit).
    pub format_version: Option<u32>,
    /// WALs numbered below this are flushed.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The largest sequence number used so far.
    pub last_sequence: Option<u64>,
    /// `(level, user key)` where the level's next compaction starts.
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// `(level, file number)` removed.
    pub deleted_tables: Vec<(usize, u64)>,
    /// Tables added.
    pub added_tables: Vec<AddedTable>,
}

/// A table the MANIFEST lists as live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTable {
    /// Its path.
    pub path: PathBuf,
    /// What the MANIFEST records about it.
    pub table: AddedTable,
}

/// Everything [`dump_manifest`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestDump {
    /// The MANIFEST that `CURRENT` names.
    pub path: PathBuf,
    /// Its edits, in file order.
    pub edits: Vec<ManifestEdit>,
    /// Offset of a torn tail, if the last record was only partly written.
    pub torn_tail: Option<u64>,
}

fn user_key(internal: &[u8]) -> Vec<u8> {
    parse_internal_key(internal).map_or_else(|| internal.to_vec(), |key| key.user_key.to_vec())
}

/// The path of the MANIFEST that `CURRENT` in `directory` names.
pub(crate) fn current_manifest(directory: &Path) -> Result<PathBuf> {
    let current_path = filename::current_path(directory);
    let current = std::fs::read(&current_path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            Error::NotFound {
                path: directory.to_path_buf(),
            }
        } else {
            Error::io("read", &current_path, error)
        }
    })?;
    std::str::from_utf8(&current)
        .ok()
        .and_then(|text| text.strip_suffix('\n'))
        .filter(|name| matches!(filename::parse_file_name(name), Some(FileKind::Manifest(_))))
        .map(|name| directory.join(name))
        .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a MANIFEST"))
}

fn public_edit(offset: u64, edit: VersionEdit) -> ManifestEdit {
    ManifestEdit {
        offset,
        format_version: edit.format_version,
        log_number: edit.log_number,
        next_file_number: edit.next_file_number,
        last_sequence: edit.last_sequence,
        compact_pointers: edit
            .compact_pointers
            .into_iter()
            .map(|(level, key)| (level, user_key(&key)))
            .collect(),
        deleted_tables: edit.deleted_files,
        added_tables: edit
            .added_files
            .into_iter()
            .map(|(level, file)| AddedTable {
                level,
                number: file.number,
                size_bytes: file.size_bytes,
                smallest_key: user_key(&file.smallest),
                largest_key: user_key(&file.largest),
                smallest_sequence: file.smallest_sequence,
                largest_sequence: file.largest_sequence,
            })
            .collect(),
    }
}

/// Reads every edit of the MANIFEST that `CURRENT` in `directory` names.
///
/// ```
/// # fn main() -> cairn::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("cairn-dump-manifest-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut options = cairn::Options::default();
/// options.create_if_missing = true;
/// drop(cairn::Db::open(&dir, options)?);
/// let dump = cairn::inspect::manifest::dump_manifest(&dir)?;
/// assert!(dump.edits[0].format_version.is_some());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn dump_manifest(directory: &Path) -> Result<ManifestDump> {
    let path = current_manifest(directory)?;
    let contents = read_log(&StdFs, &path)?;
    let mut edits = Vec::with_capacity(contents.record_count());
    for (offset, payload) in contents.records() {
        let edit = VersionEdit::decode(payload)
            .map_err(|reason| Error::corruption(&path, offset, reason))?;
        edits.push(public_edit(offset, edit));
    }
    Ok(ManifestDump {
        path,
        edits,
        torn_tail: contents.torn_tail_offset,
    })
}

/// The tables the MANIFEST of `directory` lists as live, by level then file number.
///
/// ```
/// # fn main() -> cairn::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("cairn-live-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut options = cairn::Options::default();
/// options.create_if_missing = true;
/// drop(cairn::Db::open(&dir, options)?);
/// assert!(cairn::inspect::manifest::live_tables(&dir)?.is_empty());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn live_tables(directory: &Path) -> Result<Vec<LiveTable>> {
    let mut live: BTreeMap<u64, AddedTable> = BTreeMap::new();
    for edit in dump_manifest(directory)?.edits {
        for (_, number) in &edit.deleted_tables {
            live.remove(number);
        }
        for table in edit.added_tables {
            live.insert(table.number, table);
        }
    }
    let mut tables: Vec<LiveTable> = live
        .into_values()
        .map(|table| LiveTable {
            path: filename::table_path(directory, table.number),
            table,
        })
        .collect();
    tables.sort_by_key(|live| (live.table.level, live.table.number));
    Ok(tables)
}
