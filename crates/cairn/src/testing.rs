//! Internals exposed to integration tests, fuzz targets and examples (only with the `testing`
//! feature, which the crate's own dev-dependency turns on). The engine's modules are
//! crate-private; this module re-exports, under the same module names, exactly the pieces the
//! golden-byte format tests, the corruption and crash tests, the fuzz targets and the
//! `memtable_lookup` example drive directly instead of going through a whole database.
//!
//! Thread-safety contract: every item is the engine's own, with the contract its module
//! documents; the functions defined here are plain functions over owned values.
//!
//! Invariants:
//! 1. Nothing here has behaviour of its own: every item is a re-export or forwards to the
//!    encoder the engine itself uses, so a golden file compared against its output pins the
//!    real on-disk bytes.
//! 2. Nothing outside the `testing` feature depends on this module.

use crate::batch::WriteBatch;
use crate::key::SequenceNumber;

/// The WAL record payload `batch` is logged as when its first entry gets `first_sequence`
/// (what `Db::write` hands the WAL writer).
pub fn encode_batch(batch: &mut WriteBatch, first_sequence: SequenceNumber) -> Vec<u8> {
    batch.encode(first_sequence).to_vec()
}

/// Write-batch record encoding.
pub mod batch {
    pub use crate::batch::{void_record, DecodedBatch, WriteBatch};
}

/// Checksums.
pub mod coding {
    pub use crate::coding::masked_crc;
}

/// File names in a database directory.
pub mod filename {
    pub use crate::filename::{manifest_name, parse_file_name, FileKind};
}

/// The fuzz targets' bodies (run by `fuzz/` and replayed by `tests/fuzz.rs`).
pub mod fuzzing {
    pub use crate::fuzzing::{
        fuzz_block, fuzz_table, fuzz_version_edit, fuzz_wal, fuzz_wal_recovery,
    };
}

/// The iterator protocol every internal source implements.
pub mod iter {
    pub use crate::iter::InternalIterator;
}

/// Internal keys.
pub mod key {
    pub use crate::key::{internal_key, ValueKind};
}

/// The `MemStore`'s log objects.
pub mod logmem {
    /// Object layout.
    pub mod object {
        pub use crate::logmem::object::object_len;
    }
}

/// The concurrent skiplist memtable.
pub mod memtable {
    pub use crate::memtable::Memtable;
}

/// `SSTable` blocks, filters, footers and tables.
pub mod sstable {
    pub use crate::sstable::{
        read_block, Block, BlockBuilder, BlockHandle, BlockOrigin, BloomFilter, BloomFilterBuilder,
        Footer, Table, TableBuilder, TableOptions,
    };

    /// Byte-level layout constants and encoders.
    pub mod format {
        pub use crate::sstable::format::{
            encode_block, FOOTER_BYTES, FOOTER_VERSION_OFFSET, FORMAT_VERSION,
            FORMAT_VERSION_OLDEST, FORMAT_VERSION_ZSTD, KIND_ZSTD,
        };
    }
}

/// The MANIFEST and its edits.
pub mod version {
    pub use crate::version::{AddedFile, VersionEdit, VersionSet, MANIFEST_FORMAT_VERSION};
}

/// The write-ahead log's record format.
pub mod wal {
    pub use crate::wal::{
        parse_log, parse_wal, sync_marker_record, sync_marker_record_v2, wal_header_record,
        LogWriter, RECORD_PAYLOAD_BYTES_MAX, WAL_SYNC_MARKER_MAGIC,
    };
}
