//! cairn: a concurrent log-structured key-value storage engine.
//!
//! See `ARCHITECTURE.md` at the repository root for the write path, read path, flush,
//! compaction and recovery, and `docs/format.md` for every on-disk byte layout.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod coding;
pub mod error;
pub mod fs;
pub mod iter;
pub mod key;
pub mod options;
pub mod sstable;

pub use error::{Error, Result};
pub use fs::{FileSystem, MemFs, StdFs};
pub use key::{SequenceNumber, ValueKind};
pub use options::{Compression, Options, ReadOptions, WriteOptions};
