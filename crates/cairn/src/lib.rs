//! cairn: a concurrent log-structured key-value storage engine.
//!
//! See `ARCHITECTURE.md` at the repository root for the write path, read path, flush,
//! compaction and recovery, and `docs/format.md` for every on-disk byte layout.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod coding;
pub mod epoch;
pub mod error;
pub mod fs;
pub mod fuzzing;
pub mod hashindex;
pub mod iter;
pub mod key;
pub mod logmem;
pub mod memory;
pub mod memstore;
pub mod memtable;
pub mod options;
pub mod pages;
pub mod sstable;

pub use error::{Error, Result};
/// The fault-injecting file system under its former path (`fs::fault`).
pub use fs::fault as fault_fs;
pub use fs::{FaultFs, FileSystem, MemFs, StdFs};
pub use key::{SequenceNumber, ValueKind};
pub use memstore::{MemStore, MemStoreOptions, MemStoreStats};
pub use options::{Compression, Options, ReadOptions, WalRecovery, WriteOptions};

pub mod batch;
pub mod compaction;
pub mod db;
pub mod db_iter;
pub mod filename;
pub mod sequence;
pub mod snapshot;
pub mod stats;
pub mod sync;
pub mod table_cache;
#[cfg(feature = "testing")]
pub mod testing;
pub mod version;
pub mod wal;
pub mod wal_writer;

pub use batch::WriteBatch;
pub use compaction::{CompactionFilter, FilterDecision};
pub use db::{Db, Update};
pub use db_iter::{DbIterator, RangeIter};
pub use snapshot::Snapshot;
pub use stats::Stats;
