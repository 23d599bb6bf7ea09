//! Sorted string tables (SSTables): the immutable on-disk runs of the LSM tree.
//!
//! One concept per file: [`block`] (prefix-compressed sorted blocks), [`bloom`] (blocked Bloom
//! filter), [`format`](mod@format) (block handles, block trailer, footer, checked block reads),
//! [`properties`] (table facts), [`builder`] (writing a table), [`cache`] (the shared block
//! cache), [`fences`] (the index's fence keys condensed for point lookups), [`pinned`] (values
//! read in place) and [`reader`] (opening, point lookups and iteration).
//!
//! Thread-safety contract: a [`TableBuilder`] is owned by one thread; an open [`Table`] and the
//! [`BlockCache`] are `Send + Sync` and shared by `Arc`; iterators are owned by one thread and
//! keep what they read alive.
//!
//! Invariants: a table file is immutable once `TableBuilder::finish` returns; every on-disk
//! integer is fixed-width little-endian; every byte of the file is covered by a block checksum or
//! the footer checksum, so with `verify_checksums` any single-bit flip is reported as
//! `Error::Corruption` (naming the file and offset) instead of returning wrong data.
//!
//! # File layout
//!
//! docs/format.md, "`SSTable`", is the one description of the bytes (data blocks, filter,
//! properties, index, footer, block trailer) and of the checks on open; the constants in
//! [`format`](mod@format) and [`bloom`] mirror its offsets and sizes. The table format version
//! ([`format::FORMAT_VERSION`]) is stored in the footer and the properties block; docs/format.md,
//! "Changing the format", says when it must change.

pub mod block;
pub mod bloom;
pub mod builder;
pub mod cache;
pub mod fences;
pub mod format;
pub mod pinned;
pub mod properties;
pub mod reader;

#[cfg(test)]
mod tests;

#[cfg(any(test, feature = "testing"))]
pub use block::{Block, BlockBuilder, BlockOrigin};
pub use bloom::{BloomFilter, BloomFilterBuilder};
pub use builder::{TableBuilder, TableOptions};
pub use cache::BlockCache;
pub use format::Compression;
#[cfg(any(test, feature = "testing"))]
pub use format::{read_block, BlockHandle, Footer};
pub use reader::{Table, TableIterator};
