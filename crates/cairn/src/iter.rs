//! Iterators over internal keys, and the merging of many of them.
//!
//! Every sorted source (memtable, SSTable block, SSTable, level) exposes the same cursor
//! interface, [`InternalIterator`], over internal keys in the order of
//! [`crate::key::compare_internal_keys`]. The merging iterator combines them; the database
//! iterator (in `db`) collapses versions and hides tombstones.
//!
//! Thread-safety contract: an iterator is owned by one thread (`Send`, not `Sync`); it keeps
//! every structure it reads alive (by `Arc`), so it stays valid while the database changes.

use crate::error::Result;

/// A cursor over internal keys in ascending internal-key order.
///
/// Contract: `key`/`value` may be called only while `valid()`; moving an invalid iterator with
/// `next`/`prev` is a caller bug (debug-asserted). An iterator that meets an error becomes
/// invalid and reports the error from `status` until it is repositioned.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry.
    fn next(&mut self);
    /// Moves to the previous entry.
    fn prev(&mut self);
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
    /// The first error met since the last repositioning, if any.
    fn status(&self) -> Result<()>;
}
