//! cairn: a concurrent log-structured key-value storage engine.
//!
//! See `ARCHITECTURE.md` at the repository root for the write path, read path, flush,
//! compaction and recovery, and `docs/format.md` for every on-disk byte layout.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub(crate) mod coding;
pub(crate) mod epoch;
pub(crate) mod error;
pub mod fs;
#[cfg(any(test, feature = "testing"))]
pub(crate) mod fuzzing;
pub(crate) mod hashindex;
pub(crate) mod iter;
pub(crate) mod key;
pub(crate) mod logmem;
pub(crate) mod memory;
pub(crate) mod memstore;
pub(crate) mod memtable;
pub(crate) mod options;
pub(crate) mod pages;
pub(crate) mod sstable;

pub use error::{Error, Result};
pub use fs::{FaultFs, FileSystem, MemFs, StdFs};
pub use key::SequenceNumber;
pub use memstore::{MemStore, MemStoreOptions, MemStoreStats};
pub use options::{Compression, Options, ReadOptions, WriteOptions};

pub(crate) mod batch;
pub(crate) mod compaction;
pub(crate) mod db;
pub(crate) mod db_iter;
pub(crate) mod filename;
pub(crate) mod sequence;
pub(crate) mod snapshot;
pub(crate) mod stats;
pub(crate) mod sync;
pub(crate) mod table_cache;
#[cfg(feature = "testing")]
pub mod testing;
pub(crate) mod version;
pub(crate) mod wal;
pub(crate) mod wal_writer;

pub use batch::WriteBatch;
pub use compaction::{CompactionFilter, FilterDecision};
pub use db::{Db, Update};
pub use db_iter::{DbIterator, RangeIter};
pub use snapshot::Snapshot;
pub use stats::Stats;
