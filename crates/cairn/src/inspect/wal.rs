//! `dump-wal`: one write-ahead log's records and the batches they carry.
//!
//! Reads with the engine's own log reader (`wal::read_wal`, strict about damage
//! before the end) and batch decoder; this is the one file of the inspection tools that
//! reads WAL internals.
//!
//! Thread-safety contract: a pure function of the file's bytes; see the parent module.
//!
//! Invariants:
//! 1. Records are listed in file order with the offset of each record header; entries of a
//!    record carry consecutive sequence numbers from the record's first.
//! 2. Damage followed by valid records is an `Err` naming the file and offset; a torn tail
//!    (the expected end of a log whose writer died) is reported in [`WalDump::torn_tail`].

use super::Entry;
use crate::batch::DecodedBatch;
use crate::error::{Error, Result};
use crate::fs::StdFs;
use crate::options::WalRecovery;
use crate::wal::{read_wal, RECORD_PAYLOAD_BYTES_MAX};
use std::path::Path;

/// One write-batch record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// Offset of the record header in the file.
    pub offset: u64,
    /// Sequence number of the first entry.
    pub first_sequence: u64,
    /// The entries (empty for a void record, which consumed one sequence number).
    pub entries: Vec<Entry>,
}

/// Everything [`dump_wal`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalDump {
    /// File size.
    pub size_bytes: u64,
    /// The write-batch records, in file order.
    pub records: Vec<WalRecord>,
    /// Offset of a torn tail (a last record only partly written), ignored as recovery does.
    pub torn_tail: Option<u64>,
}

/// Reads the WAL at `path`. Damage before the last valid record is an error naming the
/// offset, as under [`WalRecovery::Strict`].
///
/// ```
/// # fn main() -> cairn::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("cairn-dump-wal-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut options = cairn::Options::default();
/// options.create_if_missing = true;
/// let db = cairn::Db::open(&dir, options)?;
/// db.put(b"k", b"v")?;
/// drop(db);
/// let mut records = 0;
/// for entry in std::fs::read_dir(&dir).unwrap() {
///     let path = entry.unwrap().path();
///     if path.extension().is_some_and(|ext| ext == "log") {
///         records += cairn::inspect::wal::dump_wal(&path)?.records.len();
///     }
/// }
/// assert!(records >= 1);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn dump_wal(path: &Path) -> Result<WalDump> {
    let contents = read_wal(
        &StdFs,
        path,
        RECORD_PAYLOAD_BYTES_MAX,
        false,
        WalRecovery::Strict,
    )?;
    let size_bytes = std::fs::metadata(path)
        .map_err(|error| Error::io("stat", path, error))?
        .len();
    let mut records = Vec::with_capacity(contents.record_count());
    for (offset, payload) in contents.records() {
        let corrupt = |reason: String| Error::corruption(path, offset, reason);
        let batch = DecodedBatch::decode(payload).map_err(corrupt)?;
        let mut entries = Vec::with_capacity(batch.count as usize);
        for (sequence, entry) in (batch.first_sequence..).zip(batch.iter()) {
            let (kind, key, value) = entry.map_err(corrupt)?;
            entries.push(Entry {
                key: key.to_vec(),
                sequence,
                kind: kind.into(),
                value: value.to_vec(),
            });
        }
        records.push(WalRecord {
            offset,
            first_sequence: batch.first_sequence,
            entries,
        });
    }
    Ok(WalDump {
        size_bytes,
        records,
        torn_tail: contents.torn_tail_offset,
    })
}
