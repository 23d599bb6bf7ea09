//! Offline inspection of a database's files, for the `cairn` tools (`dump-table`, `dump-wal`,
//! `dump-manifest`, `verify`, `sizes`), in the spirit of `RocksDB`'s `sst_dump` and `ldb`.
//!
//! Every function reads files only: none takes the directory lock, writes a byte or needs
//! the database to be closed. Run beside a live writer they read whatever the files hold at
//! that moment; a table the writer deletes meanwhile is reported as missing, never misread.
//! Each tool uses the engine's own readers, one file per tool: [`mod@table`] (the `SSTable`
//! reader's blocks and footer), [`mod@wal`] (the log reader and batch decoding),
//! [`mod@manifest`] (MANIFEST edits), [`mod@verify`] and [`mod@sizes`] (built on the other
//! three).
//!
//! Thread-safety contract: plain functions over paths; every returned value is owned data
//! (`Send + Sync`), and any number of threads may inspect the same files at once.
//!
//! Invariants:
//! 1. Every problem found in a file is an `Err` (or a [`verify::FileCheck`] problem) that
//!    names the file and, where the format has one, the byte offset; no input bytes can make
//!    these functions panic.
//! 2. Entries are returned in file order: a table's in internal-key order, a WAL's in
//!    sequence order within each record.
//!
//! ```
//! # fn main() -> cairn::Result<()> {
//! let dir = std::env::temp_dir().join(format!("cairn-inspect-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let mut options = cairn::Options::default();
//! options.create_if_missing = true;
//! let db = cairn::Db::open(&dir, options)?;
//! db.put(b"apple", b"red")?;
//! db.flush()?;
//! drop(db);
//! let report = cairn::inspect::verify::verify_dir(&dir)?;
//! assert!(report.is_ok(), "{report:?}");
//! let tables = cairn::inspect::manifest::live_tables(&dir)?;
//! assert_eq!(tables.len(), 1);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

pub mod manifest;
pub mod sizes;
pub mod table;
pub mod verify;
pub mod wal;

#[cfg(test)]
mod tests;

use crate::key::{parse_internal_key, ValueKind};

/// What an entry does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// The key holds the entry's value.
    Put,
    /// The key is deleted (a tombstone; the value is empty).
    Delete,
    /// The key holds a value until an expiry: the entry's value is the 8-byte little-endian
    /// expiry (milliseconds since the Unix epoch) followed by the value, as stored.
    PutWithExpiry,
}

impl EntryKind {
    /// `"put"`, `"delete"` or `"put-with-expiry"`.
    ///
    /// ```
    /// assert_eq!(cairn::inspect::EntryKind::Delete.name(), "delete");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Put => "put",
            EntryKind::Delete => "delete",
            EntryKind::PutWithExpiry => "put-with-expiry",
        }
    }
}

impl From<ValueKind> for EntryKind {
    fn from(kind: ValueKind) -> Self {
        match kind {
            ValueKind::Put => EntryKind::Put,
            ValueKind::Delete => EntryKind::Delete,
            ValueKind::PutWithExpiry => EntryKind::PutWithExpiry,
        }
    }
}

/// One versioned entry of a table or a WAL record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The user's key.
    pub key: Vec<u8>,
    /// The write's sequence number.
    pub sequence: u64,
    /// Put or delete.
    pub kind: EntryKind,
    /// The value (empty for a delete).
    pub value: Vec<u8>,
}

/// A table's internal key split into `(user key, sequence, kind)`; `None` if malformed.
pub(crate) fn split_internal_key(internal: &[u8]) -> Option<(Vec<u8>, u64, EntryKind)> {
    let parsed = parse_internal_key(internal)?;
    Some((
        parsed.user_key.to_vec(),
        parsed.sequence,
        parsed.kind.into(),
    ))
}
