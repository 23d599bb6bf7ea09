//! cairn: a concurrent log-structured key-value storage engine.
//!
//! See `ARCHITECTURE.md` at the repository root for the write path, read path, flush,
//! compaction and recovery, and `docs/format.md` for every on-disk byte layout.
//!
//! ```
//! use cairn::{Db, Options};
//!
//! let db = Db::open("/db", Options::in_memory())?;
//! db.put("hello", "world")?;
//! assert_eq!(db.get("hello")?, Some(b"world".to_vec()));
//! for pair in db.prefix("hel")? {
//!     let (key, value) = pair?;
//!     assert_eq!((&key[..], &value[..]), (&b"hello"[..], &b"world"[..]));
//! }
//! # Ok::<(), cairn::Error>(())
//! ```
//!
//! Thread-safety: [`Db`] and [`MemStore`] are `Send + Sync`; share one handle (`Arc`) among
//! threads. Invariants of each structure are stated in its module.

// The lint wall. CI runs clippy with `-D warnings`, so every `warn` here fails the build too;
// the `deny`s also fail a plain `cargo build`.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
// Library code reports failures as `Error`s instead of panicking on them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
#![warn(clippy::pedantic)]
// The pedantic lints this crate opts out of, each for a reason:
#![allow(
    // Nearly every getter and constructor would carry it; the compiler already warns about
    // unused `Result`s, which are the values whose loss matters.
    clippy::must_use_candidate,
    clippy::return_self_not_must_use,
    // Every fallible function returns the one `Error` enum, whose variants document when
    // each is returned; repeating that on every function adds nothing.
    clippy::missing_errors_doc,
    // Statistics and sizing ratios (`u64 as f64`): precision loss past 2^52 is irrelevant
    // to a ratio or an estimate.
    clippy::cast_precision_loss,
    // Manual `Debug` impls deliberately leave out raw buffers, atomics and pointers: the
    // output stays readable and never reads memory another thread is writing.
    clippy::missing_fields_in_debug,
    // A two-arm `match` on an `Option` reads as well as `if let … else`; rewriting them all
    // would be churn in files other work is changing at the same time.
    clippy::single_match_else,
    // Raw buffers are cast to the node, bucket, segment and header types they were allocated
    // for, with those types' alignment; every dereference sits in an `unsafe` block whose
    // SAFETY comment states why it is sound, and prefetches never dereference.
    clippy::cast_ptr_alignment,
    // Helpers stay methods of the structure they serve (node accessors, the fault model's
    // no-op invariant check) even where they need only their arguments today.
    clippy::unused_self,
    // `iter()` returns the engine's seekable cursors (`DbIterator`, `InternalIterator`),
    // which are deliberately not `std::iter::Iterator`.
    clippy::iter_not_returning_iterator,
    clippy::iter_without_into_iter,
)]
// Last, so it overrides the lines above. Unit tests may panic: a failed `unwrap` there is a
// failed test. Their casts build small test data (loop indices as bytes, counters as
// lengths).
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

pub(crate) mod coding;
pub(crate) mod epoch;
pub(crate) mod error;
pub(crate) mod expiry;
pub mod fs;
#[cfg(any(test, feature = "testing"))]
pub(crate) mod fuzzing;
pub(crate) mod hashindex;
#[cfg(feature = "inspect")]
pub mod inspect;
pub(crate) mod iter;
pub(crate) mod key;
pub(crate) mod logmem;
pub(crate) mod lookup_pool;
pub(crate) mod membuffer;
pub(crate) mod memory;
pub(crate) mod memstore;
pub(crate) mod memtable;
pub(crate) mod options;
pub(crate) mod pages;
pub(crate) mod sstable;

pub use error::{Error, Result};
pub use fs::{FaultFs, FileSystem, MemFs, StdFs};
pub use key::{SequenceNumber, KEY_BYTES_MAX, VALUE_BYTES_MAX};
pub use memstore::{MemStore, MemStoreOptions, MemStoreStats};
pub use options::{
    BloomAllocation, CompactionStyle, Compression, LevelOptions, Options, ReadOptions,
    TableReadMode, WalRecovery, WriteOptions,
};

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
pub(crate) mod tagged;
#[cfg(feature = "testing")]
pub mod testing;
pub(crate) mod version;
pub(crate) mod wal;
pub(crate) mod wal_writer;

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}

pub use batch::{WriteBatch, BATCH_BYTES_MAX, BATCH_ENTRIES_MAX};
pub use compaction::{CompactionFilter, FilterDecision};
pub use db::{Db, Update, WriteOutcome};
pub use db_iter::{DbIterator, RangeIter};
pub use snapshot::Snapshot;
pub use sstable::pinned::PinnedValue;
pub use stats::{LevelStats, RunStats, Stats};
