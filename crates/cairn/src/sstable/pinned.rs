//! [`PinnedValue`]: a value read without copying it out of the table block that holds it.
//!
//! A point read that finds its value in an `SSTable` data block hands out the block itself
//! (one reference count on the cached block) and the value's byte range inside it, instead of
//! copying the value into a fresh `Vec`. The block is immutable and shared by `Arc`, so the
//! value stays readable for as long as the `PinnedValue` lives, whatever the database does
//! meanwhile: the block cache may evict the block (eviction drops the cache's reference, not
//! the reader's), a compaction may delete the table file (a copied block's bytes are in
//! memory; a block read in place from a mapped table holds the mapping, so the deleted file's
//! pages stay readable — the kernel may read them back from disk, and a media error then
//! stops the process with `SIGBUS`, see [`crate::TableReadMode`]), the database may be closed. A value found in the memory
//! component (write buffers) is copied once, since write buffers are recycled.
//!
//! Thread-safety contract: a `PinnedValue` is `Send + Sync` and immutable; cloning it takes
//! one reference count (or copies a value that came from memory).
//!
//! Invariants:
//! 1. `start <= end <= block.size_bytes()`: checked when the value is made, so `Deref`
//!    never panics and never reads outside the block.

use super::block::Block;
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// A value read without a copy: it holds the data block it lives in and dereferences to the
/// value's bytes. Returned by [`crate::Db::get_pinned`].
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// db.put("k", "a value read in place")?;
/// db.flush()?; // now in a table: the read pins the table's block instead of copying
/// let value = db.get_pinned("k")?.expect("present");
/// assert_eq!(&value[..], b"a value read in place");
/// assert_eq!(value.len(), 21);
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Clone)]
pub struct PinnedValue {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// Copied (a value from a write buffer).
    Owned(Vec<u8>),
    /// `block`'s bytes `range` (invariant 1).
    Block {
        block: Arc<Block>,
        range: Range<usize>,
    },
}

impl PinnedValue {
    /// A value that owns its bytes.
    pub(crate) fn owned(value: Vec<u8>) -> Self {
        PinnedValue {
            repr: Repr::Owned(value),
        }
    }

    /// Bytes `range` of `block`; `None` if the range is not inside the block (invariant 1).
    pub(crate) fn in_block(block: Arc<Block>, range: Range<usize>) -> Option<Self> {
        block.bytes(range.clone())?;
        Some(PinnedValue {
            repr: Repr::Block { block, range },
        })
    }

    /// The same value without its first `count` bytes (an expiry prefix); `None` if shorter.
    pub(crate) fn skip_front(self, count: usize) -> Option<Self> {
        match self.repr {
            Repr::Owned(mut value) => {
                value.drain(..count.min(value.len()));
                Some(PinnedValue::owned(value))
            }
            Repr::Block { block, range } => {
                let start = range.start.checked_add(count)?;
                (start <= range.end).then_some(PinnedValue {
                    repr: Repr::Block {
                        block,
                        range: start..range.end,
                    },
                })
            }
        }
    }

    /// True if the value holds a table block (it was read without a copy).
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// assert!(!db.get_pinned("k")?.expect("present").is_pinned()); // from a write buffer
    /// db.flush()?;
    /// assert!(db.get_pinned("k")?.expect("present").is_pinned()); // from a table block
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn is_pinned(&self) -> bool {
        matches!(self.repr, Repr::Block { .. })
    }

    /// The value as an owned `Vec` (a copy, unless the value was already owned).
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// let value: Vec<u8> = db.get_pinned("k")?.expect("present").into_vec();
    /// assert_eq!(value, b"v");
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn into_vec(self) -> Vec<u8> {
        match self.repr {
            Repr::Owned(value) => value,
            Repr::Block { .. } => self.to_vec(),
        }
    }
}

impl Deref for PinnedValue {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.repr {
            Repr::Owned(value) => value,
            // Invariant 1: the range was checked when the value was made.
            Repr::Block { block, range } => block.bytes(range.clone()).unwrap_or_default(),
        }
    }
}

impl AsRef<[u8]> for PinnedValue {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::borrow::Borrow<[u8]> for PinnedValue {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl PartialEq for PinnedValue {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for PinnedValue {}

impl PartialEq<[u8]> for PinnedValue {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for PinnedValue {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl PartialEq<Vec<u8>> for PinnedValue {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl fmt::Debug for PinnedValue {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("PinnedValue")
            .field("len", &self.len())
            .field("pinned", &self.is_pinned())
            .finish()
    }
}

impl From<PinnedValue> for Vec<u8> {
    fn from(value: PinnedValue) -> Self {
        value.into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sstable::block::{BlockBuilder, BlockOrigin};

    fn block() -> Arc<Block> {
        let mut builder = BlockBuilder::new(4);
        let key = crate::key::internal_key(b"k", 1, crate::key::ValueKind::Put);
        builder.add(&key, b"0123456789");
        Arc::new(Block::new(builder.finish(), BlockOrigin::detached()).unwrap())
    }

    #[test]
    fn a_range_outside_the_block_is_refused() {
        let block = block();
        let size = block.size_bytes();
        assert!(PinnedValue::in_block(Arc::clone(&block), 0..size).is_some());
        assert!(PinnedValue::in_block(Arc::clone(&block), 0..size + 1).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 3..2;
        assert!(PinnedValue::in_block(block, backwards).is_none());
    }

    #[test]
    fn skipping_a_prefix_keeps_the_rest_and_refuses_too_much() {
        let block = block();
        let size = block.size_bytes();
        let whole = PinnedValue::in_block(Arc::clone(&block), 2..6).unwrap();
        let expected = block.bytes(4..6).unwrap().to_vec();
        assert_eq!(whole.clone().skip_front(2).unwrap(), expected);
        assert!(whole.skip_front(5).is_none());
        let owned = PinnedValue::owned(b"abcdef".to_vec())
            .skip_front(2)
            .unwrap();
        assert_eq!(owned, b"cdef".to_vec());
        assert!(!owned.is_pinned());
        assert!(PinnedValue::in_block(block, size..size).unwrap().is_empty());
    }
}
